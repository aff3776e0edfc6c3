"""Location-tagged diagnostics shared by every mxlower pass and tool.

Passes never print and never raise bare exceptions for bad input.  They report with
:func:`error` (and :func:`warning`, :func:`remark`, notes), which records a :class:`Diagnostic`
in the active :class:`DiagnosticEngine` and returns a :class:`PassFailure` to raise::

    raise error(op, f"block size {bs} does not divide dimension {d}")

MLIR's own diagnostics (parser, verifier, upstream passes) are captured into the same engine by
:meth:`DiagnosticEngine.capture`, so the drivers print one stream in ``file:line:col: error:``
form and ``--verify-diagnostics`` checks all of them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import re
from collections.abc import Iterator
from typing import Any

SEVERITIES = ("error", "warning", "note", "remark")

_LOC_RE = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


@dataclasses.dataclass
class Diagnostic:
    severity: str
    message: str
    file: str | None = None
    line: int = 0
    col: int = 0
    notes: list[Diagnostic] = dataclasses.field(default_factory=list)

    def format(self, source_lines: dict[str, list[str]] | None = None) -> str:
        """``file:line:col: severity: message``, the source line with a caret, then notes."""
        if self.file is not None:
            head = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
        else:
            head = f"{self.severity}: {self.message}"
        out = [head]
        lines = (source_lines or {}).get(self.file or "")
        if lines and 1 <= self.line <= len(lines):
            text = lines[self.line - 1].rstrip("\n")
            out.append(text)
            out.append(" " * max(self.col - 1, 0) + "^")
        for n in self.notes:
            out.append(n.format(source_lines))
        return "\n".join(out)


def location_of(obj: Any) -> tuple[str | None, int, int]:
    """(file, line, col) of an MLIR Location, Operation, OpView or Value (either stack).

    Name, call-site and fused locations resolve to the first file location inside them.
    """
    loc = obj
    if hasattr(obj, "owner") and not hasattr(obj, "location"):  # a Value
        owner = obj.owner
        loc = getattr(owner, "location", None)
        if loc is None:  # block argument: use the parent op
            loc = owner.owner.location
    elif hasattr(obj, "location"):
        loc = obj.location
    if loc is None:
        return (None, 0, 0)
    m = _LOC_RE.search(str(loc))
    if m is None:
        return (None, 0, 0)
    return (m.group(1).replace('\\"', '"'), int(m.group(2)), int(m.group(3)))


class InputError(Exception):
    """Bad input to a library entry point or a tool -- a missing or unreadable file, a malformed
    argument, a module that cannot run: one line (or a few diagnostics) for the user, no
    traceback.  The command-line tools print it as ``tool: error: message`` and exit 1."""


class PassFailure(Exception):
    """Raised to stop a pass after its diagnostics have been recorded."""

    def __init__(self, diagnostic: Diagnostic | None = None):
        super().__init__(diagnostic.message if diagnostic else "pass failed")
        self.diagnostic = diagnostic


class DiagnosticEngine:
    """Collects diagnostics from mxlower code and from MLIR contexts."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def record(self, d: Diagnostic) -> Diagnostic:
        self.diagnostics.append(d)
        return d

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    @staticmethod
    def from_mlir(info: Any) -> Diagnostic:
        """Convert an MLIR ``Diagnostic``/``DiagnosticInfo`` (either binding stack)."""
        sev = str(info.severity).rsplit(".", 1)[-1].lower()
        if sev not in SEVERITIES:
            sev = "error"
        file, line, col = location_of(info.location)
        notes = [DiagnosticEngine.from_mlir(n) for n in info.notes]
        return Diagnostic(sev, str(info.message), file, line, col, notes)

    @contextlib.contextmanager
    def capture(self, ctx: Any) -> Iterator[None]:
        """Route an MLIR context's diagnostics into this engine while the block runs."""

        def handler(d: Any) -> bool:
            self.record(self.from_mlir(d))
            return True

        h = ctx.attach_diagnostic_handler(handler)
        try:
            yield
        finally:
            h.detach()

    def add_mlir_error(self, exc: Any) -> None:
        """Record the diagnostics carried by an ``MLIRError`` (once; handlers may have seen them)."""
        infos = getattr(exc, "error_diagnostics", None) or []
        if not infos:
            self.record(Diagnostic("error", str(exc).strip()))
            return
        for info in infos:
            d = self.from_mlir(info)
            if not any(_same(d, e) for e in self.diagnostics):
                self.record(d)

    @contextlib.contextmanager
    def activate(self) -> Iterator[DiagnosticEngine]:
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


def _same(a: Diagnostic, b: Diagnostic) -> bool:
    return (a.severity, a.message, a.file, a.line, a.col) == (
        b.severity, b.message, b.file, b.line, b.col)


_ACTIVE: contextvars.ContextVar[DiagnosticEngine | None] = contextvars.ContextVar(
    "mxlower_diagnostic_engine", default=None)


def active_engine() -> DiagnosticEngine:
    eng = _ACTIVE.get()
    if eng is None:  # library use without a driver: keep diagnostics in a throwaway engine
        eng = DiagnosticEngine()
        _ACTIVE.set(eng)
    return eng


def note(at: Any, message: str) -> Diagnostic:
    """A note to attach to an error with ``notes=[...]``."""
    return Diagnostic("note", message, *location_of(at))


def _emit(severity: str, at: Any, message: str, notes: list[Diagnostic] | None) -> Diagnostic:
    file, line, col = location_of(at) if at is not None else (None, 0, 0)
    return active_engine().record(Diagnostic(severity, message, file, line, col, list(notes or [])))


def error(at: Any, message: str, *, notes: list[Diagnostic] | None = None) -> PassFailure:
    """Record an error at ``at`` (an op, value or location); return the exception to raise."""
    return PassFailure(_emit("error", at, message, notes))


def warning(at: Any, message: str, *, notes: list[Diagnostic] | None = None) -> Diagnostic:
    return _emit("warning", at, message, notes)


def remark(at: Any, message: str, *, notes: list[Diagnostic] | None = None) -> Diagnostic:
    return _emit("remark", at, message, notes)
