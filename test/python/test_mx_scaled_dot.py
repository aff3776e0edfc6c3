"""mx.scaled_dot, XLA's MX custom calls and JAX's own MX modules, lowered by
mxlower-mx-to-stablehlo and run on XLA:CPU, against mxlower.reference (docs/semantics.md section 6, 7).

Dot products are compared with a tolerance, since summation order is free: the error of every
result must be at most 1e-6 times sum_k |a_k b_k| (the standard relative error bound of a dot
product, which stays meaningful when the sum cancels), plus half an ulp of a bf16/f16 result
type, whose final rounding may fall either way.  Quantize/dequantize custom calls are bit-exact.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.formats import FORMATS
from mxlower.testing import MxModule
from mxlower.testing import assert_dot_close
from mxlower.tools.run import run_module

F32 = np.float32
WIDE = {"f32": np.dtype(F32), "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16)}


def _dequant(x, s, fmt, axis, k, dtype="f32"):
    return R.dequantize(x, s, fmt, axis=axis, block_size=k, dtype=dtype)


# ----------------------------------------------------------------------------- mx.scaled_dot

#: (lhs format, rhs format or None for a plain operand, lhs shape, rhs shape, dims, block,
#:  result type, compute type, global scale)
DOT_CASES = [
    ("mxfp8_e4m3", "mxfp8_e4m3", (16, 64), (8, 64), (((1,), (1,)), ((), ())), 32, "f32", "f32", None),
    ("mxfp8_e4m3", "mxfp8_e5m2", (2, 16, 64), (2, 8, 64), (((2,), (2,)), ((0,), (0,))), 32, "bf16", "f32", None),
    ("mxfp8_e5m2", "bf16", (16, 64), (64, 8), (((1,), (0,)), ((), ())), 16, "f32", "f32", None),
    ("mxfp6_e3m2", "mxfp6_e2m3", (64, 16), (64, 8), (((0,), (0,)), ((), ())), 32, "f32", "f32", None),
    ("mxfp6_e2m3", "f16", (3, 8, 128), (3, 128, 4), (((2,), (1,)), ((0,), (0,))), 64, "f16", "f32", None),
    ("mxfp4_e2m1", "mxfp4_e2m1", (16, 64), (8, 64), (((1,), (1,)), ((), ())), 32, "f32", "bf16", None),
    ("mxint8", "mxfp8_e4m3", (64, 16), (64, 8), (((0,), (0,)), ((), ())), 32, "f16", "f32", None),
    ("mxint8", "f32", (4, 96), (5, 96), (((1,), (1,)), ((), ())), 32, "f32", "f16", None),
    ("nvfp4", "nvfp4", (16, 64), (8, 64), (((1,), (1,)), ((), ())), 16, "f32", "f32", 0.37),
    ("nvfp4", "nvfp4", (2, 8, 64), (2, 4, 64), (((2,), (2,)), ((0,), (0,))), 16, "bf16", "f32", 3e-39),
]


def _quantized(rng, shape, fmt, axis, k):
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 4, shape)).astype(F32)
    return R.quantize(x, fmt, axis=axis, block_size=k, scale_mode="rceil")


@functools.cache
def _dot_run():
    rng = np.random.default_rng(11)
    m = MxModule()
    meta = []
    for lf, rf, lsh, rsh, dims, k, out, ct, g in DOT_CASES:
        (lc, rc), _ = dims
        la, ra = lc[0], rc[0]
        ae, asc = _quantized(rng, lsh, lf, la, k)
        av, asv = m.arg(ae), m.arg(asc)
        if rf in FORMATS:
            be, bsc = _quantized(rng, rsh, rf, ra, k)
            bv, bsv = m.arg(be), m.arg(bsc)
            b_deq = _dequant(be, bsc, rf, ra, k, ct)
        else:
            be = rng.standard_normal(rsh).astype(WIDE[rf])
            bv, bsv, bsc = m.arg(be), None, None
            b_deq = be.astype(F32).astype(WIDE[ct])
        gv = m.arg(np.array(g, F32)) if g is not None else None
        m.ret(m.scaled_dot(av, asv, bv, bsv, lhs_format=lf,
                           rhs_format=rf if rf in FORMATS else None, dims=dims, out=out,
                           compute=ct, block_sizes=(k, k), global_scale=gv))
        meta.append((_dequant(ae, asc, lf, la, k, ct), b_deq, dims, out, g))
    return meta, m.run()


@pytest.mark.parametrize("i", range(len(DOT_CASES)),
                         ids=[f"{c[0]}x{c[1]}-{c[6]}-{c[7]}" for c in DOT_CASES])
def test_scaled_dot(i):
    meta, outs = _dot_run()
    a, b, dims, out, g = meta[i]
    assert outs[i].dtype == WIDE[out]
    assert_dot_close(outs[i], a, b, dims, out, g, what=str(DOT_CASES[i][:2]))


# ----------------------------------------------------------------------------- one vocabulary

#: (elements, scales, named side attributes, datatype side attributes) of one scaled side
#: spelt both ways (the dot contracts the lhs's dimension 1 and the rhs's dimension 0)
SPELT = [
    ((16, 64), "f8E4M3FN", (16, 2), "f8E8M0FNU", ("mxfp8_e4m3", 32, 1),
     'number = "e4m3fn", {side}_scale = "e8m0_t32"'),
    ((64, 8), "f4E2M1FN", (2, 8), "f8E8M0FNU", ("mxfp4_e2m1", 32, 0),
     'number = "e2m1fo:e8m0_t32d0"'),
    ((16, 64), "i8", (16, 8), "f8E8M0FNU", ("mxint8", 8, 1), 'number = "bfp16"'),
    ((64, 8), "f4E2M1FN", (4, 8), "f8E4M3FN", ("nvfp4", 16, 0),
     'number = "e2m1fo", {side}_scale = "e4m3fn_t16d0_gf32"'),
]


def _spelt_module(case, spelling: str) -> str:
    """A function whose scaled_dot has the scaled side of ``case`` (lhs when it blocks
    dimension 1, else rhs) against a plain bf16 side, spelt ``named`` or ``datatype``; nvfp4
    with a global scale."""
    eshape, elt, sshape, selt, (fmt, k, axis), general = case
    side = "lhs" if axis == 1 else "rhs"
    plain = "tensor<64x8xbf16>" if side == "lhs" else "tensor<16x64xbf16>"
    scaled = [f"tensor<{eshape[0]}x{eshape[1]}x{elt}>", f"tensor<{sshape[0]}x{sshape[1]}x{selt}>"]
    glob = ["tensor<f32>"] if fmt == "nvfp4" else []
    types = (scaled + [plain] if side == "lhs" else [plain] + scaled) + glob
    rshape = "16x8"
    if spelling == "named":
        attrs = (f'{side}_format = "{fmt}", {side}_block_size = {k} : i64, '
                 f'{side}_axis = {axis} : i64')
    else:
        attrs = f"{side}_" + general.format(side=side)
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    names = ", ".join(f"%a{i}" for i in range(len(types)))
    return (f"func.func @main({args}) -> tensor<{rshape}xf32> {{\n"
            f'  %r = "mx.scaled_dot"({names}) {{{attrs}, dot_dimension_numbers = '
            "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}"
            f" : ({', '.join(types)}) -> tensor<{rshape}xf32>\n"
            f"  return %r : tensor<{rshape}xf32>\n}}\n")


@pytest.mark.parametrize("pipeline", [
    "builtin.module(mxlower-mx-to-stablehlo)",
    "builtin.module(mxlower-scaled-dot-to-kernel{path=avx2},mxlower-mx-to-stablehlo)"])
@pytest.mark.parametrize("case", SPELT, ids=[c[4][0] for c in SPELT])
def test_a_datatype_side_lowers_as_its_format(case, pipeline):
    """One vocabulary: a scaled_dot side named by its MX format's datatype (specs, a
    ``number:scale`` code with the blocked dimension, ``bfp16``, nvfp4's two-level datatype)
    parses into the named side's record and lowers to the same StableHLO, by the
    decomposition and by the dot kernel's call."""
    from mxlower.bindings import jaxlib as J
    from mxlower.dialect import mx
    from mxlower.pipeline.manager import run_pipeline

    out, records = [], []
    for spelling in ("named", "datatype"):
        with J.make_context(allow_unregistered=True):
            m = J.ir.Module.parse(_spelt_module(case, spelling))
            op = m.body.operations[0].regions[0].blocks[0].operations[0]
            s = mx.parse(op)
            records.append([(o.fmt, o.block_size, o.axis, o.shape, o.element_type, o.datatype)
                            for o in (s.lhs, s.rhs)] + [s.global_scale is not None])
            run_pipeline(m, pipeline)
            out.append(str(m))
    assert records[0] == records[1]
    assert "mx." not in out[0] and out[0] == out[1]
    if "kernel" in pipeline:
        assert "custom_call @mxlower_dot_" in out[0]


def test_datatype_sides_run_as_their_formats():
    """The datatype spelling on XLA:CPU: bit for bit the named spelling's results, within
    section 6's bound of the oracle."""
    rng = np.random.default_rng(23)
    m = MxModule()
    checks = []
    for eshape, _, _, _, (fmt, k, axis), general in SPELT:
        side = "lhs" if axis == 1 else "rhs"
        x = (rng.standard_normal(eshape) * 2.0 ** rng.integers(-3, 4, eshape)).astype(F32)
        e, s = R.quantize(x, fmt, axis=axis, block_size=k)
        p = rng.standard_normal((64, 8) if side == "lhs" else (16, 64)).astype(WIDE["bf16"])
        g = 0.37 if fmt == "nvfp4" else None
        ev, sv, pv = m.arg(e), m.arg(s), m.arg(p)
        gv = m.arg(np.array(g, F32)) if g is not None else None
        dims = (((1,), (0,)), ((), ()))
        ops = ([ev, sv, pv] if side == "lhs" else [pv, ev, sv]) + ([gv] if gv else [])
        if side == "lhs":
            named = m.scaled_dot(ev, sv, pv, None, lhs_format=fmt, rhs_format=None, dims=dims,
                                 block_sizes=(k, None), global_scale=gv)
        else:
            named = m.scaled_dot(pv, None, ev, sv, lhs_format=None, rhs_format=fmt, dims=dims,
                                 block_sizes=(None, k), global_scale=gv)
        dn = ("#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = "
              "[0]>")
        spelt = m.raw(f'{{r}} = "mx.scaled_dot"({", ".join(o.name for o in ops)}) '
                      f'{{{side}_{general.format(side=side)}, dot_dimension_numbers = {dn}}} : '
                      f'({", ".join(o.type for o in ops)}) -> {named.type}', named.shape, "f32")
        m.ret(named, spelt)
        deq = _dequant(e, s, fmt, axis, k)
        plain = p.astype(F32)
        checks.append(((deq, plain) if side == "lhs" else (plain, deq), dims, g, fmt))
    outs = iter(m.run())
    for (a, b), dims, g, fmt in checks:
        named, spelt = next(outs), next(outs)
        assert named.tobytes() == spelt.tobytes(), fmt
        assert_dot_close(spelt, a, b, dims, "f32", g, what=fmt)


# ----------------------------------------------------------------------------- custom calls

CUSTOM_CALLS = r"""
func.func @main(%x: tensor<8x128xf32>, %xb: tensor<4x64xbf16>, %q4: tensor<8x128xf4E2M1FN>,
                %s4: tensor<8x2xf8E8M0FNU>, %a: tensor<2x16x224xf8E4M3FN>,
                %as: tensor<2x128x8xf8E8M0FNU>, %b: tensor<2x32x224xf8E5M2>,
                %bs: tensor<2x32x8xf8E8M0FNU>, %p: tensor<32x224xf16>,
                %ls: tensor<16x7xf8E8M0FNU>, %l: tensor<16x224xf8E4M3FN>,
                %n: tensor<16x64xf4E2M1FN>, %ns: tensor<16x4xf8E4M3FN>, %g: tensor<bf16>)
    -> (tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>, tensor<4x64xf4E2M1FN>,
        tensor<4x4xf8E4M3FN>, tensor<8x128xbf16>, tensor<2x16x32xf32>, tensor<16x32xf16>,
        tensor<16x16xbf16>) {
  %q, %s = stablehlo.custom_call @__op$quantize(%x) : (tensor<8x128xf32>) -> (tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>)
  %t = stablehlo.custom_call @__op$quantize(%xb) : (tensor<4x64xbf16>) -> tuple<tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>>
  %tq = stablehlo.get_tuple_element %t[0] : (tuple<tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>>) -> tensor<4x64xf4E2M1FN>
  %ts = stablehlo.get_tuple_element %t[1] : (tuple<tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>>) -> tensor<4x4xf8E4M3FN>
  %d = stablehlo.custom_call @__op$dequantize(%q4, %s4) : (tensor<8x128xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<8x128xbf16>
  %r = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = 32 : i64}}} : (tensor<2x16x224xf8E4M3FN>, tensor<2x32x224xf8E5M2>, tensor<2x128x8xf8E8M0FNU>, tensor<2x32x8xf8E8M0FNU>) -> tensor<2x16x32xf32>
  %r3 = stablehlo.custom_call @__op$block_scaled_dot(%l, %p, %ls) {backend_config = "{\"scaled_dot_backend_config\": {\"dequantize_type\": \"BF16\"}}"} : (tensor<16x224xf8E4M3FN>, tensor<32x224xf16>, tensor<16x7xf8E8M0FNU>) -> tensor<16x32xf16>
  %r5 = stablehlo.custom_call @__op$block_scaled_dot(%n, %n, %ns, %ns, %g) : (tensor<16x64xf4E2M1FN>, tensor<16x64xf4E2M1FN>, tensor<16x4xf8E4M3FN>, tensor<16x4xf8E4M3FN>, tensor<bf16>) -> tensor<16x16xbf16>
  return %q, %s, %tq, %ts, %d, %r, %r3, %r5 : tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>, tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>, tensor<8x128xbf16>, tensor<2x16x32xf32>, tensor<16x32xf16>, tensor<16x16xbf16>
}
"""


def test_xla_custom_calls():
    """__op$quantize (two results and tuple forms; XLA's default rule: nearest),
    __op$dequantize, and __op$block_scaled_dot with padded scales and an explicit block size,
    with three operands and a BF16 dequantize_type, and with five (a bf16 global scale)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((8, 128)) * 2.0 ** rng.integers(-20, 20, (8, 1))).astype(F32)
    xb = rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16)
    q4 = R.from_bits(rng.integers(0, 16, (8, 128)), "f4E2M1FN")
    s4 = R.from_bits(rng.integers(100, 150, (8, 2)), "f8E8M0FNU")
    a, a_s = R.quantize(rng.standard_normal((2, 16, 224)).astype(F32), "mxfp8_e4m3")
    b, b_s = R.quantize(rng.standard_normal((2, 32, 224)).astype(F32), "mxfp8_e5m2")
    pad = R.from_bits(np.full((2, 128, 8), 0xFF), "f8E8M0FNU")  # NaN padding must be ignored
    pad[:, :16, :7] = a_s
    bpad = R.from_bits(np.full((2, 32, 8), 0xFF), "f8E8M0FNU")
    bpad[:, :, :7] = b_s
    p = rng.standard_normal((32, 224)).astype(np.float16)
    lq, ls = R.quantize(rng.standard_normal((16, 224)).astype(F32), "mxfp8_e4m3")
    n, ns = R.quantize(rng.standard_normal((16, 64)).astype(F32), "nvfp4")
    g = np.array(0.75, ml_dtypes.bfloat16)
    outs = run_module(CUSTOM_CALLS, [x, xb, q4, s4, a, pad, b, bpad, p, ls, lq, n, ns, g],
                      pipeline="builtin.module(mxlower-mx-to-stablehlo)")
    eq, es = R.quantize(x, "mxfp8_e4m3", scale_mode="nearest")
    tq, ts = R.quantize(xb, "nvfp4")
    assert R.bits(outs[0]).tolist() == R.bits(eq).tolist()
    assert R.bits(outs[1]).tolist() == R.bits(es).tolist()
    assert R.bits(outs[2]).tolist() == R.bits(tq).tolist()
    assert R.bits(outs[3]).tolist() == R.bits(ts).tolist()
    assert R.bits(outs[4]).tolist() == R.bits(R.dequantize(q4, s4, "mxfp4_e2m1",
                                                           dtype="bf16")).tolist()
    batch = (((2,), (2,)), ((0,), (0,)))
    assert_dot_close(outs[5], _dequant(a, a_s, "mxfp8_e4m3", -1, 32),
                     _dequant(b, b_s, "mxfp8_e5m2", -1, 32), batch, "f32", what="padded")
    plain = (((1,), (1,)), ((), ()))
    assert_dot_close(outs[6], _dequant(lq, ls, "mxfp8_e4m3", -1, 32, "bf16"),
                     p.astype(F32).astype(ml_dtypes.bfloat16), plain, "f16", what="3 operands")
    nd = _dequant(n, ns, "nvfp4", -1, 16)
    assert_dot_close(outs[7], nd, nd, plain, "bf16", 0.75, what="5 operands")


# ----------------------------------------------------------------------------- pack / unpack


@pytest.mark.parametrize("elt,shape,axis", [
    ("f4E2M1FN", (4, 64), 1), ("f4E2M1FN", (6, 5), 0), ("f6E2M3FN", (4, 8), 1),
    ("f6E3M2FN", (8, 3), 0), ("f8E4M3FN", (3, 8), 1), ("i8", (4, 4), 0)])
def test_pack_unpack(elt, shape, axis):
    from mxlower.formats import FLOAT_TYPES

    rng = np.random.default_rng(3)
    bits = 8 if elt == "i8" else FLOAT_TYPES[elt].bits
    codes = rng.integers(0, 1 << bits, size=shape).astype(np.uint8)
    vals = codes.view(np.int8) if elt == "i8" else R.from_bits(codes, elt)
    m = MxModule()
    v = m.arg(vals)
    pshape = list(shape)
    pshape[axis] = shape[axis] * bits // 8
    ptype = f"tensor<{'x'.join(map(str, pshape))}xui8>"
    p = m.raw(f'{{r}} = "mx.pack"({v.name}) {{axis = {axis} : i64}} : ({v.type}) -> {ptype}',
              pshape, "ui8")
    u = m.raw(f'{{r}} = "mx.unpack"({p.name}) {{axis = {axis} : i64}} : ({p.type}) -> {v.type}',
              shape, elt)
    m.ret(p, u)
    packed, unpacked = m.run()
    assert packed.tolist() == R.pack(codes, bits, axis=axis).tolist()
    assert R.bits(unpacked).tolist() == R.bits(vals).tolist()


# ----------------------------------------------------------------------------- real clients


def _lower_for_cuda(f, *args) -> str:
    import jax

    return jax.jit(f).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def _jax_quantize(x, mode):
    import jax
    from mxlower.bindings.jax_private import jax_quantize as quantize  # JAX's own quantizer

    cfg = jax.nn.get_scaled_dot_general_config(mode)
    q, s = jax.jit(lambda v: quantize(v, cfg))(x)
    return np.asarray(q), np.asarray(s)


def _run_jax_module(text, inputs):
    assert "__op$block_scaled_dot" in text or "xla.scaled_dot" in text
    return run_module(text, inputs, pipeline="builtin.module(mxlower-mx-to-stablehlo)")[0]


@pytest.mark.parametrize("mode,fmt", [("mxfp8", "mxfp8_e4m3"), ("nvfp4", "nvfp4")])
def test_jax_nn_scaled_matmul(mode, fmt):
    import jax.numpy as jnp
    from jax import nn

    rng = np.random.default_rng(1)
    a, a_s = _jax_quantize(rng.standard_normal((2, 16, 128)).astype(F32), mode)
    b, b_s = _jax_quantize(rng.standard_normal((2, 8, 128)).astype(F32), mode)
    text = _lower_for_cuda(lambda x, y, xs, ys: nn.scaled_matmul(
        x, y, xs, ys, preferred_element_type=jnp.float32), a, b, a_s, b_s)
    got = _run_jax_module(text, [a, b, a_s, b_s])
    assert_dot_close(got, R.dequantize(a, a_s, fmt), R.dequantize(b, b_s, fmt),
                     (((2,), (2,)), ((0,), (0,))), "f32", what="scaled_matmul")


@pytest.mark.parametrize("mode,fmt", [("mxfp8", "mxfp8_e4m3"), ("nvfp4", "nvfp4")])
def test_jax_nn_scaled_dot_general(mode, fmt):
    """The module holds JAX's own quantization (plain StableHLO) and the custom call."""
    import jax
    import jax.numpy as jnp

    cfg = jax.nn.get_scaled_dot_general_config(mode)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 16, 64)).astype(F32)
    y = rng.standard_normal((3, 64, 8)).astype(F32)
    dims = (((2,), (1,)), ((0,), (0,)))
    text = _lower_for_cuda(lambda u, v: jax.nn.scaled_dot_general(
        u, v, dims, preferred_element_type=jnp.float32, configs=[cfg, cfg, cfg]), x, y)
    got = _run_jax_module(text, [x, y])
    xq, xs = _jax_quantize(x, mode)
    yq, ys = _jax_quantize(np.ascontiguousarray(np.swapaxes(y, 1, 2)), mode)
    g = None if mode == "mxfp8" else float(np.asarray(cfg.global_scale)[0]) ** 2
    assert_dot_close(got, R.dequantize(xq, xs, fmt), R.dequantize(yq, ys, fmt),
                     (((2,), (2,)), ((0,), (0,))), "f32", g, what="scaled_dot_general")


@pytest.mark.parametrize("rhs", ["mxfp8_e5m2", "bf16"])
def test_jax_lax_scaled_dot(rhs):
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    a, a_s = R.quantize(rng.standard_normal((2, 16, 64)).astype(F32), "mxfp8_e4m3", axis=2)
    da = R.dequantize(a, a_s, "mxfp8_e4m3", axis=2)
    dims = (((2,), (1,)), ((0,), (0,)))
    if rhs == "bf16":
        b = rng.standard_normal((2, 64, 8)).astype(ml_dtypes.bfloat16)
        text = _lower_for_cuda(lambda x, y, xs: jax.lax.scaled_dot(
            x, y, lhs_scale=xs, preferred_element_type=jnp.float32), a, b, a_s)
        got = _run_jax_module(text, [a, b, a_s])
        db = b
    else:
        b, b_s = R.quantize(rng.standard_normal((2, 64, 8)).astype(F32), rhs, axis=1)
        text = _lower_for_cuda(lambda x, y, xs, ys: jax.lax.scaled_dot(
            x, y, lhs_scale=xs, rhs_scale=ys, preferred_element_type=jnp.float32),
            a, b, a_s, b_s)
        got = _run_jax_module(text, [a, b, a_s, b_s])
        db = R.dequantize(b, b_s, rhs, axis=1)
    assert_dot_close(got, da, db, dims, "f32", what="lax.scaled_dot")
