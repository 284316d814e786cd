"""aten ops of an FX graph as kg ops: the table of converters.

    CONVERTERS[aten.mm.default](context, node, {"input": a, "mat2": b})

Each row of `CONVERTERS` maps an aten overload to a function that records
the op on a `kgc.Graph` from its arguments, bound by name as the op's schema
names them (tensors already converted to `kgc.Tensor`s, everything else as
the Python value the FX node holds), and returns the kg tensor (or a tuple of
them for an op of several results, None where kgc does not compute one). A
converter raises `Unsupported` with the reason when kgc cannot compute the
op as torch does (an argument it has no form for, a dtype kg lacks); the op
then stays with PyTorch. `unsupported_reason(node)` asks the same question of
one node without a graph at hand: it converts the node alone, on inputs of
its operands' shapes and dtypes, so that what the partitioner accepts is
exactly what the converter builds.

Semantics follow eager PyTorch's: half-precision math is computed in f32 and
rounded once per op (kg does the same for its elementwise ops); where a
torch op does several steps in f32 before rounding (log_softmax, var,
scalars that the tensor's dtype cannot hold) the converter casts to f32,
does the steps and casts back once.

A dynamic size (or a number computed from one) read as a value, as in
`x + x.shape[0]`, a comparison with it, a fill or an arange's start, becomes
a 0-d input of the kernel graph (int64, or float32 for a float) that each
call passes at its real value (`ConvertedGraph.graph_arguments`): a graph
compiled for a bucket of the size never computes with the bucket's. Where a
converter cannot take it so (a slice's start, an index, a step, a clamp
bound), the op is refused and stays with PyTorch, the reason naming the
size.

Integer and boolean tensors (positions, masks) convert too: comparisons,
where/masked_fill, the logical ops, arange and casts between any two dtypes.
Where kg wants one operand type and torch promotes (a comparison of an int64
tensor with a float one, where over f16 and f32), the operands are cast to
torch's promoted dtype first. Causal attention (`is_causal`) and boolean
attention masks become an additive f32 mask built from iota, cmp and select,
which the attention kernel computes from its indices.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch.fx.operator_schemas import normalize_function

from kgc.graph import Graph, GraphError, Tensor
from kgc.torch.device_scalars import device_scalar

__all__ = ["CONVERTERS", "ConvertedGraph", "KgcFallbackWarning", "Unsupported", "convert_graph",
           "is_compute", "size_bindings", "static_shape", "unsupported_reason"]

aten = torch.ops.aten
prims = torch.ops.prims


class Unsupported(Exception):
    """An op kgc does not compute; the message says why."""


class KgcFallbackWarning(UserWarning):
    """A graph, or part of one, that runs in PyTorch instead of kgc."""


# torch dtype -> kg element type, for the dtypes kg tensors hold.
_KG_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
              torch.bool: "i1", torch.int32: "i32", torch.int64: "i64"}
_FLOATS = ("f32", "f16", "bf16")
# Ops that only rename or re-lay out elements: they never make a partition
# worth a kernel on their own, and PyTorch does them without copying.
_LAYOUT_OPS: set = set()
# Multi-result ops whose converter computes every result (a fused attention
# op computes only the ones its backward reads).
_EVERY_RESULT: set = set()


@dataclasses.dataclass
class Context:
    """The graph being recorded and the node being converted."""

    graph: Graph
    node: torch.fx.Node

    @property
    def value(self):
        """The node's example value (a FakeTensor, or a tuple of them)."""
        return self.node.meta.get("val")

    @property
    def out_dtype(self) -> str:
        value = self.value
        if isinstance(value, (tuple, list)):
            value = value[0]
        return kg_dtype(value.dtype, f"result of {op_name(self.node)}")

    @property
    def out_shape(self) -> tuple[int, ...]:
        value = self.value
        if isinstance(value, (tuple, list)):
            value = value[0]
        return static_shape(value.shape, f"result of {op_name(self.node)}")


Converter = Callable[[Context, dict[str, Any]], Any]
CONVERTERS: dict[Any, Converter] = {}


def converts(*targets, layout: bool = False, every_result: bool = False):
    """Registers a converter for aten overloads `targets`; `layout` marks
    ops that move no data by themselves (views, copies, casts of a dtype to
    itself); `every_result`, ops of several results that kgc computes all
    of."""
    def register(function: Converter) -> Converter:
        for target in targets:
            CONVERTERS[target] = function
            if layout:
                _LAYOUT_OPS.add(target)
            if every_result:
                _EVERY_RESULT.add(target)
        return function
    return register


def op_name(node: torch.fx.Node) -> str:
    """`aten.mm.default`, as explain prints an op."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def kg_dtype(dtype: torch.dtype, what: str) -> str:
    if dtype in _KG_DTYPES:
        return _KG_DTYPES[dtype]
    raise Unsupported(f"{what} is {dtype}: kg tensors hold f32, f16, bf16, bool, int32 and "
                      "int64")


def operand_dtype(value: torch.Tensor, what: str) -> str:
    """The kg dtype a kernel graph reads the operand `value` in. A 0-d
    float64 tensor (a Python float Dynamo passes as a tensor) is read as
    f32: every op that reads it makes an f32 or narrower result, and
    PyTorch's kernels read such a scalar in f32 too (their "opmath" type),
    so the value is rounded once, to f32, either way."""
    if value.dim() == 0 and value.dtype == torch.float64:
        return "f32"
    return kg_dtype(value.dtype, what)


# Values of the symbolic sizes while a graph is converted: symbol -> int
# for one bucket of them (kgc.torch.buckets), or symbol -> the name of the
# kernel graph's dynamic extent (kgc.torch.extents). None: symbolic sizes
# are refused.
_SIZES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("kgc_torch_sizes",
                                                                    default=None)


@contextlib.contextmanager
def size_bindings(sizes: dict):
    """Converts with each symbolic size that is a bare symbol of `sizes`
    taken as its value there: an int, or a name, which shapes then carry as
    the kernel graph's dynamic extent."""
    token = _SIZES.set(sizes)
    try:
        yield
    finally:
        _SIZES.reset(token)


@dataclasses.dataclass
class _ScalarInputs:
    """Dynamic sizes (and numbers computed from them) that a graph reads as
    values, each a 0-d graph input that carries the real value at every
    call. `sources`: a symbolic value's expression -> the position of the
    partition input that gives it (None: any value may become an input,
    as when a node is converted alone to ask whether it converts)."""

    graph: Graph
    sources: dict | None
    made: dict = dataclasses.field(default_factory=dict)  # expression -> kg tensor
    positions: list = dataclasses.field(default_factory=list)  # partition input of each


_SCALAR_INPUTS: contextvars.ContextVar[_ScalarInputs | None] = contextvars.ContextVar(
    "kgc_torch_scalar_inputs", default=None)


def _scalar_input(value, what: str) -> Tensor:
    """The 0-d graph input that carries symbolic `value` (a SymInt as i64, a
    SymFloat as f32) at its real value."""
    state = _SCALAR_INPUTS.get()
    expression = value.node.expr
    if state is None or (state.sources is not None and expression not in state.sources):
        raise Unsupported(_size_as_value(value, what))
    if expression not in state.made:
        dtype = "i64" if isinstance(value, torch.SymInt) else "f32"
        tensor = state.graph.input(f"size_value_{len(state.made)}", (), dtype)
        state.made[expression] = tensor
        state.positions.append(None if state.sources is None else state.sources[expression])
    return state.made[expression]


def _is_symbolic(value) -> bool:
    """A SymInt or SymFloat that is no constant (a dynamic size, or a number
    computed from one)."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_float, is_concrete_int

    if isinstance(value, torch.SymInt):
        return not is_concrete_int(value)
    if isinstance(value, torch.SymFloat):
        return not is_concrete_float(value)
    return False


def _bound_size(d, what: str) -> int | str:
    """The int a SymInt stands for: a constant, or a bare symbol bound by
    `size_bindings` (an int, or the name of a dynamic extent). Reading it
    never makes torch specialize the graph (no guard is added): that would
    recompile it for every new value."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    if is_concrete_int(d):
        return int(d)
    sizes = _SIZES.get()
    expression = d.node.expr
    if sizes is not None and expression in sizes:
        return sizes[expression]
    raise Unsupported(f"{what} has dynamic extent {d} (marked dynamic by torch); kgc kernels "
                      "take static shapes, or buckets of a dynamic extent that each op keeps "
                      "apart")


def static_shape(shape, what: str) -> tuple[int | str, ...]:
    """The dims as ints (symbolic ones as `size_bindings` gives them: an
    int, or a dynamic extent's name)."""
    return tuple(_bound_size(d, what) if isinstance(d, torch.SymInt) else d for d in shape)


def _static_value(value, what: str):
    """A Python int/float/bool, or a list of them, from an FX argument read
    as a value (an operand, a bound, a fill). A dynamic size is refused even
    where `size_bindings` binds it: the binding is the size's bucket, and a
    kernel compiled for the bucket would compute with the bucket's value
    (`x + x.shape[0]` at a batch of 5 would add 8)."""
    from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_int

    if isinstance(value, (list, tuple)):
        return type(value)(_static_value(v, what) for v in value)
    if isinstance(value, torch.SymInt) and is_concrete_int(value):
        return int(value)
    if isinstance(value, torch.SymBool) and is_concrete_bool(value):
        return bool(value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unsupported(_size_as_value(value, what))
    return value


def _size_as_value(value, what: str) -> str:
    expression = value.node.expr
    symbols = ", ".join(sorted(str(s) for s in expression.free_symbols))
    source = (f"dynamic size {value}" if expression.is_Symbol
              else f"{value}, computed from dynamic size {symbols}")
    return (f"{what} is {source}: kgc compiles a kernel per power-of-two bucket of a dynamic "
            "size, which would compute with the bucket's size instead of this value, and this "
            "op cannot take it as an input of the kernel")


# Arguments that give the shape of the op's result, which the converter
# reads from the result's (bucketed) shape, never as a value: a dynamic size
# there is a padded dim like any other, and the result's shape must be one
# kgc buckets (a bare size or a constant).
_SHAPE_ARGUMENTS = {
    aten.view.default: ("size",), aten._unsafe_view.default: ("size",),
    aten.reshape.default: ("shape",), aten.expand.default: ("size",),
    aten.full.default: ("size",), aten.slice.Tensor: ("end",),
    aten.arange.default: ("end",), aten.arange.start: ("end",),
    aten.arange.start_step: ("end",), prims.iota.default: ("length",),
    aten.native_layer_norm.default: ("normalized_shape",),
    aten.rms_norm.default: ("normalized_shape",),
}


# Arguments whose converters take a dynamic size (or a number computed from
# one) as a 0-d input of the graph, its real value passed at every call.
_VALUE_OPERANDS = {
    **{target: ("other",) for target in (
        aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
        aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.rsub.Scalar, aten.rsub.Tensor,
        aten.eq.Scalar, aten.ne.Scalar, aten.lt.Scalar, aten.le.Scalar, aten.gt.Scalar,
        aten.ge.Scalar, aten.eq.Tensor, aten.ne.Tensor, aten.lt.Tensor, aten.le.Tensor,
        aten.gt.Tensor, aten.ge.Tensor)},
    aten.full.default: ("fill_value",),
    aten.arange.start: ("start",), aten.arange.start_step: ("start",),
}


def _check_scalar_arguments(node: torch.fx.Node) -> None:
    """Refuses a node that reads a dynamic size (or a number computed from
    one) as a value where its converter cannot take it as a 0-d input of
    the graph (`_VALUE_OPERANDS`): a slice's start, a step, an index, a
    clamp bound. The arguments that give its result's shape
    (`_SHAPE_ARGUMENTS`) may hold any size: the converter reads the
    result's shape instead, which must be one kgc buckets."""
    values = {n: n.meta.get("val") for n in node.all_input_nodes}
    args = torch.fx.node.map_arg(node.args, values.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, values.__getitem__)
    try:
        bound = normalize_function(node.target, args, kwargs,
                                   normalize_to_only_use_kwargs=True)
    except Exception:  # no schema to bind by: the arguments are checked by position
        bound = None
    named = dict(bound.kwargs) if bound is not None else {
        **{f"argument #{i}": v for i, v in enumerate(args)}, **kwargs}
    shapes = _SHAPE_ARGUMENTS.get(node.target, ())
    values_read = _VALUE_OPERANDS.get(node.target, ())
    for name, value in named.items():
        for item in (value if isinstance(value, (list, tuple)) else (value,)):
            if not isinstance(item, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                continue
            if name in shapes and isinstance(item, torch.SymInt):
                continue  # the result's shape, checked as every shape is
            if not (name in values_read and _is_symbolic(item)):
                _static_value(item, f"{op_name(node)} {name}")


# --------------------------------------------------------------------------
# Helpers shared by the converters
# --------------------------------------------------------------------------


def _cast(graph: Graph, x: Tensor, dtype: str) -> Tensor:
    return x if x.dtype == dtype else graph.cast(x, dtype)


def _exact_in(value: float, dtype: str) -> bool:
    """Whether `value` is held exactly by a kg constant of `dtype`."""
    torch_dtype = {v: k for k, v in _KG_DTYPES.items()}[dtype]
    if not math.isfinite(value):
        return True
    return torch.tensor(value, dtype=torch.float64).to(torch_dtype).double().item() == value


def _number(value, what: str) -> float:
    value = _static_value(value, what)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Unsupported(f"{what} {value!r} is not a real number")
    return float(value)


def _binary(ctx: Context, kind: str, lhs, rhs, alpha=1) -> Tensor:
    """`lhs <kind> alpha * rhs` with torch's promotion: tensors are cast to
    the result dtype; a Python number the result dtype cannot hold exactly
    (and alpha) is applied in f32, as torch's f32 op math does, and the
    result rounded once."""
    graph, dtype = ctx.graph, ctx.out_dtype
    method = getattr(graph, kind)
    operands = []
    exact = True
    for role, value in (("lhs", lhs), ("rhs", rhs)):
        if isinstance(value, Tensor):
            operands.append(_cast(graph, value, dtype))
        elif _is_symbolic(value):
            # Its real value at each call: no bucket's. Like any number the
            # result dtype may not hold exactly, it joins in the wide dtype.
            operands.append(_scalar_input(value, f"{op_name(ctx.node)} {role}"))
            exact = False
        else:
            number = _number(value, f"{op_name(ctx.node)} {role}")
            operands.append(number)
            exact = exact and _exact_in(number, dtype)
    alpha = _number(alpha, f"{op_name(ctx.node)} alpha")
    if exact and alpha == 1:
        return method(*operands)
    # Integers are exact in their own dtype: only half floats widen.
    wide_dtype = "f32" if dtype in _FLOATS else dtype
    wide = [_cast(graph, v, wide_dtype) if isinstance(v, Tensor) else v for v in operands]
    if alpha != 1:
        wide[1] = graph.mul(wide[1], alpha) if isinstance(wide[1], Tensor) else wide[1] * alpha
    if not any(isinstance(v, Tensor) for v in wide):
        raise Unsupported(f"{op_name(ctx.node)} has no tensor operand")
    return _cast(graph, method(*wide), dtype)


def _dims(dim, rank: int, what: str) -> list[int]:
    """Reduced dimensions: None or [] means all of them, as torch reads it."""
    dim = _static_value(dim, what)
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    return [d % rank if rank else 0 for d in dim]


def _as_shape(ctx: Context, x: Tensor) -> Tensor:
    """x reshaped to the node's result shape (squeeze, unsqueeze, view)."""
    shape = ctx.out_shape
    return x if x.shape == shape else ctx.graph.reshape(x, shape)


# --------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------

for _kind, _targets in {
    "add": (aten.add.Tensor, aten.add.Scalar),
    "sub": (aten.sub.Tensor, aten.sub.Scalar),
}.items():
    def _make(kind):
        def convert(ctx, a):
            return _binary(ctx, kind, a["input"], a["other"], a.get("alpha", 1))
        return convert
    converts(*_targets)(_make(_kind))

for _kind, _targets in {
    "mul": (aten.mul.Tensor, aten.mul.Scalar),
    "div": (aten.div.Tensor, aten.div.Scalar),
    "maximum": (aten.maximum.default,),
    "minimum": (aten.minimum.default,),
}.items():
    def _make(kind):
        def convert(ctx, a):
            return _binary(ctx, kind, a["input"], a["other"])
        return convert
    converts(*_targets)(_make(_kind))


@converts(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(ctx, a):
    if a.get("alpha", 1) != 1:
        raise Unsupported(f"{op_name(ctx.node)} with alpha {a['alpha']!r}")
    return _binary(ctx, "sub", a["other"], a["input"])


for _kind, _targets in {
    "neg": (aten.neg.default,), "relu": (aten.relu.default,),
    "sigmoid": (aten.sigmoid.default,), "tanh": (aten.tanh.default,),
    "sin": (aten.sin.default,), "cos": (aten.cos.default,),
    "exp": (aten.exp.default,), "log": (aten.log.default,), "sqrt": (aten.sqrt.default,),
    "rsqrt": (aten.rsqrt.default,), "abs": (aten.abs.default,),
    "reciprocal": (aten.reciprocal.default,), "silu": (aten.silu.default,),
}.items():
    def _make(kind):
        def convert(ctx, a):
            x = a["input"]
            _require_tensor(ctx, x)
            return getattr(ctx.graph, kind)(_cast(ctx.graph, x, ctx.out_dtype))
        return convert
    converts(*_targets)(_make(_kind))


def _require_tensor(ctx: Context, x) -> None:
    if not isinstance(x, Tensor):
        raise Unsupported(f"{op_name(ctx.node)} of {x!r}: needs a tensor")


@converts(aten.gelu.default)
def _gelu(ctx, a):
    return ctx.graph.gelu(a["input"], approximate=a.get("approximate", "none"))


@converts(aten.gelu_backward.default)
def _gelu_backward(ctx, a):
    """grad * gelu'(x), in f32 and rounded once. The exact GELU's
    derivative is cdf(x) + x pdf(x); kg has no erf, but its gelu is x cdf(x)
    (computed with erf), so cdf(x) is gelu(x) / x (1/2 at 0). The tanh
    approximation's derivative is torch's formula."""
    graph = ctx.graph
    grad, x = (_cast(graph, t, "f32") for t in (a["grad_output"], a["input"]))
    approximate = a.get("approximate", "none")
    if approximate == "none":
        zero = graph.eq(x, 0.0)
        safe = graph.where(zero, graph.constant(1.0, (), "f32"), x)
        cdf = graph.where(zero, graph.constant(0.5, (), "f32"),
                          graph.div(graph.gelu(x), safe))
        pdf = graph.mul(graph.exp(graph.mul(graph.square(x), -0.5)),
                        1.0 / math.sqrt(2.0 * math.pi))
        derivative = graph.add(cdf, graph.mul(x, pdf))
    elif approximate == "tanh":
        beta, kappa = math.sqrt(2.0 / math.pi), 0.044715
        square = graph.square(x)
        inner = graph.mul(graph.add(x, graph.mul(graph.mul(square, x), kappa)), beta)
        tanh = graph.tanh(inner)
        left = graph.mul(graph.add(tanh, 1.0), 0.5)
        slope = graph.mul(graph.add(graph.mul(square, 3.0 * kappa), 1.0), beta)
        right = graph.mul(graph.mul(graph.mul(x, 0.5), graph.sub(1.0, graph.square(tanh))),
                          slope)
        derivative = graph.add(left, right)
    else:
        raise Unsupported(f"gelu_backward with approximate={approximate!r}")
    return _cast(graph, graph.mul(grad, derivative), ctx.out_dtype)


@converts(aten.clamp.default)
def _clamp(ctx, a):
    low, high = a.get("min"), a.get("max")
    low = None if low is None else _number(low, "clamp min")
    high = None if high is None else _number(high, "clamp max")
    x = a["input"]
    if x.dtype in _FLOATS:
        return ctx.graph.clamp(x, low, high)
    # kg's clamp is for floats; integers (a loss's target indices) clamp
    # exactly through maximum and minimum.
    if x.dtype == "i1" or ctx.out_dtype != x.dtype or any(
            v is not None and v != int(v) for v in (low, high)):
        raise Unsupported(f"clamp of {x.dtype} to {ctx.out_dtype} with bounds {low}, {high}")
    if low is not None:
        x = ctx.graph.maximum(x, low)
    return x if high is None else ctx.graph.minimum(x, high)


# torch's pow by these exponents is the dedicated op (its CUDA kernel
# special-cases them the same way).
_POWERS = {2.0: "square", 0.5: "sqrt", -0.5: "rsqrt", -1.0: "reciprocal", 1.0: None}


@converts(aten.pow.Tensor_Scalar)
def _pow_scalar(ctx, a):
    x, exponent = a["input"], _number(a["exponent"], "pow exponent")
    x = _cast(ctx.graph, x, ctx.out_dtype)
    if exponent in _POWERS:
        kind = _POWERS[exponent]
        return x if kind is None else getattr(ctx.graph, kind)(x)
    if exponent in _MULTIPLIED_POWERS:
        return _multiplied_power(ctx.graph, x, exponent)
    return _binary(ctx, "pow", x, exponent)


# Exponents torch's kernel computes by multiplying rather than by powf
# (GPT-2's GELU cubes its input): x*x*x and 1/(x*x), rounded once from f32
# as torch's kernel rounds them. powf is a libdevice call of some forty
# instructions.
_MULTIPLIED_POWERS = (3.0, -2.0)


def _multiplied_power(graph: Graph, x: Tensor, exponent: float) -> Tensor:
    wide = _cast(graph, x, "f32") if x.dtype in ("f16", "bf16") else x
    square = graph.square(wide)
    power = graph.mul(square, wide) if exponent == 3.0 else graph.reciprocal(square)
    return _cast(graph, power, x.dtype)


@converts(aten.pow.Tensor_Tensor)
def _pow_tensor(ctx, a):
    return _binary(ctx, "pow", a["input"], a["exponent"])


# --------------------------------------------------------------------------
# Matmuls
# --------------------------------------------------------------------------


@converts(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _mm(ctx, a):
    other = a.get("mat2", a.get("other"))
    return ctx.graph.matmul(a["input"], other)


@converts(aten.addmm.default)
def _addmm(ctx, a):
    graph = ctx.graph
    product = graph.matmul(a["mat1"], a["mat2"])
    beta, alpha = _number(a.get("beta", 1), "addmm beta"), _number(a.get("alpha", 1), "addmm alpha")
    if alpha != 1:
        product = graph.mul(product, alpha)
    bias = a["input"]
    if beta == 0:
        return product
    if beta != 1:
        bias = graph.mul(bias, beta)
    return graph.add(product, bias)


# --------------------------------------------------------------------------
# Reductions and normalizations
# --------------------------------------------------------------------------


def _reduction(kind: str):
    def convert(ctx, a):
        x = a["input"]
        dims = _dims(a.get("dim"), x.ndim, f"{op_name(ctx.node)} dim")
        if a.get("dtype") is not None:
            x = _cast(ctx.graph, x, kg_dtype(a["dtype"], f"{op_name(ctx.node)} dtype"))
        elif kind == "sum" and x.dtype == "i1" and x.ndim:
            return _count(ctx, x, dims, bool(a.get("keepdim", False)))
        elif kind == "sum" and x.dtype not in _FLOATS:
            # torch sums bools and integers as int64.
            x = _cast(ctx.graph, x, ctx.out_dtype)
        if not x.ndim:
            return x
        result = getattr(ctx.graph, kind)(x, dims, keepdim=bool(a.get("keepdim", False)))
        return _cast(ctx.graph, result, ctx.out_dtype)
    return convert


# Up to 2^24 ones, every partial sum of an f32 count is a whole number f32
# holds exactly, in any order of summation.
_EXACT_F32_COUNT = 1 << 24


def _count(ctx: Context, mask: Tensor, dims: list[int], keepdim: bool) -> Tensor:
    """The number of true elements of a bool mask over dims (a loss counting
    its targets that are not ignored), as torch's int64 sum of a bool gives
    it: kg sums floats, so the mask is summed as f32 ones, which is exact
    while there are at most 2^24 of them."""
    count = math.prod(mask.shape[d] for d in dims)
    if count > _EXACT_F32_COUNT:
        raise Unsupported(f"sum of {count} bools: kg counts in f32, exact up to 2^24")
    graph = ctx.graph
    total = graph.sum(graph.cast(mask, "f32"), dims, keepdim=keepdim)
    return _cast(graph, total, ctx.out_dtype)


def _any(ctx, a):
    """torch.any over dims: kg reduces floats, so each element's truth (a
    bool, or a number not zero: NaN counts as true, as in torch) is a 0 or 1
    in f16 (exact, and half the bytes of f32 where a kernel stores them for
    the reduction), and a row is any where its max is 1."""
    graph, x = ctx.graph, a["input"]
    dims = _dims(a.get("dim"), x.ndim, f"{op_name(ctx.node)} dim")
    truth = x if x.dtype == "i1" else graph.ne(x, 0)
    if not x.ndim:
        return _cast(graph, truth, ctx.out_dtype)
    ones = graph.cast(truth, "f16")
    return _cast(graph, graph.max(ones, dims, keepdim=bool(a.get("keepdim", False))),
                 ctx.out_dtype)


converts(aten.sum.dim_IntList, aten.sum.default)(_reduction("sum"))
converts(aten.mean.dim, aten.mean.default)(_reduction("mean"))
converts(aten.amax.default)(_reduction("max"))
converts(aten.amin.default)(_reduction("min"))
# A row that is wholly masked (scaled_dot_product_attention's math path
# asks, to give such rows zeros instead of NaN) is an any over keys.
# (torch.all reaches kgc as not-any-not: torch's decompositions make it so.)
converts(aten.any.dim, aten.any.dims, aten.any.default)(_any)


# A running sum is a product with a triangular matrix of ones; its work
# grows with the square of the summed extent, so it stays with PyTorch's
# scan past this many elements along it.
_CUMSUM_EXTENT = 4096


@converts(aten.cumsum.default)
def _cumsum(ctx, a):
    """The running sum along a dim as a product with ones on and above the
    diagonal: y[..., j] = sum over k <= j of x[..., k] (transformers counts
    a mask's packed sequences this way). Bools are counted in f32 from f16
    zeros and ones, exact up to 2^24; floats are summed in f32 (the f32
    product at IEEE precision), as torch's scan sums them. Integers other
    than bools stay with PyTorch: f32 would round a large one."""
    graph, x = ctx.graph, a["input"]
    if not isinstance(x, Tensor):
        raise Unsupported("cumsum of a value that is not a tensor")
    if a.get("dtype") is not None:
        x = _cast(graph, x, kg_dtype(a["dtype"], "cumsum dtype"))
    if x.ndim == 0:
        return _cast(graph, x, ctx.out_dtype)
    (dim,) = _dims(a["dim"], x.ndim, "cumsum dim")
    extent = x.shape[dim]
    if extent == 1:
        return _cast(graph, x, ctx.out_dtype)
    if x.dtype == "i1":
        operand, precision = "f16", None
    elif x.dtype in _FLOATS:
        operand = x.dtype
        precision = "ieee" if x.dtype == "f32" else None
    else:
        raise Unsupported(f"cumsum of {x.dtype}: kgc sums by a product in f32, which is exact "
                          "for bools and rounds large integers")
    if extent > _CUMSUM_EXTENT:
        raise Unsupported(f"cumsum along {extent} elements: kgc's product with a triangular "
                          f"matrix grows with their square (up to {_CUMSUM_EXTENT})")
    last = x.ndim - 1
    order = list(range(x.ndim))
    order[dim], order[last] = last, dim
    moved = x if dim == last else graph.transpose(x, order)
    rows = moved if moved.ndim > 1 else graph.reshape(moved, (1, extent))
    ones = graph.cast(graph.le(graph.iota((extent, extent), 0, "i32"),
                               graph.iota((extent, extent), 1, "i32")), operand)
    sums = graph.matmul(_cast(graph, rows, operand), ones, precision=precision, out_dtype="f32")
    sums = sums if moved.ndim > 1 else graph.reshape(sums, (extent,))
    sums = sums if dim == last else graph.transpose(sums, order)
    return _cast(graph, sums, ctx.out_dtype)


@converts(aten.var.correction, aten.var.dim)
def _var(ctx, a):
    graph, x = ctx.graph, a["input"]
    dims = _dims(a.get("dim"), x.ndim, "var dim")
    correction = a.get("correction")
    if correction is None:
        correction = 1 if a.get("unbiased", True) else 0
    count = math.prod(x.shape[d] for d in dims)
    divisor = count - _number(correction, "var correction")
    if divisor <= 0:
        raise Unsupported(f"var over {count} elements with correction {correction}")
    wide = _cast(graph, x, "f32")
    centered = graph.sub(wide, graph.mean(wide, dims, keepdim=True))
    total = graph.sum(graph.square(centered), dims, keepdim=bool(a.get("keepdim", False)))
    return _cast(graph, graph.div(total, divisor), ctx.out_dtype)


@converts(aten._softmax.default, aten.softmax.int)
def _softmax(ctx, a):
    x = _cast(ctx.graph, a["input"], ctx.out_dtype)
    return ctx.graph.softmax(x, a["dim"])


@converts(aten._log_softmax.default, aten.log_softmax.int)
def _log_softmax(ctx, a):
    graph = ctx.graph
    x = _cast(graph, a["input"], "f32")
    dim = a["dim"]
    shifted = graph.sub(x, graph.max(x, dim, keepdim=True))
    result = graph.sub(shifted, graph.log(graph.sum(graph.exp(shifted), dim, keepdim=True)))
    return _cast(graph, result, ctx.out_dtype)


@converts(aten.native_layer_norm.default)
def _layer_norm(ctx, a):
    graph, x = ctx.graph, a["input"]
    shape = static_shape(a["normalized_shape"], "normalized_shape")
    result = graph.layer_norm(x, a.get("weight"), a.get("bias"), eps=a["eps"],
                              normalized_shape=shape)
    if not _results_used(ctx) - {0}:
        return (result, None, None)
    # Training saves the mean and 1/std for the backward: computed again in
    # f32 over the normalized dims, kept as torch keeps them.
    dims = list(range(x.ndim - len(shape), x.ndim))
    wide = _cast(graph, x, "f32")
    mean = graph.mean(wide, dims, keepdim=True)
    variance = graph.mean(graph.square(graph.sub(wide, mean)), dims, keepdim=True)
    rstd = graph.rsqrt(graph.add(variance, _number(a["eps"], "layer_norm eps")))
    saved = []
    for value, expected in ((mean, ctx.value[1]), (rstd, ctx.value[2])):
        value = graph.reshape(value, static_shape(expected.shape, "layer_norm statistics"))
        saved.append(_cast(graph, value, kg_dtype(expected.dtype, "layer_norm statistics")))
    return (result, *saved)


@converts(aten.rms_norm.default)
def _rms_norm(ctx, a):
    x = a["input"]
    shape = static_shape(a["normalized_shape"], "normalized_shape")
    eps = a.get("eps")
    if eps is None:
        eps = torch.finfo({v: k for k, v in _KG_DTYPES.items()}[x.dtype]).eps
    return ctx.graph.rms_norm(x, a.get("weight"), eps=eps, normalized_shape=shape)


# --------------------------------------------------------------------------
# Attention: matmul, softmax, matmul
# --------------------------------------------------------------------------


def _attention(graph: Graph, q: Tensor, k: Tensor, v: Tensor, mask, is_causal: bool,
               scale, dropout: float, enable_gqa: bool = False) -> Tensor:
    # The fused ops pass enable_gqa=True: torch calls them with fewer
    # key/value heads than query heads only for grouped-query attention.
    """softmax(q @ k^T * scale + mask) @ v, the scores in f32 as the fused
    kernels keep them; the probabilities in the inputs' dtype, as the fused
    kernels feed them to the second matmul. A boolean mask (True: the key
    takes part) and `is_causal` become an additive f32 mask of 0 and -inf,
    the causal one computed from positions (iota, cmp, select), so that
    the attention kernel makes it from its indices instead of reading it."""
    _check_attention(q, k, v, dropout, enable_gqa)
    if q.shape[1] != k.shape[1]:
        k, v = (_repeat_heads(graph, t, q.shape[1] // t.shape[1]) for t in (k, v))
    scores = _attention_scores(graph, q, k, mask, is_causal, scale)
    probabilities = _cast(graph, graph.softmax(scores, -1), q.dtype)
    return graph.matmul(probabilities, v)


def _attention_scale(q: Tensor, scale) -> float:
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else _number(scale, "attention scale")


def _attention_scores(graph: Graph, q: Tensor, k: Tensor, mask, is_causal: bool,
                      scale) -> Tensor:
    """q @ k^T * scale + mask in f32 (k with as many heads as q)."""
    scale = _attention_scale(q, scale)
    scores = graph.matmul(q, graph.transpose(k, (0, 1, 3, 2)), out_dtype="f32")
    scores = graph.mul(scores, scale)
    queries, keys = scores.shape[-2:]
    if is_causal:
        if mask is not None:
            raise Unsupported("attention with both is_causal and a mask")
        # torch's causal mask is aligned to the top left: query i sees keys
        # 0..i.
        mask = graph.ge(graph.iota((queries, 1), 0, "i32"), graph.iota((1, keys), 1, "i32"))
    if isinstance(mask, Tensor):
        if mask.dtype == "i1":
            mask = graph.where(mask, graph.constant(0.0, (), "f32"), float("-inf"))
        scores = graph.add(scores, _cast(graph, mask, "f32"))
    elif mask is not None:
        raise Unsupported(f"attention mask {mask!r}")
    return scores


def _check_attention(q: Tensor, k: Tensor, v: Tensor, dropout, enable_gqa: bool) -> None:
    if dropout:
        raise Unsupported(f"attention with dropout {dropout}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise Unsupported("attention on tensors of rank other than 4")
    if q.shape[1] != k.shape[1] and (not enable_gqa or q.shape[1] % k.shape[1]
                                     or k.shape[1] != v.shape[1]):
        raise Unsupported(f"attention with {q.shape[1]} query heads over {k.shape[1]} key "
                          "heads without enable_gqa; broadcast K and V over the query heads "
                          "first")


def _logsumexp(graph: Graph, q: Tensor, k: Tensor, mask, is_causal: bool, scale) -> Tensor:
    """The fused attention ops' second result, saved for their backward:
    log(sum(exp(scores))) over the keys, (batch, heads, queries) in f32."""
    if q.shape[1] != k.shape[1]:
        k = _repeat_heads(graph, k, q.shape[1] // k.shape[1])
    scores = _attention_scores(graph, q, k, mask, is_causal, scale)
    peak = graph.max(scores, -1, keepdim=True)
    total = graph.sum(graph.exp(graph.sub(scores, peak)), -1, keepdim=True)
    lse = graph.add(graph.log(total), peak)
    return graph.reshape(lse, lse.shape[:-1])


def _results_used(ctx: Context) -> set[int]:
    return {user.args[1] for user in ctx.node.users if user.target is operator.getitem}


def _attention_results(ctx: Context, out: Tensor, lse, count: int, state: tuple[int, ...],
                       dropout) -> tuple:
    """The results of a fused attention op of `count` results: its output;
    its logsumexp, computed only when the backward saves it; and without
    dropout its random-number state (results `state`), which the backward
    then never reads, as zeros where kg holds its dtype (CUDA's flash
    attention keeps it in uint64: that op then stays with PyTorch). Its
    sequence offsets stay with PyTorch."""
    used = _results_used(ctx)
    results: list = [out] + [None] * (count - 1)
    if 1 in used:
        lse = lse()
        expected = ctx.value[1]
        shape = static_shape(expected.shape, "logsumexp")
        if len(shape) == 3 and shape[:2] == lse.shape[:2] and shape[2] > lse.shape[2]:
            # The memory-efficient kernel's is padded past the queries (to a
            # multiple of 32); its backward reads the queries' part.
            padding = ctx.graph.constant(0.0, (*shape[:2], shape[2] - lse.shape[2]), "f32")
            lse = ctx.graph.concat([lse, padding], 2)
        if math.prod(shape) != math.prod(lse.shape) or expected.dtype != torch.float32:
            raise Unsupported(f"{op_name(ctx.node)}: a logsumexp of {tuple(expected.shape)} "
                              f"{expected.dtype}; kgc computes it (batch, heads, queries) f32")
        # cuDNN's keeps a trailing dim of 1.
        results[1] = lse if shape == lse.shape else ctx.graph.reshape(lse, shape)
    for index in sorted(used - {0, 1}):
        value = ctx.value[index]
        if index not in state or dropout or not isinstance(value, torch.Tensor) \
                or value.dtype not in _KG_DTYPES:
            raise Unsupported(f"{op_name(ctx.node)}: its result #{index} (sequence offsets or "
                              f"random-number state, {getattr(value, 'dtype', value)}) is used; "
                              "kgc computes its output, its logsumexp and, without dropout, a "
                              "random-number state of int64")
        shape = static_shape(value.shape, f"result #{index}")
        results[index] = ctx.graph.constant(0, shape, kg_dtype(value.dtype, "state"))
    return tuple(results)


def _attention_backward(ctx: Context, grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor,
                        out: Tensor, lse: Tensor, mask, is_causal: bool, scale,
                        dropout) -> tuple[Tensor, Tensor, Tensor]:
    """dq, dk, dv of softmax(q k^T * scale + mask) v, as the fused backward
    kernels compute them, in f32 from the saved output and logsumexp:
    P = exp(scores - lse), dv = P^T do, dP = do v^T, dS = P (dP - rowsum(do
    o)), dq = dS k * scale, dk = dS^T q * scale; with fewer key/value heads
    than query heads (GQA) dk and dv are summed over each head's group."""
    graph = ctx.graph
    _check_attention(q, k, v, dropout, True)
    if not all(isinstance(t, Tensor) for t in (grad_out, out, lse)):
        raise Unsupported(f"{op_name(ctx.node)} of values that are not tensors")
    dtype = q.dtype
    group = q.shape[1] // k.shape[1]
    wide = [_cast(graph, t, "f32") for t in (grad_out, q, k, v, out)]
    grad_out, q32, k32, v32, out = wide
    if group != 1:
        k32, v32 = (_repeat_heads(graph, t, group) for t in (k32, v32))
    batch, heads, queries = q.shape[:3]
    if lse.shape == (batch, heads, queries, 1):
        lse = graph.reshape(lse, (batch, heads, queries))  # cuDNN's
    if lse.shape != (batch, heads, queries):
        if lse.ndim != 3 or lse.shape[:2] != (batch, heads) or lse.shape[2] < queries:
            raise Unsupported(f"{op_name(ctx.node)}: logsumexp of {lse.shape}")
        # The memory-efficient kernel pads it past the queries.
        lse = graph.slice(lse, (0, 0, 0), (batch, heads, queries))
    scale_value = _attention_scale(q, scale)
    scores = _attention_scores(graph, q32, k32, mask, is_causal, scale)
    probabilities = graph.exp(graph.sub(scores, graph.reshape(_cast(graph, lse, "f32"),
                                                              (batch, heads, queries, 1))))
    transposed = (0, 1, 3, 2)
    grad_v = graph.matmul(graph.transpose(probabilities, transposed), grad_out)
    grad_p = graph.matmul(grad_out, graph.transpose(v32, transposed))
    row = graph.sum(graph.mul(grad_out, out), -1, keepdim=True)
    grad_s = graph.mul(graph.mul(probabilities, graph.sub(grad_p, row)), scale_value)
    grad_q = graph.matmul(grad_s, k32)
    grad_k = graph.matmul(graph.transpose(grad_s, transposed), q32)
    if group != 1:
        def fold(t):
            keys, dim = t.shape[2:]
            return graph.sum(graph.reshape(t, (batch, heads // group, group, keys, dim)), 2)
        grad_k, grad_v = fold(grad_k), fold(grad_v)
    return tuple(_cast(graph, t, dtype) for t in (grad_q, grad_k, grad_v))


def _repeat_heads(graph: Graph, x: Tensor, times: int) -> Tensor:
    """(batch, heads, length, dim) -> (batch, heads * times, length, dim),
    query head h reading key/value head h // times (enable_gqa's
    repeat_interleave), through a broadcast the attention kernel reads at
    the key/value head without making it."""
    batch, heads, length, dim = x.shape
    wide = graph.broadcast_to(graph.reshape(x, (batch, heads, 1, length, dim)),
                              (batch, heads, times, length, dim))
    return graph.reshape(wide, (batch, heads * times, length, dim))


def _fused_attention(mask_name: str | None, count: int, state: tuple[int, ...] = ()):
    """A fused attention op of `count` results (`state`: the positions of
    its random-number state): its output, and its logsumexp where the
    backward saves it."""
    def convert(ctx, a):
        q, k, v = a["query"], a["key"], a["value"]
        mask = a.get(mask_name) if mask_name else None
        out = _attention(ctx.graph, q, k, v, mask, a.get("is_causal"), a.get("scale"),
                         a.get("dropout_p", 0.0), enable_gqa=True)
        return _attention_results(
            ctx, out, lambda: _logsumexp(ctx.graph, q, k, mask, a.get("is_causal"),
                                         a.get("scale")), count, state,
            a.get("dropout_p", 0.0))
    return convert


converts(aten._scaled_dot_product_flash_attention.default)(_fused_attention(None, 9, (6, 7)))
converts(aten._scaled_dot_product_efficient_attention.default)(
    _fused_attention("attn_bias", 4, (2, 3)))
converts(aten._scaled_dot_product_cudnn_attention.default)(
    _fused_attention("attn_bias", 9, (6, 7)))
converts(aten._scaled_dot_product_flash_attention_for_cpu.default)(
    _fused_attention("attn_mask", 2))


@converts(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _cpu_attention_backward(ctx, a):
    return _attention_backward(ctx, a["grad_out"], a["query"], a["key"], a["value"], a["out"],
                               a["logsumexp"], a.get("attn_mask"), a["is_causal"],
                               a.get("scale"), a["dropout_p"])


@converts(aten._scaled_dot_product_flash_attention_backward.default)
def _flash_attention_backward(ctx, a):
    if any(isinstance(a[name], Tensor) for name in ("cum_seq_q", "cum_seq_k")):
        raise Unsupported("flash attention's backward over packed sequences (cum_seq_q)")
    return _attention_backward(ctx, a["grad_out"], a["query"], a["key"], a["value"], a["out"],
                               a["logsumexp"], None, a["is_causal"], a.get("scale"),
                               a["dropout_p"])


@converts(aten._scaled_dot_product_cudnn_attention_backward.default)
def _cudnn_attention_backward(ctx, a):
    if any(isinstance(a[name], Tensor) for name in ("cum_seq_q", "cum_seq_k")):
        raise Unsupported("cuDNN attention's backward over packed sequences (cum_seq_q)")
    return _attention_backward(ctx, a["grad_out"], a["query"], a["key"], a["value"], a["out"],
                               a["logsumexp"], a.get("attn_bias"), a["is_causal"],
                               a.get("scale"), a["dropout_p"])


@converts(aten._scaled_dot_product_efficient_attention_backward.default)
def _efficient_attention_backward(ctx, a):
    if list(a["grad_input_mask"])[3:] not in ([], [False]):
        raise Unsupported("the gradient of an attention bias")
    grads = _attention_backward(ctx, a["grad_out_"], a["query"], a["key"], a["value"],
                                a["out"], a["logsumexp"], a.get("attn_bias"),
                                a.get("is_causal", False), a.get("scale"), a["dropout_p"])
    return grads + (None,)


@converts(aten.scaled_dot_product_attention.default)
def _sdpa(ctx, a):
    return _attention(ctx.graph, a["query"], a["key"], a["value"], a.get("attn_mask"),
                      a.get("is_causal"), a.get("scale"), a.get("dropout_p", 0.0),
                      bool(a.get("enable_gqa", False)))


# --------------------------------------------------------------------------
# Views, copies, casts and constants
# --------------------------------------------------------------------------


@converts(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
          aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
          layout=True)
def _reshape(ctx, a):
    return _as_shape(ctx, a["input"])


@converts(aten.permute.default, layout=True)
def _permute(ctx, a):
    x = a["input"]
    perm = [d % x.ndim for d in _static_value(a["dims"], "permute dims")]
    return x if perm == list(range(x.ndim)) else ctx.graph.transpose(x, perm)


@converts(aten.t.default, aten.transpose.int, layout=True)
def _transpose(ctx, a):
    x = a["input"]
    if x.ndim < 2 and "dim0" not in a:
        return x
    perm = list(range(x.ndim))
    first, second = (a["dim0"] % x.ndim, a["dim1"] % x.ndim) if "dim0" in a else (0, 1)
    perm[first], perm[second] = perm[second], perm[first]
    return x if perm == list(range(x.ndim)) else ctx.graph.transpose(x, perm)


@converts(aten.expand.default, layout=True)
def _expand(ctx, a):
    x, shape = a["input"], ctx.out_shape
    return x if x.shape == shape else ctx.graph.broadcast_to(x, shape)


@converts(aten.slice.Tensor, layout=True)
def _slice(ctx, a):
    x = a["input"]
    dim = _static_value(a.get("dim", 0), "slice dim") % x.ndim
    size = x.shape[dim]
    start, step = _static_value(a.get("start"), "slice start"), a.get("step", 1)
    start = 0 if start is None else start
    count = ctx.out_shape[dim]
    if isinstance(size, int):
        start = max(0, min(size, start + size if start < 0 else start))
    if count == size and start == 0:
        return x  # the whole dim, static or the dynamic extent
    if count == 0:
        raise Unsupported("slice of no elements")
    offsets = [0] * x.ndim
    offsets[dim] = start
    strides = [1] * x.ndim
    strides[dim] = _static_value(step, "slice step")
    return ctx.graph.slice(x, offsets, ctx.out_shape, strides)


@converts(aten.split_with_sizes.default, aten.split.Tensor, layout=True, every_result=True)
def _split(ctx, a):
    """Each piece a slice: the fused projections of GPT-2 (`c_attn`) and
    Phi-3 (`qkv_proj`, `gate_up_proj`) split after their matmul, which
    then fuses with what reads each piece."""
    x = a["input"]
    dim = _static_value(a.get("dim", 0), "split dim") % x.ndim
    pieces, start = [], 0
    for index, value in enumerate(ctx.value):
        if isinstance(value.shape[dim], torch.SymInt):
            raise Unsupported(f"a split along dim {dim}, whose pieces have dynamic sizes")
        shape = static_shape(value.shape, f"piece #{index} of the split")
        if shape[dim] == 0:
            raise Unsupported(f"a split with an empty piece (#{index})")
        offsets = [0] * x.ndim
        offsets[dim] = start
        pieces.append(x if shape == x.shape else ctx.graph.slice(x, offsets, shape))
        start += shape[dim]
    return tuple(pieces)


@converts(aten.select.int, layout=True)
def _select(ctx, a):
    x = a["input"]
    dim = _static_value(a["dim"], "select dim") % x.ndim
    index = _static_value(a["index"], "select index") % x.shape[dim]
    offsets, sizes = [0] * x.ndim, list(x.shape)
    offsets[dim], sizes[dim] = index, 1
    return _as_shape(ctx, ctx.graph.slice(x, offsets, sizes))


# An empty tensor (an empty KV cache before the first step) is no input of a
# kernel graph: kgc kernels need an element in every tensor. Concatenation
# leaves it out; any other op on one stays with PyTorch.
EMPTY = "empty tensor"


@converts(aten.cat.default)
def _cat(ctx, a):
    tensors = [t for t in a["tensors"] if t is not EMPTY]
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise Unsupported("cat of values that are not tensors")
    dtype = ctx.out_dtype
    tensors = [_cast(ctx.graph, t, dtype) for t in tensors]
    if len(tensors) == 1:
        return tensors[0]
    return ctx.graph.concat(tensors, a.get("dim", 0))


@converts(aten.slice_scatter.default)
def _slice_scatter(ctx, a):
    """input with src written over input[start:end] along dim: the backward
    of a slice (rotate_half's halves). Step 1 only: the parts of input
    before and after the slice, joined around src."""
    graph, x, src = ctx.graph, a["input"], a["src"]
    if not isinstance(x, Tensor) or not isinstance(src, Tensor):
        raise Unsupported("slice_scatter of values that are not tensors")
    dim = _static_value(a.get("dim", 0), "slice_scatter dim") % x.ndim
    if _static_value(a.get("step", 1), "slice_scatter step") != 1:
        raise Unsupported(f"slice_scatter with step {a.get('step')}: kg has no strided scatter")
    size, count = x.shape[dim], src.shape[dim]
    start = _static_value(a.get("start"), "slice_scatter start")
    start = 0 if start is None else start
    start = max(0, min(size, start + size if start < 0 else start))
    if start + count > size:
        raise Unsupported(f"slice_scatter of {count} elements at {start} into {size}")
    dtype = ctx.out_dtype
    parts = []
    for begin, end in ((0, start), (start + count, size)):
        if end > begin:
            offsets, sizes = [0] * x.ndim, list(x.shape)
            offsets[dim], sizes[dim] = begin, end - begin
            parts.append(_cast(graph, graph.slice(x, offsets, sizes), dtype))
    parts.insert(1 if start > 0 else 0, _cast(graph, src, dtype))
    return parts[0] if len(parts) == 1 else graph.concat(parts, dim)


def _one_per_line(ctx: Context, x: Tensor, dim, index) -> tuple[int, Tensor]:
    """The dim and a bool mask of x's shape, true where x's position along
    dim equals index's (index: one entry along dim, x's extent elsewhere,
    as a loss indexes its class dim with the targets)."""
    if not isinstance(x, Tensor) or not isinstance(index, Tensor):
        raise Unsupported(f"{op_name(ctx.node)} of values that are not tensors")
    dim = _static_value(dim, f"{op_name(ctx.node)} dim") % x.ndim
    expected = tuple(1 if d == dim else n for d, n in enumerate(x.shape))
    if index.shape != expected:
        raise Unsupported(f"{op_name(ctx.node)} with index {index.shape} into {x.shape} along "
                          f"dim {dim}: kg computes it for one index per line, {expected}")
    index = _cast(ctx.graph, index, "i64")
    positions = ctx.graph.iota(x.shape, dim, "i64")
    return dim, ctx.graph.eq(positions, ctx.graph.broadcast_to(index, x.shape))


@converts(aten.gather.default)
def _gather(ctx, a):
    """x[..., index, ...] along dim. An index of one line (extent 1 on
    every other dim: BERT's token types at its positions) takes that line
    of x at the indices, a kg.gather, of any type. One index per line (a
    loss picking the target's log-probability): the line summed where the
    position is the index, which adds the one picked element to zeros
    exactly; an index out of range picks nothing (0), where torch raises."""
    x, index = a["input"], a["index"]
    if isinstance(x, Tensor) and isinstance(index, Tensor) and index.ndim == x.ndim:
        dim = _static_value(a["dim"], "gather dim") % x.ndim
        if all(n == 1 for d, n in enumerate(index.shape) if d != dim):
            return _gathered_line(ctx, x, dim, _index_tensor(ctx, index, "gather index"))
    if not isinstance(x, Tensor) or x.dtype not in _FLOATS:
        raise Unsupported(f"gather of {getattr(x, 'dtype', x)}: kg sums floats")
    dim, picked = _one_per_line(ctx, x, a["dim"], a["index"])
    zero = ctx.graph.constant(0.0, (), x.dtype)
    return ctx.graph.sum(ctx.graph.where(picked, x, zero), dim, keepdim=True)


# -- indexed ops: gathers and scatters along one dimension ---------------------
#
# kg.gather and kg.scatter take one 1-D tensor of indices on one dimension.
# An index tensor of any rank is flattened to it (an embedding of a batch
# of token sequences), and the values around it reshaped. torch checks
# every index on the device and raises; kgc's kernels do not (the CPU
# executor does, naming the index): an index out of range is outside the
# contract. Where torch counts a negative index from the end (indexing,
# index_put), the converter does too.


def _index_tensor(ctx: Context, index, what: str) -> Tensor:
    if not isinstance(index, Tensor):
        raise Unsupported(f"{what} that is not a tensor")
    if index.dtype not in ("i32", "i64"):
        raise Unsupported(f"{what} of {index.dtype}: kg indexes with i32 or i64 (a boolean mask "
                          "selects a number of elements known only from its values)")
    return index


def _flat_index(ctx: Context, index: Tensor, extent: int, wrap: bool) -> Tensor:
    """`index` as one dimension, a negative index counted from the end of
    `extent` when `wrap` (as torch's indexing does)."""
    graph = ctx.graph
    count = math.prod(index.shape)
    flat = index if index.shape == (count,) else graph.reshape(index, (count,))
    if wrap:
        zero = graph.constant(0, (), flat.dtype)
        flat = graph.where(graph.lt(flat, zero), graph.add(flat, graph.constant(extent, (), flat.dtype)),
                           flat)
    return flat


def _single_index(ctx: Context, x: Tensor, indices) -> tuple[int, Tensor]:
    """(dim, index) of an index list that names one tensor on one dim,
    None on the dims before it (x[:, :, index])."""
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        raise Unsupported(f"{op_name(ctx.node)} with {len(given)} index tensors: kg gathers and "
                          "scatters along one dimension")
    dim, index = given[0]
    return dim, _index_tensor(ctx, index, f"{op_name(ctx.node)} index")


def _gathered_line(ctx: Context, x: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch.gather(x, dim, index) for an index of extent 1 on every dim
    but `dim`: x's first line along dim, at the indices (torch.gather counts
    no negative index from the end)."""
    graph = ctx.graph
    line = tuple(n if d == dim else 1 for d, n in enumerate(x.shape))
    if line != x.shape:
        x = graph.slice(x, [0] * x.ndim, line)
    return _gathered(ctx, x, dim, graph.reshape(index, (index.shape[dim],)), wrap=False)


def _gathered(ctx: Context, x: Tensor, dim: int, index: Tensor, wrap: bool) -> Tensor:
    """x[..., index, ...] along dim: the index's own shape in place of dim."""
    flat = _flat_index(ctx, index, x.shape[dim], wrap)
    rows = ctx.graph.gather(x, flat, dim)
    shape = x.shape[:dim] + index.shape + x.shape[dim + 1:]
    rows = rows if rows.shape == shape else ctx.graph.reshape(rows, shape)
    return _cast(ctx.graph, rows, ctx.out_dtype)


def _scattered(ctx: Context, x: Tensor, dim: int, index: Tensor, values, mode: str,
               wrap: bool) -> Tensor:
    """x with `values` (broadcast to x[..., index, ...]) written or added
    at index along dim."""
    graph = ctx.graph
    dtype = ctx.out_dtype
    count = math.prod(index.shape)
    if count > 1 and dtype not in _FLOATS:
        raise Unsupported(f"{op_name(ctx.node)} of {count} indices into {dtype}: kgc computes a "
                          "scatter of several indices as a one-hot matmul, which takes floats")
    (values,) = _operands_as(ctx, (values,), dtype)
    indexed = x.shape[:dim] + index.shape + x.shape[dim + 1:]
    if values.shape != indexed:
        values = graph.broadcast_to(values, indexed)
    source = x.shape[:dim] + (count,) + x.shape[dim + 1:]
    if values.shape != source:
        values = graph.reshape(values, source)
    flat = _flat_index(ctx, index, x.shape[dim], wrap)
    return graph.scatter(_cast(graph, x, dtype), flat, values, dim, mode)


@converts(aten.embedding.default)
def _embedding(ctx, a):
    """The rows of the weight that the ids name: a gather along dim 0. The
    padding index and the gradient's options change only the backward."""
    weight = a["weight"]
    ids = _index_tensor(ctx, a["indices"], "embedding ids")
    if not isinstance(weight, Tensor) or weight.ndim != 2:
        raise Unsupported(f"embedding of a weight that is not 2-D: {getattr(weight, 'shape', weight)}")
    return _gathered(ctx, weight, 0, ids, wrap=False)


@converts(aten.embedding_dense_backward.default)
def _embedding_dense_backward(ctx, a):
    """The weight's gradient: each id's row of the output gradient added
    to zeros at the id (a scatter-add); ids equal to padding_idx add
    nothing."""
    graph, grad = ctx.graph, a["grad_output"]
    ids = _index_tensor(ctx, a["indices"], "embedding ids")
    if _static_value(a.get("scale_grad_by_freq", False), "scale_grad_by_freq"):
        raise Unsupported("embedding_dense_backward with scale_grad_by_freq: kg does not count "
                          "the ids")
    if not isinstance(grad, Tensor):
        raise Unsupported("embedding_dense_backward of a gradient that is not a tensor")
    rows = _static_value(a["num_weights"], "num_weights")
    width = grad.shape[-1]
    padding = _static_value(a.get("padding_idx", -1), "padding_idx")
    dtype = ctx.out_dtype
    if dtype not in _FLOATS:
        raise Unsupported(f"embedding_dense_backward of {dtype}")
    flat = _flat_index(ctx, ids, rows, wrap=False)
    count = flat.shape[0]
    source = _cast(graph, grad if grad.shape == (count, width) else graph.reshape(grad, (count, width)),
                   dtype)
    if padding >= 0:
        skipped = graph.eq(graph.reshape(flat, (count, 1)), graph.constant(padding, (), flat.dtype))
        source = graph.where(skipped, graph.constant(0.0, (), dtype), source)
    zeros = graph.constant(0.0, (rows, width), dtype)
    return graph.scatter(zeros, flat, source, 0, "add")


def _indexed_tensor(ctx: Context, x) -> Tensor:
    if not isinstance(x, Tensor) or x.ndim == 0:
        raise Unsupported(f"{op_name(ctx.node)} of a value that is not a tensor of at least one "
                          "dimension")
    return x


@converts(aten.index_select.default)
def _index_select(ctx, a):
    x = _indexed_tensor(ctx, a["input"])
    dim = _static_value(a["dim"], "index_select dim") % x.ndim
    index = _index_tensor(ctx, a["index"], "index_select index")
    if index.ndim > 1:
        raise Unsupported(f"index_select with a {index.ndim}-D index")
    return _gathered(ctx, x, dim, index, wrap=False)


def _merged_index(ctx: Context, x: Tensor, indices) -> tuple[Tensor, int, Tensor]:
    """(x with the indexed dims merged into one, that dim, the index into
    it) for index tensors on adjacent dims (x[b, s] as an attention mask
    reads a padding mask): each index, counted from the end where negative
    and broadcast to their common shape, times the merged stride."""
    graph = ctx.graph
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    dims = [d for d, _ in given]
    if dims != list(range(dims[0], dims[0] + len(dims))):
        raise Unsupported(f"{op_name(ctx.node)} with index tensors on dims {dims}, which are not "
                          "adjacent (torch puts the result's indexed dims first)")
    tensors = [_index_tensor(ctx, i, f"{op_name(ctx.node)} index") for _, i in given]
    shape = tuple(torch.broadcast_shapes(*(t.shape for t in tensors)))
    first, sizes = dims[0], x.shape[dims[0]:dims[-1] + 1]
    flat = None
    for position, index in enumerate(tensors):
        index = _cast(graph, index, "i64")
        size = sizes[position]
        zero = graph.constant(0, (), "i64")
        index = graph.where(graph.lt(index, zero), graph.add(index, graph.constant(size, (), "i64")),
                            index)
        if index.shape != shape:
            index = graph.broadcast_to(index, shape)
        stride = math.prod(sizes[position + 1:])
        if stride != 1:
            index = graph.mul(index, graph.constant(stride, (), "i64"))
        flat = index if flat is None else graph.add(flat, index)
    merged = graph.reshape(x, x.shape[:first] + (math.prod(sizes),) + x.shape[dims[-1] + 1:])
    return merged, first, flat


@converts(aten.index.Tensor)
def _index(ctx, a):
    """x[idx] or x[:, idx]: one index tensor on one dim, or tensors on
    adjacent dims, whose dims are merged into one gathered at the combined
    index (negative indices count from the end, as torch's indexing does)."""
    x = _indexed_tensor(ctx, a["input"])
    given = [i for i in a["indices"] if i is not None]
    if len(given) > 1:
        merged, dim, index = _merged_index(ctx, x, a["indices"])
        return _gathered(ctx, merged, dim, index, wrap=False)
    dim, index = _single_index(ctx, x, a["indices"])
    return _gathered(ctx, x, dim, index, wrap=True)


@converts(aten.index_copy.default)
def _index_copy(ctx, a):
    """x with source's slices written at index along dim (a static KV
    cache's update at the cache positions)."""
    x = _indexed_tensor(ctx, a["input"])
    dim = _static_value(a["dim"], "index_copy dim") % x.ndim
    index = _index_tensor(ctx, a["index"], "index_copy index")
    return _scattered(ctx, x, dim, index, a["source"], "assign", wrap=False)


@converts(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(ctx, a):
    """x[..., index] = values, or += with accumulate (the embedding's
    gradient as torch decomposes it, the static cache's update as
    index_copy decomposes): one index tensor on one dim."""
    x = _indexed_tensor(ctx, a["input"])
    dim, index = _single_index(ctx, x, a["indices"])
    mode = "add" if _static_value(a.get("accumulate", False), "index_put accumulate") else "assign"
    return _scattered(ctx, x, dim, index, a["values"], mode, wrap=True)


@converts(aten.constant_pad_nd.default)
def _constant_pad_nd(ctx, a):
    """x with `value` added before and after its last dims (pad lists
    (before, after) pairs from the last dim backwards; a negative amount
    cuts instead), as a causal LM's loss shifts its labels by one: slices
    of x between constant blocks, joined."""
    graph, x = ctx.graph, a["input"]
    if not isinstance(x, Tensor):
        raise Unsupported("constant_pad_nd of a value that is not a tensor")
    pad = [_static_value(p, "constant_pad_nd pad") for p in a["pad"]]
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise Unsupported(f"constant_pad_nd of {x.shape} with pad {pad}")
    value = _fill_value(a.get("value", 0), "constant_pad_nd value")
    dtype = ctx.out_dtype
    result = _cast(graph, x, dtype)
    for pair in range(len(pad) // 2):
        dim = x.ndim - 1 - pair
        before, after = pad[2 * pair], pad[2 * pair + 1]
        size = result.shape[dim]
        start, end = max(0, -before), size - max(0, -after)
        if end <= start:
            raise Unsupported(f"constant_pad_nd cuts all of dim {dim} ({size}) with pad {pad}")
        if (start, end) != (0, size):
            offsets, sizes = [0] * result.ndim, list(result.shape)
            offsets[dim], sizes[dim] = start, end - start
            result = graph.slice(result, offsets, sizes)
        def block(amount):
            shape = list(result.shape)
            shape[dim] = amount
            return [graph.constant(value, shape, dtype)] if amount > 0 else []
        parts = [*block(before), result, *block(after)]
        if len(parts) > 1:
            result = graph.concat(parts, dim)
    return result


@converts(aten.scatter.value)
def _scatter_value(ctx, a):
    """input with `value` written at index along dim, one index per line
    (the backward of a loss's gather)."""
    x = a["input"]
    dim, picked = _one_per_line(ctx, x, a["dim"], a["index"])
    (value,) = _operands_as(ctx, (a["value"],), ctx.out_dtype)
    return ctx.graph.where(picked, value, _cast(ctx.graph, x, ctx.out_dtype))


@converts(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default,
          aten.contiguous.default, layout=True)
def _copy(ctx, a):
    return a["input"]


@converts(aten._to_copy.default, prims.convert_element_type.default, layout=True)
def _to_copy(ctx, a):
    x = a.get("input", a.get("a"))
    device = a.get("device")
    if device is not None and torch.device(device) != ctx.value.device:
        raise Unsupported(f"copy to device {device}")
    source = ctx.node.args[0].meta.get("val") if ctx.node.args else None
    if isinstance(source, torch.Tensor) and source.dtype == torch.float64 \
            and ctx.out_dtype != "f32":
        # The f64 scalar arrives as f32 (`operand_dtype`): a narrower
        # result would be rounded twice.
        raise Unsupported(f"a float64 scalar converted to {ctx.out_dtype}")
    return _cast(ctx.graph, x, ctx.out_dtype)


@converts(aten.full.default, aten.scalar_tensor.default)
def _full(ctx, a):
    value = a.get("fill_value", a.get("s"))
    if _is_symbolic(value):
        scalar = _scalar_input(value, f"{op_name(ctx.node)} value")
        return ctx.graph.broadcast_to(_cast(ctx.graph, scalar, ctx.out_dtype), ctx.out_shape)
    value = _fill_value(value, f"{op_name(ctx.node)} value")
    return ctx.graph.constant(value, ctx.out_shape, ctx.out_dtype)


def _fill_value(value, what: str) -> float:
    """A constant's value: a real number, or a bool (a mask's)."""
    value = _static_value(value, what)
    return float(value) if isinstance(value, bool) else _number(value, what)


@converts(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default)
def _full_like(ctx, a):
    value = {aten.zeros_like.default: 0.0, aten.ones_like.default: 1.0}.get(ctx.node.target)
    if value is None:
        value = _fill_value(a["fill_value"], "full_like value")
    return ctx.graph.constant(value, ctx.out_shape, ctx.out_dtype)


# --------------------------------------------------------------------------
# Integer and boolean ops: comparisons, selects, logical ops, positions
# --------------------------------------------------------------------------


def _torch_dtype(dtype: str) -> torch.dtype:
    return {v: k for k, v in _KG_DTYPES.items()}[dtype]


def _promoted(ctx: Context, values) -> str:
    """torch's result dtype of an op on `values` (tensors and Python
    numbers), as kg needs its operands of one dtype."""
    # A symbolic number promotes as a Python number of its kind does; a 0-d
    # tensor (a host scalar) as a 0-d tensor does: below tensors with dims
    # of its kind (an f16 tensor against an f32 scalar compares in f16).
    probes = [torch.empty((1,) * bool(v.shape), dtype=_torch_dtype(v.dtype))
              if isinstance(v, Tensor)
              else (1 if isinstance(v, torch.SymInt) else 1.0) if _is_symbolic(v)
              else _static_value(v, op_name(ctx.node)) for v in values]
    if not any(isinstance(p, torch.Tensor) for p in probes):
        raise Unsupported(f"{op_name(ctx.node)} has no tensor operand")
    result = probes[0]
    for probe in probes[1:]:
        dims = _has_dims(result) or _has_dims(probe)
        result = torch.empty((1,) * dims, dtype=torch.result_type(result, probe))
    return kg_dtype(result.dtype, f"{op_name(ctx.node)} operands")


def _has_dims(probe) -> bool:
    return isinstance(probe, torch.Tensor) and probe.dim() > 0


def _operands_as(ctx: Context, values, dtype: str) -> list:
    """Tensors cast to `dtype`; Python numbers as kg takes them (bools as
    0 and 1)."""
    operands = []
    for value in values:
        if isinstance(value, Tensor):
            operands.append(_cast(ctx.graph, value, dtype))
        elif _is_symbolic(value):
            operands.append(_cast(ctx.graph, _scalar_input(value, op_name(ctx.node)), dtype))
        else:
            value = _static_value(value, op_name(ctx.node))
            if not isinstance(value, (bool, int, float)):
                raise Unsupported(f"{op_name(ctx.node)} of {value!r}")
            operands.append(float(value))
    return operands


for _kind, _targets in {
    "eq": (aten.eq.Tensor, aten.eq.Scalar), "ne": (aten.ne.Tensor, aten.ne.Scalar),
    "lt": (aten.lt.Tensor, aten.lt.Scalar), "le": (aten.le.Tensor, aten.le.Scalar),
    "gt": (aten.gt.Tensor, aten.gt.Scalar), "ge": (aten.ge.Tensor, aten.ge.Scalar),
}.items():
    def _make(kind):
        def convert(ctx, a):
            values = (a["input"], a["other"])
            return getattr(ctx.graph, kind)(*_operands_as(ctx, values, _promoted(ctx, values)))
        return convert
    converts(*_targets)(_make(_kind))


def _as_bool(ctx: Context, x) -> Tensor:
    """torch's truth of a tensor: not zero."""
    _require_tensor(ctx, x)
    return _cast(ctx.graph, x, "i1")


for _kind, _targets in {
    "logical_and": (aten.logical_and.default,), "logical_or": (aten.logical_or.default,),
    "logical_xor": (aten.logical_xor.default,),
}.items():
    def _make(kind):
        def convert(ctx, a):
            result = getattr(ctx.graph, kind)(_as_bool(ctx, a["input"]),
                                              _as_bool(ctx, a["other"]))
            return _cast(ctx.graph, result, ctx.out_dtype)
        return convert
    converts(*_targets)(_make(_kind))


@converts(aten.logical_not.default)
def _logical_not(ctx, a):
    return _cast(ctx.graph, ctx.graph.logical_not(_as_bool(ctx, a["input"])), ctx.out_dtype)


# `&`, `|`, `^` and `~` of bool tensors are torch's bitwise ops: logical
# ones on bools. Integer bit operations have no kg op.
for _kind, _targets in {
    "logical_and": (aten.bitwise_and.Tensor,), "logical_or": (aten.bitwise_or.Tensor,),
    "logical_xor": (aten.bitwise_xor.Tensor,), "logical_not": (aten.bitwise_not.default,),
    "bitwise_scalar": (aten.bitwise_and.Scalar, aten.bitwise_or.Scalar,
                       aten.bitwise_xor.Scalar),
}.items():
    def _make(kind):
        def convert(ctx, a):
            values = [a["input"]] + ([a["other"]] if "other" in a else [])
            if kind == "bitwise_scalar" or any(not isinstance(v, Tensor) or v.dtype != "i1"
                                               for v in values):
                raise Unsupported(f"{op_name(ctx.node)} of integers or with a number: kg has "
                                  "no bitwise ops")
            return getattr(ctx.graph, kind)(*values)
        return convert
    converts(*_targets)(_make(_kind))


@converts(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(ctx, a):
    values = (a["input"], a["other"])
    true_value, false_value = _operands_as(ctx, values, ctx.out_dtype)
    if not any(isinstance(v, Tensor) for v in (true_value, false_value)):
        # Two numbers: one of them as a constant of the result's dtype.
        true_value = ctx.graph.constant(true_value, (), ctx.out_dtype)
    return _as_shape(ctx, ctx.graph.where(_as_bool(ctx, a["condition"]), true_value,
                                          false_value))


@converts(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx, a):
    value = a["value"]
    if isinstance(value, Tensor):
        if value.shape != ():
            raise Unsupported(f"masked_fill with a value of shape {value.shape}")
        value = _cast(ctx.graph, value, ctx.out_dtype)
    else:
        (value,) = _operands_as(ctx, (value,), ctx.out_dtype)
    x = _cast(ctx.graph, a["input"], ctx.out_dtype)
    return _as_shape(ctx, ctx.graph.where(_as_bool(ctx, a["mask"]), value, x))


@converts(aten.arange.start_step, aten.arange.start, aten.arange.default, prims.iota.default)
def _arange(ctx, a):
    graph = ctx.graph
    (length,) = ctx.out_shape
    start = a.get("start", 0)
    if _is_symbolic(start):
        # start + i * step at the start's real value, in int64 as torch
        # counts; the length is the result's (bucketed) extent.
        step = _static_value(a.get("step", 1), "arange step")
        if ctx.out_dtype == "i1" or not isinstance(step, int) or isinstance(step, bool):
            raise Unsupported(f"{op_name(ctx.node)} from a dynamic start with step {step!r} "
                              f"to {ctx.out_dtype}")
        offsets = graph.iota((length,), 0, "i64")
        if step != 1:
            offsets = graph.mul(offsets, float(step))
        start_value = _cast(graph, _scalar_input(start, "arange start"), "i64")
        return _cast(graph, graph.add(offsets, start_value), ctx.out_dtype)
    start = _static_value(start, "arange start")
    step = _static_value(a.get("step", 1), "arange step")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, step)):
        raise Unsupported(f"{op_name(ctx.node)} with start {start!r} and step {step!r}: kgc "
                          "counts in whole numbers")
    dtype = ctx.out_dtype
    if dtype == "i1":
        raise Unsupported(f"{op_name(ctx.node)} of bools")
    if step == 1:
        return graph.iota((length,), 0, dtype, start=start)
    # start + i * step, in int64 as torch computes integer ranges, then the
    # result's dtype.
    positions = graph.add(graph.mul(graph.iota((length,), 0, "i64"), float(step)), float(start))
    return _cast(graph, positions, dtype)


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------


def is_compute(node: torch.fx.Node) -> bool:
    """Whether the node computes (a kernel is worth making for it): not a
    view, copy or same-dtype cast, nor a getitem of a result."""
    if node.target is operator.getitem or node.target in _LAYOUT_OPS:
        if node.target in (aten._to_copy.default, prims.convert_element_type.default):
            source = node.args[0]
            return (isinstance(source, torch.fx.Node) and "val" in source.meta
                    and source.meta["val"].dtype != node.meta["val"].dtype)
        return False
    return True


def _bind(node: torch.fx.Node, values: dict[torch.fx.Node, Any]) -> dict[str, Any]:
    """The node's arguments by schema name, FX nodes replaced by `values`."""
    args = torch.fx.node.map_arg(node.args, lambda n: values[n])
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n])
    bound = normalize_function(node.target, args, kwargs, normalize_to_only_use_kwargs=True)
    if bound is None:
        raise Unsupported(f"{op_name(node)}: its arguments do not match its schema")
    named = dict(bound.kwargs)
    if "self" in named:
        named["input"] = named.pop("self")
    return named


# Operands a converter never reads, by op and schema name: the random-number
# state of attention's backward, which only dropout (refused) uses. They are
# no inputs of the kernel graph, whatever their dtype (uint64 on CUDA).
_UNREAD_OPERANDS = {
    aten._scaled_dot_product_flash_attention_backward.default: ("philox_seed",
                                                                "philox_offset"),
    aten._scaled_dot_product_efficient_attention_backward.default: ("philox_seed",
                                                                    "philox_offset"),
    aten._scaled_dot_product_cudnn_attention_backward.default: ("philox_seed",
                                                                "philox_offset"),
}
UNREAD = "operand the converter does not read"


def _unread_inputs(node: torch.fx.Node) -> set:
    """The FX nodes among `node`'s operands that its converter ignores."""
    names = _UNREAD_OPERANDS.get(node.target)
    if not names:
        return set()
    bound = normalize_function(node.target, node.args, node.kwargs,
                               normalize_to_only_use_kwargs=True)
    if bound is None:
        return set()
    return {bound.kwargs[name] for name in names
            if isinstance(bound.kwargs.get(name), torch.fx.Node)}


def _check_tensors(node: torch.fx.Node) -> None:
    """Every tensor the node reads and makes has a kg dtype and static
    shape, and no dynamic size is read as a value."""
    unread = _unread_inputs(node)
    for index, argument in enumerate(node.all_input_nodes):
        value = argument.meta.get("val")
        if argument in unread:
            continue
        if isinstance(value, torch.Tensor):
            operand_dtype(value, f"operand #{index} ({argument.name})")
            shape = static_shape(value.shape, f"operand #{index} ({argument.name})")
            if 0 in shape and node.target is not aten.cat.default:
                raise Unsupported(f"operand #{index} ({argument.name}) is empty {shape}")
    _check_scalar_arguments(node)
    value = node.meta.get("val")
    results = value if isinstance(value, (tuple, list)) else (value,)
    first = results[0] if results else None
    if not isinstance(first, torch.Tensor):
        raise Unsupported("its result is not a tensor")
    kg_dtype(first.dtype, "its result")
    if 0 in static_shape(first.shape, "its result"):
        raise Unsupported(f"its result is empty {tuple(first.shape)}")


def convert_node(graph: Graph, node: torch.fx.Node, values: dict[torch.fx.Node, Any]):
    """Records `node` on `graph`; `values` holds the converted operands."""
    if node.target is operator.getitem:
        source, index = node.args
        converted = values[source]
        if not isinstance(converted, tuple) or converted[index] is None:
            raise Unsupported(f"result #{index} of {op_name(source)} is not computed by kgc")
        return converted[index]
    converter = CONVERTERS.get(node.target)
    if converter is None:
        raise Unsupported(f"{op_name(node)} is not supported by kgc yet")
    _check_tensors(node)
    try:
        with graph.origin(f"{op_name(node)}:{node.name}"):
            return converter(Context(graph, node), _bind(node, values))
    except GraphError as error:
        raise Unsupported(str(error)) from None
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as error:
        raise Unsupported(f"{op_name(node)}: {type(error).__name__}: {error}") from None


def unsupported_reason(node: torch.fx.Node) -> str | None:
    """Why kgc cannot compute `node` (None when it can): the node is
    converted alone, on graph inputs of its operands' shapes and dtypes."""
    if node.op != "call_function":
        return f"{node.op} nodes stay with PyTorch"
    if node.target is operator.getitem:
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or source.target not in CONVERTERS \
                or (node.args[1] != 0 and source.target not in _EVERY_RESULT):
            return f"result #{node.args[1]} of {op_name(source)} is not computed by kgc"
        return unsupported_reason(source)
    if node.target not in CONVERTERS:
        return f"{op_name(node)} is not supported by kgc yet"
    graph = Graph("check")
    values: dict[torch.fx.Node, Any] = {}
    token = _SCALAR_INPUTS.set(_ScalarInputs(graph, None))
    try:
        _check_tensors(node)
        unread = _unread_inputs(node)
        for index, argument in enumerate(node.all_input_nodes):
            if argument in unread:
                values[argument] = UNREAD
                continue
            value = argument.meta["val"]
            values[argument] = _operand(graph, f"x{index}", value, argument.name)
        convert_node(graph, node, values)
    except Unsupported as error:
        return str(error)
    finally:
        _SCALAR_INPUTS.reset(token)
    return None


@dataclasses.dataclass
class ConvertedGraph:
    """A partition as a kernel graph: `graph` takes the partition's tensor
    inputs (positions `tensor_inputs` among its inputs; the others are
    sizes) in order, then one 0-d tensor per size it reads as a value (the
    partition inputs at positions `scalar_inputs`, int64 for an int and
    float32 for a float: `graph_arguments` makes them), and returns
    distinct kg tensors; result i of the partition is graph output
    `result_index[i]` (`partition_results` maps them), and `ops` names the
    aten nodes converted, in order."""

    graph: Graph
    result_index: list[int]
    ops: list[str]
    single_result: bool
    tensor_inputs: list[int]
    scalar_inputs: list[int] = dataclasses.field(default_factory=list)
    device: torch.device | None = None  # where the results live
    # Partition input position -> the order of its dims in memory, for an
    # input traced as a permuted view of dense storage (a weight's
    # transpose saved by the forward for the backward): the graph takes the
    # storage (`tensor.permute(order)`, no copy) and transposes it back,
    # which its kernels read through, where a copy would make it contiguous.
    input_orders: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    # Graph output index -> the permutation that makes the partition's
    # result of it, for a result traced as a permuted view of dense storage
    # (a weight's cast, transposed for its product): the graph stores the
    # storage's order and the result is a view of it with the traced
    # strides. A contiguous result in their place would reach later ops
    # (PyTorch's views, the backward's partitions) in strides other than
    # the traced ones, and each would be copied to the ones they expect.
    output_orders: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    # The graph's tensor arguments that the partition is given as 0-d
    # tensors on the host while its results live on a GPU, or as 0-d
    # float64 tensors (a Python float Dynamo passes as a tensor): each call
    # passes their value on the results' device, in the graph's dtype.
    host_scalars: tuple[int, ...] = ()

    def partition_results(self, results: Sequence) -> list:
        """The partition's results, in its order, from the graph's."""
        return [results[i].permute(self.output_orders[i]) if i in self.output_orders
                else results[i] for i in self.result_index]

    def graph_arguments(self, arguments: Sequence, tensors: Sequence | None = None) -> list:
        """The graph's arguments from the partition's: `tensors` (default
        the tensor inputs as they are; a 0-d one on another device than the
        results, a CPU scalar, at its value on theirs), then each size read
        as a value as a 0-d tensor on their device, at its value in this
        call."""
        tensors = [arguments[i] for i in self.tensor_inputs] if tensors is None else list(tensors)
        if self.input_orders:
            tensors = [t.permute(self.input_orders[i]) if i in self.input_orders else t
                       for i, t in zip(self.tensor_inputs, tensors)]
        device = tensors[0].device if tensors else self.device
        if self.host_scalars:
            device = self.device
            for index in self.host_scalars:
                scalar = tensors[index]
                dtype = torch.float32 if scalar.dtype == torch.float64 else scalar.dtype
                if scalar.device == device:
                    # Made by another partition, or a float64 on the device:
                    # converted there, not read back to the host.
                    tensors[index] = scalar.to(dtype)
                else:
                    tensors[index] = device_scalar(scalar.item(), dtype, device)
        for position in self.scalar_inputs:
            value = arguments[position]
            dtype = torch.int64 if isinstance(value, (int, torch.SymInt)) else torch.float32
            tensors.append(device_scalar(value, dtype, device))
        return tensors


def convert_graph(module: torch.fx.GraphModule, name: str) -> ConvertedGraph:
    """The kernel graph `name` of a partition's FX graph (placeholders for
    its inputs, an output node for its results)."""
    graph = Graph(name)
    values: dict[torch.fx.Node, Any] = {}
    ops: list[str] = []
    results: Sequence = ()
    single = False
    tensor_inputs: list[int] = []
    input_orders: dict[int, tuple[int, ...]] = {}
    placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
    # A symbolic number a node reads as a value comes from the partition
    # input that is that number.
    sources = {}
    for position, node in enumerate(placeholders):
        value = node.meta.get("val")
        if _is_symbolic(value) and value.node.expr not in sources:
            sources[value.node.expr] = position
    scalars = _ScalarInputs(graph, sources)
    token = _SCALAR_INPUTS.set(scalars)
    try:
        # Every tensor input first: the sizes read as values are the graph's
        # last inputs, whatever order the partition's nodes come in.
        for position, node in enumerate(placeholders):
            if node.users and all(node in _unread_inputs(user) for user in node.users):
                # Attention's random-number state: no input of the kernel graph.
                values[node] = UNREAD
                continue
            value, order = node.meta["val"], _dense_order(node.meta["val"])
            if order is not None:
                value = value.permute(order)  # the storage, which the call passes
            values[node] = _operand(graph, _input_name(node.name, len(values)), value,
                                    node.name)
            if order is not None:
                input_orders[position] = order
                values[node] = graph.transpose(values[node], list(_inverse(order)))
            if isinstance(values[node], Tensor):
                tensor_inputs.append(position)
        for node in module.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "call_function":
                values[node] = convert_node(graph, node, values)
                if node.target is not operator.getitem:
                    ops.append(f"{op_name(node)}:{node.name}")
            elif node.op == "output":
                single = not isinstance(node.args[0], (tuple, list))
                results = [node.args[0]] if single else list(node.args[0])
            else:
                raise Unsupported(f"{node.op} node {node.name} in a partition")
    finally:
        _SCALAR_INPUTS.reset(token)
    outputs: list[Tensor] = []
    output_orders: dict[int, tuple[int, ...]] = {}
    stored: dict[tuple[Tensor, tuple[int, ...] | None], int] = {}
    index: list[int] = []
    for result in results:
        tensor = values[result]
        if not isinstance(tensor, Tensor):
            raise Unsupported(f"partition result {result.name} is not a tensor")
        order = _dense_order(result.meta.get("val"))
        if (tensor, order) not in stored:
            stored[tensor, order] = len(outputs)
            if order is None:
                outputs.append(tensor)
            else:
                outputs.append(graph.transpose(tensor, list(order)))
                output_orders[len(outputs) - 1] = _inverse(order)
        index.append(stored[tensor, order])
    graph.output(*outputs)
    device = _results_device(results)
    host_scalars = tuple(index for index, position in enumerate(tensor_inputs)
                         if _passed_as_value(placeholders[position].meta["val"], device))
    return ConvertedGraph(graph, index, ops, single, tensor_inputs, list(scalars.positions),
                          device, input_orders, output_orders, host_scalars)


def _results_device(results: Sequence[torch.fx.Node]) -> torch.device | None:
    """Where a partition's results live: the device of the first that is
    not a host scalar (a 0-d CPU tensor, which a partition's kernels make
    on their own device for the partitions that read it)."""
    first = None
    for result in results:
        value = result.meta.get("val")
        value = value[0] if isinstance(value, (tuple, list)) else value
        if isinstance(value, torch.Tensor):
            if value.dim() > 0 or value.device.type != "cpu":
                return value.device
            first = first or value.device
    return first


def _passed_as_value(value: torch.Tensor, device: torch.device | None) -> bool:
    """Whether a partition's input reaches its kernel graph as its value,
    made on `device` in the graph's dtype at each call: a 0-d tensor on
    another device (a host scalar) or a 0-d float64 one, which kg reads as
    f32 (`operand_dtype`)."""
    return value.dim() == 0 and (value.device != device or value.dtype == torch.float64)


def _inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that undoes `order` (dim d of the result is dim
    order.index(d))."""
    return tuple(order.index(d) for d in range(len(order)))


def _dense_order(value) -> tuple[int, ...] | None:
    """The order of `value`'s dims in memory (outermost first) where it is
    not contiguous but a permutation of it is (a transpose of dense
    storage); None otherwise, and for symbolic shapes."""
    if not isinstance(value, torch.Tensor) or value.ndim < 2 or value.is_contiguous():
        return None
    if any(isinstance(d, torch.SymInt) for d in (*value.shape, *value.stride())):
        return None
    if 0 in value.shape:
        return None
    order = tuple(sorted(range(value.ndim), key=lambda d: (-value.stride(d), d)))
    return order if value.permute(order).is_contiguous() else None


def _operand(graph: Graph, name: str, value, what: str):
    """A graph input for a tensor; a size stays the SymInt views take as an
    argument, and an empty tensor is EMPTY."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = static_shape(value.shape, what)
    if 0 in shape:
        return EMPTY
    return graph.input(name, shape, operand_dtype(value, what))


def _input_name(name: str, position: int) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"arg{position}_{cleaned}"
