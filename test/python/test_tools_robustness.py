"""Hostile input to the tools and the library under them: one clear error, never a traceback,
a crash signal or a hang (the lit side: test/lit/driver/hostile-input.mlir and
test/lit/run/mxlower-run-hostile-input.mlir)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mxlower.execution.run import RunError, run_module
from mxlower.ir.source import MAX_NESTING, check_text
from mxlower.tools import opt, run, translate
from mxlower.tools.source import CliError, write_atomic

ROOT = Path(__file__).resolve().parents[2]
RESOURCE_BLOB = (ROOT / "test" / "lit" / "Inputs" / "resource_blob.mlir").read_text()

SMALL = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""

FOREVER = """
func.func @main(%x: tensor<i32>) -> tensor<i32> {
  %r = stablehlo.while(%i = %x) : tensor<i32>
    cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      stablehlo.return %i : tensor<i32>
    }
  return %r : tensor<i32>
}
"""


# ----------------------------------------------------------------------------- check_text


def test_nesting_counts_brackets_outside_strings_and_comments():
    n = MAX_NESTING
    assert check_text("(" * n + ")" * n, "f") is None
    d = check_text("x\n" + "[" * (n + 1), "f")
    assert (d.file, d.line, d.col) == ("f", 2, n + 1)
    assert "more than 1000 levels" in d.message
    # brackets inside strings and comments, '->' and unmatched closers do not count
    quiet = '"' + "(" * 2000 + '"\n// ' + "{" * 2000 + "\n" + "(" * 10 + "->" * 2000
    assert check_text(quiet, "f") is None
    # a '->' in every region does not hide the depth of nested regions
    deep = "(" * (n + 1) + "() -> ()" * 3
    assert check_text(deep, "f") is not None


@pytest.mark.parametrize("metadata", [
    "{-# #-}",
    '{-#\n  dialect_resources: {\n    builtin: {\n      a: "0x0400000001",\n'
    '      "b.c": "0x0800000002"\n    },\n    other: {}\n  },\n'
    '  external_resources: {\n    mlir_reproducer: {\n      pipeline: "builtin.module(cse)",\n'
    '      disable_threading: true, // a comment\n      n: -3\n    }\n  }\n#-}\n',
])
def test_well_formed_file_metadata_is_accepted(metadata):
    assert check_text("module {}\n" + metadata + "\n" + metadata, "f") is None


@pytest.mark.parametrize("metadata,message", [
    ('{-# dialect_resources: { builtin: { a: "0x04 } } #-}', "not closed on its line"),
    ('{-# dialect_resources: { builtin: { a: } } #-}', "expected a string, true or false"),
    ("{-# dialect_resources: { builtin: { a: $ } } #-}", "unexpected character '$'"),
    ('{-# dialect_resources: { builtin: { a: "0x00000000AA" } } #-}', "alignment 0"),
    ('{-# dialect_resources: { builtin: { a: "0x04" ', "is not closed by '#-}'"),
    ('{-# dialect_resources: { builtin: { a: "0x04" } } } #-}', "expected ',' or '#-}'"),
    ('{-# dialect_resources { } #-}', "expected ':' after 'dialect_resources'"),
])
def test_malformed_file_metadata_is_refused(metadata, message):
    d = check_text("module {}\n" + metadata, "f")
    assert d is not None and message in d.message, d


def test_every_truncation_of_a_resource_blob_is_refused():
    """Cut anywhere inside its metadata section (with or without a final newline), the file
    never reaches MLIR's parser: the parsers crash on some of these cuts."""
    start = RESOURCE_BLOB.index("{-#")
    end = RESOURCE_BLOB.index("#-}") + 2
    for cut in range(start + 3, end):
        for tail in ("", "\n"):
            text = RESOURCE_BLOB[:cut] + tail
            assert check_text(text, "f") is not None, repr(text[start:])
    assert check_text(RESOURCE_BLOB, "f") is None


# ----------------------------------------------------------------------------- the tools


@pytest.fixture
def small(tmp_path):
    p = tmp_path / "small.mlir"
    p.write_text(SMALL)
    return p


def _nested_pipeline(n: int) -> str:
    return "builtin.module(" + "func.func(" * n + "cse" + ")" * (n + 1)


@pytest.mark.parametrize("tool,extra", [(opt, []), (run, []), (translate, ["--chip=sm_90a"])])
def test_a_pipeline_nested_5000_deep_is_one_error_line(tool, extra, small, capsys):
    rc = tool.main([str(small), "-p", _nested_pipeline(5000), *extra])
    out, err = capsys.readouterr()
    assert rc == 1 and out == ""
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3, err
    assert "error:" in err


def test_write_atomic_refuses_directories_and_empty_names(tmp_path):
    with pytest.raises(CliError, match="is a directory"):
        write_atomic(str(tmp_path), "x")
    with pytest.raises(CliError, match="output file name is empty"):
        write_atomic("", "x")
    with pytest.raises(CliError, match="no such directory"):
        write_atomic(str(tmp_path / "missing" / "x.mlir"), "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no temporary file left


def test_zero_size_tensors_on_every_backend():
    text = """
    func.func @main(%a: tensor<0x4xf32>, %b: tensor<3x0xf8E4M3FN>)
        -> (tensor<0x4xf32>, tensor<3x0xf8E4M3FN>) {
      %0 = stablehlo.add %a, %a : tensor<0x4xf32>
      return %0, %b : tensor<0x4xf32>, tensor<3x0xf8E4M3FN>
    }
    """
    for backend in ("interpreter", "xla", "llvm"):
        a, b = run_module(text, backend=backend)
        assert a.shape == (0, 4) and a.dtype == np.float32, backend
        assert b.shape == (3, 0) and b.dtype.name == "float8_e4m3fn", backend


def test_run_module_timeout_stops_a_loop_that_never_ends():
    with pytest.raises(RunError, match=r"did not finish within 1 s"):
        run_module(FOREVER, [np.array(0, np.int32)], backend="interpreter", timeout=1)
    (got,) = run_module(SMALL, [np.ones(4, np.float32)], backend="interpreter", timeout=300)
    assert got.tolist() == [2.0] * 4


@pytest.mark.parametrize("limit", [1e300, 1e8, float("nan"), -1.0])
def test_run_module_refuses_a_time_limit_beyond_the_platform(limit):
    """A limit too large for the child-process wait (1e300 raised OverflowError there)."""
    with pytest.raises(RunError, match=r"at most 10000000 seconds|positive number"):
        run_module(SMALL, [np.ones(4, np.float32)], backend="interpreter", timeout=limit)


def test_run_module_timeout_inf_is_no_limit():
    (got,) = run_module(SMALL, [np.ones(4, np.float32)], backend="interpreter",
                        timeout=float("inf"))
    assert got.tolist() == [2.0] * 4


def test_an_op_the_interpreter_cannot_run_is_an_error_not_an_abort():
    """StableHLO's interpreter aborts the process (LLVM ERROR) on ops outside StableHLO and on
    some StableHLO ops: it runs in a child process, and the abort is an error naming the op."""
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %0 = arith.addf %x, %x : tensor<2xf32>
      return %0 : tensor<2xf32>
    }
    """
    with pytest.raises(RunError, match=r"the StableHLO interpreter failed \(its process was "
                       r"killed by SIGABRT\): Unsupported op: %0 = arith.addf"):
        run_module(text, backend="interpreter")


def test_run_module_rejects_a_negative_seed():
    with pytest.raises(RunError, match="non-negative"):
        run_module(SMALL, seed=-1)


def test_a_registered_type_reaches_the_child_processes():
    """A narrow float registered in this process runs in the LLVM engine's worker and in the
    interpreter's child process, which register it from the request."""
    from mxlower import types
    from mxlower.execution import llvm
    from mxlower.types import FloatType

    t = FloatType("f8E4M3", "float8_e4m3", 8, 4, 3, 7, True, "ieee", "inf", 0x7C)
    text = ("func.func @main(%x: tensor<4xf32>) -> tensor<4xf8E4M3> {\n"
            "  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf8E4M3>\n"
            "  return %0 : tensor<4xf8E4M3>\n}\n")
    x = np.array([1.0, -0.5, 240.0, 3.0e-3], np.float32)
    with types.withdrawn(t.mlir):  # built in now: withdrawn here, registered again
        types.register(t)
        with llvm.compile(text) as h:  # isolated: the worker process
            (got,) = h.run("main", x)
        assert got.dtype == t.dtype and got.view(np.uint8).tolist() == (
            x.astype(t.dtype).view(np.uint8).tolist())
        (back,) = run_module(text, [x], backend="interpreter")
        assert back.view(np.uint8).tolist() == got.view(np.uint8).tolist()


def test_condense_prints_each_distinct_diagnostic_once_and_caps_the_rest():
    from mxlower.diagnostics import MAX_NOTE_LINES, MAX_SHOWN, Diagnostic, condense
    dump = Diagnostic("note", "see current operation:\n" + "\n".join(["x"] * 100), "f", 1, 1)
    same = [Diagnostic("error", "bad", "f", 1, 1, [dump]) for _ in range(300)]
    (d,) = condense(same)
    assert d.notes[0].message.count("\n") == MAX_NOTE_LINES
    assert "89 more lines not shown" in d.notes[0].message
    assert d.notes[1].message == "the same error was reported 300 times here (shown once)"
    places = [Diagnostic("error", "bad", "f", line, 1) for line in range(1, 11)]
    out = condense(places)
    assert [x.line for x in out] == [1, 2, 3]
    assert out[-1].notes[-1].message == ("the same error at 7 more places (lines 4, 5, 6, 7, 8, "
                                         "9, 10), not shown")
    many = [Diagnostic("error", f"bad {i}", "f", i, 1) for i in range(100)]
    out = condense(many)
    assert len(out) == MAX_SHOWN + 1
    assert out[-1].message == f"{100 - MAX_SHOWN} more diagnostics not shown ({100 - MAX_SHOWN} of them errors)"


def test_a_flood_of_one_error_is_a_few_lines(tmp_path, capsys):
    text = "\n".join(f"func.func @f{i}(%a: tensor<4xf32>) -> tensor<4xf32> {{\n"
                     f"  return %a : tensor<4xf32>\n}}" for i in range(300))
    p = tmp_path / "many.mlir"
    p.write_text(text)
    assert opt.main([str(p), "-p", "builtin.module(func.func(symbol-dce))"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) < 60, err
    assert "the same error at 297 more places" in err


ELIDED = """
func.func @main() -> tensor<0x4xui8> {
  %0 = arith.constant dense_resource<__elided__> : tensor<0x4xui8>
  return %0 : tensor<0x4xui8>
}
"""
ELIDED_F32 = """
func.func @main() -> tensor<2x4xf32> {
  %0 = stablehlo.constant dense_resource<__elided__> : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
"""
EMPTY_BLOB = """
func.func @main() -> tensor<0x4xi8> {
  %0 = stablehlo.constant dense_resource<blob0> : tensor<0x4xi8>
  return %0 : tensor<0x4xi8>
}
{-#
  dialect_resources: {
    builtin: {
      blob0: "0x01000000"
    }
  }
#-}
"""


@pytest.mark.parametrize("backend", ["xla", "interpreter", "llvm"])
@pytest.mark.parametrize("text", [ELIDED, ELIDED_F32], ids=["empty-ui8", "f32"])
def test_an_elided_resource_is_refused_before_any_backend(text, backend):
    """It aborted upstream's LLVM translation (SIGABRT in the worker), and the StableHLO
    interpreter read garbage for it."""
    with pytest.raises(RunError) as info:
        run_module(text, backend=backend)
    msg = str(info.value)
    assert "dense_resource<__elided__>, which holds no data" in msg and ":3:8:" in msg
    assert "SIGABRT" not in msg


def test_an_empty_resource_is_refused_by_the_llvm_backend_and_runs_elsewhere():
    with pytest.raises(RunError, match=r":3:8: error: attribute 'value' is "
                       r"dense_resource<blob0> with no elements, which the LLVM backend"):
        run_module(EMPTY_BLOB, backend="llvm")
    (got,) = run_module(EMPTY_BLOB, backend="interpreter")
    assert got.shape == (0, 4)


def test_an_elided_resource_is_refused_before_the_hand_over(tmp_path, capsys):
    p = tmp_path / "e.mlir"
    p.write_text(ELIDED.replace("ui8", "i8"))
    assert opt.main([str(p), "-p", "builtin.module(convert-to-llvm)"]) == 1
    err = capsys.readouterr().err
    assert "e.mlir:3:8: error: attribute 'value' is dense_resource<__elided__>" in err


# attributes holding dense arrays of an element type the MLIR Python bindings cannot type
# (reading one raises, or through a NamedAttribute aborts): found by test_fuzz's mutants
F8_ARRAY = "array<f8E8M0FNU: 0.0, 1.0>"
ODD_ATTRS = f"""
func.func @main(%x: memref<4xi1>) attributes {{t = {F8_ARRAY}}} {{
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] {{u = {F8_ARRAY}}} : memref<4xi1>
  return
}}
"""
ODD_TABLE = """
func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = "mx.cast"(%x) {number = NUMBER, table = TABLE} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}
"""


@pytest.mark.parametrize("text,args,rc,message", [
    (ODD_TABLE.replace("NUMBER", '"e2m1fo"').replace("TABLE", F8_ARRAY),
     ["--mxlower-gpu-to-nvvm", "--allow-unregistered-dialect"], 1, "cannot hand the module"),
    (ODD_TABLE.replace("NUMBER", '"lut"').replace("TABLE", F8_ARRAY), ["--mxlower-verify-mx"],
     1, "x.mlir:3:8: error: 'mx.cast' op attribute 'table' must be an array<f32: ...>"),
    (ODD_TABLE.replace("NUMBER", F8_ARRAY).replace(", table = TABLE", ""),
     ["--mxlower-verify-mx"], 1, "attribute 'number' must be a string"),
    (ODD_ATTRS, ["--mxlower-widen-bool-memrefs"], 0, ""),
    (ODD_ATTRS, ["--mxlower-lower-narrow-floats-to-llvm"], 1,
     "x.mlir:2:1: error: 'func.func' has an attribute 't' holding a narrow float type"),
])
def test_attributes_the_bindings_cannot_type_are_read_safely(tmp_path, capsys, text, args, rc,
                                                             message):
    p = tmp_path / "x.mlir"
    p.write_text(text)
    assert opt.main([str(p), *args]) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert message in err, err


UNSIGNED_OPS = """
func.func @main(%a: tensor<6xUT>, %b: tensor<6xUT>) -> (tensor<6xUT>, tensor<6xUT>, tensor<6xUT>,
    tensor<6xi1>, tensor<6xf32>, tensor<6xUT>, tensor<6xUT>, tensor<6xUT>, tensor<6xUT>,
    tensor<6xi64>, tensor<6xUT>, tensor<UT>) {
  %c = stablehlo.constant dense<[200, 1, 255, 128, 3, 7]> : tensor<6xUT>
  %a2 = stablehlo.add %a, %c : tensor<6xUT>
  %0 = stablehlo.divide %a2, %b : tensor<6xUT>
  %1 = stablehlo.remainder %a2, %b : tensor<6xUT>
  %2 = stablehlo.compare GT, %a2, %b : (tensor<6xUT>, tensor<6xUT>) -> tensor<6xi1>
  %3 = stablehlo.convert %a2 : (tensor<6xUT>) -> tensor<6xf32>
  %4 = stablehlo.maximum %a2, %b : tensor<6xUT>
  %5 = stablehlo.minimum %a2, %b : tensor<6xUT>
  %s = stablehlo.constant dense<1> : tensor<6xUT>
  %6 = stablehlo.shift_right_logical %a2, %s : tensor<6xUT>
  %7 = stablehlo.shift_right_arithmetic %a2, %s : tensor<6xUT>
  %8 = stablehlo.convert %a2 : (tensor<6xUT>) -> tensor<6xi64>
  %9 = stablehlo.multiply %a2, %b : tensor<6xUT>
  %z = stablehlo.constant dense<0> : tensor<UT>
  %10 = stablehlo.reduce(%a2 init: %z) applies stablehlo.maximum across dimensions = [0]
      : (tensor<6xUT>, tensor<UT>) -> tensor<UT>
  return %a2, %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<6xUT>, tensor<6xUT>,
      tensor<6xUT>, tensor<6xi1>, tensor<6xf32>, tensor<6xUT>, tensor<6xUT>, tensor<6xUT>,
      tensor<6xUT>, tensor<6xi64>, tensor<6xUT>, tensor<UT>
}
"""


@pytest.mark.parametrize("ut, dt", [("ui8", np.uint8), ("ui16", np.uint16), ("ui32", np.uint32),
                                    ("ui64", np.uint64)])
def test_unsigned_integers_run_on_the_llvm_backend_as_on_xla(ut, dt):
    """The LLVM backend refused any module with unsigned tensors ("op was not bufferized");
    the signedness-dependent ops (compare, divide, remainder, convert, shifts, max/min) give
    XLA's results, values with the top bit set included."""
    a = np.array([100, 254, 0, 127, 250, 9], dtype=dt)
    b = np.array([3, 7, 255, 1, 2, 200], dtype=dt)
    text = UNSIGNED_OPS.replace("UT", ut)
    want = run_module(text, [a, b], backend="xla")
    got = run_module(text, [a, b], backend="llvm")
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.dtype == w.dtype and np.array_equal(g, w), (i, w, g)


def test_stochastic_cast_and_unpack_run_on_the_llvm_backend():
    """Both carry unsigned tensors (the ui32 random bits, the ui8 packed bytes)."""
    from mxlower import reference as R
    rng = np.random.default_rng(0)
    h = rng.standard_normal((4, 64)).astype(np.float32)
    r = rng.integers(0, 2**32, (4, 64), dtype=np.uint32)
    p = rng.integers(0, 256, (4, 32), dtype=np.uint8)
    text = """
    func.func @main(%h: tensor<4x64xf32>, %r: tensor<4x64xui32>, %p: tensor<4x32xui8>)
        -> (tensor<4x64xf32>, tensor<4x64xf4E2M1FN>) {
      %y = "mx.cast"(%h, %r) {number = "int4", scale = "e8m0_t32", roundmode = "stochastic"}
          : (tensor<4x64xf32>, tensor<4x64xui32>) -> tensor<4x64xf32>
      %u = "mx.unpack"(%p) {axis = 1 : i64} : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
      return %y, %u : tensor<4x64xf32>, tensor<4x64xf4E2M1FN>
    }"""
    y, u = run_module(text, [h, r, p], backend="llvm",
                      pipeline="builtin.module(mxlower-mx-to-stablehlo)")
    np.testing.assert_array_equal(y, R.cast(h, "int4", "e8m0_t32", roundmode="stochastic",
                                            rbits=r))
    np.testing.assert_array_equal(R.bits(u), R.bits(R.unpack(p, 4, axis=1)))
