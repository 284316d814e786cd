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
* every buffer with a `?` has it in one dimension, read along one
  iteration axis with coefficient 1 over its whole window, and no other
  buffer is read along that axis in a dimension of static extent;
* that axis is walked by the grid, outermost among the program axes (a
  program id splits into tiles by static counts), one tile of a power of
  two per program, never looped over or reduced.

A schedule whose program bounds a loop by the size itself says so
(`Schedule.dynamic_loop_axis`: attention over a growing cache's keys, a
reduction along the extent as its innermost reduced axis) and
takes the extent along that loop instead: the grid is then static
(`dynamic_grid` [0, 0]), and kg-pad-mask guards the reductions and dots
along the loop by the size.

The tile program then reads the size from a buffer (`memref.dim`): views
take it as their size along the axis, kg-pad-mask bounds every access along
it by it, and the grid is `ceil(size / tile) * programs` (the kernel's
`dynamic_grid` attribute, [tile, programs per tile]), evaluated at launch.
Where the `?` lies inside other dimensions of a buffer (the sequence of a
(1, heads, ?, head_dim) tensor), their strides depend on the size: the
planner's shapes mark the extent (`DynamicExtent`), the views' strides and
offsets keep it (`SizeAffine`), and the tile program computes them from the
size.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.tiling.graph_model import EXTENT_HINT, Node, topological
from kgc.tiling.index_maps import DynamicExtent
from kgc.tiling.iteration import KernelPlan, Unplannable, leaf_view

__all__ = ["DYNAMIC_AXIS_ATTRIBUTE", "DYNAMIC_GRID_ATTRIBUTE", "NotAtEverySize", "at_size",
           "call_extent", "dynamic_axis", "dynamic_grid", "extent_sizes", "grid_at",
           "has_dynamic_extent", "is_over_dynamic_extent", "kernel_dynamic_axis", "marked_dims",
           "read_extent", "reduced_dynamic_axis", "with_dynamic_axis"]

# The iteration axis a tiled kernel's dynamic extent lives on.
DYNAMIC_AXIS_ATTRIBUTE = "dynamic_axis"
# [tile along the dynamic axis, programs per tile]: the grid at launch is
# ceil(size / tile) * programs along grid x; [0, 0] where the programs loop
# over the extent (attention's keys), the grid being the static one.
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


def kernel_dynamic_axis(kernel: ir.Operation) -> int | None:
    """The iteration axis of a tiled kernel that runs over its dynamic
    extent (kg-tile's `DYNAMIC_AXIS_ATTRIBUTE`), None where it has none."""
    if DYNAMIC_AXIS_ATTRIBUTE not in kernel.attributes:
        return None
    return ir.IntegerAttr(kernel.attributes[DYNAMIC_AXIS_ATTRIBUTE]).value


def read_extent(buffers) -> ir.Value:
    """The dynamic extent's size (an index), read by a `memref.dim` of the
    first of the kernel's `buffers` (memrefs) that has it, written at the
    current insertion point."""
    buffer, dim = next((b, d) for b in buffers
                       for d, size in enumerate(ir.MemRefType(b.type).shape)
                       if ir.ShapedType.is_dynamic_size(size))
    index = ir.IndexType.get()
    position = ir.Operation.create("arith.constant", results=[index],
                                   attributes={"value": ir.IntegerAttr.get(index, dim)})
    return ir.Operation.create("memref.dim", results=[index],
                               operands=[buffer, position.result]).result


def has_dynamic_extent(values) -> bool:
    """Whether any of the MLIR `values` has a dynamic extent."""
    return any(_dynamic_dims(v.type) for v in values)


class NotAtEverySize(Unplannable):
    """A plan of a kernel over the dynamic extent holds at the hint's size
    only; the message names the rule."""


def _readers(plan: KernelPlan, node: Node) -> list[tuple[Node, object]]:
    """(value, its map) through which the kernel reads or writes buffer
    `node`: the node itself where it has a map, else the reshapes of it
    that merge dims (a (1, ?, 8, 64) input read as (1, ?, 512) by a
    product), whose maps address the buffer through its view."""
    if node in plan.maps:
        return [(node, plan.maps[node])]
    return [(reader, index_map) for reader, index_map in plan.maps.items()
            if reader.op == "reshape" and index_map is not None
            and (leaf_view(reader) or (None,))[0] is node]


def marked_dims(node: Node) -> list[int]:
    """The dims of `node`'s shape that are the dynamic extent."""
    return [d for d, size in enumerate(node.shape) if isinstance(size, DynamicExtent)]


def is_over_dynamic_extent(outputs) -> bool:
    """Whether the group computing `outputs` has the dynamic extent in any
    of its values' shapes."""
    return any(marked_dims(node) for node in topological(list(outputs)))


def _type_text(node: Node) -> str:
    dims = "x".join("?" if isinstance(d, DynamicExtent) else str(d) for d in node.shape)
    return f"tensor<{dims}x{node.element}>" if dims else f"tensor<{node.element}>"


def dynamic_axis(plan: KernelPlan, buffers: list[Node]) -> int:
    """The iteration axis of `plan` that the dynamic extent of its buffers
    (its input and output nodes) lives on. Raises NotAtEverySize, naming the
    rule, where the plan does not hold at every size."""
    axis = None
    for node in buffers:
        dims = marked_dims(node)
        if not dims:
            continue
        if len(dims) > 1:
            raise NotAtEverySize(f"a buffer of type {_type_text(node)} has the dynamic extent "
                                 f"in dimensions {dims}; kg-tile takes it in one dimension of "
                                 "each buffer")
        for reader, index_map in _readers(plan, node) or [(node, None)]:
            dims = marked_dims(reader)
            read = None if index_map is None or len(dims) != 1 else \
                index_map.axis_of_row(dims[0])
            if read is None or index_map.offsets[dims[0]] != 0 or \
                    index_map.windows[read] != (0, plan.extents[read]):
                raise NotAtEverySize(f"a buffer of type {_type_text(node)} is not read along "
                                     "one iteration axis over its whole dynamic extent")
            if axis is not None and read != axis:
                raise NotAtEverySize(f"buffers read the dynamic extent along iteration axes "
                                     f"{axis} and {read}")
            axis = read
    if axis is None:
        raise NotAtEverySize("no buffer has the dynamic extent")
    for node in buffers:
        for reader, index_map in _readers(plan, node):
            dims = marked_dims(reader)
            rows = [row for d, row in enumerate(index_map.rows) if d not in dims]
            if any(row[axis] for row in rows):
                raise NotAtEverySize(f"a buffer of type {_type_text(node)} is read along the "
                                     "dynamic axis in a dimension of static extent")
    if axis in plan.loop_axes or any(axis in axes for axes in plan.reduce_axes.values()):
        raise NotAtEverySize(f"iteration axis {axis}, of the dynamic extent, is looped over "
                             "or reduced; only a program axis may be dynamic")
    if plan.grid_axes or plan.persistent_programs is not None:
        raise NotAtEverySize("the dynamic extent needs one grid axis of one tile per program")
    tile = plan.tile[axis]
    if tile & (tile - 1) or tile > EXTENT_HINT:
        raise NotAtEverySize(f"the tile along the dynamic axis is {tile}, not a power of two "
                             f"up to {EXTENT_HINT}")
    return axis


def reduced_dynamic_axis(plan: KernelPlan) -> int | None:
    """The iteration axis along which `plan`'s buffers hold the dynamic
    extent, where a reduction or a matmul of the plan reduces that axis;
    None where it is kept (a program axis: `dynamic_axis` checks the rest)
    or where no buffer has it."""
    reduced = {axis for axes in plan.reduce_axes.values() for axis in axes}
    axes = set()
    for node, index_map in plan.maps.items():
        if index_map is None or not node.is_input and node not in plan.outputs:
            continue
        axes.update(index_map.axis_of_row(dim) for dim in marked_dims(node))
    if not axes & reduced:
        return None
    if len(axes) > 1:
        raise NotAtEverySize(f"buffers read the dynamic extent along iteration axes "
                             f"{' and '.join(map(str, sorted(axes, key=str)))}")
    return next(iter(axes))


def with_dynamic_axis(plan: KernelPlan, axis: int) -> KernelPlan:
    """`plan` with `axis` its dynamic axis and the outermost program axis: a
    program's id divides by the static counts of the other program axes'
    tiles, and what is left is its tile along the dynamic axis."""
    rest = tuple(a for a in plan.program_axes if a != axis)
    return dataclasses.replace(plan, program_axes=(axis,) + rest, dynamic_axis=axis)


def grid_at(grid, rule, extent: int) -> tuple[int, ...]:
    """The grid of a launch of a kernel whose static `grid` and
    `DYNAMIC_GRID_ATTRIBUTE` `rule` ([tile, programs per tile]) are given,
    where the dynamic extent is `extent`."""
    tile, programs = rule
    if tile == 0:
        return tuple(grid)
    return (-(-extent // tile) * programs, *tuple(grid)[1:])


def dynamic_grid(plan: KernelPlan, axis: int) -> list[int]:
    """[tile along `axis`, programs per tile of it] for `DYNAMIC_GRID_ATTRIBUTE`;
    [0, 0] where every program loops over the extent along `axis` (a
    schedule's `dynamic_loop_axis`) and the grid is static."""
    if axis not in plan.program_axes:
        return [0, 0]
    programs = 1
    for other in plan.program_axes:
        if other != axis:
            programs *= plan.tiles_along(other)
    return [plan.tile[axis], programs]
