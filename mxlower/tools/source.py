"""What the command-line tools share: argument parsing with their exit-code convention and
``--version``, the error boundary of ``main``, output files (:func:`write_output`) and
diagnostic printing.

Reading and parsing sources is :mod:`mxlower.ir.source` (re-exported here for old imports).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import stat
import sys
import tempfile
from collections.abc import Callable
from typing import Any, NoReturn

import mxlower
from mxlower.diagnostics import Diagnostic, InputError, condense
from mxlower.ir.source import Chunk, check_dialects, parse_module, read_source, split_input

__all__ = ["ArgParser", "Chunk", "CliError", "check_dialects", "check_output_path", "cli_main",
           "parse_module", "print_diagnostics", "read_source", "split_input", "version_string",
           "write_atomic", "write_output"]

#: A usage or I/O error: printed as ``tool: error: message``, exit 1 (every :class:`InputError`
#: is one: the library's bad-input errors end the same way).
CliError = InputError


def version_string(prog: str) -> str:
    """What ``--version`` prints: the tool, mxlower, and the versions of the two MLIR stacks and
    of Python it runs on (from the installed distributions' metadata: no stack is imported)."""
    def v(pkg: str) -> str:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"{prog} {mxlower.__version__}\n"
            f"  jax {v('jax')}, jaxlib {v('jaxlib')} (StableHLO stack)\n"
            f"  xtc-mlir-python-bindings {v('xtc-mlir-python-bindings')} (upstream MLIR stack)\n"
            f"  Python {platform.python_version()}")


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the versions of mxlower, JAX, the MLIR stacks and Python, "
                         "then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(version_string(parser.prog) + "\n")
        parser.exit(0)


class ArgParser(argparse.ArgumentParser):
    """argparse with the tools' convention: a usage error exits 1, like every other error; every
    tool has ``--version``."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action=_VersionAction)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(1)


def cli_main(prog: str, body: Callable[[list[str]], int], argv: list[str] | None) -> int:
    """Run a tool's ``body(argv)``: bad input (:class:`InputError`) -> ``prog: error: ...`` and
    exit 1, ^C -> 130; input that exhausts Python's recursion limit or the memory is one error
    line too, never a traceback."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(argv)
    except InputError as e:
        sys.stderr.write(f"{prog}: error: {e}\n")
    except KeyboardInterrupt:
        return 130
    except RecursionError:
        sys.stderr.write(f"{prog}: error: the input nests too deeply (Python's recursion limit "
                         "was reached)\n")
    except MemoryError:
        sys.stderr.write(f"{prog}: error: out of memory\n")
    return 1


def check_output_path(path: str) -> None:
    """Refuse an output path that cannot be written, before any work is done: the empty
    string, a directory, a file in a directory that does not exist (a symbolic link is
    judged by what it points to)."""
    if path == "-":
        return
    if not path:
        raise InputError("the output file name is empty")
    target = os.path.realpath(path)
    if os.path.isdir(target):
        raise InputError(f"could not open output file '{path}': is a directory")
    if not os.path.isdir(os.path.dirname(target)):
        raise InputError(f"could not open output file '{path}': no such directory")


def _new_file_mode() -> int:
    """The mode ``open(path, 'w')`` gives a new file: 0666 less the process's umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_output(path: str, data: str | bytes) -> None:
    """Write a tool's output ``data`` to ``path`` as a normal write would, but never half:

    - ``-`` is stdout; a FIFO, a character or block device (any file that is not regular) is
      opened and written directly (replacing it would break whoever reads it);
    - a symbolic link is followed (through any chain) and its target written, never the link
      replaced;
    - a regular file (or a new one) is written to a temporary file beside it and renamed over
      it, so a failure leaves the old contents; an existing file keeps its mode, a new one
      gets ``0666 & ~umask``.

    A path that cannot be written is an :class:`InputError` and leaves nothing behind."""
    if path == "-":
        if isinstance(data, bytes):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        sys.stdout.flush()
        return
    check_output_path(path)
    target = os.path.realpath(path)
    payload = data if isinstance(data, bytes) else data.encode("utf-8")
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise InputError(f"could not open output file '{path}': {e.strerror}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with open(target, "wb") as f:
                f.write(payload)
        except OSError as e:
            raise InputError(f"could not write output file '{path}': "
                             f"{e.strerror or e}") from None
        return
    mode = stat.S_IMODE(st.st_mode) if st is not None else _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".mxlower-", dir=os.path.dirname(target))
    except OSError as e:
        raise InputError(f"could not open output file '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise InputError(f"could not write output file '{path}': "
                             f"{e.strerror or e}") from None
        raise


#: The old name of :func:`write_output` (it is atomic for regular files).
write_atomic = write_output


def print_diagnostics(diags: list[Diagnostic], sources: dict[str, list[str]],
                      stream: Any = None) -> None:
    """Print diagnostics as ``file:line:col: severity: message`` with their source lines; each
    distinct one once and at most :data:`mxlower.diagnostics.MAX_SHOWN` of them
    (:func:`mxlower.diagnostics.condense`)."""
    stream = stream or sys.stderr
    for d in condense(diags):
        stream.write(d.format(sources) + "\n")
    stream.flush()
