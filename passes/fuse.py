"""kg-fuse: partition each kernel graph into kg.kernel ops.

Argument: `kg-fuse`. No options.

Every kg op of a function body starts as its own group; groups then merge,
producer into consumer, in program order, whenever the merged group is
still one kernel: `kgc.tiling.plan` finds an iteration space, tiles and a
tile program for it, and no path leaves the group and comes back. So:

    elementwise chains                        =>  one pointwise kernel
    reduction with prologue and epilogue
      (softmax, layer norm, RMS norm)         =>  one reduction kernel
    matmul with elementwise prologues and
      epilogue (bias, activation, scaling)    =>  one matmul kernel
    RMS norm of the left operand + matmul     =>  one matmul kernel (the
                                                  1/rms becomes an epilogue
                                                  factor, its sum runs in the
                                                  k loop)
    matmuls sharing a shape whose results meet
      in an epilogue (silu(x W1) * (x W2))    =>  one matmul kernel
    matmul + softmax over a row that fits one
      tile (n <= 256)                         =>  one matmul kernel

Constants are copied into every kernel that uses them. Values used outside
their group become kernel results. Ops that are not fused (the return, a
kg.kernel already there) stay in place: each kernel goes after the kernels
it reads and before the first such op that reads it, and no group both
feeds such an op and reads its result. Inside a kernel, the f32 -> f16 -> f32
round trips that kg-decompose's promotions leave between two ops are
dropped (one rounding less); a user's own casts stay.

    func.func @f(...) { kg ops; return }  =>  func.func @f(...) {
                                                %r = kg.kernel @f_0_kind(...) {...}
                                                ...
                                                return }
    kg.kernel ops already there           =>  unchanged
"""

from __future__ import annotations

import dataclasses

from mlir import ir

from kgc.passes.decompose import PROMOTION_ATTRIBUTE
from kgc.passes.registry import Pass, PassFailure, register_pass
from kgc.tiling.graph_model import Node, nodes_from_ops
from kgc.tiling.kernel_ops import ops_named, walk_ops
from kgc.tiling.plan import Unplannable, plan_group


@register_pass
class KgFuse(Pass):
    argument = "kg-fuse"
    summary = "Partition kernel graphs into kg.kernel ops (fused GPU kernels)"


    def run(self, op: ir.Operation) -> None:
        for function in ops_named(op, "func.func"):
            _fuse_function(function)


def _is_fused(op: ir.Operation) -> bool:
    """kg ops of the graph are partitioned into kernels; kernels and
    launches already there, and every other op, stay as they are."""
    return op.name.startswith("kg.") and op.name not in ("kg.kernel", "kg.launch")


def _fuse_function(function: ir.Operation) -> None:
    block = function.regions[0].blocks[0]
    ops = [o.operation for o in block.operations]
    kg_ops = [o for o in ops if _is_fused(o)]
    if not kg_ops:
        return
    for op in kg_ops:
        if len(op.results) != 1:
            raise PassFailure(f"{op.name} cannot be fused", op.location)
    nodes, by_value = nodes_from_ops(kg_ops)
    graph = _Graph(nodes, by_value, ops)
    groups = graph.partition()
    name = ir.StringAttr(function.attributes["sym_name"]).value
    _materialize(function, graph, groups, name)


class _Graph:
    """The nodes of a function, who uses them, and the groups of ops."""

    def __init__(self, nodes: list[Node], by_value: dict, ops: list[ir.Operation]):
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
        self.outside = [op for op in ops if not _is_fused(op)]
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
        # The nodes that read results of outside ops at a position or later.
        self.reading_from: list[list[Node]] = [[] for _ in self.outside]
        for node in nodes:
            positions = [results_of[o.value] for o in node.operands
                         if o.is_input and o.value in results_of]
            if positions:
                self.reading_from[max(positions)].append(node)
        for position in reversed(range(len(self.outside) - 1)):
            self.reading_from[position] = self.reading_from[position] + \
                self.reading_from[position + 1]

        self.live = self._live()

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

    def computed(self) -> list[Node]:
        """The nodes that kernels compute: live, and not constants (which
        are copied into their users) unless a constant is itself returned."""
        return [n for n in self.nodes if id(n) in self.live
                and (n.op != "constant" or id(n) in self.escapes)]

    def partition(self) -> list[list[Node]]:
        group_of: dict[int, int] = {}
        groups: dict[int, list[Node]] = {}
        for node in self.computed():
            group_of[id(node)] = self.index[id(node)]
            groups[self.index[id(node)]] = [node]
        changed = True
        while changed:
            changed = False
            for consumer in self.computed():
                target = group_of[id(consumer)]
                for operand in consumer.operands:
                    source = group_of.get(id(operand))
                    if source is None or source == target:
                        continue
                    merged = sorted(groups[source] + groups[target], key=lambda n: self.index[id(n)])
                    if self._creates_cycle(source, target, group_of) or not self._plannable(merged):
                        continue
                    for node in groups[source]:
                        group_of[id(node)] = target
                    groups[target] = merged
                    del groups[source]
                    changed = True
        return sorted(groups.values(), key=lambda g: self.index[id(g[-1])])

    def outputs(self, group: list[Node]) -> list[Node]:
        members = {id(n) for n in group}
        return [n for n in group
                if id(n) in self.escapes or any(id(u) not in members for u in self.users[id(n)])]

    def isolated_outputs(self, group: list[Node]) -> list[Node]:
        """The group's outputs as a kernel sees them: values from other
        groups become inputs; constants stay constants (they are copied in)."""
        members = {id(n) for n in group}
        copies: dict[int, Node] = {}
        inputs = 0

        def copy(node: Node) -> Node:
            nonlocal inputs
            if id(node) in copies:
                return copies[id(node)]
            if id(node) in members or node.op == "constant":
                result = dataclasses.replace(node, operands=[copy(o) for o in node.operands])
            else:
                result = Node("input", [], node.shape, node.element, {}, value=node.value,
                              input_index=inputs)
                inputs += 1
            copies[id(node)] = result
            return result

        return [copy(n) for n in self.outputs(group)]

    def _plannable(self, group: list[Node]) -> bool:
        try:
            plan_group(self.isolated_outputs(group))
        except Unplannable:
            return False
        return True

    def _creates_cycle(self, source: int, target: int, group_of: dict) -> bool:
        """True when a path from group `source` reaches group `target` through
        another group, or leaves either through an op that is not fused and
        comes back (merging would make a kernel depend on itself, or leave
        it no place among the ops that stay where they are)."""
        members = [n for n in self.nodes if group_of.get(id(n)) in (source, target)]
        frontier = [u for n in members if group_of.get(id(n)) == source
                    for u in self.users[id(n)] if group_of.get(id(u)) not in (source, target)]
        frontier += [u for n in members for u in self._after_outside_uses(n)]
        seen: set[int] = set()
        while frontier:
            node = frontier.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if group_of.get(id(node)) in (source, target):
                return True
            frontier.extend(self.users[id(node)])
            frontier.extend(self._after_outside_uses(node))
        return False

    def _after_outside_uses(self, node: Node) -> list[Node]:
        """The nodes that must come after `node` because an op that is not
        fused reads it, and they read that op or one after it."""
        position = self.first_outside_use.get(id(node))
        return [] if position is None else self.reading_from[position]


def _materialize(function: ir.Operation, graph: _Graph, groups: list[list[Node]], name: str) -> None:
    groups = _in_dependency_order(groups)
    anchors = _anchors(graph, groups)
    replacements: dict[ir.Value, ir.Value] = {}
    for index, group in enumerate(groups):
        outputs = graph.outputs(group)
        try:
            kind = plan_group(graph.isolated_outputs(group)).kind
        except Unplannable as reason:
            raise PassFailure(f"{group[-1].value.owner.name} cannot be made a kernel: {reason}",
                              group[-1].location) from None
        _build_kernel(f"{name}_{index}_{kind}", group, outputs, graph.outside[anchors[index]],
                      replacements)
    for old, new in replacements.items():
        old.replace_all_uses_with(new)
    for node in reversed(graph.nodes):
        node.value.owner.erase()


def _producers(groups: list[list[Node]]) -> list[set[int]]:
    """For each group, the groups whose values it reads."""
    group_of = {id(n): index for index, group in enumerate(groups) for n in group}
    return [{group_of[id(o)] for n in group for o in n.operands
             if id(o) in group_of and group_of[id(o)] != index}
            for index, group in enumerate(groups)]


def _in_dependency_order(groups: list[list[Node]]) -> list[list[Node]]:
    """`groups` (in the order of their last op) reordered so that each comes
    after the groups it reads: a group's last op may come after that of a
    group reading its first op (matmul -> softmax and matmul -> relu)."""
    producers = _producers(groups)
    order: list[int] = []
    while len(order) < len(groups):
        ready = next(i for i in range(len(groups))
                     if i not in order and producers[i] <= set(order))
        order.append(ready)
    return [groups[i] for i in order]


def _anchors(graph: _Graph, groups: list[list[Node]]) -> list[int]:
    """For each group (in dependency order), the position in `graph.outside`
    of the op its kernel goes before: the first op that is not fused and
    reads its results, directly or through later kernels."""
    producers = _producers(groups)
    anchors = [len(graph.outside) - 1] * len(groups)  # the terminator
    for index in reversed(range(len(groups))):
        for node in groups[index]:
            position = graph.first_outside_use.get(id(node))
            if position is not None:
                anchors[index] = min(anchors[index], position)
        for producer in producers[index]:
            anchors[producer] = min(anchors[producer], anchors[index])
    return anchors


def _build_kernel(name: str, group: list[Node], outputs: list[Node], before: ir.Operation,
                  replacements: dict) -> None:
    members = {id(n) for n in group}
    inputs: list[ir.Value] = []
    constants: list[Node] = []
    for node in group:
        for operand in node.operands:
            if operand.op == "constant" and id(operand) not in members:
                if all(c is not operand for c in constants):
                    constants.append(operand)
            elif id(operand) not in members:
                value = replacements.get(operand.value, operand.value)
                if value not in inputs:
                    inputs.append(value)
    location = group[-1].location
    with ir.InsertionPoint(before), location:
        kernel = ir.Operation.create(
            "kg.kernel", results=[o.value.type for o in outputs], operands=inputs,
            attributes={"sym_name": ir.StringAttr.get(name)}, regions=1)
        body = kernel.regions[0].blocks.append(*[v.type for v in inputs])
    mapping: dict[ir.Value, ir.Value] = {}
    for value, arg in zip(inputs, body.arguments):
        mapping[value] = arg
    with ir.InsertionPoint(body):
        for node in constants + group:
            clone = node.value.owner.clone()
            for position, operand in enumerate(clone.operands):
                source = replacements.get(operand, operand)
                clone.operands[position] = mapping.get(source, mapping.get(operand, operand))
            mapping[node.value] = clone.results[0]
        ir.Operation.create("kg.yield", operands=[mapping[o.value] for o in outputs])
    _drop_round_trips(body)
    for output, result in zip(outputs, kernel.results):
        replacements[output.value] = result


def _drop_round_trips(body: ir.Block) -> None:
    """cast(cast(x : A -> B) -> A) => x when B is narrower than A and both
    casts are kg-decompose's promotions: the value stays in registers, so
    the rounding to B buys nothing."""
    for op in list(body.operations):
        if op.operation.name != "kg.cast" or PROMOTION_ATTRIBUTE not in op.operation.attributes:
            continue
        inner = op.operation.operands[0].owner
        if isinstance(inner, ir.Block) or inner.name != "kg.cast" or \
                PROMOTION_ATTRIBUTE not in inner.attributes:
            continue
        source = inner.operands[0]
        if source.type == op.operation.results[0].type and _narrower(inner.results[0].type, source.type):
            op.operation.results[0].replace_all_uses_with(source)
            op.operation.erase()
            # The narrowing cast goes too unless something else reads it.
            if _unused(inner):
                inner.erase()


def _unused(op: ir.Operation) -> bool:
    return all(not list(result.uses) for result in op.results)


def _narrower(a: ir.Type, b: ir.Type) -> bool:
    width = {"f32": 32, "f16": 16, "bf16": 16}
    ea = str(ir.RankedTensorType(a).element_type)
    eb = str(ir.RankedTensorType(b).element_type)
    return width.get(ea, 8) < width.get(eb, 8)
