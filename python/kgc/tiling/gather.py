"""Kernels that gather: an embedding lookup and what its rows flow into.

`kg.gather` reads its table at the positions its indices hold, which no
affine map of the iteration gives, so the generic generator has no tile
form for it. The two schedules here plan a kernel with a gather as the
built-in pointwise and reduction schedules do (`kgc.tiling.plan`): the
gather's result is read at an affine map like any value, and so are its
indices (at the row of the gathered dimension). `GatherGenerator` writes
their programs with the generic generator and one more rule: a gather read
at a map whose gathered dimension is one iteration axis becomes a tile of
its indices and a `kg.tile_gather` of the table, which reads along that
axis at the indices and along the others as a load would. Lanes past the end
of the iteration read position 0, whatever their indices hold.

* gather: the gather and elementwise ops and views around it (an embedding
  scaled by a constant, cast to the model's type);
* gather_reduction: the gather and a reduction of what it reads (the
  embedding and the RMSNorm of the first layer in one kernel, the rows
  never written to memory between them).

The table must be a kernel input (its rows are read from memory), and the
indices must vary along an iteration axis that the table's other
dimensions are not read along (an embedding of a batch of sequences read
as [batch, sequence, hidden] carries the table's rows on the sequence
axis, its positions varying along batch and sequence). Both schedules
are registered in `kgc.tiling.registry` before the built-in ones.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.tiling.constants import INT32_MAX, INT32_MIN
from kgc.tiling.generate import Generator, Tile
from kgc.tiling.graph_model import INDIRECT_OPS, Node
from kgc.tiling.index_maps import BufferView, IndexMap
from kgc.tiling.iteration import Unplannable, gather_indices_map, leaf_view
from kgc.tiling.plan import PointwiseSchedule, ReductionSchedule

__all__ = ["GatherGenerator", "GatherReductionSchedule", "GatherSchedule"]


def _gathers(order: Sequence[Node]) -> bool:
    return any(node.op in INDIRECT_OPS for node in order)


def _has(order: Sequence[Node], op: str) -> bool:
    return any(node.op == op for node in order)


class GatherSchedule(PointwiseSchedule):
    """A gather and the pointwise ops around it, tiled as pointwise kernels
    are."""

    kind = "gather"

    def match(self, order):
        return _gathers(order) and not _has(order, "reduce") and not _has(order, "matmul")

    def generate(self, plan, builder):
        GatherGenerator(plan, builder).run()


class GatherReductionSchedule(ReductionSchedule):
    """A gather and reductions of what it reads, tiled as reduction kernels
    are."""

    kind = "gather_reduction"

    def match(self, order):
        return _gathers(order) and _has(order, "reduce") and not _has(order, "matmul")

    def generate(self, plan, builder):
        GatherGenerator(plan, builder).run()


class GatherGenerator(Generator):
    """The generic generator, with kg.gather read through kg.tile_gather."""

    def _emit(self, node: Node, index_map: IndexMap, axes: frozenset) -> Tile:
        if node.op != "gather":
            return super()._emit(node, index_map, axes)
        table, indices = node.operands
        dim = node.attrs["dim"]
        if not table.is_input:
            raise Unplannable(f"the table {table.shape} of kg.gather is computed in the kernel; "
                              "a gather reads its rows from memory, a kernel input")
        positions = self.gen(indices, gather_indices_map(node, index_map))
        # The table as a view over the iteration: its other dimensions where
        # the map reads them; its gathered dimension on one axis that they
        # do not read (the innermost of those the indices vary along),
        # spanning the table there, at the positions the indices give.
        rows = tuple((0,) * self.n if d == dim else row for d, row in enumerate(index_map.rows))
        offsets_ = tuple(0 if d == dim else o for d, o in enumerate(index_map.offsets))
        contiguous = BufferView.contiguous(table.shape)
        strides, offset = contiguous.address_map(
            dataclasses.replace(index_map, rows=rows, offsets=offsets_))
        strides = list(strides)
        free = [a for a, c in enumerate(index_map.rows[dim]) if c != 0 and strides[a] == 0]
        if not free:
            raise Unplannable("kg.gather is read where its gathered dimension has no iteration "
                              "axis of its own")
        axis = free[-1]
        strides[axis] = contiguous.strides[dim]
        sizes, offsets = [], []
        for a in range(self.n):
            if a == axis:
                sizes.append(table.shape[dim])
                offsets.append(self.b.const(0))
            elif a not in axes:
                sizes.append(1)
                offsets.append(self.b.const(0))
            else:
                lo, hi = index_map.windows[a]
                offset += strides[a] * lo
                sizes.append(hi - lo)
                offsets.append(self.offsets[a] if lo == 0 else
                               self.b.scalar("sub", self.offsets[a], self.b.const(lo)))
        if offset < 0:
            raise Unplannable("a view starts before its buffer")
        view = BufferView(tuple(sizes), tuple(strides), offset)
        if leaf_view(indices) is not None:
            # Read from memory: kg-pad-mask gives the lanes past the end 0.
            inside = positions.value
        else:
            inside = self._inside(positions)
        value = self.b.gather(table.input_index, table.element, view, offsets, inside, axis,
                              self._shape(axes))
        return Tile(value, axes, table.element)

    def _inside(self, positions: Tile):
        """Computed positions, 0 in the lanes past the end of the iteration:
        a partial or padded tile's lanes there hold what the indices were
        computed to be (an iota runs on past the end), which kg-pad-mask
        cannot mask, not knowing the gather's iteration; a position of 0
        reads inside the table."""
        tile, extents = self.plan.tile, self.plan.extents
        ragged = frozenset(a for a in positions.axes
                           if extents[a] % tile[a] or tile[a] & (tile[a] - 1))
        if not ragged:
            return positions.value
        lower, upper = [INT32_MIN] * self.n, [INT32_MAX] * self.n
        for a in ragged:
            lower[a], upper[a] = 0, extents[a]
        mask = self.b.mask([self.offsets[a] if a in ragged else self.b.const(0)
                            for a in range(self.n)], lower, upper, self._shape(ragged))
        zero = self.b.constant(0.0, positions.element, self._shape(frozenset()))
        return self.b.select(mask, positions.value, zero, positions.element,
                             self._shape(positions.axes))
