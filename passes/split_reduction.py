"""kg-split-reduction: a reduction across many rows into few columns, in
two stages, so that its first stage fills the GPU.

Argument: `kg-split-reduction`. Option: `target=SM` (the SM version whose
SM count the programs are to fill; default 90).

A reduction across rows keeps its input's last, contiguous axis and sums
the axes before it: a norm weight's gradient over every token. kg-tile gives
each program a band of at least NARROWEST_COLUMN_BAND columns and walks all
the rows down it, so such a kernel has at most `outer * columns / 8`
programs (`outer`: the other kept axes). A per-head norm's weight (Qwen3's
query and key norms, 64 columns) summed over batch, tokens and heads gets 8
programs for 8192 rows on a GPU of 132 SMs. Where the reduced axes are
several, the outer ones can be kept by a first stage and reduced by a
second (`k`: the number of outer reduced axes kept; `D`: the reduced axes;
every reduce of kind sum, max or min):

    reduce x dims D
        =>  reduce (reduce x dims D[k:] keepdim) dims D

with `k` the fewest outer axes whose product gives the first stage's kernel
at least one program per SM. The first stage is a reduction across rows
again (the last axis kept), with that many times the programs, and it
fuses with what computes `x` as the reduction did; the second reads the
partial results, which are `x`'s size over the product of D[k:].

Left alone: a reduction whose kernel already has a program for every four
SMs or so, one over fewer than MIN_SPLIT_ROWS rows (a second launch costs
more than it saves), one with a single reduced axis of more than one
element (there is no axis to keep; a reshape that splits one would cut the
fusion with its producers), one where no outer axes give a program per
SM, one that reduces the last axis, a reduction of half floats (the
partial results would be rounded to the half type; kg-decompose widens them
to f32 first), one with a dynamic extent, and ops inside kernels.
"""

from __future__ import annotations

from mlir import ir

from kgc.dialects import kg
from kgc.element_types import HALF_FLOATS
from kgc.passes.registry import Option, Pass, register_pass
from kgc.targets import DEFAULT_SM, SUPPORTED_SMS, Target, target_for
from kgc.tiling.graph_model import reduce_kind
from kgc.tiling.index_maps import ceil_div, product
from kgc.tiling.kernel_ops import enclosing_kernel, walk_ops
from kgc.tiling.plan import NARROWEST_COLUMN_BAND

# Rows below which a reduction is left in one kernel: a second launch costs
# a few microseconds, what a few thousand rows take.
MIN_SPLIT_ROWS = 1024
# A reduction whose kernel has at least one program per this many SMs is
# left in one kernel (Llama's norm weights, 512 columns over 1024 tokens,
# have 64 programs on 132 SMs and take 3.5 us, near the best band).
SMS_PER_PROGRAM = 4
_KINDS = ("sum", "max", "min")


def split_point(shape: list[int], dims: list[int], target: Target) -> int | None:
    """How many outer axes of the reduced `dims` (of an input of `shape`)
    the first stage keeps, or None where the reduction stays whole."""
    rank = len(shape)
    if rank < 2 or rank - 1 in dims:
        return None
    reduced = [d for d in sorted(dims) if shape[d] > 1]
    if len(reduced) < 2 or product([shape[d] for d in reduced]) < MIN_SPLIT_ROWS:
        return None
    outer = product([shape[d] for d in range(rank - 1) if d not in dims])
    programs = outer * ceil_div(shape[-1], NARROWEST_COLUMN_BAND)
    if programs * SMS_PER_PROGRAM >= target.sm_count:
        return None
    kept = 1
    for d in reduced[:-1]:
        kept *= shape[d]
        if programs * kept >= target.sm_count:
            return sorted(dims).index(d) + 1
    return None


def _splittable(op: ir.Operation) -> bool:
    if op.name != "kg.reduce" or enclosing_kernel(op) is not None:
        return False
    if reduce_kind(op) not in _KINDS:
        return False
    operand = ir.RankedTensorType(op.operands[0].type)
    if not operand.has_static_shape:
        return False
    return str(operand.element_type) not in HALF_FLOATS


@register_pass
class KgSplitReduction(Pass):
    argument = "kg-split-reduction"
    summary = "Reduce across many rows into few columns in two stages that fill the GPU"

    target = Option(int, DEFAULT_SM, "SM version whose SMs the first stage fills (80, 86, 89, "
                                     "90, ...)", choices=SUPPORTED_SMS)

    def run(self, op: ir.Operation) -> None:
        target = target_for(self.target)
        for reduce in [o for o in walk_ops(op) if _splittable(o)]:
            split(reduce, target)


def split(op: ir.Operation, target: Target) -> bool:
    """Rewrites the kg.reduce `op` in two stages where `split_point` says
    so; whether it did."""
    operand = op.operands[0]
    shape = list(ir.RankedTensorType(operand.type).shape)
    dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dims"]))
    kept = split_point(shape, dims, target)
    if kept is None:
        return False
    first_dims = dims[kept:]
    element = ir.RankedTensorType(operand.type).element_type
    partial_type = ir.RankedTensorType.get(
        [1 if d in first_dims else s for d, s in enumerate(shape)], element)
    kind = kg.ReduceKind[reduce_kind(op)]
    with ir.InsertionPoint(op), op.location:
        partial = kg.reduce(partial_type, kind, operand, first_dims, keepdim=True)
        whole = kg.reduce(op.results[0].type, kind, partial, dims,
                          keepdim="keepdim" in op.attributes)
    op.results[0].replace_all_uses_with(whole)
    op.erase()
    return True
