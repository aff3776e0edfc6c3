"""``mxlower-scaled-dot-to-kernel``: ``mx.scaled_dot`` to a call of the fused dot kernel.

Runs on jaxlib's MLIR (``stack = "jaxlib"``), before ``mxlower-decompose-mx``.  See
:class:`ScaledDotToKernel`; the recipes are :mod:`mxlower.lowering.dot_call` (where the kernel
applies, and the call) and :func:`mxlower.lowering.mx_math.lower_scaled_dot` (the global
scale and the result type after it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.bindings.jaxlib import ir
from mxlower.dialect import mx
from mxlower.ir.stablehlo_builder import Builder
from mxlower.lowering import dot_call, dot_kernels
from mxlower.lowering.mx_math import lower_scaled_dot
from mxlower.passes.base import ModulePass, option

__all__ = ["ScaledDotToKernel"]


@dataclasses.dataclass(frozen=True)
class ScaledDotToKernel(ModulePass):
    """Lower mx.scaled_dot ops the fused CPU dot kernel takes to StableHLO calling that kernel.

    Each ``mx.scaled_dot`` with compute type f32 whose sides the kernel reads (see
    :func:`mxlower.lowering.dot_call.plan`: one contracting dimension, each MX side
    contracted over its blocked axis, plain sides f32 / bf16 / f16, no f6 elements, which
    XLA:CPU cannot hold; and, unless ``gemm``, few free rows on one side -- the GEMV of
    inference and its like: 16 MX rows, 64 plain ones against MX weights, on avx512 and amx
    256 f16, 128 f32 and 48 bf16 ones (:attr:`~mxlower.lowering.dot_kernels.DotSpec.stream_m`)
    -- or a GEMM of the integer dot products: both sides e2m1 / nvfp4, e2m3, e3m2 or mxint8
    with one block size, on the avx2, vnni, avx512 or amx path, the other MX pairs with one
    block size on amx (AMX tiles), the bf16 dot products -- those pairs, or bf16 rows
    against MX weights -- on avx512 where the CPU vendor (``vendor``, else this host's)
    runs them faster, or f32 rows against MX weights on avx512 and amx (transposed panels):
    :func:`mxlower.lowering.dot_kernels.gemm_by_default`) becomes
    docs/semantics.md section 6 in plain StableHLO whose
    contraction is a typed-FFI ``stablehlo.custom_call`` of the kernel's target
    (``mxlower_dot_<lhs>_<rhs>_<path>``): each side is brought to ``[B, rows, K]`` (a
    transpose only where the dimension numbers need one), the codes and scale codes are
    passed as they are stored -- the kernel decodes them in registers and never writes a
    dequantized operand -- and the ``[B, M, N]`` result is reshaped to the dot's.  The
    kernel makes the run-time range test of ``mxlower-decompose-mx``'s lowering itself,
    on the operands as stored: where scales near the ends of the range (or huge, subnormal
    or non-finite plain values) could make an f32 contraction flush or overflow, it runs the
    exact f64 contraction instead, so no ``stablehlo.if`` or reduction is emitted around the
    call.  nvfp4's global scale and the result type are applied after the call.  A side
    named by its datatype (``rhs_number = "e2m1fo", rhs_scale = "e8m0_t32"``) is the same
    side as by its format (``rhs_format = "mxfp4_e2m1"``): one parsed op, one kernel, keyed
    by the datatype it reads (:func:`mxlower.lowering.dot_call.plan`).

    Every other op, and every scaled dot the kernel does not take, is left for
    ``mxlower-decompose-mx``.  The targets are mxlower's own: ``mxlower-run --backend=xla``
    (and :func:`mxlower.execution.xla.compile`) register every ``mxlower_dot_...`` target a
    module calls, JIT-compiling its kernel for the host; a module with such calls does not
    run elsewhere.  Malformed mx ops are reported at their location as
    ``mxlower-decompose-mx`` reports them.

    Before::

        %y = "mx.scaled_dot"(%x, %w, %ws) {rhs_format = "mxfp4_e2m1", rhs_block_size = 32,
               ...} : (tensor<1x4096xf32>, tensor<4096x4096xf4E2M1FN>,
                       tensor<4096x128xf8E8M0FNU>) -> tensor<1x4096xf32>

    After (abridged)::

        %x3 = stablehlo.reshape %x : (tensor<1x4096xf32>) -> tensor<1x1x4096xf32>
        ...
        %c = stablehlo.custom_call @mxlower_dot_f32_mxfp4_e2m1k32_avx2(%x3, %w3, %ws3)
               {api_version = 4 : i32, backend_config = {}} ... -> tensor<1x1x4096xf32>
        %y = stablehlo.reshape %c : (tensor<1x1x4096xf32>) -> tensor<1x4096xf32>

    Example::

        mxlower-opt m.mlir -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx2},
            mxlower-decompose-mx)'
    """

    name: ClassVar[str] = "mxlower-scaled-dot-to-kernel"
    stack: ClassVar[str] = "jaxlib"

    path: str = option("", "SIMD path of the kernels (empty: the best this host runs)",
                       choices=("",) + dot_kernels.PATHS)
    gemm: bool = option(False, "call the kernel for every GEMM (more free rows on both sides "
                        "than stream: 16 MX rows, 64 plain ones against MX weights, 256 on "
                        "avx512 and amx, 48 bf16 ones there); by default only those of its "
                        "packed dot products (both sides e2m1 / nvfp4, e2m3, e3m2 or "
                        "mxint8; on amx, the other MX pairs with one block size; on avx512 "
                        "and an AMD CPU, those pairs and bf16 rows against MX weights), the "
                        "others being left to mxlower-decompose-mx")
    vendor: str = option("", "the CPU vendor whose measured GEMM defaults apply (empty: this "
                         "host's; AuthenticAMD takes the bf16 dot products' GEMMs by "
                         "default, others not)")

    def run(self, op: Any) -> None:
        path = self.path or dot_kernels.usable_paths()[0]
        failures = []
        for o in collect_ops(op, lambda o: o.name == "mx.scaled_dot"):
            try:
                s = mx.parse(o)
            except mx.MXError as e:
                failures.append(diag.error(o, f"'{o.name}' op {e}"))
                continue
            if s.compute_type != "f32" or not all(
                    dot_call.callable_side(side) for side in (s.lhs, s.rhs)):
                continue
            p = dot_call.plan(dot_call.side_of(s.lhs), dot_call.side_of(s.rhs),
                              (s.lhs_contracting, s.rhs_contracting),
                              (s.lhs_batch, s.rhs_batch), path, gemm=self.gemm,
                              vendor=self.vendor or dot_kernels.cpu_vendor())
            if p is None:
                continue
            spec, swap = p
            with o.location:
                b = Builder(o.location, ir.InsertionPoint(o))
                new = lower_scaled_dot(
                    b, s, "f32", contraction=lambda sub: dot_call.emit_call(sub, s, spec, swap))
                o.results[0].replace_all_uses_with(new)
                o.erase()
        if failures:
            raise failures[0]
