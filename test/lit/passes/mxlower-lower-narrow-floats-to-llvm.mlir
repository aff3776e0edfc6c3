// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-llvm | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-llvm=via-f32 | FileCheck %s --check-prefix=VIA

// arith.truncf / arith.extf on the narrow float types become integer ops; every narrow float
// type (scalars, vectors, memrefs, tensors, signatures, constants, globals) becomes i8.

// CHECK-LABEL: func.func @trunc_f32_to_e4m3
// CHECK-SAME: (%[[X:.*]]: f32) -> i8
// CHECK: %[[B:.*]] = arith.bitcast %[[X]] : f32 to i32
// CHECK: arith.shrui %{{.*}}, %{{.*}} : i32
// CHECK: arith.minsi %{{.*}}, %{{.*}} : i32
// CHECK: %[[C:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK-NOT: arith.truncf
// CHECK: return %[[C]] : i8
func.func @trunc_f32_to_e4m3(%x: f32) -> f8E4M3FN {
  %0 = arith.truncf %x : f32 to f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

// bf16 sources work on 16-bit integers; NaN/Inf handling is a compare and a select.
// With via-f32, bf16/f16 sources are first extended to f32 (exact), for 32-bit lanes.
// CHECK-LABEL: func.func @trunc_bf16_to_e5m2
// VIA-LABEL: func.func @trunc_bf16_to_e5m2
// VIA: %[[W:.*]] = arith.extf %{{.*}} : bf16 to f32
// VIA: arith.bitcast %[[W]] : f32 to i32
// VIA: arith.trunci %{{.*}} : i32 to i8
// CHECK: arith.bitcast %{{.*}} : bf16 to i16
// CHECK: arith.cmpi sgt, %{{.*}}, %{{.*}} : i16
// CHECK: arith.select
// CHECK: arith.trunci %{{.*}} : i16 to i8
// CHECK-NOT: arith.truncf
func.func @trunc_bf16_to_e5m2(%x: bf16) -> f8E5M2 {
  %0 = arith.truncf %x : bf16 to f8E5M2
  return %0 : f8E5M2
}

// -----

// Vectors stay vectors (the conversion code is branch-free, so loops vectorize).
// CHECK-LABEL: func.func @trunc_vector_to_f4
// CHECK-SAME: (%[[X:.*]]: vector<8xf32>) -> vector<8xi8>
// CHECK: arith.bitcast %[[X]] : vector<8xf32> to vector<8xi32>
// CHECK: arith.shrui %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<8xi1>, vector<8xi32>
// CHECK: arith.trunci %{{.*}} : vector<8xi32> to vector<8xi8>
// CHECK-NOT: f4E2M1FN
func.func @trunc_vector_to_f4(%x: vector<8xf32>) -> vector<8xf4E2M1FN> {
  %0 = arith.truncf %x : vector<8xf32> to vector<8xf4E2M1FN>
  return %0 : vector<8xf4E2M1FN>
}

// -----

// CHECK-LABEL: func.func @trunc_f64_to_f6
// CHECK: arith.bitcast %{{.*}} : f64 to i64
// CHECK: arith.trunci %{{.*}} : i64 to i8
func.func @trunc_f64_to_f6(%x: f64) -> f6E3M2FN {
  %0 = arith.truncf %x : f64 to f6E3M2FN
  return %0 : f6E3M2FN
}

// -----

// CHECK-LABEL: func.func @ext_e5m2_to_f16
// CHECK-SAME: (%[[X:.*]]: i8) -> f16
// CHECK: arith.extui %[[X]] : i8 to i16
// CHECK: %[[R:.*]] = arith.bitcast %{{.*}} : i16 to f16
// CHECK-NOT: arith.extf
// CHECK: return %[[R]] : f16
func.func @ext_e5m2_to_f16(%x: f8E5M2) -> f16 {
  %0 = arith.extf %x : f8E5M2 to f16
  return %0 : f16
}

// -----

// CHECK-LABEL: func.func @ext_e8m0_vector_to_bf16
// CHECK: arith.extui %{{.*}} : vector<8xi8> to vector<8xi16>
// CHECK: arith.bitcast %{{.*}} : vector<8xi16> to vector<8xbf16>
func.func @ext_e8m0_vector_to_bf16(%x: vector<8xf8E8M0FNU>) -> vector<8xbf16> {
  %0 = arith.extf %x : vector<8xf8E8M0FNU> to vector<8xbf16>
  return %0 : vector<8xbf16>
}

// -----

// CHECK-LABEL: func.func @ext_f4_to_f64
// CHECK: arith.bitcast %{{.*}} : i64 to f64
// CHECK-NOT: arith.extf
func.func @ext_f4_to_f64(%x: f4E2M1FN) -> f64 {
  %0 = arith.extf %x : f4E2M1FN to f64
  return %0 : f64
}

// -----

// Narrow to narrow: codes to codes, no float op at all.
// CHECK-LABEL: func.func @narrow_to_narrow
// CHECK-SAME: (%{{.*}}: i8) -> i8
// CHECK-NOT: f32
// CHECK-NOT: arith.truncf
// CHECK: arith.trunci %{{.*}} : i16 to i8
func.func @narrow_to_narrow(%x: f8E4M3FN) -> f4E2M1FN {
  %0 = arith.truncf %x : f8E4M3FN to f4E2M1FN
  return %0 : f4E2M1FN
}

// -----

// Constants keep their codes: 1.0, 2.0, -0.5, 448.0 in f8E4M3FN are 0x38, 0x40, 0xB0, 0x7E;
// -6.0 in f4E2M1FN is 0xF; 28.0 in f6E3M2FN is 0x1F; 0x7F (NaN) stays 0x7F.
// CHECK-LABEL: func.func @constants
// CHECK-SAME: -> (vector<4xi8>, i8, tensor<3xi8>, i8)
// CHECK-DAG: arith.constant dense<[56, 64, -80, 126]> : vector<4xi8>
// CHECK-DAG: arith.constant 15 : i8
// CHECK-DAG: arith.constant dense<31> : tensor<3xi8>
// CHECK-DAG: arith.constant 127 : i8
func.func @constants() -> (vector<4xf8E4M3FN>, f4E2M1FN, tensor<3xf6E3M2FN>, f8E4M3FN) {
  %c = arith.constant dense<[1.0, 2.0, -0.5, 448.0]> : vector<4xf8E4M3FN>
  %d = arith.constant -6.0 : f4E2M1FN
  %e = arith.constant dense<28.0> : tensor<3xf6E3M2FN>
  %n = arith.constant 0x7F : f8E4M3FN
  return %c, %d, %e, %n : vector<4xf8E4M3FN>, f4E2M1FN, tensor<3xf6E3M2FN>, f8E4M3FN
}

// -----

// Storage: memrefs, globals, loads and stores of narrow types are i8.
// CHECK: memref.global "private" constant @table : memref<2xi8> = dense<[56, -62]>
// CHECK-LABEL: func.func @storage
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[I:.*]]: index, %{{.*}}: vector<4xf32>) -> f32
// CHECK: memref.load %[[M]][%[[I]]] : memref<?xi8>
// CHECK: memref.get_global @table : memref<2xi8>
// CHECK: arith.addf %{{.*}}, %{{.*}} : f32
// CHECK: %[[V:.*]] = arith.trunci %{{.*}} : vector<4xi32> to vector<4xi8>
// CHECK: vector.store %[[V]], %[[M]][%[[I]]] : memref<?xi8>, vector<4xi8>
memref.global "private" constant @table : memref<2xf8E5M2> = dense<[0.5, -3.0]>
func.func @storage(%m: memref<?xf6E2M3FN>, %i: index, %v: vector<4xf32>) -> f32 {
  %0 = memref.load %m[%i] : memref<?xf6E2M3FN>
  %1 = arith.extf %0 : f6E2M3FN to f32
  %g = memref.get_global @table : memref<2xf8E5M2>
  %2 = memref.load %g[%i] : memref<2xf8E5M2>
  %3 = arith.extf %2 : f8E5M2 to f32
  %4 = arith.addf %1, %3 : f32
  %t = arith.truncf %v : vector<4xf32> to vector<4xf6E2M3FN>
  vector.store %t, %m[%i] : memref<?xf6E2M3FN>, vector<4xf6E2M3FN>
  return %4 : f32
}

// -----

// Loop-carried narrow values (block arguments) are retyped too.
// CHECK-LABEL: func.func @loop
// CHECK: scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (i8)
// CHECK: memref.store %[[ACC]], %{{.*}}[%{{.*}}] : memref<16xi8>
// CHECK: scf.yield %{{.*}} : i8
func.func @loop(%m: memref<16xf32>, %o: memref<16xf8E4M3FN>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %z = arith.constant 0.0 : f8E4M3FN
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%acc = %z) -> f8E4M3FN {
    %x = memref.load %m[%i] : memref<16xf32>
    %t = arith.truncf %x : f32 to f8E4M3FN
    memref.store %acc, %o[%i] : memref<16xf8E4M3FN>
    scf.yield %t : f8E4M3FN
  }
  return
}

// -----

// Bitcasts to and from the narrow types fold away or become integer resizes.
// CHECK-LABEL: func.func @casts
// CHECK-SAME: (%[[X:.*]]: i4, %[[Y:.*]]: i8) -> (i8, i8)
// CHECK: %[[E:.*]] = arith.extui %[[X]] : i4 to i8
// CHECK-NOT: arith.bitcast
// CHECK: return %[[E]], %[[Y]] : i8, i8
func.func @casts(%x: i4, %y: f8E4M3FN) -> (f4E2M1FN, i8) {
  %0 = arith.bitcast %x : i4 to f4E2M1FN
  %1 = arith.bitcast %y : f8E4M3FN to i8
  return %0, %1 : f4E2M1FN, i8
}

// -----

// Functions without narrow types are left alone.
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to f16
func.func @untouched(%x: f32) -> f16 {
  %0 = arith.truncf %x : f32 to f16
  return %0 : f16
}

// -----

func.func @compute_on_narrow(%x: f8E4M3FN) -> f8E4M3FN {
  // expected-error @+1 {{'arith.addf' computes on f8E4M3FN, which has no LLVM lowering; only arith.truncf and arith.extf convert}}
  %0 = arith.addf %x, %x : f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

func.func @math_on_narrow(%x: f6E2M3FN) -> f6E2M3FN {
  // expected-error @+1 {{'math.absf' computes on f6E2M3FN}}
  %0 = math.absf %x : f6E2M3FN
  return %0 : f6E2M3FN
}

// -----

func.func @reduction_on_narrow(%x: vector<4xf8E5M2>) -> f8E5M2 {
  // expected-error @+1 {{'vector.reduction' computes on f8E5M2}}
  %0 = vector.reduction <add>, %x : vector<4xf8E5M2> into f8E5M2
  return %0 : f8E5M2
}

// -----

func.func @rounding_mode(%x: f32) -> f8E5M2 {
  // expected-error @+1 {{arith.truncf to f8E5M2 with rounding mode 'downward' is not supported (supported: to_nearest_even, toward_zero, to_nearest_away)}}
  %0 = arith.truncf %x downward : f32 to f8E5M2
  return %0 : f8E5M2
}

// -----

func.func @bitcast_sub_byte_vector(%x: vector<8xf4E2M1FN>) -> vector<1xi32> {
  // expected-error @+1 {{'vector.bitcast' on f4E2M1FN is not supported: the pass stores f4E2M1FN in i8}}
  %0 = vector.bitcast %x : vector<8xf4E2M1FN> to vector<1xi32>
  return %0 : vector<1xi32>
}

// -----

func.func @to_tf32(%x: f8E4M3FN) -> tf32 {
  // expected-error @+1 {{arith.extf from f8E4M3FN to tf32 is not supported}}
  %0 = arith.extf %x : f8E4M3FN to tf32
  return %0 : tf32
}

// -----

func.func @atomic_add_on_narrow(%m: memref<4xf8E4M3FN>, %v: f8E4M3FN, %i: index) -> f8E4M3FN {
  // expected-error @+1 {{'memref.atomic_rmw' computes on f8E4M3FN}}
  %0 = memref.atomic_rmw addf %v, %m[%i] : (f8E4M3FN, memref<4xf8E4M3FN>) -> f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

// expected-error @+1 {{'func.func' has an attribute 'function_type' holding a narrow float type that mxlower-lower-narrow-floats-to-llvm cannot convert}}
func.func @narrow_in_a_tuple(%x: tuple<f8E4M3FN, f32>) -> tuple<f8E4M3FN, f32> {
  return %x : tuple<f8E4M3FN, f32>
}

// -----

// Names are not storage: a function, a call and a string attribute that spell a narrow type
// keep their text, only the types change.
// CHECK-LABEL: func.func @to_f4E2M1FN
// CHECK-SAME: (%{{.*}}: f32) -> i8
// CHECK-SAME: {note = "f4E2M1FN codes"}
// CHECK-LABEL: func.func @caller_f4E2M1FN
// CHECK: call @to_f4E2M1FN(%{{.*}}) : (f32) -> i8
func.func @to_f4E2M1FN(%x: f32) -> f4E2M1FN attributes {note = "f4E2M1FN codes"} {
  %0 = arith.truncf %x : f32 to f4E2M1FN
  return %0 : f4E2M1FN
}
func.func @caller_f4E2M1FN(%x: f32) -> f4E2M1FN {
  %0 = func.call @to_f4E2M1FN(%x) : (f32) -> f4E2M1FN
  return %0 : f4E2M1FN
}

// -----

// FNUZ types (no Inf, no -0, 0x80 the one NaN): overflow saturates the magnitude at 128, which
// is the NaN code with or without the sign; a zero magnitude keeps no sign; NaN -> 0x80.
// CHECK-LABEL: func.func @trunc_f32_to_e4m3fnuz
// CHECK-SAME: (%{{.*}}: f32) -> i8
// CHECK: %[[C128:.*]] = arith.constant 128 : i32
// CHECK: %[[SAT:.*]] = arith.minsi %{{.*}}, %[[C128]] : i32
// CHECK: %[[ISNAN:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK: %[[ZERO:.*]] = arith.cmpi eq, %[[SAT]], %{{.*}} : i32
// CHECK: %[[SIGNED:.*]] = arith.ori %[[SAT]], %{{.*}} : i32
// CHECK: %[[NOZ:.*]] = arith.select %[[ZERO]], %[[SAT]], %[[SIGNED]] : i32
// CHECK: %[[CODE:.*]] = arith.select %[[ISNAN]], %[[C128]], %[[NOZ]] : i32
// CHECK: arith.trunci %[[CODE]] : i32 to i8
// CHECK-NOT: arith.truncf
func.func @trunc_f32_to_e4m3fnuz(%x: f32) -> f8E4M3FNUZ {
  %0 = arith.truncf %x : f32 to f8E4M3FNUZ
  return %0 : f8E4M3FNUZ
}

// -----

// The IEEE-like f8E3M4 decodes with Inf (0x70) and NaN (above it) selects.
// CHECK-LABEL: func.func @ext_e3m4_to_f32
// CHECK-SAME: (%{{.*}}: vector<2xi8>) -> vector<2xf32>
// CHECK: %[[INF:.*]] = arith.constant dense<112> : vector<2xi32>
// CHECK: arith.cmpi sgt, %{{.*}}, %[[INF]] : vector<2xi32>
// CHECK: arith.cmpi eq, %{{.*}}, %[[INF]] : vector<2xi32>
// CHECK-NOT: arith.extf
func.func @ext_e3m4_to_f32(%x: vector<2xf8E3M4>) -> vector<2xf32> {
  %0 = arith.extf %x : vector<2xf8E3M4> to vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

// f8E5M2FNUZ and f8E4M3B11FNUZ in memory are i8 codes like every narrow type.
// CHECK-LABEL: func.func @fnuz_memrefs
// CHECK-SAME: (%{{.*}}: memref<4xi8>, %{{.*}}: memref<4xi8>)
func.func @fnuz_memrefs(%a: memref<4xf8E5M2FNUZ>, %b: memref<4xf8E4M3B11FNUZ>) {
  %i = arith.constant 0 : index
  %v = memref.load %a[%i] : memref<4xf8E5M2FNUZ>
  %w = arith.extf %v : f8E5M2FNUZ to f32
  %t = arith.truncf %w : f32 to f8E4M3B11FNUZ
  memref.store %t, %b[%i] : memref<4xf8E4M3B11FNUZ>
  return
}

// -----

// roundingmode toward_zero: the exact value truncated (docs/semantics.md section 10.2), then
// section 2's rules, except that a finite value stops at max (0x7E = 448) instead of
// overflowing to NaN; Inf and NaN still give the NaN code 0x7F, with the sign.
// CHECK-LABEL: func.func @trunc_toward_zero
// CHECK-SAME: (%{{.*}}: f32) -> i8
// CHECK: %[[MAX:.*]] = arith.constant 126 : i32
// CHECK: %[[SAT:.*]] = arith.minsi %{{.*}}, %[[MAX]] : i32
// CHECK: arith.select %{{.*}}, %c127_i32, %{{.*}} : i32
// CHECK-NOT: arith.truncf
func.func @trunc_toward_zero(%x: f32) -> f8E4M3FN {
  %0 = arith.truncf %x toward_zero : f32 to f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

// roundingmode to_nearest_away (ties away from zero), here narrow to narrow: through f32.
// CHECK-LABEL: func.func @trunc_away_e5m2_to_f4
// CHECK-SAME: (%{{.*}}: i8) -> i8
// CHECK: arith.bitcast %{{.*}} : i32 to f32
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK-NOT: arith.truncf
func.func @trunc_away_e5m2_to_f4(%x: f8E5M2) -> f4E2M1FN {
  %0 = arith.truncf %x to_nearest_away : f8E5M2 to f4E2M1FN
  return %0 : f4E2M1FN
}

// -----

func.func @trunc_upward(%x: f32) -> f8E4M3FNUZ {
  // expected-error @+1 {{arith.truncf to f8E4M3FNUZ with rounding mode 'upward' is not supported (supported: to_nearest_even, toward_zero, to_nearest_away)}}
  %0 = arith.truncf %x upward : f32 to f8E4M3FNUZ
  return %0 : f8E4M3FNUZ
}
