// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-stablehlo-control-flow-to-scf | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-stablehlo-to-llvm)' | FileCheck %s --check-prefix=LLVM

// stablehlo.if becomes scf.if on the extracted predicate; the branches move over unchanged
// (values from above stay captured), stablehlo.return becoming scf.yield.  The LLVM RUN line
// takes every positive case through mxlower-stablehlo-to-llvm, which runs this pass first
// (stablehlo-legalize-to-linalg leaves the conditionals, and upstream MLIR does not know them).

// CHECK-LABEL: func.func @if
// CHECK-SAME: (%[[P:.*]]: tensor<i1>, %[[X:.*]]: tensor<4xf32>)
// CHECK: %[[C:.*]] = tensor.extract %[[P]][] : tensor<i1>
// CHECK: %[[R:.*]]:2 = scf.if %[[C]] -> (tensor<4xf32>, tensor<i32>) {
// CHECK:   %[[A:.*]] = stablehlo.add %[[X]], %[[X]] : tensor<4xf32>
// CHECK:   scf.yield %[[A]], %{{.*}} : tensor<4xf32>, tensor<i32>
// CHECK: } else {
// CHECK:   %[[N:.*]] = stablehlo.negate %[[X]] : tensor<4xf32>
// CHECK:   scf.yield %[[N]], %{{.*}} : tensor<4xf32>, tensor<i32>
// CHECK: }
// CHECK: return %[[R]]#0, %[[R]]#1
// CHECK-NOT: stablehlo.if
// CHECK-NOT: stablehlo.return
// LLVM-LABEL: llvm.func @if
// LLVM: llvm.cond_br
// LLVM-NOT: stablehlo.
func.func @if(%p: tensor<i1>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<i32>) {
  %r:2 = "stablehlo.if"(%p) ({
    %a = stablehlo.add %x, %x : tensor<4xf32>
    %c = stablehlo.constant dense<1> : tensor<i32>
    stablehlo.return %a, %c : tensor<4xf32>, tensor<i32>
  }, {
    %n = stablehlo.negate %x : tensor<4xf32>
    %c = stablehlo.constant dense<2> : tensor<i32>
    stablehlo.return %n, %c : tensor<4xf32>, tensor<i32>
  }) : (tensor<i1>) -> (tensor<4xf32>, tensor<i32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<i32>
}

// -----

// stablehlo.case: branches 0 .. n-2 are cases, the last branch is the default region (it runs
// for an index out of range, as StableHLO's last branch does).  Nested conditionals and a
// conditional without results are rewritten too.
// CHECK-LABEL: func.func @case
// CHECK-SAME: (%[[I:.*]]: tensor<i32>, %[[P:.*]]: tensor<i1>, %[[X:.*]]: tensor<2xf32>)
// CHECK: %[[E:.*]] = tensor.extract %[[I]][] : tensor<i32>
// CHECK: %[[K:.*]] = arith.index_cast %[[E]] : i32 to index
// CHECK: %[[R:.*]] = scf.index_switch %[[K]] -> tensor<2xf32>
// CHECK: case 0 {
// CHECK:   %[[A:.*]] = stablehlo.abs %[[X]]
// CHECK:   scf.yield %[[A]]
// CHECK: case 1 {
// CHECK:   tensor.extract %[[P]][] : tensor<i1>
// CHECK:   %[[IN:.*]] = scf.if %{{.*}} -> (tensor<2xf32>) {
// CHECK:     scf.yield %[[X]]
// CHECK:   } else {
// CHECK:     stablehlo.negate
// CHECK:   scf.yield %[[IN]]
// CHECK: default {
// CHECK:   %[[S:.*]] = stablehlo.sqrt %[[X]]
// CHECK:   scf.yield %[[S]]
// CHECK: return %[[R]]
// LLVM-LABEL: llvm.func @case
// LLVM: llvm.switch
func.func @case(%i: tensor<i32>, %p: tensor<i1>, %x: tensor<2xf32>) -> tensor<2xf32> {
  %r = "stablehlo.case"(%i) ({
    %a = stablehlo.abs %x : tensor<2xf32>
    stablehlo.return %a : tensor<2xf32>
  }, {
    %in = "stablehlo.if"(%p) ({
      stablehlo.return %x : tensor<2xf32>
    }, {
      %n = stablehlo.negate %x : tensor<2xf32>
      stablehlo.return %n : tensor<2xf32>
    }) : (tensor<i1>) -> tensor<2xf32>
    stablehlo.return %in : tensor<2xf32>
  }, {
    %s = stablehlo.sqrt %x : tensor<2xf32>
    stablehlo.return %s : tensor<2xf32>
  }) : (tensor<i32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// A single-branch case is its default region.
// CHECK-LABEL: func.func @single
// CHECK: scf.index_switch %{{.*}} -> tensor<f32>
// CHECK-NEXT: default {
// LLVM-LABEL: llvm.func @single
func.func @single(%i: tensor<i32>, %x: tensor<f32>) -> tensor<f32> {
  %r = "stablehlo.case"(%i) ({
    stablehlo.return %x : tensor<f32>
  }) : (tensor<i32>) -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A malformed conditional is StableHLO's verifier's to reject, at the op, before the pass.
func.func @bad(%p: tensor<2xi1>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+3 {{operand should be rank 0 tensor but got rank 1}}
  // expected-error @+2 {{'stablehlo.if' op failed to infer returned types}}
  // expected-note @+1 {{see current operation}}
  %r = "stablehlo.if"(%p) ({
    stablehlo.return %x : tensor<4xf32>
  }, {
    stablehlo.return %x : tensor<4xf32>
  }) : (tensor<2xi1>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
