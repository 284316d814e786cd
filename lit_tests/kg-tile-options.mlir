// kg-tile's options: a kernel config given on the command line, for every
// kernel of a kind that has its knobs, or for one kernel (`kernel=`).
// RUN: kgc-opt %s --kg-tile='block-n=256 num-warps=2' | FileCheck %s --check-prefix=ALL
// RUN: kgc-opt %s --kg-tile='kernel=rows_0 block-x=2 num-stages=3' | FileCheck %s --check-prefix=ONE
// RUN: kgc-opt %s --kg-tile='block-n=4096' | FileCheck %s --check-prefix=COVER
// RUN: kgc-opt %s --kg-tile='block-n=1000' | FileCheck %s --check-prefix=COVER
// RUN: kgc-opt %s --kg-tile='kernel=exp_0 num-programs=4' | FileCheck %s --check-prefix=PERSISTENT
// RUN: not kgc-opt %s --kg-tile='num-warps=3' 2>&1 | FileCheck %s --check-prefix=BAD-WARPS
// RUN: not kgc-opt %s --kg-tile='block-r=100' 2>&1 | FileCheck %s --check-prefix=BAD-TILE
// RUN: not kgc-opt %s --kg-tile='block-k=32' 2>&1 | FileCheck %s --check-prefix=NO-KIND
// RUN: not kgc-opt %s --kg-tile='kernel=rows_0 block-m=4' 2>&1 | FileCheck %s --check-prefix=NO-KNOB
// RUN: not kgc-opt %s --kg-tile='kernel=missing block-m=4' 2>&1 | FileCheck %s --check-prefix=NO-NAME
// RUN: not kgc-opt %s --kg-tile='block-m=many' 2>&1 | FileCheck %s --check-prefix=NOT-INT

// The options apply to both kernels where they have the knob: block-n to
// the pointwise kernel only (a reduction has no block_n), num-warps to both.
// The pointwise kernel keeps block_m = 1 from its config attribute.
// ALL: kg.kernel @exp_0
// ALL-SAME: config = {block_m = 1 : i64, block_n = 256 : i64, num_stages = 1 : i64, num_warps = 2 : i64}, grid = array<i64: 68, 1, 1>
// ALL: kg.kernel @rows_0
// ALL-SAME: config = {block_r = 1000 : i64
// ALL-SAME: num_warps = 2 : i64}

// With kernel=rows_0 only the reduction changes; the pointwise kernel gets
// kgc's choices but for its own config.
// ONE: kg.kernel @exp_0
// ONE-SAME: config = {block_m = 1 : i64, block_n = 1000 : i64, num_stages = 1 : i64, {{.*}}}, grid = array<i64: 17, 1, 1>
// ONE: kg.kernel @rows_0
// ONE-SAME: config = {block_r = 1000 : i64, block_x = 2 : i64, num_stages = 3 : i64, {{.*}}}, grid = array<i64: 9, 1, 1>

// A tile at or above its axis's extent is the whole axis: 4096 and 1000
// give the same kernel.
// COVER: kg.kernel @exp_0
// COVER-SAME: config = {block_m = 1 : i64, block_n = 1000 : i64, {{.*}}}, grid = array<i64: 17, 1, 1>

// num-programs makes a kernel persistent: 4 programs walk its 17 tiles in
// a loop that starts at their program id.
// PERSISTENT: kg.kernel @exp_0
// PERSISTENT-SAME: num_programs = 4 : i64
// PERSISTENT-SAME: grid = array<i64: 4, 1, 1>
// PERSISTENT: %[[PID:.*]] = kg.program_id 0 : i32
// PERSISTENT: scf.for %{{.*}} = %[[PID]] to %{{.*}} step %{{.*}} : i32 {
// PERSISTENT: kg.tile_load
// PERSISTENT: kg.tile_store
// PERSISTENT: kg.kernel @rows_0
// PERSISTENT-NOT: num_programs

// BAD-WARPS: kg-tile-options.mlir:55:8: error: pointwise kernel @exp_0: num_warps = 3 is not legal; num_warps must be a power of two up to 32 (1, 2, 4, 8, 16, 32)
// BAD-TILE: kg-tile-options.mlir:60:8: error: reduction kernel @rows_0: block_r = 100 is not legal; block_r must be a power of two, or at least 1000 to cover its axis
// NO-KIND: kg-tile-options.mlir:54:1: error: kg-tile: option block-k applies to no kernel: only matmul kernels have it
// NO-KNOB: kg-tile-options.mlir:60:8: error: kg-tile: reduction kernel @rows_0 has no knob block-m (its knobs: num_warps, num_stages, num_programs, block_x, block_r)
// NO-NAME: kg-tile-options.mlir:54:1: error: kg-tile: kernel=missing names no kernel in graph form (kernels: @exp_0, @rows_0)
// NOT-INT: kgc-opt: error: option 'block-m' expects an integer, got 'many'
func.func @two_kernels(%x: tensor<17x1000xf32>) -> (tensor<17x1000xf32>, tensor<17x1xf32>) {
  %y = kg.kernel @exp_0(%x) attributes {config = {block_m = 1}} : (tensor<17x1000xf32>) -> tensor<17x1000xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.exp %a : tensor<17x1000xf32>
    kg.yield %r : tensor<17x1000xf32>
  }
  %s = kg.kernel @rows_0(%y) : (tensor<17x1000xf32>) -> tensor<17x1xf32> {
  ^bb0(%a: tensor<17x1000xf32>):
    %r = kg.reduce sum %a dims [1] keepdim : tensor<17x1000xf32> -> tensor<17x1xf32>
    kg.yield %r : tensor<17x1xf32>
  }
  return %y, %s : tensor<17x1000xf32>, tensor<17x1xf32>
}

// The attention knobs are options too; on a graph without attention kernels
// they apply to nothing, and pack-heads takes true, false or auto.
// RUN: not kgc-opt %s --kg-tile='split-kv=4' 2>&1 | FileCheck %s --check-prefix=NO-ATTENTION
// RUN: not kgc-opt %s --kg-tile='pack-heads=maybe' 2>&1 | FileCheck %s --check-prefix=BAD-FLAG
// NO-ATTENTION: kg-tile-options.mlir:54:1: error: kg-tile: option split-kv applies to no kernel: only attention kernels have it
// BAD-FLAG: kgc-opt: error: option 'pack-heads' of pass 'kg-tile' must be one of auto, true, false; got 'maybe'
