// RMSNorm followed by a matmul, as in a transformer's first projection:
// Y = rms_norm(X, gamma) @ W with X 16x4096 f16 and W 4096x6144 f16.
// kgc makes the norm a kernel of its own: folded into the matmul (the sum
// of squares of X beside the dot in the loop over K, 1/rms scaling each row
// of the result) each k step would scale X's tile in registers, which lost
// to the pair at 4096 k steps (`kg-fuse{rules-off=norm-over-long-k}` folds
// it). For sm_90 the tuned-defaults table makes the product a cuBLAS call,
// measured faster there; with the table off (or for a target without one)
// it is one kernel of 96 tiles of 64 columns, one wave over the SMs, whose
// programs stream the weights unsplit in 128-deep steps over K.
func.func @rmsnorm_matmul(%x: tensor<16x4096xf16>, %gamma: tensor<4096xf16>,
                          %w: tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
  %normed = kg.rms_norm %x weight %gamma normalized_shape [4096] eps 1.0e-6
      : (tensor<16x4096xf16>, tensor<4096xf16>) -> tensor<16x4096xf16>
  %y = kg.matmul %normed, %w : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16>
  return %y : tensor<16x6144xf16>
}
