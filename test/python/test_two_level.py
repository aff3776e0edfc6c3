"""Two-level and hierarchical scaling (docs/semantics.md 10.3, a scale spec ending in
``_gf32``) in the datatype forms of ``mx.quantize`` / ``mx.dequantize`` (the tensor scale g
as their last operand) lowered to StableHLO and run on XLA:CPU, and in ``mxlower.jax``
(``cast(..., tensor_scale=g)``, ``quantize(..., global_scale=g)`` and ``dequantize``), bit for
bit against the oracle's ``encode`` / ``decode`` / ``cast`` with ``tensor_scale=g``; the
verifier's and the JAX API's errors.  Small shapes: every case runs in seconds."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import reference as R
from mxlower.dialect import mx
from mxlower.testing import MxModule, Value

WIDE = {"f32": np.dtype(np.float32), "bf16": np.dtype(ml_dtypes.bfloat16),
        "f16": np.dtype(np.float16)}

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


def _same(got, want) -> np.ndarray:
    g, w = np.asarray(got), np.asarray(want)
    same = R.bits(g) == R.bits(w)
    if g.dtype.kind == "f" or g.dtype in WIDE.values():
        with np.errstate(invalid="ignore"):
            same |= np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32))
    return same


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
