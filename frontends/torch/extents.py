"""Dynamic extents compiled once: one kernel graph for every size of a dim
torch marks dynamic.

A partition whose shapes hold one symbol (a varying batch, say) converts
with that symbol as the kernel graph's dynamic extent: `size_bindings` binds
it to a name (the symbol's own, `s0`), so the shapes that hold it as a bare
dim carry the name, and the graph's types have `?` there. The graph then
compiles once; each call passes its tensors as they are, the kernels read
the size off them, and the results come back at the call's size, with no
padding. A size read as a value stays a 0-d input of the graph, as for
buckets.

A size may be an expression of a symbol (`s0 + 1`, a cache's keys after
its update), and several expressions may be one size where an op requires
them equal (`tied_sizes`: attention's key count in its K, V and mask,
which Dynamo traces with a symbol per cache); each partition's one size is
its `?`. The runtime checks at each call that every `?` is one size.

kgc takes a dynamic extent where each buffer has it in one dim (any: the
sequence of a (2, s, hidden) activation or of a (1, heads, s, head_dim)
query, whose outer strides the kernels compute from the size) and no kernel
reduces or loops over it (`kgc.tiling.dynamic`), but attention, which loops
over dynamic keys where its queries are static (`takes_once`: a decode
step's attention over the dynamic cache, which no bucket could pad), and a
sum, max or min over the size or a product contracting over it, whose
result holds no dynamic size (a weight's gradient over a dynamic token
count: X^T dY, a norm weight's or a bias's sum over the tokens), which the
reduction and matmul schedules loop over to the size. An op that no partition
could take once stays with PyTorch, which computes it without a compile
per size (`extent_reason`): one size in two dims of a tensor (a prefill's
(1, 1, s, s) mask), a tensor of the size made from no tensor (an
`arange(s)`: kernels read their sizes off their tensors), an index into a
dim of dynamic size (a negative index counts from its end). The
partitioner cuts a partition of two sizes into pieces of one
(`kgc.torch.partition`). A partition still outside (two sizes in one op) is
refused here with the reason, or by kg-tile, and the backend compiles it per
bucket instead (`kgc.torch.buckets`), where every op of it can run padded;
otherwise it runs in PyTorch.

    converted = convert_with_extent(submodule, "kgc_0")   # or ExtentRefused
"""

from __future__ import annotations

import torch.fx

from kgc.torch.buckets import ATTENTION_OPS, apart_reason, dynamic_expressions, tensor_values
from kgc.torch.convert import ConvertedGraph, Unsupported, convert_graph, size_bindings

__all__ = ["ExtentRefused", "convert_with_extent", "extent_reason", "takes_once", "tied_sizes"]


class ExtentRefused(Exception):
    """A partition kgc does not convert with a dynamic extent; the message
    says why."""


def convert_with_extent(module: torch.fx.GraphModule, name: str) -> ConvertedGraph:
    """The kernel graph `name` of a partition whose shapes hold one size
    (the expressions of one class of `tied_sizes`), that size its dynamic
    extent. Raises ExtentRefused where the partition does not convert so."""
    nodes = [n for n in module.graph.nodes if n.op != "output"]
    expressions = set().union(*(dynamic_expressions(n) for n in nodes))
    tied = tied_sizes(nodes)
    sizes = {tied.get(e, e) for e in expressions}
    if len(sizes) != 1:
        raise ExtentRefused(f"its shapes hold {len(sizes)} dynamic sizes "
                            f"({', '.join(sorted(map(str, sizes)))}); a kernel graph has one "
                            "dynamic extent")
    size = next(iter(sizes))
    _check_one_dim(module, expressions)
    # Its name: the first symbol it is made of (s0 for s0 + 1).
    extent = str(min(size.free_symbols, key=str))
    try:
        with size_bindings(dict.fromkeys(expressions, extent)):
            return convert_graph(module, name)
    except Unsupported as error:
        raise ExtentRefused(str(error)) from None


def tied_sizes(nodes) -> dict:
    """{size expression: the expression standing for its class} over the
    ops `nodes`, where one op requires sizes of different expressions to be
    equal: attention's key count in K, V and the mask (Dynamo traces the
    keys' cache and the values' cache with a symbol each, though both
    hold every key). Sizes no op ties are absent (each its own class)."""
    leader: dict = {}

    def find(expression):
        while leader.get(expression, expression) != expression:
            expression = leader[expression]
        return expression

    for node in nodes:
        if getattr(node, "target", None) not in ATTENTION_OPS:
            continue
        keys = [e for e in _key_counts(node) if e.free_symbols]
        for expression in keys[1:]:
            a, b = sorted((find(keys[0]), find(expression)), key=str)
            if a != b:
                leader[b] = a
    return {e: find(e) for e in leader} | {find(e): find(e) for e in leader}


def _operand_tensors(node: torch.fx.Node) -> list[torch.Tensor]:
    """The tensors `node` reads (their meta values), in operand order."""
    return [v for n in node.all_input_nodes for v in tensor_values(n)]


def _key_counts(node: torch.fx.Node) -> list:
    """The key count of an attention op as K, V and each other tensor it
    reads (a mask, in its last dim) hold it."""
    operands = _operand_tensors(node)
    counts = [v.shape[-2] for v in operands[1:3]] + [v.shape[-1] for v in operands[3:]]
    return [c.node.expr for c in counts if isinstance(c, torch.SymInt)]


def takes_once(node: torch.fx.Node) -> bool:
    """Whether a kernel graph compiled once for every size holds `node`,
    which no bucket can (`kgc.torch.buckets.bucket_reason`): an op that
    keeps its dynamic dims apart where a size is an expression of a symbol
    (the `s + 1` keys of a cache after an update), and attention over a
    dynamic key count whose queries and output are static (a decode step:
    its kernel loops over the keys to the size, `kgc.tiling.attention`)."""
    if node.op != "call_function":
        return False
    if node.target in ATTENTION_OPS:
        return _attends_to_dynamic_keys(node)
    # One size in the op, linear in one symbol: sizes that differ (a cache's
    # s beside s + 1) or that are no extent (a sliding window's
    # Max(0, s - w)) stay out, as a bucket would leave them.
    expressions = dynamic_expressions(node)
    if len(expressions) != 1 or not _linear(next(iter(expressions))):
        return False
    return apart_reason(node) is None or _reduces_its_size_away(node)


# Reductions and the product whose loop over their input's dynamic size the
# reduction and matmul schedules run to the size (`dynamic_loop_axis`). A
# mean is not one: its 1/N would be a constant.
_REDUCTIONS = {torch.ops.aten.sum.dim_IntList, torch.ops.aten.amax.default,
               torch.ops.aten.amin.default}


def _reduces_its_size_away(node: torch.fx.Node) -> bool:
    """Whether `node` sums, maxes or mins its operand over the dynamic
    size, or contracts two matrices over it (`mm(X^T, dY)` over a dynamic
    token count), and its result holds no dynamic size: the reduced axis
    is the kernel's loop, not its grid."""
    if node.target not in _REDUCTIONS and node.target is not torch.ops.aten.mm.default:
        return False
    results = tensor_values(node)[:1]
    if not results or _sizes_in(results[0]):
        return False
    operands = _operand_tensors(node)
    if node.target is torch.ops.aten.mm.default:
        if len(operands) != 2:
            return False
        (m, k), (k2, n) = operands[0].shape, operands[1].shape
        return all(isinstance(size, torch.SymInt) for size in (k, k2)) and \
            not any(isinstance(size, torch.SymInt) for size in (m, n))
    return bool(operands)


def _linear(expression) -> bool:
    """Whether a size is `a s + b` for one symbol s (a > 0)."""
    import sympy

    symbols = expression.free_symbols
    if len(symbols) != 1:
        return False
    symbol = next(iter(symbols))
    polynomial = sympy.Poly(expression, symbol) if expression.is_polynomial(symbol) else None
    return polynomial is not None and polynomial.degree() == 1 and polynomial.LC() > 0


def _attends_to_dynamic_keys(node: torch.fx.Node) -> bool:
    operands = _operand_tensors(node)
    results = tensor_values(node)[:1]
    if len(operands) < 3 or not results:
        return False

    def dynamic_dims(value) -> list[int]:
        return [d for d, size in enumerate(value.shape) if isinstance(size, torch.SymInt)]

    query, keys, values, others = operands[0], operands[1], operands[2], operands[3:]
    if dynamic_dims(query) or dynamic_dims(results[0]):
        return False
    if dynamic_dims(keys) != [keys.dim() - 2] or dynamic_dims(values) != [values.dim() - 2]:
        return False
    return all(dynamic_dims(other) in ([], [other.dim() - 1]) for other in others)


def extent_reason(node: torch.fx.Node) -> str | None:
    """Why no kernel graph compiled once for every value of a dynamic size
    can hold `node` (None where one can, or it holds no dynamic size)."""
    operands = _operand_tensors(node)
    results = tensor_values(node)[:1]
    for value in [*operands, *results]:
        for symbol in _sizes_in(value):
            dims = _dims_holding(value, symbol)
            if len(dims) > 1:
                return (f"a tensor {tuple(value.shape)} holds dynamic size {symbol} in dims "
                        f"{dims}; kgc's kernels take a dynamic extent in one dim of each tensor")
    indexed = _dynamic_indexed_dim(node)
    if indexed is not None:
        return (f"it indexes dim {indexed[0]} of a tensor {indexed[1]} along its dynamic size; "
                "kgc counts a negative index from the end of a static dim only")
    if operands:
        return None
    for value in results:
        made = sorted(map(str, _sizes_in(value)))
        if made:
            return (f"it makes a tensor {tuple(value.shape)} of dynamic size {made[0]} from no "
                    "tensor; kgc's kernels read a dynamic extent off the tensors they are given")
    return None


# Ops that index a tensor with a list of index tensors, one per dim (None
# where a dim is taken whole), counting negative indices from the end.
_INDEXING = {torch.ops.aten.index.Tensor, torch.ops.aten.index_put.default,
             torch.ops.aten._unsafe_index_put.default}


def _dynamic_indexed_dim(node: torch.fx.Node) -> tuple[int, tuple] | None:
    """(dim, shape) where `node` indexes a dim of dynamic size."""
    if node.target not in _INDEXING or len(node.args) < 2 or \
            not isinstance(node.args[0], torch.fx.Node):
        return None
    value = node.args[0].meta.get("val")
    if not isinstance(value, torch.Tensor):
        return None
    for dim, index in enumerate(node.args[1]):
        if index is not None and dim < value.dim() and isinstance(value.shape[dim], torch.SymInt):
            return dim, tuple(value.shape)
    return None


def _sizes_in(value: torch.Tensor) -> set:
    """The dynamic sizes (symbols) in a tensor's shape."""
    return {s for d in value.shape if isinstance(d, torch.SymInt) for s in d.node.expr.free_symbols}


def _dims_holding(value: torch.Tensor, symbol) -> list[int]:
    return [dim for dim, size in enumerate(value.shape)
            if isinstance(size, torch.SymInt) and symbol in size.node.expr.free_symbols]


def _check_one_dim(module: torch.fx.GraphModule, expressions: set) -> None:
    """Refuses, before any compile, a partition whose inputs or results
    hold the size (any of its `expressions`) in two dims of one tensor (a
    (1, 1, s, s) mask): a kernel iterates over the dynamic extent along one
    axis, so kgc's kernels take it in one dim of each buffer (any dim: the
    strides of the dims outside it are computed from the size)."""
    output = next(n for n in module.graph.nodes if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
    for node in [*(n for n in module.graph.nodes if n.op == "placeholder"), *results]:
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor):
            continue
        dims = [d for d, size in enumerate(value.shape)
                if isinstance(size, torch.SymInt) and size.node.expr in expressions]
        if len(dims) > 1:
            size = value.shape[dims[0]]
            raise ExtentRefused(f"{node.name} {tuple(value.shape)} holds dynamic size {size} "
                                f"in dims {dims}; kgc's kernels take a dynamic extent in one "
                                "dim of each tensor")
