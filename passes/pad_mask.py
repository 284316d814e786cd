"""kg-pad-mask: pad every tile to powers of two and mask partial tiles.

Argument: `kg-pad-mask`. No options.

Triton's tensors have power-of-two shapes. `kg-tile` may choose a tile of
1000 lanes (a whole row of 1000), and a tile of 128 lanes may run past the
end of an axis of 1000. This pass:

    tile axis of size t (not a power of two)    =>  size next_pow2(t), on
                                                    every tensor of the kernel
    kg.tile_load %v[%o] (may leave %v)          =>  kg.tile_load %v[%o] mask %m
                                                    padding p
    kg.tile_store %x, %v[%o] (may leave %v)     =>  kg.tile_store ... mask %m
    kg.reduce kind %x over an axis with lanes
      outside the iteration, where %x's lanes
      there are not the neutral value          =>  kg.reduce kind
                                                    (kg.tile_select %m, %x, neutral)
    kg.tile_dot %a, %b, %acc with K lanes
      outside the iteration not known zero     =>  zeros selected into them

`%m` is a `kg.tile_mask` of the lanes inside the buffer; accesses whose
offsets provably keep every lane inside (from the grid, the loop bounds and
the offset arithmetic) stay unmasked. The padding `p` is the neutral value
of the first reduction or dot the loaded value flows into: 0 for sums and
dots, -inf for max, +inf for min, 0 otherwise. Where that padding survives
the ops between the load and the reduction (exp(-inf) is 0, the neutral of
a sum), no select is needed.

Kernels already padded (marked `padded`) are left alone.
"""

from __future__ import annotations

import math

from mlir import ir

from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling.generate import INT32_MAX, INT32_MIN, NEUTRAL
from kgc.tiling.graph_model import reduce_kind
from kgc.tiling.index_maps import next_power_of_two
from kgc.tiling.kernel_ops import (enclosing_loop_for_axis, int_array, is_tiled, kernel_name,
                                   kernels_in, replace_op, resize_axes, walk_ops)
from kgc.tiling.ranges import OffsetRanges

PADDED_ATTRIBUTE = "padded"


@register_pass
class KgPadMask(Pass):
    argument = "kg-pad-mask"
    summary = "Pad tiles to powers of two, mask partial tiles, keep reductions exact"


    def run(self, op: ir.Operation) -> None:
        for kernel in kernels_in(op):
            if is_tiled(kernel) and PADDED_ATTRIBUTE not in kernel.attributes:
                _KernelPadder(kernel).run()


class _KernelPadder:
    def __init__(self, kernel: ir.Operation):
        self.kernel = kernel
        self.name = kernel_name(kernel)
        self.tile = int_array(kernel, "tile")
        self.extents = int_array(kernel, "iteration")
        grid = int_array(kernel, "grid")
        if self.tile is None or self.extents is None or grid is None:
            raise PassFailure(f"kernel @{self.name} has no tile, iteration or grid attribute; "
                              "it was not tiled by kg-tile", kernel.location)
        self.padded = [next_power_of_two(t) for t in self.tile]
        self.ranges = OffsetRanges(grid)
        self.block = kernel.regions[0].blocks[0]
        self.i1 = ir.IntegerType.get_signless(1)
        self.i32 = ir.IntegerType.get_signless(32)
        self._zero = None

    def run(self) -> None:
        self._check_tiles()
        self._retype()
        for op in list(walk_ops(self.kernel)):
            if op.name in ("kg.tile_load", "kg.tile_store"):
                self._mask_access(op)
        for op in list(walk_ops(self.kernel)):
            if op.name == "kg.reduce":
                self._guard_reduction(op)
            elif op.name == "kg.tile_dot":
                self._guard_dot(op)
        self.kernel.attributes[PADDED_ATTRIBUTE] = ir.UnitAttr.get()

    # -- shapes -----------------------------------------------------------------

    def _check_tiles(self) -> None:
        for axis, (t, e) in enumerate(zip(self.tile, self.extents)):
            if t & (t - 1) and t != e:
                raise PassFailure(
                    f"kernel @{self.name}: tile {t} of axis {axis} is neither a power of two nor "
                    f"the whole axis ({e}); its padding lanes would overlap the next tile",
                    self.kernel.location)

    def _retype(self) -> None:
        try:
            resize_axes(self.kernel, self.tile, self.padded)
        except ValueError as error:
            raise PassFailure(f"kernel @{self.name}: {error}", self.kernel.location) from None

    # -- accesses ---------------------------------------------------------------

    def _mask_access(self, op: ir.Operation) -> None:
        is_load = op.name == "kg.tile_load"
        view = op.operands[0] if is_load else op.operands[1]
        segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        first = 1 if is_load else 2
        count = segments[1] if is_load else segments[2]
        offsets = list(op.operands[first:first + count])
        existing = op.operands[first + count] if (segments[2] if is_load else segments[3]) else None
        tile_type = ir.RankedTensorType(op.results[0].type if is_load else op.operands[0].type)
        sizes = list(ir.MemRefType(view.type).shape)
        lower, upper, needed = [], [], False
        for offset, lane_count, size in zip(offsets, tile_type.shape, sizes):
            lo, hi = self.ranges.of(offset)
            lower.append(0 if lo < 0 else INT32_MIN)
            upper.append(size if hi + lane_count > size else INT32_MAX)
            needed |= lo < 0 or hi + lane_count > size
        if not needed and existing is None:
            return
        with ir.InsertionPoint(op), op.location:
            mask = existing
            if needed:
                bounds = ir.Operation.create(
                    "kg.tile_mask", results=[ir.RankedTensorType.get(list(tile_type.shape), self.i1)],
                    operands=offsets, attributes={"lower": ir.DenseI64ArrayAttr.get(lower),
                                                  "upper": ir.DenseI64ArrayAttr.get(upper)}).result
                mask = bounds if existing is None else ir.Operation.create(
                    "arith.andi", results=[bounds.type], operands=[existing, bounds]).result
        attributes = {name: op.attributes[name] for name in op.attributes}
        if is_load:
            attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([1, count, 1])
            attributes["padding"] = ir.FloatAttr.get(ir.F64Type.get(), _consumer_neutral(op.results[0]))
            replace_op(op, "kg.tile_load", [view, *offsets, mask], attributes)
        else:
            attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([1, 1, count, 1])
            replace_op(op, "kg.tile_store", [op.operands[0], view, *offsets, mask], attributes)

    # -- reductions and dots ----------------------------------------------------

    def _invalid_axes(self, op: ir.Operation, axes) -> list[int]:
        """Axes among `axes` along which the tiles at `op` may hold lanes past
        the end of the iteration."""
        invalid = []
        for axis in axes:
            loop = enclosing_loop_for_axis(op, axis)
            lo, hi = (0, 0) if loop is None else self.ranges.of(loop.regions[0].blocks[0].arguments[0])
            if lo < 0 or hi + self.padded[axis] > self.extents[axis]:
                invalid.append(axis)
        return invalid

    def _guard_reduction(self, op: ir.Operation) -> None:
        axes = list(ir.DenseI64ArrayAttr(op.attributes["dims"]))
        neutral = NEUTRAL[reduce_kind(op)]
        accumulation = _accumulation(op.operands[0])
        if accumulation is not None:
            # A tile of partial results built by a loop: its lanes must get
            # the neutral value where each step's tile reaches past the end.
            combine, position = accumulation
            self._guard_operand(combine, position, axes, neutral)
        else:
            self._guard_operand(op, 0, axes, neutral)

    def _guard_operand(self, op: ir.Operation, position: int, axes, neutral: float) -> None:
        invalid = self._invalid_axes(op, axes)
        value = op.operands[position]
        if not invalid or _pad_value(value, invalid) == neutral:
            return
        op.operands[position] = self._select(op, value, invalid, neutral)

    def _guard_dot(self, op: ir.Operation) -> None:
        k_axis = len(ir.RankedTensorType(op.operands[0].type).shape) - 2
        invalid = self._invalid_axes(op, [k_axis])
        if not invalid:
            return
        a, b = op.operands[0], op.operands[1]
        pad_a, pad_b = _pad_value(a, invalid), _pad_value(b, invalid)
        if (pad_a == 0 and _finite(pad_b)) or (pad_b == 0 and _finite(pad_a)):
            return
        for index, pad in ((0, pad_a), (1, pad_b)):
            if pad != 0:
                op.operands[index] = self._select(op, op.operands[index], invalid, 0.0)

    def _select(self, op: ir.Operation, value: ir.Value, axes: list[int], fill: float) -> ir.Value:
        """`value` with `fill` in the lanes past the end of the iteration
        along `axes`, inserted before `op`."""
        n = len(self.tile)
        type_ = ir.RankedTensorType(value.type)
        offsets, lower, upper, shape = [], [INT32_MIN] * n, [INT32_MAX] * n, [1] * n
        for axis in range(n):
            loop = enclosing_loop_for_axis(op, axis)
            offsets.append(loop.regions[0].blocks[0].arguments[0] if loop is not None else self._zero_i32())
        for axis in axes:
            lo, _ = self.ranges.of(offsets[axis])
            lower[axis] = 0 if lo < 0 else INT32_MIN
            upper[axis] = self.extents[axis]
            shape[axis] = self.padded[axis]
        with ir.InsertionPoint(op), op.location:
            mask = ir.Operation.create(
                "kg.tile_mask", results=[ir.RankedTensorType.get(shape, self.i1)], operands=offsets,
                attributes={"lower": ir.DenseI64ArrayAttr.get(lower),
                            "upper": ir.DenseI64ArrayAttr.get(upper)}).result
            constant = ir.Operation.create(
                "kg.constant", results=[ir.RankedTensorType.get([1] * n, type_.element_type)],
                attributes={"value": ir.FloatAttr.get(ir.F64Type.get(), fill)}).result
            return ir.Operation.create("kg.tile_select", results=[type_],
                                       operands=[mask, value, constant]).result

    def _zero_i32(self) -> ir.Value:
        if self._zero is None:
            with ir.InsertionPoint.at_block_begin(self.block), self.kernel.location:
                self._zero = ir.Operation.create(
                    "arith.constant", results=[self.i32],
                    attributes={"value": ir.IntegerAttr.get(self.i32, 0)}).result
        return self._zero


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _accumulation(value: ir.Value):
    """(combine op, operand position of the new tile) when `value` is the
    result of an scf.for that accumulates `combine(carried, tile)`."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "scf.for":
        return None
    number = ir.OpResult(value).result_number
    body = owner.regions[0].blocks[0]
    carried = body.arguments[1 + number]
    yielded = list(body.operations)[-1].operands[number]
    combine = yielded.owner
    if isinstance(combine, ir.Block) or combine.name not in ("kg.add", "kg.maximum", "kg.minimum"):
        return None
    operands = list(combine.operands)
    if operands[0] == carried:
        return combine, 1
    if operands[1] == carried:
        return combine, 0
    return None


def _consumer_neutral(value: ir.Value) -> float:
    """The neutral value of the first reduction or dot `value` flows into
    (through loop-carried accumulators)."""
    frontier, seen = [value], set()
    while frontier:
        current = frontier.pop(0)
        for use in current.uses:
            owner = use.owner
            name = owner.name
            if name == "kg.reduce":
                return NEUTRAL.get(reduce_kind(owner), 0.0)
            if name == "kg.tile_dot":
                return 0.0
            following = []
            if name == "scf.yield":
                following = [owner.parent.results[use.operand_number]]
            elif name.startswith("kg.") and len(owner.results) == 1:
                following = [owner.results[0]]
            for result in following:
                if result not in seen:
                    seen.add(result)
                    frontier.append(result)
    return 0.0


_UNARY = {
    "kg.exp": math.exp, "kg.log": math.log, "kg.sqrt": math.sqrt,
    "kg.rsqrt": lambda x: 1 / math.sqrt(x), "kg.neg": lambda x: -x, "kg.abs": abs,
    "kg.relu": lambda x: max(x, 0.0), "kg.sigmoid": lambda x: 1 / (1 + math.exp(-x)),
    "kg.tanh": math.tanh, "kg.square": lambda x: x * x, "kg.reciprocal": lambda x: 1 / x,
    "kg.cast": lambda x: x,
}
_BINARY = {
    "kg.add": lambda a, b: a + b, "kg.sub": lambda a, b: a - b, "kg.mul": lambda a, b: a * b,
    "kg.div": lambda a, b: a / b, "kg.maximum": max, "kg.minimum": min,
}


def _pad_value(value: ir.Value, axes: list[int]) -> float | None:
    """What `value` holds in its lanes past the end of the iteration along
    `axes`, when it is one known number there (None otherwise)."""
    shape = ir.RankedTensorType(value.type).shape
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    name = owner.name
    if name == "kg.constant":
        return ir.FloatAttr(owner.attributes["value"]).value
    if all(shape[a] == 1 for a in axes):
        return None  # constant along those axes: real data
    if name == "kg.tile_load":
        if "padding" not in owner.attributes:
            return None
        return ir.FloatAttr(owner.attributes["padding"]).value
    if name == "kg.tile_select":
        t, f = (_pad_value(owner.operands[i], axes) for i in (1, 2))
        return t if t is not None and t == f else None
    if name in _UNARY or name in _BINARY:
        operands = [_pad_value(o, axes) for o in owner.operands]
        if any(o is None for o in operands):
            return None
        try:
            result = (_UNARY.get(name) or _BINARY[name])(*operands)
        except (ValueError, ZeroDivisionError, OverflowError):
            return None
        return None if math.isnan(result) else float(result)
    return None
