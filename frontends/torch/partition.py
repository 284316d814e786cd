"""Which nodes of an aten FX graph kgc computes, grouped into partitions.

    plan = plan_partitions(gm)
    plan.partitions       # lists of nodes, each to become one kernel graph
    plan.fallbacks        # node -> why PyTorch keeps it

    plan_partitions(gm, refused={"mm_1": "its kernel failed to compile"})

A node is supported when `kgc.torch.convert` converts it (the check converts
it alone on inputs of its operands' types). torch's
`CapabilityBasedPartitioner` groups connected supported nodes into
partitions without cycles. Then each partition is trimmed:

* a view, copy or same-dtype cast whose operands all come from outside the
  partition and whose users are all outside it is given back to PyTorch,
  where it costs nothing, instead of becoming a copy kernel (or a result
  that aliases an input);
* a view, copy or cast that only produces a result of the partition is
  given back too: PyTorch applies it to kgc's result without a kernel;
* a partition left with no computing op (only views) is dropped.

Before grouping, empty operands of a concatenation are dropped from it (torch
skips them too): a slice that comes out empty (a rotary embedding over the
whole head leaves its pass-through part empty) is an op PyTorch keeps, and as
an operand of a cat in a partition it cut the partition around it. Left
without users it is erased (it computes nothing anyone reads).

The CUDA attention ops' backward (flash, memory-efficient, cuDNN) stays
with PyTorch, which runs its fused backward kernel for them
(`LIBRARY_BACKWARD`): kgc converts them (the CPU executor checks that
conversion), but its products and elementwise ops from the saved
logsumexp lost to that kernel seventy times over on a GPU. Their forward
ops stay with it too where the backward saves their logsumexp
(`LIBRARY_FORWARD`): its kernel gives the logsumexp with the output, kgc's
attention kernel the output alone. So does a
scatter-add of many indices into a CUDA tensor (an embedding's gradient,
`SORTED_SCATTER_ADD_MACS`): kgc adds rows by a one-hot product, where
PyTorch sorts the indices and adds each row once. The zeros it adds into
stay with it when nothing else reads them, and are filled in place
(`kgc.torch.reinplace`).

Ops over dynamic extents are supported when they can run padded to a bucket
of them (`kgc.torch.buckets`), or a kernel graph compiled once holds them
where no bucket could (`kgc.torch.extents.takes_once`: a size such as
`s + 1`, attention over a growing cache's keys), and a kernel graph can hold
them for every value of the size (`kgc.torch.extents.extent_reason`); they
are checked at the extents' example values. A partition whose ops hold two dynamic sizes,
none both, is cut into pieces of one size each, so that each compiles once
(`_split_by_dynamic_size`).

Trimming repeats until nothing changes. Removing such a node cannot make a
cycle: its operands come from outside the partition, or it has no user
inside it.
"""

from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from kgc.torch.buckets import bucket_reason, dynamic_expressions, symbols_of
from kgc.torch.convert import is_compute, size_bindings, unsupported_reason
from kgc.torch.extents import extent_reason, takes_once, tied_sizes
from kgc.torch.reinplace import sole_scatter

__all__ = ["KgcSupport", "LIBRARY_BACKWARD", "LIBRARY_FORWARD", "PartitionPlan",
           "SORTED_SCATTER_ADD_MACS", "library_reason", "plan_partitions"]

_aten = torch.ops.aten
_CONVERSIONS = (_aten._to_copy.default, torch.ops.prims.convert_element_type.default)
# Ops PyTorch computes with a fused backward kernel that kgc's conversion
# loses to: the attention backward of the Llama-3-8B-shaped training step
# took 13.3 ms of kgc's 31.0 ms of GPU time (products recomputing P from
# the logsumexp, the keys' and values' gradients summed over each group),
# where cuDNN's backward kernel took 0.19 ms (an H200; benchmarks/NOTES.md).
LIBRARY_BACKWARD = {
    _aten._scaled_dot_product_flash_attention_backward.default: "flash attention's",
    _aten._scaled_dot_product_efficient_attention_backward.default:
        "memory-efficient attention's",
    _aten._scaled_dot_product_cudnn_attention_backward.default: "cuDNN's",
}

# CUDA's fused attention ops: where the backward saves their logsumexp
# (result 1), PyTorch's kernel gives it with the output in one pass, and its
# fused backward (above) reads both. kgc's attention kernel gives the output
# only; the logsumexp as well took it an unfused product, softmax and
# product: 1.21 ms of the Llama-3-8B-shaped training step's forward against
# cuDNN's 0.07 ms (an H200; benchmarks/NOTES.md).
LIBRARY_FORWARD = {
    _aten._scaled_dot_product_flash_attention.default: "flash attention's",
    _aten._scaled_dot_product_efficient_attention.default: "memory-efficient attention's",
    _aten._scaled_dot_product_cudnn_attention.default: "cuDNN's",
}


# A CUDA scatter-add whose one-hot product (indices x rows x width
# multiply-adds) is larger than this stays with PyTorch's sorted-index
# kernel: the embedding gradient of the Llama-3-8B-shaped training step (512
# ids into 32000 rows of 4096) took 2.7 ms as kgc's product against 0.11 ms
# there (an H200; benchmarks/NOTES.md). Below it the product is a few
# microseconds and fuses with what makes the rows.
SORTED_SCATTER_ADD_MACS = 1 << 24


def library_reason(node: torch.fx.Node) -> str | None:
    """Why PyTorch's own kernel computes `node` though kgc converts it;
    None where kgc's is the one to run."""
    if node.op != "call_function":
        return None
    scatter = sole_scatter(node)
    if scatter is not None and library_reason(scatter) is not None:
        # Made by PyTorch too, it is filled in place rather than copied
        # (kgc.torch.reinplace).
        return "PyTorch makes it for the scatter-add it computes, which fills it in place"
    if node.target in LIBRARY_BACKWARD:
        return (f"PyTorch runs {LIBRARY_BACKWARD[node.target]} fused backward kernel for it, "
                "which kgc's products for the attention backward lose to")
    if node.target in LIBRARY_FORWARD and any(
            user.target is operator.getitem and user.args[1] == 1 and user.users
            for user in node.users):
        return (f"its logsumexp is saved for the backward: PyTorch runs "
                f"{LIBRARY_FORWARD[node.target]} fused kernel, which gives it with the output, "
                "where kgc's attention kernel gives the output alone")
    if node.target is _aten.index_add.default:
        # Only `kgc.torch.index_adds` makes one, from a scatter-add the
        # rule below leaves with PyTorch.
        destination = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) \
            else None
        if isinstance(destination, torch.Tensor) and destination.device.type == "cuda":
            return ("a scatter-add of rows PyTorch's index_add computes with atomics, "
                    "where kgc would add them by a one-hot product")
        return None
    if node.target in (_aten.index_put.default, _aten._unsafe_index_put.default):
        accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
        destination = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) \
            else None
        if accumulate is not True or not isinstance(destination, torch.Tensor) or \
                destination.device.type != "cuda":
            return None
        indices = [i.meta.get("val") for i in node.args[1] if isinstance(i, torch.fx.Node)]
        counts = [i.numel() for i in indices if isinstance(i, torch.Tensor)]
        size = destination.numel()
        if not counts or not all(isinstance(n, int) for n in [*counts, size]):
            return None  # a dynamic extent: the bucket's own rules
        count = max(counts)
        if count > 1 and count * size > SORTED_SCATTER_ADD_MACS:
            return (f"a scatter-add of {count} indices into {tuple(destination.shape)}: kgc adds "
                    "them by a one-hot product, PyTorch by its sorted-index kernel, which is "
                    "far faster at this size")
    return None


class KgcSupport(OperatorSupportBase):
    """torch's operator-support interface over kgc's converters; the reason
    of each refusal is kept for `kgc.explain`."""

    def __init__(self, devices: tuple[str, ...] | None = ("cuda",),
                 refused: dict[str, str] | None = None):
        self.devices = devices
        self.refused = refused or {}
        self.reasons: dict[torch.fx.Node, str] = {}
        self._answers: dict[torch.fx.Node, bool] = {}

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        if node in self._answers:
            return self._answers[node]
        reason = self.refused.get(node.name)
        if reason is None:
            reason = library_reason(node)
        if reason is None and node.op == "call_function":
            reason = bucket_reason(node)
            if reason is not None and takes_once(node):
                reason = None  # a kernel graph compiled once for every size holds it
            reason = reason or extent_reason(node)
        if reason is None:
            # Dynamic extents are checked at their example values: each
            # bucket converts the same ops.
            with size_bindings(_hints(node)):
                reason = unsupported_reason(node)
        if reason is None and self.devices is not None:
            # Its result and what it reads: PyTorch lets a CUDA op read a
            # CPU tensor (a 0-d scalar, the positions of an index_put), a
            # kgc kernel cannot. A 0-d one (a Python float Dynamo passes as
            # a tensor) reaches the kernels on their device at each call
            # (`ConvertedGraph.graph_arguments`); other CPU tensors do not.
            value = node.meta.get("val")
            values = [value[0] if isinstance(value, (tuple, list)) else value]
            if self._converts_host_scalar_for_kernels(node):
                # Its result then reaches only kernels, made on their device.
                values = []
            operands = [argument.meta.get("val") for argument in node.all_input_nodes]
            values += [v for v in operands
                       if not (isinstance(v, torch.Tensor) and v.dim() == 0)]
            for tensor in values:
                if isinstance(tensor, torch.Tensor) and tensor.device.type not in self.devices:
                    reason = (f"it reads or makes tensors on {tensor.device.type}; kgc kernels "
                              f"run on {' and '.join(self.devices)} devices")
                    break
        if reason is not None and node.op == "call_function":
            self.reasons[node] = reason
        self._answers[node] = reason is None
        return reason is None

    def _converts_host_scalar_for_kernels(self, node: torch.fx.Node) -> bool:
        """Whether `node` converts a host scalar's dtype (a Python float
        Dynamo passes as a 0-d float64 CPU tensor, made f32 for the ops
        that read it) and only kgc ops read the result: a kernel graph then
        takes the scalar and converts it as it passes it (`ConvertedGraph.
        graph_arguments`), where PyTorch would run an op per conversion per
        call."""
        if not converts_host_scalar(node) or not node.users:
            return False
        self._answers[node] = False  # a user's check that comes back here refuses
        try:
            return all(user.op == "call_function" and self.is_node_supported({}, user)
                       for user in node.users)
        finally:
            del self._answers[node]


def converts_host_scalar(node: torch.fx.Node) -> bool:
    """Whether `node` converts a 0-d CPU tensor's dtype, on the host."""
    if node.op != "call_function" or node.target not in _CONVERSIONS or not node.args \
            or not isinstance(node.args[0], torch.fx.Node):
        return False
    source, value = node.args[0].meta.get("val"), node.meta.get("val")
    return all(isinstance(v, torch.Tensor) and v.dim() == 0 and v.device.type == "cpu"
               for v in (source, value))


def _hints(node: torch.fx.Node) -> dict:
    """size expression (a symbol, or `s0 + 1`) -> the example value torch
    traced it with."""
    hints = {}
    if not symbols_of(node):
        return hints
    for source in [*node.all_input_nodes, node]:
        value = source.meta.get("val")
        values = value if isinstance(value, (tuple, list)) else (value,)
        for item in values:
            sizes = item.shape if isinstance(item, torch.Tensor) else (
                (item,) if isinstance(item, torch.SymInt) else ())
            for d in sizes:
                if isinstance(d, torch.SymInt) and d.node.expr.free_symbols:
                    hints[d.node.expr] = d.node.hint
    return hints


@dataclasses.dataclass
class PartitionPlan:
    partitions: list[list[torch.fx.Node]]
    # Tensor ops PyTorch computes, with why (getitems of their results and
    # the arithmetic of symbolic sizes are not counted).
    fallbacks: dict[torch.fx.Node, str]
    # Views and copies given back to PyTorch, which does them without a kernel.
    views: list[torch.fx.Node]


def plan_partitions(module: torch.fx.GraphModule,
                    devices: tuple[str, ...] | None = ("cuda",),
                    refused: dict[str, str] | None = None) -> PartitionPlan:
    """`refused`: node name -> why PyTorch keeps it though it converts (its
    kernel failed to compile)."""
    support = KgcSupport(devices, refused)
    _drop_empty_cat_operands(module)
    _drop_same_dtype_scalar_conversions(module)
    tied = tied_sizes(module.graph.nodes)
    partitioner = CapabilityBasedPartitioner(module, support, allows_single_node_partition=True)
    proposed = partitioner.propose_partitions()
    order = {node: index for index, node in enumerate(module.graph.nodes)}
    partitions = []
    fallbacks = {node: why for node, why in support.reasons.items() if _counts(node)}
    views = []
    for partition in proposed:
        for piece in _split_by_dynamic_size(set(partition.nodes), module, tied):
            nodes = set(piece)
            _trim(nodes)
            views.extend(piece - nodes)
            if not any(is_compute(node) for node in nodes):
                views.extend(nodes)
                continue
            if devices is not None and "cpu" not in devices and \
                    all(converts_host_scalar(node) for node in nodes if is_compute(node)):
                # Apart from the kernels that read them, host scalars are
                # PyTorch's to convert, on the host.
                fallbacks.update({node: "it converts a host scalar for PyTorch's ops"
                                  for node in nodes if is_compute(node)})
                continue
            partitions.append(sorted(nodes, key=order.__getitem__))
    partitions.sort(key=lambda nodes: order[nodes[0]])
    views.sort(key=order.__getitem__)
    return PartitionPlan(partitions, fallbacks, views)


def _split_by_dynamic_size(nodes: set, module: torch.fx.GraphModule, tied: dict) -> list[set]:
    """The partition cut into pieces whose shapes hold one dynamic size
    each, where it holds several and no op of it holds two: a kernel graph
    compiles once for every value of one dynamic extent, and a partition of
    two (a decode step's attention mask of the cache's length beside its
    positions, past the cache's length) would be compiled per bucket of both.
    Connected ops join while their sizes agree (a static op joins the side
    it is first connected to); then the connected pieces of one size form
    one piece (static pieces join the first size's), or, where those would
    depend on each other both ways, the connected pieces stay apart. The
    partition stays whole where an op holds two sizes, or where the
    connected pieces too would depend on each other both ways. A size is
    a class of `tied` expressions (`kgc.torch.extents.tied_sizes`)."""
    held = {node: frozenset(tied.get(e, e) for e in dynamic_expressions(node))
            for node in nodes}
    if len(frozenset().union(*held.values())) < 2 or \
            any(len(sizes) > 1 for sizes in held.values()):
        return [nodes]
    leader = {node: node for node in nodes}

    def find(node):
        while leader[node] is not node:
            leader[node] = leader[leader[node]]
            node = leader[node]
        return node

    for node in module.graph.nodes:  # in order, so that the result is deterministic
        if node not in nodes:
            continue
        for operand in node.all_input_nodes:
            if operand not in nodes:
                continue
            a, b = find(operand), find(node)
            if a is not b and len(held[a] | held[b]) <= 1:
                leader[b] = a
                held[a] = held[a] | held[b]
    # The partitioner also groups ops that share no edge: the connected
    # pieces of one size (or none) go back together, one piece per size.
    roots = {find(node) for node in nodes}
    sizes_of_roots = sorted({next(iter(held[r])) for r in roots if held[r]}, key=str)
    piece_of_root = {r: (next(iter(held[r])) if held[r] else sizes_of_roots[0]) for r in roots}
    for piece_of in ({n: piece_of_root[find(n)] for n in nodes}, {n: find(n) for n in nodes}):
        pieces: dict = {}
        for node in nodes:
            pieces.setdefault(piece_of[node], set()).add(node)
        if len(pieces) > 1 and not _cyclic(module, piece_of):
            return list(pieces.values())
    return [nodes]


def _cyclic(module: torch.fx.GraphModule, piece_of: dict) -> bool:
    """Whether the graph, each piece taken as one node, has a cycle."""
    key = lambda node: piece_of.get(node, node)  # noqa: E731
    edges: dict = {}
    indegree: dict = {}
    for node in module.graph.nodes:
        indegree.setdefault(key(node), 0)
        for user in node.users:
            a, b = key(node), key(user)
            if a is not b and b not in edges.setdefault(a, set()):
                edges[a].add(b)
                indegree[b] = indegree.get(b, 0) + 1
    ready = [k for k, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for b in edges.get(k, ()):
            indegree[b] -= 1
            if indegree[b] == 0:
                ready.append(b)
    return seen < len(indegree)


def _drop_empty_cat_operands(module: torch.fx.GraphModule) -> None:
    """Removes the operands of each aten.cat that hold no element, where one
    that holds some remains; an empty operand left without users (the
    slice that made it) goes too: it computed nothing anyone reads, and
    kept, it would be reported as an op left to PyTorch."""
    dropped = []
    for node in module.graph.nodes:
        if node.target is not torch.ops.aten.cat.default or not node.args:
            continue
        tensors = list(node.args[0])
        kept = [t for t in tensors if not _is_empty(t)]
        if kept and len(kept) < len(tensors):
            node.args = (kept,) + tuple(node.args[1:])
            dropped += [t for t in tensors if isinstance(t, torch.fx.Node) and _is_empty(t)]
    for node in dict.fromkeys(dropped):
        if not node.users and node.op == "call_function" and not node.is_impure():
            module.graph.erase_node(node)
    if dropped:
        module.recompile()


def _drop_same_dtype_scalar_conversions(module: torch.fx.GraphModule) -> None:
    """Conversions of a host scalar to the dtype it has (Dynamo's float
    inputs arrive as `convert_element_type(x, float64)` of a float64
    tensor) read by ops alone: they copy a number, and kept, a float64
    result no kernel takes would keep the next conversion out of kgc.

        convert_element_type(x, x.dtype)  =>  x   (x a 0-d CPU tensor)
    """
    changed = False
    for node in list(module.graph.nodes):
        if not converts_host_scalar(node) or \
                node.meta["val"].dtype != node.args[0].meta["val"].dtype or \
                any(user.op != "call_function" or _writes(user) for user in node.users):
            continue
        node.replace_all_uses_with(node.args[0])
        module.graph.erase_node(node)
        changed = True
    if changed:
        module.recompile()


def _writes(node: torch.fx.Node) -> bool:
    """Whether `node` writes one of its operands in place."""
    return isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable


def _is_empty(value) -> bool:
    meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return isinstance(meta, torch.Tensor) and meta.numel() == 0 and \
        not any(isinstance(d, torch.SymInt) for d in meta.shape)


def _counts(node: torch.fx.Node) -> bool:
    """Whether a node PyTorch keeps is a tensor op worth reporting."""
    if node.target is operator.getitem:
        return False
    value = node.meta.get("val")
    value = value[0] if isinstance(value, (tuple, list)) and value else value
    return isinstance(value, torch.Tensor)


def _trim(nodes: set) -> None:
    changed = True
    while changed:
        changed = False
        for node in list(nodes):
            if is_compute(node):
                continue
            inputs_outside = all(n not in nodes for n in node.all_input_nodes)
            users_inside = [u for u in node.users if u in nodes]
            users_outside = len(users_inside) < len(node.users)
            # A getitem that yields a result stays: its producer computes it.
            trailing = not users_inside and node.target is not operator.getitem
            if (inputs_outside and users_outside) or trailing:
                nodes.discard(node)
                changed = True
