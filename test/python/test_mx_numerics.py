"""mx.quantize / mx.dequantize lowered by mxlower-mx-to-stablehlo and run on XLA:CPU are
bit-exact with mxlower.reference (docs/semantics.md sections 3-5).

Coverage, per format: every scale mode (nvfp4: with and without a global scale) x every input
type (f32, bf16, f16), each on its own one of nine shape configurations chosen so that every
format and every scale mode sees ranks 1-4 (per format), blocked axes last and not last, and
block sizes 16, 32 and 64; the blocks of the data cycle through zero (with -0), NaN, Inf,
subnormal, huge, saturating, grid/midpoint, smallest-normal and plain values.  Each quantize
result is also dequantized to the input type, and independent random codes (NaN and Inf codes,
scale codes 0x00, 0x01, 0xFE, 0xFF) are dequantized to all three output types.  The modules
are small (XLA:CPU compile time grows faster than linearly with module size): one per scale
mode and one for the dequantize cases.  f6 formats run on XLA:CPU through
mxlower-expand-narrow-floats (or StableHLO's interpreter where that pass is absent).
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mxlower import reference as R
from mxlower.formats import FORMATS, SCALE_MODES
from mxlower.testing import MxModule, refine_for_inputs, special_blocks

WIDE = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
        "f16": np.dtype(np.float16)}

#: (shape, blocked axis, block size); consecutive triples (one scale mode's three input
#: types) each hold block sizes 16, 32 and 64; every config has >= 12 blocks
CONFIGS = [
    ((512,), 0, 32),
    ((6, 64), 1, 16),
    ((128, 6), 0, 64),
    ((2, 96, 3), 1, 32),
    ((3, 4, 64), 2, 64),
    ((2, 3, 32, 2), 2, 16),
    ((2, 2, 3, 48), 3, 16),
    ((32, 2, 2, 3), 0, 32),
    ((6, 128), 1, 64),
]


def _modes(fmt: str) -> list:
    return [None, "global"] if FORMATS[fmt].is_nvfp4 else list(SCALE_MODES)


def _cases(fmt: str) -> list[tuple]:
    out = []
    for i, mode in enumerate(_modes(fmt)):
        for j, wt in enumerate(WIDE):
            shape, axis, k = CONFIGS[(3 * i + j) % len(CONFIGS)]
            out.append((mode, wt, shape, axis, k))
    if FORMATS[fmt].is_nvfp4:  # two modes: give the configs nvfp4 would miss a third pass
        for j, wt in enumerate(WIDE):
            shape, axis, k = CONFIGS[6 + j]
            out.append(((None, "global")[j % 2], wt, shape, axis, k))
    return out


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Mismatch mask: bit patterns differ (for f32/bf16/f16 any NaN equals any NaN)."""
    g, w = R.bits(got), R.bits(want)
    bad = g != w
    if got.dtype in WIDE.values():
        bad &= ~(np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32)))
    return bad


def _describe(bad, got, want, x=None) -> str:
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    extra = f", input {x[idx]!r}" if x is not None and x.shape == got.shape else ""
    return (f"{int(bad.sum())} of {bad.size} differ; first at {list(idx)}: got "
            f"{R.bits(got)[idx]:#x}, expected {R.bits(want)[idx]:#x}{extra}")


def _random_codes(rng, shape, fmt, side: str) -> np.ndarray:
    f = FORMATS[fmt]
    if side == "elements":
        if f.is_int:
            return rng.integers(-128, 128, size=shape).astype(np.int8)
        t = f.element_type
        return R.from_bits(rng.integers(0, 1 << t.bits, size=shape), t.mlir)
    if f.is_nvfp4:
        return R.from_bits(rng.integers(0, 256, size=shape), "f8E4M3FN")
    codes = rng.integers(0, 256, size=shape)
    flat = codes.reshape(-1)
    flat[: min(4, flat.size)] = [0x00, 0x01, 0xFE, 0xFF][: min(4, flat.size)]
    return R.from_bits(codes, "f8E8M0FNU")


@functools.cache
def _format_run(fmt: str):
    """Build, lower, compile and run the modules of one format; returns (meta, results)."""
    rng = np.random.default_rng(sum(map(ord, fmt)))
    meta, outs = [], []
    groups: dict = {}
    for case in _cases(fmt):
        groups.setdefault(case[0], []).append(case)
    for cases in groups.values():
        m = MxModule()
        for mode, wt, shape, axis, k in cases:
            x = special_blocks(rng, shape, axis, k, WIDE[wt])
            xv = m.arg(x)
            g = gv = None
            if mode == "global":
                g = np.float32(rng.choice([0.75, 3.0e-39, 1.0e30, -2.5]))
                gv = m.arg(np.array(g, np.float32))
            q, s = m.quantize(xv, fmt, axis=axis, block_size=k,
                              scale_mode=mode if mode in SCALE_MODES else None, global_scale=gv)
            d = m.dequantize(q, s, fmt, wt, axis=axis, block_size=k, global_scale=gv)
            m.ret(q, s, d)
            meta.append(("quantize", mode, wt, shape, axis, k, x, g))
        outs += m.run()
    m = MxModule()
    for wt in WIDE:  # dequantize of arbitrary codes, to every output type
        shape, axis, k = CONFIGS[{"f32": 1, "bf16": 3, "f16": 6}[wt]]
        s_shape = list(shape)
        s_shape[axis] //= k
        e = _random_codes(rng, shape, fmt, "elements")
        sc = _random_codes(rng, s_shape, fmt, "scales")
        g = np.float32(1.5e-40) if FORMATS[fmt].is_nvfp4 else None
        ev, sv = m.arg(e), m.arg(sc)
        gv = m.arg(np.array(g, np.float32)) if g is not None else None
        m.ret(m.dequantize(ev, sv, fmt, wt, axis=axis, block_size=k, global_scale=gv))
        meta.append(("dequantize", None, wt, shape, axis, k, (e, sc), g))
    outs += m.run()
    return meta, outs


FORMAT_NAMES = list(FORMATS)


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_quantize_dequantize_bit_exact(fmt):
    meta, outs = _format_run(fmt)
    it = iter(outs)
    failures = []
    for kind, mode, wt, shape, axis, k, data, g in meta:
        where = f"{fmt} {kind} mode={mode} {wt}{list(shape)} axis={axis} block={k}"
        if kind == "quantize":
            q, s, d = next(it), next(it), next(it)
            eq, es = R.quantize(data, fmt, axis=axis, block_size=k,
                                scale_mode=mode if mode in SCALE_MODES else "floor",
                                global_scale=g)
            ed = R.dequantize(eq, es, fmt, axis=axis, block_size=k, dtype=wt, global_scale=g)
            for name, got, want in (("elements", q, eq), ("scales", s, es), ("dequantized", d, ed)):
                bad = _same_bits(got, want)
                if bad.any():
                    failures.append(f"{where} {name}: {_describe(bad, got, want, data)}")
        else:
            e, sc = data
            got = next(it)
            want = R.dequantize(e, sc, fmt, axis=axis, block_size=k, dtype=wt, global_scale=g)
            bad = _same_bits(got, want)
            if bad.any():
                failures.append(f"{where}: {_describe(bad, got, want)}")
    assert not failures, "\n".join(failures)


def test_coverage_of_the_sweep():
    """The sweep really spans what the module docstring claims (guards against edits)."""
    for fmt in FORMAT_NAMES:
        cases = _cases(fmt)
        assert {c[1] for c in cases} == set(WIDE)
        assert {len(c[2]) for c in cases} == {1, 2, 3, 4}
        assert {c[3] == len(c[2]) - 1 for c in cases} == {True, False}
        assert {c[4] for c in cases} == {16, 32, 64}
        assert {c[0] for c in cases} == set(_modes(fmt))


# ----------------------------------------------------------------------------- properties


@functools.cache
def _property_exe():
    m = MxModule()
    x = m.arg(np.zeros((4, 32), np.float32))
    for fmt, mode in (("mxfp8_e4m3", "floor"), ("mxfp8_e5m2", "rceil"), ("mxfp4_e2m1", "nearest"),
                      ("mxint8", "rceil"), ("nvfp4", None)):
        q, s = m.quantize(x, fmt, axis=1, block_size=32, scale_mode=mode)
        m.ret(q, s, m.dequantize(q, s, fmt, "f32", axis=1, block_size=32))
    return m.compile()


_F32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)
def _scaled(m: float, e: int) -> float:
    with np.errstate(over="ignore"):  # 2 * 2^127 overflows to Inf: also a fine input
        return float(np.float32(m * 2.0 ** e))


_SCALED = st.builds(_scaled, st.floats(-2, 2, width=32), st.integers(-150, 127))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, (4, 32), elements=st.one_of(_F32, _SCALED)))
def test_property_any_f32_bit_exact(x):
    outs = _property_exe()(x)
    it = iter(outs)
    for fmt, mode in (("mxfp8_e4m3", "floor"), ("mxfp8_e5m2", "rceil"), ("mxfp4_e2m1", "nearest"),
                      ("mxint8", "rceil"), ("nvfp4", None)):
        q, s, d = next(it), next(it), next(it)
        eq, es = R.quantize(x, fmt, axis=1, block_size=32, scale_mode=mode or "floor")
        ed = R.dequantize(eq, es, fmt, axis=1, block_size=32)
        for got, want in ((q, eq), (s, es), (d, ed)):
            bad = _same_bits(got, want)
            assert not bad.any(), f"{fmt}: {_describe(bad, got, want)}"


def _extreme_blocks() -> np.ndarray:
    """Blocks at the ends of the shared-exponent range, where the lowering's integer exponent
    arithmetic is closest to leaving i32: amax at the top of f32 (E up to 127 - emax_elem;
    mxint8: 127) or 2^127 exactly, holding zeros, -0 and subnormals; subnormal-only blocks and
    a smallest-normal amax (E clamped to -127: subnormals become nonzero elements); an amax
    just above 2^-110 whose subnormals round to the smallest element codes; each also negated."""
    sub = [0.0, -0.0, 2.0 ** -149, -(2.0 ** -149), (2 ** 23 - 1) * 2.0 ** -149, 2.0 ** -140,
           -(3 * 2.0 ** -148), 2.0 ** -126]
    fill = [2.0 ** k for k in (-100, -60, -20, 0, 20, 60, 100)]
    rows = [
        [3.4028235e38] + sub + fill,
        [2.0 ** 127] + sub + fill,
        [1.5 * 2.0 ** 127] + sub + [2.0 ** k for k in (-100, -30, 0, 30, 90, 120, 126)],
        sub + [(2 ** 22 + 5) * 2.0 ** -149] * 8,
        sub + [2.0 ** -126] * 8,
        [1.5 * 2.0 ** -110, 1.25 * 2.0 ** -111, 2.0 ** -118, -(2.0 ** -120)] + sub + [0.0] * 4,
    ]
    x = np.array([r + [-v for v in r] for r in rows], np.float32)  # 6 x 32
    return np.concatenate([x, -x[:, ::-1]])


def test_quantize_at_the_ends_of_the_exponent_range():
    x = _extreme_blocks()
    m = MxModule()
    a = m.arg(x)
    plan = [(f, mode) for f in FORMATS for mode in (_modes(f) if not FORMATS[f].is_nvfp4
                                                     else [None])]
    for fmt, mode in plan:
        q, s = m.quantize(a, fmt, axis=1, block_size=16, scale_mode=mode)
        m.ret(q, s, m.dequantize(q, s, fmt, "f32", axis=1, block_size=16))
    it = iter(m.compile()(x))
    for fmt, mode in plan:
        q, s, d = next(it), next(it), next(it)
        eq, es = R.quantize(x, fmt, axis=1, block_size=16, scale_mode=mode or "floor")
        ed = R.dequantize(eq, es, fmt, axis=1, block_size=16)
        for name, got, want in (("elements", q, eq), ("scales", s, es), ("dequantized", d, ed)):
            bad = _same_bits(got, want)
            assert not bad.any(), f"{fmt} {mode} {name}: {_describe(bad, got, want, x)}"


# ----------------------------------------------------------------------------- dynamic shapes

_DYN_CASES = [("mxfp8_e4m3", "floor"), ("mxfp6_e3m2", "rceil"), ("mxfp4_e2m1", "nearest"),
              ("mxint8", "rceil"), ("nvfp4", None)]


def _dynamic_text(fmt: str, mode: str | None) -> str:
    """quantize + dequantize of a tensor<?x64x?xf32> blocked along its static dimension."""
    f = FORMATS[fmt]
    nb = 64 // f.block_size
    x, e, sc = "tensor<?x64x?xf32>", f"tensor<?x64x?x{f.element}>", f"tensor<?x{nb}x?x{f.scale}>"
    attrs = f'format = "{fmt}", axis = 1 : i64'
    g_arg, g_use, g_ty = (", %g: tensor<f32>", ", %g", ", tensor<f32>") if f.is_nvfp4 else ("",) * 3
    mode_attr = f', scale_mode = "{mode}"' if mode else ""
    return (f"func.func @main(%x: {x}{g_arg}) -> ({e}, {sc}, {x}) {{\n"
            f'  %q, %s = "mx.quantize"(%x{g_use}) {{{attrs}{mode_attr}}} : ({x}{g_ty}) -> '
            f"({e}, {sc})\n"
            f'  %d = "mx.dequantize"(%q, %s{g_use}) {{{attrs}}} : ({e}, {sc}{g_ty}) -> {x}\n'
            f"  return %q, %s, %d : {e}, {sc}, {x}\n}}\n")


@pytest.mark.parametrize("fmt,mode", _DYN_CASES)
def test_dynamic_dimensions_bit_exact_after_refinement(fmt, mode):
    """Dimensions other than the blocked one may be dynamic (jax.export's symbolic shapes):
    the decomposition reshapes and broadcasts through the runtime shape, and once StableHLO's
    shape refinement (as JAX and mxlower-run use it) makes the module static it is bit-exact on
    XLA:CPU (through every expansion)."""
    from mxlower.execution import xla
    from mxlower.bindings import jaxlib as J
    from mxlower.pipeline.manager import run_pipeline

    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(_dynamic_text(fmt, mode))
        run_pipeline(m, "builtin.module(mxlower-mx-to-stablehlo, mxlower-expand-narrow-floats)")
        lowered = str(m)
    assert "stablehlo.dynamic_reshape" in lowered and "mx." not in lowered
    x = special_blocks(np.random.default_rng(7), (3, 64, 5), 1, FORMATS[fmt].block_size)
    g = [np.float32(1.5)] if FORMATS[fmt].is_nvfp4 else []
    static = refine_for_inputs(lowered, [x, *g])
    assert "?" not in static
    q, sc, d = xla.run(static, x, *g)
    eq, es = R.quantize(x, fmt, axis=1, scale_mode=mode or "floor",
                        global_scale=g[0] if g else None)
    ed = R.dequantize(eq, es, fmt, axis=1, global_scale=g[0] if g else None)
    for name, got, want in (("elements", q, eq), ("scales", sc, es), ("dequantized", d, ed)):
        assert not _same_bits(got, want).any(), name


# ----------------------------------------------------------------------------- XLA:CPU itself


def test_xla_cpu_flushes_subnormals_which_is_why_the_lowering_uses_integers():
    """XLA:CPU runs with FTZ/DAZ: 2^-130 * 16 is 0 there (exactly 2^-126 in IEEE).  The
    decomposition therefore never lets an f32 subnormal reach a float instruction; if this
    test starts failing, XLA stopped flushing and the comment in mxlower/lowering/mx_math.py is
    stale (the lowering stays correct either way)."""
    m = MxModule()
    a = m.arg(np.array([2.0 ** -130, 3.0], np.float32))
    b = m.arg(np.array([16.0, 2.0], np.float32))
    m.ret(m.raw("{r} = stablehlo.multiply " + f"{a.name}, {b.name} : {a.type}", (2,), "f32"))
    (out,) = m.run()
    assert out.tolist() == [0.0, 6.0]


def test_subnormal_dequantize_results_are_exact_on_xla():
    """Dequantized values below 2^-126 (scale 2^-127 times small elements) come out as exact
    f32 subnormals despite FTZ."""
    e = R.from_bits(np.arange(1, 8, dtype=np.uint8).reshape(1, 7).repeat(1, 0), "f8E4M3FN")
    e = np.concatenate([e, R.from_bits(np.array([[0x80]], np.uint8), "f8E4M3FN")], axis=1)
    s = R.from_bits(np.array([[0x00]], np.uint8), "f8E8M0FNU")
    m = MxModule()
    ev, sv = m.arg(e), m.arg(s)
    m.ret(m.dequantize(ev, sv, "mxfp8_e4m3", "f32", axis=1, block_size=8))
    (out,) = m.run()
    want = R.dequantize(e, s, "mxfp8_e4m3", axis=1, block_size=8)
    assert R.bits(out).tolist() == R.bits(want).tolist()
    assert 0 < abs(float(out[0, 0])) < 2.0 ** -126 and np.signbit(out[0, 7])
