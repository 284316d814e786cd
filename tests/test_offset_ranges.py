"""The offset range analysis that decides which tile accesses need a mask.

`OffsetRanges` bounds every i32 offset of a tile program; `kg-pad-mask`
drops the mask of an access whose lanes those bounds keep inside the
buffer. The first tests ask the analysis about hand-built offset
arithmetic; the rest check, on compiled graphs, that an access gets a mask
bound on exactly the axes where some program's tile runs past the end
(and that the kernels, run on the CPU, need no more: the executor fails on
any unmasked lane outside its buffer).
"""

from __future__ import annotations

import pytest
from mlir import ir
from mlir.dialects import func, scf

import kgc
from kgc.tiling.index_maps import ceil_div, next_power_of_two
from kgc.tiling.kernel_ops import int_array, kernels_in, walk_ops
from kgc.tiling.ranges import UNKNOWN, OffsetRanges
from tests.cases import tiled

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class Offsets:
    """i32 offset arithmetic built op by op (never verified: only its
    def-use chains matter to the analysis)."""

    def __init__(self):
        self.context = ir.Context()
        self.location = ir.Location.unknown(self.context)
        with self.context, self.location:
            self.module = ir.Module.create()
            self.i32 = ir.IntegerType.get_signless(32)
        self.point = ir.InsertionPoint(self.module.body)

    def _create(self, name: str, operands=(), attributes=None) -> ir.Value:
        with self.context, self.location, self.point:
            return ir.Operation.create(name, results=[self.i32], operands=list(operands),
                                       attributes=attributes or {}).result

    def const(self, value: int) -> ir.Value:
        with self.context:
            return self._create("arith.constant",
                                attributes={"value": ir.IntegerAttr.get(self.i32, value)})

    def program_id(self, axis: int = 0) -> ir.Value:
        with self.context:
            return self._create("kg.program_id",
                                attributes={"axis": ir.IntegerAttr.get(self.i32, axis)})

    def __getattr__(self, op: str):
        if op not in ("addi", "subi", "muli", "divsi", "remsi", "minsi", "maxsi"):
            raise AttributeError(op)
        return lambda a, b: self._create(f"arith.{op}", [a, b])

    def loop(self, lower: ir.Value, upper: ir.Value, step: ir.Value) -> ir.Value:
        """The induction variable of a new loop; ops made after it go inside."""
        with self.context, self.location, self.point:
            loop = scf.ForOp(lower, upper, step)
        with self.context, self.location, ir.InsertionPoint(loop.body):
            scf.YieldOp([])
        self.point = ir.InsertionPoint.at_block_terminator(loop.body)
        return loop.induction_variable

    def argument(self) -> ir.Value:
        """An i32 the analysis knows nothing about."""
        with self.context, self.location, ir.InsertionPoint(self.module.body):
            function = func.FuncOp("unknown", ([self.i32], []))
            return function.add_entry_block().arguments[0]


@pytest.fixture
def b():
    return Offsets()


def test_constants_and_program_ids(b):
    ranges = OffsetRanges([5, 3, 1])
    assert ranges.of(b.const(7)) == (7, 7)
    assert ranges.of(b.program_id(0)) == (0, 4)
    assert ranges.of(b.program_id(1)) == (0, 2)
    assert ranges.of(b.program_id(2)) == (0, 0)


def test_one_program_has_id_zero(b):
    assert OffsetRanges([1, 1, 1]).of(b.program_id()) == (0, 0)


def test_tile_offsets_of_the_grid(b):
    ranges = OffsetRanges([5, 1, 1])
    row = b.muli(b.program_id(), b.const(4))
    assert ranges.of(row) == (0, 16)
    assert ranges.of(b.addi(row, b.const(3))) == (3, 19)
    # A concat input read at offsets shifted down: negative starts.
    assert ranges.of(b.subi(row, b.const(3))) == (-3, 13)
    assert ranges.of(b.subi(b.const(10), row)) == (-6, 10)


def test_division_remainder_and_min_of_program_ids(b):
    ranges = OffsetRanges([12, 1, 1])
    pid = b.program_id()
    assert ranges.of(b.divsi(pid, b.const(4))) == (0, 2)
    assert ranges.of(b.remsi(pid, b.const(4))) == (0, 3)
    # A remainder by more than the dividend can reach leaves it as it is.
    assert ranges.of(b.remsi(pid, b.const(100))) == (0, 11)
    assert ranges.of(b.minsi(pid, b.const(5))) == (0, 5)
    assert ranges.of(b.maxsi(pid, b.const(5))) == (5, 11)


def test_signed_division_by_a_negative_number_is_unknown(b):
    ranges = OffsetRanges([12, 1, 1])
    assert ranges.of(b.divsi(b.program_id(), b.const(-4))) == UNKNOWN
    assert ranges.of(b.remsi(b.subi(b.program_id(), b.const(6)), b.const(4))) == UNKNOWN


@pytest.mark.parametrize("upper,step,last", [
    (1000, 256, 768),   # last step partial: 768 + 256 > 1000
    (1024, 256, 768),   # exact multiple
    (1, 64, 0),         # extent 1: one step
    (256, 256, 0),      # one whole step
])
def test_loop_induction_variables(b, upper, step, last):
    iv = b.loop(b.const(0), b.const(upper), b.const(step))
    assert OffsetRanges([1, 1, 1]).of(iv) == (0, last)


def test_an_empty_loop_stays_at_its_start(b):
    iv = b.loop(b.const(5), b.const(5), b.const(1))
    assert OffsetRanges([1, 1, 1]).of(iv) == (5, 5)


def test_nested_loops_and_program_offsets_add_up(b):
    row = b.muli(b.program_id(), b.const(16))
    column = b.loop(b.const(0), b.const(100), b.const(32))
    assert OffsetRanges([3, 1, 1]).of(b.addi(row, column)) == (0, 32 + 96)


def test_a_split_k_loop_stays_below_its_largest_end(b):
    # Split s of 4 walks k from s * 192 to min(s * 192 + 192, 700).
    start = b.muli(b.program_id(1), b.const(192))
    end = b.minsi(b.addi(start, b.const(192)), b.const(700))
    iv = b.loop(start, end, b.const(64))
    assert OffsetRanges([1, 4, 1]).of(iv) == (0, 699)


def test_what_is_not_constant_is_unknown(b):
    unknown = b.argument()
    ranges = OffsetRanges([4, 1, 1])
    assert ranges.of(unknown) == UNKNOWN
    assert ranges.of(b.muli(unknown, b.const(4))) == UNKNOWN
    assert ranges.of(b.addi(b.program_id(), unknown)) == UNKNOWN
    assert ranges.of(b.loop(b.const(0), unknown, b.const(4))) == UNKNOWN
    assert ranges.of(b.loop(b.const(0), b.const(8), unknown)) == UNKNOWN


# -- the masks kg-pad-mask keeps -------------------------------------------------


def accesses(kernel: ir.Operation):
    """(op name, view sizes, tile shape, upper bounds of its mask or None)
    of every load and store of `kernel`."""
    found = []
    for op in walk_ops(kernel):
        if op.name not in ("kg.tile_load", "kg.tile_store"):
            continue
        is_load = op.name == "kg.tile_load"
        segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        view = op.operands[0 if is_load else 1]
        tile = op.results[0].type if is_load else op.operands[0].type
        has_mask = segments[2] if is_load else segments[3]
        upper = None
        if has_mask:
            mask = op.operands[len(op.operands) - 1].owner
            assert mask.name == "kg.tile_mask", "a mask that is not a kg.tile_mask"
            upper = list(ir.DenseI64ArrayAttr(mask.attributes["upper"]))
            assert set(ir.DenseI64ArrayAttr(mask.attributes["lower"])) == {INT32_MIN}, \
                "offsets from the grid never start below 0"
        found.append((op.name, list(ir.MemRefType(view.type).shape),
                      list(ir.RankedTensorType(tile).shape), upper))
    assert found, "a kernel without loads or stores"
    return found


def runs_past_the_end(kernel: ir.Operation, axis: int) -> bool:
    """Whether the last tile along iteration `axis` (by the grid, a loop,
    or one tile over the whole axis) reaches past its end, padding
    included."""
    extent = int_array(kernel, "iteration")[axis]
    tile = int_array(kernel, "tile")[axis]
    return (ceil_div(extent, tile) - 1) * tile + next_power_of_two(tile) > extent


def expected_upper(kernel: ir.Operation, sizes) -> list[int] | None:
    """The upper mask bounds that an access through a view of `sizes` needs
    (None: no mask). Axis d of a view follows iteration axis d, or is a
    broadcast axis of size 1 read at 0."""
    extents = int_array(kernel, "iteration")
    upper = [size if size == extent and runs_past_the_end(kernel, axis) else INT32_MAX
             for axis, (size, extent) in enumerate(zip(sizes, extents))]
    return None if all(bound == INT32_MAX for bound in upper) else upper


def assert_masked_exactly_where_tiles_overrun(kernel: ir.Operation) -> None:
    for name, sizes, tile, upper in accesses(kernel):
        assert upper == expected_upper(kernel, sizes), f"{name} of {sizes} in tiles of {tile}"


_modules = []  # the modules of the kernels handed out, kept alive


def only_kernel(graph: kgc.Graph) -> ir.Operation:
    module = tiled(graph)
    _modules.append(module)
    kernels = kernels_in(module)
    assert len(kernels) == 1
    return kernels[0]


def pointwise(shape, transpose=False, bias=False) -> kgc.Graph:
    g = kgc.Graph("pointwise")
    x = g.input("x", shape, "f32")
    y = g.exp(x)
    if transpose:
        y = g.transpose(y, tuple(reversed(range(len(shape)))))
    if bias:
        y = y + g.input("bias", y.shape[-1:], "f32")
    g.output(y)
    return g


SHAPES = ((1,), (3,), (17,), (1000,), (1024,), (4097,), (4096,), (1, 1), (3, 17), (17, 1000),
          (16, 1024), (64, 1024), (17, 1024), (16, 1000), (5, 4097), (1000, 3))


@pytest.mark.parametrize("shape,view", [(shape, view) for shape in SHAPES
                                        for view in ("identity", "transpose", "bias")
                                        if view != "bias" or len(shape) > 1])
def test_an_access_is_masked_on_the_axes_its_last_tile_overruns(shape, view):
    kernel = only_kernel(pointwise(shape, transpose=view == "transpose", bias=view == "bias"))
    assert_masked_exactly_where_tiles_overrun(kernel)


def test_exact_tiles_leave_every_access_unmasked():
    for shape in ((1,), (1, 1), (1024,), (64, 1024), (4096,)):
        assert all(upper is None for *_, upper in accesses(only_kernel(pointwise(shape)))), shape


def test_a_partial_last_tile_is_masked():
    # 4097 rows in tiles of 4 (kgc's default: enough programs to fill the
    # SMs): the last tile holds one row.
    kernel = only_kernel(pointwise((4097, 1000)))
    assert 1 < int_array(kernel, "tile")[0] < 4097
    assert [upper for *_, upper in accesses(kernel)] == [[4097, 1000], [4097, 1000]]


def test_a_transposed_read_is_masked_in_the_view_it_reads():
    # Reading x (17 x 1000) transposed: the view is 1000 x 17, strided.
    kernel = only_kernel(pointwise((17, 1000), transpose=True))
    load, store = accesses(kernel)
    assert load[1] == store[1] == [1000, 17]
    assert load[3] == store[3] == expected_upper(kernel, [1000, 17])
    assert load[3][1] == 17  # 17 columns are padded to a power of two


def test_a_transposed_read_of_exact_tiles_is_unmasked():
    kernel = only_kernel(pointwise((64, 1024), transpose=True))
    assert all(upper is None for *_, upper in accesses(kernel))


def test_a_broadcast_operand_is_masked_only_along_the_axis_it_varies():
    kernel = only_kernel(pointwise((17, 1000), bias=True))
    bias = [a for a in accesses(kernel) if a[1] == [1, 1000]]
    assert len(bias) == 1
    _, _, tile, upper = bias[0]
    assert tile[0] == 1 and upper == [INT32_MAX, 1000]


def test_a_broadcast_operand_of_exact_tiles_is_unmasked():
    kernel = only_kernel(pointwise((64, 1024), bias=True))
    assert all(upper is None for *_, upper in accesses(kernel))


def test_a_slice_is_masked_against_its_own_extent_not_its_buffer():
    # A 8 x 256 window at (1, 3), strided, of a 17 x 1000 buffer: the view
    # starts inside the buffer and the tiles divide the window exactly.
    g = kgc.Graph("window")
    x = g.input("x", (17, 1000), "f32")
    g.output(g.exp(g.slice(x, (1, 3), (8, 256), (2, 3))))
    kernel = only_kernel(g)
    load = next(a for a in accesses(kernel) if a[0] == "kg.tile_load")
    assert load[1] == [8, 256] and load[3] is None
    # 300 columns in tiles of powers of two: the last one is partial.
    g = kgc.Graph("window")
    x = g.input("x", (17, 1000), "f32")
    g.output(g.exp(g.slice(x, (1, 3), (8, 300), (2, 3))))
    load = next(a for a in accesses(only_kernel(g)) if a[0] == "kg.tile_load")
    assert load[1] == [8, 300] and load[3] is not None and load[3][1] == 300


@pytest.mark.parametrize("shape,target", [((17, 1000), (17, 10, 100)), ((3, 17, 5), (51, 5)),
                                          ((64, 1024), (64, 32, 32)), ((4097,), (1, 4097, 1))])
def test_reshaped_reads_are_masked_where_their_tiles_overrun(shape, target):
    g = kgc.Graph("reshaped")
    x = g.input("x", shape, "f32")
    g.output(g.exp(g.reshape(x, target)))
    assert_masked_exactly_where_tiles_overrun(only_kernel(g))


ROWS_BY_SECOND_GRID_AXIS = """
func.func @f(%x: tensor<17xf32>) -> tensor<17xf32> {
  %y = kg.kernel @rows_0(%x) attributes {grid = array<i64: 1, 5, 1>, iteration = array<i64: 17>, tile = array<i64: 4>} : (tensor<17xf32>) -> tensor<17xf32> {
  ^bb0(%a: memref<17xf32>, %out: memref<17xf32>):
    %pid = kg.program_id 1 : i32
    %c4 = arith.constant 4 : i32
    %row = arith.muli %pid, %c4 : i32
    %t = kg.tile_load %a[%row] : memref<17xf32> -> tensor<4xf32>
    %e = kg.exp %t : tensor<4xf32>
    kg.tile_store %e, %out[%row] : tensor<4xf32>, memref<17xf32>
    kg.yield
  }
  return %y : tensor<17xf32>
}
"""


def test_a_kernel_gridded_along_its_second_axis_is_masked_and_runs_in_bounds():
    # Five programs along grid axis 1: the bound of that axis, not axis 0's
    # single program, decides that the last tile of rows 16..19 needs a mask.
    torch = pytest.importorskip("torch")
    from kgc.execution import run_tiled
    from kgc.parsing import parse_text
    from kgc.pipeline import Pipeline

    context = ir.Context()
    module = parse_text(ROWS_BY_SECOND_GRID_AXIS, "rows.mlir", context)
    Pipeline.parse("builtin.module(kg-pad-mask)").run(module)
    (kernel,) = kernels_in(module)
    assert [upper for *_, upper in accesses(kernel)] == [[17], [17]]
    x = torch.randn(17)
    torch.testing.assert_close(run_tiled(module, "f", x), torch.exp(x))
