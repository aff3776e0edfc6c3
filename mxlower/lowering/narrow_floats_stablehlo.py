"""``mxlower-expand-narrow-floats``' recipes on jaxlib's stack: which StableHLO ops on narrow
floats can be expanded, narrow tensor types as ``ui8`` codes, and the rewrites of
``stablehlo.convert`` (the codec's integer ops), ``stablehlo.constant`` (its codes) and
``stablehlo.bitcast_convert``.  The narrow types are looked up in :mod:`mxlower.types` when the
rewrite runs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.ir.literals import dense_body, element_codes
from mxlower.ir.typeconv import (element_type, function_type, map_function_type, retype_op,
                                 with_element_type)
import mxlower.lowering.codec as codec
from mxlower.lowering.codec_stablehlo import StableHLOBuilder
from mxlower.lowering.narrow_floats import emit_conversion
from mxlower.types import FLOAT_TYPES, is_wide_float

__all__ = ["DATA_MOVEMENT", "StableHLOExpansion"]


#: StableHLO ops that only move, select or route elements: their narrow results are retyped
DATA_MOVEMENT = frozenset({
    "stablehlo.reshape", "stablehlo.broadcast_in_dim", "stablehlo.broadcast",
    "stablehlo.transpose", "stablehlo.slice", "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice", "stablehlo.real_dynamic_slice", "stablehlo.concatenate",
    "stablehlo.pad", "stablehlo.dynamic_pad", "stablehlo.select", "stablehlo.gather",
    "stablehlo.dynamic_gather", "stablehlo.reverse", "stablehlo.dynamic_reshape",
    "stablehlo.dynamic_broadcast_in_dim", "stablehlo.tuple", "stablehlo.get_tuple_element",
    "stablehlo.optimization_barrier", "stablehlo.get_dimension_size",
    "stablehlo.while", "stablehlo.if", "stablehlo.case", "stablehlo.return",
    "func.return", "func.call",
})


class StableHLOExpansion:
    """Narrow floats of the ``selected`` types on StableHLO as ``ui8`` codes and integer ops.

    :meth:`touches` finds the ops with such values, :meth:`problem` says why one cannot be
    expanded (None when it can), :meth:`retype` moves an op's values to ``ui8``, and the
    ``rewrite_*`` methods replace a constant, convert or bitcast_convert (after :meth:`retype`
    ran on every other op).  Create under the context of the IR."""

    def __init__(self, selected: frozenset[str]):
        self.selected = selected

    # ------------------------------------------------------------------------- types
    def narrow(self, t: Any) -> str | None:
        """The selected narrow type ``t`` is, else None."""
        s = str(t)
        return s if s in self.selected else None

    def elem(self, t: Any) -> Any:
        return element_type(ir, t)

    def convert_type(self, t: Any) -> Any | None:
        """``t`` with selected narrow types replaced by ui8; None when unchanged."""
        u8 = ir.IntegerType.get_unsigned(8)
        if self.narrow(t):
            return u8
        if isinstance(t, (ir.RankedTensorType, ir.UnrankedTensorType)):
            return with_element_type(ir, t, u8) if self.narrow(t.element_type) else None
        if not isinstance(t, ir.TupleType):
            return None
        parts = [t.get_type(i) for i in range(t.num_types)]
        new = [self.convert_type(p) for p in parts]
        if all(n is None for n in new):
            return None
        return ir.TupleType.get_tuple([n or p for n, p in zip(new, parts)])

    def value_types(self, op: Any) -> list[Any]:
        """The types of an op's operands, results and block arguments."""
        return ([v.type for v in op.operands] + [r.type for r in op.results]
                + [a.type for r in op.regions for b in r.blocks for a in b.arguments])

    def touches(self, op: Any) -> bool:
        """Whether ``op`` has a value (or, for a function, a signature) of a selected type."""
        types = self.value_types(op)
        if op.name == "func.func":
            ft = function_type(ir, op)
            types += list(ft.inputs) + list(ft.results)
        return any(self.convert_type(t) is not None for t in types)

    # ------------------------------------------------------------------------- checks
    def problem(self, op: Any) -> str | None:
        """Why ``op`` (which :meth:`touches` narrow values) cannot be expanded, or None."""
        name = op.name
        if name in DATA_MOVEMENT or name == "func.func":
            return None
        if name == "stablehlo.constant":
            try:
                self.constant_codes(op)
            except ValueError as exc:
                return f"constant cannot be expanded: {exc}"
            return None
        if name == "stablehlo.convert":
            return self.convert_problem(op)
        if name == "stablehlo.bitcast_convert":
            a, b = self.elem(op.operands[0].type), self.elem(op.results[0].type)
            na, nb = self.narrow(a), self.narrow(b)
            n = na or nb
            other = b if na else a
            if (not (na and nb) and FLOAT_TYPES[n].bits != 8
                    and self._width("IntegerType", other) != FLOAT_TYPES[n].bits):
                return (f"bitcast_convert between {a} and {b} cannot be expanded: {n} codes are "
                        "stored one per ui8, so a sub-byte type bitcasts only to another "
                        "expanded narrow type of its width or to an integer of its width")
            return None
        offending = next(str(self.elem(t)) for t in self.value_types(op)
                         if self.convert_type(t) is not None)
        return (f"'{name}' on {offending} cannot be expanded: mxlower-expand-narrow-floats "
                "supports only conversions, constants and data movement of narrow floats")

    def _sub_byte_int(self, t: Any) -> bool:
        """Whether ``t`` is an integer type narrower than a byte (i4, ui4, i2...)."""
        return (self._width("IntegerType", t) or 8) < 8

    def _width(self, cls: str, t: Any) -> int | None:
        try:
            return getattr(ir, cls)(t).width
        except ValueError:
            return None

    def convert_problem(self, op: Any) -> str | None:
        s, d = self.elem(op.operands[0].type), self.elem(op.results[0].type)
        ns, nd = self.narrow(s), self.narrow(d)
        if ns:
            if (nd or is_wide_float(str(d)) or self._width("FloatType", d)
                    or self._width("IntegerType", d) is not None):
                return None
            return f"convert from {ns} to {d} cannot be expanded: unsupported result type"
        # nd is set: the source is not a selected narrow type
        if is_wide_float(str(s)):
            return None
        fw, iw = self._width("FloatType", s), self._width("IntegerType", s)
        if fw is not None:
            if fw < 32:
                return None
            return f"convert from {s} to {nd} cannot be expanded: unsupported operand type"
        if iw is not None:
            if iw <= 24 or FLOAT_TYPES[nd].max < 2.0 ** 24:
                return None
            return (f"convert from {s} to {nd} cannot be expanded: {s} values above 2^24 "
                    "would round twice (through f32)")
        return f"convert from {s} to {nd} cannot be expanded: unsupported operand type"

    # ------------------------------------------------------------------------- rewrites
    def retype(self, op: Any) -> None:
        """Selected narrow types in ``op``'s results, block arguments and (for a function)
        signature become ui8."""
        retype_op(op, self.convert_type,
                  self._map_signature if op.name == "func.func" else _keep)

    def _map_signature(self, a: Any) -> Any | None:
        if isinstance(a, ir.TypeAttr) and isinstance(a.value, ir.FunctionType):
            t = map_function_type(ir, a.value, self.convert_type)
            return None if t is None else ir.TypeAttr.get(t)
        return None

    def constant_codes(self, op: Any) -> np.ndarray:
        """The codes of a ``stablehlo.constant`` of a narrow type, in its shape."""
        t = ir.RankedTensorType(op.results[0].type)
        text = str(op.attributes["value"])
        if not text.startswith("dense<"):
            raise ValueError(f"unsupported constant attribute kind: {text.split('<', 1)[0]}")
        n = int(np.prod(t.shape, dtype=np.int64))
        return element_codes(dense_body(text), str(t.element_type), n).reshape(t.shape)

    def rewrite_constant(self, op: Any) -> None:
        codes = self.constant_codes(op)
        nt = self.convert_type(op.results[0].type)
        if codes.size and (codes == codes.flat[0]).all():
            attr = ir.DenseElementsAttr.get_splat(
                nt, ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), int(codes.flat[0])))
        else:
            attr = ir.DenseElementsAttr.get(np.ascontiguousarray(codes), type=nt)
        with ir.InsertionPoint(op), op.location:
            new = stablehlo.ConstantOp(attr).result
        op.results[0].replace_all_uses_with(new)
        op.erase()

    def rewrite_convert(self, op: Any, s: Any, d: Any) -> None:
        """``op`` converted from element type ``s`` to ``d`` (its types before retyping)."""
        x = op.operands[0]
        shape = ir.RankedTensorType(x.type).shape
        ns, nd = self.narrow(s), self.narrow(d)
        with ir.InsertionPoint(op), op.location:
            b = StableHLOBuilder(shape, like=x)
            if ns and ns == nd:
                out = x
            elif ns and not nd and not is_wide_float(str(d)):
                # exact through f32, then the original conversion
                f = codec.emit_extf(b, x, ns, "f32")
                out = stablehlo.ConvertOp(op.results[0].type, f).result
            elif ns:
                out = emit_conversion(b, x, ns, nd or str(d))
            else:
                src = str(s)
                if not is_wide_float(src):  # exact: narrow floats, <= 24-bit integers (checked)
                    x = stablehlo.ConvertOp(ir.RankedTensorType.get(shape, ir.F32Type.get()),
                                      x).result
                    src = "f32"
                out = emit_conversion(b, x, src, nd)
        op.results[0].replace_all_uses_with(out)
        op.erase()

    def expand(self, ops: list[Any]) -> None:
        """Rewrite ``ops``: every op of the IR that :meth:`touches` a selected type (in program
        order; :meth:`problem` has accepted each).  Constants are re-encoded and the other ops
        retyped first, then the converts and bitcasts are rewritten."""
        converts = [o for o in ops if o.name == "stablehlo.convert"]
        bitcasts = [o for o in ops if o.name == "stablehlo.bitcast_convert"]
        originals = {id(o): (self.elem(o.operands[0].type), self.elem(o.results[0].type))
                     for o in converts}
        for o in ops:
            if o.name == "stablehlo.constant":
                self.rewrite_constant(o)
            else:
                self.retype(o)
        for o in converts:
            self.rewrite_convert(o, *originals[id(o)])
        for o in bitcasts:
            self.rewrite_bitcast(o)

    def connected(self, values: list[Any]) -> list[Any]:
        """The ops that touch the selected-type ``values`` or, transitively, the selected-type
        values of those ops (their defining ops and their users), in program order (all in
        one block): what :meth:`expand` must rewrite to expand values that never leave a
        piece of IR -- no function signature, return or region holds one -- such as the codes
        between an MX format's quantize and dequantize in the lowering of a cast."""
        found: set[Any] = set()
        seen: set[Any] = set()
        todo = list(values)
        while todo:
            v = todo.pop()
            if v in seen or self.convert_type(v.type) is None:
                continue
            seen.add(v)
            owners = [u.owner for u in v.uses]
            if not isinstance(v.owner, ir.Block):
                owners.append(v.owner)
            for o in (o.operation for o in owners):
                if o not in found:
                    found.add(o)
                    todo += list(o.operands) + list(o.results)
        return sorted(found, key=functools.cmp_to_key(
            lambda a, b: 0 if a == b else -1 if a.is_before_in_block(b) else 1))

    def rewrite_bitcast(self, op: Any) -> None:
        x = op.operands[0]
        rt = op.results[0].type
        xe, re = self.elem(x.type), self.elem(rt)
        if str(x.type) == str(rt):
            out = x
        elif not (self._sub_byte_int(xe) or self._sub_byte_int(re)):
            with ir.InsertionPoint(op), op.location:
                out = stablehlo.BitcastConvertOp(rt, x).result
        else:
            # a sub-byte integer (i4/ui4) <-> expanded codes (one per ui8): the code is the
            # integer's bits, so zero-extend (through the unsigned type of a signed source) or
            # truncate
            with ir.InsertionPoint(op), op.location:
                if self._sub_byte_int(xe) and not ir.IntegerType(xe).is_unsigned:
                    unsigned = ir.IntegerType.get_unsigned(ir.IntegerType(xe).width)
                    x = stablehlo.ConvertOp(with_element_type(ir, x.type, unsigned), x).result
                out = stablehlo.ConvertOp(rt, x).result
        op.results[0].replace_all_uses_with(out)
        op.erase()


def _keep(_: Any) -> None:
    return None
