"""``--verify-diagnostics`` with MLIR's semantics.

Comments ``// expected-error {{msg}}`` (also ``warning``, ``note``, ``remark``; with ``-re``,
``{{regex}}`` pieces inside the message are regular expressions in MLIR's syntax, POSIX
extended: ``[[:alpha:]]`` classes included; a bad one is a located error) expect a diagnostic
of that severity whose message contains ``msg`` on the comment's line, or on another line
named by ``@+N``, ``@-N``, ``@above`` (the closest line above
without an expected-* comment), ``@below`` (the closest line below without one) or ``@unknown``
(a diagnostic with no file location).  The run passes only when every expected diagnostic is
produced and no unexpected one is.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

from mxlower.diagnostics import Diagnostic

__all__ = ["Expected", "compile_expected", "parse_expected", "translate_regex", "verify"]

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

    compiled: re.Pattern | None = None  # the -re form's pattern, in Python's syntax

    def matches(self, d: Diagnostic) -> bool:
        if d.severity != self.severity:
            return False
        if self.regex:
            if self.compiled is None:
                self.compiled = compile_expected(self.pattern)
            return self.compiled.search(d.message) is not None
        return self.pattern in d.message


#: POSIX bracket classes, as the members of a Python character set
_POSIX_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "0-9A-Za-z", "upper": "A-Z", "lower": "a-z",
    "space": r" \t\n\r\f\v", "blank": r" \t", "punct": re.escape(
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"), "xdigit": "0-9A-Fa-f",
    "cntrl": r"\x00-\x1f\x7f", "print": r"\x20-\x7e", "graph": r"\x21-\x7e",
    "word": "0-9A-Za-z_",
}


def _set_member(c: str) -> str:
    return c if c.isalnum() else "\\" + c if c != "\n" else r"\n"


def _bracket(rx: str, i: int) -> tuple[str, int]:
    """The POSIX bracket expression starting at ``rx[i] == '['`` as a Python character set,
    and the index after it (ValueError when it is not closed or names an unknown class)."""
    j = i + 1
    out = "["
    if j < len(rx) and rx[j] == "^":
        out += "^"
        j += 1
    first = True
    members: list[str] = []
    while True:
        if j >= len(rx):
            raise ValueError("unterminated bracket expression '['")
        c = rx[j]
        if c == "]" and not first:
            break
        first = False
        if rx.startswith("[:", j):
            end = rx.find(":]", j + 2)
            if end < 0:
                raise ValueError("unterminated character class '[:'")
            name = rx[j + 2:end]
            if name not in _POSIX_CLASSES:
                raise ValueError(f"unknown character class '[:{name}:]' (known: "
                                 f"{', '.join(sorted(_POSIX_CLASSES))})")
            members.append(_POSIX_CLASSES[name])
            j = end + 2
            continue
        if rx.startswith("[.", j) or rx.startswith("[=", j):
            close = rx[j + 1] + "]"
            end = rx.find(close, j + 2)
            if end != j + 3:
                raise ValueError(f"a collating element '{rx[j:j + 2]}' holds one character")
            c, j = rx[j + 2], end + 2
        else:
            j += 1
        if rx.startswith("-", j) and j + 1 < len(rx) and rx[j + 1] != "]":
            hi = rx[j + 1]
            if hi < c:
                raise ValueError(f"the range '{c}-{hi}' is reversed")
            members.append(f"{_set_member(c)}-{_set_member(hi)}")
            j += 2
        else:
            members.append(_set_member(c))
    return out + "".join(members) + "]", j + 1


def translate_regex(rx: str) -> str:
    """MLIR's (LLVM's POSIX extended) regex syntax as Python's: bracket expressions with
    POSIX classes (``[[:alpha:]]``), collating elements and literal backslashes become Python
    character sets; the rest (``. * + ? {m,n} | ( ) ^ $`` and backslash escapes) means the same
    in both.  ValueError for a pattern that is not a valid regex."""
    out: list[str] = []
    i = 0
    while i < len(rx):
        c = rx[i]
        if c == "[":
            piece, i = _bracket(rx, i)
            out.append(piece)
            continue
        if c == "\\":
            if i + 1 >= len(rx):
                raise ValueError("a trailing backslash")
            out.append(rx[i:i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def compile_expected(pattern: str) -> re.Pattern:
    """An ``expected-*-re`` message: literal text with ``{{regex}}`` pieces in MLIR's regex
    syntax, as one Python pattern; ValueError saying what is wrong with a bad piece (Python's
    warnings about its own syntax are errors here, never printed instead)."""
    parts = re.split(r"\{\{(.*?)\}\}", pattern)
    pieces = []
    for i, p in enumerate(parts):
        if i % 2 == 0:
            pieces.append(re.escape(p))
            continue
        try:
            piece = translate_regex(p)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                re.compile(piece)
        except (ValueError, re.error, FutureWarning, DeprecationWarning) as e:
            raise ValueError(f"invalid regex '{{{{{p}}}}}': {e}") from None
        pieces.append(f"(?:{piece})")
    return re.compile("".join(pieces))


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
        if e.regex:
            try:
                e.compiled = compile_expected(pattern)
            except ValueError as why:
                problems.append(Diagnostic("error", f"expected-{sev}-re: {why}", None,
                                           lineno, col))
                continue
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
