"""mxlower.jax.scaled_dot with ``impl="auto"`` on the CPU: where the run-time test proves an
f32 contraction exact, the fused dot kernel (mxlower.execution.ffi_dot, an XLA FFI custom call
reading the packed operands); otherwise each MX side dequantized to f32 by the registered
dequantize kernel and contracted in f64 on the values read exactly from their bits
(:func:`mxlower.lowering.mx_math.lower_scaled_dot`).  Checked: the kernels are what runs; the
result is within docs/semantics.md section 6's bound of mxlower.reference and, in the f64
branch, has the same bits as ``impl="xla"`` (the portable StableHLO), on both sides of the
f32/f64 switch
(scale codes near 0x00 against codes near 0xFE, subnormal operands and products, sums that
overflow f32 and cancel), for every format, odd block counts, batch dimensions, both operand
layouts, bf16/f16 results and a global scale, under jit, vmap, grad and eager calls.
test_xla_exactness.py runs issue 11's scaled-dot cases through both impls as well.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.bindings import upstream
from mxlower.execution import ffi_dot
from mxlower.execution.run import run_module
from mxlower.formats import FLOAT_TYPES, FORMATS
from mxlower.lowering import dot_kernels
from mxlower.testing import assert_dot_close

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402

F32 = np.float32
LAST = (((1,), (1,)), ((), ()))


def _same(got, want) -> None:
    """The same dtype, shape and bits (NaNs only need to be NaNs on both sides)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(got.astype(F32))
    np.testing.assert_array_equal(nan, np.isnan(want.astype(F32)))
    u = {2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    np.testing.assert_array_equal(got.view(u)[~nan], want.view(u)[~nan])


def _side(rng, fmt: str, shape, axis: int = -1, codes=None, g=None) -> mxj.MXArray:
    """Random data quantized to ``fmt`` along ``axis``; the scale codes replaced by ``codes``
    (an array of uint8 codes drawn per block, or None to keep the quantizer's)."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))).astype(F32)
    x[rng.random(shape) < 0.1] = 0
    q = mxj.quantize(x, fmt, axis=axis, global_scale=g, impl="xla")
    if codes is None:
        return q
    s = rng.choice(np.asarray(codes, np.uint8), q.scales.shape).astype(np.uint8)
    sdt = ml_dtypes.float8_e4m3fn if FORMATS[fmt].is_nvfp4 else ml_dtypes.float8_e8m0fnu
    return mxj.MXArray(q.elements, s.view(sdt), fmt, axis=axis, global_scale=g)


def _values(v) -> np.ndarray:
    """The reference's f32 value of a side (nvfp4 without its global scale)."""
    if not isinstance(v, mxj.MXArray):
        return np.asarray(v).astype(F32)
    e = np.asarray(v.elements)
    t = FLOAT_TYPES.get(FORMATS[v.format].element)
    if t is not None and t.bits == 6:  # JAX holds f6 elements as uint8 codes
        e = R.from_bits(e, FORMATS[v.format].element)
    return R.dequantize(e, np.asarray(v.scales), v.format, axis=v.axis,
                        block_size=v.block_size)


def _g(a, b):
    gs = [float(v.global_scale) for v in (a, b)
          if isinstance(v, mxj.MXArray) and v.global_scale is not None]
    return None if not gs else float(F32(gs[0]) * F32(gs[1])) if len(gs) == 2 else gs[0]


def _check(a, b, dn=LAST, out=jnp.float32, *, kernel=True, dot=None, f64=False):
    """auto and xla under jit: the kernels run (or not, ``kernel=False``; the dot kernel:
    ``dot``, default ``kernel``) in auto only, section 6's bound around the reference, and
    (``f64``: data only the f64 contraction takes) the same bits as xla."""
    def auto(a, b):
        return mxj.scaled_dot(a, b, dn, out, impl="auto")

    def xla(a, b):
        return mxj.scaled_dot(a, b, dn, out, impl="xla")

    text = jax.jit(auto).lower(a, b).compile().as_text()
    # (XLA folds the branch away where the test is a constant: nvfp4 x nvfp4)
    assert ("mxlower_dequantize_" in text or "mxlower_dot_" in text) == kernel
    assert ("mxlower_dot_" in text) == (kernel if dot is None else dot)
    assert "mxlower_" not in jax.jit(xla).lower(a, b).compile().as_text()
    got = jax.jit(auto)(a, b)
    if f64:
        _same(got, jax.jit(xla)(a, b))
    outname = {jnp.float32: "f32", jnp.bfloat16: "bf16", jnp.float16: "f16"}[out]
    va, vb = _values(a), _values(b)
    ref = R.scaled_dot(va, None, vb, None, dimension_numbers=dn, global_scale=_g(a, b))
    if np.all(np.isfinite(ref)):
        assert_dot_close(got, va, vb, dn, outname, _g(a, b), what="impl=auto")
    else:  # NaN and Inf where the reference has them (the rest: the bits of impl="xla")
        bad = ~np.isfinite(ref)
        np.testing.assert_array_equal(np.asarray(got).astype(F32)[bad], ref[bad])
    return got


ALL = list(FORMATS)
#: scale codes of ordinary data (the f32 contraction) and near both ends of the range (the
#: f64 one: products and partial results below 2^-126); nvfp4's E4M3 scales
ORDINARY, LOW = range(0x78, 0x88), range(0x00, 0x05)
NV_CODES = range(0x01, 0x7F)


def _high(fmt: str) -> range:
    """The six largest scale codes whose values stay finite in f32 (section 5)."""
    top = 253 - FORMATS[fmt].emax_elem  # max_elem * 2^(top - 127) < 2^128
    return range(top - 5, top + 1)


PAIRS = list(zip(ALL, ALL[1:] + ALL[:1])) + [(ALL[0], ALL[0])]


@pytest.mark.parametrize("lf, rf", PAIRS)
def test_every_format_on_both_sides_of_the_switch(lf, rf):
    """Ordinary scales (the f32 contraction), then one side's scales near 0x00 against the
    other's near the top (values that may lie below 2^-126: the run-time test picks the f64
    contraction); K of 3 blocks."""
    rng = np.random.default_rng(PAIRS.index((lf, rf)))
    nv = [FORMATS[f].is_nvfp4 for f in (lf, rf)]

    for tiny in (False, True):
        if not tiny:
            ca, cb = (NV_CODES if n else ORDINARY for n in nv)
        elif not nv[0]:
            ca, cb = LOW, (NV_CODES if nv[1] else _high(rf))
        else:
            ca, cb = NV_CODES, LOW
        a = _side(rng, lf, (5, 96), codes=ca)
        b = _side(rng, rf, (7, 96), codes=cb)
        _check(a, b, f64=tiny)


def test_subnormal_products_and_results():
    """Issue 11's reproducer (2^-22, 0 when flushed) and a K block of each kind: tiny x small
    (subnormal products), huge x tiny (normal products), tiny x tiny (underflow); rows 0-2
    have zeros in the huge blocks, so their results are subnormal sums."""
    ones = jnp.ones((1, 32), ml_dtypes.float8_e4m3fn)
    s = np.array([[0x00]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    t = np.array([[0xE3]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    a, b = mxj.MXArray(ones, s, "mxfp8_e4m3"), mxj.MXArray(ones, t, "mxfp8_e4m3")
    assert float(_check(a, b, f64=True)[0, 0]) == 2.0 ** -22
    rng = np.random.default_rng(5)
    kinds = np.array([0, 1, 0, 2, 0, 1, 0, 0])
    # rhs scales 2^-31..2^-16 beside the lhs's 2^-127..2^-123: products near 2^-140
    rc = np.where(kinds == 0, rng.choice(range(0x60, 0x70), (5, 8)), rng.choice(LOW, (5, 8)))
    for lf, rf in (("mxfp8_e4m3", "mxfp8_e5m2"), ("mxfp4_e2m1", "mxfp6_e2m3"),
                   ("mxint8", "mxfp6_e3m2")):
        lc = np.where(kinds == 1, rng.choice(_high(lf), (6, 8)), rng.choice(LOW, (6, 8)))
        qa = _side(rng, lf, (6, 256))
        qb = _side(rng, rf, (5, 256))
        e = np.asarray(qa.elements).copy()
        e.reshape(6, 8, 32)[:3, kinds == 1] = 0
        a = mxj.MXArray(e, lc.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu), lf)
        b = mxj.MXArray(qb.elements, rc.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu), rf)
        got = np.asarray(_check(a, b, f64=True))
        assert np.any((got != 0) & (np.abs(got) < 2.0 ** -126))  # subnormal results survive


def test_f32_sums_that_overflow_and_cancel():
    """32 * 2^137 twice with opposite signs, then 32: an f32 dot gives NaN or Inf; exact: 32."""
    e = np.ones((1, 96), ml_dtypes.float8_e4m3fn)
    e[0, 32:64] = -1
    sa = np.array([[0xFE, 0xFE, 0x7F]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb = np.array([[0x89, 0x89, 0x7F]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    a = mxj.MXArray(e, sa, "mxfp8_e4m3")
    b = mxj.MXArray(np.ones((1, 96), ml_dtypes.float8_e4m3fn), sb, "mxfp8_e4m3")
    assert float(_check(a, b, f64=True)[0, 0]) == 32.0


@pytest.mark.parametrize("fmt", ["mxfp8_e5m2", "mxfp8_e4m3", "mxint8", "mxfp4_e2m1", "nvfp4"])
@pytest.mark.parametrize("big", [100, 118])
def test_huge_activations_against_small_scaled_weights(fmt, big):
    """x near 2^big against weights scaled by about 2^-40: every product and sum is in f32's
    range, but the GEMV's block sums of *unscaled* weights (e5m2 values reach 57344 = 2^15.8)
    times x leave it from 2^(127 - 21) on for e5m2.  The run-time test sends such x to the
    f64 contraction (x at 2^118); x at 2^100 leaves every format the room the kernel needs."""
    rng = np.random.default_rng(big)
    w = (rng.standard_normal((6, 96)) * 2.0 ** -40).astype(F32)
    b = mxj.quantize(w, fmt, impl="xla")
    x = (rng.standard_normal((1, 96)) * 2.0 ** big).astype(F32)
    got = _check(x, b)
    assert np.all(np.isfinite(np.asarray(got)))


@pytest.mark.parametrize("n", [4, 1 << 17])  # on XLA's thread, and split over its pool
def test_gemv_block_sums_keep_subnormal_partial_sums(n):
    """The one-row GEMV sums a block's unscaled e4m3 values times x before the block's factor:
    here x = 2^-100 (1 + 2^-23) and -2^-100 against the subnormal code 2^-9 leave 2^-132,
    a subnormal partial sum, which the factor 2^100 turns into the result 2^-32.  Flushing
    it (a thread with FTZ/DAZ set) would give 0; the run-time test passes (q = -123), so the
    kernel runs."""
    x = np.zeros((1, 32), F32)
    x[0, 0], x[0, 1] = F32(2.0 ** -100 * (1 + 2.0 ** -23)), F32(-2.0 ** -100)
    codes = np.zeros((n, 32), np.uint8)
    codes[:, :2] = 1
    s = np.full((n, 1), 227, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    w = mxj.MXArray(codes.view(ml_dtypes.float8_e4m3fn), s, "mxfp8_e4m3")
    got = np.asarray(_check(x, w))
    assert np.all(got == F32(2.0 ** -32))


def test_nan_scales_and_nonfinite_plain_values():
    rng = np.random.default_rng(9)
    a = _side(rng, "mxfp8_e4m3", (4, 64))
    s = np.asarray(a.scales).view(np.uint8).copy()
    s[1, 0] = 0xFF  # a NaN scale: that row is NaN
    a = mxj.MXArray(a.elements, s.view(ml_dtypes.float8_e8m0fnu), "mxfp8_e4m3")
    p = rng.standard_normal((3, 64)).astype(F32)
    p[2, 5] = np.inf
    got = np.asarray(_check(a, p))
    assert np.all(np.isnan(got[1])) and not np.isnan(got[0, 0])


def test_layouts_batch_dims_and_plain_sides():
    rng = np.random.default_rng(11)
    # rhs [K, N] blocked along axis 0
    _check(_side(rng, "mxfp8_e4m3", (4, 96)), _side(rng, "mxfp4_e2m1", (96, 6), axis=0),
           (((1,), (0,)), ((), ())))
    # [B, M, K] x [B, N, K], and [K, B, M] x [B, N, K] with the batch dimension elsewhere
    _check(_side(rng, "mxint8", (3, 4, 64), codes=LOW), _side(rng, "mxfp6_e2m3", (3, 5, 64)),
           (((2,), (2,)), ((0,), (0,))))
    _check(_side(rng, "mxfp8_e5m2", (64, 3, 4), axis=0), _side(rng, "nvfp4", (3, 5, 64)),
           (((0,), (2,)), ((1,), (0,))))
    # two contracting dimensions, the blocked one among them: no dot kernel (the dequantize
    # kernels and XLA's dot)
    _check(_side(rng, "mxfp8_e4m3", (4, 64, 6), axis=1),
           rng.standard_normal((6, 64, 9)).astype(ml_dtypes.bfloat16),
           (((1, 2), (1, 0)), ((), ())), dot=False)
    # one plain side either way, with subnormal plain values against 2^100 scales
    plain = (rng.standard_normal((3, 64)) * 2.0 ** -140).astype(F32)
    _check(_side(rng, "mxfp8_e4m3", (4, 64), codes=[0xE3, 0xE0]), plain)
    _check(plain.astype(ml_dtypes.bfloat16), _side(rng, "mxfp6_e3m2", (2, 64), codes=LOW))


@pytest.mark.parametrize("fmt", ALL)
def test_k_major_weights_are_read_as_stored(fmt):
    """Weights ``[K, N]`` blocked along K (a ``[in, out]`` kernel quantized along its input
    axis) against plain rows: the K-major kernel reads them as stored -- its call alone, no
    transpose of the weights (XLA:CPU's of a 16 MB f8 array took 64 ms against a 1.2 ms
    GEMV: BENCHMARKS.md) -- batched too, under vmap and grad; the range ends take its f64
    contraction.  More rows than a GEMV's take it too (:func:`test_k_major_rows_any_count`).
    """
    rng = np.random.default_rng(ALL.index(fmt) + 70)
    k = FORMATS[fmt].block_size
    path = ffi_dot.host_path()
    kn = (((1,), (0,)), ((), ()))
    for plain, M, N in ((F32, 3, 40), (ml_dtypes.bfloat16, 8, 64), (F32, 1, 7), (F32, 40, 34)):
        x = rng.standard_normal((M, 2 * k)).astype(plain)
        w = _side(rng, fmt, (2 * k, N), axis=0)
        _check(x, w, kn)
        text = jax.jit(lambda u, v: mxj.scaled_dot(u, v, kn)).lower(x, w).as_text()
        name = "f32" if plain is F32 else "bf16"
        # (f4 weights of an odd N keep the transpose: their rows of K start mid-byte)
        kn_ = FORMATS[fmt].bits != 4 or N % 2 == 0
        assert re.findall(r"custom_call @(\w+)", text) == [
            f"mxlower_dot_{name}_{fmt}k{k}{'_kn' if kn_ else ''}_{path}"]
        assert ("stablehlo.transpose" in text) != kn_
    # [B, K, N] with the batch first; vmap over a leading axis of both; the gradient
    xb = rng.standard_normal((2, 3, k)).astype(F32)
    wb = _side(rng, fmt, (2, k, 33), axis=1)
    _check(xb, wb, (((2,), (1,)), ((0,), (0,))))
    w = _side(rng, fmt, (k, 24), axis=0)
    xs = rng.standard_normal((4, 2, k)).astype(F32)
    got = jax.vmap(lambda u: mxj.scaled_dot(u, w, kn))(xs)
    for i in range(4):
        assert_dot_close(got[i], xs[i], _values(w), kn, what=f"vmap {i}")
    g = jax.grad(lambda u: mxj.scaled_dot(u, w, kn).sum())(xs[0])
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(_values(w).sum(axis=1), g.shape),
                               rtol=1e-6, atol=1e-6 * np.abs(_values(w)).sum(axis=1).max())
    if not FORMATS[fmt].is_nvfp4:  # scales near the bottom of the range: the f64 path
        _check(rng.standard_normal((3, k)).astype(F32), _side(rng, fmt, (k, 40), axis=0,
                                                              codes=LOW), kn, f64=True)


def test_k_major_rows_any_count(monkeypatch):
    """K-major weights against plain rows take the K-major kernel whatever the rows' count
    (no transposed copy of the weights: past a few hundred rows its tiles share each chunk
    of decoded weights, and XLA's threads split the rows in blocks of KN_BLOCK_ROWS), exact
    there: f32, f16 and bf16 rows, more than a block of rows (tiles of 8, then 4 + 2 + 1,
    in the last block) -- but more than KN_COPY_ROWS bf16 rows, which take the [N, K]
    kernel on its handler's copy where that kernel's GEMM runs by default: the same bits as
    the weights held [N, K]."""
    from mxlower.lowering import dot_call

    rng = np.random.default_rng(7)
    kn = (((1,), (0,)), ((), ()))
    w = _side(rng, "mxfp8_e4m3", (64, 40), axis=0)
    nk = dot_kernels.DotSpec("bf16", "mxfp8_e4m3", path=ffi_dot.host_path())
    copy = dot_kernels.gemm_by_default(nk, dot_kernels.cpu_vendor())
    for dt in (F32, np.float16, ml_dtypes.bfloat16):
        for M in (257, 1025, 4097):
            x = np.zeros((M, 64), dt)
            text = jax.jit(lambda u, v: mxj.scaled_dot(u, v, kn)).lower(x, w).as_text()
            calls = " ".join(re.findall(r"custom_call @(\w+)", text))
            copied = copy and dt is ml_dtypes.bfloat16 and M > dot_call.KN_COPY_ROWS
            assert ("_knc_" if copied else "_kn_") in calls, (dt, M, calls)
            assert "stablehlo.transpose" not in text
    M = dot_kernels.KN_BLOCK_ROWS + 15
    x = rng.standard_normal((M, 64)).astype(ml_dtypes.bfloat16)
    _check(x, w, kn)  # (the copy where it runs)
    if copy:
        held = mxj.MXArray(np.ascontiguousarray(np.asarray(w.elements).T),
                           np.ascontiguousarray(np.asarray(w.scales).T), "mxfp8_e4m3", axis=1)
        _same(jax.jit(lambda u, v: mxj.scaled_dot(u, v, kn))(x, w),
              jax.jit(lambda u, v: mxj.scaled_dot(u, v))(x, held))
    monkeypatch.setattr(dot_call, "KN_COPY_ROWS", 1 << 30)  # the K-major kernel
    for dt in (F32, ml_dtypes.bfloat16):
        _check(rng.standard_normal((M, 64)).astype(dt), w, kn)


@pytest.mark.parametrize("fmt", ["mxfp4_e2m1", "mxfp8_e4m3", "nvfp4", "mxint8"])
def test_f16_rows_as_f32(fmt):
    """More than F16_ROWS f16 rows against MX weights held [N, K] are converted to f32 (an
    exact convert) for the kernel of f32 rows -- its streaming tiles, and past them its
    GEMM on transposed panels where that is a default one --: the same bits as f32 rows of
    the same values; up to F16_ROWS the kernel of f16 rows; either order of the sides."""
    from mxlower.lowering import dot_call

    rng = np.random.default_rng(ALL.index(fmt) + 70)
    k = FORMATS[fmt].block_size
    path = ffi_dot.host_path()
    w = _side(rng, fmt, (40, 2 * k))
    most = dot_call.F16_ROWS
    for M in (most, most + 1, 200):
        x = (rng.standard_normal((M, 2 * k)) * 4).astype(np.float16)
        _check(x, w)
        text = jax.jit(lambda u, v: mxj.scaled_dot(u, v)).lower(x, w).as_text()
        calls = re.findall(r"custom_call @(\w+)", text)
        spec32 = dot_kernels.DotSpec("f32", fmt, path=path)
        if M <= most:
            assert calls == [f"mxlower_dot_f16_{fmt}k{k}_{path}"], calls
            continue
        if M > spec32.stream_m and not dot_kernels.gemm_by_default(
                spec32, dot_kernels.cpu_vendor()):
            assert not any(c.startswith("mxlower_dot_") for c in calls), calls
            continue
        assert calls == [f"mxlower_dot_f32_{fmt}k{k}_{path}"], calls
        assert "stablehlo.convert" in text
        _same(jax.jit(lambda u, v: mxj.scaled_dot(u, v))(x, w),
              jax.jit(lambda u, v: mxj.scaled_dot(u, v))(x.astype(F32), w))
        _same(jax.jit(lambda u, v: mxj.scaled_dot(v, u))(x, w),  # w x^T: the kernel swaps
              jax.jit(lambda u, v: mxj.scaled_dot(v, u))(x.astype(F32), w))


@pytest.mark.parametrize("fmt", ALL)
def test_mx_rows_against_k_major_weights(fmt):
    """MX rows against K-major MX weights: up to KN_MX_ROWS of them dequantized (the
    dequantize kernel; to bf16 where every value of their format is exact there, else f32)
    and read by the K-major kernel as plain rows, more by the MX pair's kernel on the copy
    of the weights its handler transposes (DotSpec.transposes_b) where that kernel takes
    them, else dequantized too -- never a transpose by XLA --; all within section 6, the
    range ends (rows of values below f32's and bf16's normal range: the f64 contraction)
    the same bits as impl="xla"; batched, and the weights as the lhs (``w^T x``)."""
    from mxlower.lowering import dot_call

    rng = np.random.default_rng(ALL.index(fmt) + 90)
    k = FORMATS[fmt].block_size
    path = ffi_dot.host_path()
    kn = (((1,), (0,)), ((), ()))
    other = "mxfp4_e2m1" if fmt == "mxint8" else "mxint8"  # a mixed pair too
    t = "bf16" if dot_call.bf16_exact(fmt) else "f32"
    most = dot_call.KN_MX_ROWS[t]
    pair = dot_kernels.DotSpec(fmt, fmt, path=path, rhs_kn=True)
    for xf, M in ((fmt, 3), (other, 8), (fmt, most), (fmt, most + 1)):
        x = _side(rng, xf, (M, 2 * k))
        w = _side(rng, fmt, (2 * k, 40), axis=0)
        _check(x, w, kn)
        text = jax.jit(lambda u, v: mxj.scaled_dot(u, v, kn)).lower(x, w).as_text()
        calls = re.findall(r"custom_call @(\w+)", text)
        assert "stablehlo.transpose" not in text
        taken = (M <= pair.stream_m
                 or dot_kernels.gemm_by_default(pair, dot_kernels.cpu_vendor()))
        if M <= most or not taken:  # (the rows as bf16 where every value of their format
            xt = "bf16" if dot_call.bf16_exact(xf) else "f32"  # is exact there)
            assert calls[-1] == f"mxlower_dot_{xt}_{fmt}k{k}_kn_{path}", calls
            assert any(c.startswith(f"mxlower_dequantize_{xf}_{xt}") for c in calls), calls
        else:
            assert calls == [f"mxlower_dot_{fmt}k{k}_{fmt}k{k}_kn_{path}"], calls
    # rows of values below f32's normal range, NaN scales: the f64 contraction, impl="xla"'s
    # bits
    if not FORMATS[fmt].is_nvfp4:
        _check(_side(rng, fmt, (3, k), codes=LOW), _side(rng, fmt, (k, 40), axis=0),
               kn, f64=True)
    # batched [B, M, K] x [B, K, N]; the weights as the lhs, contracted over their dim 0
    _check(_side(rng, fmt, (2, 3, k)), _side(rng, fmt, (2, k, 34), axis=1),
           (((2,), (1,)), ((0,), (0,))))
    _check(_side(rng, fmt, (k, 40), axis=0), _side(rng, fmt, (5, k)),
           (((0,), (1,)), ((), ())))


@pytest.mark.parametrize("out", [jnp.bfloat16, jnp.float16])
def test_narrow_results(out):
    rng = np.random.default_rng(13)
    _check(_side(rng, "mxfp8_e4m3", (8, 64)), _side(rng, "mxfp8_e5m2", (8, 64)), out=out)
    _check(_side(rng, "mxfp8_e4m3", (8, 64), codes=LOW),
           _side(rng, "mxfp4_e2m1", (8, 64), codes=_high("mxfp4_e2m1")), out=out)


def test_global_scales():
    rng = np.random.default_rng(17)
    _check(_side(rng, "nvfp4", (4, 64), g=0.5), _side(rng, "nvfp4", (3, 64), g=3.0))
    _check(_side(rng, "nvfp4", (4, 64), g=float(F32(3e-39))), _side(rng, "nvfp4", (3, 64)))


def test_no_kernel_where_none_applies():
    """f4 elements in blocks of an odd size have no kernel (two per byte): the portable
    lowering, still the same bits; so do ``mxlower.jax.lower`` and ``jax.export``."""
    rng = np.random.default_rng(19)
    x = rng.standard_normal((4, 63)).astype(F32)
    a = mxj.quantize(x, "mxfp4_e2m1", block_size=21, impl="xla")
    _check(a, rng.standard_normal((2, 63)).astype(F32), kernel=False)
    b = _side(rng, "mxfp8_e4m3", (3, 64))
    text = mxj.lower(lambda u, v: mxj.scaled_dot(u, v), b, b)
    assert "custom_call" not in text and "mxlower_" not in text
    # jax.export: a custom call is not portable, so the export is the StableHLO, and runs
    exp = jax.export.export(jax.jit(lambda u, v: mxj.scaled_dot(u, v)))(b, b)
    assert "mxlower_" not in exp.mlir_module()
    _same(exp.call(b, b), jax.jit(lambda u, v: mxj.scaled_dot(u, v, impl="xla"))(b, b))


def test_vmap_grad_and_eager():
    rng = np.random.default_rng(23)
    w = _side(rng, "mxfp8_e4m3", (6, 64), codes=list(ORDINARY) + list(LOW))
    x = rng.standard_normal((5, 4, 64)).astype(F32)

    def f(x, impl):
        return mxj.scaled_dot(mxj.quantize(x, "mxfp4_e2m1", impl=impl), w, impl=impl)

    batched = jax.jit(jax.vmap(lambda x: f(x, "auto")))(x)
    ref = jax.jit(jax.vmap(lambda x: f(x, "xla")))(x)
    np.testing.assert_allclose(batched, ref, rtol=1e-5, atol=1e-6)
    for i in range(5):
        _same(batched[i], jax.jit(lambda x: f(x, "auto"))(x[i]))
    # per-example global scales: one scaled dot per example (a loop), the kernels inside it
    g = np.array([0.5, 2.0, 1e-3, 4.0, 3e-39], F32)

    def h(x, g, impl):
        return mxj.scaled_dot(mxj.quantize(x, "nvfp4", global_scale=g, impl=impl), w, impl=impl)

    looped = jax.jit(jax.vmap(lambda x, g: h(x, g, "auto")))
    assert "mxlower_quantize_nvfp4" in looped.lower(x, g).as_text()
    assert "mxlower_dot_nvfp4k16_mxfp8_e4m3k32" in looped.lower(x, g).as_text()
    np.testing.assert_allclose(looped(x, g), jax.jit(jax.vmap(lambda x, g: h(x, g, "xla")))(x, g),
                               rtol=1e-5, atol=1e-30)
    ct = rng.standard_normal((4, 6)).astype(F32)

    def loss(x, w, impl):
        return jnp.sum(ct * mxj.scaled_dot(mxj.quantize(x, "mxfp6_e2m3", impl=impl), w,
                                           impl=impl))

    # STE: the gradient is ct @ dequantize(w), a plain f32 dot of JAX's (the JVP rule), whose
    # summation order XLA picks per fusion: close to the f64 value, not the same bits
    want = ct.astype(np.float64) @ _values(w).astype(np.float64)
    mag = np.abs(ct.astype(np.float64)) @ np.abs(_values(w).astype(np.float64))
    for impl in ("auto", "xla"):
        g = jax.jit(jax.grad(lambda x: loss(x, w, impl)))(x[0])  # noqa: B023
        assert np.all(np.abs(np.asarray(g) - want) <= 1e-6 * mag)
    # eager (outside jit): the primitive compiled alone, with the kernel
    a = _side(rng, "mxfp8_e5m2", (3, 64), codes=LOW)
    _same(mxj.scaled_dot(a, w), jax.jit(lambda u, v: mxj.scaled_dot(u, v, impl="xla"))(a, w))


def test_the_dot_kernel_call_stands_alone():
    """Where the fused dot kernel applies, the lowering is its call alone: the kernel makes
    section 6's range test and the exact f64 contraction itself, so no reduction over the
    scales, no ``stablehlo.if`` and no dequantize kernel surround it (they cost a GEMV
    0.4-1 ms on XLA:CPU: BENCHMARKS.md)."""
    rng = np.random.default_rng(31)
    a = _side(rng, "mxfp8_e4m3", (4, 64))
    b = _side(rng, "nvfp4", (3, 64))
    text = jax.jit(lambda u, v: mxj.scaled_dot(u, v)).lower(a, b).as_text()
    assert re.findall(r"custom_call @(\w+)", text) == [
        f"mxlower_dot_mxfp8_e4m3k32_nvfp4k16_{ffi_dot.host_path()}"]
    for absent in ("stablehlo.if", "stablehlo.reduce", "dot_general"):
        assert absent not in text


def test_the_dequantize_kernels_run_inside_the_branch_taken():
    """Where it does not (a GEMM), the lowering is the exactness test, then a
    ``stablehlo.if`` whose branches dequantize each MX side with the dequantize kernel and
    contract in f32 (then: provably exact) or f64 (else); no kernel call outside it (whose
    f32 results XLA:CPU would copy into the conditional's operands)."""
    rng = np.random.default_rng(31)
    a = _side(rng, "mxfp8_e4m3", (20, 64))
    b = _side(rng, "nvfp4", (24, 64))
    text = jax.jit(lambda u, v: mxj.scaled_dot(u, v)).lower(a, b).as_text()
    before, rest = text.split('"stablehlo.if"', 1)
    then, other = rest.split("}, {", 1)
    other = other.split("}) : (tensor<i1>)", 1)[0]
    assert "custom_call" not in before
    for branch, t in ((then, "f32"), (other, "f64")):
        calls = re.findall(r"custom_call @(\w+)", branch)
        assert sorted(calls) == ["mxlower_dequantize_mxfp8_e4m3_f32_k32",
                                 "mxlower_dequantize_nvfp4_f32_k16"]
        assert re.search(rf"dot_general .*-> tensor<20x24x{t}>", branch)


def test_bad_impl_is_a_clear_error():
    rng = np.random.default_rng(29)
    a = _side(rng, "mxfp8_e4m3", (2, 32))
    with pytest.raises(ValueError, match="scaled_dot: unknown argument 'impl' 'fast'"):
        mxj.scaled_dot(a, a, impl="fast")


def test_xla_cpu_flushes_subnormals_converting_f32_to_f64():
    """Why the f64 contraction reads the kernel's f32 values from their bits: XLA:CPU's own
    f32 -> f64 conversion flushes subnormals (DAZ).  Should XLA stop doing so, this test says
    the bit read could become a plain conversion."""
    text = ("func.func @main(%x: tensor<2xf32>) -> tensor<2xf64> {\n"
            "  %y = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf64>\n"
            "  return %y : tensor<2xf64>\n}\n")
    (got,) = run_module(text, [np.array([2.0 ** -130, 1.0], F32)])
    assert got.tolist() == [0.0, 1.0]
