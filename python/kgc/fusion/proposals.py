"""The candidate partitions of a function worth compiling and timing.

`propose_partitions` runs the greedy fusion under each combination of
decisions that can change its result, and adds "no fusion" (every op a
kernel of its own). Turning off a decision that no merge of a run made
leaves that run as it is, so from the default the search turns off, one at
a time, only the kinds of merges each run made: every distinct greedy
partition over all combinations is found, each run at most once, and the
plans of the groups they share are computed once (`FusionGraph.plan`).
"""

from __future__ import annotations

from mlir import ir

from kgc.fusion.graph import FusionGraph
from kgc.fusion.greedy import FusionDecisions, greedy_partition
from kgc.fusion.partition import Partition


def propose_partitions(function: ir.Operation | FusionGraph, target=None,
                       planner=None) -> list[Partition]:
    """Distinct partitions of `function` (a func.func, whose groups are
    planned for `target`, a kgc.targets.Target or SM version, None the
    default, by `planner`, a kgc.tiling.planner.Planner, None one of its
    own; or its graph): the default greedy one first, then those of other
    decisions in the order found, then no fusion. Each partition's `origin`
    names the decisions that gave it first."""
    graph = function if isinstance(function, FusionGraph) else \
        FusionGraph.of_function(function, target, planner)
    found: list[Partition] = []
    tried: set[FusionDecisions] = set()
    pending = [FusionDecisions()]
    while pending:
        decisions = pending.pop(0)
        if decisions in tried:
            continue
        tried.add(decisions)
        result = greedy_partition(graph, decisions)
        if result.partition not in found:
            found.append(result.partition)
        pending.extend(decisions.without(kind) for kind in sorted(result.kinds_made))
    unfused = Partition.unfused(graph)
    if unfused not in found:
        found.append(unfused)
    return found
