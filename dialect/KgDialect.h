//===- KgDialect.h - the kg dialect -----------------------------*- C++ -*-===//
//
// Declarations generated from KgOps.td, gathered in one header.
//
//===----------------------------------------------------------------------===//

#ifndef KGC_DIALECT_KGDIALECT_H
#define KGC_DIALECT_KGDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/IR/SymbolTable.h"

#include "KgEnums.h.inc"

#include "KgDialect.h.inc"

#define GET_OP_CLASSES
#include "KgOps.h.inc"

#endif // KGC_DIALECT_KGDIALECT_H
