// Pipelines mix mxlower passes with jaxlib's passes, nest under func.func, and may cross to
// upstream MLIR; per-pass flags run in command-line order; --dump-pass-pipeline shows the
// expanded pipeline with every option.

// RUN: mxlower-opt %s -p 'builtin.module(func.func(cse, mxlower-test-diagnostics{tag-ops ops=stablehlo.add prefix="after cse"}), canonicalize)' | FileCheck %s --check-prefix=NESTED
// NESTED-LABEL: func.func @f
// NESTED: stablehlo.add %{{.*}} {mxlower.visited = "after cse"}
// NESTED-NOT: stablehlo.add
// NESTED: return

// RUN: mxlower-opt %s --cse --mxlower-test-diagnostics='tag-ops=true ops=stablehlo.add' --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=DUMP
// DUMP: Pass Manager with 2 passes:
// DUMP-NEXT: builtin.module(cse, mxlower-test-diagnostics{tag-ops=true prefix=visited ops=stablehlo.add})

// RUN: mxlower-opt %s --mxlower-test-diagnostics=tag-ops=1 --cse --mlir-print-ir-after-all 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER
// AFTER: // -----// IR Dump After mxlower-test-diagnostics (mxlower-test-diagnostics) //----- //
// AFTER-COUNT-2: stablehlo.add
// AFTER: // -----// IR Dump After cse (cse) //----- //
// AFTER-COUNT-1: stablehlo.add
// AFTER-NOT: stablehlo.add

// RUN: mxlower-opt %s -p 'builtin.module(stablehlo-legalize-to-linalg, one-shot-bufferize{bufferize-function-boundaries}, convert-linalg-to-loops, convert-scf-to-cf, convert-to-llvm, reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM
// LLVM: llvm.func @f
// LLVM: llvm.fadd
// LLVM-NOT: stablehlo.

// RUN: mxlower-opt %s --mlir-print-debuginfo | FileCheck %s --check-prefix=DEBUG
// DEBUG: loc("{{.*}}pipelines.mlir":[[# @LINE + 4]]:8)

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.add %a, %a : tensor<4xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
