"""Running a backend in a child process: under a time limit (``mxlower-run --timeout``), and
always for StableHLO's interpreter, which aborts the process on what it cannot run (an op
outside StableHLO, a ``custom_call``, ``rng``: ``LLVM ERROR: Unsupported op``).

The child (``python -m mxlower.execution.isolated``) gets the module as text, the signature and
the inputs, and answers with the results; past the limit it is killed with its process group.
A crash in the backend (a signal) becomes a :class:`RunError` with the child's last error line;
what the child writes to stderr on success (XLA's log lines) is passed on.  It costs a Python
start-up, so XLA:CPU and the LLVM engine (isolated in its own worker) run here without a limit.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

import numpy as np

from mxlower import types
from mxlower.bindings import jaxlib as J
import mxlower.execution.backends as backends
from mxlower.execution.arrays import pack, unpack
from mxlower.execution.child import Child, ChildDied, ChildTimedOut, register_types, serve
from mxlower.execution.errors import RunError
from mxlower.ir.signature import Signature

__all__ = ["execute"]


#: what the messages call each backend
_NAMES = {"xla": "XLA:CPU", "interpreter": "the StableHLO interpreter", "llvm": "the LLVM backend"}


#: the longest finite time limit (seconds, about 116 days); ``inf`` means no limit
MAX_TIMEOUT = 10_000_000


def check_timeout(timeout: float | None, what: str = "the time limit") -> float | None:
    """``timeout`` as the child-process wait takes it (None: no limit, for ``inf``); RunError
    for a value that is not positive, or finite and above :data:`MAX_TIMEOUT`."""
    if timeout is None or timeout == math.inf:
        return None
    if not timeout > 0:
        raise RunError(f"{what} must be a positive number of seconds, got {timeout:g}")
    if timeout > MAX_TIMEOUT:
        raise RunError(f"{what} must be at most {MAX_TIMEOUT} seconds (or inf for no "
                       f"limit), got {timeout:g}")
    return timeout


def execute(op: Any, sig: Signature, arrays: list[np.ndarray], backend: str,
            filename: str, timeout: float | None = None) -> list[np.ndarray]:
    """:func:`mxlower.execution.backends.execute` in a child process, stopped after
    ``timeout`` seconds of compiling and running (the child's start-up is not counted; ``inf``
    or None: no limit)."""
    timeout = check_timeout(timeout)
    child = Child("mxlower.execution.isolated", own_group=True)
    try:
        status, payload = child.request(("load", backend, types.extensions()))
        if status == "ok":
            status, payload = child.request(
                ("run", op.get_asm(enable_debug_info=True), sig, [pack(a) for a in arrays],
                 backend, filename), timeout=timeout)
    except ChildTimedOut:
        raise RunError(f"the run did not finish within {timeout:g} s (--timeout); it was "
                       "stopped") from None
    except ChildDied as e:
        errors = re.findall(r"(?:LLVM ERROR|error): (.*)", e.tail)
        why = f": {errors[-1].strip()}" if errors else ""
        raise RunError(f"{_NAMES.get(backend, backend)} failed (its process was {e.how})"
                       f"{why}") from None
    finally:
        log = child.stderr()
        child.close()
    if log:
        sys.stderr.write(log)
    if status != "ok":
        raise RunError(payload)
    return [unpack(p) for p in payload]


def _handle(msg: tuple) -> tuple[str, Any]:
    if msg[0] == "load":
        register_types(msg[2])
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
