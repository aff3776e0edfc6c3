"""The codec's lookup-table encoder and decoder (docs/semantics.md section 10.7) against the
oracle (:func:`mxlower.cast_reference.round_codes`, ``decode``): every bf16 and f16 value, f32
edge cases (table values, midpoints and their f32 neighbours, values beyond the ends, +-0,
+-Inf, NaN, subnormals), shifts, every rounding mode and edge random bits, on the NumPy builder;
the StableHLO builder on XLA:CPU and the arith builder on LLVM on fewer values."""

from __future__ import annotations

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
}
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


def _check(x, spec, mode, seed, shift=None, src="f32"):
    r = _rbits(x.size, seed) if mode == "stochastic" else None
    got = codec.emit_encode(NP, x.astype(codec.codec_type(src).dtype), src, spec, roundmode=mode,
                            rbits=r, shift=shift)
    assert got.dtype == np.uint8
    exp = _expect(x, spec, mode, r, shift)
    bad = np.nonzero(got.astype(np.int64) != exp)[0]
    assert bad.size == 0, (spec.code, mode, x[bad[:4]], got[bad[:4]], exp[bad[:4]],
                           None if r is None else r[bad[:4]])


@pytest.mark.parametrize("name", list(TABLES))
def test_encode_every_16_bit_value_and_f32_edges(name):
    """Every bf16 value (and f16 for nf4) and the f32 edges, every mode (k8, a random f32
    table, spans more bits than stochastic rounding handles: refused)."""
    spec = TABLES[name]
    xs = np.concatenate([_all16(name == "nf4"), _f32_edges(spec)])
    for i, mode in enumerate(MODES):
        if name == "k8" and mode == "stochastic":
            with pytest.raises(ValueError, match="spans too many bits"):
                _check(xs, spec, mode, i)
            continue
        _check(xs, spec, mode, i)
    edges = _f32_edges(spec)
    _check(edges.astype(ml_dtypes.bfloat16).astype(np.float32), spec, "even", 0, src="bf16")


@pytest.mark.parametrize("name", ["nf4", "nozero", "skew", "negative", "tiny", "huge"])
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


def test_tables_beyond_the_exact_range_are_refused():
    wide = lut_spec([0.0, 2.0 ** -149, 1.0, 2.0 ** 100])
    assert codec.lut_unsupported("nf4", "stochastic") is None
    assert codec.lut_unsupported("e4m3fn") is None
    msg = codec.lut_unsupported(wide)
    assert "spans too many bits" in msg and wide.code in msg
    mid = lut_spec([0.0, 2.0 ** -30, 1.0, 2.0])
    assert codec.lut_unsupported(mid) is None
    assert "stochastic" in codec.lut_unsupported(mid, "stochastic")
    with pytest.raises(ValueError, match="spans too many bits"):
        codec.emit_encode(NP, np.zeros(2, np.float32), "f32", wide)
    with pytest.raises(ValueError, match="no rounding target"):
        codec.target("nf4")


# ------------------------------------------------------------------- the MLIR builders


def _lowered_inputs(spec, n: int, seed: int):
    rng = np.random.default_rng(seed)
    e = _f32_edges(spec)
    x = np.concatenate([e, (rng.standard_normal(n - e.size) * 2).astype(np.float32)])
    r = _rbits(n, seed)
    s = rng.integers(-40, 41, n).astype(np.int32)
    return x.astype(np.float32), r, s


def _numpy_pair(x, r, s, spec, mode, shifted, dst):
    sh = s if shifted else None
    c = codec.emit_encode(NP, x, "f32", spec, roundmode=mode,
                          rbits=r if mode == "stochastic" else None, shift=sh)
    return c, codec.emit_decode(NP, c, spec, dst, shift=sh)


CASES = [("even", False, "f32"), ("nearest", True, "bf16"), ("zero", True, "f32"),
         ("half_down", False, "f16"), ("stochastic", True, "f32")]


@pytest.mark.parametrize("name", ["nf4", "nozero", "huge"])
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


@pytest.mark.parametrize("name", ["nf4", "skew"])
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
