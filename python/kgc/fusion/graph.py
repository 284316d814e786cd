"""The fusable ops of a function as a graph: nodes, who uses them, what
escapes to ops that stay in place, and the order those ops impose.

The fusable ops are the kg ops of the function's body in program order,
kernels and launches already there excepted; their positions in that order
are how a `Partition` names them. Each group of ops considered as a kernel
is planned at most once (`FusionGraph.plan`), however many partitions or
merges ask about it, by the planner the graph is given
(`kgc.tiling.planner.Planner`), which kg-tile then asks for the plans of
the kernels made.
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from kgc.targets import Target, target_for
from kgc.tiling.graph_model import SOURCE_OPS, Node, nodes_from_ops
from kgc.tiling.kernel_ops import walk_ops
from kgc.tiling.iteration import KernelPlan, Unplannable
from kgc.tiling.planner import Planner, signature


class NotFusable(Exception):
    """An op of the function that kg-fuse cannot place in a kernel."""

    def __init__(self, message: str, location: ir.Location | None):
        super().__init__(message)
        self.message = message
        self.location = location


def is_fusable(op: ir.Operation) -> bool:
    """kg ops of the graph are partitioned into kernels; kernels and
    launches already there, and every other op, stay as they are."""
    return op.name.startswith("kg.") and op.name not in ("kg.kernel", "kg.launch")


def function_name(function: ir.Operation) -> str:
    return ir.StringAttr(function.attributes["sym_name"]).value


class FusionGraph:
    """The nodes of a function, who uses them, and where ops that are not
    fused constrain the order of kernels."""

    @classmethod
    def of_function(cls, function: ir.Operation, target: Target | int | None = None,
                    planner: Planner | None = None) -> "FusionGraph":
        """The graph of `function`'s body, its groups planned for `target`
        (None: the default, kgc.targets.target_for) by `planner` (None: one
        of the graph's own). Raises NotFusable for a kg op with other than
        one result."""
        blocks = function.regions[0].blocks
        # A declaration has no body, so nothing to fuse.
        ops = [o.operation for o in blocks[0].operations] if len(blocks) else []
        fusable = [o for o in ops if is_fusable(o)]
        for op in fusable:
            if len(op.results) != 1:
                raise NotFusable(f"{op.name} cannot be fused", op.location)
        nodes, by_value = nodes_from_ops(fusable)
        return cls(function_name(function), nodes, by_value, ops, target, planner)

    def __init__(self, name: str, nodes: list[Node], by_value: dict, ops: list[ir.Operation],
                 target: Target | int | None = None, planner: Planner | None = None):
        self.name = name
        self.target = target_for(target)
        self.planner = planner if planner is not None else Planner()
        self.nodes = nodes
        self.by_value = by_value
        self.index = {id(n): i for i, n in enumerate(nodes)}
        self.users: dict[int, list[Node]] = {id(n): [] for n in nodes}
        for node in nodes:
            for operand in node.operands:
                if id(operand) in self.users:
                    self.users[id(operand)].append(node)
        # Ops that are not fused here (return, existing kernels) keep their
        # places: a kernel goes before the first of them that reads its
        # results, and after those whose results it reads.
        self.outside = [op for op in ops if not is_fusable(op)]
        # Values used by them, and where they are first used.
        self.escapes: set[int] = set()
        self.first_outside_use: dict[int, int] = {}
        results_of: dict[ir.Value, int] = {}
        for position, op in enumerate(self.outside):
            # Uses inside an outside op's regions (a loop body reading a
            # value of the function) count as uses by that op.
            nested = [value for inner in walk_ops(op) for value in inner.operands]
            for value in list(op.operands) + nested:
                node = by_value.get(value)
                if node is not None and not node.is_input:
                    self.escapes.add(id(node))
                    self.first_outside_use.setdefault(id(node), position)
            for result in op.results:
                results_of[result] = position
        # Where each node reads results of outside ops: the last such op.
        self.last_outside_read: dict[int, int] = {}
        # The nodes that read results of outside ops at a position or later.
        self.reading_from: list[list[Node]] = [[] for _ in self.outside]
        for node in nodes:
            positions = [results_of[o.value] for o in node.operands
                         if o.is_input and o.value in results_of]
            if positions:
                self.last_outside_read[id(node)] = max(positions)
                self.reading_from[max(positions)].append(node)
        for position in reversed(range(len(self.outside) - 1)):
            self.reading_from[position] = self.reading_from[position] + \
                self.reading_from[position + 1]

        self.live = self._live()
        self._plans: dict[tuple, KernelPlan | Unplannable] = {}

    def _live(self) -> set[int]:
        """Nodes whose value reaches a use outside the fused ops."""
        live: set[int] = set()
        stack = [n for n in self.nodes if id(n) in self.escapes]
        while stack:
            node = stack.pop()
            if id(node) in live:
                continue
            live.add(id(node))
            stack.extend(o for o in node.operands if not o.is_input)
        return live

    def is_computed(self, node: Node) -> bool:
        """Kernels compute the live nodes, but not constants and iotas
        (which are copied into their users) unless one is itself returned."""
        return id(node) in self.live and (node.op not in SOURCE_OPS or id(node) in self.escapes)

    def computed(self) -> list[Node]:
        return [n for n in self.nodes if self.is_computed(n)]

    def position(self, node: Node) -> int:
        return self.index[id(node)]

    def describe(self, node: Node) -> str:
        return f"op {self.position(node)} (kg.{node.op})"

    def outputs(self, group: list[Node], copied: frozenset[int] = frozenset()) -> list[Node]:
        """The values of `group` that it returns: those used after it. The
        `copied` members (ids) stand for copies of theirs made for the group
        alone, which nothing else reads."""
        members = {id(n) for n in group}
        return [n for n in group if id(n) not in copied and (
            id(n) in self.escapes or any(id(u) not in members for u in self.users[id(n)]))]

    def isolated_outputs(self, group: list[Node],
                         copied: frozenset[int] = frozenset()) -> list[Node]:
        """The group's outputs as its kernel sees them: values from other
        groups become inputs, numbered as the kernel's arguments will be (in
        order of first use by the group's ops, in program order); constants
        stay constants (they are copied in)."""
        members = {id(n) for n in group}
        input_index: dict[int, int] = {}
        for node in group:
            for operand in node.operands:
                if id(operand) not in members and operand.op not in SOURCE_OPS:
                    input_index.setdefault(id(operand), len(input_index))
        copies: dict[int, Node] = {}

        def copy(node: Node) -> Node:
            if id(node) in copies:
                return copies[id(node)]
            # Without their MLIR values and locations, the copies (and plans
            # made of them) can outlive the function's IR and context.
            if id(node) in members or node.op in SOURCE_OPS:
                result = dataclasses.replace(node, operands=[copy(o) for o in node.operands],
                                             value=None, location=None)
            else:
                result = Node("input", [], node.shape, node.element, {},
                              input_index=input_index[id(node)])
            copies[id(node)] = result
            return result

        return [copy(n) for n in self.outputs(group, copied)]

    def signature(self, group: list[Node]) -> str:
        """A stable name of the group's content as a kernel (the same ops on
        the same types and inputs, in any function, give the same name)."""
        return signature(self.isolated_outputs(group))

    def plan(self, group: list[Node], copied: frozenset[int] = frozenset()) -> KernelPlan:
        """The default plan of `group` as one kernel (its `copied` members
        as in `outputs`), computed once per set of nodes. Raises
        Unplannable."""
        key = (frozenset(id(n) for n in group), copied)
        known = self._plans.get(key)
        if known is None:
            try:
                known = self.planner.plan(self.isolated_outputs(group, copied),
                                          target=self.target)
            except Unplannable as reason:
                known = reason
            self._plans[key] = known
        if isinstance(known, Unplannable):
            raise known
        return known

    def plannable(self, group: list[Node]) -> bool:
        try:
            self.plan(group)
        except Unplannable:
            return False
        return True

    def after_outside_uses(self, node: Node) -> list[Node]:
        """The nodes that must come after `node` because an op that is not
        fused reads it, and they read that op or one after it."""
        position = self.first_outside_use.get(id(node))
        return [] if position is None else self.reading_from[position]

    def in_program_order(self, nodes) -> list[Node]:
        return sorted(nodes, key=lambda n: self.index[id(n)])
