// kg-pad-mask pads a kg.tile_gather's tile and masks its lanes past the
// table along the dimensions the tile walks, never along the gathered one,
// whose positions are the indices (padded lanes of their own tile hold 0).
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-pad-mask | FileCheck %s

// 17 ids in tiles of 4 and rows of 1000 in tiles of 256: the ids' load is
// masked at 17 with padding 0, the gather at column 1000 only.
// CHECK-LABEL: func.func @partial
// CHECK: %[[IM:.*]] = kg.tile_mask [%[[ROW:.*]], %{{.*}}] lower [-2147483648, -2147483648] upper [17, 2147483647] : tensor<4x1xi1>
// CHECK-NEXT: %[[IDS:.*]] = kg.tile_load %{{.*}}[%[[ROW]], %{{.*}}] mask %[[IM]] padding 0.000000e+00 : memref<17x1xi64, strided<[1, 0]>> -> tensor<4x1xi64>
// CHECK-NEXT: %[[GM:.*]] = kg.tile_mask [%{{.*}}, %[[COL:.*]]] lower [-2147483648, -2147483648] upper [2147483647, 1000] : tensor<4x256xi1>
// CHECK-NEXT: kg.tile_gather %{{.*}}[%{{.*}}, %[[COL]]] indices %[[IDS]] dim 0 mask %[[GM]] padding 0.000000e+00 : memref<50x1000xf16, strided<[1000, 1]>>, tensor<4x1xi64> -> tensor<4x256xf16>
func.func @partial(%table: tensor<50x1000xf16>, %ids: tensor<17xi64>) -> tensor<17x1000xf16> {
  %y = kg.kernel @partial_0(%table, %ids) attributes {config = {block_m = 4, block_n = 256, num_warps = 4}} : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16> {
  ^bb0(%t: tensor<50x1000xf16>, %i: tensor<17xi64>):
    %r = kg.gather %t[%i] dim 0 : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16>
    kg.yield %r : tensor<17x1000xf16>
  }
  return %y : tensor<17x1000xf16>
}

// -----

// Tiles that divide 16 ids and rows of 1024: every lane lies inside the
// table along the columns, so the gather (and the ids' load) stay unmasked.
// CHECK-LABEL: func.func @exact
// CHECK-NOT: kg.tile_mask
// CHECK: %[[IDS:.*]] = kg.tile_load %{{.*}} : memref<16x1xi64, strided<[1, 0]>> -> tensor<4x1xi64>
// CHECK-NEXT: kg.tile_gather %{{.*}} indices %[[IDS]] dim 0 : memref<50x1024xf16, strided<[1024, 1]>>, tensor<4x1xi64> -> tensor<4x256xf16>
// CHECK-NOT: kg.tile_mask
func.func @exact(%table: tensor<50x1024xf16>, %ids: tensor<16xi64>) -> tensor<16x1024xf16> {
  %y = kg.kernel @exact_0(%table, %ids) attributes {config = {block_m = 4, block_n = 256, num_warps = 4}} : (tensor<50x1024xf16>, tensor<16xi64>) -> tensor<16x1024xf16> {
  ^bb0(%t: tensor<50x1024xf16>, %i: tensor<16xi64>):
    %r = kg.gather %t[%i] dim 0 : (tensor<50x1024xf16>, tensor<16xi64>) -> tensor<16x1024xf16>
    kg.yield %r : tensor<16x1024xf16>
  }
  return %y : tensor<16x1024xf16>
}
