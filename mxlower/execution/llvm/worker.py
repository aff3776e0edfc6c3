"""The LLVM engine's worker process: lowering, JIT compilation and calls, isolated.

:class:`Worker` is the caller's handle of a ``python -m mxlower.execution.llvm.worker`` child;
the child holds the ExecutionEngines.  Requests::

    ("compile", text, opts)        -> (engine id, signatures, LLVM-dialect text or None)
    ("call", id, func, args, out)  -> packed results
    ("free", id)                   -> None

Arrays cross the process boundary packed (:func:`mxlower.execution.arrays.pack`).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from mxlower.execution.arrays import pack, unpack
from mxlower.execution.child import Child, ChildDied, register_types, serve
from mxlower.execution.llvm.abi import Engine
from mxlower.execution.llvm.errors import CallError, CompileError, LLVMExecError, WorkerCrashed
from mxlower.execution.llvm.lowering import lower

__all__ = ["Worker", "default_worker", "main"]


class Worker:
    """A child process holding ExecutionEngines.

    Its stderr goes to a temporary file whose tail is reported when it dies.  Thread-safe (one
    request at a time).
    """

    def __init__(self) -> None:
        self._child = Child("mxlower.execution.llvm.worker")

    @property
    def alive(self) -> bool:
        return self._child.alive

    @property
    def dead(self) -> str | None:
        """How the worker ended (``"killed by SIGSEGV"``), or None while it lives."""
        return self._child.dead

    def request(self, msg: tuple, what: str) -> Any:
        """Send ``msg``; the payload of the answer.  :class:`CompileError`/:class:`CallError`
        for what the worker reports, :class:`WorkerCrashed` when it dies (``what`` says what it
        was doing)."""
        if self._child.dead is not None:
            raise WorkerCrashed(f"the LLVM worker process died earlier ({self._child.dead}); "
                                "compile again")
        try:
            status, payload = self._child.request(msg)
        except ChildDied as e:
            hint = (" (an LLVM/MLIR assertion)" if "Assertion" in e.tail else
                    " (a crash in LLVM or in the generated code)" if e.signaled else "")
            text = f"the LLVM worker process {e.how}{hint} while {what}"
            raise WorkerCrashed(text + (f"; its stderr ends with:\n{e.tail}" if e.tail else "")
                                ) from None
        if status == "ok":
            return payload
        cls = {"compile": CompileError, "call": CallError}.get(status, LLVMExecError)
        raise cls(payload)

    def close(self) -> None:
        self._child.close()


_default_worker: Worker | None = None
_default_lock = threading.Lock()


def default_worker() -> Worker:
    """The shared worker of isolated handles (started, or restarted after a crash, on demand)."""
    global _default_worker
    with _default_lock:
        if _default_worker is None or not _default_worker.alive:
            _default_worker = Worker()
        return _default_worker


class _Server:
    """The child side: the engines by id, and the answer to each request."""

    def __init__(self) -> None:
        self.engines: dict[int, Engine] = {}
        self.ids = itertools.count(1)

    def handle(self, msg: tuple) -> tuple[str, Any]:
        kind = msg[0]
        try:
            if kind == "compile":
                _, text, opts = msg
                register_types(opts.get("types", ()))
                llvm_text, sigs = lower(text, pipeline=opts["pipeline"],
                                        out_params=opts["out_params"],
                                        vector_width=opts["vector_width"],
                                        filename=opts["filename"])
                eid = next(self.ids)
                self.engines[eid] = Engine(llvm_text, sigs, opts["opt_level"])
                return "ok", (eid, sigs, llvm_text if opts["keep_llvm"] else None)
            if kind == "call":
                _, eid, func, args, out = msg
                res = self.engines[eid].call(func, [unpack(a) for a in args],
                                             None if out is None else [unpack(a) for a in out])
                return "ok", [pack(r) for r in res]
            if kind == "free":
                self.engines.pop(msg[1], None)
                return "ok", None
            return "error", f"unknown request '{kind}'"
        except CompileError as err:
            return "compile", str(err)
        except CallError as err:
            return "call", str(err)


def main() -> None:
    """The worker process's entry point."""
    serve(_Server().handle)


if __name__ == "__main__":
    main()
