"""convert-kg-to-ttir: lower each tiled kernel to a Triton `tt.func`.

Argument: `convert-kg-to-ttir`. No options.

Rewrite rules:

    kg.kernel @k(%x...) {library_call = C}  (a library kernel: a bare matmul
                                        that the GPU's BLAS computes,
                                        kgc.tiling.library)
                                        =>  module @k attributes {kg.library_call = C} {}
                                            (no tt.func: Triton compiles nothing)
                                            and in the graph:
                                            kg.launch @k(%x...) grid [1, 1, 1]
                                            num_warps 1 num_stages 1 {library_call = C}
    kg.kernel @k(%x...) {tile program}  =>  module @k { tt.func public @k(
                                               %x: !tt.ptr<T> {tt.divisibility = 16},
                                               ..., %y: !tt.ptr<T> ...,
                                               %s: i32 ... (one per `scalars`)) }
                                            (a sibling of the graph function)
                                            and in the graph:
                                            kg.launch @k(%x...) grid [...] ...
                                            {scalars = array<i64: ...>}
    kg.scalar_arg i                     =>  the tt.func's i-th i32 argument
    kg.program_id 0, 1, 2               =>  tt.get_program_id x, y, z
    scf.for {kg.axis, tt.*}             =>  scf.for {tt.*} (Triton's loop attributes
                                            tt.num_stages, tt.flatten, tt.warp_specialize
                                            are kept)
    memref.reinterpret_cast             =>  (folded into the addresses; an offset or
                                            stride given as an operand, computed from
                                            the dynamic extent's size, is that i32)
    kg.tile_load %v[%o] mask %m padding p
                                        =>  tt.load (tt.addptr (tt.splat %base),
                                              sum of (%o_d + tt.make_range) * stride_d),
                                              %m, splat(p)
    kg.tile_store                       =>  tt.store
    kg.tile_gather %v[%o] indices %i dim d mask %m padding p
                                        =>  tt.load as kg.tile_load, the term of
                                              dimension d being (%o_d + %i) * stride_d
                                              (%i truncated to i32, as every address is)
    kg.tile_load %v[%o] {tma} (mask %m padding 0)
                                        =>  tt.descriptor_load (tt.make_tensor_descriptor
                                              %base, view sizes, view strides at the
                                              function's entry)[%o], the bounds mask
                                              dropped (TMA fills lanes outside with 0);
                                              tt.trans when the view's contiguous
                                              axis is not the tile's last
    kg.tile_store {tma}                 =>  tt.descriptor_store likewise (TMA drops
                                              lanes outside the buffer)
    kg.tile_mask                        =>  arith.cmpi of ranges, arith.andi
    kg.reduce                           =>  tt.reduce per axis (arith combiner)
    kg.tile_dot                         =>  tt.dot (inputPrecision from precision;
                                            8-bit float products summed by the
                                            tensor cores over one k step of at
                                            most 128, then added into f32, or
                                            over the whole k loop under
                                            precision = fast_accum)
    kg elementwise ops                  =>  arith / math ops, libdevice through
                                            tt.extern_elementwise (tanh, erf, pow),
                                            as the op's row in kgc.op_table says
    kg.tile_select, kg.select/where     =>  arith.select
    kg.cmp(pred) %a, %b                 =>  arith.cmpf (floats: oeq une olt ole ogt oge)
                                            or arith.cmpi (integers: eq ne slt sle sgt
                                            sge; i1: eq ne ult ule ugt uge)
    kg.add/sub/mul/maximum/minimum on
      integers                          =>  arith.addi/subi/muli/maxsi/minsi
    kg.logical_and/or/xor/not           =>  arith.andi/ori/xori (not: xori with true)
    kg.cast(x) between element types    =>  arith.extf/truncf, tt.fp_to_fp (8-bit),
                                            arith.sitofp (int -> float), arith.fptosi
                                            (float -> int, toward zero), arith.uitofp
                                            (i1 -> float), arith.extui (i1 -> int),
                                            arith.cmpf une / arith.cmpi ne with 0
                                            (-> i1), arith.extsi/trunci (int -> int)
    kg.tile_range %o axis a             =>  tt.splat %o + tt.make_range
    i1 buffers                          =>  !tt.ptr<i1> arguments read and written as
                                            i8 (tt.bitcast of the pointer, arith.cmpi ne
                                            after a load, arith.extui before a store),
                                            as Triton stores torch.bool
    kg.broadcast_to, unit axes          =>  tt.expand_dims / tt.broadcast / tt.splat

Tiles of the kg program have one axis per iteration axis, many of size 1.
Triton values keep only the axes of size more than 1 (a tile of
[1, 64, 1] becomes tensor<64x...>, a tile of ones a scalar), as one would
write the kernel by hand; axes are re-inserted (expand_dims, broadcast) only
where values of different axes meet.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from mlir import ir

from kgc.dialects import kg
from kgc.element_types import element_bits
from kgc.op_table import BY_OP_NAME, ELEMENTWISE, ElementwiseOp
from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling import tma
from kgc.tiling.constants import INT32_MAX, INT32_MIN
from kgc.tiling.dynamic import DYNAMIC_AXIS_ATTRIBUTE, DYNAMIC_GRID_ATTRIBUTE
from kgc.tiling.index_maps import BufferView
from kgc.tiling.library import LIBRARY_CALL_ATTRIBUTE, MODULE_LIBRARY_CALL_ATTRIBUTE
from kgc.tiling.graph_model import reduce_kind
from kgc.tiling.kernel_ops import (dot_dims, int_array, is_tiled, kernel_name, kernels_in, knob,
                                   view_layout)

_DIVISIBILITY = 16
_COMBINERS = {"sum": "arith.addf", "max": "arith.maximumf", "min": "arith.minimumf"}
_FLOAT8 = ("f8E4M3FN", "f8E5M2")
# kg precision -> tt.dot inputPrecision (Triton's InputPrecision: tf32 0, ieee
# 2). fast_accum is about 8-bit dots, which Triton reads no inputPrecision
# for: they keep the ieee that 8-bit dots without a precision have.
_INPUT_PRECISION = {kg.Precision.ieee: 2, kg.Precision.tf32: 0, kg.Precision.fast_accum: 2}


@register_pass
class ConvertKgToTTIR(Pass):
    argument = "convert-kg-to-ttir"
    summary = "Lower tiled, padded kernels to Triton IR, one tt.func per kernel"
    creates_unregistered_ops = True


    def run(self, op: ir.Operation) -> None:
        for kernel in kernels_in(op):
            if not is_tiled(kernel):
                raise PassFailure(f"kernel @{kernel_name(kernel)} is not tiled; run kg-tile, "
                                  "kg-legalize-dot and kg-pad-mask first", kernel.location)
            _lower_kernel(kernel, op)


def _module_body(top: ir.Operation) -> ir.Block:
    if top.name != "builtin.module":
        raise PassFailure("convert-kg-to-ttir runs on a builtin.module", top.location)
    return top.regions[0].blocks[0]


def _lower_library_kernel(kernel: ir.Operation, top: ir.Operation) -> None:
    """A library kernel: an empty kernel module that names its call, and a
    launch of it that carries the call for the runtime."""
    name = kernel_name(kernel)
    call = kernel.attributes[LIBRARY_CALL_ATTRIBUTE]
    with kernel.location:
        with ir.InsertionPoint(_module_body(top)):
            module = ir.Operation.create("builtin.module", regions=1, attributes={
                "sym_name": ir.StringAttr.get(name), MODULE_LIBRARY_CALL_ATTRIBUTE: call})
        module.regions[0].blocks.append()
        i64 = ir.IntegerType.get_signless(64)
        with ir.InsertionPoint(kernel):
            launch = ir.Operation.create(
                "kg.launch", results=[r.type for r in kernel.results],
                operands=list(kernel.operands), attributes={
                    "callee": ir.FlatSymbolRefAttr.get(name),
                    "grid": ir.DenseI64ArrayAttr.get([1, 1, 1]),
                    "num_warps": ir.IntegerAttr.get(i64, 1),
                    "num_stages": ir.IntegerAttr.get(i64, 1),
                    LIBRARY_CALL_ATTRIBUTE: call})
    for old, new in zip(kernel.results, launch.results):
        old.replace_all_uses_with(new)
    kernel.erase()


def _lower_kernel(kernel: ir.Operation, top: ir.Operation) -> None:
    name = kernel_name(kernel)
    if LIBRARY_CALL_ATTRIBUTE in kernel.attributes:
        _lower_library_kernel(kernel, top)
        return
    grid = int_array(kernel, "grid")
    if "padded" not in kernel.attributes:
        raise PassFailure(f"kernel @{name} is not padded; run kg-pad-mask first", kernel.location)
    warps, stages = knob(kernel, "num_warps"), knob(kernel, "num_stages")
    if warps is None or stages is None:
        raise PassFailure(f"kernel @{name}'s config sets no num_warps or no num_stages, which "
                          "its launch needs; kg-tile writes both", kernel.location)
    body = kernel.regions[0].blocks[0]
    pointer_types = [ir.Type.parse(f"!tt.ptr<{ir.MemRefType(a.type).element_type}>")
                     for a in body.arguments]
    i32 = ir.IntegerType.get_signless(32)
    location = kernel.location
    with location:
        scalars = int_array(kernel, "scalars") or []
        # A dynamic extent (kgc.tiling.dynamic) is the call's size, passed
        # as the last i32: every `memref.dim` of the tile program reads it.
        dynamic = DYNAMIC_AXIS_ATTRIBUTE in kernel.attributes
        argument_types = pointer_types + [i32] * (len(scalars) + dynamic)
        function_type = ir.FunctionType.get(argument_types, [])
        divisibility = ir.DictAttr.get({"tt.divisibility": ir.IntegerAttr.get(i32, _DIVISIBILITY)})
        with ir.InsertionPoint(_module_body(top)):
            module = ir.Operation.create("builtin.module", regions=1,
                                         attributes={"sym_name": ir.StringAttr.get(name)})
        module.regions[0].blocks.append()
        with ir.InsertionPoint(module.regions[0].blocks[0]):
            function = ir.Operation.create("tt.func", regions=1, attributes={
                "sym_name": ir.StringAttr.get(name),
                "sym_visibility": ir.StringAttr.get("public"),
                "function_type": ir.TypeAttr.get(function_type),
                "arg_attrs": ir.ArrayAttr.get([divisibility] * len(pointer_types)
                                              + [ir.DictAttr.get({})] * (len(scalars) + dynamic)),
                "noinline": ir.BoolAttr.get(False),
            })
        entry = function.regions[0].blocks.append(*argument_types)
        lowering = _Lowering({arg: entry.arguments[i] for i, arg in enumerate(body.arguments)},
                             list(entry.arguments)[len(pointer_types):][:len(scalars)],
                             entry.arguments[len(argument_types) - 1] if dynamic else None)
        lowering.entry = entry
        with ir.InsertionPoint(entry):
            lowering.block(body)
            ir.Operation.create("tt.return")
        with ir.InsertionPoint(kernel):
            i64 = ir.IntegerType.get_signless(64)
            launch = ir.Operation.create(
                "kg.launch", results=[r.type for r in kernel.results], operands=list(kernel.operands),
                attributes={
                    "callee": ir.FlatSymbolRefAttr.get(name),
                    "grid": ir.DenseI64ArrayAttr.get(grid),
                    "num_warps": ir.IntegerAttr.get(i64, warps),
                    "num_stages": ir.IntegerAttr.get(i64, stages),
                    **({"scalars": ir.DenseI64ArrayAttr.get(scalars)} if scalars else {}),
                    # The grid along the dynamic extent, ceil(size / tile) *
                    # programs, and the size passed after the scalars.
                    **({DYNAMIC_GRID_ATTRIBUTE: kernel.attributes[DYNAMIC_GRID_ATTRIBUTE]}
                       if dynamic else {}),
                })
    for old, new in zip(kernel.results, launch.results):
        old.replace_all_uses_with(new)
    kernel.erase()


@dataclasses.dataclass
class _Lowered:
    """A tile in Triton form: `value` keeps only the `axes` of the tile whose
    size is more than 1, in order (a scalar when there are none)."""

    value: ir.Value
    axes: tuple[int, ...]
    sizes: tuple[int, ...]  # sizes of the full tile, every axis
    element: ir.Type


@dataclasses.dataclass
class _View:
    """A buffer view's base pointer, offset and strides, in elements: each
    a number, or an i32 value where it depends on the dynamic extent."""
    base: ir.Value
    offset: int | ir.Value
    strides: tuple[int | ir.Value, ...]

    def has_static_layout(self) -> bool:
        return isinstance(self.offset, int) and all(isinstance(s, int) for s in self.strides)


def _is_one(stride: int | ir.Value) -> bool:
    return isinstance(stride, int) and stride == 1


def _is_broadcast(stride: int | ir.Value) -> bool:
    return isinstance(stride, int) and stride == 0


class _Lowering:
    def __init__(self, buffers: dict, scalars: list, extent: ir.Value | None = None):
        self.values: dict = {}  # kg value -> _Lowered or scalar ir.Value
        self.views: dict = {}
        self.buffers = buffers
        self.scalars = scalars  # the tt.func's i32 arguments
        self.extent = extent  # the i32 argument holding the dynamic extent's size
        self.i32 = ir.IntegerType.get_signless(32)
        self.i1 = ir.IntegerType.get_signless(1)
        self.entry: ir.Block | None = None  # the tt.func's entry block
        self.descriptors: dict = {}  # (view, block shape) -> tt.make_tensor_descriptor
        self._descriptor_point: ir.InsertionPoint | None = None  # where descriptors go

    # -- structure --------------------------------------------------------------

    def block(self, block: ir.Block) -> None:
        for op in block.operations:
            self.op(op.operation)

    def op(self, op: ir.Operation) -> None:
        name = op.name
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, op)
        elif name.startswith("arith.") and not _is_tensor(op):
            self._clone_scalar(op)
        elif name == "scf.for":
            self._for(op)
        elif name in ("kg.yield", "scf.yield"):
            pass
        else:
            raise PassFailure(f"convert-kg-to-ttir cannot lower {name} in a tile program",
                              op.location)

    def _clone_scalar(self, op: ir.Operation) -> None:
        attributes = {n: op.attributes[n] for n in op.attributes}
        new = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                  operands=[self.values[v] for v in op.operands],
                                  attributes=attributes)
        for old, result in zip(op.results, new.results):
            self.values[old] = result

    def _for(self, op: ir.Operation) -> None:
        lower, upper, step = (self.values[op.operands[i]] for i in range(3))
        inits = [self.values[v] for v in op.operands[3:]]
        types = [t.value.type for t in inits]
        # Triton's loop attributes (tt.num_stages, tt.flatten,
        # tt.warp_specialize) pass through; kg's own (kg.axis) stay behind.
        attributes = {name: op.attributes[name] for name in op.attributes if name.startswith("tt.")}
        with op.location:
            loop = ir.Operation.create("scf.for", results=types,
                                       operands=[lower, upper, step, *[t.value for t in inits]],
                                       attributes=attributes, regions=1)
        body = op.regions[0].blocks[0]
        new_body = loop.regions[0].blocks.append(self.i32, *types)
        self.values[body.arguments[0]] = new_body.arguments[0]
        for old, new, init in zip(body.arguments[1:], new_body.arguments[1:], inits):
            self.values[old] = dataclasses.replace(init, value=new)
        with ir.InsertionPoint(new_body):
            self.block(body)
            terminator = list(body.operations)[-1]
            yielded = [self._as(self.values[v], init) for v, init in zip(terminator.operands, inits)]
            ir.Operation.create("scf.yield", operands=yielded)
        for old, new, init in zip(op.results, loop.results, inits):
            self.values[old] = dataclasses.replace(init, value=new)

    # -- tiles: layout ------------------------------------------------------------

    def tile(self, value: ir.Value) -> _Lowered:
        return self.values[value]

    def _define(self, old: ir.Value, new: ir.Value, sizes: Sequence[int]) -> None:
        type_ = ir.RankedTensorType(old.type)
        axes = tuple(a for a, s in enumerate(sizes) if s > 1)
        self.values[old] = _Lowered(new, axes, tuple(sizes), type_.element_type)

    @staticmethod
    def _compact_type(sizes, axes, element) -> ir.Type:
        if not axes:
            return element
        return ir.RankedTensorType.get([sizes[a] for a in axes], element)

    def _as(self, tile: _Lowered, like: _Lowered) -> ir.Value:
        return self.expand(tile, like.axes, like.sizes)

    def expand(self, tile: _Lowered, axes: Sequence[int], sizes: Sequence[int]) -> ir.Value:
        """`tile` laid out over `axes` (a superset of its own), broadcast."""
        axes = tuple(axes)
        if tile.axes == axes:
            return tile.value
        target = self._compact_type(sizes, axes, tile.element)
        if not tile.axes:
            return ir.Operation.create("tt.splat", results=[target], operands=[tile.value]).result
        value = tile.value
        current = list(tile.axes)
        current_shape = [tile.sizes[a] for a in current]
        for position, axis in enumerate(axes):
            if axis not in current:
                current.insert(position, axis)
                current_shape.insert(position, 1)
                value = ir.Operation.create(
                    "tt.expand_dims",
                    results=[ir.RankedTensorType.get(current_shape, tile.element)],
                    operands=[value], attributes={"axis": ir.IntegerAttr.get(self.i32, position)}).result
        if tuple(current) != axes:
            raise PassFailure(f"tile axes {tile.axes} do not fit into {axes}")
        return ir.Operation.create("tt.broadcast", results=[target], operands=[value]).result

    def _constant(self, value: float, sizes, axes, element: ir.Type) -> ir.Value:
        type_ = self._compact_type(sizes, axes, element)
        if isinstance(element, ir.IntegerType):
            scalar = ir.IntegerAttr.get(element, int(value))
        else:
            scalar = ir.FloatAttr.get(element, value)
        attribute = scalar if not axes else ir.DenseElementsAttr.get_splat(type_, scalar)
        return ir.Operation.create("arith.constant", results=[type_],
                                   attributes={"value": attribute}).result

    def _scalar_i32(self, value: int) -> ir.Value:
        return ir.Operation.create("arith.constant", results=[self.i32],
                                   attributes={"value": ir.IntegerAttr.get(self.i32, value)}).result

    # -- program and memory -------------------------------------------------------

    def scalar_arg(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = self.scalars[ir.IntegerAttr(op.attributes["index"]).value]

    def buffer_size(self, op: ir.Operation) -> None:
        # memref.dim: a buffer's size along a dimension, which kg-tile only
        # takes along the dynamic extent (a static one is a constant).
        buffer = ir.MemRefType(op.operands[0].type)
        index = op.operands[1].owner.opview if hasattr(op.operands[1].owner, "opview") else None
        dims = [d for d, size in enumerate(buffer.shape) if ir.ShapedType.is_dynamic_size(size)]
        if self.extent is None or len(dims) != 1 or index is None or \
                ir.IntegerAttr(index.attributes["value"]).value != dims[0]:
            raise PassFailure("memref.dim of a tile program reads the size of the dynamic "
                              "extent (a buffer's `?`); this one reads another size",
                              op.location)
        self.values[op.results[0]] = self.extent

    def index_cast(self, op: ir.Operation) -> None:
        # Sizes, offsets and strides are i32 in a tile program's lowering
        # (the extent is an i32 argument): a cast between index and i32 is
        # the value itself.
        source = self.values[op.operands[0]]
        index = ir.IndexType.get()
        if source.type == op.results[0].type or \
                (source.type == self.i32 and op.results[0].type == index):
            self.values[op.results[0]] = source
        else:
            self._clone_scalar(op)

    def program_id(self, op: ir.Operation) -> None:
        self.values[op.results[0]] = ir.Operation.create(
            "tt.get_program_id", results=[self.i32],
            attributes={"axis": ir.IntegerAttr.get(self.i32, ir.IntegerAttr(op.attributes["axis"]).value)}
        ).result

    def view(self, op: ir.Operation) -> None:
        source = op.operands[0]
        base = self.buffers.get(source)
        if base is None:
            raise PassFailure("a view must be taken of a kernel buffer", op.location)
        # An offset or stride that depends on the dynamic extent is an
        # operand, computed in i32 from the size (kgc.tiling.mlir_builder).
        offset, strides = view_layout(op)
        offset, *strides = [v if isinstance(v, int) else self.values[v] for v in (offset, *strides)]
        self.views[op.results[0]] = _View(base, offset, tuple(strides))

    def _i32(self, value: int | ir.Value) -> ir.Value:
        return value if isinstance(value, ir.Value) else self._scalar_i32(value)

    def _stride_tile(self, stride: int | ir.Value, sizes, axes) -> ir.Value:
        """`stride` over a tile of `sizes` laid out on `axes`."""
        if isinstance(stride, int):
            return self._constant(stride, sizes, axes, self.i32)
        return ir.Operation.create("tt.splat", results=[self._compact_type(sizes, axes, self.i32)],
                                   operands=[stride]).result

    def _as_i32(self, tile: _Lowered) -> _Lowered:
        """An i32 or i64 tile as i32 (positions of a gather: addresses are
        i32, as kg-tile keeps every tensor below 2^31 elements)."""
        if tile.element == self.i32:
            return tile
        type_ = self._compact_type(tile.sizes, tile.axes, self.i32)
        value = ir.Operation.create("arith.trunci", results=[type_], operands=[tile.value]).result
        return dataclasses.replace(tile, value=value, element=self.i32)

    def _pointers(self, view_value: ir.Value, offsets: Sequence[ir.Value], sizes: Sequence[int],
                  element: ir.Type, gathered: tuple[int, _Lowered] | None = None):
        """(pointer value, axes) addressing a tile of `sizes` at `offsets`;
        with `gathered` (dim, i32 positions), lanes along `dim` address
        offsets[dim] + their position instead of offsets[dim] + lane."""
        view = self.views[view_value]
        pointer_type = ir.Type.parse(f"!tt.ptr<{_memory_element(element)}>")
        axes = tuple(a for a, s in enumerate(sizes) if s > 1)
        if gathered is not None:
            axes = tuple(sorted(set(axes) | set(gathered[1].axes)))
        # The scalar part: the view offset and the offsets of unit axes.
        scalar = None
        if not (isinstance(view.offset, int) and view.offset == 0):
            scalar = self._i32(view.offset)
        for axis, (offset, size, stride) in enumerate(zip(offsets, sizes, view.strides)):
            if gathered is not None and axis == gathered[0]:
                if gathered[1].axes or _is_broadcast(stride):
                    continue  # a tile of positions: added below
                term = _arith("arith.addi", self.values[offset], gathered[1].value)
            elif size > 1 or _is_broadcast(stride):
                continue
            else:
                term = self.values[offset]
            if not _is_one(stride):
                term = _arith("arith.muli", term, self._i32(stride))
            scalar = term if scalar is None else _arith("arith.addi", scalar, term)
        base = view.base
        if _is_bool(element):
            base = ir.Operation.create("tt.bitcast", results=[pointer_type], operands=[base]).result
        if scalar is not None:
            base = ir.Operation.create("tt.addptr", results=[pointer_type],
                                       operands=[base, scalar]).result
        if not axes:
            return base, axes
        shape = [sizes[a] for a in axes]
        total = None
        for axis in axes:
            size, stride = sizes[axis], view.strides[axis]
            if gathered is not None and axis == gathered[0]:
                continue  # its positions: added below
            lane = self._range(self.values[offsets[axis]], size)
            if not _is_one(stride):
                lane = _arith("arith.muli", lane, self._stride_tile(stride, sizes, (axis,)))
            lane = self.expand(_Lowered(lane, (axis,), tuple(sizes), self.i32), axes, sizes)
            total = lane if total is None else _arith("arith.addi", total, lane)
        if gathered is not None and gathered[1].axes:
            dim, positions = gathered
            start = self.values[offsets[dim]]
            if not _is_zero(start):
                splat = ir.Operation.create("tt.splat", results=[positions.value.type],
                                            operands=[start]).result
                positions = dataclasses.replace(
                    positions, value=_arith("arith.addi", positions.value, splat))
            lane = self.expand(positions, axes, sizes)
            if not _is_one(view.strides[dim]):
                lane = _arith("arith.muli", lane, self._stride_tile(view.strides[dim], sizes, axes))
            total = lane if total is None else _arith("arith.addi", total, lane)
        if total is None:
            total = self._constant(0, sizes, axes, self.i32)
        pointers = ir.RankedTensorType.get(shape, pointer_type)
        splat = ir.Operation.create("tt.splat", results=[pointers], operands=[base]).result
        return ir.Operation.create("tt.addptr", results=[pointers], operands=[splat, total]).result, axes

    def _range(self, offset: ir.Value, size: int) -> ir.Value:
        """offset + [0, size) as tensor<size x i32>."""
        type_ = ir.RankedTensorType.get([size], self.i32)
        lanes = ir.Operation.create("tt.make_range", results=[type_], attributes={
            "start": ir.IntegerAttr.get(self.i32, 0), "end": ir.IntegerAttr.get(self.i32, size)}).result
        if _is_zero(offset):
            return lanes
        splat = ir.Operation.create("tt.splat", results=[type_], operands=[offset]).result
        return _arith("arith.addi", splat, lanes)

    def load(self, op: ir.Operation) -> None:
        if "tma" in op.attributes:
            self._descriptor_load(op)
            return
        tile_load = op.opview
        view, offsets = tile_load.src, list(tile_load.offsets)
        result_type = ir.RankedTensorType(op.results[0].type)
        sizes = tuple(result_type.shape)
        element = result_type.element_type
        gathered = None
        if op.name == "kg.tile_gather":
            gathered = (ir.IntegerAttr(op.attributes["dim"]).value,
                        self._as_i32(self.tile(tile_load.indices)))
        pointers, axes = self._pointers(view, offsets, sizes, element, gathered)
        operands = [pointers]
        masked = tile_load.mask is not None
        if masked:
            mask = self.expand(self.tile(tile_load.mask), axes, sizes)
            padding = ir.FloatAttr(op.attributes["padding"]).value if "padding" in op.attributes else 0.0
            other = self._constant(padding, sizes, axes, _memory_element(element))
            operands += [mask, other]
        attributes = {
            # tt.load's operands: ptr, mask, other.
            "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, int(masked), int(masked)]),
            "cache": ir.IntegerAttr.get(self.i32, 1),
            "evict": ir.IntegerAttr.get(self.i32, 1),
            "isVolatile": ir.BoolAttr.get(False),
        }
        loaded = ir.Operation.create("tt.load", results=[self._compact_type(sizes, axes, _memory_element(element))],
                                     operands=operands, attributes=attributes).result
        if _is_bool(element):
            zero = self._constant(0, sizes, axes, _memory_element(element))
            loaded = self._compare_integers(loaded, zero, _CMPI["ne"], sizes, axes)
        self._define(op.results[0], loaded, sizes)

    def _compare_integers(self, lhs: ir.Value, rhs: ir.Value, predicate: int, sizes, axes) -> ir.Value:
        return ir.Operation.create(
            "arith.cmpi", results=[self._compact_type(sizes, axes, self.i1)], operands=[lhs, rhs],
            attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), predicate)}
        ).result

    def store(self, op: ir.Operation) -> None:
        if "tma" in op.attributes:
            self._descriptor_store(op)
            return
        tile_store = op.opview
        value, view, offsets = tile_store.value, tile_store.dst, list(tile_store.offsets)
        value_type = ir.RankedTensorType(value.type)
        sizes = tuple(value_type.shape)
        pointers, axes = self._pointers(view, offsets, sizes, value_type.element_type)
        stored = self.expand(self.tile(value), axes, sizes)
        if _is_bool(value_type.element_type):
            stored = ir.Operation.create(
                "arith.extui", results=[self._compact_type(sizes, axes, _memory_element(self.i1))],
                operands=[stored]).result
        operands = [pointers, stored]
        if tile_store.mask is not None:
            operands.append(self.expand(self.tile(tile_store.mask), axes, sizes))
        ir.Operation.create("tt.store", operands=operands, attributes={
            "cache": ir.IntegerAttr.get(self.i32, 1), "evict": ir.IntegerAttr.get(self.i32, 1)})

    def tile_range(self, op: ir.Operation) -> None:
        type_ = ir.RankedTensorType(op.results[0].type)
        sizes = tuple(type_.shape)
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        offset = self.values[op.operands[0]]
        if sizes[axis] > 1:
            self._define(op.results[0], self._range(offset, sizes[axis]), sizes)
        else:
            self.values[op.results[0]] = _Lowered(offset, (), sizes, self.i32)

    # -- bulk tensor copies (TMA) -------------------------------------------------

    def _descriptor(self, op: ir.Operation, view_value: ir.Value, sizes: Sequence[int],
                    element: ir.Type) -> tuple[ir.Value, list[int]]:
        """(the tensor descriptor of `view_value` for boxes of `sizes`, the
        axes it describes, outermost first), made once at the function's
        entry."""
        view = self.views[view_value]
        if not view.has_static_layout():
            raise PassFailure("a tma access needs a view of static strides and offset; this "
                              "one's depend on the dynamic extent", op.location)
        shape = list(ir.MemRefType(view_value.type).shape)
        axes = tma.layout(view.strides)
        key = (view_value, tuple(sizes))
        if key not in self.descriptors:
            reason = tma.refusal(_buffer_view(shape, view), str(element), sizes)
            if reason is not None:
                raise PassFailure(f"a tma access cannot be copied by TMA: {reason}", op.location)
            i64 = ir.IntegerType.get_signless(64)
            block = ir.RankedTensorType.get([sizes[a] for a in axes], element)
            descriptor_type = ir.Type.parse(f"!tt.tensordesc<{block}>")
            if self._descriptor_point is None:
                # Before the entry's first op, in the order they are made.
                self._descriptor_point = ir.InsertionPoint.at_block_begin(self.entry)
            with self._descriptor_point, op.location:
                base = view.base
                if view.offset:
                    base = ir.Operation.create("tt.addptr", results=[base.type], operands=[
                        base, self._scalar_i32(view.offset)]).result
                extents = [self._scalar_i32(shape[a]) for a in axes]
                strides = [ir.Operation.create("arith.constant", results=[i64], attributes={
                    "value": ir.IntegerAttr.get(i64, view.strides[a])}).result for a in axes]
                self.descriptors[key] = ir.Operation.create(
                    "tt.make_tensor_descriptor", results=[descriptor_type],
                    operands=[base, *extents, *strides]).result
        return self.descriptors[key], axes

    def _check_bounds_mask(self, op: ir.Operation, mask: ir.Value | None, offsets, sizes) -> None:
        """A tma access may carry only the mask of the lanes inside its
        buffer (kg-pad-mask's), which TMA applies by itself."""
        if mask is None:
            return
        owner = mask.owner
        if not isinstance(owner, ir.Block) and owner.name == "kg.tile_mask" \
                and list(owner.operands) == list(offsets):
            lower = list(ir.DenseI64ArrayAttr(owner.attributes["lower"]))
            upper = list(ir.DenseI64ArrayAttr(owner.attributes["upper"]))
            if all(lo in (0, INT32_MIN) and hi in (size, INT32_MAX)
                   for lo, hi, size in zip(lower, upper, sizes)):
                return
        raise PassFailure("a tma access may be masked only by the bounds of its buffer (TMA "
                          "applies those by itself)", op.location)

    def _descriptor_layout(self, axes: Sequence[int], sizes: Sequence[int]):
        """(the tile axes a descriptor copy holds, in its order; the
        permutation that puts them in axis order, None when they are)."""
        held = [a for a in axes if sizes[a] > 1]
        if not held:
            # tma.refusal keeps single lanes off TMA (a box under 16 bytes).
            raise PassFailure("a tma access of a single lane")
        order = sorted(range(len(held)), key=lambda i: held[i])
        return held, (None if order == list(range(len(held))) else order)

    def _descriptor_load(self, op: ir.Operation) -> None:
        tile_load = op.opview
        view, offsets = tile_load.src, list(tile_load.offsets)
        result_type = ir.RankedTensorType(op.results[0].type)
        sizes, element = tuple(result_type.shape), result_type.element_type
        buffer_sizes = list(ir.MemRefType(view.type).shape)
        self._check_bounds_mask(op, tile_load.mask, offsets, buffer_sizes)
        if tile_load.mask is not None and "padding" in op.attributes and \
                ir.FloatAttr(op.attributes["padding"]).value != 0.0:
            raise PassFailure("a masked tma load reads zeros outside its buffer; its padding "
                              "must be 0", op.location)
        descriptor, axes = self._descriptor(op, view, sizes, element)
        held, order = self._descriptor_layout(axes, sizes)
        loaded_type = self._compact_type(sizes, tuple(held), element)
        loaded = ir.Operation.create(
            "tt.descriptor_load", results=[loaded_type],
            operands=[descriptor, *[self.values[offsets[a]] for a in axes]],
            attributes={"cache": ir.IntegerAttr.get(self.i32, 1),
                        "evict": ir.IntegerAttr.get(self.i32, 1)}).result
        if order is not None:
            loaded = ir.Operation.create(
                "tt.trans", results=[self._compact_type(sizes, tuple(sorted(held)), element)],
                operands=[loaded], attributes={"order": ir.DenseI32ArrayAttr.get(order)}).result
        self._define(op.results[0], loaded, sizes)

    def _descriptor_store(self, op: ir.Operation) -> None:
        tile_store = op.opview
        value, view, offsets = tile_store.value, tile_store.dst, list(tile_store.offsets)
        value_type = ir.RankedTensorType(value.type)
        sizes, element = tuple(value_type.shape), value_type.element_type
        buffer_sizes = list(ir.MemRefType(view.type).shape)
        self._check_bounds_mask(op, tile_store.mask, offsets, buffer_sizes)
        descriptor, axes = self._descriptor(op, view, sizes, element)
        held, order = self._descriptor_layout(axes, sizes)
        lowered = self.tile(value)
        stored = self.expand(lowered, tuple(sorted(held)), sizes)
        if order is not None:
            inverse = [0] * len(order)
            for position, source in enumerate(order):
                inverse[source] = position
            stored = ir.Operation.create(
                "tt.trans", results=[ir.RankedTensorType.get([sizes[a] for a in held], element)],
                operands=[stored], attributes={"order": ir.DenseI32ArrayAttr.get(inverse)}).result
        ir.Operation.create("tt.descriptor_store",
                            operands=[descriptor, stored, *[self.values[offsets[a]] for a in axes]])

    def mask(self, op: ir.Operation) -> None:
        type_ = ir.RankedTensorType(op.results[0].type)
        sizes = tuple(type_.shape)
        lower = list(ir.DenseI64ArrayAttr(op.attributes["lower"]))
        upper = list(ir.DenseI64ArrayAttr(op.attributes["upper"]))
        axes = tuple(a for a, s in enumerate(sizes) if s > 1)
        mask_op = op.opview
        dynamic = dict(zip(mask_op.dynamic_dims or [], mask_op.dynamic_upper))
        result = None
        for axis, offset in enumerate(mask_op.offsets):
            checks = [(bound, predicate) for bound, predicate, unbounded in
                      ((lower[axis], 5, INT32_MIN), (upper[axis], 2, INT32_MAX))  # sge, slt
                      if bound != unbounded]
            if axis in dynamic:
                checks.append((dynamic[axis], 2))
            if not checks:
                continue
            lanes = self.values[offset]
            lane_axes: tuple[int, ...] = ()
            if sizes[axis] > 1:
                lanes = self._range(lanes, sizes[axis])
                lane_axes = (axis,)
            for bound, predicate in checks:
                constant = (self._constant(bound, sizes, lane_axes, self.i32)
                            if isinstance(bound, int) else
                            self.expand(_Lowered(self.values[bound], (), sizes, self.i32),
                                        lane_axes, sizes))
                cond_type = self._compact_type(sizes, lane_axes, self.i1)
                condition = ir.Operation.create(
                    "arith.cmpi", results=[cond_type], operands=[lanes, constant],
                    attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                predicate)}).result
                condition = self.expand(_Lowered(condition, lane_axes, sizes, self.i1), axes, sizes)
                result = condition if result is None else _arith("arith.andi", result, condition)
        if result is None:
            result = self._constant(1, sizes, axes, self.i1)
        self._define(op.results[0], result, sizes)

    # -- compute ------------------------------------------------------------------

    def _operands_as_result(self, op: ir.Operation, operands=None):
        type_ = ir.RankedTensorType(op.results[0].type)
        sizes = tuple(type_.shape)
        axes = tuple(a for a, s in enumerate(sizes) if s > 1)
        operands = op.operands if operands is None else operands
        return [self.expand(self.tile(v), axes, sizes) for v in operands], sizes, axes, type_

    def elementwise(self, op: ir.Operation) -> None:
        """An op of the elementwise table, lowered as its row says."""
        name = op.name
        row = BY_OP_NAME[name]
        values, sizes, axes, type_ = self._operands_as_result(op)
        element = type_.element_type
        result_type = self._compact_type(sizes, axes, element)
        math_ = _Math(self, sizes, axes, element)
        lowering = row.lowering
        if lowering.kind == "arith":
            operand_element = ir.RankedTensorType(op.operands[0].type).element_type
            result = math_.op(lowering.arith_op(isinstance(operand_element, ir.IntegerType)), values)
        elif lowering.kind == "math":
            result = math_.in_f32(lambda *vs: math_.op(lowering.name, list(vs)), *values)
        elif lowering.kind == "libdevice":
            result = math_.in_f32(lambda *vs: math_.libdevice(lowering.name, list(vs)), *values)
        else:
            result = _CUSTOM_LOWERINGS[row.name](math_, values, op)
        if result.type != result_type:
            raise PassFailure(f"lowering {name} gave {result.type}, expected {result_type}", op.location)
        self._define(op.results[0], result, sizes)

    def constant(self, op: ir.Operation) -> None:
        type_ = ir.RankedTensorType(op.results[0].type)
        sizes = tuple(type_.shape)
        axes = tuple(a for a, s in enumerate(sizes) if s > 1)
        value = self._constant(ir.FloatAttr(op.attributes["value"]).value, sizes, axes, type_.element_type)
        self._define(op.results[0], value, sizes)

    def broadcast(self, op: ir.Operation) -> None:
        values, sizes, _, _ = self._operands_as_result(op)
        self._define(op.results[0], values[0], sizes)

    def select(self, op: ir.Operation) -> None:
        values, sizes, _, _ = self._operands_as_result(op)
        result = ir.Operation.create("arith.select", results=[values[1].type], operands=values).result
        self._define(op.results[0], result, sizes)

    def andi(self, op: ir.Operation) -> None:
        if not _is_tensor(op):
            self._clone_scalar(op)
            return
        values, sizes, _, _ = self._operands_as_result(op)
        self._define(op.results[0], _arith("arith.andi", *values), sizes)

    def reduce(self, op: ir.Operation) -> None:
        x = self.tile(op.operands[0])
        kind = reduce_kind(op)
        combiner = _COMBINERS[kind]
        value, axes = x.value, list(x.axes)
        for axis in sorted(ir.DenseI64ArrayAttr(op.attributes["dims"]), reverse=True):
            if axis not in axes:
                continue
            position = axes.index(axis)
            axes.pop(position)
            result_type = self._compact_type(x.sizes, tuple(axes), x.element)
            reduction = ir.Operation.create("tt.reduce", results=[result_type], operands=[value],
                                            attributes={"axis": ir.IntegerAttr.get(self.i32, position)},
                                            regions=1)
            block = reduction.regions[0].blocks.append(x.element, x.element)
            with ir.InsertionPoint(block):
                combined = ir.Operation.create(combiner, results=[x.element],
                                               operands=list(block.arguments)).result
                ir.Operation.create("tt.reduce.return", operands=[combined])
            value = reduction.result
        type_ = ir.RankedTensorType(op.results[0].type)
        self._define(op.results[0], value, tuple(type_.shape))

    def dot(self, op: ir.Operation) -> None:
        a, b, acc = (self.tile(v) for v in op.operands)
        m_axis, k_axis, n_axis = dot_dims(op)
        if a.axes != tuple(sorted((m_axis, k_axis))) or b.axes != tuple(sorted((k_axis, n_axis))) \
                or acc.axes != tuple(sorted((m_axis, n_axis))):
            raise PassFailure("tile_dot needs tiles of at least 2 along M, K and N; run "
                              "kg-legalize-dot first", op.location)
        precision = (kg.Precision(ir.IntegerAttr(op.attributes["precision"]).value)
                     if "precision" in op.attributes else kg.Precision.ieee)
        attributes = {
            "inputPrecision": ir.IntegerAttr.get(self.i32, _INPUT_PRECISION[precision]),
            "maxNumImpreciseAcc": ir.IntegerAttr.get(self.i32,
                                                     _imprecise_products(a, precision)),
        }
        # Tiles keep their axes in iteration order; tt.dot takes [M, K] x
        # [K, N] -> [M, N], so operands laid out the other way round (dims
        # naming a later axis first) are transposed around it.
        a_value = _transposed(a.value) if m_axis > k_axis else a.value
        b_value = _transposed(b.value) if k_axis > n_axis else b.value
        acc_value = _transposed(acc.value) if m_axis > n_axis else acc.value
        result = ir.Operation.create("tt.dot", results=[acc_value.type],
                                     operands=[a_value, b_value, acc_value],
                                     attributes=attributes).result
        if m_axis > n_axis:
            result = _transposed(result)
        self._define(op.results[0], result, acc.sizes)


class _Math:
    """Elementwise math on values laid out as one result."""

    def __init__(self, lowering: _Lowering, sizes, axes, element: ir.Type):
        self.lowering, self.sizes, self.axes, self.element = lowering, sizes, axes, element
        self.f32 = ir.F32Type.get()

    def _type(self, element):
        return self.lowering._compact_type(self.sizes, self.axes, element)

    def const(self, value: float, element=None) -> ir.Value:
        return self.lowering._constant(value, self.sizes, self.axes, element or self.element)

    def op(self, name: str, operands) -> ir.Value:
        return ir.Operation.create(name, results=[operands[0].type], operands=operands).result

    def in_f32(self, fn, *values):
        """fn on f32 copies of `values`, rounded back to the element type."""
        if self.element == self.f32:
            return fn(*values)
        widened = [self.cast(v, self.element, self.f32) for v in values]
        saved, self.element = self.element, self.f32
        try:
            result = fn(*widened)
        finally:
            self.element = saved
        return self.cast(result, self.f32, self.element)

    def libdevice(self, symbol: str, operands) -> ir.Value:
        return ir.Operation.create("tt.extern_elementwise", results=[operands[0].type], operands=operands,
                                   attributes={"libname": ir.StringAttr.get(""),
                                               "libpath": ir.StringAttr.get(""),
                                               "pure": ir.BoolAttr.get(True),
                                               "symbol": ir.StringAttr.get(symbol)}).result

    def sigmoid(self, v: ir.Value) -> ir.Value:
        one = self.const(1.0)
        e = self.op("math.exp", [self.op("arith.mulf", [v, self.const(-1.0)])])
        return self.op("arith.divf", [one, self.op("arith.addf", [one, e])])

    def gelu(self, v: ir.Value) -> ir.Value:
        scaled = self.op("arith.mulf", [v, self.const(1 / math.sqrt(2.0))])
        erf = self.libdevice("__nv_erff", [scaled])
        half = self.op("arith.mulf", [v, self.const(0.5)])
        return self.op("arith.mulf", [half, self.op("arith.addf", [self.const(1.0), erf])])

    def gelu_tanh(self, v: ir.Value) -> ir.Value:
        cube = self.op("arith.mulf", [self.op("arith.mulf", [v, v]), v])
        inner = self.op("arith.addf", [v, self.op("arith.mulf", [cube, self.const(0.044715)])])
        inner = self.op("arith.mulf", [inner, self.const(math.sqrt(2.0 / math.pi))])
        tanh = self.libdevice("__nv_tanhf", [inner])
        half = self.op("arith.mulf", [v, self.const(0.5)])
        return self.op("arith.mulf", [half, self.op("arith.addf", [self.const(1.0), tanh])])

    def cast(self, value: ir.Value, source: ir.Type, target: ir.Type) -> ir.Value:
        if source == target:
            return value
        if isinstance(source, ir.IntegerType) or isinstance(target, ir.IntegerType):
            return self._integer_cast(value, source, target)
        s, t = str(source), str(target)
        result_type = self._type(target)
        if s in _FLOAT8 or t in _FLOAT8:
            attributes = {}
            if element_bits(t) < element_bits(s):
                attributes["rounding"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 1)  # rtne
            return ir.Operation.create("tt.fp_to_fp", results=[result_type], operands=[value],
                                       attributes=attributes).result
        if {s, t} == {"f16", "bf16"}:
            return self.cast(self.cast(value, source, self.f32), self.f32, target)
        name = "arith.extf" if element_bits(t) > element_bits(s) else "arith.truncf"
        return ir.Operation.create(name, results=[result_type], operands=[value]).result


    def _integer_cast(self, value: ir.Value, source: ir.Type, target: ir.Type) -> ir.Value:
        """Casts with an integer or i1 side, with torch's semantics: floats
        truncate toward zero, i1 is 0 or 1, and a value is true when it is
        not zero."""
        s, t = str(source), str(target)
        result_type = self._type(target)
        if s in _FLOAT8:  # through f32, which holds every 8-bit float exactly
            return self.cast(self.cast(value, source, self.f32), self.f32, target)
        if t in _FLOAT8:
            return self.cast(self.cast(value, source, self.f32), self.f32, target)
        if _is_bool(target):
            zero = self.const(0.0, source)
            if isinstance(source, ir.IntegerType):
                return self.lowering._compare_integers(value, zero, _CMPI["ne"], self.sizes, self.axes)
            return ir.Operation.create(
                "arith.cmpf", results=[result_type], operands=[value, zero],
                attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                            _CMPF["ne"])}).result
        if not isinstance(source, ir.IntegerType):
            name = "arith.fptosi"
        elif not isinstance(target, ir.IntegerType):
            name = "arith.uitofp" if _is_bool(source) else "arith.sitofp"
        elif _is_bool(source):
            name = "arith.extui"
        else:
            name = "arith.extsi" if target.width > source.width else "arith.trunci"
        return ir.Operation.create(name, results=[result_type], operands=[value]).result


# kg.cmp predicates -> arith.cmpf / arith.cmpi predicates. Float comparisons
# are ordered (false when either side is NaN) except ne, which holds then,
# as in torch; i1 compares unsigned (false < true).
_CMPF = {"eq": 1, "ne": 13, "lt": 4, "le": 5, "gt": 2, "ge": 3}  # oeq une olt ole ogt oge
_CMPI = {"eq": 0, "ne": 1, "lt": 2, "le": 3, "gt": 4, "ge": 5}  # eq ne slt sle sgt sge
_CMPI_UNSIGNED = {"eq": 0, "ne": 1, "lt": 6, "le": 7, "gt": 8, "ge": 9}  # eq ne ult ule ugt uge


def _is_bool(element: ir.Type) -> bool:
    return isinstance(element, ir.IntegerType) and element.width == 1


def _memory_element(element: ir.Type) -> ir.Type:
    """The type an element has in memory: i1 is stored as a byte (torch.bool)."""
    return ir.IntegerType.get_signless(8) if _is_bool(element) else element

# Products of 8-bit floats that Hopper's tensor cores may sum among
# themselves (with their narrower internal accumulator) before the sum is
# added into the f32 accumulator: one k step of at most 128, the promotion
# interval of cuBLAS's precise FP8 mode and DeepSeek-V3's FP8 GEMMs.
_FLOAT8_PROMOTION = 128
# Under precision = fast_accum: what Triton's own frontend gives 8-bit dots
# on sm_90 by default (its max_num_imprecise_acc_default), more products
# than any k loop has, so that none is ever promoted.
_FLOAT8_NO_PROMOTION = 2**30


def _imprecise_products(a: _Lowered, precision: kg.Precision) -> int:
    """tt.dot's maxNumImpreciseAcc for a dot of `a` under `precision`: 0 (no
    products summed outside f32) except for 8-bit floats. There Triton 3.6
    on sm_90 takes 0 to mean no 8-bit wgmma at all (it widens both operands
    to f16 for mma.sync), so by default each k step's products (at most 128)
    are summed by the tensor core and added into f32 after it, like
    cuBLAS's precise FP8 mode; under fast_accum, 2**30: the tensor cores sum
    the whole k loop themselves and Triton promotes nothing (cuBLAS's fast
    accumulation, torch._scaled_mm's use_fast_accum=True), which on an H100
    saves the promotion's time (benchmarks/NOTES.md, "FP8: where the time
    goes"). Other targets ignore it."""
    if str(a.element) not in _FLOAT8:
        return 0
    if precision == kg.Precision.fast_accum:
        return _FLOAT8_NO_PROMOTION
    return min(a.sizes[len(a.sizes) - 2], _FLOAT8_PROMOTION)


def _buffer_view(shape: Sequence[int], view: _View) -> BufferView:
    return BufferView(tuple(shape), tuple(view.strides), view.offset)


def _transposed(value: ir.Value) -> ir.Value:
    """A 2-D tensor with its axes swapped (tt.trans)."""
    type_ = ir.RankedTensorType(value.type)
    rows, columns = type_.shape
    result = ir.RankedTensorType.get([columns, rows], type_.element_type)
    return ir.Operation.create("tt.trans", results=[result], operands=[value],
                               attributes={"order": ir.DenseI32ArrayAttr.get([1, 0])}).result


def _arith(name: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    return ir.Operation.create(name, results=[lhs.type], operands=[lhs, rhs]).result


def _is_zero(value: ir.Value) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    attribute = owner.attributes["value"]
    return isinstance(attribute, ir.IntegerAttr) and attribute.value == 0


def _is_tensor(op: ir.Operation) -> bool:
    return any(isinstance(r.type, ir.RankedTensorType) for r in op.results)


# Lowerings of the elementwise ops whose table row says "custom": the op's
# mnemonic -> fn(math, operand values laid out as the result, op).
_CUSTOM_LOWERINGS: dict = {}


def _lowers(name: str):
    def register(fn):
        _CUSTOM_LOWERINGS[name] = fn
        return fn
    return register


@_lowers("cast")
def _lower_cast(math_: _Math, values, op: ir.Operation) -> ir.Value:
    source = ir.RankedTensorType(op.operands[0].type).element_type
    return math_.cast(values[0], source, math_.element)


@_lowers("neg")
def _lower_neg(math_: _Math, values, op: ir.Operation) -> ir.Value:
    if isinstance(math_.element, ir.IntegerType):
        return math_.op("arith.subi", [math_.const(0), values[0]])
    # Triton has no arith.negf; x * -1 also keeps the sign of zero.
    return math_.op("arith.mulf", [values[0], math_.const(-1.0)])


@_lowers("abs")
def _lower_abs(math_: _Math, values, op: ir.Operation) -> ir.Value:
    if isinstance(math_.element, ir.IntegerType):
        return math_.op("math.absi", [values[0]])
    return math_.in_f32(lambda v: math_.op("math.absf", [v]), values[0])


@_lowers("logical_not")
def _lower_logical_not(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.op("arith.xori", [values[0], math_.const(1)])


@_lowers("cmp")
def _lower_cmp(math_: _Math, values, op: ir.Operation) -> ir.Value:
    operand = ir.RankedTensorType(op.operands[0].type).element_type
    predicate = str(kg.ComparePredicate(ir.IntegerAttr(op.attributes["predicate"]).value))
    i64 = ir.IntegerType.get_signless(64)
    if isinstance(operand, ir.IntegerType):
        name, code = "arith.cmpi", (_CMPI_UNSIGNED if operand.width == 1 else _CMPI)[predicate]
    else:
        name, code = "arith.cmpf", _CMPF[predicate]
    return ir.Operation.create(name, results=[math_._type(math_.element)], operands=values,
                               attributes={"predicate": ir.IntegerAttr.get(i64, code)}).result


@_lowers("select")
def _lower_select(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return ir.Operation.create("arith.select", results=[values[1].type], operands=values).result


@_lowers("relu")
def _lower_relu(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.op("arith.maximumf", [values[0], math_.const(0.0)])


@_lowers("square")
def _lower_square(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.op("arith.mulf", [values[0], values[0]])


@_lowers("reciprocal")
def _lower_reciprocal(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.op("arith.divf", [math_.const(1.0), values[0]])


@_lowers("sigmoid")
def _lower_sigmoid(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.in_f32(math_.sigmoid, values[0])


@_lowers("silu")
def _lower_silu(math_: _Math, values, op: ir.Operation) -> ir.Value:
    return math_.in_f32(lambda v: math_.op("arith.mulf", [v, math_.sigmoid(v)]), values[0])


@_lowers("gelu")
def _lower_gelu(math_: _Math, values, op: ir.Operation) -> ir.Value:
    attributes = op.attributes
    tanh = ("approximate" in attributes
            and ir.IntegerAttr(attributes["approximate"]).value == kg.GeluApproximation.tanh)
    return math_.in_f32(math_.gelu_tanh if tanh else math_.gelu, values[0])


@_lowers("clamp")
def _lower_clamp(math_: _Math, values, op: ir.Operation) -> ir.Value:
    result = values[0]
    if "min" in op.attributes:
        result = math_.op("arith.maximumf", [result, math_.const(ir.FloatAttr(op.attributes["min"]).value)])
    if "max" in op.attributes:
        result = math_.op("arith.minimumf", [result, math_.const(ir.FloatAttr(op.attributes["max"]).value)])
    return result


def _check_custom_lowerings(rows: list[ElementwiseOp]) -> None:
    """Every op whose row asks for a custom lowering has one here."""
    wanted = {row.name for row in rows if row.lowering.kind == "custom"}
    if wanted != set(_CUSTOM_LOWERINGS):
        raise ImportError(
            f"convert-kg-to-ttir: custom lowerings missing for {sorted(wanted - set(_CUSTOM_LOWERINGS))}"
            f", or registered for ops whose row lowers them otherwise: "
            f"{sorted(set(_CUSTOM_LOWERINGS) - wanted)}")


_check_custom_lowerings(list(ELEMENTWISE.values()))

_HANDLERS = {
    "kg.program_id": _Lowering.program_id,
    "kg.scalar_arg": _Lowering.scalar_arg,
    "memref.dim": _Lowering.buffer_size,
    "arith.index_cast": _Lowering.index_cast,
    "memref.reinterpret_cast": _Lowering.view,
    "kg.tile_load": _Lowering.load,
    "kg.tile_store": _Lowering.store,
    "kg.tile_gather": _Lowering.load,
    "kg.tile_mask": _Lowering.mask,
    "kg.tile_range": _Lowering.tile_range,
    "kg.tile_select": _Lowering.select,
    "kg.tile_dot": _Lowering.dot,
    "kg.reduce": _Lowering.reduce,
    "kg.constant": _Lowering.constant,
    "kg.broadcast_to": _Lowering.broadcast,
    "arith.andi": _Lowering.andi,
}
for _row in ELEMENTWISE.values():
    _HANDLERS[_row.op_name] = _Lowering.elementwise
