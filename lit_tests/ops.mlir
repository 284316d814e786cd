// Every kg op prints, parses and prints again identically, in the custom
// form and in the generic form.
// RUN: kgc-opt %s > %t.1.mlir
// RUN: kgc-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: kgc-opt %s --mlir-print-op-generic | kgc-opt > %t.3.mlir
// RUN: diff %t.1.mlir %t.3.mlir
// RUN: FileCheck %s --input-file=%t.1.mlir

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<16x128xf16>) -> tensor<16x128xf16> {
  // CHECK: kg.exp %{{.*}} : tensor<16x128xf16>
  %0 = kg.exp %x : tensor<16x128xf16>
  // CHECK: kg.log
  %1 = kg.log %0 : tensor<16x128xf16>
  // CHECK: kg.sqrt
  %2 = kg.sqrt %1 : tensor<16x128xf16>
  // CHECK: kg.rsqrt
  %3 = kg.rsqrt %2 : tensor<16x128xf16>
  // CHECK: kg.neg
  %4 = kg.neg %3 : tensor<16x128xf16>
  // CHECK: kg.abs
  %5 = kg.abs %4 : tensor<16x128xf16>
  // CHECK: kg.relu
  %6 = kg.relu %5 : tensor<16x128xf16>
  // CHECK: kg.silu
  %7 = kg.silu %6 : tensor<16x128xf16>
  // CHECK: kg.gelu %{{.*}} : tensor<16x128xf16>
  %8 = kg.gelu %7 : tensor<16x128xf16>
  // CHECK: kg.gelu %{{.*}} approximate = tanh : tensor<16x128xf16>
  %9 = kg.gelu %8 approximate = tanh : tensor<16x128xf16>
  // CHECK: kg.sigmoid
  %10 = kg.sigmoid %9 : tensor<16x128xf16>
  // CHECK: kg.tanh
  %11 = kg.tanh %10 : tensor<16x128xf16>
  // CHECK: kg.square
  %12 = kg.square %11 : tensor<16x128xf16>
  // CHECK: kg.reciprocal
  %13 = kg.reciprocal %12 : tensor<16x128xf16>
  // CHECK: kg.clamp %{{.*}} min -1.000000e+00 max 1.000000e+00 : tensor<16x128xf16>
  %14 = kg.clamp %13 min -1.0 max 1.0 : tensor<16x128xf16>
  // CHECK: kg.clamp %{{.*}} min 0.000000e+00 : tensor<16x128xf16>
  %15 = kg.clamp %14 min 0.0 : tensor<16x128xf16>
  // CHECK: kg.clamp %{{.*}} max 6.000000e+00 : tensor<16x128xf16>
  %16 = kg.clamp %15 max 6.0 : tensor<16x128xf16>
  // CHECK: kg.sin %{{.*}} : tensor<16x128xf16>
  %17 = kg.sin %16 : tensor<16x128xf16>
  // CHECK: kg.cos %{{.*}} : tensor<16x128xf16>
  %18 = kg.cos %17 : tensor<16x128xf16>
  return %18 : tensor<16x128xf16>
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<16x128xf32>, %b: tensor<128xf32>, %c: tensor<16x1xf32>) -> tensor<16x128xf32> {
  // CHECK: kg.add %{{.*}}, %{{.*}} : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  %0 = kg.add %a, %b : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  // CHECK: kg.sub
  %1 = kg.sub %0, %c : (tensor<16x128xf32>, tensor<16x1xf32>) -> tensor<16x128xf32>
  // CHECK: kg.mul
  %2 = kg.mul %c, %b : (tensor<16x1xf32>, tensor<128xf32>) -> tensor<16x128xf32>
  // CHECK: kg.div
  %3 = kg.div %1, %2 : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  // CHECK: kg.maximum
  %4 = kg.maximum %3, %a : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  // CHECK: kg.minimum
  %5 = kg.minimum %4, %a : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  // CHECK: kg.constant 2.000000e+00 : tensor<f32>
  %two = kg.constant 2.0 : tensor<f32>
  // CHECK: kg.pow %{{.*}}, %{{.*}} : (tensor<16x128xf32>, tensor<f32>) -> tensor<16x128xf32>
  %6 = kg.pow %5, %two : (tensor<16x128xf32>, tensor<f32>) -> tensor<16x128xf32>
  return %6 : tensor<16x128xf32>
}

// CHECK-LABEL: func.func @constants_and_casts
func.func @constants_and_casts(%x: tensor<4x8xf32>, %q: tensor<4x8xf8E4M3FN>) -> tensor<4x8xbf16> {
  // CHECK: kg.constant 0xFFF0000000000000 : tensor<4x8xf32>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<4x8xf32>
  // CHECK: kg.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
  %h = kg.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  // CHECK: kg.cast %{{.*}} : tensor<4x8xf8E4M3FN> to tensor<4x8xbf16>
  %b = kg.cast %q : tensor<4x8xf8E4M3FN> to tensor<4x8xbf16>
  return %b : tensor<4x8xbf16>
}

// CHECK-LABEL: func.func @integers_and_booleans
func.func @integers_and_booleans(%x: tensor<16x16xf16>, %n: tensor<16xi64>, %b: tensor<16x16xi1>) -> (tensor<16x16xf16>, tensor<16xi64>, tensor<16x16xi1>) {
  // CHECK: kg.iota dim 0 : tensor<16x1xi32>
  %rows = kg.iota dim 0 : tensor<16x1xi32>
  // A start of 0 is the default and prints elided.
  // CHECK: kg.iota dim 1 : tensor<1x16xi32>
  %cols = kg.iota dim 1 start 0 : tensor<1x16xi32>
  // CHECK: kg.iota dim 0 start 64 : tensor<16xi64>
  %pos = kg.iota dim 0 start 64 : tensor<16xi64>
  // CHECK: kg.iota dim 1 start -3 : tensor<2x16xf32>
  %fpos = kg.iota dim 1 start -3 : tensor<2x16xf32>
  // CHECK: kg.cmp ge %{{.*}}, %{{.*}} : (tensor<16x1xi32>, tensor<1x16xi32>) -> tensor<16x16xi1>
  %causal = kg.cmp ge %rows, %cols : (tensor<16x1xi32>, tensor<1x16xi32>) -> tensor<16x16xi1>
  %zero = kg.constant 0.0 : tensor<f16>
  // CHECK: kg.cmp ne %{{.*}}, %{{.*}} : (tensor<16x16xf16>, tensor<f16>) -> tensor<16x16xi1>
  %nonzero = kg.cmp ne %x, %zero : (tensor<16x16xf16>, tensor<f16>) -> tensor<16x16xi1>
  // CHECK: kg.logical_and %{{.*}}, %{{.*}} : (tensor<16x16xi1>, tensor<16x16xi1>) -> tensor<16x16xi1>
  %both = kg.logical_and %causal, %nonzero : (tensor<16x16xi1>, tensor<16x16xi1>) -> tensor<16x16xi1>
  // CHECK: kg.logical_or
  %either = kg.logical_or %both, %b : (tensor<16x16xi1>, tensor<16x16xi1>) -> tensor<16x16xi1>
  // CHECK: kg.logical_xor
  %one = kg.logical_xor %either, %b : (tensor<16x16xi1>, tensor<16x16xi1>) -> tensor<16x16xi1>
  // CHECK: kg.logical_not %{{.*}} : tensor<16x16xi1>
  %not = kg.logical_not %one : tensor<16x16xi1>
  // CHECK: kg.constant 0xFFF0000000000000 : tensor<f16>
  %ninf = kg.constant 0xFFF0000000000000 : tensor<f16>
  // CHECK: kg.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x16xi1>, tensor<16x16xf16>, tensor<f16>) -> tensor<16x16xf16>
  %masked = kg.select %not, %x, %ninf : (tensor<16x16xi1>, tensor<16x16xf16>, tensor<f16>) -> tensor<16x16xf16>
  // CHECK: kg.constant 7.000000e+00 : tensor<i64>
  %seven = kg.constant 7.0 : tensor<i64>
  // CHECK: kg.add %{{.*}}, %{{.*}} : (tensor<16xi64>, tensor<i64>) -> tensor<16xi64>
  %s = kg.add %n, %seven : (tensor<16xi64>, tensor<i64>) -> tensor<16xi64>
  // CHECK: kg.sub
  %d = kg.sub %s, %pos : (tensor<16xi64>, tensor<16xi64>) -> tensor<16xi64>
  // CHECK: kg.mul
  %m = kg.mul %d, %d : (tensor<16xi64>, tensor<16xi64>) -> tensor<16xi64>
  // CHECK: kg.maximum
  %hi = kg.maximum %m, %n : (tensor<16xi64>, tensor<16xi64>) -> tensor<16xi64>
  // CHECK: kg.minimum
  %lo = kg.minimum %hi, %s : (tensor<16xi64>, tensor<16xi64>) -> tensor<16xi64>
  // CHECK: kg.neg %{{.*}} : tensor<16xi64>
  %neg = kg.neg %lo : tensor<16xi64>
  // CHECK: kg.abs %{{.*}} : tensor<16xi64>
  %abs = kg.abs %neg : tensor<16xi64>
  // CHECK: kg.constant 1.000000e+00 : tensor<i1>
  %true = kg.constant 1.0 : tensor<i1>
  // CHECK: kg.cast %{{.*}} : tensor<16x16xi1> to tensor<16x16xf32>
  %f = kg.cast %not : tensor<16x16xi1> to tensor<16x16xf32>
  // CHECK: kg.cast %{{.*}} : tensor<16x16xf32> to tensor<16x16xi32>
  %i = kg.cast %f : tensor<16x16xf32> to tensor<16x16xi32>
  // CHECK: kg.cast %{{.*}} : tensor<16x16xi32> to tensor<16x16xi1>
  %back = kg.cast %i : tensor<16x16xi32> to tensor<16x16xi1>
  %both2 = kg.logical_and %back, %true : (tensor<16x16xi1>, tensor<i1>) -> tensor<16x16xi1>
  return %masked, %abs, %both2 : tensor<16x16xf16>, tensor<16xi64>, tensor<16x16xi1>
}

// CHECK-LABEL: func.func @matmuls
func.func @matmuls(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>, %x: tensor<8x16x64xf32>, %y: tensor<64x32xf32>,
                   %p: tensor<2x1x16x64xf8E4M3FN>, %q: tensor<3x64x32xf8E5M2>) -> tensor<16x32xf16> {
  // CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  %0 = kg.matmul %a, %b : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  // CHECK: kg.matmul %{{.*}}, %{{.*}} precision = tf32 : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
  %1 = kg.matmul %x, %y precision = tf32 : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
  // CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<2x1x16x64xf8E4M3FN>, tensor<3x64x32xf8E5M2>) -> tensor<2x3x16x32xbf16>
  %2 = kg.matmul %p, %q : (tensor<2x1x16x64xf8E4M3FN>, tensor<3x64x32xf8E5M2>) -> tensor<2x3x16x32xbf16>
  // CHECK: kg.matmul %{{.*}}, %{{.*}} precision = fast_accum : (tensor<2x1x16x64xf8E4M3FN>, tensor<3x64x32xf8E5M2>) -> tensor<2x3x16x32xf32>
  %3 = kg.matmul %p, %q precision = fast_accum : (tensor<2x1x16x64xf8E4M3FN>, tensor<3x64x32xf8E5M2>) -> tensor<2x3x16x32xf32>
  return %0 : tensor<16x32xf16>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x16x128xf16>, %w: tensor<128xf16>, %b: tensor<128xf16>) -> tensor<4x16x128xf16> {
  // CHECK: kg.reduce sum %{{.*}} dims [2] : tensor<4x16x128xf16> -> tensor<4x16xf16>
  %0 = kg.reduce sum %x dims [2] : tensor<4x16x128xf16> -> tensor<4x16xf16>
  // CHECK: kg.reduce max %{{.*}} dims [0, 2] keepdim : tensor<4x16x128xf16> -> tensor<1x16x1xf16>
  %1 = kg.reduce max %x dims [0, 2] keepdim : tensor<4x16x128xf16> -> tensor<1x16x1xf16>
  // CHECK: kg.reduce min
  %2 = kg.reduce min %x dims [1] : tensor<4x16x128xf16> -> tensor<4x128xf16>
  // CHECK: kg.reduce mean
  %3 = kg.reduce mean %x dims [0, 1, 2] : tensor<4x16x128xf16> -> tensor<f16>
  // CHECK: kg.softmax %{{.*}} dim 2 : tensor<4x16x128xf16>
  %4 = kg.softmax %x dim 2 : tensor<4x16x128xf16>
  // CHECK: kg.rms_norm %{{.*}} weight %{{.*}} normalized_shape [128] eps 9.9999999999999995E-7 : (tensor<4x16x128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  %5 = kg.rms_norm %4 weight %w normalized_shape [128] eps 1.0e-6 : (tensor<4x16x128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  // CHECK: kg.rms_norm %{{.*}} normalized_shape [16, 128] eps
  %6 = kg.rms_norm %5 normalized_shape [16, 128] eps 1.0e-6 : (tensor<4x16x128xf16>) -> tensor<4x16x128xf16>
  // CHECK: kg.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} normalized_shape [128] eps
  %7 = kg.layer_norm %6 weight %w bias %b normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>, tensor<128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  // CHECK: kg.layer_norm %{{.*}} bias %{{.*}} normalized_shape [128]
  %8 = kg.layer_norm %7 bias %b normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>, tensor<128xf16>) -> tensor<4x16x128xf16>
  // CHECK: kg.layer_norm %{{.*}} normalized_shape [128]
  %9 = kg.layer_norm %8 normalized_shape [128] eps 1.0e-5 : (tensor<4x16x128xf16>) -> tensor<4x16x128xf16>
  return %9 : tensor<4x16x128xf16>
}

// CHECK-LABEL: func.func @views
func.func @views(%x: tensor<16x128xf32>, %b: tensor<128xf32>, %y: tensor<16x32xf32>) -> tensor<128x16xf32> {
  // CHECK: kg.transpose %{{.*}} [1, 0] : tensor<16x128xf32> -> tensor<128x16xf32>
  %0 = kg.transpose %x [1, 0] : tensor<16x128xf32> -> tensor<128x16xf32>
  // CHECK: kg.reshape %{{.*}} : tensor<16x128xf32> -> tensor<16x8x16xf32>
  %1 = kg.reshape %x : tensor<16x128xf32> -> tensor<16x8x16xf32>
  // CHECK: kg.broadcast_to %{{.*}} : tensor<128xf32> -> tensor<4x16x128xf32>
  %2 = kg.broadcast_to %b : tensor<128xf32> -> tensor<4x16x128xf32>
  // CHECK: kg.concat %{{.*}}, %{{.*}} dim 1 : (tensor<16x128xf32>, tensor<16x32xf32>) -> tensor<16x160xf32>
  %3 = kg.concat %x, %y dim 1 : (tensor<16x128xf32>, tensor<16x32xf32>) -> tensor<16x160xf32>
  // CHECK: kg.slice %{{.*}} offsets [0, 64] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
  %4 = kg.slice %x offsets [0, 64] strides [1, 2] : tensor<16x128xf32> -> tensor<16x32xf32>
  return %0 : tensor<128x16xf32>
}

// A function's dynamic extents (`?`) all stand for one size given by each
// call: elementwise ops, broadcasts against 1, products, reductions over
// other dimensions, norms, views that keep the `?` whole, gathers.
// CHECK-LABEL: func.func @dynamic_extents
func.func @dynamic_extents(%x: tensor<?x128xf16>, %g: tensor<128xf16>, %w: tensor<128x64xf16>,
                           %bias: tensor<1x64xf16>, %table: tensor<2048x128xf16>,
                           %ids: tensor<?xi64>) -> tensor<?x64xf16> {
  // CHECK: kg.rms_norm %{{.*}} weight %{{.*}} normalized_shape [128] eps 9.9999999999999995E-7 : (tensor<?x128xf16>, tensor<128xf16>) -> tensor<?x128xf16>
  %0 = kg.rms_norm %x weight %g normalized_shape [128] eps 1.0e-6 : (tensor<?x128xf16>, tensor<128xf16>) -> tensor<?x128xf16>
  // CHECK: kg.matmul %{{.*}}, %{{.*}} : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
  %1 = kg.matmul %0, %w : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
  // CHECK: kg.add %{{.*}}, %{{.*}} : (tensor<?x64xf16>, tensor<1x64xf16>) -> tensor<?x64xf16>
  %2 = kg.add %1, %bias : (tensor<?x64xf16>, tensor<1x64xf16>) -> tensor<?x64xf16>
  // CHECK: kg.softmax %{{.*}} dim 1 : tensor<?x64xf16>
  %3 = kg.softmax %2 dim 1 : tensor<?x64xf16>
  // CHECK: kg.reduce sum %{{.*}} dims [1] keepdim : tensor<?x64xf16> -> tensor<?x1xf16>
  %4 = kg.reduce sum %3 dims [1] keepdim : tensor<?x64xf16> -> tensor<?x1xf16>
  // CHECK: kg.reshape %{{.*}} : tensor<?x64xf16> -> tensor<?x4x16xf16>
  %5 = kg.reshape %3 : tensor<?x64xf16> -> tensor<?x4x16xf16>
  // CHECK: kg.transpose %{{.*}} [1, 0, 2] : tensor<?x4x16xf16> -> tensor<4x?x16xf16>
  %6 = kg.transpose %5 [1, 0, 2] : tensor<?x4x16xf16> -> tensor<4x?x16xf16>
  // CHECK: kg.slice %{{.*}} offsets [1, 0, 0] strides [2, 1, 1] : tensor<4x?x16xf16> -> tensor<2x?x16xf16>
  %7 = kg.slice %6 offsets [1, 0, 0] strides [2, 1, 1] : tensor<4x?x16xf16> -> tensor<2x?x16xf16>
  // CHECK: kg.concat %{{.*}}, %{{.*}} dim 0 : (tensor<4x?x16xf16>, tensor<2x?x16xf16>) -> tensor<6x?x16xf16>
  %8 = kg.concat %6, %7 dim 0 : (tensor<4x?x16xf16>, tensor<2x?x16xf16>) -> tensor<6x?x16xf16>
  // CHECK: kg.broadcast_to %{{.*}} : tensor<?x1xf16> -> tensor<2x?x64xf16>
  %9 = kg.broadcast_to %4 : tensor<?x1xf16> -> tensor<2x?x64xf16>
  // CHECK: kg.gather %{{.*}}[%{{.*}}] dim 0 : (tensor<2048x128xf16>, tensor<?xi64>) -> tensor<?x128xf16>
  %10 = kg.gather %table[%ids] dim 0 : (tensor<2048x128xf16>, tensor<?xi64>) -> tensor<?x128xf16>
  return %3 : tensor<?x64xf16>
}

// CHECK-LABEL: func.func @indexed
func.func @indexed(%table: tensor<2048x512xf16>, %ids: tensor<16xi64>, %rows: tensor<16x512xf16>,
                   %cache: tensor<1x4x512x64xbf16>, %at: tensor<1xi32>, %k: tensor<1x4x1x64xbf16>) -> tensor<16x512xf16> {
  // CHECK: kg.gather %{{.*}}[%{{.*}}] dim 0 : (tensor<2048x512xf16>, tensor<16xi64>) -> tensor<16x512xf16>
  %0 = kg.gather %table[%ids] dim 0 : (tensor<2048x512xf16>, tensor<16xi64>) -> tensor<16x512xf16>
  // CHECK: kg.scatter add %{{.*}}[%{{.*}}], %{{.*}} dim 0 : (tensor<2048x512xf16>, tensor<16xi64>, tensor<16x512xf16>) -> tensor<2048x512xf16>
  %1 = kg.scatter add %table[%ids], %rows dim 0 : (tensor<2048x512xf16>, tensor<16xi64>, tensor<16x512xf16>) -> tensor<2048x512xf16>
  // CHECK: kg.scatter assign %{{.*}}[%{{.*}}], %{{.*}} dim 2 : (tensor<1x4x512x64xbf16>, tensor<1xi32>, tensor<1x4x1x64xbf16>) -> tensor<1x4x512x64xbf16>
  %2 = kg.scatter assign %cache[%at], %k dim 2 : (tensor<1x4x512x64xbf16>, tensor<1xi32>, tensor<1x4x1x64xbf16>) -> tensor<1x4x512x64xbf16>
  return %0 : tensor<16x512xf16>
}

// CHECK-LABEL: func.func @kernel_graph_form
func.func @kernel_graph_form(%a: tensor<16x128xf32>, %b: tensor<128xf32>) -> tensor<16x128xf32> {
  // CHECK: kg.kernel @add_relu(%{{.*}}, %{{.*}}) attributes {config = {num_warps = 4 : i64}} : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32> {
  // CHECK: ^bb0(%{{.*}}: tensor<16x128xf32>, %{{.*}}: tensor<128xf32>):
  // CHECK: kg.yield %{{.*}} : tensor<16x128xf32>
  %y = kg.kernel @add_relu(%a, %b) attributes {config = {num_warps = 4}} : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32> {
  ^bb0(%x: tensor<16x128xf32>, %bias: tensor<128xf32>):
    %s = kg.add %x, %bias : (tensor<16x128xf32>, tensor<128xf32>) -> tensor<16x128xf32>
    %r = kg.relu %s : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  return %y : tensor<16x128xf32>
}

// CHECK-LABEL: func.func @kernel_tiled_form
func.func @kernel_tiled_form(%a: tensor<17x1000xf32>, %w: tensor<1000x64xf16>) -> tensor<17x64xf32> {
  // CHECK: kg.kernel @tiled(%{{.*}}, %{{.*}}) attributes {grid = array<i64: 2, 1, 1>, scalars = array<i64: 17>}
  // CHECK: ^bb0(%{{.*}}: memref<17x1000xf32>, %{{.*}}: memref<1000x64xf16>, %{{.*}}: memref<17x64xf32>):
  %y = kg.kernel @tiled(%a, %w) attributes {grid = array<i64: 2, 1, 1>, scalars = array<i64: 17>} : (tensor<17x1000xf32>, tensor<1000x64xf16>) -> tensor<17x64xf32> {
  ^bb0(%x: memref<17x1000xf32>, %wb: memref<1000x64xf16>, %out: memref<17x64xf32>):
    // CHECK: kg.program_id 0 : i32
    %pid = kg.program_id 0 : i32
    // CHECK: kg.scalar_arg 0 : i32
    %rows = kg.scalar_arg 0 : i32
    %c0 = arith.constant 0 : i32
    %c16 = arith.constant 16 : i32
    %row = arith.muli %pid, %c16 : i32
    // CHECK: memref.reinterpret_cast
    %xv = memref.reinterpret_cast %x to offset: [0], sizes: [17, 1000, 64], strides: [1000, 1, 0] : memref<17x1000xf32> to memref<17x1000x64xf32, strided<[1000, 1, 0]>>
    // CHECK: kg.tile_mask [%{{.*}}, %{{.*}}, %{{.*}}] lower [0, 0, 0] upper [17, 1000, 1] : tensor<16x32x1xi1>
    %m = kg.tile_mask [%row, %c0, %c0] lower [0, 0, 0] upper [17, 1000, 1] : tensor<16x32x1xi1>
    // CHECK: kg.tile_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] mask %{{.*}} padding 0.000000e+00 : memref<17x1000x64xf32, strided<[1000, 1, 0]>> -> tensor<16x32x1xf32>
    %t = kg.tile_load %xv[%row, %c0, %c0] mask %m padding 0.0 : memref<17x1000x64xf32, strided<[1000, 1, 0]>> -> tensor<16x32x1xf32>
    %wv = memref.reinterpret_cast %wb to offset: [0], sizes: [17, 1000, 64], strides: [0, 64, 1] : memref<1000x64xf16> to memref<17x1000x64xf16, strided<[0, 64, 1]>>
    // CHECK: kg.tile_load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<17x1000x64xf16, strided<[0, 64, 1]>> -> tensor<1x32x64xf16>
    %wt = kg.tile_load %wv[%c0, %c0, %c0] : memref<17x1000x64xf16, strided<[0, 64, 1]>> -> tensor<1x32x64xf16>
    %a16 = kg.cast %t : tensor<16x32x1xf32> to tensor<16x32x1xf16>
    %acc0 = kg.constant 0.0 : tensor<16x1x64xf32>
    // CHECK: kg.tile_range %{{.*}} axis 2 : tensor<1x1x64xi32>
    %lanes = kg.tile_range %row axis 2 : tensor<1x1x64xi32>
    // CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x32x1xf16>, tensor<1x32x64xf16>, tensor<16x1x64xf32>) -> tensor<16x1x64xf32>
    %acc = kg.tile_dot %a16, %wt, %acc0 : (tensor<16x32x1xf16>, tensor<1x32x64xf16>, tensor<16x1x64xf32>) -> tensor<16x1x64xf32>
    %zero = kg.constant 0.0 : tensor<1x1x1xf32>
    // CHECK: kg.tile_select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x32x1xi1>, tensor<16x1x64xf32>, tensor<1x1x1xf32>) -> tensor<16x32x64xf32>
    %sel = kg.tile_select %m, %acc, %zero : (tensor<16x32x1xi1>, tensor<16x1x64xf32>, tensor<1x1x1xf32>) -> tensor<16x32x64xf32>
    %ov = memref.reinterpret_cast %out to offset: [0], sizes: [17, 1, 64], strides: [64, 0, 1] : memref<17x64xf32> to memref<17x1x64xf32, strided<[64, 0, 1]>>
    %om = kg.tile_mask [%row, %c0, %c0] lower [0, 0, 0] upper [17, 1, 64] : tensor<16x1x64xi1>
    // CHECK: kg.tile_store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] mask %{{.*}} : tensor<16x1x64xf32>, memref<17x1x64xf32, strided<[64, 0, 1]>>
    kg.tile_store %acc, %ov[%row, %c0, %c0] mask %om : tensor<16x1x64xf32>, memref<17x1x64xf32, strided<[64, 0, 1]>>
    // CHECK: kg.yield
    kg.yield
  }
  return %y : tensor<17x64xf32>
}

// CHECK-LABEL: func.func @tile_gather
func.func @tile_gather(%table: tensor<50x64xf16>, %ids: tensor<16xi64>) -> tensor<16x64xf16> {
  %y = kg.kernel @gathered(%table, %ids) attributes {grid = array<i64: 1, 1, 1>} : (tensor<50x64xf16>, tensor<16xi64>) -> tensor<16x64xf16> {
  ^bb0(%t: memref<50x64xf16>, %i: memref<16xi64>, %out: memref<16x64xf16>):
    %c0 = arith.constant 0 : i32
    %iv = memref.reinterpret_cast %i to offset: [0], sizes: [16, 1], strides: [1, 0] : memref<16xi64> to memref<16x1xi64, strided<[1, 0]>>
    %rows = kg.tile_load %iv[%c0, %c0] : memref<16x1xi64, strided<[1, 0]>> -> tensor<16x1xi64>
    %m = kg.tile_mask [%c0, %c0] lower [0, 0] upper [16, 60] : tensor<16x64xi1>
    // CHECK: kg.tile_gather %{{.*}}[%{{.*}}, %{{.*}}] indices %{{.*}} dim 0 : memref<50x64xf16>, tensor<16x1xi64> -> tensor<16x64xf16>
    %g = kg.tile_gather %t[%c0, %c0] indices %rows dim 0 : memref<50x64xf16>, tensor<16x1xi64> -> tensor<16x64xf16>
    // CHECK: kg.tile_gather %{{.*}}[%{{.*}}, %{{.*}}] indices %{{.*}} dim 0 mask %{{.*}} padding 0.000000e+00 : memref<50x64xf16>, tensor<16x1xi64> -> tensor<16x64xf16>
    %h = kg.tile_gather %t[%c0, %c0] indices %rows dim 0 mask %m padding 0.0 : memref<50x64xf16>, tensor<16x1xi64> -> tensor<16x64xf16>
    kg.tile_store %g, %out[%c0, %c0] : tensor<16x64xf16>, memref<16x64xf16>
    kg.yield
  }
  return %y : tensor<16x64xf16>
}

// CHECK-LABEL: func.func @tf32_tile_dot
func.func @tf32_tile_dot(%arg: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %y = kg.kernel @dot(%arg) : (tensor<16x16xf32>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf32>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %av = memref.reinterpret_cast %x to offset: [0], sizes: [16, 16, 1], strides: [16, 1, 0] : memref<16x16xf32> to memref<16x16x1xf32, strided<[16, 1, 0]>>
    %bv = memref.reinterpret_cast %x to offset: [0], sizes: [1, 16, 16], strides: [0, 16, 1] : memref<16x16xf32> to memref<1x16x16xf32, strided<[0, 16, 1]>>
    %a = kg.tile_load %av[%c0, %c0, %c0] : memref<16x16x1xf32, strided<[16, 1, 0]>> -> tensor<16x16x1xf32>
    %b = kg.tile_load %bv[%c0, %c0, %c0] : memref<1x16x16xf32, strided<[0, 16, 1]>> -> tensor<1x16x16xf32>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} precision = tf32 : (tensor<16x16x1xf32>, tensor<1x16x16xf32>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    %d = kg.tile_dot %a, %b, %acc precision = tf32 : (tensor<16x16x1xf32>, tensor<1x16x16xf32>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    %ov = memref.reinterpret_cast %out to offset: [0], sizes: [16, 1, 16], strides: [16, 0, 1] : memref<16x16xf32> to memref<16x1x16xf32, strided<[16, 0, 1]>>
    kg.tile_store %d, %ov[%c0, %c0, %c0] : tensor<16x1x16xf32>, memref<16x1x16xf32, strided<[16, 0, 1]>>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// CHECK-LABEL: func.func @fast_accum_tile_dot
func.func @fast_accum_tile_dot(%arg: tensor<16x16xf8E4M3FN>) -> tensor<16x16xf32> {
  %y = kg.kernel @dot(%arg) : (tensor<16x16xf8E4M3FN>) -> tensor<16x16xf32> {
  ^bb0(%x: memref<16x16xf8E4M3FN>, %out: memref<16x16xf32>):
    %c0 = arith.constant 0 : i32
    %av = memref.reinterpret_cast %x to offset: [0], sizes: [16, 16, 1], strides: [16, 1, 0] : memref<16x16xf8E4M3FN> to memref<16x16x1xf8E4M3FN, strided<[16, 1, 0]>>
    %bv = memref.reinterpret_cast %x to offset: [0], sizes: [1, 16, 16], strides: [0, 16, 1] : memref<16x16xf8E4M3FN> to memref<1x16x16xf8E4M3FN, strided<[0, 16, 1]>>
    %a = kg.tile_load %av[%c0, %c0, %c0] : memref<16x16x1xf8E4M3FN, strided<[16, 1, 0]>> -> tensor<16x16x1xf8E4M3FN>
    %b = kg.tile_load %bv[%c0, %c0, %c0] : memref<1x16x16xf8E4M3FN, strided<[0, 16, 1]>> -> tensor<1x16x16xf8E4M3FN>
    %acc = kg.constant 0.0 : tensor<16x1x16xf32>
    // CHECK: kg.tile_dot %{{.*}}, %{{.*}}, %{{.*}} precision = fast_accum : (tensor<16x16x1xf8E4M3FN>, tensor<1x16x16xf8E4M3FN>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    %d = kg.tile_dot %a, %b, %acc precision = fast_accum : (tensor<16x16x1xf8E4M3FN>, tensor<1x16x16xf8E4M3FN>, tensor<16x1x16xf32>) -> tensor<16x1x16xf32>
    %ov = memref.reinterpret_cast %out to offset: [0], sizes: [16, 1, 16], strides: [16, 0, 1] : memref<16x16xf32> to memref<16x1x16xf32, strided<[16, 0, 1]>>
    kg.tile_store %d, %ov[%c0, %c0, %c0] : tensor<16x1x16xf32>, memref<16x1x16xf32, strided<[16, 0, 1]>>
    kg.yield
  }
  return %y : tensor<16x16xf32>
}

// The module that holds a kernel's TTIR, and its launch.
module @softmax_0 {
}
// CHECK-LABEL: func.func @launched
func.func @launched(%x: tensor<17x1000xf16>) -> tensor<17x1000xf16> {
  // CHECK: kg.launch @softmax_0(%{{.*}}) grid [17, 1, 1] num_warps 4 num_stages 1 : (tensor<17x1000xf16>) -> tensor<17x1000xf16>
  %y = kg.launch @softmax_0(%x) grid [17, 1, 1] num_warps 4 num_stages 1 : (tensor<17x1000xf16>) -> tensor<17x1000xf16>
  return %y : tensor<17x1000xf16>
}
