// RUN: mxlower-opt %s --split-input-file -p 'builtin.module(mxlower-stablehlo-to-llvm)' | FileCheck %s
// RUN: mxlower-opt %s --split-input-file -p 'builtin.module(mxlower-stablehlo-to-llvm{out-params})' | FileCheck %s --check-prefix=OUT
// RUN: mxlower-opt %s --split-input-file --mxlower-stablehlo-to-llvm --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE
// RUN: not mxlower-opt %s --split-input-file -p 'builtin.module(mxlower-stablehlo-to-llvm{vector-width=x})' 2>&1 | FileCheck %s --check-prefix=BADOPT

// A StableHLO function through jaxlib's stablehlo-legalize-to-linalg, the hand-over to
// upstream MLIR, bufferization and mxlower-lower-narrow-floats-to-llvm, to the LLVM dialect.

// PIPE: builtin.module(mxlower-stablehlo-control-flow-to-scf, stablehlo-legalize-to-linalg{{.*}}, canonicalize{{.*}}, linalg-fuse-elementwise-ops{{.*}}, one-shot-bufferize{{.*}}bufferize-function-boundaries=true{{.*}}, convert-linalg-to-loops, mxlower-lower-narrow-floats-to-llvm{via-f32=true}, mxlower-widen-bool-memrefs, arith-emulate-unsupported-floats{{.*}}, arith-expand{{.*}}include-bf16=true{{.*}}, func.func(llvm-request-c-wrappers){{.*}}, convert-to-llvm{{.*}}, reconcile-unrealized-casts)
// BADOPT: error: option 'vector-width' of 'mxlower-stablehlo-to-llvm' expects int, got 'x'

// CHECK-LABEL: llvm.func @to_f4
// CHECK-SAME: -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
// CHECK: llvm.call @malloc
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK: llvm.bitcast %{{.*}} : f32 to i32
// CHECK: %[[C:.*]] = llvm.trunc %{{.*}} : i32 to i8
// CHECK: llvm.store %[[C]], %{{.*}} : i8, !llvm.ptr
// CHECK: llvm.func @_mlir_ciface_to_f4
// CHECK-NOT: stablehlo.
// CHECK-NOT: f4E2M1FN
// CHECK-NOT: unrealized_conversion_cast

// With out-params the result buffer is the caller's: a trailing descriptor, no malloc.
// OUT-LABEL: llvm.func @to_f4
// OUT-SAME: %arg9: i64) attributes {llvm.emit_c_interface} {
// OUT-NOT: malloc
// OUT: llvm.trunc %{{.*}} : i32 to i8
// OUT: llvm.return
// OUT-NEXT: }
func.func @to_f4(%x: tensor<?xf32>) -> tensor<?xf4E2M1FN> {
  %0 = stablehlo.convert %x : (tensor<?xf32>) -> tensor<?xf4E2M1FN>
  return %0 : tensor<?xf4E2M1FN>
}

// -----

// Decoding: f8E8M0FNU codes (i8 memory) to bf16, statically shaped, fused with the add (one
// loop, no intermediate buffer); bf16 arithmetic is computed in f32 (LLVM's x86 backend
// asserts on some vector bf16 code), its bf16 <-> f32 conversions as integer ops.
// CHECK-LABEL: llvm.func @e8m0_scale_times_two
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> i8
// CHECK: llvm.zext %{{.*}} : i8 to i16
// CHECK: llvm.bitcast %{{.*}} : i32 to f32
// CHECK: llvm.fadd %{{.*}}, %{{.*}} : f32
// CHECK: llvm.bitcast %{{.*}} : i16 to bf16
// CHECK-NOT: f8E8M0FNU
// OUT-LABEL: llvm.func @e8m0_scale_times_two
// OUT-SAME: (%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64, %arg4: i64, %arg5: !llvm.ptr,
// OUT-NOT: llvm.call @malloc
func.func @e8m0_scale_times_two(%s: tensor<8xf8E8M0FNU>) -> tensor<8xbf16> {
  %0 = stablehlo.convert %s : (tensor<8xf8E8M0FNU>) -> tensor<8xbf16>
  %1 = stablehlo.add %0, %0 : tensor<8xbf16>
  return %1 : tensor<8xbf16>
}

// -----

// Narrow to narrow in one stablehlo.convert (through f32, exact): only integer ops.
// CHECK-LABEL: llvm.func @e5m2_to_e2m3
// CHECK-NOT: llvm.bitcast
// CHECK: llvm.trunc %{{.*}} : i16 to i8
// CHECK: llvm.func @_mlir_ciface_e5m2_to_e2m3
func.func @e5m2_to_e2m3(%x: tensor<4x4xf8E5M2>) -> tensor<4x4xf6E2M3FN> {
  %0 = stablehlo.convert %x : (tensor<4x4xf8E5M2>) -> tensor<4x4xf6E2M3FN>
  return %0 : tensor<4x4xf6E2M3FN>
}
