"""Every private JAX and jaxlib API mxlower uses, and what differs between the JAX releases it
supports: jax/jaxlib 0.10.2 through 0.12.x (pyproject.toml; CI tests both ends).

No other module in the package imports a private JAX or jaxlib module (a ``_``-prefixed name in
the dotted path) or reads a private attribute of a JAX module; ``test/python/test_structure.py``
checks it.  A JAX release that moves one of these touches this file only.

Importing this module loads jaxlib's MLIR extension modules but not ``jax`` (``mxlower-opt`` on
StableHLO never imports JAX): the functions that reach into JAX import it when called.

jaxlib (the StableHLO stack, used by :mod:`mxlower.bindings.jaxlib`), unchanged from 0.10.2 to
0.12.x:

* ``jaxlib.mlir._mlir_libs._jax_mlir_ext.register_dialects`` -- the upstream dialects JAX uses;
* ``jaxlib.mlir._mlir_libs._stablehlo.register_stablehlo_passes`` -- StableHLO's passes;
* ``jaxlib.mlir._mlir_libs._mlir.rewrite`` -- pattern sets and the greedy driver.

JAX, unchanged from 0.10.2 to 0.12.x unless said:

* ``jax._src.config.bool_state`` -- a config flag that is part of jit's cache keys;
* ``jax._src.dispatch.apply_primitive`` -- eager evaluation of a primitive;
* ``jax._src.dispatch.prim_requires_devices_during_lowering`` -- the primitives whose programs
  jit lowers with their devices (``custom_partitioning`` needs them: mxlower.jax.sharding);
* ``jax._src.lib.xla_client`` -- ``DeviceList`` and ``CompileOptions`` for compiling StableHLO;
* ``jax._src.interpreters.mlir.make_ir_context`` -- JAX's own MLIR context (tests compare);
* ``jax._src.cudnn.scaled_matmul_stablehlo`` -- the ``scaled_matmul`` primitive behind
  ``jax.nn.scaled_matmul`` and JAX's own MX/NVFP4 ``quantize``;
* ``jax.interpreters.mlir._platform_specific_lowerings`` / ``_lowerings`` -- the lowering rule
  tables.  **The one difference:** JAX 0.10.2 registers ``scaled_matmul`` lowerings for cuda and
  rocm only (no CPU rule: the CPU fails with "MLIR translation rule ... not found"); JAX 0.11 and
  later also register a platform-independent rule (elements and scales cast to the result type,
  multiplied, then ``dot_general``) that the CPU uses.  :func:`jax_lowers_scaled_matmul` tells
  which, from the table itself rather than from a version number.
"""

from __future__ import annotations

from typing import Any

from jaxlib.mlir._mlir_libs import _jax_mlir_ext
from jaxlib.mlir._mlir_libs import _mlir as _mlir_ext
from jaxlib.mlir._mlir_libs import _stablehlo

__all__ = ["MIN_JAX", "NEXT_JAX", "apply_primitive", "bool_state", "jax_ir_context",
           "jax_lowers_scaled_matmul", "jax_quantize", "platform_lowering",
           "register_jax_dialects", "register_stablehlo_passes", "require_devices_during_lowering",
           "rewrite", "scaled_matmul_primitive", "set_platform_lowering", "xla_client"]

#: The supported range, MIN_JAX <= jax < NEXT_JAX: pyproject.toml's (a test checks they agree).
MIN_JAX = (0, 10, 2)
NEXT_JAX = (0, 13)

# ----------------------------------------------------------------------------- jaxlib's MLIR

#: jaxlib's ``rewrite`` module: pattern sets and the greedy rewrite driver.
rewrite = _mlir_ext.rewrite


def register_jax_dialects(registry: Any) -> None:
    """Add the upstream dialects JAX's contexts hold (func, arith, tensor, scf, ...)."""
    _jax_mlir_ext.register_dialects(registry)


def register_stablehlo_passes() -> None:
    """Register StableHLO's passes (process-wide)."""
    _stablehlo.register_stablehlo_passes()


# ----------------------------------------------------------------------------- JAX


def bool_state(name: str, default: bool, help: str, **kwargs: Any) -> Any:  # noqa: A002
    """``jax._src.config.bool_state``: a config flag usable as a context manager; with
    ``include_in_jit_key=True`` jit's caches tell its values apart."""
    from jax._src import config  # heavy: JAX (private: no public way to add a flag)

    return config.bool_state(name, default, help, **kwargs)


def apply_primitive(prim: Any, *args: Any, **params: Any) -> Any:
    """Evaluate ``prim`` eagerly, compiled alone, as JAX's own primitives are (it also works
    under ``jax.disable_jit()``, where a ``jax.jit`` wrapper would recurse forever)."""
    from jax._src import dispatch  # heavy: JAX (private: a primitive's standard impl)

    return dispatch.apply_primitive(prim, *args, **params)


def require_devices_during_lowering(prim: Any) -> None:
    """Make jit lower every program holding ``prim`` with its concrete device assignment
    (``jax._src.dispatch.prim_requires_devices_during_lowering``, as JAX's ``scaled_matmul``
    does); ``custom_partitioning`` needs it."""
    from jax._src import dispatch  # heavy: JAX (private: no public way to ask for devices)

    dispatch.prim_requires_devices_during_lowering.add(prim)


def xla_client() -> Any:
    """jaxlib's ``xla_client`` module (``DeviceList``, ``CompileOptions``)."""
    from jax._src.lib import xla_client as xc  # heavy: JAX (private: compiling StableHLO text)

    return xc


def jax_ir_context() -> Any:
    """A fresh MLIR context as JAX itself makes it (tests compare mxlower's with it)."""
    from jax._src.interpreters import mlir  # heavy: JAX (private: its context factory)

    return mlir.make_ir_context()


def _scaled_matmul_module() -> Any:
    from jax._src.cudnn import scaled_matmul_stablehlo  # heavy: JAX (private: no public name)

    return scaled_matmul_stablehlo


def scaled_matmul_primitive() -> Any:
    """The ``scaled_matmul`` primitive behind ``jax.nn.scaled_matmul`` and
    ``jax.nn.scaled_dot_general``."""
    return _scaled_matmul_module()._scaled_matmul_p  # noqa: SLF001


def jax_quantize(x: Any, config: Any) -> tuple[Any, Any]:
    """JAX's own MX/NVFP4 quantize (what ``jax.nn.scaled_dot_general`` does to its operands):
    ``(elements, scales)`` of ``x`` for a ``jax.nn.get_scaled_dot_general_config`` config."""
    return _scaled_matmul_module().quantize(x, config)


def _lowering_tables() -> tuple[dict, dict]:
    from jax.interpreters import mlir  # heavy: JAX

    return mlir._lowerings, mlir._platform_specific_lowerings  # noqa: SLF001


def jax_lowers_scaled_matmul(platform: str = "cpu") -> bool:
    """Whether JAX itself has a rule lowering ``scaled_matmul`` on ``platform``: for the CPU,
    False on JAX 0.10.x, True from 0.11 on (its platform-independent rule)."""
    generic, specific = _lowering_tables()
    prim = scaled_matmul_primitive()
    return prim in specific.get(platform, {}) or prim in generic


def platform_lowering(prim: Any, platform: str) -> Any:
    """The rule registered for ``prim`` on ``platform`` alone (an opaque entry), or None."""
    return _lowering_tables()[1].get(platform, {}).get(prim)


def set_platform_lowering(prim: Any, platform: str, entry: Any) -> None:
    """Put back an entry :func:`platform_lowering` returned (None: remove the platform's own
    rule, so that JAX's platform-independent rule, if any, applies again)."""
    table = _lowering_tables()[1][platform]
    if entry is None:
        table.pop(prim, None)
    else:
        table[prim] = entry
