// jax_lax_scaled_dot: produced by examples/make_examples.py with jax 0.10.2:
//   jax.lax.scaled_dot(lhs, rhs, lhs_scale=..., rhs_scale=...) with mxfp8_e4m3 x mxfp8_e5m2 operands, lowered for cuda
// Inputs: jax_lax_scaled_dot.inputs.npz; dequantize-then-matmul reference: jax_lax_scaled_dot.ref.npz
module @jit_g attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x128xf8E4M3FN>, %arg1: tensor<128x16xf8E5M2>, %arg2: tensor<32x4xf8E8M0FNU>, %arg3: tensor<4x16xf8E8M0FNU>) -> (tensor<32x16xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.composite "xla.scaled_dot" %arg0, %arg1, %arg2, %arg3 {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<32x128xf8E4M3FN>, tensor<128x16xf8E5M2>, tensor<32x4xf8E8M0FNU>, tensor<4x16xf8E8M0FNU>) -> tensor<32x16xf32>
    return %0 : tensor<32x16xf32>
  }
  func.func private @xla.scaled_dot(%arg0: tensor<32x128xf8E4M3FN>, %arg1: tensor<128x16xf8E5M2>, %arg2: tensor<32x4xf8E8M0FNU>, %arg3: tensor<4x16xf8E8M0FNU>) -> tensor<32x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<32x4xf8E8M0FNU>) -> tensor<32x4x1xf8E8M0FNU>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1, 2] : (tensor<32x4x1xf8E8M0FNU>) -> tensor<32x4x32xf8E8M0FNU>
    %2 = stablehlo.reshape %1 : (tensor<32x4x32xf8E8M0FNU>) -> tensor<32x128xf8E8M0FNU>
    %3 = stablehlo.convert %arg0 : (tensor<32x128xf8E4M3FN>) -> tensor<32x128xbf16>
    %4 = stablehlo.convert %2 : (tensor<32x128xf8E8M0FNU>) -> tensor<32x128xbf16>
    %5 = stablehlo.multiply %3, %4 : tensor<32x128xbf16>
    %6 = stablehlo.broadcast_in_dim %arg3, dims = [0, 2] : (tensor<4x16xf8E8M0FNU>) -> tensor<4x1x16xf8E8M0FNU>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1, 2] : (tensor<4x1x16xf8E8M0FNU>) -> tensor<4x32x16xf8E8M0FNU>
    %8 = stablehlo.reshape %7 : (tensor<4x32x16xf8E8M0FNU>) -> tensor<128x16xf8E8M0FNU>
    %9 = stablehlo.convert %arg1 : (tensor<128x16xf8E5M2>) -> tensor<128x16xbf16>
    %10 = stablehlo.convert %8 : (tensor<128x16xf8E8M0FNU>) -> tensor<128x16xbf16>
    %11 = stablehlo.multiply %9, %10 : tensor<128x16xbf16>
    %12 = stablehlo.dot_general %5, %11, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x128xbf16>, tensor<128x16xbf16>) -> tensor<32x16xf32>
    return %12 : tensor<32x16xf32>
  }
}
