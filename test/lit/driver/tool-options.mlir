// RUN: mxlower-opt --version | FileCheck %s --check-prefix=VERSION
// VERSION: mxlower-opt {{[0-9]+\.[0-9]+}}
// VERSION: jax {{.*}}, jaxlib

// RUN: mxlower-opt --list-passes | FileCheck %s --check-prefix=LIST
// LIST: Passes:
// LIST: --mxlower-test-diagnostics {{ *}}- Test pass: report the diagnostic an op asks for
// LIST-NEXT: tag-ops=<bool> (default: false)
// LIST: ops=<list<str>> (default: )
// LIST: Pass Pipelines:

// Input from stdin, output to a file (written only on success).
// RUN: mxlower-opt - -o %t.mlir < %s
// RUN: FileCheck %s --input-file=%t.mlir --check-prefix=STDIN
// STDIN: func.func @g

// RUN: mxlower-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// GENERIC: "func.func"()

func.func @g() {
  return
}
