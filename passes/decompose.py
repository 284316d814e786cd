"""kg-decompose: rewrite composite ops into the primitives kernels are made of.

Argument: `kg-decompose`. No options.

Rewrite rules (`f(x)` is `kg.cast` of f16/bf16 `x` to f32, f32 `x` itself,
and for a half-float constant c, the f32 constant of the value c holds;
`g(y)` casts back; N is the number of elements reduced):

    kg.softmax x dim d            =>  m = reduce max f(x) [d] keepdim
                                      e = exp(f(x) - m)
                                      g(e / reduce sum e [d] keepdim)
    kg.rms_norm x weight w eps e  =>  r = rsqrt(reduce sum square(f(x)) * (1/N) + e)
                                      g(f(x) * r * f(w))
    kg.layer_norm x weight w bias b eps e
                                  =>  c = f(x) - reduce sum f(x) * (1/N)
                                      v = reduce sum square(c) * (1/N)
                                      g(c * rsqrt(v + e) * f(w) + f(b))
    kg.reduce mean x dims D       =>  g(reduce sum f(x) D * (1/N))
    kg.reduce sum|max|min on f16/bf16
                                  =>  g(reduce ... f(x))
    power x^c, c a constant 2, 3, -1 or -2 (seen through casts)
                                  =>  g(f(x) * f(x)), g(f(x) * f(x) * f(x)),
                                      g(1 / f(x)), g(1 / (f(x) * f(x)))
    elementwise op on f16/bf16    =>  g(op f(x)...)   (math in f32, one rounding)
    kg.cast x : T to T            =>  x
    kg.scatter mode dest[idx], src dim d, one index (a decode step's
    cache update)                 =>  hit = iota (along d) == idx
                                      assign: select(hit, src, dest)
                                      add: g(f(dest) + select(hit, f(src), 0))
    kg.scatter add dest[idx], src dim d, n indices (src: dest with n at d)
                                  =>  onehot = cast(iota [V, 1] == idx [1, n])
                                      g(f(dest) + matmul(onehot, src) in f32)
                                      (src's dim d moved next to its last,
                                      as a batched matmul reads it)
    kg.scatter assign, n indices  =>  last = reduce max select(onehot, i, -1) [1]
                                      kept = cast(i == last)
                                      select(last >= 0, g(matmul(kept, src)), dest)
    matmul, f32 elementwise ops, views, constants
                                  =>  unchanged
    ops on integers and i1, comparisons and selects (exact in any type),
    iotas                         =>  unchanged

Small integer powers are products, as torch computes them: the power
routine is a few units of f32 roundoff off x*x*x, which flips the f16
rounding of GPT-2's GELU cube on about one element in three thousand.

A scatter of n indices becomes a one-hot matmul over the n indices: no
two programs write one element (no atomics, no sort) and sums are exact
f32 sums in a fixed order; its work grows with the destination times n,
where a gather's own kernel would read only the rows it writes. A scatter
of integers or 8-bit floats with more than one index is an error here:
matmuls take f32, f16 and bf16.

Tiled kernels are left alone. The casts this pass adds are marked
`kg.promotion`; inside a kernel, kg-fuse drops a round trip f32 -> f16 -> f32
made of two of them, so that values stay f32 between the ops of a kernel.
Casts written by the user are never dropped.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from kgc.dialects import kg
from kgc.element_types import HALF_FLOATS
from kgc.op_table import BY_OP_NAME, ELEMENTWISE
from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling.graph_model import reduce_kind
from kgc.tiling.kernel_ops import enclosing_kernel, is_tiled, walk_ops

# Marks the casts kg-decompose adds around f32 math.
PROMOTION_ATTRIBUTE = "kg.promotion"


@register_pass
class KgDecompose(Pass):
    argument = "kg-decompose"
    summary = "Rewrite softmax, norms and means into primitives; compute half floats in f32"


    def run(self, op: ir.Operation) -> None:
        for target in [o for o in walk_ops(op) if o.name.startswith("kg.")]:
            kernel = enclosing_kernel(target)
            if kernel is not None and is_tiled(kernel):
                continue
            rewrite = _RULES.get(target.name)
            if rewrite is not None:
                _Rewriter(target).apply(rewrite)
            elif _promoted(target) and _element(target.results[0]) in HALF_FLOATS:
                _Rewriter(target).apply(_promote_elementwise)


def _promoted(op: ir.Operation) -> bool:
    """An elementwise op that computes half floats in f32."""
    row = BY_OP_NAME.get(op.name)
    return row is not None and row.promote_half


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


class _Rewriter:
    """Builds the replacement of one op, before it, then swaps it in."""

    def __init__(self, op: ir.Operation):
        self.op = op
        self.f32 = ir.F32Type.get()

    def apply(self, rule) -> None:
        with ir.InsertionPoint(self.op), self.op.location:
            replacement = rule(self)
        if replacement is None:
            return
        self.op.results[0].replace_all_uses_with(replacement)
        self.op.erase()

    # -- builders -------------------------------------------------------------

    def tensor(self, shape, element) -> ir.RankedTensorType:
        return ir.RankedTensorType.get(list(shape), element)

    def widen(self, value: ir.Value) -> ir.Value:
        if _element(value) not in HALF_FLOATS:
            return value
        owner = value.owner
        if isinstance(owner, ir.OpView) and owner.operation.name == "kg.constant":
            # A constant widens to an f32 constant of the value the half type
            # holds: exact, and, unlike a cast of it, a source op that every
            # kernel reading it copies (a cast shared by two layers' GELUs
            # after CSE became a value passed from one kernel to the other).
            held = ir.FloatAttr.get(ir.RankedTensorType(value.type).element_type,
                                    ir.FloatAttr(owner.attributes["value"]).value).value
            return kg.constant(self.tensor(_shape(value), self.f32), held)
        return self.promotion(value, self.f32)

    def narrow(self, value: ir.Value, like: ir.Value) -> ir.Value:
        element = ir.RankedTensorType(like.type).element_type
        if ir.RankedTensorType(value.type).element_type == element:
            return value
        return self.promotion(value, element)

    def promotion(self, value: ir.Value, element: ir.Type) -> ir.Value:
        """A cast that only moves math to f32 and back; kg-fuse may drop a
        pair of them inside a kernel (a user's own casts always stay)."""
        cast = kg.CastOp(self.tensor(_shape(value), element), value)
        cast.attributes[PROMOTION_ATTRIBUTE] = ir.UnitAttr.get()
        return cast.result

    def scalar(self, value: float) -> ir.Value:
        return kg.constant(self.tensor([], self.f32), value)

    def binary(self, name: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
        shape = _broadcast(_shape(lhs), _shape(rhs))
        return ELEMENTWISE[name].op_class(self.tensor(shape, self.f32), lhs, rhs).result

    def unary(self, name: str, x: ir.Value) -> ir.Value:
        # Unary ops infer their result type (that of x).
        return ELEMENTWISE[name].op_class(x).result

    def reduce(self, kind: str, x: ir.Value, dims: Sequence[int]) -> ir.Value:
        shape = [1 if d in dims else s for d, s in enumerate(_shape(x))]
        return kg.reduce(self.tensor(shape, self.f32), kg.ReduceKind[kind], x, list(dims),
                         keepdim=True)

    def mean(self, x: ir.Value, dims: Sequence[int]) -> ir.Value:
        count = 1
        for d in dims:
            if ir.ShapedType.is_dynamic_size(_shape(x)[d]):
                raise PassFailure(f"{self.op.name}: a mean over dimension {d} of {x.type} is "
                                  "a sum times 1/N with N a constant, and N of a dynamic "
                                  "extent is known only at run time", self.op.location)
            count *= _shape(x)[d]
        return self.binary("mul", self.reduce("sum", x, dims), self.scalar(1.0 / count))


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + a
    b = [1] * (rank - len(b)) + b
    return [y if x == 1 else x for x, y in zip(a, b)]


def _softmax(r: _Rewriter) -> ir.Value:
    x = r.widen(r.op.operands[0])
    dim = ir.IntegerAttr(r.op.attributes["dim"]).value
    m = r.reduce("max", x, [dim])
    e = r.unary("exp", r.binary("sub", x, m))
    return r.narrow(r.binary("div", e, r.reduce("sum", e, [dim])), r.op.results[0])


def _normalized_dims(r: _Rewriter) -> list[int]:
    rank = len(_shape(r.op.operands[0]))
    count = len(ir.DenseI64ArrayAttr(r.op.attributes["normalized_shape"]))
    return list(range(rank - count, rank))


def _rms_norm(r: _Rewriter) -> ir.Value:
    operands = list(r.op.operands)
    x = r.widen(operands[0])
    dims = _normalized_dims(r)
    eps = ir.FloatAttr(r.op.attributes["eps"]).value
    rstd = r.unary("rsqrt", r.binary("add", r.mean(r.unary("square", x), dims), r.scalar(eps)))
    y = r.binary("mul", x, rstd)
    if len(operands) > 1:
        y = r.binary("mul", y, r.widen(operands[1]))
    return r.narrow(y, r.op.results[0])


def _layer_norm(r: _Rewriter) -> ir.Value:
    norm = r.op.opview
    x = r.widen(norm.x)
    weight, bias = norm.weight, norm.bias
    dims = _normalized_dims(r)
    eps = ir.FloatAttr(r.op.attributes["eps"]).value
    centered = r.binary("sub", x, r.mean(x, dims))
    variance = r.mean(r.unary("square", centered), dims)
    y = r.binary("mul", centered, r.unary("rsqrt", r.binary("add", variance, r.scalar(eps))))
    if weight is not None:
        y = r.binary("mul", y, r.widen(weight))
    if bias is not None:
        y = r.binary("add", y, r.widen(bias))
    return r.narrow(y, r.op.results[0])


def _reduce(r: _Rewriter) -> ir.Value | None:
    kind = reduce_kind(r.op)
    x = r.op.operands[0]
    if kind != "mean" and _element(x) not in HALF_FLOATS:
        return None
    dims = sorted(ir.DenseI64ArrayAttr(r.op.attributes["dims"]))
    keepdim = "keepdim" in r.op.attributes
    wide = r.widen(x)
    reduced = r.mean(wide, dims) if kind == "mean" else r.reduce(kind, wide, dims)
    if not keepdim:
        shape = _shape(r.op.results[0])
        reduced = kg.reshape(r.tensor(shape, r.f32), reduced)
    return r.narrow(reduced, r.op.results[0])


def _cast(r: _Rewriter) -> ir.Value | None:
    x = r.op.operands[0]
    return x if x.type == r.op.results[0].type else None


def _promote_elementwise(r: _Rewriter) -> ir.Value:
    op = r.op
    operands = [r.widen(v) for v in op.operands]
    attributes = {name: op.attributes[name] for name in op.attributes}
    shape = _shape(op.results[0])
    # The same op (same attributes) on f32 operands, with an f32 result.
    result = BY_OP_NAME[op.name].op_class.build_generic(
        results=[r.tensor(shape, r.f32)], operands=operands, attributes=attributes).result
    return r.narrow(result, op.results[0])


def _constant_value(value: ir.Value) -> float | None:
    """The number `value` holds when it is a kg.constant, seen through casts."""
    while True:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "kg.cast":
            value = op.operands[0]
            continue
        if op.name != "kg.constant":
            return None
        attribute = op.attributes["value"]
        if isinstance(attribute, (ir.FloatAttr, ir.IntegerAttr)):
            return float(attribute.value)
        return None


# Exponent => how many times x multiplies itself, and whether to invert.
_PRODUCT_POWERS = {2.0: (2, False), 3.0: (3, False), -1.0: (1, True), -2.0: (2, True)}


def _pow(r: _Rewriter) -> ir.Value | None:
    x, exponent = r.op.operands
    result = r.op.results[0]
    power = _PRODUCT_POWERS.get(_constant_value(exponent))
    if power is None or _shape(x) != _shape(result) or \
            _element(result) not in HALF_FLOATS + ("f32",):
        return _promote_elementwise(r) if _element(result) in HALF_FLOATS else None
    count, invert = power
    base = r.widen(x)
    value = base
    for _ in range(count - 1):
        value = r.binary("mul", value, base)
    if invert:
        value = r.binary("div", r.scalar(1.0), value)
    return r.narrow(value, result)


def _scatter(r: _Rewriter) -> ir.Value:
    scatter = r.op.opview
    dest, indices, source = scatter.dest, scatter.indices, scatter.source
    dim = ir.IntegerAttr(r.op.attributes["dim"]).value
    mode = str(kg.ScatterMode(ir.IntegerAttr(r.op.attributes["mode"]).value))
    shape = _shape(dest)
    rank, extent, count = len(shape), shape[dim], _shape(indices)[0]
    if ir.ShapedType.is_dynamic_size(extent) or ir.ShapedType.is_dynamic_size(count):
        raise PassFailure(f"kg.scatter {mode} into {dest.type} at {indices.type}: kgc builds a "
                          f"scatter from the extent of dimension {dim} and the number of "
                          "indices, which must be static", r.op.location)
    index_type = ir.RankedTensorType(indices.type).element_type
    i1 = ir.IntegerType.get_signless(1)
    if count == 1:
        # One index: a pointwise choice, in any element type.
        along = [extent if d == dim else 1 for d in range(rank)]
        single = kg.reshape(r.tensor([1] * rank, index_type), indices)
        hit = kg.cmp(r.tensor(along, i1), kg.iota(r.tensor(along, index_type), dim), single,
                     kg.ComparePredicate.eq)
        if mode == "assign":
            return kg.select(r.tensor(shape, ir.RankedTensorType(dest.type).element_type), hit,
                             source, dest)
        wide = r.widen(source)
        zero = kg.constant(r.tensor([], ir.RankedTensorType(wide.type).element_type), 0.0)
        element = ir.RankedTensorType(wide.type).element_type
        added = kg.select(r.tensor(shape, element), hit, wide, zero)
        total = ELEMENTWISE["add"].op_class(r.tensor(shape, element), r.widen(dest), added).result
        return r.narrow(total, r.op.results[0])
    element = _element(dest)
    if element not in ("f32", "f16", "bf16"):
        raise PassFailure(f"kg.scatter {mode} of {count} indices into {r.op.results[0].type}: "
                          f"kgc computes a scatter of several indices as a one-hot matmul, "
                          f"which takes f32, f16 or bf16, not {element}", r.op.location)
    if mode == "assign" and count > 2**24:
        raise PassFailure(f"kg.scatter assign of {count} indices: their positions must be "
                          "exact in f32 (at most 2^24)", r.op.location)
    operand_type = ir.RankedTensorType(source.type).element_type
    rows = kg.iota(r.tensor([extent, 1], index_type), 0)
    listed = kg.reshape(r.tensor([1, count], index_type), indices)
    hit = kg.cmp(r.tensor([extent, count], i1), rows, listed, kg.ComparePredicate.eq)
    last = None
    if mode == "assign":
        # The last position that names each row, -1 for none: only it is kept.
        positions = kg.iota(r.tensor([1, count], r.f32), 1)
        marked = kg.select(r.tensor([extent, count], r.f32), hit, positions, r.scalar(-1.0))
        last = r.reduce("max", marked, [1])
        hit = kg.cmp(r.tensor([extent, count], i1), positions, last, kg.ComparePredicate.eq)
    onehot = kg.cast(r.tensor([extent, count], operand_type), hit)
    contribution = _indexed_matmul(r, onehot, source, dim, shape)
    if mode == "add":
        return r.narrow(r.binary("add", r.widen(dest), contribution), r.op.results[0])
    written = kg.cmp(r.tensor([extent, 1], i1), last, r.scalar(0.0), kg.ComparePredicate.ge)
    # `written` along dim d of the destination: [V] followed by ones.
    written = _reshaped(r, written, [extent] + [1] * (rank - 1 - dim))
    return kg.select(r.op.results[0].type, written, r.narrow(contribution, r.op.results[0]), dest)


def _reshaped(r: _Rewriter, value: ir.Value, shape: list[int]) -> ir.Value:
    if _shape(value) == list(shape):
        return value
    element = ir.RankedTensorType(value.type).element_type
    return kg.reshape(r.tensor(shape, element), value)


def _indexed_matmul(r: _Rewriter, onehot: ir.Value, source: ir.Value, dim: int,
                    shape: list[int]) -> ir.Value:
    """onehot [V, n] applied along dim `dim` of `source` (n there): an f32
    tensor of `shape` (V at `dim`). A batched matmul reads n as the
    second-to-last dimension: dims after `dim` are merged into one (a view
    of a kernel input), and n last multiplies from the other side."""
    count = _shape(source)[dim]
    extent = shape[dim]
    rank = len(shape)
    if dim == rank - 1:
        leading = 1
        for size in shape[:-1]:
            leading *= size
        flat = _reshaped(r, source, [leading, count])
        onehot_t = kg.transpose(r.tensor([count, extent], ir.RankedTensorType(onehot.type).element_type),
                                onehot, [1, 0])
        product = kg.matmul(r.tensor([leading, extent], r.f32), flat, onehot_t)
        return _reshaped(r, product, shape)
    trailing = 1
    for size in shape[dim + 1:]:
        trailing *= size
    operand = _reshaped(r, source, list(shape[:dim]) + [count, trailing])
    product = kg.matmul(r.tensor(list(shape[:dim]) + [extent, trailing], r.f32), onehot, operand)
    return _reshaped(r, product, shape)


_RULES = {
    "kg.softmax": _softmax,
    "kg.rms_norm": _rms_norm,
    "kg.layer_norm": _layer_norm,
    "kg.reduce": _reduce,
    "kg.cast": _cast,
    "kg.scatter": _scatter,
    "kg.pow": _pow,
}
