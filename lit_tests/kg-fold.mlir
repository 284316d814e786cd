// kg-fold computes what is known from positions and constants alone:
// comparisons that hold everywhere or nowhere, selects and logical ops on
// them, products of a zero, and integer arithmetic of iotas, left as a
// constant or an iota.
// RUN: kgc-opt %s --kg-fold --kgc-dce | FileCheck %s

// transformers' check that positions rise one at a time (packed
// sequences): diff(arange) != 1 holds nowhere, its cumulative sum (a
// product with a triangular matrix) is 0 everywhere, and the mask is the
// causal comparison of two iotas.
// CHECK-LABEL: func.func @packed_sequence_check
// CHECK-DAG: %[[K:.*]] = kg.iota dim 1 : tensor<1x17xi64>
// CHECK-DAG: %[[Q:.*]] = kg.iota dim 0 : tensor<17x1xi64>
// CHECK: %[[M:.*]] = kg.cmp le %[[K]], %[[Q]]
// CHECK-NEXT: return %[[M]]
func.func @packed_sequence_check() -> tensor<17x17xi1> {
  %pos = kg.iota dim 0 : tensor<17xi64>
  %zero = kg.constant 0.0 : tensor<i64>
  %p0 = kg.add %pos, %zero : (tensor<17xi64>, tensor<i64>) -> tensor<17xi64>
  %p = kg.reshape %p0 : tensor<17xi64> -> tensor<1x17xi64>
  %first = kg.slice %p offsets [0, 0] strides [1, 1] : tensor<1x17xi64> -> tensor<1x1xi64>
  %one = kg.constant 1.0 : tensor<i64>
  %before = kg.sub %first, %one : (tensor<1x1xi64>, tensor<i64>) -> tensor<1x1xi64>
  %joined = kg.concat %before, %p dim 1 : (tensor<1x1xi64>, tensor<1x17xi64>) -> tensor<1x18xi64>
  %lo = kg.slice %joined offsets [0, 0] strides [1, 1] : tensor<1x18xi64> -> tensor<1x17xi64>
  %hi = kg.slice %joined offsets [0, 1] strides [1, 1] : tensor<1x18xi64> -> tensor<1x17xi64>
  %diff = kg.sub %hi, %lo : (tensor<1x17xi64>, tensor<1x17xi64>) -> tensor<1x17xi64>
  %starts = kg.cmp ne %diff, %one : (tensor<1x17xi64>, tensor<i64>) -> tensor<1x17xi1>
  %r = kg.iota dim 0 : tensor<17x17xi32>
  %c = kg.iota dim 1 : tensor<17x17xi32>
  %tri_b = kg.cmp le %r, %c : (tensor<17x17xi32>, tensor<17x17xi32>) -> tensor<17x17xi1>
  %tri = kg.cast %tri_b : tensor<17x17xi1> to tensor<17x17xf16>
  %starts_f = kg.cast %starts : tensor<1x17xi1> to tensor<1x17xf16>
  %sum = kg.matmul %starts_f, %tri : (tensor<1x17xf16>, tensor<17x17xf16>) -> tensor<1x17xf32>
  %seq = kg.cast %sum : tensor<1x17xf32> to tensor<1x17xi64>
  %seq1 = kg.reshape %seq : tensor<1x17xi64> -> tensor<17xi64>
  %q_seq = kg.gather %seq1[%pos] dim 0 : (tensor<17xi64>, tensor<17xi64>) -> tensor<17xi64>
  %q_seq2 = kg.reshape %q_seq : tensor<17xi64> -> tensor<17x1xi64>
  %k_seq = kg.reshape %q_seq : tensor<17xi64> -> tensor<1x17xi64>
  %same = kg.cmp eq %q_seq2, %k_seq : (tensor<17x1xi64>, tensor<1x17xi64>) -> tensor<17x17xi1>
  %qp = kg.reshape %pos : tensor<17xi64> -> tensor<17x1xi64>
  %causal = kg.cmp le %p, %qp : (tensor<1x17xi64>, tensor<17x1xi64>) -> tensor<17x17xi1>
  %true = kg.constant 1.0 : tensor<i1>
  %a = kg.logical_and %true, %causal : (tensor<i1>, tensor<17x17xi1>) -> tensor<17x17xi1>
  %mask = kg.logical_and %a, %same : (tensor<17x17xi1>, tensor<17x17xi1>) -> tensor<17x17xi1>
  return %mask : tensor<17x17xi1>
}

// Python's negative-index wrap-around of an arange: no position is below
// 0, so the select keeps the positions.
// CHECK-LABEL: func.func @wrap_around
// CHECK-NEXT: %[[I:.*]] = kg.iota dim 0 start 3 : tensor<8xi64>
// CHECK-NEXT: return %[[I]]
func.func @wrap_around() -> tensor<8xi64> {
  %i = kg.iota dim 0 start 3 : tensor<8xi64>
  %zero = kg.constant 0.0 : tensor<i64>
  %negative = kg.cmp lt %i, %zero : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
  %n = kg.constant 8.0 : tensor<i64>
  %wrapped = kg.add %i, %n : (tensor<8xi64>, tensor<i64>) -> tensor<8xi64>
  %r = kg.select %negative, %wrapped, %i : (tensor<8xi1>, tensor<8xi64>, tensor<8xi64>) -> tensor<8xi64>
  return %r : tensor<8xi64>
}

// Arithmetic of positions that is a constant or counts by one along a dim.
// CHECK-LABEL: func.func @arithmetic
// CHECK-DAG: kg.constant 4.000000e+00 : tensor<4x8xi32>
// CHECK-DAG: kg.iota dim 1 start 5 : tensor<4x8xi32>
// CHECK-NOT: kg.sub
// CHECK-NOT: kg.transpose
func.func @arithmetic() -> (tensor<4x8xi32>, tensor<4x8xi32>) {
  %a = kg.iota dim 1 : tensor<4x8xi32>
  %b = kg.iota dim 0 : tensor<8x4xi32>
  %bt = kg.transpose %b [1, 0] : tensor<8x4xi32> -> tensor<4x8xi32>
  %four = kg.constant 4.0 : tensor<i32>
  %a4 = kg.add %a, %four : (tensor<4x8xi32>, tensor<i32>) -> tensor<4x8xi32>
  %d = kg.sub %a4, %bt : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %one = kg.constant 1.0 : tensor<i32>
  %s = kg.add %a4, %one : (tensor<4x8xi32>, tensor<i32>) -> tensor<4x8xi32>
  return %d, %s : tensor<4x8xi32>, tensor<4x8xi32>
}

// A comparison that holds at some positions and not others stays.
// CHECK-LABEL: func.func @causal_stays
// CHECK: kg.cmp le
func.func @causal_stays() -> tensor<16x16xi1> {
  %r = kg.iota dim 0 : tensor<16x16xi32>
  %c = kg.iota dim 1 : tensor<16x16xi32>
  %m = kg.cmp le %r, %c : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi1>
  return %m : tensor<16x16xi1>
}

// Values computed from an argument are not known.
// CHECK-LABEL: func.func @argument_stays
// CHECK: kg.sub
// CHECK: kg.cmp ne
func.func @argument_stays(%pos: tensor<1x16xi64>) -> tensor<1x15xi1> {
  %lo = kg.slice %pos offsets [0, 0] strides [1, 1] : tensor<1x16xi64> -> tensor<1x15xi64>
  %hi = kg.slice %pos offsets [0, 1] strides [1, 1] : tensor<1x16xi64> -> tensor<1x15xi64>
  %diff = kg.sub %hi, %lo : (tensor<1x15xi64>, tensor<1x15xi64>) -> tensor<1x15xi64>
  %one = kg.constant 1.0 : tensor<i64>
  %starts = kg.cmp ne %diff, %one : (tensor<1x15xi64>, tensor<i64>) -> tensor<1x15xi1>
  return %starts : tensor<1x15xi1>
}

// 0 * x is NaN where x is infinite or NaN: a product of zeros and a float
// argument stays.
// CHECK-LABEL: func.func @zero_times_float_stays
// CHECK: kg.matmul
func.func @zero_times_float_stays(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %z = kg.constant 0.0 : tensor<2x8xf32>
  %p = kg.matmul %z, %x : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %p : tensor<2x4xf32>
}

// A product of zeros and a cast of integers is zero.
// CHECK-LABEL: func.func @zero_times_integers
// CHECK-NEXT: %[[Z:.*]] = kg.constant 0.000000e+00 : tensor<2x4xf32>
// CHECK-NEXT: return %[[Z]]
func.func @zero_times_integers(%x: tensor<8x4xi32>) -> tensor<2x4xf32> {
  %z = kg.constant 0.0 : tensor<2x8xf32>
  %xf = kg.cast %x : tensor<8x4xi32> to tensor<8x4xf32>
  %p = kg.matmul %z, %xf : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %p : tensor<2x4xf32>
}

// An i32 sum whose values could pass 2^31 wraps in the kernel: no form is
// kept past it, and the comparison stays.
// CHECK-LABEL: func.func @may_wrap_stays
// CHECK: kg.cmp lt
func.func @may_wrap_stays() -> tensor<8xi1> {
  %i = kg.iota dim 0 : tensor<8xi32>
  %big = kg.constant 2147483645.0 : tensor<i32>
  %s = kg.add %i, %big : (tensor<8xi32>, tensor<i32>) -> tensor<8xi32>
  %zero = kg.constant 0.0 : tensor<i32>
  %negative = kg.cmp lt %s, %zero : (tensor<8xi32>, tensor<i32>) -> tensor<8xi1>
  return %negative : tensor<8xi1>
}

// Float arithmetic rounds, which the pass does not model: it stays.
// CHECK-LABEL: func.func @float_arithmetic_stays
// CHECK: kg.add
func.func @float_arithmetic_stays() -> tensor<4xf16> {
  %a = kg.constant 1.0 : tensor<4xf16>
  %b = kg.constant 2.0 : tensor<f16>
  %s = kg.add %a, %b : (tensor<4xf16>, tensor<f16>) -> tensor<4xf16>
  return %s : tensor<4xf16>
}

// Ops inside a kernel are the kernel's own.
// CHECK-LABEL: func.func @inside_kernel
// CHECK: kg.kernel
// CHECK: kg.cmp lt
func.func @inside_kernel() -> tensor<8xi1> {
  %k = kg.kernel @inside_kernel_0() : () -> tensor<8xi1> {
    %i = kg.iota dim 0 : tensor<8xi64>
    %zero = kg.constant 0.0 : tensor<i64>
    %negative = kg.cmp lt %i, %zero : (tensor<8xi64>, tensor<i64>) -> tensor<8xi1>
    kg.yield %negative : tensor<8xi1>
  }
  return %k : tensor<8xi1>
}

// A join of one-element pieces that count by one is an iota too (the
// packed-sequence check at one token).
// CHECK-LABEL: func.func @one_element_pieces
// CHECK-NEXT: %[[I:.*]] = kg.iota dim 1 start -1 : tensor<1x2xi64>
// CHECK-NEXT: return %[[I]]
func.func @one_element_pieces() -> tensor<1x2xi64> {
  %a = kg.constant -1.0 : tensor<1x1xi64>
  %b = kg.constant 0.0 : tensor<1x1xi64>
  %j = kg.concat %a, %b dim 1 : (tensor<1x1xi64>, tensor<1x1xi64>) -> tensor<1x2xi64>
  return %j : tensor<1x2xi64>
}

// A splat with a dynamic extent is left alone: kg.constant has a static
// shape, and the comparison's extent is known only when the kernel runs.
// CHECK-LABEL: func.func @dynamic_extent_splat
// CHECK: %[[Z:.*]] = kg.broadcast_to
// CHECK: %[[N:.*]] = kg.cmp lt %[[Z]]
// CHECK-NEXT: return %[[N]] : tensor<?x8xi1>
func.func @dynamic_extent_splat(%x: tensor<?x8xi64>) -> tensor<?x8xi1> {
  %zero = kg.constant 0.0 : tensor<i64>
  %z = kg.broadcast_to %zero : tensor<i64> -> tensor<?x8xi64>
  %one = kg.constant 1.0 : tensor<i64>
  %negative = kg.cmp lt %z, %one : (tensor<?x8xi64>, tensor<i64>) -> tensor<?x8xi1>
  return %negative : tensor<?x8xi1>
}
