"""The plan of a matmul kernel (`kgc.tiling.matmul`): what the matmul
schedule, its generator (`kgc.tiling.matmul_generator`) and split-K
(`kgc.tiling.split_k`) know of a kernel beyond what every plan holds
(`kgc.tiling.iteration.KernelPlan`): where its dots are, which matmuls are
computed as a dot times factors, and how its k loop is split. A module of
its own, below the three that read it."""

from __future__ import annotations

import dataclasses

from kgc.tiling.graph_model import Node
from kgc.tiling.iteration import KernelPlan

__all__ = ["MatmulPlan", "SplitK"]


@dataclasses.dataclass
class SplitK:
    """How a matmul plan's k loop is split."""

    count: int  # S: programs per (batch, m, n) tile
    chunk: int  # k elements per split, a multiple of block_k
    partials: list[Node]  # the reductions over k, one workspace each, in order
    grid_dimension: int  # the grid dimension (0-2) that walks the splits


@dataclasses.dataclass
class MatmulPlan(KernelPlan):
    """A matmul kernel's plan: where its dots are, how its matmuls are
    computed, and its split over k."""

    # The (m, k, n) iteration axes of the kernel's matmuls.
    matmul_axes: tuple[int, int, int] | None = None
    # matmul Node -> Expansion: a matmul computed as the dot of its cores,
    # times the factors that do not vary along k (an RMSNorm's 1/rms).
    expansions: dict = dataclasses.field(default_factory=dict)
    # The (m, k, n) axes of the matmuls that do not use `matmul_axes`: LoRA's
    # side matmuls (m, k, rank) and rank-r products (m, rank, n), which
    # kgc.tiling.low_rank places on a rank axis. Empty: none.
    dot_axes: dict = dataclasses.field(default_factory=dict)
    # The k loop shared out between programs (kgc.tiling.split_k): the
    # kernel becomes a partials kernel and a reduce kernel. None: one kernel.
    split: SplitK | None = None
    # What the k loop reads per step at the plan's tile
    # (`kgc.tiling.matmul.LoopReads`), which planning measured.
    reads: object = None

    def contraction_axes(self) -> tuple[int, int, int] | None:
        return self.matmul_axes

    def matmul_expansions(self) -> dict:
        return self.expansions

    def axes_of_dot(self, node: Node) -> tuple[int, int, int]:
        return self.dot_axes.get(node, self.matmul_axes)
