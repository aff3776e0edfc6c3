"""``mxlower-pack-subbyte-args``: f4/f6 function arguments and results as packed ui8 storage."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.formats import FLOAT_TYPES
from mxlower.passes.base import ModulePass, option

__all__ = ["PackSubbyteArgs", "SUBBYTE_TYPES", "packed_type_of"]

#: the element types narrower than a byte (MLIR spelling -> bits)
SUBBYTE_TYPES = {name: t.bits for name, t in FLOAT_TYPES.items() if t.bits < 8}


@dataclasses.dataclass(frozen=True)
class PackSubbyteArgs(ModulePass):
    """Store f4/f6 function arguments and results packed in ui8 (two f4, or four f6 per 3 bytes).

    Every ``tensor<...xf4E2M1FN>``, ``tensor<...xf6E2M3FN>`` and ``tensor<...xf6E3M2FN>``
    argument and result of the rewritten functions becomes the ``tensor<...xui8>`` of its
    packed bits along ``axis`` -- MX-SEMANTICS section 8: a little-endian, LSB-first bit
    stream, the first f4 element in the low nibble, four f6 values in three bytes -- so the
    module's interface holds the real 4- and 6-bit memory footprint.  The body is unchanged: an
    ``mx.unpack`` after each packed argument and an ``mx.pack`` before each packed result (and
    around calls of rewritten functions), lowered at once to StableHLO shifts and masks by
    ``mxlower-decompose-mx``'s pack/unpack lowering (``lower=false`` leaves the mx ops).  A
    packed dimension whose length does not fill whole bytes (an odd f4 count, an f6 count not
    a multiple of 4), a dynamic one, or a rank-0 value is an error at the function.

    Before::

        func.func @main(%x: tensor<4x64xf4E2M1FN>) -> tensor<4x64xf6E2M3FN> { ... }

    After::

        func.func @main(%arg0: tensor<4x32xui8>) -> tensor<4x48xui8> {
          %0 = <unpack: shifts and masks> : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
          ...
          %9 = <pack> : (tensor<4x64xf6E2M3FN>) -> tensor<4x48xui8>
          return %9 : tensor<4x48xui8>
        }

    Example::

        mxlower-opt m.mlir --mxlower-pack-subbyte-args='axis=-1 functions=main'
    """

    name: ClassVar[str] = "mxlower-pack-subbyte-args"
    axis: int = option(-1, "dimension packed along (negative: counted from the last)")
    functions: tuple[str, ...] = option((), "functions to rewrite (default: every public "
                                        "function with a body); their callers are updated")
    lower: bool = option(True, "lower the inserted mx.pack/mx.unpack to StableHLO at once "
                         "(false: leave them for mxlower-decompose-mx)")

    def run(self, op: Any) -> None:
        with op.location:
            self._run(op)

    def _run(self, op: Any) -> None:
        from mxlower.bindings.jaxlib import ir

        funcs = {}
        for o in op.regions[0].blocks[0].operations:
            o = o.operation
            if o.name == "func.func":
                funcs[ir.StringAttr(o.attributes["sym_name"]).value] = o
        unknown = [f for f in self.functions if f not in funcs]
        if unknown:
            raise diag.error(op, f"'{self.name}': no function named "
                             f"{', '.join(repr(u) for u in unknown)} in the module")
        chosen = [f for name, f in funcs.items()
                  if (name in self.functions if self.functions else _is_public(f))
                  and f.regions[0].blocks]
        created: list[Any] = []
        changed: dict[str, tuple[dict[int, Any], dict[int, Any]]] = {}
        failures = []
        for f in chosen:
            try:
                plan = self._plan(f)
            except diag.PassFailure as e:
                failures.append(e)
                continue
            if plan[0] or plan[1]:
                changed[ir.StringAttr(f.attributes["sym_name"]).value] = plan
                created += _rewrite_function(f, *plan, self.axis)
        if failures:
            raise failures[0]
        if changed:
            created += _rewrite_calls(op, changed, self.axis)
        created = _fold(created)
        if self.lower:
            _lower_pack_ops(created)

    def _plan(self, f: Any) -> tuple[dict[int, Any], dict[int, Any]]:
        """({arg index: packed type}, {result index: packed type}) of a function."""
        from mxlower.bindings.jaxlib import ir

        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        out: list[dict[int, Any]] = [{}, {}]
        for k, (kind, types) in enumerate((("argument", ftype.inputs),
                                           ("result", ftype.results))):
            for i, t in enumerate(types):
                try:
                    p = packed_type_of(t, self.axis)
                except ValueError as e:
                    raise diag.error(f, f"cannot pack {kind} {i} of @"
                                     f"{ir.StringAttr(f.attributes['sym_name']).value} ({t}): "
                                     f"{e}") from None
                if p is not None:
                    out[k][i] = p
        return out[0], out[1]


def packed_type_of(t: Any, axis: int = -1) -> Any | None:
    """The ``tensor<...xui8>`` packing ``t`` along ``axis``; None when ``t`` holds no f4/f6;
    ValueError (saying why) when it cannot be packed."""
    from mxlower.bindings.jaxlib import ir

    elt = str(t)
    if elt in SUBBYTE_TYPES:
        raise ValueError("a scalar cannot be packed")
    if not isinstance(t, ir.RankedTensorType):
        if any(f"x{n}>" in elt for n in SUBBYTE_TYPES):
            raise ValueError("only ranked tensors can be packed")
        return None
    et = str(t.element_type)
    if et not in SUBBYTE_TYPES:
        return None
    shape = list(t.shape)
    if not shape:
        raise ValueError("a rank-0 tensor cannot be packed")
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"axis {axis} is out of range for rank {len(shape)}")
    ax = axis % len(shape)
    n, bits = shape[ax], SUBBYTE_TYPES[et]
    if ir.ShapedType.is_dynamic_size(n):
        raise ValueError(f"dimension {ax} is dynamic")
    if (n * bits) % 8:
        raise ValueError(f"{n} values of {et} ({bits} bits) along dimension {ax} do not fill "
                         f"whole bytes ({n * bits} bits)")
    shape[ax] = n * bits // 8
    return ir.RankedTensorType.get(shape, ir.IntegerType.get_unsigned(8, t.context),
                                   loc=ir.Location.unknown(t.context))


def _is_public(f: Any) -> bool:
    attrs = f.attributes
    return "sym_visibility" not in attrs or str(attrs["sym_visibility"]).strip('"') == "public"


def _unpack(value: Any, elt: str, axis: int, loc: Any, ip: Any) -> Any:
    from mxlower.dialect import mx

    return mx.unpack(value, elt, axis=axis, loc=loc, ip=ip)


def _pack(value: Any, axis: int, loc: Any, ip: Any) -> Any:
    from mxlower.dialect import mx

    return mx.pack(value, axis=axis, loc=loc, ip=ip)


def _rewrite_function(f: Any, args: dict[int, Any], results: dict[int, Any],
                      axis: int) -> list[Any]:
    from mxlower.bindings.jaxlib import ir

    created = []
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    block = f.regions[0].blocks[0]
    first = block.operations[0] if len(block.operations) else None
    for i in sorted(args):
        arg = block.arguments[i]
        elt = str(ir.RankedTensorType(arg.type).element_type)
        arg.set_type(args[i])
        ip = ir.InsertionPoint(first) if first is not None else ir.InsertionPoint(block)
        u = _unpack(arg, elt, axis, f.location, ip)
        created.append(u)
        arg.replace_all_uses_except(u.results[0], u)
    if results:
        for region_block in f.regions[0].blocks:
            term = region_block.operations[len(region_block.operations) - 1]
            if term.operation.name != "func.return":
                continue
            for i in sorted(results):
                p = _pack(term.operands[i], axis, term.location, ir.InsertionPoint(term))
                created.append(p)
                term.operation.operands[i] = p.results[0]
    ins = [args.get(i, t) for i, t in enumerate(ftype.inputs)]
    outs = [results.get(i, t) for i, t in enumerate(ftype.results)]
    f.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, outs))
    return created


def _rewrite_calls(root: Any, changed: dict[str, tuple[dict, dict]], axis: int) -> list[Any]:
    """Pack the arguments and unpack the results of calls to rewritten functions."""
    from mxlower.bindings.jaxlib import ir

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
            p = _pack(v, axis, c.location, ir.InsertionPoint(c))
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
            u = _unpack(r, elt, axis, c.location, ip)
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


def _fold(ops: list[Any]) -> list[Any]:
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


def _lower_pack_ops(ops: list[Any]) -> None:
    """mx.pack / mx.unpack -> StableHLO (mxlower-decompose-mx's lowering)."""
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx
    from mxlower.lowering.mx_math import lower_pack, lower_unpack
    from mxlower.stablehlo_builders import Builder

    for op in ops:
        spec = mx.parse(op)
        b = Builder(op.location, ir.InsertionPoint(op))
        new = lower_pack(b, spec) if isinstance(spec, mx.PackOp) else lower_unpack(b, spec)
        op.results[0].replace_all_uses_with(new)
        op.erase()
