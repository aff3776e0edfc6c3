"""The MX recipe: mx ops as plain StableHLO computing docs/semantics.md exactly.

Every function here emits StableHLO through :class:`mxlower.ir.stablehlo_builder.Builder`;
``mxlower-decompose-mx`` calls :func:`lower_op` on each parsed ``mx`` op of an MX format --
the named ops, the datatype spelling of its quantize / dequantize (which
:func:`mxlower.dialect.mx.parse` reads as the named op) and ``mx.cast`` to its datatype -- so
a format's numerics have this one recipe; the other datatypes of docs/semantics.md section
10 take :mod:`mxlower.lowering.cast_math` (and ``mxlower-pack-subbyte-args`` calls
:func:`lower_pack` / :func:`lower_unpack`).

* quantize (docs/semantics.md section 3, 4): a block reduction of the magnitude bits, integer exponent
  arithmetic for the shared scale (:func:`shared_exponent`: floor / rceil / nearest, the
  MX spelling of :func:`scale_exponent`, which every exponent-scaled datatype shares), exact
  power-of-two scaling and saturation of the elements on their bits (:func:`scale_by_pow2`),
  then a ``stablehlo.convert`` to the element type; nvfp4 with its E4M3 block scale and
  optional global scale;
* dequantize (section 5): :func:`dequantize_values`, an integer ``ldexp`` of the decoded
  elements by the decoded scale;
* cast to an MX format's datatype (section 10.4, the virtual cast): :func:`lower_cast`, the
  format's quantize then its dequantize to the input's type, the element and scale codes
  between them kept as integers (the codec's conversions, as ``mxlower-expand-narrow-floats``
  writes them: no narrow float type inside a cast);
* scaled dot (section 6): :func:`lower_scaled_dot`, both operands dequantized to the compute
  type and contracted with ``stablehlo.dot_general``: in f32 where a run-time test proves
  that exact despite flushed subnormals, else in f64 on the exact values;
* pack / unpack: :func:`lower_pack`, :func:`lower_unpack`, shifts and masks on the codes.

The f32 bit arithmetic they are made of works on f32 values held as their ``i32`` bit
patterns.  XLA:CPU runs with denormals flushed (FTZ and DAZ: ``2^-130 * 16`` gives 0 there, and
so does converting an f32 subnormal to f64), so every step whose input or output may be an f32
subnormal is done in integer arithmetic: exact scaling by powers of two (:func:`ldexp_bits`),
decoding the exponent of a block maximum (:func:`frexp_bits`), reading an f32 exactly into f64
(:func:`f64_of_f32_bits`) and rounding an f64 to f32 with correct subnormals
(:func:`round_to_f32`, :func:`mul_f32_exact`).  Float instructions are only used where inputs
and outputs are provably normal (or where a flushed result provably cannot change the
answer).  XLA:CPU also turns a division by a constant or a broadcast into a multiplication by
an f32-rounded reciprocal, so no quotient is an f32 division: ``rceil``'s is an integer
comparison (:func:`scale_exponent`), nvfp4's are formed in f64 (:func:`f32_quotient`).
"""

from __future__ import annotations

import fractions
import math
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir
from mxlower.dialect import mx
from mxlower.formats import FLOAT_TYPES, SCALEMODE_OF, MXFormat
from mxlower.numbers import NumberSpec, ScaleSpec
from mxlower.types import WIDE_FLOAT_TYPES
from mxlower.ir.stablehlo_builder import Builder
from mxlower.lowering.narrow_floats_stablehlo import StableHLOExpansion

__all__ = [
    "dequantize_values",
    "f32_bits_of",
    "f32_bits_floor",
    "frexp_bits",
    "ldexp_bits",
    "lower_cast",
    "lower_op",
    "lower_pack",
    "lower_quantize",
    "lower_scaled_dot",
    "lower_unpack",
    "mul_f32_exact",
    "narrow_codes",
    "narrow_from_codes",
    "normalize_bits",
    "quotient",
    "scale_by_pow2",
    "scale_exponent",
    "shared_exponent",
    "scaled_dot_epilogue",
    "to_f32_bits",
]

_SIGN = -(1 << 31)  # 0x80000000 as a signed i32
_MAG = 0x7FFFFFFF
_MANT = 0x7FFFFF
_INF = 0x7F800000
_NAN = 0x7FC00000


# ----------------------------------------------------------------------------- one mx op


def lower_op(spec: Any, scale_mode: str | None, compute_type: str | None) -> None:
    """Replace the parsed mx op ``spec`` (:func:`mxlower.dialect.mx.parse`) by its StableHLO
    lowering, in place.  ``scale_mode`` / ``compute_type`` override the op's own (None: keep;
    nvfp4's scale rule is fixed).  ``scale_mode`` applies to quantize ops only, not to an MX
    format's ``mx.cast`` (:func:`lower_cast`), whose ``scalemode`` is part of its datatype."""
    op = spec.op
    b = Builder(op.location, ir.InsertionPoint(op))
    if isinstance(spec, mx.QuantizeOp):
        mode = spec.scale_mode if spec.fmt.is_nvfp4 else (scale_mode or spec.scale_mode)
        new = lower_quantize(b, spec, mode)
    elif isinstance(spec, mx.DequantizeOp):
        new = (dequantize_values(b, spec.elements, spec.scales, spec.fmt, spec.block_size,
                                 spec.axis, spec.global_scale, spec.result_type),)
    elif isinstance(spec, mx.CastOp):
        new = (lower_cast(b, spec),)
    elif isinstance(spec, mx.ScaledDotOp):
        new = (lower_scaled_dot(b, spec, compute_type or spec.compute_type),)
    elif isinstance(spec, mx.PackOp):
        new = (lower_pack(b, spec),)
    else:
        new = (lower_unpack(b, spec),)
    for old, value in zip(op.results, new):
        old.replace_all_uses_with(value)
    op.erase()


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


def f64_of_f32_bits(b: Builder, bits: Any) -> Any:
    """The exact f64 value of the f32 bits ``bits`` (i32), subnormals included.

    XLA:CPU converts an f32 subnormal to f64 as 0 (DAZ), so a subnormal is rebuilt from its
    integer mantissa: ``m * 2^-149`` (exact in f64, whose range holds every f32 value as a
    normal number).  Zero, normal, Inf and NaN values: on StableHLO (``b.f64_from_bits``)
    the f64 bits assembled from the f32 bits, since with a constant operand downstream (a
    two-level cast's g folded into the jitted function) XLA rewrote the conversion so that a
    subnormal lane read 0 despite the select; in the kernels the plain conversion."""
    mt = b.and_(bits, _MANT)
    ex = b.and_(bits, _INF)
    sub = b.and_(b.eq(ex, 0), b.ne(mt, 0))
    signed = b.select(b.lt(bits, 0), b.sub(0, mt), mt)
    small = b.mul(b.convert(signed, "f64"), 2.0 ** -149)
    if not b.f64_from_bits:
        return b.select(sub, small, b.convert(b.bitcast(bits, "f32"), "f64"))
    # the others bit by bit (no float conversion for XLA to flush or fold): the exponent
    # re-biased (0 and 255 kept as 0 and 2047), the mantissa moved to the top of f64's
    w = b.convert(b.bitcast(bits, "ui32"), "ui64")
    e = b.shr(b.and_(w, 0x7F800000), 23)
    e = b.select(b.eq(e, 0), e, b.select(b.eq(e, 255), b.like(e, 2047), b.add(e, 1023 - 127)))
    u = b.or_(b.or_(b.shl(b.shr(w, 31), 63), b.shl(e, 52)), b.shl(b.and_(w, _MANT), 29))
    return b.select(sub, small, b.bitcast(u, "f64"))


def round_to_f32(b: Builder, t: Any) -> Any:
    """f64 ``t`` rounded to f32 (RNE), subnormal results included, on a machine that flushes
    them: below 2^-126 the result is rounded in integers (``|t| * 2^149`` to an integer
    count of 2^-149), above by the conversion.  Overflow gives +-Inf, NaN stays NaN."""
    big = b.convert(t, "f32")
    tiny = b.lt(b.abs(t), 2.0 ** -126)
    k = b.convert(b.round_even(b.mul(b.abs(t), 2.0 ** 149)), "i32")  # <= 2^23: exact
    sign = b.shl(b.convert(b.shr(b.bitcast(t, "i64"), 63), "i32"), 31)
    small = b.bitcast(b.or_(sign, k), "f32")
    return b.select(tiny, small, big)


def mul_f32_exact(b: Builder, p: Any, g: Any) -> Any:
    """``p * g`` in f32 with IEEE rounding of subnormal results, on a machine that flushes them.

    ``p`` must be a normal f32 (or zero, Inf, NaN); ``g`` any f32 (broadcast to p's shape).
    The product of two 24-bit significands is exact in f64 (g's subnormals are read exactly by
    :func:`f64_of_f32_bits`), and :func:`round_to_f32` rounds it once."""
    t = b.mul(b.convert(p, "f64"), f64_of_f32_bits(b, b.bitcast(g, "i32")))
    return round_to_f32(b, t)


def f32_quotient(b: Builder, x: Any, r: Any) -> Any:
    """The f32 quotient ``x / d``, correctly rounded (RNE), from ``x``: the exact f64 value of
    an f32, and ``r``: ``RN_f64(1 / d)`` of an f32 ``d`` (broadcast like ``x``).  Computed as
    ``RNE_f32(RN_f64(x * r))``, which XLA:CPU cannot rewrite (it turns ``x / d`` into ``x *
    RN(1 / d)`` in f32, wrong in the last bit for many quotients).

    Why it is exact whenever the quotient is a normal f32 or overflows: write x = X * 2^a and
    d = D * 2^c with integers X, D < 2^24.  An f32 rounding boundary (a midpoint between two
    adjacent f32 values, or the overflow threshold) is mu = M * 2^u with M odd and 2^24 < M <
    2^25.  x / d = mu would need X * 2^a = M * D * 2^(u + c), whose odd parts cannot agree
    (that of M * D is at least M > 2^24 > X), so x / d is never a boundary, and
    |x - mu * d| is a non-zero multiple of 2^min(a, u + c); relative to mu * d < 2^49 *
    2^(u + c) that is more than 2^-49 (when a < u + c, x ~ mu * d forces 2^(a - u - c) >
    M * D / 2^24, which only makes it larger).  So |x / d - mu| > 2^-49 * mu.  The computed
    value has a relative error below 2^-52 (two f64 roundings, of 1 / d and of the product),
    so it lies strictly on the same side of every boundary as x / d, and rounding it to f32
    gives RNE_f32(x / d); where x / d is an f32 value, the nearest boundaries are 2^-25 away
    and it rounds to x / d itself.  No f64 subnormal occurs (|x / d| >= 2^-277).

    A quotient below 2^-126 comes out as a nearby subnormal or, on XLA:CPU (FTZ), a signed
    zero; callers use this only where that cannot change their result."""
    return b.convert(b.mul(x, r), "f32")


def _sig_exp(b: Builder, bits: Any) -> tuple[Any, Any]:
    """(significand, biased exponent field) of f32 magnitude bits as i64: the value is
    sig * 2^(max(field, 1) - 150)."""
    mag = b.and_(bits, _MAG)
    ex = b.shr(mag, 23)
    mt = b.and_(mag, _MANT)
    sig = b.select(b.eq(ex, 0), mt, b.or_(mt, 0x800000))
    return b.convert(sig, "i64"), b.convert(b.max(ex, 1), "i64")


def quotient(b: Builder, x_bits: Any, d_bits: Any | float, *, small: bool = True) -> Any:
    """The f32 bits of RNE_f32(x / d) for f32 bits ``x_bits`` and a positive ``d`` (f32 bits
    of x's shape, or a Python float holding an f32), subnormal quotients included; d = +Inf
    gives a signed zero for finite x.

    Normal (and overflowing) quotients: ``RNE_f32(RN_f64(x * RN_f64(1 / d)))``, exact
    (:func:`f32_quotient`).  Where that product is below 2^-126 the
    quotient is at most 2^-126 (1 + 2^-51), and k = RNE(|x| / d * 2^149), its count of
    2^-149, is an integer division of the significands: with x = X 2^a and d = D 2^c,
    k = RNE(X 2^(a - c + 149) / D), the shift moved to whichever side keeps it exact (a
    divisor shifted by more than 38 bits gives a quotient below 2^-14, that is k = 0).

    ``small=False`` skips that integer path (an i64 division per value) for callers that
    cannot tell a quotient below 2^-126 from a signed zero (:func:`tiny_is_zero`)."""
    xf = f64_of_f32_bits(b, x_bits)
    if isinstance(d_bits, (int, float)):
        if d_bits <= 0 or not math.isfinite(d_bits):
            raise ValueError(f"quotient: divisor {d_bits} must be positive and finite")
        r = b.like(xf, 1.0 / d_bits)
        d_bits = b.like(x_bits, f32_bits_of(d_bits))
    else:
        r = b.div(1.0, f64_of_f32_bits(b, d_bits))
    q = b.mul(xf, r)
    normal = b.bitcast(b.convert(q, "f32"), "i32")
    if not small:
        return normal
    xs, xe = _sig_exp(b, x_bits)
    ds, de = _sig_exp(b, d_bits)
    sh = b.add(b.sub(xe, de), 149)
    p = b.shl(xs, b.clamp(0, sh, 40))
    d = b.shl(ds, b.clamp(0, b.sub(0, sh), 38))
    d = b.max(d, 1)  # lanes with d = 0 never reach here (d > 0); keep the division defined
    quo = b.div(p, d)
    rem = b.sub(p, b.mul(quo, d))
    twice = b.add(rem, rem)
    odd = b.eq(b.and_(quo, 1), 1)
    up = b.or_(b.gt(twice, d), b.and_(b.eq(twice, d), odd))
    k = b.convert(b.add(quo, b.select(up, b.like(quo, 1), b.like(quo, 0))), "i32")
    tiny = b.or_(b.eq(b.and_(x_bits, _MAG), 0), b.lt(b.abs(q), 2.0 ** -126))
    # a divisor of +Inf (a float scale that overflowed) gives a signed zero
    small = b.select(b.ge(b.and_(d_bits, _MAG), _INF), b.like(k, 0), k)
    return b.select(tiny, b.or_(b.and_(x_bits, _SIGN), small), normal)


def f32_bits_of(v: float) -> int:
    """The bits of the f32 value ``v`` as a signed i32."""
    f = np.float32(v)
    if float(f) != v:
        raise ValueError(f"{v} is not an f32 value")
    return int(f.view(np.int32))


# ----------------------------------------------------------------------------- quantize


def _bits_floor(x: fractions.Fraction) -> int:
    return f32_bits_floor(x)


def scale_exponent(b: Any, amax: Any, n: NumberSpec, s: ScaleSpec, mode: str) -> Any:
    """The shared exponent E of a block or tile (i32, clamped to the range of the exponent
    scale spec ``s``'s number) from the bits of its finite non-negative amax: docs/semantics.md
    section 10.3's ``max`` (section 3.3's ``floor``), ``midmax``, ``rceil`` and ``nearest``,
    with the element spec ``n``'s emax / max / midmax as scaled data (intK: fixed point).
    The one implementation of the rule: the MX formats' quantize (StableHLO and the fused
    kernels) and every exponent-scaled datatype's cast call it.

    Where the element values reach 1 (emax >= 0) and the scale's range ends at or above
    2^-127 (every MX format), ``rceil`` and ``nearest`` are decided on amax's exponent and
    mantissa fields with two thresholds below 2^-126 (no quotient is formed); otherwise on
    the renormalized fields and, for ``rceil``, the exact quotient (:func:`quotient`)."""
    mode = SCALEMODE_OF.get(mode, mode)  # section 3's names: floor is max
    emax = n.scaled_emax
    lo, top = s.number.emin, s.number.emax
    two = fractions.Fraction(2)
    fields = emax >= 0 and lo >= -127  # the field-based forms apply
    zero_is_low = fields  # amax = 0 gives E <= lo by itself (else a select sets lo)
    if mode == "max":
        e = b.sub(frexp_bits(b, amax), emax)  # exact for subnormals; amax = 0: -150 - emax
        zero_is_low = -150 - emax <= lo
    elif mode == "midmax":
        # amax * 2^-E = f * 2^emax with f = 1 + mt / 2^23; up when f >= midmax / 2^emax
        _, ex, mt = normalize_bits(b, amax)
        thr = math.ceil((n.scaled_midmax_exact / two ** emax - 1) * 2 ** 23)
        e = b.add(b.sub(ex, 127 + emax),
                  b.select(b.ge(mt, thr), b.like(amax, 1), b.like(amax, 0)))
        zero_is_low = False
    elif mode == "rceil" and fields and 2 - n.scaled_max_exact / two ** emax > two ** -23:
        m = n.scaled_max_exact
        low = b.lt(amax, _bits_floor(m * two ** -126))  # q = amax / M would be subnormal
        # q is the f32 quotient (rounded): E = -126 when it rounds above 2^-127, -127 at or
        # below (the largest amax whose q rounds to 2^-127 or less)
        thr = _bits_floor(m * two ** -127 * (1 + two ** -23))
        e_low = b.select(b.gt(amax, thr), b.like(amax, -126), b.like(amax, -127))
        # q normal: no division (XLA:CPU would multiply by a rounded 1 / M instead).  With
        # amax = 2^e * f and M = 2^emax * F (f, F in [1, 2)), q = RNE(2^(e - emax) * f / F) and
        # E = ceil(log2 q) = e - emax + [f > F * (1 + 2^-24)]: f / F in [1, 2) rounds above 1
        # exactly when it exceeds the midpoint 1 + 2^-24 (which ties down to 1), and f / F in
        # (1/2, 1) rounds to at most 1 (it would reach 1 + 2^-23 only if F >= 2 - 2^-23)
        limit = m / two ** emax * (1 + two ** -24) - 1
        up = b.select(b.gt(b.and_(amax, _MANT), math.floor(limit * 2 ** 23)),
                      b.like(amax, 1), b.like(amax, 0))
        e_hi = b.add(b.sub(b.shr(amax, 23), 127 + emax), up)
        e = b.select(low, e_low, e_hi)
    elif mode == "rceil":
        q = quotient(b, amax, float(n.scaled_max_exact))
        # a normal q is a power of two when its mantissa field is 0; a subnormal q = k 2^-149
        # when k & (k - 1) == 0
        pow2 = b.select(b.ge(q, 0x800000), b.eq(b.and_(q, _MANT), 0),
                        b.eq(b.and_(q, b.sub(q, 1)), 0))
        e = b.add(frexp_bits(b, q), b.select(pow2, b.like(q, 0), b.like(q, 1)))
        e = b.select(b.eq(q, 0), b.like(amax, -100000), e)
        zero_is_low = False
    elif mode == "nearest" and fields:
        ex = b.shr(amax, 23)
        up = b.select(b.ge(b.and_(amax, _MANT), 0x400000), b.like(ex, 1), b.like(ex, 0))
        e_hi = b.add(b.sub(ex, emax + 127), up)  # amax / 2^emax is normal: e8m0 rounding
        # below 2^-126, v = amax 2^-emax taken exactly (never an f32 quotient, which would
        # round v in (2^-127, 2^-127 + 2^-150] down to 2^-127): E = -126 when v > 2^-127,
        # -127 at or below
        thr = _bits_floor(two ** (emax - 127))
        e_low = b.select(b.gt(amax, thr), b.like(amax, -126), b.like(amax, -127))
        e = b.select(b.gt(ex, emax), e_hi, e_low)
    elif mode == "nearest":
        # v = amax 2^-emax exactly: floor(log2 v) + [significand >= 1.5] when v >= 2^-126;
        # below, -126 when v > 2^-127 and -127 otherwise (f8E8M0FNU's rounding of v)
        _, ex, mt = normalize_bits(b, amax)
        base = b.sub(ex, 127 + emax)
        hi = b.add(base, b.select(b.ge(mt, 0x400000), b.like(amax, 1), b.like(amax, 0)))
        low = b.select(b.and_(b.eq(base, -127), b.gt(mt, 0)), b.like(amax, -126),
                       b.like(amax, -127))
        e = b.select(b.ge(base, -126), hi, low)
        zero_is_low = False
    else:
        raise ValueError(f"unknown scale mode {mode!r}")
    if not zero_is_low:
        e = b.select(b.eq(amax, 0), b.like(amax, lo), e)
    return b.clamp(lo, e, top)


def shared_exponent(b: Any, amax: Any, fmt: MXFormat, mode: str) -> Any:
    """:func:`scale_exponent` in the MX formats' words (docs/semantics.md section 3.3): the
    shared exponent of a block of ``fmt`` with the scale rule ``mode`` (floor, rceil,
    nearest), clamped to E8M0's [-127, 127]."""
    dt = fmt.datatype
    return scale_exponent(b, amax, dt.number, dt.scale, mode)


def _not_axis(rank: int, axis: int) -> list[int]:
    return [i for i in range(rank) if i != axis]


def lower_quantize(b: Any, q: Any, mode: str) -> tuple[Any, Any]:
    """(elements, scales) of the parsed ``mx.quantize`` ``q`` with scale rule ``mode``
    (docs/semantics.md section 3; nvfp4: section 4)."""
    fmt = q.fmt
    xb = b.split_blocks(to_f32_bits(b, q.input), q.axis, q.block_size)
    bd = q.axis + 1
    bshape = b.shape(xb)
    keep = _not_axis(len(bshape), bd)
    if fmt.is_nvfp4:
        return _quantize_nvfp4(b, q, xb, bd)
    amax = b.reduce(b.and_(xb, _MAG), [bd], "max", 0)
    nonfinite = b.ge(amax, _INF)
    e = shared_exponent(b, amax, fmt, mode)
    codes = b.select(nonfinite, b.like(e, 255), b.add(e, 127))
    scales = b.bitcast(b.convert(codes, "ui8"), fmt.scale)
    # |x| * 2^-E saturated at max_elem (mxint8: at 127/64, so that y * 64 needs no clamp)
    y = scale_by_pow2(b, xb, b.sub(0, e), keep, _bits_floor(fractions.Fraction(fmt.max_elem)),
                      nonfinite)
    if fmt.is_int:
        elems = b.convert(b.round_even(b.mul(y, 64.0)), "i8")
    else:
        elems = b.convert(y, fmt.element)
    return b.unblock(elems, q.axis), scales


def lower_cast(b: Any, c: Any) -> Any:
    """The result of the parsed ``mx.cast`` ``c`` whose datatype is an MX format's (``c.fmt``
    set; docs/semantics.md section 10.4, the virtual cast): the format's quantize of the input
    (:func:`lower_quantize` with the scale rule ``c.scale_mode``; no global scale: ``mx.cast``
    takes one-level datatypes only) and its dequantize (:func:`dequantize_values`) to the
    input's type.  That dequantize forms the exact f32 value and rounds it once to the result
    type, which is the cast's contract (the general recipe,
    :mod:`mxlower.lowering.cast_math`, decodes to f32 and converts the same way).

    The elements and scales between the two never leave the cast, so their narrow float types
    (f8 / f6 / f4 elements, f8E8M0FNU / f8E4M3FN scales) are expanded here into ui8 codes and
    the codec's integer conversions, as ``mxlower-expand-narrow-floats`` would expand them:
    like the general recipe's, the lowering has no narrow float type, and runs wherever that
    one did (f6 on XLA:CPU, which has no f6 type, and under mxlower.jax, which expands only
    the narrow types of a lowering's arguments and results)."""
    if c.fmt is None:
        raise ValueError(f"lower_cast: {c.datatype.code} is no MX format's datatype "
                         "(mxlower.lowering.cast_math lowers it)")
    q = mx.QuantizeOp(c.op, c.input, None, c.fmt, c.block_size, c.axis, c.scale_mode,
                      c.shape, c.input_type)
    elements, scales = lower_quantize(b, q, c.scale_mode)
    out = dequantize_values(b, elements, scales, c.fmt, c.block_size, c.axis, None,
                            c.input_type)
    x = StableHLOExpansion(frozenset(FLOAT_TYPES))
    with b.loc:
        ops = x.connected([elements, scales])
        problems = [why for why in map(x.problem, ops) if why]
        if problems:  # the MX recipe makes only conversions and data movement of them
            raise AssertionError(f"lower_cast: {problems[0]}")
        x.expand(ops)
    return out


def scale_by_pow2(b: Any, xb: Any, s: Any, keep: list[int], limit: int, zero: Any) -> Any:
    """f32 ``sign(x) * min(|x| * 2^s, L)`` for the f32 bits ``xb`` (blocked, [..., nb, k, ...]),
    a per-block exponent ``s`` in [-127, 127] ([..., nb, ...]) and the bits ``limit`` of a
    normal L; +0 throughout the blocks where ``zero`` ([..., nb, ...]) holds.

    Computed on the bits, so XLA:CPU's flushing of subnormals plays no part: the exponent
    field of |x| gains s (a subnormal x = m * 2^-149 is taken as f32(m), whose field gains
    s - 149), and one integer clamp to [0, limit] saturates the result.  Exact whenever
    |x| * 2^s is a normal f32 or above L.  Below 2^-126 the exponent underflows and the result
    is +-0 or some other f32 under 2^-126 of the right sign, which every element type rounds
    to the signed zero it gives the exact value (their smallest subnormal is at least 2^-16;
    mxint8 rounds y * 64).  No sum leaves i32: a finite block's |x| * 2^s is at most
    2^(emax_elem + 1), a subnormal's shift is held at -256 or above (where x * 2^s < 2^-233),
    and blocks to be zeroed (the non-finite ones) take s = 0 and limit 0.
    """
    bshape = b.shape(xb)

    def per_element(v: Any) -> Any:
        return b.broadcast(v, bshape, keep)

    mag = b.and_(xb, _MAG)
    s = b.select(zero, b.like(s, 0), s)
    # subnormal (or zero) x: f32(m) * 2^(s - 149); at s - 149 < -256 (where x * 2^s < 2^-233)
    # the exponent moves by -256 instead, which keeps the sum in i32 and still negative
    k = b.max(b.sub(s, 149), -256)
    r_sub = b.add(b.bitcast(b.convert(mag, "f32"), "i32"), per_element(b.shl(k, 23)))
    r = b.select(b.lt(mag, 0x800000), r_sub, b.add(mag, per_element(b.shl(s, 23))))
    hi = per_element(b.select(zero, b.like(s, 0), b.like(s, limit)))
    sign = b.and_(xb, per_element(b.select(zero, b.like(s, 0), b.like(s, _SIGN))))
    return b.bitcast(b.or_(sign, b.clamp(0, r, hi)), "f32")


def reciprocal_f64(b: Any, bits: Any) -> Any:
    """``RN_f64(1 / d)`` of the f32 ``d`` with bits ``bits`` (the ``r`` of :func:`f32_quotient`;
    a subnormal d is read exactly)."""
    return b.div(1.0, f64_of_f32_bits(b, bits))


def divide_by_global(b: Any, xb: Any, r: Any, *, exact_small: bool = True) -> Any:
    """Bits of y = RNE_f32(x / g) (docs/semantics.md section 4, step 1) for the f32 bits ``xb``
    and ``r`` = :func:`reciprocal_f64` of g (broadcast like ``xb``): exact whenever y is a
    normal f32 or overflows (:func:`f32_quotient`; subnormal x and g are read exactly).  A
    subnormal y may come out as another value below 2^-126 or a signed zero, which nvfp4
    cannot tell from the exact one: such a y is below 2^-126 / 2^-9 times its block scale,
    so its element rounds to +-0 (by y's sign), and a block of only such values has amax / 6
    below 2^-128, whose scale rounds to 0.

    ``exact_small=False`` reads x with a plain conversion to f64, which gives +-0 for a
    subnormal x where the CPU treats subnormal inputs as zero (XLA:CPU's threads).  That is
    only valid when |g| >= :data:`NVFP4_G_FAST` = 2^-115: then a subnormal x (|x| < 2^-126)
    has |x / g| < 2^-11 and RNE_f32(|x / g|) <= 2^-11 - 2^-34, below the smallest element
    threshold 0.25 * 2^-9 = 2^-11 of any non-zero scale (so the element is +-0 by x's and g's
    signs, which the zero keeps) and below 6 * 2^-10, so as a block maximum it gives the scale
    0 as the zero does."""
    x = f64_of_f32_bits(b, xb) if exact_small else b.convert(b.bitcast(xb, "f32"), "f64")
    return b.bitcast(f32_quotient(b, x, r), "i32")


#: the smallest |g| for which :func:`divide_by_global` may read subnormal x as zero
NVFP4_G_FAST = 2.0 ** -115


def nvfp4_scale_f32(b: Any, amax_bits: Any, nonfinite: Any) -> Any:
    """docs/semantics.md section 4, step 3 before the E4M3 rounding: min(RNE_f32(amax / 6),
    448) for the bits of a block maximum (NaN where ``nonfinite``).  A subnormal amax reads as
    0 on XLA:CPU, which does not matter: amax / 6 < 2^-128 rounds to the scale 0 anyway."""
    amax = b.convert(b.bitcast(amax_bits, "f32"), "f64")
    s = b.min(f32_quotient(b, amax, 1.0 / 6.0), 448.0)
    return b.select(nonfinite, b.like(s, float("nan")), s)


def nvfp4_reciprocal(b: Any, sd: Any, drop: Any) -> Any:
    """``RN_f64(1 / s)`` of each block's decoded scale ``sd`` (f32, normal: at least 2^-9),
    1 for the blocks in ``drop`` (zero or NaN scales, whose elements are all +0)."""
    return b.div(1.0, b.convert(b.select(drop, b.like(sd, 1.0), sd), "f64"))


def nvfp4_element_values(b: Any, yb: Any, r: Any) -> Any:
    """docs/semantics.md section 4, step 5 before the f4 rounding: clamp(RNE_f32(y / s), -6,
    6) for the f32 bits ``yb`` and ``r`` = :func:`nvfp4_reciprocal` (broadcast like ``yb``).
    A subnormal y reads as a signed zero on XLA:CPU, and y / s below 2^-126 may be flushed:
    both are far below the f4 rounding threshold 0.25 and give +-0 by y's sign either way."""
    y = b.convert(b.bitcast(yb, "f32"), "f64")
    return b.clamp(-6.0, f32_quotient(b, y, r), 6.0)


#: f4E2M1FN's rounding thresholds (the midpoints between adjacent magnitudes) and whether a
#: quotient equal to one rounds up (RNE: to the even code)
_F4_THRESHOLDS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False),
                  (3.5, True), (5.0, False))


def nvfp4_element_codes(b: Any, yb: Any, s: Any) -> Any:
    """docs/semantics.md section 4, step 5 without a division: the i32 f4E2M1FN codes of
    RNE_f4(clamp(RNE_f32(y / s), -6, 6)) for the f32 bits ``yb`` and the decoded block scales
    ``s`` (f32, shaped like ``yb``: an E4M3 value, at least 2^-9 -- the codes of a zero or NaN
    scale are meaningless, such blocks are the caller's to clear).  Used by the StableHLO
    lowering and the CPU kernel (any builder of the MX math).

    The code of a = |y| counts the f4 thresholds t (the midpoints 0.25 .. 5 between adjacent
    magnitudes) that q = RNE_f32(a / s) passes: q >= t where a tie rounds up (to the even
    code), q > t where it rounds down.  Both tests reduce to comparing a with p = t * s, an
    exact f32 (at most 3 + 4 significant bits, and s >= 2^-9 keeps it normal): with s = m 2^e,
    1 <= m < 2, p = t m 2^e lies in t's binade times 2^e or above, so on each side the next
    f32 is at least (the f32 spacing next to t on that side) * 2^e from p, and an f32 a != p
    has |a / s - t| > half that spacing (m < 2) -- beyond where RNE_f32 would round a / s to
    t itself.  Hence q >= t iff a >= p and q > t iff a > p: the f32 rounding of the quotient
    never changes the f4 result, and no quotient is formed (XLA:CPU's rewrite of divisions
    into rounded reciprocals cannot interfere).  The comparisons are on the bits, so a
    subnormal a compares as itself (it is below every p either way).  Three comparisons
    instead of seven: a binary search over the increasing thresholds, each level's t picked
    per lane and multiplied by s (the fastest form measured, in the kernel and in StableHLO:
    BENCHMARKS.md, "nvfp4 quantize kernel").  The sign is y's (a negative y that rounds to 0
    gives -0, as RNE_f4 does)."""
    mag = b.and_(yb, _MAG)
    t = [v for v, _ in _F4_THRESHOLDS]
    up = [u for _, u in _F4_THRESHOLDS]
    # the levels: t[3]; t[1] or t[5]; one of t[0], t[2], t[4], t[6] -- each level's
    # candidates share a tie direction, so one comparison serves the level
    assert up[3] and up[1] == up[5] and up[0] == up[2] == up[4] == up[6]

    def passes(tv: Any, tie_up: bool) -> Any:
        p = b.bitcast(b.mul(s, tv), "i32")
        return b.ge(mag, p) if tie_up else b.gt(mag, p)

    def pick(c: Any, a: float, z: float) -> Any:
        return b.select(c, b.like(s, a), b.like(s, z))

    hi = passes(t[3], up[3])                                    # code >= 4
    mid = passes(pick(hi, t[5], t[1]), up[1])                   # code >= 6, or >= 2
    low = passes(b.select(hi, pick(mid, t[6], t[4]), pick(mid, t[2], t[0])), up[0])
    c = b.and_(b.shr(yb, 28), 8)  # the sign
    for bit, k in ((4, hi), (2, mid), (1, low)):
        c = b.select(k, b.or_(c, bit), c)
    return c


def nvfp4_limit(b: Any, p: Any, tie_up: bool, g_abs: Any | None = None) -> Any:
    """The i32 bits of the smallest f32 |x| whose element passes the f4 threshold t of a
    block with scale s, for ``p`` = t * s (f32, exact and normal: s is a non-zero E4M3 value),
    so that the element test of :func:`nvfp4_element_codes` becomes one comparison of |x|'s
    bits (as unsigned integers) with a limit that depends only on (t, s, g).

    Without a global scale y = x: passing is |y| >= p (``tie_up``) or |y| > p, so the limit
    is p's bits, plus one for ">".  With one, y = RNE_f32(x / g), and RNE_f32 is monotone, so
    the set of |x| that pass is again upward closed; ``g_abs`` is |g| as f64.  p has at most
    7 significant bits, so its last bit is 0 and a tie at the midpoint m = (pred(p) + p) / 2
    rounds up to p: |y| >= p iff |x| / |g| >= m iff |x| >= m |g|, whose smallest f32 is
    RU_f32(m |g|).  The successor of p is odd, so a tie at m' = (p + succ(p)) / 2 rounds down
    to p: |y| > p iff |x| > m' |g|, smallest f32 nextup(RD_f32(m' |g|)).  m has 25
    significant bits and |g| 24, so m |g| is exact in f64, and RU / RD come from the RNE
    conversion compared back with it.  For |g| >= :data:`NVFP4_G_FAST` every m |g| is at least
    2^-126 (p >= 2^-11), so no f32 subnormal is formed and the conversion is exact under
    flush-to-zero; an m |g| above the f32 range gives +Inf, which no finite |x| reaches."""
    pb = b.bitcast(p, "i32")
    if g_abs is None:
        return pb if tie_up else b.add(pb, 1)
    nb = b.sub(pb, 1) if tie_up else b.add(pb, 1)  # pred(p) or succ(p): p is normal
    v = b.mul(b.add(b.convert(p, "f64"), b.convert(b.bitcast(nb, "f32"), "f64")),
              b.mul(g_abs, 0.5))
    c = b.convert(v, "f32")
    cb = b.bitcast(c, "i32")
    c64 = b.convert(c, "f64")
    if tie_up:  # RU: one step up where the nearest f32 is below m |g|
        return b.select(b.lt(c64, v), b.add(cb, 1), cb)
    return b.select(b.gt(c64, v), cb, b.add(cb, 1))  # RD, then the next f32


def f4_limit_pow2(b: Any, t: float, tie_up: bool, e: Any) -> Any:
    """The i32 bits of the smallest f32 |x| whose mxfp4 element passes the f4 threshold ``t``
    in a block of shared exponent ``e`` (i32, -127..127): x * 2^-e is exact, so passing is
    |x| >= t * 2^e (``tie_up``) or |x| > t * 2^e, and t * 2^e is an f32 (t has at most 3
    significant bits and e >= -127 keeps it a multiple of 2^-129), +Inf past the range: its
    bits, plus one for ">"."""
    p = ldexp_bits(b, b.like(e, f32_bits_floor(fractions.Fraction(t))), e, small="exact",
                   normal_input=True)
    return p if tie_up else b.add(p, 1)


def _quantize_nvfp4(b: Any, q: Any, xb: Any, bd: int) -> tuple[Any, Any]:
    bshape = b.shape(xb)
    keep = _not_axis(len(bshape), bd)
    if q.global_scale is not None:
        r = reciprocal_f64(b, b.bitcast(q.global_scale, "i32"))
        xb = divide_by_global(b, xb, b.broadcast(r, bshape, []))
    amax_bits = b.reduce(b.and_(xb, _MAG), [bd], "max", 0)
    nonfinite = b.ge(amax_bits, _INF)
    scales = b.convert(nvfp4_scale_f32(b, amax_bits, nonfinite), "f8E4M3FN")  # NaN -> 0x7F
    sd = b.convert(scales, "f32")
    drop = b.or_(nonfinite, b.eq(sd, 0.0))
    codes = nvfp4_element_codes(b, xb, b.broadcast(b.select(drop, b.like(sd, 1.0), sd),
                                                    bshape, keep))
    codes = b.select(b.broadcast(drop, bshape, keep), b.like(codes, 0), codes)
    return b.unblock(narrow_from_codes(b, codes, "f4E2M1FN"), q.axis), scales


# ----------------------------------------------------------------------------- dequantize


def dequantize_values(b: Any, elements: Any, scales: Any, fmt: MXFormat, k: int, axis: int,
                      global_scale: Any | None, out_type: str) -> Any:
    """docs/semantics.md section 5: decode(e) * decode(s) exactly in f32 (nvfp4: then * g), rounded once to
    ``out_type``."""
    ev = b.convert(elements, "f32")
    if fmt.is_nvfp4:
        p = b.mul(ev, b.expand_blocks(b.convert(scales, "f32"), axis, k))  # exact, normal
        if global_scale is not None:
            p = mul_f32_exact(b, p, b.broadcast(global_scale, b.shape(p), []))
        return b.convert(p, out_type)
    c = b.expand_blocks(b.convert(b.bitcast(scales, "ui8"), "i32"), axis, k)
    shift = b.sub(c, 127 + (6 if fmt.is_int else 0))
    # decode(e) is normal (or 0, Inf, NaN) with <= 7 significant bits and the product is at
    # least 2^-143: exact in f32, so subnormal results need no rounding
    r = ldexp_bits(b, b.bitcast(ev, "i32"), shift, small="exact", normal_input=True)
    r = b.select(b.eq(c, 255), b.like(r, _NAN), r)
    return b.convert(b.bitcast(r, "f32"), out_type)


# ----------------------------------------------------------------------------- scaled dot


def dequantize_f64(b: Any, elements: Any, scales: Any, fmt: MXFormat, k: int,
                   axis: int) -> Any:
    """docs/semantics.md section 5 to f32, held exactly in f64: decode(e) * decode(s), +-Inf
    where the f32 product overflows, NaN for a NaN scale.  The f64 product is exact and never
    subnormal (it is at least 2^-143), so no bit arithmetic is needed for small results."""
    if fmt.is_nvfp4:  # exact and normal in f32 (section 5)
        p = b.mul(b.convert(elements, "f32"), b.expand_blocks(b.convert(scales, "f32"), axis, k))
        return b.convert(p, "f64")
    c = b.convert(b.convert(b.bitcast(scales, "ui8"), "i32"), "i64")
    e = b.sub(c, 127 + (6 if fmt.is_int else 0))
    sv = b.bitcast(b.shl(b.add(e, 1023), 52), "f64")  # 2^e, e in [-133, 127]
    sv = b.select(b.eq(c, 255), b.like(sv, float("nan")), sv)
    ev = b.convert(elements if fmt.is_int else b.convert(elements, "f32"), "f64")  # exact
    v = b.mul(ev, b.expand_blocks(sv, axis, k))
    # f32 overflows at 2^128 (a value of <= 8 significant bits below 2^128 is an f32)
    return b.select(b.ge(b.abs(v), 2.0 ** 128), b.mul(v, float("inf")), v)


def _exact_f64(b: Any, v: Any) -> Any:
    """The f64 value of an f32, bf16 or f16 tensor, exactly (subnormals too)."""
    return f64_of_f32_bits(b, to_f32_bits(b, v))


def _exponent_range(b: Any, o: Any) -> tuple[Any, Any]:
    """(q, t), ``tensor<i32>``: every value of the operand ``o`` of a scaled dot, dequantized
    (or converted) to its compute type, is a multiple of 2^q and at most 2^t in magnitude.

    A scaled operand's values are element * 2^(c - 127): from the smallest and the largest
    scale code c, by :attr:`MXFormat.value_exponents` (nvfp4's whatever the scales).  A plain
    operand's non-zero values x
    are multiples of 2^(floor(log2 |x|) - mantissa bits) (an f32 or bf16 subnormal gives a q
    below -149, Inf and NaN a t of 129).  Rounding to a bf16 or f16 compute type keeps both
    bounds (it rounds to coarser multiples, and never above the next power of two)."""
    def scalar(v: int) -> Any:
        return b.const(v, "i32")

    v = o.value
    dims = list(range(len(b.shape(v))))
    if o.fmt is None:
        mag = b.and_(to_f32_bits(b, v), _MAG)
        field = b.shr(mag, 23)
        nonzero = b.ne(mag, 0)
        lo = b.reduce(b.select(nonzero, field, b.like(field, 255)), dims, "min", 255)
        hi = b.reduce(b.select(nonzero, field, b.like(field, 0)), dims, "max", 0)
        mantissa = WIDE_FLOAT_TYPES[b.etype(v)].man_bits
        return b.sub(lo, 127 + mantissa), b.sub(hi, 126)
    fmt = o.fmt
    q, t = fmt.value_exponents
    if fmt.is_nvfp4:
        return scalar(q), scalar(t)
    # reduced as ui8 codes, the two scalars converted (XLA:CPU materialized an i32 copy of
    # the scales for each reduction otherwise: milliseconds on a 4096 x 4096 GEMV's scales)
    c = b.bitcast(o.scales, "ui8")
    lo = b.convert(b.reduce(c, list(range(len(b.shape(c)))), "min", 255), "i32")
    hi = b.convert(b.reduce(c, list(range(len(b.shape(c)))), "max", 0), "i32")
    return b.add(lo, q), b.add(hi, t)


def _f32_dot_is_exact(b: Any, s: Any) -> Any:
    """``tensor<i1>``: whether an f32 ``dot_general`` of the compute-typed operands of the
    scaled dot ``s`` meets docs/semantics.md section 6 even on a machine that flushes
    subnormals (XLA:CPU): no operand, product or partial sum can be below 2^-126 unless it is
    zero, and none can overflow.  With q, t of :func:`_exponent_range` for both sides, every
    non-zero operand is at least 2^q_side >= 2^-126; every product and every (rounded) partial
    sum is a multiple of 2^(q_lhs + q_rhs) >= 2^-126 (rounding to 24 bits only drops bits below
    its own ulp, which is larger than that quantum whenever it drops any); and every sum is at
    most K * 2^(t_lhs + t_rhs) <= 2^127 for K contracted values.  (The fused dot kernel
    makes the same test itself: :meth:`mxlower.lowering.dot_kernels._DotKernel.range_function`.)"""
    ql, tl = _exponent_range(b, s.lhs)
    qr, tr = _exponent_range(b, s.rhs)
    shape = b.shape(s.lhs.value)
    sizes = [shape[d] for d in s.lhs_contracting]
    k = math.prod(sizes) if all(isinstance(d, int) for d in sizes) else 1 << 31
    log2k = max(k - 1, 0).bit_length()
    ok = b.and_(b.ge(ql, -126), b.ge(qr, -126))
    ok = b.and_(ok, b.ge(b.add(ql, qr), -126))
    return b.and_(ok, b.le(b.add(tl, tr), 127 - log2k))


def lower_scaled_dot(b: Any, s: Any, compute_type: str,
                     prepared: tuple[Any, Any] = (None, None),
                     contraction: Any | None = None) -> Any:
    """The result of the parsed ``mx.scaled_dot`` ``s`` (docs/semantics.md section 6): both
    sides dequantized (or converted) to ``compute_type``, contracted, times the global scale,
    converted to the result type.  ``prepared``: for each side (lhs, rhs), None or a function
    of a :class:`Builder` that emits, at its insertion point, the side's scaled operand
    dequantized to ``compute_type`` (without nvfp4's global scale) by other code, e.g.
    mxlower's fused kernel (:mod:`mxlower.jax.kernels`): docs/semantics.md section 5's exact
    values, subnormals included.  It replaces that side's dequantization in both
    contractions (called in each branch); the f64 one reads the values exactly with
    :func:`f64_of_f32_bits`, since XLA:CPU's f32 -> f64 conversion flushes subnormals.

    XLA:CPU's f32 ``dot_general`` flushes subnormal operands, products and sums to zero, which
    section 6 forbids (a block with scale 2^-127 would vanish).  So a ``stablehlo.if`` picks,
    at run time, between two contractions: the plain f32 one where
    :func:`_f32_dot_is_exact` proves that nothing can be flushed or overflow (a few
    reductions over the scales: ordinary data), and otherwise an exact one in f64 on the
    exact values of the compute-typed operands, rounded once to f32 (:func:`round_to_f32`):
    every product of two f32 values is exact in f64 and at least 2^-298 (no f64 subnormal),
    and the f64 sum's rounding error (at most K * 2^-53 of sum |a_k b_k|) is far inside
    section 6's bound.

    ``contraction``: None, or a function of a :class:`Builder` emitting at its insertion
    point the whole contraction (f32, without the global scale, shaped as the result) by
    other code that meets section 6 on any operands -- mxlower's fused dot kernel
    (:mod:`mxlower.lowering.dot_call`), which makes the run-time test and the exact f64
    contraction itself -- used instead of the test, the ``stablehlo.if`` and both
    contractions."""
    def f32_operand(sub: Any, o: Any, ready: Any | None) -> Any:
        if ready is not None:
            return ready(sub)
        if o.fmt is None:
            return sub.convert(o.value, compute_type)
        return dequantize_values(sub, o.value, o.scales, o.fmt, o.block_size, o.axis, None,
                                 compute_type)

    def f64_operand(sub: Any, o: Any, ready: Any | None) -> Any:
        if ready is not None:
            return _exact_f64(sub, ready(sub))
        if o.fmt is None:
            v = o.value
            if sub.etype(v) != compute_type:  # the exact f32 value, rounded once
                v = sub.convert(sub.bitcast(to_f32_bits(sub, v), "f32"), compute_type)
            return _exact_f64(sub, v)
        if compute_type == "f32":
            return dequantize_f64(sub, o.value, o.scales, o.fmt, o.block_size, o.axis)
        return _exact_f64(sub, dequantize_values(sub, o.value, o.scales, o.fmt, o.block_size,
                                                 o.axis, None, compute_type))

    def contract(sub: Any, operand: Any, elt: str) -> Any:
        lhs, rhs = (operand(sub, o, r) for o, r in zip((s.lhs, s.rhs), prepared))
        return sub.dot_general(lhs, rhs, s.lhs_contracting, s.rhs_contracting, s.lhs_batch,
                               s.rhs_batch, elt)

    if contraction is not None:
        return scaled_dot_epilogue(b, contraction(b), s.global_scale, s.result_type)
    f32_type = ir.RankedTensorType.get(list(s.result_shape), ir.F32Type.get())
    (acc,) = b.if_(_f32_dot_is_exact(b, s), [f32_type],
                   lambda sub: [contract(sub, f32_operand, "f32")],
                   lambda sub: [round_to_f32(sub, contract(sub, f64_operand, "f64"))])
    return scaled_dot_epilogue(b, acc, s.global_scale, s.result_type)


def scaled_dot_epilogue(b: Any, acc: Any, global_scale: Any | None, result_type: str) -> Any:
    """Step 3 of docs/semantics.md section 6: the f32 dot ``acc`` times the f32 scalar
    ``global_scale`` (None: none) in f32 with subnormal results kept -- exact in f64 from
    the operands' bits, rounded once -- then rounded RNE to ``result_type``."""
    if global_scale is not None:
        g = b.broadcast(global_scale, b.shape(acc), [])
        acc = round_to_f32(b, b.mul(f64_of_f32_bits(b, b.bitcast(acc, "i32")),
                                    f64_of_f32_bits(b, b.bitcast(g, "i32"))))
    return b.convert(acc, result_type)


# ----------------------------------------------------------------------------- pack / unpack


def _group(bits: int) -> tuple[int, int]:
    """(values, bytes) of the smallest whole-byte group of ``bits``-bit values."""
    lcm = bits * 8 // math.gcd(bits, 8)
    return lcm // bits, lcm // 8


def narrow_codes(b: Any, v: Any, elt: str) -> Any:
    """i32 codes (0 .. 2^bits-1) of a narrow-typed tensor."""
    t = FLOAT_TYPES.get(elt)
    if t is None or t.bits == 8:  # i8 and the 8-bit floats: a bitcast
        return b.convert(b.bitcast(v, "ui8"), "i32")
    if t.bits == 4:
        return b.convert(b.bitcast(v, "ui4"), "i32")
    # f6: no 6-bit integer type exists, so encode the (exactly representable) f32 value
    bits = b.bitcast(b.convert(v, "f32"), "i32")
    sign = b.shl(b.shr(bits, 31), t.bits - 1)
    ex = b.and_(b.shr(bits, 23), 0xFF)
    mt = b.and_(bits, 0x7FFFFF)
    e_t = b.add(ex, t.bias - 127)
    normal = b.or_(b.shl(e_t, t.man_bits), b.shr(mt, 23 - t.man_bits))
    # subnormal: (2^23 + mt) * 2^(ex - 150) = m * 2^(1 - bias - man)
    sub = b.shr(b.or_(mt, 0x800000), b.clamp(0, b.sub(151 - t.bias - t.man_bits, ex), 31))
    mag = b.select(b.ge(e_t, 1), normal, b.select(b.eq(ex, 0), b.like(ex, 0), sub))
    return b.or_(sign, mag)


def narrow_from_codes(b: Any, codes: Any, elt: str) -> Any:
    t = FLOAT_TYPES.get(elt)
    if t is None or t.bits == 8:
        return b.bitcast(b.convert(codes, "ui8"), elt)
    if t.bits == 4:
        return b.bitcast(b.convert(codes, "ui4"), elt)
    sign = b.shl(b.shr(codes, t.bits - 1), 31)
    m = b.and_(codes, (1 << (t.bits - 1)) - 1)
    e = b.shr(m, t.man_bits)
    f = b.and_(m, (1 << t.man_bits) - 1)
    normal = b.or_(b.shl(b.add(e, 127 - t.bias), 23), b.shl(f, 23 - t.man_bits))
    sub = b.bitcast(b.mul(b.convert(f, "f32"), 2.0 ** (1 - t.bias - t.man_bits)), "i32")
    v = b.or_(sign, b.select(b.eq(e, 0), sub, normal))
    return b.convert(b.bitcast(v, "f32"), elt)


def lower_pack(b: Any, p: Any) -> Any:
    """The ui8 bytes of the parsed ``mx.pack`` ``p``: along the axis, each smallest group of
    codes that fills whole bytes becomes one little-endian word, code i at bit ``bits * i``."""
    codes = narrow_codes(b, p.input, p.element_type)
    if p.bits == 8:
        return b.convert(codes, "ui8")
    g, nbytes = _group(p.bits)
    grouped = b.split_blocks(codes, p.axis, g)
    gshape = list(b.shape(grouped))
    word = b.shl(grouped, b.along([p.bits * i for i in range(g)], gshape, p.axis + 1))
    word = b.reduce(word, [p.axis + 1], "or", 0)
    wshape = list(b.shape(word))
    big = wshape[:p.axis + 1] + [nbytes] + wshape[p.axis + 1:]
    spread = b.broadcast(word, big, _not_axis(len(big), p.axis + 1))
    out = b.and_(b.shr(spread, b.along([8 * j for j in range(nbytes)], big, p.axis + 1)), 0xFF)
    return b.unblock(b.convert(out, "ui8"), p.axis)


def lower_unpack(b: Any, u: Any) -> Any:
    """The typed values of the parsed ``mx.unpack`` ``u``: the inverse of :func:`lower_pack`."""
    raw = b.convert(u.input, "i32")
    if u.bits == 8:
        return narrow_from_codes(b, raw, u.element_type)
    g, nbytes = _group(u.bits)
    grouped = b.split_blocks(raw, u.axis, nbytes)
    gshape = list(b.shape(grouped))
    word = b.shl(grouped, b.along([8 * j for j in range(nbytes)], gshape, u.axis + 1))
    word = b.reduce(word, [u.axis + 1], "or", 0)
    wshape = list(b.shape(word))
    big = wshape[:u.axis + 1] + [g] + wshape[u.axis + 1:]
    spread = b.broadcast(word, big, _not_axis(len(big), u.axis + 1))
    codes = b.and_(b.shr(spread, b.along([u.bits * i for i in range(g)], big, u.axis + 1)),
                   (1 << u.bits) - 1)
    return narrow_from_codes(b, b.unblock(codes, u.axis), u.element_type)
