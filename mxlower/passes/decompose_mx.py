"""``mxlower-decompose-mx``: ``mx`` ops -> plain StableHLO computing MX-SEMANTICS exactly."""

from __future__ import annotations

import dataclasses
import fractions
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.formats import SCALE_MODES, MXFormat
from mxlower.passes.base import ModulePass, option

__all__ = ["DecomposeMx", "decompose"]

_MAG = 0x7FFFFFFF
_SIGN = -(1 << 31)
_INF = 0x7F800000
_NAN = 0x7FC00000


@dataclasses.dataclass(frozen=True)
class DecomposeMx(ModulePass):
    """Lower mx ops (and XLA's MX custom calls) to plain StableHLO, bit-exact with MX-SEMANTICS.

    ``mx.quantize`` becomes a block reduction of the magnitude bits, integer exponent arithmetic
    for the shared scale (floor / rceil / nearest), exact power-of-two scaling and saturation
    of the elements on their bits (XLA:CPU flushes f32 subnormals, so no float instruction
    sees one) and a final ``stablehlo.convert`` to the element type (append ``mxlower-expand-narrow-floats`` to turn
    those converts into integer ops, which XLA:CPU runs faster).  ``mx.dequantize`` scales
    the decoded elements by the decoded scale with an integer ``ldexp`` (its results may be
    f32 subnormals, which must come out exact); ``mx.scaled_dot`` dequantizes
    both operands to the compute type and contracts them with ``stablehlo.dot_general``
    accumulating in f32.  ``mx.pack``/``mx.unpack`` become shifts and masks.  Any
    ``__op$quantize``/``__op$dequantize``/``__op$block_scaled_dot`` custom call or
    ``xla.scaled_dot`` composite still present is legalized first, so nothing MX remains.
    Malformed mx ops are reported at their location (the ``mxlower-verify-mx`` checks run
    first).

    Before::

        %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64,
                 axis = 1 : i64, scale_mode = "floor"}
                 : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)

    After (abridged)::

        %0 = stablehlo.bitcast_convert %x : (tensor<4x64xf32>) -> tensor<4x64xi32>
        %1 = stablehlo.reshape %0 : (tensor<4x64xi32>) -> tensor<4x2x32xi32>
        %3 = stablehlo.reduce(%2 init: %c) applies stablehlo.maximum across dimensions = [2]
        ...
        %q = stablehlo.convert %y : (tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN>
        %s = stablehlo.bitcast_convert %c8 : (tensor<4x2xui8>) -> tensor<4x2xf8E8M0FNU>

    Example::

        mxlower-opt in.mlir --mxlower-decompose-mx='scale-mode=rceil compute-type=bf16'
    """

    name: ClassVar[str] = "mxlower-decompose-mx"
    scale_mode: str = option("", "override every quantize's scale_mode (empty: keep the op's)",
                             choices=("",) + SCALE_MODES)
    compute_type: str = option("", "override every scaled_dot's compute (dequantize) type "
                               "(empty: keep the op's)", choices=("", "f32", "bf16", "f16"))

    def run(self, op: Any) -> None:
        from mxlower.passes.legalize_xla_mx import legalize
        from mxlower.passes.verify_mx import verify_or_fail

        verify_or_fail(op)
        legalize(op, scale_mode="nearest")
        decompose(op, scale_mode=self.scale_mode or None, compute_type=self.compute_type or None)


def decompose(root: Any, *, scale_mode: str | None = None, compute_type: str | None = None) -> int:
    """Rewrite every mx op under ``root`` in place; returns how many were rewritten.

    Errors (malformed ops) are recorded as diagnostics and raised as PassFailure after all ops
    have been looked at."""
    from mxlower.dialect import mx

    ops = collect_ops(root, lambda o: o.name.startswith("mx."))
    failures = []
    for o in ops:
        try:
            spec = mx.parse(o)
        except mx.MXError as e:
            failures.append(diag.error(o, f"'{o.name}' op {e}"))
            continue
        with o.location:
            _rewrite(spec, scale_mode, compute_type)
    if failures:
        raise failures[0]
    return len(ops)


def _rewrite(spec: Any, scale_mode: str | None, compute_type: str | None) -> None:
    from mxlower.bindings.jaxlib import ir
    from mxlower.dialect import mx
    from mxlower.stablehlo_builders import Builder

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


# ----------------------------------------------------------------------------- quantize


def _bits_floor(x: fractions.Fraction) -> int:
    from mxlower.stablehlo_builders import f32_bits_floor

    return f32_bits_floor(x)


def shared_exponent(b: Any, amax: Any, fmt: MXFormat, mode: str) -> Any:
    """MX-SEMANTICS 3.3: the unclamped shared exponent E from the i32 bits of a finite amax."""
    from mxlower.stablehlo_builders import frexp_bits

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
    from mxlower.stablehlo_builders import to_f32_bits

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
    from mxlower.stablehlo_builders import ldexp_bits

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
    """MX-SEMANTICS 5: decode(e) * decode(s) exactly in f32 (nvfp4: then * g), rounded once to
    ``out_type``."""
    from mxlower.stablehlo_builders import ldexp_bits, mul_f32_exact

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
    from mxlower.stablehlo_builders import mul_f32_exact

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
    import math

    lcm = bits * 8 // math.gcd(bits, 8)
    return lcm // bits, lcm // 8


def _codes_of(b: Any, v: Any, elt: str) -> Any:
    """i32 codes (0 .. 2^bits-1) of a narrow-typed tensor."""
    from mxlower.formats import FLOAT_TYPES

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
    from mxlower.formats import FLOAT_TYPES

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
