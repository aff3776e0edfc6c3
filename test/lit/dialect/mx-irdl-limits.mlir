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
  // expected-error @+1 {{'mx.quantize' op unknown attribute 'blocksize' (known for mx.quantize: format, block_size, axis, scale_mode, number, scale, roundmode, scalemode, table)}}
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
  // expected-error @+1 {{'mx.scaled_dot' op neither operand is scaled: give 'lhs_format' and/or 'rhs_format' (or 'lhs_number' / 'rhs_number': a datatype)}}
  %r = "mx.scaled_dot"(%a, %b, %g) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xbf16>, tensor<8x64xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// A scaled_dot side's datatype (`lhs_number` / `lhs_scale`) is an open string to IRDL; only
// an MX format's datatype names a scaled side.
// CHECK-LABEL: func.func @scaled_dot_side_datatype
// CHECK: "mx.scaled_dot"
func.func @scaled_dot_side_datatype(%a: tensor<4x64xui16>, %as: tensor<4x2xf8E8M0FNU>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e5m6:e8m0_t32 is not an MX format's: no MX format has e5m6 elements with e8m0 scales (mxfp8_e4m3 = e4m3fn + e8m0, mxfp8_e5m2 = e5m2 + e8m0, mxfp6_e3m2 = e3m2fo + e8m0, mxfp6_e2m3 = e2m3fo + e8m0, mxfp4_e2m1 = e2m1fo + e8m0, mxint8 = int8 + e8m0, nvfp4 = e2m1fo + e4m3fn)}}
  %r = "mx.scaled_dot"(%a, %as, %b) {lhs_number = "e5m6", lhs_scale = "e8m0_t32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xui16>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Which of `format` (named form) and `number` (datatype form) a quantize / dequantize has is
// tagged mx.alternative_attribute: IRDL cannot require exactly one of two attributes, so it
// checks neither the presence nor the value of `format`, and a global scale is any tensor
// (quantize's second operand may also be the ui32 random bits of the datatype form).

// CHECK-LABEL: func.func @unknown_format
// CHECK: "mx.
func.func @unknown_format(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown MX format 'mxfp7'}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp7"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// CHECK-LABEL: func.func @format_not_a_string
// CHECK: "mx.
func.func @format_not_a_string(%q: tensor<4x64xi8>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.dequantize' op attribute 'format' must be a string}}
  %d = "mx.dequantize"(%q, %s) {format = 7 : i64} : (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @missing_format
// CHECK: "mx.
func.func @missing_format(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op missing attribute 'format'}}
  %q, %s = "mx.quantize"(%x) {block_size = 32 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// CHECK-LABEL: func.func @global_scale_not_a_scalar
// CHECK: "mx.
func.func @global_scale_not_a_scalar(%x: tensor<4x64xf32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'mx.quantize' op the global scale must be tensor<f32>, got tensor<1xf32>}}
  %q, %s = "mx.quantize"(%x, %g) {format = "nvfp4"} : (tensor<4x64xf32>, tensor<1xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  return
}

// -----

// The unscaled datatype forms have one result (quantize) or one operand (dequantize); IRDL
// declares the named forms' two, so it rejects them (mx-irdl-unscaled.mlir) while mxlower
// accepts them.  Datatype ops IRDL accepts and mxlower rejects:

// CHECK-LABEL: func.func @cast_bad_number
// CHECK: "mx.cast"
func.func @cast_bad_number(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: 'e9m3': exponent bits must be 1..8, got 9}}
  %y = "mx.cast"(%x) {number = "e9m3", scale = "e8m0_t32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @cast_tile_does_not_divide
// CHECK: "mx.cast"
func.func @cast_tile_does_not_divide(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op the input: scale 'e8m0_t32x32': tile size 32 does not divide dimension 0 of size 4}}
  %y = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t32x32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @sparse_m_above_n
// CHECK: "mx.sparse"
func.func @sparse_m_above_n(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.sparse' op need 0 < m <= n, got n = 4, m = 5}}
  %y = "mx.sparse"(%x) {n = 4 : i64, m = 5 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}
