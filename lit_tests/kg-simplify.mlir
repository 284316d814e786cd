// kg-simplify makes views of gathers from one element and of consecutive
// positions, reads a slice of one piece of a join from that piece, takes a
// batched product in the shape of the reshape that uses it, and runs an
// f32 product of half floats widened to f32 (under views and scalar
// factors) as a product of the half floats, the factors applied once to
// its f32 result, and writes a returned widened half-float product as an
// f32 product.
// RUN: kgc-opt %s --kg-simplify --kgc-dce | FileCheck %s
// Attention written with bmm, as scaled_dot_product_attention's math path
// writes it, is then one attention kernel:
// RUN: kgc-opt %s --kg-decompose --kg-simplify --kgc-cse --kgc-dce --kg-fuse | FileCheck %s --check-prefix=FUSE

// Heads merged with the batch for bmm and split again: the product takes
// the 4-d shape, its operands' reshapes fold away.
// CHECK-LABEL: func.func @bmm_heads
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x16x32xf32>, %[[K:.*]]: tensor<2x4x32x24xf32>)
// CHECK-NEXT: %[[S:.*]] = kg.matmul %[[Q]], %[[K]] : (tensor<2x4x16x32xf32>, tensor<2x4x32x24xf32>) -> tensor<2x4x16x24xf32>
// CHECK-NEXT: return %[[S]]
func.func @bmm_heads(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x32x24xf32>) -> tensor<2x4x16x24xf32> {
  %0 = kg.reshape %q : tensor<2x4x16x32xf32> -> tensor<8x16x32xf32>
  %1 = kg.reshape %k : tensor<2x4x32x24xf32> -> tensor<8x32x24xf32>
  %2 = kg.matmul %0, %1 : (tensor<8x16x32xf32>, tensor<8x32x24xf32>) -> tensor<8x16x24xf32>
  %3 = kg.reshape %2 : tensor<8x16x24xf32> -> tensor<2x4x16x24xf32>
  return %3 : tensor<2x4x16x24xf32>
}

// The same with a dynamic query length: the batch dims are static, so the
// product still takes the 4-d shape.
// CHECK-LABEL: func.func @bmm_heads_dynamic_length
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x?x32xf32>, %[[K:.*]]: tensor<2x4x32x24xf32>)
// CHECK-NEXT: %[[S:.*]] = kg.matmul %[[Q]], %[[K]] : (tensor<2x4x?x32xf32>, tensor<2x4x32x24xf32>) -> tensor<2x4x?x24xf32>
// CHECK-NEXT: return %[[S]]
func.func @bmm_heads_dynamic_length(%q: tensor<2x4x?x32xf32>, %k: tensor<2x4x32x24xf32>) -> tensor<2x4x?x24xf32> {
  %0 = kg.reshape %q : tensor<2x4x?x32xf32> -> tensor<8x?x32xf32>
  %1 = kg.reshape %k : tensor<2x4x32x24xf32> -> tensor<8x32x24xf32>
  %2 = kg.matmul %0, %1 : (tensor<8x?x32xf32>, tensor<8x32x24xf32>) -> tensor<8x?x24xf32>
  %3 = kg.reshape %2 : tensor<8x?x24xf32> -> tensor<2x4x?x24xf32>
  return %3 : tensor<2x4x?x24xf32>
}

// A dynamic batch cannot be regrouped (its product of dims is not known):
// the reshapes stay.
// CHECK-LABEL: func.func @bmm_dynamic_batch_stays
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<?x16x32xf32>, tensor<?x32x24xf32>) -> tensor<?x16x24xf32>
// CHECK: kg.reshape %{{.*}} : tensor<?x16x24xf32> -> tensor<?x1x16x24xf32>
func.func @bmm_dynamic_batch_stays(%q: tensor<?x1x16x32xf32>, %k: tensor<?x32x24xf32>) -> tensor<?x1x16x24xf32> {
  %0 = kg.reshape %q : tensor<?x1x16x32xf32> -> tensor<?x16x32xf32>
  %2 = kg.matmul %0, %k : (tensor<?x16x32xf32>, tensor<?x32x24xf32>) -> tensor<?x16x24xf32>
  %3 = kg.reshape %2 : tensor<?x16x24xf32> -> tensor<?x1x16x24xf32>
  return %3 : tensor<?x1x16x24xf32>
}

// An operand that is no reshape is reshaped to the new batch.
// CHECK-LABEL: func.func @bmm_operand_reshaped
// CHECK: %[[B:.*]] = kg.reshape %arg1 : tensor<8x32x24xf32> -> tensor<2x4x32x24xf32>
// CHECK: kg.matmul %arg0, %[[B]] : (tensor<2x4x16x32xf32>, tensor<2x4x32x24xf32>) -> tensor<2x4x16x24xf32>
func.func @bmm_operand_reshaped(%q: tensor<2x4x16x32xf32>, %k: tensor<8x32x24xf32>) -> tensor<2x4x16x24xf32> {
  %0 = kg.reshape %q : tensor<2x4x16x32xf32> -> tensor<8x16x32xf32>
  %2 = kg.matmul %0, %k : (tensor<8x16x32xf32>, tensor<8x32x24xf32>) -> tensor<8x16x24xf32>
  %3 = kg.reshape %2 : tensor<8x16x24xf32> -> tensor<2x4x16x24xf32>
  return %3 : tensor<2x4x16x24xf32>
}

// A linear layer's 2-d product viewed as 3-d keeps its shape: a batch of
// one exposes nothing, and the library takes 2-d products.
// CHECK-LABEL: func.func @linear_view_kept
// CHECK: kg.matmul %{{.*}}, %arg1 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
// CHECK: kg.reshape %{{.*}} : tensor<16x24xf32> -> tensor<1x16x24xf32>
func.func @linear_view_kept(%x: tensor<1x16x32xf32>, %w: tensor<32x24xf32>) -> tensor<1x16x24xf32> {
  %0 = kg.reshape %x : tensor<1x16x32xf32> -> tensor<16x32xf32>
  %1 = kg.matmul %0, %w : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  %2 = kg.reshape %1 : tensor<16x24xf32> -> tensor<1x16x24xf32>
  return %2 : tensor<1x16x24xf32>
}

// A product read in its own shape too would be computed twice: left alone.
// CHECK-LABEL: func.func @bmm_used_twice
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<8x16x32xf32>, tensor<8x32x24xf32>) -> tensor<8x16x24xf32>
func.func @bmm_used_twice(%q: tensor<2x4x16x32xf32>, %k: tensor<8x32x24xf32>) -> (tensor<2x4x16x24xf32>, tensor<8x16x24xf32>) {
  %0 = kg.reshape %q : tensor<2x4x16x32xf32> -> tensor<8x16x32xf32>
  %2 = kg.matmul %0, %k : (tensor<8x16x32xf32>, tensor<8x32x24xf32>) -> tensor<8x16x24xf32>
  %3 = kg.reshape %2 : tensor<8x16x24xf32> -> tensor<2x4x16x24xf32>
  return %3, %2 : tensor<2x4x16x24xf32>, tensor<8x16x24xf32>
}

// f16 widened and scaled, through a transpose: an f16 product, the scales'
// product applied to its f32 result.
// CHECK-LABEL: func.func @widened_scaled
// CHECK-SAME: (%[[A:.*]]: tensor<16x32xf16>, %[[B:.*]]: tensor<24x32xf16>)
// CHECK: %[[T:.*]] = kg.transpose %[[B]] [1, 0] : tensor<24x32xf16> -> tensor<32x24xf16>
// CHECK: %[[P:.*]] = kg.matmul %[[A]], %[[T]] : (tensor<16x32xf16>, tensor<32x24xf16>) -> tensor<16x24xf32>
// CHECK: %[[C:.*]] = kg.constant 1.250000e-01 : tensor<f32>
// CHECK: %[[R:.*]] = kg.mul %[[P]], %[[C]]
// CHECK: return %[[R]]
func.func @widened_scaled(%a: tensor<16x32xf16>, %b: tensor<24x32xf16>) -> tensor<16x24xf32> {
  %c = kg.constant 2.500000e-01 : tensor<f32>
  %h = kg.constant 5.000000e-01 : tensor<f32>
  %0 = kg.cast %a : tensor<16x32xf16> to tensor<16x32xf32>
  %1 = kg.mul %0, %c : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xf32>
  %2 = kg.cast %b : tensor<24x32xf16> to tensor<24x32xf32>
  %3 = kg.transpose %2 [1, 0] : tensor<24x32xf32> -> tensor<32x24xf32>
  %4 = kg.mul %h, %3 : (tensor<f32>, tensor<32x24xf32>) -> tensor<32x24xf32>
  %5 = kg.matmul %1, %4 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %5 : tensor<16x24xf32>
}

// bf16 widened without a scale: the product alone.
// CHECK-LABEL: func.func @widened_bf16
// CHECK-NEXT: %[[P:.*]] = kg.matmul %arg0, %arg1 : (tensor<16x32xbf16>, tensor<32x24xbf16>) -> tensor<16x24xf32>
// CHECK-NEXT: return %[[P]]
func.func @widened_bf16(%a: tensor<16x32xbf16>, %b: tensor<32x24xbf16>) -> tensor<16x24xf32> {
  %0 = kg.cast %a : tensor<16x32xbf16> to tensor<16x32xf32>
  %1 = kg.cast %b : tensor<32x24xbf16> to tensor<32x24xf32>
  %2 = kg.matmul %0, %1 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %2 : tensor<16x24xf32>
}

// One operand is f32 of its own: its values need an f32 product.
// CHECK-LABEL: func.func @one_side_f32
// CHECK: kg.matmul %{{.*}}, %arg1 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
func.func @one_side_f32(%a: tensor<16x32xf16>, %b: tensor<32x24xf32>) -> tensor<16x24xf32> {
  %0 = kg.cast %a : tensor<16x32xf16> to tensor<16x32xf32>
  %1 = kg.matmul %0, %b : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %1 : tensor<16x24xf32>
}

// f16 against bf16: no half type holds both.
// CHECK-LABEL: func.func @mixed_halves
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
func.func @mixed_halves(%a: tensor<16x32xf16>, %b: tensor<32x24xbf16>) -> tensor<16x24xf32> {
  %0 = kg.cast %a : tensor<16x32xf16> to tensor<16x32xf32>
  %1 = kg.cast %b : tensor<32x24xbf16> to tensor<32x24xf32>
  %2 = kg.matmul %0, %1 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %2 : tensor<16x24xf32>
}

// A factor that is a tensor, not a scalar, scales each element differently:
// it cannot move past the sum.
// CHECK-LABEL: func.func @scaled_by_tensor
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
func.func @scaled_by_tensor(%a: tensor<16x32xf16>, %b: tensor<32x24xf16>, %s: tensor<32xf32>) -> tensor<16x24xf32> {
  %0 = kg.cast %a : tensor<16x32xf16> to tensor<16x32xf32>
  %1 = kg.mul %0, %s : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %2 = kg.cast %b : tensor<32x24xf16> to tensor<32x24xf32>
  %3 = kg.matmul %1, %2 : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
  return %3 : tensor<16x24xf32>
}

// scaled_dot_product_attention's math path over f16 heads with a padding
// mask: Q and K widened and scaled by 1/sqrt(sqrt(d)), bmm over merged
// heads, the safe softmax (rows of masked keys give zeros), P V in f32 over
// widened V, rounded to f16.
// CHECK-LABEL: func.func @math_path_attention
// CHECK: %[[S:.*]] = kg.matmul %arg0, %{{.*}} : (tensor<1x4x16x32xf16>, tensor<1x4x32x24xf16>) -> tensor<1x4x16x24xf32>
// CHECK: kg.mul %[[S]], %{{.*}} : (tensor<1x4x16x24xf32>, tensor<f32>)
// CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<1x4x16x24xf32>, tensor<1x4x24x32xf32>) -> tensor<1x4x16x32xf32>
// FUSE-LABEL: func.func @math_path_attention
// FUSE: kg.kernel @math_path_attention_0_attention(
// FUSE-NOT: kg.kernel
// FUSE: return
func.func @math_path_attention(%q: tensor<1x4x16x32xf16>, %k: tensor<1x4x24x32xf16>, %v: tensor<1x4x24x32xf16>, %mask: tensor<1x1x16x24xf32>) -> tensor<1x4x16x32xf16> {
  %s = kg.constant 0.42044820762685725 : tensor<f32>
  %q32 = kg.cast %q : tensor<1x4x16x32xf16> to tensor<1x4x16x32xf32>
  %qs = kg.mul %q32, %s : (tensor<1x4x16x32xf32>, tensor<f32>) -> tensor<1x4x16x32xf32>
  %k32 = kg.cast %k : tensor<1x4x24x32xf16> to tensor<1x4x24x32xf32>
  %kt = kg.transpose %k32 [0, 1, 3, 2] : tensor<1x4x24x32xf32> -> tensor<1x4x32x24xf32>
  %ks = kg.mul %kt, %s : (tensor<1x4x32x24xf32>, tensor<f32>) -> tensor<1x4x32x24xf32>
  %q3 = kg.reshape %qs : tensor<1x4x16x32xf32> -> tensor<4x16x32xf32>
  %k3 = kg.reshape %ks : tensor<1x4x32x24xf32> -> tensor<4x32x24xf32>
  %s3 = kg.matmul %q3, %k3 : (tensor<4x16x32xf32>, tensor<4x32x24xf32>) -> tensor<4x16x24xf32>
  %s4 = kg.reshape %s3 : tensor<4x16x24xf32> -> tensor<1x4x16x24xf32>
  %x = kg.add %s4, %mask : (tensor<1x4x16x24xf32>, tensor<1x1x16x24xf32>) -> tensor<1x4x16x24xf32>
  %p = kg.softmax %x dim 3 : tensor<1x4x16x24xf32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>
  %masked = kg.cmp eq %x, %ninf : (tensor<1x4x16x24xf32>, tensor<f32>) -> tensor<1x4x16x24xi1>
  %kept = kg.logical_not %masked : tensor<1x4x16x24xi1>
  %kept16 = kg.cast %kept : tensor<1x4x16x24xi1> to tensor<1x4x16x24xf16>
  %anyk = kg.reduce max %kept16 dims [3] keepdim : tensor<1x4x16x24xf16> -> tensor<1x4x16x1xf16>
  %anyb = kg.cast %anyk : tensor<1x4x16x1xf16> to tensor<1x4x16x1xi1>
  %none = kg.logical_not %anyb : tensor<1x4x16x1xi1>
  %zero = kg.constant 0.000000e+00 : tensor<1x4x16x24xf32>
  %safe = kg.select %none, %zero, %p : (tensor<1x4x16x1xi1>, tensor<1x4x16x24xf32>, tensor<1x4x16x24xf32>) -> tensor<1x4x16x24xf32>
  %v32 = kg.cast %v : tensor<1x4x24x32xf16> to tensor<1x4x24x32xf32>
  %p3 = kg.reshape %safe : tensor<1x4x16x24xf32> -> tensor<4x16x24xf32>
  %v3 = kg.reshape %v32 : tensor<1x4x24x32xf32> -> tensor<4x24x32xf32>
  %o3 = kg.matmul %p3, %v3 : (tensor<4x16x24xf32>, tensor<4x24x32xf32>) -> tensor<4x16x32xf32>
  %o4 = kg.reshape %o3 : tensor<4x16x32xf32> -> tensor<1x4x16x32xf32>
  %o = kg.cast %o4 : tensor<1x4x16x32xf32> to tensor<1x4x16x32xf16>
  return %o : tensor<1x4x16x32xf16>
}

// A gather from one element along its dim can only read that element: a
// broadcast of it (transformers' mask reading a one-position tensor).
// CHECK-LABEL: func.func @gather_from_one
// CHECK-NOT: kg.gather
// CHECK: %[[B:.*]] = kg.broadcast_to %arg0 : tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT: return %[[B]]
func.func @gather_from_one(%x: tensor<2x1xf32>, %i: tensor<3xi64>) -> tensor<2x3xf32> {
  %0 = kg.gather %x[%i] dim 1 : (tensor<2x1xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// One index into one element: the table itself.
// CHECK-LABEL: func.func @gather_one_from_one
// CHECK-NEXT: return %arg0
func.func @gather_one_from_one(%x: tensor<1xi64>, %i: tensor<1xi64>) -> tensor<1xi64> {
  %0 = kg.gather %x[%i] dim 0 : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// A learned position embedding read at arange(5) + 2, through reshapes:
// the window of rows 2..6.
// CHECK-LABEL: func.func @gather_consecutive
// CHECK-NOT: kg.gather
// CHECK: %[[W:.*]] = kg.slice %arg0 offsets [2, 0] strides [1, 1] : tensor<16x8xf32> -> tensor<5x8xf32>
// CHECK-NEXT: return %[[W]]
func.func @gather_consecutive(%table: tensor<16x8xf32>) -> tensor<5x8xf32> {
  %0 = kg.iota dim 1 : tensor<1x5xi64>
  %1 = kg.constant 2.0 : tensor<i64>
  %2 = kg.add %0, %1 : (tensor<1x5xi64>, tensor<i64>) -> tensor<1x5xi64>
  %3 = kg.reshape %2 : tensor<1x5xi64> -> tensor<5xi64>
  %4 = kg.gather %table[%3] dim 0 : (tensor<16x8xf32>, tensor<5xi64>) -> tensor<5x8xf32>
  return %4 : tensor<5x8xf32>
}

// Positions past the table's end are outside the gather's contract, which
// the reference reports: left as a gather for it to see.
// CHECK-LABEL: func.func @gather_consecutive_past_the_end
// CHECK: kg.gather
func.func @gather_consecutive_past_the_end(%table: tensor<4x8xf32>) -> tensor<5x8xf32> {
  %0 = kg.iota dim 0 : tensor<5xi64>
  %1 = kg.gather %table[%0] dim 0 : (tensor<4x8xf32>, tensor<5xi64>) -> tensor<5x8xf32>
  return %1 : tensor<5x8xf32>
}

// Every second position is no window: left a gather.
// CHECK-LABEL: func.func @gather_every_second
// CHECK: kg.gather
func.func @gather_every_second(%table: tensor<16x8xf32>) -> tensor<6x8xf32> {
  %0 = kg.iota dim 0 : tensor<6xi64>
  %1 = kg.constant 2.0 : tensor<i64>
  %2 = kg.mul %0, %1 : (tensor<6xi64>, tensor<i64>) -> tensor<6xi64>
  %3 = kg.gather %table[%2] dim 0 : (tensor<16x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
  return %3 : tensor<6x8xf32>
}

// torch.diff with prepend: the join's second piece sliced off again is
// that piece; the window that straddles both pieces stays a slice of the
// join.
// CHECK-LABEL: func.func @slice_of_a_piece
// CHECK-SAME: (%[[F:.*]]: tensor<2x1xi64>, %[[P:.*]]: tensor<2x7xi64>)
// CHECK: %[[J:.*]] = kg.concat %[[F]], %[[P]] dim 1
// CHECK: %[[S:.*]] = kg.slice %[[J]] offsets [0, 0] strides [1, 1] : tensor<2x8xi64> -> tensor<2x7xi64>
// CHECK: kg.sub %[[P]], %[[S]]
func.func @slice_of_a_piece(%first: tensor<2x1xi64>, %p: tensor<2x7xi64>) -> tensor<2x7xi64> {
  %0 = kg.concat %first, %p dim 1 : (tensor<2x1xi64>, tensor<2x7xi64>) -> tensor<2x8xi64>
  %1 = kg.slice %0 offsets [0, 1] strides [1, 1] : tensor<2x8xi64> -> tensor<2x7xi64>
  %2 = kg.slice %0 offsets [0, 0] strides [1, 1] : tensor<2x8xi64> -> tensor<2x7xi64>
  %3 = kg.sub %1, %2 : (tensor<2x7xi64>, tensor<2x7xi64>) -> tensor<2x7xi64>
  return %3 : tensor<2x7xi64>
}

// A strided window inside the second piece: a strided slice of it.
// CHECK-LABEL: func.func @slice_inside_a_piece
// CHECK: kg.slice %arg1 offsets [0, 1] strides [1, 2] : tensor<2x7xf32> -> tensor<2x3xf32>
func.func @slice_inside_a_piece(%a: tensor<2x3xf32>, %b: tensor<2x7xf32>) -> tensor<2x3xf32> {
  %0 = kg.concat %a, %b dim 1 : (tensor<2x3xf32>, tensor<2x7xf32>) -> tensor<2x10xf32>
  %1 = kg.slice %0 offsets [0, 4] strides [1, 2] : tensor<2x10xf32> -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// Half floats rounded to an 8-bit float are no widening: the product must
// read the rounded values, so nothing changes.
// CHECK-LABEL: func.func @narrowed_to_f8
// CHECK: %[[A:.*]] = kg.cast %arg0 : tensor<1x1xf16> to tensor<1x1xf8E4M3FN>
// CHECK: %[[B:.*]] = kg.cast %arg1 : tensor<1x1xf16> to tensor<1x1xf8E4M3FN>
// CHECK: kg.matmul %[[A]], %[[B]] : (tensor<1x1xf8E4M3FN>, tensor<1x1xf8E4M3FN>) -> tensor<1x1xf32>
func.func @narrowed_to_f8(%a: tensor<1x1xf16>, %b: tensor<1x1xf16>) -> tensor<1x1xf32> {
  %0 = kg.cast %a : tensor<1x1xf16> to tensor<1x1xf8E4M3FN>
  %1 = kg.cast %b : tensor<1x1xf16> to tensor<1x1xf8E4M3FN>
  %2 = kg.matmul %0, %1 : (tensor<1x1xf8E4M3FN>, tensor<1x1xf8E4M3FN>) -> tensor<1x1xf32>
  return %2 : tensor<1x1xf32>
}

// A transpose of a transpose is one transpose of the first's operand; the
// inner one goes when nothing else reads it.
// CHECK-LABEL: func.func @transpose_of_transpose
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x5xf32>)
// CHECK-NEXT: %[[T:.*]] = kg.transpose %[[X]] [1, 0, 2] : tensor<2x3x5xf32> -> tensor<3x2x5xf32>
// CHECK-NEXT: return %[[T]]
func.func @transpose_of_transpose(%x: tensor<2x3x5xf32>) -> tensor<3x2x5xf32> {
  %0 = kg.transpose %x [2, 0, 1] : tensor<2x3x5xf32> -> tensor<5x2x3xf32>
  %1 = kg.transpose %0 [2, 1, 0] : tensor<5x2x3xf32> -> tensor<3x2x5xf32>
  return %1 : tensor<3x2x5xf32>
}

// A weight's cast stored in its own order by way of its transpose: the
// transposes cancel, and the cast is read and stored along one axis.
// CHECK-LABEL: func.func @transposed_back
// CHECK-NEXT: %[[C:.*]] = kg.cast
// CHECK-NEXT: return %[[C]]
func.func @transposed_back(%w: tensor<24x16xf32>) -> tensor<24x16xbf16> {
  %0 = kg.cast %w : tensor<24x16xf32> to tensor<24x16xbf16>
  %1 = kg.transpose %0 [1, 0] : tensor<24x16xbf16> -> tensor<16x24xbf16>
  %2 = kg.transpose %1 [1, 0] : tensor<16x24xbf16> -> tensor<24x16xbf16>
  return %2 : tensor<24x16xbf16>
}

// The inner transpose is read elsewhere too: it stays, and the outer one
// still reads the operand directly.
// CHECK-LABEL: func.func @inner_transpose_read_twice
// CHECK-SAME: (%[[X:.*]]: tensor<4x6xf32>)
// CHECK-NEXT: %[[T:.*]] = kg.transpose %[[X]] [1, 0]
// CHECK-NEXT: return %[[X]], %[[T]]
func.func @inner_transpose_read_twice(%x: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %0 = kg.transpose %x [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %1 = kg.transpose %0 [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
  return %1, %0 : tensor<4x6xf32>, tensor<6x4xf32>
}

// A single transpose that permutes: nothing to fold.
// CHECK-LABEL: func.func @one_transpose_kept
// CHECK-NEXT: kg.transpose %{{.*}} [1, 0]
func.func @one_transpose_kept(%x: tensor<4x6xf32>) -> tensor<6x4xf32> {
  %0 = kg.transpose %x [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// A weight's gradient under autocast, returned widened to f32 for its f32
// master weight: the product writes f32 itself, through the reshape.
// CHECK-LABEL: func.func @returned_widened_product
// CHECK: %[[P:.*]] = kg.matmul %arg0, %arg1 : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xf32>
// CHECK-NEXT: %[[R:.*]] = kg.reshape %[[P]] : tensor<64x48xf32> -> tensor<4x16x48xf32>
// CHECK-NEXT: return %[[R]]
func.func @returned_widened_product(%a: tensor<64x32xbf16>, %b: tensor<32x48xbf16>) -> tensor<4x16x48xf32> {
  %p = kg.matmul %a, %b : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xbf16>
  %r = kg.reshape %p : tensor<64x48xbf16> -> tensor<4x16x48xbf16>
  %w = kg.cast %r : tensor<4x16x48xbf16> to tensor<4x16x48xf32>
  return %w : tensor<4x16x48xf32>
}

// The widened product read by a sum (a residual gradient): the widening
// fuses into the sum's kernel, which reads half the bytes of an f32
// product.
// CHECK-LABEL: func.func @widened_product_read_by_a_sum
// CHECK: kg.matmul {{.*}} -> tensor<64x48xf16>
// CHECK: kg.cast
func.func @widened_product_read_by_a_sum(%a: tensor<64x32xf16>, %b: tensor<32x48xf16>, %c: tensor<64x48xf32>) -> tensor<64x48xf32> {
  %p = kg.matmul %a, %b : (tensor<64x32xf16>, tensor<32x48xf16>) -> tensor<64x48xf16>
  %w = kg.cast %p : tensor<64x48xf16> to tensor<64x48xf32>
  %s = kg.add %w, %c : (tensor<64x48xf32>, tensor<64x48xf32>) -> tensor<64x48xf32>
  return %s : tensor<64x48xf32>
}

// Widened after a transpose: the kernel that copies the product transposed
// widens it as it copies, reading the half type.
// CHECK-LABEL: func.func @widened_transposed_product
// CHECK: kg.matmul {{.*}} -> tensor<64x48xbf16>
// CHECK: kg.cast
func.func @widened_transposed_product(%a: tensor<64x32xbf16>, %b: tensor<32x48xbf16>) -> tensor<48x64xf32> {
  %p = kg.matmul %a, %b : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xbf16>
  %t = kg.transpose %p [1, 0] : tensor<64x48xbf16> -> tensor<48x64xbf16>
  %w = kg.cast %t : tensor<48x64xbf16> to tensor<48x64xf32>
  return %w : tensor<48x64xf32>
}

// The half-float product is returned too: it stays, rounded, and the
// widening reads it.
// CHECK-LABEL: func.func @widened_product_returned_twice
// CHECK: kg.matmul {{.*}} -> tensor<64x48xbf16>
// CHECK: kg.cast
func.func @widened_product_returned_twice(%a: tensor<64x32xbf16>, %b: tensor<32x48xbf16>) -> (tensor<64x48xbf16>, tensor<64x48xf32>) {
  %p = kg.matmul %a, %b : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xbf16>
  %w = kg.cast %p : tensor<64x48xbf16> to tensor<64x48xf32>
  return %p, %w : tensor<64x48xbf16>, tensor<64x48xf32>
}
