"""kg-simplify: algebraic rewrites that let kg-fuse see products, gathers
and joins plainly and let tensor cores compute the products.

Argument: `kg-simplify`. No options.

Rewrite rules for indexing and joining (`n`: the length of a 1-d index;
`c`: integer constants of one element; `r(...)`: reshapes):

    gather x [idx] dim d, x.shape[d] == 1
        =>  broadcast_to x    (x itself when n == 1)
    gather x [r(iota start s + c)] dim d, the iota counting along its only
            dimension of more than one element, s + c + n <= x.shape[d]
        =>  slice x, offset s + c along d, stride 1
    slice (concat p0, ..., pk dim d), the window along d inside pi
        =>  slice pi, the window moved to pi's start (pi itself when the
            window is all of it)

Rewrite rules for products (`B`, `B'`: batch dimensions of one product of
elements; `f(x)`: a `kg.cast` of an f16 or bf16 `x` to f32; `v(...)`:
views, i.e. reshapes, transposes, broadcasts and slices; `c`, `d`: f32
scalar constants):

    reshape [B', m, n] (matmul a [B, m, k], b [B, k, n]), prod(B) > 1,
            B and B' static (m, k or n may be the dynamic extent)
        =>  matmul (reshape [B', m, k] a), (reshape [B', k, n] b)
    matmul v(f(a) * c), v(f(b) * d) : f32   (a, b of one half type)
        =>  matmul v(a), v(b) : f32 * (c d)
    f(r(matmul a, b : h)), h a half type, r reshapes, returned by the
            function alone, the product and each reshape read by the next
            alone
        =>  r(matmul a, b : f32)

Rewrite rules for views (`p`, `q`: permutations; `id`: the identity):

    transpose (transpose x p) q  =>  transpose x [p[q[0]], p[q[1]], ...]
    transpose x id               =>  x

The gather rules turn a gather, which reads its table from memory, into a
view, which kg-fuse fuses into its reader. Every index of a gather from
one element along its dim can only be 0: any other is outside the op's
contract, which the reference reports and a kernel does not check (after
the rewrite the reference no longer sees it). A gather of consecutive
positions is a window. transformers' masks at one token gather from
tensors of one position, and a learned position embedding (GPT-2's,
BERT's) is a gather at `arange(n)`. A slice of a join that falls within
one piece reads that piece alone (`torch.diff` with `prepend` joins a
column and slices it off again).

A result the torch frontend stores in its traced memory order (a
weight's cast, transposed for its product) is a transpose of a transpose
of the cast: as one, the cast's kernel reads and stores along the same
axis instead of tiling for a transpose that is not there.

The first product rule takes a batched product in the shape its result is
used in, as attention written with `bmm` (heads merged with the batch for
the product, split again for the mask and the softmax) is used; the
softmax between two products is then elementwise in the first product's
result, which the attention schedule recognises. A reshape of a reshape is
one reshape, and a reshape to its operand's own shape is the operand. A
product of one batch (a linear layer's 2-d `mm` viewed as 3-d) is left
alone: there is no softmax to expose, and libraries take it as a 2-d
product.

The second runs an f32 product of half floats widened to f32 as a product
of the half floats with f32 accumulation: each product of two half floats
is exact in f32, so only the scalars, applied once to the sum rather than
to each operand, round differently (by an f32 unit in the last place). It
is the product a tensor core computes at full rate, where an f32 product
under IEEE precision is computed on the CUDA cores (scaled dot product
attention's math path widens Q, K and V to f32 and scales Q and K by
1/sqrt(sqrt(d)) each). The product keeps no `precision` (it has no f32
operand).

The third writes a half-float product that the graph returns widened to
f32 (a weight's gradient under autocast, bf16 from the product, f32 for
the master weight) as an f32 product: the f32 sum is returned instead of
its rounding to the half type and back, as kg-fuse keeps a value f32
between the ops of a kernel rather than rounding it to a half type and
back. The widening is otherwise a kernel of its own after the product
(nothing reads it to fuse it into), and a library product (cuBLAS) writes
f32 from half operands itself; a reshape of the product is the same
buffer. Where another op reads the widened product (a residual gradient's
sum), the widening fuses into that op's kernel, and where a transpose
reads the product, a kernel copies it anyway and widens as it copies: the
product stays in the half type there, half the bytes to write and read.

Gathers of other indices, slices that straddle pieces, products whose
operands come from anything else, widenings read by other ops or of a
transposed product, and ops inside kernels are left alone.
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
    summary = ("Gathers of one element or of consecutive positions as views; slices of one "
               "piece of a join; transposes of transposes as one; batched products in their "
               "users' shape; products of widened half floats in them; returned widened "
               "half-float products as f32 products")

    def run(self, op: ir.Operation) -> None:
        for target in list(walk_ops(op)):
            if enclosing_kernel(target) is not None:
                continue
            if target.name == "kg.gather":
                _gather_as_view(target)
            elif target.name == "kg.slice":
                _slice_of_piece(target)
            elif target.name == "kg.transpose":
                _fold_transpose(target)
        for target in list(walk_ops(op)):
            if target.name == "kg.reshape" and enclosing_kernel(target) is None:
                _fold_batch_reshape(target)
        for target in list(walk_ops(op)):
            if target.name == "kg.matmul" and enclosing_kernel(target) is None:
                _narrow_product(target)
        for target in list(walk_ops(op)):
            if target.name == "kg.cast" and enclosing_kernel(target) is None:
                _wide_returned_product(target)


def _type(value: ir.Value) -> ir.RankedTensorType:
    return ir.RankedTensorType(value.type)


def _shape(value: ir.Value) -> list[int]:
    return list(_type(value).shape)


def _producer(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner.operation if isinstance(owner, ir.OpView) else None


def _uses(value: ir.Value) -> int:
    return sum(1 for _ in value.uses)


# -- gathers that are views, slices of one piece ----------------------------


def _gather_as_view(gather: ir.Operation) -> None:
    table, indices = gather.operands
    dim = ir.IntegerAttr(gather.attributes["dim"]).value
    shape, result = _shape(table), _shape(gather.results[0])
    if any(ir.ShapedType.is_dynamic_size(s) for s in shape + result):
        return
    count = result[dim]
    if shape[dim] == 1:
        with ir.InsertionPoint(gather), gather.location:
            view = table if count == 1 else kg.broadcast_to(_type(gather.results[0]), table)
    else:
        start = _consecutive_from(indices)
        if start is None or start < 0 or start + count > shape[dim]:
            return
        offsets = [0] * len(shape)
        offsets[dim] = start
        with ir.InsertionPoint(gather), gather.location:
            view = kg.slice(_type(gather.results[0]), table, offsets, [1] * len(shape))
    gather.results[0].replace_all_uses_with(view)
    gather.erase()


def _consecutive_from(indices: ir.Value) -> int | None:
    """s where the 1-d `indices` are s, s+1, ... (an iota counting along its
    only dimension of more than one element, plus integer constants,
    through reshapes, which keep the order of elements), else None."""
    offset, value = 0, indices
    while True:
        op = _producer(value)
        if op is None:
            return None
        if op.name == "kg.reshape":
            value = op.operands[0]
        elif op.name == "kg.add":
            found = _constant_operand(op, _integer)
            if found is None:
                return None
            constant, value = found
            offset += constant
        elif op.name == "kg.iota":
            dim = ir.IntegerAttr(op.attributes["dim"]).value
            if any(extent != 1 for d, extent in enumerate(_shape(value)) if d != dim):
                return None
            return offset + ir.IntegerAttr(op.attributes["start"]).value
        else:
            return None


def _integer(value: ir.Value) -> int | None:
    """The value of an integer constant of one element, else None."""
    number = _one_element_constant(value)
    if number is None or not isinstance(_type(value).element_type, ir.IntegerType):
        return None
    return int(number) if float(number).is_integer() else None


def _constant_operand(op: ir.Operation, read) -> tuple | None:
    """(c, x) where the binary `op` combines x, of its result's shape, with
    a constant that `read` reads as c (on either side); else None."""
    lhs, rhs = op.operands
    number = read(rhs)
    if number is None:
        number, lhs = read(lhs), rhs
    if number is None or _shape(lhs) != _shape(op.results[0]):
        return None
    return number, lhs


def _one_element_constant(value: ir.Value) -> float | int | None:
    """The number a `kg.constant` of one element holds, else None."""
    op = _producer(value)
    if op is None or op.name != "kg.constant" or math.prod(_shape(value)) != 1:
        return None
    attribute = op.attributes["value"]
    return attribute.value if isinstance(attribute, (ir.FloatAttr, ir.IntegerAttr)) else None


def _slice_of_piece(window: ir.Operation) -> None:
    join = _producer(window.operands[0])
    if join is None or join.name != "kg.concat":
        return
    dim = ir.IntegerAttr(join.attributes["dim"]).value
    offsets = list(ir.DenseI64ArrayAttr(window.attributes["offsets"]))
    strides = list(ir.DenseI64ArrayAttr(window.attributes["strides"]))
    result = _shape(window.results[0])
    pieces = [_shape(piece) for piece in join.operands]
    if any(ir.ShapedType.is_dynamic_size(s) for s in result + sum(pieces, [])):
        return
    first, last = offsets[dim], offsets[dim] + (result[dim] - 1) * strides[dim]
    start = 0
    for piece, piece_shape in zip(join.operands, pieces):
        end = start + piece_shape[dim]
        if start <= first and last < end:
            moved = list(offsets)
            moved[dim] = first - start
            with ir.InsertionPoint(window), window.location:
                whole = result == piece_shape and not any(moved) and all(s == 1 for s in strides)
                view = piece if whole else kg.slice(_type(window.results[0]), piece, moved,
                                                    strides)
            window.results[0].replace_all_uses_with(view)
            window.erase()
            return
        start = end


# -- batched products in their users' shape ---------------------------------


def _fold_batch_reshape(reshape: ir.Operation) -> None:
    product = _producer(reshape.operands[0])
    if product is None or product.name != "kg.matmul" or _uses(product.results[0]) != 1:
        return
    old, new = _shape(product.results[0]), _shape(reshape.results[0])
    if len(old) < 2 or len(new) < 2 or old[-2:] != new[-2:] or old == new:
        return
    a, b = product.operands
    # A dynamic extent may be a matrix dim (a query length); the batch dims,
    # which the rewrite regroups, must be known.
    batches = old[:-2] + new[:-2] + _shape(a)[:-2] + _shape(b)[:-2]
    if any(ir.ShapedType.is_dynamic_size(s) for s in batches):
        return
    batch = math.prod(old[:-2])
    if batch <= 1:
        return
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


# -- transposes -----------------------------------------------------------


def _permutation(transpose: ir.Operation) -> list[int]:
    return list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"]))


def _fold_transpose(transpose: ir.Operation) -> None:
    source, permutation = transpose.operands[0], _permutation(transpose)
    inner = _producer(source)
    if inner is not None and inner.name != "kg.transpose":
        inner = None
    if inner is not None:
        # Dim i of the outer result is dim permutation[i] of the inner one,
        # which is dim inner_permutation[permutation[i]] of its operand.
        inner_permutation = _permutation(inner)
        source = inner.operands[0]
        permutation = [inner_permutation[p] for p in permutation]
    if permutation == list(range(len(permutation))):
        result = source
    elif inner is None:
        return
    else:
        with ir.InsertionPoint(transpose), transpose.location:
            result = kg.transpose(_type(transpose.results[0]), source, permutation)
    transpose.results[0].replace_all_uses_with(result)
    transpose.erase()
    if inner is not None and _uses(inner.results[0]) == 0:
        inner.erase()


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
            found = _constant_operand(op, _scalar)
            if found is None:
                return None
            factor, value = found
            scale *= factor
        elif op.name == "kg.cast":
            # Only a widening to f32 is exact: a cast to an 8-bit float (or
            # any narrower type) rounds, and the product must see it.
            source = op.operands[0]
            if str(_type(source).element_type) not in HALF_FLOATS or \
                    str(_type(op.results[0]).element_type) != "f32":
                return None
            return source, views, scale
        else:
            return None


def _wide_returned_product(cast: ir.Operation) -> None:
    widened = cast.results[0]
    source = cast.operands[0]
    if str(_type(widened).element_type) != "f32" or \
            str(_type(source).element_type) not in HALF_FLOATS:
        return
    if not all(use.owner.name == "func.return" for use in widened.uses):
        return
    views: list[ir.Operation] = []
    value = source
    while True:
        if _uses(value) != 1:
            return
        op = _producer(value)
        if op is None:
            return
        if op.name == "kg.reshape":
            views.append(op)
            value = op.operands[0]
        elif op.name == "kg.matmul":
            break
        else:
            return
    a, b = op.operands
    with ir.InsertionPoint(cast), cast.location:
        wide = ir.RankedTensorType.get(_shape(value), ir.F32Type.get())
        precision = op.attributes["precision"] if "precision" in op.attributes else None
        result = _viewed(kg.matmul(wide, a, b, precision=precision), views)
    widened.replace_all_uses_with(result)
    cast.erase()
    for view in views:
        view.erase()
    op.erase()


def _scalar(value: ir.Value) -> float | None:
    """The value of an f32 constant of one element, else None."""
    number = _one_element_constant(value)
    if number is None or str(_type(value).element_type) != "f32":
        return None
    return float(number)


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
