"""quantize by a datatype: an MX format's datatype binds the MX quantize primitive.

``quantize(x, "e4m3fn:e8m0_t32")`` (or ``"bfp16"``, number= / scale=, the two-level
``"e2m1fo:e4m3fn_t16_gf32"`` with ``global_scale=``) rounded with ``even`` and a scale mode
section 3 names binds ``mx_quantize`` -- the format's fused kernels, ``impl``, sharding --
and returns a DatatypeArray with the leaves and datatype of the format-name quantize; other
datatypes, stochastic or other roundings and ``midmax`` bind ``mx_encode``.  Both primitives
are bit-exact with mxlower.reference, so the dispatch changes no bit: the tests compare the
leaves with the format name's and with ``mxlower.reference.encode``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower.bindings import upstream
from mxlower.formats import FORMATS, block_datatype
from mxlower.testing import bits, same_bits

RNG = np.random.default_rng(23)
WIDE = (jnp.float32, jnp.bfloat16, jnp.float16)


def data(*shape):
    """Random magnitudes over a wide range, with the edge values of the MX formats (their
    maxima and the values just past them, where rceil and nearest differ from floor), signed
    zeros, Inf, NaN, subnormals, a zero block and a block of f32 subnormals."""
    n = int(np.prod(shape))
    x = (RNG.standard_normal(n) * np.exp2(RNG.integers(-20, 20, n))).astype(np.float32)
    edges = np.array([np.ldexp(m, e) for m in (6.0, 6.5, 7.0, 7.5, 28.0, 30.0, 448.0, 480.0,
                                               57344.0, 61440.0, 1.984375, 3.75)
                      for e in (-130, -20, -1, 0, 1, 20, 100)], np.float32)
    idx = RNG.choice(n, size=n // 4, replace=False)
    x[idx] = RNG.choice(edges, size=len(idx)) * RNG.choice([-1, 1], size=len(idx))
    x[:6] = [0.0, -0.0, np.inf, np.nan, -np.inf, 1e-45]
    x[64:96] = 0.0
    x[96:128] = np.float32(1e-40) * RNG.standard_normal(32).astype(np.float32)
    return x.reshape(shape)


def same_raw(a, b) -> bool:
    """The same bits, whatever the dtypes (the reference holds f6 codes as ml_dtypes float6,
    JAX as uint8)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(bits(a), bits(b))


def same_leaves(d, q) -> None:
    """``d`` (a DatatypeArray) holds the leaves and datatype of ``q`` (an MXArray)."""
    assert type(d) is mxj.DatatypeArray, type(d)
    assert d.datatype == q.datatype and d._dt == q._dt
    assert jax.tree_util.tree_structure(d.detach()).node_data()[1] == \
        jax.tree_util.tree_structure(q.detach()).node_data()[1]
    assert same_bits(d.codes, q.codes), "codes"
    assert same_bits(d.scales, q.scales), "scales"
    assert d.zero_points is None
    assert (d.global_scale is None) == (q.global_scale is None)
    if q.global_scale is not None:
        assert same_bits(d.global_scale, q.global_scale)


def primitives_of(f, *args) -> list[str]:
    jaxpr = jax.make_jaxpr(f)(*args)
    return [e.primitive.name for e in jaxpr.jaxpr.eqns]


def quantize_params(f, *args) -> dict:
    (eqn,) = [e for e in jax.make_jaxpr(f)(*args).jaxpr.eqns
              if e.primitive.name == "mx_quantize"]
    return dict(eqn.params)


#: (datatype, format, axis, block size): every format's datatype (blocked along the last
#: dimension and the first), bfp16, an alias, non-default tiles
MX_CODES = [(block_datatype(f, None, -1).code, name, -1, f.block_size)
            for name, f in FORMATS.items()] + [
    (block_datatype(f, None, 0).code, name, 0, f.block_size) for name, f in FORMATS.items()] + [
    ("bfp16", "mxint8", -1, 8), ("mxfp8e4", "mxfp8_e4m3", -1, 32),
    ("e2m1fo:e4m3fn_t8d0", "nvfp4", 0, 8), ("e5m2:e8m0_t64", "mxfp8_e5m2", -1, 64)]
MX_IDS = [c for c, *_ in MX_CODES]


def modes_of(fmt: str) -> list[str]:
    return ["floor"] if fmt == "nvfp4" else ["floor", "rceil", "nearest"]


# ----------------------------------------------------------------------------- dispatch


@pytest.mark.parametrize("code,fmt,axis,k", MX_CODES, ids=MX_IDS)
def test_an_mx_datatype_binds_the_mx_quantize_primitive(code, fmt, axis, k):
    x = data(64, 64)
    for mode in modes_of(fmt):
        for impl in ("auto", "xla"):
            def f(x):
                return mxj.quantize(x, code, scale_mode=mode, impl=impl)

            names = primitives_of(f, x)
            assert "mx_quantize" in names and "mx_encode" not in names, names
            # as the format name's call: marked for sharded kernels with impl="auto" only
            assert ("mx_needs_devices" in names) == (impl == "auto"), names
            want = dict(format=fmt, block_size=k, axis=axis % 2, impl=impl,
                        scale_mode=None if fmt == "nvfp4" else mode)
            assert quantize_params(f, x) == want
            assert quantize_params(f, x) == quantize_params(
                lambda x: mxj.quantize(x, fmt, axis=axis, block_size=k, scale_mode=mode,
                                       impl=impl), x)
    assert type(mxj.quantize(x, code)) is mxj.DatatypeArray
    # section 10's name of floor, and the number= / scale= spelling
    number, _, scale = mxj.quantize(x, code).datatype.partition(":")
    for kw in (dict(scale_mode="max"), dict(scale=scale)):
        f = (lambda x, kw=kw: mxj.quantize(x, number if "scale" in kw else code, **kw))
        assert "mx_quantize" in primitives_of(f, x)
        same_leaves(f(x), mxj.quantize(x, fmt, axis=axis, block_size=k))


def test_the_two_level_datatype_binds_the_mx_quantize_primitive():
    x = data(64, 64)
    g = jnp.float32(0.75)
    for code, axis in (("e2m1fo:e4m3fn_t16_gf32", 1), ("e2m1fo:e4m3fn_t16d0_gf32", 0)):
        names = primitives_of(lambda x, g: mxj.quantize(x, code, global_scale=g), x, g)
        assert "mx_quantize" in names and "mx_encode" not in names
        assert quantize_params(lambda x, g: mxj.quantize(x, code, global_scale=g), x, g) == \
            dict(format="nvfp4", block_size=16, axis=axis, scale_mode=None, impl="auto")


@pytest.mark.parametrize("code,kw", [
    ("e5m6:e8m0_t32", {}), ("mxint4", {}), ("e4m3fn:e8m0_t0", {}),
    ("e4m3fn:e8m0_t32x32", {}), ("e4m3fn", {}), ("uint4:float32_uint8_t16", {}),
    ("e4m3fn:e8m0_t32", dict(roundmode="zero")), ("bfp16", dict(roundmode="nearest")),
    ("e4m3fn:e8m0_t32", dict(scale_mode="midmax")),
    ("e2m1fo:e4m3fn_t16", dict(roundmode="half_down")),
    ("e2m1fo:e8m0_t32", dict(roundmode="stochastic", rbits=np.zeros((64, 64), np.uint32))),
], ids=lambda v: str(v) if isinstance(v, str) else ",".join(v))
def test_other_datatypes_and_modes_keep_mx_encode(code, kw):
    x = data(64, 64)
    names = primitives_of(lambda x: mxj.quantize(x, code, **kw), x)
    assert "mx_encode" in names and "mx_quantize" not in names, names
    assert "mx_needs_devices" not in names


# ----------------------------------------------------------------------------- the same bits


@pytest.mark.parametrize("code,fmt,axis,k", MX_CODES, ids=MX_IDS)
def test_bit_identical_to_the_format_name_and_the_reference(code, fmt, axis, k):
    """Every input dtype, scale mode and impl, under jit and eagerly: the format name's leaves
    (MXArray), and mxlower.reference.encode's codes and scales."""
    x32 = data(64, 64)
    modes = modes_of(fmt)
    for dtype in WIDE:
        x = jnp.asarray(x32).astype(dtype)
        for impl in ("auto", "xla"):
            def both(x):
                return [(mxj.quantize(x, code, scale_mode=m, impl=impl).detach(),
                         mxj.quantize(x, fmt, axis=axis, block_size=k, scale_mode=m,
                                      impl=impl).detach()) for m in modes]

            for mode, (d, q) in zip(modes, jax.jit(both)(x)):
                same_leaves(d, q)
                want = R.encode(np.asarray(x), d._dt, scalemode="max" if mode == "floor"
                                else mode)
                assert same_raw(d.codes, want.codes) and same_raw(d.scales, want.scales)
    d = mxj.quantize(x32, code, scale_mode=modes[-1])  # eager
    same_leaves(d, mxj.quantize(x32, fmt, axis=axis, block_size=k, scale_mode=modes[-1]))
    assert same_bits(d.dequantize(jnp.bfloat16), R.decode(R.encode(
        x32, d._dt, scalemode="max" if modes[-1] == "floor" else modes[-1]), d._dt,
        dtype=np.dtype(jnp.bfloat16)))


@pytest.mark.parametrize("code,fmt,dim", [
    ("e4m3fn:e8m0_t32d0", "mxfp8_e4m3", 0), ("e3m2fo:e8m0_t32d-1", "mxfp6_e3m2", 2),
    ("int8:e8m0_t8d1", "mxint8", 1), ("e2m1fo:e4m3fn_t16d0", "nvfp4", 0)])
def test_rank_three_vmap_grad_and_jvp(code, fmt, dim):
    """Blocked dimension first, middle or last of a rank-3 array; vmap over another one; the
    straight-through gradient and tangent of dequantize(quantize(x))."""
    x = data(32, 16, 32)
    k = 16 if fmt == "nvfp4" else 8 if fmt == "mxint8" else 32
    d = jax.jit(lambda x: mxj.quantize(x, code).detach())(x)
    same_leaves(d, mxj.quantize(x, fmt, axis=dim, block_size=k))
    # vmap over a dimension that is not blocked: the tiles count from the end
    over = 1 if dim != 1 else 2
    v = jax.jit(jax.vmap(lambda r: mxj.quantize(r, code).detach(), in_axes=over))(x)
    m = jax.jit(jax.vmap(lambda r: mxj.quantize(r, fmt, axis=dim - (dim > over),
                                                block_size=k).detach(), in_axes=over))(x)
    assert type(v) is mxj.DatatypeArray and same_bits(v.codes, m.codes)
    assert same_bits(v.scales, m.scales) and v.datatype == m.datatype
    # gradient and tangent: the straight-through estimator, as for the format name
    xf = jnp.asarray(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0))
    w = jnp.asarray(RNG.standard_normal(x.shape).astype(np.float32))
    for make in (lambda x: mxj.quantize(x, code),
                 lambda x: mxj.quantize(x, fmt, axis=dim, block_size=k)):
        g = jax.jit(jax.grad(lambda x: jnp.sum(mxj.dequantize(make(x)) * w)))(xf)
        assert same_bits(g, w)
        t = jax.jvp(lambda x: mxj.dequantize(make(x), jnp.bfloat16), (xf,), (w,))[1]
        assert same_bits(t, w.astype(jnp.bfloat16))


@pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")
def test_impl_auto_runs_the_mx_kernel_and_xla_the_stablehlo():
    x = data(64, 64)

    def compiled(impl):
        return jax.jit(lambda x: mxj.quantize(x, "e4m3fn:e8m0_t32d0", scale_mode="rceil",
                                              impl=impl).codes).lower(x).compile().as_text()

    assert "mxlower_quantize_mxfp8_e4m3" in compiled("auto")
    assert "mxlower_" not in compiled("xla")
    text = mxj.lower(lambda x: mxj.quantize(x, "bfp16").codes, x)  # portable, no custom call
    assert "custom_call" not in text and "mx." not in text


# ----------------------------------------------------------------------------- two-level


@pytest.mark.parametrize("g", [0.75, 3.0, 1e-30, 2.5e30])
def test_two_level_by_code_is_nvfp4_with_its_global_scale(g):
    x = data(64, 64)
    for code, axis in (("e2m1fo:e4m3fn_t16_gf32", -1), ("e2m1fo:e4m3fn_t16d0_gf32", 0)):
        d = mxj.quantize(x, code, global_scale=g)
        q = mxj.quantize(x, "nvfp4", axis=axis, global_scale=g)
        same_leaves(d, q)
        want = R.encode(x, d._dt, tensor_scale=np.float32(g))
        assert same_raw(d.codes, want.codes) and same_raw(d.scales, want.scales)
        for impl in ("auto", "xla"):  # jit, a traced global scale
            dj, qj = jax.jit(lambda x, g: (mxj.quantize(x, code, global_scale=g,
                                                        impl=impl).detach(),
                                           mxj.quantize(x, "nvfp4", axis=axis, global_scale=g,
                                                        impl=impl).detach()))(x, np.float32(g))
            same_leaves(dj, qj)
            same_leaves(dj, q)
        for dtype in WIDE:
            assert same_bits(d.dequantize(dtype), q.dequantize(dtype))
            assert same_bits(d.dequantize(dtype), R.decode(want, d._dt, dtype=np.dtype(dtype),
                                                           tensor_scale=np.float32(g)))


def test_two_level_by_code_under_vmap_grad_and_scaled_dot():
    x, w = data(4, 64), data(8, 64)
    code = "e2m1fo:e4m3fn_t16_gf32"
    # one global scale for the batch, and one per example (lax.map)
    xs = data(3, 4, 64)
    gs = np.array([0.5, 2.0, 8.0], np.float32)
    for in_axes, gv in (((0, None), np.float32(0.5)), ((0, 0), gs)):
        d = jax.jit(jax.vmap(lambda x, g: mxj.quantize(x, code, global_scale=g).detach(),
                             in_axes=in_axes))(xs, gv)
        q = jax.jit(jax.vmap(lambda x, g: mxj.quantize(x, "nvfp4", global_scale=g).detach(),
                             in_axes=in_axes))(xs, gv)
        assert type(d) is mxj.DatatypeArray and d.datatype == q.datatype
        for a, b in zip((d.codes, d.scales), (q.codes, q.scales)):
            assert same_bits(a, b)
    # the straight-through gradient, none into the global scale (as for nvfp4)
    wt = jnp.asarray(RNG.standard_normal(x.shape).astype(np.float32))
    xf = jnp.asarray(np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0))
    for name in (code, "nvfp4"):
        gx, gg = jax.jit(jax.grad(lambda x, g: jnp.sum(mxj.dequantize(
            mxj.quantize(x, name, global_scale=g)) * wt), argnums=(0, 1)))(xf, np.float32(0.5))
        assert same_bits(gx, wt) and float(gg) == 0.0
    # an MX side of scaled_dot, with its global scale
    d = mxj.quantize(xf, code, global_scale=0.5)
    q = mxj.quantize(xf, "nvfp4", global_scale=0.5)
    qw = mxj.quantize(jnp.asarray(np.nan_to_num(w)), "mxfp8_e4m3")
    assert same_bits(mxj.scaled_dot(d, qw), mxj.scaled_dot(q, qw))


# ----------------------------------------------------------------------------- errors


BAD = [
    (dict(format="e2m1fo:e4m3fn_t16_gf32"), ValueError,
     "two-level datatype e2m1fo:e4m3fn_t16_ge8m23 needs argument 'global_scale'"),
    (dict(format="e2m1fo:e4m3fn_t16_gf32", global_scale=0.5, scale_mode="rceil"), ValueError,
     "the float scale e4m3fn takes 'max'"),
    (dict(format="e2m1fo:e4m3fn_t16_gf32", global_scale=0.0), ValueError,
     "argument 'global_scale' must be a finite non-zero"),
    (dict(format="e2m1fo:e4m3fn_t16_gf32", global_scale=np.ones(2, np.float32)), ValueError,
     "argument 'global_scale' must be a scalar"),
    (dict(format="e2m1fo:e4m3fn_t16_gf32", global_scale=np.array(1, np.int32)),
     TypeError, "argument 'global_scale' must be a float32 scalar"),
    (dict(format="e4m3fn:e8m0_t32", global_scale=0.5), ValueError,
     "argument 'global_scale' is the tensor scale of a two-level datatype .*"
     "e4m3fn:e8m0_t32 has none"),
    (dict(format="e2m1fo:e4m3fn_t16", global_scale=0.5), ValueError,
     "argument 'global_scale' is the tensor scale"),
    (dict(format="mxint4", global_scale=0.5), ValueError, "int4:e8m0_t32 has none"),
    (dict(format="e4m3fn:e8m0_t32_gf32"), ValueError,
     "e4m3fn:e8m0_t32_ge8m23 needs argument 'global_scale'.* 'e4m3fn:e8m0_t32'"),
    (dict(format="e4m3fn:e8m0_t32_gf32", global_scale=float("inf")), ValueError,
     "argument 'global_scale' must be a finite non-zero"),
    (dict(format="e4m3fn:e8m0_t32", impl="fast"), ValueError, "unknown argument 'impl'"),
    (dict(format="e5m6:e8m0_t32", impl="fast"), ValueError, "unknown argument 'impl'"),
    (dict(format="e4m3fn:e8m0_t32", axis=0), ValueError, "argument 'axis' is for the MX"),
]


@pytest.mark.parametrize("kwargs,exc,message", BAD, ids=[m for *_, m in BAD])
def test_bad_combinations_are_clear_errors(kwargs, exc, message):
    with pytest.raises(exc, match=message) as e:
        mxj.quantize(np.ones((4, 64), np.float32), **kwargs)
    assert str(e.value).startswith("quantize: ")
