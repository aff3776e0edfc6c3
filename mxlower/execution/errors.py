"""The error every way of running a module raises for bad input."""

from __future__ import annotations

from mxlower.diagnostics import InputError

__all__ = ["RunError"]


class RunError(InputError):
    """Bad input to a run: an unknown function, inputs of the wrong count, type or shape, a
    pipeline that fails, a module a backend cannot compile or run, a run past its time limit.
    The message is for the user (one line, or the located diagnostics)."""
