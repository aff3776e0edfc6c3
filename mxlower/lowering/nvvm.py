"""NVVM planning and recipes: narrow-float ``arith.truncf``/``arith.extf`` -> NVVM ``cvt``
instructions with fix-ups, or the portable integer expansion of :mod:`mxlower.lowering.codec`
(``mxlower-lower-narrow-floats-to-nvvm`` matches the ops and reports; this is the rest).

How each conversion is lowered (chips and cvts: :mod:`mxlower.lowering.nvvm_model`;
S = sign of the input)
-----------------------------------------------------------------------------------------

==============================  ===========================  ==================================
conversion                      instruction (chip)           fix-up to docs/semantics.md section 2
==============================  ===========================  ==================================
f32/f16 -> f8E4M3FN             cvt.rn.satfinite.e4m3x2      abs(x) > 464 or NaN -> S|0x7F
                                .f32 / .f16x2 (sm_89+)       (cvt saturates to 448 instead)
f32/f16 -> f8E5M2               cvt.rn.satfinite.e5m2x2      abs(x) >= 61440 -> S|0x7C (Inf),
                                (sm_89+)                     NaN -> S|0x7E
f32 -> f4E2M1FN, f6E2M3FN,      cvt.rn.satfinite.e2m1x2 /    NaN -> 0x8 / 0x20 (the -0 code;
f6E3M2FN                        e2m3x2 / e3m2x2 (sm_100a+)   cvt's NaN result is unspecified)
f8E4M3FN, f8E5M2 -> f16         cvt.rn.f16x2.e4m3x2/e5m2x2   none (exact)
f4E2M1FN, f6* -> f16            cvt.rn.f16x2.e2m1x2/...      none (exact)
f8E8M0FNU -> bf16               cvt.rn.bf16x2.ue8m0x2        none (exact)
anything -> f8E8M0FNU           (none: cvt has only rz/rp,   integer expansion
(round to nearest)              MX wants ties-up)
f8E4M3, f8E3M4, FNUZ types      (none: PTX's e4m3 is         integer expansion
                                f8E4M3FN)
truncf toward_zero /            (none: the narrow cvts       integer expansion
to_nearest_away                 round to nearest)            (codec.emit_truncf)
stochastic cast (section 10.2)  (cvt.rs: 8 random bits per   integer expansion
                                value, see plan_stochastic)  (codec.emit_encode)
==============================  ===========================  ==================================

bf16 sources are widened to f32 first (exact); f32/bf16 results of the up-conversions are
widened from f16/bf16 (exact).  Without the instruction on the chip, or with ``hardware=false``,
every conversion is the codec's integer expansion (the same one the CPU lowering uses), and so
is every conversion of a narrow type the cvt table does not list (e.g. one added with
:func:`mxlower.types.register`).  The fix-up thresholds come from the types' descriptions
(the midpoint above max, the wide source's Inf code).

Quantize-friendly forms (docs/semantics.md section 3), lowered to a bare ``.satfinite`` cvt:

* ``arith.truncf`` of a clamp -- ``arith.minimumf``/``minnumf`` of ``arith.maximumf``/
  ``maxnumf`` (either nesting) with constant bounds inside [-max, max] of the destination, the
  shape ``mxlower-decompose-mx`` + ``stablehlo-legalize-to-linalg`` give the element conversion
  of quantize step 5.  Nothing can overflow, so the cvt is exact; only the f4/f6 NaN fix-up
  stays, and only for NaN-propagating clamps.
* ``arith.truncf %x {mxlower.satfinite}``: "round to nearest even, saturate to +-max" (Inf
  too); a NaN input gives an unspecified code.  No fix-ups at all.
* ``arith.truncf %q upward {mxlower.satfinite} : f32 to f8E8M0FNU`` (or ``toward_zero``):
  2^ceil(log2 q) (2^floor) clamped to [2^-127, 2^127], 0 -> 0x00, NaN -> 0xFF, q >= 0 -- the
  rceil (floor) scale selection -- becomes ``cvt.rp.satfinite.ue8m0x2`` (``.rz``).

Pairs: a cvt converts two values; element ``2k`` goes to the low half (operand ``b`` / low
lane), ``2k+1`` to the high half, matching mxlower's LSB-first order; an odd last element is
paired with itself; n-D vectors pair in row-major order.  The same recipe code runs on NumPy
with a model of each instruction (:class:`NumpyCvtBuilder`), which is how the fix-ups are
tested.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

import numpy as np

from mxlower import diagnostics as diag
from mxlower.bindings import upstream
from mxlower.ir.typeconv import element_type, with_element_type
import mxlower.lowering.codec as codec
import mxlower.lowering.int_builders as int_builders
import mxlower.lowering.nvvm_model as nvvm_model
from mxlower.lowering.narrow_floats import emit_conversion, rounding_of
from mxlower.types import (FLOAT_TYPES, WIDE_FLOAT_TYPES, dtype, float_type, is_narrow_float,
                           is_wide_float)

__all__ = [
    "ArithCvtBuilder",
    "NumpyCvtBuilder",
    "Plan",
    "SATFINITE_ATTR",
    "UnsupportedConversion",
    "conversion_types",
    "emit_extf",
    "emit_truncf",
    "lower_conversion",
    "pairs",
    "plan_conversion",
    "plan_extf",
    "plan_stochastic",
    "plan_truncf",
    "target_chip",
]

#: Unit attribute marking an ``arith.truncf`` as a saturating (satfinite) conversion.
SATFINITE_ATTR = "mxlower.satfinite"
#: The MX scale type, whose directed (upward / toward_zero) conversions select scales.
_SCALE = "f8E8M0FNU"


#: the codec's section 2 rounding modes as a Plan's ``rnd``
_CODEC_RND = {"even": "rn", "zero": "rz", "nearest": "rna"}


class UnsupportedConversion(ValueError):
    """A conversion this lowering does not define; the message says why."""


# ============================================================================ pairing


def pairs(n: int) -> list[tuple[int, int]]:
    """(low, high) element indices of each cvt: (0, 1), (2, 3), ...; an odd tail pairs with
    itself."""
    return [(i, i + 1 if i + 1 < n else i) for i in range(0, n, 2)]


# ============================================================================ planning


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one conversion is lowered."""

    path: str  #: "cvt" or "codec"
    detail: str  #: a human-readable description (used by remarks)
    cvt_src: str = ""  #: wide type fed to the cvt ("f32", "f16", "bf16")
    rnd: str = "rn"
    fixup: bool = True  #: cvt path: apply the section-2 fix-ups after the cvt
    saturate: bool = False  #: codec path: saturate to +-max instead of NaN/Inf (satfinite)


def _features(chip: str, hardware: bool) -> frozenset[str]:
    return nvvm_model.chip_features(chip) if hardware else frozenset()


def plan_truncf(src: str, dst: str, chip: str, *, hardware: bool = True,
                satfinite: bool = False, bounded: bool = False,
                rounding: str = "to_nearest_even") -> Plan:
    """Which lowering ``arith.truncf`` from ``src`` (f32/bf16/f16) to narrow ``dst`` gets.

    ``satfinite``: the op carries ``mxlower.satfinite``; ``bounded``: its operand is a clamp
    into [-max, max] (see the module docstring).  Raises :class:`UnsupportedConversion`."""
    if not is_wide_float(src):
        raise UnsupportedConversion(f"conversions from {src} to {dst} are not supported "
                                    "(sources: f64, f32, bf16, f16)")
    feats = _features(chip, hardware)
    if src == "f64":  # narrowing to f32 first would round twice: the codec, from f64
        if satfinite or rounding in ("upward", "downward"):
            raise UnsupportedConversion("saturating and directed conversions take f32, bf16 "
                                        "or f16 sources, not f64")
        feats = frozenset()
    cvt = nvvm_model.cvt_format(dst, feats)
    if rounding in ("toward_zero", "to_nearest_away") and not (dst == _SCALE and satfinite):
        # section 2 with the rounding mode: no cvt rounds so (except ue8m0's .rz, which
        # saturates: the satfinite form below), so the codec
        if satfinite:
            raise UnsupportedConversion(f"{SATFINITE_ATTR} with rounding mode '{rounding}' "
                                        f"is only defined for {_SCALE} (the scale selection)")
        mode = codec.TRUNCF_MODES[rounding]
        return Plan("codec", f"integer expansion (rounding {rounding}: no cvt rounds so)", "",
                    _CODEC_RND[mode])
    if dst == _SCALE:
        if rounding in ("upward", "toward_zero"):
            if not satfinite:
                raise UnsupportedConversion(
                    f"rounding mode '{rounding}' to {_SCALE} needs the {SATFINITE_ATTR} "
                    "attribute (the saturating scale selection of MX quantize)")
            rnd = "rp" if rounding == "upward" else "rz"
            if cvt is not None:
                via = "bf16" if src == "bf16" else "f32"
                return Plan("cvt", f"cvt.{rnd}.satfinite.{cvt.ptx}x2.{via}x2"
                            if via == "bf16" else f"cvt.{rnd}.satfinite.{cvt.ptx}x2.f32",
                            via, rnd, False)
            return Plan("codec", f"integer expansion ({chip} has no ue8m0x2 cvt)"
                        if hardware else "integer expansion", "", rnd, False, True)
        if rounding != "to_nearest_even":
            raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported for "
                                        f"conversions to {_SCALE} (supported: the default "
                                        "round-to-nearest, upward, toward_zero)")
        if satfinite:
            raise UnsupportedConversion(f"{SATFINITE_ATTR} on a conversion to {_SCALE} needs "
                                        "rounding mode upward or toward_zero")
        return Plan("codec", "integer expansion (cvt to ue8m0 rounds only toward zero or up)")
    if rounding != "to_nearest_even":
        raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported for "
                                    f"conversions to {dst} (supported: to_nearest_even, "
                                    "toward_zero, to_nearest_away)")
    if cvt is not None and cvt.rn_satfinite:
        via = "f16" if src == "f16" and cvt.f16x2_source else "f32"
        suffix = "f16x2" if via == "f16" else "f32"
        # a bounded operand cannot overflow; from a NaN-propagating clamp it may still be
        # NaN, which the cvt gets right only for types that have a NaN
        quiet = satfinite or (bounded and float_type(dst).has_nan)
        return Plan("cvt", f"cvt.rn.satfinite.{cvt.ptx}x2.{suffix}", via, "rn", not quiet)
    why = "" if not hardware else " (f64 source)" if src == "f64" else \
        f" ({chip} has no cvt to {dst})"
    return Plan("codec", "integer expansion" + why, "", "rn", False, satfinite)


def plan_stochastic(dst: str, chip: str, *, hardware: bool = True) -> Plan:
    """How docs/semantics.md section 10.2's stochastic cast to ``dst`` (a number spec's MLIR
    type or code) is lowered on ``chip``: always the codec,
    :func:`mxlower.lowering.codec.emit_encode` with ``roundmode="stochastic"``.

    ``cvt.rs.satfinite.<t>x4.f32`` (:func:`nvvm_model.has_rs_cvt` chips, types
    :data:`nvvm_model.RS_FORMATS`) converts four values with one 32-bit random operand, i.e.
    :data:`nvvm_model.RS_LANE_BITS` random bits per value (:func:`nvvm_model.cvt_rs_satfinite`).
    Section 10.2 rounds each value with all 32 bits of its own random operand, so the two agree
    only for random operands whose low 24 bits are zero -- which the IR cannot promise -- and
    differ on about one input in 2^8 otherwise (test/python/test_nvvm_model.py)."""
    rs = (hardware and dst in nvvm_model.RS_FORMATS and nvvm_model.has_rs_cvt(chip))
    why = ("cvt.rs draws 8 random bits per value; section 10.2 rounds with 32" if rs
           else "no stochastic cvt on this chip" if hardware else "hardware=false")
    return Plan("codec", f"integer expansion ({why})", "", "rs")


def plan_extf(src: str, dst: str, chip: str, *, hardware: bool = True) -> Plan:
    """Which lowering ``arith.extf`` from narrow ``src`` to ``dst`` (f32/bf16/f16) gets."""
    if not is_wide_float(dst):
        raise UnsupportedConversion(f"conversions from {src} to {dst} are not supported "
                                    "(destinations: f64, f32, bf16, f16)")
    cvt = nvvm_model.cvt_format(src, _features(chip, hardware))
    if cvt is not None:
        return Plan("cvt", f"cvt.rn.{cvt.half}x2.{cvt.ptx}x2", cvt.half)
    t = FLOAT_TYPES[src]
    if hardware and t.special == "none" and t.signed and t.exp_bits <= 7 and t.bits <= 8:
        return Plan("placed", f"code placed in f32 bits, times 2^{127 - t.bias}")
    why = "" if not hardware else f" ({chip} has no cvt from {src})"
    return Plan("codec", "integer expansion" + why)


# ============================================================================ recipes


def _sign(b: int_builders.IntBuilder, u: Any, dst: str) -> Any:
    """The sign bit of the integer bits ``u`` of a wide float, at ``dst``'s sign position in an
    8-bit value."""
    return b.resize(b.and_(b.shr(u, b.width(u) - float_type(dst).bits),
                           float_type(dst).sign_mask), 8)


def _overflows(b: int_builders.IntBuilder, mag: Any, src: str, dst: str) -> Any:
    """Whether the magnitude bits ``mag`` of ``src`` round past ``dst``'s max: above the
    midpoint, or at it when max's code is odd (the tie goes to even)."""
    d = float_type(dst)
    pred = "sgt" if d.max_code % 2 == 0 else "sge"
    return b.cmp(pred, mag, WIDE_FLOAT_TYPES[src].code_of(d.overflow_midpoint))


def _fixup_truncf(b: int_builders.IntBuilder, u: Any, src: str, dst: str, hw: Any) -> Any:
    """docs/semantics.md section 2 from a ``.satfinite`` cvt's codes ``hw`` (u: input bits), which
    saturate overflow and Inf to +-max."""
    w, d = WIDE_FLOAT_TYPES[src], float_type(dst)
    mag = b.and_(u, w.magnitude_mask)
    if d.overflow == "nan":  # f8E4M3FN: overflow, Inf and NaN (all above it) -> NaN, signed
        bad = _overflows(b, mag, src, dst)
        return b.sel(bad, b.or_(_sign(b, u, dst), d.nan_code), hw)
    if d.overflow == "inf":  # f8E5M2: overflow and Inf -> Inf; NaN -> NaN
        sgn = _sign(b, u, dst)
        out = b.sel(_overflows(b, mag, src, dst), b.or_(sgn, d.exponent_mask), hw)
        return b.sel(b.cmp("sgt", mag, w.exponent_mask), b.or_(sgn, d.nan_code), out)
    # saturating f4/f6: every NaN -> the -0 code (cvt saturates Inf like ml_dtypes does)
    return b.sel(b.cmp("sgt", mag, w.exponent_mask), d.nan_code, hw)


def _satfinite_codec(b: Any, x: Any, src: str, dst: str, codes: Any) -> Any:
    """Turn the section-2 codes ``codes`` of ``x`` (floats of ``src``) into satfinite ones:
    overflow -> +-max.  Compares in ``src`` where ``dst``'s midpoint above max is exact there
    (f32, f16), else in f32 (bf16 sources are widened, exactly)."""
    d = float_type(dst)
    if d.overflow == "saturate":
        return codes
    mid = d.overflow_midpoint
    if src == "bf16" or float(np.array(mid).astype(dtype(src))) != mid:
        x, src = b.fconv(x, src, "f32"), "f32"
    u = b.bitcast_to_int(x)
    mag = b.and_(u, WIDE_FLOAT_TYPES[src].magnitude_mask)
    return b.sel(_overflows(b, mag, src, dst), b.or_(_sign(b, u, dst), d.max_code), codes)


def _ue8m0_directed(b: int_builders.IntBuilder, u: Any, rnd: str) -> Any:
    """The integer form of ``cvt.{rz,rp}.satfinite.ue8m0x2.f32`` (u: f32 bits, value >= 0)."""
    w, d = WIDE_FLOAT_TYPES["f32"], float_type(_SCALE)
    mag = b.and_(u, w.magnitude_mask)
    e = b.shr(mag, w.man_bits)
    if rnd == "rp":
        m = b.and_(mag, (1 << w.man_bits) - 1)
        # normal: any mantissa bit rounds up; subnormal: above 2^-127 (m > 2^22) rounds up
        up = b.sel(b.cmp("eq", e, 0), b.cmp("sgt", m, 1 << (w.man_bits - 1)),
                   b.cmp("ne", m, 0))
        e = b.add(e, b.sel(up, b.constant(1, b.width(e)), 0))
    code = b.min(e, d.max_code)
    return b.resize(b.sel(b.cmp("sgt", mag, w.exponent_mask), d.nan_code, code), 8)


def emit_truncf(b: Any, x: Any, src: str, dst: str, plan: Plan) -> Any:
    """``x`` (floats of ``src``) -> 8-bit ``dst`` codes, by ``plan``; ``b`` is a
    :class:`NumpyCvtBuilder` or :class:`ArithCvtBuilder`."""
    if plan.path == "codec":
        if dst == _SCALE and plan.rnd in ("rp", "rz") and plan.saturate:
            x32 = b.fconv(x, src, "f32")
            return _ue8m0_directed(b, b.bitcast_to_int(x32), plan.rnd)
        if plan.rnd in ("rz", "rna"):
            mode = {"rz": "zero", "rna": "nearest"}[plan.rnd]
            return codec.emit_truncf(b, x, src, dst, roundmode=mode)
        codes = codec.emit_truncf(b, x, src, dst, code_bits=8)
        if plan.saturate:
            codes = _satfinite_codec(b, x, src, dst, codes)
        return codes
    xs = b.fconv(x, src, plan.cvt_src)
    hw = b.cvt_trunc(xs, plan.cvt_src, dst, plan.rnd)
    if not plan.fixup:
        return hw
    return _fixup_truncf(b, b.bitcast_to_int(xs), plan.cvt_src, dst, hw)


def emit_extf(b: Any, codes: Any, src: str, dst: str, plan: Plan) -> Any:
    """8-bit ``src`` codes -> floats of ``dst``, by ``plan``."""
    if plan.path == "codec":
        return codec.emit_extf(b, codes, src, dst)
    if plan.path == "placed":
        return _extf_placed(b, codes, src, dst)
    return b.fconv(b.cvt_ext(codes, src), plan.cvt_src, dst)


def _extf_placed(b: Any, codes: Any, src: str, dst: str) -> Any:
    """``src`` codes (a signed float type without Inf or NaN of at most 7 exponent bits,
    so that its fields place as a finite f32: f4E2M1FN, f6E2M3FN, f6E3M2FN) widened by
    placing them in f32 bits: the sign to f32's, the
    exponent and mantissa fields to f32's low ones, so that the f32 (a subnormal or a tiny
    normal) is the value times 2^(bias - 127) -- for normal and subnormal codes alike, both
    formats' subnormals continuing their normals' scale -- then one f32 product by
    2^(127 - bias), exact (the GPU's f32 product keeps subnormal operands: no ``.ftz``).
    Four integer ops and a product per value in 32-bit lanes, where the integer expansion
    takes about ten."""
    t = FLOAT_TYPES[src]
    top = t.bits - 1
    w = b.resize(codes, 32)
    x = b.or_(b.shl(b.and_(w, 1 << top), 31 - top),
              b.shl(b.and_(w, (1 << top) - 1), 23 - t.man_bits))
    k = b.constant(int(np.float32(2.0 ** (127 - t.bias)).view(np.uint32)), 32)
    return b.fconv(b.bitcast_to_float(b.float_op("mul", x, k, "f32"), "f32"), "f32", dst)


# ============================================================================ NumPy builder


class NumpyCvtBuilder(int_builders.NumpyBuilder):
    """The codec's NumPy builder plus the cvt primitives, computed by
    :mod:`mxlower.lowering.nvvm_model`
    on registers packed and unpacked exactly as :class:`ArithCvtBuilder` packs them.

    ``nan_code`` / ``nan_bits``: the results the model gives where the ISA leaves them open.
    Values are 1-D arrays (or 0-d for scalars)."""

    def __init__(self, *, nan_code: int | None = None, nan_bits: int = 0x7FFF):
        self.nan_code = nan_code
        self.nan_bits = nan_bits

    def fconv(self, x, src: str, dst: str):
        if src == dst:
            return x
        with np.errstate(over="ignore", invalid="ignore"):  # Inf/NaN in, Inf/NaN out
            return np.asarray(x).astype(np.float32).astype(dtype(dst))

    @staticmethod
    def _rows(x):
        """x as (rows, n): pairs are formed along the last axis, as the MLIR builder does."""
        x = np.asarray(x)
        return np.atleast_1d(x).reshape(-1, x.shape[-1] if x.ndim else 1)

    def cvt_trunc(self, x, src: str, dst: str, rnd: str):
        rows = self._rows(x)
        lo, hi = (np.array(i, np.intp) for i in zip(*pairs(rows.shape[1])))
        reg = nvvm_model.cvt_trunc_x2(rows[:, hi], rows[:, lo], src, dst, rnd=rnd,
                                      nan_code=self.nan_code).astype(np.uint32)
        width = nvvm_model.lane_bits(dst)
        mask = (1 << width) - 1
        out = np.zeros(rows.shape, np.uint8)
        out[:, hi] = (reg >> width) & mask  # the high half: operand a
        out[:, lo] = reg & mask  # the low half (written last: an odd tail has lo == hi)
        return out.reshape(np.shape(x))

    def cvt_ext(self, codes, src: str):
        rows = self._rows(codes).astype(np.uint32)
        lo, hi = (np.array(i, np.intp) for i in zip(*pairs(rows.shape[1])))
        width = nvvm_model.lane_bits(src)
        reg = rows[:, lo] | (rows[:, hi] << width)  # element lo in the low half
        d = nvvm_model.cvt_ext_x2(reg, src, nan_bits=self.nan_bits)
        out = np.zeros(rows.shape, np.uint16)
        out[:, hi] = d >> 16
        out[:, lo] = d & 0xFFFF
        return out.view(dtype(nvvm_model.CVT_FORMATS[src].half)).reshape(np.shape(codes))


# ============================================================================ MLIR builder


class _Lanes:
    """The elements of a 1-D vector (or a scalar), extracted on first use."""

    def __init__(self, b: ArithCvtBuilder, vec: Any, n: int | None):
        self.b, self.vec, self.n = b, vec, n  # n: None for a scalar
        self._cache: dict[int, Any] = {}

    def __getitem__(self, i: int) -> Any:
        if self.n is None:
            return self.vec
        if i not in self._cache:
            self._cache[i] = self.b.vector.ExtractOp(self.vec, [], [i], **self.b._kw()).result
        return self._cache[i]


class ArithCvtBuilder(int_builders.ArithBuilder):
    """The codec's arith builder (upstream stack) plus the cvt primitives as ``nvvm.convert.*``
    ops on pairs of elements, with ``vector`` ops to split and join vectors (an n-D vector is
    converted one innermost row at a time)."""

    def __init__(self, like: Any, *, loc: Any = None, ip: Any = None):
        super().__init__(upstream.module("ir"), upstream.module("dialects.arith"), like,
                         loc=loc, ip=ip)
        self.vector = upstream.module("dialects.vector")
        self.nvvm = upstream.module("dialects.nvvm")

    # -- helpers ---------------------------------------------------------------------------
    def _attr(self, text: str) -> Any:
        return self.ir.Attribute.parse(text)

    def _c8(self, v: int) -> Any:
        key = ("scalar-i8", v)
        if key not in self._consts:
            i8 = self.ir.IntegerType.get_signless(8)
            self._consts[key] = self.arith.ConstantOp(i8, self.ir.IntegerAttr.get(i8, v),
                                                      **self._kw()).result
        return self._consts[key]

    def _by_rows(self, v: Any, row_fn: Any, out_elem: Any) -> Any:
        """``row_fn(lanes)`` on a scalar or each innermost row of ``v``; results reassembled."""
        if self.kind is None:
            return row_fn(_Lanes(self, v, None))
        if len(self.shape) == 1:
            return row_fn(_Lanes(self, v, self.shape[0]))
        out_t = self.ir.VectorType.get(self.shape, out_elem)
        acc = self.arith.ConstantOp(out_t, self.ir.DenseElementsAttr.get_splat(
            out_t, _zero_attr(self.ir, out_elem)), **self._kw()).result
        for idx in itertools.product(*(range(d) for d in self.shape[:-1])):
            row = self.vector.ExtractOp(v, [], list(idx), **self._kw()).result
            res = row_fn(_Lanes(self, row, self.shape[-1]))
            acc = self.vector.InsertOp(res, acc, [], list(idx), **self._kw()).result
        return acc

    def _assemble(self, lanes: _Lanes, results: list[tuple[int, int, Any]], elem: Any) -> Any:
        """Join the 2-lane results of one row -- (lo, hi, vector<2xT> or (lane0, lane1)) --
        into the row's result."""
        def lane(r: Any, k: int) -> Any:
            if isinstance(r, tuple):
                return r[k]
            return self.vector.ExtractOp(r, [], [k], **self._kw()).result

        if lanes.n is None:
            return lane(results[0][2], 0)
        if lanes.n == 2 and not isinstance(results[0][2], tuple):
            return results[0][2]
        out: list[Any] = [None] * lanes.n
        for lo, hi, r in results:
            out[lo] = lane(r, 0)
            if hi != lo:
                out[hi] = lane(r, 1)
        t = self.ir.VectorType.get([lanes.n], elem)
        return self.vector.FromElementsOp(t, out, **self._kw()).result

    def _pair_vec(self, lanes: _Lanes, lo: int, hi: int) -> Any:
        """A vector<2xT> holding elements lo (lane 0) and hi (lane 1)."""
        if lanes.n == 2:
            return lanes.vec
        if lanes.n is not None and hi == lo + 1:
            return self.vector.ShuffleOp(lanes.vec, lanes.vec, [lo, hi], **self._kw()).result
        t = self.ir.VectorType.get([2], lanes[lo].type)
        return self.vector.FromElementsOp(t, [lanes[lo], lanes[hi]], **self._kw()).result

    # -- wide float conversions -----------------------------------------------------------------
    def fconv(self, x: Any, src: str, dst: str) -> Any:
        if src == dst:
            return x
        a = self.arith
        t = lambda n: self._shaped(self.ir.Type.parse(n))  # noqa: E731
        if dst in ("f32", "f64"):  # exact widening (16-bit sources only reach here)
            return a.ExtFOp(t(dst), x, **self._kw()).result
        if src != "f32":
            x = a.ExtFOp(t("f32"), x, **self._kw()).result
        return a.TruncFOp(t(dst), x, **self._kw()).result

    # -- cvt primitives ---------------------------------------------------------------------
    def cvt_trunc(self, x: Any, src: str, dst: str, rnd: str) -> Any:
        """``x`` (f32, or f16/bf16 fed as x2 registers) -> i8 codes, one cvt per pair."""
        nv, ir = self.nvvm, self.ir
        i8 = ir.IntegerType.get_signless(8)
        v2i8 = ir.VectorType.get([2], i8)
        dst_attr = ir.TypeAttr.get(ir.Type.parse(dst))
        rnd_attr = self._attr(f"#nvvm.fp_rnd_mode<{rnd}>")
        sat = self._attr("#nvvm.sat_mode<satfinite>")
        kw = self._kw()

        def row(lanes: _Lanes) -> Any:
            results = []
            for lo, hi in pairs(lanes.n or 1):
                if src == "f32" and nvvm_model.lane_bits(dst) == 4:  # .b8 result: a in 7..4
                    r = nv.ConvertF32x2ToF4x2Op(i8, lanes[hi], lanes[lo], dst_attr, **kw).result
                    lo_code = self.arith.AndIOp(r, self._c8(0xF), **kw).result
                    hi_code = (self.arith.ShRUIOp(r, self._c8(4), **kw).result
                               if hi != lo else None)
                    r = (lo_code, hi_code)
                elif src == "f32" and FLOAT_TYPES[dst].is_subbyte:
                    r = nv.ConvertF32x2ToF6x2Op(v2i8, lanes[hi], lanes[lo], dst_attr, **kw).result
                elif src == "f32":
                    r = nv.ConvertF32x2ToF8x2Op(v2i8, lanes[hi], lanes[lo], dst_attr,
                                                rnd=rnd_attr, sat=sat, **kw).result
                elif src == "f16":
                    r = nv.ConvertF16x2ToF8x2Op(v2i8, self._pair_vec(lanes, lo, hi), dst_attr,
                                                **kw).result
                else:
                    r = nv.ConvertBF16x2ToF8x2Op(v2i8, self._pair_vec(lanes, lo, hi), dst_attr,
                                                 rnd=rnd_attr, sat=sat, **kw).result
                results.append((lo, hi, r))  # vector<2xi8>: lane 0 = the low byte = element lo
            return self._assemble(lanes, results, i8)

        return self._by_rows(x, row, i8)

    def cvt_ext(self, codes: Any, src: str) -> Any:
        """i8 ``src`` codes -> f16 (bf16 for f8E8M0FNU), one cvt per pair."""
        nv, ir = self.nvvm, self.ir
        half = nvvm_model.CVT_FORMATS[src].half
        wide = ir.Type.parse(half)
        v2 = ir.VectorType.get([2], wide)
        src_attr = ir.TypeAttr.get(ir.Type.parse(src))
        kw = self._kw()

        def row(lanes: _Lanes) -> Any:
            results = []
            for lo, hi in pairs(lanes.n or 1):
                if nvvm_model.lane_bits(src) == 4:  # .b8 source: element lo in bits 3..0
                    hi4 = self.arith.ShLIOp(lanes[hi], self._c8(4), **kw).result
                    reg = self.arith.OrIOp(lanes[lo], hi4, **kw).result
                    r = nv.ConvertF4x2ToF16x2Op(v2, reg, src_attr, **kw).result
                else:
                    reg = self._pair_vec(lanes, lo, hi)
                    cls = (nv.ConvertF6x2ToF16x2Op if FLOAT_TYPES[src].is_subbyte else
                           nv.ConvertF8x2ToBF16x2Op if half == "bf16" else
                           nv.ConvertF8x2ToF16x2Op)
                    r = cls(v2, reg, src_attr, **kw).result
                results.append((lo, hi, r))
            return self._assemble(lanes, results, wide)

        return self._by_rows(codes, row, wide)


# ============================================================================ matching ops


def target_chip(o: Any, pass_name: str) -> str:
    """The chip of the ``gpu.module`` enclosing ``o`` (its ``#nvvm.target``); a located error
    when there is none, several, or an unknown one."""
    p = o.parent
    while p is not None:
        if p.name == "gpu.module" and "targets" in p.attributes:
            chips = sorted(set(re.findall(r'#nvvm\.target<[^>]*chip\s*=\s*"([^"]+)"',
                                          str(p.attributes["targets"]))))
            if len(chips) > 1:
                raise diag.error(o, f"the enclosing gpu.module targets several chips "
                                 f"({', '.join(chips)}); pass chip= to '{pass_name}'")
            if chips:
                if chips[0] not in nvvm_model.CHIPS:
                    raise diag.error(o, f"unknown chip '{chips[0]}' in the enclosing "
                                     "gpu.module's #nvvm.target")
                return chips[0]
        p = p.parent
    raise diag.error(o, "no target chip: pass chip=sm_XX to "
                     f"'{pass_name}' or put the op in a gpu.module with an #nvvm.target")


def conversion_types(o: Any) -> tuple[str, str] | None:
    """(source, result) element type names of an ``arith.truncf``/``extf`` when one of them is
    a narrow float, else None."""
    ir = upstream.module("ir")
    se = str(element_type(ir, o.operands[0].type))
    de = str(element_type(ir, o.results[0].type))
    return (se, de) if is_narrow_float(se) or is_narrow_float(de) else None


def plan_conversion(o: Any, chip: str, hardware: bool, pass_name: str) -> Plan:
    """The :class:`Plan` of a narrow ``arith.truncf``/``extf`` ``o`` for ``chip`` (empty: the
    enclosing gpu.module's, see :func:`target_chip`); a located error for conversions this
    lowering does not define."""
    ir = upstream.module("ir")
    src_t = o.operands[0].type
    se, de = conversion_types(o)
    if (isinstance(src_t, (ir.RankedTensorType, ir.UnrankedTensorType))
            or (isinstance(src_t, ir.VectorType) and any(src_t.scalable_dims))):
        raise diag.error(o, f"'{o.name}' on {src_t}: this lowering handles scalars and "
                         "fixed-size vectors (lower tensors to loops or vectors first)")
    chip = chip or target_chip(o, pass_name)
    rounding = rounding_of(o)
    try:
        if is_narrow_float(se) and is_narrow_float(de):
            if rounding not in codec.TRUNCF_MODES:
                raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported "
                                            "(supported: to_nearest_even, toward_zero, "
                                            "to_nearest_away)")
            return Plan("codec", "integer expansion (narrow to narrow)", "",
                        _CODEC_RND[codec.TRUNCF_MODES[rounding]])
        if o.name == "arith.extf":
            return plan_extf(se, de, chip, hardware=hardware)
        return plan_truncf(se, de, chip, hardware=hardware,
                           satfinite=SATFINITE_ATTR in o.attributes,
                           bounded=_clamped_within(o.operands[0], FLOAT_TYPES[de]),
                           rounding=rounding)
    except UnsupportedConversion as e:
        raise diag.error(o, f"'{o.name}' from {se} to {de}: {e}") from None


def lower_conversion(o: Any, plan: Plan) -> None:
    """Replace the narrow ``arith.truncf``/``extf`` ``o`` by its lowering under ``plan``."""
    ir, arith = upstream.module("ir"), upstream.module("dialects.arith")
    se, de = conversion_types(o)
    dst_t = o.results[0].type
    with o.location, ir.InsertionPoint(o):
        b = ArithCvtBuilder(o.operands[0].type)
        x = o.operands[0]
        if is_narrow_float(se):
            int_t = ir.IntegerType.get_signless(FLOAT_TYPES[se].bits)
            ints = arith.BitcastOp(with_element_type(ir, x.type, int_t), x).result
            codes = b.resize(ints, 8)
        if is_narrow_float(se) and is_narrow_float(de):
            mode = {"rn": "even", "rz": "zero", "rna": "nearest"}[plan.rnd]
            out = emit_conversion(b, codes, se, de, code_bits=FLOAT_TYPES[de].bits,
                                  roundmode=mode)
            new = arith.BitcastOp(dst_t, out).result
        elif is_narrow_float(se):
            new = emit_extf(b, codes, se, de, plan)
        else:
            codes = emit_truncf(b, x, se, de, plan)
            new = arith.BitcastOp(dst_t, b.resize(codes, FLOAT_TYPES[de].bits)).result
    o.results[0].replace_all_uses_with(new)
    o.erase()


def _zero_attr(ir: Any, elem: Any) -> Any:
    try:
        return ir.IntegerAttr.get(ir.IntegerType(elem), 0)
    except ValueError:
        return ir.FloatAttr.get(elem, 0.0)


_CLAMP_MIN = ("arith.minimumf", "arith.minnumf")
_CLAMP_MAX = ("arith.maximumf", "arith.maxnumf")


def _cast(ir: Any, cls: str, t: Any) -> Any:
    try:
        return getattr(ir, cls)(t)
    except ValueError:
        return None


def _const_float(v: Any) -> float | None:
    """The value of a scalar or splat float constant, else None."""
    ir = upstream.module("ir")
    owner = v.owner
    if not isinstance(owner, ir.OpView) and not hasattr(owner, "name"):
        return None
    op = owner.operation if hasattr(owner, "operation") else owner
    if op.name not in ("arith.constant", "llvm.mlir.constant"):
        return None
    attr = op.attributes["value"]
    f = _cast(ir, "FloatAttr", attr)
    if f is not None:
        return f.value
    d = _cast(ir, "DenseFPElementsAttr", attr)
    if d is not None and d.is_splat:
        return ir.FloatAttr(d.get_splat_value()).value
    return None


def _clamped_within(v: Any, t: Any) -> bool:
    """Whether ``v`` = min(max(x, lo), hi) or max(min(x, hi), lo) with constants
    -max <= lo <= hi <= max of ``t`` (so converting it to ``t`` cannot overflow)."""
    def op_of(val: Any) -> Any:
        owner = val.owner
        return getattr(owner, "operation", None) if hasattr(owner, "operation") else None

    outer = op_of(v)
    if outer is None or outer.name not in _CLAMP_MIN + _CLAMP_MAX:
        return False
    want_inner = _CLAMP_MAX if outer.name in _CLAMP_MIN else _CLAMP_MIN
    bounds: dict[str, float] = {}

    def split(o: Any) -> Any:
        a, b = o.operands[0], o.operands[1]
        ca, cb = _const_float(a), _const_float(b)
        if cb is not None:
            return a, cb
        if ca is not None:
            return b, ca
        return None, None

    inner_v, c1 = split(outer)
    if inner_v is None:
        return False
    inner = op_of(inner_v)
    if inner is None or inner.name not in want_inner:
        return False
    _, c2 = split(inner)
    if c2 is None:
        return False
    for name, c in ((outer.name, c1), (inner.name, c2)):
        bounds["hi" if name in _CLAMP_MIN else "lo"] = c
    lo, hi = bounds["lo"], bounds["hi"]
    return -t.max <= lo <= hi <= t.max
