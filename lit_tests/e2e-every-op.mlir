// Every graph op goes through every pass and Triton's backend down to
// cubin, without a GPU: one kernel graph per op family.
// RUN: kgc compile %s -o %t --emit cubin | FileCheck %s
// RUN: ls %t/kernels | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --input-file=%t/manifest.json --check-prefix=MANIFEST

// CHECK: kgc: compiled {{.*}}e2e-every-op.mlir for sm_90 down to cubin
// CHECK-DAG: @unary: 1 kernel(s)
// CHECK-DAG: @binary: 1 kernel(s)
// CHECK-DAG: @constants_and_casts: {{[1-9]}} kernel(s)
// CHECK-DAG: @matmuls: 3 kernel(s)
// CHECK-DAG: @reductions: {{[1-9]}} kernel(s)
// CHECK-DAG: @views: {{[1-9]}} kernel(s)
// CHECK-DAG: @kernel_graph_form: 1 kernel(s): add_relu
// FILES-DAG: unary_0_pointwise.cubin
// FILES-DAG: unary_0_pointwise.ptx
// FILES-DAG: unary_0_pointwise.llir
// FILES-DAG: unary_0_pointwise.ttgir
// FILES-DAG: unary_0_pointwise.ttir
// FILES-DAG: add_relu.cubin
// MANIFEST: "target": "sm_90"
// MANIFEST: "name": "unary_0_pointwise"

func.func @unary(%x: tensor<16x128xf16>) -> tensor<16x128xf16> {
  %0 = kg.exp %x : tensor<16x128xf16>
  %1 = kg.log %0 : tensor<16x128xf16>
  %2 = kg.sqrt %1 : tensor<16x128xf16>
  %3 = kg.rsqrt %2 : tensor<16x128xf16>
  %4 = kg.neg %3 : tensor<16x128xf16>
  %5 = kg.abs %4 : tensor<16x128xf16>
  %6 = kg.relu %5 : tensor<16x128xf16>
  %7 = kg.silu %6 : tensor<16x128xf16>
  %8 = kg.gelu %7 : tensor<16x128xf16>
  %9 = kg.gelu %8 approximate = tanh : tensor<16x128xf16>
  %10 = kg.sigmoid %9 : tensor<16x128xf16>
  %11 = kg.tanh %10 : tensor<16x128xf16>
  %12 = kg.square %11 : tensor<16x128xf16>
  %13 = kg.reciprocal %12 : tensor<16x128xf16>
  %14 = kg.clamp %13 min -1.0 max 1.0 : tensor<16x128xf16>
  %15 = kg.clamp %14 min 0.0 : tensor<16x128xf16>
  %16 = kg.clamp %15 max 6.0 : tensor<16x128xf16>
  return %16 : tensor<16x128xf16>
}

func.func @binary(%a: tensor<16x128xf32>, %b: tensor<128xf32>, %c: tensor<16x1xf32>) -> tensor<16x128xf32> {
  %0 = kg.add %a, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %1 = kg.sub %0, %c : (tensor<16x128xf32>, tensor<16x1xf32>) -> tensor<16x128xf32>
  %2 = kg.mul %c, %b : (tensor<16x1xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %3 = kg.div %1, %2 : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  %4 = kg.maximum %3, %a : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  %5 = kg.minimum %4, %a : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  %two = kg.constant 2.0 : tensor<f32>
  %6 = kg.pow %5, %two : (tensor<16x128xf32>, tensor<f32>) -> tensor<16x128xf32>
  return %6 : tensor<16x128xf32>
}

func.func @constants_and_casts(%x: tensor<4x8xf32>, %q: tensor<4x8xf8E4M3FN>) -> (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf16>) {
  %ninf = kg.constant 0xFFF0000000000000 : tensor<4x8xf32>
  %h = kg.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  %b = kg.cast %q : tensor<4x8xf8E4M3FN> to tensor<4x8xbf16>
  return %b, %ninf, %h : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xf16>
}

func.func @matmuls(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>, %x: tensor<8x16x64xf32>, %y: tensor<64x32xf32>,
                   %p: tensor<2x1x16x64xf8E4M3FN>, %q: tensor<3x64x32xf8E5M2>) -> (tensor<16x32xf16>, tensor<8x16x32xf32>, tensor<2x3x16x32xbf16>) {
  %0 = kg.matmul %a, %b : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  %1 = kg.matmul %x, %y precision = tf32 : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
  %2 = kg.matmul %p, %q : (tensor<2x1x16x64xf8E4M3FN>, tensor<3x64x32xf8E5M2>) -> tensor<2x3x16x32xbf16>
  return %0, %1, %2 : tensor<16x32xf16>, tensor<8x16x32xf32>, tensor<2x3x16x32xbf16>
}

func.func @reductions(%x: tensor<4x16x128xf16>, %w: tensor<128xf16>, %b: tensor<128xf16>) -> (tensor<4x16x128xf16>, tensor<4x16xf16>, tensor<1x16x1xf16>, tensor<4x128xf16>, tensor<f16>) {
  %0 = kg.reduce sum %x dims [2] : tensor<4x16x128xf16> -> tensor<4x16xf16>
  %1 = kg.reduce max %x dims [0, 2] keepdim : tensor<4x16x128xf16> -> tensor<1x16x1xf16>
  %2 = kg.reduce min %x dims [1] : tensor<4x16x128xf16> -> tensor<4x128xf16>
  %3 = kg.reduce mean %x dims [0, 1, 2] : tensor<4x16x128xf16> -> tensor<f16>
  %4 = kg.softmax %x dim 2 : tensor<4x16x128xf16>
  %5 = kg.rms_norm %4 weight %w normalized_shape [128] eps 1.0e-6 : (tensor<4x16x128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  %6 = kg.rms_norm %5 normalized_shape [16, 128] eps 1.0e-6 : (tensor<4x16x128xf16>) -> tensor<4x16x128xf16>
  %7 = kg.layer_norm %6 weight %w bias %b normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>, tensor<128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  %8 = kg.layer_norm %7 bias %b normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  %9 = kg.layer_norm %8 normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>) -> tensor<4x16x128xf16>
  return %9, %0, %1, %2, %3 : tensor<4x16x128xf16>, tensor<4x16xf16>, tensor<1x16x1xf16>, tensor<4x128xf16>, tensor<f16>
}

func.func @views(%x: tensor<16x128xf32>, %b: tensor<128xf32>, %y: tensor<16x32xf32>) -> (tensor<128x16xf32>, tensor<16x8x16xf32>, tensor<4x16x128xf32>, tensor<16x160xf32>, tensor<16x32xf32>) {
  %0 = kg.transpose %x [1, 0] : tensor<16x128xf32> -> tensor<128x16xf32>
  %1 = kg.reshape %x : tensor<16x128xf32> -> tensor<16x8x16xf32>
  %2 = kg.broadcast_to %b : tensor<128xf32> -> tensor<4x16x128xf32>
  %3 = kg.concat %x, %y dim 1 : (tensor<16x128xf32>, tensor<16x32xf32>) -> tensor<16x160xf32>
  %4 = kg.slice %x offsets [0, 64] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0, %1, %2, %3, %4 : tensor<128x16xf32>, tensor<16x8x16xf32>, tensor<4x16x128xf32>, tensor<16x160xf32>, tensor<16x32xf32>
}

func.func @kernel_graph_form(%a: tensor<16x128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  %y = kg.kernel @add_relu(%a, %b) attributes {config = {num_warps = 4}} : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32> {
  ^bb0(%x: tensor<16x128xf32>, %bias: tensor<128xf32>):
    %s = kg.add %x, %bias : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
    %r = kg.relu %s : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  return %y : tensor<16x128xf32>
}
