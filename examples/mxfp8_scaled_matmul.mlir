// mxfp8_scaled_matmul: produced by examples/make_examples.py with jax 0.10.2:
//   jax.nn.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=f32) on mxfp8 operands float8_e4m3fn[1, 32, 128] x float8_e4m3fn[1, 16, 128], lowered for cuda
// Inputs: mxfp8_scaled_matmul.inputs.npz; dequantize-then-matmul reference: mxfp8_scaled_matmul.ref.npz
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x32x128xf8E4M3FN>, %arg1: tensor<1x16x128xf8E4M3FN>, %arg2: tensor<1x32x4xf8E8M0FNU>, %arg3: tensor<1x16x4xf8E8M0FNU>) -> (tensor<1x32x16xf32> {jax.result_info = "result"}) {
    %0 = call @_scaled_matmul(%arg0, %arg1, %arg2, %arg3) : (tensor<1x32x128xf8E4M3FN>, tensor<1x16x128xf8E4M3FN>, tensor<1x32x4xf8E8M0FNU>, tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32>
    return %0 : tensor<1x32x16xf32>
  }
  func.func private @_scaled_matmul(%arg0: tensor<1x32x128xf8E4M3FN>, %arg1: tensor<1x16x128xf8E4M3FN>, %arg2: tensor<1x32x4xf8E8M0FNU>, %arg3: tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32> {
    %0 = stablehlo.custom_call @__op$block_scaled_dot(%arg0, %arg1, %arg2, %arg3) {api_version = 2 : i32, backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [0], \22rhs_batch_dimensions\22: [0], \22dequantize_type\22: \22F32\22}}", operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>], result_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]} : (tensor<1x32x128xf8E4M3FN>, tensor<1x16x128xf8E4M3FN>, tensor<1x32x4xf8E8M0FNU>, tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32>
    return %0 : tensor<1x32x16xf32>
  }
}
