"""MLIR's textual pass-pipeline syntax: parse, expand, print.

Grammar (the one ``mlir-opt --pass-pipeline`` accepts)::

    pipeline := op-name '(' element-list? ')'
    element  := pass-name ('{' options '}')?  |  pipeline
    element-list := element (',' element)*

Errors are :class:`PipelineError` with the offending column, printed by the drivers as
``<pass-pipeline>:1:COL: error: message`` with the pipeline text and a caret.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Nested", "PassRef", "PipelineError", "parse_pipeline", "parse_elements", "render"]


class PipelineError(ValueError):
    def __init__(self, message: str, text: str = "", pos: int = 0):
        super().__init__(message)
        self.message = message
        self.text = text
        self.pos = pos

    def format(self, source: str = "<pass-pipeline>") -> str:
        caret = " " * self.pos + "^"
        return f"{source}:1:{self.pos + 1}: error: {self.message}\n{self.text}\n{caret}"


@dataclasses.dataclass
class PassRef:
    name: str
    options: str = ""  # raw text between the braces
    pos: int = 0


@dataclasses.dataclass
class Nested:
    anchor: str
    elements: list[PassRef | Nested]
    pos: int = 0


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-$")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.i = 0

    def error(self, msg: str, pos: int | None = None) -> PipelineError:
        return PipelineError(msg, self.text, self.i if pos is None else pos)

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.i] if self.i < len(self.text) else ""

    def name(self, what: str) -> tuple[str, int]:
        self.skip()
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in _NAME_CHARS:
            self.i += 1
        if start == self.i:
            found = repr(self.text[self.i]) if self.i < len(self.text) else "end of pipeline"
            raise self.error(f"expected {what}, found {found}")
        return self.text[start:self.i], start

    def braces(self) -> str:
        # at '{': read up to the matching '}' (quotes and nested braces respected)
        start = self.i
        depth = 0
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in "\"'":
                j = self.text.find(c, self.i + 1)
                if j < 0:
                    raise self.error("unterminated string in pass options")
                self.i = j + 1
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return self.text[start + 1:self.i - 1]
            self.i += 1
        raise self.error("expected '}' to close the pass options", start)

    def elements(self) -> list[PassRef | Nested]:
        out: list[PassRef | Nested] = []
        if self.peek() == ")":
            return out
        while True:
            name, pos = self.name("a pass name or an op name")
            c = self.peek()
            if c == "(":
                self.i += 1
                inner = self.elements()
                if self.peek() != ")":
                    raise self.error("expected ',' or ')' in the nested pipeline")
                self.i += 1
                out.append(Nested(name, inner, pos))
            elif c == "{":
                out.append(PassRef(name, self.braces().strip(), pos))
            else:
                out.append(PassRef(name, "", pos))
            if self.peek() == ",":
                self.i += 1
                continue
            return out


def parse_elements(text: str) -> list[PassRef | Nested]:
    """Parse a comma-separated element list (the body of a pipeline, or a named pipeline)."""
    p = _Parser(text)
    out = p.elements()
    if p.peek():
        raise p.error(f"unexpected {p.peek()!r} in pass pipeline")
    return out


def parse_pipeline(text: str) -> Nested:
    """Parse an anchored pipeline such as ``builtin.module(canonicalize, func.func(cse))``."""
    p = _Parser(text)
    if not text.strip():
        raise p.error("empty pass pipeline")
    anchor, pos = p.name("an op name anchoring the pipeline, e.g. builtin.module(...)")
    if p.peek() != "(":
        raise p.error(
            f"expected '(' after '{anchor}': a pipeline must be anchored on an op, "
            f"e.g. 'builtin.module({anchor})'")
    p.i += 1
    elements = p.elements()
    if p.peek() != ")":
        raise p.error("expected ',' or ')' in the pass pipeline")
    p.i += 1
    if p.peek():
        raise p.error(f"unexpected {p.peek()!r} after the pass pipeline")
    return Nested(anchor, elements, pos)


def render(e: PassRef | Nested) -> str:
    """Text of an element (options as given)."""
    if isinstance(e, Nested):
        return f"{e.anchor}(" + ", ".join(render(x) for x in e.elements) + ")"
    return e.name + ("{" + e.options + "}" if e.options else "")
