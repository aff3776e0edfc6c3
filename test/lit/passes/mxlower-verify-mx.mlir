// RUN: mxlower-opt %s --split-input-file --mxlower-verify-mx --verify-diagnostics | FileCheck %s

// Well-formed mx ops pass unchanged.

// CHECK-LABEL: func.func @valid
// CHECK: "mx.quantize"(%arg0) {axis = 1 : i64, block_size = 32 : i64, format = "mxfp8_e4m3", scale_mode = "rceil"}
// CHECK: "mx.dequantize"(%{{.*}}#0, %{{.*}}#1) {axis = 1 : i64, block_size = 32 : i64, format = "mxfp8_e4m3"}
// CHECK: "mx.quantize"(%arg1, %arg2) {axis = 0 : i64, block_size = 16 : i64, format = "nvfp4"}
// CHECK: "mx.dequantize"(%{{.*}}#0, %{{.*}}#1, %arg2)
// CHECK: "mx.scaled_dot"
// CHECK: "mx.pack"
// CHECK: "mx.unpack"
func.func @valid(%x: tensor<4x64xf32>, %y: tensor<32x3xbf16>, %g: tensor<f32>, %w: tensor<64x8xf16>) -> (tensor<4x64xbf16>, tensor<32x3xf32>, tensor<4x8xf32>, tensor<4x64xf8E4M3FN>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "rceil"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16>
  %q4, %s4 = "mx.quantize"(%y, %g) {format = "nvfp4", block_size = 16 : i64, axis = 0 : i64} : (tensor<32x3xbf16>, tensor<f32>) -> (tensor<32x3xf4E2M1FN>, tensor<2x3xf8E4M3FN>)
  %d4 = "mx.dequantize"(%q4, %s4, %g) {format = "nvfp4", block_size = 16 : i64, axis = 0 : i64} : (tensor<32x3xf4E2M1FN>, tensor<2x3xf8E4M3FN>, tensor<f32>) -> tensor<32x3xf32>
  %r = "mx.scaled_dot"(%q, %s, %w) {lhs_format = "mxfp8_e4m3", lhs_block_size = 32 : i64, compute_type = f32, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<64x8xf16>) -> tensor<4x8xf32>
  %p = "mx.pack"(%q4) {axis = 0 : i64} : (tensor<32x3xf4E2M1FN>) -> tensor<16x3xui8>
  %u = "mx.unpack"(%p) {axis = 0 : i64} : (tensor<16x3xui8>) -> tensor<32x3xf4E2M1FN>
  return %d, %d4, %r, %q : tensor<4x64xbf16>, tensor<32x3xf32>, tensor<4x8xf32>, tensor<4x64xf8E4M3FN>
}

// -----

// Every malformed op is reported, not only the first.

func.func @non_divisible_and_unknown_format(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op blocked dimension 1 of the input has size 64, which block size 24 does not divide}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 24 : i64, axis = 1 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op unknown MX format 'mxfp7' (known: mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4_e2m1, mxint8, nvfp4)}}
  %q2, %s2 = "mx.quantize"(%x) {format = "mxfp7"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @unknown_scale_mode(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown scale mode 'round' (known: floor, rceil, nearest)}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", scale_mode = "round"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @element_type_mismatch(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #0 (elements) of mxfp8_e5m2 must have element type f8E5M2, got f8E4M3FN}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e5m2"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @scale_shape_mismatch(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #1 (scales) must have shape tensor<4x4xf8E8M0FNU> for elements tensor<4x64xf4E2M1FN> blocked by 16 along dimension 1, got tensor<4x2xf8E8M0FNU>}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp4_e2m1", block_size = 16 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @scale_blocked_along_the_wrong_axis(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #1 (scales) must have shape tensor<2x64xf8E8M0FNU> for elements tensor<64x64xi8> blocked by 32 along dimension 0, got tensor<64x2xf8E8M0FNU>}}
  %q, %s = "mx.quantize"(%x) {format = "mxint8", axis = 0 : i64} : (tensor<64x64xf32>) -> (tensor<64x64xi8>, tensor<64x2xf8E8M0FNU>)
  return
}

// -----

func.func @operand_counts(%x: tensor<4x64xf32>, %g: tensor<f32>, %q: tensor<4x64xf8E4M3FN>) {
  // expected-error @+1 {{'mx.quantize' op expects 1 operands, got 2}}
  %a, %b = "mx.quantize"(%x, %g) {format = "mxfp8_e4m3"} : (tensor<4x64xf32>, tensor<f32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.dequantize' op expects 2 operands, got 1}}
  %c = "mx.dequantize"(%q) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.quantize' op expects 2 results, got 1}}
  %e = "mx.quantize"(%x) {format = "mxfp8_e4m3"} : (tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN>
  return
}

// -----

func.func @bad_attributes(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown attribute 'blocksize' (known for mx.quantize: format, block_size, axis, scale_mode, number, scale, roundmode, scalemode, table)}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", blocksize = 32 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op missing attribute 'format'}}
  %q1, %s1 = "mx.quantize"(%x) {block_size = 32 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op 'axis' 2 is out of range for rank 2}}
  %q2, %s2 = "mx.quantize"(%x) {format = "mxfp8_e4m3", axis = 2 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op 'block_size' must be positive, got 0}}
  %q3, %s3 = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 0 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op attribute 'format' must be a string}}
  %q4, %s4 = "mx.quantize"(%x) {format = 3 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @nvfp4_rules(%x: tensor<4x64xf32>, %g: tensor<2xf32>, %q: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>, %h: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op 'scale_mode' does not apply to nvfp4}}
  %a, %b = "mx.quantize"(%x) {format = "nvfp4", scale_mode = "floor"} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  // expected-error @+1 {{'mx.quantize' op the global scale must be tensor<f32>, got tensor<2xf32>}}
  %c, %d = "mx.quantize"(%x, %g) {format = "nvfp4"} : (tensor<4x64xf32>, tensor<2xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  // expected-error @+1 {{'mx.dequantize' op expects 2 operands, got 3}}
  %e = "mx.dequantize"(%q, %s, %h) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<f32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @dequantize_types(%q: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>, %i: tensor<4x64xi8>) {
  // expected-error @+1 {{'mx.dequantize' op the result must have element type f32, bf16 or f16, got f64}}
  %a = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf64>
  // expected-error @+1 {{'mx.dequantize' op operand #0 (elements) of mxfp8_e4m3 must have element type f8E4M3FN, got i8}}
  %b = "mx.dequantize"(%i, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.dequantize' op the result must have the elements' shape tensor<4x64xf32>, got tensor<64x4xf32>}}
  %c = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<64x4xf32>
  return
}

// -----

func.func @quantize_input(%x: tensor<4x64xi32>, %y: tensor<64x?xf32>, %z: tensor<?x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op the input must have element type f32, bf16 or f16, got i32}}
  %a, %b = "mx.quantize"(%x) {format = "mxint8"} : (tensor<4x64xi32>) -> (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{'mx.quantize' op blocked dimension 1 of the input must have a static size (other dimensions may be dynamic), got shape 64x?}}
  %c, %d = "mx.quantize"(%y) {format = "mxint8"} : (tensor<64x?xf32>) -> (tensor<64x?xi8>, tensor<64x?xf8E8M0FNU>)
  // Dynamic dimensions elsewhere are fine, but the scales must keep them.
  // expected-error @+1 {{'mx.quantize' op result #1 (scales) must have shape tensor<?x2xf8E8M0FNU> for elements tensor<?x64xi8> blocked by 32 along dimension 1, got tensor<4x2xf8E8M0FNU>}}
  %e, %f = "mx.quantize"(%z) {format = "mxint8"} : (tensor<?x64xf32>) -> (tensor<?x64xi8>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @scaled_dot_errors(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %b: tensor<8x64xf8E4M3FN>, %bs: tensor<8x2xf8E8M0FNU>, %p: tensor<8x64xf32>) {
  // expected-error @+1 {{'mx.scaled_dot' op expects 4 or 5 operands (lhs, lhs_scales, rhs, rhs_scales [, global_scale]), got 3}}
  %0 = "mx.scaled_dot"(%a, %as, %b) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf8E4M3FN>) -> tensor<4x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the result must have shape tensor<4x8xf32> (batch, lhs free, rhs free dimensions), got tensor<8x4xf32>}}
  %1 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf8E4M3FN>, tensor<8x2xf8E8M0FNU>) -> tensor<8x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op missing attribute 'dot_dimension_numbers'}}
  %2 = "mx.scaled_dot"(%a, %as, %p) {lhs_format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op contracting dimension sizes differ: lhs dimension 1 is 64, rhs dimension 0 is 8}}
  %3 = "mx.scaled_dot"(%a, %as, %p) {lhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs scales must have shape tensor<4x4xf8E8M0FNU> for elements tensor<4x64xf8E4M3FN> blocked by 16 along dimension 1, got tensor<4x2xf8E8M0FNU>}}
  %4 = "mx.scaled_dot"(%a, %as, %p) {lhs_format = "mxfp8_e4m3", lhs_block_size = 16 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op neither operand is scaled: give 'lhs_format' and/or 'rhs_format' (or 'lhs_number' / 'rhs_number': a datatype)}}
  %5 = "mx.scaled_dot"(%p, %p) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op 'compute_type' must have element type f32, bf16 or f16, got i32}}
  %6 = "mx.scaled_dot"(%a, %as, %p) {lhs_format = "mxfp8_e4m3", compute_type = i32, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pack_errors(%x: tensor<4x5xf4E2M1FN>, %y: tensor<4x8xf32>, %z: tensor<4x8xf6E2M3FN>, %w: tensor<4x3xi8>) {
  // expected-error @+1 {{'mx.pack' op 5 values of f4E2M1FN (4 bits) along dimension 1 do not fill whole bytes (20 bits)}}
  %0 = "mx.pack"(%x) {axis = 1 : i64} : (tensor<4x5xf4E2M1FN>) -> tensor<4x3xui8>
  // expected-error @+1 {{'mx.pack' op cannot pack element type f32}}
  %1 = "mx.pack"(%y) : (tensor<4x8xf32>) -> tensor<4x32xui8>
  // expected-error @+1 {{'mx.pack' op the result must have shape tensor<4x6xui8> for tensor<4x8xf6E2M3FN>, got tensor<4x8xui8>}}
  %2 = "mx.pack"(%z) : (tensor<4x8xf6E2M3FN>) -> tensor<4x8xui8>
  // expected-error @+1 {{'mx.unpack' op packed data must have element type ui8, got i8}}
  %3 = "mx.unpack"(%w) : (tensor<4x3xi8>) -> tensor<4x6xf4E2M1FN>
  return
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) {
  // expected-error @+1 {{'mx.frobnicate' op unknown mx op 'mx.frobnicate' (known: mx.quantize, mx.dequantize, mx.scaled_dot, mx.pack, mx.unpack, mx.cast, mx.sparse)}}
  %0 = "mx.frobnicate"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @scaled_dot_dynamic_batch_mismatch(%a: tensor<?x8x64xf8E4M3FN>, %as: tensor<?x8x2xf8E8M0FNU>, %b: tensor<3x16x64xf8E4M3FN>, %bs: tensor<3x16x2xf8E8M0FNU>) -> tensor<?x8x16xf32> {
  // expected-error @+1 {{'mx.scaled_dot' op batch dimension sizes differ: lhs dimension 0 is ?, rhs dimension 0 is 3 (a dynamic size only matches a dynamic one)}}
  %r = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : (tensor<?x8x64xf8E4M3FN>, tensor<?x8x2xf8E8M0FNU>, tensor<3x16x64xf8E4M3FN>, tensor<3x16x2xf8E8M0FNU>) -> tensor<?x8x16xf32>
  return %r : tensor<?x8x16xf32>
}

// -----

// A scaled_dot side as a datatype (`lhs_number` [+ `lhs_scale`], as mx.dequantize spells one):
// only an MX format's datatype, tiled along a contracting dimension, names a scaled side;
// anything else is an error at the op saying which side and why.
func.func @scaled_dot_datatype_errors(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %x: tensor<4x64xf32>, %w: tensor<64x8xf8E4M3FN>, %ws: tensor<2x8xf8E8M0FNU>, %n: tensor<8x64xf4E2M1FN>, %ns: tensor<8x4xf8E4M3FN>, %g: tensor<f32>) {
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype uint4:e8m23_uint8_t16 is not an MX format's: its scales have a zero point (uint8); an MX format's have none}}
  %0 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "uint4", lhs_scale = "float32_uint8_t16", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e4m3fn:e8m0_t32x32 is not an MX format's: it has 2D tiles ('_t32x32'); an MX format's scales are per 1D block (a tile such as '_t32')}}
  %1 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "e4m3fn", lhs_scale = "e8m0_t32x32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e4m3fn:e8m0_t0 is not an MX format's: it has a scale per channel ('_t0'); an MX format's scales are per 1D block (a tile such as '_t32')}}
  %2 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "e4m3fn", lhs_scale = "e8m0_t0", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the rhs datatype e4m3fn:e8m0_t32 blocks dimension 1, which is not a contracting dimension of the rhs operand (0): a scaled side's blocks run along its contracting dimension (name it in the scale spec: 'e8m0_t32d0')}}
  %3 = "mx.scaled_dot"(%x, %w, %ws) {rhs_number = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<4x64xf32>, tensor<64x8xf8E4M3FN>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op 'lhs_roundmode' does not apply to a scaled_dot side: its operands are quantized already (rounding and scale modes are mx.quantize's)}}
  %4 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "mxfp8_e4m3", lhs_roundmode = "even", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e5m6:e8m0_t32 is not an MX format's: no MX format has e5m6 elements with e8m0 scales (mxfp8_e4m3 = e4m3fn + e8m0, mxfp8_e5m2 = e5m2 + e8m0, mxfp6_e3m2 = e3m2fo + e8m0, mxfp6_e2m3 = e2m3fo + e8m0, mxfp4_e2m1 = e2m1fo + e8m0, mxint8 = int8 + e8m0, nvfp4 = e2m1fo + e4m3fn)}}
  %5 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "e5m6", lhs_scale = "e8m0_t32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op bad lhs datatype: 'e9m3': exponent bits must be 1..8, got 9}}
  %6 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "e9m3", lhs_scale = "e8m0_t32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e4m3fn:e8m0_t32_ge8m23 is not an MX format's: it has a tensor scale ('_gf32') over mxfp8_e4m3's blocks; of the MX formats only nvfp4 has two-level scaling ('e2m1fo:e4m3fn_t16_gf32')}}
  %7 = "mx.scaled_dot"(%a, %as, %x, %g) {lhs_number = "e4m3fn:e8m0_t32_gf32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>, tensor<f32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op expects 4 operands (lhs, rhs, rhs_scales, global_scale), got 3: the rhs datatype e2m1fo:e4m3fn_t16_ge8m23 has a tensor scale ('_gf32'), the trailing global scale operand}}
  %8 = "mx.scaled_dot"(%x, %n, %ns) {rhs_number = "e2m1fo", rhs_scale = "e4m3fn_t16_gf32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf32>, tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>) -> tensor<4x8xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs side mixes a named format (lhs_format) with a datatype (lhs_number): give 'lhs_format' (sections 3-5) or 'lhs_number' (section 10), not both}}
  %9 = "mx.scaled_dot"(%a, %as, %x) {lhs_format = "mxfp8_e4m3", lhs_number = "e4m3fn", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs side mixes a named format (lhs_axis) with a datatype (lhs_number): give 'lhs_format' (sections 3-5) or 'lhs_number' (section 10), not both}}
  %10 = "mx.scaled_dot"(%a, %as, %x) {lhs_axis = 1 : i64, lhs_number = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op missing attribute 'lhs_number' (a number spec such as 'e4m3fn' or a datatype name such as 'mxfp8_e4m3'): 'lhs_scale' alone names no datatype}}
  %11 = "mx.scaled_dot"(%a, %as, %x) {lhs_scale = "e8m0_t32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs datatype e4m3fn is not an MX format's: it is unscaled (an MX format's datatype has block scales, e.g. 'e4m3fn:e8m0_t32'); a plain f32, bf16 or f16 lhs side takes no 'lhs_number'}}
  %12 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "f8E4M3FN", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  // expected-error @+1 {{'mx.scaled_dot' op the lhs operand of mxfp8_e5m2 must have element type f8E5M2, got f8E4M3FN}}
  %13 = "mx.scaled_dot"(%a, %as, %x) {lhs_number = "mxfp8_e5m2", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xf32>) -> tensor<4x4xf32>
  return
}

// -----

// The datatype forms (docs/semantics.md section 10): valid ones pass unchanged.

// CHECK-LABEL: func.func @valid_datatype_forms
// CHECK: "mx.cast"(%arg0) {number = "e5m6", roundmode = "even", scale = "e8m0_t32", scalemode = "max"}
// CHECK: "mx.cast"(%arg0, %arg1) {number = "e2m1fo", roundmode = "stochastic", scale = "e8m0_t2x32"
// CHECK: "mx.sparse"(%arg0) {dim = 0 : i64, m = 1 : i64, n = 4 : i64}
// CHECK: "mx.quantize"(%arg0) {number = "mxint4"}
// CHECK: "mx.dequantize"
func.func @valid_datatype_forms(%x: tensor<4x64xf32>, %r: tensor<4x64xui32>) {
  %y = "mx.cast"(%x) {number = "e5m6", scale = "e8m0_t32", roundmode = "even", scalemode = "max"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %y2 = "mx.cast"(%x, %r) {number = "e2m1fo", scale = "e8m0_t2x32", roundmode = "stochastic", scalemode = "midmax"} : (tensor<4x64xf32>, tensor<4x64xui32>) -> tensor<4x64xf32>
  %z = "mx.sparse"(%x) {n = 4 : i64, m = 1 : i64, dim = 0 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %c, %s = "mx.quantize"(%x) {number = "mxint4"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>)
  %v = "mx.dequantize"(%c, %s) {number = "int4", scale = "e8m0_t32"} : (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf16>
  return
}

// -----

func.func @cast_bad_number(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: 'e9m3': exponent bits must be 1..8, got 9}}
  %y = "mx.cast"(%x) {number = "e9m3"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_bad_scale(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: scale 'e8m0_t48': a tile size must be a power of two from 2 to 1024, got 48}}
  %y = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t48"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// A two-level cast (a tensor scale over the tiles) takes g as its last operand.
func.func @cast_two_level_without_g(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op expects 2 operands (the input, the tensor scale g) and 1 result for e2m1fo:e4m3fn_t16_ge8m23 with roundmode 'even', got 1 operand and 1 result}}
  %y = "mx.cast"(%x) {number = "e2m1fo", scale = "e4m3fn_t16_gf32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_two_level_stochastic(%x: tensor<4x64xf32>, %r: tensor<4x64xui32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'mx.cast' op operand #2 (the tensor scale g of int8:e8m0_t16_s2o1_ge8m23) must be tensor<f32>, got tensor<1xf32>}}
  %y = "mx.cast"(%x, %r, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32", roundmode = "stochastic"} : (tensor<4x64xf32>, tensor<4x64xui32>, tensor<1xf32>) -> tensor<4x64xf32>
  return
}

// -----

// The datatype forms of quantize / dequantize of any two-level datatype take g as their last
// operand too (quantize: after the random bits; dequantize: after codes, scales, offsets).
// CHECK-LABEL: func.func @quantize_two_level_valid
// CHECK: "mx.quantize"
// CHECK: "mx.dequantize"
func.func @quantize_two_level_valid(%x: tensor<4x64xf32>, %r: tensor<4x64xui32>, %g: tensor<f32>) {
  %c, %s, %o = "mx.quantize"(%x, %r, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32", roundmode = "stochastic"} : (tensor<4x64xf32>, tensor<4x64xui32>, tensor<f32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)
  %y = "mx.dequantize"(%c, %s, %o, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>, tensor<f32>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @quantize_two_level_without_g(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op expects 2 operands (the input, the tensor scale g) for e4m3fn:e8m0_t32_ge8m23 with roundmode 'even', got 1}}
  %c, %s = "mx.quantize"(%x) {number = "e4m3fn", scale = "e8m0_t32_gf32"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_two_level_extra_g(%x: tensor<4x64xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op expects 2 operands (the input, the tensor scale g) for e4m3fn:e8m0_t32_ge8m23 with roundmode 'even', got 3}}
  %c, %s = "mx.quantize"(%x, %g, %g) {number = "e4m3fn", scale = "e8m0_t32_gf32"} : (tensor<4x64xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_two_level_g_type(%x: tensor<4x64xf32>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'mx.quantize' op operand #1 (the tensor scale g of nf4:e8m23_t64_ge8m23) must be tensor<f32>, got tensor<1xf32>}}
  %c, %s = "mx.quantize"(%x, %g) {number = "nf4", scale = "float32_t64_gf32"} : (tensor<4x64xf32>, tensor<1xf32>) -> (tensor<4x64xui8>, tensor<4x1xf32>)
  return
}

// -----

func.func @quantize_one_level_with_g(%x: tensor<4x64xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'mx.quantize' op e5m6:e8m0_t32 has no tensor level (a scale spec ending in '_gf32'); it takes no tensor scale g operand}}
  %c, %s = "mx.quantize"(%x, %g) {number = "e5m6", scale = "e8m0_t32"} : (tensor<4x64xf32>, tensor<f32>) -> (tensor<4x64xui16>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @dequantize_two_level_without_g(%c: tensor<4x64xi8>, %s: tensor<4x4xf8E8M0FNU>, %o: tensor<4x32xui8>) {
  // expected-error @+1 {{'mx.dequantize' op expects 4 operands (the codes, scales, subtile offsets, the tensor scale g) and 1 result for int8:e8m0_t16_s2o1_ge8m23, got 3 operands and 1 result}}
  %y = "mx.dequantize"(%c, %s, %o) {number = "int8", scale = "e8m0_t16_s2o1_gf32"} : (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>) -> tensor<4x64xf32>
  return
}

// -----

func.func @dequantize_two_level_g_type(%c: tensor<4x64xf8E4M3FN>, %s: tensor<4x2xf8E8M0FNU>, %g: tensor<f64>) {
  // expected-error @+1 {{'mx.dequantize' op operand #2 (the tensor scale g of e4m3fn:e8m0_t32_ge8m23) must be tensor<f32>, got tensor<f64>}}
  %y = "mx.dequantize"(%c, %s, %g) {number = "e4m3fn", scale = "e8m0_t32_gf32"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<f64>) -> tensor<4x64xf32>
  return
}

// -----

// Subtiles (shared micro-exponents): a third result / operand, the ui8 offsets.
// CHECK-LABEL: func.func @subtiles_valid
// CHECK: "mx.quantize"
// CHECK: "mx.dequantize"
// CHECK: "mx.cast"
func.func @subtiles_valid(%x: tensor<4x64xf32>) {
  %c, %s, %o = "mx.quantize"(%x) {number = "mx6", roundmode = "nearest", scalemode = "rceil"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)
  %y = "mx.dequantize"(%c, %s, %o) {number = "mx6"} : (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>) -> tensor<4x64xf32>
  %z = "mx.cast"(%x) {number = "e2m1fo", scale = "e8m0_t32_s4o2"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @quantize_subtiles_missing_offsets(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op expects 3 results for int8:e8m0_t16_s2o1 (result #0 (codes), result #1 (scales), result #2 (subtile offsets)), got 2}}
  %c, %s = "mx.quantize"(%x) {number = "mx9"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_subtiles_bad_offsets(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #2 (subtile offsets) of e4m3fn:e8m0_t4x16_s4x4o1 must be tensor<1x16xui8>, got tensor<1x16xi8>}}
  %c, %s, %o = "mx.quantize"(%x) {number = "e4m3fn", scale = "e8m0_t4x16_s4x4o1"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<1x4xf8E8M0FNU>, tensor<1x16xi8>)
  return
}

// -----

func.func @dequantize_subtiles_missing_offsets(%c: tensor<4x64xi8>, %s: tensor<4x4xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.dequantize' op expects 3 operands, got 2}}
  %y = "mx.dequantize"(%c, %s) {number = "mx9"} : (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>) -> tensor<4x64xf32>
  return
}

// -----

func.func @dequantize_subtiles_offsets_shape(%c: tensor<4x64xi8>, %s: tensor<4x4xf8E8M0FNU>, %o: tensor<4x16xui8>) {
  // expected-error @+1 {{'mx.dequantize' op operand #2 (subtile offsets) of int8:e8m0_t16_s2o1 must be tensor<4x32xui8>, got tensor<4x16xui8>}}
  %y = "mx.dequantize"(%c, %s, %o) {number = "mx9"} : (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x16xui8>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_subtiles_tile_does_not_divide(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op the input: scale 'e8m0_t16x16_s2x2o1': tile size 16 does not divide dimension 0 of size 4}}
  %y = "mx.cast"(%x) {number = "int8", scale = "e8m0_t16x16_s2x2o1"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Malformed subtile parts: each rule of the grammar is one located error.
func.func @cast_subtile_not_a_power_of_two(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: scale 'e8m0_t16_s3o1': a subtile size is a power of two that divides the tile (1 up to the tile), got 3 for a tile of 16}}
  %y = "mx.cast"(%x) {number = "int8", scale = "e8m0_t16_s3o1"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @quantize_subtile_offset_too_wide(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op bad datatype: scale 'e8m0_t16_s2o9': a subtile offset has 1 to 8 bits, got 9}}
  %c, %s, %o = "mx.quantize"(%x) {number = "int8", scale = "e8m0_t16_s2o9"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)
  return
}

// -----

func.func @dequantize_subtile_under_a_float_scale(%c: tensor<4x64xi8>, %s: tensor<4x4xf8E4M3FN>, %o: tensor<4x32xui8>) {
  // expected-error @+1 {{'mx.dequantize' op bad datatype: scale 'e4m3fn_t16_s2o1': subtile offsets are powers of two below an exponent scale (e8m0, ...), not the float scale e4m3fn}}
  %y = "mx.dequantize"(%c, %s, %o) {number = "int8", scale = "e4m3fn_t16_s2o1"} : (tensor<4x64xi8>, tensor<4x4xf8E4M3FN>, tensor<4x32xui8>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_subtile_is_the_whole_tile(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: scale 'e8m0_t16_s16o1': the subtile is the whole tile; a subtile is smaller}}
  %y = "mx.cast"(%x) {number = "int8", scale = "e8m0_t16_s16o1"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Every spec parameter is bounded before any arithmetic with it: a huge bias, width, tile
// size or dimension is one error naming the limit, at once (a 17-digit bias used to hang).
func.func @cast_huge_spec_parameters(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: 'e4m3b99999999999999999': the bias must be -1024..1024, got 999999999999... (17 digits)}}
  %a = "mx.cast"(%x) {number = "e4m3b99999999999999999"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: 'e4m3b-99999999999999999999999999999999': the bias must be -1024..1024}}
  %b = "mx.cast"(%x) {number = "e4m3b-99999999999999999999999999999999"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: 'e99999999999999999999m3': exponent bits must be 1..8}}
  %c = "mx.cast"(%x) {number = "e99999999999999999999m3"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: 'int99999999999999999999': intK needs 2 <= K <= 32}}
  %d = "mx.cast"(%x) {number = "int99999999999999999999"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: scale 'e8m0_t99999999999999999999999': a tile size must be a power of two from 2 to 1024}}
  %e = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t99999999999999999999999"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: scale 'e8m0_t32d-99999999999999999999': a tile dimension must be -1024..1023}}
  %f = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t32d-99999999999999999999"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  // expected-error @+1 {{'mx.cast' op bad datatype: a number spec has at most 100 characters, got 201}}
  %g = "mx.cast"(%x) {number = "e4m3b0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000007"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_uint_needs_zero_point(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: datatype uint4:e8m0_t32: uint data is asymmetric}}
  %y = "mx.cast"(%x) {number = "uint4", scale = "e8m0_t32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_tile_does_not_divide(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op the input: scale 'e8m0_t8d0': tile size 8 does not divide dimension 0 of size 4}}
  %y = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t8d0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_unknown_roundmode(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op unknown roundmode 'up' (known: even, nearest, zero, half_down, stochastic)}}
  %y = "mx.cast"(%x) {number = "e4m3", roundmode = "up"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_scalemode_on_float_scale(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op scalemode 'rceil' applies to exponent scales; the float scale e4m3fn takes 'max'}}
  %y = "mx.cast"(%x) {number = "e2m1fo", scale = "e4m3fn_t16", scalemode = "rceil"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_stochastic_without_bits(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op roundmode 'stochastic' needs a random bits operand tensor<4x64xui32> (one uint32 per element)}}
  %y = "mx.cast"(%x) {number = "e4m3", roundmode = "stochastic"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_bits_without_stochastic(%x: tensor<4x64xf32>, %r: tensor<4x64xui32>) {
  // expected-error @+1 {{'mx.cast' op roundmode 'even' takes no random bits operand (only 'stochastic' does)}}
  %y = "mx.cast"(%x, %r) {number = "e4m3"} : (tensor<4x64xf32>, tensor<4x64xui32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_bad_bits_type(%x: tensor<4x64xf32>, %r: tensor<4x64xi32>) {
  // expected-error @+1 {{'mx.cast' op the random bits operand must be tensor<4x64xui32>, got tensor<4x64xi32>}}
  %y = "mx.cast"(%x, %r) {number = "e4m3", roundmode = "stochastic"} : (tensor<4x64xf32>, tensor<4x64xi32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @cast_changes_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op the result (the input's type) must be tensor<4x64xf32>, got tensor<4x64xbf16>}}
  %y = "mx.cast"(%x) {number = "e4m3"} : (tensor<4x64xf32>) -> tensor<4x64xbf16>
  return
}

// -----

func.func @cast_dynamic_scaled(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'mx.cast' op the input must have a static shape (scaled datatypes and sparsity tile it), got tensor<?x64x...>}}
  %y = "mx.cast"(%x) {number = "e4m3", scale = "e8m0_t32"} : (tensor<?x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @quantize_mixed_forms(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op mixes a named format (format) with a datatype (number): give 'format' (sections 3-5) or 'number' (section 10), not both}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", number = "e4m3fn"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_wrong_code_type(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #0 (codes) of e5m6:e8m0_t32 must be tensor<4x64xui16>, got tensor<4x64xui8>}}
  %c, %s = "mx.quantize"(%x) {number = "e5m6", scale = "e8m0_t32"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_2d_tile_scales(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op result #1 (scales) of e4m3fn:e8m0_t32x32 must be tensor<2x2xf8E8M0FNU>, got tensor<64x2xf8E8M0FNU>}}
  %c, %s = "mx.quantize"(%x) {number = "e4m3fn", scale = "e8m0_t32x32"} : (tensor<64x64xf32>) -> (tensor<64x64xf8E4M3FN>, tensor<64x2xf8E8M0FNU>)
  return
}

// -----

func.func @quantize_missing_zero_points(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op expects 3 results for uint4:e8m23_uint8_t0 (result #0 (codes), result #1 (scales), result #2 (zero points)), got 2}}
  %c, %s = "mx.quantize"(%x) {number = "uint4", scale = "float32_uint8_t0"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x1xf32>)
  return
}

// -----

func.func @dequantize_roundmode(%c: tensor<4x64xui16>) {
  // expected-error @+1 {{'mx.dequantize' op unknown attribute 'roundmode' (known for mx.dequantize: format, block_size, axis, number, scale, table)}}
  %y = "mx.dequantize"(%c) {number = "e5m6", roundmode = "even"} : (tensor<4x64xui16>) -> tensor<4x64xf32>
  return
}

// -----

func.func @dequantize_missing_scales(%c: tensor<4x64xui16>) {
  // expected-error @+1 {{'mx.dequantize' op expects 2 operands, got 1}}
  %y = "mx.dequantize"(%c) {number = "e5m6", scale = "e8m0_t32"} : (tensor<4x64xui16>) -> tensor<4x64xf32>
  return
}

// -----

func.func @sparse_missing_n(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.sparse' op missing attribute 'n' (keep m of every n values)}}
  %y = "mx.sparse"(%x) {m = 2 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @sparse_n_does_not_divide(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.sparse' op n = 3 does not divide dimension 1 of size 64}}
  %y = "mx.sparse"(%x) {n = 3 : i64, m = 2 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @sparse_dim_out_of_range(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.sparse' op 'dim' 2 is out of range for rank 2}}
  %y = "mx.sparse"(%x) {n = 4 : i64, m = 2 : i64, dim = 2 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Lookup tables (section 10.7): a custom table is number = "lut" with its 2^K strictly increasing,
// finite f32 values; anything else is an error at the op.

func.func @lut_unsorted(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: a lookup table is strictly increasing: values #1 and #2}}
  %y = "mx.cast"(%x) {number = "lut", table = array<f32: 0.0, 2.0, 1.0, 3.0>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @lut_not_finite(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: lookup table value #3 is not finite}}
  %y = "mx.cast"(%x) {number = "lut", table = array<f32: 0.0, 1.0, 2.0, 0x7F800000>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @lut_count(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: a lookup table has 2^K values}}
  %y = "mx.cast"(%x) {number = "lut", table = array<f32: 0.0, 1.0, 2.0>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @lut_too_many(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: a lookup table has at most 256 values (codes of at most 8 bits), got 512}}
  %y = "mx.cast"(%x) {number = "lut", table = array<f32: 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0, 80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0, 128.0, 129.0, 130.0, 131.0, 132.0, 133.0, 134.0, 135.0, 136.0, 137.0, 138.0, 139.0, 140.0, 141.0, 142.0, 143.0, 144.0, 145.0, 146.0, 147.0, 148.0, 149.0, 150.0, 151.0, 152.0, 153.0, 154.0, 155.0, 156.0, 157.0, 158.0, 159.0, 160.0, 161.0, 162.0, 163.0, 164.0, 165.0, 166.0, 167.0, 168.0, 169.0, 170.0, 171.0, 172.0, 173.0, 174.0, 175.0, 176.0, 177.0, 178.0, 179.0, 180.0, 181.0, 182.0, 183.0, 184.0, 185.0, 186.0, 187.0, 188.0, 189.0, 190.0, 191.0, 192.0, 193.0, 194.0, 195.0, 196.0, 197.0, 198.0, 199.0, 200.0, 201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0, 221.0, 222.0, 223.0, 224.0, 225.0, 226.0, 227.0, 228.0, 229.0, 230.0, 231.0, 232.0, 233.0, 234.0, 235.0, 236.0, 237.0, 238.0, 239.0, 240.0, 241.0, 242.0, 243.0, 244.0, 245.0, 246.0, 247.0, 248.0, 249.0, 250.0, 251.0, 252.0, 253.0, 254.0, 255.0, 256.0, 257.0, 258.0, 259.0, 260.0, 261.0, 262.0, 263.0, 264.0, 265.0, 266.0, 267.0, 268.0, 269.0, 270.0, 271.0, 272.0, 273.0, 274.0, 275.0, 276.0, 277.0, 278.0, 279.0, 280.0, 281.0, 282.0, 283.0, 284.0, 285.0, 286.0, 287.0, 288.0, 289.0, 290.0, 291.0, 292.0, 293.0, 294.0, 295.0, 296.0, 297.0, 298.0, 299.0, 300.0, 301.0, 302.0, 303.0, 304.0, 305.0, 306.0, 307.0, 308.0, 309.0, 310.0, 311.0, 312.0, 313.0, 314.0, 315.0, 316.0, 317.0, 318.0, 319.0, 320.0, 321.0, 322.0, 323.0, 324.0, 325.0, 326.0, 327.0, 328.0, 329.0, 330.0, 331.0, 332.0, 333.0, 334.0, 335.0, 336.0, 337.0, 338.0, 339.0, 340.0, 341.0, 342.0, 343.0, 344.0, 345.0, 346.0, 347.0, 348.0, 349.0, 350.0, 351.0, 352.0, 353.0, 354.0, 355.0, 356.0, 357.0, 358.0, 359.0, 360.0, 361.0, 362.0, 363.0, 364.0, 365.0, 366.0, 367.0, 368.0, 369.0, 370.0, 371.0, 372.0, 373.0, 374.0, 375.0, 376.0, 377.0, 378.0, 379.0, 380.0, 381.0, 382.0, 383.0, 384.0, 385.0, 386.0, 387.0, 388.0, 389.0, 390.0, 391.0, 392.0, 393.0, 394.0, 395.0, 396.0, 397.0, 398.0, 399.0, 400.0, 401.0, 402.0, 403.0, 404.0, 405.0, 406.0, 407.0, 408.0, 409.0, 410.0, 411.0, 412.0, 413.0, 414.0, 415.0, 416.0, 417.0, 418.0, 419.0, 420.0, 421.0, 422.0, 423.0, 424.0, 425.0, 426.0, 427.0, 428.0, 429.0, 430.0, 431.0, 432.0, 433.0, 434.0, 435.0, 436.0, 437.0, 438.0, 439.0, 440.0, 441.0, 442.0, 443.0, 444.0, 445.0, 446.0, 447.0, 448.0, 449.0, 450.0, 451.0, 452.0, 453.0, 454.0, 455.0, 456.0, 457.0, 458.0, 459.0, 460.0, 461.0, 462.0, 463.0, 464.0, 465.0, 466.0, 467.0, 468.0, 469.0, 470.0, 471.0, 472.0, 473.0, 474.0, 475.0, 476.0, 477.0, 478.0, 479.0, 480.0, 481.0, 482.0, 483.0, 484.0, 485.0, 486.0, 487.0, 488.0, 489.0, 490.0, 491.0, 492.0, 493.0, 494.0, 495.0, 496.0, 497.0, 498.0, 499.0, 500.0, 501.0, 502.0, 503.0, 504.0, 505.0, 506.0, 507.0, 508.0, 509.0, 510.0, 511.0>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @lut_without_table(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op number 'lut' needs a 'table' attribute}}
  %y = "mx.cast"(%x) {number = "lut"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @table_without_lut(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op attribute 'table' goes with number = "lut" (a custom lookup table), got number 'e2m1fo'}}
  %y = "mx.cast"(%x) {number = "e2m1fo", table = array<f32: 0.0, 1.0>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @table_not_f32(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op attribute 'table' must be an array<f32: ...>}}
  %y = "mx.cast"(%x) {number = "lut", table = array<i32: 0, 1>} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// nf4 and custom tables, scaled and not, in every datatype op.

// CHECK-LABEL: func.func @valid_luts
// CHECK: "mx.cast"(%arg0) {number = "lut", scale = "e8m0_t32", table = array<f32: -1.500000e+00, -5.000000e-01, 5.000000e-01, 1.500000e+00>}
// CHECK: "mx.quantize"(%arg0) {number = "nf4:float32_t64"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x1xf32>)
func.func @valid_luts(%x: tensor<4x64xf32>) {
  %y = "mx.cast"(%x) {number = "lut", table = array<f32: -1.5, -0.5, 0.5, 1.5>, scale = "e8m0_t32"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %c, %s = "mx.quantize"(%x) {number = "nf4:float32_t64"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x1xf32>)
  %v = "mx.dequantize"(%c, %s) {number = "nf4", scale = "float32_t64"} : (tensor<4x64xui8>, tensor<4x1xf32>) -> tensor<4x64xbf16>
  return
}
