"""mxlower's fused conversion kernels (f32/bf16/f16 <-> every narrow float type) against
mxlower.reference.convert, bit for bit: every bf16 and f16 pattern, the f32 probe set, every
narrow code back to each wide type; odd, empty and scalar shapes (f4 results packed as XLA lays
them out), packed f6, large arrays split across XLA's threads, the handler's errors, and
mxlower.jax.convert on both paths under jit, vmap and grad."""

from __future__ import annotations

import numpy as np
import pytest

from mxlower import reference, types
from mxlower.bindings import upstream
from mxlower.formats import FLOAT_TYPES
from mxlower.types import probe_values
from mxlower.lowering.mx_kernels import ConvertSpec

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402
from mxlower.execution import ffi  # noqa: E402

NARROW = ["f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E3M2FN", "f6E2M3FN", "f4E2M1FN"]
WIDE = ["f32", "bf16", "f16"]


def codes(a) -> np.ndarray:
    """Bit patterns: uint8 codes as they are, any float array through reference.bits."""
    a = np.asarray(a)
    return a if a.dtype == np.uint8 else reference.bits(a)


def same_values(got, want) -> np.ndarray:
    """Elementwise: equal bit patterns, or both NaN (a NaN's payload is not specified)."""
    g, w = np.asarray(got), np.asarray(want)
    nan = np.isnan(w.astype(np.float32))
    return np.where(nan, np.isnan(g.astype(np.float32)), codes(g) == codes(w))


def _inputs(src: str) -> np.ndarray:
    return probe_values(src)  # f32: > 200k probes; bf16, f16: every pattern


@pytest.mark.parametrize("src", WIDE)
@pytest.mark.parametrize("dst", NARROW)
def test_wide_to_narrow_is_bit_exact(src, dst):
    x = _inputs(src)
    got = codes(jax.jit(lambda v: ffi.convert(v, dst))(x))
    want = reference.bits(reference.convert(x, dst))
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(int(reference.bits(x[i]))), hex(got[i]), hex(want[i]))
                          for i in bad[:6]]


@pytest.mark.parametrize("dst", WIDE)
@pytest.mark.parametrize("src", NARROW)
def test_narrow_to_wide_is_bit_exact(src, dst):
    t = FLOAT_TYPES[src]
    c = np.tile(np.arange(1 << t.bits, dtype=np.uint8), 3)[:-1]  # every code, odd count
    x = c if t.bits == 6 else c.view(t.dtype)
    y = jax.jit(lambda v: ffi.convert(v, dst, source=src if t.bits == 6 else None))(x)
    assert y.dtype == types.dtype(dst) and y.shape == x.shape
    assert same_values(y, reference.convert(c.view(t.dtype) if t.bits != 6
                                            else reference.from_bits(c, src), dst)).all()


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 3), (2, 0, 5), (7, 33), (5, 97)])
@pytest.mark.parametrize("dst", ["f4E2M1FN", "f6E2M3FN", "f8E5M2"])
def test_shapes_odd_empty_and_scalar(shape, dst):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    y = jax.jit(lambda v: ffi.convert(v, dst))(x)
    assert y.shape == x.shape
    np.testing.assert_array_equal(codes(y), reference.bits(reference.convert(x, dst)))
    back = jax.jit(lambda v: ffi.convert(v, jnp.float16, source=dst if "f6" in dst else None))(y)
    want = reference.convert(reference.convert(x, dst), "f16")
    assert back.shape == x.shape and same_values(back, want).all()


@pytest.mark.parametrize("dst", ["f6E3M2FN", "f6E2M3FN"])
def test_packed_f6_is_mx_pack_layout(dst):
    x = (np.random.default_rng(2).standard_normal((3, 2, 68)) * 8).astype(np.float32)
    p = jax.jit(lambda v: ffi.convert(v, dst, packed=True))(x)
    want = reference.convert(x, dst)
    assert p.shape == (3, 2, 51) and p.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(p), reference.pack(want, 6))
    y = jax.jit(lambda v: ffi.convert(v, jnp.bfloat16, source=dst, packed=True))(p)
    assert y.shape == x.shape and same_values(y, reference.convert(want, "bf16")).all()
    with pytest.raises(ValueError, match="last dimension divisible by 4"):
        ffi.convert(x[..., :66], dst, packed=True)


def test_large_arrays_split_across_xla_threads():
    # 3 chunks of ffi.THREAD_CHUNK and an odd tail: units split between threads on byte
    # boundaries of the packed f4 result
    n = 3 * ffi.THREAD_CHUNK + 7
    x = (np.random.default_rng(3).standard_normal(n) * 3).astype(np.float32)
    y = jax.jit(lambda v: ffi.convert(v, "f4E2M1FN"))(x)
    np.testing.assert_array_equal(codes(y), reference.bits(reference.convert(x, "f4E2M1FN")))
    z = jax.jit(lambda v: ffi.convert(v, jnp.float32))(y)
    np.testing.assert_array_equal(np.asarray(z), reference.convert(np.asarray(y), "f32"))


def test_handler_checks_dtypes_and_shapes():
    spec = ConvertSpec("f32", "f4E2M1FN")
    target = ffi.register(spec)
    x = jnp.ones((4, 5), jnp.float32)
    good = jax.ShapeDtypeStruct((4, 5), jnp.float4_e2m1fn)
    cases = [
        ((x.astype(jnp.float16),), good, "argument 0 (x) must have dtype float32"),
        ((x,), jax.ShapeDtypeStruct((4, 5), jnp.uint8), "result 0 (y) must have dtype "
         "float4_e2m1fn"),
        ((x,), jax.ShapeDtypeStruct((5, 4), jnp.float4_e2m1fn), "result 0 (y) must have x's "
         "shape"),
        ((x,), jax.ShapeDtypeStruct((4, 5, 1), jnp.float4_e2m1fn), "result 0 (y) must have "
         "x's shape"),
    ]
    for args, out, message in cases:
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"INVALID_ARGUMENT: "
                           + spec.name + ": " + message.replace("(", r"\(").replace(")", r"\)")):
            jax.block_until_ready(jax.jit(lambda *a: jax.ffi.ffi_call(target, out)(*a))(*args))
    packed = ffi.register(ConvertSpec("f32", "f6E2M3FN", packed=True))
    with pytest.raises(jax.errors.JaxRuntimeError, match="the last dimension of x must be a "
                       r"multiple of 4 \(packed f6\)"):
        jax.block_until_ready(jax.ffi.ffi_call(packed, jax.ShapeDtypeStruct((4, 3), jnp.uint8))(
            jnp.ones((4, 3), jnp.float32)))


def test_convert_argument_errors():
    x = jnp.ones((4,), jnp.float32)
    with pytest.raises(ValueError, match="argument 'dtype' must be f32, bf16, f16 or a narrow"):
        ffi.convert(x, "f7")
    with pytest.raises(ValueError, match="converts between f32/bf16/f16 and a narrow"):
        ffi.convert(x, jnp.bfloat16)
    with pytest.raises(ValueError, match="needs 'source'"):
        ffi.convert(x.astype(jnp.uint8), jnp.float32)
    with pytest.raises(TypeError, match="argument 'x' must be float32"):
        ffi.convert(x.astype(jnp.int32), "f8E4M3FN")
    with pytest.raises(ValueError, match="packed applies to the f6 types"):
        ffi.convert(x, "f4E2M1FN", packed=True)
    with pytest.raises(ValueError, match="unknown argument 'impl'"):
        mxj.convert(x, "f4E2M1FN", impl="fast")


def _compiled(f, *args) -> str:
    return jax.jit(f).lower(*args).compile().as_text()


@pytest.mark.parametrize("dst", NARROW)
def test_jax_convert_auto_uses_the_kernel_and_matches_xla(dst):
    x = probe_values("f32")[::7]
    src = dst if "f6" in dst else None

    def roundtrip(impl):
        def f(v):
            y = mxj.convert(v, dst, impl=impl)
            return y, mxj.convert(y, jnp.bfloat16, source=src, impl=impl)
        return f

    assert "mxlower_convert_f32_" in _compiled(roundtrip("auto"), x)
    assert "mxlower_convert" not in _compiled(roundtrip("xla"), x)
    (ya, ba), (yx, bx) = jax.jit(roundtrip("auto"))(x), jax.jit(roundtrip("xla"))(x)
    want = reference.convert(x, dst)
    np.testing.assert_array_equal(codes(ya), reference.bits(want))
    np.testing.assert_array_equal(codes(yx), reference.bits(want))
    wb = reference.convert(want, "bf16")
    assert same_values(ba, wb).all() and same_values(bx, wb).all()


def test_jax_convert_under_vmap_grad_and_eager():
    x = (np.random.default_rng(4).standard_normal((3, 5, 9)) * 5).astype(np.float32)
    want = reference.bits(reference.convert(x, "f4E2M1FN"))
    np.testing.assert_array_equal(codes(jax.vmap(lambda v: mxj.convert(v, "f4E2M1FN"))(x)),
                                  want)
    np.testing.assert_array_equal(codes(mxj.convert(x, jnp.float4_e2m1fn)), want)  # eager
    g = jax.grad(lambda v: mxj.convert(v, jnp.float8_e4m3fn).astype(jnp.float32).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), np.ones_like(x))
    g6 = jax.grad(lambda v: mxj.convert(mxj.convert(v, "f6E2M3FN"), jnp.float32,
                                        source="f6E2M3FN").sum())(x)
    np.testing.assert_array_equal(np.asarray(g6), np.zeros_like(x))  # codes: no gradient
