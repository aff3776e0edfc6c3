"""mxlower-run: inputs, outputs, comparison and error handling (in process, through main())."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.ir import literals as L
from mxlower.ir.signature import Signature, TensorSpec
from mxlower.tools import run as T

MODULE = """
func.func @main(%x: tensor<2x32xf32>, %k: tensor<i32>) -> (tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>, tensor<i32>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<2x32xf32>) -> (tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>)
  %k2 = stablehlo.add %k, %k : tensor<i32>
  return %q, %s, %k2 : tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>, tensor<i32>
}
func.func @other(%x: tensor<3xbf16>) -> tensor<3xbf16> {
  %0 = stablehlo.negate %x : tensor<3xbf16>
  return %0 : tensor<3xbf16>
}
"""
PIPE = "builtin.module(mxlower-mx-to-stablehlo)"


@pytest.fixture
def module_file(tmp_path):
    p = tmp_path / "m.mlir"
    p.write_text(MODULE)
    return p


def _run(capsys, *argv):
    rc = T.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _inputs(tmp_path, x=None, k=3):
    x = np.linspace(-4, 4, 64, dtype=np.float32).reshape(2, 32) if x is None else x
    p = tmp_path / "in.npz"
    np.savez(p, arg0=x, arg1=np.array(k, np.int32))
    return p, x


def test_run_prints_literals_that_match_the_reference(tmp_path, module_file, capsys):
    inp, x = _inputs(tmp_path)
    rc, out, err = _run(capsys, module_file, "-p", PIPE, "-i", inp, "--print-bits")
    assert rc == 0, err
    q, s = R.quantize(x, "mxfp8_e4m3", axis=1)
    lines = out.splitlines()
    codes = [f"0x{v:02X}" for v in R.bits(q).ravel()]
    assert lines[0] == ("%0 = dense<[[" + ", ".join(codes[:32]) + "], ["
                        + ", ".join(codes[32:]) + "]]> : tensor<2x32xf8E4M3FN>")
    assert lines[1] == (f"%1 = dense<[[0x{R.bits(s)[0, 0]:02X}], [0x{R.bits(s)[1, 0]:02X}]]>"
                        " : tensor<2x1xf8E8M0FNU>")
    assert lines[2] == "%2 = dense<0x00000006> : tensor<i32>"


def test_output_npz_holds_codes_and_compares_equal(tmp_path, module_file, capsys):
    inp, _ = _inputs(tmp_path)
    out_npz = tmp_path / "out.npz"
    rc, _, err = _run(capsys, module_file, "-p", PIPE, "-i", inp, "-o", out_npz, "--no-print")
    assert rc == 0, err
    with np.load(out_npz) as z:
        assert z.files == ["result0", "result1", "result2"]
        assert z["result0"].dtype == np.uint8 and z["result2"].tolist() == 6
    rc, out, _ = _run(capsys, module_file, "-p", PIPE, "-i", inp, "--compare", out_npz,
                      "--no-print")
    assert rc == 0
    assert out.count("OK (bit-exact") == 3


def test_compare_mismatch_exits_2_and_tolerance_is_applied(tmp_path, module_file, capsys):
    inp, _ = _inputs(tmp_path)
    ref = tmp_path / "ref.npz"
    rc, _, _ = _run(capsys, module_file, "-p", PIPE, "-i", inp, "-o", ref, "--no-print")
    inp2, _ = _inputs(tmp_path, k=4)
    rc, out, _ = _run(capsys, module_file, "-p", PIPE, "-i", inp2, "--compare", ref,
                      "--no-print")
    assert rc == 2
    assert "// compare result #2 with" in out
    assert "MISMATCH (bit-exact): 1 of 1 elements differ; first at []: got 8, expected 6" in out
    rc, out, _ = _run(capsys, module_file, "-p", PIPE, "-i", inp2, "--compare", ref,
                      "--no-print", "--atol", "2.5")
    assert rc == 0 and "OK (rtol 0, atol 2.5" in out


def test_random_inputs_are_seeded_and_typed():
    sig = Signature("main", tuple(TensorSpec(e, s) for s, e in [
        ((4, 8), "f32"), ((4, 1), "f8E8M0FNU"), ((8,), "f4E2M1FN"), ((2,), "i1"),
        ((3,), "ui8")]), ())
    a = T.random_inputs(sig, 5)
    b = T.random_inputs(sig, 5)
    c = T.random_inputs(sig, 6)
    assert all(np.array_equal(R.bits(x) if x.dtype.kind == "V" or x.dtype.itemsize == 1
                              and x.dtype != np.bool_ else x, R.bits(y) if x.dtype.kind == "V"
                              or x.dtype.itemsize == 1 and x.dtype != np.bool_ else y)
               for x, y in zip(a, b))
    assert not np.array_equal(a[0], c[0])
    assert [x.dtype for x in a] == [np.float32, ml_dtypes.float8_e8m0fnu,
                                    ml_dtypes.float4_e2m1fn, np.bool_, np.uint8]
    codes = R.bits(a[1])
    assert codes.min() >= 119 and codes.max() <= 135  # 2^-8 .. 2^8
    assert not np.isnan(a[2].astype(np.float32)).any()


def test_function_selection_renames_main(tmp_path, module_file, capsys):
    x = np.array([1.5, -0.0, 3.0], ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", R.bits(x))  # bf16 data travels as its uint16 codes
    rc, out, err = _run(capsys, module_file, "-p", PIPE, "-f", "other", "-i", tmp_path / "x.npy")
    assert rc == 0, err
    assert out.strip() == "%0 = dense<[-1.5, 0.0, -3.0]> : tensor<3xbf16>"


def test_interpreter_backend_agrees_with_xla(tmp_path, module_file, capsys):
    inp, _ = _inputs(tmp_path)
    _, xla, _ = _run(capsys, module_file, "-p", PIPE, "-i", inp, "--print-bits")
    rc, interp, err = _run(capsys, module_file, "-p", PIPE, "-i", inp, "--print-bits",
                           "--backend=interpreter")
    assert rc == 0, err
    assert interp == xla


@pytest.mark.parametrize("argv,message", [
    (["-f", "missing"], "no function @missing in the module (functions: @main, @other)"),
    (["-i", "ONE"], "@main takes 2 arguments but 1 input array was given"),
    (["-i", "BADTYPE"], "argument #0 of @main is tensor<2x32xf32> but {p}[arg0] holds f64"),
    (["-i", "BADSHAPE"], "argument #0 of @main is tensor<2x32xf32> but {p}[arg0] has shape"),
    (["-i", "NOFILE"], "could not open input file"),
    (["-o", "out.txt"], "the output file must end in .npz"),
    ([], "the module still contains mx.quantize ops"),
])
def test_bad_input_is_a_clear_error(tmp_path, module_file, capsys, argv, message):
    p = tmp_path / "bad.npz"
    files = {"ONE": tmp_path / "one.npy", "BADTYPE": p, "BADSHAPE": p,
             "NOFILE": tmp_path / "nope.npy"}
    np.save(files["ONE"], np.zeros((2, 32), np.float32))
    if "BADTYPE" in argv:
        np.savez(p, arg0=np.zeros((2, 32)), arg1=np.array(1, np.int32))
    if "BADSHAPE" in argv:
        np.savez(p, arg0=np.zeros((32, 2), np.float32), arg1=np.array(1, np.int32))
    argv = [str(files.get(a, a)) for a in argv]
    pipe = ["-p", PIPE] if message != "the module still contains mx.quantize ops" else []
    rc, out, err = _run(capsys, module_file, *pipe, *argv)
    assert rc == 1
    assert err.startswith("mxlower-run: error: ")
    assert message.format(p=p) in err
    assert "Traceback" not in err and out == ""


def test_pipeline_errors_are_located(tmp_path, capsys):
    f = tmp_path / "bad.mlir"
    f.write_text(MODULE.replace("block_size = 32", "block_size = 24"))
    rc, _, err = _run(capsys, f, "-p", PIPE)
    assert rc == 1
    assert f"{f}:3:12: error: 'mx.quantize' op blocked dimension 1 of the input has size 32, " \
           "which block size 24 does not divide" in err


def test_stdin_input(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(MODULE))
    rc, out, err = _run(capsys, "-", "-p", PIPE, "--seed", "1", "--no-print")
    assert rc == 0 and out == "" and err == ""


@pytest.mark.parametrize("elt,values", [
    ("f32", np.array([0.1, -0.0, np.nan, -np.inf, 1e-45, 3.4028235e38], np.float32)),
    ("bf16", np.array([1.5, -2.0, np.inf, 1e-40], ml_dtypes.bfloat16)),
    ("f16", np.array([65504.0, -6e-8, 0.333], np.float16)),
    ("f8E4M3FN", R.from_bits(np.arange(0, 256, 37), "f8E4M3FN")),
    ("f8E8M0FNU", R.from_bits(np.array([0, 1, 127, 254, 255]), "f8E8M0FNU")),
    ("f4E2M1FN", R.from_bits(np.arange(16), "f4E2M1FN")),
    ("f6E3M2FN", R.from_bits(np.arange(0, 64, 9), "f6E3M2FN")),
    ("i8", np.array([-128, 0, 127], np.int8)),
    ("i1", np.array([True, False])),
])
@pytest.mark.parametrize("bits", [False, True])
def test_literals_parse_back_exactly(elt, values, bits):
    """Printed results are MLIR dense literals that parse back to the same bits."""
    from mxlower.bindings import jaxlib as J

    a = values.reshape(1, -1)
    text = L.format_literal(a, elt, bits=bits)
    with J.make_context():
        attr = J.ir.Attribute.parse(text)
    for source in (attr, str(attr), text):  # the bindings' attribute, MLIR's text, ours
        back = L.parse_dense(source, a.shape, elt)
        if a.dtype == np.bool_:
            assert back.tolist() == a.tolist()
        else:
            assert R.bits(back).tolist() == R.bits(a).tolist(), text


def test_literals_of_no_elements_and_hex_blobs():
    """Zero-size arrays print as MLIR does (dense<>); a literal printed as one hex string of
    its storage reads back; a literal with the wrong element count is an error."""
    from mxlower.bindings import jaxlib as J

    with J.make_context():
        for shape in ((0,), (0, 4), (3, 0)):
            text = L.format_literal(np.zeros(shape, np.float32), "f32")
            assert text.startswith("dense<> : ")
            assert str(J.ir.Attribute.parse(text)) == text
            assert L.parse_dense(text, shape, "f32").shape == shape
        codes = np.arange(200, dtype=np.uint8) % 16
        blob = J.ir.Attribute.parse(f"dense<{codes.tolist()}> : tensor<200xi8>")
        assert '"0x' in str(blob)  # MLIR prints a large attribute as one hex string
    back = L.parse_dense(str(blob).replace("xi8>", "xf4E2M1FN>"), (200,), "f4E2M1FN")
    assert R.bits(back).tolist() == codes.tolist()
    assert L.element_codes("1.5", "f4E2M1FN", 1).tolist() == [3]
    assert L.element_codes("-0.0", "f6E2M3FN", 2).tolist() == [0x20, 0x20]  # a splat
    with pytest.raises(L.LiteralError, match="expected 3 elements of f32, found 2"):
        L.parse_dense("dense<[1.0, 2.0]> : tensor<3xf32>", (3,), "f32")


def test_run_module_library_api():
    x = np.ones((2, 32), np.float32)
    outs = T.run_module(MODULE, [x, np.array(2, np.int32)], pipeline=PIPE)
    assert R.bits(outs[1]).tolist() == [[119], [119]] and outs[2] == 4  # 2^(0 - 8)
    with pytest.raises(T.RunError, match="takes 2 arguments"):
        T.run_module(MODULE, [x], pipeline=PIPE)
    with pytest.raises(T.RunError, match="still contains"):
        T.run_module(MODULE, [x, np.array(2, np.int32)])


BAD_FORMAT = ('func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
              '  %y = "mx.quantize"(%x) {format = "nope"} : (tensor<4xf32>) -> tensor<4xf32>\n'
              '  return %y : tensor<4xf32>\n}\n')


@pytest.mark.parametrize("module,pipeline,want", [
    (BAD_FORMAT, PIPE, "<module>:2:8: error: 'mx.quantize' op unknown MX format 'nope'"
                       ".*\n.*\"mx.quantize\".*\n +\\^"),
    (BAD_FORMAT, "builtin.module(nope)", "<pass-pipeline>:1:16: error: unknown pass 'nope'"),
    ("func.func @main( {", None, "<module>:1:17: error: expected non-function type"),
    (BAD_FORMAT, "builtin.module(mxlower-mx-to-stablehlo, convert-arith-to-llvm)",
     "hands the module to upstream MLIR"),
])
def test_run_module_errors_are_run_errors_with_locations(module, pipeline, want):
    """The library shares the command line's parse/verify/pipeline path: every failure is a
    RunError whose message holds the located diagnostics."""
    with pytest.raises(T.RunError, match=want):
        T.run_module(module, pipeline=pipeline)


@pytest.mark.parametrize("elt", ["f8E4M3FN", "f6E2M3FN", "f4E2M1FN", "bf16"])
def test_interpreter_results_printed_as_a_hex_blob(elt):
    """MLIR prints large dense results as one hex string of their storage; the interpreter
    backend reads it (it used to fail with OverflowError from about 100 elements)."""
    x = (np.random.default_rng(0).standard_normal((16, 16)) * 4).astype(np.float32)
    text = (f"func.func @main(%x: tensor<16x16xf32>) -> tensor<16x16x{elt}> {{\n"
            f"  %0 = stablehlo.convert %x : (tensor<16x16xf32>) -> tensor<16x16x{elt}>\n"
            f"  return %0 : tensor<16x16x{elt}>\n}}\n")
    (y,) = T.run_module(text, [x], backend="interpreter")
    assert y.shape == (16, 16)
    assert np.array_equal(R.bits(y), R.bits(R.convert(x, elt)))


def test_run_module_verifies_an_ir_module_it_is_given():
    """An ``ir`` module that does not verify is a RunError with the located diagnostic."""
    from mxlower.bindings import jaxlib as J

    text = ('func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
            '  %y = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf16>\n'
            '  return %x : tensor<4xf32>\n}\n')
    with J.make_context(allow_unregistered=True) as ctx:
        m = J.ir.Module.parse(text)
        ret = m.body.operations[0].regions[0].blocks[0].operations[1]
        ret.operands[0] = m.body.operations[0].regions[0].blocks[0].operations[0].result
    with pytest.raises(T.RunError, match="type of return operand 0 .* doesn't match"):
        T.run_module(m, [np.ones(4, np.float32)])


def test_interpreter_e8m0_convert_is_not_mx_exact_but_its_expansion_is():
    """Canary for the documented caveat of --backend=interpreter: StableHLO's interpreter
    converts 0, negatives and subnormals to f8E8M0FNU differently from MX-SEMANTICS section 2
    (and XLA); after mxlower-expand-narrow-floats it agrees.  If the first assertion fails,
    the interpreter changed: update the caveat in mxlower-run's help and the README."""
    x = np.array([0.0, -2.0, 2.0 ** -127, 3.0], np.float32)
    text = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf8E8M0FNU> {\n"
            "  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf8E8M0FNU>\n"
            "  return %0 : tensor<4xf8E8M0FNU>\n}\n")
    want = R.bits(R.convert(x, "f8E8M0FNU"))
    (native,) = T.run_module(text, [x], backend="interpreter")
    assert not np.array_equal(R.bits(native), want)
    (xla,) = T.run_module(text, [x])
    assert np.array_equal(R.bits(xla), want)
    (expanded,) = T.run_module(text, [x], backend="interpreter",
                               pipeline="builtin.module(mxlower-expand-narrow-floats)")
    assert np.array_equal(R.bits(expanded), want)


DYNAMIC = """func.func @main(%x: tensor<?x64xf32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64} : (tensor<?x64xf32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>)
  return %q, %s : tensor<?x64xf8E4M3FN>, tensor<?x2xf8E8M0FNU>
}
"""


@pytest.mark.parametrize("backend", ["xla", "interpreter", "llvm"])
def test_dynamic_shapes_run_at_the_inputs_shapes(backend):
    """A module with dynamic dimensions (e.g. from jax.export) runs at the shapes of its
    inputs: @main takes their static types and shape refinement does the rest."""
    for rows in (3, 8):
        x = (np.random.default_rng(rows).standard_normal((rows, 64)) * 8).astype(np.float32)
        q, sc = T.run_module(DYNAMIC, [x], pipeline=PIPE, backend=backend)
        eq, es = R.quantize(x, "mxfp8_e4m3", axis=1)
        assert q.shape == (rows, 64) and sc.shape == (rows, 2)
        assert np.array_equal(R.bits(q), R.bits(eq)) and np.array_equal(R.bits(sc), R.bits(es))


def test_dynamic_shapes_need_inputs_and_results_that_refine():
    with pytest.raises(T.RunError, match="a dynamic shape needs its data as an input"):
        T.run_module(DYNAMIC, pipeline=PIPE)
    with pytest.raises(T.RunError, match=r"is tensor<\?x64xf32> but input #0 has shape"):
        T.run_module(DYNAMIC, [np.zeros((2, 32), np.float32)], pipeline=PIPE)
    iota = ("func.func @main(%n: tensor<1xi32>) -> tensor<?xf32> {\n"
            "  %0 = stablehlo.dynamic_iota %n, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>\n"
            "  return %0 : tensor<?xf32>\n}\n")
    with pytest.raises(T.RunError, match="stay dynamic after shape refinement"):
        T.run_module(iota, [np.array([4], np.int32)])
