// RUN: mxlower-opt %s --split-input-file --mxlower-legalize-xla-mx --verify-diagnostics | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --mxlower-legalize-xla-mx='scale-mode=rceil' --verify-diagnostics | FileCheck %s --check-prefix=RCEIL

// CHECK-LABEL: func.func @quantize_two_results
// CHECK: %[[Q:.*]]:2 = "mx.quantize"(%arg0) {axis = 1 : i64, block_size = 32 : i64, format = "mxfp8_e4m3", scale_mode = "nearest"} : (tensor<8x128xf32>) -> (tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>)
// CHECK-NOT: custom_call
// CHECK: return %[[Q]]#0, %[[Q]]#1
// RCEIL-LABEL: func.func @quantize_two_results
// RCEIL: scale_mode = "rceil"
func.func @quantize_two_results(%x: tensor<8x128xf32>) -> (tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>) {
  %q, %s = stablehlo.custom_call @__op$quantize(%x) : (tensor<8x128xf32>) -> (tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>)
  return %q, %s : tensor<8x128xf8E4M3FN>, tensor<8x4xf8E8M0FNU>
}

// -----

// A tuple result (XLA's HLO form): get_tuple_element users read the mx results directly.
// f4E2M1FN elements with f8E4M3FN scales are nvfp4 (no scale_mode).

// CHECK-LABEL: func.func @quantize_tuple_nvfp4
// CHECK: %[[Q:.*]]:2 = "mx.quantize"(%arg0) {axis = 2 : i64, block_size = 16 : i64, format = "nvfp4"} : (tensor<2x4x64xbf16>) -> (tensor<2x4x64xf4E2M1FN>, tensor<2x4x4xf8E4M3FN>)
// CHECK-NOT: get_tuple_element
// CHECK: return %[[Q]]#1, %[[Q]]#0
func.func @quantize_tuple_nvfp4(%x: tensor<2x4x64xbf16>) -> (tensor<2x4x4xf8E4M3FN>, tensor<2x4x64xf4E2M1FN>) {
  %t = stablehlo.custom_call @__op$quantize(%x) : (tensor<2x4x64xbf16>) -> tuple<tensor<2x4x64xf4E2M1FN>, tensor<2x4x4xf8E4M3FN>>
  %q = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2x4x64xf4E2M1FN>, tensor<2x4x4xf8E4M3FN>>) -> tensor<2x4x64xf4E2M1FN>
  %s = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2x4x64xf4E2M1FN>, tensor<2x4x4xf8E4M3FN>>) -> tensor<2x4x4xf8E4M3FN>
  return %s, %q : tensor<2x4x4xf8E4M3FN>, tensor<2x4x64xf4E2M1FN>
}

// -----

// CHECK-LABEL: func.func @dequantize
// CHECK: "mx.dequantize"(%arg0, %arg1) {axis = 1 : i64, block_size = 64 : i64, format = "mxfp4_e2m1"} : (tensor<8x128xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<8x128xbf16>
func.func @dequantize(%q: tensor<8x128xf4E2M1FN>, %s: tensor<8x2xf8E8M0FNU>) -> tensor<8x128xbf16> {
  %0 = stablehlo.custom_call @__op$dequantize(%q, %s) : (tensor<8x128xf4E2M1FN>, tensor<8x2xf8E8M0FNU>) -> tensor<8x128xbf16>
  return %0 : tensor<8x128xbf16>
}

// -----

// What jax.nn.scaled_matmul emits for CUDA: rank 3, batch 0, contracting 2, JSON backend_config.

// CHECK-LABEL: func.func @block_scaled_dot_jax
// CHECK: "mx.scaled_dot"(%arg0, %arg2, %arg1, %arg3)
// CHECK-SAME: compute_type = bf16
// CHECK-SAME: dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>
// CHECK-SAME: lhs_block_size = 32 : i64, lhs_format = "mxfp8_e4m3", rhs_block_size = 32 : i64, rhs_format = "mxfp8_e5m2"
// CHECK-SAME: -> tensor<2x16x8xbf16>
func.func @block_scaled_dot_jax(%a: tensor<2x16x128xf8E4M3FN>, %b: tensor<2x8x128xf8E5M2>, %as: tensor<2x16x4xf8E8M0FNU>, %bs: tensor<2x8x4xf8E8M0FNU>) -> tensor<2x16x8xbf16> {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) {api_version = 2 : i32, backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [0], \22rhs_batch_dimensions\22: [0], \22dequantize_type\22: \22BF16\22}}", operand_layouts = [dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>, dense<[2, 1, 0]> : tensor<3xindex>], result_layouts = [dense<[2, 1, 0]> : tensor<3xindex>]} : (tensor<2x16x128xf8E4M3FN>, tensor<2x8x128xf8E5M2>, tensor<2x16x4xf8E8M0FNU>, tensor<2x8x4xf8E8M0FNU>) -> tensor<2x16x8xbf16>
  return %0 : tensor<2x16x8xbf16>
}

// -----

// Three operands: only the lhs is quantized.  No backend_config: compute in f32.

// CHECK-LABEL: func.func @block_scaled_dot_plain_rhs
// CHECK: "mx.scaled_dot"(%arg0, %arg2, %arg1) {compute_type = f32, dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, lhs_block_size = 32 : i64, lhs_format = "mxfp8_e4m3"} : (tensor<16x256xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<32x256xf16>) -> tensor<16x32xf16>
func.func @block_scaled_dot_plain_rhs(%a: tensor<16x256xf8E4M3FN>, %b: tensor<32x256xf16>, %as: tensor<16x8xf8E8M0FNU>) -> tensor<16x32xf16> {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as) : (tensor<16x256xf8E4M3FN>, tensor<32x256xf16>, tensor<16x8xf8E8M0FNU>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

// Five operands: nvfp4 with a global scale; a bf16 global scale is converted to f32.

// CHECK-LABEL: func.func @block_scaled_dot_global_scale
// CHECK: %[[G:.*]] = stablehlo.convert %arg4 : (tensor<bf16>) -> tensor<f32>
// CHECK: "mx.scaled_dot"(%arg0, %arg2, %arg1, %arg3, %[[G]])
// CHECK-SAME: lhs_block_size = 16 : i64, lhs_format = "nvfp4", rhs_block_size = 16 : i64, rhs_format = "nvfp4"
func.func @block_scaled_dot_global_scale(%a: tensor<16x64xf4E2M1FN>, %b: tensor<8x64xf4E2M1FN>, %as: tensor<16x4xf8E4M3FN>, %bs: tensor<8x4xf8E4M3FN>, %g: tensor<bf16>) -> tensor<16x8xbf16> {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs, %g) : (tensor<16x64xf4E2M1FN>, tensor<8x64xf4E2M1FN>, tensor<16x4xf8E4M3FN>, tensor<8x4xf8E4M3FN>, tensor<bf16>) -> tensor<16x8xbf16>
  return %0 : tensor<16x8xbf16>
}

// -----

// An explicit block size with padded scales (XLA's cuDNN layout: rows padded, 8 blocks for
// K = 224 = 7 * 32): the scales are sliced to the operand's rows and ceil(K / 32) = 7 blocks.
// The backend_config is a dictionary here.

// CHECK-LABEL: func.func @block_scaled_dot_padded_scales
// CHECK-DAG: %[[LS:.*]] = stablehlo.slice %arg2 [0:4, 0:16, 0:7] : (tensor<4x128x8xf8E8M0FNU>) -> tensor<4x16x7xf8E8M0FNU>
// CHECK-DAG: %[[RS:.*]] = stablehlo.slice %arg3 [0:4, 0:32, 0:7] : (tensor<4x32x8xf8E8M0FNU>) -> tensor<4x32x7xf8E8M0FNU>
// CHECK: "mx.scaled_dot"(%arg0, %[[LS]], %arg1, %[[RS]])
// CHECK-SAME: lhs_block_size = 32 : i64
func.func @block_scaled_dot_padded_scales(%a: tensor<4x16x224xf8E4M3FN>, %b: tensor<4x32x224xf8E4M3FN>, %as: tensor<4x128x8xf8E8M0FNU>, %bs: tensor<4x32x8xf8E8M0FNU>) -> tensor<4x16x32xf32> {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = 32 : i64}}} : (tensor<4x16x224xf8E4M3FN>, tensor<4x32x224xf8E4M3FN>, tensor<4x128x8xf8E8M0FNU>, tensor<4x32x8xf8E8M0FNU>) -> tensor<4x16x32xf32>
  return %0 : tensor<4x16x32xf32>
}

// -----

// jax.lax.scaled_dot: the xla.scaled_dot composite with its dimension numbers.

// CHECK-LABEL: func.func @composite
// CHECK: "mx.scaled_dot"(%arg0, %arg2, %arg1, %arg3)
// CHECK-SAME: dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>
// CHECK-SAME: lhs_axis = 1 : i64, lhs_block_size = 32 : i64, lhs_format = "mxfp8_e4m3", rhs_axis = 0 : i64, rhs_block_size = 32 : i64, rhs_format = "mxfp8_e4m3"
// CHECK-NOT: stablehlo.composite
func.func @composite(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.composite "xla.scaled_dot" %a, %b, %as, %bs {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<4x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
func.func private @xla.scaled_dot(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.convert %a : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xf32>
  %1 = stablehlo.convert %b : (tensor<64x8xf8E4M3FN>) -> tensor<64x8xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// -----

// An unscaled operand of jax.lax.scaled_dot carries a constant all-ones scale: it becomes a
// plain operand.

// CHECK-LABEL: func.func @composite_plain_rhs
// CHECK: "mx.scaled_dot"(%arg0, %arg2, %arg1) {compute_type = f32
// CHECK-SAME: lhs_format = "mxfp8_e4m3"
// CHECK-NOT: rhs_format
func.func @composite_plain_rhs(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>) -> tensor<4x8xbf16> {
  %cst = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<1x8xbf16>
  %1 = stablehlo.convert %0 : (tensor<1x8xbf16>) -> tensor<1x8xf8E8M0FNU>
  %2 = stablehlo.composite "xla.scaled_dot" %a, %b, %as, %1 {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = bf16}, decomposition = @xla.scaled_dot} : (tensor<4x64xf8E4M3FN>, tensor<64x8xbf16>, tensor<4x2xf8E8M0FNU>, tensor<1x8xf8E8M0FNU>) -> tensor<4x8xbf16>
  return %2 : tensor<4x8xbf16>
}
func.func private @xla.scaled_dot(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<1x8xf8E8M0FNU>) -> tensor<4x8xbf16> {
  %0 = stablehlo.convert %a : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xbf16>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x64xbf16>, tensor<64x8xbf16>) -> tensor<4x8xbf16>
  return %1 : tensor<4x8xbf16>
}

// -----

// Neither operand MX-typed: not an MX form, so the composite (and its decomposition) stays.

// CHECK-LABEL: func.func @composite_without_mx_operands
// CHECK: stablehlo.composite "xla.scaled_dot"
func.func @composite_without_mx_operands(%a: tensor<4x64xbf16>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.composite "xla.scaled_dot" %a, %b, %as, %bs {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<4x64xbf16>, tensor<64x8xbf16>, tensor<4x2xf8E8M0FNU>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
func.func private @xla.scaled_dot(%a: tensor<4x64xbf16>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x64xbf16>, tensor<64x8xbf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Other custom calls are not touched.

// CHECK-LABEL: func.func @unrelated
// CHECK: stablehlo.custom_call @__op$something_else
func.func @unrelated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @__op$something_else(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Dynamic dimensions other than the last (blocked) one, as jax.export emits for a symbolic
// batch: the mx ops keep them.

// CHECK-LABEL: func.func @dynamic_batch
// CHECK: %[[Q:.*]]:2 = "mx.quantize"(%arg0) {{.*}} : (tensor<?x256xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>)
// CHECK: "mx.dequantize"(%[[Q]]#0, %[[Q]]#1) {{.*}} -> tensor<?x256xbf16>
func.func @dynamic_batch(%x: tensor<?x256xf32>) -> tensor<?x256xbf16> {
  %q, %s = stablehlo.custom_call @__op$quantize(%x) : (tensor<?x256xf32>) -> (tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>)
  %d = stablehlo.custom_call @__op$dequantize(%q, %s) : (tensor<?x256xf8E4M3FN>, tensor<?x8xf8E8M0FNU>) -> tensor<?x256xbf16>
  return %d : tensor<?x256xbf16>
}

// -----

func.func @dynamic_blocked_dimension(%x: tensor<4x?xf32>) {
  // expected-error @+1 {{@__op$quantize: the last (blocked) dimension of the input must be static, got tensor<4x?xf32>}}
  %q, %s = stablehlo.custom_call @__op$quantize(%x) : (tensor<4x?xf32>) -> (tensor<4x?xf8E4M3FN>, tensor<4x8xf8E8M0FNU>)
  return
}

// -----

func.func @dynamic_scales_blocks(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{@__op$quantize: the scales: the last (blocked) dimension must be static}}
  %q, %s = stablehlo.custom_call @__op$quantize(%x) : (tensor<?x64xf32>) -> (tensor<?x64xf8E4M3FN>, tensor<?x?xf8E8M0FNU>)
  return
}

// -----

func.func @bad_operand_counts(%a: tensor<16x64xf8E4M3FN>, %b: tensor<8x64xf8E4M3FN>, %x: tensor<4x64xf32>) {
  // expected-error @+1 {{@__op$block_scaled_dot: expects 3, 4 or 5 operands (lhs, rhs, lhs_scale[, rhs_scale[, global_scale]]), got 2}}
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b) : (tensor<16x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>) -> tensor<16x8xf32>
  // expected-error @+1 {{@__op$quantize: expects 1 operand (the input), got 2}}
  %1:2 = stablehlo.custom_call @__op$quantize(%x, %x) : (tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  // expected-error @+1 {{@__op$quantize: expects 2 results (elements, scales) or one tuple of them, got tensor<4x64xf8E4M3FN>}}
  %2 = stablehlo.custom_call @__op$quantize(%x) : (tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN>
  return
}

// -----

func.func @bad_types(%x: tensor<10x256xf32>, %i: tensor<10x256xi8>, %s: tensor<10x8xf8E8M0FNU>, %d: tensor<10x256xf64>) {
  // XLA's own test uses f8E5M2 scales; they are no MX scale type.
  // expected-error @+1 {{@__op$quantize: the results: scale type f8E5M2 is not an MX scale type (f8E8M0FNU, or f8E4M3FN for nvfp4)}}
  %0:2 = stablehlo.custom_call @__op$quantize(%x) : (tensor<10x256xf32>) -> (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E5M2>)
  // expected-error @+1 {{@__op$dequantize: the operands: i8 elements with f8E8M0FNU scales are ambiguous (XLA scales the integer code, MX mxint8 scales code * 2^-6); write mx ops with format = "mxint8" instead}}
  %1 = stablehlo.custom_call @__op$dequantize(%i, %s) : (tensor<10x256xi8>, tensor<10x8xf8E8M0FNU>) -> tensor<10x256xf32>
  // expected-error @+1 {{@__op$quantize: the input must be f32, bf16 or f16, got f64}}
  %2:2 = stablehlo.custom_call @__op$quantize(%d) : (tensor<10x256xf64>) -> (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E8M0FNU>)
  // expected-error @+1 {{@__op$quantize: the results: elements of type f8E4M3FN with f8E4M3FN scales are no MX format}}
  %3:2 = stablehlo.custom_call @__op$quantize(%x) : (tensor<10x256xf32>) -> (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E4M3FN>)
  return
}

// -----

func.func @bad_shapes(%x: tensor<10x256xf32>, %a: tensor<16x64xf8E4M3FN>, %as: tensor<16x3xf8E8M0FNU>, %b: tensor<8x64xf8E4M3FN>, %bs: tensor<8x2xf8E8M0FNU>) {
  // expected-error @+1 {{@__op$quantize: the scales: 3 scales do not evenly block 256 elements along the last dimension}}
  %0:2 = stablehlo.custom_call @__op$quantize(%x) : (tensor<10x256xf32>) -> (tensor<10x256xf8E4M3FN>, tensor<10x3xf8E8M0FNU>)
  // expected-error @+1 {{@__op$block_scaled_dot: the lhs scales: 3 scales do not evenly block 64 elements along the last dimension}}
  %1 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) : (tensor<16x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<16x3xf8E8M0FNU>, tensor<8x2xf8E8M0FNU>) -> tensor<16x8xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: the result type tensor<8x16xf32> does not match the product's shape 16x8}}
  %2 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) : (tensor<16x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<16x3xf8E8M0FNU>, tensor<8x2xf8E8M0FNU>) -> tensor<8x16xf32>
  return
}

// -----

func.func @bad_rank(%a: tensor<1x2x16x64xf8E4M3FN>, %as: tensor<1x2x16x2xf8E8M0FNU>) {
  // expected-error @+1 {{@__op$block_scaled_dot: operands must both have rank 2 or 3, got tensor<1x2x16x64xf8E4M3FN> and tensor<1x2x16x64xf8E4M3FN>}}
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) : (tensor<1x2x16x64xf8E4M3FN>, tensor<1x2x16x64xf8E4M3FN>, tensor<1x2x16x2xf8E8M0FNU>, tensor<1x2x16x2xf8E8M0FNU>) -> tensor<1x2x16x16xf32>
  return
}

// -----

func.func @bad_backend_config(%a: tensor<16x224xf8E4M3FN>, %as: tensor<16x8xf8E8M0FNU>, %g: tensor<2xf32>) {
  // expected-error @+1 {{@__op$block_scaled_dot: unknown dequantize_type 'F8' (known: F32, BF16, F16)}}
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22dequantize_type\22: \22F8\22}}"} : (tensor<16x224xf8E4M3FN>, tensor<16x224xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<16x8xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config is not valid JSON (Expecting property name enclosed in double quotes at character 1)}}
  %1 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{block_scaled_dot_backend_config"} : (tensor<16x224xf8E4M3FN>, tensor<16x224xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<16x8xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: contracting dimension 224 of the lhs operand is not a multiple of block_size 64}}
  %2 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = 64 : i64}}} : (tensor<16x224xf8E4M3FN>, tensor<16x224xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<16x8xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: the global scale must be a scalar f32, bf16 or f16, got tensor<2xf32>}}
  %3 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as, %g) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = 32 : i64}}} : (tensor<16x224xf8E4M3FN>, tensor<16x224xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<16x8xf8E8M0FNU>, tensor<2xf32>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: lhs_batch_dimensions [1] is not supported for rank 2 operands (expected []: batch first, contracting last)}}
  %4 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [1]}}"} : (tensor<16x224xf8E4M3FN>, tensor<16x224xf8E4M3FN>, tensor<16x8xf8E8M0FNU>, tensor<16x8xf8E8M0FNU>) -> tensor<16x16xf32>
  return
}

// -----

func.func @bad_composite(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>, %cs: tensor<4x64xf8E8M0FNU>, %ds: tensor<2x64xf8E8M0FNU>) {
  // expected-error @+1 {{'xla.scaled_dot': the rhs operand has element type bf16 with a scale that is not a constant 1; only MX-typed operands may carry scales}}
  %0 = stablehlo.composite "xla.scaled_dot" %a, %b, %as, %bs {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<4x64xf8E4M3FN>, tensor<64x8xbf16>, tensor<4x2xf8E8M0FNU>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  // expected-error @+1 {{'xla.scaled_dot': the lhs scale blocks dimension 0, which is not a contracting dimension}}
  %1 = stablehlo.composite "xla.scaled_dot" %a, %b, %ds, %bs {composite_attributes = {dimension_numbers = [[[1], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot_1} : (tensor<4x64xf8E4M3FN>, tensor<64x8xbf16>, tensor<2x64xf8E8M0FNU>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  return
}
func.func private @xla.scaled_dot(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xbf16>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.convert %a : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xbf16>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x64xbf16>, tensor<64x8xbf16>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
func.func private @xla.scaled_dot_1(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xbf16>, %as: tensor<2x64xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.convert %a : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xbf16>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x64xbf16>, tensor<64x8xbf16>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

// mx ops already in the input are not this pass's business, malformed or not
// (mxlower-verify-mx reports them; mxlower-mx-to-stablehlo runs it first).

// CHECK-LABEL: func.func @mx_ops_are_left_alone
// CHECK: "mx.quantize"(%arg0) {block_size = 48 : i64, format = "mxfp8_e4m3"}
func.func @mx_ops_are_left_alone(%x: tensor<4x64xf32>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 48 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x1xf8E8M0FNU>)
  return
}

// -----

// Integer fields may be decimal strings, as protobuf's JSON writes int64 fields (XLA's
// backend_config printer does); fields mxlower does not read are ignored.

// CHECK-LABEL: func.func @proto_json_integers
// CHECK: "mx.scaled_dot"(%arg0, %arg1, %arg0, %arg1) {compute_type = f16, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>, lhs_block_size = 32 : i64
func.func @proto_json_integers(%a: tensor<2x16x64xf8E4M3FN>, %as: tensor<2x16x2xf8E8M0FNU>) -> tensor<2x16x16xf32> {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22operation_queue_id\22: \220\22, \22block_scaled_dot_backend_config\22: {\22block_size\22: \2232\22}, \22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: [\220\22], \22rhs_contracting_dimensions\22: [\222\22], \22dequantize_type\22: \22F16\22}}"} : (tensor<2x16x64xf8E4M3FN>, tensor<2x16x64xf8E4M3FN>, tensor<2x16x2xf8E8M0FNU>, tensor<2x16x2xf8E8M0FNU>) -> tensor<2x16x16xf32>
  return %0 : tensor<2x16x16xf32>
}

// -----

// Every backend_config field read has its type checked; a wrong one is named.

func.func @backend_config_field_types(%a: tensor<16x64xf8E4M3FN>, %as: tensor<16x2xf8E8M0FNU>) {
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config.dequantize_type' must be a string (F32, BF16, F16), got [1]}}
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22dequantize_type\22: [1]}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config.dequantize_type' must be a string (F32, BF16, F16), got 11}}
  %1 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {api_version = 4 : i32, backend_config = {scaled_dot_backend_config = {dequantize_type = 11 : i64}}} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config' must be an object, got 3}}
  %2 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: 3}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'block_scaled_dot_backend_config' must be an object, got ["block_size", 32]}}
  %3 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22block_scaled_dot_backend_config\22: [\22block_size\22, 32]}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'block_scaled_dot_backend_config.block_size' must be a positive integer, got "x"}}
  %4 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22block_scaled_dot_backend_config\22: {\22block_size\22: \22x\22}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'block_scaled_dot_backend_config.block_size' must be a positive integer, got 32.5}}
  %5 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22block_scaled_dot_backend_config\22: {\22block_size\22: 32.5}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'block_scaled_dot_backend_config.block_size' must be a positive integer, got true}}
  %6 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = true}}} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'block_scaled_dot_backend_config.block_size' must be a positive integer, got 0}}
  %7 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {api_version = 4 : i32, backend_config = {block_scaled_dot_backend_config = {block_size = 0 : i64}}} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config.lhs_batch_dimensions' must be a list of integers, got 0}}
  %8 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_batch_dimensions\22: 0}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config.rhs_contracting_dimensions' must be a list of integers, got [1, "a"]}}
  %9 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22rhs_contracting_dimensions\22: [1, \22a\22]}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config field 'scaled_dot_backend_config.lhs_contracting_dimensions' must be a list of integers, got [null]}}
  %10 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "{\22scaled_dot_backend_config\22: {\22lhs_contracting_dimensions\22: [null]}}"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  // expected-error @+1 {{@__op$block_scaled_dot: backend_config must be a JSON object}}
  %11 = stablehlo.custom_call @__op$block_scaled_dot(%a, %a, %as, %as) {backend_config = "[1]"} : (tensor<16x64xf8E4M3FN>, tensor<16x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<16x2xf8E8M0FNU>) -> tensor<16x16xf32>
  return
}

// -----

func.func @composite_dimension_numbers_types(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) {
  // expected-error @+1 {{'xla.scaled_dot': dimension_numbers must be [[lhs_contracting, rhs_contracting], [lhs_batch, rhs_batch]], got [[[1.000000e+00], [0]], [[], []]]}}
  %0 = stablehlo.composite "xla.scaled_dot" %a, %b, %as, %bs {composite_attributes = {dimension_numbers = [[[1.0], [0]], [[], []]], preferred_element_type = f32}, decomposition = @xla.scaled_dot} : (tensor<4x64xf8E4M3FN>, tensor<64x8xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32>
  return
}
func.func private @xla.scaled_dot(%a: tensor<4x64xf8E4M3FN>, %b: tensor<64x8xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %bs: tensor<2x8xf8E8M0FNU>) -> tensor<4x8xf32> {
  %0 = stablehlo.convert %a : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xf32>
  %1 = stablehlo.convert %b : (tensor<64x8xf8E4M3FN>) -> tensor<64x8xf32>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
