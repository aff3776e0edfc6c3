"""Run JAX's own ``jax.nn.scaled_matmul`` / ``jax.nn.scaled_dot_general`` on the CPU through
mxlower.

JAX lowers both through its ``scaled_matmul`` primitive.  What JAX does with it on the CPU
depends on the release (:mod:`mxlower.bindings.jax_private` knows which):

* **JAX 0.10.x** has lowering rules for cuda (the ``__op$block_scaled_dot`` custom call, cuDNN)
  and rocm only: on the CPU both functions fail with "MLIR translation rule for primitive
  'scaled_matmul' not found for platform cpu".
* **JAX 0.11 and later** lower it everywhere else with a rule of their own: elements and
  scales cast to the result type (``preferred_element_type``), multiplied, then a
  ``dot_general`` in that type.

:func:`install` means the same on every version: ``scaled_matmul`` on the CPU (or the platforms
named) lowers through mxlower.jax's ``mx_scaled_dot`` (``mx.scaled_dot``: the fused FFI kernel
on the CPU, or mxlower's StableHLO), which computes docs/semantics.md exactly -- exact products
accumulated in f32, then one rounding to the result type -- with the XLA
``__op$block_scaled_dot`` semantics that ``mxlower-legalize-xla-mx`` gives the custom call:
``[B, M, K] x [B, N, K] -> [B, M, N]``, block size ``K / scales.shape[-1]``, the MX format
picked by the (element, scale) dtypes:

====================  ===============  ==========
elements              scales           format
====================  ===============  ==========
float8_e4m3fn         float8_e8m0fnu   mxfp8_e4m3
float8_e5m2           float8_e8m0fnu   mxfp8_e5m2
float4_e2m1fn         float8_e8m0fnu   mxfp4_e2m1
float4_e2m1fn         float8_e4m3fn    nvfp4
====================  ===============  ==========

On JAX 0.11+ mxlower's rule takes precedence over JAX's own; :func:`uninstall` gives the
platforms back the rules they had (JAX's own on 0.11+, none on 0.10.x).  Both take effect for
every later call whatever was traced or compiled before: each change clears JAX's in-memory
trace, lowering and compilation caches (``jax.clear_caches()``), so everything is traced and
compiled again at its next call.  Executables already obtained with
``jax.jit(f).lower(...).compile()`` and exported modules keep the rule they were lowered with.

``jax.nn.scaled_dot_general(..., configs=[get_scaled_dot_general_config("mxfp8")] * 3)`` (and
"nvfp4") quantizes with JAX's own jnp code and then calls ``scaled_matmul``, so it runs too,
gradients included.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.interpreters import mlir

from mxlower.bindings import jax_private
from mxlower.formats import FORMATS
from mxlower.jax.dtypes import held_as_codes
from mxlower.jax.primitives import scaled_dot_p

__all__ = ["install", "installed", "uninstall"]

#: (element dtype name, scale dtype name) -> MX format, for the dtypes JAX arrays can have.
#: Not mxint8: XLA scales the int8 code itself, where MX scales code * 2^-6.
_FORMATS = {(f.element_dtype.name, f.scale_dtype.name): f.name for f in FORMATS.values()
            if not f.is_int and not held_as_codes(f.element)}

_PLATFORMS = ("cpu",)
_installed: dict[str, Any] = {}


def format_for(elements: Any, scales: Any, what: str) -> str:
    """The MX format of a ``scaled_matmul`` operand from its element and scale dtypes."""
    key = (np.dtype(elements).name, np.dtype(scales).name)
    fmt = _FORMATS.get(key)
    if fmt is None:
        known = ", ".join(f"{e}+{s}" for e, s in _FORMATS)
        raise TypeError(f"scaled_matmul on cpu (mxlower): {what} elements {key[0]} with "
                        f"scales {key[1]} are not an MX format (supported: {known})")
    return fmt


def _bind(a, b, a_scales, b_scales, *, preferred_element_type):
    params = {}
    for side, x, s in (("lhs", a, a_scales), ("rhs", b, b_scales)):
        k, kb = x.shape[-1], s.shape[-1]
        if x.ndim != 3 or s.ndim != 3 or kb == 0 or k % kb:
            raise ValueError(f"scaled_matmul on cpu (mxlower): {side} {x.shape} and its "
                             f"scales {s.shape} are not [B, M, K] / [B, M, K / block]")
        params.update({f"{side}_format": format_for(x.dtype, s.dtype, side),
                       f"{side}_block_size": k // kb, f"{side}_axis": 2,
                       f"{side}_ste": False})
    out = scaled_dot_p.bind(a, a_scales, b, b_scales,
                            dimension_numbers=(((2,), (2,)), ((0,), (0,))),
                            out_dtype=np.dtype(preferred_element_type), has_g=False,
                            **params)
    return [out]


def _lowering(ctx, a, b, a_scales, b_scales, *, preferred_element_type):
    return mlir.lower_fun(lambda *xs: _bind(*xs, preferred_element_type=preferred_element_type),
                          multiple_results=True)(ctx, a, b, a_scales, b_scales)


def install(platforms: tuple[str, ...] = _PLATFORMS) -> None:
    """Lower ``jax.nn.scaled_matmul`` through mxlower on ``platforms`` (default: cpu), on every
    supported JAX, replacing the rule JAX has there if any (JAX 0.11+ has one for the CPU; cuda
    and rocm have JAX's own unless named here).  Takes effect for every later call, whatever was
    compiled before (JAX's caches are cleared).  Idempotent."""
    prim = jax_private.scaled_matmul_primitive()
    new = [p for p in platforms if p not in _installed]
    for p in new:
        _installed[p] = jax_private.platform_lowering(prim, p)
        mlir.register_lowering(prim, _lowering, platform=p)
    if new:
        jax.clear_caches()  # what was lowered before must be lowered again with the new rule


def uninstall() -> None:
    """Undo :func:`install`: each platform gets back the rule it had before (JAX's own on the
    CPU from JAX 0.11 on; none, so an error, on 0.10.x), for every later call (JAX's caches are
    cleared).  Does nothing when nothing is installed."""
    if not _installed:
        return
    prim = jax_private.scaled_matmul_primitive()
    for p, previous in list(_installed.items()):
        jax_private.set_platform_lowering(prim, p, previous)
        del _installed[p]
    jax.clear_caches()  # what was lowered with mxlower's rule must be lowered again


def installed() -> tuple[str, ...]:
    """The platforms :func:`install` currently covers."""
    return tuple(_installed)
