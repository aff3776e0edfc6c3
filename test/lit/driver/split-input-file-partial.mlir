// With --split-input-file the chunks that succeed are printed, separated by '// -----' (an empty
// chunk for each one that fails), even when another chunk fails -- as mlir-opt does; the exit
// code is still 1, and an output file is written only when every chunk succeeds.

// RUN: not mxlower-opt %s --split-input-file 2>%t.err | FileCheck %s
// RUN: FileCheck %s --input-file=%t.err --check-prefix=ERR

// CHECK-LABEL: func.func @first
// CHECK-NEXT:    return
// CHECK:       // -----
// CHECK-NEXT:  // -----
// CHECK-NEXT:  module {
// CHECK-NEXT:    func.func @third
// CHECK-NOT:   bogus
// ERR: split-input-file-partial.mlir:[[# @LINE + 11]]:23: error: custom op 'bogus' is unknown

// RUN: echo "keep me" > %t.out
// RUN: not mxlower-opt %s --split-input-file -o %t.out
// RUN: FileCheck %s --input-file=%t.out --check-prefix=UNTOUCHED
// UNTOUCHED: keep me

func.func @first() { return }

// -----

func.func @second() { bogus }

// -----

func.func @third() { return }
