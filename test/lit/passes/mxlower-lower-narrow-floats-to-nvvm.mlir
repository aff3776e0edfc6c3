// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-nvvm='chip=sm_100a' | FileCheck %s --check-prefixes=CHECK,F8,NARROW
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-nvvm='chip=sm_90a' | FileCheck %s --check-prefixes=CHECK,F8,NO-NARROW
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-nvvm='chip=sm_80' | FileCheck %s --check-prefixes=CHECK,NO-F8,NO-NARROW
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-narrow-floats-to-nvvm='chip=sm_100a hardware=false' | FileCheck %s --check-prefixes=CHECK,NO-F8,NO-NARROW

// Narrow arith.truncf/extf -> NVVM cvt instructions where the chip has them (sm_89+: e4m3x2 /
// e5m2x2; the sm_100a family: e2m1x2, e2m3x2, e3m2x2, ue8m0x2), with the fix-ups that make
// them docs/semantics.md section 2 exact; the codec's integer expansion elsewhere (sm_80, or
// hardware=false).

// f32 -> f8E4M3FN: element 0 is the cvt's second operand (low byte), element 1 its first;
// the fix-up turns |x| > 464 (0x43E80000 = 1139277824), Inf and NaN into NaN with x's sign,
// where cvt.satfinite gives +-448.
// CHECK-LABEL: func.func @trunc_f32_e4m3_v2
// F8: %[[HI:.*]] = vector.extract %arg0[1] : f32 from vector<2xf32>
// F8: %[[LO:.*]] = vector.extract %arg0[0] : f32 from vector<2xf32>
// F8: %[[CVT:.*]] = nvvm.convert.f32x2.to.f8x2 %[[HI]], %[[LO]] {rnd = #nvvm.fp_rnd_mode<rn>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E4M3FN)
// F8: %[[C464:.*]] = arith.constant dense<1139277824> : vector<2xi32>
// F8: %[[BAD:.*]] = arith.cmpi sgt, %{{.*}}, %[[C464]] : vector<2xi32>
// F8: %[[R:.*]] = arith.select %[[BAD]], %{{.*}}, %[[CVT]] : vector<2xi1>, vector<2xi8>
// F8: arith.bitcast %[[R]] : vector<2xi8> to vector<2xf8E4M3FN>
// NO-F8-NOT: nvvm.convert
// NO-F8: arith.minsi
// CHECK-NOT: arith.truncf
func.func @trunc_f32_e4m3_v2(%x: vector<2xf32>) -> vector<2xf8E4M3FN> {
  %0 = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3FN>
  return %0 : vector<2xf8E4M3FN>
}

// -----

// f16x2 registers: an even pair is a shuffle, the odd tail pairs with itself; e5m2's fix-up
// gives Inf from the 61440 midpoint (f16 0x7B80 = 31616) and NaN above Inf (0x7C00 = 31744).
// CHECK-LABEL: func.func @trunc_f16_e5m2_v3
// F8: %[[P:.*]] = vector.shuffle %arg0, %arg0 [0, 1] : vector<3xf16>, vector<3xf16>
// F8: nvvm.convert.f16x2.to.f8x2 %[[P]] : vector<2xf16> -> vector<2xi8>(f8E5M2)
// F8: %[[T:.*]] = vector.extract %arg0[2] : f16 from vector<3xf16>
// F8: %[[Q:.*]] = vector.from_elements %[[T]], %[[T]] : vector<2xf16>
// F8: nvvm.convert.f16x2.to.f8x2 %[[Q]]
// F8: vector.from_elements %{{.*}}, %{{.*}}, %{{.*}} : vector<3xi8>
// F8: arith.constant dense<31616> : vector<3xi16>
// F8: arith.constant dense<31744> : vector<3xi16>
// NO-F8-NOT: nvvm.convert
// CHECK: arith.bitcast %{{.*}} : vector<3xi8> to vector<3xf8E5M2>
func.func @trunc_f16_e5m2_v3(%x: vector<3xf16>) -> vector<3xf8E5M2> {
  %0 = arith.truncf %x : vector<3xf16> to vector<3xf8E5M2>
  return %0 : vector<3xf8E5M2>
}

// -----

// A scalar converts in the low nibble of cvt.rn.satfinite.e2m1x2 (paired with itself); NaN
// becomes the -0 code 0x8 (cvt's NaN result is unspecified).
// CHECK-LABEL: func.func @trunc_f32_f4
// NARROW: %[[CVT:.*]] = nvvm.convert.f32x2.to.f4x2 %arg0, %arg0 : i8(f4E2M1FN)
// NARROW: %[[LO:.*]] = arith.andi %[[CVT]], %c15_i8 : i8
// NARROW: arith.cmpi sgt, %{{.*}}, %c2139095040_i32 : i32
// NARROW: arith.select %{{.*}}, %c8_i8, %[[LO]] : i8
// NO-NARROW-NOT: nvvm.convert
// CHECK: arith.trunci %{{.*}} : i8 to i4
// CHECK: arith.bitcast %{{.*}} : i4 to f4E2M1FN
func.func @trunc_f32_f4(%x: f32) -> f4E2M1FN {
  %0 = arith.truncf %x : f32 to f4E2M1FN
  return %0 : f4E2M1FN
}

// -----

// bf16 is widened to f32 (exact) for the f32x2 cvt.
// CHECK-LABEL: func.func @trunc_bf16_f6_v4
// NARROW: arith.extf %arg0 : vector<4xbf16> to vector<4xf32>
// NARROW-COUNT-2: nvvm.convert.f32x2.to.f6x2 {{.*}} : vector<2xi8>(f6E3M2FN)
// NO-NARROW-NOT: nvvm.convert
// CHECK: arith.trunci %{{.*}} : vector<4xi8> to vector<4xi6>
func.func @trunc_bf16_f6_v4(%x: vector<4xbf16>) -> vector<4xf6E3M2FN> {
  %0 = arith.truncf %x : vector<4xbf16> to vector<4xf6E3M2FN>
  return %0 : vector<4xf6E3M2FN>
}

// -----

// Up-conversions are exact: cvt to f16x2, then a plain extf.
// CHECK-LABEL: func.func @ext_e4m3_f32_v2
// F8: %[[C:.*]] = arith.bitcast %arg0 : vector<2xf8E4M3FN> to vector<2xi8>
// F8: %[[H:.*]] = nvvm.convert.f8x2.to.f16x2 %[[C]] : vector<2xi8>(f8E4M3FN) -> vector<2xf16>
// F8: arith.extf %[[H]] : vector<2xf16> to vector<2xf32>
// NO-F8-NOT: nvvm.convert
// NO-F8: arith.shli
func.func @ext_e4m3_f32_v2(%x: vector<2xf8E4M3FN>) -> vector<2xf32> {
  %0 = arith.extf %x : vector<2xf8E4M3FN> to vector<2xf32>
  return %0 : vector<2xf32>
}

// -----

// e2m1x2's .b8 source holds element 2k in bits 3..0.
// CHECK-LABEL: func.func @ext_f4_bf16_v3
// NARROW: %[[E1:.*]] = vector.extract %{{.*}}[1] : i8 from vector<3xi8>
// NARROW: %[[S:.*]] = arith.shli %[[E1]], %c4_i8 : i8
// NARROW: %[[E0:.*]] = vector.extract %{{.*}}[0] : i8 from vector<3xi8>
// NARROW: %[[R:.*]] = arith.ori %[[E0]], %[[S]] : i8
// NARROW: nvvm.convert.f4x2.to.f16x2 %[[R]] : i8(f4E2M1FN) -> vector<2xf16>
// NARROW: arith.truncf %{{.*}} : vector<3xf32> to vector<3xbf16>
// NO-NARROW-NOT: nvvm.convert
func.func @ext_f4_bf16_v3(%x: vector<3xf4E2M1FN>) -> vector<3xbf16> {
  %0 = arith.extf %x : vector<3xf4E2M1FN> to vector<3xbf16>
  return %0 : vector<3xbf16>
}

// -----

// CHECK-LABEL: func.func @ext_e8m0_f32
// NARROW: nvvm.convert.f8x2.to.bf16x2 %{{.*}} : vector<2xi8>(f8E8M0FNU) -> vector<2xbf16>
// NARROW: arith.extf %{{.*}} : bf16 to f32
// NO-NARROW-NOT: nvvm.convert
func.func @ext_e8m0_f32(%x: f8E8M0FNU) -> f32 {
  %0 = arith.extf %x : f8E8M0FNU to f32
  return %0 : f32
}

// -----

// MX's f8E8M0FNU rounding (ties up) is neither cvt.rz nor cvt.rp: the integer expansion on
// every chip.
// CHECK-LABEL: func.func @trunc_e8m0_nearest
// CHECK-NOT: nvvm.convert
// CHECK: arith.shrui
// CHECK: arith.bitcast %{{.*}} : i8 to f8E8M0FNU
func.func @trunc_e8m0_nearest(%x: f32) -> f8E8M0FNU {
  %0 = arith.truncf %x : f32 to f8E8M0FNU
  return %0 : f8E8M0FNU
}

// -----

// The rceil scale selection: 2^ceil(log2 q) saturated is cvt.rp.satfinite.ue8m0x2.
// CHECK-LABEL: func.func @rceil_scale
// NARROW: %[[C:.*]] = nvvm.convert.f32x2.to.f8x2 %{{.*}}, %{{.*}} {rnd = #nvvm.fp_rnd_mode<rp>, sat = #nvvm.sat_mode<satfinite>} : vector<2xi8>(f8E8M0FNU)
// NARROW-NEXT: arith.bitcast %[[C]] : vector<2xi8> to vector<2xf8E8M0FNU>
// NO-NARROW-NOT: nvvm.convert
// NO-NARROW: arith.minsi
func.func @rceil_scale(%q: vector<2xf32>) -> vector<2xf8E8M0FNU> {
  %0 = arith.truncf %q upward {mxlower.satfinite} : vector<2xf32> to vector<2xf8E8M0FNU>
  return %0 : vector<2xf8E8M0FNU>
}

// -----

// CHECK-LABEL: func.func @floor_scale_bf16
// NARROW: nvvm.convert.bf16x2.to.f8x2 %arg0 {rnd = #nvvm.fp_rnd_mode<rz>, sat = #nvvm.sat_mode<satfinite>} : vector<2xbf16> -> vector<2xi8>(f8E8M0FNU)
// NO-NARROW-NOT: nvvm.convert
func.func @floor_scale_bf16(%q: vector<2xbf16>) -> vector<2xf8E8M0FNU> {
  %0 = arith.truncf %q toward_zero {mxlower.satfinite} : vector<2xbf16> to vector<2xf8E8M0FNU>
  return %0 : vector<2xf8E8M0FNU>
}

// -----

// {mxlower.satfinite}: the saturating element conversion of MX quantize -- the bare cvt.
// CHECK-LABEL: func.func @satfinite_e4m3
// F8: %[[C:.*]] = nvvm.convert.f32x2.to.f8x2
// F8-NEXT: arith.bitcast %[[C]] : vector<2xi8> to vector<2xf8E4M3FN>
// NO-F8-NOT: nvvm.convert
func.func @satfinite_e4m3(%y: vector<2xf32>) -> vector<2xf8E4M3FN> {
  %0 = arith.truncf %y {mxlower.satfinite} : vector<2xf32> to vector<2xf8E4M3FN>
  return %0 : vector<2xf8E4M3FN>
}

// -----

// A clamp into [-448, 448] (what decompose-mx + legalize-to-linalg give) cannot overflow: no
// fix-up either.
// CHECK-LABEL: func.func @clamped_e4m3
// F8: %[[M:.*]] = arith.minimumf
// F8-NEXT: %[[C:.*]] = nvvm.convert.f32x2.to.f8x2 %[[M]], %[[M]]
// F8-NEXT: %[[E:.*]] = vector.extract %[[C]][0] : i8 from vector<2xi8>
// F8-NEXT: arith.bitcast %[[E]] : i8 to f8E4M3FN
// NO-F8-NOT: nvvm.convert
func.func @clamped_e4m3(%y: f32) -> f8E4M3FN {
  %lo = arith.constant -448.0 : f32
  %hi = arith.constant 448.0 : f32
  %0 = arith.maximumf %lo, %y : f32
  %1 = arith.minimumf %0, %hi : f32
  %2 = arith.truncf %1 : f32 to f8E4M3FN
  return %2 : f8E4M3FN
}

// -----

// ... but a NaN-propagating clamp can still pass NaN, whose f4 code must be 0x8.
// CHECK-LABEL: func.func @clamped_f4
// NARROW: nvvm.convert.f32x2.to.f4x2
// NARROW: arith.cmpi sgt
// NARROW: arith.select
// NO-NARROW-NOT: nvvm.convert
func.func @clamped_f4(%y: vector<2xf32>) -> vector<2xf4E2M1FN> {
  %lo = arith.constant dense<-6.0> : vector<2xf32>
  %hi = arith.constant dense<6.0> : vector<2xf32>
  %0 = arith.minimumf %y, %hi : vector<2xf32>
  %1 = arith.maximumf %0, %lo : vector<2xf32>
  %2 = arith.truncf %1 : vector<2xf32> to vector<2xf4E2M1FN>
  return %2 : vector<2xf4E2M1FN>
}

// -----

// Rank-2 vectors convert row by row.
// CHECK-LABEL: func.func @rank2
// F8: %[[R0:.*]] = vector.extract %arg0[0] : vector<3xf32> from vector<2x3xf32>
// F8-COUNT-2: nvvm.convert.f32x2.to.f8x2
// F8: vector.insert %{{.*}}, %{{.*}} [0] : vector<3xi8> into vector<2x3xi8>
// F8: vector.extract %arg0[1] : vector<3xf32> from vector<2x3xf32>
// F8-COUNT-2: nvvm.convert.f32x2.to.f8x2
// F8: vector.insert %{{.*}}, %{{.*}} [1] : vector<3xi8> into vector<2x3xi8>
// CHECK: arith.bitcast %{{.*}} : vector<2x3xi8> to vector<2x3xf8E4M3FN>
func.func @rank2(%x: vector<2x3xf32>) -> vector<2x3xf8E4M3FN> {
  %0 = arith.truncf %x : vector<2x3xf32> to vector<2x3xf8E4M3FN>
  return %0 : vector<2x3xf8E4M3FN>
}

// -----

// Inside gpu.func kernels too.
// CHECK-LABEL: gpu.func @kernel
// F8: nvvm.convert.f32x2.to.f8x2 %arg0, %arg0 {{.*}} : vector<2xi8>(f8E5M2)
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}] : memref<4xf8E5M2>
gpu.module @kernels {
  gpu.func @kernel(%x: f32, %y: memref<4xf8E5M2>) kernel {
    %c0 = arith.constant 0 : index
    %0 = arith.truncf %x : f32 to f8E5M2
    memref.store %0, %y[%c0] : memref<4xf8E5M2>
    gpu.return
  }
}

// -----

// Narrow to narrow: the codec's direct code conversion (exact as through f32).
// CHECK-LABEL: func.func @narrow_to_narrow
// CHECK-NOT: nvvm.convert
// CHECK: arith.trunci %{{.*}} : i16 to i4
func.func @narrow_to_narrow(%x: f8E4M3FN) -> f4E2M1FN {
  %0 = arith.truncf %x : f8E4M3FN to f4E2M1FN
  return %0 : f4E2M1FN
}

// -----

func.func @tensor(%x: tensor<4xf32>) -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{'arith.truncf' on tensor<4xf32>: this lowering handles scalars and fixed-size vectors (lower tensors to loops or vectors first)}}
  %0 = arith.truncf %x : tensor<4xf32> to tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// -----

func.func @downward(%x: f32) -> f8E4M3FN {
  // expected-error @+1 {{'arith.truncf' from f32 to f8E4M3FN: rounding mode 'downward' is not supported for conversions to f8E4M3FN (supported: to_nearest_even, toward_zero, to_nearest_away)}}
  %0 = arith.truncf %x downward : f32 to f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

func.func @upward_without_satfinite(%x: f32) -> f8E8M0FNU {
  // expected-error @+1 {{rounding mode 'upward' to f8E8M0FNU needs the mxlower.satfinite attribute}}
  %0 = arith.truncf %x upward : f32 to f8E8M0FNU
  return %0 : f8E8M0FNU
}

// -----

func.func @f64_satfinite(%x: f64) -> f8E4M3FN {
  // expected-error @+1 {{'arith.truncf' from f64 to f8E4M3FN: saturating and directed conversions take f32, bf16 or f16 sources, not f64}}
  %0 = arith.truncf %x {mxlower.satfinite} : f64 to f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

// f64 sources: narrowing to f32 for the cvt would round twice, so the codec from f64.
// CHECK-LABEL: func.func @from_f64
// CHECK-NOT: nvvm.convert
// CHECK: arith.bitcast %arg0 : f64 to i64
func.func @from_f64(%x: f64) -> f8E4M3FN {
  %0 = arith.truncf %x : f64 to f8E4M3FN
  return %0 : f8E4M3FN
}

// -----

// CHECK-LABEL: func.func @ext_f6_f64
// NARROW: nvvm.convert.f6x2.to.f16x2 %{{.*}} : vector<2xi8>(f6E2M3FN) -> vector<2xf16>
// NARROW: arith.extf %{{.*}} : vector<2xf16> to vector<2xf64>
func.func @ext_f6_f64(%x: vector<2xf6E2M3FN>) -> vector<2xf64> {
  %0 = arith.extf %x : vector<2xf6E2M3FN> to vector<2xf64>
  return %0 : vector<2xf64>
}

// -----

// The IEEE-like f8E4M3 / f8E3M4 and the FNUZ types have no cvt whose semantics match (PTX's
// e4m3 is f8E4M3FN: no Inf, 0x7F NaN): the codec on every chip.
// CHECK-LABEL: func.func @no_cvt_for_new_f8
// CHECK-NOT: nvvm.convert
// CHECK: arith.minsi
// CHECK-NOT: arith.truncf
// CHECK-NOT: arith.extf
// CHECK: return
func.func @no_cvt_for_new_f8(%x: vector<2xf32>, %c: vector<2xf8E5M2FNUZ>)
    -> (vector<2xf8E4M3>, vector<2xf8E3M4>, vector<2xf8E4M3FNUZ>, vector<2xf8E4M3B11FNUZ>,
        vector<2xf16>) {
  %0 = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3>
  %1 = arith.truncf %x : vector<2xf32> to vector<2xf8E3M4>
  %2 = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3FNUZ>
  %3 = arith.truncf %x : vector<2xf32> to vector<2xf8E4M3B11FNUZ>
  %4 = arith.extf %c : vector<2xf8E5M2FNUZ> to vector<2xf16>
  return %0, %1, %2, %3, %4 : vector<2xf8E4M3>, vector<2xf8E3M4>, vector<2xf8E4M3FNUZ>,
      vector<2xf8E4M3B11FNUZ>, vector<2xf16>
}

// -----

// roundingmode toward_zero / to_nearest_away: no cvt rounds so (PTX's narrow cvts are .rn, and
// ue8m0's .rz saturates), so the codec on every chip.
// CHECK-LABEL: func.func @rounding_modes_use_the_codec
// CHECK-NOT: nvvm.convert
// CHECK: arith.minsi
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @rounding_modes_use_the_codec(%x: vector<2xf32>)
    -> (vector<2xf8E4M3FN>, vector<2xf4E2M1FN>, vector<2xf8E8M0FNU>) {
  %0 = arith.truncf %x toward_zero : vector<2xf32> to vector<2xf8E4M3FN>
  %1 = arith.truncf %x to_nearest_away : vector<2xf32> to vector<2xf4E2M1FN>
  %2 = arith.truncf %x toward_zero : vector<2xf32> to vector<2xf8E8M0FNU>
  return %0, %1, %2 : vector<2xf8E4M3FN>, vector<2xf4E2M1FN>, vector<2xf8E8M0FNU>
}

// -----

func.func @satfinite_toward_zero(%x: f32) -> f8E4M3FN {
  // expected-error @+1 {{'arith.truncf' from f32 to f8E4M3FN: mxlower.satfinite with rounding mode 'toward_zero' is only defined for f8E8M0FNU (the scale selection)}}
  %0 = arith.truncf %x toward_zero {mxlower.satfinite} : f32 to f8E4M3FN
  return %0 : f8E4M3FN
}
