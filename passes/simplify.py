"""kg-simplify: algebraic rewrites of products that let kg-fuse see them
plainly and let tensor cores compute them.

Argument: `kg-simplify`. No options.

Rewrite rules (`B`, `B'`: batch dimensions of one product of elements;
`f(x)`: a `kg.cast` of an f16 or bf16 `x` to f32; `v(...)`: views, i.e.
reshapes, transposes, broadcasts and slices; `c`, `d`: f32 scalar
constants):

    reshape [B', m, n] (matmul a [B, m, k], b [B, k, n]), prod(B) > 1
        =>  matmul (reshape [B', m, k] a), (reshape [B', k, n] b)
    matmul v(f(a) * c), v(f(b) * d) : f32   (a, b of one half type)
        =>  matmul v(a), v(b) : f32 * (c d)

The first takes a batched product in the shape its result is used in, as
attention written with `bmm` (heads merged with the batch for the product,
split again for the mask and the softmax) is used; the softmax between two
products is then elementwise in the first product's result, which the
attention schedule recognises. A reshape of a reshape is one reshape, and a
reshape to its operand's own shape is the operand. A product of one batch
(a linear layer's 2-d `mm` viewed as 3-d) is left alone: there is no softmax
to expose, and libraries take it as a 2-d product.

The second runs an f32 product of half floats widened to f32 as a product
of the half floats with f32 accumulation: each product of two half floats
is exact in f32, so only the scalars, applied once to the sum rather than
to each operand, round differently (by an f32 unit in the last place). It
is the product a tensor core computes at full rate, where an f32 product
under IEEE precision is computed on the CUDA cores (scaled dot product
attention's math path widens Q, K and V to f32 and scales Q and K by
1/sqrt(sqrt(d)) each). The product keeps no `precision` (it has no f32
operand).

Products whose operands come from anything else, and products inside
kernels, are left alone.
"""

from __future__ import annotations

import math
from typing import Sequence

from mlir import ir

from kgc.dialects import kg
from kgc.element_types import HALF_FLOATS
from kgc.passes.registry import Pass, register_pass
from kgc.tiling.kernel_ops import enclosing_kernel, walk_ops

# Views whose result a cast of their operand commutes with: the rebuilt
# product reads the same elements through them in the half type.
_VIEWS = ("kg.reshape", "kg.transpose", "kg.broadcast_to", "kg.slice")


@register_pass
class KgSimplify(Pass):
    argument = "kg-simplify"
    summary = "Take batched products in their users' shape; run products of widened half floats in them"

    def run(self, op: ir.Operation) -> None:
        for target in list(walk_ops(op)):
            if target.name == "kg.reshape" and enclosing_kernel(target) is None:
                _fold_batch_reshape(target)
        for target in list(walk_ops(op)):
            if target.name == "kg.matmul" and enclosing_kernel(target) is None:
                _narrow_product(target)


def _type(value: ir.Value) -> ir.RankedTensorType:
    return ir.RankedTensorType(value.type)


def _shape(value: ir.Value) -> list[int]:
    return list(_type(value).shape)


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else None


def _uses(value: ir.Value) -> int:
    return sum(1 for _ in value.uses)


# -- batched products in their users' shape ---------------------------------


def _fold_batch_reshape(reshape: ir.Operation) -> None:
    product = _producer(reshape.operands[0])
    if product is None or product.name != "kg.matmul" or _uses(product.results[0]) != 1:
        return
    old, new = _shape(product.results[0]), _shape(reshape.results[0])
    if len(old) < 2 or len(new) < 2 or old[-2:] != new[-2:] or old == new:
        return
    if any(ir.ShapedType.is_dynamic_size(s) for s in old + new):
        return
    batch = math.prod(old[:-2])
    if batch <= 1:
        return
    a, b = product.operands
    if math.prod(_shape(a)[:-2]) != batch or math.prod(_shape(b)[:-2]) != batch:
        return  # an operand broadcast over the batch has no shape to take
    with ir.InsertionPoint(reshape), reshape.location:
        lhs = _reshaped(a, new[:-2] + _shape(a)[-2:])
        rhs = _reshaped(b, new[:-2] + _shape(b)[-2:])
        precision = product.attributes["precision"] if "precision" in product.attributes else None
        result = kg.matmul(_type(reshape.results[0]), lhs, rhs, precision=precision)
    reshape.results[0].replace_all_uses_with(result)
    reshape.erase()
    product.erase()


def _reshaped(value: ir.Value, shape: Sequence[int]) -> ir.Value:
    """`value` as `shape`: itself, its reshape's operand, or a reshape."""
    source = _producer(value)
    if source is not None and source.name == "kg.reshape":
        value = source.operands[0]
    if _shape(value) == list(shape):
        return value
    return kg.reshape(ir.RankedTensorType.get(list(shape), _type(value).element_type), value)


# -- products of widened half floats ----------------------------------------


def _narrow_product(product: ir.Operation) -> None:
    if str(_type(product.results[0]).element_type) != "f32":
        return
    found = [_widened(operand) for operand in product.operands]
    if any(f is None for f in found):
        return
    (a, a_views, a_scale), (b, b_views, b_scale) = found
    if str(_type(a).element_type) != str(_type(b).element_type):
        return
    with ir.InsertionPoint(product), product.location:
        lhs, rhs = _viewed(a, a_views), _viewed(b, b_views)
        result_type = _type(product.results[0])
        result = kg.matmul(result_type, lhs, rhs)
        scale = a_scale * b_scale
        if scale != 1.0:
            factor = kg.constant(ir.RankedTensorType.get([], ir.F32Type.get()), scale)
            result = kg.mul(result_type, result, factor)
    product.results[0].replace_all_uses_with(result)
    product.erase()


def _widened(value: ir.Value):
    """(x, views, scale) when `value` is v(f(x) * scale) with x a half float
    (views listed outermost first), else None."""
    views: list[ir.Operation] = []
    scale = 1.0
    while True:
        op = _producer(value)
        if op is None:
            return None
        if op.name in _VIEWS:
            views.append(op)
            value = op.operands[0]
        elif op.name == "kg.mul":
            lhs, rhs = op.operands
            factor = _scalar(rhs)
            if factor is None:
                factor, lhs = _scalar(lhs), rhs
            if factor is None or _shape(lhs) != _shape(op.results[0]):
                return None
            scale *= factor
            value = lhs
        elif op.name == "kg.cast":
            source = op.operands[0]
            if str(_type(source).element_type) not in HALF_FLOATS:
                return None
            return source, views, scale
        else:
            return None


def _scalar(value: ir.Value) -> float | None:
    """The value of an f32 constant of one element, else None."""
    op = _producer(value)
    if op is None or op.name != "kg.constant" or math.prod(_shape(value)) != 1:
        return None
    if str(_type(value).element_type) != "f32":
        return None
    return ir.FloatAttr(op.attributes["value"]).value


def _viewed(source: ir.Value, views: Sequence[ir.Operation]) -> ir.Value:
    """The views (outermost first) applied to `source`, innermost first,
    each giving its own shape in `source`'s element type."""
    element = _type(source).element_type
    value = source
    for view in reversed(views):
        shape = _shape(view.results[0])
        attributes = {named.name: named.attr for named in map(view.attributes.__getitem__, range(len(view.attributes)))}
        value = ir.Operation.create(
            view.name, results=[ir.RankedTensorType.get(shape, element)], operands=[value],
            attributes=attributes).results[0]
    return value
