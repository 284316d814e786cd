// kg-fuse plans its groups for the SMs of its target (kgc.targets), as
// kg-tile will: whether folding a norm into a matmul costs the matmul its
// split over k depends on how many SMs the matmul's tiles leave idle.
// (The matmul's own `norm-over-long-k` refusal, off here, would refuse this fold anyway.)
// RUN: kgc-opt %s --kg-decompose --kg-fuse='rules-off=norm-over-long-k' | FileCheck %s --check-prefix=SPLIT
// RUN: kgc-opt %s --kg-decompose --kg-fuse='target=80 rules-off=norm-over-long-k' | FileCheck %s --check-prefix=FOLD
// RUN: kgc-opt %s --kg-decompose --kg-fuse='target=87 rules-off=norm-over-long-k' | FileCheck %s --check-prefix=FOLD
// RUN: not kgc-opt %s --kg-fuse='target=75' 2>&1 | FileCheck %s --check-prefix=BAD-TARGET

// An RMSNorm read by two matmuls of one row. Folded into the first, it would
// be a result of that kernel too, needed whole before the dot: two loops
// over k, which cannot be split. On sm_90 (132 SMs) the first matmul's 64
// tiles would leave most SMs idle without its split, so nothing is folded:
// the norm stays a reduction kernel.
// SPLIT: kg.kernel @shared_norm_skinny_0_reduction(%arg0, %arg1) : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
// SPLIT: kg.kernel @shared_norm_skinny_1_matmul
// SPLIT: kg.kernel @shared_norm_skinny_2_matmul

// A Jetson Orin (sm_87) has 16 SMs, which the matmul's tiles fill without a
// split: the norm folds into the first matmul, which returns it for the
// second. So on sm_80: its 108 SMs take the 64 tiles as one wave over more
// than half of them, which kgc streams unsplit.
// FOLD: %[[Q:.*]]:2 = kg.kernel @shared_norm_skinny_0_matmul(%arg0, %arg1, %arg2) : (tensor<1x4096xf16>, tensor<4096xf16>, tensor<4096x4096xf16>) -> (tensor<1x4096xf16>, tensor<1x4096xf16>)
// FOLD: kg.kernel @shared_norm_skinny_1_matmul(%[[Q]]#0, %arg3)

// BAD-TARGET: kgc-opt: error: option 'target' of pass 'kg-fuse' must be one of 80, 86, 87, 89, 90, 100, 101, 120; got '75'

func.func @shared_norm_skinny(%x: tensor<1x4096xf16>, %gamma: tensor<4096xf16>, %wq: tensor<4096x4096xf16>, %wk: tensor<4096x1024xf16>) -> (tensor<1x4096xf16>, tensor<1x1024xf16>) {
  %n = kg.rms_norm %x weight %gamma normalized_shape [4096] eps 1.0e-6 : (tensor<1x4096xf16>, tensor<4096xf16>) -> tensor<1x4096xf16>
  %q = kg.matmul %n, %wq : (tensor<1x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x4096xf16>
  %k = kg.matmul %n, %wk : (tensor<1x4096xf16>, tensor<4096x1024xf16>) -> tensor<1x1024xf16>
  return %q, %k : tensor<1x4096xf16>, tensor<1x1024xf16>
}
