"""The Builder that writes the tile program of a kernel as kg tile ops.

Constants, buffer views and the program id go at the top of the kernel
body, where they dominate everything; other ops go where the generator
asks (inside a loop, or hoisted before it).
"""

from __future__ import annotations

import contextlib
from typing import Sequence

from mlir import ir
from mlir.dialects import scf

from kgc.dialects import kg
from kgc.op_table import ELEMENTWISE
from kgc.tiling.constants import LOOP_AXIS_ATTRIBUTE
from kgc.tiling.dynamic import read_extent
from kgc.tiling.generate import Builder, LoopBody
from kgc.tiling.index_maps import BufferView, depends_on_size

_SCALAR_OPS = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli",
               "div": "arith.divsi", "rem": "arith.remsi", "min": "arith.minsi"}


def element_type(name: str) -> ir.Type:
    return ir.Type.parse(name)


def tensor_type(shape: Sequence[int], element: str) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element_type(element))


class MlirBuilder(Builder):
    def __init__(self, block: ir.Block, buffers: Sequence[ir.Value], num_inputs: int,
                 location: ir.Location, dynamic_axis: int | None = None):
        self.block = block
        # The iteration axis of the kernel's dynamic extent, whose size views
        # read from a buffer (`kgc.tiling.dynamic`); None: every extent static.
        self.dynamic_axis = dynamic_axis
        self._dynamic_size: ir.Value | None = None
        self.buffers = list(buffers)
        self.num_inputs = num_inputs
        self.location = location
        self.i32 = ir.IntegerType.get_signless(32)
        self.frames: list[list] = [[block, None]]  # [block, loop under construction]
        self._prelude_end: ir.Operation | None = None
        self._constants: dict = {}
        self._views: dict = {}
        self._pids: dict[int, ir.Value] = {}
        self._scalar_arguments: dict[int, ir.Value] = {}

    # -- placement --------------------------------------------------------------

    @contextlib.contextmanager
    def _at_prelude(self):
        """Inserts after the ops already placed at the top of the body."""
        if self._prelude_end is None:
            point = ir.InsertionPoint.at_block_begin(self.block)
        else:
            point = ir.InsertionPoint.after(self._prelude_end)
        with point, self.location:
            yield

    def _prelude(self, make) -> ir.Value:
        with self._at_prelude():
            op = make()
        self._prelude_end = op.operation if hasattr(op, "operation") else op.owner
        return op.result if hasattr(op, "result") else op

    @contextlib.contextmanager
    def hoisted(self, depth: int):
        block, pending = self.frames[depth]
        if depth == len(self.frames) - 1 or pending is None:
            point = ir.InsertionPoint(block)
        else:
            point = ir.InsertionPoint(pending)
        with point, self.location:
            yield

    def _create(self, name: str, result: ir.Type | None, operands: Sequence[ir.Value],
                attributes: dict | None = None) -> ir.Value | None:
        op = ir.Operation.create(name, results=[result] if result is not None else [],
                                 operands=list(operands), attributes=attributes or {})
        return op.results[0] if result is not None else None

    # -- scalars ------------------------------------------------------------------

    def program_id(self, axis=0):
        if axis not in self._pids:
            self._pids[axis] = self._prelude(lambda: kg.ProgramIdOp(axis))
        return self._pids[axis]

    def scalar_argument(self, index: int):
        if index not in self._scalar_arguments:
            self._scalar_arguments[index] = self._prelude(lambda: ir.Operation.create(
                "kg.scalar_arg", results=[self.i32],
                attributes={"index": ir.IntegerAttr.get(self.i32, index)}))
        return self._scalar_arguments[index]

    def const(self, value: int):
        key = ("i32", value)
        if key not in self._constants:
            self._constants[key] = self._prelude(lambda: ir.Operation.create(
                "arith.constant", results=[self.i32],
                attributes={"value": ir.IntegerAttr.get(self.i32, value)}))
        return self._constants[key]

    def scalar(self, op: str, lhs, rhs):
        with self.location:
            return self._create(_SCALAR_OPS[op], self.i32, [lhs, rhs])

    # -- memory -------------------------------------------------------------------

    def _size_of_dynamic_extent(self) -> ir.Value:
        """The size of the kernel's dynamic extent (an index), read once
        from the first buffer that has it, at the top of the body."""
        if self._dynamic_size is None:
            self._dynamic_size = self._prelude(lambda: read_extent(self.buffers))
        return self._dynamic_size

    def _size_affine(self, value: int) -> ir.Value:
        """`constant + per_size * size` (an index) for a stride or offset
        that depends on the dynamic extent, computed once in i32 (as every
        address of a tile program) at the top of the body."""
        key = ("size affine", value.constant, value.per_size)
        if key not in self._constants:
            index = ir.IndexType.get()
            size = self._size_i32()
            term = size
            if value.per_size != 1:
                factor = self.const(value.per_size)
                term = self._prelude(lambda: ir.Operation.create(
                    "arith.muli", results=[self.i32], operands=[size, factor]))
            if value.constant:
                constant, scaled = self.const(value.constant), term
                term = self._prelude(lambda: ir.Operation.create(
                    "arith.addi", results=[self.i32], operands=[scaled, constant]))
            self._constants[key] = self._prelude(lambda: ir.Operation.create(
                "arith.index_cast", results=[index], operands=[term]))
        return self._constants[key]

    def extent(self) -> ir.Value:
        return self._size_i32()

    def _size_i32(self) -> ir.Value:
        key = ("size", "i32")
        if key not in self._constants:
            size = self._size_of_dynamic_extent()
            self._constants[key] = self._prelude(lambda: ir.Operation.create(
                "arith.index_cast", results=[self.i32], operands=[size]))
        return self._constants[key]

    def _view(self, buffer_index: int, element: str, view: BufferView,
              gathered_axis: int | None = None) -> ir.Value:
        key = (buffer_index, view, gathered_axis)
        if key not in self._views:
            source = self.buffers[buffer_index]
            dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
            static_strides = [dynamic if depends_on_size(s) else int(s) for s in view.strides]
            static_offset = dynamic if depends_on_size(view.offset) else int(view.offset)
            layout = ir.StridedLayoutAttr.get(static_offset, static_strides)
            sizes, dynamic_sizes = [int(s) for s in view.shape], []
            # A view that steps along the dynamic axis spans the call's size
            # there (kgc.tiling.dynamic: no other view steps along it).
            axis = self.dynamic_axis
            if axis is not None and axis != gathered_axis and view.strides[axis] != 0:
                sizes[axis] = ir.ShapedType.get_dynamic_size()
                dynamic_sizes = [self._size_of_dynamic_extent()]
            dynamic_offsets = ([self._size_affine(view.offset)]
                               if depends_on_size(view.offset) else [])
            dynamic_strides = [self._size_affine(s) for s in view.strides if depends_on_size(s)]
            result = ir.MemRefType.get(sizes, element_type(element), layout)

            def make():
                return ir.Operation.create(
                    "memref.reinterpret_cast", results=[result],
                    operands=[source] + dynamic_offsets + dynamic_sizes + dynamic_strides,
                    attributes={
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get(
                            [1, len(dynamic_offsets), len(dynamic_sizes),
                             len(dynamic_strides)]),
                        "static_offsets": ir.DenseI64ArrayAttr.get([static_offset]),
                        "static_sizes": ir.DenseI64ArrayAttr.get(sizes),
                        "static_strides": ir.DenseI64ArrayAttr.get(static_strides),
                    })

            self._views[key] = self._prelude(make)
        return self._views[key]

    def load(self, input_index, element, view, offsets, shape, tma=False):
        source = self._view(input_index, element, view)
        with self.location:
            loaded = kg.tile_load(tensor_type(shape, element), source, list(offsets))
            if tma:
                loaded.owner.attributes["tma"] = ir.UnitAttr.get()
            return loaded

    def gather(self, input_index, element, view, offsets, indices, dim, shape):
        # The table spans its own rows along the gathered axis, even where
        # that axis is the dynamic one (the positions vary along it).
        source = self._view(input_index, element, view, gathered_axis=dim)
        with self.location:
            return kg.tile_gather(tensor_type(shape, element), source, list(offsets), indices, dim)

    def store(self, output_index, element, value, view, offsets, shape, tma=False):
        target = self._view(self.num_inputs + output_index, element, view)
        with self.location:
            stored = kg.TileStoreOp(value, target, list(offsets))
            if tma:
                stored.operation.attributes["tma"] = ir.UnitAttr.get()

    # -- tiles --------------------------------------------------------------------

    def constant(self, value: float, element: str, shape):
        key = ("tile", value, element, tuple(shape))
        if key not in self._constants:
            type_ = tensor_type(shape, element)
            self._constants[key] = self._prelude(lambda: kg.ConstantOp(type_, value))
        return self._constants[key]

    def elementwise(self, op, operands, attrs, element, shape):
        if op == "constant":
            raise ValueError("constants are made by Builder.constant")
        attributes = dict(attrs)
        if attributes.get("approximate") is not None:
            # The default (none) is left out, as the graph writes it.
            approximate = attributes["approximate"]
            attributes["approximate"] = (None if approximate == "none"
                                         else kg.GeluApproximation[approximate])
        if attributes.get("predicate") is not None:
            attributes["predicate"] = kg.ComparePredicate[attributes["predicate"]]
        with self.location:
            return ELEMENTWISE[op].build(tensor_type(shape, element), operands, **attributes)

    def reduce(self, kind, x, axes, element, shape):
        with self.location:
            return kg.reduce(tensor_type(shape, element), kg.ReduceKind[kind], x, list(axes),
                             keepdim=True)

    def dot(self, a, b, acc, precision, shape, dims=None):
        with self.location:
            return kg.tile_dot(tensor_type(shape, "f32"), a, b, acc,
                               precision=None if precision is None else kg.Precision[precision],
                               dims=None if dims is None else ir.DenseI64ArrayAttr.get(list(dims)))

    def lanes(self, offset, axis, shape):
        with self.location:
            return kg.TileRangeOp(tensor_type(shape, "i32"), offset, axis).result

    def mask(self, offsets, lower, upper, shape):
        i1 = ir.IntegerType.get_signless(1)
        with self.location:
            return kg.tile_mask(ir.RankedTensorType.get(list(shape), i1), list(offsets),
                                list(lower), list(upper), [])

    def select(self, mask, a, b, element, shape):
        with self.location:
            return kg.tile_select(tensor_type(shape, element), mask, a, b)

    def broadcast(self, x, element, shape):
        with self.location:
            return kg.broadcast_to(tensor_type(shape, element), x)

    # -- loops --------------------------------------------------------------------

    @contextlib.contextmanager
    def loop(self, axis, extent, step, inits, attributes=None, start=None, end=None):
        lower = self.const(0) if start is None else start
        # `extent` is a number, or an i32 scalar for a loop that ends where
        # the program says (a share of the keys); `end` overrides both.
        upper = end if end is not None else (
            self.const(extent) if isinstance(extent, int) else extent)
        stride = self.const(step)
        with ir.InsertionPoint(self.frames[-1][0]), self.location:
            loop = scf.ForOp(lower, upper, stride, list(inits))
            if axis is not None:
                loop.operation.attributes[LOOP_AXIS_ATTRIBUTE] = ir.IntegerAttr.get(
                    ir.IntegerType.get_signless(64), axis)
            for name, value in (attributes or {}).items():
                if value is None or value is False:
                    continue
                loop.operation.attributes[name] = ir.UnitAttr.get() if value is True else \
                    ir.IntegerAttr.get(self.i32, value)
        self.frames[-1][1] = loop.operation
        self.frames.append([loop.body, None])
        body = LoopBody(loop.induction_variable, list(loop.inner_iter_args))
        try:
            with ir.InsertionPoint(loop.body), self.location:
                yield body
                scf.YieldOp(list(body.results))
        finally:
            self.frames.pop()
            self.frames[-1][1] = None
        body.finals = list(loop.results)


def tiled_kernel(operands: Sequence[ir.Value], result_types: Sequence[ir.Type],
                 attributes: dict, location: ir.Location, generate,
                 dynamic_axis: int | None = None) -> ir.Operation:
    """A kg.kernel in tiled form, built at the current insertion point: one
    buffer argument per operand and result, and the tile program that
    `generate(builder)` writes through an `MlirBuilder`."""
    with location:
        tiled = ir.Operation.create("kg.kernel", results=list(result_types),
                                    operands=list(operands), attributes=attributes, regions=1)
        block = tiled.regions[0].blocks.append(*[
            ir.MemRefType.get(list(ir.RankedTensorType(t).shape),
                              ir.RankedTensorType(t).element_type)
            for t in [v.type for v in operands] + list(result_types)])
    builder = MlirBuilder(block, list(block.arguments), len(operands), location, dynamic_axis)
    with ir.InsertionPoint(block), location:
        generate(builder)
        ir.Operation.create("kg.yield")
    return tiled
