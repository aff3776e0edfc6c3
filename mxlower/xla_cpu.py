"""Compile and run StableHLO on XLA:CPU through jaxlib (no tracing, no jax.jit).

::

    exe = xla_cpu.compile(text)               # MLIR text (or an ir.Module) with @main
    (out,) = xla_cpu.run(exe, x)              # NumPy in, NumPy out
    outs = xla_cpu.run(text, x, y)            # compiles first

Inputs are NumPy arrays of the dtypes in @main's signature (ml_dtypes arrays for bf16 and the
narrow floats XLA supports natively; ``uint8`` for codes).  Results come back as NumPy arrays,
one per result of @main.  64-bit inputs are transferred with ``jax_enable_x64`` switched on
for the transfer (jax would narrow them to 32 bits otherwise).

The API used: ``jax.extend.backend.get_backend("cpu").compile_and_load(text, DeviceList,
CompileOptions)`` and ``LoadedExecutable.execute(list_of_device_arrays)`` (jax 0.10).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["Executable", "compile", "device_put", "run"]


@functools.cache
def _backend():
    from jax.extend.backend import get_backend

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
    from jax._src.lib import xla_client as xc

    text = module if isinstance(module, str) else (
        module.decode() if isinstance(module, bytes) else str(module))
    be = _backend()
    loaded = be.compile_and_load(text, xc.DeviceList((_device(),)), xc.CompileOptions())
    return Executable(loaded, text)


def device_put(x: np.ndarray) -> Any:
    """Place a NumPy array on the CPU device, unchanged (64-bit dtypes included)."""
    import jax

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
