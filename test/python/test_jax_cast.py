"""mxlower.jax.cast and mxlower.jax.sparse against the oracle (mxlower.reference.cast /
.sparse), bit for bit, on XLA:CPU under jit, vmap and grad; and their argument errors."""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mxlower.jax as mxj
from mxlower import reference
from mxlower.formats import DATATYPES
from mxlower.jax.casts import datatype_of, kept
from mxlower.numbers import datatype

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)


def data(shape, dtype=F32, seed=0, specials=True):
    """Values over a wide range with zeros, subnormals, and (in the last row) NaN and Inf."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 12, shape))
    x = x.astype(np.float32)
    flat = x.reshape(-1)
    flat[::17] = 0
    flat[5::23] = np.float32(3e-39) * rng.standard_normal(flat[5::23].shape)  # f32 subnormals
    if specials:
        flat[-3] = np.nan
        flat[-7] = np.inf
        flat[-11] = -np.inf
    return x.astype(dtype)


def same_bits(got, want):
    """Equal bit patterns; NaN equals NaN whatever its payload."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    u = np.dtype(f"u{got.dtype.itemsize}")
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(gn, wn)
    bad = (got.view(u) != want.view(u)) & ~gn
    assert not bad.any(), (f"{bad.sum()} differ, first at {np.argwhere(bad)[0]}: got "
                           f"{got[bad][:4]}, want {want[bad][:4]}")


def rbits_for(shape, seed=1):
    return np.random.default_rng(seed).integers(0, 1 << 32, size=shape, dtype=np.uint32)


# ----------------------------------------------------------------------------- bit-exact

DATATYPES_CASES = [
    # (number, scale, shape)
    ("mxfp8_e4m3", None, (4, 64)),
    ("mxfp8_e5m2", None, (4, 64)),
    ("mxfp6_e2m3", None, (4, 64)),
    ("mxfp4_e2m1", None, (4, 64)),
    ("mxint8", None, (4, 64)),
    ("nvfp4", None, (4, 64)),
    ("mxint4", None, (4, 64)),
    ("bfp16", None, (4, 64)),
    ("e5m6", "e8m0_t32", (4, 64)),
    ("e3m4", None, (4, 64)),
    ("e4m3b8fnuz", None, (4, 64)),
    ("e4m3", None, (4, 64)),
    ("e2m1fn", "e8m0_t16", (4, 64)),
    ("e3m2fo", "e8m0_t8x8", (16, 32)),
    ("e2m3fo", "e8m0_t32d0", (64, 8)),
    ("int4", "e8m0_t16", (4, 64)),
    ("int8", "float32_t0", (4, 64)),
    ("int8", "bfloat16_t0d0", (64, 4)),
    ("e4m3fn", "e8m0", (4, 64)),
    ("e2m1fo", "e4m3fn_t16", (4, 64)),
    ("uint4", "float32_uint8_t0", (4, 64)),
    ("uint8", "float32_float32_t32", (4, 64)),
    ("e8m0", None, (4, 64)),
    ("bfloat16", None, (4, 64)),
    ("e5m10b5", "e8m0_t4", (4, 64)),
    ("int16", None, (4, 64)),
]


@pytest.mark.parametrize("number,scale,shape", DATATYPES_CASES,
                         ids=[f"{n}:{s}" if s else n for n, s, _ in DATATYPES_CASES])
@pytest.mark.parametrize("roundmode", ["even", "nearest", "zero", "half_down", "stochastic"])
def test_cast_jit_matches_reference(number, scale, shape, roundmode):
    x = data(shape, seed=zlib.crc32(f"{number}:{scale}".encode()) % 1000)
    r = rbits_for(shape) if roundmode == "stochastic" else None
    f = jax.jit(lambda x, r: mxj.cast(x, number, scale, roundmode=roundmode, rbits=r))
    same_bits(f(x, r), reference.cast(x, number, scale, roundmode, "max", r))


@pytest.mark.parametrize("scalemode", ["max", "midmax", "rceil", "nearest"])
@pytest.mark.parametrize("number", ["e2m1fo", "e4m3fn", "e5m6", "int8", "e3m2fo"])
def test_cast_scale_modes(number, scalemode):
    x = data((8, 64), seed=3)
    got = jax.jit(lambda x: mxj.cast(x, number, "e8m0_t32", scalemode=scalemode))(x)
    same_bits(got, reference.cast(x, number, "e8m0_t32", "even", scalemode))


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("dt", ["mxfp8_e4m3", "e3m4", "nvfp4", "uint4:float32_uint8_t0"])
def test_cast_half_inputs(dt, dtype):
    x = data((4, 64), dtype=dtype, seed=5)
    got = jax.jit(lambda x: mxj.cast(x, dt, roundmode="nearest"))(x)
    assert got.dtype == dtype
    same_bits(got, reference.cast(x, dt, None, "nearest"))


def test_cast_eagerly_and_with_a_key():
    x = data((4, 64), seed=8)
    same_bits(mxj.cast(x, "mxfp6_e3m2"), reference.cast(x, "mxfp6_e3m2"))
    key = jax.random.key(42)
    got = jax.jit(lambda x, k: mxj.cast(x, "e2m1fo", "e8m0_t32", roundmode="stochastic",
                                        key=k))(x, key)
    r = np.asarray(jax.random.bits(key, x.shape, jnp.uint32))
    same_bits(got, reference.cast(x, "e2m1fo", "e8m0_t32", "stochastic", "max", r))
    other = mxj.cast(x, "e2m1fo", "e8m0_t32", roundmode="stochastic", key=jax.random.key(43))
    assert not np.array_equal(np.asarray(got), np.asarray(other))


def test_stochastic_rounding_is_unbiased():
    """Over many draws the mean of the stochastic cast is the input (within 5 sigma)."""
    x = np.full((64, 32), 1.3, np.float32)  # between e2m1 values 1 and 1.5 of its block
    f = jax.jit(lambda x, k: mxj.cast(x, "e2m1fo", "e8m0_t32", roundmode="stochastic", key=k))
    y = np.asarray(f(x, jax.random.key(0)), np.float64)
    # each value is 1 (p = 0.4) or 1.5 (p = 0.6)
    assert set(np.unique(y)) == {1.0, 1.5}
    sigma = 0.5 * np.sqrt(0.4 * 0.6 / y.size)
    assert abs(y.mean() - 1.3) < 5 * sigma


# ----------------------------------------------------------------------------- vmap


@pytest.mark.parametrize("number,scale", [("e3m4", "e8m0"), ("int8", "float32"),
                                          ("e2m1fo", "e8m0_t32"), ("e4m3fn", "e8m0_t0d0"),
                                          ("e3m2fo", "e8m0_t4x8"), ("e5m6", None),
                                          ("uint4", "float32_uint8")])
@pytest.mark.parametrize("roundmode", ["even", "stochastic"])
def test_cast_vmap_is_per_example(number, scale, roundmode):
    """vmap over a leading and over a middle axis: each example cast on its own (a tensor
    scale is one scale per example)."""
    xs = data((3, 8, 32), seed=11, specials=False)
    xs[1] *= 1000  # examples of very different ranges
    r = rbits_for(xs.shape) if roundmode == "stochastic" else None

    def one(x, r):
        return mxj.cast(x, number, scale, roundmode=roundmode, rbits=r)

    want = np.stack([reference.cast(xs[i], number, scale, roundmode, "max",
                                    None if r is None else r[i]) for i in range(3)])
    same_bits(jax.jit(jax.vmap(one))(xs, r), want)
    moved = np.moveaxis(xs, 0, 1)
    rm = None if r is None else np.moveaxis(r, 0, 1)
    got = jax.jit(jax.vmap(one, in_axes=1, out_axes=1))(moved, rm)
    same_bits(np.asarray(got), np.moveaxis(want, 0, 1))


def test_cast_vmap_with_keys():
    xs = data((4, 2, 32), seed=12, specials=False)
    keys = jax.random.split(jax.random.key(7), 4)
    f = jax.jit(jax.vmap(lambda x, k: mxj.cast(x, "mxfp4_e2m1", roundmode="stochastic", key=k)))
    got = np.asarray(f(xs, keys))
    for i in range(4):
        r = np.asarray(jax.random.bits(keys[i], xs[i].shape, jnp.uint32))
        same_bits(got[i], reference.cast(xs[i], "mxfp4_e2m1", None, "stochastic", "max", r))


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("dt", ["mxfp8_e4m3", "e3m4", "nvfp4"])
def test_cast_gradient_is_straight_through(dt):
    x = data((4, 64), seed=13, specials=False)
    w = data((4, 64), seed=14, specials=False)
    g = jax.jit(jax.grad(lambda x: jnp.sum(mxj.cast(x, dt) * w)))(x)
    np.testing.assert_array_equal(np.asarray(g), w)
    # forward mode too, and under vmap
    _, t = jax.jvp(lambda x: mxj.cast(x, dt), (x,), (w,))
    np.testing.assert_array_equal(np.asarray(t), w)
    gv = jax.jit(jax.vmap(jax.grad(lambda x: jnp.sum(mxj.cast(x, dt, roundmode="zero") ** 2))))(x)
    np.testing.assert_array_equal(np.asarray(gv), 2 * reference.cast(x, dt, None, "zero"))


def test_cast_gradient_bf16_and_stochastic():
    x = data((2, 32), dtype=BF16, seed=15, specials=False)
    r = rbits_for(x.shape)
    g = jax.grad(lambda x: jnp.sum(mxj.cast(x, "mxfp4_e2m1", roundmode="stochastic",
                                            rbits=r).astype(jnp.float32) * 3))(x)
    assert g.dtype == BF16
    np.testing.assert_array_equal(np.asarray(g, np.float32), 3)


# ----------------------------------------------------------------------------- sparse


def kept_oracle(x, n, m, dim):
    """Brute force: rank each run by (NaN first, larger magnitude, lower index)."""
    a = np.moveaxis(np.asarray(x, np.float64), dim, -1)
    out = np.zeros(a.shape, bool)
    for idx in np.ndindex(a.shape[:-1]):
        for start in range(0, a.shape[-1], n):
            run = a[idx][start:start + n]
            order = sorted(range(n), key=lambda i: (not np.isnan(run[i]),
                                                    -abs(run[i]) if not np.isnan(run[i]) else 0,
                                                    i))
            for i in order[:m]:
                out[idx + (start + i,)] = True
    return np.moveaxis(out, -1, dim)


def tied(shape, dtype=F32, seed=0):
    """Values with many equal magnitudes (both signs), zeros, subnormals, NaN and Inf."""
    rng = np.random.default_rng(seed)
    v = np.array([0, -0.0, 1, -1, 2, -2, 3e-39, -3e-39, np.nan, np.inf, -np.inf, 0.5],
                 np.float32)
    return rng.choice(v, size=shape).astype(dtype)


SPARSE_CASES = [((4, 64), 4, 2, -1), ((4, 64), 8, 1, 1), ((16, 6), 4, 3, 0),
                ((2, 3, 32), 2, 1, 1 - 3), ((4, 64), 32, 32, -1), ((8, 16), 16, 5, 1)]


@pytest.mark.parametrize("shape,n,m,dim", SPARSE_CASES)
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
def test_sparse_matches_reference(shape, n, m, dim, dtype):
    if shape == (2, 3, 32) or shape[dim] % n:
        shape = (2, n * 2, 32) if shape == (2, 3, 32) else shape
    f = jax.jit(lambda x: mxj.sparse(x, n, m, dim))
    for x in (data(shape, dtype, seed=21), tied(shape, dtype, seed=22)):
        same_bits(f(x), reference.sparse(x, n, m, dim))


def test_sparse_vmap_and_gradient():
    xs = tied((3, 4, 16), seed=23)
    got = jax.jit(jax.vmap(lambda x: mxj.sparse(x, 4, 2, 1), in_axes=2, out_axes=2))(xs)
    same_bits(got, reference.sparse(xs, 4, 2, 1))
    for x in (tied((4, 16), seed=24), data((4, 16), seed=25)):
        w = np.arange(1, x.size + 1, dtype=np.float32).reshape(x.shape)
        g = jax.jit(jax.grad(lambda x: jnp.sum(jnp.where(jnp.isfinite(x), mxj.sparse(x, 4, 2, 1),
                                                         0) * w)))(x)
        mask = kept_oracle(x, 4, 2, 1)
        np.testing.assert_array_equal(np.asarray(g), np.where(mask & np.isfinite(x), w, 0))


@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=["f32", "bf16", "f16"])
def test_kept_mask_against_brute_force(dtype):
    for x in (tied((6, 24), dtype, seed=26), data((6, 24), dtype, seed=27)):
        for n, m, dim in ((4, 2, 1), (3, 1, 0), (8, 8, 1), (6, 4, 0)):
            np.testing.assert_array_equal(np.asarray(kept(x, n, m, dim - 2)),
                                          kept_oracle(x, n, m, dim))
            # the oracle's result keeps exactly these values (checked where they are non-zero)
            nz = np.asarray(x, np.float32) != 0
            out = reference.sparse(x, n, m, dim)
            np.testing.assert_array_equal((np.asarray(out, np.float32) != 0) | np.isnan(
                np.asarray(out, np.float32)), kept_oracle(x, n, m, dim) & nz)


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("name", sorted(DATATYPES))
def test_canonical_codes_name_the_same_datatype(name):
    dt = datatype_of(name, None, "cast", (4, 64))
    again = datatype(dt.number.code, dt.scale.code if dt.scale else None)
    want = DATATYPES[name]
    assert again.number == want.number
    if want.scale is not None:
        assert again.scale.number == want.scale.number and again.scale.tile == want.scale.tile
        assert again.scale.normalized_dims(2) == want.scale.normalized_dims(2)


BAD_CAST = [
    (dict(x=np.arange(4, dtype=np.int32), number="e3m4"), TypeError, "dtype float32"),
    (dict(number=3), TypeError, "argument 'number'"),
    (dict(number="e3m4", scale=5), TypeError, "argument 'scale'"),
    (dict(number="e9m9"), ValueError, "e9m9"),
    (dict(number="mxfp8_e4m3", scale="e8m0_t32"), ValueError, "has its own scale"),
    (dict(number="uint4", scale="e8m0_t32"), ValueError, "asymmetric"),
    (dict(number="e3m4", scale="e8m0_t128"), ValueError, "does not divide"),
    (dict(number="e3m4", scale="e8m0_t32d2"), ValueError, "out of range"),
    (dict(number="e3m4", roundmode="up"), ValueError, "argument 'roundmode'"),
    (dict(number="e3m4", scale="e8m0_t32", scalemode="floor"), ValueError,
     "argument 'scalemode'"),
    (dict(number="nvfp4", scalemode="rceil"), ValueError, "applies to exponent scales"),
    (dict(number="int32", scale="e8m0_t32", scalemode="rceil"), ValueError,
     "is not an f32 value"),
    (dict(number="int32", scale="float32_t0"), ValueError, "wider than 24 bits"),
    (dict(number="uint32", scale="float32_uint32_t0"), ValueError, "wider than 24 bits"),
    (dict(number="e3m4", roundmode="stochastic"), ValueError, "exactly one of 'key'"),
    (dict(number="e3m4", roundmode="stochastic", key=jax.random.key(0),
          rbits=np.zeros((4, 64), np.uint32)), ValueError, "exactly one of 'key'"),
    (dict(number="e3m4", key=jax.random.key(0)), ValueError, "for roundmode='stochastic'"),
    (dict(number="e3m4", rbits=np.zeros((4, 64), np.uint32)), ValueError,
     "for roundmode='stochastic'"),
    (dict(number="e3m4", roundmode="stochastic", rbits=np.zeros((4, 64), np.int32)),
     TypeError, "uint32"),
    (dict(number="e3m4", roundmode="stochastic", rbits=np.zeros((4, 32), np.uint32)),
     ValueError, "shape of 'x'"),
    (dict(number="e3m4", roundmode="stochastic", key="seed"), TypeError, "argument 'key'"),
    (dict(number="e2m1fo", scale="e4m3fn_t16_gf32"), ValueError,
     "the two-level datatype e2m1fo:e4m3fn_t16_ge8m23 needs argument 'tensor_scale'"),
    (dict(number="e3m4", tensor_scale=0.5), ValueError,
     "argument 'tensor_scale' is the tensor scale g of a two-level datatype"),
]


@pytest.mark.parametrize("kwargs,exc,message", BAD_CAST, ids=[m for _, _, m in BAD_CAST])
def test_cast_argument_errors(kwargs, exc, message):
    kwargs = dict(kwargs)
    x = kwargs.pop("x", np.ones((4, 64), np.float32))
    number = kwargs.pop("number")
    with pytest.raises(exc, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        jax.jit(lambda x: mxj.cast(x, number, **kwargs))(x)
    assert str(e.value).startswith("cast: ")


BAD_SPARSE = [
    (dict(x=np.ones(8, np.int32)), TypeError, "dtype float32"),
    (dict(x=np.float32(1)), ValueError, "at least one dimension"),
    (dict(n=3), ValueError, "does not divide"),
    (dict(m=5), ValueError, "0 < m <= n"),
    (dict(m=0), ValueError, "0 < m <= n"),
    (dict(n=2.0), TypeError, "argument 'n'"),
    (dict(dim=2), ValueError, "out of range"),
]


@pytest.mark.parametrize("kwargs,exc,message", BAD_SPARSE, ids=[m for _, _, m in BAD_SPARSE])
def test_sparse_argument_errors(kwargs, exc, message):
    args = {"x": np.ones((4, 64), np.float32), "n": 4, "m": 2, "dim": -1, **kwargs}
    with pytest.raises(exc, match=message) as e:
        mxj.sparse(args["x"], args["n"], args["m"], args["dim"])
    assert str(e.value).startswith("sparse: ")


def test_symbolic_shapes():
    """Scaled casts need static shapes; unscaled casts and sparse (but for its dim) take
    jax.export's symbolic dimensions, one export called at several sizes."""
    from jax import export
    b, = export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 64), jnp.float32)
    for f in (lambda x: mxj.cast(x, "mxfp8_e4m3"), lambda x: mxj.quantize(x, "e5m6:e8m0_t32")):
        with pytest.raises(ValueError, match="needs a static shape"):
            export.export(jax.jit(f))(spec)
    for f, want in ((lambda x: mxj.sparse(x, 4, 2), lambda x: reference.sparse(x, 4, 2)),
                    (lambda x: mxj.cast(x, "e3m4"), lambda x: reference.cast(x, "e3m4")),
                    (lambda x: mxj.cast(x, "int4", roundmode="stochastic",
                                        rbits=jnp.full(x.shape, 1 << 31, jnp.uint32)),
                     lambda x: reference.cast(x, "int4", None, "nearest"))):
        exported = export.export(jax.jit(f))(spec)
        for n in (1, 3):
            x = data((n, 64), seed=n)
            same_bits(exported.call(x), want(x))


# ----------------------------------------------------------------------------- actual casts

ENCODE_CASES = [
    ("e5m6", "e8m0_t32", (4, 64)),
    ("e2m1fo", "e4m3fn_t16", (4, 64)),  # nvfp4 as a datatype: f4 codes
    ("e2m1fo", "e8m0_t32", (4, 64)),
    ("e3m2fo", "e8m0_t32", (4, 64)),  # f6 codes, held as uint8
    ("mxint4", None, (4, 64)),
    ("bfp16", None, (4, 64)),
    ("e4m3fn", "e8m0_t16x16", (32, 32)),
    ("int8", "float32_t0", (4, 64)),
    ("int8", "bfloat16_t0d0", (64, 4)),
    ("uint4", "float32_uint8_t16", (4, 64)),
    ("uint8", "float32_float32_t32", (4, 64)),
    ("uint8", "e4m3fn_int16_t0", (4, 64)),
    ("e4m3b8fnuz", "e8m0", (4, 64)),
    ("e5m2", None, (4, 64)),
    ("e2m1fo", None, (4, 64)),
    ("int16", None, (4, 64)),
    ("e8m0", None, (4, 64)),
    ("f8E4M3FN", None, (4, 64)),
]


def check_encoded(q, want):
    for got, ref, name in zip((q.codes, q.scales, q.zero_points), want,
                              ("codes", "scales", "zero points")):
        if ref is None:
            assert got is None, name
            continue
        got = np.asarray(got)
        f6 = ref.dtype in (np.dtype(ml_dtypes.float6_e3m2fn), np.dtype(ml_dtypes.float6_e2m3fn))
        assert got.dtype == (np.dtype(np.uint8) if f6 else ref.dtype), name  # f6: codes
        assert got.shape == ref.shape, name
        u = np.dtype(f"u{ref.dtype.itemsize}")
        np.testing.assert_array_equal(got.view(u), ref.view(u), err_msg=name)


@pytest.mark.parametrize("number,scale,shape", ENCODE_CASES,
                         ids=[f"{n}:{s}" if s else n for n, s, _ in ENCODE_CASES])
@pytest.mark.parametrize("roundmode", ["even", "stochastic", "zero"])
def test_quantize_any_datatype_matches_reference(number, scale, shape, roundmode):
    x = data(shape, seed=zlib.crc32(f"q{number}:{scale}".encode()) % 1000)
    r = rbits_for(shape) if roundmode == "stochastic" else None
    q = jax.jit(lambda x, r: mxj.quantize(x, number, scale=scale, roundmode=roundmode,
                                          rbits=r))(x, r)
    assert isinstance(q, mxj.DatatypeArray)
    want = reference.encode(x, number, scale, roundmode, "max", r)
    check_encoded(q, want)
    for dtype in (F32, BF16):
        y = jax.jit(lambda q: mxj.dequantize(q, dtype))(q)
        same_bits(y, reference.decode(want, number, scale, dtype=dtype))


@pytest.mark.parametrize("scalemode", ["floor", "midmax", "rceil", "nearest"])
def test_quantize_datatype_scale_modes_and_half_inputs(scalemode):
    for dtype in (F32, BF16, F16):
        x = data((4, 64), dtype, seed=31)
        q = jax.jit(lambda x: mxj.quantize(x, "e3m4:e8m0_t32", scale_mode=scalemode))(x)
        mode = "max" if scalemode == "floor" else scalemode
        want = reference.encode(x, "e3m4:e8m0_t32", None, "even", mode)
        check_encoded(q, want)
        same_bits(mxj.dequantize(q, dtype), reference.decode(want, "e3m4:e8m0_t32",
                                                             dtype=dtype))


@pytest.mark.parametrize("dt", ["e3m4:e8m0", "uint4:float32_uint8", "e2m1fo:e8m0_t32",
                                "int8:float32_t0d0", "e3m2fo:e8m0_t4x8"])
def test_quantize_datatype_vmap_is_per_example(dt):
    xs = data((3, 8, 32), seed=32, specials=False)
    xs[2] *= 1e4
    q = jax.jit(jax.vmap(lambda x: mxj.quantize(x, dt)))(xs)
    for i in range(3):
        want = reference.encode(xs[i], dt)
        part = jax.tree_util.tree_map(lambda a, i=i: a[i], q)
        check_encoded(part, want)
        same_bits(np.asarray(mxj.dequantize(part)), reference.decode(want, dt))
    y = jax.jit(jax.vmap(mxj.dequantize))(q)
    same_bits(np.asarray(y), np.stack([reference.cast(xs[i], dt) for i in range(3)]))


def test_quantize_datatype_gradient_and_detach():
    x = data((4, 64), seed=33, specials=False)
    w = data((4, 64), seed=34, specials=False)

    def loss(x):
        return jnp.sum(mxj.dequantize(mxj.quantize(x, "e5m6", scale="e8m0_t32")) * w)

    np.testing.assert_array_equal(np.asarray(jax.jit(jax.grad(loss))(x)), w)
    q = jax.jit(lambda x: mxj.quantize(x, "uint4:float32_uint8_t16").detach())(x)
    assert q._ste is None
    assert q.nbytes == (256 * 4 + 16 * 32 + 16 * 8) // 8
    assert "uint4:e8m23_uint8_t16" in repr(q)


def test_datatype_array_from_parts():
    x = data((4, 64), seed=35)
    e = reference.encode(x, "uint4", "float32_uint8_t16")
    q = mxj.DatatypeArray(e.codes, e.scales, e.zero_points, "uint4:float32_uint8_t16")
    same_bits(mxj.dequantize(q), reference.decode(e, "uint4", "float32_uint8_t16"))
    with pytest.raises(TypeError, match="argument 'codes' of uint4.*uint8"):
        mxj.DatatypeArray(e.codes.astype(np.int8), e.scales, e.zero_points,
                          "uint4:float32_uint8_t16")
    with pytest.raises(ValueError, match="argument 'scales' .* shape"):
        mxj.DatatypeArray(e.codes, e.scales[:, :2], e.zero_points, "uint4:float32_uint8_t16")
    with pytest.raises(ValueError, match="needs argument 'zero_points'"):
        mxj.DatatypeArray(e.codes, e.scales, None, "uint4:float32_uint8_t16")
    with pytest.raises(ValueError, match="has no zero points"):
        mxj.DatatypeArray(e.codes.astype(np.int8), e.scales, e.zero_points, "int4:float32_t16")
    # f6 codes as the oracle stores them (ml_dtypes float6) are taken as their uint8 codes
    e = reference.encode(x, "mxfp6_e3m2")
    q = mxj.DatatypeArray(e.codes, e.scales, None, "e3m2fo:e8m0_t32")
    assert q.codes.dtype == np.uint8
    same_bits(mxj.dequantize(q), reference.decode(e, "mxfp6_e3m2"))


BAD_QUANTIZE = [
    (dict(format="e5m6", scale="e8m0_t32", axis=0), "argument 'axis' is for the MX formats"),
    (dict(format="e5m6:e8m0_t32", block_size=32), "argument 'block_size'"),
    (dict(format="mxint4", global_scale=2.0), "argument 'global_scale'"),
    (dict(format="mxfp4_e2m1", roundmode="stochastic", key=jax.random.key(0)),
     "name the datatype by its codes \\('e2m1fo:e8m0_t32'"),
    (dict(format="e5m6", scale="e8m0_t32", scale_mode="bogus"), "argument 'scalemode'"),
    (dict(format="e5m6:e8m0_t32", roundmode="stochastic"), "exactly one of 'key'"),
    (dict(format="e5m6", scale="e8m0_t48"), "argument 'format' / 'scale'"),
]


@pytest.mark.parametrize("kwargs,message", BAD_QUANTIZE, ids=[m for _, m in BAD_QUANTIZE])
def test_quantize_datatype_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mxj.quantize(np.ones((4, 64), np.float32), **kwargs)


def test_sparse_then_cast_in_a_training_step():
    """A 2:4-sparse MXFP8 weight: the gradient is the dense one, masked by the kept values."""
    w = data((8, 32), seed=40, specials=False)
    x = data((4, 32), seed=41, specials=False)

    def loss(w):
        wq = mxj.cast(mxj.sparse(w, 4, 2), "mxfp8_e4m3")
        return jnp.sum((x @ wq.T) ** 2)

    val, g = jax.jit(jax.value_and_grad(loss))(w)
    wq = reference.cast(reference.sparse(w, 4, 2), "mxfp8_e4m3")
    y = x.astype(np.float64) @ wq.T.astype(np.float64)
    np.testing.assert_allclose(float(val), np.sum(y ** 2), rtol=1e-5)
    dense = 2 * y.T @ x.astype(np.float64)  # d loss / d wq, passed straight through the cast
    np.testing.assert_allclose(np.asarray(g), np.where(kept_oracle(w, 4, 2, 1), dense, 0),
                               rtol=1e-4, atol=1e-3 * np.abs(dense).max())


# ----------------------------------------------------------------------------- random datatypes


def random_datatypes(seed: int, count: int):
    """Valid (number, scale, roundmode, scalemode) draws over the whole grammar: floats of 1-8
    exponent and 0-11 mantissa bits with any suffix and some biases, ints and uints (with
    float scales and integer or float zero points), exponent and float scales, tensor,
    channel, 1D and 2D tiles."""
    from mxlower.numbers import SpecError
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        k = rng.integers(0, 10)
        if k < 6:
            ex, man = int(rng.integers(1, 9)), int(rng.integers(0, 12))
            bias = "" if rng.random() < 0.7 else f"b{int(rng.integers(0, 2 ** ex))}"
            num = f"e{ex}m{man}{bias}{rng.choice(['', 'fn', 'fnuz', 'fo'])}"
        else:
            num = f"{'int' if k < 8 else 'uint'}{int(rng.integers(2, 17))}"
        if num.startswith("uint"):
            head = (f"{rng.choice(['float32', 'bfloat16', 'e4m3fn', 'float16'])}_"
                    f"{rng.choice(['uint8', 'int16', 'float32', 'bfloat16', 'uint16'])}")
        else:
            head = str(rng.choice(["e8m0", "e8m0", "e5m0", "float32", "e4m3fn", "bfloat16",
                                   "e5m2", None]))
        tail = ["", "_t0", f"_t{2 ** int(rng.integers(1, 6))}",
                f"_t{2 ** int(rng.integers(1, 4))}x{2 ** int(rng.integers(1, 4))}"][
            int(rng.integers(0, 4))]
        scale = None if head == "None" else head + tail
        try:
            datatype(num, scale)
        except SpecError:
            continue
        rm = str(rng.choice(["even", "nearest", "zero", "stochastic"]))
        exp_scale = scale is not None and scale.split("_")[0] in ("e8m0", "e5m0")
        sm = str(rng.choice(["max", "midmax", "rceil", "nearest"])) if exp_scale else "max"
        out.append((num, scale, rm, sm))
    return out


@pytest.mark.parametrize("number,scale,roundmode,scalemode", random_datatypes(12, 40),
                         ids=lambda v: str(v))
def test_random_datatypes(number, scale, roundmode, scalemode):
    x = data((16, 64), seed=zlib.crc32(f"{number}{scale}".encode()) % 997)
    r = rbits_for(x.shape) if roundmode == "stochastic" else None
    got = jax.jit(lambda x, r: mxj.cast(x, number, scale, roundmode=roundmode,
                                        scalemode=scalemode, rbits=r))(x, r)
    same_bits(got, reference.cast(x, number, scale, roundmode, scalemode, r))
    q = jax.jit(lambda x, r: mxj.quantize(x, number, scale=scale, roundmode=roundmode,
                                          scale_mode=scalemode, rbits=r))(x, r)
    check_encoded(q, reference.encode(x, number, scale, roundmode, scalemode, r))


def test_lower_gives_plain_stablehlo():
    x = data((4, 64), seed=50)
    text = mxj.lower(lambda x: mxj.sparse(mxj.cast(x, "e3m4", "e8m0_t32"), 4, 2)
                     + mxj.dequantize(mxj.quantize(x, "uint4:float32_uint8_t16")), x)
    assert "mx." not in text and "custom_call" not in text
    assert "stablehlo." in text
