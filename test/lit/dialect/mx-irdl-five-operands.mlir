// REQUIRES: llvm-tools
// RUN: not mlir-opt --irdl-file=%S/../../../dialect/mx.irdl.mlir --allow-unregistered-dialect %s 2>&1 | FileCheck %s --check-prefix=IRDL
// RUN: mxlower-opt %s --mxlower-verify-mx | FileCheck %s --check-prefix=MXLOWER

// The one valid mx op the IRDL definition rejects: scaled_dot with both sides scaled and a
// global scale (XLA's five-operand __op$block_scaled_dot).  IRDL in MLIR 22 allows one
// variadic operand group per op (without operandSegmentSizes) and binds it to one type, so the
// tail after lhs, lhs_scales, rhs cannot hold both rhs_scales and the f32 global scale
// (dialect/mx.irdl.mlir, header).  mxlower's verifier accepts the op.

// IRDL: error: expected 'tensor<2x8x4xf8E4M3FN>' but got 'tensor<f32>'
// MXLOWER-LABEL: func.func @nvfp4_with_global_scale
// MXLOWER: "mx.scaled_dot"(%arg0, %arg1, %arg2, %arg3, %arg4)
func.func @nvfp4_with_global_scale(%a: tensor<2x16x64xf4E2M1FN>, %as: tensor<2x16x4xf8E4M3FN>, %b: tensor<2x8x64xf4E2M1FN>, %bs: tensor<2x8x4xf8E4M3FN>, %g: tensor<f32>) -> tensor<2x16x8xbf16> {
  %r = "mx.scaled_dot"(%a, %as, %b, %bs, %g) {lhs_format = "nvfp4", lhs_block_size = 16 : i64, rhs_format = "nvfp4", rhs_block_size = 16 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>, compute_type = f32} : (tensor<2x16x64xf4E2M1FN>, tensor<2x16x4xf8E4M3FN>, tensor<2x8x64xf4E2M1FN>, tensor<2x8x4xf8E4M3FN>, tensor<f32>) -> tensor<2x16x8xbf16>
  return %r : tensor<2x16x8xbf16>
}
