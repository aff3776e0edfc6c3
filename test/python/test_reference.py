"""Tests of mxlower.reference, the NumPy oracle of docs/semantics.md sections 2-6 and 8.

The oracle is checked against independent machinery written here: an exact
round-to-nearest-even table oracle derived from the FloatType codec descriptions (not from
ml_dtypes), a per-block scalar re-implementation of sections 3 and 4, a Python-int bit stream
for packing, and hand-derived vectors for every rule.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mxlower import reference as R
from mxlower.formats import FLOAT_TYPES, FORMATS, SCALE_MODES, get_format

F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
NARROW = [n for n in FLOAT_TYPES if n != "f8E8M0FNU"]
MX_FORMATS = [n for n, f in FORMATS.items() if not f.is_nvfp4]
MX_FLOAT_FORMATS = [n for n in MX_FORMATS if not FORMATS[n].is_int]
ALL_FORMATS = list(FORMATS)
F32_MAX = float(np.finfo(F32).max)

PROP = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ============================================================== independent exact oracles


@dataclasses.dataclass(frozen=True)
class Codec:
    """Enough of a float type to round to it exactly (mirrors formats.FloatType)."""

    bits: int
    exp_bits: int
    man_bits: int
    bias: int
    special: str  # ieee | fn | none
    overflow: str  # inf | nan | saturate


def codec(name: str) -> Codec:
    if name == "f16":
        return Codec(16, 5, 10, 15, "ieee", "inf")
    if name == "bf16":
        return Codec(16, 8, 7, 127, "ieee", "inf")
    t = FLOAT_TYPES[name]
    return Codec(t.bits, t.exp_bits, t.man_bits, t.bias, t.special, t.overflow)


def mag_value(c: Codec, code: int) -> float:
    """The value of a magnitude code by the codec formula (ignoring specials)."""
    e, m = code >> c.man_bits, code & ((1 << c.man_bits) - 1)
    if e == 0:
        return math.ldexp(m, 1 - c.bias - c.man_bits)
    return math.ldexp((1 << c.man_bits) + m, e - c.bias - c.man_bits)


def is_special(c: Codec, code: int) -> bool:
    if c.special == "fnuz":  # the sign bit alone is the one NaN
        return code == 1 << (c.bits - 1)
    mag = code & ((1 << (c.bits - 1)) - 1)
    if c.special == "ieee":
        return mag >> c.man_bits == (1 << c.exp_bits) - 1
    if c.special == "fn":
        return mag == (1 << (c.bits - 1)) - 1
    return False


_TABLES: dict[Codec, tuple[np.ndarray, np.ndarray]] = {}


def table(c: Codec) -> tuple[np.ndarray, np.ndarray]:
    """(sorted finite magnitudes + the 'next' value past max, their codes)."""
    if c not in _TABLES:
        n = 1 << (c.bits - 1)
        codes = [k for k in range(n) if not is_special(c, k)]
        nxt = codes[-1] + 1  # first special code, or 1 << (bits - 1) for types without specials
        codes.append(nxt)
        _TABLES[c] = (np.array([mag_value(c, k) for k in codes]), np.array(codes, np.int64))
    return _TABLES[c]


def rne_codes(v, name: str) -> np.ndarray:
    """Exact RNE (ties to even code) of float64 values (no NaN) to type ``name``, with the
    type's overflow rule.  Independent of ml_dtypes."""
    c = codec(name)
    vals, codes = table(c)
    v = np.asarray(v, np.float64)
    assert not np.isnan(v).any()
    a = np.abs(v)
    i = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 2)
    lo, hi = vals[i], vals[i + 1]
    mid = lo + (hi - lo) / 2
    up = (a > mid) | ((a == mid) & (codes[i] % 2 == 1))
    res = codes[np.where(up, i + 1, i)]
    over = (a >= vals[-1]) | (res == codes[-1])
    mag_mask = (1 << (c.bits - 1)) - 1
    if c.special == "fnuz":  # the one NaN 0x80 on overflow, and no -0
        res = np.where(over, codes[-1], res)
        return np.where((res == 0) | over, res, res | (np.signbit(v).astype(np.int64) << 7))
    if c.overflow == "nan":
        ov = mag_mask
    elif c.overflow == "inf":
        ov = ((1 << c.exp_bits) - 1) << c.man_bits
    else:
        ov = codes[-2]
    res = np.where(over, ov, res)
    return res | (np.signbit(v).astype(np.int64) << (c.bits - 1))


def e8m0_codes(v) -> np.ndarray:
    """The f32 -> f8E8M0FNU rule as docs/semantics.md section 2 states it for normal inputs, plus the
    observed ml_dtypes rule for f32 subnormals (documented in mxlower/reference.py)."""
    v = np.asarray(v, np.float64)
    out = np.full(v.shape, 0xFF, np.int64)
    pos = np.isfinite(v) & (v > 0)
    m, e = np.frexp(np.where(pos, v, 1.0))
    E = (e - 1) + (m >= 0.75)  # significand 2m in [1, 2); >= 1.5 rounds up
    normal = pos & (v >= 2.0 ** -126)
    out = np.where(normal & (E <= 127), E + 127, out)
    sub = pos & (v < 2.0 ** -126)
    out = np.where(sub, np.where(v <= 2.0 ** -127, 0, 1), out)
    return out


def codes_of(a) -> np.ndarray:
    return R.bits(a).astype(np.int64)


def f32s(*vals) -> np.ndarray:
    return np.array(vals, dtype=F32)


def nextup(v):
    return np.nextafter(F32(v), F32(np.inf))


def nextdown(v):
    return np.nextafter(F32(v), F32(0))


# ============================================================== section 2: convert


def _f32_candidates(name: str) -> np.ndarray:
    """Every finite value of ``name``, every midpoint (incl. the one past max), and their f32
    neighbours, both signs; plus Inf and huge values."""
    vals, _ = table(codec(name))
    mids = (vals[1:] + vals[:-1]) / 2
    with np.errstate(over="ignore"):  # bf16's 'next past max' is 2^128
        base = np.concatenate([vals, mids]).astype(F32)
    c = np.concatenate([base, np.nextafter(base, F32(np.inf)), np.nextafter(base, F32(0))])
    c = np.concatenate([c, f32s(1e20, F32_MAX, np.inf, 1e-30, 1e-45)])
    return np.concatenate([c, -c])


@pytest.mark.parametrize("name", NARROW)
def test_convert_f32_is_exact_rne(name):
    c = _f32_candidates(name)
    rng = np.random.default_rng(1)
    rnd = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    c = np.concatenate([c, rnd[~np.isnan(rnd)]])
    got = codes_of(R.convert(c, name))
    exp = rne_codes(c.astype(np.float64), name)
    bad = got != exp
    assert not bad.any(), (c[bad][:5], got[bad][:5], exp[bad][:5])


@pytest.mark.parametrize("src", [BF16, F16])
@pytest.mark.parametrize("name", NARROW)
def test_convert_wide16_exhaustive(name, src):
    x = np.arange(1 << 16, dtype=np.uint16).view(src)
    x = x[~np.isnan(x.astype(F32))]
    got = codes_of(R.convert(x, name))
    exp = rne_codes(x.astype(np.float64), name)
    assert (got == exp).all()


@pytest.mark.parametrize("name", NARROW + ["bf16", "f16"])
def test_convert_f64_single_rounding(name):
    """ml_dtypes double-rounds f64 through f32; convert() must not."""
    vals, _ = table(codec(name))
    mids = (vals[1:] + vals[:-1]) / 2
    mids = mids[mids > 0]
    d = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40), mids, vals,
                        [1e300, 2.0**-1000, 3.5e38]])
    d = np.concatenate([d, -d])
    got = codes_of(R.convert(d, name))
    assert (got == rne_codes(d, name)).all()


@pytest.mark.parametrize("name", ["bf16", "f16"])
def test_convert_f32_to_wide16_exact_rne(name):
    c = _f32_candidates(name)
    rng = np.random.default_rng(2)
    rnd = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    c = np.concatenate([c, rnd[~np.isnan(rnd)]])
    assert (codes_of(R.convert(c, name)) == rne_codes(c.astype(np.float64), name)).all()


def test_convert_e8m0_rule():
    k = np.arange(-149, 128)
    base = np.concatenate([np.ldexp(1.0, k), np.ldexp(1.5, k), np.ldexp(1.25, k)]).astype(F32)
    c = np.concatenate([base, np.nextafter(base, F32(np.inf)), np.nextafter(base, F32(0))])
    rng = np.random.default_rng(3)
    rnd = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(F32)
    sub = np.arange(1, 1 << 23, 997, dtype=np.uint32).view(F32)
    c = np.concatenate([c, -c, rnd[~np.isnan(rnd)], sub, f32s(0, -0.0, np.inf, -np.inf)])
    got = codes_of(R.convert(c, "f8E8M0FNU"))
    assert (got == e8m0_codes(c)).all()
    for src in (BF16, F16):
        x = np.arange(1 << 16, dtype=np.uint16).view(src)
        x = x[~np.isnan(x.astype(F32))]
        assert (codes_of(R.convert(x, "f8E8M0FNU")) == e8m0_codes(x.astype(F32))).all()


@pytest.mark.parametrize("value,code", [
    (1.0, 0x7F), (1.4999999, 0x7F), (1.5, 0x80), (1.75, 0x80), (0.75, 0x7F), (3.0, 0x81),
    (2.0**127, 0xFE), (1.4999 * 2.0**127, 0xFE), (1.5 * 2.0**127, 0xFF), (F32_MAX, 0xFF),
    (2.0**-126, 0x01), (1.5 * 2.0**-127, 0x01), (2.0**-127, 0x00), (2.0**-149, 0x00),
    (1.25 * 2.0**-127, 0x01),  # ml_dtypes: f32 subnormals in (2^-127, 2^-126) round up
    (0.0, 0xFF), (-0.0, 0xFF), (-1.0, 0xFF), (np.inf, 0xFF), (-np.inf, 0xFF), (np.nan, 0xFF),
])
def test_convert_e8m0_vectors(value, code):
    assert codes_of(R.convert(f32s(value), "f8E8M0FNU"))[0] == code


@pytest.mark.parametrize("name,value,code", [
    ("f8E4M3FN", 464.0, 0x7E), ("f8E4M3FN", float(nextup(464.0)), 0x7F),
    ("f8E4M3FN", 480.0, 0x7F), ("f8E4M3FN", -448.0, 0xFE), ("f8E4M3FN", 2.0**-10, 0x00),
    ("f8E4M3FN", 3 * 2.0**-10, 0x02), ("f8E4M3FN", -(2.0**-11), 0x80),
    ("f8E4M3FN", np.inf, 0x7F), ("f8E4M3FN", -np.inf, 0xFF),
    ("f8E5M2", float(nextdown(61440.0)), 0x7B), ("f8E5M2", 61440.0, 0x7C),
    ("f8E5M2", np.inf, 0x7C), ("f8E5M2", -np.inf, 0xFC), ("f8E5M2", 2.0**-16, 0x01),
    ("f4E2M1FN", 0.25, 0x0), ("f4E2M1FN", 0.75, 0x2), ("f4E2M1FN", 2.5, 0x4),
    ("f4E2M1FN", 3.5, 0x6), ("f4E2M1FN", 5.0, 0x6), ("f4E2M1FN", 7.0, 0x7),
    ("f4E2M1FN", 1e30, 0x7), ("f4E2M1FN", np.inf, 0x7), ("f4E2M1FN", -np.inf, 0xF),
    ("f4E2M1FN", -0.25, 0x8), ("f4E2M1FN", -0.0, 0x8),
    ("f6E2M3FN", 7.75, 0x1F), ("f6E2M3FN", 7.76, 0x1F), ("f6E2M3FN", -np.inf, 0x3F),
    ("f6E2M3FN", 0.0625, 0x00), ("f6E2M3FN", 0.1875, 0x02),
    ("f6E3M2FN", 30.0, 0x1F), ("f6E3M2FN", np.inf, 0x1F), ("f6E3M2FN", -0.0, 0x20),
    ("f6E3M2FN", 0.03125, 0x00), ("f6E3M2FN", 0.09375, 0x02),
])
def test_convert_vectors(name, value, code):
    assert codes_of(R.convert(f32s(value), name))[0] == code


@pytest.mark.parametrize("src", [np.float64, np.float32, BF16, F16])
def test_convert_nan_rules(src):
    nans = np.array([np.nan, -np.nan], dtype=np.float64).astype(src)
    assert np.signbit(nans.astype(np.float64)).tolist() == [False, True]
    assert codes_of(R.convert(nans, "f4E2M1FN")).tolist() == [0x8, 0x8]
    assert codes_of(R.convert(nans, "f6E2M3FN")).tolist() == [0x20, 0x20]
    assert codes_of(R.convert(nans, "f6E3M2FN")).tolist() == [0x20, 0x20]
    assert codes_of(R.convert(nans, "f8E4M3FN")).tolist() == [0x7F, 0xFF]
    assert codes_of(R.convert(nans, "f8E5M2")).tolist() == [0x7E, 0xFE]
    assert codes_of(R.convert(nans, "f8E8M0FNU")).tolist() == [0xFF, 0xFF]
    for wide in ("f32", "bf16", "f16"):
        assert np.isnan(R.convert(nans, wide).astype(F32)).all()


def test_convert_nan_payloads():
    p = np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0xFFFFFFFF], np.uint32).view(F32)
    assert codes_of(R.convert(p, "f8E5M2")).tolist() == [0x7E, 0xFE, 0x7E, 0xFE]
    assert codes_of(R.convert(p, "f8E4M3FN")).tolist() == [0x7F, 0xFF, 0x7F, 0xFF]
    assert codes_of(R.convert(p, "f4E2M1FN")).tolist() == [0x8] * 4


@pytest.mark.parametrize("name", list(FLOAT_TYPES))
def test_decode_all_codes(name):
    """narrow -> f32 is exact: every code decodes to the codec formula's value."""
    t = FLOAT_TYPES[name]
    codes = np.arange(1 << t.bits)
    got = R.convert(R.from_bits(codes, name), "f32").astype(np.float64)
    for code, g in zip(codes.tolist(), got.tolist()):
        if name == "f8E8M0FNU":
            exp = math.nan if code == 0xFF else math.ldexp(1.0, code - 127)
        else:
            c = codec(name)
            mag = code & t.magnitude_mask
            if is_special(c, code):
                exp = math.inf if (c.special == "ieee" and mag & ((1 << c.man_bits) - 1) == 0) \
                    else math.nan
            else:
                exp = mag_value(c, mag)
            if code & t.sign_mask:
                exp = -exp
        if math.isnan(exp):
            assert math.isnan(g), (name, code)
        else:
            assert g == exp and math.copysign(1, g) == math.copysign(1, exp), (name, code, g)


def test_convert_wide_and_names():
    x = f32s(1.0, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 65520.0, 2.0**-25, 3 * 2.0**-26)
    assert codes_of(R.convert(x, "bf16")).tolist() == [0x3F80, 0x3F80, 0x3F82, 0x4780,
                                                       0x3300, 0x3340]
    assert codes_of(R.convert(x, np.float16)).tolist() == [0x3C00, 0x3C04, 0x3C0C, 0x7C00,
                                                           0x0000, 0x0001]
    assert R.convert(x, "f32").dtype == F32
    assert R.convert(x, "float8_e4m3fn").dtype == FLOAT_TYPES["f8E4M3FN"].dtype
    assert R.convert(x, ml_dtypes.float8_e5m2).dtype == FLOAT_TYPES["f8E5M2"].dtype
    assert R.convert(R.convert(x, "f8E4M3FN"), "f4E2M1FN").dtype == FLOAT_TYPES["f4E2M1FN"].dtype
    # narrow -> narrow goes through the exact f32 value
    e = R.convert(f32s(0.203125, -0.25, 5.0, 7.0), "f8E4M3FN")
    assert codes_of(R.convert(e, "f4E2M1FN")).tolist() == [0x0, 0x8, 0x6, 0x7]


def test_convert_bad_input():
    with pytest.raises(KeyError, match="unknown element type"):
        R.convert(f32s(1.0), "tf32")
    with pytest.raises(ValueError):
        R.convert(np.array([1, 2], np.int32), "f32")
    with pytest.raises(ValueError):
        R.convert(f32s(1.0), "i8")
    with pytest.raises(ValueError):
        R.convert(f32s(1.0), np.int16)


# ============================================================== bits / from_bits


def test_bits_and_from_bits():
    assert R.bits(f32s(1.0))[0] == 0x3F800000 and R.bits(f32s(1.0)).dtype == np.uint32
    assert R.bits(np.array([1.0], BF16)).tolist() == [0x3F80]
    assert R.bits(np.array([1.0], F16)).dtype == np.uint16
    assert R.bits(R.convert(f32s(-0.0), "f4E2M1FN")).tolist() == [0x8]
    assert R.bits(R.convert(f32s(-0.0), "f6E3M2FN")).tolist() == [0x20]
    assert R.bits(np.array([-1], np.int8)).tolist() == [0xFF]
    for name, t in FLOAT_TYPES.items():
        codes = np.arange(1 << t.bits, dtype=np.uint8)
        a = R.from_bits(codes, name)
        assert a.dtype == t.dtype
        assert (R.bits(a) == codes).all()
    assert R.from_bits(np.array([0x3F80]), "bf16").astype(F32)[0] == 1.0
    assert R.from_bits(np.array([255]), "i8")[0] == -1
    with pytest.raises(ValueError, match="codes"):
        R.from_bits(np.array([16]), "f4E2M1FN")
    with pytest.raises(ValueError):
        R.from_bits(np.array([-1]), "f8E4M3FN")
    with pytest.raises(ValueError):
        R.from_bits(f32s(1.0), "f8E4M3FN")
    with pytest.raises(KeyError):
        R.from_bits(np.array([1]), "f7")


# ============================================================== quantize: scalar oracle


def _nearest_e(amax: float, emax: int) -> int:
    v = float(F32(amax)) / 2.0**emax  # taken exactly (f64), never an f32 quotient
    if v == 0:
        return -127
    code = int(e8m0_codes(np.array([v]))[0])
    return 128 if code == 0xFF else code - 127


def slow_quantize(x: np.ndarray, fmt_name: str, k: int, mode: str, g=None):
    """Per-block, per-element re-derivation of sections 3/4 on the last axis.  Returns
    (element codes int64, scale codes int64)."""
    fmt = get_format(fmt_name)
    xs = x.astype(F32).reshape(-1, k)
    ecodes, scodes = [], []
    for blk in xs:
        if fmt.is_nvfp4:
            g32 = F32(1.0 if g is None else g)
            with np.errstate(over="ignore", invalid="ignore"):
                y = blk / g32
            if not np.isfinite(y).all():
                ecodes.append([0] * k)
                scodes.append(0x7F)
                continue
            amax = F32(np.max(np.abs(y)))
            s_code = int(rne_codes([float(min(amax / F32(6), F32(448)))], "f8E4M3FN")[0])
            s = F32(mag_value(codec("f8E4M3FN"), s_code))
            scodes.append(s_code)
            if s == 0:
                ecodes.append([0] * k)
                continue
            q = [float(min(max(v / s, F32(-6)), F32(6))) for v in y]
            ecodes.append(rne_codes(q, "f4E2M1FN").tolist())
            continue
        vals = [float(v) for v in blk]
        if not all(math.isfinite(v) for v in vals):
            ecodes.append([0] * k)
            scodes.append(0xFF)
            continue
        amax = max(abs(v) for v in vals)
        emax = fmt.emax_elem
        if amax == 0:
            E = -127
        elif mode == "floor":
            E = math.frexp(amax)[1] - 1 - emax
        elif mode == "rceil":
            q = float(F32(amax) / F32(fmt.max_elem))
            if q == 0:
                E = -127
            else:
                m, e = math.frexp(q)
                E = e - 1 if m == 0.5 else e
        else:
            E = _nearest_e(amax, emax)
        E = min(max(E, -127), 127)
        scodes.append(E + 127)
        if fmt.is_int:
            ecodes.append([min(max(round(math.ldexp(v, 6 - E)), -127), 127) & 0xFF
                           for v in vals])
        else:
            t = [min(max(math.ldexp(v, -E), -fmt.max_elem), fmt.max_elem) for v in vals]
            ecodes.append(rne_codes(t, fmt.element).tolist())
    shape = x.shape
    return (np.array(ecodes, np.int64).reshape(shape),
            np.array(scodes, np.int64).reshape(*shape[:-1], shape[-1] // k))


def qcodes(x, fmt, **kw):
    e, s = R.quantize(x, fmt, **kw)
    return codes_of(e), codes_of(s)


# ============================================================== quantize: hand vectors


def one_block(fmt: str, vals, k=None) -> np.ndarray:
    k = k or get_format(fmt).block_size
    x = np.zeros(k, F32)
    x[: len(vals)] = vals
    return x


def evalues(e: np.ndarray) -> np.ndarray:
    if e.dtype == np.int8:
        return e.astype(np.float64) / 64
    return e.astype(np.float64)


# (format, amax, {mode: (scale code, element value of amax)})
SCALE_TABLE = [
    ("mxfp8_e4m3", 1.0, {"floor": (119, 256.0), "rceil": (119, 256.0), "nearest": (119, 256.0)}),
    ("mxfp8_e4m3", 1.5, {"floor": (119, 384.0), "rceil": (119, 384.0), "nearest": (120, 192.0)}),
    ("mxfp8_e4m3", 1.75, {"floor": (119, 448.0), "rceil": (119, 448.0), "nearest": (120, 224.0)}),
    ("mxfp8_e4m3", 1.875, {"floor": (119, 448.0), "rceil": (120, 240.0),
                           "nearest": (120, 240.0)}),
    ("mxfp8_e4m3", 448.0, {"floor": (127, 448.0), "rceil": (127, 448.0),
                           "nearest": (128, 224.0)}),
    ("mxfp8_e4m3", 449.0, {"floor": (127, 448.0), "rceil": (128, 224.0),
                           "nearest": (128, 224.0)}),
    ("mxfp8_e4m3", 500.0, {"floor": (127, 448.0), "rceil": (128, 256.0),
                           "nearest": (128, 256.0)}),
    ("mxfp8_e4m3", float(nextdown(256.0)), {"floor": (126, 448.0), "rceil": (127, 256.0),
                                            "nearest": (127, 256.0)}),
    ("mxfp8_e4m3", F32_MAX, {"floor": (246, 448.0), "rceil": (247, 256.0),
                             "nearest": (247, 256.0)}),
    ("mxfp8_e5m2", 1.0, {"floor": (112, 32768.0), "rceil": (112, 32768.0),
                         "nearest": (112, 32768.0)}),
    ("mxfp8_e5m2", 1.5, {"floor": (112, 49152.0), "rceil": (112, 49152.0),
                         "nearest": (113, 24576.0)}),
    ("mxfp8_e5m2", 1.875, {"floor": (112, 57344.0), "rceil": (113, 32768.0),
                           "nearest": (113, 32768.0)}),
    ("mxfp8_e5m2", 57344.0, {"floor": (127, 57344.0), "rceil": (127, 57344.0),
                             "nearest": (128, 28672.0)}),
    ("mxfp8_e5m2", 57345.0, {"floor": (127, 57344.0), "rceil": (128, 28672.0),
                             "nearest": (128, 28672.0)}),
    ("mxfp8_e5m2", F32_MAX, {"floor": (239, 57344.0), "rceil": (240, 32768.0),
                             "nearest": (240, 32768.0)}),
    ("mxfp6_e3m2", 1.0, {"floor": (123, 16.0), "rceil": (123, 16.0), "nearest": (123, 16.0)}),
    ("mxfp6_e3m2", 1.5, {"floor": (123, 24.0), "rceil": (123, 24.0), "nearest": (124, 12.0)}),
    ("mxfp6_e3m2", 28.0, {"floor": (127, 28.0), "rceil": (127, 28.0), "nearest": (128, 14.0)}),
    ("mxfp6_e3m2", 31.0, {"floor": (127, 28.0), "rceil": (128, 16.0), "nearest": (128, 16.0)}),
    ("mxfp6_e2m3", 1.0, {"floor": (125, 4.0), "rceil": (125, 4.0), "nearest": (125, 4.0)}),
    ("mxfp6_e2m3", 1.5, {"floor": (125, 6.0), "rceil": (125, 6.0), "nearest": (126, 3.0)}),
    ("mxfp6_e2m3", 7.5, {"floor": (127, 7.5), "rceil": (127, 7.5), "nearest": (128, 3.75)}),
    ("mxfp6_e2m3", 7.7, {"floor": (127, 7.5), "rceil": (128, 3.75), "nearest": (128, 3.75)}),
    ("mxfp6_e2m3", 7.9, {"floor": (127, 7.5), "rceil": (128, 4.0), "nearest": (128, 4.0)}),
    ("mxfp4_e2m1", 1.0, {"floor": (125, 4.0), "rceil": (125, 4.0), "nearest": (125, 4.0)}),
    ("mxfp4_e2m1", 1.5, {"floor": (125, 6.0), "rceil": (125, 6.0), "nearest": (126, 3.0)}),
    ("mxfp4_e2m1", 6.0, {"floor": (127, 6.0), "rceil": (127, 6.0), "nearest": (128, 3.0)}),
    ("mxfp4_e2m1", 6.5, {"floor": (127, 6.0), "rceil": (128, 3.0), "nearest": (128, 3.0)}),
    ("mxfp4_e2m1", F32_MAX, {"floor": (252, 6.0), "rceil": (253, 4.0), "nearest": (253, 4.0)}),
    ("mxfp4_e2m1", 7.0, {"floor": (127, 6.0), "rceil": (128, 4.0), "nearest": (128, 4.0)}),
    ("mxint8", 1.0, {"floor": (127, 1.0), "rceil": (127, 1.0), "nearest": (127, 1.0)}),
    ("mxint8", 1.5, {"floor": (127, 1.5), "rceil": (127, 1.5), "nearest": (128, 0.75)}),
    ("mxint8", 127 / 64, {"floor": (127, 127 / 64), "rceil": (127, 127 / 64),
                          "nearest": (128, 1.0)}),  # 63.5 ties to 64
    ("mxint8", 1.99, {"floor": (127, 127 / 64), "rceil": (128, 1.0), "nearest": (128, 1.0)}),
    ("mxint8", 1.999, {"floor": (127, 127 / 64), "rceil": (128, 1.0), "nearest": (128, 1.0)}),
    ("mxint8", F32_MAX, {"floor": (254, 127 / 64), "rceil": (254, 127 / 64),
                         "nearest": (254, 127 / 64)}),
]


@pytest.mark.parametrize("fmt,amax,expect", SCALE_TABLE,
                         ids=[f"{f}-{a:g}" for f, a, _ in SCALE_TABLE])
@pytest.mark.parametrize("mode", SCALE_MODES)
def test_scale_table(fmt, amax, expect, mode):
    code, elem = expect[mode]
    shifts = (0,) if amax == F32_MAX else (0, -20, 37)
    for sign, shift in [(sign, shift) for sign in (1, -1) for shift in shifts]:
        x = one_block(fmt, [sign * amax * 2.0**shift, 0.5 * sign * amax * 2.0**shift])
        e, s = R.quantize(x, fmt, scale_mode=mode)
        assert codes_of(s).tolist() == [code + shift]
        assert evalues(e)[0] == sign * elem
        # same against the scalar oracle, both blocks' elements
        ec, sc = slow_quantize(x[None], fmt, x.size, mode)
        assert (codes_of(e) == ec[0]).all() and sc[0, 0] == code + shift


def test_modes_differ_where_they_must():
    """E takes at most two values across modes; each pair differs on some block."""
    def sc(fmt, a, mode):
        return int(codes_of(R.quantize(one_block(fmt, [a]), fmt, scale_mode=mode)[1])[0])
    # floor vs nearest (significand in [1.5, max's significand]): rceil sides with floor
    assert sc("mxfp8_e4m3", 1.5, "floor") == sc("mxfp8_e4m3", 1.5, "rceil") == 119
    assert sc("mxfp8_e4m3", 1.5, "nearest") == 120
    # floor vs rceil (significand above max's): nearest sides with rceil
    assert sc("mxint8", 1.99, "floor") == 127
    assert sc("mxint8", 1.99, "rceil") == sc("mxint8", 1.99, "nearest") == 128
    # rceil vs nearest
    assert sc("mxfp6_e2m3", 1.5, "rceil") == 125 and sc("mxfp6_e2m3", 1.5, "nearest") == 126
    assert sc("mxfp6_e2m3", 1.25, "rceil") == sc("mxfp6_e2m3", 1.25, "nearest") == 125


def test_rceil_uses_one_f32_division():
    # amax just above 448 * 2^-127: exact ceil(log2(amax/448)) is -126, but the f32 quotient
    # rounds to exactly 2^-127 (a subnormal), so E = -127.
    amax = nextup(1.75 * 2.0**-119)
    assert F32(amax) / F32(448) == F32(2.0**-127)
    e, s = R.quantize(one_block("mxfp8_e4m3", [amax]), "mxfp8_e4m3", scale_mode="rceil")
    assert codes_of(s).tolist() == [0]
    assert evalues(e)[0] == 448.0
    # an amax whose quotient underflows to 0 gives E = -127, not an error
    e, s = R.quantize(one_block("mxfp8_e4m3", [2.0**-149]), "mxfp8_e4m3", scale_mode="rceil")
    assert codes_of(s).tolist() == [0]


def test_nearest_edge_cases():
    # quotient underflow to 0 -> E = -127 (not e8m0(0) = NaN)
    e, s = R.quantize(one_block("mxfp8_e4m3", [2.0**-149]), "mxfp8_e4m3", scale_mode="nearest")
    assert codes_of(s).tolist() == [0]
    # the ml_dtypes subnormal rule: 1.25 * 2^-127 rounds up to 2^-126 (documented quirk)
    e, s = R.quantize(one_block("mxint8", [1.25 * 2.0**-127]), "mxint8", scale_mode="nearest")
    assert codes_of(s).tolist() == [1] and e[0] == 40
    e, s = R.quantize(one_block("mxint8", [2.0**-127]), "mxint8", scale_mode="nearest")
    assert codes_of(s).tolist() == [0] and e[0] == 64
    # v = amax * 2^-emax taken exactly: 2^-127 + 2^-150 is above 2^-127 (E = -126), though an
    # f32 quotient would round it to 2^-127 (E = -127)
    for fmt in ("mxfp4_e2m1", "mxfp8_e4m3", "mxfp8_e5m2"):
        emax = get_format(fmt).emax_elem
        amax = F32(2.0 ** (emax - 127) * (1 + 2.0**-23))
        assert float(amax) == 2.0 ** (emax - 127) * (1 + 2.0**-23)
        e, s = R.quantize(one_block(fmt, [amax]), fmt, scale_mode="nearest")
        assert codes_of(s).tolist() == [1], fmt
        assert _nearest_e(float(amax), emax) == -126
    # e8m0 overflow of the quotient -> E = 128 -> clamped to 127
    e, s = R.quantize(one_block("mxint8", [-F32_MAX]), "mxint8", scale_mode="nearest")
    assert codes_of(s).tolist() == [254] and e[0] == -127


@pytest.mark.parametrize("fmt", MX_FORMATS)
@pytest.mark.parametrize("mode", SCALE_MODES)
def test_zero_nan_inf_blocks(fmt, mode):
    k = get_format(fmt).block_size
    x = np.zeros((4, k), F32)
    x[0, 1] = -0.0
    x[1, :] = np.linspace(-1, 1, k)
    x[1, 3] = np.nan
    x[2, :] = np.linspace(-1, 1, k)
    x[2, 5] = np.inf
    x[3, :] = np.linspace(-1, 1, k)
    x[3, 0] = -np.inf
    e, s = R.quantize(x.reshape(-1), fmt, scale_mode=mode)
    assert codes_of(s).tolist() == [0x00, 0xFF, 0xFF, 0xFF]
    ec = codes_of(e).reshape(4, k)
    assert (ec[1:] == 0).all()
    neg_zero = 0x80 if fmt in ("mxfp8_e4m3", "mxfp8_e5m2") else \
        {"mxfp6_e3m2": 0x20, "mxfp6_e2m3": 0x20, "mxfp4_e2m1": 0x8, "mxint8": 0}[fmt]
    assert ec[0, 1] == neg_zero and (np.delete(ec[0], 1) == 0).all()
    d = R.dequantize(e, s, fmt)
    assert (d.reshape(4, k)[0] == 0).all() and np.isnan(d.reshape(4, k)[1:]).all()


@pytest.mark.parametrize("fmt", MX_FLOAT_FORMATS)
def test_negative_zero_and_underflow_keep_sign(fmt):
    x = one_block(fmt, [1.0, -0.0, -(2.0**-40), 2.0**-40])
    e, _ = R.quantize(x, fmt)
    sign = FLOAT_TYPES[get_format(fmt).element].sign_mask
    assert codes_of(e)[1:4].tolist() == [sign, sign, 0]


@pytest.mark.parametrize("fmt,big,sat", [
    ("mxfp8_e4m3", 500.0, 448.0), ("mxfp8_e4m3", 511.0, 448.0), ("mxfp8_e5m2", 65000.0, 57344.0),
    ("mxfp6_e3m2", 31.0, 28.0), ("mxfp6_e2m3", 7.9, 7.5), ("mxfp4_e2m1", 7.0, 6.0),
    ("mxfp4_e2m1", 7.9, 6.0), ("mxint8", 1.999, 127 / 64),
])
def test_floor_saturation(fmt, big, sat):
    e, s = R.quantize(one_block(fmt, [big, -big]), fmt)
    assert codes_of(s).tolist() == [127]
    assert evalues(e)[:2].tolist() == [sat, -sat]
    if fmt == "mxint8":
        assert e[:2].tolist() == [127, -127]


def test_element_rounding_ties_to_even():
    e, _ = R.quantize(one_block("mxfp4_e2m1", [6, 2.5, 0.75, 0.25, -2.5, 5, -5, 3.5]),
                      "mxfp4_e2m1")
    assert evalues(e)[:8].tolist() == [6, 2, 1, 0, -2, 4, -4, 4]
    e, _ = R.quantize(one_block("mxint8", [1.0, 0.5 / 64, 1.5 / 64, 2.5 / 64, -2.5 / 64,
                                           -0.5 / 64]), "mxint8")
    assert e[:6].tolist() == [64, 0, 2, 2, -2, 0]


def test_subnormal_inputs_exact():
    # every subnormal amax gives E = -127 (floor(log2) - emax <= -127), elements are exact
    e, s = R.quantize(one_block("mxint8", [2.0**-127, 1.5 * 2.0**-127, -(2.0**-133)]), "mxint8")
    assert codes_of(s).tolist() == [0] and e[:3].tolist() == [64, 96, -1]
    e, s = R.quantize(one_block("mxfp8_e4m3", [2.0**-130, 2.0**-149]), "mxfp8_e4m3")
    assert codes_of(s).tolist() == [0] and evalues(e)[:2].tolist() == [0.125, 0.0]
    # E clamped at -127 from -128: a subnormal element beside a normal amax is not flushed
    e, s = R.quantize(one_block("mxfp8_e4m3", [2.0**-120, 2.0**-127, 3 * 2.0**-136]),
                      "mxfp8_e4m3")
    assert codes_of(s).tolist() == [0]
    assert evalues(e)[:3].tolist() == [128.0, 1.0, 3 * 2.0**-9]
    # the largest subnormal: exact floor(log2) = -127
    e, s = R.quantize(one_block("mxint8", [nextdown(2.0**-126)]), "mxint8")
    assert codes_of(s).tolist() == [0] and e[0] == 127
    # exact log2 just below a power of two (an f32 log2 would say 8)
    e, s = R.quantize(one_block("mxfp8_e4m3", [nextdown(256.0)]), "mxfp8_e4m3")
    assert codes_of(s).tolist() == [126]


def test_mxint8_clamp():
    e, s = R.quantize(one_block("mxint8", [1.999, -1.999, -1.99, 1.0]), "mxint8")
    assert e[:4].tolist() == [127, -127, -127, 64] and e.dtype == np.int8
    assert codes_of(s).tolist() == [127]


# ============================================================== nvfp4


@pytest.mark.parametrize("vals,g,scode,elems", [
    ([6, 3, -1.5, 0.5], None, 0x38, [6, 3, -1.5, 0.5]),
    ([7, 3, -1.5, 0.1], None, 0x39, [6, 3, -1.5, 0.0]),  # s = RNE(7/6) = 1.125
    ([12, -12, 1], None, 0x40, [6, -6, 0.5]),
    ([6000, 100], None, 0x7E, [6, 0]),  # s = min(1000, 448) = 448
    ([3000, -2000], None, 0x7E, [6, -4]),  # 500 > 464 would be NaN in e4m3 without the min
    ([0.006, 0.002], None, 0x01, [3, 1]),  # s = 2^-9 (e4m3 subnormal)
    ([0.005, -0.0, 0.001], None, 0x00, [0, 0, 0]),  # s rounds to 0: codes +0
    ([0, 0], None, 0x00, [0, 0]),
    ([12, 6, -3], 2.0, 0x38, [6, 3, -1.5]),
    ([2.0, 1.0], 1 / 3, 0x38, [6, 3]),
    ([24.0, 1.0], 0.5, 0x50, [6, 0]),  # y = [48, 2] -> s = 8; 2 / 8 = 0.25 ties to 0
])
def test_nvfp4_vectors(vals, g, scode, elems):
    x = one_block("nvfp4", vals)
    e, s = R.quantize(x, "nvfp4", global_scale=g)
    assert s.dtype == FLOAT_TYPES["f8E4M3FN"].dtype and e.dtype == FLOAT_TYPES["f4E2M1FN"].dtype
    assert codes_of(s).tolist() == [scode]
    assert evalues(e)[: len(elems)].tolist() == elems
    if scode == 0:
        assert (codes_of(e) == 0).all()
    ec, sc = slow_quantize(x[None], "nvfp4", 16, "floor", g)
    assert (codes_of(e) == ec[0]).all() and sc[0, 0] == scode


def test_nvfp4_nan_inf_and_global_scale_dequant():
    x = np.zeros(64, F32)
    x[:16] = np.linspace(-3, 3, 16)
    x[16] = np.nan
    x[32] = -np.inf
    x[48:] = 1e30
    e, s = R.quantize(x, "nvfp4", global_scale=1e-20)  # 1e30 / 1e-20 overflows f32 -> NaN block
    assert codes_of(s)[1:].tolist() == [0x7F, 0x7F, 0x7F]
    assert (codes_of(e)[16:] == 0).all()
    d = R.dequantize(e, s, "nvfp4", global_scale=1e-20)
    assert np.isnan(d[16:]).all() and np.isfinite(d[:16]).all()
    # dequantize: (e * s) in f32, then * g in f32
    g = F32(0.1)
    e, s = R.quantize(x[:16], "nvfp4", global_scale=g)
    d = R.dequantize(e, s, "nvfp4", global_scale=g)
    exp = (e.astype(F32) * s.astype(F32)[0]) * g
    assert (R.bits(d) == R.bits(exp)).all()
    with pytest.raises(ValueError, match="global_scale"):
        R.quantize(x, "nvfp4", global_scale=0.0)
    with pytest.raises(ValueError, match="global_scale"):
        R.quantize(x, "nvfp4", global_scale=np.inf)


# ============================================================== dtypes, axes, block sizes


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("src", [BF16, F16])
def test_bf16_f16_inputs(fmt, src):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(128) * 4).astype(src)
    x[3] = 0
    x[5] = np.array(6e-8, F16).astype(src)  # an f16 subnormal
    a = qcodes(x, fmt)
    b = qcodes(x.astype(F32), fmt)
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_bf16_hand_vector():
    x = np.array([1.5, -0.75] + [0] * 30, BF16)
    e, s = R.quantize(x, "mxfp4_e2m1")
    assert codes_of(s).tolist() == [125] and evalues(e)[:2].tolist() == [6.0, -3.0]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
@pytest.mark.parametrize("mode", SCALE_MODES)
def test_non_last_axis(fmt, mode):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 64, 5)) * np.exp2(rng.integers(-20, 20, (3, 1, 5)))).astype(F32)
    e1, s1 = R.quantize(x, fmt, axis=1, scale_mode=mode)
    e2, s2 = R.quantize(x, fmt, axis=-2, scale_mode=mode)
    et, st_ = R.quantize(np.moveaxis(x, 1, -1).copy(), fmt, scale_mode=mode)
    k = get_format(fmt).block_size
    assert e1.shape == x.shape and s1.shape == (3, 64 // k, 5)
    assert (codes_of(e1) == codes_of(e2)).all() and (codes_of(s1) == codes_of(s2)).all()
    assert (codes_of(e1) == codes_of(np.moveaxis(et, -1, 1))).all()
    assert (codes_of(s1) == codes_of(np.moveaxis(st_, -1, 1))).all()
    d = R.dequantize(e1, s1, fmt, axis=1)
    dt = R.dequantize(et, st_, fmt)
    assert (R.bits(d) == R.bits(np.moveaxis(dt, -1, 1))).all()


@pytest.mark.parametrize("k", [1, 8, 16, 32, 64])
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_block_sizes_match_scalar_oracle(fmt, k):
    rng = np.random.default_rng(6 + k)
    x = (rng.standard_normal((2, 128)) * np.exp2(rng.integers(-30, 30, (2, 128)))).astype(F32)
    for mode in (SCALE_MODES if not get_format(fmt).is_nvfp4 else ("floor",)):
        e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
        assert s.shape == (2, 128 // k)
        ec, sc = slow_quantize(x, fmt, k, mode)
        assert (codes_of(e) == ec).all() and (codes_of(s) == sc).all()
        d = R.dequantize(e, s, fmt)  # block size inferred from the shapes
        assert (R.bits(d) == R.bits(R.dequantize(e, s, fmt, block_size=k))).all()


def test_quantize_bad_input():
    x = np.zeros((4, 48), F32)
    with pytest.raises(ValueError, match="does not divide"):
        R.quantize(x, "mxfp8_e4m3")
    with pytest.raises(ValueError, match="does not divide"):
        R.quantize(x, "mxfp8_e4m3", axis=0, block_size=32)
    with pytest.raises(KeyError, match="unknown MX format"):
        R.quantize(x, "mxfp3")
    with pytest.raises(ValueError, match="scale_mode"):
        R.quantize(x, "mxfp8_e4m3", block_size=16, scale_mode="ceil")
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        R.quantize(x.astype(np.float64), "mxfp8_e4m3", block_size=16)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        R.quantize(x.astype(np.int32), "mxfp8_e4m3", block_size=16)
    with pytest.raises(ValueError, match="global scale"):
        R.quantize(x, "mxfp8_e4m3", block_size=16, global_scale=2.0)
    for bad in (0, -16, 16.0, True):
        with pytest.raises(ValueError, match="block_size"):
            R.quantize(x, "mxfp8_e4m3", block_size=bad)
    with pytest.raises(ValueError, match="axis"):
        R.quantize(x, "mxfp8_e4m3", axis=2, block_size=16)
    with pytest.raises(ValueError):
        R.quantize(np.float32(1.0), "mxfp8_e4m3", block_size=1)


# ============================================================== dequantize


def test_dequantize_special_scales():
    e = R.convert(np.full(64, 448.0, F32), "f8E4M3FN")
    s = R.from_bits(np.array([0xFF, 0x00]), "f8E8M0FNU")
    d = R.dequantize(e, s, "mxfp8_e4m3")
    assert np.isnan(d[:32]).all()
    assert (d[32:].astype(np.float64) == 448 * 2.0**-127).all()
    # the smallest products are f32 subnormals, kept exactly
    e = R.from_bits(np.array([0x01, 0x81] * 16), "f8E4M3FN")
    d = R.dequantize(e, R.from_bits(np.array([0]), "f8E8M0FNU"), "mxfp8_e4m3")
    assert d[:2].astype(np.float64).tolist() == [2.0**-136, -(2.0**-136)]
    # mxint8 code * 2^-6 * 2^-127
    e = np.array([127, -128] + [0] * 30, np.int8)
    d = R.dequantize(e, R.from_bits(np.array([0]), "f8E8M0FNU"), "mxint8")
    assert d[:2].astype(np.float64).tolist() == [127 * 2.0**-133, -(2.0**-126)]
    # f32 overflow of the product is +-Inf
    e = R.from_bits(np.array([0x7B, 0xFB] * 16), "f8E5M2")
    d = R.dequantize(e, R.from_bits(np.array([0xFE]), "f8E8M0FNU"), "mxfp8_e5m2")
    assert d[:2].tolist() == [np.inf, -np.inf]


@pytest.mark.parametrize("out", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_dequantize_random_codes_single_rounding(fmt, out):
    f = get_format(fmt)
    rng = np.random.default_rng(7)
    k = f.block_size
    nb = 256
    if f.is_int:
        e = rng.integers(-128, 128, nb * k).astype(np.int8)
        ev = e.astype(np.float64) / 64
    else:
        t = FLOAT_TYPES[f.element]
        ecodes = rng.integers(0, 1 << t.bits, nb * k)
        e = R.from_bits(ecodes, f.element)
        ev = e.astype(np.float64)
    st_ = FLOAT_TYPES[f.scale]
    scodes = rng.integers(0, 256, nb)
    scodes[:4] = [0x00, 0xFF, 0x01, 0xFE] if not f.is_nvfp4 else [0x00, 0x7F, 0x01, 0x7E]
    s = R.from_bits(scodes, f.scale)
    sv = np.repeat(s.astype(np.float64), k)
    prod = ev * sv  # exact in f64
    small = np.abs(prod) <= F32_MAX
    assert (prod[small] == prod[small].astype(F32).astype(np.float64)).all(), \
        "the f32 product should be exact"
    d = R.dequantize(e, s, fmt, dtype=out)
    assert d.dtype == {"f32": F32, "bf16": BF16, "f16": F16}[out]
    nan = np.isnan(prod)
    assert (np.isnan(d.astype(F32)) == nan).all()
    with np.errstate(over="ignore"):
        p32 = prod[~nan].astype(F32)  # exact, or +-Inf
    if out == "f32":
        exp = R.bits(p32).astype(np.int64)
    else:
        exp = rne_codes(p32.astype(np.float64), out)
    assert (codes_of(d[~nan]) == exp).all()
    assert st_.dtype == s.dtype


def test_dequantize_bf16_f16_hand_vectors():
    s0 = R.from_bits(np.array([0x00]), "f8E8M0FNU")
    e = R.from_bits(np.array([0x07, 0x01, 0x7E] + [0] * 29), "f8E4M3FN")
    d = R.dequantize(e, s0, "mxfp8_e4m3", dtype="bf16")
    # 7 * 2^-136 -> bf16 subnormal grid 2^-133: rounds to 2^-133; 2^-136 -> 0
    assert d.astype(np.float64)[:3].tolist() == [2.0**-133, 0.0, 448 * 2.0**-127]
    d = R.dequantize(e, R.from_bits(np.array([127 + 10]), "f8E8M0FNU"), "mxfp8_e4m3",
                     dtype=np.float16)
    assert d.dtype == F16 and d[2] == np.inf  # 448 * 1024 overflows f16
    assert d.astype(np.float64)[0] == 7 * 2.0**-9 * 1024


def test_dequantize_bad_input():
    e, s = R.quantize(np.zeros(64, F32), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="elements must have dtype"):
        R.dequantize(e.astype(F32), s, "mxfp8_e4m3")
    with pytest.raises(ValueError, match="scales must have dtype"):
        R.dequantize(e, s.view(np.uint8), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="output type"):
        R.dequantize(e, s, "mxfp8_e4m3", dtype="f8E4M3FN")
    with pytest.raises(ValueError, match="expected 4 scales"):
        R.dequantize(e, s, "mxfp8_e4m3", block_size=16)
    with pytest.raises(ValueError, match="evenly"):
        R.dequantize(e[:48], s[:1].repeat(5), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="rank"):
        R.dequantize(e, s[None], "mxfp8_e4m3")
    with pytest.raises(ValueError, match="global scale"):
        R.dequantize(e, s, "mxfp8_e4m3", global_scale=2.0)
    with pytest.raises(KeyError):
        R.dequantize(e, s, "nope")


# ============================================================== properties


def _blocky(seed: int, k: int, nblocks: int, lo: int = -140, hi: int = 127) -> np.ndarray:
    """Blocks with their own magnitude, zeros, exact ties and repeated values."""
    rng = np.random.default_rng(seed)
    exps = rng.integers(lo, hi, (nblocks, 1))
    sig = rng.standard_normal((nblocks, k))
    sig[rng.random((nblocks, k)) < 0.1] = 0
    ties = rng.random((nblocks, k)) < 0.1
    sig = np.where(ties, np.round(sig * 16) / 16 + 1 / 32, sig)
    with np.errstate(over="ignore"):
        x = np.ldexp(sig, exps).astype(F32)
    x[~np.isfinite(x)] = F32_MAX
    return x.reshape(-1)


@st.composite
def mx_inputs(draw, normal_range=False):
    fmt = draw(st.sampled_from(MX_FORMATS))
    k = draw(st.sampled_from([8, 16, 32]))
    nb = draw(st.integers(1, 4))
    if draw(st.booleans()):
        x = _blocky(draw(st.integers(0, 2**32 - 1)), k, nb, *((-40, 40) if normal_range else (-140, 127)))
    else:
        bound = 2.0**60 if normal_range else F32_MAX
        x = np.array(draw(st.lists(
            st.floats(-bound, bound, width=32, allow_nan=False, allow_infinity=False),
            min_size=k * nb, max_size=k * nb)), F32)
        if normal_range:
            x[np.abs(x) < 2.0**-60] = 0
    return fmt, k, draw(st.sampled_from(SCALE_MODES)), x


@PROP
@given(mx_inputs())
def test_prop_matches_scalar_oracle(args):
    fmt, k, mode, x = args
    e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
    ec, sc = slow_quantize(x, fmt, k, mode)
    assert (codes_of(e) == ec).all() and (codes_of(s) == sc).all()


@PROP
@given(mx_inputs())
def test_prop_error_bound(args):
    """Per element: RNE error <= half an ulp of the element type at the element's magnitude
    (relative 2^-(m+1), or the subnormal half-spacing), unless the element saturated, in which
    case it is exactly +-max_elem * 2^E (floor mode: with |x| < 2^(E + emax + 1))."""
    fmt, k, mode, x = args
    f = get_format(fmt)
    e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
    E = np.repeat(codes_of(s) - 127, k).astype(np.float64)
    d = evalues(e) * np.exp2(E)  # exact
    # dequantize agrees, except that a product past f32 max is +-Inf (rceil/nearest can round
    # an amax near f32 max up to 2^128, e.g. e4m3 256 * 2^120)
    d32 = R.dequantize(e, s, fmt).astype(np.float64)
    big = np.abs(d) > F32_MAX
    assert (d32[~big] == d[~big]).all() and (d32[big] == np.sign(d[big]) * np.inf).all()
    if mode == "floor":
        assert not big.any()
    xv = x.astype(np.float64)
    err = np.abs(d - xv)
    scaled = np.abs(xv) * np.exp2(-E)
    if f.is_int:
        clamped = scaled * 64 >= 127.5
        assert (err[~clamped] <= np.exp2(E - 7)[~clamped]).all()
        assert (np.abs(d[clamped]) == (127 * np.exp2(E - 6))[clamped]).all()
        top = 128.0 / 64
    else:
        t = FLOAT_TYPES[f.element]
        m, emin = t.man_bits, 1 - t.bias
        sat = scaled > f.max_elem
        bound = np.maximum(np.abs(xv) * 2.0**-(m + 1), np.exp2(E + emin - m - 1))
        assert (err[~sat] <= bound[~sat]).all()
        assert (np.abs(d[sat]) == (f.max_elem * np.exp2(E))[sat]).all()
        top = 2.0 ** (f.emax_elem + 1)
    assert (np.sign(d) * np.sign(xv) >= 0).all()
    if mode == "floor":
        assert (scaled < top).all()


@PROP
@given(mx_inputs())
def test_prop_idempotence(args):
    """floor: quantize(dequantize(q)) == q bitwise.  rceil: the same values come back (the
    scale may drop by one when every element landed at or below max_elem / 2).  nearest: no
    such guarantee (the scale may rise and halve subnormal elements)."""
    fmt, k, mode, x = args
    e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
    d = R.dequantize(e, s, fmt)
    assume(np.isfinite(d).all())  # see test_prop_error_bound: rceil/nearest may reach 2^128
    e2, s2 = R.quantize(d, fmt, block_size=k, scale_mode=mode)
    if mode == "floor":
        assert (codes_of(e2) == codes_of(e)).all() and (codes_of(s2) == codes_of(s)).all()
    elif mode == "rceil":
        assert (R.bits(R.dequantize(e2, s2, fmt)) == R.bits(d)).all()


def test_requantize_hand_vectors():
    """The cases behind test_prop_idempotence's mode split."""
    x = one_block("mxfp4_e2m1", [5.9, 0.5])
    e, s = R.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    d = R.dequantize(e, s, "mxfp4_e2m1")
    assert codes_of(s).tolist() == [127] and d[:2].tolist() == [6.0, 0.5]
    e2, s2 = R.quantize(d, "mxfp4_e2m1", scale_mode="nearest")  # 6 / 4 = 1.5 rounds up
    assert codes_of(s2).tolist() == [128]
    assert R.dequantize(e2, s2, "mxfp4_e2m1")[:2].tolist() == [6.0, 0.0]  # 0.25 ties to 0
    x = one_block("mxfp4_e2m1", [3.2, 0.5])
    e, s = R.quantize(x, "mxfp4_e2m1", scale_mode="rceil")
    d = R.dequantize(e, s, "mxfp4_e2m1")
    assert codes_of(s).tolist() == [127] and d[:2].tolist() == [3.0, 0.5]
    e2, s2 = R.quantize(d, "mxfp4_e2m1", scale_mode="rceil")  # q = 3 / 6 = 2^-1
    assert codes_of(s2).tolist() == [126]
    assert (R.bits(R.dequantize(e2, s2, "mxfp4_e2m1")) == R.bits(d)).all()


@PROP
@given(mx_inputs(), st.booleans())
def test_prop_sign_symmetry(args, nv):
    fmt, k, mode, x = args
    if nv:
        fmt, k = "nvfp4", 16 if x.size % 16 == 0 else 8
    e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
    en, sn = R.quantize(-x, fmt, block_size=k, scale_mode=mode)
    assert (codes_of(sn) == codes_of(s)).all()
    if e.dtype == np.int8:
        assert (en == -e).all()
    else:
        forced = np.repeat(codes_of(s) == 0 if fmt == "nvfp4" else np.zeros(s.shape, bool), k)
        neg = R.convert(-e.astype(F32), e.dtype)
        assert (codes_of(en)[~forced] == codes_of(neg)[~forced]).all()
        assert (codes_of(en)[forced] == 0).all()


@PROP
@given(mx_inputs(normal_range=True), st.integers(-30, 30))
def test_prop_power_of_two_shifts_scale(args, shift):
    fmt, k, mode, x = args
    e, s = R.quantize(x, fmt, block_size=k, scale_mode=mode)
    xs = (x.astype(np.float64) * 2.0**shift).astype(F32)
    assert (xs.astype(np.float64) == x.astype(np.float64) * 2.0**shift).all()
    e2, s2 = R.quantize(xs, fmt, block_size=k, scale_mode=mode)
    zero = codes_of(s) == 0  # all-zero blocks stay at 0x00
    assert (codes_of(s2)[~zero] == codes_of(s)[~zero] + shift).all()
    assert (codes_of(s2)[zero] == 0).all()
    assert (codes_of(e2) == codes_of(e)).all()


@PROP
@given(st.integers(0, 2**32 - 1), st.sampled_from([1.0, 2.0**-10, 3.0, 1e-3, 1e4]))
def test_prop_nvfp4_matches_scalar_oracle(seed, g):
    x = _blocky(seed, 16, 3, -30, 30)
    e, s = R.quantize(x, "nvfp4", global_scale=g)
    ec, sc = slow_quantize(x[None], "nvfp4", 16, "floor", g)
    assert (codes_of(e) == ec.reshape(-1)).all() and (codes_of(s) == sc.reshape(-1)).all()


# ============================================================== scaled_dot


def _mx(x, fmt, axis=-1):
    return R.quantize(x, fmt, axis=axis)


def test_scaled_dot_matches_dequantized_dot():
    rng = np.random.default_rng(8)
    a = rng.standard_normal((5, 64)).astype(F32)
    b = rng.standard_normal((7, 64)).astype(F32)
    ea, sa = _mx(a, "mxfp8_e4m3")
    eb, sb = _mx(b, "mxfp4_e2m1")
    out = R.scaled_dot(ea, sa, eb, sb, lhs_format="mxfp8_e4m3", rhs_format="mxfp4_e2m1")
    da = R.dequantize(ea, sa, "mxfp8_e4m3").astype(np.float64)
    db = R.dequantize(eb, sb, "mxfp4_e2m1").astype(np.float64)
    exp = (da @ db.T).astype(F32)
    assert out.shape == (5, 7) and out.dtype == F32
    np.testing.assert_allclose(out, exp, rtol=1e-6)
    assert np.allclose(out, a.astype(np.float64) @ b.T.astype(np.float64), rtol=0.3, atol=3)


def test_scaled_dot_batch_plain_and_dimension_numbers():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 3, 32)).astype(F32)  # [B, M, K]
    b = rng.standard_normal((2, 32, 4)).astype(BF16)  # [B, K, N], plain bf16
    ea, sa = _mx(a, "mxint8")
    dn = (((2,), (1,)), ((0,), (0,)))
    out = R.scaled_dot(ea, sa, b, None, lhs_format="mxint8", dimension_numbers=dn)
    da = R.dequantize(ea, sa, "mxint8").astype(np.float64)
    exp = np.einsum("bmk,bkn->bmn", da, b.astype(np.float64)).astype(F32)
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)
    # non-last contracting dim on the scaled side (lhs [K, M], blocked along K = axis 0)
    at = rng.standard_normal((64, 3)).astype(F32)
    eat, sat = _mx(at, "mxfp6_e2m3", axis=0)
    bt = rng.standard_normal((64, 2)).astype(F32)
    out = R.scaled_dot(eat, sat, bt, None, lhs_format="mxfp6_e2m3",
                       dimension_numbers=(((0,), (0,)), ((), ())))
    exp = (R.dequantize(eat, sat, "mxfp6_e2m3", axis=0).astype(np.float64).T
           @ bt.astype(np.float64)).astype(F32)
    np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)
    # batch dim not leading: result order is batch, lhs free, rhs free
    a2 = rng.standard_normal((3, 2, 32)).astype(F32)  # [M, B, K]
    b2 = rng.standard_normal((4, 32, 2)).astype(F32)  # [N, K, B]
    out = R.scaled_dot(a2, None, b2, None, dimension_numbers=(((2,), (1,)), ((1,), (2,))))
    exp = np.einsum("mbk,nkb->bmn", a2.astype(np.float64), b2.astype(np.float64)).astype(F32)
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(out, exp, rtol=1e-6, atol=1e-6)


def test_scaled_dot_global_scale_and_out_dtype():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((4, 32)).astype(F32)
    b = rng.standard_normal((3, 32)).astype(F32)
    ea, sa = R.quantize(a, "nvfp4")
    eb, sb = R.quantize(b, "nvfp4")
    g = F32(0.37)
    out = R.scaled_dot(ea, sa, eb, sb, lhs_format="nvfp4", rhs_format="nvfp4",
                       global_scale=g, out_dtype="bf16")
    acc = (R.dequantize(ea, sa, "nvfp4").astype(np.float64)
           @ R.dequantize(eb, sb, "nvfp4").astype(np.float64).T).astype(F32)
    exp = R.convert(acc * g, "bf16")
    assert out.dtype == BF16 and (R.bits(out) == R.bits(exp)).all()


def test_scaled_dot_nan_block_propagates():
    a = np.ones((2, 32), F32)
    a[1, 0] = np.nan
    ea, sa = _mx(a, "mxfp8_e5m2")
    out = R.scaled_dot(ea, sa, np.ones((1, 32), F32), None, lhs_format="mxfp8_e5m2")
    assert out[0, 0] == 32 and np.isnan(out[1, 0])


def test_scaled_dot_bad_input():
    ea, sa = _mx(np.ones((2, 32), F32), "mxfp8_e4m3")
    b = np.ones((3, 16), F32)
    with pytest.raises(ValueError, match="contracting dimension sizes"):
        R.scaled_dot(ea, sa, b, None, lhs_format="mxfp8_e4m3")
    with pytest.raises(ValueError, match="without"):
        R.scaled_dot(ea, None, b, None, lhs_format="mxfp8_e4m3")
    with pytest.raises(ValueError, match="no lhs_format"):
        R.scaled_dot(ea, sa, b, None)
    with pytest.raises(ValueError, match="lhs_axis"):
        R.scaled_dot(ea, sa, np.ones((2, 32), F32), None, lhs_format="mxfp8_e4m3",
                     dimension_numbers=(((0, 1), (0, 1)), ((), ())))
    with pytest.raises(ValueError, match="dimension_numbers"):
        R.scaled_dot(ea, sa, b, None, lhs_format="mxfp8_e4m3", dimension_numbers=(1, 2, 3))
    with pytest.raises(ValueError, match="repeat"):
        R.scaled_dot(ea, sa, ea, sa, lhs_format="mxfp8_e4m3", rhs_format="mxfp8_e4m3",
                     dimension_numbers=(((1,), (1,)), ((1,), (0,))))
    with pytest.raises(ValueError, match="out of range"):
        R.scaled_dot(ea, sa, ea, sa, lhs_format="mxfp8_e4m3", rhs_format="mxfp8_e4m3",
                     dimension_numbers=(((2,), (1,)), ((), ())))
    with pytest.raises(ValueError, match="output type"):
        R.scaled_dot(np.ones((2, 4), F32), None, np.ones((2, 4), F32), None, out_dtype="i8")


# ============================================================== pack / unpack


def int_stream_pack(codes: list[int], b: int) -> list[int]:
    big = sum(c << (b * i) for i, c in enumerate(codes))
    return list(big.to_bytes(len(codes) * b // 8, "little"))


def test_pack_known_bytes():
    assert R.pack(np.array([1, 2], np.uint8), 4).tolist() == [0x21]
    assert R.pack(np.array([0xF, 0x0, 0x3, 0xA], np.uint8), 4).tolist() == [0x0F, 0xA3]
    assert R.pack(np.array([1, 2, 3, 63], np.uint8), 6).tolist() == [0x81, 0x30, 0xFC]
    assert R.pack(np.array([63, 0, 0, 0], np.uint8), 6).tolist() == [0x3F, 0x00, 0x00]
    assert R.pack(np.array([0, 0, 0, 63], np.uint8), 6).tolist() == [0x00, 0x00, 0xFC]
    f4 = R.convert(f32s(0.5, 6.0, -0.0, -6.0), "f4E2M1FN")
    assert R.pack(f4, 4).tolist() == [0x71, 0xF8]
    f6 = R.convert(f32s(1.0, -1.0, 0.125, 7.5), "f6E2M3FN")
    assert R.pack(f6, 6).tolist() == int_stream_pack([0x08, 0x28, 0x01, 0x1F], 6)
    e8 = R.convert(f32s(1.0, -2.0), "f8E4M3FN")
    assert R.pack(e8, 8).tolist() == [0x38, 0xC0]
    assert R.pack(np.array([-1, 5], np.int8), 8).tolist() == [0xFF, 0x05]


@pytest.mark.parametrize("b", [1, 2, 3, 4, 5, 6, 7, 8])
def test_pack_matches_int_stream_and_round_trips(b):
    rng = np.random.default_rng(b)
    n = 8 * 3
    codes = rng.integers(0, 1 << b, (5, n)).astype(np.uint8)
    p = R.pack(codes, b)
    assert p.shape == (5, n * b // 8) and p.dtype == np.uint8
    for row, prow in zip(codes, p):
        assert prow.tolist() == int_stream_pack(row.tolist(), b)
    assert (R.unpack(p, b) == codes).all()
    assert (R.unpack(p, b, count=n) == codes).all()
    # along a non-last axis
    p0 = R.pack(codes.T.copy(), b, axis=0)
    assert (p0 == p.T).all()
    assert (R.unpack(p0, b, axis=0) == codes.T).all()


@PROP
@given(st.sampled_from(["f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E4M3FN"]),
       st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_prop_pack_round_trip_typed(name, groups, seed):
    t = FLOAT_TYPES[name]
    n = groups * (8 if t.bits == 6 else 2)
    codes = np.random.default_rng(seed).integers(0, 1 << t.bits, (3, n))
    a = R.from_bits(codes, name)
    back = R.from_bits(R.unpack(R.pack(a, t.bits), t.bits), name)
    assert (R.bits(back) == R.bits(a)).all()


def test_pack_errors():
    with pytest.raises(ValueError, match="whole"):
        R.pack(np.array([1, 2, 3], np.uint8), 4)
    with pytest.raises(ValueError, match="whole"):
        R.pack(np.array([1, 2, 3, 4, 5, 6], np.uint8), 6)
    with pytest.raises(ValueError, match="whole"):
        R.unpack(np.zeros(4, np.uint8), 6)
    with pytest.raises(ValueError, match="count"):
        R.unpack(np.zeros(3, np.uint8), 6, count=3)
    with pytest.raises(ValueError, match="codes must lie"):
        R.pack(np.array([16, 0], np.uint8), 4)
    with pytest.raises(ValueError, match="bits=6"):
        R.pack(R.convert(f32s(1, 2), "f4E2M1FN"), 6)
    with pytest.raises(ValueError, match="bits must be"):
        R.pack(np.array([1, 2], np.uint8), 9)
    with pytest.raises(ValueError, match="uint8"):
        R.unpack(np.zeros(3, np.int32), 6)
    with pytest.raises(ValueError):
        R.pack(f32s(1, 2), 4)


# ============================================================== size


def test_quantize_2_pow_22_elements():
    x = np.random.default_rng(11).standard_normal(1 << 22).astype(F32).reshape(-1, 4096)
    for fmt in ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"):
        e, s = R.quantize(x, fmt)
        assert e.shape == x.shape and s.shape == (x.shape[0], 4096 // get_format(fmt).block_size)
        d = R.dequantize(e, s, fmt)
        assert np.isfinite(d).all()
