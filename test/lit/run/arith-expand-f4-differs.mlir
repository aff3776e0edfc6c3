// REQUIRES: llvm-tools
// RUN: %PYTHON -c "import numpy as np; np.save(r'%t.npy', np.array([1.25, 2.5, 5.0, -0.3, np.nan, -np.nan], np.float32))"
// RUN: %PYTHON -m mxlower.tools.llvm_exec %s -i %t.npy | FileCheck %s --check-prefix=MXLOWER
// RUN: %PYTHON -m mxlower.tools.llvm_exec %s -i %t.npy --pipeline 'builtin.module(stablehlo-legalize-to-linalg, canonicalize, one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}, convert-linalg-to-loops, arith-expand{include-f4e2m1}, func.func(llvm-request-c-wrappers), expand-strided-metadata, convert-scf-to-cf, convert-to-llvm, reconcile-unrealized-casts)' | FileCheck %s --check-prefix=UPSTREAM

// Why mxlower lowers f4E2M1FN conversions itself: upstream MLIR's arith-expand expansion of
// arith.truncf f32 -> f4E2M1FN is not docs/semantics.md section 2 (= ml_dtypes).  Both pipelines run
// the same stablehlo.convert on [1.25, 2.5, 5.0, -0.3, NaN, -NaN] through the ExecutionEngine:
//   1.25 (tie of 1.0 and 1.5)  -> 1.0 (0x2)  round to nearest even; arith-expand: 1.5 (0x3)
//   2.5  (tie of 2 and 3)      -> 2.0 (0x4)                        ; arith-expand: 3.0 (0x5)
//   5.0  (tie of 4 and 6)      -> 4.0 (0x6)                        ; arith-expand: 6.0 (0x7)
//   -0.3                       -> -0.5 (0x9)                       ; arith-expand: +0.5 (0x1)
//   NaN, -NaN                  -> -0 (0x8), the XLA convention      ; arith-expand: 6.0 (0x7)
// (ties round away from zero, the sign of small negatives is lost, NaN becomes max).

// MXLOWER: result 0: float4_e2m1fn[6] = {{.*}} codes = [0x2, 0x4, 0x6, 0x9, 0x8, 0x8]
// UPSTREAM: result 0: float4_e2m1fn[6] = {{.*}} codes = [0x3, 0x5, 0x7, 0x1, 0x7, 0x7]

func.func @main(%x: tensor<?xf32>) -> tensor<?xf4E2M1FN> {
  %0 = stablehlo.convert %x : (tensor<?xf32>) -> tensor<?xf4E2M1FN>
  return %0 : tensor<?xf4E2M1FN>
}
