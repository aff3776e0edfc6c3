// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-gpu-to-nvvm)' | FileCheck %s

// GPU kernels to the LLVM + NVVM dialects for the chip of each gpu.module's #nvvm.target:
// conversions become cvt ops (or integer code), narrow memrefs one i8 per element, memref
// arguments bare pointers.

// CHECK-LABEL: gpu.module @mx100
// CHECK: llvm.func @to_f4(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel}
// CHECK: %[[CVT:.*]] = nvvm.convert.f32x2.to.f4x2 %{{.*}}, %{{.*}} : i8(f4E2M1FN)
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : vector<2xi8>, !llvm.ptr
// CHECK-NOT: f4E2M1FN>
gpu.module @mx100 [#nvvm.target<chip = "sm_100a">] {
  gpu.func @to_f4(%x: memref<64xf32>, %y: memref<64xf4E2M1FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf4E2M1FN>
    vector.store %c, %y[%i] : memref<64xf4E2M1FN>, vector<2xf4E2M1FN>
    gpu.return
  }
}

// -----

// sm_90a has no e2m1x2 cvt: the integer expansion.
// CHECK-LABEL: gpu.module @mx90
// CHECK: llvm.func @to_f4(
// CHECK-NOT: nvvm.convert
// CHECK: llvm.lshr
// CHECK: llvm.return
gpu.module @mx90 [#nvvm.target<chip = "sm_90a">] {
  gpu.func @to_f4(%x: memref<64xf32>, %y: memref<64xf4E2M1FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf4E2M1FN>
    vector.store %c, %y[%i] : memref<64xf4E2M1FN>, vector<2xf4E2M1FN>
    gpu.return
  }
}

// -----

// Without chip= and without a target, the chip is unknown.
func.func @scale(%q: memref<8xf32>, %s: memref<8xf8E8M0FNU>) attributes {gpu.kernel} {
  %c0 = arith.constant 0 : index
  %v = vector.load %q[%c0] : memref<8xf32>, vector<2xf32>
  // expected-error @+1 {{no target chip: pass chip=sm_XX to 'mxlower-lower-narrow-floats-to-nvvm' or put the op in a gpu.module with an #nvvm.target}}
  %c = arith.truncf %v upward {mxlower.satfinite} : vector<2xf32> to vector<2xf8E8M0FNU>
  vector.store %c, %s[%c0] : memref<8xf8E8M0FNU>, vector<2xf8E8M0FNU>
  return
}

// -----

// Memrefs of i1 are one byte per bool (mxlower-widen-bool-memrefs): convert-to-llvm would
// assert on the i1 store.
// CHECK-LABEL: gpu.module @bools
// CHECK: llvm.func @flip(%{{.*}}: !llvm.ptr) attributes {gpu.kernel, nvvm.kernel}
// CHECK: %[[B:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i8
// CHECK: llvm.trunc %[[B]] : i8 to i1
// CHECK: %[[W:.*]] = llvm.zext %{{.*}} : i1 to i8
// CHECK: llvm.store %[[W]], %{{.*}} : i8, !llvm.ptr
gpu.module @bools [#nvvm.target<chip = "sm_90a">] {
  gpu.func @flip(%m: memref<64xi1>) kernel {
    %i = gpu.thread_id x
    %b = memref.load %m[%i] : memref<64xi1>
    %t = arith.constant true
    %n = arith.xori %b, %t : i1
    memref.store %n, %m[%i] : memref<64xi1>
    gpu.return
  }
}
