//===- CAPI.cpp - C entry point that registers the kg dialect -------------===//
//
// The Python package loads this library with ctypes and hands it the
// MlirDialectRegistry of the MLIR Python bindings, so that every Context the
// bindings create knows the kg dialect. No Python extension module is built:
// the library links against the bindings' libMLIRPythonCAPI.so and shares
// its single copy of MLIR.
//
//===----------------------------------------------------------------------===//

#include "KgDialect.h"

#include "mlir/CAPI/IR.h"

extern "C" {

__attribute__((visibility("default"))) void
kgcRegisterKgDialect(MlirDialectRegistry registry) {
  unwrap(registry)->insert<kgc::kg::KgDialect>();
}

__attribute__((visibility("default"))) void
kgcLoadKgDialect(MlirContext context) {
  unwrap(context)->getOrLoadDialect<kgc::kg::KgDialect>();
}
}
