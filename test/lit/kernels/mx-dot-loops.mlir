// The fused block-scaled dot kernel (mxlower.lowering.dot_kernels): the packed operands read
// once as they are stored (f4 codes two per byte, split in registers), decoded in registers
// (avx2, one row of A: two byte shuffles map 32 f4 codes to the bf16 bytes of their integer
// values, unpacked into f32 lanes; more rows: interleaved, one byte shuffle, converted), multiplied
// and accumulated in vector FMAs; the only buffers it allocates are its cache-sized scratches
// (the streaming rows of A and a panel of 32 columns of B, sized by K), never a dequantized
// operand.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi_dot f32 mxfp4_e2m1 --path avx2 | FileCheck %s --check-prefix=GEMV
// RUN: %PYTHON -m mxlower.execution.ffi_dot mxfp4_e2m1 mxint8 | FileCheck %s --check-prefix=EXACT
// RUN: %PYTHON -m mxlower.execution.ffi_dot bf16 mxfp8_e4m3 | FileCheck %s --check-prefix=F8
// RUN: not %PYTHON -m mxlower.execution.ffi_dot f32 bf16 2>&1 | FileCheck %s --check-prefix=BAD

// GEMV-LABEL: func.func @mxlower_dot_f32_mxfp4_e2m1k32_avx2(
// GEMV-SAME: %[[A:[^:]+]]: memref<?xf32>, %[[B:[^:]+]]: memref<?xi8>, %[[BS:[^:]+]]: memref<?xi8>, %[[OUT:[^:]+]]: memref<?xf32>, %[[DIMS:[^:]+]]: memref<?xi64>, %{{[^:]+}}: index, %{{[^:]+}}: index)
// GEMV: %[[KD:.*]] = memref.load %[[DIMS]][%c3] : memref<?xi64>
// GEMV: %[[K:.*]] = arith.index_cast %[[KD]] : i64 to index
// the two scratches, A's rows (M rounded up to 8, 16 to 64 rows on avx2) and B's panel by
// K: nothing shaped like an operand
// GEMV: %[[SR:.*]] = arith.minui %{{.*}}, %c64{{.*}} : index
// GEMV: %[[R:.*]] = arith.muli %[[SR]], %[[K]] : index
// GEMV-NEXT: memref.alloc(%[[R]]) : memref<?xf32>
// GEMV: %[[P:.*]] = arith.muli %c32{{.*}}, %[[K]] : index
// GEMV: %[[BIG:.*]] = arith.cmpi ugt, %{{.*}}, %c64{{.*}} : index
// GEMV: %[[NP:.*]] = arith.select %[[BIG]], %[[P]], %c0{{.*}} : index
// GEMV-NEXT: memref.alloc(%[[NP]]) : memref<?xf32>
// and the panel's block factors: 32 columns x K / 32 blocks
// GEMV: %[[NB:.*]] = arith.divui %[[K]], %c32{{.*}} : index
// GEMV-NEXT: %[[NF:.*]] = arith.muli %c32{{.*}}, %[[NB]] : index
// GEMV-NEXT: %[[FS:.*]] = memref.alloc(%[[NF]]) : memref<?xf32>
// GEMV-NOT: memref.alloc
// the exact f64 contraction where the range test failed, else the f32 paths
// GEMV: scf.if
// GEMV: vector<32xf64>
// GEMV: } else {
// the streaming path: the weights' scale and 16 bytes of codes per block, straight into FMAs
// GEMV: scf.if
// one row of A permuted once into the scratch, in the order the f4 decode yields
// GEMV: vector.load %[[A]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// GEMV-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 1, 3, 5, 7, 8, {{.*}}] : vector<32xf32>, vector<32xf32>
// the unit's weight scales decoded eight at a time into the factor scratch
// GEMV: vector.load %[[BS]][%{{.*}}] : memref<?xi8>, vector<8xi8>
// GEMV: vector.store %{{.*}}, %[[FS]][%{{.*}}] : memref<?xf32>, vector<8xf32>
// GEMV: vector.load %[[B]][%{{.*}}] : memref<?xi8>, vector<16xi8>
// two byte shuffles to the codes' bf16 bytes, unpacked into f32 lanes: no conversion
// GEMV-NOT: arith.sitofp
// GEMV-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// GEMV-NOT: arith.sitofp
// GEMV: vector.bitcast %{{.*}} : vector<16xi16> to vector<8xf32>
// GEMV-NOT: arith.sitofp
// a partial sum per column and block of the unscaled (integer) weights, then one FMA by
// the block's factor
// GEMV: vector.fma %{{.*}} : vector<8xf32>
// GEMV: memref.load %[[FS]][%{{.*}}] : memref<?xf32>
// GEMV: vector.fma %{{.*}} : vector<8xf32>
// GEMV-NOT: vector.store %{{.*}}, %[[OUT]]
// GEMV: vector.reduction <add>
// GEMV: memref.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<?xf32>
// GEMV: } else {
// the GEMM path: the weights' panel decoded once into the scratch, transposed 16 x 16 at a
// time (four stages of two-source shuffles) into K-major values, then tiles of 8 rows x 32
// columns: per row of K two vectors of the panel, A's value broadcast, 16 FMAs; the
// columns past N masked at the store
// GEMV: vector.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<?xf32>, vector<32xf32>
// GEMV: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// GEMV: vector.broadcast %{{.*}} : f32 to vector<16xf32>
// GEMV-COUNT-16: vector.fma %{{.*}} : vector<16xf32>
// GEMV: vector.create_mask %{{.*}} : vector<16xi1>
// GEMV: vector.maskedstore

// Both sides integer-unit formats: block sums of the integer values in f32 lanes, scaled by
// the two blocks' factors and accumulated in f64.
// EXACT-LABEL: func.func @mxlower_dot_mxfp4_e2m1k32_mxint8k32_portable(
// EXACT: arith.extsi %{{.*}} : vector<32xi8> to vector<32xi32>
// EXACT: vector.fma %{{.*}} : vector<8xf32>
// EXACT: arith.mulf %{{.*}}, %{{.*}} : f32
// EXACT: arith.extf %{{.*}} : vector<8xf32> to vector<8xf64>
// EXACT: vector.fma %{{.*}} : vector<8xf64>
// EXACT: vector.reduction <add>, %{{.*}} : vector<8xf64> into f64
// EXACT: arith.truncf %{{.*}} : f64 to f32

// f8 codes decoded through f16 (exact, no flush-mode dependence); bf16 activations widened.
// F8-LABEL: func.func @mxlower_dot_bf16_mxfp8_e4m3k32_portable(
// F8: arith.extf %{{.*}} : vector<32xbf16> to vector<32xf32>
// F8: arith.bitcast %{{.*}} : vector<32xi16> to vector<32xf16>
// F8: arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>

// BAD: error: dot kernel: at least one side must be an MX format
