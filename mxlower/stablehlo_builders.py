"""Small StableHLO builders and the exact float-bit arithmetic the MX lowerings are made of.

:class:`Builder` emits StableHLO ops at one location and insertion point, with Python scalars
accepted wherever a tensor operand is (they become splat constants of the other operand's shape
and element type)::

    b = Builder(op.location, ir.InsertionPoint(op))
    y = b.select(b.ge(x, 0), x, b.neg(x))

The free functions below it work on f32 values held as their ``i32`` bit patterns.  XLA:CPU
runs with denormals flushed (FTZ and DAZ: ``2^-130 * 16`` gives 0 there, and so does converting
an f32 subnormal to f64), so every step whose input or output may be an f32 subnormal is done
in integer arithmetic: exact scaling by powers of two (:func:`ldexp_bits`), decoding the
exponent of a block maximum (:func:`frexp_bits`), and an f32 multiply that rounds subnormal
results correctly (:func:`mul_f32_exact`).  Float instructions are only used where inputs and
outputs are provably normal (or where a flushed result provably cannot change the answer).
"""

from __future__ import annotations

import fractions
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir, stablehlo

__all__ = [
    "Builder",
    "Dyn",
    "is_dynamic",
    "f32_bits_floor",
    "frexp_bits",
    "ldexp_bits",
    "mul_f32_exact",
    "normalize_bits",
    "to_f32_bits",
]

_SIGN = -(1 << 31)  # 0x80000000 as a signed i32
_MAG = 0x7FFFFFFF
_MANT = 0x7FFFFF
_INF = 0x7F800000


def _elt(t: str | Any) -> Any:
    return ir.Type.parse(t) if isinstance(t, str) else t


class Dyn:
    """A dynamic dimension in a shape: dimension ``index`` of ``value``, read at run time
    with ``stablehlo.get_dimension_size`` when a shape operand needs it."""

    __slots__ = ("value", "index")

    def __init__(self, value: Any, index: int):
        self.value = value
        self.index = index

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Dyn) and self.index == other.index
                and self.value == other.value)

    def __hash__(self) -> int:
        return hash(self.index)

    def __repr__(self) -> str:
        return f"Dyn({self.index})"


def _static(shape: Sequence[int | Dyn]) -> list[int]:
    """The shape for a tensor type: dynamic sizes where the shape has a :class:`Dyn`."""
    dyn = ir.ShapedType.get_dynamic_size()
    return [dyn if isinstance(d, Dyn) else int(d) for d in shape]


def is_dynamic(shape: Sequence[int | Dyn]) -> bool:
    return any(isinstance(d, Dyn) for d in shape)


class Builder:
    """Emits StableHLO ops at ``loc`` through the insertion point ``ip``."""

    def __init__(self, loc: Any, ip: Any):
        self.loc = loc
        self.ip = ip
        self._shape_tensors: dict[tuple[int | Dyn, ...], Any] = {}

    # ----------------------------------------------------------------------------- types
    @staticmethod
    def shape(v: Any) -> tuple[int | Dyn, ...]:
        """``v``'s shape: ints, and a :class:`Dyn` for each dynamic dimension."""
        t = ir.RankedTensorType(v.type)
        return tuple(Dyn(v, i) if t.is_dynamic_dim(i) else d for i, d in enumerate(t.shape))

    @staticmethod
    def etype(v: Any) -> str:
        return str(ir.RankedTensorType(v.type).element_type)

    def ttype(self, shape: Sequence[int | Dyn], elt: str | Any) -> Any:
        return ir.RankedTensorType.get(_static(shape), _elt(elt), loc=self.loc)

    def shape_tensor(self, shape: Sequence[int | Dyn]) -> Any:
        """``tensor<rank x i32>`` holding ``shape`` at run time (the operand of the dynamic
        reshape and broadcast ops); built once per shape by this builder."""
        key = tuple(shape)
        if key not in self._shape_tensors:
            self._shape_tensors[key] = self._build_shape_tensor(key)
        return self._shape_tensors[key]

    def _build_shape_tensor(self, shape: tuple[int | Dyn, ...]) -> Any:
        i32 = ir.IntegerType.get_signless(32)
        one = self.ttype([1], i32)
        parts = []
        for d in shape:
            if isinstance(d, Dyn):
                size = stablehlo.GetDimensionSizeOp(d.value, d.index, **self._kw()).result
                parts.append(stablehlo.ReshapeOp(one, size, **self._kw()).result)
            else:
                dense = ir.DenseElementsAttr.get(np.asarray([d], dtype=np.int32))
                parts.append(stablehlo.ConstantOp(dense, **self._kw()).result)
        if len(parts) == 1:
            return parts[0]
        return stablehlo.ConcatenateOp(parts, 0, **self._kw()).result

    def _kw(self) -> dict[str, Any]:
        return {"loc": self.loc, "ip": self.ip}

    # ----------------------------------------------------------------------------- constants
    def const(self, value: float | int, elt: str, shape: Sequence[int | Dyn] = ()) -> Any:
        """A splat constant; ``value`` is a Python number (ints for integer types, and for a
        float type an int means those raw bits when ``elt`` is f32).  A dynamic ``shape``
        broadcasts a scalar constant to it."""
        t = _elt(elt)
        if isinstance(t, ir.IntegerType):
            attr = ir.IntegerAttr.get(t, int(value))
        else:
            attr = ir.FloatAttr.get(t, float(value))
        if is_dynamic(shape):
            return self.broadcast(self.const(value, elt), shape, [])
        dense = ir.DenseElementsAttr.get_splat(self.ttype(shape, t), attr)
        return stablehlo.ConstantOp(dense, **self._kw()).result

    def f32_from_bits(self, bits: int, shape: Sequence[int | Dyn] = ()) -> Any:
        """An f32 splat given by its bit pattern (NaN payloads, exact subnormals)."""
        signed = bits - (1 << 32) if bits >= 1 << 31 else bits
        return self.bitcast(self.const(signed, "i32", shape), "f32")

    def like(self, v: Any, value: float | int, elt: str | None = None) -> Any:
        return self.const(value, elt or self.etype(v), self.shape(v))

    def _coerce(self, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, (int, float)):
            a = self.like(b, a)
        if isinstance(b, (int, float)):
            b = self.like(a, b)
        return a, b

    # ----------------------------------------------------------------------------- elementwise
    def _bin(self, cls: Any, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        return cls(a, b, **self._kw()).result

    def add(self, a, b): return self._bin(stablehlo.AddOp, a, b)  # noqa: E704
    def sub(self, a, b): return self._bin(stablehlo.SubtractOp, a, b)  # noqa: E704
    def mul(self, a, b): return self._bin(stablehlo.MulOp, a, b)  # noqa: E704
    def div(self, a, b): return self._bin(stablehlo.DivOp, a, b)  # noqa: E704
    def max(self, a, b): return self._bin(stablehlo.MaxOp, a, b)  # noqa: E704
    def min(self, a, b): return self._bin(stablehlo.MinOp, a, b)  # noqa: E704
    def and_(self, a, b): return self._bin(stablehlo.AndOp, a, b)  # noqa: E704
    def or_(self, a, b): return self._bin(stablehlo.OrOp, a, b)  # noqa: E704
    def shl(self, a, b): return self._bin(stablehlo.ShiftLeftOp, a, b)  # noqa: E704
    def shr(self, a, b): return self._bin(stablehlo.ShiftRightLogicalOp, a, b)  # noqa: E704
    def sra(self, a, b): return self._bin(stablehlo.ShiftRightArithmeticOp, a, b)  # noqa: E704

    def not_(self, a):
        return stablehlo.NotOp(a, **self._kw()).result

    def abs(self, a):
        return stablehlo.AbsOp(a, **self._kw()).result

    def clz(self, a):
        return stablehlo.ClzOp(a, **self._kw()).result

    def round_even(self, a):
        return stablehlo.RoundNearestEvenOp(a, **self._kw()).result

    def clamp(self, lo, x, hi):
        lo = self.like(x, lo) if isinstance(lo, (int, float)) else lo
        hi = self.like(x, hi) if isinstance(hi, (int, float)) else hi
        return stablehlo.ClampOp(lo, x, hi, **self._kw()).result

    def select(self, pred, a, b):
        a, b = self._coerce(a, b)
        if isinstance(a, (int, float)):  # both scalars: shape from the predicate
            raise TypeError("select needs at least one tensor branch")
        return stablehlo.SelectOp(pred, a, b, **self._kw()).result

    def compare(self, direction: str, a: Any, b: Any) -> Any:
        a, b = self._coerce(a, b)
        elt = ir.RankedTensorType(a.type).element_type
        if isinstance(elt, ir.IntegerType):
            kind = "UNSIGNED" if ir.IntegerType(elt).is_unsigned else "SIGNED"
        else:
            kind = "FLOAT"
        return stablehlo.CompareOp(
            a, b, stablehlo.ComparisonDirectionAttr.get(direction),
            compare_type=stablehlo.ComparisonTypeAttr.get(kind), **self._kw()).result

    def eq(self, a, b): return self.compare("EQ", a, b)  # noqa: E704
    def ne(self, a, b): return self.compare("NE", a, b)  # noqa: E704
    def lt(self, a, b): return self.compare("LT", a, b)  # noqa: E704
    def le(self, a, b): return self.compare("LE", a, b)  # noqa: E704
    def gt(self, a, b): return self.compare("GT", a, b)  # noqa: E704
    def ge(self, a, b): return self.compare("GE", a, b)  # noqa: E704

    # ----------------------------------------------------------------------------- types and shapes
    def convert(self, v: Any, elt: str) -> Any:
        if self.etype(v) == elt:
            return v
        return stablehlo.ConvertOp(self.ttype(self.shape(v), elt), v, **self._kw()).result

    def bitcast(self, v: Any, elt: str) -> Any:
        if self.etype(v) == elt:
            return v
        return stablehlo.BitcastConvertOp(self.ttype(self.shape(v), elt), v,
                                          **self._kw()).result

    def reshape(self, v: Any, shape: Sequence[int | Dyn]) -> Any:
        if self.shape(v) == tuple(shape):
            return v
        t = self.ttype(shape, self.etype(v))
        if is_dynamic(shape):
            return stablehlo.DynamicReshapeOp(t, v, self.shape_tensor(shape),
                                              **self._kw()).result
        return stablehlo.ReshapeOp(t, v, **self._kw()).result

    def broadcast(self, v: Any, shape: Sequence[int | Dyn], dims: Sequence[int]) -> Any:
        t = self.ttype(shape, self.etype(v))
        if is_dynamic(shape):
            return stablehlo.DynamicBroadcastInDimOp(t, v, self.shape_tensor(shape), list(dims),
                                                     **self._kw()).result
        return stablehlo.BroadcastInDimOp(t, v, list(dims), **self._kw()).result

    def slice(self, v: Any, limits: Sequence[int]) -> Any:
        if self.shape(v) == tuple(limits):
            return v
        n = len(limits)
        return stablehlo.SliceOp(v, [0] * n, list(limits), [1] * n, **self._kw()).result

    def reduce(self, v: Any, dims: Sequence[int], kind: str, init: float | int) -> Any:
        """Reduce ``v`` over ``dims`` with ``kind`` in {"max", "min", "add", "or", "and"}."""
        elt = _elt(self.etype(v))
        scalar = self.ttype((), elt)
        init_v = self.const(init, self.etype(v))
        shape = [d for i, d in enumerate(self.shape(v)) if i not in dims]
        op = stablehlo.ReduceOp([self.ttype(shape, elt)], [v], [init_v], list(dims),
                                **self._kw())
        block = op.regions[0].blocks.append(scalar, scalar, arg_locs=[self.loc, self.loc])
        cls = {"max": stablehlo.MaxOp, "min": stablehlo.MinOp, "add": stablehlo.AddOp,
               "or": stablehlo.OrOp, "and": stablehlo.AndOp}[kind]
        inner = ir.InsertionPoint(block)
        r = cls(block.arguments[0], block.arguments[1], loc=self.loc, ip=inner).result
        stablehlo.ReturnOp([r], loc=self.loc, ip=inner)
        return op.results[0]

    def dot_general(self, lhs: Any, rhs: Any, lc, rc, lb, rb, result_elt: str) -> Any:
        ls, rs = self.shape(lhs), self.shape(rhs)
        lfree = [d for d in range(len(ls)) if d not in lc and d not in lb]
        rfree = [d for d in range(len(rs)) if d not in rc and d not in rb]
        shape = [ls[d] for d in lb] + [ls[d] for d in lfree] + [rs[d] for d in rfree]
        dn = stablehlo.DotDimensionNumbers.get(
            lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
            lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
        return stablehlo.DotGeneralOp(self.ttype(shape, result_elt), lhs, rhs, dn,
                                      **self._kw()).result

    # ----------------------------------------------------------------------------- blocks
    def split_blocks(self, v: Any, axis: int, k: int) -> Any:
        """[..., n, ...] -> [..., n/k, k, ...] (the block dimension is ``axis + 1``)."""
        s = list(self.shape(v))
        return self.reshape(v, s[:axis] + [s[axis] // k, k] + s[axis + 1:])

    def expand_blocks(self, v: Any, axis: int, k: int) -> Any:
        """Per-block values [..., nb, ...] repeated k times along ``axis``: [..., nb*k, ...]."""
        s = list(self.shape(v))
        if k == 1:
            return v
        big = s[:axis] + [s[axis], k] + s[axis + 1:]
        dims = [i for i in range(len(big)) if i != axis + 1]
        out = self.broadcast(v, big, dims)
        return self.reshape(out, s[:axis] + [s[axis] * k] + s[axis + 1:])

    def unblock(self, v: Any, axis: int) -> Any:
        """[..., nb, k, ...] -> [..., nb*k, ...]."""
        s = list(self.shape(v))
        return self.reshape(v, s[:axis] + [s[axis] * s[axis + 1]] + s[axis + 2:])

    def along(self, values: Sequence[int], shape: Sequence[int | Dyn], dim: int) -> Any:
        """The i32 vector ``values`` broadcast along dimension ``dim`` of ``shape``."""
        dense = ir.DenseElementsAttr.get(np.asarray(values, dtype=np.int32))
        c = stablehlo.ConstantOp(dense, **self._kw()).result
        return self.broadcast(c, shape, [dim])


# ----------------------------------------------------------------------------- f32 bit arithmetic


def f32_bits_floor(x: fractions.Fraction | float) -> int:
    """Bits of the largest non-negative f32 <= ``x`` (x >= 0, below the f32 maximum)."""
    x = fractions.Fraction(x)
    lo, hi = 0, 0x7F7FFFFF
    while lo < hi:  # bisection on the monotone bit patterns of non-negative floats
        mid = (lo + hi + 1) // 2
        v = fractions.Fraction(float(np.uint32(mid).view(np.float32)))
        if v <= x:
            lo = mid
        else:
            hi = mid - 1
    return lo


def to_f32_bits(b: Builder, x: Any) -> Any:
    """The i32 bit pattern of ``x`` (f32, bf16 or f16) converted exactly to f32.

    bf16 is a shift; f16 is decoded in integers so that f16 subnormals (normal f32 values) and
    the conversion never pass through a float instruction."""
    elt = b.etype(x)
    if elt == "f32":
        return b.bitcast(x, "i32")
    if elt == "bf16":
        u = b.convert(b.bitcast(x, "ui16"), "i32")
        return b.shl(u, 16)
    if elt == "f16":
        h = b.convert(b.bitcast(x, "ui16"), "i32")
        sign = b.shl(b.and_(h, 0x8000), 16)
        e = b.and_(b.shr(h, 10), 0x1F)
        m = b.and_(h, 0x3FF)
        normal = b.or_(b.shl(b.add(e, 127 - 15), 23), b.shl(m, 13))
        special = b.or_(b.like(h, _INF), b.shl(m, 13))
        # subnormal f16: m * 2^-24, normalized with the position of m's top bit
        p = b.sub(31, b.clz(m))  # 0..9
        sub = b.or_(b.shl(b.add(p, 127 - 24), 23),
                    b.and_(b.shl(m, b.sub(23, p)), _MANT))
        mag = b.select(b.eq(e, 0), b.select(b.eq(m, 0), b.like(h, 0), sub),
                       b.select(b.eq(e, 31), special, normal))
        return b.or_(sign, mag)
    raise ValueError(f"to_f32_bits: unsupported element type {elt}")


def normalize_bits(b: Builder, bits: Any) -> tuple[Any, Any, Any]:
    """(sign, biased exponent, 23-bit mantissa) of an f32 bit pattern, with subnormals
    renormalized (exponent <= 0) and zero given exponent -200 (any scaling keeps it zero)."""
    sign = b.and_(bits, _SIGN)
    mag = b.and_(bits, _MAG)
    ex = b.shr(mag, 23)
    mt = b.and_(mag, _MANT)
    p = b.sub(31, b.clz(mt))  # top bit of a subnormal's mantissa, 0..22 (-1 for zero)
    sub_ex = b.sub(p, 22)
    sub_mt = b.and_(b.shl(mt, b.clamp(0, b.sub(23, p), 31)), _MANT)
    is_sub = b.eq(ex, 0)
    ex_eff = b.select(is_sub, b.select(b.eq(mt, 0), b.like(ex, -200), sub_ex), ex)
    mt_eff = b.select(is_sub, sub_mt, mt)
    return sign, ex_eff, mt_eff


def ldexp_bits(b: Builder, bits: Any, k: Any, *, small: str = "round",
               normal_input: bool = False) -> Any:
    """The f32 bits of ``x * 2^k`` for f32 bits ``x`` and i32 ``k`` (overflow gives +-Inf; Inf
    and NaN pass through).  A result below 2^-126 is, by ``small``:

    * ``"round"``: the subnormal rounded to nearest even;
    * ``"exact"``: the subnormal, for callers that guarantee no bit is shifted out (a plain
      shift, e.g. MX dequantize: every element value has at most 7 significant bits and the
      smallest product is 2^-143);
    * ``"flush"``: a signed zero (for callers whose next rounding step cannot tell).

    ``normal_input`` promises that ``x`` is not an f32 subnormal (skips renormalizing it)."""
    if normal_input:
        sign = b.and_(bits, _SIGN)
        mag = b.and_(bits, _MAG)
        ex = b.select(b.eq(mag, 0), b.like(mag, -200), b.shr(mag, 23))
        mt = b.and_(mag, _MANT)
    else:
        sign, ex, mt = normalize_bits(b, bits)
    ne = b.add(ex, k)
    normal = b.or_(sign, b.or_(b.shl(b.clamp(0, ne, 254), 23), mt))
    inf = b.or_(sign, b.like(sign, _INF))
    if small == "flush":
        small_v = sign
    else:
        full = b.or_(mt, 0x800000)
        shift = b.clamp(1, b.sub(1, ne), 31)
        r = b.shr(full, shift)
        if small == "round":
            rem = b.and_(full, b.sub(b.shl(b.like(full, 1), shift), 1))
            half = b.shl(b.like(full, 1), b.sub(shift, 1))
            up = b.or_(b.gt(rem, half), b.and_(b.eq(rem, half), b.eq(b.and_(r, 1), 1)))
            r = b.add(r, b.select(up, b.like(r, 1), b.like(r, 0)))
        small_v = b.or_(sign, r)
    out = b.select(b.ge(ne, 1), b.select(b.ge(ne, 255), inf, normal), small_v)
    special = b.ge(b.and_(bits, _MAG), _INF)
    return b.select(special, bits, out)


def frexp_bits(b: Builder, mag_bits: Any) -> Any:
    """floor(log2(x)) for non-negative finite f32 bits (exact for subnormals; x = 0 gives
    -150)."""
    ex = b.shr(mag_bits, 23)
    mt = b.and_(mag_bits, _MANT)
    return b.select(b.gt(ex, 0), b.sub(ex, 127), b.sub(-118, b.clz(mt)))


def mul_f32_exact(b: Builder, p: Any, g: Any) -> Any:
    """``p * g`` in f32 with IEEE rounding of subnormal results, on a machine that flushes them.

    ``p`` must be a normal f32 (or zero, Inf, NaN) with at most 29 significant bits; ``g`` any
    f32 (broadcast to p's shape).  The product is formed exactly in f64 (g's subnormals are
    first rescaled by 2^64 in integers), then rounded to f32 in integers when it is below
    2^-126 and by a conversion otherwise."""
    gb = b.bitcast(g, "i32")
    g_sub = b.and_(b.eq(b.and_(gb, 0x7F800000), 0), b.ne(b.and_(gb, _MANT), 0))
    gn = b.bitcast(ldexp_bits(b, gb, b.select(g_sub, b.like(gb, 64), b.like(gb, 0))), "f32")
    t = b.mul(b.convert(p, "f64"), b.convert(gn, "f64"))
    t = b.mul(t, b.select(g_sub, b.like(t, 2.0 ** -64), b.like(t, 1.0)))
    big = b.convert(t, "f32")
    tiny = b.lt(b.abs(t), 2.0 ** -126)
    k = b.convert(b.round_even(b.mul(b.abs(t), 2.0 ** 149)), "i32")  # <= 2^23: exact
    sign = b.shl(b.convert(b.shr(b.bitcast(t, "i64"), 63), "i32"), 31)
    small = b.bitcast(b.or_(sign, k), "f32")
    return b.select(tiny, small, big)
