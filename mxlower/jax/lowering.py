"""Lowering the mxlower.jax primitives: build ``mx`` ops, run mxlower's pipeline, inline.

A primitive's lowering rule (the same for every platform) calls :func:`emit` with a builder.
:func:`emit` creates, in JAX's own MLIR context and at the current location (the user's source
line, which JAX has set), a temporary module holding one function whose arguments have the
operands' MLIR types and whose body the builder fills with ``mx`` ops.  mxlower's
``mxlower-mx-to-stablehlo`` pipeline (plus ``mxlower-expand-narrow-floats`` for the f6 types,
which XLA does not have) runs on that module through :func:`mxlower.pipeline.manager.run_pipeline`,
exactly as ``mxlower-opt`` would run it, and the resulting plain StableHLO is moved into JAX's
function at the insertion point, the function's arguments replaced by the operands.  No ``mx``
op and no custom call reaches XLA, so the lowering compiles on every backend and produces the
same StableHLO for cpu, cuda and rocm.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from mxlower.bindings.jaxlib import func, ir, make_context, stablehlo
from mxlower.diagnostics import PassFailure
from mxlower.formats import FLOAT_TYPES
from mxlower.jax.dtypes import held_as_codes
from mxlower.pipeline.manager import run_pipeline

__all__ = ["LoweringError", "emit", "tensor_type"]


class LoweringError(RuntimeError):
    """mxlower's pipeline rejected IR built by mxlower.jax (a bug: arguments are checked at
    trace time); the message carries the pipeline's diagnostics."""


@functools.cache
def _registered() -> None:
    # registers StableHLO's passes with jaxlib's MLIR (process-wide) before the first pipeline
    make_context()


def tensor_type(shape: Sequence[Any], element: str) -> Any:
    """The tensor type of a JAX shape; a symbolic dimension (``jax.export``'s shape
    polymorphism) is a dynamic one, which mxlower's pipeline keeps dynamic and JAX's shape
    refinement makes static when the export is called."""

    def size(d: Any) -> int:
        try:
            return operator.index(d)
        except TypeError:
            return ir.ShapedType.get_dynamic_size()

    return ir.RankedTensorType.get([size(d) for d in shape], ir.Type.parse(element))


#: Which narrow float types the kernels expand into integer code (mxlower-expand-narrow-floats)
#: instead of leaving their conversions to XLA: "all" (default) or "f6" (only the f6 types,
#: which XLA lacks).  Both are bit-exact.  "all" is the default because XLA:CPU's own
#: conversions are slow (f32 -> f4E2M1FN ~20-40x, f32 -> f8 ~3-4x slower than the generated
#: integer code; see BENCHMARKS.md); it is the same text for every platform.  Exception: a
#: 4-bit type a kernel *takes* (f4 elements of dequantize / scaled_dot) stays native, because
#: turning JAX's f4 array into codes needs a ``bitcast_convert`` f4 -> ui4, which XLA:CPU
#: miscompiles inside loop bodies (jax 0.10.2: "Invalid bitcast i8 to i4", e.g. under
#: ``lax.map``).  Producing f4 (ui4 -> f4) compiles fine.
EXPAND_NARROW_FLOATS = "all"


def _expanded(arg_elements: Sequence[str], result_elements: Sequence[str]) -> list[str]:
    narrow = {t for t in list(arg_elements) + list(result_elements) if t in FLOAT_TYPES}
    if not narrow:
        return []
    if EXPAND_NARROW_FLOATS == "all":
        taken4 = {t for t in arg_elements if t in FLOAT_TYPES and FLOAT_TYPES[t].bits == 4}
        return sorted(set(FLOAT_TYPES) - taken4)
    if EXPAND_NARROW_FLOATS == "f6":
        return sorted(t for t in narrow if held_as_codes(t))
    raise ValueError(f"EXPAND_NARROW_FLOATS must be 'all' or 'f6', got {EXPAND_NARROW_FLOATS!r}")


def _pipeline(expand: Sequence[str]) -> str:
    extra = f", mxlower-expand-narrow-floats{{types={','.join(expand)}}}" if expand else ""
    return f"builtin.module(mxlower-mx-to-stablehlo{extra})"


def _element(t: Any) -> str:
    return str(ir.RankedTensorType(t).element_type)


def _retyped(t: Any, element: str) -> Any:
    return ir.RankedTensorType.get(list(ir.RankedTensorType(t).shape), ir.Type.parse(element))


def _to_codes(v: Any, want: Any) -> Any:
    """A JAX value of a narrow type (held natively) as the ui8 codes an expanded kernel takes."""
    elt = _element(v.type)
    if elt == _element(want) or elt not in FLOAT_TYPES:
        return v
    if FLOAT_TYPES[elt].bits == 4:
        v = stablehlo.BitcastConvertOp(_retyped(v.type, "ui4"), v).result
        return stablehlo.ConvertOp(want, v).result
    return stablehlo.BitcastConvertOp(want, v).result


def _from_codes(v: Any, want: Any) -> Any:
    """ui8 codes from an expanded kernel as the narrow type JAX holds natively."""
    elt = _element(want)
    if elt == _element(v.type) or elt not in FLOAT_TYPES:
        return v
    if FLOAT_TYPES[elt].bits == 4:
        v = stablehlo.ConvertOp(_retyped(v.type, "ui4"), v).result
    return stablehlo.BitcastConvertOp(want, v).result


def emit(build: Callable[[list[Any]], Sequence[Any]], operands: Sequence[Any],
         arg_types: Sequence[Any], result_types: Sequence[Any]) -> list[Any]:
    """Lower ``build``'s mx ops to StableHLO inline at the current insertion point.

    ``operands``: JAX's IR values.  ``arg_types``: the MLIR types the mx ops take for them
    (differs from the operand's type only for f6 elements, which JAX holds as ui8 codes).
    ``build(args)`` emits mx ops on the function arguments and returns the values to return
    (of ``result_types``, again with f6 where JAX expects ui8).  Returns the replacement values,
    of JAX's types (narrow types JAX holds natively are bitcast back from the expanded codes).
    """
    _registered()
    ctx = ir.Context.current
    loc = ir.Location.current
    expand = _expanded([_element(t) for t in arg_types], [_element(t) for t in result_types])
    prev = ctx.allow_unregistered_dialects
    ctx.allow_unregistered_dialects = True  # mx ops are unregistered ops
    try:
        module = ir.Module.create(loc=loc)
        with ir.InsertionPoint(module.body), loc:
            fn = func.FuncOp("mxlower_jax_kernel", ir.FunctionType.get(list(arg_types),
                                                                      list(result_types)))
            block = fn.add_entry_block()
        with ir.InsertionPoint(block), loc:
            results = list(build(list(block.arguments)))
            func.ReturnOp(results)
        try:
            run_pipeline(module.operation, _pipeline(expand), ctx=ctx)
        except PassFailure as exc:
            diags = getattr(exc, "diagnostics", [])
            text = "; ".join(d.format() for d in diags) or str(exc)
            raise LoweringError(f"mxlower pipeline failed on mxlower.jax IR: {text}") from None
    finally:
        ctx.allow_unregistered_dialects = prev
    fn = module.body.operations[0]
    block = fn.regions[0].blocks[0]
    ip = ir.InsertionPoint.current
    with ip, loc:
        for arg, value in zip(block.arguments, operands):
            value = _to_codes(value, arg.type)
            if str(arg.type) != str(value.type):
                raise LoweringError(f"mxlower.jax kernel takes {arg.type} where JAX has "
                                    f"{value.type}")
            arg.replace_all_uses_with(value)
    ops = list(block.operations)
    for op in ops[:-1]:
        op.detach_from_parent()
        ip.insert(op)
    with ip, loc:
        outs = []
        for value, jax_type in zip(ops[-1].operands, _jax_result_types(result_types)):
            outs.append(_from_codes(value, jax_type))
    return outs


def _jax_result_types(result_types: Sequence[Any]) -> list[Any]:
    """The types JAX expects: f6 results as ui8 codes, everything else unchanged."""
    return [_retyped(t, "ui8") if held_as_codes(_element(t)) else t for t in result_types]
