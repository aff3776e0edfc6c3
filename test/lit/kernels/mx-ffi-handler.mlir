// A kernel lowered to the LLVM dialect with its XLA FFI handler: the metadata answer (FFI API
// 0.3, no traits), the execute-stage check, call-frame decoding with c_api.h's offsets, the
// kernel called on blocks [0, n / k), errors through XLA_FFI_Error_Create (INVALID_ARGUMENT).
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 --global-scale --stage llvm | FileCheck %s

// CHECK-LABEL: llvm.func @mxlower_quantize_nvfp4_f32_k16_g(
// CHECK: llvm.intr.vector.reduce.smax
// CHECK-DAG: llvm.mlir.global internal constant @[[MSG:__mxlower_ffi_msg[0-9]+]]("mxlower_quantize_nvfp4_f32_k16_g: expected 2 arguments (x, global_scale)\00")
// CHECK-DAG: llvm.mlir.global internal constant @{{.*}}("mxlower_quantize_nvfp4_f32_k16_g: result 0 (elements) must have dtype float4_e2m1fn\00")
// CHECK-DAG: llvm.mlir.global internal constant @{{.*}}("mxlower_quantize_nvfp4_f32_k16_g: argument 1 (global_scale) must have shape ()\00")
// CHECK-DAG: llvm.func internal @__mxlower_ffi_product(
// CHECK-DAG: llvm.func internal @__mxlower_ffi_same_dims(

// CHECK-LABEL: llvm.func @mxlower_quantize_nvfp4_f32_k16_g_ffi(
// CHECK-SAME: %[[FRAME:.*]]: !llvm.ptr) -> !llvm.ptr
// the metadata extension (type 1): api_version {24, null, 0, 3}, traits 0, success
// CHECK: %[[EXTP:.*]] = llvm.getelementptr %[[FRAME]][8] : (!llvm.ptr) -> !llvm.ptr, i8
// CHECK: %[[EXT:.*]] = llvm.load %[[EXTP]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.getelementptr %[[EXT]][8]
// CHECK: %[[MDP:.*]] = llvm.getelementptr %[[EXT]][24]
// CHECK: %[[MD:.*]] = llvm.load %[[MDP]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.mlir.constant(36 : i64)
// CHECK: llvm.mlir.constant(24 : i64)
// CHECK: llvm.getelementptr %[[MD]][8]
// CHECK: llvm.mlir.constant(3 : i32)
// CHECK: llvm.getelementptr %[[MD]][28]
// CHECK: llvm.getelementptr %[[MD]][32]
// CHECK: llvm.return %{{.*}} : !llvm.ptr
// the call frame: size >= 168, stage == execute (3), else nothing to do
// CHECK: llvm.mlir.constant(168 : i64)
// CHECK: llvm.getelementptr %[[FRAME]][32]
// CHECK: llvm.mlir.constant(3 : i32)
// CHECK: llvm.return
// two arguments, f32 (11) and f32; two results, f4E2M1FN (32) and f8E4M3FN (20)
// CHECK: llvm.getelementptr %[[FRAME]][56]
// CHECK: llvm.mlir.constant(11 : i32)
// CHECK: llvm.getelementptr %[[FRAME]][96]
// CHECK: llvm.mlir.constant(32 : i32)
// CHECK: llvm.mlir.constant(20 : i32)
// CHECK: llvm.call @__mxlower_ffi_product(
// one call on every block, or the parallel path for large calls
// CHECK: llvm.call @mxlower_quantize_nvfp4_f32_k16_g(
// CHECK: llvm.return %{{.*}} : !llvm.ptr
// CHECK: llvm.call @__mxlower_ffi_parallel(
// CHECK: llvm.return %{{.*}} : !llvm.ptr
// an error: XLA_FFI_Error_Create (offset 48 of XLA_FFI_Api) with INVALID_ARGUMENT (3)
// CHECK: llvm.alloca %{{.*}} x !llvm.array<32 x i8>
// CHECK: llvm.mlir.constant(28 : i64)
// CHECK: llvm.mlir.addressof @__mxlower_ffi_msg
// CHECK: llvm.mlir.constant(3 : i32)
// CHECK: %[[CREATE:.*]] = llvm.load %{{.*}} : !llvm.ptr -> !llvm.ptr
// CHECK: %[[ERR:.*]] = llvm.call %[[CREATE]](%{{.*}}) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr
// CHECK: llvm.return %[[ERR]] : !llvm.ptr

// Large calls (at least two chunks of 2^17 values) with an API that has the thread pool:
// split into min(chunks, XLA_FFI_ThreadPool_NumThreads) chunks (the count asked by its own
// helper), tasks given to
// XLA_FFI_ThreadPool_Schedule (offsets 144 and 136 of XLA_FFI_Api), chunks claimed atomically.
// CHECK-LABEL: llvm.func internal @__mxlower_ffi_work(
// CHECK: llvm.atomicrmw add %{{.*}} acq_rel : !llvm.ptr, i64
// CHECK: llvm.call @mxlower_quantize_nvfp4_f32_k16_g(
// CHECK: llvm.atomicrmw add %{{.*}} release : !llvm.ptr, i64
// CHECK-LABEL: llvm.func internal @__mxlower_ffi_release(
// CHECK: llvm.atomicrmw sub %{{.*}} acq_rel
// CHECK: llvm.call @free(
// CHECK-LABEL: llvm.func internal @__mxlower_ffi_threads(
// CHECK: llvm.getelementptr %{{.*}}[144]
// CHECK-LABEL: llvm.func internal @__mxlower_ffi_parallel(
// CHECK: llvm.call @__mxlower_ffi_threads(
// CHECK: llvm.intr.smin
// CHECK: llvm.call @malloc(
// CHECK: llvm.mlir.addressof @__mxlower_ffi_task
// CHECK: llvm.getelementptr %{{.*}}[136]
// CHECK: llvm.call @__mxlower_ffi_work(
// CHECK: llvm.load %{{.*}} atomic acquire
// CHECK: llvm.call @sched_yield()

// CHECK-LABEL: llvm.func @mxlower_quantize_nvfp4_f32_k16_g_ffi_address() -> !llvm.ptr
// CHECK: llvm.mlir.addressof @mxlower_quantize_nvfp4_f32_k16_g_ffi : !llvm.ptr
