"""Planning a kernel: its iteration space, tiles, grid, loops and phases.

Three shapes of kernel, picked by the ops a group holds:

* matmul: iteration axes (batch..., m, k, n). Programs walk batch, m and n
  (grouped along m for L2 reuse), a loop walks k. The operands of each
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
maps are inferred from the anchors. A group is a kernel only if the
generator can write its tile program: `plan_group` runs the generator dry
to find out.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.tiling import plan_cache
from kgc.tiling.graph_model import ELEMENTWISE_OPS, SUPPORTED_OPS, Node, topological
from kgc.tiling.index_maps import IndexMap, NotAffine, ceil_div, next_power_of_two, product

# Register budget of a tile, in elements, for reductions and pointwise tiles.
_TILE_ELEMENTS = 4096
_LOOPED_REDUCTION_BLOCK = 2048
_POINTWISE_BLOCK_N = 1024
_MAX_EPILOGUE_ROW = 256  # widest n that a matmul epilogue may reduce over
_SM_COUNT = 132
_GRID_LIMIT = 2**31 - 1
_INDEX_LIMIT = 2**31 - 1

# Kernel attributes a user may set by hand, per kind of kernel.
KNOBS = {
    "pointwise": ("block_m", "block_n", "num_warps", "num_stages"),
    "reduction": ("block_x", "block_r", "num_warps", "num_stages"),
    "matmul": ("block_m", "block_n", "block_k", "group_m", "num_warps", "num_stages"),
}


class Unplannable(Exception):
    """These ops cannot be one kernel; the message says why."""


@dataclasses.dataclass
class Expansion:
    """A matmul as the generator computes it: `core_a @ core_b`, times the
    k-invariant factors, divided by the divisors."""

    core_a: Node
    core_b: Node
    factors: list[Node]
    divisors: list[Node]


@dataclasses.dataclass
class KernelPlan:
    kind: str
    extents: tuple[int, ...]
    tile: tuple[int, ...]
    program_axes: tuple[int, ...]  # walked by the grid, outermost first
    loop_axes: tuple[int, ...]  # walked by scf.for inside a program
    outputs: list[Node]
    output_maps: list[IndexMap]
    maps: dict  # Node -> its natural IndexMap
    reduce_axes: dict  # Node -> tuple of iteration axes it reduces
    phases: list  # (looped axes, reductions): one loop nest each, in order
    expansions: dict  # matmul Node -> Expansion
    matmul_axes: tuple[int, int, int] | None
    config: dict[str, int]

    @property
    def num_warps(self) -> int:
        return self.config["num_warps"]

    @property
    def num_stages(self) -> int:
        return self.config["num_stages"]

    def tiles_along(self, axis: int) -> int:
        return ceil_div(self.extents[axis], self.tile[axis])

    def num_programs(self) -> int:
        return product([self.tiles_along(a) for a in self.program_axes])

    def operands_for_generation(self, node: Node) -> list[Node]:
        expansion = self.expansions.get(node)
        if expansion is not None:
            return [expansion.core_a, expansion.core_b, *expansion.factors, *expansion.divisors]
        return list(node.operands)


# -- map rules ---------------------------------------------------------------


def operand_maps(node: Node, index_map: IndexMap, reduce_axes: dict,
                 matmul_axes: tuple[int, int, int] | None) -> list[IndexMap | None]:
    """The map of each operand of `node` when `node` is read at `index_map`
    (None where it cannot be derived here)."""
    op = node.op
    if op == "constant" or op == "input":
        return []
    if op in ELEMENTWISE_OPS:
        return [index_map.broadcast_from(node.shape, o.shape) for o in node.operands]
    if op == "broadcast_to":
        return [index_map.broadcast_from(node.shape, node.operands[0].shape)]
    if op == "transpose":
        return [index_map.transposed_from(node.attrs["permutation"])]
    if op == "slice":
        return [index_map.sliced_from(node.attrs["offsets"], node.attrs["strides"])]
    if op == "reshape":
        try:
            return [index_map.reshaped_from(node.shape, node.operands[0].shape)]
        except NotAffine:
            return [None]
    if op == "concat":
        dim, start, maps = node.attrs["dim"], 0, []
        for operand in node.operands:
            try:
                maps.append(index_map.concat_piece(dim, start, operand.shape[dim]))
            except NotAffine:
                maps.append(None)
            start += operand.shape[dim]
        return maps
    if op == "reduce":
        axes = reduce_axes.get(node)
        if axes is None:
            return [None]
        return [reduce_input_map(node, index_map, axes)]
    if op == "matmul":
        if matmul_axes is None:
            return [None, None]
        return list(matmul_operand_maps(node, index_map, matmul_axes))
    raise Unplannable(f"kg.{op} cannot be part of a kernel; run kg-decompose first")


def reduce_input_map(node: Node, index_map: IndexMap, axes: Sequence[int]) -> IndexMap:
    x = node.operands[0]
    dims = sorted(node.attrs["dims"])
    keepdim = node.attrs["keepdim"]
    n = len(index_map.extents)
    rows, offsets, k = [], [], 0
    for d in range(len(x.shape)):
        if d in dims:
            axis = axes[dims.index(d)]
            rows.append(tuple(1 if j == axis else 0 for j in range(n)))
            offsets.append(0)
            if keepdim:
                k += 1
        else:
            rows.append(index_map.rows[k])
            offsets.append(index_map.offsets[k])
            k += 1
    for axis in axes:
        if axis in index_map.depends_on():
            raise Unplannable("a reduction is read along the axis it reduces")
    return dataclasses.replace(index_map, rows=tuple(rows), offsets=tuple(offsets))


def matmul_operand_maps(node: Node, c_map: IndexMap, axes: tuple[int, int, int]):
    """Maps of a and b of a matmul read at `c_map` (which covers its batch
    dimensions, m and n)."""
    m_axis, k_axis, n_axis = axes
    a, b = node.operands
    n = len(c_map.extents)
    k_row = tuple(1 if j == k_axis else 0 for j in range(n))
    batch_rows = c_map.rows[:-2]
    batch_offsets = c_map.offsets[:-2]
    batch_shape = node.shape[:-2]

    def operand(x: Node, last_two: tuple, last_offsets: tuple) -> IndexMap:
        lead = len(batch_shape) - (len(x.shape) - 2)
        rows, offsets = [], []
        for d, size in enumerate(x.shape[:-2]):
            if size == 1 and batch_shape[lead + d] != 1:
                rows.append((0,) * n)
                offsets.append(0)
            else:
                rows.append(batch_rows[lead + d])
                offsets.append(batch_offsets[lead + d])
        return dataclasses.replace(c_map, rows=tuple(rows) + last_two,
                                   offsets=tuple(offsets) + last_offsets)

    a_map = operand(a, (c_map.rows[-2], k_row), (c_map.offsets[-2], 0))
    b_map = operand(b, (k_row, c_map.rows[-1]), (0, c_map.offsets[-1]))
    return a_map, b_map


def result_map(node: Node, maps: dict, reduce_axes: dict) -> IndexMap | None:
    """The map of `node` from the maps of its operands, where one follows."""
    op = node.op
    if op in ELEMENTWISE_OPS and op != "constant":
        for operand in node.operands:
            if operand.shape == node.shape and operand in maps:
                return maps[operand]
        return None
    operand = node.operands[0] if node.operands else None
    if operand is None or operand not in maps:
        return None
    source = maps[operand]
    if op == "transpose":
        perm = node.attrs["permutation"]
        return dataclasses.replace(source, rows=tuple(source.rows[p] for p in perm),
                                   offsets=tuple(source.offsets[p] for p in perm))
    if op == "reshape":
        return source.merged_to(operand.shape, node.shape)
    if op == "reduce":
        dims = sorted(node.attrs["dims"])
        axes = []
        for d in dims:
            axis = source.axis_of_row(d)
            if axis is None or source.offsets[d] != 0:
                return None
            axes.append(axis)
        kept_rows = [source.rows[d] for d in range(len(operand.shape)) if d not in dims]
        if any(row[a] != 0 for row in kept_rows for a in axes) or len(set(axes)) != len(axes):
            return None
        reduce_axes.setdefault(node, tuple(axes))
        n = len(source.extents)
        rows, offsets = [], []
        for d in range(len(operand.shape)):
            if d in dims:
                if node.attrs["keepdim"]:
                    rows.append((0,) * n)
                    offsets.append(0)
            else:
                rows.append(source.rows[d])
                offsets.append(source.offsets[d])
        return dataclasses.replace(source, rows=tuple(rows), offsets=tuple(offsets))
    return None


def infer_maps(order: list[Node], seeds: dict, reduce_axes: dict,
               matmul_axes) -> dict:
    """A map for as many nodes as follow from `seeds`, by walking down to
    operands and up to users until nothing changes."""
    maps = dict(seeds)
    changed = True
    while changed:
        changed = False
        for node in reversed(order):
            if node not in maps:
                continue
            for operand, derived in zip(node.operands, operand_maps(node, maps[node], reduce_axes,
                                                                     matmul_axes)):
                if derived is not None and operand not in maps:
                    maps[operand] = derived
                    changed = True
        for node in order:
            if node.is_input or (node in maps and (node.op != "reduce" or node in reduce_axes)):
                continue
            # A reduce reached from its users still learns its axes here.
            known_axes = node in reduce_axes
            derived = result_map(node, maps, reduce_axes)
            if derived is not None and node not in maps:
                maps[node] = derived
                changed = True
            elif node in reduce_axes and not known_axes:
                changed = True
    return maps


# -- planning ------------------------------------------------------------------


def plan_group(outputs: Sequence[Node], config: dict | None = None) -> KernelPlan:
    """The plan of a kernel computing `outputs`, checked by a dry run of the
    generator. Raises Unplannable. A group of the same content planned
    before (kg-fuse's, for kg-tile) gives its plan again (see plan_cache)."""
    from kgc.tiling.generate import dry_run

    cache_key = plan_cache.key(outputs, config or {})
    known = plan_cache.recall(cache_key)
    if known is not None:
        return known
    plan = _plan(list(outputs), dict(config or {}))
    dry_run(plan)
    plan_cache.remember(cache_key, plan)
    return plan


def _plan(outputs: list[Node], config: dict) -> KernelPlan:
    order = topological(outputs)
    for node in order:
        if not node.is_input and node.op not in SUPPORTED_OPS:
            raise Unplannable(f"kg.{node.op} must be decomposed before tiling")
        if 0 in node.shape:
            what = "an input" if node.is_input else f"kg.{node.op}"
            raise Unplannable(f"{what} of shape {node.shape} is empty; kgc needs at least one "
                              "element in every tensor")
    matmuls = [n for n in order if n.op == "matmul"]
    reduces = [n for n in order if n.op == "reduce"]
    if matmuls:
        return _plan_matmul(outputs, order, matmuls, config)
    if reduces:
        return _plan_reduction(outputs, order, reduces, config)
    return _plan_pointwise(outputs, order, config)


def _finish(kind, outputs, order, extents, tile, program_axes, loop_axes, seeds, reduce_axes,
            expansions, matmul_axes, config) -> KernelPlan:
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
                      config)
    plan.phases = _phases(plan)
    if plan.num_programs() > _GRID_LIMIT:
        raise Unplannable(f"{plan.num_programs()} programs exceed the grid limit")
    return plan


def _phases(plan: KernelPlan) -> list[tuple[tuple[int, ...], list[Node]]]:
    """Reductions whose input varies along looped axes they reduce, grouped
    into loops: by how many such reductions lie under them (softmax: max
    before sum), and by the looped axes they walk."""
    from kgc.tiling.generate import axes_of

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


def _knob(config: dict, name: str, default: int, extent: int | None = None) -> int:
    """A tile size from the kernel's attributes or the default, checked: a
    tile must be a power of two, or cover its axis."""
    value = config.get(name, default)
    if not isinstance(value, int) or value < 1:
        raise Unplannable(f"{name} = {value} must be a positive integer")
    if extent is not None:
        if value >= extent:
            return extent
        if value & (value - 1):
            raise Unplannable(f"{name} = {value} must be a power of two, or at least {extent} "
                              "to cover its axis")
    return value


def _warps(config: dict, tile: Sequence[int]) -> int:
    elements = product([next_power_of_two(t) for t in tile])
    default = 1
    while default < 8 and default * 256 < elements:
        default *= 2
    value = config.get("num_warps", default)
    if not isinstance(value, int) or value < 1 or value & (value - 1) or value > 32:
        raise Unplannable(f"num_warps = {value} must be a power of two up to 32")
    return value


def _stages(config: dict, default: int) -> int:
    value = config.get("num_stages", default)
    if not isinstance(value, int) or value < 1:
        raise Unplannable(f"num_stages = {value} must be a positive integer")
    return value


def _check_index_range(nodes: Sequence[Node]) -> None:
    for node in nodes:
        if node.numel > _INDEX_LIMIT:
            raise Unplannable(f"a tensor of {node.numel} elements is beyond 32-bit indexing")


def _plan_pointwise(outputs, order, config) -> KernelPlan:
    _check_index_range(order)
    first = outputs[0]
    extents = tuple(first.shape) or (1,)
    n = len(extents)
    seed = IndexMap.identity(extents) if first.shape else IndexMap((), (), extents, ((0, 1),))
    default_n = min(extents[-1], _POINTWISE_BLOCK_N)
    block_n = _knob(config, "block_n", default_n, extents[-1])
    tile = [1] * n
    tile[-1] = block_n
    config_out = {"block_n": block_n}
    if n >= 2:
        cap = max(1, _TILE_ELEMENTS // next_power_of_two(block_n))
        if _reads_across_rows(order, extents):
            cap = max(cap, 32)
            if "block_n" not in config and block_n > 64:
                block_n = tile[-1] = 64
                config_out["block_n"] = 64
                cap = 64
        default_m = extents[-2] if extents[-2] <= cap else _floor_power_of_two(cap)
        block_m = _knob(config, "block_m", default_m, extents[-2])
        tile[-2] = block_m
        config_out["block_m"] = block_m
    program_axes = tuple(a for a in range(n) if ceil_div(extents[a], tile[a]) > 1)
    config_out["num_warps"] = _warps(config, tile)
    config_out["num_stages"] = _stages(config, 1)
    # Outputs of the first output's shape walk the iteration the same way,
    # whether or not they are computed from one another.
    seeds = {o: seed for o in outputs if o.shape == first.shape}
    return _finish("pointwise", outputs, order, extents, tile, program_axes, (), seeds, {},
                   {}, None, config_out)


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


def _plan_reduction(outputs, order, reduces, config) -> KernelPlan:
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

    tile = [1] * n
    # Reduced axes, innermost first: whole when they fit, else looped.
    budget = _TILE_ELEMENTS
    innermost = r_axes[-1]
    total = product([extents[a] for a in r_axes])
    persistent_default = extents[innermost] if total <= _TILE_ELEMENTS else \
        min(extents[innermost], _LOOPED_REDUCTION_BLOCK)
    tile[innermost] = _knob(config, "block_r", persistent_default, extents[innermost])
    budget //= next_power_of_two(tile[innermost])
    for axis in reversed(r_axes[:-1]):
        if tile[innermost] == extents[innermost] and extents[axis] <= budget:
            tile[axis] = extents[axis]
            budget //= next_power_of_two(extents[axis])
    config_out = {"block_r": tile[innermost]}
    if p_axes:
        inner_p = p_axes[-1]
        r_tile = product([next_power_of_two(tile[a]) for a in r_axes])
        whole_r = all(tile[a] == extents[a] for a in r_axes)
        cap = max(1, _TILE_ELEMENTS // r_tile) if whole_r and r_tile <= 1024 else 1
        default_x = extents[inner_p] if extents[inner_p] <= cap else _floor_power_of_two(cap)
        tile[inner_p] = _knob(config, "block_x", default_x, extents[inner_p])
        config_out["block_x"] = tile[inner_p]
    program_axes = tuple(a for a in p_axes if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = tuple(a for a in r_axes if tile[a] < extents[a])
    config_out["num_warps"] = _warps(config, tile)
    config_out["num_stages"] = _stages(config, 2 if loop_axes else 1)
    return _finish("reduction", outputs, order, extents, tile, program_axes, loop_axes,
                   {x: seed}, reduce_axes, {}, None, config_out)


def _plan_matmul(outputs, order, matmuls, config) -> KernelPlan:
    _check_index_range(order)
    first = matmuls[0]
    k_extent = first.operands[0].shape[-1]
    for mm in matmuls[1:]:
        if mm.shape != first.shape or mm.operands[0].shape[-1] != k_extent:
            raise Unplannable("matmuls of one kernel must share their output shape and K")
    batch = list(first.shape[:-2])
    m_extent, n_extent = first.shape[-2], first.shape[-1]
    extents = batch + [m_extent, k_extent, n_extent]
    nb = len(batch)
    axes = (nb, nb + 1, nb + 2)
    m_axis, k_axis, n_axis = axes
    c_map = IndexMap.select(extents, list(range(nb)) + [m_axis, n_axis])
    seeds = {mm: c_map for mm in matmuls}
    reduce_axes = {mm: (k_axis,) for mm in matmuls}

    # Maps of everything, to find what the epilogue reduces over.
    maps = infer_maps(order, seeds, reduce_axes, axes)
    epilogue_reduces_n = any(
        n_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")
    epilogue_reduces_m = any(
        m_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")

    element_bits = max(_bits(mm.operands[0].element) for mm in matmuls)
    default_k = 64 if element_bits <= 16 else 32
    if epilogue_reduces_n:
        if n_extent > _MAX_EPILOGUE_ROW:
            raise Unplannable(f"the epilogue reduces over n = {n_extent}, wider than "
                              f"{_MAX_EPILOGUE_ROW} columns fit in one tile")
        block_n = n_extent
        if "block_n" in config and config["block_n"] < n_extent:
            raise Unplannable("the epilogue reduces over n: block_n must cover all of n")
        default_m = 64
    else:
        block_n = None
        default_m = 128
    if epilogue_reduces_m and m_extent > _MAX_EPILOGUE_ROW:
        raise Unplannable(f"the epilogue reduces over m = {m_extent}, more rows than fit a tile")
    block_m = _knob(config, "block_m", m_extent if epilogue_reduces_m else
                    (m_extent if m_extent <= default_m else default_m), m_extent)
    if block_n is None:
        default_n = n_extent if n_extent <= 128 else 128
        # Few row tiles give few programs: narrower n tiles keep the SMs busy
        # (down to 64; narrower tiles read the other operand too finely).
        programs = product(batch) * ceil_div(m_extent, block_m)
        while ("block_n" not in config and default_n > 64 and default_n < n_extent
               and programs * ceil_div(n_extent, default_n) < _SM_COUNT):
            default_n //= 2
        block_n = _knob(config, "block_n", default_n, n_extent)
    block_k = _knob(config, "block_k", default_k, k_extent)
    group_m = _knob(config, "group_m", 8)
    tile = [1] * nb + [block_m, block_k, block_n]
    expansions = {mm: _expand_matmul(mm, maps, axes, reduce_axes) for mm in matmuls}
    program_axes = tuple(a for a in list(range(nb)) + [m_axis, n_axis]
                         if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = (k_axis,) if block_k < k_extent else ()
    # Measured on H100/H200 (benchmarks/sweep_tiles.py): 4 warps up to one
    # 128x128 accumulator, 8 beyond (two dots share a kernel in a gated
    # MLP); a deeper pipeline for small tiles.
    warps_default = 8 if len(matmuls) * block_m * block_n >= 128 * 256 else 4
    stages_default = (4 if block_m * block_n <= 128 * 64 else 3) if loop_axes else 1
    config_out = {"block_m": block_m, "block_n": block_n, "block_k": block_k, "group_m": group_m,
                  "num_warps": _warps({"num_warps": config.get("num_warps", warps_default)}, tile),
                  "num_stages": _stages(config, stages_default)}
    return _finish("matmul", outputs, order, extents, tile, program_axes, loop_axes, seeds,
                   reduce_axes, expansions, axes, config_out)


def _bits(element: str) -> int:
    return {"f32": 32, "f16": 16, "bf16": 16}.get(element, 8)


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
        from kgc.tiling.generate import axes_of

        if not any(n.op == "reduce" for n in topological([node])):
            return False
        try:
            return self.k_axis not in axes_of(node, index_map, self.reduce_axes, self.matmul_axes)
        except Unplannable:
            return False
