"""Lookup-table number specs (docs/semantics.md section 10.7): the grammar and its errors, NF4,
and the oracle's rounding, encode, decode and cast against an independent formulation written
here in Fractions.  The layers below the oracle are checked against it in test_lut_codec.py
(the codec), test_lut_ops.py (the mx ops, StableHLO and LLVM), test_lut_jax.py and
test_ffi_cast.py (the fused CPU cast kernel)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from mxlower import numbers
from mxlower import reference as R
from mxlower.numbers import NF4_VALUES, SpecError, lut_spec, number

MODES = ("even", "nearest", "zero", "half_down")

#: NF4 as QLoRA's appendix E / bitsandbytes print it (each exactly an f32)
QLORA_NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
             -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
             0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
             0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
             0.7229568362236023, 1.0]

TABLES = {
    "nf4": number("nf4"),
    "uniform3": lut_spec([-4, -3, -2, -1, 0, 1, 2, 3], name="uniform3"),  # asymmetric
    "nozero": lut_spec([-1.5, -0.5, 0.5, 1.5]),  # both signs, no 0: the straddle rule
    "skew": lut_spec([-0.25, 3.0]),  # 1 bit, asymmetric straddle
    "positive": lut_spec([0.5, 1, 2, 8]),
    "negative": lut_spec([-8, -2, -1, -0.125]),
}


# ---------------------------------------------------------------- an independent model


def _ref_code(x: float, table, mode: str, r: int = 0) -> int:
    """Section 10.7 by its words, in Fractions, one value at a time."""
    t = [Fraction(v) for v in table]
    n = len(t)
    if math.isnan(x):
        best = min(abs(v) for v in t)
        return max(i for i, v in enumerate(t) if abs(v) == best)
    if x == math.inf or (math.isfinite(x) and Fraction(x) >= t[-1]):
        return n - 1
    if x == -math.inf or Fraction(x) <= t[0]:
        return 0
    X = Fraction(x)
    if X in t:
        return t.index(X)
    lo = max(i for i in range(n) if t[i] < X)
    hi = lo + 1
    positive = x > 0 or (x == 0 and math.copysign(1, x) > 0)
    if t[lo] >= 0:
        toward, away = lo, hi
    elif t[hi] <= 0:
        toward, away = hi, lo
    else:  # straddles 0: x's own sign is "toward zero"
        toward, away = (hi, lo) if positive else (lo, hi)
    if mode == "zero":
        return toward
    if mode == "stochastic":
        f = abs(X - t[toward]) / (t[hi] - t[lo])
        return away if r + math.floor(f * 2 ** 32) >= 2 ** 32 else toward
    d_lo, d_hi = X - t[lo], t[hi] - X
    if d_lo != d_hi:
        return lo if d_lo < d_hi else hi
    if mode == "even":
        return lo if lo % 2 == 0 else hi
    straddle = t[lo] < 0 < t[hi]
    if mode == "nearest":
        return toward if straddle else away
    return toward  # half_down


def _inputs(spec, rng, n=400) -> np.ndarray:
    """Table values, midpoints, their f32 neighbours, random values, beyond-end values and
    specials: every f32."""
    t = np.array(spec.table, np.float64)
    mids = ((t[:-1] + t[1:]) / 2).astype(np.float32)  # exact when f32 holds it
    span = max(abs(t[0]), abs(t[-1]))
    xs = [t.astype(np.float32), mids, np.nextafter(mids, np.float32(np.inf)),
          np.nextafter(mids, np.float32(-np.inf)),
          rng.uniform(-1.5 * span, 1.5 * span, n).astype(np.float32),
          np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 3 * span, -3 * span,
                    1e-30, -1e-30, 2e-45], np.float32)]
    return np.concatenate(xs)


# ---------------------------------------------------------------- the spec and its grammar


def test_nf4_is_qlora_table():
    s = number("nf4")
    assert s.kind == "lut" and s.is_lut and s.bits == 4 and s.code == "nf4"
    assert list(s.table) == QLORA_NF4 == list(NF4_VALUES)
    assert all(float(np.float32(v)) == v for v in QLORA_NF4)  # as given: exact f32 values
    assert number(s.code) is s and numbers.NF4 is s
    assert lut_spec(QLORA_NF4) is s  # an unnamed predefined table is the predefined spec
    assert (s.max, s.emax, s.min, s.signed, s.max_code) == (1.0, 0, -1.0, True, 15)
    assert s.midmax == 1.5 and s.scaled_emax == 0 and not s.fixed_point
    assert (s.storage, s.dtype, s.mlir) == ("ui8", np.dtype(np.uint8), None)
    assert s.smallest_subnormal == 0.07958029955625534 and s.emin == -4
    assert not (s.has_nan or s.has_inf or s.has_negative_zero or s.is_float or s.is_integer)
    with pytest.raises(SpecError, match="no eps"):
        s.eps
    with pytest.raises(SpecError, match="lookup-table spec; it has no float codec"):
        s.float_type


def test_custom_tables_are_named():
    a = lut_spec([0, 1, 2, 3])
    assert a.code.startswith("lut2_") and len(a.code) == len("lut2_") + 12
    assert lut_spec([0.0, 1.0, 2.0, 3.0]) == a and hash(lut_spec([0, 1, 2, 3])) == hash(a)
    assert lut_spec([0, 1, 2, 4]).code != a.code
    with pytest.raises(SpecError, match="pass the NumberSpec itself"):
        number(a.code)
    b = lut_spec([-2, -1, 0, 1], name="myTable2")
    assert b.code == "myTable2" and b.emax == 1 and b.max == 2 and b.max_code == 0
    assert b.min == -2.0 and b.signed and not lut_spec([0, 1]).signed
    assert lut_spec([-0.0, 1.0]).table == (0.0, 1.0)
    assert numbers.datatype(b, "e8m0_t32").code == "myTable2:e8m0_t32"
    assert numbers.datatype("nf4", "bf16_t64").code == "nf4:e8m7_t64"


@pytest.mark.parametrize("values,message", [
    ([1.0, 0.0], "strictly increasing: values #0 and #1 .* unsorted"),
    ([0.0, 1.0, 1.0, 2.0], "values #1 and #2 .* duplicate"),
    ([0.0, math.inf], "not finite"),
    ([math.nan, 0.0], "not finite"),
    ([0.0, 0.1], r"not exactly an f32 value .* nearest f32 is 0.10000000149011612"),
    ([0.0, Fraction(1, 3)], "not exactly an f32 value"),
    ([0.0, 1e39], "not exactly an f32 value"),
    ([0.0, 10 ** 400], "not finite"),
    ([0.0, 1.0, 2.0], "2\\^K values .* got 3"),
    ([0.0], "got 1"),
    ([], "got 0"),
    (list(range(512)), "at most 256 values"),
    ([0.0, "1"], "not a number"),
    ([False, True], "not a number"),
    ("01", "a sequence of numbers"),
    (3, "a sequence of numbers"),
])
def test_bad_tables(values, message):
    with pytest.raises(SpecError, match=message):
        lut_spec(values)


def test_bad_names_and_uses():
    for name in ("int8", "e4m3fn", "nf4", "bfloat16"):
        with pytest.raises(SpecError, match="already a number spec"):
            lut_spec([0, 1], name=name)
    for name in ("1abc", "a_b", "", "a:b", 7):
        with pytest.raises(SpecError, match="letters and digits"):
            lut_spec([0, 1], name=name)
    assert lut_spec(list(range(256))).bits == 8 and lut_spec([0, 1]).bits == 1
    with pytest.raises(SpecError, match="not nf4"):
        numbers.scale("nf4_t32")
    with pytest.raises(SpecError, match="not the lookup table nf4"):
        numbers.scale("float32_nf4_t0")
    with pytest.raises(SpecError, match="only uint data takes a zero point"):
        numbers.datatype("nf4", "float32_uint8_t0")


# ---------------------------------------------------------------- decode and encode


@pytest.mark.parametrize("name", list(TABLES))
def test_codes_decode_to_their_values_and_back(name):
    s = TABLES[name]
    codes = np.arange(1 << s.bits)
    stored = codes.astype(np.uint8)
    assert R.decode(stored, s).tolist() == list(s.table)
    table = np.array(s.table, np.float32)
    for mode in MODES:
        assert R.encode(table, s, roundmode=mode).codes.tolist() == codes.tolist()
        assert R.cast(table, s, roundmode=mode).tolist() == list(s.table)
    rb = np.random.default_rng(0).integers(0, 2 ** 32, table.shape, dtype=np.uint32)
    assert R.encode(table, s, roundmode="stochastic", rbits=rb).codes.tolist() == \
        codes.tolist()
    with pytest.raises(ValueError, match="dtype uint8"):
        R.decode(codes.astype(np.int32), s)


# ---------------------------------------------------------------- rounding


@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("mode", MODES)
def test_rounding_matches_the_fraction_model(name, mode):
    s = TABLES[name]
    x = _inputs(s, np.random.default_rng(len(name)))
    got = R.round_codes(x.astype(np.float64), s, mode)
    want = [_ref_code(float(v), s.table, mode) for v in x]
    assert got.tolist() == want
    # the cast is the decoded code, in x's type
    assert np.array_equal(R.cast(x, s, roundmode=mode),
                          np.array(s.table, np.float32)[want], equal_nan=True)


@pytest.mark.parametrize("name", list(TABLES))
def test_stochastic_matches_the_fraction_model(name):
    s = TABLES[name]
    rng = np.random.default_rng(7)
    x = _inputs(s, rng)
    r = rng.integers(0, 2 ** 32, x.shape, dtype=np.uint32)
    r[:4] = [0, 1, 2 ** 31, 2 ** 32 - 1]
    got = R.round_codes(x.astype(np.float64), s, "stochastic", r.astype(np.int64))
    assert got.tolist() == [_ref_code(float(v), s.table, "stochastic", int(b))
                            for v, b in zip(x, r)]
    # r = 0 is `zero`
    z = R.round_codes(x.astype(np.float64), s, "stochastic", np.zeros(x.shape, np.int64))
    assert z.tolist() == R.round_codes(x.astype(np.float64), s, "zero").tolist()


def test_ties_per_mode():
    s = number("nf4")
    t = s.table
    # the exact midpoint of two NF4 neighbours (codes 8 and 9: 8 even, away is 9), an f64
    # value as round_codes takes (a scaled value x 2^-E is one)
    m = (Fraction(t[8]) + Fraction(t[9])) / 2
    assert Fraction(float(m)) == m
    x = np.array([float(m)], np.float64)
    assert R.round_codes(x, s, "even").tolist() == [8]
    assert R.round_codes(x, s, "nearest").tolist() == [9]
    assert R.round_codes(x, s, "half_down").tolist() == [8]
    assert R.round_codes(x, s, "zero").tolist() == [8]
    # on the negative side (codes 5 and 6: 6 even, away from zero is 5)
    m = (Fraction(t[5]) + Fraction(t[6])) / 2
    x = np.array([float(m)], np.float64)
    assert Fraction(float(m)) == m
    assert [R.round_codes(x, s, mode).tolist()[0] for mode in MODES] == [6, 5, 6, 6]
    for mode in MODES:  # and the Fraction model agrees on every midpoint, both signs
        mids = [float((Fraction(a) + Fraction(b)) / 2) for a, b in zip(t, t[1:])]
        assert R.round_codes(np.array(mids), s, mode).tolist() == \
            [_ref_code(v, t, mode) for v in mids]
    # the symmetric table without 0: +-0 is a tie between -0.5 and 0.5, decided by its sign
    nz = TABLES["nozero"]
    zeros = np.array([0.0, -0.0])
    assert R.round_codes(zeros, nz, "even").tolist() == [2, 2]  # code 2 (0.5) is even
    for mode in ("nearest", "half_down", "zero"):
        assert R.round_codes(zeros, nz, mode).tolist() == [2, 1], mode


def test_saturation_and_specials():
    s = number("nf4")
    x = np.array([7.0, -7.0, np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-40], np.float32)
    for mode in MODES:
        assert R.encode(x, s, roundmode=mode).codes.tolist() == [15, 0, 15, 0, 7, 7, 7, 7, 7]
    # NaN: the value of smallest magnitude (the positive one of two)
    assert R.round_codes(np.array([np.nan]), TABLES["nozero"]).tolist() == [2]
    assert R.round_codes(np.array([np.nan]), TABLES["positive"]).tolist() == [0]
    assert R.round_codes(np.array([np.nan]), TABLES["negative"]).tolist() == [3]
    assert R.round_codes(np.array([np.nan]), TABLES["skew"]).tolist() == [0]
    # a negative value below an all-positive table saturates to its first value
    assert R.round_codes(np.array([-5.0, 0.0]), TABLES["positive"], "zero").tolist() == [0, 0]


@pytest.mark.parametrize("bits", [1, 2, 3])
@pytest.mark.parametrize("mode", MODES + ("stochastic",))
def test_a_uint_table_is_uintK(bits, mode):
    """The table 0..2^K-1 is uintK in every mode (stochastic: the same rbits convention)."""
    s = lut_spec(list(range(1 << bits)))
    rng = np.random.default_rng(bits)
    x = np.concatenate([rng.uniform(-2, (1 << bits) + 2, 2000),
                        np.arange(-1, (1 << bits) + 1, 0.5),
                        [np.nan, np.inf, -np.inf]]).astype(np.float32)
    rb = rng.integers(0, 2 ** 32, x.shape, dtype=np.uint32) if mode == "stochastic" else None
    got = R.encode(x, s, roundmode=mode, rbits=rb).codes
    want = R.encode(x, f"uint{bits}", roundmode=mode, rbits=rb).codes
    assert got.astype(np.int64).tolist() == want.astype(np.int64).tolist()


def test_stochastic_is_unbiased():
    """Over uniform r the mean of the rounded value is x (within 2^-32 of the rule's floor,
    and a 6-sigma statistical bound)."""
    s = number("nf4")
    t = np.array(s.table)
    rng = np.random.default_rng(3)
    n = 40000
    for x in (0.1, -0.45, 0.9, 0.5626170039176941 + 0.01, -0.03):
        r = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
        v = t[R.round_codes(np.full(n, x), s, "stochastic", r.astype(np.int64))]
        i = np.searchsorted(t, x) - 1
        lo, hi = t[i], t[i + 1]
        assert set(np.unique(v)) <= {lo, hi}
        sigma = (hi - lo) / 2 / math.sqrt(n)
        assert abs(v.mean() - x) < 6 * sigma, (x, v.mean())


# ---------------------------------------------------------------- scaled casts


def _ref_scaled(x: np.ndarray, table, scale: str, k: int) -> np.ndarray:
    """An independent scaled cast of the last dimension in tiles of k (mode even)."""
    t = np.array(table, np.float64)
    mx = max(abs(t[0]), abs(t[-1]))
    out = np.empty_like(x)
    tiles = x.reshape(-1, k)
    res = out.reshape(-1, k)
    for j, tile in enumerate(tiles):
        if not np.isfinite(tile).all():
            res[j] = np.nan
            continue
        amax = float(np.abs(tile.astype(np.float64)).max())
        if scale == "e8m0":
            E = -127 if amax == 0 else min(max(math.floor(math.log2(amax)) -
                                               math.floor(math.log2(mx)), -127), 127)
            if amax and Fraction(2) ** (E + math.floor(math.log2(mx))) > Fraction(amax):
                E -= 1  # log2 rounded up near a power of two
            for i, v in enumerate(tile):
                c = _ref_code(float(Fraction(float(v)) / Fraction(2) ** E), table, "even")
                res[j, i] = np.float32(float(Fraction(table[c]) * Fraction(2) ** E))
        else:  # bf16 scale: s = bf16(f32(amax / max)), v = f32(x / s), value = f32(c * s)
            sc = float(np.float32(amax / mx).astype(ml_dtypes.bfloat16))
            for i, v in enumerate(tile):
                if sc == 0:
                    res[j, i] = 0.0
                    continue
                q = float(np.float32(np.float32(v) / np.float32(sc)))
                c = _ref_code(q, table, "even")
                res[j, i] = np.float32(np.float32(table[c]) * np.float32(sc))
    return out


@pytest.mark.parametrize("scale", ["e8m0", "bf16"])
@pytest.mark.parametrize("name", ["nf4", "uniform3", "nozero"])
def test_scaled_cast_matches_the_fraction_model(scale, name):
    s = TABLES[name]
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 64)) * np.exp2(rng.integers(-20, 20, (6, 1)))).astype(
        np.float32)
    x[1] = 0.0
    x[2, 5] = np.nan
    x[3, :] = np.float32(0.7229568362236023)  # a table value times a power of two
    x[4, 3] = 2.0 ** -140
    got = R.cast(x, s, f"{scale}_t64")
    assert np.array_equal(got, _ref_scaled(x, s.table, scale, 64), equal_nan=True)
    enc = R.encode(x, s, f"{scale}_t64")
    assert enc.codes.dtype == np.uint8 and enc.scales.shape == (6, 1)
    assert np.array_equal(R.decode(enc, s, f"{scale}_t64"), got, equal_nan=True)


@pytest.mark.parametrize("scalemode", ["max", "midmax", "rceil", "nearest"])
def test_scale_modes_use_max_and_emax(scalemode):
    """The exponent-scale rules read the table's max (its largest magnitude), emax and
    midmax: the scale chosen is the one an e2m1fo-like spec with the same max / emax gets."""
    s = lut_spec([-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6, 8])
    like = lut_spec([-8, -6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6])
    assert (s.max, s.emax, s.midmax) == (8.0, 3, 12.0) == (like.max, like.emax, like.midmax)
    x = (np.random.default_rng(5).standard_normal((8, 32)) * 10).astype(np.float32)
    a = R.encode(x, s, "e8m0_t32", scalemode=scalemode).scales
    b = R.encode(x, like, "e8m0_t32", scalemode=scalemode).scales
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8))


@pytest.mark.parametrize("table", [
    NF4_VALUES,
    (-3.0, -1.0, 0.5, 2.0),  # a table without 0
    (-5.0, -2.0),  # negative only
    (1.0, 2.0, 4.0, 8.0),
    (-3e38, -1e-38, 1e-30, 2.5e37),  # midpoints that are no f64
])
def test_vectorized_deterministic_rounding_is_the_rational_rule(table):
    """round_codes' vectorized path (midpoints as f64 floors) against _lut_between's exact
    rational arithmetic, value by value: random values, every midpoint and its f64
    neighbours, signed zeros, tiny values."""
    from mxlower import cast_reference as CR

    spec = numbers.lut_spec([float(np.float32(v)) for v in table])
    t = np.array(spec.table)
    mids = [float((Fraction(a) + Fraction(b)) / 2) for a, b in zip(spec.table, spec.table[1:])]
    xs = np.concatenate([np.random.default_rng(0).standard_normal(500) * 3, mids,
                         np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                         [0.0, -0.0, 1e-300, -1e-300]])
    inside = (xs > t[0]) & (xs < t[-1]) & ~np.isin(xs, t)
    for mode in ("even", "nearest", "zero", "half_down"):
        got = CR.round_codes(xs, spec, mode)[inside]
        want = [CR._lut_between(float(v), int(np.searchsorted(t, v, "right")) - 1, spec.table,
                                mode)[0] for v in xs[inside]]
        assert got.tolist() == want, mode
