// Pass pipelines in kgc-opt: kgc passes and upstream MLIR passes in one
// --pass-pipeline, nested pipelines, pass flags with options, and the
// errors for unknown passes, unknown options and malformed pipelines.

// kgc and upstream passes in one pipeline on the module.
// RUN: kgc-opt %s --pass-pipeline='builtin.module(kgc-cse,kgc-dce,canonicalize)' | FileCheck %s --check-prefix=MIXED

// An upstream pass nested on each function.
// RUN: kgc-opt %s --pass-pipeline='builtin.module(func.func(cse))' | FileCheck %s --check-prefix=NESTED

// Flags and the textual pipeline they spell give the same output, with and
// without options.
// RUN: kgc-opt %s --kgc-cse --kgc-dce --canonicalize > %t.flags.mlir
// RUN: kgc-opt %s --pass-pipeline='builtin.module(kgc-cse,kgc-dce,canonicalize)' > %t.pipeline.mlir
// RUN: diff %t.flags.mlir %t.pipeline.mlir
// RUN: kgc-opt %s --kgc-cse --canonicalize='max-iterations=2 enable-patterns=Nothing' > %t.flag-options.mlir
// RUN: kgc-opt %s --pass-pipeline='builtin.module(kgc-cse,canonicalize{max-iterations=2 enable-patterns=Nothing})' > %t.pipeline-options.mlir
// RUN: diff %t.flag-options.mlir %t.pipeline-options.mlir

// A pass flag's options reach the upstream pass: with no pattern enabled,
// canonicalize folds constants but does not combine the two additions.
// RUN: kgc-opt %s --canonicalize='max-iterations=2' | FileCheck %s --check-prefix=CANON
// RUN: kgc-opt %s --canonicalize='max-iterations=2 enable-patterns=Nothing' | FileCheck %s --check-prefix=NOPATTERNS

// Errors: each exits non-zero with a message naming the culprit.
// RUN: not kgc-opt %s --no-such-pass 2>&1 | FileCheck %s --check-prefix=ERR-UNKNOWN-PASS
// RUN: not kgc-opt %s --pass-pipeline='builtin.module(kgc-cse,no-such-pass)' 2>&1 | FileCheck %s --check-prefix=ERR-UNKNOWN-PASS
// RUN: not kgc-opt %s --kgc-cse='bogus=1' 2>&1 | FileCheck %s --check-prefix=ERR-KGC-OPTION
// RUN: not kgc-opt %s --pass-pipeline='builtin.module(kgc-dce{bogus=1})' 2>&1 | FileCheck %s --check-prefix=ERR-KGC-OPTION-DCE
// RUN: not kgc-opt %s --canonicalize='max-iterations=many' 2>&1 | FileCheck %s --check-prefix=ERR-UPSTREAM-OPTION
// RUN: not kgc-opt %s --pass-pipeline='builtin.module(kgc-cse' 2>&1 | FileCheck %s --check-prefix=ERR-SYNTAX
// RUN: not kgc-opt %s --pass-pipeline='builtin.module(kgc-cse,)' 2>&1 | FileCheck %s --check-prefix=ERR-SYNTAX-NAME
// RUN: not kgc-opt %s --pass-pipeline='builtin.module(kgc-cse) extra' 2>&1 | FileCheck %s --check-prefix=ERR-SYNTAX-TRAILING
// RUN: not kgc-opt %s '--kgc-cse={bogus}' 2>&1 | FileCheck %s --check-prefix=ERR-FLAG-SYNTAX
// RUN: not kgc-opt %s --kgc-cse --pass-pipeline='builtin.module(kgc-dce)' 2>&1 | FileCheck %s --check-prefix=ERR-BOTH

// The list of kgc's passes with their summaries.
// RUN: kgc-opt --list-passes | FileCheck %s --check-prefix=LIST

// ERR-UNKNOWN-PASS: kgc-opt: error: 'no-such-pass' is not a valid pass
// ERR-UNKNOWN-PASS-SAME: neither a kgc pass
// ERR-UNKNOWN-PASS-NOT: Traceback
// ERR-KGC-OPTION: kgc-opt: error: pass 'kgc-cse' has no option 'bogus' (options: none)
// ERR-KGC-OPTION-NOT: Traceback
// ERR-KGC-OPTION-DCE: kgc-opt: error: pass 'kgc-dce' has no option 'bogus'
// ERR-UPSTREAM-OPTION: 'many' value invalid
// ERR-UPSTREAM-OPTION: kgc-opt: error: 'canonicalize{max-iterations=many}' is not a valid pass
// ERR-SYNTAX: kgc-opt: error: invalid pass pipeline: expected ',' or the end of the pipeline at column 23 of 'builtin.module(kgc-cse'
// ERR-SYNTAX-NAME: kgc-opt: error: invalid pass pipeline: expected a pass or op name at column 24
// ERR-SYNTAX-TRAILING: kgc-opt: error: invalid pass pipeline: {{.*}} at column
// ERR-FLAG-SYNTAX: kgc-opt: error: invalid pass options:
// ERR-FLAG-SYNTAX-NOT: Traceback
// ERR-BOTH: kgc-opt: error: give either --pass-pipeline or pass flags, not both

// LIST: kgc passes
// LIST-DAG: kgc-cse  -  Eliminate common subexpressions
// LIST-DAG: kgc-dce  -  Erase unused side-effect-free ops
// LIST: --canonicalize

// MIXED-LABEL: func.func @duplicates
// MIXED-NEXT: %[[E:.*]] = kg.exp
// MIXED-NEXT: %[[S:.*]] = kg.add %[[E]], %[[E]]
// MIXED-NEXT: return %[[S]]
// Upstream cse merges the kg ops too (they are Pure in ODS), and erases
// the trivially dead kg.neg.
// NESTED-LABEL: func.func @duplicates
// NESTED-NEXT: %[[E:.*]] = kg.exp
// NESTED-NEXT: %[[S:.*]] = kg.add %[[E]], %[[E]]
// NESTED-NEXT: return %[[S]]
func.func @duplicates(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e1 = kg.exp %x : tensor<8xf32>
  %e2 = kg.exp %x : tensor<8xf32>
  %dead = kg.neg %e1 : tensor<8xf32>
  %s = kg.add %e1, %e2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// MIXED-LABEL: func.func @add_constants
// MIXED-NEXT: %[[C:.*]] = arith.constant 3 : i32
// MIXED-NEXT: arith.addi %{{.*}}, %[[C]]
// MIXED-NEXT: return
// CANON-LABEL: func.func @add_constants
// CANON-NEXT: %[[C:.*]] = arith.constant 3 : i32
// CANON-NEXT: arith.addi %{{.*}}, %[[C]]
// CANON-NEXT: return
// NOPATTERNS-LABEL: func.func @add_constants
// NOPATTERNS-NEXT: arith.constant 1 : i32
// NOPATTERNS-NEXT: arith.constant 2 : i32
// NOPATTERNS-NEXT: arith.addi
// NOPATTERNS-NEXT: arith.addi
// NOPATTERNS-NEXT: return
func.func @add_constants(%x: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %0 = arith.addi %x, %c1 : i32
  %1 = arith.addi %0, %c2 : i32
  return %1 : i32
}
