// RUN: kgc-opt %s --split-input-file --verify-diagnostics

// Verifier tests of the kg dialect: one case per rule. Each case is a small
// function with one expected error; tile ops sit inside a tiled kg.kernel.

//===----------------------------------------------------------------------===//
// Elementwise unary ops, gelu, clamp
//===----------------------------------------------------------------------===//

// Unary ops take f32, f16 or bf16 (not the 8-bit floats).
func.func @unary_f8(%x: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{operand #0 must be ranked tensor of f32, f16 or bf16 values}}
  %0 = kg.exp %x : tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// -----

// Unary ops take ranked tensors (an extent may be dynamic, the rank may not).
func.func @unary_unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor}}
  %0 = "kg.relu"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// The result of a unary op has the type of x (generic form only).
func.func @unary_result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "kg.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// gelu: approximate is none or tanh (generic form only).
func.func @gelu_approximate(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'approximate' failed to satisfy constraint}}
  %0 = "kg.gelu"(%x) {approximate = 7 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// clamp needs a min, a max or both.
func.func @clamp_no_bound(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs a min, a max or both}}
  %0 = kg.clamp %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// clamp: min <= max.
func.func @clamp_min_above_max(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{min 2.000000e+00 is greater than max 1.000000e+00}}
  %0 = kg.clamp %x min 2.0 max 1.0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

// Binary operands share an element type.
func.func @binary_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{operands must share an element type, got lhs 'tensor<4xf32>' and rhs 'tensor<4xf16>'}}
  %0 = kg.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Arithmetic operands are f32, f16, bf16, i32 or i64.
func.func @binary_f8(%a: tensor<4xf8E5M2>, %b: tensor<4xf8E5M2>) -> tensor<4xf8E5M2> {
  // expected-error @+1 {{'kg.mul' op operand #0 must be ranked tensor of f32, f16, bf16, i32 or i64 values, but got 'tensor<4xf8E5M2>'}}
  %0 = kg.mul %a, %b : (tensor<4xf8E5M2>, tensor<4xf8E5M2>) -> tensor<4xf8E5M2>
  return %0 : tensor<4xf8E5M2>
}

// -----

// Math binary ops (div, pow) take floats only.
func.func @div_integer(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kg.div' op operand #0 must be ranked tensor of f32, f16 or bf16 values, but got 'tensor<4xi32>'}}
  %0 = kg.div %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Math unary ops take floats only.
func.func @exp_integer(%x: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'kg.exp' op operand #0 must be ranked tensor of f32, f16 or bf16 values, but got 'tensor<4xi64>'}}
  %0 = kg.exp %x : tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

// Arithmetic takes no booleans: combine them with the logical ops.
func.func @add_bool(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'kg.add' op operand #0 must be ranked tensor of f32, f16, bf16, i32 or i64 values, but got 'tensor<4xi1>'}}
  %0 = kg.add %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Logical ops take i1 only.
func.func @logical_and_integer(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kg.logical_and' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xi32>'}}
  %0 = kg.logical_and %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// logical_not takes i1 only.
func.func @logical_not_float(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kg.logical_not' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = kg.logical_not %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// cmp operands share an element type.
func.func @cmp_mixed(%a: tensor<4xi32>, %b: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{operands must share an element type, got lhs 'tensor<4xi32>' and rhs 'tensor<4xf32>'}}
  %0 = kg.cmp lt %a, %b : (tensor<4xi32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// cmp gives i1 of the broadcast shape.
func.func @cmp_result(%a: tensor<4x1xi32>, %b: tensor<1x8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4x8xi32>'}}
  %0 = kg.cmp ge %a, %b : (tensor<4x1xi32>, tensor<1x8xi32>) -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

// cmp's result shape is the broadcast shape.
func.func @cmp_shape(%a: tensor<4x1xi32>, %b: tensor<1x8xi32>) -> tensor<4x4xi1> {
  // expected-error @+1 {{result type 'tensor<4x4xi1>' must be the broadcast type 'tensor<4x8xi1>' of lhs 'tensor<4x1xi32>' and rhs 'tensor<1x8xi32>'}}
  %0 = kg.cmp ge %a, %b : (tensor<4x1xi32>, tensor<1x8xi32>) -> tensor<4x4xi1>
  return %0 : tensor<4x4xi1>
}

// -----

// cmp knows six predicates.
func.func @cmp_predicate(%a: tensor<4xi32>, %b: tensor<4xi32>) -> tensor<4xi1> {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'predicate' [eq, ne, lt, le, gt, ge]}}
  %0 = kg.cmp ult %a, %b : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// select's condition is i1.
func.func @select_condition(%c: tensor<4xf32>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'kg.select' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = kg.select %c, %a, %b : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select's values share an element type.
func.func @select_values(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{true_value 'tensor<4xf32>' and false_value 'tensor<4xf16>' must share an element type}}
  %0 = kg.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// select's three operands broadcast together.
func.func @select_broadcast(%c: tensor<4x3xi1>, %a: tensor<4x8xf32>, %b: tensor<f32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{operands are not broadcast-compatible: cond 'tensor<4x3xi1>', true_value 'tensor<4x8xf32>' and false_value 'tensor<f32>' differ in dimension -1}}
  %0 = kg.select %c, %a, %b : (tensor<4x3xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// select's result has the broadcast shape.
func.func @select_result(%c: tensor<4x1xi1>, %a: tensor<1x8xf32>, %b: tensor<f32>) -> tensor<4x1xf32> {
  // expected-error @+1 {{result type 'tensor<4x1xf32>' must be the broadcast type 'tensor<4x8xf32>'}}
  %0 = kg.select %c, %a, %b : (tensor<4x1xi1>, tensor<1x8xf32>, tensor<f32>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// -----

// iota counts along a dimension of its result.
func.func @iota_dim() -> tensor<4x8xi32> {
  // expected-error @+1 {{dim 2 is out of range for result 'tensor<4x8xi32>' (rank 2)}}
  %0 = kg.iota dim 2 : tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

// iota needs a dimension.
func.func @iota_scalar() -> tensor<i32> {
  // expected-error @+1 {{result 'tensor<i32>' must have at least one dimension to count along}}
  %0 = kg.iota dim 0 : tensor<i32>
  return %0 : tensor<i32>
}

// -----

// iota's values fit i32 unless its result is i64.
func.func @iota_range() -> tensor<8xi32> {
  // expected-error @+1 {{counts from 2147483645 over 8 elements of dimension 0, beyond the i32 range, for result 'tensor<8xi32>'}}
  %0 = kg.iota dim 0 start 2147483645 : tensor<8xi32>
  return %0 : tensor<8xi32>
}

// -----

// An i64 iota counts within 2^53.
func.func @iota_range_i64() -> tensor<8xi64> {
  // expected-error @+1 {{counts from 9007199254740990 over 8 elements of dimension 0, beyond the range of 2^53 (i64), for result 'tensor<8xi64>'}}
  %0 = kg.iota dim 0 start 9007199254740990 : tensor<8xi64>
  return %0 : tensor<8xi64>
}

// -----

// iota gives numbers, not booleans.
func.func @iota_bool() -> tensor<8xi1> {
  // expected-error @+1 {{result #0 must be statically shaped tensor of f32, f16, bf16, i32 or i64 values, but got 'tensor<8xi1>'}}
  %0 = kg.iota dim 0 : tensor<8xi1>
  return %0 : tensor<8xi1>
}

// -----

// An integer constant is a whole number.
func.func @constant_fraction() -> tensor<4xi32> {
  // expected-error @+1 {{value 1.500000e+00 is not a whole number in the range of the element type 'i32' (and within 2^53)}}
  %0 = kg.constant 1.5 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// An integer constant fits its type.
func.func @constant_integer_range() -> tensor<4xi32> {
  // expected-error @+1 {{value 4.294967e+09 is not a whole number in the range of the element type 'i32'}}
  %0 = kg.constant 4294967296.0 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// A boolean constant is 0 or 1.
func.func @constant_bool() -> tensor<4xi1> {
  // expected-error @+1 {{value 2.000000e+00 is not 0 or 1 in the range of the element type 'i1'}}
  %0 = kg.constant 2.0 : tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// matmul multiplies floats: integers are cast first.
func.func @matmul_integer(%a: tensor<16x16xi32>, %b: tensor<16x16xi32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{multiplies floats only (f32, f16, bf16, f8E4M3FN, f8E5M2), got a 'tensor<16x16xi32>' and b 'tensor<16x16xi32>'; cast integer and i1 operands first}}
  %0 = kg.matmul %a, %b : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// -----

// Reductions take floats only.
func.func @reduce_integer(%x: tensor<4x8xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'kg.reduce' op operand #0 must be ranked tensor of f32, f16 or bf16 values, but got 'tensor<4x8xi32>'}}
  %0 = kg.reduce sum %x dims [1] : tensor<4x8xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Binary operands broadcast as numpy does.
func.func @binary_broadcast(%a: tensor<16x128xf32>, %b: tensor<64xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{operands are not broadcast-compatible: lhs 'tensor<16x128xf32>' and rhs 'tensor<64xf32>' differ in dimension -1}}
  %0 = kg.sub %a, %b : (tensor<16x128xf32>, tensor<64xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// The result of a binary op has the broadcast type.
func.func @binary_result(%a: tensor<16x1xf32>, %b: tensor<128xf32>) -> tensor<16x1xf32> {
  // expected-error @+1 {{result type 'tensor<16x1xf32>' must be the broadcast type 'tensor<16x128xf32>'}}
  %0 = kg.div %a, %b : (tensor<16x1xf32>, tensor<128xf32>) -> tensor<16x1xf32>
  return %0 : tensor<16x1xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Constants and casts
//===----------------------------------------------------------------------===//

// A constant's value is finite in the element type.
func.func @constant_overflow() -> tensor<f16> {
  // expected-error @+1 {{value 7.000000e+04 overflows the element type 'f16'}}
  %0 = kg.constant 70000.0 : tensor<f16>
  return %0 : tensor<f16>
}

// -----

// A constant is a tensor of f32, f16, bf16, i1, i32 or i64.
func.func @constant_f8() -> tensor<4xf8E4M3FN> {
  // expected-error @+1 {{result #0 must be statically shaped tensor of f32, f16, bf16, i1, i32 or i64 values}}
  %0 = kg.constant 1.0 : tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}

// -----

// cast keeps the shape.
func.func @cast_shape(%x: tensor<4x8xf32>) -> tensor<8x4xf16> {
  // expected-error @+1 {{cannot change the shape: x 'tensor<4x8xf32>' and result 'tensor<8x4xf16>'}}
  %0 = kg.cast %x : tensor<4x8xf32> to tensor<8x4xf16>
  return %0 : tensor<8x4xf16>
}

// -----

// cast converts between kg element types only.
func.func @cast_i16(%x: tensor<4xf32>) -> tensor<4xi16> {
  // expected-error @+1 {{result #0 must be ranked tensor of f32, f16, bf16, f8E4M3FN, f8E5M2, i1, i32 or i64 values}}
  %0 = kg.cast %x : tensor<4xf32> to tensor<4xi16>
  return %0 : tensor<4xi16>
}

// -----

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

// matmul: a has rank 2 or more.
func.func @matmul_rank_a(%a: tensor<64xf16>, %b: tensor<64x32xf16>) -> tensor<32xf16> {
  // expected-error @+1 {{operand a 'tensor<64xf16>' must have rank 2 or more}}
  %0 = kg.matmul %a, %b : (tensor<64xf16>, tensor<64x32xf16>) -> tensor<32xf16>
  return %0 : tensor<32xf16>
}

// -----

// matmul: b has rank 2 or more.
func.func @matmul_rank_b(%a: tensor<16x64xf16>, %b: tensor<64xf16>) -> tensor<16xf16> {
  // expected-error @+1 {{operand b 'tensor<64xf16>' must have rank 2 or more}}
  %0 = kg.matmul %a, %b : (tensor<16x64xf16>, tensor<64xf16>) -> tensor<16xf16>
  return %0 : tensor<16xf16>
}

// -----

// matmul: operands share an element type (only the 8-bit floats mix).
func.func @matmul_element_types(%a: tensor<16x64xf16>, %b: tensor<64x32xbf16>) -> tensor<16x32xf32> {
  // expected-error @+1 {{operands must share an element type (the two 8-bit floats may mix), got a 'tensor<16x64xf16>' and b 'tensor<64x32xbf16>'}}
  %0 = kg.matmul %a, %b : (tensor<16x64xf16>, tensor<64x32xbf16>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// matmul: precision applies to f32 operands only.
func.func @matmul_precision(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>) -> tensor<16x32xf16> {
  // expected-error @+1 {{precision applies to f32 operands only, got a 'tensor<16x64xf16>'}}
  %0 = kg.matmul %a, %b precision = tf32 : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

// matmul: fast_accum is for 8-bit float operands only; f16 products are
// summed in f32 by the tensor cores already, so it would mean nothing.
func.func @matmul_fast_accum_f16(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>) -> tensor<16x32xf16> {
  // expected-error @+1 {{'kg.matmul' op precision = fast_accum applies to 8-bit float operands only, got a 'tensor<16x64xf16>' and b 'tensor<64x32xf16>'}}
  %0 = kg.matmul %a, %b precision = fast_accum : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

// matmul: fast_accum is for 8-bit float operands only, f32 ones included
// (their precisions are ieee and tf32).
func.func @matmul_fast_accum_f32(%a: tensor<16x64xf32>, %b: tensor<64x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{precision = fast_accum applies to 8-bit float operands only, got a 'tensor<16x64xf32>' and b 'tensor<64x32xf32>'}}
  %0 = kg.matmul %a, %b precision = fast_accum : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// matmul: tf32 is for f32 operands only, not 8-bit floats (whose one
// precision is fast_accum).
func.func @matmul_tf32_f8(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>) -> tensor<16x32xf32> {
  // expected-error @+1 {{precision applies to f32 operands only, got a 'tensor<16x64xf8E4M3FN>'}}
  %0 = kg.matmul %a, %b precision = tf32 : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// matmul: the contracting dimensions agree.
func.func @matmul_k(%a: tensor<16x64xf32>, %b: tensor<32x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{contracting dimensions differ: a 'tensor<16x64xf32>' has K = 64, b 'tensor<32x32xf32>' has K = 32}}
  %0 = kg.matmul %a, %b : (tensor<16x64xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// matmul: batch dimensions broadcast.
func.func @matmul_batch(%a: tensor<2x16x64xf32>, %b: tensor<3x64x32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{batch dimensions of a 'tensor<2x16x64xf32>' and b 'tensor<3x64x32xf32>' are not broadcast-compatible (dimension -1 of the batch shape)}}
  %0 = kg.matmul %a, %b : (tensor<2x16x64xf32>, tensor<3x64x32xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// matmul: the result is f32, f16 or bf16.
func.func @matmul_result_f8(%a: tensor<16x64xf8E4M3FN>, %b: tensor<64x32xf8E4M3FN>) -> tensor<16x32xf8E4M3FN> {
  // expected-error @+1 {{result #0 must be ranked tensor of f32, f16 or bf16 values}}
  %0 = kg.matmul %a, %b : (tensor<16x64xf8E4M3FN>, tensor<64x32xf8E4M3FN>) -> tensor<16x32xf8E4M3FN>
  return %0 : tensor<16x32xf8E4M3FN>
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

// reduce needs at least one dimension.
func.func @reduce_no_dims(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{needs at least one dimension to reduce}}
  %0 = kg.reduce sum %x dims [] : tensor<16x128xf32> -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// reduce: every dimension lies in [0, rank).
func.func @reduce_dim_range(%x: tensor<16x128xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{dimension 2 is out of range for x 'tensor<16x128xf32>' (rank 2)}}
  %0 = kg.reduce max %x dims [2] : tensor<16x128xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// reduce: dimensions are distinct.
func.func @reduce_dim_twice(%x: tensor<16x128xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{dimension 1 appears twice in dims}}
  %0 = kg.reduce min %x dims [1, 1] : tensor<16x128xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// reduce: the result has the element type of x.
func.func @reduce_element_type(%x: tensor<16x128xf16>) -> tensor<16xf32> {
  // expected-error @+1 {{result 'tensor<16xf32>' must have the element type of x 'tensor<16x128xf16>'}}
  %0 = kg.reduce sum %x dims [1] : tensor<16x128xf16> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// reduce: a mean over zero elements has no value.
func.func @reduce_mean_of_nothing(%x: tensor<4x0xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{mean over zero elements: dimension 1 of x 'tensor<4x0xf32>' is empty}}
  %0 = kg.reduce mean %x dims [1] : tensor<4x0xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// reduce: nor has a max over zero elements (a sum is 0).
func.func @reduce_max_of_nothing(%x: tensor<0x8xf16>) -> tensor<1x8xf16> {
  // expected-error @+1 {{max over zero elements: dimension 0 of x 'tensor<0x8xf16>' is empty}}
  %0 = kg.reduce max %x dims [0] keepdim : tensor<0x8xf16> -> tensor<1x8xf16>
  return %0 : tensor<1x8xf16>
}

// -----

// Norms: the mean is taken over at least one element.
func.func @rms_norm_of_nothing(%x: tensor<4x0xf32>) -> tensor<4x0xf32> {
  // expected-error @+1 {{normalizes over zero elements: normalized_shape [0] of x 'tensor<4x0xf32>' is empty}}
  %0 = kg.rms_norm %x normalized_shape [0] eps 1.0e-6 : (tensor<4x0xf32>) -> tensor<4x0xf32>
  return %0 : tensor<4x0xf32>
}

// -----

// Norms: layer_norm too.
func.func @layer_norm_of_nothing(%x: tensor<2x3x0xf16>) -> tensor<2x3x0xf16> {
  // expected-error @+1 {{normalizes over zero elements: normalized_shape [3, 0] of x 'tensor<2x3x0xf16>' is empty}}
  %0 = kg.layer_norm %x normalized_shape [3, 0] eps 1.0e-5 : (tensor<2x3x0xf16>) -> tensor<2x3x0xf16>
  return %0 : tensor<2x3x0xf16>
}

// -----

// softmax: dim lies in [0, rank).
func.func @softmax_dim(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{dim 2 is out of range for x 'tensor<16x128xf32>' (rank 2)}}
  %0 = kg.softmax %x dim 2 : tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// Norms: weight has the element type of x.
func.func @layer_norm_weight_element_type(%x: tensor<16x128xf16>, %w: tensor<128xf32>) -> tensor<16x128xf16> {
  // expected-error @+1 {{weight 'tensor<128xf32>' must have the element type of x 'tensor<16x128xf16>'}}
  %0 = kg.layer_norm %x weight %w normalized_shape [128] eps 1.0e-5 : (tensor<16x128xf16>, tensor<128xf32>) -> tensor<16x128xf16>
  return %0 : tensor<16x128xf16>
}

// -----

// Norms: bias has the element type of x.
func.func @layer_norm_bias_element_type(%x: tensor<16x128xbf16>, %b: tensor<128xf16>) -> tensor<16x128xbf16> {
  // expected-error @+1 {{bias 'tensor<128xf16>' must have the element type of x 'tensor<16x128xbf16>'}}
  %0 = kg.layer_norm %x bias %b normalized_shape [128] eps 1.0e-5 : (tensor<16x128xbf16>, tensor<128xf16>) -> tensor<16x128xbf16>
  return %0 : tensor<16x128xbf16>
}

// -----

// Norms: eps is positive.
func.func @rms_norm_eps(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{eps must be positive, got 0.000000e+00}}
  %0 = kg.rms_norm %x normalized_shape [128] eps 0.0 : (tensor<16x128xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// Norms: the result has the type of x.
func.func @layer_norm_result_type(%x: tensor<16x128xf16>) -> tensor<16x128xf32> {
  // expected-error @+1 {{result type 'tensor<16x128xf32>' must equal the type of x 'tensor<16x128xf16>'}}
  %0 = kg.layer_norm %x normalized_shape [128] eps 1.0e-5 : (tensor<16x128xf16>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

//===----------------------------------------------------------------------===//
// View ops
//===----------------------------------------------------------------------===//

// transpose: the result has the element type of x.
func.func @transpose_element_type(%x: tensor<16x128xf32>) -> tensor<128x16xf16> {
  // expected-error @+1 {{result 'tensor<128x16xf16>' must have the element type of x 'tensor<16x128xf32>'}}
  %0 = kg.transpose %x [1, 0] : tensor<16x128xf32> -> tensor<128x16xf16>
  return %0 : tensor<128x16xf16>
}

// -----

// reshape keeps the number of elements.
func.func @reshape_count(%x: tensor<16x128xf32>) -> tensor<16x64xf32> {
  // expected-error @+1 {{result 'tensor<16x64xf32>' holds 1024 elements but x 'tensor<16x128xf32>' holds 2048}}
  %0 = kg.reshape %x : tensor<16x128xf32> -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// -----

// reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<16x128xf32>) -> tensor<2048xbf16> {
  // expected-error @+1 {{result 'tensor<2048xbf16>' must have the element type of x 'tensor<16x128xf32>'}}
  %0 = kg.reshape %x : tensor<16x128xf32> -> tensor<2048xbf16>
  return %0 : tensor<2048xbf16>
}

// -----

// broadcast_to does not lower the rank.
func.func @broadcast_to_rank(%x: tensor<16x128xf32>) -> tensor<128xf32> {
  // expected-error @+1 {{cannot broadcast x 'tensor<16x128xf32>' to the lower rank of 'tensor<128xf32>'}}
  %0 = kg.broadcast_to %x : tensor<16x128xf32> -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// -----

// broadcast_to: each dimension of x is 1 or the result's.
func.func @broadcast_to_dim(%x: tensor<2x128xf32>) -> tensor<4x16x128xf32> {
  // expected-error @+1 {{cannot broadcast x 'tensor<2x128xf32>' to 'tensor<4x16x128xf32>': dimension 0 is 2, not 1 or 16}}
  %0 = kg.broadcast_to %x : tensor<2x128xf32> -> tensor<4x16x128xf32>
  return %0 : tensor<4x16x128xf32>
}

// -----

// broadcast_to keeps the element type.
func.func @broadcast_to_element_type(%x: tensor<128xf8E5M2>) -> tensor<16x128xf16> {
  // expected-error @+1 {{result 'tensor<16x128xf16>' must have the element type of x 'tensor<128xf8E5M2>'}}
  %0 = kg.broadcast_to %x : tensor<128xf8E5M2> -> tensor<16x128xf16>
  return %0 : tensor<16x128xf16>
}

// -----

// concat needs at least one input.
func.func @concat_no_inputs() -> tensor<4xf32> {
  // expected-error @+1 {{needs at least one input}}
  %0 = kg.concat dim 0 : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// concat: dim lies in [0, rank).
func.func @concat_dim(%a: tensor<16x64xf32>, %b: tensor<16x32xf32>) -> tensor<16x96xf32> {
  // expected-error @+1 {{dim 2 is out of range for inputs of rank 2}}
  %0 = kg.concat %a, %b dim 2 : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<16x96xf32>
  return %0 : tensor<16x96xf32>
}

// -----

// concat: the inputs share a rank.
func.func @concat_rank(%a: tensor<16x64xf32>, %b: tensor<32xf32>) -> tensor<16x96xf32> {
  // expected-error @+1 {{input #1 'tensor<32xf32>' must have the rank of input #0 'tensor<16x64xf32>'}}
  %0 = kg.concat %a, %b dim 1 : (tensor<16x64xf32>, tensor<32xf32>) -> tensor<16x96xf32>
  return %0 : tensor<16x96xf32>
}

// -----

// concat: the inputs share an element type.
func.func @concat_element_type(%a: tensor<16x64xf32>, %b: tensor<16x32xf16>) -> tensor<16x96xf32> {
  // expected-error @+1 {{input #1 'tensor<16x32xf16>' must have the element type of input #0 'tensor<16x64xf32>'}}
  %0 = kg.concat %a, %b dim 1 : (tensor<16x64xf32>, tensor<16x32xf16>) -> tensor<16x96xf32>
  return %0 : tensor<16x96xf32>
}

// -----

// concat: the inputs agree in every dimension but dim.
func.func @concat_other_dims(%a: tensor<16x64xf32>, %b: tensor<8x32xf32>) -> tensor<16x96xf32> {
  // expected-error @+1 {{input #1 'tensor<8x32xf32>' differs from input #0 'tensor<16x64xf32>' in dimension 0, which is not the concat dimension 1}}
  %0 = kg.concat %a, %b dim 1 : (tensor<16x64xf32>, tensor<8x32xf32>) -> tensor<16x96xf32>
  return %0 : tensor<16x96xf32>
}

// -----

// slice: offsets are non-negative.
func.func @slice_negative_offset(%x: tensor<16x128xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{offset -1 of dimension 1 of x 'tensor<16x128xf32>' is negative}}
  %0 = kg.slice %x offsets [0, -1] strides [1, 1] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// slice: strides are positive.
func.func @slice_stride(%x: tensor<16x128xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{stride 0 of dimension 0 of x 'tensor<16x128xf32>' must be positive}}
  %0 = kg.slice %x offsets [0, 0] strides [0, 1] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// slice: the result has the rank of x.
func.func @slice_rank(%x: tensor<16x128xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{result 'tensor<32xf32>' must have the rank of x 'tensor<16x128xf32>'}}
  %0 = kg.slice %x offsets [0, 0] strides [1, 1] : tensor<16x128xf32> -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

// slice: every selected index lies inside x.
func.func @slice_out_of_bounds(%x: tensor<16x128xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{dimension 1 takes 32 elements from offset 66 with stride 2, past the end of x 'tensor<16x128xf32>'}}
  %0 = kg.slice %x offsets [0, 66] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// slice keeps the element type.
func.func @slice_element_type(%x: tensor<16x128xf32>) -> tensor<16x32xf16> {
  // expected-error @+1 {{result 'tensor<16x32xf16>' must have the element type of x 'tensor<16x128xf32>'}}
  %0 = kg.slice %x offsets [0, 0] strides [1, 1] : tensor<16x128xf32> -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Indexed ops
//===----------------------------------------------------------------------===//

// gather: indices are integers.
func.func @gather_float_indices(%t: tensor<8x4xf32>, %i: tensor<3xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{operand #1 must be ranked tensor of i32 or i64 values}}
  %0 = kg.gather %t[%i] dim 0 : (tensor<8x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// gather: indices are 1-D.
func.func @gather_2d_indices(%t: tensor<8x4xf32>, %i: tensor<2x3xi64>) -> tensor<6x4xf32> {
  // expected-error @+1 {{indices 'tensor<2x3xi64>' must be 1-D (reshape them to one dimension)}}
  %0 = kg.gather %t[%i] dim 0 : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

// gather: dim lies in [0, rank).
func.func @gather_dim(%t: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{dim 2 is out of range for table 'tensor<8x4xf32>' of rank 2}}
  %0 = kg.gather %t[%i] dim 2 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// gather: a table of rank 0 has nothing to index.
func.func @gather_scalar_table(%t: tensor<f32>, %i: tensor<3xi64>) -> tensor<3xf32> {
  // expected-error @+1 {{table 'tensor<f32>' must have at least one dimension to index}}
  %0 = kg.gather %t[%i] dim 0 : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// gather: the result has the table's shape with dim replaced by the index count.
func.func @gather_shape(%t: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<4x4xf32> {
  // expected-error @+1 {{result 'tensor<4x4xf32>' must have shape [3, 4] (table 'tensor<8x4xf32>' with dimension 0 replaced by the 3 indices) and element type 'f32'}}
  %0 = kg.gather %t[%i] dim 0 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// gather: the result has the table's element type.
func.func @gather_element(%t: tensor<8x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf16> {
  // expected-error @+1 {{result 'tensor<3x4xf16>' must have shape [3, 4] (table 'tensor<8x4xf32>' with dimension 0 replaced by the 3 indices) and element type 'f32'}}
  %0 = kg.gather %t[%i] dim 0 : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf16>
  return %0 : tensor<3x4xf16>
}

// -----

// scatter: the source has dest's shape with dim replaced by the index count.
func.func @scatter_source_shape(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %s: tensor<3x5xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{source 'tensor<3x5xf32>' must have shape [3, 4] (dest 'tensor<8x4xf32>' with dimension 0 replaced by the 3 indices) and element type 'f32'}}
  %0 = kg.scatter add %d[%i], %s dim 0 : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x5xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter: the source has dest's element type.
func.func @scatter_source_element(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %s: tensor<8x3xf16>) -> tensor<8x4xf32> {
  // expected-error @+1 {{source 'tensor<8x3xf16>' must have shape [8, 3] (dest 'tensor<8x4xf32>' with dimension 1 replaced by the 3 indices) and element type 'f32'}}
  %0 = kg.scatter assign %d[%i], %s dim 1 : (tensor<8x4xf32>, tensor<3xi64>, tensor<8x3xf16>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter: the result has dest's type.
func.func @scatter_result(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %s: tensor<3x4xf32>) -> tensor<8x4xf16> {
  // expected-error @+1 {{result 'tensor<8x4xf16>' must have the type of dest 'tensor<8x4xf32>'}}
  %0 = kg.scatter add %d[%i], %s dim 0 : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf16>
  return %0 : tensor<8x4xf16>
}

// -----

// scatter: dim lies in [0, rank).
func.func @scatter_dim(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %s: tensor<3x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{dim -1 is out of range for dest 'tensor<8x4xf32>' of rank 2}}
  %0 = kg.scatter add %d[%i], %s dim -1 : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter add: booleans have no sum.
func.func @scatter_add_bool(%d: tensor<8xi1>, %i: tensor<3xi64>, %s: tensor<3xi1>) -> tensor<8xi1> {
  // expected-error @+1 {{mode add needs f32, f16, bf16, i32 or i64 elements, not those of dest 'tensor<8xi1>'}}
  %0 = kg.scatter add %d[%i], %s dim 0 : (tensor<8xi1>, tensor<3xi64>, tensor<3xi1>) -> tensor<8xi1>
  return %0 : tensor<8xi1>
}

// -----

// scatter assign: booleans are copied like any element.
func.func @scatter_assign_bool_is_fine(%d: tensor<8xi1>, %i: tensor<3xi64>, %s: tensor<3xi1>) -> tensor<8xi1> {
  %0 = kg.scatter assign %d[%i], %s dim 0 : (tensor<8xi1>, tensor<3xi64>, tensor<3xi1>) -> tensor<8xi1>
  return %0 : tensor<8xi1>
}

// -----

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

// A kernel produces at least one tensor.
func.func @kernel_no_results(%a: tensor<4xf32>) {
  // expected-error @+1 {{must produce at least one tensor}}
  kg.kernel @k(%a) : (tensor<4xf32>) -> () {
  ^bb0(%x: tensor<4xf32>):
    kg.yield
  }
  return
}

// -----

// The config attribute is a dictionary of knobs.
func.func @kernel_config_not_a_dictionary(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'config' failed to satisfy constraint: dictionary of named attribute values}}
  %y = kg.kernel @k(%a) attributes {config = [64]} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Config knobs: a size is a positive integer (which sizes suit the kernel
// is for its schedule, in kg-tile).
func.func @kernel_config_zero(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{config knob block_n = 0 must be a positive integer}}
  %y = kg.kernel @k(%a) attributes {config = {block_n = 0}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Config knobs: a negative count is no knob value either.
func.func @kernel_config_negative(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{config knob split_k = -2 must be a positive integer}}
  %y = kg.kernel @k(%a) attributes {config = {split_k = -2}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Config knobs are integers or flags, not strings.
func.func @kernel_config_string(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{config knob block_m = "big" must be an i64 integer or a boolean}}
  %y = kg.kernel @k(%a) attributes {config = {block_m = "big"}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Config knobs are 64-bit integers, as kg-tile writes them.
func.func @kernel_config_i32(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{config knob num_warps = 4 : i32 must be an i64 integer or a boolean}}
  %y = kg.kernel @k(%a) attributes {config = {num_warps = 4 : i32}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Config knobs are named by identifiers.
func.func @kernel_config_name(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{config knob "block m" must be named by an identifier (a letter or _, then letters, digits or _)}}
  %y = kg.kernel @k(%a) attributes {config = {"block m" = 4}} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// A scalar argument the kernel does not take.
func.func @scalar_arg_out_of_range(%a: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.kernel @k(%a) attributes {scalars = array<i64: 7>} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: memref<4xf32>, %out: memref<4xf32>):
    // expected-error @+1 {{index 1 is not below the kernel's 1 scalar arguments (its scalars attribute)}}
    %s = kg.scalar_arg 1 : i32
    kg.yield
  }
  return %y : tensor<4xf32>
}

// -----

// The kernel body is one non-empty block.
func.func @kernel_empty_body(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects a non-empty block}}
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
  }
  return %y : tensor<4xf32>
}

// -----

// The kernel body ends in kg.yield, not in another terminator.
func.func @kernel_terminator(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body must end in kg.yield}}
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    llvm.unreachable
  }
  return %y : tensor<4xf32>
}

// -----

// A kernel's inputs are ranked tensors.
func.func @kernel_unranked_input(%a: tensor<*xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be variadic of ranked tensor}}
  %y = kg.kernel @k(%a) : (tensor<*xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<*xf32>):
    %c = kg.constant 0.0 : tensor<4xf32>
    kg.yield %c : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Graph form: the body takes one argument per input.
func.func @kernel_body_arg_count(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body takes 1 arguments for 2 inputs}}
  %y = kg.kernel @k(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Graph form: body argument i has the type of input i.
func.func @kernel_body_arg_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body argument #0 has type 'tensor<4xf16>' but input #0 has type 'tensor<4xf32>'}}
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf16>):
    %c = kg.cast %x : tensor<4xf16> to tensor<4xf32>
    kg.yield %c : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Graph form: kg.yield returns the kernel's result types.
func.func @kernel_yield_types(%a: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{kg.yield returns (tensor<4xf32>) but the kernel produces (tensor<4xf16>)}}
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%x: tensor<4xf32>):
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf16>
}

// -----

// A kernel is isolated from above: its body uses only its arguments.
func.func @kernel_isolated(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %s = kg.add %x, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    kg.yield %s : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// Tiled form: each buffer has the shape and element type of its tensor.
func.func @kernel_tiled_buffer_type(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{buffer argument #1 'memref<16x16xf16>' must be a contiguous memref with the shape and element type of 'tensor<16x16xf32>'}}
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf16>):
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// Tiled form: buffers are contiguous (identity layout).
func.func @kernel_tiled_buffer_layout(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{buffer argument #0 'memref<16x16xf32, strided<[1, 16]>>' must be a contiguous memref}}
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32, strided<[1, 16]>>, %out: memref<16x16xf32>):
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// Tiled form: the body ends in an empty kg.yield.
func.func @kernel_tiled_yield(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{a tiled kernel ends in an empty kg.yield}}
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c = kg.constant 0.0 : tensor<16x16xf32>
    kg.yield %c : tensor<16x16xf32>
  }
  return %y : tensor<16x16xf32>
}

// -----

// kg.yield sits in the body of a kg.kernel.
func.func @yield_outside_kernel(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expects parent op 'kg.kernel'}}
  kg.yield %a : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Dynamic extents
//===----------------------------------------------------------------------===//

// A dynamic extent broadcasts against itself or 1; against 4 it would hold
// at one size only.
func.func @dynamic_against_static(%a: tensor<?x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{operands are not broadcast-compatible: lhs 'tensor<?x8xf32>' and rhs 'tensor<4x8xf32>' differ in dimension -2}}
  %0 = kg.add %a, %b : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A broadcast keeps the dynamic extent.
func.func @dynamic_broadcast_result(%a: tensor<?x8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{result type 'tensor<4x8xf32>' must be the broadcast type 'tensor<?x8xf32>'}}
  %0 = kg.add %a, %b : (tensor<?x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A constant's extents come from attributes only, so they are static.
func.func @dynamic_constant() -> tensor<?x8xf32> {
  // expected-error @+1 {{result #0 must be statically shaped tensor}}
  %0 = kg.constant 1.0 : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// So are an iota's.
func.func @dynamic_iota() -> tensor<?xi32> {
  // expected-error @+1 {{result #0 must be statically shaped tensor}}
  %0 = kg.iota dim 0 : tensor<?xi32>
  return %0 : tensor<?xi32>
}

// -----

// Two dynamic extents on one side of a reshape: how they split the size is
// not known.
func.func @reshape_two_dynamic(%x: tensor<?x?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{must have one dynamic extent each}}
  %0 = kg.reshape %x : tensor<?x?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// A reshape between a dynamic and a static shape holds at one size only.
func.func @reshape_dynamic_to_static(%x: tensor<?x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{must have one dynamic extent each}}
  %0 = kg.reshape %x : tensor<?x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// The static extents around the `?` must hold the same number of elements.
func.func @reshape_dynamic_count(%x: tensor<?x12xf32>) -> tensor<?x5xf32> {
  // expected-error @+1 {{result 'tensor<?x5xf32>' holds 5 elements per unit of the dynamic extent but x 'tensor<?x12xf32>' holds 12}}
  %0 = kg.reshape %x : tensor<?x12xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// -----

// A dynamic extent broadcasts to itself only.
func.func @broadcast_to_dynamic_from_static(%x: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{dimension 0 is 4, not 1 or ?}}
  %0 = kg.broadcast_to %x : tensor<4x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Joining along a dynamic extent would make a sum of sizes.
func.func @concat_along_dynamic(%a: tensor<?x8xf32>, %b: tensor<2x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{input #0 'tensor<?x8xf32>' has a dynamic extent in the concat dimension 0}}
  %0 = kg.concat %a, %b dim 0 : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A dynamic extent is sliced whole or not at all.
func.func @slice_of_dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{dimension 0 of x 'tensor<?x8xf32>' and result 'tensor<?x8xf32>' is dynamic; it must be taken whole}}
  %0 = kg.slice %x offsets [1, 0] strides [1, 1] : tensor<?x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// Contracting dimensions must agree, `?` against a number included.
func.func @matmul_dynamic_k(%a: tensor<4x?xf16>, %b: tensor<16x8xf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{contracting dimensions differ: a 'tensor<4x?xf16>' has K = ?, b 'tensor<16x8xf16>' has K = 16}}
  %0 = kg.matmul %a, %b : (tensor<4x?xf16>, tensor<16x8xf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Tile ops
//===----------------------------------------------------------------------===//

// program_id: axis is 0, 1 or 2.
func.func @program_id_axis(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    // expected-error @+1 {{axis 3 must be 0, 1 or 2}}
    %pid = kg.program_id 3 : i32
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// program_id is only valid inside a tiled kernel (not in graph form).
func.func @program_id_graph_kernel(%a: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
    %pid = kg.program_id 0 : i32
    kg.yield %x : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// program_id returns an i32.
func.func @program_id_i64(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    // expected-error @+1 {{result #0 must be 32-bit signless integer}}
    %pid = kg.program_id 0 : i64
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_gather: its indices broadcast to the tile.
func.func @tile_gather_indices_shape(%a: tensor<50x16xf32>, %i: tensor<8xi64>) -> tensor<8x16xf32> {
  %y = kg.kernel @k(%a, %i) : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32> {
  ^bb0(%x: memref<50x16xf32>, %ids: memref<8xi64>, %out: memref<8x16xf32>):
    %c0 = arith.constant 0 : i32
    %v = memref.reinterpret_cast %ids to offset: [0], sizes: [4, 1], strides: [1, 0] : memref<8xi64> to memref<4x1xi64, strided<[1, 0]>>
    %rows = kg.tile_load %v[%c0, %c0] : memref<4x1xi64, strided<[1, 0]>> -> tensor<4x1xi64>
    // expected-error @+1 {{indices 'tensor<4x1xi64>' must broadcast to the tile 'tensor<8x16xf32>' (the same rank, each dimension 1 or the tile's)}}
    %t = kg.tile_gather %x[%c0, %c0] indices %rows dim 0 : memref<50x16xf32>, tensor<4x1xi64> -> tensor<8x16xf32>
    kg.yield
  }
  return %y : tensor<8x16xf32>
}

// -----

// tile_gather: dim names a dimension of the buffer.
func.func @tile_gather_dim(%a: tensor<50x16xf32>, %i: tensor<8xi64>) -> tensor<8x16xf32> {
  %y = kg.kernel @k(%a, %i) : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32> {
  ^bb0(%x: memref<50x16xf32>, %ids: memref<8xi64>, %out: memref<8x16xf32>):
    %c0 = arith.constant 0 : i32
    %v = memref.reinterpret_cast %ids to offset: [0], sizes: [8, 1], strides: [1, 0] : memref<8xi64> to memref<8x1xi64, strided<[1, 0]>>
    %rows = kg.tile_load %v[%c0, %c0] : memref<8x1xi64, strided<[1, 0]>> -> tensor<8x1xi64>
    // expected-error @+1 {{dim 2 is out of range for src 'memref<50x16xf32>' of rank 2}}
    %t = kg.tile_gather %x[%c0, %c0] indices %rows dim 2 : memref<50x16xf32>, tensor<8x1xi64> -> tensor<8x16xf32>
    kg.yield
  }
  return %y : tensor<8x16xf32>
}

// -----

// tile_load takes one offset per buffer dimension.
func.func @tile_load_offsets(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{takes one offset per dimension of src 'memref<16x16xf32>', got 1}}
    %t = kg.tile_load %x[%c0] : memref<16x16xf32> -> tensor<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tma: the rows of a 17x9 f16 buffer are 18 bytes apart, and a tensor
// map's strides are multiples of 16 bytes.
func.func @tile_load_tma_stride(%a: tensor<17x9xf16>) -> tensor<17x9xf16> {
  %y = kg.kernel @k(%a) : (tensor<17x9xf16>) -> tensor<17x9xf16> {
  ^bb0(%x: memref<17x9xf16>, %out: memref<17x9xf16>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{tma needs the strides of src 'memref<17x9xf16>' other than its unit stride to be multiples of 16 bytes; 9 elements are 18 bytes}}
    %t = kg.tile_load %x[%c0, %c0] {tma} : memref<17x9xf16> -> tensor<16x8xf16>
    kg.yield
  }
  return %y : tensor<17x9xf16>
}

// -----

// tma: a view that starts 4 halves (8 bytes) into its buffer.
func.func @tile_load_tma_offset(%a: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: memref<16x64xf16>, %out: memref<16x64xf16>):
    %c0 = arith.constant 0 : i32
    %v = memref.reinterpret_cast %x to offset: [4], sizes: [16, 32], strides: [64, 1] : memref<16x64xf16> to memref<16x32xf16, strided<[64, 1], offset: 4>>
    // expected-error @+1 {{tma needs the offset of src 'memref<16x32xf16, strided<[64, 1], offset: 4>>' to be a multiple of 16 bytes; 4 elements are 8 bytes}}
    %t = kg.tile_load %v[%c0, %c0] {tma} : memref<16x32xf16, strided<[64, 1], offset: 4>> -> tensor<16x32xf16>
    kg.yield
  }
  return %y : tensor<16x64xf16>
}

// -----

// tma: a view without a contiguous dimension (every eighth column: its
// strides are multiples of 16 bytes, but none is 1).
func.func @tile_store_tma_contiguous(%a: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: memref<16x64xf16>, %out: memref<16x64xf16>):
    %c0 = arith.constant 0 : i32
    %t = kg.tile_load %x[%c0, %c0] : memref<16x64xf16> -> tensor<16x8xf16>
    %v = memref.reinterpret_cast %out to offset: [0], sizes: [16, 8], strides: [64, 8] : memref<16x64xf16> to memref<16x8xf16, strided<[64, 8]>>
    // expected-error @+1 {{tma needs a dimension of unit stride in dst 'memref<16x8xf16, strided<[64, 8]>>'}}
    kg.tile_store %t, %v[%c0, %c0] {tma} : tensor<16x8xf16>, memref<16x8xf16, strided<[64, 8]>>
    kg.yield
  }
  return %y : tensor<16x64xf16>
}

// -----

// tma: TMA fills the lanes outside the buffer with zeros, so a masked tma
// load cannot promise another padding.
func.func @tile_load_tma_padding(%a: tensor<16x64xf16>) -> tensor<16x64xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: memref<16x64xf16>, %out: memref<16x64xf16>):
    %c0 = arith.constant 0 : i32
    %m = kg.tile_mask [%c0, %c0] lower [0, 0] upper [16, 64] : tensor<16x64xi1>
    // expected-error @+1 {{a masked tma load reads zeros outside its buffer; its padding must be 0, got -INF}}
    %t = kg.tile_load %x[%c0, %c0] mask %m padding 0xFFF0000000000000 {tma} : memref<16x64xf16> -> tensor<16x64xf16>
    kg.yield
  }
  return %y : tensor<16x64xf16>
}

// -----

// tile_load: the tile has the rank of the buffer.
func.func @tile_load_rank(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{tile 'tensor<256xf32>' must have the rank of src 'memref<16x16xf32>'}}
    %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<256xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_load: the tile has the element type of the buffer.
func.func @tile_load_element_type(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{tile 'tensor<16x16xf16>' must have the element type of src 'memref<16x16xf32>'}}
    %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf16>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_load: the mask has the shape of the tile (generic form: the custom form
// takes the mask's type from the result's).
func.func @tile_load_mask_shape(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %m = kg.tile_mask [%c0, %c0] lower [0, 0] upper [16, 16] : tensor<16x32xi1>
    // expected-error @+1 {{failed to verify that mask is a tensor of i1 with the shape of the tile}}
    %t = "kg.tile_load"(%x, %c0, %c0, %m) {operandSegmentSizes = array<i32: 1, 2, 1>, padding = 0.0 : f64} : (memref<16x16xf32>, i32, i32, tensor<16x32xi1>) -> tensor<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_load: offsets are i32.
func.func @tile_load_offset_type(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i64
    // expected-error @+1 {{operand #1 must be variadic of 32-bit signless integer}}
    %t = "kg.tile_load"(%x, %c0, %c0) {operandSegmentSizes = array<i32: 1, 2, 0>} : (memref<16x16xf32>, i64, i64) -> tensor<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_load is only valid inside a tiled kernel.
func.func @tile_load_outside_kernel(%x: memref<16x16xf32>) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
  return %t : tensor<16x16xf32>
}

// -----

// tile_store takes one offset per buffer dimension.
func.func @tile_store_offsets(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    // expected-error @+1 {{takes one offset per dimension of dst 'memref<16x16xf32>', got 3}}
    kg.tile_store %t, %out[%c0, %c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_store: the tile has the rank of the buffer.
func.func @tile_store_rank(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.constant 0.0 : tensor<1x16x16xf32>
    // expected-error @+1 {{tile 'tensor<1x16x16xf32>' must have the rank of dst 'memref<16x16xf32>'}}
    kg.tile_store %t, %out[%c0, %c0] : tensor<1x16x16xf32>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_store: the tile has the element type of the buffer.
func.func @tile_store_element_type(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.constant 0.0 : tensor<16x16xbf16>
    // expected-error @+1 {{tile 'tensor<16x16xbf16>' must have the element type of dst 'memref<16x16xf32>'}}
    kg.tile_store %t, %out[%c0, %c0] : tensor<16x16xbf16>, memref<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_store: the mask has the shape of the tile (generic form: the custom form
// takes the mask's type from the value's).
func.func @tile_store_mask_shape(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %t = kg.tile_load %x[%c0, %c0] : memref<16x16xf32> -> tensor<16x16xf32>
    %m = kg.tile_mask [%c0] lower [0] upper [16] : tensor<16xi1>
    // expected-error @+1 {{failed to verify that mask is a tensor of i1 with the shape of the tile}}
    "kg.tile_store"(%t, %out, %c0, %c0, %m) {operandSegmentSizes = array<i32: 1, 1, 2, 1>} : (tensor<16x16xf32>, memref<16x16xf32>, i32, i32, tensor<16xi1>) -> ()
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_store is only valid inside a tiled kernel.
func.func @tile_store_outside_kernel(%t: tensor<16x16xf32>, %out: memref<16x16xf32>) {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  kg.tile_store %t, %out[%c0, %c0] : tensor<16x16xf32>, memref<16x16xf32>
  return
}

// -----

// tile_mask: one dynamic_upper operand per dimension it names.
func.func @tile_mask_dynamic_upper_count(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %n = arith.constant 9 : i32
    // expected-error @+1 {{names 2 dimensions with a dynamic upper bound but has 1 dynamic_upper operands}}
    %m = kg.tile_mask [%c0, %c0] lower [0, 0] upper [16, 16] dynamic_upper [0, 1] (%n) : tensor<16x16xi1>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_mask: one offset, lower and upper bound per mask dimension.
func.func @tile_mask_lengths(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{needs one offset, lower and upper bound per dimension of the mask 'tensor<16x16xi1>'}}
    %m = kg.tile_mask [%c0, %c0] lower [0] upper [16, 16] : tensor<16x16xi1>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_mask: the box is not empty (lower < upper).
func.func @tile_mask_empty_box(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{empty box in dimension 1: lower 16 >= upper 16}}
    %m = kg.tile_mask [%c0, %c0] lower [0, 16] upper [16, 16] : tensor<16x16xi1>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_mask returns a tensor of i1.
func.func @tile_mask_type(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
    %m = kg.tile_mask [%c0, %c0] lower [0, 0] upper [16, 16] : tensor<16x16xi8>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_dot takes tiles of rank 3 or more.
func.func @tile_dot_rank(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %t = kg.constant 0.0 : tensor<16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x16xf32>
    // expected-error @+1 {{takes tiles of one rank, 3 or more, whose last axes (or the axes dims names) are M, K and N; got a 'tensor<16x16xf16>'}}
    %d = kg.tile_dot %t, %t, %acc : (tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf32>) -> tensor<16x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: a is [M, K, 1], b [1, K, N], acc [M, 1, N].
func.func @tile_dot_layout(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %t = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{expects a [..., M, K, 1], b [..., 1, K, N] and acc [..., M, 1, N]}}
    %d = kg.tile_dot %t, %t, %acc : (tensor<1x16x16xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: leading axes are 1.
func.func @tile_dot_leading_axes(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<2x16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<2x1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<2x16x1x16xf32>
    // expected-error @+1 {{with leading axes of 1}}
    %d = kg.tile_dot %ta, %tb, %acc : (tensor<2x16x16x1xf16>, tensor<2x1x16x16xf16>, tensor<2x16x1x16xf32>) -> tensor<2x16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: the contracting dimensions agree.
func.func @tile_dot_k(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x32x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{contracting dimensions differ: a 'tensor<16x32x1xf16>' and b 'tensor<1x16x16xf16>'}}
    %d = kg.tile_dot %ta, %tb, %acc : (tensor<16x32x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: acc is [M, 1, N].
func.func @tile_dot_acc_shape(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<32x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x64xf16>
    %acc = kg.constant 0.0 : tensor<32x1x32xf32>
    // expected-error @+1 {{acc 'tensor<32x1x32xf32>' must be [..., M, 1, N] for a 'tensor<32x16x1xf16>' and b 'tensor<1x16x64xf16>'}}
    %d = kg.tile_dot %ta, %tb, %acc : (tensor<32x16x1xf16>, tensor<1x16x64xf16>, tensor<32x1x32xf32>) -> tensor<32x1x32xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: the result has the type of acc.
func.func @tile_dot_result_type(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{result 'tensor<16x1x32xf32>' must have the type of acc 'tensor<16x1x16xf32>'}}
    %d = kg.tile_dot %ta, %tb, %acc : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x32xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: operands share an element type (only the 8-bit floats mix).
func.func @tile_dot_element_types(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xbf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{operands must share an element type (the two 8-bit floats may mix), got a 'tensor<16x16x1xf16>' and b 'tensor<1x16x16xbf16>'}}
    %d = kg.tile_dot %ta, %tb, %acc : (tensor<16x16x1xf16>, tensor<1x16x16xbf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: precision applies to f32 operands only.
func.func @tile_dot_precision(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{precision applies to f32 operands only, got a 'tensor<16x16x1xf16>'}}
    %d = kg.tile_dot %ta, %tb, %acc precision = ieee : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot: fast_accum is for 8-bit float tiles only (f16 tiles have no
// narrower sums to keep or leave).
func.func @tile_dot_fast_accum_f16(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // expected-error @+1 {{'kg.tile_dot' op precision = fast_accum applies to 8-bit float operands only, got a 'tensor<16x16x1xf16>' and b 'tensor<1x16x16xf16>'}}
    %d = kg.tile_dot %ta, %tb, %acc precision = fast_accum : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_dot accumulates in f32.
func.func @tile_dot_acc_f16(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %tc = kg.constant 0.0 : tensor<16x1x16xf16>
    // expected-error @+1 {{operand #2 must be statically shaped tensor of 32-bit float values}}
    %d = kg.tile_dot %ta, %tb, %tc : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf16>) -> tensor<16x1x16xf16>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// matmul: the result has shape batch x M x N.
func.func @matmul_result_shape(%a: tensor<2x1x16x64xf32>, %b: tensor<3x64x32xf32>) -> tensor<2x16x32xf32> {
  // expected-error @+1 {{result 'tensor<2x16x32xf32>' must have shape [2, 3, 16, 32]}}
  %0 = kg.matmul %a, %b : (tensor<2x1x16x64xf32>, tensor<3x64x32xf32>) -> tensor<2x16x32xf32>
  return %0 : tensor<2x16x32xf32>
}

// -----

// reduce: the result shape drops (or, with keepdim, keeps as 1) the reduced dimensions.
func.func @reduce_result_shape(%x: tensor<4x16x128xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{result 'tensor<4x16xf32>' must have shape [4, 16, 1] after reducing x 'tensor<4x16x128xf32>' over [2] with keepdim}}
  %0 = kg.reduce mean %x dims [2] keepdim : tensor<4x16x128xf32> -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// Norms: normalized_shape equals the trailing dimensions of x.
func.func @rms_norm_normalized_shape(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{normalized_shape [64] must equal the trailing dimensions of x 'tensor<16x128xf32>'}}
  %0 = kg.rms_norm %x normalized_shape [64] eps 1.0e-6 : (tensor<16x128xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// Norms: normalized_shape is not empty.
func.func @layer_norm_empty_normalized_shape(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{normalized_shape [] must equal the trailing dimensions of x 'tensor<16x128xf32>'}}
  %0 = kg.layer_norm %x normalized_shape [] eps 1.0e-5 : (tensor<16x128xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// Norms: weight has shape normalized_shape.
func.func @rms_norm_weight_shape(%x: tensor<16x128xf32>, %w: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{weight 'tensor<16x128xf32>' must have shape normalized_shape [128]}}
  %0 = kg.rms_norm %x weight %w normalized_shape [128] eps 1.0e-6 : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// Norms: bias has shape normalized_shape.
func.func @layer_norm_bias_shape(%x: tensor<16x128xf32>, %w: tensor<128xf32>, %b: tensor<1xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{bias 'tensor<1xf32>' must have shape normalized_shape [128]}}
  %0 = kg.layer_norm %x weight %w bias %b normalized_shape [128] eps 1.0e-5 : (tensor<16x128xf32>, tensor<128xf32>, tensor<1xf32>) -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----


// transpose: one permutation entry per dimension.
func.func @transpose_length(%x: tensor<16x128xf32>) -> tensor<128x16xf32> {
  // expected-error @+1 {{permutation [1, 0, 2] must have one entry per dimension of x 'tensor<16x128xf32>'}}
  %0 = kg.transpose %x [1, 0, 2] : tensor<16x128xf32> -> tensor<128x16xf32>
  return %0 : tensor<128x16xf32>
}

// -----

// transpose: the permutation is a permutation of [0, rank).
func.func @transpose_not_permutation(%x: tensor<16x128xf32>) -> tensor<16x16xf32> {
  // expected-error @+1 {{permutation [0, 0] is not a permutation of [0, 2)}}
  %0 = kg.transpose %x [0, 0] : tensor<16x128xf32> -> tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// -----

// transpose: the result has the permuted shape.
func.func @transpose_result_shape(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{result 'tensor<16x128xf32>' must have shape [128, 16] for x 'tensor<16x128xf32>' permuted by [1, 0]}}
  %0 = kg.transpose %x [1, 0] : tensor<16x128xf32> -> tensor<16x128xf32>
  return %0 : tensor<16x128xf32>
}

// -----

// concat: the result's dim is the sum of the inputs'.
func.func @concat_result_shape(%a: tensor<16x64xf32>, %b: tensor<16x32xf32>) -> tensor<16x64xf32> {
  // expected-error @+1 {{result 'tensor<16x64xf32>' must have shape [16, 96] and element type 'f32'}}
  %0 = kg.concat %a, %b dim 1 : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// -----

// slice: one offset and one stride per dimension.
func.func @slice_lengths(%x: tensor<16x128xf32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{offsets [0] and strides [1, 2] must have one entry per dimension of x 'tensor<16x128xf32>'}}
  %0 = kg.slice %x offsets [0] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

// slice: a stride too large to add up must not wrap around.
func.func @slice_huge_stride(%x: tensor<4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{dimension 0 takes 3 elements from offset 0 with stride 9223372036854775807, past the end of x 'tensor<4xf32>'}}
  %0 = kg.slice %x offsets [0] strides [9223372036854775807] : tensor<4xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// constant: NaN is no value to compute with.
func.func @constant_nan() -> tensor<f32> {
  // expected-error @+1 {{value must not be NaN}}
  %0 = kg.constant 0x7FF8000000000000 : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// program_id: a negative axis is reported as written.
func.func @program_id_negative(%a: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.kernel @k(%a) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%x: memref<4xf32>, %out: memref<4xf32>):
    // expected-error @+1 {{axis -1 must be 0, 1 or 2}}
    %p = kg.program_id -1 : i32
    kg.yield
  }
  return %y : tensor<4xf32>
}

// -----

// kernel: the body must end in kg.yield (here it ends in an ordinary op).
func.func @kernel_no_terminator(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{body must end in kg.yield, found kg.relu}}
  %y = "kg.kernel"(%a) <{sym_name = "k"}> ({
  ^bb0(%x: tensor<4xf32>):
    %r = kg.relu %x : tensor<4xf32>
  }) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// tile_mask is a tile op: only inside a tiled kernel.
func.func @tile_mask_outside_kernel() -> tensor<4xi1> {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  %m = kg.tile_mask [%c0] lower [0] upper [3] : tensor<4xi1>
  return %m : tensor<4xi1>
}

// -----

// tile_dot is a tile op: only inside a tiled kernel.
func.func @tile_dot_outside_kernel(%a: tensor<16x16x1xf16>, %b: tensor<1x16x16xf16>, %c: tensor<16x1x16xf32>) -> tensor<16x1x16xf32> {
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  %d = kg.tile_dot %a, %b, %c : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
  return %d : tensor<16x1x16xf32>
}

// -----

// tile_select: both values share an element type.
func.func @tile_select_element_types(%a: tensor<16xf32>) -> tensor<16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%x: memref<16xf32>, %out: memref<16xf32>):
    %c0 = arith.constant 0 : i32
    %m = kg.tile_mask [%c0] lower [0] upper [8] : tensor<16xi1>
    %t = kg.constant 1.0 : tensor<16xf32>
    %f = kg.constant 0.0 : tensor<1xf16>
    // expected-error @+1 {{true_value 'tensor<16xf32>' and false_value 'tensor<1xf16>' must share an element type}}
    %s = kg.tile_select %m, %t, %f : (tensor<16xi1>, tensor<16xf32>, tensor<1xf16>) -> tensor<16xf32>
    kg.yield
  }
  return %y : tensor<16xf32>
}

// -----

// tile_select: mask and values broadcast to one shape.
func.func @tile_select_broadcast(%a: tensor<16xf32>) -> tensor<16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%x: memref<16xf32>, %out: memref<16xf32>):
    %c0 = arith.constant 0 : i32
    %m = kg.tile_mask [%c0] lower [0] upper [8] : tensor<16xi1>
    %t = kg.constant 1.0 : tensor<8xf32>
    // expected-error @+1 {{mask 'tensor<16xi1>', true_value 'tensor<8xf32>' and false_value 'tensor<8xf32>' are not broadcast-compatible}}
    %s = kg.tile_select %m, %t, %t : (tensor<16xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
    kg.yield
  }
  return %y : tensor<16xf32>
}

// -----

// tile_select: the result has the broadcast type.
func.func @tile_select_result(%a: tensor<16xf32>) -> tensor<16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16xf32>) -> tensor<16xf32> {
  ^bb0(%x: memref<16xf32>, %out: memref<16xf32>):
    %c0 = arith.constant 0 : i32
    %m = kg.tile_mask [%c0] lower [0] upper [8] : tensor<16xi1>
    %t = kg.constant 1.0 : tensor<16xf32>
    // expected-error @+1 {{result 'tensor<32xf32>' must be the broadcast type 'tensor<16xf32>'}}
    %s = kg.tile_select %m, %t, %t : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
    kg.yield
  }
  return %y : tensor<16xf32>
}

// -----

// tile_select is a tile op: only inside a tiled kernel.
func.func @tile_select_outside_kernel(%m: tensor<4xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  %s = kg.tile_select %m, %a, %a : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

module {
  module @k {
  }
  // launch: the grid has three positive program counts.
  func.func @launch_grid(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{grid [4, 1] must hold three program counts in [1, 2^31)}}
    %y = kg.launch @k(%a) grid [4, 1] num_warps 4 num_stages 1 : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  module @k {
  }
  // launch: num_warps is a power of two.
  func.func @launch_num_warps(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{num_warps 3 must be a power of two}}
    %y = kg.launch @k(%a) grid [4, 1, 1] num_warps 3 num_stages 1 : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  module @k {
  }
  // launch: num_stages is positive.
  func.func @launch_num_stages(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{num_stages 0 must be positive}}
    %y = kg.launch @k(%a) grid [4, 1, 1] num_warps 4 num_stages 0 : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  module @k {
  }
  // launch: on a dynamic extent the grid needs its rule.
  func.func @launch_dynamic_without_rule(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
    // expected-error @+1 {{launches on a dynamic extent (`?`) and needs dynamic_grid = [tile, programs] to size its grid}}
    %y = kg.launch @k(%a) grid [4, 1, 1] num_warps 4 num_stages 1 : (tensor<?x4xf32>) -> tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}

// -----

module {
  module @k {
  }
  // launch: a grid rule is for a dynamic extent only.
  func.func @launch_rule_without_dynamic(%a: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{has dynamic_grid but no tensor with a dynamic extent (`?`)}}
    %y = kg.launch @k(%a) grid [4, 1, 1] num_warps 4 num_stages 1 {dynamic_grid = array<i64: 4, 1>} : (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  module @k {
  }
  // launch: the rule is a tile and a program count.
  func.func @launch_bad_rule(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
    // expected-error @+1 {{dynamic_grid [4, 0] must hold a tile and a program count in [1, 2^31)}}
    %y = kg.launch @k(%a) grid [4, 1, 1] num_warps 4 num_stages 1 {dynamic_grid = array<i64: 4, 0>} : (tensor<?x4xf32>) -> tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}

// -----

// launch: the callee names a module holding the kernel.
func.func @launch_callee(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{callee @missing must name a module that holds the kernel's tt.func}}
  %y = kg.launch @missing(%a) grid [4, 1, 1] num_warps 4 num_stages 1 : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// tile_range varies along its axis only.
func.func @tile_range_shape(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{result 'tensor<16x16xi32>' varies along axis 1 only: dimension 0 must have size 1}}
    %r = kg.tile_range %c0 axis 1 : tensor<16x16xi32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_dot: dims names three distinct axes of the tiles.
func.func @tile_dot_dims_repeated(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x1x16xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x16x1xf32>
    // expected-error @+1 {{dims must name three distinct axes below 3 (M, K, N)}}
    %d = kg.tile_dot %ta, %tb, %acc {dims = array<i64: 0, 2, 2>} : (tensor<16x1x16xf16>, tensor<1x16x16xf16>, tensor<16x16x1xf32>) -> tensor<16x16x1xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// -----

// tile_range's axis is a dimension of its result.
func.func @tile_range_axis(%a: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    // expected-error @+1 {{axis 2 is out of range for result 'tensor<1x16xi32>' (rank 2)}}
    %r = kg.tile_range %c0 axis 2 : tensor<1x16xi32>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// -----

// tile_range is only valid inside a tiled kernel.
func.func @tile_range_outside_kernel() -> tensor<16xi32> {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{is a tile op and must be inside the body of a tiled kg.kernel}}
  %r = kg.tile_range %c0 axis 0 : tensor<16xi32>
  return %r : tensor<16xi32>
}

// -----

// tile_dot: with dims = [M, K, N] = [0, 2, 1], a spans axes 0 and 2, b
// axes 2 and 1, acc axes 0 and 1; here a spans 0 and 1.
func.func @tile_dot_dims_layout(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @k(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %ta = kg.constant 0.0 : tensor<16x16x1xf16>
    %tb = kg.constant 0.0 : tensor<1x16x16xf16>
    %acc = kg.constant 0.0 : tensor<16x16x1xf32>
    // expected-error @+1 {{expects a over axes M, K (0, 2), b over K, N (2, 1) and acc over M, N, every other axis 1}}
    %d = kg.tile_dot %ta, %tb, %acc {dims = array<i64: 0, 2, 1>} : (tensor<16x16x1xf16>, tensor<1x16x16xf16>, tensor<16x16x1xf32>) -> tensor<16x16x1xf32>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}
