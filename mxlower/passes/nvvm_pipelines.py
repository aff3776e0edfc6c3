"""``mxlower-gpu-to-nvvm``: GPU kernels with narrow-float conversions to the LLVM + NVVM dialects.

See :class:`GpuToNVVM`; :mod:`mxlower.execution.ptx` (and ``mxlower-translate --emit=ptx``)
takes its result to PTX with xtc's ``llc``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mxlower.lowering.nvvm_model import CHIPS
from mxlower.passes.base import Pipeline, option


@dataclasses.dataclass(frozen=True)
class GpuToNVVM(Pipeline):
    """Lower GPU kernels (gpu.func, or func.func marked gpu.kernel) to LLVM + NVVM for one chip.

    Stages (upstream MLIR 22): ``mxlower-lower-narrow-floats-to-nvvm`` (narrow-float
    conversions to cvt instructions or integer ops; narrow storage to one i8 code per element),
    ``mxlower-widen-bool-memrefs`` (memrefs of i1 as one byte per bool), ``canonicalize``, ``cse``, ``lower-affine``, ``convert-scf-to-cf``, ``gpu.module(
    convert-gpu-to-nvvm)``, ``convert-func-to-llvm``, ``convert-to-llvm`` and
    ``reconcile-unrealized-casts``.  Memref arguments are bare pointers by default, so a
    kernel is called with one device pointer per memref (``bare-ptr=false``: MLIR's memref
    descriptors).  ``mxlower-translate --emit=ptx`` runs this pipeline and then ``llc``.

    Before::

        gpu.module @k [#nvvm.target<chip = "sm_100a">] {
          gpu.func @quant(%x: memref<64xf32>, %y: memref<64xf4E2M1FN>) kernel {
            ...
            %c = arith.truncf %v : vector<2xf32> to vector<2xf4E2M1FN>
            vector.store %c, %y[%i] : memref<64xf4E2M1FN>, vector<2xf4E2M1FN>

    After (abridged)::

        gpu.module @k [#nvvm.target<chip = "sm_100a">] {
          llvm.func @quant(%arg0: !llvm.ptr, %arg1: !llvm.ptr) attributes {nvvm.kernel, ...}
            %9 = nvvm.convert.f32x2.to.f4x2 %7, %8 : i8 (f4E2M1FN)
            ...
            llvm.store %20, %19 : vector<2xi8>, !llvm.ptr

    Example::

        mxlower-opt k.mlir -p 'builtin.module(mxlower-gpu-to-nvvm{chip=sm_100a})'
        mxlower-translate k.mlir --emit=ptx --chip=sm_100a -o k.ptx
    """

    name: ClassVar[str] = "mxlower-gpu-to-nvvm"
    chip: str = option("", "target chip (empty: each gpu.module's #nvvm.target)",
                       choices=("",) + CHIPS)
    hardware: bool = option(True, "use cvt instructions where the chip has them")
    bare_ptr: bool = option(True, "pass memrefs to kernels as bare pointers")
    index_bitwidth: int = option(64, "bit width of index values in device code",
                                 choices=(32, 64))

    def build(self) -> str:
        bare = "true" if self.bare_ptr else "false"
        chip = f"chip={self.chip} " if self.chip else ""
        hw = "true" if self.hardware else "false"
        lower = f"mxlower-lower-narrow-floats-to-nvvm{{{chip}hardware={hw} narrow-storage=true}}"
        return ", ".join([
            lower,
            "mxlower-widen-bool-memrefs",  # convert-to-llvm asserts on stores to memrefs of i1
            "canonicalize",
            "cse",
            "lower-affine",
            "convert-scf-to-cf",
            f"gpu.module(convert-gpu-to-nvvm{{use-bare-ptr-memref-call-conv={bare} "
            f"index-bitwidth={self.index_bitwidth}}})",
            f"convert-func-to-llvm{{use-bare-ptr-memref-call-conv={bare} "
            f"index-bitwidth={self.index_bitwidth}}}",
            "convert-to-llvm",
            "reconcile-unrealized-casts",
        ])
