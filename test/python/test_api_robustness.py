"""The Python API on hostile arguments (issue 22): a TypeError or ValueError naming the
argument, at once and at trace time, never a KeyError, OverflowError, MemoryError, a NumPy
error from deep inside, a run-time FFI error or a hang."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mj
from mxlower import numbers
from mxlower import reference as R

X = np.linspace(-3, 3, 64, dtype=np.float32).reshape(2, 32)


# ----------------------------------------------------------------------------- spec parameters


@pytest.mark.parametrize("code, what", [
    ("e4m3b99999999999999999", "the bias must be -1024..1024"),
    ("e4m3b-" + "9" * 60, "the bias must be -1024..1024"),
    ("e" + "9" * 30 + "m3", "exponent bits must be 1..8"),
    ("e4m" + "9" * 30, "mantissa bits must be 0..23"),
    ("int" + "9" * 30, "intK needs 2 <= K <= 32"),
    ("e4m3b" + "0" * 5000 + "7", "at most 100 characters"),
])
def test_huge_number_spec_parameters_are_refused_naming_the_limit(code, what):
    """Spec values used to be computed as exact powers of two of the bias (a hang in the tools,
    MemoryError in the API): every parameter is bounded first."""
    with pytest.raises(numbers.SpecError, match=what):
        numbers.number(code)
    with pytest.raises(ValueError, match=what):
        R.cast(X, code)
    with pytest.raises(ValueError, match=r"argument 'number'.*" + what):
        mj.cast(jnp.asarray(X), code)


@pytest.mark.parametrize("code, what", [
    ("e8m0_t" + "9" * 30, "a tile size must be a power of two from 2 to 1024"),
    ("e8m0_t32x" + "9" * 30, "a tile size must be a power of two from 2 to 1024"),
    ("e8m0_t32d" + "9" * 30, "a tile dimension must be -1024..1023"),
    ("e8m0_t32d-" + "9" * 30, "a tile dimension must be -1024..1023"),
])
def test_huge_scale_spec_parameters_are_refused_naming_the_limit(code, what):
    with pytest.raises(numbers.SpecError, match=what):
        numbers.scale(code)
    with pytest.raises(ValueError, match=what):
        R.cast(X, "int8", code)


# ----------------------------------------------------------------------------- names


def test_unknown_names_are_value_errors_naming_the_argument_and_the_known_names():
    """They were KeyErrors (still caught by ``except KeyError``)."""
    with pytest.raises(ValueError, match=r"convert: argument 'to': unknown element type "
                       r"'bogus' \(known: f8E4M3FN, .*\)"):
        R.convert(X, "bogus")
    with pytest.raises(ValueError, match=r"quantize: argument 'format': unknown MX format "
                       r"'mxfp8' \(known: mxfp8_e4m3, mxfp8_e5m2, .*\)"):
        R.quantize(X, "mxfp8")
    with pytest.raises(ValueError, match=r"dequantize: argument 'format': unknown MX format"):
        R.dequantize(np.zeros(32, np.uint8), np.zeros(1, np.uint8), "nope")
    with pytest.raises(ValueError, match=r"from_bits: argument 'type_name'"):
        R.from_bits(np.array([1]), "f7")
    with pytest.raises(KeyError):  # old callers
        R.quantize(X, "mxfp8")
    with pytest.raises(TypeError, match=r"convert: argument 'to': not a type"):
        R.convert(X, object())


# ----------------------------------------------------------------------------- numbers


@pytest.mark.parametrize("g", [10**400, -(10**400), 1e300, float("inf"), float("nan")])
def test_a_global_scale_beyond_f32_is_a_value_error(g):
    """10**400 raised OverflowError from np.float32()."""
    with pytest.raises(ValueError, match=r"global_scale must be a finite non-zero f32"):
        R.quantize(X, "nvfp4", global_scale=g)
    with pytest.raises(ValueError, match=r"quantize: argument 'global_scale' must be a finite "
                       r"non-zero float32"):
        mj.quantize(jnp.asarray(X), "nvfp4", global_scale=g)
    e, s = R.quantize(X, "nvfp4")
    with pytest.raises(ValueError, match=r"global_scale must be a finite non-zero f32"):
        R.dequantize(e, s, "nvfp4", global_scale=g)
    with pytest.raises(ValueError, match=r"scaled_dot: global_scale must be a finite f32"):
        R.scaled_dot(e, s, e, s, lhs_format="nvfp4", rhs_format="nvfp4", global_scale=g)


def test_a_huge_global_scale_is_not_printed_in_full():
    with pytest.raises(ValueError) as info:
        R.quantize(X, "nvfp4", global_scale=10**400)
    assert len(str(info.value)) < 120


@pytest.mark.parametrize("shape, dim", [((0,), 0), ((0, 4), 0), ((4, 0), 1), ((3, 0), 1)])
def test_sparse_on_empty_arrays_with_a_huge_n(shape, dim):
    """n = 2**40 divides a size-0 dimension: the reference allocated 8 TiB, the JAX path failed
    with 'internal error in pass ... MemoryError'."""
    x = np.zeros(shape, np.float32)
    got = R.sparse(x, 2**40, 1, dim=dim)
    assert got.shape == shape and got.dtype == np.float32
    j = mj.sparse(jnp.asarray(x), 2**40, 1, dim=dim)
    assert j.shape == shape


def test_a_huge_block_size_is_refused_at_trace_time():
    """block_size=2**70 on a 0-size axis passed the checks and failed building the FFI kernel
    at run time (FFIError)."""
    with pytest.raises(ValueError, match=r"quantize: argument 'block_size' must be "
                       r"1..2147483647, got 1180591620717411303424"):
        mj.quantize(jnp.zeros((4, 0), jnp.float32), "mxfp8_e4m3", axis=1, block_size=2**70)
    with pytest.raises(ValueError, match=r"block_size must be an int in 1..2147483647"):
        R.quantize(np.zeros((4, 0), np.float32), "mxfp8_e4m3", axis=1, block_size=2**70)


# ----------------------------------------------------------------------------- convert


@pytest.mark.parametrize("name", ["f8E4M3FNUZ", "f8E5M2FNUZ", "f8E4M3B11FNUZ"])
def test_convert_to_and_from_the_fnuz_types_runs_and_matches_the_reference(name):
    """The fused kernel's ABI has no dtype code for them (FFIError at run time): these take
    the StableHLO path, bit-exact with the reference."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(512).astype(np.float32) * 10.0 ** e
                        for e in (-6, -2, 0, 2, 4)]
                       + [np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38], np.float32)])
    ref = R.convert(x, name)
    got = np.asarray(mj.convert(jnp.asarray(x), ref.dtype))
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))
    back = np.asarray(mj.convert(jnp.asarray(ref), jnp.float32))
    np.testing.assert_array_equal(back.view(np.uint32), R.convert(ref, "f32").view(np.uint32))


def test_uint8_codes_with_a_source_that_has_a_dtype_are_refused_at_trace_time():
    """It failed at run time: 'JaxRuntimeError: ... argument 0 (x) must have dtype
    float8_e4m3fn'."""
    with pytest.raises(ValueError, match=r"convert: 'source' is for the types stored as uint8 "
                       r"codes .*f8E4M3FN has its own dtype: pass 'x' as float8_e4m3fn"):
        mj.convert(jnp.zeros(4, jnp.uint8), jnp.float16, source="f8E4M3FN")
    # the f6 types are what 'source' is for
    codes = jnp.asarray(R.bits(R.convert(np.array([1.5, -2.0], np.float32), "f6E2M3FN")))
    assert np.asarray(mj.convert(codes, jnp.float32, source="f6E2M3FN")).tolist() == [1.5, -2.0]


# ----------------------------------------------------------------------------- NumPy errors


def test_round_codes_names_a_wrong_shaped_rbits():
    with pytest.raises(ValueError, match=r"round_codes: argument 'rbits' of shape \(3,\) does "
                       r"not broadcast to the values' shape \(4,\)"):
        R.round_codes(np.ones(4), "e4m3", "stochastic", rbits=np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match=r"round_codes: argument 'rbits' must be integers"):
        R.round_codes(np.ones(4), "e4m3", "stochastic", rbits=np.zeros(4))


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (2, 0, 4)])
@pytest.mark.parametrize("scale", ["float32_uint8_t0", "float32_uint8", "float32_uint8_t2",
                                   "float32_uint8_t0d0"])
def test_encode_of_an_empty_array_to_an_asymmetric_datatype(shape, scale):
    """It raised NumPy's AxisError; the JAX API returned empty arrays."""
    x = np.zeros(shape, np.float32)
    enc = R.encode(x, "uint4", scale)
    assert enc.codes.shape == shape
    assert enc.scales.shape == enc.zero_points.shape
    assert R.cast(x, "uint4", scale).shape == shape
    assert mj.cast(jnp.asarray(x), "uint4", scale).shape == shape


# ----------------------------------------------------------------------------- immutability


@pytest.mark.parametrize("field, value", [("format", "bogus"), ("axis", 7),
                                          ("scales", jnp.zeros(3)), ("block_size", 5),
                                          ("elements", jnp.zeros((2, 32))), ("_ste", None)])
def test_an_mxarray_cannot_be_changed_after_construction(field, value):
    """A reassigned field failed deep inside (KeyError, LoweringError, JaxRuntimeError)."""
    q = mj.quantize(jnp.asarray(X), "mxfp8_e4m3")
    with pytest.raises(AttributeError, match=rf"MXArray is immutable: '{field}' cannot be "
                       r"reassigned"):
        setattr(q, field, value)
    with pytest.raises(AttributeError, match="immutable"):
        delattr(q, field)
    np.testing.assert_array_equal(np.asarray(q.dequantize()),
                                  R.dequantize(*R.quantize(X, "mxfp8_e4m3"), "mxfp8_e4m3"))


@pytest.mark.parametrize("field", ["codes", "scales", "zero_points", "datatype"])
def test_a_datatype_array_cannot_be_changed_after_construction(field):
    d = mj.quantize(jnp.asarray(X), "int4", scale="e8m0_t32")
    assert isinstance(d, mj.DatatypeArray)
    with pytest.raises(AttributeError, match=rf"DatatypeArray is immutable: '{field}'"):
        setattr(d, field, "e4m3")


def test_immutable_arrays_still_copy_and_pickle():
    import copy
    import pickle
    q = mj.quantize(X, "mxfp8_e4m3").detach()
    for c in (copy.copy(q), copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
        assert c.format == q.format and c.block_size == q.block_size
        np.testing.assert_array_equal(np.asarray(c.dequantize()), np.asarray(q.dequantize()))


# ----------------------------------------------------------------------------- scaled_dot


def _plain_dot_cases():
    K = 64
    tiny_a, tiny_b = np.zeros((4, K), np.float32), np.zeros((8, K), np.float32)
    tiny_a[:, 0], tiny_b[:, 0] = 1e-20, -1e-20           # a subnormal result: -1e-40
    tiny_a[1, 1], tiny_b[:, 1] = 1.5e-19, -1.02e-19      # -1.53e-38 from a flushed product
    tiny_a[1, 0] = 0.0
    big_a = np.full((4, K), 3e38, np.float32)
    big_a[:, 1::2] = -3e38                                # partial sums overflow f32, sum is 0
    big_b = np.ones((8, K), np.float32)
    return [(tiny_a, tiny_b), (big_a, big_b)]


@pytest.mark.parametrize("case", [0, 1], ids=["subnormal", "overflowing-partial-sums"])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_plain_scaled_dot_has_the_exactness_of_section_6(case, dtype):
    """Two plain operands fell back to lax.dot_general: XLA:CPU flushed subnormal products
    and results to 0 and turned overflowing partial sums into NaN; now they take the MX dot's
    exact contraction (f32 where provably exact, else f64 rounded once)."""
    a, b = _plain_dot_cases()[case]
    a, b = np.asarray(jnp.asarray(a, dtype)), np.asarray(jnp.asarray(b, dtype))
    want = R.scaled_dot(a, None, b, None)
    for f in (mj.scaled_dot, jax.jit(mj.scaled_dot)):
        got = np.asarray(f(jnp.asarray(a), jnp.asarray(b)))
        np.testing.assert_array_equal(got, want)
    assert np.isfinite(want).all()


def test_plain_scaled_dot_keeps_its_gradient_and_batching():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4, 64)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((8, 64)).astype(np.float32))
    gx, gy = jax.grad(lambda x, y: mj.scaled_dot(x, y).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, jnp.broadcast_to(y.sum(0), x.shape), rtol=1e-5)
    np.testing.assert_allclose(gy, jnp.broadcast_to(x.sum(0), y.shape), rtol=1e-5)
    v = jax.vmap(mj.scaled_dot)(x[:, None, :], y[:4, None, :])
    np.testing.assert_allclose(v[:, 0, 0], (x * y[:4]).sum(1), rtol=1e-5)
    assert mj.scaled_dot(x, y, preferred_element_type=jnp.bfloat16).dtype == jnp.bfloat16
