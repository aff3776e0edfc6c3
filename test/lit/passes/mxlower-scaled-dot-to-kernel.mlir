// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-scaled-dot-to-kernel='path=portable' | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx2 gemm=true})' | FileCheck %s --check-prefix=GEMM
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx2})' | FileCheck %s --check-prefix=AVX2
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx512 vendor=AuthenticAMD})' | FileCheck %s --check-prefix=AVX512
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx512 vendor=GenuineIntel})' | FileCheck %s --check-prefix=INTEL
// RUN: mxlower-opt %inputs/scaled_dot_spelling_format.mlir -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx2},mxlower-decompose-mx)' -o %t.format.mlir
// RUN: mxlower-opt %inputs/scaled_dot_spelling_datatype.mlir -p 'builtin.module(mxlower-scaled-dot-to-kernel{path=avx2},mxlower-decompose-mx)' -o %t.datatype.mlir
// RUN: diff %t.format.mlir %t.datatype.mlir
// RUN: FileCheck %s --check-prefix=SPELLING --input-file=%t.datatype.mlir

// A side named by its MX format's datatype (test/lit/Inputs/scaled_dot_spelling_*.mlir: the
// same dots with every side spelt both ways) is the side its format names: one parsed op,
// one kernel, and identical IR after the pass (the diff above).  The f6 GEMM stays with
// mxlower-decompose-mx.
// SPELLING-LABEL: func.func @gemv_specs
// SPELLING: stablehlo.custom_call @mxlower_dot_f32_mxfp8_e4m3k32_avx2(
// SPELLING-LABEL: func.func @gemv_name
// SPELLING: stablehlo.custom_call @mxlower_dot_bf16_mxfp4_e2m1k32_avx2(
// SPELLING-LABEL: func.func @gemv_bfp16
// SPELLING: stablehlo.custom_call @mxlower_dot_f32_mxint8k8_avx2(
// SPELLING-SAME: (tensor<1x1x64xf32>, tensor<1x8x64xi8>, tensor<1x8x8xf8E8M0FNU>) -> tensor<1x1x8xf32>
// SPELLING-LABEL: func.func @swapped_code
// SPELLING: stablehlo.custom_call @mxlower_dot_bf16_mxfp8_e4m3k32_kn_avx2(
// SPELLING-LABEL: func.func @nvfp4_global
// SPELLING: stablehlo.custom_call @mxlower_dot_bf16_nvfp4k16_avx2(
// SPELLING-LABEL: func.func @gemm_both
// SPELLING-NOT: custom_call
// SPELLING: stablehlo.dot_general
// SPELLING-LABEL: func.func @gemm_f4
// SPELLING: stablehlo.custom_call @mxlower_dot_mxfp4_e2m1k32_mxfp4_e2m1k32_avx2(

// The GEMV of inference (plain f32 activations x MXFP4 weights [N, K]): the codes and scale
// codes go to the kernel as stored, reshaped to [B, rows, K]; the kernel makes the run-time
// range test and the exact f64 contraction itself, so nothing else surrounds the call: no
// stablehlo.if, no reduction, no other dot.
// CHECK-LABEL: func.func @gemv(
// CHECK-SAME: %[[X:.*]]: tensor<1x4096xf32>, %[[W:.*]]: tensor<256x4096xf4E2M1FN>, %[[S:.*]]: tensor<256x128xf8E8M0FNU>)
// CHECK-NOT: mx.scaled_dot
// CHECK-NOT: stablehlo.if
// CHECK-NOT: stablehlo.reduce
// CHECK: %[[X3:.*]] = stablehlo.reshape %[[X]] : (tensor<1x4096xf32>) -> tensor<1x1x4096xf32>
// CHECK: %[[W3:.*]] = stablehlo.reshape %[[W]] : (tensor<256x4096xf4E2M1FN>) -> tensor<1x256x4096xf4E2M1FN>
// CHECK: %[[S3:.*]] = stablehlo.reshape %[[S]] : (tensor<256x128xf8E8M0FNU>) -> tensor<1x256x128xf8E8M0FNU>
// CHECK: %[[C:.*]] = stablehlo.custom_call @mxlower_dot_f32_mxfp4_e2m1k32_portable(%[[X3]], %[[W3]], %[[S3]]) {api_version = 4 : i32, backend_config = {}
// CHECK-SAME: -> tensor<1x1x256xf32>
// CHECK: %[[Y:.*]] = stablehlo.reshape %[[C]] : (tensor<1x1x256xf32>) -> tensor<1x256xf32>
// CHECK-NOT: stablehlo.if
// CHECK-NOT: dot_general
// CHECK: return %[[Y]]
func.func @gemv(%x: tensor<1x4096xf32>, %w: tensor<256x4096xf4E2M1FN>, %s: tensor<256x128xf8E8M0FNU>) -> tensor<1x256xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x4096xf32>, tensor<256x4096xf4E2M1FN>, tensor<256x128xf8E8M0FNU>) -> tensor<1x256xf32>
  return %0 : tensor<1x256xf32>
}

// -----

// Weights stored [K, N] and written w^T @ x: the MX side has many rows and the plain one
// few, so the kernel takes them swapped -- the weights as its K-major rhs, read as stored
// (no transpose of them) -- and its small [B, M, N] is transposed back.
// CHECK-LABEL: func.func @swapped(
// CHECK-NOT: tensor<40x64xf8E4M3FN>
// CHECK: stablehlo.custom_call @mxlower_dot_bf16_mxfp8_e4m3k32_kn_portable(
// CHECK-SAME: (tensor<1x2x64xbf16>, tensor<1x64x40xf8E4M3FN>, tensor<1x2x40xf8E8M0FNU>) -> tensor<1x2x40xf32>
// CHECK: stablehlo.transpose %{{.*}}, dims = [0, 2, 1] : (tensor<1x2x40xf32>) -> tensor<1x40x2xf32>
func.func @swapped(%w: tensor<64x40xf8E4M3FN>, %s: tensor<2x40xf8E8M0FNU>, %x: tensor<2x64xbf16>) -> tensor<40x2xf32> {
  %0 = "mx.scaled_dot"(%w, %s, %x) {lhs_format = "mxfp8_e4m3", lhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [1]>} : (tensor<64x40xf8E4M3FN>, tensor<2x40xf8E8M0FNU>, tensor<2x64xbf16>) -> tensor<40x2xf32>
  return %0 : tensor<40x2xf32>
}

// -----

// Weights stored [K, N] (blocked along K) and written x @ w: the K-major kernel (rhs_layout
// "kn") reads them as stored -- reshaped to [B, K, N], scales [B, K / k, N], no transpose.
// CHECK-LABEL: func.func @k_major(
// CHECK-SAME: %[[X:.*]]: tensor<2x64xf32>, %[[W:.*]]: tensor<64x40xf8E4M3FN>, %[[S:.*]]: tensor<2x40xf8E8M0FNU>)
// CHECK-NOT: stablehlo.transpose
// CHECK: %[[W3:.*]] = stablehlo.reshape %[[W]] : (tensor<64x40xf8E4M3FN>) -> tensor<1x64x40xf8E4M3FN>
// CHECK: %[[S3:.*]] = stablehlo.reshape %[[S]] : (tensor<2x40xf8E8M0FNU>) -> tensor<1x2x40xf8E8M0FNU>
// CHECK: stablehlo.custom_call @mxlower_dot_f32_mxfp8_e4m3k32_kn_portable(%{{.*}}, %[[W3]], %[[S3]])
// CHECK-SAME: (tensor<1x2x64xf32>, tensor<1x64x40xf8E4M3FN>, tensor<1x2x40xf8E8M0FNU>) -> tensor<1x2x40xf32>
// CHECK-NOT: stablehlo.transpose
func.func @k_major(%x: tensor<2x64xf32>, %w: tensor<64x40xf8E4M3FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<2x40xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp8_e4m3", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<2x64xf32>, tensor<64x40xf8E4M3FN>, tensor<2x40xf8E8M0FNU>) -> tensor<2x40xf32>
  return %0 : tensor<2x40xf32>
}

// -----

// MX rows against K-major MX weights: the rows dequantized to their exact f32 values (the
// scale's exponent added to the element's bits), then the K-major kernel of plain f32 rows
// -- the weights read as stored, no transpose.
// CHECK-LABEL: func.func @mx_rows_k_major(
// CHECK-SAME: %[[X:.*]]: tensor<3x64xf8E4M3FN>, %[[XS:.*]]: tensor<3x2xf8E8M0FNU>, %[[W:.*]]: tensor<64x40xf4E2M1FN>, %[[S:.*]]: tensor<2x40xf8E8M0FNU>)
// CHECK-NOT: stablehlo.transpose
// CHECK: stablehlo.convert %[[X]] : (tensor<3x64xf8E4M3FN>) -> tensor<3x64xf32>
// CHECK: stablehlo.bitcast_convert %[[XS]]
// CHECK: %[[XV:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<3x64xi32>) -> tensor<3x64xf32>
// CHECK: %[[X3:.*]] = stablehlo.reshape %[[XV]] : (tensor<3x64xf32>) -> tensor<1x3x64xf32>
// CHECK: %[[W3:.*]] = stablehlo.reshape %[[W]] : (tensor<64x40xf4E2M1FN>) -> tensor<1x64x40xf4E2M1FN>
// CHECK: %[[S3:.*]] = stablehlo.reshape %[[S]] : (tensor<2x40xf8E8M0FNU>) -> tensor<1x2x40xf8E8M0FNU>
// CHECK: stablehlo.custom_call @mxlower_dot_f32_mxfp4_e2m1k32_kn_portable(%[[X3]], %[[W3]], %[[S3]])
// CHECK-SAME: (tensor<1x3x64xf32>, tensor<1x64x40xf4E2M1FN>, tensor<1x2x40xf8E8M0FNU>) -> tensor<1x3x40xf32>
// CHECK-NOT: stablehlo.transpose
func.func @mx_rows_k_major(%x: tensor<3x64xf8E4M3FN>, %xs: tensor<3x2xf8E8M0FNU>, %w: tensor<64x40xf4E2M1FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<3x40xf32> {
  %0 = "mx.scaled_dot"(%x, %xs, %w, %s) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp4_e2m1", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<3x64xf8E4M3FN>, tensor<3x2xf8E8M0FNU>, tensor<64x40xf4E2M1FN>, tensor<2x40xf8E8M0FNU>) -> tensor<3x40xf32>
  return %0 : tensor<3x40xf32>
}

// -----

// mxint8 rows (every value exact in bf16, whatever the scale) are dequantized to bf16: the
// high half of their exact f32 values' bits, for the K-major kernel of bf16 rows.
// CHECK-LABEL: func.func @mx_rows_k_major_bf16(
// CHECK: %[[V:.*]] = stablehlo.bitcast_convert %{{.*}} : (tensor<3x64xi32>) -> tensor<3x64xf32>
// CHECK: %[[U:.*]] = stablehlo.bitcast_convert %[[V]] : (tensor<3x64xf32>) -> tensor<3x64xui32>
// CHECK: %[[H:.*]] = stablehlo.shift_right_logical %[[U]], %{{.*}} : tensor<3x64xui32>
// CHECK: %[[H16:.*]] = stablehlo.convert %[[H]] : (tensor<3x64xui32>) -> tensor<3x64xui16>
// CHECK: %[[B:.*]] = stablehlo.bitcast_convert %[[H16]] : (tensor<3x64xui16>) -> tensor<3x64xbf16>
// CHECK: %[[B3:.*]] = stablehlo.reshape %[[B]] : (tensor<3x64xbf16>) -> tensor<1x3x64xbf16>
// CHECK: stablehlo.custom_call @mxlower_dot_bf16_mxfp8_e4m3k32_kn_portable(%[[B3]], %{{.*}}, %{{.*}})
func.func @mx_rows_k_major_bf16(%x: tensor<3x64xi8>, %xs: tensor<3x2xf8E8M0FNU>, %w: tensor<64x40xf8E4M3FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<3x40xf32> {
  %0 = "mx.scaled_dot"(%x, %xs, %w, %s) {lhs_format = "mxint8", rhs_format = "mxfp8_e4m3", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<3x64xi8>, tensor<3x2xf8E8M0FNU>, tensor<64x40xf8E4M3FN>, tensor<2x40xf8E8M0FNU>) -> tensor<3x40xf32>
  return %0 : tensor<3x40xf32>
}

// -----

// More than 512 bf16 rows (dot_call.KN_COPY_ROWS) against K-major weights, where the [N, K]
// kernel's GEMM runs by default (its bf16 dot products on avx512, AMD's CPUs): that kernel
// on the copy its handler transposes (rhs_layout = "kn_copy", "_knc" in its name).
// AVX512-LABEL: func.func @many_bf16_rows_k_major(
// AVX512: stablehlo.custom_call @mxlower_dot_bf16_mxfp4_e2m1k32_knc_avx512(
// AVX512-SAME: (tensor<1x600x64xbf16>, tensor<1x64x40xf4E2M1FN>, tensor<1x2x40xf8E8M0FNU>)
// CHECK-LABEL: func.func @many_bf16_rows_k_major(
// CHECK: stablehlo.custom_call @mxlower_dot_bf16_mxfp4_e2m1k32_kn_portable(
func.func @many_bf16_rows_k_major(%x: tensor<600x64xbf16>, %w: tensor<64x40xf4E2M1FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<600x40xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp4_e2m1", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<600x64xbf16>, tensor<64x40xf4E2M1FN>, tensor<2x40xf8E8M0FNU>) -> tensor<600x40xf32>
  return %0 : tensor<600x40xf32>
}

// -----

// More than 16 f16 rows (dot_call.F16_ROWS) against MX weights held [N, K]: converted to
// f32 (exact) for the kernel of f32 rows, which ran them faster.
// CHECK-LABEL: func.func @f16_rows(
// CHECK: %[[C:.*]] = stablehlo.convert %arg0 : (tensor<24x64xf16>) -> tensor<24x64xf32>
// CHECK: %[[C3:.*]] = stablehlo.reshape %[[C]] : (tensor<24x64xf32>) -> tensor<1x24x64xf32>
// CHECK: stablehlo.custom_call @mxlower_dot_f32_mxint8k32_portable(%[[C3]], %{{.*}}, %{{.*}})
func.func @f16_rows(%x: tensor<24x64xf16>, %w: tensor<40x64xi8>, %s: tensor<40x2xf8E8M0FNU>) -> tensor<24x40xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxint8", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<24x64xf16>, tensor<40x64xi8>, tensor<40x2xf8E8M0FNU>) -> tensor<24x40xf32>
  return %0 : tensor<24x40xf32>
}

// -----

// More MX rows against K-major MX weights (past dot_call.KN_MX_ROWS: 64 rows dequantized
// to bf16, 16 to f32): the MX pair's kernel, its rhs as stored -- the kernel's handler
// copies it to [N, K] (rhs_layout = "kn" with an MX lhs) --, where that kernel's GEMM runs
// by default (the integer dot products on avx2; the f8 pair's bf16 dot products on avx512
// on AMD's CPUs, not Intel's); else the rows dequantized for the K-major kernel as above.
// Never a transpose of the weights in the StableHLO.
// CHECK-LABEL: func.func @many_mx_rows_k_major(
// CHECK: stablehlo.custom_call @mxlower_dot_bf16_mxfp4_e2m1k32_kn_portable(
// AVX2-LABEL: func.func @many_mx_rows_k_major(
// AVX2-NOT: stablehlo.transpose
// AVX2: stablehlo.custom_call @mxlower_dot_mxfp4_e2m1k32_mxfp4_e2m1k32_kn_avx2(
// AVX2-SAME: (tensor<1x80x64xf4E2M1FN>, tensor<1x80x2xf8E8M0FNU>, tensor<1x64x40xf4E2M1FN>, tensor<1x2x40xf8E8M0FNU>) -> tensor<1x80x40xf32>
// AVX512-LABEL: func.func @many_f8_rows_k_major(
// AVX512-NOT: stablehlo.transpose
// AVX512: stablehlo.custom_call @mxlower_dot_mxfp8_e4m3k32_mxfp8_e4m3k32_kn_avx512(
// INTEL-LABEL: func.func @many_f8_rows_k_major(
// INTEL: stablehlo.custom_call @mxlower_dot_f32_mxfp8_e4m3k32_kn_avx512(
func.func @many_mx_rows_k_major(%x: tensor<80x64xf4E2M1FN>, %xs: tensor<80x2xf8E8M0FNU>, %w: tensor<64x40xf4E2M1FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<80x40xf32> {
  %0 = "mx.scaled_dot"(%x, %xs, %w, %s) {lhs_format = "mxfp4_e2m1", rhs_format = "mxfp4_e2m1", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<80x64xf4E2M1FN>, tensor<80x2xf8E8M0FNU>, tensor<64x40xf4E2M1FN>, tensor<2x40xf8E8M0FNU>) -> tensor<80x40xf32>
  return %0 : tensor<80x40xf32>
}
func.func @many_f8_rows_k_major(%x: tensor<24x64xf8E4M3FN>, %xs: tensor<24x2xf8E8M0FNU>, %w: tensor<64x40xf8E4M3FN>, %s: tensor<2x40xf8E8M0FNU>) -> tensor<24x40xf32> {
  %0 = "mx.scaled_dot"(%x, %xs, %w, %s) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp8_e4m3", rhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<24x64xf8E4M3FN>, tensor<24x2xf8E8M0FNU>, tensor<64x40xf8E4M3FN>, tensor<2x40xf8E8M0FNU>) -> tensor<24x40xf32>
  return %0 : tensor<24x40xf32>
}

// -----

// A GEMM (more than 16 free rows on both sides) is left to mxlower-decompose-mx unless
// gemm=true; a batched one then calls the kernel with its batch dimension in front.
// CHECK-LABEL: func.func @gemm(
// CHECK: "mx.scaled_dot"
// GEMM-LABEL: func.func @gemm(
// GEMM: stablehlo.custom_call @mxlower_dot_mxint8k32_mxint8k32_avx2(
// GEMM-SAME: (tensor<2x32x64xi8>, tensor<2x32x2xf8E8M0FNU>, tensor<2x24x64xi8>, tensor<2x24x2xf8E8M0FNU>) -> tensor<2x32x24xf32>
func.func @gemm(%a: tensor<2x32x64xi8>, %as: tensor<2x32x2xf8E8M0FNU>, %b: tensor<2x24x64xi8>, %bs: tensor<2x24x2xf8E8M0FNU>) -> tensor<2x32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxint8", rhs_format = "mxint8", dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : (tensor<2x32x64xi8>, tensor<2x32x2xf8E8M0FNU>, tensor<2x24x64xi8>, tensor<2x24x2xf8E8M0FNU>) -> tensor<2x32x24xf32>
  return %0 : tensor<2x32x24xf32>
}

// -----

// A GEMM whose sides are both integer-unit formats (e2m1 / nvfp4, e2m3, e3m2, mxint8) with
// one block size calls the kernel on avx2 without gemm=true: its integer dot products run
// faster than the dequantize kernels + XLA's f32 dot.  An f8 GEMM (the kernel's f32 path) and
// every GEMM on the portable path are left to mxlower-decompose-mx.
// CHECK-LABEL: func.func @fp4_gemm(
// CHECK: "mx.scaled_dot"
// AVX2-LABEL: func.func @fp4_gemm(
// AVX2: stablehlo.custom_call @mxlower_dot_mxfp4_e2m1k32_mxfp4_e2m1k32_avx2(
// AVX2-LABEL: func.func @int8_gemm(
// AVX2: stablehlo.custom_call @mxlower_dot_mxint8k32_mxint8k32_avx2(
// AVX2-LABEL: func.func @f8_gemm(
// AVX2-NOT: stablehlo.custom_call
// AVX2: "mx.scaled_dot"
func.func @fp4_gemm(%a: tensor<32x64xf4E2M1FN>, %as: tensor<32x2xf8E8M0FNU>, %b: tensor<24x64xf4E2M1FN>, %bs: tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp4_e2m1", rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, tensor<24x64xf4E2M1FN>, tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32>
  return %0 : tensor<32x24xf32>
}
func.func @int8_gemm(%a: tensor<32x64xi8>, %as: tensor<32x2xf8E8M0FNU>, %b: tensor<24x64xi8>, %bs: tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxint8", rhs_format = "mxint8", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<32x64xi8>, tensor<32x2xf8E8M0FNU>, tensor<24x64xi8>, tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32>
  return %0 : tensor<32x24xf32>
}
func.func @f8_gemm(%a: tensor<32x64xf8E4M3FN>, %as: tensor<32x2xf8E8M0FNU>, %b: tensor<24x64xf8E4M3FN>, %bs: tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp8_e4m3", rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<32x64xf8E4M3FN>, tensor<32x2xf8E8M0FNU>, tensor<24x64xf8E4M3FN>, tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32>
  return %0 : tensor<32x24xf32>
}

// -----

// bf16 rows against MX weights past the streaming tiles' rows (48 on avx512, 64 plain rows on
// avx2): avx512's packed GEMM on bf16 dot products takes them on an AMD CPU (vendor=), the
// bf16 rows as they are; another vendor's, and avx2, which has no such GEMM, leave them to
// mxlower-decompose-mx.  f32 rows past avx512's 128 take its GEMM on transposed panels on any
// vendor's CPU; avx2 leaves them to mxlower-decompose-mx.
// AVX512-LABEL: func.func @bf16_rows(
// AVX512: stablehlo.custom_call @mxlower_dot_bf16_mxfp8_e4m3k32_avx512(
// AVX512-SAME: (tensor<1x80x64xbf16>, tensor<1x24x64xf8E4M3FN>, tensor<1x24x2xf8E8M0FNU>) -> tensor<1x80x24xf32>
// AVX512-LABEL: func.func @f32_rows(
// AVX512: stablehlo.custom_call @mxlower_dot_f32_mxfp8_e4m3k32_avx512(
// AVX512-SAME: (tensor<1x300x64xf32>, tensor<1x24x64xf8E4M3FN>, tensor<1x24x2xf8E8M0FNU>) -> tensor<1x300x24xf32>
// AVX2-LABEL: func.func @bf16_rows(
// AVX2-NOT: stablehlo.custom_call
// AVX2: "mx.scaled_dot"
// AVX2-LABEL: func.func @f32_rows(
// AVX2-NOT: stablehlo.custom_call
// AVX2: "mx.scaled_dot"
// INTEL-LABEL: func.func @bf16_rows(
// INTEL-NOT: stablehlo.custom_call
// INTEL: "mx.scaled_dot"
// INTEL-LABEL: func.func @f32_rows(
// INTEL: stablehlo.custom_call @mxlower_dot_f32_mxfp8_e4m3k32_avx512(
func.func @bf16_rows(%x: tensor<80x64xbf16>, %w: tensor<24x64xf8E4M3FN>, %s: tensor<24x2xf8E8M0FNU>) -> tensor<80x24xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<80x64xbf16>, tensor<24x64xf8E4M3FN>, tensor<24x2xf8E8M0FNU>) -> tensor<80x24xf32>
  return %0 : tensor<80x24xf32>
}
func.func @f32_rows(%x: tensor<300x64xf32>, %w: tensor<24x64xf8E4M3FN>, %s: tensor<24x2xf8E8M0FNU>) -> tensor<300x24xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<300x64xf32>, tensor<24x64xf8E4M3FN>, tensor<24x2xf8E8M0FNU>) -> tensor<300x24xf32>
  return %0 : tensor<300x24xf32>
}

// -----

// Left alone: f6 elements (XLA:CPU has no f6 type) and a bf16 compute type.
// CHECK-LABEL: func.func @left(
// CHECK-COUNT-2: "mx.scaled_dot"
// CHECK-NOT: custom_call
func.func @left(%x: tensor<1x64xf32>, %w: tensor<8x64xf6E2M3FN>, %s: tensor<8x2xf8E8M0FNU>) -> (tensor<1x8xf32>, tensor<1x8xf32>) {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp6_e2m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xf6E2M3FN>, tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32>
  %1 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp6_e2m3", compute_type = bf16, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xf6E2M3FN>, tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32>
  return %0, %1 : tensor<1x8xf32>, tensor<1x8xf32>
}

// -----

func.func @bad(%x: tensor<1x64xf32>, %w: tensor<8x64xf4E2M1FN>, %s: tensor<8x3xf8E8M0FNU>) -> tensor<1x8xf32> {
  // expected-error @+1 {{'mx.scaled_dot' op}}
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xf4E2M1FN>, tensor<8x3xf8E8M0FNU>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}
