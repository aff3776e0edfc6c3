// The error for a module that reaches upstream MLIR with ops it does not know names what to
// run first: mxlower-mx-to-stablehlo for MX ops (mx ops, XLA's MX custom calls), the LLVM
// pipeline's StableHLO lowering for plain StableHLO (pipeline-errors.mlir).

// RUN: not mxlower-opt %s -p 'builtin.module(mxlower-stablehlo-to-llvm)' 2>&1 | FileCheck %s --check-prefix=MX
// MX: handover-hint.mlir:[[@LINE+8]]:1: error: cannot hand the module to upstream MLIR for pass '{{[a-z-]+}}': it still holds ops upstream MLIR does not know (mx.quantize); it has MX ops: run mxlower-mx-to-stablehlo first, e.g. 'builtin.module(mxlower-mx-to-stablehlo, mxlower-stablehlo-to-llvm)'

// RUN: not mxlower-opt %S/../../../examples/mxfp8_scaled_matmul.mlir -p 'builtin.module(mxlower-stablehlo-to-llvm)' 2>&1 | FileCheck %s --check-prefix=XLA
// XLA: error: {{.*}}(stablehlo.custom_call); it has MX ops: run mxlower-mx-to-stablehlo first

// What the error suggests works:
// RUN: mxlower-opt %s -p 'builtin.module(mxlower-mx-to-stablehlo, mxlower-stablehlo-to-llvm)' | FileCheck %s --check-prefix=OK
// OK: llvm.func @main(
module {
  func.func @main(%x: tensor<2x32xf32>) -> tensor<2x32xf8E4M3FN> {
    %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<2x32xf32>) -> (tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>)
    return %q : tensor<2x32xf8E4M3FN>
  }
}
