"""``mxlower-unsigned-to-signless``: the unsigned integer types left at function boundaries
after StableHLO's lowering to linalg, made signless.  See :class:`UnsignedToSignless`; the
rewrite is :func:`mxlower.lowering.signless.make_signless`."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.lowering.signless import make_signless
from mxlower.passes.base import ModulePass

__all__ = ["UnsignedToSignless"]


@dataclasses.dataclass(frozen=True)
class UnsignedToSignless(ModulePass):
    """Retype ``ui<N>`` to ``i<N>`` once StableHLO is lowered (function signatures, calls,
    region arguments, constants), and drop the identity casts that leaves.

    ``stablehlo-legalize-to-linalg`` gives unsigned StableHLO ops signless arith ops that
    carry the signedness (``arith.divui``, ``arith.cmpi ugt``, ``arith.uitofp``,
    ``arith.shrui``, ``arith.maxui``...) but keeps ``ui<N>`` at the boundaries, joined by
    ``builtin.unrealized_conversion_cast``, which one-shot-bufferize cannot handle.  The same
    bits in a signless type change nothing any remaining op computes (function boundaries,
    calls and copies do not look at signedness); a StableHLO or CHLO op still on unsigned
    integers is reported, not retyped.  ``mxlower-stablehlo-to-llvm`` runs it right after
    the lowering to linalg, so every unsigned type runs on ``mxlower-run --backend=llvm``.

    Before (after stablehlo-legalize-to-linalg)::

        func.func @f(%a: tensor<4xui8>) -> tensor<4xui8> {
          %0 = builtin.unrealized_conversion_cast %a : tensor<4xui8> to tensor<4xi8>
          ... linalg on tensor<4xi8> giving %1 ...
          %2 = builtin.unrealized_conversion_cast %1 : tensor<4xi8> to tensor<4xui8>
          return %2 : tensor<4xui8>
        }

    After::

        func.func @f(%a: tensor<4xi8>) -> tensor<4xi8> {
          ... linalg on tensor<4xi8> giving %1 ...
          return %1 : tensor<4xi8>
        }

    Example::

        mxlower-opt in.mlir -p 'builtin.module(stablehlo-legalize-to-linalg,
            mxlower-unsigned-to-signless)'
    """

    name: ClassVar[str] = "mxlower-unsigned-to-signless"
    module_only: ClassVar[str] = "it rewrites function signatures and their calls together"

    def run(self, op: Any) -> None:
        make_signless(op)
