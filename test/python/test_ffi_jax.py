"""mxlower.jax's impl="auto" (the FFI kernels on the CPU) against impl="xla" (the portable
StableHLO) and mxlower.reference: which path each call takes, and the same bits under jit,
vmap, grad, eager calls and jax.export."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference
from mxlower.bindings import upstream

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402


def _x(shape=(2, 64, 64), seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp2(rng.integers(-20, 20, shape))).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, np.inf, 1e-40]
    return x


def _bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _compiled_text(f, *args) -> str:
    return jax.jit(f).lower(*args).compile().as_text()


def _qdq(fmt, impl, **kw):
    def f(x):
        q = mxj.quantize(x, fmt, impl=impl, **kw)
        return q.elements, q.scales, mxj.dequantize(q, jnp.bfloat16, impl=impl)
    return f


@pytest.mark.parametrize("fmt, kw", [
    ("mxfp8_e4m3", {}), ("mxfp6_e3m2", {"scale_mode": "nearest"}),
    ("mxfp4_e2m1", {"scale_mode": "rceil", "axis": 1}), ("mxint8", {}),
    ("nvfp4", {"global_scale": 0.25}),
])
def test_auto_uses_the_kernel_and_matches_xla(fmt, kw):
    x = _x()
    auto, xla = _qdq(fmt, "auto", **kw), _qdq(fmt, "xla", **kw)
    assert "mxlower_quantize_" in _compiled_text(auto, x)
    assert "mxlower_dequantize_" in _compiled_text(auto, x)
    assert "mxlower_" not in _compiled_text(xla, x)
    got, want = jax.jit(auto)(x), jax.jit(xla)(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(_bits(g), _bits(w))
    ref_kw = {k: v for k, v in kw.items() if k != "scale_mode" or fmt != "nvfp4"}
    rq, rs = reference.quantize(x, fmt, **ref_kw)
    np.testing.assert_array_equal(_bits(got[1]), _bits(rs))


def test_lower_stays_portable_after_a_cpu_run():
    f = jax.jit(_qdq("mxfp4_e2m1", "auto"))
    x = _x()
    jax.block_until_ready(f(x))  # lowered (and cached) with the kernel
    for fn in (f, _qdq("mxfp4_e2m1", "auto")):
        text = mxj.lower(fn, x)
        assert "custom_call" not in text and "mxlower_" not in text
    assert "mxlower_quantize_" in f.lower(x).as_text()  # the cache still holds the kernel


def test_vmap_grad_and_eager():
    x = _x((5, 2, 64), seed=1)

    def loss(x, impl):
        q = mxj.quantize(x, "mxfp8_e4m3", scale_mode="rceil", impl=impl)
        return jnp.sum(mxj.dequantize(q, impl=impl) * x)

    g_auto = jax.jit(jax.grad(loss), static_argnums=1)(x, "auto")
    g_xla = jax.jit(jax.grad(loss), static_argnums=1)(x, "xla")
    np.testing.assert_array_equal(_bits(g_auto), _bits(g_xla))
    v = jax.vmap(_qdq("mxfp6_e2m3", "auto"), in_axes=1)
    w = jax.vmap(_qdq("mxfp6_e2m3", "xla"), in_axes=1)
    assert "mxlower_quantize_" in _compiled_text(v, x)
    for a, b in zip(jax.jit(v)(x), jax.jit(w)(x)):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    q = mxj.quantize(x, "nvfp4")  # eager: the primitive compiled alone, on the CPU
    rq, rs = reference.quantize(x, "nvfp4")
    np.testing.assert_array_equal(_bits(q.elements), _bits(rq))
    np.testing.assert_array_equal(_bits(q.scales), _bits(rs))
    y = q.dequantize(np.float16)
    np.testing.assert_array_equal(_bits(y), _bits(reference.dequantize(rq, rs, "nvfp4",
                                                                        dtype="f16")))


def test_portable_where_no_kernel_applies():
    x = _x((2, 6))
    # f4 with an odd block size: no kernel (XLA packs f4 two per byte across blocks)
    f = _qdq("mxfp4_e2m1", "auto", block_size=3)
    assert "mxlower_" not in _compiled_text(f, x)
    rq, rs = reference.quantize(x, "mxfp4_e2m1", block_size=3)
    q = jax.jit(f)(x)
    np.testing.assert_array_equal(_bits(q[0]), _bits(rq))
    # jax.export: a custom call is not portable, so the export is the StableHLO
    exp = jax.export.export(jax.jit(_qdq("mxfp8_e4m3", "auto")))(
        jax.ShapeDtypeStruct((2, 64, 64), jnp.float32))
    assert "custom_call" not in exp.mlir_module()
    got = exp.call(_x())
    np.testing.assert_array_equal(_bits(got[1]), _bits(reference.quantize(_x(),
                                                                          "mxfp8_e4m3")[1]))


def test_bf16_f16_inputs_and_outputs():
    for dt in (ml_dtypes.bfloat16, np.float16):
        with np.errstate(over="ignore"):
            x = _x((3, 128), seed=2).astype(dt)
        for fmt in ("mxfp8_e5m2", "nvfp4"):
            q = jax.jit(lambda x, f=fmt: mxj.quantize(x, f).detach())(x)
            rq, rs = reference.quantize(x, fmt)
            np.testing.assert_array_equal(_bits(q.elements), _bits(rq))
            y = jax.jit(lambda q: mxj.dequantize(q, dt))(q)
            want = reference.dequantize(rq, rs, fmt, dtype=np.dtype(dt))
            keep = ~np.isnan(want.astype(np.float32))
            np.testing.assert_array_equal(_bits(y)[keep], _bits(want)[keep])


def test_bad_impl():
    x = jnp.ones((2, 32), jnp.float32)
    with pytest.raises(ValueError, match="quantize: unknown argument 'impl' 'ffi' "
                                         r"\(known: auto, xla\)"):
        mxj.quantize(x, impl="ffi")
    with pytest.raises(ValueError, match="dequantize: unknown argument 'impl' 'cpu'"):
        mxj.dequantize(mxj.quantize(x), impl="cpu")
