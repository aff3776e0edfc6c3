"""mxlower.jax.install(): JAX's own jax.nn.scaled_matmul / scaled_dot_general on the CPU.

Without it they fail on the CPU with JAX 0.10 ("MLIR translation rule for primitive
'scaled_matmul' not found for platform cpu") and run JAX's own CPU rule from JAX 0.11 on; with
it their ``scaled_matmul`` primitive lowers through mxlower's ``mx.scaled_dot`` on every
version.  Results are compared with ``mxlower.reference.scaled_dot`` of the same quantized
operands (for scaled_dot_general: quantized by JAX's own quantize).  CI runs this file on the
oldest and the newest JAX mxlower supports.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower.bindings import jax_private

RNG = np.random.default_rng(11)
DN = (((2,), (2,)), ((0,), (0,)))


@pytest.fixture
def installed():
    mxj.install()
    yield
    mxj.uninstall()


def _operand(shape, fmt, k):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    e, s = R.quantize(x, fmt, block_size=k)
    return e, s


def _close(out, ref):
    out = np.asarray(out).astype(np.float64)
    assert np.max(np.abs(out - ref)) <= 1e-6 * np.max(np.abs(ref))


def _subnormal_scale_case(m):
    """``m`` rows of 1 x 2^-127 (e8m0 scale code 0) times 1 x 2^127: exactly 1.  JAX's own CPU
    rule (0.11+) computes in the result type on XLA:CPU, which flushes the subnormal 2^-127 to
    zero (0); mxlower's is exact (1).  So the result tells which rule a call ran."""
    a = np.zeros((1, m, 32), jnp.float8_e4m3fn)
    a[0, :, 0] = 1
    b = np.ones((1, 1, 32), jnp.float8_e4m3fn)
    sa = np.full((1, m, 1), 2.0 ** -127, jnp.float8_e8m0fnu)
    sb = np.full((1, 1, 1), 2.0 ** 127, jnp.float8_e8m0fnu)
    return a, b, sa, sb


def test_jax_cpu_rule_by_version():
    # the one version difference install() has to know (mxlower.bindings.jax_private)
    assert jax_private.jax_lowers_scaled_matmul("cpu") == (jax.__version_info__ >= (0, 11))


def test_install_and_uninstall_apply_to_what_ran_before():
    """install() and uninstall() take effect at the next call of shapes already traced,
    lowered and compiled (jitted and eager), on every JAX version: shapes first run before
    install() (m=1) and shapes first run while installed (m=2)."""
    mxj.uninstall()
    f = jax.jit(jax.nn.scaled_matmul)
    calls = {f"{how} m={m}": (lambda m=m, g=g: np.asarray(g(*_subnormal_scale_case(m))).ravel())
             for m in (1, 2) for how, g in (("jit", f), ("eager", jax.nn.scaled_matmul))}

    def check(names, mxlower_rule):
        for name in names:
            if mxlower_rule:
                assert list(calls[name]()) == [1.0] * int(name[-1]), name
            elif jax_private.jax_lowers_scaled_matmul("cpu"):  # JAX >= 0.11: its own rule
                assert not calls[name]().any(), name
            else:  # JAX 0.10: no CPU rule at all
                with pytest.raises(NotImplementedError, match="scaled_matmul"):
                    calls[name]()

    check(["jit m=1", "eager m=1"], mxlower_rule=False)
    mxj.install()
    assert mxj.installed() == ("cpu",)
    mxj.install()  # idempotent
    check(calls, mxlower_rule=True)
    mxj.uninstall()
    assert mxj.installed() == ()
    check(calls, mxlower_rule=False)
    mxj.uninstall()  # nothing installed: nothing to do


@pytest.mark.parametrize("lf,rf,k", [("mxfp8_e4m3", "mxfp8_e4m3", 32),
                                     ("mxfp8_e5m2", "mxfp8_e4m3", 32),
                                     ("mxfp4_e2m1", "mxfp4_e2m1", 32),
                                     ("nvfp4", "nvfp4", 16)])
def test_scaled_matmul(installed, lf, rf, k):
    a, sa = _operand((2, 8, 128), lf, k)
    b, sb = _operand((2, 16, 128), rf, k)
    out = jax.jit(jax.nn.scaled_matmul)(a, b, sa, sb)
    ref = R.scaled_dot(a, sa, b, sb, lhs_format=lf, rhs_format=rf,
                       dimension_numbers=DN).astype(np.float64)
    assert out.shape == (2, 8, 16) and out.dtype == jnp.float32
    _close(out, ref)
    bf = jax.nn.scaled_matmul(a, b, sa, sb, preferred_element_type=jnp.bfloat16)
    assert bf.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(bf, np.float32), ref, rtol=2 ** -8, atol=1e-6)


def test_scaled_matmul_rejects_non_mx_dtypes(installed):
    a = jnp.zeros((1, 4, 32), jnp.float8_e4m3fn)
    s = jnp.zeros((1, 4, 1), jnp.float8_e4m3fn)  # e4m3 scales belong to nvfp4's f4 elements
    with pytest.raises(TypeError, match="not an MX format"):
        jax.nn.scaled_matmul(a, a, s, s)


@pytest.mark.parametrize("mode", ["mxfp8", "nvfp4"])
def test_scaled_dot_general_with_configs(installed, mode):
    g = jnp.float32(0.5) if mode == "nvfp4" else None
    cfg = jax.nn.get_scaled_dot_general_config(mode, global_scale=g)
    x = (RNG.standard_normal((2, 32, 64))).astype(np.float32)
    y = (RNG.standard_normal((2, 32, 64))).astype(np.float32)
    out = jax.jit(lambda x, y: jax.nn.scaled_dot_general(x, y, DN, configs=[cfg] * 3))(x, y)
    # the same computation from JAX's own quantize and mxlower's reference scaled dot
    xq, xs = (np.asarray(v) for v in jax_private.jax_quantize(jnp.asarray(x), cfg))
    yq, ys = (np.asarray(v) for v in jax_private.jax_quantize(jnp.asarray(y), cfg))
    fmt = "mxfp8_e4m3" if mode == "mxfp8" else "nvfp4"
    ref = R.scaled_dot(xq, xs, yq, ys, lhs_format=fmt, rhs_format=fmt,
                       dimension_numbers=DN).astype(np.float64)
    if g is not None:
        ref = ref * float(g) * float(g)
    _close(out, ref)
    # and it trains: gradients run on the CPU too
    gx = jax.grad(lambda x: jnp.sum(jax.nn.scaled_dot_general(x, y, DN, configs=[cfg] * 3)))(x)
    assert gx.shape == x.shape and bool(jnp.all(jnp.isfinite(gx)))
