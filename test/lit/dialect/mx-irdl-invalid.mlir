// REQUIRES: llvm-tools
// RUN: mlir-opt --irdl-file=%S/../../../dialect/mx.irdl.mlir --allow-unregistered-dialect --split-input-file --verify-diagnostics %s

// Malformed mx ops that the IRDL definition rejects in upstream mlir-opt.  mxlower's verifier
// rejects every one of them too (test/python/test_dialect_irdl.py checks each chunk), with its
// own messages (test/lit/passes/mxlower-verify-mx.mlir).

func.func @unknown_op(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{unregistered operation 'mx.quantise' found in dialect ('mx') that does not allow unknown operations}}
  %q, %s = "mx.quantise"(%x) {format = "mxfp8_e4m3"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @missing_dot_dimension_numbers(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>, %b: tensor<8x64xf32>) {
  // expected-error @+1 {{'mx.scaled_dot' op attribute "dot_dimension_numbers" is expected but not provided}}
  %r = "mx.scaled_dot"(%a, %as, %b) {lhs_format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<8x64xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @quantize_one_result(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{op expects at least 2 results, but got 1}}
  %q = "mx.quantize"(%x) {format = "mxfp8_e4m3"} : (tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN>
  return
}

// -----

func.func @quantize_three_operands(%x: tensor<4x64xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{op expects at most 2 operands, but got 3}}
  %q, %s = "mx.quantize"(%x, %g, %g) {format = "nvfp4"} : (tensor<4x64xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  return
}

// -----

func.func @dequantize_one_operand(%q: tensor<4x64xf8E4M3FN>) {
  // expected-error @+1 {{op expects at least 2 operands, but got 1}}
  %d = "mx.dequantize"(%q) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xf32>
  return
}

// -----

func.func @unranked_input(%x: tensor<*xf32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3"} : (tensor<*xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return
}

// -----

func.func @scaled_dot_two_operands(%a: tensor<4x64xf8E4M3FN>, %as: tensor<4x2xf8E8M0FNU>) {
  // expected-error @+1 {{op expects at least 3 operands, but got 2}}
  %r = "mx.scaled_dot"(%a, %as) {lhs_format = "mxfp8_e4m3", dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) -> tensor<4x4xf32>
  return
}

// -----

func.func @pack_into_memref(%x: tensor<4x64xf4E2M1FN>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.memref'}}
  %p = "mx.pack"(%x) {axis = 1 : i64} : (tensor<4x64xf4E2M1FN>) -> memref<4x32xui8>
  return
}

// -----

func.func @unpack_two_results(%p: tensor<4x32xui8>) {
  // expected-error @+1 {{op expects exactly 1 results, but got 2}}
  %u, %v = "mx.unpack"(%p) {axis = 1 : i64} : (tensor<4x32xui8>) -> (tensor<4x64xf4E2M1FN>, tensor<4x64xf4E2M1FN>)
  return
}
