"""Dynamic extents in buckets: one compile per power of two, exact results.

When torch marks a dim dynamic (a varying batch, a growing sequence), the
aten graph carries a symbol for it. An op can run on a tensor padded along
that dim, and give the right values in the unpadded part, when it keeps the
dim's elements apart: elementwise ops, matmul rows and columns, reductions,
softmax and norms over other dims, views that keep the dim a whole dim (or
the leading factor of a merged one). Such ops are *bucketable*; an op that
reduces, contracts, slices or concatenates along a dynamic dim is not, and
stays with PyTorch (`bucket_reason` says why). Padding changes shapes only:
a size an op reads as a value (`x + x.shape[0]`, a comparison with it, a
fill, an arange's start) never takes the bucket's value: the converter
(`kgc.torch.convert`) makes it a 0-d input of the kernel graph that each
call passes at its real value, or, where an op cannot take it so (a slice's
start, an index, a step), refuses the op, which stays with PyTorch.

A partition whose shapes hold symbols runs as a `BucketedPartition`: at
each call it reads the symbols' values off its inputs, rounds each up to a
power of two, converts and compiles the partition for that bucket (once),
pads the inputs with zeros to the bucket's shapes and slices the results
back. Rows of padding never reach a real element, so results are those of
the unpadded computation; the number of compiles grows with the log of the
largest extent, not with the number of extents seen.
"""

from __future__ import annotations

import math
import operator
import sys
import warnings
from collections.abc import Callable

import sympy
import torch
import torch.fx

from kgc.diagnostics import KgcError
from kgc.torch.convert import (ConvertedGraph, KgcFallbackWarning, Unsupported, convert_graph,
                               op_name, size_bindings, static_shape)

__all__ = ["ATTENTION_OPS", "BucketedPartition", "apart_reason", "bucket_of", "bucket_reason",
           "dynamic_expressions", "is_symbolic", "symbols_of", "tensor_values"]

aten = torch.ops.aten


def _expressions(value) -> list:
    """The size expressions of a tensor's dims (sympy), or of a SymInt."""
    if isinstance(value, torch.Tensor):
        return [d.node.expr if isinstance(d, torch.SymInt) else sympy.Integer(d)
                for d in value.shape]
    if isinstance(value, torch.SymInt):
        return [value.node.expr]
    return []


def _values(node: torch.fx.Node) -> list:
    value = node.meta.get("val")
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, (torch.Tensor, torch.SymInt))]
    return [value] if isinstance(value, (torch.Tensor, torch.SymInt)) else []


def tensor_values(node: torch.fx.Node) -> list[torch.Tensor]:
    """The tensors a node makes (its meta values)."""
    return [v for v in _values(node) if isinstance(v, torch.Tensor)]


def symbols_of(node: torch.fx.Node) -> set:
    """The size symbols in the shapes the node reads and makes."""
    found = set()
    for source in [*node.all_input_nodes, node]:
        for value in _values(source):
            for expression in _expressions(value):
                found |= expression.free_symbols
    return found


def is_symbolic(module: torch.fx.GraphModule) -> bool:
    return any(symbols_of(node) for node in module.graph.nodes if node.op != "output")


def bucket_of(value: int) -> int:
    """The power of two at or above `value` (a bucket of at least 1)."""
    return 1 << max(0, math.ceil(math.log2(max(1, value))))


# Ops whose named dims are reduced, sliced or joined along.
_DIM_OPS = {aten._softmax.default, aten._log_softmax.default, aten.softmax.int,
            aten.log_softmax.int, aten.sum.dim_IntList, aten.mean.dim, aten.amax.default,
            aten.amin.default, aten.any.dim, aten.any.dims, aten.any.default,
            aten.var.correction, aten.var.dim, aten.slice.Tensor, aten.select.int,
            aten.cat.default}
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default,
             aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default}
_MATMULS = {aten.mm.default, aten.bmm.default, aten.addmm.default, aten.matmul.default}
ATTENTION_OPS = {aten._scaled_dot_product_flash_attention.default,
                 aten._scaled_dot_product_efficient_attention.default,
                 aten._scaled_dot_product_cudnn_attention.default,
                 aten._scaled_dot_product_flash_attention_for_cpu.default,
                 aten.scaled_dot_product_attention.default}


def bucket_reason(node: torch.fx.Node) -> str | None:
    """Why `node` cannot run padded along its dynamic dims (None when it
    can, or has none)."""
    if node.target is operator.getitem:
        return None
    operands = [v for n in node.all_input_nodes for v in _values(n)
                if isinstance(v, torch.Tensor)]
    results = [v for v in _values(node) if isinstance(v, torch.Tensor)][:1]
    for value in [*operands, *results]:
        for expression in _expressions(value):
            if expression.free_symbols and not expression.is_Symbol:
                return (f"dynamic extent {expression} is not a bare size; kgc buckets bare "
                        "dynamic sizes only")
    return apart_reason(node)


def dynamic_expressions(node: torch.fx.Node) -> set:
    """The size expressions (sympy, `s0` or `s0 + 1`) of the dynamic dims in
    the shapes the node reads and makes, and of the sizes it reads."""
    found = set()
    for source in [*node.all_input_nodes, node]:
        for value in _values(source):
            found |= {e for e in _expressions(value) if e.free_symbols}
    return found


def apart_reason(node: torch.fx.Node) -> str | None:
    """Why `node` does not keep the elements of its dynamic dims apart
    (None where it does, or has none): it reduces, contracts, cuts or joins
    along one, or merges one with other dims."""
    if node.target is operator.getitem:
        return None
    operands = [v for n in node.all_input_nodes for v in _values(n)
                if isinstance(v, torch.Tensor)]
    results = [v for v in _values(node) if isinstance(v, torch.Tensor)][:1]
    result_symbols = set()
    for value in results:
        for expression in _expressions(value):
            result_symbols |= expression.free_symbols
    for value in operands:
        for expression in _expressions(value):
            lost = expression.free_symbols - result_symbols
            if lost:
                return f"reduces over dynamic extent {next(iter(lost))}"
    first = operands[0] if operands else None
    arguments = _arguments(node)
    mixed: list = []  # the dims of the first operand the op reduces or cuts along
    target = node.target
    if target is aten.slice.Tensor and _whole_slice(arguments):
        return None  # the dim as it is (a cache's keys taken whole)
    if target in _DIM_OPS and first is not None:
        dim = arguments.get("dim", 0 if target in (aten.cat.default,) else None)
        dims = range(first.dim()) if dim is None else ([dim] if isinstance(dim, int) else dim)
        mixed = [d % first.dim() for d in dims] if first.dim() else []
    elif target is aten.constant_pad_nd.default and first is not None:
        # Padding or cutting a dim moves its end: padded rows would show.
        pad = list(arguments.get("pad", ()))
        mixed = [first.dim() - 1 - i // 2 for i, amount in enumerate(pad) if amount != 0]
    elif target in (aten.native_layer_norm.default, aten.rms_norm.default) and first is not None:
        mixed = list(range(first.dim() - len(arguments.get("normalized_shape", ())), first.dim()))
    elif target in _MATMULS and first is not None:
        matrix = operands[1] if target is aten.addmm.default and len(operands) > 1 else first
        return _static_dims(node, matrix, [matrix.dim() - 1])
    elif target in ATTENTION_OPS and len(operands) >= 2:
        return (_static_dims(node, operands[0], [operands[0].dim() - 1])
                or _static_dims(node, operands[1], [operands[1].dim() - 2]))
    elif target in _RESHAPES and first is not None and results:
        return _reshape_reason(node, first, results[0])
    return _static_dims(node, first, mixed) if mixed else None


def _whole_slice(arguments: dict) -> bool:
    """Whether a slice's arguments take every element of its dim: from 0
    to the end, one step at a time."""
    start, end, step = (arguments.get(k) for k in ("start", "end", "step"))
    return start in (None, 0) and step in (None, 1) and \
        (end is None or (isinstance(end, int) and end >= sys.maxsize))


def _arguments(node: torch.fx.Node) -> dict:
    from torch.fx.operator_schemas import normalize_function

    values = {n: n.meta.get("val") for n in node.all_input_nodes}
    args = torch.fx.node.map_arg(node.args, values.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, values.__getitem__)
    try:
        bound = normalize_function(node.target, args, kwargs, normalize_to_only_use_kwargs=True)
    except Exception:
        bound = None
    return dict(bound.kwargs) if bound is not None else {}


def _static_dims(node, value, dims) -> str | None:
    expressions = _expressions(value)
    for d in dims:
        if expressions[d].free_symbols:
            return (f"{op_name(node)} reduces, contracts or cuts along dynamic extent "
                    f"{expressions[d]}; padding it would change the result")
    return None


def _reshape_reason(node, source, result) -> str | None:
    """A reshape keeps padding in place when each dynamic dim of either side
    is a whole dim of the other with the same elements before it."""
    a, b = _expressions(source), _expressions(result)

    def placed(side, other) -> bool:
        for index, expression in enumerate(side):
            if not expression.free_symbols:
                continue
            before = sympy.Mul(*side[:index])
            if not any(other[j] == expression and sympy.simplify(sympy.Mul(*other[:j]) - before) == 0
                       for j in range(len(other))):
                return False
        return True

    if placed(a, b) and placed(b, a):
        return None
    return f"{op_name(node)} merges or splits a dynamic extent with others"


class BucketedPartition(torch.nn.Module):
    """A partition with dynamic extents, compiled per bucket of them."""

    def __init__(self, module: torch.fx.GraphModule, name: str,
                 compile_graph: Callable, mode: str, on_compile: Callable | None = None):
        super().__init__()
        self.module = module
        self.name = name
        self.compile_graph = compile_graph
        self.mode = mode
        self.on_compile = on_compile
        self.report = None  # the backend's PartitionReport, whose kernels grow per bucket
        self.placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        output = next(n for n in module.graph.nodes if n.op == "output")
        self.single = not isinstance(output.args[0], (tuple, list))
        self.results = [output.args[0]] if self.single else list(output.args[0])
        # Each symbol's value comes from an input that has it as a bare dim.
        self.sources: dict = {}
        for index, node in enumerate(self.placeholders):
            for dim, expression in enumerate(_expressions(node.meta.get("val"))):
                if expression.is_Symbol and expression not in self.sources:
                    self.sources[expression] = (index, None if isinstance(
                        node.meta["val"], torch.SymInt) else dim)
        for node in module.graph.nodes:
            # An op kgc takes for every size at once (kgc.torch.extents), in a
            # partition that did not compile so: padding would change it.
            reason = bucket_reason(node) if node.op == "call_function" else None
            if reason is not None:
                raise Unsupported(f"{name} did not compile once for every size, and "
                                  f"{op_name(node)} cannot run padded to a bucket: {reason}")
        symbols = set().union(*(symbols_of(n) for n in module.graph.nodes if n.op != "output"))
        missing = symbols - set(self.sources)
        if missing:
            raise Unsupported(f"no input of {name} gives dynamic extent "
                              f"{', '.join(map(str, sorted(missing, key=str)))}")
        # bucket -> (its graph, its compiled run), or None where kgc failed
        self.compiled: dict[tuple, tuple[ConvertedGraph, Callable] | None] = {}

    def convert(self, sizes: dict) -> ConvertedGraph:
        suffix = "_".join(str(sizes[s]) for s in sorted(sizes, key=str))
        with size_bindings(sizes):
            return convert_graph(self.module, f"{self.name}_b{suffix}")

    def forward(self, *arguments):
        actual = {}
        for symbol, (index, dim) in self.sources.items():
            value = arguments[index]
            actual[symbol] = int(value) if dim is None else value.shape[dim]
        sizes = {symbol: bucket_of(value) for symbol, value in actual.items()}
        key = tuple(sizes[s] for s in sorted(sizes, key=str))
        if key not in self.compiled:
            try:
                converted = self.convert(sizes)
                self.compiled[key] = (converted, self.compile_graph(converted.graph, self.mode))
            except (Unsupported, KgcError) as error:
                # A new size never fails: this bucket runs in PyTorch.
                warnings.warn(f"kgc: partition {self.name} at sizes {key} runs in PyTorch: "
                              f"{error}", KgcFallbackWarning, stacklevel=2)
                self.compiled[key] = None
            else:
                if self.on_compile is not None:
                    self.on_compile(self.compiled[key][1])
        if self.compiled[key] is None:
            return self.module(*arguments)
        converted, run = self.compiled[key]
        tensors = []
        with size_bindings(sizes):
            for index in converted.tensor_inputs:
                tensor = arguments[index]
                shape = static_shape(self.placeholders[index].meta["val"].shape, "input")
                if tuple(tensor.shape) != shape:
                    padded = tensor.new_zeros(shape)
                    padded[tuple(slice(0, n) for n in tensor.shape)] = tensor
                    tensor = padded
                tensors.append(tensor)
        results = run(*converted.graph_arguments(arguments, tensors))
        results = results if isinstance(results, tuple) else (results,)
        ordered = []
        with size_bindings(actual):
            for node, result in zip(self.results, converted.partition_results(results)):
                shape = static_shape(node.meta["val"].shape, "result")
                if tuple(result.shape) != shape:
                    # Cut from inside the bucket (a sequence behind a batch
                    # of two), the slice is strided; the graph's next ops
                    # (views) take the result as traced, dense.
                    result = result[tuple(slice(0, n) for n in shape)].contiguous()
                ordered.append(result)
        return ordered[0] if self.single else tuple(ordered)
