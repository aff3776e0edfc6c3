// REQUIRES: llvm-tools
// RUN: mlir-opt --irdl-file=%S/../../../dialect/mx.irdl.mlir --allow-unregistered-dialect --split-input-file --verify-diagnostics %s
// RUN: mxlower-opt %s --split-input-file --mxlower-verify-mx | FileCheck %s

// The unscaled datatype forms of mx.quantize (one result) and mx.dequantize (one operand):
// valid for mxlower, rejected by the IRDL definition, which declares the named forms' result
// and operand counts (dialect/mx.irdl.mlir, header).

// CHECK-LABEL: func.func @unscaled_quantize
// CHECK: "mx.quantize"
func.func @unscaled_quantize(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{op expects at least 2 results, but got 1}}
  %c = "mx.quantize"(%x) {number = "e5m6", roundmode = "zero"} : (tensor<4x64xf32>) -> tensor<4x64xui16>
  return
}

// -----

// CHECK-LABEL: func.func @unscaled_dequantize
// CHECK: "mx.dequantize"
func.func @unscaled_dequantize(%c: tensor<4x64xui16>) {
  // expected-error @+1 {{op expects at least 2 operands, but got 1}}
  %y = "mx.dequantize"(%c) {number = "e5m6"} : (tensor<4x64xui16>) -> tensor<4x64xf32>
  return
}
