// mxlower-run's inputs and outputs: seeded random inputs are reproducible, results saved with
// -o compare equal when the run is repeated, narrow types travel as raw codes, -f picks a
// function, and a comparison that fails exits with 2.

// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --seed 7 -o %t.npz | FileCheck %s
// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --seed 7 --compare %t.npz --no-print | FileCheck %s --check-prefix=SAME
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --seed 8 --compare %t.npz --no-print | FileCheck %s --check-prefix=DIFF
// RUN: %PYTHON -c "import numpy as np; z = np.load('%t.npz'); print(z['result0'].dtype, z['result0'].shape, z['result1'].dtype, z['result2'].dtype)" | FileCheck %s --check-prefix=CODES

// CHECK: %0 = dense<{{.*}}> : tensor<2x32xf4E2M1FN>
// CHECK: %1 = dense<{{.*}}> : tensor<2x1xf8E8M0FNU>
// CHECK: %2 = dense<{{.*}}> : tensor<2x32xbf16>
// SAME: // compare result #0 with {{.*}}[result0]: OK (bit-exact
// SAME: // compare result #1 with {{.*}}[result1]: OK (bit-exact
// SAME: // compare result #2 with {{.*}}[result2]: OK (bit-exact
// DIFF: // compare result #0 with {{.*}}: MISMATCH (bit-exact): {{[0-9]+}} of 64 elements differ
// CODES: uint8 (2, 32) uint8 uint16

// A function other than @main, with its inputs from .npy files; ints print as ints.
// RUN: %PYTHON -c "import numpy as np; np.save('%t.x.npy', np.array([[1.0, 2.0, -3.0, 0.5]], np.float32))"
// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' -f int8 -i %t.x.npy | FileCheck %s --check-prefix=INT
// The block maximum 3 gives E = floor(log2 3) - 0 = 1: codes round(x / 2 * 64).
// INT: %0 = dense<{{\[}}[32, 64, -96, 16]]> : tensor<1x4xi8>
// INT: %1 = dense<{{\[}}[2.0]]> : tensor<1x1xf8E8M0FNU>

func.func @main(%x: tensor<2x32xf32>) -> (tensor<2x32xf4E2M1FN>, tensor<2x1xf8E8M0FNU>, tensor<2x32xbf16>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp4_e2m1", block_size = 32 : i64, axis = 1 : i64, scale_mode = "rceil"} : (tensor<2x32xf32>) -> (tensor<2x32xf4E2M1FN>, tensor<2x1xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp4_e2m1", block_size = 32 : i64, axis = 1 : i64} : (tensor<2x32xf4E2M1FN>, tensor<2x1xf8E8M0FNU>) -> tensor<2x32xbf16>
  return %q, %s, %d : tensor<2x32xf4E2M1FN>, tensor<2x1xf8E8M0FNU>, tensor<2x32xbf16>
}

func.func @int8(%x: tensor<1x4xf32>) -> (tensor<1x4xi8>, tensor<1x1xf8E8M0FNU>) {
  %q, %s = "mx.quantize"(%x) {format = "mxint8", block_size = 4 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<1x4xf32>) -> (tensor<1x4xi8>, tensor<1x1xf8E8M0FNU>)
  return %q, %s : tensor<1x4xi8>, tensor<1x1xf8E8M0FNU>
}
