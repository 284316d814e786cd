// kg-tile's defaults for kernels whose rows, keys or elements change the
// tiles: skinny products of ragged rows, decoding's split of the keys, and
// 8-bit floats' k step. With the shipped table (TABLE) and without it
// (HEURISTIC) the same: no entry speaks for these kernels (a ragged product
// is a table variant of its own; a decode entry's split is not carried).
// RUN: kgc-opt %s --split-input-file --kg-tile='tuned-defaults=off' | FileCheck %s
// RUN: kgc-opt %s --split-input-file --kg-tile | FileCheck %s

// 3 rows against 1000 x 777 f16 weights: a weight row of 777 elements is
// 1554 bytes, not whole 16-byte vectors. 32-column tiles over 64-deep
// steps, the k loop split 8 ways, and a kernel summing the partials.
// CHECK-LABEL: func.func @ragged
// CHECK: kg.kernel @ragged_0_partials(%arg0, %arg1) attributes {config = {block_k = 64 : i64, block_m = 3 : i64, block_n = 32 : i64, group_m = 1 : i64, num_stages = 4 : i64, num_warps = 4 : i64, split_k = 8 : i64}, grid = array<i64: 25, 8, 1>
// CHECK: kg.kernel @ragged_0_reduce(
func.func @ragged(%x: tensor<3x1000xf16>, %w: tensor<1000x777xf16>) -> tensor<3x777xf16> {
  %y = kg.kernel @ragged_0(%x, %w) : (tensor<3x1000xf16>, tensor<1000x777xf16>) -> tensor<3x777xf16> {
  ^bb0(%a: tensor<3x1000xf16>, %b: tensor<1000x777xf16>):
    %m = kg.matmul %a, %b : (tensor<3x1000xf16>, tensor<1000x777xf16>) -> tensor<3x777xf16>
    kg.yield %m : tensor<3x777xf16>
  }
  return %y : tensor<3x777xf16>
}

// -----

// The same product of aligned rows (1024 and 768 f16 elements): nothing
// ragged to hide, so not these tiles. The heuristic streams 16-column tiles
// over 128-deep steps; the table's nearest entry may split it, never into
// 32-column tiles.
// CHECK-LABEL: func.func @aligned
// CHECK: kg.kernel @aligned_0
// CHECK-SAME: block_n = 16 : i64
// CHECK-NOT: block_n = 32
// CHECK: return
func.func @aligned(%x: tensor<3x1024xf16>, %w: tensor<1024x768xf16>) -> tensor<3x768xf16> {
  %y = kg.kernel @aligned_0(%x, %w) : (tensor<3x1024xf16>, tensor<1024x768xf16>) -> tensor<3x768xf16> {
  ^bb0(%a: tensor<3x1024xf16>, %b: tensor<1024x768xf16>):
    %m = kg.matmul %a, %b : (tensor<3x1024xf16>, tensor<1024x768xf16>) -> tensor<3x768xf16>
    kg.yield %m : tensor<3x768xf16>
  }
  return %y : tensor<3x768xf16>
}

// -----

// Decoding: 4 key/value heads of 2 packed query heads (4 programs) over
// 1000 keys in 16 tiles of 64: the keys split while the programs leave
// most of the 132 SMs idle, down to one tile a split (16). The shipped
// table's entry of 512 keys (8 splits) gives its tiles, not its split.
// CHECK-LABEL: func.func @decode
// CHECK: kg.kernel @decode_0(%arg1, %arg2, %arg0) attributes {config = {block_n = 64 : i64, num_stages = 2 : i64, num_warps = 4 : i64, pack_heads = true, split_kv = 16 : i64}, grid = array<i64: 64, 1, 1>
// CHECK: kg.kernel @decode_0_combine(
func.func @decode(%q: tensor<1x8x1x64xf16>, %k: tensor<1x4x1000x64xf16>, %v: tensor<1x4x1000x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = kg.kernel @decode_0(%k, %v, %q) : (tensor<1x4x1000x64xf16>, tensor<1x4x1000x64xf16>, tensor<1x8x1x64xf16>) -> tensor<1x8x1x64xf16> {
  ^bb0(%a: tensor<1x4x1000x64xf16>, %b: tensor<1x4x1000x64xf16>, %c: tensor<1x8x1x64xf16>):
    %k5 = kg.reshape %a : tensor<1x4x1000x64xf16> -> tensor<1x4x1x1000x64xf16>
    %kb = kg.broadcast_to %k5 : tensor<1x4x1x1000x64xf16> -> tensor<1x4x2x1000x64xf16>
    %kh = kg.reshape %kb : tensor<1x4x2x1000x64xf16> -> tensor<1x8x1000x64xf16>
    %v5 = kg.reshape %b : tensor<1x4x1000x64xf16> -> tensor<1x4x1x1000x64xf16>
    %vb = kg.broadcast_to %v5 : tensor<1x4x1x1000x64xf16> -> tensor<1x4x2x1000x64xf16>
    %vh = kg.reshape %vb : tensor<1x4x2x1000x64xf16> -> tensor<1x8x1000x64xf16>
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

// Over 256 keys, 4 tiles: under 8 tiles each split keeps two (the combining
// kernel's launch weighs more against a short loop), so 2 splits.
// CHECK-LABEL: func.func @decode_few_keys
// CHECK: kg.kernel @decode_few_keys_0(%arg1, %arg2, %arg0) attributes {config = {block_n = 64 : i64, num_stages = 2 : i64, num_warps = 4 : i64, pack_heads = true, split_kv = 2 : i64}, grid = array<i64: 8, 1, 1>
func.func @decode_few_keys(%q: tensor<1x8x1x64xf16>, %k: tensor<1x4x256x64xf16>, %v: tensor<1x4x256x64xf16>) -> tensor<1x8x1x64xf16> {
  %o = kg.kernel @decode_few_keys_0(%k, %v, %q) : (tensor<1x4x256x64xf16>, tensor<1x4x256x64xf16>, tensor<1x8x1x64xf16>) -> tensor<1x8x1x64xf16> {
  ^bb0(%a: tensor<1x4x256x64xf16>, %b: tensor<1x4x256x64xf16>, %c: tensor<1x8x1x64xf16>):
    %k5 = kg.reshape %a : tensor<1x4x256x64xf16> -> tensor<1x4x1x256x64xf16>
    %kb = kg.broadcast_to %k5 : tensor<1x4x1x256x64xf16> -> tensor<1x4x2x256x64xf16>
    %kh = kg.reshape %kb : tensor<1x4x2x256x64xf16> -> tensor<1x8x256x64xf16>
    %v5 = kg.reshape %b : tensor<1x4x256x64xf16> -> tensor<1x4x1x256x64xf16>
    %vb = kg.broadcast_to %v5 : tensor<1x4x1x256x64xf16> -> tensor<1x4x2x256x64xf16>
    %vh = kg.reshape %vb : tensor<1x4x2x256x64xf16> -> tensor<1x8x256x64xf16>
    %kt = kg.transpose %kh [0, 1, 3, 2] : tensor<1x8x256x64xf16> -> tensor<1x8x64x256xf16>
    %s = kg.matmul %c, %kt : (tensor<1x8x1x64xf16>, tensor<1x8x64x256xf16>) -> tensor<1x8x1x256xf16>
    %x = kg.cast %s {kg.promotion} : tensor<1x8x1x256xf16> to tensor<1x8x1x256xf32>
    %m = kg.reduce max %x dims [3] keepdim : tensor<1x8x1x256xf32> -> tensor<1x8x1x1xf32>
    %d = kg.sub %x, %m : (tensor<1x8x1x256xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x256xf32>
    %e = kg.exp %d : tensor<1x8x1x256xf32>
    %z = kg.reduce sum %e dims [3] keepdim : tensor<1x8x1x256xf32> -> tensor<1x8x1x1xf32>
    %p = kg.div %e, %z : (tensor<1x8x1x256xf32>, tensor<1x8x1x1xf32>) -> tensor<1x8x1x256xf32>
    %ph = kg.cast %p {kg.promotion} : tensor<1x8x1x256xf32> to tensor<1x8x1x256xf16>
    %out = kg.matmul %ph, %vh : (tensor<1x8x1x256xf16>, tensor<1x8x256x64xf16>) -> tensor<1x8x1x64xf16>
    kg.yield %out : tensor<1x8x1x64xf16>
  }
  return %o : tensor<1x8x1x64xf16>
}

// -----

// 8-bit floats step 128 deep (128 bytes of each operand row, as 16-bit
// floats' 64-deep steps are).
// CHECK-LABEL: func.func @fp8
// CHECK: kg.kernel @fp8_0(%arg0, %arg1) attributes {config = {block_k = 128 : i64, block_m = 128 : i64, block_n = 64 : i64
func.func @fp8(%x: tensor<256x512xf8E4M3FN>, %w: tensor<512x256xf8E4M3FN>) -> tensor<256x256xf32> {
  %y = kg.kernel @fp8_0(%x, %w) : (tensor<256x512xf8E4M3FN>, tensor<512x256xf8E4M3FN>) -> tensor<256x256xf32> {
  ^bb0(%a: tensor<256x512xf8E4M3FN>, %b: tensor<512x256xf8E4M3FN>):
    %m = kg.matmul %a, %b : (tensor<256x512xf8E4M3FN>, tensor<512x256xf8E4M3FN>) -> tensor<256x256xf32>
    kg.yield %m : tensor<256x256xf32>
  }
  return %y : tensor<256x256xf32>
}
