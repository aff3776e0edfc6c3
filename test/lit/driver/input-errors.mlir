// Bad input: a clear, location-tagged error, exit 1, no traceback, nothing written, the input
// never touched.

// RUN: not mxlower-opt %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mxlower-opt: error: could not open input file '{{.*}}does-not-exist.mlir': no such file

// RUN: not mxlower-opt %S 2>&1 | FileCheck %s --check-prefix=DIR
// DIR: mxlower-opt: error: could not open input file '{{.*}}': is a directory

// RUN: not mxlower-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=MALFORMED
// MALFORMED: input-errors.mlir:[[# @LINE + 18]]:25: error: expected ':'
// MALFORMED-NOT: Traceback

// RUN: echo "keep me" > %t.out
// RUN: not mxlower-opt %s --split-input-file -o %t.out
// RUN: FileCheck %s --input-file=%t.out --check-prefix=UNTOUCHED
// UNTOUCHED: keep me

// RUN: not mxlower-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=UNREG
// UNREG: input-errors.mlir:[[# @LINE + 16]]:3: error: operation 'foo.bar' of unregistered dialect 'foo' (pass --allow-unregistered-dialect to accept it)

// RUN: not mxlower-opt %s --split-input-file --allow-unregistered-dialect 2>&1 | FileCheck %s --check-prefix=ALLOWED
// ALLOWED-NOT: unregistered dialect

// RUN: not mxlower-opt %s --split-input-file 2>&1 | FileCheck %s --check-prefix=VERIFIER
// VERIFIER: input-errors.mlir:[[# @LINE + 17]]:8: error: {{('stablehlo.add' )?}}op requires the same element type for all operands and results

func.func @malformed(%x: i32) -> i32 {
  %0 = arith.addi %x, %x i32
  return %0 : i32
}

// -----

func.func @unregistered() {
  "foo.bar"() : () -> ()
  return
}

// -----

func.func @invalid(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  %0 = "stablehlo.add"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
