"""Views that PyTorch takes between kgc's kernels, called as tensor methods.

The graph PyTorch runs after partitioning keeps the views of kgc's results
(a cast weight transposed and saved for the backward, an attention
output's heads merged into rows) and of its inputs. Each is an aten op
called through its overload object (`torch.ops.aten.permute.default`),
which goes through a Python `__call__` and the dispatcher's argument
handling: measured on an H200's host, about 11 us a view, and 0.5 ms of
each training step of the model suite's Llama (some 45 views), for no GPU
work. The tensor's own method computes the same view in a single call
into C++. Argument-free rewrite of the graph PyTorch runs, after
partitioning:

    aten.permute.default(x, dims)       =>  x.permute(dims)
    aten.view.default(x, size)          =>  x.view(size)
    aten.reshape.default(x, shape)      =>  x.reshape(shape)
    aten.expand.default(x, size)        =>  x.expand(size)
    aten.unsqueeze.default(x, d)        =>  x.unsqueeze(d)
    aten.squeeze.dim(x, d)              =>  x.squeeze(d)
    aten.t.default(x)                   =>  x.t()
    aten.transpose.int(x, a, b)         =>  x.transpose(a, b)

Each method is the op's own binding, so the result (sizes, strides,
storage offset, the aliasing of its input) is the same. Left alone: views
with keyword arguments (`expand`'s implicit flag), ops whose method differs
from the op or that have none (`alias`, `_unsafe_view`, `slice`,
`select`), and any op that computes.
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["views_as_methods"]

_aten = torch.ops.aten
# Each view op, and the Tensor method that computes it.
_METHODS = {
    _aten.permute.default: "permute",
    _aten.view.default: "view",
    _aten.reshape.default: "reshape",
    _aten.expand.default: "expand",
    _aten.unsqueeze.default: "unsqueeze",
    _aten.squeeze.dim: "squeeze",
    _aten.t.default: "t",
    _aten.transpose.int: "transpose",
}


def views_as_methods(module: torch.fx.GraphModule) -> int:
    """Rewrites `module`'s view ops as method calls (see the module's
    docstring), in place; the number rewritten. The caller recompiles."""
    rewritten = 0
    for node in module.graph.nodes:
        method = _METHODS.get(node.target) if node.op == "call_function" else None
        if method is None or node.kwargs or not node.args:
            continue
        if not isinstance(node.args[0], torch.fx.Node):
            continue
        node.op, node.target = "call_method", method
        rewritten += 1
    return rewritten
