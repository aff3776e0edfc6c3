"""``mxlower-stablehlo-to-llvm``: a StableHLO function to the LLVM dialect, for the CPU.

See :class:`StablehloToLLVM`; :mod:`mxlower.execution.llvm` compiles and runs its result.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mxlower.passes.base import Pipeline, option


@dataclasses.dataclass(frozen=True)
class StablehloToLLVM(Pipeline):
    """Lower StableHLO functions to the LLVM dialect (bufferized, narrow floats as i8 codes).

    Stages: on jaxlib's stack ``mxlower-stablehlo-control-flow-to-scf`` (``stablehlo.if`` and
    ``stablehlo.case`` to ``scf``), ``stablehlo-legalize-to-linalg`` and ``canonicalize``; the module
    is then handed to upstream MLIR 22 (as text, locations kept) for
    ``linalg-fuse-elementwise-ops`` (one loop, no intermediate buffer, per elementwise chain),
    ``one-shot-bufferize`` (function boundaries bufferized, identity layouts), optionally
    out-parameters, buffer deallocation (returned buffers the callee does not own are cloned),
    ``convert-linalg-to-loops`` (or affine loops vectorized by ``affine-super-vectorize`` when
    ``vector-width`` > 0), ``mxlower-lower-narrow-floats-to-llvm{via-f32}`` (f8/f6/f4
    conversions to integer ops, their storage to i8), ``mxlower-widen-bool-memrefs`` (memrefs
    of i1 stored as one byte per bool: MLIR 22's convert-to-llvm asserts on i1 stores), bf16
    arithmetic emulated in f32 with integer bf16 <-> f32 conversions (LLVM 22's x86 backend
    asserts on some vector bf16 code), ``llvm-request-c-wrappers`` and ``convert-to-llvm``.
    Loops are left scalar by default: LLVM's loop vectorizer (``opt_level=3`` in
    :mod:`mxlower.execution.llvm`) vectorizes the branch-free conversion code (8 lanes on AVX2);
    ``vector-width`` is slower on dynamically shaped loops (masked transfers), see
    BENCHMARKS.md.

    Calling convention of the result: every public function takes and returns memref
    descriptors; a narrow float element is one i8 code per element (ml_dtypes' layout).  With
    ``out-params``, memref results become trailing caller-allocated arguments (statically
    shaped results are then written in place, without a copy).

    Before::

        func.func @f(%x: tensor<?xf32>) -> tensor<?xf4E2M1FN> {
          %0 = stablehlo.convert %x : (tensor<?xf32>) -> tensor<?xf4E2M1FN>
          return %0 : tensor<?xf4E2M1FN>
        }

    After (abridged)::

        llvm.func @f(%arg0: !llvm.ptr, ...) -> !llvm.struct<(ptr, ptr, i64, ...)>
          ... llvm.bitcast %v : f32 to i32 ... llvm.lshr ... llvm.trunc %c : i32 to i8 ...
        llvm.func @_mlir_ciface_f(...)

    Example::

        mxlower-opt f.mlir -p 'builtin.module(mxlower-stablehlo-to-llvm{out-params})'
    """

    name: ClassVar[str] = "mxlower-stablehlo-to-llvm"
    legalize_stablehlo: bool = option(True, "start with stablehlo-legalize-to-linalg and "
                                      "canonicalize on jaxlib's stack; false for input already "
                                      "in upstream dialects (the module is handed over at once)")
    out_params: bool = option(False, "turn memref results into trailing out-parameters "
                              "(buffer-results-to-out-params with hoist-static-allocs)")
    deallocate: bool = option(True, "free intermediate buffers (buffer-deallocation-pipeline)")
    c_wrappers: bool = option(True, "emit _mlir_ciface_ wrappers for every function "
                              "(needed by the ExecutionEngine)")
    vector_width: int = option(0, "vectorize elementwise loops in MLIR with this many lanes "
                               "(affine-super-vectorize); 0 leaves it to LLVM")

    def build(self) -> str:
        steps = (["mxlower-stablehlo-control-flow-to-scf", "stablehlo-legalize-to-linalg",
                  "mxlower-unsigned-to-signless", "canonicalize"]
                 if self.legalize_stablehlo else [])
        steps += [
            "linalg-fuse-elementwise-ops",
            "one-shot-bufferize{bufferize-function-boundaries "
            "function-boundary-type-conversion=identity-layout-map}",
        ]
        if self.out_params:
            steps.append("buffer-results-to-out-params{hoist-static-allocs hoist-dynamic-allocs "
                         "modify-public-functions}")
        if self.deallocate:  # returned buffers the callee does not own are cloned
            steps += ["buffer-deallocation-pipeline", "convert-bufferization-to-memref"]
        if self.vector_width > 0:
            width = self.vector_width
            steps += ["convert-linalg-to-affine-loops",
                      f"func.func(affine-super-vectorize{{virtual-vector-size={width}}})"]
        else:
            steps.append("convert-linalg-to-loops")
        steps.append("mxlower-lower-narrow-floats-to-llvm{via-f32}")
        steps.append("mxlower-widen-bool-memrefs")  # convert-to-llvm asserts on i1 stores
        # LLVM's x86 backend asserts on vector bf16 arithmetic: compute it in f32 and expand
        # the bf16 <-> f32 conversions to integer ops (round to nearest even)
        steps += ["arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}",
                  "arith-expand{include-bf16}"]
        if self.c_wrappers:
            steps.append("func.func(llvm-request-c-wrappers)")
        steps += ["canonicalize", "cse", "expand-strided-metadata", "lower-affine",
                  "convert-vector-to-scf", "convert-scf-to-cf", "convert-vector-to-llvm",
                  "convert-to-llvm", "reconcile-unrealized-casts"]
        return ", ".join(steps)
