"""kg-fold: values known when the graph is compiled, computed then.

Argument: `kg-fold`. No options.

The pass follows every value of the graph (outside kernels) whose
elements are a known function of their position: a splat `c` (every
element c) or, for integers, an affine form `c + sum_d a_d * i_d` in the
element's index `i` (an iota is `start + i_dim`). Views (reshape,
transpose, broadcast_to, slice, concat), gathers, integer sums,
differences, negations and products by a splat, and conversions carry such
forms; a form is dropped where a value could leave its element type's
range. On them (`k`, `k'`: known values; `x`, `y`: any values; `z`: a splat
0; `f`: a value that holds finite numbers, an integer or a float
conversion of one; each rewrite is of the kg op named on its left):

    compare(p, k, k')        =>  constant true or false, where p holds at
                                 every position or at none (the range of
                                 k - k' over the shape decides)
    op(k, ...)               =>  constant c, where the result is a splat c
    op(k, ...)               =>  iota dim d start c, where the result is
                                 c + i_d
    select(true, x, y)       =>  x          select(false, x, y)  =>  y
    logical_and(true, x)     =>  x          logical_or(false, x)  =>  x
    matmul(z, f), (f, z)     =>  constant 0

(`x` only where it has the result's type.) The logical ops on splats
evaluate as the op table's `on_scalars` does.

transformers builds its attention masks from positions: a check that the
position ids rise one at a time (packed sequences: `diff(positions) != 1`,
summed along the sequence as a product with a triangular matrix, then
gathered at both the query's and the key's position) and negative-index
wrap-arounds of `arange`s. Positions that are an `arange` make all of it
a constant, and what remains of the mask is the causal comparison of two
iotas, which kg-fuse fuses into the attention that reads it.

Values computed from function arguments, float arithmetic (whose
rounding the pass does not model), products of a zero and a value that
may hold an infinity or NaN, values with a dynamic extent, and ops inside
kernels are left alone.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from mlir import ir

from kgc.dialects import kg
from kgc.element_types import INTEGER_BITS
from kgc.op_table import ELEMENTWISE
from kgc.passes.registry import Pass, register_pass
from kgc.tiling.kernel_ops import enclosing_kernel, walk_ops


@dataclasses.dataclass(frozen=True)
class Form:
    """Element `i` of a tensor of `shape` holds `constant + sum(coefficients[d] * i[d])`.

    Integers (and i1 as 0/1) take any coefficients; floats only splats."""

    constant: int | float
    coefficients: tuple[int, ...]
    shape: tuple[int, ...]

    @property
    def is_splat(self) -> bool:
        return not any(a for a, n in zip(self.coefficients, self.shape) if n > 1)

    def range(self) -> tuple[int | float, int | float]:
        low = high = self.constant
        for a, n in zip(self.coefficients, self.shape):
            if n > 1:
                low += min(0, a * (n - 1))
                high += max(0, a * (n - 1))
        return low, high

    def broadcast(self, shape: Sequence[int]) -> Form:
        """The form as broadcast to `shape` (aligned at the last dim)."""
        shape = tuple(shape)
        lead = len(shape) - len(self.shape)
        coefficients = [0] * lead + [a if n > 1 else 0
                                     for a, n in zip(self.coefficients, self.shape)]
        return Form(self.constant, tuple(coefficients), shape)

    def combine(self, other: Form, sign: int, shape: Sequence[int]) -> Form:
        lhs, rhs = self.broadcast(shape), other.broadcast(shape)
        return Form(lhs.constant + sign * rhs.constant,
                    tuple(a + sign * b for a, b in zip(lhs.coefficients, rhs.coefficients)),
                    tuple(shape))

    def scaled(self, factor: int) -> Form:
        return Form(self.constant * factor, tuple(a * factor for a in self.coefficients),
                    self.shape)


# The sign a sum or a difference gives its right operand.
_SIGN = {"add": 1, "sub": -1}
# Integers every float type holds exactly (2^(mantissa bits + 1)).
_EXACT_INTEGERS = {"f32": 2 ** 24, "f16": 2 ** 11, "bf16": 2 ** 8}
_F16_LARGEST = 65504
# kg.iota holds its values exactly below this (an i64 iota's start is an f64).
_IOTA_LIMIT = 2 ** 53


@register_pass
class KgFold(Pass):
    argument = "kg-fold"
    summary = ("Values known at compile time (splats, integer forms affine in the position) "
               "computed, and what they decide: comparisons, choices, products of zero")

    def run(self, op: ir.Operation) -> None:
        forms: dict[ir.Value, Form] = {}
        for target in list(walk_ops(op)):
            if enclosing_kernel(target) is not None or len(target.results) != 1:
                continue
            _visit(target, forms)


def _element(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def _static_shape(value: ir.Value) -> tuple[int, ...] | None:
    shape = ir.RankedTensorType(value.type).shape
    if any(ir.ShapedType.is_dynamic_size(n) for n in shape):
        return None
    return tuple(shape)


def _visit(op: ir.Operation, forms: dict[ir.Value, Form]) -> None:
    result = op.results[0]
    shape = _static_shape(result)
    if shape is None:
        return
    replacement = _identity(op, forms, shape)
    if replacement is not None:
        result.replace_all_uses_with(replacement)
        op.erase()
        return
    form = _form_of(op, forms, shape)
    if form is None or not _representable(form, _element(result)):
        return
    if op.name not in ("kg.constant", "kg.iota"):
        with ir.InsertionPoint(op), op.location:
            made = _as_source(form, result.type)
        if made is not None:
            result.replace_all_uses_with(made)
            op.erase()
            result = made
    forms[result] = form


def _as_source(form: Form, result_type: ir.Type) -> ir.Value | None:
    """A kg.constant or kg.iota of `result_type` holding `form`, where one
    does."""
    if form.is_splat:
        return kg.constant(result_type, float(form.constant))
    counting = [d for d, (a, n) in enumerate(zip(form.coefficients, form.shape)) if a and n > 1]
    if len(counting) != 1 or form.coefficients[counting[0]] != 1 or \
            max(map(abs, form.range())) >= _IOTA_LIMIT:
        return None
    return kg.iota(result_type, counting[0], start=form.constant)


def _representable(form: Form, element: str) -> bool:
    # A form whose values could leave an integer type's range wraps in the
    # kernel, which the form does not model.
    if element in INTEGER_BITS:
        bits = INTEGER_BITS[element]
        low, high = form.range()
        if bits == 1:
            return form.is_splat and form.constant in (0, 1)
        return -2 ** (bits - 1) <= low and high < 2 ** (bits - 1)
    # A float splat is followed only while it holds an integer the type
    # holds exactly: the constant's f64 attribute is then the stored value.
    value = form.constant
    return form.is_splat and float(value).is_integer() and \
        abs(value) <= _EXACT_INTEGERS.get(element, 0)


def _form_of(op: ir.Operation, forms: dict[ir.Value, Form], shape) -> Form | None:
    name = op.name.removeprefix("kg.")
    operands = [forms.get(operand) for operand in op.operands]
    zeros = (0,) * len(shape)
    if name == "constant":
        value = ir.FloatAttr(op.attributes["value"]).value
        if _element(op.results[0]) in INTEGER_BITS:
            if not value.is_integer():
                return None
            value = int(value)
        return Form(value, zeros, shape)
    if name == "iota":
        dim = ir.IntegerAttr(op.attributes["dim"]).value
        start = ir.IntegerAttr(op.attributes["start"]).value if "start" in op.attributes else 0
        coefficients = [0] * len(shape)
        coefficients[dim] = 1
        return Form(start, tuple(coefficients), shape)
    if name in _SIGN or name == "mul":
        return _arithmetic(name, operands, shape, _element(op.results[0]))
    if name == "neg" and operands[0] is not None and _element(op.results[0]) in INTEGER_BITS:
        return operands[0].scaled(-1)
    if name == "cmp":
        return _comparison(op, operands, shape)
    row = ELEMENTWISE.get(name)
    if row is not None and row.operand_types == "bool":  # the logical ops
        if any(f is None or not f.is_splat for f in operands):
            return None
        return Form(int(row.on_scalars(*(float(f.constant) for f in operands))), zeros, shape)
    if name == "cast":
        return _cast(operands[0], _element(op.operands[0]), _element(op.results[0]), shape)
    if name == "broadcast_to":
        return None if operands[0] is None else operands[0].broadcast(shape)
    if name == "reshape":
        return None if operands[0] is None else _reshaped(operands[0], shape)
    if name == "transpose":
        if operands[0] is None:
            return None
        permutation = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        return Form(operands[0].constant,
                    tuple(operands[0].coefficients[p] for p in permutation), shape)
    if name == "slice":
        return None if operands[0] is None else _sliced(op, operands[0], shape)
    if name == "concat":
        return _joined(op, operands, shape)
    if name == "gather":
        return _gathered(op, operands, shape)
    if name == "matmul":
        return _zero_product(op, operands, forms, shape)
    return None


def _arithmetic(name: str, operands: list[Form | None], shape, element: str) -> Form | None:
    lhs, rhs = operands
    if lhs is None or rhs is None or element not in INTEGER_BITS or element == "i1":
        return None
    if name in _SIGN:
        return lhs.combine(rhs, _SIGN[name], shape)
    if rhs.is_splat:
        return lhs.broadcast(shape).scaled(rhs.constant)
    if lhs.is_splat:
        return rhs.broadcast(shape).scaled(lhs.constant)
    return None  # a product of two positions is no affine form


def _comparison(op: ir.Operation, operands: list[Form | None], shape) -> Form | None:
    lhs, rhs = operands
    element = _element(op.operands[0])
    if lhs is None or rhs is None or element not in INTEGER_BITS:
        return None
    low, high = lhs.combine(rhs, -1, shape).range()  # of lhs - rhs
    predicate = str(kg.ComparePredicate(ir.IntegerAttr(op.attributes["predicate"]).value))
    always, never = {
        "eq": (low == high == 0, low > 0 or high < 0),
        "ne": (low > 0 or high < 0, low == high == 0),
        "lt": (high < 0, low >= 0),
        "le": (high <= 0, low > 0),
        "gt": (low > 0, high <= 0),
        "ge": (low >= 0, high < 0),
    }[predicate]
    if always or never:
        return Form(int(always), (0,) * len(shape), shape)
    return None


def _cast(source: Form | None, element: str, to: str, shape) -> Form | None:
    if source is None:
        return None
    if to in INTEGER_BITS:
        if to == "i1":
            return Form(int(source.constant != 0), source.coefficients, shape) \
                if source.is_splat else None
        if element in INTEGER_BITS:
            return source  # a value inside the narrower range is kept (checked after)
        if not source.is_splat or not math.isfinite(source.constant):
            return None
        return Form(int(source.constant), source.coefficients, shape)  # truncation
    if not source.is_splat:
        return None
    value = source.constant
    if element in INTEGER_BITS:
        if abs(value) > _EXACT_INTEGERS.get(to, 0):
            return None  # rounds in `to`
        return Form(float(value), source.coefficients, shape)
    # Between floats, only values every float type holds exactly.
    if not float(value).is_integer() or abs(value) > _EXACT_INTEGERS.get(to, 0):
        return None
    return Form(float(value), source.coefficients, shape)


def _reshaped(form: Form, shape) -> Form | None:
    """A reshape that adds or drops dims of one element keeps the others'
    coefficients; any other keeps only a splat."""
    if form.is_splat:
        return Form(form.constant, (0,) * len(shape), shape)
    kept = [(a, n) for a, n in zip(form.coefficients, form.shape) if n > 1]
    if [n for _, n in kept] != [n for n in shape if n > 1]:
        return None
    coefficients, inner = [], iter(a for a, _ in kept)
    for n in shape:
        coefficients.append(next(inner) if n > 1 else 0)
    return Form(form.constant, tuple(coefficients), shape)


def _sliced(op: ir.Operation, form: Form, shape) -> Form:
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["offsets"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    constant = form.constant + sum(a * o for a, o in zip(form.coefficients, offsets))
    return Form(constant, tuple(a * s for a, s in zip(form.coefficients, strides)), shape)


def _joined(op: ir.Operation, operands: list[Form | None], shape) -> Form | None:
    """A join is one form where every piece, moved to its place along the
    joined dim, is the same form (a piece of one element along it fixes
    no coefficient there)."""
    if any(f is None for f in operands):
        return None
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    along = {f.coefficients[dim] for f in operands if f.shape[dim] > 1}
    if len(along) > 1:
        return None
    if along:
        slope = along.pop()
    elif len(operands) > 1:  # pieces of one element each: the first two give the slope
        slope = operands[1].constant - operands[0].constant
    else:
        slope = 0
    joined, start = set(), 0
    for piece in operands:
        others = tuple(a if n > 1 else 0 for d, (a, n) in enumerate(zip(piece.coefficients,
                                                                          piece.shape))
                       if d != dim)
        joined.add((piece.constant - slope * start, others))
        start += piece.shape[dim]
    if len(joined) != 1:
        return None
    constant, others = joined.pop()
    coefficients = list(others)
    coefficients.insert(dim, slope)
    return Form(constant, tuple(coefficients), shape)


def _gathered(op: ir.Operation, operands: list[Form | None], shape) -> Form | None:
    table, indices = operands
    if table is None:
        return None
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    if table.is_splat:
        return Form(table.constant, (0,) * len(shape), shape)
    if indices is None:
        return None
    # Element r reads the table at r with r[dim] replaced by indices[r[dim]].
    slope = table.coefficients[dim]
    coefficients = list(table.coefficients)
    coefficients[dim] = slope * indices.coefficients[0]
    return Form(table.constant + slope * indices.constant, tuple(coefficients), shape)


def _zero_product(op: ir.Operation, operands: list[Form | None], forms: dict[ir.Value, Form],
                  shape) -> Form | None:
    """0 where one operand is all zero and the other holds finite numbers
    only (0 * inf is NaN)."""
    for zero, other, other_value in ((operands[0], operands[1], op.operands[1]),
                                     (operands[1], operands[0], op.operands[0])):
        if zero is not None and zero.is_splat and zero.constant == 0 and \
                (other is not None or _finite(other_value, forms)):
            return Form(0.0 if _element(op.results[0]) not in INTEGER_BITS else 0,
                        (0,) * len(shape), shape)
    return None


def _finite(value: ir.Value, forms: dict[ir.Value, Form]) -> bool:
    """Whether every element of `value` is a finite number: an integer, or
    a float cast of one that the float's range holds (through views)."""
    while True:
        if _element(value) in INTEGER_BITS:
            return True
        owner = value.owner
        if not isinstance(owner, ir.OpView):
            return False
        if owner.operation.name == "kg.cast" and _element(owner.operands[0]) in INTEGER_BITS:
            source = owner.operands[0]
            if _element(source) == "i1" or _element(value) != "f16":
                return True  # every i32 and i64 is below f32's and bf16's largest
            known = forms.get(source)
            return known is not None and max(map(abs, known.range())) <= _F16_LARGEST
        if owner.operation.name not in ("kg.reshape", "kg.transpose", "kg.broadcast_to",
                                        "kg.slice"):
            return False
        value = owner.operands[0]


def _identity(op: ir.Operation, forms: dict[ir.Value, Form], shape) -> ir.Value | None:
    """The operand that `op` returns as is, given a splat condition or a
    logical op's splat side; None where there is none of result's type."""
    name = op.name
    if name == "kg.select":
        condition = forms.get(op.operands[0])
        if condition is None or not condition.is_splat:
            return None
        chosen = op.operands[1] if condition.constant else op.operands[2]
        return chosen if chosen.type == op.results[0].type else None
    if name in ("kg.logical_and", "kg.logical_or"):
        passing = 1 if name == "kg.logical_and" else 0  # x and true, x or false
        for side, other in ((0, 1), (1, 0)):
            known = forms.get(op.operands[side])
            if known is not None and known.is_splat and known.constant == passing \
                    and op.operands[other].type == op.results[0].type:
                return op.operands[other]
    return None
