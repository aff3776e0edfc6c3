"""``mxlower-lower-narrow-floats-to-nvvm``: narrow-float ``arith.truncf``/``arith.extf`` -> NVVM
``cvt`` instructions with fix-ups, or the codec's integer expansion.

See :class:`LowerNarrowFloatsToNVVM`; the table of instructions and fix-ups, the planning and
the recipes are :mod:`mxlower.lowering.nvvm`, the chips and cvt models
:mod:`mxlower.lowering.nvvm_model`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops, upstream
from mxlower.lowering import nvvm
from mxlower.lowering.narrow_floats import NarrowFloatLowering
from mxlower.lowering.nvvm_model import CHIPS
from mxlower.passes.base import ModulePass, option

__all__ = ["LowerNarrowFloatsToNVVM"]


@dataclasses.dataclass(frozen=True)
class LowerNarrowFloatsToNVVM(ModulePass):
    """Lower narrow-float arith.truncf/extf to NVVM cvt instructions (with fix-ups) or integer ops.

    Every ``arith.truncf`` to and ``arith.extf`` from a narrow type of :mod:`mxlower.types`
    (f8E4M3FN, f8E5M2, f8E8M0FNU, f6E2M3FN, f6E3M2FN, f4E2M1FN, f8E4M3, f8E3M4, f8E4M3FNUZ,
    f8E5M2FNUZ, f8E4M3B11FNUZ) on scalars or vectors, in ``gpu.func``, ``func.func`` or
    ``llvm.func`` bodies, becomes ``nvvm.convert.*`` ops where the chip has an instruction whose
    result equals docs/semantics.md section 2 after a cheap fix-up, and the codec's integer
    expansion otherwise; the result is bit-exact with mxlower's reference either way.  The
    chip comes from ``chip=`` or, when that is empty, from the enclosing ``gpu.module``'s
    ``#nvvm.target``.  Saturating quantize conversions (a clamped operand, or
    ``{mxlower.satfinite}``) get the bare ``.satfinite`` cvt; ``upward``/``toward_zero``
    scale conversions to f8E8M0FNU get ``cvt.rp``/``cvt.rz``; other ``toward_zero`` and
    ``to_nearest_away`` truncf (docs/semantics.md section 2.2) and every conversion of a type
    no cvt matches (f8E4M3, f8E3M4, the FNUZ types) get the integer expansion.  See
    :mod:`mxlower.lowering.nvvm` for the table of instructions and fix-ups.

    Before::

        %y = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3FN>

    After (chip=sm_90a)::

        %0 = vector.extract %x[1] : f32 from vector<2xf32>
        %1 = vector.extract %x[0] : f32 from vector<2xf32>
        %2 = nvvm.convert.f32x2.to.f8x2 %0, %1 {rnd = #nvvm.fp_rnd_mode<rn>,
               sat = #nvvm.sat_mode<satfinite>} : vector<2xi8> (f8E4M3FN)
        %3 = arith.bitcast %x : vector<2xf32> to vector<2xi32>
        %4 = arith.andi %3, %cst : vector<2xi32>                  // |x|
        %5 = arith.cmpi sgt, %4, %cst_0 : vector<2xi32>           // > 464 (or NaN)
        ...
        %9 = arith.select %5, %8, %2 : vector<2xi1>, vector<2xi8>  // -> NaN with x's sign
        %y = arith.bitcast %9 : vector<2xi8> to vector<2xf8E4M3FN>

    Example::

        mxlower-opt k.mlir --mxlower-lower-narrow-floats-to-nvvm='chip=sm_100a'
    """

    name: ClassVar[str] = "mxlower-lower-narrow-floats-to-nvvm"
    stack: ClassVar[str] = "upstream"
    chip: str = option("", "target chip, e.g. sm_100a (empty: each gpu.module's #nvvm.target)",
                       choices=("",) + CHIPS)
    hardware: bool = option(True, "use cvt instructions where the chip has them (false: the "
                            "integer expansion everywhere)")
    report: bool = option(False, "emit a remark at each conversion naming how it was lowered")
    narrow_storage: bool = option(False, "then store every remaining narrow float (memrefs, "
                                  "vectors, gpu.func signatures) as one i8 code per element, "
                                  "the layout of ml_dtypes arrays")

    def run(self, op: Any) -> None:
        ops = collect_ops(op, lambda o: o.name in ("arith.truncf", "arith.extf"))
        failures = []
        for o in ops:
            types = nvvm.conversion_types(o)
            if types is None:
                continue
            try:
                plan = nvvm.plan_conversion(o, self.chip, self.hardware, self.name)
            except diag.PassFailure as f:
                failures.append(f)
                continue
            if self.report:
                fixed = plan.path == "cvt" and plan.fixup and o.name == "arith.truncf"
                diag.remark(o, f"{types[0]} -> {types[1]}: {plan.detail}"
                            + (" + fix-up" if fixed else ""))
            nvvm.lower_conversion(o, plan)
        if failures:
            raise failures[0]
        if self.narrow_storage:  # the nvvm.convert ops made above keep their types
            NarrowFloatLowering(upstream.module("ir"), upstream.module("dialects.arith"),
                                op).run()
