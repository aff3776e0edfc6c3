// RUN: mxlower-opt %s --split-input-file --verify-diagnostics --mxlower-widen-bool-memrefs | FileCheck %s
// RUN: mxlower-opt %s --split-input-file --verify-diagnostics -p 'builtin.module(mxlower-widen-bool-memrefs, lower-affine, convert-vector-to-scf, convert-scf-to-cf, expand-strided-metadata, convert-vector-to-llvm, convert-to-llvm, reconcile-unrealized-casts)' | FileCheck %s --check-prefix=LLVM

// Every memref of i1 becomes a memref of i8 (one byte per bool, 0 or 1: NumPy's layout);
// loads truncate to i1, stores extend from i1.  Upstream convert-to-llvm asserts on a
// memref.store to a memref of i1 (the LLVM RUN line lowers every positive case).

// CHECK-LABEL: func.func @load_store
// CHECK-SAME: (%[[M:.*]]: memref<4xi8>, %[[V:.*]]: i1, %[[I:.*]]: index) -> i1
// CHECK: %[[E:.*]] = arith.extui %[[V]] : i1 to i8
// CHECK: memref.store %[[E]], %[[M]][%[[I]]] : memref<4xi8>
// CHECK: %[[L:.*]] = memref.load %[[M]][%[[I]]] : memref<4xi8>
// CHECK: %[[T:.*]] = arith.trunci %[[L]] : i8 to i1
// CHECK: return %[[T]] : i1
// LLVM-LABEL: llvm.func @load_store
// LLVM: %[[E:.*]] = llvm.zext %{{.*}} : i1 to i8
// LLVM: llvm.store %[[E]], %{{.*}} : i8, !llvm.ptr
// LLVM: %[[L:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i8
// LLVM: llvm.trunc %[[L]] : i8 to i1
func.func @load_store(%m: memref<4xi1>, %v: i1, %i: index) -> i1 {
  memref.store %v, %m[%i] : memref<4xi1>
  %0 = memref.load %m[%i] : memref<4xi1>
  return %0 : i1
}

// -----

// Function boundaries: signatures (also of declarations), calls, returned buffers; memrefs
// of other types and i1 values outside memory are left alone.
// CHECK-LABEL: func.func private @callee(memref<?xi8>, memref<?xf32>) -> memref<*xi8>
// CHECK-LABEL: func.func @caller
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[F:.*]]: memref<?xf32>, %[[B:.*]]: i1) -> (memref<*xi8>, i1)
// CHECK: %[[R:.*]] = call @callee(%[[M]], %[[F]]) : (memref<?xi8>, memref<?xf32>) -> memref<*xi8>
// CHECK: return %[[R]], %[[B]] : memref<*xi8>, i1
// LLVM-LABEL: llvm.func @caller
func.func private @callee(memref<?xi1>, memref<?xf32>) -> memref<*xi1>
func.func @caller(%m: memref<?xi1>, %f: memref<?xf32>, %b: i1) -> (memref<*xi1>, i1) {
  %0 = call @callee(%m, %f) : (memref<?xi1>, memref<?xf32>) -> memref<*xi1>
  return %0, %b : memref<*xi1>, i1
}

// -----

// Allocation, views, copies and metadata ops are retyped as they are.
// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[M:.*]]: memref<4x8xi8>, %[[N:.*]]: index) -> memref<32xi8>
// CHECK: %[[A:.*]] = memref.alloc(%[[N]]) : memref<?x8xi8>
// CHECK: %[[S:.*]] = memref.subview %[[M]][1, 0] [2, 8] [1, 1] : memref<4x8xi8> to memref<2x8xi8, strided<[8, 1], offset: 8>>
// CHECK: memref.collapse_shape %[[M]] {{\[}}[0, 1]] : memref<4x8xi8> into memref<32xi8>
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1, 2]] output_shape [2, 2, 8] : memref<32xi8> into memref<2x2x8xi8>
// CHECK: memref.cast %[[M]] : memref<4x8xi8> to memref<?x?xi8>
// CHECK: memref.reinterpret_cast %[[M]] to offset: [0], sizes: [32], strides: [1] : memref<4x8xi8> to memref<32xi8>
// CHECK: memref.extract_strided_metadata %[[S]] : memref<2x8xi8, strided<[8, 1], offset: 8>> -> memref<i8>, index, index, index, index, index
// CHECK: memref.dim %[[A]], %{{.*}} : memref<?x8xi8>
// CHECK: memref.copy %[[S]], %{{.*}} : memref<2x8xi8, strided<[8, 1], offset: 8>> to memref<2x8xi8>
// CHECK: memref.dealloc %[[A]] : memref<?x8xi8>
// CHECK-NOT: i1
func.func @views(%m: memref<4x8xi1>, %n: index) -> memref<32xi1> {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?x8xi1>
  %s = memref.subview %m[1, 0] [2, 8] [1, 1] : memref<4x8xi1> to memref<2x8xi1, strided<[8, 1], offset: 8>>
  %f = memref.collapse_shape %m [[0, 1]] : memref<4x8xi1> into memref<32xi1>
  %e = memref.expand_shape %f [[0, 1, 2]] output_shape [2, 2, 8] : memref<32xi1> into memref<2x2x8xi1>
  %c = memref.cast %m : memref<4x8xi1> to memref<?x?xi1>
  %r = memref.reinterpret_cast %m to offset: [0], sizes: [32], strides: [1] : memref<4x8xi1> to memref<32xi1>
  %base, %off, %sz:2, %st:2 = memref.extract_strided_metadata %s : memref<2x8xi1, strided<[8, 1], offset: 8>> -> memref<i1>, index, index, index, index, index
  %d = memref.dim %a, %c0 : memref<?x8xi1>
  %t = memref.alloca() : memref<2x8xi1>
  memref.copy %s, %t : memref<2x8xi1, strided<[8, 1], offset: 8>> to memref<2x8xi1>
  memref.dealloc %a : memref<?x8xi1>
  return %r : memref<32xi1>
}

// -----

// Globals: the type and the initial value (0/1 bytes; splats stay splats).
// CHECK: memref.global "private" constant @mask : memref<4xi8> = dense<[1, 0, 1, 1]>
// CHECK: memref.global "private" constant @ones : memref<2x3xi8> = dense<1>
// CHECK: memref.global "private" @scratch : memref<8xi8>
// CHECK-LABEL: func.func @globals
// CHECK: memref.get_global @mask : memref<4xi8>
// CHECK: memref.get_global @ones : memref<2x3xi8>
// CHECK: memref.get_global @scratch : memref<8xi8>
// LLVM: llvm.mlir.global private constant @mask(dense<[1, 0, 1, 1]> : tensor<4xi8>) {addr_space = 0 : i32} : !llvm.array<4 x i8>
memref.global "private" constant @mask : memref<4xi1> = dense<[true, false, true, true]>
memref.global "private" constant @ones : memref<2x3xi1> = dense<true>
memref.global "private" @scratch : memref<8xi1>
func.func @globals() -> (memref<4xi1>, memref<2x3xi1>, memref<8xi1>) {
  %0 = memref.get_global @mask : memref<4xi1>
  %1 = memref.get_global @ones : memref<2x3xi1>
  %2 = memref.get_global @scratch : memref<8xi1>
  return %0, %1, %2 : memref<4xi1>, memref<2x3xi1>, memref<8xi1>
}

// -----

// Loops and branches carrying memrefs of i1: block arguments and results are retyped.
// CHECK-LABEL: func.func @loops
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[IT:.*]] = %{{.*}}) -> (memref<8xi8>)
// CHECK: memref.load %[[IT]][%{{.*}}] : memref<8xi8>
// CHECK: arith.trunci %{{.*}} : i8 to i1
// CHECK: arith.xori
// CHECK: arith.extui %{{.*}} : i1 to i8
// CHECK: memref.store %{{.*}}, %[[IT]][%{{.*}}] : memref<8xi8>
// CHECK: scf.yield %[[IT]] : memref<8xi8>
// CHECK: cf.br ^bb1(%{{.*}} : memref<8xi8>)
// CHECK: ^bb1(%{{.*}}: memref<8xi8>):
func.func @loops(%m: memref<8xi1>) -> memref<8xi1> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %true = arith.constant true
  %r = scf.for %i = %c0 to %c8 step %c1 iter_args(%it = %m) -> (memref<8xi1>) {
    %x = memref.load %it[%i] : memref<8xi1>
    %y = arith.xori %x, %true : i1
    memref.store %y, %it[%i] : memref<8xi1>
    scf.yield %it : memref<8xi1>
  }
  cf.br ^bb1(%r : memref<8xi1>)
^bb1(%b: memref<8xi1>):
  return %b : memref<8xi1>
}

// -----

// affine.load / affine.store (the vector-width path of mxlower-stablehlo-to-llvm).
// CHECK-LABEL: func.func @affine
// CHECK: affine.for %[[I:.*]] = 0 to 8 {
// CHECK: %[[L:.*]] = affine.load %{{.*}}[%[[I]]] : memref<8xi8>
// CHECK: %[[T:.*]] = arith.trunci %[[L]] : i8 to i1
// CHECK: %[[E:.*]] = arith.extui %[[T]] : i1 to i8
// CHECK: affine.store %[[E]], %{{.*}}[%[[I]]] : memref<8xi8>
func.func @affine(%a: memref<8xi1>, %b: memref<8xi1>) {
  affine.for %i = 0 to 8 {
    %x = affine.load %a[%i] : memref<8xi1>
    affine.store %x, %b[%i] : memref<8xi1>
  }
  return
}

// -----

// Vector accesses: the vector is truncated / extended element-wise (LLVM would otherwise
// pack vector<8xi1> into bits); transfer_read's padding and maskedload's pass-through are
// extended, masks stay i1.
// CHECK-LABEL: func.func @vectors
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[I:.*]]: index, %[[MASK:.*]]: vector<8xi1>, %[[P:.*]]: i1)
// CHECK: %[[L:.*]] = vector.load %[[M]][%[[I]]] : memref<?xi8>, vector<8xi8>
// CHECK: %[[V:.*]] = arith.trunci %[[L]] : vector<8xi8> to vector<8xi1>
// CHECK: %[[E:.*]] = arith.extui %[[V]] : vector<8xi1> to vector<8xi8>
// CHECK: vector.store %[[E]], %[[M]][%[[I]]] : memref<?xi8>, vector<8xi8>
// CHECK: %[[PE:.*]] = arith.extui %[[P]] : i1 to i8
// CHECK: %[[R:.*]] = vector.transfer_read %[[M]][%[[I]]], %[[PE]] : memref<?xi8>, vector<8xi8>
// CHECK: %[[RT:.*]] = arith.trunci %[[R]] : vector<8xi8> to vector<8xi1>
// CHECK: %[[RE:.*]] = arith.extui %[[RT]] : vector<8xi1> to vector<8xi8>
// CHECK: vector.transfer_write %[[RE]], %[[M]][%[[I]]] : vector<8xi8>, memref<?xi8>
// CHECK: %[[VE:.*]] = arith.extui %[[V]] : vector<8xi1> to vector<8xi8>
// CHECK: %[[ML:.*]] = vector.maskedload %[[M]][%[[I]]], %[[MASK]], %[[VE]] : memref<?xi8>, vector<8xi1>, vector<8xi8> into vector<8xi8>
// CHECK: %[[MT:.*]] = arith.trunci %[[ML]] : vector<8xi8> to vector<8xi1>
// CHECK: %[[ME:.*]] = arith.extui %[[MT]] : vector<8xi1> to vector<8xi8>
// CHECK: vector.maskedstore %[[M]][%[[I]]], %[[MASK]], %[[ME]] : memref<?xi8>, vector<8xi1>, vector<8xi8>
// CHECK: return %[[RT]], %[[MT]] : vector<8xi1>, vector<8xi1>
// LLVM-LABEL: llvm.func @vectors
// LLVM: llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr -> vector<8xi8>
// LLVM: llvm.trunc %{{.*}} : vector<8xi8> to vector<8xi1>
// LLVM-NOT: -> vector<8xi1>
// LLVM-NOT: vector<8xi1>, !llvm.ptr
// LLVM: llvm.return
func.func @vectors(%m: memref<?xi1>, %i: index, %mask: vector<8xi1>, %p: i1) -> (vector<8xi1>, vector<8xi1>) {
  %v = vector.load %m[%i] : memref<?xi1>, vector<8xi1>
  vector.store %v, %m[%i] : memref<?xi1>, vector<8xi1>
  %r = vector.transfer_read %m[%i], %p : memref<?xi1>, vector<8xi1>
  vector.transfer_write %r, %m[%i] : vector<8xi1>, memref<?xi1>
  %ml = vector.maskedload %m[%i], %mask, %v : memref<?xi1>, vector<8xi1>, vector<8xi1> into vector<8xi1>
  vector.maskedstore %m[%i], %mask, %ml : memref<?xi1>, vector<8xi1>, vector<8xi1>
  return %r, %ml : vector<8xi1>, vector<8xi1>
}

// -----

// Gathers, scatters, expanding loads and compressing stores likewise.
// CHECK-LABEL: func.func @gather_scatter
// CHECK-SAME: (%[[M:.*]]: memref<?xi8>, %[[IDX:.*]]: vector<8xi32>, %[[MASK:.*]]: vector<8xi1>, %[[P:.*]]: vector<8xi1>)
// CHECK: %[[PE:.*]] = arith.extui %[[P]] : vector<8xi1> to vector<8xi8>
// CHECK: %[[G:.*]] = vector.gather %[[M]][%{{.*}}] [%[[IDX]]], %[[MASK]], %[[PE]] : memref<?xi8>, vector<8xi32>, vector<8xi1>, vector<8xi8> into vector<8xi8>
// CHECK: %[[GT:.*]] = arith.trunci %[[G]] : vector<8xi8> to vector<8xi1>
// CHECK: %[[GE:.*]] = arith.extui %[[GT]] : vector<8xi1> to vector<8xi8>
// CHECK: vector.scatter %[[M]][%{{.*}}] [%[[IDX]]], %[[MASK]], %[[GE]] : memref<?xi8>, vector<8xi32>, vector<8xi1>, vector<8xi8>
// CHECK: %[[PE2:.*]] = arith.extui %[[P]] : vector<8xi1> to vector<8xi8>
// CHECK: %[[X:.*]] = vector.expandload %[[M]][%{{.*}}], %[[MASK]], %[[PE2]] : memref<?xi8>, vector<8xi1>, vector<8xi8> into vector<8xi8>
// CHECK: %[[XT:.*]] = arith.trunci %[[X]] : vector<8xi8> to vector<8xi1>
// CHECK: %[[XE:.*]] = arith.extui %[[XT]] : vector<8xi1> to vector<8xi8>
// CHECK: vector.compressstore %[[M]][%{{.*}}], %[[MASK]], %[[XE]] : memref<?xi8>, vector<8xi1>, vector<8xi8>
// CHECK: return %[[GT]], %[[XT]]
// LLVM-LABEL: llvm.func @gather_scatter
func.func @gather_scatter(%m: memref<?xi1>, %idx: vector<8xi32>, %mask: vector<8xi1>, %p: vector<8xi1>) -> (vector<8xi1>, vector<8xi1>) {
  %c0 = arith.constant 0 : index
  %g = vector.gather %m[%c0][%idx], %mask, %p : memref<?xi1>, vector<8xi32>, vector<8xi1>, vector<8xi1> into vector<8xi1>
  vector.scatter %m[%c0][%idx], %mask, %g : memref<?xi1>, vector<8xi32>, vector<8xi1>, vector<8xi1>
  %e = vector.expandload %m[%c0], %mask, %p : memref<?xi1>, vector<8xi1>, vector<8xi1> into vector<8xi1>
  vector.compressstore %m[%c0], %mask, %e : memref<?xi1>, vector<8xi1>, vector<8xi1>
  return %g, %e : vector<8xi1>, vector<8xi1>
}

// -----

// Memrefs of other types, and memrefs of vectors of i1, are not touched.
// CHECK-LABEL: func.func @untouched
// CHECK-SAME: (%{{.*}}: memref<4xi8>, %{{.*}}: memref<2xvector<8xi1>>, %{{.*}}: vector<8xi1>)
// CHECK-NOT: arith.extui
// CHECK-NOT: arith.trunci
// CHECK: return
func.func @untouched(%a: memref<4xi8>, %b: memref<2xvector<8xi1>>, %v: vector<8xi1>) {
  %c0 = arith.constant 0 : index
  %x = memref.load %a[%c0] : memref<4xi8>
  memref.store %x, %a[%c0] : memref<4xi8>
  memref.store %v, %b[%c0] : memref<2xvector<8xi1>>
  return
}

// -----

func.func @atomic_rmw(%m: memref<4xi1>, %v: i1, %i: index) -> i1 {
  // expected-error @+1 {{'memref.atomic_rmw' on a memref of i1 is not supported: mxlower-widen-bool-memrefs stores bools as i8 and rewrites only loads, stores and ops that allocate, view, copy or pass memrefs along}}
  %0 = memref.atomic_rmw ori %v, %m[%i] : (i1, memref<4xi1>) -> i1
  return %0 : i1
}

// -----

func.func @generic_atomic_rmw(%m: memref<4xi1>, %i: index) -> i1 {
  // expected-error @+1 {{'memref.generic_atomic_rmw' on a memref of i1 is not supported}}
  %0 = memref.generic_atomic_rmw %m[%i] : memref<4xi1> {
  ^bb0(%old: i1):
    %n = arith.xori %old, %old : i1
    memref.atomic_yield %n : i1
  }
  return %0 : i1
}

// -----

func.func @type_cast(%m: memref<4x8xi1>) -> memref<vector<4x8xi1>> {
  // expected-error @+1 {{'vector.type_cast' on a memref of i1 is not supported}}
  %0 = vector.type_cast %m : memref<4x8xi1> to memref<vector<4x8xi1>>
  return %0 : memref<vector<4x8xi1>>
}

// -----

// expected-error @+1 {{'func.func' has a type 'tuple<memref<4xi1>>' holding a memref of i1 that mxlower-widen-bool-memrefs cannot retype}}
func.func private @in_tuple(tuple<memref<4xi1>>)

// -----

// expected-error @+1 {{'memref.global' initial value dense_resource<blob1> : tensor<4xi1> cannot be stored as i8 by mxlower-widen-bool-memrefs (only dense i1 values)}}
memref.global "private" constant @from_resource : memref<4xi1> = dense_resource<blob1>

{-#
  dialect_resources: {
    builtin: {
      blob1: "0x0100000001000101"
    }
  }
#-}
