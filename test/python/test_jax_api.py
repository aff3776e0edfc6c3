"""mxlower.jax: quantize / dequantize / scaled_dot under jax.jit against mxlower.reference.

Quantize and dequantize are compared bit for bit (NaN results by NaN-ness only, docs/semantics.md
section 2) for every format, scale mode and input type; scaled_dot against a float64
dequantize-then-dot.  Also: MXArray, ``lower`` (text for every platform, runnable through
mxlower-opt and XLA:CPU) and the argument errors.
"""

from __future__ import annotations

import functools
import pathlib
import traceback

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower.formats import FORMATS, SCALE_MODES
from mxlower.types import probe_values

F6 = ("mxfp6_e3m2", "mxfp6_e2m3")
WIDE = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
CASES = [(f, m) for f in FORMATS for m in (SCALE_MODES if f != "nvfp4" else ("floor",))]
# bf16/f16 inputs: every format, the scale modes rotated across formats (keeps compiles down)
NARROW_INPUT_CASES = [(w, f, SCALE_MODES[(i + j) % 3] if f != "nvfp4" else "floor")
                      for j, w in enumerate(("bf16", "f16")) for i, f in enumerate(FORMATS)]


# ----------------------------------------------------------------------------- inputs


@functools.cache
def probe_input(wide: str) -> np.ndarray:
    """[rows, 64] blocks exercising quantize: the f32 probe set (every narrow value, midpoint
    and neighbours, powers of two, subnormals, +-0, +-Inf, NaNs) sorted by magnitude so that
    neighbouring values share blocks, the same shuffled, and random normal blocks scaled by
    2^e for e over the whole f32 range; for bf16/f16 every bit pattern, sorted and shuffled."""
    rng = np.random.default_rng(1)
    if wide == "f32":
        p = probe_values("f32", n_random=1 << 12)
    else:
        p = probe_values(wide).astype(np.float32)
    with np.errstate(invalid="ignore"):
        order = np.argsort(np.abs(p), kind="stable")
    sorted_ = p[order]
    shuffled = rng.permutation(p)
    e = rng.integers(-150, 128, size=(512, 1))
    with np.errstate(over="ignore"):
        rand = (rng.standard_normal((512, 64)) * np.exp2(e.astype(np.float64))).astype(
            np.float32)
    parts = [sorted_, shuffled, rand.ravel(), np.zeros(64, np.float32),
             -np.zeros(64, np.float32)]
    flat = np.concatenate(parts)
    flat = np.concatenate([flat, np.zeros(-len(flat) % 64, np.float32)])
    with np.errstate(over="ignore", invalid="ignore"):
        return flat.reshape(-1, 64).astype(WIDE[wide])


def same_wide(a, b) -> bool:
    """Bitwise equal, except that NaNs only have to be NaNs in both."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    na, nb = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    return bool(np.array_equal(na, nb) and np.array_equal(R.bits(a)[~na], R.bits(b)[~nb]))


def codes(x) -> np.ndarray:
    """Raw codes of an element/scale array from JAX (f6 elements already are codes)."""
    a = np.asarray(x)
    return a.astype(np.uint8) if a.dtype == np.uint8 else R.bits(a)


# ----------------------------------------------------------------------------- bit-exactness


@functools.cache
def _qdq(fmt: str, mode: str, axis: int, k: int | None, g: float | None):
    def f(x):
        q = mxj.quantize(x, fmt, axis=axis, block_size=k, scale_mode=mode, global_scale=g)
        return q.elements, q.scales, q.dequantize(jnp.float32)

    return jax.jit(f)


def check_qdq(x, fmt, mode="floor", axis=-1, k=None, g=None):
    """quantize -> dequantize(f32) under one jit; the bf16/f16 results of dequantize are
    covered exhaustively by test_dequantize_every_code_under_every_scale."""
    e, s, d32 = _qdq(fmt, mode, axis, k, g)(x)
    re, rs = R.quantize(x, fmt, axis=axis, block_size=k, scale_mode=mode, global_scale=g)
    assert np.array_equal(codes(e), R.bits(re)), f"{fmt}/{mode}: elements differ"
    assert np.array_equal(codes(s), R.bits(rs)), f"{fmt}/{mode}: scales differ"
    ref = R.dequantize(re, rs, fmt, axis=axis, block_size=k, dtype="f32", global_scale=g)
    assert same_wide(d32, ref), f"{fmt}/{mode}: dequantize differs"


@pytest.mark.parametrize("fmt,mode", CASES)
def test_quantize_dequantize_bit_exact(fmt, mode):
    check_qdq(probe_input("f32"), fmt, mode)


@pytest.mark.parametrize("wide,fmt,mode", NARROW_INPUT_CASES)
def test_quantize_dequantize_bit_exact_bf16_f16_inputs(wide, fmt, mode):
    check_qdq(probe_input(wide), fmt, mode)


@pytest.mark.parametrize("g", [2.0 ** -20, 0.375, 3.0e5])
def test_nvfp4_global_scale_bit_exact(g):
    check_qdq(probe_input("f32")[:4096], "nvfp4", g=g)


@pytest.mark.parametrize("fmt,axis,k", [("mxfp8_e4m3", 0, 32), ("mxfp4_e2m1", 1, 8),
                                        ("mxint8", 0, 64), ("nvfp4", 0, 16),
                                        ("mxfp6_e2m3", -2, 4)])
def test_axis_and_block_size(fmt, axis, k):
    x = probe_input("f32").ravel()[:65536].reshape(64, 32, 32)
    check_qdq(x, fmt, "rceil", axis=axis, k=k)


def _all_codes(fmt_name: str):
    """Elements holding every code of the format, under every scale code (and the inputs to
    build an MXArray of them)."""
    fmt = FORMATS[fmt_name]
    k = fmt.block_size
    n_codes = 1 << fmt.bits
    length = -(-max(n_codes, k) // k) * k
    row = np.arange(length) % n_codes
    e_codes = np.tile(row.astype(np.uint8), (256, 1))
    s_codes = np.repeat(np.arange(256, dtype=np.uint8)[:, None], e_codes.shape[1] // k, axis=1)
    ref_e = e_codes.view(np.int8) if fmt.is_int else R.from_bits(e_codes, fmt.element)
    ref_s = R.from_bits(s_codes, fmt.scale)
    jax_e = e_codes if fmt_name in F6 else ref_e
    return jax_e, ref_e, ref_s


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_dequantize_every_code_under_every_scale(fmt):
    jax_e, ref_e, ref_s = _all_codes(fmt)
    g = 0.75 if fmt == "nvfp4" else None
    q = mxj.MXArray(jax_e, ref_s, fmt, global_scale=g)
    outs = jax.jit(lambda q: [q.dequantize(d) for d in (jnp.float32, jnp.bfloat16,
                                                      jnp.float16)])(q)
    for out, dt in zip(outs, ("f32", "bf16", "f16")):
        assert same_wide(out, R.dequantize(ref_e, ref_s, fmt, dtype=dt, global_scale=g))


@pytest.mark.parametrize("fmt", ["mxfp8_e5m2", "mxfp4_e2m1", "nvfp4", "mxfp6_e3m2"])
def test_native_conversion_policy_is_bit_exact_too(fmt, monkeypatch):
    """lowering.EXPAND_NARROW_FLOATS = "f6": XLA's own conversions for the types it has."""
    from mxlower.jax import lowering

    monkeypatch.setattr(lowering, "EXPAND_NARROW_FLOATS", "f6")
    x = probe_input("f32")[:2048]
    f = jax.jit(lambda x: (lambda q: (q.elements, q.scales, q.dequantize()))(
        mxj.quantize(x, fmt, scale_mode="nearest" if fmt != "nvfp4" else "floor")))
    text = f.lower(x).as_text()
    assert ("f4E2M1FN" in text) == (fmt in ("mxfp4_e2m1", "nvfp4"))
    e, s, d = f(x)
    re, rs = R.quantize(x, fmt, scale_mode="nearest" if fmt != "nvfp4" else "floor")
    assert np.array_equal(codes(e), R.bits(re)) and np.array_equal(codes(s), R.bits(rs))
    assert same_wide(d, R.dequantize(re, rs, fmt))


def test_eager_calls_match_jit():
    x = probe_input("f32")[:64]
    q = mxj.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    re, rs = R.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    assert np.array_equal(codes(q.elements), R.bits(re))
    assert same_wide(mxj.dequantize(q), R.dequantize(re, rs, "mxfp4_e2m1"))
    with jax.disable_jit():  # eager primitives compile themselves, no recursion
        q = mxj.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
        assert np.array_equal(codes(q.elements), R.bits(re))


# ----------------------------------------------------------------------------- MXArray


def test_mxarray_pytree_and_properties():
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    q = mxj.quantize(x, "mxfp4_e2m1")
    assert q.shape == (4, 64) and q.ndim == 2 and q.axis == -1 and q.blocked_axis == 1
    assert q.block_size == 32 and q.format == "mxfp4_e2m1"
    assert q.elements.dtype == jnp.float4_e2m1fn and q.scales.dtype == jnp.float8_e8m0fnu
    assert q.nbytes == 4 * 64 // 2 + 4 * 2  # packed f4 plus one byte per scale
    leaves, tree = jax.tree_util.tree_flatten(q)
    assert len(leaves) == 2  # an eager quantize keeps no STE source
    back = jax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(back, mxj.MXArray) and back.format == q.format
    assert same_wide(back.dequantize(), q.dequantize())
    n = mxj.quantize(x, "nvfp4", global_scale=2.0)
    assert n.nbytes == 4 * 64 // 2 + 4 * 4 + 4
    assert len(jax.tree_util.tree_leaves(n)) == 3
    assert q.elements.dtype == jax.jit(lambda q: q)(q).elements.dtype
    assert "mxfp4_e2m1" in repr(q)
    f6 = mxj.quantize(x, "mxfp6_e2m3")
    assert f6.elements.dtype == np.uint8 and f6.nbytes == 4 * 64 * 6 // 8 + 8


def test_mxarray_constructor_checks_parts():
    e = jnp.zeros((4, 64), jnp.float8_e4m3fn)
    s = jnp.ones((4, 2), jnp.float8_e8m0fnu)
    assert mxj.MXArray(e, s, "mxfp8_e4m3").block_size == 32
    with pytest.raises(TypeError, match="'elements'"):
        mxj.MXArray(e.astype(jnp.float8_e5m2), s, "mxfp8_e4m3")
    with pytest.raises(TypeError, match="'scales'"):
        mxj.MXArray(e, s.astype(jnp.float32), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="'scales'"):
        mxj.MXArray(e, jnp.ones((4, 3), jnp.float8_e8m0fnu), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="'scales' must have shape"):
        mxj.MXArray(e, s, "mxfp8_e4m3", block_size=16)
    with pytest.raises(ValueError, match="'format'"):
        mxj.MXArray(e, s, "fp8")


# ----------------------------------------------------------------------------- scaled dot


def _f64_operand(x, spec):
    """The oracle's value of one side: the reference's quantize -> dequantize, in f64."""
    if spec is None:
        return np.asarray(x).astype(np.float64)
    e, s = R.quantize(x, **spec)
    kw = {k: v for k, v in spec.items() if k in ("axis", "block_size", "global_scale")}
    return R.dequantize(e, s, spec["format"], **kw).astype(np.float64)


def _einsum_spec(ndim_a, ndim_b, dn):
    (lc, rc), (lb, rb) = dn
    lc, lb = [d % ndim_a for d in lc], [d % ndim_a for d in lb]
    rc, rb = [d % ndim_b for d in rc], [d % ndim_b for d in rb]
    ls, rs = list("abcdefgh"[:ndim_a]), list("ijklmnop"[:ndim_b])
    for x, y in zip(lc + lb, rc + rb):
        rs[y] = ls[x]
    free_l = [ls[d] for d in range(ndim_a) if d not in lc and d not in lb]
    free_r = [rs[d] for d in range(ndim_b) if d not in rc and d not in rb]
    res = "".join([ls[d] for d in lb] + free_l + free_r)
    return f"{''.join(ls)},{''.join(rs)}->{res}"


def _default_dn(ndim_a, ndim_b):
    """scaled_dot's documented default (docs/jax.md): contract the last dimensions; the same
    rank batches the leading ones, different ranks leave them free."""
    batch = tuple(range(ndim_a - 2)) if ndim_a == ndim_b else ()
    return ((ndim_a - 1,), (ndim_b - 1,)), (batch, batch)


def test_default_dimension_numbers():
    """[..., M, K] x [..., N, K] -> [..., M, N] with the same ranks (XLA's layout: leading
    dimensions are batch), [B, M, K] x [N, K] -> [B, M, N] otherwise."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4, 64), np.float32), rng.standard_normal((2, 3, 5, 64),
                                                                               np.float32)
    mx8 = {"format": "mxfp8_e4m3"}
    out = mxj.scaled_dot(mxj.quantize(a, **mx8), mxj.quantize(b, **mx8))
    assert out.shape == (2, 3, 4, 5)
    fa, fb = _f64_operand(a, mx8), _f64_operand(b, mx8)
    np.testing.assert_allclose(np.asarray(out, np.float64),
                               np.einsum("xymk,xynk->xymn", fa, fb), rtol=1e-6, atol=1e-5)
    w = rng.standard_normal((5, 64), np.float32)
    assert mxj.scaled_dot(mxj.quantize(a, **mx8), w).shape == (2, 3, 4, 5)
    assert mxj.scaled_dot(a[0, 0], mxj.quantize(b, **mx8)).shape == (4, 2, 3, 5)
    with pytest.raises(ValueError, match="batch dimension sizes differ"):
        mxj.scaled_dot(mxj.quantize(a, **mx8), mxj.quantize(b[:1], **mx8))
    for dn in (None, _default_dn(4, 4)):  # the documented default, spelled out
        check_dot(a, b, mx8, None, dn)


def check_dot(a, b, lspec, rspec, dn=None, out_dtype=jnp.float32):
    """quantize both sides (per spec; None = plain) and scaled_dot them under one jit; compare
    with the float64 dot of the reference's dequantized values: |error| <= 1e-6 * sum |a||b|
    per element (the dot's own condition number) and <= 1e-6 * max |result| overall."""

    def side(x, spec):
        return x if spec is None else mxj.quantize(x, **spec)

    out = jax.jit(lambda a, b: mxj.scaled_dot(side(a, lspec), side(b, rspec), dn,
                                              out_dtype))(a, b)
    fa, fb = _f64_operand(a, lspec), _f64_operand(b, rspec)
    spec = _einsum_spec(fa.ndim, fb.ndim, dn or _default_dn(fa.ndim, fb.ndim))
    ref, mag = np.einsum(spec, fa, fb), np.einsum(spec, np.abs(fa), np.abs(fb))
    assert out.dtype == out_dtype and out.shape == ref.shape
    out = np.asarray(out).astype(np.float64)
    if out_dtype == jnp.float32:
        assert np.max(np.abs(out - ref)) <= 1e-6 * np.max(np.abs(ref))
        assert np.all(np.abs(out - ref) <= 1e-6 * mag)
    else:  # plus one final rounding to the narrower type
        eps = 2.0 ** -8 if out_dtype == jnp.bfloat16 else 2.0 ** -11
        assert np.all(np.abs(out - ref) <= eps * np.abs(ref) + 1e-6 * mag)
    return out


RNG = np.random.default_rng(7)


def _rand(*shape, dtype=np.float32):
    return (RNG.standard_normal(shape) * np.exp2(RNG.integers(-4, 5, size=shape))).astype(dtype)


def _q(fmt, **kw):
    return {"format": fmt, **kw} if fmt else None


@pytest.mark.parametrize("lf,rf", [("mxfp8_e4m3", "mxfp8_e4m3"), ("mxfp8_e5m2", "mxfp4_e2m1"),
                                   ("mxfp6_e3m2", "mxfp6_e2m3"), ("mxint8", "mxfp8_e4m3"),
                                   ("nvfp4", "nvfp4"), ("mxfp4_e2m1", None),
                                   (None, "nvfp4")])
def test_scaled_dot_formats(lf, rf):
    check_dot(_rand(16, 256), _rand(24, 256), _q(lf), _q(rf))


def test_scaled_dot_general_dimension_numbers():
    # lhs [K, B, M] blocked along K (axis 0), rhs [B, N, K] blocked along K (axis 2)
    out = check_dot(_rand(128, 3, 5), _rand(3, 7, 128), _q("mxfp8_e4m3", axis=0),
                    _q("mxfp4_e2m1", axis=2, block_size=16), (((0,), (2,)), ((1,), (0,))))
    assert out.shape == (3, 5, 7)
    # two contracting dims, the blocked one among them (given negative), plain bf16 other side
    c, d = _rand(4, 64, 6), _rand(6, 64, 9).astype(ml_dtypes.bfloat16)
    check_dot(c, d, _q("mxint8", axis=1), None, (((-2, -1), (1, 0)), ((), ())))


@pytest.mark.parametrize("out_dtype", [jnp.bfloat16, jnp.float16])
def test_scaled_dot_result_types(out_dtype):
    check_dot(_rand(8, 64), _rand(8, 64), _q("mxfp8_e4m3"), _q("mxfp8_e5m2"), None, out_dtype)


def test_scaled_dot_nvfp4_global_scales():
    # the f64 oracle dequantizes each side with its global scale; mxlower multiplies the f32
    # accumulator by their product
    a, b = _rand(8, 64), _rand(4, 64)
    check_dot(a, b, _q("nvfp4", global_scale=0.5), _q("nvfp4", global_scale=3.0))
    check_dot(a, b, _q("nvfp4", global_scale=0.5), None)


def test_scaled_dot_plain_operands_fall_back_to_dot_general():
    check_dot(_rand(4, 32), _rand(5, 32), None, None)


# ----------------------------------------------------------------------------- lower


def _model(x, w):
    q = mxj.quantize(x, "mxfp4_e2m1", scale_mode="rceil")
    return mxj.scaled_dot(q, mxj.quantize(w, "mxfp6_e2m3")), mxj.dequantize(q, jnp.bfloat16)


def test_lower_is_plain_stablehlo_identical_for_every_platform(tmp_path):
    x, w = _rand(8, 64), _rand(16, 64)
    texts = {p: mxj.lower(_model, x, w, platform=p) for p in ("cpu", "cuda", "rocm")}
    assert texts["cpu"] == texts["cuda"] == texts["rocm"]
    t = texts["cpu"]
    assert "stablehlo.dot_general" in t
    assert "custom_call" not in t and '"mx.' not in t and "f6E2M3FN" not in t

    # ready for mxlower-opt: it parses and the MX pipeline leaves it runnable on XLA:CPU
    from mxlower.execution import xla
    from mxlower.tools import opt

    src, dst = tmp_path / "in.mlir", tmp_path / "out.mlir"
    src.write_text(t)
    assert opt.main([str(src), "-p", "builtin.module(mxlower-mx-to-stablehlo)",
                     "-o", str(dst)]) == 0
    y, d = xla.run(dst.read_text(), x, w)
    ry, rd = jax.jit(_model)(x, w)
    assert np.array_equal(y, np.asarray(ry)) and same_wide(d, rd)


def test_jax_export_for_several_platforms():
    from jax import export

    x, w = _rand(8, 64), _rand(16, 64)
    exp = export.export(jax.jit(_model), platforms=("cpu", "cuda", "rocm"))(x, w)
    assert exp.platforms == ("cpu", "cuda", "rocm")
    y, d = exp.call(x, w)
    ry, rd = jax.jit(_model)(x, w)
    assert np.array_equal(np.asarray(y), np.asarray(ry)) and same_wide(d, rd)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4"])
def test_jax_export_with_symbolic_shapes(fmt):
    """Shape polymorphism: the non-blocked dimensions may be symbolic; one export then runs
    bit-exactly (quantize, dequantize) and equal to jit (scaled_dot) at several sizes.  A
    symbolic shape keeps the portable StableHLO, so its dot has the bits of impl="xla" (the
    fused CPU dot kernel that impl="auto" runs for static shapes sums in another order)."""
    from jax import export

    b, m = export.symbolic_shape("b, m")

    def f(x, y, impl="auto"):
        q = mxj.quantize(x, fmt)
        return (q.elements, q.scales, q.dequantize(),
                mxj.scaled_dot(mxj.quantize(y, fmt), q, impl=impl))

    exp = export.export(jax.jit(f))(jax.ShapeDtypeStruct((b, 64), jnp.float32),
                                    jax.ShapeDtypeStruct((m, 64), jnp.float32))
    assert "?x64x" in exp.mlir_module() and "mx." not in exp.mlir_module()
    for rows_x, rows_y in ((3, 5), (8, 1)):
        x, y = _rand(rows_x, 64), _rand(rows_y, 64)
        e, s, d, dot = exp.call(x, y)
        eq, es = R.quantize(x, fmt, axis=1)
        assert np.array_equal(R.bits(np.asarray(e)), R.bits(eq))
        assert np.array_equal(R.bits(np.asarray(s)), R.bits(es))
        assert same_wide(d, R.dequantize(eq, es, fmt, axis=1))
        portable = jax.jit(functools.partial(f, impl="xla"))(x, y)[3]
        assert np.array_equal(np.asarray(dot), np.asarray(portable))


def test_symbolic_blocked_dimension_is_a_clear_error():
    from jax import export

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("n, k"), jnp.float32)
    with pytest.raises(ValueError, match="the blocked dimension 1 of 'x' must have a static "
                                         "size .* got 'k'"):
        export.export(jax.jit(lambda v: mxj.quantize(v, "mxfp8_e4m3").elements))(spec)


def test_lower_points_at_user_code():
    t = mxj.lower(_model, _rand(8, 64), _rand(16, 64), debug_info=True)
    assert pathlib.Path(__file__).name in t


def test_lower_keeps_jit_options():
    f = jax.jit(lambda x: mxj.quantize(x).detach())
    assert "f8E4M3FN" in mxj.lower(f, _rand(2, 32))


# ----------------------------------------------------------------------------- errors


X = np.ones((4, 64), np.float32)
QX = mxj.quantize(X)
QSQ = mxj.quantize(np.ones((64, 64), np.float32))


@pytest.mark.parametrize("call,exc,arg", [
    (lambda: mxj.quantize(X.astype(np.int32)), TypeError, "'x'"),
    (lambda: mxj.quantize(X.astype(np.float64) if jax.config.jax_enable_x64 else
                          np.ones((4, 64), np.int8)), TypeError, "'x'"),
    (lambda: mxj.quantize(X, "mxfp9"), ValueError, "'format'"),
    (lambda: mxj.quantize(X, 8), TypeError, "'format'"),
    (lambda: mxj.quantize(X, block_size=48), ValueError, "'block_size'"),
    (lambda: mxj.quantize(X, block_size=0), ValueError, "'block_size'"),
    (lambda: mxj.quantize(X[:, :48]), ValueError, "'block_size'"),
    (lambda: mxj.quantize(X, axis=2), ValueError, "'axis'"),
    (lambda: mxj.quantize(X, axis=1.0), TypeError, "'axis'"),
    (lambda: mxj.quantize(X, scale_mode="ceil"), ValueError, "'scale_mode'"),
    (lambda: mxj.quantize(X, global_scale=2.0), ValueError, "'global_scale'"),
    (lambda: mxj.quantize(X, "nvfp4", global_scale=0.0), ValueError, "'global_scale'"),
    (lambda: mxj.quantize(X, "nvfp4", global_scale=np.ones(2, np.float32)), ValueError,
     "'global_scale'"),
    (lambda: mxj.quantize(np.float32(1)), ValueError, "'x'"),
    (lambda: mxj.dequantize(X), TypeError, "'mx'"),
    (lambda: mxj.dequantize(QX, jnp.int8), TypeError, "'dtype'"),
    (lambda: mxj.dequantize(QX, "float64"), TypeError, "'dtype'"),
    (lambda: mxj.scaled_dot(QSQ, np.ones((64, 8), np.float32), (((0,), (0,)), ((), ()))),
     ValueError, "blocked along axis 1.*'dimension_numbers'"),
    (lambda: mxj.scaled_dot(QX, np.ones((4, 64), np.int32)), TypeError, "'rhs'"),
    (lambda: mxj.scaled_dot(object(), QX), TypeError, "'lhs'"),
    (lambda: mxj.scaled_dot(QX, np.ones((4, 32), np.float32)), ValueError, "sizes differ"),
    (lambda: mxj.scaled_dot(QX, QX, ((1,), (1,))), ValueError, "'dimension_numbers'"),
    (lambda: mxj.scaled_dot(QX, QX, (((5,), (1,)), ((), ()))), ValueError,
     "'dimension_numbers'"),
    (lambda: mxj.scaled_dot(QX, QX, (((1,), (1,)), ((1,), (1,)))), ValueError,
     "'dimension_numbers'"),
    (lambda: mxj.scaled_dot(QX, QX, preferred_element_type=jnp.int32), TypeError,
     "'preferred_element_type'"),
])
def test_bad_arguments_name_the_argument(call, exc, arg):
    with pytest.raises(exc, match=arg):
        call()


def test_errors_are_raised_at_trace_time_from_user_code():
    def user_fn(x):
        return mxj.quantize(x, block_size=48)  # the offending line

    with pytest.raises(ValueError, match="'block_size'") as info:
        jax.jit(user_fn).trace(X)
    frames = [f for f, _ in traceback.walk_tb(info.value.__traceback__)]
    assert any(f.f_code.co_name == "user_fn" for f in frames)
