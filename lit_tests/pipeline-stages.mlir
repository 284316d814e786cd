// Every intermediate form of the lowering prints and parses back: running
// the passes one kgc-opt at a time gives what one run of all of them gives.
// RUN: kgc-opt %s --kg-decompose --kg-fuse --kg-tile --kg-legalize-dot --kg-pad-mask --convert-kg-to-ttir --kgc-cse --kgc-dce > %t.once.mlir
// RUN: kgc-opt %s --kg-decompose \
// RUN:   | kgc-opt --kg-fuse \
// RUN:   | kgc-opt --kg-tile \
// RUN:   | kgc-opt --kg-legalize-dot \
// RUN:   | kgc-opt --kg-pad-mask \
// RUN:   | kgc-opt --convert-kg-to-ttir \
// RUN:   | kgc-opt --allow-unregistered-dialect --kgc-cse --kgc-dce > %t.steps.mlir
// RUN: diff %t.once.mlir %t.steps.mlir
// RUN: FileCheck %s --input-file=%t.steps.mlir

// CHECK: kg.launch @rmsnorm_matmul_0_reduction
// CHECK: kg.launch @rmsnorm_matmul_1_matmul
// CHECK: module @rmsnorm_matmul_1_matmul
// CHECK: "tt.dot"
func.func @rmsnorm_matmul(%x: tensor<33x1000xf16>, %gamma: tensor<1000xf16>, %w: tensor<1000x100xf16>) -> tensor<33x100xf16> {
  %n = kg.rms_norm %x weight %gamma normalized_shape [1000] eps 1.0e-6 : (tensor<33x1000xf16>, tensor<1000xf16>) -> tensor<33x1000xf16>
  %y = kg.matmul %n, %w : (tensor<33x1000xf16>, tensor<1000x100xf16>) -> tensor<33x100xf16>
  return %y : tensor<33x100xf16>
}
