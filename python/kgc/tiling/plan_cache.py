"""Plans remembered by the content of their group, so that a kernel is
planned once on its way through kgc's passes.

kg-fuse plans every group it makes a kernel of; kg-tile plans the kernel's
body again. Both build the same `Node`s (ops, attributes, types, inputs in
the kernel's argument order) wherever kg-fuse changed nothing inside the
body, so `plan_group` looks a group up by `signature` first. A plan reads
only its nodes' content (never their MLIR values), so a plan made for one
group serves any group of the same signature. Only plans of nodes without
MLIR values and locations are kept (kg-fuse's), so that none keeps a module alive.

`signature(outputs)` is also a stable name for a kernel's content: the same
ops on the same types and inputs give the same text in every process.
"""

from __future__ import annotations

import collections
import hashlib
import threading
from typing import Sequence

from kgc.tiling.graph_model import Node, topological

# Enough for the kernels of a few modules; each plan holds its nodes.
_CAPACITY = 256
_plans: "collections.OrderedDict[tuple, object]" = collections.OrderedDict()
# Modules may be compiled on several threads at once.
_lock = threading.Lock()


def signature(outputs: Sequence[Node]) -> str:
    """A hex digest of the group computing `outputs`: each node's op,
    attributes, shape, element type and operands (inputs by their index),
    in a canonical order, and which nodes are the outputs, in order."""
    order = topological(outputs)
    number = {id(node): position for position, node in enumerate(order)}
    lines = []
    for node in order:
        operands = ",".join(str(number[id(o)]) for o in node.operands)
        attrs = ",".join(f"{key}={node.attrs[key]!r}" for key in sorted(node.attrs))
        index = f"#{node.input_index}" if node.is_input else ""
        lines.append(f"{node.op}{index}({operands}){{{attrs}}}:{node.shape}x{node.element}")
    lines.append("->" + ",".join(str(number[id(o)]) for o in outputs))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:32]


def key(outputs: Sequence[Node], schedule: str, config, target) -> tuple:
    """The cache key of a group planned by the schedule named `schedule`
    with `config` (a hashable KernelConfig) for `target` (a hashable
    kgc.targets.Target): schedules may share a config class, and a plan is
    its schedule's and its target's."""
    return signature(outputs), schedule, config, target


def recall(plan_key: tuple):
    """The plan remembered under `plan_key`, or None."""
    with _lock:
        plan = _plans.get(plan_key)
        if plan is not None:
            _plans.move_to_end(plan_key)
        return plan


def remember(plan_key: tuple, plan) -> None:
    """Keeps `plan` unless its nodes hold MLIR values or locations: those
    would keep their IR and context alive as long as the plan is kept."""
    if any(node.value is not None or node.location is not None
           for node in topological(plan.outputs)):
        return
    with _lock:
        _plans[plan_key] = plan
        _plans.move_to_end(plan_key)
        while len(_plans) > _CAPACITY:
            _plans.popitem(last=False)


def forget_all() -> None:
    with _lock:
        _plans.clear()
