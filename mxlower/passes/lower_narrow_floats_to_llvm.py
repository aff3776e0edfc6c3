"""``mxlower-lower-narrow-floats-to-llvm``: narrow float conversions and storage to integers.

Runs on upstream MLIR (``stack = "upstream"``), after bufferization and before
``convert-to-llvm``.  See :class:`LowerNarrowFloatsToLLVM`; the rewrite is
:class:`mxlower.lowering.narrow_floats.NarrowFloatLowering`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower.bindings import upstream
from mxlower.lowering.narrow_floats import NarrowFloatLowering
from mxlower.passes.base import ModulePass, option

__all__ = ["LowerNarrowFloatsToLLVM"]


@dataclasses.dataclass(frozen=True)
class LowerNarrowFloatsToLLVM(ModulePass):
    """Lower arith.truncf/extf on f8/f6/f4 types to integer ops, and their storage to i8.

    Every ``arith.truncf`` / ``arith.extf`` (scalar, vector or tensor) converting between
    f64/f32/bf16/f16 and a narrow type of :mod:`mxlower.types` (f8E4M3FN, f8E5M2, f8E8M0FNU,
    f6E2M3FN, f6E3M2FN, f4E2M1FN, f8E4M3, f8E3M4, f8E4M3FNUZ, f8E5M2FNUZ, f8E4M3B11FNUZ)
    becomes the branch-free integer ops :mod:`mxlower.lowering.codec` generates
    (docs/semantics.md section 2, bit-exact with ml_dtypes; one rounding, also from f64;
    upstream ``arith-expand`` is not exact for f4 and has no expansion of the other f8 types,
    see test/lit/run/arith-expand-f4-differs.mlir and arith-expand-new-f8.mlir).  A
    conversion between two narrow types gives the result of going through f32 (which is
    exact).  A truncf's ``roundingmode`` is honoured: ``toward_zero`` and ``to_nearest_away``
    round as docs/semantics.md section 10.2 says, then keep the type's section 2 NaN, Inf and
    overflow rules (toward zero, a finite value never overflows).

    Storage: every narrow float type in the module -- scalars, vectors, memrefs and tensors,
    function signatures, block arguments, ``arith.constant`` and ``memref.global`` values --
    becomes ``i8`` holding the code in its low bits (upper bits zero), the layout of
    ml_dtypes' arrays (one byte per element, also for f4/f6).  MLIR 22's ``convert-to-llvm``
    would map f8 to ``i8`` but f6/f4 to ``i6``/``i4``, whose in-memory upper bits LLVM leaves
    unspecified and whose vectors it packs; this pass makes every one of them ``i8``.  A
    caller of a lowered function passes and receives the i8 codes (``array.view(np.uint8)``).

    With ``via-f32``, a bf16/f16 source is first extended to f32 (exact, so the result is the
    same) and converted with 32-bit integer ops, which x86 vectorizes 3-4x faster than the
    16-bit ones (AVX2 has no 16-bit variable shifts); mxlower-stablehlo-to-llvm sets it.

    Only ``truncf``/``extf`` may compute on narrow values: ``arith.addf`` on ``f8E4M3FN``,
    ``vector.bitcast`` of f4/f6 vectors, conversions from or to other float types (tf32, ...),
    and truncf rounding ``upward`` or ``downward`` are reported as errors.

    Before::

        %c = arith.truncf %x : vector<8xf32> to vector<8xf4E2M1FN>
        vector.store %c, %m[%i] : memref<?xf4E2M1FN>, vector<8xf4E2M1FN>

    After (abridged)::

        %b = arith.bitcast %x : vector<8xf32> to vector<8xi32>
        %e = arith.shrui %b, %cst23 : vector<8xi32>
        ...
        %c = arith.trunci %r : vector<8xi32> to vector<8xi8>
        vector.store %c, %m[%i] : memref<?xi8>, vector<8xi8>

    Example::

        mxlower-opt in.mlir -p 'builtin.module(one-shot-bufferize{bufferize-function-boundaries},
            convert-linalg-to-loops, mxlower-lower-narrow-floats-to-llvm, convert-to-llvm,
            reconcile-unrealized-casts)'
    """

    name: ClassVar[str] = "mxlower-lower-narrow-floats-to-llvm"
    stack: ClassVar[str] = "upstream"
    via_f32: bool = option(False, "truncate bf16/f16 to narrow types through an exact "
                           "arith.extf to f32 (same results), so the integer code works on "
                           "32-bit lanes: 3-4x faster on x86 AVX2, which has no 16-bit "
                           "variable shifts; a bf16 extf then needs arith-expand{include-bf16}")

    def run(self, op: Any) -> None:
        NarrowFloatLowering(upstream.module("ir"), upstream.module("dialects.arith"), op,
                            self.via_f32).run()
