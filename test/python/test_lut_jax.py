"""Lookup-table datatypes (docs/semantics.md section 10.7) in mxlower.jax: ``cast`` and the
datatype ``quantize`` / ``dequantize`` of ``"nf4"``, ``"nf4:float32_t64"``, ``"nf4:e8m0_t32"``
and a custom :func:`~mxlower.numbers.lut_spec`, under jit, vmap and grad, through the fused
CPU kernel and the StableHLO, bit for bit against the oracle; errors at trace time."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import mxlower.jax as mxj  # noqa: E402
from mxlower import reference as R  # noqa: E402
from mxlower.numbers import lut_spec  # noqa: E402

CUSTOM = lut_spec([-2.0, -1.0, -0.25, 0.0, 0.125, 0.5, 1.5, 3.0])
NOZERO = lut_spec([-1.5, -0.5, 0.5, 1.5])


def _x(shape=(4, 64), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    x.flat[:6] = [0.0, -0.0, np.inf, -np.nan, 1e-40, 0.5]
    return x


def _same(got, want) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype and g.shape == w.shape
    assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), (g[g != w][:4], w[g != w][:4])


@pytest.mark.parametrize("impl", ["auto", "xla"])
@pytest.mark.parametrize("number, scale, mode", [
    ("nf4", None, "even"),
    ("nf4:float32_t64", None, "nearest"),
    ("nf4:e8m0_t32", None, "stochastic"),
    (CUSTOM, "e8m0_t16", "half_down"),
    (NOZERO, None, "stochastic"),
])
def test_cast_is_the_oracle(number, scale, mode, impl):
    x = _x()
    r = np.random.default_rng(1).integers(0, 1 << 32, x.shape, dtype=np.uint64) \
        .astype(np.uint32) if mode == "stochastic" else None
    f = jax.jit(lambda x, r: mxj.cast(x, number, scale, roundmode=mode, rbits=r, impl=impl))
    _same(f(x, r), R.cast(x, number, scale, roundmode=mode, rbits=r))


def test_quantize_and_dequantize_of_lut_datatypes():
    x = _x(seed=2)
    for number, scale in (("nf4:e8m0_t32", None), ("nf4", "float32_t64"), (CUSTOM, None),
                          (CUSTOM, "bfloat16_t32")):
        q = jax.jit(lambda x: mxj.quantize(x, number, scale=scale))(x)
        enc = R.encode(x, number, scale)
        _same(q.codes, enc.codes)
        assert q.codes.dtype == np.uint8
        if enc.scales is not None:
            _same(q.scales, enc.scales)
        _same(jax.jit(lambda q: q.dequantize(jnp.bfloat16))(q),
              R.decode(enc, number, scale, dtype=jnp.bfloat16))


def test_vmap_and_grad():
    x = _x((3, 2, 64), seed=3)
    f = jax.vmap(lambda v: mxj.cast(v, CUSTOM, "e8m0_t32"))
    _same(f(x), np.stack([R.cast(v, CUSTOM, "e8m0_t32") for v in x]))
    g = jax.grad(lambda v: jnp.sum(mxj.cast(v, "nf4:float32_t64") * 3.0))(_x())
    _same(g, np.full((4, 64), 3.0, np.float32))  # the straight-through estimator
    dq = jax.grad(lambda v: jnp.sum(mxj.quantize(v, CUSTOM, scale="e8m0_t32").dequantize()))
    _same(dq(_x()), np.ones((4, 64), np.float32))


def test_wide_tables():
    """Tables beyond the codec's direct encoder (its per-gap one), stochastic included."""
    x = _x()
    r = np.random.default_rng(2).integers(0, 1 << 32, x.shape, dtype=np.uint64).astype(np.uint32)
    for wide in (lut_spec([0.0, 2.0 ** -40, 1.0, 2.0]),
                 lut_spec([float(np.float32(v)) for v in (-3e38, -1e-38, 1e-30, 2.5e37)])):
        for mode, rb in (("stochastic", r), ("even", None)):
            f = jax.jit(lambda x, r: mxj.cast(x, wide, roundmode=mode, rbits=r))
            _same(f(x, rb), R.cast(x, wide, roundmode=mode, rbits=rb))


def test_bad_lut_arguments_fail_at_trace_time():
    x = jnp.ones((4, 64), jnp.float32)
    with pytest.raises(ValueError, match="cannot rebuild the table"):
        mxj.cast(x, CUSTOM.code)
    with pytest.raises(ValueError, match="only uint data takes a zero point"):
        mxj.cast(x, "nf4", "float32_uint8_t32")
