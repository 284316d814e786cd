// One variable traces a kernel from the kg graph to Triton's last pass:
// MLIR_ENABLE_DUMP=<kernel> prints kgc's passes on that kernel, then
// Triton's (TRITON_ALWAYS_COMPILE: a cached compile prints nothing).
// RUN: env MLIR_ENABLE_DUMP=scale_0_pointwise TRITON_ALWAYS_COMPILE=1 kgc compile %s -o %t 2>&1 >/dev/null | FileCheck %s
// RUN: env MLIR_ENABLE_DUMP=1 kgc compile %s -o %t --emit ttir 2>&1 >/dev/null | FileCheck %s --check-prefix=ALL

// CHECK-NOT: IR Dump After KgDecompose
// CHECK: IR Dump After KgFuse (kg-fuse) ('kg.kernel' operation: @scale_0_pointwise)
// CHECK: IR Dump After KgTile (kg-tile) ('kg.kernel' operation: @scale_0_pointwise)
// CHECK: IR Dump After KgLegalizeDot (kg-legalize-dot) ('kg.kernel' operation: @scale_0_pointwise)
// CHECK: IR Dump After KgPadMask (kg-pad-mask) ('kg.kernel' operation: @scale_0_pointwise)
// CHECK: IR Dump After ConvertKgToTTIR (convert-kg-to-ttir) ('builtin.module' operation: @scale_0_pointwise)
// CHECK: IR Dump After KgcDCE (kgc-dce) ('builtin.module' operation: @scale_0_pointwise)
// CHECK: IR Dump Before ConvertTritonToTritonGPU (convert-triton-to-tritongpu) ('builtin.module' operation: @scale_0_pointwise)

// ALL: IR Dump After KgcCSE (kgc-cse) //----- //
// ALL: IR Dump After KgcDCE (kgc-dce) //----- //
// ALL: IR Dump After KgDecompose (kg-decompose) //----- //
// ALL: IR Dump After KgFuse (kg-fuse) //----- //
// ALL: IR Dump After KgTile (kg-tile) //----- //
// ALL: IR Dump After KgLegalizeDot (kg-legalize-dot) //----- //
// ALL: IR Dump After KgPadMask (kg-pad-mask) //----- //
// ALL: IR Dump After ConvertKgToTTIR (convert-kg-to-ttir) //----- //
// ALL: "tt.func"()

func.func @scale(%x: tensor<17x1000xf16>) -> tensor<17x1000xf16> {
  %two = kg.constant 2.0 : tensor<f16>
  %y = kg.mul %x, %two : (tensor<17x1000xf16>, tensor<f16>) -> tensor<17x1000xf16>
  %z = kg.exp %y : tensor<17x1000xf16>
  return %z : tensor<17x1000xf16>
}
