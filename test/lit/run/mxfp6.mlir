// XLA:CPU has no f6 types: mxlower-expand-narrow-floats turns the f6 conversions into integer
// ops and f6 storage into ui8 codes, and the module runs there; StableHLO's reference
// interpreter (--backend=interpreter) runs it unexpanded.  Both match mxlower.reference bit for
// bit (the codes below were computed with it).

// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' --backend=interpreter --print-bits | FileCheck %s
// RUN: mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo,mxlower-expand-narrow-floats{types=f6E3M2FN,f6E2M3FN})' --print-bits | FileCheck %s --check-prefix=XLACPU
// RUN: not mxlower-run %s -p 'builtin.module(mxlower-mx-to-stablehlo)' 2>&1 | FileCheck %s --check-prefix=NOXLA

// CHECK: %0 = dense<{{\[}}[0x00, 0x21, 0x03, 0x1C, 0x20, 0x00, 0x04, 0x20]]> : tensor<1x8xf6E2M3FN>
// CHECK: %1 = dense<{{\[}}[0x83]]> : tensor<1x1xf8E8M0FNU>
// CHECK: %2 = dense<{{\[}}[0x01, 0x23, 0x0A, 0x1A, 0x20, 0x00, 0x0B, 0x20]]> : tensor<1x8xf6E3M2FN>
// CHECK: %3 = dense<{{\[}}[0x82]]> : tensor<1x1xf8E8M0FNU>
// 0.5, -1.5, 6, 96, -0, 0, 7, -0 in bf16:
// CHECK: %4 = dense<{{\[}}[0x3F00, 0xBFC0, 0x40C0, 0x42C0, 0x8000, 0x0000, 0x40E0, 0x8000]]> : tensor<1x8xbf16>

// XLACPU: %0 = dense<{{\[}}[0x00, 0x21, 0x03, 0x1C, 0x20, 0x00, 0x04, 0x20]]> : tensor<1x8xui8>
// XLACPU: %1 = dense<{{\[}}[0x83]]> : tensor<1x1xf8E8M0FNU>
// XLACPU: %2 = dense<{{\[}}[0x01, 0x23, 0x0A, 0x1A, 0x20, 0x00, 0x0B, 0x20]]> : tensor<1x8xui8>
// XLACPU: %3 = dense<{{\[}}[0x82]]> : tensor<1x1xf8E8M0FNU>
// XLACPU: %4 = dense<{{\[}}[0x3F00, 0xBFC0, 0x40C0, 0x42C0, 0x8000, 0x0000, 0x40E0, 0x8000]]> : tensor<1x8xbf16>

// NOXLA: mxlower-run: error: XLA:CPU has no f6E2M3FN or f6E3M2FN type: append mxlower-expand-narrow-floats to the pipeline, or use --backend=interpreter

func.func @main() -> (tensor<1x8xf6E2M3FN>, tensor<1x1xf8E8M0FNU>, tensor<1x8xf6E3M2FN>, tensor<1x1xf8E8M0FNU>, tensor<1x8xbf16>) {
  %x = stablehlo.constant dense<[[0.3, -1.7, 5.5, 100.0, -0.0, 7.346839692639297e-40, 7.0, -0.01]]> : tensor<1x8xf32>
  %q, %s = "mx.quantize"(%x) {format = "mxfp6_e2m3", block_size = 8 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<1x8xf32>) -> (tensor<1x8xf6E2M3FN>, tensor<1x1xf8E8M0FNU>)
  %q2, %s2 = "mx.quantize"(%x) {format = "mxfp6_e3m2", block_size = 8 : i64, axis = 1 : i64, scale_mode = "nearest"} : (tensor<1x8xf32>) -> (tensor<1x8xf6E3M2FN>, tensor<1x1xf8E8M0FNU>)
  %d = "mx.dequantize"(%q2, %s2) {format = "mxfp6_e3m2", block_size = 8 : i64, axis = 1 : i64} : (tensor<1x8xf6E3M2FN>, tensor<1x1xf8E8M0FNU>) -> tensor<1x8xbf16>
  return %q, %s, %q2, %s2, %d : tensor<1x8xf6E2M3FN>, tensor<1x1xf8E8M0FNU>, tensor<1x8xf6E3M2FN>, tensor<1x1xf8E8M0FNU>, tensor<1x8xbf16>
}
