"""Compatibility: :mod:`mxlower.execution.xla` (StableHLO on XLA:CPU) under its old name."""

from mxlower.execution.xla import Executable, compile, device_put, run

__all__ = ["Executable", "compile", "device_put", "run"]
