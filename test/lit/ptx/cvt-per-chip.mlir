// The PTX each chip gets for the narrow-float conversions of a set of kernels (narrow memrefs
// are one byte per element), and ptxas (CUDA 13) accepting it where ptxas is installed.
// sm_89 and sm_90a have the e4m3x2/e5m2x2 cvts only: f4 and f6 widen by a placement in f32
// bits (no narrow cvt), narrowing to them and ue8m0 fall back to integer code.
//
// REQUIRES: llvm-tools
// RUN: mxlower-translate %s --chip=sm_89 -o %t.89.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,NO-NARROW,SM89 < %t.89.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_89 %t.89.ptx -o %t.89.cubin %}
// RUN: mxlower-translate %s --chip=sm_90a -o %t.90a.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,NO-NARROW,SM90A < %t.90a.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_90a %t.90a.ptx -o %t.90a.cubin %}
// RUN: mxlower-translate %s --chip=sm_100a -o %t.100a.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,NARROW,SM100A < %t.100a.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_100a %t.100a.ptx -o %t.100a.cubin %}
// RUN: mxlower-translate %s --chip=sm_120a -o %t.120a.ptx
// RUN: FileCheck %s --check-prefixes=CHECK,NARROW,SM120A < %t.120a.ptx
// RUN: %if ptxas %{ ptxas -arch=sm_120a %t.120a.ptx -o %t.120a.cubin %}

// SM89: .version 8.1
// SM89: .target sm_89
// SM90A: .version 8.0
// SM90A: .target sm_90a
// SM100A: .version 8.6
// SM100A: .target sm_100a
// SM120A: .version 8.7
// SM120A: .target sm_120a

gpu.module @mx {
  // f32 pairs -> f8E4M3FN (one cvt per thread)
  // CHECK-LABEL: .entry to_e4m3(
  // CHECK: cvt.rn.satfinite.e4m3x2.f32
  gpu.func @to_e4m3(%x: memref<64xf32>, %y: memref<64xf8E4M3FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf8E4M3FN>
    vector.store %c, %y[%i] : memref<64xf8E4M3FN>, vector<2xf8E4M3FN>
    gpu.return
  }
  // CHECK-LABEL: .entry to_e5m2_from_f16(
  // CHECK: cvt.rn.satfinite.e5m2x2.f16x2
  gpu.func @to_e5m2_from_f16(%x: memref<64xf16>, %y: memref<64xf8E5M2>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf16>, vector<2xf16>
    %c = arith.truncf %v : vector<2xf16> to vector<2xf8E5M2>
    vector.store %c, %y[%i] : memref<64xf8E5M2>, vector<2xf8E5M2>
    gpu.return
  }
  // CHECK-LABEL: .entry to_f4(
  // NARROW: cvt.rn.satfinite.e2m1x2.f32
  // NO-NARROW-NOT: cvt.rn
  gpu.func @to_f4(%x: memref<64xf32>, %y: memref<64xf4E2M1FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf4E2M1FN>
    vector.store %c, %y[%i] : memref<64xf4E2M1FN>, vector<2xf4E2M1FN>
    gpu.return
  }
  // CHECK-LABEL: .entry to_e2m3(
  // NARROW: cvt.rn.satfinite.e2m3x2.f32
  // NO-NARROW-NOT: cvt.rn
  gpu.func @to_e2m3(%x: memref<64xf32>, %y: memref<64xf6E2M3FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf6E2M3FN>
    vector.store %c, %y[%i] : memref<64xf6E2M3FN>, vector<2xf6E2M3FN>
    gpu.return
  }
  // CHECK-LABEL: .entry to_e3m2(
  // NARROW: cvt.rn.satfinite.e3m2x2.f32
  // NO-NARROW-NOT: cvt.rn
  gpu.func @to_e3m2(%x: memref<64xf32>, %y: memref<64xf6E3M2FN>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v : vector<2xf32> to vector<2xf6E3M2FN>
    vector.store %c, %y[%i] : memref<64xf6E3M2FN>, vector<2xf6E3M2FN>
    gpu.return
  }
  // CHECK-LABEL: .entry rceil_scales(
  // NARROW: cvt.rp.satfinite.ue8m0x2.f32
  // NO-NARROW-NOT: cvt.rp
  gpu.func @rceil_scales(%q: memref<64xf32>, %s: memref<64xf8E8M0FNU>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %q[%i] : memref<64xf32>, vector<2xf32>
    %c = arith.truncf %v upward {mxlower.satfinite} : vector<2xf32> to vector<2xf8E8M0FNU>
    vector.store %c, %s[%i] : memref<64xf8E8M0FNU>, vector<2xf8E8M0FNU>
    gpu.return
  }
  // CHECK-LABEL: .entry from_e4m3(
  // CHECK: cvt.rn.f16x2.e4m3x2
  // CHECK: cvt.f32.f16
  gpu.func @from_e4m3(%x: memref<64xf8E4M3FN>, %y: memref<64xf32>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf8E4M3FN>, vector<2xf8E4M3FN>
    %c = arith.extf %v : vector<2xf8E4M3FN> to vector<2xf32>
    vector.store %c, %y[%i] : memref<64xf32>, vector<2xf32>
    gpu.return
  }
  // CHECK-LABEL: .entry from_f4(
  // NARROW: cvt.rn.f16x2.e2m1x2
  // NO-NARROW-NOT: cvt.rn.f16x2.e
  gpu.func @from_f4(%x: memref<64xf4E2M1FN>, %y: memref<64xf32>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf4E2M1FN>, vector<2xf4E2M1FN>
    %c = arith.extf %v : vector<2xf4E2M1FN> to vector<2xf32>
    vector.store %c, %y[%i] : memref<64xf32>, vector<2xf32>
    gpu.return
  }
  // CHECK-LABEL: .entry from_e3m2(
  // NARROW: cvt.rn.f16x2.e3m2x2
  // NO-NARROW-NOT: cvt.rn.f16x2.e
  gpu.func @from_e3m2(%x: memref<64xf6E3M2FN>, %y: memref<64xf16>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf6E3M2FN>, vector<2xf6E3M2FN>
    %c = arith.extf %v : vector<2xf6E3M2FN> to vector<2xf16>
    vector.store %c, %y[%i] : memref<64xf16>, vector<2xf16>
    gpu.return
  }
  // CHECK-LABEL: .entry from_e8m0(
  // NARROW: cvt.rn.bf16x2.ue8m0x2
  // NO-NARROW-NOT: cvt.rn.bf16x2
  gpu.func @from_e8m0(%x: memref<64xf8E8M0FNU>, %y: memref<64xbf16>) kernel {
    %c2 = arith.constant 2 : index
    %t = gpu.thread_id x
    %i = arith.muli %t, %c2 : index
    %v = vector.load %x[%i] : memref<64xf8E8M0FNU>, vector<2xf8E8M0FNU>
    %c = arith.extf %v : vector<2xf8E8M0FNU> to vector<2xbf16>
    vector.store %c, %y[%i] : memref<64xbf16>, vector<2xbf16>
    gpu.return
  }
}
