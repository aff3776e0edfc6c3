"""``--verify-diagnostics`` with MLIR's semantics.

Comments ``// expected-error {{msg}}`` (also ``warning``, ``note``, ``remark``; with ``-re``,
``{{regex}}`` pieces inside the message are regular expressions) expect a diagnostic of that severity whose message contains ``msg`` on the
comment's line, or on another line named by ``@+N``, ``@-N``, ``@above`` (the closest line above
without an expected-* comment), ``@below`` (the closest line below without one) or ``@unknown``
(a diagnostic with no file location).  The run passes only when every expected diagnostic is
produced and no unexpected one is.
"""

from __future__ import annotations

import dataclasses
import re

from mxlower.diagnostics import Diagnostic

__all__ = ["Expected", "parse_expected", "verify"]

_EXPECT_RE = re.compile(
    r"expected-(error|warning|note|remark)(-re)?\s*(?:@([+-]\d+|above|below|unknown))?\s*"
    r"\{\{(.*)\}\}\s*$")


@dataclasses.dataclass
class Expected:
    severity: str
    pattern: str
    regex: bool
    line: int | None  # None: @unknown
    comment_line: int
    comment_col: int
    matched: bool = False

    def matches(self, d: Diagnostic) -> bool:
        if d.severity != self.severity:
            return False
        if self.regex:  # MLIR's -re form: literal text with {{regex}} pieces
            parts = re.split(r"\{\{(.*?)\}\}", self.pattern)
            rx = "".join(p if i % 2 else re.escape(p) for i, p in enumerate(parts))
            return re.search(rx, d.message) is not None
        return self.pattern in d.message


def parse_expected(text: str, first_line: int = 1) -> tuple[list[Expected], list[Diagnostic]]:
    """Expectations in ``text`` (padded chunk text: line numbers are the file's)."""
    out: list[Expected] = []
    problems: list[Diagnostic] = []
    pending_below: list[Expected] = []
    last_plain: int | None = None
    for idx, line in enumerate(text.split("\n")):
        lineno = idx + 1
        m = _EXPECT_RE.search(line)
        if m is None:
            if "expected-" in line and re.search(r"expected-(error|warning|note|remark)", line):
                problems.append(Diagnostic("error", "malformed expected-* directive (want "
                                           "'expected-<severity>[@loc] {{message}}')",
                                           None, lineno, line.find("expected-") + 1))
            if line.strip():
                for e in pending_below:
                    e.line = lineno
                pending_below.clear()
                last_plain = lineno
            continue
        sev, re_flag, where, pattern = m.groups()
        col = m.start() + 1
        e = Expected(sev, pattern, bool(re_flag), lineno, lineno, col)
        if where == "unknown":
            e.line = None
        elif where == "above":
            if last_plain is None:
                problems.append(Diagnostic("error", "expected-* '@above' has no line above it",
                                           None, lineno, col))
                continue
            e.line = last_plain
        elif where == "below":
            pending_below.append(e)
        elif where:
            e.line = lineno + int(where)
        out.append(e)
    for e in pending_below:
        problems.append(Diagnostic("error", "expected-* '@below' has no line below it",
                                   None, e.comment_line, e.comment_col))
        out.remove(e)
    return out, problems


def verify(produced: list[Diagnostic], expected: list[Expected], file: str) -> list[Diagnostic]:
    """The errors ``--verify-diagnostics`` reports (empty when everything matched)."""
    errors: list[Diagnostic] = []
    flat: list[Diagnostic] = []
    for d in produced:
        flat.append(d)
        flat.extend(d.notes)
    for d in flat:
        line = d.line if d.file == file else None
        candidates = [e for e in expected if e.line == line and e.matches(d)]
        pick = next((e for e in candidates if not e.matched), candidates[0] if candidates else None)
        if pick is None:
            errors.append(Diagnostic("error", f"unexpected {d.severity}: {d.message}",
                                     d.file, d.line, d.col))
        else:
            pick.matched = True
    for e in expected:
        if not e.matched:
            errors.append(Diagnostic(
                "error", f'expected {e.severity} "{e.pattern}" was not produced',
                file, e.comment_line, e.comment_col))
    return errors
