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

// -----

// Triton's loop attributes on a kernel's loops reach the TTIR scf.for: a
// matmul config's flatten goes on its k loop (warp_specialize too, from
// sm_100 on: kg-legalize-dot.mlir); kg.axis, kg's own, stays behind.
// CHECK-LABEL: func.func @loop_flags
// CHECK: module @loop_flags_0
// CHECK: scf.for
// CHECK: "tt.dot"
// CHECK: scf.yield
// CHECK-NEXT: } {tt.flatten}
func.func @loop_flags(%a: tensor<64x256xf16>, %b: tensor<256x64xf16>) -> tensor<64x64xf16> {
  %y = kg.kernel @loop_flags_0(%a, %b) attributes {block_k = 64, flatten = true} : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x256xf16>, %w: tensor<256x64xf16>):
    %m = kg.matmul %x, %w : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16>
    kg.yield %m : tensor<64x64xf16>
  }
  return %y : tensor<64x64xf16>
}

// -----

// A tile program written by hand: a loop with its own pipeline depth
// (tt.num_stages) keeps it in TTIR.
// CHECK-LABEL: func.func @loop_stages
// CHECK: scf.for
// CHECK: "tt.load"
// CHECK: "tt.store"
// CHECK: } {tt.num_stages = 2 : i32}
func.func @loop_stages(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = kg.kernel @loop_stages_0(%x) attributes {grid = array<i64: 1, 1, 1>, iteration = array<i64: 4, 8>, tile = array<i64: 4, 2>, num_warps = 1, num_stages = 1} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%in: memref<4x8xf32>, %out: memref<4x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %c8 = arith.constant 8 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [4, 8], strides: [8, 1] : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [4, 8], strides: [8, 1] : memref<4x8xf32> to memref<4x8xf32, strided<[8, 1]>>
    scf.for %j = %c0 to %c8 step %c2 : i32 {
      %t = kg.tile_load %vin[%c0, %j] : memref<4x8xf32, strided<[8, 1]>> -> tensor<4x2xf32>
      %e = kg.exp %t : tensor<4x2xf32>
      kg.tile_store %e, %vout[%c0, %j] : tensor<4x2xf32>, memref<4x8xf32, strided<[8, 1]>>
    } {tt.num_stages = 2 : i32}
    kg.yield
  }
  return %y : tensor<4x8xf32>
}

// -----

// A two-dimensional grid: kg.program_id 1 is grid y, bounded by the grid's
// second count (3 here, so columns reach 4 + 2 > 5 and the accesses along
// them are masked; rows, bounded by 2 programs along x, are not).
// CHECK-LABEL: func.func @grid_2d
// CHECK: kg.launch @grid_2d_0(%{{.*}}) grid [2, 3, 1]
// CHECK: "tt.get_program_id"() {axis = 0 : i32} : () -> i32
// CHECK: "tt.get_program_id"() {axis = 1 : i32} : () -> i32
// CHECK: "tt.load"({{.*}}) {{.*}} : (tensor<2x2x!tt.ptr<f32>>, tensor<2x2xi1>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: "tt.store"({{.*}}) {{.*}} : (tensor<2x2x!tt.ptr<f32>>, tensor<2x2xf32>, tensor<2x2xi1>) -> ()
func.func @grid_2d(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
  %y = kg.kernel @grid_2d_0(%x) attributes {grid = array<i64: 2, 3, 1>, iteration = array<i64: 4, 5>, tile = array<i64: 2, 2>, num_warps = 1, num_stages = 1} : (tensor<4x5xf32>) -> tensor<4x5xf32> {
  ^bb0(%in: memref<4x5xf32>, %out: memref<4x5xf32>):
    %c2 = arith.constant 2 : i32
    %px = kg.program_id 0 : i32
    %py = kg.program_id 1 : i32
    %row = arith.muli %px, %c2 : i32
    %col = arith.muli %py, %c2 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [4, 5], strides: [5, 1] : memref<4x5xf32> to memref<4x5xf32, strided<[5, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [4, 5], strides: [5, 1] : memref<4x5xf32> to memref<4x5xf32, strided<[5, 1]>>
    %t = kg.tile_load %vin[%row, %col] : memref<4x5xf32, strided<[5, 1]>> -> tensor<2x2xf32>
    %e = kg.exp %t : tensor<2x2xf32>
    kg.tile_store %e, %vout[%row, %col] : tensor<2x2xf32>, memref<4x5xf32, strided<[5, 1]>>
    kg.yield
  }
  return %y : tensor<4x5xf32>
}

// -----

// A persistent program, written by hand: 2 programs walk the 5 row tiles
// of 2 rows from their program id in steps of 2. The loop variable stays
// below 5 (rows up to 8 + 2 > 9: masked), and the TTIR loop starts at
// tt.get_program_id.
// CHECK-LABEL: func.func @persistent
// CHECK: kg.launch @persistent_0(%{{.*}}) grid [2, 1, 1]
// CHECK: %[[PID:.*]] = "tt.get_program_id"() {axis = 0 : i32} : () -> i32
// CHECK: scf.for %{{.*}} = %[[PID]] to %{{.*}} step %{{.*}} : i32 {
// CHECK: "tt.load"({{.*}}) {{.*}} : (tensor<2x8x!tt.ptr<f32>>, tensor<2x8xi1>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: "tt.store"({{.*}}) {{.*}} : (tensor<2x8x!tt.ptr<f32>>, tensor<2x8xf32>, tensor<2x8xi1>) -> ()
func.func @persistent(%x: tensor<9x8xf32>) -> tensor<9x8xf32> {
  %y = kg.kernel @persistent_0(%x) attributes {grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 2, 8>, num_warps = 1, num_stages = 1} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<9x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %c5 = arith.constant 5 : i32
    %pid = kg.program_id 0 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    scf.for %t = %pid to %c5 step %c2 : i32 {
      %row = arith.muli %t, %c2 : i32
      %v = kg.tile_load %vin[%row, %c0] : memref<9x8xf32, strided<[8, 1]>> -> tensor<2x8xf32>
      %e = kg.exp %v : tensor<2x8xf32>
      kg.tile_store %e, %vout[%row, %c0] : tensor<2x8xf32>, memref<9x8xf32, strided<[8, 1]>>
    }
    kg.yield
  }
  return %y : tensor<9x8xf32>
}

// -----

// Scalar arguments: the kernel's `scalars` become i32 arguments of the
// tt.func after the pointers, passed by the launch; kg.scalar_arg reads
// them. Here the number of row tiles comes at launch, so the loop's end is
// unknown and the accesses are masked on both sides.
// CHECK-LABEL: func.func @scalar_arguments
// CHECK: kg.launch @scalar_arguments_0(%{{.*}}) grid [2, 1, 1] num_warps 1 num_stages 1 {scalars = array<i64: 5>}
// CHECK: ^bb0(%{{.*}}: !tt.ptr<f32>, %{{.*}}: !tt.ptr<f32>, %[[N:.*]]: i32):
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} : i32 {
// CHECK: arith.cmpi sge
// CHECK: arith.cmpi slt
// CHECK: arg_attrs = [{tt.divisibility = 16 : i32}, {tt.divisibility = 16 : i32}, {}], function_type = (!tt.ptr<f32>, !tt.ptr<f32>, i32) -> ()
func.func @scalar_arguments(%x: tensor<9x8xf32>) -> tensor<9x8xf32> {
  %y = kg.kernel @scalar_arguments_0(%x) attributes {grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 2, 8>, num_warps = 1, num_stages = 1, scalars = array<i64: 5>} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<9x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %pid = kg.program_id 0 : i32
    %tiles = kg.scalar_arg 0 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    scf.for %t = %pid to %tiles step %c2 : i32 {
      %row = arith.muli %t, %c2 : i32
      %v = kg.tile_load %vin[%row, %c0] : memref<9x8xf32, strided<[8, 1]>> -> tensor<2x8xf32>
      %e = kg.exp %v : tensor<2x8xf32>
      kg.tile_store %e, %vout[%row, %c0] : tensor<2x8xf32>, memref<9x8xf32, strided<[8, 1]>>
    }
    kg.yield
  }
  return %y : tensor<9x8xf32>
}

// -----

// A dot whose dims name its axes out of order: Q K^T's b (K) spans keys
// (axis 2) before the head dimension (axis 3), its contracted axis, so its
// lanes are [keys, head dim] and tt.dot takes their transpose; P V's axes
// are in order and go to tt.dot as they are.
// CHECK-LABEL: module @attention_rows_0
// CHECK: scf.for
// CHECK: %[[KT:.*]] = "tt.trans"(%{{.*}}) {order = array<i32: 1, 0>} : (tensor<32x64xf16>) -> tensor<64x32xf16>
// CHECK-NEXT: "tt.dot"(%{{.*}}, %[[KT]], %{{.*}}) {{.*}} : (tensor<16x64xf16>, tensor<64x32xf16>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NOT: tt.trans
// CHECK: "tt.dot"(%{{.*}}, %{{.*}}, %{{.*}}) {{.*}} : (tensor<16x32xf16>, tensor<32x64xf16>, tensor<16x64xf32>) -> tensor<16x64xf32>
func.func @attention_rows(%q: tensor<2x3x64xf16>, %k: tensor<2x100x64xf16>, %v: tensor<2x100x64xf16>) -> tensor<2x3x64xf16> {
  %o = kg.kernel @attention_rows_0(%k, %q, %v) attributes {block_m = 3, block_n = 32, split_kv = 1, num_warps = 4, num_stages = 2} : (tensor<2x100x64xf16>, tensor<2x3x64xf16>, tensor<2x100x64xf16>) -> tensor<2x3x64xf16> {
  ^bb0(%a: tensor<2x100x64xf16>, %b: tensor<2x3x64xf16>, %c: tensor<2x100x64xf16>):
    %kt = kg.transpose %a [0, 2, 1] : tensor<2x100x64xf16> -> tensor<2x64x100xf16>
    %s = kg.matmul %b, %kt : (tensor<2x3x64xf16>, tensor<2x64x100xf16>) -> tensor<2x3x100xf16>
    %x = kg.cast %s {kg.promotion} : tensor<2x3x100xf16> to tensor<2x3x100xf32>
    %m = kg.reduce max %x dims [2] keepdim : tensor<2x3x100xf32> -> tensor<2x3x1xf32>
    %d = kg.sub %x, %m : (tensor<2x3x100xf32>, tensor<2x3x1xf32>) -> tensor<2x3x100xf32>
    %e = kg.exp %d : tensor<2x3x100xf32>
    %z = kg.reduce sum %e dims [2] keepdim : tensor<2x3x100xf32> -> tensor<2x3x1xf32>
    %p = kg.div %e, %z : (tensor<2x3x100xf32>, tensor<2x3x1xf32>) -> tensor<2x3x100xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<2x3x100xf32> to tensor<2x3x100xf16>
    %out = kg.matmul %ph, %c : (tensor<2x3x100xf16>, tensor<2x100x64xf16>) -> tensor<2x3x64xf16>
    kg.yield %out : tensor<2x3x64xf16>
  }
  return %o : tensor<2x3x64xf16>
}
