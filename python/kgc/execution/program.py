"""One kernel's tile program, decoded once and run program by program.

Decoding turns every op of the kernel body into a Python function on a
list of values (one slot per SSA value): i32 scalars are Python ints,
tiles are torch tensors of the tile's shape and element type, masks are
bool tensors. What no program changes (constants, views) is computed once.
Running a program fills the slots in op order, so each op runs once per
program (or per loop step) on whole tiles.

Semantics, op by op:

    kg.program_id a            the program's coordinate along grid axis a
    kg.scalar_arg i            the kernel's i32 argument i (its `scalars`)
    arith on i32 scalars       exact integer math; a result that does not
                               fit in i32 is an error (the GPU would wrap)
    memref.reinterpret_cast    a view of a kernel buffer (strides of any
                               sign; a dynamic size is the kernel's extent)
    memref.dim                 the kernel's dynamic extent (`extent`)
    scf.for                    the loop, with its iteration arguments
    scf.if, scf.while          the branch taken, the loop run to its
                               condition's end, with their results
    kg.tile_load / tile_store  `kgc.execution.memory`: masked lanes hold
                               the padding (NaN when it is unspecified) or
                               are not written; unmasked lanes outside the
                               buffer are errors, and so is a store to an
                               element another program stored
    kg.tile_gather             `kgc.execution.memory.gather`: a load whose
                               index along its `dim` comes from its indices
                               tile; a lane outside the buffer is an error
                               (an index of a kg.gather out of range)
    kg.tile_mask               lower[d] <= offsets[d] + lane[d] < upper[d]
    kg.tile_range              offset + lane[axis], in i32
    kg.tile_select             torch.where, broadcasting
    kg.tile_dot                acc + a @ b in f32 (operands rounded to
                               TF32 first under precision = tf32; under
                               fast_accum too, which on a GPU sums 8-bit
                               products less exactly, never more)
    elementwise ops, kg.cast, kg.constant, kg.reduce, kg.broadcast_to
                               `kgc.reference.evaluate_op`, as eager torch
                               computes them on the tile
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Callable

from mlir import ir

from kgc import reference
from kgc.diagnostics import KgcError
from kgc.execution.errors import Fault, TileProgramError, located
from kgc.execution import memory
from kgc.execution.memory import TileAccess, View
from kgc.tiling.graph_model import ELEMENTWISE_OPS
from kgc.tiling.dynamic import DYNAMIC_GRID_ATTRIBUTE, at_size, grid_at
from kgc.tiling.kernel_ops import dot_dims, int_array, kernel_name, view_layout

# kg ops whose meaning on a tile is their meaning on a tensor.
_REFERENCE_OPS = frozenset("kg." + name for name in ELEMENTWISE_OPS | {"reduce", "broadcast_to"})
_INT_COMPARISONS = {0: operator.eq, 1: operator.ne, 2: operator.lt, 3: operator.le,
                    4: operator.gt, 5: operator.ge, 6: operator.lt, 7: operator.le,
                    8: operator.gt, 9: operator.ge}  # 6-9: unsigned, on values taken mod 2^width
_UNSIGNED_PREDICATES = frozenset((6, 7, 8, 9))
_TF32_PRECISION = 1


def _divsi(a, b):
    """Signed division rounding toward zero, as arith.divsi."""
    if b == 0:
        raise Fault("division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _remsi(a, b):
    """The remainder with the sign of the dividend, as arith.remsi."""
    if b == 0:
        raise Fault("remainder by zero")
    return a - b * _divsi(a, b)


_INT_ARITHMETIC: dict[str, Callable] = {
    "arith.addi": operator.add, "arith.subi": operator.sub, "arith.muli": operator.mul,
    "arith.divsi": _divsi, "arith.remsi": _remsi, "arith.minsi": min, "arith.maxsi": max,
    "arith.andi": operator.and_, "arith.ori": operator.or_, "arith.xori": operator.xor,
}
_PASS_THROUGH = frozenset(("arith.index_cast", "arith.extsi", "arith.index_castui"))


class _Frame:
    """The state of one running program."""

    __slots__ = ("values", "pid", "number", "buffers", "writers")

    def __init__(self, values: list, pid: tuple[int, int, int], number: int, buffers: list,
                 writers: list):
        self.values, self.pid, self.number = values, pid, number
        self.buffers, self.writers = buffers, writers


_Step = Callable[[_Frame], None]


class TileProgram:
    """The tile program of a tiled kg.kernel, ready to run on flat buffers:
    the kernel's inputs, then its results."""

    def __init__(self, kernel: ir.Operation, extent: int | None = None):
        """`extent`: the size of the kernel's dynamic extent (every `?` of
        its buffers) for this run; None for a kernel without one."""
        import torch

        self.kernel = kernel
        self.name = kernel_name(kernel)
        self.extent = extent
        grid = int_array(kernel, "grid")
        rule = int_array(kernel, DYNAMIC_GRID_ATTRIBUTE)
        if rule is not None:
            if extent is None or len(rule) != 2:
                raise located(kernel, f"kernel @{self.name}: a grid of the dynamic extent needs "
                                      "the extent's size and a rule [tile, programs per tile]")
            grid = grid_at(grid, rule, extent)
        if grid is None or not 1 <= len(grid) <= 3 or min(grid) < 1:
            raise located(kernel, f"kernel @{self.name} needs a grid of one to three positive "
                                  f"program counts, has {grid}")
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.scalars = tuple(ir.DenseI64ArrayAttr(kernel.attributes["scalars"])) \
            if "scalars" in kernel.attributes else ()
        body = kernel.regions[0].blocks[0]
        self.num_inputs = len(kernel.operands)
        self._buffer_numbers = {arg: arg.arg_number for arg in body.arguments}
        self._slots: dict = {}
        self._template: list = []
        self._views: dict = {}
        self._torch = torch
        self.steps = self._block(list(body.operations), terminator="kg.yield")

    # -- running ----------------------------------------------------------------

    def run(self, buffers: list, writers: list) -> None:
        """Runs every program of the grid on `buffers` (flat tensors).
        `writers` (i32, one per result buffer, zeros at first) receive the
        writer number of the program that stored each element (see
        `kgc.execution.memory`); 0 stays where none did."""
        grid_x, grid_y, grid_z = self.grid
        all_writers = [None] * self.num_inputs + list(writers)
        programs = itertools.product(range(grid_z), range(grid_y), range(grid_x))
        for number, (z, y, x) in enumerate(programs, start=1):
            frame = _Frame(list(self._template), (x, y, z), number, buffers, all_writers)
            self._run(self.steps, frame)

    def _run(self, steps: list, frame: _Frame) -> None:
        for op, step in steps:
            try:
                step(frame)
            except TileProgramError:
                raise
            except (Fault, KgcError, RuntimeError, ValueError, IndexError, TypeError) as error:
                detail = str(error) if not isinstance(error, KgcError) else \
                    "; ".join(d.message for d in error.diagnostics)
                raise located(op, f"kernel @{self.name}, program {frame.pid}: {op.name}: "
                                  f"{detail}") from None

    # -- decoding ---------------------------------------------------------------

    def _slot(self, value: ir.Value) -> int:
        if value not in self._slots:
            self._slots[value] = len(self._template)
            self._template.append(None)
        return self._slots[value]

    def _operand(self, op: ir.Operation, value: ir.Value) -> int:
        if value not in self._slots:
            raise located(op, f"kernel @{self.name}: {op.name} uses a value that no op before it "
                              "defines")
        return self._slots[value]

    def _block(self, ops: list, terminator: str) -> list:
        steps = []
        for op in ops:
            op = op.operation
            if op.name == terminator:
                continue
            step = self._decode(op)
            if step is not None:
                steps.append((op, step))
        return steps

    def _decode(self, op: ir.Operation) -> _Step | None:
        name = op.name
        if name == "arith.constant":
            return self._constant(op)
        if name == "memref.reinterpret_cast":
            return self._view(op)
        if name == "memref.dim":
            return self._dim(op)
        if name == "kg.program_id":
            return self._program_id(op)
        if name == "kg.scalar_arg":
            return self._scalar_argument(op)
        if name in _INT_ARITHMETIC:
            return self._arithmetic(op)
        if name in _PASS_THROUGH:
            source, result = self._operand(op, op.operands[0]), self._slot(op.results[0])

            def pass_through(frame):
                frame.values[result] = frame.values[source]
            return pass_through
        if name == "arith.cmpi":
            return self._compare(op)
        if name == "arith.select":
            return self._select(op)
        if name == "scf.for":
            return self._for(op)
        if name == "scf.if":
            return self._if(op)
        if name == "scf.while":
            return self._while(op)
        if name == "kg.tile_load":
            return self._load(op)
        if name == "kg.tile_store":
            return self._store(op)
        if name == "kg.tile_gather":
            return self._gather(op)
        if name == "kg.tile_mask":
            return self._mask(op)
        if name == "kg.tile_range":
            return self._tile_range(op)
        if name == "kg.tile_select":
            return self._select(op)
        if name == "kg.tile_dot":
            return self._dot(op)
        if name == "kg.constant":
            self._template[self._slot(op.results[0])] = reference.evaluate_op(op, [])
            return None
        if name in _REFERENCE_OPS:
            return self._reference(op)
        raise located(op, f"kernel @{self.name}: the CPU executor cannot run {name} in a tile "
                          "program")

    # -- scalars ------------------------------------------------------------------

    def _constant(self, op: ir.Operation) -> None:
        attribute = op.attributes["value"]
        if isinstance(attribute, ir.IntegerAttr):
            value = attribute.value
            if isinstance(attribute.type, ir.IntegerType) and attribute.type.width == 1:
                value = bool(value & 1)
        elif isinstance(attribute, ir.FloatAttr):
            value = attribute.value
        else:
            raise located(op, f"kernel @{self.name}: the CPU executor reads only integer and float "
                              f"scalar constants, not {attribute}")
        self._template[self._slot(op.results[0])] = value
        return None

    def _program_id(self, op: ir.Operation) -> _Step:
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        if not 0 <= axis <= 2:
            raise located(op, f"kernel @{self.name}: kg.program_id {axis} names no grid axis")
        result = self._slot(op.results[0])

        def program_id(frame):
            frame.values[result] = frame.pid[axis]
        return program_id

    def _scalar_argument(self, op: ir.Operation) -> None:
        index = ir.IntegerAttr(op.attributes["index"]).value
        if not 0 <= index < len(self.scalars):
            raise located(op, f"kernel @{self.name}: kg.scalar_arg {index} names none of the "
                              f"kernel's {len(self.scalars)} scalar arguments")
        self._template[self._slot(op.results[0])] = self.scalars[index]
        return None

    def _arithmetic(self, op: ir.Operation) -> _Step:
        function = _INT_ARITHMETIC[op.name]
        lhs, rhs = (self._operand(op, v) for v in op.operands)
        result = self._slot(op.results[0])
        low, high = _signed_range(op.results[0].type)

        def arithmetic(frame):
            values = frame.values
            a, b = values[lhs], values[rhs]
            value = function(a, b)
            if type(value) is int and not low <= value <= high:
                raise Fault(f"{a} and {b} give {value}, which does not fit in "
                            f"{op.results[0].type} (the GPU would wrap it)")
            values[result] = value
        return arithmetic

    def _compare(self, op: ir.Operation) -> _Step:
        predicate = ir.IntegerAttr(op.attributes["predicate"]).value
        if predicate not in _INT_COMPARISONS:
            raise located(op, f"kernel @{self.name}: arith.cmpi predicate {predicate} is unknown")
        compare = _INT_COMPARISONS[predicate]
        modulus = 1 << _width(op.operands[0].type) if predicate in _UNSIGNED_PREDICATES else None
        lhs, rhs = (self._operand(op, v) for v in op.operands)
        result = self._slot(op.results[0])

        def compare_values(frame):
            values = frame.values
            a, b = values[lhs], values[rhs]
            if modulus is not None:
                a, b = a % modulus, b % modulus
            values[result] = compare(a, b)
        return compare_values

    def _select(self, op: ir.Operation) -> _Step:
        torch = self._torch
        condition, true_value, false_value = (self._operand(op, v) for v in op.operands)
        result = self._slot(op.results[0])
        shape = _shape(op.results[0].type)

        def select(frame):
            values = frame.values
            c, a, b = values[condition], values[true_value], values[false_value]
            if isinstance(c, bool):
                values[result] = a if c else b
                return
            picked = torch.where(c, a, b)
            values[result] = picked if shape is None else picked.expand(shape)
        return select

    def _for(self, op: ir.Operation) -> _Step:
        lower, upper, step = (self._operand(op, op.operands[i]) for i in range(3))
        inits = [self._operand(op, v) for v in op.operands[3:]]
        body = op.regions[0].blocks[0]
        induction = self._slot(body.arguments[0])
        carried = [self._slot(a) for a in list(body.arguments)[1:]]
        body_ops = list(body.operations)
        steps = self._block(body_ops, terminator="scf.yield")
        terminator = body_ops[-1]
        yielded = [self._operand(terminator, v) for v in terminator.operands]
        results = [self._slot(r) for r in op.results]

        def loop(frame):
            values = frame.values
            start, stop, stride = values[lower], values[upper], values[step]
            if stride <= 0:
                raise Fault(f"the loop steps by {stride}; it would never end")
            current = [values[i] for i in inits]
            for index in range(start, stop, stride):
                values[induction] = index
                for slot, value in zip(carried, current):
                    values[slot] = value
                self._run(steps, frame)
                current = [values[i] for i in yielded]
            for slot, value in zip(results, current):
                values[slot] = value
        return loop

    def _if(self, op: ir.Operation) -> _Step:
        condition = self._operand(op, op.operands[0])
        branches = []
        for region in op.regions:
            if not region.blocks:
                branches.append(([], []))  # an absent else: nothing to do, no results
                continue
            body_ops = list(region.blocks[0].operations)
            steps = self._block(body_ops, terminator="scf.yield")
            terminator = body_ops[-1]
            branches.append((steps, [self._operand(terminator, v) for v in terminator.operands]))
        then_branch, else_branch = branches
        results = [self._slot(r) for r in op.results]

        def branch(frame):
            values = frame.values
            taken = values[condition]
            if not isinstance(taken, bool):
                raise Fault(f"the condition is {taken!r}, not an i1 scalar")
            steps, yielded = then_branch if taken else else_branch
            self._run(steps, frame)
            for slot, value in zip(results, [values[y] for y in yielded]):
                values[slot] = value
        return branch

    def _while(self, op: ir.Operation) -> _Step:
        inits = [self._operand(op, v) for v in op.operands]
        before, after = (region.blocks[0] for region in op.regions)
        before_arguments = [self._slot(a) for a in before.arguments]
        before_ops = list(before.operations)
        before_steps = self._block(before_ops, terminator="scf.condition")
        condition_op = before_ops[-1]
        condition = self._operand(condition_op, condition_op.operands[0])
        forwarded = [self._operand(condition_op, v) for v in list(condition_op.operands)[1:]]
        after_arguments = [self._slot(a) for a in after.arguments]
        after_ops = list(after.operations)
        after_steps = self._block(after_ops, terminator="scf.yield")
        yielded = [self._operand(after_ops[-1], v) for v in after_ops[-1].operands]
        results = [self._slot(r) for r in op.results]

        def loop(frame):
            values = frame.values
            current = [values[i] for i in inits]
            while True:
                for slot, value in zip(before_arguments, current):
                    values[slot] = value
                self._run(before_steps, frame)
                going_on = values[condition]
                if not isinstance(going_on, bool):
                    raise Fault(f"the loop's condition is {going_on!r}, not an i1 scalar")
                current = [values[f] for f in forwarded]
                if not going_on:
                    break
                for slot, value in zip(after_arguments, current):
                    values[slot] = value
                self._run(after_steps, frame)
                current = [values[y] for y in yielded]
            for slot, value in zip(results, current):
                values[slot] = value
        return loop

    # -- memory -------------------------------------------------------------------

    def _view(self, op: ir.Operation) -> None:
        source = op.operands[0]
        if source not in self._buffer_numbers:
            raise located(op, f"kernel @{self.name}: a view must be taken of a kernel buffer")
        # An offset or stride that depends on the dynamic extent is an
        # operand computed from the size alone: its value for this run.
        offset, strides = view_layout(op)
        offset, *strides = [v if isinstance(v, int) else self._at_run_size(op, v)
                            for v in (offset, *strides)]
        # A dynamic size is the kernel's one dynamic extent, as its operand
        # (a memref.dim of a buffer) reads it.
        sizes = self._sized(op, ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
        self._views[op.results[0]] = View(self._buffer_numbers[source],
                                          self._sized(op, ir.MemRefType(source.type).shape),
                                          offset, sizes, tuple(strides), str(op.results[0].type))
        return None

    def _at_run_size(self, op: ir.Operation, value: ir.Value) -> int:
        """The value of a scalar computed from constants and the dynamic
        extent's size alone (a view's offset or stride), at this run's size."""
        owner = value.owner
        if isinstance(owner, ir.Block):
            raise located(op, f"kernel @{self.name}: a view's offset or stride must be computed "
                              "from constants and the size, not a block argument")
        name = owner.name
        if name in ("arith.constant", "memref.dim"):
            return self._template[self._operand(op, value)]
        if name in _PASS_THROUGH:
            return self._at_run_size(op, owner.operands[0])
        if name in _INT_ARITHMETIC:
            lhs, rhs = (self._at_run_size(op, v) for v in owner.operands)
            return _INT_ARITHMETIC[name](lhs, rhs)
        raise located(op, f"kernel @{self.name}: a view's offset or stride must be computed from "
                          f"constants and the size, not by {name}")

    def _sized(self, op: ir.Operation, shape) -> tuple[int, ...]:
        """`shape` with its dynamic extents at the run's size."""
        shape = tuple(shape)
        if any(ir.ShapedType.is_dynamic_size(d) for d in shape):
            if self.extent is None:
                raise located(op, f"kernel @{self.name}: a dynamic extent needs a size to run "
                                  "at")
        return at_size(shape, self.extent)

    def _dim(self, op: ir.Operation) -> None:
        source = op.operands[0]
        if source not in self._buffer_numbers:
            raise located(op, f"kernel @{self.name}: memref.dim must read a kernel buffer")
        dim = self._template[self._operand(op, op.operands[1])]
        self._template[self._slot(op.results[0])] = \
            self._sized(op, ir.MemRefType(source.type).shape)[dim]
        return None

    def _view_of(self, op: ir.Operation, value: ir.Value) -> View:
        if value in self._views:
            return self._views[value]
        if value in self._buffer_numbers:
            shape = self._sized(op, ir.MemRefType(value.type).shape)
            strides = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
            view = View(self._buffer_numbers[value], shape, 0, shape, strides,
                        str(value.type))
            self._views[value] = view
            return view
        raise located(op, f"kernel @{self.name}: {op.name} must access a kernel buffer or a view "
                          "of one")

    def _access(self, op: ir.Operation, view: View, tile_type: ir.Type) -> TileAccess:
        try:
            return TileAccess(view, _shape(tile_type))
        except ValueError as error:
            raise located(op, f"kernel @{self.name}: {error}") from None

    def _load(self, op: ir.Operation) -> _Step:
        segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        view = self._view_of(op, op.operands[0])
        access = self._access(op, view, op.results[0].type)
        offsets = [self._operand(op, v) for v in op.operands[1:1 + segments[1]]]
        mask = self._operand(op, op.operands[1 + segments[1]]) if segments[2] else None
        # Unspecified padding is NaN, so that a consumer that reads it shows.
        padding = ir.FloatAttr(op.attributes["padding"]).value if "padding" in op.attributes \
            else math.nan
        buffer, result = view.buffer, self._slot(op.results[0])

        def load(frame):
            values = frame.values
            values[result] = access.load(frame.buffers[buffer], [values[o] for o in offsets],
                                         None if mask is None else values[mask], padding)
        return load

    def _gather(self, op: ir.Operation) -> _Step:
        gathered = op.opview
        view = self._view_of(op, gathered.src)
        offsets = [self._operand(op, v) for v in gathered.offsets]
        indices = self._operand(op, gathered.indices)
        mask = None if gathered.mask is None else self._operand(op, gathered.mask)
        padding = ir.FloatAttr(op.attributes["padding"]).value if "padding" in op.attributes \
            else math.nan
        dim = ir.IntegerAttr(op.attributes["dim"]).value
        shape = _shape(op.results[0].type)
        buffer, result = view.buffer, self._slot(op.results[0])

        def gather(frame):
            values = frame.values
            values[result] = memory.gather(frame.buffers[buffer], view,
                                           [values[o] for o in offsets], values[indices], dim,
                                           shape, None if mask is None else values[mask], padding)
        return gather

    def _store(self, op: ir.Operation) -> _Step:
        segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        view = self._view_of(op, op.operands[1])
        if view.buffer < self.num_inputs:
            raise located(op, f"kernel @{self.name}: kg.tile_store writes into input buffer "
                              f"#{view.buffer}")
        access = self._access(op, view, op.operands[0].type)
        value = self._operand(op, op.operands[0])
        offsets = [self._operand(op, v) for v in op.operands[2:2 + segments[2]]]
        mask = self._operand(op, op.operands[2 + segments[2]]) if segments[3] else None
        buffer, grid = view.buffer, self.grid
        result_number = buffer - self.num_inputs
        what = f"result #{result_number} ({self.kernel.results[result_number].type})"

        def store(frame):
            values = frame.values
            access.store(frame.buffers[buffer], frame.writers[buffer],
                         [values[o] for o in offsets], values[value],
                         None if mask is None else values[mask], frame.number, grid, what)
        return store

    # -- tiles --------------------------------------------------------------------

    def _mask(self, op: ir.Operation) -> _Step:
        torch = self._torch
        shape = _shape(op.results[0].type)
        rank = len(shape)
        lower = list(ir.DenseI64ArrayAttr(op.attributes["lower"]))
        upper = list(ir.DenseI64ArrayAttr(op.attributes["upper"]))
        mask_op = op.opview
        offsets = [self._operand(op, v) for v in mask_op.offsets]
        if not len(lower) == len(upper) == len(offsets) == rank:
            raise located(op, f"kernel @{self.name}: kg.tile_mask needs one offset, lower and "
                              f"upper bound per axis of its {list(shape)} tile")
        # Dimensions bounded at run time too: the slot of each one's bound.
        dynamic = {d: self._operand(op, v)
                   for d, v in zip(mask_op.dynamic_dims or [], mask_op.dynamic_upper)}
        axes = [(offset, torch.arange(n).reshape([n if k == d else 1 for k in range(rank)]), n,
                 low, high, dynamic.get(d))
                for d, (offset, n, low, high) in enumerate(zip(offsets, shape, lower, upper))]
        everywhere = torch.ones(shape, dtype=torch.bool)
        result = self._slot(op.results[0])

        def mask(frame):
            values = frame.values
            inside = None
            for offset, lane, count, low, static_high, bound in axes:
                start = values[offset]
                high = static_high if bound is None else min(static_high, values[bound])
                if low <= start and start + count <= high:
                    continue  # every lane along this axis is inside
                index = lane + start
                along = (index >= low) & (index < high)
                inside = along if inside is None else inside & along
            values[result] = everywhere if inside is None else inside.expand(shape)
        return mask

    def _tile_range(self, op: ir.Operation) -> _Step:
        torch = self._torch
        shape = _shape(op.results[0].type)
        axis = ir.IntegerAttr(op.attributes["axis"]).value
        lanes = torch.arange(shape[axis], dtype=torch.int32).reshape(shape)
        offset, result = self._operand(op, op.operands[0]), self._slot(op.results[0])

        def tile_range(frame):
            values = frame.values
            start = values[offset]
            if start + shape[axis] - 1 > 2**31 - 1:
                raise Fault(f"kg.tile_range from {start} over {shape[axis]} lanes passes the "
                            "i32 range (the GPU would wrap)")
            values[result] = lanes + start
        return tile_range

    def _dot(self, op: ir.Operation) -> _Step:
        torch = self._torch
        a_shape, b_shape, acc_shape = (_shape(v.type) for v in op.operands)
        rank = len(a_shape)
        m_axis, k_axis, n_axis = dot_dims(op)
        m, k, n = a_shape[m_axis], a_shape[k_axis], b_shape[n_axis]
        spans = ((m_axis, k_axis), (k_axis, n_axis), (m_axis, n_axis))
        shapes = (a_shape, b_shape, acc_shape)
        if any(len(s) != rank or any(x != 1 for d, x in enumerate(s) if d not in span)
               for s, span in zip(shapes, spans)) or b_shape[k_axis] != k:
            raise located(op, f"kernel @{self.name}: kg.tile_dot takes [..., M, K, 1], "
                              f"[..., 1, K, N] and [..., M, 1, N] with leading axes of 1, got "
                              f"{[list(s) for s in shapes]}")
        tf32 = "precision" in op.attributes and \
            ir.IntegerAttr(op.attributes["precision"]).value == _TF32_PRECISION
        a, b, acc = (self._operand(op, v) for v in op.operands)
        result = self._slot(op.results[0])
        # Lanes of a and b as matrices (rows, columns), whatever order their
        # axes have in the tile.
        a_t = m_axis > k_axis
        b_t = k_axis > n_axis
        c_t = m_axis > n_axis

        def dot(frame):
            values = frame.values
            lhs = values[a].reshape((k, m) if a_t else (m, k)).to(torch.float32)
            rhs = values[b].reshape((n, k) if b_t else (k, n)).to(torch.float32)
            lhs, rhs = (lhs.T if a_t else lhs), (rhs.T if b_t else rhs)
            if tf32:
                lhs, rhs = _round_to_tf32(lhs), _round_to_tf32(rhs)
            product = lhs @ rhs
            values[result] = values[acc] + (product.T if c_t else product).reshape(acc_shape)
        return dot

    def _reference(self, op: ir.Operation) -> _Step:
        operands = [self._operand(op, v) for v in op.operands]
        result = self._slot(op.results[0])

        def evaluate(frame):
            values = frame.values
            values[result] = reference.evaluate_op(op, [values[o] for o in operands])
        return evaluate


def _shape(type_: ir.Type) -> tuple[int, ...] | None:
    if isinstance(type_, ir.ShapedType):
        return tuple(type_.shape)
    return None


def _width(type_: ir.Type) -> int:
    if isinstance(type_, ir.IntegerType):
        return type_.width
    return 64  # index


def _signed_range(type_: ir.Type) -> tuple[float, float]:
    if isinstance(type_, ir.ShapedType):
        return -math.inf, math.inf
    width = _width(type_)
    if width == 1:
        return -math.inf, math.inf
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def _round_to_tf32(x):
    """`x` (f32) rounded to the nearest TF32 value (10 mantissa bits), ties
    away from zero; infinities and NaNs stay."""
    import torch

    bits = x.view(torch.int32)
    rounded = ((bits + 0x1000) & -0x2000).view(torch.float32)
    return torch.where(torch.isfinite(x), rounded, x)
