"""kgc: a kernel-graph compiler built on MLIR.

`import kgc` registers the `kg` dialect with the MLIR Python bindings, so
every `mlir.ir.Context` created afterwards parses and builds kg ops, and
`kgc.dialects.kg` holds the op builders generated from the dialect's ODS.
`kgc.Graph` builds kernel graphs from Python and emits them as kg IR;
`kgc.compile` turns a graph into fused GPU kernels callable on torch tensors.
"""

from kgc._dialect import load_dialect, register_dialect
from kgc.dialects import kg
from kgc.graph import Graph, GraphError, Tensor
from kgc.compile_api import compile
from kgc.diagnostics import KgcError

__all__ = ["Graph", "GraphError", "KgcError", "Tensor", "compile", "kg", "load_dialect",
           "register_dialect"]
__version__ = "0.1.0"
