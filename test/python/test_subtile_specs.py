"""Subtile scale specs (shared micro-exponents: MX9, MX6, MX4) and hierarchical scaling in the
oracle (docs/semantics.md section 10.3), checked against an independent exact model written
here with Fractions, plus the grammar and its errors."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from mxlower import numbers, reference
from mxlower.formats import DATATYPES, format_of
from mxlower.numbers import SpecError

# ----------------------------------------------------------------------------- grammar


@pytest.mark.parametrize("code, subtile, bits", [
    ("e8m0_t16_s2o1", (2,), 1),
    ("e8m0_t32_s1o8", (1,), 8),
    ("e8m0_t16d0_s4o2", (4,), 2),
    ("e8m0_t16x16_s2x4o3", (2, 4), 3),
    ("e8m0_t8x8d0d1_s2x2o1", (2, 2), 1),
    ("e5m0_t16_s8o4", (8,), 4),
])
def test_subtile_codes_round_trip(code, subtile, bits):
    s = numbers.scale(code)
    assert (s.subtile, s.offset_bits) == (subtile, bits)
    assert numbers.scale(s.code) == s
    assert s.tile_scale.subtile == () and s.tile_scale.offset_bits == 0
    assert s.offset_number.code == f"uint{bits}" and s.max_offset == (1 << bits) - 1


def test_three_levels_parse():
    s = numbers.scale("e8m0_t16_s2o1_gf32")
    assert s.subtile == (2,) and s.tensor is not None and s.tile == (16,)
    assert numbers.scale(s.code) == s


@pytest.mark.parametrize("code, words", [
    ("e8m0_s2o1", "divide a tile"),
    ("e8m0_t0_s2o1", "divide a tile"),
    ("e4m3fn_t16_s2o1", "exponent scale"),
    ("float32_t16_s2o1", "exponent scale"),
    ("e8m0_t16_s3o1", "power of two"),
    ("e8m0_t16_s32o1", "divides the tile"),
    ("e8m0_t16_s16o1", "whole tile"),
    ("e8m0_t16x16_s4x4x4o1", "unknown number spec"),  # no subtile part is read
    ("e8m0_t16x16_s2o1", "2D subtiles"),
    ("e8m0_t16_s2x2o1", "1D subtiles"),
    ("e8m0_t16_s2o0", "1 to 8 bits"),
    ("e8m0_t16_s2o9", "1 to 8 bits"),
    ("e8m0_t16_s2o99999999999999", "1 to 8 bits"),
    ("e8m0_t16_s0o1", "power of two"),
])
def test_bad_subtile_specs(code, words):
    with pytest.raises(SpecError, match=words):
        numbers.scale(code)


def test_shapes():
    s = numbers.scale("e8m0_t8x16d0d1_s2x4o1")
    assert s.scales_shape((16, 32, 3)) == (2, 2, 3)
    assert s.subtile_shape((16, 32, 3)) == (2, 4, 1)
    assert s.offsets_shape((16, 32, 3)) == (8, 8, 3)
    with pytest.raises(SpecError, match="does not divide"):
        s.offsets_shape((12, 32))
    with pytest.raises(SpecError, match="no subtiles"):
        numbers.scale("e8m0_t32").offsets_shape((32,))


def test_predefined_mx9_mx6_mx4():
    for name, k in (("mx9", 8), ("mx6", 5), ("mx4", 3)):
        dt = DATATYPES[name]
        assert dt.code == f"int{k}:e8m0_t16_s2o1"
        # bits per element: sign + magnitude, 8/16 for the shared exponent, 1/2 for the offset
        assert k + 8 / 16 + 1 / 2 == int(name[2:])
        assert format_of(dt) is None  # no MX format's kernels claim it


# ----------------------------------------------------------------------------- the model


def _f32(q: Fraction) -> Fraction:
    """q > 0 rounded to nearest even f32 (normal range), exactly."""
    e = math.floor(math.log2(q))
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    e = max(e, -126)
    ulp = Fraction(2) ** (e - 23)
    t = q / ulp
    n = math.floor(t)
    if t - n > Fraction(1, 2) or (t - n == Fraction(1, 2) and n % 2):
        n += 1
    return n * ulp


def _flog2(q: Fraction) -> int:
    e = q.numerator.bit_length() - q.denominator.bit_length()
    return e if Fraction(2) ** e <= q else e - 1


def _exponent(amax: Fraction, K: int, mode: str) -> int:
    """Section 10.3's E for an intK fixed-point element (emax 0, max (2^(K-1)-1) 2^-(K-2)),
    e8m0 scales, written from the document's formulas."""
    if amax == 0:
        return -127
    mx = Fraction((1 << (K - 1)) - 1, 1 << (K - 2))
    fl = _flog2(amax)
    if mode == "max":
        E = fl
    elif mode == "midmax":
        E = fl + (amax / Fraction(2) ** fl >= (mx + 2) / 2)
    else:  # rceil
        q = _f32(amax / mx)
        fq = _flog2(q)
        E = fq if Fraction(2) ** fq == q else fq + 1
    return max(-127, min(127, E))


def _round(t: Fraction, mode: str, r: int = 0) -> int:
    n = math.floor(t)
    f = t - n
    if mode == "even":
        return n + (f > Fraction(1, 2) or (f == Fraction(1, 2) and n % 2 == 1))
    if mode == "nearest":
        return n + (f >= Fraction(1, 2))
    if mode == "zero":
        return n
    if mode == "half_down":
        return n + (f > Fraction(1, 2))
    return n + (r + math.floor(f * 2 ** 32) >= 2 ** 32)


def model(x: np.ndarray, K: int, tile: tuple[int, ...], sub: tuple[int, ...], D: int,
          mode: str, roundmode: str, rbits=None):
    """(codes, E per tile, offsets, f32 values) of intK with e8m0 tiles over the last
    len(tile) dimensions of a 2D ``x`` and D-bit subtile offsets, from the document."""
    R, C = x.shape
    tr, tc = (1, tile[0]) if len(tile) == 1 else tile
    sr, sc = (1, sub[0]) if len(sub) == 1 else sub
    codes = np.zeros(x.shape, np.int64)
    vals = np.zeros(x.shape, np.float32)
    Es = np.zeros((R // tr, C // tc), np.int64)
    offs = np.zeros((R // sr, C // sc), np.int64)
    top = (1 << (K - 1)) - 1
    for i in range(R // tr):
        for j in range(C // tc):
            block = x[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc]
            if not np.isfinite(block).all():
                Es[i, j] = 128  # NaN code - bias
                vals[i * tr:(i + 1) * tr, j * tc:(j + 1) * tc] = np.nan
                continue
            E = _exponent(max(Fraction(abs(float(v))) for v in block.flat), K, mode)
            Es[i, j] = E
            for a in range(tr // sr):
                for b in range(tc // sc):
                    r0, c0 = i * tr + a * sr, j * tc + b * sc
                    s = x[r0:r0 + sr, c0:c0 + sc]
                    Esub = _exponent(max(Fraction(abs(float(v))) for v in s.flat), K, mode)
                    assert Esub <= E
                    o = min(E - Esub, (1 << D) - 1)
                    offs[r0 // sr, c0 // sc] = o
                    for p in range(sr):
                        for q in range(sc):
                            v = Fraction(float(x[r0 + p, c0 + q]))
                            t = abs(v) * Fraction(2) ** (K - 2 - (E - o))
                            rr = 0 if rbits is None else int(rbits[r0 + p, c0 + q])
                            m = min(_round(t, roundmode, rr), top)
                            c = -m if v < 0 else m
                            codes[r0 + p, c0 + q] = c
                            vals[r0 + p, c0 + q] = np.float32(
                                float(c * Fraction(2) ** (E - o - (K - 2))))
    return codes, Es, offs, vals


def _data(rng, shape, kind):
    if kind == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "heavy":  # heavy-tailed, with zeros and tiny values
        x = rng.standard_t(2, shape).astype(np.float32) * np.float32(2.0 ** rng.integers(-6, 6))
        x[rng.random(shape) < 0.1] = 0
        x[rng.random(shape) < 0.05] *= np.float32(2.0 ** -100)
        return x
    # wide: every pair's exponents far apart (offsets saturate), subnormals and huge values
    e = rng.integers(-140, 120, shape)
    return (np.ldexp(rng.random(shape) + 0.5, e) * rng.choice([-1, 1], shape)).astype(
        np.float32)


@pytest.mark.parametrize("K", [8, 5, 3])
@pytest.mark.parametrize("mode", ["max", "midmax", "rceil"])
@pytest.mark.parametrize("kind", ["normal", "heavy", "wide"])
def test_1d_subtiles_match_model(K, mode, kind):
    rng = np.random.default_rng(K * 100 + len(mode) * 10 + len(kind))
    x = _data(rng, (3, 32), kind)
    dt = numbers.datatype(f"int{K}", "e8m0_t16_s2o1")
    enc = reference.encode(x, dt, None, "even", mode)
    codes, E, offs, vals = model(x, K, (16,), (2,), 1, mode, "even")
    np.testing.assert_array_equal(enc.codes.astype(np.int64), codes)
    np.testing.assert_array_equal(enc.scales.view(np.uint8).astype(np.int64) - 127, E)
    np.testing.assert_array_equal(enc.offsets, offs)
    assert enc.offsets.dtype == np.uint8 and enc.offsets.shape == (3, 16)
    got = reference.cast(x, dt, None, "even", mode)
    np.testing.assert_array_equal(got.view(np.uint32), vals.view(np.uint32))
    np.testing.assert_array_equal(reference.decode(enc, dt).view(np.uint32),
                                  vals.view(np.uint32))


@pytest.mark.parametrize("roundmode", ["even", "nearest", "zero", "half_down", "stochastic"])
def test_2d_subtiles_and_rounding_modes_match_model(roundmode):
    rng = np.random.default_rng(7)
    x = _data(rng, (8, 16), "heavy")
    r = rng.integers(0, 2 ** 32, x.shape, dtype=np.uint32) if roundmode == "stochastic" \
        else None
    dt = numbers.datatype("int5", "e8m0_t4x8_s2x2o2")
    enc = reference.encode(x, dt, None, roundmode, "max", r)
    codes, E, offs, vals = model(x, 5, (4, 8), (2, 2), 2, "max", roundmode, r)
    np.testing.assert_array_equal(enc.codes.astype(np.int64), codes)
    np.testing.assert_array_equal(enc.offsets, offs)
    np.testing.assert_array_equal(reference.cast(x, dt, None, roundmode, "max", r)
                                  .view(np.uint32), vals.view(np.uint32))


def test_offsets_follow_the_subtile_exponent_up_to_their_width():
    # a tile whose pairs have maxima 2^0, 2^-1, ..., 2^-7: offsets 0, 1, 2, 3, 3, ... for D=2
    x = np.zeros((1, 16), np.float32)
    x[0, 0::2] = [2.0 ** -k for k in range(8)]
    enc = reference.encode(x, "int8", "e8m0_t16_s2o2")
    assert enc.offsets.tolist() == [[0, 1, 2, 3, 3, 3, 3, 3]]
    enc1 = reference.encode(x, "mx9")
    assert enc1.offsets.tolist() == [[0, 1, 1, 1, 1, 1, 1, 1]]
    # with the offset each pair keeps more bits: 2^-1 is code 64 (1.0 at exponent -1), not 32
    assert enc1.codes[0, 2] == 64 and reference.encode(x, "int8", "e8m0_t16").codes[0, 2] == 32


def test_ties_in_a_shifted_subtile():
    # E = 0 from the first pair (1.0); the second pair's max in [0.25, 0.5) gives E_s = -2,
    # o = 1, so its elements are x * 2^1 in steps of 2^-6: t = x * 2^7, a tie at n + 1/2
    for n in (32, 33):
        x = np.zeros((1, 16), np.float32)
        x[0, 0] = 1.0
        x[0, 3] = np.float32((n + 0.5) / 128)
        for mode, want in (("even", n + n % 2), ("nearest", n + 1), ("half_down", n),
                           ("zero", n)):
            enc = reference.encode(x, "mx9", None, mode)
            assert enc.offsets[0, 1] == 1
            assert enc.codes[0, 3] == want, (n, mode)
            enc = reference.encode(-x, "mx9", None, mode)
            assert enc.codes[0, 3] == -want, (n, mode)


def test_nan_inf_and_zero_tiles():
    x = np.zeros((4, 16), np.float32)
    x[0, 3] = np.nan
    x[1, 5] = -np.inf
    x[1, 6] = 3.0
    x[2, :] = 0.0
    x[3, 0] = 1.0  # pairs 1..7 all zero: the largest offset
    enc = reference.encode(x, "mx6")
    sc = enc.scales.view(np.uint8)
    assert sc[0, 0] == 255 and sc[1, 0] == 255 and sc[2, 0] == 0 and sc[3, 0] == 127
    assert enc.offsets[:3].max() == 0 and enc.offsets[3].tolist() == [0] + [1] * 7
    assert (enc.codes[:3] == 0).all()
    y = reference.decode(enc, "mx6")
    assert np.isnan(y[:2]).all() and (y[2] == 0).all() and y[3, 0] == 1.0
    assert not np.signbit(y[2]).any()


def test_every_code_and_offset_decodes_exactly():
    for K in (8, 5, 3):
        dt = numbers.datatype(f"int{K}", "e8m0_t16_s2o1")
        lo, hi = -((1 << (K - 1)) - 1), (1 << (K - 1)) - 1
        codes = np.arange(lo, hi + 1)
        n = len(codes)
        reps = -(-n // 16) * 16
        c = np.resize(codes, reps).reshape(-1, 16).astype(np.int8)
        for E in (-127, -3, 0, 5, 126):
            for o in (0, 1):
                sc = np.full((c.shape[0], 1), E + 127, np.uint8).view(ml_dtypes.float8_e8m0fnu)
                off = np.full((c.shape[0], 8), o, np.uint8)
                y = reference.decode(c, dt, scales=sc, offsets=off)
                want = [np.float32(float(Fraction(int(v)) * Fraction(2) ** (E - o - (K - 2))))
                        for v in c.flat]
                np.testing.assert_array_equal(y.reshape(-1), np.array(want, np.float32))


def test_stochastic_is_unbiased():
    # 2^8 evenly spaced r: the mean over them is exact when the dropped part has <= 8 bits
    x = np.zeros((1, 16), np.float32)
    x[0, 0] = 1.0
    x[0, 2:4] = [np.float32(0.4 + k * 2.0 ** -12) for k in (0, 3)]  # offset 1
    x[0, 4] = np.float32(1.0 + 2.0 ** -9)  # offset 0
    x = np.round(x * 2 ** 13) / 2 ** 13  # at most 8 dropped bits below the element's step
    rs = [np.full(x.shape, j << 24, np.uint32) for j in range(256)]
    mean = sum(reference.cast(x, "mx9", None, "stochastic", "max", r).astype(np.float64)
               for r in rs) / 256
    np.testing.assert_array_equal(mean, x.astype(np.float64))


def test_hierarchical_tensor_tile_subtile():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 32)).astype(np.float32) * 1e3
    g = np.float32(37.5)
    dt = numbers.datatype("int8", "e8m0_t16_s2o1_gf32")
    enc = reference.encode(x, dt, tensor_scale=g)
    y = (x / g).astype(np.float32)
    inner = reference.encode(y, "mx9")
    for a, b in zip(enc, inner):
        np.testing.assert_array_equal(a, b)
    want = (reference.cast(y, "mx9") * g).astype(np.float32)
    np.testing.assert_array_equal(reference.cast(x, dt, tensor_scale=g), want)
    np.testing.assert_array_equal(reference.decode(enc, dt, tensor_scale=g), want)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_narrow_inputs(dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 32)).astype(dtype)
    y = reference.cast(x, "mx6")
    assert y.dtype == np.dtype(dtype)
    want = reference.cast(x.astype(np.float32), "mx6").astype(dtype)
    np.testing.assert_array_equal(y.view(np.uint16), want.view(np.uint16))


def test_decode_argument_errors():
    x = np.ones((2, 16), np.float32)
    enc = reference.encode(x, "mx9")
    with pytest.raises(ValueError, match="needs subtile offsets of shape \\(2, 8\\)"):
        reference.decode(enc.codes, "mx9", scales=enc.scales)
    with pytest.raises(ValueError, match="must have shape \\(2, 8\\)"):
        reference.decode(enc.codes, "mx9", scales=enc.scales, offsets=enc.offsets[:, :4])
    with pytest.raises(ValueError, match="at most 1"):
        reference.decode(enc.codes, "mx9", scales=enc.scales, offsets=enc.offsets + 2)
    with pytest.raises(ValueError, match="dtype uint8"):
        reference.decode(enc.codes, "mx9", scales=enc.scales,
                         offsets=enc.offsets.astype(np.int32))
    with pytest.raises(ValueError, match="no subtiles"):
        reference.decode(enc.codes, "int8", "e8m0_t16",
                         scales=enc.scales, offsets=enc.offsets)
    with pytest.raises(ValueError, match="come with the Encoded"):
        reference.decode(enc, "mx9", offsets=enc.offsets)
    with pytest.raises(SpecError, match="does not divide"):
        reference.encode(np.ones((2, 24), np.float32), "mx9")
