// Scatters that kg-decompose cannot lower; the error names the op and why.
// RUN: kgc-opt %s --split-input-file --kg-decompose --verify-diagnostics

// Several indices into integers: the one-hot matmul takes floats only.
func.func @scatter_add_integers(%d: tensor<16xi32>, %i: tensor<3xi64>, %s: tensor<3xi32>) -> tensor<16xi32> {
  // expected-error @+1 {{kg.scatter add of 3 indices into tensor<16xi32>: kgc computes a scatter of several indices as a one-hot matmul, which takes f32, f16 or bf16, not i32}}
  %y = kg.scatter add %d[%i], %s dim 0 : (tensor<16xi32>, tensor<3xi64>, tensor<3xi32>) -> tensor<16xi32>
  return %y : tensor<16xi32>
}

// -----

// One index into integers is a pointwise choice, which any type takes.
func.func @scatter_one_index_into_integers(%d: tensor<16xi32>, %i: tensor<1xi64>, %s: tensor<1xi32>) -> tensor<16xi32> {
  %y = kg.scatter add %d[%i], %s dim 0 : (tensor<16xi32>, tensor<1xi64>, tensor<1xi32>) -> tensor<16xi32>
  return %y : tensor<16xi32>
}

// -----

// A mean is a sum times 1/N with N a constant: over a dynamic extent, N is
// known only at run time.
func.func @mean_over_dynamic(%x: tensor<?x8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{kg.reduce: a mean over dimension 0 of tensor<?x8xf32> is a sum times 1/N with N a constant, and N of a dynamic extent is known only at run time}}
  %y = kg.reduce mean %x dims [0] : tensor<?x8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

// A scatter is built from the number of its indices, which must be static.
func.func @scatter_dynamic_indices(%d: tensor<16x4xf32>, %i: tensor<?xi64>, %s: tensor<?x4xf32>) -> tensor<16x4xf32> {
  // expected-error @+1 {{kg.scatter add into tensor<16x4xf32> at tensor<?xi64>: kgc builds a scatter from the extent of dimension 0 and the number of indices, which must be static}}
  %y = kg.scatter add %d[%i], %s dim 0 : (tensor<16x4xf32>, tensor<?xi64>, tensor<?x4xf32>) -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}
