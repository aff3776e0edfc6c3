// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-expand-narrow-floats | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-expand-narrow-floats='types=f6E2M3FN,f6E3M2FN,f8E8M0FNU' | FileCheck %s --check-prefix=SUBSET

// Narrow-float conversions become integer ops generated from the codec descriptions; every
// value of an expanded narrow type becomes a ui8 tensor of codes.  Numerics are checked
// exhaustively on XLA:CPU by test/python/test_expand_narrow_floats.py; these cases pin the
// structure of what is emitted.

// f32 -> f8E4M3FN: the magnitude is rebiased and rounded to nearest even in one step (add
// the rebias, half - 1 and the kept LSB, shift); subnormal results come from one f32 add of
// 2^14 (whose ulp is e4m3's subnormal step 2^-9), selected below 2^-6 (0x3C800000); one min
// against the NaN code 0x7F is the overflow rule (Inf and NaN land there too); the sign is
// or-ed back in.
// CHECK-LABEL: func.func @truncf_f32_e4m3
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>) -> tensor<8xui8>
// CHECK: %[[U:.*]] = stablehlo.bitcast_convert %[[X]] : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[MAGMASK:.*]] = stablehlo.constant dense<2147483647> : tensor<8xi32>
// CHECK: %[[A:.*]] = stablehlo.and %[[U]], %[[MAGMASK]] : tensor<8xi32>
// CHECK: %[[SH:.*]] = stablehlo.constant dense<20> : tensor<8xi32>
// CHECK: %[[LSB:.*]] = stablehlo.shift_right_logical %[[A]], %[[SH]]
// CHECK: %[[BIT:.*]] = stablehlo.and %[[LSB]]
// CHECK: %[[C:.*]] = stablehlo.constant dense<-1006108673> : tensor<8xi32>
// CHECK: %[[INC:.*]] = stablehlo.add %[[BIT]], %[[C]]
// CHECK: %[[SUM:.*]] = stablehlo.add %[[A]], %[[INC]]
// CHECK: %[[NORMAL:.*]] = stablehlo.shift_right_logical %[[SUM]], %[[SH]]
// CHECK: %[[M:.*]] = stablehlo.constant dense<1182793728> : tensor<8xi32>
// CHECK: %[[AF:.*]] = stablehlo.bitcast_convert %[[A]] : (tensor<8xi32>) -> tensor<8xf32>
// CHECK: %[[MF:.*]] = stablehlo.bitcast_convert %[[M]] : (tensor<8xi32>) -> tensor<8xf32>
// CHECK: %[[SUMF:.*]] = stablehlo.add %[[AF]], %[[MF]] : tensor<8xf32>
// CHECK: %[[SUMI:.*]] = stablehlo.bitcast_convert %[[SUMF]] : (tensor<8xf32>) -> tensor<8xi32>
// CHECK: %[[SUBN:.*]] = stablehlo.subtract %[[SUMI]], %[[M]] : tensor<8xi32>
// CHECK: %[[MINNORMAL:.*]] = stablehlo.constant dense<1015021568> : tensor<8xi32>
// CHECK: %[[TINY:.*]] = stablehlo.compare LT, %[[A]], %[[MINNORMAL]], SIGNED
// CHECK: %[[MAG:.*]] = stablehlo.select %[[TINY]], %[[SUBN]], %[[NORMAL]]
// CHECK: %[[NAN:.*]] = stablehlo.constant dense<127> : tensor<8xi32>
// CHECK: %[[SAT:.*]] = stablehlo.minimum %[[MAG]], %[[NAN]] : tensor<8xi32>
// CHECK: %[[SGN:.*]] = stablehlo.and %{{.*}}, %{{.*}} : tensor<8xi32>
// CHECK: %[[CODE:.*]] = stablehlo.or %[[SAT]], %[[SGN]] : tensor<8xi32>
// CHECK: %[[R:.*]] = stablehlo.convert %[[CODE]] : (tensor<8xi32>) -> tensor<8xui8>
// CHECK: return %[[R]] : tensor<8xui8>
// CHECK-NOT: f8E4M3FN
// SUBSET-LABEL: func.func @truncf_f32_e4m3
// SUBSET: stablehlo.convert %{{.*}} : (tensor<8xf32>) -> tensor<8xf8E4M3FN>
func.func @truncf_f32_e4m3(%x: tensor<8xf32>) -> tensor<8xf8E4M3FN> {
  %0 = stablehlo.convert %x : (tensor<8xf32>) -> tensor<8xf8E4M3FN>
  return %0 : tensor<8xf8E4M3FN>
}

// -----

// bf16 -> f4E2M1FN works on 16-bit integers; NaN gives the -0 code 0x8 whatever its sign.
// CHECK-LABEL: func.func @truncf_bf16_f4
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<2x3xbf16>) -> tensor<2x3xi16>
// CHECK: %[[INF:.*]] = stablehlo.constant dense<32640> : tensor<2x3xi16>
// CHECK: %[[ISNAN:.*]] = stablehlo.compare GT, %{{.*}}, %[[INF]], SIGNED
// CHECK: %[[NEGZERO:.*]] = stablehlo.constant dense<8> : tensor<2x3xi16>
// CHECK: %[[SIGNED:.*]] = stablehlo.or
// CHECK: %[[CODE:.*]] = stablehlo.select %[[ISNAN]], %[[NEGZERO]], %[[SIGNED]]
// CHECK: stablehlo.convert %[[CODE]] : (tensor<2x3xi16>) -> tensor<2x3xui8>
func.func @truncf_bf16_f4(%x: tensor<2x3xbf16>) -> tensor<2x3xf4E2M1FN> {
  %0 = stablehlo.convert %x : (tensor<2x3xbf16>) -> tensor<2x3xf4E2M1FN>
  return %0 : tensor<2x3xf4E2M1FN>
}

// -----

// f32 -> f8E8M0FNU: ties round up (add half; half - 1 for f32 subnormals: ml_dtypes' rule),
// overflow and NaN meet 0xFF in one min; zero and negatives -> 0xFF.
// CHECK-LABEL: func.func @truncf_f32_e8m0
// CHECK: %[[A:.*]] = stablehlo.and
// CHECK: %[[DENORM:.*]] = stablehlo.compare LT, %[[A]], %{{.*}}, SIGNED
// CHECK: %[[DOWN:.*]] = stablehlo.constant dense<4194303> : tensor<4xi32>
// CHECK: %[[UP:.*]] = stablehlo.constant dense<4194304> : tensor<4xi32>
// CHECK: %[[INC:.*]] = stablehlo.select %[[DENORM]], %[[DOWN]], %[[UP]]
// CHECK: %[[SUM:.*]] = stablehlo.add %[[A]], %[[INC]]
// CHECK: %[[E:.*]] = stablehlo.shift_right_logical %[[SUM]]
// CHECK: %[[FF:.*]] = stablehlo.constant dense<255> : tensor<4xi32>
// CHECK: %[[SAT:.*]] = stablehlo.minimum %[[E]], %[[FF]]
// CHECK: %[[ZERO:.*]] = stablehlo.compare EQ
// CHECK: %[[NEG:.*]] = stablehlo.compare NE
// CHECK: %[[BAD:.*]] = stablehlo.or %[[ZERO]], %[[NEG]] : tensor<4xi1>
// CHECK: stablehlo.select %[[BAD]], %[[FF]], %[[SAT]] : tensor<4xi1>, tensor<4xi32>
// CHECK: -> tensor<4xui8>
func.func @truncf_f32_e8m0(%x: tensor<4xf32>) -> tensor<4xf8E8M0FNU> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xf8E8M0FNU>
  return %0 : tensor<4xf8E8M0FNU>
}

// -----

// f8E5M2 -> f16: the codes widen to i16, the result is a bitcast; Inf and NaN are selected.
// CHECK-LABEL: func.func @extf_e5m2_f16
// CHECK-SAME: (%[[C:.*]]: tensor<4xui8>) -> tensor<4xf16>
// CHECK: %[[W:.*]] = stablehlo.convert %[[C]] : (tensor<4xui8>) -> tensor<4xi16>
// CHECK: stablehlo.select
// CHECK: %[[BITS:.*]] = stablehlo.or
// CHECK: %[[F:.*]] = stablehlo.bitcast_convert %[[BITS]] : (tensor<4xi16>) -> tensor<4xf16>
// CHECK: return %[[F]]
func.func @extf_e5m2_f16(%c: tensor<4xf8E5M2>) -> tensor<4xf16> {
  %0 = stablehlo.convert %c : (tensor<4xf8E5M2>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// f6E3M2FN -> f32: normals are a shift and a rebias; subnormals m * 2^-4 are one exact f32
// subtraction, (2^19 | m) - 2^19 (0x49000000); bits above the 6-bit code are ignored.
// CHECK-LABEL: func.func @extf_f6_f32
// CHECK: %[[W:.*]] = stablehlo.convert %{{.*}} : (tensor<16xui8>) -> tensor<16xi32>
// CHECK: %[[MAGMASK:.*]] = stablehlo.constant dense<31> : tensor<16xi32>
// CHECK: %[[A:.*]] = stablehlo.and %[[W]], %[[MAGMASK]]
// CHECK: %[[SHIFTED:.*]] = stablehlo.shift_left %[[A]]
// CHECK: %[[NORMAL:.*]] = stablehlo.add %[[SHIFTED]]
// CHECK: %[[M:.*]] = stablehlo.constant dense<1224736768> : tensor<16xi32>
// CHECK: %[[MM:.*]] = stablehlo.or %[[A]], %[[M]]
// CHECK: %[[DIFF:.*]] = stablehlo.subtract %{{.*}}, %{{.*}} : tensor<16xf32>
// CHECK: %[[SUBN:.*]] = stablehlo.bitcast_convert %[[DIFF]] : (tensor<16xf32>) -> tensor<16xi32>
// CHECK: %[[ISSUBN:.*]] = stablehlo.compare LT, %[[A]]
// CHECK: %[[MAG:.*]] = stablehlo.select %[[ISSUBN]], %[[SUBN]], %[[NORMAL]]
// CHECK: %[[SIGN:.*]] = stablehlo.and %[[W]]
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<16xi32>) -> tensor<16xf32>
// SUBSET-LABEL: func.func @extf_f6_f32
// SUBSET: stablehlo.bitcast_convert %{{.*}} : (tensor<16xi32>) -> tensor<16xf32>
func.func @extf_f6_f32(%c: tensor<16xf6E3M2FN>) -> tensor<16xf32> {
  %0 = stablehlo.convert %c : (tensor<16xf6E3M2FN>) -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// f8E8M0FNU -> f16 overflows to Inf and rounds 2^-25 to 0: 16-bit integers with the exponent
// clamped to 31.
// CHECK-LABEL: func.func @extf_e8m0_f16
// CHECK: %[[C31:.*]] = stablehlo.constant dense<31> : tensor<2xi16>
// CHECK: stablehlo.minimum %{{.*}}, %[[C31]] : tensor<2xi16>
// CHECK: %[[INF:.*]] = stablehlo.constant dense<31744> : tensor<2xi16>
// CHECK: stablehlo.minimum %{{.*}}, %[[INF]] : tensor<2xi16>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<2xi16>) -> tensor<2xf16>
func.func @extf_e8m0_f16(%c: tensor<2xf8E8M0FNU>) -> tensor<2xf16> {
  %0 = stablehlo.convert %c : (tensor<2xf8E8M0FNU>) -> tensor<2xf16>
  return %0 : tensor<2xf16>
}

// -----

// narrow -> narrow converts codes directly; a convert to the same type disappears.
// CHECK-LABEL: func.func @narrow_to_narrow
// CHECK-SAME: (%[[C:.*]]: tensor<4xui8>) -> (tensor<4xui8>, tensor<4xui8>)
// CHECK: stablehlo.convert %[[C]] : (tensor<4xui8>) -> tensor<4xi16>
// CHECK: %[[F4:.*]] = stablehlo.convert %{{.*}} : (tensor<4xi16>) -> tensor<4xui8>
// CHECK: return %[[F4]], %[[C]] : tensor<4xui8>, tensor<4xui8>
func.func @narrow_to_narrow(%c: tensor<4xf8E4M3FN>) -> (tensor<4xf4E2M1FN>, tensor<4xf8E4M3FN>) {
  %0 = stablehlo.convert %c : (tensor<4xf8E4M3FN>) -> tensor<4xf4E2M1FN>
  %1 = stablehlo.convert %c : (tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  return %0, %1 : tensor<4xf4E2M1FN>, tensor<4xf8E4M3FN>
}

// -----

// Integers and other float types go through f32, which is exact here; f64 is a codec source.
// CHECK-LABEL: func.func @through_f32
// CHECK: %[[F:.*]] = stablehlo.convert %{{.*}} : (tensor<4xi16>) -> tensor<4xf32>
// CHECK: stablehlo.bitcast_convert %[[F]] : (tensor<4xf32>) -> tensor<4xi32>
// CHECK: stablehlo.bitcast_convert %{{.*}} : (tensor<4xf64>) -> tensor<4xi64>
// CHECK: stablehlo.convert %{{.*}} : (tensor<4xf32>) -> tensor<4xi32>
func.func @through_f32(%i: tensor<4xi16>, %d: tensor<4xf64>) -> (tensor<4xf6E2M3FN>, tensor<4xf4E2M1FN>, tensor<4xi32>) {
  %0 = stablehlo.convert %i : (tensor<4xi16>) -> tensor<4xf6E2M3FN>
  %1 = stablehlo.convert %d : (tensor<4xf64>) -> tensor<4xf4E2M1FN>
  %2 = stablehlo.convert %0 : (tensor<4xf6E2M3FN>) -> tensor<4xi32>
  return %0, %1, %2 : tensor<4xf6E2M3FN>, tensor<4xf4E2M1FN>, tensor<4xi32>
}

// -----

// Constants are re-encoded: decimal elements, -0, a splat, a hex NaN code.
// CHECK-LABEL: func.func @constants
// CHECK-DAG: stablehlo.constant dense<{{\[}}[8, 32], [31, 1]]> : tensor<2x2xui8>
// CHECK-DAG: stablehlo.constant dense<126> : tensor<3xui8>
// CHECK-DAG: stablehlo.constant dense<[127, 255, 126, 0]> : tensor<4xui8>
// CHECK-DAG: stablehlo.constant dense<[7, 15, 1, 9]> : tensor<4xui8>
// SUBSET-LABEL: func.func @constants
// SUBSET-DAG: stablehlo.constant dense<{{\[}}[8, 32], [31, 1]]> : tensor<2x2xui8>
// SUBSET-DAG: stablehlo.constant dense<126> : tensor<3xui8>
// SUBSET-DAG: stablehlo.constant dense<[6.000000e+00, -6.000000e+00, 5.000000e-01, -5.000000e-01]> : tensor<4xf4E2M1FN>
func.func @constants() -> (tensor<2x2xf6E2M3FN>, tensor<3xf8E8M0FNU>, tensor<4xf8E4M3FN>, tensor<4xf4E2M1FN>) {
  %0 = stablehlo.constant dense<[[1.0, -0.0], [7.5, 0.125]]> : tensor<2x2xf6E2M3FN>
  %1 = stablehlo.constant dense<0.5> : tensor<3xf8E8M0FNU>
  %2 = stablehlo.constant dense<[0x7F, 0xFF, 448.0, 0.0]> : tensor<4xf8E4M3FN>
  %3 = stablehlo.constant dense<[6.0, -6.0, 0.5, -0.5]> : tensor<4xf4E2M1FN>
  return %0, %1, %2, %3 : tensor<2x2xf6E2M3FN>, tensor<3xf8E8M0FNU>, tensor<4xf8E4M3FN>, tensor<4xf4E2M1FN>
}

// -----

// Function signatures, calls and the data-movement ops are retyped in place.
// CHECK-LABEL: func.func private @callee
// CHECK-SAME: (tensor<2x3xui8>) -> tensor<3x2xui8>
// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[A:.*]]: tensor<2x3xui8>, %[[B:.*]]: tensor<2x3xui8>, %[[P:.*]]: tensor<2x3xi1>, %[[I:.*]]: tensor<i32>)
// CHECK: %[[R:.*]] = stablehlo.reshape %[[A]] : (tensor<2x3xui8>) -> tensor<3x2xui8>
// CHECK: %[[T:.*]] = stablehlo.transpose %[[A]], dims = [1, 0] : (tensor<2x3xui8>) -> tensor<3x2xui8>
// CHECK: %[[BC:.*]] = stablehlo.broadcast_in_dim %[[A]], dims = [1, 2] : (tensor<2x3xui8>) -> tensor<4x2x3xui8>
// CHECK: %[[S:.*]] = stablehlo.slice %[[A]] [0:1, 1:3] : (tensor<2x3xui8>) -> tensor<1x2xui8>
// CHECK: %[[CAT:.*]] = stablehlo.concatenate %[[A]], %[[B]], dim = 0 : (tensor<2x3xui8>, tensor<2x3xui8>) -> tensor<4x3xui8>
// CHECK: %[[PV:.*]] = stablehlo.constant dense<32> : tensor<ui8>
// CHECK: stablehlo.pad %[[A]], %[[PV]], low = [1, 0], high = [0, 1], interior = [0, 0] : (tensor<2x3xui8>, tensor<ui8>) -> tensor<3x4xui8>
// CHECK: stablehlo.select %[[P]], %[[A]], %[[B]] : tensor<2x3xi1>, tensor<2x3xui8>
// CHECK: stablehlo.dynamic_slice %[[A]], %[[I]], %[[I]], sizes = [1, 1] : (tensor<2x3xui8>, tensor<i32>, tensor<i32>) -> tensor<1x1xui8>
// CHECK: "stablehlo.gather"(%[[A]], %{{.*}}) {{.*}} : (tensor<2x3xui8>, tensor<2x1xi32>) -> tensor<2x3xui8>
// CHECK: %[[TUP:.*]] = stablehlo.tuple %[[R]], %[[T]] : tuple<tensor<3x2xui8>, tensor<3x2xui8>>
// CHECK: stablehlo.get_tuple_element %[[TUP]][0] : (tuple<tensor<3x2xui8>, tensor<3x2xui8>>) -> tensor<3x2xui8>
// CHECK: call @callee(%[[A]]) : (tensor<2x3xui8>) -> tensor<3x2xui8>
// CHECK: return {{.*}} : tensor<3x2xui8>, tensor<4x2x3xui8>, tensor<1x2xui8>, tensor<4x3xui8>, tensor<3x4xui8>, tensor<2x3xui8>, tensor<1x1xui8>, tensor<2x3xui8>, tensor<3x2xui8>, tensor<3x2xui8>
func.func private @callee(tensor<2x3xf6E2M3FN>) -> tensor<3x2xf6E2M3FN>
func.func @data_movement(%a: tensor<2x3xf6E2M3FN>, %b: tensor<2x3xf6E2M3FN>, %p: tensor<2x3xi1>, %i: tensor<i32>)
    -> (tensor<3x2xf6E2M3FN>, tensor<4x2x3xf6E2M3FN>, tensor<1x2xf6E2M3FN>, tensor<4x3xf6E2M3FN>, tensor<3x4xf6E2M3FN>,
        tensor<2x3xf6E2M3FN>, tensor<1x1xf6E2M3FN>, tensor<2x3xf6E2M3FN>, tensor<3x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>) {
  %r = stablehlo.reshape %a : (tensor<2x3xf6E2M3FN>) -> tensor<3x2xf6E2M3FN>
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf6E2M3FN>) -> tensor<3x2xf6E2M3FN>
  %bc = stablehlo.broadcast_in_dim %a, dims = [1, 2] : (tensor<2x3xf6E2M3FN>) -> tensor<4x2x3xf6E2M3FN>
  %s = stablehlo.slice %a [0:1, 1:3] : (tensor<2x3xf6E2M3FN>) -> tensor<1x2xf6E2M3FN>
  %cat = stablehlo.concatenate %a, %b, dim = 0 : (tensor<2x3xf6E2M3FN>, tensor<2x3xf6E2M3FN>) -> tensor<4x3xf6E2M3FN>
  %pv = stablehlo.constant dense<-0.0> : tensor<f6E2M3FN>
  %pad = stablehlo.pad %a, %pv, low = [1, 0], high = [0, 1], interior = [0, 0] : (tensor<2x3xf6E2M3FN>, tensor<f6E2M3FN>) -> tensor<3x4xf6E2M3FN>
  %sel = stablehlo.select %p, %a, %b : tensor<2x3xi1>, tensor<2x3xf6E2M3FN>
  %ds = stablehlo.dynamic_slice %a, %i, %i, sizes = [1, 1] : (tensor<2x3xf6E2M3FN>, tensor<i32>, tensor<i32>) -> tensor<1x1xf6E2M3FN>
  %idx = stablehlo.constant dense<[[1], [0]]> : tensor<2x1xi32>
  %g = "stablehlo.gather"(%a, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 3>} : (tensor<2x3xf6E2M3FN>, tensor<2x1xi32>) -> tensor<2x3xf6E2M3FN>
  %tup = stablehlo.tuple %r, %t : tuple<tensor<3x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>>
  %gte = stablehlo.get_tuple_element %tup[0] : (tuple<tensor<3x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>>) -> tensor<3x2xf6E2M3FN>
  %call = call @callee(%a) : (tensor<2x3xf6E2M3FN>) -> tensor<3x2xf6E2M3FN>
  return %r, %bc, %s, %cat, %pad, %sel, %ds, %g, %gte, %call : tensor<3x2xf6E2M3FN>, tensor<4x2x3xf6E2M3FN>, tensor<1x2xf6E2M3FN>, tensor<4x3xf6E2M3FN>, tensor<3x4xf6E2M3FN>, tensor<2x3xf6E2M3FN>, tensor<1x1xf6E2M3FN>, tensor<2x3xf6E2M3FN>, tensor<3x2xf6E2M3FN>, tensor<3x2xf6E2M3FN>
}

// -----

// bitcast_convert between 8-bit types: to the codes' own storage it disappears, otherwise it
// bitcasts the ui8 codes.
// CHECK-LABEL: func.func @bitcasts
// CHECK-SAME: (%[[C:.*]]: tensor<4xui8>)
// CHECK: %[[I8:.*]] = stablehlo.bitcast_convert %[[C]] : (tensor<4xui8>) -> tensor<4xi8>
// CHECK: %[[I32:.*]] = stablehlo.bitcast_convert %[[C]] : (tensor<4xui8>) -> tensor<i32>
// CHECK: return %[[I8]], %[[C]], %[[C]], %[[I32]]
// SUBSET-LABEL: func.func @bitcasts
// SUBSET: stablehlo.bitcast_convert %{{.*}} : (tensor<4xf8E4M3FN>) -> tensor<4xi8>
func.func @bitcasts(%c: tensor<4xf8E4M3FN>) -> (tensor<4xi8>, tensor<4xf8E5M2>, tensor<4xui8>, tensor<i32>) {
  %0 = stablehlo.bitcast_convert %c : (tensor<4xf8E4M3FN>) -> tensor<4xi8>
  %1 = stablehlo.bitcast_convert %c : (tensor<4xf8E4M3FN>) -> tensor<4xf8E5M2>
  %2 = stablehlo.bitcast_convert %c : (tensor<4xf8E4M3FN>) -> tensor<4xui8>
  %3 = stablehlo.bitcast_convert %c : (tensor<4xf8E4M3FN>) -> tensor<i32>
  return %0, %1, %2, %3 : tensor<4xi8>, tensor<4xf8E5M2>, tensor<4xui8>, tensor<i32>
}

// -----

// bitcast_convert between f4E2M1FN and a 4-bit integer (how code-level lowerings make f4
// values): the ui8 codes are the integer's bits, so ui4 zero-extends, i4 goes through ui4
// first (code 8 is i4 -8), and the way back truncates.
// CHECK-LABEL: func.func @sub_byte_bitcasts
// CHECK-SAME: (%[[U:.*]]: tensor<4xui4>, %[[S:.*]]: tensor<4xi4>)
// CHECK: %[[A:.*]] = stablehlo.convert %[[U]] : (tensor<4xui4>) -> tensor<4xui8>
// CHECK: %[[SU:.*]] = stablehlo.convert %[[S]] : (tensor<4xi4>) -> tensor<4xui4>
// CHECK: %[[B:.*]] = stablehlo.convert %[[SU]] : (tensor<4xui4>) -> tensor<4xui8>
// CHECK: %[[BACK:.*]] = stablehlo.convert %[[A]] : (tensor<4xui8>) -> tensor<4xi4>
// CHECK: return %[[B]], %[[BACK]]
func.func @sub_byte_bitcasts(%u: tensor<4xui4>, %s: tensor<4xi4>) -> (tensor<4xf4E2M1FN>, tensor<4xi4>) {
  %a = stablehlo.bitcast_convert %u : (tensor<4xui4>) -> tensor<4xf4E2M1FN>
  %b = stablehlo.bitcast_convert %s : (tensor<4xi4>) -> tensor<4xf4E2M1FN>
  %back = stablehlo.bitcast_convert %a : (tensor<4xf4E2M1FN>) -> tensor<4xi4>
  return %b, %back : tensor<4xf4E2M1FN>, tensor<4xi4>
}

// -----

// Region block arguments are retyped (while); ops that only carry codes pass through.
// CHECK-LABEL: func.func @loop
// CHECK: stablehlo.while(%{{.*}} = %{{.*}}, %[[V:.*]] = %{{.*}}) : tensor<i32>, tensor<4xui8>
// CHECK: stablehlo.reverse %[[V]], dims = [0] : tensor<4xui8>
func.func @loop(%x: tensor<4xf6E3M2FN>, %n: tensor<i32>) -> tensor<4xf6E3M2FN> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %r:2 = stablehlo.while(%it = %zero, %v = %x) : tensor<i32>, tensor<4xf6E3M2FN>
  cond {
    %lt = stablehlo.compare LT, %it, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %next = stablehlo.add %it, %one : tensor<i32>
    %rev = stablehlo.reverse %v, dims = [0] : tensor<4xf6E3M2FN>
    stablehlo.return %next, %rev : tensor<i32>, tensor<4xf6E3M2FN>
  }
  return %r#1 : tensor<4xf6E3M2FN>
}

// -----

// Arithmetic on a narrow type cannot be expanded: an error at the op, nothing rewritten.
func.func @arith_on_narrow(%a: tensor<4xf6E2M3FN>) -> tensor<4xf6E2M3FN> {
  // expected-error @+1 {{'stablehlo.add' on f6E2M3FN cannot be expanded: mxlower-expand-narrow-floats supports only conversions, constants and data movement of narrow floats}}
  %0 = stablehlo.add %a, %a : tensor<4xf6E2M3FN>
  return %0 : tensor<4xf6E2M3FN>
}

// -----

// A reduction with a narrow-typed body is reported once, at the reduce.
func.func @reduce_on_narrow(%a: tensor<4xf6E3M2FN>, %init: tensor<f6E3M2FN>) -> tensor<f6E3M2FN> {
  // expected-error @+1 {{'stablehlo.reduce' on f6E3M2FN cannot be expanded}}
  %0 = stablehlo.reduce(%a init: %init) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf6E3M2FN>, tensor<f6E3M2FN>) -> tensor<f6E3M2FN>
  return %0 : tensor<f6E3M2FN>
}

// -----

// Every offending op is reported, not just the first.
func.func @two_errors(%a: tensor<4xf6E2M3FN>) -> tensor<4xi1> {
  // expected-error @+1 {{'stablehlo.negate' on f6E2M3FN cannot be expanded}}
  %0 = stablehlo.negate %a : tensor<4xf6E2M3FN>
  // expected-error @+1 {{'stablehlo.compare' on f6E2M3FN cannot be expanded}}
  %1 = stablehlo.compare LT, %0, %a : (tensor<4xf6E2M3FN>, tensor<4xf6E2M3FN>) -> tensor<4xi1>
  return %1 : tensor<4xi1>
}

// -----

// Through f32, i32 would round twice on the way to f8E8M0FNU (its range passes 2^24).
func.func @wide_int_to_e8m0(%i: tensor<4xi32>) -> tensor<4xf8E8M0FNU> {
  // expected-error @+1 {{convert from i32 to f8E8M0FNU cannot be expanded: i32 values above 2^24 would round twice (through f32)}}
  %0 = stablehlo.convert %i : (tensor<4xi32>) -> tensor<4xf8E8M0FNU>
  return %0 : tensor<4xf8E8M0FNU>
}

// -----

// Dynamic dimensions (jax.export's symbolic shapes): the constants are scalars broadcast to
// the operand's runtime shape (dynamic sizes read, static ones constant), built once per
// convert; shape refinement folds them.

// CHECK-LABEL: func.func @dynamic_shape
// CHECK-SAME: (%[[X:.*]]: tensor<?x3xf32>) -> tensor<?x3xui8>
// CHECK: %[[D0:.*]] = stablehlo.get_dimension_size %[[X]], dim = 0
// CHECK: %[[R0:.*]] = stablehlo.reshape %[[D0]] : (tensor<i32>) -> tensor<1xi32>
// CHECK: %[[D1:.*]] = stablehlo.constant dense<3> : tensor<1xi32>
// CHECK: %[[SHAPE:.*]] = stablehlo.concatenate %[[R0]], %[[D1]], dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
// CHECK: stablehlo.dynamic_broadcast_in_dim %{{.*}}, %[[SHAPE]], dims = [] : (tensor<i32>, tensor<2xi32>) -> tensor<?x3xi32>
// CHECK-NOT: stablehlo.get_dimension_size
// CHECK-NOT: f6E2M3FN
// CHECK: return %{{.*}} : tensor<?x3xui8>
func.func @dynamic_shape(%x: tensor<?x3xf32>) -> tensor<?x3xf6E2M3FN> {
  %0 = stablehlo.convert %x : (tensor<?x3xf32>) -> tensor<?x3xf6E2M3FN>
  return %0 : tensor<?x3xf6E2M3FN>
}

// -----

func.func @complex_result(%c: tensor<4xf6E2M3FN>) -> tensor<4xcomplex<f32>> {
  // expected-error @+1 {{convert from f6E2M3FN to complex<f32> cannot be expanded: unsupported result type}}
  %0 = stablehlo.convert %c : (tensor<4xf6E2M3FN>) -> tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}

// -----

func.func @custom_call(%c: tensor<4xf6E2M3FN>) -> tensor<4xf6E2M3FN> {
  // expected-error @+1 {{'stablehlo.custom_call' on f6E2M3FN cannot be expanded}}
  %0 = stablehlo.custom_call @foo(%c) : (tensor<4xf6E2M3FN>) -> tensor<4xf6E2M3FN>
  return %0 : tensor<4xf6E2M3FN>
}

// -----

// The FNUZ types: NaN inputs give 0x80 whatever their sign; there is no -0 (a zero magnitude
// keeps no sign); storage is ui8 like every narrow type.
// CHECK-LABEL: func.func @truncf_f16_e5m2fnuz
// CHECK-SAME: -> tensor<4xui8>
// CHECK: %[[NANC:.*]] = stablehlo.constant dense<128> : tensor<4xi16>
// CHECK: %[[SAT:.*]] = stablehlo.minimum %{{.*}}, %[[NANC]] : tensor<4xi16>
// CHECK: %[[ISZERO:.*]] = stablehlo.compare EQ, %[[SAT]]
// CHECK: %[[NOZ:.*]] = stablehlo.select %[[ISZERO]], %[[SAT]]
// CHECK: %[[CODE:.*]] = stablehlo.select %{{.*}}, %[[NANC]], %[[NOZ]]
// CHECK: stablehlo.convert %[[CODE]] : (tensor<4xi16>) -> tensor<4xui8>
// CHECK-NOT: f8E5M2FNUZ
// SUBSET-LABEL: func.func @truncf_f16_e5m2fnuz
// SUBSET: stablehlo.convert %{{.*}} : (tensor<4xf16>) -> tensor<4xf8E5M2FNUZ>
func.func @truncf_f16_e5m2fnuz(%x: tensor<4xf16>) -> tensor<4xf8E5M2FNUZ> {
  %0 = stablehlo.convert %x : (tensor<4xf16>) -> tensor<4xf8E5M2FNUZ>
  return %0 : tensor<4xf8E5M2FNUZ>
}

// -----

// f8E4M3 -> f8E4M3B11FNUZ: code to code, integer ops only.
// CHECK-LABEL: func.func @e4m3_to_e4m3b11fnuz
// CHECK-SAME: (%{{.*}}: tensor<4xui8>) -> tensor<4xui8>
// CHECK-NOT: f8E4M3
// SUBSET-LABEL: func.func @e4m3_to_e4m3b11fnuz
// SUBSET: stablehlo.convert %{{.*}} : (tensor<4xf8E4M3>) -> tensor<4xf8E4M3B11FNUZ>
func.func @e4m3_to_e4m3b11fnuz(%x: tensor<4xf8E4M3>) -> tensor<4xf8E4M3B11FNUZ> {
  %0 = stablehlo.convert %x : (tensor<4xf8E4M3>) -> tensor<4xf8E4M3B11FNUZ>
  return %0 : tensor<4xf8E4M3B11FNUZ>
}
