// convert-kg-to-ttir lowers kg.tile_gather to a tt.load whose addresses
// take the gathered dimension from the loaded indices (truncated to i32,
// times the table's row stride) and the others from the tile's ranges;
// the load of the indices themselves is a plain tt.load (nothing of the
// gather in it).
// RUN: kgc-opt %s --kg-tile --kg-pad-mask --convert-kg-to-ttir | FileCheck %s

// CHECK-LABEL: tt.func
// CHECK: ^bb0(%[[TABLE:.*]]: !tt.ptr<f16>, %[[IDS:.*]]: !tt.ptr<i64>, %{{.*}}: !tt.ptr<f16>):
// CHECK: %[[IP:.*]] = "tt.addptr"(%{{.*}}, %{{.*}}) : (tensor<4x!tt.ptr<i64>>, tensor<4xi32>)
// CHECK-NEXT: %{{.*}} = arith.constant dense<0> : tensor<4xi64>
// CHECK-NEXT: %[[ID:.*]] = "tt.load"(%[[IP]], %{{.*}}, %{{.*}}) {{.*}} -> tensor<4xi64>
// CHECK: %[[ROW:.*]] = arith.trunci %[[ID]] : tensor<4xi64> to tensor<4xi32>
// CHECK: %[[R2:.*]] = "tt.expand_dims"(%[[ROW]]) {axis = 1 : i32} : (tensor<4xi32>) -> tensor<4x1xi32>
// CHECK-NEXT: %[[RB:.*]] = "tt.broadcast"(%[[R2]]) : (tensor<4x1xi32>) -> tensor<4x256xi32>
// CHECK-NEXT: %[[STRIDE:.*]] = arith.constant dense<1000> : tensor<4x256xi32>
// CHECK-NEXT: %[[AT:.*]] = arith.muli %[[RB]], %[[STRIDE]] : tensor<4x256xi32>
// CHECK-NEXT: %[[OFF:.*]] = arith.addi %{{.*}}, %[[AT]] : tensor<4x256xi32>
// CHECK-NEXT: %[[BASE:.*]] = "tt.splat"(%[[TABLE]]) : (!tt.ptr<f16>) -> tensor<4x256x!tt.ptr<f16>>
// CHECK-NEXT: %[[P:.*]] = "tt.addptr"(%[[BASE]], %[[OFF]])
// CHECK-NEXT: %{{.*}} = arith.constant dense<0.000000e+00> : tensor<4x256xf16>
// CHECK-NEXT: "tt.load"(%[[P]], %{{.*}}, %{{.*}}) {{.*}} : (tensor<4x256x!tt.ptr<f16>>, tensor<4x256xi1>, tensor<4x256xf16>) -> tensor<4x256xf16>
func.func @rows(%table: tensor<50x1000xf16>, %ids: tensor<17xi64>) -> tensor<17x1000xf16> {
  %y = kg.kernel @rows_0(%table, %ids) attributes {config = {block_m = 4, block_n = 256, num_warps = 4}} : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16> {
  ^bb0(%t: tensor<50x1000xf16>, %i: tensor<17xi64>):
    %r = kg.gather %t[%i] dim 0 : (tensor<50x1000xf16>, tensor<17xi64>) -> tensor<17x1000xf16>
    kg.yield %r : tensor<17x1000xf16>
  }
  return %y : tensor<17x1000xf16>
}
