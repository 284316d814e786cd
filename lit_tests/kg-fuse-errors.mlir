// Partitions that kg-fuse refuses, given as kg.fusion_group attributes (ops
// of one number make one kernel) or as the `partition` option; each error
// names the op at fault and why.
// RUN: kgc-opt %s --split-input-file --kg-fuse --verify-diagnostics
// The option's partition is checked against the last function of this file:
// RUN: sed -n '/^\/\/ OPTION ERRORS$/,$p' %s > %t.mlir
// RUN: not kgc-opt %t.mlir --kg-fuse='partition=0;1;5' 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: kg-fuse: partition '0;1;5' of @options: op 5 does not exist; the function has 3 fusable ops (0 to 2)
// RUN: not kgc-opt %t.mlir --kg-fuse='partition=0,1;1,2' 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: mlir:{{[0-9]+}}:8: error: kg-fuse: partition '0,1;1,2' of @options: op 1 (kg.relu) is in groups 0 and 1
// RUN: not kgc-opt %t.mlir --kg-fuse='partition=0,1' 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: mlir:{{[0-9]+}}:8: error: kg-fuse: partition '0,1' of @options: op 2 (kg.neg) is in no group
// RUN: not kgc-opt %t.mlir --kg-fuse='partition=0-2' 2>&1 | FileCheck %s --check-prefix=SYNTAX
// SYNTAX: error: kg-fuse: partition '0-2': group 0 has '0-2' where an op position (a non-negative integer) belongs; groups are separated by ';', positions by ','
// RUN: not kgc-opt %t.mlir --kg-fuse='function=other partition=0,1,2' 2>&1 | FileCheck %s --check-prefix=NOFUNC
// NOFUNC: error: kg-fuse: no function @other to partition

// Some ops say their kernel and one does not.
func.func @unnumbered(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %x {kg.fusion_group = 0} : tensor<16x128xf32>
  // expected-error @+1 {{kg-fuse: op 1 (kg.relu) has no kg.fusion_group, while other ops of @unnumbered have one}}
  %r = kg.relu %e : tensor<16x128xf32>
  return %r : tensor<16x128xf32>
}

// -----

func.func @not_an_integer(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{kg-fuse: kg.fusion_group must be an integer, got "a"}}
  %e = kg.exp %x {kg.fusion_group = "a"} : tensor<16x128xf32>
  return %e : tensor<16x128xf32>
}

// -----

// Group 0 holds the exp and the add, group 1 the relu between them: each
// reads the other's result.
func.func @cycle(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %a = kg.exp %x {kg.fusion_group = 0} : tensor<16x128xf32>
  // expected-error @+1 {{kg-fuse: partition '0,2;1' of @cycle: groups 0 <- 1 <- 0 read each other's results in a cycle; no order of their kernels works}}
  %b = kg.relu %a {kg.fusion_group = 1} : tensor<16x128xf32>
  %c = kg.add %a, %b {kg.fusion_group = 0} : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %c : tensor<16x128xf32>
}

// -----

// The user's kernel reads the exp and the add reads the user's kernel: one
// kernel for both would run before and after it.
func.func @around_user_kernel(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %a = kg.exp %x {kg.fusion_group = 0} : tensor<16x128xf32>
  %u = kg.kernel @mine(%a) : (tensor<16x128xf32>) -> tensor<16x128xf32> {
  ^bb0(%p: tensor<16x128xf32>):
    %r = kg.relu %p : tensor<16x128xf32>
    kg.yield %r : tensor<16x128xf32>
  }
  // expected-error @+1 {{kg-fuse: partition '0,1' of @around_user_kernel: group 0 must run both before and after the kg.kernel that stays in place (it feeds it and reads its result)}}
  %c = kg.add %a, %u {kg.fusion_group = 0} : (tensor<16x128xf32>, tensor<16x128xf32>) -> tensor<16x128xf32>
  return %c : tensor<16x128xf32>
}

// -----

// A softmax over rows of 512 scores does not fit a matmul's epilogue.
func.func @unplannable(%x: tensor<64x64xf32>, %w: tensor<64x512xf32>) -> tensor<64x1xf32> {
  %s = kg.matmul %x, %w {kg.fusion_group = 0} : (tensor<64x64xf32>, tensor<64x512xf32>) -> tensor<64x512xf32>
  // expected-error @+1 {{kg-fuse: partition '0,1' of @unplannable: group 0 (ops 0,1) cannot be one kernel: the epilogue reduces over n = 512, wider than 256 columns fit in one tile}}
  %m = kg.reduce max %s dims [1] keepdim {kg.fusion_group = 0} : tensor<64x512xf32> -> tensor<64x1xf32>
  return %m : tensor<64x1xf32>
}

// -----

// A constant is copied into every kernel that reads it: it is no kernel's.
func.func @numbered_constant(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  // expected-error @+1 {{kg-fuse: partition '0,1' of @numbered_constant: op 0 (kg.constant) is a constant, which is copied into every kernel that uses it; leave it out of the partition}}
  %c = kg.constant 2.0 {kg.fusion_group = 0} : tensor<f32>
  %y = kg.mul %x, %c {kg.fusion_group = 0} : (tensor<16x128xf32>, tensor<f32>) -> tensor<16x128xf32>
  return %y : tensor<16x128xf32>
}

// -----

// OPTION ERRORS
// With no option, this function is one kernel and nothing is reported.
func.func @options(%x: tensor<16x128xf32>) -> tensor<16x128xf32> {
  %e = kg.exp %x : tensor<16x128xf32>
  %r = kg.relu %e : tensor<16x128xf32>
  %n = kg.neg %r : tensor<16x128xf32>
  return %n : tensor<16x128xf32>
}
