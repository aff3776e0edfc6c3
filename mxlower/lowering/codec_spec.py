"""The spec-driven codec: any number spec, every rounding mode, exponent shifts
(docs/semantics.md section 10).

Where :mod:`mxlower.lowering.codec` converts between the fixed float types of section 2 (round
to nearest even, each type's own overflow rule), this module encodes and decodes the codes of
**any** :class:`~mxlower.numbers.NumberSpec` -- floats ``eXmY`` with any bias and any of
``ieee``/``fn``/``fnuz``/``fo``, exponent types ``eXm0``, ``intK``/``uintK`` -- with the
saturating rules of section 10.2 and its four rounding modes, optionally scaled by a power of
two given per element.  It is written once against the same :class:`~mxlower.lowering.codec.
IntBuilder` (branch-free integer ops), so it runs as NumPy, as ``arith`` (LLVM, NVVM) and as
StableHLO (XLA), bit-exact with :func:`mxlower.cast_reference.round_codes` and
:func:`mxlower.cast_reference.decode` on every builder.

Entry points
------------
``emit_encode(b, value, src_wide, spec, *, roundmode="even", rbits=None, shift=None,
code_bits=None, fixed=False)``
    ``value``: floats of type ``src_wide`` (f32, bf16, f16 or f64).  Returns the codes of
    ``value * 2^-shift`` (exact; the scaled value is never formed, so it may lie below f32's
    normal range) rounded to ``spec`` as ``round_codes`` does: ``code_bits``-wide integers
    (default: the spec's storage width, 8, 16 or 32), float and exponent codes in the low
    bits (upper bits zero), int codes in two's complement.  ``shift``: optional i32 integers
    of ``value``'s shape (any value: beyond +-2000 they act as +-2000, which saturates or
    flushes every spec).  ``roundmode``: ``even``, ``nearest`` (ties away), ``zero``,
    ``half_down`` (ties toward zero) or ``stochastic``, which takes ``rbits``: 32-bit integers
    (uint32 random bits, one per element) and rounds to ``floor(t + r 2^-32)`` exactly.
    ``fixed``: read an ``intK`` as fixed point with K-2 fraction bits (the scaled view of
    mxint8), i.e. ``shift - (K-2)``.
    On the StableHLO builder the result has the storage type :func:`storage_type` names
    (``ui8`` for f8/f6/f4 and exponent codes, ``i8`` for int8, ``ui16`` for e5m6...).

``emit_decode(b, codes, spec, dst_wide, *, shift=None, fixed=False)``
    ``codes``: integers holding ``spec`` codes in their low bits (bits above are ignored).
    Returns floats of type ``dst_wide`` (f32, bf16 or f16): ``value * 2^shift`` rounded to
    nearest even in f32 (Inf beyond f32's range, f32 subnormals kept), then rounded to nearest
    even to ``dst_wide`` -- what :func:`mxlower.cast_reference.decode` computes ("in f32, then
    rounded once to the output type").  NaN codes give the quiet NaN with the code's sign.

The algorithm
-------------
Every path is: **unpack** (sign, a significand ``sig`` with its leading one at bit ``M`` --
normalized by a shift ladder where subnormal inputs need it -- and the exponent ``L`` of that
bit, the value being ``sig * 2^(L - M)``), **round** (drop ``d`` bits: ``d = M - Y + max(emin
- L, 0)`` for a float target, ``M`` for an exponent type, ``M - L`` for an integer; the kept
part is ``(sig + inc) >> d`` with ``inc`` = 0 (zero), half (nearest), half - 1 (half_down),
half - 1 + lsb (even), and for stochastic the carry of ``r + floor(frac * 2^32)`` past 2^32,
with ``frac`` the exact dropped fraction), **assemble** (``(max(L + bias - 1, 0) << Y) + n``:
a carry out of the significand moves to the next binade by itself) and **finish** (saturate
with ``min``, then the zero, Inf, NaN and sign rules with selects).  ``L`` is clamped just past
the target's range and ``d`` just past the point where every input rounds to 0, so the
working width is 32 bits except for 32-bit targets, ``intK`` with K > 28 and f64 sources (64).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mxlower import numbers
from mxlower.lowering.codec import WIDE_FLOAT_TYPES, IntBuilder, codec_type, emit_truncf
from mxlower.numbers import ROUND_MODES, NumberSpec
from mxlower.types import FloatType

__all__ = ["TRUNCF_MODES", "Target", "convert_target", "emit_convert", "emit_decode",
           "emit_encode", "storage_type", "target"]

#: |shift| beyond this saturates or flushes every spec from every source (f64 included)
SHIFT_CLAMP = 2000


# ============================================================================ targets


@dataclasses.dataclass(frozen=True)
class Target:
    """What the rounding step needs to know about the format it rounds to."""

    kind: str  #: "float", "exp", "int", "uint"
    bits: int
    man_bits: int  #: Y (0 for exponent types and ints)
    bias: int
    emin: int  #: exponent of the smallest normal (floats)
    emax: int  #: floor(log2(max))
    max_code: int  #: the largest finite magnitude code (ints: the largest value)
    cap: int  #: the magnitude a too-large finite value becomes (max_code, or Inf's code)
    inf: int  #: the magnitude +-Inf becomes
    spec: NumberSpec | None = None

    @property
    def sign_mask(self) -> int:
        return 1 << (self.bits - 1)


def target(spec: NumberSpec | str) -> Target:
    """The rounding target of a number spec for a cast (section 10.2): finite values
    saturate; Inf stays Inf where the spec has it, else becomes max."""
    n = numbers.number(spec)
    if n.is_integer:
        return Target(n.kind, n.bits, 0, 0, 0, n.emax, n.max_code, n.max_code, n.max_code, n)
    inf = n.inf_code if n.has_inf else n.max_code
    return Target(n.kind, n.bits, n.man_bits, n.bias, n.emin, n.emax, n.max_code, n.max_code,
                  inf, n)


def convert_target(t: FloatType, roundmode: str) -> Target:
    """The rounding target of a section 2 conversion to the narrow type ``t`` with a rounding
    mode: a value past max becomes the type's overflow code (Inf, NaN -- with the sign, or
    FNUZ's 0x80 -- or max for the finite-only types, 0xFF for f8E8M0FNU), and so does +-Inf;
    with ``zero`` a finite value never overflows (it truncates onto max, as IEEE 754's
    round-toward-zero does)."""
    n = numbers.of_float_type(t)
    if n.kind == "exp" or n.special in ("fn", "fnuz"):
        k = n.max_code + 1  # f8E8M0FNU's and fn's NaN; FNUZ's sign bit alone (its NaN)
    else:
        k = n.inf_code if n.has_inf else n.max_code
    cap = n.max_code if roundmode == "zero" else k
    return Target(n.kind, n.bits, n.man_bits, n.bias, n.emin, n.emax, n.max_code, cap, k, n)


def _ieee_target(t: FloatType) -> Target:
    """A wide IEEE type as a decode target: overflow goes to Inf."""
    inf = t.exponent_mask
    return Target("float", t.bits, t.man_bits, t.bias, 1 - t.bias,
                  (1 << t.exp_bits) - 2 - t.bias, inf - 1, inf, inf)


def storage_type(spec: NumberSpec | str) -> str:
    """The integer type codes of ``spec`` are returned in by the StableHLO builder: the spec's
    storage (:attr:`~mxlower.numbers.NumberSpec.storage`) where it is an integer type, else
    the unsigned integer of its width (``ui8`` for the f8/f6/f4 types, as
    ``mxlower-expand-narrow-floats`` stores them)."""
    n = numbers.number(spec)
    s = n.storage
    if s.startswith(("i", "ui")) and s[-1].isdigit():
        return s
    return f"ui{_storage_bits(n)}"


def _storage_bits(n: NumberSpec) -> int:
    return next(w for w in (8, 16, 32) if w >= n.bits)


# ============================================================================ the steps


@dataclasses.dataclass
class _Unpacked:
    """A value as ``sig * 2^(L - M)`` (``sig`` < 2^(M+1); leading one at bit M where
    normalized) with its flags (i1 values, or None where statically false)."""

    sig: Any
    L: Any
    M: int
    neg: Any
    zero: Any
    inf: Any
    nan: Any


def _ladder(b: IntBuilder, sig: Any, L: Any, M: int) -> tuple[Any, Any]:
    """Normalize a non-zero ``sig`` < 2^(M+1) so that bit M is set, lowering ``L`` to match
    (zero stays zero, with ``L`` lowered by some amount).  With the builder's
    ``int_to_float``: the leading bit's position is the exponent of float(sig) (exact), one
    variable shift; else a shift ladder (log2(M) compare-and-shift steps)."""
    W = b.width(sig)
    wide = "f32" if W == 32 and M < 24 else "f64" if W == 64 and M < 53 else None
    if b.has_int_to_float and wide is not None:
        f = WIDE_FLOAT_TYPES[wide]
        # k = M - floor(log2 sig) = (M + bias) - biased exponent of float(sig); sig = 0 gives
        # M + bias, clamped to a valid shift
        k = b.min(b.sub(M + f.bias, b.shr(b.int_to_float(sig, wide), f.man_bits)), W - 1)
        return b.shl(sig, k), b.sub(L, k)
    steps, k = [], 1
    while k <= M:
        steps.insert(0, k)
        k *= 2
    for k in steps:
        small = b.cmp("slt", sig, 1 << (M + 1 - k))
        sig = b.sel(small, b.shl(sig, k), sig)
        L = b.sel(small, b.sub(L, k), L)
    return sig, L


def _widen_shift(b: IntBuilder, shift: Any, W: int) -> Any:
    """An i32 shift clamped to +-SHIFT_CLAMP, in W bits (sign kept without a signed
    extension: biased to non-negative, widened, unbiased)."""
    s = b.signless(shift)
    s = b.max(b.min(s, SHIFT_CLAMP), -SHIFT_CLAMP)
    if b.width(s) == W:
        return s
    s = b.resize(b.add(s, SHIFT_CLAMP), W)
    return b.sub(s, SHIFT_CLAMP)


def _unpack_float_bits(b: IntBuilder, u: Any, s: FloatType, W: int, *,
                       normalize: bool) -> _Unpacked:
    """An IEEE bit pattern (width ``s.bits``, or W after zero extension) unpacked."""
    Ms = s.man_bits
    neg = b.cmp("slt", u, 0) if b.width(u) == s.bits else \
        b.cmp("ne", b.and_(u, s.sign_mask), 0)
    if b.width(u) != W:
        u = b.resize(u, W)
    a = b.and_(u, s.magnitude_mask)  # (also drops a sign extension)
    inf_bits = s.exponent_mask
    e = b.shr(a, Ms)
    eb = b.max(e, 1)
    sig = b.sub(a, b.shl(b.sub(eb, 1), Ms))  # (1 << Ms) | m for normals, m for subnormals
    L = b.sub(eb, s.bias)
    if normalize:
        sig, L = _ladder(b, sig, L, Ms)
    return _Unpacked(sig, L, Ms, neg, b.cmp("eq", a, 0), b.cmp("eq", a, inf_bits),
                     b.cmp("sgt", a, inf_bits))


def _round(b: IntBuilder, sig: Any, d: Any, mode: str, r: Any, W: int, d_min: int) -> Any:
    """``R(sig / 2^d)`` of section 10.2 for ``0 <= d`` (an int or a value; d <= M + 2, or
    M + 34 for stochastic, where everything rounds to 0 -- callers clamp)."""
    const = isinstance(d, int)
    if mode == "zero":
        return b.shr(sig, d) if not (const and d == 0) else sig
    if mode in ("even", "nearest", "half_down"):
        if const:
            if d == 0:
                return sig
            half = 1 << (d - 1)
            if mode == "nearest":
                return b.shr(b.add(sig, half), d)
            if mode == "half_down":  # a tie (sig's dropped bits exactly half) stays down
                return b.shr(b.add(sig, half - 1), d)
            lsb = b.and_(b.shr(sig, d), 1)
            return b.shr(b.add(sig, b.add(lsb, half - 1)), d)
        half = b.shr(b.shl(b.constant(1, W), d), 1)
        if mode == "nearest":
            return b.shr(b.add(sig, half), d)
        inc = b.sub(half, 1)
        if mode == "even":
            inc = b.add(inc, b.and_(b.shr(sig, d), 1))
        if d_min == 0:  # d == 0: half - 1 (+ lsb) is -1 or 0; nothing to add
            inc = b.max(inc, 0)
        return b.shr(b.add(sig, inc), d)
    # stochastic: floor(t + r 2^-32) = T + [r + floor(frac 2^32) >= 2^32]
    if const:
        if d == 0:
            return sig
        T = b.shr(sig, min(d, W - 1))
        fw = b.shl(sig, W - d) if d < W else b.shr(sig, min(d - W, W - 1))
    else:
        T = b.shr(sig, b.min(d, W - 1))
        lo = b.shl(b.shl(sig, b.max(b.sub(W - 1, d), 0)), 1)  # frac 2^W for d < W
        hi = b.shr(sig, b.min(b.max(b.sub(d, W), 0), W - 1))  # for d >= W (sig < 2^d)
        fw = b.sel(b.cmp("slt", d, W), lo, hi)
    if W == 32:  # F + r >= 2^32  <=>  F >u ~r  (unsigned compare through the sign bit)
        carry = b.cmp("sgt", b.xor(fw, 1 << 31), b.xor(r, (1 << 31) - 1))
    else:
        f32 = b.shr(fw, W - 32)
        carry = b.cmp("sge", b.add(f32, r), 1 << 32)
    one = b.sel(carry, b.constant(1, W), b.constant(0, W))
    return b.add(T, one)


def _round_to(b: IntBuilder, x: _Unpacked, t: Target, mode: str, r: Any, W: int) -> Any:
    """The magnitude code (an integer value; ints: the rounded magnitude) of ``x`` rounded to
    ``t`` and capped at ``t.cap``.  Requires x.M >= t.man_bits (floats), x.M >= t.bits
    (ints)."""
    M = x.M
    top = M + (34 if mode == "stochastic" else 2)  # d past this rounds everything to 0
    if t.kind == "float":
        Y = t.man_bits
        Lc = b.min(x.L, t.emax + 1)
        d = b.min(b.add(b.max(b.sub(t.emin, Lc), 0), M - Y), top)
        n = _round(b, x.sig, d, mode, r, W, M - Y)
        code = b.add(b.shl(b.max(b.add(Lc, t.bias - 1), 0), Y) if Y else
                     b.max(b.add(Lc, t.bias - 1), 0), n)
        return b.min(code, t.cap)
    if t.kind == "exp":
        Lc = b.max(b.min(x.L, t.emax + 1), -(t.bias + 2))
        n = _round(b, x.sig, M, mode, r, W, M)
        code = b.add(b.add(Lc, t.bias - 1), n)
        return b.max(b.min(code, t.cap), 0)
    Lc = b.min(x.L, t.bits)
    d = b.min(b.max(b.sub(M, Lc), 0), top)
    n = _round(b, x.sig, d, mode, r, W, 0)
    return b.min(n, t.max_code)


def _finish_encode(b: IntBuilder, x: _Unpacked, mag: Any, t: Target) -> Any:
    """Zero, Inf, NaN and sign rules of ``round_codes`` on the magnitude code."""
    n = t.spec
    if t.kind == "exp":  # NaN, zeros and negatives -> NaN; +Inf -> max (casts)
        mag = _sel(b, x.inf, t.inf, mag)
        return _sel(b, _any(b, x.nan, x.zero, x.neg), n.nan_code, mag)
    if t.kind in ("int", "uint"):
        mag = _sel(b, x.inf, t.max_code, mag)
        if t.kind == "uint":
            return _sel(b, _any(b, x.neg, x.nan), 0, mag)
        val = _sel(b, x.neg, b.sub(0, mag), mag)
        return _sel(b, x.nan, 0, val)
    mag = _sel(b, x.zero, 0, mag)
    mag = _sel(b, x.inf, t.inf, mag)
    if n.special in ("ieee", "fn"):
        mag = _sel(b, x.nan, n.nan_code, mag)
    if n.has_negative_zero:
        code = _sel(b, x.neg, b.or_(mag, t.sign_mask), mag)
    else:  # fnuz: no -0
        code = b.sel(b.and_(x.neg, b.cmp("ne", mag, 0)), b.or_(mag, t.sign_mask), mag)
    if n.special == "fnuz":
        code = _sel(b, x.nan, n.nan_code, code)
    elif n.special == "fo":
        code = _sel(b, x.nan, t.sign_mask, code)  # every NaN: the -0 code
    return code


def _sel(b: IntBuilder, cond: Any, a: Any, x: Any) -> Any:
    """``cond ? a : x``, or ``x`` where ``cond`` is statically false (None)."""
    return x if cond is None else b.sel(cond, a, x)


def _any(b: IntBuilder, *conds: Any) -> Any:
    """The disjunction of the conditions that are not statically false (None if none is)."""
    out = None
    for c in conds:
        if c is not None:
            out = c if out is None else b.or_(out, c)
    return out


def _width(M: int, t: Target, s_bits: int) -> int:
    need = max(M + 4, t.bits + 2, s_bits)
    return 32 if need <= 32 else 64


def _check_mode(roundmode: str, rbits: Any) -> None:
    if roundmode not in ROUND_MODES:
        raise ValueError(f"unknown roundmode '{roundmode}' (known: {', '.join(ROUND_MODES)})")
    if (roundmode == "stochastic") != (rbits is not None):
        raise ValueError("roundmode='stochastic' needs rbits (one uint32 per element), and "
                         "only it takes them")


def _needs_ladder(src_bias: int, src_offset: int, t: Target, shifted: bool) -> bool:
    """Whether subnormal sources must be normalized: with a variable shift always; else where
    an unnormalized subnormal (exponent ``1 - bias``) could be read as the wrong binade."""
    if shifted:
        return True
    L_sub = 1 - src_bias + src_offset
    if t.kind == "float":
        return L_sub > t.emin
    if t.kind == "exp":
        return L_sub + t.bias > 0
    return L_sub >= t.bits


# ============================================================================ entry points


def emit_encode(b: IntBuilder, value: Any, src_wide: str | FloatType,
                spec: NumberSpec | str, *, roundmode: str = "even", rbits: Any = None,
                shift: Any = None, code_bits: int | None = None, fixed: bool = False) -> Any:
    """Floats of ``src_wide`` -> ``spec`` codes (see the module docstring)."""
    n = numbers.number(spec)
    _check_mode(roundmode, rbits)
    code, W = _encode(b, value, src_wide, n, target(n), roundmode, rbits, shift, fixed)
    bits = code_bits or _storage_bits(n)
    if bits < n.bits:
        raise ValueError(f"emit_encode: code_bits={bits} cannot hold {n.code}'s {n.bits} bits")
    out = b.resize(code, bits) if bits != W else code
    return b.to_storage(out, storage_type(n)) if code_bits is None else out


#: arith.truncf's ``roundingmode`` names -> the codec's rounding modes (the ones mxlower
#: lowers; ``upward`` and ``downward`` have no section 2 meaning here)
TRUNCF_MODES = {"to_nearest_even": "even", "toward_zero": "zero", "to_nearest_away": "nearest"}


def emit_convert(b: IntBuilder, value: Any, src_wide: str | FloatType, dst: str | FloatType,
                 *, roundmode: str = "even", code_bits: int = 8) -> Any:
    """Section 2's conversion of floats of ``src_wide`` to the narrow type ``dst`` with a
    rounding mode: ``even`` is :func:`mxlower.lowering.codec.emit_truncf` (ml_dtypes' rules,
    f8E8M0FNU's included); ``zero`` and ``nearest`` (ties away) round the exact value as
    section 10.2 says and then apply the type's section 2 rules (:func:`convert_target`: NaN
    codes, Inf, overflow -- except that ``zero`` never overflows a finite value).  This is
    what ``arith.truncf`` with ``roundingmode = toward_zero / to_nearest_away`` lowers to.
    Codes as ``code_bits``-wide integers (low bits; upper bits zero)."""
    d = codec_type(dst)
    if roundmode == "even":
        return emit_truncf(b, value, src_wide, d, code_bits=code_bits)
    if roundmode not in ("zero", "nearest"):
        raise ValueError(f"emit_convert: rounding mode '{roundmode}' is not a section 2 "
                         "conversion mode (even, zero, nearest)")
    if d.mlir in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_convert: the destination must be a narrow type, got {d.mlir}")
    n = numbers.of_float_type(d)
    code, W = _encode(b, value, src_wide, n, convert_target(d, roundmode), roundmode, None,
                      None, False)
    return b.resize(code, code_bits) if code_bits != W else code


def _encode(b: IntBuilder, value: Any, src_wide: str | FloatType, n: NumberSpec, t: Target,
            roundmode: str, rbits: Any, shift: Any, fixed: bool) -> tuple[Any, int]:
    """The codes (working integers) and the working width."""
    s = codec_type(src_wide)
    if s.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_encode: source must be one of {', '.join(WIDE_FLOAT_TYPES)}, "
                         f"got '{s.mlir}'")
    offset = n.bits - 2 if fixed and n.kind == "int" else 0
    M = max(s.man_bits, t.man_bits) if t.kind == "float" else \
        max(s.man_bits, t.bits) if n.is_integer else s.man_bits
    W = _width(M, t, s.bits)
    u = b.bitcast_to_int(value)
    x = _unpack_float_bits(b, u, s, W, normalize=_needs_ladder(s.bias, offset, t,
                                                                 shift is not None))
    if M > x.M:
        x.sig, x.M = b.shl(x.sig, M - x.M), M
    if offset:
        x.L = b.add(x.L, offset)
    if shift is not None:
        x.L = b.sub(x.L, _widen_shift(b, shift, W))
    r = None
    if rbits is not None:
        r = b.signless(rbits)
        if b.width(r) != 32:
            raise ValueError("emit_encode: rbits must be 32-bit integers")
        if W != 32:
            r = b.and_(b.resize(r, W), (1 << 32) - 1)
    mag = _round_to(b, x, t, roundmode, r, W)
    return _finish_encode(b, x, mag, t), W


def _unpack_codes(b: IntBuilder, codes: Any, n: NumberSpec, W: int, shift: Any,
                  offset: int) -> _Unpacked:
    """Codes of ``n`` (low bits of integers of any width) unpacked for decoding."""
    c = b.signless(codes)
    if b.width(c) != W:
        c = b.resize(c, W)
    c = b.and_(c, (1 << n.bits) - 1)
    false = None
    if n.is_integer:
        K = n.bits
        if n.kind == "int":
            neg = b.cmp("sge", c, 1 << (K - 1))
            mag = b.sel(neg, b.sub(1 << K, c), c)
        else:
            neg, mag = false, c
        L = b.constant(K - offset, W)
        x = _Unpacked(mag, L, K, neg, b.cmp("eq", c, 0), false, false)
        if shift is not None:
            x.L = b.add(x.L, _widen_shift(b, shift, W))
        x.sig, x.L = _ladder(b, x.sig, x.L, K)
        return x
    if n.kind == "exp":
        L = b.sub(c, n.bias)
        if shift is not None:
            L = b.add(L, _widen_shift(b, shift, W))
        return _Unpacked(b.constant(1, W), L, 0, false, false, false,
                         b.cmp("eq", c, n.nan_code))
    Y = n.man_bits
    neg = b.cmp("ne", b.and_(c, n.sign_mask), 0)
    a = b.and_(c, n.sign_mask - 1)
    if Y:
        e = b.shr(a, Y)
        eb = b.max(e, 1)
        sig = b.sub(a, b.shl(b.sub(eb, 1), Y))
    else:
        eb = b.max(a, 1)
        sig = b.sel(b.cmp("eq", a, 0), b.constant(0, W), b.constant(1, W))
    L = b.sub(eb, n.bias)
    if shift is not None:
        L = b.add(L, _widen_shift(b, shift, W))
    zero = b.cmp("eq", a, 0)
    inf = nan = false
    if n.special == "ieee":
        inf = b.cmp("eq", a, n.inf_code)
        nan = b.cmp("sgt", a, n.inf_code)
    elif n.special == "fn":
        nan = b.cmp("eq", a, n.sign_mask - 1)
    elif n.special == "fnuz":
        nan = b.cmp("eq", c, n.sign_mask)
        zero = b.cmp("eq", c, 0)
    if Y and (shift is not None or 1 - n.bias > -126):
        sig, L = _ladder(b, sig, L, Y)
    return _Unpacked(sig, L, Y, neg, zero, inf, nan)


def _finish_ieee(b: IntBuilder, x: _Unpacked, mag: Any, t: FloatType) -> Any:
    """The bits of an IEEE wide float: zero, Inf, NaN (quiet, signed) and the sign."""
    mag = _sel(b, x.zero, 0, mag)
    mag = _sel(b, x.inf, t.exponent_mask, mag)
    mag = _sel(b, x.nan, t.nan_code, mag)
    return _sel(b, x.neg, b.or_(mag, t.sign_mask), mag)


def emit_decode(b: IntBuilder, codes: Any, spec: NumberSpec | str, dst_wide: str, *,
                shift: Any = None, fixed: bool = False) -> Any:
    """``spec`` codes -> floats of ``dst_wide`` (see the module docstring)."""
    d = codec_type(dst_wide)
    if d.mlir not in ("f32", "bf16", "f16"):
        raise ValueError(f"emit_decode: destination must be f32, bf16 or f16, got '{d.mlir}'")
    n = numbers.number(spec)
    f32 = WIDE_FLOAT_TYPES["f32"]
    offset = n.bits - 2 if fixed and n.kind == "int" else 0
    M_in = n.bits if n.is_integer else n.man_bits
    M = max(M_in, f32.man_bits)
    W = 32 if M + 4 <= 32 else 64
    x = _unpack_codes(b, codes, n, W, shift, offset)
    if M > x.M:
        x.sig, x.M = b.shl(x.sig, M - x.M), M
    bits = _finish_ieee(b, x, _round_to(b, x, _ieee_target(f32), "even", None, W), f32)
    if W != 32:
        bits = b.resize(bits, 32)
    if d.mlir != "f32":  # the second rounding, f32 -> bf16/f16 (as the oracle rounds)
        y = _unpack_float_bits(b, bits, f32, 32, normalize=False)
        bits = _finish_ieee(b, y, _round_to(b, y, _ieee_target(d), "even", None, 32), d)
        bits = b.resize(bits, d.bits)
    return b.bitcast_to_float(bits, d.mlir)
