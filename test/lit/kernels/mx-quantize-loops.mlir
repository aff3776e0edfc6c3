// The fused quantize kernels as mxlower.lowering.mx_kernels builds them (one scf loop over
// groups of blocks, each block loaded once into a vector and kept in registers; the group's
// block maxima merged by shuffles into one vector -- the halves of each 32-value block, then
// pairs of blocks -- and its scale arithmetic done on that vector; packed element stores),
// then the leftover blocks one by one (a horizontal maximum each).  mxfp4's elements come
// from a limits table instead (as nvfp4's, test/lit/kernels/mx-quantize-nvfp4.mlir): t * 2^E
// for the seven f4 thresholds t and every E8M0 code, filled once per call; the loop is
// software-pipelined over groups of 4 blocks.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi quantize mxfp8_e4m3 | FileCheck %s --check-prefix=FP8
// RUN: %PYTHON -m mxlower.execution.ffi quantize mxfp4_e2m1 | FileCheck %s --check-prefix=FP4
// RUN: %PYTHON -m mxlower.execution.ffi quantize mxfp6_e3m2 --packed --wide bf16 --scale-mode rceil | FileCheck %s --check-prefix=FP6
// RUN: %PYTHON -m mxlower.execution.ffi quantize mxint8 --block-size 128 | FileCheck %s --check-prefix=LONG
// RUN: not %PYTHON -m mxlower.execution.ffi quantize mxfp4_e2m1 --block-size 3 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not %PYTHON -m mxlower.execution.ffi quantize mxfp3 2>&1 | FileCheck %s --check-prefix=BADFMT

// FP8-LABEL: func.func @mxlower_quantize_mxfp8_e4m3_f32_k32_floor(
// FP8-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[Q:[^:]+]]: memref<?xi8>, %[[S:[^:]+]]: memref<?xi8>, %[[B0:[^:]+]]: index, %[[B1:[^:]+]]: index)
// FP8: scf.for %[[I:.*]] = %[[B0]] to %[[MID:.*]] step %c8
// FP8-COUNT-8: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// FP8-NOT: vector.load
// FP8-NOT: vector.reduction
// FP8-COUNT-8: arith.maxsi %{{.*}}, %{{.*}} : vector<16xi32>
// FP8-NOT: vector.load
// FP8: arith.maxsi %{{.*}}, %{{.*}} : vector<16xi32>
// FP8: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 4, 12, 2, 10, 6, 14] : vector<16xi32>, vector<16xi32>
// FP8-NOT: vector.load
// FP8: math.ctlz %{{.*}} : vector<8xi32>
// FP8-NOT: vector.load
// FP8: vector.store %{{.*}}, %[[S]][%[[I]]] : memref<?xi8>, vector<8xi8>
// FP8-NOT: vector.load
// FP8-COUNT-8: vector.store %{{.*}}, %[[Q]][%{{.*}}] : memref<?xi8>, vector<32xi8>
// FP8-NOT: vector.load
// FP8: scf.for %[[J:.*]] = %[[MID]] to %[[B1]] step %c1
// FP8: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// FP8-NOT: vector.load
// FP8: memref.store %{{.*}}, %[[S]][%[[J]]] : memref<?xi8>
// FP8: vector.store %{{.*}}, %[[Q]][%{{.*}}] : memref<?xi8>, vector<32xi8>
// FP8: return

// FP4-LABEL: func.func @mxlower_quantize_mxfp4_e2m1_f32_k32_floor(
// FP4-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[Q:[^:]+]]: memref<?xi8>, %[[S:[^:]+]]: memref<?xi8>, %[[B0:[^:]+]]: index, %[[B1:[^:]+]]: index)
// FP4: %[[T:.*]] = memref.alloca() : memref<2304xi32>
// FP4: scf.for %{{.*}} = %c0 to %c256 step %c16 {
// FP4: arith.shli
// FP4: vector.store %{{.*}}, %[[T]][%{{.*}}] : memref<2304xi32>, vector<16xi32>
// FP4: scf.if
// FP4-COUNT-4: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// FP4: vector.store %{{.*}}, %[[S]][%[[B0]]] : memref<?xi8>, vector<4xi8>
// FP4: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c4{{.*}} iter_args({{.*}}) -> (vector<32xi32>, vector<32xi32>, vector<32xi32>, vector<32xi32>, vector<4xi8>)
// FP4-COUNT-4: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// FP4-NOT: vector.load
// FP4: vector.store %{{.*}}, %[[S]][%[[I]]] : memref<?xi8>, vector<4xi8>
// FP4-NOT: vector.load
// FP4: memref.load %[[T]][%{{.*}}] : memref<2304xi32>
// FP4: arith.cmpi uge, %{{.*}}, %{{.*}} : vector<32xi32>
// FP4-NOT: vector.load
// FP4: vector.store %{{.*}}, %[[Q]][%{{.*}}] : memref<?xi8>, vector<32xi8>
// FP4: scf.yield
// FP4: return

// bf16 in (decoded by the codec: no float conversion op), f6 codes packed 4 per 3 bytes
// FP6-LABEL: func.func @mxlower_quantize_mxfp6_e3m2_bf16_k32_rceil_packed(
// FP6-SAME: memref<?xbf16>
// FP6: scf.for
// FP6-COUNT-8: vector.load %{{.*}} : memref<?xbf16>, vector<32xbf16>
// FP6-NOT: arith.extf
// FP6-NOT: arith.divf
// FP6: arith.constant dense<6291456> : vector<8xi32>
// FP6: arith.cmpi sgt, %{{.*}}, %{{.*}} : vector<8xi32>
// FP6: vector.deinterleave %{{.*}} : vector<32xi8> -> vector<16xi8>
// FP6: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 16, 2, 3, 17, {{.*}}] : vector<16xi8>, vector<8xi8>
// FP6: vector.store %{{.*}} : memref<?xi8>, vector<24xi8>

// Blocks of 128: two chunks of 64 lanes, the maximum then the elements, one block per step
// LONG-LABEL: func.func @mxlower_quantize_mxint8_f32_k128_floor(
// LONG: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c1
// LONG: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %{{.*}} iter_args(
// LONG: vector.load {{.*}} vector<64xf32>
// LONG: vector.reduction <maxsi>
// LONG: memref.store %{{.*}}, %{{.*}}[%[[I]]] : memref<?xi8>
// LONG: scf.for %{{.*}} = %c0{{.*}} to %c2{{.*}} step %{{[^ ]*}} {
// LONG: math.roundeven %{{.*}} : vector<64xf32>
// LONG: arith.fptosi %{{.*}} : vector<64xf32> to vector<64xi8>
// LONG: vector.store %{{.*}} : memref<?xi8>, vector<64xi8>

// BAD: error: packed f4 elements need an even block size, got 3
// BADFMT: error: unknown MX format 'mxfp3' (known: mxfp8_e4m3,
