"""The datatype-cast recipe: ``mx.cast``, ``mx.sparse`` and the datatype form of
``mx.quantize`` / ``mx.dequantize`` as plain StableHLO computing docs/semantics.md section 10
exactly (bit for bit what :mod:`mxlower.reference` gives), for every datatype that is no MX
format's.

``mxlower-decompose-mx`` calls :func:`lower_op` on each parsed op
(:class:`~mxlower.dialect.mx.CastOp` whose ``fmt`` is None, :class:`~mxlower.dialect.mx.SparseOp`,
:class:`~mxlower.dialect.mx.GeneralQuantizeOp`, :class:`~mxlower.dialect.mx.GeneralDequantizeOp`).
An MX format's datatype (:func:`mxlower.formats.format_of`, ties to even, a scale mode of the
format) has one recipe, :mod:`mxlower.lowering.mx_math`'s: its quantize / dequantize parse as
the format's ops, and a cast to it is the format's quantize then dequantize
(:func:`mxlower.lowering.mx_math.lower_cast`).  :func:`lower_op` still computes those
datatypes exactly too (the tests lower MX casts both ways and compare the bits), but the pass
does not give it them.

The pieces:

* **Tiles** (:class:`Tiles`): a tensor of shape (d0, d1, ...) is reshaped to (n0, t0, n1, t1,
  ...), tile index and position within the tile for every dimension, so that a tensor scale,
  a channel, a 1D tile and a 2D tile are all one reduction over the odd axes; the per-tile
  results (shape (n0, n1, ...)) are exactly the scales' shape.
* **Tile statistics** on the f32 bit patterns: amax is an integer maximum of the magnitude
  bits (which orders non-negative floats, subnormals included), and a NaN or Inf in the tile
  shows as amax >= 0x7F800000; vmin / vmax of asymmetric tiles are integer minima / maxima of
  an order-preserving key of the bits.
* **Scale selection** (:func:`mxlower.lowering.mx_math.scale_exponent`, the one
  implementation the MX formats' quantize shares) in integer arithmetic on amax's bits for
  the modes max / midmax / rceil / nearest, then clamped to the exponent type's range.
* **f32 arithmetic that XLA:CPU would get wrong**: it flushes subnormal inputs and results
  (FTZ/DAZ) and turns a division by a broadcast into a multiplication by a rounded
  reciprocal.  Every quotient the model takes (amax / max, x / s, span / (2^K - 1), -vmin / s)
  is :func:`mxlower.lowering.mx_math.quotient`: ``RNE_f32(RN_f64(x * RN_f64(1 / d)))`` where the result is a normal
  f32 (exact, see :func:`mxlower.lowering.mx_math.f32_quotient`), an integer division of
  the significands where it is below 2^-126; sums and products are formed in f64 on the
  exact values and rounded once (:func:`mxlower.lowering.mx_math.round_to_f32`; f64 holds
  more than 2 x 24 + 2 bits, so the double rounding is innocuous).
* **Element rounding** is the codec's spec-driven encoder / decoder
  (:func:`mxlower.lowering.codec.emit_encode`, ``emit_decode``), given the per-element
  power-of-two ``shift`` of an exponent scale so that no scaled value is ever formed in f32.
* **Sparsity** (:func:`lower_sparse`): within each group of n values, the rank of every value
  is the number of values that beat it (a larger magnitude, or an equal one at a lower index;
  every NaN counts as the same, largest magnitude); the m values of rank < m are kept.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir
from mxlower.dialect import mx
from mxlower.ir.stablehlo_builder import Builder
import mxlower.lowering.codec as codec
from mxlower.lowering.codec_stablehlo import StableHLOBuilder
from mxlower.lowering.mx_math import narrow_codes, narrow_from_codes
from mxlower.lowering.mx_math import (
    f32_bits_of,
    f64_of_f32_bits,
    quotient,
    round_to_f32,
    scale_exponent,
    to_f32_bits,
)
from mxlower.numbers import Datatype, NumberSpec, ScaleSpec

__all__ = [
    "CastLoweringError",
    "Tiles",
    "decode",
    "encode",
    "lower_op",
    "lower_sparse",
    "mul_f32",
    "tiny_is_zero",
    "unsupported",
]

_SIGN = -(1 << 31)
_MAG = 0x7FFFFFFF
_MANT = 0x7FFFFF
_INF = 0x7F800000
_NAN = 0x7FC00000


class CastLoweringError(ValueError):
    """A valid op this recipe cannot lower exactly (the message says why)."""


# ----------------------------------------------------------------------------- one op


def lower_op(spec: Any) -> None:
    """Replace the parsed op ``spec`` by its StableHLO lowering, in place."""
    op = spec.op
    b = Builder(op.location, ir.InsertionPoint(op))
    if isinstance(spec, mx.SparseOp):
        new = [lower_sparse(b, spec.input, spec.n, spec.m, spec.dim)]
    elif isinstance(spec, mx.CastOp):
        g = spec.tensor_scale
        codes, scales, zps, offs = encode(b, spec.input, spec.datatype, spec.roundmode,
                                          spec.scalemode, spec.rbits, g)
        v = decode(b, codes, scales, zps, spec.datatype, offs, g)
        new = [b.convert(b.bitcast(v, "f32"), spec.input_type)]
    elif isinstance(spec, mx.GeneralQuantizeOp):
        codes, scales, zps, offs = encode(b, spec.input, spec.datatype, spec.roundmode,
                                          spec.scalemode, spec.rbits, spec.tensor_scale)
        dt = spec.datatype
        new = [store(b, codes, dt.number)]
        if dt.scale is not None:
            new.append(store(b, scales, dt.scale.number))
            if dt.scale.zero_point is not None:
                new.append(store(b, zps, dt.scale.zero_point))
            if dt.scale.subtile:
                new.append(store(b, offs, dt.scale.offset_number))
    elif isinstance(spec, mx.GeneralDequantizeOp):
        dt = spec.datatype
        codes = load(b, spec.codes, dt.number)
        scales = None if spec.scales is None else load(b, spec.scales, dt.scale.number)
        zps = None if spec.zero_points is None else load(b, spec.zero_points,
                                                         dt.scale.zero_point)
        offs = None if spec.offsets is None else load(b, spec.offsets,
                                                      dt.scale.offset_number)
        v = decode(b, codes, scales, zps, dt, offs, spec.tensor_scale)
        new = [b.convert(b.bitcast(v, "f32"), spec.result_type)]
    else:
        raise TypeError(f"cast_math.lower_op: not a datatype op: {type(spec).__name__}")
    for old, value in zip(op.results, new):
        old.replace_all_uses_with(value)
    op.erase()


# ----------------------------------------------------------------------------- tiles


@dataclasses.dataclass(frozen=True)
class Tiles:
    """The tiling of a static ``shape`` by a scale spec: ``tile`` is the tile's extent per
    dimension (the whole dimension for a tensor scale or a channel's dimension)."""

    shape: tuple[int, ...]
    tile: tuple[int, ...]

    @staticmethod
    def of(s: ScaleSpec, shape) -> Tiles:
        return Tiles(tuple(shape), tuple(s.tile_shape(tuple(shape))))

    @property
    def tiled(self) -> list[int]:
        """(n0, t0, n1, t1, ...)."""
        out = []
        for d, t in zip(self.shape, self.tile):
            out += [d // t if t else 0, t]
        return out

    @property
    def per_tile(self) -> list[int]:
        """(n0, n1, ...): the scales' shape."""
        return [d // t if t else 0 for d, t in zip(self.shape, self.tile)]

    @property
    def inner(self) -> list[int]:
        """The axes of the tiled layout that run within a tile."""
        return list(range(1, 2 * len(self.shape), 2))

    @property
    def outer(self) -> list[int]:
        return list(range(0, 2 * len(self.shape), 2))

    def split(self, b: Builder, v: Any) -> Any:
        return b.reshape(v, self.tiled)

    def join(self, b: Builder, v: Any) -> Any:
        return b.reshape(v, list(self.shape))

    def spread(self, b: Builder, per_tile: Any) -> Any:
        """A per-tile value broadcast over the tiled layout."""
        return b.broadcast(per_tile, self.tiled, self.outer)

    def reduce(self, b: Builder, v: Any, kind: str, init: int) -> Any:
        return b.reduce(v, self.inner, kind, init)


# ----------------------------------------------------------------------------- codes and storage


def _int_builder(b: Builder, like: Any) -> StableHLOBuilder:
    return StableHLOBuilder(list(ir.RankedTensorType(like.type).shape), like=like, loc=b.loc,
                            ip=b.ip)


def encode_values(b: Builder, value_bits: Any, spec: NumberSpec, roundmode: str = "even",
                  rbits: Any | None = None, shift: Any | None = None) -> Any:
    """The i32 codes of f32 values (given as i32 bits) times 2^-shift, rounded to ``spec``
    with ``roundmode`` (docs/semantics.md 10.2; the codec's encoder)."""
    cb = _int_builder(b, value_bits)
    codes = codec.emit_encode(cb, b.bitcast(value_bits, "f32"), "f32", spec,
                              roundmode=roundmode, rbits=rbits, shift=shift,
                              code_bits=32)
    return _as_i32(b, codes)


def decode_values(b: Builder, codes: Any, spec: NumberSpec, shift: Any | None = None) -> Any:
    """The f32 bits (i32) of the values of i32 ``codes`` times 2^shift, rounded once (the
    codec's decoder)."""
    cb = _int_builder(b, codes)
    v = codec.emit_decode(cb, codes, spec, "f32", shift=shift)
    return b.bitcast(v, "i32")


def _as_i32(b: Builder, v: Any) -> Any:
    elt = b.etype(v)
    if elt == "i32":
        return v
    if elt == "ui32":
        return b.bitcast(v, "i32")
    return b.convert(v, "i32")


def store(b: Builder, codes: Any, spec: NumberSpec) -> Any:
    """i32 codes (two's complement values for ints) in the spec's storage type."""
    t = spec.storage
    if t == "f32":
        return b.bitcast(codes, "f32")
    if t == "i32":
        return codes
    if t in ("bf16", "f16"):
        return b.bitcast(b.convert(codes, "ui16"), t)
    if t[0] in "iu":  # iK / uiK: the codes themselves
        return b.bitcast(codes, t) if t == "ui32" else b.convert(codes, t)
    return narrow_from_codes(b, codes, t)


def load(b: Builder, stored: Any, spec: NumberSpec) -> Any:
    """The inverse of :func:`store`: i32 codes (ints sign-extended)."""
    t = spec.storage
    if t == "f32":
        return b.bitcast(stored, "i32")
    if t in ("bf16", "f16"):
        return b.convert(b.bitcast(stored, "ui16"), "i32")
    if t == "i32":
        return stored
    if t == "ui32":
        return b.bitcast(stored, "i32")
    if t[0] in "iu":
        return b.convert(stored, "i32")
    return narrow_codes(b, stored, t)


# ----------------------------------------------------------------------------- exact f32 steps


def tiny_is_zero(n: NumberSpec) -> bool:
    """Whether every element value of magnitude at most 2^-126 rounds to a signed zero of
    ``n`` in every rounding mode: true when its smallest spacing is at least 2^-93 (then
    t <= 2^-33, and t + r 2^-32 < 1 for every uint32 r), so such quotients need not be exact.
    A lookup table must also hold 0 (without it, a tiny value's stochastic rounding between
    its negative and positive neighbours depends on the value)."""
    if n.is_lut and 0.0 not in n.table:
        return False
    return n.smallest_subnormal >= 2.0 ** -93


def _add_f32(b: Builder, x_bits: Any, y_bits: Any) -> Any:
    """The f32 bits of RNE_f32(x + y), subnormals included (exact f64 sum, rounded once)."""
    return b.bitcast(round_to_f32(b, b.add(f64_of_f32_bits(b, x_bits),
                                           f64_of_f32_bits(b, y_bits))), "i32")


def mul_f32(b: Builder, x_bits: Any, y_bits: Any) -> Any:
    """The f32 bits of RNE_f32(x * y), subnormals included (the f64 product is exact)."""
    return b.bitcast(round_to_f32(b, b.mul(f64_of_f32_bits(b, x_bits),
                                           f64_of_f32_bits(b, y_bits))), "i32")


def _neg(b: Builder, bits: Any) -> Any:
    """-x on f32 bits (the sign bit flipped)."""
    return b.select(b.lt(bits, 0), b.and_(bits, _MAG), b.or_(bits, _SIGN))


def _order_key(b: Builder, bits: Any) -> Any:
    """An i32 key ordered as the f32 values of non-NaN ``bits`` (-0 just below +0)."""
    return b.select(b.lt(bits, 0), b.sub(-1, b.and_(bits, _MAG)), bits)


def _from_key(b: Builder, key: Any) -> Any:
    """The inverse of :func:`_order_key`."""
    return b.select(b.lt(key, 0), b.or_(b.sub(-1, key), _SIGN), key)


def _is_nan_bits(b: Builder, bits: Any) -> Any:
    return b.gt(b.and_(bits, _MAG), _INF)


# ----------------------------------------------------------------------------- scale selection


# ----------------------------------------------------------------------------- encode


def unsupported(dt: Datatype, scalemode: str = "max") -> str | None:
    """Why this lowering cannot cast to ``dt`` exactly (None when it can): the two quotients
    whose divisor is no f32 value.  The oracle computes them; mxlower.jax checks this at trace
    time, the lowering reports it at the op.  (Every lookup table is exact, in every rounding
    mode.)"""
    n, s = dt.number, dt.scale
    if s is None:
        return None
    if not s.power_of_two:
        if n.is_integer and n.bits > 24 and (s.zero_point is not None or n.kind == "int"):
            return (f"{dt.code}: float scales of integers wider than 24 bits divide by a "
                    "maximum that is not an f32 value; the lowering does not compute that "
                    "quotient exactly")
        return None
    return _rceil_unsupported(n) if scalemode == "rceil" else None


def _rceil_unsupported(n: NumberSpec) -> str | None:
    top = n.scaled_max_exact
    if float(np.float32(float(top))) != top:
        return (f"scalemode 'rceil' of {n.code} divides by its largest value {top}, which is "
                "not an f32 value; the lowering does not compute that quotient exactly")
    return None


def _check_exact(dt: Datatype, scalemode: str = "max") -> None:
    reason = unsupported(dt, scalemode)
    if reason:
        raise CastLoweringError(reason)


def encode(b: Builder, x: Any, dt: Datatype, roundmode: str, scalemode: str,
           rbits: Any | None, tensor_scale: Any | None = None
           ) -> tuple[Any, Any | None, Any | None, Any | None]:
    """i32 (codes, scale codes, zero-point codes, subtile offsets) of the actual cast of ``x``
    (f32 / bf16 / f16) to ``dt``: :func:`mxlower.reference.encode`'s values, as two's
    complement i32 (None where the datatype has no such part).  ``tensor_scale``: the f32
    value g (a rank-0 f32 tensor) of a two-level datatype (``_gf32``): the tiles then scale
    y = x / g, one f32 division per value (:func:`divide_by`)."""
    _check_exact(dt, scalemode)
    n, s = dt.number, dt.scale
    xb = to_f32_bits(b, x)
    if tensor_scale is not None:
        xb = divide_by(b, xb, tensor_scale)
    if s is None:
        return encode_values(b, xb, n, roundmode, rbits), None, None, None
    if s.subtile:
        codes, scales, offsets = _encode_subtiles(b, xb, rbits, n, s, roundmode, scalemode)
        return codes, scales, None, offsets
    tiles = Tiles.of(s, b.shape(x))
    xt = tiles.split(b, xb)
    rt = None if rbits is None else tiles.split(b, rbits)
    amax = tiles.reduce(b, b.and_(xt, _MAG), "max", 0)
    nonfinite = b.ge(amax, _INF)
    if s.power_of_two:
        out = _encode_pow2(b, xt, rt, amax, nonfinite, n, s, tiles, roundmode, scalemode)
    elif s.zero_point is None:
        out = _encode_float_scale(b, xt, rt, amax, nonfinite, n, s, tiles, roundmode)
    else:
        out = _encode_asymmetric(b, xt, rt, nonfinite, n, s, tiles, roundmode)
    codes, scales, zps = out
    return tiles.join(b, codes), scales, zps, None


def _fixed_shift(n: NumberSpec) -> int:
    """intK with an exponent scale is fixed point with K - 2 fraction bits."""
    return n.bits - 2 if n.kind == "int" else 0


def _encode_pow2(b, xt, rt, amax, nonfinite, n, s, tiles, roundmode, scalemode):
    e = scale_exponent(b, amax, n, s, scalemode)
    shift = tiles.spread(b, b.sub(e, _fixed_shift(n)))
    codes = encode_values(b, xt, n, roundmode, rt, shift)
    codes = b.select(tiles.spread(b, nonfinite), b.like(codes, 0), codes)
    scales = b.select(nonfinite, b.like(e, s.number.nan_code), b.add(e, s.number.bias))
    return codes, scales, None


def _subtile_grid(s: ScaleSpec, shape) -> tuple[Tiles, Tiles]:
    """(the subtiles as :class:`Tiles` of the data, the tiles as :class:`Tiles` of the
    subtiles' grid): a per-subtile value (the offsets' shape) reduces to the tiles' and a
    per-tile value (the scales' shape) spreads onto the subtiles through the second."""
    sub = Tiles.of(s.subtiles_as_tiles, shape)
    tile = s.tile_shape(tuple(shape))
    return sub, Tiles(tuple(sub.per_tile), tuple(t // k for t, k in zip(tile, sub.tile)))


def _encode_subtiles(b, x_bits, rbits, n, s, roundmode, scalemode):
    """Exponent scales with subtiles (docs/semantics.md 10.3, shared micro-exponents): E per
    tile by the scale mode (from the largest subtile amax, which is the tile's), E_s per
    subtile by the same rule, o = min(E - E_s, 2^D - 1), elements x * 2^-(E - o).  Returns
    (codes in the data's shape, scale codes, offsets), i32."""
    sub, grid = _subtile_grid(s, b.shape(x_bits))
    xt = sub.split(b, x_bits)
    rt = None if rbits is None else sub.split(b, rbits)
    samax = sub.reduce(b, b.and_(xt, _MAG), "max", 0)  # per subtile
    amax = grid.reduce(b, grid.split(b, samax), "max", 0)  # per tile
    nonfinite = b.ge(amax, _INF)
    e = scale_exponent(b, amax, n, s, scalemode)
    e_sub = scale_exponent(b, samax, n, s.subtiles_as_tiles, scalemode)  # <= e: every rule is monotone
    e_b = grid.join(b, grid.spread(b, e))
    bad = grid.join(b, grid.spread(b, nonfinite))
    offsets = b.select(bad, b.like(e_sub, 0), b.min(b.sub(e_b, e_sub), s.max_offset))
    shift = sub.spread(b, b.sub(b.sub(e_b, offsets), _fixed_shift(n)))
    codes = encode_values(b, xt, n, roundmode, rt, shift)
    codes = b.select(sub.spread(b, bad), b.like(codes, 0), codes)
    scales = b.select(nonfinite, b.like(e, s.number.nan_code), b.add(e, s.number.bias))
    return sub.join(b, codes), scales, offsets


def _scale_of(b, q_bits, spec: NumberSpec) -> tuple[Any, Any]:
    """A non-negative f32 quantity rounded to a float scale spec (even, saturating): (codes,
    f32 bits of the value)."""
    codes = encode_values(b, q_bits, spec, "even")
    return codes, decode_values(b, codes, spec)


def _encode_float_scale(b, xt, rt, amax, nonfinite, n, s, tiles, roundmode):
    sc, sval = _scale_of(b, quotient(b, amax, n.max), s.number)
    zero = b.eq(b.and_(sval, _MAG), 0)
    one = b.like(sval, f32_bits_of(1.0))
    sd = tiles.spread(b, b.select(zero, one, sval))
    v = quotient(b, xt, sd, small=not tiny_is_zero(n))
    codes = encode_values(b, v, n, roundmode, rt)
    drop = tiles.spread(b, b.or_(nonfinite, zero))
    codes = b.select(drop, b.like(codes, 0), codes)
    scales = b.select(nonfinite, b.like(sc, s.number.nan_code), sc)
    return codes, scales, None


def _encode_asymmetric(b, xt, rt, nonfinite, n, s, tiles, roundmode):
    top = (1 << n.bits) - 1
    finite = b.lt(b.and_(xt, _MAG), _INF)
    key = _order_key(b, b.select(finite, xt, b.like(xt, 0)))
    kmin = tiles.reduce(b, key, "min", 0x7FFFFFFF)
    kmax = tiles.reduce(b, key, "max", -(1 << 31))
    int_zp = s.zero_point.is_integer
    if int_zp:  # the range widened to hold 0
        kmin, kmax = b.min(kmin, 0), b.max(kmax, 0)
    vmin, vmax = _from_key(b, kmin), _from_key(b, kmax)
    span = _add_f32(b, vmax, _neg(b, vmin))
    sc, sval = _scale_of(b, quotient(b, span, float(top)), s.number)
    zero = b.eq(b.and_(sval, _MAG), 0)
    s32 = b.select(zero, b.like(sval, f32_bits_of(1.0)), sval)
    sd = tiles.spread(b, s32)
    u = n  # uintK: R(|q|) saturated to 2^K - 1, and 0 for negative values
    if int_zp:
        z = encode_values(b, quotient(b, _neg(b, vmin), s32), u, "even")
        z = b.select(zero, b.like(z, 0), z)
        q = quotient(b, xt, sd, small=False)  # uintK: spacing 1 (tiny_is_zero)
        m = encode_values(b, b.and_(q, _MAG), u, roundmode, rt)
        signed = b.select(b.lt(q, 0), b.sub(0, m), m)
        codes = b.clamp(0, b.add(signed, tiles.spread(b, z)), top)
        codes = b.select(tiles.spread(b, nonfinite), b.like(codes, 0), codes)
        zps = z
    else:
        zps = encode_values(b, vmin, s.zero_point, "even")
        zv = tiles.spread(b, decode_values(b, zps, s.zero_point))
        d = _add_f32(b, xt, _neg(b, zv))
        codes = encode_values(b, quotient(b, d, sd, small=False), u, roundmode, rt)
        codes = b.select(tiles.spread(b, b.or_(nonfinite, zero)), b.like(codes, 0), codes)
    zps = b.select(nonfinite, b.like(zps, 0), zps)
    scales = b.select(nonfinite, b.like(sc, s.number.nan_code), sc)
    return codes, scales, zps


# ----------------------------------------------------------------------------- decode


def decode(b: Builder, codes: Any, scales: Any | None, zps: Any | None, dt: Datatype,
           offsets: Any | None = None, tensor_scale: Any | None = None) -> Any:
    """The f32 bits (i32) of the values of i32 codes (+ scale and zero-point codes, subtile
    offsets): :func:`mxlower.reference.decode` in f32; with ``tensor_scale`` (the rank-0 f32
    g of a ``_gf32`` datatype) the tile level's values times g in f32."""
    n, s = dt.number, dt.scale
    if tensor_scale is not None:
        return times(b, decode(b, codes, scales, zps, dt, offsets), tensor_scale)
    if s is None:
        return decode_values(b, codes, n)
    if s.subtile:
        return _decode_subtiles(b, codes, scales, offsets, n, s)
    tiles = Tiles.of(s, b.shape(codes))
    ct = tiles.split(b, codes)
    if s.power_of_two:
        e = b.sub(scales, s.number.bias)
        nan = b.eq(scales, s.number.nan_code)
        v = decode_values(b, ct, n, tiles.spread(b, b.sub(e, _fixed_shift(n))))
    else:
        sval = decode_values(b, scales, s.number)
        nan = _is_nan_bits(b, sval)
        sd = tiles.spread(b, sval)
        if zps is None:
            v = mul_f32(b, decode_values(b, ct, n), sd)
        elif s.zero_point.is_integer:
            diff = b.sub(b.convert(ct, "i64"), b.convert(tiles.spread(b, zps), "i64"))
            dv = b.bitcast(b.convert(diff, "f32"), "i32")  # |diff| < 2^24: exact
            v = mul_f32(b, dv, sd)
        else:
            zv = tiles.spread(b, decode_values(b, zps, s.zero_point))
            v = _add_f32(b, mul_f32(b, decode_values(b, ct, n), sd), zv)
    v = b.select(tiles.spread(b, nan), b.like(v, _NAN), v)
    return tiles.join(b, v)


def _decode_subtiles(b, codes, scales, offsets, n: NumberSpec, s: ScaleSpec) -> Any:
    """Values decode(code) * 2^(E - o): the tile's E (and NaN flag) spread onto its subtiles,
    less each subtile's offset.  An offset of 2^D or more (which no encode gives, and the
    oracle's decode rejects) is taken as it is."""
    sub, grid = _subtile_grid(s, b.shape(codes))
    e = grid.join(b, grid.spread(b, b.sub(scales, s.number.bias)))
    nan = grid.join(b, grid.spread(b, b.eq(scales, s.number.nan_code)))
    shift = sub.spread(b, b.sub(b.sub(e, offsets), _fixed_shift(n)))
    v = decode_values(b, sub.split(b, codes), n, shift)
    v = b.select(sub.spread(b, nan), b.like(v, _NAN), v)
    return sub.join(b, v)


# ----------------------------------------------------------------------------- tensor level


def _spread_scalar(b: Builder, g: Any, like: Any) -> Any:
    """The f32 bits (i32) of the rank-0 f32 ``g`` broadcast to ``like``'s shape."""
    return b.broadcast(b.bitcast(g, "i32"), list(b.shape(like)), [])


def divide_by(b: Builder, x_bits: Any, g: Any) -> Any:
    """The f32 bits of RNE_f32(x / g) for the f32 bits ``x_bits`` and a finite non-zero
    rank-0 f32 ``g``, subnormals included: the correctly rounded quotient by |g|
    (:func:`mxlower.lowering.mx_math.quotient`; XLA:CPU would flush subnormals and multiply
    by a rounded reciprocal), negated for a negative g (IEEE division is symmetric)."""
    gb = _spread_scalar(b, g, x_bits)
    q = quotient(b, x_bits, b.and_(gb, _MAG))
    return b.select(b.lt(gb, 0), _neg(b, q), q)


def times(b: Builder, v_bits: Any, g: Any) -> Any:
    """The f32 bits of RNE_f32(v * g) for the rank-0 f32 ``g`` (:func:`mul_f32`)."""
    return mul_f32(b, v_bits, _spread_scalar(b, g, v_bits))


# ----------------------------------------------------------------------------- sparsity


def lower_sparse(b: Builder, x: Any, n: int, m: int, dim: int) -> Any:
    """docs/semantics.md 10.5: keep the m largest magnitudes of each n values along ``dim``
    (NaN largest, ties to the lower index), +0 elsewhere; ``x``'s type."""
    if 0 in b.shape(x):  # nothing to choose from (n may be any size: its runs are not built)
        return x
    key = b.and_(to_f32_bits(b, x), _MAG)
    key = b.min(key, _INF + 1)  # every NaN the same, above Inf
    kb = b.split_blocks(key, dim, n)
    xb = b.split_blocks(x, dim, n)
    s = list(b.shape(kb))
    big = s[:dim + 2] + [n] + s[dim + 2:]
    rank = len(big)
    ki = b.broadcast(kb, big, [d for d in range(rank) if d != dim + 2])
    kj = b.broadcast(kb, big, [d for d in range(rank) if d != dim + 1])
    i = b.along(list(range(n)), big, dim + 1)
    j = b.along(list(range(n)), big, dim + 2)
    beats = b.or_(b.gt(kj, ki), b.and_(b.eq(kj, ki), b.lt(j, i)))
    count = b.reduce(b.select(beats, b.like(ki, 1), b.like(ki, 0)), [dim + 2], "add", 0)
    keep = b.lt(count, m)
    out = b.select(keep, xb, b.like(xb, 0.0))
    return b.unblock(out, dim)
