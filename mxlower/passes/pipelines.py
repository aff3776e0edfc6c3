"""Named pipelines of the MX passes."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mxlower.formats import SCALE_MODES
from mxlower.passes.base import Pipeline, option

__all__ = ["MxToStablehlo"]


@dataclasses.dataclass(frozen=True)
class MxToStablehlo(Pipeline):
    """Lower every MX form (XLA custom calls, xla.scaled_dot, mx ops) to plain StableHLO.

    Expands to ``mxlower-verify-mx, mxlower-legalize-xla-mx, mxlower-decompose-mx,
    canonicalize, cse, symbol-dce``: malformed mx ops are reported before anything changes,
    XLA's custom calls and composites become mx ops, every mx op becomes StableHLO, and
    symbol-dce drops the private decomposition functions of the replaced ``xla.scaled_dot``
    composites.  The datatype ops of docs/semantics.md section 10 (``mx.cast``, ``mx.sparse``,
    ``mx.quantize`` / ``mx.dequantize`` with a ``number``) take the same path.  The result
    runs on XLA:CPU for every format whose types it supports; for the f6 formats (and f6
    datatypes such as ``e3m2fo``) append ``mxlower-expand-narrow-floats``; then
    ``mxlower-stablehlo-to-llvm`` lowers it to LLVM.

    Example::

        mxlower-opt jax_module.mlir --pass-pipeline='builtin.module(mxlower-mx-to-stablehlo)'
        mxlower-run jax_module.mlir --pipeline='builtin.module(mxlower-mx-to-stablehlo)'
    """

    name: ClassVar[str] = "mxlower-mx-to-stablehlo"
    module_only: ClassVar[str] = ("it ends with symbol-dce, which works on the module's symbol "
                                  "table")
    xla_scale_mode: str = option("nearest", "scale_mode of the quantize that replaces "
                                 "__op$quantize", choices=SCALE_MODES)
    scale_mode: str = option("", "override every quantize's scale_mode (empty: keep)",
                             choices=("",) + SCALE_MODES)
    compute_type: str = option("", "override every scaled_dot's compute type (empty: keep)",
                               choices=("", "f32", "bf16", "f16"))

    def build(self) -> str:
        decompose = []
        if self.scale_mode:
            decompose.append(f"scale-mode={self.scale_mode}")
        if self.compute_type:
            decompose.append(f"compute-type={self.compute_type}")
        opts = "{" + " ".join(decompose) + "}" if decompose else ""
        return (f"mxlower-verify-mx, "
                f"mxlower-legalize-xla-mx{{scale-mode={self.xla_scale_mode}}}, "
                f"mxlower-decompose-mx{opts}, canonicalize, cse, symbol-dce")
