"""jaxlib's MLIR: the StableHLO stack.

Everything in mxlower that needs jaxlib's MLIR imports it from here, so a jax/jaxlib bump touches
one file.  Importing this module does not import ``jax``: a tool run that only parses, transforms
and prints StableHLO needs nothing of JAX but jaxlib's MLIR libraries, and ``import jax`` alone
costs several times what the rest of such a run does.

:func:`make_context` builds the same context as ``jax._src.interpreters.mlir.make_ir_context``
(jax 0.10.2 to 0.12), from jaxlib's extension modules directly: the upstream dialects JAX registers, loaded
eagerly, then SDY, MPMD, MHLO, CHLO and StableHLO, one thread pool shared by every context.
``test/python/test_startup.py`` checks that the two contexts register the same dialects,
operations and passes, and that the tools' no-JAX paths stay that way.  The private jaxlib APIs
this needs come from :mod:`mxlower.bindings.jax_private`, the one module that touches them.
"""

from __future__ import annotations

import functools

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import arith, chlo, func, mhlo, mpmd, sdy, stablehlo

import mxlower.bindings.jax_private as jax_private
from mxlower.bindings.jax_private import rewrite
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
    jax_private.register_stablehlo_passes()


@functools.cache
def _upstream_dialects() -> ir.DialectRegistry:
    # the upstream dialects (func, arith, tensor, memref, scf, llvm, ...) jaxlib's contexts hold
    registry = ir.DialectRegistry()
    jax_private.register_jax_dialects(registry)
    return registry


@functools.cache
def _thread_pool() -> ir.ThreadPool:
    # one pool for every context, as JAX does: a pool per context would start threads per call
    return ir.ThreadPool()


def make_context(*, allow_unregistered: bool = False) -> ir.Context:
    """A new context with all of jaxlib's dialects loaded and StableHLO's passes registered.

    The same dialects as JAX's own contexts (``jax._src.interpreters.mlir.make_ir_context``),
    built without importing JAX.  Unregistered ops are allowed when asked (mxlower's own ``mx``
    ops are unregistered ops; the drivers check that no other unregistered dialect slips through
    unless the user allowed it).
    """
    _register_passes()
    # load_on_create_dialects=[]: load nothing of the site registry (empty in jaxlib) on creation;
    # the dialects below are appended and loaded explicitly
    ctx = ir.Context(load_on_create_dialects=[], thread_pool=_thread_pool())
    ctx.append_dialect_registry(_upstream_dialects())
    ctx.load_all_available_dialects()
    sdy.register_dialect(ctx)
    mpmd.register_dialect(ctx)
    mhlo.register_mhlo_dialect(ctx)
    chlo.register_dialect(ctx)
    stablehlo.register_dialect(ctx)
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx
