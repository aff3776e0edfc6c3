// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-pack-subbyte-args='lower=false' | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-pack-subbyte-args | FileCheck %s --check-prefix=LOWER

// f4/f6 arguments and results become packed ui8 (docs/semantics.md section 8: LSB-first bit
// stream, two f4 per byte, four f6 per three bytes) with unpack/pack at the boundary.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[P:.*]]: tensor<4x32xui8>, %[[W:.*]]: tensor<2xf32>) -> (tensor<4x48xui8>, tensor<2xf32>)
// CHECK: %[[U:.*]] = "mx.unpack"(%[[P]]) {axis = 1 : i64} : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
// CHECK: %[[F:.*]] = stablehlo.convert %[[U]] : (tensor<4x64xf4E2M1FN>) -> tensor<4x64xf32>
// CHECK: %[[G:.*]] = stablehlo.convert %[[F]] : (tensor<4x64xf32>) -> tensor<4x64xf6E2M3FN>
// CHECK: %[[R:.*]] = "mx.pack"(%[[G]]) {axis = 1 : i64} : (tensor<4x64xf6E2M3FN>) -> tensor<4x48xui8>
// CHECK: return %[[R]], %[[W]] : tensor<4x48xui8>, tensor<2xf32>

// Lowered at once: shifts and masks, no mx ops left.
// LOWER-LABEL: func.func @main
// LOWER-SAME: (%{{.*}}: tensor<4x32xui8>, %{{.*}}: tensor<2xf32>) -> (tensor<4x48xui8>, tensor<2xf32>)
// LOWER: stablehlo.shift_right_logical
// LOWER: stablehlo.bitcast_convert %{{.*}} : (tensor<4x64xui4>) -> tensor<4x64xf4E2M1FN>
// LOWER: stablehlo.constant dense<[0, 6, 12, 18]> : tensor<4xi32>
// LOWER: stablehlo.shift_left
// LOWER-NOT: mx.
// LOWER: return
func.func @main(%x: tensor<4x64xf4E2M1FN>, %w: tensor<2xf32>) -> (tensor<4x64xf6E2M3FN>, tensor<2xf32>) {
  %0 = stablehlo.convert %x : (tensor<4x64xf4E2M1FN>) -> tensor<4x64xf32>
  %1 = stablehlo.convert %0 : (tensor<4x64xf32>) -> tensor<4x64xf6E2M3FN>
  return %1, %w : tensor<4x64xf6E2M3FN>, tensor<2xf32>
}

// -----

// Private functions keep their types; calls of rewritten ones are packed and unpacked
// (here pack(unpack(x)) folds to x on both sides of the call).
// CHECK-LABEL: func.func private @inner
// CHECK-SAME: (%{{.*}}: tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN>
// CHECK-LABEL: func.func @id
// CHECK-SAME: (%[[P:.*]]: tensor<6xui8>) -> tensor<6xui8>
// CHECK-LABEL: func.func @caller
// CHECK-SAME: (%[[X:.*]]: tensor<6xui8>) -> tensor<6xui8>
// CHECK-NEXT: %[[C:.*]] = call @id(%[[X]]) : (tensor<6xui8>) -> tensor<6xui8>
// CHECK-NEXT: return %[[C]] : tensor<6xui8>
func.func private @inner(%x: tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN> {
  return %x : tensor<8xf6E3M2FN>
}
func.func @id(%x: tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN> {
  %0 = func.call @inner(%x) : (tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN>
  return %0 : tensor<8xf6E3M2FN>
}
func.func @caller(%x: tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN> {
  %0 = func.call @id(%x) : (tensor<8xf6E3M2FN>) -> tensor<8xf6E3M2FN>
  return %0 : tensor<8xf6E3M2FN>
}

// -----

// 8-bit types and wide types are left alone.
// CHECK-LABEL: func.func @wide
// CHECK-SAME: (%{{.*}}: tensor<3xf8E4M3FN>, %{{.*}}: tensor<3xf8E8M0FNU>) -> tensor<3xf32>
func.func @wide(%x: tensor<3xf8E4M3FN>, %s: tensor<3xf8E8M0FNU>) -> tensor<3xf32> {
  %0 = stablehlo.convert %x : (tensor<3xf8E4M3FN>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// expected-error @+1 {{cannot pack argument 0 of @odd (tensor<4x7xf4E2M1FN>): 7 values of f4E2M1FN (4 bits) along dimension 1 do not fill whole bytes (28 bits)}}
func.func @odd(%x: tensor<4x7xf4E2M1FN>) -> tensor<4x7xf4E2M1FN> {
  return %x : tensor<4x7xf4E2M1FN>
}

// -----

// expected-error @+1 {{cannot pack result 0 of @six (tensor<6xf6E2M3FN>): 6 values of f6E2M3FN (6 bits) along dimension 0 do not fill whole bytes (36 bits)}}
func.func @six(%x: tensor<6xf32>) -> tensor<6xf6E2M3FN> {
  %0 = stablehlo.convert %x : (tensor<6xf32>) -> tensor<6xf6E2M3FN>
  return %0 : tensor<6xf6E2M3FN>
}

// -----

// expected-error @+1 {{cannot pack argument 0 of @scalar (tensor<f4E2M1FN>): a rank-0 tensor cannot be packed}}
func.func @scalar(%x: tensor<f4E2M1FN>) -> tensor<f4E2M1FN> {
  return %x : tensor<f4E2M1FN>
}
