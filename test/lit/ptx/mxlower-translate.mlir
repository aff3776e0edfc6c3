// mxlower-translate on input already in the LLVM + NVVM dialects (--no-pipeline), and its errors:
// one line each, exit code 1, no output file.
//
// REQUIRES: llvm-tools
// RUN: mxlower-translate %s --no-pipeline --chip=sm_100a --emit=llvmir | FileCheck %s --check-prefix=IR
// RUN: mxlower-translate %s --no-pipeline --chip=sm_120a | FileCheck %s --check-prefix=PTX
// RUN: rm -f %t.ptx
// RUN: not mxlower-translate %s --no-pipeline --chip=sm_89 -o %t.ptx 2>&1 | FileCheck %s --check-prefix=LLC
// RUN: not cat %t.ptx
// RUN: not mxlower-translate %s --no-pipeline 2>&1 | FileCheck %s --check-prefix=NOCHIP
// RUN: not mxlower-translate %s --no-pipeline --chip=sm_100a --gpu-module=k 2>&1 | FileCheck %s --check-prefix=GPUMOD
// RUN: not mxlower-translate %s --chip=sm_99 2>&1 | FileCheck %s --check-prefix=BADCHIP
// RUN: not mxlower-translate %s.missing --chip=sm_90a 2>&1 | FileCheck %s --check-prefix=MISSING

// IR: define ptx_kernel void @pack_f4(float %{{.*}}, float %{{.*}}, ptr %{{.*}})
// IR: call i16 @llvm.nvvm.ff.to.e2m1x2.rn.satfinite(float %{{.*}}, float %{{.*}})
// PTX: .target sm_120a
// PTX: .visible .entry pack_f4(
// PTX: cvt.rn.satfinite.e2m1x2.f32
// LLC: mxlower-translate: error: llc: LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.ff.to.e2m1x2.rn.satfinite (while building for sm_89)
// NOCHIP: mxlower-translate: error: no target chip: pass --chip=sm_XX or give the gpu.module an #nvvm.target<chip = "sm_XX">
// GPUMOD: mxlower-translate: error: no gpu.module named 'k' (the module has none)
// BADCHIP: mxlower-translate: error: argument --chip: invalid choice: 'sm_99'
// MISSING: mxlower-translate: error: could not open input file '{{.*}}.missing': no such file

llvm.func @pack_f4(%a: f32, %b: f32, %out: !llvm.ptr) attributes {gpu.kernel} {
  %0 = nvvm.convert.f32x2.to.f4x2 %a, %b : i8 (f4E2M1FN)
  llvm.store %0, %out : i8, !llvm.ptr
  llvm.return
}
