"""mxlower.jax's one array type: an MXArray is a DatatypeArray of its format's datatype.

One storage, one pytree flattening, one immutability rule, one ``nbytes`` / ``detach`` /
``dequantize``: an MXArray and a DatatypeArray built from the same codes, scales and datatype
are the same array (the same leaves and auxiliary data, bit-identical values), whichever
primitive dequantizes them; both survive ``jax.tree_util``, ``jit`` and ``vmap`` unchanged.
"""

from __future__ import annotations

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference as R
from mxlower.formats import FORMATS, block_datatype, format_of
from mxlower.jax.casts import decode_p
from mxlower.testing import bits, same_bits

RNG = np.random.default_rng(11)
WIDE = (jnp.float32, jnp.bfloat16, jnp.float16)


def data(*shape):
    x = (RNG.standard_normal(shape) * np.exp2(RNG.integers(-12, 12, size=shape))).astype(
        np.float32)
    x.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    return x


def same_values(got, want) -> None:
    """Equal bits, NaN equal to NaN whatever its payload (the reference's NaNs)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(got.astype(np.float32))
    np.testing.assert_array_equal(nan, np.isnan(want.astype(np.float32)))
    np.testing.assert_array_equal(bits(got)[~nan], bits(want)[~nan])


#: (format, axis, block size, global scale): every format, a blocked axis that is not the
#: last, a non-default block size, nvfp4 with and without its global scale
CASES = [(f, -1, None, None) for f in FORMATS] + [
    ("mxfp8_e4m3", 0, 8, None), ("mxfp6_e2m3", 0, 16, None), ("mxint8", -1, 8, None),
    ("nvfp4", -1, None, 0.75), ("nvfp4", 0, 8, 3.0)]
IDS = [f"{f}-axis{a}-k{k}-g{g}" for f, a, k, g in CASES]


def quantized(fmt, axis, k, g, x=None):
    x = data(32, 64) if x is None else x
    return x, mxj.quantize(x, fmt, axis=axis, block_size=k, global_scale=g)


def general(q) -> mxj.DatatypeArray:
    """The general array of the same parts, through its checked constructor."""
    return mxj.DatatypeArray(q.codes, q.scales, q.zero_points, q.datatype,
                             global_scale=q.global_scale)


# ----------------------------------------------------------------------------- one type


@pytest.mark.parametrize("fmt,axis,k,g", CASES, ids=IDS)
def test_an_mxarray_is_the_general_array(fmt, axis, k, g):
    x, q = quantized(fmt, axis, k, g)
    assert isinstance(q, mxj.MXArray) and isinstance(q, mxj.DatatypeArray)
    # no state of its own: the named fields are views of the general ones
    assert mxj.MXArray.__slots__ == () and not hasattr(q, "__dict__")
    assert q.elements is q.codes and q.zero_points is None
    f = FORMATS[fmt]
    want = block_datatype(f, k or f.block_size, axis - 2 if axis >= 0 else axis,
                          global_scale=g is not None)
    assert q.datatype == want.code
    assert format_of(want)[0].name == q.format
    assert (q.axis, q.block_size) == ((axis - 2 if axis >= 0 else axis), k or f.block_size)
    # one flattening: the general class's, the datatype as auxiliary data
    assert mxj.MXArray.tree_flatten is mxj.DatatypeArray.tree_flatten
    leaves, tree = jax.tree_util.tree_flatten(q)
    d = general(q)
    d_leaves, d_tree = jax.tree_util.tree_flatten(d)
    assert len(leaves) == len(d_leaves) == 2 + (g is not None)
    assert all(a is b for a, b in zip(leaves, d_leaves))
    assert tree.node_data()[1] == d_tree.node_data()[1]  # the same datatype
    assert type(d) is mxj.DatatypeArray and d.datatype == q.datatype
    assert d.nbytes == q.nbytes == (x.size * f.bits + 7) // 8 + q.scales.size + 4 * (g is not None)
    # one immutability rule, named after the class
    for field in ("codes", "datatype", "global_scale", "elements", "format"):
        with pytest.raises(AttributeError, match=f"MXArray is immutable: '{field}'"):
            setattr(q, field, None)
    with pytest.raises(AttributeError, match="DatatypeArray is immutable: 'codes'"):
        setattr(d, "codes", None)


@pytest.mark.parametrize("fmt,axis,k,g", CASES, ids=IDS)
def test_mx_and_general_arrays_of_the_same_parts_dequantize_bit_identically(fmt, axis, k, g):
    """Both dispatch on the datatype (an MX format's: the MX primitive); the general decode
    primitive, bound directly on the same parts, gives the same bits, and so does the
    reference's decode of the datatype."""
    x, q = quantized(fmt, axis, k, g)
    d = general(q)
    dt = q._dt
    enc = R.encode(x, dt, tensor_scale=None if g is None else np.float32(g))
    for out in WIDE:
        want = R.decode(enc, dt, dtype=np.dtype(out),
                        tensor_scale=None if g is None else np.float32(g))
        for impl in ("auto", "xla"):
            a = jax.jit(lambda q: q.dequantize(out, impl=impl))(q)
            b = jax.jit(lambda d: mxj.dequantize(d, out, impl=impl))(d)
            assert same_bits(a, b), (out, impl)
            same_values(a, want)
        assert same_bits(q.dequantize(out), d.dequantize(out))  # eager
        if g is None:  # one level: mx_decode computes it too, to the same bits
            c = decode_p.bind(jnp.asarray(q.codes), jnp.asarray(q.scales), number=dt.number.code,
                              scale=dt.scale.code, dtype=np.dtype(out), has_ste=False)
            assert same_bits(c, a)


def test_a_datatype_quantize_of_an_mx_datatype_is_the_mx_array():
    """quantize by the datatype's codes gives a DatatypeArray with the MXArray's leaves and
    datatype; it dequantizes, and enters scaled_dot, as the MXArray does."""
    x, w = data(8, 64), data(16, 64)
    for name, code in (("mxfp8_e4m3", "e4m3fn:e8m0_t32"), ("mxint8", "bfp16"),
                       ("mxfp4_e2m1", "e2m1fo:e8m0_t32"), ("nvfp4", "e2m1fo:e4m3fn_t16")):
        q, d = mxj.quantize(x, name), mxj.quantize(x, code)
        k = 8 if code == "bfp16" else None
        if k:
            q = mxj.quantize(x, name, block_size=k)
        assert type(d) is mxj.DatatypeArray and d.datatype == q.datatype
        assert jax.tree_util.tree_structure(d.detach()).node_data()[1] == \
            jax.tree_util.tree_structure(q).node_data()[1]
        assert same_bits(d.codes, q.elements) and same_bits(d.scales, q.scales)
        assert same_bits(d.dequantize(), q.dequantize())
        qw = mxj.quantize(w, name, block_size=k)
        assert same_bits(mxj.scaled_dot(d, qw), mxj.scaled_dot(q, qw))
    other = mxj.quantize(x, "e5m6", scale="e8m0_t32")
    with pytest.raises(TypeError, match="argument 'lhs' is an array of e5m6:e8m0_t32, which is "
                       "not an MX format's datatype"):
        mxj.scaled_dot(other, w)


# ----------------------------------------------------------------------------- round trips


ROUND_TRIP = [("mxfp8_e4m3", 0), ("mxfp6_e3m2", -1), ("nvfp4", -1), ("e5m6:e8m0_t32", None),
              ("uint4:float32_uint8_t16", None), ("e4m3fn:e8m0_t32d0", None)]


def _make(name, axis, x):
    if axis is None:
        return mxj.quantize(x, name)
    return mxj.quantize(x, name, axis=axis, global_scale=2.0 if name == "nvfp4" else None)


def _same_array(a, b) -> None:
    assert type(a) is type(b) and a.datatype == b.datatype and a.shape == b.shape
    for u, v in zip((a.codes, a.scales, a.zero_points, a.global_scale),
                    (b.codes, b.scales, b.zero_points, b.global_scale)):
        assert (u is None) == (v is None)
        if u is not None:
            assert same_bits(u, v)


@pytest.mark.parametrize("name,axis", ROUND_TRIP, ids=[n for n, _ in ROUND_TRIP])
def test_round_trips_through_tree_util_jit_copy_and_pickle(name, axis):
    x = data(32, 64)
    q = _make(name, axis, x)
    leaves, tree = jax.tree_util.tree_flatten(q)
    back = jax.tree_util.tree_unflatten(tree, leaves)
    _same_array(back, q)
    _same_array(jax.tree_util.tree_map(lambda v: v, q), q)
    through = jax.jit(lambda q: q)(q)
    _same_array(through, q)
    assert same_bits(jax.jit(lambda q: q.dequantize())(q), q.dequantize())
    for c in (copy.copy(q), copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
        _same_array(c, q)
    # a traced quantize keeps its STE source as one more leaf; detach drops it, same class
    traced = jax.jit(lambda x: _make(name, axis, x))(x)
    assert len(jax.tree_util.tree_leaves(traced)) == len(leaves) + 1
    _same_array(traced.detach(), q)
    assert len(jax.tree_util.tree_leaves(traced.detach())) == len(leaves)


@pytest.mark.parametrize("name,axis", ROUND_TRIP, ids=[n for n, _ in ROUND_TRIP])
def test_vmap_over_leading_axes_keeps_the_datatype_valid(name, axis):
    """The datatype counts tile dimensions from the end: an array made inside vmap, returned
    batched, is the whole batch's array (its dequantize is every example's)."""
    xs = data(3, 32, 64)
    batched = jax.jit(jax.vmap(lambda x: _make(name, axis, x).detach()))(xs)
    one = [_make(name, axis, xs[i]) for i in range(3)]
    assert type(batched) is type(one[0]) and batched.datatype == one[0].datatype
    assert batched.shape == (3, 32, 64)
    if isinstance(batched, mxj.MXArray):
        assert batched.blocked_axis == one[0].blocked_axis + 1
    # (a global scale made inside vmap comes out batched: one per example, used inside vmap)
    whole = batched.dequantize() if batched.global_scale is None else None
    for i in range(3):
        part = jax.tree_util.tree_map(lambda v, i=i: v[i], batched)
        _same_array(part, one[i])
        if whole is not None:
            assert same_bits(whole[i], one[i].dequantize())
    inside = jax.jit(jax.vmap(lambda q: q.dequantize(jnp.bfloat16)))(batched)
    for i in range(3):
        assert same_bits(inside[i], one[i].dequantize(jnp.bfloat16))


# ----------------------------------------------------------------------------- constructor


def test_the_general_constructor_takes_a_two_level_mx_datatype_only_with_its_scale():
    x = data(4, 64)
    q = mxj.quantize(x, "nvfp4", global_scale=0.5)
    d = mxj.DatatypeArray(q.codes, q.scales, None, "e2m1fo:e4m3fn_t16_gf32", global_scale=0.5)
    assert d.datatype == q.datatype and same_bits(d.dequantize(), q.dequantize())
    with pytest.raises(ValueError, match="needs argument 'global_scale'"):
        mxj.DatatypeArray(q.codes, q.scales, None, "e2m1fo:e4m3fn_t16_gf32")
    with pytest.raises(ValueError, match="has no tensor scale"):
        mxj.DatatypeArray(q.codes, q.scales, None, "nvfp4", global_scale=0.5)
    with pytest.raises(ValueError, match="finite non-zero"):
        mxj.DatatypeArray(q.codes, q.scales, None, "e2m1fo:e4m3fn_t16_gf32", global_scale=0.0)
    m = mxj.quantize(x, "mxfp8_e4m3")  # any two-level datatype: its tile level under g
    d = mxj.DatatypeArray(m.codes, m.scales, None, "e4m3fn:e8m0_t32_gf32", global_scale=0.5)
    assert same_bits(d.dequantize(), (m.dequantize() * np.float32(0.5)).astype(np.float32))
    with pytest.raises(ValueError, match="needs argument 'global_scale'"):
        mxj.DatatypeArray(m.codes, m.scales, None, "e4m3fn:e8m0_t32_gf32")
