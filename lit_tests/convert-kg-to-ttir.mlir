// The tile programs come from kg-tile, kg-legalize-dot and kg-pad-mask,
// from the tile knobs each kernel carries (so a change of kg-tile's
// heuristics, which tests/test_tile_heuristics.py pins, cannot change them);
// these checks are about the Triton IR that convert-kg-to-ttir writes.
// What it refuses is in convert-kg-to-ttir-errors.mlir.
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot --kg-pad-mask --convert-kg-to-ttir | FileCheck %s

// The kernel becomes a module holding one public tt.func whose arguments
// are pointers (inputs, then the result) promised 16-byte aligned; the
// graph keeps a kg.launch of it. Tiles keep only their axes of more than
// one lane: the bias, a 1x1024 tile, is a tensor<1024>.
// CHECK-LABEL: func.func @pointwise
// CHECK: %[[R:.*]] = kg.launch @pointwise_0(%{{.*}}, %{{.*}}) grid [5, 1, 1] num_warps 8 num_stages 1 : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32>
// CHECK: return %[[R]]
// CHECK: module @pointwise_0 {
// CHECK: "tt.func"() ({
// CHECK: ^bb0(%[[X:.*]]: !tt.ptr<f32>, %[[B:.*]]: !tt.ptr<f32>, %[[Y:.*]]: !tt.ptr<f32>):
// CHECK: "tt.get_program_id"() {axis = 0 : i32} : () -> i32
// CHECK: "tt.make_range"() {end = 1024 : i32, start = 0 : i32} : () -> tensor<1024xi32>
// CHECK: "tt.load"({{.*}}) {{.*}} : (tensor<4x1024x!tt.ptr<f32>>, tensor<4x1024xi1>, tensor<4x1024xf32>) -> tensor<4x1024xf32>
// CHECK: "tt.load"({{.*}}) {{.*}} : (tensor<1024x!tt.ptr<f32>>, tensor<1024xi1>, tensor<1024xf32>) -> tensor<1024xf32>
// CHECK: "tt.expand_dims"({{.*}}) {axis = 0 : i32} : (tensor<1024xf32>) -> tensor<1x1024xf32>
// CHECK: "tt.broadcast"({{.*}}) : (tensor<1x1024xf32>) -> tensor<4x1024xf32>
// CHECK: arith.addf {{.*}} : tensor<4x1024xf32>
// CHECK: arith.maximumf {{.*}} : tensor<4x1024xf32>
// CHECK: "tt.store"
// CHECK: "tt.return"() : () -> ()
// CHECK: arg_attrs = [{tt.divisibility = 16 : i32}, {tt.divisibility = 16 : i32}, {tt.divisibility = 16 : i32}], function_type = (!tt.ptr<f32>, !tt.ptr<f32>, !tt.ptr<f32>) -> (), noinline = false, sym_name = "pointwise_0", sym_visibility = "public"
func.func @pointwise(%x: tensor<17x1000xf32>, %b: tensor<1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @pointwise_0(%x, %b) attributes {block_m = 4, block_n = 1000, num_warps = 8, num_stages = 1} : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>, %bias: tensor<1000xf32>):
    %s = kg.add %a, %bias : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32>
    %r = kg.relu %s : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A reduction becomes tt.reduce with an arith combiner over the row axis.
// CHECK-LABEL: func.func @row_sum
// CHECK: "tt.reduce"(%{{.*}}) ({
// CHECK: ^bb0(%[[L:.*]]: f32, %[[R:.*]]: f32):
// CHECK: %[[S:.*]] = arith.addf %[[L]], %[[R]] : f32
// CHECK: "tt.reduce.return"(%[[S]]) : (f32) -> ()
// CHECK: }) {axis = 1 : i32} : (tensor<4x1024xf32>) -> tensor<4xf32>
func.func @row_sum(%x: tensor<17x1000xf32>) -> tensor<17x1xf32> {
  %y = kg.kernel @row_sum_0(%x) attributes {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1} : (tensor<17x1000xf32>) -> tensor<17x1xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %s = kg.reduce sum %a dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    kg.yield %s : tensor<17x1xf32>
  }
  return %y : tensor<17x1xf32>
}

// -----

// A matmul: the k loop is an scf.for carrying a 2-D accumulator into
// tt.dot, exact f32 products (inputPrecision ieee = 2).
// CHECK-LABEL: func.func @matmul
// CHECK: scf.for {{.*}} -> (tensor<64x64xf32>)
// CHECK: "tt.dot"(%{{.*}}, %{{.*}}, %{{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 0 : i32} : (tensor<64x32xf32>, tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK: scf.yield
func.func @matmul(%a: tensor<64x128xf32>, %b: tensor<128x64xf32>) -> tensor<64x64xf32> {
  %y = kg.kernel @matmul_0(%a, %b) attributes {block_m = 64, block_n = 64, block_k = 32, group_m = 8, num_warps = 4, num_stages = 4} : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x128xf32>, %w: tensor<128x64xf32>):
    %m = kg.matmul %x, %w : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// Math that Triton has no op for: neg is a multiply by -1 (Triton refuses
// arith.negf), tanh and erf come from libdevice, half floats computed in f32.
// CHECK-LABEL: func.func @math
// CHECK: arith.mulf %{{.*}}, %{{.*}} : tensor<16xf32>
// CHECK: "tt.extern_elementwise"(%{{.*}}) {libname = "", libpath = "", pure = true, symbol = "__nv_tanhf"}
// CHECK: "tt.extern_elementwise"(%{{.*}}) {libname = "", libpath = "", pure = true, symbol = "__nv_erff"}
// CHECK: arith.extf %{{.*}} : tensor<16xf16> to tensor<16xf32>
// CHECK: math.exp %{{.*}} : tensor<16xf32>
// CHECK: arith.truncf %{{.*}} : tensor<16xf32> to tensor<16xf16>
func.func @math(%x: tensor<16xf32>, %h: tensor<16xf16>) -> (tensor<16xf32>, tensor<16xf16>) {
  %y:2 = kg.kernel @math_0(%x, %h) attributes {block_n = 16, num_warps = 1, num_stages = 1} : (tensor<16xf32>, tensor<16xf16>) -> (tensor<16xf32>, tensor<16xf16>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf16>):
    %n = kg.neg %a : tensor<16xf32>
    %t = kg.tanh %n : tensor<16xf32>
    %g = kg.gelu %t : tensor<16xf32>
    %e = kg.exp %b : tensor<16xf16>
    kg.yield %g, %e : tensor<16xf32>, tensor<16xf16>
  }
  return %y#0, %y#1 : tensor<16xf32>, tensor<16xf16>
}
