"""The ops a graph leaves to PyTorch, as PyTorch runs them fastest.

AOTAutograd's decompositions write a dtype conversion as
`prims.convert_element_type`. Inductor compiles it into its kernels; run as
it is, eagerly, a prims op goes through torch's Python reference
implementation (a custom op's dispatch, its meta function, then the aten
copy), tens of microseconds of host time where `aten._to_copy` takes a few.
A decode step of the Llama-3-8B-shaped layers with the dynamic cache left
21 of them to PyTorch (the 0-d host scalars Dynamo passes for Python floats,
converted f64 -> f32), each token. Argument-free rewrite of the graph
PyTorch runs, after partitioning:

    prims.convert_element_type(x, dtype)  =>  aten._to_copy(x, dtype=dtype)

Both give a new tensor of `dtype` with x's values, shape, strides and
device.
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["prims_as_aten"]


def prims_as_aten(module: torch.fx.GraphModule) -> int:
    """Rewrites the prims conversions among `module`'s own nodes (not those
    inside its submodules, kgc's partitions) as aten copies; how many."""
    rewritten = 0
    for node in module.graph.nodes:
        if node.op != "call_function" or \
                node.target is not torch.ops.prims.convert_element_type.default:
            continue
        source, dtype = node.args[0], node.args[1]
        with module.graph.inserting_before(node):
            copy = module.graph.call_function(torch.ops.aten._to_copy.default, (source,),
                                              {"dtype": dtype})
        copy.meta = dict(node.meta)
        node.replace_all_uses_with(copy)
        module.graph.erase_node(node)
        rewritten += 1
    if rewritten:
        module.recompile()
    return rewritten
