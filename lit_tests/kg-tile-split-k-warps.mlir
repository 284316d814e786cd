// kg-tile's num-warps option is for every kernel: with split-K, the reduce
// kernel that sums the partials takes it too, not only the partials kernel.
// RUN: kgc-opt %s --kg-decompose --kg-fuse --kg-tile='split-k=4 num-warps=8' | FileCheck %s
// RUN: kgc-opt %s --kg-decompose --kg-fuse --kg-tile='kernel=skinny_0_matmul split-k=4 num-warps=2' | FileCheck %s --check-prefix=NAMED
// Without the option the reduce kernel's warps are kgc's own (an f32 tile
// of 4x16 lanes takes 1), whatever the partials kernel has.
// RUN: kgc-opt %s --kg-decompose --kg-fuse --kg-tile='split-k=4' | FileCheck %s --check-prefix=DEFAULT

// CHECK: kg.kernel @skinny_0_matmul_partials({{.*}}num_warps = 8 : i64
// CHECK: kg.kernel @skinny_0_matmul_reduce({{.*}}num_warps = 8 : i64

// NAMED: kg.kernel @skinny_0_matmul_partials({{.*}}num_warps = 2 : i64
// NAMED: kg.kernel @skinny_0_matmul_reduce({{.*}}num_warps = 2 : i64

// DEFAULT: kg.kernel @skinny_0_matmul_reduce({{.*}}num_warps = 1 : i64

func.func @skinny(%x: tensor<3x4096xf16>, %w: tensor<4096x1000xf16>) -> tensor<3x1000xf16> {
  %y = kg.matmul %x, %w : (tensor<3x4096xf16>, tensor<4096x1000xf16>) -> tensor<3x1000xf16>
  return %y : tensor<3x1000xf16>
}
