"""The mx ops as a Python API: builders, textual round trip, parsed views, the verifier."""

from __future__ import annotations

import fractions
import re

import numpy as np
import pytest

from mxlower.bindings import jaxlib as J
from mxlower.dialect import mx
from mxlower.formats import format_of
from mxlower.lowering.mx_math import f32_bits_floor

ir = J.ir


@pytest.fixture
def ctx():
    with J.make_context(allow_unregistered=True) as c, ir.Location.unknown():
        yield c


def _func(ctx, arg_types: list[str]):
    """A module with one function whose arguments have ``arg_types``; returns (module,
    block, insertion point before the terminator)."""
    sig = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    m = ir.Module.parse(f"func.func @f({sig}) {{\n  return\n}}")
    block = m.body.operations[0].regions[0].blocks[0]
    return m, block, ir.InsertionPoint(block.operations[0])


def test_builders_make_verified_ops_that_round_trip(ctx):
    m, block, ip = _func(ctx, ["tensor<4x64xf32>", "tensor<f32>", "tensor<8x64xbf16>"])
    x, g, w = block.arguments
    q = mx.quantize(x, "mxfp8_e5m2", axis=1, scale_mode="rceil", ip=ip)
    d = mx.dequantize(q.results[0], q.results[1], "mxfp8_e5m2", result_type="f16", axis=-1,
                      ip=ip)
    n = mx.quantize(x, "nvfp4", global_scale=g, ip=ip)
    sd = mx.scaled_dot(q.results[0], q.results[1], w, None, lhs_format="mxfp8_e5m2",
                       rhs_format=None, lhs_contracting=(1,), rhs_contracting=(1,),
                       result_type="bf16", ip=ip)
    p = mx.pack(n.results[0], axis=1, ip=ip)
    u = mx.unpack(p.results[0], "f4E2M1FN", axis=1, ip=ip)
    assert mx.verify(m) == []
    views = [mx.parse(o) for o in (q, d, n, sd, p, u)]
    assert [type(v).__name__ for v in views] == ["QuantizeOp", "DequantizeOp", "QuantizeOp",
                                                 "ScaledDotOp", "PackOp", "UnpackOp"]
    assert (views[0].fmt.name, views[0].block_size, views[0].axis, views[0].scale_mode) == \
        ("mxfp8_e5m2", 32, 1, "rceil")
    assert views[1].result_type == "f16" and views[1].axis == 1
    assert views[2].global_scale is not None and views[2].block_size == 16
    assert views[3].rhs.fmt is None and views[3].lhs.axis == 1 and views[3].result_shape == (4, 8)
    assert views[4].bits == 4 and views[5].shape == (4, 64)
    text = str(m)
    assert ('"mx.quantize"(%arg0) {axis = 1 : i64, block_size = 32 : i64, '
            'format = "mxfp8_e5m2", scale_mode = "rceil"} : (tensor<4x64xf32>) -> '
            '(tensor<4x64xf8E5M2>, tensor<4x2xf8E8M0FNU>)') in text
    assert '"mx.pack"(%2#0) {axis = 1 : i64} : (tensor<4x64xf4E2M1FN>) -> tensor<4x32xui8>' \
        in text
    again = ir.Module.parse(text)
    assert str(again) == text and mx.verify(again) == []


def test_verifier_reports_every_bad_op_in_order(ctx):
    m = ir.Module.parse("""
    func.func @f(%x: tensor<4x64xf32>, %q: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>) {
      %a:2 = "mx.quantize"(%x) {format = "mxfp9"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
      %b = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
      %c = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3", block_size = 16 : i64} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
      return
    }""")
    bad = mx.verify(m)
    assert [o.name for o, _ in bad] == ["mx.quantize", "mx.dequantize"]
    assert "unknown MX format 'mxfp9'" in bad[0][1]
    assert bad[1][1].startswith("'mx.dequantize' op operand #1 (scales) must have shape "
                                "tensor<4x4xf8E8M0FNU>")
    with pytest.raises(mx.MXError, match="blocked by 16"):
        mx.parse(bad[1][0])


def test_defaults_of_optional_attributes(ctx):
    m = ir.Module.parse("""
    func.func @f(%x: tensor<2x3x32xbf16>) {
      %a:2 = "mx.quantize"(%x) {format = "mxint8"} : (tensor<2x3x32xbf16>) -> (tensor<2x3x32xi8>, tensor<2x3x1xf8E8M0FNU>)
      %b:2 = "mx.quantize"(%x) {format = "nvfp4", axis = -1 : i64} : (tensor<2x3x32xbf16>) -> (tensor<2x3x32xf4E2M1FN>, tensor<2x3x2xf8E4M3FN>)
      return
    }""")
    ops = list(m.body.operations[0].regions[0].blocks[0].operations)[:2]
    a, b = (mx.parse(o) for o in ops)
    assert (a.block_size, a.axis, a.scale_mode, a.input_type) == (32, 2, "floor", "bf16")
    assert (b.block_size, b.axis, b.global_scale) == (16, 2, None)


def test_pack_rejects_lengths_that_do_not_fill_bytes(ctx):
    m, block, ip = _func(ctx, ["tensor<3x5xf6E2M3FN>"])
    with pytest.raises(mx.MXError, match="do not fill whole bytes"):
        mx.pack(block.arguments[0], axis=1, ip=ip)
    assert mx.packed_length(4, 6) == 3 and mx.packed_length(5, 6) is None


@pytest.mark.parametrize("value", [
    fractions.Fraction(448) * fractions.Fraction(2) ** -127 * (1 + fractions.Fraction(2) ** -23),
    fractions.Fraction(2) ** -127 * (1 + fractions.Fraction(2) ** -23),
    fractions.Fraction(1, 3), fractions.Fraction(2) ** -149, fractions.Fraction(10) ** 38])
def test_f32_bits_floor_is_the_largest_float_not_above(value):
    bits = f32_bits_floor(value)
    here = fractions.Fraction(float(np.uint32(bits).view(np.float32)))
    above = fractions.Fraction(float(np.uint32(bits + 1).view(np.float32)))
    assert here <= value < above


def test_datatype_builders_make_verified_ops(ctx):
    """mx.cast / mx.sparse / the datatype quantize and dequantize: result types from the
    specs (storage types, scales' shape of 2D tiles, zero points), the exact textual form."""
    m, block, ip = _func(ctx, ["tensor<64x64xf32>", "tensor<64x64xui32>", "tensor<4x64xbf16>"])
    x, r, h = block.arguments
    c = mx.cast(x, "e5m6", "e8m0_t32", ip=ip)
    cs = mx.cast(x, "e2m1fo", "e8m0_t32x32", roundmode="stochastic", scalemode="midmax",
                 rbits=r, ip=ip)
    sp = mx.sparse(h, 4, 2, dim=-1, ip=ip)
    q = mx.quantize(x, number="e4m3fn", scale="e8m0_t32x32", ip=ip)
    z = mx.quantize(h, number="uint4", scale="float32_uint8_t16", ip=ip)
    u = mx.quantize(x, number="e5m6", ip=ip)
    d = mx.dequantize(z.results[0], z.results[1], number="uint4", scale="float32_uint8_t16",
                      zero_points=z.results[2], result_type="f16", ip=ip)
    assert mx.verify(m) == []
    views = [mx.parse(o) for o in (c, cs, sp, q, z, u, d)]
    assert [type(v).__name__ for v in views] == [
        "CastOp", "CastOp", "SparseOp", "GeneralQuantizeOp", "GeneralQuantizeOp",
        "GeneralQuantizeOp", "GeneralDequantizeOp"]
    assert (views[1].roundmode, views[1].scalemode, views[1].rbits is not None) == \
        ("stochastic", "midmax", True)
    assert (views[2].n, views[2].m, views[2].dim) == (4, 2, 1)
    assert [str(t.type) for t in q.results] == ["tensor<64x64xf8E4M3FN>",
                                                "tensor<2x2xf8E8M0FNU>"]
    assert [str(t.type) for t in z.results] == ["tensor<4x64xui8>", "tensor<4x4xf32>",
                                                "tensor<4x4xui8>"]
    assert [str(t.type) for t in u.results] == ["tensor<64x64xui16>"]
    text = str(m)
    assert ('"mx.cast"(%arg0) {number = "e5m6", roundmode = "even", scale = "e8m0_t32", '
            'scalemode = "max"} : (tensor<64x64xf32>) -> tensor<64x64xf32>') in text
    assert '"mx.sparse"(%arg2) {dim = 1 : i64, m = 2 : i64, n = 4 : i64}' in text
    again = ir.Module.parse(text)
    assert mx.verify(again) == []
    with pytest.raises(mx.MXError, match="bad datatype: 'e9m3'"):
        mx.cast(x, "e9m3", ip=ip)
    with pytest.raises(mx.MXError, match="not both"):
        mx.quantize(x, "mxfp8_e4m3", number="e4m3fn", ip=ip)


def test_an_mx_datatype_is_the_format_op(ctx):
    """One vocabulary: a datatype quantize / dequantize naming an MX format's datatype (by
    name or as codes, any tile size and dimension, its own rules) parses as the format's op,
    the named form's record: the same format, block size, axis and scale mode; nvfp4 with its
    global scale is the two-level datatype with the scale as an extra operand.  Other rules
    (ties away, midmax, 2D tiles) stay datatype ops; a two-level datatype that is not nvfp4's
    is a located error."""
    m, block, ip = _func(ctx, ["tensor<64x64xf32>", "tensor<f32>"])
    x, g = block.arguments
    pairs = [
        (dict(format="mxfp8_e4m3"), dict(number="mxfp8_e4m3")),
        (dict(format="mxfp8_e4m3", axis=0, scale_mode="rceil"),
         dict(number="e4m3fn", scale="e8m0_t32d0", scalemode="rceil")),
        (dict(format="mxfp4_e2m1", block_size=16, scale_mode="nearest"),
         dict(number="e2m1fo", scale="e8m0_t16", scalemode="nearest")),
        (dict(format="mxint8", block_size=8), dict(number="bfp16")),
        (dict(format="nvfp4"), dict(number="nvfp4")),
        (dict(format="nvfp4", global_scale=g),
         dict(number="e2m1fo", scale="e4m3fn_t16_gf32", global_scale=g)),
    ]
    built = []
    for named, general in pairs:
        a, b = mx.quantize(x, ip=ip, **named), mx.quantize(x, ip=ip, **general)
        da = mx.dequantize(a.results[0], a.results[1], named["format"], ip=ip,
                           block_size=named.get("block_size"), axis=named.get("axis", -1),
                           global_scale=named.get("global_scale"))
        db = mx.dequantize(b.results[0], b.results[1], ip=ip, number=general["number"],
                           scale=general.get("scale"),
                           global_scale=general.get("global_scale"))
        built.append((a, b, da, db))
    others = [mx.quantize(x, number="e4m3fn", scale="e8m0_t32", roundmode="nearest", ip=ip),
              mx.quantize(x, number="e4m3fn", scale="e8m0_t32", scalemode="midmax", ip=ip),
              mx.quantize(x, number="e4m3fn", scale="e8m0_t32x32", ip=ip)]
    assert mx.verify(m) == []
    for a, b, da, db in built:
        va, vb, wa, wb = (mx.parse(o) for o in (a, b, da, db))
        assert type(va) is type(vb) is mx.QuantizeOp
        assert type(wa) is type(wb) is mx.DequantizeOp
        assert (va.fmt, va.block_size, va.axis, va.scale_mode, va.global_scale is None) == \
            (vb.fmt, vb.block_size, vb.axis, vb.scale_mode, vb.global_scale is None)
        assert (wa.fmt, wa.block_size, wa.axis, wa.global_scale is None) == \
            (wb.fmt, wb.block_size, wb.axis, wb.global_scale is None)
        assert [str(r.type) for r in a.results] == [str(r.type) for r in b.results]
    assert [type(mx.parse(o)).__name__ for o in others] == ["GeneralQuantizeOp"] * 3
    # another two-level datatype is no format's: the datatype op, its tensor scale g last
    with pytest.raises(mx.MXError, match=r"expects 2 operands \(the input, the tensor scale g\)"):
        mx.parse(mx.quantize(x, number="e4m3fn", scale="e8m0_t32_gf32", ip=ip))
    two = mx.parse(mx.quantize(x, number="e4m3fn", scale="e8m0_t32_gf32", global_scale=g,
                               ip=ip))
    assert type(two) is mx.GeneralQuantizeOp and two.tensor_scale is not None
    bad = mx.quantize(x, number="nvfp4", global_scale=g, ip=ip)  # one level: no g operand
    with pytest.raises(mx.MXError, match="expects 1 operand"):
        mx.parse(bad)


def test_an_mx_datatype_cast_names_the_format_quantize(ctx):
    """An mx.cast whose datatype and modes are an MX format's (the rule that makes a datatype
    quantize the format's op) records that quantize -- format, block size, normalized axis,
    section 3's scale mode -- which mxlower-decompose-mx lowers with the MX recipe; every
    other cast (ties away, stochastic, midmax, 2D tiles, a tensor scale, a number no format
    has) records none."""
    m, block, ip = _func(ctx, ["tensor<4x64x32xf32>", "tensor<4x64x32xui32>"])
    x, r = block.arguments
    mxs = [
        (dict(number="mxfp8_e4m3"), ("mxfp8_e4m3", 32, 2, "floor")),
        (dict(number="e5m2", scale="e8m0_t16d1", scalemode="rceil"),
         ("mxfp8_e5m2", 16, 1, "rceil")),
        (dict(number="e2m3fo", scale="e8m0_t4d0", scalemode="nearest"),
         ("mxfp6_e2m3", 4, 0, "nearest")),
        (dict(number="bfp16"), ("mxint8", 8, 2, "floor")),
        (dict(number="nvfp4"), ("nvfp4", 16, 2, "floor")),
        (dict(number="e2m1fo", scale="e4m3fn_t32d1"), ("nvfp4", 32, 1, "floor")),
    ]
    others = [dict(number="e4m3fn", scale="e8m0_t32", roundmode="nearest"),
              dict(number="e4m3fn", scale="e8m0_t32", roundmode="stochastic", rbits=r),
              dict(number="e3m2fo", scale="e8m0_t32", scalemode="midmax"),
              dict(number="e4m3fn", scale="e8m0_t32x32"),
              dict(number="e4m3fn", scale="e8m0"),
              dict(number="e4m3", scale="e8m0_t32"),
              dict(number="mxint4"),
              dict(number="e4m3fn")]
    casts = [mx.cast(x, ip=ip, **kw) for kw, _ in mxs] + [mx.cast(x, ip=ip, **kw)
                                                           for kw in others]
    assert mx.verify(m) == []
    views = [mx.parse(c) for c in casts]
    assert all(type(v) is mx.CastOp for v in views)
    got = [(v.fmt.name, v.block_size, v.axis, v.scale_mode) for v in views[:len(mxs)]]
    assert got == [want for _, want in mxs]
    for v in views[len(mxs):]:
        assert (v.fmt, v.block_size, v.axis, v.scale_mode) == (None,) * 4, v.datatype.code


def _side_record(o):
    return (o.value, o.scales, o.fmt, o.block_size, o.axis, o.shape, o.element_type)


def _dot_record(s):
    return (_side_record(s.lhs), _side_record(s.rhs), s.global_scale, s.lhs_contracting,
            s.rhs_contracting, s.lhs_batch, s.rhs_batch, s.compute_type, s.result_type,
            s.result_shape)


def test_a_scaled_dot_side_as_a_datatype_is_the_format_side(ctx):
    """One vocabulary for mx.scaled_dot: a side named by its MX format's datatype, spelt as
    mx.dequantize spells one (``lhs_number`` [+ ``lhs_scale``]: specs, a predefined name, a
    ``number:scale`` code; nvfp4's two-level datatype with the global scale operand), parses
    into the record of the side its format names (``lhs_format`` with block size and axis):
    the same format, block size, axis, operands; ``Operand.datatype`` is the side's datatype
    in either spelling."""
    m, block, ip = _func(ctx, ["tensor<4x64xf8E4M3FN>", "tensor<4x2xf8E8M0FNU>",
                               "tensor<64x8xf4E2M1FN>", "tensor<2x8xf8E8M0FNU>",
                               "tensor<8x64xi8>", "tensor<8x8xf8E8M0FNU>",
                               "tensor<8x64xf4E2M1FN>", "tensor<8x4xf8E4M3FN>", "tensor<f32>",
                               "tensor<4x64xbf16>"])
    a, as_, w, ws, i8, is8, n, ns, g, x = block.arguments
    nt = dict(lhs_contracting=(1,), rhs_contracting=(1,))
    tn = dict(lhs_contracting=(1,), rhs_contracting=(0,))
    pairs = [  # operands, dims, named spelling, datatype spelling
        ((a, as_, w, ws), tn, dict(lhs_format="mxfp8_e4m3", rhs_format="mxfp4_e2m1", rhs_axis=0),
         dict(lhs_number="e4m3fn", lhs_scale="e8m0_t32", rhs_number="e2m1fo:e8m0_t32d0")),
        ((a, as_, i8, is8), nt, dict(lhs_format="mxfp8_e4m3", rhs_format="mxint8",
                                     rhs_block_size=8),
         dict(lhs_number="mxfp8e4", rhs_number="bfp16")),
        ((x, None, n, ns), nt, dict(rhs_format="nvfp4"), dict(rhs_number="nvfp4")),
        ((x, None, n, ns), nt, dict(rhs_format="nvfp4", global_scale=g),
         dict(rhs_number="e2m1fo", rhs_scale="e4m3fn_t16_gf32", global_scale=g)),
        ((a, as_, x, None), nt, dict(lhs_format="mxfp8_e4m3", global_scale=g),
         dict(lhs_number="e4m3fn", lhs_scale="e8m0_t32d1", global_scale=g)),
    ]
    built = [(mx.scaled_dot(*ops, **dims, **named, ip=ip),
              mx.scaled_dot(*ops, **dims, **general, ip=ip)) for ops, dims, named, general in pairs]
    assert mx.verify(m) == []
    for named, general in built:
        va, vb = mx.parse(named), mx.parse(general)
        assert type(va) is type(vb) is mx.ScaledDotOp
        assert _dot_record(va) == _dot_record(vb)
        for sa, sb in ((va.lhs, vb.lhs), (va.rhs, vb.rhs)):
            assert sa.datatype == sb.datatype
            if sa.fmt is not None:
                assert format_of(sa.datatype) == (sa.fmt, sa.block_size, sa.axis)
        assert str(named.results[0].type) == str(general.results[0].type)
    text = str(m)
    assert ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t32", rhs_number = "e2m1fo:e8m0_t32d0"'
            in text)
    assert mx.verify(ir.Module.parse(text)) == []
    # the builder: one spelling per side, and only an MX format's datatype
    with pytest.raises(mx.MXError, match="'lhs_format' .* or a datatype 'lhs_number', not both"):
        mx.scaled_dot(a, as_, x, None, lhs_format="mxfp8_e4m3", lhs_number="e4m3fn", **nt,
                      ip=ip)
    with pytest.raises(mx.MXError, match="not both"):
        mx.scaled_dot(a, as_, x, None, lhs_axis=1, lhs_number="mxfp8_e4m3", **nt, ip=ip)
    with pytest.raises(mx.MXError, match="the lhs datatype e5m6:e8m0_t32 is not an MX "
                                         "format's: no MX format has e5m6 elements"):
        mx.scaled_dot(a, as_, x, None, lhs_number="e5m6", lhs_scale="e8m0_t32", **nt, ip=ip)
    with pytest.raises(mx.MXError, match="bad rhs datatype: 'e9m3'"):
        mx.scaled_dot(x, None, a, as_, rhs_number="e9m3", **nt, ip=ip)


@pytest.mark.parametrize("attrs, message", [
    ('lhs_number = "uint4", lhs_scale = "float32_uint8_t16"', "its scales have a zero point"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t32x32"', r"2D tiles \('_t32x32'\)"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0"', "one scale for the whole tensor"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t0"', "a scale per channel"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t32_gf32"',
     "only nvfp4 has two-level scaling"),
    ('lhs_number = "mxint4"', "no MX format has int4 elements with e8m0 scales"),
    ('lhs_number = "f8E4M3FN"', "it is unscaled"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t32d0"',
     r"blocks dimension 0, which is not a contracting dimension of the lhs operand \(1\).*"
     r"'e8m0_t32d1'"),
    ('lhs_number = "e4m3fn", lhs_scale = "e8m0_t32d5"', "out of range for the rank-2"),
    ('lhs_number = "e4m3fn", lhs_roundmode = "even"', "'lhs_roundmode' does not apply"),
    ('lhs_format = "mxfp8_e4m3", lhs_scale = "e8m0_t32"',
     r"the lhs side mixes a named format \(lhs_format\) with a datatype \(lhs_scale\)"),
    ('lhs_scale = "e8m0_t32"', "missing attribute 'lhs_number'"),
    ('lhs_number = "e4m3fn:e8m0_t16"', "the lhs scales must have shape tensor<4x4xf8E8M0FNU>"),
    ('lhs_number = "mxfp8_e5m2"', "the lhs operand of mxfp8_e5m2 must have element type"),
])
def test_a_scaled_dot_side_datatype_that_is_no_mx_formats_is_an_error(ctx, attrs, message):
    text = ('func.func @f(%a: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>, '
            '%x: tensor<8x64xf32>) -> tensor<4x8xf32> {\n'
            f'  %r = "mx.scaled_dot"(%a, %s, %x) {{{attrs}, dot_dimension_numbers = '
            '#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = '
            '[1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> '
            'tensor<4x8xf32>\n  return %r : tensor<4x8xf32>\n}\n')
    [(_, msg)] = mx.verify(ir.Module.parse(text))
    assert msg.startswith("'mx.scaled_dot' op ")
    assert re.search(message, msg), msg
