// REQUIRES: llvm-tools
// RUN: mlir-opt %s --arith-expand="include-bf16 include-f4e2m1 include-f8e8m0" --convert-to-llvm | FileCheck %s --check-prefix=UPSTREAM
// RUN: mxlower-opt %s --mxlower-lower-narrow-floats-to-llvm | FileCheck %s --check-prefix=MXLOWER

// Upstream MLIR 22 (the xtc wheels) and the five f8 types mxlower added beside the OCP ones
// (f8E4M3, f8E3M4, f8E4M3FNUZ, f8E5M2FNUZ, f8E4M3B11FNUZ): arith-expand has no expansion for
// any of them (its options cover only bf16, f4E2M1FN and f8E8M0FNU), and convert-to-llvm
// cannot lower a truncf/extf that touches them, so upstream leaves every conversion below as
// it is -- there is no software lowering to compare bits with, and a CPU pipeline built from
// upstream passes alone fails at LLVM translation.  (Upstream's only other route,
// arith-to-amdgpu, emits AMD GPU instructions for the FNUZ types.)  mxlower's
// mxlower-lower-narrow-floats-to-llvm expands all of them to integer ops, bit-exact with
// ml_dtypes (test/python/test_llvm_exhaustive.py runs every input class).

// UPSTREAM-LABEL: llvm.func @trunc
// UPSTREAM: arith.truncf %{{.*}} : f32 to f8E4M3
// UPSTREAM: arith.truncf %{{.*}} : f32 to f8E3M4
// UPSTREAM: arith.truncf %{{.*}} : f32 to f8E4M3FNUZ
// UPSTREAM: arith.truncf %{{.*}} : f32 to f8E5M2FNUZ
// UPSTREAM: arith.truncf %{{.*}} : f32 to f8E4M3B11FNUZ
// MXLOWER-LABEL: func.func @trunc
// MXLOWER-SAME: -> (i8, i8, i8, i8, i8)
// MXLOWER-NOT: arith.truncf
// MXLOWER: return
func.func @trunc(%x: f32) -> (f8E4M3, f8E3M4, f8E4M3FNUZ, f8E5M2FNUZ, f8E4M3B11FNUZ) {
  %0 = arith.truncf %x : f32 to f8E4M3
  %1 = arith.truncf %x : f32 to f8E3M4
  %2 = arith.truncf %x : f32 to f8E4M3FNUZ
  %3 = arith.truncf %x : f32 to f8E5M2FNUZ
  %4 = arith.truncf %x : f32 to f8E4M3B11FNUZ
  return %0, %1, %2, %3, %4 : f8E4M3, f8E3M4, f8E4M3FNUZ, f8E5M2FNUZ, f8E4M3B11FNUZ
}

// UPSTREAM-LABEL: llvm.func @ext
// UPSTREAM: arith.extf %{{.*}} : f8E4M3 to f32
// UPSTREAM: arith.extf %{{.*}} : f8E3M4 to f32
// UPSTREAM: arith.extf %{{.*}} : f8E4M3FNUZ to f32
// UPSTREAM: arith.extf %{{.*}} : f8E5M2FNUZ to f32
// UPSTREAM: arith.extf %{{.*}} : f8E4M3B11FNUZ to f32
// MXLOWER-LABEL: func.func @ext
// MXLOWER-SAME: (%{{.*}}: i8, %{{.*}}: i8, %{{.*}}: i8, %{{.*}}: i8, %{{.*}}: i8)
// MXLOWER-NOT: arith.extf
// MXLOWER: return
func.func @ext(%a: f8E4M3, %b: f8E3M4, %c: f8E4M3FNUZ, %d: f8E5M2FNUZ, %e: f8E4M3B11FNUZ)
    -> (f32, f32, f32, f32, f32) {
  %0 = arith.extf %a : f8E4M3 to f32
  %1 = arith.extf %b : f8E3M4 to f32
  %2 = arith.extf %c : f8E4M3FNUZ to f32
  %3 = arith.extf %d : f8E5M2FNUZ to f32
  %4 = arith.extf %e : f8E4M3B11FNUZ to f32
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}
