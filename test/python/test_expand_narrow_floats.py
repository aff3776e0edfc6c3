"""mxlower-expand-narrow-floats, compiled and run on XLA:CPU, against the oracle.

One compiled module per type pair: every bf16 and f16 bit pattern, > 200k f32 probes (and
f64 probes) into each of the six narrow types, every narrow code back to each wide type and
to every other narrow type.  Narrow results must be identical codes; wide NaN results are
compared by NaN-ness.  Then the storage legalization (signatures, constants, data movement,
bitcasts, control flow, calls) is run end to end, and the MX pipeline for every format.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

from mxlower import passes
from mxlower import reference as R
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import DiagnosticEngine, PassFailure
from mxlower.execution import xla
from mxlower.formats import FLOAT_TYPES, get_format
from mxlower.types import probe_values
from mxlower.passes.expand_narrow_floats import ExpandNarrowFloats
from mxlower.pipeline.manager import run_pipeline
from mxlower.pipeline.parser import PipelineError
from mxlower.testing import refine_for_inputs

NARROW = list(FLOAT_TYPES)
WIDE = ["f32", "bf16", "f16", "f64"]


def expand(text: str, options: str = "") -> str:
    ctx = J.make_context()
    with ctx:
        m = J.ir.Module.parse(text)
        opts = "{" + options + "}" if options else ""
        run_pipeline(m, f"builtin.module(mxlower-expand-narrow-floats{opts})")
        return str(m)


def convert_text(src: str, dst: str, n: int) -> str:
    return (f"func.func @main(%x: tensor<{n}x{src}>) -> tensor<{n}x{dst}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<{n}x{src}>) -> tensor<{n}x{dst}>\n"
            f"  return %0 : tensor<{n}x{dst}>\n}}\n")


@functools.cache
def probes(name: str) -> np.ndarray:
    return probe_values(name)


@functools.cache
def compiled(src: str, dst: str, n: int) -> xla.Executable:
    text = expand(convert_text(src, dst, n))
    assert "f8E" not in text and "f6E" not in text and "f4E" not in text
    return xla.compile(text)


def _mismatches(x, got, exp, k=5):
    bad = np.nonzero(got != exp)[0][:k]
    xb = R.bits(x)
    return [(hex(int(xb[i])), hex(int(got[i])), hex(int(exp[i]))) for i in bad]


@pytest.mark.parametrize("dst", NARROW)
@pytest.mark.parametrize("src", WIDE)
def test_truncf_on_xla_cpu(src, dst):
    x = probes(src)
    (got,) = compiled(src, dst, x.size)(x)
    exp = R.bits(R.convert(x, dst))
    assert got.dtype == np.uint8
    assert np.array_equal(got, exp), _mismatches(x, got, exp)


@pytest.mark.parametrize("dst", WIDE)
@pytest.mark.parametrize("src", NARROW)
def test_extf_on_xla_cpu(src, dst):
    codes = R.bits(probes(src))
    (got,) = compiled(src, dst, codes.size)(codes)
    exp = R.convert(R.from_bits(codes, src), dst)
    assert got.dtype == exp.dtype
    g64, e64 = got.astype(np.float64), exp.astype(np.float64)
    assert np.array_equal(np.isnan(g64), np.isnan(e64))
    ok = np.isnan(e64) | (R.bits(got) == R.bits(exp))
    assert ok.all(), _mismatches(codes, R.bits(got), R.bits(exp))


@pytest.mark.parametrize("src", NARROW)
def test_narrow_to_narrow_on_xla_cpu(src):
    """One module per source type, one result per destination type."""
    n = 1 << FLOAT_TYPES[src].bits
    rets = ", ".join(f"tensor<{n}x{d}>" for d in NARROW)
    body = "\n".join(f"  %{i} = stablehlo.convert %x : (tensor<{n}x{src}>) -> tensor<{n}x{d}>"
                     for i, d in enumerate(NARROW))
    text = (f"func.func @main(%x: tensor<{n}x{src}>) -> ({rets}) {{\n{body}\n"
            f"  return {', '.join(f'%{i}' for i in range(len(NARROW)))} : {rets}\n}}\n")
    codes = np.arange(n, dtype=np.uint8)
    outs = xla.run(expand(text), codes)
    for d, got in zip(NARROW, outs):
        # a convert to the same type is the identity (as in XLA), NaN payloads included
        exp = codes if d == src else R.bits(R.convert(R.from_bits(codes, src), d))
        assert np.array_equal(got, exp), (d, _mismatches(codes, got, exp))


def test_storage_legalization_runs_on_xla_cpu():
    """Signatures, constants (splat, dense, hex), data movement, tuples, control flow, calls."""
    n = 128  # > 100 elements: MLIR prints the dense constant in hex
    c = np.arange(n, dtype=np.uint8) % 64
    hexc = "0x" + c.tobytes().hex().upper()
    text = f"""
func.func private @ident(%a: tensor<2x2xf6E2M3FN>) -> tensor<2x2xf6E2M3FN> {{
  return %a : tensor<2x2xf6E2M3FN>
}}
func.func @main(%x: tensor<4xf32>, %y: tensor<2x2xf6E2M3FN>, %p: tensor<i1>, %i: tensor<i32>)
    -> (tensor<2x2xf4E2M1FN>, tensor<4xf32>, tensor<2x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>,
        tensor<{n}xf6E3M2FN>, tensor<2x2xf6E2M3FN>, tensor<4xf8E8M0FNU>, tensor<2xf6E2M3FN>) {{
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf4E2M1FN>
  %1 = stablehlo.reshape %0 : (tensor<4xf4E2M1FN>) -> tensor<2x2xf4E2M1FN>
  %c = stablehlo.constant dense<[[1.0, -0.0], [7.5, 0.125]]> : tensor<2x2xf6E2M3FN>
  %s = stablehlo.constant dense<0.5> : tensor<4xf8E8M0FNU>
  %2 = stablehlo.convert %s : (tensor<4xf8E8M0FNU>) -> tensor<4xf32>
  %3 = stablehlo.concatenate %c, %y, dim = 0 : (tensor<2x2xf6E2M3FN>, tensor<2x2xf6E2M3FN>) -> tensor<4x2xf6E2M3FN>
  %4 = stablehlo.slice %3 [1:3, 0:2] : (tensor<4x2xf6E2M3FN>) -> tensor<2x2xf6E2M3FN>
  %5 = stablehlo.transpose %4, dims = [1, 0] : (tensor<2x2xf6E2M3FN>) -> tensor<2x2xf6E2M3FN>
  %z = stablehlo.constant dense<-0.0> : tensor<f6E2M3FN>
  %6 = stablehlo.pad %5, %z, low = [1, 0], high = [0, 0], interior = [0, 0] : (tensor<2x2xf6E2M3FN>, tensor<f6E2M3FN>) -> tensor<3x2xf6E2M3FN>
  %h = stablehlo.constant dense<"{hexc}"> : tensor<{n}xf6E3M2FN>
  %7 = stablehlo.select %p, %y, %c : tensor<i1>, tensor<2x2xf6E2M3FN>
  %8 = func.call @ident(%7) : (tensor<2x2xf6E2M3FN>) -> tensor<2x2xf6E2M3FN>
  %t = stablehlo.tuple %8, %s : tuple<tensor<2x2xf6E2M3FN>, tensor<4xf8E8M0FNU>>
  %9 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2x2xf6E2M3FN>, tensor<4xf8E8M0FNU>>) -> tensor<4xf8E8M0FNU>
  %10 = "stablehlo.if"(%p) ({{
    stablehlo.return %8 : tensor<2x2xf6E2M3FN>
  }}, {{
    stablehlo.return %c : tensor<2x2xf6E2M3FN>
  }}) : (tensor<i1>) -> tensor<2x2xf6E2M3FN>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %11 = stablehlo.dynamic_slice %10, %i, %zi, sizes = [1, 2] : (tensor<2x2xf6E2M3FN>, tensor<i32>, tensor<i32>) -> tensor<1x2xf6E2M3FN>
  %12 = stablehlo.reshape %11 : (tensor<1x2xf6E2M3FN>) -> tensor<2xf6E2M3FN>
  return %1, %2, %5, %6, %h, %8, %9, %12 : tensor<2x2xf4E2M1FN>, tensor<4xf32>, tensor<2x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>, tensor<{n}xf6E3M2FN>, tensor<2x2xf6E2M3FN>, tensor<4xf8E8M0FNU>, tensor<2xf6E2M3FN>
}}
"""
    out_text = expand(text)
    assert "f6E" not in out_text and "f4E" not in out_text and "f8E" not in out_text
    x = np.array([0.3, -2.75, 100.0, np.nan], np.float32)
    y = np.array([[3, 4], [0x21, 0x1F]], np.uint8)  # f6E2M3FN codes
    for pred in (True, False):
        outs = xla.run(out_text, x, y, np.array(pred), np.array(1, np.int32))
        c = np.array([[8, 32], [31, 1]], np.uint8)  # 1.0, -0.0, 7.5, 0.125
        stacked = np.concatenate([c, y])[1:3]
        sel = y if pred else c
        assert np.array_equal(outs[0], R.bits(R.convert(x, "f4E2M1FN")).reshape(2, 2))
        assert np.array_equal(outs[1], np.full(4, 0.5, np.float32))
        assert np.array_equal(outs[2], stacked.T)
        assert np.array_equal(outs[3], np.concatenate([[[32, 32]], stacked.T]))
        assert np.array_equal(outs[4], c_ := np.arange(n, dtype=np.uint8) % 64), c_
        assert np.array_equal(outs[5], sel)
        assert np.array_equal(outs[6], np.full(4, 126, np.uint8))
        assert np.array_equal(outs[7], sel[1])


def test_while_loop_and_bitcasts_on_xla_cpu():
    text = """
func.func @main(%x: tensor<4xf8E4M3FN>, %n: tensor<i32>) -> (tensor<4xi8>, tensor<4xf8E5M2>, tensor<i32>, tensor<4xf8E4M3FN>) {
  %b = stablehlo.bitcast_convert %x : (tensor<4xf8E4M3FN>) -> tensor<4xi8>
  %e = stablehlo.bitcast_convert %x : (tensor<4xf8E4M3FN>) -> tensor<4xf8E5M2>
  %w = stablehlo.bitcast_convert %x : (tensor<4xf8E4M3FN>) -> tensor<i32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%it = %zero, %v = %x) : tensor<i32>, tensor<4xf8E4M3FN>
  cond {
    %lt = stablehlo.compare LT, %it, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %next = stablehlo.add %it, %one : tensor<i32>
    %rev = stablehlo.reverse %v, dims = [0] : tensor<4xf8E4M3FN>
    stablehlo.return %next, %rev : tensor<i32>, tensor<4xf8E4M3FN>
  }
  return %b, %e, %w, %r#1 : tensor<4xi8>, tensor<4xf8E5M2>, tensor<i32>, tensor<4xf8E4M3FN>
}
"""
    out_text = expand(text, "types=f8E4M3FN")
    assert "f8E4M3FN" not in out_text and "f8E5M2" in out_text  # only the selected type
    codes = np.array([0x01, 0x80, 0x7F, 0xC8], np.uint8)
    b, e, w, r = xla.run(out_text, codes, np.array(3, np.int32))
    assert np.array_equal(b, codes.view(np.int8))
    assert np.array_equal(R.bits(e), codes)
    assert w == codes.view(np.int32)[0]
    assert np.array_equal(r, codes[::-1])


def test_conversions_through_f32_on_xla_cpu():
    """Integers and unselected narrow types convert through f32 (exact)."""
    text = """
func.func @main(%i: tensor<256xi8>, %u: tensor<5xui32>, %e: tensor<256xf8E4M3FN>, %f: tensor<16xf4E2M1FN>)
    -> (tensor<256xf4E2M1FN>, tensor<5xf6E3M2FN>, tensor<256xf6E2M3FN>, tensor<16xi32>, tensor<16xf8E4M3FN>) {
  %0 = stablehlo.convert %i : (tensor<256xi8>) -> tensor<256xf4E2M1FN>
  %1 = stablehlo.convert %u : (tensor<5xui32>) -> tensor<5xf6E3M2FN>
  %2 = stablehlo.convert %e : (tensor<256xf8E4M3FN>) -> tensor<256xf6E2M3FN>
  %3 = stablehlo.convert %f : (tensor<16xf4E2M1FN>) -> tensor<16xi32>
  %4 = stablehlo.convert %f : (tensor<16xf4E2M1FN>) -> tensor<16xf8E4M3FN>
  return %0, %1, %2, %3, %4 : tensor<256xf4E2M1FN>, tensor<5xf6E3M2FN>, tensor<256xf6E2M3FN>, tensor<16xi32>, tensor<16xf8E4M3FN>
}
"""
    out_text = expand(text, "types=f4E2M1FN,f6E2M3FN,f6E3M2FN")
    i = np.arange(-128, 128, dtype=np.int8)
    u = np.array([0, 3, 27, 30, 4_000_000_000], np.uint32)
    e = np.arange(256, dtype=np.uint8).view(FLOAT_TYPES["f8E4M3FN"].dtype)
    f = np.arange(16, dtype=np.uint8)
    o0, o1, o2, o3, o4 = xla.run(out_text, i, u, e, f)
    assert np.array_equal(o0, R.bits(R.convert(i.astype(np.float32), "f4E2M1FN")))
    assert np.array_equal(o1, R.bits(R.convert(u.astype(np.float64), "f6E3M2FN")))
    assert np.array_equal(o2, R.bits(R.convert(e, "f6E2M3FN")))
    f4 = R.from_bits(f, "f4E2M1FN")
    assert np.array_equal(o3, f4.astype(np.float32).astype(np.int32))
    assert np.array_equal(R.bits(o4), R.bits(R.convert(f4, "f8E4M3FN")))


# ----------------------------------------------------------------------------- errors


def _errors(text: str, pipeline: str = "builtin.module(mxlower-expand-narrow-floats)"):
    with J.make_context():
        m = J.ir.Module.parse(text)
        before = str(m)
        with pytest.raises(PassFailure) as info:
            run_pipeline(m, pipeline)
        assert str(m) == before  # nothing was rewritten
    return [(d.line, d.message) for d in info.value.diagnostics if d.severity == "error"]


def test_sub_byte_bitcast_is_an_error():
    errs = _errors("""func.func @f(%c: tensor<4x2xf4E2M1FN>) -> tensor<4xi8> {
  %0 = stablehlo.bitcast_convert %c : (tensor<4x2xf4E2M1FN>) -> tensor<4xi8>
  return %0 : tensor<4xi8>
}""")
    assert errs == [(2, "bitcast_convert between f4E2M1FN and i8 cannot be expanded: f4E2M1FN "
                        "codes are stored one per ui8, so a sub-byte type bitcasts only to "
                        "another expanded narrow type of its width or to an integer of its "
                        "width")]


def test_sub_byte_integer_bitcasts_run_on_xla_cpu():
    """f4 <-> i4/ui4 bitcasts (how code-level lowerings build f4 values) expand to integer
    converts of the one-per-ui8 codes: zero-extension from ui4 (and from i4 through ui4, so
    that code 8 = i4 -8 stays 0x08), truncation to ui4/i4."""
    text = """
func.func @main(%u: tensor<16xui4>, %s: tensor<16xi4>, %x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xui4>, tensor<16xi4>) {
  %a = stablehlo.bitcast_convert %u : (tensor<16xui4>) -> tensor<16xf4E2M1FN>
  %b = stablehlo.bitcast_convert %s : (tensor<16xi4>) -> tensor<16xf4E2M1FN>
  %af = stablehlo.convert %a : (tensor<16xf4E2M1FN>) -> tensor<16xf32>
  %bf = stablehlo.convert %b : (tensor<16xf4E2M1FN>) -> tensor<16xf32>
  %c = stablehlo.convert %x : (tensor<16xf32>) -> tensor<16xf4E2M1FN>
  %cu = stablehlo.bitcast_convert %c : (tensor<16xf4E2M1FN>) -> tensor<16xui4>
  %cs = stablehlo.bitcast_convert %c : (tensor<16xf4E2M1FN>) -> tensor<16xi4>
  return %af, %bf, %cu, %cs : tensor<16xf32>, tensor<16xf32>, tensor<16xui4>, tensor<16xi4>
}
"""
    out_text = expand(text, "types=f4E2M1FN")
    assert "f4E2M1FN" not in out_text
    codes = np.arange(16, dtype=np.uint8)
    table = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6],
                     np.float32)  # the value of each f4E2M1FN code
    signed = (((codes.astype(np.int16) + 8) % 16) - 8).astype(ml_dtypes.int4)  # same bits
    af, bf, cu, cs = xla.run(out_text, codes.astype(ml_dtypes.uint4), signed,
                             table[::-1].copy())
    assert np.array_equal(R.bits(af), R.bits(table))
    assert np.array_equal(R.bits(bf), R.bits(table))
    assert cu.astype(np.uint8).tolist() == codes[::-1].tolist()
    assert (cs.astype(np.int16) % 16).tolist() == codes[::-1].tolist()


def test_resource_constant_is_an_error():
    errs = _errors("""func.func @f() -> tensor<2xf8E4M3FN> {
  %0 = stablehlo.constant dense_resource<blob> : tensor<2xf8E4M3FN>
  return %0 : tensor<2xf8E4M3FN>
}
{-#
  dialect_resources: { builtin: { blob: "0x040000003800C000" } }
#-}""")
    assert len(errs) == 1 and errs[0][0] == 2
    assert errs[0][1].startswith("constant cannot be expanded: unsupported constant attribute")


def test_nested_anchor_is_an_error():
    """Refused when the pipeline is read (one located error), and by the pass itself when
    it is called on a function directly."""
    text = """func.func @f(%x: tensor<2xf32>) -> tensor<2xf4E2M1FN> {
  %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xf4E2M1FN>
  return %0 : tensor<2xf4E2M1FN>
}"""
    with J.make_context():
        m = J.ir.Module.parse(text)
        with pytest.raises(PipelineError, match="runs on the module, not nested under "
                           "'func.func' .it rewrites function signatures"):
            run_pipeline(m, "builtin.module(func.func(mxlower-expand-narrow-floats))")
        engine = DiagnosticEngine()
        with engine.activate(), pytest.raises(PassFailure):
            ExpandNarrowFloats().run(m.body.operations[0])
    assert "must run on builtin.module" in engine.diagnostics[0].message


# ----------------------------------------------------------------------------- MX pipeline


def _mx_pipeline_available() -> bool:
    try:
        return passes.get("mxlower-mx-to-stablehlo") is not None
    except ImportError:  # pragma: no cover - the MX passes are not in this checkout
        return False


MX_FORMATS = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"]


@pytest.mark.skipif(not _mx_pipeline_available(), reason="mxlower-mx-to-stablehlo missing")
@pytest.mark.parametrize("fmt", MX_FORMATS)
def test_mx_pipeline_runs_every_format_on_xla_cpu(fmt):
    """builtin.module(mxlower-mx-to-stablehlo,mxlower-expand-narrow-floats): quantize and
    dequantize compile and run on XLA:CPU (f6 included) and match the oracle."""
    f = get_format(fmt)
    el, sc = f.element, f.scale
    text = f"""
func.func @main(%x: tensor<4x64xf32>) -> (tensor<4x64x{el}>, tensor<4x2x{sc}>, tensor<4x64xf32>) {{
  %q, %s = "mx.quantize"(%x) {{format = "{fmt}", block_size = 32 : i64, axis = 1 : i64,
                            scale_mode = "floor"}}
      : (tensor<4x64xf32>) -> (tensor<4x64x{el}>, tensor<4x2x{sc}>)
  %d = "mx.dequantize"(%q, %s) {{format = "{fmt}", block_size = 32 : i64, axis = 1 : i64}}
      : (tensor<4x64x{el}>, tensor<4x2x{sc}>) -> tensor<4x64xf32>
  return %q, %s, %d : tensor<4x64x{el}>, tensor<4x2x{sc}>, tensor<4x64xf32>
}}
"""
    ctx = J.make_context(allow_unregistered=True)
    with ctx:
        m = J.ir.Module.parse(text)
        run_pipeline(m, "builtin.module(mxlower-mx-to-stablehlo,mxlower-expand-narrow-floats)")
        out_text = str(m)
    assert el not in out_text and sc not in out_text
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 64)) * np.exp2(rng.integers(-20, 20, (4, 1)))).astype(np.float32)
    x[0, 3] = 0.0
    q, s, d = xla.run(out_text, x)
    eq, es = R.quantize(x, fmt, axis=1, block_size=32, scale_mode="floor")
    assert np.array_equal(q, R.bits(eq))
    assert np.array_equal(s, R.bits(es))
    ed = R.dequantize(eq, es, fmt, axis=1, block_size=32)
    assert np.array_equal(d.view(np.uint32), ed.view(np.uint32))


@pytest.mark.parametrize("t", NARROW)
def test_constants_reencode_every_code(t):
    """Every code survives re-encoding, whether MLIR prints the constant in hex (> 100
    elements) or as decimals (<= 100), NaNs, -0 and e8m0's 2^-127 included."""
    n = 1 << FLOAT_TYPES[t].bits
    codes = np.arange(n, dtype=np.uint8)
    with J.make_context(), J.ir.Location.unknown():
        chunks = [codes] + [codes[i:i + 50] for i in range(0, n, 50)]
        rets, body = [], []
        for i, c in enumerate(chunks):
            tt = J.ir.RankedTensorType.get([c.size], J.ir.Type.parse(t))
            attr = J.ir.DenseElementsAttr.get(c, type=tt)
            assert ('"0x' in str(attr)) == (c.size > 100)
            body.append(f"  %c{i} = stablehlo.constant {attr}")
            rets.append((f"%c{i}", f"tensor<{c.size}x{t}>"))
        text = (f"func.func @main() -> ({', '.join(r[1] for r in rets)}) {{\n"
                + "\n".join(body) + "\n  return " + ", ".join(r[0] for r in rets) + " : "
                + ", ".join(r[1] for r in rets) + "\n}\n")
    outs = xla.run(expand(text))
    for c, got in zip(chunks, outs):
        assert np.array_equal(got, c)


# ----------------------------------------------------------------------------- dynamic shapes

DYNAMIC = """func.func @main(%x: tensor<?x4xf32>, %c: tensor<?x4xf6E2M3FN>, %h: tensor<4x?xbf16>)
    -> (tensor<?x4xf8E4M3FN>, tensor<?x4xf32>, tensor<4x?xf4E2M1FN>, tensor<?x4xf6E3M2FN>) {
  %0 = stablehlo.convert %x : (tensor<?x4xf32>) -> tensor<?x4xf8E4M3FN>
  %1 = stablehlo.convert %c : (tensor<?x4xf6E2M3FN>) -> tensor<?x4xf32>
  %2 = stablehlo.convert %h : (tensor<4x?xbf16>) -> tensor<4x?xf4E2M1FN>
  %3 = stablehlo.convert %c : (tensor<?x4xf6E2M3FN>) -> tensor<?x4xf6E3M2FN>
  return %0, %1, %2, %3 : tensor<?x4xf8E4M3FN>, tensor<?x4xf32>, tensor<4x?xf4E2M1FN>,
                          tensor<?x4xf6E3M2FN>
}
"""


def test_dynamic_shapes_expand_and_run_after_refinement():
    """Converts on tensors with dynamic dimensions (what jax.export emits for symbolic
    shapes) expand with their constants broadcast to the runtime shape; once refined to
    static shapes the module runs on XLA:CPU bit-exactly."""
    text = expand(DYNAMIC)
    assert "f8E" not in text and "f6E" not in text and "f4E" not in text
    assert "stablehlo.dynamic_broadcast_in_dim" in text and "tensor<?x4xui8>" in text
    x = probes("f32")[: (probes("f32").size // 4) * 4].reshape(-1, 4)
    c = np.resize(np.arange(64, dtype=np.uint8), x.shape)  # every f6 code, same rows as x
    h = probes("bf16").reshape(4, -1)
    refined = refine_for_inputs(text, [x, c, h])
    assert "dynamic_broadcast_in_dim" not in refined and "?" not in refined
    q, back, q4, c32 = xla.run(refined, x, c, h)
    cv = c.view(FLOAT_TYPES["f6E2M3FN"].dtype)
    assert np.array_equal(q, R.bits(R.convert(x, "f8E4M3FN")))
    assert np.array_equal(R.bits(back), R.bits(R.convert(cv, "f32")))
    assert np.array_equal(q4, R.bits(R.convert(h, "f4E2M1FN")))
    assert np.array_equal(c32, R.bits(R.convert(cv, "f6E3M2FN")))


def test_dynamic_shapes_from_jax_export():
    """A module exported with a symbolic batch size expands (no 'dynamic shapes' error)."""
    import jax
    import jax.numpy as jnp
    from jax import export

    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, 8"), jnp.float32)
    exp = export.export(jax.jit(lambda v: v.astype(jnp.float8_e5m2).astype(jnp.float32)))(spec)
    text = expand(exp.mlir_module())
    assert "f8E5M2" not in text and "stablehlo.get_dimension_size" in text
    x = probes("f32")[:8 * 1000].reshape(1000, 8)
    (got,) = xla.run(refine_for_inputs(text, [x]), x)
    want = R.convert(R.convert(x, "f8E5M2"), "f32")
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(R.bits(got)[~np.isnan(got)], R.bits(want)[~np.isnan(want)])
