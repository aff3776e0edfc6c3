// Input of test/lit/run/mxlower-run-errors.mlir: an mx op the verifier rejects.

func.func @main(%x: tensor<4x64xf32>) -> tensor<4x64xf8E4M3FN> {
  // block_size 48 does not divide 64
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 48 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x1xf8E8M0FNU>)
  return %q : tensor<4x64xf8E4M3FN>
}
