"""The schedules kgc knows, in one place, and planning a group with them.

`plan_group` asks the registered schedules in turn; the first that matches
plans the kernel, and a dry run of its generator checks that the program
can be written. The built-in schedules are listed here, narrowest pattern
first: the gathers (`kgc.tiling.gather`), then attention
(`kgc.tiling.attention`) before matmul (`kgc.tiling.matmul`), reduction
and pointwise (`kgc.tiling.plan`).
`register_schedule` adds one, tried before them; a schedule needs nothing
else of kgc to be used (its module defines a `Schedule` and calls
`register_schedule`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.targets import Target, target_for
from kgc.tiling import plan_cache
from kgc.tiling.attention import AttentionSchedule
from kgc.tiling.config import ConfigError, KernelConfig
from kgc.tiling.gather import GatherReductionSchedule, GatherSchedule
from kgc.tiling.generate import DryBuilder
from kgc.tiling.graph_model import SUPPORTED_OPS, Node, topological
from kgc.tiling.iteration import KernelPlan, Unplannable
from kgc.tiling.matmul import MatmulSchedule
from kgc.tiling.plan import PointwiseSchedule, ReductionSchedule
from kgc.tiling.schedule import Schedule

__all__ = ["kernel_kind", "plan_group", "register_schedule", "schedule_for", "schedules",
           "unregister_schedule"]

# Tried in order; the first that matches plans the kernel. Attention plans
# a narrower pattern than matmuls: it goes first. Only the gathers' own
# schedules write a kg.gather: they go before every other.
_SCHEDULES: list[Schedule] = [GatherReductionSchedule(), GatherSchedule(), AttentionSchedule(),
                              MatmulSchedule(), ReductionSchedule(), PointwiseSchedule()]


def register_schedule(schedule: Schedule) -> Schedule:
    """Adds `schedule`, tried before those registered earlier (so that a
    schedule for a narrower pattern goes before a general one)."""
    if not schedule.kind:
        raise ValueError(f"{type(schedule).__name__} needs a `kind`")
    if any(s.kind == schedule.kind for s in _SCHEDULES):
        raise ValueError(f"a schedule of kind '{schedule.kind}' is registered already")
    _SCHEDULES.insert(0, schedule)
    return schedule


def unregister_schedule(kind: str) -> Schedule:
    """Removes the schedule of `kind` (one that `register_schedule` added,
    say, for the time a test needs it) and returns it."""
    for index, schedule in enumerate(_SCHEDULES):
        if schedule.kind == kind:
            return _SCHEDULES.pop(index)
    raise ValueError(f"no schedule of kind '{kind}' is registered")


def schedules() -> dict[str, Schedule]:
    """The registered schedules by kind, in the order they are tried."""
    return {s.kind: s for s in _SCHEDULES}


def schedule_for(outputs: Sequence[Node]) -> Schedule:
    """The schedule that computes `outputs`."""
    order = topological(list(outputs))
    for schedule in _SCHEDULES:
        if schedule.match(order):
            return schedule
    raise Unplannable("no schedule computes these ops")


def kernel_kind(outputs: Sequence[Node]) -> str:
    """The kind of kernel (its schedule's) that computes `outputs`."""
    return schedule_for(outputs).kind


def plan_group(outputs: Sequence[Node], config: KernelConfig | None = None,
               kernel: str | None = None, target: Target | int | None = None) -> KernelPlan:
    """The plan of a kernel computing `outputs` with the knobs `config` sets
    (kgc's choice for the others) for `target` (a Target or an SM version;
    None: the default, `kgc.targets.target_for`), checked by a dry run of
    its schedule's generator. Raises Unplannable, or ConfigError for an
    illegal knob (naming `kernel`). A group of the same content planned
    before with the same config for the same target (kg-fuse's, for
    kg-tile) gives its plan again (plan_cache)."""
    outputs = list(outputs)
    target = target_for(target)
    schedule = schedule_for(outputs)
    if config is None:
        config = schedule.config_class()
    elif not isinstance(config, schedule.config_class):
        raise Unplannable(f"a {config.kind} config was given for a {schedule.kind} kernel")
    cache_key = plan_cache.key(outputs, schedule.kind, config, target)
    known = plan_cache.recall(cache_key)
    if known is not None:
        return known
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
    plan_cache.remember(cache_key, plan)
    return plan
