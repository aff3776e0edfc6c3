"""Child Python processes that serve pickled requests over their stdin and stdout.

Native code can crash (the xtc wheels' LLVM is built with assertions; generated code can
fault) or run forever (a ``while`` whose condition never fails).  Work that may do either runs
in a :class:`Child`: a signal or a time limit ends the child, and the caller gets a
:class:`ChildDied` or :class:`ChildTimedOut` naming what happened (with the tail of the child's
stderr), never a dead process.  The LLVM engine's worker and ``mxlower-run --timeout`` use it.

The child side is :func:`serve`: it answers each request ``msg`` (a tuple) with
``handle(msg)``, a ``(status, payload)`` pair, until it reads ``("exit",)`` or end of file.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import Any

from mxlower import types

__all__ = ["Child", "ChildDied", "ChildError", "ChildTimedOut", "register_types", "serve"]


class ChildError(Exception):
    """A child process that ended without answering."""


class ChildDied(ChildError):
    """The child exited or was killed by a signal while it worked on a request."""

    def __init__(self, how: str, tail: str, signaled: bool):
        super().__init__(how)
        self.how = how  #: "killed by SIGSEGV", "exited with status 3"
        self.tail = tail  #: the end of its stderr ("" when stderr was not captured)
        self.signaled = signaled


class ChildTimedOut(ChildError):
    """The child did not answer within the time limit; it was killed."""


class Child:
    """A ``python -m <module>`` child that runs :func:`serve`.

    ``capture_stderr``: keep the child's stderr in a temporary file (its tail is reported when
    it dies) instead of passing it through.  ``own_group``: start the child in a process group
    of its own, which a time limit kills whole (the child then does not see the terminal's ^C;
    the caller kills it when interrupted).  Thread-safe: one request at a time.
    """

    def __init__(self, module: str, *, capture_stderr: bool = True, own_group: bool = False):
        self._log = tempfile.TemporaryFile() if capture_stderr else None
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._group = own_group
        self._proc = subprocess.Popen(
            [sys.executable, "-m", module], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, env=env, start_new_session=own_group)
        self._lock = threading.Lock()
        self.dead: str | None = None  #: how the child ended, once it did

    @property
    def alive(self) -> bool:
        return self.dead is None and self._proc.poll() is None

    def request(self, msg: tuple, timeout: float | None = None) -> tuple[str, Any]:
        """Send ``msg``; the child's ``(status, payload)`` answer.  :class:`ChildDied` when it
        dies first, :class:`ChildTimedOut` (the child killed) after ``timeout`` seconds."""
        with self._lock:
            if self.dead is not None:
                raise ChildDied(self.dead, "", False)
            try:
                pickle.dump(msg, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self._proc.stdin.flush()
                if timeout is not None:
                    ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
                    if not ready:
                        self.kill()
                        self.dead = f"stopped after {timeout:g} s"
                        raise ChildTimedOut(self.dead)
                return pickle.load(self._proc.stdout)
            except (EOFError, OSError, pickle.UnpicklingError):
                raise self._died() from None
            except KeyboardInterrupt:
                self.kill()
                raise

    def _died(self) -> ChildDied:
        try:
            code = self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self._proc.returncode
        if code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        self.dead = how
        return ChildDied(how, self.stderr()[-4000:].strip(), code < 0)

    def stderr(self) -> str:
        """What the child wrote to stderr so far ("" when it is not captured)."""
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def kill(self) -> None:
        """Kill the child (its whole process group when it has its own) and reap it."""
        if self._proc.poll() is None:
            try:
                if self._group:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                else:
                    self._proc.kill()
            except ProcessLookupError:
                pass
        self._proc.wait()

    def close(self) -> None:
        """Ask the child to exit (kill it if it does not within 10 s)."""
        if self._proc.poll() is None:
            try:
                pickle.dump(("exit",), self._proc.stdin)
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        for f in (self._proc.stdin, self._proc.stdout, self._log):
            if f is not None and not f.closed:
                f.close()


def register_types(rows: Sequence[types.ScalarType]) -> None:
    """In a child: make the registered scalar types the caller's (``types.extensions()``, sent
    with a request), so that a type added in one place runs in child processes too; a
    long-lived child drops the types the caller has unregistered since."""
    wanted = {t.mlir: t for t in rows}
    for t in types.extensions():
        if wanted.get(t.mlir) != t:
            types.unregister(t.mlir)
    for t in rows:
        if t.mlir not in types.SCALARS:
            types.register(t)


def serve(handle: Callable[[tuple], tuple[str, Any]]) -> None:
    """The child's loop: answer every request with ``handle(msg)``; an exception ``handle``
    lets through is answered with ``("error", "Type: message")`` and serving goes on."""
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints must not corrupt the protocol
    proto_in = sys.stdin.buffer
    while True:
        try:
            msg = pickle.load(proto_in)
        except EOFError:
            return
        if msg[0] == "exit":
            return
        try:
            reply = handle(msg)
        except Exception as err:  # noqa: BLE001 - report, keep serving
            reply = ("error", f"{type(err).__name__}: {err}")
        pickle.dump(reply, proto_out, protocol=pickle.HIGHEST_PROTOCOL)
        proto_out.flush()
