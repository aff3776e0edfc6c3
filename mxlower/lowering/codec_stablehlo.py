"""The narrow-float codec's StableHLO output: :class:`StableHLOBuilder` (jaxlib stack).

The conversion algorithm and the other builders are in :mod:`mxlower.lowering.codec`, which
imports no MLIR (the NumPy builder runs where no MLIR is installed); this module imports
jaxlib's MLIR.  Example (``x``: a ``tensor<4xf32>`` value, building before ``op``)::

    with ir.InsertionPoint(op), op.location:
        b = StableHLOBuilder([4], like=x)
        codes = codec.emit_truncf(b, x, "f32", "f4E2M1FN")   # tensor<4xui8>
"""

from __future__ import annotations

from typing import Any

from mxlower.bindings.jaxlib import ir, stablehlo
from mxlower.ir.stablehlo_builder import Builder
from mxlower.lowering.int_builders import MLIRBuilder, signed

__all__ = ["StableHLOBuilder"]


class StableHLOBuilder(MLIRBuilder):
    """StableHLO integer ops on ``tensor<shape x iN>`` (jaxlib stack).  Narrow codes are
    ``ui8`` (``resize(x, 8)``); working integers are signless (signed in StableHLO).

    Create it under the insertion point and location to build at, or pass ``loc``/``ip``.
    A ``shape`` with dynamic dimensions needs ``like``, a value of that shape: constants are
    then scalars broadcast to ``like``'s runtime shape (through
    :meth:`mxlower.ir.stablehlo_builder.Builder.broadcast`, one shape tensor for all of them),
    which shape refinement folds once the shape is known.
    """

    def __init__(self, shape, *, like: Any = None, loc: Any = None, ip: Any = None):
        super().__init__(ir, loc=loc, ip=ip)
        self.hlo = stablehlo
        self.shape = list(shape)
        self.dynamic = any(ir.ShapedType.is_dynamic_size(d) for d in self.shape)
        if self.dynamic and like is None:
            raise ValueError("a dynamic shape needs the value whose shape it is (like=)")
        self._shapes = Builder(loc, ip) if self.dynamic else None
        self._like_shape = Builder.shape(like) if self.dynamic else None

    def _shaped(self, elem):
        return self.ir.RankedTensorType.get(self.shape, elem)

    def _int(self, bits: int):
        if bits == 8:
            return self._shaped(self.ir.IntegerType.get_unsigned(8))
        return super()._int(bits)

    def constant(self, value: int, bits: int):
        key = (value & ((1 << bits) - 1), bits)
        if key not in self._consts:
            t = self._int(bits)
            et = self._elem(t)
            v = key[0] if bits == 8 else signed(value, bits)
            if not self.dynamic:
                attr = self.ir.DenseElementsAttr.get_splat(t, self.ir.IntegerAttr.get(et, v))
                self._consts[key] = self.hlo.ConstantOp(attr, **self._kw()).result
            else:
                scalar = self.ir.RankedTensorType.get([], et)
                attr = self.ir.DenseElementsAttr.get_splat(scalar,
                                                           self.ir.IntegerAttr.get(et, v))
                c = self.hlo.ConstantOp(attr, **self._kw()).result
                self._consts[key] = self._shapes.broadcast(c, self._like_shape, [])
        return self._consts[key]

    def binary(self, op: str, lhs, rhs):
        h = self.hlo
        cls = {"and": h.AndOp, "or": h.OrOp, "xor": h.XorOp, "add": h.AddOp,
               "sub": h.SubtractOp, "mul": h.MulOp, "shl": h.ShiftLeftOp,
               "shrui": h.ShiftRightLogicalOp, "shrsi": h.ShiftRightArithmeticOp,
               "minsi": h.MinOp, "maxsi": h.MaxOp}[op]
        return cls(lhs, rhs, **self._kw()).result

    def compare(self, pred: str, lhs, rhs):
        h = self.hlo
        direction = {"eq": "EQ", "ne": "NE", "slt": "LT", "sle": "LE", "sgt": "GT",
                     "sge": "GE"}[pred]
        return h.CompareOp(lhs, rhs, h.ComparisonDirectionAttr.get(direction),
                           compare_type=h.ComparisonTypeAttr.get("SIGNED"),
                           **self._kw()).result

    def select(self, cond, a, b):
        return self.hlo.SelectOp(cond, a, b, **self._kw()).result

    def bitcast_to_int(self, x):
        w = self.ir.FloatType(self._elem(x.type)).width
        return self.hlo.BitcastConvertOp(self._int(w), x, **self._kw()).result

    def bitcast_to_float(self, x, wide: str):
        t = self._shaped(self.ir.Type.parse(wide))
        return self.hlo.BitcastConvertOp(t, x, **self._kw()).result

    has_int_to_float = True

    def int_to_float(self, x, wide: str):
        f = self.hlo.ConvertOp(self._shaped(self.ir.Type.parse(wide)), x, **self._kw()).result
        return self.bitcast_to_int(f)

    def float_op(self, op: str, lhs, rhs, wide: str):
        cls = {"add": self.hlo.AddOp, "sub": self.hlo.SubtractOp}[op]
        r = cls(self.bitcast_to_float(lhs, wide), self.bitcast_to_float(rhs, wide),
                **self._kw()).result
        return self.bitcast_to_int(r)

    def signless(self, x):
        et = self._elem(x.type)
        it = self.ir.IntegerType(et)
        if it.is_signless or it.width == 8:  # (8-bit codes are ui8 throughout)
            return x
        return self.hlo.BitcastConvertOp(self._int(it.width), x, **self._kw()).result

    def to_storage(self, x, storage: str):
        t = self._shaped(self.ir.Type.parse(storage))
        if str(t) == str(x.type):
            return x
        return self.hlo.BitcastConvertOp(t, x, **self._kw()).result

    def resize(self, x, bits: int):
        if bits < 8:
            raise ValueError("StableHLO narrow storage is ui8; code_bits must be 8")
        return self.hlo.ConvertOp(self._int(bits), x, **self._kw()).result
