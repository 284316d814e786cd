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
    kg.tile_gather %v[%o] indices %i dim d      =>  kg.tile_gather ... mask %m
      (may leave %v along a dimension but d)        padding p
    kg.reduce kind %x over an axis with lanes
      outside the iteration, where %x's lanes
      there are not the neutral value          =>  kg.reduce kind
                                                    (kg.tile_select %m, %x, neutral)
    kg.tile_dot %a, %b, %acc with K lanes
      outside the iteration not known zero     =>  zeros selected into them

A view with a dynamic size (a kernel's dynamic extent) bounds every access
along it: its mask takes the size as a `dynamic_upper` bound. A reduction
or a dot along the kernel's dynamic axis (attention's loop over the keys of
a growing cache) is guarded by the size read from the first buffer that
has it (`memref.dim`).

`%m` is a `kg.tile_mask` of the lanes inside the buffer (a gather's along
every dimension but the gathered one, whose positions are its indices:
their own tile's padded lanes hold 0, a position inside); accesses whose
offsets provably keep every lane inside (from the grid, the loop bounds and
the offset arithmetic) stay unmasked. The padding `p` is the neutral value
of the first reduction or dot the loaded value flows into: 0 for sums and
dots, -inf for max, +inf for min, 0 otherwise. A tile of integers or of i1
holds that value only when its type does (a whole number; 0 or 1 for i1)
and 0 (false) otherwise. Where that padding survives the ops between the
load and the reduction (exp(-inf) is 0, the neutral of a sum; a select by
a mask padded false picks its false value), no select is needed.

Kernels already padded (marked `padded`) are left alone.
"""

from __future__ import annotations

import math

from mlir import ir

from kgc.dialects import kg
from kgc.op_table import BY_OP_NAME
from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling.constants import COMBINE, INT32_MAX, INT32_MIN, NEUTRAL
from kgc.tiling.dynamic import kernel_dynamic_axis, read_extent
from kgc.tiling.graph_model import node_attrs, reduce_kind
from kgc.tiling.index_maps import next_power_of_two
from kgc.tiling.kernel_ops import (dot_dims, enclosing_loop_for_axis, int_array, is_tiled, kernel_name,
                                   kernels_in, replace_with, resize_axes, walk_ops)
from kgc.tiling.ranges import OffsetRanges

PADDED_ATTRIBUTE = "padded"
_FLOAT8 = ("f8E4M3FN", "f8E5M2")


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
        self._dynamic_sizes: dict = {}  # view -> its dynamic size as an i32
        self.dynamic_axis = kernel_dynamic_axis(kernel)
        self._extent = None  # the dynamic extent's size as an i32, read once

    def run(self) -> None:
        self._check_tiles()
        self._retype()
        for op in list(walk_ops(self.kernel)):
            if op.name in ("kg.tile_load", "kg.tile_store", "kg.tile_gather"):
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
        access = op.opview
        is_gather = isinstance(access, kg.TileGatherOp)
        is_load = isinstance(access, kg.TileLoadOp) or is_gather
        gathered = ir.IntegerAttr(op.attributes["dim"]).value if is_gather else None
        view = access.src if is_load else access.dst
        offsets = list(access.offsets)
        existing = access.mask
        tile_type = ir.RankedTensorType(op.results[0].type if is_load else access.value.type)
        sizes = list(ir.MemRefType(view.type).shape)
        lower, upper, needed, dynamic_dims = [], [], False, []
        for dim, (offset, lane_count, size) in enumerate(zip(offsets, tile_type.shape, sizes)):
            if dim == gathered:
                lower.append(INT32_MIN)
                upper.append(INT32_MAX)
                continue
            lo, hi = self.ranges.of(offset)
            lower.append(0 if lo < 0 else INT32_MIN)
            if ir.ShapedType.is_dynamic_size(size):
                # The size of a dynamic extent: known at run time only, so
                # every access along it is bounded by it.
                upper.append(INT32_MAX)
                dynamic_dims.append(dim)
                needed = True
                continue
            upper.append(size if hi + lane_count > size else INT32_MAX)
            needed |= lo < 0 or hi + lane_count > size
        if not needed and existing is None:
            return
        with ir.InsertionPoint(op), op.location:
            mask = existing
            if needed:
                bounds = kg.tile_mask(ir.RankedTensorType.get(list(tile_type.shape), self.i1),
                                      offsets, lower, upper,
                                      [self._dynamic_size_i32(view) for _ in dynamic_dims],
                                      dynamic_dims=dynamic_dims or None)
                mask = bounds if existing is None else ir.Operation.create(
                    "arith.andi", results=[bounds.type], operands=[existing, bounds]).result
            if is_gather:
                padding = _held_padding(tile_type.element_type, _consumer_neutral(op.results[0]))
                masked = kg.TileGatherOp(op.results[0].type, view, offsets, access.indices,
                                         gathered, mask=mask, padding=padding)
            elif is_load:
                padding = _held_padding(tile_type.element_type, _consumer_neutral(op.results[0]))
                masked = kg.TileLoadOp(op.results[0].type, view, offsets, mask=mask,
                                       padding=padding)
            else:
                masked = kg.TileStoreOp(access.value, view, offsets, mask=mask)
        replace_with(op, masked.operation, keep_attributes=True)

    def _dynamic_size_i32(self, view: ir.Value) -> ir.Value:
        """The dynamic size of `view` (a `memref.reinterpret_cast` of a
        buffer, with one dynamic size) as an i32, made once per view, beside
        it, where it dominates every access through it."""
        if view not in self._dynamic_sizes:
            owner = view.owner
            if isinstance(owner, ir.Block) or owner.name != "memref.reinterpret_cast" or \
                    len(owner.opview.sizes) != 1:
                raise PassFailure(f"kernel @{self.name}: a view with a dynamic extent must be a "
                                  "memref.reinterpret_cast with one dynamic size",
                                  self.kernel.location)
            with ir.InsertionPoint.after(owner), owner.location:
                self._dynamic_sizes[view] = ir.Operation.create(
                    "arith.index_cast", results=[self.i32],
                    operands=[owner.opview.sizes[0]]).result
        return self._dynamic_sizes[view]

    # -- reductions and dots ----------------------------------------------------

    def _invalid_axes(self, op: ir.Operation, axes) -> list[int]:
        """Axes among `axes` along which the tiles at `op` may hold lanes past
        the end of the iteration."""
        invalid = []
        for axis in axes:
            loop = enclosing_loop_for_axis(op, axis)
            lo, hi = (0, 0) if loop is None else self.ranges.of(loop.regions[0].blocks[0].arguments[0])
            if axis == self.dynamic_axis or lo < 0 or hi + self.padded[axis] > self.extents[axis]:
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
        _, k_axis, _ = dot_dims(op)
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
        dynamic_dims = []
        for axis in axes:
            lo, _ = self.ranges.of(offsets[axis])
            lower[axis] = 0 if lo < 0 else INT32_MIN
            shape[axis] = self.padded[axis]
            if axis == self.dynamic_axis:
                dynamic_dims.append(axis)
            else:
                upper[axis] = self.extents[axis]
        with ir.InsertionPoint(op), op.location:
            mask = kg.tile_mask(ir.RankedTensorType.get(shape, self.i1), offsets, lower, upper,
                                [self._extent_i32() for _ in dynamic_dims],
                                dynamic_dims=dynamic_dims or None)
            element = type_.element_type
            if str(element) in _FLOAT8:
                # A constant has no 8-bit float type: the fill is made in f32
                # (which holds it exactly) and cast.
                wide = kg.constant(ir.RankedTensorType.get([1] * n, ir.F32Type.get()), fill)
                constant = kg.cast(ir.RankedTensorType.get([1] * n, element), wide)
            else:
                constant = kg.constant(ir.RankedTensorType.get([1] * n, element), fill)
            return kg.tile_select(type_, mask, value, constant)

    def _extent_i32(self) -> ir.Value:
        """The dynamic extent's size as an i32, read at the top of the body
        from the first buffer that has it."""
        if self._extent is None:
            with ir.InsertionPoint.at_block_begin(self.block), self.kernel.location:
                size = read_extent(self.block.arguments)
                self._extent = ir.Operation.create("arith.index_cast", results=[self.i32],
                                                   operands=[size]).result
        return self._extent

    def _zero_i32(self) -> ir.Value:
        if self._zero is None:
            with ir.InsertionPoint.at_block_begin(self.block), self.kernel.location:
                self._zero = ir.Operation.create(
                    "arith.constant", results=[self.i32],
                    attributes={"value": ir.IntegerAttr.get(self.i32, 0)}).result
        return self._zero


def _held_padding(element: ir.Type, wanted: float) -> float:
    """`wanted` when a lane of `element` holds it, else 0: integers hold
    whole numbers in their range, i1 holds 0 and 1, floats hold anything."""
    if not isinstance(element, ir.IntegerType):
        return wanted
    if element.width == 1:
        return wanted if wanted in (0.0, 1.0) else 0.0
    bound = 2.0 ** (element.width - 1)
    if math.isfinite(wanted) and wanted == int(wanted) and -bound <= wanted < bound:
        return wanted
    return 0.0


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


# The ops that combine the partial results of a reduction.
_COMBINER_OPS = frozenset(f"kg.{name}" for name in COMBINE.values())


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
    if isinstance(combine, ir.Block) or combine.name not in _COMBINER_OPS:
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
    if name in ("kg.tile_load", "kg.tile_gather"):
        if "padding" not in owner.attributes:
            return None
        return ir.FloatAttr(owner.attributes["padding"]).value
    if name == "kg.tile_select":
        t, f = (_pad_value(owner.operands[i], axes) for i in (1, 2))
        return t if t is not None and t == f else None
    row = BY_OP_NAME.get(name)
    if row is not None and row.on_scalars is not None:
        operands = [_pad_value(o, axes) for o in owner.operands]
        if any(o is None for o in operands):
            return None
        attributes = node_attrs(owner) if row.attributes else {}
        try:
            result = row.on_scalars(*operands, **{a: attributes[a] for a in row.attributes})
        except (ValueError, ZeroDivisionError, OverflowError):
            return None
        return None if math.isnan(result) else float(result)
    return None
