// jax_scaled_dot_general_mxfp8: produced by examples/make_examples.py with jax 0.10.2:
//   jax.nn.scaled_dot_general(x, y, (((1,), (1,)), ((), ())), configs=[mxfp8 config] * 3) on f32[32,128] x f32[16,128], lowered for cuda
// Inputs: jax_scaled_dot_general_mxfp8.inputs.npz; dequantize-then-matmul reference: jax_scaled_dot_general_mxfp8.ref.npz
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<32x128xf32>, %arg1: tensor<16x128xf32>) -> (tensor<32x16xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<32x128xf32>) -> tensor<32x128x1xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<16x128xf32>) -> tensor<16x128x1xf32>
    %2 = stablehlo.transpose %0, dims = [2, 0, 1] : (tensor<32x128x1xf32>) -> tensor<1x32x128xf32>
    %3 = stablehlo.transpose %1, dims = [2, 0, 1] : (tensor<16x128x1xf32>) -> tensor<1x16x128xf32>
    %4 = stablehlo.reshape %2 : (tensor<1x32x128xf32>) -> tensor<1x32x4x32xf32>
    %5 = stablehlo.abs %4 : tensor<1x32x4x32xf32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.maximum across dimensions = [3] : (tensor<1x32x4x32xf32>, tensor<f32>) -> tensor<1x32x4xf32>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1, 2] : (tensor<1x32x4xf32>) -> tensor<1x32x4x1xf32>
    %cst_0 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<1x32x4x1xf32>
    %9 = stablehlo.divide %7, %8 : tensor<1x32x4x1xf32>
    %10 = stablehlo.bitcast_convert %9 : (tensor<1x32x4x1xf32>) -> tensor<1x32x4x1xui32>
    %c = stablehlo.constant dense<23> : tensor<ui32>
    %11 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %12 = stablehlo.shift_right_logical %10, %11 : tensor<1x32x4x1xui32>
    %c_1 = stablehlo.constant dense<8388607> : tensor<ui32>
    %13 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %14 = stablehlo.and %10, %13 : tensor<1x32x4x1xui32>
    %c_2 = stablehlo.constant dense<0> : tensor<ui32>
    %15 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %16 = stablehlo.compare GT, %14, %15, UNSIGNED : (tensor<1x32x4x1xui32>, tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xi1>
    %c_3 = stablehlo.constant dense<254> : tensor<ui32>
    %17 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %18 = stablehlo.compare NE, %12, %17, UNSIGNED : (tensor<1x32x4x1xui32>, tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xi1>
    %19 = stablehlo.and %16, %18 : tensor<1x32x4x1xi1>
    %c_4 = stablehlo.constant dense<0> : tensor<ui32>
    %20 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %21 = stablehlo.compare EQ, %12, %20, UNSIGNED : (tensor<1x32x4x1xui32>, tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xi1>
    %c_5 = stablehlo.constant dense<4194304> : tensor<ui32>
    %22 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %23 = stablehlo.compare LE, %14, %22, UNSIGNED : (tensor<1x32x4x1xui32>, tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xi1>
    %24 = stablehlo.and %21, %23 : tensor<1x32x4x1xi1>
    %25 = stablehlo.not %24 : tensor<1x32x4x1xi1>
    %26 = stablehlo.and %19, %25 : tensor<1x32x4x1xi1>
    %c_6 = stablehlo.constant dense<1> : tensor<ui32>
    %27 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %28 = stablehlo.add %12, %27 : tensor<1x32x4x1xui32>
    %29 = call @_where(%26, %28, %12) : (tensor<1x32x4x1xi1>, tensor<1x32x4x1xui32>, tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xui32>
    %30 = stablehlo.convert %29 : (tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xui8>
    %31 = stablehlo.convert %30 : (tensor<1x32x4x1xui8>) -> tensor<1x32x4x1xui32>
    %c_7 = stablehlo.constant dense<23> : tensor<ui32>
    %32 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<ui32>) -> tensor<1x32x4x1xui32>
    %33 = stablehlo.shift_left %31, %32 : tensor<1x32x4x1xui32>
    %34 = stablehlo.bitcast_convert %33 : (tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<1x32x4x1xf32>
    %36 = stablehlo.compare EQ, %34, %35, FLOAT : (tensor<1x32x4x1xf32>, tensor<1x32x4x1xf32>) -> tensor<1x32x4x1xi1>
    %cst_9 = stablehlo.constant dense<5.87747175E-39> : tensor<f32>
    %37 = call @_where_0(%36, %cst_9, %34) : (tensor<1x32x4x1xi1>, tensor<f32>, tensor<1x32x4x1xf32>) -> tensor<1x32x4x1xf32>
    %38 = stablehlo.broadcast_in_dim %37, dims = [0, 1, 2, 3] : (tensor<1x32x4x1xf32>) -> tensor<1x32x4x32xf32>
    %39 = stablehlo.divide %4, %38 : tensor<1x32x4x32xf32>
    %cst_10 = stablehlo.constant dense<-4.480000e+02> : tensor<f32>
    %cst_11 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %40 = call @clip(%39, %cst_10, %cst_11) : (tensor<1x32x4x32xf32>, tensor<f32>, tensor<f32>) -> tensor<1x32x4x32xf32>
    %41 = stablehlo.convert %40 : (tensor<1x32x4x32xf32>) -> tensor<1x32x4x32xf8E4M3FN>
    %42 = stablehlo.reshape %41 : (tensor<1x32x4x32xf8E4M3FN>) -> tensor<1x32x128xf8E4M3FN>
    %43 = stablehlo.reshape %30 : (tensor<1x32x4x1xui8>) -> tensor<1x32x4xui8>
    %44 = stablehlo.bitcast_convert %43 : (tensor<1x32x4xui8>) -> tensor<1x32x4xf8E8M0FNU>
    %45 = stablehlo.reshape %3 : (tensor<1x16x128xf32>) -> tensor<1x16x4x32xf32>
    %46 = stablehlo.abs %45 : tensor<1x16x4x32xf32>
    %cst_12 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %47 = stablehlo.reduce(%46 init: %cst_12) applies stablehlo.maximum across dimensions = [3] : (tensor<1x16x4x32xf32>, tensor<f32>) -> tensor<1x16x4xf32>
    %48 = stablehlo.broadcast_in_dim %47, dims = [0, 1, 2] : (tensor<1x16x4xf32>) -> tensor<1x16x4x1xf32>
    %cst_13 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %49 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<1x16x4x1xf32>
    %50 = stablehlo.divide %48, %49 : tensor<1x16x4x1xf32>
    %51 = stablehlo.bitcast_convert %50 : (tensor<1x16x4x1xf32>) -> tensor<1x16x4x1xui32>
    %c_14 = stablehlo.constant dense<23> : tensor<ui32>
    %52 = stablehlo.broadcast_in_dim %c_14, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %53 = stablehlo.shift_right_logical %51, %52 : tensor<1x16x4x1xui32>
    %c_15 = stablehlo.constant dense<8388607> : tensor<ui32>
    %54 = stablehlo.broadcast_in_dim %c_15, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %55 = stablehlo.and %51, %54 : tensor<1x16x4x1xui32>
    %c_16 = stablehlo.constant dense<0> : tensor<ui32>
    %56 = stablehlo.broadcast_in_dim %c_16, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %57 = stablehlo.compare GT, %55, %56, UNSIGNED : (tensor<1x16x4x1xui32>, tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xi1>
    %c_17 = stablehlo.constant dense<254> : tensor<ui32>
    %58 = stablehlo.broadcast_in_dim %c_17, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %59 = stablehlo.compare NE, %53, %58, UNSIGNED : (tensor<1x16x4x1xui32>, tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xi1>
    %60 = stablehlo.and %57, %59 : tensor<1x16x4x1xi1>
    %c_18 = stablehlo.constant dense<0> : tensor<ui32>
    %61 = stablehlo.broadcast_in_dim %c_18, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %62 = stablehlo.compare EQ, %53, %61, UNSIGNED : (tensor<1x16x4x1xui32>, tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xi1>
    %c_19 = stablehlo.constant dense<4194304> : tensor<ui32>
    %63 = stablehlo.broadcast_in_dim %c_19, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %64 = stablehlo.compare LE, %55, %63, UNSIGNED : (tensor<1x16x4x1xui32>, tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xi1>
    %65 = stablehlo.and %62, %64 : tensor<1x16x4x1xi1>
    %66 = stablehlo.not %65 : tensor<1x16x4x1xi1>
    %67 = stablehlo.and %60, %66 : tensor<1x16x4x1xi1>
    %c_20 = stablehlo.constant dense<1> : tensor<ui32>
    %68 = stablehlo.broadcast_in_dim %c_20, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %69 = stablehlo.add %53, %68 : tensor<1x16x4x1xui32>
    %70 = call @_where_1(%67, %69, %53) : (tensor<1x16x4x1xi1>, tensor<1x16x4x1xui32>, tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xui32>
    %71 = stablehlo.convert %70 : (tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xui8>
    %72 = stablehlo.convert %71 : (tensor<1x16x4x1xui8>) -> tensor<1x16x4x1xui32>
    %c_21 = stablehlo.constant dense<23> : tensor<ui32>
    %73 = stablehlo.broadcast_in_dim %c_21, dims = [] : (tensor<ui32>) -> tensor<1x16x4x1xui32>
    %74 = stablehlo.shift_left %72, %73 : tensor<1x16x4x1xui32>
    %75 = stablehlo.bitcast_convert %74 : (tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xf32>
    %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %76 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<1x16x4x1xf32>
    %77 = stablehlo.compare EQ, %75, %76, FLOAT : (tensor<1x16x4x1xf32>, tensor<1x16x4x1xf32>) -> tensor<1x16x4x1xi1>
    %cst_23 = stablehlo.constant dense<5.87747175E-39> : tensor<f32>
    %78 = call @_where_2(%77, %cst_23, %75) : (tensor<1x16x4x1xi1>, tensor<f32>, tensor<1x16x4x1xf32>) -> tensor<1x16x4x1xf32>
    %79 = stablehlo.broadcast_in_dim %78, dims = [0, 1, 2, 3] : (tensor<1x16x4x1xf32>) -> tensor<1x16x4x32xf32>
    %80 = stablehlo.divide %45, %79 : tensor<1x16x4x32xf32>
    %cst_24 = stablehlo.constant dense<-4.480000e+02> : tensor<f32>
    %cst_25 = stablehlo.constant dense<4.480000e+02> : tensor<f32>
    %81 = call @clip_3(%80, %cst_24, %cst_25) : (tensor<1x16x4x32xf32>, tensor<f32>, tensor<f32>) -> tensor<1x16x4x32xf32>
    %82 = stablehlo.convert %81 : (tensor<1x16x4x32xf32>) -> tensor<1x16x4x32xf8E4M3FN>
    %83 = stablehlo.reshape %82 : (tensor<1x16x4x32xf8E4M3FN>) -> tensor<1x16x128xf8E4M3FN>
    %84 = stablehlo.reshape %71 : (tensor<1x16x4x1xui8>) -> tensor<1x16x4xui8>
    %85 = stablehlo.bitcast_convert %84 : (tensor<1x16x4xui8>) -> tensor<1x16x4xf8E8M0FNU>
    %86 = call @_scaled_matmul(%42, %83, %44, %85) : (tensor<1x32x128xf8E4M3FN>, tensor<1x16x128xf8E4M3FN>, tensor<1x32x4xf8E8M0FNU>, tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32>
    %87 = stablehlo.reshape %86 : (tensor<1x32x16xf32>) -> tensor<32x16xf32>
    return %87 : tensor<32x16xf32>
  }
  func.func private @_where(%arg0: tensor<1x32x4x1xi1>, %arg1: tensor<1x32x4x1xui32>, %arg2: tensor<1x32x4x1xui32>) -> tensor<1x32x4x1xui32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x32x4x1xi1>, tensor<1x32x4x1xui32>
    return %0 : tensor<1x32x4x1xui32>
  }
  func.func private @_where_0(%arg0: tensor<1x32x4x1xi1>, %arg1: tensor<f32>, %arg2: tensor<1x32x4x1xf32>) -> tensor<1x32x4x1xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x32x4x1xf32>
    %1 = stablehlo.select %arg0, %0, %arg2 : tensor<1x32x4x1xi1>, tensor<1x32x4x1xf32>
    return %1 : tensor<1x32x4x1xf32>
  }
  func.func private @clip(%arg0: tensor<1x32x4x32xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<1x32x4x32xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x32x4x32xf32>
    %1 = stablehlo.maximum %0, %arg0 : tensor<1x32x4x32xf32>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x32x4x32xf32>
    %3 = stablehlo.minimum %2, %1 : tensor<1x32x4x32xf32>
    return %3 : tensor<1x32x4x32xf32>
  }
  func.func private @_where_1(%arg0: tensor<1x16x4x1xi1>, %arg1: tensor<1x16x4x1xui32>, %arg2: tensor<1x16x4x1xui32>) -> tensor<1x16x4x1xui32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<1x16x4x1xi1>, tensor<1x16x4x1xui32>
    return %0 : tensor<1x16x4x1xui32>
  }
  func.func private @_where_2(%arg0: tensor<1x16x4x1xi1>, %arg1: tensor<f32>, %arg2: tensor<1x16x4x1xf32>) -> tensor<1x16x4x1xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x16x4x1xf32>
    %1 = stablehlo.select %arg0, %0, %arg2 : tensor<1x16x4x1xi1>, tensor<1x16x4x1xf32>
    return %1 : tensor<1x16x4x1xf32>
  }
  func.func private @clip_3(%arg0: tensor<1x16x4x32xf32>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<1x16x4x32xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1x16x4x32xf32>
    %1 = stablehlo.maximum %0, %arg0 : tensor<1x16x4x32xf32>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<f32>) -> tensor<1x16x4x32xf32>
    %3 = stablehlo.minimum %2, %1 : tensor<1x16x4x32xf32>
    return %3 : tensor<1x16x4x32xf32>
  }
  func.func private @_scaled_matmul(%arg0: tensor<1x32x128xf8E4M3FN>, %arg1: tensor<1x16x128xf8E4M3FN>, %arg2: tensor<1x32x4xf8E8M0FNU>, %arg3: tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32> {
    %0 = stablehlo.custom_call @__op$block_scaled_dot(%arg0, %arg1, %arg2, %arg3) {api_version = 2 : i32, backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [0], \22rhs_batch_dimensions\22: [0], \22dequantize_type\22: \22F32\22}}", operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>], result_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]} : (tensor<1x32x128xf8E4M3FN>, tensor<1x16x128xf8E4M3FN>, tensor<1x32x4xf8E8M0FNU>, tensor<1x16x4xf8E8M0FNU>) -> tensor<1x32x16xf32>
    return %0 : tensor<1x32x16xf32>
  }
}
