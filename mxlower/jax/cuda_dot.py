"""``mx_scaled_dot`` lowered for CUDA with ``impl="auto"``: XLA's block-scaled dot where XLA
runs the pair on cuDNN, mxlower's dequantize kernels and a dot otherwise.

* Both sides MX in a pair of :data:`mxlower.lowering.xla_mx.CUDNN_PAIRS` (MXFP8 x MXFP8 in
  blocks of 32 -- e4m3 or e5m2 elements, not both e5m2 --, NVFP4 x NVFP4 in blocks of 16), one
  contracting dimension (the blocked axis) on each side: each side is transposed to
  ``[batch..., free..., K]`` (no transpose where it is already so) and reshaped to
  ``[B, M, K]`` / ``[B, N, K]``, its scales alike, and
  :func:`mxlower.lowering.xla_mx.emit_block_scaled_dot` writes ``__op$block_scaled_dot``
  with an f32 result -- the custom call, ``backend_config`` and layouts of JAX's
  ``jax.nn.scaled_matmul`` on CUDA, which XLA's GPU compiler hands to cuDNN.  The f32 result
  is reshaped back (batch, lhs free, rhs free), multiplied by the global scale and converted
  to the result type by :func:`mxlower.lowering.mx_math.scaled_dot_epilogue`, as in every
  other lowering (docs/semantics.md section 6: XLA takes no fifth, global-scale operand, and a
  bf16 or f16 ``dequantize_type`` would round the dequantized values, or overflow them).
  The arithmetic is XLA's: cuDNN's block-scaled GEMM where the chip has one (Blackwell), XLA's
  own dequantize-and-dot expansion elsewhere -- run on an H200 (expanded), within section 6
  (test/python/test_gpu_jax.py); cuDNN's kernel has not been run.
* Otherwise (other formats or block sizes, a plain side, several contracting dimensions):
  :mod:`mxlower.jax.kernels`' rule -- the dequantize kernels (:mod:`mxlower.execution.
  ffi_cuda`) and XLA's dot, or the portable StableHLO where those kernels cannot be built.
* ``impl="xla"``, :func:`mxlower.jax.lower`, ``jax.export``, symbolic shapes and partitioned
  programs: the portable StableHLO, as for every kernel call.

The emitted text is checked on the CPU by lowering for CUDA (``jax.jit(f).trace(...).lower(
lowering_platforms=("cuda",))``), and read back by ``mxlower-legalize-xla-mx`` to the numbers
of :mod:`mxlower.reference` (test/python/test_jax_cuda_dot.py).
"""

from __future__ import annotations

import math
from typing import Any

from jax.interpreters import mlir

from mxlower.bindings.jaxlib import ir
from mxlower.ir.stablehlo_builder import Builder
import mxlower.jax.kernels as kernels
import mxlower.jax.primitives as primitives
from mxlower.jax.dtypes import mlir_name
from mxlower.lowering import mx_math, xla_mx

__all__ = ["uses_cudnn"]


def uses_cudnn(params: dict[str, Any], dimension_numbers: Any) -> bool:
    """Whether an ``mx_scaled_dot`` with ``params`` is one XLA runs on cuDNN: a supported pair
    contracted along the blocked axis only."""
    (lc, rc), _ = dimension_numbers
    return (len(lc) == 1 and lc[0] == params["lhs_axis"] and rc[0] == params["rhs_axis"]
            and xla_mx.cudnn_block_scaled_dot(params["lhs_format"], params["lhs_block_size"],
                                              params["rhs_format"], params["rhs_block_size"]))


def _bmk(b: Builder, v: Any, s: Any, shape: tuple[int, ...], contracting: tuple[int, ...],
         batch: tuple[int, ...], k: int) -> tuple[Any, Any]:
    """One side and its scales as ``[B, M, K]`` and ``[B, M, K / k]``."""
    free = [d for d in range(len(shape)) if d not in contracting and d not in batch]
    perm = [*batch, *free, *contracting]
    bs = math.prod(shape[d] for d in batch)
    m = math.prod(shape[d] for d in free)
    kk = shape[contracting[0]]
    return (b.reshape(b.transpose(v, perm), [bs, m, kk]),
            b.reshape(b.transpose(s, perm), [bs, m, kk // k]))


def _rule(ctx, *args, dimension_numbers, out_dtype, impl="auto", **params):
    if not (kernels.custom_calls_allowed(ctx, impl) and uses_cudnn(params, dimension_numbers)):
        return _fallback(ctx, *args, dimension_numbers=dimension_numbers, out_dtype=out_dtype,
                         impl=impl, **params)
    ix = primitives._layout(params)
    (lc, rc), (lb, rb) = dimension_numbers
    b = Builder(ir.Location.current, ir.InsertionPoint.current)
    sides = [_bmk(b, args[ix[side]], args[ix[f"{side}_scales"]],
                  tuple(ctx.avals_in[ix[side]].shape), c, bt, params[f"{side}_block_size"])
             for side, c, bt in (("lhs", lc, lb), ("rhs", rc, rb))]
    (lhs, ls), (rhs, rs) = sides
    y = xla_mx.emit_block_scaled_dot(b, lhs, rhs, ls, rs)
    y = b.reshape(y, list(ctx.avals_out[0].shape))
    g = args[ix["g"]] if ix["g"] is not None else None
    return [mx_math.scaled_dot_epilogue(b, y, g, mlir_name(out_dtype))]


_fallback = kernels._scaled_dot_rule("cuda")

mlir.register_lowering(primitives.scaled_dot_p, _rule, platform="cuda")
