"""Bit-exact narrow-float conversions, generated from the codec descriptions in
:mod:`mxlower.types` (docs/semantics.md section 2).

The conversion algorithm is written once, against a small abstract integer-op builder
(:class:`IntBuilder`), and driven by :class:`~mxlower.types.FloatType` descriptions of the
source and destination formats.  Three builders execute it:

* :class:`~mxlower.lowering.codec_stablehlo.StableHLOBuilder` -- ``stablehlo`` integer ops on
  ranked tensors (jaxlib stack; in its own module, so that this one imports no MLIR);
* :class:`ArithBuilder` -- ``arith`` ops on scalars, vectors or tensors, for EITHER binding
  stack: pass the ``ir`` and ``arith`` modules to use (``jaxlib.mlir.{ir,dialects.arith}`` or
  upstream ``mlir.ir`` / ``mlir.dialects.arith``);
* :class:`NumpyBuilder` -- executes the same algorithm on NumPy arrays (fast exhaustive tests).

Entry points
------------
All three take a builder and return the result value (an MLIR ``Value`` or an ndarray).  Type
arguments are MLIR spellings (``"f32"``, ``"bf16"``, ``"f16"``, ``"f8E4M3FN"``, ...) or
:class:`FloatType` objects.

``emit_truncf(b, value, src_wide, dst, *, code_bits=8, fpu=True)``
    ``value``: floats of type ``src_wide`` (f32, bf16 or f16; f64 also works).  Returns the
    ``dst`` codes as integers of width ``code_bits`` (8: one code per byte, f4/f6 codes in the
    low bits, upper bits zero; or ``dst.bits``, e.g. 4, so that an ``arith.bitcast`` to
    ``f4E2M1FN`` follows).  StableHLO: ``tensor<...xui8>`` (``code_bits`` must be 8).
    Arith: ``i<code_bits>``.

``emit_extf(b, codes, src, dst_wide, *, fpu=True)``
    ``codes``: integers of any width >= ``src.bits`` holding ``src`` codes in the low bits (bits
    above are ignored); returns floats of type ``dst_wide`` (f32, bf16, f16 or f64; exact, or
    RNE for f16 results of f8E8M0FNU, the only decode that can round).

``emit_convert_codes(b, codes, src, dst, *, code_bits=8)``
    narrow -> narrow, codes to codes; the same result as going through f32 (which is exact).

``fpu=False`` emits integer ops only (see "Float-assisted steps" below).

Example (upstream stack, a vector of f32 to f4E2M1FN, as ``arith.truncf`` would)::

    from mlir import ir
    from mlir.dialects import arith
    from mxlower.lowering import codec
    with ir.InsertionPoint(block), loc:
        b = codec.ArithBuilder(ir, arith, x.type)          # x: vector<8xf32>
        codes = codec.emit_truncf(b, x, "f32", "f4E2M1FN", code_bits=4)   # vector<8xi4>
        y = arith.BitcastOp(ir.VectorType.get([8], ir.Type.parse("f4E2M1FN")), codes).result

Builder interface
-----------------
A builder implements nine primitives (see :class:`IntBuilder`): ``constant(value, bits)``,
``binary(op, lhs, rhs)`` with ``op`` in ``and or xor add sub shl shrui shrsi minsi maxsi``,
``compare(pred, lhs, rhs)`` with signed predicates ``eq ne slt sle sgt sge`` (result i1),
``select(cond, a, b)``, ``bitcast_to_int(x)`` / ``bitcast_to_float(x, wide)`` (same width),
``resize(x, bits)`` (zero-extend or truncate), ``width(x)``, and ``float_op(op, lhs, rhs,
wide)`` (``add``/``sub`` of f32 or f64 given and returned as bit patterns; only ``fpu=True``
plans use it).  Optional ones, used by :mod:`mxlower.lowering.codec_spec`: ``xor`` (a
binary op), ``int_to_float`` (where ``has_int_to_float``), ``signless`` and ``to_storage``
(identities except on StableHLO, whose unsigned element types need bitcasts).  Every value of one conversion has the same shape; constants are splats of
it.  Integer values are two's complement; the algorithm only compares values whose signed
reading is their true value, so it never needs unsigned predicates (StableHLO ties compare
signedness to the element type).

The algorithm
-------------
One function, :func:`convert_codes`, converts an integer-coded value of any described format
to any other (the wide types are described in :data:`WIDE_FLOAT_TYPES`), branch-free.
:func:`plan` analyses the two formats statically and picks one of three paths, then a common
finish:

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

Semantics: exactly docs/semantics.md section 2 = :func:`mxlower.reference.convert` for every input
(test/python/test_codec.py checks this exhaustively with :class:`NumpyBuilder`, both with and
without the float-assisted steps).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mxlower.types import FLOAT_TYPES, WIDE_FLOAT_TYPES, FloatType

__all__ = [
    "ArithBuilder",
    "BINARY_OPS",
    "IntBuilder",
    "MLIRBuilder",
    "NumpyBuilder",
    "PREDICATES",
    "Plan",
    "WIDE_FLOAT_TYPES",
    "codec_type",
    "convert_codes",
    "emit_convert_codes",
    "emit_extf",
    "emit_truncf",
    "plan",
    "probe_values",
    "signed",
]


BINARY_OPS = ("and", "or", "xor", "add", "sub", "shl", "shrui", "shrsi", "minsi", "maxsi")
PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge")


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


# ============================================================================ builder interface


class IntBuilder:
    """The integer-op interface the conversion algorithm is written against.

    Subclasses implement the primitives; the helpers below them accept a Python ``int`` for
    either operand and splat it to the other operand's width.
    """

    # -- primitives ------------------------------------------------------------------------
    def constant(self, value: int, bits: int) -> Any:
        """A splat integer constant of width ``bits`` (``value`` taken modulo 2^bits)."""
        raise NotImplementedError

    def binary(self, op: str, lhs: Any, rhs: Any) -> Any:
        """``op`` in :data:`BINARY_OPS`; both operands of the same width.  Shifts are by less
        than the width; ``shrui`` is logical, ``shrsi`` arithmetic; min/max are signed."""
        raise NotImplementedError

    def compare(self, pred: str, lhs: Any, rhs: Any) -> Any:
        """``pred`` in :data:`PREDICATES` (signed); an i1 result."""
        raise NotImplementedError

    def select(self, cond: Any, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def bitcast_to_int(self, x: Any) -> Any:
        """Floats -> integers of the same width (the bit pattern)."""
        raise NotImplementedError

    def bitcast_to_float(self, x: Any, wide: str) -> Any:
        """Integers -> floats of type ``wide`` ("f32", "bf16" or "f16") of the same width."""
        raise NotImplementedError

    def resize(self, x: Any, bits: int) -> Any:
        """Zero-extend or truncate an integer value to ``bits`` bits."""
        raise NotImplementedError

    def float_op(self, op: str, lhs: Any, rhs: Any, wide: str) -> Any:
        """``op`` ("add" or "sub") on the ``wide`` floats (f32 or f64) whose bit patterns
        ``lhs`` and ``rhs`` hold; returns the bit pattern of the IEEE result (round to
        nearest even).  Only plans made with ``fpu=True`` use it."""
        raise NotImplementedError

    def width(self, x: Any) -> int:
        """The integer width of a value (1 for i1)."""
        raise NotImplementedError

    #: whether :meth:`int_to_float` is implemented (the spec codec then normalizes with one
    #: conversion instead of a shift ladder)
    has_int_to_float = False

    def int_to_float(self, x: Any, wide: str) -> Any:
        """Non-negative integers (exact in ``wide``: below 2^24 for f32, 2^53 for f64) ->
        floats of ``wide`` ("f32" or "f64") of the same width; returned as their bit pattern
        (integers).  The result is a normal float or zero, so flushing modes change nothing."""
        raise NotImplementedError

    def signless(self, x: Any) -> Any:
        """An integer value as the builder's working integers of the same width (StableHLO:
        ``ui32`` random bits or ``ui8`` codes bitcast to signless); the identity elsewhere."""
        return x

    def to_storage(self, x: Any, storage: str) -> Any:
        """Working integers as the storage integer type ``storage`` (``"ui8"``, ``"i8"``,
        ``"ui16"``...) of the same width: StableHLO bitcasts, NumPy views; arith (signless)
        returns ``x``."""
        return x

    # -- helpers -----------------------------------------------------------------------------
    def _pair(self, a: Any, b: Any) -> tuple[Any, Any]:
        if isinstance(a, int):
            a = self.constant(a, self.width(b))
        if isinstance(b, int):
            b = self.constant(b, self.width(a))
        return a, b

    def _bin(self, op: str, a: Any, b: Any) -> Any:
        return self.binary(op, *self._pair(a, b))

    def and_(self, a, b):
        return self._bin("and", a, b)

    def or_(self, a, b):
        return self._bin("or", a, b)

    def xor(self, a, b):
        return self._bin("xor", a, b)

    def add(self, a, b):
        return self._bin("add", a, b)

    def sub(self, a, b):
        return self._bin("sub", a, b)

    def shl(self, a, b):
        return self._bin("shl", a, b)

    def shr(self, a, b):
        """Logical shift right."""
        return self._bin("shrui", a, b)

    def min(self, a, b):
        return self._bin("minsi", a, b)

    def max(self, a, b):
        return self._bin("maxsi", a, b)

    def cmp(self, pred: str, a, b):
        return self.compare(pred, *self._pair(a, b))

    def sel(self, cond, a, b):
        if isinstance(a, int) and isinstance(b, int):
            raise TypeError("sel needs at least one value operand to take the width from")
        return self.select(cond, *self._pair(a, b))


# ============================================================================ the algorithm


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


def _ladder(man_bits: int) -> list[int]:
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


def _round(b: IntBuilder, sig, sh, half, ties: str, tie_down=None):
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
        for k in _ladder(Ms):
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
        r = _round(b, sig, sh, half, ties, is_sub)
        # 4. assemble: (max(e_d, 1) - 1) << Md
        mag = b.add(b.shl(b.max(b.sub(e_d, 1), 0), Md), r)
    else:
        sh = P - Md
        if sh > 0:
            r = _round(b, sig, sh, 1 << (sh - 1), ties, is_sub)
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


def emit_truncf(b: IntBuilder, value: Any, src_wide: str, dst: str | FloatType, *,
                code_bits: int = 8, fpu: bool = True) -> Any:
    """f32/bf16/f16 ``value`` -> ``dst`` codes as ``code_bits``-wide integers (see module doc)."""
    s = codec_type(src_wide)
    if s.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_truncf: source must be one of {', '.join(WIDE_FLOAT_TYPES)}, "
                         f"got '{s.mlir}'")
    d = codec_type(dst)
    p = plan(s, d, fpu=fpu)
    u = b.bitcast_to_int(value)
    if p.width != s.bits:
        u = b.resize(u, p.width)
    out = convert_codes(b, u, s, d, p)
    return b.resize(out, code_bits) if code_bits != p.width else out


def emit_extf(b: IntBuilder, codes: Any, src: str | FloatType, dst_wide: str, *,
              fpu: bool = True) -> Any:
    """``src`` codes (low bits of integers of any width) -> floats of ``dst_wide``."""
    s = codec_type(src)
    d = codec_type(dst_wide)
    if d.mlir not in WIDE_FLOAT_TYPES:
        raise ValueError(f"emit_extf: destination must be one of {', '.join(WIDE_FLOAT_TYPES)},"
                         f" got '{d.mlir}'")
    p = plan(s, d, fpu=fpu)
    out = convert_codes(b, _code_in(b, codes, s, p.width), s, d, p)
    if p.width != d.bits:
        out = b.resize(out, d.bits)
    return b.bitcast_to_float(out, d.mlir)


def emit_convert_codes(b: IntBuilder, codes: Any, src: str | FloatType, dst: str | FloatType,
                       *, code_bits: int = 8) -> Any:
    """Narrow ``src`` codes -> narrow ``dst`` codes (``code_bits``-wide integers; integer
    ops only)."""
    s, d = codec_type(src), codec_type(dst)
    p = plan(s, d)
    out = convert_codes(b, _code_in(b, codes, s, p.width), s, d, p)
    return b.resize(out, code_bits) if code_bits != p.width else out


# ============================================================================ NumPy builder


def signed(v: int, bits: int) -> int:
    """``v`` modulo 2^bits, read as a two's complement ``bits``-bit integer."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class NumpyBuilder(IntBuilder):
    """Executes the algorithm on NumPy arrays (int16/int32 working values, bool for i1, uint8
    for 8-bit and narrower codes)."""

    def constant(self, value: int, bits: int) -> np.ndarray:
        if bits <= 8:
            return np.array(value & ((1 << bits) - 1), dtype=np.uint8)
        return np.array(signed(value, bits), dtype=f"int{bits}")

    def width(self, x) -> int:
        x = np.asarray(x)
        return 1 if x.dtype == np.bool_ else x.dtype.itemsize * 8

    def binary(self, op: str, lhs, rhs):
        if op == "shrui":
            bits = self.width(lhs)
            u = f"uint{bits}"
            return (np.asarray(lhs).view(u) >> np.asarray(rhs).astype(u)).view(lhs.dtype)
        fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
              "add": np.add, "sub": np.subtract, "shl": np.left_shift,
              "shrsi": np.right_shift, "minsi": np.minimum, "maxsi": np.maximum}[op]
        with np.errstate(over="ignore"):
            return fn(lhs, rhs).astype(lhs.dtype, copy=False)

    def compare(self, pred: str, lhs, rhs):
        fn = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal,
              "sgt": np.greater, "sge": np.greater_equal}[pred]
        return fn(lhs, rhs)

    def select(self, cond, a, b):
        return np.where(cond, a, b).astype(np.result_type(a, b), copy=False)

    def bitcast_to_int(self, x):
        x = np.asarray(x)
        return x.view(f"int{x.dtype.itemsize * 8}")

    def bitcast_to_float(self, x, wide: str):
        return np.asarray(x).view(WIDE_FLOAT_TYPES[wide].dtype)

    has_int_to_float = True

    def int_to_float(self, x, wide: str):
        dt = WIDE_FLOAT_TYPES[wide].dtype
        return np.asarray(x).astype(dt).view(f"int{8 * dt.itemsize}")

    def float_op(self, op: str, lhs, rhs, wide: str):
        dt = WIDE_FLOAT_TYPES[wide].dtype
        x, y = np.asarray(lhs).view(dt), np.asarray(rhs).view(dt)
        with np.errstate(all="ignore"):
            r = x + y if op == "add" else x - y
        return np.asarray(r, dtype=dt).view(np.asarray(lhs).dtype)

    def signless(self, x):
        x = np.asarray(x)
        return x if x.dtype.kind != "u" or x.dtype.itemsize == 1 else \
            x.view(f"int{8 * x.dtype.itemsize}")

    def to_storage(self, x, storage: str):
        x = np.asarray(x)
        dt = np.dtype(f"{'u' if storage.startswith('u') else ''}int{storage.lstrip('ui')}")
        return x.view(dt) if dt.itemsize == x.dtype.itemsize else x.astype(dt)

    def resize(self, x, bits: int):
        x = np.asarray(x)
        w = self.width(x)
        if bits <= 8:
            return x.astype(np.uint8) & np.uint8((1 << bits) - 1) if bits < 8 else \
                x.astype(np.uint8)
        if bits > w:
            return x.view(f"uint{w}").astype(f"int{bits}")
        return x.astype(f"int{bits}")


# ============================================================================ MLIR builders


class MLIRBuilder(IntBuilder):
    """Shared parts of the MLIR builders (:class:`ArithBuilder`,
    :class:`~mxlower.lowering.codec_stablehlo.StableHLOBuilder`): integer types by width,
    constant caching."""

    def __init__(self, ir: Any, *, loc: Any = None, ip: Any = None):
        self.ir = ir
        self.loc = loc
        self.ip = ip
        self._consts: dict[tuple[int, int], Any] = {}

    def _shaped(self, elem: Any) -> Any:
        raise NotImplementedError

    def _int(self, bits: int) -> Any:
        return self._shaped(self.ir.IntegerType.get_signless(bits))

    def _elem(self, t: Any) -> Any:
        for cls in ("VectorType", "RankedTensorType"):
            try:
                return getattr(self.ir, cls)(t).element_type
            except ValueError:
                pass
        return t

    def width(self, x: Any) -> int:
        return self.ir.IntegerType(self._elem(x.type)).width

    def _kw(self) -> dict:
        return {"loc": self.loc, "ip": self.ip}


_CMPI = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5}


class ArithBuilder(MLIRBuilder):
    """``arith`` ops on scalars, vectors or ranked tensors, for either binding stack.

    ``ir`` and ``arith`` are the modules to build with (``mlir.ir`` and ``mlir.dialects.arith``
    upstream, or jaxlib's).  ``like``: any type whose shape the values have (``f32``,
    ``vector<8xf32>``, ``tensor<4x4xbf16>``, ...).  Create under a context (and insertion point
    and location, or pass ``loc``/``ip``).
    """

    def __init__(self, ir: Any, arith: Any, like: Any, *, loc: Any = None, ip: Any = None):
        super().__init__(ir, loc=loc, ip=ip)
        self.arith = arith
        self.shape = None
        self.kind = None
        for cls in ("VectorType", "RankedTensorType"):
            try:
                st = getattr(ir, cls)(like)
            except ValueError:
                continue
            self.kind, self.shape = cls, list(st.shape)
            self.scalable = (list(st.scalable_dims) if cls == "VectorType"
                             and hasattr(st, "scalable_dims") else None)
            break

    def _shaped(self, elem):
        if self.kind is None:
            return elem
        if self.kind == "VectorType":
            if self.scalable and any(self.scalable):
                return self.ir.VectorType.get(self.shape, elem, scalable=self.scalable)
            return self.ir.VectorType.get(self.shape, elem)
        return self.ir.RankedTensorType.get(self.shape, elem)

    def constant(self, value: int, bits: int):
        key = (value & ((1 << bits) - 1), bits)
        if key not in self._consts:
            t = self._int(bits)
            et = self.ir.IntegerType.get_signless(bits)
            ia = self.ir.IntegerAttr.get(et, signed(value, bits))
            attr = ia if self.kind is None else self.ir.DenseElementsAttr.get_splat(t, ia)
            self._consts[key] = self.arith.ConstantOp(t, attr, **self._kw()).result
        return self._consts[key]

    def binary(self, op: str, lhs, rhs):
        a = self.arith
        cls = {"and": a.AndIOp, "or": a.OrIOp, "xor": a.XOrIOp, "add": a.AddIOp,
               "sub": a.SubIOp, "shl": a.ShLIOp, "shrui": a.ShRUIOp, "shrsi": a.ShRSIOp,
               "minsi": a.MinSIOp, "maxsi": a.MaxSIOp}[op]
        return cls(lhs, rhs, **self._kw()).result

    def compare(self, pred: str, lhs, rhs):
        attr = self.ir.IntegerAttr.get(self.ir.IntegerType.get_signless(64), _CMPI[pred])
        return self.arith.CmpIOp(attr, lhs, rhs, **self._kw()).result

    def select(self, cond, a, b):
        return self.arith.SelectOp(cond, a, b, **self._kw()).result

    def bitcast_to_int(self, x):
        w = self.ir.FloatType(self._elem(x.type)).width
        return self.arith.BitcastOp(self._int(w), x, **self._kw()).result

    def bitcast_to_float(self, x, wide: str):
        return self.arith.BitcastOp(self._shaped(self.ir.Type.parse(wide)), x,
                                    **self._kw()).result

    has_int_to_float = True

    def int_to_float(self, x, wide: str):
        f = self.arith.SIToFPOp(self._shaped(self.ir.Type.parse(wide)), x, **self._kw()).result
        return self.bitcast_to_int(f)

    def float_op(self, op: str, lhs, rhs, wide: str):
        cls = {"add": self.arith.AddFOp, "sub": self.arith.SubFOp}[op]
        r = cls(self.bitcast_to_float(lhs, wide), self.bitcast_to_float(rhs, wide),
                **self._kw()).result
        return self.bitcast_to_int(r)

    def resize(self, x, bits: int):
        w = self.width(x)
        if bits == w:
            return x
        op = self.arith.ExtUIOp if bits > w else self.arith.TruncIOp
        return op(self._int(bits), x, **self._kw()).result


# ============================================================================ test inputs


def probe_values(type_name: str, *, n_random: int = 1 << 16, seed: int = 0) -> np.ndarray:
    """Inputs that exercise a conversion from ``type_name`` exhaustively or near-exhaustively.

    * a narrow type: every code (ml_dtypes array);
    * bf16, f16: every bit pattern;
    * f32 (> 200k values): for each narrow type, every value, every midpoint between
      neighbours (and the overflow midpoint past max) and their f32 neighbours (+-1, +-2 ulp),
      with both signs; every power of two and 1.5 * 2^k (f8E8M0FNU ties) with neighbours;
      subnormals around 2^-127 and 2^-126; +-0, +-Inf, quiet and signalling NaNs of both signs
      with several payloads; ``n_random`` random bit patterns;
    * f64: the f32 set, plus every narrow midpoint nudged by 1 f64 ulp and by 2^-30 relative
      (a double rounding through f32 gets these wrong), f64 subnormals, and random values
      over the whole exponent range.
    """
    if type_name in FLOAT_TYPES:
        t = FLOAT_TYPES[type_name]
        return np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype)
    if type_name in ("bf16", "f16"):
        return np.arange(1 << 16, dtype=np.uint16).view(WIDE_FLOAT_TYPES[type_name].dtype)
    if type_name == "f64":
        return _f64_probes(n_random, seed)
    if type_name != "f32":
        raise KeyError(f"no probe set for '{type_name}'")
    f64: list[np.ndarray] = []
    for t in FLOAT_TYPES.values():
        v = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype).astype(np.float64)
        v = np.unique(np.abs(v[np.isfinite(v)]))
        ulp_top = v[-1] - v[-2]
        v = np.concatenate([v, [v[-1] + ulp_top, v[-1] + 2 * ulp_top]])
        mids = (v[:-1] + v[1:]) / 2  # exact in f64, and exact in f32 (<= 5 significand bits)
        f64 += [v, mids]
    k = np.arange(-149, 128)
    f64 += [np.ldexp(1.0, k), np.ldexp(1.5, k[1:]), np.ldexp(1.25, k[2:]),
            np.ldexp(1.75, k[2:])]
    with np.errstate(over="ignore"):  # e8m0's top midpoints overflow f32 to Inf: kept
        base = np.concatenate(f64).astype(np.float32)  # exact otherwise
    u = base.view(np.uint32).astype(np.int64)
    near = np.concatenate([u + d for d in (-2, -1, 0, 1, 2)])
    sub = np.concatenate([np.arange(1, 64), (1 << 22) + np.arange(-64, 65),
                          (1 << 23) - np.arange(1, 64), (3 << 21) + np.arange(-8, 9)])
    special = np.array([0, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0x7FA00000,
                        0x7F7FFFFF, 0x00800000, 0x007FFFFF])
    rng = np.random.default_rng(seed)
    rand = rng.integers(0, 1 << 31, n_random, dtype=np.int64)
    # random values inside the narrow types' ranges: |x| in [2^-12, 2^17)
    rand_small = rng.integers(0x39800000, 0x48000000, n_random, dtype=np.int64)
    mags = np.concatenate([near, sub, special, rand, rand_small])
    mags = mags[(mags >= 0) & (mags < (1 << 31))]
    bits_ = np.concatenate([mags, mags | (1 << 31)]).astype(np.uint32)
    return np.unique(bits_).view(np.float32)


def _f64_probes(n_random: int, seed: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        x32 = probe_values("f32", n_random=n_random, seed=seed).astype(np.float64)
    parts = [x32]
    for t in FLOAT_TYPES.values():
        v = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype).astype(np.float64)
        v = np.unique(np.abs(v[np.isfinite(v)]))
        m = (v[:-1] + v[1:]) / 2
        parts += [np.nextafter(m, 0), np.nextafter(m, np.inf), m * (1 + 2.0 ** -30),
                  m * (1 - 2.0 ** -30)]
    rng = np.random.default_rng(seed + 1)
    parts += [np.ldexp(rng.random(n_random), rng.integers(-1080, 1024, n_random)),
              np.ldexp(1.0, np.arange(-1074, 1024)),
              np.array([5e-324, 2.2250738585072014e-308, np.inf])]
    x = np.concatenate(parts)
    return np.unique(np.concatenate([x, -x]).view(np.uint64)).view(np.float64)
