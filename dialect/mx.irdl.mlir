// The `mx` dialect in IRDL: the machine-checked part of the op specification in README.md.
//
//   mlir-opt --irdl-file=dialect/mx.irdl.mlir --allow-unregistered-dialect model.mlir
//
// upstream mlir-opt then knows the five `mx` ops and checks their operand and result counts,
// that every operand and result is a ranked tensor, that a global scale is tensor<f32>, that
// the required attributes are present, and the value of quantize's and dequantize's `format`.
// (--allow-unregistered-dialect is for `#stablehlo.dot<...>`: upstream MLIR has no StableHLO,
// so it parses `dot_dimension_numbers` as an opaque attribute.)
//
// mxlower's own verifier (`mxlower-verify-mx`, mxlower/dialect/mx.py) is the complete one: it
// also checks element types against the format, scale shapes, block sizes, axes and dot
// dimension numbers.  Every op it accepts, this definition accepts, with one exception forced
// by IRDL (below); test/python/test_dialect_irdl.py keeps the two in sync and
// test/lit/dialect/ runs mlir-opt on valid and invalid ops.
//
// What IRDL in MLIR 22 cannot say, and how this file handles it:
// * Optional attributes.  Every `irdl.attributes` entry is required, and attributes that are
//   not listed are not checked at all.  `block_size`, `axis`, `scale_mode`, `compute_type` and
//   the scaled_dot operand attributes have defaults, so they are not listed there; the
//   constraint each must satisfy is still written here, on an op tagged
//   `mx.optional_attribute = "<name>"`.  mlir-opt parses and verifies those constraints but
//   does not apply them; the sync test compares them with the Python verifier.
// * Independently optional operands.  Without an `operandSegmentSizes` attribute (which mx ops
//   do not carry) an op has at most one optional or variadic operand group, and IRDL binds each
//   constraint to a single type per op, so all values of a variadic group have one type.
//   `mx.scaled_dot` has three optional operands (lhs_scales, rhs_scales, global_scale); it is
//   declared as three single operands plus a variadic tail, which covers every form except the
//   five-operand one (both sides scaled and a global scale): there the tail holds the rhs
//   scales and the global scale, two different types, and mlir-opt rejects the op.
// * Element types inside tensors.  `irdl.parametric` only applies to IRDL-defined types, so a
//   constraint such as "tensor of f8E4M3FN, any shape" cannot be written for builtin tensors.

irdl.dialect @mx {
  // %q, %s = "mx.quantize"(%x[, %global_scale]) {format, block_size, axis, scale_mode}
  irdl.operation @quantize {
    %input = irdl.base "!builtin.tensor"
    %global_scale = irdl.is tensor<f32>
    irdl.operands(input: %input, global_scale: optional %global_scale)
    %elements = irdl.base "!builtin.tensor"
    %scales = irdl.base "!builtin.tensor"
    irdl.results(elements: %elements, scales: %scales)

    %mxfp8_e4m3 = irdl.is "mxfp8_e4m3"
    %mxfp8_e5m2 = irdl.is "mxfp8_e5m2"
    %mxfp6_e3m2 = irdl.is "mxfp6_e3m2"
    %mxfp6_e2m3 = irdl.is "mxfp6_e2m3"
    %mxfp4_e2m1 = irdl.is "mxfp4_e2m1"
    %mxint8 = irdl.is "mxint8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%mxfp8_e4m3, %mxfp8_e5m2, %mxfp6_e3m2, %mxfp6_e2m3, %mxfp4_e2m1,
                          %mxint8, %nvfp4)
    irdl.attributes {"format" = %format}

    %block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "block_size"}
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
    %floor = irdl.is "floor"
    %rceil = irdl.is "rceil"
    %nearest = irdl.is "nearest"
    %scale_mode = irdl.any_of(%floor, %rceil, %nearest) {mx.optional_attribute = "scale_mode"}
  }

  // %y = "mx.dequantize"(%elements, %scales[, %global_scale]) {format, block_size, axis}
  irdl.operation @dequantize {
    %elements = irdl.base "!builtin.tensor"
    %scales = irdl.base "!builtin.tensor"
    %global_scale = irdl.is tensor<f32>
    irdl.operands(elements: %elements, scales: %scales, global_scale: optional %global_scale)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)

    %mxfp8_e4m3 = irdl.is "mxfp8_e4m3"
    %mxfp8_e5m2 = irdl.is "mxfp8_e5m2"
    %mxfp6_e3m2 = irdl.is "mxfp6_e3m2"
    %mxfp6_e2m3 = irdl.is "mxfp6_e2m3"
    %mxfp4_e2m1 = irdl.is "mxfp4_e2m1"
    %mxint8 = irdl.is "mxint8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%mxfp8_e4m3, %mxfp8_e5m2, %mxfp6_e3m2, %mxfp6_e2m3, %mxfp4_e2m1,
                          %mxint8, %nvfp4)
    irdl.attributes {"format" = %format}

    %block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "block_size"}
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
  }

  // %r = "mx.scaled_dot"(%lhs[, %lhs_scales], %rhs[, %rhs_scales][, %global_scale])
  //          {dot_dimension_numbers, lhs_format, rhs_format, lhs_block_size, rhs_block_size,
  //           lhs_axis, rhs_axis, compute_type}
  // The operands after `lhs` depend on which sides carry a format; see the header.
  irdl.operation @scaled_dot {
    %lhs = irdl.base "!builtin.tensor"
    %operand1 = irdl.base "!builtin.tensor"
    %operand2 = irdl.base "!builtin.tensor"
    %trailing = irdl.base "!builtin.tensor"
    irdl.operands(lhs: %lhs, operand1: %operand1, operand2: %operand2,
                  trailing: variadic %trailing)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)

    // A #stablehlo.dot<...>, opaque to upstream MLIR.
    %dot_dimension_numbers = irdl.any
    irdl.attributes {"dot_dimension_numbers" = %dot_dimension_numbers}

    %mxfp8_e4m3 = irdl.is "mxfp8_e4m3"
    %mxfp8_e5m2 = irdl.is "mxfp8_e5m2"
    %mxfp6_e3m2 = irdl.is "mxfp6_e3m2"
    %mxfp6_e2m3 = irdl.is "mxfp6_e2m3"
    %mxfp4_e2m1 = irdl.is "mxfp4_e2m1"
    %mxint8 = irdl.is "mxint8"
    %nvfp4 = irdl.is "nvfp4"
    %lhs_format = irdl.any_of(%mxfp8_e4m3, %mxfp8_e5m2, %mxfp6_e3m2, %mxfp6_e2m3, %mxfp4_e2m1,
                              %mxint8, %nvfp4) {mx.optional_attribute = "lhs_format"}
    %rhs_format = irdl.any_of(%mxfp8_e4m3, %mxfp8_e5m2, %mxfp6_e3m2, %mxfp6_e2m3, %mxfp4_e2m1,
                              %mxint8, %nvfp4) {mx.optional_attribute = "rhs_format"}
    %lhs_block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "lhs_block_size"}
    %rhs_block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "rhs_block_size"}
    %lhs_axis = irdl.base "#builtin.integer" {mx.optional_attribute = "lhs_axis"}
    %rhs_axis = irdl.base "#builtin.integer" {mx.optional_attribute = "rhs_axis"}
    %f32 = irdl.is f32
    %bf16 = irdl.is bf16
    %f16 = irdl.is f16
    %compute_type = irdl.any_of(%f32, %bf16, %f16) {mx.optional_attribute = "compute_type"}
  }

  // %p = "mx.pack"(%codes) {axis} : (tensor<...xT>) -> tensor<...xui8>
  irdl.operation @pack {
    %input = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
  }

  // %u = "mx.unpack"(%packed) {axis} : (tensor<...xui8>) -> tensor<...xT>
  irdl.operation @unpack {
    %input = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
  }
}
