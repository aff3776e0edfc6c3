// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --print-bits | FileCheck %s
// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' | FileCheck %s --check-prefix=VALUES

// mxfp8_e4m3 (floor) on XLA:CPU, blocks of 8 along the last dimension, bit-exact with
// mxlower.reference: an all-zero block keeps -0 and gets scale 2^-127 (code 0x00); a block with
// a NaN gets scale 0xFF and +0 elements and dequantizes to NaN; a block of f32 subnormals
// (XLA:CPU flushes them in float arithmetic) is scaled by 2^127 exactly; next to -3e38
// (scale 2^119) the values 448 .. 500 round to +0 and -3e38 saturates to -448 (0xFE).

// CHECK: %0 = dense<{{\[}}[0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], [0x00, 0x80, 0x03, 0x40, 0x00, 0x80, 0x36, 0x11], [0x00, 0x00, 0x00, 0xFE, 0x00, 0x00, 0x00, 0x00]]> : tensor<4x8xf8E4M3FN>
// CHECK: %1 = dense<{{\[}}[0x00], [0xFF], [0x00], [0xF6]]> : tensor<4x1xf8E8M0FNU>
// CHECK: %2 = dense<{{\[}}[0x00000000, 0x80000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000], [0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000, 0x7FC00000], [0x00000000, 0x80000000, 0x00006000, 0x00800000, 0x00000000, 0x80000000, 0x00380000, 0x00024000], [0x00000000, 0x00000000, 0x00000000, 0xFF600000, 0x00000000, 0x00000000, 0x00000000, 0x00000000]]> : tensor<4x8xf32>

// VALUES: %1 = dense<{{\[}}[5.877472e-39], [0xFF], [5.877472e-39], [6.64614e+35]]> : tensor<4x1xf8E8M0FNU>
// VALUES: %2 = dense<{{\[}}[0.0, -0.0, 0.0, {{.*}}], [0x7FC00000, {{.*}}], [0.0, -0.0, 3.4438e-41, 1.1754944e-38, 0.0, -0.0, 5.142788e-39, 2.0663e-40], [0.0, 0.0, 0.0, -2.9774707e+38, 0.0, 0.0, 0.0, 0.0]]> : tensor<4x8xf32>

func.func @main() -> (tensor<4x8xf8E4M3FN>, tensor<4x1xf8E8M0FNU>, tensor<4x8xf32>) {
  %x = stablehlo.constant dense<[[0.0, -0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0x7FC00000, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [1.0e-45, -2.0e-45, 3.0e-41, 1.1754942e-38, 0.0, -1.0e-44, 5.0e-39, 2.0e-40], [448.0, 464.0, 500.0, -3.0e+38, 1.0, 2.0, 3.0, 4.0]]> : tensor<4x8xf32>
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 8 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<4x8xf32>) -> (tensor<4x8xf8E4M3FN>, tensor<4x1xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3", block_size = 8 : i64, axis = 1 : i64} : (tensor<4x8xf8E4M3FN>, tensor<4x1xf8E8M0FNU>) -> tensor<4x8xf32>
  return %q, %s, %d : tensor<4x8xf8E4M3FN>, tensor<4x1xf8E8M0FNU>, tensor<4x8xf32>
}
