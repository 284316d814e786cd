"""The matmul schedule: matmul kernels with their prologue and epilogue,
LoRA's rank-r products beside them, and split-K.

Iteration axes (batch..., m, k, n), and a rank axis after them for LoRA's
rank-r products (kgc.tiling.low_rank). Programs walk batch, m and n
(grouped along m for L2 reuse), a loop walks k. The operands of each matmul
are computed tile by tile in the loop (prologue); values over (batch, m, n)
are computed after it (epilogue). Factors of an operand that do not vary
along k, such as the 1/rms of an RMSNorm, move to the epilogue, so that a
reduction over k inside them runs beside the dot.

Its tile program is `MatmulGenerator`'s (kgc.tiling.matmul_generator). A
plan split along k (kgc.tiling.split_k) becomes a partials kernel
(`tiled_form`, `generate`) and a reduce kernel (`follow_up`).
"""

from __future__ import annotations

import dataclasses
import functools

from kgc.element_types import element_bits
from kgc.op_table import elementwise_op
from kgc.targets import Target
from kgc.tiling import low_rank, split_k
from kgc.tiling.constants import MIN_DOT_TILE
from kgc.tiling.dynamic import NotAtEverySize, reduced_dynamic_axis
from kgc.tiling.config import (DEFAULT_MIN_BYTES, SKINNY_ROWS, ConfigError, MatmulConfig,
                               default_split_k, skinny_split_k, streams_weights, weight_bytes)
from kgc.tiling.graph_model import EXTENT_HINT, Node, topological
from kgc.tiling.index_maps import IndexMap, ceil_div, next_power_of_two, product
from kgc.tiling.iteration import (TILE_LOOP, Expansion, Unplannable, axes_of,
                                  infer_maps, leaf_view, matmul_operand_maps, operand_maps)
from kgc.tiling.matmul_generator import MatmulGenerator
from kgc.tiling.matmul_plan import MatmulPlan
from kgc.tiling.plan import check_index_range, finish_plan, knob
from kgc.tiling.schedule import Schedule, canonical_or_none
from kgc.tuned_defaults import TableKey

__all__ = ["MatmulSchedule", "WAVE_ROWS", "one_wave_columns"]

_MAX_EPILOGUE_ROW = 256  # widest n that a matmul epilogue may reduce over
# k steps from which a one-wave matmul gets a fourth pipeline stage.
_LONG_K_STEPS = 64
# The k step and the narrowest n tile of a skinny product's default (see
# _plan_matmul).
_SKINNY_BLOCK_K = 128
_SKINNY_BLOCK_N = 16
# A skinny product over small weights whose operand rows are not whole
# 16-byte vectors (`_ragged_rows`): its tiles, k step and splits, where its
# k loop has at least _RAGGED_MIN_STEPS such steps.
_RAGGED_BLOCK_N = 32
_RAGGED_BLOCK_K = 64
_RAGGED_SPLITS = 8
_RAGGED_MIN_STEPS = 12
# ... and weights of at least this many bytes: the grid's smallest were 1.5
# MiB; under a MiB the second kernel's launch is a larger share of the time.
_RAGGED_MIN_BYTES = 1 << 20
# The rows of a tile kgc takes by default: a product of fewer rows is one
# row tile.
_ONE_ROW_TILE = 128
# The rows under which a product streaming its weights may take one wave of
# wide tiles (one_wave_columns); at 80 rows they lost 10 to 30% to cuBLAS.
WAVE_ROWS = 64
# The smallest k step a kernel of sibling dots (a gated MLP's two) takes
# where wgmma computes them. On an H200 with Triton 3.6, the gated MLP of
# Llama-3-8B (64 x 4096 -> 14336) at (64, 64, 16), 4 warps, 4 stages gave
# results off by up to 121 (of 3e3) in 703 of 917504 elements, and others
# on the next run; every config of the search ran right in tiled form on
# kgc's CPU executor, and its other candidates were right on the GPU
# (benchmarks/NOTES.md, "A gated MLP config computed wrong").
_SIBLING_MIN_BLOCK_K = 32
# The k steps (any tile; and tiles of at most _SMALL_TILE_SIDE a side) up
# to which a k loop that computes an operand takes at most
# _FAULTING_MAX_STAGES stages on sm_90 (see _plan_matmul).
_SHORT_STEP = 32
_SMALL_TILE_SIDE = 16
_SMALL_TILE_STEP = 64
_FAULTING_MAX_STAGES = 3


# The rule by which a matmul refuses a prologue that its programs along n
# would each compute again (Schedule.fusion_refusal), and the most programs
# along n that may repeat a costly one (`kgc.op_table`'s `costly` ops).
PROLOGUE_ONCE = "prologue-once"
_PROLOGUE_READERS = 4
# The narrowest rows tile f32 products take to fill the SMs (a tl.dot's
# least is 16; 32 keeps two m-rows of warps busy).
_F32_FILL_MIN_BLOCK_M = 32

# The rule by which a product of more rows than a skinny one refuses any
# prologue its programs along n would repeat (see `fusion_refusal`).
SKINNY_PROLOGUE = "skinny-prologue"
# The rule by which a product refuses a norm folded into it (its sum over k
# riding along the k loop) past _FOLD_MAX_K: the longest k loop a fold
# has measured faster over.
NORM_OVER_LONG_K = "norm-over-long-k"
_FOLD_MAX_K = 512


class MatmulSchedule(Schedule):
    kind = "matmul"
    config_class = MatmulConfig
    # Rows of A and C along a dynamic extent: a program axis like another,
    # once the tiles are walked in plain order (`dynamic_config`).
    dynamic_extents = True

    def match(self, order):
        return any(n.op == "matmul" for n in order)

    def dynamic_config(self, plan):
        # Grouped tile order needs the number of row tiles, split-K and
        # persistent programs a grid of their own, TMA descriptors the
        # buffer's shape: none is known before the call.
        config = plan.config
        _, k_axis, _ = plan.matmul_axes
        # Contracting over the extent, the k loop walks it to the size
        # (`dynamic_loop_axis`): it must loop at the hint too.
        whole_k = reduced_dynamic_axis(plan) == k_axis and k_axis not in plan.loop_axes
        if (config.group_m or 1) == 1 and plan.split is None and not config.tma and \
                config.num_programs is None and not whole_k:
            return None
        return dataclasses.replace(config, group_m=1, split_k=1, tma=None, num_programs=None,
                                   **({"block_k": EXTENT_HINT // 4, "num_stages": None}
                                      if whole_k else {}))

    def dynamic_loop_axis(self, plan):
        # A weight's gradient over a dynamic token count (X^T dY contracts
        # over the tokens): every program's k loop ends at the call's size,
        # and kg-pad-mask gives the dot zeros past it.
        axis = reduced_dynamic_axis(plan)
        if axis is None:
            return None
        _, k_axis, _ = plan.matmul_axes
        if axis != k_axis or axis not in plan.loop_axes or plan.split is not None:
            raise NotAtEverySize(f"iteration axis {axis}, of the dynamic extent, is reduced but "
                                 "not as the matmul's looped k axis; a matmul contracts over "
                                 "the dynamic extent only in its k loop")
        return axis

    def fusion_refusal(self, plan):
        # Every program along n computes the operand's prologue for its
        # k loop again, on a tile of at least 16 rows (a dot's least). SiLU(
        # gate) * up in front of Phi-3's down projection (1 x 1376 -> 512,
        # 32 programs) took 10.2 us on an H100 where the bare product took
        # 3.8 and the SiLU product as a kernel of its own 1.4; at 64 rows
        # 31.8 against 8.0 for the pair (benchmarks/NOTES.md, "Skinny
        # products with a computed operand"). A norm's scale (multiplies)
        # stays in a skinny product, and any prologue that at most four
        # programs repeat (a softmax over k before a 256-column product).
        _, k_axis, n_axis = plan.matmul_axes
        # A norm folded in scales the operand tile in registers at every k
        # step (its sum of squares beside the dot), where a bare product
        # streams it from shared memory to the tensor cores; a fold saves
        # one norm kernel. Over 512 k steps that saving wins at 1 to 64
        # rows (H200, norm + 512 -> 1536: 9.0 against 9.7 us apart); over
        # longer loops the fold lost every time it was measured: 4096 k at
        # 1, 16, 32, 64 and 128 rows (37.3 against 28.6 us at 1 row,
        # 35.9 / 32.0 at 16), and the check of the defaults against the
        # search (an H200): 16 x 4096 -> 6144 32.4 against 21.6 apart,
        # 16 x 4096 -> 4096 19.3 / 15.7, 3 x 1000 -> 777 12.3 / 6.3
        # (benchmarks/NOTES.md). The search still tries the fold.
        folds_norm = any(k_axis in axes for node, axes in plan.reduce_axes.items()
                         if node.op == "reduce")
        if folds_norm and plan.extents[k_axis] > _FOLD_MAX_K:
            return NORM_OVER_LONG_K
        # Past a skinny product's rows a folded norm costs more than its
        # kernel even where few programs along n repeat it: the few
        # programs each walk their rows' k once for the statistics, again
        # for the dot, and again to store what other kernels read of the
        # norm, where a norm kernel spreads those rows over the SMs. Gemma
        # 2's second norm folded into its key and value projections at 64
        # tokens (64 x 512 -> 2 x 256, 4 programs) took 26.7 us where the
        # norm's kernel and the bare products took 5.7; the forward went
        # 93.8 -> 72.7 us without folds (an H200; benchmarks/NOTES.md).
        if folds_norm and plan.knob_extents.get("m", 1) > SKINNY_ROWS:
            return SKINNY_PROLOGUE
        if ceil_div(plan.extents[n_axis], plan.tile[n_axis]) <= _PROLOGUE_READERS:
            return None
        rows = [elementwise_op(op) for op in plan.reads.prologue_ops]
        if any(row is not None and row.costly for row in rows):
            return PROLOGUE_ONCE
        # Past a skinny product's rows any prologue costs more than the
        # pass over the operand it saves: its tile goes through registers
        # each k step instead of the pipelined copies. The partitions of the
        # model suite at 64 tokens, default compile, GPU time (an H200, one
        # run; benchmarks/NOTES.md): Gemma 2 131 -> 91 us with its second
        # norm out of each projection, BERT 80 -> 60, Llama, Mistral, Qwen2,
        # Qwen3 and GPT-2 3-6% faster; at 512 tokens Llama and Gemma 2 1-2%
        # slower, GPT-2 and BERT unchanged.
        if any(row is not None for row in rows) and plan.knob_extents.get("m", 1) > SKINNY_ROWS:
            return SKINNY_PROLOGUE
        return None

    def plan(self, outputs, order, config, kernel, target):
        return _plan_matmul(outputs, order, [n for n in order if n.op == "matmul"], config, kernel,
                            target)

    # A split-K plan (kgc.tiling.split_k) is tiled as its partials kernel,
    # which the reduce kernel follows.
    def generate(self, plan, builder):
        if plan.split is None:
            MatmulGenerator(plan, builder).run()
        else:
            split_k.PartialsGenerator(plan, builder).run()

    def search_space(self, plan, element, precision, target, runs_on, plannable):
        # The element the configs are chosen for is the matmuls' operands'
        # (the widest, where they differ), as planning takes it: an FP8
        # GEMM's f32 scales are inputs of its kernel too, and would make it
        # look like an f32 matmul (16-bit seeds, f32 bytes in the split-k
        # rules).
        operands = [o.element for n in topological(plan.outputs) if n.op == "matmul"
                    for o in n.operands]
        if operands:
            element = max(operands, key=element_bits)
        space, seeds = super().search_space(plan, element, precision, target, runs_on,
                                            plannable)
        # A config whose pipeline would not fit the target's shared memory
        # would fail in Triton's compile, which costs the search a second
        # or two a config: it is not offered (nine of the 48 configs of a
        # gated MLP at effort "default" on sm_90).
        # Nor is one with more stages than the fault rule lets the kernel
        # take, which kg-tile refuses (`_faulting_stage_cap`).
        fitting = [c for c in space if _pipeline_fits(plan, c, target)
                   and not _over_stage_cap(plan, c, target)]
        seeds = [c for c in seeds if _pipeline_fits(plan, c, target)
                 and not _over_stage_cap(plan, c, target)]
        return _legal(fitting, runs_on, plannable), _legal(seeds, runs_on, plannable)

    def table_key(self, plan):
        # Its variant: what changes which config wins beyond the shape: two
        # dots sharing the k loop (a gated MLP), LoRA's rank-r products, an
        # RMSNorm's sum of squares riding along the k loop, a reduction in
        # the epilogue.
        m_axis, k_axis, _ = plan.matmul_axes
        main = _main_matmuls(plan)
        reductions = [axes for node, axes in plan.reduce_axes.items() if node.op == "reduce"]
        parts = [f"dots={len(main)}"] if len(main) > 1 else []
        if plan.dot_axes:
            parts.append("lora")
        if any(k_axis in axes for axes in reductions):
            parts.append("norm")
        if any(k_axis not in axes for axes in reductions):
            parts.append("epilogue-reduce")
        # A skinny product whose k loop computes an operand in registers
        # (SiLU(gate) * up, a norm's scale, a cast) wants other tiles than a
        # bare one: the config that streams a bare 1x1376->512 product in 4.4
        # us took 18 us with a SiLU product in front (H200), where deeper k
        # steps over narrower tiles took 3.2; the tiny Llama's one-token
        # forward went from 0.065 to 0.060 ms of GPU time with its own
        # variant. From 64 rows on, the bare entries serve such kernels
        # better than the heuristics (the same forward at 64 tokens went
        # from 0.075 to 0.089 ms without them; two runs on H200s).
        if ("norm" not in parts and plan.knob_extents.get("m", 1) <= SKINNY_ROWS
                and plan.reads.computed):
            parts.append("prologue")
        # Rows that are not whole 16-byte vectors change which tiles win as
        # much (a bare 12 x 999 -> 1500 product in 13.0 us at the aligned
        # shapes' best tiles, 6.2 at its own; H200): such a product takes no
        # aligned shape's entry.
        element = _operand_element(plan)
        if not parts and _takes_ragged_tiles(plan.knob_extents, element, True):
            parts.append("ragged")
        features = {"batch": product(plan.extents[:m_axis]), **plan.knob_extents}
        return TableKey(element, "+".join(parts), features)

    def tuned_config(self, plan, table, target):
        # The entry itself, not only its config (`Schedule.tuned_config`):
        # its shape says how many waves its tiles were chosen against.
        found = self.nearest_entry(plan, table)
        config = None if found is None else canonical_or_none(found[1].config, plan)
        if config is None:
            return None
        key, entry = found
        config = _runnable_entry(plan, _covering_small_tiles(config, plan.knob_extents), target)
        if config is None:
            return None
        if _waves(plan, config, plan.knob_extents, key.features["batch"], target) != \
                _waves(plan, entry.config, entry.features, entry.features["batch"], target):
            return None
        # The pipeline's stages must fit the target's shared memory (a
        # config measured on a kernel of one dot may not, beside two or
        # beside a prologue's own reads).
        if not _pipeline_fits(plan, config, target):
            return None
        return config

    def tiled_form(self, plan):
        return super().tiled_form(plan) if plan.split is None else split_k.partials_form(plan)

    def follow_up(self, plan, results, source):
        if plan.split is None:
            return super().follow_up(plan, results, source)
        reduced = split_k.reduce_kernel(plan, results, source)
        return list(reduced.results), [reduced]


def _covering_small_tiles(config: MatmulConfig, extents) -> MatmulConfig:
    """A table entry measured on fewer rows (or columns) than a tensor-core
    dot takes wrote its tile as the power of two covering them: 1 for a
    decode step's row. On a kernel with more of them that tile must still
    cover them, since kg-legalize-dot grows a dot tile under
    MIN_DOT_TILE only where it covers its axis (an entry of 1 row served
    to 4 rows failed the compile): up to MIN_DOT_TILE, the tile covers."""
    changes = {}
    for knob_name in ("block_m", "block_n"):
        value, extent = getattr(config, knob_name), extents.get(config.TILE_AXES[knob_name])
        if value is not None and extent is not None and value < min(extent, MIN_DOT_TILE):
            changes[knob_name] = min(extent, MIN_DOT_TILE)
    return dataclasses.replace(config, **changes) if changes else config


def one_wave_columns(m: int, extents, batch: int, element: str, target: Target) -> int | None:
    """The n tile kgc gives a product of fewer than WAVE_ROWS rows (one row
    tile per batch) that streams at least DEFAULT_MIN_BYTES of weights,
    where its tiles make one wave over the SMs, filling at least half: the
    narrower of 64 and 128 whose tiles fit in one wave; None where neither
    does, or where they fill less than half the SMs (split-K fills them
    then). Over 128-deep steps and no split, one wave streams the weights
    fastest (H200, 1 to 40 rows, weights of 8.7 to 32 MiB: 8192 x 2048 ->
    128 tiles of 64 columns, 8960 x 1536 -> 70 of 128, 4864 x 896 -> 76 of
    64 within 1% of the best of 60 configs up to 12 rows and within 9.4% at
    20 and 40, where 64-wide tiles over 64-deep steps, split in two up to
    12 rows, took 1.09x to 1.35x; 4096 -> 11008 at 8 rows: 24.8 us over 86
    tiles of 128 against 27.9 over 172 of 64; benchmarks/NOTES.md, stop
    49)."""
    if m >= WAVE_ROWS or weight_bytes(extents, element) < DEFAULT_MIN_BYTES:
        return None
    n = extents["n"]
    for width in (64, 128):
        tiles = batch * ceil_div(n, width)
        if tiles <= target.sm_count:
            return width if 2 * tiles >= target.sm_count and width < n else None
    return None


def _waves(plan: MatmulPlan, config: MatmulConfig, extents, batch: int, target: Target) -> int:
    """How many waves of programs over the target's SMs `config` makes of
    a product of `extents` (m, n) and `batch` (knobs it leaves open sized as
    kgc's plan sized them, a split left open as none). A table entry serves
    only kernels it gives as many waves as it gave its own shape: its tiles
    were chosen against that count. The entry of 16 x 4096 -> 4096 (1 x 128
    tiles of 16 x 32, one wave) gave 32 rows two waves at 16.3 us, where the
    heuristic took 13.6, and 8 x 4096 -> 11008 three at 30.9 against 27.8
    (H200, benchmarks/NOTES.md stop 48)."""
    size = functools.partial(_sized, plan, config)
    programs = batch * ceil_div(extents.get("m", 1), size("block_m")) * \
        ceil_div(extents["n"], size("block_n")) * (config.split_k or 1)
    return ceil_div(programs, target.sm_count)


def _takes_ragged_tiles(extents, element: str, bare_loop: bool) -> bool:
    """Whether a product of `extents` takes the tiles of a skinny product of
    ragged rows (see _plan_matmul): bare (no rank-r products, no sum along
    k), skinny, over weights it does not stream, with rows that are not
    whole 16-byte vectors, a k loop of at least _RAGGED_MIN_STEPS steps and
    weights of _RAGGED_MIN_BYTES or more."""
    m, n, k = extents.get("m", 1), extents["n"], extents["k"]
    return (bare_loop and m <= SKINNY_ROWS and k >= 2 * _SKINNY_BLOCK_K
            and _RAGGED_MIN_BYTES <= weight_bytes(extents, element) < DEFAULT_MIN_BYTES
            and _ragged_rows(k, n, element_bits(element))
            and ceil_div(k, _RAGGED_BLOCK_K) >= _RAGGED_MIN_STEPS)


def _ragged_rows(k: int, n: int, bits: int) -> bool:
    """Whether a row of k or of n elements of `bits` bits (the two operands'
    rows, either way they are stored) is not a whole number of 16-byte
    vectors."""
    return any(extent * bits % 128 for extent in (k, n))


def _faulting_stage_cap(target: Target, computed_operand: bool, bits: int, block_m: int,
                        block_n: int, block_k: int) -> int | None:
    """The most stages a k loop that computes a 16-bit operand may take on
    sm_90 with these tiles, or None where any number runs. Pipelined 4 deep
    over short k steps such a loop faults (Triton 3.6, an H100, "misaligned
    address", which ends the process and with it a search): the RMSNorm-
    folded 16 x 4096 -> 6144 kernel at 16 x 16 tiles and 32-deep steps, and
    Gemma 2's double-norm gated MLP (64 x 512 -> 2 x 1376) at 16 x 16 tiles
    and 64-deep steps. Both ran right with 3 stages; the decode products at
    16 x 16 tiles and 128-deep steps run right with 4. The stages are not
    the whole cause: later searches (H100) faulted on that gated MLP at
    64-column tiles with 2 stages, on the RMSNorm-folded kernel at 16-row
    tiles with 4 stages beyond this rule, and on TMA configs of a
    double-norm product with 3 (benchmarks/NOTES.md, stop 35). The search
    checks in worker processes (kgc.search.isolation), where such a
    candidate is a rejected row."""
    if not (target.wgmma and computed_operand and bits == 16):
        return None
    short_step = block_k <= (_SMALL_TILE_STEP if _small_tile(block_m, block_n) else _SHORT_STEP)
    return _FAULTING_MAX_STAGES if short_step else None


def _small_tile(block_m: int, block_n: int) -> bool:
    return block_m <= _SMALL_TILE_SIDE and block_n <= _SMALL_TILE_SIDE


def _pipeline_fits(plan: MatmulPlan, config: MatmulConfig, target: Target) -> bool:
    """Whether the k loop of `plan`'s kernel with the tiles and stages of
    `config` fits `target`'s shared memory (`LoopReads.pipeline_bytes`);
    knobs `config` leaves open are sized as kgc's plan sized them."""
    size = functools.partial(_sized, plan, config)
    m_axis, k_axis, n_axis = plan.matmul_axes
    tile = list(plan.tile)
    tile[m_axis], tile[k_axis], tile[n_axis] = (size("block_m"), size("block_k"),
                                                size("block_n"))
    return _plan_reads(plan, tile).pipeline_bytes(size("num_stages"), target) <= \
        target.max_shared_memory_per_block


def _runnable_entry(plan: MatmulPlan, config: MatmulConfig,
                    target: Target) -> MatmulConfig | None:
    """A table entry measured with more stages than `_faulting_stage_cap`
    now lets `plan`'s kernel take (the table predates the fault): its tiles
    with the stages that run, or, for a skinny product, None (the
    heuristics). Its 32-deep steps over 64-column tiles gave the one-token
    forwards 8 to 32 programs where the skinny heuristics give 32 to 128:
    with the entries set aside (and prologue-once landed), Gemma 2's
    one-token forward went from 0.88x to 1.20x torch.compile's GPU time and
    GPT-2's from 0.72x to 0.99x (H200, 7f11666 and 33f3e4b against ec5ddfd).
    At 64 rows the entries' 16-row tiles give four times the programs of the
    heuristics' 64-row ones: GPT-2's 64-token forward took 0.95x Inductor's
    time with them (H100, aa0739a) and 0.63x without (H200, ec5ddfd). Knobs
    the entry leaves open are sized as kgc's plan sized them."""
    if not _over_stage_cap(plan, config, target):
        return config
    if plan.knob_extents.get("m", 1) <= SKINNY_ROWS:
        return None
    return dataclasses.replace(config, num_stages=_FAULTING_MAX_STAGES)


def _over_stage_cap(plan: MatmulPlan, config: MatmulConfig, target: Target) -> bool:
    """Whether `config` asks `plan`'s kernel for more stages than
    `_faulting_stage_cap` lets it take; knobs it leaves open are sized as
    kgc's plan sized them."""
    if config.num_stages is None:
        return False
    size = functools.partial(_sized, plan, config)
    k_extent = plan.extents[plan.matmul_axes[1]]
    cap = _faulting_stage_cap(target, bool(plan.reads.computed) and size("block_k") < k_extent,
                              element_bits(_operand_element(plan)), size("block_m"),
                              size("block_n"), size("block_k"))
    return cap is not None and config.num_stages > cap


def _main_matmuls(plan: MatmulPlan) -> list[Node]:
    """The kernel's main dots (not LoRA's side matmuls or rank-r products)."""
    return [mm for mm in plan.expansions if mm not in plan.dot_axes]


def _operand_element(plan: MatmulPlan) -> str:
    """The widest element type of the main dots' operands."""
    return max((operand.element for mm in _main_matmuls(plan) for operand in mm.operands),
               key=element_bits)


def _sized(plan: MatmulPlan, config: MatmulConfig, knob: str) -> int:
    """`config`'s `knob`, or where it leaves it open, the size kgc's plan gave."""
    value = getattr(config, knob)
    return value if value is not None else getattr(plan.config, knob)


def _plan_reads(plan: MatmulPlan, tile) -> LoopReads:
    """`loop_reads` of `plan`'s kernel with the tile sizes `tile`."""
    return loop_reads(list(plan.expansions), plan.expansions, plan.maps, plan.reduce_axes,
                      plan.matmul_axes, list(tile))


def _legal(configs: list[MatmulConfig], runs_on: Target | None, plannable) -> list[MatmulConfig]:
    """`configs` without those the kernel cannot take: `tma` where an
    operand's layout rules TMA out (kgc.tiling.tma) or `runs_on` has no
    tensor memory accelerator; `split_k` where its reductions over k read
    one another, or k is one step; k steps below the least the kernel's
    dots take on the target (`_SIBLING_MIN_BLOCK_K`)."""
    if any(c.tma for c in configs) and not (
            (runs_on is None or runs_on.tma) and plannable(MatmulConfig(tma=True)) is not None):
        configs = [c for c in configs if not c.tma]
    if any(c.split_k for c in configs):
        split = plannable(MatmulConfig(split_k=2))
        if split is None or split.split is None:
            configs = [c for c in configs if not c.split_k]
    short = [c for c in configs if c.block_k is not None and c.block_k < _SIBLING_MIN_BLOCK_K]
    if short and plannable(MatmulConfig(block_k=short[0].block_k)) is None and \
            plannable(MatmulConfig(block_k=_SIBLING_MIN_BLOCK_K)) is not None:
        configs = [c for c in configs if c not in short]
    return configs


def _plan_matmul(outputs, order, matmuls, config: MatmulConfig, kernel,
                 target: Target) -> MatmulPlan:
    check_index_range(order)
    # Main matmuls share the kernel's output shape and k; side matmuls and
    # rank-r products beside them are LoRA's (kgc.tiling.low_rank).
    matmuls, side_matmuls, products = low_rank.classify(matmuls, order, outputs)
    first = matmuls[0]
    k_extent = first.operands[0].shape[-1]
    batch = list(first.shape[:-2])
    m_extent, n_extent = first.shape[-2], first.shape[-1]
    extents = batch + [m_extent, k_extent, n_extent]
    nb = len(batch)
    axes = (nb, nb + 1, nb + 2)
    knob_extents = {"m": m_extent, "n": n_extent, "k": k_extent}
    config = config.canonical(knob_extents, kernel)
    if target.wgmma and len(matmuls) > 1 and config.block_k is not None and \
            config.block_k < _SIBLING_MIN_BLOCK_K:
        raise Unplannable(
            f"block_k = {config.block_k} with {len(matmuls)} dots per k step is refused on "
            f"sm_{target.sm}: Triton 3.6 computed such a kernel wrong, differently from run to "
            f"run (a race below kgc's IR); take block_k >= {_SIBLING_MIN_BLOCK_K}")
    m_axis, k_axis, n_axis = axes
    rank = low_rank.shared_rank(products)
    if rank is not None:
        extents.append(rank)
    c_map = IndexMap.select(extents, list(range(nb)) + [m_axis, n_axis])
    seeds = {mm: c_map for mm in matmuls}
    reduce_axes = {mm: (k_axis,) for mm in matmuls}
    dot_axes = low_rank.place(side_matmuls, products, c_map, axes, seeds, reduce_axes)

    # Maps of everything, to find what the epilogue reduces over.
    maps = infer_maps(order, seeds, reduce_axes, axes)
    epilogue_reduces_n = any(
        n_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")
    epilogue_reduces_m = any(
        m_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")

    element = max((mm.operands[0].element for mm in matmuls), key=element_bits)
    bits = element_bits(element)
    # A skinny product (a decode step's rows) over weights too small for
    # kgc to split along k (not `streams_weights`) reads them and little else:
    # deeper k steps halve the loop's trips, and n tiles narrow until the
    # programs cover the SMs (H200, 1 row, 2048->512 with its bias and
    # residual, f32 operands: 16x128 steps over 32 programs 2.8 us, 64x32
    # over 8 programs 16.3; of the ten one-row products of GPT-2's and
    # Phi-3's layers that the search sped up most, it gave seven 128-deep
    # steps over 16 or 32 columns, one 64-deep steps over 16, and two a
    # split along k). Larger weights fill the SMs by split-K instead.
    skinny = (m_extent <= SKINNY_ROWS and k_extent >= 2 * _SKINNY_BLOCK_K
              and not streams_weights(knob_extents, element))
    bare_loop = not side_matmuls and not any(
        k_axis in reduce_axes.get(node, ()) for node in order if node.op == "reduce")
    # A bare skinny product whose rows (of either operand) are not whole
    # 16-byte vectors reads its operands in narrower loads: more programs
    # hide their latency. H200, 3, 5 and 12 rows against 1000 x 777, 1500 x
    # 999 and 2500 x 1333 (n x k): 32-column tiles, 64-deep steps and 8
    # splits came within 6% of the best of 60 configs on all nine, where the
    # skinny default (16 columns, 128-deep steps, no split) took 1.18x to
    # 2.09x; on the aligned widths of stop 49's grid (896 x 896, 1024 x
    # 512, 4864 x 896) that default stayed best and these tiles lost 14 to
    # 42% (benchmarks/NOTES.md, stop 50).
    ragged = _takes_ragged_tiles(knob_extents, element, bare_loop)
    # More rows than a decode step's, still one row tile, over weights under
    # the streaming size: n tiles narrow as a skinny product's do, over
    # 64-deep steps (H200, 20 to 80 rows against 896 -> 896 and 512 ->
    # 1024: 16-wide tiles within 4% of the best of 60 configs, where 64-wide
    # ones took 1.16x to 1.59x; 128-deep steps lost 16% at 80 rows).
    few_rows = (SKINNY_ROWS < m_extent < _ONE_ROW_TILE and bits <= 16
                and k_extent >= 2 * _SKINNY_BLOCK_N
                and weight_bytes(knob_extents, element) < DEFAULT_MIN_BYTES)
    # A product of few rows over weights it streams, its tiles filling one
    # wave over the SMs: see one_wave_columns.
    wave_n = (one_wave_columns(m_extent, knob_extents, product(batch), element, target)
              if len(matmuls) == 1 and bare_loop and not epilogue_reduces_n
              and config.block_n is None else None)
    # A k step of 128 bytes of each operand row: 8-bit floats step 128 deep
    # (H200, 4096^3 FP8 GEMM at 128 x 128 tiles: 64-deep 170.9 us precise
    # and 123.7 fast-accumulating, 128-deep 134.3 and 103.8, against the
    # best of 80 configs' 128.3 and 98.7; benchmarks/NOTES.md, stop 50).
    default_k = (_RAGGED_BLOCK_K if ragged
                 else _SKINNY_BLOCK_K if skinny or wave_n is not None
                 else 128 if bits <= 8 else 64 if bits <= 16 else 32)
    if epilogue_reduces_n:
        if n_extent > _MAX_EPILOGUE_ROW:
            raise Unplannable(f"the epilogue reduces over n = {n_extent}, wider than "
                              f"{_MAX_EPILOGUE_ROW} columns fit in one tile")
        block_n = n_extent
        if config.block_n is not None and config.block_n < n_extent:
            raise Unplannable("the epilogue reduces over n: block_n must cover all of n")
        default_m = 64
    else:
        block_n = None
        default_m = _ONE_ROW_TILE
    # LoRA's one kernel over more rows than one wave's (X A rides along the
    # k loop of X W): 64-row tiles over 128-deep steps. H200, rank 16, 128
    # rows: the search chose them over 2048 -> 2048 (9.6 us against 14.1 at
    # kgc's 128-row tiles) and 4096 -> 6144 (24.0, where the library's X W
    # with two kernels beside it took 26.9; benchmarks/NOTES.md, stop 50).
    low_rank_rows = bool(side_matmuls) and m_extent > WAVE_ROWS and bits == 16
    if low_rank_rows and not epilogue_reduces_n:
        default_m = WAVE_ROWS
        default_k = _SKINNY_BLOCK_K
    if epilogue_reduces_m and m_extent > _MAX_EPILOGUE_ROW:
        raise Unplannable(f"the epilogue reduces over m = {m_extent}, more rows than fit a tile")
    block_m = knob(config.block_m, m_extent if epilogue_reduces_m else
                    (m_extent if m_extent <= default_m else default_m))
    if block_n is None:
        default_n = n_extent if n_extent <= 128 else 128
        # Few row tiles give few programs: narrower n tiles keep the SMs busy
        # (down to 64, where narrower tiles would read the other operand too
        # finely; down to 16 for a skinny product, whose other operand is a
        # tile of a few rows).
        # With full 128-row tiles (prefill), one wave of 128x128 programs
        # that fills at least half the SMs beats two waves of 128x64 ones
        # (H200: 512x14336x4096 in 95 us against 113, 512x4096x4096 in 32
        # against 34): they narrow only below half.
        programs = product(batch) * ceil_div(m_extent, block_m)
        fill = target.sm_count if block_m < default_m else (target.sm_count + 1) // 2
        # (A side matmul of rank r rides along an n tile of r columns or more.)
        narrowest = max([_SKINNY_BLOCK_N] + [next_power_of_two(side.shape[-1])
                                             for side in side_matmuls]) \
            if skinny or few_rows else 64
        while (config.block_n is None and default_n > narrowest and default_n < n_extent
               and programs * ceil_div(n_extent, default_n) < fill):
            default_n //= 2
        if ragged and n_extent > _RAGGED_BLOCK_N:
            default_n = _RAGGED_BLOCK_N
        block_n = knob(config.block_n, wave_n or default_n)
    # f32 operands take no tensor cores: a program's dot costs several times
    # an f16 one's, so idle SMs cost more than rereading the other operand.
    # Where n tiles cannot narrow further and the programs still leave SMs
    # idle (a head's softmax(S) V in f32, batched over 8 heads, 512 rows:
    # 32 programs of 128 rows), rows tiles narrow instead; each row of A,
    # and a prologue computing it, is still read by one program along m.
    if config.block_m is None and bits == 32 and not epilogue_reduces_m and not skinny:
        while (block_m > _F32_FILL_MIN_BLOCK_M and product(batch) * ceil_div(m_extent, block_m)
               * ceil_div(n_extent, block_n) < target.sm_count):
            block_m = next_power_of_two(block_m) // 2
    block_k = knob(config.block_k, min(default_k, k_extent))
    group_m = knob(config.group_m, 8)
    tiles = product(batch) * ceil_div(m_extent, block_m) * ceil_div(n_extent, block_n)
    tile = [1] * nb + [block_m, block_k, block_n] + ([] if rank is None else [rank])
    expansions = {mm: _expand_matmul(mm, maps, dot_axes.get(mm, axes), reduce_axes)
                  for mm in matmuls + side_matmuls + list(products)}
    reads = loop_reads(list(expansions), expansions, maps, reduce_axes, axes, tile)
    # split_k left to kgc (None): split a kernel whose tiles leave SMs idle,
    # unless it is persistent or reads through TMA (a choice for big tiles).
    chosen = config.split_k is None
    if chosen:
        if config.num_programs is not None or config.tma or block_k >= k_extent or \
                wave_n is not None:
            splits = 1
        elif ragged:
            splits = _RAGGED_SPLITS
        elif low_rank_rows:
            # The search's 128 x 4096 -> 6144 kernel: 96 tiles unsplit.
            splits = 1
        elif skinny and bare_loop:
            # A skinny product under the split-K threshold splits where its
            # k loop is long (not LoRA's, whose rank-r product rides along
            # the whole loop, nor a norm's, whose sum does).
            splits = skinny_split_k(tiles, k_extent, block_k, target.sm_count)
        else:
            splits = default_split_k(tiles, product(batch), m_extent, n_extent, k_extent,
                                     block_k, bits, target.sm_count, bare=bare_loop)
    else:
        splits = split_k.split_count(config.split_k, k_extent, block_k)
    program_axes = tuple(a for a in list(range(nb)) + [m_axis, n_axis]
                         if ceil_div(extents[a], tile[a]) > 1)
    loop_axes = (k_axis,) if block_k < k_extent else ()
    if side_matmuls and not loop_axes:
        raise Unplannable("a side matmul of rank-r products needs a k loop to ride along")
    # Every program computes X A anew for its n tile: kept no wider than the
    # tile, its dot and its reads of A stay a fraction of the main dot's.
    for side in side_matmuls:
        if side.shape[-1] > block_n:
            raise Unplannable(f"a side matmul of rank {side.shape[-1]} needs an n tile of as "
                              f"many columns; block_n is {block_n}")
    # Measured on H100/H200 (benchmarks/sweep_tiles.py): 4 warps up to one
    # 128x128 accumulator, 8 beyond (two dots share a kernel in a gated
    # MLP); a deeper pipeline for small tiles.
    warps_default = 8 if len(matmuls) * block_m * block_n >= 128 * 256 else 4
    if rank is not None:
        _check_rank_tiles(products, rank, block_m, block_n, target)
    # One wave of programs with a long k loop (a prefill's 128x128 tiles,
    # one program per SM): a fourth stage hides more of each load than a
    # second program per SM would (H200: 512x14336x4096 95 us with 4, 116
    # with 3); several waves keep 3, which lets two programs share an SM.
    one_long_wave = (tiles * splits <= target.sm_count
                     and ceil_div(k_extent, block_k * splits) >= _LONG_K_STEPS
                     and 4 * (reads.direct + reads.computed)
                     <= target.max_shared_memory_per_block)
    stages_default = (4 if block_m * block_n <= 128 * 64 or one_long_wave else 3) \
        if loop_axes else 1
    # Triton's pipeliner buffers every tile the k loop reads: a prologue
    # that reads several inputs per step (the rotary tables beside the
    # activation, operands stored in f32) fits fewer stages in shared memory
    # than the dot's operands alone would.
    while (stages_default > 1 and reads.pipeline_bytes(stages_default, target)
           > target.max_shared_memory_per_block):
        stages_default -= 1
    cap = _faulting_stage_cap(target, bool(reads.computed and loop_axes), bits,
                              block_m, block_n, block_k)
    if cap is not None:
        if config.num_stages is not None and config.num_stages > cap:
            over = f" of {block_m} x {block_n} tiles" if _small_tile(block_m, block_n) else ""
            raise Unplannable(
                f"num_stages = {config.num_stages} over {block_k}-deep k steps{over} of an "
                f"operand the k loop computes is refused on sm_{target.sm}: Triton 3.6 faulted "
                f"on such a kernel (misaligned address); take num_stages <= {cap} or deeper "
                f"k steps")
        stages_default = min(stages_default, cap)
    # The loop flags apply to the k loop; without one they change nothing.
    flags = {name: getattr(config, name) if loop_axes else None
             for name in MatmulConfig.LOOP_FLAGS}
    resolved = MatmulConfig(num_warps=knob(config.num_warps, warps_default),
                            num_programs=config.num_programs,
                            num_stages=knob(config.num_stages, stages_default),
                            block_m=block_m, block_n=block_n, block_k=block_k, group_m=group_m,
                            # Off is the default: written only when on.
                            tma=True if config.tma else None,
                            **flags, **({"split_k": splits} if splits > 1 else {}))
    plan = finish_plan("matmul", outputs, order, extents, tile, program_axes, loop_axes, seeds,
                       reduce_axes, resolved, knob_extents, kernel, contraction_axes=axes,
                       plan_type=MatmulPlan, matmul_axes=axes, expansions=expansions,
                       dot_axes=dict(dot_axes), reads=reads)
    if splits > 1:
        try:
            split_k.attach(plan, splits, kernel)
        except (Unplannable, ConfigError):
            if not chosen:
                raise
            # kgc's own split, where this kernel cannot be split: none.
            plan.split = None
            plan.config = dataclasses.replace(plan.config, split_k=None)
    k_loop = {f"tt.{name}": True for name, value in flags.items() if value}
    if config.num_programs is not None and k_loop.pop("tt.flatten", None):
        # Triton flattens a loop with the loops nested in it: in a persistent
        # program that is the tile loop, so that the next tile's loads start
        # during this tile's epilogue.
        plan.loop_attributes[TILE_LOOP] = {"tt.flatten": True}
    if k_loop:
        plan.loop_attributes[k_axis] = k_loop
    return plan


@dataclasses.dataclass(frozen=True)
class LoopReads:
    """What a program reads from memory per step of its k loop, in bytes,
    tiles padded to powers of two as kg-pad-mask pads them: `direct`, the
    tiles a dot takes as they are loaded (a kernel input, or reshapes of
    one); `computed`, the input tiles a prologue computes a dot operand from
    (an activation at two offsets and the rotary tables for a rotated
    query, an f32 operand the dot takes in bf16); `operands`, the operand
    tiles so computed, which the dot reads from shared memory."""

    direct: int
    computed: int
    operands: int
    # The ops of the prologue that computes the operands (SiLU(gate) * up:
    # silu, mul), empty where the dot takes its tiles as loaded.
    prologue_ops: frozenset[str] = frozenset()

    def pipeline_bytes(self, stages: int, target: Target) -> int:
        """The shared memory of a k loop of `stages` stages, as Triton 3.6
        pipelines it. On sm_90 a buffer per stage of each tile wgmma reads
        straight from memory (a gated MLP's backward, four 128x64 bf16
        tiles, takes 4 x 64 KiB at 4 stages), one fewer of each tile a
        prologue computes on in registers, plus the computed operands (the
        rotated query times f32 keys, 72 KiB of reads per step at 64x64
        tiles, takes 3 x 72 + 16 KiB at 4 stages). Below sm_90 one fewer
        of every tile (an sm_86 gated pair of 128x128 dots over 3 stages
        takes 2 x 48 KiB)."""
        if stages <= 1:
            return self.direct + self.computed + self.operands
        if target.wgmma:
            return stages * self.direct + (stages - 1) * self.computed + self.operands
        return (stages - 1) * (self.direct + self.computed) + self.operands


def loop_reads(matmuls: list[Node], expansions: dict, maps: dict, reduce_axes: dict, axes,
               tile: list[int]) -> LoopReads:
    """The tiles the k loop of a kernel reads for the dots of `matmuls`
    (`axes`: the kernel's (m, k, n); `expansions`: the cores the dots
    multiply), each input and index map once however many values share it."""
    k_axis = axes[1]

    def tile_bytes(node: Node, index_map: IndexMap) -> int:
        axes_read = index_map.depends_on()
        if k_axis not in axes_read:
            return 0
        elements = product([next_power_of_two(tile[axis]) for axis in sorted(axes_read)])
        return elements * element_bits(node.element) // 8

    direct: dict[tuple, int] = {}
    computed: dict[tuple, int] = {}
    prologue_ops: set[str] = set()
    operands = 0
    seen: set[tuple] = set()
    stack: list[tuple[Node, IndexMap]] = []
    for mm in matmuls:
        if mm not in maps:
            continue
        expansion = expansions.get(mm)
        cores = (expansion.core_a, expansion.core_b) if expansion else tuple(mm.operands)
        for core, core_map in zip(cores, operand_maps(mm, maps[mm], reduce_axes, axes)):
            if core_map is None:
                continue
            leaf = leaf_view(core)
            if leaf is not None:
                direct[(id(leaf[0]), core_map.rows, core_map.offsets)] = tile_bytes(core, core_map)
            else:
                operands += tile_bytes(core, core_map)
                stack.append((core, core_map))
    while stack:
        node, index_map = stack.pop()
        key = (id(node), index_map)
        if key in seen:
            continue
        seen.add(key)
        leaf = leaf_view(node)
        if leaf is not None:
            computed[(id(leaf[0]), index_map.rows, index_map.offsets)] = \
                tile_bytes(node, index_map)
            continue
        if node.op == "matmul":
            continue  # a dot of its own, counted from `matmuls`
        if k_axis in index_map.depends_on():  # computed for every k step's elements
            prologue_ops.add(node.op)
        try:
            derived = operand_maps(node, index_map, reduce_axes, axes)
        except Unplannable:
            continue
        stack.extend((operand, operand_map) for operand, operand_map in zip(node.operands, derived)
                     if operand_map is not None)
    # A tile read both ways is loaded once, for the dot.
    computed_only = sum(size for key, size in computed.items() if key not in direct)
    return LoopReads(sum(direct.values()), computed_only, operands, frozenset(prologue_ops))


def _check_rank_tiles(products: dict, rank: int, block_m: int, block_n: int,
                      target: Target) -> None:
    """A rank-r product is one dot over the whole rank after the k loop: its
    [block_m, r] and [r, block_n] operand tiles sit in shared memory at once.
    A rank that makes them larger than a block may hold (the key and value
    projections' backward, 1024 wide beside a 4096-wide query's, looks like
    LoRA's products) is no rank-r product: those matmuls are kernels of
    their own."""
    bits = max(element_bits(operand.element) for mm in products for operand in mm.operands)
    rows, columns, depth = (next_power_of_two(size) for size in (block_m, block_n, rank))
    needed = (rows + columns) * depth * bits // 8
    if needed > target.max_shared_memory_per_block:
        raise Unplannable(f"rank-{rank} products need {needed} B of shared memory for their "
                          f"{rows}x{depth} and {depth}x{columns} operand tiles; {target.name} "
                          f"has {target.max_shared_memory_per_block} B per block")


def _expand_matmul(mm: Node, maps: dict, axes, reduce_axes: dict) -> Expansion:
    """Moves the factors of each operand that do not vary along k, and hold
    a reduction over k, out of the dot (the 1/rms of an RMSNorm before the
    matmul). Pulling a factor out of a cast skips one rounding."""
    a, b = mm.operands
    a_map, b_map = matmul_operand_maps(mm, maps[mm], axes)
    splitter = _FactorSplitter(axes, reduce_axes)
    core_a = splitter.split(a, a_map)
    core_b = splitter.split(b, b_map)
    return Expansion(core_a, core_b, splitter.factors, splitter.divisors)


class _FactorSplitter:
    def __init__(self, matmul_axes, reduce_axes: dict):
        self.matmul_axes = matmul_axes
        self.k_axis = matmul_axes[1]
        self.reduce_axes = reduce_axes
        self.factors: list[Node] = []
        self.divisors: list[Node] = []

    def split(self, node: Node, index_map: IndexMap) -> Node:
        """`node` without the factors it gives up."""
        if node.op == "cast":
            inner_map = index_map.broadcast_from(node.shape, node.operands[0].shape)
            inner = self.split(node.operands[0], inner_map)
            if inner is node.operands[0]:
                return node
            return dataclasses.replace(node, operands=[inner], value=None)
        if node.op not in ("mul", "div"):
            return node
        lhs, rhs = node.operands
        lhs_map = index_map.broadcast_from(node.shape, lhs.shape)
        rhs_map = index_map.broadcast_from(node.shape, rhs.shape)
        if self._movable(rhs, rhs_map):
            (self.factors if node.op == "mul" else self.divisors).append(rhs)
            return self.split(lhs, lhs_map)
        if node.op == "mul" and self._movable(lhs, lhs_map):
            self.factors.append(lhs)
            return self.split(rhs, rhs_map)
        new_lhs = self.split(lhs, lhs_map)
        if new_lhs is lhs:
            return node
        return dataclasses.replace(node, operands=[new_lhs, rhs], value=None)

    def _movable(self, node: Node, index_map: IndexMap) -> bool:
        """True when `node` does not vary along k but holds a reduction."""
        if not any(n.op == "reduce" for n in topological([node])):
            return False
        try:
            return self.k_axis not in axes_of(node, index_map, self.reduce_axes, self.matmul_axes)
        except Unplannable:
            return False
