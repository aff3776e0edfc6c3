"""Compiled modules and their calls: the LLVM engine's public API (see the package docstring)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxlower import types
from mxlower.execution.arrays import pack, unpack
from mxlower.execution.llvm.abi import Engine
from mxlower.execution.llvm.errors import CallError, LLVMExecError
from mxlower.execution.llvm.lowering import lower
from mxlower.execution.llvm.worker import Worker, default_worker
from mxlower.ir.signature import Signature

__all__ = ["Compiled", "compile", "run"]


class Compiled:
    """A compiled module: call its public functions with :meth:`run`."""

    def __init__(self, signatures: dict[str, Signature], llvm_text: str | None, *,
                 engine: Engine | None = None, worker: Worker | None = None,
                 engine_id: int = 0):
        self.signatures = signatures
        #: the LLVM-dialect module (when compiled with ``keep_llvm=True`` or in-process)
        self.llvm_mlir = llvm_text
        self._engine = engine
        self._worker = worker
        self._id = engine_id
        if worker is not None:
            self._finalizer = weakref.finalize(self, _release, worker, engine_id)

    @property
    def isolated(self) -> bool:
        return self._worker is not None

    def run(self, func: str, *args: Any, out: Sequence[np.ndarray] | None = None) -> list:
        """Call ``@func`` on NumPy arrays/scalars; its results as a list (out-params first)."""
        if self._worker is None:
            if self._engine is None:
                raise CallError("this handle is closed")
            return self._engine.call(func, args, out)
        if self._id == 0:
            raise CallError("this handle is closed")
        enc = [pack(a) for a in args]
        res = [unpack(r) for r in self._worker.request(
            ("call", self._id, func, enc, None if out is None else [pack(a) for a in out]),
            f"running @{func}")]
        if out is not None:
            for dst, src in zip(out, res):
                np.copyto(dst, src)
            res[:len(out)] = list(out)
        return res

    __call__ = run

    def close(self) -> None:
        if self._worker is not None and self._id:
            self._finalizer()
            self._id = 0
        self._engine = None

    def __enter__(self) -> Compiled:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _release(worker: Worker, engine_id: int) -> None:
    if worker.alive:
        try:
            worker.request(("free", engine_id), "releasing a module")
        except LLVMExecError:
            pass


def compile(src: Any, *, opt_level: int = 3, out_params: bool = False,  # noqa: A001
            vector_width: int = 0, pipeline: str | None = None, isolate: bool = True,
            worker: Worker | None = None, keep_llvm: bool = False,
            filename: str = "<input>") -> Compiled:
    """Lower and JIT-compile ``src`` (MLIR text, or a module of either binding stack).

    ``pipeline``: a full pass pipeline (``builtin.module(...)``) replacing the default
    ``mxlower-stablehlo-to-llvm{out-params=... vector-width=...}``; it must end in the LLVM
    dialect, with ``llvm.emit_c_interface`` on the functions to call.  ``isolate``: run in a
    worker process (``worker``, default: the shared one).  ``keep_llvm``: keep the
    LLVM-dialect text as ``.llvm_mlir`` (always kept in-process).
    """
    if not isinstance(src, str):
        op = getattr(src, "operation", src)
        src = op.get_asm(enable_debug_info=True)
    opts = {"pipeline": pipeline, "out_params": out_params, "vector_width": vector_width,
            "opt_level": opt_level, "keep_llvm": keep_llvm, "filename": filename,
            "types": types.extensions()}
    if not isolate:
        llvm_text, sigs = lower(src, pipeline=pipeline, out_params=out_params,
                                vector_width=vector_width, filename=filename)
        return Compiled(sigs, llvm_text, engine=Engine(llvm_text, sigs, opt_level))
    w = worker or default_worker()
    eid, sigs, llvm_text = w.request(("compile", src, opts), "compiling the module")
    return Compiled(sigs, llvm_text, worker=w, engine_id=eid)


def run(handle: Compiled, func: str, *args: Any, out: Sequence[np.ndarray] | None = None
        ) -> list:
    """``handle.run(func, *args, out=out)``."""
    return handle.run(func, *args, out=out)
