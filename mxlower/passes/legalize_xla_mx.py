"""``mxlower-legalize-xla-mx``: XLA's MX custom calls and JAX's ``xla.scaled_dot`` -> ``mx`` ops."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.formats import SCALE_MODES
from mxlower.lowering import xla_mx
from mxlower.passes.base import ModulePass, option

__all__ = ["LegalizeXlaMx", "legalize"]


@dataclasses.dataclass(frozen=True)
class LegalizeXlaMx(ModulePass):
    """Rewrite XLA's MX custom calls and JAX's xla.scaled_dot composite into mx ops.

    ``stablehlo.custom_call @__op$quantize(x)`` (two results or one tuple result),
    ``@__op$dequantize(q, scale)`` and ``@__op$block_scaled_dot(lhs, rhs, lhs_scale[,
    rhs_scale[, global_scale]])`` (rank 2 or 3, contracting dimension last, batch dimension 0;
    ``backend_config`` as a JSON string or a dictionary, with
    ``scaled_dot_backend_config.dequantize_type`` and ``block_scaled_dot_backend_config.
    block_size`` for padded scales), and ``stablehlo.composite "xla.scaled_dot"`` become
    ``mx.quantize`` / ``mx.dequantize`` / ``mx.scaled_dot`` with explicit attributes.  The MX
    format follows from the element and scale types (f8E8M0FNU scales: MX formats; f8E4M3FN
    scales with f4E2M1FN elements: nvfp4).  A form that cannot be honoured (wrong operand
    count, scale type, shapes, unknown dequantize type, non-divisible block, i8 elements whose
    XLA meaning differs from mxint8) is an error at the op; nothing is silently skipped.  (An
    ``xla.scaled_dot`` whose operands are both f32/bf16/f16 is no MX form and stays as it is;
    an unscaled operand next to an MX one must carry the constant all-ones scale that
    ``jax.lax.scaled_dot`` passes.)  Every ``backend_config`` field read has its type checked
    (a wrong one is an error naming the field); fields mxlower does not read are ignored.
    ``mx`` ops already in the input are left alone (``mxlower-verify-mx`` checks them).  The
    decoding is :mod:`mxlower.lowering.xla_mx`.

    Before::

        %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) {backend_config =
             "{\\"scaled_dot_backend_config\\": {\\"dequantize_type\\": \\"F32\\"}}"}
             : (tensor<4x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>,
                tensor<8x2xf8E8M0FNU>) -> tensor<4x8xf32>

    After::

        %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {compute_type = f32, dot_dimension_numbers =
             #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>,
             lhs_block_size = 32 : i64, lhs_format = "mxfp8_e4m3", rhs_block_size = 32 : i64,
             rhs_format = "mxfp8_e4m3"} : (...) -> tensor<4x8xf32>

    Example::

        mxlower-opt jax_module.mlir --mxlower-legalize-xla-mx='scale-mode=nearest'
    """

    name: ClassVar[str] = "mxlower-legalize-xla-mx"
    scale_mode: str = option("nearest", "scale_mode given to the mx.quantize that replaces "
                             "__op$quantize (XLA's own rule is nearest; docs/compat.md)",
                             choices=SCALE_MODES)

    def run(self, op: Any) -> None:
        legalize(op, scale_mode=self.scale_mode)


def legalize(root: Any, *, scale_mode: str = "nearest") -> int:
    """Rewrite every MX custom call and xla.scaled_dot composite under ``root``; returns the
    number rewritten.  Every op that cannot be rewritten gets an error; the first is raised."""
    found = collect_ops(root, xla_mx.is_mx_form)
    failures = []
    for o in found:
        try:
            with o.location:
                xla_mx.rewrite(o, scale_mode)
        except xla_mx.XlaMxError as e:
            failures.append(diag.error(o, f"{xla_mx.describe(o)}: {e}"))
    if failures:
        raise failures[0]
    return len(found)
