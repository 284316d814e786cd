// kg-fuse refuses some merges that plan as one kernel, where the kernel
// would be slower than its pieces:
//   library-alone: a matmul that the GPU's BLAS runs (kgc.tiling.library:
//     at least 256 rows, columns and k steps) takes in no norm, prologue,
//     epilogue or sibling; only what keeps it a library call (the transpose
//     of a weight it reads); but LoRA's X W + (X A) B of at most 128 rows
//     is one kernel all the same;
//   keys-once (attention's objection, Schedule.fusion_refusal): work on K or
//     V stays out of an attention kernel whose programs would each repeat it;
//   prologue-once (the matmul's objection): a prologue of exponentials,
//     divisions and the like stays out of a matmul whose programs along n
//     would each repeat it;
//   skinny-prologue (the matmul's objection): no prologue at all in a
//     product of more than 16 rows whose programs along n would repeat it;
//   norm-over-long-k (the matmul's objection): no norm folded into a product
//     whose k loop is longer than 512 steps.
// (library-call, the library schedule's rule, is a gathering, not a refusal:
// it gives a library matmul the bias of its rows and the transposes of its
// operands, which library-alone would otherwise keep out.)
// RUN: kgc-opt %s --kg-decompose --kg-fuse | FileCheck %s
// RUN: kgc-opt %s --kg-decompose --kg-fuse='library-alone=false rules-off=keys-once,prologue-once,skinny-prologue,norm-over-long-k' | FileCheck %s --check-prefix=FUSED
// RUN: kgc-opt %s --kg-decompose --kg-fuse='rules-off=skinny-prologue' | FileCheck %s --check-prefix=ROWS
// RUN: kgc-opt %s --kg-decompose --kg-fuse='rules-off=library-call' | FileCheck %s --check-prefix=BIASOFF
// Without library kernels kgc's own rule gives nothing to the library:
// RUN: env KGC_LIBRARY_KERNELS=0 kgc-opt %s --kg-decompose --kg-fuse | FileCheck %s --check-prefix=NOLIB

// A prefill's RMSNorm before its projection: the norm is a reduction kernel
// and the projection a bare matmul, where fused it would be one kernel.
// CHECK-LABEL: func.func @prefill_norm_matmul(
// CHECK-NEXT: %[[N:.*]] = kg.kernel @prefill_norm_matmul_0_reduction(%arg0, %arg1) : (tensor<512x4096xf16>, tensor<4096xf16>) -> tensor<512x4096xf16> {
// CHECK: kg.kernel @prefill_norm_matmul_1_matmul(%[[N]], %arg2) : (tensor<512x4096xf16>, tensor<4096x4096xf16>) -> tensor<512x4096xf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.matmul
// CHECK-NEXT: kg.yield
// FUSED-LABEL: func.func @prefill_norm_matmul(
// Without the library the norm still stays out: 512 rows are past a skinny
// product's (skinny-prologue).
// NOLIB-LABEL: func.func @prefill_norm_matmul(
// NOLIB-NEXT: kg.kernel @prefill_norm_matmul_0_reduction(
// FUSED-NEXT: kg.kernel @prefill_norm_matmul_0_matmul(%arg0, %arg1, %arg2)
func.func @prefill_norm_matmul(%x: tensor<512x4096xf16>, %gamma: tensor<4096xf16>, %w: tensor<4096x4096xf16>) -> tensor<512x4096xf16> {
  %n = kg.rms_norm %x weight %gamma normalized_shape [4096] eps 1.0e-5 : (tensor<512x4096xf16>, tensor<4096xf16>) -> tensor<512x4096xf16>
  %y = kg.matmul %n, %w : (tensor<512x4096xf16>, tensor<4096x4096xf16>) -> tensor<512x4096xf16>
  return %y : tensor<512x4096xf16>
}

// The transpose of the weight stays in the library kernel (the call reads
// the weight swapped); the residual add is a kernel of its own.
// CHECK-LABEL: func.func @prefill_residual(
// CHECK-NEXT: %[[Y:.*]] = kg.kernel @prefill_residual_0_matmul(%arg1, %arg0) : (tensor<4096x4096xf16>, tensor<512x4096xf16>) -> tensor<512x4096xf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.transpose
// CHECK-NEXT: kg.matmul
// CHECK-NEXT: kg.yield
// CHECK: kg.kernel @prefill_residual_1_pointwise(%[[Y]], %arg2)
// FUSED-LABEL: func.func @prefill_residual(
// NOLIB-LABEL: func.func @prefill_residual(
// NOLIB-NEXT: kg.kernel @prefill_residual_0_matmul(
// FUSED-NEXT: kg.kernel @prefill_residual_0_matmul(%arg1, %arg0, %arg2)
func.func @prefill_residual(%x: tensor<512x4096xf16>, %w: tensor<4096x4096xf16>, %r: tensor<512x4096xf16>) -> tensor<512x4096xf16> {
  %wt = kg.transpose %w [1, 0] : tensor<4096x4096xf16> -> tensor<4096x4096xf16>
  %y = kg.matmul %x, %wt : (tensor<512x4096xf16>, tensor<4096x4096xf16>) -> tensor<512x4096xf16>
  %s = kg.add %y, %r : (tensor<512x4096xf16>, tensor<512x4096xf16>) -> tensor<512x4096xf16>
  return %s : tensor<512x4096xf16>
}

// A bias added to every row of a library matmul (torch's addmm) is the
// call's (the library schedule's rule `library-call` gathers it, promotion
// casts and all); the gelu after it is a kernel of its own. With the rule
// off, the bias is the pointwise kernel's, as any epilogue of the call.
// CHECK-LABEL: func.func @prefill_bias_gelu(
// CHECK-NEXT: %[[Y:.*]] = kg.kernel @prefill_bias_gelu_0_matmul(%arg0, %arg1, %arg2) : (tensor<512x768xf16>, tensor<768x2304xf16>, tensor<2304xf16>) -> tensor<512x2304xf16> {
// CHECK: kg.add
// CHECK-NOT: kg.gelu
// CHECK: kg.kernel @prefill_bias_gelu_1_pointwise(%[[Y]])
// CHECK: kg.gelu
// BIASOFF-LABEL: func.func @prefill_bias_gelu(
// BIASOFF-NEXT: %[[Y:.*]] = kg.kernel @prefill_bias_gelu_0_matmul(%arg0, %arg1) : (tensor<512x768xf16>, tensor<768x2304xf16>) -> tensor<512x2304xf16> {
// BIASOFF: kg.kernel @prefill_bias_gelu_1_pointwise(%[[Y]], %arg2)
// FUSED-LABEL: func.func @prefill_bias_gelu(
// NOLIB-LABEL: func.func @prefill_bias_gelu(
// NOLIB-NEXT: kg.kernel @prefill_bias_gelu_0_matmul(%arg0, %arg1, %arg2)
// NOLIB: kg.gelu
// FUSED-NEXT: kg.kernel @prefill_bias_gelu_0_matmul(%arg0, %arg1, %arg2)
func.func @prefill_bias_gelu(%x: tensor<512x768xf16>, %w: tensor<768x2304xf16>, %b: tensor<2304xf16>) -> tensor<512x2304xf16> {
  %y = kg.matmul %x, %w : (tensor<512x768xf16>, tensor<768x2304xf16>) -> tensor<512x2304xf16>
  %s = kg.add %y, %b : (tensor<512x2304xf16>, tensor<2304xf16>) -> tensor<512x2304xf16>
  %g = kg.gelu %s : tensor<512x2304xf16>
  return %g : tensor<512x2304xf16>
}

// A gated MLP of 512 rows: two library matmuls and silu(g) * u on its own.
// CHECK-LABEL: func.func @prefill_gated(
// CHECK-NEXT: %[[G:.*]] = kg.kernel @prefill_gated_0_matmul(%arg0, %arg1)
// CHECK: %[[U:.*]] = kg.kernel @prefill_gated_1_matmul(%arg0, %arg2)
// CHECK: kg.kernel @prefill_gated_2_pointwise(%[[G]], %[[U]])
// FUSED-LABEL: func.func @prefill_gated(
// NOLIB-LABEL: func.func @prefill_gated(
// NOLIB-NEXT: kg.kernel @prefill_gated_0_matmul(
// FUSED-NEXT: kg.kernel @prefill_gated_0_matmul(%arg0, %arg1, %arg2)
func.func @prefill_gated(%x: tensor<512x512xf16>, %wg: tensor<512x1376xf16>, %wu: tensor<512x1376xf16>) -> tensor<512x1376xf16> {
  %g = kg.matmul %x, %wg : (tensor<512x512xf16>, tensor<512x1376xf16>) -> tensor<512x1376xf16>
  %u = kg.matmul %x, %wu : (tensor<512x512xf16>, tensor<512x1376xf16>) -> tensor<512x1376xf16>
  %a = kg.silu %g : tensor<512x1376xf16>
  %h = kg.mul %a, %u : (tensor<512x1376xf16>, tensor<512x1376xf16>) -> tensor<512x1376xf16>
  return %h : tensor<512x1376xf16>
}

// 64 rows are too few for the library, and too many for a prologue: each of
// the matmul's programs along n would scale its 64 x k operand again in
// registers (skinny-prologue), so the norm is a kernel of its own. With the
// rule off it folds into the matmul (its 512 k steps are short enough for a
// fold: norm-over-long-k has no objection).
// CHECK-LABEL: func.func @decode_norm_matmul(
// CHECK-NEXT: %[[N:.*]] = kg.kernel @decode_norm_matmul_0_reduction(%arg0, %arg1)
// CHECK: kg.kernel @decode_norm_matmul_1_matmul(%[[N]], %arg2)
// CHECK-NOT: kg.kernel
// CHECK: return
// ROWS-LABEL: func.func @decode_norm_matmul(
// ROWS-NEXT: kg.kernel @decode_norm_matmul_0_matmul(%arg0, %arg1, %arg2)
// ROWS-NOT: kg.kernel
// ROWS: return
func.func @decode_norm_matmul(%x: tensor<64x512xf16>, %gamma: tensor<512xf16>, %w: tensor<512x4096xf16>) -> tensor<64x4096xf16> {
  %n = kg.rms_norm %x weight %gamma normalized_shape [512] eps 1.0e-5 : (tensor<64x512xf16>, tensor<512xf16>) -> tensor<64x512xf16>
  %y = kg.matmul %n, %w : (tensor<64x512xf16>, tensor<512x4096xf16>) -> tensor<64x4096xf16>
  return %y : tensor<64x4096xf16>
}

// 512 queries in query tiles: each tile's program would scale every key
// block again, so the keys are scaled by a kernel of their own (which also
// stores them transposed, as the scores read them). The same work on Q is
// done once per program and stays in.
// CHECK-LABEL: func.func @prefill_rotated_keys(
// CHECK-NEXT: %[[KEYS:.*]] = kg.kernel @prefill_rotated_keys_0_pointwise(%arg1, %arg3) : (tensor<512x64xf16>, tensor<512x64xf16>) -> tensor<64x512xf16> {
// CHECK: kg.kernel @prefill_rotated_keys_1_attention(%arg0, %arg3, %[[KEYS]], %arg2)
// FUSED-LABEL: func.func @prefill_rotated_keys(
// FUSED-NEXT: kg.kernel @prefill_rotated_keys_0_attention(%arg0, %arg3, %arg1, %arg2)
func.func @prefill_rotated_keys(%q: tensor<512x64xf16>, %k: tensor<512x64xf16>, %v: tensor<512x64xf16>, %c: tensor<512x64xf16>) -> tensor<512x64xf16> {
  %qr = kg.mul %q, %c : (tensor<512x64xf16>, tensor<512x64xf16>) -> tensor<512x64xf16>
  %kr = kg.mul %k, %c : (tensor<512x64xf16>, tensor<512x64xf16>) -> tensor<512x64xf16>
  %kt = kg.transpose %kr [1, 0] : tensor<512x64xf16> -> tensor<64x512xf16>
  %s = kg.matmul %qr, %kt : (tensor<512x64xf16>, tensor<64x512xf16>) -> tensor<512x512xf16>
  %p = kg.softmax %s dim 1 : tensor<512x512xf16>
  %o = kg.matmul %p, %v : (tensor<512x512xf16>, tensor<512x64xf16>) -> tensor<512x64xf16>
  return %o : tensor<512x64xf16>
}

// One query: one program reads each key block, so the keys' work stays in.
// CHECK-LABEL: func.func @decode_rotated_keys(
// CHECK-NEXT: kg.kernel @decode_rotated_keys_0_attention(%arg1, %arg3, %arg0, %arg2)
// CHECK-NOT: kg.kernel
// CHECK: return
func.func @decode_rotated_keys(%q: tensor<1x64xf16>, %k: tensor<512x64xf16>, %v: tensor<512x64xf16>, %c: tensor<512x64xf16>) -> tensor<1x64xf16> {
  %kr = kg.mul %k, %c : (tensor<512x64xf16>, tensor<512x64xf16>) -> tensor<512x64xf16>
  %kt = kg.transpose %kr [1, 0] : tensor<512x64xf16> -> tensor<64x512xf16>
  %s = kg.matmul %q, %kt : (tensor<1x64xf16>, tensor<64x512xf16>) -> tensor<1x512xf16>
  %p = kg.softmax %s dim 1 : tensor<1x512xf16>
  %o = kg.matmul %p, %v : (tensor<1x512xf16>, tensor<512x64xf16>) -> tensor<1x64xf16>
  return %o : tensor<1x64xf16>
}

// SiLU(gate) * up before a decode step's down projection: 512 columns make
// several programs along n, so the product is a kernel of its own.
// CHECK-LABEL: func.func @decode_silu_product(
// CHECK-NEXT: %[[H:.*]] = kg.kernel @decode_silu_product_0_pointwise(%arg0, %arg1)
// CHECK: kg.kernel @decode_silu_product_1_matmul(%[[H]], %arg2)
// FUSED-LABEL: func.func @decode_silu_product(
// FUSED-NEXT: kg.kernel @decode_silu_product_0_matmul(%arg0, %arg1, %arg2)
// FUSED-NOT: kg.kernel
// FUSED: return
func.func @decode_silu_product(%gate: tensor<1x1376xf16>, %up: tensor<1x1376xf16>, %w: tensor<1376x512xf16>) -> tensor<1x512xf16> {
  %s = kg.silu %gate : tensor<1x1376xf16>
  %h = kg.mul %s, %up : (tensor<1x1376xf16>, tensor<1x1376xf16>) -> tensor<1x1376xf16>
  %o = kg.matmul %h, %w : (tensor<1x1376xf16>, tensor<1376x512xf16>) -> tensor<1x512xf16>
  return %o : tensor<1x512xf16>
}

// The same product over 16 columns: one program along n computes the
// prologue once, so it stays in.
// CHECK-LABEL: func.func @decode_silu_narrow(
// CHECK-NEXT: kg.kernel @decode_silu_narrow_0_matmul(%arg0, %arg1, %arg2)
// CHECK-NOT: kg.kernel
// CHECK: return
func.func @decode_silu_narrow(%gate: tensor<1x1376xf16>, %up: tensor<1x1376xf16>, %w: tensor<1376x16xf16>) -> tensor<1x16xf16> {
  %s = kg.silu %gate : tensor<1x1376xf16>
  %h = kg.mul %s, %up : (tensor<1x1376xf16>, tensor<1x1376xf16>) -> tensor<1x1376xf16>
  %o = kg.matmul %h, %w : (tensor<1x1376xf16>, tensor<1376x16xf16>) -> tensor<1x16xf16>
  return %o : tensor<1x16xf16>
}

// LoRA's X W + (X A) B over 32 rows: one kernel, though X W alone would be
// the library's (the library's lead on X W is less than the two kernels
// beside it cost).
// CHECK-LABEL: func.func @lora_few_rows(
// CHECK-NEXT: kg.kernel @lora_few_rows_0_matmul(%arg0, %arg1, %arg2, %arg3) : (tensor<32x3072xf16>, tensor<3072x3072xf16>, tensor<3072x16xf16>, tensor<16x3072xf16>) -> tensor<32x3072xf16> {
// CHECK-NOT: kg.kernel
// CHECK: return
func.func @lora_few_rows(%x: tensor<32x3072xf16>, %w: tensor<3072x3072xf16>, %a: tensor<3072x16xf16>, %b: tensor<16x3072xf16>) -> tensor<32x3072xf16> {
  %y = kg.matmul %x, %w : (tensor<32x3072xf16>, tensor<3072x3072xf16>) -> tensor<32x3072xf16>
  %t = kg.matmul %x, %a : (tensor<32x3072xf16>, tensor<3072x16xf16>) -> tensor<32x16xf16>
  %u = kg.matmul %t, %b : (tensor<32x16xf16>, tensor<16x3072xf16>) -> tensor<32x3072xf16>
  %s = kg.add %y, %u : (tensor<32x3072xf16>, tensor<32x3072xf16>) -> tensor<32x3072xf16>
  return %s : tensor<32x3072xf16>
}

// The same over 256 rows, more than were measured against the library:
// nothing merges into the library's X W; X A and (X A) B with the sum are
// kernels of their own.
// CHECK-LABEL: func.func @lora_prefill(
// CHECK-NEXT: %[[Y:.*]] = kg.kernel @lora_prefill_0_matmul(%arg0, %arg1) : (tensor<256x3072xf16>, tensor<3072x3072xf16>) -> tensor<256x3072xf16> {
// CHECK: %[[T:.*]] = kg.kernel @lora_prefill_1_matmul(%arg0, %arg2)
// CHECK: kg.kernel @lora_prefill_2_matmul(%[[T]], %arg3, %[[Y]])
// FUSED-LABEL: func.func @lora_prefill(
// FUSED-NEXT: kg.kernel @lora_prefill_0_matmul(%arg0, %arg1, %arg2, %arg3)
func.func @lora_prefill(%x: tensor<256x3072xf16>, %w: tensor<3072x3072xf16>, %a: tensor<3072x16xf16>, %b: tensor<16x3072xf16>) -> tensor<256x3072xf16> {
  %y = kg.matmul %x, %w : (tensor<256x3072xf16>, tensor<3072x3072xf16>) -> tensor<256x3072xf16>
  %t = kg.matmul %x, %a : (tensor<256x3072xf16>, tensor<3072x16xf16>) -> tensor<256x16xf16>
  %u = kg.matmul %t, %b : (tensor<256x16xf16>, tensor<16x3072xf16>) -> tensor<256x3072xf16>
  %s = kg.add %y, %u : (tensor<256x3072xf16>, tensor<256x3072xf16>) -> tensor<256x3072xf16>
  return %s : tensor<256x3072xf16>
}

// A weight cast under autocast, stored for the backward and read
// transposed by a library matmul: the call reads the cast in place
// (transpose_b), and the cast's kernel stores it once, not a second time
// transposed. With the rule off, the transpose is the cast kernel's second
// result.
// CHECK-LABEL: func.func @prefill_cast_weight_transposed(
// CHECK-NEXT: %[[C:.*]] = kg.kernel @prefill_cast_weight_transposed_0_pointwise(%arg1) : (tensor<1376x512xf32>) -> tensor<1376x512xbf16> {
// CHECK: kg.kernel @prefill_cast_weight_transposed_1_matmul(%[[C]], %arg0) : (tensor<1376x512xbf16>, tensor<512x512xbf16>) -> tensor<512x1376xbf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.transpose
// CHECK-NEXT: kg.matmul
// BIASOFF-LABEL: func.func @prefill_cast_weight_transposed(
// BIASOFF-NEXT: %[[C:.*]]:2 = kg.kernel @prefill_cast_weight_transposed_0_pointwise(%arg1) : (tensor<1376x512xf32>) -> (tensor<1376x512xbf16>, tensor<512x1376xbf16>) {
// BIASOFF: kg.kernel @prefill_cast_weight_transposed_1_matmul(%arg0, %[[C]]#1)
func.func @prefill_cast_weight_transposed(%x: tensor<512x512xbf16>, %w: tensor<1376x512xf32>) -> (tensor<1376x512xbf16>, tensor<512x1376xbf16>) {
  %c = kg.cast %w : tensor<1376x512xf32> to tensor<1376x512xbf16>
  %ct = kg.transpose %c [1, 0] : tensor<1376x512xbf16> -> tensor<512x1376xbf16>
  %y = kg.matmul %x, %ct : (tensor<512x512xbf16>, tensor<512x1376xbf16>) -> tensor<512x1376xbf16>
  return %c, %y : tensor<1376x512xbf16>, tensor<512x1376xbf16>
}

// The transpose is read by another op too: the call cannot take it (a
// kernel of one result), so it stays with the cast, computed once.
// CHECK-LABEL: func.func @transposed_cast_read_twice(
// CHECK-NEXT: %[[C:.*]]:2 = kg.kernel @transposed_cast_read_twice_0_pointwise(%arg1) : (tensor<1376x512xf32>) -> (tensor<512x1376xbf16>, tensor<512x1376xbf16>) {
func.func @transposed_cast_read_twice(%x: tensor<512x512xbf16>, %w: tensor<1376x512xf32>) -> (tensor<512x1376xbf16>, tensor<512x1376xbf16>) {
  %c = kg.cast %w : tensor<1376x512xf32> to tensor<1376x512xbf16>
  %ct = kg.transpose %c [1, 0] : tensor<1376x512xbf16> -> tensor<512x1376xbf16>
  %y = kg.matmul %x, %ct : (tensor<512x512xbf16>, tensor<512x1376xbf16>) -> tensor<512x1376xbf16>
  %z = kg.exp %ct : tensor<512x1376xbf16>
  return %z, %y : tensor<512x1376xbf16>, tensor<512x1376xbf16>
}
