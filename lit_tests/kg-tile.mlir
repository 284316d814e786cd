// The last cases fail on purpose, hence `not`.
// RUN: not kgc-opt %s --split-input-file --kg-tile 2>/dev/null | FileCheck %s
// RUN: kgc-opt %s --split-input-file --kg-tile --verify-diagnostics --mlir-disable-verifier > /dev/null

// A pointwise kernel: 2-D tiles over the output, one program per tile. The
// bias is read through a view with stride 0 along the rows, as a 1-row tile.
// CHECK-LABEL: func.func @pointwise
// CHECK: kg.kernel @pointwise_0
// CHECK-SAME: config = {block_m = 4 : i64, block_n = 1000 : i64, num_stages = 1 : i64, num_warps = 8 : i64}, grid = array<i64: 1025, 1, 1>, iteration = array<i64: 4097, 1000>, kind = "pointwise"
// CHECK-SAME: tile = array<i64: 4, 1000>
// CHECK: ^bb0(%{{.*}}: memref<4097x1000xf32>, %{{.*}}: memref<1000xf32>, %{{.*}}: memref<4097x1000xf32>):
// CHECK-DAG: %[[PID:.*]] = kg.program_id 0 : i32
// CHECK-DAG: %[[X:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [4097, 1000], strides: [1000, 1]
// CHECK-DAG: %[[B:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [1, 1000], strides: [0, 1]
// CHECK: %[[ROW:.*]] = arith.muli %[[PID]], %{{.*}} : i32
// CHECK: %[[XT:.*]] = kg.tile_load %[[X]][%[[ROW]], %{{.*}}] : {{.*}} -> tensor<4x1000xf32>
// CHECK: %[[BT:.*]] = kg.tile_load %[[B]][%{{.*}}, %{{.*}}] : {{.*}} -> tensor<1x1000xf32>
// CHECK: %[[S:.*]] = kg.add %[[XT]], %[[BT]] : (tensor<4x1000xf32>, tensor<1x1000xf32>) -> tensor<4x1000xf32>
// CHECK: %[[R:.*]] = kg.relu %[[S]] : tensor<4x1000xf32>
// CHECK: kg.tile_store %[[R]], %{{.*}}[%[[ROW]], %{{.*}}] : tensor<4x1000xf32>
// CHECK: kg.yield
func.func @pointwise(%x: tensor<4097x1000xf32>, %b: tensor<1000xf32>) -> tensor<4097x1000xf32> {
  %y = kg.kernel @pointwise_0(%x, %b) : (tensor<4097x1000xf32>, tensor<1000xf32>) -> tensor<4097x1000xf32> {
  ^bb0(%a: tensor<4097x1000xf32>, %bias: tensor<1000xf32>):
    %s = kg.add %a, %bias : (tensor<4097x1000xf32>, tensor<1000xf32>) -> tensor<4097x1000xf32>
    %r = kg.relu %s : tensor<4097x1000xf32>
    kg.yield %r : tensor<4097x1000xf32>
  }
  return %y : tensor<4097x1000xf32>
}

// -----

// Few rows: four rows a tile would make 5 programs, too few to keep the
// target's SMs busy with loads in flight (4 per SM are asked for), so each
// program takes one row (17 programs) on 4 warps.
// CHECK-LABEL: func.func @pointwise_few_rows
// CHECK: kg.kernel @pointwise_few_rows_0
// CHECK-SAME: config = {block_m = 1 : i64, block_n = 1000 : i64, num_stages = 1 : i64, num_warps = 4 : i64}, grid = array<i64: 17, 1, 1>
// CHECK-SAME: tile = array<i64: 1, 1000>
func.func @pointwise_few_rows(%x: tensor<17x1000xf32>, %b: tensor<1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @pointwise_few_rows_0(%x, %b) : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>, %bias: tensor<1000xf32>):
    %s = kg.add %a, %bias : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32>
    %r = kg.relu %s : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A dynamic extent (`?`): planned as at 256 rows, its rows are the outermost
// program axis; the views take the size from the first buffer (memref.dim)
// and the grid is ceil(size / 4) programs at launch (dynamic_grid).
// CHECK-LABEL: func.func @pointwise_dynamic_rows
// CHECK: kg.kernel @pointwise_dynamic_rows_0
// CHECK-SAME: dynamic_axis = 0 : i64, dynamic_grid = array<i64: 4, 1>
// CHECK: ^bb0(%[[XB:.*]]: memref<?x1000xf32>, %{{.*}}: memref<1000xf32>, %[[OB:.*]]: memref<?x1000xf32>):
// CHECK: %[[N:.*]] = memref.dim %[[XB]], %{{.*}} : memref<?x1000xf32>
// CHECK: memref.reinterpret_cast %[[XB]] to offset: [0], sizes: [%[[N]], 1000], strides: [1000, 1] : memref<?x1000xf32> to memref<?x1000xf32, strided<[1000, 1]>>
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [1, 1000], strides: [0, 1]
// CHECK: memref.reinterpret_cast %[[OB]] to offset: [0], sizes: [%[[N]], 1000]
func.func @pointwise_dynamic_rows(%x: tensor<?x1000xf32>, %b: tensor<1000xf32>) -> tensor<?x1000xf32> {
  %y = kg.kernel @pointwise_dynamic_rows_0(%x, %b) : (tensor<?x1000xf32>, tensor<1000xf32>) -> tensor<?x1000xf32> {
  ^bb0(%a: tensor<?x1000xf32>, %bias: tensor<1000xf32>):
    %s = kg.add %a, %bias : (tensor<?x1000xf32>, tensor<1000xf32>) -> tensor<?x1000xf32>
    %r = kg.relu %s : tensor<?x1000xf32>
    kg.yield %r : tensor<?x1000xf32>
  }
  return %y : tensor<?x1000xf32>
}

// -----

// Attention over a dynamic key count (a decode step over a cache that grows
// call by call): the keys are the dynamic axis, looped over by every program,
// so the grid is static (dynamic_grid [0, 0]). Each of the 4 splits takes an
// equal share of the call's key tiles, ceil(ceil(size / 64) / 4) * 64 keys,
// and its loop ends at the size.
// CHECK-LABEL: func.func @decode_dynamic_keys
// CHECK: kg.kernel @decode_dynamic_keys_0
// CHECK-SAME: dynamic_axis = 4 : i64, dynamic_grid = array<i64: 0, 0>, grid = array<i64: 8, 1, 1>
// CHECK-SAME: kind = "attention"
// CHECK: %[[DIM:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<1x2x?x64xf16>
// CHECK: %[[SIZE:.*]] = arith.index_cast %[[DIM]] : index to i32
// CHECK: %[[SPLIT:.*]] = arith.remsi
// CHECK: %[[UP:.*]] = arith.addi %[[SIZE]], %c63_i32
// CHECK: %[[TILES:.*]] = arith.divsi %[[UP]], %c64_i32
// CHECK: %[[SHARE:.*]] = arith.divsi %{{.*}}, %c4_i32
// CHECK: %[[CHUNK:.*]] = arith.muli %[[SHARE]], %c64_i32
// CHECK: %[[START:.*]] = arith.muli %[[SPLIT]], %[[CHUNK]]
// CHECK: %[[STOP:.*]] = arith.addi %[[START]], %[[CHUNK]]
// CHECK: %[[END:.*]] = arith.minsi %[[STOP]], %[[SIZE]]
// CHECK: scf.for %{{.*}} = %[[START]] to %[[END]] step %c64_i32
// CHECK: kg.kernel @decode_dynamic_keys_0_combine
// CHECK-SAME: kind = "reduction"
// CHECK-NOT: dynamic_grid
// CHECK: return
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

// A dynamic extent behind a dim of extent 1 (a sequence of one batch): laid
// out as the rows above, so it tiles the same way; the size is read from the
// `?` dim (index 1) and the outer dim's stride never meets a nonzero index.
// CHECK-LABEL: func.func @pointwise_dynamic_sequence
// CHECK: kg.kernel @pointwise_dynamic_sequence_0
// CHECK-SAME: dynamic_axis = 1 : i64, dynamic_grid = array<i64: 4, 1>
// CHECK: ^bb0(%[[XB:.*]]: memref<1x?x1000xf32>, %{{.*}}: memref<1000xf32>, %{{.*}}: memref<1x?x1000xf32>):
// CHECK: %[[ONE:.*]] = arith.constant 1 : index
// CHECK: %[[N:.*]] = memref.dim %[[XB]], %[[ONE]] : memref<1x?x1000xf32>
// CHECK: memref.reinterpret_cast %[[XB]] to offset: [0], sizes: [1, %[[N]], 1000]
func.func @pointwise_dynamic_sequence(%x: tensor<1x?x1000xf32>, %b: tensor<1000xf32>) -> tensor<1x?x1000xf32> {
  %y = kg.kernel @pointwise_dynamic_sequence_0(%x, %b) : (tensor<1x?x1000xf32>, tensor<1000xf32>) -> tensor<1x?x1000xf32> {
  ^bb0(%a: tensor<1x?x1000xf32>, %bias: tensor<1000xf32>):
    %s = kg.add %a, %bias : (tensor<1x?x1000xf32>, tensor<1000xf32>) -> tensor<1x?x1000xf32>
    %r = kg.relu %s : tensor<1x?x1000xf32>
    kg.yield %r : tensor<1x?x1000xf32>
  }
  return %y : tensor<1x?x1000xf32>
}

// -----

// Tile sizes set by hand on the kernel are kept.
// CHECK-LABEL: func.func @user_tiles
// CHECK: kg.kernel @user_tiles_0
// CHECK-SAME: config = {block_m = 1 : i64, block_n = 256 : i64, {{.*}}}, grid = array<i64: 68, 1, 1>
// CHECK: kg.tile_load {{.*}} -> tensor<1x256xf32>
func.func @user_tiles(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @user_tiles_0(%x) attributes {config = {block_m = 1, block_n = 256}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A transpose is a view: the input is read with its strides permuted.
// CHECK-LABEL: func.func @transposed_read
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [64, 48], strides: [1, 64]
// CHECK-NOT: kg.transpose
func.func @transposed_read(%x: tensor<48x64xf16>) -> tensor<64x48xf16> {
  %y = kg.kernel @transposed_read_0(%x) : (tensor<48x64xf16>) -> tensor<64x48xf16> {
  ^bb0(%a: tensor<48x64xf16>):
    %t = kg.transpose %a [1, 0] : tensor<48x64xf16> -> tensor<64x48xf16>
    kg.yield %t : tensor<64x48xf16>
  }
  return %y : tensor<64x48xf16>
}

// -----

// A reduction whose row fits one tile ("persistent"): no loop. Four rows
// would fit a program's tile, but 17 rows then leave most SMs idle: one row
// per program.
// CHECK-LABEL: func.func @softmax_persistent
// CHECK: kg.kernel @softmax_0
// CHECK-SAME: config = {block_r = 1000 : i64, block_x = 1 : i64, {{.*}}}, grid = array<i64: 17, 1, 1>
// CHECK-SAME: kind = "reduction"
// CHECK-NOT: scf.for
// CHECK: %[[T:.*]] = kg.tile_load {{.*}} -> tensor<1x1000xf32>
// CHECK: %[[M:.*]] = kg.reduce max %[[T]] dims [1] keepdim : tensor<1x1000xf32> -> tensor<1x1xf32>
// CHECK: kg.sub %[[T]], %[[M]]
// CHECK: kg.reduce sum
// CHECK: kg.div
// CHECK: kg.tile_store
func.func @softmax_persistent(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @softmax_0(%x) : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
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

// A row too wide for one tile (block_r set by hand here): one loop per
// phase, max, then sum, then the output; each loop keeps a whole tile of
// partial results and reduces it once after the loop.
// CHECK-LABEL: func.func @softmax_looped
// CHECK: config = {block_r = 256 : i64, block_x = 1 : i64, {{.*}}}, grid = array<i64: 17, 1, 1>
// CHECK: %[[MAX:[a-z0-9_]+]] = scf.for %[[I:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{.*}}) -> (tensor<1x256xf32>)
// CHECK: %[[T:.*]] = kg.tile_load %{{.*}}[%{{.*}}, %[[I]]]
// CHECK: kg.maximum %[[ACC]], %[[T]]
// CHECK: } {kg.axis = 1 : i64}
// CHECK: kg.reduce max %[[MAX]] dims [1] keepdim : tensor<1x256xf32> -> tensor<1x1xf32>
// CHECK: scf.for
// CHECK: kg.exp
// CHECK: kg.add
// CHECK: } {kg.axis = 1 : i64}
// CHECK: kg.reduce sum
// CHECK: scf.for
// CHECK: kg.div
// CHECK: kg.tile_store
// CHECK: } {kg.axis = 1 : i64}
func.func @softmax_looped(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  %y = kg.kernel @softmax_0(%x) attributes {config = {block_r = 256}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
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

// A matmul: iteration (m, k, n), programs in groups of block_m rows for L2
// reuse, a loop over k accumulating tile_dot; the epilogue (bias, relu)
// runs once after the loop. With 3 row tiles, n tiles narrow to 64 so that
// the grid fills more of the GPU; small tiles get a deeper pipeline.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK: config = {block_k = 64 : i64, block_m = 128 : i64, block_n = 64 : i64, group_m = 8 : i64, num_stages = 4 : i64, num_warps = 4 : i64}, grid = array<i64: 48, 1, 1>, iteration = array<i64: 384, 512, 1024>, kind = "matmul"
// CHECK: arith.minsi
// CHECK: %[[ACC:.*]] = scf.for
// CHECK: kg.tile_load {{.*}} -> tensor<128x64x1xf16>
// CHECK: kg.tile_load {{.*}} -> tensor<1x64x64xf16>
// CHECK: kg.tile_dot {{.*}} : (tensor<128x64x1xf16>, tensor<1x64x64xf16>, tensor<128x1x64xf32>) -> tensor<128x1x64xf32>
// CHECK: } {kg.axis = 1 : i64}
// CHECK: kg.cast %[[ACC]] : tensor<128x1x64xf32> to tensor<128x1x64xf16>
// CHECK: kg.add
// CHECK: kg.relu
// CHECK: kg.tile_store {{.*}} : tensor<128x1x64xf16>
func.func @matmul_epilogue(%a: tensor<384x512xf16>, %b: tensor<512x1024xf16>, %bias: tensor<1024xf16>) -> tensor<384x1024xf16> {
  %y = kg.kernel @matmul_0(%a, %b, %bias) : (tensor<384x512xf16>, tensor<512x1024xf16>, tensor<1024xf16>) -> tensor<384x1024xf16> {
  ^bb0(%x: tensor<384x512xf16>, %w: tensor<512x1024xf16>, %c: tensor<1024xf16>):
    %m = kg.matmul %x, %w : (tensor<384x512xf16>, tensor<512x1024xf16>) -> tensor<384x1024xf16>
    %s = kg.add %m, %c : (tensor<384x1024xf16>, tensor<1024xf16>) -> tensor<384x1024xf16>
    %r = kg.relu %s : tensor<384x1024xf16>
    kg.yield %r : tensor<384x1024xf16>
  }
  return %y : tensor<384x1024xf16>
}

// -----

// A prefill's matmul: 4 row tiles of 128 times 32 column tiles of 128 make
// 128 programs, one wave on sm_90's 132 SMs, which beats two waves of
// 128x64 tiles: n tiles narrow only below half a wave. One program per SM
// over 224 k steps gets a fourth pipeline stage. (config = {library = false} keeps it
// Triton: by default a bare matmul this large calls the GPU's BLAS,
// kg-tile-library.mlir.)
// CHECK-LABEL: func.func @matmul_prefill_one_wave
// CHECK: config = {block_k = 64 : i64, block_m = 128 : i64, block_n = 128 : i64, {{.*}} num_stages = 4 : i64{{.*}}}, grid = array<i64: 128, 1, 1>
func.func @matmul_prefill_one_wave(%a: tensor<512x14336xf16>, %b: tensor<14336x4096xf16>) -> tensor<512x4096xf16> {
  %y = kg.kernel @matmul_prefill_one_wave_0(%a, %b) attributes {config = {library = false}} : (tensor<512x14336xf16>, tensor<14336x4096xf16>) -> tensor<512x4096xf16> {
  ^bb0(%x: tensor<512x14336xf16>, %w: tensor<14336x4096xf16>):
    %m = kg.matmul %x, %w : (tensor<512x14336xf16>, tensor<14336x4096xf16>) -> tensor<512x4096xf16>
    kg.yield %m : tensor<512x4096xf16>
  }
  return %y : tensor<512x4096xf16>
}

// -----

// Several waves (192 programs): the default 3 stages stay, which lets two
// programs share an SM (Triton, as above).
// CHECK-LABEL: func.func @matmul_prefill_waves
// CHECK: config = {block_k = 64 : i64, block_m = 128 : i64, block_n = 128 : i64, {{.*}} num_stages = 3 : i64{{.*}}}, grid = array<i64: 192, 1, 1>
func.func @matmul_prefill_waves(%a: tensor<512x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  %y = kg.kernel @matmul_prefill_waves_0(%a, %b) attributes {config = {library = false}} : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  ^bb0(%x: tensor<512x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16>
    kg.yield %m : tensor<512x6144xf16>
  }
  return %y : tensor<512x6144xf16>
}

// -----

// A matmul config in the kernel's config attribute: a block_m above m is the whole
// of m, so the grid has one row tile and group_m, with nothing to group,
// is 1; warp_specialize and flatten go on the k loop for Triton.
// CHECK-LABEL: func.func @matmul_config
// CHECK: kg.kernel @matmul_config_0
// CHECK-SAME: config = {block_k = 32 : i64, block_m = 96 : i64, block_n = 64 : i64, flatten = true, group_m = 1 : i64, num_stages = 2 : i64, num_warps = 8 : i64, warp_specialize = true}, grid = array<i64: 4, 1, 1>
// CHECK: scf.for
// CHECK: kg.tile_dot
// CHECK: } {kg.axis = 1 : i64, tt.flatten, tt.warp_specialize}
func.func @matmul_config(%a: tensor<96x128xf16>, %b: tensor<128x256xf16>) -> tensor<96x256xf16> {
  %y = kg.kernel @matmul_config_0(%a, %b) attributes {config = {block_m = 1024, block_n = 64, block_k = 32, group_m = 4, num_warps = 8, num_stages = 2, warp_specialize = true, flatten = true}} : (tensor<96x128xf16>, tensor<128x256xf16>) -> tensor<96x256xf16> {
  ^bb0(%x: tensor<96x128xf16>, %w: tensor<128x256xf16>):
    %m = kg.matmul %x, %w : (tensor<96x128xf16>, tensor<128x256xf16>) -> tensor<96x256xf16>
    kg.yield %m : tensor<96x256xf16>
  }
  return %y : tensor<96x256xf16>
}

// -----

// The loop flags of a matmul whose k fits one tile have no loop to go on:
// they are dropped from its config, which then equals kgc's own.
// CHECK-LABEL: func.func @matmul_flags_without_loop
// CHECK: kg.kernel @no_loop_0
// CHECK-NOT: warp_specialize
// CHECK-NOT: scf.for
// CHECK: kg.tile_dot
func.func @matmul_flags_without_loop(%a: tensor<32x16xf16>, %b: tensor<16x32xf16>) -> tensor<32x32xf16> {
  %y = kg.kernel @no_loop_0(%a, %b) attributes {config = {warp_specialize = true}} : (tensor<32x16xf16>, tensor<16x32xf16>) -> tensor<32x32xf16> {
  ^bb0(%x: tensor<32x16xf16>, %w: tensor<16x32xf16>):
    %m = kg.matmul %x, %w : (tensor<32x16xf16>, tensor<16x32xf16>) -> tensor<32x32xf16>
    kg.yield %m : tensor<32x32xf16>
  }
  return %y : tensor<32x32xf16>
}

// -----

// A concat reads each input in its window of the output and picks between
// them with masks.
// CHECK-LABEL: func.func @concat
// CHECK: %[[W:.*]] = kg.tile_mask [%{{.*}}, %{{.*}}] lower [-2147483648, 0] upper [2147483647, 3] : tensor<1x103xi1>
// CHECK: kg.tile_select %[[W]]
func.func @concat(%a: tensor<17x3xf32>, %b: tensor<17x100xf32>) -> tensor<17x103xf32> {
  %y = kg.kernel @concat_0(%a, %b) : (tensor<17x3xf32>, tensor<17x100xf32>) -> tensor<17x103xf32> {
  ^bb0(%x: tensor<17x3xf32>, %z: tensor<17x100xf32>):
    %c = kg.concat %x, %z dim 1 : (tensor<17x3xf32>, tensor<17x100xf32>) -> tensor<17x103xf32>
    kg.yield %c : tensor<17x103xf32>
  }
  return %y : tensor<17x103xf32>
}

// -----

// A query rotated by a concat (rotate_half of a rotary embedding) does not
// vary along the key loop of attention: its tile is made once, above the
// loop, and the concat's mask bounds only the concatenated axis, taking no
// loop offset (none is in scope there).
// CHECK-LABEL: func.func @attention_rotated_query
// CHECK: %[[HALF:.*]] = kg.tile_mask [%c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32, %c0_i32] lower [{{.*}}, 0, -2147483648] upper [{{.*}}, 32, 2147483647] : tensor<1x1x1x1x1x64x1xi1>
// CHECK: %[[Q:.*]] = kg.tile_select %[[HALF]]
// CHECK: scf.for %[[KEY:.*]] = %c0_i32 to %c100_i32
// CHECK: kg.tile_dot %[[Q]], %{{.*}}
func.func @attention_rotated_query(%q: tensor<1x8x1x64xf16>, %k: tensor<1x2x100x64xf16>, %v: tensor<1x2x100x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = kg.kernel @rotated_0(%k, %v, %q) attributes {config = {split_kv = 1, pack_heads = false}} : (tensor<1x2x100x64xf16>, tensor<1x2x100x64xf16>, tensor<1x8x1x64xf16>) -> tensor<1x8x1x64xf16> {
  ^bb0(%a: tensor<1x2x100x64xf16>, %b: tensor<1x2x100x64xf16>, %c: tensor<1x8x1x64xf16>):
    %hi = kg.slice %c offsets [0, 0, 0, 32] strides [1, 1, 1, 1] : tensor<1x8x1x64xf16> -> tensor<1x8x1x32xf16>
    %lo = kg.slice %c offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x8x1x64xf16> -> tensor<1x8x1x32xf16>
    %neg = kg.neg %hi : tensor<1x8x1x32xf16>
    %qr = kg.concat %neg, %lo dim 3 : (tensor<1x8x1x32xf16>, tensor<1x8x1x32xf16>) -> tensor<1x8x1x64xf16>
    %k5 = kg.reshape %a : tensor<1x2x100x64xf16> -> tensor<1x2x1x100x64xf16>
    %kb = kg.broadcast_to %k5 : tensor<1x2x1x100x64xf16> -> tensor<1x2x4x100x64xf16>
    %kh = kg.reshape %kb : tensor<1x2x4x100x64xf16> -> tensor<1x8x100x64xf16>
    %v5 = kg.reshape %b : tensor<1x2x100x64xf16> -> tensor<1x2x1x100x64xf16>
    %vb = kg.broadcast_to %v5 : tensor<1x2x1x100x64xf16> -> tensor<1x2x4x100x64xf16>
    %vh = kg.reshape %vb : tensor<1x2x4x100x64xf16> -> tensor<1x8x100x64xf16>
    %kt = kg.transpose %kh [0, 1, 3, 2] : tensor<1x8x100x64xf16> -> tensor<1x8x64x100xf16>
    %s = kg.matmul %qr, %kt : (tensor<1x8x1x64xf16>, tensor<1x8x64x100xf16>) -> tensor<1x8x1x100xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x8x1x100xf16> to tensor<1x8x1x100xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x8x1x100xf32> -> tensor<1x8x1x1xf32>
    %d = kg.sub %x, %m : (tensor<1x8x1x100xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x100xf32>
    %e = kg.exp %d : tensor<1x8x1x100xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x8x1x100xf32> -> tensor<1x8x1x1xf32>
    %p = kg.div %e, %z : (tensor<1x8x1x100xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x100xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x8x1x100xf32> to tensor<1x8x1x100xf16>
    %out = kg.matmul %ph, %vh : (tensor<1x8x1x100xf16>, tensor<1x8x100x64xf16>) -> tensor<1x8x1x64xf16>
    kg.yield %out : tensor<1x8x1x64xf16>
  }
  return %o : tensor<1x8x1x64xf16>
}

// -----

// Split-K (split_k = 4): the RMSNorm + MatMul kernel becomes a partials
// kernel, whose programs walk the tiles (grid x) and the 4 splits (grid y),
// each summing its chunk of k (256 of 1000 in steps of 128: the last stops at 1000) into the
// matmul's f32 accumulator and the rows' sums of squares, stored by split
// into workspaces; and a reduce kernel, which takes only the workspaces,
// sums the 4 partials in order and only then applies the 1/rms factor.
// CHECK-LABEL: func.func @split_k_rmsnorm_matmul
// CHECK: %[[P:.*]]:2 = kg.kernel @split_0_partials(%{{.*}}, %{{.*}}, %{{.*}}) attributes {config = {{{.*}}split_k = 4 : i64}, grid = array<i64: 1, 4, 1>{{.*}}} : (tensor<3x1000xf16>, tensor<1000xf16>, tensor<1000x100xf16>) -> (tensor<4x3x1xf32>, tensor<4x3x100xf32>)
// CHECK: %[[SPLIT:.*]] = kg.program_id 1 : i32
// CHECK: %[[START:.*]] = arith.muli %[[SPLIT]], %c256_i32 : i32
// CHECK: %[[NEXT:.*]] = arith.addi %[[START]], %c256_i32 : i32
// CHECK: %[[END:.*]] = arith.minsi %[[NEXT]], %c1000_i32 : i32
// CHECK: %[[LOOP:.*]]:2 = scf.for %{{.*}} = %[[START]] to %[[END]] step %c128_i32
// CHECK: kg.square
// CHECK: kg.tile_dot
// CHECK-NOT: kg.rsqrt
// CHECK: %[[SUM:.*]] = kg.reduce sum %[[LOOP]]#0 dims [1]
// CHECK: kg.tile_store %[[SUM]], %{{.*}}[%{{.*}}, %[[SPLIT]], %{{.*}}] : tensor<3x1x1xf32>, memref<3x4x1xf32, strided<[1, 3, 0]>>
// CHECK: kg.tile_store %[[LOOP]]#1, %{{.*}}[%{{.*}}, %[[SPLIT]], %{{.*}}] : tensor<3x1x100xf32>, memref<3x4x100xf32, strided<[100, 300, 1]>>
// CHECK: %[[Y:.*]] = kg.kernel @split_0_reduce(%[[P]]#0, %[[P]]#1) attributes {{{.*}}grid = array<i64: 1, 1, 1>{{.*}}} : (tensor<4x3x1xf32>, tensor<4x3x100xf32>) -> tensor<3x100xf16>
// CHECK: %[[TOTAL:.*]]:2 = scf.for %[[S:.*]] = %c0_i32 to %c4_i32 step %c1_i32
// CHECK: kg.tile_load %{{.*}}[%{{.*}}, %[[S]], %{{.*}}] : memref<3x4x1xf32, strided<[1, 3, 0]>> -> tensor<3x1x1xf32>
// CHECK: kg.tile_load %{{.*}}[%{{.*}}, %[[S]], %{{.*}}] : memref<3x4x100xf32, strided<[100, 300, 1]>> -> tensor<3x1x100xf32>
// CHECK: %[[R:.*]] = kg.rsqrt
// CHECK: kg.mul %[[TOTAL]]#1, %[[R]]
// CHECK: kg.tile_store
// CHECK: return %[[Y]] : tensor<3x100xf16>
func.func @split_k_rmsnorm_matmul(%arg0: tensor<3x1000xf16>, %arg1: tensor<1000xf16>, %arg2: tensor<1000x100xf16>) -> tensor<3x100xf16> {
  %0 = kg.kernel @split_0(%arg0, %arg1, %arg2) attributes {config = {split_k = 4}} : (tensor<3x1000xf16>, tensor<1000xf16>, tensor<1000x100xf16>) -> tensor<3x100xf16> {
  ^bb0(%arg3: tensor<3x1000xf16>, %arg4: tensor<1000xf16>, %arg5: tensor<1000x100xf16>):
    %1 = kg.constant 1.000000e-03 : tensor<f32>
    %2 = kg.constant 9.9999999999999995E-7 : tensor<f32>
    %3 = kg.cast %arg3 {kg.promotion} : tensor<3x1000xf16> to tensor<3x1000xf32>
    %4 = kg.square %3 : tensor<3x1000xf32>
    %5 = kg.reduce sum %4 dims [1] keepdim : tensor<3x1000xf32> -> tensor<3x1xf32>
    %6 = kg.mul %5, %1 : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
    %7 = kg.add %6, %2 : (tensor<3x1xf32>, tensor<f32>) -> tensor<3x1xf32>
    %8 = kg.rsqrt %7 : tensor<3x1xf32>
    %9 = kg.mul %3, %8 : (tensor<3x1000xf32>, tensor<3x1xf32>) -> tensor<3x1000xf32>
    %10 = kg.cast %arg4 {kg.promotion} : tensor<1000xf16> to tensor<1000xf32>
    %11 = kg.mul %9, %10 : (tensor<3x1000xf32>, tensor<1000xf32>) -> tensor<3x1000xf32>
    %12 = kg.cast %11 {kg.promotion} : tensor<3x1000xf32> to tensor<3x1000xf16>
    %13 = kg.matmul %12, %arg5 : (tensor<3x1000xf16>, tensor<1000x100xf16>) -> tensor<3x100xf16>
    kg.yield %13 : tensor<3x100xf16>
  }
  return %0 : tensor<3x100xf16>
}

// -----

// An attention kernel (kgc.tiling.attention): 8 query heads of one decoding
// query read 2 key/value heads through a broadcast. The head axis is split
// into (key/value head, group member), so K and V are read at their own
// head (stride 0 along the group), and the 4 query heads of a group are the
// rows of both dots (pack_heads). split_kv = 4: each program walks its
// quarter of the 1000 keys in blocks of 64, carrying the running max, sum
// and output, and writes its output and log-sum-exp; a reduction kernel
// combines the four. Decoding keeps three blocks of K and V in flight
// (num_stages = 3).
// CHECK-LABEL: func.func @attention_split_kv
// CHECK: %[[P:.*]]:2 = kg.kernel @attention_0_attention(%{{.*}}, %{{.*}}, %{{.*}}) attributes {config = {block_n = 64 : i64, num_stages = 3 : i64, num_warps = 4 : i64, pack_heads = true, split_kv = 4 : i64}, grid = array<i64: 8, 1, 1>, iteration = array<i64: 1, 2, 4, 4, 1, 1000, 64, 64>, kind = "attention", tile = array<i64: 1, 1, 4, 1, 1, 64, 64, 64>} : ({{.*}}) -> (tensor<1x8x1x4x64xf32>, tensor<1x8x1x4xf32>)
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [1, 2, 1, 1, 1, 1000, 64, 1], strides: [0, 64000, 0, 0, 0, 64, 1, 0]
// CHECK: %[[SPLIT:.*]] = arith.remsi
// CHECK: %[[START:.*]] = arith.muli %[[SPLIT]], %c256_i32
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %c1000_i32
// CHECK: %[[Q:.*]] = kg.tile_load {{.*}} -> tensor<1x1x4x1x1x1x64x1xf16>
// CHECK: scf.for %[[KEY:.*]] = %[[START]] to %[[END]] step %c64_i32
// CHECK: %[[K:.*]] = kg.tile_load %{{.*}}[%c0_i32, %{{.*}}, %c0_i32, %c0_i32, %c0_i32, %[[KEY]], %c0_i32, %c0_i32] {{.*}} -> tensor<1x1x1x1x1x64x64x1xf16>
// CHECK: %[[S:.*]] = kg.tile_dot %[[Q]], %[[K]], %{{.*}} {dims = array<i64: 2, 6, 5>}
// CHECK: kg.reduce max %[[S]] dims [5] keepdim
// CHECK: kg.maximum
// CHECK: kg.exp
// CHECK: kg.reduce sum
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} {dims = array<i64: 2, 5, 7>}
// CHECK: } {kg.axis = 5 : i64}
// CHECK: kg.log
// CHECK-COUNT-2: kg.tile_store
// CHECK: %[[O:.*]] = kg.kernel @attention_0_attention_combine(%[[P]]#0, %[[P]]#1) attributes {{{.*}}kind = "reduction"
// CHECK: kg.reduce max
// CHECK: kg.exp
// CHECK: kg.reduce sum
// CHECK: kg.div
// CHECK: return %[[O]] : tensor<1x8x1x64xf16>
func.func @attention_split_kv(%q: tensor<1x8x1x64xf16>, %k: tensor<1x2x1000x64xf16>, %v: tensor<1x2x1000x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = kg.kernel @attention_0_attention(%k, %v, %q) attributes {config = {split_kv = 4}} : (tensor<1x2x1000x64xf16>, tensor<1x2x1000x64xf16>, tensor<1x8x1x64xf16>) -> tensor<1x8x1x64xf16> {
  ^bb0(%a: tensor<1x2x1000x64xf16>, %b: tensor<1x2x1000x64xf16>, %c: tensor<1x8x1x64xf16>):
    %k5 = kg.reshape %a : tensor<1x2x1000x64xf16> -> tensor<1x2x1x1000x64xf16>
    %kb = kg.broadcast_to %k5 : tensor<1x2x1x1000x64xf16> -> tensor<1x2x4x1000x64xf16>
    %kh = kg.reshape %kb : tensor<1x2x4x1000x64xf16> -> tensor<1x8x1000x64xf16>
    %v5 = kg.reshape %b : tensor<1x2x1000x64xf16> -> tensor<1x2x1x1000x64xf16>
    %vb = kg.broadcast_to %v5 : tensor<1x2x1x1000x64xf16> -> tensor<1x2x4x1000x64xf16>
    %vh = kg.reshape %vb : tensor<1x2x4x1000x64xf16> -> tensor<1x8x1000x64xf16>
    %kt = kg.transpose %kh [0, 1, 3, 2] : tensor<1x8x1000x64xf16> -> tensor<1x8x64x1000xf16>
    %s = kg.matmul %c, %kt : (tensor<1x8x1x64xf16>, tensor<1x8x64x1000xf16>) -> tensor<1x8x1x1000xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x8x1x1000xf16> to tensor<1x8x1x1000xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x8x1x1000xf32> -> tensor<1x8x1x1xf32>
    %d = kg.sub %x, %m : (tensor<1x8x1x1000xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x1000xf32>
    %e = kg.exp %d : tensor<1x8x1x1000xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x8x1x1000xf32> -> tensor<1x8x1x1xf32>
    %p = kg.div %e, %z : (tensor<1x8x1x1000xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x1000xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x8x1x1000xf32> to tensor<1x8x1x1000xf16>
    %out = kg.matmul %ph, %vh : (tensor<1x8x1x1000xf16>, tensor<1x8x1000x64xf16>) -> tensor<1x8x1x64xf16>
    kg.yield %out : tensor<1x8x1x64xf16>
  }
  return %o : tensor<1x8x1x64xf16>
}

// -----

// A gated MLP split in 2: two accumulators, two workspaces; silu(a) * b
// waits for the sums, in the reduce kernel, which reads nothing else.
// CHECK-LABEL: func.func @split_k_gated_mlp
// CHECK: kg.kernel @gated_0_partials({{.*}} -> (tensor<2x3x50xf32>, tensor<2x3x50xf32>)
// CHECK-COUNT-2: kg.tile_dot
// CHECK-NOT: kg.sigmoid
// CHECK: kg.kernel @gated_0_reduce(%{{[^,]*}}, %{{[^,]*}}) {{.*}}: (tensor<2x3x50xf32>, tensor<2x3x50xf32>) -> tensor<3x50xf32>
// CHECK: scf.for
// CHECK: kg.sigmoid
func.func @split_k_gated_mlp(%x: tensor<3x300xf32>, %w1: tensor<300x50xf32>, %w2: tensor<300x50xf32>) -> tensor<3x50xf32> {
  %y = kg.kernel @gated_0(%x, %w1, %w2) attributes {config = {split_k = 2}} : (tensor<3x300xf32>, tensor<300x50xf32>, tensor<300x50xf32>) -> tensor<3x50xf32> {
  ^bb0(%a: tensor<3x300xf32>, %b1: tensor<300x50xf32>, %b2: tensor<300x50xf32>):
    %g = kg.matmul %a, %b1 : (tensor<3x300xf32>, tensor<300x50xf32>) -> tensor<3x50xf32>
    %u = kg.matmul %a, %b2 : (tensor<3x300xf32>, tensor<300x50xf32>) -> tensor<3x50xf32>
    %s = kg.sigmoid %g : tensor<3x50xf32>
    %t = kg.mul %g, %s : (tensor<3x50xf32>, tensor<3x50xf32>) -> tensor<3x50xf32>
    %r = kg.mul %t, %u : (tensor<3x50xf32>, tensor<3x50xf32>) -> tensor<3x50xf32>
    kg.yield %r : tensor<3x50xf32>
  }
  return %y : tensor<3x50xf32>
}

// -----

// Nothing to split: k = 32 is one step of the k loop, so split_k = 8 leaves
// the plain kernel (one kernel, no split_k attribute).
// CHECK-LABEL: func.func @split_k_of_one_step
// CHECK: kg.kernel @one_step_0(
// CHECK-NOT: split_k
// CHECK-NOT: kg.kernel
// CHECK: return
func.func @split_k_of_one_step(%a: tensor<4x32xf16>, %b: tensor<32x64xf16>) -> tensor<4x64xf16> {
  %y = kg.kernel @one_step_0(%a, %b) attributes {config = {split_k = 8}} : (tensor<4x32xf16>, tensor<32x64xf16>) -> tensor<4x64xf16> {
  ^bb0(%x: tensor<4x32xf16>, %w: tensor<32x64xf16>):
    %m = kg.matmul %x, %w : (tensor<4x32xf16>, tensor<32x64xf16>) -> tensor<4x64xf16>
    kg.yield %m : tensor<4x64xf16>
  }
  return %y : tensor<4x64xf16>
}

// -----

// LoRA as one kernel: the iteration gets a rank axis (the last, extent 16).
// X A accumulates beside X W in the k loop as a dot over (m, k, rank), on
// the same X tile and written first (Triton then lays out both dots as the
// main one); after the loop, (X A) B is one more dot, over (m, rank, n), of
// X A rounded to f16 and B read at the program's n offset. (Tiles of 64
// given, so that the checks read one tile shape.)
// CHECK-LABEL: func.func @lora_one_kernel
// CHECK: kg.kernel @lora_0(
// CHECK-SAME: grid = array<i64: 5, 1, 1>
// CHECK-SAME: iteration = array<i64: 3, 1000, 300, 16>
// CHECK-SAME: tile = array<i64: 3, 64, 64, 16>
// CHECK: %[[N:.*]] = arith.muli %{{.*}}, %c64_i32 : i32
// CHECK: %[[ACC:.*]]:2 = scf.for %[[K:.*]] = %c0_i32 to %c1000_i32 step %c64_i32
// CHECK: %[[X:.*]] = kg.tile_load %{{.*}}[%c0_i32, %[[K]], %c0_i32, %c0_i32] : memref<3x1000x1x1xf16, strided<[1000, 1, 0, 0]>> -> tensor<3x64x1x1xf16>
// CHECK: %[[A:.*]] = kg.tile_load %{{.*}}[%c0_i32, %[[K]], %c0_i32, %c0_i32] : memref<1x1000x1x16xf16, strided<[0, 16, 0, 1]>> -> tensor<1x64x1x16xf16>
// CHECK: kg.tile_dot %[[X]], %[[A]], %{{.*}} {dims = array<i64: 0, 1, 3>} : (tensor<3x64x1x1xf16>, tensor<1x64x1x16xf16>, tensor<3x1x1x16xf32>) -> tensor<3x1x1x16xf32>
// CHECK: kg.tile_load %{{.*}}[%c0_i32, %[[K]], %[[N]], %c0_i32] : memref<1x1000x300x1xf16, strided<[0, 300, 1, 0]>> -> tensor<1x64x64x1xf16>
// CHECK: kg.tile_dot %[[X]], %{{.*}} {dims = array<i64: 0, 1, 2>}
// CHECK: } {kg.axis = 1 : i64}
// CHECK: %[[T:.*]] = kg.cast %[[ACC]]#0 : tensor<3x1x1x16xf32> to tensor<3x1x1x16xf16>
// CHECK: %[[B:.*]] = kg.tile_load %{{.*}}[%c0_i32, %c0_i32, %[[N]], %c0_i32] : memref<1x1x300x16xf16, strided<[0, 0, 1, 300]>> -> tensor<1x1x64x16xf16>
// CHECK: kg.tile_dot %[[T]], %[[B]], %{{.*}} {dims = array<i64: 0, 3, 2>} : (tensor<3x1x1x16xf16>, tensor<1x1x64x16xf16>, tensor<3x1x64x1xf32>) -> tensor<3x1x64x1xf32>
// CHECK-NOT: scf.for
// CHECK: kg.tile_store
func.func @lora_one_kernel(%x: tensor<3x1000xf16>, %w: tensor<1000x300xf16>, %a: tensor<1000x16xf16>, %b: tensor<16x300xf16>) -> tensor<3x300xf16> {
  %y = kg.kernel @lora_0(%x, %w, %a, %b) attributes {config = {block_n = 64, block_k = 64}} : (tensor<3x1000xf16>, tensor<1000x300xf16>, tensor<1000x16xf16>, tensor<16x300xf16>) -> tensor<3x300xf16> {
  ^bb0(%xx: tensor<3x1000xf16>, %ww: tensor<1000x300xf16>, %aa: tensor<1000x16xf16>, %bb: tensor<16x300xf16>):
    %v = kg.matmul %xx, %ww : (tensor<3x1000xf16>, tensor<1000x300xf16>) -> tensor<3x300xf16>
    %t = kg.matmul %xx, %aa : (tensor<3x1000xf16>, tensor<1000x16xf16>) -> tensor<3x16xf16>
    %u = kg.matmul %t, %bb : (tensor<3x16xf16>, tensor<16x300xf16>) -> tensor<3x300xf16>
    %r = kg.add %v, %u : (tensor<3x300xf16>, tensor<3x300xf16>) -> tensor<3x300xf16>
    kg.yield %r : tensor<3x300xf16>
  }
  return %y : tensor<3x300xf16>
}

// -----

// The same attention with split_kv = 1 and without packing: one kernel,
// one program per query head, K and V still read at their key/value head.
// CHECK-LABEL: func.func @attention_one_kernel
// CHECK: %[[O:.*]] = kg.kernel @attention_1_attention(%{{.*}}, %{{.*}}, %{{.*}}) attributes {config = {block_m = 1 : i64, block_n = 128 : i64, num_stages = 3 : i64, num_warps = 4 : i64, pack_heads = false, split_kv = 1 : i64}, grid = array<i64: 8, 1, 1>, iteration = array<i64: 1, 2, 4, 1, 1000, 64, 64>, kind = "attention"
// CHECK: scf.for %{{.*}} = %c0_i32 to %c1000_i32 step %c128_i32
// CHECK-NOT: kg.kernel
// CHECK: return %[[O]] : tensor<1x8x1x64xf16>
func.func @attention_one_kernel(%q: tensor<1x8x1x64xf16>, %k: tensor<1x2x1000x64xf16>, %v: tensor<1x2x1000x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = kg.kernel @attention_1_attention(%k, %v, %q) attributes {config = {split_kv = 1, pack_heads = false}} : (tensor<1x2x1000x64xf16>, tensor<1x2x1000x64xf16>, tensor<1x8x1x64xf16>) -> tensor<1x8x1x64xf16> {
  ^bb0(%a: tensor<1x2x1000x64xf16>, %b: tensor<1x2x1000x64xf16>, %c: tensor<1x8x1x64xf16>):
    %k5 = kg.reshape %a : tensor<1x2x1000x64xf16> -> tensor<1x2x1x1000x64xf16>
    %kb = kg.broadcast_to %k5 : tensor<1x2x1x1000x64xf16> -> tensor<1x2x4x1000x64xf16>
    %kh = kg.reshape %kb : tensor<1x2x4x1000x64xf16> -> tensor<1x8x1000x64xf16>
    %v5 = kg.reshape %b : tensor<1x2x1000x64xf16> -> tensor<1x2x1x1000x64xf16>
    %vb = kg.broadcast_to %v5 : tensor<1x2x1x1000x64xf16> -> tensor<1x2x4x1000x64xf16>
    %vh = kg.reshape %vb : tensor<1x2x4x1000x64xf16> -> tensor<1x8x1000x64xf16>
    %kt = kg.transpose %kh [0, 1, 3, 2] : tensor<1x8x1000x64xf16> -> tensor<1x8x64x1000xf16>
    %s = kg.matmul %c, %kt : (tensor<1x8x1x64xf16>, tensor<1x8x64x1000xf16>) -> tensor<1x8x1x1000xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x8x1x1000xf16> to tensor<1x8x1x1000xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x8x1x1000xf32> -> tensor<1x8x1x1xf32>
    %d = kg.sub %x, %m : (tensor<1x8x1x1000xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x1000xf32>
    %e = kg.exp %d : tensor<1x8x1x1000xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x8x1x1000xf32> -> tensor<1x8x1x1xf32>
    %p = kg.div %e, %z : (tensor<1x8x1x1000xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x1000xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x8x1x1000xf32> to tensor<1x8x1x1000xf16>
    %out = kg.matmul %ph, %vh : (tensor<1x8x1x1000xf16>, tensor<1x8x1000x64xf16>) -> tensor<1x8x1x64xf16>
    kg.yield %out : tensor<1x8x1x64xf16>
  }
  return %o : tensor<1x8x1x64xf16>
}

// -----

// Prefill attention, heads of 64 over 300 keys: blocks of 64 keys (they
// pad 20 keys where blocks of 128 pad 84), 64-query tiles (80 programs,
// over 2/5 of sm_90's 132 SMs) and three stages over the five key blocks.
// CHECK-LABEL: func.func @prefill_300
// CHECK: kg.kernel @prefill_300_0_attention({{.*}}) attributes {config = {block_m = 64 : i64, block_n = 64 : i64, num_stages = 3 : i64, num_warps = 4 : i64, split_kv = 1 : i64}, grid = array<i64: 80, 1, 1>
func.func @prefill_300(%q: tensor<1x16x300x64xf16>, %k: tensor<1x16x300x64xf16>, %v: tensor<1x16x300x64xf16>) -> tensor<1x16x300x64xf16> {
  %o = kg.kernel @prefill_300_0_attention(%k, %v, %q) : (tensor<1x16x300x64xf16>, tensor<1x16x300x64xf16>, tensor<1x16x300x64xf16>) -> tensor<1x16x300x64xf16> {
  ^bb0(%a: tensor<1x16x300x64xf16>, %b: tensor<1x16x300x64xf16>, %c: tensor<1x16x300x64xf16>):
    %kt = kg.transpose %a [0, 1, 3, 2] : tensor<1x16x300x64xf16> -> tensor<1x16x64x300xf16>
    %s = kg.matmul %c, %kt : (tensor<1x16x300x64xf16>, tensor<1x16x64x300xf16>) -> tensor<1x16x300x300xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x16x300x300xf16> to tensor<1x16x300x300xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x16x300x300xf32> -> tensor<1x16x300x1xf32>
    %d = kg.sub %x, %m : (tensor<1x16x300x300xf32>, tensor<1x16x300x1xf32>) -> tensor<1x16x300x300xf32>
    %e = kg.exp %d : tensor<1x16x300x300xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x16x300x300xf32> -> tensor<1x16x300x1xf32>
    %p = kg.div %e, %z : (tensor<1x16x300x300xf32>, tensor<1x16x300x1xf32>) -> tensor<1x16x300x300xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x16x300x300xf32> to tensor<1x16x300x300xf16>
    %out = kg.matmul %ph, %b : (tensor<1x16x300x300xf16>, tensor<1x16x300x64xf16>) -> tensor<1x16x300x64xf16>
    kg.yield %out : tensor<1x16x300x64xf16>
  }
  return %o : tensor<1x16x300x64xf16>
}

// -----

// A norm weight's gradient: 1024 token rows summed, 512 columns kept. The
// rows are strided in memory and the columns contiguous, so a program takes
// a band of 8 columns (64 programs) and walks the rows in steps of 512 (a
// tile of 4096 elements), instead of one column a program.
// CHECK-LABEL: func.func @weight_gradient
// CHECK: kg.kernel @weight_gradient_0_reduction({{.*}}) attributes {config = {block_r = 512 : i64, block_x = 8 : i64, num_stages = 2 : i64, num_warps = 16 : i64}, grid = array<i64: 64, 1, 1>, iteration = array<i64: 512, 1024>, kind = "reduction", tile = array<i64: 8, 512>}
// CHECK: scf.for
func.func @weight_gradient(%dy: tensor<1024x512xbf16>, %x: tensor<1024x512xbf16>) -> tensor<512xf32> {
  %s = kg.kernel @weight_gradient_0_reduction(%dy, %x) : (tensor<1024x512xbf16>, tensor<1024x512xbf16>) -> tensor<512xf32> {
  ^bb0(%a: tensor<1024x512xbf16>, %b: tensor<1024x512xbf16>):
    %af = kg.cast %a : tensor<1024x512xbf16> to tensor<1024x512xf32>
    %bf = kg.cast %b : tensor<1024x512xbf16> to tensor<1024x512xf32>
    %p = kg.mul %af, %bf : (tensor<1024x512xf32>, tensor<1024x512xf32>) -> tensor<1024x512xf32>
    %r = kg.reduce sum %p dims [0] : tensor<1024x512xf32> -> tensor<512xf32>
    kg.yield %r : tensor<512xf32>
  }
  return %s : tensor<512xf32>
}

// -----

// Two rows summed per column (a key head's gradient over its two query
// heads): no band. The rows' own default takes all 64 columns beside the
// 2 summed rows, more than a band would, and the tile is whole.
// CHECK-LABEL: func.func @two_rows_summed
// CHECK: kg.kernel @two_rows_summed_0_reduction({{.*}}) attributes {config = {block_r = 2 : i64, block_x = 64 : i64, num_stages = 1 : i64, num_warps = 1 : i64}, grid = array<i64: 1024, 1, 1>
// CHECK-NOT: scf.for
func.func @two_rows_summed(%g: tensor<4x2x256x64xf32>) -> tensor<4x256x64xf32> {
  %s = kg.kernel @two_rows_summed_0_reduction(%g) : (tensor<4x2x256x64xf32>) -> tensor<4x256x64xf32> {
  ^bb0(%a: tensor<4x2x256x64xf32>):
    %r = kg.reduce sum %a dims [1] : tensor<4x2x256x64xf32> -> tensor<4x256x64xf32>
    kg.yield %r : tensor<4x256x64xf32>
  }
  return %s : tensor<4x256x64xf32>
}

// -----

// The same over 384 keys keeps blocks of 128: they fill their blocks, and
// blocks of 64 would pad no fewer keys.
// CHECK-LABEL: func.func @prefill_384
// CHECK: kg.kernel @prefill_384_0_attention({{.*}}) attributes {config = {block_m = 64 : i64, block_n = 128 : i64, num_stages = 3 : i64, num_warps = 4 : i64, split_kv = 1 : i64}, grid = array<i64: 96, 1, 1>
func.func @prefill_384(%q: tensor<1x16x384x64xf16>, %k: tensor<1x16x384x64xf16>, %v: tensor<1x16x384x64xf16>) -> tensor<1x16x384x64xf16> {
  %o = kg.kernel @prefill_384_0_attention(%k, %v, %q) : (tensor<1x16x384x64xf16>, tensor<1x16x384x64xf16>, tensor<1x16x384x64xf16>) -> tensor<1x16x384x64xf16> {
  ^bb0(%a: tensor<1x16x384x64xf16>, %b: tensor<1x16x384x64xf16>, %c: tensor<1x16x384x64xf16>):
    %kt = kg.transpose %a [0, 1, 3, 2] : tensor<1x16x384x64xf16> -> tensor<1x16x64x384xf16>
    %s = kg.matmul %c, %kt : (tensor<1x16x384x64xf16>, tensor<1x16x64x384xf16>) -> tensor<1x16x384x384xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x16x384x384xf16> to tensor<1x16x384x384xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x16x384x384xf32> -> tensor<1x16x384x1xf32>
    %d = kg.sub %x, %m : (tensor<1x16x384x384xf32>, tensor<1x16x384x1xf32>) -> tensor<1x16x384x384xf32>
    %e = kg.exp %d : tensor<1x16x384x384xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x16x384x384xf32> -> tensor<1x16x384x1xf32>
    %p = kg.div %e, %z : (tensor<1x16x384x384xf32>, tensor<1x16x384x1xf32>) -> tensor<1x16x384x384xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x16x384x384xf32> to tensor<1x16x384x384xf16>
    %out = kg.matmul %ph, %b : (tensor<1x16x384x384xf16>, tensor<1x16x384x64xf16>) -> tensor<1x16x384x64xf16>
    kg.yield %out : tensor<1x16x384x64xf16>
  }
  return %o : tensor<1x16x384x64xf16>
}

// -----

// A kernel already in tiled form is left alone.
// CHECK-LABEL: func.func @already_tiled
// CHECK: kg.kernel @done(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0(%{{.*}}: memref<4xf32>, %{{.*}}: memref<4xf32>):
// CHECK-NEXT: kg.yield
func.func @already_tiled(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.kernel @done(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: memref<4xf32>, %out: memref<4xf32>):
    kg.yield
  }
  return %y : tensor<4xf32>
}

// -----

// A tile size by hand that is neither a power of two nor the whole axis is
// refused: its padding lanes would overlap the next tile.
func.func @bad_tile(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  // expected-error @+1 {{pointwise kernel @bad_0: block_n = 100 is not legal; block_n must be a power of two, or at least 1000 to cover its axis}}
  %y = kg.kernel @bad_0(%x) attributes {config = {block_n = 100}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A softmax over k before the matmul cannot be split: its sum needs the max
// of the whole row, so its reductions over k run in two loops.
func.func @split_k_of_chained_reductions(%x: tensor<4x512xf32>, %w: tensor<512x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{kernel @chained_0 cannot be tiled: split_k = 2 needs every reduction over k in one loop; this kernel has reductions over k that read one another}}
  %y = kg.kernel @chained_0(%x, %w) attributes {config = {split_k = 2, block_k = 64}} : (tensor<4x512xf32>, tensor<512x64xf32>) -> tensor<4x64xf32> {
  ^bb0(%a: tensor<4x512xf32>, %b: tensor<512x64xf32>):
    %1 = kg.reduce max %a dims [1] keepdim : tensor<4x512xf32> -> tensor<4x1xf32>
    %2 = kg.sub %a, %1 : (tensor<4x512xf32>, tensor<4x1xf32>) -> tensor<4x512xf32>
    %3 = kg.exp %2 : tensor<4x512xf32>
    %4 = kg.reduce sum %3 dims [1] keepdim : tensor<4x512xf32> -> tensor<4x1xf32>
    %5 = kg.div %3, %4 : (tensor<4x512xf32>, tensor<4x1xf32>) -> tensor<4x512xf32>
    %6 = kg.matmul %5, %b : (tensor<4x512xf32>, tensor<512x64xf32>) -> tensor<4x64xf32>
    kg.yield %6 : tensor<4x64xf32>
  }
  return %y : tensor<4x64xf32>
}

// -----

// A split kernel launches one program per tile and split: it cannot also be
// persistent.
func.func @split_k_persistent(%a: tensor<4x512xf16>, %b: tensor<512x64xf16>) -> tensor<4x64xf16> {
  // expected-error @+1 {{matmul kernel @both_0: split_k = 2 and num_programs = 1 cannot both be set; a split kernel launches one program per tile and split}}
  %y = kg.kernel @both_0(%a, %b) attributes {config = {split_k = 2, num_programs = 1}} : (tensor<4x512xf16>, tensor<512x64xf16>) -> tensor<4x64xf16> {
  ^bb0(%x: tensor<4x512xf16>, %w: tensor<512x64xf16>):
    %m = kg.matmul %x, %w : (tensor<4x512xf16>, tensor<512x64xf16>) -> tensor<4x64xf16>
    kg.yield %m : tensor<4x64xf16>
  }
  return %y : tensor<4x64xf16>
}

// -----

// X A rides along X W's k loop; with k in one step there is no loop to ride.
func.func @lora_without_k_loop(%x: tensor<3x32xf16>, %w: tensor<32x64xf16>, %a: tensor<32x16xf16>, %b: tensor<16x64xf16>) -> tensor<3x64xf16> {
  // expected-error @+1 {{kernel @short_0 cannot be tiled: a side matmul of rank-r products needs a k loop to ride along}}
  %y = kg.kernel @short_0(%x, %w, %a, %b) : (tensor<3x32xf16>, tensor<32x64xf16>, tensor<32x16xf16>, tensor<16x64xf16>) -> tensor<3x64xf16> {
  ^bb0(%xx: tensor<3x32xf16>, %ww: tensor<32x64xf16>, %aa: tensor<32x16xf16>, %bb: tensor<16x64xf16>):
    %v = kg.matmul %xx, %ww : (tensor<3x32xf16>, tensor<32x64xf16>) -> tensor<3x64xf16>
    %t = kg.matmul %xx, %aa : (tensor<3x32xf16>, tensor<32x16xf16>) -> tensor<3x16xf16>
    %u = kg.matmul %t, %bb : (tensor<3x16xf16>, tensor<16x64xf16>) -> tensor<3x64xf16>
    %r = kg.add %v, %u : (tensor<3x64xf16>, tensor<3x64xf16>) -> tensor<3x64xf16>
    kg.yield %r : tensor<3x64xf16>
  }
  return %y : tensor<3x64xf16>
}

// -----

// Two LoRA adapters of ranks 16 and 8 on one matmul: a kernel has one rank
// axis, so products of different ranks cannot share it.
func.func @lora_two_ranks(%x: tensor<3x1000xf16>, %w: tensor<1000x64xf16>, %a: tensor<1000x16xf16>, %b: tensor<16x64xf16>, %c: tensor<1000x8xf16>, %d: tensor<8x64xf16>) -> tensor<3x64xf16> {
  // expected-error @+1 {{kernel @two_0 cannot be tiled: rank-r products of one kernel must share their rank, got [8, 16]}}
  %y = kg.kernel @two_0(%x, %w, %a, %b, %c, %d) : (tensor<3x1000xf16>, tensor<1000x64xf16>, tensor<1000x16xf16>, tensor<16x64xf16>, tensor<1000x8xf16>, tensor<8x64xf16>) -> tensor<3x64xf16> {
  ^bb0(%xx: tensor<3x1000xf16>, %ww: tensor<1000x64xf16>, %aa: tensor<1000x16xf16>, %bb: tensor<16x64xf16>, %cc: tensor<1000x8xf16>, %dd: tensor<8x64xf16>):
    %v = kg.matmul %xx, %ww : (tensor<3x1000xf16>, tensor<1000x64xf16>) -> tensor<3x64xf16>
    %t = kg.matmul %xx, %aa : (tensor<3x1000xf16>, tensor<1000x16xf16>) -> tensor<3x16xf16>
    %u = kg.matmul %t, %bb : (tensor<3x16xf16>, tensor<16x64xf16>) -> tensor<3x64xf16>
    %s = kg.matmul %xx, %cc : (tensor<3x1000xf16>, tensor<1000x8xf16>) -> tensor<3x8xf16>
    %z = kg.matmul %s, %dd : (tensor<3x8xf16>, tensor<8x64xf16>) -> tensor<3x64xf16>
    %r0 = kg.add %v, %u : (tensor<3x64xf16>, tensor<3x64xf16>) -> tensor<3x64xf16>
    %r = kg.add %r0, %z : (tensor<3x64xf16>, tensor<3x64xf16>) -> tensor<3x64xf16>
    kg.yield %r : tensor<3x64xf16>
  }
  return %y : tensor<3x64xf16>
}

// -----

// The dialect checks only the config's form; which knobs a kernel has is its
// schedule's to say: a pointwise kernel has no block_x (a reduction's).
func.func @knob_of_another_kind(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  // expected-error @+1 {{pointwise kernel @other_0: its config has no knob block_x (the knobs of pointwise kernels: num_warps, num_stages, num_programs, block_m, block_n)}}
  %y = kg.kernel @other_0(%x) attributes {config = {block_x = 4}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A flag where the schedule takes a size.
func.func @flag_for_a_size(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  // expected-error @+1 {{pointwise kernel @flag_0: config knob num_warps must be an integer, got true}}
  %y = kg.kernel @flag_0(%x) attributes {config = {num_warps = true}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A positive integer of the right form that no kernel takes: warps are a
// power of two up to 32.
func.func @three_warps(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  // expected-error @+1 {{pointwise kernel @warps_0: num_warps = 3 is not legal; num_warps must be a power of two up to 32 (1, 2, 4, 8, 16, 32)}}
  %y = kg.kernel @warps_0(%x) attributes {config = {num_warps = 3}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A knob written as an attribute of its own (outside config) would be
// ignored silently; kg-tile says where it goes.
func.func @knob_outside_config(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  // expected-error @+1 {{kernel @stray_0: knob num_warps is set as an attribute of its own; knobs go in the kernel's config attribute: config = {num_warps = 4 : i64}}}
  %y = kg.kernel @stray_0(%x) attributes {num_warps = 4} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  return %y : tensor<17x1000xf32>
}

// -----

// A gather of a dynamic count of rows: the ids and the result span the size
// along the dynamic axis; the table keeps its own 64 rows there, since the
// positions it is read at are the ids', not the lanes'.
// CHECK-LABEL: func.func @gather_dynamic_rows
// CHECK: kg.kernel @gather_dynamic_rows_0
// CHECK-SAME: dynamic_axis = 0 : i64
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<?xi64>
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [%[[N]], 1], strides: [1, 0]
// CHECK: %[[TABLE:.*]] = memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [64, 32], strides: [32, 1]
// CHECK: kg.tile_gather %[[TABLE]]
func.func @gather_dynamic_rows(%table: tensor<64x32xf16>, %ids: tensor<?xi64>) -> tensor<?x32xf16> {
  %y = kg.kernel @gather_dynamic_rows_0(%table, %ids) : (tensor<64x32xf16>, tensor<?xi64>) -> tensor<?x32xf16> {
  ^bb0(%t: tensor<64x32xf16>, %i: tensor<?xi64>):
    %g = kg.gather %t[%i] dim 0 : (tensor<64x32xf16>, tensor<?xi64>) -> tensor<?x32xf16>
    kg.yield %g : tensor<?x32xf16>
  }
  return %y : tensor<?x32xf16>
}

// -----

// Behind a dim of extent 2 the size sets that dim's stride: the views take
// it as an operand, `size * 1000`, computed from the size at the top of the
// program, and the dynamic axis is still the outermost program axis (the
// program id divides by the 2 of the batch first).
// CHECK-LABEL: func.func @dynamic_behind_two
// CHECK: kg.kernel @dynamic_behind_two_0
// CHECK-SAME: dynamic_axis = 1 : i64, dynamic_grid = array<i64: 4, 2>
// CHECK: %[[N:.*]] = memref.dim %{{.*}}, %{{.*}} : memref<2x?x1000xf32>
// CHECK: %[[N32:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK: %[[STRIDE32:.*]] = arith.muli %[[N32]], %{{.*}} : i32
// CHECK: %[[STRIDE:.*]] = arith.index_cast %[[STRIDE32]] : i32 to index
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [0], sizes: [2, %[[N]], 1000], strides: [%[[STRIDE]], 1000, 1] : memref<2x?x1000xf32> to memref<2x?x1000xf32, strided<[?, 1000, 1]>>
// CHECK: arith.remsi %{{.*}}, %{{.*}} : i32
func.func @dynamic_behind_two(%x: tensor<2x?x1000xf32>) -> tensor<2x?x1000xf32> {
  %y = kg.kernel @dynamic_behind_two_0(%x) : (tensor<2x?x1000xf32>) -> tensor<2x?x1000xf32> {
  ^bb0(%a: tensor<2x?x1000xf32>):
    %r = kg.relu %a : tensor<2x?x1000xf32>
    kg.yield %r : tensor<2x?x1000xf32>
  }
  return %y : tensor<2x?x1000xf32>
}

// -----

// A sum over a dynamic token count (a norm weight's gradient in a training
// step of any length): every program takes its band of columns and loops
// over the tokens in steps of 128 to the call's size (the loop's upper
// bound is read from the buffer), so the grid is static (dynamic_grid [0, 0]).
// CHECK-LABEL: func.func @sum_over_dynamic_tokens
// CHECK: kg.kernel @sum_over_dynamic_tokens_0
// CHECK-SAME: block_r = 128 : i64, block_x = 8 : i64
// CHECK-SAME: dynamic_axis = 1 : i64, dynamic_grid = array<i64: 0, 0>, grid = array<i64: 64, 1, 1>
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[END:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]] step %{{.*}} iter_args
func.func @sum_over_dynamic_tokens(%x: tensor<?x512xf32>) -> tensor<512xf32> {
  %y = kg.kernel @sum_over_dynamic_tokens_0(%x) : (tensor<?x512xf32>) -> tensor<512xf32> {
  ^bb0(%a: tensor<?x512xf32>):
    %s = kg.reduce sum %a dims [0] : tensor<?x512xf32> -> tensor<512xf32>
    kg.yield %s : tensor<512xf32>
  }
  return %y : tensor<512xf32>
}

// -----

// A weight's gradient over a dynamic token count, X^T dY: the tokens are the
// product's k, walked by every program's k loop to the call's size (64 at a
// step, the dot given zeros past it); the grid is static.
// CHECK-LABEL: func.func @product_over_dynamic_tokens
// CHECK: kg.kernel @product_over_dynamic_tokens_0
// CHECK-SAME: block_k = 64 : i64
// CHECK-SAME: dynamic_axis = 1 : i64, dynamic_grid = array<i64: 0, 0>
// CHECK: %[[N:.*]] = memref.dim
// CHECK: %[[END:.*]] = arith.index_cast %[[N]] : index to i32
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[END]] step %{{.*}} iter_args
func.func @product_over_dynamic_tokens(%x: tensor<?x512xbf16>, %dy: tensor<?x96xbf16>) -> tensor<512x96xf32> {
  %y = kg.kernel @product_over_dynamic_tokens_0(%x, %dy) : (tensor<?x512xbf16>, tensor<?x96xbf16>) -> tensor<512x96xf32> {
  ^bb0(%a: tensor<?x512xbf16>, %b: tensor<?x96xbf16>):
    %at = kg.transpose %a [1, 0] : tensor<?x512xbf16> -> tensor<512x?xbf16>
    %w = kg.matmul %at, %b : (tensor<512x?xbf16>, tensor<?x96xbf16>) -> tensor<512x96xf32>
    kg.yield %w : tensor<512x96xf32>
  }
  return %y : tensor<512x96xf32>
}

// -----

// The dynamic extent as the outer of two reduced axes: a program's loop
// walks the innermost one, so no loop could end at the size. Refused.
func.func @dynamic_outer_reduced_axis(%x: tensor<?x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{kernel @dynamic_outer_reduced_axis_0 cannot be tiled with a dynamic extent: iteration axis 0, of the dynamic extent, is reduced but not as the innermost looped axis; a reduction walks the dynamic extent only as its innermost reduced axis}}
  %y = kg.kernel @dynamic_outer_reduced_axis_0(%x) : (tensor<?x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = kg.reduce sum %a dims [0, 1] : tensor<?x8xf32> -> tensor<f32>
    kg.yield %s : tensor<f32>
  }
  return %y : tensor<f32>
}

// -----

// The extent in two dims of one buffer would make two iteration axes
// dynamic (and, inside a third dim, a stride of size * size): refused.
func.func @dynamic_in_two_dims(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{kernel @dynamic_in_two_dims_0 cannot be tiled with a dynamic extent: a buffer of type tensor<?x?xf32> has the dynamic extent in dimensions [0, 1]; kg-tile takes it in one dimension of each buffer}}
  %y = kg.kernel @dynamic_in_two_dims_0(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32> {
  ^bb0(%a: tensor<?x?xf32>):
    %r = kg.relu %a : tensor<?x?xf32>
    kg.yield %r : tensor<?x?xf32>
  }
  return %y : tensor<?x?xf32>
}
