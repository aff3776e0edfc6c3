"""Sub-byte float function arguments and results as packed ``ui8`` storage:
``mxlower-pack-subbyte-args``' rewrites (jaxlib stack).

:func:`packed_type_of` gives the packed type of an f4/f6 tensor (docs/semantics.md section 8: a
little-endian, LSB-first bit stream along one axis); :func:`rewrite_function` retypes a
function's signature and puts ``mx.unpack`` / ``mx.pack`` at its boundary; :func:`rewrite_calls`
does the same around calls; :func:`fold` removes pack-of-unpack pairs, and
:func:`lower_pack_ops` lowers the rest to StableHLO.  Sub-byte types are those of
:mod:`mxlower.types` narrower than a byte, looked up when a function runs.
"""

from __future__ import annotations

from typing import Any

from mxlower.bindings import collect_ops
from mxlower.bindings.jaxlib import ir
from mxlower.dialect import mx
from mxlower.ir.stablehlo_builder import Builder
from mxlower.ir.typeconv import function_type
from mxlower.lowering.mx_math import lower_pack, lower_unpack
from mxlower.types import FLOAT_TYPES, is_subbyte_float

__all__ = ["fold", "is_public", "lower_pack_ops", "packed_type_of", "rewrite_calls",
           "rewrite_function"]


def packed_type_of(t: Any, axis: int = -1) -> Any | None:
    """The ``tensor<...xui8>`` packing ``t`` along ``axis``; None when ``t`` holds no sub-byte
    float (f4/f6, or one registered in :mod:`mxlower.types`); ValueError (saying why) when it
    cannot be packed."""
    elt = str(t)
    if is_subbyte_float(elt):
        raise ValueError("a scalar cannot be packed")
    if not isinstance(t, ir.RankedTensorType):
        if any(f"x{n}>" in elt for n in FLOAT_TYPES if is_subbyte_float(n)):
            raise ValueError("only ranked tensors can be packed")
        return None
    et = str(t.element_type)
    if not is_subbyte_float(et):
        return None
    shape = list(t.shape)
    if not shape:
        raise ValueError("a rank-0 tensor cannot be packed")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for rank {len(shape)}")
    ax = axis % len(shape)
    n, bits = shape[ax], FLOAT_TYPES[et].bits
    if ir.ShapedType.is_dynamic_size(n):
        raise ValueError(f"dimension {ax} is dynamic")
    if (n * bits) % 8:
        raise ValueError(f"{n} values of {et} ({bits} bits) along dimension {ax} do not fill "
                         f"whole bytes ({n * bits} bits)")
    shape[ax] = n * bits // 8
    return ir.RankedTensorType.get(shape, ir.IntegerType.get_unsigned(8, t.context),
                                   loc=ir.Location.unknown(t.context))


def is_public(f: Any) -> bool:
    """Whether a ``func.func`` is public (no ``sym_visibility``, or ``"public"``)."""
    attrs = f.attributes
    return "sym_visibility" not in attrs or str(attrs["sym_visibility"]).strip('"') == "public"


def rewrite_function(f: Any, args: dict[int, Any], results: dict[int, Any],
                     axis: int) -> list[Any]:
    """Give ``f`` the packed argument / result types ``args`` / ``results`` (by index): an
    ``mx.unpack`` after each packed argument, an ``mx.pack`` before each packed result.
    Returns the mx ops created."""
    created = []
    ftype = function_type(ir, f)
    block = f.regions[0].blocks[0]
    first = block.operations[0] if len(block.operations) else None
    for i in sorted(args):
        arg = block.arguments[i]
        elt = str(ir.RankedTensorType(arg.type).element_type)
        arg.set_type(args[i])
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(block)
        u = mx.unpack(arg, elt, axis=axis, loc=f.location, ip=ip)
        created.append(u)
        arg.replace_all_uses_except(u.results[0], u)
    if results:
        for region_block in f.regions[0].blocks:
            term = region_block.operations[len(region_block.operations) - 1]
            if term.operation.name != "func.return":
                continue
            for i in sorted(results):
                p = mx.pack(term.operands[i], axis=axis, loc=term.location,
                            ip=ir.InsertionPoint(term))
                created.append(p)
                term.operation.operands[i] = p.results[0]
    ins = [args.get(i, t) for i, t in enumerate(ftype.inputs)]
    outs = [results.get(i, t) for i, t in enumerate(ftype.results)]
    f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
    return created


def rewrite_calls(root: Any, changed: dict[str, tuple[dict, dict]], axis: int) -> list[Any]:
    """Pack the arguments and unpack the results of calls to rewritten functions (``changed``:
    name -> the ``args``, ``results`` given to :func:`rewrite_function`).  Returns the mx ops
    created."""
    calls = collect_ops(root, lambda o: o.name == "func.call" and ir.FlatSymbolRefAttr(
        o.attributes["callee"]).value in changed)
    created = []
    for c in calls:
        args, results = changed[ir.FlatSymbolRefAttr(c.attributes["callee"]).value]
        for i in sorted(args):
            v = c.operands[i]
            src = _unpacked_from(v, args[i])
            if src is not None:  # pack(unpack(p)) is p
                c.operands[i] = src
                continue
            p = mx.pack(v, axis=axis, loc=c.location, ip=ir.InsertionPoint(c))
            created.append(p)
            c.operands[i] = p.results[0]
        after = c.block.operations
        nxt = None
        for k in range(len(after)):
            if after[k].operation == c and k + 1 < len(after):
                nxt = after[k + 1]
        for i in sorted(results):
            r = c.results[i]
            elt = str(ir.RankedTensorType(r.type).element_type)
            r.set_type(results[i])
            ip = ir.InsertionPoint(nxt) if nxt is not None else ir.InsertionPoint(c.block)
            u = mx.unpack(r, elt, axis=axis, loc=c.location, ip=ip)
            created.append(u)
            r.replace_all_uses_except(u.results[0], u)
    return created


def _unpacked_from(v: Any, packed_type: Any) -> Any | None:
    """``p`` when ``v`` is ``mx.unpack(p)`` of the same packed type (so packing ``v`` again
    along the same axis gives ``p``)."""
    owner = v.owner
    op = getattr(owner, "operation", None)
    if op is None or op.name != "mx.unpack" or op.operands[0].type != packed_type:
        return None
    return op.operands[0]


def fold(ops: list[Any]) -> list[Any]:
    """pack(unpack(p)) -> p; then drop unpacks left without uses.  The ops still alive."""
    alive = []
    for op in ops:
        if op.name == "mx.pack":
            src = _unpacked_from(op.operands[0], op.results[0].type)
            if src is not None:
                op.results[0].replace_all_uses_with(src)
                op.erase()
                continue
        alive.append(op)
    out = []
    for op in alive:
        if op.name == "mx.unpack" and not any(True for _ in op.results[0].uses):
            op.erase()
            continue
        out.append(op)
    return out


def lower_pack_ops(ops: list[Any]) -> None:
    """mx.pack / mx.unpack -> StableHLO (mxlower-decompose-mx's lowering)."""
    for op in ops:
        spec = mx.parse(op)
        b = Builder(op.location, ir.InsertionPoint(op))
        new = lower_pack(b, spec) if isinstance(spec, mx.PackOp) else lower_unpack(b, spec)
        op.results[0].replace_all_uses_with(new)
        op.erase()
