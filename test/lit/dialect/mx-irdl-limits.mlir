// REQUIRES: llvm-tools
// RUN: mlir-opt --irdl-file=%S/../../../dialect/mx.irdl.mlir --allow-unregistered-dialect --split-input-file %s | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --mxlower-verify-mx --verify-diagnostics

// What IRDL in MLIR 22 cannot check (dialect/mx.irdl.mlir, header): the IRDL definition
// accepts each of these ops (first RUN line) and mxlower's verifier rejects it (second).

// Element types inside tensors: IRDL cannot constrain them for builtin tensors.
// CHECK-LABEL: func.func @element_type
// CHECK: "mx.quantize"
func.func @element_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #0 (elements) of mxfp8_e5m2 must have element type f8E5M2, got f8E4M3FN}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e5m2"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// Optional attributes: IRDL has only required ones, so the value of an optional attribute
// (scale_mode, block_size, axis, compute_type, lhs_format, ...) is not checked.
// CHECK-LABEL: func.func @optional_attribute_value
// CHECK: "mx.quantize"
func.func @optional_attribute_value(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown scale mode 'round' (known: floor, rceil, nearest)}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", scale_mode = "round"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// Attributes IRDL does not list are not checked, so a misspelt one passes.
// CHECK-LABEL: func.func @unknown_attribute
// CHECK: "mx.quantize"
func.func @unknown_attribute(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown attribute 'blocksize' (known for mx.quantize: format, block_size, axis, scale_mode)}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", blocksize = 32 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// Shapes: block divisibility and the scales' shape are relations between operands and
// attributes, beyond IRDL's constraints.
// CHECK-LABEL: func.func @scale_shape
// CHECK: "mx.dequantize"
func.func @scale_shape(%q: tensor<4x64xf8E4M3FN>, %s: tensor<4x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.dequantize' op operand #1 (scales) must have shape tensor<4x2xf8E8M0FNU> for elements tensor<4x64xf8E4M3FN> blocked by 32 along dimension 1, got tensor<4x4xf8E8M0FNU>}}
  %d = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x4xf8E8M0FNU>) -> tensor<4x64xf32>
  return
}

// -----

// Which operands scaled_dot takes depends on its format attributes.
// CHECK-LABEL: func.func @scaled_dot_operands
// CHECK: "mx.scaled_dot"
func.func @scaled_dot_operands(%a: tensor<4x64xbf16>, %b: tensor<8x64xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'mx.scaled_dot' op neither operand is scaled: give 'lhs_format' and/or 'rhs_format'}}
  %r = "mx.scaled_dot"(%a, %b, %g) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xbf16>, tensor<8x64xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}
