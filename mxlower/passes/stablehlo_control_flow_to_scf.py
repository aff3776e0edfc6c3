"""``mxlower-stablehlo-control-flow-to-scf``: ``stablehlo.if`` / ``stablehlo.case`` -> ``scf``.

See :class:`StablehloControlFlowToScf`; the rewrite is :mod:`mxlower.lowering.control_flow`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.bindings import collect_ops
from mxlower.lowering.control_flow import is_conditional, rewrite
from mxlower.passes.base import ModulePass

__all__ = ["StablehloControlFlowToScf"]


@dataclasses.dataclass(frozen=True)
class StablehloControlFlowToScf(ModulePass):
    """Rewrite stablehlo.if and stablehlo.case into scf.if and scf.index_switch.

    ``stablehlo-legalize-to-linalg`` lowers the ops inside a conditional's branches but leaves
    the conditional itself, which upstream MLIR (where ``mxlower-stablehlo-to-llvm`` continues)
    does not know; this pass, run first, gives it the ``scf`` form both stacks bufferize and
    lower.  The branches move over unchanged, their ``stablehlo.return`` becoming
    ``scf.yield``; the predicate or index is read from its rank-0 tensor with
    ``tensor.extract``.  ``stablehlo.case`` runs its last branch for an index out of range, so
    that branch becomes the ``default`` region of ``scf.index_switch`` and the others cases
    0 .. n-2.  mxlower's scaled dot lowering (``mxlower-decompose-mx``) emits a
    ``stablehlo.if``; so do JAX's ``lax.cond`` (a ``stablehlo.case``).  Other ops, and
    ``stablehlo.while``, are left alone.

    Before::

        %r = "stablehlo.if"(%p) ({
          stablehlo.return %x : tensor<4xf32>
        }, {
          %0 = stablehlo.negate %x : tensor<4xf32>
          stablehlo.return %0 : tensor<4xf32>
        }) : (tensor<i1>) -> tensor<4xf32>

    After::

        %extracted = tensor.extract %p[] : tensor<i1>
        %r = scf.if %extracted -> (tensor<4xf32>) {
          scf.yield %x : tensor<4xf32>
        } else {
          %0 = stablehlo.negate %x : tensor<4xf32>
          scf.yield %0 : tensor<4xf32>
        }

    Example::

        mxlower-opt in.mlir -p 'builtin.module(mxlower-stablehlo-control-flow-to-scf,
            stablehlo-legalize-to-linalg)'
    """

    name: ClassVar[str] = "mxlower-stablehlo-control-flow-to-scf"

    def run(self, op: Any) -> None:
        for o in collect_ops(op, is_conditional):
            rewrite(o)
