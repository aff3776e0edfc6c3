"""mxlower.jax under jax.vmap, jax.jvp and jax.grad.

vmap results must equal the unbatched calls bit for bit.  Gradients: exact through dequantize
and the plain side of scaled_dot (jax.test_util.check_grads, and against float64), the
straight-through estimator through quantize (the gradient of dequantize(quantize(x)) is the
identity; of scaled_dot(quantize(w), a) w.r.t. w it is the gradient w.r.t. the dequantized w).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import mxlower.jax as mxj
from mxlower import reference as R

RNG = np.random.default_rng(3)


def rand(*shape):
    return (RNG.standard_normal(shape) * np.exp2(RNG.integers(-3, 4, size=shape))).astype(
        np.float32)


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and bool(
        np.array_equal(a.view(np.uint8), b.view(np.uint8)))


def parts(q):
    return q.elements, q.scales


# ----------------------------------------------------------------------------- vmap


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp6_e3m2", "nvfp4"])
def test_vmap_quantize_and_dequantize_match_unbatched(fmt):
    x = rand(3, 4, 64)
    batched = jax.jit(jax.vmap(lambda x: parts(mxj.quantize(x, fmt, scale_mode="rceil"))))(x)
    whole = jax.jit(lambda x: parts(mxj.quantize(x, fmt, scale_mode="rceil")))(x)
    for a, b in zip(batched, whole):
        assert bits_equal(a, b)
    # batch dimension not in front, blocked axis before it
    xt = np.moveaxis(x, 0, 2)  # [4, 64, 3]
    moved = jax.vmap(lambda x: parts(mxj.quantize(x, fmt, axis=1, scale_mode="rceil")),
                     in_axes=2, out_axes=0)(xt)
    for a, b in zip(moved, whole):
        assert bits_equal(a, b)
    q = mxj.quantize(x, fmt)
    d = jax.vmap(lambda q: mxj.dequantize(q, jnp.bfloat16))(q)
    assert bits_equal(d, mxj.dequantize(q, jnp.bfloat16))


def test_vmap_per_example_global_scale():
    x = rand(3, 2, 32)
    g = np.array([0.5, 4.0, 1e-3], np.float32)
    out = jax.vmap(lambda x, g: parts(mxj.quantize(x, "nvfp4", global_scale=g)))(x, g)
    deq = jax.vmap(lambda x, g: mxj.quantize(x, "nvfp4", global_scale=g).dequantize())(x, g)
    for i in range(3):
        e, s = R.quantize(x[i], "nvfp4", global_scale=g[i])
        assert np.array_equal(R.bits(np.asarray(out[0][i])), R.bits(e))
        assert np.array_equal(R.bits(np.asarray(out[1][i])), R.bits(s))
        assert np.array_equal(np.asarray(deq[i]), R.dequantize(e, s, "nvfp4", global_scale=g[i]))


def test_vmap_scaled_dot_batched_and_shared_operands():
    a, w = rand(5, 8, 64), rand(16, 64)
    qw = mxj.quantize(w, "mxfp8_e4m3")

    def f(a):
        return mxj.scaled_dot(mxj.quantize(a, "mxfp4_e2m1"), qw)

    batched = jax.jit(jax.vmap(f))(a)
    loop = np.stack([np.asarray(jax.jit(f)(a[i])) for i in range(5)])
    np.testing.assert_allclose(np.asarray(batched), loop, rtol=1e-6, atol=0)
    # both sides batched, a plain rhs with the batch dimension last
    b = rand(8, 64, 5)
    both = jax.vmap(lambda a, b: mxj.scaled_dot(mxj.quantize(a, "mxint8"), b,
                                                (((1,), (1,)), ((), ()))),
                    in_axes=(0, 2))(a, b)
    for i in range(5):
        ref = mxj.scaled_dot(mxj.quantize(a[i], "mxint8"), b[..., i], (((1,), (1,)), ((), ())))
        np.testing.assert_allclose(np.asarray(both[i]), np.asarray(ref), rtol=1e-6, atol=1e-30)


def test_vmap_of_mxarray_built_outside():
    x = rand(4, 2, 32)
    q = mxj.quantize(x, "mxfp8_e5m2")  # blocked axis stored as -1: valid inside vmap too
    d = jax.vmap(mxj.dequantize)(q)
    assert bits_equal(d, mxj.dequantize(q))


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4_e2m1", "mxint8", "nvfp4"])
def test_grad_through_quantize_is_straight_through(fmt):
    x = rand(4, 64)
    c = rand(4, 64)

    def loss(x):
        return jnp.sum(c * mxj.dequantize(mxj.quantize(x, fmt)))

    g = jax.jit(jax.grad(loss))(x)
    assert bits_equal(g, c)  # d/dx dequantize(quantize(x)) = identity, exactly
    # bf16 output: the cotangent rounds to bf16 once
    g16 = jax.grad(lambda x: jnp.sum(c * mxj.quantize(x, fmt).dequantize(jnp.bfloat16)
                                     .astype(jnp.float32)))(x)
    assert bits_equal(g16, c.astype(jnp.bfloat16).astype(np.float32))
    # forward mode agrees
    _, t = jax.jvp(lambda x: mxj.dequantize(mxj.quantize(x, fmt)), (x,), (c,))
    assert bits_equal(t, c)


def test_grad_through_dequantize_of_raw_parts_is_zero():
    x = rand(2, 32)
    q = mxj.quantize(x).detach()
    g = jax.grad(lambda e: jnp.sum(mxj.dequantize(mxj.MXArray(e, q.scales, q.format))
                                   .astype(jnp.float32)))(q.elements)
    assert g.dtype == q.elements.dtype and not np.any(np.asarray(g, np.float32))
    # the global scale carries no gradient either (the STE treats the MX value as x)
    gg = jax.grad(lambda g: jnp.sum(mxj.quantize(x, "nvfp4", global_scale=g).dequantize()))(
        jnp.float32(2.0))
    assert float(gg) == 0.0


def test_check_grads_scaled_dot_plain_side():
    # scaled_dot is linear in its plain side, so a large finite-difference step has no
    # truncation error and keeps f32 cancellation small (the default 1e-4 step is noise-bound)
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    w = RNG.standard_normal((8, 64)).astype(np.float32)
    qw = mxj.quantize(w, "mxfp6_e2m3")
    check_grads(lambda a: mxj.scaled_dot(a, qw), (a,), order=2, modes=("fwd", "rev"),
                eps=0.25, atol=1e-3, rtol=1e-3)
    qa = mxj.quantize(a, "nvfp4", global_scale=0.25)
    check_grads(lambda b: mxj.scaled_dot(qa, b, (((1,), (0,)), ((), ()))), (w.T.copy(),),
                order=2, modes=("fwd", "rev"), eps=0.25, atol=1e-3, rtol=1e-3)


def test_grad_scaled_dot_exact_against_float64():
    a, w, ct = rand(6, 64), rand(8, 64), rand(6, 8)
    fmt = "mxfp8_e4m3"

    def loss(a, w):
        return jnp.sum(ct * mxj.scaled_dot(a, mxj.quantize(w, fmt)))

    ga, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(a, w)
    e, s = R.quantize(w, fmt)
    wq = R.dequantize(e, s, fmt).astype(np.float64)
    ref_a = ct.astype(np.float64) @ wq  # exact gradient w.r.t. the plain side
    ref_w = ct.astype(np.float64).T @ a.astype(np.float64)  # STE through quantize
    mag_a = np.abs(ct.astype(np.float64)) @ np.abs(wq)
    mag_w = np.abs(ct.astype(np.float64)).T @ np.abs(a.astype(np.float64))
    assert np.all(np.abs(np.asarray(ga) - ref_a) <= 1e-6 * mag_a)
    assert np.all(np.abs(np.asarray(gw) - ref_w) <= 1e-6 * mag_w)


def test_grad_both_sides_quantized_general_dims_and_jit_inside():
    a, b, ct = rand(2, 64, 3), rand(2, 5, 64), rand(2, 3, 5)
    dn = (((1,), (2,)), ((0,), (0,)))

    @jax.jit
    def f(a, b):  # grad of a jitted function: the JVP is taken of the jaxpr
        qa = mxj.quantize(a, "mxfp8_e5m2", axis=1)
        qb = mxj.quantize(b, "mxfp4_e2m1", scale_mode="nearest")
        return mxj.scaled_dot(qa, qb, dn, jnp.bfloat16)

    ga, gb = jax.grad(lambda a, b: jnp.sum(ct * f(a, b).astype(jnp.float32)),
                      argnums=(0, 1))(a, b)
    da = R.dequantize(*R.quantize(a, "mxfp8_e5m2", axis=1), "mxfp8_e5m2", axis=1)
    db = R.dequantize(*R.quantize(b, "mxfp4_e2m1", scale_mode="nearest"), "mxfp4_e2m1")
    ct16 = ct.astype(jnp.bfloat16).astype(np.float64)
    ref_a = np.einsum("bmn,bnk->bkm", ct16, db.astype(np.float64))
    ref_b = np.einsum("bmn,bkm->bnk", ct16, da.astype(np.float64))
    np.testing.assert_allclose(np.asarray(ga), ref_a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), ref_b, rtol=1e-5, atol=1e-6)


def test_vmap_of_grad():
    x, c = rand(3, 2, 32), rand(3, 2, 32)
    g = jax.vmap(jax.grad(lambda x, c: jnp.sum(c * mxj.quantize(x, "mxfp6_e3m2").dequantize())))(
        x, c)
    assert bits_equal(g, c)
