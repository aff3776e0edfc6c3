"""The three ways ``mxlower-run`` and :func:`mxlower.execution.run.run_module` run a module.

* ``xla``: XLA:CPU through jaxlib (:mod:`mxlower.execution.xla`, the only one that needs JAX);
* ``interpreter``: StableHLO's reference interpreter (:mod:`mxlower.execution.interpreter`);
* ``llvm``: ``mxlower-stablehlo-to-llvm`` and upstream MLIR's ExecutionEngine
  (:mod:`mxlower.execution.llvm`), in its isolated worker process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxlower.diagnostics import DiagnosticEngine
import mxlower.execution.interpreter as interpreter
import mxlower.execution.llvm as llvm
from mxlower.execution.errors import RunError
from mxlower.ir.signature import Signature
from mxlower.ir.source import check_resources

__all__ = ["BACKENDS", "execute"]

BACKENDS = ("xla", "interpreter", "llvm")


def execute(op: Any, sig: Signature, arrays: list[np.ndarray], backend: str,
            filename: str = "<module>", *, isolate: bool = True) -> list[np.ndarray]:
    """Run ``@main`` of the (static, StableHLO) module ``op`` on ``arrays`` with ``backend``.

    ``isolate=False`` runs the LLVM engine in this process (for a caller that is itself an
    isolated child).  Failures are a :class:`RunError`."""
    if backend == "interpreter":
        return interpreter.execute(op, sig, arrays)
    if backend == "llvm":
        engine = DiagnosticEngine()
        if not check_resources(op, engine, empty="the LLVM backend"):
            raise RunError("; ".join(d.format() for d in engine.diagnostics))
        # the module goes as printed text whose locations name the original file: give the
        # text its own name, so that no diagnostic quotes its lines as the file's
        try:
            with llvm.compile(op.get_asm(enable_debug_info=True),
                              filename=f"<{filename} as printed>", isolate=isolate) as h:
                return [np.asarray(r) for r in h.run("main", *arrays)]
        except llvm.LLVMExecError as e:
            raise RunError(f"the LLVM backend failed: {e}") from None
    if backend != "xla":
        raise RunError(f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    # JAX is imported here, not at the top: only the XLA:CPU backend needs it (~1 s to import)
    from mxlower.execution.xla import execute as run_on_xla

    return run_on_xla(str(op), sig, arrays)
