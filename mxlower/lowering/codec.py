"""The codec: bit-exact encoding and decoding of every number spec (docs/semantics.md
sections 2 and 10), written once against the integer-op builders of
:mod:`mxlower.lowering.int_builders`.

One codec serves every format mxlower knows.  A format is a
:class:`~mxlower.numbers.NumberSpec` -- floats ``eXmY`` with any bias and any of
``ieee``/``fn``/``fnuz``/``fo``, exponent types ``eXm0``, ``intK``/``uintK``; the MLIR types
(``f8E4M3FN``, ``f4E2M1FN``, ...) and their codec rows (:class:`~mxlower.types.FloatType`) are
accepted wherever a spec is, as the specs they are.  The algorithms are branch-free integer
arithmetic on code bits, so one description runs as NumPy (the exhaustive tests), as
``arith`` (LLVM, NVVM, the FFI kernels) and as StableHLO (XLA), bit-exact with the oracle
(:func:`mxlower.reference.convert`, :func:`mxlower.cast_reference.round_codes` and
:func:`~mxlower.cast_reference.decode`) on every builder.

Entry points
------------
``emit_encode(b, value, src_wide, spec, *, roundmode="even", rbits=None, shift=None,
code_bits=None, fixed=False)``
    Section 10's saturating cast.  ``value``: floats of type ``src_wide`` (f32, bf16, f16 or
    f64).  Returns the codes of ``value * 2^-shift`` (exact; the scaled value is never formed,
    so it may lie below f32's normal range) rounded to ``spec`` as ``round_codes`` does:
    ``code_bits``-wide integers (default: the spec's storage width, 8, 16 or 32), float and
    exponent codes in the low bits (upper bits zero), int codes in two's complement.
    ``shift``: optional i32 integers of ``value``'s shape (any value: beyond +-2000 they act as
    +-2000, which saturates or flushes every spec).  ``roundmode``: ``even``, ``nearest``
    (ties away), ``zero``, ``half_down`` (ties toward zero) or ``stochastic``, which takes
    ``rbits``: 32-bit integers (uint32 random bits, one per element) and rounds to
    ``floor(t + r 2^-32)`` exactly.  ``fixed``: read an ``intK`` as fixed point with K-2
    fraction bits (the scaled view of mxint8), i.e. ``shift - (K-2)``.  On the StableHLO
    builder the result has the storage type :func:`storage_type` names (``ui8`` for
    f8/f6/f4 and exponent codes and lookup tables, ``i8`` for int8, ``ui16`` for e5m6...).
    Lookup tables (section 10.7) have their own exact encoder (see "Lookup tables" below).

``emit_decode(b, codes, spec, dst_wide, *, shift=None, fixed=False)``
    Section 10.4's decode.  ``codes``: integers holding ``spec`` codes in their low bits (bits
    above are ignored).  Returns floats of type ``dst_wide`` (f32, bf16 or f16):
    ``value * 2^shift`` rounded to nearest even in f32 (Inf beyond f32's range, f32
    subnormals kept), then rounded to nearest even to ``dst_wide`` -- what
    :func:`mxlower.cast_reference.decode` computes ("in f32, then rounded once to the output
    type").  NaN codes give the quiet NaN with the code's sign.

Section 2's conversions of the MLIR types, named after the ``arith`` ops they implement:

``emit_truncf(b, value, src_wide, dst, *, roundmode="even", code_bits=8, fpu=True)``
    f32/bf16/f16/f64 ``value`` -> ``dst`` codes with the type's own overflow rule (Inf, NaN --
    with the sign, or FNUZ's 0x80 -- or max for the finite-only types, 0xFF for f8E8M0FNU),
    its NaN codes, and ml_dtypes' f8E8M0FNU rounding.  ``roundmode``: ``even``, ``zero`` (a
    finite value never overflows: it truncates onto max, as IEEE 754's round-toward-zero
    does) or ``nearest`` (ties away).  Codes as ``code_bits``-wide integers (low bits; upper
    bits zero; ``dst.bits`` is allowed, e.g. 4, so that an ``arith.bitcast`` to ``f4E2M1FN``
    follows).  StableHLO: ``tensor<...xui8>`` (``code_bits`` must be 8).

``emit_extf(b, codes, src, dst_wide, *, fpu=True)``
    ``src`` codes (low bits of integers of any width; bits above are ignored) -> floats of
    ``dst_wide`` (f64, f32, bf16 or f16; exact, or RNE for f16 results of f8E8M0FNU, the only
    one that can round).  For these types and f32/bf16/f16 it is ``emit_decode``.

``emit_convert_codes(b, codes, src, dst, *, code_bits=8)``
    Section 2, narrow -> narrow, codes to codes: the same result as going through f32 (which
    is exact).

``fpu=False`` emits integer ops only (no float-assisted steps, see below).

Example (upstream stack, a vector of f32 to f4E2M1FN, as ``arith.truncf`` would)::

    from mlir import ir
    from mlir.dialects import arith
    from mxlower.lowering import codec
    from mxlower.lowering.int_builders import ArithBuilder
    with ir.InsertionPoint(block), loc:
        b = ArithBuilder(ir, arith, x.type)                 # x: vector<8xf32>
        codes = codec.emit_truncf(b, x, "f32", "f4E2M1FN", code_bits=4)    # vector<8xi4>
        y = arith.BitcastOp(ir.VectorType.get([8], ir.Type.parse("f4E2M1FN")), codes).result

The general algorithm
---------------------
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

The specializations
-------------------
Two conversions are so frequent (every ``arith.truncf`` / ``arith.extf`` of a narrow type, the
MX formats' elements and scales) that the codec plans them statically: section 2's
round-to-nearest-even narrowing (``emit_truncf`` with ``even``, ``emit_convert_codes``), and
every decode of a narrow float type (:data:`mxlower.types.FLOAT_TYPES`: f8, f6, f4, e8m0)
without ``shift`` (``emit_extf``, and ``emit_decode`` of those types).  The decode plan gives
the general decoder's bits for every code of every such type (test_codec.py compares them
exhaustively), with fewer and cheaper ops.

:func:`convert_codes` converts an integer-coded value of any described format to any other
(the wide types are described in :data:`WIDE_FLOAT_TYPES`), branch-free.  :func:`plan`
analyses the two formats statically and picks one of three paths, then a common finish:

* direct (narrowing without normalization, e.g. f32 -> any narrow type): round the whole
  magnitude in one step, ``(a + (rebias << Ms) + inc) >> (Ms - Md)`` with ``inc`` the
  round-to-nearest-even increment (a carry out of the mantissa increments the exponent);
* generic: split biased exponent and significand (subnormals use ``e = 1``), normalize
  source subnormals that may be destination normals with a shift ladder (log2(mantissa bits)
  select steps), re-bias ``e_d = e + dst.bias - src.bias``, shift right by
  ``Ms - Md + max(0, 1 - e_d)`` (clamped) with rounding, and assemble
  ``((max(e_d, 1) - 1) << Md) + rounded``;
* float-assisted narrow -> f32/f64 (see below);
* finish: ``min(mag, K)`` applies the overflow rule, because every overflow code is one past
  the largest finite code (Inf for ieee types, NaN for f8E4M3FN, 0xFF for f8E8M0FNU) or the
  largest finite code itself (saturating f4/f6); NaN and Inf sources, zero and negative
  inputs to the unsigned f8E8M0FNU, and the sign are applied with selects, each emitted only
  where the static analysis says it can change the result.

Rounding is to nearest even, except f8E8M0FNU (``special == "fnu"``): ties round up, and a
subnormal source (f32/bf16 values below 2^-126, where ml_dtypes does not renormalize) rounds
ties down, so values in (2^-127, 2^-126) give 2^-126 and 2^-127 stays 2^-127 (f64 sources
follow the same rule).

Float-assisted steps (``fpu=True``, the default): the only variable shifts are for
subnormals, and the FPU does those exactly in one instruction.  From f32/f64, destination
subnormals are ``bits(|x| + M) - bits(M)`` with ``ulp(M)`` = the destination's subnormal step
(the add rounds to nearest even), selected below the destination's smallest normal.  To
f32/f64, source subnormals are ``(bits(M) | m) - M`` in float, exact.  Neither depends on
subnormal support: the only subnormal operand is an f32/f64 subnormal input, whose exact
result (+-0) a flush-to-zero add also gives, and every result is normal -- so XLA:CPU's
denormals-are-zero mode and GPU flush-to-zero change nothing (the XLA:CPU tests run
exhaustive f32 subnormals).  f32 -> f8E4M3FN is 14 ops, f32 -> f4/f6 16; with ``fpu=False``
the generic path is used for those (~25 ops).  Working width: the wide type's width (16 for
bf16/f16, 32 for f32, 64 for f64), widened to 32 where 16 bits could overflow (f8E8M0FNU ->
f16).

Lookup tables
-------------
A table T[0] < ... < T[2^K - 1] (:func:`mxlower.numbers.lut_spec`, ``nf4``) is encoded in
i64: with N_i = T[i] 2^G its values in units of their finest bit, x 2^-shift is read as its
exact floor and ceiling in units 2^-(G+F) (F = 1, 32 for stochastic) from the unpacked bits,
saturated beyond the table's ends, and the code is the number of gaps x rounds past (one or
two comparisons per gap; for stochastic one product of the random bits and the gap's width
per distinct width).  Tables with max |N_i| >= 2^60 (2^29 for stochastic) take the per-gap
encoder (:func:`_encode_lut_wide`): a select chain on x >= T_j picks the gap's frame and
constants, and one exact comparison of 2^F x with the threshold's two terms decides: every
table section 10.7 allows is encoded exactly in every mode.  Decoding selects the value's f32 bits
by the code's bits (a select tree) and, with a shift or to bf16/f16, rounds as the general
decoder does.

Semantics: exactly docs/semantics.md section 2 = :func:`mxlower.reference.convert` for every
input (test/python/test_codec.py checks this exhaustively with the NumPy builder, both with
and without the float-assisted steps).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np

from mxlower import numbers
from mxlower.lowering.int_builders import IntBuilder
from mxlower.numbers import ROUND_MODES, NumberSpec
from mxlower.types import FLOAT_TYPES, WIDE_FLOAT_TYPES, FloatType

__all__ = ["TRUNCF_MODES", "Plan", "Target", "codec_type", "convert_codes", "convert_target",
           "emit_convert_codes", "emit_decode", "emit_encode", "emit_extf", "emit_truncf",
           "plan", "storage_type", "target"]


def codec_type(t: str | FloatType) -> FloatType:
    """The codec description of a narrow type or of f32/bf16/f16 (MLIR spelling or object)."""
    if isinstance(t, FloatType):
        return t
    if t in WIDE_FLOAT_TYPES:
        return WIDE_FLOAT_TYPES[t]
    if t in FLOAT_TYPES:
        return FLOAT_TYPES[t]
    known = ", ".join([*WIDE_FLOAT_TYPES, *FLOAT_TYPES])
    raise KeyError(f"unknown float type '{t}' (known: {known})")


def _spec(spec: NumberSpec | FloatType | str) -> tuple[NumberSpec, FloatType | None]:
    """A spec given as a NumberSpec, a spec code, an MLIR type name or a codec row: the number
    spec and, for float and exponent specs, its codec row (what the plans read)."""
    if isinstance(spec, FloatType):
        return numbers.of_float_type(spec), spec
    n = numbers.number(spec)
    return n, (n.float_type if n.is_float else None)


#: |shift| beyond this saturates or flushes every spec from every source (f64 included)
SHIFT_CLAMP = 2000


# ======================================================= targets (the general algorithm)


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
    saturate; Inf stays Inf where the spec has it, else becomes max.  (Lookup tables have
    their own encoder, which takes every table.)"""
    n = numbers.number(spec)
    if n.is_lut:
        raise ValueError(f"codec.target: {n.code} is a lookup table; it has no rounding "
                         f"target (emit_encode rounds it by its table)")
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
    for k in _ladder_steps(M):
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


# ============================================================ lookup tables (section 10.7)

#: the largest table magnitude, in units of the table's finest bit (:func:`_lut_units`), that
#: the direct LUT encoder (one fixed-point frame for the whole table) takes: every working
#: quantity then fits in i64 (stochastic rounding multiplies the random bits by a gap's width,
#: with 32 fraction bits).  Wider tables take the per-gap encoder (:func:`_encode_lut_wide`),
#: which is exact for every table.
LUT_LIMIT = {"deterministic": 1 << 60, "stochastic": 1 << 29}


def _lut_units(n: NumberSpec) -> tuple[int, tuple[int, ...]]:
    """(G, N): the smallest G with every table value an integer N_i = T_i 2^G (G < 0 for
    tables of multiples of large powers of two)."""
    fr = [Fraction(t) for t in n.table]
    G = -min(_low_bit(abs(f)) for f in fr if f != 0)  # T = odd 2^low
    return G, tuple(int(f * Fraction(2) ** G) for f in fr)


def _lut_direct(n: NumberSpec, roundmode: str) -> bool:
    """Whether the direct encoder takes the table (its span below :data:`LUT_LIMIT`)."""
    _, N = _lut_units(n)
    kind = "stochastic" if roundmode == "stochastic" else "deterministic"
    return max(abs(N[0]), abs(N[-1])) < LUT_LIMIT[kind]


def _encode_lut(b: IntBuilder, value: Any, src_wide: str | FloatType, n: NumberSpec,
                roundmode: str, rbits: Any, shift: Any, *,
                wide: bool | None = None) -> tuple[Any, int]:
    """The codes (i64) of ``value * 2^-shift`` rounded to the table ``n`` (section 10.7).

    ``wide``: force the per-gap encoder (True) or the direct one (False; only for tables it
    takes); default: the direct one where it takes the table.

    The direct encoder: with N_i = T_i 2^G integers and F fraction bits (1; 32 for
    stochastic), x is read in units 2^-(G+F) as its floor SF and ceiling SC (signed, from the
    unpacked magnitude: exact, the scaled value is never formed), saturated just beyond the
    table's ends.  The code is a count over the gaps (T_j, T_j+1) of whether x rounds to the
    upper neighbour or beyond: x > m_j (SC > m_j) or x >= m_j (SF >= m_j) at the midpoint m_j,
    by whether a tie goes up, for the nearest modes; x >= T_j+1, x > T_j or x's sign (a gap
    straddling 0) for ``zero``; for ``stochastic`` the carry r + floor(f 2^32) >= 2^32 of
    section 10.7, which in these units is P_hi - SF <= r Du (toward zero is the lower
    neighbour) or SC - P_lo <= r Du (the upper), Du = N_j+1 - N_j, P = N 2^F: both also hold
    (or fail) beyond the gap as they should."""
    s = codec_type(src_wide)
    if s.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_encode: source must be one of {', '.join(WIDE_FLOAT_TYPES)}, "
                         f"got '{s.mlir}'")
    if wide is None:
        wide = not _lut_direct(n, roundmode)
    if wide:
        return _encode_lut_wide(b, value, s, n, roundmode, rbits, shift)
    if not _lut_direct(n, roundmode):
        raise ValueError(f"_encode_lut: {n.code} is too wide for the direct encoder")
    G, N = _lut_units(n)
    stochastic = roundmode == "stochastic"
    F = 32 if stochastic else 1
    P = [v << F for v in N]
    bound = max(abs(P[0]), abs(P[-1])) + 1  # |x| above it saturates (to bound, then + frac)
    W, M = 64, s.man_bits
    # sig << k must stay below 2^63 for k up to where every value has passed the bound
    normalize = M + 1 + bound.bit_length() > W - 1
    k_hi = max(bound.bit_length() - M, 0) if normalize else bound.bit_length()
    x = _unpack_float_bits(b, b.bitcast_to_int(value), s, W, normalize=normalize)
    L = x.L if shift is None else b.sub(x.L, _widen_shift(b, shift, W))
    k = b.add(L, G + F - M)  # |x| 2^(G+F) = sig 2^k
    left = b.shl(x.sig, b.min(b.max(k, 0), k_hi))
    right = b.min(b.max(b.sub(0, k), 0), W - 1)
    fl = b.shr(left, right)
    frac = b.cmp("ne", b.shl(fl, right), left)
    fl = b.min(fl, bound) if shift is None else _sel(b, x.inf, bound, b.min(fl, bound))
    one, zero = b.constant(1, W), b.constant(0, W)
    cl = b.add(fl, b.sel(frac, one, zero))
    SF = b.sel(x.neg, b.sub(0, cl), fl)  # floor(x 2^(G+F))
    SC = b.sel(x.neg, b.sub(0, fl), cl)  # ceil
    r = None
    if stochastic:
        r = b.and_(b.resize(b.signless(rbits), W), (1 << 32) - 1)
    count = None
    rd: dict[int, Any] = {}  # r Du by gap width
    for j in range(len(N) - 1):
        lo, hi = N[j], N[j + 1]
        straddle = lo < 0 < hi
        if roundmode == "zero":
            if straddle:  # x's sign decides (x beyond the gap has the same sign)
                up = b.cmp("eq", b.sel(x.neg, one, zero), 0)
            elif lo >= 0:
                up = b.cmp("sge", SF, P[j + 1])
            else:
                up = b.cmp("sgt", SC, P[j])
        elif stochastic:
            if hi - lo not in rd:
                rd[hi - lo] = b.mul(r, hi - lo)
            # toward zero is lo: up on a carry; toward zero is hi: up without one (lo is
            # toward zero when lo >= 0 or, straddling 0, for x < 0: whenever hi > 0; hi
            # whenever lo < 0)
            to_lo = b.cmp("sle", b.sub(P[j + 1], SF), rd[hi - lo]) if hi > 0 else None
            to_hi = b.cmp("sgt", b.sub(SC, P[j]), rd[hi - lo]) if lo < 0 else None
            up = to_lo if to_hi is None else to_hi if to_lo is None else \
                b.select(x.neg, to_lo, to_hi)
        else:
            m = lo + hi  # the midpoint, in units 2^-(G+1)
            if straddle and roundmode != "even" and m == 0:
                # a tie is x = +-0: toward zero is the neighbour of x's sign
                up = b.cmp("eq", b.sel(x.neg, one, zero), 0)
            else:
                up = b.cmp("sge", SF, m) if _lut_tie_up(n, j, roundmode) else \
                    b.cmp("sgt", SC, m)
        inc = b.sel(up, one, zero)
        count = inc if count is None else b.add(count, inc)
    return _sel(b, x.nan, n.lut_nan_code, count), W


def _lut_tie_up(n: NumberSpec, j: int, roundmode: str) -> bool:
    """Whether a tie in gap j (x = its midpoint, not 0) rounds up, for the nearest modes."""
    lo, hi = Fraction(n.table[j]), Fraction(n.table[j + 1])
    if lo < 0 < hi and roundmode != "even":
        return lo + hi > 0  # the tie x = m has m's sign
    return {"even": (j + 1) % 2 == 0, "nearest": lo >= 0, "half_down": hi <= 0}[roundmode]


def _low_bit(a: Fraction) -> int:
    """The exponent of the lowest set bit of a positive dyadic rational."""
    return (a.numerator & -a.numerator).bit_length() - a.denominator.bit_length()


#: the per-gap encoder's packed gap word (:func:`_lut_gap_words`): bit positions
_LW_OUT, _LW_ZPOS, _LW_STRAD, _LW_BH, _LW_NEGB, _LW_NEGS, _LW_TPOS, _LW_TNEG = range(8, 16)
_LW_DS, _LW_FE = 16, 24
#: the frame: B 2^-fe below 2^29 (B the end of larger magnitude), so that 2^32 B / 2^fe and
#: every other working quantity stays below 2^62
_LW_FRAME = 28


def _lut_key(v: float, Mk: int) -> int:
    """The signed key of a value (see :func:`_encode_lut_wide`): +-((L + 151) 2^Mk + m) with
    L = floor(log2 |v|) clamped to [-150, 128] and m the fraction bits of |v| 2^-L (Mk of
    them), 0 for 0: monotone in v, exact for f32 values."""
    if v == 0:
        return 0
    a = abs(Fraction(v))
    L = numbers.floor_log2(a)
    sig = a * Fraction(2) ** (Mk - L)
    assert sig.denominator == 1
    key = ((min(max(L, -150), 128) + 151) << Mk) + int(sig) - (1 << Mk)
    return -key if v < 0 else key


def _lut_gap_words(n: NumberSpec, roundmode: str) -> list[tuple[int, int]]:
    """(P, Q) for x >= T_j (j = 0 .. 2^K - 1), and for x < T_0 first: P packs the code j,
    whether x is outside the gaps (below T_0 or at or above the last value), and for the gap
    (lo, hi) = (T_j, T_j+1): lo >= 0, lo < 0 < hi, whether B (the end of larger magnitude) is
    hi, the signs of B and of the other end s, whether a tie goes up for x > 0 and for x < 0
    (nearest modes), ds and fe + 256; Q packs MB = |B| 2^-fe (an integer below 2^29: fe =
    floor(log2 |B|) - 28) and Ms: |s| = Ms 2^(fe - ds), with ds = 0 where |s| 2^-fe is an
    integer (then below 2^29), else Ms odd (below 2^24) and 0 < ds < 256."""
    t = [Fraction(v) for v in n.table]
    last = len(t) - 1
    words = [(1 << _LW_OUT, 0)]
    for j in range(last):
        lo, hi = t[j], t[j + 1]
        bh = abs(hi) >= abs(lo)
        B, s = (hi, lo) if bh else (lo, hi)
        fe = numbers.floor_log2(abs(B)) - _LW_FRAME
        mb = abs(B) / Fraction(2) ** fe
        assert mb.denominator == 1 and mb < 1 << 29
        if s == 0:
            ms, ds = 0, 0
        elif _low_bit(abs(s)) >= fe:
            ms, ds = int(abs(s) / Fraction(2) ** fe), 0
        else:
            ds = fe - _low_bit(abs(s))
            ms = abs(s) * Fraction(2) ** (ds - fe)
            assert ms.denominator == 1
            ms = int(ms)
        assert ms < 1 << 29 and 0 <= ds < 256 and -256 <= fe < 256
        strad = lo < 0 < hi
        if roundmode in ("even", "nearest", "half_down"):
            if strad and roundmode != "even" and lo + hi == 0:
                tpos, tneg = True, False  # a tie is x = +-0: the neighbour of x's sign
            else:
                tpos = tneg = _lut_tie_up(n, j, roundmode)
        else:
            tpos = tneg = False
        flags = [lo >= 0, strad, bh, B < 0, s < 0, tpos, tneg]
        P = j | sum(int(f) << (_LW_ZPOS + i) for i, f in enumerate(flags))
        P |= (ds << _LW_DS) | ((fe + 256) << _LW_FE)
        words.append((P, (int(mb) << 30) | ms))
    words.append((last | (1 << _LW_OUT), 0))
    return words


def _cmp_scaled(b: IntBuilder, a: Any, c: Any, d: Any) -> Any:
    """sign(a 2^d - c) as -1, 0 or 1 (i64), for 0 < a, c < 2^62 and any (moderate) d."""
    one, zero = b.constant(1, 64), b.constant(0, 64)
    nd = b.sub(0, d)
    dp = b.min(b.max(d, 0), 62)
    dn = b.min(b.max(nd, 0), 62)
    big_a = b.or_(b.cmp("sgt", d, 62), b.cmp("ne", b.shr(a, b.sub(62, dp)), 0))
    big_c = b.or_(b.cmp("sgt", nd, 62), b.cmp("ne", b.shr(c, b.sub(62, dn)), 0))
    av, cv = b.shl(a, dp), b.shl(c, dn)
    s = b.sub(b.sel(b.cmp("sgt", av, cv), one, zero), b.sel(b.cmp("slt", av, cv), one, zero))
    return b.sel(big_a, one, b.sel(big_c, -1, s))


def _encode_lut_wide(b: IntBuilder, value: Any, s: FloatType, n: NumberSpec, roundmode: str,
                     rbits: Any, shift: Any) -> tuple[Any, int]:
    """The per-gap LUT encoder: exact for every table, in i64.

    x 2^-shift = +-sig 2^(L - M) (normalized) has a monotone key (:func:`_lut_key`) compared
    with the table values' keys; a chain of selects on x >= T_j picks the gap's constants
    (:func:`_lut_gap_words`).  ``zero`` counts the gaps x rounds past (x >= hi, x > lo or x's
    sign).  Otherwise, for x in [lo, hi), it rounds up exactly when V = 2^F x - (a hi + c lo)
    is > 0 (or >= 0), with F = 1, a = c = 1 (the midpoint; >= where a tie goes up) for the
    nearest modes and F = 32 for stochastic: with t = 2^32 - r, (a, c) = (t, r) and >= where
    the toward-zero end is lo (section 10.7's r + floor(f 2^32) >= 2^32 is 2^32 (x - lo) >=
    t (hi - lo)), (r, t) and > where it is hi.  V is read in the gap's frame 2^fe: the term
    of B (the end of larger magnitude), B 2^-fe, is an integer below 2^29; 2^F x and the
    term of the other end s are split into floor and fraction (the bits below the frame), and
    |2^F x| < 2^F |B| keeps every floor below 2^62.  The sign of V is the floors' difference
    unless it is 0; then the fractions decide, compared exactly as dyadics (x's bits below
    the frame against those of s's term, at any distance)."""
    W, M = 64, s.man_bits
    Mk = max(M, 23)
    stochastic = roundmode == "stochastic"
    F = 32 if stochastic else 1
    x = _unpack_float_bits(b, b.bitcast_to_int(value), s, W, normalize=True)
    L = x.L if shift is None else b.sub(x.L, _widen_shift(b, shift, W))
    one, zero = b.constant(1, W), b.constant(0, W)
    mant = b.and_(x.sig, (1 << M) - 1)
    if Mk > M:
        mant = b.shl(mant, Mk - M)
    key = b.add(b.add(b.shl(b.max(b.min(L, 128), -150), Mk), mant), 151 << Mk)
    if shift is not None:  # +-Inf stays beyond every value whatever the shift
        key = b.sel(x.inf, b.constant(280 << Mk, W), key)
    key = b.sel(x.zero, zero, key)
    skey = b.sel(x.neg, b.sub(0, key), key)
    keys = [_lut_key(v, Mk) for v in n.table]
    nan_code = n.lut_nan_code
    if roundmode == "zero":  # the toward-zero neighbour: count the gaps x passes
        count = None
        for j in range(len(keys) - 1):
            lo, hi = n.table[j], n.table[j + 1]
            if lo < 0 < hi:
                up = b.cmp("eq", b.sel(x.neg, one, zero), 0)
            elif lo >= 0:
                up = b.cmp("sge", skey, keys[j + 1])
            else:
                up = b.cmp("sgt", skey, keys[j])
            inc = b.sel(up, one, zero)
            count = inc if count is None else b.add(count, inc)
        return _sel(b, x.nan, nan_code, count), W
    words = _lut_gap_words(n, roundmode)
    P, Q = b.constant(words[0][0], W), zero
    for j, kj in enumerate(keys):
        ge = b.cmp("sge", skey, kj)
        P = b.sel(ge, words[j + 1][0], P)
        if j < len(keys) - 1:
            Q = b.sel(ge, words[j + 1][1], Q)

    def flag(bit: int) -> Any:
        return b.cmp("ne", b.and_(P, 1 << bit), 0)

    fe = b.sub(b.shr(P, _LW_FE), 256)
    ds = b.and_(b.shr(P, _LW_DS), 255)
    negB, negS = flag(_LW_NEGB), flag(_LW_NEGS)
    # 2^F x 2^-fe = +-sig 2^k: floor XI and fraction mx 2^-mk of its magnitude
    k = b.sub(b.add(L, F - M), fe)
    mk = b.max(b.sub(0, k), 0)
    kr = b.min(mk, 63)
    XI = b.shr(b.shl(x.sig, b.min(b.max(k, 0), 62)), kr)
    mx = b.and_(x.sig, b.xor(b.shl(-1, kr), -1))
    fx = b.cmp("ne", mx, 0)
    Xq = b.sel(x.neg, b.sub(b.sub(0, XI), b.sel(fx, one, zero)), XI)  # floor
    MB, Ms = b.shr(Q, 30), b.and_(Q, (1 << 30) - 1)
    if stochastic:
        r = b.and_(b.resize(b.signless(rbits), W), (1 << 32) - 1)
        t = b.sub(1 << 32, r)
        zlo = b.or_(flag(_LW_ZPOS), b.and_(flag(_LW_STRAD), x.neg))  # toward zero is lo
        cB = b.sel(b.xor(flag(_LW_BH), zlo), r, t)  # B's coefficient (hi's is t or r)
        A1, A2 = b.mul(cB, MB), b.mul(b.sub(1 << 32, cB), Ms)
        thr = b.sel(zlo, -1, zero)  # up: sign(V) > thr
    else:
        A1, A2 = MB, Ms
        thr = b.sel(b.sel(x.neg, flag(_LW_TNEG), flag(_LW_TPOS)), -1, zero)
    A1 = b.sel(negB, b.sub(0, A1), A1)
    dsc = b.min(ds, 63)
    AI = b.shr(A2, dsc)  # |s's term| 2^-fe: floor AI and fraction ma 2^-ds
    ma = b.and_(A2, b.xor(b.shl(-1, dsc), -1))
    fr = b.cmp("ne", ma, 0)
    A2q = b.sel(negS, b.sub(b.sub(0, AI), b.sel(fr, one, zero)), AI)
    diff = b.sub(Xq, b.add(A1, A2q))  # V 2^-fe = diff + (x's fraction - s's), both in [0, 1)
    cf = b.sub(b.sel(fx, one, zero), b.sel(fr, one, zero))
    if stochastic or M + 1 > 24:
        # both fractions non-zero: xa = mx 2^-mk, ra = ma 2^-ds in (0, 1); x's floor-fraction
        # is xa (x > 0) or 1 - xa, s's term's ra or 1 - ra: compare xa with ra, or xa + ra
        # with 1 (1 - xa with ra, or 1 - ra with xa, whichever is exact in i64)
        d1 = b.sub(ds, mk)
        c1 = _cmp_scaled(b, mx, ma, d1)
        use_x = b.cmp("sle", mk, 62)
        a2 = b.sel(use_x, b.sub(b.shl(one, b.min(mk, 62)), mx),
                   b.sub(b.shl(one, b.min(ds, 62)), ma))
        c2 = b.sub(0, _cmp_scaled(b, a2, b.sel(use_x, ma, mx), b.sel(use_x, d1, b.sub(0, d1))))
        c2 = b.sel(b.and_(b.cmp("sgt", mk, 62), b.cmp("sgt", ds, 62)), -1, c2)
        res = b.sel(b.xor(x.neg, negS), c2, c1)
        cf = b.sel(b.and_(fx, fr), b.sel(x.neg, b.sub(0, res), res), cf)
    sgn = b.sel(b.cmp("eq", diff, 0), cf, diff)
    up = b.and_(b.cmp("sgt", sgn, thr), b.cmp("eq", b.and_(P, 1 << _LW_OUT), 0))
    code = b.add(b.and_(P, 255), b.sel(up, one, zero))
    return _sel(b, x.nan, nan_code, code), W


def _decode_lut(b: IntBuilder, codes: Any, n: NumberSpec, dst: str, shift: Any) -> Any:
    """Table values by a select tree on the code's bits (f32 bit patterns, exact), then
    ``* 2^shift`` rounded once to f32 and to ``dst`` by the general decoder of f32 codes."""
    c = b.signless(codes)
    if b.width(c) != 32:
        c = b.resize(c, 32)
    vals: list[Any] = [int(np.float32(t).view(np.uint32)) for t in n.table]
    for i in range(n.bits):
        bit = b.cmp("ne", b.and_(c, 1 << i), 0)
        nxt = []
        for lo, hi in zip(vals[::2], vals[1::2]):
            if isinstance(lo, int) and isinstance(hi, int):
                nxt.append(lo if lo == hi else b.sel(bit, b.constant(hi, 32), lo))
            else:
                nxt.append(b.sel(bit, hi, lo))
        vals = nxt
    bits = vals[0] if not isinstance(vals[0], int) else b.constant(vals[0], 32)
    if shift is None and dst == "f32":
        return b.bitcast_to_float(bits, "f32")
    return emit_decode(b, bits, "f32", dst, shift=shift)


# ================================================================ the specializations (plans)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What :func:`convert_codes` emits for one (source, destination) pair; see :func:`plan`."""

    src: FloatType
    dst: FloatType
    width: int  #: working integer width
    normalize: bool  #: renormalize source subnormals (shift ladder)
    decode_subnormals: bool  #: source subnormals need e = 1 / no implicit bit
    e8m0_subnormal_ties_down: bool  #: the ml_dtypes f32-subnormal -> e8m0 rule
    e8m0_low: bool  #: the same rule for sources normal below 2^-126 (f64)
    dst_subnormals: bool  #: variable right shift for destination subnormals
    clamp_exp: int | None  #: clamp e_d to this value (keeps mag in range)
    overflow_min: bool  #: emit min(mag, K)
    nan_select: bool  #: NaN sources need an explicit select
    inf_select: bool  #: Inf sources need an explicit select
    zero_select: bool  #: zero needs an explicit select (after normalization)
    #: round in one step on the whole magnitude, ``(a + rebias + inc) >> sh``, instead of
    #: splitting exponent and significand (no normalization, no variable shift)
    direct: bool = False
    #: destination subnormals from one float add in the source format (f32/f64 sources)
    fpu_subnormals: bool = False
    #: source subnormals from one float subtraction in the destination format (to f32/f64)
    fpu_normalize: bool = False


def _ladder_steps(man_bits: int) -> list[int]:
    """The shift ladder's steps for a significand of ``man_bits`` bits: powers of two,
    largest first."""
    steps, k = [], 1
    while k <= man_bits:
        steps.insert(0, k)
        k *= 2
    return steps


def _overflow_code(t: FloatType) -> int:
    """K: the magnitude every too-large value (and Inf) converts to; max finite + 1 or max."""
    if t.overflow == "saturate":
        return t.max_code
    if t.overflow == "inf":
        assert t.special == "ieee"
        return t.exponent_mask
    if t.special == "fnuz":  # one past the largest magnitude is the sign bit: the NaN code
        return t.max_code + 1
    k = t.nan_code & t.magnitude_mask
    assert k == t.max_code + 1, f"{t.mlir}: NaN on overflow needs NaN == max + 1"
    return k


def plan(src: str | FloatType, dst: str | FloatType, width: int | None = None, *,
         fpu: bool = True) -> Plan:
    """Static analysis of one conversion: which steps of the algorithm are needed.

    ``fpu=False`` keeps everything in integer ops (no float add/sub for subnormals)."""
    s, d = codec_type(src), codec_type(dst)
    Ms, Md = s.man_bits, d.man_bits
    delta = d.bias - s.bias
    e_all = (1 << s.exp_bits) - 1
    normalize = s.subnormals and Ms > 0 and d.bias > s.bias
    # source subnormals all below half the smallest destination subnormal: treat them as normals
    # with e = 0 (their value stays below that half, so they still round to zero)
    flush = (s.subnormals and not normalize and d.subnormals
             and s.bias >= d.bias + Md + 1)
    decode_sub = s.subnormals and not flush
    e8m0_quirk = d.special == "fnu" and s.subnormals and not normalize
    lo_nonzero = (1 - Ms) if normalize else (1 if decode_sub else 0)
    lo_e = lo_nonzero + delta
    # f8E8M0FNU below 2^-126 (only f64 sources reach it as normals): ml_dtypes' rule for f32
    # subnormals, generalized: 2^-126 above 2^-127, else 2^-127
    e8m0_low = d.special == "fnu" and lo_e < 1
    if not d.subnormals and d.special != "fnu" and lo_e < 1:  # pragma: no cover
        raise NotImplementedError(f"{s.mlir} -> {d.mlir}: no rule below the destination range")
    dst_sub = d.subnormals and lo_e < 1
    K = _overflow_code(d)
    e_star = -(-K // (1 << Md))  # the smallest e_d whose magnitudes are all >= K
    # largest rounded significand (carry included); exact left shifts never carry
    r_max = (1 << (Md + 1)) if Ms > Md else ((1 << (Ms + 1)) - 1) << (Md - Ms)
    fin_e = (e_all - 1 if s.special in ("ieee", "fnu") else e_all) + delta  # finite sources
    spec_e = e_all + delta  # the exponent field of Inf/NaN sources

    def mag_hi(e: int) -> int:
        return ((e - 1) << Md) + r_max

    finite_overflow = mag_hi(min(fin_e, e_star)) > d.max_code
    natural = spec_e >= e_star  # Inf/NaN sources land on the overflow code by themselves
    overflow_min = finite_overflow or (natural and (s.has_inf or s.has_nan))
    nan_natural = (overflow_min and natural and d.has_nan and s.special != "fnuz"
                   and (d.nan_code & d.magnitude_mask) == K)
    nan_select = s.has_nan and not nan_natural
    inf_select = s.has_inf and not (overflow_min and natural)
    zero_select = normalize and d.special != "fnu"
    # working width: significand with guard bits and rounding increment, exponents and
    # magnitudes must fit (signed); clamp e_d at e_star where that is what makes them fit
    P = max(Ms, Md + 1) if dst_sub else Ms
    hi_e = spec_e if s.has_inf or s.has_nan else fin_e

    def need(clamped: bool) -> int:
        top = mag_hi(min(hi_e, e_star) if clamped else hi_e)
        return max(max(P + 3, top.bit_length(), hi_e.bit_length(),
                       (abs(lo_e) + Ms + 1).bit_length()) + 1, s.bits, d.bits)

    clamp = None
    w = width or max(16, s.bits, d.bits)
    for w in dict.fromkeys((w, max(w, 32))):
        if need(False) <= w:
            break
        if overflow_min and hi_e > e_star and need(True) <= w:
            clamp = e_star
            break
    else:  # pragma: no cover - no described pair needs more
        raise NotImplementedError(f"{s.mlir} -> {d.mlir} needs more than 32-bit integers")
    # The float-assisted steps: the FPU rounds (or scales) subnormals exactly, in one add.
    fpu_sub = dst_sub and fpu and s.mlir in ("f32", "f64") and w == s.bits and Ms >= Md
    fpu_norm = (normalize and fpu and d.mlir in ("f32", "f64") and w == d.bits
                and Md >= Ms and not e8m0_low)
    # One-step rounding of the whole magnitude: a + C must not pass 2^w (the logical shift
    # then still sees the true sum), and a rebias that can go negative needs the subnormal
    # select to discard those lanes.
    sh = Ms - Md
    c_max = (delta << Ms) + ((1 << sh) if sh > 0 else 0)
    direct = (not normalize and Ms >= Md and clamp is None and not e8m0_low
              and (not dst_sub or fpu_sub)
              and (s.magnitude_mask + c_max < (1 << w) if sh > 0
                   else s.magnitude_mask + c_max < (1 << (w - 1))))
    if fpu_norm:
        zero_select = False  # the subtraction gives +0 for code 0
    return Plan(s, d, w, normalize, decode_sub, e8m0_quirk, e8m0_low, dst_sub, clamp,
                overflow_min, nan_select, inf_select, zero_select, direct, fpu_sub, fpu_norm)


def _round_plan(b: IntBuilder, sig, sh, half, ties: str, tie_down=None):
    """Shift ``sig`` right by ``sh`` (>= 1, an int or a value) with rounding: "even" (RNE) or
    "up" (ties up; down where ``tie_down`` is true).  ``half`` = 1 << (sh - 1)."""
    if ties == "even":
        lsb = b.and_(b.shr(sig, sh), 1)
        inc = b.add(half - 1 if isinstance(half, int) else b.sub(half, 1), lsb)
    elif tie_down is None:
        inc = half
    else:
        w = b.width(sig)
        h = half if not isinstance(half, int) else b.constant(half, w)
        inc = b.sub(h, b.select(tie_down, b.constant(1, w), b.constant(0, w)))
    return b.shr(b.add(sig, inc), sh)


def convert_codes(b: IntBuilder, c: Any, src: str | FloatType, dst: str | FloatType,
                  p: Plan | None = None) -> Any:
    """The conversion algorithm: ``c`` holds ``src`` codes in the low bits of integers of the
    plan's working width (upper bits zero); returns ``dst`` codes of the same width (upper bits
    zero).  See the module docstring for the steps."""
    p = p or plan(src, dst)
    s, d = p.src, p.dst
    a = b.and_(c, s.magnitude_mask) if s.signed else c
    ties = "up" if d.special == "fnu" else "even"
    if p.direct:
        mag = _direct(b, a, p, ties)
    elif p.fpu_normalize:
        mag = _fpu_normalize(b, a, p)
    else:
        mag = _generic(b, a, p, ties)
    return _finish(b, c, a, mag, p)


def _float_bits(t: FloatType, k: int) -> int:
    """The bit pattern of 2^k in format ``t`` (a normal number)."""
    return (k + t.bias) << t.man_bits


def _direct(b: IntBuilder, a: Any, p: Plan, ties: str) -> Any:
    """Ms >= Md without normalization: round the whole magnitude in one step (the carry out of
    the mantissa increments the exponent); destination subnormals come from the FPU."""
    s, d = p.src, p.dst
    Ms, Md = s.man_bits, d.man_bits
    sh, C = Ms - Md, (d.bias - s.bias) << Ms
    if sh == 0:
        n = b.add(a, C) if C else a
    elif ties == "even":
        n = b.shr(b.add(a, b.add(b.and_(b.shr(a, sh), 1), C + (1 << (sh - 1)) - 1)), sh)
    elif p.e8m0_subnormal_ties_down:
        w = p.width
        inc = b.select(b.cmp("slt", a, 1 << Ms), b.constant(C + (1 << (sh - 1)) - 1, w),
                       b.constant(C + (1 << (sh - 1)), w))
        n = b.shr(b.add(a, inc), sh)
    else:
        n = b.shr(b.add(a, C + (1 << (sh - 1))), sh)
    if p.fpu_subnormals:
        # ulp(M) is the destination's subnormal step, so M + |x| rounds |x| to it (RNE)
        M = _float_bits(s, 1 - d.bias - Md + Ms)
        sub = b.sub(b.float_op("add", a, b.constant(M, p.width), s.mlir), M)
        n = b.sel(b.cmp("slt", a, _float_bits(s, 1 - d.bias)), sub, n)
    return n


def _fpu_normalize(b: IntBuilder, a: Any, p: Plan) -> Any:
    """Narrow -> f32/f64: normals by shift and rebias; subnormals m * ulp as (M | m) - M."""
    s, d = p.src, p.dst
    Ms, Md = s.man_bits, d.man_bits
    normal = b.add(b.shl(a, Md - Ms), (d.bias - s.bias) << Md)
    M = _float_bits(d, 1 - s.bias - Ms + Md)  # ulp(M) is the source's subnormal step
    sub = b.float_op("sub", b.or_(a, M), b.constant(M, p.width), d.mlir)
    return b.sel(b.cmp("slt", a, 1 << Ms), sub, normal)


def _generic(b: IntBuilder, a: Any, p: Plan, ties: str) -> Any:
    """Exponent and significand apart: normalization ladder, variable subnormal shift."""
    s, d = p.src, p.dst
    Ms, Md = s.man_bits, d.man_bits
    delta = d.bias - s.bias
    e = b.shr(a, Ms) if Ms else a
    is_sub = None
    if p.decode_subnormals:
        e_eff = b.max(e, 1)
        # a - ((e_eff - 1) << Ms): (1 << Ms) | m for normals, m for subnormals
        sig = b.sub(a, b.shl(b.sub(e_eff, 1), Ms))
        if p.e8m0_subnormal_ties_down:
            is_sub = b.cmp("eq", e, 0)
    else:
        e_eff = e
        sig = b.or_(b.and_(a, (1 << Ms) - 1), 1 << Ms) if Ms else b.constant(1, p.width)
    if p.normalize:
        for k in _ladder_steps(Ms):
            small = b.cmp("slt", sig, 1 << (Ms + 1 - k))
            sig = b.sel(small, b.shl(sig, k), sig)
            e_eff = b.sel(small, b.sub(e_eff, k), e_eff)

    e_d = b.add(e_eff, delta) if delta else e_eff
    if p.clamp_exp is not None:
        e_d = b.min(e_d, p.clamp_exp)
    P = Ms
    if p.dst_subnormals:
        if P <= Md:
            sig = b.shl(sig, Md + 1 - P)
            P = Md + 1
        extra = b.min(b.max(b.sub(1, e_d), 0), Md + 2)
        sh = b.add(extra, P - Md)
        half = b.shl(1 << (P - Md - 1), extra)
        r = _round_plan(b, sig, sh, half, ties, is_sub)
        # 4. assemble: (max(e_d, 1) - 1) << Md
        mag = b.add(b.shl(b.max(b.sub(e_d, 1), 0), Md), r)
    else:
        sh = P - Md
        if sh > 0:
            r = _round_plan(b, sig, sh, 1 << (sh - 1), ties, is_sub)
        elif sh < 0:
            r = b.shl(sig, -sh)
        else:
            r = sig
        mag = b.add(b.shl(b.sub(e_d, 1), Md) if Md else b.sub(e_d, 1), r)
    if p.e8m0_low:  # e_d == 0: (2^-127, 2^-126) -> 1, 2^-127 -> 0; e_d < 0 -> 0
        one, zero = b.constant(1, p.width), b.constant(0, p.width)
        band = b.sel(b.cmp("sgt", sig, 1 << P), one, zero) if P else zero
        mag = b.sel(b.cmp("slt", e_d, 1), b.sel(b.cmp("eq", e_d, 0), band, 0), mag)
    if p.zero_select:
        mag = b.sel(b.cmp("eq", a, 0), 0, mag)
    return mag


def _finish(b: IntBuilder, c: Any, a: Any, mag: Any, p: Plan) -> Any:
    """Overflow rule, special values, sign."""
    s, d = p.src, p.dst
    K = _overflow_code(d)
    if p.overflow_min:
        mag = b.min(mag, K)
    inf_bits = s.exponent_mask
    src_nan = None
    if p.nan_select:
        if s.special == "ieee":
            src_nan = b.cmp("sgt", a, inf_bits)
        elif s.special == "fnuz":  # the sign bit alone (bits above the code ignored)
            src_nan = b.cmp("eq", b.and_(c, (1 << s.bits) - 1), s.sign_mask)
        else:  # fn: the all-ones magnitude; fnu: code 0xFF
            src_nan = b.cmp("eq", a, s.magnitude_mask)
    if p.inf_select:
        mag = b.sel(b.cmp("eq", a, inf_bits), K, mag)
    if not d.signed:  # f8E8M0FNU: zero, negatives and NaN -> 0xFF
        bad = [b.cmp("eq", a, 0)] if s.special != "fnu" else []  # (f8E8M0FNU has no zero)
        if s.signed:
            bad.append(b.cmp("ne", b.and_(c, s.sign_mask), 0))
        if src_nan is not None:
            bad.append(src_nan)
        if not bad:
            return mag
        cond = bad[0]
        for x in bad[1:]:
            cond = b.or_(cond, x)
        return b.sel(cond, d.nan_code, mag)
    nan_mag = d.nan_code & d.magnitude_mask
    if p.nan_select and d.special not in ("none", "fnuz"):
        mag = b.sel(src_nan, nan_mag, mag)
    if s.signed:
        if s.bits >= d.bits:
            sgn = b.and_(b.shr(c, s.bits - d.bits), d.sign_mask) if s.bits > d.bits else \
                b.and_(c, d.sign_mask)
        else:
            sgn = b.shl(b.and_(c, s.sign_mask), d.bits - s.bits)
        if d.special == "fnuz":  # no -0 (a zero stays +0; the overflow code is NaN either way)
            mag = b.sel(b.cmp("eq", mag, 0), mag, b.or_(mag, sgn))
        else:
            mag = b.or_(mag, sgn)
    if p.nan_select and d.special in ("none", "fnuz"):  # one code for every NaN
        mag = b.sel(src_nan, d.nan_code, mag)
    return mag


def _code_in(b: IntBuilder, codes: Any, s: FloatType, width: int) -> Any:
    w = b.width(codes)
    c = b.resize(codes, width) if w != width else codes
    if w > s.bits and not s.signed:  # signed codes are only read through their sign and
        c = b.and_(c, (1 << s.bits) - 1)  # magnitude masks, which ignore the bits above
    return c



# ============================================================================ entry points


def emit_encode(b: IntBuilder, value: Any, src_wide: str | FloatType,
                spec: NumberSpec | FloatType | str, *, roundmode: str = "even",
                rbits: Any = None, shift: Any = None, code_bits: int | None = None,
                fixed: bool = False) -> Any:
    """Floats of ``src_wide`` -> ``spec`` codes, section 10's cast (see the module
    docstring)."""
    n, _ = _spec(spec)
    _check_mode(roundmode, rbits)
    if n.is_lut:
        code, W = _encode_lut(b, value, src_wide, n, roundmode, rbits, shift)
    else:
        code, W = _encode(b, value, src_wide, n, target(n), roundmode, rbits, shift, fixed)
    bits = code_bits or _storage_bits(n)
    if bits < n.bits:
        raise ValueError(f"emit_encode: code_bits={bits} cannot hold {n.code}'s {n.bits} bits")
    out = b.resize(code, bits) if bits != W else code
    return b.to_storage(out, storage_type(n)) if code_bits is None else out


#: arith.truncf's ``roundingmode`` names -> the codec's rounding modes (the ones mxlower
#: lowers; ``upward`` and ``downward`` have no section 2 meaning here)
TRUNCF_MODES = {"to_nearest_even": "even", "toward_zero": "zero", "to_nearest_away": "nearest"}


def emit_truncf(b: IntBuilder, value: Any, src_wide: str | FloatType, dst: str | FloatType,
                *, roundmode: str = "even", code_bits: int = 8, fpu: bool = True) -> Any:
    """Section 2's conversion of floats of ``src_wide`` to the narrow type ``dst`` (see the
    module docstring): ``even`` is the planned specialization; ``zero`` and ``nearest``
    round the exact value as section 10.2 says and then apply the type's section 2 rules
    (:func:`convert_target`)."""
    s, d = codec_type(src_wide), codec_type(dst)
    if s.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_truncf: source must be one of {', '.join(WIDE_FLOAT_TYPES)}, "
                         f"got '{s.mlir}'")
    if roundmode == "even":
        p = plan(s, d, fpu=fpu)
        u = b.bitcast_to_int(value)
        if p.width != s.bits:
            u = b.resize(u, p.width)
        out = convert_codes(b, u, s, d, p)
        return b.resize(out, code_bits) if code_bits != p.width else out
    if roundmode not in ("zero", "nearest"):
        raise ValueError(f"emit_truncf: rounding mode '{roundmode}' is not a section 2 "
                         "conversion mode (even, zero, nearest)")
    if d.mlir in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_truncf: the destination must be a narrow type, got {d.mlir}")
    n = numbers.of_float_type(d)
    code, W = _encode(b, value, s, n, convert_target(d, roundmode), roundmode, None, None,
                      False)
    return b.resize(code, code_bits) if code_bits != W else code


def emit_extf(b: IntBuilder, codes: Any, src: str | FloatType, dst_wide: str, *,
              fpu: bool = True) -> Any:
    """Section 2's widening of narrow ``src`` codes (low bits of integers of any width) to
    floats of ``dst_wide`` (f64, f32, bf16 or f16): the planned specialization."""
    s = codec_type(src)
    d = codec_type(dst_wide)
    if d.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_extf: destination must be one of {', '.join(WIDE_FLOAT_TYPES)},"
                         f" got '{d.mlir}'")
    # float-assisted only where every value is normal in f32: a subnormal result of the float
    # subtraction would be flushed where f32 arithmetic flushes (XLA:CPU, GPUs)
    fpu = fpu and not (s.subnormals and 1 - s.bias - s.man_bits < -126)
    p = plan(s, d, fpu=fpu)
    out = convert_codes(b, _code_in(b, codes, s, p.width), s, d, p)
    if p.width != d.bits:
        out = b.resize(out, d.bits)
    return b.bitcast_to_float(out, d.mlir)


def emit_decode(b: IntBuilder, codes: Any, spec: NumberSpec | FloatType | str, dst_wide: str,
                *, shift: Any = None, fixed: bool = False) -> Any:
    """``spec`` codes -> floats of ``dst_wide``, section 10.4 (see the module docstring): the
    planned specialization (:func:`emit_extf`) for the narrow float types of
    :data:`mxlower.types.FLOAT_TYPES` without ``shift``, the general decoder otherwise."""
    d = codec_type(dst_wide)
    if d.mlir not in ("f32", "bf16", "f16"):
        raise ValueError(f"emit_decode: destination must be f32, bf16 or f16, got '{d.mlir}'")
    n, ft = _spec(spec)
    if n.is_lut:
        return _decode_lut(b, codes, n, d.mlir, shift)
    if shift is None and ft is not None and (isinstance(spec, FloatType)
                                             or ft.mlir in FLOAT_TYPES):
        return emit_extf(b, codes, ft, d.mlir)
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


def emit_convert_codes(b: IntBuilder, codes: Any, src: str | FloatType, dst: str | FloatType,
                       *, code_bits: int = 8) -> Any:
    """Narrow ``src`` codes -> narrow ``dst`` codes, section 2 (``code_bits``-wide integers;
    integer ops only)."""
    s, d = codec_type(src), codec_type(dst)
    p = plan(s, d)
    out = convert_codes(b, _code_in(b, codes, s, p.width), s, d, p)
    return b.resize(out, code_bits) if code_bits != p.width else out
