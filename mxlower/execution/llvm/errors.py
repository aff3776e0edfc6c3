"""The errors of the LLVM engine (all derive from :class:`LLVMExecError`)."""

from __future__ import annotations

__all__ = ["CallError", "CompileError", "LLVMExecError", "WorkerCrashed"]


class LLVMExecError(RuntimeError):
    """Base of the errors the LLVM engine raises."""


class CompileError(LLVMExecError):
    """The module did not parse, a pass failed, or the JIT rejected the LLVM IR."""


class CallError(LLVMExecError):
    """A call that does not match the function (name, argument count, dtype, shape)."""


class WorkerCrashed(LLVMExecError):
    """The worker process died (a signal: an LLVM assertion, a crash in generated code), or
    was stopped at its time limit."""
