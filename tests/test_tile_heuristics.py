"""What kg-tile picks when a kernel carries no tile knobs: the one place
that pins its heuristics. The lit tests of the later passes give every
kernel its knobs, so a change of heuristics shows here and only here (and
in kg-tile's own lit test): update the table when a change is meant.

The kernels are those of the lit tests of kg-legalize-dot, kg-pad-mask and
convert-kg-to-ttir, with their knobs taken off."""

from __future__ import annotations

import pathlib
import re

import pytest
from mlir import ir

import kgc  # noqa: F401  (registers the kg dialect)
from kgc.parsing import parse_text
from kgc.pipeline import Pipeline
from kgc.tiling.kernel_ops import kernel_name, kernels_in, knob
from kgc.tiling.config import CONFIG_CLASSES

LIT_TESTS = pathlib.Path(__file__).resolve().parent.parent / "lit_tests"
_CONFIG_ATTRIBUTE = re.compile(r"\bconfig = \{[^}]*\}(, )?")


def _kernels_without_knobs() -> dict[str, str]:
    """Each graph-form kernel of the lit files, by file:kernel, in a
    function of its own part of the file, with its knobs taken off."""
    parts = {}
    for name in ("kg-legalize-dot", "kg-pad-mask", "convert-kg-to-ttir"):
        for part in (LIT_TESTS / f"{name}.mlir").read_text().split("// -----"):
            match = re.search(r"kg\.kernel @(\w+)\(.*", part)
            if match is None or "grid =" in match.group(0):
                continue  # already tiled
            text = _CONFIG_ATTRIBUTE.sub("", part).replace(" attributes {}", "")
            parts[f"{name}:{match.group(1)}"] = text
    return parts


KERNELS = _kernels_without_knobs()

# file:kernel -> (kind, the knobs kg-tile writes, grid)
EXPECTED = {
    # A skinny product over small weights: 128-deep k steps, n tiles of 16
    # columns (19 programs of 300 columns).
    "kg-legalize-dot:matvec_0": ("matmul", dict(block_m=1, block_n=16, block_k=128, group_m=1,
                                                num_warps=4, num_stages=4), (19, 1, 1)),
    "kg-legalize-dot:matvec_f32_0": ("matmul", dict(block_m=1, block_n=16, block_k=128,
                                                    group_m=1, num_warps=4, num_stages=4),
                                     (19, 1, 1)),
    "kg-legalize-dot:matvec_stored_along_k_0": ("matmul", dict(block_m=1, block_n=128, block_k=16,
                                                             group_m=1, num_warps=4,
                                                             num_stages=1), (1, 1, 1)),
    # f32 products narrow their rows until the programs fill the SMs, down
    # to 32 (here 2 programs instead of 1).
    "kg-legalize-dot:outer_0": ("matmul", dict(block_m=32, block_n=24, block_k=1, group_m=1,
                                               num_warps=4, num_stages=1), (2, 1, 1)),
    "kg-legalize-dot:small_m_0": ("matmul", dict(block_m=8, block_n=48, block_k=64, group_m=1,
                                                 num_warps=4, num_stages=1), (1, 1, 1)),
    "kg-legalize-dot:ieee_0": ("matmul", dict(block_m=32, block_n=64, block_k=32, group_m=1,
                                              num_warps=4, num_stages=4), (2, 1, 1)),
    # 8-bit floats step 128 deep: here the whole k of 128, so no loop.
    "kg-legalize-dot:fp8_0": ("matmul", dict(block_m=64, block_n=64, block_k=128, group_m=1,
                                             num_warps=4, num_stages=1), (1, 1, 1)),
    "kg-legalize-dot:fp8_fast_accum_0": ("matmul", dict(block_m=64, block_n=64, block_k=128,
                                                        group_m=1, num_warps=4, num_stages=1),
                                         (1, 1, 1)),
    "kg-legalize-dot:legal_0": ("matmul", dict(block_m=64, block_n=64, block_k=64, group_m=1,
                                               num_warps=4, num_stages=4), (1, 1, 1)),
    "kg-legalize-dot:too_small_0": ("matmul", dict(block_m=100, block_n=64, block_k=64, group_m=1,
                                                   num_warps=4, num_stages=1), (1, 1, 1)),
    # Rows of a dynamic extent, planned at its hint of 256 rows (the grid's
    # 2 programs are the plan's; a launch computes them from the size).
    "kg-legalize-dot:dynamic_rows_0": ("matmul", dict(block_m=128, block_n=32, block_k=64,
                                                      group_m=1, num_warps=4, num_stages=1),
                                       (2, 1, 1)),
    "kg-legalize-dot:too_small_dynamic_0": ("matmul", dict(block_m=128, block_n=48, block_k=64,
                                                           group_m=1, num_warps=4,
                                                           num_stages=1), (2, 1, 1)),
    "kg-pad-mask:softmax_0": ("reduction", dict(block_x=1, block_r=1000, num_warps=4,
                                                num_stages=1), (17, 1, 1)),
    # A dynamic extent is planned as at EXTENT_HINT (256) rows, with the
    # tile's rows a program whatever the SMs. Static elementwise kernels of
    # fewer than 4 programs per SM take one row a program.
    "kg-pad-mask:dynamic_rows_0": ("pointwise", dict(block_m=4, block_n=1024, num_warps=8,
                                                     num_stages=1), (64, 1, 1)),
    "kg-pad-mask:exact_0": ("pointwise", dict(block_m=1, block_n=1024, num_warps=4,
                                              num_stages=1), (64, 1, 1)),
    "kg-pad-mask:mm_0": ("matmul", dict(block_m=33, block_n=40, block_k=64, group_m=1,
                                        num_warps=4, num_stages=4), (1, 1, 1)),
    "kg-pad-mask:concat_0": ("pointwise", dict(block_m=17, block_n=103, num_warps=8,
                                               num_stages=1), (1, 1, 1)),
    "convert-kg-to-ttir:pointwise_0": ("pointwise", dict(block_m=1, block_n=1000, num_warps=4,
                                                         num_stages=1), (17, 1, 1)),
    "convert-kg-to-ttir:row_sum_0": ("reduction", dict(block_x=1, block_r=1000, num_warps=4,
                                                       num_stages=1), (17, 1, 1)),
    "convert-kg-to-ttir:matmul_0": ("matmul", dict(block_m=32, block_n=64, block_k=32, group_m=1,
                                                   num_warps=4, num_stages=4), (2, 1, 1)),
    "convert-kg-to-ttir:fp8_precise_0": ("matmul", dict(block_m=64, block_n=64, block_k=128,
                                                        group_m=1, num_warps=4, num_stages=4),
                                         (1, 1, 1)),
    "convert-kg-to-ttir:fp8_fast_accum_0": ("matmul", dict(block_m=64, block_n=64, block_k=128,
                                                           group_m=1, num_warps=4, num_stages=4),
                                            (1, 1, 1)),
    "convert-kg-to-ttir:fp8_mixed_fast_accum_0": ("matmul", dict(block_m=64, block_n=64,
                                                                 block_k=128, group_m=1,
                                                                 num_warps=4, num_stages=4),
                                                  (1, 1, 1)),
    "convert-kg-to-ttir:math_0": ("pointwise", dict(block_n=16, num_warps=1, num_stages=1),
                                  (1, 1, 1)),
    "convert-kg-to-ttir:loop_flags_0": ("matmul", dict(block_m=64, block_n=64, block_k=64,
                                                       group_m=1, num_warps=4, num_stages=4),
                                        (1, 1, 1)),
    "kg-legalize-dot:attention_rows_0": ("attention", dict(block_m=3, block_n=64, split_kv=1,
                                                            num_warps=4, num_stages=2), (2, 1, 1)),
    "kg-legalize-dot:attention_one_key_0": ("attention", dict(block_m=3, block_n=1, split_kv=1,
                                                               num_warps=4, num_stages=2),
                                            (2, 1, 1)),
    "kg-legalize-dot:attention_matvec_0": ("attention", dict(block_m=1, block_n=100, split_kv=1,
                                                              num_warps=4, num_stages=2),
                                           (2, 1, 1)),
    "convert-kg-to-ttir:attention_rows_0": ("attention", dict(block_m=3, block_n=64, split_kv=1,
                                                               num_warps=4, num_stages=2),
                                            (2, 1, 1)),
    "kg-legalize-dot:ws_0": ("matmul", dict(block_m=64, block_n=64, block_k=64, group_m=1,
                                            num_warps=4, num_stages=4), (1, 1, 1)),
    "kg-legalize-dot:ws_tma_0": ("matmul", dict(block_m=64, block_n=64, block_k=64, group_m=1,
                                                num_warps=4, num_stages=4), (1, 1, 1)),
    "kg-pad-mask:masked_max_0": ("reduction", dict(block_x=1, block_r=1000, num_warps=4,
                                                   num_stages=1), (17, 1, 1)),
    "kg-pad-mask:integer_max_0": ("reduction", dict(block_x=1, block_r=1000, num_warps=4,
                                                    num_stages=1), (17, 1, 1)),
    "kg-pad-mask:integer_sum_0": ("reduction", dict(block_x=1, block_r=1000, num_warps=4,
                                                    num_stages=1), (17, 1, 1)),
    # Keys of a growing cache: the splits sized for 4096 keys (2 heads, 32
    # splits of one 128-key tile: 64 programs), the grid static.
    "kg-pad-mask:decode_dynamic_keys_0": ("attention", dict(block_m=1, block_n=128, split_kv=32,
                                                            num_warps=4, num_stages=2),
                                          (64, 1, 1)),
    # k = 100 under the 128-deep step of 8-bit floats: one step of all of k.
    "kg-pad-mask:fp8_fill_0": ("matmul", dict(block_m=16, block_n=16, block_k=100, group_m=1,
                                              num_warps=4, num_stages=1), (1, 1, 1)),
    "convert-kg-to-ttir:causal_softmax_0": ("reduction", dict(block_x=1, block_r=17, num_warps=1,
                                                              num_stages=1), (17, 1, 1)),
    "convert-kg-to-ttir:integers_0": ("pointwise", dict(block_n=1000, num_warps=4, num_stages=1),
                                      (1, 1, 1)),
    "convert-kg-to-ttir:casts_and_logic_0": ("pointwise", dict(block_n=1000, num_warps=4,
                                                               num_stages=1), (1, 1, 1)),
}


def test_every_lit_kernel_is_in_the_table():
    assert sorted(KERNELS) == sorted(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_kg_tile_picks(key):
    kind, knobs, grid = EXPECTED[key]
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = parse_text(KERNELS[key], key, context)
        Pipeline.parse("builtin.module(kg-tile)").run(module)
        [kernel] = [k for k in kernels_in(module) if kernel_name(k) == key.split(":")[1]]
        attributes = {name: kernel.attributes[name] for name in kernel.attributes}
        assert ir.StringAttr(attributes["kind"]).value == kind
        picked = {name: value for name in CONFIG_CLASSES[kind].knobs()
                  if (value := knob(kernel, name)) is not None and not isinstance(value, bool)}
        assert picked == knobs
        assert tuple(ir.DenseI64ArrayAttr(attributes["grid"])) == grid


def _matmul_knobs(m: int, k: int, n: int, target: int = 90, gated: bool = False) -> dict:
    import kgc
    from kgc.pipeline.compiler import compile_module

    g = kgc.Graph("prefill")
    x, w = g.input("x", (m, k), "f16"), g.input("w", (k, n), "f16")
    y = g.matmul(x, w)
    if gated:
        y = g.silu(y) * g.matmul(x, g.input("u", (k, n), "f16"))
    g.output(y)
    context = ir.Context()
    module = g.build(context)
    # Triton's heuristics: a bare matmul this large would otherwise be a
    # library call (kgc.tiling.library).
    with context, pytest.MonkeyPatch.context() as patch:
        patch.setenv("KGC_LIBRARY_KERNELS", "0")
        compile_module(module, emit="kg", target=target)
    kernel = kernels_in(module)[0]  # the matmul (or its partials)
    return {name: knob(kernel, name) for name in ("block_m", "block_n", "num_stages")}


@pytest.mark.parametrize("m,k,n,knobs", [
    # One wave of 128x128 programs over a long k loop: 4 stages, no
    # narrowing to two waves of 128x64.
    (512, 14336, 4096, dict(block_m=128, block_n=128, num_stages=4)),
    (512, 4096, 4096, dict(block_m=128, block_n=128, num_stages=4)),
    # Several waves: 3 stages, so that two programs can share an SM.
    (512, 4096, 6144, dict(block_m=128, block_n=128, num_stages=3)),
    (512, 4096, 32000, dict(block_m=128, block_n=128, num_stages=3)),
    # Under half a wave, n tiles still narrow to fill the GPU.
    (256, 4096, 4096, dict(block_m=128, block_n=64, num_stages=4)),
])
def test_prefill_matmuls_fill_one_wave_with_deep_pipelines(m, k, n, knobs):
    assert _matmul_knobs(m, k, n) == knobs


def test_a_fourth_stage_only_where_the_target_s_shared_memory_holds_it():
    # A gated pair of 128x128 dots (split in two along k to fill the GPU)
    # over 4 stages needs 192 KiB: sm_90 has 227 KiB per block, sm_86 99.
    assert _matmul_knobs(512, 14336, 2048, 90, gated=True)["num_stages"] == 4
    assert _matmul_knobs(512, 14336, 2048, 86, gated=True)["num_stages"] == 3


def _softmax_pv_knobs(dtype: str, target: int = 90) -> dict:
    """The knobs of softmax(S) V, batched over 8 heads of 512 rows and 64
    columns (BERT's attention as sdpa's math path gives it on a GPU)."""
    import kgc
    from kgc.pipeline.compiler import compile_module

    g = kgc.Graph("pv")
    scores = g.input("s", (8, 512, 512), dtype)
    values = g.input("v", (8, 512, 64), dtype)
    g.output(g.matmul(g.softmax(scores, -1), values))
    context = ir.Context()
    module = g.build(context)
    with context:
        compile_module(module, emit="kg", target=target)
    (kernel,) = [k for k in kernels_in(module) if knob(k, "block_m") is not None]
    return {name: knob(kernel, name) for name in ("block_m", "block_n")}


def test_an_f32_product_of_few_programs_narrows_its_rows_to_fill_the_sms():
    # 8 x 4 programs of 128 rows leave most of the SMs idle; with f32 dots
    # (no tensor cores) rows of 32 give 128 programs, on sm_90's 132 SMs as
    # on sm_80's 108 (rows of 64 would give 64 programs).
    assert _softmax_pv_knobs("f32") == {"block_m": 32, "block_n": 64}
    assert _softmax_pv_knobs("f32", target=80) == {"block_m": 32, "block_n": 64}
    # f16 dots keep their 128-row tiles (measured at 64 rows: narrower tiles
    # lost there, benchmarks/NOTES.md).
    assert _softmax_pv_knobs("f16") == {"block_m": 128, "block_n": 64}


def _softmax_knobs(rows: int, columns: int) -> dict:
    import kgc
    from kgc.pipeline.compiler import compile_module

    g = kgc.Graph("softmax_rows")
    g.output(g.softmax(g.input("x", (rows, columns), "f16"), dim=-1))
    context = ir.Context()
    module = g.build(context)
    with context:
        compile_module(module, emit="kg")
    (kernel,) = kernels_in(module)
    return {name: knob(kernel, name) for name in ("block_r", "num_warps", "num_stages")}


@pytest.mark.parametrize("rows,columns,knobs", [
    # A row past one tile is walked in 2048-wide steps, once per reduction:
    # 16 warps keep twice the loads of 8 in flight.
    (1000, 4097, dict(block_r=2048, num_warps=16, num_stages=2)),
    (3, 32000, dict(block_r=2048, num_warps=16, num_stages=2)),
    # A whole row is loaded once: the tile's own warps.
    (1000, 4096, dict(block_r=4096, num_warps=8, num_stages=1)),
    (17, 1000, dict(block_r=1000, num_warps=4, num_stages=1)),
])
def test_a_looped_row_takes_twice_the_warps_of_a_whole_one(rows, columns, knobs):
    assert _softmax_knobs(rows, columns) == knobs


def _product_plan(m: int, k: int, n: int, sm: int = 90, element: str = "f16"):
    """kg-tile's plan of a bare m x k -> n product on sm_<sm>, no table."""
    from kgc.targets import table_record
    from kgc.tiling.graph_model import Node
    from kgc.tiling.registry import plan_group

    a = Node("input", [], (m, k), element, {}, input_index=0)
    b = Node("input", [], (k, n), element, {}, input_index=1)
    return plan_group([Node("matmul", [a, b], (m, n), element, {"precision": None})],
                      target=table_record(sm))


def _tiles(plan) -> tuple:
    config = plan.config
    return plan.schedule, config.block_n, config.block_k, config.split_k


@pytest.mark.parametrize("m,k,n,sm,expected", [
    # Weights streamed by a few rows in one wave of 64 or 128 columns, over
    # 128-deep steps and no split: 128 tiles of 64, 86 of 128 (64 would make
    # 172, past one wave).
    (1, 2048, 8192, 90, ("matmul", 64, 128, None)),
    (8, 4096, 11008, 90, ("matmul", 128, 128, None)),
    # 108 SMs take 128 tiles in two waves: 64 of 128 columns instead.
    (1, 2048, 8192, 80, ("matmul", 128, 128, None)),
    # 64 tiles of 64 fill under half of 132 SMs: split-K fills them.
    (1, 4096, 4096, 90, ("matmul", 64, 64, 4)),
    # 224 tiles of 128 are more than one wave: the tiles of before.
    (1, 4096, 28672, 90, ("matmul", 128, 64, None)),
    # 40 rows stream in one wave too; with too few tiles for one, or from
    # 64 rows on, cuBLAS.
    (40, 2048, 8192, 90, ("matmul", 64, 128, None)),
    (40, 8192, 2048, 90, ("library_matmul", None, None, None)),
    (80, 2048, 8192, 90, ("library_matmul", None, None, None)),
    # Weights under 8 MiB, one row tile of more rows than a decode step's:
    # n tiles of 16 columns, 64-deep steps.
    (40, 896, 896, 90, ("matmul", 16, 64, None)),
])
def test_products_of_few_rows_stream_their_weights_in_one_wave(m, k, n, sm, expected):
    plan = _product_plan(m, k, n, sm)
    if plan.schedule == "library_matmul":
        assert expected == ("library_matmul", None, None, None)
        return
    assert _tiles(plan) == expected


def test_one_wave_tiles_are_no_choice_of_cublas_when_the_library_is_off():
    from kgc.tiling.library import library_kernels

    with library_kernels(False):
        assert _tiles(_product_plan(80, 2048, 8192))[0] == "matmul"


@pytest.mark.parametrize("m,k,n,expected", [
    # Rows of 1000 or 999 elements (2000, 1998 bytes) or weights of 777 or
    # 1500 columns: not whole 16-byte vectors. 32-column tiles, 64-deep
    # steps, 8 splits.
    (3, 1000, 777, ("matmul", 32, 64, 8)),
    (12, 999, 1500, ("matmul", 32, 64, 8)),
    (1, 1333, 2500, ("matmul", 32, 64, 8)),
    # Aligned rows keep the skinny tiles: 16 columns, 128-deep steps.
    (3, 1024, 768, ("matmul", 16, 128, None)),
    (12, 896, 896, ("matmul", 16, 128, None)),
    # Ragged, but a k loop of 11 steps of 64: unmeasured, the skinny tiles.
    (3, 700, 777, ("matmul", 16, 128, None)),
    # Ragged, but more rows than a decode step's: the few-rows tiles.
    (40, 1000, 777, ("matmul", 16, 64, None)),
    # Ragged, but 0.6 MB of weights: unmeasured, the skinny tiles.
    (1, 1000, 300, ("matmul", 16, 128, None)),
])
def test_skinny_products_of_ragged_rows_split_narrow_steps(m, k, n, expected):
    assert _tiles(_product_plan(m, k, n)) == expected


def test_a_ragged_skinny_product_takes_no_aligned_shape_s_table_entry():
    from kgc.tiling.matmul import MatmulSchedule

    ragged = MatmulSchedule().table_key(_product_plan(3, 1000, 777))
    aligned = MatmulSchedule().table_key(_product_plan(3, 1024, 768))
    assert ragged.variant == "ragged" and aligned.variant == ""


def _weight_gradient_plan(shape: tuple[int, ...], sm: int = 90, element: str = "bf16",
                          dims: list[int] | None = None):
    """kg-tile's plan of a norm weight's gradient over `shape` on sm_<sm>:
    every axis but the last summed (the tokens; or `dims`), the last kept."""
    from kgc.targets import table_record
    from kgc.tiling.graph_model import Node
    from kgc.tiling.registry import plan_group

    dy = Node("input", [], shape, element, {}, input_index=0)
    x = Node("input", [], shape, element, {}, input_index=1)
    product = Node("mul", [dy, x], shape, element, {})
    dims = list(range(len(shape) - 1)) if dims is None else dims
    kept = tuple(extent for axis, extent in enumerate(shape) if axis not in dims)
    summed = Node("reduce", [product], kept, element,
                  {"kind": "sum", "dims": dims, "keepdim": False})
    return plan_group([summed], target=table_record(sm))


@pytest.mark.parametrize("shape,sm,block_x,block_r,programs", [
    # Many rows summed: a band of columns a program (8 bf16 columns of 512
    # give 64 programs; 16 of 4096 give 256, one each on 132 SMs and more),
    # the rows in steps that keep the tile at 4096 elements.
    ((1024, 512), 90, 8, 512, 64),
    ((512, 4096), 90, 16, 256, 256),
    ((4, 256, 512), 90, 8, 256, 64),
    ((1000, 777), 90, 8, 512, 98),
    # 108 SMs: 32 columns of 4096 give 128 programs, over one each.
    ((512, 4096), 80, 32, 128, 128),
    # 17 rows: never under 8 columns, though 125 programs leave SMs idle.
    ((17, 1000), 90, 8, 17, 125),
])
def test_a_reduction_across_rows_takes_a_band_of_columns(shape, sm, block_x, block_r, programs):
    plan = _weight_gradient_plan(shape, sm)
    assert (plan.config.block_x, plan.config.block_r, plan.num_programs()) == \
        (block_x, block_r, programs)


def test_few_rows_summed_keep_the_rows_default():
    # Two key heads' gradients summed (grouped-query attention): 2 rows a
    # column, so the row default takes all 64 columns, past any band.
    plan = _weight_gradient_plan((4, 4, 2, 256, 64), dims=[2])
    assert (plan.config.block_x, plan.config.block_r, plan.num_programs()) == (64, 2, 4096)


def test_a_row_reduction_takes_no_band():
    from kgc.targets import table_record
    from kgc.tiling.graph_model import Node
    from kgc.tiling.registry import plan_group

    x = Node("input", [], (1024, 512), "bf16", {}, input_index=0)
    summed = Node("reduce", [x], (1024,), "bf16", {"kind": "sum", "dims": [1], "keepdim": False})
    plan = plan_group([summed], target=table_record(90))
    assert (plan.config.block_x, plan.config.block_r) == (1, 512)


def test_the_search_tries_short_row_steps_only_for_reductions_across_rows():
    from kgc.targets import table_record
    from kgc.tiling.config import ReductionConfig
    from kgc.tiling.graph_model import Node
    from kgc.tiling.registry import plan_group, schedules

    schedule = schedules()["reduction"]
    target = table_record(90)

    def space(plan):
        configs, _ = schedule.search_space(plan, "bf16", None, target, target, lambda c: plan)
        return configs

    across = space(_weight_gradient_plan((1024, 512)))
    # The best of a grid of bands on an H200 (benchmarks/column_reductions.py).
    best = ReductionConfig(block_x=8, block_r=128, num_warps=16, num_stages=2)
    assert best.canonical({"x": 512, "r": 1024}) in across
    x = Node("input", [], (1024, 512), "bf16", {}, input_index=0)
    along = space(plan_group([Node("reduce", [x], (1024,), "bf16",
                                   {"kind": "sum", "dims": [1], "keepdim": False})],
                             target=target))
    assert along and min(c.block_r for c in along) >= 256
