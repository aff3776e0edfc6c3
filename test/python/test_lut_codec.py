"""The codec's lookup-table encoder and decoder (docs/semantics.md section 10.7) against the
oracle (:func:`mxlower.cast_reference.round_codes`, ``decode``): every bf16 and f16 value, f32
edge cases (table values, midpoints and their f32 neighbours, values beyond the ends, +-0,
+-Inf, NaN, subnormals), shifts, every rounding mode and edge random bits, on the NumPy builder,
for tables the direct encoder takes and wider ones (any f32 table: the per-gap encoder, also
forced on the narrow tables), and stochastic rounding at the points k/2^32 of a gap with the
random bits that decide them; the StableHLO builder on XLA:CPU and the arith builder on LLVM
on fewer values."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import numbers
from mxlower.lowering import codec
from mxlower.lowering.int_builders import NumpyBuilder
from mxlower.numbers import lut_spec

NP = NumpyBuilder()
MODES = ("even", "nearest", "zero", "half_down", "stochastic")

_rng = np.random.default_rng(7)
TABLES = {
    "nf4": numbers.number("nf4"),
    "nozero": lut_spec([-1.5, -0.5, 0.5, 1.5]),  # the straddle rule, midpoint 0
    "pm1": lut_spec([-1.0, 1.0]),  # K = 1, symmetric straddle
    "skew": lut_spec([-0.25, 3.0]),  # K = 1, asymmetric straddle
    "positive": lut_spec([0.5, 1, 2, 8]),
    "negative": lut_spec([-8, -2, -1, -0.125]),
    "k8": lut_spec(np.unique(np.float32(_rng.standard_normal(300) * 4))[:256]
                   .astype(np.float64)),
    "tiny": lut_spec([-2.0 ** -140, 0.0, 2.0 ** -149, 2.0 ** -130]),  # f32 subnormals
    "huge": lut_spec([float(np.float32(-3.0e38)), -2.0 ** 100, 2.0 ** 120,
                      float(np.finfo(np.float32).max)]),
    # beyond the direct encoder (per-gap encoder): f32 values across many binades with full
    # significands, ends of very different magnitudes, subnormals with large values
    "wide8": lut_spec(np.unique((_rng.standard_normal(400) * np.exp2(
        _rng.integers(-140, 120, 400).astype(np.float64))).astype(np.float32))[:256]
        .astype(np.float64)),
    "far": lut_spec([float(np.float32(v)) for v in (-3e38, -1e-38, 1e-30, 2.5e37)]),
    "submix": lut_spec([-2.0 ** 100, -3 * 2.0 ** -149, 5 * 2.0 ** -149, 1.5 * 2.0 ** -130,
                        float(np.float32(1e-3)), 7.0, 1.25 * 2.0 ** 60,
                        float(np.float32(3e38))]),
    # straddling 0 with lo's and hi's terms of a stochastic threshold cancelling: r = 2 puts
    # it at 2^-62 (2^-54 for cancel24), where x's bits and lo's reach far below the gap's frame
    "cancel": lut_spec([-2.0 ** -31, 1.0]),
    "cancel_neg": lut_spec([-1.0, 2.0 ** -31]),
    "cancel24": lut_spec([-(1 - 2.0 ** -24) * 2.0 ** -30, 1.0]),
}
WIDE = ("wide8", "far", "submix")
EDGE_R = np.array([0, 1, 1 << 31, (1 << 32) - 1, (1 << 31) - 1, (1 << 31) + 1], np.uint32)


def _f32_edges(spec: numbers.NumberSpec) -> np.ndarray:
    """Table values, midpoints, f32 neighbours of both, beyond the ends, specials."""
    t = np.asarray(spec.table, np.float64)
    mids = (t[:-1] + t[1:]) / 2  # exact in f64; its f32 rounding and neighbours below
    pts = np.concatenate([t, mids]).astype(np.float32)
    inf = np.float32(np.inf)
    near = [pts, np.nextafter(pts, inf), np.nextafter(pts, -inf),
            np.nextafter(np.nextafter(pts, inf), inf)]
    f = np.finfo(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, f.max, -f.max,
                        f.smallest_subnormal, -f.smallest_subnormal, f.tiny, -f.tiny,
                        t[0] * 2, t[-1] * 2, t[0] - 1, t[-1] + 1], np.float32)
    return np.concatenate(near + [special, -pts]).astype(np.float32)


def _all16(f16: bool) -> np.ndarray:
    b = np.arange(1 << 16, dtype=np.uint16)
    out = [b.view(ml_dtypes.bfloat16).astype(np.float32)]
    return np.concatenate(out + [b.view(np.float16).astype(np.float32)] if f16 else out)


def _rbits(n: int, seed: int) -> np.ndarray:
    r = np.random.default_rng(seed).integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    r[: len(EDGE_R) * 50] = np.repeat(EDGE_R, 50)[: n]
    return r


def _expect(x: np.ndarray, spec, mode: str, r, shift=None) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
    if shift is not None:
        v = np.ldexp(v, -shift.astype(np.int32))  # exact for |shift| <= 160
    with np.errstate(invalid="ignore"):
        return CR.round_codes(v, spec, mode, r)


def _check(x, spec, mode, seed, shift=None, src="f32", r=None, wide=None):
    if r is None and mode == "stochastic":
        r = _rbits(x.size, seed)
    if mode != "stochastic":
        r = None
    xv = x.astype(codec.codec_type(src).dtype)
    if wide is None:
        got = codec.emit_encode(NP, xv, src, spec, roundmode=mode, rbits=r, shift=shift)
        assert got.dtype == np.uint8
    else:  # the per-gap encoder (True) or the direct one (False) forced
        got, _ = codec._encode_lut(NP, xv, src, spec, mode, r, shift, wide=wide)
    exp = _expect(x, spec, mode, r, shift)
    bad = np.nonzero(got.astype(np.int64) != exp)[0]
    assert bad.size == 0, (spec.code, mode, x[bad[:4]], got[bad[:4]], exp[bad[:4]],
                           None if r is None else r[bad[:4]])


@pytest.mark.parametrize("name", list(TABLES))
def test_encode_every_16_bit_value_and_f32_edges(name):
    """Every bf16 value (and f16 for nf4) and the f32 edges, every mode."""
    spec = TABLES[name]
    xs = np.concatenate([_all16(name == "nf4"), _f32_edges(spec)])
    for i, mode in enumerate(MODES):
        _check(xs, spec, mode, i)
    edges = _f32_edges(spec)
    _check(edges.astype(ml_dtypes.bfloat16).astype(np.float32), spec, "even", 0, src="bf16")


@pytest.mark.parametrize("name", ["nf4", "nozero", "skew", "negative", "tiny", "huge", "far",
                                  "submix"])
def test_encode_with_shifts(name):
    """x 2^-shift, exactly, for shifts that move values across the whole table and far past
    it (in f64, |shift| <= 160 is exact); +-3000 act as +-2000 (everything saturates or is a
    signed tiny value, like +-0 for every mode but stochastic)."""
    spec = TABLES[name]
    rng = np.random.default_rng(3)
    e = _f32_edges(spec)
    base = np.concatenate([e, rng.standard_normal(3000).astype(np.float32)])
    s = rng.integers(-160, 161, base.size).astype(np.int32)
    for i, mode in enumerate(MODES):
        _check(base, spec, mode, 10 + i, shift=s)
        # table points, reached through their power-of-two multiples
        k = rng.integers(-20, 21, e.size).astype(np.int32)
        _check(np.ldexp(e.astype(np.float64), k).astype(np.float32), spec, mode, 20 + i,
               shift=k)
    for big in (3000, -3000):
        s = np.full(base.size, big, np.int32)
        for mode in MODES[:4]:
            got = codec.emit_encode(NP, base, "f32", spec, roundmode=mode, shift=s)
            proxy = np.where(np.isnan(base) | np.isinf(base), base, np.copysign(
                np.where(base == 0, 0.0, np.inf if big < 0 else 5e-324), base))
            exp = CR.round_codes(proxy, spec, mode)
            assert np.array_equal(got.astype(np.int64), exp), (name, mode, big)


@pytest.mark.parametrize("name", list(TABLES))
def test_decode_every_code(name):
    spec = TABLES[name]
    c = np.arange(1 << spec.bits, dtype=np.uint8)
    with np.errstate(over="ignore"):
        for dst, dt in (("f32", np.float32), ("bf16", ml_dtypes.bfloat16),
                        ("f16", np.float16)):
            got = codec.emit_decode(NP, c, spec, dst)
            exp = CR.decode(c, spec, dtype=dt)
            assert np.array_equal(got.view(np.uint8), exp.view(np.uint8)), (name, dst)
        # with a shift: table[c] 2^shift rounded once to f32 (subnormals and Inf included)
        sh = np.arange(-200, 201, 7, dtype=np.int32)
        cc, ss = np.meshgrid(c, sh)
        got = codec.emit_decode(NP, cc.ravel(), spec, "f32", shift=ss.ravel())
        exact = np.ldexp(np.asarray(spec.table, np.float64)[cc.ravel()], ss.ravel())
        assert np.array_equal(got.view(np.uint32), exact.astype(np.float32).view(np.uint32))


def test_decode_ignores_bits_above_the_code():
    c = np.arange(256, dtype=np.uint8)
    got = codec.emit_decode(NP, c, "nf4", "f32")
    assert np.array_equal(got, np.asarray(numbers.NF4_VALUES, np.float32)[c & 15])


def test_every_table_is_taken():
    """No table is refused; the wide ones take the per-gap encoder, nf4 the direct one."""
    for name, spec in TABLES.items():
        for mode in MODES:
            narrow_only = ("k8", "cancel", "cancel_neg", "cancel24")  # wide for stochastic only
            assert codec._lut_direct(spec, mode) == (name not in WIDE and not (
                name in narrow_only and mode == "stochastic")), (name, mode)
    wide = lut_spec([0.0, 2.0 ** -149, 1.0, 2.0 ** 100])
    got = codec.emit_encode(NP, np.float32([2.0 ** -150, 2.0 ** -149, 0.5, 3.0, 2.0 ** 99]),
                            "f32", wide)
    assert list(got) == [0, 1, 1, 2, 2]  # 2^-150: a tie, to the even code
    with pytest.raises(ValueError, match="no rounding target"):
        codec.target("nf4")


def test_per_gap_encoder_on_every_table():
    """The per-gap encoder forced on the tables the direct one takes: every bf16 value and the
    f32 edges, every mode (the direct one is the default there; test_encode_... checks it)."""
    for name, spec in TABLES.items():
        if name in WIDE:
            continue
        xs = np.concatenate([_all16(False)[::3], _f32_edges(spec)])
        for i, mode in enumerate(MODES):
            _check(xs, spec, mode, 30 + i, wide=True)


def _threshold_points(spec, seed: int, gaps: int = 24, src=np.float32):
    """Values x 2^-shift next to the points lo + k (hi - lo) 2^-32 and hi - k (hi - lo) 2^-32
    of gaps (k = 1, 2, 2^31, 2^32 - 1, 2^32 - 2, random, and those next to 0 in a gap
    straddling 0): the nearest values of ``src``
    (scaled into its normal range by a shift where the point is tiny or huge, and once more
    with a random shift) and two neighbours each side, each with the random bits r = 2^32 -
    floor(f 2^32) (where the carry starts) and its neighbours.  Returns x, shift, r."""
    rng = np.random.default_rng(seed)
    t = [Fraction(v) for v in spec.table]
    idx = np.arange(len(t) - 1)
    if idx.size > gaps:
        idx = np.sort(rng.choice(idx, gaps, replace=False))
    xs, ss, rs = [], [], []
    for j in idx:
        lo, hi = t[j], t[j + 1]
        D = hi - lo
        ks = [1, 2, 1 << 31, (1 << 32) - 1, (1 << 32) - 2, int(rng.integers(1, 1 << 32))]
        if lo < 0 < hi:  # the points next to 0, where lo's and hi's terms cancel
            k0 = math.floor(-lo * (1 << 32) / D)
            ks += [k for k in range(k0 - 1, k0 + 3) if 0 < k < 1 << 32]
        for k in ks:
            for p in (lo + k * D / (1 << 32), hi - k * D / (1 << 32)):
                if p == 0:
                    continue
                e = math.floor(math.log2(abs(p)))
                shifts = {0 if -120 < e < 120 else -e, -e + int(rng.integers(-40, 41))}
                for sh in shifts:
                    c = src(float(p * Fraction(2) ** sh))
                    near = [c]
                    for d in (np.inf, -np.inf):
                        v = c
                        for _ in range(2):
                            v = np.nextafter(v, src(d))
                            near.append(v)
                    for v in near:
                        exact = Fraction(float(v)) / Fraction(2) ** sh
                        if not np.isfinite(v) or not lo < exact < hi or \
                                Fraction(math.ldexp(float(v), -sh)) != exact:
                            continue  # outside the gap, or not exact in f64 (the oracle)
                        th = CR._lut_between(math.ldexp(float(v), -sh), int(j), spec.table,
                                             "stochastic")[3]
                        for r in (-1, 0, 1):
                            xs.append(v)
                            ss.append(sh)
                            rs.append(min(max((1 << 32) - th + r, 0), (1 << 32) - 1))
    return (np.array(xs, src), np.array(ss, np.int32),
            np.array(rs, np.uint64).astype(np.uint32))


@pytest.mark.parametrize("name", ["nf4", "nozero", "pm1", "skew", "tiny", "huge", "k8", *WIDE,
                                  "cancel", "cancel_neg", "cancel24"])
def test_stochastic_at_gap_fractions(name):
    """Stochastic rounding where r + floor(f 2^32) meets 2^32: x next to lo + k (hi - lo) 2^-32
    (and from hi), r at the threshold and one off, with shifts; the deterministic modes on the
    same values.  Both encoders where the direct one takes the table."""
    spec = TABLES[name]
    x, s, r = _threshold_points(spec, 5)
    assert x.size > 100
    for wide in ((None, True) if codec._lut_direct(spec, "stochastic") else (None,)):
        _check(x, spec, "stochastic", 0, shift=s, r=r, wide=wide)
    for mode in MODES[:4]:
        _check(x, spec, mode, 0, shift=s)


@pytest.mark.parametrize("name", ["nf4", "far", "submix", "cancel"])
def test_f64_source(name):
    """f64 values (53-bit significands) at the stochastic thresholds, every mode, both
    encoders where the direct one takes the table."""
    spec = TABLES[name]
    x, s, r = _threshold_points(spec, 9, src=np.float64)
    for i, mode in enumerate(MODES):
        for wide in ((None, True) if codec._lut_direct(spec, mode) else (None,)):
            _check(x, spec, mode, 40 + i, shift=s, src="f64", r=r, wide=wide)


# ------------------------------------------------------------------- the MLIR builders


def _lowered_inputs(spec, n: int, seed: int):
    """Edges, random values, random bits and shifts, and (at the end) the stochastic threshold
    points with their bits and shifts (the shifted cases read them)."""
    rng = np.random.default_rng(seed)
    e = _f32_edges(spec)
    tx, ts, tr = _threshold_points(spec, seed, gaps=6)
    n = max(n, e.size + tx.size + 512)
    m = n - tx.size
    x = np.concatenate([e, (rng.standard_normal(m - e.size) * 2).astype(np.float32), tx])
    r = np.concatenate([_rbits(m, seed), tr])
    s = np.concatenate([rng.integers(-40, 41, m).astype(np.int32), ts])
    return x.astype(np.float32), r, s


def _numpy_pair(x, r, s, spec, mode, shifted, dst):
    sh = s if shifted else None
    c = codec.emit_encode(NP, x, "f32", spec, roundmode=mode,
                          rbits=r if mode == "stochastic" else None, shift=sh)
    return c, codec.emit_decode(NP, c, spec, dst, shift=sh)


CASES = [("even", False, "f32"), ("nearest", True, "bf16"), ("zero", True, "f32"),
         ("half_down", False, "f16"), ("stochastic", True, "f32")]


@pytest.mark.parametrize("name", ["nf4", "nozero", "huge", "far", "wide8", "cancel"])
def test_stablehlo_builder_on_xla_cpu(name):
    from test_codec_spec import _hlo_text

    from mxlower.execution import xla

    spec = TABLES[name]
    for i, (mode, shifted, dst) in enumerate(CASES):
        x, r, s = _lowered_inputs(spec, 2048, i)
        got_c, got_v = xla.run(_hlo_text(x.size, spec, "f32", mode, shifted, dst), x, r, s)
        exp_c, exp_v = _numpy_pair(x, r, s, spec, mode, shifted, dst)
        assert got_c.dtype == np.uint8
        assert np.array_equal(got_c, exp_c), (name, mode)
        assert np.array_equal(np.asarray(got_v).view(np.uint8),
                              np.asarray(exp_v).view(np.uint8)), (name, mode, dst)


@pytest.mark.parametrize("name", ["nf4", "skew", "submix", "cancel_neg"])
def test_arith_builder_on_llvm(name):
    pytest.importorskip("mlir.execution_engine")
    from test_codec_spec import _arith_text

    from mxlower.execution import llvm

    spec = TABLES[name]
    for i, (mode, shifted, dst) in enumerate(CASES):
        x, r, s = _lowered_inputs(spec, 1024, 50 + i)
        with llvm.compile(_arith_text(spec, "f32", mode, shifted, dst)) as h:
            got_c, got_v = h.run("main", x, r.view(np.int32), s)
        exp_c, exp_v = _numpy_pair(x, r, s, spec, mode, shifted, dst)
        assert np.array_equal(got_c, exp_c.astype(np.int32)), (name, mode)
        assert np.array_equal(np.asarray(got_v).view(np.uint8),
                              np.asarray(exp_v).view(np.uint8)), (name, mode, dst)
