"""Subtile scale specs (shared micro-exponents, docs/semantics.md 10.3) and two-level /
hierarchical ``_gf32`` casts through the mx ops: ``mx.cast``, the datatype ``mx.quantize``
(codes, scales, subtile offsets) and ``mx.dequantize`` lowered to StableHLO by
mxlower.lowering.cast_math and run on XLA:CPU, bit for bit against the oracle
(mxlower.reference): 1D and 2D subtiles, every scale mode and rounding mode, int and float
elements, a narrow exponent scale, NaN / Inf / zero / subnormal tiles and subtiles, f32 / bf16
/ f16 inputs; the verifier's errors on malformed ops."""

from __future__ import annotations

import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import reference as R
from mxlower.dialect import mx
from mxlower.testing import MxModule, Value, special_blocks
from test_mx_cast import WIDE, _same


#: (number, scale, roundmode, scalemode)
CASTS = [
    ("int8", "e8m0_t16_s2o1", "even", "max"),  # mx9
    ("int5", "e8m0_t16_s2o1", "stochastic", "midmax"),  # mx6
    ("int3", "e8m0_t16_s2o1", "nearest", "rceil"),  # mx4
    ("int8", "e8m0_t16_s2o1", "half_down", "nearest"),
    ("e2m1fo", "e8m0_t32_s4o2", "zero", "max"),
    ("e2m1fo", "e8m0_t32_s4o2", "stochastic", "rceil"),
    ("e4m3fn", "e8m0_t16x16_s4x4o1", "even", "midmax"),  # 2D tiles, 2D subtiles
    ("e5m2", "e8m0_t8x32_s1x8o3", "nearest", "nearest"),
    ("int6", "e8m0_t8d0_s2o3", "even", "rceil"),  # along dimension 0
    ("e3m2fo", "e5m0_t16_s2o8", "stochastic", "max"),  # a narrow scale: E_s clamped
    ("e4m3", "e8m0_t16x16_s16x1o2", "half_down", "max"),  # columns of a 2D tile
]

#: two-level / hierarchical casts (mx.cast with g)
TWO_LEVEL = [
    ("int8", "e8m0_t16_s2o1_gf32", "even", "max"),
    ("e2m1fo", "e8m0_t32_s4o2_gf32", "stochastic", "rceil"),
    ("e2m1fo", "e4m3fn_t16_gf32", "even", "max"),  # nvfp4 with its global scale
    ("int4", "e8m0_t32_gf32", "nearest", "midmax"),
    ("int8", "float32_t0_gf32", "zero", "max"),
    ("e4m3fn", "e8m0_t16x16_s2x2o2_gf32", "half_down", "nearest"),
]


def _data(rng, wide: str) -> tuple[np.ndarray, np.ndarray]:
    """64x64: special tiles (NaN, Inf, zero, subnormal, huge), pairs spread over many binades
    (so offsets take every value and saturate), a zero tile; random bits."""
    x = special_blocks(rng, (64, 64), 1, 8, WIDE[wide]).astype(np.float32)
    pairs = np.ldexp(1.0, rng.integers(-14, 1, (12, 32))).repeat(2, axis=1)
    x[16:40] = rng.standard_normal((24, 64))  # no specials here: 2D tiles see offsets too
    x[16:28] = (x[16:28] * pairs).astype(np.float32)
    blocks = np.ldexp(1.0, rng.integers(-14, 1, (3, 16))).repeat(4, axis=0).repeat(4, axis=1)
    x[28:40] = (x[28:40] * blocks).astype(np.float32)
    x[16:32, 48:64] *= np.ldexp(1.0, -np.arange(16) % 5)  # columns over several binades
    x[40:48, 32:64] = 0
    x[48, 0:2] = 0  # a zero subtile in a non-zero tile
    x = x.astype(WIDE[wide])
    rbits = rng.integers(0, 1 << 32, x.shape, dtype=np.uint64).astype(np.uint32)
    return x, rbits


def _attrs(number, scale, roundmode=None, scalemode=None) -> str:
    out = f'number = "{number}", scale = "{scale}"'
    if roundmode is not None:
        out += f', roundmode = "{roundmode}", scalemode = "{scalemode}"'
    return out


def _cast(m: MxModule, x: Value, r: Value, g: Value | None, case) -> Value:
    ops = [x] + ([r] if case[2] == "stochastic" else []) + ([g] if g is not None else [])
    return m.raw(f'{{r}} = "mx.cast"({", ".join(o.name for o in ops)}) {{{_attrs(*case)}}} : '
                 f'({", ".join(o.type for o in ops)}) -> {x.type}', x.shape, x.elt)


def _check(got, want, what) -> None:
    assert np.asarray(got).shape == np.asarray(want).shape, what
    ok = _same(got, want)
    assert ok.all(), (what, np.argwhere(~ok)[:4].tolist(), np.asarray(got)[~ok][:4],
                      np.asarray(want)[~ok][:4])


def _rb(case, rbits):
    return rbits if case[2] == "stochastic" else None


@pytest.mark.parametrize("wide", list(WIDE))
def test_subtile_casts_bit_exact_on_xla(wide):
    x, rbits = _data(np.random.default_rng(len(wide)), wide)
    m = MxModule()
    xv, rv = m.arg(x), m.arg(rbits)
    for case in CASTS:
        m.ret(_cast(m, xv, rv, None, case))
    for case, got in zip(CASTS, m.run()):
        want = R.cast(x, case[0], case[1], roundmode=case[2], scalemode=case[3],
                      rbits=_rb(case, rbits))
        _check(got, want, case)


@pytest.mark.parametrize("wide, g", [("f32", 0.3), ("bf16", -3.0e-5), ("f16", 2.0 ** -140),
                                     ("f32", -7.5e30)])
def test_two_level_and_hierarchical_casts_bit_exact_on_xla(wide, g):
    x, rbits = _data(np.random.default_rng(3), wide)
    m = MxModule()
    xv, rv, gv = m.arg(x), m.arg(rbits), m.arg(np.float32(g).reshape(()))
    for case in TWO_LEVEL:
        m.ret(_cast(m, xv, rv, gv, case))
    for case, got in zip(TWO_LEVEL, m.run()):
        want = R.cast(x, case[0], case[1], roundmode=case[2], scalemode=case[3],
                      rbits=_rb(case, rbits), tensor_scale=g)
        _check(got, want, (case, g))


def test_quantize_gives_codes_scales_offsets_and_dequantize_their_values():
    x, rbits = _data(np.random.default_rng(9), "f32")
    m = MxModule()
    xv, rv = m.arg(x), m.arg(rbits)
    for case in CASTS:
        dt = CR.resolve(case[0], case[1])
        s = dt.scale
        outs = [(x.shape, dt.number.storage), (s.scales_shape(x.shape), s.number.storage),
                (s.offsets_shape(x.shape), "ui8")]
        ops = [xv] + ([rv] if case[2] == "stochastic" else [])
        types = ", ".join(Value("", sh, e).type for sh, e in outs)
        q = m.raw(f'{{r}}:3 = "mx.quantize"({", ".join(o.name for o in ops)}) '
                  f'{{{_attrs(*case)}}} : ({", ".join(o.type for o in ops)}) -> ({types})',
                  x.shape, "f32")
        parts = [Value(f"{q.name}#{i}", sh, e) for i, (sh, e) in enumerate(outs)]
        y = m.raw(f'{{r}} = "mx.dequantize"({", ".join(p.name for p in parts)}) '
                  f'{{{_attrs(case[0], case[1])}}} : ({", ".join(p.type for p in parts)}) -> '
                  f'{Value("", x.shape, "bf16").type}', x.shape, "bf16")
        m.ret(*parts, y)
    it = iter(m.run())
    for case in CASTS:
        enc = R.encode(x, case[0], case[1], roundmode=case[2], scalemode=case[3],
                       rbits=_rb(case, rbits))
        for what, want in (("codes", enc.codes), ("scales", enc.scales),
                           ("offsets", enc.offsets)):
            got = next(it)
            assert got.dtype == want.dtype, (case, what, got.dtype, want.dtype)
            _check(got, want, (case, what))
        s = CR.resolve(case[0], case[1]).scale  # every offset occurs, saturated ones too
        assert enc.offsets.max() == min(s.max_offset, s.number.emax - s.number.emin), case
        _check(next(it), R.decode(enc, case[0], case[1], dtype=WIDE["bf16"]),
               (case, "decode"))


def test_dequantize_of_arbitrary_offsets_and_nan_scales():
    """Offsets and scale codes an encode never gives (NaN scales, any offset < 2^D)."""
    rng = np.random.default_rng(4)
    cases = [("int8", "e8m0_t16_s2o1"), ("e4m3fn", "e8m0_t16x16_s4x4o3"),
             ("e2m1fo", "e5m0_t32_s8o2")]
    m, wants = MxModule(), []
    for number, scale in cases:
        dt = CR.resolve(number, scale)
        s, shape = dt.scale, (32, 64)
        n = dt.number
        raw = rng.integers(0, 1 << n.bits, shape)
        codes = ((raw - (1 << (n.bits - 1))).astype(n.dtype) if n.kind == "int"
                 else raw.astype(np.uint8).view(n.dtype))
        sc = rng.integers(0, 1 << s.number.bits, s.scales_shape(shape)).astype(np.uint8)
        sc = sc.view(s.number.dtype)
        off = rng.integers(0, s.max_offset + 1, s.offsets_shape(shape)).astype(np.uint8)
        args = [m.arg(codes), m.arg(sc), m.arg(off)]
        m.ret(m.raw(f'{{r}} = "mx.dequantize"({", ".join(a.name for a in args)}) '
                    f'{{{_attrs(number, scale)}}} : ({", ".join(a.type for a in args)}) -> '
                    f'{Value("", shape, "f32").type}', shape, "f32"))
        wants.append(R.decode(codes, number, scale, scales=sc, offsets=off))
    for case, got, want in zip(cases, m.run(), wants):
        _check(got, want, case)


def _verify(text: str) -> str:
    from mxlower.bindings import jaxlib as J

    with J.make_context(allow_unregistered=True):
        mod = J.ir.Module.parse(text)
        bad = mx.verify(mod.operation)
        return "; ".join(msg for _, msg in bad)


@pytest.mark.parametrize("body, error", [
    ('%c, %s = "mx.quantize"(%x) {number = "int8", scale = "e8m0_t16_s2o1"} : '
     '(tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>)',
     "expects 3 results for int8:e8m0_t16_s2o1 (result #0 (codes), result #1 (scales), "
     "result #2 (subtile offsets)), got 2"),
    ('%c, %s, %o = "mx.quantize"(%x) {number = "int8", scale = "e8m0_t16_s2o1"} : '
     '(tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x16xui8>)',
     "result #2 (subtile offsets) of int8:e8m0_t16_s2o1 must be tensor<4x32xui8>, got "
     "tensor<4x16xui8>"),
    ('%c, %s, %o = "mx.quantize"(%x) {number = "int8", scale = "e8m0_t16_s2o1"} : '
     '(tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xi8>)',
     "must be tensor<4x32xui8>, got tensor<4x32xi8>"),
    ('%y = "mx.cast"(%x) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : '
     '(tensor<4x64xf32>) -> tensor<4x64xf32>',
     "expects 2 operands (the input, the tensor scale g) and 1 result for "
     "int8:e8m0_t16_s2o1_ge8m23 with roundmode 'even', got 1 operand and 1 result"),
    ('%y = "mx.cast"(%x, %x) {number = "int8", scale = "e8m0_t16_gf32"} : '
     '(tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>',
     "operand #1 (the tensor scale g of int8:e8m0_t16_ge8m23) must be tensor<f32>, got "
     "tensor<4x64xf32>"),
    ('%y = "mx.cast"(%x) {number = "int8", scale = "e8m0_t16x16_s2x2o1"} : '
     '(tensor<4x64xf32>) -> tensor<4x64xf32>',
     "the input: scale 'e8m0_t16x16_s2x2o1': tile size 16 does not divide dimension 0 of "
     "size 4"),
])
def test_verifier_errors(body, error):
    text = (f"func.func @f(%x: tensor<4x64xf32>) {{\n  {body}\n  return\n}}")
    got = _verify(text)
    assert error in got, got


def test_subtiles_over_non_adjacent_dimensions_and_empty_tensors():
    rng = np.random.default_rng(6)
    m, wants = MxModule(), []
    for shape, number, scale in (((8, 4, 32), "e4m3fn", "e8m0_t4x16d0d2_s2x4o1"),
                                 ((8, 4, 32), "int4", "e8m0_t8d0_s4o2"),
                                 ((0, 64), "int8", "e8m0_t16_s2o1")):
        x = (rng.standard_normal(shape) * np.ldexp(1.0, rng.integers(-10, 1, shape)))
        x = x.astype(np.float32)
        xv = m.arg(x)
        m.ret(_cast(m, xv, None, None, (number, scale, "even", "midmax")))
        wants.append(R.cast(x, number, scale, scalemode="midmax"))
    for got, want in zip(m.run(), wants):
        _check(got, want, want.shape)


def test_subtile_casts_on_the_llvm_engine():
    """mx.cast with subtiles (and a lookup table under them) lowered through StableHLO to
    LLVM and run by the upstream ExecutionEngine, against the oracle."""
    from test_mx_cast import _check, _llvm, _rbits_arg

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 32)) * np.exp2(rng.integers(-3, 3, (4, 32)))).astype(
        np.float32)
    x[0, 5] = np.nan
    r = rng.integers(0, 2 ** 32, x.shape, dtype=np.uint32)
    m = MxModule()
    xv, rv = m.arg(x), _rbits_arg(m, r, True)
    cases = [("int8", "e8m0_t16_s2o1", "even", "max"),
             ("int5", "e8m0_t16_s2o1", "stochastic", "rceil"),
             ("e2m1fo", "e8m0_t32_s4o2", "nearest", "max"),
             ("nf4", "e8m0_t16_s2o1", "even", "rceil")]
    for n, s, rm, sm in cases:
        ops = [xv] + ([rv] if rm == "stochastic" else [])
        names, types = ", ".join(o.name for o in ops), ", ".join(o.type for o in ops)
        m.ret(m.raw(f'{{r}} = "mx.cast"({names}) {{number = "{n}", scale = "{s}", '
                    f'roundmode = "{rm}", scalemode = "{sm}"}} : ({types}) -> {xv.type}',
                    xv.shape, xv.elt))
    for got, (n, s, rm, sm) in zip(_llvm(m), cases):
        _check(got, R.cast(x, n, s, rm, sm, r if rm == "stochastic" else None), (n, s))
