"""kg-decompose: rewrite composite ops into the primitives kernels are made of.

Argument: `kg-decompose`. No options.

Rewrite rules (`f(x)` is `kg.cast` of f16/bf16 `x` to f32, f32 `x` itself;
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
    elementwise op on f16/bf16    =>  g(op f(x)...)   (math in f32, one rounding)
    kg.cast x : T to T            =>  x
    matmul, f32 elementwise ops, views, constants
                                  =>  unchanged
    ops on integers and i1, comparisons and selects (exact in any type),
    iotas                         =>  unchanged

Tiled kernels are left alone. The casts this pass adds are marked
`kg.promotion`; inside a kernel, kg-fuse drops a round trip f32 -> f16 -> f32
made of two of them, so that values stay f32 between the ops of a kernel.
Casts written by the user are never dropped.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from kgc.dialects import kg
from kgc.op_table import BY_OP_NAME, ELEMENTWISE
from kgc.passes.registry import Pass, register_pass
from kgc.tiling.graph_model import reduce_kind
from kgc.tiling.kernel_ops import is_tiled, walk_ops

_HALF = ("f16", "bf16")
# Marks the casts kg-decompose adds around f32 math.
PROMOTION_ATTRIBUTE = "kg.promotion"


@register_pass
class KgDecompose(Pass):
    argument = "kg-decompose"
    summary = "Rewrite softmax, norms and means into primitives; compute half floats in f32"


    def run(self, op: ir.Operation) -> None:
        for target in [o for o in walk_ops(op) if o.name.startswith("kg.")]:
            if _inside_tiled_kernel(target):
                continue
            rewrite = _RULES.get(target.name)
            if rewrite is not None:
                _Rewriter(target).apply(rewrite)
            elif _promoted(target) and _element(target.results[0]) in _HALF:
                _Rewriter(target).apply(_promote_elementwise)


def _promoted(op: ir.Operation) -> bool:
    """An elementwise op that computes half floats in f32."""
    row = BY_OP_NAME.get(op.name)
    return row is not None and row.promote_half


def _inside_tiled_kernel(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "kg.kernel":
            return is_tiled(parent)
        parent = parent.parent
    return False


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
        if _element(value) not in _HALF:
            return value
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
    if kind != "mean" and _element(x) not in _HALF:
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


_RULES = {
    "kg.softmax": _softmax,
    "kg.rms_norm": _rms_norm,
    "kg.layer_norm": _layer_norm,
    "kg.reduce": _reduce,
    "kg.cast": _cast,
}
