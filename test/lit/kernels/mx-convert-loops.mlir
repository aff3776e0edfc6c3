// The fused conversion kernels: one scf.for over whole vectors of 32 values (each loaded once,
// converted by the codec's integer ops in registers, stored packed), then the last partial
// vector with masked loads and stores -- the value count is the wide buffer's size, so one
// kernel serves every shape, odd f4 counts included.
// REQUIRES: llvm-tools
// RUN: %PYTHON -m mxlower.execution.ffi convert f32 --to f4E2M1FN | FileCheck %s --check-prefix=F4
// RUN: %PYTHON -m mxlower.execution.ffi convert f6E2M3FN --to bf16 --packed | FileCheck %s --check-prefix=F6
// RUN: %PYTHON -m mxlower.execution.ffi convert bf16 --to f8E8M0FNU | FileCheck %s --check-prefix=E8
// RUN: not %PYTHON -m mxlower.execution.ffi convert f32 --to bf16 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not %PYTHON -m mxlower.execution.ffi convert f32 2>&1 | FileCheck %s --check-prefix=NOTO

// F4-LABEL: func.func @mxlower_convert_f32_f4E2M1FN(
// F4-SAME: %[[X:[^:]+]]: memref<?xf32>, %[[Y:[^:]+]]: memref<?xi8>, %[[U0:[^:]+]]: index, %[[U1:[^:]+]]: index)
// F4: %[[N:.*]] = memref.dim %[[X]], %{{.*}} : memref<?xf32>
// F4: %[[LO:.*]] = arith.muli %[[U0]], %c32
// F4: arith.minui %{{.*}}, %[[N]] : index
// F4: scf.for %[[I:.*]] = %[[LO]] to %[[WHOLE:.*]] step %c32
// F4-NEXT: vector.load %[[X]][%[[I]]] : memref<?xf32>, vector<32xf32>
// F4-NOT: vector.load
// F4-NOT: arith.truncf
// F4: vector.deinterleave %{{.*}} : vector<32xi8> -> vector<16xi8>
// F4: vector.store %{{.*}}, %[[Y]][%{{.*}}] : memref<?xi8>, vector<16xi8>
// F4-NOT: vector.load
// F4: scf.if
// the mask: lane < count (constant lane numbers against the count)
// F4: %[[M:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : vector<32xi32>
// F4: vector.maskedload %[[X]][%[[WHOLE]]], %[[M]], %{{.*}} : memref<?xf32>, vector<32xi1>, vector<32xf32> into vector<32xf32>
// F4: %[[M2:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : vector<16xi32>
// F4: vector.maskedstore %[[Y]][%{{.*}}], %[[M2]], %{{.*}} : memref<?xi8>, vector<16xi1>, vector<16xi8>
// F4: return

// Packed f6 codes in: 24 bytes per 32 values, unpacked with shuffles; the value count from y
// F6-LABEL: func.func @mxlower_convert_f6E2M3FN_bf16_packed(
// F6-SAME: %[[Q:[^:]+]]: memref<?xi8>, %[[Y:[^:]+]]: memref<?xbf16>
// F6: memref.dim %[[Y]], %{{.*}} : memref<?xbf16>
// F6: scf.for
// F6: vector.load %[[Q]][%{{.*}}] : memref<?xi8>, vector<24xi8>
// F6-NOT: vector.load
// F6: vector.shuffle %{{.*}}, %{{.*}} [0, 3, 6, 9, 12, 15, 18, 21] : vector<24xi8>, vector<24xi8>
// F6: vector.interleave %{{.*}}, %{{.*}} : vector<16xi8> -> vector<32xi8>
// F6-NOT: arith.extf
// F6: vector.store %{{.*}}, %[[Y]][%{{.*}}] : memref<?xbf16>, vector<32xbf16>
// F6: vector.maskedload %[[Q]]{{.*}} : memref<?xi8>, vector<24xi1>, vector<24xi8> into vector<24xi8>
// F6: vector.maskedstore %[[Y]]{{.*}} : memref<?xbf16>, vector<32xi1>, vector<32xbf16>

// bf16 in, decoded by the codec from its 16-bit patterns (no float conversion op)
// E8-LABEL: func.func @mxlower_convert_bf16_f8E8M0FNU(
// E8: vector.load %{{.*}} : memref<?xbf16>, vector<32xbf16>
// E8-NOT: arith.extf
// E8: vector.store %{{.*}} : memref<?xi8>, vector<32xi8>

// BAD: error: a conversion kernel converts between f32/bf16/f16 and a narrow float type, not f32 -> bf16
// NOTO: error: convert needs --to (the destination type)
