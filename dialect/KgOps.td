//===- KgOps.td - every op of the kg dialect ------------------------------===//
//
// The single entry point for mlir-tblgen: op declarations, definitions and
// the Python op builders are all generated from this file.
//
//===----------------------------------------------------------------------===//

#ifndef KG_OPS_TD
#define KG_OPS_TD

include "KgGraphOps.td"
include "KgTileOps.td"

#endif // KG_OPS_TD
