// The nvfp4 quantize kernel on the CPU forms no quotient per element.  Once per call it fills
// a stack table of limits indexed by the E4M3 scale code (mx_math.nvfp4_limit: row t holds
// the smallest |x| whose element passes the f4 threshold t, the global scale folded in; then
// the keep and sign-flip rows).  The loop over groups of 8 blocks is software-pipelined:
// each iteration loads the next group (prefetched ahead), merges its block maxima by
// shuffles and stores its scale codes, while the group before it -- carried in registers as
// iter_args -- has its elements converted: a binary search of three unsigned comparisons of
// |x|'s bits with the limits of the block's scale code.  Two blocks' codes leave in one
// 16-byte store.  With a global scale, one test of |g| >= 2^-115 per call picks that loop;
// the other one divides each x by g, reading subnormal x exactly (mx_math.divide_by_global).
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 | FileCheck %s --check-prefix=NV
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 --global-scale | FileCheck %s --check-prefix=G

// NV-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16(
// NV: %[[T:.*]] = memref.alloca() : memref<1152xi32>
// NV: scf.for %{{.*}} = %c0 to %c128 step %c16 {
// NV: vector.store %{{.*}}, %[[T]][%{{.*}}] : memref<1152xi32>, vector<16xi32>
// NV: scf.if
// NV-COUNT-8: memref.prefetch %arg0[%{{.*}}], read, locality<3>, data : memref<?xf32>
// NV: vector.store %{{.*}}, %arg2[%arg3] : memref<?xi8>, vector<8xi8>
// NV: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c8{{.*}} iter_args(%[[X0:[^ ]+]] = {{.*}}) -> (vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<16xi32>, vector<8xi8>)
// NV-NOT: arith.divf
// NV-NOT: vector.reduction
// NV: vector.load %arg0
// NV: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi32>, vector<16xi32>
// NV: vector.store %{{.*}}, %arg2[%[[I]]] : memref<?xi8>, vector<8xi8>
// NV: %[[MAG:.*]] = arith.andi %[[X0]], %cst{{.*}} : vector<16xi32>
// NV: memref.load %[[T]][%{{.*}}] : memref<1152xi32>
// NV-NEXT: vector.broadcast
// NV-NEXT: arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: arith.cmpi uge, %[[MAG]], %{{.*}} : vector<16xi32>
// NV: vector.bitcast %{{.*}} : vector<16xi32> to vector<8xi64>
// NV-NOT: arith.mulf
// NV: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120] : vector<64xi8>, vector<64xi8>
// NV: vector.store %{{.*}}, %arg1[%{{.*}}] : memref<?xi8>, vector<16xi8>
// NV: scf.yield
// NV: return

// G-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16_g(
// G: arith.divf %{{.*}}, %{{.*}} : f64
// G: %[[FAST:.*]] = arith.cmpi sge, %{{.*}}, %c100663296_i32 : i32
// G-NEXT: %[[T:.*]] = memref.alloca() : memref<1152xi32>
// G-NEXT: scf.if %[[FAST]] {
// G: arith.truncf %{{.*}} : vector<16xf64> to vector<16xf32>
// G: vector.store %{{.*}}, %[[T]][%{{.*}}] : memref<1152xi32>, vector<16xi32>
// G: scf.for {{.*}} iter_args
// G-NOT: arith.sitofp
// G: arith.cmpi uge
// G: } else {
// G: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf64>
