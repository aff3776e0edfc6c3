"""Input handling shared by the command-line tools.

Reading a file or stdin, splitting on ``// -----`` with original line numbers kept, parsing with
mlir-opt's implicit top-level module, and writing output atomically (a failed run never writes).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any, NoReturn

from mxlower.diagnostics import Diagnostic, DiagnosticEngine

__all__ = ["ArgParser", "Chunk", "CliError", "cli_main", "parse_module", "read_source",
           "split_input", "write_atomic"]

_SPLIT_RE = re.compile(r"^// -----\s*$")
_MULTI_TOP = "source must contain a single top-level operation"


class CliError(Exception):
    """A usage or I/O error: printed as ``tool: error: message``, exit 1."""


class ArgParser(argparse.ArgumentParser):
    """argparse with the tools' convention: a usage error exits 1, like every other error."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(1)


def cli_main(prog: str, body: Callable[[list[str]], int], argv: list[str] | None) -> int:
    """Run a tool's ``body(argv)``: CliError -> ``prog: error: ...`` and exit 1, ^C -> 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(argv)
    except CliError as e:
        sys.stderr.write(f"{prog}: error: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 130


def read_source(path: str) -> tuple[str, str]:
    """(display name, text) of a file path or '-' for stdin."""
    if path == "-":
        return "<stdin>", sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    except FileNotFoundError:
        raise CliError(f"could not open input file '{path}': no such file") from None
    except IsADirectoryError:
        raise CliError(f"could not open input file '{path}': is a directory") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"could not read input file '{path}': {e}") from None


@dataclasses.dataclass
class Chunk:
    text: str  # padded with blank lines so line numbers match the original file
    first_line: int  # 1-based line of the chunk's first line in the file


def split_input(text: str, split: bool) -> list[Chunk]:
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

    Returns the module operation, or None with the parser's diagnostics in ``engine``.
    """
    def attempt(src: str) -> Any:
        with engine.capture(ctx):
            return ir.Operation.parse(src, source_name=name, context=ctx)

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
    from mxlower.bindings import collect_ops
    from mxlower.diagnostics import location_of

    bad = collect_ops(module, lambda o: not ctx.is_registered_operation(o.name)
                      and not o.name.startswith(allowed_prefixes))
    for o in bad:
        dialect = o.name.split(".")[0]
        engine.record(Diagnostic(
            "error", f"operation '{o.name}' of unregistered dialect '{dialect}' (pass "
            "--allow-unregistered-dialect to accept it)", *location_of(o)))
    return not bad


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` (or stdout for '-') via a temporary file and a rename."""
    if path == "-":
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".mxlower-", dir=directory)
    except OSError as e:
        raise CliError(f"could not open output file '{path}': {e.strerror}") from None
    try:
        with (os.fdopen(fd, "wb") if isinstance(data, bytes)
              else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def print_diagnostics(diags: list[Diagnostic], sources: dict[str, list[str]],
                      stream: Any = None) -> None:
    stream = stream or sys.stderr
    for d in diags:
        stream.write(d.format(sources) + "\n")
    stream.flush()
