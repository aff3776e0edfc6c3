"""The datatype ops (mx.cast, mx.sparse, datatype mx.quantize / mx.dequantize) lowered by
mxlower-mx-to-stablehlo and run on XLA:CPU and the LLVM engine, bit for bit against the
oracle mxlower.reference (cast, encode, decode, sparse): many number specs (floats of several
shapes, biases and kinds, exponent types, int/uint), every scale kind (tensor, channel, 1D and
2D tiles), every scale mode, float scales, integer and float zero points, all four rounding
modes (stochastic with given random bits), NaN/Inf/zero/subnormal tiles, and the seven OCP
formats expressed as datatypes against the named formats.  A cast to an MX format's datatype
takes the MX recipe: the text of the format's quantize + dequantize, and the bits the general
recipe (mxlower.lowering.cast_math) gives, on the formats' edges."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from mxlower import cast_reference as CR
from mxlower import formats
from mxlower import reference as R
from mxlower.bindings import collect_ops
from mxlower.bindings import jaxlib as J
from mxlower.dialect import mx
from mxlower.execution import xla
from mxlower.execution.run import run_module
from mxlower.formats import FORMATS
from mxlower.lowering import cast_math
from mxlower.numbers import datatype
from mxlower.pipeline.manager import run_pipeline
from mxlower.testing import MxModule, Value, special_blocks, tensor_type

BF16 = np.dtype(ml_dtypes.bfloat16)
WIDE = {"f32": np.dtype(np.float32), "bf16": BF16, "f16": np.dtype(np.float16)}
PIPE = "builtin.module(mxlower-mx-to-stablehlo)"

#: (number, scale, roundmode, scalemode): a sweep of the model
CASTS = [
    # floats of several shapes, biases and kinds with exponent scales, every scale mode
    ("e5m6", "e8m0_t32", "even", "max"),
    ("e5m6", "e8m0_t32", "nearest", "midmax"),
    ("e4m3", "e8m0_t16", "zero", "rceil"),
    ("e3m4", "e8m0_t32", "even", "nearest"),
    ("e2m1fo", "e8m0_t32", "stochastic", "midmax"),
    ("e4m3fn", "e8m0_t8x32", "even", "max"),  # 2D tiles
    ("e2m3fo", "e8m0_t32x32", "stochastic", "rceil"),
    ("e3m2fo", "e8m0_t8d0", "nearest", "nearest"),  # 1D tiles along dimension 0
    ("e6m9b40", "e5m0_t16", "even", "max"),  # custom bias, a narrow exponent scale
    ("e4m3b8fnuz", "e8m0_t0", "zero", "max"),  # channels
    ("e5m2", "e8m0", "even", "rceil"),  # one tensor scale
    ("e2m1fo", "e8m0_t32", "half_down", "max"),  # ties toward zero
    ("int8", "e8m0_t16", "half_down", "midmax"),
    ("e3m4", "float16_t0", "half_down", "max"),
    # unscaled
    ("e4m3b8fnuz", None, "even", "max"),
    ("e5m2b16fnuz", None, "stochastic", "max"),
    ("e8m7", None, "zero", "max"),
    ("e3m4fn", None, "nearest", "max"),
    ("e8m0", None, "even", "max"),
    ("e5m0", None, "half_down", "max"),
    ("e5m0", None, "stochastic", "max"),
    ("int8", None, "even", "max"),
    ("uint6", None, "nearest", "max"),
    # integers: fixed point with exponent scales, integers with float scales
    ("int8", "e8m0_t32", "even", "max"),
    ("int4", "e8m0_t32", "stochastic", "midmax"),
    ("int8", "float32_t0", "even", "max"),
    ("int6", "bfloat16_t16x16", "zero", "max"),
    # float scales
    ("e2m1fo", "e4m3fn_t16", "even", "max"),
    ("e4m3fn", "bfloat16_t0d0", "nearest", "max"),
    ("e5m6", "float16", "stochastic", "max"),
    ("e7m20b100", "float32_t16", "stochastic", "max"),  # x / s may be an f32 subnormal
    # zero points
    ("uint4", "float32_uint8_t16", "even", "max"),
    ("uint8", "bfloat16_e5m10_t0", "stochastic", "max"),
    ("uint8", "float32_int16_t32", "zero", "max"),
    ("uint3", "bfloat16_bfloat16_t8x8", "nearest", "max"),
]


def _attrs(number, scale, roundmode, scalemode) -> str:
    out = f'number = "{number}"'
    if scale is not None:
        out += f', scale = "{scale}"'
    return out + f', roundmode = "{roundmode}", scalemode = "{scalemode}"'


def _cast(m: MxModule, x: Value, r: Value | None, case) -> Value:
    ops = [x] + ([r] if case[2] == "stochastic" else [])
    return m.raw(f'{{r}} = "mx.cast"({", ".join(o.name for o in ops)}) {{{_attrs(*case)}}} : '
                 f'({", ".join(o.type for o in ops)}) -> {x.type}', x.shape, x.elt)


def _storage(spec) -> str:
    return spec.storage


def _quantize(m: MxModule, x: Value, r: Value | None, case) -> list[Value]:
    dt = CR.resolve(case[0], case[1])
    outs = [(x.shape, _storage(dt.number))]
    if dt.scale is not None:
        ss = dt.scale.scales_shape(x.shape)
        outs.append((ss, _storage(dt.scale.number)))
        if dt.scale.zero_point is not None:
            outs.append((ss, _storage(dt.scale.zero_point)))
    ops = [x] + ([r] if case[2] == "stochastic" else [])
    types = ", ".join(Value("", s, e).type for s, e in outs)
    v = m.raw(f'{{r}}:{len(outs)} = "mx.quantize"({", ".join(o.name for o in ops)}) '
              f'{{{_attrs(*case)}}} : ({", ".join(o.type for o in ops)}) -> ({types})',
              x.shape, "f32")
    return [Value(f"{v.name}#{i}", s, e) for i, (s, e) in enumerate(outs)]


def _dequantize(m: MxModule, parts: list[Value], case, out: str) -> Value:
    attrs = f'number = "{case[0]}"' + (f', scale = "{case[1]}"' if case[1] else "")
    return m.raw(f'{{r}} = "mx.dequantize"({", ".join(p.name for p in parts)}) {{{attrs}}} : '
                 f'({", ".join(p.type for p in parts)}) -> '
                 f'{Value("", parts[0].shape, out).type}', parts[0].shape, out)


def _same(got, want) -> np.ndarray:
    """Element-wise: the same bits, or both NaN (float results)."""
    g, w = np.asarray(got), np.asarray(want)
    same = R.bits(g) == R.bits(w)
    if g.dtype.kind == "f" or g.dtype in WIDE.values():
        with np.errstate(invalid="ignore"):
            same |= np.isnan(g.astype(np.float32)) & np.isnan(w.astype(np.float32))
    return same


def _check(got, want, what) -> None:
    ok = _same(got, want)
    assert ok.all(), (what, np.argwhere(~ok)[:4].tolist(), np.asarray(got)[~ok][:4],
                      np.asarray(want)[~ok][:4])


def _data(rng, wide: str) -> tuple[np.ndarray, np.ndarray]:
    """A 64x64 tensor whose 32-value rows and 8x32 / 32x32 tiles meet NaN, Inf, zero,
    subnormal, huge and ordinary values; and random bits."""
    x = special_blocks(rng, (64, 64), 1, 8, WIDE[wide])
    x[40:48, 32:64] = 0  # a zero tile in every tiling
    rbits = rng.integers(0, 1 << 32, x.shape, dtype=np.uint64).astype(np.uint32)
    rbits[0, :8] = [0, 1 << 31, (1 << 32) - 1, 1, 7, 1 << 20, 3 << 30, 12345]
    return x, rbits


def _reference_cast(x, rbits, case):
    number, scale, rm, sm = case
    return R.cast(x, number, scale, roundmode=rm, scalemode=sm,
                  rbits=rbits if rm == "stochastic" else None)


def _rbits_arg(m: MxModule, rbits: np.ndarray, llvm: bool) -> Value:
    """The random bits as an argument: ui32, or for the LLVM engine (whose function
    boundaries take signless integers only) i32 bitcast to ui32 inside."""
    if not llvm:
        return m.arg(rbits)
    a = m.arg(rbits.view(np.int32))
    return m.raw(f"{{r}} = stablehlo.bitcast_convert {a.name} : ({a.type}) -> "
                 f"{Value('', a.shape, 'ui32').type}", a.shape, "ui32")


def _returnable(m: MxModule, v: Value, llvm: bool) -> Value:
    """``v``, or for the LLVM engine an unsigned result bitcast to its signless type."""
    if not (llvm and v.elt.startswith("ui")):
        return v
    t = v.elt[1:]
    return m.raw(f"{{r}} = stablehlo.bitcast_convert {v.name} : ({v.type}) -> "
                 f"{Value('', v.shape, t).type}", v.shape, t)


def _llvm(m: MxModule) -> list[np.ndarray]:
    return run_module(m.text(), m.inputs, pipeline=PIPE, backend="llvm")


def _cast_module(x, rbits, llvm: bool = False):
    m = MxModule()
    xv, rv = m.arg(x), _rbits_arg(m, rbits, llvm)
    for case in CASTS:
        m.ret(_cast(m, xv, rv, case))
    return m


@pytest.mark.parametrize("wide", list(WIDE))
def test_cast_bit_exact_on_xla(wide):
    x, rbits = _data(np.random.default_rng(len(wide)), wide)
    got = _cast_module(x, rbits).run()
    for case, g in zip(CASTS, got):
        _check(g, _reference_cast(x, rbits, case), case)


def test_cast_bit_exact_on_the_llvm_engine():
    x, rbits = _data(np.random.default_rng(7), "bf16")
    got = _llvm(_cast_module(x, rbits, llvm=True))
    for case, g in zip(CASTS, got):
        _check(g, _reference_cast(x, rbits, case), case)


#: actual casts checked code for code (every scale kind, zero points, int and narrow storage)
ACTUAL = [c for c in CASTS if c[1] is not None or c[0] in ("e4m3b8fnuz", "int8", "uint6")]


def _actual_module(x, rbits, out: str, llvm: bool = False):
    m = MxModule()
    xv, rv = m.arg(x), _rbits_arg(m, rbits, llvm)
    for case in ACTUAL:
        parts = _quantize(m, xv, rv, case)
        m.ret(*[_returnable(m, p, llvm) for p in parts], _dequantize(m, parts, case, out))
    return m


def _check_actual(x, rbits, got, out: str) -> None:
    it = iter(got)
    for case in ACTUAL:
        number, scale, rm, sm = case
        enc = R.encode(x, number, scale, roundmode=rm, scalemode=sm,
                       rbits=rbits if rm == "stochastic" else None)
        want = [enc.codes] + [a for a in enc[1:] if a is not None]
        for i, w in enumerate(want):
            g = next(it)
            if g.dtype.kind == "i" and w.dtype.kind == "u":  # the LLVM engine's signless view
                g = g.view(w.dtype)
            assert g.dtype == w.dtype and g.shape == w.shape, (case, i, g.dtype, w.dtype)
            _check(g, w, (case, ("codes", "scales", "zero points")[i]))
        _check(next(it), R.decode(enc, number, scale, dtype=WIDE[out]), (case, "decode"))


@pytest.mark.parametrize("wide, out, backend", [("f32", "bf16", "xla"), ("f16", "f32", "xla"),
                                                ("bf16", "f16", "llvm")])
def test_quantize_and_dequantize_give_encode_and_decode(wide, out, backend):
    x, rbits = _data(np.random.default_rng(11), wide)
    m = _actual_module(x, rbits, out, llvm=backend == "llvm")
    got = m.run() if backend == "xla" else _llvm(m)
    _check_actual(x, rbits, got, out)


def _random_codes(rng, spec, shape) -> np.ndarray:
    """Every code pattern of ``spec`` may occur (NaN and Inf codes included)."""
    raw = rng.integers(0, 1 << spec.bits, shape, dtype=np.int64)
    if spec.kind == "int":
        raw = raw - (1 << (spec.bits - 1))
        return raw.astype(spec.dtype)
    if spec.kind == "uint":
        return raw.astype(spec.dtype)
    return raw.astype(np.dtype(f"u{spec.dtype.itemsize}")).view(spec.dtype)


def test_dequantize_of_arbitrary_codes():
    """Codes quantize never produces (NaN codes, -128 of int8, NaN scales, large zero points)
    decode as the oracle decodes them."""
    rng = np.random.default_rng(5)
    cases = [c for c in ACTUAL if c[0] not in ("e4m3b8fnuz",)] + [("e5m6", "e8m0_t32", "", "")]
    m, wants = MxModule(), []
    for i, case in enumerate(cases):
        dt = datatype(case[0], case[1])
        shape = (64, 64)
        parts = [_random_codes(rng, dt.number, shape)]
        if dt.scale is not None:
            ss = dt.scale.scales_shape(shape)
            sc = _random_codes(rng, dt.scale.number, ss)
            if dt.scale.power_of_two:  # keep most scales sensible, some NaN
                sc = (rng.integers(100, 150, ss).astype(np.uint8)).view(sc.dtype) \
                    if sc.dtype.itemsize == 1 and dt.scale.number.bits == 8 else sc
            parts.append(sc)
            if dt.scale.zero_point is not None:
                parts.append(_random_codes(rng, dt.scale.zero_point, ss))
        out = list(WIDE)[i % 3]
        vals = [m.arg(p) for p in parts]
        m.ret(_dequantize(m, vals, case, out))
        wants.append((case, R.decode(parts[0], case[0], case[1],
                                     scales=parts[1] if len(parts) > 1 else None,
                                     zero_points=parts[2] if len(parts) > 2 else None,
                                     dtype=WIDE[out])))
    for g, (case, w) in zip(m.run(), wants):
        _check(g, w, case)


def _named_codes(name: str) -> tuple[str, str]:
    f = FORMATS[name]
    elt = {"f8E4M3FN": "e4m3fn", "f8E5M2": "e5m2", "f6E3M2FN": "e3m2fo", "f6E2M3FN": "e2m3fo",
           "f4E2M1FN": "e2m1fo", "i8": "int8"}[f.element]
    return elt, ("e4m3fn" if f.is_nvfp4 else "e8m0") + f"_t{f.block_size}"


def test_ocp_formats_as_datatypes_give_the_named_bits():
    """Every section 1 format, through the ops: the named quantize / dequantize and the
    datatype forms (by name and as codes such as e2m1fo + e8m0_t32) give the same bits, for
    each scale mode (floor = max); the input types rotate over the formats."""
    rng = np.random.default_rng(3)
    m, checks = MxModule(), []
    for i, (name, f) in enumerate(FORMATS.items()):
        wide = list(WIDE)[i % 3]  # every input type over the formats (test time)
        x = special_blocks(rng, (24, 64), 1, f.block_size, WIDE[wide])
        xv = m.arg(x)
        modes = [None] if f.is_nvfp4 else ["floor", "rceil", "nearest"]
        for mode in modes:
            q, s = m.quantize(xv, name, scale_mode=mode)
            d = m.dequantize(q, s, name, wide)
            sm = "max" if mode in (None, "floor") else mode
            named = [q, s, d]
            for number, scale in ((name, None), _named_codes(name)):
                case = (number, scale, "even", sm)
                parts = _quantize(m, xv, None, case)
                named += [*parts, _dequantize(m, parts, case, wide),
                          _cast(m, xv, None, case)]
            m.ret(*named)
            checks.append((name, wide, mode))
    got = iter(m.run())
    for what in checks:
        q, s, d = next(got), next(got), next(got)
        for _ in range(2):
            q2, s2, d2, c2 = next(got), next(got), next(got), next(got)
            _check(q2, q, (what, "codes"))
            _check(s2, s, (what, "scales"))
            _check(d2, d, (what, "dequantize"))
            _check(c2, d, (what, "cast"))


def test_zero_point_codes_of_quotients_beyond_int64():
    """uint data whose quotient v / s exceeds 2^63 (an f16 scale saturated at 65504) clamps to
    2^K - 1 as the contract says (expected values computed by hand, and the oracle's)."""
    x = np.zeros((2, 8), np.float32)
    x[0, 0] = 1.0e30
    x[1, :] = [-3.0e30, 0, 1, 2, 3, 4, 5, 6]
    m = MxModule()
    xv = m.arg(x)
    case = ("uint8", "float16_e5m10_t0", "even", "max")
    parts = _quantize(m, xv, None, case)
    m.ret(*parts)
    codes, scales, zps = m.run()
    assert scales.tolist() == [[65504.0], [65504.0]]  # 1e30 / 255 saturates in f16
    assert zps.tolist() == [[0.0], [-65504.0]]  # vmin rounded to f16, saturating
    assert codes[0].tolist() == [255] + [0] * 7
    # (x - z) / s: 1e30 -> 255; -3e30 + 65504 -> negative -> 0; small values -> 1 (65504 / s)
    assert codes[1].tolist() == [0] + [1] * 7
    want = R.encode(x, "uint8", "float16_e5m10_t0")
    assert [codes.tolist(), scales.tolist(), zps.tolist()] == [
        want.codes.tolist(), want.scales.tolist(), want.zero_points.tolist()]


def test_2d_tiles_commute_with_transposition():
    """A 32x32-tiled weight and its transpose cast to transposed values (no requantization)."""
    rng = np.random.default_rng(9)
    w = (rng.standard_normal((64, 96)) * 2.0 ** rng.integers(-20, 20, (64, 96))).astype(
        np.float32)
    m = MxModule()
    a, b = m.arg(w), m.arg(np.ascontiguousarray(w.T))
    case = ("e4m3fn", "e8m0_t32x32", "even", "max")
    m.ret(_cast(m, a, None, case), _cast(m, b, None, case))
    g, gt = m.run()
    _check(gt, g.T, "transpose")
    _check(g, R.cast(w, "e4m3fn", "e8m0_t32x32"), "reference")


SPARSE = [(4, 2, 1), (2, 1, 0), (8, 3, -1), (4, 4, 1), (16, 1, 0)]


@pytest.mark.parametrize("wide", list(WIDE))
def test_sparse_bit_exact(wide):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 64)).astype(WIDE[wide])
    x[0, :8] = [1, -1, 1, np.nan, 2, -2, 2, 2]  # ties and NaN
    x[1, :8] = [0, -0.0, 0, 0, np.inf, np.nan, -np.inf, np.nan]
    x[2:6, 3] = -0.0
    x[8:10] = np.round(x[8:10])  # many equal magnitudes
    m = MxModule()
    xv = m.arg(x)
    for n, k, dim in SPARSE:
        m.ret(m.raw(f'{{r}} = "mx.sparse"({xv.name}) {{n = {n} : i64, m = {k} : i64, dim = '
                    f'{dim} : i64}} : ({xv.type}) -> {xv.type}', x.shape, xv.elt))
    runs = [m.run()]
    if wide == "f32":
        runs.append(_llvm(m))
    for got in runs:
        for (n, k, dim), g in zip(SPARSE, got):
            _check(g, R.sparse(x, n, k, dim), (n, k, dim))


def test_unscaled_cast_of_a_dynamic_shape():
    """Unscaled casts are element-wise and take dynamic dimensions (refined at run time)."""
    x = (np.random.default_rng(4).standard_normal((3, 64)) * 100).astype(np.float32)
    text = ('func.func @main(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {\n'
            '  %y = "mx.cast"(%x) {number = "e4m3b8fnuz", roundmode = "nearest"} : '
            '(tensor<?x64xf32>) -> tensor<?x64xf32>\n  return %y : tensor<?x64xf32>\n}\n')
    for backend in ("xla", "llvm"):
        (got,) = run_module(text, [x], pipeline=PIPE, backend=backend)
        _check(got, R.cast(x, "e4m3b8fnuz", roundmode="nearest"), backend)


def test_float_scale_quotients_below_f32_normals():
    """x / s below 2^-126 (an f32 subnormal, which XLA:CPU flushes) still decides a code when
    the element spec's spacing is finer than 2^-93: e7m20b100 (spacing 2^-119) with a float32
    scale of about 2^73 and stochastic rounding with large random bits rounds 2^-127 up."""
    tile = np.float32([2.0 ** 100, 2.0 ** -54, -(2.0 ** -54), 3 * 2.0 ** -56, 2.0 ** -60,
                       5 * 2.0 ** -58, -(2.0 ** -57), 2.0 ** -49, 0, 1, 2.0 ** -30, 7 * 2.0 ** -59,
                       2.0 ** -52, -(3 * 2.0 ** -55), 2.0 ** -53, 2.0 ** -56])
    x = np.stack([tile, tile * np.float32(2.0 ** 20)])
    rbits = np.full(x.shape, (1 << 32) - 1, np.uint32)
    rbits[:, ::3] = 1 << 31
    m = MxModule()
    xv, rv = m.arg(x), m.arg(rbits)
    cases = [("e7m20b100", "float32_t16", "stochastic", "max"),
             ("e7m20b100", "float32_t16", "nearest", "max")]
    for case in cases:
        m.ret(_cast(m, xv, rv, case))
    got = m.run()
    for case, g in zip(cases, got):
        want = _reference_cast(x, rbits, case)
        _check(g, want, case)
    assert (got[0][0, 1:8] != 0).any()  # some quotient below 2^-126 rounded up to a code


def test_sub_byte_codes_through_expand_narrow_floats():
    """A datatype quantize with f4 codes builds them by a ui4 -> f4E2M1FN bitcast;
    mxlower-expand-narrow-floats (every narrow type expanded, as for backends without f4)
    must take it, and give the oracle's codes and values as one-per-ui8 codes."""
    text = """
func.func @main(%x: tensor<2x64xf32>) -> (tensor<2x64xf4E2M1FN>, tensor<2x2xf8E8M0FNU>, tensor<2x64xf32>) {
  %c, %s = "mx.quantize"(%x) {number = "e2m1fo", scale = "e8m0_t32"} : (tensor<2x64xf32>) -> (tensor<2x64xf4E2M1FN>, tensor<2x2xf8E8M0FNU>)
  %d = "mx.dequantize"(%c, %s) {number = "e2m1fo", scale = "e8m0_t32"} : (tensor<2x64xf4E2M1FN>, tensor<2x2xf8E8M0FNU>) -> tensor<2x64xf32>
  return %c, %s, %d : tensor<2x64xf4E2M1FN>, tensor<2x2xf8E8M0FNU>, tensor<2x64xf32>
}
"""
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        run_pipeline(m, "builtin.module(mxlower-mx-to-stablehlo, mxlower-expand-narrow-floats)")
        lowered = str(m)
    assert "f4E2M1FN" not in lowered and "f8E8M0FNU" not in lowered
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 64)) * 2.0 ** rng.integers(-8, 8, (2, 64))).astype(np.float32)
    codes, scales, values = xla.run(lowered, x)
    want = R.encode(x, "e2m1fo", "e8m0_t32")
    assert codes.tolist() == want.codes.view(np.uint8).tolist()
    assert scales.tolist() == want.scales.view(np.uint8).tolist()
    assert np.array_equal(values, R.cast(x, "e2m1fo", "e8m0_t32"))


def test_two_level_nvfp4_datatype_runs_as_nvfp4_with_its_global_scale():
    """The two-level datatype e2m1fo:e4m3fn_t16_gf32 with a global scale operand, lowered and
    run on XLA:CPU, against the oracle's encode / decode with tensor_scale (and the named
    nvfp4 with the same global scale, in the same module): bit for bit, for the input types,
    subnormal and overflowing quotients x / g included."""
    rng = np.random.default_rng(21)
    m, checks = MxModule(), []
    for wide, g in (("f32", 0.0123), ("bf16", 2.0 ** -140), ("f16", -3.5)):
        x = special_blocks(rng, (24, 64), 1, 16, WIDE[wide])
        xv, gv = m.arg(x), m.arg(np.array(g, np.float32))
        name, scale = "e2m1fo", "e4m3fn_t16_gf32"
        types = "tensor<24x64xf4E2M1FN>, tensor<24x4xf8E4M3FN>"
        q = m.raw(f'{{r}}:2 = "mx.quantize"({xv.name}, {gv.name}) {{number = "{name}", scale '
                  f'= "{scale}"}} : ({xv.type}, {gv.type}) -> ({types})', x.shape, "f32")
        c, s = Value(f"{q.name}#0", x.shape, "f4E2M1FN"), Value(f"{q.name}#1", (24, 4),
                                                                "f8E4M3FN")
        d = m.raw(f'{{r}} = "mx.dequantize"({c.name}, {s.name}, {gv.name}) {{number = '
                  f'"{name}", scale = "{scale}"}} : ({c.type}, {s.type}, {gv.type}) -> '
                  f'{Value("", x.shape, wide).type}', x.shape, wide)
        nq, ns = m.quantize(xv, "nvfp4", scale_mode=None, global_scale=gv)
        m.ret(c, s, d, nq, ns)
        checks.append((x, g, wide))
    got = iter(m.run())
    for x, g, wide in checks:
        c, s, d, nq, ns = (next(got) for _ in range(5))
        enc = R.encode(x, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=g)
        _check(c, enc.codes, (wide, g, "codes"))
        _check(s, enc.scales, (wide, g, "scales"))
        _check(d, R.decode(enc, "e2m1fo", "e4m3fn_t16_gf32", tensor_scale=g,
                           dtype=WIDE[wide]), (wide, g, "values"))
        _check(nq, c, (wide, g, "named codes"))
        _check(ns, s, (wide, g, "named scales"))


@pytest.mark.parametrize("elt,sshape,named,datatype", [
    ("f8E4M3FN", "2x64", ('format = "mxfp8_e4m3", block_size = 32 : i64, axis = 0 : i64',
                          ', scale_mode = "rceil"'),
     ('number = "e4m3fn", scale = "e8m0_t32d0"', ', scalemode = "rceil"')),
    ("i8", "64x8", ('format = "mxint8", block_size = 8 : i64, axis = 1 : i64', ""),
     ('number = "bfp16"', "")),
])
def test_an_mx_datatype_lowers_as_its_format(elt, sshape, named, datatype):
    """One vocabulary: the datatype spelling of an MX format's quantize / dequantize lowers to
    the same StableHLO as the named spelling (the format's recipe), also under
    mxlower-decompose-mx's scale-mode override (which applies to MX formats' quantize ops in
    either spelling)."""
    override = "builtin.module(mxlower-verify-mx, mxlower-decompose-mx{scale-mode=nearest})"
    out = {PIPE: [], override: []}
    for pipe in out:
        for attrs, mode in (named, datatype):
            q = f"tensor<64x64x{elt}>, tensor<{sshape}xf8E8M0FNU>"
            text = (f"func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {{\n"
                    f'  %c, %s = "mx.quantize"(%x) {{{attrs}{mode}}} : (tensor<64x64xf32>) -> '
                    f"({q})\n"
                    f'  %d = "mx.dequantize"(%c, %s) {{{attrs}}} : ({q}) -> '
                    f"tensor<64x64xf32>\n"
                    f"  return %d : tensor<64x64xf32>\n}}\n")
            with J.make_context(allow_unregistered=True):
                m = J.ir.Module.parse(text)
                run_pipeline(m, pipe)
                out[pipe].append(str(m))
    for pipe, (a, b) in out.items():
        assert "mx." not in a and a == b, pipe
    assert out[PIPE][0] != out[override][0]  # the override changed the scale rule


# ----------------------------------------------------------------------------- an MX format's cast


def _lower(text: str, pipe: str) -> str:
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        run_pipeline(m, pipe)
        return str(m)


def _general_recipe(text: str) -> str:
    """``text`` with every mx op lowered by the general datatype recipe (cast_math), as
    mxlower-decompose-mx lowered every mx.cast before an MX format's cast took the MX one."""
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        for o in collect_ops(m.operation, mx.is_mx_op):
            with o.location:
                cast_math.lower_op(mx.parse(o))
        return str(m)


@pytest.mark.parametrize("wide, shape, cast, named", [
    ("bf16", (4, 64), 'number = "e3m2fo", scale = "e8m0_t32", scalemode = "rceil"',
     ("mxfp6_e3m2", 32, 1, "rceil")),
    ("f16", (32, 8), 'number = "e2m1fo", scale = "e4m3fn_t16d0"', ("nvfp4", 16, 0, None)),
    ("f32", (2, 16, 3), 'number = "int8", scale = "e8m0_t8d1", scalemode = "nearest"',
     ("mxint8", 8, 1, "nearest")),
    ("f32", (4, 128), 'number = "mxfp4_e2m1"', ("mxfp4_e2m1", 32, 1, "floor")),
])
def test_an_mx_datatype_cast_is_its_format_quantize_and_dequantize(wide, shape, cast, named):
    """One recipe per format: mxlower-decompose-mx lowers an mx.cast to an MX format's
    datatype to exactly the text of the format's named quantize followed by its dequantize
    to the input's type, with the narrow values between them (which never leave the cast)
    expanded as mxlower-expand-narrow-floats expands them -- not to the general recipe's
    text -- and no narrow float type remains (f6 included, which XLA:CPU lacks)."""
    name, k, axis, mode = named
    fmt = FORMATS[name]
    sshape = list(shape)
    sshape[axis] //= k
    t = tensor_type(shape, wide)
    q = f"{tensor_type(shape, fmt.element)}, {tensor_type(sshape, fmt.scale)}"
    attrs = f'format = "{name}", block_size = {k} : i64, axis = {axis} : i64'
    mode = f', scale_mode = "{mode}"' if mode else ""
    cast_text = (f"func.func @main(%x: {t}) -> {t} {{\n"
                 f'  %y = "mx.cast"(%x) {{{cast}}} : ({t}) -> {t}\n'
                 f"  return %y : {t}\n}}\n")
    named_text = (f"func.func @main(%x: {t}) -> {t} {{\n"
                  f'  %q, %s = "mx.quantize"(%x) {{{attrs}{mode}}} : ({t}) -> ({q})\n'
                  f'  %y = "mx.dequantize"(%q, %s) {{{attrs}}} : ({q}) -> {t}\n'
                  f"  return %y : {t}\n}}\n")
    got = _lower(cast_text, "builtin.module(mxlower-decompose-mx)")
    want = _lower(named_text, "builtin.module(mxlower-decompose-mx, "
                              "mxlower-expand-narrow-floats)")
    assert "mx." not in got and got == want
    assert not re.search(r"xf[468]E", got), got
    assert got != _general_recipe(cast_text)


def _mx_edge_blocks(rng, f, k: int, dtype) -> np.ndarray:
    """Blocks of ``k`` values on the edges of ``f``'s arithmetic: ties on the element grid
    times a scale, block maxima at and next to the boundaries of floor / rceil / nearest
    (max_elem 2^e, 1.5 2^e, one ulp either side), scales at both ends of the range, and
    special blocks (NaN, Inf, zeros of both signs, lone subnormals, the f32 extremes)."""
    if f.is_int:
        grid = np.arange(128) / 64.0
    else:
        codes = np.arange(1 << f.bits, dtype=np.uint8).view(f.element_dtype)
        grid = np.unique(codes.astype(np.float64))
        grid = grid[np.isfinite(grid) & (grid >= 0)]
    vals = np.concatenate([grid, (grid[1:] + grid[:-1]) / 2])  # the grid and its ties
    scales = ([2.0 ** e for e in (-140, -127, -126, -9, 0, 100)] + [448.0 * 2.0 ** 100, 1.125]
              if f.is_nvfp4 else [2.0 ** e for e in (-150, -135, -127, -126, -1, 0, 60, 125,
                                                      127 - f.emax_elem)])
    f32 = np.float32
    blocks = []
    for s in scales:
        amax = f.max_elem * s
        with np.errstate(over="ignore"):  # nvfp4's largest scale times 6 is beyond f32
            tops = (amax, np.nextafter(f32(amax), f32(np.inf)), np.nextafter(f32(amax), f32(0)),
                    1.5 * s, np.nextafter(f32(1.5 * s), f32(0)), s)
        for top in tops:
            b = rng.choice(vals, k) * s * rng.choice([-1.0, 1.0], k)
            b[rng.integers(k)] = float(top) * rng.choice([-1.0, 1.0])
            blocks.append(b)
    big, sub = float(np.finfo(f32).max), 2.0 ** -149
    for sp in ([0.0], [-0.0], [sub] + [0.0] * (k - 1), [-sub], [np.nan] + [1.0] * (k - 1),
               [-np.inf, np.nan, 0.0], [np.inf], [big, -big, 1.0], [2.0 ** -126, sub],
               [65504.0], [2.0 ** -24, 2.0 ** -25]):
        blocks.append(np.resize(np.array(sp, np.float64), k))
    with np.errstate(over="ignore"):
        return np.stack(blocks).astype(f32).astype(dtype)


def _mx_cast_cases():
    """(format, block size, axis of a rank-3 input, scale mode): every format with each of its
    scale modes, block sizes and blocked dimensions rotating."""
    out = []
    for name, f in FORMATS.items():
        ks = [16, 8, 32] if f.is_nvfp4 else [32, 8, 64, 16]
        for i, sm in enumerate(["max"] if f.is_nvfp4 else ["max", "rceil", "nearest"]):
            for j in range(2 if f.is_nvfp4 else 1):
                out.append((name, ks[(i + j) % len(ks)], (i + j + len(out)) % 3, sm))
    return out


@pytest.mark.parametrize("wide", list(WIDE))
def test_mx_datatype_casts_keep_the_general_recipes_bits(wide):
    """The MX recipe of an MX format's cast gives exactly the bits the general recipe gave
    (NaN payloads included) and the oracle's, on the format's edges: ties, the boundaries of
    every scale rule, the scale range's ends, NaN / Inf / zero / subnormal blocks; for every
    format and scale mode, block sizes 8-64 along the first, a middle and the last
    dimension."""
    rng = np.random.default_rng(17 + len(wide))
    m, cases = MxModule(), []
    for name, k, axis, sm in _mx_cast_cases():
        f = FORMATS[name]
        blocks = np.concatenate([_mx_edge_blocks(rng, f, k, WIDE[wide]),
                                 special_blocks(rng, (24, k), 1, k, WIDE[wide])])
        blocks = blocks[: len(blocks) // 2 * 2].reshape(2, -1, k)  # (2, n, k)
        x = np.ascontiguousarray(np.moveaxis(blocks, 2, axis))
        dt = formats.block_datatype(f, k, axis)
        case = (dt.number.code, dt.scale.code, "even", sm)
        m.ret(_cast(m, m.arg(x), None, case))
        cases.append((x, case))
    text = m.text()
    mx_bits = xla.run(_lower(text, PIPE), *m.inputs)
    general_bits = xla.run(_general_recipe(text), *m.inputs)
    for (x, case), got, before in zip(cases, mx_bits, general_bits):
        assert np.array_equal(R.bits(got), R.bits(before)), case
        _check(got, _reference_cast(x, None, case), case)
