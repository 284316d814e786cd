// IR printing around passes: MLIR_ENABLE_DUMP (all functions, or one by
// name), kgc-opt's --mlir-print-ir-* flags, and --mlir-timing. Dumps go to
// stderr; the module on stdout is thrown away.

// One "IR Dump After" per pass, kgc and upstream alike, named as MLIR names
// them; a nested pass dumps each op it ran on.
// RUN: env MLIR_ENABLE_DUMP=1 kgc-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(kgc-cse,kgc-dce,canonicalize,func.func(cse))' 2> %t.dump > /dev/null
// RUN: FileCheck %s --check-prefix=ALL --input-file=%t.dump
// RUN: FileCheck %s --check-prefix=FIVE --input-file=%t.dump
// --mlir-print-ir-after-all prints the same.
// RUN: kgc-opt %s --allow-unregistered-dialect --mlir-print-ir-after-all --pass-pipeline='builtin.module(kgc-cse,kgc-dce,canonicalize,func.func(cse))' 2> %t.after-all > /dev/null
// RUN: FileCheck %s --check-prefix=ALL --input-file=%t.after-all
// RUN: FileCheck %s --check-prefix=FIVE --input-file=%t.after-all

// MLIR_ENABLE_DUMP=<name> prints only the function of that name, after each
// pass, also a tt.func whose name is a property in Triton's generic form.
// RUN: env MLIR_ENABLE_DUMP=second kgc-opt %s --allow-unregistered-dialect --kgc-cse --kgc-dce 2>&1 >/dev/null | FileCheck %s --check-prefix=ONE
// RUN: env MLIR_ENABLE_DUMP=tt_kernel kgc-opt %s --allow-unregistered-dialect --kgc-cse 2>&1 >/dev/null | FileCheck %s --check-prefix=TT

// Printing before or after chosen passes only.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse --kgc-dce --mlir-print-ir-before=kgc-dce 2>&1 >/dev/null | FileCheck %s --check-prefix=BEFORE
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse --kgc-dce --canonicalize --mlir-print-ir-after=kgc-cse,canonicalize 2>&1 >/dev/null | FileCheck %s --check-prefix=AFTER

// The timing report MLIR prints when the pass manager is done.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse --kgc-dce --canonicalize --mlir-timing 2>&1 >/dev/null | FileCheck %s --check-prefix=TIMING

// Without any of these, nothing is printed to stderr.
// RUN: kgc-opt %s --allow-unregistered-dialect --kgc-cse --canonicalize 2> %t.stderr > /dev/null
// RUN: echo -n > %t.empty
// RUN: diff %t.empty %t.stderr

// Five dumps, no more: one per pass on the module, one per function for
// the nested cse.
// FIVE-COUNT-5: // -----// IR Dump
// FIVE-NOT: IR Dump

// ALL: // -----// IR Dump After KgcCSE (kgc-cse) //----- //
// ALL-NEXT: module {
// ALL: // -----// IR Dump After KgcDCE (kgc-dce) //----- //
// ALL-NEXT: module {
// ALL: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// ALL-NEXT: module {
// ALL: // -----// IR Dump After CSE (cse) ('func.func' operation: @first) //----- //
// ALL-NEXT: func.func @first
// ALL: // -----// IR Dump After CSE (cse) ('func.func' operation: @second) //----- //
// ALL-NEXT: func.func @second

// ONE-NOT: @first
// ONE: // -----// IR Dump After KgcCSE (kgc-cse) ('func.func' operation: @second) //----- //
// ONE-NEXT: func.func @second
// ONE-NOT: @first
// ONE: // -----// IR Dump After KgcDCE (kgc-dce) ('func.func' operation: @second) //----- //
// ONE-NEXT: func.func @second
// ONE-NOT: IR Dump
// ONE-NOT: @first

// TT-NOT: func.func
// TT: // -----// IR Dump After KgcCSE (kgc-cse) ('tt.func' operation: @tt_kernel) //----- //
// TT-NEXT: "tt.func"() <{{.*}}sym_name = "tt_kernel"
// TT-NOT: IR Dump

// The IR before kgc-dce is that after kgc-cse: one kg.exp, the dead kg.neg.
// BEFORE: // -----// IR Dump Before KgcDCE (kgc-dce) //----- //
// BEFORE: func.func @first
// BEFORE-NEXT: kg.exp
// BEFORE-NEXT: kg.neg
// BEFORE-NOT: IR Dump

// AFTER: // -----// IR Dump After KgcCSE (kgc-cse) //----- //
// AFTER-NOT: KgcDCE
// AFTER: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// AFTER-NOT: IR Dump

// TIMING: ... Execution time report ...
// TIMING: Total Execution Time:
// TIMING: ----Wall Time----  ----Name----
// TIMING-DAG: KgcCSE
// TIMING-DAG: KgcDCE
// TIMING-DAG: Canonicalizer
// TIMING: Total

func.func @first(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e1 = kg.exp %x : tensor<8xf32>
  %e2 = kg.exp %x : tensor<8xf32>
  %dead = kg.neg %e2 : tensor<8xf32>
  %s = kg.add %e1, %e2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

func.func @second(%x: tensor<8xf32>) -> tensor<8xf32> {
  %n = kg.neg %x : tensor<8xf32>
  return %n : tensor<8xf32>
}

"tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "tt_kernel"}> ({
^bb0(%p: !tt.ptr<f32>):
  "tt.return"() : () -> ()
}) : () -> ()
