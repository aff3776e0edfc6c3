// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-lower-dot-kernels | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-lower-dot-kernels{path=portable})' | FileCheck %s --check-prefix=PORTABLE
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-lower-dot-kernels, canonicalize, cse, convert-scf-to-cf, convert-vector-to-llvm{enable-amx}, convert-math-to-llvm, convert-arith-to-llvm, expand-strided-metadata, finalize-memref-to-llvm, convert-func-to-llvm, convert-cf-to-llvm, reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM

// A kernel declaration gets the fused block-scaled dot kernel as its body, under its own
// name.  The GEMV of inference (plain f32 activations, MXFP4 weights): the packed weights are
// read once as stored -- 16 bytes of f4 codes per block of 32, split into nibbles in
// registers (even elements, then odd), two byte shuffles (avx2) to the bf16 bytes of their
// integer values, unpacked in-lane into f32 lanes (no conversion instruction) -- and
// multiplied into vector FMAs with the activations, which were permuted once into that
// element order; the only allocations are the scratches of a few rows by K, no dequantized
// operand.

// CHECK-LABEL: func.func @gemv(
// CHECK-SAME: %[[A:[^:]+]]: memref<?xf32>, %[[B:[^:]+]]: memref<?xi8>, %[[BS:[^:]+]]: memref<?xi8>, %[[OUT:[^:]+]]: memref<?xf32>, %[[DIMS:[^:]+]]: memref<?xi64>, %{{[^:]+}}: index, %{{[^:]+}}: index)
// CHECK-NOT: mxlower.dot_kernel
// CHECK: %[[MD:.*]] = memref.load %[[DIMS]][%c1] : memref<?xi64>
// CHECK: %[[KD:.*]] = memref.load %[[DIMS]][%c3] : memref<?xi64>
// CHECK: %[[M:.*]] = arith.index_cast %[[MD]] : i64 to index
// CHECK: %[[K:.*]] = arith.index_cast %[[KD]] : i64 to index
// the scratch of A's rows: M rounded up to 8, at least 16, at most the 64 plain rows that
// stream on avx2
// CHECK: %[[UP:.*]] = arith.ceildivui %[[M]], %c8{{.*}} : index
// CHECK: %[[UP8:.*]] = arith.muli %[[UP]], %c8{{.*}} : index
// CHECK: %[[LO:.*]] = arith.maxui %[[UP8]], %c16{{.*}} : index
// CHECK: %[[SR:.*]] = arith.minui %[[LO]], %c64{{.*}} : index
// CHECK: %[[R:.*]] = arith.muli %[[SR]], %[[K]] : index
// CHECK-NEXT: %[[AD:.*]] = memref.alloc(%[[R]]) : memref<?xf32>
// CHECK: %[[P:.*]] = arith.muli %c32{{.*}}, %[[K]] : index
// CHECK: %[[BIG:.*]] = arith.cmpi ugt, %{{.*}}, %c64{{.*}} : index
// CHECK: %[[NP:.*]] = arith.select %[[BIG]], %[[P]], %c0{{.*}} : index
// CHECK-NEXT: memref.alloc(%[[NP]]) : memref<?xf32>
// and the panel's block factors: 32 columns x K / 32 blocks
// CHECK: %[[NB:.*]] = arith.divui %[[K]], %c32{{.*}} : index
// CHECK-NEXT: %[[NF:.*]] = arith.muli %c32{{.*}}, %[[NB]] : index
// CHECK-NEXT: %[[FS:.*]] = memref.alloc(%[[NF]]) : memref<?xf32>
// CHECK-NOT: memref.alloc
// CHECK: scf.for
// (up to 64 plain rows stream, more take the blocked GEMM)
// CHECK: arith.cmpi ule, %[[M]], %c64{{.*}} : index
// CHECK: scf.if
// (the exact f64 contraction where the range test failed; else the f32 paths)
// CHECK: vector<32xf64>
// CHECK: } else {
// one or two rows of A: permuted once into the scratch, each group of eight even-odd
// CHECK: vector.load %[[A]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 16, 18, 20, 22, 17, 19, 21, 23, 24, 26, 28, 30, 25, 27, 29, 31]
// CHECK: vector.store %{{.*}}, %[[AD]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// the unit's weight scales decoded eight at a time into the factor scratch
// CHECK: vector.load %[[BS]][%{{.*}}] : memref<?xi8>, vector<8xi8>
// CHECK: vector.store %{{.*}}, %[[FS]][%{{.*}}] : memref<?xf32>, vector<8xf32>
// each chunk of weight codes prefetches the same chunk of the next weight row (column)
// CHECK: %[[NEXT:.*]] = arith.addi %{{.*}}, %[[K]] : index
// CHECK: %[[NB:.*]] = arith.divui %[[NEXT]], %c2{{.*}} : index
// CHECK-NEXT: memref.prefetch %[[B]][%[[NB]]], read, locality<0>, data : memref<?xi8>
// CHECK: vector.load %[[B]][%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK-NOT: arith.sitofp
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, {{.*}}] : vector<16xi8>, vector<16xi8>
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 32, 1, 33, {{.*}}] : vector<32xi8>, vector<32xi8>
// CHECK: vector.bitcast %{{.*}} : vector<32xi8> to vector<16xi16>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, 2, 18, 3, 19, 8, 24, 9, 25, 10, 26, 11, 27] : vector<16xi16>, vector<16xi16>
// CHECK-NEXT: vector.bitcast %{{.*}} : vector<16xi16> to vector<8xf32>
// CHECK-NOT: arith.sitofp
// CHECK: vector.load %[[AD]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// a partial sum per column and block of the unscaled (integer) weights, then one FMA by
// the block's factor
// CHECK: vector.fma %{{.*}} : vector<8xf32>
// CHECK: memref.load %[[FS]][%{{.*}}] : memref<?xf32>
// CHECK: vector.fma %{{.*}} : vector<8xf32>
// CHECK-NOT: vector.store %{{.*}}, %[[OUT]]
// CHECK: vector.reduction <add>
// CHECK: memref.store %{{.*}}, %[[OUT]][%{{.*}}] : memref<?xf32>
// tiles of more rows: the codes interleaved into element order, one byte shuffle to their
// integer values, converted
// CHECK: vector.interleave %{{.*}}, %{{.*}} : vector<16xi8> -> vector<32xi8>
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// CHECK: arith.sitofp %{{.*}} : vector<32xi32> to vector<32xf32>
// CHECK-LABEL: func.func private @not_a_kernel(i32)

// The portable path decodes the codes arithmetically (no x86 intrinsic).
// PORTABLE-LABEL: func.func @gemv(
// PORTABLE-NOT: llvm.call_intrinsic
// PORTABLE: vector.fma

// LLVM-LABEL: llvm.func @gemv(
// LLVM: llvm.intr.prefetch
// LLVM: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// LLVM: llvm.intr.fmuladd
func.func private @gemv(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", path = "avx2"}}
func.func private @not_a_kernel(i32)

// -----

// Both sides integer-unit formats with one block size (MXFP4 x MXINT8): each block's sum of
// the integer values is exact (f32 lanes holding integers below 2^24), then scaled by the two
// blocks' factors and accumulated in f64, rounded to f32 once.
// CHECK-LABEL: func.func @exact(
// CHECK: arith.extsi %{{.*}} : vector<32xi8> to vector<32xi32>
// CHECK: vector.fma %{{.*}} : vector<8xf32>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: arith.extf %{{.*}} : vector<8xf32> to vector<8xf64>
// CHECK: vector.fma %{{.*}} : vector<8xf64>
// CHECK: vector.reduction <add>, %{{[^ ]+}} : vector<8xf64> into f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
func.func private @exact(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "mxint8", lhs_block_size = 32 : i64, rhs_block_size = 32 : i64, path = "portable"}}

// -----

// An exact pair on avx512 (e3m2 x e3m2), the streaming tiles: A's rows decoded to bf16
// once per batch, then per step (one block of 32) and column one vdpbf16ps from zero -- each
// lane two exact products of the block --, its two halves of lanes added (exact: one block's
// integers times one power of two), and added into f64 lanes: the f64 sums of exact block
// sums, as the FMA tiles form them.  (e3m2 x e3m2's units leave no room for groups of steps
// summed in f32: see @exact_groups.)
// CHECK-LABEL: func.func @exact_bf16(
// CHECK: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// CHECK: %[[Z:.+]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: scf.for %{{.*}} iter_args(%[[ACC:[^ ]+]] = %{{.*}}) -> (vector<8xf64>, {{.*}}) {
// CHECK: %[[P:.+]] = llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%[[Z]], %{{.*}}, %{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK-NEXT: %[[L:.+]] = vector.extract_strided_slice %[[P]] {offsets = [0], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK-NEXT: %[[H:.+]] = vector.extract_strided_slice %[[P]] {offsets = [8], sizes = [8], strides = [1]} : vector<16xf32> to vector<8xf32>
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[L]], %[[H]] : vector<8xf32>
// CHECK-NEXT: %[[W:.+]] = arith.extf %[[S]] : vector<8xf32> to vector<8xf64>
// CHECK-NEXT: arith.addf %[[ACC]], %[[W]] : vector<8xf64>
// CHECK: vector.reduction <add>, %{{[^ ]+}} : vector<8xf64> into f64
// CHECK: arith.truncf %{{.*}} : f64 to f32
// CHECK-NOT: scf.if %{{.*}} -> (vector<32xbf16>
func.func private @exact_bf16(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp6_e3m2", rhs = "mxfp6_e3m2", path = "avx512"}}

// -----

// The exact pairs with room for it (e2m1 x e2m1: 11 binades) sum groups of 8 steps in f32
// lanes where the group's scale codes show every partial sum exact: A's rows' largest spread
// (max - min of a group's 8 codes) stored per group once per batch, each column's taken from
// its 8 scale bytes, their sum against 11; then either the group's steps accumulate in f32
// lanes (vdpbf16ps into the running lanes, not from zero), folded and added into the tile's
// f64 lanes (in memory) once -- whole, or where the spread is one or two binades past the
// room in parts of 4 or 2 steps --, or each step is added into them as above.
// CHECK-LABEL: func.func @exact_groups(
// CHECK: memref.store %{{.*}} : memref<?xi32>
// CHECK: arith.maxui %{{.*}} : i32
// CHECK: arith.minui %{{.*}} : i32
// CHECK: %[[ROOM:.+]] = arith.constant 11 : i32
// CHECK-NEXT: %[[OK:.+]] = arith.cmpi ule, %[[SPREAD:[^,]+]], %[[ROOM]] : i32
// CHECK-NEXT: scf.if %[[OK]] -> (vector<32xbf16>
// CHECK: scf.for %{{.*}} iter_args(%[[F:[^ ]+]] = %{{.*}}) -> (vector<16xf32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%[[F]], %{{.*}}, %{{.*}})
// CHECK: arith.extf %{{.*}} : vector<8xf32> to vector<8xf64>
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xf64>, vector<8xf64>
// CHECK: } else {
// one or two binades past the room: the group in parts of 4 steps (room 12), then of 2 (13)
// CHECK: %[[R4:.+]] = arith.constant 12 : i32
// CHECK-NEXT: %[[OK4:.+]] = arith.cmpi ule, %[[SPREAD]], %[[R4]] : i32
// CHECK-NEXT: scf.if %[[OK4]] -> (vector<32xbf16>
// CHECK: scf.for %{{.*}} step %c128{{.*}} iter_args(
// CHECK: %[[R2:.+]] = arith.constant 13 : i32
// CHECK-NEXT: %[[OK2:.+]] = arith.cmpi ule, %[[SPREAD]], %[[R2]] : i32
// CHECK: scf.for %{{.*}} step %c64{{.*}} iter_args(
// CHECK: } else {
// CHECK: %[[Z:.+]] = llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%cst
// CHECK: arith.extf %{{.*}} : vector<8xf32> to vector<8xf64>
// CHECK: vector.load %{{.*}} : memref<{{[0-9]+}}xf64>, vector<8xf64>
// CHECK: vector.store %{{.*}} : memref<{{[0-9]+}}xf64>, vector<8xf64>
func.func private @exact_groups(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "mxfp4_e2m1", path = "avx512"}}

// -----

// f8 weights decoded through f16 (exact, independent of the CPU's flush modes); bf16
// activations widened in registers.
// CHECK-LABEL: func.func @f8(
// CHECK: arith.extf %{{.*}} : vector<32xbf16> to vector<32xf32>
// CHECK: arith.bitcast %{{.*}} : vector<32xi16> to vector<32xf16>
// CHECK: arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>
func.func private @f8(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp8_e4m3"}}

// -----

// MXFP4 x MXFP4 on avx2: the GEMM (more than 16 rows) by byte dot products.  A's rows are
// decoded once per call by a byte shuffle, offset by 12 to unsigned bytes and stored as
// pairs of K positions (one vector store per chunk); B's panel pair-major (16 columns per
// 32-byte load), packed 16 columns at a time: each chunk's 16 pairs of the 16 columns
// transposed in registers (64 two-source shuffles), a vector store per pair.  Per block, i16 accumulators start at B's block sums times -12 and take one
// vpmaddubsw (A's pair broadcast) and one (wrapping) add per pair of K positions -- the
// block's exact sums, no f32 operand; vpmaddwd by (1, 0) and (0, 1) widens the even and the
// odd columns to i32, converted exactly and multiplied into f32 FMA lanes with the blocks'
// factors (their product, powers of two, by an integer add of their bits: no multiply);
// the results stored under a mask (the columns past N).
// CHECK-LABEL: func.func @bytes(
// CHECK: %[[BQ:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi16>
// CHECK: %[[AQ:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi16>
// CHECK: %[[BSUM:.*]] = memref.alloc(%{{.*}}) : memref<?xi16>
// CHECK: vector.reduction <add>, %{{.*}} : vector<32xi16> into i16
// CHECK-COUNT-64: vector.shuffle %{{.*}}, %{{.*}} [{{.*}}] : vector<16xi16>, vector<16xi16>
// CHECK-COUNT-16: vector.store %{{.*}}, %[[BQ]][%{{.*}}] : memref<?xi16>, vector<16xi16>
// CHECK-NOT: memref.store %{{.*}}, %[[BQ]]
// CHECK: arith.muli %{{.*}}, %c-12_i16 : i16
// CHECK: %[[U:.*]] = llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// CHECK: %[[O:.*]] = arith.addi %[[U]], %{{.*}} : vector<32xi8>
// CHECK-NEXT: %[[P:.*]] = vector.bitcast %[[O]] : vector<32xi8> to vector<16xi16>
// CHECK: vector.store %[[P]], %[[AQ]][%{{.*}}] : memref<?xi16>, vector<16xi16>
// CHECK: %[[I0:.*]] = vector.load %[[BSUM]][%{{.*}}] : memref<?xi16>, vector<16xi16>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c16{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[I0]],
// CHECK: vector.load %[[BQ]][%{{.*}}] : memref<?xi16>, vector<16xi16>
// CHECK: memref.load %[[AQ]][%{{.*}}] : memref<?xi16>
// CHECK-NEXT: vector.broadcast %{{.*}} : i16 to vector<16xi16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"(%{{.*}}, %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// CHECK-NEXT: arith.addi %{{.*}} : vector<16xi16>
// CHECK-NOT: arith.sitofp
// CHECK: scf.yield %{{.*}} : vector<16xi16>,
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"(%{{.*}}, %{{.*}}) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// CHECK-NEXT: arith.sitofp %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: arith.addi %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK-NEXT: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: vector.fma %{{.*}} : vector<8xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15] : vector<8xf32>, vector<8xf32>
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, vector<16xi1>, vector<16xf32>
// The portable path has no byte dot products (its GEMM: f32 panels of scaled values).
// PORTABLE-LABEL: func.func @bytes(
// PORTABLE-NOT: pmadd
// PORTABLE: return
// LLVM-LABEL: llvm.func @bytes(
// LLVM: llvm.call_intrinsic "llvm.x86.avx2.pmadd.ub.sw"
// LLVM: llvm.call_intrinsic "llvm.x86.avx2.pmadd.wd"
func.func private @bytes(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "mxfp4_e2m1", path = "avx2"}}

// -----

// MXINT8 x MXINT8 on vnni: the GEMM by vpdpbusd.  A's codes are offset by 128 (wrapping i8:
// the sign bit flipped) to unsigned bytes and stored as quads of K positions, one i32 each;
// B's panel quad-major (8 columns per 32-byte load; 8 columns' 8 quads transposed in
// registers, a vector store per quad), its block sums times -128 in i32.  Per
// block, i32 accumulators start at those sums and take one vpdpbusd per quad of K positions
// (A's quad broadcast against 8 columns' quads) -- no add, no widening, no f32 operand --
// then convert exactly and are multiplied into f32 FMA lanes with the blocks' factors; the
// columns come out in order.  MXFP6 E3M2's integer units (up to 448) do not fit a byte: its
// word dot products take one vpdpwssd per pair of K positions.
// CHECK-LABEL: func.func @quads(
// CHECK: %[[BQ:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi32>
// CHECK: %[[AQ:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi32>
// CHECK: %[[BSUM:.*]] = memref.alloc(%{{.*}}) : memref<?xi32>
// CHECK: vector.reduction <add>, %{{.*}} : vector<32xi32> into i32
// CHECK-COUNT-24: vector.shuffle %{{.*}}, %{{.*}} [{{.*}}] : vector<8xi32>, vector<8xi32>
// CHECK-COUNT-8: vector.store %{{.*}}, %[[BQ]][%{{.*}}] : memref<?xi32>, vector<8xi32>
// CHECK: arith.muli %{{.*}}, %c-128_i32 : i32
// CHECK: %[[O:.*]] = arith.addi %{{.*}}, %cst{{.*}} : vector<32xi8>
// CHECK-NEXT: %[[P:.*]] = vector.bitcast %[[O]] : vector<32xi8> to vector<8xi32>
// CHECK: vector.store %[[P]], %[[AQ]][%{{.*}}] : memref<?xi32>, vector<8xi32>
// CHECK: %[[I0:.*]] = vector.load %[[BSUM]][%{{.*}}] : memref<?xi32>, vector<8xi32>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[I0]],
// CHECK: vector.load %[[BQ]][%{{.*}}] : memref<?xi32>, vector<8xi32>
// CHECK: memref.load %[[AQ]][%{{.*}}] : memref<?xi32>
// CHECK-NEXT: vector.broadcast %{{.*}} : i32 to vector<8xi32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
// CHECK-NOT: arith.addi {{.*}} : vector
// CHECK-NOT: arith.sitofp
// CHECK: scf.yield %{{.*}} : vector<8xi32>,
// CHECK-NOT: pmadd
// CHECK: arith.sitofp %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: arith.addi %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK-NEXT: arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: vector.fma %{{.*}} : vector<8xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] : vector<8xf32>, vector<8xf32>
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, vector<16xi1>, vector<16xf32>
// CHECK-LABEL: func.func @words(
// CHECK-NOT: vpdpbusd
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.256"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// CHECK-NOT: pmadd
// CHECK: return
// The portable path has neither.
// PORTABLE-LABEL: func.func @quads(
// PORTABLE-NOT: vpdp
// PORTABLE: return
// LLVM-LABEL: llvm.func @quads(
// LLVM: llvm.call_intrinsic "llvm.x86.avx512.vpdpbusd.256"
// LLVM-LABEL: llvm.func @words(
// LLVM: llvm.call_intrinsic "llvm.x86.avx512.vpdpwssd.256"
func.func private @quads(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxint8", rhs = "mxint8", path = "vnni"}}
func.func private @words(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp6_e3m2", rhs = "mxfp6_e3m2", path = "vnni"}}

// -----

// MXFP8 x MXFP8 on avx512: the GEMM by vdpbf16ps, in 512-bit vectors.  Each side's codes
// decoded once per call (A) or unit (B) to their scaled values' bf16 bits, exact (placed
// bits: the block factor's exponent added, no conversion, no multiply), stored as pairs of
// K positions (one i32 each; B 16 columns at a time, each chunk's 16 pairs of the 16
// columns transposed in registers, a vector store per pair).  f32 accumulators run over the
// whole of K, one vdpbf16ps per pair (A's pair broadcast against 16 columns' pairs: two
// exact products added into each lane) -- no block ends, no conversion; each accumulator
// is 16 columns, stored as it is.
// CHECK-LABEL: func.func @bf16s(
// CHECK: %[[AQ:.*]] = memref.view %{{.*}}[%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi32>
// CHECK-NOT: arith.extf
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"
// CHECK: arith.addi %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK: vector.bitcast %{{.*}} : vector<32xi16> to vector<16xi32>
// CHECK-COUNT-64: vector.shuffle %{{.*}}, %{{.*}} [{{.*}}] : vector<16xi32>, vector<16xi32>
// CHECK-COUNT-16: vector.store %{{.*}} : memref<?xi32>, vector<16xi32>
// CHECK: %[[T:.*]]:8 = scf.for %{{.*}} iter_args(%{{.*}} = %cst{{.*}}) -> (vector<16xf32>,
// CHECK: scf.for %{{.*}} = %{{.*}} to %c16{{.*}} step %{{.*}} iter_args(
// CHECK: vector.load %{{.*}}[%{{.*}}] : memref<?xi32>, vector<16xi32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK: scf.yield %{{.*}} : vector<16xf32>,
// CHECK-NOT: arith.sitofp
// CHECK-NOT: vector.fma
// CHECK: scf.yield %{{.*}} : vector<16xf32>,
// CHECK-NOT: vector.shuffle
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}], %{{.*}}, %[[T]]#0 : memref<?xf32>, vector<16xi1>, vector<16xf32>
// PORTABLE-LABEL: func.func @bf16s(
// PORTABLE-NOT: dpbf16ps
// PORTABLE: return
// LLVM-LABEL: llvm.func @bf16s(
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
func.func private @bf16s(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp8_e4m3", rhs = "mxfp8_e4m3", path = "avx512"}}

// -----

// MXFP6 E3M2 x MXFP6 E3M2 on avx512 (the word pairs): the GEMM's exact block sums on
// vdpbf16ps.  Both sides packed as scaled bf16 pairs (exact); per block the accumulators
// start at zero, take one vdpbf16ps per pair of K positions -- every partial sum exact --
// and are added into the result lanes: no vpdpwssd, no conversion, no multiply, no FMA.
// CHECK-LABEL: func.func @blocks(
// CHECK-NOT: vpdpwssd
// CHECK: scf.for %{{.*}} iter_args(
// CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: %[[S:.*]]:8 = scf.for %{{.*}} = %{{.*}} to %c16{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[Z]], %{{.*}} = %[[Z]],
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK: scf.yield %{{.*}} : vector<16xf32>,
// CHECK-NOT: arith.sitofp
// CHECK-NOT: vector.fma
// CHECK-COUNT-8: arith.addf %{{.*}}, %[[S]]#{{[0-7]}} : vector<16xf32>
// CHECK: scf.yield %{{.*}} : vector<16xf32>,
// CHECK-NOT: vpdpwssd
// CHECK: vector.maskedstore
// LLVM-LABEL: llvm.func @blocks(
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
func.func private @blocks(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp6_e3m2", rhs = "mxfp6_e3m2", path = "avx512"}}

// -----

// MXFP4 x MXFP8 on amx: the GEMM on AMX-BF16 tiles (an f8 or e3m2 side; the pairs of
// avx512's byte dot products keep those).  Both sides packed as scaled bf16 pairs
// into bytes seen as i32 (the stores) and as bf16 rows (the tiles): A's rows of whole tiles
// of K, B's pairs of K positions by the panel's 32 columns, zeros past K.  Per 32 rows of A,
// 2 x 2 result tiles of 16 x 16 f32 in a stack scratch: zeroed, then per eight steps of 32
// values of K loaded once, two tiles of A (16 rows x 32 bf16) and two of B (16 pairs x 16
// columns) per step and four tile products, stored once; a last loop takes the steps left.
// The results leave 16 columns at a time under a mask: no integer dot product, no FMA.
// (Up to 16 rows of A the kernel streams, as on avx512.)
// CHECK-LABEL: func.func @tiles(
// CHECK: %[[BQ:.*]] = memref.view %[[BRAW:.*]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi32>
// CHECK: %[[AQ:.*]] = memref.view %[[ARAW:.*]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?xi32>
// CHECK: %[[AT:.*]] = memref.view %[[ARAW]][%{{.*}}][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?xbf16>
// CHECK: %[[BT:.*]] = memref.view %[[BRAW]][%{{.*}}][%{{.*}}] : memref<?xi8> to memref<?x64xbf16>
// CHECK: %[[CT:.*]] = memref.alloca() : memref<32x32xf32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK: vector.store %{{.*}}, %[[BQ]][%{{.*}}] : memref<?xi32>, vector<16xi32>
// CHECK: vector.store %{{.*}}, %[[BQ]][%{{.*}}] : memref<?xi32>, vector<16xi32>
// CHECK-NOT: memref.store %{{.*}}, %[[BQ]]
// CHECK: llvm.call_intrinsic "llvm.x86.avx2.pshuf.b"
// CHECK: arith.trunci %{{.*}} : vector<32xi32> to vector<32xi16>
// CHECK: vector.store %{{.*}}, %[[AQ]][%{{.*}}] : memref<?xi32>, vector<16xi32>
// CHECK: memref.store %c0_i32, %[[AQ]][%{{.*}}] : memref<?xi32>
// CHECK: %[[Z:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-4: amx.tile_store %[[CT]][%{{.*}}, %{{.*}}], %[[Z]] : memref<32x32xf32>, !amx.tile<16x16xf32>
// CHECK: scf.for %{{.*}} step %c8
// CHECK-COUNT-4: amx.tile_load %[[CT]][%{{.*}}, %{{.*}}] : memref<32x32xf32> into !amx.tile<16x16xf32>
// CHECK: amx.tile_load %[[AT]][%{{.*}}, %{{.*}}] : memref<?x?xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[BT]][%{{.*}}, %{{.*}}] : memref<?x64xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-32: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %[[CT]]
// CHECK: scf.for %{{.*}} step %c1
// CHECK-COUNT-4: amx.tile_mulf
// CHECK-NOT: amx.tile_mulf
// CHECK-NOT: vector.fma
// CHECK: vector.load %[[CT]][%{{.*}}, %{{.*}}] : memref<32x32xf32>, vector<16xf32>
// CHECK: vector.maskedstore %{{.*}}[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xf32>, vector<16xi1>, vector<16xf32>
// CHECK: return
// PORTABLE-LABEL: func.func @tiles(
// PORTABLE-NOT: amx.
// PORTABLE: return
// LLVM-LABEL: llvm.func @tiles(
// LLVM: llvm.call_intrinsic "llvm.x86.tdpbf16ps.internal"
func.func private @tiles(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "mxfp8_e4m3", path = "amx"}}

// -----

// bf16 activations against MXFP8 weights on avx512, the streaming tiles (one or two rows:
// one tile of 4 columns; 3 to 16 rows: tiles of 4 or 8), software-pipelined: A's rows copied
// once per batch in slabs of a step's 32 values of a tile's rows (the tiles' rows: M, or M
// rounded up to 8; K rounded up to 32), read from one pointer; B's first two chunks per column
// decoded to their scaled bf16 values (placed bits, the factor from the panel's scratch)
// before the loop over K; each step decodes the chunks two steps on (carried: 4 columns x 2) while
// one vdpbf16ps per row and column runs on the chunk decoded two steps before.
// CHECK-LABEL: func.func @gemv_bf16(
// CHECK-SAME: %[[A:[^:]+]]: memref<?xbf16>
// CHECK: %[[UP:.+]] = arith.ceildivui %{{.*}}, %c8{{.*}} : index
// CHECK: %[[UP8:.+]] = arith.muli %[[UP]], %c8{{.*}} : index
// CHECK: %[[AP:.+]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xbf16>
// CHECK: %[[ROWS:.+]] = arith.select %{{.*}}, %{{.*}}, %[[UP8]] : index
// each tile's rows in slabs of their own (at most 8 rows a slab)
// CHECK: %[[SLAB:.+]] = arith.minui %[[ROWS]], %c8{{.*}} : index
// CHECK: memref.load %{{.*}} : memref<1xindex>
// CHECK: %[[V:.+]] = vector.load %[[A]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK: vector.store %[[V]], %[[AP]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// one row: a tile of 4 columns (4 columns x 2 steps carried)
// CHECK: scf.for %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>)
// two rows (their own copy of A's rows first):
// CHECK: memref.load %{{.*}} : memref<1xindex>
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK-NEXT: %[[B0:.+]] = arith.bitcast %{{.*}} : vector<32xi16> to vector<32xbf16>
// CHECK: scf.for %{{.*}} iter_args(%[[ACC:[^ ]+]] = %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[CUR:[^ ]+]] = %[[B0]], {{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>)
// CHECK: arith.ori %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK-NEXT: %[[NEXT:.+]] = arith.bitcast %{{.*}} : vector<32xi16> to vector<32xbf16>
// CHECK: %[[KR:.+]] = arith.muli %{{.*}}, %[[SLAB]] : index
// CHECK: %[[O:.+]] = arith.addi %{{.*}}, %[[KR]] : index
// CHECK: %[[AV:.+]] = vector.load %[[AP]][%[[O]]] : memref<?xbf16>, vector<32xbf16>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%[[ACC]], %[[AV]], %[[CUR]]) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK: scf.yield {{.*}}, %[[NEXT]], %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} : {{.*}}, vector<32xbf16>
// the f32 lanes summed as a tree (reassociated)
// CHECK: vector.reduction <add>, %{{[^ ]+}} fastmath<reassoc> : vector<16xf32> into f32
// the tiles of more rows: 4 x 2 and 8 x 2 (two columns x two steps carried)
// CHECK: scf.for %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>)
// CHECK: scf.for %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>)
// CHECK: memref.dealloc %[[AP]] : memref<?xbf16>
func.func private @gemv_bf16(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp8_e4m3", path = "avx512"}}

// -----

// bf16 activations against MXFP6 E2M3 weights on avx512: past 48 rows (the streaming
// tiles') the packed GEMM on vdpbf16ps.  B's panel is packed as for the MX pairs (one view of
// i32 pairs: the only one; A has no packed scratch); A's pairs of K positions are read as
// stored -- a 32-bit load of two bf16 values, broadcast -- from rows clamped at M's last
// (the tile's rows past M repeat it); f32 accumulators over the whole of K, 4 rows x 2
// vectors of 16 columns.
// CHECK-LABEL: func.func @gemm_bf16(
// CHECK-SAME: %[[A:[^:]+]]: memref<?xbf16>
// CHECK: memref.view %{{.*}} : memref<?xi8> to memref<?xi32>
// CHECK-NOT: memref.view
// CHECK: %[[BIG:.+]] = arith.cmpi ugt, %{{.*}}, %c48{{.*}} : index
// CHECK: %[[GO:.+]] = arith.andi %[[BIG]], %{{.*}} : i1
// CHECK-NEXT: scf.if %[[GO]] {
// CHECK: scf.for %[[M0:.+]] = %{{.*}} to %{{.*}} step %c4{{.*}} {
// CHECK: %[[I:.+]] = arith.addi %[[M0]], %c0{{.*}} : index
// CHECK-NEXT: %[[R:.+]] = arith.minui %[[I]], %{{.*}} : index
// CHECK-NEXT: %[[ROW:.+]] = arith.addi %{{.*}}, %[[R]] : index
// CHECK-NEXT: %[[AR:.+]] = arith.muli %[[ROW]], %{{.*}} : index
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: %[[BV:.+]] = vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// CHECK: %[[P:.+]] = arith.addi %[[AR]], %{{.*}} : index
// CHECK-NEXT: %{{.*}} = arith.constant 2 : index
// CHECK-NEXT: %[[E:.+]] = arith.muli %[[P]], %{{.*}} : index
// CHECK-NEXT: %[[AV:.+]] = vector.load %[[A]][%[[E]]] : memref<?xbf16>, vector<2xbf16>
// CHECK-NEXT: %[[AI:.+]] = vector.bitcast %[[AV]] : vector<2xbf16> to vector<1xi32>
// CHECK-NEXT: %[[A1:.+]] = vector.extract %[[AI]][0] : i32 from vector<1xi32>
// CHECK-NEXT: %[[AB:.+]] = vector.broadcast %[[A1]] : i32 to vector<16xi32>
// CHECK-NEXT: %[[AP:.+]] = vector.bitcast %[[AB]] : vector<16xi32> to vector<32xbf16>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}, %[[AP]], %[[BV]]) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK-NOT: arith.sitofp
// CHECK-NOT: vector.fma
// CHECK: vector.maskedstore
// PORTABLE-LABEL: func.func @gemm_bf16(
// PORTABLE-NOT: dpbf16ps
// PORTABLE-NOT: vector<2xbf16>
// PORTABLE: return
// LLVM-LABEL: llvm.func @gemm_bf16(
// LLVM: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
func.func private @gemm_bf16(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp6_e2m3", path = "avx512"}}

// -----

// bf16 activations against MXFP4 weights: the pipelined tile's chunk of 32 codes by one
// word permute from the block's table -- the row of the module's constant table of every
// e8m0 scale code's 16 products (bf16 bits, each row twice over: vpermw's 32 words by one
// load) that the block's scale byte, read as stored, selects: no factor, no multiply, no
// conversion, no shuffle, no pass over the panel's scales before the tiles.  The byte
// passes an empty inline asm (an optimization barrier: LLVM's SLP vectorizer would gather
// the tile's columns' bytes into a vector and back).
// CHECK: memref.global "private" constant @mxlower_mxfp4_e2m1_bf16x2 : memref<8192xi16> = dense<"0x{{[0-9A-F]+}}"> {alignment = 64 : i64}
// CHECK-LABEL: func.func @gemv_bf16_f4(
// CHECK-NOT: vector.store {{.*}} : memref<?xf32>, vector<8xf32>
// CHECK: scf.for {{.*}} -> ({{.*}}vector<32xbf16>)
// CHECK: %[[G:.+]] = memref.get_global @mxlower_mxfp4_e2m1_bf16x2 : memref<8192xi16>
// CHECK: %[[S:.+]] = memref.load %arg2[%{{.*}}] : memref<?xi8>
// CHECK-NEXT: %[[S32:.+]] = arith.extui %[[S]] : i8 to i32
// CHECK-NEXT: %[[OP:.+]] = llvm.inline_asm "", "=r,0" %[[S32]] : (i32) -> i32
// CHECK-NEXT: %[[C:.+]] = arith.index_castui %[[OP]] : i32 to index
// CHECK: %[[O:.+]] = arith.muli %[[C]], %{{.*}} : index
// CHECK-NEXT: %[[TW:.+]] = vector.load %[[G]][%[[O]]] : memref<8192xi16>, vector<32xi16>
// CHECK-NOT: arith.mulf
// CHECK-NOT: vector.shuffle
// CHECK: %[[RAW:.+]] = vector.load %{{.*}} : memref<?xi8>, vector<16xi8>
// CHECK: %[[D:.+]] = arith.extui %[[RAW]] : vector<16xi8> to vector<16xi32>
// CHECK: %[[H:.+]] = arith.shli %[[D]], %{{.*}} : vector<16xi32>
// CHECK: %[[I:.+]] = arith.ori %[[D]], %[[H]] : vector<16xi32>
// CHECK: %[[IW:.+]] = vector.bitcast %[[I]] : vector<16xi32> to vector<32xi16>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%[[TW]], %[[IW]]) : (vector<32xi16>, vector<32xi16>) -> vector<32xi16>
// CHECK: llvm.x86.avx512bf16.dpbf16ps.512
// the tiles of 8 rows: 3 columns (NR_STREAM_TILE_TABLES), two steps of each carried
// CHECK: scf.for %{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>, vector<32xbf16>) {
func.func private @gemv_bf16_f4(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp4_e2m1", path = "avx512"}}

// -----

// bf16 activations against NVFP4 weights (chunks of 16): two chunks per step, so that each
// vdpbf16ps is a 512-bit one, by one word permute from the two blocks' tables of 16 scaled
// values side by side (each index the code's nibble, the second chunk's or-ed with 16), the
// two chunks' codes by one 16-byte load.  Each block's table is the row of the module's
// constant (every E4M3 scale code's 16 products, exact in bf16) that its scale byte,
// read as stored, selects: no multiply, no conversion.  Past K (an odd number of chunks)
// the second chunk's codes are masked off (code 0: a masked load never faults there),
// against zeros in A's last slab (stored after each row's copy).
// CHECK: memref.global "private" constant @mxlower_nvfp4_bf16 : memref<4096xi16> = dense<"0x{{[0-9A-F]+}}"> {alignment = 64 : i64}
// CHECK-LABEL: func.func @gemv_nvfp4(
// CHECK: %[[Z:.+]] = arith.constant dense<0.000000e+00> : vector<16xbf16>
// CHECK: vector.store %[[Z]], %[[AP:[^\[]+]][%{{.*}}] : memref<?xbf16>, vector<16xbf16>
// CHECK-NOT: vector.store {{.*}} : memref<?xf32>, vector<8xf32>
// CHECK: %[[IN:.+]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK: %[[G:.+]] = memref.get_global @mxlower_nvfp4_bf16 : memref<4096xi16>
// CHECK: memref.load %arg2[%{{.*}}] : memref<?xi8>
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: %[[T0:.+]] = vector.load %[[G]][%{{.*}}] : memref<4096xi16>, vector<16xi16>
// CHECK: memref.load %arg2[%{{.*}}] : memref<?xi8>
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: %[[T1:.+]] = vector.load %{{.*}}[%{{.*}}] : memref<4096xi16>, vector<16xi16>
// CHECK-NOT: arith.mulf
// CHECK: %[[TW:.+]] = vector.shuffle %[[T0]], %[[T1]] [0, 1, {{.*}}, 30, 31] : vector<16xi16>, vector<16xi16>
// CHECK-NOT: cvtne2ps2bf16
// CHECK: %[[LOW:.+]] = arith.constant dense<[true, true, true, true, true, true, true, true, false, {{.*}}, false]> : vector<16xi1>
// CHECK: %[[MASK:.+]] = arith.select %[[IN]], %{{.*}}, %[[LOW]] : vector<16xi1>
// CHECK: %[[R:.+]] = vector.maskedload %{{.*}}[%{{.*}}], %[[MASK]], %{{.*}} : memref<?xi8>, vector<16xi1>, vector<16xi8> into vector<16xi8>
// CHECK: %[[D:.+]] = arith.extui %[[R]] : vector<16xi8> to vector<16xi32>
// CHECK: %[[H:.+]] = arith.shli %[[D]], %{{.*}} : vector<16xi32>
// CHECK: %[[I:.+]] = arith.ori %[[D]], %[[H]] : vector<16xi32>
// CHECK: %[[IW:.+]] = vector.bitcast %[[I]] : vector<16xi32> to vector<32xi16>
// CHECK: %[[NIB:.+]] = arith.andi %[[IW]], %{{.*}} : vector<32xi16>
// CHECK: %[[SEC:.+]] = arith.constant dense<[0, {{.*}}, 0, 16, {{.*}}, 16]> : vector<32xi16>
// CHECK: %[[IX:.+]] = arith.ori %[[NIB]], %[[SEC]] : vector<32xi16>
// CHECK: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%[[TW]], %[[IX]])
// CHECK: %[[B:.+]] = arith.bitcast %[[V]] : vector<32xi16> to vector<32xbf16>
// CHECK: scf.for {{.*}} step %c32{{.*}} iter_args({{.*}} = %[[B]], %{{.*}} = %{{.*}}) -> ({{.*}}vector<32xbf16>, vector<32xbf16>)
// CHECK: vector.load %[[AP]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
func.func private @gemv_nvfp4(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "nvfp4", path = "avx512"}}

// -----

// bf16 activations against MXFP6 (e2m3) weights: the piped tile's chunk of 32 codes by one
// word permute (its 5 index bits: the code's magnitude) from the block's table of the 32
// magnitudes' scaled values -- the row of the module's constant table of every e8m0 scale
// code's 32 products (bf16 bits) that the block's scale byte selects -- the sign bit then
// moved to bit 15.
// CHECK: memref.global "private" constant @mxlower_mxfp6_e2m3_bf16 : memref<8192xi16>
// CHECK-LABEL: func.func @gemv_f6(
// CHECK: scf.for {{.*}} -> ({{.*}}vector<32xbf16>)
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: %[[TW:.+]] = vector.load %{{.*}}[%{{.*}}] : memref<8192xi16>, vector<32xi16>
// CHECK: %[[RAW:.+]] = vector.load %{{.*}} : memref<?xi8>, vector<32xi8>
// CHECK: %[[C:.+]] = arith.extui %[[RAW]] : vector<32xi8> to vector<32xi16>
// CHECK: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%[[TW]], %[[C]]) : (vector<32xi16>, vector<32xi16>) -> vector<32xi16>
// CHECK: %[[S:.+]] = arith.shli %[[C]], %{{.*}} : vector<32xi16>
// CHECK: %[[SB:.+]] = arith.andi %[[S]], %{{.*}} : vector<32xi16>
// CHECK: arith.ori %[[V]], %[[SB]] : vector<32xi16>
// CHECK: llvm.x86.avx512bf16.dpbf16ps.512
func.func private @gemv_f6(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp6_e2m3", path = "avx512"}}

// -----

// bf16 activations against MXFP8 (e4m3) weights: the piped tile's chunk of 32 codes
// decoded by placing their bits, no conversion and no multiply -- the magnitude shifted
// into bf16's fields, the block factor's exponent (less the bias) added; the subnormal
// codes' normalized bits (from -256: 2^-9) and zero's and NaN's (32704 = 0x7FC0) by one
// word permute, the sign moved to bit 15.  The exponent word (the factor's bf16 exponent
// field less the bias, 7 << 7 = 896, in both halves of an i32) comes from the panel's
// scratch, formed once per block before the tiles.
// CHECK-LABEL: func.func @gemv_f8(
// CHECK: arith.constant dense<896> : vector<8xi32>
// CHECK: scf.for {{.*}} -> ({{.*}}vector<32xbf16>)
// CHECK: %[[RAW:.+]] = vector.load %{{.*}} : memref<?xi8>, vector<32xi8>
// CHECK: %[[C:.+]] = arith.extui %[[RAW]] : vector<32xi8> to vector<32xi16>
// CHECK: %[[MAG:.+]] = arith.andi %[[C]], %{{.*}} : vector<32xi16>
// CHECK: %[[P:.+]] = arith.shli %[[MAG]], %{{.*}} : vector<32xi16>
// CHECK: %[[TB:.+]] = arith.constant dense<[0, -256, -128, -64, 0, 32, 64, 96, {{.*}}, 32704]> : vector<32xi16>
// CHECK: %[[T:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%[[TB]], %[[C]])
// CHECK: %[[SUB:.+]] = arith.cmpi ult, %[[MAG]], %{{.*}} : vector<32xi16>
// CHECK: %[[N:.+]] = arith.select %[[SUB]], %[[T]], %[[P]] : vector<32xi1>, vector<32xi16>
// CHECK: %[[W:.+]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK: %[[DV:.+]] = vector.bitcast %[[W]] : vector<16xf32> to vector<32xi16>
// CHECK: %[[Q:.+]] = arith.addi %[[N]], %[[DV]] : vector<32xi16>
// CHECK: %[[K:.+]] = arith.cmpi uge, %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK: %[[R:.+]] = arith.select %[[K]], %[[T]], %[[Q]] : vector<32xi1>, vector<32xi16>
// CHECK: %[[S:.+]] = arith.shli %[[C]], %{{.*}} : vector<32xi16>
// CHECK: %[[SB:.+]] = arith.andi %[[S]], %{{.*}} : vector<32xi16>
// CHECK: arith.ori %[[R]], %[[SB]] : vector<32xi16>
// CHECK-NOT: arith.extf
// CHECK: llvm.x86.avx512bf16.dpbf16ps.512
func.func private @gemv_f8(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp8_e4m3", path = "avx512"}}

// -----

// bf16 activations against MXINT8 weights: the piped tile's chunk of 32 codes by placed
// bits too -- magnitudes below 64 from a 64-entry table of their bf16 bits (vpermt2w; 16256
// is 1.0), from 64 on the six low bits placed under the exponent 6 (16896 + 2m), then the
// factor's exponent added (zeros kept) and the sign (bit 15 of the widened code) or-ed in.
// CHECK-LABEL: func.func @gemv_int8(
// CHECK: %[[C:.+]] = arith.extsi %{{.*}} : vector<32xi8> to vector<32xi16>
// CHECK: %[[N:.+]] = arith.subi %{{.*}}, %[[C]] : vector<32xi16>
// CHECK: %[[M:.+]] = arith.maxsi %[[C]], %[[N]] : vector<32xi16>
// CHECK: %[[T0:.+]] = arith.constant dense<[0, 16256, 16384, {{.*}}]> : vector<32xi16>
// CHECK: %[[T1:.+]] = arith.constant dense<[16896, 16900, {{.*}}]> : vector<32xi16>
// CHECK: %[[TV:.+]] = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.hi.512"(%[[T0]], %[[M]], %[[T1]])
// CHECK: %[[BIG:.+]] = arith.cmpi uge, %[[M]], %{{.*}} : vector<32xi16>
// CHECK: %[[P:.+]] = arith.select %[[BIG]], %{{.*}}, %[[TV]] : vector<32xi1>, vector<32xi16>
// CHECK: %[[Q:.+]] = arith.addi %[[P]], %{{.*}} : vector<32xi16>
// CHECK: %[[Z:.+]] = arith.cmpi eq, %[[M]], %{{.*}} : vector<32xi16>
// CHECK: %[[R:.+]] = arith.select %[[Z]], %[[P]], %[[Q]] : vector<32xi1>, vector<32xi16>
// CHECK: %[[S:.+]] = arith.andi %[[C]], %{{.*}} : vector<32xi16>
// CHECK: arith.ori %[[R]], %[[S]] : vector<32xi16>
// CHECK-NOT: arith.sitofp
// CHECK: llvm.x86.avx512bf16.dpbf16ps.512
func.func private @gemv_int8(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxint8", path = "avx512"}}

// -----

// MXFP8 activations against MXFP8 weights on avx512 (a pair off the exact path): the streaming
// tiles decode A's few rows once per batch -- to their scaled f32 values in the scratch, then
// to bf16 (exact: at most 8 significant bits, normal under the range test) in the copy in
// slabs -- and run on bf16 dot products as bf16 rows do.
// CHECK-LABEL: func.func @gemv_mx_f8(
// CHECK: %[[AP:.+]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?xbf16>
// CHECK: memref.load %{{.*}} : memref<1xindex>
// CHECK: vector.store %{{.*}}, %[[AD:[^\[]+]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK: %[[V:.+]] = vector.load %[[AD]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK-NEXT: %[[H:.+]] = arith.truncf %[[V]] : vector<32xf32> to vector<32xbf16>
// CHECK: vector.store %[[H]], %[[AP]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK: %[[AV:.+]] = vector.load %[[AP]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}, %[[AV]], %{{.*}}) : (vector<16xf32>, vector<32xbf16>, vector<32xbf16>) -> vector<16xf32>
// CHECK: memref.dealloc %[[AP]] : memref<?xbf16>
func.func private @gemv_mx_f8(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp8_e4m3", rhs = "mxfp8_e4m3", path = "avx512"}}

// -----

// One f16 row against NVFP4 weights on avx512 (chunks of 16): the one-row path's codes by
// one f32 permute from the constant table of the 16 codes' integer units (no factor: the
// block's sum of unscaled values is multiplied by it once), A's row decoded to f32 once,
// FMAs in 16 lanes.  (One f32 or bf16 row runs the piped tile instead: see @gemv_nvfp4,
// @gemv_f32_nvfp4.)
// CHECK-LABEL: func.func @gemv_one_row_f4(
// CHECK: %[[TB:.+]] = arith.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 6.000000e+00, 8.000000e+00, 1.200000e+01, 0.000000e+00, -1.000000e+00, {{.*}}]> : vector<16xf32>
// CHECK-NOT: arith.mulf
// CHECK: %[[Q:.+]] = arith.extui %{{.*}} : vector<8xi8> to vector<8xi64>
// CHECK: %[[I:.+]] = vector.bitcast %{{.*}} : vector<8xi64> to vector<16xi32>
// CHECK: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%[[TB]], %[[I]])
// CHECK: %[[A:.+]] = vector.load %{{.*}}[%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
func.func private @gemv_one_row_f4(memref<?xf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f16", rhs = "nvfp4", path = "avx512"}}

// -----

// f32 activations against MXFP4 weights on avx512: the piped tiles' chunks of 32 codes by
// two f32 permutes from the block's table -- the row of the module's f32 constant of every
// e8m0 scale code's 16 products that its scale byte selects (eight code bytes widened to
// i64 lanes, each or-ed with itself shifted by 28 bits: both nibbles of a byte as i32
// indices), then FMAs.
// CHECK: memref.global "private" constant @mxlower_mxfp4_e2m1_f32 : memref<4096xf32>
// CHECK-LABEL: func.func @gemv_f32_f4(
// CHECK: scf.for {{.*}} -> ({{.*}}vector<32xf32>)
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: %[[T:.+]] = vector.load %{{.*}}[%{{.*}}] : memref<4096xf32>, vector<16xf32>
// CHECK-NOT: arith.mulf
// CHECK: %[[Q:.+]] = arith.extui %{{.*}} : vector<8xi8> to vector<8xi64>
// CHECK: %[[H:.+]] = arith.shli %[[Q]], %{{.*}} : vector<8xi64>
// CHECK: %[[O:.+]] = arith.ori %[[Q]], %[[H]] : vector<8xi64>
// CHECK: %[[I:.+]] = vector.bitcast %[[O]] : vector<8xi64> to vector<16xi32>
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%[[T]], %[[I]]) : (vector<16xf32>, vector<16xi32>) -> vector<16xf32>
// CHECK: vector.fma %{{.*}} : vector<16xf32>
func.func private @gemv_f32_f4(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", path = "avx512"}}

// -----

// f32 activations against MXFP8 weights, one row (avx512): each block's 32 values (through
// f16) times the row's in two 16-lane FMAs (zmm: a chain of two, not four), the block's sum
// then times its factor from the panel's scratch in one more FMA.
// CHECK-LABEL: func.func @gemv_f32_f8(
// CHECK: scf.for %{{.*}} iter_args(%[[ACC:.+]] = %{{.*}}) -> (vector<16xf32>) {
// CHECK: arith.extf %{{.*}} : vector<32xf16> to vector<32xf32>
// CHECK: %[[S0:.+]] = vector.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: %[[S1:.+]] = vector.fma %{{.*}}, %{{.*}}, %[[S0]] : vector<16xf32>
// CHECK: %[[F:.+]] = memref.load %{{.*}} : memref<?xf32>
// CHECK: %[[FV:.+]] = vector.broadcast %[[F]] : f32 to vector<16xf32>
// CHECK: %[[R:.+]] = vector.fma %[[S1]], %[[FV]], %[[ACC]] : vector<16xf32>
// CHECK-NEXT: scf.yield %[[R]] : vector<16xf32>
// CHECK: vector.reduction <add>, %{{[^ ]+}} fastmath<reassoc> : vector<16xf32> into f32
// The piped tiles of 2-16 rows place the e4m3 codes' bits (their block factor's exponent
// added, subnormal codes from a table) and widen the bf16 bits to f32 by a shift: no f16
// conversion, no multiply beside the FMAs.
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"
// CHECK: %[[W:.+]] = arith.bitcast %{{.*}} : vector<32xi16> to vector<32xbf16>
// CHECK-NEXT: arith.extf %[[W]] : vector<32xbf16> to vector<32xf32>
func.func private @gemv_f32_f8(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp8_e4m3", path = "avx512"}}

// -----

// f32 activations against NVFP4 weights, the piped tiles (two rows and more): each block's
// 16 scaled values are the row of the module's f32 constant (every E4M3 scale code's 16
// products) that its scale byte selects, permuted by the codes (vpermps): no factor, no
// multiply, and no pass over the panel's scales before the tiles.
// CHECK: memref.global "private" constant @mxlower_nvfp4_f32 : memref<4096xf32> = dense<"0x{{[0-9A-F]+}}"> {alignment = 64 : i64}
// CHECK-LABEL: func.func @gemv_f32_nvfp4(
// CHECK: %[[G:.+]] = memref.get_global @mxlower_nvfp4_f32 : memref<4096xf32>
// CHECK: %[[S:.+]] = memref.load %arg2[%{{.*}}] : memref<?xi8>
// CHECK-NEXT: %[[S32:.+]] = arith.extui %[[S]] : i8 to i32
// CHECK-NEXT: %[[OP:.+]] = llvm.inline_asm "", "=r,0" %[[S32]] : (i32) -> i32
// CHECK-NEXT: %[[C:.+]] = arith.index_castui %[[OP]] : i32 to index
// CHECK: %[[O:.+]] = arith.muli %[[C]], %{{.*}} : index
// CHECK-NEXT: %[[T:.+]] = vector.load %[[G]][%[[O]]] : memref<4096xf32>, vector<16xf32>
// CHECK-NOT: arith.mulf
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%[[T]], %{{.*}}) : (vector<16xf32>, vector<16xi32>) -> vector<16xf32>
// CHECK: vector.fma
func.func private @gemv_f32_nvfp4(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "nvfp4", path = "avx512"}}

// -----

// f32 activations against MXFP6 (e2m3) weights, the piped tile of two rows: each chunk of 32
// codes by two-table permutes (vpermi2ps: 5 index bits, the code's magnitude) from the
// block's 32 values -- the row of the module's f32 constant of every e8m0 scale code's 32
// products that its scale byte selects -- the sign bit then moved to bit 31: no conversion
// and no multiply on the FMA pipes.  Tiles of more rows decode by a magic number: the
// codes' integer units (mod 2^10, from a word permute) xor-ed into the bits of the block's
// factor times 2^23 (and the offset 2^9), then that word's value subtracted -- an integer op
// and an f32 subtract instead of a conversion and a multiply.
// CHECK: memref.global "private" constant @mxlower_mxfp6_e2m3_f32 : memref<8192xf32>
// CHECK-LABEL: func.func @gemv_f32_f6(
// CHECK: llvm.inline_asm "", "=r,0"
// CHECK: %[[T:.+]] = vector.load %{{.*}}[%{{.*}}] : memref<8192xf32>, vector<32xf32>
// CHECK: %[[LO:.+]] = vector.extract_strided_slice %[[T]] {offsets = [0], sizes = [16], strides = [1]}
// CHECK: %[[HI:.+]] = vector.extract_strided_slice %[[T]] {offsets = [16], sizes = [16], strides = [1]}
// CHECK: %[[C:.+]] = arith.extui %{{.*}} : vector<16xi8> to vector<16xi32>
// CHECK: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.ps.512"(%[[LO]], %[[C]], %[[HI]])
// CHECK: %[[VB:.+]] = arith.bitcast %[[V]] : vector<16xf32> to vector<16xi32>
// CHECK: %[[SG:.+]] = arith.shli %[[C]], %{{.*}} : vector<16xi32>
// CHECK: %[[SB:.+]] = arith.andi %[[SG]], %{{.*}} : vector<16xi32>
// CHECK: arith.ori %[[VB]], %[[SB]] : vector<16xi32>
// CHECK-NOT: arith.mulf
// CHECK: vector.fma
// CHECK: llvm.call_intrinsic "llvm.x86.avx512.vpermi2var.hi.512"
// CHECK-NEXT: %[[U:.+]] = arith.extui %{{.*}} : vector<32xi16> to vector<32xi32>
// CHECK-NEXT: %[[FB:.+]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK-NEXT: %[[OFF:.+]] = arith.constant 192938496 : i32
// CHECK-NEXT: %[[MB:.+]] = arith.addi %[[FB]], %[[OFF]] : i32
// CHECK-NEXT: %[[MV:.+]] = vector.broadcast %[[MB]] : i32 to vector<32xi32>
// CHECK-NEXT: %[[X:.+]] = arith.xori %[[U]], %[[MV]] : vector<32xi32>
// CHECK-NEXT: %[[XF:.+]] = arith.bitcast %[[X]] : vector<32xi32> to vector<32xf32>
// CHECK-NEXT: %[[MF:.+]] = arith.bitcast %[[MV]] : vector<32xi32> to vector<32xf32>
// CHECK-NEXT: arith.subf %[[XF]], %[[MF]] : vector<32xf32>
func.func private @gemv_f32_f6(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp6_e2m3", path = "avx512"}}

// -----

// f32 activations against MXINT8 weights, the piped tiles: the codes' bytes widened (no sign
// extension), xor-ed with the bits of the block's factor times 2^23 plus 2^7, the result
// less that word's value -- each code times its factor, exact, with no conversion and no
// multiply.  (23 << 23) + 128 = 192938112.  The range test then also bounds the block
// factors (2^(23 + e) a finite f32: e <= 104; the largest values 2^7 of it: t_b <= 111).
// CHECK-LABEL: func.func @gemv_f32_i8(
// CHECK-NOT: func.func
// CHECK: %[[W:.+]] = arith.extui %{{.*}} : vector<32xi8> to vector<32xi32>
// CHECK-NEXT: %[[FB:.+]] = arith.bitcast %{{.*}} : f32 to i32
// CHECK-NEXT: %[[OFF:.+]] = arith.constant 192938112 : i32
// CHECK-NEXT: %[[MB:.+]] = arith.addi %[[FB]], %[[OFF]] : i32
// CHECK-NEXT: %[[MV:.+]] = vector.broadcast %[[MB]] : i32 to vector<32xi32>
// CHECK-NEXT: %[[X:.+]] = arith.xori %[[W]], %[[MV]] : vector<32xi32>
// CHECK-NEXT: %[[XF:.+]] = arith.bitcast %[[X]] : vector<32xi32> to vector<32xf32>
// CHECK-NEXT: %[[MF:.+]] = arith.bitcast %[[MV]] : vector<32xi32> to vector<32xf32>
// CHECK-NEXT: %[[V:.+]] = arith.subf %[[XF]], %[[MF]] : vector<32xf32>
// CHECK: vector.fma
// CHECK-LABEL: func.func @gemv_f32_i8_range(
// CHECK: %[[TOP:.+]] = arith.constant 111 : i32
// CHECK-NEXT: arith.cmpi sle, %{{.*}}, %[[TOP]] : i32
// CHECK: memref.store
func.func private @gemv_f32_i8(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxint8", path = "avx512"}}
func.func private @gemv_f32_i8_range(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxint8", path = "avx512", part = "range"}}

// -----

// Plain rows against weights held K-major ([B, K, N], scales [B, K / k, N]: rhs_layout =
// "kn"): per unit (a block of 1024 rows, a panel of 256 columns) the tiles of 8 rows walk K
// together in chunks of 64 rows -- per block the columns' factors into a scratch, per row
// of K each vector of 32 columns' codes (contiguous) decoded and scaled once into a scratch
// of f32 values on the stack; then per tile and vector its 8 rows x 2 vectors of 16 lanes
// from a heap scratch of every tile's results, per row of the chunk the two vectors of
// values loaded and one FMA a row and vector with A's value broadcast --, and the tiles of
// 4, 2, 1 rows decode their own, one FMA a row and vector of 32 columns; the columns past
// the panel's whole vectors (and every unit where the range test fails) take the exact
// f64 contraction, one result at a time, the codes' values from a constant table.
// CHECK: memref.global "private" constant @mxlower_mxfp8_e4m3_units_f64 : memref<256xf64>
// CHECK-LABEL: func.func @gemv_kn(
// CHECK-DAG: %[[VA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16384xf32>
// CHECK-DAG: %[[VS:.+]] = memref.cast %[[VA]] : memref<16384xf32> to memref<?xf32>
// CHECK-DAG: %[[ACC:.+]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: scf.for
// CHECK: arith.muli %{{.*}}, %c1024{{.*}} : index
// CHECK: scf.if %{{.*}} {
// CHECK: %[[F:.+]] = vector.load %arg2[%{{.*}}] : memref<?xi8>, vector<32xi8>
// CHECK: memref.prefetch %arg1
// CHECK: vector.load %arg1[%{{.*}}] : memref<?xi8>, vector<32xi8>
// CHECK: %[[V:.+]] = arith.mulf %{{.*}}, %{{.*}} : vector<32xf32>
// CHECK: vector.store %[[V]], %[[VS]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK: vector.load %[[ACC]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: %[[VL:.+]] = vector.load %[[VS]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: %[[A8:.+]] = memref.load %arg0[%{{.*}}] : memref<?xf32>
// CHECK-NEXT: %[[AV8:.+]] = vector.broadcast %[[A8]] : f32 to vector<16xf32>
// CHECK-NEXT: vector.fma %[[AV8]], %[[VL]], %{{.*}} : vector<16xf32>
// CHECK: vector.store %{{.*}}, %[[ACC]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// the tiles of 4, 2, 1 rows
// CHECK: arith.mulf %{{.*}}, %{{.*}} : vector<32xf32>
// CHECK: %[[A:.+]] = memref.load %arg0[%{{.*}}] : memref<?xf32>
// CHECK-NEXT: %[[AV:.+]] = vector.broadcast %[[A]] : f32 to vector<32xf32>
// CHECK-NEXT: vector.fma %[[AV]], %{{.*}}, %{{.*}} : vector<32xf32>
// CHECK: vector.store %{{.*}}, %arg3[%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK: memref.get_global @mxlower_mxfp8_e4m3_units_f64 : memref<256xf64>
// CHECK: arith.addf %{{.*}}, %{{.*}} : f64
// CHECK-NOT: func.func
// CHECK: memref.store %{{.*}}, %arg3[%{{.*}}] : memref<?xf32>
func.func private @gemv_kn(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp8_e4m3", path = "avx512", rhs_layout = "kn"}}

// -----

// f32 rows against K-major MXFP4 weights on avx512: each vector of 32 columns held as its 16
// even columns and its 16 odd ones (a byte's two codes); per block the scale codes' exponent
// words (even columns', odd columns': code - 127, times 2^23); per row of K its 16 bytes
// widened to 32-bit lanes, the low codes' unscaled values by one permute from a table of 16
// f32 values, the high codes' after a shift, the exponent word added to the non-zero ones --
// no conversion, no multiply.  The chunks of the tiles of 8 rows hold the values with the
// columns interleaved again; the tiles of 4, 2, 1 rows take one FMA a row and half vector
// with A's value broadcast, the columns interleaved again before the store.
// CHECK-LABEL: func.func @gemv_kn_f4(
// CHECK: %[[VA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16384xf32>
// CHECK: %[[EA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<256xi32>
// CHECK: %[[EW:.+]] = arith.shli %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK: vector.store %[[EW]], %{{.*}}[%{{.*}}] : memref<?xi32>, vector<16xi32>
// CHECK-NOT: arith.mulf
// CHECK: %[[RAW:.+]] = vector.load %arg1[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK-NEXT: %[[D:.+]] = arith.extui %[[RAW]] : vector<16xi8> to vector<16xi32>
// CHECK: %[[HI:.+]] = arith.shrui %[[D]], %{{.*}} : vector<16xi32>
// CHECK-NEXT: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%{{.*}}, %[[D]])
// CHECK-NEXT: %[[W:.+]] = arith.bitcast %[[V]] : vector<16xf32> to vector<16xi32>
// CHECK: %[[NZ:.+]] = arith.cmpi ne, %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-NEXT: %[[WE:.+]] = arith.addi %[[W]], %{{.*}} : vector<16xi32>
// CHECK-NEXT: %[[S:.+]] = arith.select %[[NZ]], %[[WE]], %[[W]] : vector<16xi1>, vector<16xi32>
// CHECK-NEXT: %[[EVEN:.+]] = arith.bitcast %[[S]] : vector<16xi32> to vector<16xf32>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"(%{{.*}}, %[[HI]])
// CHECK: %[[IN:.+]] = vector.shuffle %[[EVEN]], %{{.*}} [0, 16, 1, 17, {{.*}}, 15, 31] : vector<16xf32>, vector<16xf32>
// CHECK: vector.store %[[IN]], %{{.*}}[%{{.*}}] : memref<?xf32>, vector<32xf32>
// CHECK: vector.fma %{{.*}} : vector<16xf32>
// the tiles of 4, 2, 1 rows
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %c1{{.*}} iter_args(
// CHECK-NOT: arith.mulf
// CHECK: %[[E2:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.sf.512"
// CHECK: %[[A:.+]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK-NEXT: vector.fma %[[A]], %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK: %[[R:.+]] = vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, {{.*}}, 15, 31] : vector<16xf32>, vector<16xf32>
// CHECK: vector.store %[[R]], %arg3[%{{.*}}] : memref<?xf32>, vector<32xf32>
func.func private @gemv_kn_f4(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", path = "avx512", rhs_layout = "kn"}}

// -----

// bf16 rows against K-major MXFP4 weights on avx512: the tiles of 8 rows run on vdpbf16ps,
// all of them together, K in chunks of 64 rows.  Per chunk, per block: the panel's scale
// codes' exponent words (code - 127, times 2^7: a bf16 exponent field's step) into a
// scratch; per pair of rows of K, per vector of 32 columns (the rows' whole lines), both
// rows' codes (read as stored, the lines 16 rows on prefetched) in pair order by one byte
// permute, their unscaled values' bf16 bits by one word permute from a table, the exponent
// word added to the non-zero ones -- no conversion, no multiply -- and the pairs stored in
// a scratch on the stack.  Then per tile
// and vector its 8 rows x 2 vectors of 16 f32 lanes from a heap scratch of every tile's
// results, per pair of rows of the chunk the two vectors of pairs loaded from the scratch
// and A's pair at (k, k + 1) read as stored (one 32-bit load) and broadcast, the lanes
// stored back; the results copied out after the last chunk.  Fewer rows take the FMAs.
// CHECK-LABEL: func.func @gemv_kn_bf16(
// CHECK-DAG: %[[PA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<16384xbf16>
// CHECK-DAG: %[[PS:.+]] = memref.cast %[[PA]] : memref<16384xbf16> to memref<?xbf16>
// CHECK-DAG: %[[EA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<512xi16>
// CHECK-DAG: %[[ACC:.+]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK-DAG: %[[EB:.+]] = memref.cast %[[EA]] : memref<512xi16> to memref<?xi16>
// CHECK: %[[S:.+]] = vector.load %arg2[%{{.*}}] : memref<?xi8>, vector<32xi8>
// CHECK-NEXT: %[[S2:.+]] = vector.shuffle %[[S]], %[[S]] [0, 0, 1, 1, {{.*}}, 15, 15] : vector<32xi8>, vector<32xi8>
// CHECK-NEXT: %[[SW:.+]] = arith.extui %[[S2]] : vector<32xi8> to vector<32xi16>
// CHECK: arith.subi %[[SW]], %{{.*}} : vector<32xi16>
// CHECK: %[[ELO:.+]] = arith.shli %{{.*}}, %{{.*}} : vector<32xi16>
// CHECK: vector.store %[[ELO]], %[[EB]][%{{.*}}] : memref<?xi16>, vector<32xi16>
// CHECK: %[[EL:.+]] = vector.load %[[EB]][%{{.*}}] : memref<?xi16>, vector<32xi16>
// CHECK: memref.prefetch %arg1
// CHECK-NOT: arith.mulf
// CHECK: vector.load %arg1[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK-NOT: arith.mulf
// CHECK: %[[IX:.+]] = vector.shuffle %{{.*}}, %{{.*}} [0, 0, 16, 16, 32, 32, 48, 48, 1, 1, {{.*}}] : vector<64xi8>, vector<64xi8>
// CHECK-NEXT: %[[IW:.+]] = vector.bitcast %[[IX]] : vector<64xi8> to vector<32xi16>
// CHECK-NEXT: %[[V:.+]] = llvm.call_intrinsic "llvm.x86.avx512.permvar.hi.512"(%{{.*}}, %[[IW]])
// CHECK: %[[M:.+]] = arith.andi %[[V]], %{{.*}} : vector<32xi16>
// CHECK: %[[NZ:.+]] = arith.cmpi ne, %[[M]], %{{.*}} : vector<32xi16>
// CHECK-NEXT: %[[VE:.+]] = arith.addi %[[V]], %[[EL]] : vector<32xi16>
// CHECK-NEXT: %[[P:.+]] = arith.select %[[NZ]], %[[VE]], %[[V]] : vector<32xi1>, vector<32xi16>
// CHECK-NEXT: %[[BL:.+]] = vector.bitcast %[[P]] : vector<32xi16> to vector<32xbf16>
// CHECK: vector.store %[[BL]], %[[PS]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK: vector.load %[[ACC]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK: %[[PL:.+]] = vector.load %[[PS]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// CHECK: %[[A2:.+]] = vector.load %arg0[%{{.*}}] : memref<?xbf16>, vector<2xbf16>
// CHECK: %[[AV:.+]] = vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// CHECK-NEXT: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"(%{{.*}}, %[[AV]], %[[PL]])
// CHECK: vector.store %{{.*}}, %[[ACC]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// the tiles' results
// CHECK: %[[R:.+]] = vector.load %[[ACC]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: vector.store %[[R]], %arg3[%{{.*}}] : memref<?xf32>, vector<16xf32>
// the tiles of 4, 2, 1 rows: FMAs (on exponent words, as for f32 rows)
// CHECK: vector.fma %{{.*}} : vector<16xf32>
// CHECK: memref.dealloc %[[ACC]] : memref<?xf32>
func.func private @gemv_kn_bf16(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp4_e2m1", path = "avx512", rhs_layout = "kn"}}

// -----

// bf16 rows against K-major MXFP8 weights: the same chunks, each row's codes decoded and
// scaled in f32 (exact), each column's pair of bf16 bits taken straight from the two rows'
// f32 lanes' high words by one two-source word permute per 16 columns, into the scratch.
// CHECK-LABEL: func.func @gemv_kn_bf16_f8(
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<16384xbf16>
// CHECK: scf.for %{{.*}} = %{{.*}} to %c32{{.*}} step %c2{{.*}} {
// CHECK: %[[X:.+]] = vector.bitcast %{{.*}} : vector<32xf32> to vector<64xi16>
// CHECK: %[[Y:.+]] = vector.bitcast %{{.*}} : vector<32xf32> to vector<64xi16>
// CHECK-NEXT: %[[LO:.+]] = vector.shuffle %[[X]], %[[Y]] [1, 65, 3, 67, {{.*}}, 31, 95] : vector<64xi16>, vector<64xi16>
// CHECK-NEXT: %[[BL:.+]] = vector.bitcast %[[LO]] : vector<32xi16> to vector<32xbf16>
// CHECK-NEXT: %[[HI:.+]] = vector.shuffle %[[X]], %[[Y]] [33, 97, {{.*}}, 63, 127] : vector<64xi16>, vector<64xi16>
// CHECK: vector.store %[[BL]], %{{.*}}[%{{.*}}] : memref<?xbf16>, vector<32xbf16>
func.func private @gemv_kn_bf16_f8(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp8_e4m3", path = "avx512", rhs_layout = "kn"}}

// -----

// f16 rows against K-major weights: the tiles of 8 rows take each chunk's f32 values as f32
// rows do, their rows' values of the chunk converted to f32 once, 16 at a time, into a slab
// of the tile's rows on the stack (F16C), which every step broadcasts from.
// CHECK-LABEL: func.func @gemv_kn_f16(
// CHECK: %[[SA:.+]] = memref.alloca() {alignment = 64 : i64} : memref<512xf32>
// CHECK: %[[SL:.+]] = memref.cast %[[SA]] : memref<512xf32> to memref<?xf32>
// (allocated once, before the loop over the call's units)
// CHECK: scf.for %{{.*}} = %arg5 to %arg6
// CHECK: %[[H:.+]] = vector.load %arg0[%{{.*}}] : memref<?xf16>, vector<16xf16>
// CHECK-NEXT: %[[HF:.+]] = arith.extf %[[H]] : vector<16xf16> to vector<16xf32>
// CHECK: vector.store %[[HF]], %[[SL]][%{{.*}}] : memref<?xf32>, vector<16xf32>
// CHECK: scf.for {{.*}} -> (vector<16xf32>,
// CHECK: %[[A:.+]] = memref.load %[[SL]][%{{.*}}] : memref<?xf32>
// CHECK-NEXT: %[[AV:.+]] = vector.broadcast %[[A]] : f32 to vector<16xf32>
// CHECK-NEXT: vector.fma %[[AV]], %{{.*}}, %{{.*}} : vector<16xf32>
func.func private @gemv_kn_f16(memref<?xf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f16", rhs = "mxint8", path = "avx512", rhs_layout = "kn"}}

// -----

// MX rows against weights held K-major (rhs_layout = "kn" with an MX lhs): the kernel is
// the MX pair's [N, K] kernel (its handler first copies B to [B, N, K]), and the transpose
// part makes that copy -- units of (batch, 256 rows of K, 256 columns); tiles of 64 x 64
// bytes: 16 rows of 16 bytes loaded, transposed by four rounds of two-source shuffles (the
// first pairs row i with row i + 8: their low halves, their high halves), stored
// into a stack scratch, whose 64 rows of 64 bytes then go out whole; tiles of 16 x 16 and
// byte by byte at the edges; the scales (the first row block's units) the same way.
// CHECK-LABEL: func.func @pair_kn(
// CHECK: vector.load %arg2[%{{.*}}] : memref<?xi8>, vector<{{[0-9]+}}xi8>
// CHECK-LABEL: func.func @pair_kn_transpose(%arg0: memref<?xi8>, %arg1: memref<?xi8>, %arg2: memref<?xi8>, %arg3: memref<?xi8>, %arg4: memref<?xi64>, %arg5: index, %arg6: index)
// CHECK: %[[S:.+]] = memref.alloca() {alignment = 64 : i64} : memref<4096xi8>
// CHECK: scf.for %{{.*}} = %arg5 to %arg6 step
// CHECK: %[[R:.+]] = vector.load %arg0[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK: vector.shuffle %[[R]], %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xi8>, vector<16xi8>
// CHECK-NEXT: vector.shuffle %[[R]], %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xi8>, vector<16xi8>
// CHECK: vector.store %{{.*}}, %[[S]][%{{.*}}] : memref<4096xi8>, vector<16xi8>
// CHECK: %[[W:.+]] = vector.load %[[S]][%{{.*}}] : memref<4096xi8>, vector<64xi8>
// CHECK-NEXT: vector.store %[[W]], %arg2[%{{.*}}] : memref<?xi8>, vector<64xi8>
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK: %[[B:.+]] = memref.load %arg0[%{{.*}}] : memref<?xi8>
// CHECK: memref.store %[[B]], %arg2[%{{.*}}] : memref<?xi8>
// CHECK: scf.if
// CHECK: vector.load %arg1[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK: vector.store %{{.*}}, %arg3[%{{.*}}] : memref<?xi8>, vector<64xi8>
// CHECK: memref.store %{{.*}}, %arg3[%{{.*}}] : memref<?xi8>
func.func private @pair_kn(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp8_e4m3", rhs = "mxfp8_e4m3", path = "avx512", rhs_layout = "kn"}}
func.func private @pair_kn_transpose(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxfp8_e4m3", rhs = "mxfp8_e4m3", path = "avx512", rhs_layout = "kn", part = "transpose"}}

// -----

// Many bf16 rows against K-major weights (rhs_layout = "kn_copy"): the [N, K] kernel of the
// plain rows (its packed GEMM on bf16 dot products) on the copy its transpose part makes.
// CHECK-LABEL: func.func @rows_copy(
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
// CHECK-LABEL: func.func @rows_copy_transpose(
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>, vector<16xi8>
func.func private @rows_copy(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp4_e2m1", path = "avx512", rhs_layout = "kn_copy"}}
func.func private @rows_copy_transpose(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "mxfp4_e2m1", path = "avx512", rhs_layout = "kn_copy", part = "transpose"}}

// -----

// f4 codes (two per byte along N as held, along K in the copy): tiles of 32 rows of K x 16
// columns -- each pair of rows' 8 bytes split into the even columns' bytes (row k's code
// low, row k + 1's high) and the odd columns', the 16 x 16 bytes transposed, each of the
// 16 rows stored as a column's 32 codes --, pairs of rows and columns at the edges.
// CHECK-LABEL: func.func @f4_kn_transpose(
// CHECK: %[[X:.+]] = vector.load %arg0[%{{.*}}] : memref<?xi8>, vector<8xi8>
// CHECK: %[[Y:.+]] = vector.load %arg0[%{{.*}}] : memref<?xi8>, vector<8xi8>
// CHECK: arith.andi %[[X]], %{{.*}} : vector<8xi8>
// CHECK: arith.shli %[[Y]], %{{.*}} : vector<8xi8>
// CHECK: arith.shrui %[[X]], %{{.*}} : vector<8xi8>
// CHECK: arith.andi %[[Y]], %{{.*}} : vector<8xi8>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] : vector<8xi8>, vector<8xi8>
// CHECK: vector.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>, vector<16xi8>
// CHECK: %[[PX:.+]] = memref.load %arg0[%{{.*}}] : memref<?xi8>
// CHECK: %[[PY:.+]] = memref.load %arg0[%{{.*}}] : memref<?xi8>
// CHECK: arith.shli %[[PY]], %{{.*}} : i8
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>
// CHECK: memref.store %{{.*}}, %arg2[%{{.*}}] : memref<?xi8>
// CHECK: scf.if
// CHECK: vector.store %{{.*}}, %arg3[%{{.*}}] : memref<?xi8>, vector<64xi8>
func.func private @f4_kn_transpose(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "mxint8", rhs = "mxfp4_e2m1", path = "avx512", rhs_layout = "kn", part = "transpose"}}

// -----

// The range test (part = "range"; the kernel's signature): one pass over the plain side's
// exponent fields (8 lanes) and over the scale codes (32 at a time, unsigned min and max), no
// scratch, then the mode stored into dims[4].  The kernel reads it and runs, where it is not
// 0, the exact f64 contraction instead of its f32 paths: values decoded into f64 lanes,
// products and sums in f64, rounded to f32 once.
// CHECK-LABEL: func.func @gemv_range(
// CHECK-SAME: %[[A:[^:]+]]: memref<?xf32>, %[[B:[^:]+]]: memref<?xi8>, %[[BS:[^:]+]]: memref<?xi8>, %[[OUT:[^:]+]]: memref<?xf32>, %[[DIMS:[^:]+]]: memref<?xi64>
// CHECK-NOT: memref.alloc
// CHECK: vector.load %[[A]][%{{.*}}] : memref<?xf32>, vector<8xf32>
// CHECK: arith.shrui %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: vector.load %[[BS]][%{{.*}}] : memref<?xi8>, vector<32xi8>
// CHECK-NEXT: arith.minui %{{.*}} : vector<32xi8>
// CHECK-NEXT: arith.maxui %{{.*}} : vector<32xi8>
// CHECK: vector.reduction <minui>, %{{.*}} : vector<32xi8> into i8
// CHECK: %[[MODE:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : i64
// CHECK: memref.store %[[MODE]], %[[DIMS]][%{{.*}}] : memref<?xi64>
// CHECK-NOT: %[[OUT]]
// CHECK: return
// CHECK-LABEL: func.func @gemv_kernel(
// CHECK: %[[M:.*]] = memref.load %{{.*}}[%c4{{.*}}] : memref<?xi64>
// CHECK: %[[F64:.*]] = arith.cmpi ne, %[[M]], %{{.*}} : i64
// CHECK: scf.if %[[F64]] {
// CHECK: %[[S:.*]] = arith.addf %arg{{[0-9]+}}, %{{[0-9]+}} : vector<32xf64>
// CHECK-NEXT: scf.yield %[[S]] : vector<32xf64>
// CHECK: vector.reduction <add>, %{{.*}} : vector<32xf64> into f64
// CHECK: } else {
// CHECK: vector.fma %{{.*}} : vector<8xf32>
func.func private @gemv_range(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", path = "avx2", part = "range"}}
func.func private @gemv_kernel(memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", path = "avx2"}}

// -----

// expected-error @+1 {{@a: kernel mxlower_dot_f32_mxfp4_e2m1k32_portable takes (memref<?xf32>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) -> (), declared (memref<?xf32>) -> ()}}
func.func private @a(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1"}}
// expected-error @+1 {{@b: dot kernel: rhs 'mxfp5' is neither an MX format}}
func.func private @b(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp5"}}
// expected-error @+1 {{@c: 'mxlower.dot_kernel' must be a dictionary, got "x"}}
func.func private @c(memref<?xf32>) attributes {mxlower.dot_kernel = "x"}
// expected-error @+1 {{@d: dot kernel: packed f4 elements need an even block size, got 3}}
func.func private @d(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", rhs_block_size = 3 : i64}}
// expected-error @+1 {{@e: 'mxlower.dot_kernel' has unknown field 'format'}}
func.func private @e(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", format = "mxfp4_e2m1"}}
// expected-error @+1 {{@f: dot kernel: at least one side must be an MX format}}
func.func private @f(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "bf16"}}
// expected-error @+1 {{@g: 'mxlower.dot_kernel' field 'rhs_block_size' must be an integer}}
func.func private @g(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxint8", rhs_block_size = "32"}}
// expected-error @+1 {{@h: 'mxlower.dot_kernel' lacks the field 'rhs'}}
func.func private @h(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32"}}
// expected-error @+1 {{@j: 'mxlower.dot_kernel' field 'part' must be one of dot, range, transpose, got 'both'}}
func.func private @j(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", part = "both"}}
// expected-error @+1 {{@k: 'mxlower.dot_kernel' field 'rhs_layout' must be one of nk, kn, kn_copy, got 'mk'}}
func.func private @k(memref<?xf32>) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", rhs_layout = "mk"}}
// expected-error @+1 {{@l: dot kernel: a K-major rhs (rhs_layout = "kn") must be MX}}
func.func private @l(memref<?xi8>) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "f32", rhs_layout = "kn"}}
// expected-error @+1 {{@m: kernel mxlower_dot_f32_mxfp4_e2m1k32_kn_portable has no transpose part (only K-major B against MX rows has)}}
func.func private @m(memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1", rhs_layout = "kn", part = "transpose"}}
// expected-error @+1 {{@n: kernel mxlower_dot_mxfp4_e2m1k32_mxfp4_e2m1k32_kn_portable takes (memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi8>, memref<?xi64>, index, index) -> (), declared (memref<?xi8>) -> ()}}
func.func private @n(memref<?xi8>) attributes {mxlower.dot_kernel = {lhs = "mxfp4_e2m1", rhs = "mxfp4_e2m1", rhs_layout = "kn", part = "transpose"}}
// expected-error @+1 {{@i: a kernel declaration must not have a body}}
func.func @i(%a: memref<?xf32>, %b: memref<?xi8>, %bs: memref<?xi8>, %o: memref<?xf32>, %d: memref<?xi64>, %u0: index, %u1: index) attributes {mxlower.dot_kernel = {lhs = "f32", rhs = "mxfp4_e2m1"}} {
  return
}

// -----

// Two kernels reading the same table: one copy of the module's constant.
// CHECK: memref.global "private" constant @mxlower_nvfp4_bf16 : memref<4096xi16>
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @k1(
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @k2(
// CHECK: memref.get_global @mxlower_nvfp4_bf16
func.func private @k1(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "nvfp4", path = "avx512"}}
func.func private @k2(memref<?xbf16>, memref<?xi8>, memref<?xi8>, memref<?xf32>, memref<?xi64>, index, index) attributes {mxlower.dot_kernel = {lhs = "bf16", rhs = "nvfp4", path = "avx512"}}
