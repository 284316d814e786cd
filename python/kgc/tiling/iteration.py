"""What a kernel plan is, and how the values of a kernel are read in its
iteration space.

A kernel iterates over a box of integer points; every value of the kernel
is read at an affine `IndexMap` of the iteration. `operand_maps` and
`result_map` carry maps from a value to its operands and back,
`infer_maps` spreads them over a kernel from its anchors, and `axes_of`
says along which iteration axes a value varies. A `KernelPlan` holds the
choices a schedule made (`kgc.tiling.plan`, `kgc.tiling.matmul`) for the
generator (`kgc.tiling.generate`) to write the tile program from.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.tiling.config import KernelConfig
from kgc.tiling.graph_model import ELEMENTWISE_OPS, SOURCE_OPS, Node
from kgc.tiling.index_maps import BufferView, IndexMap, NotAffine, ceil_div, product


class Unplannable(Exception):
    """These ops cannot be one kernel; the message says why."""


# The key of `KernelPlan.loop_attributes` for a persistent program's tile loop.
TILE_LOOP = "tiles"


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
    """What the plan of every kind of kernel holds: its iteration space,
    tiles, grid and loops, the maps of its values, its reductions and its
    config. A schedule whose kernels need more adds it in a plan type of
    its own module (`kgc.tiling.matmul.MatmulPlan`: dot axes, expanded
    matmuls, split-K; `kgc.tiling.attention.AttentionPlan`)."""

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
    config: KernelConfig  # every knob the kernel was made with, canonical
    # The extent of each axis a tile knob of the config tiles ("m", "n",
    # "k", "x", "r"), for `KernelConfig.canonical` and `space`.
    knob_extents: dict = dataclasses.field(default_factory=dict)
    # Attributes of the loop over an axis, for Triton's pipeliner
    # (`tt.num_stages`: int, `tt.flatten`, `tt.warp_specialize`: flags);
    # under TILE_LOOP, those of a persistent program's loop over its tiles.
    loop_attributes: dict = dataclasses.field(default_factory=dict)
    # The program axes each grid dimension (x, y, z) walks, outermost first;
    # empty: grid x walks every program axis.
    grid_axes: tuple[tuple[int, ...], ...] = ()
    # Persistent programs: this many programs (at most one per tile) each
    # walk tiles pid, pid + programs, ... in a loop; None: one tile each.
    persistent_programs: int | None = None
    # The axis of the dynamic extent (`kgc.tiling.dynamic`): a program axis,
    # or a loop its schedule bounds by the call's size
    # (`Schedule.dynamic_loop_axis`); None where every extent is static.
    dynamic_axis: int | None = None
    # Values of the kernel's i32 arguments, passed at launch after the
    # pointers; the program reads them with Builder.scalar_argument.
    scalar_arguments: tuple[int, ...] = ()
    # The kind of the schedule that made the plan (and writes its program).
    schedule: str = ""

    @property
    def num_warps(self) -> int:
        return self.config.num_warps

    @property
    def num_stages(self) -> int:
        return self.config.num_stages

    def tiles_along(self, axis: int) -> int:
        return ceil_div(self.extents[axis], self.tile[axis])

    def num_programs(self) -> int:
        return product([self.tiles_along(a) for a in self.program_axes])

    def grid_dimensions(self) -> list[tuple[int, ...]]:
        """The program axes of each used grid dimension, x first."""
        if not self.grid_axes:
            return [tuple(self.program_axes)]
        walked = sorted(a for axes in self.grid_axes for a in axes)
        if walked != sorted(self.program_axes) or len(self.grid_axes) > 3:
            raise Unplannable(f"grid axes {self.grid_axes} must share out the program axes "
                              f"{self.program_axes} among at most three grid dimensions")
        return [tuple(axes) for axes in self.grid_axes]

    def grid(self) -> list[int]:
        """Program counts along grid x, y and z."""
        if self.persistent_programs is not None:
            if self.grid_axes or self.persistent_programs < 1:
                raise Unplannable(f"{self.persistent_programs} persistent programs must be at least "
                                  "one, along grid x only")
            return [min(self.persistent_programs, self.num_programs()), 1, 1]
        counts = [product([self.tiles_along(a) for a in axes]) for axes in self.grid_dimensions()]
        return counts + [1] * (3 - len(counts))

    # -- dots: a plan of a kind whose kernels multiply matrices (the matmul
    # schedule's MatmulPlan, attention's AttentionPlan) says where they are;
    # the generic generator asks through these.

    def contraction_axes(self) -> tuple[int, int, int] | None:
        """The (m, k, n) iteration axes of the kernel's matmuls (one that
        reduces another axis takes it as its k); None: it has none."""
        return None

    def matmul_expansions(self) -> dict:
        """matmul Node -> its Expansion, for the matmuls computed as a dot of
        cores times factors (a folded RMSNorm); none by default."""
        return {}

    def axes_of_dot(self, node: Node) -> tuple[int, int, int]:
        """The (m, k, n) iteration axes of matmul `node`'s dot."""
        axes = self.contraction_axes()
        if axes is None:
            raise Unplannable(f"kg.{node.op} {node.shape} is a dot, and a {self.kind} plan has "
                              "no matmul axes")
        return axes

    def operands_for_generation(self, node: Node) -> list[Node]:
        expansion = self.matmul_expansions().get(node)
        if expansion is not None:
            return [expansion.core_a, expansion.core_b, *expansion.factors, *expansion.divisors]
        return list(node.operands)


# -- map rules ---------------------------------------------------------------


def operand_maps(node: Node, index_map: IndexMap, reduce_axes: dict,
                 matmul_axes: tuple[int, int, int] | None) -> list[IndexMap | None]:
    """The map of each operand of `node` when `node` is read at `index_map`
    (None where it cannot be derived here)."""
    op = node.op
    if op in SOURCE_OPS or op == "input":
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
        return list(matmul_operand_maps(node, index_map, contraction(node, matmul_axes, reduce_axes)))
    if op == "gather":
        # The table is read where the indices say: at no affine map.
        return [None, gather_indices_map(node, index_map)]
    raise Unplannable(f"kg.{op} cannot be part of a kernel; run kg-decompose first")


def gather_indices_map(node: Node, index_map: IndexMap) -> IndexMap:
    """The map of the indices of kg.gather `node` read at `index_map`: the
    position along the gathered dimension."""
    dim = node.attrs["dim"]
    return dataclasses.replace(index_map, rows=(index_map.rows[dim],),
                               offsets=(index_map.offsets[dim],))


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
    # A reduction covers the whole of each dimension it reduces wherever it
    # is read: a window that a concat piece put on the reduced axis (a
    # rotary embedding's halves of a normalized head) narrows where the
    # reduction's result is used, never which elements it sums.
    windows = list(index_map.windows)
    for d, axis in zip(dims, axes):
        windows[axis] = (0, x.shape[d])
    return dataclasses.replace(index_map, rows=tuple(rows), offsets=tuple(offsets),
                               windows=tuple(windows))


def contraction(node: Node, matmul_axes: tuple[int, int, int], reduce_axes: dict | None
                ) -> tuple[int, int, int]:
    """`matmul_axes` with k the axis matmul `node` reduces over where the
    plan records one (a rank-r product of LoRA reduces over the rank axis);
    its operands are read at k, its m and n come from its own map."""
    axes = (reduce_axes or {}).get(node)
    if not axes:
        return matmul_axes
    return (matmul_axes[0], axes[0], matmul_axes[2])


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


def axes_of(node: Node, index_map: IndexMap, reduce_axes: dict | None = None,
            matmul_axes=None, expansions: dict | None = None, _memo: dict | None = None
            ) -> frozenset[int]:
    """The iteration axes along which `node`, read at `index_map`, varies."""
    memo = {} if _memo is None else _memo
    key = (id(node), index_map)
    if key in memo:
        return memo[key]
    reduce_axes = reduce_axes or {}
    op = node.op
    if op == "constant":
        result = frozenset()
    elif op == "iota":
        # The positions along `dim`: they vary where that index does.
        result = frozenset(a for a, c in enumerate(index_map.rows[node.attrs["dim"]]) if c != 0)
    elif op == "input":
        strides, _ = BufferView.contiguous(node.shape).address_map(index_map)
        result = frozenset(a for a, s in enumerate(strides) if s != 0)
    elif op == "reshape" and leaf_view(node) is not None and not is_affine_reshape(node, index_map):
        strides, _ = leaf_view(node)[1].address_map(index_map)
        result = frozenset(a for a, s in enumerate(strides) if s != 0)
    elif op == "gather":
        # Where the indices vary, and where the other dimensions of the
        # table are read.
        dim = node.attrs["dim"]
        result = axes_of(node.operands[1], gather_indices_map(node, index_map), reduce_axes,
                         matmul_axes, expansions, memo)
        result |= frozenset(a for d, row in enumerate(index_map.rows) if d != dim
                            for a, c in enumerate(row) if c != 0)
    elif op == "matmul" and expansions and node in expansions:
        axes = contraction(node, matmul_axes, reduce_axes)
        k_axis = axes[1]
        expansion = expansions[node]
        a_map, b_map = matmul_operand_maps(node, index_map, axes)
        result = (axes_of(expansion.core_a, a_map, reduce_axes, matmul_axes, expansions, memo)
                  | axes_of(expansion.core_b, b_map, reduce_axes, matmul_axes, expansions, memo))
        result -= {k_axis}
    else:
        maps = operand_maps(node, index_map, reduce_axes, matmul_axes)
        if any(m is None for m in maps):
            raise Unplannable(f"kg.{op} {node.shape} cannot be read at an affine index here")
        result = frozenset()
        for operand, operand_map in zip(node.operands, maps):
            result |= axes_of(operand, operand_map, reduce_axes, matmul_axes, expansions, memo)
        if op == "reduce":
            result -= set(reduce_axes[node])
        elif op == "matmul":
            result -= {contraction(node, matmul_axes, reduce_axes)[1]}
        elif op == "concat":
            axis, _ = index_map.concat_window(node.attrs["dim"], 0, 1)
            result |= {axis}
    memo[key] = result
    return result


def leaf_view(node: Node) -> tuple[Node, BufferView] | None:
    """(input, view) when `node` is a chain of reshapes of a kernel input."""
    if node.op == "input":
        return node, BufferView.contiguous(node.shape)
    if node.op == "reshape":
        inner = leaf_view(node.operands[0])
        if inner is None:
            return None
        try:
            return inner[0], inner[1].reshaped(node.shape)
        except NotAffine:
            return None
    return None


def is_affine_reshape(node: Node, index_map: IndexMap) -> bool:
    try:
        index_map.reshaped_from(node.shape, node.operands[0].shape)
        return True
    except NotAffine:
        return False
