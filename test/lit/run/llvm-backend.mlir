// mxlower-run --backend=llvm: the decomposed module lowered with mxlower-stablehlo-to-llvm and
// run on upstream MLIR's ExecutionEngine agrees bit for bit with XLA:CPU, f6 included (XLA:CPU
// needs mxlower-expand-narrow-floats for f6; the LLVM path converts narrow types itself).

// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo, mxlower-expand-narrow-floats)' --seed 3 -o %t.xla.npz --no-print
// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --backend=llvm --seed 3 --compare %t.xla.npz | FileCheck %s
// CHECK: %0 = dense<{{.*}}> : tensor<4x64xf6E3M2FN>
// CHECK: // compare result #0 with {{.*}}[result0]: OK (bit-exact
// CHECK: // compare result #1 with {{.*}}[result1]: OK (bit-exact
// CHECK: // compare result #2 with {{.*}}[result2]: OK (bit-exact

// The shipped JAX-produced MXFP8 scaled matmul, on the LLVM backend, against its reference.
// RUN: mxlower-run %S/../../../examples/mxfp8_scaled_matmul.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' -i %S/../../../examples/mxfp8_scaled_matmul.inputs.npz --compare %S/../../../examples/mxfp8_scaled_matmul.ref.npz --rtol 1e-6 --atol 1e-6 --backend=llvm --no-print | FileCheck %s --check-prefix=JAX
// JAX: // compare result #0 with {{.*}}: OK (rtol 1e-06, atol 1e-06

// A pipeline that already leaves StableHLO is refused with a clear error.
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo, mxlower-stablehlo-to-llvm)' --backend=llvm 2>&1 | FileCheck %s --check-prefix=UPSTREAM
// UPSTREAM: mxlower-run: error: the pipeline hands the module to upstream MLIR; mxlower-run takes StableHLO

func.func @main(%x: tensor<4x64xf32>) -> (tensor<4x64xf6E3M2FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp6_e3m2", block_size = 32 : i64, axis = 1 : i64, scale_mode = "rceil"} : (tensor<4x64xf32>) -> (tensor<4x64xf6E3M2FN>, tensor<4x2xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp6_e3m2", block_size = 32 : i64, axis = 1 : i64} : (tensor<4x64xf6E3M2FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
  return %q, %s, %d : tensor<4x64xf6E3M2FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>
}
