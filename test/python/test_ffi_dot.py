"""The fused block-scaled dot kernel (mxlower.lowering.dot_kernels, run through
mxlower.execution.ffi_dot) against mxlower.reference.scaled_dot: every MX format pair, plain
f32/bf16/f16 sides on either side, M / N / K that are no multiple of any tile (K of one and of
three blocks), batch dimensions, both ways of a unit (streaming for M <= 16, the blocked GEMM
above), NaN / Inf codes, every SIMD path this CPU runs (``MXLOWER_DOT_PATH``), the exact
block sums of the integer-unit formats, handler errors, and the JAX entry's dispatch
(transposed dimension numbers, jit, vmap, grad), and the kernel's own range test with its
exact f64 contraction (scales at both ends of the range, subnormal and huge plain values,
subnormal results rounded once)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.bindings import upstream
from mxlower.formats import FLOAT_TYPES, FORMATS
from mxlower.lowering import dot_kernels
from mxlower.testing import assert_dot_close

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402
from mxlower.execution import ffi_dot  # noqa: E402

F32 = np.float32
MX = list(FORMATS)
PLAIN = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
PATHS = ffi_dot.kernel_paths()
#: the paths this CPU runs whose GEMM takes integer dot products
INT_PATHS = [p for p in dot_kernels.X86_PATHS if p in PATHS]
#: (batch, M, N, K in blocks): the streaming path's one row at a time (M <= 2) and tiles of
#: rows, the GEMM (M > STREAM_M) with ragged tiles; N across panels of 32 columns
SHAPES = [((), 1, 1, 1), ((), 2, 37, 3), ((2,), 7, 33, 2), ((), 13, 70, 3), ((), 20, 35, 1)]


def _side(rng, name: str, shape, k=None, spread=0):
    """(elements or values, scales or None, f32 values) of random data in ``name``;
    ``spread``: each block of ``k`` (MX) values times 2^u, u uniform in [0, spread]."""
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))).astype(F32)
    if spread:
        kk = k or FORMATS[name].block_size
        u = rng.integers(0, spread + 1, shape[:-1] + (shape[-1] // kk,))
        x *= np.repeat(np.exp2(u), kk, axis=-1).astype(F32)
    x[rng.random(shape) < 0.1] = 0
    if name in PLAIN:
        v = x.astype(PLAIN[name])
        return jnp.asarray(v), None, v.astype(F32)
    q = mxj.quantize(x, name, block_size=k, impl="xla")
    e = np.asarray(q.elements)
    t = FLOAT_TYPES.get(FORMATS[name].element)
    codes = R.from_bits(e, FORMATS[name].element) if t is not None and t.bits == 6 else e
    v = R.dequantize(codes, np.asarray(q.scales), name, block_size=q.block_size)
    return q.elements, q.scales, v


def _run(lf, rf, shape, rng, path, k=None):
    batch, M, N, kb = shape
    kk = k or max(FORMATS[f].block_size for f in (lf, rf) if f in FORMATS)
    K = kb * kk
    a, sa, va = _side(rng, lf, batch + (M, K), k if lf in FORMATS else None)
    b, sb, vb = _side(rng, rf, batch + (N, K), k if rf in FORMATS else None)
    got = ffi_dot.dot(a, sa, b, sb, lf if sa is not None else None,
                      rf if sb is not None else None, lhs_block_size=k if sa is not None else None,
                      rhs_block_size=k if sb is not None else None, path=path)
    nb = len(batch)
    dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
    assert got.shape == batch + (M, N) and got.dtype == F32
    assert_dot_close(got, va, vb, dn, what=f"{lf} x {rf} {shape} {path}")
    return np.asarray(got), va, vb


@pytest.mark.parametrize("lf, rf", list(itertools.product(MX, MX)))
def test_every_mx_pair(lf, rf):
    """Both sides MX: one kernel per pair (shapes are run-time), every shape; the block sizes
    differ where the formats' defaults do (nvfp4 16 against 32: scaled values)."""
    rng = np.random.default_rng(MX.index(lf) * 7 + MX.index(rf))
    k = 16 if "nvfp4" in (lf, rf) else None
    for shape in SHAPES:
        _run(lf, rf, shape, rng, PATHS[0], k=k)


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", list(PLAIN))
def test_plain_activations_against_mx_weights(plain, fmt):
    rng = np.random.default_rng(3)
    for shape in SHAPES:
        _run(plain, fmt, shape, rng, PATHS[0])
    _run(fmt, plain, SHAPES[1], rng, PATHS[0])  # the plain side on the right


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", list(PLAIN))
def test_tiles_of_three_and_four_rows(plain, fmt):
    """Three and four plain rows take one streaming tile of MR_STREAM_EXACT rows (the rows
    past M clamped) against :meth:`_DotKernel.few_columns` columns at a time: N neither a
    multiple of those columns nor of a panel, K one block and several, a batch."""
    rng = np.random.default_rng(11)
    for shape in (((), 3, 37, 3), ((2,), 4, 35, 1), ((), 4, 70, 2)):
        _run(plain, fmt, shape, rng, PATHS[0])


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", list(PLAIN))
def test_many_plain_rows_stream(plain, fmt):
    """Plain rows against MX weights stream up to :attr:`DotSpec.stream_m` rows (the
    path's PLAIN_STREAM_M; on avx512 48 bf16 rows, 128 f32 rows), more than MX rows (16):
    tiles of MR_STREAM rows, each tile's rows of A in slabs of their own; one row more
    takes the blocked GEMM (on avx512 bf16 rows the packed GEMM on bf16 dot products, f32
    rows the transposed panels' tiles)."""
    spec = dot_kernels.DotSpec(plain, fmt, path=PATHS[0])
    wide = PATHS[0] in dot_kernels.AVX512_PATHS
    assert spec.stream_m == (dot_kernels.BF16_STREAM_M if plain == "bf16" and wide
                             else dot_kernels.F32_STREAM_M if plain == "f32" and wide
                             else dot_kernels.PLAIN_STREAM_M[PATHS[0]])
    assert dot_kernels.DotSpec(fmt, plain).stream_m == dot_kernels.STREAM_M
    rng = np.random.default_rng(13)
    for shape in _many_rows(plain, fmt, PATHS[0]):
        _run(plain, fmt, shape, rng, PATHS[0])


def _k_major(e, s):
    """``[..., N, K]`` elements and scales held K-major, ``[..., K, N]``: the same values."""
    return (np.ascontiguousarray(np.swapaxes(np.asarray(e), -1, -2)),
            np.ascontiguousarray(np.swapaxes(np.asarray(s), -1, -2)))


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", list(PLAIN))
def test_k_major_weights(plain, fmt):
    """Weights held ``[..., K, N]`` (blocked along K: a ``[in, out]`` kernel quantized along
    its input axis), read as stored (:attr:`DotSpec.rhs_kn`): the f32 path's tiles of 8, 4,
    2 and 1 rows over whole panels of columns, and the exact f64 path for N's last partial
    panel, f4 codes of an odd N and N below a panel -- every M from 1 to 20, batches, K one
    block and several, panels of 256 columns whole and cut; bit for bit the exact results
    of one-hot rows."""
    rng = np.random.default_rng(MX.index(fmt) * 3 + list(PLAIN).index(plain))
    for M, N, kb, batch in ((1, 300, 1, ()), (2, 37, 3, ()), (3, 96, 2, (2,)), (7, 5, 1, ()),
                            (8, 32, 2, ()), (13, 70, 1, ()), (16, 33, 2, ()), (20, 64, 1, ()),
                            (2, 520, 1, ()), (4, 264, 1, ()), (1, 512, 2, (2,))):
        K = kb * FORMATS[fmt].block_size
        a, _, va = _side(rng, plain, batch + (M, K))
        e, s, vb = _side(rng, fmt, batch + (N, K))
        ek, sk = _k_major(e, s)
        got = ffi_dot.dot(a, None, ek, sk, None, fmt, rhs_kn=True, path=PATHS[0])
        nb = len(batch)
        dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
        assert got.shape == batch + (M, N)
        assert_dot_close(got, va, vb, dn, what=f"{plain} x {fmt} k-major M={M} N={N}")
    # one-hot rows: each result one exact product (every tile and the f64 path alike)
    e, s, vb = _side(rng, fmt, (70, 2 * FORMATS[fmt].block_size))
    hot = np.zeros((11, vb.shape[1]), F32)
    hot[np.arange(11), np.arange(11) * 2] = 2.0 ** rng.integers(-3, 4, 11)
    x = hot.astype(PLAIN[plain])
    got = np.asarray(ffi_dot.dot(x, None, *_k_major(e, s), None, fmt, rhs_kn=True))
    want = (hot.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4", "mxint8"])
def test_k_major_weights_take_the_f64_contraction(fmt):
    """K-major weights whose scales (or activations) leave the f32 path's range: the range
    test (the same as the [N, K] kernel's) sends every unit to the exact f64 contraction --
    subnormal results kept, subnormal f32 activations decoded from their bits -- and Inf /
    NaN codes and scales give the reference's Inf / NaN."""
    rng = np.random.default_rng(MX.index(fmt) + 40)
    dn = (((1,), (1,)), ((), ()))
    low = range(0, 6) if not FORMATS[fmt].is_nvfp4 else None
    for M, N in ((3, 64), (8, 40)):
        K = 2 * FORMATS[fmt].block_size
        if low is not None:  # values, products and sums below 2^-126
            e, s, vb = _with_scales(rng, fmt, (N, K), low)
            x = rng.standard_normal((M, K)).astype(F32)
        else:  # nvfp4's values are never that small: subnormal activations instead
            e, s, vb = _side(rng, fmt, (N, K))
            x = (rng.standard_normal((M, K)) * 2.0 ** -140).astype(F32)
        got = np.asarray(ffi_dot.dot(x, None, *_k_major(e, s), None, fmt, rhs_kn=True))
        assert_dot_close(got, x, vb, dn, what=f"f32 x {fmt} k-major, range ends")
        assert np.any(got != 0)
        # the same bits as the [N, K] kernel's f64 contraction where its results are exact
        hot = np.zeros((M, K), F32)
        hot[np.arange(M), np.arange(M)] = 2.0 ** -20
        if low is None:
            hot *= 2.0 ** -120
        np.testing.assert_array_equal(
            np.asarray(ffi_dot.dot(hot, None, *_k_major(e, s), None, fmt, rhs_kn=True)),
            np.asarray(ffi_dot.dot(hot, None, e, s, None, fmt)))
    # NaN / Inf: a NaN scale poisons its block's column; Inf codes (e5m2) give Inf / NaN
    e, s, vb = _side(rng, fmt, (32, 2 * FORMATS[fmt].block_size))
    sb = np.asarray(s).view(np.uint8).copy()
    sb[3, 1] = 0x7F if FORMATS[fmt].is_nvfp4 else 0xFF  # NaN
    s = sb.view(np.asarray(s).dtype)
    vb = vb.copy()
    vb[3, FORMATS[fmt].block_size:] = np.nan
    x = rng.standard_normal((5, vb.shape[1])).astype(F32)
    got = np.asarray(ffi_dot.dot(x, None, *_k_major(e, s), None, fmt, rhs_kn=True))
    want = R.scaled_dot(x, None, vb, None)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[:, 3]).all() and np.isfinite(np.delete(got, 3, axis=1)).all()


def _variant(spec, target: str):
    """Compiles ``spec``'s kernel as the module's constants now make it and registers it as
    the XLA FFI target ``target`` (one process may hold several variants of one kernel); a
    function calling it, and what must stay alive while it runs."""
    import ctypes

    from mxlower.execution import ffi

    ctx, module = ffi_dot.lower_module(spec)
    engine, address = ffi.jit(ctx, module, f"{spec.name}_ffi_address")
    handler = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address)
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform="cpu",
                                api_version=1)

    def call(*ops, shape):
        return np.asarray(jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(shape, F32))(*ops))

    return call, (ctx, module, engine, handler)


@pytest.mark.skipif("avx512" not in PATHS, reason="these tiles need the avx512 path")
@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", ["bf16", "f32", "f16"])
def test_k_major_tiles_bit_identical_either_way(monkeypatch, plain, fmt):
    """The K-major kernel's tiles as built -- 8-row tiles walking K in chunks decoded once
    into a scratch (bf16 pairs, :data:`~dot_kernels.KN_CHUNK_ROWS`; f32 values,
    :data:`~dot_kernels.KN_F32_CHUNK_ROWS`, f16 rows' values converted once into a slab,
    :data:`~dot_kernels.KN_A_SLAB`), their f4 and f6 pairs and f32 rows' e2m1 values made on
    exponent words (:data:`~dot_kernels.KN_EXPONENT_ADD`) --, with all of those switched
    off (every tile reading the weights as stored, every value through an f32 conversion
    and multiply), and with blocks of 16 rows (:data:`~dot_kernels.KN_BLOCK_ROWS`: units of
    rows, each decoding the chunks again): the same products in the same order, so the same
    bits -- over batches, tiles of 8, 4, 2 and 1 rows, three blocks of rows, two whole
    panels and the columns past them, K of five blocks (chunks whole and cut) -- and within
    section 6 of the exact dot."""
    rng = np.random.default_rng(MX.index(fmt) + 70)
    batch, N = (2,), 2 * dot_kernels.KN_PANEL + 8
    K = 5 * FORMATS[fmt].block_size
    e, s, vb = _side(rng, fmt, batch + (N, K))
    ek, sk = _k_major(e, s)
    dn = (((2,), (2,)), ((0,), (0,)))
    spec = ffi_dot.DotSpec(plain, fmt, path="avx512", rhs_kn=True)
    built = {n: getattr(dot_kernels, n) for n in ("KN_CHUNK_ROWS", "KN_F32_CHUNK_ROWS",
                                                  "KN_A_SLAB", "KN_EXPONENT_ADD",
                                                  "KN_BLOCK_ROWS")}
    off = {"KN_CHUNK_ROWS": 0, "KN_F32_CHUNK_ROWS": 0, "KN_A_SLAB": False,
           "KN_EXPONENT_ADD": False}
    calls, keep = [], []
    for i, switches in enumerate((built, {**built, **off}, {**built, "KN_BLOCK_ROWS": 16})):
        for name, value in switches.items():
            monkeypatch.setattr(dot_kernels, name, value)
        call, k = _variant(spec, f"mxlower_test_kn_variant{i}_{plain}_{fmt}")
        calls.append(call)
        keep.append(k)
    for M in (16, 15, 45):
        a, _, va = _side(rng, plain, batch + (M, K))
        got = [c(a, ek, sk, shape=batch + (M, N)) for c in calls]
        np.testing.assert_array_equal(got[0], got[1])
        np.testing.assert_array_equal(got[0], got[2])
        assert_dot_close(got[0], va, vb, dn, what=f"{plain} x {fmt} k-major M={M}")


@pytest.mark.parametrize("fmt", [f for f in MX if f != "nvfp4"])
def test_values_past_f32_dequantize_to_inf(fmt):
    """Scale codes so high that some values of a block pass f32's range, against tiny
    activations (every product and sum in range): those values are +-Inf, as dequantizing
    them in f32 makes them (docs/semantics.md section 5), so their columns' results are
    the reference's +-Inf and NaN -- the range test sends them to the exact f64
    contraction, which keeps them Inf -- and the other columns' results stay exact; both
    layouts, f32 and bf16 rows, one row, a tile and the GEMM, MX rows past f32's range too."""
    rng = np.random.default_rng(MX.index(fmt) + 90)
    N, K = 40, 2 * FORMATS[fmt].block_size
    top = 254 if FORMATS[fmt].is_int else 253
    e, s, _ = _with_scales(rng, fmt, (N, K), range(118, 123))
    sb = np.asarray(s).view(np.uint8).copy()
    sb[::3, 1] = top  # every third column's second block
    s = sb.view(np.asarray(s).dtype)
    if FORMATS[fmt].is_int:  # quantize never makes -128 (-2: -2^128 with scale 2^127)
        e = np.asarray(e).copy()
        e[::3, K // 2] = -128
    t = FLOAT_TYPES.get(FORMATS[fmt].element)
    vb = R.dequantize(R.from_bits(e, FORMATS[fmt].element) if t is not None and t.bits == 6
                      else e, s, fmt)
    hot = np.isinf(vb).any(axis=1)
    assert hot.any() and not hot.all()
    dn = (((1,), (1,)), ((), ()))
    rows = [(plain, M) for plain in ("f32", "bf16")
            for M in (1, 8, dot_kernels.DotSpec(plain, fmt, path=PATHS[0]).stream_m + 1)]
    for (plain, M), kn in itertools.product(rows, (False, True)):
        x = (rng.standard_normal((M, K)) * 2.0 ** -60).astype(PLAIN[plain])
        if kn:
            got = np.asarray(ffi_dot.dot(x, None, *_k_major(e, s), None, fmt, rhs_kn=True))
        else:
            got = np.asarray(ffi_dot.dot(x, None, e, s, None, fmt))
        xf = x.astype(F32)
        want = R.scaled_dot(xf, None, vb, None)
        what = f"{plain} x {fmt} M={M}{' k-major' if kn else ''}"
        np.testing.assert_array_equal(got[:, hot], want[:, hot], err_msg=what)
        assert not np.isfinite(got[:, hot]).any(), what
        assert_dot_close(got[:, ~hot], xf, vb[~hot], dn, what=what)
    # MX rows whose values pass f32's range, against the finite columns' codes scaled
    # down (every product in range)
    ea, sa, va = _with_scales(rng, "mxfp8_e4m3", (dot_kernels.STREAM_M + 1, K), (254,))
    assert np.isinf(va).any()
    ef = np.asarray(e)[~hot]
    sf = (np.asarray(s)[~hot].view(np.uint8) - 115).view(np.asarray(s).dtype)
    vbf = R.dequantize(R.from_bits(ef, FORMATS[fmt].element) if t is not None and t.bits == 6
                       else ef, sf, fmt)
    for M in (5, len(ea)):  # streaming, the GEMM
        got = np.asarray(ffi_dot.dot(ea[:M], sa[:M], ef, sf, "mxfp8_e4m3", fmt))
        np.testing.assert_array_equal(got, R.scaled_dot(va[:M], None, vbf, None))


@pytest.mark.parametrize("path", PATHS)
def test_k_major_every_simd_path(path):
    """The K-major kernel on each path this CPU runs (f4 codes by a byte shuffle on the x86
    paths, through f16 on the portable one)."""
    rng = np.random.default_rng(9)
    dn = (((1,), (1,)), ((), ()))
    for plain, fmt in (("f32", "mxfp4_e2m1"), ("bf16", "mxfp8_e4m3"), ("f16", "nvfp4"),
                       ("f32", "mxint8")):
        a, _, va = _side(rng, plain, (5, 64))
        e, s, vb = _side(rng, fmt, (71, 64))
        got = ffi_dot.dot(a, None, *_k_major(e, s), None, fmt, rhs_kn=True, path=path)
        assert_dot_close(got, va, vb, dn, what=f"{plain} x {fmt} k-major {path}")


def test_k_major_shapes_are_checked():
    """The K-major kernel's handler checks b [..., K, N] and its scales [..., K / k, N]:
    clear errors, no crash."""
    rng = np.random.default_rng(3)
    e, s, _ = _side(rng, "mxfp8_e4m3", (64, 96))
    ek, sk = _k_major(e, s)
    x = rng.standard_normal((2, 96)).astype(F32)
    with pytest.raises(ValueError, match=r"shapes must be \[..., M, K\] and \[..., K, N\]"):
        ffi_dot.dot(x, None, e, s, None, "mxfp8_e4m3", rhs_kn=True)
    with pytest.raises(Exception, match=r"b_scales must have shape \[..., K / 32, N\]"):
        ffi_dot.dot(x, None, ek, np.asarray(sk)[:, :32], None, "mxfp8_e4m3", rhs_kn=True)
    with pytest.raises(ValueError, match="K-major rhs"):
        dot_kernels.DotSpec("mxfp8_e4m3", "f32", rhs_kn=True)
    # MX rows: the same checks before the transpose
    a, sa, _ = _side(rng, "mxfp8_e4m3", (2, 96))
    with pytest.raises(Exception, match=r"b_scales must have shape \[..., K / 32, N\]"):
        ffi_dot.dot(a, sa, ek, np.asarray(sk)[:, :32], "mxfp8_e4m3", "mxfp8_e4m3",
                    rhs_kn=True)
    # f4 codes of an odd N: rows of K not whole bytes, which the copy needs
    a, sa, _ = _side(rng, "mxfp4_e2m1", (2, 64))
    e, s, _ = _side(rng, "mxfp4_e2m1", (33, 64))
    with pytest.raises(Exception, match="a K-major f4 rhs against MX rows needs an even N"):
        ffi_dot.dot(a, sa, *_k_major(e, s), "mxfp4_e2m1", "mxfp4_e2m1", rhs_kn=True)


#: (lhs, rhs, block size or None) of the K-major weights' transposed copy
#: (:attr:`DotSpec.transposes_b`): every format with itself, mixed pairs, blocks of 8 and 6
_TRANSPOSED = ([(f, f, None) for f in MX]
               + [("mxint8", "mxfp4_e2m1", None), ("mxfp8_e4m3", "mxfp6_e3m2", None),
                  ("nvfp4", "mxfp8_e5m2", 16), ("mxfp8_e5m2", "mxfp8_e4m3", 8),
                  ("mxfp6_e2m3", "mxfp4_e2m1", 6)])


@pytest.mark.parametrize("lf, rf, k", _TRANSPOSED)
def test_k_major_weights_transposed_for_mx_rows(lf, rf, k):
    """MX rows against K-major MX weights (:attr:`DotSpec.transposes_b`): the handler copies
    the weights' codes (f4: packed two per byte, along K now) and scales to ``[N, K]`` and
    runs the MX pair's ``[N, K]`` kernel -- the same bits as that kernel on weights held
    ``[N, K]``: rows of K across units of 256 and tiles of 64, 32 and 16 with remainders,
    columns across panels, batches, K one block and several, the streaming tiles and the
    GEMM; the range ends and NaN scales (the f64 contraction) too."""
    rng = np.random.default_rng(MX.index(lf) * 11 + MX.index(rf))
    kk = k or max(FORMATS[f].block_size for f in (lf, rf))
    shapes = [((), 3, 300, 9), ((2,), 17, 70, 2), ((), 40, 2, 1), ((), 5, 66, 3),
              ((), 20, 320, 10)]
    for batch, M, N, kb in shapes:
        K = kb * kk
        a, sa, va = _side(rng, lf, batch + (M, K), k)
        e, s, vb = _side(rng, rf, batch + (N, K), k)
        want = ffi_dot.dot(a, sa, e, s, lf, rf, lhs_block_size=k, rhs_block_size=k)
        got = ffi_dot.dot(a, sa, *_k_major(e, s), lf, rf, lhs_block_size=k, rhs_block_size=k,
                          rhs_kn=True)
        nb = len(batch)
        dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
        assert_dot_close(got, va, vb, dn, what=f"{lf} x {rf} k-major {batch, M, N, K}")
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32),
                                      np.asarray(want).view(np.uint32))
    if k is not None or FORMATS[rf].is_nvfp4 or FORMATS[lf].is_nvfp4:
        return
    # scales at the range's low end, a NaN scale: the f64 contraction on the copy
    K = 2 * kk
    a, sa, va = _side(rng, lf, (4, K), k)
    e, s, vb = _with_scales(rng, rf, (40, K), range(0, 6))
    sb = np.asarray(s).view(np.uint8).copy()
    sb[3, 1] = 0xFF
    s = sb.view(np.asarray(s).dtype)
    want = ffi_dot.dot(a, sa, e, s, lf, rf, lhs_block_size=k, rhs_block_size=k)
    got = ffi_dot.dot(a, sa, *_k_major(e, s), lf, rf, lhs_block_size=k, rhs_block_size=k,
                      rhs_kn=True)
    assert np.isnan(np.asarray(got)[:, 3]).all() and not np.isnan(np.asarray(got)[:, 4]).any()
    np.testing.assert_array_equal(np.asarray(got).view(np.uint32),
                                  np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("fmt", MX)
def test_k_major_weights_copied_for_plain_rows(fmt):
    """Plain rows against K-major weights with ``rhs_copy`` (DotSpec.rhs_copy: what many
    bf16 rows take): the handler's copy and the [N, K] kernel of the plain rows -- the
    same bits as that kernel on weights held [N, K] (bf16 rows past their streaming tiles:
    the packed GEMM; f32 and f16 rows too), batches, columns across panels."""
    rng = np.random.default_rng(MX.index(fmt) + 60)
    k = FORMATS[fmt].block_size
    for plain, batch, M, N, kb in (("bf16", (), 70, 300, 9), ("bf16", (2,), 5, 66, 2),
                                   ("f32", (), 20, 40, 3), ("f16", (), 9, 34, 1)):
        a, _, _ = _side(rng, plain, batch + (M, kb * k))
        e, s, _ = _side(rng, fmt, batch + (N, kb * k))
        want = ffi_dot.dot(a, None, e, s, None, fmt)
        got = ffi_dot.dot(a, None, *_k_major(e, s), None, fmt, rhs_kn=True, rhs_copy=True)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32),
                                      np.asarray(want).view(np.uint32))
    spec = dot_kernels.DotSpec("bf16", fmt, rhs_kn=True, rhs_copy=True)
    assert spec.transposes_b and not spec.kn_kernel and spec.name.endswith("_knc_portable")
    assert dot_kernels.DotSpec.from_name(spec.name) == spec
    # (MX rows: the copy is implied, one spec)
    assert dot_kernels.DotSpec(fmt, fmt, rhs_kn=True, rhs_copy=True) == dot_kernels.DotSpec(
        fmt, fmt, rhs_kn=True)
    with pytest.raises(ValueError, match="only a K-major rhs is copied"):
        dot_kernels.DotSpec("bf16", fmt, rhs_copy=True)


@pytest.mark.parametrize("path", PATHS)
def test_k_major_weights_transposed_every_simd_path(path):
    """The transposed copy for the MX pair's kernel of each path this CPU runs."""
    rng = np.random.default_rng(29)
    for lf, rf in (("mxfp4_e2m1", "mxfp4_e2m1"), ("mxfp8_e4m3", "mxfp8_e4m3"),
                   ("mxint8", "mxfp6_e2m3")):
        a, sa, _ = _side(rng, lf, (20, 96))
        e, s, _ = _side(rng, rf, (70, 96))
        want = ffi_dot.dot(a, sa, e, s, lf, rf, path=path)
        got = ffi_dot.dot(a, sa, *_k_major(e, s), lf, rf, rhs_kn=True, path=path)
        np.testing.assert_array_equal(np.asarray(got).view(np.uint32),
                                      np.asarray(want).view(np.uint32))


@pytest.mark.parametrize("path", PATHS)
def test_every_simd_path(path):
    """Each path this CPU runs, on the formats whose decoding differs between them (f4 by a
    byte shuffle on avx2) and one of each other kind."""
    rng = np.random.default_rng(5)
    for lf, rf in (("f32", "mxfp4_e2m1"), ("bf16", "nvfp4"), ("mxfp4_e2m1", "mxfp4_e2m1"),
                   ("mxint8", "mxfp6_e3m2"), ("f16", "mxfp8_e4m3")):
        for shape in SHAPES[1:] + _many_rows(lf, rf, path)[2:]:
            _run(lf, rf, shape, rng, path)


def _many_rows(lf: str, rf: str, path: str) -> list[tuple]:
    """Shapes of many rows of ``lf`` against ``rf``: 17 and 43 (tiles of MR_STREAM rows, the
    last one cut), the most rows that stream (:attr:`DotSpec.stream_m`) and one more (the
    GEMM paths)."""
    most = dot_kernels.DotSpec(lf, rf, path=path).stream_m
    return [((), 17, 37, 3), ((2,), 43, 35, 2), ((), most, 33, 1), ((), most + 1, 33, 1)]


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("path", PATHS)
def test_f32_rows_gemm_on_transposed_panels(fmt, path):
    """f32 rows past the streaming tiles against MX weights: each panel of 32 columns
    decoded once and transposed 16 x 16 at a time into K-major values (the rows of K past
    the last 16 one by one), then tiles of 8 rows x 32 columns over the whole of K (the last
    tile's rows past M read row M - 1, their results dropped; the last panel's columns past
    N masked) -- within section 6, batched, K of 3 blocks of 8 values (24: a remainder of
    8 rows of K) and of the format's own block."""
    assert dot_kernels.F32_KN_GEMM
    rng = np.random.default_rng(MX.index(fmt) + 40)
    most = dot_kernels.DotSpec("f32", fmt, path=path).stream_m
    small = 8 if fmt != "nvfp4" else 16  # (nvfp4 blocks of 16)
    for shape, k in ((((2,), most + 5, 65, 3), small), (((), most + 8, 31, 2), None)):
        _run("f32", fmt, shape, rng, path, k=k)


def test_the_environment_forces_a_path(monkeypatch):
    monkeypatch.setenv(ffi_dot.ENV, "portable")
    assert ffi_dot.host_path() == "portable"
    monkeypatch.setenv(ffi_dot.ENV, "sse9")
    with pytest.raises(ValueError, match="MXLOWER_DOT_PATH='sse9' is not a dot kernel path"):
        ffi_dot.host_path()
    monkeypatch.delenv(ffi_dot.ENV)
    assert ffi_dot.host_path() == PATHS[0]
    assert dot_kernels.host_paths(["sse2"]) == ["portable"]


def test_odd_block_sizes():
    """Block sizes that are no multiple of the lanes (chunks of 2, 4, 12 values)."""
    rng = np.random.default_rng(7)
    for lf, rf, k in (("mxfp4_e2m1", "mxfp4_e2m1", 2), ("f32", "mxfp8_e5m2", 12),
                      ("mxint8", "mxfp6_e2m3", 36), ("bf16", "mxfp4_e2m1", 64)):
        for shape in (SHAPES[1], SHAPES[3], SHAPES[4]):
            _run(lf, rf, shape, rng, PATHS[0], k=k)


def test_exact_block_sums():
    """Both sides integer-unit formats with one block size: each block's sum is exact and the
    blocks are summed in f64, so a dot whose f32 sums would lose bits (huge and tiny blocks
    that cancel) comes out as the f64 reference, rounded once."""
    k = 32
    e = np.zeros((1, 3 * k), np.int8)
    e[0, :] = 127
    e[0, k:2 * k] = -127
    s_a = np.array([[140, 140, 100]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    ones = np.full((1, 3 * k), 64, np.int8)  # 1.0 in mxint8
    s_b = np.full((1, 3), 127, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    for M in (1, 5, dot_kernels.STREAM_M + 1):  # streaming (one row, a tile) and GEMM
        a = np.repeat(e, M, 0)
        sa = np.repeat(s_a, M, 0)
        got = np.asarray(ffi_dot.dot(a, sa, ones, s_b, "mxint8", "mxint8"))
        want = 127 * k * 2.0 ** (100 - 127 - 6)
        if M <= dot_kernels.STREAM_M:
            assert np.all(got == F32(want))
        else:  # the GEMM path: f32 sums of scaled values, within the contract
            assert np.all(np.abs(got - want) <= 1e-6 * 3 * 127 * k * 2.0 ** (140 - 133))
    # blocks of 16 (two a step of the bf16 tiles): a huge block, a tiny one beside it and the
    # huge one's negative -- no step may add the first two in f32
    k = 16
    e = np.full((1, 3 * k), 0x7, np.uint8)  # e2m1 6.0
    e[0, 2 * k:] = 0xF  # -6.0
    e = e.view(ml_dtypes.float4_e2m1fn)
    s_a = np.array([[170, 100, 170]], np.uint8).view(ml_dtypes.float8_e8m0fnu)
    ones = np.full((1, 3 * k), 0x2, np.uint8).view(ml_dtypes.float4_e2m1fn)  # 1.0
    s_b = np.full((1, 3), 127, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    for M in (1, 5):
        got = np.asarray(ffi_dot.dot(np.repeat(e, M, 0), np.repeat(s_a, M, 0), ones, s_b,
                                     "mxfp4_e2m1", "mxfp4_e2m1", lhs_block_size=k,
                                     rhs_block_size=k))
        assert np.all(got == F32(6 * k * 2.0 ** (100 - 127))), (M, got)


#: pairings of the GEMM's integer dot products: bytes (e2m1 / nvfp4 with each other or e2m3),
#: then words (the other integer-unit pairings, and e2m1 past the bytes' bound)
INT_PAIRS = [("mxfp4_e2m1", "mxfp4_e2m1", None), ("nvfp4", "nvfp4", None),
             ("mxfp4_e2m1", "nvfp4", 16), ("mxfp4_e2m1", "mxfp6_e2m3", None),
             ("mxfp6_e2m3", "mxfp4_e2m1", None), ("mxfp4_e2m1", "mxfp4_e2m1", 2),
             ("nvfp4", "mxfp4_e2m1", 64), ("mxfp4_e2m1", "mxfp4_e2m1", 226),
             ("mxint8", "mxint8", None), ("mxfp6_e3m2", "mxfp6_e3m2", None),
             ("mxfp6_e2m3", "mxfp6_e2m3", None), ("mxint8", "nvfp4", 16),
             ("mxfp6_e3m2", "mxint8", 2), ("mxfp6_e3m2", "mxfp6_e3m2", 82),
             ("mxfp4_e2m1", "mxfp4_e2m1", 228), ("mxint8", "mxint8", 4),
             ("mxfp6_e2m3", "mxint8", None), ("mxint8", "mxfp4_e2m1", 64)]


def test_which_kernels_take_integer_dot_products():
    """Bytes (vpmaddubsw): its pairs of u8 x s8 products must not saturate i16 and each
    block's sum must fit it -- e2m1 / nvfp4 with each other up to k = 226, with e2m3 up to
    45; never e2m3 x e2m3, e3m2, mxint8.  Words (vpmaddwd) for the other pairings of
    integer-unit formats, while a block's sum converts to f32 exactly (e3m2 x e3m2 up to
    k = 83).  Neither for an f8 or plain side, two block sizes or the portable path.  On
    the vnni path bytes (vpdpbusd, quads into i32) for every pairing of e2m1, nvfp4, e2m3
    and mxint8 whose block size is a multiple of 4 (A's units offset to u8: mxint8's by
    128), words (vpdpwssd) for e3m2 and the other block sizes."""
    def byte(lf, rf, k=None, path="avx2"):
        return dot_kernels.DotSpec(lf, rf, k, k, path).byte_dot

    def word(lf, rf, k=None, path="avx2"):
        return dot_kernels.DotSpec(lf, rf, k, k, path).word_dot

    assert word("mxint8", "mxint8") and word("mxfp6_e2m3", "mxfp6_e2m3")
    assert word("mxfp6_e3m2", "mxfp6_e3m2", 82) and not word("mxfp6_e3m2", "mxfp6_e3m2", 84)
    assert word("mxint8", "nvfp4", 16) and word("mxfp4_e2m1", "mxfp4_e2m1", 228)
    assert not word("mxfp4_e2m1", "mxfp4_e2m1") and not word("mxint8", "mxfp8_e4m3")
    assert not word("mxint8", "mxint8", path="portable") and not word("f16", "mxint8")

    assert byte("mxfp4_e2m1", "mxfp4_e2m1") and byte("nvfp4", "nvfp4")
    assert byte("mxfp4_e2m1", "mxfp4_e2m1", 226) and not byte("mxfp4_e2m1", "mxfp4_e2m1", 228)
    assert byte("mxfp6_e2m3", "nvfp4", 44) and not byte("mxfp6_e2m3", "nvfp4", 46)
    assert not byte("mxfp6_e2m3", "mxfp6_e2m3") and not byte("mxfp4_e2m1", "mxfp6_e3m2")
    assert not byte("mxint8", "mxfp4_e2m1") and not byte("mxfp4_e2m1", "mxfp8_e4m3")
    assert not byte("f32", "mxfp4_e2m1") and not byte("mxfp4_e2m1", "mxfp4_e2m1", path="portable")
    assert not dot_kernels.DotSpec("mxfp4_e2m1", "nvfp4", 32, 16, "avx2").byte_dot

    def quad(lf, rf, k=None):
        spec = dot_kernels.DotSpec(lf, rf, k, k, "vnni")
        assert spec.quad_dot == spec.byte_dot
        return spec.quad_dot

    for f, g in itertools.product(("mxfp4_e2m1", "nvfp4", "mxfp6_e2m3", "mxint8"), repeat=2):
        k = 16 if "nvfp4" in (f, g) else None
        assert quad(f, g, k) and not word(f, g, k, "vnni"), (f, g)
    assert quad("mxfp4_e2m1", "mxfp4_e2m1", 228) and quad("mxint8", "mxint8", 4)
    assert not quad("mxfp4_e2m1", "mxfp4_e2m1", 2) and word("mxfp4_e2m1", "mxfp4_e2m1", 2, "vnni")
    assert not quad("mxfp6_e3m2", "mxint8") and word("mxfp6_e3m2", "mxint8", path="vnni")
    assert not quad("mxint8", "mxfp6_e3m2") and not quad("mxfp8_e4m3", "mxint8")
    assert dot_kernels.DotSpec("mxint8", "mxint8", path="vnni").byte_offset == 128
    assert dot_kernels.DotSpec("mxfp6_e2m3", "mxint8", path="vnni").byte_offset == 60
    assert not byte("mxint8", "mxint8") and not byte("mxfp6_e2m3", "mxfp6_e2m3")  # avx2
    # avx512: vnni's integer dot products, and bf16 ones for the other MX pairs with one
    # (even) block size
    def bf16(lf, rf, kl=None, kr=None):
        return dot_kernels.DotSpec(lf, rf, kl, kr or kl, "avx512").bf16_dot

    assert dot_kernels.DotSpec("mxint8", "mxint8", path="avx512").quad_dot
    assert bf16("mxfp8_e4m3", "mxfp8_e4m3") and bf16("mxfp8_e5m2", "mxint8")
    assert bf16("nvfp4", "mxfp8_e4m3", 16) and bf16("mxfp6_e3m2", "mxfp6_e3m2", 96)
    assert not bf16("mxfp6_e3m2", "mxfp6_e3m2") and not bf16("mxint8", "mxint8")  # integer
    assert not bf16("mxfp8_e4m3", "nvfp4") and not bf16("mxfp8_e4m3", "mxfp8_e4m3", 32, 64)
    assert not bf16("f32", "mxfp8_e4m3") and not bf16("mxfp8_e4m3", "bf16")
    assert not dot_kernels.DotSpec("mxfp8_e4m3", "mxfp8_e4m3", path="vnni").packed_gemm
    # avx512's word pairs: exact block sums on bf16 dot products
    def blocks(lf, rf, k=None, path="avx512"):
        return dot_kernels.DotSpec(lf, rf, k, k, path).bf16_blocks

    assert blocks("mxfp6_e3m2", "mxfp6_e3m2") and blocks("mxfp6_e3m2", "mxint8")
    assert blocks("mxfp6_e3m2", "mxfp6_e3m2", 82) and blocks("mxfp4_e2m1", "mxfp4_e2m1", 2)
    assert not blocks("mxfp6_e3m2", "mxfp6_e3m2", 84) and not blocks("mxint8", "mxint8")
    assert not blocks("mxfp6_e3m2", "mxfp6_e3m2", path="vnni")
    assert not blocks("mxfp6_e3m2", "mxfp6_e3m2", path="amx")


def test_host_paths():
    """avx512 where the CPU has AVX2 and AVX-512 with BW, VL, VNNI and BF16, vnni where it has
    AVX2 and the 256-bit VNNI forms (AVX512-VNNI with AVX512VL, or AVX-VNNI), then avx2,
    then portable; MXLOWER_DOT_PATH names one of them."""
    hp = dot_kernels.host_paths
    assert hp(["avx2", "avx512bw", "avx512_vnni", "avx512vl", "avx512_bf16"]) == \
        ["avx512", "vnni", "avx2", "portable"]
    assert hp(["avx2", "avx512_vnni", "avx512vl", "avx512_bf16"]) == ["vnni", "avx2", "portable"]
    assert hp(["avx2", "avx512_vnni", "avx512vl"]) == ["vnni", "avx2", "portable"]
    assert hp(["avx2", "avx_vnni"]) == ["vnni", "avx2", "portable"]
    assert hp(["avx2", "avx512_vnni"]) == ["avx2", "portable"]  # no 256-bit forms
    assert hp(["avx512_vnni", "avx512vl"]) == ["portable"]
    assert hp([]) == ["portable"]
    amx = ["avx2", "avx512bw", "avx512_vnni", "avx512vl", "avx512_bf16", "amx_tile", "amx_bf16"]
    assert hp(amx) == ["amx", "avx512", "vnni", "avx2", "portable"]
    # the OS must grant the tile state (arch_prctl); AMX-TILE alone is not enough
    assert hp(amx, amx_granted=False) == ["avx512", "vnni", "avx2", "portable"]
    assert hp(amx[:-1]) == ["avx512", "vnni", "avx2", "portable"]
    assert hp(["avx2", "amx_tile", "amx_bf16"]) == ["avx2", "portable"]  # no AVX-512
    assert ffi_dot.host_path() == PATHS[0]
    assert dot_kernels.usable_paths() == PATHS
    if "amx_tile" not in dot_kernels.cpu_flags():
        assert not dot_kernels.request_amx()
        with pytest.raises(ValueError, match="MXLOWER_DOT_PATH='amx': this CPU cannot run it"):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(ffi_dot.ENV, "amx")
                ffi_dot.host_path()


def test_amx_spec():
    """The amx path: the MX pairs with one (even) block size and an f8 or e3m2 side run their
    GEMM on AMX tiles (as scaled bf16 values); the pairs of avx512's byte dot products keep
    those (exact block sums); a plain side, two block sizes or an odd one keep avx512's
    paths; AMX GEMMs are GEMMs by default on any CPU vendor; the rest (the streaming path)
    is avx512's."""
    DS = dot_kernels.DotSpec
    for lf, rf in (("mxfp8_e4m3", "mxfp8_e4m3"), ("mxfp6_e3m2", "mxfp4_e2m1"),
                   ("mxint8", "mxfp6_e3m2"), ("mxfp8_e5m2", "mxint8")):
        spec = DS(lf, rf, path="amx")
        assert spec.amx_dot and spec.bf16_dot and spec.packed_gemm, (lf, rf)
        assert not (spec.int_dot or spec.byte_dot or spec.word_dot), (lf, rf)
        assert spec.gemm_rows == 2 * dot_kernels.AMX_ROWS
        assert dot_kernels.gemm_by_default(spec, "GenuineIntel")
        assert DS.from_name(spec.name) == spec
        assert not dot_kernels._DotKernel(spec).byte
    for lf, rf in (("mxfp4_e2m1", "mxfp4_e2m1"), ("nvfp4", "nvfp4"), ("mxint8", "mxfp6_e2m3")):
        spec = DS(lf, rf, path="amx")
        assert spec.quad_dot and not spec.amx_dot and not spec.bf16_dot, (lf, rf)
        assert spec.gemm_rows == dot_kernels.MR_INT["avx512"]
    assert not DS("f32", "mxfp4_e2m1", path="amx").amx_dot
    assert not DS("mxfp8_e4m3", "mxfp8_e4m3", 32, 64, path="amx").amx_dot
    k = dot_kernels._DotKernel(DS("bf16", "mxfp8_e4m3", path="amx"))
    assert k.bf_stream and not k.amx
    for lf, rf in (("mxfp4_e2m1", "mxfp4_e2m1"), ("f32", "mxfp4_e2m1"), ("bf16", "mxfp8_e4m3")):
        # no AMX GEMM: avx512's kernel, byte for byte (the amx path runs it where it runs)
        a, b = (dot_kernels.build(DS(lf, rf, path=p)) for p in ("avx512", "amx"))
        assert a.replace("_avx512", "_path") == b.replace("_amx", "_path"), (lf, rf)


@pytest.mark.parametrize("lf,rf,k", [("mxfp8_e4m3", "mxfp8_e4m3", None),
                                     ("mxfp6_e3m2", "mxint8", None),
                                     ("mxfp8_e5m2", "mxfp6_e2m3", 64)])
def test_amx_kernels_compile_to_tile_instructions(lf, rf, k, tmp_path):
    """The amx path's kernels lower through upstream MLIR and llc (Sapphire Rapids) to a
    library whose GEMM is AMX tile code: a tile configuration, tile loads and stores, and
    ``tdpbf16ps``.  (They run only on a CPU with AMX whose OS grants the tile state; their
    results were checked against the exact dot on such a machine: BENCHMARKS.md.)"""
    spec = dot_kernels.DotSpec(lf, rf, k, k, path="amx")
    _, module = ffi_dot.lower_module(spec)
    text = str(module)
    assert text.count("llvm.x86.tdpbf16ps.internal") == 4 * (dot_kernels.AMX_STEPS + 1)
    assert "llvm.x86.tilezero.internal" in text
    from mxlower.execution import ptx

    asm = ptx._run("llc", [ptx._tool("llc"), "-O2", "-mcpu=sapphirerapids", "-o", "-", "-"],
                   ptx.translate_to_llvmir(text)).stdout
    asm = asm.decode() if isinstance(asm, bytes) else asm
    for ins in ("ldtilecfg", "tileloadd", "tilestored", "tdpbf16ps", "tilerelease"):
        assert ins in asm, ins


def test_which_gemms_take_the_kernel_by_default():
    """The integer dot products on every vendor's CPU, the bf16 ones on AMD's (faster than
    XLA's f32 dot on a Zen 4, slower on a Sapphire Rapids), f32 rows' transposed panels on
    the 512-bit paths, the other f32 GEMM paths never."""
    by_default = dot_kernels.gemm_by_default
    DS = dot_kernels.DotSpec
    for vendor in ("AuthenticAMD", "GenuineIntel", ""):
        assert by_default(DS("mxint8", "mxint8", path="avx512"), vendor)
        assert by_default(DS("mxfp4_e2m1", "mxfp4_e2m1", path="avx2"), vendor)
        assert not by_default(DS("mxfp8_e4m3", "mxfp8_e4m3", path="vnni"), vendor)
        assert not by_default(DS("mxfp8_e4m3", "mxint8", path="portable"), vendor)
    bf = DS("mxfp8_e4m3", "mxfp8_e4m3", path="avx512")
    assert by_default(bf, "AuthenticAMD") and not by_default(bf, "GenuineIntel")
    # plain bf16 rows: the packed GEMM on bf16 dot products likewise, on AMD's CPUs; f32 /
    # f16 rows, bf16 rows off the 512-bit paths and an odd block size, never
    for path in ("avx512", "amx"):
        plain_bf = DS("bf16", "mxfp4_e2m1", path=path)
        assert by_default(plain_bf, "AuthenticAMD") and not by_default(plain_bf, "GenuineIntel")
    for vendor in ("AuthenticAMD", "GenuineIntel", ""):
        assert not by_default(DS("bf16", "mxfp8_e4m3", None, 33, path="avx512"), vendor)
        for plain, path in (("f32", "avx2"), ("f16", "avx512"), ("bf16", "vnni")):
            assert not by_default(DS(plain, "mxfp8_e4m3", path=path), vendor)
        for path in ("avx512", "amx"):
            assert by_default(DS("f32", "nvfp4", path=path), vendor)
            assert not by_default(DS("f32", "mxfp4_e2m1", path=path, rhs_kn=True), vendor)


@pytest.mark.parametrize("path", dot_kernels.X86_PATHS)
@pytest.mark.parametrize("lf, rf, k", INT_PAIRS)
def test_integer_dot_products_gemm(lf, rf, k, path):
    """The GEMM's integer dot products (M > STREAM_M) against the reference, on each path
    this CPU runs: ragged tiles of rows and groups of columns, N across panels, K of one to
    five blocks, batches."""
    if path not in PATHS:
        pytest.skip(f"this CPU does not run the {path} path")
    rng = np.random.default_rng(INT_PAIRS.index((lf, rf, k)))
    assert dot_kernels.DotSpec(lf, rf, k, k, path).int_dot
    big = dot_kernels.MB_INT + 13  # A packed in blocks of MB_INT rows: two, the last ragged
    for shape in (((), 17, 1, 1), ((), 20, 35, 1), ((), 23, 70, 3), ((2,), 18, 16, 2),
                  ((), 41, 33, 5), ((2,), big, 37, 1)):
        if (k or 0) > 64 and shape[3] > 2:
            continue
        _run(lf, rf, shape, rng, path, k=k)


#: the word pairs (an e3m2 side; blocks of 2), whose GEMM takes bf16 dot products on avx512
WORD_PAIRS = [("mxfp6_e3m2", "mxfp6_e3m2", None), ("mxfp4_e2m1", "mxfp6_e3m2", None),
              ("mxfp6_e3m2", "mxint8", None), ("nvfp4", "mxfp6_e3m2", 16),
              ("mxfp6_e2m3", "mxfp6_e3m2", None), ("mxfp4_e2m1", "mxfp4_e2m1", 2)]


@pytest.mark.skipif(not {"avx512", "vnni"} <= set(PATHS), reason="this CPU has no avx512 path")
@pytest.mark.parametrize("lf, rf, k", WORD_PAIRS)
def test_bf16_block_sums_are_the_word_dot_products(lf, rf, k):
    """avx512's GEMM of the word pairs (bf16 dot products of both sides' scaled values into
    lanes that start each block at zero, the exact block sum then added:
    :attr:`DotSpec.bf16_blocks`) gives the vnni path's results bit for bit (vpdpwssd's i32
    block sums, converted and multiplied by the two factors in an FMA): the same exact
    block sums, added in the same order -- where a sum over blocks in bf16 dot products'
    lanes rounds differently (blocks up to 2^20 apart; mutation-checked)."""
    assert dot_kernels.DotSpec(lf, rf, k, k, "avx512").bf16_blocks
    assert dot_kernels.DotSpec(lf, rf, k, k, "vnni").word_dot
    rng = np.random.default_rng(WORD_PAIRS.index((lf, rf, k)))
    kk = k or 32
    for batch, M, N, kb in (((), 41, 70, 9), ((2,), 20, 33, 3)):
        a, sa, va = _side(rng, lf, batch + (M, kb * kk), k, spread=20)
        b, sb, vb = _side(rng, rf, batch + (N, kb * kk), k, spread=20)
        got = {path: np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, lhs_block_size=k,
                                            rhs_block_size=k, path=path))
               for path in ("avx512", "vnni")}
        assert np.array_equal(got["avx512"], got["vnni"]), (lf, rf, k, M, N)
        nb = len(batch)
        dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
        assert_dot_close(got["avx512"], va, vb, dn, what=f"{lf} x {rf}")


#: pairings of the GEMM's bf16 dot products (path avx512): an f8 side, one block size
BF16_PAIRS = [("mxfp8_e4m3", "mxfp8_e4m3", None), ("mxfp8_e5m2", "mxfp8_e5m2", None),
              ("mxfp8_e4m3", "mxfp8_e5m2", None), ("mxfp8_e4m3", "mxint8", None),
              ("mxfp4_e2m1", "mxfp8_e5m2", None), ("mxfp6_e3m2", "mxfp8_e4m3", None),
              ("nvfp4", "mxfp8_e4m3", 16), ("mxfp8_e5m2", "mxfp6_e2m3", 2),
              ("mxfp6_e3m2", "mxfp6_e3m2", 96)]


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("lf, rf, k", BF16_PAIRS)
def test_bf16_dot_products_gemm(lf, rf, k):
    """The GEMM's bf16 dot products (path avx512, M > STREAM_M) against the reference:
    ragged tiles, N across panels, K of one to five blocks, batches, two blocks of MB_INT
    rows of A."""
    rng = np.random.default_rng(BF16_PAIRS.index((lf, rf, k)))
    assert dot_kernels.DotSpec(lf, rf, k, k, "avx512").bf16_dot
    for shape in (((), 17, 1, 1), ((), 20, 35, 1), ((), 23, 70, 3), ((2,), 18, 16, 2),
                  ((), 41, 33, 5), ((2,), dot_kernels.MB_INT + 13, 37, 1)):
        _run(lf, rf, shape, rng, "avx512", k=k)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("fmt", MX)
def test_plain_bf16_rows_gemm(fmt):
    """bf16 rows against MX weights past the streaming tiles' rows (DotSpec.stream_m): the
    avx512 path's packed GEMM on bf16 dot products, A's pairs read as stored (the tile's
    rows past M repeating its last), against the reference: one row past the streaming
    rows, ragged tiles of rows and columns, N across panels, K of one to five blocks,
    block sizes 8 to 64, batches, several blocks of rows (the handler's dims[5]) across
    XLA's threads; bit-identical to the f32 FMA path where every sum is exact."""
    rng = np.random.default_rng(MX.index(fmt) + 300)
    spec = dot_kernels.DotSpec("bf16", fmt, path="avx512")
    assert spec.bf16_dot and spec.packed_gemm and not dot_kernels._DotKernel(spec).a_packed
    assert dot_kernels.gemm_by_default(spec, "AuthenticAMD")
    most = spec.stream_m
    for k in ((16,) if fmt == "nvfp4" else (None, 8, 64)):
        for shape in (((), most + 1, 33, 1), ((), most + 6, 70, 3), ((2,), 61, 16, 2),
                      ((), 150, 37, 5)):
            _run("bf16", fmt, shape, rng, "avx512", k=k)
    _run("bf16", fmt, ((3,), 203, 9 * dot_kernels.NP + 5, 4), rng, "avx512")
    # exact sums: small integers on both sides, the same bits as the f32 FMA path (vnni)
    x = rng.integers(-8, 9, (most + 11, 64)).astype(ml_dtypes.bfloat16)
    q = mxj.quantize(rng.integers(-4, 5, (37, 64)).astype(F32), fmt, impl="xla")
    got = np.asarray(ffi_dot.dot(x, None, q.elements, q.scales, None, fmt, path="avx512"))
    want = np.asarray(ffi_dot.dot(x, None, q.elements, q.scales, None, fmt, path="vnni"))
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
def test_bf16_dot_products_extremes():
    """e5m2's largest and smallest (subnormal) magnitudes, unscaled products from 2^-32 to
    2^31.8: vdpbf16ps flushes subnormal bf16 inputs and outputs, which none of these are;
    the sums are exact here (every block's products share a few binades), so the results
    equal the f64 reference bit for bit; and the scales' range test still sends blocks with
    scales at the ends of the range to the f64 contraction."""
    fmt, k = "mxfp8_e5m2", 32
    rows, cols = dot_kernels.STREAM_M + 5, 19
    codes = np.zeros((rows, 2 * k), np.uint8)
    codes[:, :k] = 0x7B  # 57344
    codes[:, k:] = 0x01  # 2^-16
    codes[1::2] |= 0x80
    bc = np.where(np.arange(cols)[:, None] % 2 == 0, 0x7B, 0x01).astype(np.uint8) + \
        np.zeros((1, 2 * k), np.uint8)
    ea = codes.view(ml_dtypes.float8_e5m2)
    eb = bc.view(ml_dtypes.float8_e5m2)
    for scale in (127, 3):  # 2^0: the f32 paths; 2^-124: the f64 contraction
        sa = np.full((rows, 2), scale, np.uint8).view(ml_dtypes.float8_e8m0fnu)
        sb = np.full((cols, 2), 127, np.uint8).view(ml_dtypes.float8_e8m0fnu)
        va, vb = R.dequantize(ea, sa, fmt), R.dequantize(eb, sb, fmt)
        got = np.asarray(ffi_dot.dot(ea, sa, eb, sb, fmt, fmt, path="avx512"))
        want = (va.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
        assert np.array_equal(got, want), scale


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("fmt", MX)
def test_bf16_activations_stream_on_bf16_dot_products(fmt):
    """bf16 activations against MX weights, 3 to 16 rows (the streaming tiles), on the
    avx512 path's bf16 dot products (A's bf16 values as stored, B's scaled values exact in
    bf16): against the reference for one and two tiles of rows, ragged columns, block sizes
    8 to 64, batches; bit-identical to the f32 FMA path where every sum is exact (small
    integers)."""
    rng = np.random.default_rng(MX.index(fmt) + 100)
    assert dot_kernels._DotKernel(dot_kernels.DotSpec("bf16", fmt, path="avx512")).bf_stream
    for k in ((16,) if fmt == "nvfp4" else (None, 8, 64)):
        for shape in (((), 3, 37, 2), ((), 7, 33, 2), ((2,), 13, 70, 3), ((), 16, 35, 1)):
            _run("bf16", fmt, shape, rng, "avx512", k=k)
    # exact sums: small integers on both sides, the same bits as the FMA path
    x = rng.integers(-8, 9, (9, 64)).astype(ml_dtypes.bfloat16)
    q = mxj.quantize(rng.integers(-4, 5, (21, 64)).astype(F32), fmt, impl="xla")
    got = np.asarray(ffi_dot.dot(x, None, q.elements, q.scales, None, fmt, path="avx512"))
    want = np.asarray(ffi_dot.dot(x, None, q.elements, q.scales, None, fmt, path="vnni"))
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("lf, rf, k", [("mxfp8_e4m3", "mxfp8_e4m3", None),
                                       ("mxfp8_e5m2", "mxfp4_e2m1", None),
                                       ("mxint8", "mxfp8_e5m2", 64),
                                       ("nvfp4", "mxfp6_e3m2", None),
                                       ("mxfp6_e2m3", "nvfp4", None)])
def test_mx_rows_stream_on_bf16_dot_products(lf, rf, k):
    """MX activations against MX weights off the exact path (an f8 side, two block sizes):
    the streaming tiles decode A's rows to bf16 once and run as bf16 rows do -- bit for bit
    the kernel of bf16 rows holding the decoded values (the decode is exact), for 1 to 16
    rows, batches, ragged columns, A's values down to 2^-126 (scales near the range's low
    end, products kept normal by large weights' scales); within section 6 of the
    reference; the exact pairs keep their exact block sums."""
    def kernel(lf, rf, path="avx512"):
        return dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, None, None, path))

    assert kernel(lf, rf).a_bf16 and kernel(lf, rf).bf_stream and kernel(lf, rf).piped
    assert not kernel(lf, rf, "vnni").a_bf16
    assert not kernel("mxfp4_e2m1", "mxfp4_e2m1", "vnni").a_bf16  # exact block sums, FMAs
    assert not kernel("bf16", rf).a_bf16 and not kernel(lf, "bf16").a_bf16
    rng = np.random.default_rng(MX.index(lf) * 11 + MX.index(rf))
    kk = k or (16 if "nvfp4" in (lf, rf) else 32)
    for batch, M, N, kb in (((), 1, 37, 2), ((), 2, 33, 1), ((2,), 7, 33, 2), ((), 16, 70, 3),
                            ((), 3, 35, 1)):
        K = kb * kk
        a, sa, va = _side(rng, lf, batch + (M, K), kk)
        b, sb, vb = _side(rng, rf, batch + (N, K), kk)
        got = np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, lhs_block_size=kk,
                                     rhs_block_size=kk, path="avx512"))
        nb = len(batch)
        dn = (((nb + 1,), (nb + 1,)), (tuple(range(nb)), tuple(range(nb))))
        assert_dot_close(got, va, vb, dn, what=f"{lf} x {rf} {M} rows")
        want = np.asarray(ffi_dot.dot(va.astype(ml_dtypes.bfloat16), None, b, sb, None, rf,
                                      rhs_block_size=kk, path="avx512"))
        np.testing.assert_array_equal(got, want)
    if k is None and "nvfp4" not in (lf, rf):
        # A's values down to 2^-126 (its smallest code times its smallest scale), B's scales
        # lifting the products: the f32 path, A's decode exact there too (bf16 rows holding
        # those values go to the f64 contraction: a plain side's test reads exponent fields)
        lo = 1 + {"mxfp8_e4m3": 9, "mxfp8_e5m2": 16, "mxint8": 6, "mxfp6_e2m3": 3}[lf]
        ea, sa, va = _with_scales(rng, lf, (9, 2 * kk), range(lo, lo + 3))
        eb, sb, vb = _with_scales(rng, rf, (21, 2 * kk), range(150, 153))
        assert np.abs(va[va != 0]).min() < 2.0 ** -100
        for M in (1, 2, 9):
            got = np.asarray(ffi_dot.dot(ea[:M], sa[:M], eb, sb, lf, rf, path="avx512"))
            assert_dot_close(got, va[:M], vb, (((1,), (1,)), ((), ())),
                             what=f"{lf} x {rf} low A, {M} rows")


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("lf, rf, k", [("mxfp4_e2m1", "mxfp4_e2m1", None), ("nvfp4", "nvfp4", None),
                                       ("mxint8", "mxint8", None),
                                       ("mxfp6_e3m2", "mxfp6_e3m2", None),
                                       ("mxfp6_e2m3", "mxfp4_e2m1", None),
                                       ("mxfp4_e2m1", "mxint8", 16)])
def test_exact_pairs_stream_on_bf16_dot_products(lf, rf, k):
    """The exact pairs (integer-unit formats, one block size of 16 or 32) on avx512's bf16
    dot products (EXACT_BF16): every lane two exact products of one block, added into f64
    lanes -- the exact sum rounded once where the f64 sum is exact (the data here: a few
    binades), so bit for bit the FMA tiles' integer block sums (vnni) and the f64 dot of the
    decoded values, for 1 to 16 rows, batches, ragged columns, K of one to three blocks."""
    kern = dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, k, k, "avx512"))
    assert kern.exact_bf16 and kern.piped and kern.bf_stream and kern.a_bf16
    rng = np.random.default_rng(MX.index(lf) * 13 + MX.index(rf))
    kk = k or FORMATS[lf].block_size
    for batch, M, N, kb in (((), 1, 37, 2), ((), 2, 33, 1), ((2,), 5, 33, 2), ((), 8, 70, 3),
                            ((), 16, 35, 3), ((), 3, 3, 1)):
        K = kb * kk
        a, sa, va = _side(rng, lf, batch + (M, K), kk)
        b, sb, vb = _side(rng, rf, batch + (N, K), kk)
        got = np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, lhs_block_size=kk,
                                     rhs_block_size=kk, path="avx512"))
        fma = np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, lhs_block_size=kk,
                                     rhs_block_size=kk, path="vnni"))
        np.testing.assert_array_equal(got, fma)
        want = np.einsum("...mk,...nk->...mn", va.astype(np.float64), vb.astype(np.float64))
        np.testing.assert_array_equal(got, want.astype(F32))


def test_exact_group_rooms():
    """The exact bf16 tiles sum groups of steps in f32 lanes (where the scales allow) for the
    pairs whose units leave EXACT_GROUP_ROOM binades of spread in a group of EXACT_GROUP
    steps (EXACT_GROUP_ROOM_E4M3 with an nvfp4 side), else of half as many (down to
    EXACT_GROUP_MIN): a lane's 4 x steps products, its two halves added, of at most
    unit_max(a) x unit_max(b) below 2^24 of the group's least power of two (E4M3 scales:
    times 15 x 15), folded tiles or not (blocks of 16: nvfp4, e2m1 at k = 16).  Not e3m2
    with anything but e2m1, other paths, plain sides."""
    def kern(lf, rf, path="avx512", k=None):
        return dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, k, k, path))

    rooms8 = {("mxfp4_e2m1", "mxfp4_e2m1"): 11, ("mxfp6_e2m3", "mxfp6_e2m3"): 7,
              ("mxfp4_e2m1", "mxfp6_e2m3"): 9, ("mxfp4_e2m1", "mxint8"): 8,
              ("mxfp6_e2m3", "mxint8"): 6, ("mxint8", "mxint8"): 5,
              ("mxfp6_e3m2", "mxfp4_e2m1"): 6, ("mxfp6_e3m2", "mxfp6_e2m3"): 4,
              ("mxfp6_e3m2", "mxfp6_e3m2"): 1, ("mxfp6_e3m2", "mxint8"): 3}
    steps = {("mxint8", "mxint8"): 4, ("mxfp6_e3m2", "mxfp6_e2m3"): 0,
             ("mxfp6_e3m2", "mxint8"): 0, ("mxfp6_e3m2", "mxfp6_e3m2"): 0}
    for (lf, rf), room in rooms8.items():
        k = kern(lf, rf)
        ua, ub = (dot_kernels.unit_max(FORMATS[f]) for f in (lf, rf))
        assert k.folded() and k.group_room(8) == room, (lf, rf)
        assert 4 * 8 * ua * ub << room <= 1 << 24 < 4 * 8 * ua * ub << (room + 1)
        assert k.group_steps == steps.get((lf, rf), 8), (lf, rf)
        assert k.grouped == bool(k.group_steps)
        if k.grouped:
            assert k.group_room() >= dot_kernels.EXACT_GROUP_ROOM
            assert k.group_steps == 8 or k.group_room(8) < dot_kernels.EXACT_GROUP_ROOM
            assert k.group_room(k.group_steps // 2) == k.group_room() + 1
    nv = kern("nvfp4", "nvfp4")  # 4 x 8 x 180^2 < 2^20
    assert not nv.folded() and nv.group_steps == 8 and nv.group_room() == 4
    e16 = kern("mxfp4_e2m1", "mxfp4_e2m1", k=16)
    assert not e16.folded() and e16.group_steps == 8 and e16.group_room() == 11
    assert not kern("mxfp4_e2m1", "mxfp4_e2m1", "vnni").grouped
    assert not kern("bf16", "mxfp4_e2m1").grouped


def _coded_side(rng, name, shape, codes):
    """(elements, scales, f32 values): random codes of ``name`` in blocks of 32 under the
    scale codes ``codes`` ([..., K / 32])."""
    q = mxj.quantize(rng.standard_normal(shape).astype(F32), name, block_size=32, impl="xla")
    e = np.asarray(q.elements)
    s = np.asarray(codes, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    t = FLOAT_TYPES.get(FORMATS[name].element)
    c = R.from_bits(e, FORMATS[name].element) if t is not None and t.bits == 6 else e
    return q.elements, jnp.asarray(s), R.dequantize(c, s, name, block_size=32)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("lf, rf", [("mxfp4_e2m1", "mxfp4_e2m1"), ("mxfp6_e2m3", "mxfp6_e2m3"),
                                    ("mxfp6_e2m3", "mxfp4_e2m1"), ("mxfp4_e2m1", "mxint8"),
                                    ("mxfp6_e3m2", "mxfp4_e2m1"), ("mxint8", "mxint8")])
def test_exact_groups_bit_for_bit(lf, rf):
    """Groups of steps summed in f32 lanes (the spread of their scale codes within the pair's
    room) and groups added step by step (A's codes 40 apart in the second group of 8
    blocks), whole groups and the steps past them (K of 8, 9, 17 and 24 blocks), 1 to 16
    rows, ragged columns: bit for bit the FMA tiles' integer block sums (vnni) and the f64
    dot."""
    assert dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, path="avx512")).grouped
    rng = np.random.default_rng(MX.index(lf) * 7 + MX.index(rf))
    for M, kb in ((1, 8), (2, 9), (3, 17), (5, 24), (8, 17), (16, 9)):
        blk = np.arange(kb)
        ca = 126 + blk % 3 + np.where(blk // 8 == 1, np.where(blk % 2, 20, -20), 0)
        cb = 127 + (blk + 1) % 3
        a, sa, va = _coded_side(rng, lf, (M, 32 * kb), np.broadcast_to(ca, (M, kb)))
        b, sb, vb = _coded_side(rng, rf, (19, 32 * kb), np.broadcast_to(cb, (19, kb)))
        got, fma = (np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, path=p))
                    for p in ("avx512", "vnni"))
        want = (va.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
        np.testing.assert_array_equal(got, want, err_msg=f"M={M} K={32 * kb}")
        np.testing.assert_array_equal(fma, want)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("M", [1, 2, 8])
def test_exact_groups_keep_what_f32_lanes_would_lose(M):
    """A group whose scales are 40 binades apart -- a tiny block, then a huge one and its
    negation -- must not be summed in f32 lanes (the tiny block's products would vanish
    into the huge ones before those cancel): the result is the tiny block's dot, exactly."""
    rng = np.random.default_rng(5)
    K = 16 * 32
    x = np.zeros((M, K), F32)
    x[:, 256:288] = rng.standard_normal((M, 32)) * 2.0 ** -20  # block 8: tiny
    x[:, 288:320] = rng.standard_normal((M, 32)) * 2.0 ** 20  # block 9: huge
    x[:, 320:352] = -x[:, 288:320]  # block 10: its negation
    w = rng.standard_normal((19, K)).astype(F32)
    w[:, 320:352] = w[:, 288:320]
    qa, qb = (mxj.quantize(v, "mxfp4_e2m1", impl="xla") for v in (x, w))
    got = np.asarray(ffi_dot.dot(qa.elements, qa.scales, qb.elements, qb.scales,
                                 "mxfp4_e2m1", "mxfp4_e2m1", path="avx512"))
    va, vb = (np.asarray(mxj.dequantize(q)).astype(np.float64) for q in (qa, qb))
    want = (va[:, 256:288] @ vb[:, 256:288].T).astype(F32)
    assert np.count_nonzero(want) > want.size // 2
    assert np.array_equal((va @ vb.T).astype(F32), want)
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("M", [2, 8])
@pytest.mark.parametrize("eb, way", [(5, "group"), (6, "parts of 4"), (7, "parts of 2"),
                                     (8, "step by step")])
def test_exact_groups_in_parts(M, eb, way):
    """A group whose spread exceeds its room by one or two binades is summed in f32 lanes in
    parts of 4 or 2 steps, past that step by step (EXACT_GROUP_PARTS): e2m1 x e2m1 (room 11
    for 8 steps), A's first block 0.5 at 2^0 and then 6.0 at 2^6, B's 0.5 at 2^0 and then
    6.0 at 2^eb, the next group the big blocks' negation: the dot is 0.25 exactly.  Summed
    as one group at eb = 7 (seven big steps, 2^23 of the least product) or in parts of 4 at
    eb = 8, the 0.25 would vanish into the big sums."""
    kern = dot_kernels._DotKernel(dot_kernels.DotSpec("mxfp4_e2m1", "mxfp4_e2m1",
                                                      path="avx512"))
    assert kern.group_steps == 8 and [kern.group_room(n) for n in (8, 4, 2)] == [11, 12, 13]
    assert dot_kernels.EXACT_GROUP_PARTS == 2
    f4 = ml_dtypes.float4_e2m1fn
    K, N = 16 * 32, 19
    a, b = np.zeros((M, K), np.float32), np.zeros((N, K), np.float32)
    a[:, 0] = b[:, 0] = 0.5
    a[:, 32:256] = a[:, 256:480] = b[:, 32:256] = 6.0
    b[:, 256:480] = -6.0
    codes = np.full(16, 127)
    sa, sb = codes.copy(), codes.copy()
    sa[1:15], sb[1:15] = 127 + 6, 127 + eb
    sides = [(x.astype(f4), np.broadcast_to(c.astype(np.uint8), (x.shape[0], 16)).view(
        ml_dtypes.float8_e8m0fnu)) for x, c in ((a, sa), (b, sb))]
    got = np.asarray(ffi_dot.dot(jnp.asarray(sides[0][0]), jnp.asarray(sides[0][1]),
                                 jnp.asarray(sides[1][0]), jnp.asarray(sides[1][1]),
                                 "mxfp4_e2m1", "mxfp4_e2m1", path="avx512"))
    va, vb = (R.dequantize(e, sc, "mxfp4_e2m1", block_size=32).astype(np.float64)
              for e, sc in sides)
    assert np.array_equal(va @ vb.T, np.full((M, N), 0.25))
    np.testing.assert_array_equal(got, np.full((M, N), 0.25, np.float32), err_msg=way)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("lf, rf, room, steps", [
    ("nvfp4", "nvfp4", 4, 8), ("mxfp4_e2m1", "nvfp4", 7, 8), ("mxfp4_e2m1", "mxfp4_e2m1", 11, 8),
    ("mxfp6_e2m3", "mxfp6_e2m3", 7, 8), ("mxint8", "mxint8", 6, 4)])
def test_exact_groups_of_unfolded_steps(lf, rf, room, steps):
    """The tiles whose steps hold two blocks of 16 (EXACT_GROUP_UNFOLDED) -- nvfp4's E4M3
    scales (their exponent fields' spread), the e8m0 formats at k = 16 -- sum groups of
    steps too, the group's two halves of lanes added as it goes into the f64 lanes: random
    data whose blocks' scales lie up to 6 binades apart (groups fast and slow), whole
    groups and the steps past them, 1 to 16 rows: bit for bit the f64 dot."""
    kern = dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, 16, 16, "avx512"))
    assert kern.group_steps == steps and kern.group_room() == room and not kern.folded()
    rng = np.random.default_rng(3)
    for M, kb in ((1, 8), (2, 9), (3, 16), (8, 17), (5, 24), (16, 33)):
        a, sa, va = _side(rng, lf, (M, 16 * kb), 16)
        b, sb, vb = _side(rng, rf, (19, 16 * kb), 16)
        got = np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, lhs_block_size=16,
                                     rhs_block_size=16, path="avx512"))
        want = (va.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
        np.testing.assert_array_equal(got, want, err_msg=f"M={M} K={16 * kb}")


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("M", [1, 2, 8])
def test_exact_nvfp4_groups_keep_what_f32_lanes_would_lose(M):
    """nvfp4's group check reads the E4M3 scales' exponent fields: in a group of 16 blocks, a
    tiny block (exponent field 1) in the first half of a step's lanes, a huge one (field
    15) in the second half and its negation in the next step's first half -- 28 binades
    apart, beyond f32 lanes -- must be added step by step: the result is the dot without
    the huge blocks, exactly."""
    rng = np.random.default_rng(6)
    K = 16 * 16
    qa, qb = (mxj.quantize(rng.standard_normal((n, K)).astype(F32), "nvfp4", impl="xla")
              for n in (M, 19))
    (ea, sa), (eb, sb) = ((np.array(q.elements), np.array(q.scales).view(np.uint8))
                          for q in (qa, qb))
    for e, neg in ((ea, True), (eb, False)):
        e[:, 96:112] = -e[:, 80:96] if neg else e[:, 80:96]
    for s in (sa, sb):
        s[:, 4] = 0x08 | (s[:, 4] & 7)  # field 1: 2^-6 x 1.m
        s[:, 5] = s[:, 6] = 0x78 | (s[:, 5] & 3)  # field 15: 2^8 x 1.m (not NaN)
    (va, vb) = (R.dequantize(e, s.view(ml_dtypes.float8_e4m3fn), "nvfp4", block_size=16)
                .astype(np.float64) for e, s in ((ea, sa), (eb, sb)))
    got = np.asarray(ffi_dot.dot(jnp.asarray(ea), jnp.asarray(sa.view(ml_dtypes.float8_e4m3fn)),
                                 jnp.asarray(eb), jnp.asarray(sb.view(ml_dtypes.float8_e4m3fn)),
                                 "nvfp4", "nvfp4", lhs_block_size=16, rhs_block_size=16,
                                 path="avx512"))
    keep = np.r_[0:80, 112:K]
    want = (va[:, keep] @ vb[:, keep].T).astype(F32)
    assert np.array_equal((va @ vb.T).astype(F32), want)
    tiny = (va[:, 64:80] @ vb[:, 64:80].T)
    assert np.count_nonzero(tiny) > tiny.size // 2
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("flag", ["MX_ROWS_BF16", "BF16_STREAM"])
def test_exact_pairs_keep_the_fma_tiles_without_bf16_rows(monkeypatch, flag):
    """The A/B switches the exact bf16 tiles build on: either off, the exact pairs take the
    FMA tiles' integer block sums again (the kernel builds; nothing asks for bf16 tiles)."""
    monkeypatch.setattr(dot_kernels, flag, False)
    kern = dot_kernels._DotKernel(dot_kernels.DotSpec("mxfp4_e2m1", "mxfp4_e2m1",
                                                      path="avx512"))
    assert not kern.exact_bf16 and not kern.piped and not kern.a_bf16
    assert "dpbf16ps" not in kern.function()


def test_which_streaming_tiles_are_piped():
    """The software-pipelined streaming tiles (B's chunks decoded two steps ahead of the
    FMAs or bf16 dot products) on the 512-bit paths, for every MX weight format under
    plain activations; never on the 256-bit paths or for the exact block sums; the table
    decodes there: f4 codes in chunks of 16 or 32, f6 codes in chunks of 32 on bf16 dot
    products."""
    def kernel(lf, rf, path="avx512", k=None):
        return dot_kernels._DotKernel(dot_kernels.DotSpec(lf, rf, None, k, path))

    for lf in ("f32", "bf16"):
        for rf in MX:
            assert kernel(lf, rf).piped and kernel(lf, rf, "amx").piped, (lf, rf)
            for path in ("vnni", "avx2", "portable"):
                assert not kernel(lf, rf, path).piped, (lf, rf, path)
    # the exact pairs with blocks of 16 or 32: on bf16 dot products, f64 lanes (avx512)
    assert kernel("mxfp4_e2m1", "mxfp4_e2m1").piped
    assert kernel("mxfp4_e2m1", "mxfp4_e2m1").exact_bf16 and kernel("nvfp4", "nvfp4").exact_bf16
    assert not dot_kernels._DotKernel(dot_kernels.DotSpec(  # blocks of 64: the FMAs
        "mxfp4_e2m1", "mxfp4_e2m1", 64, 64, "avx512")).piped
    assert not kernel("mxfp4_e2m1", "mxfp4_e2m1", "vnni").piped
    assert not kernel("mxfp4_e2m1", "f32").piped  # plain weights
    assert kernel("bf16", "mxfp4_e2m1").table_decode() and kernel("bf16", "nvfp4").table_decode()
    assert not kernel("bf16", "mxfp4_e2m1", k=8).table_decode()  # chunks of 8
    assert kernel("f32", "mxfp4_e2m1").table_decode() and kernel("f32", "nvfp4").table_decode()
    assert kernel("bf16", "mxfp6_e2m3").table_decode() and kernel("bf16", "mxfp6_e3m2").table_decode()
    assert not kernel("f32", "mxfp6_e2m3").table_decode()  # f6 on the FMAs: two rows only
    assert kernel("f32", "mxfp6_e2m3").table_decode(2)
    assert kernel("f32", "mxfp6_e3m2").scale_tables(2)
    assert not kernel("f32", "mxfp6_e2m3").table_decode(8)
    assert not kernel("bf16", "mxfp6_e2m3", k=16).table_decode()  # chunks of 16
    assert not kernel("bf16", "mxfp8_e4m3").table_decode()
    assert not kernel("bf16", "mxfp4_e2m1", "avx2").table_decode()
    # f8 (and f6 in chunks of 16) on bf16 dot products: placed bits; never for the FMAs
    for rf, k in (("mxfp8_e4m3", None), ("mxfp8_e5m2", 16), ("mxfp6_e3m2", 16)):
        assert kernel("bf16", rf, k=k).placed_decode()
        assert kernel("bf16", rf, "amx", k).placed_decode()
        assert not kernel("f32", rf, k=k).placed_decode()
        assert not kernel("bf16", rf, "avx2", k).placed_decode()
    assert kernel("bf16", "mxint8").placed_decode()  # mxint8 in chunks of 32
    for rf, k in (("mxfp6_e2m3", None), ("mxfp4_e2m1", None), ("nvfp4", None),
                  ("mxint8", 16), ("mxfp8_e4m3", 8)):  # tables, chunks of 16 / 8
        assert not kernel("bf16", rf, k=k).placed_decode(), rf
    # one row against f4 codes in chunks of 16: permutes from the constant table (avx512)
    for lf in ("f32", "bf16", "f16"):
        assert kernel(lf, "nvfp4").f4_perm and kernel(lf, "mxfp4_e2m1", k=16).f4_perm
        assert not kernel(lf, "mxfp4_e2m1").f4_perm  # chunks of 32: avx2's byte shuffles
        assert not kernel(lf, "nvfp4", "vnni").f4_perm


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("plain", ["f32", "bf16"])
def test_piped_streaming_tiles(plain, fmt):
    """The pipelined tiles against the reference: one row (bf16 dot products on f4, f6
    and f8 codes; the others one row at a time) and two (one tile), 3 to 16 rows (one tile
    of 4 rows, one and two of 8), K of one block (the loop's steps decode its only chunk
    again) to three, two chunks per block (k = 64), f4 in chunks of 16 (two per step on bf16
    dot products, from two blocks' tables; past K zeros), ragged columns across panels,
    batches (A's copy in slabs made again for each batch; M = 3, 11: tiles reading rows
    past M), and an empty contraction (zeros)."""
    rng = np.random.default_rng(FORMATS[fmt].block_size + len(plain))
    ks = (16,) if fmt == "nvfp4" else (None, 16, 64) if fmt == "mxfp4_e2m1" else (None, 64)
    for k in ks:
        for shape in (((), 1, 37, 3), ((2,), 1, 33, 1), ((), 2, 70, 2), ((3,), 2, 35, 1),
                      ((), 3, 37, 1), ((), 4, 33, 3), ((3,), 8, 70, 2), ((2,), 11, 35, 1),
                      ((), 16, 64, 3)):
            _run(plain, fmt, shape, rng, "avx512", k=k)
    for M in (1, 2, 8):
        x = np.ones((2, M, 0), PLAIN[plain])
        q = mxj.quantize(np.ones((2, 5, 0), F32), fmt, impl="xla")
        got = np.asarray(ffi_dot.dot(x, None, q.elements, q.scales, None, fmt, path="avx512"))
        np.testing.assert_array_equal(got, np.zeros((2, M, 5), F32))


def _every_code(fmt: str, R_: int, k: int, rng):
    """Weights holding every code of ``fmt`` (float elements): columns whose K = 2^bits
    codes are the code sequence rotated by R_ per column (the Inf / NaN codes there zeros;
    f4's 16 codes four times over, K = 64), then a column per Inf / NaN code holding it at
    K = 0 only (A's row 0 picks it); random scales 2^-10 .. 2^10 per block.  (the elements as ffi_dot takes them, the scales, f32
    values)"""
    elem = FORMATS[fmt].element
    if FORMATS[fmt].is_int:  # mxint8: the 256 codes, all finite
        codes = np.arange(-128, 128)
        cols = [np.roll(codes, -j * R_) for j in range(-(-256 // R_))]
        c = np.array(cols, np.int8)
        s = rng.integers(117, 138, (c.shape[0], 256 // k)).astype(np.uint8).view(
            ml_dtypes.float8_e8m0fnu)
        return c, s, R.dequantize(c, s, fmt, block_size=k)
    n = 1 << FLOAT_TYPES[elem].bits
    codes = np.arange(max(n, 64)) % n
    n = codes.size
    vals = R.from_bits(codes, elem).astype(np.float64)
    finite = np.where(np.isfinite(vals), codes, 0)
    cols = [np.roll(finite, -j * R_) for j in range(-(-n // R_))]
    for code in codes[~np.isfinite(vals)]:  # one Inf / NaN code at K = 0, zeros after it
        cols.append(np.where(codes == 0, code, 0))
    c = np.array(cols, np.uint8)
    s = rng.integers(117, 138, (c.shape[0], n // k)).astype(np.uint8).view(
        ml_dtypes.float8_e8m0fnu)
    typed = R.from_bits(c, elem)
    v = R.dequantize(typed, s, fmt, block_size=k)
    return (c if FLOAT_TYPES[elem].bits == 6 else typed), s, v


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2",
                                 "mxint8", "mxfp4_e2m1"])
def test_placed_decode_every_code(fmt):
    """The codes decoded by placing their bits, or from the rows of the scale-code tables
    (bf16 dot products: the piped tiles of 1, 2, 4, 8 and 16 rows, chunks of 32 and 16; the
    f32 FMAs' tiles of 1, 2, 4 and 8 rows; the bf16 GEMM, both sides): one-hot rows of A pick
    each code of B, scaled by 2^-10 .. 2^10 -- every finite code's value (subnormals, both
    zeros; mxint8's 256 codes, -128 included) bit for bit, Inf and NaN codes to Inf / NaN,
    as the f64 reference."""
    rng = np.random.default_rng(len(fmt))
    is_int = FORMATS[fmt].is_int
    bits = 8 if is_int else FLOAT_TYPES[FORMATS[fmt].element].bits
    n = max(1 << bits, 64)  # K
    for k in (32, 16):
        spec = dot_kernels.DotSpec("bf16", fmt, None, k, "avx512")
        placed = k == 32 if is_int else bits == 8 or (bits == 6 and k == 16)
        kern = dot_kernels._DotKernel(spec)
        assert kern.placed_decode() == placed
        # the factor's exponent word in the scratch: float codes placed (the f4 / f6 tables
        # are rows of the scale-code tables)
        assert (kern.word_bias() is not None) == (not is_int and placed)
        assert kern.scale_tables() == (kern.table_decode() and not placed)
        for plain, rows in itertools.chain(itertools.product(["bf16"], (1, 2, 4, 8, 16)),
                                           itertools.product(["f32"], (1, 2, 4, 8))):
            e, s, vb = _every_code(fmt, rows, k, rng)
            hot = np.zeros((rows, n), np.float32)
            hot[np.arange(rows), np.arange(rows)] = 2.0 ** rng.integers(-3, 4, rows)
            x = hot.astype(PLAIN[plain])
            got = np.asarray(ffi_dot.dot(x, None, e, s, None, fmt, rhs_block_size=k,
                                         path="avx512"))
            with np.errstate(invalid="ignore"):  # 0 x Inf
                want = (hot.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
            assert np.array_equal(got, want, equal_nan=True), (fmt, k, plain, rows)
        if bits == 4:  # (f4 GEMMs take byte dot products)
            continue
        # the GEMM: A one-hot in e4m3 (codes of 1 and 0), B every code
        e, s, vb = _every_code(fmt, 1, k, rng)
        rows = dot_kernels.STREAM_M + 4
        ac = np.zeros((rows, n), np.uint8)
        ac[np.arange(rows), np.arange(rows) * 3] = 0x38  # 1.0
        ea = ac.view(ml_dtypes.float8_e4m3fn)
        sa = rng.integers(120, 135, (rows, n // k)).astype(np.uint8).view(
            ml_dtypes.float8_e8m0fnu)
        assert dot_kernels.DotSpec("mxfp8_e4m3", fmt, k, k, "avx512").bf16_dot
        for lhs, rhs in (((ea, sa, "mxfp8_e4m3"), (e, s, fmt)),
                         ((e, s, fmt), (ea, sa, "mxfp8_e4m3"))):
            got = np.asarray(ffi_dot.dot(lhs[0], lhs[1], rhs[0], rhs[1], lhs[2], rhs[2],
                                         lhs_block_size=k, rhs_block_size=k, path="avx512"))
            va, vb2 = (R.dequantize(z[0] if FORMATS[z[2]].is_int else
                                    R.from_bits(np.asarray(z[0]).view(np.uint8),
                                                FORMATS[z[2]].element), z[1], z[2],
                                    block_size=k) for z in (lhs, rhs))
            with np.errstate(invalid="ignore"):
                want = (va.astype(np.float64) @ vb2.astype(np.float64).T).astype(F32)
            assert np.array_equal(got, want, equal_nan=True), (fmt, k, "gemm")


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("fmt", ["mxint8", "mxfp6_e2m3", "mxfp6_e3m2"])
def test_magic_decode_at_the_top_factor(fmt):
    """The f32 tiles' magic-number decode (:meth:`_DotKernel.magic_chunk`) puts a block's
    units under the exponent 23 + e of its factor 2^e: every code bit for bit with factors
    from 2^(MAGIC_TOP - 2) up to 2^MAGIC_TOP (tiny f32 rows keep the sums finite, so the
    range test's overflow bound passes), and one step above the range test sends the kernel
    to its f64 contraction (2^(23 + e) would overflow the decode's f32)."""
    rng = np.random.default_rng(len(fmt) + 7)
    k = 32
    kern = dot_kernels._DotKernel(dot_kernels.DotSpec("f32", fmt, None, k, "avx512"))
    assert kern.magic_f32()
    q = FORMATS[fmt].value_exponents[0]  # the factor of scale code c is 2^(c + q)
    edge = dot_kernels.MAGIC_TOP - q
    for codes in ((edge - 2, edge - 1, edge), (edge - 1, edge + 1)):
        e, _, _ = _every_code(fmt, 5, k, rng)
        s = rng.choice(np.asarray(codes, np.uint8), (e.shape[0], e.shape[1] // k)).view(
            ml_dtypes.float8_e8m0fnu)
        t = FLOAT_TYPES.get(FORMATS[fmt].element)
        vb = R.dequantize(e if t is None else R.from_bits(np.asarray(e).view(np.uint8),
                                                            FORMATS[fmt].element), s, fmt,
                          block_size=k)
        for rows in (2, 4, 8):  # one-hot rows of A pick each code
            hot = np.zeros((rows, e.shape[1]), F32)
            hot[np.arange(rows), np.arange(rows) * 3] = 2.0 ** -100
            got = np.asarray(ffi_dot.dot(hot, None, e, s, None, fmt, rhs_block_size=k,
                                         path="avx512"))
            want = (hot.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
            assert np.isfinite(want).all() and np.any(want != 0)
            assert np.array_equal(got, want), (fmt, codes, rows)


@pytest.mark.skipif("avx512" not in PATHS, reason="this CPU has no AVX512-BF16 / VNNI")
@pytest.mark.parametrize("plain", ["bf16", "f32"])
def test_nvfp4_every_scale_code(plain):
    """nvfp4's piped tiles read each block's values from the row of the constant table its
    E4M3 scale byte selects: one-hot rows of A (1, 2, 8 and 16 of them, a power of two
    each) pick every e2m1 code under every finite scale code (both signs, subnormals, both
    zeros) bit for bit as the f64 reference; K = 3 blocks (the second chunk of the last
    pair past K); a NaN scale code (0x7F, 0xFF) in a column's last block makes that column
    NaN, no other."""
    rng = np.random.default_rng(41)
    assert dot_kernels.SCALE_TABLES and dot_kernels._DotKernel(
        dot_kernels.DotSpec(plain, "nvfp4", None, 16, "avx512")).scale_tables()
    finite = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    N, K = finite.size + 2, 48
    n, kk = np.arange(N)[:, None], np.arange(K)[None, :]
    codes = ((kk + n) % 16).astype(np.uint8)  # every code at every position of a block
    sc = finite[(n + 85 * np.arange(K // 16)[None, :]) % finite.size]
    sc[-2:, -1] = (0x7F, 0xFF)  # NaN scales in the last block of the last two columns
    e = codes.view(ml_dtypes.float4_e2m1fn)
    s = sc.view(ml_dtypes.float8_e4m3fn)
    with np.errstate(invalid="ignore"):
        vb = R.dequantize(e, s, "nvfp4").astype(np.float64)
    for rows in (1, 2, 8, 16):
        for p0 in range(0, K, rows):
            hot = np.zeros((rows, K), np.float32)
            pos = (p0 + np.arange(rows)) % K
            hot[np.arange(rows), pos] = 2.0 ** rng.integers(-3, 4, rows)
            x = hot.astype(PLAIN[plain])
            got = np.asarray(ffi_dot.dot(x, None, e, s, None, "nvfp4", path="avx512"))
            with np.errstate(invalid="ignore"):  # 0 x NaN
                want = (hot.astype(np.float64) @ vb.T).astype(F32)
            assert np.isnan(want[:, -2:]).all() and not np.isnan(want[:, :-2]).any()
            assert np.array_equal(got, want, equal_nan=True), (plain, rows, p0)


def test_kernel_constants_in_the_module():
    """The kernels' constants (the scale-code tables) go into the declarations' module once
    however many kernels read them; a symbol of that name that is not the constant is an
    error at the declaration (``mxlower-opt`` reports it at the declaration's location),
    which then keeps no body."""
    ir = upstream.module("ir")
    decl = dot_kernels.declaration(dot_kernels.DotSpec("bf16", "nvfp4", None, 16, "avx512"),
                                   "k1")
    with upstream.context():
        m = ir.Module.parse("module {\n" + decl + "\n" + decl.replace("@k1", "@k2") + "\n}")
        assert dot_kernels.expand_declarations(m.operation) == 2
        text = str(m)
    assert text.count("memref.global") == 1
    assert "func.func @k1(" in text and "func.func @k2(" in text
    with upstream.context():
        m = ir.Module.parse('module {\nmemref.global "private" constant '
                            "@mxlower_nvfp4_bf16 : memref<1xi16> = dense<0>\n" + decl + "\n}")
        with pytest.raises(Exception, match="@k1: the module's symbol @mxlower_nvfp4_bf16 "
                                            "is not the kernel's constant"):
            dot_kernels.expand_declarations(m.operation)
        assert "memref<1xi16>" in str(m) and str(m).count("memref.global") == 1
        assert "func.func private @k1" in str(m)  # still the declaration


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4_e2m1", "mxfp6_e2m3", "mxfp6_e3m2"])
def test_scale_tables(fmt):
    """The tables of SCALE_TABLES: every scale code times every f4 code (f6: magnitude),
    exact in bf16 and in f32 wherever the product is a normal number (zeros with their
    signs), NaN elsewhere (the range ends and NaN scales, which the f32 paths never see);
    f4's bf16 rows twice over in bf16x2."""
    f = FORMATS[fmt]
    n = 16 if f.bits == 4 else 32
    e = np.arange(n, dtype=np.uint8).view(f.element_dtype).astype(np.float64)
    sc = np.arange(256, dtype=np.uint8).view(f.scale_dtype).astype(np.float64)
    want = (sc[:, None] * e[None, :]).ravel()
    a = np.abs(want)
    normal = (want == 0) | ((a >= 2.0 ** -126) & (a <= np.finfo(np.float32).max))
    want[~normal] = np.nan
    f32 = np.array(dot_kernels.scale_table(fmt, "f32"), np.float64)
    bf = np.array(dot_kernels.scale_table(fmt, "bf16"), np.int16).view(ml_dtypes.bfloat16)
    for got in (f32, bf.astype(np.float64)):
        assert np.array_equal(got, want, equal_nan=True)
        fin = ~np.isnan(want)  # the zeros' signs too
        assert np.array_equal(np.signbit(got[fin]), np.signbit(want[fin]))
    rows = want.reshape(256, n)
    if f.is_nvfp4:  # every finite E4M3 scale's row whole; the NaN codes' rows NaN
        assert np.isnan(rows[[0x7F, 0xFF]]).all() and normal.reshape(256, n).sum() == 254 * n
    else:  # e8m0: scales well inside the range whole; the NaN code's row NaN
        assert not np.isnan(rows[10:245]).any() and np.isnan(rows[255]).all()
    if f.bits == 4:  # bf16x2: each row of the bf16 table twice over
        x2 = np.array(dot_kernels.scale_table(fmt, "bf16x2"), np.int16).reshape(256, 2, n)
        assert (x2 == np.array(dot_kernels.scale_table(fmt, "bf16"), np.int16).reshape(
            256, 1, n)).all()


@pytest.mark.parametrize("path", dot_kernels.X86_PATHS)
@pytest.mark.parametrize("fmt, top, k", [("mxfp4_e2m1", 6.0, 32), ("mxfp4_e2m1", 6.0, 226),
                                         ("mxfp6_e3m2", 28.0, 82), ("mxint8", 127 / 64, 32),
                                         ("mxint8", -2.0, 32), ("mxfp6_e2m3", 7.5, 32)])
def test_integer_dot_products_at_their_bounds(fmt, top, k, path):
    """Every element +-top (the format's largest magnitude), so every block sums to
    +-top^2 k or cancels, all exact: at the bounds of the integer sums (e2m1 at k = 226:
    32544 in i16 units, 32767 the most; e3m2 at k = 82: 2^24 - 3.2e5 in i32 units, the most
    that converts to f32 exactly; mxint8's code -128, the unsigned bytes' offset), the
    results equal the f64 reference bit for bit, on each path this CPU runs."""
    if path not in PATHS:
        pytest.skip(f"this CPU does not run the {path} path")
    rows, cols = dot_kernels.STREAM_M + 3, 21
    sign_a = np.random.default_rng(k).random((rows, 2 * k)) < 0.5
    sign_a[:, :k] = (np.arange(rows) % 2)[:, None] == 1  # block 0: one sign per row
    sign_b = np.random.default_rng(k + 1).random((cols, 2 * k)) < 0.5
    sign_b[:, :k] = (np.arange(cols) % 3 == 0)[:, None]  # and per column
    va, vb = (np.where(sg, -top, top).astype(F32) for sg in (sign_a, sign_b))
    if top > 0:
        qa, qb = (mxj.quantize(v, fmt, block_size=k, impl="xla") for v in (va, vb))
        assert np.array_equal(np.asarray(mxj.dequantize(qa)), va)  # scales of 1: exact
        ea, sa, eb, sb = qa.elements, qa.scales, qb.elements, qb.scales
        assert np.abs(va[:, :k].astype(np.float64) @ vb[:, :k].T).max() == top * top * k
    else:  # mxint8's code -128 (-2 x 2^0, no quantize makes it) against +-127 / 64
        ea = np.full(va.shape, -128, np.int8)
        eb = np.where(sign_b, -127, 127).astype(np.int8)
        sa, sb = (np.full((v.shape[0], v.shape[1] // k), 127, np.uint8).view(
            ml_dtypes.float8_e8m0fnu) for v in (va, vb))
        va = R.dequantize(ea, sa, fmt, block_size=k)
        vb = R.dequantize(eb, sb, fmt, block_size=k)
        assert (va == -2).all()
    got = np.asarray(ffi_dot.dot(ea, sa, eb, sb, fmt, fmt,
                                 lhs_block_size=k, rhs_block_size=k, path=path))
    assert dot_kernels.DotSpec(fmt, fmt, k, k, path).int_dot
    want = (va.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
    assert np.array_equal(got, want)


def test_nan_and_inf_codes():
    rng = np.random.default_rng(11)
    for fmt, code in (("mxfp8_e4m3", 0x7F), ("mxfp8_e5m2", 0x7C), ("mxfp8_e5m2", 0x7E)):
        a, sa, va = _side(rng, fmt, (5, 64))
        e = np.asarray(a).view(np.uint8).copy()
        e[2, 7] = code
        a = e.view(np.asarray(a).dtype)
        x = rng.standard_normal((2, 64)).astype(F32)
        for lhs in (x, np.repeat(x, 9, 0)):  # streaming (the weights on the right) and GEMM
            got = np.asarray(ffi_dot.dot(lhs, None, a, sa, None, fmt))
            want = R.scaled_dot(lhs, None, R.dequantize(e.view(np.asarray(a).dtype), np.asarray(sa),
                                                        fmt), None)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
            assert np.isnan(got[:, 2]).all() if code != 0x7C else np.isinf(got[:, 2]).all()


def test_bad_buffers_are_jax_errors():
    """The handler checks what it is given (a direct ffi_call past the Python checks)."""
    rng = np.random.default_rng(13)
    a, sa, _ = _side(rng, "mxfp8_e4m3", (1, 4, 64))
    spec = ffi_dot.spec_for(None, "mxfp8_e4m3", np.zeros(1, F32), a)
    name = ffi_dot.register(spec)
    x = jnp.ones((1, 2, 64), F32)
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((1, 2, 5), F32))
    with pytest.raises(Exception, match="shapes must be a \\[..., M, K\\]"):
        jax.block_until_ready(call(x, a, sa))
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((1, 2, 4), F32))
    with pytest.raises(Exception, match="b_scales must have shape \\[..., N, K / 32\\]"):
        jax.block_until_ready(call(x, a, sa[:, :, :1]))
    with pytest.raises(Exception, match="argument 0 \\(a\\) must have dtype float32"):
        jax.block_until_ready(call(x.astype(jnp.bfloat16), a, sa))
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((2, 4), F32))
    with pytest.raises(Exception, match="a must have rank 3 or more"):
        jax.block_until_ready(call(x[0], a[0], sa[0]))
    with pytest.raises(TypeError, match="a plain side must be float32"):
        ffi_dot.dot(x.astype(jnp.int32), None, a, sa, None, "mxfp8_e4m3")


def test_scaled_dot_dispatch_layouts_jit_vmap_grad():
    """mxlower.jax.scaled_dot(impl="auto") runs the kernel for every layout its dimension
    numbers allow (normalized with a transpose where needed), under jit, vmap and grad."""
    rng = np.random.default_rng(17)
    w = mxj.quantize(rng.standard_normal((64, 6)).astype(F32), "mxfp4_e2m1", axis=0,
                     impl="xla")  # [K, N], blocked along 0
    x = rng.standard_normal((2, 64)).astype(F32)
    vw = np.asarray(mxj.dequantize(w))
    dn = (((1,), (0,)), ((), ()))
    f = jax.jit(lambda x, w: mxj.scaled_dot(x, w, dn))
    assert "mxlower_dot_f32_mxfp4_e2m1k32" in f.lower(x, w).compile().as_text()
    assert_dot_close(f(x, w), x, vw, dn, what="[K, N] weights")
    # the weights on the left: the lhs blocked along its first axis
    g = jax.jit(lambda w, x: mxj.scaled_dot(w, x, (((0,), (1,)), ((), ()))))
    assert_dot_close(g(w, x), vw, x, (((0,), (1,)), ((), ())), what="w^T x")
    # the GEMV written w x with 40 weight rows: the kernel computes x w^T (the side with few
    # rows streams the other) and transposes the small result
    w2 = mxj.quantize(rng.standard_normal((40, 64)).astype(F32), "mxfp4_e2m1", impl="xla")
    g2 = jax.jit(lambda w, x: mxj.scaled_dot(w, x))
    assert "mxlower_dot_f32_mxfp4_e2m1k32" in g2.lower(w2, x).compile().as_text()
    assert_dot_close(g2(w2, x), np.asarray(mxj.dequantize(w2)), x, (((1,), (1,)), ((), ())),
                     what="w x")
    # batch dimensions not in front
    q = mxj.quantize(rng.standard_normal((3, 4, 64)).astype(F32), "mxfp6_e2m3", impl="xla")
    p = rng.standard_normal((64, 3, 5)).astype(F32)
    dnb = (((2,), (0,)), ((0,), (1,)))
    h = jax.jit(lambda q, p: mxj.scaled_dot(q, p, dnb))
    assert "mxlower_dot_" in h.lower(q, p).compile().as_text()
    vq = R.dequantize(R.from_bits(np.asarray(q.elements), "f6E2M3FN"), np.asarray(q.scales),
                      "mxfp6_e2m3")
    assert_dot_close(h(q, p), vq, p, dnb, what="batch dims")
    # vmap of the kernel's entry point itself: one call with the batch as a leading dimension
    vd = jax.jit(jax.vmap(lambda x: ffi_dot.dot(x, None, w2.elements, w2.scales, None,
                                                 "mxfp4_e2m1")))(xs := rng.standard_normal(
                                                     (3, 2, 64)).astype(F32))
    for i in range(3):
        np.testing.assert_array_equal(vd[i], ffi_dot.dot(xs[i], None, w2.elements, w2.scales,
                                                         None, "mxfp4_e2m1"))
    # vmap: the batch goes into the kernel's batch dimension
    xs = rng.standard_normal((4, 2, 64)).astype(F32)
    batched = jax.jit(jax.vmap(lambda x: mxj.scaled_dot(x, w, dn)))(xs)
    for i in range(4):
        np.testing.assert_array_equal(batched[i], f(xs[i], w))
    # grad through the plain side: d/dx sum(ct * x @ w) = ct @ w^T
    ct = rng.standard_normal((2, 6)).astype(F32)
    gx = jax.jit(jax.grad(lambda x: jnp.sum(ct * mxj.scaled_dot(x, w, dn))))(x)
    np.testing.assert_allclose(gx, ct @ vw.T, rtol=1e-5, atol=1e-5)


def test_many_plain_rows_run_the_kernel_under_jit_vmap_grad():
    """More plain rows than a GEMV's against [N, K] MX weights stream in the kernel, not
    the dequantize kernels + XLA's dot (DotSpec.stream_m), under jit, vmap and grad; one row
    past the path's limit takes those (f32 rows on the 512-bit paths: the kernel's
    transposed panels' GEMM)."""
    rng = np.random.default_rng(41)
    w = mxj.quantize(rng.standard_normal((48, 96)).astype(F32), "mxfp8_e4m3", impl="xla")
    vw = np.asarray(mxj.dequantize(w))
    x = rng.standard_normal((40, 96)).astype(F32)
    f = jax.jit(lambda x, w: mxj.scaled_dot(x, w))
    text = f.lower(x, w).compile().as_text()
    assert "mxlower_dot_f32_mxfp8_e4m3k32" in text and "mxlower_dequantize" not in text
    assert_dot_close(f(x, w), x, vw, (((1,), (1,)), ((), ())), what="40 rows")
    xs = rng.standard_normal((3, 40, 96)).astype(F32)
    batched = jax.jit(jax.vmap(lambda x: mxj.scaled_dot(x, w)))(xs)
    for i in range(3):
        np.testing.assert_array_equal(batched[i], f(xs[i], w))
    ct = rng.standard_normal((40, 48)).astype(F32)
    gx = jax.jit(jax.grad(lambda x: jnp.sum(ct * mxj.scaled_dot(x, w))))(x)
    np.testing.assert_allclose(gx, ct @ vw, rtol=1e-5, atol=1e-5)
    spec = dot_kernels.DotSpec("f32", "mxfp8_e4m3", path=ffi_dot.host_path())
    x2 = rng.standard_normal((spec.stream_m + 1, 96)).astype(F32)
    text = f.lower(x2, w).compile().as_text()
    if spec.f32_kn_gemm:  # the 512-bit paths: the transposed panels' GEMM
        assert "mxlower_dot_f32_mxfp8_e4m3k32" in text and "mxlower_dequantize" not in text
        assert_dot_close(f(x2, w), x2, vw, (((1,), (1,)), ((), ())), what="GEMM rows")
    else:
        assert "mxlower_dot_" not in text and "mxlower_dequantize" in text
    # bf16 rows past their streaming rows: the packed GEMM on bf16 dot products where the
    # path has them (avx512) and the vendor takes it by default, under jit, vmap and grad
    spec = dot_kernels.DotSpec("bf16", "mxfp8_e4m3", path=PATHS[0])
    if not dot_kernels.gemm_by_default(spec, dot_kernels.cpu_vendor()):
        return
    xb = rng.standard_normal((3, spec.stream_m + 9, 96)).astype(ml_dtypes.bfloat16)
    text = f.lower(xb[0], w).compile().as_text()
    assert spec.name in text and "mxlower_dequantize" not in text
    batched = jax.jit(jax.vmap(lambda x: mxj.scaled_dot(x, w)))(xb)
    for i in range(3):
        np.testing.assert_array_equal(batched[i], f(xb[i], w))
        assert_dot_close(batched[i], xb[i].astype(F32), vw, (((1,), (1,)), ((), ())),
                         what="bf16 GEMM rows")
    ct = rng.standard_normal((spec.stream_m + 9, 48)).astype(F32)
    gx = jax.jit(jax.grad(lambda x: jnp.sum(ct * mxj.scaled_dot(x, w).astype(F32))))(xb[0])
    np.testing.assert_allclose(np.asarray(gx, F32), ct @ vw, rtol=1e-2, atol=1e-2)


def test_installed_scaled_matmul_runs_the_kernel():
    """``jax.nn.scaled_matmul`` after ``mxlower.jax.install()`` lowers to the kernel too."""
    rng = np.random.default_rng(19)
    lhs = jnp.asarray(rng.standard_normal((2, 3, 64)).astype(F32)).astype(jnp.float8_e4m3fn)
    rhs = jnp.asarray(rng.standard_normal((2, 5, 64)).astype(F32)).astype(jnp.float8_e4m3fn)
    codes = rng.integers(120, 135, (2, 3, 2)).astype(np.uint8)
    ls = jnp.asarray(codes.view(ml_dtypes.float8_e8m0fnu))
    rs = jnp.ones((2, 5, 2), jnp.float8_e8m0fnu)
    mxj.install()
    try:
        f = jax.jit(jax.nn.scaled_matmul)
        text = f.lower(lhs, rhs, ls, rs).compile().as_text()
        assert "mxlower_dot_mxfp8_e4m3k32_mxfp8_e4m3k32" in text
        got = f(lhs, rhs, ls, rs)
    finally:
        mxj.uninstall()
    va = R.dequantize(np.asarray(lhs), codes.view(ml_dtypes.float8_e8m0fnu), "mxfp8_e4m3")
    vb = np.asarray(rhs).astype(F32)
    assert_dot_close(got, va, vb, (((2,), (2,)), ((0,), (0,))), what="scaled_matmul")


def test_gemms_keep_the_dequantize_kernels_unless_asked(monkeypatch):
    """More than STREAM_M rows on both sides, an f8 side and two block sizes (no packed dot
    products on any path): the dequantize kernels + XLA's f32 dot (faster than the kernel's
    f32 GEMM path, BENCHMARKS.md) unless MXLOWER_DOT_KERNEL=all.  With one block size the
    avx512 path's bf16 dot products take it by default on an AMD CPU; the other paths and
    vendors keep the dequantize kernels."""
    rng = np.random.default_rng(23)
    rows = dot_kernels.STREAM_M + 1
    a = mxj.quantize(rng.standard_normal((rows, 64)).astype(F32), "mxfp8_e5m2", impl="xla")
    b = mxj.quantize(rng.standard_normal((rows + 3, 64)).astype(F32), "mxfp4_e2m1",
                     block_size=64, impl="xla")
    b32 = mxj.quantize(rng.standard_normal((rows + 3, 64)).astype(F32), "mxfp4_e2m1",
                       impl="xla")

    def compiled(v=b):
        return jax.jit(lambda u, v: mxj.scaled_dot(u, v)).lower(a, v).compile()

    assert "mxlower_dot_" not in compiled().as_text()
    one_size = "mxlower_dot_mxfp8_e5m2k32_mxfp4_e2m1k32_avx512" in compiled(b32).as_text()
    assert one_size == (PATHS[0] == "avx512"
                        and dot_kernels.cpu_vendor() in dot_kernels.BF16_GEMM_VENDORS)
    monkeypatch.setenv("MXLOWER_DOT_KERNEL", "all")
    c = compiled()
    assert "mxlower_dot_mxfp8_e5m2k32_mxfp4_e2m1k64" in c.as_text()
    va, vb = (np.asarray(mxj.dequantize(v)) for v in (a, b))
    assert_dot_close(c(a, b), va, vb, (((1,), (1,)), ((), ())), what="GEMM")


@pytest.mark.skipif(not INT_PATHS, reason="this CPU runs no integer dot products")
def test_fp4_gemms_take_the_integer_dot_products_by_default(monkeypatch):
    """A GEMM of e2m1 / nvfp4 pairs runs the kernel's byte dot products without
    MXLOWER_DOT_KERNEL=all (they are faster than the dequantize kernels + XLA's dot), under
    jit and vmap; the portable path keeps the dequantize kernels."""
    rng = np.random.default_rng(29)
    rows = dot_kernels.STREAM_M + 5
    a = mxj.quantize(rng.standard_normal((3, rows, 96)).astype(F32), "mxfp4_e2m1", impl="xla")
    b = mxj.quantize(rng.standard_normal((3, rows + 7, 96)).astype(F32), "mxfp4_e2m1",
                     impl="xla")
    va, vb = (np.asarray(mxj.dequantize(v)) for v in (a, b))
    f = jax.jit(jax.vmap(lambda u, v: mxj.scaled_dot(u, v)))
    assert (f"mxlower_dot_mxfp4_e2m1k32_mxfp4_e2m1k32_{PATHS[0]}"
            in f.lower(a, b).compile().as_text())
    assert_dot_close(f(a, b), va, vb, (((2,), (2,)), ((0,), (0,))), what="vmapped GEMM")
    monkeypatch.setenv(ffi_dot.ENV, "portable")
    g = jax.jit(lambda u, v: mxj.scaled_dot(u, v))
    assert "mxlower_dot_" not in g.lower(a, b).compile().as_text()


def test_zero_and_smallest_scales():
    """nvfp4's E4M3 scale code 0 (a zero block) and e8m0's code 0 (2^-127) on zero blocks:
    zeros, no NaN from the scale's decoding (the run-time test sends non-zero data with such
    scales to the f64 contraction; the kernel still must not poison the other blocks)."""
    rng = np.random.default_rng(29)
    x = rng.standard_normal((2, 64)).astype(F32)
    for fmt, k in (("nvfp4", 16), ("mxfp4_e2m1", 32), ("mxint8", 32)):
        q = mxj.quantize(rng.standard_normal((5, 64)).astype(F32), fmt, impl="xla")
        s = np.asarray(q.scales).view(np.uint8).copy()
        e = np.asarray(q.elements).copy()
        s[1, 0] = 0
        if fmt != "nvfp4":  # 2^-127 on a zero block
            e.view(np.uint8)[1, :k] = 0
        sd = s.view(np.asarray(q.scales).dtype)
        got = np.asarray(ffi_dot.dot(x, None, e, sd, None, fmt))
        vw = R.dequantize(e, sd, fmt)
        assert not np.isnan(got).any()
        assert_dot_close(got, x, vw, (((1,), (1,)), ((), ())), what=f"{fmt} zero scale")


def test_split_across_xla_threads():
    """Calls from PARALLEL_WORK multiply-adds on are split into units run on XLA's thread
    pool: the same results as the reference (both ways of a unit)."""
    rng = np.random.default_rng(31)
    for shape in (((), 1, 2048, 32), ((2,), 40, 300, 8)):
        batch, M, N, kb = shape
        assert (int(np.prod(batch)) * -(-N // dot_kernels.NP) * dot_kernels.NP * M * kb * 32
                >= ffi_dot.PARALLEL_WORK)
        _run("bf16", "mxfp4_e2m1", shape, rng, PATHS[0])
    for path in INT_PATHS:  # the integer GEMM, in chunks of GEMM_UNITS units (A packed per
        # call), across batches (a chunk may start mid-batch and cross into the next)
        for lf, rf in (("mxfp4_e2m1", "mxfp4_e2m1"), ("mxint8", "mxfp6_e3m2"),
                       ("mxint8", "mxint8")):
            _run(lf, rf, ((3,), 37, 19 * dot_kernels.NP + 5, 4), rng, path)
            # and blocks of MB_INT rows, each against every unit of a call
            _run(lf, rf, ((2,), dot_kernels.MB_INT + 40, 3 * dot_kernels.NP + 1, 2), rng, path)


def test_gemm_chunks_per_thread_on_many_threads(monkeypatch):
    """From :data:`ffi_dot.GEMM_SPREAD_THREADS` of XLA's threads a packed GEMM's call is cut
    in :data:`ffi_dot.GEMM_THREAD_CHUNKS` chunks per thread (smaller blocks of rows of A),
    one per thread below: forced on this host's threads (the threshold 1) for kernels of a
    block size no other test builds (a kernel is compiled once per process), the results
    within the reference's bound, chunks across batches and blocks of rows."""
    monkeypatch.setattr(ffi_dot, "GEMM_SPREAD_THREADS", 1)
    rng = np.random.default_rng(37)
    for path in INT_PATHS:
        spec = dot_kernels.DotSpec("mxint8", "mxint8", 160, 160, path)
        assert spec.packed_gemm and spec not in ffi_dot._compiled
        _run("mxint8", "mxint8", ((3,), 150, 7 * dot_kernels.NP + 5, 2), rng, path, k=160)
        assert spec in ffi_dot._compiled


@pytest.mark.parametrize("lf, rf", [("mxfp4_e2m1", "mxfp4_e2m1"), ("mxint8", "mxint8"),
                                     ("mxfp6_e2m3", "mxint8"), ("mxfp6_e3m2", "mxfp4_e2m1")])
def test_integer_gemm_factors_at_the_range_tests_edges(lf, rf):
    """The integer GEMM's block end takes the two blocks' factor (e8m0: powers of two) by
    an integer add of their bits (:data:`dot_kernels.BLOCK_END_EXPONENTS`): exact wherever
    the range test keeps the f32 paths -- their product down to 2^-126 and up near f32's
    top.  With K one block, each result is that block's exact sum times the factor, rounded
    once: bit for bit the exact dot, on every integer path (a wrong bias or a product's
    subnormal or overflowing bits would be off by powers of two)."""
    rng = np.random.default_rng(47)
    M, N, k = 20, 37, 32
    sa, sb = (dot_kernels.integer_shift(FORMATS[f]) for f in (lf, rf))
    # the smallest codes whose values' grid 2^(c - 127 - shift) keeps the product >= 2^-126,
    # and large ones (values up to 2^(c - 127) x max unit) whose sums stay below 2^127
    low = (127 - 63 + sa, 127 - 63 + sb)
    high = (127 + 56, 127 + 56)
    for codes in (low, high, (low[0], high[1])):
        (a, sa_, va), (b, sb_, vb) = (
            _with_scales(rng, f, (rows, k), [c]) for f, rows, c in
            ((lf, M, codes[0]), (rf, N, codes[1])))
        want = (va.astype(np.float64) @ vb.astype(np.float64).T).astype(F32)
        assert np.isfinite(want).all() and (np.abs(want[want != 0]) >= 2.0 ** -126).all()
        for path in INT_PATHS:
            spec = dot_kernels.DotSpec(lf, rf, path=path)
            assert spec.int_dot or spec.bf16_blocks, (lf, rf, path)
            got = np.asarray(ffi_dot.dot(a, sa_, b, sb_, lf, rf, path=path))
            assert np.array_equal(got, want), (lf, rf, codes, path)


def _with_scales(rng, fmt, shape, codes):
    """(elements, scales, f32 values) of random data in ``fmt`` whose scale codes are drawn
    from ``codes`` (e8m0) -- values far outside f32's normal range included (exact in f32:
    subnormal, at worst a multiple of 2^-136)."""
    q = mxj.quantize(rng.standard_normal(shape).astype(F32), fmt, impl="xla")
    e = np.asarray(q.elements)
    s = rng.choice(np.asarray(list(codes), np.uint8), np.asarray(q.scales).shape)
    sd = s.view(np.asarray(q.scales).dtype)
    t = FLOAT_TYPES.get(FORMATS[fmt].element)
    codes_ = R.from_bits(e, FORMATS[fmt].element) if t is not None and t.bits == 6 else e
    return e, sd, R.dequantize(codes_, sd, fmt)


@pytest.mark.parametrize("fmt", [f for f in MX if f != "nvfp4"])
@pytest.mark.parametrize("end", ["low", "high"])
def test_range_ends_take_the_kernels_f64_contraction(fmt, end):
    """Scale codes near 0 (values, products and sums below 2^-126) or high enough that a sum
    could overflow f32: the kernel's range test sends every unit to its exact f64
    contraction, which meets section 6 (subnormal results kept) -- one row, a streaming tile
    and the GEMM, plain and MX activations."""
    rng = np.random.default_rng(MX.index(fmt) * 2 + (end == "high"))
    top = 254 - (FORMATS[fmt].emax_elem + 1) - 6
    dn = (((1,), (1,)), ((), ()))
    for activations in ("f32", "mxfp8_e4m3"):
        shift = 10 if activations != "f32" else 0  # MX activations reach 2^12
        codes = range(0, 6) if end == "low" else range(top - 4 - shift, top + 1 - shift)
        e, s, vw = _with_scales(rng, fmt, (37, 96), codes)
        ex, sx, vx = _with_scales(rng, "mxfp8_e4m3", (20, 96), range(120, 131))
        for M in (1, 3, 20):  # one row, a streaming tile, the GEMM
            if activations == "f32":
                x = rng.standard_normal((M, 96)).astype(F32)
                got = np.asarray(ffi_dot.dot(x, None, e, s, None, fmt))
                assert_dot_close(got, x, vw, dn, what=f"f32 x {fmt} {end} M={M}")
            else:
                got = np.asarray(ffi_dot.dot(ex[:M], sx[:M], e, s, "mxfp8_e4m3", fmt))
                assert_dot_close(got, vx[:M], vw, dn, what=f"mxfp8_e4m3 x {fmt} {end} M={M}")
            assert np.all(np.isfinite(got)) and np.any(got != 0)


def test_f64_contraction_rounds_subnormal_results_once():
    """x (1 + 2^-10) 2^-60 and (1 + 2^-9) 2^-60 against weights 1.0 x 2^-80: exact results
    (1 + 2^-10) 2^-140, a tie between two f32 subnormals (rounded to even: 2^-140), and
    (1 + 2^-9) 2^-140 (a subnormal, exact); f64 -> f32 on a flushing CPU would give 0."""
    x = np.zeros((2, 32), F32)
    x[0, 0] = F32((1 + 2.0 ** -10) * 2.0 ** -60)
    x[1, 0] = F32((1 + 2.0 ** -9) * 2.0 ** -60)
    codes = np.zeros((3, 32), np.uint8)
    codes[:, 0] = 0x38  # e4m3 1.0
    s = np.full((3, 1), 127 - 80, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    e = codes.view(ml_dtypes.float8_e4m3fn)
    for lhs in (x, np.tile(x, (10, 1))):  # streaming and GEMM
        got = np.asarray(ffi_dot.dot(lhs, None, e, s, None, "mxfp8_e4m3"))
        assert np.all(got[0::2] == F32(2.0 ** -140))
        assert np.all(got[1::2] == F32((1 + 2.0 ** -9) * 2.0 ** -140))


@pytest.mark.parametrize("plain", list(PLAIN))
def test_extreme_plain_values_take_the_f64_contraction(plain):
    """Plain values the f32 paths cannot take -- subnormal (f32 and bf16 ones below 2^-126;
    f16's are normal in f32), huge (sums that could overflow), Inf and NaN -- on either side:
    the range test reads the plain side's exponents, and the f64 contraction decodes subnormal
    inputs from their bits."""
    rng = np.random.default_rng(len(plain))
    e, s, vw = _with_scales(rng, "mxfp4_e2m1", (9, 64), range(120, 128))
    dt = PLAIN[plain]
    tiny = float(np.finfo(dt).smallest_subnormal) if plain != "bf16" else 2.0 ** -133
    dn = (((1,), (1,)), ((), ()))
    for scale in (tiny * 7, 2.0 ** 117 if plain != "f16" else 20000.0):
        x = (rng.integers(-3, 4, (2, 64)) * scale).astype(dt)
        xf = x.astype(F32)
        got = np.asarray(ffi_dot.dot(jnp.asarray(x), None, e, s, None, "mxfp4_e2m1"))
        assert_dot_close(got, xf, vw, dn, what=f"{plain} x {scale}")
        assert np.all(np.isfinite(got)) and np.any(got != 0)
        got = np.asarray(ffi_dot.dot(e, s, jnp.asarray(x), None, "mxfp4_e2m1", None))
        assert_dot_close(got, vw, xf, dn, what=f"mxfp4_e2m1 x {plain} {scale}")
        # many rows (the streaming path's, and past them: bf16's packed GEMM on avx512),
        # each result exactly
        most = dot_kernels.DotSpec(plain, "mxfp4_e2m1", path=PATHS[0]).stream_m
        for rows in (43, most + 5):
            x = (rng.integers(-3, 4, (rows, 64)) * scale).astype(dt)
            got = np.asarray(ffi_dot.dot(jnp.asarray(x), None, e, s, None, "mxfp4_e2m1"))
            assert_dot_close(got, x.astype(F32), vw, dn, what=f"{plain} rows x {scale}")
    x = rng.standard_normal((2, 64)).astype(dt)
    x[0, 5], x[1, 9] = np.inf, np.nan
    got = np.asarray(ffi_dot.dot(jnp.asarray(x), None, e, s, None, "mxfp4_e2m1"))
    want = R.scaled_dot(x.astype(F32), None, vw, None)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.skipif(not __import__("shutil").which("cc"), reason="no C compiler to link with")
def test_ahead_of_time_library_runs_without_the_jit(tmp_path):
    """ffi_dot.shared_object: the kernel, its range test and its handler compiled by llc for
    a named CPU (here x86-64-v3, or the generic x86-64 without AVX2) into a library that
    exports ``<name>_ffi``; loaded with ctypes and registered with jax.ffi under another
    name (what bench/bench_dot_aot.py does on a machine without the MLIR stacks), it
    computes what the JIT-compiled kernel does, the f64 contraction included."""
    import ctypes

    path = "avx2" if "avx2" in PATHS else "portable"
    spec = dot_kernels.DotSpec("f32", "mxfp4_e2m1", path=path)
    lib = tmp_path / "k.so"
    ffi_dot.shared_object(spec, str(lib), cpu="x86-64-v3" if path == "avx2" else "x86-64")
    handle = ctypes.CDLL(str(lib))
    target = f"{spec.name}__aot_test"
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(handle, f"{spec.name}_ffi")),
                                platform="cpu")
    rng = np.random.default_rng(41)
    for codes in (range(120, 134), range(0, 4)):  # the f32 paths, then the f64 contraction
        e, s, vw = _with_scales(rng, "mxfp4_e2m1", (40, 64), codes)
        x = rng.standard_normal((3, 64)).astype(F32)
        got = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((1, 3, 40), F32))(
            x[None], e[None], s[None])
        np.testing.assert_array_equal(np.asarray(got)[0],
                                      np.asarray(ffi_dot.dot(x, None, e, s, None, "mxfp4_e2m1",
                                                             path=path)))
        assert_dot_close(np.asarray(got)[0], x, vw, (((1,), (1,)), ((), ())), what="aot")
    # a bad buffer is the handler's located error, as from the JIT-compiled one
    with pytest.raises(Exception, match="must have dtype"):
        jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((1, 3, 40), F32))(
            x[None].astype(np.float16), e[None], s[None]).block_until_ready()


def test_sides_given_as_datatypes_run_the_formats_kernels(capsys):
    """ffi_dot takes a side's format as an MX format's datatype (a code, a predefined name, a
    Datatype): the spec, and so the registered target and its results, are the format's;
    the command line prints the same kernel for either spelling."""
    from mxlower.formats import block_datatype

    rng = np.random.default_rng(43)
    a, sa, va = _side(rng, "mxint8", (3, 64), 8)
    b, sb, vb = _side(rng, "mxfp4_e2m1", (5, 64))
    path = PATHS[-1]
    named = ffi_dot.spec_for("mxint8", "mxfp4_e2m1", a, b, 8, None, path)
    for lf, rf in (("bfp16", "e2m1fo:e8m0_t32"),
                   (block_datatype(FORMATS["mxint8"], 8), "mxfp4e2")):
        spec = ffi_dot.spec_for(lf, rf, a, b, None, None, path)
        assert spec == named and ffi_dot.register(spec) == ffi_dot.register(named)
        got = np.asarray(ffi_dot.dot(a, sa, b, sb, lf, rf, path=path))
        want = np.asarray(ffi_dot.dot(a, sa, b, sb, "mxint8", "mxfp4_e2m1", lhs_block_size=8,
                                      path=path))
        assert got.tobytes() == want.tobytes()
        assert_dot_close(got, va, vb, (((1,), (1,)), ((), ())), what=f"{lf} x {rf}")
    texts = []
    for argv in (["mxint8", "f32", "--lhs-block-size", "8"], ["int8:e8m0_t8", "float32"]):
        assert ffi_dot.main(argv) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and "mxlower_dot_mxint8k8_f32_portable" in texts[0]
    assert ffi_dot.main(["e5m6:e8m0_t32", "f32"]) == 1
    assert "not an MX format's" in capsys.readouterr().err
