// kgc-cse merges ops that compute the same value: pure kg, arith, math and
// tt ops always, reads (tt.load) only with no write between. Triton ops are
// unregistered here and written in Triton's generic form.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse | FileCheck %s

// CHECK-LABEL: func.func @kg_duplicates
// CHECK-SAME: (%[[X:.*]]: tensor<16x128xf32>, %[[B:.*]]: tensor<128xf32>)
func.func @kg_duplicates(%x: tensor<16x128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  // CHECK-NEXT: %[[E:.*]] = kg.exp %[[X]]
  // CHECK-NEXT: %[[A:.*]] = kg.add %[[E]], %[[B]]
  // CHECK-NEXT: %[[M:.*]] = kg.mul %[[A]], %[[A]]
  // CHECK-NEXT: return %[[M]]
  %e1 = kg.exp %x : tensor<16x128xf32>
  %e2 = kg.exp %x : tensor<16x128xf32>
  %a1 = kg.add %e1, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %a2 = kg.add %e2, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %m = kg.mul %a1, %a2 : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %m : tensor<16x128xf32>
}

// A dynamic extent is part of the type: the same ops on `?` merge too.
// CHECK-LABEL: func.func @kg_duplicates_dynamic
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>, %[[B:.*]]: tensor<128xf32>)
func.func @kg_duplicates_dynamic(%x: tensor<?x128xf32>, %b: tensor<128xf32>) -> tensor<?x128xf32> {
  // CHECK-NEXT: %[[A:.*]] = kg.add %[[X]], %[[B]]
  // CHECK-NEXT: %[[E:.*]] = kg.exp %[[A]]
  // CHECK-NEXT: %[[M:.*]] = kg.mul %[[A]], %[[E]]
  // CHECK-NEXT: return %[[M]]
  %a1 = kg.add %x, %b : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %a2 = kg.add %x, %b : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %e = kg.exp %a2 : tensor<?x128xf32>
  %m = kg.mul %a1, %e : (tensor<?x128xf32>, tensor<?x128xf32>) -> tensor<?x128xf32>
  return %m : tensor<?x128xf32>
}

// Ops with equal enum attributes merge.
// CHECK-LABEL: func.func @kg_same_attributes
func.func @kg_same_attributes(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK: %[[R:.*]] = kg.reduce sum %{{.*}} dims [1]
  // CHECK-NOT: kg.reduce
  // CHECK: %[[MM:.*]] = kg.matmul %{{.*}}, %{{.*}} precision = tf32
  // CHECK-NOT: kg.matmul
  // CHECK: return %[[R]], %[[R]], %[[MM]], %[[MM]]
  %r1 = kg.reduce sum %x dims [1] : tensor<4x16xf32> -> tensor<4xf32>
  %r2 = kg.reduce sum %x dims [1] : tensor<4x16xf32> -> tensor<4xf32>
  %m1 = kg.matmul %x, %w precision = tf32 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %m2 = kg.matmul %x, %w precision = tf32 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %r1, %r2, %m1, %m2 : tensor<4xf32>, tensor<4xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// A value computed before a loop is reused inside it: the outer op dominates.
// CHECK-LABEL: func.func @reuse_across_nesting
func.func @reuse_across_nesting(%x: tensor<8xf32>, %n: index) -> tensor<8xf32> {
  // CHECK: %[[E:.*]] = kg.exp
  // CHECK: scf.for
  // CHECK-NOT: kg.exp
  // CHECK: kg.add %{{.*}}, %[[E]]
  // CHECK: scf.yield
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = kg.exp %x : tensor<8xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<8xf32>) {
    %c1_again = arith.constant 1 : index
    %e_again = kg.exp %x : tensor<8xf32>
    %s = kg.add %acc, %e_again : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %s : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// CHECK-LABEL: func.func @arith_math
func.func @arith_math(%a: i32, %b: i32, %f: f32) -> (i32, i32, f32, f32, i32, i32) {
  // CHECK-COUNT-1: arith.addi
  // CHECK-NOT: arith.addi
  // CHECK: math.exp
  // CHECK-NOT: math.exp
  // CHECK: arith.constant 7 : i32
  // CHECK-NOT: arith.constant
  // CHECK: return
  %0 = arith.addi %a, %b : i32
  %1 = arith.addi %a, %b : i32
  %2 = math.exp %f : f32
  %3 = math.exp %f : f32
  %4 = arith.constant 7 : i32
  %5 = arith.constant 7 : i32
  return %0, %1, %2, %3, %4, %5 : i32, i32, f32, f32, i32, i32
}

// A kg.kernel is isolated from above: a constant inside it is not replaced
// by the equal constant outside it, which the body could not use.
// CHECK-LABEL: func.func @kernel_is_isolated
func.func @kernel_is_isolated(%a: tensor<16x16xf32>) -> (tensor<16x16xf32>, index) {
  // CHECK: arith.constant 0 : i32
  // CHECK: kg.kernel @copy
  // CHECK: %[[C:.*]] = arith.constant 0 : i32
  // CHECK: kg.tile_load %{{.*}}[%[[C]], %[[C]]]
  %c0 = arith.constant 0 : i32
  %y = kg.kernel @copy(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c = arith.constant 0 : i32
    %t = kg.tile_load %x[%c, %c] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.tile_store %t, %out[%c, %c] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  %i = arith.index_cast %c0 : i32 to index
  return %y, %i : tensor<16x16xf32>, index
}

// Triton's pure ops, as kgc emits them.
// CHECK-LABEL: sym_name = "tt_pure"
// CHECK: ^bb0(%[[P:.*]]: !tt.ptr<f32>):
// CHECK-NEXT: %[[RANGE:.*]] = "tt.make_range"() {end = 128 : i32, start = 0 : i32}
// CHECK-NEXT: %[[SPLAT:.*]] = "tt.splat"(%[[P]])
// CHECK-NEXT: %[[PTRS:.*]] = "tt.addptr"(%[[SPLAT]], %[[RANGE]])
// CHECK-NEXT: %[[ROW:.*]] = "tt.expand_dims"(%[[RANGE]]) {axis = 0 : i32}
// CHECK-NEXT: %[[WIDE:.*]] = "tt.broadcast"(%[[ROW]])
// CHECK-NEXT: "tt.use"(%[[PTRS]], %[[PTRS]], %[[WIDE]], %[[WIDE]])
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "tt_pure"}> ({
^bb0(%p: !tt.ptr<f32>):
  %r1 = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %r2 = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %s1 = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %s2 = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %a1 = "tt.addptr"(%s1, %r1) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %a2 = "tt.addptr"(%s2, %r2) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %e1 = "tt.expand_dims"(%r1) {axis = 0 : i32} : (tensor<128xi32>) -> tensor<1x128xi32>
  %e2 = "tt.expand_dims"(%r2) {axis = 0 : i32} : (tensor<128xi32>) -> tensor<1x128xi32>
  %b1 = "tt.broadcast"(%e1) : (tensor<1x128xi32>) -> tensor<64x128xi32>
  %b2 = "tt.broadcast"(%e2) : (tensor<1x128xi32>) -> tensor<64x128xi32>
  "tt.use"(%a1, %a2, %b1, %b2) : (tensor<128x!tt.ptr<f32>>, tensor<128x!tt.ptr<f32>>, tensor<64x128xi32>, tensor<64x128xi32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// Two loads of the same pointers with no write between read the same values.
// CHECK-LABEL: sym_name = "tt_loads"
// CHECK: %[[L:.*]] = "tt.load"
// CHECK-NOT: "tt.load"
// CHECK: arith.addf %[[L]], %[[L]]
// CHECK: "tt.store"
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>) -> (), sym_name = "tt_loads"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>):
  %l1 = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %l2 = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %s = arith.addf %l1, %l2 : tensor<128xf32>
  "tt.store"(%p, %s) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// Not merged: the store between the loads may change what the second reads.
// CHECK-LABEL: sym_name = "load_store_load"
// CHECK: %[[L1:.*]] = "tt.load"
// CHECK-NEXT: "tt.store"
// CHECK-NEXT: %[[L2:.*]] = "tt.load"
// CHECK-NEXT: arith.addf %[[L1]], %[[L2]]
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> (), sym_name = "load_store_load"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>, %v: tensor<128xf32>):
  %l1 = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  "tt.store"(%p, %v) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  %l2 = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %s = arith.addf %l1, %l2 : tensor<128xf32>
  "tt.store"(%p, %s) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// Both kept: stores are never merged, even identical ones.
// CHECK-LABEL: sym_name = "two_stores"
// CHECK-COUNT-2: "tt.store"(%{{.*}}, %{{.*}}) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> (), sym_name = "two_stores"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>, %v: tensor<128xf32>):
  "tt.store"(%p, %v) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.store"(%p, %v) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// Not merged: the loop body stores, so its load may see an earlier
// iteration's store and differs from the load before the loop; the load
// after the loop is not merged with either.
// CHECK-LABEL: sym_name = "load_in_storing_loop"
// CHECK: "tt.load"
// CHECK: scf.for
// CHECK: "tt.load"
// CHECK: "tt.store"
// CHECK: scf.yield
// CHECK: "tt.load"
// CHECK: "tt.return"
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>) -> (), sym_name = "load_in_storing_loop"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>):
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %before = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %before) -> (tensor<128xf32>) : i32 {
    %inside = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
    %s = arith.addf %acc, %inside : tensor<128xf32>
    "tt.store"(%p, %s) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
    scf.yield %s : tensor<128xf32>
  }
  %after = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %t = arith.addf %r, %after : tensor<128xf32>
  "tt.store"(%p, %t) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// Not merged: each pair differs in an attribute (also one held as a
// property by an unregistered op) or in its result type.
// CHECK-LABEL: func.func @different_attributes_or_types
func.func @different_attributes_or_types(%x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf16>, tensor<4x16xbf16>, i32, i32, i32, i64) {
  // CHECK: kg.gelu %{{.*}} : tensor<4x16xf32>
  // CHECK-NEXT: kg.gelu %{{.*}} approximate = tanh
  // CHECK-NEXT: kg.reduce sum
  // CHECK-NEXT: kg.reduce max
  // CHECK-NEXT: kg.cast %{{.*}} : tensor<4x16xf32> to tensor<4x16xf16>
  // CHECK-NEXT: kg.cast %{{.*}} : tensor<4x16xf32> to tensor<4x16xbf16>
  // CHECK-NEXT: "tt.get_program_id"() <{axis = 0 : i32}>
  // CHECK-NEXT: "tt.get_program_id"() <{axis = 1 : i32}>
  // CHECK-NEXT: arith.constant 0 : i32
  // CHECK-NEXT: arith.constant 0 : i64
  %g1 = kg.gelu %x : tensor<4x16xf32>
  %g2 = kg.gelu %x approximate = tanh : tensor<4x16xf32>
  %s = kg.reduce sum %x dims [1] : tensor<4x16xf32> -> tensor<4xf32>
  %m = kg.reduce max %x dims [1] : tensor<4x16xf32> -> tensor<4xf32>
  %h = kg.cast %x : tensor<4x16xf32> to tensor<4x16xf16>
  %b = kg.cast %x : tensor<4x16xf32> to tensor<4x16xbf16>
  %pid0 = "tt.get_program_id"() <{axis = 0 : i32}> : () -> i32
  %pid1 = "tt.get_program_id"() <{axis = 1 : i32}> : () -> i32
  %c32 = arith.constant 0 : i32
  %c64 = arith.constant 0 : i64
  return %g1, %g2, %s, %m, %h, %b, %pid0, %pid1, %c32, %c64 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x16xf16>, tensor<4x16xbf16>, i32, i32, i32, i64
}

// Not merged: kg.tile_store writes memory, so both identical stores stay,
// and the tile_load after them is not merged with the one before.
// CHECK-LABEL: func.func @tile_store_kept
func.func @tile_store_kept(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // CHECK: kg.tile_load
  // CHECK-COUNT-2: kg.tile_store
  // CHECK: kg.tile_load
  // CHECK: kg.yield
  %y = kg.kernel @stores(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.tile_load %out[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.tile_store %t, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.tile_store %t, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    %u = kg.tile_load %out[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.tile_store %u, %x[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// Not merged: a volatile load is a side effect of its own.
// CHECK-LABEL: sym_name = "volatile_loads"
// CHECK-COUNT-2: "tt.load"(%{{.*}}) {isVolatile = true
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>) -> (), sym_name = "volatile_loads"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>):
  %l1 = "tt.load"(%p) {isVolatile = true, operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %l2 = "tt.load"(%p) {isVolatile = true, operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %s = arith.addf %l1, %l2 : tensor<128xf32>
  "tt.store"(%p, %s) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// A gather reads memory like a load: two alike with no write between are
// merged; one after a store into its buffer is not merged with the one before.
// CHECK-LABEL: func.func @tile_gathers
func.func @tile_gathers(%a: tensor<16x16xf32>, %i: tensor<16xi64>) -> tensor<16x16xf32> {
  // CHECK: %[[IDS:.*]] = kg.tile_load
  // CHECK-NEXT: %[[G:.*]] = kg.tile_gather %{{.*}} indices %[[IDS]]
  // CHECK-NEXT: kg.tile_store %[[G]]
  // CHECK-NEXT: kg.tile_store %[[G]]
  // CHECK-NEXT: %[[H:.*]] = kg.tile_gather %{{.*}} indices %[[IDS]]
  // CHECK-NEXT: kg.tile_store %[[H]]
  %y = kg.kernel @gathers(%a, %i) : (tensor<16x16xf32>, tensor<16xi64>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %ids: memref<16xi64>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %v = memref.reinterpret_cast %ids to offset: [0], sizes: [16, 1], strides: [1, 0] : memref<16xi64> to memref<16x1xi64, strided<[1, 0]>>
    %r = kg.tile_load %v[%c0, %c0] : memref<16x1xi64, strided<[1, 0]>> -> tensor<16x1xi64>
    %g = kg.tile_gather %out[%c0, %c0] indices %r dim 0 : memref<16x16xf32>, tensor<16x1xi64> -> tensor<16x16xf32>
    %h = kg.tile_gather %out[%c0, %c0] indices %r dim 0 : memref<16x16xf32>, tensor<16x1xi64> -> tensor<16x16xf32>
    kg.tile_store %g, %x[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.tile_store %h, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    %k = kg.tile_gather %out[%c0, %c0] indices %r dim 0 : memref<16x16xf32>, tensor<16x1xi64> -> tensor<16x16xf32>
    kg.tile_store %k, %x[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}
