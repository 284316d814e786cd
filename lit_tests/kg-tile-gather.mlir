// kg-tile writes a gather as a tile of its indices and a kg.tile_gather of
// its table (kgc.tiling.gather). The last case fails on purpose, hence `not`.
// RUN: not kgc-opt %s --split-input-file --kg-tile 2>/dev/null | FileCheck %s
// RUN: kgc-opt %s --split-input-file --kg-tile --verify-diagnostics --mlir-disable-verifier > /dev/null

// Rows of an embedding table, in tiles of 4 rows and 256 columns: the ids
// of the tile's rows are loaded, and the table is read at them along its
// dimension 0 and at the tile's columns along dimension 1.
// CHECK-LABEL: func.func @rows
// CHECK: kind = "pointwise"
// CHECK-SAME: tile = array<i64: 4, 256>
// CHECK: ^bb0(%[[T:.*]]: memref<50x1000xf16>, %[[I:.*]]: memref<17xi64>, %{{.*}}: memref<17x1000xf16>):
// CHECK-DAG: %[[IV:.*]] = memref.reinterpret_cast %[[I]] to offset: [0], sizes: [17, 1], strides: [1, 0]
// CHECK-DAG: %[[TV:.*]] = memref.reinterpret_cast %[[T]] to offset: [0], sizes: [50, 1000], strides: [1000, 1]
// CHECK: %[[IDS:.*]] = kg.tile_load %[[IV]][%[[ROW:.*]], %{{.*}}] : memref<17x1xi64, strided<[1, 0]>> -> tensor<4x1xi64>
// CHECK-NEXT: %[[G:.*]] = kg.tile_gather %[[TV]][%{{.*}}, %[[COL:.*]]] indices %[[IDS]] dim 0 : memref<50x1000xf16, strided<[1000, 1]>>, tensor<4x1xi64> -> tensor<4x256xf16>
// CHECK-NEXT: kg.tile_store %[[G]], %{{.*}}[%[[ROW]], %[[COL]]] : tensor<4x256xf16>
func.func @rows(%table: tensor<50x1000xf16>, %ids: tensor<17xi64>) -> tensor<17x1000xf16> {
  %y = kg.kernel @rows_0(%table, %ids) attributes {config = {block_m = 4, block_n = 256, num_warps = 4}} : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16> {
  ^bb0(%t: tensor<50x1000xf16>, %i: tensor<17xi64>):
    %r = kg.gather %t[%i] dim 0 : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16>
    kg.yield %r : tensor<17x1000xf16>
  }
  return %y : tensor<17x1000xf16>
}

// -----

// A batch of sequences of ids, their rows read as [batch, sequence, hidden]:
// the table's rows lie along the sequence axis (the batch axis reads the
// table with stride 0), the ids vary along both.
// CHECK-LABEL: func.func @batch
// CHECK: iteration = array<i64: 2, 17, 64>
// CHECK: %[[IDS:.*]] = kg.tile_load %{{.*}} : memref<2x17x1xi32, strided<[17, 1, 0]>> -> tensor<1x17x1xi32>
// CHECK-NEXT: kg.tile_gather %{{.*}} indices %[[IDS]] dim 1 : memref<2x50x64xf32, strided<[0, 64, 1]>>, tensor<1x17x1xi32> -> tensor<1x17x64xf32>
func.func @batch(%table: tensor<50x64xf32>, %ids: tensor<2x17xi32>) -> tensor<2x17x64xf32> {
  %y = kg.kernel @batch_0(%table, %ids) : (tensor<50x64xf32>, tensor<2x17xi32>) -> tensor<2x17x64xf32> {
  ^bb0(%t: tensor<50x64xf32>, %i: tensor<2x17xi32>):
    %flat = kg.reshape %i : tensor<2x17xi32> -> tensor<34xi32>
    %r = kg.gather %t[%flat] dim 0 : (tensor<50x64xf32>, tensor<34xi32>) -> tensor<34x64xf32>
    %b = kg.reshape %r : tensor<34x64xf32> -> tensor<2x17x64xf32>
    kg.yield %b : tensor<2x17x64xf32>
  }
  return %y : tensor<2x17x64xf32>
}

// -----

// Positions computed in the kernel (an iota, as a mask's are) run on past
// the end of the iteration in the lanes that pad a tile (17 of 32 after
// kg-pad-mask): they are replaced by 0 outside [0, 17), so that no lane
// reads past the table. Positions read from memory need no such select
// (@rows above gathers at the loaded tile itself): kg-pad-mask pads their
// load with 0.
// CHECK-LABEL: func.func @computed_positions
// CHECK: %[[ZERO:.*]] = kg.constant 0.000000e+00 : tensor<1x1xi64>
// CHECK: %[[LANES:.*]] = kg.tile_range %{{.*}} axis 0 : tensor<17x1xi32>
// CHECK-NEXT: %[[P:.*]] = kg.cast %[[LANES]] : tensor<17x1xi32> to tensor<17x1xi64>
// CHECK-NEXT: %[[IN:.*]] = kg.tile_mask [%{{.*}}, %{{.*}}] lower [0, -2147483648] upper [17, 2147483647] : tensor<17x1xi1>
// CHECK-NEXT: %[[SAFE:.*]] = kg.tile_select %[[IN]], %[[P]], %[[ZERO]]
// CHECK-NEXT: kg.tile_gather %{{.*}} indices %[[SAFE]] dim 0 : memref<17x3xf32, strided<[3, 1]>>, tensor<17x1xi64> -> tensor<17x3xf32>
func.func @computed_positions(%table: tensor<17x3xf32>) -> tensor<17x3xf32> {
  %y = kg.kernel @positions_0(%table) : (tensor<17x3xf32>) -> tensor<17x3xf32> {
  ^bb0(%t: tensor<17x3xf32>):
    %p = kg.iota dim 0 : tensor<17xi64>
    %r = kg.gather %t[%p] dim 0 : (tensor<17x3xf32>, tensor<17xi64>) -> tensor<17x3xf32>
    kg.yield %r : tensor<17x3xf32>
  }
  return %y : tensor<17x3xf32>
}

// -----

// A kernel that computes its gather's table cannot read it at the indices:
// the table must come from memory. (kg-fuse never makes such a kernel.)
func.func @computed(%x: tensor<50x8xf32>, %ids: tensor<3xi64>) -> tensor<3x8xf32> {
  // expected-error @+1 {{kernel @computed_0 cannot be tiled: the table (50, 8) of kg.gather is computed in the kernel; a gather reads its rows from memory, a kernel input}}
  %y = kg.kernel @computed_0(%x, %ids) : (tensor<50x8xf32>, tensor<3xi64>) -> tensor<3x8xf32> {
  ^bb0(%t: tensor<50x8xf32>, %i: tensor<3xi64>):
    %e = kg.exp %t : tensor<50x8xf32>
    %r = kg.gather %e[%i] dim 0 : (tensor<50x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
    kg.yield %r : tensor<3x8xf32>
  }
  return %y : tensor<3x8xf32>
}
