// kgc-dce erases ops whose results are unused and that write no memory:
// pure kg, arith and tt ops, loads, and ops with regions that do not store.
// Stores, volatile loads and terminators stay. Triton ops are unregistered
// here and written in Triton's generic form.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-dce | FileCheck %s
// With kgc-cse first, the ops that merging leaves unused go too.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse --kgc-dce | FileCheck %s --check-prefix=PIPE

// A dead chain goes in one run: each op is judged after its users.
// CHECK-LABEL: func.func @dead_kg_chain
// CHECK-SAME: (%[[X:.*]]: tensor<16x128xf32>
// CHECK-NEXT: return %[[X]]
func.func @dead_kg_chain(%x: tensor<16x128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  %0 = kg.exp %x : tensor<16x128xf32>
  %1 = kg.add %0, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %2 = kg.reduce sum %1 dims [1] : tensor<16x128xf32> -> tensor<16xf32>
  %3 = kg.neg %2 : tensor<16xf32>
  return %x : tensor<16x128xf32>
}

// The same over a dynamic extent.
// CHECK-LABEL: func.func @dead_dynamic_chain
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>
// CHECK-NEXT: return %[[X]]
func.func @dead_dynamic_chain(%x: tensor<?x128xf32>, %b: tensor<128xf32>) -> tensor<?x128xf32> {
  %0 = kg.exp %x : tensor<?x128xf32>
  %1 = kg.add %0, %b : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %2 = kg.reduce sum %1 dims [1] : tensor<?x128xf32> -> tensor<?xf32>
  return %x : tensor<?x128xf32>
}

// Only what the result needs stays.
// CHECK-LABEL: func.func @partly_dead
// CHECK-NEXT: %[[E:.*]] = kg.exp
// CHECK-NEXT: return %[[E]]
func.func @partly_dead(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = kg.exp %x : tensor<8xf32>
  %unused = kg.sigmoid %e : tensor<8xf32>
  return %e : tensor<8xf32>
}

// CHECK-LABEL: func.func @dead_arith
// CHECK-NEXT: return %{{.*}} : i32
func.func @dead_arith(%a: i32, %f: f32) -> i32 {
  %c = arith.constant 3 : i32
  %0 = arith.muli %a, %c : i32
  %1 = math.sqrt %f : f32
  %2 = arith.addf %1, %f : f32
  return %a : i32
}

// Dead pure tt ops and a dead load go; nothing is left but the return.
// CHECK-LABEL: sym_name = "dead_tt"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "dead_tt"}> ({
^bb0(%p: !tt.ptr<f32>):
  %range = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %splat = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %ptrs = "tt.addptr"(%splat, %range) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %row = "tt.expand_dims"(%range) {axis = 0 : i32} : (tensor<128xi32>) -> tensor<1x128xi32>
  %pid = "tt.get_program_id"() <{axis = 0 : i32}> : () -> i32
  %l = "tt.load"(%ptrs) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %twice = arith.addf %l, %l : tensor<128xf32>
  "tt.return"() : () -> ()
}) : () -> ()

// Kept: a store is never removed, and keeps alive what it stores, though
// nothing uses it and the function returns nothing.
// CHECK-LABEL: sym_name = "store_kept"
// CHECK: "tt.make_range"
// CHECK-NEXT: "tt.splat"
// CHECK-NEXT: "tt.addptr"
// CHECK-NEXT: "tt.load"
// CHECK-NEXT: arith.addf
// CHECK-NEXT: "tt.store"
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "store_kept"}> ({
^bb0(%p: !tt.ptr<f32>):
  %range = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %splat = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %ptrs = "tt.addptr"(%splat, %range) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %l = "tt.load"(%ptrs) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %twice = arith.addf %l, %l : tensor<128xf32>
  "tt.store"(%ptrs, %twice) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// A loop whose results are unused and whose body only computes and loads
// goes, with its body. Kept: the loop that stores, whatever uses its result.
// CHECK-LABEL: sym_name = "loops"
// CHECK-COUNT-1: scf.for
// CHECK-NOT: scf.for
// CHECK: "tt.store"
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> (), sym_name = "loops"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>, %v: tensor<128xf32>):
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %dead = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %v) -> (tensor<128xf32>) : i32 {
    %l = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
    %s = arith.addf %acc, %l : tensor<128xf32>
    scf.yield %s : tensor<128xf32>
  }
  %stored = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %v) -> (tensor<128xf32>) : i32 {
    %s = arith.addf %acc, %v : tensor<128xf32>
    "tt.store"(%p, %s) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
    scf.yield %s : tensor<128xf32>
  }
  "tt.return"() : () -> ()
}) : () -> ()

// Kept: a volatile load is a side effect of its own, whether isVolatile is
// an attribute or, as Triton prints it, a property.
// CHECK-LABEL: sym_name = "volatile_load_kept"
// CHECK-NEXT: ^bb0
// CHECK-NEXT: "tt.load"(%{{.*}}) {isVolatile = true
// CHECK-NEXT: "tt.load"(%{{.*}}) <{isVolatile = true
// CHECK-NEXT: "tt.return"
"tt.func"() <{function_type = (tensor<128x!tt.ptr<f32>>) -> (), sym_name = "volatile_load_kept"}> ({
^bb0(%p: tensor<128x!tt.ptr<f32>>):
  %plain = "tt.load"(%p) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %volatile = "tt.load"(%p) {isVolatile = true, operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %volatile_property = "tt.load"(%p) <{isVolatile = true, operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  "tt.return"() : () -> ()
}) : () -> ()

// An unused kernel in graph form computes values only and goes; a kernel in
// tiled form stores into its outputs and stays though its result is unused.
// CHECK-LABEL: func.func @kernels
// CHECK-NOT: @graph_kernel
// CHECK: kg.kernel @tiled_kernel
// CHECK: kg.tile_store
// CHECK: return
func.func @kernels(%a: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<16x16xf32> {
  %g = kg.kernel @graph_kernel(%a, %b) : (tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: tensor<16x16xf32>, %bias: tensor<16xf32>):
    %s = kg.add %x, %bias : (tensor<16x16xf32>, tensor<16xf32>) -> tensor<16x16xf32>
    %r = kg.relu %s : tensor<16x16xf32>
    kg.yield %r : tensor<16x16xf32>
  }
  %t = kg.kernel @tiled_kernel(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %tile = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.tile_store %tile, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %a : tensor<16x16xf32>
}

// Kept: a terminator, here tensor.yield in a (pure) tensor.pad, is never
// erased, though it has no results.
// CHECK-LABEL: func.func @terminator_kept
// CHECK: tensor.pad
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tensor.yield
func.func @terminator_kept(%t: tensor<4xf32>) -> tensor<6xf32> {
  %cst = arith.constant 0.0 : f32
  %p = tensor.pad %t low[1] high[1] {
  ^bb0(%i: index):
    tensor.yield %cst : f32
  } : tensor<4xf32> to tensor<6xf32>
  return %p : tensor<6xf32>
}

// kgc-cse then kgc-dce: merged duplicates leave dead ops behind, which go.
// PIPE-LABEL: func.func @cse_then_dce
// PIPE-NEXT: %[[E:.*]] = kg.exp
// PIPE-NEXT: %[[M:.*]] = kg.mul %[[E]], %[[E]]
// PIPE-NEXT: return %[[M]]
func.func @cse_then_dce(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e1 = kg.exp %x : tensor<8xf32>
  %e2 = kg.exp %x : tensor<8xf32>
  %n = kg.neg %e2 : tensor<8xf32>
  %m = kg.mul %e1, %e2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// PIPE-LABEL: sym_name = "tt_cse_then_dce"
// PIPE-NEXT: ^bb0(%[[P:.*]]: !tt.ptr<f32>):
// PIPE-NEXT: %[[R:.*]] = "tt.make_range"
// PIPE-NEXT: %[[S:.*]] = "tt.splat"(%[[P]])
// PIPE-NEXT: %[[A:.*]] = "tt.addptr"(%[[S]], %[[R]])
// PIPE-NEXT: %[[L:.*]] = "tt.load"(%[[A]])
// PIPE-NEXT: %[[T:.*]] = arith.addf %[[L]], %[[L]]
// PIPE-NEXT: "tt.store"(%[[A]], %[[T]])
// PIPE-NEXT: "tt.return"
"tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "tt_cse_then_dce"}> ({
^bb0(%p: !tt.ptr<f32>):
  %r1 = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %r2 = "tt.make_range"() {end = 128 : i32, start = 0 : i32} : () -> tensor<128xi32>
  %s1 = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %s2 = "tt.splat"(%p) : (!tt.ptr<f32>) -> tensor<128x!tt.ptr<f32>>
  %a1 = "tt.addptr"(%s1, %r1) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %a2 = "tt.addptr"(%s2, %r2) : (tensor<128x!tt.ptr<f32>>, tensor<128xi32>) -> tensor<128x!tt.ptr<f32>>
  %l1 = "tt.load"(%a1) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %l2 = "tt.load"(%a2) {operandSegmentSizes = array<i32: 1, 0, 0>} : (tensor<128x!tt.ptr<f32>>) -> tensor<128xf32>
  %unused = "tt.expand_dims"(%r2) {axis = 0 : i32} : (tensor<128xi32>) -> tensor<1x128xi32>
  %t = arith.addf %l1, %l2 : tensor<128xf32>
  "tt.store"(%a2, %t) : (tensor<128x!tt.ptr<f32>>, tensor<128xf32>) -> ()
  "tt.return"() : () -> ()
}) : () -> ()

// An unused gather reads memory only, and goes; so does the load of its
// indices. The store stays.
// CHECK-LABEL: func.func @unused_gather
// CHECK-NOT: kg.tile_gather
// CHECK: kg.tile_store
// PIPE-LABEL: func.func @unused_gather
// PIPE-NOT: kg.tile_gather
func.func @unused_gather(%a: tensor<16x16xf32>, %i: tensor<16xi64>) -> tensor<16x16xf32> {
  %y = kg.kernel @gathers(%a, %i) : (tensor<16x16xf32>, tensor<16xi64>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %ids: memref<16xi64>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %v = memref.reinterpret_cast %ids to offset: [0], sizes: [16, 1], strides: [1, 0] : memref<16xi64> to memref<16x1xi64, strided<[1, 0]>>
    %r = kg.tile_load %v[%c0, %c0] : memref<16x1xi64, strided<[1, 0]>> -> tensor<16x1xi64>
    %g = kg.tile_gather %x[%c0, %c0] indices %r dim 0 : memref<16x16xf32>, tensor<16x1xi64> -> tensor<16x16xf32>
    %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.tile_store %t, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}
