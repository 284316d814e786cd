// kg-fuse puts a gather in one kernel with what reads its rows (an
// embedding and the first RMSNorm: one reduction kernel), and keeps a gather
// of a computed table apart from the op that computes it.
// RUN: kgc-opt %s --kg-decompose --kg-fuse | FileCheck %s

// CHECK-LABEL: func.func @embed_norm
// CHECK-SAME: (%[[T:.*]]: tensor<64x32xf16>, %[[I:.*]]: tensor<5xi64>, %[[W:.*]]: tensor<32xf16>)
// CHECK-NEXT: %[[Y:.*]] = kg.kernel @embed_norm_0_reduction(%[[T]], %[[I]], %[[W]])
// CHECK: %[[ROWS:.*]] = kg.gather %{{.*}}[%{{.*}}] dim 0 : (tensor<64x32xf16>, tensor<5xi64>) -> tensor<5x32xf16>
// CHECK-NEXT: kg.cast %[[ROWS]] {kg.promotion}
// CHECK: kg.reduce sum
// CHECK: kg.yield
// CHECK-NOT: kg.kernel
// CHECK: return %[[Y]]
func.func @embed_norm(%table: tensor<64x32xf16>, %ids: tensor<5xi64>, %w: tensor<32xf16>) -> tensor<5x32xf16> {
  %rows = kg.gather %table[%ids] dim 0 : (tensor<64x32xf16>, tensor<5xi64>) -> tensor<5x32xf16>
  %y = kg.rms_norm %rows weight %w normalized_shape [32] eps 1.0e-06 : (tensor<5x32xf16>, tensor<32xf16>) -> tensor<5x32xf16>
  return %y : tensor<5x32xf16>
}

// The gather reads its table's rows from memory at the indices: the exp
// that computes the table cannot be in its kernel, and stays a kernel of
// its own.
// CHECK-LABEL: func.func @computed_table
// CHECK: %[[E:.*]] = kg.kernel @computed_table_0_pointwise(%{{.*}}) : (tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK: kg.exp
// CHECK: kg.kernel @computed_table_1_pointwise(%[[E]], %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.gather
func.func @computed_table(%x: tensor<64x32xf32>, %ids: tensor<5xi64>) -> tensor<5x32xf32> {
  %e = kg.exp %x : tensor<64x32xf32>
  %rows = kg.gather %e[%ids] dim 0 : (tensor<64x32xf32>, tensor<5xi64>) -> tensor<5x32xf32>
  return %rows : tensor<5x32xf32>
}
