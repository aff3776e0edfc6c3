// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-test-diagnostics
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-test-diagnostics='tag-ops=true prefix=seen ops=stablehlo.add,func.return' | FileCheck %s --check-prefix=TAG

// The test pass behind the driver tests: reports what `mxlower.test_diag` names, and with
// tag-ops marks the ops it visits (filtered by `ops`).

// TAG-LABEL: func.func @tags
// TAG-NOT: mxlower.visited
// TAG: stablehlo.add {{.*}} {mxlower.visited = "seen"}
// TAG-NEXT: stablehlo.multiply
// TAG-NOT: mxlower.visited
// TAG-NEXT: return {mxlower.visited = "seen"}
func.func @tags(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

func.func @severities(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-warning@+1 {{a warning}}
  %0 = stablehlo.add %x, %x {mxlower.test_diag = "warning: a warning"} : tensor<2xf32>
  // expected-remark@+1 {{a remark}}
  %1 = stablehlo.add %0, %0 {mxlower.test_diag = "remark: a remark"} : tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

func.func @errors_are_all_reported(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error@+1 {{first}}
  %0 = stablehlo.add %x, %x {mxlower.test_diag = "error: first"} : tensor<2xf32>
  // expected-error@+1 {{bad mxlower.test_diag severity 'fatal'}}
  %1 = stablehlo.add %0, %0 {mxlower.test_diag = "fatal: second"} : tensor<2xf32>
  return %1 : tensor<2xf32>
}
