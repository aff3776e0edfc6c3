"""The MX recipe: mx ops as plain StableHLO computing docs/semantics.md exactly.

Every function here emits StableHLO through :class:`mxlower.ir.stablehlo_builder.Builder`;
``mxlower-decompose-mx`` calls :func:`lower_op` on each parsed ``mx`` op (and
``mxlower-pack-subbyte-args`` calls :func:`lower_pack` / :func:`lower_unpack`).

* quantize (docs/semantics.md section 3, 4): a block reduction of the magnitude bits, integer exponent
  arithmetic for the shared scale (:func:`shared_exponent`: floor / rceil / nearest), exact
  power-of-two scaling and saturation of the elements on their bits (:func:`scale_by_pow2`),
  then a ``stablehlo.convert`` to the element type; nvfp4 with its E4M3 block scale and
  optional global scale;
* dequantize (section 5): :func:`dequantize_values`, an integer ``ldexp`` of the decoded
  elements by the decoded scale;
* scaled dot (section 6): :func:`lower_scaled_dot`, both operands dequantized to the compute
  type and contracted with ``stablehlo.dot_general`` accumulating in f32;
* pack / unpack: :func:`lower_pack`, :func:`lower_unpack`, shifts and masks on the codes.

The f32 bit arithmetic they are made of works on f32 values held as their ``i32`` bit
patterns.  XLA:CPU runs with denormals flushed (FTZ and DAZ: ``2^-130 * 16`` gives 0 there, and
so does converting an f32 subnormal to f64), so every step whose input or output may be an f32
subnormal is done in integer arithmetic: exact scaling by powers of two (:func:`ldexp_bits`),
decoding the exponent of a block maximum (:func:`frexp_bits`), and an f32 multiply that rounds
subnormal results correctly (:func:`mul_f32_exact`).  Float instructions are only used where
inputs and outputs are provably normal (or where a flushed result provably cannot change the
answer).
"""

from __future__ import annotations

import fractions
import math
from typing import Any

import numpy as np

from mxlower.bindings.jaxlib import ir
from mxlower.dialect import mx
from mxlower.formats import FLOAT_TYPES, MXFormat
from mxlower.ir.stablehlo_builder import Builder

__all__ = [
    "dequantize_values",
    "f32_bits_floor",
    "frexp_bits",
    "ldexp_bits",
    "lower_op",
    "lower_pack",
    "lower_quantize",
    "lower_scaled_dot",
    "lower_unpack",
    "mul_f32_exact",
    "normalize_bits",
    "scale_by_pow2",
    "shared_exponent",
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
    nvfp4's scale rule is fixed)."""
    op = spec.op
    b = Builder(op.location, ir.InsertionPoint(op))
    if isinstance(spec, mx.QuantizeOp):
        mode = spec.scale_mode if spec.fmt.is_nvfp4 else (scale_mode or spec.scale_mode)
        new = lower_quantize(b, spec, mode)
    elif isinstance(spec, mx.DequantizeOp):
        new = (dequantize_values(b, spec.elements, spec.scales, spec.fmt, spec.block_size,
                                 spec.axis, spec.global_scale, spec.result_type),)
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


# ----------------------------------------------------------------------------- quantize


def _bits_floor(x: fractions.Fraction) -> int:
    return f32_bits_floor(x)


def shared_exponent(b: Any, amax: Any, fmt: MXFormat, mode: str) -> Any:
    """docs/semantics.md section 3.3: the unclamped shared exponent E from the i32 bits of a finite amax."""
    emax = fmt.emax_elem
    two = fractions.Fraction(2)
    # amax*2^-k for the f32 value just above 2^-127 after rounding: both non-floor modes turn a
    # quotient in (2^-127, 2^-126) into E = -126 and anything at or below 2^-127 into -127
    if mode == "floor":
        return b.sub(frexp_bits(b, amax), emax)
    if mode == "rceil":
        m = fractions.Fraction(fmt.max_elem)
        low = b.lt(amax, _bits_floor(m * two ** -126))  # q = amax / M would be subnormal
        thr = _bits_floor(m * two ** -127 * (1 + two ** -23))
        e_low = b.select(b.gt(amax, thr), b.like(amax, -126), b.like(amax, -127))
        q = b.bitcast(b.div(b.bitcast(amax, "f32"), float(fmt.max_elem)), "i32")  # normal
        up = b.select(b.ne(b.and_(q, 0x7FFFFF), 0), b.like(q, 1), b.like(q, 0))
        e_hi = b.add(b.sub(b.shr(q, 23), 127), up)
        return b.select(low, e_low, e_hi)
    if mode == "nearest":
        ex = b.shr(amax, 23)
        up = b.select(b.ge(b.and_(amax, 0x7FFFFF), 0x400000), b.like(ex, 1), b.like(ex, 0))
        e_hi = b.add(b.sub(ex, emax + 127), up)  # amax / 2^emax is normal: e8m0 rounding
        thr = _bits_floor(two ** (emax - 127) * (1 + two ** -23))
        e_low = b.select(b.gt(amax, thr), b.like(amax, -126), b.like(amax, -127))
        return b.select(b.gt(ex, emax), e_hi, e_low)
    raise ValueError(f"unknown scale mode {mode!r}")


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
    e = b.clamp(-127, shared_exponent(b, amax, fmt, mode), 127)
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


def _divide_by_global(b: Any, xb: Any, g: Any) -> Any:
    """Bits of x / g (f32), exact whenever the quotient is a normal f32 even if x or g is
    subnormal; a subnormal quotient may come out as a signed zero (which nvfp4 cannot tell
    from the exact value: its block scale rounds to 0 or its element to +-0)."""
    def subnormal(bits: Any) -> Any:
        return b.and_(b.eq(b.and_(bits, _INF), 0), b.ne(b.and_(bits, 0x7FFFFF), 0))

    gb = b.bitcast(g, "i32")
    x_sub, g_sub = subnormal(xb), subnormal(gb)
    k64 = b.like(xb, 64)
    zero = b.like(xb, 0)
    xn = b.bitcast(ldexp_bits(b, xb, b.select(x_sub, k64, zero)), "f32")
    gn = b.bitcast(ldexp_bits(b, gb, b.select(g_sub, k64, zero)), "f32")
    quot = b.div(xn, gn)
    up = b.and_(g_sub, b.not_(x_sub))
    down = b.and_(x_sub, b.not_(g_sub))
    factor = b.select(up, b.like(quot, 2.0 ** 64),
                      b.select(down, b.like(quot, 2.0 ** -64), b.like(quot, 1.0)))
    return b.bitcast(b.mul(quot, factor), "i32")


def _quantize_nvfp4(b: Any, q: Any, xb: Any, bd: int) -> tuple[Any, Any]:
    bshape = b.shape(xb)
    keep = _not_axis(len(bshape), bd)
    if q.global_scale is not None:
        xb = _divide_by_global(b, xb, b.broadcast(q.global_scale, bshape, []))
    amax_bits = b.reduce(b.and_(xb, _MAG), [bd], "max", 0)
    nonfinite = b.ge(amax_bits, _INF)
    amax = b.bitcast(amax_bits, "f32")
    s = b.min(b.div(amax, 6.0), 448.0)
    s = b.select(nonfinite, b.f32_from_bits(_NAN, b.shape(s)), s)
    scales = b.convert(s, "f8E4M3FN")  # RNE; NaN -> 0x7F
    sd = b.convert(scales, "f32")
    drop = b.or_(nonfinite, b.eq(sd, 0.0))
    sdb = b.broadcast(b.select(drop, b.like(sd, 1.0), sd), bshape, keep)
    v = b.clamp(-6.0, b.div(b.bitcast(xb, "f32"), sdb), 6.0)
    v = b.select(b.broadcast(drop, bshape, keep), b.like(v, 0.0), v)
    return b.unblock(b.convert(v, "f4E2M1FN"), q.axis), scales


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


def lower_scaled_dot(b: Any, s: Any, compute_type: str) -> Any:
    """The result of the parsed ``mx.scaled_dot`` ``s``: both sides dequantized (or converted)
    to ``compute_type``, contracted in f32, times the global scale, converted to the result
    type (docs/semantics.md section 6)."""
    def operand(o: Any) -> Any:
        if o.fmt is None:
            return b.convert(o.value, compute_type)
        return dequantize_values(b, o.value, o.scales, o.fmt, o.block_size, o.axis, None,
                                 compute_type)

    acc = b.dot_general(operand(s.lhs), operand(s.rhs), s.lhs_contracting, s.rhs_contracting,
                        s.lhs_batch, s.rhs_batch, "f32")
    if s.global_scale is not None:
        acc = mul_f32_exact(b, acc, b.broadcast(s.global_scale, b.shape(acc), []))
    return b.convert(acc, s.result_type)


# ----------------------------------------------------------------------------- pack / unpack


def _group(bits: int) -> tuple[int, int]:
    """(values, bytes) of the smallest whole-byte group of ``bits``-bit values."""
    lcm = bits * 8 // math.gcd(bits, 8)
    return lcm // bits, lcm // 8


def _codes_of(b: Any, v: Any, elt: str) -> Any:
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


def _from_codes(b: Any, codes: Any, elt: str) -> Any:
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
    codes = _codes_of(b, p.input, p.element_type)
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
        return _from_codes(b, raw, u.element_type)
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
    return _from_codes(b, b.unblock(codes, u.axis), u.element_type)
