"""Rank-r products in a matmul kernel: LoRA's X W + (X A) B as one kernel.

A matmul kernel iterates over (batch..., m, k, n) for its main matmuls
(those of the kernel's output shape and k). Beside them it may hold rank-r
products `U = P B` of the kernel's output shape whose k is a rank r, with
`B` a kernel input [r, N] and `P` either

* a side matmul `T = X' A` of the kernel's k whose n is r (no wider than
  the n tile): it accumulates in the same k loop as the main dots, or
* a kernel input [.., M, r].

Such a kernel gets one more iteration axis, the rank axis, of extent r and
one tile (it is neither walked by programs nor looped). T is a dot over
(m, k, rank): its accumulator is an [m, rank] tile, and A is read at
(k, rank). U is a dot over (m, rank, n) after the k loop, on the tensor
cores: T (rounded to its type, as the graph has it) times B read at
(rank, n). In rewrite terms, for the kernel's tile program:

    T = X A             =>  tile_dot {dims = [m, k, rank]} in the k loop
    U = T B             =>  tile_dot {dims = [m, rank, n]} after it

So `Y = X W + (X A) B` reads X once per k step for both dots, never writes
X A or (X A) B to memory, and is one kernel (two with split-K, whose reduce
kernel sums T's partials, [S, .., M, r], before the product). `classify`
finds the roles in a kernel's matmuls and `place` puts them on the rank
axis; kg-fuse makes such groups under its `fold-low-rank` decision
(kgc.fusion.greedy).
"""

from __future__ import annotations

import dataclasses

from kgc.tiling.graph_model import Node
from kgc.tiling.index_maps import IndexMap
from kgc.tiling.iteration import Unplannable, leaf_view

__all__ = ["classify", "place", "shared_rank"]


def _k(mm: Node) -> int:
    return mm.operands[0].shape[-1]


def classify(matmuls: list[Node], order: list[Node] = (), outputs: list[Node] = ()
             ) -> tuple[list[Node], list[Node], dict]:
    """(main matmuls, side matmuls, {rank-r product U = P B: its rank r}) of
    a kernel's matmuls (`order`: every node of the kernel; `outputs`: its
    results); raises Unplannable when they do not share the kernel's output
    shape and k in one of these roles. A side matmul varies along the rank
    axis, which no store walks: only rank-r products may read it, and it is
    no result."""
    k_extent = max(_k(mm) for mm in matmuls)
    shape = max((mm.shape for mm in matmuls if _k(mm) == k_extent), key=lambda s: s[-1])
    main = [mm for mm in matmuls if mm.shape == shape and _k(mm) == k_extent]
    rest = [mm for mm in matmuls if mm not in main]
    if not rest:
        return main, [], {}
    products: dict[Node, int] = {}
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
        products[mm] = rank
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


def shared_rank(products: dict[Node, int]) -> int | None:
    """The extent of the rank axis: the rank every product shares (None:
    no products); raises Unplannable for products of different ranks."""
    ranks = set(products.values())
    if len(ranks) > 1:
        raise Unplannable(f"rank-r products of one kernel must share their rank, got "
                          f"{sorted(ranks)}")
    return ranks.pop() if ranks else None


def place(side_matmuls: list[Node], products: dict, c_map: IndexMap, matmul_axes, seeds: dict,
          reduce_axes: dict) -> dict:
    """Puts side matmuls and products on the rank axis (the last of
    `c_map`'s iteration): their maps go into `seeds`, the axes they reduce
    into `reduce_axes`; returns their (m, k, n) dot axes."""
    if not products:
        return {}
    m_axis, k_axis, n_axis = matmul_axes
    rank_axis = len(c_map.extents) - 1
    # The output's map with its last dimension read along the rank axis.
    rank_row = tuple(int(axis == rank_axis) for axis in range(len(c_map.extents)))
    side_map = dataclasses.replace(c_map, rows=c_map.rows[:-1] + (rank_row,))
    dot_axes = {}
    for side in side_matmuls:
        seeds[side] = side_map
        reduce_axes[side] = (k_axis,)
        dot_axes[side] = (m_axis, k_axis, rank_axis)
    for product in products:
        seeds[product] = c_map
        reduce_axes[product] = (rank_axis,)
        dot_axes[product] = (m_axis, rank_axis, n_axis)
    return dot_axes
