"""kgc: a kernel-graph compiler built on MLIR.

`import kgc` registers the `kg` dialect with the MLIR Python bindings, so
every `mlir.ir.Context` created afterwards parses and builds kg ops, and
`kgc.dialects.kg` holds the op builders generated from the dialect's ODS.
`kgc.Graph` builds kernel graphs from Python and emits them as kg IR;
`kgc.compile` turns a graph into fused GPU kernels callable on torch tensors.
"""

from kgc._dialect import load_dialect, register_dialect
from kgc.dialects import kg
from kgc.graph import GraphError, Tensor
from kgc.api import KernelGraph as Graph, compile, new_kernel_graph, superoptimize
from kgc.diagnostics import KgcError



def explain(model, *example_inputs, **options):
    """Which ops of `model` go into which kgc kernel under
    `torch.compile(model, backend="kgc")`, and which stay with PyTorch and
    why: `kgc.torch.explain` (imported here on first use, so that
    `import kgc` does not import torch)."""
    from kgc.torch import explain as explain_model

    return explain_model(model, *example_inputs, **options)


# Element types by the names Mirage's Python API gives them.
float32, float16, bfloat16, float8_e4m3, float8_e5m2 = "f32", "f16", "bf16", "f8e4m3", "f8e5m2"

__all__ = ["Graph", "GraphError", "KgcError", "Tensor", "compile", "kg", "load_dialect",
           "register_dialect", "superoptimize", "new_kernel_graph", "float32", "float16",
           "bfloat16", "float8_e4m3", "float8_e5m2", "explain"]
__version__ = "0.1.0"
