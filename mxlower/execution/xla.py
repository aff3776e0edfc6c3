"""Compile and run StableHLO on XLA:CPU through jaxlib (no tracing, no jax.jit).

::

    exe = xla.compile(text)               # MLIR text (or an ir.Module) with @main
    (out,) = xla.run(exe, x)              # NumPy in, NumPy out
    outs = xla.run(text, x, y)            # compiles first

Inputs are NumPy arrays of the dtypes in @main's signature (ml_dtypes arrays for bf16 and the
narrow floats XLA supports natively; ``uint8`` for codes).  Results come back as NumPy arrays,
one per result of @main.  64-bit inputs are transferred with ``jax_enable_x64`` switched on
for the transfer (jax would narrow them to 32 bits otherwise).

The API used: ``jax.extend.backend.get_backend("cpu").compile_and_load(text, DeviceList,
CompileOptions)`` and ``LoadedExecutable.execute(list_of_device_arrays)`` (jax 0.10).

This is the one module of mxlower's execution layer that imports JAX; everything else imports it
only to run on XLA:CPU.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from typing import Any

import jax
import numpy as np
from jax.extend.backend import get_backend

from mxlower.bindings import jax_private
import mxlower.execution.ffi_dot as ffi_dot
from mxlower.execution.errors import RunError
from mxlower.ir.signature import Signature

__all__ = ["Executable", "compile", "device_put", "execute", "run"]


@functools.cache
def _backend():
    return get_backend("cpu")


def _device():
    return _backend().local_devices()[0]


class Executable:
    """A compiled XLA:CPU executable and the text it was compiled from."""

    def __init__(self, loaded: Any, text: str):
        self.loaded = loaded
        self.text = text

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        return run(self, *arrays)

    def execute(self, device_arrays: list[Any]) -> list[Any]:
        """Run on arrays already on the device (see :func:`device_put`); results stay there
        and are complete when this returns."""
        outs = self.loaded.execute(device_arrays)
        for o in outs:
            o.block_until_ready()
        return outs


def compile(module: Any) -> Executable:  # noqa: A001 - the natural name
    """Compile StableHLO (MLIR text, bytes or an ``ir.Module``) with entry ``@main``."""
    text = module if isinstance(module, str) else (
        module.decode() if isinstance(module, bytes) else str(module))
    if "mxlower_dot_" in text:  # calls of mxlower's dot kernels (mxlower-scaled-dot-to-kernel)
        ffi_dot.register_called(text)
    be = _backend()
    xc = jax_private.xla_client()
    loaded = be.compile_and_load(text, xc.DeviceList((_device(),)), xc.CompileOptions())
    return Executable(loaded, text)


def device_put(x: np.ndarray) -> Any:
    """Place a NumPy array on the CPU device, unchanged (64-bit dtypes included)."""
    a = np.asarray(x)
    if a.dtype.itemsize == 8 and not jax.config.jax_enable_x64:
        with jax.enable_x64(True):
            return jax.device_put(a, _device())
    return jax.device_put(a, _device())


def run(exe: Executable | str | Any, *arrays: Any) -> list[np.ndarray]:
    """Run ``exe`` (an :class:`Executable`, or text/module to compile) on NumPy inputs."""
    if not isinstance(exe, Executable):
        exe = compile(exe)
    outs = exe.execute([device_put(a) for a in arrays])
    return [np.asarray(o) for o in outs]


def execute(text: str, sig: Signature, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """``mxlower-run``'s XLA:CPU backend: compile ``text`` (its ``@main`` has signature
    ``sig``) and run it; a module XLA cannot compile is a :class:`RunError` with XLA's first
    message line, and XLA's log lines of a successful compile pass through to stderr."""
    if any(spec.dtype.itemsize == 8 for spec in sig.args + sig.results):
        # 64-bit values for this call only (a global switch would change the dtypes of every
        # later JAX computation in the process)
        with jax.enable_x64(True):
            return _execute(text, inputs)
    return _execute(text, inputs)


def _execute(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    f6 = sorted({t for t in ("f6E3M2FN", "f6E2M3FN") if t in text})
    if f6:
        raise RunError(f"XLA:CPU has no {' or '.join(f6)} type: append "
                       "mxlower-expand-narrow-floats to the pipeline, or use "
                       "--backend=interpreter")
    with quiet_stderr() as captured:
        try:
            exe = compile(text)
        except Exception as e:  # noqa: BLE001 - XLA reports through assorted exception types
            msg = [m for m in str(e).strip().splitlines() if m.strip()]
            first = msg[0] if msg else type(e).__name__
            raise RunError(f"XLA:CPU could not compile the module: {first}") from None
    if captured:  # XLA's own log lines of a successful compile: pass them on
        sys.stderr.write(captured[0])
    return exe(*inputs)


class quiet_stderr:  # noqa: N801 - a context manager, named like one
    """Collect what native code writes to file descriptor 2 (LLVM and XLA print there)."""

    def __enter__(self) -> list[str]:
        self.out: list[str] = []
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile(mode="w+b")
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        return self.out

    def __exit__(self, exc_type, *rest) -> None:
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        text = self.tmp.read().decode(errors="replace")
        self.tmp.close()
        if exc_type is None and text.strip():
            self.out.append(text)
