// REQUIRES: llvm-tools
// RUN: mlir-opt --irdl-file=%S/../../../dialect/mx.irdl.mlir --allow-unregistered-dialect --split-input-file %s | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --mxlower-verify-mx | FileCheck %s

// Upstream mlir-opt, given dialect/mx.irdl.mlir, parses and verifies valid mx ops; mxlower's
// verifier accepts the same ops (test/python/test_dialect_irdl.py checks every chunk of this
// file against mxlower's verifier as well).

// CHECK-LABEL: func.func @quantize_every_format
// CHECK-COUNT-7: "mx.quantize"
func.func @quantize_every_format(%x: tensor<4x64xf32>, %y: tensor<4x64xbf16>, %z: tensor<4x64xf16>) {
  %q0, %s0 = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  %q1, %s1 = "mx.quantize"(%y) {format = "mxfp8_e5m2", block_size = 32 : i64, axis = 1 : i64, scale_mode = "rceil"} : (tensor<4x64xbf16>) -> (tensor<4x64xf8E5M2>, tensor<4x2xf8E8M0FNU>)
  %q2, %s2 = "mx.quantize"(%z) {format = "mxfp6_e3m2", block_size = 32 : i64, axis = 1 : i64, scale_mode = "nearest"} : (tensor<4x64xf16>) -> (tensor<4x64xf6E3M2FN>, tensor<4x2xf8E8M0FNU>)
  %q3, %s3 = "mx.quantize"(%x) {format = "mxfp6_e2m3", block_size = 16 : i64, axis = -1 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf6E2M3FN>, tensor<4x4xf8E8M0FNU>)
  %q4, %s4 = "mx.quantize"(%x) {format = "mxfp4_e2m1", block_size = 4 : i64, axis = 0 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<1x64xf8E8M0FNU>)
  %q5, %s5 = "mx.quantize"(%x) {format = "mxint8"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>)
  %q6, %s6 = "mx.quantize"(%x) {format = "nvfp4"} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  return
}

// -----

// The optional global scale of nvfp4, dynamic non-blocked dimensions, and discardable
// attributes of other dialects.

// CHECK-LABEL: func.func @nvfp4_global_scale_and_dynamic
// CHECK: "mx.quantize"(%{{.*}}, %{{.*}}) {{{.*}}format = "nvfp4"{{.*}}} : (tensor<?x64xbf16>, tensor<f32>)
// CHECK: "mx.dequantize"(%{{.*}}, %{{.*}}, %{{.*}}) {{{.*}}mhlo.frontend_attributes
func.func @nvfp4_global_scale_and_dynamic(%x: tensor<?x64xbf16>, %g: tensor<f32>) -> tensor<?x64xf16> {
  %q, %s = "mx.quantize"(%x, %g) {format = "nvfp4", block_size = 16 : i64, axis = 1 : i64} : (tensor<?x64xbf16>, tensor<f32>) -> (tensor<?x64xf4E2M1FN>, tensor<?x4xf8E4M3FN>)
  %d = "mx.dequantize"(%q, %s, %g) {format = "nvfp4", block_size = 16 : i64, axis = 1 : i64, mhlo.frontend_attributes = {tag = "x"}} : (tensor<?x64xf4E2M1FN>, tensor<?x4xf8E4M3FN>, tensor<f32>) -> tensor<?x64xf16>
  return %d : tensor<?x64xf16>
}

// -----

// CHECK-LABEL: func.func @dequantize
// CHECK-COUNT-2: "mx.dequantize"
func.func @dequantize(%i: tensor<64x3xi8>, %s: tensor<2x3xf8E8M0FNU>, %e: tensor<4x64xf8E5M2>, %es: tensor<4x2xf8E8M0FNU>) -> (tensor<64x3xbf16>, tensor<4x64xf32>) {
  %a = "mx.dequantize"(%i, %s) {format = "mxint8", block_size = 32 : i64, axis = 0 : i64} : (tensor<64x3xi8>, tensor<2x3xf8E8M0FNU>) -> tensor<64x3xbf16>
  %b = "mx.dequantize"(%e, %es) {format = "mxfp8_e5m2"} : (tensor<4x64xf8E5M2>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xf32>
  return %a, %b : tensor<64x3xbf16>, tensor<4x64xf32>
}

// -----

// Every scaled_dot form with three or four operands: one plain side (either one), both sides
// scaled, one scaled side plus a global scale.  (The five-operand form is outside IRDL: see
// mx-irdl-five-operands.mlir.)

// CHECK-LABEL: func.func @scaled_dot_forms
// CHECK-COUNT-5: "mx.scaled_dot"
func.func @scaled_dot_forms(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %b: tensor<8x64xf4E2M1FN>, %bs: tensor<8x2xf8E8M0FNU>, %pa: tensor<4x64xbf16>, %pb: tensor<8x64xf16>, %g: tensor<f32>) {
  %0 = "mx.scaled_dot"(%a, %as, %pb) {lhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf16>) -> tensor<4x8xf32>
  %1 = "mx.scaled_dot"(%pa, %b, %bs) {rhs_format = "mxfp4_e2m1", rhs_block_size = 32 : i64, rhs_axis = 1 : i64, compute_type = bf16, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xbf16>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<4x8xbf16>
  %2 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp8_e4m3", lhs_block_size = 32 : i64, rhs_format = "mxfp4_e2m1", rhs_block_size = 32 : i64, compute_type = f32, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<4x8xf16>
  %3 = "mx.scaled_dot"(%a, %as, %pb, %g) {lhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf16>, tensor<f32>) -> tensor<4x8xf32>
  %4 = "mx.scaled_dot"(%pa, %b, %bs, %g) {rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xbf16>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// Sides named by their MX format's datatype (as mx.dequantize names one, prefixed by the
// side): number and scale specs, a predefined name, a number:scale code; nvfp4 with its
// tensor scale and the global scale operand.
// CHECK-LABEL: func.func @scaled_dot_datatype_sides
// CHECK: "mx.scaled_dot"(%{{.*}}) {{{.*}}lhs_number = "e4m3fn", lhs_scale = "e8m0_t32", rhs_number = "e2m1fo:e8m0_t32d0"}
// CHECK: "mx.scaled_dot"(%{{.*}}) {{{.*}}rhs_number = "bfp16"}
// CHECK: "mx.scaled_dot"(%{{.*}}) {{{.*}}rhs_number = "e2m1fo", rhs_scale = "e4m3fn_t16_gf32"}
func.func @scaled_dot_datatype_sides(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %w: tensor<64x8xf4E2M1FN>, %ws: tensor<2x8xf8E8M0FNU>, %pa: tensor<4x64xbf16>, %i: tensor<8x64xi8>, %is: tensor<8x8xf8E8M0FNU>, %n: tensor<8x64xf4E2M1FN>, %ns: tensor<8x4xf8E4M3FN>, %g: tensor<f32>) {
  %0 = "mx.scaled_dot"(%a, %as, %w, %ws) {lhs_number = "e4m3fn", lhs_scale = "e8m0_t32", rhs_number = "e2m1fo:e8m0_t32d0", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<64x8xf4E2M1FN>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  %1 = "mx.scaled_dot"(%a, %as, %i, %is) {lhs_format = "mxfp8_e4m3", rhs_number = "bfp16", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xi8>, tensor<8x8xf8E8M0FNU>) -> tensor<4x8xf32>
  %2 = "mx.scaled_dot"(%pa, %n, %ns, %g) {rhs_number = "e2m1fo", rhs_scale = "e4m3fn_t16_gf32", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xbf16>, tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @scaled_dot_batched
// CHECK: "mx.scaled_dot"
func.func @scaled_dot_batched(%a: tensor<2x16x64xf4E2M1FN>, %as: tensor<2x16x4xf8E4M3FN>, %b: tensor<2x8x64xf4E2M1FN>, %bs: tensor<2x8x4xf8E4M3FN>) -> tensor<2x16x8xbf16> {
  %r = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "nvfp4", lhs_block_size = 16 : i64, rhs_format = "nvfp4", rhs_block_size = 16 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : (tensor<2x16x64xf4E2M1FN>, tensor<2x16x4xf8E4M3FN>, tensor<2x8x64xf4E2M1FN>, tensor<2x8x4xf8E4M3FN>) -> tensor<2x16x8xbf16>
  return %r : tensor<2x16x8xbf16>
}

// -----

// CHECK-LABEL: func.func @pack_unpack
// CHECK-COUNT-3: "mx.pack"
// CHECK-COUNT-3: "mx.unpack"
func.func @pack_unpack(%f4: tensor<4x64xf4E2M1FN>, %f6: tensor<8x4xf6E3M2FN>, %i: tensor<3x5xi8>) {
  %p0 = "mx.pack"(%f4) {axis = 1 : i64} : (tensor<4x64xf4E2M1FN>) -> tensor<4x32xui8>
  %p1 = "mx.pack"(%f6) {axis = 1 : i64} : (tensor<8x4xf6E3M2FN>) -> tensor<8x3xui8>
  %p2 = "mx.pack"(%i) : (tensor<3x5xi8>) -> tensor<3x5xui8>
  %u0 = "mx.unpack"(%p0) {axis = 1 : i64} : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
  %u1 = "mx.unpack"(%p1) {axis = -1 : i64} : (tensor<8x3xui8>) -> tensor<8x4xf6E3M2FN>
  %u2 = "mx.unpack"(%p2) : (tensor<3x5xui8>) -> tensor<3x5xi8>
  return
}

// -----

// The datatype forms (docs/semantics.md section 10).
// CHECK-LABEL: func.func @datatype_casts
// CHECK-COUNT-3: "mx.cast"
// CHECK: "mx.sparse"
// CHECK-COUNT-2: "mx.quantize"
// CHECK-COUNT-2: "mx.dequantize"
func.func @datatype_casts(%x: tensor<64x64xf32>, %h: tensor<4x64xbf16>, %r: tensor<4x64xui32>) {
  %y = "mx.cast"(%x) {number = "e5m6", scale = "e8m0_t32x32", roundmode = "even", scalemode = "midmax"} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %y2 = "mx.cast"(%h, %r) {number = "int4", scale = "bfloat16_t0", roundmode = "stochastic"} : (tensor<4x64xbf16>, tensor<4x64xui32>) -> tensor<4x64xbf16>
  %y3 = "mx.cast"(%x) {number = "e2m1fo", scale = "e8m0_t32", roundmode = "half_down"} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %z = "mx.sparse"(%x) {n = 4 : i64, m = 2 : i64, dim = 1 : i64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %c, %s = "mx.quantize"(%x) {number = "e5m6", scale = "e8m0_t32", roundmode = "nearest", scalemode = "rceil"} : (tensor<64x64xf32>) -> (tensor<64x64xui16>, tensor<64x2xf8E8M0FNU>)
  %c2, %s2, %z2 = "mx.quantize"(%x) {number = "uint4", scale = "float32_uint8_t16"} : (tensor<64x64xf32>) -> (tensor<64x64xui8>, tensor<64x4xf32>, tensor<64x4xui8>)
  %v = "mx.dequantize"(%c, %s) {number = "e5m6", scale = "e8m0_t32"} : (tensor<64x64xui16>, tensor<64x2xf8E8M0FNU>) -> tensor<64x64xf32>
  %v2 = "mx.dequantize"(%c2, %s2, %z2) {number = "uint4", scale = "float32_uint8_t16"} : (tensor<64x64xui8>, tensor<64x4xf32>, tensor<64x4xui8>) -> tensor<64x64xbf16>
  return
}
