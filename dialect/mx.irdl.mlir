// The `mx` dialect in IRDL: the machine-checked part of the op specification in README.md.
//
//   mlir-opt --irdl-file=dialect/mx.irdl.mlir --allow-unregistered-dialect model.mlir
//
// upstream mlir-opt then knows the seven `mx` ops and checks their operand and result counts,
// that every operand and result is a ranked tensor, that the required attributes are present
// (cast's `number`, sparse's `n` and `m`), and the value of every string attribute with a
// fixed set of values (`format`, `scale_mode`, `roundmode`, `scalemode`, ...).
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
// * "One of two attributes".  `mx.quantize` and `mx.dequantize` take either `format` (a named
//   MX format, sections 3-5) or `number` (a datatype, section 10).  Both are tagged
//   `mx.alternative_attribute`: constrained when present, like optional attributes; the sync
//   test checks that Python requires exactly one of them.  A scaled_dot side takes
//   `{side}_format` or `{side}_number` or neither (a plain side): optional attributes.
// * The one-result / one-operand datatype forms.  quantize's results and dequantize's operands
//   are declared as two single values and one optional (a scale spec with a zero point adds
//   the third), so the *unscaled* datatype forms (`number` without `scale`: codes only) are
//   rejected by mlir-opt; write those as `mx.cast` or a plain convert, or skip this check.
//   Likewise a two-level datatype's tensor scale g (`_gf32`, the last operand) is one more
//   operand than the declared optional one where the op already fills it: a stochastic
//   two-level quantize (input, random bits, g) and a two-level dequantize with zero points or
//   subtile offsets (codes, scales, offsets, g) are rejected by mlir-opt, as is a stochastic
//   two-level `mx.cast`.
// * Element types inside tensors.  `irdl.parametric` only applies to IRDL-defined types, so a
//   constraint such as "tensor of f8E4M3FN, any shape" cannot be written for builtin tensors.

irdl.dialect @mx {
  // Named form (sections 3-4):
  //   %q, %s = "mx.quantize"(%x[, %global_scale]) {format, block_size, axis, scale_mode}
  // Datatype form (section 10):
  //   %c, %s[, %z | %o] = "mx.quantize"(%x[, %rbits][, %g]) {number, scale, roundmode,
  //                                                            scalemode[, table]}
  //   (%z: zero points; %o: the ui8 subtile offsets of a scale spec with subtiles, '_sAoD';
  //   %g: the tensor<f32> tensor scale of a two-level datatype ('_gf32'), last; an MX
  //   format's datatype is that format's op: nvfp4's two-level e2m1fo:e4m3fn_t16_gf32 takes
  //   its global scale where %rbits would be.  The three-operand form (stochastic rounding
  //   and a tensor scale) is valid but not expressible here: two independently optional
  //   operands need operandSegmentSizes, see the header)
  // Exactly one of `format` and `number` (tagged mx.alternative_attribute; IRDL cannot say
  // "one of").  An unscaled datatype quantize has one result, which IRDL rejects (see the
  // header).
  irdl.operation @quantize {
    %input = irdl.base "!builtin.tensor"
    %extra = irdl.base "!builtin.tensor"
    irdl.operands(input: %input, global_scale_or_rbits: optional %extra)
    %elements = irdl.base "!builtin.tensor"
    %scales = irdl.base "!builtin.tensor"
    %zero_points = irdl.base "!builtin.tensor"
    irdl.results(elements: %elements, scales: %scales,
                 zero_points_or_offsets: optional %zero_points)

    %mxfp8_e4m3 = irdl.is "mxfp8_e4m3"
    %mxfp8_e5m2 = irdl.is "mxfp8_e5m2"
    %mxfp6_e3m2 = irdl.is "mxfp6_e3m2"
    %mxfp6_e2m3 = irdl.is "mxfp6_e2m3"
    %mxfp4_e2m1 = irdl.is "mxfp4_e2m1"
    %mxint8 = irdl.is "mxint8"
    %nvfp4 = irdl.is "nvfp4"
    %format = irdl.any_of(%mxfp8_e4m3, %mxfp8_e5m2, %mxfp6_e3m2, %mxfp6_e2m3, %mxfp4_e2m1,
                          %mxint8, %nvfp4) {mx.alternative_attribute = "format"}
    %number = irdl.base "#builtin.string" {mx.alternative_attribute = "number"}
    %scale = irdl.base "#builtin.string" {mx.optional_attribute = "scale"}
    // a custom lookup table's values (with number = "lut"): array<f32: ...>
    %table = irdl.base "#builtin.dense_array" {mx.optional_attribute = "table"}

    %block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "block_size"}
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
    %floor = irdl.is "floor"
    %rceil = irdl.is "rceil"
    %nearest = irdl.is "nearest"
    %scale_mode = irdl.any_of(%floor, %rceil, %nearest) {mx.optional_attribute = "scale_mode"}
    %even = irdl.is "even"
    %nearest_r = irdl.is "nearest"
    %zero = irdl.is "zero"
    %half_down = irdl.is "half_down"
    %stochastic = irdl.is "stochastic"
    %roundmode = irdl.any_of(%even, %nearest_r, %zero, %half_down, %stochastic)
        {mx.optional_attribute = "roundmode"}
    %max = irdl.is "max"
    %midmax = irdl.is "midmax"
    %rceil_s = irdl.is "rceil"
    %nearest_s = irdl.is "nearest"
    %scalemode = irdl.any_of(%max, %midmax, %rceil_s, %nearest_s)
        {mx.optional_attribute = "scalemode"}
  }

  // Named form:    %y = "mx.dequantize"(%elements, %scales[, %global_scale])
  //                     {format, block_size, axis}
  // Datatype form: %y = "mx.dequantize"(%codes[, %scales[, %zero_points | %offsets]][, %g])
  //                     {number, scale[, table]}
  //                (subtile offsets for a scale spec with subtiles; %g: the tensor<f32>
  //                tensor scale of a two-level datatype ('_gf32'), last, so where
  //                %zero_points would be when there are none: nvfp4's global scale among
  //                them.  The four-operand form (zero points or offsets and a tensor scale)
  //                is valid but not expressible here, see the header)
  // An unscaled datatype dequantize has one operand, which IRDL rejects (see the header).
  irdl.operation @dequantize {
    %elements = irdl.base "!builtin.tensor"
    %scales = irdl.base "!builtin.tensor"
    %extra = irdl.base "!builtin.tensor"
    irdl.operands(elements: %elements, scales: %scales,
                  global_scale_or_zero_points_or_offsets: optional %extra)
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
                          %mxint8, %nvfp4) {mx.alternative_attribute = "format"}
    %number = irdl.base "#builtin.string" {mx.alternative_attribute = "number"}
    %scale = irdl.base "#builtin.string" {mx.optional_attribute = "scale"}
    // a custom lookup table's values (with number = "lut"): array<f32: ...>
    %table = irdl.base "#builtin.dense_array" {mx.optional_attribute = "table"}

    %block_size = irdl.base "#builtin.integer" {mx.optional_attribute = "block_size"}
    %axis = irdl.base "#builtin.integer" {mx.optional_attribute = "axis"}
  }

  // %r = "mx.scaled_dot"(%lhs[, %lhs_scales], %rhs[, %rhs_scales][, %global_scale])
  //          {dot_dimension_numbers, lhs_format, rhs_format, lhs_block_size, rhs_block_size,
  //           lhs_axis, rhs_axis, lhs_number, lhs_scale, rhs_number, rhs_scale, compute_type}
  // The operands after `lhs` depend on which sides are scaled; see the header.  A scaled side
  // is named by its format (`{side}_format`, `_block_size`, `_axis`) or by its MX format's
  // datatype (`{side}_number` [+ `{side}_scale`], as dequantize names one; its tiles give the
  // block size and axis), not both; a plain side by neither.  All are optional (IRDL cannot
  // say "at most one of").
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
    %lhs_number = irdl.base "#builtin.string" {mx.optional_attribute = "lhs_number"}
    %lhs_scale = irdl.base "#builtin.string" {mx.optional_attribute = "lhs_scale"}
    %rhs_number = irdl.base "#builtin.string" {mx.optional_attribute = "rhs_number"}
    %rhs_scale = irdl.base "#builtin.string" {mx.optional_attribute = "rhs_scale"}
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

  // %y = "mx.cast"(%x[, %rbits][, %g]) {number, scale, roundmode, scalemode[, table]}
  //          : (tensor<...xT>[, tensor<...xui32>][, tensor<f32>]) -> tensor<...xT>
  // %g: the tensor scale of a two-level datatype ('_gf32').  The three-operand form
  // (stochastic rounding and a tensor scale) is valid but not expressible here: two
  // independently optional operands need operandSegmentSizes (see the header).
  irdl.operation @cast {
    %input = irdl.base "!builtin.tensor"
    %rbits = irdl.base "!builtin.tensor"
    irdl.operands(input: %input, rbits_or_tensor_scale: optional %rbits)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)
    %number = irdl.base "#builtin.string"
    irdl.attributes {"number" = %number}
    %scale = irdl.base "#builtin.string" {mx.optional_attribute = "scale"}
    // a custom lookup table's values (with number = "lut"): array<f32: ...>
    %table = irdl.base "#builtin.dense_array" {mx.optional_attribute = "table"}
    %even = irdl.is "even"
    %nearest_r = irdl.is "nearest"
    %zero = irdl.is "zero"
    %half_down = irdl.is "half_down"
    %stochastic = irdl.is "stochastic"
    %roundmode = irdl.any_of(%even, %nearest_r, %zero, %half_down, %stochastic)
        {mx.optional_attribute = "roundmode"}
    %max = irdl.is "max"
    %midmax = irdl.is "midmax"
    %rceil_s = irdl.is "rceil"
    %nearest_s = irdl.is "nearest"
    %scalemode = irdl.any_of(%max, %midmax, %rceil_s, %nearest_s)
        {mx.optional_attribute = "scalemode"}
  }

  // %y = "mx.sparse"(%x) {n, m, dim} : (tensor<...xT>) -> tensor<...xT>
  irdl.operation @sparse {
    %input = irdl.base "!builtin.tensor"
    irdl.operands(input: %input)
    %result = irdl.base "!builtin.tensor"
    irdl.results(result: %result)
    %n = irdl.base "#builtin.integer"
    %m = irdl.base "#builtin.integer"
    irdl.attributes {"n" = %n, "m" = %m}
    %dim = irdl.base "#builtin.integer" {mx.optional_attribute = "dim"}
  }
}
