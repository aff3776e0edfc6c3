"""``mxlower-widen-bool-memrefs``: memrefs of i1 to one byte per bool (i8 storage).

Runs on upstream MLIR (``stack = "upstream"``), after bufferization and before
``convert-to-llvm``.  See :class:`WidenBoolMemrefs`; the rewrite is
:class:`mxlower.lowering.bool_memrefs.BoolMemrefWidening`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.bindings import upstream
from mxlower.lowering.bool_memrefs import BoolMemrefWidening
from mxlower.passes.base import ModulePass

__all__ = ["WidenBoolMemrefs"]


@dataclasses.dataclass(frozen=True)
class WidenBoolMemrefs(ModulePass):
    """Store memrefs of i1 as i8 (one byte per bool, 0 or 1), for convert-to-llvm.

    Upstream MLIR 22's ``convert-to-llvm`` (``finalize-memref-to-llvm``) asserts
    (``integralElementType.getWidth() >= 8`` in MemRefToLLVM.cpp's StoreOpLowering) on any
    ``memref.store`` to a ``memref<...xi1>``, and a ``vector.load`` / ``vector.store`` of
    ``vector<Nxi1>`` there lowers to an LLVM vector access that packs N bools into bits while
    scalar accesses use one byte each.  Bufferization creates such memrefs whenever a boolean
    tensor is materialized (e.g. a ``stablehlo.compare`` result used by several selects, or a
    function returning one); mxlower-stablehlo-to-llvm runs this pass before convert-to-llvm.

    This pass retypes every memref of i1 -- allocations, globals (their initial values
    become 0/1 bytes), function signatures (``function_type``, calls, block arguments) and
    every view, copy or metadata op on one -- to the same memref of i8, the layout of NumPy
    bool arrays, so that a lowered function takes and returns ``np.bool_`` arrays as they
    are.  Accesses convert at the load or store: ``memref.load`` / ``affine.load`` /
    ``vector.load`` / ``vector.transfer_read`` / masked loads, gathers and expanding loads
    load i8 and ``arith.trunci`` to i1 (element-wise for vectors; a pass-through or padding
    value is ``arith.extui``-ed to i8), and the stores ``arith.extui`` the value to i8.
    Memory holds only 0 and 1 (a load keeps the low bit).  Scalars, vectors and tensors of i1
    outside memory are left alone, as are memrefs of vectors of i1.

    Ops that compute on the stored bools or whose meaning is not known to be independent of
    the element type -- ``memref.atomic_rmw``, ``memref.generic_atomic_rmw``, linalg ops
    (lower them to loops first), ``bufferization.to_tensor``, ``vector.type_cast``, ... --
    are reported as errors at the op; the pass never changes what such an op means.

    Before::

        func.func @f(%m: memref<4xi1>, %v: i1, %i: index) -> i1 {
          memref.store %v, %m[%i] : memref<4xi1>
          %0 = memref.load %m[%i] : memref<4xi1>
          return %0 : i1
        }

    After::

        func.func @f(%m: memref<4xi8>, %v: i1, %i: index) -> i1 {
          %0 = arith.extui %v : i1 to i8
          memref.store %0, %m[%i] : memref<4xi8>
          %1 = memref.load %m[%i] : memref<4xi8>
          %2 = arith.trunci %1 : i8 to i1
          return %2 : i1
        }

    Example::

        mxlower-opt in.mlir -p 'builtin.module(stablehlo-legalize-to-linalg,
            one-shot-bufferize{bufferize-function-boundaries}, convert-linalg-to-loops,
            mxlower-widen-bool-memrefs, convert-to-llvm, reconcile-unrealized-casts)'
    """

    name: ClassVar[str] = "mxlower-widen-bool-memrefs"
    stack: ClassVar[str] = "upstream"

    def run(self, op: Any) -> None:
        BoolMemrefWidening(upstream.module("ir"), upstream.module("dialects.arith"), op).run()
