"""Finding and reading kg.kernel ops and the tile programs inside them."""

from __future__ import annotations

from typing import Iterator

from mlir import ir

from kgc.tiling.constants import LOOP_AXIS_ATTRIBUTE


def ops_named(root: ir.Operation, name: str) -> list[ir.Operation]:
    """Every op called `name` inside `root`, in order, not looking inside
    the ones found."""
    found = []

    def visit(inner):
        if inner.name == name:
            found.append(inner)
            return ir.WalkResult.SKIP
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found


def kernels_in(op: ir.Operation) -> list[ir.Operation]:
    """Every kg.kernel inside `op`, in order."""
    return ops_named(op, "kg.kernel")


def is_tiled(kernel: ir.Operation) -> bool:
    block = kernel.regions[0].blocks[0]
    return len(block.arguments) > 0 and all(
        isinstance(arg.type, ir.MemRefType) for arg in block.arguments)


def kernel_name(kernel: ir.Operation) -> str:
    return ir.StringAttr(kernel.attributes["sym_name"]).value


# kg.kernel's dictionary of knobs (kgc.tiling.config): the dialect checks
# its form, the kernel's schedule its contents.
CONFIG_ATTRIBUTE = "config"


def config_attribute(kernel: ir.Operation):
    """The kernel's `config` attribute (an ir.DictAttr), or None."""
    if CONFIG_ATTRIBUTE not in kernel.attributes:
        return None
    return ir.DictAttr(kernel.attributes[CONFIG_ATTRIBUTE])


def knob(kernel: ir.Operation, name: str) -> int | bool | None:
    """The value of knob `name` in the kernel's config, None when unset."""
    config = config_attribute(kernel)
    if config is None or name not in config:
        return None
    value = config[name]
    if isinstance(value, ir.BoolAttr):
        return ir.BoolAttr(value).value
    return ir.IntegerAttr(value).value


def int_array(kernel: ir.Operation, name: str) -> list[int] | None:
    if name not in kernel.attributes:
        return None
    return list(ir.DenseI64ArrayAttr(kernel.attributes[name]))


def set_int_array(kernel: ir.Operation, name: str, values) -> None:
    kernel.attributes[name] = ir.DenseI64ArrayAttr.get(list(values))


def walk_ops(region_holder) -> Iterator[ir.Operation]:
    """Every op nested in `region_holder`, parents before children."""
    for region in region_holder.regions:
        for block in region.blocks:
            for op in block.operations:
                yield op.operation
                yield from walk_ops(op.operation)


def tensor_values(kernel: ir.Operation) -> Iterator[ir.Value]:
    """Every tensor-typed value defined in a kernel body: op results and the
    arguments of nested blocks (loop-carried tiles)."""
    for op in walk_ops(kernel):
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if isinstance(arg.type, ir.RankedTensorType):
                        yield arg
        for result in op.results:
            if isinstance(result.type, ir.RankedTensorType):
                yield result


def loop_axis(op: ir.Operation) -> int | None:
    """The iteration axis an scf.for of a tile program walks."""
    if op.name != "scf.for" or LOOP_AXIS_ATTRIBUTE not in op.attributes:
        return None
    return ir.IntegerAttr(op.attributes[LOOP_AXIS_ATTRIBUTE]).value


def dot_dims(op: ir.Operation) -> tuple[int, int, int]:
    """The axes (M, K, N) of a kg.tile_dot: its `dims`, or the last three."""
    if "dims" in op.attributes:
        m, k, n = ir.DenseI64ArrayAttr(op.attributes["dims"])
        return m, k, n
    rank = len(ir.RankedTensorType(op.operands[0].type).shape)
    return rank - 3, rank - 2, rank - 1


def enclosing_kernel(op: ir.Operation) -> ir.Operation | None:
    """The kg.kernel `op` is inside, None for an op of the graph itself."""
    parent = op.parent
    while parent is not None and parent.name != "kg.kernel":
        parent = parent.parent
    return parent


def enclosing_loop_for_axis(op: ir.Operation, axis: int) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "kg.kernel":
        if loop_axis(parent) == axis:
            return parent
        parent = parent.parent
    return None


def replace_op(old: ir.Operation, name: str, operands, attributes: dict,
               result_types=None) -> ir.Operation:
    """Creates `name` before `old` with the given operands and attributes,
    moves `old`'s uses to it and erases `old`."""
    types = [r.type for r in old.results] if result_types is None else result_types
    with ir.InsertionPoint(old), old.location:
        new = ir.Operation.create(name, results=types, operands=list(operands),
                                  attributes=attributes)
    for before, after in zip(old.results, new.results):
        before.replace_all_uses_with(after)
    old.erase()
    return new


def replace_with(old: ir.Operation, new: ir.Operation, keep_attributes: bool = False) -> None:
    """Moves `old`'s uses to `new` (built before it) and erases `old`. With
    `keep_attributes` (`new` is a variant of the same op), `new` also gets
    the attributes of `old` that it lacks."""
    if keep_attributes:
        for name in list(old.attributes):
            if name not in new.attributes:
                new.attributes[name] = old.attributes[name]
    for before, after in zip(old.results, new.results):
        before.replace_all_uses_with(after)
    old.erase()


def resize_axes(kernel: ir.Operation, old_sizes, new_sizes) -> None:
    """Every tensor of the kernel whose axis d has size old_sizes[d] gets
    size new_sizes[d] there. Tiles hold one axis per iteration axis, of the
    tile size or of 1, so this grows exactly the tiles that span axis d."""
    n = len(old_sizes)
    for value in list(tensor_values(kernel)):
        type_ = ir.RankedTensorType(value.type)
        shape = list(type_.shape)
        if len(shape) != n:
            raise ValueError(f"tile {type_} does not have one axis per iteration axis ({n})")
        new = [new_sizes[d] if shape[d] == old_sizes[d] else shape[d] for d in range(n)]
        if new != shape:
            value.set_type(ir.RankedTensorType.get(new, type_.element_type))


def view_layout(view: ir.Operation) -> tuple:
    """(offset, strides) of a tile program's view (`memref.reinterpret_cast`),
    in elements: each a number, or the operand (an index value) that gives
    it where it depends on the dynamic extent's size."""
    marker = ir.ShapedType.get_dynamic_stride_or_offset()
    segments = list(ir.DenseI32ArrayAttr(view.attributes["operandSegmentSizes"]))
    operands = list(view.operands)[1:]
    offsets = iter(operands[:segments[1]])
    strides = iter(operands[segments[1] + segments[2]:])

    def resolved(static, dynamic):
        return [next(dynamic) if value == marker else value for value in static]

    offset, = resolved(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]), offsets)
    return offset, tuple(resolved(ir.DenseI64ArrayAttr(view.attributes["static_strides"]),
                                  strides))
