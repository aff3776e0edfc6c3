// The nvfp4 quantize kernel on the CPU forms no quotient per element.  Once per call it fills
// a stack table of limits indexed by the E4M3 scale code (mx_math.nvfp4_limit: row t holds
// the smallest |x| whose element passes the f4 threshold t, the global scale folded in; then
// the keep and sign-flip rows).  In the loop, the block maxima of a group of 16 blocks are
// merged by shuffles (no horizontal reduction per block), and each element's f4 code is a
// binary search of three unsigned comparisons of |x|'s bits with the limits of its block's
// scale code; two blocks' codes are packed in registers and stored as 16 bytes.  With a
// global scale, one test of |g| >= 2^-115 per call picks that loop; the other one divides
// each x by g, reading subnormal x exactly (mx_math.divide_by_global).
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 | FileCheck %s --check-prefix=NV
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 --global-scale | FileCheck %s --check-prefix=G

// NV-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16(
// NV: %[[T:.*]] = memref.alloca() : memref<1152xi32>
// NV: scf.for %{{.*}} = %c0 to %c128 step %c16 {
// NV: vector.store %{{.*}}, %[[T]][%{{.*}}] : memref<1152xi32>, vector<16xi32>
// NV: scf.for
// NV-NOT: arith.divf
// NV-NOT: vector.reduction
// NV: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
// NV: vector.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>, vector<16xi8>
// NV: %[[MAG:.*]] = arith.andi %{{.*}}, %cst{{.*}} : vector<16xi32>
// NV: memref.load %[[T]][%{{.*}}] : memref<1152xi32>
// NV-NEXT: vector.broadcast
// NV-NEXT: %[[HI:.*]] = arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: %[[MID:.*]] = arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: %[[LOW:.*]] = arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: vector.bitcast %{{.*}} : vector<16xi32> to vector<8xi64>
// NV-NOT: arith.mulf
// NV: arith.trunci %{{.*}} : vector<16xi64> to vector<16xi8>
// NV: vector.store %{{.*}}, %arg1[%{{.*}}] : memref<?xi8>, vector<16xi8>
// NV: return

// G-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16_g(
// G: arith.divf %{{.*}}, %{{.*}} : f64
// G: %[[FAST:.*]] = arith.cmpi sge, %{{.*}}, %c100663296_i32 : i32
// G-NEXT: scf.if %[[FAST]] {
// G: memref.alloca() : memref<1152xi32>
// G: arith.truncf %{{.*}} : vector<16xf64> to vector<16xf32>
// G: scf.for
// G-NOT: arith.sitofp
// G: arith.cmpi uge
// G: } else {
// G: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf64>
