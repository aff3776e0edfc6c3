// RUN: mxlower-opt %s --split-input-file --mxlower-decompose-mx --verify-diagnostics | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --mxlower-decompose-mx='scale-mode=rceil compute-type=bf16' --verify-diagnostics | FileCheck %s --check-prefix=OVERRIDE
// RUN: mxlower-opt %inputs/scaled_dot_spelling_format.mlir --mxlower-decompose-mx -o %t.format.mlir
// RUN: mxlower-opt %inputs/scaled_dot_spelling_datatype.mlir --mxlower-decompose-mx -o %t.datatype.mlir
// RUN: diff %t.format.mlir %t.datatype.mlir
// RUN: FileCheck %s --check-prefix=SPELLING --input-file=%t.datatype.mlir

// One vocabulary: a scaled_dot side named by its MX format's datatype (`rhs_number =
// "e4m3fn", rhs_scale = "e8m0_t32"`, `"bfp16"`, `"e4m3fn:e8m0_t32d0"`, nvfp4's two-level
// `e2m1fo` + `e4m3fn_t16_gf32`, ...) is the side its format names: the two input files differ
// only in the spelling of every side and lower to identical StableHLO (the diff above).
// SPELLING-LABEL: func.func @gemv_specs
// SPELLING-NOT: mx.
// SPELLING: stablehlo.dot_general %arg0, %{{.*}}, contracting_dims = [1] x [1], precision = [HIGHEST, HIGHEST] : (tensor<1x64xf32>, tensor<8x64xf32>) -> tensor<1x8xf32>
// SPELLING-LABEL: func.func @gemv_bfp16
// SPELLING: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1] : (tensor<8x8xi32>) -> tensor<8x8x8xi32>
// SPELLING-LABEL: func.func @swapped_code
// SPELLING: stablehlo.dot_general %{{.*}}, %{{.*}}, contracting_dims = [0] x [1]
// SPELLING-LABEL: func.func @nvfp4_global
// SPELLING: stablehlo.broadcast_in_dim %arg3, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
// SPELLING-LABEL: func.func @gemm_both
// SPELLING-NOT: mx.
// SPELLING: return

// Quantize: the block maximum of the magnitude bits, the exponent in integers (floor: the
// position of the leading one, so subnormal maxima are exact), power-of-two scaling of the
// elements by adding to their exponent bits and saturation by one integer clamp (no float
// arithmetic on the elements), one convert to the element type, the scale code as f8E8M0FNU.

// CHECK-LABEL: func.func @quantize_floor
// CHECK-NOT: mx.
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4x64xf32>) -> tensor<4x64xi32>
// CHECK: %[[BLOCKS:.*]] = stablehlo.reshape %[[BITS]] : (tensor<4x64xi32>) -> tensor<4x2x32xi32>
// CHECK: %[[MAG:.*]] = stablehlo.and %[[BLOCKS]]
// CHECK: stablehlo.reduce(%[[MAG]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [2] : (tensor<4x2x32xi32>, tensor<i32>) -> tensor<4x2xi32>
// CHECK: stablehlo.count_leading_zeros
// CHECK-NOT: stablehlo.divide
// CHECK: stablehlo.convert %{{.*}} : (tensor<4x2xi32>) -> tensor<4x2xui8>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4x2xui8>) -> tensor<4x2xf8E8M0FNU>
// CHECK-NOT: stablehlo.multiply
// CHECK: stablehlo.shift_left %{{.*}} : tensor<4x2xi32>
// CHECK-NOT: stablehlo.multiply
// CHECK: %[[SAT:.*]] = stablehlo.clamp %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x2x32xi32>
// CHECK: %[[Y:.*]] = stablehlo.or %{{.*}}, %[[SAT]] : tensor<4x2x32xi32>
// CHECK: %[[YF:.*]] = stablehlo.bitcast_convert %[[Y]] : (tensor<4x2x32xi32>) -> tensor<4x2x32xf32>
// CHECK: stablehlo.convert %[[YF]] : (tensor<4x2x32xf32>) -> tensor<4x2x32xf8E4M3FN>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x2x32xf8E4M3FN>) -> tensor<4x64xf8E4M3FN>
// CHECK-NOT: mx.
// CHECK: return
// The override replaces floor by rceil: ceil(log2(RNE(amax / max_elem))) without a division
// (XLA:CPU would multiply by a rounded reciprocal): amax's exponent, plus one when its
// mantissa field exceeds max_elem's significand times 1 + 2^-24 (0x600000 + 0.875, for 1.75).
// OVERRIDE-LABEL: func.func @quantize_floor
// OVERRIDE-NOT: stablehlo.divide
// OVERRIDE: stablehlo.constant dense<6291456> : tensor<4x2xi32>
// OVERRIDE: stablehlo.compare GT, %{{.*}}, %{{.*}}, SIGNED : (tensor<4x2xi32>, tensor<4x2xi32>) -> tensor<4x2xi1>
// OVERRIDE-NOT: stablehlo.divide
// OVERRIDE: return
func.func @quantize_floor(%x: tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  return %q, %s : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>
}

// -----

// Blocks along a leading axis; bf16 input widened by a shift; mxint8 elements are
// round_nearest_even(x * 2^-E * 64) with x * 2^-E saturated at 127/64 first (in the integers).

// CHECK-LABEL: func.func @quantize_mxint8_axis0_bf16
// CHECK: stablehlo.bitcast_convert %arg0 : (tensor<64x3xbf16>) -> tensor<64x3xui16>
// CHECK: stablehlo.shift_left
// CHECK: stablehlo.reshape %{{.*}} : (tensor<64x3xi32>) -> tensor<4x16x3xi32>
// CHECK: applies stablehlo.maximum across dimensions = [1]
// CHECK: stablehlo.clamp %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x16x3xi32>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<4x16x3xf32>
// CHECK-NEXT: stablehlo.round_nearest_even
// CHECK-NEXT: stablehlo.convert %{{.*}} : (tensor<4x16x3xf32>) -> tensor<4x16x3xi8>
// CHECK-NOT: mx.
func.func @quantize_mxint8_axis0_bf16(%x: tensor<64x3xbf16>) -> (tensor<64x3xi8>, tensor<4x3xf8E8M0FNU>) {
  %q, %s = "mx.quantize"(%x) {format = "mxint8", block_size = 16 : i64, axis = 0 : i64, scale_mode = "nearest"} : (tensor<64x3xbf16>) -> (tensor<64x3xi8>, tensor<4x3xf8E8M0FNU>)
  return %q, %s : tensor<64x3xi8>, tensor<4x3xf8E8M0FNU>
}

// -----

// Dynamic dimensions besides the blocked one: blocks are split and joined with
// dynamic_reshape, and per-block values and constants are broadcast to the runtime shape.

// CHECK-LABEL: func.func @quantize_dynamic_batch
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<?x64xf32>) -> tensor<?x64xi32>
// CHECK: stablehlo.get_dimension_size %[[BITS]], dim = 0
// CHECK: stablehlo.dynamic_reshape %[[BITS]], %{{.*}} : (tensor<?x64xi32>, tensor<3xi32>) -> tensor<?x2x32xi32>
// CHECK: stablehlo.dynamic_broadcast_in_dim
// CHECK: stablehlo.convert %{{.*}} : (tensor<?x2x32xf32>) -> tensor<?x2x32xf8E5M2>
// CHECK: stablehlo.dynamic_reshape %{{.*}} : (tensor<?x2x32xf8E5M2>, tensor<2xi32>) -> tensor<?x64xf8E5M2>
// CHECK-NOT: mx.
func.func @quantize_dynamic_batch(%x: tensor<?x64xf32>) -> (tensor<?x64xf8E5M2>, tensor<?x2xf8E8M0FNU>) {
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e5m2", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<?x64xf32>) -> (tensor<?x64xf8E5M2>, tensor<?x2xf8E8M0FNU>)
  return %q, %s : tensor<?x64xf8E5M2>, tensor<?x2xf8E8M0FNU>
}

// -----

// nvfp4: the block scale is RNE_e4m3(min(amax / 6, 448)); the global scale divides first.
// Both quotients are formed in f64 as x * RN(1 / d) and rounded to f32, which is the correctly
// rounded f32 quotient (XLA:CPU would turn an f32 division by a broadcast or a constant into
// a multiplication by a rounded f32 reciprocal: off in the last bit, wrong f4 ties).  The
// elements take no quotient: a binary search compares |y|'s bits with the exact t * s for
// the f4 thresholds t (>= where the f4 tie rounds up, > where down; docs/semantics.md
// Appendix A), and the codes become f4 by a bitcast.

// CHECK-LABEL: func.func @quantize_nvfp4
// CHECK: %[[RG:.*]] = stablehlo.divide %{{.*}}, %{{.*}} : tensor<f64>
// CHECK: %[[RGB:.*]] = stablehlo.broadcast_in_dim %[[RG]], dims = [] : (tensor<f64>) -> tensor<2x4x16xf64>
// CHECK: %[[Y:.*]] = stablehlo.multiply %{{.*}}, %[[RGB]] : tensor<2x4x16xf64>
// CHECK: stablehlo.convert %[[Y]] : (tensor<2x4x16xf64>) -> tensor<2x4x16xf32>
// CHECK: %[[A6:.*]] = stablehlo.multiply %{{.*}}, %{{.*}} : tensor<2x4xf64>
// CHECK: stablehlo.convert %[[A6]] : (tensor<2x4xf64>) -> tensor<2x4xf32>
// CHECK: stablehlo.minimum
// CHECK: stablehlo.convert %{{.*}} : (tensor<2x4xf32>) -> tensor<2x4xf8E4M3FN>
// CHECK: %[[S:.*]] = stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1] : (tensor<2x4xf32>) -> tensor<2x4x16xf32>
// CHECK: %[[MAG:.*]] = stablehlo.and
// CHECK: %[[P1:.*]] = stablehlo.multiply %[[S]], %{{.*}} : tensor<2x4x16xf32>
// CHECK: %[[B1:.*]] = stablehlo.bitcast_convert %[[P1]]
// CHECK: %[[HI:.*]] = stablehlo.compare GE, %[[MAG]], %[[B1]], SIGNED
// CHECK: stablehlo.compare GE, %[[MAG]]
// CHECK: stablehlo.compare GT, %[[MAG]]
// CHECK-NOT: stablehlo.compare {{.*}}%[[MAG]]
// CHECK: %[[C4:.*]] = stablehlo.convert %{{.*}} : (tensor<2x4x16xi32>) -> tensor<2x4x16xui4>
// CHECK: stablehlo.bitcast_convert %[[C4]] : (tensor<2x4x16xui4>) -> tensor<2x4x16xf4E2M1FN>
// CHECK-NOT: stablehlo.divide {{.*}}xf32>
// CHECK-NOT: mx.
func.func @quantize_nvfp4(%x: tensor<2x64xf16>, %g: tensor<f32>) -> (tensor<2x64xf4E2M1FN>, tensor<2x4xf8E4M3FN>) {
  %q, %s = "mx.quantize"(%x, %g) {format = "nvfp4", block_size = 16 : i64, axis = 1 : i64} : (tensor<2x64xf16>, tensor<f32>) -> (tensor<2x64xf4E2M1FN>, tensor<2x4xf8E4M3FN>)
  return %q, %s : tensor<2x64xf4E2M1FN>, tensor<2x4xf8E4M3FN>
}

// -----

// Dequantize: decode(e) * 2^(code - 127) by integer exponent arithmetic (subnormal results
// rounded in integers), scale code 0xFF -> NaN, then one rounding to the result type.

// CHECK-LABEL: func.func @dequantize
// CHECK: stablehlo.convert %arg0 : (tensor<4x64xf8E5M2>) -> tensor<4x64xf32>
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<4x2xf8E8M0FNU>) -> tensor<4x2xui8>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1] : (tensor<4x2xi32>) -> tensor<4x2x32xi32>
// CHECK: stablehlo.shift_right_logical
// CHECK: stablehlo.constant dense<2143289344>
// CHECK: stablehlo.convert %{{.*}} : (tensor<4x64xf32>) -> tensor<4x64xbf16>
// CHECK-NOT: mx.
func.func @dequantize(%q: tensor<4x64xf8E5M2>, %s: tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16> {
  %d = "mx.dequantize"(%q, %s) {format = "mxfp8_e5m2", block_size = 32 : i64, axis = 1 : i64} : (tensor<4x64xf8E5M2>, tensor<4x2xf8E8M0FNU>) -> tensor<4x64xbf16>
  return %d : tensor<4x64xbf16>
}

// -----

// Scaled dot: dequantize to the compute type, contract, global scale, convert to the result
// type.  A stablehlo.if chooses the contraction at run time: f32 where reductions over the
// scales prove that no operand, product or sum can be an f32 subnormal or overflow (XLA:CPU
// flushes subnormals), else f64 on the exact operand values, rounded once to f32.

// CHECK-LABEL: func.func @scaled_dot
// CHECK: applies stablehlo.minimum across dimensions = [0, 1, 2] : (tensor<2x4x2xui8>, tensor<ui8>) -> tensor<ui8>
// CHECK: applies stablehlo.maximum across dimensions = [0, 1, 2] : (tensor<2x8x2xui8>, tensor<ui8>) -> tensor<ui8>
// CHECK: "stablehlo.if"(%{{.*}}) ({
// CHECK: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [HIGHEST, HIGHEST] : (tensor<2x4x64xf32>, tensor<2x8x64xf32>) -> tensor<2x4x8xf32>
// CHECK: }, {
// CHECK: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [HIGHEST, HIGHEST] : (tensor<2x4x64xf64>, tensor<2x8x64xf64>) -> tensor<2x4x8xf64>
// CHECK: stablehlo.return %{{.*}} : tensor<2x4x8xf32>
// CHECK: }) : (tensor<i1>) -> tensor<2x4x8xf32>
// CHECK: stablehlo.convert %{{.*}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf16>
// CHECK-NOT: mx.
// OVERRIDE-LABEL: func.func @scaled_dot
// OVERRIDE: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [HIGHEST, HIGHEST] : (tensor<2x4x64xbf16>, tensor<2x8x64xbf16>) -> tensor<2x4x8xf32>
// OVERRIDE: stablehlo.dot_general %{{.*}}, %{{.*}}, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [HIGHEST, HIGHEST] : (tensor<2x4x64xf64>, tensor<2x8x64xf64>) -> tensor<2x4x8xf64>
func.func @scaled_dot(%a: tensor<2x4x64xf8E4M3FN>, %as: tensor<2x4x2xf8E8M0FNU>, %b: tensor<2x8x64xf4E2M1FN>, %bs: tensor<2x8x2xf8E8M0FNU>, %g: tensor<f32>) -> tensor<2x4x8xf16> {
  %r = "mx.scaled_dot"(%a, %as, %b, %bs, %g) {lhs_format = "mxfp8_e4m3", lhs_block_size = 32 : i64, rhs_format = "mxfp4_e2m1", rhs_block_size = 32 : i64, compute_type = f32, dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2]>} : (tensor<2x4x64xf8E4M3FN>, tensor<2x4x2xf8E8M0FNU>, tensor<2x8x64xf4E2M1FN>, tensor<2x8x2xf8E8M0FNU>, tensor<f32>) -> tensor<2x4x8xf16>
  return %r : tensor<2x4x8xf16>
}

// -----

// Pack: f4 codes two to a byte, first value in the low nibble.

// CHECK-LABEL: func.func @pack_unpack
// CHECK: stablehlo.bitcast_convert %arg0 : (tensor<4x64xf4E2M1FN>) -> tensor<4x64xui4>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x64xi32>) -> tensor<4x32x2xi32>
// CHECK: stablehlo.constant dense<[0, 4]> : tensor<2xi32>
// CHECK: applies stablehlo.or across dimensions = [2]
// CHECK: stablehlo.convert %{{.*}} : (tensor<4x32x1xi32>) -> tensor<4x32x1xui8>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4x64xui4>) -> tensor<4x64xf4E2M1FN>
// CHECK-NOT: mx.
func.func @pack_unpack(%e: tensor<4x64xf4E2M1FN>) -> (tensor<4x32xui8>, tensor<4x64xf4E2M1FN>) {
  %p = "mx.pack"(%e) {axis = 1 : i64} : (tensor<4x64xf4E2M1FN>) -> tensor<4x32xui8>
  %u = "mx.unpack"(%p) {axis = 1 : i64} : (tensor<4x32xui8>) -> tensor<4x64xf4E2M1FN>
  return %p, %u : tensor<4x32xui8>, tensor<4x64xf4E2M1FN>
}

// -----

// Only mx ops are lowered: XLA's custom calls are mxlower-legalize-xla-mx's job (the
// mxlower-mx-to-stablehlo pipeline runs both), so they are left as they are, next to the
// lowered mx op.

// CHECK-LABEL: func.func @custom_calls_are_left_alone
// CHECK: stablehlo.custom_call @__op$block_scaled_dot(%arg0, %arg1, %arg2, %arg3)
// CHECK: stablehlo.custom_call @__op$quantize(%arg4)
// CHECK-NOT: mx.
// CHECK: return
func.func @custom_calls_are_left_alone(%a: tensor<16x64xf8E4M3FN>, %b: tensor<8x64xf8E4M3FN>, %as: tensor<16x2xf8E8M0FNU>, %bs: tensor<8x2xf8E8M0FNU>, %x: tensor<10x256xf32>) -> (tensor<16x8xf32>, tensor<10x256xf32>) {
  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) : (tensor<16x64xf8E4M3FN>, tensor<8x64xf8E4M3FN>, tensor<16x2xf8E8M0FNU>, tensor<8x2xf8E8M0FNU>) -> tensor<16x8xf32>
  // an __op$quantize that mxlower-legalize-xla-mx rejects (f8E5M2 scales) is not looked at
  %1:2 = stablehlo.custom_call @__op$quantize(%x) : (tensor<10x256xf32>) -> (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E5M2>)
  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64, scale_mode = "floor"} : (tensor<10x256xf32>) -> (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E8M0FNU>)
  %d = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : i64} : (tensor<10x256xf8E4M3FN>, tensor<10x8xf8E8M0FNU>) -> tensor<10x256xf32>
  return %0, %d : tensor<16x8xf32>, tensor<10x256xf32>
}

// -----

func.func @malformed(%x: tensor<4x64xf32>, %q: tensor<4x64xf8E4M3FN>, %s: tensor<4x3xf8E8M0FNU>) {
  // expected-error @+1 {{'mx.quantize' op blocked dimension 1 of the input has size 64, which block size 48 does not divide}}
  %a, %b = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 48 : i64} : (tensor<4x64xf32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x1xf8E8M0FNU>)
  // expected-error @+1 {{'mx.dequantize' op operand #1 (scales) must have shape tensor<4x2xf8E8M0FNU> for elements tensor<4x64xf8E4M3FN> blocked by 32 along dimension 1, got tensor<4x3xf8E8M0FNU>}}
  %c = "mx.dequantize"(%q, %s) {format = "mxfp8_e4m3"} : (tensor<4x64xf8E4M3FN>, tensor<4x3xf8E8M0FNU>) -> tensor<4x64xf32>
  return
}

// -----

// The datatype ops (docs/semantics.md section 10; mxlower/lowering/cast_math.py).  A cast with
// exponent scales (to no MX format's datatype): the f32 bits reshaped to (n0, t0, n1, t1), one
// integer maximum of the magnitude bits per tile, the exponent in integers (no float
// arithmetic, no division), spread back over the tile as the codec's shift.

// CHECK-LABEL: func.func @cast_exponent_scale
// CHECK-NOT: mx.
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4x64xf32>) -> tensor<4x64xi32>
// CHECK: %[[T:.*]] = stablehlo.reshape %[[BITS]] : (tensor<4x64xi32>) -> tensor<4x1x2x32xi32>
// CHECK: %[[MAG:.*]] = stablehlo.and %[[T]]
// CHECK: stablehlo.reduce(%[[MAG]] init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x2x32xi32>, tensor<i32>) -> tensor<4x2xi32>
// CHECK-NOT: stablehlo.divide
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 2] : (tensor<4x2xi32>) -> tensor<4x1x2x32xi32>
// CHECK-NOT: stablehlo.divide
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x1x2x32xi32>) -> tensor<4x64xi32>
// CHECK-NOT: mx.
// CHECK: return
func.func @cast_exponent_scale(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = "mx.cast"(%x) {number = "e5m6", scale = "e8m0_t32", roundmode = "even", scalemode = "max"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// A cast to an MX format's datatype (mxfp8_e4m3's: e4m3fn with e8m0_t32 scales, ties to even,
// max = floor) is the format's quantize followed by its dequantize: the MX recipe above, with
// blocks (4, 2, 32) where the general recipe tiles (4, 1, 2, 32).  The element and scale codes
// between the two never leave the cast, so they stay integers (the codec's conversions, as
// mxlower-expand-narrow-floats writes them): no narrow float type.  The scale-mode option does
// not apply to casts (with it, floor's count_leading_zeros remains).

// CHECK-LABEL: func.func @cast_mx_format
// CHECK-NOT: tensor<4x1x2x32xi32>
// CHECK: %[[BITS:.*]] = stablehlo.bitcast_convert %arg0 : (tensor<4x64xf32>) -> tensor<4x64xi32>
// CHECK: %[[BLOCKS:.*]] = stablehlo.reshape %[[BITS]] : (tensor<4x64xi32>) -> tensor<4x2x32xi32>
// CHECK: applies stablehlo.maximum across dimensions = [2] : (tensor<4x2x32xi32>, tensor<i32>) -> tensor<4x2xi32>
// CHECK: stablehlo.count_leading_zeros
// CHECK: %[[SC:.*]] = stablehlo.convert %{{.*}} : (tensor<4x2xi32>) -> tensor<4x2xui8>
// CHECK-NOT: f8E
// CHECK: stablehlo.clamp %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x2x32xi32>
// CHECK-NOT: f8E
// CHECK: stablehlo.convert %{{.*}} : (tensor<4x2x32xi32>) -> tensor<4x2x32xui8>
// CHECK-NEXT: %[[CODES:.*]] = stablehlo.reshape %{{.*}} : (tensor<4x2x32xui8>) -> tensor<4x64xui8>
// CHECK-NEXT: stablehlo.convert %[[CODES]] : (tensor<4x64xui8>) -> tensor<4x64xi32>
// CHECK-NOT: f8E
// CHECK: stablehlo.convert %[[SC]] : (tensor<4x2xui8>) -> tensor<4x2xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1] : (tensor<4x2xi32>) -> tensor<4x2x32xi32>
// CHECK-NOT: f8E
// CHECK: stablehlo.constant dense<2143289344> : tensor<4x64xi32>
// CHECK-NOT: f8E
// CHECK: return %{{.*}} : tensor<4x64xf32>
// OVERRIDE-LABEL: func.func @cast_mx_format
// OVERRIDE: stablehlo.count_leading_zeros
// OVERRIDE: return
func.func @cast_mx_format(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = "mx.cast"(%x) {number = "e4m3fn", scale = "e8m0_t32", roundmode = "even", scalemode = "max"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// 2D tiles of 32x32 over a bf16 weight: the same reduction over two tile axes.

// CHECK-LABEL: func.func @cast_2d_tiles
// CHECK: stablehlo.reshape %{{.*}} : (tensor<64x64xi32>) -> tensor<2x32x2x32xi32>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<2x32x2x32xi32>, tensor<i32>) -> tensor<2x2xi32>
// CHECK: stablehlo.convert %{{.*}} : (tensor<64x64xf32>) -> tensor<64x64xbf16>
// CHECK-NOT: mx.
func.func @cast_2d_tiles(%x: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %y = "mx.cast"(%x) {number = "e4m3fn", scale = "e8m0_t32x32", roundmode = "even", scalemode = "midmax"} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  return %y : tensor<64x64xbf16>
}

// -----

// Float scales (nvfp4's rule as a datatype, with elements rounded ties away: with `even`
// this datatype is nvfp4 itself, which the MX recipe lowers): amax / 6 and x / s are exact
// f32 quotients:
// RNE(x * RN(1 / d)) in f64 (XLA:CPU would multiply by an f32 reciprocal), and an integer
// division of the significands where the quotient is an f32 subnormal (XLA:CPU flushes them)
// and the spec could tell: for the scale, not for e2m1 elements (spacing 0.5: any quotient
// below 2^-126 rounds to a signed zero).

// CHECK-LABEL: func.func @quantize_float_scale
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x4x16xi32>, tensor<i32>) -> tensor<4x4xi32>
// CHECK: stablehlo.divide %{{.*}}, %{{.*}} : tensor<4x4xi64>
// CHECK: %[[R:.*]] = stablehlo.divide %{{.*}}, %{{.*}} : tensor<4x1x4x16xf64>
// CHECK: stablehlo.multiply %{{.*}}, %[[R]] : tensor<4x1x4x16xf64>
// CHECK-NOT: stablehlo.divide %{{.*}} : tensor<4x1x4x16xi64>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4x64xui4>) -> tensor<4x64xf4E2M1FN>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4x4xui8>) -> tensor<4x4xf8E4M3FN>
// CHECK-NOT: mx.
func.func @quantize_float_scale(%x: tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>) {
  %c, %s = "mx.quantize"(%x) {number = "e2m1fo", scale = "e4m3fn_t16", roundmode = "nearest"} : (tensor<4x64xf32>) -> (tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>)
  return %c, %s : tensor<4x64xf4E2M1FN>, tensor<4x4xf8E4M3FN>
}

// -----

// Zero points: the tile's minimum and maximum as integer reductions of an order-preserving key
// of the bits; the codes, scales and zero points come out in their storage types.

// CHECK-LABEL: func.func @quantize_zero_points
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.minimum across dimensions = [1, 3] : (tensor<4x1x4x16xi32>, tensor<i32>) -> tensor<4x4xi32>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x4x16xi32>, tensor<i32>) -> tensor<4x4xi32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x64xui8>, tensor<4x4xf32>, tensor<4x4xui8>
func.func @quantize_zero_points(%x: tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x4xf32>, tensor<4x4xui8>) {
  %c, %s, %z = "mx.quantize"(%x) {number = "uint4", scale = "float32_uint8_t16"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x4xf32>, tensor<4x4xui8>)
  return %c, %s, %z : tensor<4x64xui8>, tensor<4x4xf32>, tensor<4x4xui8>
}

// -----

// Subtiles (shared micro-exponents, docs/semantics.md 10.3): mx9 is int8 with e8m0 scales per
// 16 values and a 1-bit offset per pair.  The pairs are tiles of their own (4, 1, 32, 2), whose
// amax reduce again to the tiles' (4, 1, 4, 8); E per tile spreads onto the pairs, each offset
// is min(E - E_pair, 1), and the elements take the shift E - o.  Three results: codes, scales,
// offsets (ui8).

// CHECK-LABEL: func.func @quantize_subtiles
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x64xi32>) -> tensor<4x1x32x2xi32>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x32x2xi32>, tensor<i32>) -> tensor<4x32xi32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x32xi32>) -> tensor<4x1x4x8xi32>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x4x8xi32>, tensor<i32>) -> tensor<4x4xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 2] : (tensor<4x4xi32>) -> tensor<4x1x4x8xi32>
// CHECK: %[[OFF:.*]] = stablehlo.minimum %{{.*}}, %{{.*}} : tensor<4x32xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 2] : (tensor<4x32xi32>) -> tensor<4x1x32x2xi32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<4x1x32x2xi32>) -> tensor<4x64xi32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>
// CHECK-NOT: mx.
func.func @quantize_subtiles(%x: tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>) {
  %c, %s, %o = "mx.quantize"(%x) {number = "mx9"} : (tensor<4x64xf32>) -> (tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>)
  return %c, %s, %o : tensor<4x64xi8>, tensor<4x4xf8E8M0FNU>, tensor<4x32xui8>
}

// -----

// Dequantize with 2D subtiles: each tile's E spread onto its 4x4 subtiles (8x8 of them), less
// the offsets operand, is the shift of the codes' values.

// CHECK-LABEL: func.func @dequantize_subtiles
// CHECK: stablehlo.convert %arg2 : (tensor<8x8xui8>) -> tensor<8x8xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 2] : (tensor<2x2xi32>) -> tensor<2x4x2x4xi32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<2x4x2x4xi32>) -> tensor<8x8xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 2] : (tensor<8x8xi32>) -> tensor<8x4x8x4xi32>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<32x32xi32>) -> tensor<8x4x8x4xi32>
// CHECK: return %{{.*}} : tensor<32x32xbf16>
// CHECK-NOT: mx.
func.func @dequantize_subtiles(%c: tensor<32x32xf8E4M3FN>, %s: tensor<2x2xf8E8M0FNU>, %o: tensor<8x8xui8>) -> tensor<32x32xbf16> {
  %y = "mx.dequantize"(%c, %s, %o) {number = "e4m3fn", scale = "e8m0_t16x16_s4x4o2"} : (tensor<32x32xf8E4M3FN>, tensor<2x2xf8E8M0FNU>, tensor<8x8xui8>) -> tensor<32x32xbf16>
  return %y : tensor<32x32xbf16>
}

// -----

// A three-level cast (tensor x tile x subtile): y = x / g as an exact quotient (RN_f64(x *
// RN_f64(1 / |g|)) rounded once, never an f32 division XLA:CPU would turn into a reciprocal
// multiply), mx9's rules on y, and each value times g as an exact f64 product rounded once.

// CHECK-LABEL: func.func @cast_three_levels
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<i32>) -> tensor<4x64xi32>
// CHECK: %[[R:.*]] = stablehlo.divide %{{.*}}, %{{.*}} : tensor<4x64xf64>
// CHECK: stablehlo.multiply %{{.*}}, %[[R]] : tensor<4x64xf64>
// CHECK: applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x32x2xi32>, tensor<i32>) -> tensor<4x32xi32>
// CHECK: applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x4x8xi32>, tensor<i32>) -> tensor<4x4xi32>
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<4x64xf64>
// CHECK: return %{{.*}} : tensor<4x64xf32>
// CHECK-NOT: mx.
func.func @cast_three_levels(%x: tensor<4x64xf32>, %g: tensor<f32>) -> tensor<4x64xf32> {
  %y = "mx.cast"(%x, %g) {number = "int8", scale = "e8m0_t16_s2o1_gf32", roundmode = "even", scalemode = "max"} : (tensor<4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// The datatype forms of quantize / dequantize of a two-level datatype: the same tensor level
// (x / g exactly, before the tiles; the tile level's values times g, after).

// CHECK-LABEL: func.func @quantize_dequantize_two_level
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [] : (tensor<i32>) -> tensor<4x64xi32>
// CHECK: %[[R:.*]] = stablehlo.divide %{{.*}}, %{{.*}} : tensor<4x64xf64>
// CHECK: stablehlo.multiply %{{.*}}, %[[R]] : tensor<4x64xf64>
// CHECK: applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x2x32xi32>, tensor<i32>) -> tensor<4x2xi32>
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<f32>) -> tensor<i32>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<4x64xf64>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xbf16>
// CHECK-NOT: mx.
func.func @quantize_dequantize_two_level(%x: tensor<4x64xf32>, %g: tensor<f32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xbf16>) {
  %c, %s = "mx.quantize"(%x, %g) {number = "e4m3fn", scale = "e8m0_t32_gf32"} : (tensor<4x64xf32>, tensor<f32>) -> (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>)
  %y = "mx.dequantize"(%c, %s, %g) {number = "e4m3fn", scale = "e8m0_t32_gf32"} : (tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<f32>) -> tensor<4x64xbf16>
  return %c, %s, %y : tensor<4x64xf8E4M3FN>, tensor<4x2xf8E8M0FNU>, tensor<4x64xbf16>
}

// -----

// Sparsity: the rank of each value in its group (values that beat it: a larger magnitude, or
// an equal one at a lower index), the m of rank < m kept.

// CHECK-LABEL: func.func @sparse
// CHECK: stablehlo.reshape %{{.*}} : (tensor<2x8xi32>) -> tensor<2x2x4xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1, 2] : (tensor<2x2x4xi32>) -> tensor<2x2x4x4xi32>
// CHECK: stablehlo.broadcast_in_dim %{{.*}}, dims = [0, 1, 3] : (tensor<2x2x4xi32>) -> tensor<2x2x4x4xi32>
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.add across dimensions = [3] : (tensor<2x2x4x4xi32>, tensor<i32>) -> tensor<2x2x4xi32>
// CHECK: stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x2x4xi1>, tensor<2x2x4xf16>
// CHECK: stablehlo.reshape %{{.*}} : (tensor<2x2x4xf16>) -> tensor<2x8xf16>
func.func @sparse(%x: tensor<2x8xf16>) -> tensor<2x8xf16> {
  %z = "mx.sparse"(%x) {n = 4 : i64, m = 2 : i64, dim = 1 : i64} : (tensor<2x8xf16>) -> tensor<2x8xf16>
  return %z : tensor<2x8xf16>
}

// -----

// A valid datatype the lowering cannot compute exactly is reported at the op.

func.func @wide_int_float_scale(%x: tensor<4x64xf32>) {
  // expected-error @+1 {{'mx.cast' op int32:e8m23_t0: float scales of integers wider than 24 bits divide by a maximum that is not an f32 value; the lowering does not compute that quotient exactly}}
  %y = "mx.cast"(%x) {number = "int32", scale = "float32_t0"} : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Lookup tables (docs/semantics.md section 10.7): the codec counts, in i64 from the exact
// floor / ceiling of x * 2^-E in units of the table's finest bit, the gaps x rounds past (one
// comparison per gap of nf4's 16 values); the codes are stored ui8.

// CHECK-LABEL: func.func @quantize_nf4
// CHECK: stablehlo.reduce(%{{.*}} init: %{{.*}}) applies stablehlo.maximum across dimensions = [1, 3] : (tensor<4x1x2x32xi32>, tensor<i32>) -> tensor<4x2xi32>
// CHECK-NOT: stablehlo.divide
// CHECK: %[[FL:.*]] = stablehlo.shift_right_logical %{{.*}}, %{{.*}} : tensor<4x1x2x32xi64>
// CHECK: stablehlo.compare GT, %{{.*}}, %{{.*}}, SIGNED : (tensor<4x1x2x32xi64>, tensor<4x1x2x32xi64>) -> tensor<4x1x2x32xi1>
// CHECK: stablehlo.compare GE, %{{.*}}, %{{.*}}, SIGNED : (tensor<4x1x2x32xi64>, tensor<4x1x2x32xi64>) -> tensor<4x1x2x32xi1>
// CHECK-NOT: stablehlo.multiply
// CHECK: stablehlo.convert %{{.*}} : (tensor<4x64xi32>) -> tensor<4x64xui8>
// CHECK: return %{{.*}}, %{{.*}} : tensor<4x64xui8>, tensor<4x2xf8E8M0FNU>
func.func @quantize_nf4(%x: tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x2xf8E8M0FNU>) {
  %c, %s = "mx.quantize"(%x) {number = "nf4", scale = "e8m0_t32"} : (tensor<4x64xf32>) -> (tensor<4x64xui8>, tensor<4x2xf8E8M0FNU>)
  return %c, %s : tensor<4x64xui8>, tensor<4x2xf8E8M0FNU>
}

// -----

// A custom table (number = "lut" with its values) with stochastic rounding: per gap, the
// random bits times the gap's width (both gaps of width 1 share one product), compared with
// the distance to the neighbour toward zero; the gap straddling 0 (no 0 in the table) selects
// by x's sign.  Decoding selects the f32 value by the code's bits.

// CHECK-LABEL: func.func @cast_lut_table
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<8xui32>) -> tensor<8xi32>
// CHECK: %[[R:.*]] = stablehlo.and %{{.*}}, %{{.*}} : tensor<8xi64>
// CHECK: %[[RD:.*]] = stablehlo.multiply %[[R]], %{{.*}} : tensor<8xi64>
// CHECK: stablehlo.compare GT, %{{.*}}, %[[RD]], SIGNED
// CHECK: stablehlo.compare LE, %{{.*}}, %[[RD]], SIGNED
// CHECK: stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8xi1>
// CHECK-NOT: stablehlo.multiply %[[R]]
// CHECK: stablehlo.compare LE, %{{.*}}, %[[RD]], SIGNED
// CHECK: stablehlo.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8xi32>
// CHECK: return %{{.*}} : tensor<8xf32>
func.func @cast_lut_table(%x: tensor<8xf32>, %r: tensor<8xui32>) -> tensor<8xf32> {
  %y = "mx.cast"(%x, %r) {number = "lut", table = array<f32: -1.5, -0.5, 0.5, 1.5>, roundmode = "stochastic"} : (tensor<8xf32>, tensor<8xui32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A table whose span is too wide for one i64 frame in stochastic rounding (2^-30 next to
// 2) takes the per-gap encoder: x read as i64 bits, the random bits t = 2^32 - r and r as
// the two weights of the gap's ends (two i64 products), no mx op left.

// CHECK-LABEL: func.func @lut_wide
// CHECK-NOT: mx.
// CHECK: stablehlo.convert %{{.*}} : (tensor<8xi32>) -> tensor<8xi64>
// CHECK: stablehlo.bitcast_convert %arg1 : (tensor<8xui32>) -> tensor<8xi32>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<8xi64>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<8xi64>
// CHECK: return %{{.*}} : tensor<8xf32>
func.func @lut_wide(%x: tensor<8xf32>, %r: tensor<8xui32>) -> tensor<8xf32> {
  %y = "mx.cast"(%x, %r) {number = "lut", table = array<f32: 0.0, 9.31322574615478515625e-10, 1.0, 2.0>, roundmode = "stochastic"} : (tensor<8xf32>, tensor<8xui32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
