"""A partition of a function's fusable ops into kernels, as data.

A `Partition` names each group by the positions of its ops among the
function's fusable ops (its kg ops in program order, kernels already there
not counted). Its text form lists the groups separated by `;`, each a list
of positions separated by `,`:

    0,1,2;3;4,5      three kernels: ops 0-2, op 3, ops 4 and 5

Groups and positions are kept sorted, so two partitions with the same
groups are equal and print alike, and `Partition.parse(str(p)) == p`.
Constants that are only used by other ops are copied into every kernel that
reads them and belong to no group; dead ops belong to none either.

`Partition.groups_in(graph)` checks a partition against a function and
returns its groups of nodes; an invalid partition raises `InvalidPartition`
naming the op, its location and why: a position out of range, an op that is
no kernel's (a copied constant or a dead op), an op in two groups or in
none, groups that depend on each other in a cycle or around an op that is
not fused, or a group that cannot be one kernel.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from mlir import ir

from kgc.fusion.graph import FusionGraph
from kgc.tiling.graph_model import SOURCE_OPS, Node
from kgc.tiling.plan import Unplannable

GROUP_SEPARATOR = ";"
POSITION_SEPARATOR = ","


class InvalidPartition(Exception):
    """A partition that does not fit its function; the message says why."""

    def __init__(self, message: str, location: ir.Location | None = None):
        super().__init__(message)
        self.message = message
        self.location = location


@dataclasses.dataclass(frozen=True)
class Partition:
    """Groups of op positions, each group one kernel."""

    groups: tuple[tuple[int, ...], ...]
    # How the partition came about (for reports), not part of its identity.
    origin: str = dataclasses.field(default="", compare=False)

    def __post_init__(self):
        groups = tuple(sorted((tuple(sorted(g)) for g in self.groups), key=lambda g: g or (-1,)))
        object.__setattr__(self, "groups", groups)

    @classmethod
    def of(cls, groups: Iterable[Iterable[int]], origin: str = "") -> "Partition":
        return cls(tuple(tuple(g) for g in groups), origin)

    @classmethod
    def parse(cls, text: str, origin: str = "") -> "Partition":
        """`0,1;2` => Partition(((0, 1), (2,))). Raises InvalidPartition.
        Empty text is the partition of a function with nothing to compute."""
        if not text.strip():
            return cls((), origin)
        groups = []
        for number, part in enumerate(text.split(GROUP_SEPARATOR)):
            positions = []
            for item in part.split(POSITION_SEPARATOR):
                item = item.strip()
                if not item.isdigit():
                    raise InvalidPartition(
                        f"partition '{text}': group {number} has '{item}' where an op position "
                        f"(a non-negative integer) belongs; groups are separated by "
                        f"'{GROUP_SEPARATOR}', positions by '{POSITION_SEPARATOR}'")
                positions.append(int(item))
            groups.append(positions)
        return cls.of(groups, origin)

    def __str__(self) -> str:
        return GROUP_SEPARATOR.join(POSITION_SEPARATOR.join(map(str, g)) for g in self.groups)

    @classmethod
    def of_groups(cls, graph: FusionGraph, groups: Iterable[Iterable[Node]],
                  origin: str = "") -> "Partition":
        return cls.of(([graph.position(n) for n in g] for g in groups), origin)

    @classmethod
    def unfused(cls, graph: FusionGraph) -> "Partition":
        """Every op a kernel of its own."""
        return cls.of(([graph.position(n)] for n in graph.computed()), "no fusion")

    def groups_in(self, graph: FusionGraph) -> list[list[Node]]:
        """The groups of nodes of `graph`, checked. Raises InvalidPartition."""
        where = f"partition '{self}' of @{graph.name}"
        group_of: dict[int, int] = {}
        groups: list[list[Node]] = []
        for number, positions in enumerate(self.groups):
            group = []
            for position in positions:
                if position >= len(graph.nodes):
                    raise InvalidPartition(
                        f"{where}: op {position} does not exist; the function has "
                        f"{len(graph.nodes)} fusable ops (0 to {len(graph.nodes) - 1})")
                node = graph.nodes[position]
                if not graph.is_computed(node):
                    why = (f"a {node.op}, which is copied into every kernel that uses it"
                           if node.op in SOURCE_OPS and id(node) in graph.live else
                           "dead: nothing returned depends on it")
                    raise InvalidPartition(f"{where}: {graph.describe(node)} is {why}; leave it "
                                           "out of the partition", node.location)
                if id(node) in group_of:
                    raise InvalidPartition(f"{where}: {graph.describe(node)} is in groups "
                                           f"{group_of[id(node)]} and {number}", node.location)
                group_of[id(node)] = number
                group.append(node)
            if not group:
                raise InvalidPartition(f"{where}: group {number} is empty")
            groups.append(group)
        for node in graph.computed():
            if id(node) not in group_of:
                raise InvalidPartition(f"{where}: {graph.describe(node)} is in no group",
                                       node.location)
        _check_order(graph, groups, group_of, where)
        for number, group in enumerate(groups):
            try:
                graph.plan(group)
            except Unplannable as reason:
                raise InvalidPartition(f"{where}: group {number} (ops "
                                       f"{','.join(str(graph.position(n)) for n in group)}) cannot "
                                       f"be one kernel: {reason}", group[-1].location) from None
        return groups


def _check_order(graph: FusionGraph, groups: list[list[Node]], group_of: dict[int, int],
                 where: str) -> None:
    """Raises InvalidPartition when no order of the kernels among the ops that
    stay in place respects every dependence."""
    reads = group_reads(groups)
    # A cycle between groups: a depth-first search for a back edge.
    state = [0] * len(groups)  # 0 new, 1 on the path, 2 done
    path: list[int] = []

    def visit(number: int) -> None:
        state[number] = 1
        path.append(number)
        for producer in sorted(reads[number]):
            if state[producer] == 1:
                cycle = path[path.index(producer):] + [producer]
                node = groups[number][-1]
                raise InvalidPartition(
                    f"{where}: groups {' <- '.join(map(str, cycle))} read each other's results "
                    "in a cycle; no order of their kernels works", node.location)
            if state[producer] == 0:
                visit(producer)
        path.pop()
        state[number] = 2

    for number in range(len(groups)):
        if state[number] == 0:
            visit(number)
    # Each kernel goes before the first op that stays in place and reads its
    # results (directly or through later kernels), and after every such op
    # whose results it reads (directly or through earlier kernels).
    order = dependency_order(reads)
    earliest = [-1] * len(groups)
    for number in order:
        mine = [graph.last_outside_read[id(n)] for n in groups[number]
                if id(n) in graph.last_outside_read]
        earliest[number] = max([*mine, *(earliest[p] for p in reads[number])], default=-1)
    latest = anchors(graph, groups, reads, order)
    for number in order:
        if earliest[number] >= latest[number]:
            outside = graph.outside[latest[number]]
            raise InvalidPartition(
                f"{where}: group {number} must run both before and after the {outside.name} "
                "that stays in place (it feeds it and reads its result)",
                groups[number][-1].location)


def group_reads(groups: list[list[Node]]) -> list[set[int]]:
    """For each group, the groups whose values it reads."""
    group_of = {id(n): number for number, group in enumerate(groups) for n in group}
    return [{group_of[id(o)] for n in group for o in n.operands
             if id(o) in group_of and group_of[id(o)] != number}
            for number, group in enumerate(groups)]


def dependency_order(reads: list[set[int]]) -> list[int]:
    """The groups in an order where each comes after the groups it reads,
    the lowest-numbered ready group first (`reads` has no cycle)."""
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(reads):
        ready = next(i for i in range(len(reads)) if i not in done and reads[i] <= done)
        order.append(ready)
        done.add(ready)
    return order


def anchors(graph: FusionGraph, groups: list[list[Node]], reads: list[set[int]],
            order: list[int]) -> list[int]:
    """For each group, the position in `graph.outside` of the op its kernel
    must go before: the first op that stays in place and reads its results,
    directly or through later kernels (the terminator when none does)."""
    latest = [len(graph.outside) - 1] * len(groups)
    for number in reversed(order):
        for node in groups[number]:
            position = graph.first_outside_use.get(id(node))
            if position is not None:
                latest[number] = min(latest[number], position)
        for producer in reads[number]:
            latest[producer] = min(latest[producer], latest[number])
    return latest
