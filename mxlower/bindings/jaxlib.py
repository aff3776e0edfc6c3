"""jaxlib's MLIR: the StableHLO stack.

Everything in mxlower that needs jaxlib's MLIR imports it from here, so a jax/jaxlib bump touches
one file.  jaxlib's private APIs used (pinned in pyproject.toml):

* ``jax._src.interpreters.mlir.make_ir_context`` -- a context with every jaxlib dialect registered;
* ``jaxlib.mlir._mlir_libs._stablehlo.register_stablehlo_passes`` -- StableHLO's passes;
* ``jaxlib.mlir._mlir_libs._mlir.rewrite`` -- pattern sets and the greedy driver.
"""

from __future__ import annotations

import functools

from jax._src.interpreters import mlir as _jax_mlir
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir._mlir_libs import _mlir as _mlir_ext
from jaxlib.mlir._mlir_libs import _stablehlo
from jaxlib.mlir.dialects import arith, chlo, func, stablehlo

rewrite = _mlir_ext.rewrite
PassManager = passmanager.PassManager
MLIRError = ir.MLIRError
eval_module = stablehlo.eval_module

__all__ = [
    "MLIRError",
    "PassManager",
    "arith",
    "chlo",
    "eval_module",
    "func",
    "ir",
    "make_context",
    "rewrite",
    "stablehlo",
]


@functools.cache
def _register_passes() -> None:
    _stablehlo.register_stablehlo_passes()


def make_context(*, allow_unregistered: bool = False) -> ir.Context:
    """A new context with all of jaxlib's dialects loaded and StableHLO's passes registered.

    Unregistered ops are allowed when asked (mxlower's own ``mx`` ops are unregistered ops; the
    drivers check that no other unregistered dialect slips through unless the user allowed it).
    """
    _register_passes()
    ctx = _jax_mlir.make_ir_context()
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx

