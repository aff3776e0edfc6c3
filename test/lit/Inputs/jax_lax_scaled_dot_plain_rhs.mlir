// jax_lax_scaled_dot_plain_rhs: produced by examples/make_examples.py with jax 0.10.2:
//   jax.lax.scaled_dot(lhs, rhs, lhs_scale=...) with an mxfp8_e4m3 lhs and a plain bf16 rhs, lowered for cuda
// Inputs: jax_lax_scaled_dot_plain_rhs.inputs.npz; dequantize-then-matmul reference: jax_lax_scaled_dot_plain_rhs.ref.npz
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x128xf8E4M3FN>, %arg1: tensor<128x16xbf16>, %arg2: tensor<32x4xf8E8M0FNU>) -> (tensor<32x16xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<1x16xbf16>
    %1 = stablehlo.convert %0 : (tensor<1x16xbf16>) -> tensor<1x16xf8E8M0FNU>
    %2 = stablehlo.composite "xla.scaled_dot" %arg0, %arg1, %arg2, %1 {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<32x128xf8E4M3FN>, tensor<128x16xbf16>, tensor<32x4xf8E8M0FNU>, tensor<1x16xf8E8M0FNU>) -> tensor<32x16xf32>
    return %2 : tensor<32x16xf32>
  }
  func.func private @xla.scaled_dot(%arg0: tensor<32x128xf8E4M3FN>, %arg1: tensor<128x16xbf16>, %arg2: tensor<32x4xf8E8M0FNU>, %arg3: tensor<1x16xf8E8M0FNU>) -> tensor<32x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<32x4xf8E8M0FNU>) -> tensor<32x4x1xf8E8M0FNU>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1, 2] : (tensor<32x4x1xf8E8M0FNU>) -> tensor<32x4x32xf8E8M0FNU>
    %2 = stablehlo.reshape %1 : (tensor<32x4x32xf8E8M0FNU>) -> tensor<32x128xf8E8M0FNU>
    %3 = stablehlo.convert %arg0 : (tensor<32x128xf8E4M3FN>) -> tensor<32x128xbf16>
    %4 = stablehlo.convert %2 : (tensor<32x128xf8E8M0FNU>) -> tensor<32x128xbf16>
    %5 = stablehlo.multiply %3, %4 : tensor<32x128xbf16>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [0, 2] : (tensor<1x16xf8E8M0FNU>) -> tensor<1x1x16xf8E8M0FNU>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1, 2] : (tensor<1x1x16xf8E8M0FNU>) -> tensor<1x128x16xf8E8M0FNU>
    %8 = stablehlo.reshape %7 : (tensor<1x128x16xf8E8M0FNU>) -> tensor<128x16xf8E8M0FNU>
    %9 = stablehlo.convert %8 : (tensor<128x16xf8E8M0FNU>) -> tensor<128x16xbf16>
    %10 = stablehlo.multiply %arg1, %9 : tensor<128x16xbf16>
    %11 = stablehlo.dot_general %5, %10, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x128xbf16>, tensor<128x16xbf16>) -> tensor<32x16xf32>
    return %11 : tensor<32x16xf32>
  }
}
