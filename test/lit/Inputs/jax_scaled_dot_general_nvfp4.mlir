// jax_scaled_dot_general_nvfp4: produced by examples/make_examples.py with jax 0.10.2:
//   jax.nn.scaled_dot_general(x, y, (((1,), (1,)), ((), ())), configs=[nvfp4 config] * 3) on f32[32,128] x f32[16,128], lowered for cuda
// Inputs: jax_scaled_dot_general_nvfp4.inputs.npz; dequantize-then-matmul reference: jax_scaled_dot_general_nvfp4.ref.npz
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x128xf32>, %arg1: tensor<16x128xf32>) -> (tensor<32x16xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<1xf32>
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<32x128xf32>) -> tensor<32x128x1xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<16x128xf32>) -> tensor<16x128x1xf32>
    %2 = stablehlo.transpose %0, dims = [2, 0, 1] : (tensor<32x128x1xf32>) -> tensor<1x32x128xf32>
    %3 = stablehlo.transpose %1, dims = [2, 0, 1] : (tensor<16x128x1xf32>) -> tensor<1x16x128xf32>
    %4 = stablehlo.reshape %2 : (tensor<1x32x128xf32>) -> tensor<1x32x8x16xf32>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [3] : (tensor<1xf32>) -> tensor<1x1x1x1xf32>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2, 3] : (tensor<1x1x1x1xf32>) -> tensor<1x32x8x16xf32>
    %7 = stablehlo.divide %4, %6 : tensor<1x32x8x16xf32>
    %8 = stablehlo.abs %7 : tensor<1x32x8x16xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %9 = stablehlo.reduce(%8 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<1x32x8x16xf32>, tensor<f32>) -> tensor<1x32x8xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2] : (tensor<1x32x8xf32>) -> tensor<1x32x8x1xf32>
    %cst_1 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<1x32x8x1xf32>
    %12 = stablehlo.divide %10, %11 : tensor<1x32x8x1xf32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %cst_2 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %13 = call @clip(%12, %c, %cst_2) : (tensor<1x32x8x1xf32>, tensor<i32>, tensor<f32>) -> tensor<1x32x8x1xf32>
    %14 = stablehlo.convert %13 : (tensor<1x32x8x1xf32>) -> tensor<1x32x8x1xf8E4M3FN>
    %15 = stablehlo.optimization_barrier %14 : tensor<1x32x8x1xf8E4M3FN>
    %16 = stablehlo.convert %15 : (tensor<1x32x8x1xf8E4M3FN>) -> tensor<1x32x8x1xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1, 2, 3] : (tensor<1x32x8x1xf32>) -> tensor<1x32x8x16xf32>
    %18 = stablehlo.divide %7, %17 : tensor<1x32x8x16xf32>
    %cst_3 = stablehlo.constant dense<-6.000000e+00> : tensor<f32>
    %cst_4 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %19 = call @clip_0(%18, %cst_3, %cst_4) : (tensor<1x32x8x16xf32>, tensor<f32>, tensor<f32>) -> tensor<1x32x8x16xf32>
    %20 = stablehlo.convert %19 : (tensor<1x32x8x16xf32>) -> tensor<1x32x8x16xf4E2M1FN>
    %21 = stablehlo.reshape %20 : (tensor<1x32x8x16xf4E2M1FN>) -> tensor<1x32x128xf4E2M1FN>
    %22 = stablehlo.reshape %15 : (tensor<1x32x8x1xf8E4M3FN>) -> tensor<1x32x8xf8E4M3FN>
    %23 = stablehlo.reshape %3 : (tensor<1x16x128xf32>) -> tensor<1x16x8x16xf32>
    %24 = stablehlo.broadcast_in_dim %cst, dims = [3] : (tensor<1xf32>) -> tensor<1x1x1x1xf32>
    %25 = stablehlo.broadcast_in_dim %24, dims = [0, 1, 2, 3] : (tensor<1x1x1x1xf32>) -> tensor<1x16x8x16xf32>
    %26 = stablehlo.divide %23, %25 : tensor<1x16x8x16xf32>
    %27 = stablehlo.abs %26 : tensor<1x16x8x16xf32>
    %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %28 = stablehlo.reduce(%27 init: %cst_5) applies stablehlo.maximum across dimensions = [3] : (tensor<1x16x8x16xf32>, tensor<f32>) -> tensor<1x16x8xf32>
    %29 = stablehlo.broadcast_in_dim %28, dims = [0, 1, 2] : (tensor<1x16x8xf32>) -> tensor<1x16x8x1xf32>
    %cst_6 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<1x16x8x1xf32>
    %31 = stablehlo.divide %29, %30 : tensor<1x16x8x1xf32>
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %cst_8 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %32 = call @clip_1(%31, %c_7, %cst_8) : (tensor<1x16x8x1xf32>, tensor<i32>, tensor<f32>) -> tensor<1x16x8x1xf32>
    %33 = stablehlo.convert %32 : (tensor<1x16x8x1xf32>) -> tensor<1x16x8x1xf8E4M3FN>
    %34 = stablehlo.optimization_barrier %33 : tensor<1x16x8x1xf8E4M3FN>
    %35 = stablehlo.convert %34 : (tensor<1x16x8x1xf8E4M3FN>) -> tensor<1x16x8x1xf32>
    %36 = stablehlo.broadcast_in_dim %35, dims = [0, 1, 2, 3] : (tensor<1x16x8x1xf32>) -> tensor<1x16x8x16xf32>
    %37 = stablehlo.divide %26, %36 : tensor<1x16x8x16xf32>
    %cst_9 = stablehlo.constant dense<-6.000000e+00> : tensor<f32>
    %cst_10 = stablehlo.constant dense<6.000000e+00> : tensor<f32>
    %38 = call @clip_2(%37, %cst_9, %cst_10) : (tensor<1x16x8x16xf32>, tensor<f32>, tensor<f32>) -> tensor<1x16x8x16xf32>
    %39 = stablehlo.convert %38 : (tensor<1x16x8x16xf32>) -> tensor<1x16x8x16xf4E2M1FN>
    %40 = stablehlo.reshape %39 : (tensor<1x16x8x16xf4E2M1FN>) -> tensor<1x16x128xf4E2M1FN>
    %41 = stablehlo.reshape %34 : (tensor<1x16x8x1xf8E4M3FN>) -> tensor<1x16x8xf8E4M3FN>
    %42 = call @_scaled_matmul(%21, %40, %22, %41) : (tensor<1x32x128xf4E2M1FN>, tensor<1x16x128xf4E2M1FN>, tensor<1x32x8xf8E4M3FN>, tensor<1x16x8xf8E4M3FN>) -> tensor<1x32x16xf32>
    %43 = stablehlo.multiply %cst, %cst : tensor<1xf32>
    %44 = stablehlo.broadcast_in_dim %43, dims = [2] : (tensor<1xf32>) -> tensor<1x1x1xf32>
    %45 = stablehlo.broadcast_in_dim %44, dims = [0, 1, 2] : (tensor<1x1x1xf32>) -> tensor<1x32x16xf32>
    %46 = stablehlo.multiply %42, %45 : tensor<1x32x16xf32>
    %47 = stablehlo.reshape %46 : (tensor<1x32x16xf32>) -> tensor<32x16xf32>
    return %47 : tensor<32x16xf32>
  }
  func.func private @clip(%arg0: tensor<1x32x8x1xf32>, %arg1: tensor<i32>, %arg2: tensor<f32>) -> tensor<1x32x8x1xf32> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x32x8x1xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<1x32x8x1xf32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x32x8x1xf32>
    %4 = stablehlo.minimum %3, %2 : tensor<1x32x8x1xf32>
    return %4 : tensor<1x32x8x1xf32>
  }
  func.func private @clip_0(%arg0: tensor<1x32x8x16xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<1x32x8x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x32x8x16xf32>
    %1 = stablehlo.maximum %0, %arg0 : tensor<1x32x8x16xf32>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x32x8x16xf32>
    %3 = stablehlo.minimum %2, %1 : tensor<1x32x8x16xf32>
    return %3 : tensor<1x32x8x16xf32>
  }
  func.func private @clip_1(%arg0: tensor<1x16x8x1xf32>, %arg1: tensor<i32>, %arg2: tensor<f32>) -> tensor<1x16x8x1xf32> {
    %0 = stablehlo.convert %arg1 : (tensor<i32>) -> tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<1x16x8x1xf32>
    %2 = stablehlo.maximum %1, %arg0 : tensor<1x16x8x1xf32>
    %3 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x16x8x1xf32>
    %4 = stablehlo.minimum %3, %2 : tensor<1x16x8x1xf32>
    return %4 : tensor<1x16x8x1xf32>
  }
  func.func private @clip_2(%arg0: tensor<1x16x8x16xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<1x16x8x16xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x16x8x16xf32>
    %1 = stablehlo.maximum %0, %arg0 : tensor<1x16x8x16xf32>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x16x8x16xf32>
    %3 = stablehlo.minimum %2, %1 : tensor<1x16x8x16xf32>
    return %3 : tensor<1x16x8x16xf32>
  }
  func.func private @_scaled_matmul(%arg0: tensor<1x32x128xf4E2M1FN>, %arg1: tensor<1x16x128xf4E2M1FN>, %arg2: tensor<1x32x8xf8E4M3FN>, %arg3: tensor<1x16x8xf8E4M3FN>) -> tensor<1x32x16xf32> {
    %0 = stablehlo.custom_call @__op$block_scaled_dot(%arg0, %arg1, %arg2, %arg3) {api_version = 2 : i32, backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [0], \22rhs_batch_dimensions\22: [0], \22dequantize_type\22: \22F32\22}}", operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>], result_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]} : (tensor<1x32x128xf4E2M1FN>, tensor<1x16x128xf4E2M1FN>, tensor<1x32x8xf8E4M3FN>, tensor<1x16x8xf8E4M3FN>) -> tensor<1x32x16xf32>
    return %0 : tensor<1x32x16xf32>
  }
}
