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
