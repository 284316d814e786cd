// kg-tile takes kgc's choice for a kernel given no knob from the target's
// tuned-defaults table (kgc.tuned_defaults): the config of the entry whose
// shape is nearest the kernel's (here 16x1024x1024 for a 16x4096x1024
// product: two doublings of k away), canonical for the kernel.
// RUN: kgc-opt %s --kg-tile='tuned-defaults=%S/Inputs/tuned-defaults' | FileCheck %s --check-prefix=TABLE
// RUN: kgc-opt %s --kg-tile='tuned-defaults=%S/Inputs/tuned-defaults/sm_90.json' | FileCheck %s --check-prefix=TABLE
// RUN: kgc-opt %s --kg-tile='tuned-defaults=off' | FileCheck %s --check-prefix=HEURISTIC
// RUN: kgc-opt %s --kg-tile='target=80 tuned-defaults=%S/Inputs/tuned-defaults' | FileCheck %s --check-prefix=HEURISTIC
// RUN: kgc-opt %s --kg-tile='num-warps=8 tuned-defaults=%S/Inputs/tuned-defaults' | FileCheck %s --check-prefix=GIVEN
// RUN: not kgc-opt %s --kg-tile='tuned-defaults=%S/Inputs/tuned-defaults/bad.json' 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not kgc-opt %s --kg-tile='tuned-defaults=%S/Inputs/none.json' 2>&1 | FileCheck %s --check-prefix=MISSING

// The entry asks for no split (split_k = 1): one kernel.
// TABLE-NOT: _partials
// TABLE: kg.kernel @mm_0(
// TABLE-SAME: block_k = 128 : i64, block_m = 16 : i64, block_n = 32 : i64
// TABLE-SAME: num_stages = 3 : i64, num_warps = 2 : i64
// TABLE-NOT: split_k

// With the table off, and for a target the table is not for (sm_80), the
// heuristics choose: 64-wide tiles over 64-deep k steps, the k loop split
// to fill the SMs.
// HEURISTIC: kg.kernel @mm_0_partials
// HEURISTIC-SAME: block_k = 64 : i64
// HEURISTIC-SAME: block_n = 64 : i64
// HEURISTIC-SAME: num_warps = 4 : i64, split_k = {{8|16}} : i64

// A knob given (here warps for every kernel) leaves the rest to the
// heuristics: the table's configs are never mixed with a user's knobs.
// GIVEN: kg.kernel @mm_0_partials
// GIVEN-SAME: block_k = 64 : i64
// GIVEN-SAME: num_warps = 8 : i64

// BAD: error: tuned-defaults table {{.*}}bad.json: entry 0: config: matmul kernel: block_n = 48 is not legal
// MISSING: error: tuned-defaults table {{.*}}none.json: cannot be read

func.func @mm(%x: tensor<16x4096xf16>, %w: tensor<4096x1024xf16>) -> tensor<16x1024xf16> {
  %y = kg.kernel @mm_0(%x, %w) : (tensor<16x4096xf16>, tensor<4096x1024xf16>) -> tensor<16x1024xf16> {
  ^bb0(%a: tensor<16x4096xf16>, %b: tensor<4096x1024xf16>):
    %m = kg.matmul %a, %b : (tensor<16x4096xf16>, tensor<4096x1024xf16>) -> tensor<16x1024xf16>
    kg.yield %m : tensor<16x1024xf16>
  }
  return %y : tensor<16x1024xf16>
}
