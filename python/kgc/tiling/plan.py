"""The built-in schedules of reductions and pointwise kernels, and the
planning steps every schedule of the generic generator shares
(`finish_plan`, `knob`, `check_index_range`).

Each is a `Schedule` (`kgc.tiling.schedule`): `plan` picks its iteration
space, tiles, grid and loops from a `KernelConfig` of its kind (kgc's
heuristics fill in the knobs the config leaves open); the generic
generator (`kgc.tiling.generate`) writes their tile programs.
`kgc.tiling.registry` lists them, after attention and matmul
(`kgc.tiling.matmul`):

* reduction: iteration axes (kept..., reduced...) of the largest reduce,
  its kept axes split where a value computed in the kernel splits them
  (`_finer_kept_shape`: a loss's [tokens] rows stored as [batch, seq]).
  Programs walk the kept axes; the reduced axes are one tile when they fit
  ("persistent") and loops otherwise, one loop per phase of dependent
  reductions (softmax: max, then sum, then the output). A reduction that
  keeps its input's last axis (a weight's gradient summed over the tokens:
  `reduces_across_rows`) takes a band of contiguous columns a program and
  walks the strided rows down it.
* pointwise: iteration axes are the shape of the first output of the most
  elements, or of a value computed in the kernel (not a view) of as many
  elements in more dims, which the outputs' merged dims follow
  (`_iteration_node`); programs walk 2-D tiles of the last two axes.

Every value is read at an affine map of the iteration (`IndexMap`); the
maps are inferred from the anchors (`kgc.tiling.iteration`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.targets import Target
from kgc.tiling.config import KernelConfig, PointwiseConfig, ReductionConfig
from kgc.tiling.dynamic import NotAtEverySize, marked_dims, reduced_dynamic_axis
from kgc.tiling.graph_model import EXTENT_HINT, VIEW_OPS, Node, topological
from kgc.tiling.index_maps import IndexMap, ceil_div, next_power_of_two, product
from kgc.tiling.iteration import (KernelPlan, Unplannable, axes_of, infer_maps,
                                  reduce_input_map)
from kgc.tiling.schedule import Schedule, canonical_or_none, widest_input
from kgc.tuned_defaults import TableKey

__all__ = ["KernelPlan", "PointwiseSchedule", "ReductionSchedule", "Unplannable",
           "check_index_range", "finish_plan", "knob"]

# Register budget of a tile, in elements, for reductions and pointwise tiles.
_TILE_ELEMENTS = 4096
_LOOPED_REDUCTION_BLOCK = 2048
# Warps of a program that walks its row in steps of at least
# _LOOPED_REDUCTION_BLOCK (see _plan_reduction).
_LOOPED_REDUCTION_WARPS = 16
_POINTWISE_BLOCK_N = 1024
# Columns a program of a reduction across rows takes at most and at least
# (`_column_band`).
_COLUMN_BAND = 32
NARROWEST_COLUMN_BAND = 8
# Programs per SM below which an elementwise or reduction kernel takes fewer
# rows a tile.
_PROGRAMS_PER_SM = 4
_GRID_LIMIT = 2**31 - 1
_INDEX_LIMIT = 2**31 - 1


# -- schedules -----------------------------------------------------------------


class ReductionSchedule(Schedule):
    kind = "reduction"
    config_class = ReductionConfig
    dynamic_extents = True

    def match(self, order):
        return any(n.op == "reduce" for n in order)

    def plan(self, outputs, order, config, kernel, target):
        return _plan_reduction(outputs, order, [n for n in order if n.op == "reduce"], config,
                               kernel, target)

    def dynamic_config(self, plan):
        reduced = sorted({axis for axes in plan.reduce_axes.values() for axis in axes})
        if reduced_dynamic_axis(plan) is not None:
            # Reduced along the dynamic extent: the program walks it in steps
            # to the call's size (`dynamic_loop_axis`), so it must loop at
            # the hint too.
            if plan.tile[reduced[-1]] < plan.extents[reduced[-1]]:
                return None
            return dataclasses.replace(plan.config, block_r=EXTENT_HINT // 2, num_warps=None,
                                       num_stages=None)
        # A dynamic extent's rows are whatever each call gives, not the
        # hint's count: the rows per program are the tile's, not fewer to
        # fill the SMs with the hint's rows.
        kept = [a for a in range(len(plan.extents)) if a not in reduced]
        if not kept:
            return None
        cap = _rows_per_tile(plan.tile, plan.extents, reduced)
        rows = _rows_within(plan.extents[kept[-1]], cap)
        if plan.tile[kept[-1]] >= rows:
            return None
        return dataclasses.replace(plan.config, block_x=rows, num_warps=None)

    def dynamic_loop_axis(self, plan):
        # A sum over the tokens when their count is the dynamic extent (a
        # norm weight's gradient in a training step of any length): each
        # program loops over the reduced axis to the call's size, and
        # kg-pad-mask guards the reduction there by the size.
        axis = reduced_dynamic_axis(plan)
        if axis is None:
            return None
        innermost = max(a for axes in plan.reduce_axes.values() for a in axes)
        if axis != innermost or axis not in plan.loop_axes:
            raise NotAtEverySize(f"iteration axis {axis}, of the dynamic extent, is reduced "
                                 "but not as the innermost looped axis; a reduction walks the "
                                 "dynamic extent only as its innermost reduced axis")
        return axis

    def table_key(self, plan):
        # A row's length and how many rows, and how many reductions walk a
        # row (softmax and layer norm two, RMSNorm one): each walk is a pass
        # over memory when the row is looped.
        reduced = {axis for axes in plan.reduce_axes.values() for axis in axes}
        row = product([plan.extents[axis] for axis in reduced])
        rows = product(plan.extents) // row
        reductions = sum(1 for node in plan.reduce_axes if node.op == "reduce")
        # A reduction across rows walks memory another way than one along
        # them: the entries of one do not serve the other.
        across = ",across-rows" if _across_rows(plan) else ""
        return TableKey(widest_input(plan), f"reductions={reductions}{across}",
                        {"rows": rows, "row": row})

    def search_space(self, plan, element, precision, target, runs_on, plannable):
        space, seeds = super().search_space(plan, element, precision, target, runs_on,
                                            plannable)
        if not _across_rows(plan):
            return space, seeds
        # Bands of columns walking the rows in short steps, which the row
        # reductions' space (steps of 256 lanes and more) does not hold: on
        # an H200 the best of 1024 x 512 summed over its rows took 8 columns
        # in steps of 128 rows (benchmarks/column_reductions.py).
        return list(dict.fromkeys([*space, *_band_configs(plan.knob_extents)])), seeds

    def tuned_config(self, plan, table, target):
        # An entry tells how to walk a row of its own kind: whole in one
        # tile, or looped. Its whole 512-column tile, taken as a 512-wide
        # loop step over a 4096-column row, turned a one-pass RMSNorm into a
        # loop (16 x 4096 on an H200: 2.98 us against 1.99 with the row
        # whole): a whole-row entry serves only rows the heuristics take
        # whole, with the tile of this row, and its rows per program only
        # at its own row length.
        found = self.nearest_entry(plan, table)
        if found is None:
            return None
        key, entry = found
        config, row = entry.config, entry.features.get("row")
        whole_there = row is None or config.block_r is None or config.block_r >= row
        if whole_there != (not plan.loop_axes):
            return None
        if whole_there:
            config = dataclasses.replace(config, block_r=None)
            if row != key.features["row"]:
                config = dataclasses.replace(config, block_x=None)
        return canonical_or_none(config, plan)


class PointwiseSchedule(Schedule):
    kind = "pointwise"
    config_class = PointwiseConfig
    dynamic_extents = True

    def match(self, order):
        return True

    def plan(self, outputs, order, config, kernel, target):
        return _plan_pointwise(outputs, order, config, kernel, target)

    def dynamic_config(self, plan):
        # A dynamic extent's rows are whatever each call gives, not the
        # hint's count: a program takes the tile's rows, not fewer to fill
        # the SMs at the hint.
        if len(plan.extents) < 2:
            return None
        rows = _rows_within(plan.extents[-2], _pointwise_row_cap(plan.tile[-1]))
        if plan.tile[-2] >= rows:
            return None
        return dataclasses.replace(plan.config, block_m=rows, num_warps=None)

    def table_key(self, plan):
        # The last axis (contiguous) and the rows over it.
        return TableKey(widest_input(plan), "", {"rows": product(plan.extents[:-1]),
                                                 "n": plan.extents[-1]})


# -- planning ------------------------------------------------------------------


def finish_plan(kind, outputs, order, extents, tile, program_axes, loop_axes, seeds, reduce_axes,
                config: KernelConfig, knob_extents: dict, kernel: str | None, *,
                contraction_axes: tuple[int, int, int] | None = None,
                plan_type: type[KernelPlan] = KernelPlan, **fields) -> KernelPlan:
    """The plan (a `plan_type`, with its own `fields`) once the schedule has
    chosen its iteration space, tiles and loops: the maps of every value
    inferred from `seeds` (matmuls contract over `contraction_axes`),
    checked, and the loop nests of its reductions."""
    maps = infer_maps(order, seeds, reduce_axes, contraction_axes)
    output_maps = []
    for output in outputs:
        if output not in maps:
            raise Unplannable(f"output {output.op} {output.shape} does not follow the kernel's "
                              f"iteration over {extents}")
        if not maps[output].covers(output.shape):
            # A value stored through a window of the iteration (a slice of
            # it read inside the kernel) would be written in part.
            raise Unplannable(f"output {output.op} {output.shape} is only partly reached by "
                              f"the kernel's iteration over {extents}")
        output_maps.append(maps[output])
    for node in order:
        if node.op == "reduce" and node not in reduce_axes:
            raise Unplannable("a reduction does not reduce along axes of the kernel's iteration")
        for axis in reduce_axes.get(node, ()):
            # A program sees one tile of a program axis: it cannot reduce it.
            if tile[axis] < extents[axis] and axis not in loop_axes:
                raise Unplannable(f"kg.{node.op} reduces axis {axis}, which the grid splits "
                                  "between programs")
    plan = plan_type(kind, tuple(extents), tuple(tile), tuple(program_axes), tuple(loop_axes),
                     list(outputs), output_maps, maps, reduce_axes, [],
                     config.canonical(knob_extents, kernel), dict(knob_extents), **fields)
    plan.phases = _phases(plan)
    if plan.num_programs() > _GRID_LIMIT:
        raise Unplannable(f"{plan.num_programs()} programs exceed the grid limit")
    return plan


def _phases(plan: KernelPlan) -> list[tuple[tuple[int, ...], list[Node]]]:
    """Reductions whose input varies along looped axes they reduce, grouped
    into loops: by how many such reductions lie under them (softmax: max
    before sum), and by the looped axes they walk."""
    loop = set(plan.loop_axes)

    def looped_axes(node: Node) -> tuple[int, ...]:
        axes = set(plan.reduce_axes.get(node, ())) & loop
        if not axes:
            return ()
        if node.op == "matmul":
            return tuple(sorted(axes))
        if node not in plan.maps:
            raise Unplannable(f"kg.reduce {node.shape} does not follow the kernel's iteration")
        x_map = reduce_input_map(node, plan.maps[node], plan.reduce_axes[node])
        varying = axes_of(node.operands[0], x_map, plan.reduce_axes, plan.contraction_axes(),
                          plan.matmul_expansions())
        return tuple(sorted(axes & varying))

    depth: dict[Node, int] = {}
    groups: dict[tuple, list[Node]] = {}
    for node in _generation_order(plan):
        # A matmul's factors are applied after its loop: only the operands of
        # its dot must be ready before it.
        expansion = plan.matmul_expansions().get(node)
        inside = [expansion.core_a, expansion.core_b] if expansion else node.operands
        below = max((depth[o] for o in inside), default=0)
        axes = looped_axes(node)
        depth[node] = below + (1 if axes else 0)
        if axes:
            groups.setdefault((depth[node], axes), []).append(node)
    return [(axes, nodes) for (_, axes), nodes in sorted(groups.items())]


def _generation_order(plan: KernelPlan) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()

    def visit(node: Node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for operand in plan.operands_for_generation(node):
            visit(operand)
        order.append(node)

    for output in plan.outputs:
        visit(output)
    return order


def knob(value: int | None, default: int) -> int:
    """A knob of a canonical config, or its default where it is not set."""
    return default if value is None else value


def _default_warps(tile: Sequence[int]) -> int:
    elements = product([next_power_of_two(t) for t in tile])
    warps = 1
    while warps < 8 and warps * 256 < elements:
        warps *= 2
    return warps


def check_index_range(nodes: Sequence[Node]) -> None:
    for node in nodes:
        if node.numel > _INDEX_LIMIT:
            raise Unplannable(f"a tensor of {node.numel} elements is beyond 32-bit indexing")


def _iteration_node(outputs, order):
    """The value whose shape a pointwise kernel iterates over: the first
    output of those with the most elements, unless a value computed in the
    kernel (not a view) has that many elements in more dims. An output that
    merges dims of the iteration (a [1024, 1376] view of a [4, 256, 1376]
    value, the operand of a product) follows it, its index a sum of the
    merged ones; a computed value that splits a dim of the iteration would
    need a division, so the iteration is the finest such shape. A view of
    an input is read through its address map at any iteration (a copy that
    transposes heads keeps iterating over its output's rows)."""
    most = max(product(o.shape) for o in outputs)
    first = next(o for o in outputs if product(o.shape) == most)
    finer = _finer_computed_values(order, first.shape)
    return max(finer, key=lambda n: len(n.shape)) if finer else first


def _finer_computed_values(order, shape) -> list[Node]:
    """The values computed in a kernel (not its inputs, not views) with as
    many elements as `shape` in more dims: shapes the kernel may iterate
    over instead, whose dims `shape`'s merge (`_iteration_node`,
    `_finer_kept_shape`)."""
    return [n for n in order if not n.is_input and n.op not in VIEW_OPS
            and product(n.shape) == product(shape) and len(n.shape) > len(shape)]


def _plan_pointwise(outputs, order, config: PointwiseConfig, kernel,
                    target: Target) -> KernelPlan:
    check_index_range(order)
    finest = _iteration_node(outputs, order)
    try:
        return _plan_pointwise_over(finest, outputs, order, config, kernel, target)
    except Unplannable:
        # A finer value that the outputs do not follow (one made of
        # constants alone, say): the first output's iteration, as before.
        if finest is outputs[0]:
            raise
        return _plan_pointwise_over(outputs[0], outputs, order, config, kernel, target)


def _plan_pointwise_over(first, outputs, order, config: PointwiseConfig, kernel,
                         target: Target) -> KernelPlan:
    """The pointwise plan iterating over the shape of `first` (an output,
    or a value computed in the kernel)."""
    extents = tuple(first.shape) or (1,)
    n = len(extents)
    knob_extents = {"n": extents[-1]}
    if n >= 2:
        knob_extents["m"] = extents[-2]
    config = config.canonical(knob_extents, kernel)
    seed = IndexMap.identity(extents) if first.shape else IndexMap((), (), extents, ((0, 1),))
    default_n = min(extents[-1], _POINTWISE_BLOCK_N)
    block_n = knob(config.block_n, default_n)
    tile = [1] * n
    tile[-1] = block_n
    block_m = None
    if n >= 2:
        cap = _pointwise_row_cap(block_n)
        across = _reads_across_rows(order, extents)
        if across:
            cap = max(cap, 32)
            if config.block_n is None and block_n > 64:
                block_n = tile[-1] = 64
                cap = 64
        default_m = _rows_within(extents[-2], cap)
        if config.block_n is None and not across:
            # Fewer rows a program where the tiles would leave the target's
            # SMs a few programs each: an elementwise kernel hides its
            # loads' latency with programs in flight.
            columns = ceil_div(extents[-1], block_n) * product(extents[:-2])
            while default_m > 1 and default_m & (default_m - 1) == 0 and \
                    columns * ceil_div(extents[-2], default_m) < \
                    _PROGRAMS_PER_SM * target.sm_count:
                default_m //= 2
        block_m = knob(config.block_m, default_m)
        tile[-2] = block_m
    program_axes = tuple(a for a in range(n) if ceil_div(extents[a], tile[a]) > 1)
    # A replace, not a new PointwiseConfig: a schedule built on this one may
    # plan with a subclass whose own knobs the plan's config keeps.
    resolved = dataclasses.replace(config, num_warps=knob(config.num_warps, _default_warps(tile)),
                                   num_programs=config.num_programs,
                                   num_stages=knob(config.num_stages, 1),
                                   block_m=block_m, block_n=block_n)
    # Outputs of the iteration's shape walk it the same way, whether or not
    # they are computed from one another; so does the value it is the shape
    # of, where that is no output.
    seeds = {o: seed for o in outputs if o.shape == first.shape}
    seeds[first] = seed
    return finish_plan("pointwise", outputs, order, extents, tile, program_axes, (), seeds, {},
                       resolved, knob_extents, kernel)


def _pointwise_row_cap(block_n: int) -> int:
    """The rows an elementwise tile of `block_n` columns may hold within
    the tile's element budget."""
    return max(1, _TILE_ELEMENTS // next_power_of_two(block_n))


def _rows_within(rows: int, cap: int) -> int:
    """All `rows` where they fit under `cap`, else the power of two at or
    below it (the rows a tile takes, of elementwise and reduction kernels)."""
    return rows if rows <= cap else _floor_power_of_two(cap)


def _reads_across_rows(order, extents) -> bool:
    """True when some input is read with unit stride along the second-to-
    last axis (a transpose): square tiles keep both sides coalesced."""
    first = None
    for node in order:
        if node.op == "transpose" and node.attrs["permutation"][-1] != len(node.shape) - 1:
            first = node
            break
    return first is not None and len(extents) >= 2 and extents[-2] > 1


def _rows_per_tile(tile, extents, r_axes) -> int:
    """The rows a reduction's tile holds beside its reduced axes: a whole
    row within the tile's element budget leaves room for several."""
    r_tile = product([next_power_of_two(tile[a]) for a in r_axes])
    whole_r = all(tile[a] == extents[a] for a in r_axes)
    return max(1, _TILE_ELEMENTS // r_tile) if whole_r and r_tile <= 1024 else 1


def _reduced_tile(extents, r_axes, budget: int, block_r: int | None) -> list[int]:
    """A reduction's tile over its reduced axes (1 on the kept ones), within
    `budget` elements: the innermost whole when all of them fit, else steps
    of `block_r` (or _LOOPED_REDUCTION_BLOCK); outer ones whole while the
    innermost is whole and they fit beside it."""
    tile = [1] * len(extents)
    innermost = r_axes[-1]
    total = product([extents[a] for a in r_axes])
    default = extents[innermost] if total <= budget else \
        min(extents[innermost], _LOOPED_REDUCTION_BLOCK, budget)
    tile[innermost] = knob(block_r, default)
    budget = max(1, budget // next_power_of_two(tile[innermost]))
    for axis in reversed(r_axes[:-1]):
        if tile[innermost] == extents[innermost] and extents[axis] <= budget:
            tile[axis] = extents[axis]
            budget //= next_power_of_two(extents[axis])
    return tile


def _default_rows(rows: int, outer: int, tile, extents, r_axes, target: Target) -> int:
    """The kept rows a program of a reduction takes by default: as many as
    fit beside a whole reduced row, fewer where the rows would leave the
    SMs a few programs each (each program's loads are the latency a short
    kernel waits on, hidden by other programs in flight, as for elementwise
    kernels). `outer`: the programs along the kept axes before the rows.
    (Not for a dynamic extent, whose rows are no count: `dynamic_config`.)"""
    default = _rows_within(rows, _rows_per_tile(tile, extents, r_axes))
    while default > 1 and outer * ceil_div(rows, default) < _PROGRAMS_PER_SM * target.sm_count:
        default = _floor_power_of_two(default - 1) if default & (default - 1) else default // 2
    return default


def _across_rows(plan: KernelPlan) -> bool:
    """Whether `plan` walks its rows as a reduction across rows: its primary
    reduction does (the one `_plan_reduction` chose its iteration by)."""
    return reduces_across_rows(_primary_reduce(topological(plan.outputs)))


def _primary_reduce(order) -> Node:
    """The reduction of a kernel (its nodes in topological `order`) whose
    iteration the kernel takes: the one over the largest input."""
    return max((n for n in order if n.op == "reduce"), key=lambda r: r.operands[0].numel)


def _band_configs(extents: dict) -> list[ReductionConfig]:
    """Configs of a reduction across rows: bands of 4 to 64 columns, steps
    of 32 to 1024 rows, tiles of 512 to 8192 elements, 4 to 16 warps, and
    2 or 3 stages where the rows are looped; canonical for `extents`."""
    columns, rows = extents.get("x"), extents["r"]
    if columns is None:
        return []
    configs = []
    for band in (4, 8, 16, 32, 64):
        for step in (32, 64, 128, 256, 512, 1024):
            if band > next_power_of_two(columns) or step > next_power_of_two(rows) or \
                    not 512 <= band * step <= 8192:
                continue
            for warps in (4, 8, 16):
                for stages in ((2, 3) if step < rows else (1,)):
                    configs.append(ReductionConfig(
                        block_x=band, block_r=step, num_warps=warps,
                        num_stages=stages).canonical(extents))
    return configs


def reduces_across_rows(reduce: Node) -> bool:
    """True when `reduce` (a kg.reduce) keeps the last, contiguous axis of
    its input and reduces axes before it: a weight's or a bias's gradient
    summed over the tokens."""
    dims = reduce.attrs["dims"]
    rank = len(reduce.operands[0].shape)
    return rank >= 2 and rank - 1 not in [d % rank for d in dims]


def _column_band(columns: int, outer: int, target: Target) -> int:
    """The columns a program of a reduction across rows takes: the widest
    band up to _COLUMN_BAND that still gives each SM a program, and never
    narrower than NARROWEST_COLUMN_BAND. A band under a 32-byte sector (16
    half floats) shares each sector with the next program, which L2 serves;
    the best bands of an H200's grid were 8 and 16 columns."""
    band = min(next_power_of_two(columns), _COLUMN_BAND)
    while band > NARROWEST_COLUMN_BAND and outer * ceil_div(columns, band) < target.sm_count:
        band //= 2
    return band


def _floor_power_of_two(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _plan_reduction(outputs, order, reduces, config: ReductionConfig, kernel,
                    target: Target) -> KernelPlan:
    check_index_range(order)
    primary = _primary_reduce(reduces)
    x = primary.operands[0]
    finer = _finer_kept_shape(primary, order)
    if finer is None:
        return _plan_reduction_over(x.shape, outputs, order, primary, config, kernel, target)
    try:
        return _plan_reduction_over(finer, outputs, order, primary, config, kernel, target)
    except Unplannable:
        # Outputs that do not follow the finer rows: `x`'s own, as before.
        return _plan_reduction_over(x.shape, outputs, order, primary, config, kernel, target)


def _finer_kept_shape(primary: Node, order) -> tuple[int, ...] | None:
    """A shape of the reduced value `x` whose kept dims are split finer, as
    a value computed in the kernel (not a view) has them, or None. A cross
    entropy's gradient reduces [1024, 2048] logits and returns them as the
    [4, 256, 2048] the model made: an output that splits a kept dim of the
    iteration would need a division, so the kernel iterates over [4, 256]
    rows instead, and reads `x` at the sum of the two. Reduced dims stay
    whole, and nothing dynamic is split."""
    x = primary.operands[0]
    dims = set(primary.attrs["dims"])
    if marked_dims(x):
        return None
    for node in _finer_computed_values(order, x.shape):
        if marked_dims(node):
            continue
        groups = _split_into(node.shape, x.shape)
        if groups is not None and all(len(groups[d]) == 1 for d in dims):
            return tuple(node.shape)
    return None


def _split_into(fine: Sequence[int], coarse: Sequence[int]) -> list[list[int]] | None:
    """The consecutive dims of `fine` (sizes) whose products are the dims of
    `coarse` in order, or None where `fine` does not refine `coarse`. Dims
    of size 1 join the group after them (the last group, at the end)."""
    groups, k = [], 0
    for size in coarse:
        group, total = [], 1
        while k < len(fine) and (total < size or not group):
            group.append(fine[k])
            total *= fine[k]
            k += 1
        if total != size:
            return None
        groups.append(group)
    if groups and all(size == 1 for size in fine[k:]):
        groups[-1] += list(fine[k:])
        k = len(fine)
    return groups if k == len(fine) else None


def _plan_reduction_over(shape, outputs, order, primary: Node, config: ReductionConfig, kernel,
                         target: Target) -> KernelPlan:
    """The reduction plan iterating over the reduced value at `shape`: its
    own, or one whose kept dims are split finer (`_finer_kept_shape`)."""
    x = primary.operands[0]
    dims = sorted(primary.attrs["dims"])
    kept = [d for d in range(len(x.shape)) if d not in dims]
    groups = _split_into(shape, x.shape)
    # Iteration axes: each kept dim's pieces, then the reduced dims.
    pieces = [groups[d] for d in kept]
    extents = [size for group in pieces for size in group] + [x.shape[d] for d in dims]
    n = len(extents)
    p_axes = list(range(n - len(dims)))
    r_axes = list(range(n - len(dims), n))
    # `x` reads each kept dim at the row-major index of its pieces; a value
    # of `shape` reads each piece (`piece_axes`) at its own axis.
    rows, piece_axes, next_axis = [], [], iter(p_axes)
    for d, group in enumerate(groups):
        row = [0] * n
        for j in range(len(group)):
            axis = r_axes[dims.index(d)] if d in dims else next(next_axis)
            row[axis] = product(group[j + 1:])
            piece_axes.append(axis)
        rows.append(tuple(row))
    seed = IndexMap(tuple(rows), (0,) * len(x.shape), tuple(extents),
                    tuple((0, e) for e in extents))
    reduce_axes = {primary: tuple(r_axes)}
    seeds = _reduction_seeds(x, seed, tuple(shape), IndexMap.select(extents, piece_axes),
                             outputs, order, reduce_axes)
    knob_extents = {"r": extents[r_axes[-1]]}
    if p_axes:
        knob_extents["x"] = extents[p_axes[-1]]
    config = config.canonical(knob_extents, kernel)

    innermost = r_axes[-1]
    tile = _reduced_tile(extents, r_axes, _TILE_ELEMENTS, config.block_r)
    block_x = None
    if p_axes:
        inner_p = p_axes[-1]
        outer = product([extents[a] for a in p_axes[:-1]])
        default_x = _default_rows(extents[inner_p], outer, tile, extents, r_axes, target)
        band = None
        if reduces_across_rows(primary):
            band = knob(config.block_x, _column_band(extents[inner_p], outer, target))
        if band is not None and (config.block_x is not None or default_x < band):
            # The reduced rows are strided in memory and the kept columns
            # contiguous: a program takes a band of columns (whole sectors of
            # each row) and walks the rows down it. One column a program read
            # a sector for every element: a norm weight's gradient over
            # 1024 x 512 took 8.3 us against 3.5 in bands of 8 (H200,
            # benchmarks/column_reductions.py). Where few rows are reduced
            # the rows' own default takes more columns still.
            tile = _reduced_tile(extents, r_axes, _TILE_ELEMENTS // next_power_of_two(band),
                                 config.block_r)
            block_x = band
        else:
            block_x = knob(config.block_x, default_x)
        tile[inner_p] = block_x
    program_axes = tuple(a for a in p_axes if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = tuple(a for a in r_axes if tile[a] < extents[a])
    # A looped row is walked once per reduction that reads it (softmax: the
    # max, the sum, then the result), each step a load whose latency the
    # program waits on: twice the warps keep twice the loads in flight.
    # H200, softmax over 1000 x 4097 in 2048-wide steps: 9.7 us with 16
    # warps against 16.0 with 8 (the check of the defaults against the
    # search, benchmarks/NOTES.md).
    warps = _default_warps(tile)
    if loop_axes and product([next_power_of_two(t) for t in tile]) >= _LOOPED_REDUCTION_BLOCK:
        warps = _LOOPED_REDUCTION_WARPS
    resolved = ReductionConfig(num_warps=knob(config.num_warps, warps),
                               num_programs=config.num_programs,
                               num_stages=knob(config.num_stages, 2 if loop_axes else 1),
                               block_x=block_x, block_r=tile[innermost])
    return finish_plan("reduction", outputs, order, extents, tile, program_axes, loop_axes,
                       seeds, reduce_axes, resolved, knob_extents, kernel)


def _reduction_seeds(x: Node, seed: IndexMap, shape, shape_map: IndexMap, outputs, order,
                     reduce_axes) -> dict:
    """The seeds of a reduction's maps: the reduced value `x`, and each
    output of its shape (or of the iteration's finer `shape`) that the maps
    from `x` do not reach. A loss's gradient, [1024, 2048], is made of the
    logits on one side of the reduction and of the labels' one-hot
    scaled by it on the other: nothing computed from `x` leads to the
    logits' side, which the kernel still walks at `x`'s index, as a
    pointwise kernel walks each output of its shape."""
    seeds = {x: seed}
    candidates = [o for o in outputs if o.op != "reduce" and o.shape in (x.shape, shape)]
    if not candidates:
        return seeds
    reached = infer_maps(order, seeds, dict(reduce_axes), None)
    for output in candidates:
        if output not in reached:
            seeds[output] = seed if output.shape == x.shape else shape_map
    return seeds
