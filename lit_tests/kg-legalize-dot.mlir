// The tile programs come from kg-tile, from the tile knobs each kernel
// carries (so a change of kg-tile's heuristics, which
// tests/test_tile_heuristics.py pins, cannot change them); these checks are
// about what kg-legalize-dot makes of their dots.
// Three cases fail on purpose (tiles too small for an axis of 100 and for a
// dynamic extent, and warp specialization before sm_100), hence `not`.
// RUN: not kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot 2>/dev/null | FileCheck %s
// RUN: not kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot='target=80' 2>/dev/null | FileCheck %s --check-prefix=SM80
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot --verify-diagnostics --mlir-disable-verifier > /dev/null
// RUN: not kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot='target=100' 2>/dev/null | FileCheck %s --check-prefix=SM100

// An attention kernel's dots name their axes (dims): Q K^T contracts the
// head dimension (axis 3) into (queries 1, keys 2), P V the keys (axis 2)
// into (queries 1, head dimension 4). 3 queries are grown to 16 rows along
// axis 1, which both dots share.
// CHECK-LABEL: func.func @attention_rows
// CHECK: tile = array<i64: 1, 16, 32, 64, 64>
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} {dims = array<i64: 1, 3, 2>} : (tensor<1x16x1x64x1xf16>, tensor<1x1x32x64x1xf16>, tensor<1x16x32x1x1xf32>) -> tensor<1x16x32x1x1xf32>
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} {dims = array<i64: 1, 2, 4>} : (tensor<1x16x32x1x1xf16>, tensor<1x1x32x1x64xf16>, tensor<1x16x1x1x64xf32>) -> tensor<1x16x1x1x64xf32>
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

// -----

// One decoding query (M = 1) of f16: both dots grow to 16 rows along the
// query axis (1), which they share. The K and V tiles, which do not span
// it, keep their 1 there.
// CHECK-LABEL: func.func @attention_matvec
// CHECK: tile = array<i64: 1, 16, 32, 64, 64>
// CHECK-NOT: kg.reduce sum %{{.*}} dims [3]
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} {dims = array<i64: 1, 3, 2>} : (tensor<1x16x1x64x1xf16>, tensor<1x1x32x64x1xf16>, tensor<1x16x32x1x1xf32>) -> tensor<1x16x32x1x1xf32>
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} {dims = array<i64: 1, 2, 4>} : (tensor<1x16x32x1x1xf16>, tensor<1x1x32x1x64xf16>, tensor<1x16x1x1x64xf32>) -> tensor<1x16x1x1x64xf32>
func.func @attention_matvec(%q: tensor<2x1x64xf16>, %k: tensor<2x100x64xf16>, %v: tensor<2x100x64xf16>) -> tensor<2x1x64xf16> {
  %o = kg.kernel @attention_matvec_0(%k, %q, %v) attributes {config = {block_m = 1, block_n = 32, split_kv = 1, num_warps = 4, num_stages = 2}} : (tensor<2x100x64xf16>, tensor<2x1x64xf16>, tensor<2x100x64xf16>) -> tensor<2x1x64xf16> {
  ^bb0(%a: tensor<2x100x64xf16>, %b: tensor<2x1x64xf16>, %c: tensor<2x100x64xf16>):
    %kt = kg.transpose %a [0, 2, 1] : tensor<2x100x64xf16> -> tensor<2x64x100xf16>
    %s = kg.matmul %b, %kt : (tensor<2x1x64xf16>, tensor<2x64x100xf16>) -> tensor<2x1x100xf16>
    %x = kg.cast %s {kg.promotion} : tensor<2x1x100xf16> to tensor<2x1x100xf32>
    %m = kg.reduce max %x dims [2] keepdim : tensor<2x1x100xf32> -> tensor<2x1x1xf32>
    %d = kg.sub %x, %m : (tensor<2x1x100xf32>, tensor<2x1x1xf32>) -> tensor<2x1x100xf32>
    %e = kg.exp %d : tensor<2x1x100xf32>
    %z = kg.reduce sum %e dims [2] keepdim : tensor<2x1x100xf32> -> tensor<2x1x1xf32>
    %p = kg.div %e, %z : (tensor<2x1x100xf32>, tensor<2x1x1xf32>) -> tensor<2x1x100xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<2x1x100xf32> to tensor<2x1x100xf16>
    %out = kg.matmul %ph, %c : (tensor<2x1x100xf16>, tensor<2x100x64xf16>) -> tensor<2x1x64xf16>
    kg.yield %out : tensor<2x1x64xf16>
  }
  return %o : tensor<2x1x64xf16>
}

// -----

// A matrix-vector product (M = 1) of f16: a dot on rows grown to 16 (the
// row of x read again, masked beyond the first), so that Triton pipelines
// the loads of its k loop. W's tile keeps its 1 along M.
// CHECK-LABEL: func.func @matvec
// CHECK: tile = array<i64: 16, 64, 64>
// CHECK-NOT: kg.reduce
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x64x1xf16>, tensor<1x64x64xf16>, tensor<16x1x64xf32>) -> tensor<16x1x64xf32>
// CHECK: kg.tile_store %{{.*}} : tensor<16x1x64xf16>
func.func @matvec(%a: tensor<1x1000xf16>, %b: tensor<1000x300xf16>) -> tensor<1x300xf16> {
  %y = kg.kernel @matvec_0(%a, %b) attributes {config = {block_m = 1, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4, split_k = 1}} : (tensor<1x1000xf16>, tensor<1000x300xf16>) -> tensor<1x300xf16> {
  ^bb0(%x: tensor<1x1000xf16>, %w: tensor<1000x300xf16>):
    %m = kg.matmul %x, %w : (tensor<1x1000xf16>, tensor<1000x300xf16>) -> tensor<1x300xf16>
    kg.yield %m : tensor<1x300xf16>
  }
  return %y : tensor<1x300xf16>
}

// -----

// An exact f32 matrix-vector product has no tensor cores to hide 15 grown
// rows in: it multiplies and sums over K in f32 instead of a dot.
// CHECK-LABEL: func.func @matvec_f32
// CHECK-NOT: kg.tile_dot
// CHECK: %[[P:.*]] = kg.mul %{{.*}}, %{{.*}} : (tensor<1x64x1xf32>, tensor<1x64x64xf32>) -> tensor<1x64x64xf32>
// CHECK: %[[S:.*]] = kg.reduce sum %[[P]] dims [1] keepdim : tensor<1x64x64xf32> -> tensor<1x1x64xf32>
// CHECK: kg.add %{{.*}}, %[[S]] : (tensor<1x1x64xf32>, tensor<1x1x64xf32>) -> tensor<1x1x64xf32>
func.func @matvec_f32(%a: tensor<1x1000xf32>, %b: tensor<1000x300xf32>) -> tensor<1x300xf32> {
  %y = kg.kernel @matvec_f32_0(%a, %b) attributes {config = {block_m = 1, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<1x1000xf32>, tensor<1000x300xf32>) -> tensor<1x300xf32> {
  ^bb0(%x: tensor<1x1000xf32>, %w: tensor<1000x300xf32>):
    %m = kg.matmul %x, %w : (tensor<1x1000xf32>, tensor<1000x300xf32>) -> tensor<1x300xf32>
    kg.yield %m : tensor<1x300xf32>
  }
  return %y : tensor<1x300xf32>
}

// -----

// A one-row product broadcast to the rows of its own B in the epilogue: the
// plan reads B's rows along the dot's k, so the kernel stores tiles that
// span k. Growing M to 16 would grow those tiles too; the product is summed
// over K instead.
// CHECK-LABEL: func.func @matvec_stored_along_k
// CHECK-NOT: kg.tile_dot
// CHECK: kg.reduce sum %{{.*}} dims [1] keepdim : tensor<1x16x128xf32> -> tensor<1x1x128xf32>
// CHECK: kg.tile_store %{{.*}} : tensor<1x16x128xbf16>
func.func @matvec_stored_along_k(%a: tensor<16xbf16>, %b: tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  %y = kg.kernel @matvec_stored_along_k_0(%a, %b) attributes {config = {block_m = 1, block_n = 128, block_k = 16, group_m = 1, num_warps = 4, num_stages = 1}} : (tensor<16xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16> {
  ^bb0(%x: tensor<16xbf16>, %w: tensor<16x128xbf16>):
    %row = kg.reshape %x : tensor<16xbf16> -> tensor<1x16xbf16>
    %m = kg.matmul %row, %w : (tensor<1x16xbf16>, tensor<16x128xbf16>) -> tensor<1x128xbf16>
    %s = kg.add %m, %w : (tensor<1x128xbf16>, tensor<16x128xbf16>) -> tensor<16x128xbf16>
    kg.yield %s : tensor<16x128xbf16>
  }
  return %y : tensor<16x128xbf16>
}

// -----

// One key: Q K^T has N = 1 along the keys axis, which the softmax reduces
// over, so it is not grown (its grown lanes would join the reduction): the
// product is summed over the head dimension instead. P V has K = 1.
// CHECK-LABEL: func.func @attention_one_key
// CHECK-NOT: kg.tile_dot
// CHECK: kg.mul %{{.*}}, %{{.*}} : (tensor<1x3x1x64x1xf32>, tensor<1x1x1x64x1xf32>) -> tensor<1x3x1x64x1xf32>
// CHECK-NEXT: kg.reduce sum %{{.*}} dims [3] keepdim : tensor<1x3x1x64x1xf32> -> tensor<1x3x1x1x1xf32>
func.func @attention_one_key(%q: tensor<2x3x64xf16>, %k: tensor<2x1x64xf16>, %v: tensor<2x1x64xf16>) -> tensor<2x3x64xf16> {
  %o = kg.kernel @attention_one_key_0(%k, %q, %v) attributes {config = {block_m = 3, block_n = 1, split_kv = 1, num_warps = 4, num_stages = 2}} : (tensor<2x1x64xf16>, tensor<2x3x64xf16>, tensor<2x1x64xf16>) -> tensor<2x3x64xf16> {
  ^bb0(%a: tensor<2x1x64xf16>, %b: tensor<2x3x64xf16>, %c: tensor<2x1x64xf16>):
    %kt = kg.transpose %a [0, 2, 1] : tensor<2x1x64xf16> -> tensor<2x64x1xf16>
    %s = kg.matmul %b, %kt : (tensor<2x3x64xf16>, tensor<2x64x1xf16>) -> tensor<2x3x1xf16>
    %x = kg.cast %s {kg.promotion} : tensor<2x3x1xf16> to tensor<2x3x1xf32>
    %m = kg.reduce max %x dims [2] keepdim : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
    %d = kg.sub %x, %m : (tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
    %e = kg.exp %d : tensor<2x3x1xf32>
    %z = kg.reduce sum %e dims [2] keepdim : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
    %p = kg.div %e, %z : (tensor<2x3x1xf32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<2x3x1xf32> to tensor<2x3x1xf16>
    %out = kg.matmul %ph, %c : (tensor<2x3x1xf16>, tensor<2x1x64xf16>) -> tensor<2x3x64xf16>
    kg.yield %out : tensor<2x3x64xf16>
  }
  return %o : tensor<2x3x64xf16>
}

// -----

// K = 1: an outer product, exact as a broadcast multiply.
// CHECK-LABEL: func.func @outer
// CHECK-NOT: kg.tile_dot
// CHECK-NOT: kg.reduce
// CHECK: %[[P:.*]] = kg.mul %{{.*}}, %{{.*}} : (tensor<40x1x1xf32>, tensor<1x1x24xf32>) -> tensor<40x1x24xf32>
// CHECK: kg.add %{{.*}}, %[[P]]
func.func @outer(%a: tensor<40x1xf32>, %b: tensor<1x24xf32>) -> tensor<40x24xf32> {
  %y = kg.kernel @outer_0(%a, %b) attributes {config = {block_m = 40, block_n = 24, block_k = 1, group_m = 8, num_warps = 4, num_stages = 1}} : (tensor<40x1xf32>, tensor<1x24xf32>) -> tensor<40x24xf32> {
  ^bb0(%x: tensor<40x1xf32>, %w: tensor<1x24xf32>):
    %m = kg.matmul %x, %w : (tensor<40x1xf32>, tensor<1x24xf32>) -> tensor<40x24xf32>
    kg.yield %m : tensor<40x24xf32>
  }
  return %y : tensor<40x24xf32>
}

// -----

// M = 8 covers its whole axis: the tiles along M grow to 16; kg-pad-mask
// later masks the 8 new rows, which lie past the end.
// CHECK-LABEL: func.func @small_m
// CHECK: tile = array<i64: 16, 64, 48>
// CHECK: kg.tile_load {{.*}} : memref<8x64x1xbf16, strided<[64, 1, 0]>> -> tensor<16x64x1xbf16>
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x64x1xbf16>, tensor<1x64x48xbf16>, tensor<16x1x48xf32>) -> tensor<16x1x48xf32>
// CHECK: kg.tile_store {{.*}} : tensor<16x1x48xbf16>
func.func @small_m(%a: tensor<8x64xbf16>, %b: tensor<64x48xbf16>) -> tensor<8x48xbf16> {
  %y = kg.kernel @small_m_0(%a, %b) attributes {config = {block_m = 8, block_n = 48, block_k = 64, group_m = 8, num_warps = 4, num_stages = 1}} : (tensor<8x64xbf16>, tensor<64x48xbf16>) -> tensor<8x48xbf16> {
  ^bb0(%x: tensor<8x64xbf16>, %w: tensor<64x48xbf16>):
    %m = kg.matmul %x, %w : (tensor<8x64xbf16>, tensor<64x48xbf16>) -> tensor<8x48xbf16>
    kg.yield %m : tensor<8x48xbf16>
  }
  return %y : tensor<8x48xbf16>
}

// -----

// f32 dots say their precision: exact (ieee) unless the matmul asked for tf32.
// CHECK-LABEL: func.func @f32_precision
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} precision = ieee
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} precision = tf32
func.func @f32_precision(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %y = kg.kernel @ieee_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 32, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>):
    %m = kg.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  %z = kg.kernel @tf32_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 32, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>):
    %m = kg.matmul %x, %w precision = tf32 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y, %z : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// 8-bit float dots stay on sm_89 and newer; below, both operands become
// f16 first.
// CHECK-LABEL: func.func @fp8
// CHECK-NOT: kg.cast
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64x64x1xf8E4M3FN>, tensor<1x64x64xf8E4M3FN>
// SM80-LABEL: func.func @fp8
// SM80: %[[A:.*]] = kg.cast %{{.*}} : tensor<64x64x1xf8E4M3FN> to tensor<64x64x1xf16>
// SM80: %[[B:.*]] = kg.cast %{{.*}} : tensor<1x64x64xf8E4M3FN> to tensor<1x64x64xf16>
// SM80: kg.tile_dot %[[A]], %[[B]], %{{.*}} : (tensor<64x64x1xf16>, tensor<1x64x64xf16>
func.func @fp8(%a: tensor<64x128xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x128xf8E4M3FN>, %w: tensor<128x64xf8E4M3FN>):
    %m = kg.matmul %x, %w : (tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// precision = fast_accum stays on an 8-bit float dot from sm_89 on; below,
// where the dot becomes one of f16 casts, it is dropped: an f16 dot sums
// nothing outside f32, and the verifier refuses fast_accum on f16.
// CHECK-LABEL: func.func @fp8_fast_accum
// CHECK-NOT: kg.cast
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} precision = fast_accum : (tensor<64x64x1xf8E4M3FN>, tensor<1x64x64xf8E4M3FN>
// SM80-LABEL: func.func @fp8_fast_accum
// SM80: %[[A:.*]] = kg.cast %{{.*}} : tensor<64x64x1xf8E4M3FN> to tensor<64x64x1xf16>
// SM80: %[[B:.*]] = kg.cast %{{.*}} : tensor<1x64x64xf8E4M3FN> to tensor<1x64x64xf16>
// SM80: kg.tile_dot %[[A]], %[[B]], %{{[^ ]*}} : (tensor<64x64x1xf16>, tensor<1x64x64xf16>
func.func @fp8_fast_accum(%a: tensor<64x128xf8E4M3FN>, %b: tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_fast_accum_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x128xf8E4M3FN>, %w: tensor<128x64xf8E4M3FN>):
    %m = kg.matmul %x, %w precision = fast_accum : (tensor<64x128xf8E4M3FN>, tensor<128x64xf8E4M3FN>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}

// -----

// A dot that Triton takes as it is (f16, tiles of 64 and more): unchanged.
// CHECK-LABEL: func.func @legal
// CHECK: tile = array<i64: 64, 64, 64>
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64x64x1xf16>, tensor<1x64x64xf16>, tensor<64x1x64xf32>) -> tensor<64x1x64xf32>
func.func @legal(%a: tensor<64x128xf16>, %b: tensor<128x64xf16>) -> tensor<64x64xf16> {
  %y = kg.kernel @legal_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 4}} : (tensor<64x128xf16>, tensor<128x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x128xf16>, %w: tensor<128x64xf16>):
    %m = kg.matmul %x, %w : (tensor<64x128xf16>, tensor<128x64xf16>) -> tensor<64x64xf16>
    kg.yield %m : tensor<64x64xf16>
  }
  return %y : tensor<64x64xf16>
}

// -----

// A dot tile under 16 that does not cover its axis cannot grow: the new
// rows would belong to the next tile.
func.func @too_small(%a: tensor<100x64xf16>, %b: tensor<64x64xf16>) -> tensor<100x64xf16> {
  // expected-error @+1 {{kernel @too_small_0: a dot tile of 8 along axis 0 does not cover the axis (100); choose a tile of at least 16 there}}
  %y = kg.kernel @too_small_0(%a, %b) attributes {config = {block_m = 8, block_n = 64, block_k = 64, group_m = 8, num_warps = 4, num_stages = 1}} : (tensor<100x64xf16>, tensor<64x64xf16>) -> tensor<100x64xf16> {
  ^bb0(%x: tensor<100x64xf16>, %w: tensor<64x64xf16>):
    %m = kg.matmul %x, %w : (tensor<100x64xf16>, tensor<64x64xf16>) -> tensor<100x64xf16>
    kg.yield %m : tensor<100x64xf16>
  }
  return %y : tensor<100x64xf16>
}

// -----

// A dynamic extent may be any length: a tile of 8 rows cannot grow to 16
// over it, and the error says the extent is dynamic, not the size kg-tile
// plans it at.
func.func @too_small_dynamic(%a: tensor<?x64xbf16>, %b: tensor<64x48xbf16>) -> tensor<?x48xbf16> {
  // expected-error @+1 {{kernel @too_small_dynamic_0: a dot tile of 8 along axis 0 does not cover the dynamic extent, whose size each call gives; choose a tile of at least 16 there}}
  %y = kg.kernel @too_small_dynamic_0(%a, %b) attributes {config = {block_m = 8, block_n = 48, block_k = 64, group_m = 8, num_warps = 4, num_stages = 1}} : (tensor<?x64xbf16>, tensor<64x48xbf16>) -> tensor<?x48xbf16> {
  ^bb0(%x: tensor<?x64xbf16>, %w: tensor<64x48xbf16>):
    %m = kg.matmul %x, %w : (tensor<?x64xbf16>, tensor<64x48xbf16>) -> tensor<?x48xbf16>
    kg.yield %m : tensor<?x48xbf16>
  }
  return %y : tensor<?x48xbf16>
}

// -----

// Rows of a dynamic extent in tiles of 64: the dot is legal as it is, and
// stays as the static kernel's would.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<64x64x1xf16>, tensor<1x64x32xf16>, tensor<64x1x32xf32>) -> tensor<64x1x32xf32>
// CHECK: kg.tile_store {{.*}} : tensor<64x1x32xf16>, memref<?x1x32xf16
func.func @dynamic_rows(%a: tensor<?x64xf16>, %b: tensor<64x32xf16>) -> tensor<?x32xf16> {
  %y = kg.kernel @dynamic_rows_0(%a, %b) attributes {config = {block_m = 64, block_n = 32, block_k = 64, group_m = 8, num_warps = 4, num_stages = 1}} : (tensor<?x64xf16>, tensor<64x32xf16>) -> tensor<?x32xf16> {
  ^bb0(%x: tensor<?x64xf16>, %w: tensor<64x32xf16>):
    %m = kg.matmul %x, %w : (tensor<?x64xf16>, tensor<64x32xf16>) -> tensor<?x32xf16>
    kg.yield %m : tensor<?x32xf16>
  }
  return %y : tensor<?x32xf16>
}

// -----

// A matmul whose k loop asks for warp specialization: Triton 3.6 does it
// for loops of pointer loads from sm_100 on, and fails on sm_90 (TMA
// descriptors are its way there: see the next case).
// SM100-LABEL: func.func @warp_specialized
// SM100: kg.tile_dot
// SM100: } {kg.axis = 1 : i64, tt.warp_specialize}
func.func @warp_specialized(%a: tensor<64x256xf16>, %b: tensor<256x64xf16>) -> tensor<64x64xf16> {
  // expected-error @+1 {{kernel @ws_0: warp_specialize needs sm_100 or newer, where Triton warp-specializes loops of pointer loads, or tma = true on sm_90 or newer; the target is sm_90 and the kernel has no tma}}
  %y = kg.kernel @ws_0(%a, %b) attributes {config = {block_k = 64, warp_specialize = true}} : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x256xf16>, %w: tensor<256x64xf16>):
    %m = kg.matmul %x, %w : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16>
    kg.yield %m : tensor<64x64xf16>
  }
  return %y : tensor<64x64xf16>
}

// -----

// With tma = true the k loop reads through TMA descriptors, which Triton
// 3.6 warp-specializes on sm_90: the flag stays on the loop.
// CHECK-LABEL: func.func @warp_specialized_tma
// CHECK: kg.tile_dot
// CHECK: } {kg.axis = 1 : i64, tt.warp_specialize}
func.func @warp_specialized_tma(%a: tensor<64x256xf16>, %b: tensor<256x64xf16>) -> tensor<64x64xf16> {
  %y = kg.kernel @ws_tma_0(%a, %b) attributes {config = {block_k = 64, warp_specialize = true, tma = true}} : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x256xf16>, %w: tensor<256x64xf16>):
    %m = kg.matmul %x, %w : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16>
    kg.yield %m : tensor<64x64xf16>
  }
  return %y : tensor<64x64xf16>
}
