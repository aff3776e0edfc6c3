"""Tool startup: the tool paths that need no JAX never import it, and the jaxlib context mxlower
builds without JAX is the one JAX builds.

``import jax`` costs several times what a whole ``mxlower-opt`` run on a small StableHLO file does
(bench/bench_startup.py), and lit runs hundreds of tool calls.  Each check runs a tool's
``main`` in a fresh interpreter and fails naming the chain of mxlower frames that imported JAX.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from mxlower import passes as registry

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "test" / "lit"
EXAMPLES = ROOT / "examples"

# Runs one tool's main() in a fresh interpreter; exit 97 when JAX got imported, with the mxlower
# frames that imported it on stderr.
_PROBE = r"""
import importlib.abc, sys, traceback

class _Tracer(importlib.abc.MetaPathFinder):
    chain = None

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "jax" and _Tracer.chain is None:
            _Tracer.chain = [f"{f.filename}:{f.lineno} ({f.name})"
                             for f in traceback.extract_stack()[:-1]
                             if "mxlower" in f.filename and "<frozen" not in f.filename]
        return None

sys.meta_path.insert(0, _Tracer())
import importlib
tool, argv = sys.argv[1], sys.argv[2:]
try:
    rc = importlib.import_module("mxlower.tools." + tool).main(argv)
except SystemExit as e:
    rc = e.code
if "jax" in sys.modules:
    sys.stderr.write("JAX IMPORTED, innermost mxlower frame first:\n  "
                     + "\n  ".join(reversed(_Tracer.chain or ["(no mxlower frame)"])) + "\n")
    sys.exit(97)
sys.exit(rc)
"""


def _probe(tool: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _PROBE, tool, *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _check_no_jax(tool: str, *argv: str) -> None:
    r = _probe(tool, *argv)
    assert r.returncode != 97, f"mxlower-{tool} {' '.join(map(str, argv))}:\n{r.stderr}"
    assert r.returncode == 0, (f"mxlower-{tool} {' '.join(map(str, argv))} failed "
                               f"(exit {r.returncode}):\n{r.stderr[-3000:]}")


# Every registered pass and named pipeline, run by mxlower-opt as its own lit test runs it.
_OPT_CASES = {
    "mxlower-decompose-mx": ["--mxlower-decompose-mx"],
    "mxlower-expand-narrow-floats": ["--mxlower-expand-narrow-floats"],
    "mxlower-legalize-xla-mx": ["--mxlower-legalize-xla-mx"],
    "mxlower-lower-narrow-floats-to-llvm": ["--mxlower-lower-narrow-floats-to-llvm"],
    "mxlower-lower-narrow-floats-to-nvvm": ["--mxlower-lower-narrow-floats-to-nvvm=chip=sm_100a"],
    "mxlower-pack-subbyte-args": ["--mxlower-pack-subbyte-args"],
    "mxlower-test-diagnostics": ["--mxlower-test-diagnostics"],
    "mxlower-verify-mx": ["--mxlower-verify-mx"],
    "mxlower-widen-bool-memrefs": ["--mxlower-widen-bool-memrefs"],
    "mxlower-lower-dot-kernels": ["--mxlower-lower-dot-kernels"],
    "mxlower-scaled-dot-to-kernel": ["--mxlower-scaled-dot-to-kernel=path=portable"],
    "mxlower-unsigned-to-signless": ["-p", "builtin.module(stablehlo-legalize-to-linalg, "
                                     "mxlower-unsigned-to-signless)"],
    "mxlower-stablehlo-control-flow-to-scf": ["--mxlower-stablehlo-control-flow-to-scf"],
    "mxlower-mx-to-stablehlo": ["-p", "builtin.module(mxlower-mx-to-stablehlo)"],
    "mxlower-stablehlo-to-llvm": ["-p", "builtin.module(mxlower-stablehlo-to-llvm)"],
    "mxlower-gpu-to-nvvm": ["-p", "builtin.module(mxlower-gpu-to-nvvm)"],
}


def _lit_file(name: str) -> Path:
    for sub in ("passes", "ptx"):
        if (LIT / sub / f"{name}.mlir").is_file():
            return LIT / sub / f"{name}.mlir"
    raise AssertionError(f"no lit test file for {name}")


def test_every_registered_pass_is_probed():
    """A new pass or pipeline must be added to the no-JAX probes below."""
    assert sorted(_OPT_CASES) == registry.all_names()


def test_opt_on_stablehlo_example_imports_no_jax():
    """The issue's benchmark job: a small StableHLO file through mxlower-expand-narrow-floats."""
    _check_no_jax("opt", EXAMPLES / "dense_relu.mlir", "--mxlower-expand-narrow-floats")


@pytest.mark.parametrize("name", sorted(_OPT_CASES))
def test_opt_pass_imports_no_jax(name):
    _check_no_jax("opt", _lit_file(name), "--split-input-file", "--verify-diagnostics",
                  *_OPT_CASES[name])


def test_opt_list_passes_and_version_import_no_jax():
    _check_no_jax("opt", "--list-passes")
    _check_no_jax("opt", "--version")


def test_opt_error_paths_import_no_jax():
    """Bad input ends in an error line (exit 1), without JAX."""
    r = _probe("opt", LIT / "Inputs" / "run_bad_block_size.mlir", "-p", "builtin.module(nope)")
    assert r.returncode == 1, r.stderr
    assert "JAX IMPORTED" not in r.stderr


def test_translate_imports_no_jax():
    ptx = LIT / "ptx"
    _check_no_jax("translate", ptx / "mxlower-translate.mlir", "--no-pipeline", "--chip=sm_100a",
                  "--emit=llvmir")
    _check_no_jax("translate", ptx / "cvt-per-chip.mlir", "--chip=sm_89", "--emit=mlir")


@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
def test_run_without_xla_imports_no_jax(backend):
    """mxlower-run needs JAX only for XLA:CPU (its default backend)."""
    _check_no_jax("run", EXAMPLES / "dense_relu.mlir", f"--backend={backend}", "--no-print")


# --- the context -----------------------------------------------------------------------------

def _jaxlib_op_names() -> list[str]:
    """Every operation name jaxlib's Python dialect modules define."""
    import jaxlib.mlir.dialects as dialects

    names: set[str] = set()
    for info in pkgutil.iter_modules(dialects.__path__):
        if not info.name.endswith("_ops_gen"):
            continue
        mod = importlib.import_module(f"jaxlib.mlir.dialects.{info.name}")
        names.update(getattr(v, "OPERATION_NAME") for v in vars(mod).values()
                     if isinstance(getattr(v, "OPERATION_NAME", None), str))
    return sorted(names)


# passes mxlower's pipelines and docs use, and StableHLO's own
_PASSES = (*registry.UPSTREAM_PASS_NAMES, "canonicalize", "cse", "inline", "symbol-dce",
           "stablehlo-legalize-to-linalg", "stablehlo-aggressive-simplification",
           "stablehlo-convert-to-signless", "stablehlo-legalize-qdq-to-quantized-op",
           "stablehlo-compatibility-expander", "stablehlo-complex-math-expander",
           "chlo-legalize-to-stablehlo", "shape-legalize-to-stablehlo", "vhlo-legalize-to-stablehlo",
           "stablehlo-legalize-to-vhlo", "stablehlo-wrap-in-composite", "convert-to-llvm",
           "one-shot-bufferize", "arith-expand", "lower-affine", "convert-scf-to-cf")


def _registered_passes(ctx) -> set[str]:
    from mxlower.bindings.jaxlib import PassManager

    ok = set()
    with ctx:
        for name in _PASSES:
            for text in (f"builtin.module({name})", f"builtin.module(func.func({name}))"):
                try:
                    PassManager.parse(text)
                except Exception:  # noqa: BLE001,S112  (not registered under this anchor)
                    continue
                ok.add(name)
                break
    return ok


def test_context_matches_jax():
    """make_context() registers exactly the operations JAX's own context does, the same passes
    parse, and unregistered ops are accepted only when asked."""
    from mxlower.bindings import jax_private
    from mxlower.bindings import jaxlib as J

    ours, theirs = J.make_context(), jax_private.jax_ir_context()
    # the Python modules have no op classes for some dialects JAX loads: name one op of each
    names = [*_jaxlib_op_names(), "tensor.empty", "shape.shape_of", "vhlo.add_v1", "affine.for",
             "complex.add", "ub.poison"]
    assert len(names) > 1000
    reg_ours = {n for n in names if ours.is_registered_operation(n)}
    reg_theirs = {n for n in names if theirs.is_registered_operation(n)}
    assert reg_ours == reg_theirs
    dialects = {n.partition(".")[0] for n in reg_ours}
    assert {"stablehlo", "chlo", "mhlo", "sdy", "mpmd", "func", "arith", "tensor", "shape",
            "vhlo", "affine", "complex", "ub", "llvm", "memref", "scf"} <= dialects
    assert _registered_passes(ours) == _registered_passes(theirs)
    assert "stablehlo-legalize-to-linalg" in _registered_passes(ours)

    text = '"foo.bar"() : () -> ()'
    with pytest.raises(J.MLIRError):
        J.ir.Module.parse(text, context=ours)
    loose = J.make_context(allow_unregistered=True)
    assert "foo.bar" in str(J.ir.Module.parse(text, context=loose))


def test_import_bindings_imports_no_jax():
    code = ("import sys, mxlower.bindings.jaxlib as J; J.make_context(); "
            "sys.exit(97 if 'jax' in sys.modules else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
