"""Stand-in tools with known misbehaviour, for test/python/test_fuzz.py to check that the
harness catches each kind of failure (a crash signal, a hang, a traceback, unclear output) and
lets clean errors pass.  Each takes ``argv`` like a tool's ``main``."""

from __future__ import annotations

import ctypes
import sys
import time


def segfault(argv: list[str]) -> int:
    """Print an error line, then die of SIGSEGV (as jaxlib's parser does on a cut-off blob)."""
    sys.stderr.write(f"{argv[0]}:1:1: error: about to crash\n")
    sys.stderr.flush()
    ctypes.string_at(0)
    return 0


def hang(argv: list[str]) -> int:
    """Never answer."""
    while True:
        time.sleep(60)


def traceback(argv: list[str]) -> int:
    """Let an exception escape."""
    raise ValueError("escaped")


def internal_error(argv: list[str]) -> int:
    sys.stderr.write(f"{argv[0]}:1:1: error: internal error in pass 'p': KeyError: 'x'\n")
    return 1


def garbage(argv: list[str]) -> int:
    """Fail with output that is no error line."""
    sys.stderr.write("something went wrong somewhere\n")
    return 1


def odd_status(argv: list[str]) -> int:
    sys.stderr.write(f"{argv[0]}:1:1: error: fine message, wrong status\n")
    return 3


def clean_error(argv: list[str]) -> int:
    """A located error with the source line and caret, exit 1: acceptable."""
    sys.stderr.write(f"{argv[0]}:2:5: error: expected ')'\n  %0 = foo(\n    ^\n")
    return 1


def tool_error(argv: list[str]) -> int:
    """A tool's one-line error: acceptable."""
    sys.stderr.write("mxlower-opt: error: could not open output file 'x'\n")
    return 1


def ok(argv: list[str]) -> int:
    sys.stdout.write("module {\n}\n")
    return 0
