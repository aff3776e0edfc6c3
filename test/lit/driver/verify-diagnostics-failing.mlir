// RUN: not mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-test-diagnostics 2>&1 | FileCheck %s

// --verify-diagnostics fails (exit 1) on an unexpected diagnostic and on an expected one that
// is not produced, and says which, at the right place.

// CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 2]]:3: error: unexpected error: nobody expects this
func.func @unexpected() {
  return {mxlower.test_diag = "error: nobody expects this"}
}

// -----

func.func @missing() {
  // CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 1]]:6: error: expected error "never emitted" was not produced
  // expected-error@+1 {{never emitted}}
  return
}

// -----

func.func @wrong_severity() {
  // CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 2]]:3: error: unexpected warning: a warning
  // CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 2]]:6: error: expected error "a warning" was not produced
  return {mxlower.test_diag = "warning: a warning"}
  // expected-error@-1 {{a warning}}
}

// -----

func.func @wrong_line() {
  // CHECK: error: unexpected remark: off by one
  // expected-remark@+2 {{off by one}}
  return {mxlower.test_diag = "remark: off by one"}
}
// CHECK: error: expected remark "off by one" was not produced

// -----

// CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 1]]:4: error: expected-* '@below' has no line below it
// expected-error@below {{dangling}}

// -----

// A regex that is not one is a located error, never a Python warning.
func.func @bad_regex() {
  // CHECK-NOT: Warning
  // CHECK: verify-diagnostics-failing.mlir:[[# @LINE + 1]]:6: error: {{.*}}-re: invalid regex {{.*}}: unknown character class '[:bogus:]'
  // expected-error-re@+1 {{{{[[:bogus:]]}}}}
  return {mxlower.test_diag = "error: x"}
}
