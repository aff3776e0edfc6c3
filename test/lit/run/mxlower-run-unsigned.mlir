// Unsigned integers run on the LLVM backend as on XLA (the LLVM backend refused every module
// with them); the ops whose meaning depends on signedness included.
// RUN: mxlower-run %s --backend=llvm -i %S/../Inputs/unsigned_ops.npz | FileCheck %s
// RUN: mxlower-run %s --backend=xla -i %S/../Inputs/unsigned_ops.npz | FileCheck %s
// CHECK: %0 = dense<[100, 0, 85, 0]> : tensor<4xui8>
// CHECK: %1 = dense<[0, 7, 0, 9]> : tensor<4xui8>
// CHECK: %2 = dense<[true, false, true, false]> : tensor<4xi1>
// CHECK: %3 = dense<[200.0, 7.0, 255.0, 9.0]> : tensor<4xf32>
// CHECK: %4 = dense<[200, 9, 255, 200]> : tensor<4xui8>
// CHECK: %5 = dense<[100, 3, 127, 4]> : tensor<4xui8>
// CHECK: %6 = dense<[202, 16, 2, 209]> : tensor<4xui8>

func.func @main(%a: tensor<4xui8>, %b: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xui8>, tensor<4xi1>, tensor<4xf32>, tensor<4xui8>, tensor<4xui8>, tensor<4xui8>) {
  %0 = stablehlo.divide %a, %b : tensor<4xui8>
  %1 = stablehlo.remainder %a, %b : tensor<4xui8>
  %2 = stablehlo.compare GT, %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  %3 = stablehlo.convert %a : (tensor<4xui8>) -> tensor<4xf32>
  %4 = stablehlo.maximum %a, %b : tensor<4xui8>
  %one = stablehlo.constant dense<1> : tensor<4xui8>
  %5 = stablehlo.shift_right_logical %a, %one : tensor<4xui8>
  %6 = stablehlo.add %a, %b : tensor<4xui8>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xui8>, tensor<4xui8>, tensor<4xi1>, tensor<4xf32>, tensor<4xui8>, tensor<4xui8>, tensor<4xui8>
}
