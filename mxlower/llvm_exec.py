"""Compatibility: the LLVM engine (:mod:`mxlower.execution.llvm`) under its old name, and its
command line (:mod:`mxlower.tools.llvm_exec`)::

    python -m mxlower.llvm_exec in.mlir --func main --input x.npy --output out.npz
"""

from mxlower.execution.llvm import (CallError, CompileError, Compiled, LLVMExecError, Signature,
                                    TensorSpec, Worker, WorkerCrashed, compile, default_worker,
                                    dtype_of, lower, run)
from mxlower.tools.llvm_exec import format_result, main

__all__ = ["CallError", "CompileError", "Compiled", "LLVMExecError", "Signature", "TensorSpec",
           "Worker", "WorkerCrashed", "compile", "default_worker", "dtype_of", "format_result",
           "lower", "main", "run"]

if __name__ == "__main__":
    raise SystemExit(main())
