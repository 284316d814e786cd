"""kgc.torch: the PyTorch front end.

    compiled = torch.compile(model, backend="kgc")          # no `import kgc` needed
    compiled = torch.compile(model, backend="kgc", options={"mode": "max-autotune"})
    kgc.explain(model, x)     # which ops go into which kgc kernel, which stay and why

It owns the TorchDynamo backend (`kgc.torch.backend`), the conversion of aten
ops to kg ops (`kgc.torch.convert`, a table with a row per aten op), the
partitioning of aten graphs into the parts kgc computes and the rest
(`kgc.torch.partition`), dynamic dims compiled once as a kernel graph's
dynamic extent (`kgc.torch.extents`) or else per power-of-two bucket
(`kgc.torch.buckets`), and the explain report (`kgc.torch.explain`).

The package is named after the framework it serves; inside it `import torch`
is PyTorch (imports are absolute).
"""

from __future__ import annotations

from kgc.torch.backend import Backend, GraphReport, KgcFallbackWarning, backend, reports
from kgc.torch.convert import CONVERTERS, Unsupported, convert_graph, unsupported_reason
from kgc.torch.explain import Explanation, explain
from kgc.torch.partition import plan_partitions

__all__ = ["Backend", "CONVERTERS", "Explanation", "GraphReport", "KgcFallbackWarning",
           "Unsupported", "backend", "convert_graph", "explain", "plan_partitions", "reports",
           "unsupported_reason"]
