"""The schedule protocol: what one shape of kernel provides.

A `Schedule` says whether it can compute a group of ops (`match`), picks
the kernel's iteration space, tiles, grid and loops from a `KernelConfig`
of its kind (`plan`), and writes the tile program of a plan through a
`Builder` (`generate`). The built-in schedules live in `kgc.tiling.plan`
and `kgc.tiling.attention`; `kgc.tiling.registry` lists them, in the order
they are tried, and takes new ones (`register_schedule`).
"""

from __future__ import annotations

from typing import ClassVar, Sequence

from kgc.targets import Target
from kgc.tiling.config import KernelConfig
from kgc.tiling.generate import Builder, Generator
from kgc.tiling.graph_model import Node
from kgc.tiling.iteration import KernelPlan

__all__ = ["Schedule"]


class Schedule:
    """One shape of kernel: its config kind, when it applies, how it plans
    and how it writes the tile program."""

    kind: ClassVar[str] = ""
    config_class: ClassVar[type[KernelConfig]] = KernelConfig

    def match(self, order: Sequence[Node]) -> bool:
        """True when this schedule can compute the ops `order` (every node
        the outputs depend on, producers first)."""
        raise NotImplementedError

    def plan(self, outputs: list[Node], order: list[Node], config: KernelConfig,
             kernel: str | None, target: Target) -> KernelPlan:
        """The plan of a kernel computing `outputs` with the knobs `config`
        sets, for the GPU `target` (the SMs its grid must fill decide
        split-K, split-KV and how narrow tiles get); raises Unplannable or
        ConfigError."""
        raise NotImplementedError

    def generate(self, plan: KernelPlan, builder: Builder) -> None:
        """Writes the tile program of `plan` through `builder`."""
        Generator(plan, builder).run()

    def tiled_results(self, plan: KernelPlan) -> list[tuple[tuple[int, ...], str]] | None:
        """The (shape, element) of each result of the tiled kernel, when they
        are not the group's outputs (partial results that a follow-up kernel
        finishes); None: the outputs."""
        return None

    def follow_up(self, plan: KernelPlan, results: list, name: str, location) -> tuple[list, list]:
        """Kernels in graph form that finish the tiled kernel's `results`,
        built at the current insertion point: (the values that stand for
        the group's outputs, the kernels made). None by default."""
        return list(results), []
