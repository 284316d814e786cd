"""One planning step for kg-fuse and kg-tile: a `Planner` plans groups of
ops as kernels and remembers each plan for as long as the planner lives.

kg-fuse plans every group it considers as a kernel; kg-tile plans the body
of every kernel. A pipeline run makes one Planner and hands it to both
passes (`kgc.pipeline.Pipeline.run`, `Pass.planner`), so a kernel whose
body is a group kg-fuse planned gets that plan again instead of a second
one; callers that compile in several pipeline runs (a GraphConfig's fusion,
then the rest; the search's variants) pass one Planner to all of them.
Nothing outlives the planner: a pass run outside a pipeline, or kg-tile on
a file fused elsewhere, makes its own and plans what it meets.

Plans are looked up by the content of their group (`signature`): kg-fuse
and kg-tile build the same `Node`s (ops, attributes, types, inputs in the
kernel's argument order) wherever kg-fuse changed nothing inside the body.
A plan reads only its nodes' content (never their MLIR values), so a plan
made for one group serves any group of the same signature, schedule,
config and target. Only plans of nodes without MLIR values and locations
are kept (kg-fuse's), so that no plan keeps erased IR reachable.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Sequence

from kgc.targets import Target, target_for
from kgc.tiling.config import KernelConfig
from kgc.tiling.dynamic import is_over_dynamic_extent
from kgc.tiling.graph_model import Node, topological
from kgc.tiling.index_maps import DynamicExtent
from kgc.tiling.iteration import KernelPlan
from kgc.tiling.registry import plan_group, schedule_for
from kgc.tuned_defaults import TunedTable

__all__ = ["Planner", "signature"]


def signature(outputs: Sequence[Node]) -> str:
    """A hex digest of the group computing `outputs`: each node's op,
    attributes, shape, element type and operands (inputs by their index),
    in a canonical order, and which nodes are the outputs, in order. The
    same ops on the same types and inputs give the same text in every
    process."""
    order = topological(outputs)
    number = {id(node): position for position, node in enumerate(order)}
    lines = []
    for node in order:
        operands = ",".join(str(number[id(o)]) for o in node.operands)
        attrs = ",".join(f"{key}={node.attrs[key]!r}" for key in sorted(node.attrs))
        index = f"#{node.input_index}" if node.is_input else ""
        # The dynamic extent is `?`: a group over it is not the same kernel
        # as one at the hint's size.
        shape = tuple("?" if isinstance(d, DynamicExtent) else d for d in node.shape)
        lines.append(f"{node.op}{index}({operands}){{{attrs}}}:{shape}x{node.element}")
    lines.append("->" + ",".join(str(number[id(o)]) for o in outputs))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


class Planner:
    """Plans groups as kernels (`kgc.tiling.registry.plan_group`), each
    group of a content, config and target once for the planner's life."""

    def __init__(self) -> None:
        self._plans: dict[tuple, KernelPlan] = {}
        # Passes anchored on nested ops may run on several threads.
        self._lock = threading.Lock()
        # How many plans were made (not recalled): what a test counts.
        self.made = 0

    def plan(self, outputs: Sequence[Node], config: KernelConfig | None = None,
             kernel: str | None = None, target: Target | int | None = None,
             table: TunedTable | None = None) -> KernelPlan:
        """`plan_group(outputs, config, kernel, target, table)`, or the plan
        made before for a group of the same content with the same config for
        the same target and tuned-defaults table. Raises Unplannable or
        ConfigError as plan_group does (neither is remembered: each names
        its kernel)."""
        outputs = list(outputs)
        target = target_for(target)
        schedule = schedule_for(outputs, target=target, dynamic=is_over_dynamic_extent(outputs),
                                table=table)
        given = config if config is not None else schedule.config_class()
        # Schedules may share a config class: a plan is its schedule's.
        key = (signature(outputs), schedule.kind, given, target,
               None if table is None else table.fingerprint())
        with self._lock:
            known = self._plans.get(key)
        if known is not None:
            return known
        plan = plan_group(outputs, config, kernel, target, table)
        with self._lock:
            self.made += 1
            if not any(node.value is not None or node.location is not None
                       for node in topological(plan.outputs)):
                self._plans[key] = plan
        return plan
