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
  %y = kg.kernel @pointwise_0(%x, %b) attributes {config = {block_m = 4, block_n = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32> {
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
  %y = kg.kernel @row_sum_0(%x) attributes {config = {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xf32>) -> tensor<17x1xf32> {
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
  %y = kg.kernel @matmul_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 32, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x128xf32>, %w: tensor<128x64xf32>):
    %m = kg.matmul %x, %w : (tensor<64x128xf32>, tensor<128x64xf32>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// 8-bit float dots: by default the tensor cores sum one k step's products
// (64 here, at most 128) and that sum is added into the f32 accumulator
// (maxNumImpreciseAcc = the k step).
// CHECK-LABEL: func.func @fp8_precise
// CHECK: scf.for
// CHECK: "tt.dot"(%{{.*}}, %{{.*}}, %{{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 64 : i32} : (tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf32>) -> tensor<64x64xf32>
func.func @fp8_precise(%a: tensor<64x256xf8E4M3FN>, %b: tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_precise_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 3}} : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x256xf8E4M3FN>, %w: tensor<256x64xf8E4M3FN>):
    %m = kg.matmul %x, %w : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// The same dot under precision = fast_accum: the tensor cores sum the whole
// k loop themselves, nothing is promoted on the way (2^30, what Triton's own
// frontend gives 8-bit dots on sm_90); the operands and inputPrecision are
// those of the precise dot.
// CHECK-LABEL: func.func @fp8_fast_accum
// CHECK: scf.for
// CHECK: "tt.dot"(%{{.*}}, %{{.*}}, %{{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 1073741824 : i32} : (tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf32>) -> tensor<64x64xf32>
func.func @fp8_fast_accum(%a: tensor<64x256xf8E4M3FN>, %b: tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_fast_accum_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 3}} : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x256xf8E4M3FN>, %w: tensor<256x64xf8E4M3FN>):
    %m = kg.matmul %x, %w precision = fast_accum : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// fast_accum on two different 8-bit floats changes nothing: Triton has no
// dot of e4m3 by e5m2, so kg-legalize-dot casts both to f16 and drops the
// precision, and an f16 dot sums nothing outside f32 (0).
// CHECK-LABEL: func.func @fp8_mixed_fast_accum
// CHECK: "tt.dot"(%{{.*}}, %{{.*}}, %{{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 0 : i32} : (tensor<64x64xf16>, tensor<64x64xf16>, tensor<64x64xf32>) -> tensor<64x64xf32>
func.func @fp8_mixed_fast_accum(%a: tensor<64x256xf8E4M3FN>, %b: tensor<256x64xf8E5M2>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_mixed_fast_accum_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 3}} : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E5M2>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x256xf8E4M3FN>, %w: tensor<256x64xf8E5M2>):
    %m = kg.matmul %x, %w precision = fast_accum : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E5M2>) -> tensor<64x64xf32>
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
// Sine and cosine are Triton's math.sin and math.cos, on f32; a half float
// is widened first and the result rounded once.
// CHECK: math.sin %{{.*}} : tensor<16xf32>
// CHECK: arith.extf %{{.*}} : tensor<16xbf16> to tensor<16xf32>
// CHECK: math.cos %{{.*}} : tensor<16xf32>
// CHECK: arith.truncf %{{.*}} : tensor<16xf32> to tensor<16xbf16>
func.func @math(%x: tensor<16xf32>, %h: tensor<16xf16>, %w: tensor<16xbf16>) -> (tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<16xbf16>) {
  %y:4 = kg.kernel @math_0(%x, %h, %w) attributes {config = {block_n = 16, num_warps = 1, num_stages = 1}} : (tensor<16xf32>, tensor<16xf16>, tensor<16xbf16>) -> (tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<16xbf16>) {
  ^bb0(%a: tensor<16xf32>, %b: tensor<16xf16>, %c: tensor<16xbf16>):
    %n = kg.neg %a : tensor<16xf32>
    %t = kg.tanh %n : tensor<16xf32>
    %g = kg.gelu %t : tensor<16xf32>
    %e = kg.exp %b : tensor<16xf16>
    %s = kg.sin %a : tensor<16xf32>
    %c2 = kg.cos %c : tensor<16xbf16>
    kg.yield %g, %e, %s, %c2 : tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<16xbf16>
  }
  return %y#0, %y#1, %y#2, %y#3 : tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<16xbf16>
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
  %y = kg.kernel @loop_flags_0(%a, %b) attributes {config = {block_k = 64, flatten = true}} : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
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
  %y = kg.kernel @loop_stages_0(%x) attributes {config = {num_warps = 1, num_stages = 1}, grid = array<i64: 1, 1, 1>, iteration = array<i64: 4, 8>, tile = array<i64: 4, 2>} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
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
  %y = kg.kernel @grid_2d_0(%x) attributes {config = {num_warps = 1, num_stages = 1}, grid = array<i64: 2, 3, 1>, iteration = array<i64: 4, 5>, tile = array<i64: 2, 2>} : (tensor<4x5xf32>) -> tensor<4x5xf32> {
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
  %y = kg.kernel @persistent_0(%x) attributes {config = {num_warps = 1, num_stages = 1}, grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 2, 8>} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
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
  %y = kg.kernel @scalar_arguments_0(%x) attributes {config = {num_warps = 1, num_stages = 1}, grid = array<i64: 2, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 2, 8>, scalars = array<i64: 5>} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
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

// A mask bounded at run time (a dynamic extent's size, here a scalar
// argument): its lanes are compared with the bound splat across them.
// CHECK-LABEL: func.func @dynamic_mask_bound
// CHECK: ^bb0(%{{.*}}: !tt.ptr<f32>, %{{.*}}: !tt.ptr<f32>, %[[N:.*]]: i32):
// CHECK: %[[BOUND:.*]] = "tt.splat"(%[[N]]) : (i32) -> tensor<4xi32>
// CHECK-NEXT: arith.cmpi slt, %{{.*}}, %[[BOUND]] : tensor<4xi32>
func.func @dynamic_mask_bound(%x: tensor<9x8xf32>) -> tensor<9x8xf32> {
  %y = kg.kernel @dynamic_mask_bound_0(%x) attributes {config = {num_warps = 1, num_stages = 1}, grid = array<i64: 3, 1, 1>, iteration = array<i64: 9, 8>, tile = array<i64: 4, 8>, scalars = array<i64: 9>, padded} : (tensor<9x8xf32>) -> tensor<9x8xf32> {
  ^bb0(%in: memref<9x8xf32>, %out: memref<9x8xf32>):
    %c0 = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %pid = kg.program_id 0 : i32
    %rows = kg.scalar_arg 0 : i32
    %row = arith.muli %pid, %c4 : i32
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [9, 8], strides: [8, 1] : memref<9x8xf32> to memref<9x8xf32, strided<[8, 1]>>
    %m = kg.tile_mask [%row, %c0] lower [-2147483648, -2147483648] upper [2147483647, 2147483647] dynamic_upper [0](%rows) : tensor<4x8xi1>
    %v = kg.tile_load %vin[%row, %c0] mask %m padding 0.0 : memref<9x8xf32, strided<[8, 1]>> -> tensor<4x8xf32>
    %e = kg.exp %v : tensor<4x8xf32>
    kg.tile_store %e, %vout[%row, %c0] mask %m : tensor<4x8xf32>, memref<9x8xf32, strided<[8, 1]>>
    kg.yield
  }
  return %y : tensor<9x8xf32>
}

// -----

// A dynamic extent: the tt.func takes its size as one more i32 after the
// pointers, memref.dim reads it (its cast to i32 is that argument itself),
// and the launch carries the grid rule, 4 rows a program.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: kg.launch @dynamic_rows_0(%arg0) grid [64, 1, 1] num_warps 1 num_stages 1 {dynamic_grid = array<i64: 4, 1>} : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK: ^bb0(%{{.*}}: !tt.ptr<f32>, %{{.*}}: !tt.ptr<f32>, %[[N:.*]]: i32):
// CHECK-NOT: memref.dim
// CHECK: "tt.splat"(%[[N]]) : (i32) -> tensor<4xi32>
func.func @dynamic_rows(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = kg.kernel @dynamic_rows_0(%x) attributes {config = {block_m = 4, block_n = 8, num_warps = 1, num_stages = 1}, dynamic_axis = 0 : i64, dynamic_grid = array<i64: 4, 1>, grid = array<i64: 64, 1, 1>, iteration = array<i64: 256, 8>, tile = array<i64: 4, 8>} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%in: memref<?x8xf32>, %out: memref<?x8xf32>):
    %c0 = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %pid = kg.program_id 0 : i32
    %row = arith.muli %pid, %c4 : i32
    %i0 = arith.constant 0 : index
    %n = memref.dim %in, %i0 : memref<?x8xf32>
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [%n, 8], strides: [8, 1] : memref<?x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [%n, 8], strides: [8, 1] : memref<?x8xf32> to memref<?x8xf32, strided<[8, 1]>>
    %v = kg.tile_load %vin[%row, %c0] : memref<?x8xf32, strided<[8, 1]>> -> tensor<4x8xf32>
    %e = kg.exp %v : tensor<4x8xf32>
    kg.tile_store %e, %vout[%row, %c0] : tensor<4x8xf32>, memref<?x8xf32, strided<[8, 1]>>
    kg.yield
  }
  return %y : tensor<?x8xf32>
}

// -----

// A stride that depends on the size (the batch stride of a (2, ?, 8)
// buffer, size * 8): the view takes it as an operand, computed from the size
// in i32, and the batch offset of each access is multiplied by it.
// CHECK-LABEL: func.func @dynamic_batch_stride
// CHECK: ^bb0(%{{.*}}: !tt.ptr<f32>, %{{.*}}: !tt.ptr<f32>, %[[N:.*]]: i32):
// CHECK: %[[STRIDE:.*]] = arith.muli %[[N]], %{{.*}} : i32
// CHECK: %[[BATCH:.*]] = arith.remsi
// CHECK: %[[OFFSET:.*]] = arith.muli %[[BATCH]], %[[STRIDE]] : i32
// CHECK: "tt.addptr"(%arg0, %[[OFFSET]])
// CHECK: %[[OUT_OFFSET:.*]] = arith.muli %[[BATCH]], %[[STRIDE]] : i32
// CHECK: "tt.addptr"(%arg1, %[[OUT_OFFSET]])
func.func @dynamic_batch_stride(%x: tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  %y = kg.kernel @dynamic_batch_stride_0(%x) attributes {config = {block_m = 4, block_n = 8, num_warps = 1, num_stages = 1}, dynamic_axis = 1 : i64, dynamic_grid = array<i64: 4, 2>, grid = array<i64: 128, 1, 1>, iteration = array<i64: 2, 256, 8>, tile = array<i64: 1, 4, 8>, padded} : (tensor<2x?x8xf32>) -> tensor<2x?x8xf32> {
  ^bb0(%in: memref<2x?x8xf32>, %out: memref<2x?x8xf32>):
    %c0 = arith.constant 0 : i32
    %c2 = arith.constant 2 : i32
    %c4 = arith.constant 4 : i32
    %c8 = arith.constant 8 : i32
    %pid = kg.program_id 0 : i32
    %i1 = arith.constant 1 : index
    %n = memref.dim %in, %i1 : memref<2x?x8xf32>
    %n32 = arith.index_cast %n : index to i32
    %s32 = arith.muli %n32, %c8 : i32
    %s = arith.index_cast %s32 : i32 to index
    %vin = memref.reinterpret_cast %in to offset: [0], sizes: [2, %n, 8], strides: [%s, 8, 1] : memref<2x?x8xf32> to memref<2x?x8xf32, strided<[?, 8, 1]>>
    %vout = memref.reinterpret_cast %out to offset: [0], sizes: [2, %n, 8], strides: [%s, 8, 1] : memref<2x?x8xf32> to memref<2x?x8xf32, strided<[?, 8, 1]>>
    %b = arith.remsi %pid, %c2 : i32
    %t = arith.divsi %pid, %c2 : i32
    %row = arith.muli %t, %c4 : i32
    %v = kg.tile_load %vin[%b, %row, %c0] : memref<2x?x8xf32, strided<[?, 8, 1]>> -> tensor<1x4x8xf32>
    %e = kg.exp %v : tensor<1x4x8xf32>
    kg.tile_store %e, %vout[%b, %row, %c0] : tensor<1x4x8xf32>, memref<2x?x8xf32, strided<[?, 8, 1]>>
    kg.yield
  }
  return %y : tensor<2x?x8xf32>
}

// -----

// A causal mask fuses into the softmax's kernel: the two iotas become
// ranges of lanes (the row's is this program's row, block_x = 1, a splat
// of tt.get_program_id; the columns' a tt.make_range), compared with
// arith.cmpi sge, and the select is an arith.select of the loaded scores
// and -inf. One tt.func computes the masked softmax.
// CHECK-LABEL: func.func @causal_softmax
// CHECK: kg.launch @causal_softmax_0
// CHECK: module @causal_softmax_0 {
// CHECK: %[[PID:.*]] = "tt.get_program_id"() {axis = 0 : i32} : () -> i32
// CHECK: %[[COLS:.*]] = "tt.make_range"() {end = 32 : i32, start = 0 : i32} : () -> tensor<32xi32>
// CHECK: %[[ROWS:.*]] = "tt.splat"(%[[PID]]) : (i32) -> tensor<32xi32>
// CHECK: %[[KEEP:.*]] = arith.cmpi sge, %[[ROWS]], %[[COLS]] : tensor<32xi32>
// CHECK: %[[S:.*]] = "tt.load"
// CHECK: %[[NINF:.*]] = "tt.splat"(%{{.*}}) : (f32) -> tensor<32xf32>
// CHECK: arith.select %[[KEEP]], %[[S]], %[[NINF]] : tensor<32xi1>, tensor<32xf32>
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: "tt.store"
// CHECK-NOT: "tt.func"
func.func @causal_softmax(%s: tensor<17x17xf32>) -> tensor<17x17xf32> {
  %y = kg.kernel @causal_softmax_0(%s) attributes {config = {block_x = 1, block_r = 17, num_warps = 4, num_stages = 1}} : (tensor<17x17xf32>) -> tensor<17x17xf32> {
  ^bb0(%x: tensor<17x17xf32>):
    %rows = kg.iota dim 0 : tensor<17x1xi32>
    %cols = kg.iota dim 1 : tensor<1x17xi32>
    %keep = kg.cmp ge %rows, %cols : (tensor<17x1xi32>, tensor<1x17xi32>) -> tensor<17x17xi1>
    %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
    %masked = kg.select %keep, %x, %ninf : (tensor<17x17xi1>, tensor<17x17xf32>, tensor<f32>) -> tensor<17x17xf32>
    %max = kg.reduce max %masked dims [1] keepdim : tensor<17x17xf32> -> tensor<17x1xf32>
    %shifted = kg.sub %masked, %max : (tensor<17x17xf32>, tensor<17x1xf32>) -> tensor<17x17xf32>
    %e = kg.exp %shifted : tensor<17x17xf32>
    %sum = kg.reduce sum %e dims [1] keepdim : tensor<17x17xf32> -> tensor<17x1xf32>
    %p = kg.div %e, %sum : (tensor<17x17xf32>, tensor<17x1xf32>) -> tensor<17x17xf32>
    kg.yield %p : tensor<17x17xf32>
  }
  return %y : tensor<17x17xf32>
}

// -----

// Integer arithmetic takes arith's integer ops (addi, subi, muli, maxsi,
// minsi; neg is 0 - x, abs math.absi), an i64 iota is an i32 range
// extended and offset by its start, and integer casts sign-extend or
// truncate. i32 and i64 buffers are read and written as they are: only i1
// goes through bytes, so no pointer is bitcast here.
// CHECK-LABEL: func.func @integers
// CHECK: ^bb0(%{{.*}}: !tt.ptr<i32>, %{{.*}}: !tt.ptr<i32>, %{{.*}}: !tt.ptr<i64>, %{{.*}}: !tt.ptr<i32>, %{{.*}}: !tt.ptr<i64>):
// CHECK-NOT: tt.bitcast
// CHECK: "tt.load"({{.*}}) {{.*}} : (tensor<1024x!tt.ptr<i32>>, tensor<1024xi1>, tensor<1024xi32>) -> tensor<1024xi32>
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %{{.*}} : tensor<1024xi32>
// CHECK: %[[DIFF:.*]] = arith.subi %[[SUM]], %{{.*}} : tensor<1024xi32>
// CHECK: %[[PROD:.*]] = arith.muli %[[DIFF]], %{{.*}} : tensor<1024xi32>
// CHECK: %[[HI:.*]] = arith.maxsi %[[PROD]], %{{.*}} : tensor<1024xi32>
// CHECK: %[[LO:.*]] = arith.minsi %[[HI]], %{{.*}} : tensor<1024xi32>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0> : tensor<1024xi32>
// CHECK: %[[NEG:.*]] = arith.subi %[[ZERO]], %[[LO]] : tensor<1024xi32>
// CHECK: %[[ABS:.*]] = math.absi %[[NEG]] : tensor<1024xi32>
// CHECK: arith.extsi %[[ABS]] : tensor<1024xi32> to tensor<1024xi64>
// CHECK: %[[LANES:.*]] = "tt.make_range"() {end = 1024 : i32, start = 0 : i32} : () -> tensor<1024xi32>
// CHECK: %[[WIDE:.*]] = arith.extsi %[[LANES]] : tensor<1024xi32> to tensor<1024xi64>
// CHECK: arith.addi %[[WIDE]], %{{.*}} : tensor<1024xi64>
// CHECK: arith.trunci %{{.*}} : tensor<1024xi64> to tensor<1024xi32>
// CHECK: "tt.store"({{.*}}) {{.*}} : (tensor<1024x!tt.ptr<i32>>, tensor<1024xi32>, tensor<1024xi1>) -> ()
// CHECK: "tt.store"({{.*}}) {{.*}} : (tensor<1024x!tt.ptr<i64>>, tensor<1024xi64>, tensor<1024xi1>) -> ()
func.func @integers(%i: tensor<1000xi32>, %j: tensor<1000xi32>, %w: tensor<1000xi64>) -> (tensor<1000xi32>, tensor<1000xi64>) {
  %y:2 = kg.kernel @integers_0(%i, %j, %w) attributes {config = {block_m = 1, block_n = 1024, num_warps = 4, num_stages = 1}} : (tensor<1000xi32>, tensor<1000xi32>, tensor<1000xi64>) -> (tensor<1000xi32>, tensor<1000xi64>) {
  ^bb0(%a: tensor<1000xi32>, %b: tensor<1000xi32>, %c: tensor<1000xi64>):
    %s = kg.add %a, %b : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    %d = kg.sub %s, %a : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    %m = kg.mul %d, %b : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    %hi = kg.maximum %m, %a : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    %lo = kg.minimum %hi, %b : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    %n = kg.neg %lo : tensor<1000xi32>
    %abs = kg.abs %n : tensor<1000xi32>
    %pos = kg.iota dim 0 start 5 : tensor<1000xi64>
    %wide = kg.cast %abs : tensor<1000xi32> to tensor<1000xi64>
    %sum = kg.add %wide, %pos : (tensor<1000xi64>, tensor<1000xi64>) -> tensor<1000xi64>
    %t = kg.add %sum, %c : (tensor<1000xi64>, tensor<1000xi64>) -> tensor<1000xi64>
    %narrow = kg.cast %t : tensor<1000xi64> to tensor<1000xi32>
    kg.yield %narrow, %t : tensor<1000xi32>, tensor<1000xi64>
  }
  return %y#0, %y#1 : tensor<1000xi32>, tensor<1000xi64>
}

// -----

// Comparisons: floats with arith.cmpf, ordered (olt) except ne, which is
// unordered (une) so that NaN != NaN holds as in torch; i1 compares
// unsigned (ule: false < true). Logical ops are andi/ori/xori (not: xori
// with true). Casts follow torch: f16 -> i1 is x != 0 (cmpf une), i1 ->
// f32 uitofp (0 or 1), i32 -> f32 sitofp, f16 -> i32 fptosi (toward
// zero), i32 -> i1 cmpi ne 0, i1 -> i32 extui. An i1 buffer is a
// !tt.ptr<i1> argument (torch.bool, Triton's *i1) read and written as
// bytes: the pointer is bitcast to i8, a load is compared with 0, a store
// is extended to i8 first.
// CHECK-LABEL: func.func @casts_and_logic
// CHECK: ^bb0(%[[X:.*]]: !tt.ptr<f16>, %[[I:.*]]: !tt.ptr<i32>, %[[B:.*]]: !tt.ptr<i1>, %[[OB:.*]]: !tt.ptr<i1>, %{{.*}}: !tt.ptr<f32>, %{{.*}}: !tt.ptr<i32>):
// CHECK: %[[XS:.*]] = "tt.load"
// CHECK: %[[NEG:.*]] = arith.cmpf olt, %[[XS]], %{{.*}} : tensor<1024xf16>
// CHECK: "tt.bitcast"(%[[B]]) : (!tt.ptr<i1>) -> !tt.ptr<i8>
// CHECK: %[[BYTES:.*]] = "tt.load"({{.*}}) {{.*}} : (tensor<1024x!tt.ptr<i8>>, tensor<1024xi1>, tensor<1024xi8>) -> tensor<1024xi8>
// CHECK: %[[BS:.*]] = arith.cmpi ne, %[[BYTES]], %{{.*}} : tensor<1024xi8>
// CHECK: %[[AND:.*]] = arith.andi %[[NEG]], %[[BS]] : tensor<1024xi1>
// CHECK: %[[NAN:.*]] = arith.cmpf une, %[[XS]], %[[XS]] : tensor<1024xf16>
// CHECK: %[[OR:.*]] = arith.ori %[[AND]], %[[NAN]] : tensor<1024xi1>
// CHECK: %[[LE:.*]] = arith.cmpi ule, %[[BS]], %[[NEG]] : tensor<1024xi1>
// CHECK: %[[XOR:.*]] = arith.xori %[[OR]], %[[LE]] : tensor<1024xi1>
// CHECK: %[[TRUE:.*]] = arith.constant dense<true> : tensor<1024xi1>
// CHECK: %[[NOT:.*]] = arith.xori %[[XOR]], %[[TRUE]] : tensor<1024xi1>
// CHECK: %[[NZ:.*]] = arith.cmpf une, %[[XS]], %{{.*}} : tensor<1024xf16>
// CHECK: %[[BOTH:.*]] = arith.andi %[[NOT]], %[[NZ]] : tensor<1024xi1>
// CHECK: "tt.bitcast"(%[[OB]]) : (!tt.ptr<i1>) -> !tt.ptr<i8>
// CHECK: %[[STORED:.*]] = arith.extui %[[BOTH]] : tensor<1024xi1> to tensor<1024xi8>
// CHECK: "tt.store"(%{{.*}}, %[[STORED]], %{{.*}}) {{.*}} : (tensor<1024x!tt.ptr<i8>>, tensor<1024xi8>, tensor<1024xi1>) -> ()
// CHECK: arith.uitofp %[[BOTH]] : tensor<1024xi1> to tensor<1024xf32>
// CHECK: %[[IS:.*]] = "tt.load"({{.*}}) {{.*}} -> tensor<1024xi32>
// CHECK: arith.sitofp %[[IS]] : tensor<1024xi32> to tensor<1024xf32>
// CHECK: arith.fptosi %[[XS]] : tensor<1024xf16> to tensor<1024xi32>
// CHECK: %[[IB:.*]] = arith.cmpi ne, %[[IS]], %{{.*}} : tensor<1024xi32>
// CHECK: arith.extui %[[IB]] : tensor<1024xi1> to tensor<1024xi32>
func.func @casts_and_logic(%x: tensor<1000xf16>, %i: tensor<1000xi32>, %b: tensor<1000xi1>) -> (tensor<1000xi1>, tensor<1000xf32>, tensor<1000xi32>) {
  %y:3 = kg.kernel @casts_and_logic_0(%x, %i, %b) attributes {config = {block_m = 1, block_n = 1024, num_warps = 4, num_stages = 1}} : (tensor<1000xf16>, tensor<1000xi32>, tensor<1000xi1>) -> (tensor<1000xi1>, tensor<1000xf32>, tensor<1000xi32>) {
  ^bb0(%xs: tensor<1000xf16>, %is: tensor<1000xi32>, %bs: tensor<1000xi1>):
    %zero = kg.constant 0.0 : tensor<f16>
    %neg = kg.cmp lt %xs, %zero : (tensor<1000xf16>, tensor<f16>) -> tensor<1000xi1>
    %nan = kg.cmp ne %xs, %xs : (tensor<1000xf16>, tensor<1000xf16>) -> tensor<1000xi1>
    %le = kg.cmp le %bs, %neg : (tensor<1000xi1>, tensor<1000xi1>) -> tensor<1000xi1>
    %and = kg.logical_and %neg, %bs : (tensor<1000xi1>, tensor<1000xi1>) -> tensor<1000xi1>
    %or = kg.logical_or %and, %nan : (tensor<1000xi1>, tensor<1000xi1>) -> tensor<1000xi1>
    %xor = kg.logical_xor %or, %le : (tensor<1000xi1>, tensor<1000xi1>) -> tensor<1000xi1>
    %not = kg.logical_not %xor : tensor<1000xi1>
    %nz = kg.cast %xs : tensor<1000xf16> to tensor<1000xi1>
    %both = kg.logical_and %not, %nz : (tensor<1000xi1>, tensor<1000xi1>) -> tensor<1000xi1>
    %f = kg.cast %both : tensor<1000xi1> to tensor<1000xf32>
    %fi = kg.cast %is : tensor<1000xi32> to tensor<1000xf32>
    %sum = kg.add %f, %fi : (tensor<1000xf32>, tensor<1000xf32>) -> tensor<1000xf32>
    %trunc = kg.cast %xs : tensor<1000xf16> to tensor<1000xi32>
    %ib = kg.cast %is : tensor<1000xi32> to tensor<1000xi1>
    %one = kg.cast %ib : tensor<1000xi1> to tensor<1000xi32>
    %r = kg.add %trunc, %one : (tensor<1000xi32>, tensor<1000xi32>) -> tensor<1000xi32>
    kg.yield %both, %sum, %r : tensor<1000xi1>, tensor<1000xf32>, tensor<1000xi32>
  }
  return %y#0, %y#1, %y#2 : tensor<1000xi1>, tensor<1000xf32>, tensor<1000xi32>
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
  %o = kg.kernel @attention_rows_0(%k, %q, %v) attributes {config = {block_m = 3, block_n = 32, split_kv = 1, num_warps = 4, num_stages = 2}} : (tensor<2x100x64xf16>, tensor<2x3x64xf16>, tensor<2x100x64xf16>) -> tensor<2x3x64xf16> {
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
