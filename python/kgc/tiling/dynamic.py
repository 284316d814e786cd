"""What a tiled kernel does with a dynamic extent (`?`).

A kernel's tensors may have one dynamic extent, the size each call gives
(all the `?` of a function are that size). kg-fuse and the schedules plan
such a kernel as if the extent were `EXTENT_HINT`; this module then says
whether the plan holds at every size, and on which iteration axis the size
lives (`dynamic_axis`). A plan holds when:

* its schedule takes dynamic extents (`Schedule.dynamic_extents`), after
  planning again with the config the schedule asks for
  (`Schedule.dynamic_config`: a matmul's tiles in plain order, no split-K,
  no TMA, no persistent programs);
* every buffer with a `?` has it as its outermost dimension (behind
  dimensions of extent 1 only), read along one
  iteration axis with coefficient 1 over its whole window (so no stride and
  no offset depends on the size), and no other buffer is read along that
  axis;
* that axis is walked by the grid, outermost among the program axes (a
  program id splits into tiles by static counts), one tile of a power of
  two per program, never looped over or reduced.

The tile program then reads the size from a buffer (`memref.dim`): views
take it as their size along the axis, kg-pad-mask bounds every access along
it by it, and the grid is `ceil(size / tile) * programs` (the kernel's
`dynamic_grid` attribute, [tile, programs per tile]), evaluated at launch.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.tiling.graph_model import EXTENT_HINT, Node
from kgc.tiling.iteration import KernelPlan, Unplannable

__all__ = ["DYNAMIC_AXIS_ATTRIBUTE", "DYNAMIC_GRID_ATTRIBUTE", "at_size", "call_extent",
           "dynamic_axis", "dynamic_grid", "extent_sizes", "has_dynamic_extent",
           "with_dynamic_axis"]

# The iteration axis a tiled kernel's dynamic extent lives on.
DYNAMIC_AXIS_ATTRIBUTE = "dynamic_axis"
# [tile along the dynamic axis, programs per tile]: the grid at launch is
# ceil(size / tile) * programs along grid x.
DYNAMIC_GRID_ATTRIBUTE = "dynamic_grid"


def _dynamic_dims(type_: ir.Type) -> list[int]:
    shaped = ir.ShapedType(type_)
    return [d for d, size in enumerate(shaped.shape) if ir.ShapedType.is_dynamic_size(size)]


def extent_sizes(shapes, tensors) -> dict[int, int]:
    """{size: the first argument giving it} that `tensors` give the dynamic
    extent of `shapes` (one per tensor, None where it has the `?`); a
    tensor of another rank than its shape gives none."""
    sizes: dict[int, int] = {}
    for index, (shape, tensor) in enumerate(zip(shapes, tensors)):
        given = getattr(tensor, "shape", None)
        if None not in shape or given is None or len(given) != len(shape):
            continue
        for dim, size in enumerate(shape):
            if size is None:
                sizes.setdefault(int(given[dim]), index)
    return sizes


def call_extent(what: str, types, tensors) -> int | None:
    """The size a call's `tensors` give the dynamic extent of `types` (the
    MLIR types they are passed as; every `?` is one size), None where no
    type has one. Raises KgcError, naming `what`, where they give several."""
    shapes = [tuple(None if ir.ShapedType.is_dynamic_size(d) else d
                    for d in ir.ShapedType(type_).shape) for type_ in types]
    sizes = extent_sizes(shapes, tensors)
    if len(sizes) > 1:
        raise KgcError(f"{what}: the arguments give its dynamic extent (`?`) the sizes "
                       f"{sorted(sizes)}; all the `?` of a function are one size")
    return next(iter(sizes), None)


def at_size(shape, extent: int | None) -> tuple[int, ...]:
    """`shape` with its dynamic extents at `extent`."""
    return tuple(extent if ir.ShapedType.is_dynamic_size(d) else d for d in shape)


def has_dynamic_extent(values) -> bool:
    """Whether any of the MLIR `values` has a dynamic extent."""
    return any(_dynamic_dims(v.type) for v in values)


def dynamic_axis(plan: KernelPlan, buffers: list[tuple[Node, ir.Type]]) -> int:
    """The iteration axis of `plan` that the dynamic extent of its buffers
    (each input or output node with its tensor type) lives on. Raises
    Unplannable, naming the rule, where the plan does not hold at every
    size."""
    axis = None
    for node, type_ in buffers:
        dims = _dynamic_dims(type_)
        if not dims:
            continue
        dim = _outermost_dynamic_dim(type_)
        index_map = plan.maps.get(node)
        read = None if index_map is None else index_map.axis_of_row(dim)
        if read is None or index_map.offsets[dim] != 0 or \
                index_map.windows[read] != (0, plan.extents[read]):
            raise Unplannable(f"a buffer of type {type_} is not read along one iteration axis "
                              "over its whole dynamic extent")
        if axis is not None and read != axis:
            raise Unplannable(f"buffers read the dynamic extent along iteration axes {axis} "
                              f"and {read}")
        axis = read
    if axis is None:
        raise Unplannable("no buffer has the dynamic extent")
    for node, type_ in buffers:
        index_map = plan.maps.get(node)
        if index_map is None:
            continue
        dims = _dynamic_dims(type_)
        rows = [row for d, row in enumerate(index_map.rows) if d not in dims]
        if any(row[axis] for row in rows):
            raise Unplannable(f"a buffer of type {type_} is read along the dynamic axis in a "
                              "dimension of static extent")
    if axis in plan.loop_axes or any(axis in axes for axes in plan.reduce_axes.values()):
        raise Unplannable(f"iteration axis {axis}, of the dynamic extent, is looped over or "
                          "reduced; only a program axis may be dynamic")
    if plan.grid_axes or plan.persistent_programs is not None:
        raise Unplannable("the dynamic extent needs one grid axis of one tile per program")
    tile = plan.tile[axis]
    if tile & (tile - 1) or tile > EXTENT_HINT:
        raise Unplannable(f"the tile along the dynamic axis is {tile}, not a power of two up "
                          f"to {EXTENT_HINT}")
    return axis


def _outermost_dynamic_dim(type_: ir.Type) -> int:
    """The one dim of `type_` that is `?`, where only dims of extent 1 lie
    outside it (they add nothing to any address: a (1, ?, 4096) buffer is
    laid out as a (?, 4096) one). Raises Unplannable otherwise."""
    dims = _dynamic_dims(type_)
    shape = ir.ShapedType(type_).shape
    if len(dims) != 1 or any(shape[d] != 1 for d in range(dims[0])):
        raise Unplannable(f"a buffer of type {type_} has its dynamic extent in dimension "
                          f"{dims[-1]}; kg-tile takes it as the outermost dimension only "
                          "(behind dimensions of extent 1)")
    return dims[0]


def with_dynamic_axis(plan: KernelPlan, axis: int) -> KernelPlan:
    """`plan` with `axis` the outermost program axis (one tile of it may
    have covered the whole hint; a program axis of one tile may lie outside
    it, since it adds nothing to the program's id)."""
    rest = tuple(a for a in plan.program_axes if a != axis)
    outside = [a for a in rest if a < axis and plan.tiles_along(a) != 1]
    if outside:
        raise Unplannable(f"program axes {tuple(outside)} lie outside the dynamic axis {axis}")
    return dataclasses.replace(plan, program_axes=(axis,) + rest)


def dynamic_grid(plan: KernelPlan, axis: int) -> list[int]:
    """[tile along `axis`, programs per tile of it] for `DYNAMIC_GRID_ATTRIBUTE`."""
    programs = 1
    for other in plan.program_axes:
        if other != axis:
            programs *= plan.tiles_along(other)
    return [plan.tile[axis], programs]
