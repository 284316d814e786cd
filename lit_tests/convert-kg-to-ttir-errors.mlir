// What convert-kg-to-ttir refuses, with the pass alone on hand-written input.
// RUN: kgc-opt %s --split-input-file --convert-kg-to-ttir --verify-diagnostics

// A kernel still in graph form has no tile program to lower.
func.func @not_tiled(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{kernel @raw_0 is not tiled; run kg-tile, kg-legalize-dot and kg-pad-mask first}}
  %y = kg.kernel @raw_0(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %r = kg.exp %a : tensor<4xf32>
    kg.yield %r : tensor<4xf32>
  }
  return %y : tensor<4xf32>
}

// -----

// A tiled kernel whose tiles were not padded may hold tensors that Triton
// cannot (sizes that are not powers of two).
func.func @not_padded(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{kernel @tiled_0 is not padded; run kg-pad-mask first}}
  %y = kg.kernel @tiled_0(%x) attributes {config = {num_stages = 1, num_warps = 1}, grid = array<i64: 1, 1, 1>} : (tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%a: memref<3xf32>, %out: memref<3xf32>):
    kg.yield
  }
  return %y : tensor<3xf32>
}

// -----

// The only size a tile program reads at run time is the dynamic extent's:
// a static one is a constant kg-tile writes.
func.func @static_dim(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %y = kg.kernel @static_dim_0(%x) attributes {config = {num_stages = 1, num_warps = 1}, dynamic_axis = 0 : i64, dynamic_grid = array<i64: 4, 1>, grid = array<i64: 64, 1, 1>, padded} : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: memref<?x8xf32>, %out: memref<?x8xf32>):
    %i1 = arith.constant 1 : index
    // expected-error @+1 {{memref.dim of a tile program reads the size of the dynamic extent (a buffer's `?`); this one reads another size}}
    %n = memref.dim %a, %i1 : memref<?x8xf32>
    kg.yield
  }
  return %y : tensor<?x8xf32>
}
