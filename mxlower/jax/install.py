"""Run JAX's own ``jax.nn.scaled_matmul`` / ``jax.nn.scaled_dot_general`` on the CPU.

JAX lowers both through the ``scaled_matmul`` primitive
(``jax._src.cudnn.scaled_matmul_stablehlo._scaled_matmul_p``), which has lowering rules for
cuda (the ``__op$block_scaled_dot`` custom call, cuDNN) and rocm only, so on the CPU they fail
with "MLIR translation rule for primitive 'scaled_matmul' not found for platform cpu".
:func:`install` registers a CPU lowering for that primitive that binds mxlower.jax's
``mx_scaled_dot`` (``mx.scaled_dot`` lowered by mxlower's pipeline): the XLA
``__op$block_scaled_dot`` semantics that ``mxlower-legalize-xla-mx`` gives the custom call --
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

``jax.nn.scaled_dot_general(..., configs=[get_scaled_dot_general_config("mxfp8")] * 3)`` (and
"nvfp4") quantizes with JAX's own jnp code and then calls ``scaled_matmul``, so it runs too,
gradients included.  :func:`uninstall` removes the rule again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax.interpreters import mlir

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


def _primitive() -> Any:
    # JAX's private cuDNN module is imported only when (un)installing, so that a JAX release
    # that moves it breaks install() alone, not ``import mxlower.jax``
    from jax._src.cudnn import scaled_matmul_stablehlo

    return scaled_matmul_stablehlo._scaled_matmul_p


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
    """Register mxlower's lowering of ``jax.nn.scaled_matmul`` for ``platforms`` (default:
    cpu).  Idempotent.  A platform that already has its own rule (cuda, rocm) is left alone
    unless named explicitly."""
    prim = _primitive()
    for p in platforms:
        if p in _installed:
            continue
        table = mlir._platform_specific_lowerings[p]
        _installed[p] = table.get(prim)
        mlir.register_lowering(prim, _lowering, platform=p)


def uninstall() -> None:
    """Undo :func:`install` (restores whatever rule each platform had before)."""
    prim = _primitive()
    for p, previous in list(_installed.items()):
        table = mlir._platform_specific_lowerings[p]
        if previous is None:
            table.pop(prim, None)
        else:
            table[prim] = previous
        del _installed[p]


def installed() -> tuple[str, ...]:
    """The platforms :func:`install` currently covers."""
    return tuple(_installed)
