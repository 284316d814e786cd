"""The schedules kgc knows, in one place, and planning a group with them.

`plan_group` asks the registered schedules in turn; the first that matches
plans the kernel, and a dry run of its generator checks that the program
can be written. The built-in schedules are listed here, narrowest pattern
first: the gathers (`kgc.tiling.gather`), then attention
(`kgc.tiling.attention`) before matmul (`kgc.tiling.matmul`), reduction
and pointwise (`kgc.tiling.plan`).
A bare matmul's library call (`kgc.tiling.library`) is tried before the
matmul schedule; it takes a group only where its rule or the kernel's knobs
say so (`Schedule.takes`). `register_schedule` adds one, tried before them;
a schedule needs nothing else of kgc to be used (its module defines a
`Schedule` and calls `register_schedule`), and its config class can be read
back from JSON (`KernelConfig.from_dict`) while it is registered.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.targets import Target, target_for
from kgc.tiling.attention import AttentionSchedule
from kgc.tiling.config import CONFIG_CLASSES, ConfigError, KernelConfig
from kgc.tiling.dynamic import dynamic_axis, is_over_dynamic_extent, with_dynamic_axis
from kgc.tiling.gather import GatherReductionSchedule, GatherSchedule
from kgc.tiling.generate import DryBuilder
from kgc.tiling.graph_model import SUPPORTED_OPS, Node, topological
from kgc.tiling.iteration import KernelPlan, Unplannable
from kgc.tiling.library import LibraryMatmulSchedule
from kgc.tiling.matmul import MatmulSchedule
from kgc.tiling.plan import PointwiseSchedule, ReductionSchedule
from kgc.tiling.schedule import Schedule
from kgc.tuned_defaults import TunedTable

__all__ = ["kernel_kind", "matching_schedules", "plan_group", "register_schedule",
           "schedule_for", "schedules", "unregister_schedule"]

# Tried in order; the first that matches (and takes the group) plans the
# kernel. Only the gathers' own schedules write a kg.gather: they go before
# every other. Attention plans a narrower pattern than matmuls: it goes
# before them; a bare matmul's library call goes before the Triton matmul.
_SCHEDULES: list[Schedule] = [GatherReductionSchedule(), GatherSchedule(), AttentionSchedule(),
                              LibraryMatmulSchedule(), MatmulSchedule(), ReductionSchedule(),
                              PointwiseSchedule()]
for _schedule in _SCHEDULES:
    CONFIG_CLASSES.setdefault(_schedule.config_class.kind, _schedule.config_class)


def register_schedule(schedule: Schedule) -> Schedule:
    """Adds `schedule`, tried before those registered earlier (so that a
    schedule for a narrower pattern goes before a general one)."""
    if not schedule.kind:
        raise ValueError(f"{type(schedule).__name__} needs a `kind`")
    if any(s.kind == schedule.kind for s in _SCHEDULES):
        raise ValueError(f"a schedule of kind '{schedule.kind}' is registered already")
    _SCHEDULES.insert(0, schedule)
    CONFIG_CLASSES.setdefault(schedule.config_class.kind, schedule.config_class)
    return schedule


def unregister_schedule(kind: str) -> Schedule:
    """Removes the schedule of `kind` (one that `register_schedule` added,
    say, for the time a test needs it) and returns it."""
    for index, schedule in enumerate(_SCHEDULES):
        if schedule.kind == kind:
            if not any(s.config_class is schedule.config_class
                       for s in _SCHEDULES if s is not schedule):
                CONFIG_CLASSES.pop(schedule.config_class.kind, None)
            return _SCHEDULES.pop(index)
    raise ValueError(f"no schedule of kind '{kind}' is registered")


def schedules() -> dict[str, Schedule]:
    """The registered schedules by kind, in the order they are tried."""
    return {s.kind: s for s in _SCHEDULES}


def matching_schedules(outputs: Sequence[Node]) -> list[Schedule]:
    """Every registered schedule that can compute `outputs`, in the order
    they are tried."""
    order = topological(list(outputs))
    return [schedule for schedule in _SCHEDULES if schedule.match(order)]


def schedule_for(outputs: Sequence[Node], knobs: dict | None = None, kind: str | None = None,
                 target: Target | int | None = None, dynamic: bool = False,
                 table: TunedTable | None = None) -> Schedule:
    """The schedule that computes `outputs`: of the schedules that match,
    the one of config kind `kind` when given, else the first that takes the
    group with the kernel's `knobs` (name -> value) on `target` with the
    tuned-defaults `table` (None: kgc's rules alone). For a
    kernel over a dynamic extent (`dynamic`), a schedule that takes none is
    passed over unless a knob of its own chose it (a bare matmul then stays
    Triton's rather than the library's)."""
    order = topological(list(outputs))
    matching = [schedule for schedule in _SCHEDULES if schedule.match(order)]
    if not matching:
        raise Unplannable("no schedule computes these ops")
    # The choices: the first matching schedule, and past it only where the
    # ones before may leave the group to the next (they override `takes`).
    choices = []
    for schedule in matching:
        choices.append(schedule)
        if type(schedule).takes is Schedule.takes:
            break
    if kind is not None:
        for schedule in choices:
            if schedule.config_class.kind == kind:
                return schedule
        raise Unplannable(f"a {kind} config was given for a {choices[0].kind} kernel")
    knobs = dict(knobs or {})
    record = target_for(target)
    for schedule in choices[:-1]:
        if dynamic and not schedule.dynamic_extents and \
                not any(knobs.get(knob) for knob in schedule.choice_knobs):
            continue
        if schedule.takes(list(outputs), order, knobs, record, table):
            return schedule
    return choices[-1]


def kernel_kind(outputs: Sequence[Node]) -> str:
    """The kind of kernel (its schedule's) that computes `outputs` when kgc
    chooses."""
    return schedule_for(outputs).kind


def plan_group(outputs: Sequence[Node], config: KernelConfig | None = None,
               kernel: str | None = None, target: Target | int | None = None,
               table: TunedTable | None = None) -> KernelPlan:
    """The plan of a kernel computing `outputs` with the knobs `config` sets
    (kgc's choice for the others) for `target` (a Target or an SM version;
    None: the default, `kgc.targets.target_for`), checked by a dry run of
    its schedule's generator. Raises Unplannable, or ConfigError for an
    illegal knob (naming `kernel`). Each call plans anew; a
    `kgc.tiling.planner.Planner` remembers plans for the passes of a
    pipeline run.

    With a tuned-defaults `table` (`kgc.tuned_defaults`) and no knob given,
    kgc's choice is the config of the table's nearest entry where the
    schedule finds one that suits this kernel (`Schedule.tuned_config`)
    and the kernel plans with it; its heuristics otherwise. Given knobs
    (a user's, a search candidate's) are never mixed with the table's.

    A group over the dynamic extent is planned at the hint and then made
    to hold at every size (`kgc.tiling.dynamic`): its schedule's config for
    dynamic extents, the dynamic axis found and made the outermost program
    axis (`KernelPlan.dynamic_axis`). Raises NotAtEverySize where no plan
    holds, so that kg-fuse makes no kernel that kg-tile cannot tile."""
    outputs = list(outputs)
    target = target_for(target)
    dynamic = is_over_dynamic_extent(outputs)
    # A config names its kind, which picks among the schedules that match.
    schedule = schedule_for(outputs, kind=None if config is None else config.kind,
                            target=target, dynamic=dynamic, table=table)
    plan = _plan_at_hint(schedule, outputs, config, kernel, target, table)
    return _at_every_size(schedule, plan, kernel, target) if dynamic else plan


def _at_every_size(schedule: Schedule, plan: KernelPlan, kernel: str | None,
                   target: Target) -> KernelPlan:
    if not schedule.dynamic_extents:
        raise Unplannable(f"its {schedule.kind} schedule takes no dynamic extent (`?`) yet")
    again = schedule.dynamic_config(plan)
    if again is not None:
        plan = _plan_with(schedule, plan.outputs, again, kernel, target)
    looped = schedule.dynamic_loop_axis(plan)
    if looped is not None:
        return dataclasses.replace(plan, dynamic_axis=looped)
    inputs = sorted((n for n in topological(plan.outputs) if n.is_input),
                    key=lambda n: n.input_index)
    return with_dynamic_axis(plan, dynamic_axis(plan, inputs + list(plan.outputs)))


def _plan_at_hint(schedule: Schedule, outputs: list[Node], config: KernelConfig | None,
                  kernel: str | None, target: Target, table: TunedTable | None) -> KernelPlan:
    if config is None:
        config = schedule.config_class()
    elif not isinstance(config, schedule.config_class):
        raise Unplannable(f"a {config.kind} config was given for a {schedule.kind} kernel")
    plan = _plan_with(schedule, outputs, config, kernel, target)
    if table is None or config.given():
        return plan
    tuned = schedule.tuned_config(plan, table, target)
    if tuned is None or tuned == plan.config:
        return plan
    try:
        return _plan_with(schedule, outputs, tuned, kernel, target)
    except (Unplannable, ConfigError):
        # The nearest measured config does not suit this kernel (a tile
        # that must cover an axis here, an operand TMA cannot read).
        return plan


def _plan_with(schedule: Schedule, outputs: list[Node], config: KernelConfig,
               kernel: str | None, target: Target) -> KernelPlan:
    order = topological(outputs)
    for node in order:
        if not node.is_input and node.op not in SUPPORTED_OPS:
            raise Unplannable(f"kg.{node.op} must be decomposed before tiling")
        if 0 in node.shape:
            what = "an input" if node.is_input else f"kg.{node.op}"
            raise Unplannable(f"{what} of shape {node.shape} is empty; kgc needs at least one "
                              "element in every tensor")
    plan = schedule.plan(outputs, order, config, kernel, target)
    plan.schedule = schedule.kind
    if plan.config.num_programs is not None:
        # More programs than tiles would have nothing to do.
        programs = min(plan.config.num_programs, plan.num_programs())
        plan.persistent_programs = programs
        plan.config = dataclasses.replace(plan.config, num_programs=programs)
    try:
        schedule.generate(plan, DryBuilder())
    except ConfigError as error:
        # A knob the generator found illegal for this kernel's buffers (tma).
        where = f"{schedule.kind} kernel @{kernel}" if kernel else f"{schedule.kind} kernel"
        raise ConfigError(f"{where}: {error}") from None
    return plan
