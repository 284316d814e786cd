// The tma knob of matmul kernels: kg-tile marks the operand loads of the k
// loop (and the result stores that TMA can make) `tma`; kg-pad-mask keeps
// the mark with the bounds mask of partial tiles; convert-kg-to-ttir reads
// and writes them through device-side tensor descriptors made at the
// function's entry, dropping the bounds masks (TMA fills lanes outside the
// buffer with zeros and drops them on stores).
// RUN: not kgc-opt %s --split-input-file --kg-tile='tma=true' 2>/dev/null | FileCheck %s --check-prefix=TILE
// RUN: not kgc-opt %s --split-input-file --kg-tile='tma=true' --kg-legalize-dot --kg-pad-mask --convert-kg-to-ttir 2>/dev/null | FileCheck %s --check-prefix=TTIR
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-legalize-dot --kg-pad-mask --convert-kg-to-ttir | FileCheck %s --check-prefix=OFF
// RUN: not kgc-opt %s --split-input-file --kg-tile='tma=true' 2>&1 | FileCheck %s --check-prefix=ERROR
// RUN: not kgc-opt %s --split-input-file --kg-tile='tma=true' --kg-legalize-dot='target=80' 2>&1 | FileCheck %s --check-prefix=SM80

// Below sm_90 there is no tensor memory accelerator: kg-legalize-dot, which
// knows the target, refuses the knob before Triton would fail on it.
// SM80: error: kernel @gemm_0: tma = true needs sm_90 or newer, which have a tensor memory accelerator; the target is sm_80

// TILE-LABEL: func.func @gemm
// TILE: kg.kernel @gemm_0
// TILE-SAME: tma = true
// TILE: scf.for
// TILE: kg.tile_load {{.*}} {tma} : memref<100x264x1xf16{{.*}}> -> tensor<64x32x1xf16>
// TILE: kg.tile_load {{.*}} {tma} : memref<1x264x96xf16{{.*}}> -> tensor<1x32x64xf16>
// TILE: kg.tile_dot
// TILE: kg.tile_store {{.*}} {tma} : tensor<64x1x64xf16>, memref<100x1x96xf16{{.*}}>

// TTIR-LABEL: module @gemm_0
// TTIR: %[[A:[0-9]+]] = "tt.make_tensor_descriptor"(%arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!tt.ptr<f16>, i32, i32, i64, i64) -> !tt.tensordesc<tensor<64x32xf16>>
// TTIR: %[[B:[0-9]+]] = "tt.make_tensor_descriptor"(%arg1, {{.*}} -> !tt.tensordesc<tensor<32x64xf16>>
// TTIR: %[[C:[0-9]+]] = "tt.make_tensor_descriptor"(%arg2, {{.*}} -> !tt.tensordesc<tensor<64x64xf16>>
// TTIR: scf.for
// TTIR: "tt.descriptor_load"(%[[A]], {{.*}} -> tensor<64x32xf16>
// TTIR: "tt.descriptor_load"(%[[B]], {{.*}} -> tensor<32x64xf16>
// TTIR: "tt.dot"
// TTIR: "tt.descriptor_store"(%[[C]], {{.*}} : (!tt.tensordesc<tensor<64x64xf16>>, tensor<64x64xf16>, i32, i32) -> ()
// TTIR-NOT: "tt.load"
// TTIR-NOT: "tt.store"

// Without the knob the kernel reads and writes through pointers, as before.
// OFF-LABEL: module @gemm_0
// OFF-NOT: tt.make_tensor_descriptor
// OFF: "tt.load"
// OFF: "tt.store"
func.func @gemm(%a: tensor<100x264xf16>, %b: tensor<264x96xf16>) -> tensor<100x96xf16> {
  %y = kg.kernel @gemm_0(%a, %b) attributes {config = {block_m = 64, block_n = 64, block_k = 32}} : (tensor<100x264xf16>, tensor<264x96xf16>) -> tensor<100x96xf16> {
  ^bb0(%x: tensor<100x264xf16>, %w: tensor<264x96xf16>):
    %m = kg.matmul %x, %w : (tensor<100x264xf16>, tensor<264x96xf16>) -> tensor<100x96xf16>
    kg.yield %m : tensor<100x96xf16>
  }
  return %y : tensor<100x96xf16>
}

// -----

// A weight given as [N, K] and read through a transpose: the descriptor
// describes it in its own order (K contiguous), and the tile is transposed
// after the copy.
// TTIR-LABEL: module @linear_0
// TTIR: %[[WD:[0-9]+]] = "tt.make_tensor_descriptor"(%arg1, {{.*}} -> !tt.tensordesc<tensor<64x32xf16>>
// TTIR: %[[W:[0-9]+]] = "tt.descriptor_load"(%[[WD]], {{.*}} -> tensor<64x32xf16>
// TTIR: "tt.trans"(%[[W]]) {order = array<i32: 1, 0>} : (tensor<64x32xf16>) -> tensor<32x64xf16>
func.func @linear(%a: tensor<128x256xf16>, %w: tensor<192x256xf16>) -> tensor<128x192xf16> {
  %y = kg.kernel @linear_0(%a, %w) attributes {config = {block_m = 64, block_n = 64, block_k = 32}} : (tensor<128x256xf16>, tensor<192x256xf16>) -> tensor<128x192xf16> {
  ^bb0(%x: tensor<128x256xf16>, %v: tensor<192x256xf16>):
    %t = kg.transpose %v [1, 0] : tensor<192x256xf16> -> tensor<256x192xf16>
    %m = kg.matmul %x, %t : (tensor<128x256xf16>, tensor<256x192xf16>) -> tensor<128x192xf16>
    kg.yield %m : tensor<128x192xf16>
  }
  return %y : tensor<128x192xf16>
}

// -----

// Nothing to mark in a kernel without a matmul: tma is a matmul knob, and
// kg-tile's option applies to the matmul kernel beside it only.
// TILE-LABEL: func.func @pointwise
// TILE: kg.kernel @exp_0
// TILE-NOT: tma
// TILE: kg.kernel @mm_0
// TILE-SAME: tma = true
func.func @pointwise(%x: tensor<64x64xf16>, %y: tensor<64x64xf16>, %z: tensor<64x64xf16>) -> (tensor<64x64xf16>, tensor<64x64xf16>) {
  %e = kg.kernel @exp_0(%x) : (tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%v: tensor<64x64xf16>):
    %r = kg.exp %v : tensor<64x64xf16>
    kg.yield %r : tensor<64x64xf16>
  }
  %m = kg.kernel @mm_0(%y, %z) : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>):
    %p = kg.matmul %a, %b : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16>
    kg.yield %p : tensor<64x64xf16>
  }
  return %e, %m : tensor<64x64xf16>, tensor<64x64xf16>
}

// -----

// K = 4097 halves: A's rows are 8194 bytes apart, not a multiple of 16, so
// no TMA descriptor can describe A: the knob is refused, naming the operand.
// ERROR: error: matmul kernel @unaligned_0: tma = true is not legal: input #0 (f16 [17, 4097]) cannot be read by TMA: its stride along axis 0 is 4097 elements of f16, 8194 bytes, not a multiple of 16; leave tma unset for this kernel
func.func @unaligned(%a: tensor<17x4097xf16>, %b: tensor<4097x64xf16>) -> tensor<17x64xf16> {
  %y = kg.kernel @unaligned_0(%a, %b) : (tensor<17x4097xf16>, tensor<4097x64xf16>) -> tensor<17x64xf16> {
  ^bb0(%x: tensor<17x4097xf16>, %w: tensor<4097x64xf16>):
    %m = kg.matmul %x, %w : (tensor<17x4097xf16>, tensor<4097x64xf16>) -> tensor<17x64xf16>
    kg.yield %m : tensor<17x64xf16>
  }
  return %y : tensor<17x64xf16>
}

// -----

// A result whose rows are 34 bytes apart (N = 17 halves) cannot be written
// by TMA: the operands still are read through descriptors, and the result
// is stored through pointers (the store is not marked).
// TILE-LABEL: func.func @narrow_result
// TILE: kg.tile_load {{.*}} {tma}
// TILE: kg.tile_load {{.*}} {tma}
// TILE: kg.tile_store {{[^{]*}} : tensor<64x1x17xf16>, memref<64x1x17xf16
func.func @narrow_result(%a: tensor<64x256xf16>, %w: tensor<17x256xf16>) -> tensor<64x17xf16> {
  %y = kg.kernel @narrow_result_0(%a, %w) : (tensor<64x256xf16>, tensor<17x256xf16>) -> tensor<64x17xf16> {
  ^bb0(%x: tensor<64x256xf16>, %v: tensor<17x256xf16>):
    %t = kg.transpose %v [1, 0] : tensor<17x256xf16> -> tensor<256x17xf16>
    %m = kg.matmul %x, %t : (tensor<64x256xf16>, tensor<256x17xf16>) -> tensor<64x17xf16>
    kg.yield %m : tensor<64x17xf16>
  }
  return %y : tensor<64x17xf16>
}

// -----

// 8-bit float dots: each k step's products (64 here, at most 128) are summed
// by the tensor cores and then added into the f32 accumulator; with 0,
// Triton 3.6 would widen both operands to f16 on sm_90 instead of using
// 8-bit wgmma. Descriptors copy the 8-bit tiles as any others.
// TTIR-LABEL: module @fp8_0
// TTIR: "tt.make_tensor_descriptor"(%arg0, {{.*}} -> !tt.tensordesc<tensor<64x64xf8E4M3FN>>
// TTIR: "tt.dot"({{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 64 : i32} : (tensor<64x64xf8E4M3FN>, tensor<64x64xf8E4M3FN>, tensor<64x64xf32>) -> tensor<64x64xf32>
// OFF-LABEL: module @fp8_0
// OFF: "tt.dot"({{.*}}) {inputPrecision = 2 : i32, maxNumImpreciseAcc = 64 : i32}
func.func @fp8(%a: tensor<64x256xf8E4M3FN>, %b: tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  %y = kg.kernel @fp8_0(%a, %b) attributes {config = {block_k = 64}} : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32> {
  ^bb0(%x: tensor<64x256xf8E4M3FN>, %w: tensor<256x64xf8E4M3FN>):
    %m = kg.matmul %x, %w : (tensor<64x256xf8E4M3FN>, tensor<256x64xf8E4M3FN>) -> tensor<64x64xf32>
    kg.yield %m : tensor<64x64xf32>
  }
  return %y : tensor<64x64xf32>
}
