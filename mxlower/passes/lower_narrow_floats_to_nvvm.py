"""``mxlower-lower-narrow-floats-to-nvvm``: narrow-float ``arith.truncf``/``arith.extf`` -> NVVM
``cvt`` instructions with fix-ups, or the portable integer expansion of :mod:`mxlower.codec`.

How each conversion is lowered (chips: :mod:`mxlower.nvvm_model`; S = sign of the input)
-----------------------------------------------------------------------------------------

==============================  ===========================  ==================================
conversion                      instruction (chip)           fix-up to MX-SEMANTICS section 2
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
==============================  ===========================  ==================================

bf16 sources are widened to f32 first (exact); f32/bf16 results of the up-conversions are
widened from f16/bf16 (exact).  Without the instruction on the chip, or with ``hardware=false``,
every conversion is the codec's integer expansion (the same one the CPU lowering uses).

Quantize-friendly forms (MX-SEMANTICS section 3), lowered to a bare ``.satfinite`` cvt:

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
paired with itself; n-D vectors pair in row-major order.  The same recipe code runs on NumPy with a model
of each instruction (:class:`NumpyCvtBuilder`), which is how the fix-ups are tested.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import codec
from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower import nvvm_model
from mxlower.formats import FLOAT_TYPES, FloatType
from mxlower.passes.base import ModulePass, option

__all__ = [
    "ArithCvtBuilder",
    "LowerNarrowFloatsToNVVM",
    "NumpyCvtBuilder",
    "SATFINITE_ATTR",
    "UnsupportedConversion",
    "emit_extf",
    "emit_truncf",
    "pairs",
    "plan_extf",
    "plan_truncf",
]

#: Unit attribute marking an ``arith.truncf`` as a saturating (satfinite) conversion.
SATFINITE_ATTR = "mxlower.satfinite"

_WIDE = ("f32", "bf16", "f16", "f64")
_F8 = ("f8E4M3FN", "f8E5M2")
_SUBBYTE = ("f4E2M1FN", "f6E2M3FN", "f6E3M2FN")
_MAG = {32: 0x7FFFFFFF, 16: 0x7FFF}
_INF_BITS = {"f32": 0x7F800000, "f16": 0x7C00, "bf16": 0x7F80}
#: bits of the smallest magnitude that must become NaN (e4m3: just above the midpoint 464) or
#: Inf (e5m2: the midpoint 61440, which ties to the even Inf), per wide source type
_E4M3_NAN_ABOVE = {"f32": 0x43E80000, "f16": 0x5F40}  # 464.0
_E5M2_INF_FROM = {"f32": 0x47700000, "f16": 0x7B80}  # 61440.0


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


def plan_truncf(src: str, dst: str, chip: str, *, hardware: bool = True,
                satfinite: bool = False, bounded: bool = False,
                rounding: str = "to_nearest_even") -> Plan:
    """Which lowering ``arith.truncf`` from ``src`` (f32/bf16/f16) to narrow ``dst`` gets.

    ``satfinite``: the op carries ``mxlower.satfinite``; ``bounded``: its operand is a clamp
    into [-max, max] (see the module docstring).  Raises :class:`UnsupportedConversion`."""
    if src not in _WIDE:
        raise UnsupportedConversion(f"conversions from {src} to {dst} are not supported "
                                    "(sources: f64, f32, bf16, f16)")
    feats = nvvm_model.chip_features(chip) if hardware else frozenset()
    if src == "f64":  # narrowing to f32 first would round twice: the codec, from f64
        if satfinite or rounding != "to_nearest_even":
            raise UnsupportedConversion("saturating and directed conversions take f32, bf16 "
                                        "or f16 sources, not f64")
        feats = frozenset()
    if dst == "f8E8M0FNU":
        if rounding in ("upward", "toward_zero"):
            if not satfinite:
                raise UnsupportedConversion(
                    f"rounding mode '{rounding}' to f8E8M0FNU needs the {SATFINITE_ATTR} "
                    "attribute (the saturating scale selection of MX quantize)")
            rnd = "rp" if rounding == "upward" else "rz"
            if "narrow" in feats:
                via = "bf16" if src == "bf16" else "f32"
                return Plan("cvt", f"cvt.{rnd}.satfinite.ue8m0x2.{via}x2"
                            if via == "bf16" else f"cvt.{rnd}.satfinite.ue8m0x2.f32",
                            via, rnd, False)
            return Plan("codec", f"integer expansion ({chip} has no ue8m0x2 cvt)"
                        if hardware else "integer expansion", "", rnd, False, True)
        if rounding != "to_nearest_even":
            raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported for "
                                        "conversions to f8E8M0FNU (supported: the default "
                                        "round-to-nearest, upward, toward_zero)")
        if satfinite:
            raise UnsupportedConversion(f"{SATFINITE_ATTR} on a conversion to f8E8M0FNU needs "
                                        "rounding mode upward or toward_zero")
        return Plan("codec", "integer expansion (cvt to ue8m0 rounds only toward zero or up)")
    if rounding != "to_nearest_even":
        raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported for "
                                    f"conversions to {dst} (only round-to-nearest-even)")
    quiet = satfinite or bounded
    if dst in _F8 and "f8" in feats:
        via = "f16" if src == "f16" else "f32"
        short = "e4m3x2" if dst == "f8E4M3FN" else "e5m2x2"
        suffix = "f16x2" if via == "f16" else "f32"
        return Plan("cvt", f"cvt.rn.satfinite.{short}.{suffix}", via, "rn", not quiet)
    if dst in _SUBBYTE and "narrow" in feats:
        short = {"f4E2M1FN": "e2m1x2", "f6E2M3FN": "e2m3x2", "f6E3M2FN": "e3m2x2"}[dst]
        # a bounded operand from a NaN-propagating clamp may still be NaN: keep that fix-up
        return Plan("cvt", f"cvt.rn.satfinite.{short}.f32", "f32", "rn", not satfinite)
    why = "" if not hardware else " (f64 source)" if src == "f64" else \
        f" ({chip} has no cvt to {dst})"
    return Plan("codec", "integer expansion" + why, "", "rn", False, satfinite)


def plan_extf(src: str, dst: str, chip: str, *, hardware: bool = True) -> Plan:
    """Which lowering ``arith.extf`` from narrow ``src`` to ``dst`` (f32/bf16/f16) gets."""
    if dst not in _WIDE:
        raise UnsupportedConversion(f"conversions from {src} to {dst} are not supported "
                                    "(destinations: f64, f32, bf16, f16)")
    feats = nvvm_model.chip_features(chip) if hardware else frozenset()
    if src in _F8 and "f8" in feats:
        short = "e4m3x2" if src == "f8E4M3FN" else "e5m2x2"
        return Plan("cvt", f"cvt.rn.f16x2.{short}", "f16")
    if src in _SUBBYTE and "narrow" in feats:
        short = {"f4E2M1FN": "e2m1x2", "f6E2M3FN": "e2m3x2", "f6E3M2FN": "e3m2x2"}[src]
        return Plan("cvt", f"cvt.rn.f16x2.{short}", "f16")
    if src == "f8E8M0FNU" and "narrow" in feats:
        return Plan("cvt", "cvt.rn.bf16x2.ue8m0x2", "bf16")
    why = "" if not hardware else f" ({chip} has no cvt from {src})"
    return Plan("codec", "integer expansion" + why)


# ============================================================================ recipes


def _sign8(b: codec.IntBuilder, u: Any) -> Any:
    """The sign bit of the integer bits ``u`` of a wide float, as 0x80 / 0 in an 8-bit value."""
    w = b.width(u)
    return b.resize(b.and_(b.shr(u, w - 8), 0x80), 8)


def _fixup_truncf(b: codec.IntBuilder, u: Any, src: str, dst: str, hw: Any) -> Any:
    """MX-SEMANTICS section 2 from a ``.satfinite`` cvt's codes ``hw`` (u: input bits)."""
    mag = b.and_(u, _MAG[b.width(u)])
    if dst == "f8E4M3FN":  # overflow past the 464 midpoint, Inf and NaN -> NaN with the sign
        bad = b.cmp("sgt", mag, _E4M3_NAN_ABOVE[src])
        return b.sel(bad, b.or_(_sign8(b, u), 0x7F), hw)
    if dst == "f8E5M2":  # overflow from the 61440 midpoint and Inf -> Inf; NaN -> NaN
        sgn = _sign8(b, u)
        out = b.sel(b.cmp("sge", mag, _E5M2_INF_FROM[src]), b.or_(sgn, 0x7C), hw)
        return b.sel(b.cmp("sgt", mag, _INF_BITS[src]), b.or_(sgn, 0x7E), out)
    # f4/f6: every NaN -> the -0 code (cvt saturates Inf like ml_dtypes does)
    return b.sel(b.cmp("sgt", mag, _INF_BITS[src]), FLOAT_TYPES[dst].nan_code, hw)


def _satfinite_codec(b: codec.IntBuilder, u: Any, src: str, dst: str, codes: Any) -> Any:
    """Turn the section-2 codes ``codes`` into satfinite ones: overflow -> +-max."""
    mag = b.and_(u, _MAG[b.width(u)])
    if dst == "f8E4M3FN":
        return b.sel(b.cmp("sgt", mag, _E4M3_NAN_ABOVE[src]), b.or_(_sign8(b, u), 0x7E), codes)
    if dst == "f8E5M2":
        return b.sel(b.cmp("sge", mag, _E5M2_INF_FROM[src]), b.or_(_sign8(b, u), 0x7B), codes)
    return codes  # f4/f6 saturate already


def _ue8m0_directed(b: codec.IntBuilder, u: Any, rnd: str) -> Any:
    """The integer form of ``cvt.{rz,rp}.satfinite.ue8m0x2.f32`` (u: f32 bits, value >= 0)."""
    mag = b.and_(u, 0x7FFFFFFF)
    e = b.shr(mag, 23)
    if rnd == "rp":
        m = b.and_(mag, 0x7FFFFF)
        # normal: any mantissa bit rounds up; subnormal: above 2^-127 (m > 2^22) rounds up
        up = b.sel(b.cmp("eq", e, 0), b.cmp("sgt", m, 0x400000), b.cmp("ne", m, 0))
        e = b.add(e, b.sel(up, b.constant(1, b.width(e)), 0))
    code = b.min(e, 254)
    return b.resize(b.sel(b.cmp("sgt", mag, 0x7F800000), 255, code), 8)


def emit_truncf(b: Any, x: Any, src: str, dst: str, plan: Plan) -> Any:
    """``x`` (floats of ``src``) -> 8-bit ``dst`` codes, by ``plan``; ``b`` is a
    :class:`NumpyCvtBuilder` or :class:`ArithCvtBuilder`."""
    if plan.path == "codec":
        if dst == "f8E8M0FNU" and plan.rnd in ("rp", "rz"):
            x32 = b.fconv(x, src, "f32")
            return _ue8m0_directed(b, b.bitcast_to_int(x32), plan.rnd)
        codes = codec.emit_truncf(b, x, src, dst, code_bits=8)
        if plan.saturate and dst in _F8:
            x2, s2 = (b.fconv(x, src, "f32"), "f32") if src == "bf16" else (x, src)
            codes = _satfinite_codec(b, b.bitcast_to_int(x2), s2, dst, codes)
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
    return b.fconv(b.cvt_ext(codes, src), plan.cvt_src, dst)


# ============================================================================ NumPy builder


class NumpyCvtBuilder(codec.NumpyBuilder):
    """The codec's NumPy builder plus the cvt primitives, computed by :mod:`mxlower.nvvm_model`
    on registers packed and unpacked exactly as :class:`ArithCvtBuilder` packs them.

    ``nan_code`` / ``nan_bits``: the results the model gives where the ISA leaves them open.
    Values are 1-D arrays (or 0-d for scalars)."""

    def __init__(self, *, nan_code: int | None = None, nan_bits: int = 0x7FFF):
        self.nan_code = nan_code
        self.nan_bits = nan_bits

    def fconv(self, x, src: str, dst: str):
        if src == dst:
            return x
        import ml_dtypes
        import numpy as np

        dt = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
              "f64": np.float64}
        with np.errstate(over="ignore", invalid="ignore"):  # Inf/NaN in, Inf/NaN out
            return np.asarray(x).astype(np.float32).astype(dt[dst])

    @staticmethod
    def _rows(x):
        """x as (rows, n): pairs are formed along the last axis, as the MLIR builder does."""
        import numpy as np

        x = np.asarray(x)
        return np.atleast_1d(x).reshape(-1, x.shape[-1] if x.ndim else 1)

    def cvt_trunc(self, x, src: str, dst: str, rnd: str):
        import numpy as np

        rows = self._rows(x)
        lo, hi = (np.array(i, np.intp) for i in zip(*pairs(rows.shape[1])))
        reg = nvvm_model.cvt_trunc_x2(rows[:, hi], rows[:, lo], src, dst, rnd=rnd,
                                      nan_code=self.nan_code).astype(np.uint32)
        width = 4 if dst == "f4E2M1FN" else 8
        mask = (1 << width) - 1
        out = np.zeros(rows.shape, np.uint8)
        out[:, hi] = (reg >> width) & mask  # the high half: operand a
        out[:, lo] = reg & mask  # the low half (written last: an odd tail has lo == hi)
        return out.reshape(np.shape(x))

    def cvt_ext(self, codes, src: str):
        import ml_dtypes
        import numpy as np

        rows = self._rows(codes).astype(np.uint32)
        lo, hi = (np.array(i, np.intp) for i in zip(*pairs(rows.shape[1])))
        width = 4 if src == "f4E2M1FN" else 8
        reg = rows[:, lo] | (rows[:, hi] << width)  # element lo in the low half
        d = nvvm_model.cvt_ext_x2(reg, src, nan_bits=self.nan_bits)
        out = np.zeros(rows.shape, np.uint16)
        out[:, hi] = d >> 16
        out[:, lo] = d & 0xFFFF
        wide = ml_dtypes.bfloat16 if src == "f8E8M0FNU" else np.float16
        return out.view(wide).reshape(np.shape(codes))


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


class ArithCvtBuilder(codec.ArithBuilder):
    """The codec's arith builder (upstream stack) plus the cvt primitives as ``nvvm.convert.*``
    ops on pairs of elements, with ``vector`` ops to split and join vectors (an n-D vector is
    converted one innermost row at a time)."""

    def __init__(self, like: Any, *, loc: Any = None, ip: Any = None):
        from mxlower.bindings import upstream

        ir = upstream.module("ir")
        super().__init__(ir, upstream.module("dialects.arith"), like, loc=loc, ip=ip)
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
        import itertools

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
                if src == "f32" and dst == "f4E2M1FN":  # .b8 result: a in bits 7..4
                    r = nv.ConvertF32x2ToF4x2Op(i8, lanes[hi], lanes[lo], dst_attr, **kw).result
                    lo_code = self.arith.AndIOp(r, self._c8(0xF), **kw).result
                    hi_code = (self.arith.ShRUIOp(r, self._c8(4), **kw).result
                               if hi != lo else None)
                    r = (lo_code, hi_code)
                elif src == "f32" and dst in _SUBBYTE:
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
        wide = ir.Type.parse("bf16" if src == "f8E8M0FNU" else "f16")
        v2 = ir.VectorType.get([2], wide)
        src_attr = ir.TypeAttr.get(ir.Type.parse(src))
        kw = self._kw()

        def row(lanes: _Lanes) -> Any:
            results = []
            for lo, hi in pairs(lanes.n or 1):
                if src == "f4E2M1FN":  # .b8 source: element lo in bits 3..0
                    hi4 = self.arith.ShLIOp(lanes[hi], self._c8(4), **kw).result
                    reg = self.arith.OrIOp(lanes[lo], hi4, **kw).result
                    r = nv.ConvertF4x2ToF16x2Op(v2, reg, src_attr, **kw).result
                else:
                    reg = self._pair_vec(lanes, lo, hi)
                    cls = (nv.ConvertF6x2ToF16x2Op if src in _SUBBYTE else
                           nv.ConvertF8x2ToBF16x2Op if src == "f8E8M0FNU" else
                           nv.ConvertF8x2ToF16x2Op)
                    r = cls(v2, reg, src_attr, **kw).result
                results.append((lo, hi, r))
            return self._assemble(lanes, results, wide)

        return self._by_rows(codes, row, wide)


def _zero_attr(ir: Any, elem: Any) -> Any:
    try:
        return ir.IntegerAttr.get(ir.IntegerType(elem), 0)
    except ValueError:
        return ir.FloatAttr.get(elem, 0.0)


# ============================================================================ the pass


@dataclasses.dataclass(frozen=True)
class LowerNarrowFloatsToNVVM(ModulePass):
    """Lower narrow-float arith.truncf/extf to NVVM cvt instructions (with fix-ups) or integer ops.

    Every ``arith.truncf`` to and ``arith.extf`` from f8E4M3FN, f8E5M2, f8E8M0FNU, f6E2M3FN,
    f6E3M2FN and f4E2M1FN on scalars or vectors, in ``gpu.func``, ``func.func`` or
    ``llvm.func`` bodies, becomes ``nvvm.convert.*`` ops where the chip has an instruction whose
    result equals MX-SEMANTICS section 2 after a cheap fix-up, and the codec's integer
    expansion otherwise; the result is bit-exact with mxlower's reference either way.  The
    chip comes from ``chip=`` or, when that is empty, from the enclosing ``gpu.module``'s
    ``#nvvm.target``.  Saturating quantize conversions (a clamped operand, or
    ``{mxlower.satfinite}``) get the bare ``.satfinite`` cvt; ``upward``/``toward_zero``
    scale conversions to f8E8M0FNU get ``cvt.rp``/``cvt.rz``.  See
    mxlower/passes/lower_narrow_floats_to_nvvm.py for the table of instructions and fix-ups.

    Before::

        %y = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3FN>

    After (chip=sm_90a)::

        %0 = vector.extract %x[1] : f32 from vector<2xf32>
        %1 = vector.extract %x[0] : f32 from vector<2xf32>
        %2 = nvvm.convert.f32x2.to.f8x2 %0, %1 {rnd = #nvvm.fp_rnd_mode<rn>,
               sat = #nvvm.sat_mode<satfinite>} : vector<2xi8> (f8E4M3FN)
        %3 = arith.bitcast %x : vector<2xf32> to vector<2xi32>
        %4 = arith.andi %3, %cst : vector<2xi32>                  // |x|
        %5 = arith.cmpi sgt, %4, %cst_0 : vector<2xi32>           // > 464 (or NaN)
        ...
        %9 = arith.select %5, %8, %2 : vector<2xi1>, vector<2xi8>  // -> NaN with x's sign
        %y = arith.bitcast %9 : vector<2xi8> to vector<2xf8E4M3FN>

    Example::

        mxlower-opt k.mlir --mxlower-lower-narrow-floats-to-nvvm='chip=sm_100a'
    """

    name: ClassVar[str] = "mxlower-lower-narrow-floats-to-nvvm"
    stack: ClassVar[str] = "upstream"
    chip: str = option("", "target chip, e.g. sm_100a (empty: each gpu.module's #nvvm.target)",
                       choices=("",) + nvvm_model.CHIPS)
    hardware: bool = option(True, "use cvt instructions where the chip has them (false: the "
                            "integer expansion everywhere)")
    report: bool = option(False, "emit a remark at each conversion naming how it was lowered")
    narrow_storage: bool = option(False, "then store every remaining narrow float (memrefs, "
                                  "vectors, gpu.func signatures) as one i8 code per element, "
                                  "the layout of ml_dtypes arrays")

    def run(self, op: Any) -> None:
        ops = collect_ops(op, lambda o: o.name in ("arith.truncf", "arith.extf"))
        failures = []
        for o in ops:
            try:
                self._lower(o)
            except diag.PassFailure as f:
                failures.append(f)
        if failures:
            raise failures[0]
        if self.narrow_storage:
            _storage_to_i8(op)

    def _chip_for(self, o: Any) -> str:
        if self.chip:
            return self.chip
        import re

        p = o.parent
        while p is not None:
            if p.name == "gpu.module" and "targets" in p.attributes:
                chips = sorted(set(re.findall(r'#nvvm\.target<[^>]*chip\s*=\s*"([^"]+)"',
                                              str(p.attributes["targets"]))))
                if len(chips) > 1:
                    raise diag.error(o, f"the enclosing gpu.module targets several chips "
                                     f"({', '.join(chips)}); pass chip= to '{self.name}'")
                if chips:
                    if chips[0] not in nvvm_model.CHIPS:
                        raise diag.error(o, f"unknown chip '{chips[0]}' in the enclosing "
                                         "gpu.module's #nvvm.target")
                    return chips[0]
            p = p.parent
        raise diag.error(o, "no target chip: pass chip=sm_XX to "
                         f"'{self.name}' or put the op in a gpu.module with an #nvvm.target")

    def _lower(self, o: Any) -> None:
        from mxlower.bindings import upstream

        ir = upstream.module("ir")
        arith = upstream.module("dialects.arith")
        extf = o.name == "arith.extf"
        src_t, dst_t = o.operands[0].type, o.results[0].type
        se, de = _elem_name(ir, src_t), _elem_name(ir, dst_t)
        narrow_src, narrow_dst = se in FLOAT_TYPES, de in FLOAT_TYPES
        if not (narrow_src or narrow_dst):
            return
        if _is_tensor(ir, src_t) or _is_scalable(ir, src_t):
            raise diag.error(o, f"'{o.name}' on {src_t}: this lowering handles scalars and "
                             "fixed-size vectors (lower tensors to loops or vectors first)")
        chip = self._chip_for(o)
        rounding = _rounding_of(o)
        try:
            if narrow_src and narrow_dst:
                plan = Plan("codec", "integer expansion (narrow to narrow)")
                if rounding != "to_nearest_even":
                    raise UnsupportedConversion(f"rounding mode '{rounding}' is not supported")
            elif extf:
                plan = plan_extf(se, de, chip, hardware=self.hardware)
            else:
                plan = plan_truncf(se, de, chip, hardware=self.hardware,
                                   satfinite=SATFINITE_ATTR in o.attributes,
                                   bounded=_clamped_within(o.operands[0], FLOAT_TYPES[de]),
                                   rounding=rounding)
        except UnsupportedConversion as e:
            raise diag.error(o, f"'{o.name}' from {se} to {de}: {e}") from None
        with o.location, ir.InsertionPoint(o):
            b = ArithCvtBuilder(src_t)
            x = o.operands[0]
            if narrow_src:
                s = FLOAT_TYPES[se]
                ints = arith.BitcastOp(b._shaped(ir.IntegerType.get_signless(s.bits)), x).result
                codes = b.resize(ints, 8)
            if narrow_src and narrow_dst:
                out = codec.emit_convert_codes(b, codes, se, de, code_bits=FLOAT_TYPES[de].bits)
                new = arith.BitcastOp(dst_t, out).result
            elif narrow_src:
                new = emit_extf(b, codes, se, de, plan)
            else:
                codes = emit_truncf(b, x, se, de, plan)
                bits = FLOAT_TYPES[de].bits
                ints = b.resize(codes, bits)
                new = arith.BitcastOp(dst_t, ints).result
        if self.report:
            diag.remark(o, f"{se} -> {de}: {plan.detail}"
                        + (" + fix-up" if plan.path == "cvt" and plan.fixup and not extf else ""))
        o.results[0].replace_all_uses_with(new)
        o.erase()


def _storage_to_i8(root: Any) -> None:
    """Narrow-float storage -> i8 codes, by mxlower-lower-narrow-floats-to-llvm's rewrite (which
    leaves the nvvm.convert ops this pass created and names such as ``to_f4E2M1FN`` alone)."""
    from mxlower.bindings import upstream
    from mxlower.passes.lower_narrow_floats_to_llvm import NarrowFloatLowering

    NarrowFloatLowering(upstream.module("ir"), upstream.module("dialects.arith"), root).run()


def _elem_name(ir: Any, t: Any) -> str:
    for cls in ("VectorType", "RankedTensorType", "UnrankedTensorType"):
        try:
            t = getattr(ir, cls)(t).element_type
            break
        except ValueError:
            continue
    return str(t)


def _cast(ir: Any, cls: str, t: Any) -> Any:
    try:
        return getattr(ir, cls)(t)
    except ValueError:
        return None


def _is_tensor(ir: Any, t: Any) -> bool:
    return _cast(ir, "RankedTensorType", t) is not None or \
        _cast(ir, "UnrankedTensorType", t) is not None


def _is_scalable(ir: Any, t: Any) -> bool:
    v = _cast(ir, "VectorType", t)
    return v is not None and any(v.scalable_dims)


def _rounding_of(o: Any) -> str:
    if "roundingmode" not in o.attributes:
        return "to_nearest_even"
    text = str(o.attributes["roundingmode"])  # "2 : i32" (arith's RoundingMode enum)
    names = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")
    head = text.split(":")[0].strip()
    if head.isdigit() and int(head) < len(names):
        return names[int(head)]
    for name in names:
        if name in text:
            return name
    return text


_CLAMP_MIN = ("arith.minimumf", "arith.minnumf")
_CLAMP_MAX = ("arith.maximumf", "arith.maxnumf")


def _const_float(v: Any) -> float | None:
    """The value of a scalar or splat float constant, else None."""
    from mxlower.bindings import upstream

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


def _clamped_within(v: Any, t: FloatType) -> bool:
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
