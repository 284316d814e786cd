"""The schedule protocol: what one shape of kernel provides.

A `Schedule` says whether it can compute a group of ops (`match`), picks
the kernel's iteration space, tiles, grid and loops from a `KernelConfig`
of its kind (`plan`), and writes the tile program of a plan through a
`Builder` (`generate`). A plan may become more than one kernel (split-K's
partials and reduce kernels, split-KV's attention and combine kernels):
`tiled_form` says how the tiled kernel differs from the group it computes
(its name, results and grid), `follow_up` builds the kernels that finish
its results. Fusion asks a schedule for the patterns to gather into one
group (`fusion_rule`, `fusion_pattern`), the search for the configs to try
(`search_space`), and the tuned-defaults table for the config the search
chose on the nearest measured shape (`table_key`, `tuned_config`). The
built-in schedules live in `kgc.tiling.attention`, `kgc.tiling.matmul`
and `kgc.tiling.plan`; `kgc.tiling.registry` lists them, in the order
they are tried, and takes new ones
(`register_schedule`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Sequence

from kgc.element_types import element_bits
from kgc.targets import Target
from kgc.tiling.config import ConfigError, KernelConfig
from kgc.tiling.generate import Builder, Generator
from kgc.tiling.graph_model import Node, topological
from kgc.tiling.iteration import KernelPlan
from kgc.tuned_defaults import TableKey, TunedTable

__all__ = ["Schedule", "SourceKernel", "TiledForm", "canonical_or_none", "widest_input"]


@dataclasses.dataclass
class TiledForm:
    """How the tiled kernel of a plan differs from the kernel in graph form
    it replaces; the defaults keep everything."""

    # Appended to the kernel's name (a kernel whose follow-up takes the
    # group's outputs is named after its part: "_partials").
    suffix: str = ""
    # The (shape, element) of each result, when they are not the group's
    # outputs (partial results that a follow-up kernel finishes).
    results: list[tuple[tuple[int, ...], str]] | None = None
    # The launch grid, when it is not the plan's (`KernelPlan.grid`).
    grid: list[int] | None = None
    # Attributes the tiled kernel carries besides its config (MLIR
    # attributes by name): a library kernel's call (kgc.tiling.library).
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class SourceKernel:
    """The kernel in graph form being tiled, as its follow-up kernels see it
    (MLIR values and attributes)."""

    name: str
    inputs: list  # its operands
    result_types: list  # the types of its results (the group's outputs)
    attributes: dict[str, Any]  # its attributes other than its name and knobs
    location: Any
    # The knobs given for every kernel at once (kg-tile's options), which a
    # follow-up kernel may take too; None: none given.
    options: KernelConfig | None = None


class Schedule:
    """One shape of kernel: its config kind, when it applies, how it plans
    and how it writes the tile program."""

    kind: ClassVar[str] = ""
    config_class: ClassVar[type[KernelConfig]] = KernelConfig
    # The kg-fuse decision (a `FusionDecisions` name) under which fusion
    # gathers this schedule's patterns (`fusion_pattern`) before it merges
    # groups one at a time; "" for none.
    fusion_rule: ClassVar[str] = ""
    # Knobs that decide only whether this schedule takes a group it matches
    # (`takes`): kg-tile's options for them apply to such groups even when
    # another schedule plans them.
    choice_knobs: ClassVar[tuple[str, ...]] = ()
    # Whether its tile programs take a dynamic extent (`kgc.tiling.dynamic`):
    # the generic generator's do along a program axis; a schedule whose
    # program reads extents itself (split counts, persistent tiles) does not,
    # unless it bounds its own loop by the size (`dynamic_loop_axis`).
    dynamic_extents: ClassVar[bool] = False

    def match(self, order: Sequence[Node]) -> bool:
        """True when this schedule can compute the ops `order` (every node
        the outputs depend on, producers first)."""
        raise NotImplementedError

    def takes(self, outputs: Sequence[Node], order: Sequence[Node], knobs: dict[str, Any],
              target: Target, table: TunedTable | None = None) -> bool:
        """Whether kgc plans a group this schedule matches (computing
        `outputs`) with it, given the knobs set on the kernel (name ->
        value, of any kind), the GPU `target` and the tuned-defaults
        `table` in use (None: none); False leaves the group to the next
        schedule that matches (a library call that wins over kgc's kernel
        only on some shapes, kgc.tiling.library). True by default."""
        return True

    def fusion_pattern(self, node: Node, users: Sequence[Node],
                       escapes: bool) -> frozenset[int] | None:
        """The ids of the ops of a pattern of this schedule whose output is
        `node` (read by `users`, and by the caller of the graph when
        `escapes`), for fusion to make one group; None where `node` ends no
        pattern (always, by default)."""
        return None

    def gathers(self, plan: KernelPlan) -> bool:
        """Whether fusion gathers a pattern of this schedule (`fusion_pattern`)
        whose group kgc plans as `plan`: a schedule may find its pattern
        where another schedule's kernel would be made of it (the default:
        gather it all the same)."""
        return True

    def fusion_refusal(self, plan: KernelPlan) -> str | None:
        """The name of a rule of this schedule by which fusion should not
        have grown a group into the kernel of `plan` (kgc's plan of the
        merged group), though it plans: work the kernel would repeat in
        many programs, which a kernel of its own does once. Fusion refuses
        such a merge unless that rule is turned off (`FusionDecisions`
        takes the name as it takes a `fusion_rule`), and the search tries
        both. None (the default): no objection."""
        return None

    def plan(self, outputs: list[Node], order: list[Node], config: KernelConfig,
             kernel: str | None, target: Target) -> KernelPlan:
        """The plan of a kernel computing `outputs` with the knobs `config`
        sets, for the GPU `target` (the SMs its grid must fill decide
        split-K, split-KV and how narrow tiles get); raises Unplannable or
        ConfigError."""
        raise NotImplementedError

    def dynamic_config(self, plan: KernelPlan) -> KernelConfig | None:
        """For a schedule that takes a dynamic extent: the config to plan
        the kernel of `plan` (made at the hint) with again, so that its
        program holds at every size (a matmul's tiles walked in plain order,
        its k loop not split), or None where `plan` holds as it is (the
        default)."""
        return None

    def dynamic_loop_axis(self, plan: KernelPlan) -> int | None:
        """For a schedule that takes a dynamic extent: the axis its tile
        program loops over from 0 to the call's size (read with
        `Builder.extent`), where the extent of `plan` lies along that loop
        (attention's keys); the grid is then static. Raises
        `kgc.tiling.dynamic.NotAtEverySize` where the extent lies along a
        loop the program cannot bound so. None (the default): the extent
        lies along a program axis (`kgc.tiling.dynamic.dynamic_axis`)."""
        return None

    def generate(self, plan: KernelPlan, builder: Builder) -> None:
        """Writes the tile program of `plan` through `builder`."""
        Generator(plan, builder).run()

    def search_space(self, plan: KernelPlan, element: str, precision: str | None,
                     target: Target, runs_on: Target | None,
                     plannable: Callable[[KernelConfig], KernelPlan | None]
                     ) -> tuple[list[KernelConfig], list[KernelConfig]]:
        """The configs a search tries on the kernel that `plan` (kgc's
        choice) computes: (its space, its seeds), sized for `target`, each
        one the kernel can take on `runs_on` (None: on any target).
        `element` is the kernel's widest input, `precision` that of its
        matmuls (None: none, or they differ); `plannable(config)` plans the
        kernel with `config`'s knobs (None: it cannot be). By default the
        config class's space and seeds."""
        space = self.config_class.space(plan.knob_extents, element, target)
        seeds = self.config_class.seeds(plan.knob_extents, element, precision, target)
        return space, seeds

    def table_key(self, plan: KernelPlan) -> TableKey | None:
        """What the tuned-defaults table knows the kernel of `plan` (kgc's
        heuristic plan) by: its element type, variant and shape features
        (`kgc.tuned_defaults`); None: the table has nothing for this
        schedule (the default)."""
        return None

    def tuned_config(self, plan: KernelPlan, table: TunedTable,
                     target: Target) -> KernelConfig | None:
        """The config of `table`'s entry nearest the kernel of `plan`
        (kgc's heuristic plan, for `target`), canonical for this kernel, or
        None where the table has none, where that entry's win over the
        heuristic is not `decisive`, or where this kernel cannot take it (an
        illegal knob here). Planning with it may still fail; the caller
        then keeps `plan`."""
        found = self.nearest_entry(plan, table)
        return None if found is None else canonical_or_none(found[1].config, plan)

    def nearest_entry(self, plan: KernelPlan, table: TunedTable):
        """(the table key of `plan`, `table`'s entry nearest it) where the
        table has one of this schedule's config kind and that entry's win
        over the heuristic is `decisive` (one that is not says the
        heuristic's choice is as good there), else None."""
        key = self.table_key(plan)
        if key is None:
            return None
        entry = table.nearest(self.kind, key)
        if entry is None or not isinstance(entry.config, self.config_class) or \
                not entry.decisive:
            return None
        return key, entry

    def tiled_form(self, plan: KernelPlan) -> TiledForm:
        """How the tiled kernel of `plan` differs from the group's kernel:
        not at all by default."""
        return TiledForm()

    def follow_up(self, plan: KernelPlan, results: list,
                  source: SourceKernel) -> tuple[list, list]:
        """Kernels that finish the tiled kernel's `results`, built at the
        current insertion point, in graph form (kg-tile tiles them next) or
        tiled: (the values that stand for the group's outputs, the kernels
        made). None by default."""
        return list(results), []


def canonical_or_none(config: KernelConfig, plan: KernelPlan) -> KernelConfig | None:
    """`config` canonical for the kernel of `plan`, or None where a knob of
    it is illegal there."""
    try:
        return config.canonical(plan.knob_extents)
    except ConfigError:
        return None


def widest_input(plan: KernelPlan) -> str:
    """The widest element type among the inputs of the kernel of `plan`
    (f32 for a kernel without inputs)."""
    elements = [node.element for node in topological(plan.outputs) if node.is_input]
    return max(elements, key=element_bits) if elements else "f32"
