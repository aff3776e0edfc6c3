// RUN: mxlower-opt %s --split-input-file --pass-pipeline='builtin.module(mxlower-mx-to-stablehlo)' --verify-diagnostics | FileCheck %s
// RUN: mxlower-opt %inputs/jax_scaled_matmul_mxfp8.mlir --pass-pipeline='builtin.module(mxlower-mx-to-stablehlo)' | FileCheck %s --check-prefix=JAX
// RUN: mxlower-opt %inputs/jax_lax_scaled_dot.mlir --mxlower-mx-to-stablehlo | FileCheck %s --check-prefix=COMPOSITE
// RUN: mxlower-opt %s --split-input-file --pass-pipeline='builtin.module(mxlower-mx-to-stablehlo{scale-mode=floor compute-type=f16})' --dump-pass-pipeline --verify-diagnostics -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXPANDED

// EXPANDED: builtin.module(mxlower-verify-mx, mxlower-legalize-xla-mx{scale-mode=nearest}, mxlower-decompose-mx{scale-mode=floor compute-type=f16}, canonicalize{{.*}}, cse, symbol-dce)

// The module jax.nn.scaled_matmul lowers to for CUDA (test/lit/Inputs): nothing MX is left.
// JAX-LABEL: func.func public @main
// JAX-NOT: custom_call
// JAX-NOT: mx.
// JAX: stablehlo.dot_general {{.*}} -> tensor<1x32x16xf32>

// jax.lax.scaled_dot: the composite is rewritten and its decomposition function dropped.
// COMPOSITE-LABEL: func.func public @main
// COMPOSITE-NOT: stablehlo.composite
// COMPOSITE: stablehlo.dot_general
// COMPOSITE-NOT: func.func private @xla.scaled_dot

// CHECK-LABEL: func.func @round_trip
// CHECK-NOT: mx.
// CHECK: stablehlo.reduce
// CHECK: return
func.func @round_trip(%x: tensor<4x64xf32>) -> tensor<4x64xbf16> {
  %q, %s = "mx.quantize"(%x) {format = "mxfp4_e2m1", block_size = 32 : i64, axis = 1 : i64, scale_mode = "nearest"} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp4_e2m1", block_size = 32 : i64, axis = 1 : i64} : (tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16>
  return %d : tensor<4x64xbf16>
}

// -----

func.func @bad(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.quantize' op unknown scale mode 'ceil' (known: floor, rceil, nearest)}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", scale_mode = "ceil"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

// The datatype ops take the same pipeline: nothing mx is left.
// CHECK-LABEL: func.func @datatype_round_trip
// CHECK-NOT: mx.
// CHECK: stablehlo.reduce
// CHECK: return
func.func @datatype_round_trip(%x: tensor<4x64xf32>, %r: tensor<4x64xui32>) -> (tensor<4x64xf32>, tensor<4x64xbf16>) {
  %z = "mx.sparse"(%x) {n = 4 : i64, m = 2 : i64} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = "mx.cast"(%z, %r) {number = "e3m4", scale = "e8m0_t32", roundmode = "stochastic", scalemode = "rceil"} : (tensor<4x64xf32>, tensor<4x64xui32>) -> tensor<4x64xf32>
  %c, %s = "mx.quantize"(%x) {number = "mxint4"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>)
  %d = "mx.dequantize"(%c, %s) {number = "int4", scale = "e8m0_t32"} : (tensor<4x64xi8>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16>
  return %y, %d : tensor<4x64xf32>, tensor<4x64xbf16>
}

// -----

func.func @bad_datatype(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op bad datatype: unknown number spec 'e4m3fx': expected a code}}
  %y = "mx.cast"(%x) {number = "e4m3fx"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}
