"""``mxlower-decompose-mx``: ``mx`` ops -> plain StableHLO computing docs/semantics.md exactly."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.dialect import mx
from mxlower.formats import SCALE_MODES
from mxlower.lowering import cast_math
from mxlower.lowering.mx_math import lower_op
from mxlower.passes.base import ModulePass, option

__all__ = ["DecomposeMx", "decompose"]

_DATATYPE_OPS = (mx.CastOp, mx.SparseOp, mx.GeneralQuantizeOp, mx.GeneralDequantizeOp)


def _datatype_recipe(spec: Any) -> bool:
    """Whether :mod:`mxlower.lowering.cast_math` lowers the parsed op ``spec``: the section 10
    ops whose datatype is no MX format's.  An MX format's ops -- its quantize / dequantize in
    either spelling (:func:`mxlower.dialect.mx.parse` reads the datatype spelling as the named
    op) and an ``mx.cast`` to its datatype (``fmt`` set) -- take the MX recipe."""
    if isinstance(spec, mx.CastOp):
        return spec.fmt is None
    return isinstance(spec, _DATATYPE_OPS)


@dataclasses.dataclass(frozen=True)
class DecomposeMx(ModulePass):
    """Lower mx ops to plain StableHLO, bit-exact with docs/semantics.md.

    ``mx.quantize`` becomes a block reduction of the magnitude bits, integer exponent arithmetic
    for the shared scale (floor / rceil / nearest), exact power-of-two scaling and saturation
    of the elements on their bits (XLA:CPU flushes f32 subnormals, so no float instruction
    sees one) and a final ``stablehlo.convert`` to the element type (append
    ``mxlower-expand-narrow-floats`` to turn those converts into integer ops, which XLA:CPU
    runs faster).  ``mx.dequantize`` scales the decoded elements by the decoded scale with an
    integer ``ldexp`` (its results may be f32 subnormals, which must come out exact);
    ``mx.scaled_dot`` dequantizes both operands to the compute type and contracts them with
    ``stablehlo.dot_general``, inside a ``stablehlo.if`` that takes the f32 contraction where
    reductions over the scales prove it exact despite flushed subnormals and otherwise
    contracts the exact values in f64 (``mxlower-stablehlo-to-llvm`` turns the ``if`` into
    ``scf.if``).  ``mx.pack``/``mx.unpack`` become shifts
    and masks.  The recipe is :mod:`mxlower.lowering.mx_math`.

    An ``mx.quantize`` / ``mx.dequantize`` whose datatype is an MX format's (``number =
    "e4m3fn", scale = "e8m0_t32"``, rounding to nearest even with a scale mode the format
    has) is that format's op and lowers as above, and an ``mx.cast`` to such a datatype is
    that quantize followed by the format's dequantize to the input's type: a format's
    numerics have one recipe whichever op spells them.  The other datatype ops of
    docs/semantics.md section 10 (``mx.sparse``, and ``mx.cast`` / ``mx.quantize`` /
    ``mx.dequantize`` of any other datatype or modes) follow
    :mod:`mxlower.lowering.cast_math`: one reduction per tile (tensor, channel, 1D or 2D
    tile) of the magnitude bits, the scale chosen in integers (max / midmax / rceil /
    nearest) or as an exactly rounded f32 quotient (float scales, zero points), the elements
    rounded by the codec's encoder with the scale's exponent as a shift, and sparsity as a
    rank within each group.  The ``scale-mode`` option applies to the MX formats' quantize
    ops (in either spelling) only, not to casts (a cast's ``scalemode`` is part of its
    datatype).

    Only ``mx`` ops are lowered.  XLA's ``__op$quantize`` / ``__op$dequantize`` /
    ``__op$block_scaled_dot`` custom calls and the ``xla.scaled_dot`` composite are
    ``mxlower-legalize-xla-mx``'s job and are left as they are; the
    ``mxlower-mx-to-stablehlo`` pipeline runs ``mxlower-verify-mx``, that pass and this one
    in turn, so nothing MX remains.  A malformed mx op is reported at its location (the
    ``mxlower-verify-mx`` message) and the pass fails after looking at every op.

    Before::

        %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64,
                 axis = 1 : i64, scale_mode = "floor"}
                 : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)

    After (abridged)::

        %0 = stablehlo.bitcast_convert %x : (tensor<4x64xf32>) -> tensor<4x64xi32>
        %1 = stablehlo.reshape %0 : (tensor<4x64xi32>) -> tensor<4x2x32xi32>
        %3 = stablehlo.reduce(%2 init: %c) applies stablehlo.maximum across dimensions = [2]
        ...
        %q = stablehlo.convert %y : (tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN>
        %s = stablehlo.bitcast_convert %c8 : (tensor<4x2xui8>) -> tensor<4x2xf8E8M0FNU>

    Example::

        mxlower-opt in.mlir --mxlower-decompose-mx='scale-mode=rceil compute-type=bf16'
    """

    name: ClassVar[str] = "mxlower-decompose-mx"
    scale_mode: str = option("", "override every quantize's scale_mode (empty: keep the op's)",
                             choices=("",) + SCALE_MODES)
    compute_type: str = option("", "override every scaled_dot's compute (dequantize) type "
                               "(empty: keep the op's)", choices=("", "f32", "bf16", "f16"))

    def run(self, op: Any) -> None:
        decompose(op, scale_mode=self.scale_mode or None, compute_type=self.compute_type or None)


def decompose(root: Any, *, scale_mode: str | None = None, compute_type: str | None = None) -> int:
    """Rewrite every mx op under ``root`` in place; returns how many were rewritten.

    Errors (malformed ops) are recorded as diagnostics and raised as PassFailure after all ops
    have been looked at."""
    ops = collect_ops(root, mx.is_mx_op)
    failures = []
    for o in ops:
        try:
            spec = mx.parse(o)
        except mx.MXError as e:
            failures.append(diag.error(o, f"'{o.name}' op {e}"))
            continue
        with o.location:
            if _datatype_recipe(spec):
                try:
                    cast_math.lower_op(spec)
                except cast_math.CastLoweringError as e:
                    failures.append(diag.error(o, f"'{o.name}' op {e}"))
                continue
            lower_op(spec, scale_mode, compute_type)
    if failures:
        raise failures[0]
    return len(ops)
