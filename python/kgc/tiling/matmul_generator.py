"""The tile program of a matmul kernel: the generic generator
(`kgc.tiling.generate`) with what only matmul plans need.

* Program ids walk the (m, n) tiles in groups of `group_m` rows (Triton's
  grouped ordering), so that consecutive programs share operand tiles in L2.
* LoRA's side dots (kgc.tiling.low_rank) are written before the main dot of
  their loop, for the warp layout Triton gives them.
* With the `tma` knob, the k loop's operand tiles are read, and the results
  written where their layout allows, through TMA tensor descriptors
  (kgc.tiling.tma).

The split-K generators (kgc.tiling.split_k) build on this one.
"""

from __future__ import annotations

from kgc.tiling import tma
from kgc.tiling.config import ConfigError
from kgc.tiling.generate import Generator
from kgc.tiling.graph_model import Node
from kgc.tiling.index_maps import BufferView

__all__ = ["MatmulGenerator"]


class MatmulGenerator(Generator):
    """Writes the tile program of a matmul plan (`MatmulSchedule`)."""

    def _grouped_axes(self, counts):
        m_axis, _, n_axis = self.plan.matmul_axes
        if m_axis in counts and n_axis in counts and self.plan.config.group_m > 1:
            return (m_axis, n_axis)
        return ()

    def _phase_order(self, nodes):
        # LoRA's side dots (m x rank) are written first. Triton 3.6 gives the
        # dots of a loop that share an operand one warp layout, picked from
        # the shape of one of them: written after the main dot, a square
        # 16 x 16 side dot picks [num_warps, 1], and every warp computes all
        # 16 rows of the main dot as well (3x slower without split-K on an
        # H100); written before it, both get [1, num_warps].
        # tests/test_low_rank.py checks the layout in the TTGIR.
        return sorted(nodes, key=lambda node: node not in self.plan.dot_axes)

    def _tma_load(self, source: Node, view: BufferView, axes: frozenset) -> bool:
        """With the `tma` knob, every operand tile of the k loop (a tile that
        varies along k) is read through TMA, and one that cannot be is a
        ConfigError."""
        if not self.plan.config.tma or self.plan.matmul_axes[1] not in axes:
            return False
        reason = tma.refusal(view, source.element, self._shape(axes))
        if reason is not None:
            raise ConfigError(f"tma = true is not legal: input #{source.input_index} "
                              f"({source.element} {list(source.shape)}) cannot be read by TMA: "
                              f"{reason}; leave tma unset for this kernel")
        return True

    def _tma_store(self, output: Node, view: BufferView, axes: frozenset) -> bool:
        # With the `tma` knob, results go out through TMA descriptors where
        # their layout allows it, and through pointers elsewhere.
        return bool(self.plan.config.tma) and \
            tma.refusal(view, output.element, self._shape(axes)) is None
