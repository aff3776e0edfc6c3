"""The section 10 oracle (mxlower.cast_reference, re-exported by mxlower.reference) against an
independent formulation of docs/semantics.md section 10.

The oracle rounds with spacing arithmetic (t = |v| / q, R(t)); the checks here enumerate
every value of a spec and pick a neighbour (``neighbour_cast``), and select scales tile by tile
with Python fractions, so the two share no code.  Exhaustive over every f16 and bf16 input for
every spec of at most 8 bits and every rounding mode; property tests for wider specs; scaled
casts of every kind; the OCP formats as datatypes give the named formats' bits; stochastic
rounding is unbiased.
"""

from __future__ import annotations

import fractions
import functools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mxlower import cast_reference, numbers
from mxlower import reference as R
from mxlower.formats import FORMATS
from mxlower.numbers import NumberSpec, SpecError

F = fractions.Fraction
BF16 = np.dtype(ml_dtypes.bfloat16)
MODES = ("even", "nearest", "zero", "half_down", "stochastic")


def small_specs() -> list[NumberSpec]:
    """Every float shape of at most 8 bits with each Inf/NaN kind, some non-default biases,
    every exponent type, int2..int8 and uint1..uint8."""
    out = []
    for x in range(1, 8):
        for y in range(0, 8 - x):
            for suffix in ("", "fn", "fnuz", "fo"):
                try:
                    out.append(numbers.number(f"e{x}m{y}{suffix}"))
                except SpecError:
                    pass
    for code in ("e4m3b5fn", "e4m3b9", "e3m2b1fo", "e2m3b0fo", "e5m2b20fnuz", "e3m4b6",
                 "e4m3b8fnuz", "e5m2b16fnuz", "e4m3b11fnuz", "e6m1b40fn"):
        out.append(numbers.number(code))
    out += [numbers.number(f"e{x}m0") for x in range(4, 9)]
    out += [numbers.number(f"int{k}") for k in range(2, 9)]
    out += [numbers.number(f"uint{k}") for k in range(1, 9)]
    return list(dict.fromkeys(out))


SMALL = small_specs()


# ----------------------------------------------------------------------------- independent


@functools.lru_cache(maxsize=None)
def _table(spec: NumberSpec, fixed: bool) -> tuple[np.ndarray, np.ndarray]:
    """(sorted non-negative finite values, their magnitude codes), by enumeration."""
    if spec.is_integer:
        top = spec.max_code
        vals = np.arange(top + 1, dtype=np.float64)
        if fixed and spec.kind == "int":
            vals = np.ldexp(vals, -(spec.bits - 2))
        return vals, np.arange(top + 1, dtype=np.int64)
    pairs = {}
    for c in range(1 << spec.bits):
        if spec.kind == "float" and c & spec.sign_mask:
            continue
        v = spec.value_of(c)
        if isinstance(v, float) and not math.isfinite(v):
            continue
        pairs[float(v)] = c
    vals = np.array(sorted(pairs), np.float64)
    return vals, np.array([pairs[v] for v in vals], np.int64)


def neighbour_cast(v: np.ndarray, spec: NumberSpec, mode: str, r=None, *,
                   fixed: bool = False) -> np.ndarray:
    """Section 10.2 by choosing between the two enumerated neighbours of |v|."""
    vals, codes = _table(spec, fixed)
    v = np.asarray(v, np.float64)
    a = np.abs(v)
    fin = np.isfinite(v)
    af = np.where(fin, a, 0.0)
    top = vals[-1]
    i = np.clip(np.searchsorted(vals, af, side="right") - 1, 0, len(vals) - 2)
    lo, hi = vals[i], vals[i + 1]
    lo_c, hi_c = codes[i], codes[i + 1]
    if mode == "zero":
        up = np.zeros(a.shape, bool)
    elif mode == "nearest":
        up = (af - lo) >= (hi - af)
    elif mode == "half_down":
        up = (af - lo) > (hi - af)
    elif mode == "even":
        # hi - lo is the spacing q at |v|, so lo = T q: a tie goes up when T is odd
        tie_up = np.fmod(lo / (hi - lo), 2) == 1
        up = ((af - lo) > (hi - af)) | (((af - lo) == (hi - af)) & tie_up)
    else:
        r64 = np.asarray(r, np.float64)
        up = r64 * (hi - lo) >= (hi - af) * 2.0 ** 32  # r / 2^32 >= (hi - a) / q, exactly
    up &= af > lo
    c = np.where(up, hi_c, lo_c)
    c = np.where(af >= top, codes[-1], c)  # saturate
    below = af < vals[0]  # only exponent types have no zero: below range
    c = np.where(below, codes[0], c)
    neg = np.signbit(v)
    nan = np.isnan(v)
    inf = np.isinf(v)
    if spec.is_integer:
        c = np.where(inf, codes[-1], c)
        if spec.kind == "uint":
            return np.where(nan | neg, 0, c)
        return np.where(nan, 0, np.where(neg, -c, c))
    if spec.kind == "exp":
        c = np.where(inf, codes[-1], c)
        return np.where(nan | neg | (a == 0), spec.nan_code, c)
    c = np.where(inf, spec.inf_code if spec.has_inf else codes[-1], c)
    sign = neg & ((c != 0) | spec.has_negative_zero)
    c = np.where(sign, c | spec.sign_mask, c)
    if spec.special == "fo":
        nan_c = spec.sign_mask
    elif spec.special == "fnuz":
        nan_c = spec.nan_code
    else:
        nan_c = np.where(neg, spec.nan_code | spec.sign_mask, spec.nan_code)
    return np.where(nan, nan_c, c)


def all_inputs(dt) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(dt).astype(np.float64)


# ----------------------------------------------------------------------------- exhaustive


@pytest.mark.parametrize("spec", SMALL, ids=lambda s: s.code)
def test_round_codes_exhaustive_small_specs(spec):
    rng = np.random.default_rng(spec.bits * 131 + spec.exp_bits)
    with np.errstate(invalid="ignore", over="ignore"):
        inputs = np.concatenate([all_inputs(np.float16), all_inputs(BF16)])
    for fixed in ((False, True) if spec.kind == "int" else (False,)):
        for mode in MODES:
            r = rng.integers(0, 1 << 32, inputs.shape, dtype=np.int64) \
                if mode == "stochastic" else None
            got = R.round_codes(inputs, spec, mode, r, fixed=fixed)
            want = neighbour_cast(inputs, spec, mode, r, fixed=fixed)
            bad = np.nonzero(got != want)[0]
            assert bad.size == 0, (
                f"{spec.code} {mode} fixed={fixed}: {bad.size} mismatches, e.g. "
                f"{inputs[bad[0]]!r}: oracle {got[bad[0]]:#x}, independent {want[bad[0]]:#x}")


@pytest.mark.parametrize("rbits", [0, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF])
def test_stochastic_extreme_random_bits(rbits):
    """r = 0 truncates; r = 2^32 - 1 rounds every inexact value up; r = 2^31 is nearest with
    ties up."""
    spec = numbers.number("e4m3fn")
    x = all_inputs(np.float16)
    x = x[np.isfinite(x) & (np.abs(x) < 448)]
    r = np.full(x.shape, rbits, np.int64)
    got = R.round_codes(x, spec, "stochastic", r)
    if rbits == 0:
        assert np.array_equal(got, R.round_codes(x, spec, "zero"))
    elif rbits == 0x80000000:
        assert np.array_equal(got, R.round_codes(x, spec, "nearest"))
    assert np.array_equal(got, neighbour_cast(x, spec, "stochastic", r))


def test_matches_ml_dtypes_in_range():
    """An unscaled 'even' cast to an MLIR type is ml_dtypes' conversion wherever the value
    does not overflow (casts saturate where converts may not)."""
    for code, dt in [("e4m3fn", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2),
                     ("e4m3", ml_dtypes.float8_e4m3), ("e3m4", ml_dtypes.float8_e3m4),
                     ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz),
                     ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
                     ("e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz),
                     ("e3m2fo", ml_dtypes.float6_e3m2fn), ("e2m3fo", ml_dtypes.float6_e2m3fn),
                     ("e2m1fo", ml_dtypes.float4_e2m1fn), ("e8m0", ml_dtypes.float8_e8m0fnu)]:
        spec = numbers.number(code)
        for src in (np.float16, BF16):
            with np.errstate(invalid="ignore", over="ignore"):
                x = all_inputs(src)
                ok = np.isfinite(x) & (np.abs(x) <= spec.max)
                if spec.kind == "exp":  # 10.2: zero, negatives and f32 subnormals differ
                    ok &= x >= 2.0 ** -126
                x = x[ok]
                want = x.astype(np.float32).astype(dt).view(np.uint8) & ((1 << spec.bits) - 1)
            got = R.round_codes(x, spec, "even")
            assert np.array_equal(got, want.astype(np.int64)), (code, src)


@given(st.sampled_from(["e5m6", "e6m9", "e8m7", "e5m10", "e8m23", "e7m12fn", "e6m9fnuz",
                        "e5m8fo", "e8m20b130", "int16", "int32", "uint16", "uint32", "e8m0"]),
       st.sampled_from(MODES), st.floats(width=32, allow_nan=True, allow_infinity=True),
       st.integers(0, (1 << 32) - 1), st.booleans())
@settings(max_examples=800, deadline=None)
def test_round_codes_wide_specs_property(code, mode, value, r, fixed):
    """Wider specs: the oracle against a one-value fractions formula of section 10.2."""
    spec = numbers.number(code)
    fixed = fixed and spec.kind == "int"
    got = int(R.round_codes(np.array([value]), spec, mode,
                            np.array([r]) if mode == "stochastic" else None, fixed=fixed)[0])
    assert got == fraction_cast(value, spec, mode, r, fixed)


def fraction_cast(value: float, spec: NumberSpec, mode: str, r: int, fixed: bool) -> int:
    """Section 10.2 for one value, with exact rationals: q, t, R(t), saturation, encoding."""
    if math.isnan(value):
        if spec.is_integer:
            return 0
        if spec.kind == "exp" or spec.special == "fnuz":
            return spec.nan_code
        if spec.special == "fo":
            return spec.sign_mask
        return spec.nan_code | (spec.sign_mask if math.copysign(1, value) < 0 else 0)
    neg = math.copysign(1, value) < 0
    if spec.kind == "exp" and (neg or value == 0):
        return spec.nan_code
    if spec.kind == "uint" and neg:
        return 0
    if math.isinf(value):
        if spec.kind == "int":
            return -spec.max_code if neg else spec.max_code
        mag = spec.inf_code if spec.has_inf else spec.max_code
        return mag | (spec.sign_mask if neg and spec.kind == "float" else 0)
    a = abs(F(value))

    def exponent(v: F, lowest: int) -> int:  # the largest e >= lowest with 2^e <= v
        e = lowest
        while F(2) ** (e + 1) <= v:
            e += 1
        return e

    if spec.is_integer:
        q = F(2) ** -(spec.bits - 2) if fixed else F(1)
    elif spec.kind == "exp":
        if a < F(2) ** spec.emin:
            return 0  # below range: the smallest value
        q = F(2) ** exponent(a, spec.emin)
    else:
        q = F(2) ** (exponent(a, spec.emin) - spec.man_bits)
    t = a / q
    T = math.floor(t)
    frac = t - T
    n = {"zero": T, "nearest": T + (frac >= F(1, 2)), "half_down": T + (frac > F(1, 2)),
         "even": T + (frac > F(1, 2) or (frac == F(1, 2) and T % 2 == 1)),
         "stochastic": math.floor(t + F(r, 2 ** 32))}[mode]
    top = spec.scaled_max_exact if fixed else spec.max_exact
    v = min(n * q, top)
    if spec.is_integer:
        k = int(v / q)
        return -k if neg else k
    if spec.kind == "exp":
        return exponent(v, spec.emin) + spec.bias
    if v < F(2) ** spec.emin:  # subnormal (or zero): m units of the subnormal spacing
        code = int(v / F(2) ** (spec.emin - spec.man_bits))
    else:
        e = exponent(v, spec.emin)
        m = v / F(2) ** (e - spec.man_bits) - 2 ** spec.man_bits
        code = ((e + spec.bias) << spec.man_bits) | int(m)
    if neg and (code != 0 or spec.has_negative_zero):
        code |= spec.sign_mask
    return code


# ----------------------------------------------------------------------------- scaled casts


def _f32(v) -> float:
    return float(np.float32(v))


def independent_pow2(x: np.ndarray, spec: NumberSpec, tile: int, mode: str, scalemode: str,
                     r=None):
    """1D tiles along the last axis, exponent (e8m0) scales: E per tile with fractions."""
    e8m0 = numbers.number("e8m0")
    xs = x.reshape(-1, tile).astype(np.float64)
    rs = None if r is None else np.asarray(r).reshape(-1, tile)
    fixed = spec.kind == "int"
    mx = spec.scaled_max_exact
    emax = spec.scaled_emax
    codes, scales, values = [], [], []
    for i, row in enumerate(xs):
        if not np.all(np.isfinite(row)):
            codes.append(np.zeros(tile, np.int64))
            scales.append(0xFF)
            values.append(np.full(tile, np.nan))
            continue
        amax = F(float(np.max(np.abs(row))))
        if amax == 0:
            E = -127
        else:
            fl = math.frexp(float(amax))[1] - 1
            if scalemode == "max":
                E = fl - emax
            elif scalemode == "midmax":
                E = fl - emax
                if amax / F(2) ** E >= (mx + F(2) ** (emax + 1)) / 2:
                    E += 1
            elif scalemode == "rceil":
                q = F(_f32(np.float32(float(amax)) / np.float32(float(mx))))
                if q == 0:
                    E = -127
                else:
                    E = math.frexp(float(q))[1] - 1
                    if F(2) ** E < q:
                        E += 1
            else:
                v = amax / F(2) ** emax
                if v >= F(2) ** -126:
                    fv = math.frexp(float(v))[1] - 1
                    E = fv + (v / F(2) ** fv >= F(3, 2))
                else:
                    E = -126 if v > F(2) ** -127 else -127
            E = max(-127, min(127, E))
        v = np.ldexp(row, -E)
        c = neighbour_cast(v, spec, mode, None if rs is None else rs[i], fixed=fixed)
        codes.append(c)
        scales.append(E + 127)
        dec = cast_reference._decode(c, spec, fixed=fixed)
        with np.errstate(over="ignore"):
            values.append(np.ldexp(dec, E).astype(np.float32).astype(np.float64))
    return (np.concatenate(codes).reshape(x.shape), np.array(scales).reshape(x.shape[:-1] + (-1,)),
            np.concatenate(values).reshape(x.shape))


def _tensor(rng, shape, *, specials=True) -> np.ndarray:
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-30, 30, shape[:-1] + (1,)))
    x = x.astype(np.float32)
    if specials:
        x.flat[3] = 0.0
        x.flat[5] = -0.0
        x.flat[7] = np.float32(1e-40)  # an f32 subnormal
        x.reshape(-1, shape[-1])[1, :] = 0.0  # an all-zero row
        x.reshape(-1, shape[-1])[2, 4] = np.nan
        x.reshape(-1, shape[-1])[3, 9] = -np.inf
        x.reshape(-1, shape[-1])[4, :] *= np.float32(2.0 ** -120)  # a tiny row
    return x


@pytest.mark.parametrize("code", ["e4m3fn", "e5m2", "e2m1fo", "e3m2fo", "e5m6", "e3m4",
                                  "e4m3fnuz", "e4m3b11fnuz", "int8", "int4", "e2m1fn"])
@pytest.mark.parametrize("scalemode", ["max", "midmax", "rceil", "nearest"])
def test_exponent_scaled_cast(code, scalemode):
    rng = np.random.default_rng(7)
    x = _tensor(rng, (6, 64))
    spec = numbers.number(code)
    for mode in MODES:
        r = rng.integers(0, 1 << 32, x.shape, dtype=np.uint32) if mode == "stochastic" else None
        enc = R.encode(x, code, "e8m0_t32", mode, scalemode, r)
        codes, scales, values = independent_pow2(x, spec, 32, mode, scalemode, r)
        got_codes = cast_reference._load(enc.codes, spec, "codes")
        assert np.array_equal(got_codes, codes & ((1 << spec.bits) - 1)
                              if not spec.is_integer else codes), (code, scalemode, mode)
        assert np.array_equal(R.bits(enc.scales), scales.astype(np.uint8))
        v = R.cast(x, code, "e8m0_t32", mode, scalemode, r)
        assert np.array_equal(v.astype(np.float64), values, equal_nan=True)
        d = R.decode(enc, code, "e8m0_t32")
        assert np.array_equal(d, v, equal_nan=True)


def test_midmax_rule():
    """midmax rounds the scale up when amax * 2^-E reaches (max + 2^(emax+1)) / 2: for e4m3fn
    that is 480, so a block whose maximum is 480 * 2^k gets scale 2^(k+1) and element 240."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 480.0
    x[0, 1] = 479.0
    enc = R.encode(x, "e4m3fn", "e8m0_t32", scalemode="midmax")
    assert int(R.bits(enc.scales)[0, 0]) == 127 + 1
    assert float(enc.codes[0, 0]) == 240.0 and float(enc.codes[0, 1]) == 240.0  # 239.5 -> even
    max_mode = R.encode(x, "e4m3fn", "e8m0_t32", scalemode="max")
    assert int(R.bits(max_mode.scales)[0, 0]) == 127 and float(max_mode.codes[0, 0]) == 448.0
    x[0, 0] = 479.0
    assert int(R.bits(R.encode(x, "e4m3fn", "e8m0_t32", scalemode="midmax").scales)[0, 0]) == 127


def test_ocp_formats_as_datatypes_give_the_named_bits():
    """Every section 1 format through the general model equals mxlower.reference.quantize /
    dequantize (scale modes floor = max, rceil, nearest), f32/bf16/f16, special values."""
    rng = np.random.default_rng(3)
    for trial in range(4):
        x = _tensor(rng, (8, 64))
        if trial == 3:
            x = (x * np.float32(2.0 ** -100)).astype(np.float32)
        for wide in (np.float32, BF16, np.float16):
            with np.errstate(over="ignore"):
                xw = x.astype(wide)
            for name, f in FORMATS.items():
                modes = ("floor",) if f.is_nvfp4 else ("floor", "rceil", "nearest")
                for m in modes:
                    e, s = R.quantize(xw, name, scale_mode=m)
                    sm = "max" if m == "floor" else m
                    for dt in (name, numbers.datatype(*_codes_of(name))):
                        enc = R.encode(xw, dt, scalemode=sm)
                        assert np.array_equal(R.bits(e), R.bits(enc.codes)), (name, m, wide)
                        assert np.array_equal(R.bits(s), R.bits(enc.scales)), (name, m, wide)
                        v = R.cast(xw, dt, scalemode=sm)
                        d = R.dequantize(e, s, name, dtype=wide)
                        same = R.bits(v) == R.bits(d)
                        nan = np.isnan(v.astype(np.float32)) & np.isnan(d.astype(np.float32))
                        assert np.all(same | nan), (name, m, wide)


def _codes_of(name: str) -> tuple[str, str]:
    """The datatype of a format written as codes, as a researcher would (e2m1fo + e8m0_t32)."""
    return {"mxfp8_e4m3": ("e4m3fn", "e8m0_t32"), "mxfp8_e5m2": ("e5m2", "e8m0_t32"),
            "mxfp6_e3m2": ("e3m2fo", "e8m0_t32"), "mxfp6_e2m3": ("e2m3fo", "e8m0_t32"),
            "mxfp4_e2m1": ("e2m1fo", "e8m0_t32"), "mxint8": ("int8", "e8m0_t32"),
            "nvfp4": ("e2m1fo", "e4m3fn_t16")}[name]


def independent_float_scale(x: np.ndarray, spec: NumberSpec, sspec: NumberSpec, tile: int,
                            mode: str, r=None):
    """Float scales, 1D tiles along the last axis, one tile at a time with scalar f32 ops."""
    xs = x.reshape(-1, tile)
    rs = None if r is None else np.asarray(r).reshape(-1, tile)
    codes, scodes, values = [], [], []
    for i, row in enumerate(xs):
        if not np.all(np.isfinite(row)):
            codes.append(np.zeros(tile, np.int64))
            scodes.append(sspec.nan_code)
            values.append(np.full(tile, np.nan))
            continue
        amax = float(np.max(np.abs(row.astype(np.float64))))
        q = np.float32(F(amax) / F(spec.max_exact))  # one correctly rounded f32 division
        sc = (int(neighbour_cast(np.array([float(q)]), sspec, "even")[0]) if sspec.bits <= 16
              else fraction_cast(float(q), sspec, "even", 0, False))  # too many codes to list
        s = np.float32(float(sspec.value_of(sc)))
        scodes.append(sc)
        if s == 0:
            codes.append(np.zeros(tile, np.int64))
            values.append(np.zeros(tile))
            continue
        v = np.array([np.float32(xi) / s for xi in row], np.float32)
        c = neighbour_cast(v.astype(np.float64), spec, mode, None if rs is None else rs[i])
        codes.append(c)
        dec = cast_reference._decode(c, spec).astype(np.float32)
        values.append(np.array([np.float32(di) * s for di in dec], np.float32)
                      .astype(np.float64))
    return (np.concatenate(codes).reshape(x.shape), np.array(scodes),
            np.concatenate(values).reshape(x.shape))


@pytest.mark.parametrize("code,scale_code", [
    ("e2m1fo", "e4m3fn"), ("e4m3fn", "float32"), ("e5m6", "bfloat16"), ("int8", "float32"),
    ("int4", "float16"), ("e3m2fo", "e5m2"), ("e4m3fnuz", "e4m3fnuz"), ("e2m1fo", "e8m7")])
def test_float_scaled_cast(code, scale_code):
    rng = np.random.default_rng(11)
    x = _tensor(rng, (6, 32))
    spec, sspec = numbers.number(code), numbers.number(scale_code)
    for mode in MODES:
        r = rng.integers(0, 1 << 32, x.shape, dtype=np.uint32) if mode == "stochastic" else None
        enc = R.encode(x, code, f"{scale_code}_t16", mode, "max", r)
        codes, scodes, values = independent_float_scale(x, spec, sspec, 16, mode, r)
        got = cast_reference._load(enc.codes, spec, "codes")
        want = codes if spec.is_integer else codes & ((1 << spec.bits) - 1)
        assert np.array_equal(got, want), (code, scale_code, mode)
        assert np.array_equal(cast_reference._load(enc.scales, sspec, "scales").ravel(),
                              scodes & ((1 << sspec.bits) - 1))
        v = R.cast(x, code, f"{scale_code}_t16", mode, "max", r)
        assert np.array_equal(v.astype(np.float64), values, equal_nan=True)


def test_float_scale_of_zero_tile_is_plus_zero():
    x = np.zeros((1, 16), np.float32)
    x[0, 0] = -1e-30  # amax / 6 rounds to 0 in e4m3fn
    enc = R.encode(x, "nvfp4")
    assert int(R.bits(enc.scales)[0, 0]) == 0
    assert np.all(R.bits(enc.codes) == 0)
    assert np.all(R.bits(R.cast(x, "nvfp4")) == 0)  # +0, not -0


def test_asymmetric_integer_zero_point():
    x = np.array([[-1.0, 0.5, 2.0, 3.0]], np.float32)
    enc = R.encode(x, "uint8", "float32_uint8_t0")
    s = np.float32(np.float32(3.0) - np.float32(-1.0)) / np.float32(255)
    assert float(enc.scales[0, 0]) == float(s)
    z = int(np.rint(np.float32(1.0) / s))
    assert int(enc.zero_points[0, 0]) == z
    want = np.clip(np.rint(x / s) + z, 0, 255)
    assert np.array_equal(enc.codes.astype(np.int64), want.astype(np.int64))
    v = R.cast(x, "uint8", "float32_uint8_t0")
    assert np.array_equal(v, ((want - z).astype(np.float32) * s).astype(np.float32))
    # positive data: the range is widened to hold 0, so z = 0
    y = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    e2 = R.encode(y, "uint4", "float32_uint8")
    assert int(e2.zero_points[0, 0]) == 0 and float(e2.scales[0, 0]) == float(
        np.float32(4.0) / np.float32(15))
    # an all-zero tile: s = 0, code z = 0, value 0
    z0 = R.encode(np.zeros((2, 4), np.float32), "uint8", "float32_uint8_t0")
    assert np.all(z0.codes == 0) and np.all(z0.zero_points == 0)
    assert np.all(R.cast(np.zeros((2, 4), np.float32), "uint8", "float32_uint8_t0") == 0)


def test_asymmetric_float_zero_point():
    x = np.array([[1.0, 1.5, 2.0, 5.0]], np.float32)
    enc = R.encode(x, "uint4", "float32_float16_t0")
    s = np.float32(np.float32(5.0) - np.float32(1.0)) / np.float32(15)
    assert float(enc.scales[0, 0]) == float(s)
    assert float(enc.zero_points[0, 0]) == 1.0
    want = np.clip(np.rint(((x - np.float32(1.0)).astype(np.float32) / s).astype(np.float32)),
                   0, 15)
    assert np.array_equal(enc.codes.astype(np.int64), want.astype(np.int64))
    v = R.cast(x, "uint4", "float32_float16_t0")
    assert np.array_equal(v, ((want.astype(np.float32) * s).astype(np.float32)
                              + np.float32(1.0)).astype(np.float32))
    const = R.encode(np.full((1, 4), 3.0, np.float32), "uint4", "float32_float16")
    assert np.all(const.codes == 0) and float(const.zero_points[0, 0]) == 3.0
    assert np.all(R.cast(np.full((1, 4), 3.0, np.float32), "uint4", "float32_float16") == 3.0)


def test_nonfinite_tiles():
    x = np.ones((3, 8), np.float32)
    x[0, 2] = np.nan
    x[1, 5] = np.inf
    for dt in ("e4m3fn:e8m0_t8", "e5m6:e8m0_t8", "e4m3fn:float32_t8", "uint8:float32_uint8_t8",
               "uint4:float32_float16_t8"):
        enc = R.encode(x, dt)
        v = R.cast(x, dt)
        assert np.all(np.isnan(v[:2])) and np.all(np.isfinite(v[2])), dt
        assert np.all(R.bits(enc.codes[:2]) == 0)
        if enc.zero_points is not None:
            assert np.all(np.asarray(enc.zero_points)[:2] == 0)


@pytest.mark.parametrize("scale_code,shape", [
    ("e8m0", (4, 8)), ("e8m0_t0", (4, 8)), ("e8m0_t0d0", (4, 8)), ("e8m0_t4d0", (8, 3)),
    ("e8m0_t4x2", (8, 6)), ("e8m0_t2x4d0d1", (4, 8)), ("e8m0_t4x2d1d0", (4, 8)),
    ("e8m0_t2x2d0d2", (4, 3, 6)), ("float32_t4x4", (8, 8))])
def test_tile_kinds(scale_code, shape):
    """Every tile kind: the scales have the documented shape, and each tile is cast as the
    same data would be as one 1D tensor-scaled block."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))).astype(np.float32)
    s = numbers.scale(scale_code)
    enc = R.encode(x, "e4m3fn", scale_code)
    assert enc.scales.shape == s.scales_shape(shape)
    v = R.cast(x, "e4m3fn", scale_code)
    t = s.tile_shape(shape)
    tensor_scale = scale_code.split("_t")[0]
    for idx in np.ndindex(*s.scales_shape(shape)):
        sl = tuple(slice(i * k, (i + 1) * k) for i, k in zip(idx, t))
        block = x[sl].reshape(1, -1)
        want = R.cast(block, "e4m3fn", tensor_scale).reshape(x[sl].shape)
        assert np.array_equal(v[sl], want), (scale_code, idx)


def test_stochastic_rounding_is_unbiased():
    """E[cast(x)] = x: the mean of N stochastic casts lies within 5 standard errors."""
    rng = np.random.default_rng(1)
    n = 20000
    for code, scale_code in [("e2m1fo", None), ("e4m3fn", None), ("int4", "e8m0_t32"),
                             ("e3m2fo", "e8m0_t32"), ("e5m6", None), ("e2m1fo", "e4m3fn_t16")]:
        base = rng.uniform(0.1, 3.0, 32).astype(np.float32)
        base[0] = 2.9  # an element at the block max keeps the scale fixed
        x = np.tile(base, (n, 1))
        r = rng.integers(0, 1 << 32, x.shape, dtype=np.uint32)
        v = R.cast(x, code, scale_code, "stochastic", rbits=r).astype(np.float64)
        mean = v.mean(axis=0)
        lo = R.cast(base[None], code, scale_code, "zero")[0].astype(np.float64)
        spacing = np.maximum(np.abs(R.cast(base[None], code, scale_code, "stochastic",
                                           rbits=np.full((1, 32), 0xFFFFFFFF, np.uint32))[0]
                                    .astype(np.float64) - lo), 1e-30)
        se = spacing / 2 / math.sqrt(n)
        assert np.all(np.abs(mean - base) <= 5 * se + 1e-12), (code, scale_code)
        # and it is not just nearest rounding
        assert not np.array_equal(v[0], v[1]) or not np.array_equal(v[1], v[2])


# ----------------------------------------------------------------------------- sparsity


def brute_sparse(x: np.ndarray, n: int, m: int) -> np.ndarray:
    out = np.zeros_like(x)
    flat = x.reshape(-1, n)
    res = out.reshape(-1, n)
    for i, g in enumerate(flat):
        def key(j, g=g):
            v = float(g[j])
            return (0 if math.isnan(v) else 1, -abs(v) if not math.isnan(v) else 0, j)
        for j in sorted(range(n), key=key)[:m]:
            res[i, j] = g[j]
    return out


def test_sparse_examples():
    x = np.array([[1.0, -3.0, 2.0, 0.5, 0.0, 0.0, -0.0, 7.0]], np.float32)
    y = R.sparse(x, 4, 2)
    assert y.tolist() == [[0.0, -3.0, 2.0, 0.0, 0.0, 0.0, 0.0, 7.0]]
    # ties: the lower index wins; NaN is the largest; dropped values are +0
    t = np.array([[2.0, -2.0, 2.0, np.nan]], np.float32)
    assert np.array_equal(R.sparse(t, 4, 2), np.array([[2.0, 0, 0, np.nan]], np.float32),
                          equal_nan=True)
    z = R.sparse(np.array([[-1.0, -2.0]], np.float32), 2, 1)
    assert R.bits(z)[0, 0] == 0  # +0, not -0
    assert np.array_equal(R.sparse(x, 4, 4), x)


@pytest.mark.parametrize("n,m,dim", [(4, 2, -1), (8, 1, -1), (2, 1, 0), (16, 5, 1), (4, 3, 0)])
def test_sparse_random(n, m, dim):
    rng = np.random.default_rng(n * 10 + m)
    x = rng.integers(-4, 5, (16, 32)).astype(np.float32)  # many ties
    x[rng.random(x.shape) < 0.02] = np.nan
    y = R.sparse(x, n, m, dim)
    moved = np.moveaxis(x, dim, -1)
    want = np.moveaxis(brute_sparse(np.ascontiguousarray(moved), n, m), -1, dim)
    assert np.array_equal(y, want, equal_nan=True)
    assert y.dtype == x.dtype
    assert R.sparse(x.astype(BF16), n, m, dim).dtype == BF16


def test_sparse_errors():
    x = np.ones((4, 6), np.float32)
    for args, msg in [((4, 2), "does not divide dimension 1 of size 6"), ((3, 0), "0 < m <= n"),
                      ((3, 4), "0 < m <= n"), ((3, 1, 2), "out of range"),
                      ((3.0, 1), "n must be an int")]:
        with pytest.raises(ValueError, match=msg):
            R.sparse(x, *args)
    with pytest.raises(ValueError, match="float array"):
        R.sparse(np.ones(4, np.int32), 2, 1)


# ----------------------------------------------------------------------------- errors


def test_cast_argument_errors():
    x = np.ones((2, 32), np.float32)
    for kwargs, msg in [
            (dict(number="e9m9"), "exponent bits"),
            (dict(number="e4m3fn", scale="e8m0_t3"), "power of two"),
            (dict(number="e4m3fn", scale="e8m0_t64"), "does not divide"),
            (dict(number="e4m3fn", roundmode="up"), "unknown roundmode"),
            (dict(number="e4m3fn", scalemode="ceil"), "unknown scalemode"),
            (dict(number="e4m3fn", roundmode="stochastic"), "needs rbits"),
            (dict(number="e4m3fn", rbits=np.zeros((2, 32), np.uint32)), "only used with"),
            (dict(number="e4m3fn", roundmode="stochastic",
                  rbits=np.zeros((2, 32), np.int32)), "must be uint32"),
            (dict(number="e4m3fn", roundmode="stochastic",
                  rbits=np.zeros((2, 31), np.uint32)), "input's shape"),
            (dict(number="e4m3fn", scale="float32_t32", scalemode="rceil"),
             "applies to exponent scales"),
            (dict(number="mxfp8_e4m3", scale="e8m0"), "has its own scale"),
            (dict(number=numbers.datatype("e4m3fn", "e8m0"), scale="e8m0"),
             "has its own scale"),
            (dict(number="uint8", scale="e8m0_t32"), "asymmetric")]:
        with pytest.raises(ValueError, match=msg):
            R.cast(x, **kwargs)
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        R.cast(np.ones(4, np.float64), "e4m3fn")


def test_decode_argument_errors():
    x = np.ones((2, 32), np.float32)
    enc = R.encode(x, "mxfp8_e4m3")
    with pytest.raises(ValueError, match="needs scales of shape"):
        R.decode(enc.codes, "mxfp8_e4m3")
    with pytest.raises(ValueError, match=r"must have shape \(2, 1\)"):
        R.decode(enc.codes, "mxfp8_e4m3", scales=np.ones((2, 2), ml_dtypes.float8_e8m0fnu))
    with pytest.raises(ValueError, match="must have dtype"):
        R.decode(enc.codes.view(np.uint8), "mxfp8_e4m3", scales=enc.scales)
    with pytest.raises(ValueError, match="unscaled"):
        R.decode(enc.codes, "e4m3fn", scales=enc.scales)
    with pytest.raises(ValueError, match="takes zero points"):
        R.decode(R.encode(x, "uint8:float32_uint8_t0").codes, "uint8:float32_uint8_t0",
                 scales=np.ones((2, 1), np.float32))
    with pytest.raises(ValueError, match="dtype must be"):
        R.decode(enc, "mxfp8_e4m3", dtype=np.float64)
    assert np.array_equal(R.decode(enc, "mxfp8_e4m3", dtype=BF16), R.cast(x.astype(BF16),
                                                                          "mxfp8_e4m3"))


def test_rceil_when_amax_over_max_overflows_f32():
    # e2m1b5 (ieee) has max 0.1875: amax / max is beyond f32's range, the f32 quotient +Inf,
    # and rceil's E = ceil(log2(+Inf)) clamps to the scale's emax (code 254), as "max" does
    x = np.zeros(32, np.float32)
    x[0] = 3e38
    assert numbers.number("e2m1b5").max == 0.1875
    for mode in ("rceil", "max", "midmax", "nearest"):
        enc = R.encode(x, "e2m1b5", "e8m0_t32", scalemode=mode)
        assert enc.scales.view(np.uint8).tolist() == [254], mode
        assert enc.codes[0] == 0b101 and not enc.codes[1:].any(), mode  # saturated to max


def test_zero_point_quotients_beyond_int64_saturate():
    # the f16 scale saturates at 65504, so 1e30 / s ~ 1.5e25 > 2^63: code 255, not a wrapped 0
    for sc in ("float16_uint8_t2", "float16_float32_t2"):
        enc = R.encode(np.array([0, 1e30, -1e30, 0], np.float32), "uint8", sc)
        assert enc.scales.tolist() == [65504, 65504], sc
        assert enc.codes[1] == 255 and enc.codes[2] == 0, (sc, enc)


# ----------------------------------------------------------------------------- two levels

TWO_LEVEL = [("e2m1fo", "e4m3fn_t16_gf32"), ("e4m3fn", "e8m0_t32_gf32"),
             ("int8", "e8m0_t0_gf32"), ("e5m6", "e4m3fn_t8x8_gf32")]


@pytest.mark.parametrize("number,scale", TWO_LEVEL)
def test_two_level_is_the_tile_level_of_x_over_g(number, scale):
    """A two-level datatype with tensor scale g: the codes and scales of its tile level (the
    same spec without '_gf32') applied to y = x / g, one f32 division per value (a finite x
    whose y overflows makes its tile NaN); values = the tile level's value times g, in f32,
    rounded once to the output type; no tensor_scale = g of 1."""
    rng = np.random.default_rng(11)
    one = scale[:scale.rindex("_g")]
    for g in (np.float32(0.0123), np.float32(-3.0), np.float32(2.0 ** -140), np.float32(1e30)):
        for wide in (np.float32, BF16, np.float16):
            with np.errstate(over="ignore"):
                x = _tensor(rng, (16, 64)).astype(wide)
            x32 = x.astype(np.float32)
            with np.errstate(over="ignore", under="ignore"):
                y = np.array([np.float32(v) / g for v in x32.ravel()], np.float32).reshape(x.shape)
            enc = R.encode(x, number, scale, tensor_scale=g)
            want = R.encode(y, number, one)
            assert np.array_equal(R.bits(enc.codes), R.bits(want.codes)), (number, scale, g)
            assert np.array_equal(R.bits(enc.scales), R.bits(want.scales)), (number, scale, g)
            got = R.decode(enc, number, scale, tensor_scale=g, dtype=wide)
            with np.errstate(over="ignore", invalid="ignore"):
                tile = R.decode(want, number, one, dtype=np.float32)
                ref = np.array([np.float32(v) * g for v in tile.ravel()],
                               np.float32).reshape(x.shape).astype(wide)
            same = (R.bits(got) == R.bits(ref)) | (np.isnan(got.astype(np.float32))
                                                     & np.isnan(ref.astype(np.float32)))
            assert same.all(), (number, scale, g, wide)
            v = R.cast(x, number, scale, tensor_scale=g)
            assert v.dtype == x.dtype
            assert np.array_equal(R.bits(v), R.bits(got)) or np.array_equal(
                np.isnan(v.astype(np.float32)), np.isnan(got.astype(np.float32)))
        x = _tensor(rng, (16, 64))
        plain = R.encode(x, number, one)
        none = R.encode(x, number, scale)  # no tensor scale given: g = 1
        assert np.array_equal(R.bits(plain.codes), R.bits(none.codes))
        assert np.array_equal(R.bits(plain.scales), R.bits(none.scales))


def test_two_level_overflowing_quotient_makes_a_nan_tile():
    x = np.ones((1, 32), np.float32)
    x[0, 5] = np.float32(3e38)  # finite, but x / g overflows
    enc = R.encode(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=np.float32(0.5))
    assert int(R.bits(enc.scales)[0, 0]) == 0x7F and int(R.bits(enc.scales)[0, 1]) != 0x7F
    assert not R.bits(enc.codes)[0, :16].any()
    v = R.decode(enc, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=np.float32(0.5))
    assert np.isnan(v[0, :16]).all() and np.isfinite(v[0, 16:]).all()


def test_nvfp4_global_scale_is_the_two_level_datatype():
    """Section 4 is two-level scaling: quantize / dequantize of nvfp4 with a global scale
    equal encode / decode of e2m1fo:e4m3fn_t16_gf32, bit for bit."""
    rng = np.random.default_rng(12)
    x = _tensor(rng, (8, 64))
    for g in (0.003, -7.5, 2.0 ** -130):
        e, s = R.quantize(x, "nvfp4", global_scale=g)
        enc = R.encode(x, "e2m1fo:e4m3fn_t16_gf32", tensor_scale=g)
        assert np.array_equal(R.bits(e), R.bits(enc.codes))
        assert np.array_equal(R.bits(s), R.bits(enc.scales))
        for out in (np.float32, BF16, np.float16):
            d = R.dequantize(e, s, "nvfp4", global_scale=g, dtype=out)
            v = R.decode(enc, "e2m1fo:e4m3fn_t16_gf32", tensor_scale=g, dtype=out)
            nan = np.isnan(d.astype(np.float32)) & np.isnan(v.astype(np.float32))
            assert ((R.bits(d) == R.bits(v)) | nan).all()


def test_tensor_scale_errors():
    x = np.ones((2, 32), np.float32)
    with pytest.raises(ValueError, match="encode: mxfp8_e4m3 has no tensor scale level"):
        R.encode(x, "mxfp8_e4m3", tensor_scale=2.0)
    with pytest.raises(ValueError, match="cast: e5m2 has no tensor scale level"):
        R.cast(x, "e5m2", tensor_scale=2.0)
    enc = R.encode(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=2.0)
    with pytest.raises(ValueError, match="decode: e2m1fo:e4m3fn_t16 has no tensor scale"):
        R.decode(enc, "e2m1fo", "e4m3fn_t16", tensor_scale=2.0)
    with pytest.raises(ValueError, match="decode: f8E4M3FN has no tensor scale"):
        R.decode(R.encode(x, "f8E4M3FN").codes, "f8E4M3FN", tensor_scale=2.0)
    for bad in (0.0, np.inf, np.nan, 1e39):
        with pytest.raises(ValueError, match="tensor_scale must be a finite non-zero f32"):
            R.encode(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=bad)
    with pytest.raises(TypeError, match="tensor_scale must be a number"):
        R.cast(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale="two")
    with pytest.raises(ValueError, match="tensor_scale must be a finite"):
        R.encode(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=np.ones(2, np.float32))
