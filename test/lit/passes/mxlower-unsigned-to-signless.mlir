// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(stablehlo-legalize-to-linalg, mxlower-unsigned-to-signless)' | FileCheck %s

// After StableHLO's lowering to linalg (which puts the signedness into the arith ops:
// divui, cmpi ugt, uitofp, maxui), the unsigned types left at the boundaries become signless
// and the identity casts go; the LLVM backend then runs unsigned integers (it refused every
// module with them: "op was not bufferized ... unrealized_conversion_cast"), as
// test/lit/run/mxlower-run-unsigned.mlir checks against XLA.

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%{{.*}}: tensor<4xi8>, %{{.*}}: tensor<4xi8>) -> (tensor<4xi8>, tensor<4xi1>, tensor<4xf32>, tensor<4xi8>)
// CHECK-NOT: unrealized_conversion_cast
// CHECK-NOT: ui8
// CHECK: arith.divui
// CHECK: arith.cmpi ugt
// CHECK: arith.uitofp
// CHECK: arith.maxui
func.func @main(%a: tensor<4xui8>, %b: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xi1>, tensor<4xf32>, tensor<4xui8>) {
  %0 = stablehlo.divide %a, %b : tensor<4xui8>
  %1 = stablehlo.compare GT, %a, %b : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xi1>
  %2 = stablehlo.convert %a : (tensor<4xui8>) -> tensor<4xf32>
  %3 = stablehlo.maximum %a, %b : tensor<4xui8>
  return %0, %1, %2, %3 : tensor<4xui8>, tensor<4xi1>, tensor<4xf32>, tensor<4xui8>
}

// -----

// Calls and constants are retyped with the functions (the same bits: 4000000000 prints as
// -294967296 in i32).
// CHECK-LABEL: func.func private @callee(%{{.*}}: tensor<2xi32>) -> tensor<2xi32>
// CHECK-LABEL: func.func @caller
// CHECK: arith.constant dense<[-294967296, 1]> : tensor<2xi32>
// CHECK: call @callee(%{{.*}}) : (tensor<2xi32>) -> tensor<2xi32>
func.func private @callee(%a: tensor<2xui32>) -> tensor<2xui32> {
  return %a : tensor<2xui32>
}
func.func @caller() -> tensor<2xui32> {
  %c = stablehlo.constant dense<[4000000000, 1]> : tensor<2xui32>
  %0 = func.call @callee(%c) : (tensor<2xui32>) -> tensor<2xui32>
  return %0 : tensor<2xui32>
}

// -----

// An op whose meaning depends on the signedness, not lowered yet, is reported.
func.func @unlowered(%a: tensor<4xui8>) -> tensor<4xui8> {
  // expected-error @+1 {{'stablehlo.custom_call' on unsigned integers is still here}}
  %0 = stablehlo.custom_call @foo(%a) : (tensor<4xui8>) -> tensor<4xui8>
  return %0 : tensor<4xui8>
}
