// RUN: not mxlower-opt %s --split-input-file --mxlower-test-diagnostics 2>&1 | FileCheck %s
// RUN: not mxlower-opt %s --split-input-file --mxlower-test-diagnostics -o %t.out
// RUN: not test -e %t.out

// Diagnostics carry the line numbers of the original file, not of the chunk, and a failing
// chunk fails the whole run: nothing is written.

func.func @ok() {
  return
}

// -----

// CHECK: split-input-file-locations.mlir:[[# @LINE + 2]]:3: error: boom in the second chunk
func.func @second() {
  return {mxlower.test_diag = "error: boom in the second chunk"}
}

// -----

// CHECK: split-input-file-locations.mlir:[[# @LINE + 2]]:10: error: use of undeclared SSA value name
func.func @third(%x: i32) -> i32 {
  return %y : i32
}
