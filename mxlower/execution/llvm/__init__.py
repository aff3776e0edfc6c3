"""Compile MLIR to native code with upstream MLIR's ExecutionEngine and run it on NumPy arrays.

Usage::

    from mxlower.execution import llvm

    h = llvm.compile(text)                   # StableHLO, or upstream func/memref/linalg/arith IR
    (y,) = h.run("main", x)                  # or llvm.run(h, "main", x)
    h.close()                                # also on garbage collection / `with` exit

``compile`` lowers the module with the ``mxlower-stablehlo-to-llvm`` pipeline (or the pass
pipeline given as ``pipeline=``), JIT-compiles it at ``opt_level`` (3: LLVM's O3 pipeline,
loop vectorizer included, for the host CPU) and returns a :class:`Compiled` handle.  Inputs
that jaxlib's MLIR cannot parse (upstream-only dialects) skip the StableHLO legalization.

Arguments and results
---------------------
Every public ``func.func`` with a body can be called.  Its signature is read from the input
module: a tensor or memref argument takes a NumPy array of that element type and shape
(``ml_dtypes`` arrays for bf16 and the narrow float types, stored as ml_dtypes stores them,
one byte per element; made C-contiguous), a scalar argument a Python or NumPy scalar.
Results come back as new arrays (and NumPy scalars).  Buffers a function returns are freed
after copying, unless they lie inside an argument or are a constant global.  With
``out_params=True`` memref results become trailing arguments the caller provides: ``run(...,
out=[arrays])`` writes into them (statically shaped ones are allocated when ``out`` is not
given) -- no copy, no allocation per call: the form to benchmark.

Isolation
---------
The xtc wheels' MLIR/LLVM are built with assertions, and generated code can crash.  With
``isolate=True`` (the default) lowering, JIT compilation and every call run in a worker
process (``python -m mxlower.execution.llvm.worker``; one shared worker, restarted on demand,
holds all isolated handles); a worker that dies raises :class:`WorkerCrashed` naming the
signal and the tail of its stderr (e.g. the LLVM assertion), and the calling process lives
on.  Arrays cross the process boundary by pickling.  ``isolate=False`` does everything in the
calling process (for trusted inputs and timing loops).

Errors: :class:`CompileError` (bad IR, failing pass; the message lists the diagnostics as
``file:line:col: error: ...``), :class:`CallError` (unknown function, wrong argument types or
shapes), :class:`WorkerCrashed`.  All derive from :class:`LLVMExecError`.

Modules: :mod:`.lowering` (to the LLVM dialect), :mod:`.abi` (the in-process engine and the C
ABI of its calls), :mod:`.worker` (the isolated worker), :mod:`.engine` (this API).

Command line (one-shot, isolated; :mod:`mxlower.tools.llvm_exec`)::

    python -m mxlower.tools.llvm_exec in.mlir --func main --input x.npy --output out.npz
"""

from __future__ import annotations

from mxlower.execution.llvm.abi import dtype_of
from mxlower.execution.llvm.engine import Compiled, compile, run
from mxlower.execution.llvm.errors import CallError, CompileError, LLVMExecError, WorkerCrashed
from mxlower.execution.llvm.lowering import lower
from mxlower.execution.llvm.worker import Worker, default_worker
from mxlower.ir.signature import Signature, TensorSpec

__all__ = [
    "CallError",
    "CompileError",
    "Compiled",
    "LLVMExecError",
    "Signature",
    "TensorSpec",
    "Worker",
    "WorkerCrashed",
    "compile",
    "default_worker",
    "dtype_of",
    "lower",
    "run",
]
