// The fused mx.cast kernels (CastSpec): with an exponent scale, one scf.for over the tiles;
// a tile of 32 values is four vectors of 8 loaded once, their magnitudes maxed lane-wise and
// reduced once, the scale exponent chosen in scalar integer arithmetic (the clz of
// cast_math.scale_exponent), each value encoded and decoded by the spec-driven codec in
// registers (integer ops only: no float conversion op) and stored, with the random bits of
// stochastic rounding read beside it.  Tiles longer than 64 values go chunk by chunk (the
// maximum, then the values); a channel's tile of 100 values is 12 vectors and a masked
// 13th.  Unscaled: whole vectors, then the partial last one masked.  A cast to an MX format's
// datatype (roundmode even, an MX scale rule: CastSpec.mx_spec) is the MX kernels' math
// instead: the quantize kernel's loop over groups of whole blocks (MX), or its f4 limits table
// and software-pipelined loop (MXFP4), each block dequantized in registers and stored as
// values -- no element or scale code reaches memory; a block whose scale is NaN (it held NaN
// or Inf) is stored as NaN by a branch around its elements' arithmetic.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi cast e2m1fn --scale e8m0_t32 --roundmode stochastic | FileCheck %s --check-prefix=T32
// RUN: %PYTHON -m mxlower.execution.ffi cast e4m3fn --scale e8m0_t128 --scale-mode rceil --roundmode zero | FileCheck %s --check-prefix=T128
// RUN: %PYTHON -m mxlower.execution.ffi cast e4m3fn --scale e8m0_t32 | FileCheck %s --check-prefix=MX
// RUN: %PYTHON -m mxlower.execution.ffi cast e2m1fo --scale e8m0_t32 --scale-mode nearest | FileCheck %s --check-prefix=MXFP4
// RUN: %PYTHON -m mxlower.execution.ffi cast int4 --wide bf16 --roundmode nearest | FileCheck %s --check-prefix=NONE
// RUN: %PYTHON -m mxlower.execution.ffi cast e4m3fn --scale e8m0_t0 --length 100 | FileCheck %s --check-prefix=CHAN
// RUN: %PYTHON -m mxlower.execution.ffi cast e2m1fn --scale e8m0_t32 --stage llvm | FileCheck %s --check-prefix=LLVM
// RUN: %PYTHON -m mxlower.execution.ffi cast e2m1fn --scale e4m3fn_t16 | FileCheck %s --check-prefix=FLOAT
// RUN: not %PYTHON -m mxlower.execution.ffi cast uint4 --scale float32_uint8_t0 --length 8 2>&1 | FileCheck %s --check-prefix=ZP
// RUN: not %PYTHON -m mxlower.execution.ffi cast e4m3fn --roundmode up 2>&1 | FileCheck %s --check-prefix=MODE

// T32-LABEL: func.func @mxlower_cast_e2m1fn_e8m0_t32_f32_stochastic_max(
// T32-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[R:[^:]+]]: memref<?xi32>, %[[Y:[^:]+]]: memref<?xf32>, %[[B0:[^:]+]]: index, %[[B1:[^:]+]]: index)
// T32: scf.for %[[I:.*]] = %[[B0]] to %[[B1]] step
// T32: %[[S:.*]] = arith.muli %[[I]], %c32
// T32-COUNT-4: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<8xf32>
// T32-NOT: vector.load %[[X]]
// T32: arith.maxsi %{{.*}} : vector<8xi32>
// T32: arith.maxsi %{{.*}} : vector<8xi32>
// T32: arith.maxsi %{{.*}} : vector<8xi32>
// T32: %[[AMAX:.*]] = vector.reduction <maxsi>, %{{.*}} : vector<8xi32> into i32
// T32-NOT: vector.reduction
// T32: math.ctlz %{{.*}} : i32
// T32-NOT: vector.load %[[X]]
// T32: vector.load %[[R]][%[[S]]] : memref<?xi32>, vector<8xi32>
// T32-NOT: arith.truncf
// T32-NOT: arith.extf
// T32: vector.store %{{.*}}, %[[Y]][%[[S]]] : memref<?xf32>, vector<8xf32>
// T32-COUNT-3: vector.store %{{.*}}, %[[Y]]
// T32-NOT: vector.load %[[X]]
// T32: return

// T128-LABEL: func.func @mxlower_cast_e4m3fn_e8m0_t128_f32_zero_rceil(
// T128: scf.for
// T128: scf.for {{.*}} iter_args
// T128: vector.load {{.*}} : memref<?xf32>, vector<8xf32>
// T128: vector.reduction <maxsi>
// T128: scf.yield
// T128: scf.for
// T128: vector.load {{.*}} : memref<?xf32>, vector<8xf32>
// T128: vector.store {{.*}} : memref<?xf32>, vector<8xf32>

// MX-LABEL: func.func @mxlower_cast_e4m3fn_e8m0_t32_f32_even_max(
// MX-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[Y:[^:]+]]: memref<?xf32>, %[[B0:[^:]+]]: index, %[[B1:[^:]+]]: index)
// MX-NOT: memref.alloca
// MX: scf.for %{{.*}} = %[[B0]] to %[[MID:.*]] step %c8
// MX-COUNT-8: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// MX: vector.shuffle
// MX-NOT: vector.load
// MX-NOT: memref.store
// MX-NOT: memref.alloca
// MX: scf.if
// MX-NEXT: arith.constant dense<2143289344> : vector<32xi32>
// MX-NEXT: arith.bitcast
// MX-NEXT: vector.store %{{.*}}, %[[Y]][%[[S:.*]]] : memref<?xf32>, vector<32xf32>
// MX-NEXT: } else {
// MX-NOT: vector.load
// MX-NOT: memref.store
// MX: vector.store %{{.*}}, %[[Y]][%[[S]]] : memref<?xf32>, vector<32xf32>
// MX-COUNT-7: } else {
// MX: scf.for %{{.*}} = %[[MID]] to %[[B1]] step %c1
// MX: vector.load %[[X]][%{{.*}}] : memref<?xf32>, vector<32xf32>
// MX-NOT: vector.load
// MX-NOT: memref.store
// MX: scf.if
// MX: vector.store %{{.*}}, %[[Y]][%[[S1:.*]]] : memref<?xf32>, vector<32xf32>
// MX-NEXT: } else {
// MX: vector.store %{{.*}}, %[[Y]][%[[S1]]] : memref<?xf32>, vector<32xf32>
// MX-NOT: vector.store
// MX-NOT: memref.alloca
// MX: return

// MXFP4-LABEL: func.func @mxlower_cast_e2m1fo_e8m0_t32_f32_even_nearest(
// MXFP4-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[Y:[^:]+]]: memref<?xf32>
// MXFP4: %[[T:.*]] = memref.alloca() : memref<2304xi32>
// MXFP4: scf.for %{{.*}} = %c0 to %c256 step %c16
// MXFP4: vector.store %{{.*}}, %[[T]]
// MXFP4: scf.if
// MXFP4: memref.prefetch %[[X]]
// MXFP4: scf.for {{.*}} iter_args({{.*}}) -> (vector<32xi32>, vector<32xi32>, vector<32xi32>, vector<32xi32>, vector<4xi8>)
// MXFP4-NOT: vector.store %{{.*}}, %[[T]]
// MXFP4-NOT: memref.store
// MXFP4: scf.if
// MXFP4: vector.store %{{.*}}, %[[Y]][%[[S:.*]]] : memref<?xf32>, vector<32xf32>
// MXFP4-NEXT: } else {
// MXFP4: memref.load %[[T]]
// MXFP4: vector.store %{{.*}}, %[[Y]][%[[S]]] : memref<?xf32>, vector<32xf32>
// MXFP4-NOT: vector.store %{{.*}}, %[[T]]
// MXFP4-NOT: memref.store
// MXFP4-NOT: memref.alloca
// MXFP4: return

// CHAN-LABEL: func.func @mxlower_cast_e4m3fn_e8m0_t0_f32_even_max_L100(
// CHAN: %[[S:.*]] = arith.muli %{{.*}}, %c100
// CHAN: scf.for {{.*}} to %c12 {{.*}} iter_args
// CHAN: vector.reduction <maxsi>
// CHAN: vector.maskedload {{.*}} : memref<?xf32>, vector<8xi1>, vector<8xf32> into vector<8xf32>
// CHAN: vector.reduction <maxsi>
// CHAN: scf.for {{.*}} to %c12
// CHAN: vector.store {{.*}} : memref<?xf32>, vector<8xf32>
// CHAN: vector.maskedload
// CHAN: vector.maskedstore {{.*}} : memref<?xf32>, vector<8xi1>, vector<8xf32>

// NONE-LABEL: func.func @mxlower_cast_int4_none_bf16_nearest(
// NONE-SAME: %[[X:[^:]+]]: memref<?xbf16>, %[[Y:[^:]+]]: memref<?xbf16>
// NONE: memref.dim %[[X]], %{{.*}} : memref<?xbf16>
// NONE: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %c8
// NONE-NEXT: vector.load %[[X]][%[[I]]] : memref<?xbf16>, vector<8xbf16>
// NONE-NOT: arith.extf
// NONE: vector.store %{{.*}}, %[[Y]][%[[I]]] : memref<?xbf16>, vector<8xbf16>
// NONE: scf.if
// NONE: vector.maskedload %[[X]]
// NONE: vector.maskedstore %[[Y]]

// The handler: two buffers checked (x f32, y f32 of x's shape), the tile rule, the kernel called
// LLVM: llvm.mlir.global internal constant @__mxlower_ffi_msg{{[0-9]+}}("mxlower_cast_e2m1fn_e8m0_t32_f32_even_max: the tile size 32 must divide the last dimension of x\00")
// LLVM: llvm.func @mxlower_cast_e2m1fn_e8m0_t32_f32_even_max_ffi(
// LLVM: llvm.call @mxlower_cast_e2m1fn_e8m0_t32_f32_even_max(

// A float scale: amax / 6 rounded to e4m3fn once per tile (scalar), each value divided by it
// exactly (x * RN_f64(1 / s) in f64, rounded once), encoded, decoded, multiplied back in f64
// FLOAT-LABEL: func.func @mxlower_cast_e2m1fn_e4m3fn_t16_f32_even_max(
// FLOAT: vector.reduction <maxsi>
// FLOAT: arith.divf %{{.*}} : f64
// FLOAT: arith.mulf %{{.*}} : vector<8xf64>
// FLOAT: arith.truncf %{{.*}} : vector<8xf64> to vector<8xf32>
// FLOAT: arith.mulf %{{.*}} : vector<8xf64>
// FLOAT: vector.store
// ZP: error: no cast kernel for the asymmetric scale e8m23_uint8_t0 (zero points)
// MODE: error: unknown roundmode 'up'
