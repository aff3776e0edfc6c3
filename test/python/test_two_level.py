"""Two-level and hierarchical scaling (docs/semantics.md 10.3, a scale spec ending in
``_gf32``) in the datatype forms of ``mx.quantize`` / ``mx.dequantize`` (the tensor scale g
as their last operand) lowered to StableHLO and run on XLA:CPU, and in ``mxlower.jax``
(``cast(..., tensor_scale=g)``, ``quantize(..., global_scale=g)`` and ``dequantize``), bit for
bit against the oracle's ``encode`` / ``decode`` / ``cast`` with ``tensor_scale=g``; the
verifier's and the JAX API's errors.  Small shapes: every case runs in seconds."""

from __future__ import annotations

import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import reference as R
from mxlower.dialect import mx
from mxlower.testing import MxModule, Value
from test_mx_cast import WIDE, _same


#: (number, scale, roundmode, scalemode): two-level (tensor x tile) and three-level (tensor
#: x tile x subtile) datatypes, one of each kind of scale
CASES = [
    ("e4m3fn", "e8m0_t32_gf32", "even", "max"),
    ("int8", "e8m0_t16_s2o1_gf32", "even", "max"),  # mx9 under g: three levels
    ("nf4", "float32_t64_gf32", "even", "max"),  # a lookup table, a float scale
    ("e2m1fo", "e4m3fn_t16_gf32", "stochastic", "max"),  # nvfp4's, not its MX quantize
    ("e2m1fo", "e4m3fn_t16_gf32", "zero", "max"),
    ("int8", "float32_t0_gf32", "nearest", "max"),  # channels of a float scale
    ("int5", "e8m0_t16x16_s2x2o2_gf32", "stochastic", "midmax"),
]
GS = [0.3, -3.0e-5, 2.0 ** -140, -7.5e30]


def _data(rng, wide: str, shape=(32, 64)) -> tuple[np.ndarray, np.ndarray]:
    """Normal values over several binades, a NaN tile, an Inf tile, a zero tile, subnormals;
    random bits."""
    x = rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-12, 4, shape))
    x[0, 3] = np.nan
    x[2, 40] = -np.inf
    x[4, :32] = 0
    x[6, :16] = np.ldexp(1.0, -140) * np.arange(16)  # subnormals
    x = x.astype(WIDE[wide])
    rbits = rng.integers(0, 1 << 32, x.shape, dtype=np.uint64).astype(np.uint32)
    return x, rbits


def _check(got, want, what) -> None:
    assert np.asarray(got).shape == np.asarray(want).shape, what
    assert np.asarray(got).dtype == np.asarray(want).dtype, (what, np.asarray(got).dtype)
    ok = _same(got, want)
    assert ok.all(), (what, np.argwhere(~ok)[:4].tolist(), np.asarray(got)[~ok][:4],
                      np.asarray(want)[~ok][:4])


def _attrs(number, scale, roundmode=None, scalemode=None) -> str:
    out = f'number = "{number}", scale = "{scale}"'
    if roundmode is not None:
        out += f', roundmode = "{roundmode}", scalemode = "{scalemode}"'
    return out


def _rb(case, rbits):
    return rbits if case[2] == "stochastic" else None


# ----------------------------------------------------------------------------- the mx ops


@pytest.mark.parametrize("wide, g", [("f32", 0.3), ("bf16", -3.0e-5), ("f16", 2.0 ** -140),
                                     ("f32", -7.5e30)])
def test_quantize_and_dequantize_with_g_bit_exact_on_xla(wide, g):
    x, rbits = _data(np.random.default_rng(7), wide)
    m = MxModule()
    xv, rv, gv = m.arg(x), m.arg(rbits), m.arg(np.float32(g).reshape(()))
    out_t = "bf16" if wide == "f32" else "f32"
    for case in CASES:
        dt = CR.resolve(case[0], case[1])
        outs = [(s.shape, e) for s, e in _layout(dt, x.shape)]
        ops = [xv] + ([rv] if case[2] == "stochastic" else []) + [gv]
        types = ", ".join(Value("", sh, e).type for sh, e in outs)
        q = m.raw(f'{{r}}:{len(outs)} = "mx.quantize"({", ".join(o.name for o in ops)}) '
                  f'{{{_attrs(*case)}}} : ({", ".join(o.type for o in ops)}) -> ({types})',
                  x.shape, "f32")
        parts = [Value(f"{q.name}#{i}", sh, e) for i, (sh, e) in enumerate(outs)] + [gv]
        y = m.raw(f'{{r}} = "mx.dequantize"({", ".join(p.name for p in parts)}) '
                  f'{{{_attrs(case[0], case[1])}}} : ({", ".join(p.type for p in parts)}) -> '
                  f'{Value("", x.shape, out_t).type}', x.shape, out_t)
        m.ret(*parts[:-1], y)
    it = iter(m.run())
    for case in CASES:
        enc = R.encode(x, case[0], case[1], roundmode=case[2], scalemode=case[3],
                       rbits=_rb(case, rbits), tensor_scale=g)
        for what, want in zip(("codes", "scales", "zero points / offsets"),
                              [v for v in enc if v is not None]):
            _check(next(it), want, (case, g, what))
        want = R.decode(enc, case[0], case[1], dtype=WIDE[out_t], tensor_scale=g)
        _check(next(it), want, (case, g, "dequantize"))


class _Shape:
    def __init__(self, shape):
        self.shape = tuple(shape)


def _layout(dt, shape):
    """(shape holder, MLIR element type) of each result of the datatype quantize."""
    out = [(_Shape(shape), dt.number.storage)]
    s = dt.scale
    ss = s.scales_shape(tuple(shape))
    out.append((_Shape(ss), s.number.storage))
    if s.zero_point is not None:
        out.append((_Shape(ss), s.zero_point.storage))
    if s.subtile:
        out.append((_Shape(s.offsets_shape(tuple(shape))), "ui8"))
    return out


def test_builders_take_g_and_lower_bit_exact():
    """mx.quantize / mx.dequantize built by the Python builders with ``tensor_scale`` and
    ``global_scale`` (the same operand), through mxlower-decompose-mx's recipe."""
    from mxlower.bindings import jaxlib as J

    x, _ = _data(np.random.default_rng(2), "f32")
    with J.make_context(allow_unregistered=True), J.ir.Location.unknown():
        mod = J.ir.Module.parse(
            "func.func @f(%x: tensor<32x64xf32>, %g: tensor<f32>) {\n  return\n}")
        block = mod.body.operations[0].regions[0].blocks[0]
        ip = J.ir.InsertionPoint(block.operations[0])
        xa, ga = block.arguments
        q = mx.quantize(xa, number="int8", scale="e8m0_t16_s2o1_gf32", tensor_scale=ga, ip=ip)
        d = mx.dequantize(q.results[0], q.results[1], number="int8",
                          scale="e8m0_t16_s2o1_gf32", offsets=q.results[2], global_scale=ga,
                          ip=ip)
        assert mx.verify(mod.operation) == []
        p = mx.parse(d)
        assert p.tensor_scale is not None and p.offsets is not None
        assert mx.parse(q).tensor_scale is not None
        with pytest.raises(mx.MXError, match="not both"):
            mx.quantize(xa, number="int8", scale="e8m0_t16_gf32", tensor_scale=ga,
                        global_scale=ga, ip=ip)


def _verify(text: str) -> str:
    from mxlower.bindings import jaxlib as J

    with J.make_context(allow_unregistered=True):
        mod = J.ir.Module.parse(text)
        return "; ".join(msg for _, msg in mx.verify(mod.operation))


_Q3 = "(tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)"


@pytest.mark.parametrize("body, error", [
    ('%q:3 = "mx.quantize"(%x) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : '
     f'(tensor<4x64xf32>) -> {_Q3}',
     "expects 2 operands (the input, the tensor scale g) for int8:e8m0_t16_s2o1_ge8m23 with "
     "roundmode 'even', got 1"),
    ('%q:3 = "mx.quantize"(%x, %g, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : '
     f'(tensor<4x64xf32>, tensor<f32>, tensor<f32>) -> {_Q3}',
     "expects 2 operands (the input, the tensor scale g) for int8:e8m0_t16_s2o1_ge8m23 with "
     "roundmode 'even', got 3"),
    ('%q:3 = "mx.quantize"(%x, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32", '
     'roundmode = "stochastic"} : '
     f'(tensor<4x64xf32>, tensor<f32>) -> {_Q3}',
     "expects 3 operands (the input, random bits, the tensor scale g)"),
    ('%q:3 = "mx.quantize"(%x, %h) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : '
     f'(tensor<4x64xf32>, tensor<1xf32>) -> {_Q3}',
     "operand #1 (the tensor scale g of int8:e8m0_t16_s2o1_ge8m23) must be tensor<f32>, got "
     "tensor<1xf32>"),
    ('%q:2 = "mx.quantize"(%x, %g) {number = "e5m6", scale = "e8m0_t16"} : '
     '(tensor<4x64xf32>, tensor<f32>) -> (tensor<4x64xui16>, tensor<4x4xf8E8M0FNU>)',
     "e5m6:e8m0_t16 has no tensor level (a scale spec ending in '_gf32'); it takes no tensor "
     "scale g operand"),
    ('%y = "mx.dequantize"(%c, %s, %o) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : '
     '(tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>) -> tensor<4x64xf32>',
     "expects 4 operands (the codes, scales, subtile offsets, the tensor scale g) and 1 "
     "result for int8:e8m0_t16_s2o1_ge8m23, got 3 operands and 1 result"),
    ('%y = "mx.dequantize"(%c, %s, %h) {number = "int8", scale = "e8m0_t16_gf32"} : '
     '(tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<1xf32>) -> tensor<4x64xf32>',
     "operand #2 (the tensor scale g of int8:e8m0_t16_ge8m23) must be tensor<f32>, got "
     "tensor<1xf32>"),
    ('%y = "mx.dequantize"(%u, %s, %g) {number = "e5m6", scale = "e8m0_t16"} : '
     '(tensor<4x64xui16>, tensor<4x4xf8E8M0FNU>, tensor<f32>) -> tensor<4x64xf32>',
     "e5m6:e8m0_t16 has no tensor level"),
])
def test_verifier_errors(body, error):
    text = ("func.func @f(%x: tensor<4x64xf32>, %g: tensor<f32>, %h: tensor<1xf32>, "
            "%c: tensor<4x64xi8>, %s: tensor<4x4xf8E8M0FNU>, %o: tensor<4x32xui8>, "
            "%u: tensor<4x64xui16>) {\n  "
            f"{body}\n  return\n}}")
    got = _verify(text)
    assert error in got, got


# ----------------------------------------------------------------------------- mxlower.jax

#: (datatype code, roundmode, scalemode) for the JAX API
JAX_CASES = [
    ("e4m3fn:e8m0_t32_gf32", "even", "max"),
    ("int8:e8m0_t16_s2o1_gf32", "nearest", "midmax"),  # three levels
    ("nf4:float32_t64_gf32", "even", "max"),
    ("e2m1fo:e4m3fn_t16_gf32", "even", "max"),  # nvfp4's, through the general cast
    ("e2m1fo:e4m3fn_t16_gf32", "stochastic", "max"),
]


def _jax():
    import jax
    import mxlower.jax as mxj

    return jax, mxj


@pytest.mark.parametrize("wide", list(WIDE))
def test_jax_cast_and_quantize_bit_exact(wide):
    jax, mxj = _jax()
    x, rbits = _data(np.random.default_rng(11), wide, (8, 64))
    for code, rm, sm in JAX_CASES:
        rb = rbits if rm == "stochastic" else None
        for g in GS:
            kw = dict(roundmode=rm, scalemode=sm, rbits=rb)
            got = mxj.cast(x, code, tensor_scale=g, **kw)
            want = R.cast(x, code, tensor_scale=g, **kw)
            _check(np.asarray(got), want, (code, rm, g, "cast"))
            q = mxj.quantize(x, code, global_scale=g, roundmode=rm, scale_mode=sm, rbits=rb)
            enc = R.encode(x, code, tensor_scale=g, **kw)
            _check(np.asarray(q.codes).view(enc.codes.dtype) if q.codes.dtype == np.uint8
                   and enc.codes.dtype != np.uint8 else np.asarray(q.codes), enc.codes,
                   (code, rm, g, "codes"))
            _check(np.asarray(q.scales), enc.scales, (code, rm, g, "scales"))
            if enc.offsets is not None:
                _check(np.asarray(q.offsets), enc.offsets, (code, rm, g, "offsets"))
            assert np.asarray(q.global_scale) == np.float32(g)
            for out in (np.float32, WIDE["bf16"]):
                _check(np.asarray(mxj.dequantize(q, out)),
                       R.decode(enc, code, tensor_scale=g, dtype=out), (code, rm, g, "decode"))


def test_jax_two_level_under_jit_with_traced_g_and_key():
    jax, mxj = _jax()
    x, _ = _data(np.random.default_rng(12), "f32", (8, 64))
    key = jax.random.key(3)

    @jax.jit
    def f(x, g, key):
        a = mxj.cast(x, "int8:e8m0_t16_s2o1_gf32", tensor_scale=g)
        b = mxj.cast(x, "e4m3fn:e8m0_t32_gf32", roundmode="stochastic", key=key,
                     tensor_scale=g)
        q = mxj.quantize(x, "nf4:float32_t64_gf32", global_scale=g)
        return a, b, q, q.dequantize()

    g = np.float32(-3.0e-5)
    a, b, q, d = f(x, g, key)
    rb = np.asarray(jax.random.bits(key, x.shape, np.uint32))
    _check(np.asarray(a), R.cast(x, "int8:e8m0_t16_s2o1_gf32", tensor_scale=g), "a")
    _check(np.asarray(b), R.cast(x, "e4m3fn:e8m0_t32_gf32", roundmode="stochastic", rbits=rb,
                                 tensor_scale=g), "b")
    enc = R.encode(x, "nf4:float32_t64_gf32", tensor_scale=g)
    _check(np.asarray(q.codes), enc.codes, "codes")
    _check(np.asarray(d), R.decode(enc, "nf4:float32_t64_gf32", tensor_scale=g), "d")


@pytest.mark.parametrize("g_batched", [False, True])
def test_jax_two_level_under_vmap(g_batched):
    jax, mxj = _jax()
    xs = np.stack([_data(np.random.default_rng(20 + i), "f32", (8, 64))[0] for i in range(3)])
    gs = np.array([0.3, -7.5e30, 2.0 ** -140], np.float32)
    code = "int8:e8m0_t16_s2o1_gf32"

    def f(x, g):
        q = mxj.quantize(x, "e4m3fn:e8m0_t32_gf32", global_scale=g, scale_mode="midmax")
        return mxj.cast(x, code, tensor_scale=g), q.codes, q.scales, q.dequantize()

    if g_batched:
        a, c, s, d = jax.vmap(f)(xs, gs)
    else:
        a, c, s, d = jax.vmap(f, in_axes=(0, None))(xs, gs[1])
    for i in range(3):
        g = gs[i] if g_batched else gs[1]
        _check(np.asarray(a[i]), R.cast(xs[i], code, tensor_scale=g), (i, "cast"))
        enc = R.encode(xs[i], "e4m3fn:e8m0_t32_gf32", scalemode="midmax", tensor_scale=g)
        _check(np.asarray(c[i]), enc.codes, (i, "codes"))
        _check(np.asarray(s[i]), enc.scales, (i, "scales"))
        _check(np.asarray(d[i]), R.decode(enc, "e4m3fn:e8m0_t32_gf32", tensor_scale=g),
               (i, "dequantize"))


def test_xla_subnormal_x_under_a_constant_g():
    """A subnormal x divided by a g that is a constant of the jitted function: XLA folded the
    quotient's f32 -> f64 conversion so that the subnormal lane read 0 (then the integer path
    for tiny quotients took a huge one); mx_math.f64_of_f32_bits now builds every f64 from
    the bits."""
    jax, mxj = _jax()
    x = np.zeros((1, 16), np.float32)
    x[0, 5] = 7.3843e-39  # subnormal
    x[0, 9] = -2.1418e-20
    for code in ("e4m3fn:e8m0_t16_gf32", "e8m23:e8m0_t16_gf32"):
        for g in (-3e-5, 3e-5):
            got = jax.jit(lambda v: mxj.cast(v, code, tensor_scale=g, impl="xla"))(x)
            _check(np.asarray(got), R.cast(x, code, tensor_scale=g), (code, g))


def test_jax_two_level_channel_scale_under_vmap():
    """A channel tile level (``float32_t0_gf32``) keeps one scale per channel of each example;
    g shared."""
    jax, mxj = _jax()
    xs = np.stack([_data(np.random.default_rng(30 + i), "f32", (8, 64))[0] for i in range(2)])
    code = "int8:float32_t0_gf32"
    got = jax.vmap(lambda x: mxj.cast(x, code, tensor_scale=0.3))(xs)
    for i in range(2):
        _check(np.asarray(got[i]), R.cast(xs[i], code, tensor_scale=0.3), i)


def test_jax_two_level_gradients():
    """Straight-through for x; a zero cotangent for g."""
    jax, mxj = _jax()
    x = np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)
    w = np.random.default_rng(6).standard_normal((4, 64)).astype(np.float32)

    def loss(x, g):
        y = mxj.cast(x, "int8:e8m0_t16_s2o1_gf32", tensor_scale=g)
        z = mxj.quantize(x, "e4m3fn:e8m0_t32_gf32", global_scale=g).dequantize()
        return (y * w).sum() + (z * w).sum()

    gx, gg = jax.grad(loss, argnums=(0, 1))(x, np.float32(0.3))
    np.testing.assert_array_equal(np.asarray(gx), 2 * w)
    assert float(gg) == 0.0


def test_nvfp4_even_keeps_its_mx_primitive_and_others_bind_the_general_one():
    jax, mxj = _jax()
    x = np.zeros((4, 64), np.float32)
    code = "e2m1fo:e4m3fn_t16_gf32"
    even = str(jax.make_jaxpr(lambda x: mxj.quantize(x, code, global_scale=0.5).codes)(x))
    assert "mx_quantize" in even and "mx_encode" not in even
    stoch = str(jax.make_jaxpr(lambda x: mxj.quantize(
        x, code, global_scale=0.5, roundmode="zero").codes)(x))
    assert "mx_encode" in stoch and "mx_quantize" not in stoch
    cast = str(jax.make_jaxpr(lambda x: mxj.cast(x, code, tensor_scale=0.5))(x))
    assert "mx_cast_two_level" in cast


@pytest.mark.parametrize("call, exc, message", [
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32"), ValueError,
     "needs argument 'tensor_scale'.*'e4m3fn:e8m0_t32'"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32", tensor_scale=0.5), ValueError,
     "argument 'tensor_scale' is the tensor scale g of a two-level datatype"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=0.0), ValueError,
     "argument 'tensor_scale' must be a finite non-zero float32"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=float("nan")),
     ValueError, "finite non-zero"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=1e39),
     ValueError, "finite non-zero"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=np.ones(2, np.float32)),
     ValueError, "argument 'tensor_scale' must be a scalar"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=np.array(2, np.int32)),
     TypeError, "argument 'tensor_scale' must be a float32 scalar"),
    (lambda mxj, x: mxj.cast(x, "e4m3fn:e8m0_t32_gf32", tensor_scale=np.array(2.0)),
     TypeError, "float32 scalar, got float64"),
    (lambda mxj, x: mxj.quantize(x, "int8:e8m0_t16_s2o1_gf32"), ValueError,
     "needs argument 'global_scale'"),
    (lambda mxj, x: mxj.quantize(x, "int8:e8m0_t16_s2o1", global_scale=2.0), ValueError,
     "int8:e8m0_t16_s2o1 has none"),
    (lambda mxj, x: mxj.quantize(x, "int8:e8m0_t16_s2o1_gf32", global_scale=-0.0),
     ValueError, "argument 'global_scale' must be a finite non-zero"),
])
def test_jax_errors(call, exc, message):
    _, mxj = _jax()
    with pytest.raises(exc, match=message):
        call(mxj, np.ones((4, 64), np.float32))


def test_jax_array_from_vmap_dequantizes_under_vmap_only():
    jax, mxj = _jax()
    xs = np.stack([_data(np.random.default_rng(40 + i), "f32", (8, 64))[0] for i in range(2)])
    code = "e4m3fn:e8m0_t32_gf32"
    q = jax.vmap(lambda x: mxj.quantize(x, code, global_scale=0.3))(xs)
    assert q.global_scale.shape == (2,)
    d = jax.vmap(lambda a: a.dequantize())(q)
    for i in range(2):
        _check(np.asarray(d[i]), R.cast(xs[i], code, tensor_scale=0.3), i)
    with pytest.raises(ValueError, match="dequantize it under the same vmap"):
        q.dequantize()
