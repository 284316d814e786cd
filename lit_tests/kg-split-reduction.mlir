// RUN: kgc-opt %s --kg-split-reduction | FileCheck %s
// RUN: kgc-opt %s --kg-split-reduction='target=87' | FileCheck %s --check-prefix=ORIN

// A per-head norm's weight gradient (Qwen3's query norm): 8192 rows into 64
// columns. Whole, its kernel has 8 programs of 8 columns; the first stage
// keeps batch and tokens (1024 x 8 programs) and sums the 8 heads, the
// second sums the 1024 partial rows.
// CHECK-LABEL: func.func @per_head_norm_weight
// CHECK: %[[P:.*]] = kg.reduce sum %arg0 dims [2] keepdim : tensor<4x256x8x64xf32> -> tensor<4x256x1x64xf32>
// CHECK: %[[W:.*]] = kg.reduce sum %[[P]] dims [0, 1, 2] keepdim : tensor<4x256x1x64xf32> -> tensor<1x1x1x64xf32>
// CHECK: return %[[W]]
// A Jetson Orin has 16 SMs, for which the 8 programs of the whole reduction
// are one for every 2 SMs: it stays whole.
// ORIN-LABEL: func.func @per_head_norm_weight
// ORIN-NEXT: kg.reduce sum %arg0 dims [0, 1, 2] keepdim : tensor<4x256x8x64xf32> -> tensor<1x1x1x64xf32>
// ORIN-NEXT: return
func.func @per_head_norm_weight(%x: tensor<4x256x8x64xf32>) -> tensor<1x1x1x64xf32> {
  %w = kg.reduce sum %x dims [0, 1, 2] keepdim : tensor<4x256x8x64xf32> -> tensor<1x1x1x64xf32>
  return %w : tensor<1x1x1x64xf32>
}

// Max and min split alike; without keepdim the second stage drops the axes.
// CHECK-LABEL: func.func @largest_per_column
// CHECK: %[[P:.*]] = kg.reduce max %arg0 dims [2] keepdim : tensor<4x256x8x64xf32> -> tensor<4x256x1x64xf32>
// CHECK: kg.reduce max %[[P]] dims [0, 1, 2] : tensor<4x256x1x64xf32> -> tensor<64xf32>
func.func @largest_per_column(%x: tensor<4x256x8x64xf32>) -> tensor<64xf32> {
  %m = kg.reduce max %x dims [0, 1, 2] : tensor<4x256x8x64xf32> -> tensor<64xf32>
  return %m : tensor<64xf32>
}

// Llama's norm weight: 64 programs of 8 columns over 1024 rows already have
// one for every 2 SMs, and a second launch would cost what it saves.
// CHECK-LABEL: func.func @norm_weight_of_many_columns
// CHECK-NEXT: kg.reduce sum %arg0 dims [0, 1] keepdim : tensor<4x256x512xf32> -> tensor<1x1x512xf32>
// CHECK-NEXT: return
func.func @norm_weight_of_many_columns(%x: tensor<4x256x512xf32>) -> tensor<1x1x512xf32> {
  %w = kg.reduce sum %x dims [0, 1] keepdim : tensor<4x256x512xf32> -> tensor<1x1x512xf32>
  return %w : tensor<1x1x512xf32>
}

// One reduced axis: there is no outer axis to keep (a reshape splitting it
// would cut the reduction from the ops that compute its input).
// CHECK-LABEL: func.func @tokens_flattened
// CHECK-NEXT: kg.reduce sum %arg0 dims [0] : tensor<8192x64xf32> -> tensor<64xf32>
// CHECK-NEXT: return
func.func @tokens_flattened(%x: tensor<8192x64xf32>) -> tensor<64xf32> {
  %w = kg.reduce sum %x dims [0] : tensor<8192x64xf32> -> tensor<64xf32>
  return %w : tensor<64xf32>
}

// The axes of one element do not count: 1024 rows over one real axis.
// CHECK-LABEL: func.func @second_stage_again
// CHECK-NEXT: kg.reduce sum %arg0 dims [0, 1, 2] keepdim : tensor<1x1024x1x64xf32> -> tensor<1x1x1x64xf32>
// CHECK-NEXT: return
func.func @second_stage_again(%x: tensor<1x1024x1x64xf32>) -> tensor<1x1x1x64xf32> {
  %w = kg.reduce sum %x dims [0, 1, 2] keepdim : tensor<1x1024x1x64xf32> -> tensor<1x1x1x64xf32>
  return %w : tensor<1x1x1x64xf32>
}

// 17 x 30 rows: fewer than a second launch is worth.
// CHECK-LABEL: func.func @few_rows
// CHECK-NEXT: kg.reduce sum %arg0 dims [0, 1] : tensor<17x30x64xf32> -> tensor<64xf32>
func.func @few_rows(%x: tensor<17x30x64xf32>) -> tensor<64xf32> {
  %w = kg.reduce sum %x dims [0, 1] : tensor<17x30x64xf32> -> tensor<64xf32>
  return %w : tensor<64xf32>
}

// A reduction along the last axis (a row's sum) has a program per row.
// CHECK-LABEL: func.func @along_rows
// CHECK-NEXT: kg.reduce sum %arg0 dims [1, 2] : tensor<4x256x64xf32> -> tensor<4xf32>
func.func @along_rows(%x: tensor<4x256x64xf32>) -> tensor<4xf32> {
  %w = kg.reduce sum %x dims [1, 2] : tensor<4x256x64xf32> -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// Half floats: the partial sums would be rounded to bf16 (kg-decompose
// widens such a reduction to f32 first, and the f32 one splits).
// CHECK-LABEL: func.func @half_floats
// CHECK-NEXT: kg.reduce sum %arg0 dims [0, 1, 2] : tensor<4x256x8x64xbf16> -> tensor<64xbf16>
func.func @half_floats(%x: tensor<4x256x8x64xbf16>) -> tensor<64xbf16> {
  %w = kg.reduce sum %x dims [0, 1, 2] : tensor<4x256x8x64xbf16> -> tensor<64xbf16>
  return %w : tensor<64xbf16>
}

// A dynamic token count: the programs it gives are known only at launch.
// CHECK-LABEL: func.func @dynamic_tokens
// CHECK-NEXT: kg.reduce sum %arg0 dims [0, 1, 2] : tensor<4x?x8x64xf32> -> tensor<64xf32>
func.func @dynamic_tokens(%x: tensor<4x?x8x64xf32>) -> tensor<64xf32> {
  %w = kg.reduce sum %x dims [0, 1, 2] : tensor<4x?x8x64xf32> -> tensor<64xf32>
  return %w : tensor<64xf32>
}

// Inside a kernel the partition is made: the pass leaves kernels alone.
// CHECK-LABEL: func.func @in_a_kernel
// CHECK: kg.kernel
// CHECK-NEXT: ^bb0
// CHECK-NEXT: kg.reduce sum %{{.*}} dims [0, 1, 2] : tensor<4x256x8x64xf32> -> tensor<64xf32>
func.func @in_a_kernel(%x: tensor<4x256x8x64xf32>) -> tensor<64xf32> {
  %r = kg.kernel @k(%x) : (tensor<4x256x8x64xf32>) -> tensor<64xf32> {
  ^bb0(%a: tensor<4x256x8x64xf32>):
    %w = kg.reduce sum %a dims [0, 1, 2] : tensor<4x256x8x64xf32> -> tensor<64xf32>
    kg.yield %w : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
