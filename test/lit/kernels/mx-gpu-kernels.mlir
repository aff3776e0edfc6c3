// The GPU kernels: the CPU kernels' recipe in a gpu.func (one block per thread, the grid over
// the block range [b0, b1)), its element conversions as narrow arith.truncf that
// mxlower-lower-narrow-floats-to-nvvm turns into each chip's cvt (sm_100a has e2m1x2, sm_90a
// only the f8 ones), and the CUDA FFI handler: XLA's stream, the CUDA driver loaded at run
// time, one launch of ceil(units / 128) blocks of 128 threads.  Whole-vector loads and stores
// carry their alignment, so they are ld/st.v4 rather than one scalar access a lane.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi_cuda quantize mxfp4_e2m1 --stage gpu | FileCheck %s --check-prefix=GPU
// RUN: %PYTHON -m mxlower.execution.ffi_cuda quantize mxfp4_e2m1 --stage ptx --chip sm_100a | FileCheck %s --check-prefix=PTX100
// RUN: %PYTHON -m mxlower.execution.ffi_cuda quantize mxfp4_e2m1 --stage ptx --chip sm_90a | FileCheck %s --check-prefix=PTX90
// RUN: %PYTHON -m mxlower.execution.ffi_cuda quantize mxfp8_e4m3 --stage ptx --chip sm_90a | FileCheck %s --check-prefix=E4M3
// RUN: %PYTHON -m mxlower.execution.ffi_cuda dequantize nvfp4 --stage ptx --chip sm_100a | FileCheck %s --check-prefix=DQ
// RUN: %PYTHON -m mxlower.execution.ffi_cuda convert f32 --to f4E2M1FN --stage handler | FileCheck %s --check-prefix=HANDLER
// RUN: not %PYTHON -m mxlower.execution.ffi_cuda quantize mxfp4_e2m1 --stage ptx --chip sm_77 2>&1 | FileCheck %s --check-prefix=BADCHIP

// GPU-LABEL: gpu.module @mxlower_kernels
// GPU: gpu.func @mxlower_quantize_mxfp4_e2m1_f32_k32_floor(%[[X:[^:]+]]: memref<?xf32>, %[[Q:[^:]+]]: memref<?xi8>, %[[S:[^:]+]]: memref<?xi8>, %[[B0:[^:]+]]: index, %[[B1:[^:]+]]: index) kernel
// GPU: gpu.block_id x
// GPU: gpu.block_dim x
// GPU: gpu.thread_id x
// GPU: %[[I:.*]] = arith.addi %[[B0]], %{{.*}} : index
// GPU: %[[IN:.*]] = arith.cmpi slt, %[[I]], %[[B1]] : index
// GPU: scf.if %[[IN]]
// GPU-NOT: scf.for
// GPU: vector.load %[[X]][%{{.*}}] {alignment = 16 : i64} : memref<?xf32>, vector<32xf32>
// GPU-NOT: vector.load
// GPU: vector.reduction <maxsi>, %{{.*}} : vector<32xi32> into i32
// GPU: memref.store %{{.*}}, %[[S]][%[[I]]] : memref<?xi8>
// GPU-NOT: vector.load
// GPU: arith.truncf %{{.*}} {mxlower.satfinite} : vector<32xf32> to vector<32xf4E2M1FN>
// GPU: vector.deinterleave
// GPU: vector.store %{{.*}}, %[[Q]][%{{.*}}] {alignment = 16 : i64} : memref<?xi8>, vector<16xi8>
// GPU: gpu.return

// sm_100a: the clamped elements are bare cvt.rn.satfinite.e2m1x2 (32 values: 16 cvts); the
// three buffers as memref descriptors (5 parameters each) and the block range
// PTX100-LABEL: .visible .entry mxlower_quantize_mxfp4_e2m1_f32_k32_floor(
// PTX100-COUNT-16: .param .u64
// PTX100-NEXT: .param .u64 mxlower_quantize_mxfp4_e2m1_f32_k32_floor_param_16
// PTX100-NEXT: )
// PTX100-COUNT-16: cvt.rn.satfinite.e2m1x2.f32
// PTX100-NOT: cvt.rn.satfinite.e2m1x2.f32
// PTX100-NOT: __nv_

// sm_90a has no f4 cvt: the codec's integer expansion, no cvt to a narrow type at all
// PTX90-LABEL: .visible .entry mxlower_quantize_mxfp4_e2m1_f32_k32_floor(
// PTX90-NOT: cvt.rn.satfinite
// PTX90: ret;

// E4M3-LABEL: .visible .entry mxlower_quantize_mxfp8_e4m3_f32_k32_floor(
// E4M3-COUNT-8: ld.v4.b32
// E4M3-NOT: ld.b32
// E4M3-COUNT-16: cvt.rn.satfinite.e4m3x2.f32
// E4M3: st.v4.b32
// E4M3-NEXT: st.v4.b32

// nvfp4 dequantize: the block's E4M3 scale and its f4 elements decoded by cvt to f16x2
// DQ-LABEL: .visible .entry mxlower_dequantize_nvfp4_f32_k16(
// DQ-DAG: cvt.rn.f16x2.e4m3x2
// DQ-DAG: cvt.rn.f16x2.e2m1x2

// HANDLER-DAG: llvm.mlir.global internal constant @__mxlower_cuda_image0("
// HANDLER-DAG: llvm.mlir.global internal constant @__mxlower_cuda_s_default_driver("libcuda.so.1\00")
// HANDLER-DAG: llvm.mlir.global internal constant @__mxlower_cuda_s_driver_env("MXLOWER_CUDA_DRIVER\00")
// HANDLER-DAG: llvm.mlir.global internal constant @__mxlower_cuda_s_fn_cuLaunchKernel("cuLaunchKernel\00")
// HANDLER-DAG: llvm.func @dlopen(!llvm.ptr, i32) -> !llvm.ptr
// HANDLER-LABEL: llvm.func @mxlower_convert_f32_f4E2M1FN_cuda_ffi(
// HANDLER-SAME: %[[FRAME:.*]]: !llvm.ptr) -> !llvm.ptr
// the shared decoding (metadata answer, frame checks) first
// HANDLER: llvm.mlir.constant(36 : i64)
// HANDLER: llvm.call @__mxlower_ffi_product(
// no units, no launch
// HANDLER: llvm.icmp "eq" %{{.*}}, %{{.*}} : i64
// HANDLER: llvm.cond_br %{{.*}}, ^empty, ^aligned
// every buffer 16-byte aligned (the kernels' ld/st.v4), else INVALID_ARGUMENT
// HANDLER: ^aligned:
// HANDLER: llvm.ptrtoint
// HANDLER: llvm.mlir.constant(15 : i64)
// HANDLER: llvm.br ^stream
// XLA_FFI_Stream_Get (offset 80 of XLA_FFI_Api) with the frame's execution context (offset 24)
// HANDLER: ^stream:
// HANDLER: llvm.getelementptr %[[FRAME]][24]
// HANDLER: %[[GETP:.*]] = llvm.getelementptr %{{.*}}[80] : (!llvm.ptr) -> !llvm.ptr, i8
// HANDLER: %[[GET:.*]] = llvm.load %[[GETP]] : !llvm.ptr -> !llvm.ptr
// HANDLER: %[[SERR:.*]] = llvm.call %[[GET]](%{{.*}}) : !llvm.ptr, (!llvm.ptr) -> !llvm.ptr
// HANDLER: ^stream_error:
// HANDLER-NEXT: llvm.return %[[SERR]] : !llvm.ptr
// HANDLER: llvm.call @__mxlower_cuda_function(
// HANDLER: llvm.mlir.constant(128 : i64)
// HANDLER: ^launch:
// HANDLER: llvm.mlir.constant(128 : i32)
// HANDLER: llvm.call %{{.*}}(%{{.*}}) : !llvm.ptr, (!llvm.ptr, i32, i32, i32, i32, i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// HANDLER: ^launch_failed:
// HANDLER: llvm.mlir.addressof @__mxlower_cuda_s_failed
// HANDLER: llvm.call @snprintf(
// HANDLER-LABEL: llvm.func internal @__mxlower_cuda_acquire()
// HANDLER: llvm.atomicrmw xchg
// HANDLER-LABEL: llvm.func internal @__mxlower_cuda_load(
// HANDLER: llvm.call @getenv(
// HANDLER: llvm.call @dlopen(
// HANDLER: llvm.call @dlsym(
// HANDLER-LABEL: llvm.func internal @__mxlower_cuda_function(
// HANDLER: llvm.call @__mxlower_cuda_acquire()
// compute capability: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (75, 76)
// HANDLER: llvm.mlir.constant(75 : i32)
// HANDLER: llvm.mlir.constant(76 : i32)
// HANDLER: llvm.mlir.addressof @__mxlower_cuda_image
// HANDLER: llvm.call @__mxlower_cuda_release()
// HANDLER-LABEL: llvm.func @mxlower_convert_f32_f4E2M1FN_cuda_ffi_address()

// BADCHIP: error: unknown chip 'sm_77'
