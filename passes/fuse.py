"""kg-fuse: partition each kernel graph into kg.kernel ops.

Argument: `kg-fuse`. Options:

    partition=GROUPS     the kernels to make, instead of fusing greedily:
                         groups of op positions (the function's kg ops in
                         program order, from 0) separated by `;`, positions
                         by `,`: `partition=0,1,2;3` (see kgc.fusion.partition)
    function=NAME        the function `partition` is for (default: every one)
    fold-rms-norm=BOOL   fold a reduction into a matmul's prologue (RMSNorm)
    fuse-prologue=BOOL   fuse elementwise producers of a matmul's operands
    fuse-epilogue=BOOL   fuse the consumers of a matmul's result
    merge-siblings=BOOL  merge matmuls whose results meet (gated MLP)
    merge-reductions=BOOL  merge reductions that feed one another
    fold-low-rank=BOOL   add a rank-r product (X A) B to the matmul X W
                         sharing its X, X A riding along its k loop (LoRA)
    fuse-attention=BOOL  softmax(Q K^T [* scale] [+ mask]) V as one kernel
    library-alone=BOOL   keep a matmul the GPU's BLAS runs (kgc.tiling.library)
                         a bare call: nothing is fused into it
    merge-shared-input=BOOL  make products of at most 16 rows that read one
                         left operand one kernel, with a result each
    store-narrow=BOOL    move (or copy) a cast that widens a kernel's result
                         exactly (f16 -> f32) to the kernels that read it:
                         the value crosses memory in its own type
    rules-off=NAMES      schedules' fusion rules to turn off, by `,`: the
                         objections of `Schedule.fusion_refusal` (attention's
                         `keys-once`: no work on K or V in a kernel whose
                         programs would each repeat it; the matmul's
                         `prologue-once` and `skinny-prologue`: no costly
                         prologue, and none at all past 16 rows, in a
                         product whose programs along n repeat it; its
                         `norm-over-long-k`: no norm folded into a product
                         of more than 512 k steps) and the gathering
                         rules of schedules registered from outside kgc
    target=SM            the SM version the groups are planned for (default
                         90), as kg-tile will plan them: whether a merge
                         costs a matmul its split over k depends on the
                         GPU's SM count

The decisions are all true by default; kgc.fusion.greedy says which merges
each governs. A function's ops may also carry `kg.fusion_group = N`: ops of
one N become one kernel, as a partition would say (on the ops kg-fuse
sees: kg-decompose does not carry it onto the primitives it makes). A partition that does not
fit its function (an op in two groups or none, groups in a cycle, a group
that cannot be one kernel) fails the pass at the op at fault.

By default every kg op of a function body starts as its own group; groups
then merge, producer into consumer, in program order, whenever the merged
group is still one kernel: a schedule (`kgc.tiling.registry`) finds an
iteration space, tiles and a tile program for it, and no path leaves the
group and comes back. So:

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
    X W + (X A) B with A of r <= n columns
      (LoRA)                                  =>  one matmul kernel (X A
                                                  accumulated beside X W,
                                                  then (X A) B, dots over
                                                  a rank axis)
    matmul(softmax(matmul(Q, K^T) [* scale]
      [+ mask]), V), any number of keys       =>  one attention kernel
                                                  (online softmax; see
                                                  kgc.tiling.attention)

Constants and iotas (values known from their index alone) are copied into
every kernel that uses them. After partitioning (greedily, or as given: the
search's partitions are greedy ones), a kernel made of
elementwise ops and views of them alone (a causal mask) is copied into each
kernel that reads it, where each keeps its schedule (`recompute-positions`),
so a mask is computed where it is used and never stored.
Values used outside their group become kernel results. Ops that are not fused (the return, a
kg.kernel already there) stay in place: each kernel goes after the kernels
it reads and before the first such op that reads it, and no group both
feeds such an op and reads its result. Inside a kernel, the f32 -> f16 -> f32
round trips that kg-decompose's promotions leave between two ops are
dropped (one rounding less); a user's own casts stay.

Each candidate group is planned once (kgc.fusion.FusionGraph.plan), by the
planner of the pipeline run (kgc.tiling.planner): a kernel whose body is
the group as planned gets that plan again in kg-tile of the same run. A
group over a dynamic extent is planned as kg-tile will tile it, to hold at
every size: a group no plan of which does (an attention, whose schedule
takes no `?` yet) is not made, and its ops go to groups that can be.

    func.func @f(...) { kg ops; return }  =>  func.func @f(...) {
                                                %r = kg.kernel @f_0_kind(...) {...}
                                                ...
                                                return }
    kg ops with kg.fusion_group = N        =>  one kg.kernel per N
    kg.kernel ops already there           =>  unchanged
"""

from __future__ import annotations

from mlir import ir

from kgc.fusion import (FusionDecisions, FusionGraph, InvalidPartition, NotFusable, Partition,
                        greedy_partition)
from kgc.fusion.graph import function_name
from kgc.fusion.partition import anchors, dependency_order, group_reads
from kgc.element_types import element_bits, widens_exactly
from kgc.passes.decompose import PROMOTION_ATTRIBUTE
from kgc.passes.registry import Option, Pass, PassFailure, register_pass
from kgc.targets import DEFAULT_SM, SUPPORTED_SMS, Target, target_for
from kgc.tiling.graph_model import ELEMENTWISE_OPS, SOURCE_OPS, VIEW_OPS, Node
from kgc.tiling.kernel_ops import ops_named
from kgc.tiling.dynamic import NotAtEverySize
from kgc.tiling.plan import Unplannable
from kgc.tiling.planner import Planner

# An op's kernel, given in the input instead of a partition option.
FUSION_GROUP_ATTRIBUTE = "kg.fusion_group"


@register_pass
class KgFuse(Pass):
    argument = "kg-fuse"
    summary = "Partition kernel graphs into kg.kernel ops (fused GPU kernels)"
    plans_kernels = True

    partition = Option(str, "", "the kernels to make: op positions, ',' between positions, "
                                "';' between groups (default: fuse greedily)")
    function = Option(str, "", "the function that 'partition' is for (default: every function)")
    fold_rms_norm = Option(bool, True, "fold a reduction (RMSNorm) into a matmul's prologue")
    fuse_prologue = Option(bool, True, "fuse the elementwise producers of a matmul's operands")
    fuse_epilogue = Option(bool, True, "fuse the consumers of a matmul's result")
    merge_siblings = Option(bool, True, "merge matmuls whose results meet (gated MLP)")
    merge_reductions = Option(bool, True, "merge reductions that feed one another")
    fold_low_rank = Option(bool, True, "add a rank-r product (X A) B to the matmul X W "
                                       "sharing its X (LoRA)")
    fuse_attention = Option(bool, True, "make softmax(Q K^T) V one attention kernel")
    library_alone = Option(bool, True, "fuse nothing into a matmul that the GPU's BLAS runs "
                                       "(kgc.tiling.library)")
    merge_shared_input = Option(bool, True, "make products of a few rows that read one left "
                                            "operand one kernel (key and value projections)")
    store_narrow = Option(bool, True, "move a cast that widens a kernel's result exactly to "
                                      "the kernels that read it (stored f16, not f32)")
    recompute_positions = Option(bool, True, "compute a kernel made of positions and constants "
                                             "alone (a causal mask) in each kernel that reads it")
    rules_off = Option(str, "", "schedules' fusion rules to turn off, ',' between names "
                                "(attention's keys-once)")
    target = Option(int, DEFAULT_SM, "SM version the kernels are planned for (80, 86, 89, 90, "
                                     "...)", choices=SUPPORTED_SMS)

    def decisions(self) -> FusionDecisions:
        decisions = FusionDecisions(**{name.replace("-", "_"): getattr(self, name.replace("-", "_"))
                                       for name in FusionDecisions.names()})
        for rule in filter(None, (name.strip() for name in self.rules_off.split(","))):
            decisions = decisions.without(rule)
        return decisions

    def run(self, op: ir.Operation) -> None:
        given = None
        if self.partition:
            try:
                given = Partition.parse(self.partition)
            except InvalidPartition as error:
                raise PassFailure(f"kg-fuse: {error.message}", op.location) from None
        functions = ops_named(op, "func.func")
        if self.function and all(function_name(f) != self.function for f in functions):
            raise PassFailure(f"kg-fuse: no function @{self.function} to partition", op.location)
        target = target_for(self.target)
        # One planner for every function, as the pipeline gives kg-tile too.
        planner = self.planner if self.planner is not None else Planner()
        for function in functions:
            applies = not self.function or function_name(function) == self.function
            fuse_function(function, given if applies else None, self.decisions(), target,
                          planner)


def fuse_function(function: ir.Operation, partition: Partition | None = None,
                  decisions: FusionDecisions = FusionDecisions(),
                  target: Target | int | None = None, planner: Planner | None = None) -> None:
    """Partitions `function` into kernels: by `partition`, by the ops'
    kg.fusion_group attributes, or greedily under `decisions`, with groups
    planned for `target` (None: the default) by `planner` (None: one of its
    own). Raises PassFailure naming the op at fault when a partition does
    not fit."""
    try:
        graph = FusionGraph.of_function(function, target, planner)
    except NotFusable as error:
        raise PassFailure(error.message, error.location) from None
    if not graph.nodes:
        return
    from_attributes = _partition_from_attributes(graph)
    if from_attributes is not None and partition is not None:
        raise PassFailure(f"kg-fuse: @{graph.name} has ops with {FUSION_GROUP_ATTRIBUTE} and a "
                          "partition option too; give one", function.location)
    partition = partition or from_attributes
    if partition is None:
        groups = greedy_partition(graph, decisions).groups
    else:
        groups = _checked_groups(graph, partition, function)
    # On a given partition too: the search's partitions are greedy ones,
    # which the default compile rewrites so.
    if decisions.recompute_positions:
        # A group copied into its readers may leave one of them made of
        # positions alone (a comparison, then the choice it makes, unfused).
        count = None
        while count != len(groups):
            count = len(groups)
            graph, groups = _recompute_positions(function, graph, groups, target, planner)
    if decisions.store_narrow:
        graph, groups = _store_narrow(function, graph, groups, target, planner)
    # Types and attributes built here need a default location when this
    # runs outside a pass.
    with function.location:
        _materialize(graph, groups)


def _store_narrow(function: ir.Operation, graph: FusionGraph, groups: list[list[Node]],
                  target, planner) -> tuple[FusionGraph, list[list[Node]]]:
    """`store-narrow` on a partition: a conversion that widens a
    value of its kernel exactly (kg-decompose's f16 -> f32 promotions) and
    that other kernels read => each of them widens for itself, and the
    value crosses memory narrow. The conversion moves where it has one
    reading kernel and no reader left in its own; it is copied otherwise (a
    layer norm and the next residual sum read one, merged by CSE). Made
    only where every reading kernel keeps its schedule with it. Returns the
    graph and groups of the function as rewritten."""
    group_of = {id(node): number for number, group in enumerate(groups) for node in group}
    changes = []
    for number, group in enumerate(groups):
        for node in group:
            if node.op != "cast" or id(node) in graph.escapes or node.operands[0].is_input or \
                    group_of.get(id(node.operands[0])) != number or \
                    not widens_exactly(node.operands[0].element, node.element):
                continue
            readers: dict[int, list[Node]] = {}  # reading group -> its users of the cast
            for user in graph.users[id(node)]:
                if group_of[id(user)] != number:
                    readers.setdefault(group_of[id(user)], []).append(user)
            if readers and all(
                    _keeps_schedule(graph, groups[reader],
                                    graph.in_program_order(groups[reader] + [node]))
                    for reader in readers):
                changes.append((node, number, readers))
    if not changes:
        return graph, groups
    # Rewrite: a copy of each cast for each reading group (the cast itself
    # where that group alone reads it), then the graph again, the groups
    # carried over by op.
    ops_of_group = [[node.value.owner for node in group] for group in groups]
    for node, number, readers in changes:
        op = node.value.owner
        if len(readers) == 1 and len(next(iter(readers.values()))) == len(graph.users[id(node)]):
            ops_of_group[number].remove(op)
            ops_of_group[next(iter(readers))].append(op)
            continue
        for reader in readers:
            _copy_into(ops_of_group[reader], [node])
    return _regrouped(function, ops_of_group, target, planner, "store-narrow")


def _recompute_positions(function: ir.Operation, graph: FusionGraph, groups: list[list[Node]],
                         target, planner) -> tuple[FusionGraph, list[list[Node]]]:
    """`recompute-positions` on a partition: a group whose values
    depend on positions and constants alone (elementwise ops and views of
    iotas and constants: a causal mask) and that other kernels read =>
    each reading kernel computes what it reads of it, and the group is no
    kernel. Made only where every reading kernel keeps its schedule with
    the copies and the group returns nothing. Returns the graph and groups
    of the function as rewritten."""
    group_of = {id(node): number for number, group in enumerate(groups) for node in group}
    copies = []  # (group number, {reader: nodes of the group it needs})
    for number, group in enumerate(groups):
        members = {id(node) for node in group}
        if any(id(node) in graph.escapes for node in group) or not all(
                node.op in ELEMENTWISE_OPS | VIEW_OPS and
                all(id(o) in members or o.op in SOURCE_OPS for o in node.operands)
                for node in group):
            continue
        needs: dict[int, list[Node]] = {}
        for node in group:
            for user in graph.users[id(node)]:
                if group_of.get(id(user), number) != number:
                    needs.setdefault(group_of[id(user)], []).append(node)
        needs = {reader: _closure(graph, nodes, members) for reader, nodes in needs.items()}
        if needs and all(_keeps_schedule(graph, groups[reader],
                                         graph.in_program_order(groups[reader] + nodes),
                                         frozenset(map(id, nodes)))
                         for reader, nodes in needs.items()):
            copies.append((number, needs))
    if not copies:
        return graph, groups
    ops_of_group = [[node.value.owner for node in group] for group in groups]
    for number, needs in copies:
        for reader, nodes in needs.items():
            _copy_into(ops_of_group[reader], nodes)
        ops_of_group[number] = []  # dead now: kg-fuse erases it with the fused ops
    return _regrouped(function, ops_of_group, target, planner, "recompute-positions")


def _copy_into(reader_ops: list[ir.Operation], nodes: list[Node]) -> None:
    """Copies of the ops of `nodes` (producers first) added to the group of
    `reader_ops`, whose ops then read the copies instead."""
    readers = list(reader_ops)
    clones: dict[ir.Value, ir.Value] = {}
    for node in nodes:
        op = node.value.owner
        with ir.InsertionPoint(op), op.location:
            copy = op.clone()
        for position, operand in enumerate(copy.operands):
            if operand in clones:
                copy.operands[position] = clones[operand]
        clones[node.value] = copy.results[0]
        reader_ops.append(copy.operation)
    for op in readers:
        for position, operand in enumerate(op.operands):
            if operand in clones:
                op.operands[position] = clones[operand]


def _regrouped(function: ir.Operation, ops_of_group: list[list[ir.Operation]], target, planner,
               step: str) -> tuple[FusionGraph, list[list[Node]]]:
    """The graph of `function` after the rewrite `step` (a kg-fuse option)
    and its groups, carried over by op (a group left with no op is gone);
    raises PassFailure where a group no longer plans."""
    graph = FusionGraph.of_function(function, target, planner)
    node_of = {node.value.owner: node for node in graph.nodes}
    groups = [graph.in_program_order([node_of[op] for op in ops]) for ops in ops_of_group if ops]
    for group in groups:
        if not graph.plannable(group):
            raise PassFailure(f"kg-fuse: {graph.describe(group[-1])}: a kernel does not plan "
                              f"after {step}: {_reason(graph, group)}; "
                              f"kg-fuse{{{step}=false}} leaves it", group[-1].location)
    return graph, groups


def _closure(graph: FusionGraph, nodes: list[Node], members: set[int]) -> list[Node]:
    """`nodes` and the members of their group they are computed from, in
    program order."""
    needed: dict[int, Node] = {}
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if id(node) not in needed:
            needed[id(node)] = node
            stack.extend(o for o in node.operands if id(o) in members)
    return graph.in_program_order(list(needed.values()))


def _keeps_schedule(graph: FusionGraph, group: list[Node], changed: list[Node],
                    copied: frozenset[int] = frozenset()) -> bool:
    """Whether `changed` (`copied` as in FusionGraph.outputs) plans as a
    kernel of the schedule `group` plans with (a library call stays one)."""
    try:
        return graph.plan(changed, copied).schedule == graph.plan(group).schedule
    except Unplannable:
        return False


def _reason(graph: FusionGraph, group: list[Node]) -> str:
    try:
        graph.plan(group)
    except Unplannable as reason:
        return str(reason)
    return "planned"


def materialize(function: ir.Operation, partition: Partition,
                target: Target | int | None = None, planner: Planner | None = None) -> None:
    """Rewrites `function` into the kernels of `partition` (one of
    kgc.fusion.propose_partitions, say), planned for `target` by `planner`.
    Raises PassFailure naming the op at fault when the partition does not
    fit."""
    fuse_function(function, partition, target=target, planner=planner)


def _checked_groups(graph: FusionGraph, partition: Partition,
                    function: ir.Operation) -> list[list[Node]]:
    try:
        groups = partition.groups_in(graph)
    except InvalidPartition as error:
        raise PassFailure(f"kg-fuse: {error.message}", error.location or function.location) from None
    return sorted(groups, key=lambda g: graph.position(g[-1]))


def _partition_from_attributes(graph: FusionGraph) -> Partition | None:
    """The partition that kg.fusion_group attributes give, or None when no op
    of the function has one."""
    numbered: dict[int, list[int]] = {}
    unnumbered: list[Node] = []
    for node in graph.nodes:
        op = node.value.owner
        if FUSION_GROUP_ATTRIBUTE not in op.attributes:
            if graph.is_computed(node):
                unnumbered.append(node)
            continue
        attribute = op.attributes[FUSION_GROUP_ATTRIBUTE]
        if not isinstance(attribute, ir.IntegerAttr):
            raise PassFailure(f"kg-fuse: {FUSION_GROUP_ATTRIBUTE} must be an integer, got "
                              f"{attribute}", node.location)
        numbered.setdefault(ir.IntegerAttr(attribute).value, []).append(graph.position(node))
    if not numbered:
        return None
    if unnumbered:
        raise PassFailure(f"kg-fuse: {graph.describe(unnumbered[0])} has no "
                          f"{FUSION_GROUP_ATTRIBUTE}, while other ops of @{graph.name} have one",
                          unnumbered[0].location)
    return Partition.of(numbered[n] for n in sorted(numbered))


def _materialize(graph: FusionGraph, groups: list[list[Node]]) -> None:
    """Replaces the fusable ops of `graph` by one kernel per group (`groups`
    checked, in the order of their last op). Kernels are made in dependency
    order: a group's last op may come after that of a group reading its first
    op (matmul -> softmax and matmul -> relu)."""
    reads = group_reads(groups)
    order = dependency_order(reads)
    before = anchors(graph, groups, reads, order)
    replacements: dict[ir.Value, ir.Value] = {}
    for index, number in enumerate(order):
        group = groups[number]
        outputs = graph.outputs(group)
        try:
            plan = graph.plan(group)
            # Named after what it computes (a library call's plan names the
            # kernel kind it stands in for), so that a kernel's name, which
            # configs refer to, does not change with the choice of library.
            kind = getattr(plan, "family", plan.kind)
        except Unplannable as reason:
            how = " with a dynamic extent" if isinstance(reason, NotAtEverySize) else ""
            raise PassFailure(f"{group[-1].value.owner.name} cannot be made a kernel{how}: "
                              f"{reason}", group[-1].location) from None
        _build_kernel(f"{graph.name}_{index}_{kind}", group, outputs,
                      graph.outside[before[number]], replacements)
    for old, new in replacements.items():
        old.replace_all_uses_with(new)
    for node in reversed(graph.nodes):
        node.value.owner.erase()


def _build_kernel(name: str, group: list[Node], outputs: list[Node], before: ir.Operation,
                  replacements: dict) -> None:
    members = {id(n) for n in group}
    inputs: list[ir.Value] = []
    constants: list[Node] = []
    for node in group:
        for operand in node.operands:
            if operand.op in SOURCE_OPS and id(operand) not in members:
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
            if FUSION_GROUP_ATTRIBUTE in clone.attributes:
                del clone.attributes[FUSION_GROUP_ATTRIBUTE]
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
    ea = str(ir.RankedTensorType(a).element_type)
    eb = str(ir.RankedTensorType(b).element_type)
    return element_bits(ea) < element_bits(eb)
