"""Split-K: a matmul kernel whose k loop is shared out between programs.

A matmul with few (m, n) tiles (M of 1 to 16 rows) launches too few
programs to keep the GPU's memory busy. With `split_k = S` (a
`MatmulConfig` knob) the kernel becomes two kernels:

1. partials: programs walk the (batch, m, n) tiles times S splits (grid
   dimension after the tiles' own); split s runs the k loop over its
   `chunk` of k (a multiple of block_k; the last split stops at K) and
   stores what each reduction over k has summed so far: the f32
   accumulator of every matmul into a workspace [S, batch..., M, N], and
   the partial result of every kg.reduce over k (the sum of squares of an
   RMSNorm) into a workspace [S, *its shape];
2. reduce: programs walk the (batch, m, n) tiles; each sums the S partials
   of every workspace in order s = 0, 1, ... (so the result does not
   depend on the order programs run), then applies everything the matmul
   kernel applies after its k loop: the factors moved out of the dot (the
   1/rms of an RMSNorm, from the summed sum of squares), bias, activations,
   residual adds, the silu(a) * b of a gated MLP, the stores.

The workspaces are results of the first kernel and operands of the second,
so the runtime, the C export and the search treat them like any tensor
between two kernels. The split index is a program id: the tile program of
each kernel is the one kgc's matmul generator writes (`MatmulGenerator`), with
the k loop bounded by the split, and the loop's reductions stored and
reloaded around the cut.

A kernel can be split when all its reductions over k run in one loop (no
reduction over k needs the result of another, as a softmax over k would)
and no result varies along k; `attach` raises Unplannable otherwise.
"""

from __future__ import annotations

import dataclasses

from kgc.tiling.config import ConfigError, MatmulConfig
from kgc.tiling.constants import COMBINE, NEUTRAL
from kgc.tiling.generate import DryBuilder, Tile
from kgc.tiling.graph_model import Node, topological
from kgc.tiling.index_maps import BufferView, ceil_div, next_power_of_two
from kgc.tiling.iteration import Unplannable
from kgc.tiling.matmul_generator import MatmulGenerator
from kgc.tiling.matmul_plan import MatmulPlan, SplitK
from kgc.tiling.schedule import SourceKernel, TiledForm

__all__ = ["SplitK", "PartialsGenerator", "ReduceGenerator", "attach", "partials_grid",
           "partials_form", "reduce_config", "reduce_inputs", "reduce_kernel", "split_count",
           "workspace_element", "workspace_shape"]


def split_count(requested: int | None, k_extent: int, block_k: int) -> int:
    """The splits a kernel gets for `split_k = requested`: at most one per
    k step, and no more than it takes to give every split k steps (16 k
    steps in 3 splits: chunks of 6, 6 and 4 steps)."""
    if requested is None or requested <= 1:
        return 1
    steps = ceil_div(k_extent, block_k)
    per_split = ceil_div(steps, min(requested, steps))
    return ceil_div(steps, per_split)


def workspace_element(node: Node) -> str:
    """A matmul's partials are its f32 accumulator; a reduce's its type."""
    return "f32" if node.op == "matmul" else node.element


def workspace_shape(split: SplitK, node: Node) -> tuple[int, ...]:
    return (split.count,) + tuple(node.shape)


def attach(plan: MatmulPlan, count: int, kernel: str | None) -> None:
    """Makes `plan` (a matmul plan with a k loop) a split-K plan of `count`
    splits; raises Unplannable when the kernel cannot be split, ConfigError
    for knobs that exclude one another."""
    where = f"matmul kernel @{kernel}" if kernel else "matmul kernel"
    m_axis, k_axis, n_axis = plan.matmul_axes
    if plan.config.num_programs is not None:
        raise ConfigError(f"{where}: split_k = {count} and num_programs = "
                          f"{plan.config.num_programs} cannot both be set; a split kernel "
                          "launches one program per tile and split")
    if k_axis not in plan.loop_axes:
        raise Unplannable(f"split_k = {count} needs a k loop, but k = {plan.extents[k_axis]} "
                          "is one block_k step")
    if len(plan.phases) != 1 or tuple(plan.phases[0][0]) != (k_axis,):
        raise Unplannable(f"split_k = {count} needs every reduction over k in one loop; "
                          "this kernel has reductions over k that read one another")
    for output, index_map in zip(plan.outputs, plan.output_maps):
        probe = MatmulGenerator(plan, DryBuilder())
        if k_axis in probe._axes(output, index_map):
            raise Unplannable(f"split_k = {count}: result kg.{output.op} {output.shape} varies "
                              "along k, which the split cuts")
    grid_dimension = len(plan.grid_dimensions())
    if grid_dimension > 2:
        raise Unplannable(f"split_k = {count}: the tiles use all three grid dimensions")
    block_k = plan.tile[k_axis]
    steps = ceil_div(plan.extents[k_axis], block_k)
    plan.split = SplitK(count, ceil_div(steps, count) * block_k, list(plan.phases[0][1]),
                        grid_dimension)
    PartialsGenerator(plan, DryBuilder()).run()
    ReduceGenerator(plan, DryBuilder(), list(range(_input_count(plan))), _input_count(plan)).run()


def _input_count(plan: MatmulPlan) -> int:
    return 1 + max((n.input_index for n in topological(plan.outputs) if n.is_input), default=-1)


def partials_grid(plan: MatmulPlan) -> list[int]:
    """The grid of the partials kernel: the tiles', then the splits."""
    grid = plan.grid()
    grid[plan.split.grid_dimension] = plan.split.count
    return grid


def partials_form(plan: MatmulPlan) -> TiledForm:
    """The tiled kernel of a split plan: the partials kernel, whose results
    are the workspaces and whose grid walks the splits too."""
    return TiledForm(suffix="_partials",
                     results=[(workspace_shape(plan.split, node), workspace_element(node))
                              for node in plan.split.partials],
                     grid=partials_grid(plan))


def reduce_kernel(plan: MatmulPlan, partials: list, source: SourceKernel):
    """The reduce kernel of a split plan, tiled, built at the current
    insertion point: it reads the workspaces `partials` and the inputs of
    `source` that the epilogue needs, and gives the group's outputs."""
    from mlir import ir

    from kgc.tiling.kernel_ops import CONFIG_ATTRIBUTE
    from kgc.tiling.mlir_builder import tiled_kernel

    used = reduce_inputs(plan)
    renumbered = [None] * len(source.inputs)
    for position, index in enumerate(used):
        renumbered[index] = position
    # Warps given for every kernel (kg-tile's option) are the reduce
    # kernel's too; the partials kernel has them through its config.
    config = reduce_config(plan, source.options.num_warps if source.options is not None else None)
    attributes = dict(source.attributes)
    attributes["kind"] = ir.StringAttr.get(plan.kind)
    attributes["iteration"] = ir.DenseI64ArrayAttr.get(list(plan.extents))
    attributes["tile"] = ir.DenseI64ArrayAttr.get(list(plan.tile))
    attributes[CONFIG_ATTRIBUTE] = config.to_attribute()
    attributes["grid"] = ir.DenseI64ArrayAttr.get(plan.grid())
    attributes["sym_name"] = ir.StringAttr.get(f"{source.name}_reduce")
    return tiled_kernel(
        [source.inputs[i] for i in used] + list(partials), source.result_types, attributes,
        source.location, lambda b: ReduceGenerator(plan, b, renumbered, len(used)).run())


def reduce_config(plan: MatmulPlan, num_warps: int | None = None) -> MatmulConfig:
    """The launch knobs of the reduce kernel: the matmul's (m, n) tiles,
    `num_warps` when the user asks for warps on every kernel (kg-tile's
    option), else warps for an f32 tile of them, two stages to overlap the
    loads of consecutive splits."""
    m_axis, _, n_axis = plan.matmul_axes
    lanes = next_power_of_two(plan.tile[m_axis]) * next_power_of_two(plan.tile[n_axis])
    warps = num_warps or (8 if lanes >= 128 * 128 else 4 if lanes >= 1024
                          else 2 if lanes >= 256 else 1)
    return MatmulConfig(num_warps=warps, num_stages=2, block_m=plan.config.block_m,
                        block_n=plan.config.block_n, split_k=plan.split.count)


class _SplitGenerator(MatmulGenerator):
    def _workspace_view(self, node: Node) -> tuple[BufferView, frozenset, list]:
        """The view of `node`'s workspace [S, *shape] in the iteration space
        (the split index runs along the k axis, which the partials do not
        vary along), the axes it varies along and the offsets of this
        program's tile (the split's own still to be set)."""
        k_axis = self.plan.matmul_axes[1]
        index_map = self.plan.maps[node]
        strides, offset = BufferView.contiguous(node.shape).address_map(index_map)
        strides = list(strides)
        strides[k_axis] = node.numel
        axes = frozenset(a for a, s in enumerate(strides) if s != 0 and a != k_axis)
        sizes = tuple(self.plan.split.count if a == k_axis else
                      index_map.windows[a][1] - index_map.windows[a][0] if a in axes else 1
                      for a in range(self.n))
        offsets = [self.offsets[a] if a in axes else self.b.const(0) for a in range(self.n)]
        return BufferView(sizes, tuple(strides), offset), axes, offsets

    def _partial_tile(self, node: Node) -> Tile:
        if node.op == "matmul":
            return self.matmul_accumulators[id(node)]
        return self.memo[self.base][(id(node), self._natural_map(node))]


class PartialsGenerator(_SplitGenerator):
    """The first kernel: split s of each tile sums its chunk of k and
    stores every reduction's partial result into workspace (output) j."""

    def _program_offsets(self) -> None:
        super()._program_offsets()
        split = self.plan.split
        k_extent = self.plan.extents[self.plan.matmul_axes[1]]
        self.split_index = self.b.program_id(split.grid_dimension)
        self.k_start = self.b.scalar("mul", self.split_index, self.b.const(split.chunk))
        self.k_end = self.b.scalar("min", self.b.scalar("add", self.k_start, self.b.const(split.chunk)),
                                   self.b.const(k_extent))

    def _loop_bounds(self, axis: int) -> dict:
        if axis == self.plan.matmul_axes[1]:
            return {"start": self.k_start, "end": self.k_end}
        return {}

    def _tile_program(self) -> None:
        for axes, nodes in self.plan.phases:
            self._run_phase(list(axes), nodes)
        k_axis = self.plan.matmul_axes[1]
        for index, node in enumerate(self.plan.split.partials):
            tile = self._cast(self._partial_tile(node), workspace_element(node))
            view, axes, offsets = self._workspace_view(node)
            offsets[k_axis] = self.split_index
            value = tile.value
            if tile.axes != axes:
                value = self.b.broadcast(value, tile.element, self._shape(axes))
            self.b.store(index, tile.element, value, view, offsets, self._shape(axes))


class ReduceGenerator(_SplitGenerator):
    """The second kernel: sums the partials of each tile over the splits
    in order, then writes the matmul kernel's epilogue and results.
    `input_indices` renumbers the matmul kernel's inputs (those the
    epilogue reads); workspace j is input `workspace_base + j`."""

    def __init__(self, plan: MatmulPlan, builder, input_indices: list[int | None],
                 workspace_base: int):
        super().__init__(plan, builder)
        self.input_indices = input_indices
        self.workspace_base = workspace_base

    def _load(self, source: Node, view: BufferView, index_map, axes) -> Tile:
        renumbered = self.input_indices[source.input_index]
        if renumbered is None:
            raise Unplannable(f"the epilogue of a split-K kernel reads input #{source.input_index}, "
                              "which its reduce kernel does not take")
        return super()._load(dataclasses.replace(source, input_index=renumbered), view,
                             index_map, axes)

    def _tile_program(self) -> None:
        k_axis = self.plan.matmul_axes[1]
        partials = self.plan.split.partials
        accesses = []
        inits = []
        for node in partials:
            view, axes, offsets = self._workspace_view(node)
            element = workspace_element(node)
            kind = "sum" if node.op == "matmul" else node.attrs["kind"]
            accesses.append((view, axes, offsets, element, kind))
            inits.append(self.b.constant(NEUTRAL[kind], element, self._shape(axes)))
        with self.b.loop(None, self.plan.split.count, 1, inits) as body:
            results = []
            for index, ((view, axes, offsets, element, kind), carried) in enumerate(
                    zip(accesses, body.carried)):
                at = list(offsets)
                at[k_axis] = body.offset
                part = self.b.load(self.workspace_base + index, element, view, at, self._shape(axes))
                results.append(self.b.elementwise(COMBINE[kind], [carried, part], {}, element,
                                                  self._shape(axes)))
            body.results = results
        for node, (view, axes, _, element, _), final in zip(partials, accesses, body.finals):
            total = Tile(final, axes, element)
            if node.op == "matmul":
                self.matmul_accumulators[id(node)] = total
            else:
                self.memo[self.base][(id(node), self._natural_map(node))] = \
                    self._cast(total, node.element)
        for index, (output, index_map) in enumerate(zip(self.plan.outputs, self.plan.output_maps)):
            self._store(index, output, index_map)


def reduce_inputs(plan: MatmulPlan) -> list[int]:
    """The matmul kernel's inputs that its reduce kernel reads (the
    epilogue's), in order."""
    recorder = _LoadRecorder()
    count = _input_count(plan)
    ReduceGenerator(plan, recorder, list(range(count)), count).run()
    return sorted(i for i in recorder.inputs if i < count)


class _LoadRecorder(DryBuilder):
    def __init__(self):
        self.inputs: set[int] = set()

    def load(self, input_index, *args):
        self.inputs.add(input_index)
        return None
