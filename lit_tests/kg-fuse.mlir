// kg-fuse partitions the kg ops of each function into kg.kernel ops, each
// one GPU kernel: elementwise chains, reductions with their prologue and
// epilogue, matmuls with theirs. Values used outside their kernel become its
// results; constants are copied into every kernel that uses them.
//
// The first part of this file is composite (softmax, norms, f16 math) and
// runs through kg-decompose first:
// RUN: kgc-opt %s --kg-decompose --kg-fuse | FileCheck %s
// The attention kernels of the first part without the attention fusion
// (and with skinny-prologue off, which keeps a softmax over the k of more
// than 16 rows out of a product, to show the softmax as a prologue):
// RUN: kgc-opt %s --kg-decompose --kg-fuse='fuse-attention=false rules-off=skinny-prologue' | FileCheck %s --check-prefix=NOATT
// With store-narrow off (a widening cast stays where the greedy merges left
// it):
// RUN: kgc-opt %s --kg-decompose --kg-fuse='store-narrow=false' | FileCheck %s --check-prefix=WIDE
// With recompute-positions off (a kernel of positions and constants alone
// is stored for the kernels that read it):
// RUN: kgc-opt %s --kg-decompose --kg-fuse='recompute-positions=false' | FileCheck %s --check-prefix=STORED
// The second part, from the line `// PRIMITIVE INPUT`, is made of primitives
// already and runs through kg-fuse alone:
// RUN: sed -n '/^\/\/ PRIMITIVE INPUT$/,$p' %s | kgc-opt --kg-fuse | FileCheck %s --check-prefix=PRIM

// A dynamic extent (`?`) is partitioned as at EXTENT_HINT (256) rows, and
// the kernels keep it in their types: at 256 rows (more than a skinny
// product's) the norm is a kernel of its own, the product takes its bias
// and GELU.
// CHECK-LABEL: func.func @dynamic_rows(
// CHECK: %[[N:.*]] = kg.kernel @dynamic_rows_0_reduction(%arg0, %arg1) : (tensor<?x128xf16>, tensor<128xf16>) -> tensor<?x128xf16>
// CHECK: kg.reduce sum %{{.*}} dims [1] keepdim : tensor<?x128xf32> -> tensor<?x1xf32>
// CHECK: %[[Y:.*]] = kg.kernel @dynamic_rows_1_matmul(%[[N]], %arg2, %arg3) : (tensor<?x128xf16>, tensor<128x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
// CHECK: kg.gelu %{{.*}} : tensor<?x64xf32>
// CHECK-NOT: kg.kernel
// CHECK: return %[[Y]] : tensor<?x64xf16>
func.func @dynamic_rows(%x: tensor<?x128xf16>, %g: tensor<128xf16>, %w: tensor<128x64xf16>, %b: tensor<64xf16>) -> tensor<?x64xf16> {
  %n = kg.rms_norm %x weight %g normalized_shape [128] eps 1.0e-6 : (tensor<?x128xf16>, tensor<128xf16>) -> tensor<?x128xf16>
  %y = kg.matmul %n, %w : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
  %z = kg.add %y, %b : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
  %a = kg.gelu %z : tensor<?x64xf16>
  return %a : tensor<?x64xf16>
}

// A gated MLP of one row whose projections come back as (1, 1, N), as a
// module's (batch, sequence, features) do. The reshape adds a dimension of
// size 1 and reads the matmuls' own elements, so silu(g) * u is the
// epilogue of one kernel of both matmuls, as it is for 8 rows; a one-row
// matmul seen through such a view once stopped every fusion after it.
// CHECK-LABEL: func.func @one_row_gated_through_a_view(
// CHECK: %[[K:.*]] = kg.kernel @one_row_gated_through_a_view_0_matmul(%arg0, %arg1, %arg2) : (tensor<1x256xf16>, tensor<256x512xf16>, tensor<256x512xf16>) -> tensor<1x1x512xf16>
// CHECK-NOT: kg.kernel
// CHECK: return %[[K]]
func.func @one_row_gated_through_a_view(%x: tensor<1x256xf16>, %wg: tensor<256x512xf16>, %wu: tensor<256x512xf16>) -> tensor<1x1x512xf16> {
  %g = kg.matmul %x, %wg : (tensor<1x256xf16>, tensor<256x512xf16>) -> tensor<1x512xf16>
  %u = kg.matmul %x, %wu : (tensor<1x256xf16>, tensor<256x512xf16>) -> tensor<1x512xf16>
  %g3 = kg.reshape %g : tensor<1x512xf16> -> tensor<1x1x512xf16>
  %u3 = kg.reshape %u : tensor<1x512xf16> -> tensor<1x1x512xf16>
  %s = kg.silu %g3 : tensor<1x1x512xf16>
  %p = kg.mul %s, %u3 : (tensor<1x1x512xf16>, tensor<1x1x512xf16>) -> tensor<1x1x512xf16>
  return %p : tensor<1x1x512xf16>
}

// A one-row matmul broadcast to four rows is not such a view: the exp
// iterates over four rows, and the matmul's one row is read at each, so
// it is not the matmul's own map; the matmul keeps a kernel of its own.
// CHECK-LABEL: func.func @one_row_broadcast_to_rows(
// CHECK: %[[Y:.*]] = kg.kernel @one_row_broadcast_to_rows_0_matmul(%arg0, %arg1) : (tensor<1x256xf16>, tensor<256x64xf16>) -> tensor<1x64xf16>
// CHECK: kg.kernel @one_row_broadcast_to_rows_1_pointwise(%[[Y]]) : (tensor<1x64xf16>) -> tensor<4x64xf16>
func.func @one_row_broadcast_to_rows(%x: tensor<1x256xf16>, %w: tensor<256x64xf16>) -> tensor<4x64xf16> {
  %y = kg.matmul %x, %w : (tensor<1x256xf16>, tensor<256x64xf16>) -> tensor<1x64xf16>
  %b = kg.broadcast_to %y : tensor<1x64xf16> -> tensor<4x64xf16>
  %e = kg.exp %b : tensor<4x64xf16>
  return %e : tensor<4x64xf16>
}

// Nor is a slice of a matmul's columns: it reads the matmul at an offset,
// which is not its own map either.
// CHECK-LABEL: func.func @matmul_sliced(
// CHECK: %[[Y:.*]] = kg.kernel @matmul_sliced_0_matmul(%arg0, %arg1) : (tensor<16x256xf16>, tensor<256x64xf16>) -> tensor<16x64xf16>
// CHECK: kg.kernel @matmul_sliced_1_pointwise(%[[Y]]) : (tensor<16x64xf16>) -> tensor<16x32xf16>
func.func @matmul_sliced(%x: tensor<16x256xf16>, %w: tensor<256x64xf16>) -> tensor<16x32xf16> {
  %y = kg.matmul %x, %w : (tensor<16x256xf16>, tensor<256x64xf16>) -> tensor<16x64xf16>
  %s = kg.slice %y offsets [0, 32] strides [1, 1] : tensor<16x64xf16> -> tensor<16x32xf16>
  %e = kg.exp %s : tensor<16x32xf16>
  return %e : tensor<16x32xf16>
}

// A slice read in two pieces by two reductions is stored for the second,
// so it cannot join the kernel of the first, which iterates over the
// first piece only and would store the slice in part; it becomes a kernel
// of its own that each reduction reads.
// CHECK-LABEL: func.func @slice_read_in_two_pieces(
// CHECK: %[[Q:.*]] = kg.kernel @slice_read_in_two_pieces_0_pointwise(%arg0) : (tensor<5x144xf32>) -> tensor<5x48xf32>
// CHECK: %[[A:.*]] = kg.kernel @slice_read_in_two_pieces_1_reduction(%[[Q]]) : (tensor<5x48xf32>) -> tensor<5x1xf32>
// CHECK: %[[B:.*]] = kg.kernel @slice_read_in_two_pieces_2_reduction(%[[Q]]) : (tensor<5x48xf32>) -> tensor<5x1xf32>
// CHECK: kg.kernel @slice_read_in_two_pieces_3_pointwise(%arg0, %[[A]], %[[B]])
func.func @slice_read_in_two_pieces(%y: tensor<5x144xf32>) -> tensor<5x48xf32> {
  %q = kg.slice %y offsets [0, 0] strides [1, 1] : tensor<5x144xf32> -> tensor<5x48xf32>
  %k = kg.slice %y offsets [0, 48] strides [1, 1] : tensor<5x144xf32> -> tensor<5x48xf32>
  %a = kg.slice %q offsets [0, 0] strides [1, 1] : tensor<5x48xf32> -> tensor<5x17xf32>
  %b = kg.slice %q offsets [0, 17] strides [1, 1] : tensor<5x48xf32> -> tensor<5x31xf32>
  %sa = kg.reduce sum %a dims [1] keepdim : tensor<5x17xf32> -> tensor<5x1xf32>
  %sb = kg.reduce sum %b dims [1] keepdim : tensor<5x31xf32> -> tensor<5x1xf32>
  %r = kg.relu %k : tensor<5x48xf32>
  %t = kg.add %r, %sa : (tensor<5x48xf32>, tensor<5x1xf32>) -> tensor<5x48xf32>
  %u = kg.sub %t, %sb : (tensor<5x48xf32>, tensor<5x1xf32>) -> tensor<5x48xf32>
  return %u : tensor<5x48xf32>
}

// ---------------------------------------------------------------------------
// Reductions with prologue and epilogue: one kernel each
// ---------------------------------------------------------------------------

// The promotions to f32 and back stay at the kernel's edges: f16 is read
// and written, the math is f32.
// CHECK-LABEL: func.func @softmax_f16(
// CHECK-SAME: %[[X:.*]]: tensor<16x1000xf16>)
// CHECK-NEXT: %[[K:.*]] = kg.kernel @softmax_f16_0_reduction(%[[X]]) : (tensor<16x1000xf16>) -> tensor<16x1000xf16> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<16x1000xf16>):
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[A]] {kg.promotion} : tensor<16x1000xf16> to tensor<16x1000xf32>
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[W]] dims [1] keepdim
// CHECK-NEXT: %[[S:.*]] = kg.sub %[[W]], %[[M]]
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[S]]
// CHECK-NEXT: %[[Z:.*]] = kg.reduce sum %[[E]] dims [1] keepdim
// CHECK-NEXT: %[[P:.*]] = kg.div %[[E]], %[[Z]]
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[P]] {kg.promotion} : tensor<16x1000xf32> to tensor<16x1000xf16>
// CHECK-NEXT: kg.yield %[[N]] : tensor<16x1000xf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[K]] : tensor<16x1000xf16>
func.func @softmax_f16(%x: tensor<16x1000xf16>) -> tensor<16x1000xf16> {
  %y = kg.softmax %x dim 1 : tensor<16x1000xf16>
  return %y : tensor<16x1000xf16>
}

// The constants 1/N and eps are copied in, ahead of the ops.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:.*]]: tensor<32x512xf32>, %[[G:.*]]: tensor<512xf32>)
// CHECK-NEXT: %[[K:.*]] = kg.kernel @rms_norm_0_reduction(%[[X]], %[[G]]) : (tensor<32x512xf32>, tensor<512xf32>) -> tensor<32x512xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<32x512xf32>, %[[B:.*]]: tensor<512xf32>):
// CHECK-NEXT: %[[INV:.*]] = kg.constant 0.001953125 : tensor<f32>
// CHECK-NEXT: %[[EPS:.*]] = kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[A]]
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[SQ]] dims [1] keepdim
// CHECK-NEXT: %[[MS:.*]] = kg.mul %[[SUM]], %[[INV]]
// CHECK-NEXT: %[[V:.*]] = kg.add %[[MS]], %[[EPS]]
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %[[V]]
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[A]], %[[R]]
// CHECK-NEXT: %[[YG:.*]] = kg.mul %[[Y]], %[[B]]
// CHECK-NEXT: kg.yield %[[YG]] : tensor<32x512xf32>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[K]]
func.func @rms_norm(%x: tensor<32x512xf32>, %g: tensor<512xf32>) -> tensor<32x512xf32> {
  %y = kg.rms_norm %x weight %g normalized_shape [512] eps 1.0e-5
      : (tensor<32x512xf32>, tensor<512xf32>) -> tensor<32x512xf32>
  return %y : tensor<32x512xf32>
}

// CHECK-LABEL: func.func @layer_norm(
// CHECK-NEXT: kg.kernel @layer_norm_0_reduction(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<32x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> tensor<32x768xbf16>
// CHECK-COUNT-2: kg.reduce sum
// CHECK: kg.rsqrt
// CHECK: kg.cast %{{.*}} {kg.promotion} : tensor<32x768xf32> to tensor<32x768xbf16>
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: kg.kernel
func.func @layer_norm(%x: tensor<32x768xbf16>, %w: tensor<768xbf16>, %b: tensor<768xbf16>) -> tensor<32x768xbf16> {
  %y = kg.layer_norm %x weight %w bias %b normalized_shape [768] eps 1.0e-5
      : (tensor<32x768xbf16>, tensor<768xbf16>, tensor<768xbf16>) -> tensor<32x768xbf16>
  return %y : tensor<32x768xbf16>
}

// ---------------------------------------------------------------------------
// Matmuls with prologue and epilogue: one kernel each
// ---------------------------------------------------------------------------

// The RMSNorm of the left operand is the matmul's prologue (k of 512).
// CHECK-LABEL: func.func @rmsnorm_matmul(
// CHECK-SAME: %[[X:.*]]: tensor<16x512xf16>, %[[G:.*]]: tensor<512xf16>, %[[W:.*]]: tensor<512x1536xf16>)
// CHECK-NEXT: %[[K:.*]] = kg.kernel @rmsnorm_matmul_0_matmul(%[[X]], %[[G]], %[[W]]) : (tensor<16x512xf16>, tensor<512xf16>, tensor<512x1536xf16>) -> tensor<16x1536xf16> {
// CHECK: kg.constant 0.001953125 : tensor<f32>
// CHECK: kg.reduce sum %{{.*}} dims [1] keepdim : tensor<16x512xf32> -> tensor<16x1xf32>
// CHECK: kg.rsqrt
// CHECK: %[[NORMED:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<16x512xf32> to tensor<16x512xf16>
// CHECK-NEXT: %[[Y:.*]] = kg.matmul %[[NORMED]], %{{.*}} : (tensor<16x512xf16>, tensor<512x1536xf16>) -> tensor<16x1536xf16>
// CHECK-NEXT: kg.yield %[[Y]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[K]]
func.func @rmsnorm_matmul(%x: tensor<16x512xf16>, %gamma: tensor<512xf16>,
                          %w: tensor<512x1536xf16>) -> tensor<16x1536xf16> {
  %normed = kg.rms_norm %x weight %gamma normalized_shape [512] eps 1.0e-5
      : (tensor<16x512xf16>, tensor<512xf16>) -> tensor<16x512xf16>
  %y = kg.matmul %normed, %w : (tensor<16x512xf16>, tensor<512x1536xf16>) -> tensor<16x1536xf16>
  return %y : tensor<16x1536xf16>
}

// Over a k loop past 512 steps the matmul refuses the fold (its rule
// `norm-over-long-k`: the operand scaled in registers at every step lost to a
// norm kernel and a bare product): the norm is a reduction kernel of its own.
// CHECK-LABEL: func.func @rmsnorm_matmul_long_k(
// CHECK-NEXT: %[[N:.*]] = kg.kernel @rmsnorm_matmul_long_k_0_reduction(%arg0, %arg1)
// CHECK: kg.reduce sum
// CHECK: %[[Y:.*]] = kg.kernel @rmsnorm_matmul_long_k_1_matmul(%[[N]], %arg2)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.matmul
// CHECK-NEXT: kg.yield
// The rule turned off, the norm folds:
// RUN: kgc-opt %s --kg-decompose --kg-fuse='rules-off=norm-over-long-k' | FileCheck %s --check-prefix=LONGK
// LONGK-LABEL: func.func @rmsnorm_matmul_long_k(
// LONGK-NEXT: kg.kernel @rmsnorm_matmul_long_k_0_matmul(%arg0, %arg1, %arg2)
// LONGK: kg.reduce sum %{{.*}} dims [1] keepdim : tensor<16x4096xf32> -> tensor<16x1xf32>
// LONGK: kg.matmul
func.func @rmsnorm_matmul_long_k(%x: tensor<16x4096xf16>, %gamma: tensor<4096xf16>,
                                 %w: tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
  %normed = kg.rms_norm %x weight %gamma normalized_shape [4096] eps 1.0e-5
      : (tensor<16x4096xf16>, tensor<4096xf16>) -> tensor<16x4096xf16>
  %y = kg.matmul %normed, %w : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16>
  return %y : tensor<16x6144xf16>
}

// silu(x @ w1) * (x @ w2): two matmuls of one shape meet in the epilogue.
// The f16 round trip between silu and mul is gone: silu's f32 result is
// multiplied directly.
// CHECK-LABEL: func.func @gated_mlp(
// CHECK-COUNT-1: kg.kernel @gated_mlp_0_matmul
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<64x512xf16>, %[[W1:.*]]: tensor<512x1024xf16>, %[[W2:.*]]: tensor<512x1024xf16>):
// CHECK-NEXT: %[[A:.*]] = kg.matmul %[[X]], %[[W1]]
// CHECK-NEXT: %[[AW:.*]] = kg.cast %[[A]] {kg.promotion} : tensor<64x1024xf16> to tensor<64x1024xf32>
// CHECK-NEXT: %[[S:.*]] = kg.silu %[[AW]] : tensor<64x1024xf32>
// CHECK-NEXT: %[[B:.*]] = kg.matmul %[[X]], %[[W2]]
// CHECK-NEXT: %[[BW:.*]] = kg.cast %[[B]] {kg.promotion} : tensor<64x1024xf16> to tensor<64x1024xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[S]], %[[BW]] : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[Y]] {kg.promotion} : tensor<64x1024xf32> to tensor<64x1024xf16>
// CHECK-NEXT: kg.yield %[[N]]
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: kg.kernel
func.func @gated_mlp(%x: tensor<64x512xf16>, %w1: tensor<512x1024xf16>, %w2: tensor<512x1024xf16>) -> tensor<64x1024xf16> {
  %a = kg.matmul %x, %w1 : (tensor<64x512xf16>, tensor<512x1024xf16>) -> tensor<64x1024xf16>
  %s = kg.silu %a : tensor<64x1024xf16>
  %b = kg.matmul %x, %w2 : (tensor<64x512xf16>, tensor<512x1024xf16>) -> tensor<64x1024xf16>
  %y = kg.mul %s, %b : (tensor<64x1024xf16>, tensor<64x1024xf16>) -> tensor<64x1024xf16>
  return %y : tensor<64x1024xf16>
}

// ---------------------------------------------------------------------------
// Attention: softmax(q @ k^T) @ v
// ---------------------------------------------------------------------------

// Q K^T, the softmax over keys and the matmul by V are one attention kernel
// (an online softmax over blocks of keys, kgc.tiling.attention), with the
// transpose of K inside. With fuse-attention=false, a row of n = 256 scores
// fits one tile: the softmax is the first matmul's epilogue, and the second
// matmul is a kernel of its own.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:.*]]: tensor<64x64xf16>, %[[KEY:.*]]: tensor<256x64xf16>, %[[V:.*]]: tensor<256x64xf16>)
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_0_attention(%[[KEY]], %[[Q]], %[[V]]) : (tensor<256x64xf16>, tensor<64x64xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
// CHECK: kg.transpose
// CHECK-NEXT: kg.matmul
// CHECK: kg.reduce max
// CHECK: kg.reduce sum
// CHECK: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
// NOATT-LABEL: func.func @attention(
// NOATT-SAME: %[[Q:.*]]: tensor<64x64xf16>, %[[KEY:.*]]: tensor<256x64xf16>, %[[V:.*]]: tensor<256x64xf16>)
// NOATT-NEXT: %[[P:.*]] = kg.kernel @attention_0_matmul(%[[KEY]], %[[Q]]) : (tensor<256x64xf16>, tensor<64x64xf16>) -> tensor<64x256xf16> {
// NOATT: kg.transpose
// NOATT-NEXT: kg.matmul
// NOATT: kg.reduce max
// NOATT: kg.reduce sum
// NOATT: kg.yield
// NOATT-NEXT: }
// NOATT-NEXT: %[[O:.*]] = kg.kernel @attention_1_matmul(%[[P]], %[[V]]) : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16> {
// NOATT-NEXT: ^bb0
// NOATT-NEXT: kg.matmul
// NOATT-NEXT: kg.yield
// NOATT-NEXT: }
// NOATT-NEXT: return %[[O]]
func.func @attention(%q: tensor<64x64xf16>, %k: tensor<256x64xf16>, %v: tensor<256x64xf16>) -> tensor<64x64xf16> {
  %kt = kg.transpose %k [1, 0] : tensor<256x64xf16> -> tensor<64x256xf16>
  %s = kg.matmul %q, %kt : (tensor<64x64xf16>, tensor<64x256xf16>) -> tensor<64x256xf16>
  %p = kg.softmax %s dim 1 : tensor<64x256xf16>
  %o = kg.matmul %p, %v : (tensor<64x256xf16>, tensor<256x64xf16>) -> tensor<64x64xf16>
  return %o : tensor<64x64xf16>
}

// However many keys: one attention kernel. With fuse-attention=false, a row
// of n = 512 does not fit a matmul epilogue: the scores leave the first
// kernel (in f16, as the product gives them: the second kernel widens them,
// store-narrow), and the softmax becomes the prologue of the second matmul,
// whose k it reduces over (the max in a loop of its own, the sum beside the
// dot, the division by it after the loop).
// CHECK-LABEL: func.func @attention_wide(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_wide_0_attention(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<512x64xf16>, tensor<64x64xf16>, tensor<512x64xf16>) -> tensor<64x64xf16> {
// CHECK: kg.reduce max %{{.*}} dims [1] keepdim : tensor<64x512xf32> -> tensor<64x1xf32>
// CHECK: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
// NOATT-LABEL: func.func @attention_wide(
// NOATT-NEXT: %[[S:.*]] = kg.kernel @attention_wide_0_matmul(%{{.*}}, %{{.*}}) : (tensor<512x64xf16>, tensor<64x64xf16>) -> tensor<64x512xf16> {
// NOATT-NOT: kg.reduce
// NOATT: kg.yield
// NOATT-NEXT: }
// NOATT-NEXT: %[[O:.*]] = kg.kernel @attention_wide_1_matmul(%[[S]], %{{.*}}) : (tensor<64x512xf16>, tensor<512x64xf16>) -> tensor<64x64xf16> {
// NOATT: kg.cast %{{.*}} {kg.promotion} : tensor<64x512xf16> to tensor<64x512xf32>
// NOATT: kg.reduce max %{{.*}} dims [1] keepdim : tensor<64x512xf32> -> tensor<64x1xf32>
// NOATT: kg.reduce sum
// NOATT: kg.matmul
// NOATT: kg.yield
// NOATT-NEXT: }
// NOATT-NEXT: return %[[O]]
func.func @attention_wide(%q: tensor<64x64xf16>, %k: tensor<512x64xf16>, %v: tensor<512x64xf16>) -> tensor<64x64xf16> {
  %kt = kg.transpose %k [1, 0] : tensor<512x64xf16> -> tensor<64x512xf16>
  %s = kg.matmul %q, %kt : (tensor<64x64xf16>, tensor<64x512xf16>) -> tensor<64x512xf16>
  %p = kg.softmax %s dim 1 : tensor<64x512xf16>
  %o = kg.matmul %p, %v : (tensor<64x512xf16>, tensor<512x64xf16>) -> tensor<64x64xf16>
  return %o : tensor<64x64xf16>
}

// store-narrow: the residual h is read widened to f32 by the first norm (in
// its kernel) and by the later add (in the last kernel); one cast, merged by
// CSE. The first kernel stores h as f16, what eager stores, and the last
// kernel widens it as it loads it.
// CHECK-LABEL: func.func @residual_stored_narrow(
// CHECK-NEXT: %[[K:.*]]:2 = kg.kernel @residual_stored_narrow_0_reduction({{.*}}) : ({{.*}}) -> (tensor<512x512xf16>, tensor<512x512xf16>) {
// CHECK: %[[LAST:.*]] = kg.kernel @residual_stored_narrow_3_reduction(%{{.*}}, %[[K]]#0, %{{.*}}, %{{.*}}) : (tensor<512x512xf16>, tensor<512x512xf16>, tensor<512xf16>, tensor<512xf16>) -> tensor<512x512xf16> {
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<512x512xf16>, %[[H:.*]]: tensor<512x512xf16>,
// CHECK: kg.cast %[[H]] {kg.promotion} : tensor<512x512xf16> to tensor<512x512xf32>
// Turned off, the f32 cast is the first kernel's result: twice the bytes.
// WIDE-LABEL: func.func @residual_stored_narrow(
// WIDE-NEXT: kg.kernel @residual_stored_narrow_0_reduction({{.*}}) -> (tensor<512x512xf16>, tensor<512x512xf32>) {
func.func @residual_stored_narrow(%x: tensor<512x512xf16>, %r: tensor<512x512xf16>, %w: tensor<512x2048xf16>, %w2: tensor<2048x512xf16>, %g: tensor<512xf16>, %b: tensor<512xf16>) -> tensor<512x512xf16> {
  %h = kg.add %x, %r : (tensor<512x512xf16>, tensor<512x512xf16>) -> tensor<512x512xf16>
  %n = kg.layer_norm %h weight %g bias %b normalized_shape [512] eps 1.0e-5 : (tensor<512x512xf16>, tensor<512xf16>, tensor<512xf16>) -> tensor<512x512xf16>
  %p = kg.matmul %n, %w : (tensor<512x512xf16>, tensor<512x2048xf16>) -> tensor<512x2048xf16>
  %q = kg.matmul %p, %w2 : (tensor<512x2048xf16>, tensor<2048x512xf16>) -> tensor<512x512xf16>
  %y = kg.add %q, %h : (tensor<512x512xf16>, tensor<512x512xf16>) -> tensor<512x512xf16>
  %z = kg.layer_norm %y weight %g bias %b normalized_shape [512] eps 1.0e-5 : (tensor<512x512xf16>, tensor<512xf16>, tensor<512xf16>) -> tensor<512x512xf16>
  return %z : tensor<512x512xf16>
}

// recompute-positions: one causal mask, built from two iotas, added to the
// scores of two attentions. Each attention kernel computes it from its own
// positions; no kernel stores it.
// CHECK-LABEL: func.func @causal_mask_shared(
// CHECK-NEXT: %[[A:.*]] = kg.kernel @causal_mask_shared_0_attention(%arg0, %arg1, %arg2) :
// CHECK: kg.iota
// CHECK: kg.cmp le
// CHECK: kg.select
// CHECK: %[[B:.*]] = kg.kernel @causal_mask_shared_1_attention(%[[A]], %arg1, %arg2) :
// CHECK: kg.cmp le
// CHECK: return
// Off, the mask is a pointwise kernel of no inputs that both attentions read.
// STORED-LABEL: func.func @causal_mask_shared(
// STORED-NEXT: %[[M:.*]] = kg.kernel @causal_mask_shared_0_pointwise() : () -> tensor<100x100xf32> {
// STORED: kg.kernel @causal_mask_shared_1_attention(%arg0, %arg1, %[[M]], %arg2) :
// STORED: kg.kernel @causal_mask_shared_2_attention(%{{.*}}, %arg1, %[[M]], %arg2) :
func.func @causal_mask_shared(%q: tensor<1x4x100x64xf16>, %kt: tensor<1x4x64x100xf16>, %v: tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16> {
  %row = kg.iota dim 0 : tensor<100x1xi64>
  %col = kg.iota dim 1 : tensor<1x100xi64>
  %allowed = kg.cmp le %col, %row : (tensor<1x100xi64>, tensor<100x1xi64>) -> tensor<100x100xi1>
  %zero = kg.constant 0.0 : tensor<f32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
  %mask = kg.select %allowed, %zero, %ninf : (tensor<100x100xi1>, tensor<f32>, tensor<f32>) -> tensor<100x100xf32>
  %s0 = kg.matmul %q, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf32>
  %x0 = kg.add %s0, %mask : (tensor<1x4x100x100xf32>, tensor<100x100xf32>) -> tensor<1x4x100x100xf32>
  %p0 = kg.softmax %x0 dim 3 : tensor<1x4x100x100xf32>
  %h0 = kg.cast %p0 : tensor<1x4x100x100xf32> to tensor<1x4x100x100xf16>
  %o0 = kg.matmul %h0, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  %s1 = kg.matmul %o0, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf32>
  %x1 = kg.add %s1, %mask : (tensor<1x4x100x100xf32>, tensor<100x100xf32>) -> tensor<1x4x100x100xf32>
  %p1 = kg.softmax %x1 dim 3 : tensor<1x4x100x100xf32>
  %h1 = kg.cast %p1 : tensor<1x4x100x100xf32> to tensor<1x4x100x100xf16>
  %o1 = kg.matmul %h1, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  return %o1 : tensor<1x4x100x64xf16>
}

// A kernel of positions alone that the function returns is kept (its
// result must be stored); the attention reads it.
// CHECK-LABEL: func.func @positions_returned(
// CHECK-NEXT: %[[M:.*]] = kg.kernel @positions_returned_0_pointwise() : () -> tensor<100x100xf32> {
// CHECK: kg.kernel @positions_returned_1_attention(%arg0, %arg1, %[[M]], %arg2)
func.func @positions_returned(%q: tensor<1x4x100x64xf16>, %kt: tensor<1x4x64x100xf16>, %v: tensor<1x4x100x64xf16>) -> (tensor<100x100xf32>, tensor<1x4x100x64xf16>) {
  %row = kg.iota dim 0 : tensor<100x1xi64>
  %col = kg.iota dim 1 : tensor<1x100xi64>
  %allowed = kg.cmp le %col, %row : (tensor<1x100xi64>, tensor<100x1xi64>) -> tensor<100x100xi1>
  %zero = kg.constant 0.0 : tensor<f32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
  %mask = kg.select %allowed, %zero, %ninf : (tensor<100x100xi1>, tensor<f32>, tensor<f32>) -> tensor<100x100xf32>
  %s0 = kg.matmul %q, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf32>
  %x0 = kg.add %s0, %mask : (tensor<1x4x100x100xf32>, tensor<100x100xf32>) -> tensor<1x4x100x100xf32>
  %p0 = kg.softmax %x0 dim 3 : tensor<1x4x100x100xf32>
  %h0 = kg.cast %p0 : tensor<1x4x100x100xf32> to tensor<1x4x100x100xf16>
  %o0 = kg.matmul %h0, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  return %mask, %o0 : tensor<100x100xf32>, tensor<1x4x100x64xf16>
}

// A scale and an additive mask (a causal mask given as an input) between
// Q K^T and the softmax are part of the attention kernel.
// CHECK-LABEL: func.func @attention_scaled_masked(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_scaled_masked_0_attention(
// CHECK: kg.matmul
// CHECK: kg.mul
// CHECK: kg.add
// CHECK: kg.reduce max
// CHECK: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_scaled_masked(%q: tensor<2x4x100x64xf32>, %k: tensor<2x4x1000x64xf32>, %v: tensor<2x4x1000x64xf32>, %mask: tensor<100x1000xf32>) -> tensor<2x4x100x64xf32> {
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<2x4x1000x64xf32> -> tensor<2x4x64x1000xf32>
  %s = kg.matmul %q, %kt : (tensor<2x4x100x64xf32>, tensor<2x4x64x1000xf32>) -> tensor<2x4x100x1000xf32>
  %c = kg.constant 0.125 : tensor<f32>
  %scaled = kg.mul %s, %c : (tensor<2x4x100x1000xf32>, tensor<f32>) -> tensor<2x4x100x1000xf32>
  %masked = kg.add %scaled, %mask : (tensor<2x4x100x1000xf32>, tensor<100x1000xf32>) -> tensor<2x4x100x1000xf32>
  %p = kg.softmax %masked dim 3 : tensor<2x4x100x1000xf32>
  %o = kg.matmul %p, %v : (tensor<2x4x100x1000xf32>, tensor<2x4x1000x64xf32>) -> tensor<2x4x100x64xf32>
  return %o : tensor<2x4x100x64xf32>
}

// A mask computed from a product of its own (transformers counts a packed
// sequence's positions with a cumulative sum, which kgc computes as a
// product with a triangle of ones) is an operand of the scores, not Q K^T:
// the count is a kernel of its own, and the attention kernel reads the mask.
// CHECK-LABEL: func.func @attention_mask_from_a_product(
// CHECK-NEXT: %[[MASK:.*]] = kg.kernel @attention_mask_from_a_product_0_matmul(
// CHECK: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_mask_from_a_product_1_attention({{.*}}%[[MASK]]
// CHECK: kg.reduce max
// CHECK: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_mask_from_a_product(%q: tensor<1x2x64x32xf16>, %k: tensor<1x2x64x32xf16>, %v: tensor<1x2x64x32xf16>, %flags: tensor<1x64xf16>, %ones: tensor<64x64xf16>) -> tensor<1x2x64x32xf16> {
  %count = kg.matmul %flags, %ones : (tensor<1x64xf16>, tensor<64x64xf16>) -> tensor<1x64xf32>
  %count4 = kg.reshape %count : tensor<1x64xf32> -> tensor<1x1x1x64xf32>
  %zero = kg.constant 0.0 : tensor<f32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
  %keep = kg.cmp gt %count4, %zero : (tensor<1x1x1x64xf32>, tensor<f32>) -> tensor<1x1x1x64xi1>
  %bias = kg.select %keep, %zero, %ninf : (tensor<1x1x1x64xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x1x64xf32>
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<1x2x64x32xf16> -> tensor<1x2x32x64xf16>
  %s = kg.matmul %q, %kt : (tensor<1x2x64x32xf16>, tensor<1x2x32x64xf16>) -> tensor<1x2x64x64xf32>
  %x = kg.add %s, %bias : (tensor<1x2x64x64xf32>, tensor<1x1x1x64xf32>) -> tensor<1x2x64x64xf32>
  %p = kg.softmax %x dim 3 : tensor<1x2x64x64xf32>
  %p16 = kg.cast %p : tensor<1x2x64x64xf32> to tensor<1x2x64x64xf16>
  %o = kg.matmul %p16, %v : (tensor<1x2x64x64xf16>, tensor<1x2x64x32xf16>) -> tensor<1x2x64x32xf16>
  return %o : tensor<1x2x64x32xf16>
}

// Grouped-query attention: 8 query heads read 2 key/value heads, each
// broadcast to its 4 query heads (reshape, broadcast_to, reshape). The
// broadcasts are views inside the attention kernel, not tensors of their own.
// CHECK-LABEL: func.func @attention_gqa_decode(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_gqa_decode_0_attention(
// CHECK-COUNT-2: kg.broadcast_to
// CHECK: kg.matmul
// CHECK: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_gqa_decode(%q: tensor<1x8x1x128xf16>, %k: tensor<1x2x4096x128xf16>, %v: tensor<1x2x4096x128xf16>) -> tensor<1x8x1x128xf16> {
  %k5 = kg.reshape %k : tensor<1x2x4096x128xf16> -> tensor<1x2x1x4096x128xf16>
  %kb = kg.broadcast_to %k5 : tensor<1x2x1x4096x128xf16> -> tensor<1x2x4x4096x128xf16>
  %kh = kg.reshape %kb : tensor<1x2x4x4096x128xf16> -> tensor<1x8x4096x128xf16>
  %v5 = kg.reshape %v : tensor<1x2x4096x128xf16> -> tensor<1x2x1x4096x128xf16>
  %vb = kg.broadcast_to %v5 : tensor<1x2x1x4096x128xf16> -> tensor<1x2x4x4096x128xf16>
  %vh = kg.reshape %vb : tensor<1x2x4x4096x128xf16> -> tensor<1x8x4096x128xf16>
  %kt = kg.transpose %kh [0, 1, 3, 2] : tensor<1x8x4096x128xf16> -> tensor<1x8x128x4096xf16>
  %s = kg.matmul %q, %kt : (tensor<1x8x1x128xf16>, tensor<1x8x128x4096xf16>) -> tensor<1x8x1x4096xf16>
  %p = kg.softmax %s dim 3 : tensor<1x8x1x4096xf16>
  %o = kg.matmul %p, %vh : (tensor<1x8x1x4096xf16>, tensor<1x8x4096x128xf16>) -> tensor<1x8x1x128xf16>
  return %o : tensor<1x8x1x128xf16>
}

// Heads given back to tokens, as transformers' attention hands its result to
// the output projection: the transpose to (B, M, H, E) and the reshape to
// (B, M, H * E) are the attention kernel's store, not copy kernels.
// CHECK-LABEL: func.func @attention_tokens_major(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_tokens_major_0_attention(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<1x4x100x64xf16>, tensor<1x4x100x64xf16>, tensor<1x4x100x64xf16>) -> tensor<1x100x256xf16> {
// CHECK: kg.matmul
// CHECK: kg.transpose %{{.*}} [0, 2, 1, 3]
// CHECK-NEXT: kg.reshape
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_tokens_major(%q: tensor<1x4x100x64xf16>, %k: tensor<1x4x100x64xf16>, %v: tensor<1x4x100x64xf16>) -> tensor<1x100x256xf16> {
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<1x4x100x64xf16> -> tensor<1x4x64x100xf16>
  %s = kg.matmul %q, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf16>
  %p = kg.softmax %s dim 3 : tensor<1x4x100x100xf16>
  %o = kg.matmul %p, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  %t = kg.transpose %o [0, 2, 1, 3] : tensor<1x4x100x64xf16> -> tensor<1x100x4x64xf16>
  %r = kg.reshape %t : tensor<1x100x4x64xf16> -> tensor<1x100x256xf16>
  return %r : tensor<1x100x256xf16>
}

// The head dimension split in four and moved before the queries: no stride
// per element of P V gives that order (the store would merge dimensions the
// transpose made strided), so the attention kernel stores P V, reshaped (a
// reshape keeps each element's offset), and the transpose is a kernel of
// its own.
// CHECK-LABEL: func.func @attention_head_dim_reordered(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_head_dim_reordered_0_attention({{.*}}) -> tensor<100x4x16xf16> {
// CHECK: kg.matmul
// CHECK: kg.matmul
// CHECK-NEXT: kg.reshape
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[T:.*]] = kg.kernel @attention_head_dim_reordered_1_pointwise(%[[O]])
// CHECK: kg.transpose
// CHECK: return %[[T]]
func.func @attention_head_dim_reordered(%q: tensor<100x64xf16>, %k: tensor<100x64xf16>, %v: tensor<100x64xf16>) -> tensor<4x100x16xf16> {
  %kt = kg.transpose %k [1, 0] : tensor<100x64xf16> -> tensor<64x100xf16>
  %s = kg.matmul %q, %kt : (tensor<100x64xf16>, tensor<64x100xf16>) -> tensor<100x100xf16>
  %p = kg.softmax %s dim 1 : tensor<100x100xf16>
  %o = kg.matmul %p, %v : (tensor<100x100xf16>, tensor<100x64xf16>) -> tensor<100x64xf16>
  %r = kg.reshape %o : tensor<100x64xf16> -> tensor<100x4x16xf16>
  %t = kg.transpose %r [1, 0, 2] : tensor<100x4x16xf16> -> tensor<4x100x16xf16>
  return %t : tensor<4x100x16xf16>
}

// The safe softmax of scaled_dot_product_attention's math path: rows whose
// keys are all masked (-inf) give zeros rather than NaN. The online softmax
// gives such a row l = 0 and acc = 0, so the attention kernel takes it,
// condition and all.
// CHECK-LABEL: func.func @attention_safe_softmax(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_safe_softmax_0_attention(
// CHECK: kg.select
// CHECK: kg.matmul
// CHECK: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_safe_softmax(%q: tensor<1x4x100x64xf16>, %k: tensor<1x4x100x64xf16>, %v: tensor<1x4x100x64xf16>, %mask: tensor<1x1x100x100xf32>) -> tensor<1x4x100x64xf16> {
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<1x4x100x64xf16> -> tensor<1x4x64x100xf16>
  %s = kg.matmul %q, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf32>
  %x = kg.add %s, %mask : (tensor<1x4x100x100xf32>, tensor<1x1x100x100xf32>) -> tensor<1x4x100x100xf32>
  %p = kg.softmax %x dim 3 : tensor<1x4x100x100xf32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
  %masked = kg.cmp eq %x, %ninf : (tensor<1x4x100x100xf32>, tensor<f32>) -> tensor<1x4x100x100xi1>
  %kept = kg.logical_not %masked : tensor<1x4x100x100xi1>
  %kept16 = kg.cast %kept : tensor<1x4x100x100xi1> to tensor<1x4x100x100xf16>
  %any = kg.reduce max %kept16 dims [3] keepdim : tensor<1x4x100x100xf16> -> tensor<1x4x100x1xf16>
  %anyb = kg.cast %any : tensor<1x4x100x1xf16> to tensor<1x4x100x1xi1>
  %none = kg.logical_not %anyb : tensor<1x4x100x1xi1>
  %zero = kg.constant 0.000000e+00 : tensor<1x4x100x100xf32>
  %safe = kg.select %none, %zero, %p : (tensor<1x4x100x1xi1>, tensor<1x4x100x100xf32>, tensor<1x4x100x100xf32>) -> tensor<1x4x100x100xf32>
  %p16 = kg.cast %safe : tensor<1x4x100x100xf32> to tensor<1x4x100x100xf16>
  %o = kg.matmul %p16, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  return %o : tensor<1x4x100x64xf16>
}

// Rows zeroed where a logit is 0, not where every key is masked: the online
// softmax has no such condition, so the select, its reduction and P V stay
// out of an attention kernel.
// CHECK-LABEL: func.func @attention_rows_zeroed_elsewhere(
// CHECK-NOT: _attention(
// CHECK: return
func.func @attention_rows_zeroed_elsewhere(%q: tensor<1x4x100x64xf16>, %k: tensor<1x4x100x64xf16>, %v: tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16> {
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<1x4x100x64xf16> -> tensor<1x4x64x100xf16>
  %s = kg.matmul %q, %kt : (tensor<1x4x100x64xf16>, tensor<1x4x64x100xf16>) -> tensor<1x4x100x100xf32>
  %p = kg.softmax %s dim 3 : tensor<1x4x100x100xf32>
  %zero_logit = kg.constant 0.000000e+00 : tensor<f32>
  %masked = kg.cmp eq %s, %zero_logit : (tensor<1x4x100x100xf32>, tensor<f32>) -> tensor<1x4x100x100xi1>
  %kept = kg.logical_not %masked : tensor<1x4x100x100xi1>
  %kept16 = kg.cast %kept : tensor<1x4x100x100xi1> to tensor<1x4x100x100xf16>
  %any = kg.reduce max %kept16 dims [3] keepdim : tensor<1x4x100x100xf16> -> tensor<1x4x100x1xf16>
  %anyb = kg.cast %any : tensor<1x4x100x1xf16> to tensor<1x4x100x1xi1>
  %none = kg.logical_not %anyb : tensor<1x4x100x1xi1>
  %zero = kg.constant 0.000000e+00 : tensor<1x4x100x100xf32>
  %safe = kg.select %none, %zero, %p : (tensor<1x4x100x1xi1>, tensor<1x4x100x100xf32>, tensor<1x4x100x100xf32>) -> tensor<1x4x100x100xf32>
  %p16 = kg.cast %safe : tensor<1x4x100x100xf32> to tensor<1x4x100x100xf16>
  %o = kg.matmul %p16, %v : (tensor<1x4x100x100xf16>, tensor<1x4x100x64xf16>) -> tensor<1x4x100x64xf16>
  return %o : tensor<1x4x100x64xf16>
}

// The same decode written with the 4 query heads of a group as the rows of
// one matmul per key/value head, and the result reshaped back to the
// queries' (1, 8, 1, 128): the reshape keeps the head dimension and the
// row-major order, so the attention kernel stores its result (no copy
// kernel after it).
// CHECK-LABEL: func.func @attention_packed_heads_reshaped(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_packed_heads_reshaped_0_attention({{.*}}) -> tensor<1x8x1x128xf16> {
// CHECK: kg.matmul
// CHECK: kg.matmul
// CHECK-NEXT: kg.reshape %{{.*}} : tensor<2x4x128xf16> -> tensor<1x8x1x128xf16>
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_packed_heads_reshaped(%q: tensor<1x8x1x128xf16>, %k: tensor<1x2x4096x128xf16>, %v: tensor<1x2x4096x128xf16>) -> tensor<1x8x1x128xf16> {
  %qg = kg.reshape %q : tensor<1x8x1x128xf16> -> tensor<2x4x128xf16>
  %k3 = kg.reshape %k : tensor<1x2x4096x128xf16> -> tensor<2x4096x128xf16>
  %v3 = kg.reshape %v : tensor<1x2x4096x128xf16> -> tensor<2x4096x128xf16>
  %kt = kg.transpose %k3 [0, 2, 1] : tensor<2x4096x128xf16> -> tensor<2x128x4096xf16>
  %s = kg.matmul %qg, %kt : (tensor<2x4x128xf16>, tensor<2x128x4096xf16>) -> tensor<2x4x4096xf16>
  %p = kg.softmax %s dim 2 : tensor<2x4x4096xf16>
  %o = kg.matmul %p, %v3 : (tensor<2x4x4096xf16>, tensor<2x4096x128xf16>) -> tensor<2x4x128xf16>
  %r = kg.reshape %o : tensor<2x4x128xf16> -> tensor<1x8x1x128xf16>
  return %r : tensor<1x8x1x128xf16>
}

// A reshape that merges the head dimension into the heads is the attention
// kernel's store too: where the keys are split (kg-tile's decision, after
// this), the kernel combining them computes per head row, in P V's shape,
// and stores the result reshaped. No copy kernel follows.
// CHECK-LABEL: func.func @attention_heads_merged(
// CHECK-NEXT: %[[O:.*]] = kg.kernel @attention_heads_merged_0_attention({{.*}}) -> tensor<2x512xf16> {
// CHECK: kg.reshape %{{.*}} : tensor<2x4x128xf16> -> tensor<2x512xf16>
// CHECK-NEXT: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[O]]
func.func @attention_heads_merged(%q: tensor<2x4x128xf16>, %k: tensor<2x4096x128xf16>, %v: tensor<2x4096x128xf16>) -> tensor<2x512xf16> {
  %kt = kg.transpose %k [0, 2, 1] : tensor<2x4096x128xf16> -> tensor<2x128x4096xf16>
  %s = kg.matmul %q, %kt : (tensor<2x4x128xf16>, tensor<2x128x4096xf16>) -> tensor<2x4x4096xf16>
  %p = kg.softmax %s dim 2 : tensor<2x4x4096xf16>
  %o = kg.matmul %p, %v : (tensor<2x4x4096xf16>, tensor<2x4096x128xf16>) -> tensor<2x4x128xf16>
  %r = kg.reshape %o : tensor<2x4x128xf16> -> tensor<2x512xf16>
  return %r : tensor<2x512xf16>
}

// Not attention: the softmax runs over the queries (dim 0), not over the
// keys each query weighs, so no online softmax over key blocks computes it.
// CHECK-LABEL: func.func @softmax_over_queries(
// CHECK-NOT: _attention
// CHECK: return
func.func @softmax_over_queries(%q: tensor<64x64xf32>, %k: tensor<512x64xf32>, %v: tensor<512x64xf32>) -> tensor<64x64xf32> {
  %kt = kg.transpose %k [1, 0] : tensor<512x64xf32> -> tensor<64x512xf32>
  %s = kg.matmul %q, %kt : (tensor<64x64xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %p = kg.softmax %s dim 0 : tensor<64x512xf32>
  %o = kg.matmul %p, %v : (tensor<64x512xf32>, tensor<512x64xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// Not attention: the probabilities are weighed elementwise, not by a matmul
// with V, so there is no P V to accumulate block by block.
// CHECK-LABEL: func.func @softmax_times_values(
// CHECK-NOT: _attention
// CHECK: return
func.func @softmax_times_values(%q: tensor<64x64xf32>, %k: tensor<512x64xf32>, %v: tensor<64x512xf32>) -> tensor<64x512xf32> {
  %kt = kg.transpose %k [1, 0] : tensor<512x64xf32> -> tensor<64x512xf32>
  %s = kg.matmul %q, %kt : (tensor<64x64xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %p = kg.softmax %s dim 1 : tensor<64x512xf32>
  %o = kg.mul %p, %v : (tensor<64x512xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  return %o : tensor<64x512xf32>
}

// Not one attention kernel: the probabilities are returned too, and an
// attention kernel never holds all of a row's probabilities at once.
// CHECK-LABEL: func.func @attention_probabilities_returned(
// CHECK-NOT: _attention
// CHECK: return
func.func @attention_probabilities_returned(%q: tensor<64x64xf32>, %k: tensor<512x64xf32>, %v: tensor<512x64xf32>) -> (tensor<64x64xf32>, tensor<64x512xf32>) {
  %kt = kg.transpose %k [1, 0] : tensor<512x64xf32> -> tensor<64x512xf32>
  %s = kg.matmul %q, %kt : (tensor<64x64xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %p = kg.softmax %s dim 1 : tensor<64x512xf32>
  %o = kg.matmul %p, %v : (tensor<64x512xf32>, tensor<512x64xf32>) -> tensor<64x64xf32>
  return %o, %p : tensor<64x64xf32>, tensor<64x512xf32>
}

// Scores of n = 512 with a softmax and a relu: the relu is the matmul's
// epilogue, the softmax a reduction kernel that reads the scores. The
// matmul's kernel comes first (and is kernel 0) although its last op, the
// relu, comes after the softmax.
// CHECK-LABEL: func.func @scores_softmax_and_relu(
// CHECK-NEXT: %[[MM:.*]]:2 = kg.kernel @scores_softmax_and_relu_0_matmul
// CHECK: %[[S:.*]] = kg.matmul
// CHECK-NEXT: %[[R:.*]] = kg.relu %[[S]]
// CHECK-NEXT: kg.yield %[[S]], %[[R]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[P:.*]] = kg.kernel @scores_softmax_and_relu_1_reduction(%[[MM]]#0)
// CHECK: kg.reduce max
// CHECK: kg.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[P]], %[[MM]]#1
func.func @scores_softmax_and_relu(%x: tensor<64x64xf32>, %w: tensor<64x512xf32>) -> (tensor<64x512xf32>, tensor<64x512xf32>) {
  %s = kg.matmul %x, %w : (tensor<64x64xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  %p = kg.softmax %s dim 1 : tensor<64x512xf32>
  %r = kg.relu %s : tensor<64x512xf32>
  return %p, %r : tensor<64x512xf32>, tensor<64x512xf32>
}

// ---------------------------------------------------------------------------
// Promotions inside a kernel
// ---------------------------------------------------------------------------

// kg-decompose computes each f16 op in f32 between casts; inside the kernel
// the f32 -> f16 -> f32 round trips between add, exp and relu are dropped:
// f16 is read once and written once.
// CHECK-LABEL: func.func @promotions_f16(
// CHECK-NEXT: kg.kernel @promotions_f16_0_pointwise
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<16x128xf16>, %[[B:.*]]: tensor<128xf16>):
// CHECK-NEXT: %[[XW:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<16x128xf16> to tensor<16x128xf32>
// CHECK-NEXT: %[[BW:.*]] = kg.cast %[[B]] {kg.promotion} : tensor<128xf16> to tensor<128xf32>
// CHECK-NEXT: %[[A:.*]] = kg.add %[[XW]], %[[BW]]
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[A]] : tensor<16x128xf32>
// CHECK-NEXT: %[[R:.*]] = kg.relu %[[E]] : tensor<16x128xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[R]] {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
// CHECK-NEXT: kg.yield %[[N]] : tensor<16x128xf16>
// CHECK-NEXT: }
func.func @promotions_f16(%x: tensor<16x128xf16>, %b: tensor<128xf16>) -> tensor<16x128xf16> {
  %a = kg.add %x, %b : (tensor<16x128xf16>, tensor<128xf16>) -> tensor<16x128xf16>
  %e = kg.exp %a : tensor<16x128xf16>
  %r = kg.relu %e : tensor<16x128xf16>
  return %r : tensor<16x128xf16>
}

// ---------------------------------------------------------------------------
// Masks: iotas, comparisons and selects fuse like elementwise ops
// ---------------------------------------------------------------------------

// A causal mask is part of its softmax's kernel: the iotas are copied in,
// like constants, and the comparison and the select sit before the max.
// CHECK-LABEL: func.func @causal_softmax(
// CHECK-NEXT: kg.kernel @causal_softmax_0_reduction(%{{.*}}) : (tensor<64x64xf16>) -> tensor<64x64xf16> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<64x64xf16>):
// CHECK-NEXT: %[[R:.*]] = kg.iota dim 0 : tensor<64x1xi32>
// CHECK-NEXT: %[[C:.*]] = kg.iota dim 1 : tensor<1x64xi32>
// CHECK-NEXT: %[[NINF:.*]] = kg.constant 0xFFF0000000000000 : tensor<f16>
// CHECK-NEXT: %[[KEEP:.*]] = kg.cmp ge %[[R]], %[[C]]
// CHECK-NEXT: %[[M:.*]] = kg.select %[[KEEP]], %[[X]], %[[NINF]]
// CHECK-NEXT: kg.cast %[[M]] {kg.promotion}
// CHECK-NEXT: kg.reduce max
// CHECK-NOT: kg.kernel
// CHECK: return
func.func @causal_softmax(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %rows = kg.iota dim 0 : tensor<64x1xi32>
  %cols = kg.iota dim 1 : tensor<1x64xi32>
  %keep = kg.cmp ge %rows, %cols : (tensor<64x1xi32>, tensor<1x64xi32>) -> tensor<64x64xi1>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f16>
  %m = kg.select %keep, %x, %ninf : (tensor<64x64xi1>, tensor<64x64xf16>, tensor<f16>) -> tensor<64x64xf16>
  %p = kg.softmax %m dim 1 : tensor<64x64xf16>
  return %p : tensor<64x64xf16>
}

// An iota read by two kernels is copied into each, not computed once and
// passed as a kernel input.
// CHECK-LABEL: func.func @shared_positions(
// CHECK-SAME: %[[A:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64x64xf32>)
// CHECK-NEXT: kg.kernel @shared_positions_0_pointwise(%[[A]]) : (tensor<64xf32>) -> tensor<64xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.iota dim 0 : tensor<64xf32>
// CHECK: kg.kernel @shared_positions_1_reduction(%[[B]]) : (tensor<64x64xf32>) -> tensor<64xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.iota dim 0 : tensor<64xf32>
func.func @shared_positions(%a: tensor<64xf32>, %b: tensor<64x64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %pos = kg.iota dim 0 : tensor<64xf32>
  %s = kg.add %a, %pos : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %t = kg.mul %b, %pos : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32>
  %r = kg.reduce sum %t dims [1] : tensor<64x64xf32> -> tensor<64xf32>
  return %s, %r : tensor<64xf32>, tensor<64xf32>
}

// An RMSNorm read by two matmuls of one row (a decode step's q and k
// projections). Folded into the first, it would be a result of that kernel
// too, needed whole before the dot: two loops over k, which cannot be split
// (split-K), and the matmul's 64 tiles would leave most SMs idle. The norm
// stays a reduction kernel, and each matmul a kernel kgc can split.
// CHECK-LABEL: func.func @shared_norm_skinny(
// CHECK: %[[N:.*]] = kg.kernel @shared_norm_skinny_0_reduction(%arg0, %arg1) : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
// CHECK: kg.kernel @shared_norm_skinny_1_matmul(%[[N]], %arg2)
// CHECK: kg.kernel @shared_norm_skinny_2_matmul(%[[N]], %arg3)
func.func @shared_norm_skinny(%x: tensor<1x4096xf16>, %gamma: tensor<4096xf16>, %wq: tensor<4096x4096xf16>, %wk: tensor<4096x1024xf16>) -> (tensor<1x4096xf16>, tensor<1x1024xf16>) {
  %n = kg.rms_norm %x weight %gamma normalized_shape [4096] eps 1.0e-6 : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
  %q = kg.matmul %n, %wq : (tensor<1x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16>
  %k = kg.matmul %n, %wk : (tensor<1x4096xf16>, tensor<4096x1024xf16>) -> tensor<1x1024xf16>
  return %q, %k : tensor<1x4096xf16>, tensor<1x1024xf16>
}

// The same at 256 columns: 256 KB of weights, which kgc does not split, so
// the norm folds into the first matmul, which also returns it for the second.
// CHECK-LABEL: func.func @shared_norm_small(
// CHECK: %[[Q:.*]]:2 = kg.kernel @shared_norm_small_0_matmul(%arg0, %arg1, %arg2) : (tensor<1x256xf16>, tensor<256xf16>, tensor<256x256xf16>) -> (tensor<1x256xf16>, tensor<1x256xf16>)
// CHECK: kg.kernel @shared_norm_small_1_matmul(%[[Q]]#0, %arg3)
func.func @shared_norm_small(%x: tensor<1x256xf16>, %gamma: tensor<256xf16>, %wq: tensor<256x256xf16>, %wk: tensor<256x64xf16>) -> (tensor<1x256xf16>, tensor<1x64xf16>) {
  %n = kg.rms_norm %x weight %gamma normalized_shape [256] eps 1.0e-6 : (tensor<1x256xf16>, tensor<256xf16>) -> tensor<1x256xf16>
  %q = kg.matmul %n, %wq : (tensor<1x256xf16>, tensor<256x256xf16>) -> tensor<1x256xf16>
  %k = kg.matmul %n, %wk : (tensor<1x256xf16>, tensor<256x64xf16>) -> tensor<1x64xf16>
  return %q, %k : tensor<1x256xf16>, tensor<1x64xf16>
}

// PRIMITIVE INPUT
// ---------------------------------------------------------------------------
// From here on the input is primitive: kg-fuse alone.
// ---------------------------------------------------------------------------

// PRIM-LABEL: func.func @elementwise_chain(
// PRIM-SAME: %[[X:.*]]: tensor<16x128xf32>, %[[B:.*]]: tensor<128xf32>)
// PRIM-NEXT: %[[K:.*]] = kg.kernel @elementwise_chain_0_pointwise(%[[X]], %[[B]]) : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32> {
// PRIM-NEXT: ^bb0(%[[A0:.*]]: tensor<16x128xf32>, %[[A1:.*]]: tensor<128xf32>):
// PRIM-NEXT: %[[S:.*]] = kg.add %[[A0]], %[[A1]] : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
// PRIM-NEXT: %[[E:.*]] = kg.exp %[[S]] : tensor<16x128xf32>
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[E]] : tensor<16x128xf32>
// PRIM-NEXT: kg.yield %[[R]] : tensor<16x128xf32>
// PRIM-NEXT: }
// PRIM-NEXT: return %[[K]] : tensor<16x128xf32>
func.func @elementwise_chain(%x: tensor<16x128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  %a = kg.add %x, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %e = kg.exp %a : tensor<16x128xf32>
  %r = kg.relu %e : tensor<16x128xf32>
  return %r : tensor<16x128xf32>
}

// PRIM-LABEL: func.func @matmul_bias_relu(
// PRIM-SAME: %[[X:.*]]: tensor<32x256xf32>, %[[W:.*]]: tensor<256x128xf32>, %[[B:.*]]: tensor<128xf32>)
// PRIM-NEXT: %[[K:.*]] = kg.kernel @matmul_bias_relu_0_matmul(%[[X]], %[[W]], %[[B]])
// PRIM-NEXT: ^bb0(%[[A0:.*]]: tensor<32x256xf32>, %[[A1:.*]]: tensor<256x128xf32>, %[[A2:.*]]: tensor<128xf32>):
// PRIM-NEXT: %[[M:.*]] = kg.matmul %[[A0]], %[[A1]]
// PRIM-NEXT: %[[S:.*]] = kg.add %[[M]], %[[A2]]
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[S]]
// PRIM-NEXT: kg.yield %[[R]]
// PRIM-NEXT: }
// PRIM-NEXT: return %[[K]]
func.func @matmul_bias_relu(%x: tensor<32x256xf32>, %w: tensor<256x128xf32>, %bias: tensor<128xf32>) -> tensor<32x128xf32> {
  %m = kg.matmul %x, %w : (tensor<32x256xf32>, tensor<256x128xf32>) -> tensor<32x128xf32>
  %a = kg.add %m, %bias : (tensor<32x128xf32>, tensor<128xf32>) -> tensor<32x128xf32>
  %r = kg.relu %a : tensor<32x128xf32>
  return %r : tensor<32x128xf32>
}

// PRIM-LABEL: func.func @gated_mlp_f32(
// PRIM-COUNT-1: kg.kernel @gated_mlp_f32_0_matmul
// PRIM-COUNT-2: kg.matmul
// PRIM-NEXT: kg.silu
// PRIM-NEXT: kg.mul
// PRIM-NEXT: kg.yield
// PRIM-NOT: kg.kernel
func.func @gated_mlp_f32(%x: tensor<32x256xf32>, %w1: tensor<256x512xf32>, %w2: tensor<256x512xf32>) -> tensor<32x512xf32> {
  %a = kg.matmul %x, %w1 : (tensor<32x256xf32>, tensor<256x512xf32>) -> tensor<32x512xf32>
  %b = kg.matmul %x, %w2 : (tensor<32x256xf32>, tensor<256x512xf32>) -> tensor<32x512xf32>
  %s = kg.silu %a : tensor<32x512xf32>
  %y = kg.mul %s, %b : (tensor<32x512xf32>, tensor<32x512xf32>) -> tensor<32x512xf32>
  return %y : tensor<32x512xf32>
}

// %e is used by the relu inside the kernel and by the return: the kernel
// yields it too.
// PRIM-LABEL: func.func @two_consumers(
// PRIM-NEXT: %[[K:.*]]:2 = kg.kernel @two_consumers_0_pointwise(%{{.*}}) : (tensor<16x128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>) {
// PRIM-NEXT: ^bb0(%[[A:.*]]: tensor<16x128xf32>):
// PRIM-NEXT: %[[E:.*]] = kg.exp %[[A]]
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[E]]
// PRIM-NEXT: kg.yield %[[E]], %[[R]] : tensor<16x128xf32>, tensor<16x128xf32>
// PRIM-NEXT: }
// PRIM-NEXT: return %[[K]]#0, %[[K]]#1
func.func @two_consumers(%x: tensor<16x128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>) {
  %e = kg.exp %x : tensor<16x128xf32>
  %r = kg.relu %e : tensor<16x128xf32>
  return %e, %r : tensor<16x128xf32>, tensor<16x128xf32>
}

// Two unrelated kernels use %c: each gets a copy, and none is an input.
// PRIM-LABEL: func.func @shared_constant(
// PRIM-NEXT: kg.kernel @shared_constant_0_pointwise(%{{[^,]*}}) : (tensor<16x128xf32>) -> tensor<16x128xf32>
// PRIM-NEXT: ^bb0(%[[A:.*]]: tensor<16x128xf32>):
// PRIM-NEXT: %[[C0:.*]] = kg.constant 2.000000e+00 : tensor<f32>
// PRIM-NEXT: kg.mul %[[A]], %[[C0]]
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: kg.kernel @shared_constant_1_matmul(%{{.*}}, %{{.*}}) : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
// PRIM-NEXT: ^bb0
// PRIM-NEXT: %[[C1:.*]] = kg.constant 2.000000e+00 : tensor<f32>
// PRIM-NEXT: %[[M:.*]] = kg.matmul
// PRIM-NEXT: kg.mul %[[M]], %[[C1]]
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: return
func.func @shared_constant(%x: tensor<16x128xf32>, %a: tensor<16x64xf32>, %b: tensor<64x32xf32>) -> (tensor<16x128xf32>, tensor<16x32xf32>) {
  %c = kg.constant 2.0 : tensor<f32>
  %y = kg.mul %x, %c : (tensor<16x128xf32>, tensor<f32>) -> tensor<16x128xf32>
  %m = kg.matmul %a, %b : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %z = kg.mul %m, %c : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xf32>
  return %y, %z : tensor<16x128xf32>, tensor<16x32xf32>
}

// A constant that is returned is computed by a kernel of its own.
// PRIM-LABEL: func.func @returned_constant(
// PRIM-NEXT: %[[K:.*]] = kg.kernel @returned_constant_0_pointwise() : () -> tensor<4xf32> {
// PRIM-NEXT: %[[C:.*]] = kg.constant 2.000000e+00 : tensor<4xf32>
// PRIM-NEXT: kg.yield %[[C]]
// PRIM-NEXT: }
// PRIM-NEXT: return %[[K]]
func.func @returned_constant() -> tensor<4xf32> {
  %c = kg.constant 2.0 : tensor<4xf32>
  return %c : tensor<4xf32>
}

// A kg.kernel the user wrote is a kernel already: kg-fuse neither fuses its
// ops with others nor into it. The ops before it become a kernel placed
// before it (it reads their result); those after it, one after it.
// PRIM-LABEL: func.func @user_kernel(
// PRIM-NEXT: %[[E:.*]] = kg.kernel @user_kernel_0_pointwise(%{{.*}})
// PRIM-NEXT: ^bb0
// PRIM-NEXT: kg.exp
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: %[[U:.*]] = kg.kernel @mine(%[[E]]) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
// PRIM-NEXT: ^bb0(%[[A:.*]]: tensor<16x128xf32>):
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[A]] : tensor<16x128xf32>
// PRIM-NEXT: %[[S:.*]] = kg.sigmoid %[[R]] : tensor<16x128xf32>
// PRIM-NEXT: kg.yield %[[S]] : tensor<16x128xf32>
// PRIM-NEXT: }
// PRIM-NEXT: %[[N:.*]] = kg.kernel @user_kernel_1_pointwise(%[[U]])
// PRIM-NEXT: ^bb0
// PRIM-NEXT: kg.neg
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: return %[[N]]
func.func @user_kernel(%a: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %a : tensor<16x128xf32>
  %y = kg.kernel @mine(%e) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
  ^bb0(%x: tensor<16x128xf32>):
    %r = kg.relu %x : tensor<16x128xf32>
    %s = kg.sigmoid %r : tensor<16x128xf32>
    kg.yield %s : tensor<16x128xf32>
  }
  %n = kg.neg %y : tensor<16x128xf32>
  return %n : tensor<16x128xf32>
}

// %a and the add would fuse, but the add also reads the user's kernel, which
// reads %a: one kernel for both would have to run before and after it.
// PRIM-LABEL: func.func @around_user_kernel(
// PRIM-NEXT: %[[E:.*]] = kg.kernel @around_user_kernel_0_pointwise(%{{.*}})
// PRIM-NEXT: ^bb0
// PRIM-NEXT: kg.exp
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: %[[U:.*]] = kg.kernel @mine2(%[[E]])
// PRIM: %[[S:.*]] = kg.kernel @around_user_kernel_1_pointwise(%[[E]], %[[U]])
// PRIM-NEXT: ^bb0
// PRIM-NEXT: kg.add
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: return %[[S]]
func.func @around_user_kernel(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %a = kg.exp %x : tensor<16x128xf32>
  %u = kg.kernel @mine2(%a) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
  ^bb0(%p: tensor<16x128xf32>):
    %r = kg.relu %p : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  %c = kg.add %a, %u : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %c : tensor<16x128xf32>
}

// The ops before a user's kernel and those after it that do not read it
// fuse; the add, which reads it, comes after it.
// PRIM-LABEL: func.func @beside_user_kernels(
// PRIM-NEXT: %[[AB:.*]]:2 = kg.kernel @beside_user_kernels_0_pointwise
// PRIM-NEXT: ^bb0
// PRIM-NEXT: %[[A:.*]] = kg.exp
// PRIM-NEXT: %[[B:.*]] = kg.relu %[[A]]
// PRIM-NEXT: kg.yield %[[A]], %[[B]]
// PRIM-NEXT: }
// PRIM-NEXT: %[[U:.*]] = kg.kernel @first(%[[AB]]#0)
// PRIM: %[[V:.*]] = kg.kernel @second(
// PRIM: %[[C:.*]] = kg.kernel @beside_user_kernels_1_pointwise(%[[AB]]#1, %[[V]])
// PRIM: return %[[U]], %[[C]]
func.func @beside_user_kernels(%x: tensor<16x128xf32>, %y: tensor<16x128xf32>) -> (tensor<16x128xf32>, tensor<16x128xf32>) {
  %a = kg.exp %x : tensor<16x128xf32>
  %u = kg.kernel @first(%a) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
  ^bb0(%p: tensor<16x128xf32>):
    %r = kg.relu %p : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  %v = kg.kernel @second(%y) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
  ^bb0(%p: tensor<16x128xf32>):
    %r = kg.neg %p : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  %b = kg.relu %a : tensor<16x128xf32>
  %c = kg.add %b, %v : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %u, %c : tensor<16x128xf32>, tensor<16x128xf32>
}

// kg-decompose's promotions, written out: the f32 -> f16 -> f32 round trip
// between exp and relu is dropped inside the kernel, both of its casts.
// PRIM-LABEL: func.func @promotion_round_trip(
// PRIM-NEXT: kg.kernel @promotion_round_trip_0_pointwise
// PRIM-NEXT: ^bb0(%[[X:.*]]: tensor<16x128xf16>):
// PRIM-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<16x128xf16> to tensor<16x128xf32>
// PRIM-NEXT: %[[E:.*]] = kg.exp %[[W]] : tensor<16x128xf32>
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[E]] : tensor<16x128xf32>
// PRIM-NEXT: %[[N:.*]] = kg.cast %[[R]] {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
// PRIM-NEXT: kg.yield %[[N]]
// PRIM-NEXT: }
func.func @promotion_round_trip(%x: tensor<16x128xf16>) -> tensor<16x128xf16> {
  %w = kg.cast %x {kg.promotion} : tensor<16x128xf16> to tensor<16x128xf32>
  %e = kg.exp %w : tensor<16x128xf32>
  %n = kg.cast %e {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
  %w2 = kg.cast %n {kg.promotion} : tensor<16x128xf16> to tensor<16x128xf32>
  %r = kg.relu %w2 : tensor<16x128xf32>
  %n2 = kg.cast %r {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
  return %n2 : tensor<16x128xf16>
}

// The rounded value is also returned: the narrowing cast stays for it, and
// the relu still reads the f32 value.
// PRIM-LABEL: func.func @promotion_round_trip_returned(
// PRIM-NEXT: kg.kernel @promotion_round_trip_returned_0_pointwise
// PRIM-NEXT: ^bb0(%[[X:.*]]: tensor<16x128xf32>):
// PRIM-NEXT: %[[E:.*]] = kg.exp %[[X]] : tensor<16x128xf32>
// PRIM-NEXT: %[[N:.*]] = kg.cast %[[E]] {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[E]] : tensor<16x128xf32>
// PRIM-NEXT: kg.yield %[[N]], %[[R]]
// PRIM-NEXT: }
func.func @promotion_round_trip_returned(%x: tensor<16x128xf32>) -> (tensor<16x128xf16>, tensor<16x128xf32>) {
  %e = kg.exp %x : tensor<16x128xf32>
  %n = kg.cast %e {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
  %w = kg.cast %n {kg.promotion} : tensor<16x128xf16> to tensor<16x128xf32>
  %r = kg.relu %w : tensor<16x128xf32>
  return %n, %r : tensor<16x128xf16>, tensor<16x128xf32>
}

// The user's own round trip through f16 rounds on purpose: both casts stay.
// PRIM-LABEL: func.func @user_round_trip(
// PRIM-NEXT: kg.kernel @user_round_trip_0_pointwise
// PRIM-NEXT: ^bb0(%[[X:.*]]: tensor<16x128xf32>):
// PRIM-NEXT: %[[E:.*]] = kg.exp %[[X]]
// PRIM-NEXT: %[[H:.*]] = kg.cast %[[E]] : tensor<16x128xf32> to tensor<16x128xf16>
// PRIM-NEXT: %[[W:.*]] = kg.cast %[[H]] : tensor<16x128xf16> to tensor<16x128xf32>
// PRIM-NEXT: %[[R:.*]] = kg.relu %[[W]]
// PRIM-NEXT: kg.yield %[[R]]
// PRIM-NEXT: }
func.func @user_round_trip(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %x : tensor<16x128xf32>
  %h = kg.cast %e : tensor<16x128xf32> to tensor<16x128xf16>
  %w = kg.cast %h : tensor<16x128xf16> to tensor<16x128xf32>
  %r = kg.relu %w : tensor<16x128xf32>
  return %r : tensor<16x128xf32>
}

// Half a round trip is the user's: it rounds on purpose, so it stays.
// PRIM-LABEL: func.func @mixed_round_trip(
// PRIM: %[[N:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
// PRIM-NEXT: %[[W:.*]] = kg.cast %[[N]] : tensor<16x128xf16> to tensor<16x128xf32>
// PRIM-NEXT: kg.relu %[[W]]
func.func @mixed_round_trip(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %x : tensor<16x128xf32>
  %n = kg.cast %e {kg.promotion} : tensor<16x128xf32> to tensor<16x128xf16>
  %w = kg.cast %n : tensor<16x128xf16> to tensor<16x128xf32>
  %r = kg.relu %w : tensor<16x128xf32>
  return %r : tensor<16x128xf32>
}

// Nothing to compute: no kernel.
// PRIM-LABEL: func.func @identity(
// PRIM-SAME: %[[X:.*]]: tensor<16x128xf32>) -> tensor<16x128xf32> {
// PRIM-NEXT: return %[[X]] : tensor<16x128xf32>
// PRIM-NEXT: }
func.func @identity(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  return %x : tensor<16x128xf32>
}

// A value of the function that a loop body reads (not an operand of the
// loop itself) is a result of its kernel, read inside the loop.
// PRIM-LABEL: func.func @read_inside_a_loop(
// PRIM: %[[K:.*]] = kg.kernel @read_inside_a_loop_0_pointwise
// PRIM: kg.exp
// PRIM: scf.for
// PRIM: kg.add %{{.*}}, %[[K]]
func.func @read_inside_a_loop(%x: tensor<8xf32>, %n: index) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = kg.exp %x : tensor<8xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<8xf32>) {
    %s = kg.add %acc, %e : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %s : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// PARTITIONS AND DECISIONS
// ---------------------------------------------------------------------------
// From here on, primitive input under kg-fuse's options: a given partition
// (op positions count the function's kg ops from 0, constants included),
// and each decision turned off. With no options every function below is one
// kernel (the attention too), but for the LoRA variants that cannot be
// folded (three). The epilogue and prologue decisions are shown on the
// attention with the attention fusion off, which would otherwise make it one
// kernel whatever they say.
// ---------------------------------------------------------------------------
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='function=part_gated_mlp partition=0,2;1,3' | FileCheck %s --check-prefix=GIVEN
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --pass-pipeline='builtin.module(kg-fuse{function=part_rmsnorm_matmul partition=0,1,3,5,6,7,8;9})' | FileCheck %s --check-prefix=NOFOLD
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='fold-rms-norm=false' | FileCheck %s --check-prefixes=NOFOLD,NOFOLD-ALL
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='fuse-epilogue=false fuse-attention=false rules-off=skinny-prologue' | FileCheck %s --check-prefix=NOEPI
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='fuse-prologue=false fuse-attention=false' | FileCheck %s --check-prefix=NOPRO
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='merge-siblings=false' | FileCheck %s --check-prefix=NOSIB
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='merge-reductions=false' | FileCheck %s --check-prefix=NORED
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='fold-low-rank=false' | FileCheck %s --check-prefix=NOLOWRANK
// RUN: sed -n '/^\/\/ PARTITIONS AND DECISIONS$/,$p' %s | kgc-opt --kg-fuse='merge-shared-input=false' | FileCheck %s --check-prefix=NOSHARED

// Ops 0-8 are the RMSNorm (2 and 4 are constants, copied where used, so in
// no group), op 9 the matmul. Given as two groups, or with the fold turned
// off: a reduction kernel, then the matmul reading its result.
// NOFOLD-LABEL: func.func @part_rmsnorm_matmul(
// NOFOLD-NEXT: %[[N:.*]] = kg.kernel @part_rmsnorm_matmul_0_reduction(%arg0, %arg1)
// NOFOLD: kg.reduce sum
// NOFOLD: kg.yield
// NOFOLD-NEXT: }
// NOFOLD-NEXT: %[[Y:.*]] = kg.kernel @part_rmsnorm_matmul_1_matmul(%[[N]], %arg2)
// NOFOLD-NEXT: ^bb0
// NOFOLD-NEXT: kg.matmul
// NOFOLD-NEXT: kg.yield
// NOFOLD-NEXT: }
// NOFOLD-NEXT: return %[[Y]]
// The other decisions keep the RMSNorm folded.
// NOEPI-LABEL: func.func @part_rmsnorm_matmul(
// NOEPI-NEXT: kg.kernel @part_rmsnorm_matmul_0_matmul
// NOEPI-NOT: kg.kernel
// NOEPI: return
func.func @part_rmsnorm_matmul(%x: tensor<16x256xf32>, %gamma: tensor<256xf32>, %w: tensor<256x128xf32>) -> tensor<16x128xf32> {
  %sq = kg.square %x : tensor<16x256xf32>
  %sum = kg.reduce sum %sq dims [1] keepdim : tensor<16x256xf32> -> tensor<16x1xf32>
  %inv = kg.constant 3.906250e-03 : tensor<f32>
  %ms = kg.mul %sum, %inv : (tensor<16x1xf32>, tensor<f32>) -> tensor<16x1xf32>
  %eps = kg.constant 1.000000e-05 : tensor<f32>
  %v = kg.add %ms, %eps : (tensor<16x1xf32>, tensor<f32>) -> tensor<16x1xf32>
  %r = kg.rsqrt %v : tensor<16x1xf32>
  %n = kg.mul %x, %r : (tensor<16x256xf32>, tensor<16x1xf32>) -> tensor<16x256xf32>
  %ng = kg.mul %n, %gamma : (tensor<16x256xf32>, tensor<256xf32>) -> tensor<16x256xf32>
  %y = kg.matmul %ng, %w : (tensor<16x256xf32>, tensor<256x128xf32>) -> tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// Given: silu(x @ w1) in one kernel, x @ w2 times it in another (by default
// one kernel holds all four ops).
// GIVEN-LABEL: func.func @part_gated_mlp(
// GIVEN-NEXT: %[[S:.*]] = kg.kernel @part_gated_mlp_0_matmul(%arg0, %arg1)
// GIVEN-NEXT: ^bb0
// GIVEN-NEXT: kg.matmul
// GIVEN-NEXT: kg.silu
// GIVEN-NEXT: kg.yield
// GIVEN-NEXT: }
// GIVEN-NEXT: %[[Y:.*]] = kg.kernel @part_gated_mlp_1_matmul(%arg0, %arg2, %[[S]])
// GIVEN-NEXT: ^bb0
// GIVEN-NEXT: kg.matmul
// GIVEN-NEXT: kg.mul
// GIVEN-NEXT: kg.yield
// GIVEN-NEXT: }
// GIVEN-NEXT: return %[[Y]]
// Without epilogues: two matmul kernels, then silu and mul pointwise.
// NOEPI-LABEL: func.func @part_gated_mlp(
// NOEPI-NEXT: %[[A:.*]] = kg.kernel @part_gated_mlp_0_matmul(%arg0, %arg1)
// NOEPI: %[[B:.*]] = kg.kernel @part_gated_mlp_1_matmul(%arg0, %arg2)
// NOEPI: kg.kernel @part_gated_mlp_2_pointwise(%[[A]], %[[B]])
// NOEPI-NEXT: ^bb0
// NOEPI-NEXT: kg.silu
// NOEPI-NEXT: kg.mul
// Without merging siblings: x @ w2 alone, read by the epilogue of x @ w1.
// NOSIB-LABEL: func.func @part_gated_mlp(
// NOSIB-NEXT: %[[B:.*]] = kg.kernel @part_gated_mlp_0_matmul(%arg0, %arg2)
// NOSIB-NEXT: ^bb0
// NOSIB-NEXT: kg.matmul
// NOSIB-NEXT: kg.yield
// NOSIB-NEXT: }
// NOSIB-NEXT: kg.kernel @part_gated_mlp_1_matmul(%arg0, %arg1, %[[B]])
// NOSIB-NEXT: ^bb0
// NOSIB-NEXT: kg.matmul
// NOSIB-NEXT: kg.silu
// NOSIB-NEXT: kg.mul
// The function option leaves the other functions to the greedy fusion.
// GIVEN-LABEL: func.func @part_attention(
// GIVEN-NEXT: kg.kernel @part_attention_0_attention
func.func @part_gated_mlp(%x: tensor<32x256xf32>, %w1: tensor<256x512xf32>, %w2: tensor<256x512xf32>) -> tensor<32x512xf32> {
  %a = kg.matmul %x, %w1 : (tensor<32x256xf32>, tensor<256x512xf32>) -> tensor<32x512xf32>
  %b = kg.matmul %x, %w2 : (tensor<32x256xf32>, tensor<256x512xf32>) -> tensor<32x512xf32>
  %s = kg.silu %a : tensor<32x512xf32>
  %y = kg.mul %s, %b : (tensor<32x512xf32>, tensor<32x512xf32>) -> tensor<32x512xf32>
  return %y : tensor<32x512xf32>
}

// Without epilogues the softmax leaves the scores' kernel and becomes the
// prologue of the second matmul (skinny-prologue, which would keep it a
// kernel of its own at 64 rows, off).
// NOEPI-LABEL: func.func @part_attention(
// NOEPI-NEXT: %[[S:.*]] = kg.kernel @part_attention_0_matmul(%arg1, %arg0)
// NOEPI-NEXT: ^bb0
// NOEPI-NEXT: kg.transpose
// NOEPI-NEXT: kg.matmul
// NOEPI-NEXT: kg.yield
// NOEPI-NEXT: }
// NOEPI-NEXT: kg.kernel @part_attention_1_matmul(%[[S]], %arg2)
// NOEPI-NEXT: ^bb0
// NOEPI-NEXT: kg.reduce max
// NOEPI: kg.reduce sum
// NOEPI: kg.matmul
// Without prologues the transpose is a pointwise kernel of its own.
// NOPRO-LABEL: func.func @part_attention(
// NOPRO-NEXT: %[[T:.*]] = kg.kernel @part_attention_0_pointwise(%arg1)
// NOPRO-NEXT: ^bb0
// NOPRO-NEXT: kg.transpose
// NOPRO-NEXT: kg.yield
// NOPRO-NEXT: }
// NOPRO-NEXT: %[[P:.*]] = kg.kernel @part_attention_1_matmul(%arg0, %[[T]])
// NOPRO: kg.reduce sum
// NOPRO: kg.kernel @part_attention_2_matmul(%[[P]], %arg2)
func.func @part_attention(%q: tensor<64x64xf32>, %k: tensor<256x64xf32>, %v: tensor<256x64xf32>) -> tensor<64x64xf32> {
  %kt = kg.transpose %k [1, 0] : tensor<256x64xf32> -> tensor<64x256xf32>
  %s = kg.matmul %q, %kt : (tensor<64x64xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %m = kg.reduce max %s dims [1] keepdim : tensor<64x256xf32> -> tensor<64x1xf32>
  %d = kg.sub %s, %m : (tensor<64x256xf32>, tensor<64x1xf32>) -> tensor<64x256xf32>
  %e = kg.exp %d : tensor<64x256xf32>
  %z = kg.reduce sum %e dims [1] keepdim : tensor<64x256xf32> -> tensor<64x1xf32>
  %p = kg.div %e, %z : (tensor<64x256xf32>, tensor<64x1xf32>) -> tensor<64x256xf32>
  %o = kg.matmul %p, %v : (tensor<64x256xf32>, tensor<256x64xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}

// Without merging reductions the softmax is two kernels: the max with
// exp(x - max), then the sum with the division.
// NORED-LABEL: func.func @part_softmax(
// NORED-NEXT: %[[E:.*]] = kg.kernel @part_softmax_0_reduction(%arg0)
// NORED-NEXT: ^bb0
// NORED-NEXT: kg.reduce max
// NORED-NEXT: kg.sub
// NORED-NEXT: kg.exp
// NORED-NEXT: kg.yield
// NORED-NEXT: }
// NORED-NEXT: kg.kernel @part_softmax_1_reduction(%[[E]])
// NORED-NEXT: ^bb0
// NORED-NEXT: kg.reduce sum
// NORED-NEXT: kg.div
// NORED-NEXT: kg.yield
func.func @part_softmax(%x: tensor<16x1000xf32>) -> tensor<16x1000xf32> {
  %m = kg.reduce max %x dims [1] keepdim : tensor<16x1000xf32> -> tensor<16x1xf32>
  %d = kg.sub %x, %m : (tensor<16x1000xf32>, tensor<16x1xf32>) -> tensor<16x1000xf32>
  %e = kg.exp %d : tensor<16x1000xf32>
  %z = kg.reduce sum %e dims [1] keepdim : tensor<16x1000xf32> -> tensor<16x1xf32>
  %p = kg.div %e, %z : (tensor<16x1000xf32>, tensor<16x1xf32>) -> tensor<16x1000xf32>
  return %p : tensor<16x1000xf32>
}

// No reduction feeds this matmul, so turning the fold off changes nothing:
// one kernel still.
// NOFOLD-ALL-LABEL: func.func @part_matmul_bias_relu(
// NOFOLD-ALL-NEXT: kg.kernel @part_matmul_bias_relu_0_matmul
// NOFOLD-ALL-NEXT: ^bb0
// NOFOLD-ALL-NEXT: kg.matmul
// NOFOLD-ALL-NEXT: kg.add
// NOFOLD-ALL-NEXT: kg.relu
// NOFOLD-ALL-NEXT: kg.yield
// NOFOLD-ALL-NEXT: }
// NOFOLD-ALL-NEXT: return
func.func @part_matmul_bias_relu(%x: tensor<32x256xf32>, %w: tensor<256x128xf32>, %bias: tensor<128xf32>) -> tensor<32x128xf32> {
  %m = kg.matmul %x, %w : (tensor<32x256xf32>, tensor<256x128xf32>) -> tensor<32x128xf32>
  %a = kg.add %m, %bias : (tensor<32x128xf32>, tensor<128xf32>) -> tensor<32x128xf32>
  %r = kg.relu %a : tensor<32x128xf32>
  return %r : tensor<32x128xf32>
}

// kg.fusion_group attributes give the partition in the input: the exp alone
// (fused greedily it would join the relu), the relu and neg together. The
// attributes do not stay on the ops inside the kernels.
// GIVEN-LABEL: func.func @part_by_attribute(
// GIVEN-NEXT: %[[E:.*]] = kg.kernel @part_by_attribute_0_pointwise(%arg0)
// GIVEN-NEXT: ^bb0(%[[A:.*]]: tensor<16x128xf32>):
// GIVEN-NEXT: kg.exp %[[A]] : tensor<16x128xf32>
// GIVEN-NEXT: kg.yield
// GIVEN-NEXT: }
// GIVEN-NEXT: %[[N:.*]] = kg.kernel @part_by_attribute_1_pointwise(%[[E]])
// GIVEN-NEXT: ^bb0(%[[B:.*]]: tensor<16x128xf32>):
// GIVEN-NEXT: %[[R:.*]] = kg.relu %[[B]] : tensor<16x128xf32>
// GIVEN-NEXT: kg.neg %[[R]] : tensor<16x128xf32>
// GIVEN-NEXT: kg.yield
// GIVEN-NEXT: }
// GIVEN-NEXT: return %[[N]]
func.func @part_by_attribute(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %x {kg.fusion_group = 0} : tensor<16x128xf32>
  %r = kg.relu %e {kg.fusion_group = 1} : tensor<16x128xf32>
  %n = kg.neg %r {kg.fusion_group = 1} : tensor<16x128xf32>
  return %n : tensor<16x128xf32>
}

// LoRA, X W + (X A) B: one matmul kernel, X A riding along the k loop of X W
// and (X A) B added after it (kgc.tiling.low_rank). With fold-low-rank off,
// three kernels: X A, (X A) B, X W plus the sum.
// PRIM-LABEL: func.func @part_lora(
// PRIM-NEXT: %[[Y:.*]] = kg.kernel @part_lora_0_matmul(%arg0, %arg1, %arg2, %arg3)
// PRIM-NEXT: ^bb0(%[[X:.*]]: tensor<16x512xf16>, %[[W:.*]]: tensor<512x256xf16>, %[[A:.*]]: tensor<512x16xf16>, %[[B:.*]]: tensor<16x256xf16>):
// PRIM-NEXT: %[[V:.*]] = kg.matmul %[[X]], %[[W]]
// PRIM-NEXT: %[[T:.*]] = kg.matmul %[[X]], %[[A]]
// PRIM-NEXT: %[[U:.*]] = kg.matmul %[[T]], %[[B]]
// PRIM-NEXT: kg.add %[[V]], %[[U]]
// PRIM-NEXT: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: return %[[Y]]
// NOLOWRANK-LABEL: func.func @part_lora(
// NOLOWRANK-NEXT: %[[T:.*]] = kg.kernel @part_lora_0_matmul(%arg0, %arg2)
// NOLOWRANK: %[[U:.*]] = kg.kernel @part_lora_1_matmul(%[[T]], %arg3)
// NOLOWRANK: %[[Y:.*]] = kg.kernel @part_lora_2_matmul(%arg0, %arg1, %[[U]])
// NOLOWRANK: return %[[Y]]
// The other decisions leave it one kernel.
// NOSIB-LABEL: func.func @part_lora(
// NOSIB-NEXT: kg.kernel @part_lora_0_matmul(%arg0, %arg1, %arg2, %arg3)
// NOSIB-NOT: kg.kernel
// NOSIB: return
func.func @part_lora(%x: tensor<16x512xf16>, %w: tensor<512x256xf16>, %a: tensor<512x16xf16>, %b: tensor<16x256xf16>) -> tensor<16x256xf16> {
  %v = kg.matmul %x, %w : (tensor<16x512xf16>, tensor<512x256xf16>) -> tensor<16x256xf16>
  %t = kg.matmul %x, %a : (tensor<16x512xf16>, tensor<512x16xf16>) -> tensor<16x16xf16>
  %u = kg.matmul %t, %b : (tensor<16x16xf16>, tensor<16x256xf16>) -> tensor<16x256xf16>
  %y = kg.add %v, %u : (tensor<16x256xf16>, tensor<16x256xf16>) -> tensor<16x256xf16>
  return %y : tensor<16x256xf16>
}

// Not folded: a rank of 128 is wider than the 64 columns of X W, so X A
// cannot ride in X W's n tile. Three kernels, X W taking the sum.
// PRIM-LABEL: func.func @part_lora_rank_wider_than_n(
// PRIM-NEXT: %[[T:.*]] = kg.kernel @part_lora_rank_wider_than_n_0_matmul(%arg0, %arg2)
// PRIM: %[[U:.*]] = kg.kernel @part_lora_rank_wider_than_n_1_matmul(%[[T]], %arg3)
// PRIM: kg.kernel @part_lora_rank_wider_than_n_2_matmul(%arg0, %arg1, %[[U]])
func.func @part_lora_rank_wider_than_n(%x: tensor<16x512xf16>, %w: tensor<512x64xf16>, %a: tensor<512x128xf16>, %b: tensor<128x64xf16>) -> tensor<16x64xf16> {
  %v = kg.matmul %x, %w : (tensor<16x512xf16>, tensor<512x64xf16>) -> tensor<16x64xf16>
  %t = kg.matmul %x, %a : (tensor<16x512xf16>, tensor<512x128xf16>) -> tensor<16x128xf16>
  %u = kg.matmul %t, %b : (tensor<16x128xf16>, tensor<128x64xf16>) -> tensor<16x64xf16>
  %y = kg.add %v, %u : (tensor<16x64xf16>, tensor<16x64xf16>) -> tensor<16x64xf16>
  return %y : tensor<16x64xf16>
}

// Not folded: the rank-r product reads B through an op (a negation), and its
// rows are loaded one at a time from a kernel input only.
// PRIM-LABEL: func.func @part_lora_computed_b(
// PRIM-NEXT: %[[T:.*]] = kg.kernel @part_lora_computed_b_0_matmul(%arg0, %arg2)
// PRIM: %[[U:.*]] = kg.kernel @part_lora_computed_b_1_matmul(%arg3, %[[T]])
// PRIM: kg.kernel @part_lora_computed_b_2_matmul(%arg0, %arg1, %[[U]])
func.func @part_lora_computed_b(%x: tensor<16x512xf16>, %w: tensor<512x256xf16>, %a: tensor<512x16xf16>, %b: tensor<16x256xf16>) -> tensor<16x256xf16> {
  %v = kg.matmul %x, %w : (tensor<16x512xf16>, tensor<512x256xf16>) -> tensor<16x256xf16>
  %t = kg.matmul %x, %a : (tensor<16x512xf16>, tensor<512x16xf16>) -> tensor<16x16xf16>
  %nb = kg.neg %b : tensor<16x256xf16>
  %u = kg.matmul %t, %nb : (tensor<16x16xf16>, tensor<16x256xf16>) -> tensor<16x256xf16>
  %y = kg.add %v, %u : (tensor<16x256xf16>, tensor<16x256xf16>) -> tensor<16x256xf16>
  return %y : tensor<16x256xf16>
}

// Attention's backward from its saved logsumexp: P = exp(Q K^T - lse) feeds
// both dV = P^T dO and dS = P (dO V^T - rowsum(dO O)). The kernel of dV
// also computes rowsum(dO O) (both read the transposed dO), and the kernel
// of dO V^T reads that sum, so P's kernel is not merged into dS's: the
// merged kernel would read the dV kernel's sum and feed its P, a kernel
// waiting on itself. (Merges once looked only along op-to-op paths, not
// through a kernel entered at one op and left at another.)
// PRIM-LABEL: func.func @attention_backward_through_a_sibling_kernel(
// PRIM: %[[P:.*]]:2 = kg.kernel @attention_backward_through_a_sibling_kernel_0_matmul(%arg1, %arg0, %arg4)
// PRIM: %[[DV:.*]]:3 = kg.kernel @attention_backward_through_a_sibling_kernel_1_matmul(%arg5, %[[P]]#1, %arg3)
// PRIM: %[[DS:.*]]:2 = kg.kernel @attention_backward_through_a_sibling_kernel_2_matmul(%arg2, %[[DV]]#0, %[[DV]]#2, %[[P]]#0)
// PRIM: kg.kernel @attention_backward_through_a_sibling_kernel_3_matmul(%[[DS]]#0, %arg1)
// PRIM: kg.kernel @attention_backward_through_a_sibling_kernel_4_matmul(%[[DS]]#1, %arg0)
func.func @attention_backward_through_a_sibling_kernel(%q: tensor<2x4x17x16xf32>, %k: tensor<2x4x17x16xf32>, %v: tensor<2x4x17x16xf32>, %o: tensor<2x4x17x16xf32>, %lse: tensor<2x4x17xf32>, %dy: tensor<2x17x4x16xf32>) -> (tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>) {
  %do = kg.transpose %dy [0, 2, 1, 3] : tensor<2x17x4x16xf32> -> tensor<2x4x17x16xf32>
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<2x4x17x16xf32> -> tensor<2x4x16x17xf32>
  %s = kg.matmul %q, %kt : (tensor<2x4x17x16xf32>, tensor<2x4x16x17xf32>) -> tensor<2x4x17x17xf32>
  %lse1 = kg.reshape %lse : tensor<2x4x17xf32> -> tensor<2x4x17x1xf32>
  %shifted = kg.sub %s, %lse1 : (tensor<2x4x17x17xf32>, tensor<2x4x17x1xf32>) -> tensor<2x4x17x17xf32>
  %p = kg.exp %shifted : tensor<2x4x17x17xf32>
  %pt = kg.transpose %p [0, 1, 3, 2] : tensor<2x4x17x17xf32> -> tensor<2x4x17x17xf32>
  %dv = kg.matmul %pt, %do : (tensor<2x4x17x17xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  %vt = kg.transpose %v [0, 1, 3, 2] : tensor<2x4x17x16xf32> -> tensor<2x4x16x17xf32>
  %dp = kg.matmul %do, %vt : (tensor<2x4x17x16xf32>, tensor<2x4x16x17xf32>) -> tensor<2x4x17x17xf32>
  %m = kg.mul %do, %o : (tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  %row = kg.reduce sum %m dims [3] keepdim : tensor<2x4x17x16xf32> -> tensor<2x4x17x1xf32>
  %d = kg.sub %dp, %row : (tensor<2x4x17x17xf32>, tensor<2x4x17x1xf32>) -> tensor<2x4x17x17xf32>
  %ds = kg.mul %p, %d : (tensor<2x4x17x17xf32>, tensor<2x4x17x17xf32>) -> tensor<2x4x17x17xf32>
  %dq = kg.matmul %ds, %k : (tensor<2x4x17x17xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  %dst = kg.transpose %ds [0, 1, 3, 2] : tensor<2x4x17x17xf32> -> tensor<2x4x17x17xf32>
  %dk = kg.matmul %dst, %q : (tensor<2x4x17x17xf32>, tensor<2x4x17x16xf32>) -> tensor<2x4x17x16xf32>
  return %dq, %dk, %dv : tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>, tensor<2x4x17x16xf32>
}

// The key and value projections of a decode step: two products of one row
// that read the same x. kg-fuse makes them one kernel with a result each
// (one launch, and one kernel summing split-k partials, where there were two
// of each); merge-shared-input=false keeps them apart.
// PRIM-LABEL: func.func @decode_key_value_projections(
// PRIM-NEXT: %[[KV:.*]]:2 = kg.kernel @decode_key_value_projections_0_matmul(
// PRIM-COUNT-2: kg.matmul
// PRIM: kg.yield
// PRIM-NEXT: }
// PRIM-NEXT: return %[[KV]]#0, %[[KV]]#1
// NOSHARED-LABEL: func.func @decode_key_value_projections(
// NOSHARED-NEXT: kg.kernel @decode_key_value_projections_0_matmul(
// NOSHARED: kg.kernel @decode_key_value_projections_1_matmul(
func.func @decode_key_value_projections(%x: tensor<1x512xf16>, %wk: tensor<128x512xf16>, %wv: tensor<128x512xf16>) -> (tensor<1x128xf16>, tensor<1x128xf16>) {
  %wkt = kg.transpose %wk [1, 0] : tensor<128x512xf16> -> tensor<512x128xf16>
  %k = kg.matmul %x, %wkt : (tensor<1x512xf16>, tensor<512x128xf16>) -> tensor<1x128xf16>
  %wvt = kg.transpose %wv [1, 0] : tensor<128x512xf16> -> tensor<512x128xf16>
  %v = kg.matmul %x, %wvt : (tensor<1x512xf16>, tensor<512x128xf16>) -> tensor<1x128xf16>
  return %k, %v : tensor<1x128xf16>, tensor<1x128xf16>
}

// 17 rows are more than a decode step's: the products stay two kernels (one
// kernel of two accumulators saves no launch worth its registers there).
// PRIM-LABEL: func.func @prefill_key_value_projections(
// PRIM-NEXT: kg.kernel @prefill_key_value_projections_0_matmul(
// PRIM: kg.kernel @prefill_key_value_projections_1_matmul(
func.func @prefill_key_value_projections(%x: tensor<17x512xf16>, %wk: tensor<128x512xf16>, %wv: tensor<128x512xf16>) -> (tensor<17x128xf16>, tensor<17x128xf16>) {
  %wkt = kg.transpose %wk [1, 0] : tensor<128x512xf16> -> tensor<512x128xf16>
  %k = kg.matmul %x, %wkt : (tensor<17x512xf16>, tensor<512x128xf16>) -> tensor<17x128xf16>
  %wvt = kg.transpose %wv [1, 0] : tensor<128x512xf16> -> tensor<512x128xf16>
  %v = kg.matmul %x, %wvt : (tensor<17x512xf16>, tensor<512x128xf16>) -> tensor<17x128xf16>
  return %k, %v : tensor<17x128xf16>, tensor<17x128xf16>
}

// Products of one x against weights of two shapes (the query and key
// projections of grouped-query attention) stay two kernels: one grid walks
// one n.
// PRIM-LABEL: func.func @decode_query_key_projections(
// PRIM-NEXT: kg.kernel @decode_query_key_projections_0_matmul(
// PRIM: kg.kernel @decode_query_key_projections_1_matmul(
func.func @decode_query_key_projections(%x: tensor<1x512xf16>, %wq: tensor<512x512xf16>, %wk: tensor<128x512xf16>) -> (tensor<1x512xf16>, tensor<1x128xf16>) {
  %wqt = kg.transpose %wq [1, 0] : tensor<512x512xf16> -> tensor<512x512xf16>
  %q = kg.matmul %x, %wqt : (tensor<1x512xf16>, tensor<512x512xf16>) -> tensor<1x512xf16>
  %wkt = kg.transpose %wk [1, 0] : tensor<128x512xf16> -> tensor<512x128xf16>
  %k = kg.matmul %x, %wkt : (tensor<1x512xf16>, tensor<512x128xf16>) -> tensor<1x128xf16>
  return %q, %k : tensor<1x512xf16>, tensor<1x128xf16>
}

// A gated MLP's backward as the torch frontend traces it: the products'
// [8, 6] results viewed as [2, 4, 6] for the elementwise ops, and the two
// gradients viewed back as [8, 6] for the next products. One kernel
// iterates over the finest shape, [2, 4, 6], and stores both [8, 6] views,
// whose index merges its first two; iterating over [8, 6] would split them,
// and the second view's value would be stored and copied by a kernel of its
// own.
// CHECK-LABEL: func.func @gated_backward_views
// CHECK: %[[K:.*]]:2 = kg.kernel @gated_backward_views_0_pointwise(%arg0, %arg2, %arg1) : (tensor<8x6xbf16>, tensor<8x6xbf16>, tensor<2x4x6xbf16>) -> (tensor<8x6xbf16>, tensor<8x6xbf16>)
// CHECK-NOT: kg.kernel
// CHECK: return %[[K]]#0, %[[K]]#1
func.func @gated_backward_views(%gate: tensor<8x6xbf16>, %grad: tensor<2x4x6xbf16>, %up: tensor<8x6xbf16>) -> (tensor<8x6xbf16>, tensor<8x6xbf16>) {
  %g = kg.reshape %gate : tensor<8x6xbf16> -> tensor<2x4x6xbf16>
  %u = kg.reshape %up : tensor<8x6xbf16> -> tensor<2x4x6xbf16>
  %s = kg.sigmoid %g : tensor<2x4x6xbf16>
  %silu = kg.mul %g, %s : (tensor<2x4x6xbf16>, tensor<2x4x6xbf16>) -> tensor<2x4x6xbf16>
  %dup = kg.mul %grad, %silu : (tensor<2x4x6xbf16>, tensor<2x4x6xbf16>) -> tensor<2x4x6xbf16>
  %dsilu = kg.mul %grad, %u : (tensor<2x4x6xbf16>, tensor<2x4x6xbf16>) -> tensor<2x4x6xbf16>
  %dgate = kg.mul %dsilu, %s : (tensor<2x4x6xbf16>, tensor<2x4x6xbf16>) -> tensor<2x4x6xbf16>
  %a = kg.reshape %dup : tensor<2x4x6xbf16> -> tensor<8x6xbf16>
  %b = kg.reshape %dgate : tensor<2x4x6xbf16> -> tensor<8x6xbf16>
  return %a, %b : tensor<8x6xbf16>, tensor<8x6xbf16>
}

// A causal LM's loss gradient as the torch frontend traces it: the logits
// [2, 4, 6] viewed as [8, 6] rows, the labels' one-hot summed along each
// row, and the gradient viewed back as [2, 4, 6] and cast. One kernel
// iterates over [2, 4] rows, reading the [8, 6] values at their merged
// index, and stores the bf16 gradient; iterating over the reduced value's
// own [8] rows would split them, and the f32 gradient went through memory
// to a pointwise kernel of its own.
// CHECK-LABEL: func.func @cross_entropy_backward_views
// CHECK: %[[G:.*]] = kg.kernel @cross_entropy_backward_views_0_reduction(%arg0, %arg1, %arg2, %arg3) : (tensor<2x4x6xbf16>, tensor<8x1xf32>, tensor<8x1xi64>, tensor<f32>) -> tensor<8x6xbf16>
// CHECK: kg.kernel @cross_entropy_backward_views_1_matmul(%[[G]], %arg4)
// CHECK-NOT: kg.kernel
func.func @cross_entropy_backward_views(%logits: tensor<2x4x6xbf16>, %lse: tensor<8x1xf32>, %labels: tensor<8x1xi64>, %scale: tensor<f32>, %w: tensor<6x5xbf16>) -> tensor<8x5xbf16> {
  %c = kg.cast %logits : tensor<2x4x6xbf16> to tensor<2x4x6xf32>
  %l = kg.reshape %c : tensor<2x4x6xf32> -> tensor<8x6xf32>
  %shifted = kg.sub %l, %lse : (tensor<8x6xf32>, tensor<8x1xf32>) -> tensor<8x6xf32>
  %p = kg.exp %shifted : tensor<8x6xf32>
  %zero = kg.constant 0.000000e+00 : tensor<8x6xf32>
  %iota = kg.iota dim 1 : tensor<8x6xi64>
  %lb = kg.broadcast_to %labels : tensor<8x1xi64> -> tensor<8x6xi64>
  %hit = kg.cmp eq %iota, %lb : (tensor<8x6xi64>, tensor<8x6xi64>) -> tensor<8x6xi1>
  %onehot = kg.select %hit, %scale, %zero : (tensor<8x6xi1>, tensor<f32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %sum = kg.reduce sum %onehot dims [1] keepdim : tensor<8x6xf32> -> tensor<8x1xf32>
  %ps = kg.mul %p, %sum : (tensor<8x6xf32>, tensor<8x1xf32>) -> tensor<8x6xf32>
  %d = kg.sub %onehot, %ps : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %d3 = kg.reshape %d : tensor<8x6xf32> -> tensor<2x4x6xf32>
  %dh = kg.cast %d3 : tensor<2x4x6xf32> to tensor<2x4x6xbf16>
  %d2 = kg.reshape %dh : tensor<2x4x6xbf16> -> tensor<8x6xbf16>
  %y = kg.matmul %d2, %w : (tensor<8x6xbf16>, tensor<6x5xbf16>) -> tensor<8x5xbf16>
  return %y : tensor<8x5xbf16>
}

// The same gradient viewed as [8, 2, 3]: the finer value splits the reduced
// axis, which the reduction must see whole, so the one-hot's reduction and
// the gradient stay two kernels (as before kgc iterated over finer rows).
// CHECK-LABEL: func.func @split_vocabulary_views
// CHECK: kg.kernel @split_vocabulary_views_0_reduction(%arg2, %arg3)
// CHECK: kg.kernel @split_vocabulary_views_1_pointwise(%arg0, %arg1,
// CHECK: kg.kernel @split_vocabulary_views_2_matmul
func.func @split_vocabulary_views(%logits: tensor<8x2x3xbf16>, %lse: tensor<8x1xf32>, %labels: tensor<8x1xi64>, %scale: tensor<f32>, %w: tensor<6x5xbf16>) -> tensor<8x5xbf16> {
  %c = kg.cast %logits : tensor<8x2x3xbf16> to tensor<8x2x3xf32>
  %l = kg.reshape %c : tensor<8x2x3xf32> -> tensor<8x6xf32>
  %shifted = kg.sub %l, %lse : (tensor<8x6xf32>, tensor<8x1xf32>) -> tensor<8x6xf32>
  %p = kg.exp %shifted : tensor<8x6xf32>
  %zero = kg.constant 0.000000e+00 : tensor<8x6xf32>
  %iota = kg.iota dim 1 : tensor<8x6xi64>
  %lb = kg.broadcast_to %labels : tensor<8x1xi64> -> tensor<8x6xi64>
  %hit = kg.cmp eq %iota, %lb : (tensor<8x6xi64>, tensor<8x6xi64>) -> tensor<8x6xi1>
  %onehot = kg.select %hit, %scale, %zero : (tensor<8x6xi1>, tensor<f32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %sum = kg.reduce sum %onehot dims [1] keepdim : tensor<8x6xf32> -> tensor<8x1xf32>
  %ps = kg.mul %p, %sum : (tensor<8x6xf32>, tensor<8x1xf32>) -> tensor<8x6xf32>
  %d = kg.sub %onehot, %ps : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %d3 = kg.reshape %d : tensor<8x6xf32> -> tensor<8x2x3xf32>
  %dh = kg.cast %d3 : tensor<8x2x3xf32> to tensor<8x2x3xbf16>
  %d2 = kg.reshape %dh : tensor<8x2x3xbf16> -> tensor<8x6xbf16>
  %y = kg.matmul %d2, %w : (tensor<8x6xbf16>, tensor<6x5xbf16>) -> tensor<8x5xbf16>
  return %y : tensor<8x5xbf16>
}
