// The nvfp4 quantize kernel on the CPU forms no quotient per element: each f4 code comes from
// three comparisons of |y|'s bits with t * s (mx_math.nvfp4_element_codes); with a global
// scale, one test of |g| >= 2^-115 per call picks the loop that reads x with a plain
// conversion to f64, the other one reads subnormal x exactly (mx_math.divide_by_global).
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 | FileCheck %s --check-prefix=NV
// RUN: %PYTHON -m mxlower.execution.ffi quantize nvfp4 --global-scale | FileCheck %s --check-prefix=G

// NV-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16(
// NV-NOT: arith.divf
// NV: scf.for
// NV: arith.mulf %{{.*}}, %{{.*}} : vector<16xf32>
// NV-NEXT: arith.bitcast %{{.*}} : vector<16xf32> to vector<16xi32>
// NV-NEXT: arith.cmpi sge, %{{.*}}, %{{.*}} : vector<16xi32>
// NV: arith.cmpi sge, %{{.*}}, %{{.*}} : vector<16xi32>
// NV: arith.cmpi sgt, %{{.*}}, %{{.*}} : vector<16xi32>
// NV-NOT: arith.divf
// NV: return

// G-LABEL: func.func @mxlower_quantize_nvfp4_f32_k16_g(
// G: arith.divf %{{.*}}, %{{.*}} : f64
// G: %[[FAST:.*]] = arith.cmpi sge, %{{.*}}, %c100663296_i32 : i32
// G-NEXT: scf.if %[[FAST]] {
// G-NOT: arith.sitofp
// G: } else {
// G: arith.sitofp %{{.*}} : vector<16xi32> to vector<16xf64>
