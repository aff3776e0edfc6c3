"""NVIDIA GPU chips and the PTX ``cvt`` instructions mxlower's NVVM lowering emits: which chip
has which instruction, and a NumPy model of what each computes.

The models follow the PTX ISA's documented semantics (``cvt``, PTX ISA 8.6-9.0, section
"Data Movement and Conversion Instructions: cvt"); where the ISA leaves a result open (the
NaN code a ``.satfinite`` conversion produces, which f16/bf16 NaN an up-conversion produces)
the model takes it as a parameter, so that tests can check that mxlower's fix-ups make the
final result independent of it.  These models are what the lowering's fix-ups are proven
against without a GPU (test/python/test_nvvm_model.py); the ``gpu``-marked tests check the
models themselves against real hardware.

Instructions and chips (what xtc's ``llc`` 22 selects and CUDA 13's ``ptxas`` assembles):

==========================================  ==========================  ==================
instruction                                 nvvm op                     chips
==========================================  ==========================  ==================
cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32        convert.f32x2.to.f8x2       sm_89+ ("f8")
cvt.rn.satfinite.{e4m3x2,e5m2x2}.f16x2      convert.f16x2.to.f8x2       sm_89+
cvt.rn.f16x2.{e4m3x2,e5m2x2}                convert.f8x2.to.f16x2       sm_89+
cvt.rn.satfinite.e2m1x2.f32                 convert.f32x2.to.f4x2       sm_100a family
cvt.rn.satfinite.{e2m3x2,e3m2x2}.f32        convert.f32x2.to.f6x2       sm_100a family
cvt.rn.f16x2.{e2m1x2,e2m3x2,e3m2x2}         convert.f{4,6}x2.to.f16x2   sm_100a family
cvt.{rz,rp}.satfinite.ue8m0x2.{f32,bf16x2}  convert.{f32x2,bf16x2}...   sm_100a family
cvt.rn.bf16x2.ue8m0x2                       convert.f8x2.to.bf16x2      sm_100a family
==========================================  ==========================  ==================

"sm_100a family" ("narrow"): the architecture-specific (``a``) and family (``f``) targets of
sm_100 and later -- sm_100a/f, sm_101a/f, sm_103a/f, sm_110a/f, sm_120a/f, sm_121a/f -- but
not the plain sm_100 / sm_120 targets.

Register layouts (PTX ISA): a two-input ``cvt`` puts the conversion of its *first* operand
``a`` in the *high* half of the destination and ``b`` in the low half; an ``.f16x2`` /
``.bf16x2`` / ``x2`` source holds its first lane in the low half.  mxlower's element order is
LSB-first (docs/semantics.md section 8), so element ``2k`` is always passed as ``b`` / the low lane.
"""

from __future__ import annotations

import dataclasses
import re

import ml_dtypes
import numpy as np

from mxlower.types import FLOAT_TYPES, FloatType, dtype

__all__ = [
    "CHIPS",
    "CVT_FORMATS",
    "CvtFormat",
    "PTX_CHIPS",
    "RS_FORMATS",
    "RS_LANE_BITS",
    "chip_features",
    "cvt_ext_x2",
    "cvt_rn_satfinite",
    "cvt_rs_satfinite",
    "cvt_trunc_x2",
    "cvt_ue8m0",
    "cvt_format",
    "decode_to_half",
    "has_f8_cvt",
    "has_narrow_cvt",
    "has_rs_cvt",
    "lane_bits",
    "parse_chip",
]

#: Every chip the pass accepts (the NVPTX targets of xtc's llc 22 from sm_50 on).
CHIPS: tuple[str, ...] = (
    "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80",
    "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_100f", "sm_101", "sm_101a", "sm_101f", "sm_103", "sm_103a",
    "sm_103f", "sm_110", "sm_110a", "sm_110f", "sm_120", "sm_120a", "sm_120f", "sm_121",
    "sm_121a", "sm_121f",
)

#: The chips the tests assemble for with CUDA 13's ptxas (sm_101* was renamed sm_110*): the
#: architecture-specific targets, one family target and one plain sm_100+ target.
PTX_CHIPS: tuple[str, ...] = ("sm_89", "sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_110a",
                              "sm_120", "sm_120a", "sm_121a")

_CHIP_RE = re.compile(r"^sm_(\d+)([af]?)$")


@dataclasses.dataclass(frozen=True)
class CvtFormat:
    """A narrow type some ``cvt`` converts to or from, as PTX names it."""

    mlir: str  #: MLIR spelling, e.g. "f8E4M3FN"
    ptx: str  #: PTX element name, e.g. "e4m3" (instructions name pairs: "e4m3x2")
    feature: str  #: the chip feature with its cvts: "f8" or "narrow" (see chip_features)
    half: str  #: the x2 type ``cvt.rn`` decodes it to: "f16" or "bf16"
    #: whether ``cvt.rn.satfinite`` encodes it (ue8m0 has only ``.rz``/``.rp``)
    rn_satfinite: bool = True
    #: whether that cvt also takes an ``.f16x2`` source (else only ``.f32``)
    f16x2_source: bool = False


#: The narrow types with cvt instructions, by MLIR spelling; any other narrow type (one
#: registered with :func:`mxlower.types.register`, say) has none and gets the codec.
CVT_FORMATS: dict[str, CvtFormat] = {c.mlir: c for c in (
    CvtFormat("f8E4M3FN", "e4m3", "f8", "f16", f16x2_source=True),
    CvtFormat("f8E5M2", "e5m2", "f8", "f16", f16x2_source=True),
    CvtFormat("f4E2M1FN", "e2m1", "narrow", "f16"),
    CvtFormat("f6E2M3FN", "e2m3", "narrow", "f16"),
    CvtFormat("f6E3M2FN", "e3m2", "narrow", "f16"),
    CvtFormat("f8E8M0FNU", "ue8m0", "narrow", "bf16", rn_satfinite=False),
)}


def cvt_format(name: str, chip_feats: frozenset[str] | None = None) -> CvtFormat | None:
    """The cvt description of a narrow type, or None when it has no cvt (or, given a chip's
    :func:`chip_features`, none on that chip)."""
    c = CVT_FORMATS.get(name)
    if c is None or (chip_feats is not None and c.feature not in chip_feats):
        return None
    return c


def parse_chip(chip: str) -> tuple[int, str]:
    """(compute capability * 10, suffix) of ``sm_100a`` -> (100, "a"); ValueError otherwise."""
    m = _CHIP_RE.match(chip)
    if m is None or chip not in CHIPS:
        raise ValueError(f"unknown chip '{chip}' (expected one of {', '.join(CHIPS)})")
    return int(m.group(1)), m.group(2)


def has_f8_cvt(chip: str) -> bool:
    """e4m3x2/e5m2x2 conversions to and from f32 / f16x2 (sm_89 and later)."""
    sm, _ = parse_chip(chip)
    return sm >= 89


def has_narrow_cvt(chip: str) -> bool:
    """e2m1x2, e2m3x2, e3m2x2 and ue8m0x2 conversions (the sm_100a family)."""
    sm, suffix = parse_chip(chip)
    return sm >= 100 and suffix in ("a", "f")


def chip_features(chip: str) -> frozenset[str]:
    """{"f8", "narrow"} subset the chip has."""
    out = set()
    if has_f8_cvt(chip):
        out.add("f8")
    if has_narrow_cvt(chip):
        out.add("narrow")
    return frozenset(out)


# ----------------------------------------------------------------------------- element models


def _as_f32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float16, np.dtype(ml_dtypes.bfloat16)):
        raise TypeError(f"cvt sources are f32, f16 or bf16, got {x.dtype}")
    with np.errstate(invalid="ignore"):  # NaN payloads widen quietly
        return x.astype(np.float32)  # exact


def cvt_rn_satfinite(x: np.ndarray, dst: str | FloatType, *, nan_code: int | None = None
                     ) -> np.ndarray:
    """One lane of ``cvt.rn.satfinite.<dst>x2.{f32,f16x2}``: round to nearest even; a value
    whose magnitude exceeds MAX_NORM (Inf included) gives the sign-preserved MAX_NORM; NaN
    gives a NaN of the destination (e4m3/e5m2; ``nan_code``, default 0x7F) -- for the NaN-free
    e2m1/e2m3/e3m2 the ISA does not say, so ``nan_code`` defaults to +MAX_NORM there.
    Returns the codes as uint8 (f4/f6 codes in the low bits)."""
    t = FLOAT_TYPES[dst] if isinstance(dst, str) else dst
    c = CVT_FORMATS.get(t.mlir)
    if c is None or not c.rn_satfinite:
        raise ValueError(f"no cvt.rn.satfinite to {t.mlir}")
    xf = _as_f32(x)
    with np.errstate(invalid="ignore"):
        clipped = np.clip(xf, -t.max, t.max)  # exact: max is representable; NaN stays NaN
        codes = clipped.astype(t.dtype).view(np.uint8) & np.uint8((1 << t.bits) - 1)
    if nan_code is None:
        nan_code = 0x7F if t.has_nan else t.magnitude_mask
    nan_code &= (1 << t.bits) - 1  # a lane holds its type's bits, nothing of its neighbour's
    return np.where(np.isnan(xf), np.uint8(nan_code), codes).astype(np.uint8)


def decode_to_half(codes: np.ndarray, src: str | FloatType, *, nan_bits: int = 0x7FFF
                   ) -> np.ndarray:
    """One lane of ``cvt.rn.f16x2.<src>x2`` (exact: every e4m3/e5m2/e2m1/e2m3/e3m2 value is an
    f16) or, for f8E8M0FNU, of ``cvt.rn.bf16x2.ue8m0x2`` (exact: 2^-127 .. 2^127 are bf16
    values).  NaN codes give the NaN ``nan_bits``.  Returns f16 (bf16 for f8E8M0FNU)."""
    t = FLOAT_TYPES[src] if isinstance(src, str) else src
    c = np.asarray(codes).astype(np.uint8) & np.uint8((1 << t.bits) - 1)
    f = c.view(t.dtype).astype(np.float32)  # ml_dtypes keeps 4/6-bit codes in a byte's low bits
    if t.mlir not in CVT_FORMATS:
        raise ValueError(f"no cvt decodes {t.mlir}")
    wide = dtype(CVT_FORMATS[t.mlir].half)
    out = f.astype(wide)
    return np.where(np.isnan(f), np.array(nan_bits, np.uint16).view(wide), out)


def cvt_ue8m0(x: np.ndarray, rnd: str) -> np.ndarray:
    """One lane of ``cvt.{rz,rp}.satfinite.ue8m0x2.{f32,bf16x2}`` for inputs >= 0 and NaN:
    2^floor(log2 x) (rz) or 2^ceil(log2 x) (rp) as a biased exponent clamped to [0, 254]
    (.satfinite: +Inf and values beyond 2^127 give 0xFE), 0 -> 0x00, NaN -> 0xFF.  Negative
    inputs are outside what mxlower emits these for; the model raises on them."""
    if rnd not in ("rz", "rp"):
        raise ValueError(f"ue8m0 rounding must be rz or rp, got {rnd}")
    with np.errstate(invalid="ignore"):  # NaN payloads widen quietly
        xf = _as_f32(x).astype(np.float64)
    if np.any(xf < 0):
        raise ValueError("cvt ue8m0 model: negative inputs are not modelled")
    with np.errstate(divide="ignore", invalid="ignore"):
        m, e = np.frexp(xf)  # x = m * 2^e, m in [0.5, 1)
        lg_floor = e - 1
        exact = m == 0.5
        lg = lg_floor if rnd == "rz" else np.where(exact, lg_floor, lg_floor + 1)
    lg = np.where(np.isfinite(xf) & (xf > 0), lg, 0)
    code = np.clip(lg + 127, 0, 254)
    code = np.where(xf == 0, 0, code)
    code = np.where(np.isinf(xf), 254, code)
    code = np.where(np.isnan(xf), 255, code)
    return code.astype(np.uint8)


# ----------------------------------------------------------------------------- x2 instructions


def lane_bits(name: str) -> int:
    """The bits one lane of an x2 register of narrow type ``name`` takes: 4 for e2m1x2
    (a .b8 register), else 8 (e2m3/e3m2 lanes have their two MSBs zero)."""
    return 4 if FLOAT_TYPES[name].bits == 4 else 8


def _bits16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(np.uint16).astype(np.uint32)


def cvt_trunc_x2(a: np.ndarray, b: np.ndarray, src: str, dst: str, *, rnd: str = "rn",
                 nan_code: int | None = None) -> np.ndarray:
    """The destination register of a two-lane narrowing ``cvt``, as PTX defines it.

    ``src`` "f32": ``cvt ... d, a, b`` with f32 registers ``a``, ``b``.
    ``src`` "f16" / "bf16": ``cvt ... d, r`` where ``r`` is the packed x2 register whose low
    half is lane ``b`` and high half lane ``a`` (so ``a``/``b`` keep their meaning).
    Result: uint16 (uint8 for e2m1x2, whose destination is .b8) with conv(a) in the high half
    (bits 15..8, or 7..4 for e2m1x2; e2m3/e3m2 lanes have their two MSBs zero).
    """
    if src == "f32":
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    else:
        dt = dtype(src)
        reg = (_bits16(np.asarray(a, dt)) << 16) | _bits16(np.asarray(b, dt))
        a = (reg >> 16).astype(np.uint16).view(dt)  # unpack the register as the ISA reads it
        b = (reg & 0xFFFF).astype(np.uint16).view(dt)
    if dst == "f8E8M0FNU":
        hi, lo = cvt_ue8m0(a, rnd), cvt_ue8m0(b, rnd)
    else:
        if rnd != "rn" or (src == "bf16"):
            raise ValueError(f"no cvt.{rnd} from {src} to {dst}")
        hi = cvt_rn_satfinite(a, dst, nan_code=nan_code)
        lo = cvt_rn_satfinite(b, dst, nan_code=nan_code)
    if lane_bits(dst) == 4:
        return ((hi.astype(np.uint8) << 4) | lo).astype(np.uint8)
    return ((hi.astype(np.uint16) << 8) | lo).astype(np.uint16)


def cvt_ext_x2(reg: np.ndarray, src: str, *, nan_bits: int = 0x7FFF) -> np.ndarray:
    """The destination register of ``cvt.rn.f16x2.<src>x2 d, r`` (``cvt.rn.bf16x2.ue8m0x2`` for
    f8E8M0FNU): ``r`` is .b16 (.b8 for e2m1x2); lane k of ``r`` (its low half for k = 0)
    converts into lane k of ``d``.  Returns uint32 (high half: lane 1)."""
    t = FLOAT_TYPES[src]
    reg = np.asarray(reg).astype(np.uint32)
    width = lane_bits(src)
    lo = reg & ((1 << width) - 1)
    hi = (reg >> width) & ((1 << width) - 1)
    dlo = decode_to_half(lo, t, nan_bits=nan_bits)
    dhi = decode_to_half(hi, t, nan_bits=nan_bits)
    return (_bits16(dhi) << 16) | _bits16(dlo)


# ----------------------------------------------------------------------------- stochastic (x4)

#: The narrow types ``cvt.rs.satfinite.<t>x4.f32`` converts to (stochastic rounding).
RS_FORMATS: tuple[str, ...] = ("f8E4M3FN", "f8E5M2", "f6E2M3FN", "f6E3M2FN", "f4E2M1FN")
#: Random bits one lane of ``cvt.rs ... x4`` consumes: its 32-bit ``rbits`` operand serves four
#: conversions.
RS_LANE_BITS = 8


def has_rs_cvt(chip: str) -> bool:
    """``cvt.rs.satfinite.{e4m3,e5m2,e2m3,e3m2,e2m1}x4.f32`` (stochastic rounding): sm_100a and
    sm_103a only -- CUDA 13's ptxas rejects ``.rs`` on the family (``f``) targets, sm_110a and
    the sm_12x chips (test/python/test_nvvm_ptx.py checks both sides)."""
    sm, suffix = parse_chip(chip)
    return sm in (100, 103) and suffix == "a"


def cvt_rs_satfinite(x: np.ndarray, dst: str, rand: np.ndarray, *,
                     nan_code: int | None = None) -> np.ndarray:
    """One lane of ``cvt.rs.satfinite.<dst>x4.f32``: stochastic rounding with the lane's
    ``RS_LANE_BITS`` random bits ``rand`` (0..255), which are added to the top of the
    discarded field before it is truncated, i.e. the magnitude becomes q * floor(t + rand /
    2^8) (q: the spacing of ``dst`` at |x|, t = |x| / q); then .satfinite: beyond max
    (Inf included) gives +-max; the sign is kept (a zero result keeps it too); NaN gives
    ``nan_code`` (default as :func:`cvt_rn_satfinite`).  Returns uint8 codes."""
    if dst not in RS_FORMATS:
        raise ValueError(f"no cvt.rs to {dst}")
    t = FLOAT_TYPES[dst]
    xf = _as_f32(x).astype(np.float64)
    r = np.asarray(rand, np.int64)
    if r.size and (r.min() < 0 or r.max() >= 1 << RS_LANE_BITS):
        raise ValueError(f"a cvt.rs lane takes {RS_LANE_BITS} random bits")
    a = np.where(np.isfinite(xf), np.abs(xf), 0.0)
    emin = 1 - t.bias
    _, fe = np.frexp(np.where(a > 0, a, 1.0))  # floor(log2 a) + 1, exactly
    e = np.maximum(fe - 1, emin)
    q = np.ldexp(1.0, (e - t.man_bits).astype(np.int32))
    mag = np.floor(a / q + r / float(1 << RS_LANE_BITS)) * q  # exact in f64
    mag = np.where(np.isinf(xf), t.max, np.minimum(mag, t.max))
    with np.errstate(invalid="ignore"):
        codes = np.where(np.signbit(xf), -mag, mag).astype(np.float32).astype(t.dtype)
    codes = codes.view(np.uint8) & np.uint8((1 << t.bits) - 1)
    if nan_code is None:
        nan_code = 0x7F if t.has_nan else t.magnitude_mask
    nan_code &= (1 << t.bits) - 1
    return np.where(np.isnan(xf), np.uint8(nan_code), codes).astype(np.uint8)
