"""mxlower.jax on a CUDA device through XLA:GPU (marked ``gpu``; skipped without a CUDA backend
in JAX).

* ``impl="xla"``, the portable StableHLO, compiled by XLA:GPU: quantize (every format and scale
  mode, specials in the data), dequantize (every element and scale code) bit-exact with
  mxlower.reference, and scaled_dot within docs/semantics.md section 6 on both sides of the
  f32/f64 switch (the f32 contraction must not be done in TF32: the dot asks for HIGHEST);
* ``impl="auto"``, mxlower's fused CUDA kernels as XLA FFI custom calls launched by XLA on its
  own stream: the handlers carried from a machine with mxlower's MLIR stacks
  (``$MXLOWER_GPU_KERNELS``, built by ``python test/python/test_gpu_kernels.py build DIR``) are
  registered for the CUDA platform with :func:`mxlower.execution.ffi.add_platform`; the
  compiled program must call them, and the results are bit-exact with mxlower.reference.

The GPU machine needs JAX with a CUDA plugin, NumPy, ml_dtypes and pytest; not the xtc wheels::

    XLA_PYTHON_CLIENT_PREALLOCATE=false MXLOWER_GPU_KERNELS=.gpu-kernels PYTHONPATH=. \\
        python3 -m pytest -q -m gpu test/python/test_gpu_jax.py
"""

from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest

from mxlower import reference as R
from mxlower.formats import FORMATS
from mxlower.testing import assert_dot_close

import test_gpu_kernels as G  # noqa: E402 - the GPU run's data and carried handlers

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402
from mxlower.execution import ffi  # noqa: E402
from mxlower.jax import kernels  # noqa: E402

pytestmark = pytest.mark.gpu

MODES = ("floor", "rceil", "nearest")


@functools.cache
def _gpu():
    try:
        return jax.devices("cuda")[0]
    except RuntimeError as e:
        pytest.skip(f"no CUDA backend in JAX ({e})")


def _on_gpu(a):
    return jax.device_put(a, _gpu())


def _codes(a) -> np.ndarray:
    """One-byte codes (elements or scales, any one-byte dtype) as uint8."""
    return np.asarray(a).view(np.uint8)


def _quantize_case(fmt: str, mode: str, impl: str, wide: str = "f32", g=None):
    k = FORMATS[fmt].block_size
    x = G._x((64 * 32 // k + 3, 4 * k), wide, 2)
    f = jax.jit(lambda x, *g: mxj.quantize(x, fmt, scale_mode=mode, impl=impl,
                                           global_scale=g[0] if g else None))
    args = [_on_gpu(x)] + ([_on_gpu(np.float32(g))] if g is not None else [])
    q = f(*args)
    want_q, want_s = R.quantize(x, fmt, scale_mode=mode,
                                global_scale=None if g is None else float(g))
    np.testing.assert_array_equal(_codes(q.elements), _codes(want_q))
    np.testing.assert_array_equal(_codes(q.scales), _codes(want_s))
    return f, args


def _dequantize_case(fmt: str, impl: str, g=None):
    """Every element code and the scale codes 0x00, 0xFF (NaN) and 0x7F among random ones."""
    t = FORMATS[fmt]
    k = t.block_size
    x = G._x((64 * 32 // k + 3, 4 * k), "f32", 3)
    q, s = R.quantize(x, fmt)
    e = R.bits(q).copy()
    e.reshape(-1)[:1 << t.bits] = np.arange(1 << t.bits)
    sc = R.bits(s).copy()
    sc.reshape(-1)[:3] = [0x00, 0xFF, 0x7F] if not t.is_nvfp4 else [0x00, 0x7F, 0x38]
    ev = e.astype(np.uint8).view(np.int8) if t.is_int else R.from_bits(e, t.element)
    sv = R.from_bits(sc, t.scale)
    want = R.dequantize(ev, sv, fmt, global_scale=None if g is None else float(g))
    stored = e.astype(np.uint8) if t.element.startswith("f6") else ev
    mx = mxj.MXArray(_on_gpu(stored), _on_gpu(sv), fmt,
                     global_scale=None if g is None else _on_gpu(np.float32(g)))
    f = jax.jit(lambda m: mxj.dequantize(m, jnp.float32, impl=impl))
    got = np.asarray(f(mx))
    same = G._same(got, want, "values")
    assert same.all(), np.flatnonzero(~same)[:8]
    return f, mx


# ---------------------------------------------------------------- the StableHLO on XLA:GPU


@pytest.mark.parametrize("fmt,mode", [(f, m) for f, t in FORMATS.items()
                                      for m in (("floor",) if t.is_nvfp4 else MODES)])
def test_xla_quantize_on_the_gpu(fmt, mode):
    _quantize_case(fmt, mode, "xla")


def test_xla_quantize_nvfp4_global_scale_bf16_on_the_gpu():
    _quantize_case("nvfp4", "floor", "xla", wide="bf16", g=0.375)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_xla_dequantize_on_the_gpu(fmt):
    _dequantize_case(fmt, "xla")


@pytest.mark.parametrize("lf,rf,codes", [
    ("mxfp8_e4m3", "mxfp8_e4m3", None), ("mxfp4_e2m1", "mxfp6_e3m2", None),
    ("mxint8", None, None), ("nvfp4", "nvfp4", None),
    # scale codes near 0: subnormal operands and products, the f64 contraction
    ("mxfp8_e5m2", "mxfp4_e2m1", (0x00, 0x01, 0x08, 0x7F))])
def test_xla_scaled_dot_on_the_gpu(lf, rf, codes):
    rng = np.random.default_rng(7)

    def side(fmt, shape):
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))).astype(np.float32)
        if fmt is None:
            return x, x
        q, s = R.quantize(x, fmt)
        if codes is not None:
            s = R.from_bits(rng.choice(np.asarray(codes, np.uint8), s.shape).astype(np.uint8),
                            FORMATS[fmt].scale)
        t = FORMATS[fmt]
        stored = R.bits(q).astype(np.uint8) if t.element.startswith("f6") else q
        mx = mxj.MXArray(_on_gpu(stored), _on_gpu(s), fmt)
        return mx, R.dequantize(q, s, fmt)

    a, av = side(lf, (33, 256))
    b, bv = side(rf, (47, 256))
    got = jax.jit(lambda a, b: mxj.scaled_dot(a, b, impl="xla"))(a, b if rf else _on_gpu(b))
    assert_dot_close(np.asarray(got), av, bv, (((1,), (1,)), ((), ())), what=f"{lf} x {rf}")


# ---------------------------------------------------------------- the fused kernels via XLA


@functools.cache
def _carried() -> str:
    """Registers the carried CUDA handlers with JAX (once); returns their folder."""
    root = os.environ.get(G.KERNELS_ENV)
    if not root:
        pytest.skip(f"${G.KERNELS_ENV} names no carried handlers")
    done: set[str] = set()

    def registrar(spec) -> str:
        if spec.name not in done:
            path = os.path.join(root, f"{spec.name}.so")
            if not os.path.exists(path):
                raise ValueError(f"no carried handler {path}")
            fn = G._handler_of(path, spec.name)
            jax.ffi.register_ffi_target(spec.name, jax.ffi.pycapsule(fn), platform="CUDA",
                                        api_version=1)
            done.add(spec.name)
        return spec.name

    ffi.add_platform("cuda", registrar)
    kernels._AVAILABLE["cuda"] = lambda: True  # built elsewhere, carried here
    return root


def _calls(f, args, name: str) -> None:
    hlo = f.lower(*args).compile().as_text()
    assert name in hlo, f"the compiled program does not call {name}"


@pytest.mark.parametrize("fmt,mode", [(f, m) for f, t in FORMATS.items()
                                      for m in (("floor",) if t.is_nvfp4 else MODES)])
def test_kernel_quantize_through_xla_on_the_gpu(fmt, mode):
    _carried()
    f, args = _quantize_case(fmt, mode, "auto")
    _calls(f, args, f"mxlower_quantize_{fmt}_f32")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_kernel_dequantize_through_xla_on_the_gpu(fmt):
    _carried()
    f, mx = _dequantize_case(fmt, "auto")
    _calls(f, (mx,), f"mxlower_dequantize_{fmt}_f32")


@pytest.mark.parametrize("dst", [t for t in G.NARROW if not t.startswith("f6")])
def test_kernel_convert_through_xla_on_the_gpu(dst):
    _carried()
    x = np.concatenate([G._x((1 << 16,), "f32", 1), np.float32([3.0, -0.3, 6.5])])
    f = jax.jit(lambda x: mxj.convert(x, dst, impl="auto"))
    got = np.asarray(f(_on_gpu(x)))
    np.testing.assert_array_equal(R.bits(got), R.bits(R.convert(x, dst)))
    _calls(f, (_on_gpu(x),), f"mxlower_convert_f32_{dst}")


def _dot_sides(rng, lf, rf, m=48, n=40, k=256, codes=None):
    """(MXArray or plain array on the GPU, its exact f32 values) for each side."""

    def side(fmt, rows):
        x = (rng.standard_normal((rows, k)) * np.exp2(rng.integers(-3, 4, (rows, k)))).astype(
            np.float32)
        if fmt is None:
            return _on_gpu(x), x
        q, s = R.quantize(x, fmt)
        if codes is not None:
            s = R.from_bits(rng.choice(np.asarray(codes, np.uint8), s.shape).astype(np.uint8),
                            FORMATS[fmt].scale)
        stored = R.bits(q).astype(np.uint8) if FORMATS[fmt].element.startswith("f6") else q
        return mxj.MXArray(_on_gpu(stored), _on_gpu(s), fmt), R.dequantize(q, s, fmt)

    return side(lf, m), side(rf, n)


@pytest.mark.parametrize("lf,rf,codes", [
    # pairs XLA runs as __op$block_scaled_dot (cuDNN where the chip has it)
    ("mxfp8_e4m3", "mxfp8_e4m3", None), ("mxfp8_e5m2", "mxfp8_e4m3", None),
    ("nvfp4", "nvfp4", None),
    ("mxfp8_e4m3", "mxfp8_e4m3", (0x60, 0x70, 0x7F, 0x88)),
    # everything else: the carried dequantize kernels and XLA's dot (f32 or f64 branch)
    ("mxfp4_e2m1", "mxfp6_e3m2", None), ("mxint8", None, None),
    ("mxfp8_e5m2", "mxfp4_e2m1", (0x00, 0x01, 0x08, 0x7F))])
def test_scaled_dot_auto_on_the_gpu(lf, rf, codes):
    """mxlower.jax.scaled_dot(impl="auto") on CUDA (mxlower.jax.cuda_dot) within
    docs/semantics.md section 6; prints which custom calls the compiled program makes."""
    _carried()
    (a, av), (b, bv) = _dot_sides(np.random.default_rng(11), lf, rf, codes=codes)
    f = jax.jit(lambda a, b: mxj.scaled_dot(a, b, impl="auto"))
    hlo = f.lower(a, b).compile().as_text()
    calls = sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)))
    print(f"{lf} x {rf}: compiled custom calls {calls}")
    got = np.asarray(f(a, b))
    assert_dot_close(got, av, bv, (((1,), (1,)), ((), ())), what=f"{lf} x {rf} {calls}")


def _cast_case(c: dict, x, *rest):
    """mxlower.jax.cast of case ``c`` on :func:`test_gpu_kernels.case_data`'s inputs: ``x``
    [, the random bits] [, g as a one-element array]."""
    r = rest[0] if c.get("roundmode") == "stochastic" else None
    g = rest[-1].reshape(()) if "g" in c else None
    return mxj.cast(x, c["number"], c.get("scale"), roundmode=c.get("roundmode", "even"),
                    scalemode=c.get("scalemode", "max"), rbits=r, tensor_scale=g, impl="auto")


@pytest.mark.parametrize("c", [c for c in G.CAST_CASES if "length" not in c], ids=G.case_id)
def test_kernel_cast_through_xla_on_the_gpu(c):
    """mxlower.jax.cast(impl="auto") on CUDA: the carried fused cast kernel (stochastic
    rounding with explicit bits; a tensor level's g), bit-exact with mxlower.reference.cast."""
    _carried()
    inputs, wants, _ = G.case_data(c)
    args = [_on_gpu(a) for a in inputs]
    f = jax.jit(functools.partial(_cast_case, c))
    same = G._same(np.asarray(f(*args)), wants[0], "values")
    assert same.all(), np.flatnonzero(~same)[:8]
    _calls(f, args, "mxlower_cast_")
