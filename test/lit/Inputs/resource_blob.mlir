// A module in generic form whose constant lives in the file's dialect_resources: the input of
// the truncated-blob cases of test/lit/driver/hostile-input.mlir.
module {
  "memref.global"() <{initial_value = dense_resource<blob1> : tensor<2xf32>, sym_name = "g", sym_visibility = "private", type = memref<2xf32>}> : () -> ()
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F00000040"
    }
  }
#-}
