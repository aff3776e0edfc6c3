// Bad input to mxlower-run: a clear one-line error and exit code 1.

// RUN: not mxlower-run %s -f nope 2>&1 | FileCheck %s --check-prefix=NOFUNC
// NOFUNC: mxlower-run: error: no function @nope in the module (functions: @main, @helper)

// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' -i %inputs/jax_scaled_matmul_mxfp8.inputs.npz 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: mxlower-run: error: @main takes 1 argument but 4 input arrays were given

// RUN: %PYTHON -c "import numpy as np; np.save('%t.f64.npy', np.zeros((4, 64)))"
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' -i %t.f64.npy 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: mxlower-run: error: argument #0 of @main is tensor<4x64xf32> but {{.*}}.f64.npy holds f64 (float64) data (expected float32)

// RUN: %PYTHON -c "import numpy as np; np.save('%t.shape.npy', np.zeros((64, 4), np.float32))"
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' -i %t.shape.npy 2>&1 | FileCheck %s --check-prefix=SHAPE
// SHAPE: mxlower-run: error: argument #0 of @main is tensor<4x64xf32> but {{.*}}.shape.npy has shape (64, 4)

// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' -i %t.missing.npy 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mxlower-run: error: could not open input file '{{.*}}.missing.npy': no such file

// Without a pipeline the mx ops are still there.
// RUN: not mxlower-run %s 2>&1 | FileCheck %s --check-prefix=LEFT
// LEFT: mxlower-run: error: the module still contains mx.quantize ops, which no backend runs; lower them first, e.g. with the pipeline 'builtin.module(mxlower-mx-to-stablehlo)'

// A bad pipeline and a failing pass are reported like mxlower-opt does.
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo{scale-mode=up})' 2>&1 | FileCheck %s --check-prefix=PIPE
// PIPE: <pass-pipeline>:1:16: error: option 'scale-mode' of 'mxlower-mx-to-stablehlo' has invalid value 'up'
// RUN: not mxlower-run %inputs/run_bad_block_size.mlir -p 'builtin.module(mxlower-mx-to-stablehlo)' 2>&1 | FileCheck %s --check-prefix=PASS
// PASS: run_bad_block_size.mlir:5:12: error: 'mx.quantize' op blocked dimension 1 of the input has size 64, which block size 48 does not divide
// PASS-NEXT: %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 48 : i64}
// PASS-NEXT: ^

func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN> {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  %r = call @helper(%q) : (tensor<4x64xf8E4M3FN>) -> tensor<4x64xf8E4M3FN>
  return %r : tensor<4x64xf8E4M3FN>
}
func.func private @helper(%q: tensor<4x64xf8E4M3FN>) -> tensor<4x64xf8E4M3FN> {
  return %q : tensor<4x64xf8E4M3FN>
}
