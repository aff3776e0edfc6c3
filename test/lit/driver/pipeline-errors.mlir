// Pass-pipeline errors point at the offending column, suggest close names, exit 1, and never
// show a Python traceback.

// RUN: not mxlower-opt %s -p 'builtin.module(cse, mxlower-test-diagnostic)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: <pass-pipeline>:1:21: error: unknown pass 'mxlower-test-diagnostic'; did you mean 'mxlower-test-diagnostics'?
// UNKNOWN-NEXT: builtin.module(cse, mxlower-test-diagnostic)
// UNKNOWN-NEXT: {{^                    \^$}}
// UNKNOWN-NOT: Traceback

// RUN: not mxlower-opt %s -p 'builtin.module(mxlower-test-diagnostics{bogus=1})' 2>&1 | FileCheck %s --check-prefix=BADOPT
// BADOPT: error: unknown option 'bogus' for 'mxlower-test-diagnostics' (its options: tag-ops, prefix, ops)

// RUN: not mxlower-opt %s -p 'builtin.module(mxlower-test-diagnostics{tag-ops=maybe})' 2>&1 | FileCheck %s --check-prefix=BADVAL
// BADVAL: error: option 'tag-ops' of 'mxlower-test-diagnostics' expects bool, got 'maybe'

// RUN: not mxlower-opt %s -p 'builtin.module(canonicalize{max-iterations=x})' 2>&1 | FileCheck %s --check-prefix=UPOPT
// UPOPT: <pass-pipeline>:1:16: error: invalid use of pass 'canonicalize'

// RUN: not mxlower-opt %s -p 'builtin.module(cse' 2>&1 | FileCheck %s --check-prefix=PAREN
// PAREN: <pass-pipeline>:1:19: error: expected ',' or ')' in the pass pipeline

// RUN: not mxlower-opt %s -p 'cse' 2>&1 | FileCheck %s --check-prefix=ANCHOR
// ANCHOR: error: expected '(' after 'cse': a pipeline must be anchored on an op, e.g. 'builtin.module(cse)'

// RUN: not mxlower-opt %s -p 'builtin.module(mxlower-test-diagnostics{prefix=a' 2>&1 | FileCheck %s --check-prefix=BRACE
// BRACE: <pass-pipeline>:1:40: error: expected '}' to close the pass options

// RUN: not mxlower-opt %s -p 'builtin.module(cse)' --canonicalize 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: mxlower-opt: error: --pass-pipeline cannot be combined with per-pass flags (--canonicalize)

// RUN: not mxlower-opt %s --cannonicalize 2>&1 | FileCheck %s --check-prefix=FLAG
// FLAG: mxlower-opt: error: unknown option or pass '--cannonicalize'; did you mean '--canonicalize'?

// RUN: not mxlower-opt %s -p 'builtin.module(one-shot-bufferize)' 2>&1 | FileCheck %s --check-prefix=HANDOVER
// HANDOVER: error: cannot hand the module to upstream MLIR for pass 'one-shot-bufferize': it still holds ops upstream MLIR does not know (stablehlo.add); lower them first: use the pipeline mxlower-stablehlo-to-llvm, or put stablehlo-legalize-to-linalg before this pass

// RUN: not mxlower-opt %s -p 'builtin.module(convert-to-llvm, stablehlo-legalize-to-linalg)' 2>&1 | FileCheck %s --check-prefix=BACK
// BACK: error: unknown pass 'stablehlo-legalize-to-linalg' in upstream MLIR (the module was handed over by 'convert-to-llvm')

// Errors inside an expanded named pipeline point at the pipeline's name in the user's text.
// RUN: not mxlower-opt %s -p 'builtin.module(convert-to-llvm, mxlower-stablehlo-to-llvm)' 2>&1 | FileCheck %s --check-prefix=NAMED
// NAMED: <pass-pipeline>:1:33: error: pass 'mxlower-stablehlo-control-flow-to-scf' runs on jaxlib's StableHLO stack, but the module was already handed to upstream MLIR by 'convert-to-llvm'
// NAMED-NEXT: builtin.module(convert-to-llvm, mxlower-stablehlo-to-llvm)
// NAMED-NEXT: {{^                                \^$}}

// A named pipeline (or a module-only pass) nested under func.func: one line saying it runs
// on the module (it used to be upstream SymbolDCE's complaint per function with an IR dump).
// RUN: not mxlower-opt %s -p 'builtin.module(func.func(mxlower-mx-to-stablehlo))' 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: <pass-pipeline>:1:26: error: 'mxlower-mx-to-stablehlo' runs on the module, not nested under 'func.func' (it ends with symbol-dce, which works on the module's symbol table): write builtin.module(mxlower-mx-to-stablehlo)
// NESTED-NEXT: builtin.module(func.func(mxlower-mx-to-stablehlo))
// NESTED-NEXT: {{^                         \^$}}
// NESTED-NOT: error
// RUN: not mxlower-opt %s -p 'builtin.module(func.func(cse, mxlower-expand-narrow-floats))' 2>&1 | FileCheck %s --check-prefix=NESTED2
// NESTED2: error: 'mxlower-expand-narrow-floats' runs on the module, not nested under 'func.func' (it rewrites function signatures and their calls together)

// The same upstream error in every function is printed at three places, then counted; a note
// holding the whole op is cut.
// RUN: not mxlower-opt %s -p 'builtin.module(func.func(symbol-dce))' 2>&1 | FileCheck %s --check-prefix=FLOOD
// FLOOD-COUNT-3: error: 'func.func' op  was scheduled to run under SymbolDCE
// FLOOD: note: the same error at 2 more places (lines {{[0-9]+}}, {{[0-9]+}}), not shown
// FLOOD-NOT: error

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @f1(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @f2(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @f3(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @f4(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
