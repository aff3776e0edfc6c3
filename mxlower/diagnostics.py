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


#: the most distinct diagnostics a tool prints, the most places it prints one message at, and
#: the most lines of one note (an upstream "see current operation" note holds the whole op)
MAX_SHOWN, MAX_PLACES, MAX_NOTE_LINES = 25, 3, 12


def condense(diags: list[Diagnostic], limit: int = MAX_SHOWN) -> list[Diagnostic]:
    """``diags`` as a tool prints them: each distinct diagnostic (severity, message, location)
    once, with a note counting its repeats; one message at :data:`MAX_PLACES` places at most,
    then a note counting the others; notes cut to :data:`MAX_NOTE_LINES` lines; at most
    ``limit`` diagnostics, then one note counting the rest (and their errors)."""
    counts: dict[tuple, int] = {}
    first: dict[tuple, Diagnostic] = {}
    for d in diags:
        key = (d.severity, d.message, d.file, d.line, d.col)
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, d)
    places: dict[tuple, list[tuple]] = {}
    for key in first:
        places.setdefault(key[:2], []).append(key)
    out: list[Diagnostic] = []
    for key, d in first.items():
        same = places[key[:2]]
        index = same.index(key)
        if index >= MAX_PLACES:
            continue
        notes = [_cut(n) for n in d.notes]
        if counts[key] > 1:
            notes.append(Diagnostic("note", f"the same {d.severity} was reported "
                                    f"{counts[key]} times here (shown once)"))
        if index == MAX_PLACES - 1 and len(same) > MAX_PLACES:
            lines = sorted({k[3] for k in same[MAX_PLACES:] if k[2] is not None})
            shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
            at = f" (lines {shown})" if lines else ""
            notes.append(Diagnostic("note", f"the same {d.severity} at {len(same) - MAX_PLACES} "
                                    f"more places{at}, not shown"))
        out.append(dataclasses.replace(d, notes=notes))
    if len(out) > limit:
        rest = out[limit:]
        errors = sum(d.severity == "error" for d in rest)
        out = out[:limit] + [Diagnostic("note", f"{len(rest)} more diagnostics not shown "
                                        f"({errors} of them errors)")]
    return out


def _cut(n: Diagnostic) -> Diagnostic:
    lines = n.message.split("\n")
    if len(lines) <= MAX_NOTE_LINES:
        return n
    kept = "\n".join(lines[:MAX_NOTE_LINES])
    return dataclasses.replace(
        n, message=f"{kept}\n... ({len(lines) - MAX_NOTE_LINES} more lines not shown)")


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
