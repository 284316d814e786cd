// kg-tile makes a kernel that is a bare matmul of at least 256 rows, columns
// and k steps a library kernel (kgc.tiling.library): no tile program, the
// call it makes as `library_call`; convert-kg-to-ttir leaves an empty kernel
// module and a launch that carry the call. Fused and small-m matmuls stay
// Triton; the knob `library` overrides kgc's rule either way.
// RUN: kgc-opt %s --split-input-file --kg-tile | FileCheck %s
// RUN: kgc-opt %s --split-input-file --kg-tile --kg-pad-mask --convert-kg-to-ttir | FileCheck %s --check-prefix=TTIR
// The option `library` fails on the cases without a bare matmul (it applies
// to no kernel there, as any knob option does), hence `not`.
// RUN: not kgc-opt %s --split-input-file --kg-tile='library=false' 2>/dev/null | FileCheck %s --check-prefix=OFF
// RUN: not kgc-opt %s --split-input-file --kg-tile='library=true' 2>/dev/null | FileCheck %s --check-prefix=ON
// RUN: not kgc-opt %s --split-input-file --kg-tile='library=true' 2>&1 >/dev/null | FileCheck %s --check-prefix=NO-BARE

// A prefill's qkv projection (512x4096x6144, f16): a library call.
// CHECK-LABEL: func.func @qkv
// CHECK: kg.kernel @qkv_0(%{{.*}}, %{{.*}}) attributes {config = {library = true}, grid = array<i64: 1, 1, 1>, iteration = array<i64: 512, 4096, 6144>, kind = "library_matmul", library_call = {name = "matmul", operands = array<i64: 0, 1>, transpose_a = false, transpose_b = false}
// CHECK-NEXT: ^bb0(%{{.*}}: memref<512x4096xf16>, %{{.*}}: memref<4096x6144xf16>, %{{.*}}: memref<512x6144xf16>):
// CHECK-NEXT: kg.yield
// TTIR-LABEL: func.func @qkv
// TTIR: kg.launch @qkv_0(%{{.*}}, %{{.*}}) grid [1, 1, 1] num_warps 1 num_stages 1 {library_call = {name = "matmul", operands = array<i64: 0, 1>, transpose_a = false, transpose_b = false}}
// TTIR: module @qkv_0 attributes {kg.library_call = {name = "matmul", operands = array<i64: 0, 1>, transpose_a = false, transpose_b = false}} {
// TTIR-NEXT: }
// With library=false, the same kernel is Triton's.
// OFF-LABEL: func.func @qkv
// OFF: kind = "matmul"
// OFF: kg.tile_dot
func.func @qkv(%a: tensor<512x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  %y = kg.kernel @qkv_0(%a, %b) : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  ^bb0(%x: tensor<512x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16>
    kg.yield %m : tensor<512x6144xf16>
  }
  return %y : tensor<512x6144xf16>
}

// -----

// A weight stored as (out, in), as torch's Linear keeps it: the transpose of
// an input is the call's transpose_b, not a computed operand. Batched
// operands (bf16) are one call too.
// CHECK-LABEL: func.func @linear_batched
// CHECK: config = {library = true}, {{.*}} kind = "library_matmul", library_call = {name = "matmul", operands = array<i64: 0, 1>, transpose_a = false, transpose_b = true}
// CHECK-NOT: kg.transpose
// CHECK: kg.yield
func.func @linear_batched(%a: tensor<2x512x1024xbf16>, %w: tensor<2x768x1024xbf16>) -> tensor<2x512x768xbf16> {
  %y = kg.kernel @linear_batched_0(%a, %w) : (tensor<2x512x1024xbf16>, tensor<2x768x1024xbf16>) -> tensor<2x512x768xbf16> {
  ^bb0(%x: tensor<2x512x1024xbf16>, %v: tensor<2x768x1024xbf16>):
    %t = kg.transpose %v [0, 2, 1] : tensor<2x768x1024xbf16> -> tensor<2x1024x768xbf16>
    %m = kg.matmul %x, %t : (tensor<2x512x1024xbf16>, tensor<2x1024x768xbf16>) -> tensor<2x512x768xbf16>
    kg.yield %m : tensor<2x512x768xbf16>
  }
  return %y : tensor<2x512x768xbf16>
}

// -----

// A bias added to every row (torch's addmm, with kg-decompose's promotion
// casts around the f16 sum): the call adds it in the library's epilogue, as
// eager PyTorch does (`bias = 2`, the kernel's third input).
// CHECK-LABEL: func.func @linear_bias
// CHECK: kind = "library_matmul", library_call = {bias = 2 : i64, name = "matmul", operands = array<i64: 0, 1>, transpose_a = false, transpose_b = false}
// CHECK-NEXT: ^bb0(%{{.*}}: memref<512x768xf16>, %{{.*}}: memref<768x2304xf16>, %{{.*}}: memref<2304xf16>, %{{.*}}: memref<512x2304xf16>):
// CHECK-NEXT: kg.yield
// TTIR-LABEL: func.func @linear_bias
// TTIR: kg.launch @linear_bias_0(%{{.*}}, %{{.*}}, %{{.*}}) grid [1, 1, 1] num_warps 1 num_stages 1 {library_call = {bias = 2 : i64,
func.func @linear_bias(%a: tensor<512x768xf16>, %w: tensor<768x2304xf16>, %b: tensor<2304xf16>) -> tensor<512x2304xf16> {
  %y = kg.kernel @linear_bias_0(%a, %w, %b) : (tensor<512x768xf16>, tensor<768x2304xf16>, tensor<2304xf16>) -> tensor<512x2304xf16> {
  ^bb0(%x: tensor<512x768xf16>, %v: tensor<768x2304xf16>, %c: tensor<2304xf16>):
    %m = kg.matmul %x, %v : (tensor<512x768xf16>, tensor<768x2304xf16>) -> tensor<512x2304xf16>
    %mf = kg.cast %m {kg.promotion} : tensor<512x2304xf16> to tensor<512x2304xf32>
    %cf = kg.cast %c {kg.promotion} : tensor<2304xf16> to tensor<2304xf32>
    %s = kg.add %mf, %cf : (tensor<512x2304xf32>, tensor<2304xf32>) -> tensor<512x2304xf32>
    %r = kg.cast %s {kg.promotion} : tensor<512x2304xf32> to tensor<512x2304xf16>
    kg.yield %r : tensor<512x2304xf16>
  }
  return %y : tensor<512x2304xf16>
}

// -----

// A residual (an addend of the product's own shape, not one row for all) is
// no bias the library adds: the kernel is Triton's, its epilogue the sum.
// CHECK-LABEL: func.func @linear_residual
// CHECK: kind = "matmul"
// CHECK: kg.tile_dot
func.func @linear_residual(%a: tensor<512x768xf16>, %w: tensor<768x2304xf16>, %h: tensor<512x2304xf16>) -> tensor<512x2304xf16> {
  %y = kg.kernel @linear_residual_0(%a, %w, %h) : (tensor<512x768xf16>, tensor<768x2304xf16>, tensor<512x2304xf16>) -> tensor<512x2304xf16> {
  ^bb0(%x: tensor<512x768xf16>, %v: tensor<768x2304xf16>, %c: tensor<512x2304xf16>):
    %m = kg.matmul %x, %v : (tensor<512x768xf16>, tensor<768x2304xf16>) -> tensor<512x2304xf16>
    %s = kg.add %m, %c : (tensor<512x2304xf16>, tensor<512x2304xf16>) -> tensor<512x2304xf16>
    kg.yield %s : tensor<512x2304xf16>
  }
  return %y : tensor<512x2304xf16>
}

// -----

// Fused: a relu after the matmul makes it no bare matmul; the fused Triton
// kernel stays, as kgc never splits a kernel to call the library.
// CHECK-LABEL: func.func @fused
// CHECK: kind = "matmul"
// CHECK-NOT: library
// CHECK: kg.tile_dot
// NO-BARE: kg-tile-library.mlir:[[# @LINE + 1]]:1: error: kg-tile: option library applies to no kernel: only library_matmul kernels have it
func.func @fused(%a: tensor<512x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  %y = kg.kernel @fused_0(%a, %b) : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  ^bb0(%x: tensor<512x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16>
    %r = kg.relu %m : tensor<512x6144xf16>
    kg.yield %r : tensor<512x6144xf16>
  }
  return %y : tensor<512x6144xf16>
}

// -----

// A decode's GEMV (16 rows): kgc's split-K Triton kernel beats cuBLAS there,
// so the rule keeps it Triton; library=true asks for the call anyway.
// CHECK-LABEL: func.func @decode
// CHECK: kind = "matmul"
// CHECK-NOT: library
// CHECK: kg.tile_dot
// ON-LABEL: func.func @decode
// ON: config = {library = true}, {{.*}} kind = "library_matmul"
func.func @decode(%a: tensor<16x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
  %y = kg.kernel @decode_0(%a, %b) : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
  ^bb0(%x: tensor<16x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16>
    kg.yield %m : tensor<16x6144xf16>
  }
  return %y : tensor<16x6144xf16>
}

// -----

// A Triton matmul knob on the kernel (a tile a user or the search chose) is
// a choice of Triton: the rule does not override it.
// CHECK-LABEL: func.func @tiled_by_hand
// CHECK: block_m = 64 : i64
// CHECK-SAME: kind = "matmul"
// CHECK-NOT: library
// CHECK: kg.tile_dot
func.func @tiled_by_hand(%a: tensor<512x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  %y = kg.kernel @tiled_by_hand_0(%a, %b) attributes {config = {block_m = 64}} : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16> {
  ^bb0(%x: tensor<512x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf16>
    kg.yield %m : tensor<512x6144xf16>
  }
  return %y : tensor<512x6144xf16>
}

// -----

// f16 operands with an f32 result, 2-d: torch.mm's out_dtype writes the
// f32 sum, so the library takes it.
// CHECK-LABEL: func.func @widening
// CHECK: kind = "library_matmul"
// CHECK-SAME: library_call = {name = "matmul", operands = array<i64: 0, 1>
// CHECK-NOT: kg.tile_dot
func.func @widening(%a: tensor<512x4096xf16>, %b: tensor<4096x6144xf16>) -> tensor<512x6144xf32> {
  %y = kg.kernel @widening_0(%a, %b) : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf32> {
  ^bb0(%x: tensor<512x4096xf16>, %w: tensor<4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<512x4096xf16>, tensor<4096x6144xf16>) -> tensor<512x6144xf32>
    kg.yield %m : tensor<512x6144xf32>
  }
  return %y : tensor<512x6144xf32>
}

// -----

// The same widening over a batch: the runtime calls torch.mm, which takes
// 2-d operands, for a widening product, so Triton computes this one.
// CHECK-LABEL: func.func @batched_widening
// CHECK: kind = "matmul"
// CHECK-NOT: library
// CHECK: kg.tile_dot
func.func @batched_widening(%a: tensor<2x512x4096xf16>, %b: tensor<2x4096x6144xf16>) -> tensor<2x512x6144xf32> {
  %y = kg.kernel @batched_widening_0(%a, %b) : (tensor<2x512x4096xf16>, tensor<2x4096x6144xf16>) -> tensor<2x512x6144xf32> {
  ^bb0(%x: tensor<2x512x4096xf16>, %w: tensor<2x4096x6144xf16>):
    %m = kg.matmul %x, %w : (tensor<2x512x4096xf16>, tensor<2x4096x6144xf16>) -> tensor<2x512x6144xf32>
    kg.yield %m : tensor<2x512x6144xf32>
  }
  return %y : tensor<2x512x6144xf32>
}
