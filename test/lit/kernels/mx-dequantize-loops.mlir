// The fused dequantize kernels: the group's scale bytes loaded as one vector, each block's
// packed element codes loaded once, unpacked in registers, decoded, scaled, stored.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi dequantize mxfp4_e2m1 --wide f16 | FileCheck %s --check-prefix=FP4
// RUN: %PYTHON -m mxlower.execution.ffi dequantize mxfp6_e2m3 --packed | FileCheck %s --check-prefix=FP6
// RUN: %PYTHON -m mxlower.execution.ffi dequantize nvfp4 --global-scale --wide bf16 | FileCheck %s --check-prefix=NV

// FP4-LABEL: func.func @mxlower_dequantize_mxfp4_e2m1_f16_k32(
// FP4-SAME: %[[Q:[^:]+]]: memref<?xi8>, %[[S:[^:]+]]: memref<?xi8>, %[[Y:[^:]+]]: memref<?xf16>, %{{[^:]+}}: index, %{{[^:]+}}: index)
// FP4: scf.for %[[I:.*]] = %{{.*}} step %c8
// FP4: vector.load %[[S]][%[[I]]] : memref<?xi8>, vector<8xi8>
// FP4-NOT: memref.load
// FP4: vector.load %[[Q]][%{{.*}}] : memref<?xi8>, vector<16xi8>
// FP4: vector.interleave %{{.*}}, %{{.*}} : vector<16xi8> -> vector<32xi8>
// FP4-NOT: arith.truncf
// FP4: vector.store %{{.*}}, %[[Y]][%{{.*}}] : memref<?xf16>, vector<32xf16>
// FP4-COUNT-7: vector.store %{{.*}}, %[[Y]][%{{.*}}] : memref<?xf16>, vector<32xf16>
// FP4: scf.for
// FP4: memref.load %[[S]][%{{.*}}] : memref<?xi8>

// FP6-LABEL: func.func @mxlower_dequantize_mxfp6_e2m3_f32_k32_packed(
// FP6: vector.load %{{.*}} : memref<?xi8>, vector<24xi8>
// FP6: vector.shuffle %{{.*}}, %{{.*}} [0, 3, 6, 9, 12, 15, 18, 21] : vector<24xi8>, vector<24xi8>
// FP6: vector.interleave %{{.*}}, %{{.*}} : vector<16xi8> -> vector<32xi8>
// FP6: vector.store %{{.*}} : memref<?xf32>, vector<32xf32>

// nvfp4 with a global scale: g[0] read once, the product rounded exactly (through f64)
// NV-LABEL: func.func @mxlower_dequantize_nvfp4_bf16_k16_g(
// NV-SAME: %{{[^:]+}}: memref<?xi8>, %{{[^:]+}}: memref<?xi8>, %[[G:[^:]+]]: memref<?xf32>, %{{[^:]+}}: memref<?xbf16>
// NV: memref.load %[[G]][%c0] : memref<?xf32>
// NV: scf.for %{{.*}} step %c16
// NV: vector.load %{{.*}} : memref<?xi8>, vector<16xi8>
// NV: arith.extf %{{.*}} : vector<16xf32> to vector<16xf64>
// NV: vector.store %{{.*}} : memref<?xbf16>, vector<16xbf16>
