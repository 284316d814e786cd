"""The built-in schedules of matmuls, reductions and pointwise kernels.

Each is a `Schedule` (`kgc.tiling.schedule`): `plan` picks its iteration
space, tiles, grid and loops from a `KernelConfig` of its kind (kgc's
heuristics fill in the knobs the config leaves open); the generic
generator (`kgc.tiling.generate`) writes their tile programs.
`kgc.tiling.registry` lists them, after attention:

* matmul: iteration axes (batch..., m, k, n), and a rank axis after them
  for LoRA's rank-r products (kgc.tiling.low_rank). Programs walk batch, m
  and n (grouped along m for L2 reuse), a loop walks k. The operands of each
  matmul are computed tile by tile in the loop (prologue); values over
  (batch, m, n) are computed after it (epilogue). Factors of an operand
  that do not vary along k, such as the 1/rms of an RMSNorm, move to the
  epilogue, so that a reduction over k inside them runs beside the dot.
* reduction: iteration axes (kept..., reduced...) of the largest reduce.
  Programs walk the kept axes; the reduced axes are one tile when they fit
  ("persistent") and loops otherwise, one loop per phase of dependent
  reductions (softmax: max, then sum, then the output).
* pointwise: iteration axes are the shape of the first output; programs
  walk 2-D tiles of the last two axes.

Every value is read at an affine map of the iteration (`IndexMap`); the
maps are inferred from the anchors (`kgc.tiling.iteration`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.element_types import element_bits
from kgc.targets import Target
from kgc.tiling import low_rank, split_k
from kgc.tiling.config import (ConfigError, KernelConfig, MatmulConfig, PointwiseConfig,
                               ReductionConfig, default_split_k)
from kgc.tiling.graph_model import Node, topological
from kgc.tiling.index_maps import IndexMap, ceil_div, next_power_of_two, product
from kgc.tiling.iteration import (TILE_LOOP, Expansion, KernelPlan, Unplannable, axes_of,
                                  infer_maps, matmul_operand_maps, reduce_input_map)
from kgc.tiling.schedule import Schedule

__all__ = ["KernelPlan", "MatmulSchedule", "PointwiseSchedule", "ReductionSchedule",
           "Unplannable"]

# Register budget of a tile, in elements, for reductions and pointwise tiles.
_TILE_ELEMENTS = 4096
_LOOPED_REDUCTION_BLOCK = 2048
_POINTWISE_BLOCK_N = 1024
_MAX_EPILOGUE_ROW = 256  # widest n that a matmul epilogue may reduce over
_GRID_LIMIT = 2**31 - 1
_INDEX_LIMIT = 2**31 - 1


# -- schedules -----------------------------------------------------------------


class MatmulSchedule(Schedule):
    kind = "matmul"
    config_class = MatmulConfig

    def match(self, order):
        return any(n.op == "matmul" for n in order)

    def plan(self, outputs, order, config, kernel, target):
        return _plan_matmul(outputs, order, [n for n in order if n.op == "matmul"], config, kernel,
                            target)

    # A split-K plan (kgc.tiling.split_k) is tiled as its partials kernel,
    # which the reduce kernel follows.
    def generate(self, plan, builder):
        if plan.split is None:
            super().generate(plan, builder)
        else:
            split_k.PartialsGenerator(plan, builder).run()

    def tiled_form(self, plan):
        return super().tiled_form(plan) if plan.split is None else split_k.partials_form(plan)

    def follow_up(self, plan, results, source):
        if plan.split is None:
            return super().follow_up(plan, results, source)
        reduced = split_k.reduce_kernel(plan, results, source)
        return list(reduced.results), [reduced]


class ReductionSchedule(Schedule):
    kind = "reduction"
    config_class = ReductionConfig

    def match(self, order):
        return any(n.op == "reduce" for n in order)

    def plan(self, outputs, order, config, kernel, target):
        return _plan_reduction(outputs, order, [n for n in order if n.op == "reduce"], config,
                               kernel)


class PointwiseSchedule(Schedule):
    kind = "pointwise"
    config_class = PointwiseConfig

    def match(self, order):
        return True

    def plan(self, outputs, order, config, kernel, target):
        return _plan_pointwise(outputs, order, config, kernel)


# -- planning ------------------------------------------------------------------


def _finish(kind, outputs, order, extents, tile, program_axes, loop_axes, seeds, reduce_axes,
            expansions, matmul_axes, config: KernelConfig, knob_extents: dict,
            kernel: str | None, dot_axes: dict | None = None) -> KernelPlan:
    maps = infer_maps(order, seeds, reduce_axes, matmul_axes)
    output_maps = []
    for output in outputs:
        if output not in maps:
            raise Unplannable(f"output {output.op} {output.shape} does not follow the kernel's "
                              f"iteration over {extents}")
        output_maps.append(maps[output])
    for node in order:
        if node.op == "reduce" and node not in reduce_axes:
            raise Unplannable("a reduction does not reduce along axes of the kernel's iteration")
        for axis in reduce_axes.get(node, ()):
            # A program sees one tile of a program axis: it cannot reduce it.
            if tile[axis] < extents[axis] and axis not in loop_axes:
                raise Unplannable(f"kg.{node.op} reduces axis {axis}, which the grid splits "
                                  "between programs")
    plan = KernelPlan(kind, tuple(extents), tuple(tile), tuple(program_axes), tuple(loop_axes),
                      list(outputs), output_maps, maps, reduce_axes, [], expansions, matmul_axes,
                      config.canonical(knob_extents, kernel), dict(knob_extents))
    if dot_axes:
        plan.dot_axes = dict(dot_axes)
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
        varying = axes_of(node.operands[0], x_map, plan.reduce_axes, plan.matmul_axes,
                          plan.expansions)
        return tuple(sorted(axes & varying))

    depth: dict[Node, int] = {}
    groups: dict[tuple, list[Node]] = {}
    for node in _generation_order(plan):
        # A matmul's factors are applied after its loop: only the operands of
        # its dot must be ready before it.
        expansion = plan.expansions.get(node)
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


def _knob(value: int | None, default: int) -> int:
    """A knob of a canonical config, or its default where it is not set."""
    return default if value is None else value


def _default_warps(tile: Sequence[int]) -> int:
    elements = product([next_power_of_two(t) for t in tile])
    warps = 1
    while warps < 8 and warps * 256 < elements:
        warps *= 2
    return warps


def _check_index_range(nodes: Sequence[Node]) -> None:
    for node in nodes:
        if node.numel > _INDEX_LIMIT:
            raise Unplannable(f"a tensor of {node.numel} elements is beyond 32-bit indexing")


def _plan_pointwise(outputs, order, config: PointwiseConfig, kernel) -> KernelPlan:
    _check_index_range(order)
    first = outputs[0]
    extents = tuple(first.shape) or (1,)
    n = len(extents)
    knob_extents = {"n": extents[-1]}
    if n >= 2:
        knob_extents["m"] = extents[-2]
    config = config.canonical(knob_extents, kernel)
    seed = IndexMap.identity(extents) if first.shape else IndexMap((), (), extents, ((0, 1),))
    default_n = min(extents[-1], _POINTWISE_BLOCK_N)
    block_n = _knob(config.block_n, default_n)
    tile = [1] * n
    tile[-1] = block_n
    block_m = None
    if n >= 2:
        cap = max(1, _TILE_ELEMENTS // next_power_of_two(block_n))
        if _reads_across_rows(order, extents):
            cap = max(cap, 32)
            if config.block_n is None and block_n > 64:
                block_n = tile[-1] = 64
                cap = 64
        default_m = extents[-2] if extents[-2] <= cap else _floor_power_of_two(cap)
        block_m = _knob(config.block_m, default_m)
        tile[-2] = block_m
    program_axes = tuple(a for a in range(n) if ceil_div(extents[a], tile[a]) > 1)
    resolved = PointwiseConfig(num_warps=_knob(config.num_warps, _default_warps(tile)),
                               num_programs=config.num_programs,
                               num_stages=_knob(config.num_stages, 1),
                               block_m=block_m, block_n=block_n)
    # Outputs of the first output's shape walk the iteration the same way,
    # whether or not they are computed from one another.
    seeds = {o: seed for o in outputs if o.shape == first.shape}
    return _finish("pointwise", outputs, order, extents, tile, program_axes, (), seeds, {},
                   {}, None, resolved, knob_extents, kernel)


def _reads_across_rows(order, extents) -> bool:
    """True when some input is read with unit stride along the second-to-
    last axis (a transpose): square tiles keep both sides coalesced."""
    first = None
    for node in order:
        if node.op == "transpose" and node.attrs["permutation"][-1] != len(node.shape) - 1:
            first = node
            break
    return first is not None and len(extents) >= 2 and extents[-2] > 1


def _floor_power_of_two(n: int) -> int:
    return 1 << (n.bit_length() - 1)


def _plan_reduction(outputs, order, reduces, config: ReductionConfig, kernel) -> KernelPlan:
    _check_index_range(order)
    primary = max(reduces, key=lambda r: r.operands[0].numel)
    x = primary.operands[0]
    dims = sorted(primary.attrs["dims"])
    kept = [d for d in range(len(x.shape)) if d not in dims]
    extents = [x.shape[d] for d in kept] + [x.shape[d] for d in dims]
    n = len(extents)
    p_axes = list(range(len(kept)))
    r_axes = list(range(len(kept), n))
    seed_axes = [kept.index(d) if d in kept else len(kept) + dims.index(d) for d in range(len(x.shape))]
    seed = IndexMap.select(extents, seed_axes)
    reduce_axes = {primary: tuple(r_axes)}
    knob_extents = {"r": extents[r_axes[-1]]}
    if p_axes:
        knob_extents["x"] = extents[p_axes[-1]]
    config = config.canonical(knob_extents, kernel)

    tile = [1] * n
    # Reduced axes, innermost first: whole when they fit, else looped.
    budget = _TILE_ELEMENTS
    innermost = r_axes[-1]
    total = product([extents[a] for a in r_axes])
    persistent_default = extents[innermost] if total <= _TILE_ELEMENTS else \
        min(extents[innermost], _LOOPED_REDUCTION_BLOCK)
    tile[innermost] = _knob(config.block_r, persistent_default)
    budget //= next_power_of_two(tile[innermost])
    for axis in reversed(r_axes[:-1]):
        if tile[innermost] == extents[innermost] and extents[axis] <= budget:
            tile[axis] = extents[axis]
            budget //= next_power_of_two(extents[axis])
    block_x = None
    if p_axes:
        inner_p = p_axes[-1]
        r_tile = product([next_power_of_two(tile[a]) for a in r_axes])
        whole_r = all(tile[a] == extents[a] for a in r_axes)
        cap = max(1, _TILE_ELEMENTS // r_tile) if whole_r and r_tile <= 1024 else 1
        default_x = extents[inner_p] if extents[inner_p] <= cap else _floor_power_of_two(cap)
        block_x = tile[inner_p] = _knob(config.block_x, default_x)
    program_axes = tuple(a for a in p_axes if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = tuple(a for a in r_axes if tile[a] < extents[a])
    resolved = ReductionConfig(num_warps=_knob(config.num_warps, _default_warps(tile)),
                               num_programs=config.num_programs,
                               num_stages=_knob(config.num_stages, 2 if loop_axes else 1),
                               block_x=block_x, block_r=tile[innermost])
    return _finish("reduction", outputs, order, extents, tile, program_axes, loop_axes,
                   {x: seed}, reduce_axes, {}, None, resolved, knob_extents, kernel)


def _plan_matmul(outputs, order, matmuls, config: MatmulConfig, kernel,
                 target: Target) -> KernelPlan:
    _check_index_range(order)
    # Main matmuls share the kernel's output shape and k; side matmuls and
    # rank-r products beside them are LoRA's (kgc.tiling.low_rank).
    matmuls, side_matmuls, products = low_rank.classify(matmuls, order, outputs)
    first = matmuls[0]
    k_extent = first.operands[0].shape[-1]
    batch = list(first.shape[:-2])
    m_extent, n_extent = first.shape[-2], first.shape[-1]
    extents = batch + [m_extent, k_extent, n_extent]
    nb = len(batch)
    axes = (nb, nb + 1, nb + 2)
    knob_extents = {"m": m_extent, "n": n_extent, "k": k_extent}
    config = config.canonical(knob_extents, kernel)
    m_axis, k_axis, n_axis = axes
    rank = low_rank.shared_rank(products)
    if rank is not None:
        extents.append(rank)
    c_map = IndexMap.select(extents, list(range(nb)) + [m_axis, n_axis])
    seeds = {mm: c_map for mm in matmuls}
    reduce_axes = {mm: (k_axis,) for mm in matmuls}
    dot_axes = low_rank.place(side_matmuls, products, c_map, axes, seeds, reduce_axes)

    # Maps of everything, to find what the epilogue reduces over.
    maps = infer_maps(order, seeds, reduce_axes, axes)
    epilogue_reduces_n = any(
        n_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")
    epilogue_reduces_m = any(
        m_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")

    bits = max(element_bits(mm.operands[0].element) for mm in matmuls)
    default_k = 64 if bits <= 16 else 32
    if epilogue_reduces_n:
        if n_extent > _MAX_EPILOGUE_ROW:
            raise Unplannable(f"the epilogue reduces over n = {n_extent}, wider than "
                              f"{_MAX_EPILOGUE_ROW} columns fit in one tile")
        block_n = n_extent
        if config.block_n is not None and config.block_n < n_extent:
            raise Unplannable("the epilogue reduces over n: block_n must cover all of n")
        default_m = 64
    else:
        block_n = None
        default_m = 128
    if epilogue_reduces_m and m_extent > _MAX_EPILOGUE_ROW:
        raise Unplannable(f"the epilogue reduces over m = {m_extent}, more rows than fit a tile")
    block_m = _knob(config.block_m, m_extent if epilogue_reduces_m else
                    (m_extent if m_extent <= default_m else default_m))
    if block_n is None:
        default_n = n_extent if n_extent <= 128 else 128
        # Few row tiles give few programs: narrower n tiles keep the SMs busy
        # (down to 64; narrower tiles read the other operand too finely).
        programs = product(batch) * ceil_div(m_extent, block_m)
        while (config.block_n is None and default_n > 64 and default_n < n_extent
               and programs * ceil_div(n_extent, default_n) < target.sm_count):
            default_n //= 2
        block_n = _knob(config.block_n, default_n)
    block_k = _knob(config.block_k, min(default_k, k_extent))
    group_m = _knob(config.group_m, 8)
    tiles = product(batch) * ceil_div(m_extent, block_m) * ceil_div(n_extent, block_n)
    # split_k left to kgc (None): split a kernel whose tiles leave SMs idle,
    # unless it is persistent or reads through TMA (a choice for big tiles).
    chosen = config.split_k is None
    if chosen:
        splits = 1 if config.num_programs is not None or config.tma or block_k >= k_extent \
            else default_split_k(tiles, product(batch), m_extent, n_extent, k_extent,
                                 block_k, bits, target.sm_count)
    else:
        splits = split_k.split_count(config.split_k, k_extent, block_k)
    tile = [1] * nb + [block_m, block_k, block_n] + ([] if rank is None else [rank])
    expansions = {mm: _expand_matmul(mm, maps, dot_axes.get(mm, axes), reduce_axes)
                  for mm in matmuls + side_matmuls + list(products)}
    program_axes = tuple(a for a in list(range(nb)) + [m_axis, n_axis]
                         if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = (k_axis,) if block_k < k_extent else ()
    if side_matmuls and not loop_axes:
        raise Unplannable("a side matmul of rank-r products needs a k loop to ride along")
    # Every program computes X A anew for its n tile: kept no wider than the
    # tile, its dot and its reads of A stay a fraction of the main dot's.
    for side in side_matmuls:
        if side.shape[-1] > block_n:
            raise Unplannable(f"a side matmul of rank {side.shape[-1]} needs an n tile of as "
                              f"many columns; block_n is {block_n}")
    # Measured on H100/H200 (benchmarks/sweep_tiles.py): 4 warps up to one
    # 128x128 accumulator, 8 beyond (two dots share a kernel in a gated
    # MLP); a deeper pipeline for small tiles.
    warps_default = 8 if len(matmuls) * block_m * block_n >= 128 * 256 else 4
    stages_default = (4 if block_m * block_n <= 128 * 64 else 3) if loop_axes else 1
    # The loop flags apply to the k loop; without one they change nothing.
    flags = {name: getattr(config, name) if loop_axes else None
             for name in MatmulConfig.LOOP_FLAGS}
    resolved = MatmulConfig(num_warps=_knob(config.num_warps, warps_default),
                            num_programs=config.num_programs,
                            num_stages=_knob(config.num_stages, stages_default),
                            block_m=block_m, block_n=block_n, block_k=block_k, group_m=group_m,
                            # Off is the default: written only when on.
                            tma=True if config.tma else None,
                            **flags, **({"split_k": splits} if splits > 1 else {}))
    plan = _finish("matmul", outputs, order, extents, tile, program_axes, loop_axes, seeds,
                   reduce_axes, expansions, axes, resolved, knob_extents, kernel, dot_axes)
    if splits > 1:
        try:
            split_k.attach(plan, splits, kernel)
        except (Unplannable, ConfigError):
            if not chosen:
                raise
            # kgc's own split, where this kernel cannot be split: none.
            plan.split = None
            plan.config = dataclasses.replace(plan.config, split_k=None)
    k_loop = {f"tt.{name}": True for name, value in flags.items() if value}
    if config.num_programs is not None and k_loop.pop("tt.flatten", None):
        # Triton flattens a loop with the loops nested in it: in a persistent
        # program that is the tile loop, so that the next tile's loads start
        # during this tile's epilogue.
        plan.loop_attributes[TILE_LOOP] = {"tt.flatten": True}
    if k_loop:
        plan.loop_attributes[k_axis] = k_loop
    return plan


def _expand_matmul(mm: Node, maps: dict, axes, reduce_axes: dict) -> Expansion:
    """Moves the factors of each operand that do not vary along k, and hold
    a reduction over k, out of the dot (the 1/rms of an RMSNorm before the
    matmul). Pulling a factor out of a cast skips one rounding."""
    a, b = mm.operands
    a_map, b_map = matmul_operand_maps(mm, maps[mm], axes)
    splitter = _FactorSplitter(axes, reduce_axes)
    core_a = splitter.split(a, a_map)
    core_b = splitter.split(b, b_map)
    return Expansion(core_a, core_b, splitter.factors, splitter.divisors)


class _FactorSplitter:
    def __init__(self, matmul_axes, reduce_axes: dict):
        self.matmul_axes = matmul_axes
        self.k_axis = matmul_axes[1]
        self.reduce_axes = reduce_axes
        self.factors: list[Node] = []
        self.divisors: list[Node] = []

    def split(self, node: Node, index_map: IndexMap) -> Node:
        """`node` without the factors it gives up."""
        if node.op == "cast":
            inner_map = index_map.broadcast_from(node.shape, node.operands[0].shape)
            inner = self.split(node.operands[0], inner_map)
            if inner is node.operands[0]:
                return node
            return dataclasses.replace(node, operands=[inner], value=None)
        if node.op not in ("mul", "div"):
            return node
        lhs, rhs = node.operands
        lhs_map = index_map.broadcast_from(node.shape, lhs.shape)
        rhs_map = index_map.broadcast_from(node.shape, rhs.shape)
        if self._movable(rhs, rhs_map):
            (self.factors if node.op == "mul" else self.divisors).append(rhs)
            return self.split(lhs, lhs_map)
        if node.op == "mul" and self._movable(lhs, lhs_map):
            self.factors.append(lhs)
            return self.split(rhs, rhs_map)
        new_lhs = self.split(lhs, lhs_map)
        if new_lhs is lhs:
            return node
        return dataclasses.replace(node, operands=[new_lhs, rhs], value=None)

    def _movable(self, node: Node, index_map: IndexMap) -> bool:
        """True when `node` does not vary along k but holds a reduction."""
        if not any(n.op == "reduce" for n in topological([node])):
            return False
        try:
            return self.k_axis not in axes_of(node, index_map, self.reduce_axes, self.matmul_axes)
        except Unplannable:
            return False
