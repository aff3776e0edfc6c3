// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-test-diagnostics
// RUN: not mxlower-opt %s --split-input-file --mxlower-test-diagnostics 2>&1 | FileCheck %s --check-prefix=PLAIN

// Every designator form of MLIR's --verify-diagnostics: same line, @+N, @-N, @above, @below.

func.func @same_line() {
  return {mxlower.test_diag = "error: on this line"} // expected-error {{on this line}}
}

// -----

func.func @offsets(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-warning@+1 {{two below}}
  %0 = stablehlo.add %x, %x {mxlower.test_diag = "warning: two below"} : tensor<2xf32>
  %1 = stablehlo.add %0, %0 {mxlower.test_diag = "remark: one above"} : tensor<2xf32>
  // expected-remark@-1 {{one above}}
  return %1 : tensor<2xf32>
}

// -----

// expected-error@below {{function below}}
func.func @below() attributes {mxlower.test_diag = "error: function below"} {
  return
}

// -----

func.func @above() attributes {mxlower.test_diag = "warning: function above"} {
  // expected-warning@above {{function above}}
  return
}

// -----

func.func @regex() {
  // expected-error-re@+1 {{value {{[0-9]+}} is {{(bad|worse)$}}}}
  return {mxlower.test_diag = "error: value 42 is bad"}
}

// -----

// -re pieces are MLIR's (POSIX extended) regexes: bracket classes, a ']' first in a set, a
// backslash in a set is literal (Python's syntax printed a FutureWarning for these).
func.func @regex_posix() {
  // expected-error-re@+1 {{{{[[:alpha:]]+}} {{[[:digit:]]+}} {{[]x]}}{{[\]+}} end}}
  return {mxlower.test_diag = "error: value 42 ]\\ end"}
}

// -----

// A parse error is a diagnostic like any other.
func.func @parse_error(%x: i32) -> i32 {
  // expected-error@+1 {{use of undeclared SSA value name}}
  return %y : i32
}

// PLAIN: verify-diagnostics.mlir:7:3: error: on this line
