"""Rank-r products in a matmul kernel: LoRA's X W + (X A) B as one kernel.

A matmul kernel iterates over (batch..., m, k, n) for its main matmuls
(those of the kernel's output shape and k). Beside them it may hold:

* a side matmul `T = X' A` of the same k whose n is a rank r no wider than
  the kernel's n: it accumulates in the same k loop as the main dots, in an
  n tile whose first r lanes hold its columns (its loads of A are masked to
  r columns, and read at column 0 whatever n tile the program computes);
* a rank-r product `U = P B` of the kernel's output shape whose k is r,
  with `P` that side matmul or a kernel input [.., M, r] and `B` a kernel
  input [r, N]: computed after the k loop as r rank-1 updates
  `U += P[:, j] * B[j, :]` (column j of P picked from the accumulator by a
  mask, or loaded; row j of B loaded), in f32, rounded to U's type as a
  matmul result is.

So `Y = X W + (X A) B` reads X once per k step for both dots, never writes
X A or (X A) B to memory, and is one kernel (two with split-K, whose reduce
kernel sums T's partials before the products). `classify` finds the roles
in a kernel's matmuls; kg-fuse makes such groups under its `fold-low-rank`
decision (kgc.fusion.greedy).
"""

from __future__ import annotations

import contextlib
import dataclasses

from kgc.tiling.generate import INT32_MAX, INT32_MIN, Tile
from kgc.tiling.graph_model import Node
from kgc.tiling.index_maps import IndexMap
from kgc.tiling.iteration import Unplannable, leaf_view

__all__ = ["LowRankProduct", "classify", "pinned_side", "product_tile", "side_seed"]


@dataclasses.dataclass
class LowRankProduct:
    """U = P @ B of rank r, computed after the k loop."""

    p: Node  # a side matmul of the kernel, or a kernel input [.., M, r]
    b: Node  # a kernel input [r, N]
    rank: int
    side: bool  # P is a side matmul accumulated in the k loop


def _k(mm: Node) -> int:
    return mm.operands[0].shape[-1]


def classify(matmuls: list[Node], order: list[Node] = (), outputs: list[Node] = ()
             ) -> tuple[list[Node], list[Node], dict]:
    """(main matmuls, side matmuls, {product: LowRankProduct}) of a
    kernel's matmuls (`order`: every node of the kernel; `outputs`: its
    results); raises Unplannable when they do not share the kernel's output
    shape and k in one of these roles. A side matmul lives in an n tile's
    first columns: only rank-r products may read it, and it is no result."""
    k_extent = max(_k(mm) for mm in matmuls)
    shape = max((mm.shape for mm in matmuls if _k(mm) == k_extent), key=lambda s: s[-1])
    main = [mm for mm in matmuls if mm.shape == shape and _k(mm) == k_extent]
    rest = [mm for mm in matmuls if mm not in main]
    if not rest:
        return main, [], {}
    products: dict = {}
    side: list[Node] = []
    for mm in rest:
        if mm.shape != shape:
            continue
        p, b = mm.operands
        rank = _k(mm)
        if (rank > shape[-1] or tuple(p.shape[:-1]) != tuple(shape[:-1]) or len(b.shape) != 2
                or leaf_view(b) is None):
            raise Unplannable("matmuls of one kernel must share their output shape and K")
        is_side = p.op == "matmul" and p in rest and _k(p) == k_extent
        if not is_side and leaf_view(p) is None:
            raise Unplannable(f"the rank-{rank} product's left operand must be a side matmul of "
                              "the kernel or a kernel input")
        products[mm] = LowRankProduct(p, b, rank, is_side)
        if is_side:
            side.append(p)
    for mm in rest:
        if mm not in products and mm not in side:
            raise Unplannable("matmuls of one kernel must share their output shape and K")
    readers = [n for n in order if n not in products and any(o in side for o in n.operands)]
    if readers or any(o in side for o in outputs):
        raise Unplannable("a side matmul of rank-r products is read by another op or is a "
                          "result of the kernel")
    return main, side, products


def side_seed(c_map: IndexMap, side: Node, n_axis: int) -> IndexMap:
    """The map of a side matmul: the output's, restricted to its r columns."""
    windows = list(c_map.windows)
    windows[n_axis] = (0, side.shape[-1])
    return dataclasses.replace(c_map, windows=tuple(windows))


@contextlib.contextmanager
def pinned_side(generator, node: Node):
    """While a side matmul (or its partials) is written: its columns are
    read from column 0 in every n tile."""
    plan = generator.plan
    if not plan.low_rank or node not in {p.p for p in plan.low_rank.values() if p.side}:
        yield
        return
    n_axis = plan.matmul_axes[2]
    saved = generator.offsets[n_axis]
    generator.offsets[n_axis] = generator.b.const(0)
    try:
        yield
    finally:
        generator.offsets[n_axis] = saved


@contextlib.contextmanager
def _offsets(generator, values: dict):
    saved = {axis: generator.offsets[axis] for axis in values}
    generator.offsets.update(values)
    try:
        yield
    finally:
        generator.offsets.update(saved)


def product_tile(generator, node: Node) -> Tile:
    """The tile of rank-r product `node` (U = P B) of the program's (m, n)
    tile: r rank-1 updates in a loop, in f32."""
    plan, b = generator.plan, generator.b
    product = plan.low_rank[node]
    _, k_axis, n_axis = plan.matmul_axes
    n = len(plan.extents)
    c_map = generator._natural_map(node)
    out_axes = generator._axes(node, c_map)
    acc_shape = generator._shape(out_axes)
    if product.side:
        with pinned_side(generator, product.p):
            p_tile = generator.gen(product.p, generator._natural_map(product.p))
        p_tile = generator._cast(p_tile, "f32")
        column_axes = p_tile.axes - {n_axis}
    else:
        p_input, p_view = leaf_view(product.p)
        p_map = side_seed(c_map, product.p, n_axis)
        p_strides, _ = p_view.address_map(p_map)
        column_axes = frozenset(a for a in range(n) if p_strides[a] and a != n_axis)
    b_input, b_view = leaf_view(product.b)
    k_row = tuple(1 if j == k_axis else 0 for j in range(n))
    windows = list(c_map.windows)
    windows[k_axis] = (0, product.rank)
    b_map = IndexMap((k_row, c_map.rows[-1]), (0, c_map.offsets[-1]), c_map.extents,
                     tuple(windows))
    zero = b.const(0)
    init = b.constant(0.0, "f32", acc_shape)
    with b.loop(None, product.rank, 1, [init]) as body:
        j = body.offset
        column_shape = generator._shape(column_axes)
        if product.side:
            # Column j of the side accumulator: lane j of its n tile.
            lanes = [zero] * n
            lanes[n_axis] = b.scalar("sub", zero, j)
            lower, upper = [INT32_MIN] * n, [INT32_MAX] * n
            lower[n_axis], upper[n_axis] = 0, 1
            pick = [1] * n
            pick[n_axis] = plan.tile[n_axis]
            mask = b.mask(lanes, lower, upper, pick)
            picked = b.select(mask, p_tile.value, b.constant(0.0, "f32", [1] * n), "f32",
                              generator._shape(p_tile.axes))
            column = b.reduce("sum", picked, [n_axis], "f32", column_shape)
        else:
            with _offsets(generator, {n_axis: j}):
                loaded = generator._load(p_input, p_view, p_map, column_axes)
            column = generator._cast(loaded, "f32").value
        with _offsets(generator, {k_axis: j}):
            loaded = generator._load(b_input, b_view, b_map, frozenset({n_axis}))
        row = generator._cast(loaded, "f32").value
        update = b.elementwise("mul", [column, row], {}, "f32", acc_shape)
        body.results = [b.elementwise("add", [body.carried[0], update], {}, "f32", acc_shape)]
    return generator._cast(Tile(body.finals[0], out_axes, "f32"), node.element)
