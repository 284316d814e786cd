"""Greedy fusion under `FusionDecisions`: which kinds of merges to make.

Every computed op starts as its own group; groups then merge, producer into
consumer, in program order, whenever the merged group is still one kernel
(`kgc.tiling.registry` plans it) and no path leaves the group and comes back.
Each merge has a kind, read from the two groups: the producer group P (its
op feeds the consumer's) and the consumer group C. The first rule that
matches names the kind; a decision turned off refuses merges of its kind:

    P and C both hold a matmul, and the matmuls
      of the two have different k                =>  fold-low-rank
    P and C together hold a matmul that reads
      another (softmax(Q K^T) V)                 =>  fuse-attention
    P and C both hold a matmul, no matmul of C
      reads P's values                           =>  merge-siblings
    C holds a matmul that reads a value of P,
      and a reduce of P flows into it            =>  fold-rms-norm
    C holds a matmul that reads a value of P     =>  fuse-prologue
    P holds a matmul                             =>  fuse-epilogue
    P and C both hold a reduce                   =>  merge-reductions
    anything else (elementwise chains, the
      prologue and epilogue of a reduction)      =>  always merged

`fold-low-rank` is LoRA's X W + (X A) B as one kernel: X A rides along the
k loop of X W, and the rank-r product (X A) B is added after it
(kgc.tiling.low_rank); a product whose left operand comes from another
kernel is made after the loop too.

Before merging, each registered schedule with a fusion rule
(`Schedule.fusion_rule`, `Schedule.fusion_pattern`) gathers its patterns
into one group each, where that group is one kernel, since the merges one
at a time that would lead there may pass through groups that are not. The
attention schedule's rule, `fuse-attention`, gathers Q K^T, its scale and
mask, the softmax over keys and the matmul by V (kgc.tiling.attention): a
matmul and a softmax over more keys than one tile holds are not a kernel.
A rule that is no field of `FusionDecisions` (a schedule registered from
outside kgc) is on unless `without` turned it off.

`library-call` (the library schedule's rule) gathers a matmul the GPU's
BLAS runs with what the call takes beside it: the transposes of its
operands' last two axes, which the call reads in place, where the kernel
computing the value would otherwise store it a second time, transposed;
and a bias added to its rows (kg-decompose's promotion casts around the
sum included), which the call adds in cuBLASLt's epilogue
(kgc.tiling.library), where one merge at a time would pass through a
group (the matmul and a cast) that is no library call. A pattern grows
over one gathered before it (the matmul and its transposes, then its bias).

`library-alone`: a group that is a bare matmul the GPU's BLAS runs
(`kgc.tiling.library`, where kgc's rule `prefers_library` or the kernel's
knob gives it the library) takes in no op that would make it a Triton kernel: no
norm or prologue, no epilogue, no sibling. Its neighbours become kernels of
their own, as Inductor leaves them beside its cuBLAS calls. The rule comes
from an H200: at 512 tokens the Llama-3-8B-shaped projections with their
folded norm, gated epilogue or residual add ran as Triton at about half
cuBLAS's rate, while the unfused pair costs one extra pass over a
512-row activation (benchmarks/NOTES.md, "Prefill: fused kernels against
the library pair"). A merge that keeps the group a library call (the
transpose of a weight it reads) is made. LoRA's X W of at most 128 rows
yields (`_yields_to_low_rank`): X W + (X A) B is one kernel there, which
beat the library's X W with the two kernels beside it. Turning it off
(`library-alone=false`, and the search does) fuses as if there were no
library.

`merge-shared-input`: once no merge above applies, products of a few rows
(at most `SKINNY_ROWS`, a decode step's projections) that read the same
left operand, against weights of one shape, and that are bare or carry
epilogues of their own, become one kernel with a result each (a layer's
key and value projections: one launch, and one kernel summing split-k
partials, where there were two of each). The products stay two where
either is a library call, where the merged kernel would lose a split
over k either has alone, or where a path joins them.

`store-narrow`: once the groups are made, kg-fuse moves (or copies) a
conversion that widens a value of its group exactly (f16 to f32: the
residual that the next kernel's sum reads in f32, as kg-decompose promotes
it) to the groups that read it, where each keeps its schedule
(`kgc.passes.fuse`). The value then crosses in memory in its own type, as
eager stores it (GPT-2's residual stream was stored in f32 between the
norm kernels, twice the bytes, and never rounded to f16 as eager rounds
it).

`fold-rms-norm` is the RMSNorm before a matmul (its 1/rms becomes a factor
of the matmul's epilogue, its sum runs in the k loop), and any reduction
feeding a matmul operand (a softmax of scores too wide for an epilogue).
A fold (or prologue) is not made where it would cost the matmul the split
over k kgc gives it alone (`kgc.tiling.config.default_split_k`): a norm
whose normalized x is also a result of the kernel (other matmuls read it)
must be whole before the dot, which makes the kernel two loops over k that
cannot be split, and a skinny matmul then runs on too few programs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from kgc.fusion.graph import FusionGraph
from kgc.fusion.partition import Partition
from kgc.tiling.config import SKINNY_ROWS, streams_weights
from kgc.tiling.graph_model import Node
from kgc.tiling.iteration import Unplannable
from kgc.tiling.library import KIND as LIBRARY_KIND, MIN_ROWS as LIBRARY_MIN_ROWS
from kgc.tiling.library import WIDE_ROW_ELEMENTS
from kgc.tiling.registry import schedules
from kgc.tiling.schedule import Schedule, widest_input

FOLD_LOW_RANK = "fold-low-rank"
MERGE_SIBLINGS = "merge-siblings"
FOLD_RMS_NORM = "fold-rms-norm"
FUSE_PROLOGUE = "fuse-prologue"
FUSE_EPILOGUE = "fuse-epilogue"
MERGE_REDUCTIONS = "merge-reductions"
FUSE_ATTENTION = "fuse-attention"
LIBRARY_ALONE = "library-alone"
MERGE_SHARED_INPUT = "merge-shared-input"


@dataclasses.dataclass(frozen=True)
class FusionDecisions:
    """Which kinds of merges kg-fuse makes; every one by default."""

    fold_rms_norm: bool = True
    fuse_prologue: bool = True
    fuse_epilogue: bool = True
    merge_siblings: bool = True
    merge_reductions: bool = True
    fold_low_rank: bool = True
    fuse_attention: bool = True
    # Not a kind of merge but a refusal: a library matmul takes in nothing.
    library_alone: bool = True
    merge_shared_input: bool = True
    # Not a merge: kg-fuse moves a widening cast to the kernels that read
    # it, after the groups are made (kgc.passes.fuse).
    store_narrow: bool = True
    # Not a merge either: a group of positions and constants alone is
    # computed in each kernel that reads it (kgc.passes.fuse).
    recompute_positions: bool = True
    # The fusion rules of schedules (Schedule.fusion_rule) that are no field
    # above and are turned off.
    rules_off: frozenset[str] = frozenset()

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The decisions as option names (`fold-rms-norm`...)."""
        return tuple(f.name.replace("_", "-") for f in dataclasses.fields(cls)
                     if f.name != "rules_off")

    def allows(self, kind: str | None) -> bool:
        if kind is None:
            return True
        if kind in self.names():
            return getattr(self, kind.replace("-", "_"))
        return kind not in self.rules_off

    def without(self, kind: str) -> "FusionDecisions":
        if kind in self.names():
            return dataclasses.replace(self, **{kind.replace("-", "_"): False})
        return dataclasses.replace(self, rules_off=self.rules_off | {kind})

    def __str__(self) -> str:
        off = [name for name in self.names() if not self.allows(name)] + sorted(self.rules_off)
        return " ".join(f"{name}=false" for name in off) or "default"


def merge_kind(producer: list[Node], consumer: list[Node]) -> str | None:
    """The kind of merging group `producer` into group `consumer` (None for
    a merge that no decision governs)."""
    inside = {id(n) for n in producer}
    producer_matmuls = [n for n in producer if n.op == "matmul"]
    consumer_matmuls = [n for n in consumer if n.op == "matmul"]
    members = {id(n) for n in producer + consumer}
    matmuls = {id(n) for n in producer_matmuls + consumer_matmuls}
    if any(_reaches(operand, matmuls, members) for n in producer_matmuls + consumer_matmuls
           for operand in n.operands):
        return FUSE_ATTENTION
    fed = [mm for mm in consumer_matmuls
           if any(_reaches(operand, inside, members) for operand in mm.operands)]
    if producer_matmuls and consumer_matmuls and len(
            {mm.operands[0].shape[-1] for mm in producer_matmuls + consumer_matmuls}) > 1:
        return FOLD_LOW_RANK
    if producer_matmuls and consumer_matmuls and not fed:
        return MERGE_SIBLINGS
    if fed:
        reduces = {id(n) for n in producer if n.op == "reduce"}
        if any(_reaches(operand, reduces, members) for mm in fed for operand in mm.operands):
            return FOLD_RMS_NORM
        return FUSE_PROLOGUE
    if producer_matmuls:
        return FUSE_EPILOGUE
    if any(n.op == "reduce" for n in producer) and any(n.op == "reduce" for n in consumer):
        return MERGE_REDUCTIONS
    return None


def _reaches(node: Node, targets: set[int], members: set[int]) -> bool:
    """True when `node` is one of `targets` or depends on one, through
    nodes of `members`."""
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if id(current) in seen or id(current) not in members:
            continue
        seen.add(id(current))
        if id(current) in targets:
            return True
        stack.extend(current.operands)
    return False


@dataclasses.dataclass
class GreedyResult:
    partition: Partition
    groups: list[list[Node]]  # in the order of their last op
    # The decisions that shaped the result: the kinds of the merges made,
    # and the rules that refused one (`library-alone`, a schedule's
    # objection).
    kinds_made: frozenset[str]


def greedy_partition(graph: FusionGraph, decisions: FusionDecisions = FusionDecisions()
                     ) -> GreedyResult:
    computed = graph.computed()
    group_of: dict[int, int] = {}
    groups: dict[int, list[Node]] = {}
    for node in computed:
        group_of[id(node)] = graph.position(node)
        groups[graph.position(node)] = [node]
    kinds_made: set[str] = set()
    for schedule in schedules().values():
        rule = schedule.fusion_rule
        if rule and decisions.allows(rule) and _gather(graph, schedule, group_of, groups):
            kinds_made.add(rule)
    # A merge refused for two groups stays refused while neither grows:
    # what it depends on (the kind, a cycle, the plan) is theirs alone, and
    # merging other groups only adds paths between groups, never removes
    # one. Without this, every pass of the loop below would check each
    # refused pair again, a cycle search and a plan each.
    version: dict[int, int] = dict.fromkeys(groups, 0)
    refused: set[tuple[int, int, int, int]] = set()
    changed = True
    while changed:
        changed = False
        _merge_producers(graph, decisions, groups, group_of, version, refused, kinds_made)
        if decisions.merge_shared_input and _merge_shared_inputs(graph, groups, group_of,
                                                                 version):
            kinds_made.add(MERGE_SHARED_INPUT)
            changed = True
    ordered = sorted(groups.values(), key=lambda g: graph.position(g[-1]))
    origin = str(decisions)
    return GreedyResult(Partition.of_groups(graph, ordered, origin), ordered, frozenset(kinds_made))


def _merge_producers(graph: FusionGraph, decisions: FusionDecisions, groups: dict,
                     group_of: dict, version: dict, refused: set, kinds_made: set) -> None:
    """Merges producer groups into their consumers until no merge is left
    (the kinds at the top of this module)."""
    computed = graph.computed()
    changed = True
    while changed:
        changed = False
        for consumer in computed:
            target = group_of[id(consumer)]
            for operand in consumer.operands:
                source = group_of.get(id(operand))
                if source is None or source == target:
                    continue
                pair = (source, target, version[source], version[target])
                if pair in refused:
                    continue
                refusal = _refusal(graph, decisions, groups, group_of, source, target)
                if refusal is not None:
                    refused.add(pair)
                    if refusal.by_rule:
                        # A rule that refused a merge shaped the result:
                        # the search tries it turned off.
                        kinds_made.add(refusal.reason)
                    continue
                kind = merge_kind(groups[source], groups[target])
                _merge(graph, groups, group_of, version, source, target)
                if kind is not None:
                    kinds_made.add(kind)
                changed = True


def _shared_input_key(group: list[Node]) -> tuple | None:
    """What a group that may merge with a sibling shares with it: (its
    product's left operand, the product's shape and element types), where
    the group holds one product of at most SKINNY_ROWS rows against a 2-D
    right operand, its left operand computed outside the group; else None."""
    products = [n for n in group if n.op == "matmul"]
    if len(products) != 1:
        return None
    product = products[0]
    left, right = product.operands
    if len(right.shape) != 2 or any(left is n for n in group):
        return None
    if math.prod(left.shape[:-1]) > SKINNY_ROWS:
        return None
    return id(left), tuple(product.shape), product.element, right.element


def _merge_shared_inputs(graph: FusionGraph, groups: dict, group_of: dict,
                         version: dict) -> bool:
    """Merges the skinny products that read one left operand
    (`merge-shared-input`); True when a merge was made."""
    siblings: dict[tuple, list[int]] = {}
    for number in sorted(groups, key=lambda n: graph.position(groups[n][-1])):
        key = _shared_input_key(groups[number])
        if key is not None:
            siblings.setdefault(key, []).append(number)
    made = False
    for numbers in siblings.values():
        target = numbers[-1]
        for source in reversed(numbers[:-1]):
            if not _may_merge_siblings(graph, groups, group_of, source, target):
                continue
            _merge(graph, groups, group_of, version, source, target)
            made = True
    return made


def _merge(graph: FusionGraph, groups: dict, group_of: dict, version: dict, source: int,
           target: int) -> None:
    """Group `source` becomes part of group `target`."""
    for node in groups[source]:
        group_of[id(node)] = target
    groups[target] = graph.in_program_order(groups[source] + groups[target])
    version[target] += 1
    del groups[source]


def _may_merge_siblings(graph: FusionGraph, groups: dict, group_of: dict, source: int,
                        target: int) -> bool:
    """Whether the sibling products of groups `source` and `target` make
    one kernel that is no library call and keeps the split over k that
    either has alone, with no path between them."""
    if _creates_cycle(graph, source, target, group_of, groups) or \
            _creates_cycle(graph, target, source, group_of, groups):
        return False
    try:
        alone = [graph.plan(groups[source]), graph.plan(groups[target])]
        together = graph.plan(graph.in_program_order(groups[source] + groups[target]))
    except Unplannable:
        return False
    if LIBRARY_KIND in (together.kind, alone[0].kind, alone[1].kind):
        return False
    return together.split is not None or all(plan.split is None for plan in alone)


class Refusal(NamedTuple):
    """Why a merge is not made: `reason`, and whether that is a rule that
    can be turned off (`library-alone`, a schedule's objection), which the
    search then tries turned off."""

    reason: str
    by_rule: bool = False


def _refusal(graph: FusionGraph, decisions: FusionDecisions, groups: dict, group_of: dict,
             source: int, target: int) -> Refusal | None:
    """Why group `source` may not be merged into its consumer group
    `target`; None when it may."""
    kind = merge_kind(groups[source], groups[target])
    if not decisions.allows(kind):
        return Refusal(f"{kind} is off")
    merged = graph.in_program_order(groups[source] + groups[target])
    if _creates_cycle(graph, source, target, group_of, groups) or not graph.plannable(merged):
        return Refusal("not one kernel")
    if decisions.library_alone and _leaves_the_library(graph, groups[source], groups[target],
                                                       merged):
        return Refusal(LIBRARY_ALONE, by_rule=True)
    objection = _schedule_objection(graph, merged)
    if objection is not None and decisions.allows(objection):
        return Refusal(objection, by_rule=True)
    if kind in (FOLD_RMS_NORM, FUSE_PROLOGUE) and _costs_the_split(graph, groups[target], merged):
        return Refusal("costs the matmul its split over k")
    return None


def _schedule_objection(graph: FusionGraph, merged: list[Node]) -> str | None:
    """The rule by which the schedule planning `merged` objects to being
    grown into it (`Schedule.fusion_refusal`); None when it does not."""
    plan = graph.plan(merged)
    schedule = schedules().get(plan.schedule)
    return None if schedule is None else schedule.fusion_refusal(plan)


def _leaves_the_library(graph: FusionGraph, producer: list[Node], consumer: list[Node],
                        merged: list[Node]) -> bool:
    """Whether one of the two groups is a library call and the merged
    group would not be."""
    def library(group: list[Node]) -> bool:
        try:
            return graph.plan(group).kind == LIBRARY_KIND
        except Unplannable:
            return False

    def binding(group: list[Node]) -> bool:
        return library(group) and not _yields_to_low_rank(graph, group)

    return (binding(producer) or binding(consumer)) and not library(merged)


def _yields_to_low_rank(graph: FusionGraph, group: list[Node]) -> bool:
    """Whether the library matmul of `group` is the X W of a LoRA product
    X W + (X A) B in `graph` (kgc.tiling.low_rank) that kgc makes one
    kernel instead: at most the library's rows, 16-bit floats (as
    measured). Against X W by the library beside kernels for X A and for
    (X A) B plus the sum (H200, rank 16, search against default), the one
    kernel won at 32 x 3072 -> 3072 (12.1 us against 17.5), and at 128
    rows over 2048 -> 2048 (9.6 against 13.5) and 4096 -> 6144 (24.0
    against 26.9) in 64-row tiles (kgc.tiling.matmul); more rows were not
    measured, and keep the library (benchmarks/NOTES.md, stop 50)."""
    matmuls = [n for n in group if n.op == "matmul"]
    if len(matmuls) != 1:
        return False
    (main,) = matmuls
    if main.shape[-2] > LIBRARY_MIN_ROWS or main.element not in WIDE_ROW_ELEMENTS:
        return False
    x = main.operands[0]
    return any(
        up.op == "matmul" and up.shape == main.shape and up.operands[0].op == "matmul"
        and up.operands[0].operands[0] is x and up.operands[0].shape[-1] < main.shape[-1]
        for up in graph.computed() if up is not main)


def _gather(graph: FusionGraph, schedule: Schedule, group_of: dict, groups: dict) -> bool:
    """Makes each pattern of `schedule` among the computed ops one group,
    where that group is one kernel. True when one was made."""
    made = False
    for node in graph.computed():
        if id(node) not in group_of:
            continue
        pattern = schedule.fusion_pattern(node, graph.users[id(node)], id(node) in graph.escapes)
        if pattern is None:
            continue
        core = [n for n in graph.computed() if id(n) in pattern]
        numbers = {group_of[id(n)] for n in core}
        if any(id(n) not in pattern for number in numbers for n in groups[number]):
            continue  # part of it was gathered into a group beyond it
        if not graph.plannable(core) or not schedule.gathers(graph.plan(core)) or \
                _escapes_inside(graph, core, node):
            continue
        target = group_of[id(node)]
        for number in numbers - {target}:
            del groups[number]
        for member in core:
            group_of[id(member)] = target
        groups[target] = graph.in_program_order(core)
        made = True
    return made


def _costs_the_split(graph: FusionGraph, consumer: list[Node], merged: list[Node]) -> bool:
    """Whether folding a producer into the matmul group `consumer` would
    take away the split over k that kgc gives the matmul alone: a norm
    that must be whole before the dot (its normalized x a result of the
    kernel too) makes a kernel of two phases over k, which cannot be split,
    and a skinny matmul that cannot fill the GPU loses more than the fold
    saves (one small reduction kernel). Only the split of a matmul that
    streams its weights counts: the split a smaller skinny matmul takes
    alone (`skinny_split_k`) speeds up a kernel of its own, and a fold
    makes no kernel of two phases there."""
    try:
        alone = graph.plan(consumer)
        return (alone.split is not None
                and streams_weights(alone.knob_extents, widest_input(alone))
                and graph.plan(merged).split is None)
    except Unplannable:
        return False


def _escapes_inside(graph: FusionGraph, core: list[Node], output: Node) -> bool:
    """True when a value of the pattern other than its output is used
    outside it: the kernel has one output."""
    members = {id(n) for n in core}
    return any(n is not output and (id(n) in graph.escapes or
                                    any(id(u) not in members for u in graph.users[id(n)]))
               for n in core)


def _creates_cycle(graph: FusionGraph, source: int, target: int, group_of: dict,
                   groups: dict) -> bool:
    """True when a path from group `source` reaches group `target` through
    another group, or leaves either through an op that is not fused and
    comes back (merging would make a kernel depend on itself, or leave it no
    place among the ops that stay where they are). A path that enters
    another group leaves it from any of its ops: the group is one kernel,
    each of whose results waits for all of its inputs."""
    members = groups[source] + groups[target]
    frontier = [u for n in groups[source]
                for u in graph.users[id(n)] if group_of.get(id(u)) not in (source, target)]
    frontier += [u for n in members for u in graph.after_outside_uses(n)]
    seen: set[int] = set()
    entered: set[int] = set()
    while frontier:
        node = frontier.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        group = group_of.get(id(node))
        if group in (source, target):
            return True
        if group is not None and group not in entered:
            entered.add(group)
            frontier.extend(groups[group])
        frontier.extend(graph.users[id(node)])
        frontier.extend(graph.after_outside_uses(node))
    return False
