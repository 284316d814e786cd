"""Attention as one kernel: softmax(Q K^T [* scale] [+ mask]) V with an
online softmax (flash attention), split-KV decoding and grouped query heads.

`find_attention` recognises the pattern in a group of graph ops as kg-fuse
sees them (after kg-decompose, the softmax is reduce max, sub, exp, reduce
sum and div, with promotion casts around half-float math):

    S = matmul(Q, Kt)                  Q: [..., M, D], Kt: [..., D, N]
    X = elementwise(S, inputs...)      scale, additive mask (any inputs
                                       that broadcast to [..., M, N]), casts
    P = exp(X - max(X, -1)) / sum(exp(X - max(X, -1)), -1)
    O = matmul(P, V) [cast] [reshape]  V: [..., N, E]

P may also be select(all keys masked, 0, P), the softmax of scaled dot
product attention's math path (`_safe_softmax`): the online softmax gives
such a row l = 0 and acc = 0, and the kernel divides by max(l, tiny). P V
over a V of half floats widened to f32, rounded to that half type, takes P
and V in it (the output's own rounding bounds what P's costs), so both
dots run on tensor cores.

Q, Kt and V may be any expressions of views and elementwise ops of the
kernel's inputs (a transpose of K, the reshape/broadcast_to/reshape that
gives every query head its key/value head). The output may be a reshape of
P V (heads packed as [Hkv, G, E] given back as [B, H, 1, E]): a reshape
keeps the row-major order, so the kernel stores P V's elements where the
reshaped tensor has them, and no copy kernel follows.

`AttentionSchedule` plans it over the iteration axes

    (batch..., [hkv, g], [s], m, n, d, e)

batch: O's leading dimensions, one head dimension split into key/value
heads `hkv` and the `g` query heads of a group when Q's heads read K and V
through a broadcast (the head is then hkv * g_extent + g, affine, so K and V
are read at hkv without the broadcast being made); `s` the key splits
(`split_kv` > 1); m queries, n keys, d the head dimension of Q and K, e
that of V. Programs walk batch, heads, s and m tiles; one loop walks n,
carrying the running max and sum of each query row and the f32 output
accumulator:

    m' = max(m, rowmax(X));  a = exp(m - m');  p = exp(X - m')
    l' = l a + rowsum(p);    acc' = acc a + p V

Q K^T is a dot with M = m, K = d, N = n; P V one with M = m, K = n, N = e
(kg.tile_dot's `dims`). With `pack_heads` the g axis takes the place of m
in both dots (a query tile of one query, G rows). Keys past the end are
left to kg-pad-mask, which gives the reductions and the second dot their
neutral values there, so any key count is exact.

With `split_kv` = S > 1 each program takes a contiguous share of the key
tiles and writes its output, normalised, and its log-sum-exp as f32
tensors ([..., M, S, E] and [..., M, S]); a second kernel, in graph form
and planned like any reduction, combines them:

    w = exp(lse - max(lse, s)); O = sum(w O_s, s) / sum(w, s)

The key count may be the kernel's dynamic extent (`?` in K, V and the
mask, none in Q or the output: a decode step over a cache that grows call
by call). The key loop then ends at the call's size, the S splits (sized
for a long cache) share the call's key tiles equally at run time, and the
grid is the same at every size (`AttentionSchedule.dynamic_loop_axis`).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from kgc.element_types import ELEMENT_BYTES, HALF_FLOATS
from kgc.targets import Target
from kgc.tiling.config import AttentionConfig
from kgc.tiling.generate import DryBuilder, Generator, Tile
from kgc.tiling.graph_model import ELEMENTWISE_OPS, SOURCE_OPS, VIEW_OPS, Node, topological
from kgc.tiling.dynamic import NotAtEverySize, marked_dims
from kgc.tiling.index_maps import (BufferView, DynamicExtent, IndexMap, NotAffine, ceil_div,
                                   next_power_of_two, product)
from kgc.tiling.iteration import KernelPlan, Unplannable, matmul_operand_maps
from kgc.tiling.schedule import Schedule, TiledForm, canonical_or_none, widest_input
from kgc.tuned_defaults import TableKey

__all__ = ["AttentionPattern", "AttentionPlan", "AttentionSchedule", "find_attention"]

# The lowest finite f32: the running max starts here rather than at -inf,
# so that a block of keys all masked to -inf gives exp(-inf - m) = 0 and
# exp(m - m') = 1, never exp(-inf + inf).
_LOWEST = -3.4028234663852886e38
# Smallest normal f32: a split without keys (l = 0, acc = 0) writes 0.
_TINY = 1.1754943508222875e-38
_MAX_HEAD_DIM = 256
# What may stand between P V and the kernel's output.
_OUTPUT_CHAIN_OPS = frozenset({"cast", "reshape", "transpose"})
# Queries up to this many are decoding: their keys are worth splitting.
_DECODE_ROWS = 16
# Key tiles from which decoding splits its keys down to one tile a split.
_ONE_TILE_SPLITS = 8
# The key count a decoding kernel over a dynamic key count (a cache that
# grows call by call) sizes its splits for: its programs split the keys of
# each call evenly, so a longer cache fills each split's loop, and a
# shorter one leaves splits without keys, which cost a program each.
_DYNAMIC_KEYS_PLANNED = 4096
# Prefill query tiles shrink while their programs number under this share
# of the target's SMs (2/5).
_FEW_PROGRAMS_NUMERATOR, _FEW_PROGRAMS_DENOMINATOR = 2, 5
# The share of padding in the key blocks of 128 over which heads of 64
# take query tiles of 32.
_PADDED_SHARE_FOR_HALF_TILES = 1 / 16
# How much more of its key blocks a table entry's key block may pad on a
# kernel than it did on its own shape.
_PADDING_SLACK = 1 / 16
# Shared memory the pipelined K and V blocks of a decoding kernel may take.
_STAGES_BYTES = 160 * 1024
# The fusion rule (`AttentionSchedule.fusion_refusal`) that keeps work on
# the keys and values out of a kernel whose programs would each repeat it.
KEYS_ONCE = "keys-once"
# What an attention kernel may do to its K and V on the way in at no cost
# worth a kernel: address them (views, a broadcast over the query heads),
# convert them, or read constants.
_ADDRESSING_OPS = VIEW_OPS | SOURCE_OPS | {"cast"}


# -- recognising the pattern ---------------------------------------------------


@dataclasses.dataclass
class AttentionPattern:
    scores: Node  # Q @ Kt
    output_mm: Node  # P @ V
    logits: Node  # X, the softmax's input (before its promotion casts)
    output: Node  # the kernel's output: output_mm or casts, transposes and reshapes of it
    core: frozenset  # ids of the nodes computed from S: X, the softmax, P V, its casts
    logit_nodes: frozenset  # ids of the nodes between S (included) and X
    # P is zero on rows whose keys are all masked (X = -inf), as
    # scaled_dot_product_attention's math path has it (`_safe_softmax`),
    # where softmax itself gives NaN.
    zeroes_masked_rows: bool = False
    # The type P V's dot takes P and V in: a half float where V is one
    # widened to f32 and the output is rounded to it (None: V's own type).
    product_element: str | None = None


def _strip_casts(node: Node) -> Node:
    while node.op == "cast":
        node = node.operands[0]
    return node


def _strip_output_chain(node: Node) -> Node:
    """P V under the casts, transposes and reshapes that make the output
    (`output_view` says where each element of P V lands in it)."""
    while node.op in _OUTPUT_CHAIN_OPS:
        node = node.operands[0]
    return node


def combined_shape(pattern: "AttentionPattern") -> tuple[int, ...] | None:
    """The shape the kernel combining split keys computes the result in,
    then reshapes to the output's: the output's own where it keeps P V's
    last dimension, else P V's. None where the output does not keep P V's
    row-major order (a transpose of dimensions of more than one element),
    which the partials, stored in that order, cannot be read in."""
    node = pattern.output
    while node is not pattern.output_mm:
        if node.op == "transpose":
            # Moving dimensions of one element keeps the order: a reshape.
            moved = [dim for dim in node.attrs["permutation"] if node.operands[0].shape[dim] != 1]
            if moved != sorted(moved):
                return None
        node = node.operands[0]
    if pattern.output.shape[-1:] == pattern.output_mm.shape[-1:]:
        return tuple(pattern.output.shape)
    return tuple(pattern.output_mm.shape)


def output_view(pattern: "AttentionPattern") -> BufferView:
    """The kernel's output buffer (dense, row-major) as a view indexed like
    P V: a reshape keeps each element's offset, a transpose permutes the
    strides, so the kernel stores P V's tile straight where the output has
    it and no copy kernel follows (the transpose of heads back to tokens
    after attention, then the reshape that packs them). NotAffine where a
    reshape merges dimensions a transpose has made strided."""
    view = BufferView.contiguous(pattern.output.shape)
    node = pattern.output
    while node is not pattern.output_mm:
        source = node.operands[0]
        if node.op == "reshape":
            view = view.reshaped(source.shape)
        elif node.op == "transpose":
            strides = [0] * len(source.shape)
            for position, dim in enumerate(node.attrs["permutation"]):
                strides[dim] = view.strides[position]
            view = BufferView(tuple(source.shape), tuple(strides), view.offset)
        node = source
    # A dimension of one element has no stride that matters, but a zero
    # would read as a broadcast, which an output never is.
    return dataclasses.replace(view, strides=tuple(
        stride if size != 1 else 1 for size, stride in zip(view.shape, view.strides)))


def _last_axis_reduce(node: Node, kind: str) -> Node | None:
    """The operand of `node` when it is a keepdim reduce `kind` over the last
    dimension (or a cast of one)."""
    node = _strip_casts(node)
    if node.op != "reduce" or node.attrs.get("kind") != kind or not node.attrs.get("keepdim"):
        return None
    if list(node.attrs["dims"]) != [len(node.shape) - 1]:
        return None
    return node.operands[0]


def _zeroed_rows(node: Node) -> tuple[Node, Node | None]:
    """(P, the condition) where `node` is select(condition, 0, P), else
    (node, None)."""
    if node.op == "select":
        condition, zero, kept = node.operands
        if zero.op == "constant" and zero.attrs.get("value") == 0.0:
            return kept, condition
    return node, None


def _all_keys_masked(condition: Node, logits: Node) -> bool:
    """True when `condition` holds on exactly the rows where every key's
    logit is -inf: not(any over keys of not(X == -inf))) (or X != -inf),
    the 0/1 values of the any cast through floats, which keep them."""
    if condition.op != "logical_not":
        return False
    kept = _last_axis_reduce(condition.operands[0], "max")
    if kept is None:
        return False
    kept = _strip_casts(kept)
    if kept.op == "logical_not":
        test, predicate = _strip_casts(kept.operands[0]), "eq"
    else:
        test, predicate = kept, "ne"
    if test.op != "cmp" or test.attrs.get("predicate") != predicate:
        return False
    x, bound = test.operands
    return (_strip_casts(x) is logits and bound.op == "constant"
            and bound.attrs.get("value") == float("-inf"))


def _widened_half(node: Node) -> str | None:
    """The half float type whose values `node` holds: views of a cast of
    one to f32 (exact), else None."""
    while node.op in VIEW_OPS - {"concat"}:
        node = node.operands[0]
    if node.op == "cast" and node.element == "f32" and node.operands[0].element in HALF_FLOATS:
        return node.operands[0].element
    return None


def find_attention(outputs: Sequence[Node], check_operands: bool = True) -> AttentionPattern:
    """The attention pattern computing `outputs`; raises Unplannable saying
    what does not fit. Without `check_operands`, Q, K, V and the mask may
    be anything (a fusion looking for the pattern among computed ops)."""
    if len(outputs) != 1:
        raise Unplannable("an attention kernel has one output")
    output = outputs[0]
    output_mm = _strip_output_chain(output)
    if output_mm.op != "matmul":
        raise Unplannable("the output is not a matmul (P V)")
    probabilities, masked_rows = _zeroed_rows(_strip_casts(output_mm.operands[0]))
    division = _strip_casts(probabilities)
    if division.op != "div":
        raise Unplannable("the matmul's left operand is not a softmax (exp / sum)")
    exponent, total = division.operands
    summed = _last_axis_reduce(total, "sum")
    if summed is None or _strip_casts(summed) is not _strip_casts(exponent):
        raise Unplannable("the softmax does not divide by the sum of its exponentials over keys")
    exp_node = _strip_casts(exponent)
    if exp_node.op != "exp":
        raise Unplannable("the softmax's numerator is not an exp")
    shifted = _strip_casts(exp_node.operands[0])
    if shifted.op != "sub":
        raise Unplannable("the softmax does not subtract the row maximum")
    x, row_max = shifted.operands
    maxed = _last_axis_reduce(row_max, "max")
    if maxed is None or _strip_casts(maxed) is not _strip_casts(x):
        raise Unplannable("the softmax does not subtract the maximum over keys")
    logits = _strip_casts(x)
    scores = _scores_matmul(logits)
    if scores.shape != logits.shape:
        raise Unplannable("Q K^T is broadcast before the softmax")
    # X: elementwise in S and in tensors that do not depend on S.
    logit_ids = {id(scores)}
    for node in topological([logits]):
        if node is scores or not any(id(operand) in logit_ids for operand in node.operands):
            continue
        if node.op not in ELEMENTWISE_OPS:
            raise Unplannable(f"kg.{node.op} between Q K^T and the softmax is not elementwise")
        if node.shape != output_mm.operands[0].shape:
            raise Unplannable("the softmax's input is not of the scores' shape")
        logit_ids.add(id(node))
    if masked_rows is not None and not _all_keys_masked(masked_rows, logits):
        raise Unplannable("the softmax's rows are zeroed where not every key is masked")
    # P V in the half type of a widened V whose result is rounded to it: P
    # rounded to it costs what the output's own rounding does, and the dot
    # runs on tensor cores (an f32 dot under IEEE precision does not).
    half = _widened_half(output_mm.operands[1])
    product_element = half if half is not None and output.element == half else None
    # Everything computed from S on the way to the output: the logits, the
    # softmax, P V and its casts.
    computed_from_scores = {id(scores)}
    for node in topological([output]):
        if any(id(o) in computed_from_scores for o in node.operands):
            computed_from_scores.add(id(node))
    core = frozenset(computed_from_scores)
    if not check_operands:
        return AttentionPattern(scores, output_mm, logits, output, core, frozenset(logit_ids),
                                masked_rows is not None, product_element)
    for operand in (*scores.operands, output_mm.operands[1]):
        for node in topological([operand]):
            if node.op in ("matmul", "reduce"):
                raise Unplannable(f"Q, K and V of an attention kernel are views and elementwise "
                                  f"ops of inputs, not kg.{node.op}")
    for node in topological([logits]):
        if id(node) not in logit_ids and node.op in ("matmul", "reduce"):
            raise Unplannable("a mask of an attention kernel holds a reduction")
    if output_mm.shape[:-2] != scores.shape[:-2] or output_mm.shape[-2] != scores.shape[-2]:
        raise Unplannable("P V and Q K^T differ in batch or query dimensions")
    return AttentionPattern(scores, output_mm, logits, output, core, frozenset(logit_ids),
                            masked_rows is not None, product_element)


def _scores_matmul(logits: Node) -> Node:
    """Q K^T: the one matmul the softmax's input X is computed from through
    elementwise ops of X's shape. A mask may be computed from products of
    its own (transformers counts a packed sequence's positions with a
    cumulative sum, which kgc computes as a product), but it reaches X
    through a gather or a broadcast and is one of X's operands, not S."""
    found: list[Node] = []
    stack, seen = [logits], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op == "matmul":
            found.append(node)
        elif node.op in ELEMENTWISE_OPS and node.shape == logits.shape:
            stack.extend(node.operands)
    if len(found) > 1:
        raise Unplannable("the softmax's input holds two matmuls")
    if not found:
        raise Unplannable("the softmax's input is not computed from a matmul (Q K^T) by "
                          "elementwise ops")
    return found[0]


def is_attention(order: Sequence[Node]) -> bool:
    """True when the nodes `order` (producers first, the output last) look
    like attention: two matmuls, one feeding the other."""
    matmuls = [n for n in order if n.op == "matmul"]
    if len(matmuls) != 2:
        return False
    try:
        find_attention([order[-1]])
    except Unplannable:
        return False
    return True


# -- planning ----------------------------------------------------------------


@dataclasses.dataclass
class AttentionPlan(KernelPlan):
    pattern: AttentionPattern | None = None
    # Iteration axes: rows of the dots (m, or g when heads are packed),
    # queries, keys, head dims of Q/K and of V, the split (None: no split).
    row_axis: int = 0
    m_axis: int = 0
    n_axis: int = 0
    d_axis: int = 0
    e_axis: int = 0
    g_axis: int | None = None
    s_axis: int | None = None
    splits: int = 1
    chunk: int = 0  # keys per split (a multiple of block_n); 0: computed from the call's keys
    # Whether the key count is the kernel's dynamic extent (`?`): the key
    # loop ends at the call's size, and the splits share it at run time.
    dynamic_keys: bool = False
    scores_map: IndexMap | None = None
    output_map: IndexMap | None = None
    v_map: IndexMap | None = None

    def contraction_axes(self) -> tuple[int, int, int]:
        # The scores' dot: rows by head dim, against the keys.
        return self.row_axis, self.d_axis, self.n_axis

    def partial_shapes(self) -> list[tuple[tuple[int, ...], str]]:
        """The kernel's results with split keys: each split's output
        (normalised) and its log-sum-exp, in f32."""
        out = self.pattern.output_mm.shape
        return [(tuple(out[:-1]) + (self.splits, out[-1]), "f32"),
                (tuple(out[:-1]) + (self.splits,), "f32")]


def _group_candidates(order: Sequence[Node], batch: Sequence[int]) -> list[tuple[int, int]]:
    """(batch dimension, group size) pairs worth splitting: a broadcast in
    the kernel expands a dimension of 1 to G, and G divides a batch
    dimension of the output."""
    sizes = set()
    for node in order:
        if node.op == "broadcast_to":
            source = node.operands[0].shape
            lead = len(node.shape) - len(source)
            for k, size in enumerate(node.shape):
                if size > 1 and (k < lead or source[k - lead] == 1):
                    sizes.add(size)
    return [(dim, g) for dim, extent in enumerate(batch) for g in sorted(sizes, reverse=True)
            if 1 < g < extent and extent % g == 0] + \
        [(dim, extent) for dim, extent in enumerate(batch) if extent in sizes and extent > 1]


def plan_attention(outputs, order, config: AttentionConfig, kernel,
                   target: Target) -> AttentionPlan:
    """The plan of the attention kernel computing `outputs` for `target`,
    whose SMs the query tiles and key splits are sized to fill."""
    pattern = find_attention(outputs)
    errors = []
    batch = pattern.output_mm.shape[:-2]
    queries = pattern.scores.shape[-2]
    for split in [None] + _group_candidates(order, batch):
        # Packing is the default for a decoding query, where K and V are
        # shared by the group (not when one is given per query head).
        if split is None:
            packs = [False]
        elif config.pack_heads is not None:
            packs = [config.pack_heads]
        else:
            packs = [True, False] if queries == 1 else [False]
        for pack in packs:
            try:
                plan = _plan(pattern, outputs, config, kernel, split, pack, target)
                # K and V read through the broadcast of heads are affine
                # only with the head axis split: a dry run of the program
                # says.
                AttentionGenerator(plan, DryBuilder()).run()
                return plan
            except (Unplannable, NotAffine) as error:
                errors.append(str(error))
    raise Unplannable(" | ".join(errors))


def _plan(pattern: AttentionPattern, outputs, config: AttentionConfig, kernel,
          group: tuple[int, int] | None, pack: bool, target: Target) -> AttentionPlan:
    scores, output_mm = pattern.scores, pattern.output_mm
    batch = list(output_mm.shape[:-2])
    m_extent, n_extent = scores.shape[-2], scores.shape[-1]
    d_extent, e_extent = scores.operands[0].shape[-1], output_mm.shape[-1]
    dynamic_keys = isinstance(n_extent, DynamicExtent)
    # Splits and stages are sized for the keys the kernel meets: the
    # call's, or for a dynamic count a long cache's.
    planned_keys = _DYNAMIC_KEYS_PLANNED if dynamic_keys else n_extent
    if d_extent > _MAX_HEAD_DIM or e_extent > _MAX_HEAD_DIM:
        raise Unplannable(f"head dimensions {d_extent}, {e_extent} exceed {_MAX_HEAD_DIM}")
    # Batch axes, one of them split into (key/value heads, group).
    extents: list[int] = []
    batch_rows: list[dict[int, int]] = []  # per batch dim: axis -> coefficient
    g_axis = None
    for dim, size in enumerate(batch):
        if group is not None and group[0] == dim:
            heads, g = size // group[1], group[1]
            extents += [heads, g]
            g_axis = len(extents) - 1
            batch_rows.append({g_axis - 1: g, g_axis: 1})
        else:
            extents.append(size)
            batch_rows.append({len(extents) - 1: 1})
    g_extent = extents[g_axis] if g_axis is not None else 1
    knob_extents = {"m": m_extent, "n": n_extent}
    if g_axis is not None:
        knob_extents["g"] = g_extent
    config = config.canonical(knob_extents, kernel)
    if config.num_programs is not None:
        raise Unplannable("attention kernels are not persistent (num_programs)")
    pack = pack and g_axis is not None
    # Prefill (many queries per head): the tiles an H200 sweep of causal
    # prefill at 512 tokens found best (benchmarks/NOTES.md, "Prefill
    # attention"): heads of 64 take 128 keys a step (15.6 -> 10.2 us),
    # heads of 128 take 128 queries on 8 warps (21.5 -> 18.7 us) where
    # those tiles still make about a wave. Three stages wherever the loop
    # has three key blocks or more: every prefill entry the search found
    # there had three (stop 55), and four stages of 128 keys, the rule
    # before, hold one program an SM (20 heads x 1500 queries: 115.5 us
    # against 67.9 at three).
    prefill = m_extent > _DECODE_ROWS and not pack
    narrow_heads = prefill and d_extent <= 64 and e_extent <= 64
    wide_query_tiles = (prefill and not narrow_heads and config.block_m is None
                        and m_extent >= 128 and
                        2 * _product(extents) * ceil_div(m_extent, 128) > target.sm_count)
    block_n_default = min(planned_keys,
                          128 if narrow_heads or not (m_extent > 1 or pack) else 64)
    if narrow_heads and block_n_default == 128 and \
            _padded_keys(planned_keys, 64) < _padded_keys(planned_keys, 128):
        # A last block mostly of padding costs a whole step of 128 masked
        # keys: 300 keys in blocks of 64 pad 20 of them, in blocks of 128
        # 84 (16 heads x 300 queries: 6.55 us against 9.73; stop 55).
        block_n_default = 64
    block_n = config.block_n or block_n_default
    key_tiles = ceil_div(planned_keys, block_n)
    if pack:
        block_m = 1
    elif wide_query_tiles:
        block_m = 128
    else:
        block_m = config.block_m or min(m_extent, 64 if m_extent > 16 else 16)
        if config.block_m is None and narrow_heads and block_n >= 128 and block_m == 64 and \
                _padded_share(planned_keys, block_n) > _PADDED_SHARE_FOR_HALF_TILES:
            # A last block of 128 keys partly padding (where blocks of 64
            # pad as many) takes half the query tiles: 32 x 128 tiles won
            # over 64 x 128 at 200, 330 and 450 keys (16 heads x 200: 5.30
            # us against 6.72; 8 x 450: 8.25 against 11.43), 64 x 128 where
            # the keys fill their blocks (8 x 512, 16 x 384, 8 x 1000 at 2%
            # padding); the search's reports, stop 55.
            block_m = 32
        if block_m > m_extent:
            block_m = m_extent
        # Few heads of many queries: smaller query tiles keep the SMs busy,
        # but only where the programs would leave most of them idle. Tiles
        # of 64 queries won at 64 to 128 programs on 132 SMs (8 heads x 512,
        # 16 x 384 and 12 x 512 queries, 8 x 300 at head dim 128: 6.18 us
        # against 32-query tiles' 8.83 at 16 x 384), 32 at 48 (12 x 197);
        # the search's reports, stop 55.
        while config.block_m is None and block_m > 16 and block_m & (block_m - 1) == 0 and \
                _product(extents) * ceil_div(m_extent, block_m) * _FEW_PROGRAMS_DENOMINATOR < \
                target.sm_count * _FEW_PROGRAMS_NUMERATOR:
            block_m //= 2
    programs = _product(extents) // (g_extent if pack else 1) * ceil_div(m_extent, block_m)
    splits = config.split_kv
    if splits is None:
        # Flash-decoding: split the keys of decoding queries (a few rows)
        # while the programs still leave most SMs idle, down to one key tile
        # a split (two under _ONE_TILE_SPLITS tiles). H200: the tuned-defaults
        # table's decode entries all won with as many splits (4 x 2 heads
        # over 512 keys, 8 splits of one tile: 3.97 us against 4.77 at two
        # tiles a split; over 4096, 32 splits of two tiles: 6.33 against
        # 7.04), and the search chose 16 splits of one tile for 4 x 2 heads
        # over 1000 keys (4.24 against 5.10; benchmarks/NOTES.md, stop 50).
        # Under _ONE_TILE_SPLITS key tiles each split keeps two: the
        # combining kernel's launch is a larger share of a short loop.
        tiles_per_split = 1 if key_tiles >= _ONE_TILE_SPLITS else 2
        splits = 1
        while m_extent <= _DECODE_ROWS and programs * splits * 2 <= target.sm_count \
                and key_tiles >= splits * 2 * tiles_per_split:
            splits *= 2
    if splits > 1 and combined_shape(pattern) is None:
        if config.split_kv is not None:
            raise Unplannable("split keys combine partials in P V's order; this output "
                              "transposes dimensions of more than one element")
        splits = 1
    if splits > 1 and pattern.zeroes_masked_rows:
        # A split whose keys are all masked has no log-sum-exp to weigh its
        # partial by; only one kernel over every key gives such a row zeros.
        if config.split_kv is not None:
            raise Unplannable("split keys are weighed by their log-sum-exp, which a row of "
                              "masked keys zeroed by the softmax has none of")
        splits = 1
    splits = max(1, min(splits, key_tiles))
    chunk = ceil_div(key_tiles, splits) * block_n
    if dynamic_keys:
        chunk = 0  # each call's keys, shared by the splits (AttentionGenerator)
    else:
        splits = ceil_div(n_extent, chunk)
    s_axis = None
    if splits > 1:
        extents.append(splits)
        s_axis = len(extents) - 1
    m_axis, n_axis, d_axis, e_axis = range(len(extents), len(extents) + 4)
    extents += [m_extent, n_extent, d_extent, e_extent]
    n = len(extents)
    tile = [1] * n
    tile[m_axis] = block_m
    tile[n_axis] = block_n
    tile[d_axis] = d_extent
    tile[e_axis] = e_extent
    if pack:
        tile[g_axis] = g_extent
    row_axis = g_axis if pack else m_axis

    def row(coefficients: dict[int, int]) -> tuple[int, ...]:
        return tuple(coefficients.get(j, 0) for j in range(n))

    whole = tuple((0, e) for e in extents)
    lead = [row(r) for r in batch_rows]
    scores_map = IndexMap(tuple(lead + [row({m_axis: 1}), row({n_axis: 1})]),
                          (0,) * (len(batch) + 2), tuple(extents), whole)
    output_map = IndexMap(tuple(lead + [row({m_axis: 1}), row({e_axis: 1})]),
                          (0,) * (len(batch) + 2), tuple(extents), whole)
    _, v_map = matmul_operand_maps(output_mm, output_map, (m_axis, n_axis, e_axis))
    maps = {scores: scores_map, output_mm: output_map}
    program_axes = tuple(a for a in range(n) if a not in (n_axis, d_axis, e_axis)
                         and ceil_div(extents[a], tile[a]) > 1)
    warps_default = 4 if (block_m if not pack else next_power_of_two(g_extent)) <= 64 else 8
    # Decoding reads each key block once and does little with it: a third
    # buffer keeps another block's loads in flight (GQA decode on an H100:
    # every one of the sweep's best configs had 3 stages, and kgc's default
    # went from 14.2 to 12.1 us with them; benchmarks/NOTES.md). Only where
    # a program walks several key blocks, and three stages of K and V
    # blocks fit shared memory with room to spare.
    stage_bytes = block_n * (d_extent + e_extent) * _element_bytes(pattern)
    stages_budget = min(_STAGES_BYTES, target.max_shared_memory_per_block * 2 // 3)
    tiles_per_program = chunk // block_n if chunk else ceil_div(key_tiles, splits)
    stages_default = 3 if (m_extent <= _DECODE_ROWS and tiles_per_program >= 3
                           and 3 * stage_bytes <= stages_budget) else 2
    if prefill and key_tiles >= 3 and 3 * stage_bytes <= stages_budget:
        stages_default = 3
    resolved = AttentionConfig(num_warps=config.num_warps or warps_default,
                               num_stages=config.num_stages or stages_default,
                               block_m=None if pack else block_m, block_n=block_n,
                               split_kv=splits, pack_heads=True if pack else (
                                   False if g_axis is not None else None))
    plan = AttentionPlan(
        "attention", tuple(extents), tuple(tile), program_axes, (n_axis,), list(outputs),
        [output_map], maps, {}, [], resolved.canonical(knob_extents, kernel), dict(knob_extents),
        pattern=pattern, row_axis=row_axis, m_axis=m_axis, n_axis=n_axis, d_axis=d_axis,
        e_axis=e_axis, g_axis=g_axis, s_axis=s_axis, splits=splits, chunk=chunk,
        dynamic_keys=dynamic_keys, scores_map=scores_map, output_map=output_map, v_map=v_map)
    return plan


def _padded_keys(keys: int, block_n: int) -> int:
    """How many masked keys blocks of `block_n` add to `keys`."""
    return ceil_div(keys, block_n) * block_n - keys


def _padded_share(keys: int, block_n: int) -> float:
    """The share of the key blocks' slots that are padding."""
    return _padded_keys(keys, block_n) / (ceil_div(keys, block_n) * block_n)


def _query_programs(features, block_m: int) -> int:
    """How many programs query tiles of `block_m` rows make of an attention
    kernel with `features` (a table key's: heads and queries m), one per
    tile and head."""
    return features["heads"] * ceil_div(features["m"], block_m)


def _alike_waves(programs: int, others: int, target: Target) -> bool:
    """Whether two counts of programs make as many waves over the target's
    SMs, the last of them filled to within a quarter of the SMs."""
    sms = target.sm_count
    if ceil_div(programs, sms) != ceil_div(others, sms):
        return False
    # The programs of the last wave: 1 to sms.
    return abs((programs - 1) % sms - (others - 1) % sms) * 4 <= sms


def _element_bytes(pattern: AttentionPattern) -> int:
    """Bytes of one element of K and V (the wider of the two)."""
    elements = [pattern.scores.operands[1].element,
                pattern.product_element or pattern.output_mm.operands[1].element]
    return max(ELEMENT_BYTES[element] for element in elements)


def _product(values) -> int:
    result = 1
    for v in values:
        result *= v
    return result


# -- writing the tile program -------------------------------------------------


class AttentionGenerator(Generator):
    plan: AttentionPlan

    def _tile_program(self) -> None:
        plan, b = self.plan, self.b
        pattern = plan.pattern
        rows = frozenset({plan.row_axis})
        out_axes = frozenset({plan.row_axis, plan.e_axis})
        with b.hoisted(self.base):
            m0 = b.constant(_LOWEST, "f32", self._shape(rows))
            l0 = b.constant(0.0, "f32", self._shape(rows))
            acc0 = b.constant(0.0, "f32", self._shape(out_axes))
        start, upper = None, plan.extents[plan.n_axis]
        if plan.dynamic_keys:
            upper = b.extent()
        if plan.s_axis is not None:
            chunk = self._keys_per_split(upper) if plan.dynamic_keys else b.const(plan.chunk)
            start = b.scalar("mul", self.offsets[plan.s_axis], chunk)
            end = upper if plan.dynamic_keys else b.const(upper)
            upper = b.scalar("min", b.scalar("add", start, chunk), end)
        n_axis = plan.n_axis
        with b.loop(n_axis, upper, plan.tile[n_axis], [m0, l0, acc0], None, start=start) as body:
            self.bound.append(n_axis)
            self.memo.append({})
            saved = self.offsets[n_axis]
            self.offsets[n_axis] = body.offset
            try:
                body.results = self._step(*body.carried)
            finally:
                self.offsets[n_axis] = saved
                self.memo.pop()
                self.bound.pop()
        m_final, l_final, acc = body.finals
        out_shape = self._shape(out_axes)
        if plan.s_axis is None:
            total = l_final
            if pattern.zeroes_masked_rows:
                # A row whose keys are all masked has l = 0 and acc = 0.
                tiny = b.constant(_TINY, "f32", self._shape(frozenset()))
                total = b.elementwise("maximum", [l_final, tiny], {}, "f32", self._shape(rows))
            value = b.elementwise("div", [acc, total], {}, "f32", out_shape)
            self._store_value(0, output_view(pattern), pattern.output.element,
                              self._cast_value(value, "f32", pattern.output.element, out_axes),
                              out_axes, plan.output_map)
            return
        # Split keys: this split's output, normalised, and its log-sum-exp.
        tiny = b.constant(_TINY, "f32", self._shape(frozenset()))
        safe = b.elementwise("maximum", [l_final, tiny], {}, "f32", self._shape(rows))
        value = b.elementwise("div", [acc, safe], {}, "f32", out_shape)
        log_sum = b.elementwise("log", [l_final], {}, "f32", self._shape(rows))
        lse = b.elementwise("add", [m_final, log_sum], {}, "f32", self._shape(rows))
        (out_shape_full, _), (lse_shape, _) = plan.partial_shapes()
        lead = list(plan.output_map.rows[:-1])
        s_row = tuple(1 if j == plan.s_axis else 0 for j in range(self.n))
        partial_map = dataclasses.replace(
            plan.output_map, rows=tuple(lead + [s_row, plan.output_map.rows[-1]]),
            offsets=(0,) * len(out_shape_full))
        lse_map = dataclasses.replace(plan.output_map, rows=tuple(lead + [s_row]),
                                      offsets=(0,) * len(lse_shape))
        self._store_value(0, BufferView.contiguous(out_shape_full), "f32", value, out_axes,
                          partial_map)
        self._store_value(1, BufferView.contiguous(lse_shape), "f32", lse, rows, lse_map)

    def _keys_per_split(self, keys):
        """The keys each split takes of a call's `keys` (an i32): an equal
        share of its key tiles, ceil(ceil(keys / block_n) / splits) tiles."""
        b, block = self.b, self.plan.tile[self.plan.n_axis]
        tiles = b.scalar("div", b.scalar("add", keys, b.const(block - 1)), b.const(block))
        share = b.scalar("div", b.scalar("add", tiles, b.const(self.plan.splits - 1)),
                         b.const(self.plan.splits))
        return b.scalar("mul", share, b.const(block))

    def _step(self, m_old, l_old, acc):
        """One block of keys: the online-softmax update."""
        plan, b = self.plan, self.b
        pattern = plan.pattern
        row, n_axis, d_axis, e_axis = plan.row_axis, plan.n_axis, plan.d_axis, plan.e_axis
        rows = frozenset({row})
        scores_axes = frozenset({row, n_axis})
        s_shape = self._shape(scores_axes)
        q_map, k_map = matmul_operand_maps(pattern.scores, plan.scores_map,
                                           (plan.m_axis, d_axis, n_axis))
        q = self.gen(pattern.scores.operands[0], q_map)
        k = self.gen(pattern.scores.operands[1], k_map)
        zero = b.constant(0.0, "f32", s_shape)
        scores = b.dot(self._spread(q, {row, d_axis}), self._spread(k, {d_axis, n_axis}), zero,
                       pattern.scores.attrs.get("precision"), s_shape, (row, d_axis, n_axis))
        x = self._logits(pattern.logits, plan.scores_map, Tile(scores, scores_axes, "f32"))
        x_value = self._spread(x, scores_axes)
        row_max = b.reduce("max", x_value, [n_axis], "f32", self._shape(rows))
        m_new = b.elementwise("maximum", [m_old, row_max], {}, "f32", self._shape(rows))
        alpha = b.elementwise("exp", [b.elementwise("sub", [m_old, m_new], {}, "f32",
                                                    self._shape(rows))], {}, "f32",
                              self._shape(rows))
        shifted = b.elementwise("sub", [x_value, m_new], {}, "f32", s_shape)
        p = b.elementwise("exp", [shifted], {}, "f32", s_shape)
        row_sum = b.reduce("sum", p, [n_axis], "f32", self._shape(rows))
        l_new = b.elementwise("add", [b.elementwise("mul", [l_old, alpha], {}, "f32",
                                                    self._shape(rows)), row_sum], {}, "f32",
                              self._shape(rows))
        out_axes = frozenset({row, e_axis})
        scaled = b.elementwise("mul", [acc, alpha], {}, "f32", self._shape(out_axes))
        v = self.gen(pattern.output_mm.operands[1], plan.v_map)
        precision = pattern.output_mm.attrs.get("precision")
        if pattern.product_element is not None:
            # V holds half floats: narrowing it back is exact.
            v = Tile(self._cast_value(v.value, v.element, pattern.product_element, v.axes),
                     v.axes, pattern.product_element)
            precision = None
        p_cast = self._cast_value(p, "f32", v.element, scores_axes)
        acc_new = b.dot(p_cast, self._spread(v, {n_axis, e_axis}), scaled, precision,
                        self._shape(out_axes), (row, n_axis, e_axis))
        return [m_new, l_new, acc_new]

    def _spread(self, tile: Tile, axes) -> object:
        """`tile`'s value laid out over `axes`, broadcast along those it does
        not vary along (a query shared by the heads of a group)."""
        target = self._shape(frozenset(axes))
        shape = self._shape(tile.axes)
        if shape == target:
            return tile.value
        if any(size > 1 and target[a] == 1 for a, size in enumerate(shape)):
            raise Unplannable("an attention operand varies along an axis its dot does not have")
        return self.b.broadcast(tile.value, tile.element, target)

    def _cast_value(self, value, source: str, target: str, axes):
        if source == target:
            return value
        return self.b.elementwise("cast", [value], {}, target, self._shape(frozenset(axes)))

    def _logits(self, node: Node, index_map: IndexMap, scores: Tile) -> Tile:
        """X at `index_map`, computed in f32 from the scores tile (casts
        between S and X are skipped: the values stay in registers)."""
        pattern = self.plan.pattern
        if node is pattern.scores:
            return scores
        if id(node) not in pattern.logit_nodes:
            tile = self.gen(node, index_map)
            if tile.element != "f32":
                tile = Tile(self._cast_value(tile.value, tile.element, "f32", tile.axes),
                            tile.axes, "f32")
            return tile
        if node.op == "cast":
            return self._logits(node.operands[0], index_map, scores)
        operands = [self._logits(o, index_map.broadcast_from(node.shape, o.shape), scores)
                    for o in node.operands]
        axes = frozenset().union(*(t.axes for t in operands))
        value = self.b.elementwise(node.op, [t.value for t in operands], node.attrs, "f32",
                                   self._shape(axes))
        return Tile(value, axes, "f32")

    def _store_value(self, index: int, view: BufferView, element: str, value, axes,
                     index_map: IndexMap):
        strides, offset = view.address_map(index_map)
        store_axes = frozenset(a for a, s in enumerate(strides) if s != 0)
        if not frozenset(axes) <= store_axes:
            raise Unplannable(f"output {view.shape} varies along an axis it is not stored by")
        if self._shape(frozenset(axes)) != self._shape(store_axes):
            value = self.b.broadcast(value, element, self._shape(store_axes))
        sizes = tuple(self.plan.extents[a] if a in store_axes else 1 for a in range(self.n))
        offsets = [self.offsets[a] if a in store_axes else self.b.const(0) for a in range(self.n)]
        self.b.store(index, element, value, BufferView(sizes, tuple(strides), offset), offsets,
                     self._shape(store_axes))


# -- the schedule --------------------------------------------------------------


class AttentionSchedule(Schedule):
    kind = "attention"
    config_class = AttentionConfig
    fusion_rule = "fuse-attention"
    # Along its keys only: the key loop ends at the call's size
    # (`dynamic_loop_axis`).
    dynamic_extents = True

    def fusion_pattern(self, node, users, escapes):
        if node.op not in ("matmul", "cast"):
            return None
        try:
            pattern = find_attention([node], check_operands=False)
        except Unplannable:
            return None
        # The pattern's output is the last cast of P V inside it.
        if node.op == "matmul" and len(users) == 1 and users[0].op == "cast" and not escapes:
            return None
        return pattern.core

    def match(self, order):
        return is_attention(order)

    def fusion_refusal(self, plan):
        # Every program of one key/value head's query tiles (and, unpacked,
        # of each query head of its group) reads every key block: a
        # prologue computed on K or V inside the kernel runs once per such
        # program. The rotary embedding of a prefill's keys (sin, cos and
        # the rotation of each block) in its attention kernel made that
        # kernel three times slower than attention over stored keys (an
        # H200, the Llama-3-8B-shaped layers at 512 tokens: 66 us against
        # 21.5; benchmarks/NOTES.md); a kernel of its own computes them once.
        readers = ceil_div(plan.extents[plan.m_axis], plan.tile[plan.m_axis])
        if plan.g_axis is not None and not plan.config.pack_heads:
            readers *= plan.extents[plan.g_axis]
        if readers <= 1:
            return None
        keys_and_values = topological([plan.pattern.scores.operands[1],
                                       plan.pattern.output_mm.operands[1]])
        if any(not n.is_input and n.op not in _ADDRESSING_OPS for n in keys_and_values):
            return KEYS_ONCE
        return None

    def plan(self, outputs, order, config, kernel, target):
        return plan_attention(outputs, order, config, kernel, target)

    def dynamic_loop_axis(self, plan):
        # A cache that grows call by call: K, V and what is added to the
        # scores (a mask) hold the key count in one dim; the queries and
        # the output hold none, so the grid is the same at every size.
        if not plan.dynamic_keys:
            raise NotAtEverySize("an attention kernel takes a dynamic extent along its keys "
                                 "only; its queries, heads and head dims are static")
        for node in topological(list(plan.outputs)):
            if len(marked_dims(node)) > 1:
                raise NotAtEverySize(f"a value of shape {tuple(node.shape)} holds the dynamic "
                                     "extent in two dimensions; attention takes it along its "
                                     "keys only")
        return plan.n_axis

    def generate(self, plan, builder):
        AttentionGenerator(plan, builder).run()

    def table_key(self, plan):
        # Queries and keys per head, the heads (batch x heads), the head
        # dims of Q/K and of V, and the query heads per key/value head.
        batch = product(plan.pattern.output_mm.shape[:-2])
        return TableKey(widest_input(plan), "", {
            "heads": batch, "m": plan.extents[plan.m_axis], "n": plan.extents[plan.n_axis],
            "d": plan.extents[plan.d_axis], "e": plan.extents[plan.e_axis],
            "g": plan.knob_extents.get("g", 1)})

    def tuned_config(self, plan, table, target):
        # The keys' split is sized for this kernel's own keys and heads (the
        # flash-decoding rule of _plan_attention): an entry's count of splits
        # was chosen for its own shape. The entry of 4 x 2 heads over 512
        # keys (8 splits of one key tile) would give 1000 keys 8 splits of
        # two, where the rule gives 16 of one (H200: 5.10 us against the
        # search's 4.24 at 16; benchmarks/NOTES.md, stop 50).
        found = self.nearest_entry(plan, table)
        config = None if found is None else canonical_or_none(found[1].config, plan)
        if config is None:
            return None
        key, entry = found
        # A prefill entry's query tile was chosen against the waves of
        # programs it made on its own shape; it serves only kernels it gives
        # as many. The entry of 32 heads x 128 queries, head dim 128 (16-row
        # tiles, two waves on 132 SMs) gave 32 heads x 300 queries five:
        # 23.3 us against the heuristic's 14.2 (H200; benchmarks/NOTES.md,
        # stop 55).
        # The same holds of how full its last wave is: the entry of 20
        # heads x 1500 queries (128-query tiles, 240 programs) gave 16 x
        # 1200 two waves too, the second of 28 programs where its own had
        # 108: 43.8 us against the heuristic's 28.3.
        if config.block_m is not None and entry.config.block_m is not None and \
                not _alike_waves(_query_programs(key.features, config.block_m),
                                 _query_programs(entry.features, entry.config.block_m), target):
            return None
        # Likewise its key block was chosen against the padding it left: the
        # entry of 16 heads x 384 keys (blocks of 128, no padding) gave 300
        # keys 84 masked ones, 9.73 us against 6.55 in blocks of 64.
        if config.block_n is not None and entry.config.block_n is not None and \
                _padded_share(key.features["n"], config.block_n) > \
                _padded_share(entry.features["n"], entry.config.block_n) + _PADDING_SLACK:
            return None
        return dataclasses.replace(config, split_kv=None)

    def tiled_form(self, plan):
        if plan.splits == 1:
            return TiledForm()
        return TiledForm(results=plan.partial_shapes())

    def follow_up(self, plan, results, source):
        if plan.splits == 1:
            return list(results), []
        return combine_kernel(plan, results, f"{source.name}_combine", source.location)


def combine_kernel(plan: AttentionPlan, partials, name: str, location):
    """A kernel in graph form, built at the current insertion point, that
    combines the splits' outputs by their log-sum-exp: (its results, [it])."""
    from mlir import ir

    from kgc.dialects import kg
    from kgc.op_table import ELEMENTWISE

    output = plan.pattern.output
    f32 = ir.F32Type.get()
    (given_shape, _), _ = plan.partial_shapes()
    # The partials, contiguous, are read through a reshape of their leading
    # dimensions into the shape the result is combined in (the output's, or
    # P V's where the output merges its last dimension into others).
    combined = combined_shape(plan.pattern)
    lead = combined[:-1]
    partial_shape = lead + (plan.splits, combined[-1])
    lse_shape = lead + (plan.splits,)
    rank = len(lse_shape)

    def tensor(shape, element=f32):
        return ir.RankedTensorType.get(list(shape), element)

    out_type = tensor(output.shape, ir.Type.parse(output.element))
    with location:
        kernel = ir.Operation.create(
            "kg.kernel", results=[out_type], operands=list(partials),
            attributes={"sym_name": ir.StringAttr.get(name)}, regions=1)
        block = kernel.regions[0].blocks.append(*[v.type for v in partials])
        with ir.InsertionPoint(block):
            outs, lse = block.arguments
            if partial_shape != given_shape:
                outs = kg.reshape(tensor(partial_shape), outs)
                lse = kg.reshape(tensor(lse_shape), lse)
            row = lse_shape[:-1] + (1,)
            top = kg.reduce(tensor(row), kg.ReduceKind.max, lse, [rank - 1], keepdim=True)
            shifted = ELEMENTWISE["sub"].build(tensor(lse_shape), [lse, top])
            weight = ELEMENTWISE["exp"].build(tensor(lse_shape), [shifted])
            total = kg.reduce(tensor(row), kg.ReduceKind.sum, weight, [rank - 1], keepdim=True)
            column = kg.reshape(tensor(lse_shape + (1,)), weight)
            weighted = ELEMENTWISE["mul"].build(tensor(partial_shape), [outs, column])
            reduced = tuple(partial_shape[:-2]) + (partial_shape[-1],)
            summed = kg.reduce(tensor(reduced), kg.ReduceKind.sum, weighted, [rank - 1])
            result = ELEMENTWISE["div"].build(tensor(reduced), [summed, total])
            if output.element != "f32":
                result = ELEMENTWISE["cast"].build(tensor(reduced, out_type.element_type),
                                                   [result])
            if reduced != tuple(output.shape):
                result = kg.reshape(out_type, result)
            kg.YieldOp([result])
    return list(kernel.results), [kernel]
