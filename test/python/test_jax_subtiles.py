"""Subtile scale specs (shared micro-exponents: mx9 / mx6 / mx4 and any ``_sAoD`` spec) in
mxlower.jax: ``cast``, ``quantize`` to a DatatypeArray holding the uint8 offsets as a leaf,
``dequantize`` of it, under jit / vmap / grad, bit for bit against mxlower.reference; the
DatatypeArray constructor's checks of the offsets."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mxlower.jax as mj
from mxlower import reference as R
from mxlower.jax import DatatypeArray


def _x(shape=(8, 64), dtype=np.float32, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-12, 1, shape))
    x = x.astype(np.float32)
    flat = x.reshape(-1, x.shape[-1])
    flat[0, :16] = 0  # a zero tile
    flat[1, 3] = np.nan  # a NaN tile
    flat[2, 20] = -np.inf
    flat[3, :2] = 0  # a zero pair in a non-zero tile
    return flat.reshape(shape).astype(dtype)


def _same(got, want) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
    gb, wb = R.bits(g), R.bits(w)
    ok = gb == wb
    if g.dtype.kind == "f" or g.dtype == ml_dtypes.bfloat16:
        with np.errstate(invalid="ignore"):
            ok |= np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32))
    assert ok.all(), (np.argwhere(~ok)[:4], g[~ok][:4], w[~ok][:4])


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.float16])
def test_cast_of_subtile_datatypes(dtype):
    x = _x(dtype=dtype)
    rbits = np.random.default_rng(1).integers(0, 1 << 32, x.shape, dtype=np.uint64)
    rbits = rbits.astype(np.uint32)
    for number, scale, rm, sm in (("mx9", None, "even", "max"),
                                  ("mx4", None, "stochastic", "rceil"),
                                  ("e2m1fo", "e8m0_t32_s4o2", "nearest", "midmax"),
                                  ("e4m3fn", "e8m0_t8x16_s2x4o2", "half_down", "nearest")):
        kw = {"rbits": rbits} if rm == "stochastic" else {}
        got = mj.cast(x, number, scale, roundmode=rm, scalemode=sm, **kw)
        _same(got, R.cast(x, number, scale, roundmode=rm, scalemode=sm, **kw))


def test_quantize_holds_offsets_and_dequantize_decodes_them():
    x = _x()
    a = mj.quantize(x, "mx6")
    assert isinstance(a, DatatypeArray) and a.datatype == "int5:e8m0_t16_s2o1"
    enc = R.encode(x, "mx6")
    _same(a.codes, enc.codes)
    _same(a.scales, enc.scales)
    _same(a.offsets, enc.offsets)
    assert a.zero_points is None and a.offsets.dtype == jnp.uint8
    assert a.nbytes == (x.size * 5 + a.scales.size * 8 + a.offsets.size) // 8
    _same(mj.dequantize(a, jnp.bfloat16), R.decode(enc, "mx6", dtype=ml_dtypes.bfloat16))
    # the offsets are a pytree leaf; rebuilt from its parts the array decodes the same
    leaves = jax.tree_util.tree_leaves(a)
    assert any(leaf is a.offsets for leaf in leaves)
    b = DatatypeArray(a.codes, a.scales, None, "mx6", offsets=a.offsets)
    _same(b.dequantize(), R.decode(enc, "mx6"))


def test_transformations():
    x = _x(seed=3)
    f = jax.jit(lambda v: mj.dequantize(mj.quantize(v, "mx4", roundmode="nearest")))
    _same(f(x), R.cast(x, "mx4", roundmode="nearest"))
    q = jax.jit(lambda v: mj.quantize(v, "mx9").detach())(x)
    _same(q.offsets, R.encode(x, "mx9").offsets)
    # vmap over a leading axis: the tiles run along the last dimension of each example
    xs = x.reshape(2, 4, 64)
    _same(jax.vmap(lambda v: mj.cast(v, "mx9"))(xs), R.cast(xs, "mx9"))
    qs = jax.vmap(lambda v: mj.quantize(v, "mx9"))(xs)
    _same(qs.offsets, R.encode(xs, "mx9").offsets)
    _same(jax.vmap(mj.dequantize)(qs), R.cast(xs, "mx9"))
    # 2D subtiles over the last two dimensions under vmap
    x3 = _x((2, 16, 32), seed=4)
    _same(jax.vmap(lambda v: mj.cast(v, "int8", "e8m0_t16x16_s4x4o2"))(x3),
          R.cast(x3, "int8", "e8m0_t16x16_s4x4o2"))
    # gradients: straight-through
    finite = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    for fn in (lambda v: mj.cast(v, "mx6").sum(),
               lambda v: mj.dequantize(mj.quantize(v, "mx6")).sum()):
        g = jax.grad(fn)(finite)
        assert np.all(np.asarray(g) == 1)


def test_datatype_array_checks_the_offsets():
    x = _x()
    a = mj.quantize(x, "mx9")
    with pytest.raises(ValueError, match="needs argument 'offsets'"):
        DatatypeArray(a.codes, a.scales, None, "mx9")
    with pytest.raises(ValueError, match=r"argument 'offsets' of int8:e8m0_t16_s2o1 must have "
                                         r"shape \(8, 32\), got \(8, 16\)"):
        DatatypeArray(a.codes, a.scales, None, "mx9", offsets=a.offsets[:, :16])
    with pytest.raises(TypeError, match="argument 'offsets' of int8:e8m0_t16_s2o1 must have "
                                        "dtype uint8, got int8"):
        DatatypeArray(a.codes, a.scales, None, "mx9", offsets=a.offsets.astype(jnp.int8))
    with pytest.raises(ValueError, match="has no subtile offsets"):
        DatatypeArray(a.codes, a.scales, None, "int8:e8m0_t16", offsets=a.offsets)


@pytest.mark.parametrize("number, scale, message", [
    ("int8", "e8m0_t16_s3o1", "subtile size is a power of two"),
    ("int8", "e8m0_t16_s2o9", "a subtile offset has 1 to 8 bits"),
    ("int8", "e4m3fn_t16_s2o1", "below an exponent scale"),
    ("int8", "e8m0_t0_s2o1", "divide a tile"),
    ("int8", "e8m0_t128_s2o1", "tile size 128 does not divide dimension 1 of size 64"),
])
def test_bad_subtile_specs_are_trace_time_errors(number, scale, message):
    x = _x()
    for fn in (lambda v: mj.cast(v, number, scale), lambda v: mj.quantize(v, f"{number}:{scale}")):
        with pytest.raises(ValueError, match=message):
            jax.jit(fn).lower(x)
