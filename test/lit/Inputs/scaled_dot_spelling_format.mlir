// mx.scaled_dot sides named by their MX format (lhs_format / rhs_format with block size and
// axis).  scaled_dot_spelling_datatype.mlir is this file with every scaled side named by its
// datatype instead; passes/mxlower-scaled-dot-to-kernel.mlir and passes/mxlower-decompose-mx.mlir
// lower both and check that the two outputs are identical.

// f32 activations x e4m3 weights [N, K]: number and scale specs
func.func @gemv_specs(%x: tensor<1x64xf32>, %w: tensor<8x64xf8E4M3FN>, %s: tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp8_e4m3", rhs_block_size = 32 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xf8E4M3FN>, tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// a predefined datatype name
func.func @gemv_name(%x: tensor<1x64xbf16>, %w: tensor<8x64xf4E2M1FN>, %s: tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xbf16>, tensor<8x64xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// bfp16 is mxint8 with blocks of 8
func.func @gemv_bfp16(%x: tensor<1x64xf32>, %w: tensor<8x64xi8>, %s: tensor<8x8xf8E8M0FNU>) -> tensor<1x8xf32> {
  %0 = "mx.scaled_dot"(%x, %w, %s) {rhs_format = "mxint8", rhs_block_size = 8 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<1x64xf32>, tensor<8x64xi8>, tensor<8x8xf8E8M0FNU>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// weights [K, N] blocked along dimension 0: a number:scale code naming the dimension
func.func @swapped_code(%w: tensor<64x40xf8E4M3FN>, %s: tensor<2x40xf8E8M0FNU>, %x: tensor<2x64xbf16>) -> tensor<40x2xf32> {
  %0 = "mx.scaled_dot"(%w, %s, %x) {lhs_format = "mxfp8_e4m3", lhs_block_size = 32 : i64, lhs_axis = 0 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [1]>} : (tensor<64x40xf8E4M3FN>, tensor<2x40xf8E8M0FNU>, tensor<2x64xbf16>) -> tensor<40x2xf32>
  return %0 : tensor<40x2xf32>
}

// nvfp4 with its global scale: the two-level datatype e2m1fo:e4m3fn_t16_gf32
func.func @nvfp4_global(%x: tensor<2x64xbf16>, %w: tensor<8x64xf4E2M1FN>, %s: tensor<8x4xf8E4M3FN>, %g: tensor<f32>) -> tensor<2x8xbf16> {
  %0 = "mx.scaled_dot"(%x, %w, %s, %g) {rhs_format = "nvfp4", rhs_block_size = 16 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<2x64xbf16>, tensor<8x64xf4E2M1FN>, tensor<8x4xf8E4M3FN>, tensor<f32>) -> tensor<2x8xbf16>
  return %0 : tensor<2x8xbf16>
}

// a GEMM of two MX sides (batched), blocks of 16
func.func @gemm_both(%a: tensor<2x32x64xf4E2M1FN>, %as: tensor<2x32x4xf8E8M0FNU>, %b: tensor<2x24x64xf6E2M3FN>, %bs: tensor<2x24x4xf8E8M0FNU>) -> tensor<2x32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp4_e2m1", lhs_block_size = 16 : i64, rhs_format = "mxfp6_e2m3", rhs_block_size = 16 : i64, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : (tensor<2x32x64xf4E2M1FN>, tensor<2x32x4xf8E8M0FNU>, tensor<2x24x64xf6E2M3FN>, tensor<2x24x4xf8E8M0FNU>) -> tensor<2x32x24xf32>
  return %0 : tensor<2x32x24xf32>
}

// an f4 GEMM, which takes the kernel's integer dot products on avx2
func.func @gemm_f4(%a: tensor<32x64xf4E2M1FN>, %as: tensor<32x2xf8E8M0FNU>, %b: tensor<24x64xf4E2M1FN>, %bs: tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32> {
  %0 = "mx.scaled_dot"(%a, %as, %b, %bs) {lhs_format = "mxfp4_e2m1", rhs_format = "mxfp4_e2m1", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, tensor<24x64xf4E2M1FN>, tensor<24x2xf8E8M0FNU>) -> tensor<32x24xf32>
  return %0 : tensor<32x24xf32>
}
