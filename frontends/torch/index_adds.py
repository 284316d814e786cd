"""Scatter-adds of rows that PyTorch computes, as an index_add.

AOTAutograd traces an embedding's gradient as `index_put(zeros, [ids],
grad, accumulate=True)`. Where PyTorch computes it (a CUDA scatter-add whose
one-hot product kgc would lose with, `kgc.torch.partition.library_reason`),
its index_put sorts the indices so that repeated ones sum in a fixed order:
some twenty ops a call on the host (bounds checks, linear indices, a radix
sort) and about eight kernels, 0.45 ms of host time in a profile of a small
Llama's training step, where Inductor's generated code adds each row with
atomics in one kernel. `index_add` does the same in PyTorch. Argument-free
rewrite of an aten graph, before partitioning:

    index_put(dest, [ids], values, True)
        =>  index_add(dest, 0, where(ids' < 0, ids' + n, ids'), values')
            ids' = reshape(ids, [-1]), values' = reshape(values, [-1, *row])

for a CUDA `dest` of n rows of static shape `row`, one index tensor (dim 0),
`values` of exactly the indexed shape (no broadcasting) and dtype, where
PyTorch computes the scatter-add, and only while torch's deterministic
algorithms are off: atomics sum repeated indices in no fixed order (so does
Inductor's kernel), and index_add raises in deterministic mode. Dynamo
guards on that mode, so a graph rewritten with it off is not reused with it
on. The `where` gives negative ids the row index_put gives them (index_add
takes [0, n) only); the integer ops are kgc's to fuse.
"""

from __future__ import annotations

import torch
import torch.fx

__all__ = ["scatter_adds_as_index_adds"]

_aten = torch.ops.aten
_SCATTERS = (_aten.index_put.default, _aten._unsafe_index_put.default)


def _row_scatter_add(node: torch.fx.Node) -> bool:
    """Whether `node` is an index_put that adds rows (one index tensor on
    dim 0, values of the indexed shape and dest's dtype) into a CUDA tensor
    of static shape."""
    if node.op != "call_function" or node.target not in _SCATTERS or len(node.args) < 3:
        return False
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    dest, indices, values = node.args[:3]
    if accumulate is not True or not isinstance(dest, torch.fx.Node) or \
            not isinstance(values, torch.fx.Node) or len(indices) != 1 or \
            not isinstance(indices[0], torch.fx.Node):
        return False
    dest_value, values_value, ids_value = (n.meta.get("val") for n in (dest, values, indices[0]))
    if not all(isinstance(v, torch.Tensor) for v in (dest_value, values_value, ids_value)):
        return False
    if dest_value.device.type != "cuda" or dest_value.dim() == 0 or \
            ids_value.dtype not in (torch.int64, torch.int32) or \
            values_value.dtype != dest_value.dtype:
        return False
    shapes = (dest_value.shape, values_value.shape, ids_value.shape)
    if not all(isinstance(d, int) for shape in shapes for d in shape):
        return False  # a dynamic extent: PyTorch's kernel takes any
    return tuple(values_value.shape) == tuple(ids_value.shape) + tuple(dest_value.shape[1:])


def scatter_adds_as_index_adds(module: torch.fx.GraphModule) -> int:
    """Rewrites the row scatter-adds PyTorch computes in `module` as
    index_adds (see the module's docstring); returns how many it rewrote
    (none while torch's deterministic algorithms are on)."""
    from kgc.torch.partition import library_reason

    if torch.are_deterministic_algorithms_enabled():
        return 0
    rewritten = 0
    graph = module.graph
    for node in list(graph.nodes):
        if not _row_scatter_add(node) or library_reason(node) is None:
            continue
        dest, (ids,), values = node.args[:3]
        dest_value, ids_value = dest.meta["val"], ids.meta["val"]
        rows, row = dest_value.shape[0], list(dest_value.shape[1:])
        count = ids_value.numel()
        with graph.inserting_before(node):
            flat = _call(node, _aten.reshape.default, (ids, [-1]), ids_value.reshape(-1))
            negative = _call(node, _aten.lt.Scalar, (flat, 0),
                             torch.empty_like(flat.meta["val"], dtype=torch.bool))
            shifted = _call(node, _aten.add.Tensor, (flat, rows), flat.meta["val"])
            wrapped = _call(node, _aten.where.self, (negative, shifted, flat),
                            flat.meta["val"])
            added = values if list(values.meta["val"].shape) == [count, *row] else \
                _call(node, _aten.reshape.default, (values, [count, *row]),
                      values.meta["val"].reshape(count, *row))
            index_add = _call(node, _aten.index_add.default, (dest, 0, wrapped, added),
                              node.meta["val"])
        node.replace_all_uses_with(index_add)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        module.recompile()
    return rewritten


# What a node of the rewrite keeps of the scatter it replaces: where it came
# from, for torch's and kgc's reports.
_PROVENANCE = ("original_aten", "stack_trace", "seq_nr", "autograd_backward")


def _call(replaced: torch.fx.Node, target, args: tuple, value) -> torch.fx.Node:
    """A node of `target` on `args` in `replaced`'s graph, of example
    value `value`, with `replaced`'s provenance."""
    node = replaced.graph.call_function(target, args)
    node.meta["val"] = value
    node.meta.update({key: replaced.meta[key] for key in _PROVENANCE if key in replaced.meta})
    return node
