// The tile programs come from kg-tile, from the tile knobs each kernel
// carries (so a change of kg-tile's heuristics, which
// tests/test_tile_heuristics.py pins, cannot change them); these checks are
// about what kg-pad-mask makes of them. The last case fails on purpose, hence `not`.
// RUN: not kgc-opt %s --split-input-file --kg-tile --kg-pad-mask 2>/dev/null | FileCheck %s
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-pad-mask --verify-diagnostics --mlir-disable-verifier > /dev/null

// A row of 1000 is one tile of 1024 lanes: every tile type is padded, the
// load and the store are masked at the end of the buffer, the load gives
// its padding lanes -inf (neutral for the max it feeds), and the sum gets
// zeros selected into the padding lanes, since exp(x - max) is not 0 there.
// CHECK-LABEL: func.func @softmax
// CHECK: padded
// CHECK: %[[M:.*]] = kg.tile_mask [%[[ROW:.*]], %{{.*}}] lower [-2147483648, -2147483648] upper [17, 1000] : tensor<4x1024xi1>
// CHECK: %[[X:.*]] = kg.tile_load %{{.*}}[%[[ROW]], %{{.*}}] mask %[[M]] padding 0xFFF0000000000000 : memref<17x1000xf32, strided<[1000, 1]>> -> tensor<4x1024xf32>
// CHECK: kg.reduce max %[[X]] dims [1] keepdim : tensor<4x1024xf32> -> tensor<4x1xf32>
// CHECK: %[[E:.*]] = kg.exp %{{.*}} : tensor<4x1024xf32>
// CHECK: %[[VALID:.*]] = kg.tile_mask [%{{.*}}, %{{.*}}] lower [-2147483648, -2147483648] upper [2147483647, 1000] : tensor<1x1024xi1>
// CHECK: %[[ZERO:.*]] = kg.constant 0.000000e+00 : tensor<1x1xf32>
// CHECK: %[[SAFE:.*]] = kg.tile_select %[[VALID]], %[[E]], %[[ZERO]]
// CHECK: kg.reduce sum %[[SAFE]] dims [1] keepdim
// CHECK: kg.tile_store %{{.*}}, %{{.*}}[%[[ROW]], %{{.*}}] mask %{{.*}} : tensor<4x1024xf32>
func.func @softmax(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @softmax_0(%x) attributes {config = {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %m = kg.reduce max %a dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    %d = kg.sub %a, %m : (tensor<17x1000xf32>, tensor<17x1xf32>) -> tensor<17x1000xf32>
    %e = kg.exp %d : tensor<17x1000xf32>
    %s = kg.reduce sum %e dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    %r = kg.div %e, %s : (tensor<17x1000xf32>, tensor<17x1xf32>) -> tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A dynamic extent: every access along it is bounded by the size the view
// holds (its dynamic upper bound), since no tile count proves it inside.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[NI:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK: %[[M:.*]] = kg.tile_mask [%{{.*}}, %{{.*}}] lower [-2147483648, -2147483648] upper [2147483647, 2147483647] dynamic_upper [0](%[[NI]]) : tensor<4x1024xi1>
// CHECK: kg.tile_load %{{.*}}[%{{.*}}, %{{.*}}] mask %[[M]] padding 0.000000e+00
// CHECK: kg.tile_mask {{.*}} dynamic_upper [0]
// CHECK: kg.tile_store
func.func @dynamic_rows(%x: tensor<?x1024xf32>) -> tensor<?x1024xf32> {
  %y = kg.kernel @dynamic_rows_0(%x) : (tensor<?x1024xf32>) -> tensor<?x1024xf32> {
  ^bb0(%a: tensor<?x1024xf32>):
    %e = kg.exp %a : tensor<?x1024xf32>
    kg.yield %e : tensor<?x1024xf32>
  }
  return %y : tensor<?x1024xf32>
}

// -----

// Attention over a dynamic key count: the reductions over the keys (the
// running max and sum) and P V's dot along them are guarded by the size
// itself, read from the first buffer that has it, since the key loop's
// bounds are known at run time only.
// CHECK-LABEL: func.func @decode_dynamic_keys
// CHECK: %[[DIM:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<1x2x?x64xf16>
// CHECK: %[[SIZE:.*]] = arith.index_cast %[[DIM]] : index to i32
// CHECK: scf.for
// CHECK: %[[MAX_MASK:.*]] = kg.tile_mask {{.*}} dynamic_upper [4](%[[SIZE]]) : tensor<1x1x1x1x64x1x1xi1>
// CHECK: %[[GUARDED:.*]] = kg.tile_select %[[MAX_MASK]]
// CHECK: kg.reduce max %[[GUARDED]] dims [4]
// CHECK: %[[SUM_MASK:.*]] = kg.tile_mask {{.*}} dynamic_upper [4](%[[SIZE]])
// CHECK: %[[TERMS:.*]] = kg.tile_select %[[SUM_MASK]]
// CHECK: kg.reduce sum %[[TERMS]] dims [4]
// CHECK: %[[P_MASK:.*]] = kg.tile_mask {{.*}} dynamic_upper [4](%[[SIZE]])
// CHECK: %[[P:.*]] = kg.tile_select %[[P_MASK]]
// CHECK: kg.tile_dot %[[P]]
func.func @decode_dynamic_keys(%q: tensor<1x2x1x64xf16>, %k: tensor<1x2x?x64xf16>, %v: tensor<1x2x?x64xf16>, %mask: tensor<1x1x1x?xf16>) -> tensor<1x2x1x64xf16> {
  %o = kg.kernel @decode_dynamic_keys_0(%k, %q, %mask, %v) attributes {config = {block_n = 64 : i64, split_kv = 4 : i64}} : (tensor<1x2x?x64xf16>, tensor<1x2x1x64xf16>, tensor<1x1x1x?xf16>, tensor<1x2x?x64xf16>) -> tensor<1x2x1x64xf16> {
  ^bb0(%kb: tensor<1x2x?x64xf16>, %qb: tensor<1x2x1x64xf16>, %mb: tensor<1x1x1x?xf16>, %vb: tensor<1x2x?x64xf16>):
    %kt = kg.transpose %kb [0, 1, 3, 2] : tensor<1x2x?x64xf16> -> tensor<1x2x64x?xf16>
    %s = kg.matmul %qb, %kt : (tensor<1x2x1x64xf16>, tensor<1x2x64x?xf16>) -> tensor<1x2x1x?xf16>
    %sf = kg.cast %s : tensor<1x2x1x?xf16> to tensor<1x2x1x?xf32>
    %mf = kg.cast %mb : tensor<1x1x1x?xf16> to tensor<1x1x1x?xf32>
    %x = kg.add %sf, %mf : (tensor<1x2x1x?xf32>, tensor<1x1x1x?xf32>) -> tensor<1x2x1x?xf32>
    %top = kg.reduce max %x dims [3] keepdim : tensor<1x2x1x?xf32> -> tensor<1x2x1x1xf32>
    %d = kg.sub %x, %top : (tensor<1x2x1x?xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x1x?xf32>
    %e = kg.exp %d : tensor<1x2x1x?xf32>
    %sum = kg.reduce sum %e dims [3] keepdim : tensor<1x2x1x?xf32> -> tensor<1x2x1x1xf32>
    %p = kg.div %e, %sum : (tensor<1x2x1x?xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x1x?xf32>
    %ph = kg.cast %p : tensor<1x2x1x?xf32> to tensor<1x2x1x?xf16>
    %y = kg.matmul %ph, %vb : (tensor<1x2x1x?xf16>, tensor<1x2x?x64xf16>) -> tensor<1x2x1x64xf16>
    kg.yield %y : tensor<1x2x1x64xf16>
  }
  return %o : tensor<1x2x1x64xf16>
}

// -----

// Tiles of powers of two that divide their axes: every lane of every
// access is inside the buffer, so nothing is masked.
// CHECK-LABEL: func.func @exact_tiles
// CHECK-NOT: kg.tile_mask
// CHECK-NOT: mask
// CHECK: kg.tile_load %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x1024xf32, strided<[1024, 1]>> -> tensor<4x1024xf32>
// CHECK: kg.tile_store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : tensor<4x1024xf32>
func.func @exact_tiles(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %y = kg.kernel @exact_0(%x) attributes {config = {block_m = 4, block_n = 1024, num_warps = 8, num_stages = 1}} : (tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  ^bb0(%a: tensor<64x1024xf32>):
    %r = kg.exp %a : tensor<64x1024xf32>
    kg.yield %r : tensor<64x1024xf32>
  }
  return %y : tensor<64x1024xf32>
}

// -----

// In a loop, the last step's tile runs past the end of the row: the max
// loop's load pads with -inf, which its accumulation keeps neutral; the sum
// loop selects zeros into the lanes past the end before accumulating.
// CHECK-LABEL: func.func @looped
// CHECK: scf.for %[[I:[a-z0-9_]+]] = {{.*}} -> (tensor<1x256xf32>)
// CHECK: kg.tile_load %{{.*}}[%{{.*}}, %[[I]]] mask %{{.*}} padding 0xFFF0000000000000
// CHECK-NOT: kg.tile_select
// CHECK: kg.maximum
// CHECK: scf.for %[[J:[a-z0-9_]+]] = {{.*}} -> (tensor<1x256xf32>)
// CHECK: %[[E:.*]] = kg.exp
// CHECK: %[[VALID:.*]] = kg.tile_mask [%{{.*}}, %[[J]]] lower [-2147483648, -2147483648] upper [2147483647, 1000]
// CHECK: %[[SAFE:.*]] = kg.tile_select %[[VALID]], %[[E]], %{{.*}}
// CHECK: kg.add %{{.*}}, %[[SAFE]]
func.func @looped(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @softmax_0(%x) attributes {config = {block_x = 1, block_r = 256, num_warps = 1, num_stages = 2}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %m = kg.reduce max %a dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    %d = kg.sub %a, %m : (tensor<17x1000xf32>, tensor<17x1xf32>) -> tensor<17x1000xf32>
    %e = kg.exp %d : tensor<17x1000xf32>
    %s = kg.reduce sum %e dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    %r = kg.div %e, %s : (tensor<17x1000xf32>, tensor<17x1xf32>) -> tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// K = 100 in steps of 64: the operands of the dot are padded with 0 past
// the end of K, which keeps the dot exact without any select.
// CHECK-LABEL: func.func @partial_k
// CHECK: kg.tile_mask {{.*}} upper [33, 100, 2147483647]
// CHECK: kg.tile_load {{.*}} padding 0.000000e+00 : memref<33x100x1xf16, strided<[100, 1, 0]>> -> tensor<64x64x1xf16>
// CHECK: kg.tile_load {{.*}} padding 0.000000e+00 : memref<1x100x40xf16, strided<[0, 40, 1]>> -> tensor<1x64x64xf16>
// CHECK-NOT: kg.tile_select
// CHECK: kg.tile_dot
func.func @partial_k(%a: tensor<33x100xf16>, %b: tensor<100x40xf16>) -> tensor<33x40xf16> {
  %y = kg.kernel @mm_0(%a, %b) attributes {config = {block_m = 33, block_n = 40, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<33x100xf16>, tensor<100x40xf16>) -> tensor<33x40xf16> {
  ^bb0(%x: tensor<33x100xf16>, %w: tensor<100x40xf16>):
    %m = kg.matmul %x, %w : (tensor<33x100xf16>, tensor<100x40xf16>) -> tensor<33x40xf16>
    kg.yield %m : tensor<33x40xf16>
  }
  return %y : tensor<33x40xf16>
}

// -----

// A concat reads its second input at offsets shifted by -3: the mask checks
// the lower end of that buffer too.
// CHECK-LABEL: func.func @concat
// CHECK: %[[SHIFTED:.*]] = arith.subi
// CHECK: kg.tile_mask [%{{.*}}, %[[SHIFTED]]] lower [-2147483648, 0] upper [17, 100] : tensor<32x128xi1>
func.func @concat(%a: tensor<17x3xf32>, %b: tensor<17x100xf32>) -> tensor<17x103xf32> {
  %y = kg.kernel @concat_0(%a, %b) attributes {config = {block_m = 17, block_n = 103, num_warps = 8, num_stages = 1}} : (tensor<17x3xf32>, tensor<17x100xf32>) -> tensor<17x103xf32> {
  ^bb0(%x: tensor<17x3xf32>, %z: tensor<17x100xf32>):
    %c = kg.concat %x, %z dim 1 : (tensor<17x3xf32>, tensor<17x100xf32>) -> tensor<17x103xf32>
    kg.yield %c : tensor<17x103xf32>
  }
  return %y : tensor<17x103xf32>
}

// -----

// A kernel marked padded was padded already: left alone, so the pass can
// run twice.
// CHECK-LABEL: func.func @padded_before
// CHECK: kg.tile_load %{{.*}}[%{{.*}}] : memref<3xf32> -> tensor<4xf32>
func.func @padded_before(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = kg.kernel @done_0(%x) attributes {grid = array<i64: 1, 1, 1>, iteration = array<i64: 3>, padded, tile = array<i64: 3>} : (tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: memref<3xf32>, %out: memref<3xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.tile_load %a[%c0] : memref<3xf32> -> tensor<4xf32>
    kg.yield
  }
  return %y : tensor<3xf32>
}

// -----

// A program id is bounded by the program count of its own grid axis: five
// programs along axis 1, of 4 rows each, run past row 17, so the accesses
// are masked (the count along axis 0, 1, would prove them inside).
// CHECK-LABEL: func.func @second_grid_axis
// CHECK: %[[ROW:.*]] = arith.muli
// CHECK: %[[M:.*]] = kg.tile_mask [%[[ROW]]] lower [-2147483648] upper [17] : tensor<4xi1>
// CHECK: kg.tile_load %{{.*}}[%[[ROW]]] mask %[[M]] padding 0.000000e+00
// CHECK: kg.tile_store %{{.*}}, %{{.*}}[%[[ROW]]] mask %{{.*}} : tensor<4xf32>
func.func @second_grid_axis(%x: tensor<17xf32>) -> tensor<17xf32> {
  %y = kg.kernel @rows_0(%x) attributes {grid = array<i64: 1, 5, 1>, iteration = array<i64: 17>, tile = array<i64: 4>} : (tensor<17xf32>) -> tensor<17xf32> {
  ^bb0(%a: memref<17xf32>, %out: memref<17xf32>):
    %pid = kg.program_id 1 : i32
    %c4 = arith.constant 4 : i32
    %row = arith.muli %pid, %c4 : i32
    %t = kg.tile_load %a[%row] : memref<17xf32> -> tensor<4xf32>
    kg.tile_store %t, %out[%row] : tensor<4xf32>, memref<17xf32>
    kg.yield
  }
  return %y : tensor<17xf32>
}

// -----

// A boolean mask is loaded with the padding its lanes can hold: the max
// it feeds wants -inf, which no i1 holds, so the mask pads false (0). The
// select then picks -inf in the padding lanes, the neutral of the max, so
// no select is added before the reduction.
// CHECK-LABEL: func.func @masked_max
// CHECK: %[[K:.*]] = kg.tile_load %{{.*}} mask %{{.*}} padding 0.000000e+00 : memref<17x1000xi1, strided<[1000, 1]>> -> tensor<4x1024xi1>
// CHECK: %[[X:.*]] = kg.tile_load %{{.*}} mask %{{.*}} padding 0xFFF0000000000000 : memref<17x1000xf32, strided<[1000, 1]>> -> tensor<4x1024xf32>
// CHECK: %[[M:.*]] = kg.select %[[K]], %[[X]], %{{.*}}
// CHECK-NOT: kg.tile_select
// CHECK: kg.reduce max %[[M]] dims [1]
func.func @masked_max(%x: tensor<17x1000xf32>, %keep: tensor<17x1000xi1>) -> tensor<17x1xf32> {
  %y = kg.kernel @masked_max_0(%x, %keep) attributes {config = {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xf32>, tensor<17x1000xi1>) -> tensor<17x1xf32> {
  ^bb0(%a: tensor<17x1000xf32>, %k: tensor<17x1000xi1>):
    %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
    %m = kg.select %k, %a, %ninf : (tensor<17x1000xi1>, tensor<17x1000xf32>, tensor<f32>) -> tensor<17x1000xf32>
    %r = kg.reduce max %m dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    kg.yield %r : tensor<17x1xf32>
  }
  return %y : tensor<17x1xf32>
}

// -----

// Integers hold whole numbers only: an i32 load whose values reach a max
// (through a cast) pads with 0, not -inf, and the max gets -inf selected
// into its lanes past the end of the row.
// CHECK-LABEL: func.func @integer_max
// CHECK: %[[I:.*]] = kg.tile_load %{{.*}} mask %{{.*}} padding 0.000000e+00 : memref<17x1000xi32, strided<[1000, 1]>> -> tensor<4x1024xi32>
// CHECK: %[[F:.*]] = kg.cast %[[I]] : tensor<4x1024xi32> to tensor<4x1024xf32>
// CHECK: %[[NINF:.*]] = kg.constant 0xFFF0000000000000 : tensor<1x1xf32>
// CHECK: %[[SAFE:.*]] = kg.tile_select %{{.*}}, %[[F]], %[[NINF]]
// CHECK: kg.reduce max %[[SAFE]] dims [1]
func.func @integer_max(%i: tensor<17x1000xi32>) -> tensor<17x1xf32> {
  %y = kg.kernel @integer_max_0(%i) attributes {config = {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xi32>) -> tensor<17x1xf32> {
  ^bb0(%a: tensor<17x1000xi32>):
    %f = kg.cast %a : tensor<17x1000xi32> to tensor<17x1000xf32>
    %r = kg.reduce max %f dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    kg.yield %r : tensor<17x1xf32>
  }
  return %y : tensor<17x1xf32>
}

// -----

// The padding 0 of an i32 load survives its cast to f32 as 0.0, the
// neutral of a sum: nothing is selected before the reduction.
// CHECK-LABEL: func.func @integer_sum
// CHECK: %[[I:.*]] = kg.tile_load %{{.*}} mask %{{.*}} padding 0.000000e+00 : memref<17x1000xi32, strided<[1000, 1]>> -> tensor<4x1024xi32>
// CHECK: %[[F:.*]] = kg.cast %[[I]]
// CHECK-NOT: kg.tile_select
// CHECK: kg.reduce sum %[[F]] dims [1]
func.func @integer_sum(%i: tensor<17x1000xi32>) -> tensor<17x1xf32> {
  %y = kg.kernel @integer_sum_0(%i) attributes {config = {block_x = 4, block_r = 1000, num_warps = 8, num_stages = 1}} : (tensor<17x1000xi32>) -> tensor<17x1xf32> {
  ^bb0(%a: tensor<17x1000xi32>):
    %f = kg.cast %a : tensor<17x1000xi32> to tensor<17x1000xf32>
    %r = kg.reduce sum %f dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    kg.yield %r : tensor<17x1xf32>
  }
  return %y : tensor<17x1xf32>
}

// -----

// A dot's 8-bit float operands whose padding is not 0 (exp(0) is 1) get
// zeros selected into their lanes past the end of K; kg.constant has no
// 8-bit float type, so the zero is an f32 constant cast to the operand's.
// CHECK-LABEL: func.func @fp8_fill
// CHECK: %[[Z:.*]] = kg.constant 0.000000e+00 : tensor<1x1x1xf32>
// CHECK: %[[Q:.*]] = kg.cast %[[Z]] : tensor<1x1x1xf32> to tensor<1x1x1xf8E4M3FN>
// CHECK: %[[A:.*]] = kg.tile_select %{{.*}}, %{{.*}}, %[[Q]] : (tensor<1x64x1xi1>, tensor<16x64x1xf8E4M3FN>, tensor<1x1x1xf8E4M3FN>) -> tensor<16x64x1xf8E4M3FN>
// CHECK: kg.tile_select
// CHECK: kg.tile_dot %[[A]]
func.func @fp8_fill(%x: tensor<16x100xf32>, %w: tensor<100x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @fp8_fill_0(%x, %w) attributes {config = {block_m = 16, block_n = 16, block_k = 64, group_m = 1, num_warps = 4, num_stages = 1}} : (tensor<16x100xf32>, tensor<100x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%a: tensor<16x100xf32>, %b: tensor<100x16xf32>):
    %ea = kg.exp %a : tensor<16x100xf32>
    %qa = kg.cast %ea : tensor<16x100xf32> to tensor<16x100xf8E4M3FN>
    %eb = kg.exp %b : tensor<100x16xf32>
    %qb = kg.cast %eb : tensor<100x16xf32> to tensor<100x16xf8E4M3FN>
    %m = kg.matmul %qa, %qb : (tensor<16x100xf8E4M3FN>, tensor<100x16xf8E4M3FN>) -> tensor<16x16xf32>
    kg.yield %m : tensor<16x16xf32>
  }
  return %y : tensor<16x16xf32>
}

// -----

// A tile neither a power of two nor the whole axis cannot be padded: its
// padding lanes would overlap the next tile.
func.func @bad_tile(%x: tensor<300xf32>) -> tensor<300xf32> {
  // expected-error @+1 {{kernel @bad_0: tile 100 of axis 0 is neither a power of two nor the whole axis (300)}}
  %y = kg.kernel @bad_0(%x) attributes {grid = array<i64: 3, 1, 1>, iteration = array<i64: 300>, tile = array<i64: 100>} : (tensor<300xf32>) -> tensor<300xf32> {
  ^bb0(%a: memref<300xf32>, %out: memref<300xf32>):
    kg.yield
  }
  return %y : tensor<300xf32>
}
