// kg-tile plans for the SMs of its target (kgc.targets): a 1x4096x1024
// product has 16 tiles of 64 columns, and kgc splits its k loop until the
// tiles times the splits fill the GPU once.
// RUN: kgc-opt %s --kg-tile | FileCheck %s --check-prefix=SM90
// RUN: kgc-opt %s --kg-tile='target=90' | FileCheck %s --check-prefix=SM90
// RUN: kgc-opt %s --kg-tile='target=80' | FileCheck %s --check-prefix=SM80
// RUN: kgc-opt %s --kg-tile='target=87' | FileCheck %s --check-prefix=SM87
// RUN: kgc-opt %s --kg-tile='target=80 split-k=2' | FileCheck %s --check-prefix=GIVEN
// RUN: not kgc-opt %s --kg-tile='target=75' 2>&1 | FileCheck %s --check-prefix=BAD-TARGET

// sm_90 (H100 SXM, 132 SMs): 16 tiles x 16 splits (the most kgc takes).
// SM90: kg.kernel @gemv_0_partials
// SM90-SAME: split_k = 16 : i64}, grid = array<i64: 16, 16, 1>
// SM90: kg.kernel @gemv_0_reduce

// sm_80 (A100, 108 SMs): 16 tiles x 8 splits already fill it.
// SM80: kg.kernel @gemv_0_partials
// SM80-SAME: split_k = 8 : i64}, grid = array<i64: 16, 8, 1>
// SM80: kg.kernel @gemv_0_reduce

// sm_87 (Jetson Orin, 16 SMs): the 16 tiles fill it; nothing is split,
// the kernel stays one.
// SM87-NOT: _partials
// SM87: kg.kernel @gemv_0
// SM87-SAME: grid = array<i64: 16, 1, 1>
// SM87-NOT: split_k
// SM87-NOT: _reduce

// A split the user gives is kept whatever the target: the target only
// decides the knobs left to kgc.
// GIVEN: kg.kernel @gemv_0_partials
// GIVEN-SAME: split_k = 2 : i64}, grid = array<i64: 16, 2, 1>

// BAD-TARGET: kgc-opt: error: option 'target' of pass 'kg-tile' must be one of 80, 86, 87, 89, 90, 100, 101, 120; got '75'

func.func @gemv(%x: tensor<1x4096xf16>, %w: tensor<4096x1024xf16>) -> tensor<1x1024xf16> {
  %y = kg.kernel @gemv_0(%x, %w) : (tensor<1x4096xf16>, tensor<4096x1024xf16>) -> tensor<1x1024xf16> {
  ^bb0(%a: tensor<1x4096xf16>, %b: tensor<4096x1024xf16>):
    %m = kg.matmul %a, %b : (tensor<1x4096xf16>, tensor<4096x1024xf16>) -> tensor<1x1024xf16>
    kg.yield %m : tensor<1x1024xf16>
  }
  return %y : tensor<1x1024xf16>
}

// A reduction takes fewer rows per program until the target's SMs hold
// four programs each: 1000 rows of 512 columns fit 8 rows a program; sm_90
// (132 SMs, 528 programs wanted) takes 1 row a program (1000 programs),
// sm_80 (108 SMs, 432) 2 (500), sm_87 (16 SMs, 64) keeps 8 (125).
// SM90-LABEL: kg.kernel @rows_0
// SM90-SAME: block_x = 1 : i64{{.*}}grid = array<i64: 1000, 1, 1>
// SM80-LABEL: kg.kernel @rows_0
// SM80-SAME: block_x = 2 : i64{{.*}}grid = array<i64: 500, 1, 1>
// SM87-LABEL: kg.kernel @rows_0
// SM87-SAME: block_x = 8 : i64{{.*}}grid = array<i64: 125, 1, 1>
func.func @rows(%x: tensor<1000x512xf16>) -> tensor<1000x1xf16> {
  %y = kg.kernel @rows_0(%x) : (tensor<1000x512xf16>) -> tensor<1000x1xf16> {
  ^bb0(%a: tensor<1000x512xf16>):
    %s = kg.reduce sum %a dims [1] keepdim : tensor<1000x512xf16> -> tensor<1000x1xf16>
    kg.yield %s : tensor<1000x1xf16>
  }
  return %y : tensor<1000x1xf16>
}
