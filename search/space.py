"""The variant space of a kernel graph: fusion partitions x kernel configs.

A variant of a graph is a partition of its ops into kernels (the candidate
partitions of kg-fuse, `kgc.fusion.propose_partitions`) and a config for
each kernel (its kind's `KernelConfig` space). Kernels are tuned
independently: the same kernel (same content, `kernels.signature`) met in
several partitions is one `KernelVariants`, and a partition's time is the
sum of its kernels' best times. So the search grows with the sum of the
choices, not their product.

How many configs of a kernel are tried is the effort: its default config
(kgc's choice: the tuned-defaults table's where it has one, else the
heuristics'; `kgc.tuned_defaults`) first, then the seeds of its kind
(`KernelConfig.seeds`: the configs known to do well on such kernels, such
as Triton's Hopper matmul configs for big GEMMs), then every config one
knob away from the default, then a sample of the rest drawn with a seed of
the kernel's signature, up to the effort's count (all of them at effort
"high").

The kernel's schedule gives its configs and seeds
(`Schedule.search_space`), and never offers configs the kernel cannot take
(a matmul's `tma` where an operand's layout rules TMA out, or below sm_90).
A schedule that chooses whether it takes a kernel (`Schedule.takes`: a bare
matmul's library call, kgc.tiling.library) and that kgc did not choose is
offered too: its default config follows kgc's, so that the search times the
library call against the Triton matmul it would replace.
"""

from __future__ import annotations

import dataclasses
import random

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.element_types import element_bits
from kgc.targets import target_for
from kgc.dialects import kg
from kgc.fusion import propose_partitions
from kgc.passes.tile import plan_kernel
from kgc.pipeline.pipeline import Pipeline
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.stages import decomposition_pipeline_text
from kgc.search import kernels as kernel_forms
from kgc.passes.registry import PassFailure
from kgc.tiling.config import KernelConfig
from kgc.tiling.iteration import KernelPlan
from kgc.tiling.kernel_ops import kernel_name, kernels_in, ops_named
from kgc.tiling.planner import Planner
from kgc.tiling.registry import matching_schedules, schedules

EFFORT_CONFIGS = {"low": 8, "default": 48, "high": None}


@dataclasses.dataclass
class KernelVariants:
    """One kernel (by content) and the configs to try for it."""

    signature: str
    name: str  # its name in the first partition that made it
    kind: str
    launch_text: str  # a module running just the kernel (kernels.launch_form)
    inline_text: str  # the same computation as plain graph ops (kernels.inline_form)
    default: KernelConfig  # kgc's choice with no knobs given
    configs: list[KernelConfig]  # to try, the default first


@dataclasses.dataclass
class PartitionVariant:
    partition: str  # kgc.fusion.Partition text
    origin: str  # the fusion decisions that gave it
    kernels: list[tuple[str, str]]  # (kernel name in this partition, signature)


def _widest_input(kernel: ir.Operation) -> str:
    elements = [str(ir.RankedTensorType(v.type).element_type) for v in kernel.operands]
    return max(elements, key=element_bits) if elements else "f32"


def _matmul_precision(kernel: ir.Operation) -> str | None:
    """The precision ("ieee", "tf32", "fast_accum") that every matmul of
    `kernel` (graph form) sets; None when one sets none or they differ."""
    precisions = {str(kg.Precision(ir.IntegerAttr(op.attributes["precision"]).value))
                  if "precision" in op.attributes else None
                  for op in ops_named(kernel, "kg.matmul")}
    return precisions.pop() if len(precisions) == 1 else None


def configs_to_try(default: KernelConfig, space: list[KernelConfig], count: int | None,
                   seed: str, seeds: list[KernelConfig] = ()) -> list[KernelConfig]:
    """`default`, the `seeds` (legal configs known to do well, which may
    set knobs that `space` leaves alone), the default's neighbours in
    `space` (one knob changed), then a seeded sample of the rest, `count`
    in all (None: all)."""
    chosen: dict[KernelConfig, None] = {default: None}
    given = default.to_dict()
    first = list(seeds)
    neighbours = [c for c in space
                  if sum(given.get(k) != v for k, v in c.to_dict().items()) == 1]
    rest = [c for c in space if c not in chosen and c not in neighbours and c not in first]
    random.Random(seed).shuffle(rest)
    for config in first + neighbours + rest:
        if count is not None and len(chosen) >= count:
            break
        chosen.setdefault(config, None)
    return list(chosen)


def _plannable(kernel: ir.Operation, planner: Planner):
    """Plans `kernel` (graph form) with the knobs of a config: None when it
    cannot take them."""
    def plannable(config: KernelConfig) -> KernelPlan | None:
        try:
            plan, _ = plan_kernel(kernel, config, planner=planner)
        except PassFailure:
            return None
        return plan
    return plannable


def _other_choices(plan: KernelPlan, outputs, plannable) -> list[KernelConfig]:
    """The default configs of the schedules that match the kernel, choose
    whether they take it (`Schedule.choice_knobs`) and were not chosen."""
    configs = []
    for schedule in matching_schedules(outputs):
        if schedule.kind == plan.schedule or not schedule.choice_knobs:
            continue
        other = plannable(schedule.config_class())
        if other is not None and other.schedule == schedule.kind:
            configs.append(other.config)
    return configs


def variant_space(module_text: str, function: str, effort: str = "default",
                  target: int | None = None
                  ) -> tuple[list[PartitionVariant], dict[str, KernelVariants]]:
    """The partitions of `function` in `module_text` (a kernel graph before
    fusion) and the kernels they make, with the configs to try on `target`
    (an SM version; None: no config is left out for its target). Kernels
    are planned, and their configs sized, for `kgc.targets.target_for(target)`
    (the default target's SMs when None)."""
    if effort not in EFFORT_CONFIGS:
        raise KgcError(f"effort must be one of {', '.join(EFFORT_CONFIGS)}, got {effort!r}")
    count = EFFORT_CONFIGS[effort]
    record = target_for(target)
    # The groups of every partition, and then their kernels, planned once.
    planner = Planner()
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(module_text).operation
        Pipeline.parse(decomposition_pipeline_text(record.sm)).run(module)
        functions = {ir.StringAttr(f.attributes["sym_name"]).value: f
                     for f in ops_named(module, "func.func")}
        if function not in functions:
            raise KgcError(f"no function @{function} (have: {', '.join(functions)})")
        partitions = propose_partitions(functions[function], record, planner)
    variants: list[PartitionVariant] = []
    kernels: dict[str, KernelVariants] = {}
    for partition in partitions:
        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            # Cut as a compile with this partition will cut it, so that the
            # kernels and their names are the ones a GraphConfig refers to.
            fused = ir.Module.parse(module_text).operation
            GraphConfig(function, str(partition)).fuse(fused, record.sm, planner)
            made = []
            for kernel in kernels_in(fused):
                if kernel.parent.name != "func.func" or ir.StringAttr(
                        kernel.parent.attributes["sym_name"]).value != function:
                    continue
                signature = kernel_forms.signature(kernel)
                made.append((kernel_name(kernel), signature))
                if signature in kernels:
                    continue
                plan, outputs = plan_kernel(kernel, target=record, planner=planner)
                default = plan.config
                plannable = _plannable(kernel, planner)
                space, seeds = schedules()[plan.schedule].search_space(
                    plan, _widest_input(kernel), _matmul_precision(kernel), record,
                    None if target is None else record, plannable)
                seeds = _other_choices(plan, outputs, plannable) + list(seeds)
                kernels[signature] = KernelVariants(
                    signature, kernel_name(kernel), plan.kind,
                    str(kernel_forms.launch_form(kernel)), str(kernel_forms.inline_form(kernel)),
                    default, configs_to_try(default, space, count, signature, seeds))
        variants.append(PartitionVariant(str(partition), partition.origin, made))
    return variants, kernels

