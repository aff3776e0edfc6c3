"""Running a backend in a child process under a time limit (``mxlower-run --timeout``).

The child (``python -m mxlower.execution.timed``) gets the module as text, the signature and
the inputs, and answers with the results; past the limit it is killed with its process group
and the caller gets a :class:`RunError`.  A crash in the backend (a signal) is contained the
same way.  Without a limit, runs stay in the calling process: this costs a Python start-up.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mxlower.bindings import jaxlib as J
from mxlower.execution import backends
from mxlower.execution.arrays import pack, unpack
from mxlower.execution.child import Child, ChildDied, ChildTimedOut, serve
from mxlower.execution.errors import RunError
from mxlower.ir.signature import Signature

__all__ = ["execute"]


def execute(op: Any, sig: Signature, arrays: list[np.ndarray], backend: str,
            filename: str, timeout: float) -> list[np.ndarray]:
    """:func:`mxlower.execution.backends.execute` in a child process, stopped after
    ``timeout`` seconds of compiling and running (the child's start-up is not counted)."""
    if not timeout > 0:
        raise RunError(f"the time limit must be a positive number of seconds, got {timeout:g}")
    child = Child("mxlower.execution.timed", capture_stderr=False, own_group=True)
    try:
        status, payload = child.request(("load", backend))
        if status != "ok":
            raise RunError(payload)
        status, payload = child.request(
            ("run", op.get_asm(enable_debug_info=True), sig, [pack(a) for a in arrays],
             backend, filename), timeout=timeout)
    except ChildTimedOut:
        raise RunError(f"the run did not finish within {timeout:g} s (--timeout); it was "
                       "stopped") from None
    except ChildDied as e:
        raise RunError(f"the process running the {backend} backend {e.how}") from None
    finally:
        child.close()
    if status != "ok":
        raise RunError(payload)
    return [unpack(p) for p in payload]


def _handle(msg: tuple) -> tuple[str, Any]:
    if msg[0] == "load":
        if msg[1] == "xla":
            # JAX is imported here, not at the top: only the XLA:CPU backend needs it, and its
            # import (~1 s) must not count against the time limit
            import mxlower.execution.xla  # noqa: F401
        return "ok", None
    _, text, sig, arrays, backend, filename = msg
    with J.make_context(allow_unregistered=True) as ctx:
        module = J.ir.Module.parse(text, context=ctx)
        try:
            outs = backends.execute(module.operation, sig, [unpack(a) for a in arrays], backend,
                                    filename, isolate=False)
        except RunError as e:
            return "run", str(e)
    return "ok", [pack(o) for o in outs]


if __name__ == "__main__":
    serve(_handle)
