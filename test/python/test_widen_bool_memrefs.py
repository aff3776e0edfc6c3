"""mxlower-widen-bool-memrefs: boolean buffers through mxlower-stablehlo-to-llvm and llvm_exec.

Upstream MLIR 22's convert-to-llvm asserts on a memref.store to a memref of i1, which
bufferization creates whenever a boolean tensor is materialized (a compare used by several
selects, a function returning a bool tensor).  The pass stores bools as one byte each; these
tests run such modules on the LLVM backend against XLA:CPU and NumPy, and check the ops the
pass refuses.  The lit test (test/lit/passes/mxlower-widen-bool-memrefs.mlir) checks the IR.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from mxlower.bindings import jaxlib as J
from mxlower.bindings import upstream
from mxlower.diagnostics import DiagnosticEngine, PassFailure
from mxlower.execution import llvm
from mxlower.pipeline.manager import run_pipeline
from mxlower.tools.run import run_module

pytest.importorskip("mlir.execution_engine")

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLVM_BACKEND = ROOT / "test" / "lit" / "run" / "llvm-backend.mlir"

#: a compare whose i1 result feeds two selects: fusion keeps it, so it is bufferized
COMPARE_TWO_SELECTS = """
func.func @main(%x: tensor<6x33xf32>, %y: tensor<6x33xf32>) -> (tensor<6x33xf32>, tensor<6x33xf32>) {
  %c = stablehlo.compare GT, %x, %y : (tensor<6x33xf32>, tensor<6x33xf32>) -> tensor<6x33xi1>
  %a = stablehlo.select %c, %x, %y : (tensor<6x33xi1>, tensor<6x33xf32>, tensor<6x33xf32>) -> tensor<6x33xf32>
  %b = stablehlo.select %c, %y, %x : (tensor<6x33xi1>, tensor<6x33xf32>, tensor<6x33xf32>) -> tensor<6x33xf32>
  return %a, %b : tensor<6x33xf32>, tensor<6x33xf32>
}
"""

#: bool tensors in and out: a compare result, a bool argument and a bool constant
BOOL_RESULTS = """
func.func @main(%x: tensor<?xf32>, %y: tensor<?xf32>, %m: tensor<?xi1>)
    -> (tensor<?xi1>, tensor<?xi1>, tensor<?xf32>, tensor<4xi1>) {
  %c = stablehlo.compare LT, %x, %y : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xi1>
  %a = stablehlo.and %c, %m : tensor<?xi1>
  %s = stablehlo.select %m, %x, %y : (tensor<?xi1>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  %k = stablehlo.constant dense<[true, false, false, true]> : tensor<4xi1>
  return %c, %a, %s, %k : tensor<?xi1>, tensor<?xi1>, tensor<?xf32>, tensor<4xi1>
}
"""

#: a bool tensor used twice is materialized, also on the vector path (transfer ops on i1)
STATIC_BOOLS = """
func.func @main(%x: tensor<70xi32>, %y: tensor<70xi32>) -> (tensor<70xi1>, tensor<70xi32>) {
  %c = stablehlo.compare GE, %x, %y : (tensor<70xi32>, tensor<70xi32>) -> tensor<70xi1>
  %n = stablehlo.not %c : tensor<70xi1>
  %s = stablehlo.select %n, %x, %y : (tensor<70xi1>, tensor<70xi32>, tensor<70xi32>) -> tensor<70xi32>
  return %c, %s : tensor<70xi1>, tensor<70xi32>
}
"""


def _same(got, want):
    """Bit for bit (XLA's f6 results are the uint8 codes mxlower-expand-narrow-floats makes)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
        assert g.shape == w.shape and g.dtype.itemsize == w.dtype.itemsize
        assert g.dtype == w.dtype or w.dtype == np.uint8
        assert g.view(np.uint8).tobytes() == w.view(np.uint8).tobytes()


# ============================================================================== vs XLA


def test_llvm_backend_lit_module_agrees_with_xla():
    text = LLVM_BACKEND.read_text()
    pipe = "builtin.module(mxlower-mx-to-stablehlo)"
    # XLA:CPU has no f6 conversions: expand them there (the LLVM path converts f6 itself)
    want = run_module(text, pipeline="builtin.module(mxlower-mx-to-stablehlo, "
                      "mxlower-expand-narrow-floats)", seed=3)
    got = run_module(text, pipeline=pipe, seed=3, backend="llvm")
    _same(got, want)


def test_llvm_backend_lit_module_through_llvm_exec():
    text = LLVM_BACKEND.read_text()
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        shlo = str(run_pipeline(m, "builtin.module(mxlower-mx-to-stablehlo)"))
    assert "compare" in shlo
    x = np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32) * 8
    with llvm.compile(shlo, keep_llvm=True) as h:
        assert "i1>" not in h.llvm_mlir.replace("vector<", "")  # no memref of i1 left
        got = h.run("main", x)
    want = run_module(text, [x], pipeline="builtin.module(mxlower-mx-to-stablehlo, "
                      "mxlower-expand-narrow-floats)")
    _same(got, want)


@pytest.mark.parametrize("opts", [{}, {"out_params": True}, {"vector_width": 8}],
                         ids=["default", "out-params", "vector-width"])
def test_materialized_compare_agrees_with_xla(opts):
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((6, 33)).astype(np.float32) for _ in range(2))
    y[0, :5] = x[0, :5]  # ties
    with llvm.compile(COMPARE_TWO_SELECTS, keep_llvm=True, **opts) as h:
        got = h.run("main", x, y)
    _same(got[:2], run_module(COMPARE_TWO_SELECTS, [x, y]))
    _same(got[:2], [np.where(x > y, x, y), np.where(x > y, y, x)])


# ============================================================================== vs NumPy


@pytest.mark.parametrize("n", [0, 1, 37])
def test_function_returning_bools_matches_numpy(n):
    rng = np.random.default_rng(n)
    x, y = (rng.integers(-3, 3, n).astype(np.float32) for _ in range(2))
    m = rng.integers(0, 2, n).astype(np.bool_)
    with llvm.compile(BOOL_RESULTS) as h:
        c, a, s, k = h.run("main", x, y, m)
    assert c.dtype == np.bool_ and a.dtype == np.bool_ and k.dtype == np.bool_
    np.testing.assert_array_equal(c, x < y)
    np.testing.assert_array_equal(a, (x < y) & m)
    np.testing.assert_array_equal(s, np.where(m, x, y))
    np.testing.assert_array_equal(k, [True, False, False, True])
    for b in (c, a, k):  # one byte per bool, 0 or 1: NumPy's own layout
        assert set(np.unique(b.view(np.uint8))) <= {0, 1}


@pytest.mark.parametrize("opts", [{}, {"out_params": True}, {"vector_width": 16}],
                         ids=["default", "out-params", "vector-width"])
def test_static_bools_match_numpy_and_xla(opts):
    rng = np.random.default_rng(7)
    x, y = (rng.integers(-4, 4, 70).astype(np.int32) for _ in range(2))
    with llvm.compile(STATIC_BOOLS, keep_llvm=True, **opts) as h:
        if opts.get("vector_width"):
            assert "vector<16xi8>" in h.llvm_mlir  # the bools moved as bytes
        got = h.run("main", x, y)
    _same(got[:2], [x >= y, np.where(x < y, x, y)])
    _same(got[:2], run_module(STATIC_BOOLS, [x, y]))


# ============================================================================== refusals


def _widen_upstream(text: str) -> str:
    """Run the pass on upstream-only IR (linalg, bufferization: jaxlib cannot parse them)."""
    from mxlower.tools.source import parse_module

    engine = DiagnosticEngine()
    module = parse_module(text, "<test>", upstream.context(), engine, upstream.module("ir"))
    assert module is not None, engine.diagnostics
    return str(run_pipeline(module, "builtin.module(mxlower-widen-bool-memrefs)",
                            ctx=J.make_context()))


@pytest.mark.parametrize("body, op", [
    ("linalg.fill ins(%v : i1) outs(%m : memref<4xi1>)", "linalg.fill"),
    ("%t = bufferization.to_tensor %m : memref<4xi1> to tensor<4xi1>",
     "bufferization.to_tensor"),
    ("%r = memref.atomic_rmw andi %v, %m[%i] : (i1, memref<4xi1>) -> i1", "memref.atomic_rmw"),
])
def test_ops_it_cannot_retype_are_errors(body, op):
    text = (f"func.func @f(%m: memref<4xi1>, %v: i1, %i: index) {{\n  {body}\n  return\n}}\n")
    with pytest.raises(PassFailure) as e:
        _widen_upstream(text)
    assert f"'{op}' on a memref of i1 is not supported" in str(e.value)


def test_upstream_only_input_is_retyped():
    text = ("func.func @f(%m: memref<4xi1>, %v: i1, %i: index) -> memref<4xi1> {\n"
            "  %c = bufferization.clone %m : memref<4xi1> to memref<4xi1>\n"
            "  memref.store %v, %c[%i] : memref<4xi1>\n  return %c : memref<4xi1>\n}\n")
    out = _widen_upstream(text)
    assert "xi1>" not in out and "bufferization.clone %arg0 : memref<4xi8> to memref<4xi8>" in out
    assert "arith.extui %arg1 : i1 to i8" in out
