// RUN: mxlower-opt %s --split-input-file --mxlower-test-diagnostics='tag-ops=true prefix=seen ops=func.func' | FileCheck %s

// CHECK-LABEL: func.func @first
// CHECK-SAME: mxlower.visited = "seen"
func.func @first() {
  return
}

// -----

// CHECK: // -----
// CHECK-LABEL: func.func @second
// CHECK-SAME: mxlower.visited = "seen"
func.func @second() {
  return
}
