"""Lowering the mxlower.jax primitives: build ``mx`` ops, run mxlower's pipeline, inline.

A primitive's lowering rule (the same for every platform) calls :func:`emit` with a builder.
:func:`emit` creates, in JAX's own MLIR context and at the current location (the user's source
line, which JAX has set), a temporary module holding one function whose arguments have the
operands' MLIR types and whose body the builder fills with ``mx`` ops.  mxlower's
``mxlower-mx-to-stablehlo`` pipeline (plus ``mxlower-expand-narrow-floats`` for the f6 types,
which XLA does not have) runs on that module through :func:`mxlower.passes.manager.run_pipeline`,
exactly as ``mxlower-opt`` would run it, and the resulting plain StableHLO is moved into JAX's
function at the insertion point, the function's arguments replaced by the operands.  No ``mx``
op and no custom call reaches XLA, so the lowering compiles on every backend and produces the
same StableHLO for cpu, cuda and rocm.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from mxlower.formats import FLOAT_TYPES

__all__ = ["LoweringError", "emit", "tensor_type"]

_F6 = ("f6E2M3FN", "f6E3M2FN")


class LoweringError(RuntimeError):
    """mxlower's pipeline rejected IR built by mxlower.jax (a bug: arguments are checked at
    trace time); the message carries the pipeline's diagnostics."""


@functools.cache
def _registered() -> None:
    # registers StableHLO's passes with jaxlib's MLIR (process-wide) before the first pipeline
    from mxlower.bindings.jaxlib import make_context

    make_context()


def tensor_type(shape: Sequence[int], element: str) -> Any:
    from mxlower.bindings.jaxlib import ir

    return ir.RankedTensorType.get(list(shape), ir.Type.parse(element))


def _pipeline(types: Sequence[str]) -> str:
    f6 = sorted({t for t in types if t in _F6})
    extra = f", mxlower-expand-narrow-floats{{types={','.join(f6)}}}" if f6 else ""
    return f"builtin.module(mxlower-mx-to-stablehlo{extra})"


def _element(t: Any) -> str:
    from mxlower.bindings.jaxlib import ir

    return str(ir.RankedTensorType(t).element_type)


def emit(build: Callable[[list[Any]], Sequence[Any]], operands: Sequence[Any],
         arg_types: Sequence[Any], result_types: Sequence[Any]) -> list[Any]:
    """Lower ``build``'s mx ops to StableHLO inline at the current insertion point.

    ``operands``: JAX's IR values.  ``arg_types``: the MLIR types the mx ops take for them
    (differs from the operand's type only for f6 elements, which JAX holds as ui8 codes).
    ``build(args)`` emits mx ops on the function arguments and returns the values to return
    (of ``result_types``, again with f6 where JAX expects ui8).  Returns the replacement values.
    """
    from mxlower.bindings.jaxlib import func, ir
    from mxlower.diagnostics import PassFailure
    from mxlower.passes.manager import run_pipeline

    _registered()
    ctx = ir.Context.current
    loc = ir.Location.current
    narrow = [_element(t) for t in list(arg_types) + list(result_types)]
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
            run_pipeline(module.operation, _pipeline(narrow), ctx=ctx)
        except PassFailure as exc:
            diags = getattr(exc, "diagnostics", [])
            text = "; ".join(d.format() for d in diags) or str(exc)
            raise LoweringError(f"mxlower pipeline failed on mxlower.jax IR: {text}") from None
    finally:
        ctx.allow_unregistered_dialects = prev
    fn = module.body.operations[0]
    block = fn.regions[0].blocks[0]
    for arg, value in zip(block.arguments, operands):
        if str(arg.type) != str(value.type):
            raise LoweringError(f"mxlower.jax kernel takes {arg.type} where JAX has {value.type}")
        arg.replace_all_uses_with(value)
    ops = list(block.operations)
    outs = list(ops[-1].operands)
    ip = ir.InsertionPoint.current
    for op in ops[:-1]:
        op.detach_from_parent()
        ip.insert(op)
    return outs


def is_narrow(element: str) -> bool:
    return element in FLOAT_TYPES
