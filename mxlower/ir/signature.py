"""Function signatures, read from a module of either MLIR binding stack.

The one reader behind ``mxlower-run``, :func:`mxlower.execution.run.run_module` and the LLVM
engine: every argument and result of a ``func.func`` as a :class:`TensorSpec` (element type
spelling, shape with None for a dynamic dimension, the type as written), whose NumPy dtype
comes from :mod:`mxlower.types`::

    sigs = public_signatures(module_op)        # {name: Signature} of public funcs with a body
    sigs["main"].args[0].dtype                  # dtype('float32')
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mxlower import types

__all__ = ["Signature", "TensorSpec", "UnsupportedType", "functions", "is_public",
           "public_signatures", "read_signature", "spec_of", "tensor_type"]


class UnsupportedType(ValueError):
    """An element type with no NumPy equivalent in :mod:`mxlower.types`."""


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One argument or result.

    ``shape`` is None for a scalar -- and for a type that is neither a ranked tensor or memref
    nor a scalar of the type table (``element`` is then the whole type, which has no dtype).
    """

    element: str
    shape: tuple[int | None, ...] | None
    type: str = ""  #: the MLIR type as written, e.g. ``tensor<?x4xf32>``

    @property
    def dtype(self) -> np.dtype:
        """The NumPy / ml_dtypes dtype of one element; :class:`UnsupportedType` if none."""
        t = types.SCALARS.get(self.element)
        if t is None:
            raise UnsupportedType(f"element type '{self.element}' has no NumPy equivalent here")
        return t.dtype

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    @property
    def is_tensor(self) -> bool:
        """A ranked tensor (what XLA and the interpreter exchange)."""
        return self.shape is not None and self.type.startswith("tensor<")

    @property
    def is_dynamic(self) -> bool:
        return self.shape is not None and None in self.shape

    def tensor_type(self, shape: tuple[int | None, ...] | None = None) -> str:
        """``tensor<...>`` of this element type at ``shape`` (default: this spec's shape)."""
        return tensor_type(self.shape if shape is None else shape, self.element)

    def __str__(self) -> str:
        """The form the compiled code takes: memrefs for arrays (the LLVM engine's ABI)."""
        if self.shape is None:
            return self.element
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"memref<{dims + 'x' if dims else ''}{self.element}>"


def tensor_type(shape: tuple[int | None, ...], element: str) -> str:
    """``tensor<2x?xf32>`` for ``((2, None), "f32")``."""
    return "tensor<" + "".join("?x" if d is None else f"{d}x" for d in shape) + element + ">"


@dataclasses.dataclass(frozen=True)
class Signature:
    """A function's arguments and results (after lowering with out-params: appended args)."""

    name: str
    args: tuple[TensorSpec, ...]
    results: tuple[TensorSpec, ...]
    n_out_params: int = 0  #: trailing args that are out-parameters

    def with_out_params(self) -> Signature:
        """Array results moved to trailing arguments (what out-params lowering does)."""
        moved = tuple(r for r in self.results if not r.is_scalar)
        return Signature(self.name, self.args + moved,
                         tuple(r for r in self.results if r.is_scalar), len(moved))

    def __str__(self) -> str:
        return (f"@{self.name}({', '.join(map(str, self.args))}) -> "
                f"({', '.join(map(str, self.results))})")


def spec_of(t: Any) -> TensorSpec:
    """The spec of one MLIR type (either stack): a tensor or memref type is an array; anything
    else a scalar (a type without a NumPy equivalent, e.g. a vector, fails at ``.dtype``)."""
    text = str(t)
    if text.startswith(("tensor<", "memref<")):
        shape = getattr(t, "shape", None) if getattr(t, "has_rank", True) else None
        if shape is None:
            return TensorSpec(text, None, text)  # unranked: not callable
        return TensorSpec(str(t.element_type), tuple(None if d < 0 else int(d) for d in shape),
                          text)
    return TensorSpec(text, None, text)


def _name(op: Any) -> str:
    attr = op.attributes["sym_name"]
    value = getattr(attr, "value", None)  # a StringAttr (both stacks downcast it)
    return value if isinstance(value, str) else str(attr).strip('"')


def functions(module_op: Any) -> dict[str, Any]:
    """The top-level ``func.func`` operations of a module, by name, in order."""
    out = {}
    for op in module_op.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func":
            out[_name(op)] = op
    return out


def read_signature(func_op: Any) -> Signature:
    """The signature of one ``func.func`` (either stack)."""
    ftype = func_op.attributes["function_type"].value
    return Signature(_name(func_op), tuple(spec_of(t) for t in ftype.inputs),
                     tuple(spec_of(t) for t in ftype.results))


def is_public(func_op: Any) -> bool:
    attrs = func_op.attributes
    return "sym_visibility" not in attrs or str(attrs["sym_visibility"]).strip('"') == "public"


def public_signatures(module_op: Any) -> dict[str, Signature]:
    """The signatures of the public functions with a body: the ones a caller can run."""
    return {name: read_signature(op) for name, op in functions(module_op).items()
            if op.regions[0].blocks and is_public(op)}
