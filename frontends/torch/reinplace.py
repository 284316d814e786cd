"""Scatter-adds that PyTorch computes into a tensor made for them, in place.

The aten graphs AOTAutograd gives are functional: an embedding's gradient
is `index_put(full(0), [ids], grad, accumulate=True)`, which PyTorch runs
as a copy of the zeros followed by the scatter-add into the copy. Where
both ops stay with PyTorch (a scatter-add its sorted-index kernel computes,
`kgc.torch.partition.library_reason`) and nothing else reads the fresh
tensor, the copy is wasted: the Llama-3-8B-shaped training step copied
32000 x 4096 f32 zeros each step (0.24 ms on an H200). Argument-free
rewrite of the graph PyTorch runs, after partitioning:

    index_put(full(...), indices, values, accumulate)
        =>  index_put_(full(...), indices, values, accumulate)
    index_add(full(...), dim, index, values)
        =>  index_add_(full(...), dim, index, values)
            (the full read by nothing else)

The result is the same tensor with the same values: the in-place op
returns the tensor it filled. Scatter-adds into anything else (a graph
input, a tensor another op reads, a result of a kgc kernel) are left as
they are.
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["scatter_adds_in_place", "sole_scatter"]

_aten = torch.ops.aten
# Ops that make a new tensor from no tensor.
_FRESH_TENSORS = (_aten.full.default, _aten.zeros.default)
_SCATTERS = (_aten.index_put.default, _aten._unsafe_index_put.default, _aten.index_add.default)
# Each scatter's in-place form.
_IN_PLACE = {_aten.index_put.default: _aten.index_put_.default,
             _aten._unsafe_index_put.default: _aten.index_put_.default,
             _aten.index_add.default: _aten.index_add_.default}


def sole_scatter(node: torch.fx.Node) -> torch.fx.Node | None:
    """The scatter that alone reads `node`, a fresh tensor, as its
    destination; None where `node` is no fresh tensor or other ops (or
    the scatter's other operands) read it."""
    if node.op != "call_function" or node.target not in _FRESH_TENSORS or len(node.users) != 1:
        return None
    (scatter,) = node.users
    if scatter.target not in _SCATTERS or scatter.args[0] is not node \
            or node in scatter.args[1:] or node in scatter.kwargs.values():
        return None
    return scatter


def scatter_adds_in_place(module: torch.fx.GraphModule) -> int:
    """Rewrites `module`'s scatters into fresh tensors read by nothing else
    to their in-place form; returns how many it rewrote."""
    rewritten = 0
    for node in module.graph.nodes:
        destination = node.args[0] if node.op == "call_function" and node.args else None
        if isinstance(destination, torch.fx.Node) and sole_scatter(destination) is node:
            node.target = _IN_PLACE[node.target]
            rewritten += 1
    if rewritten:
        module.recompile()
    return rewritten
