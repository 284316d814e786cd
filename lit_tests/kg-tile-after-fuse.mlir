// kg-tile takes the plans kg-fuse made in the same run (one planner per
// pipeline run, kgc.tiling.planner), and plans the kernels itself when run
// alone on the fused file: both give the same tiled kernels.
// RUN: kgc-opt %s --kg-fuse --kg-tile > %t.one
// RUN: kgc-opt %s --kg-fuse | kgc-opt --kg-tile > %t.two
// RUN: diff %t.one %t.two
// RUN: FileCheck %s < %t.two

// CHECK-LABEL: func.func @mlp
// CHECK: kg.kernel @mlp_0_matmul
// CHECK-SAME: config = {block_k = {{[0-9]+}} : i64, block_m = 17 : i64
// CHECK-SAME: kind = "matmul"
// CHECK: kg.tile_dot
func.func @mlp(%x: tensor<17x300xf32>, %w: tensor<300x50xf32>, %b: tensor<50xf32>) -> tensor<17x50xf32> {
  %m = kg.matmul %x, %w : (tensor<17x300xf32>, tensor<300x50xf32>) -> tensor<17x50xf32>
  %s = kg.add %m, %b : (tensor<17x50xf32>, tensor<50xf32>) -> tensor<17x50xf32>
  %r = kg.relu %s : tensor<17x50xf32>
  return %r : tensor<17x50xf32>
}
