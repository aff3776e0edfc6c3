"""MLIR source text into modules, as mlir-opt reads it.

Reading a file or stdin, splitting on ``// -----`` with the original line numbers kept, parsing
with mlir-opt's implicit top-level module, and rejecting the ops of dialects nobody registered.
Works with either binding stack: the caller passes the stack's ``ir`` module and a context.

Before the text reaches MLIR's parser, :func:`check_text` refuses two kinds of input the parser
itself cannot survive (both found by fuzzing): brackets nested so deep that the recursive
descent overflows the C stack (SIGSEGV at a few thousand levels), and a malformed value in the
file's ``{-# dialect_resources ... #-}`` metadata, after which jaxlib's parser reads past the
end of the buffer (SIGSEGV) and upstream MLIR's asserts (SIGABRT).  Both come back as one
located error like any parse error.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any

from mxlower.bindings import attribute_items, collect_ops
from mxlower.diagnostics import Diagnostic, DiagnosticEngine, InputError, location_of

__all__ = ["MAX_NESTING", "Chunk", "check_dialects", "check_resources", "check_text",
           "parse_module", "read_source", "split_input"]

_SPLIT_RE = re.compile(r"^// -----\s*$")
_MULTI_TOP = "source must contain a single top-level operation"

#: The deepest bracket nesting (``{ ( [ <`` together) accepted.  MLIR's parser, verifier and
#: printer recurse once per level: jaxlib's parser overflows the default 8 MiB stack at about
#: 6,000 levels; real programs stay below 100.
MAX_NESTING = 1000

# The tokens the scan looks at: strings (terminated on their line or not), comments, the file
# metadata brackets, '->' (not a closing '>') and the brackets.
_SCAN_RE = re.compile(r'"(?:[^"\\\n]|\\[^\n])*("?)|//[^\n]*|\{-#|#-\}|->|[{}()\[\]<>]')
_CLOSERS = {"}": "{", ")": "(", "]": "[", ">": "<"}
_OPENERS = frozenset("{([<")
# What the file metadata section holds: keys, strings, punctuation, booleans and integers.
_META_RE = re.compile(r'\s+|//[^\n]*|"(?:[^"\\\n]|\\[^\n])*("?)|#-\}|[A-Za-z_][\w$.\-]*'
                      r'|-?\d+|[{}:,]')


def read_source(path: str) -> tuple[str, str]:
    """(display name, text) of a file path or '-' for stdin; :class:`InputError` if unreadable."""
    if path == "-":
        return "<stdin>", sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except FileNotFoundError:
        raise InputError(f"could not open input file '{path}': no such file") from None
    except IsADirectoryError:
        raise InputError(f"could not open input file '{path}': is a directory") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"could not read input file '{path}': {e}") from None


@dataclasses.dataclass
class Chunk:
    """One ``// -----`` separated piece of an input file."""

    text: str  #: padded with blank lines so line numbers match the original file
    first_line: int  #: 1-based line of the chunk's first line in the file


def split_input(text: str, split: bool) -> list[Chunk]:
    """The chunks of ``text`` (``--split-input-file``), or the whole text as one chunk."""
    if not split:
        return [Chunk(text, 1)]
    chunks: list[Chunk] = []
    lines = text.splitlines(keepends=True)
    start = 0
    for i, line in enumerate(lines + ["// -----\n"]):
        if _SPLIT_RE.match(line):
            chunks.append(Chunk("\n" * start + "".join(lines[start:i]), start + 1))
            start = i + 1
    return chunks


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def check_text(text: str, name: str, *, max_nesting: int = MAX_NESTING) -> Diagnostic | None:
    """The error that keeps ``text`` away from MLIR's parser, or None when it may be parsed.

    Refused: brackets nested deeper than ``max_nesting``, and file metadata (``{-# ... #-}``)
    that is not well formed -- in particular a resource whose value is cut off (a string left
    open at the end of its line or of the input, a missing value, a section never closed) --
    or a resource blob whose alignment prefix is zero."""
    deep = sum(text.count(c) for c in "{([<") > max_nesting
    if not deep and "{-#" not in text:
        return None  # the common case: nothing to scan for
    stack: list[str] = []
    pos = 0
    while True:
        m = _SCAN_RE.search(text, pos)
        if m is None:
            return None
        tok, pos = m.group(0), m.end()
        if tok == "{-#":
            problem, pos = _check_metadata(text, name, m.start(), pos)
            if problem is not None:
                return problem
        elif not deep:
            continue
        elif tok in _CLOSERS:
            if stack and stack[-1] == _CLOSERS[tok]:
                stack.pop()
        elif tok in _OPENERS:
            stack.append(tok)
            if len(stack) > max_nesting:
                line, col = _line_col(text, m.start())
                return Diagnostic("error", f"brackets nest more than {max_nesting} levels "
                                  "deep here; mxlower refuses such input (MLIR's recursive "
                                  "parser would overflow the stack)", name, line, col)


class _Malformed(Exception):
    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.pos = pos


class _Metadata:
    """A checker of one file metadata section against the grammar MLIR's parser expects::

        '{-#' (key ':' '{' (key ':' '{' (key ':' value),* '}'),* '}'),* '#-}'

    a key a bare identifier or a string, a value a string, ``true``/``false`` or an integer."""

    def __init__(self, text: str, start: int, pos: int):
        self.text, self.start, self.pos = text, start, pos
        self.ahead: tuple[str | None, int] | None = None

    def next(self) -> tuple[str | None, int]:
        """The next token and its position; (None, end) at the end of the text."""
        if self.ahead is not None:
            tok, self.ahead = self.ahead, None
            return tok
        text = self.text
        while self.pos < len(text):
            m = _META_RE.match(text, self.pos)
            if m is None:
                raise _Malformed(f"unexpected character '{text[self.pos]}' in the file metadata",
                                 self.pos)
            at, self.pos = self.pos, m.end()
            tok = m.group(0)
            if tok.isspace() or tok.startswith("//"):
                continue
            if tok[0] == '"' and not m.group(1):
                raise _Malformed("expected '\"' in string literal: a string in the file "
                                 "metadata is not closed on its line", at)
            return tok, at
        return None, len(text)

    def peek(self) -> str | None:
        if self.ahead is None:
            self.ahead = self.next()
        return self.ahead[0]

    def take(self, kind: str, what: str) -> tuple[str, int]:
        tok, at = self.next()
        if tok is None:
            raise _Malformed("the file metadata ('{-#') is not closed by '#-}'", self.start)
        if kind == "key":
            ok = tok[0] == '"' or tok[0].isalpha() or tok[0] == "_"
        elif kind == "value":
            ok = tok[0] in '"-' or tok[0].isdigit() or tok in ("true", "false")
        else:
            ok = tok == kind
        if not ok:
            raise _Malformed(f"expected {what} in the file metadata, found '{tok[:20]}'", at)
        return tok, at

    def section(self) -> int:
        """Check the whole section; the position after its '#-}'."""
        while self.peek() != "#-}":
            key, _ = self.take("key", "a section name such as dialect_resources")
            self.dictionary(key, 1)
            if self.peek() != "#-}":
                self.take(",", "',' or '#-}'")
        return self.next()[1] + 3

    def dictionary(self, key: str, level: int) -> None:
        """``':' '{' entries '}'`` after ``key``; entries of level 3 are resource values."""
        self.take(":", f"':' after '{key}'")
        if level == 3:
            value, at = self.take("value", f"a string, true or false as the value of '{key}'")
            blob = re.fullmatch(r'"0x([0-9A-Fa-f]{8})[0-9A-Fa-f]*"', value)
            if blob and int.from_bytes(bytes.fromhex(blob.group(1)), "little") == 0:
                raise _Malformed(f"the hex blob of resource '{key}' encodes alignment 0 in its "
                                 "first 4 bytes (want a power of 2)", at)
            return
        self.take("{", f"'{{' to open '{key}'")
        if self.peek() == "}":
            self.next()
            return
        while True:
            inner, _ = self.take("key", f"a key in '{key}'")
            self.dictionary(inner, level + 1)
            if self.peek() == "}":
                self.next()
                return
            self.take(",", f"',' or '}}' in '{key}'")


def _check_metadata(text: str, name: str, start: int, pos: int) -> tuple[Diagnostic | None, int]:
    """(The first problem of the metadata section at ``start`` or None, where it ends)."""
    try:
        return None, _Metadata(text, start, pos).section()
    except _Malformed as e:
        line, col = _line_col(text, e.pos)
        return Diagnostic("error", str(e), name, line, col), len(text)


def _first_code_line(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        s = line.strip()
        if s and not s.startswith("//"):
            return i
    return -1


def _wrap_in_module(text: str) -> str:
    """Wrap several top-level ops in ``module {...}`` without moving any of them."""
    lines = text.split("\n")
    first = _first_code_line(lines)
    if first > 0:  # the line above the first op holds only comments: prefix it there
        lines[first - 1] = "module {" + lines[first - 1]
    else:
        lines[0] = "module {" + lines[0]
    return "\n".join(lines) + "\n}\n"


def parse_module(text: str, name: str, ctx: Any, engine: DiagnosticEngine,
                 ir: Any) -> Any | None:
    """Parse ``text`` as mlir-opt does: one ``builtin.module``, or ops wrapped in an implicit one.

    ``ir`` is the binding stack's ``ir`` module, ``ctx`` a context of it.  Returns the module
    operation, or None with the diagnostics (the parser's, or :func:`check_text`'s) in
    ``engine``.
    """
    problem = check_text(text, name)
    if problem is not None:
        engine.record(problem)
        return None
    if not text.endswith("\n"):
        text += "\n"  # no token may end at the very end of the buffer (see check_text)

    def attempt(src: str) -> Any:
        with engine.capture(ctx):
            try:
                return ir.Operation.parse(src, source_name=name, context=ctx)
            except MemoryError:  # std::bad_alloc from a size in the input
                engine.record(Diagnostic("error", "out of memory while parsing the input",
                                         name, 1, 1))
                return None

    try:
        op = attempt(text)
    except ir.MLIRError as err:
        if _MULTI_TOP not in str(err):
            engine.add_mlir_error(err)
            return None
        lines = text.split("\n")
        if _first_code_line(lines) < 0:  # nothing but comments: an empty module
            with ctx:
                return ir.Module.create(ir.Location.file(name, 1, 1)).operation
        try:
            op = attempt(_wrap_in_module(text))
        except ir.MLIRError as err2:
            engine.add_mlir_error(err2)
            return None
    if op is None:
        return None
    op = op.operation
    if op.name == "builtin.module":
        return op
    with ctx:
        module = ir.Module.create(op.location)
        module.body.append(op)
        return module.operation


def check_dialects(module: Any, ctx: Any, engine: DiagnosticEngine, allow_unregistered: bool,
                   allowed_prefixes: tuple[str, ...] = ("mx.",)) -> bool:
    """Reject ops of unregistered dialects other than mxlower's own, unless allowed."""
    if allow_unregistered:
        return True
    bad = collect_ops(module, lambda o: not ctx.is_registered_operation(o.name)
                      and not o.name.startswith(allowed_prefixes))
    for o in bad:
        dialect = o.name.split(".")[0]
        engine.record(Diagnostic(
            "error", f"operation '{o.name}' of unregistered dialect '{dialect}' (pass "
            "--allow-unregistered-dialect to accept it)", *location_of(o)))
    return not bad


_RESOURCE_RE = re.compile(r'^dense_resource<("(?:[^"\\]|\\.)*"|[^>]+)>')
_BLOB_KEY_RE = re.compile(r'^\s*("(?:[^"\\]|\\.)*"|[^\s:]+)\s*:\s*"0x', re.M)


def _resource_attrs(op: Any) -> list[tuple[str, Any]]:
    """(name, attribute) of the ``dense_resource`` attributes on ``op`` itself.  Typed
    attributes (dense elements, strings, ...) are skipped unprinted: only the attributes the
    bindings leave untyped are printed to be looked at, and resources print by name."""
    out = []
    for name, attr in attribute_items(op):
        if attr is None:  # a dense array the bindings cannot type: never a dense_resource
            continue
        if type(attr).__name__ != "Attribute":
            continue
        if _RESOURCE_RE.match(str(attr)):
            out.append((name, attr))
    return out


def check_resources(module: Any, engine: DiagnosticEngine, *, empty: str | None = None) -> bool:
    """Refuse ``dense_resource`` constants that hold no data: a blob the module's
    ``{-# dialect_resources #-}`` section does not have (``dense_resource<__elided__>``, what
    MLIR prints for elided large constants: XLA refuses it, the StableHLO interpreter reads
    garbage, upstream's LLVM translation fails); with ``empty`` (the consumer's name), also a
    resource of zero elements, which upstream MLIR's LLVM translation asserts on.  One located
    error per constant; False when there was one."""
    found = collect_ops(module, lambda o: bool(_resource_attrs(o)))
    if not found:
        return True
    text = module.operation.get_asm()
    section = text[text.find("{-#"):] if "{-#" in text else ""
    blobs = set(_BLOB_KEY_RE.findall(section))
    ok = True
    for o in found:
        for attr_name, attr in _resource_attrs(o):
            key = _RESOURCE_RE.match(str(attr)).group(1)
            shape = getattr(getattr(attr, "type", None), "shape", None)
            what = f"attribute '{attr_name}' is dense_resource<{key}>"
            if key not in blobs:
                engine.record(Diagnostic(
                    "error", f"{what}, which holds no data (the module's dialect_resources "
                    "have no such blob: a constant elided when the module was printed; print "
                    "it without --mlir-elide-elementsattrs-if-larger)", *location_of(o)))
                ok = False
            elif empty is not None and shape is not None and 0 in shape:
                engine.record(Diagnostic(
                    "error", f"{what} with no elements, which {empty} cannot take (upstream "
                    "MLIR's LLVM translation asserts on it); write it as dense<>",
                    *location_of(o)))
                ok = False
    return ok
