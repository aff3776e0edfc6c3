"""Pass and pipeline base classes: a pass is a frozen dataclass whose fields are its options.

A pass::

    @dataclasses.dataclass(frozen=True)
    class LegalizeXlaMx(ModulePass):
        '''Rewrite XLA's MX custom calls into mx ops.   <- first line: the --list-passes summary

        Before / after IR and an example command line follow in the docstring.
        '''
        name: ClassVar[str] = "mxlower-legalize-xla-mx"
        scale_mode: str = option("nearest", "scale rule for __op$quantize",
                                 choices=("floor", "rceil", "nearest"))

        def run(self, op: ir.Operation) -> None: ...

Options are written ``pass{scale-mode=rceil types=f4E2M1FN,f6E2M3FN}``: field names with '_'
spelled '-', lists comma-separated.  Supported field types: bool, int, float, str and
tuple[str, ...] / tuple[int, ...].  ``choices`` restricts a value (each element for tuples).

``run`` receives the operation the pass is anchored on (``anchor``: ``builtin.module`` or, for a
pass nested as ``func.func(pass)``, each function).  It reports bad input through
:mod:`mxlower.diagnostics` and never prints.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, ClassVar

__all__ = ["ModulePass", "OptionError", "Pipeline", "option", "parse_options"]


def option(default: Any, help: str, *, choices: tuple | None = None) -> Any:  # noqa: A002
    """A pass option: a dataclass field with its help text (and allowed values)."""
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


class OptionError(ValueError):
    """A pass or pipeline option that does not parse; the message names the option."""


@dataclasses.dataclass(frozen=True)
class _Configurable:
    name: ClassVar[str] = ""
    #: why it must run on the module (empty: it may be nested, e.g. ``func.func(pass)``); a
    #: pipeline that nests it is refused with this reason
    module_only: ClassVar[str] = ""

    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    @classmethod
    def description(cls) -> str:
        return inspect.getdoc(cls) or ""

    @classmethod
    def options(cls) -> list[tuple[str, str, Any, str, tuple | None]]:
        """(cli-name, type-name, default, help, choices) for every option, in field order."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            out.append((f.name.replace("_", "-"), _type_name(hints[f.name]), f.default,
                        f.metadata.get("help", ""), f.metadata.get("choices")))
        return out

    @classmethod
    def from_options(cls, text: str | dict[str, str] = "") -> _Configurable:
        """Instantiate from ``a=1 b=x,y`` (or a dict of raw strings); OptionError on bad input."""
        raw = parse_options(text) if isinstance(text, str) else dict(text)
        hints = typing.get_type_hints(cls)
        fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in raw.items():
            f = fields.get(key)
            if f is None:
                known = ", ".join(fields) or "none"
                raise OptionError(
                    f"unknown option '{key}' for '{cls.name}' (its options: {known})")
            kwargs[f.name] = _convert(cls.name, key, value, hints[f.name],
                                      f.metadata.get("choices"))
        return cls(**kwargs)

    def option_string(self) -> str:
        """All options with their values, as ``{a=1 b=x,y}`` (empty when there are none)."""
        parts = []
        for f in dataclasses.fields(self):
            parts.append(f"{f.name.replace('_', '-')}={_render(getattr(self, f.name))}")
        return "{" + " ".join(parts) + "}" if parts else ""

    def __str__(self) -> str:
        return self.name + self.option_string()


@dataclasses.dataclass(frozen=True)
class ModulePass(_Configurable):
    """Base of every mxlower pass."""

    def run(self, op: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Pipeline(_Configurable):
    """A named pipeline: its options select the text of the pipeline it expands to."""

    module_only: ClassVar[str] = "it holds passes that run on the whole module"

    def build(self) -> str:  # pragma: no cover - abstract
        """The pipeline elements, e.g. ``"mxlower-a{x=1}, canonicalize, cse"``."""
        raise NotImplementedError


def _type_name(t: Any) -> str:
    if typing.get_origin(t) is tuple:
        return "list<" + _type_name(typing.get_args(t)[0]) + ">"
    return getattr(t, "__name__", str(t))


def _render(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(_render(x) for x in v)
    s = str(v)
    if any(c in s for c in " {}=") or s == "":
        return '"' + s.replace('"', '\\"') + '"'
    return s


def _convert(owner: str, key: str, value: str, t: Any, choices: tuple | None) -> Any:
    def one(v: str, t: Any) -> Any:
        v = v.strip()
        try:
            if t is bool:
                if v.lower() in ("", "1", "true", "on"):
                    return True
                if v.lower() in ("0", "false", "off"):
                    return False
                raise ValueError
            if t is int:
                return int(v, 0)
            if t is float:
                return float(v)
            return v
        except ValueError:
            raise OptionError(
                f"option '{key}' of '{owner}' expects {_type_name(t)}, got '{v}'") from None

    def check(v: Any) -> Any:
        if choices is not None and v not in choices:
            allowed = ", ".join(str(c) for c in choices)
            raise OptionError(
                f"option '{key}' of '{owner}' has invalid value '{v}' (expected one of: {allowed})")
        return v

    if typing.get_origin(t) is tuple:
        elem = typing.get_args(t)[0]
        items = [x for x in value.split(",") if x.strip() != ""]
        return tuple(check(one(x, elem)) for x in items)
    return check(one(value, t))


def parse_options(text: str) -> dict[str, str]:
    """Split ``a=1 b=x,y c="s p" d={nested}`` into raw strings; a bare ``flag`` means true."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        while i < n and not text[i].isspace() and text[i] != "=":
            i += 1
        key = text[start:i]
        if not key:
            raise OptionError(f"expected an option name at '{text[i:]}'")
        if i < n and text[i] == "=":
            i += 1
            value, i = _read_value(text, i)
        else:
            value = "true"
        if key in out:
            raise OptionError(f"option '{key}' given twice")
        out[key] = value
    return out


def _read_value(text: str, i: int) -> tuple[str, int]:
    n = len(text)
    buf = []
    depth = 0
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise OptionError(f"unterminated string in option value '{text}'")
            buf.append(text[i + 1:j].replace("\\" + c, c))
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise OptionError(f"unbalanced '}}' in option value '{text}'")
        elif c.isspace() and depth == 0:
            break
        buf.append(c)
        i += 1
    if depth != 0:
        raise OptionError(f"unbalanced '{{' in option value '{text}'")
    return "".join(buf), i
