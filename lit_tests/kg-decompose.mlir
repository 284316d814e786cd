// kg-decompose rewrites softmax, the norms and means into primitives (reduce
// sum/max, elementwise math, constants), and moves the math of f16/bf16 ops
// to f32 between casts marked kg.promotion. Matmuls, f32 elementwise ops and
// reductions, views and constants stay; so does everything in a tiled kernel.
// RUN: kgc-opt %s --kg-decompose | FileCheck %s

// ---------------------------------------------------------------------------
// softmax
// ---------------------------------------------------------------------------

// CHECK-LABEL: func.func @softmax_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[X]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[S:.*]] = kg.sub %[[X]], %[[M]] : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[S]] : tensor<4x32xf32>
// CHECK-NEXT: %[[Z:.*]] = kg.reduce sum %[[E]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[P:.*]] = kg.div %[[E]], %[[Z]] : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: return %[[P]] : tensor<4x32xf32>
func.func @softmax_f32(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %y = kg.softmax %x dim 1 : tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// The reduced dimension need not be the last one.
// CHECK-LABEL: func.func @softmax_dim0
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[X]] dims [0] keepdim : tensor<8x16xf32> -> tensor<1x16xf32>
// CHECK-NEXT: kg.sub %[[X]], %[[M]] : (tensor<8x16xf32>, tensor<1x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: kg.exp
// CHECK-NEXT: kg.reduce sum %{{.*}} dims [0] keepdim : tensor<8x16xf32> -> tensor<1x16xf32>
// CHECK-NEXT: kg.div
// CHECK-NEXT: return
func.func @softmax_dim0(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = kg.softmax %x dim 0 : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// f16 is read once into f32, and the result rounded once back to f16.
// CHECK-LABEL: func.func @softmax_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[W]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[S:.*]] = kg.sub %[[W]], %[[M]] : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[S]] : tensor<4x32xf32>
// CHECK-NEXT: %[[Z:.*]] = kg.reduce sum %[[E]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[P:.*]] = kg.div %[[E]], %[[Z]] : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[P]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xf16>
// CHECK-NEXT: return %[[N]] : tensor<4x32xf16>
func.func @softmax_f16(%x: tensor<4x32xf16>) -> tensor<4x32xf16> {
  %y = kg.softmax %x dim 1 : tensor<4x32xf16>
  return %y : tensor<4x32xf16>
}

// ---------------------------------------------------------------------------
// rms_norm: x * rsqrt(sum(x^2) * (1/N) + eps) * weight
// ---------------------------------------------------------------------------

// CHECK-LABEL: func.func @rms_norm_weight_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>, %[[G:.*]]: tensor<32xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[W]] : tensor<4x32xf32>
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[SQ]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 3.125000e-02 : tensor<f32>
// CHECK-NEXT: %[[MS:.*]] = kg.mul %[[SUM]], %[[INV]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[EPS:.*]] = kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: %[[V:.*]] = kg.add %[[MS]], %[[EPS]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %[[V]] : tensor<4x1xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[W]], %[[R]] : (tensor<4x32xf32>, tensor<4x1xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[GW:.*]] = kg.cast %[[G]] {kg.promotion} : tensor<32xf16> to tensor<32xf32>
// CHECK-NEXT: %[[YG:.*]] = kg.mul %[[Y]], %[[GW]] : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[OUT:.*]] = kg.cast %[[YG]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xf16>
// CHECK-NEXT: return %[[OUT]] : tensor<4x32xf16>
func.func @rms_norm_weight_f16(%x: tensor<4x32xf16>, %g: tensor<32xf16>) -> tensor<4x32xf16> {
  %y = kg.rms_norm %x weight %g normalized_shape [32] eps 1.0e-5
      : (tensor<4x32xf16>, tensor<32xf16>) -> tensor<4x32xf16>
  return %y : tensor<4x32xf16>
}

// Without a weight the last multiply goes; f32 needs no casts.
// CHECK-LABEL: func.func @rms_norm_no_weight
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x64xf32>)
// CHECK-NOT: kg.cast
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[X]] : tensor<2x3x64xf32>
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[SQ]] dims [2] keepdim : tensor<2x3x64xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 1.562500e-02 : tensor<f32>
// CHECK-NEXT: %[[MS:.*]] = kg.mul %[[SUM]], %[[INV]]
// CHECK-NEXT: %[[EPS:.*]] = kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: %[[V:.*]] = kg.add %[[MS]], %[[EPS]]
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %[[V]] : tensor<2x3x1xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[X]], %[[R]] : (tensor<2x3x64xf32>, tensor<2x3x1xf32>) -> tensor<2x3x64xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2x3x64xf32>
func.func @rms_norm_no_weight(%x: tensor<2x3x64xf32>) -> tensor<2x3x64xf32> {
  %y = kg.rms_norm %x normalized_shape [64] eps 1.0e-5 : (tensor<2x3x64xf32>) -> tensor<2x3x64xf32>
  return %y : tensor<2x3x64xf32>
}

// Normalized over the last two dimensions: N = 8 * 32 = 256.
// CHECK-LABEL: func.func @rms_norm_two_dims
// CHECK-SAME: (%[[X:.*]]: tensor<4x8x32xf32>, %[[G:.*]]: tensor<8x32xf32>)
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[X]]
// CHECK-NEXT: kg.reduce sum %[[SQ]] dims [1, 2] keepdim : tensor<4x8x32xf32> -> tensor<4x1x1xf32>
// CHECK-NEXT: kg.constant 3.906250e-03 : tensor<f32>
// CHECK-NEXT: kg.mul
// CHECK-NEXT: kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: kg.add
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %{{.*}} : tensor<4x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[X]], %[[R]]
// CHECK-NEXT: %[[YG:.*]] = kg.mul %[[Y]], %[[G]] : (tensor<4x8x32xf32>, tensor<8x32xf32>) -> tensor<4x8x32xf32>
// CHECK-NEXT: return %[[YG]]
func.func @rms_norm_two_dims(%x: tensor<4x8x32xf32>, %g: tensor<8x32xf32>) -> tensor<4x8x32xf32> {
  %y = kg.rms_norm %x weight %g normalized_shape [8, 32] eps 1.0e-5
      : (tensor<4x8x32xf32>, tensor<8x32xf32>) -> tensor<4x8x32xf32>
  return %y : tensor<4x8x32xf32>
}

// ---------------------------------------------------------------------------
// layer_norm: c = x - mean(x); c * rsqrt(mean(c^2) + eps) * weight + bias
// ---------------------------------------------------------------------------

// CHECK-LABEL: func.func @layer_norm_weight_bias_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf16>, %[[G:.*]]: tensor<64xf16>, %[[B:.*]]: tensor<64xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x64xf16> to tensor<4x64xf32>
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[W]] dims [1] keepdim : tensor<4x64xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 1.562500e-02 : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = kg.mul %[[SUM]], %[[INV]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[C:.*]] = kg.sub %[[W]], %[[MEAN]] : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[C]] : tensor<4x64xf32>
// CHECK-NEXT: %[[SSQ:.*]] = kg.reduce sum %[[SQ]] dims [1] keepdim : tensor<4x64xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV2:.*]] = kg.constant 1.562500e-02 : tensor<f32>
// CHECK-NEXT: %[[VAR:.*]] = kg.mul %[[SSQ]], %[[INV2]]
// CHECK-NEXT: %[[EPS:.*]] = kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = kg.add %[[VAR]], %[[EPS]]
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %[[VE]] : tensor<4x1xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[C]], %[[R]] : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[GW:.*]] = kg.cast %[[G]] {kg.promotion} : tensor<64xf16> to tensor<64xf32>
// CHECK-NEXT: %[[YG:.*]] = kg.mul %[[Y]], %[[GW]] : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[BW:.*]] = kg.cast %[[B]] {kg.promotion} : tensor<64xf16> to tensor<64xf32>
// CHECK-NEXT: %[[YB:.*]] = kg.add %[[YG]], %[[BW]] : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[OUT:.*]] = kg.cast %[[YB]] {kg.promotion} : tensor<4x64xf32> to tensor<4x64xf16>
// CHECK-NEXT: return %[[OUT]] : tensor<4x64xf16>
func.func @layer_norm_weight_bias_f16(%x: tensor<4x64xf16>, %g: tensor<64xf16>, %b: tensor<64xf16>) -> tensor<4x64xf16> {
  %y = kg.layer_norm %x weight %g bias %b normalized_shape [64] eps 1.0e-5
      : (tensor<4x64xf16>, tensor<64xf16>, tensor<64xf16>) -> tensor<4x64xf16>
  return %y : tensor<4x64xf16>
}

// A bias alone is added, not multiplied: the operand segments tell it apart
// from a weight.
// CHECK-LABEL: func.func @layer_norm_bias_only
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK: %[[R:.*]] = kg.rsqrt
// CHECK-NEXT: %[[Y:.*]] = kg.mul %{{.*}}, %[[R]] : (tensor<4x64xf32>, tensor<4x1xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[YB:.*]] = kg.add %[[Y]], %[[B]] : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: return %[[YB]] : tensor<4x64xf32>
func.func @layer_norm_bias_only(%x: tensor<4x64xf32>, %b: tensor<64xf32>) -> tensor<4x64xf32> {
  %y = kg.layer_norm %x bias %b normalized_shape [64] eps 1.0e-5
      : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// CHECK-LABEL: func.func @layer_norm_plain
// CHECK-SAME: (%[[X:.*]]: tensor<4x64xf32>)
// CHECK-NOT: kg.cast
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[X]] dims [1] keepdim
// CHECK-NEXT: kg.constant 1.562500e-02 : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = kg.mul %[[SUM]]
// CHECK-NEXT: %[[C:.*]] = kg.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: kg.square %[[C]]
// CHECK-NEXT: kg.reduce sum
// CHECK-NEXT: kg.constant 1.562500e-02 : tensor<f32>
// CHECK-NEXT: kg.mul
// CHECK-NEXT: kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: kg.add
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[C]], %[[R]]
// CHECK-NEXT: return %[[Y]] : tensor<4x64xf32>
func.func @layer_norm_plain(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = kg.layer_norm %x normalized_shape [64] eps 1.0e-5 : (tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// Normalized over the last two dimensions (N = 8 * 32 = 256), in bf16.
// CHECK-LABEL: func.func @layer_norm_two_dims_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<4x8x32xbf16>, %[[G:.*]]: tensor<8x32xbf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x8x32xbf16> to tensor<4x8x32xf32>
// CHECK-NEXT: kg.reduce sum %[[W]] dims [1, 2] keepdim : tensor<4x8x32xf32> -> tensor<4x1x1xf32>
// CHECK-NEXT: kg.constant 3.906250e-03 : tensor<f32>
// CHECK-NEXT: kg.mul
// CHECK-NEXT: %[[C:.*]] = kg.sub %[[W]], %{{.*}} : (tensor<4x8x32xf32>, tensor<4x1x1xf32>) -> tensor<4x8x32xf32>
// CHECK-NEXT: kg.square %[[C]]
// CHECK-NEXT: kg.reduce sum %{{.*}} dims [1, 2] keepdim : tensor<4x8x32xf32> -> tensor<4x1x1xf32>
// CHECK-NEXT: kg.constant 3.906250e-03 : tensor<f32>
// CHECK-NEXT: kg.mul
// CHECK-NEXT: kg.constant 1.000000e-05 : tensor<f32>
// CHECK-NEXT: kg.add
// CHECK-NEXT: %[[R:.*]] = kg.rsqrt %{{.*}} : tensor<4x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.mul %[[C]], %[[R]]
// CHECK-NEXT: %[[GW:.*]] = kg.cast %[[G]] {kg.promotion} : tensor<8x32xbf16> to tensor<8x32xf32>
// CHECK-NEXT: %[[YG:.*]] = kg.mul %[[Y]], %[[GW]] : (tensor<4x8x32xf32>, tensor<8x32xf32>) -> tensor<4x8x32xf32>
// CHECK-NEXT: %[[OUT:.*]] = kg.cast %[[YG]] {kg.promotion} : tensor<4x8x32xf32> to tensor<4x8x32xbf16>
// CHECK-NEXT: return %[[OUT]]
func.func @layer_norm_two_dims_bf16(%x: tensor<4x8x32xbf16>, %g: tensor<8x32xbf16>) -> tensor<4x8x32xbf16> {
  %y = kg.layer_norm %x weight %g normalized_shape [8, 32] eps 1.0e-5
      : (tensor<4x8x32xbf16>, tensor<8x32xbf16>) -> tensor<4x8x32xbf16>
  return %y : tensor<4x8x32xbf16>
}

// ---------------------------------------------------------------------------
// reduce mean: sum times 1/N; without keepdim a reshape drops the dimension
// ---------------------------------------------------------------------------

// CHECK-LABEL: func.func @mean_keepdim
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK-NEXT: %[[S:.*]] = kg.reduce sum %[[X]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 3.125000e-02 : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = kg.mul %[[S]], %[[INV]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: return %[[M]] : tensor<4x1xf32>
func.func @mean_keepdim(%x: tensor<4x32xf32>) -> tensor<4x1xf32> {
  %y = kg.reduce mean %x dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

// CHECK-LABEL: func.func @mean_no_keepdim
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK-NEXT: %[[S:.*]] = kg.reduce sum %[[X]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 3.125000e-02 : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = kg.mul %[[S]], %[[INV]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[R:.*]] = kg.reshape %[[M]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4xf32>
func.func @mean_no_keepdim(%x: tensor<4x32xf32>) -> tensor<4xf32> {
  %y = kg.reduce mean %x dims [1] : tensor<4x32xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// Over every dimension, listed out of order, of f16, to a scalar:
// N = 4 * 32 = 128.
// CHECK-LABEL: func.func @mean_all_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[S:.*]] = kg.reduce sum %[[W]] dims [0, 1] keepdim : tensor<4x32xf32> -> tensor<1x1xf32>
// CHECK-NEXT: %[[INV:.*]] = kg.constant 7.812500e-03 : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = kg.mul %[[S]], %[[INV]] : (tensor<1x1xf32>, tensor<f32>) -> tensor<1x1xf32>
// CHECK-NEXT: %[[R:.*]] = kg.reshape %[[M]] : tensor<1x1xf32> -> tensor<f32>
// CHECK-NEXT: %[[OUT:.*]] = kg.cast %[[R]] {kg.promotion} : tensor<f32> to tensor<f16>
// CHECK-NEXT: return %[[OUT]] : tensor<f16>
func.func @mean_all_f16(%x: tensor<4x32xf16>) -> tensor<f16> {
  %y = kg.reduce mean %x dims [1, 0] : tensor<4x32xf16> -> tensor<f16>
  return %y : tensor<f16>
}

// ---------------------------------------------------------------------------
// sum, max and min of f16/bf16 run in f32
// ---------------------------------------------------------------------------

// CHECK-LABEL: func.func @sum_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[S:.*]] = kg.reduce sum %[[W]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[S]] {kg.promotion} : tensor<4x1xf32> to tensor<4x1xf16>
// CHECK-NEXT: return %[[N]] : tensor<4x1xf16>
func.func @sum_f16(%x: tensor<4x32xf16>) -> tensor<4x1xf16> {
  %y = kg.reduce sum %x dims [1] keepdim : tensor<4x32xf16> -> tensor<4x1xf16>
  return %y : tensor<4x1xf16>
}

// CHECK-LABEL: func.func @max_f16_no_keepdim
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[W]] dims [0] keepdim : tensor<4x32xf32> -> tensor<1x32xf32>
// CHECK-NEXT: %[[R:.*]] = kg.reshape %[[M]] : tensor<1x32xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[R]] {kg.promotion} : tensor<32xf32> to tensor<32xf16>
// CHECK-NEXT: return %[[N]] : tensor<32xf16>
func.func @max_f16_no_keepdim(%x: tensor<4x32xf16>) -> tensor<32xf16> {
  %y = kg.reduce max %x dims [0] : tensor<4x32xf16> -> tensor<32xf16>
  return %y : tensor<32xf16>
}

// CHECK-LABEL: func.func @min_bf16
// CHECK-NEXT: kg.cast %{{.*}} {kg.promotion} : tensor<4x32xbf16> to tensor<4x32xf32>
// CHECK-NEXT: kg.reduce min %{{.*}} dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: kg.cast %{{.*}} {kg.promotion} : tensor<4x1xf32> to tensor<4x1xbf16>
// CHECK-NEXT: return
func.func @min_bf16(%x: tensor<4x32xbf16>) -> tensor<4x1xbf16> {
  %y = kg.reduce min %x dims [1] keepdim : tensor<4x32xbf16> -> tensor<4x1xbf16>
  return %y : tensor<4x1xbf16>
}

// ---------------------------------------------------------------------------
// elementwise ops on f16/bf16 compute in f32; attributes are kept
// ---------------------------------------------------------------------------

// Each op is promoted on its own: the f32 -> bf16 -> f32 round trips between
// them are kg-fuse's to drop inside a kernel.
// CHECK-LABEL: func.func @elementwise_bf16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xbf16>, %[[B:.*]]: tensor<32xbf16>)
// CHECK-NEXT: %[[XW:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x32xbf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[BW:.*]] = kg.cast %[[B]] {kg.promotion} : tensor<32xbf16> to tensor<32xf32>
// CHECK-NEXT: %[[A:.*]] = kg.add %[[XW]], %[[BW]] : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[AN:.*]] = kg.cast %[[A]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xbf16>
// CHECK-NEXT: %[[AW:.*]] = kg.cast %[[AN]] {kg.promotion} : tensor<4x32xbf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[G:.*]] = kg.gelu %[[AW]] approximate = tanh : tensor<4x32xf32>
// CHECK-NEXT: %[[GN:.*]] = kg.cast %[[G]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xbf16>
// CHECK-NEXT: %[[GW:.*]] = kg.cast %[[GN]] {kg.promotion} : tensor<4x32xbf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[C:.*]] = kg.clamp %[[GW]] min -1.000000e+00 max 1.000000e+00 : tensor<4x32xf32>
// CHECK-NEXT: %[[CN:.*]] = kg.cast %[[C]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xbf16>
// CHECK-NEXT: return %[[CN]] : tensor<4x32xbf16>
func.func @elementwise_bf16(%x: tensor<4x32xbf16>, %b: tensor<32xbf16>) -> tensor<4x32xbf16> {
  %a = kg.add %x, %b : (tensor<4x32xbf16>, tensor<32xbf16>) -> tensor<4x32xbf16>
  %g = kg.gelu %a approximate = tanh : tensor<4x32xbf16>
  %c = kg.clamp %g min -1.0 max 1.0 : tensor<4x32xbf16>
  return %c : tensor<4x32xbf16>
}

// CHECK-LABEL: func.func @unary_f16
// CHECK-SAME: (%[[X:.*]]: tensor<8xf16>)
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<8xf16> to tensor<8xf32>
// CHECK-NEXT: %[[E:.*]] = kg.silu %[[W]] : tensor<8xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[E]] {kg.promotion} : tensor<8xf32> to tensor<8xf16>
// CHECK-NEXT: return %[[N]] : tensor<8xf16>
func.func @unary_f16(%x: tensor<8xf16>) -> tensor<8xf16> {
  %y = kg.silu %x : tensor<8xf16>
  return %y : tensor<8xf16>
}

// ---------------------------------------------------------------------------
// casts
// ---------------------------------------------------------------------------

// A cast to its own type goes; a cast that changes the type stays, and keeps
// no kg.promotion (it is the user's).
// CHECK-LABEL: func.func @cast_same_type
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>)
// CHECK-NEXT: %[[C:.*]] = kg.cast %[[X]] : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x32xf32>
func.func @cast_same_type(%x: tensor<4x32xf16>) -> tensor<4x32xf32> {
  %same = kg.cast %x : tensor<4x32xf16> to tensor<4x32xf16>
  %wide = kg.cast %same : tensor<4x32xf16> to tensor<4x32xf32>
  return %wide : tensor<4x32xf32>
}

// CHECK-LABEL: func.func @cast_same_type_only
// CHECK-SAME: (%[[X:.*]]: tensor<8xbf16>)
// CHECK-NEXT: return %[[X]] : tensor<8xbf16>
func.func @cast_same_type_only(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %same = kg.cast %x : tensor<8xbf16> to tensor<8xbf16>
  return %same : tensor<8xbf16>
}

// ---------------------------------------------------------------------------
// graph-form kernels are decomposed like function bodies
// ---------------------------------------------------------------------------

// A kernel in graph form (tensor arguments) is not tiled yet: its ops are
// rewritten in place, inside the kernel.
// CHECK-LABEL: func.func @graph_form_kernel
// CHECK: kg.kernel @graph_exp
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x32xf16>):
// CHECK-NEXT: %[[W:.*]] = kg.cast %[[A]] {kg.promotion} : tensor<4x32xf16> to tensor<4x32xf32>
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[W]] : tensor<4x32xf32>
// CHECK-NEXT: %[[N:.*]] = kg.cast %[[E]] {kg.promotion} : tensor<4x32xf32> to tensor<4x32xf16>
// CHECK-NEXT: kg.yield %[[N]] : tensor<4x32xf16>
func.func @graph_form_kernel(%a: tensor<4x32xf16>) -> tensor<4x32xf16> {
  %y = kg.kernel @graph_exp(%a) : (tensor<4x32xf16>) -> tensor<4x32xf16> {
  ^bb0(%x: tensor<4x32xf16>):
    %r = kg.exp %x : tensor<4x32xf16>
    kg.yield %r : tensor<4x32xf16>
  }
  return %y : tensor<4x32xf16>
}

// ---------------------------------------------------------------------------
// Unchanged
// ---------------------------------------------------------------------------

// f32 elementwise ops are primitives already: nothing to decompose, nothing
// to promote.
// CHECK-LABEL: func.func @elementwise_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK-NEXT: %[[A:.*]] = kg.add %[[X]], %[[B]] : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[A]] : tensor<4x32xf32>
// CHECK-NEXT: %[[G:.*]] = kg.gelu %[[E]] : tensor<4x32xf32>
// CHECK-NEXT: %[[C:.*]] = kg.clamp %[[G]] min 0.000000e+00 : tensor<4x32xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x32xf32>
func.func @elementwise_f32(%x: tensor<4x32xf32>, %b: tensor<32xf32>) -> tensor<4x32xf32> {
  %a = kg.add %x, %b : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %e = kg.exp %a : tensor<4x32xf32>
  %g = kg.gelu %e : tensor<4x32xf32>
  %c = kg.clamp %g min 0.0 : tensor<4x32xf32>
  return %c : tensor<4x32xf32>
}

// sum, max and min of f32 are what kernels compute, with or without keepdim.
// CHECK-LABEL: func.func @reductions_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf32>)
// CHECK-NEXT: %[[S:.*]] = kg.reduce sum %[[X]] dims [1] : tensor<4x32xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[M:.*]] = kg.reduce max %[[X]] dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[N:.*]] = kg.reduce min %[[X]] dims [0, 1] : tensor<4x32xf32> -> tensor<f32>
// CHECK-NEXT: return %[[S]], %[[M]], %[[N]]
func.func @reductions_f32(%x: tensor<4x32xf32>) -> (tensor<4xf32>, tensor<4x1xf32>, tensor<f32>) {
  %s = kg.reduce sum %x dims [1] : tensor<4x32xf32> -> tensor<4xf32>
  %m = kg.reduce max %x dims [1] keepdim : tensor<4x32xf32> -> tensor<4x1xf32>
  %n = kg.reduce min %x dims [0, 1] : tensor<4x32xf32> -> tensor<f32>
  return %s, %m, %n : tensor<4xf32>, tensor<4x1xf32>, tensor<f32>
}

// A matmul accumulates in f32 itself, whatever its operand types: no casts.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: tensor<16x32xf16>, %[[B:.*]]: tensor<32x8xf16>, %[[C:.*]]: tensor<16x32xf32>, %[[D:.*]]: tensor<32x8xf32>)
// CHECK-NEXT: %[[H:.*]] = kg.matmul %[[A]], %[[B]] : (tensor<16x32xf16>, tensor<32x8xf16>) -> tensor<16x8xf16>
// CHECK-NEXT: %[[F:.*]] = kg.matmul %[[C]], %[[D]] precision = tf32 : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: return %[[H]], %[[F]]
func.func @matmul(%a: tensor<16x32xf16>, %b: tensor<32x8xf16>, %c: tensor<16x32xf32>, %d: tensor<32x8xf32>) -> (tensor<16x8xf16>, tensor<16x8xf32>) {
  %h = kg.matmul %a, %b : (tensor<16x32xf16>, tensor<32x8xf16>) -> tensor<16x8xf16>
  %f = kg.matmul %c, %d precision = tf32 : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  return %h, %f : tensor<16x8xf16>, tensor<16x8xf32>
}

// Views move elements without arithmetic, and constants are values: neither
// needs f32, even on f16.
// CHECK-LABEL: func.func @views_and_constants_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x32xf16>, %[[Y:.*]]: tensor<4x16xf16>)
// CHECK-NOT: kg.cast
// CHECK-NEXT: %[[T:.*]] = kg.transpose %[[X]] [1, 0] : tensor<4x32xf16> -> tensor<32x4xf16>
// CHECK-NEXT: %[[R:.*]] = kg.reshape %[[T]] : tensor<32x4xf16> -> tensor<128xf16>
// CHECK-NEXT: %[[B:.*]] = kg.broadcast_to %[[R]] : tensor<128xf16> -> tensor<2x128xf16>
// CHECK-NEXT: %[[C:.*]] = kg.concat %[[X]], %[[Y]] dim 1 : (tensor<4x32xf16>, tensor<4x16xf16>) -> tensor<4x48xf16>
// CHECK-NEXT: %[[S:.*]] = kg.slice %[[C]] offsets [0, 8] strides [1, 2] : tensor<4x48xf16> -> tensor<4x16xf16>
// CHECK-NEXT: %[[K:.*]] = kg.constant 5.000000e-01 : tensor<4x16xf16>
// CHECK-NEXT: return %[[B]], %[[S]], %[[K]]
func.func @views_and_constants_f16(%x: tensor<4x32xf16>, %y: tensor<4x16xf16>) -> (tensor<2x128xf16>, tensor<4x16xf16>, tensor<4x16xf16>) {
  %t = kg.transpose %x [1, 0] : tensor<4x32xf16> -> tensor<32x4xf16>
  %r = kg.reshape %t : tensor<32x4xf16> -> tensor<128xf16>
  %b = kg.broadcast_to %r : tensor<128xf16> -> tensor<2x128xf16>
  %c = kg.concat %x, %y dim 1 : (tensor<4x32xf16>, tensor<4x16xf16>) -> tensor<4x48xf16>
  %s = kg.slice %c offsets [0, 8] strides [1, 2] : tensor<4x48xf16> -> tensor<4x16xf16>
  %k = kg.constant 0.5 : tensor<4x16xf16>
  return %b, %s, %k : tensor<2x128xf16>, tensor<4x16xf16>, tensor<4x16xf16>
}

// ---------------------------------------------------------------------------
// integers and booleans
// ---------------------------------------------------------------------------

// Integer arithmetic is exact in its own type: nothing is promoted to f32,
// and no kg.cast appears.
// CHECK-LABEL: func.func @integer_math
// CHECK-NOT: kg.cast
// CHECK: kg.add %{{.*}}, %{{.*}} : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
// CHECK: kg.mul %{{.*}}, %{{.*}} : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
// CHECK: kg.neg %{{.*}} : tensor<4x8xi32>
// CHECK-NOT: kg.cast
// CHECK: return
func.func @integer_math(%a: tensor<4x8xi32>, %b: tensor<4x8xi32>) -> tensor<4x8xi32> {
  %s = kg.add %a, %b : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %m = kg.mul %s, %b : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %n = kg.neg %m : tensor<4x8xi32>
  return %n : tensor<4x8xi32>
}

// A comparison and a select of f16 values are exact in f16 (they round
// nothing): they stay on f16 operands, unpromoted, and the iota and the
// logical op are left as they are.
// CHECK-LABEL: func.func @compare_select_half
// CHECK-NOT: kg.cast
// CHECK: kg.iota dim 1 : tensor<4x8xi32>
// CHECK: kg.cmp lt %{{.*}}, %{{.*}} : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xi1>
// CHECK: kg.logical_not %{{.*}} : tensor<4x8xi1>
// CHECK: kg.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-NOT: kg.cast
// CHECK: return
func.func @compare_select_half(%x: tensor<4x8xf16>, %y: tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi32>) {
  %i = kg.iota dim 1 : tensor<4x8xi32>
  %c = kg.cmp lt %x, %y : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xi1>
  %n = kg.logical_not %c : tensor<4x8xi1>
  %r = kg.select %n, %x, %y : (tensor<4x8xi1>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return %r, %i : tensor<4x8xf16>, tensor<4x8xi32>
}

// An f16 add beside them is still computed in f32: promotion follows the
// result's type, and the select's f16 operand comes from it.
// CHECK-LABEL: func.func @half_add_then_select
// CHECK: %[[A:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK: kg.add %[[A]], %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[H:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK: kg.select %{{.*}}, %[[H]], %{{.*}} : (tensor<4x8xi1>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
func.func @half_add_then_select(%x: tensor<4x8xf16>, %m: tensor<4x8xi1>) -> tensor<4x8xf16> {
  %s = kg.add %x, %x : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  %r = kg.select %m, %s, %x : (tensor<4x8xi1>, tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
  return %r : tensor<4x8xf16>
}

// A tiled kernel's body is a tile program, past the point where ops are
// decomposed or promoted: its f16 exp and softmax are left as written.
// CHECK-LABEL: func.func @tiled_kernel
// CHECK: kg.kernel @tiled_exp_softmax
// CHECK-NEXT: ^bb0(%{{.*}}: memref<16x16xf16>, %{{.*}}: memref<16x16xf16>):
// CHECK-NEXT: arith.constant 0 : i32
// CHECK-NEXT: %[[T:.*]] = kg.tile_load
// CHECK-NEXT: %[[E:.*]] = kg.exp %[[T]] : tensor<16x16xf16>
// CHECK-NEXT: %[[S:.*]] = kg.softmax %[[E]] dim 1 : tensor<16x16xf16>
// CHECK-NEXT: kg.tile_store %[[S]]
// CHECK-NEXT: kg.yield
// CHECK-NOT: kg.cast
// CHECK: return
func.func @tiled_kernel(%a: tensor<16x16xf16>) -> tensor<16x16xf16> {
  %y = kg.kernel @tiled_exp_softmax(%a) : (tensor<16x16xf16>) -> tensor<16x16xf16> {
  ^bb0(%x: memref<16x16xf16>, %out: memref<16x16xf16>):
    %c = arith.constant 0 : i32
    %t = kg.tile_load %x[%c, %c] : memref<16x16xf16> -> tensor<16x16xf16>
    %e = kg.exp %t : tensor<16x16xf16>
    %s = kg.softmax %e dim 1 : tensor<16x16xf16>
    kg.tile_store %s, %out[%c, %c] : tensor<16x16xf16>, memref<16x16xf16>
    kg.yield
  }
  return %y : tensor<16x16xf16>
}

// ---------------------------------------------------------------------------
// scatter
// ---------------------------------------------------------------------------

// Several indices added (an embedding's gradient): a one-hot matrix of the
// rows each index names, times the source, added to the destination.
// CHECK-LABEL: func.func @scatter_add_rows
// CHECK-SAME: (%[[D:.*]]: tensor<64x32xf32>, %[[I:.*]]: tensor<5xi64>, %[[S:.*]]: tensor<5x32xf32>)
// CHECK-NEXT: %[[ROWS:.*]] = kg.iota dim 0 : tensor<64x1xi64>
// CHECK-NEXT: %[[L:.*]] = kg.reshape %[[I]] : tensor<5xi64> -> tensor<1x5xi64>
// CHECK-NEXT: %[[HIT:.*]] = kg.cmp eq %[[ROWS]], %[[L]] : (tensor<64x1xi64>, tensor<1x5xi64>) -> tensor<64x5xi1>
// CHECK-NEXT: %[[ONE:.*]] = kg.cast %[[HIT]] : tensor<64x5xi1> to tensor<64x5xf32>
// CHECK-NEXT: %[[C:.*]] = kg.matmul %[[ONE]], %[[S]] : (tensor<64x5xf32>, tensor<5x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT: %[[Y:.*]] = kg.add %[[D]], %[[C]] : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
// CHECK-NEXT: return %[[Y]]
func.func @scatter_add_rows(%grad: tensor<64x32xf32>, %ids: tensor<5xi64>, %rows: tensor<5x32xf32>) -> tensor<64x32xf32> {
  %y = kg.scatter add %grad[%ids], %rows dim 0 : (tensor<64x32xf32>, tensor<5xi64>, tensor<5x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// One index (a decode step's cache update): a pointwise choice, no matmul,
// in the cache's own type.
// CHECK-LABEL: func.func @scatter_assign_one_position
// CHECK-SAME: (%[[C:.*]]: tensor<1x2x16x8xf16>, %[[AT:.*]]: tensor<1xi64>, %[[K:.*]]: tensor<1x2x1x8xf16>)
// CHECK-NEXT: %[[A:.*]] = kg.reshape %[[AT]] : tensor<1xi64> -> tensor<1x1x1x1xi64>
// CHECK-NEXT: %[[POS:.*]] = kg.iota dim 2 : tensor<1x1x16x1xi64>
// CHECK-NEXT: %[[HIT:.*]] = kg.cmp eq %[[POS]], %[[A]]
// CHECK-NEXT: %[[Y:.*]] = kg.select %[[HIT]], %[[K]], %[[C]] : (tensor<1x1x16x1xi1>, tensor<1x2x1x8xf16>, tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16>
// CHECK-NEXT: return %[[Y]]
func.func @scatter_assign_one_position(%cache: tensor<1x2x16x8xf16>, %at: tensor<1xi64>, %k: tensor<1x2x1x8xf16>) -> tensor<1x2x16x8xf16> {
  %y = kg.scatter assign %cache[%at], %k dim 2 : (tensor<1x2x16x8xf16>, tensor<1xi64>, tensor<1x2x1x8xf16>) -> tensor<1x2x16x8xf16>
  return %y : tensor<1x2x16x8xf16>
}

// One index added in f16: the sum is f32, rounded once.
// CHECK-LABEL: func.func @scatter_add_one_f16
// CHECK: kg.cmp eq
// CHECK-NEXT: %[[S:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<1x8xf16> to tensor<1x8xf32>
// CHECK-NEXT: %[[Z:.*]] = kg.constant 0.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[ADDED:.*]] = kg.select %{{.*}}, %[[S]], %[[Z]] : (tensor<16x1xi1>, tensor<1x8xf32>, tensor<f32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[D:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<16x8xf16> to tensor<16x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = kg.add %[[D]], %[[ADDED]]
// CHECK-NEXT: %[[Y:.*]] = kg.cast %[[SUM]] {kg.promotion} : tensor<16x8xf32> to tensor<16x8xf16>
// CHECK-NEXT: return %[[Y]]
func.func @scatter_add_one_f16(%d: tensor<16x8xf16>, %at: tensor<1xi64>, %s: tensor<1x8xf16>) -> tensor<16x8xf16> {
  %y = kg.scatter add %d[%at], %s dim 0 : (tensor<16x8xf16>, tensor<1xi64>, tensor<1x8xf16>) -> tensor<16x8xf16>
  return %y : tensor<16x8xf16>
}

// Several positions written (a prefill's cache update): only the last
// source naming a row is kept, and rows no index names keep the cache.
// CHECK-LABEL: func.func @scatter_assign_positions
// CHECK-SAME: (%[[C:.*]]: tensor<1x2x16x8xbf16>, %[[AT:.*]]: tensor<3xi32>, %[[K:.*]]: tensor<1x2x3x8xbf16>)
// CHECK: %[[HIT:.*]] = kg.cmp eq %{{.*}}, %{{.*}} : (tensor<16x1xi32>, tensor<1x3xi32>) -> tensor<16x3xi1>
// CHECK-NEXT: %[[I:.*]] = kg.iota dim 1 : tensor<1x3xf32>
// CHECK-NEXT: %[[NONE:.*]] = kg.constant -1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[MARK:.*]] = kg.select %[[HIT]], %[[I]], %[[NONE]]
// CHECK-NEXT: %[[LAST:.*]] = kg.reduce max %[[MARK]] dims [1] keepdim : tensor<16x3xf32> -> tensor<16x1xf32>
// CHECK-NEXT: %[[KEPT:.*]] = kg.cmp eq %[[I]], %[[LAST]] : (tensor<1x3xf32>, tensor<16x1xf32>) -> tensor<16x3xi1>
// CHECK-NEXT: %[[ONE:.*]] = kg.cast %[[KEPT]] : tensor<16x3xi1> to tensor<16x3xbf16>
// CHECK-NEXT: %[[P:.*]] = kg.matmul %[[ONE]], %[[K]] : (tensor<16x3xbf16>, tensor<1x2x3x8xbf16>) -> tensor<1x2x16x8xf32>
// CHECK-NEXT: %[[Z:.*]] = kg.constant 0.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[W:.*]] = kg.cmp ge %[[LAST]], %[[Z]] : (tensor<16x1xf32>, tensor<f32>) -> tensor<16x1xi1>
// CHECK-NEXT: %[[PB:.*]] = kg.cast %[[P]] {kg.promotion} : tensor<1x2x16x8xf32> to tensor<1x2x16x8xbf16>
// CHECK-NEXT: %[[Y:.*]] = kg.select %[[W]], %[[PB]], %[[C]]
// CHECK-NEXT: return %[[Y]]
func.func @scatter_assign_positions(%cache: tensor<1x2x16x8xbf16>, %at: tensor<3xi32>, %k: tensor<1x2x3x8xbf16>) -> tensor<1x2x16x8xbf16> {
  %y = kg.scatter assign %cache[%at], %k dim 2 : (tensor<1x2x16x8xbf16>, tensor<3xi32>, tensor<1x2x3x8xbf16>) -> tensor<1x2x16x8xbf16>
  return %y : tensor<1x2x16x8xbf16>
}

// Along the last dimension, the indices multiply from the right.
// CHECK-LABEL: func.func @scatter_add_last_dim
// CHECK: %[[T:.*]] = kg.transpose %{{.*}} [1, 0] : tensor<16x3xf32> -> tensor<3x16xf32>
// CHECK-NEXT: %[[P:.*]] = kg.matmul %{{.*}}, %[[T]] : (tensor<4x3xf32>, tensor<3x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: kg.add %{{.*}}, %[[P]]
func.func @scatter_add_last_dim(%d: tensor<4x16xf32>, %at: tensor<3xi64>, %s: tensor<4x3xf32>) -> tensor<4x16xf32> {
  %y = kg.scatter add %d[%at], %s dim 1 : (tensor<4x16xf32>, tensor<3xi64>, tensor<4x3xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// A gather is no composite: its kernel reads the rows it names (kgc.tiling.gather).
// CHECK-LABEL: func.func @gather_stays
// CHECK-NEXT: kg.gather
// CHECK-NEXT: return
func.func @gather_stays(%t: tensor<64x32xf16>, %ids: tensor<5xi64>) -> tensor<5x32xf16> {
  %y = kg.gather %t[%ids] dim 0 : (tensor<64x32xf16>, tensor<5xi64>) -> tensor<5x32xf16>
  return %y : tensor<5x32xf16>
}

// A cube is two products in f32, as torch computes it (GPT-2's GELU): the
// pow routine's few units of roundoff flip the f16 rounding of some elements.
// CHECK-LABEL: func.func @cube_f16
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf16>)
// CHECK: %[[W:.*]] = kg.cast %[[X]] {kg.promotion} : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[SQ:.*]] = kg.mul %[[W]], %[[W]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[CUBE:.*]] = kg.mul %[[SQ]], %[[W]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[OUT:.*]] = kg.cast %[[CUBE]] {kg.promotion} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: return %[[OUT]]
func.func @cube_f16(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %three = kg.constant 3.0 : tensor<f16>
  %y = kg.pow %x, %three : (tensor<4x8xf16>, tensor<f16>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

// x^-2 is one over the square.
// CHECK-LABEL: func.func @inverse_square_f32
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[SQ:.*]] = kg.mul %[[X]], %[[X]]
// CHECK-NEXT: %[[ONE:.*]] = kg.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[INV:.*]] = kg.div %[[ONE]], %[[SQ]]
// CHECK-NEXT: return %[[INV]]
func.func @inverse_square_f32(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = kg.constant -2.0 : tensor<f32>
  %y = kg.pow %x, %e : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Any other exponent, or one that is not a constant, stays a pow: only its
// f16 math moves to f32.
// CHECK-LABEL: func.func @other_powers
// CHECK: kg.pow %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK: kg.pow %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: kg.mul
func.func @other_powers(%x: tensor<4x8xf16>, %e: tensor<4x8xf32>) -> (tensor<4x8xf16>, tensor<4x8xf32>) {
  %c = kg.constant 2.5 : tensor<f16>
  %y = kg.pow %x, %c : (tensor<4x8xf16>, tensor<f16>) -> tensor<4x8xf16>
  %xf = kg.cast %x : tensor<4x8xf16> to tensor<4x8xf32>
  %z = kg.pow %xf, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf16>, tensor<4x8xf32>
}

// A half-float constant widens to an f32 constant of the value the half type
// holds (0.044715 is 0.044708251953125 in f16), not to a cast: a source op
// that every kernel reading it copies.
// CHECK-LABEL: func.func @half_constant_widens_to_a_constant
// CHECK: %[[W:.*]] = kg.cast %{{.*}} {kg.promotion} : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[C:.*]] = kg.constant 0.044708251953125 : tensor<f32>
// CHECK-NEXT: kg.mul %[[W]], %[[C]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
func.func @half_constant_widens_to_a_constant(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %c = kg.constant 4.471500e-02 : tensor<f16>
  %y = kg.mul %x, %c : (tensor<4x8xf16>, tensor<f16>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

// ---------------------------------------------------------------------------
// dynamic extents
// ---------------------------------------------------------------------------

// A dynamic extent (`?`, one size per call) is kept by every rule whose
// constants do not depend on it: here the rows of a norm and a softmax.
// CHECK-LABEL: func.func @norm_softmax_dynamic_rows
// CHECK-SAME: (%[[X:.*]]: tensor<?x128xf32>, %[[W:.*]]: tensor<128xf32>)
// CHECK-NEXT: %[[SQ:.*]] = kg.square %[[X]] : tensor<?x128xf32>
// CHECK-NEXT: %[[SUM:.*]] = kg.reduce sum %[[SQ]] dims [1] keepdim : tensor<?x128xf32> -> tensor<?x1xf32>
// CHECK-NEXT: %[[N:.*]] = kg.constant 7.812500e-03 : tensor<f32>
// CHECK-NEXT: kg.mul %[[SUM]], %[[N]] : (tensor<?x1xf32>, tensor<f32>) -> tensor<?x1xf32>
// CHECK: %[[M:.*]] = kg.reduce max %{{.*}} dims [1] keepdim : tensor<?x128xf32> -> tensor<?x1xf32>
// CHECK-NEXT: kg.sub %{{.*}}, %[[M]] : (tensor<?x128xf32>, tensor<?x1xf32>) -> tensor<?x128xf32>
// CHECK: return %{{.*}} : tensor<?x128xf32>
func.func @norm_softmax_dynamic_rows(%x: tensor<?x128xf32>, %w: tensor<128xf32>) -> tensor<?x128xf32> {
  %n = kg.rms_norm %x weight %w normalized_shape [128] eps 1.0e-6 : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %y = kg.softmax %n dim 1 : tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}

// A softmax along the dynamic extent needs no count: it decomposes too.
// CHECK-LABEL: func.func @softmax_along_dynamic
// CHECK: kg.reduce max %{{.*}} dims [0] keepdim : tensor<?x16xf32> -> tensor<1x16xf32>
// CHECK: kg.reduce sum %{{.*}} dims [0] keepdim : tensor<?x16xf32> -> tensor<1x16xf32>
func.func @softmax_along_dynamic(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %y = kg.softmax %x dim 0 : tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
