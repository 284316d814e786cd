// MLIR_ENABLE_DUMP=<kernel> follows the kernel into those kg-tile makes of
// it (split-K's _partials and _reduce) down to Triton's passes, and lets
// through no dump of any other kernel, Triton's software pipeliner's
// included. MLIR_DUMP_PATH ends up with kgc's dumps and Triton's.
// RUN: env MLIR_ENABLE_DUMP=two_0_matmul TRITON_ALWAYS_COMPILE=1 kgc compile %s -o %t 2>&1 >/dev/null | FileCheck %s
// RUN: env MLIR_ENABLE_DUMP=two_1_pointwise TRITON_ALWAYS_COMPILE=1 kgc compile %s -o %t 2>&1 >/dev/null | FileCheck %s --check-prefix=OTHER
// RUN: rm -f %t.dump
// RUN: env MLIR_DUMP_PATH=%t.dump MLIR_ENABLE_DUMP=two_0_matmul TRITON_ALWAYS_COMPILE=1 kgc compile %s -o %t 2>&1 >/dev/null | FileCheck %s --check-prefix=QUIET --allow-empty
// RUN: FileCheck %s --input-file %t.dump

// CHECK: IR Dump After KgFuse (kg-fuse) ('kg.kernel' operation: @two_0_matmul)
// CHECK: IR Dump After KgTile (kg-tile) ('kg.kernel' operation: @two_0_matmul_partials)
// CHECK: IR Dump After KgTile (kg-tile) ('kg.kernel' operation: @two_0_matmul_reduce)
// CHECK: IR Dump After KgcDCE (kgc-dce) ('builtin.module' operation: @two_0_matmul_reduce)
// CHECK: IR Dump Before ConvertTritonToTritonGPU (convert-triton-to-tritongpu) ('builtin.module' operation: @two_0_matmul_partials)
// CHECK: IR Dump Before ConvertTritonToTritonGPU (convert-triton-to-tritongpu) ('builtin.module' operation: @two_0_matmul_reduce)

// Triton's pipeliner prints its own dumps of every kernel it compiles,
// whatever the name asked for: only the pointwise kernel's may show.
// OTHER: IR Dump After KgFuse (kg-fuse) ('kg.kernel' operation: @two_1_pointwise)
// OTHER-NOT: two_0_matmul
// OTHER-NOT: SoftwarePipeliner
// OTHER: IR Dump Before ConvertTritonToTritonGPU (convert-triton-to-tritongpu) ('builtin.module' operation: @two_1_pointwise)
// OTHER: SoftwarePipeliner internal IR Dump After: LowerLoops
// OTHER-NOT: SoftwarePipeliner internal IR Dump After: LowerLoops
// OTHER-NOT: two_0_matmul

// QUIET-NOT: IR Dump

func.func @two(%x: tensor<3x4096xf16>, %w: tensor<4096x2048xf16>, %v: tensor<17x1000xf32>)
    -> (tensor<3x2048xf16>, tensor<17x1000xf32>) {
  %y = kg.matmul %x, %w : (tensor<3x4096xf16>, tensor<4096x2048xf16>) -> tensor<3x2048xf16>
  %e = kg.exp %v : tensor<17x1000xf32>
  return %y, %e : tensor<3x2048xf16>, tensor<17x1000xf32>
}
