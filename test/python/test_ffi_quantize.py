"""mxlower's fused FFI kernels against mxlower.reference, bit for bit, under jax.jit.

Every format x scale mode x input dtype for quantize, every format x output dtype for
dequantize, on inputs with NaN/Inf blocks, zero blocks, f32 subnormals, values at the element
range's edges and every binade; odd and empty shapes, other axes and block sizes (blocks longer
than a vector go in chunks), packed f6, nvfp4's global scale, jax.vmap, and many calls from
several threads at once.
"""

from __future__ import annotations

import ctypes
import fractions
import math
import platform
import threading

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference
from mxlower.bindings import upstream
from numpy_ops import NumPyOps
from mxlower.formats import FORMATS, SCALE_MODES

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

from mxlower.execution import ffi  # noqa: E402
from mxlower.execution import ffi_abi as abi  # noqa: E402
from mxlower.lowering.mx_kernels import KernelSpec  # noqa: E402

WIDE = (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))
CASES = [(f, m) for f, fmt in FORMATS.items() for m in (("floor",) if fmt.is_nvfp4
                                                          else SCALE_MODES)]


def hard_inputs(shape, dtype, seed=0) -> np.ndarray:
    """Random values over many binades, with whole blocks of specials at the front."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-40, 40, shape))).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    specials = [np.nan, 1.0, -np.inf, 0.0, -0.0, 1e-40, -3e-39, np.inf]
    flat[: min(8, n)] = specials[: min(8, n)]  # a NaN/Inf block
    if n >= 160:
        flat[32:64] = np.float32(2.0 ** -140) * rng.standard_normal(32)  # subnormal block
        flat[64:96] = -0.0  # an all-zero block
        flat[96:128] = 448.0 * rng.standard_normal(32)  # the e4m3 range's edge
        flat[128:160] = np.float32(6.0) * rng.uniform(-1.2, 1.2, 32)  # f4's
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def codes(a) -> np.ndarray:
    """The bit patterns of an array (f6 arrays as their codes)."""
    a = np.asarray(a)
    if a.dtype in (ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn):
        return reference.bits(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def assert_same(got, want, what=""):
    g, w = codes(got), codes(want)
    assert g.shape == w.shape, what
    bad = np.argwhere(g != w)
    assert not bad.size, f"{what}: {len(bad)} codes differ, first at {bad[0].tolist()}: " \
        f"{g[tuple(bad[0])]:#x} != {w[tuple(bad[0])]:#x}"


def assert_same_values(got, want, what=""):
    """Equal bit patterns except NaNs, which only need to be NaN."""
    g = np.asarray(got).astype(np.float32)
    w = np.asarray(want).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=what)
    keep = ~np.isnan(w)
    np.testing.assert_array_equal(codes(np.asarray(got))[keep], codes(want)[keep], err_msg=what)


def run_threads(work, n: int) -> None:
    """``work(t)`` on ``n`` threads at once; returns when all are done."""
    threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def q_jit(**kw):
    return jax.jit(lambda x, *g: ffi.quantize(x, global_scale=g[0] if g else None, **kw))


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: d.name)
@pytest.mark.parametrize("fmt, mode", CASES)
def test_quantize_matches_reference(fmt, mode, dtype):
    x = hard_inputs((3, 8, 64), dtype)
    q, s = q_jit(format=fmt, scale_mode=mode)(x)
    rq, rs = reference.quantize(x, fmt, scale_mode=mode)
    assert_same(s, rs, "scales")
    if FORMATS[fmt].bits == 6:
        assert q.dtype == np.uint8
        assert_same(q, reference.bits(rq), "elements")
    else:
        assert q.dtype == rq.dtype
        assert_same(q, rq, "elements")


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: d.name)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_dequantize_matches_reference(fmt, dtype):
    x = hard_inputs((5, 128), np.float32, seed=1)
    rq, rs = reference.quantize(x, fmt)
    # every element code and both extreme scale codes appear
    f = FORMATS[fmt]
    n = 1 << f.bits
    e = reference.bits(rq) if f.bits == 6 else codes(rq).copy()
    e.reshape(-1)[:n] = np.arange(n) if not f.is_int else np.arange(n).astype(np.uint8)
    elements = e if f.bits == 6 else e.view(rq.dtype)
    sc = codes(rs).copy()
    sc.reshape(-1)[:3] = [0x00, 0xFF, 0x7F]
    scales = sc.view(rs.dtype)
    ref_e = reference.from_bits(e, f.element) if f.bits == 6 else elements
    want = reference.dequantize(ref_e, scales, fmt, dtype=dtype)
    y = jax.jit(lambda e, s: ffi.dequantize(e, s, fmt, dtype=dtype))(elements, scales)
    assert y.dtype == dtype
    assert_same_values(y, want, fmt)


@pytest.mark.parametrize("shape, axis, fmt, k", [
    ((0, 64), -1, "mxfp8_e4m3", None),
    ((4, 0), -1, "mxfp4_e2m1", None),
    ((0,), 0, "nvfp4", None),
    ((1, 32), -1, "mxfp4_e2m1", None),
    ((3, 5, 96), -1, "mxfp6_e2m3", None),
    ((7, 16), 1, "nvfp4", None),
    ((64, 3, 5), 0, "mxfp8_e5m2", None),
    ((6, 64, 2), 1, "mxfp4_e2m1", None),
    ((2, 384), -1, "mxint8", 128),  # blocks of 128: two chunks of 64 lanes
    ((2, 288), -1, "mxfp4_e2m1", 96),  # three chunks of 32 lanes
    ((4, 24), -1, "mxfp8_e4m3", 3),  # three-lane vectors
    ((4, 48), -1, "mxfp6_e3m2", 8),
    # f4 by limits tables: groups of 8 software-pipelined, then the blocks left over
    ((5, 96), -1, "nvfp4", None),  # 30 blocks: 3 groups and 6 more
    ((5, 96), -1, "nvfp4", 32),
    ((3, 40), -1, "nvfp4", 8),  # groups wider than a block: horizontal maxima
    ((3, 384), -1, "nvfp4", 128),  # blocks in chunks: no table
    ((9, 160), -1, "mxfp4_e2m1", None),  # 45 blocks
    ((5, 48), -1, "mxfp4_e2m1", 16),
    ((3, 192), -1, "mxfp4_e2m1", 64),
    ((3, 36), -1, "mxfp4_e2m1", 4),
    # blocks whose length and group are not powers of two (groups of 10: horizontal maxima)
    ((10, 240), -1, "mxfp8_e4m3", 24),
    ((10, 240), -1, "mxfp4_e2m1", 24),
    ((10, 240), -1, "nvfp4", 24),
    ((7, 120), -1, "mxfp4_e2m1", 12),
])
def test_shapes_axes_block_sizes(shape, axis, fmt, k):
    x = hard_inputs(shape, np.float32, seed=2)
    q, s = q_jit(format=fmt, axis=axis, block_size=k)(x)
    rq, rs = reference.quantize(x, fmt, axis=axis, block_size=k)
    f = FORMATS[fmt]
    assert_same(s, rs, "scales")
    assert_same(q, reference.bits(rq) if f.bits == 6 else rq, "elements")
    y = jax.jit(lambda q, s: ffi.dequantize(q, s, fmt, axis=axis, block_size=k))(q, s)
    assert_same_values(y, reference.dequantize(rq, rs, fmt, axis=axis, block_size=k))


@pytest.mark.parametrize("fmt", ["mxfp6_e3m2", "mxfp6_e2m3"])
def test_packed_f6_is_mx_pack_layout(fmt):
    x = hard_inputs((4, 2, 64), np.float32, seed=3)
    q, s = q_jit(format=fmt, scale_mode="rceil", packed=True)(x)
    rq, rs = reference.quantize(x, fmt, scale_mode="rceil")
    assert q.shape == (4, 2, 48) and q.dtype == np.uint8
    assert_same(q, reference.pack(rq, 6))
    assert_same(s, rs)
    y = jax.jit(lambda q, s: ffi.dequantize(q, s, fmt, packed=True, dtype=jnp.bfloat16))(q, s)
    assert y.shape == x.shape
    assert_same_values(y, reference.dequantize(rq, rs, fmt, dtype="bf16"))


@pytest.mark.parametrize("g", [1.0, 3.5e-3, 2.0 ** -130, -448.0 * 6])
def test_nvfp4_global_scale(g):
    x = hard_inputs((4, 64), np.float32, seed=4) * np.float32(abs(g) if abs(g) > 1e-30 else 1)
    q, s = q_jit(format="nvfp4")(x, np.float32(g))
    rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(q, rq)
    assert_same(s, rs)
    y = jax.jit(lambda q, s, g: ffi.dequantize(q, s, "nvfp4", global_scale=g))(q, s,
                                                                               np.float32(g))
    assert_same_values(y, reference.dequantize(rq, rs, "nvfp4", global_scale=g))


def test_vmap_and_eager():
    x = hard_inputs((5, 3, 64), np.float32, seed=5)
    f = jax.vmap(lambda v: ffi.quantize(v, "mxfp4_e2m1", scale_mode="nearest"))
    q, s = jax.jit(f)(x)
    rq, rs = reference.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    assert_same(q, rq)
    assert_same(s, rs)
    qe, se = ffi.quantize(x, "mxfp4_e2m1", scale_mode="nearest")  # no jit
    assert_same(qe, rq)
    assert_same(se, rs)
    y = jax.vmap(lambda a, b: ffi.dequantize(a, b, "mxfp4_e2m1"), in_axes=(1, 1))(q, s)
    assert_same_values(y, np.moveaxis(reference.dequantize(rq, rs, "mxfp4_e2m1"), 1, 0))
    # nvfp4 with one global scale per example
    gs = np.float32([0.5, 3.0, 1e-3, 7.0, 1.0])
    q, s = jax.jit(jax.vmap(lambda v, g: ffi.quantize(v, "nvfp4", global_scale=g)))(x, gs)
    for i, g in enumerate(gs):
        rq, rs = reference.quantize(x[i], "nvfp4", global_scale=float(g))
        assert_same(q[i], rq)
        assert_same(s[i], rs)


def test_many_calls_from_many_threads():
    f = jax.jit(lambda x: ffi.quantize(x, "mxfp8_e4m3", scale_mode="rceil"))
    inputs = [hard_inputs((17, 256), np.float32, seed=s) for s in range(4)]
    wants = [reference.quantize(x, "mxfp8_e4m3", scale_mode="rceil") for x in inputs]
    errors: list[str] = []

    def work(t: int) -> None:
        for i in range(40):
            j = (t + i) % len(inputs)
            q, s = f(inputs[j])
            if not (np.array_equal(codes(q), codes(wants[j][0]))
                    and np.array_equal(codes(s), codes(wants[j][1]))):
                errors.append(f"thread {t} call {i}")

    run_threads(work, 4)
    assert not errors


def test_argument_errors():
    x = jnp.ones((4, 64), jnp.float32)
    with pytest.raises(ValueError, match="unknown MX format 'mxfp3'"):
        ffi.quantize(x, "mxfp3")
    with pytest.raises(ValueError, match="unknown scale_mode 'up'"):
        ffi.quantize(x, "mxfp8_e4m3", scale_mode="up")
    with pytest.raises(ValueError, match="block size 32 does not divide dimension 0"):
        ffi.quantize(x, "mxfp8_e4m3", axis=0)
    with pytest.raises(TypeError, match="must be float32, bfloat16 or float16, got int32"):
        ffi.quantize(x.astype(jnp.int32))
    with pytest.raises(ValueError, match="only nvfp4 takes a global scale"):
        ffi.quantize(x, "mxfp8_e4m3", global_scale=2.0)
    with pytest.raises(ValueError, match="packed f4 elements need an even block size"):
        ffi.quantize(x, "mxfp4_e2m1", block_size=1)


@pytest.mark.parametrize("op", ["quantize", "dequantize"])
@pytest.mark.parametrize("datatype,fmt,k,g", [
    ("e4m3fn:e8m0_t32", "mxfp8_e4m3", None, False),
    ("e2m1fo:e8m0_t16", "mxfp4_e2m1", 16, False),
    ("bfp16", "mxint8", 8, False),
    ("mxfp6e3", "mxfp6_e3m2", None, False),
    ("e2m1fo:e4m3fn_t16", "nvfp4", None, False),
    ("e2m1fo:e4m3fn_t16_gf32", "nvfp4", None, True),
])
def test_kernel_specs_keyed_by_datatype(op, datatype, fmt, k, g):
    """A kernel spec naming an MX format's datatype is the format's spec: equal, one name
    (the FFI target) and the same kernel text."""
    from mxlower.lowering import mx_kernels

    by_datatype = KernelSpec(op, datatype)
    by_name = KernelSpec(op, fmt, block_size=k, global_scale=g)
    assert by_datatype == by_name and hash(by_datatype) == hash(by_name)
    assert (by_datatype.format, by_datatype.block_size, by_datatype.global_scale) == (fmt, k, g)
    assert by_datatype.name == by_name.name
    assert mx_kernels.build(by_datatype) == mx_kernels.build(by_name)
    # the default block size is canonical whichever way it is spelled
    assert KernelSpec(op, fmt, block_size=FORMATS[fmt].block_size) == KernelSpec(op, fmt)


@pytest.mark.parametrize("datatype,match", [
    ("e5m6:e8m0_t32", "is not an MX format's: no MX format has e5m6 elements"),
    ("e4m3fn:e8m0_t32d0", "blocks dimension 0; the kernels block the last dimension"),
    ("int8:e8m0_t2x2", "is not an MX format's"),
    ("e4m3fn", "is not an MX format's"),
    ("nope", "unknown MX format 'nope'"),
])
def test_kernel_spec_datatype_errors(datatype, match):
    with pytest.raises(ValueError, match=match):
        KernelSpec("quantize", datatype)
    with pytest.raises(ValueError, match="block_size 16 contradicts datatype"):
        KernelSpec("quantize", "e4m3fn:e8m0_t32", block_size=16)


def test_large_arrays_split_across_xla_threads_from_many_callers():
    # 2^19 values: 4 chunks of ffi.THREAD_CHUNK, run on XLA's intra-op thread pool
    x = hard_inputs((512, 1024), np.float32, seed=6)
    assert x.size >= 2 * ffi.THREAD_CHUNK
    f = jax.jit(lambda x: ffi.quantize(x, "nvfp4"))
    g = jax.jit(lambda q, s: ffi.dequantize(q, s, "nvfp4", dtype=jnp.bfloat16))
    rq, rs = reference.quantize(x, "nvfp4")
    ry = reference.dequantize(rq, rs, "nvfp4", dtype="bf16")
    errors: list[str] = []

    def work(t: int) -> None:
        for i in range(5):
            q, s = f(x)
            y = g(q, s)
            if not (np.array_equal(codes(q), codes(rq)) and np.array_equal(codes(s), codes(rs))
                    and np.array_equal(np.isnan(np.asarray(y, np.float32)),
                                       np.isnan(ry.astype(np.float32)))):
                errors.append(f"thread {t} call {i}")

    run_threads(work, 3)
    assert not errors
    assert_same_values(g(*f(x)), ry)


# -- nvfp4: the f4 rounding thresholds, decided on the bits (mx_math.nvfp4_element_codes) --

F4_STEPS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def nvfp4_tie_blocks() -> np.ndarray:
    """Blocks of 16 f32 values: for every finite positive E4M3 scale s, the first value 6 * s
    (so the block's scale is s: amax / 6 is exact) and then, for each f4 threshold t, t * s and
    its f32 neighbours +-1..3 ulps, both signs, 15 to a block (padded with zeros)."""
    rows = []
    for code in range(1, 0x7F):
        s = float(np.array([code], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
        vals = []
        for t in F4_STEPS:
            ts = np.float32(t * s)
            assert float(ts) == t * s  # exact in f32
            bits = int(ts.view(np.uint32))
            vals += [np.uint32(bits + d).view(np.float32) for d in range(-3, 4)]
        vals += [-v for v in vals]
        for i in range(0, len(vals), 15):
            chunk = vals[i:i + 15]
            rows.append([np.float32(6 * s), *chunk, *[np.float32(0)] * (15 - len(chunk))])
    return np.array(rows, np.float32)


def f32_rne(v: fractions.Fraction) -> fractions.Fraction:
    """v rounded to f32 (RNE), subnormals included, for |v| below the overflow threshold."""
    if v == 0:
        return v
    a = abs(v)
    e = max(math.floor(math.log2(a)), -126)
    while fractions.Fraction(2) ** e > a:
        e -= 1
    while fractions.Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    ulp = fractions.Fraction(2) ** (e - 23)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2):
        n += 1
    return (n * ulp) * (1 if v > 0 else -1)


F4_VALUES = [fractions.Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]


def f4_code(q: fractions.Fraction, negative: bool) -> int:
    """RNE to f4E2M1FN of a value already clamped to [-6, 6], by exact comparison."""
    a = abs(q)
    best = min(range(8), key=lambda c: (abs(a - F4_VALUES[c]), c % 2))  # ties: even code
    return best | (8 if negative else 0)


def test_reference_nvfp4_ties_match_exact_arithmetic():
    """mxlower.reference (NumPy f32 division, ml_dtypes' f4 rounding) against the same rule in
    exact rational arithmetic, on a sample of the threshold neighbourhoods."""
    x = nvfp4_tie_blocks()
    rows = x[:: max(1, len(x) // 40)]
    rq, rs = reference.quantize(rows, "nvfp4")
    eq = codes(rq)
    for r in range(rows.shape[0]):
        s = fractions.Fraction(float(rs[r, 0].astype(np.float32)))
        assert s == fractions.Fraction(float(rows[r, 0])) / 6
        for i in range(16):
            y = fractions.Fraction(float(rows[r, i]))
            q = min(max(f32_rne(y / s), fractions.Fraction(-6)), fractions.Fraction(6))
            want = f4_code(q, bool(np.signbit(rows[r, i])))
            assert eq[r, i] & 0xF == want, (r, i, float(rows[r, i]), float(s))


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: d.name)
def test_nvfp4_threshold_neighbourhoods(dtype):
    """Every f4 tie and its neighbours, for every E4M3 scale value, without a global scale."""
    x = nvfp4_tie_blocks().astype(dtype)
    q, s = q_jit(format="nvfp4")(x)
    rq, rs = reference.quantize(x, "nvfp4")
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


@pytest.mark.parametrize("g", [0.125, 0.3, -3.0, 1.5 * 2.0 ** -140, 2.0 ** -149, 7e30])
def test_nvfp4_threshold_neighbourhoods_global_scale(g):
    """The same neighbourhoods as x = RNE(y * g): exact for a power of two g, near the ties
    otherwise; subnormal g makes x subnormal."""
    y = nvfp4_tie_blocks()
    with np.errstate(over="ignore", under="ignore"):
        x = (y.astype(np.float64) * g).astype(np.float32)
    q, s = q_jit(format="nvfp4")(x, np.float32(g))
    rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


# -- nvfp4 with the limits of mx_math.nvfp4_limit: every element test one comparison of |x| --

#: global scales with |g| >= 2^-115 (where the kernel uses the limits): not powers of two,
#: negative, near the cut, and large enough that t * s * |g| overflows f32
LIMIT_G = (None, 0.3, -3.0, 1.0 / 3.0, -7.3e-30, 2.0 ** -115, 1.7e30, -1.1e36)


def brute_force_limits(g: float | None) -> np.ndarray:
    """int64 [126, 7]: for every finite non-zero E4M3 scale s and f4 threshold t, the bits of
    the smallest f32 |x| whose y = RNE_f32(|x| / |g|) (NumPy's IEEE f32 division) passes t
    (y >= t * s where the f4 tie rounds up, y > t * s where down), found by trying the 33
    f32 values around t * s * |g|."""
    s = np.array([float(np.array([c], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
                  for c in range(1, 0x7F)])
    ga = np.float32(1.0 if g is None else abs(g))
    out = np.zeros((len(s), len(F4_STEPS)), np.int64)
    for i, (t, up) in enumerate(zip(F4_STEPS, (False, True, False, True, False, True, False))):
        p = (s * t).astype(np.float32)
        with np.errstate(over="ignore"):
            near = (p.astype(np.float64) * float(ga)).astype(np.float32)
        cand = near.view(np.uint32).astype(np.int64)[:, None] + np.arange(-16, 17)
        cand = np.clip(cand, 0, 0x7F800000)
        with np.errstate(over="ignore", under="ignore"):
            y = cand.astype(np.uint32).view(np.float32) / ga
        ok = (y >= p[:, None]) if up else (y > p[:, None])
        assert np.all(ok[:, 1:] >= ok[:, :-1]) and ok[:, -1].all() and not ok[:, 0].any()
        out[:, i] = cand[np.arange(len(s)), np.argmax(ok, axis=1)]
    return out


@pytest.mark.parametrize("g", LIMIT_G)
def test_nvfp4_limit_recipe_is_the_smallest_passing_x(g):
    """mx_math.nvfp4_limit (run in NumPy) gives, for every scale and threshold, exactly the
    smallest f32 |x| that passes: the claim that turns the element rounding into comparisons
    of |x|'s bits, global scale folded in."""
    from mxlower.lowering import mx_math

    s = np.array([np.array([c], np.uint8).view(ml_dtypes.float8_e4m3fn)[0]
                  for c in range(1, 0x7F)]).astype(np.float32)
    ga = None if g is None else np.float64(np.float32(abs(g)))
    got = np.stack([np.asarray(mx_math.nvfp4_limit(NumPyOps(), s * np.float32(t), up, ga),
                               np.int64)
                    for t, up in mx_math._F4_THRESHOLDS], axis=1)
    assert np.array_equal(got & 0xFFFFFFFF, brute_force_limits(g))


@pytest.mark.parametrize("g", LIMIT_G)
def test_nvfp4_kernel_at_the_limits(g):
    """Blocks of every E4M3 scale (led by x = RN(6 s |g|)), the rest the f32 values at and
    next to every limit of that scale, both signs: the kernel against mxlower.reference."""
    lim = brute_force_limits(g)
    ga = 1.0 if g is None else abs(g)
    rows = []
    for c in range(1, 0x7F):
        s = float(np.array([c], np.uint8).view(ml_dtypes.float8_e4m3fn)[0])
        with np.errstate(over="ignore"):
            lead = np.float32(6 * s * ga)
        vals = (lim[c - 1][:, None] + np.array([-1, 0, 1])).reshape(-1)
        vals = np.clip(vals, 0, 0x7F7FFFFF).astype(np.uint32).view(np.float32)
        vals = np.concatenate([vals, -vals])
        for i in range(0, len(vals), 15):
            chunk = vals[i:i + 15]
            rows.append([lead, *chunk, *[np.float32(0)] * (15 - len(chunk))])
    x = np.array(rows, np.float32)
    if g is None:
        q, s = q_jit(format="nvfp4")(x)
    else:
        q, s = q_jit(format="nvfp4")(x, np.float32(g))
    rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


def test_mxfp4_limit_recipe_is_the_scaled_threshold():
    """mx_math.f4_limit_pow2 (run in NumPy, through the kernels' ldexp on the bits) for every
    shared exponent and f4 threshold: t * 2^E exactly (subnormal, normal or +Inf), one f32
    further for the thresholds whose tie rounds down."""
    from mxlower.lowering import mx_math

    e = np.arange(-127, 128, dtype=np.int64)
    for t, up in mx_math._F4_THRESHOLDS:
        got = np.asarray(mx_math.f4_limit_pow2(NumPyOps(), t, up, e)) & 0xFFFFFFFF
        with np.errstate(over="ignore"):
            want = np.ldexp(np.float32(t), e.astype(np.int32)).astype(np.float32)
        want = want.view(np.uint32).astype(np.int64) + (0 if up else 1)
        assert np.array_equal(got, want), t


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: d.name)
def test_mxfp4_kernel_at_the_limits(dtype):
    """mxfp4 blocks of every shared exponent from -127 to 125 (led by 6 * 2^E), the rest the
    values at and next to each limit t * 2^E, both signs: kernel against mxlower.reference
    (bf16 and f16 inputs round the neighbours, and reach fewer exponents)."""
    rows = []
    for e in range(-127, 126):
        lead = np.ldexp(np.float32(6.0), e)
        lim = np.array([np.ldexp(np.float32(t), e) for t in F4_STEPS], np.float32)
        vals = (lim.view(np.uint32).astype(np.int64)[:, None] + np.array([-1, 0, 1]))
        vals = np.clip(vals.reshape(-1), 0, 0x7F7FFFFF).astype(np.uint32).view(np.float32)
        vals = np.concatenate([vals, -vals])
        for i in range(0, len(vals), 31):
            chunk = vals[i:i + 31]
            rows.append([lead, *chunk, *[np.float32(0)] * (31 - len(chunk))])
    with np.errstate(over="ignore", under="ignore"):
        x = np.array(rows, np.float32).astype(dtype)
    q, s = q_jit(format="mxfp4_e2m1")(x)
    rq, rs = reference.quantize(x, "mxfp4_e2m1")
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


@pytest.mark.parametrize("g", [None, 1.0, 2.0 ** -140, 3.0 * 2.0 ** -149])
def test_nvfp4_subnormal_values(g):
    """Subnormal y (and x) next to normal ones: blocks whose scale is the smallest E4M3 values
    or zero, and every subnormal f32 binade."""
    rng = np.random.default_rng(7)
    mant = rng.integers(1, 1 << 23, (64, 16)).astype(np.uint32)
    mant >>= rng.integers(0, 23, (64, 16)).astype(np.uint32)
    sub = mant.view(np.float32) * np.where(rng.random((64, 16)) < 0.5, -1, 1).astype(np.float32)
    big = np.float32([6 * 2.0 ** -9, 6 * 7 * 2.0 ** -9, 2.0 ** -120, 0.0])
    sub[:, 0] = big[np.arange(64) % 4]
    if g is None:
        q, s = q_jit(format="nvfp4")(sub)
        rq, rs = reference.quantize(sub, "nvfp4")
    else:
        x = sub if g == 1.0 else sub * np.float32(2.0 ** 100)  # y = x / g spans the ranges
        q, s = q_jit(format="nvfp4")(x, np.float32(g))
        rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


@pytest.mark.parametrize("g", [2.0 ** -115, float(np.nextafter(np.float32(2.0 ** -115),
                                                                 np.float32(0))), -2.0 ** -115])
def test_nvfp4_global_scale_at_the_subnormal_cut(g):
    """|g| = 2^-115 is where the kernel starts reading subnormal x as zero (mx_math.NVFP4_G_FAST):
    subnormal x of every binade in blocks whose scale is the smallest E4M3 values, where
    x / g comes closest to the smallest element threshold, on both sides of the cut."""
    rng = np.random.default_rng(8)
    mant = (np.uint32((1 << 23) - 1) >> rng.integers(0, 23, (64, 16)).astype(np.uint32))
    mant -= rng.integers(0, 3, (64, 16)).astype(np.uint32) * (mant > 4)
    x = mant.view(np.float32) * np.where(rng.random((64, 16)) < 0.5, -1, 1).astype(np.float32)
    with np.errstate(under="ignore"):
        lead = (np.float64([6 * 2.0 ** -9, 6 * 2.0 ** -8, 6 * 3 * 2.0 ** -9, 0.0]) * abs(g))
    x[:, 0] = lead.astype(np.float32)[np.arange(64) % 4]
    q, s = q_jit(format="nvfp4")(x, np.float32(g))
    rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(s, rs, "scales")
    assert_same(q, rq, "elements")


# -- the nvfp4 kernel on a CPU that flushes subnormals (MXCSR DAZ and FTZ, as XLA:CPU may) ----

_FLUSHING_CALL = """
llvm.func @call_flushing(%h: !llvm.ptr, %frame: !llvm.ptr) -> !llvm.ptr {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %slot = llvm.alloca %c1 x i32 : (i64) -> !llvm.ptr
  llvm.call_intrinsic "llvm.x86.sse.stmxcsr"(%slot) : (!llvm.ptr) -> ()
  %old = llvm.load %slot : !llvm.ptr -> i32
  %daz_ftz = llvm.mlir.constant(32832 : i32) : i32
  %new = llvm.or %old, %daz_ftz : i32
  llvm.store %new, %slot : i32, !llvm.ptr
  llvm.call_intrinsic "llvm.x86.sse.ldmxcsr"(%slot) : (!llvm.ptr) -> ()
  %r = llvm.call %h(%frame) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr
  llvm.store %old, %slot : i32, !llvm.ptr
  llvm.call_intrinsic "llvm.x86.sse.ldmxcsr"(%slot) : (!llvm.ptr) -> ()
  llvm.return %r : !llvm.ptr
}
llvm.func @call_flushing_address() -> !llvm.ptr {
  %a = llvm.mlir.addressof @call_flushing : !llvm.ptr
  llvm.return %a : !llvm.ptr
}
"""


@pytest.fixture(scope="module")
def call_flushing():
    """``f(handler address, call frame address)``: the handler run with the x86 MXCSR's
    denormals-are-zero and flush-to-zero bits set (restored after)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("MXCSR is x86's")
    ir = upstream.module("ir")
    ctx = upstream.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(_FLUSHING_CALL)
        for op in module.body.operations:
            op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    engine, address = ffi.jit(ctx, module, "call_flushing_address")
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(address)
    yield fn
    del engine


def quantize_flushing(call, x: np.ndarray, g) -> tuple[np.ndarray, np.ndarray]:
    """nvfp4 quantize of f32 ``x`` [rows, cols] by the kernel's handler through the C ABI on
    this thread, with subnormals flushed: (element codes one a byte, scale codes)."""
    spec = KernelSpec("quantize", "nvfp4", global_scale=g is not None)
    ck = ffi.compile_kernel(spec)
    keep: list = []
    x = np.ascontiguousarray(x, np.float32)
    ins = [x] + ([np.float32([g])] if g is not None else [])
    args = [abi.buffer_arg(a.ctypes.data, o.dtype.name, () if o.kind == "scalar" else x.shape,
                           keep) for o, a in zip(spec.operands(), ins)]
    q = np.zeros(x.size // 2, np.uint8)
    s = np.zeros(x.size // 16, np.uint8)
    rets = [abi.buffer_arg(q.ctypes.data, "float4_e2m1fn", x.shape, keep),
            abi.buffer_arg(s.ctypes.data, "float8_e4m3fn", (x.shape[0], x.shape[1] // 16),
                           keep)]
    api = abi.Api(struct_size=abi.Api.XLA_FFI_Error_Create.offset + 8)  # no thread pool
    frame = abi.call_frame(ctypes.addressof(api), args, rets, keep)
    assert call(ck.address, ctypes.addressof(frame)) is None
    codes_ = np.stack([q & 0xF, q >> 4], axis=-1).reshape(x.shape)
    return codes_, s.reshape(x.shape[0], -1)


@pytest.mark.parametrize("g", [None, 1.0, 0.3, -3.0, 2.0 ** -115,
                               float(np.nextafter(np.float32(2.0 ** -115), np.float32(0))),
                               1.5 * 2.0 ** -117, 2.0 ** -120, 1.5 * 2.0 ** -125, 1.5 * 2.0 ** -140,
                               2.0 ** -149])
def test_nvfp4_kernel_exact_when_subnormals_flush(call_flushing, g):
    """The same answers with DAZ/FTZ on: thresholds neighbourhoods, and subnormal x in blocks
    with the smallest scales (the inputs the |g| >= 2^-115 shortcut of x / g reads as zero)."""
    ties = nvfp4_tie_blocks()
    rng = np.random.default_rng(9)
    mant = (np.uint32((1 << 23) - 1) >> rng.integers(0, 23, (64, 16)).astype(np.uint32))
    sub = mant.view(np.float32) * np.where(rng.random((64, 16)) < 0.5, -1, 1).astype(np.float32)
    sub[:, 0] = np.float32([6 * 2.0 ** -9, 6 * 3 * 2.0 ** -9, 2.0 ** -120, 0.0])[
        np.arange(64) % 4]
    gg = 1.0 if g is None else abs(g)
    with np.errstate(over="ignore", under="ignore"):
        x = np.concatenate([ties.astype(np.float64) * gg, sub.astype(np.float64) * np.where(
            np.arange(16) == 0, gg, 1.0)]).astype(np.float32)
    q, s = quantize_flushing(call_flushing, x, g)
    rq, rs = reference.quantize(x, "nvfp4", global_scale=g)
    assert_same(s, codes(rs), "scales")
    assert_same(q.astype(np.uint8), codes(rq), "elements")
