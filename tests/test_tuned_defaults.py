"""The tuned-defaults table: its format, the nearest-shape lookup, each
schedule's use of it in the default compile (and its fall back to the
heuristics), the switch that turns it off, and the held-out shapes that the
table's acceptance is checked on."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess

import pytest
import torch
from mlir import ir

import kgc
from kgc.execution import run_tiled
from kgc.bench.tune_defaults import (GraphFile, Shape, corpus, default_kernels,
                                     entries_from_report, portable, read_graphs, read_shapes)
from kgc.passes.tile import plan_kernel
from kgc.pipeline.compiler import compile_module
from kgc.targets import table_record
from kgc.tiling.config import MatmulConfig, ReductionConfig
from kgc.tiling.graph_model import Node
from kgc.tiling.kernel_ops import config_attribute, kernels_in
from kgc.tiling.registry import plan_group, schedules
from kgc.tuned_defaults import (ENVIRONMENT, MAX_LOG2_DISTANCE, Entry, TableKey, TunedTable,
                                TunedTableError, load_table, packaged_table, parse_table,
                                resolve)
from tests.cases import tiled
from tests.tools import console_script

HELD_OUT = pathlib.Path(__file__).with_name("tuned_defaults_held_out.json")
SM90 = table_record(90)
# Not what kgc's heuristics choose for the matmuls below (64x64 tiles with
# 64-deep k steps, 4 warps, 4 stages): a compile that took this config read
# the table.
TABLE_MATMUL = MatmulConfig(block_m=32, block_n=32, block_k=32, group_m=1, num_warps=2,
                            num_stages=3)


def _entry(m, n, k, config=TABLE_MATMUL, element="f16", variant="", kind="matmul"):
    return Entry(kind, element, variant, {"batch": 1, "m": m, "n": n, "k": k}, config,
                 10.0, 12.0, f"matmul {m}x{n}x{k}")


def _table(*entries, target="sm_90") -> TunedTable:
    return TunedTable(target, "NVIDIA H100 80GB HBM3", "3.6.0", "0123abc",
                      "2026-11-26T06:00:00+00:00", tuple(entries))


def _write(folder: pathlib.Path, table: TunedTable, name: str | None = None) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{table.target}.json")
    path.write_text(table.to_json())
    return path


def _input(shape, element="f16", index=0):
    return Node("input", [], tuple(shape), element, {}, input_index=index)


def _matmul(m, k, n, element="f16"):
    a, b = _input((m, k), element, 0), _input((k, n), element, 1)
    return [Node("matmul", [a, b], (m, n), element, {"precision": None})]


def _key(m, n, k, element="f16", variant=""):
    return TableKey(element, variant, {"batch": 1, "m": m, "n": n, "k": k})


# -- the lookup ---------------------------------------------------------------------


def test_nearest_is_the_closest_shape_in_log_space():
    small = _entry(16, 4096, 4096, dataclasses.replace(TABLE_MATMUL, num_warps=4))
    large = _entry(512, 4096, 4096, dataclasses.replace(TABLE_MATMUL, num_warps=8))
    table = _table(small, large)
    # 64 is 2 doublings from 16 and 3 from 512; 300 is nearer 512.
    assert table.nearest("matmul", _key(64, 4096, 4096)) is small
    assert table.nearest("matmul", _key(300, 4096, 4096)) is large
    assert table.nearest("matmul", _key(16, 4096, 4096)) is small
    # Every feature counts: n four times smaller moves 512 rows closer.
    assert table.nearest("matmul", _key(90, 4096, 4096)) is small
    assert table.nearest("matmul", _key(200, 4096, 4096)) is large


def test_nearest_respects_kind_element_variant_and_features():
    table = _table(_entry(16, 4096, 4096))
    assert table.nearest("matmul", _key(16, 4096, 4096)) is not None
    assert table.nearest("matmul", _key(16, 4096, 4096, element="bf16")) is None
    assert table.nearest("matmul", _key(16, 4096, 4096, variant="norm")) is None
    assert table.nearest("attention", _key(16, 4096, 4096)) is None
    assert table.nearest("matmul", TableKey("f16", "", {"m": 16, "n": 4096, "k": 4096})) is None


def test_nearest_ignores_shapes_too_far_away():
    table = _table(_entry(16, 4096, 4096))
    assert MAX_LOG2_DISTANCE == 3.0
    assert table.nearest("matmul", _key(128, 4096, 4096)) is not None  # 3 doublings
    assert table.nearest("matmul", _key(256, 4096, 4096)) is None  # 4


# -- the schedules' use of it ---------------------------------------------------------


def test_the_matmul_schedule_takes_the_nearest_entrys_config():
    outputs = _matmul(17, 1000, 777)
    heuristic = plan_group(outputs, target=SM90).config
    assert heuristic.block_n != TABLE_MATMUL.block_n  # else the test shows nothing
    tuned = plan_group(outputs, target=SM90, table=_table(_entry(16, 777, 1000))).config
    # Canonical for this kernel: a 32-row tile covers the 17 rows.
    assert tuned == TABLE_MATMUL.canonical({"m": 17, "n": 777, "k": 1000})
    assert tuned.block_m == 17


def test_a_table_of_other_shapes_element_or_kind_leaves_the_heuristics():
    outputs = _matmul(17, 1000, 777)
    heuristic = plan_group(outputs, target=SM90).config
    for table in (_table(), _table(_entry(16, 777, 1000, element="bf16")),
                  _table(_entry(16, 777, 1000, variant="norm")),
                  _table(_entry(4096, 777, 1000))):
        assert plan_group(outputs, target=SM90, table=table).config == heuristic


def test_a_bare_product_calls_the_library_where_its_nearest_entry_is_a_library_call():
    from kgc.tiling.library import KIND as LIBRARY, LibraryMatmulConfig

    outputs = _matmul(16, 4096, 6144)
    assert plan_group(outputs, target=SM90).kind == "matmul"  # kgc's rule: Triton below 128 rows
    library = _entry(16, 6144, 4096, LibraryMatmulConfig(library=True), kind=LIBRARY)
    assert plan_group(outputs, target=SM90, table=_table(library)).kind == LIBRARY
    # 24 rows of the same weight: the same entry is the nearest.
    assert plan_group(_matmul(24, 4096, 6144), target=SM90, table=_table(library)).kind == LIBRARY
    # Past one doubling the library entry says nothing (8 rows of a weight
    # twice as wide: 1.3 away).
    assert plan_group(_matmul(8, 4096, 11008), target=SM90,
                      table=_table(library)).kind == "matmul"
    # A Triton entry nearer than the library's, or as near, keeps Triton.
    triton = _entry(16, 4096, 4096)
    assert plan_group(_matmul(16, 4096, 4096), target=SM90,
                      table=_table(library, triton)).kind == "matmul"
    narrow = _entry(4, 4096, 4096, LibraryMatmulConfig(library=True), kind=LIBRARY)
    assert plan_group(_matmul(8, 4096, 4096), target=SM90,
                      table=_table(narrow, triton)).kind == "matmul"
    assert plan_group(_matmul(8, 4096, 4096), target=SM90, table=_table(narrow)).kind == LIBRARY
    # So do a kernel given Triton knobs, kgc's library choice turned off, a
    # product that is not bare, and a table of another element type.
    assert plan_group(outputs, MatmulConfig(num_warps=8), target=SM90,
                      table=_table(library)).kind == "matmul"
    from kgc.tiling.library import library_kernels

    with library_kernels(False):
        assert plan_group(outputs, target=SM90, table=_table(library)).kind == "matmul"
    (product,) = outputs
    scaled = Node("mul", [product, product], product.shape, "f16", {})
    assert plan_group([scaled], target=SM90, table=_table(library)).kind == "matmul"
    assert plan_group(_matmul(16, 4096, 6144, "bf16"), target=SM90,
                      table=_table(library)).kind == "matmul"


def test_kg_tile_compiles_a_bare_product_to_the_library_call_a_table_names(tmp_path,
                                                                           monkeypatch):
    from kgc.tiling.library import KIND as LIBRARY, LibraryMatmulConfig

    def kinds():
        module = _graph(m=16, k=4096, n=6144).build()
        with module.context:
            compile_module(module, emit="kg")
            return [kernel.attributes["kind"].value for kernel in kernels_in(module.operation)]

    library = _entry(16, 6144, 4096, LibraryMatmulConfig(library=True), kind=LIBRARY)
    monkeypatch.setenv(ENVIRONMENT, str(_write(tmp_path, _table(library))))
    assert kinds() == [LIBRARY]
    monkeypatch.setenv(ENVIRONMENT, "off")
    assert LIBRARY not in kinds()  # Triton's split product


def test_a_matmul_entry_serves_only_kernels_it_gives_as_many_waves_as_its_own_shape():
    # 16 x 4096 -> 4096 in 16 x 32 tiles: 128 programs, one wave on 132 SMs.
    narrow = dataclasses.replace(TABLE_MATMUL, block_m=16, block_n=32, block_k=128)
    table = _table(_entry(16, 4096, 4096, narrow))
    for m, k, n in ((12, 4096, 4096), (16, 3000, 4096)):
        assert plan_group(_matmul(m, k, n), target=SM90, table=table).config.block_n == 32
    # Two waves at 32 rows, three at 8 rows of 11008 columns: the heuristics.
    for m, k, n in ((32, 4096, 4096), (8, 4096, 11008)):
        heuristic = plan_group(_matmul(m, k, n), target=SM90).config
        assert plan_group(_matmul(m, k, n), target=SM90, table=table).config == heuristic


def test_given_knobs_are_never_mixed_with_the_table():
    outputs = _matmul(17, 1000, 777)
    given = MatmulConfig(num_warps=8)
    tuned = plan_group(outputs, given, target=SM90, table=_table(_entry(16, 777, 1000)))
    assert tuned.config == plan_group(outputs, given, target=SM90).config
    assert tuned.config.num_warps == 8 and tuned.config.block_n != TABLE_MATMUL.block_n


def test_an_entry_this_kernel_cannot_take_falls_back_to_the_heuristics():
    # f16 rows of 1000 elements are 2000 bytes apart: TMA cannot read them
    # (its strides are multiples of 16 bytes), so the generator refuses the
    # table's tma; kgc's heuristics plan the kernel instead of failing it.
    outputs = _matmul(17, 1000, 777)
    heuristic = plan_group(outputs, target=SM90).config
    tma = _table(_entry(16, 777, 1000, dataclasses.replace(TABLE_MATMUL, tma=True)))
    assert plan_group(outputs, target=SM90, table=tma).config == heuristic
    # A pipeline deeper than the target's shared memory holds.
    deep = MatmulConfig(block_m=128, block_n=256, block_k=128, group_m=1, num_warps=8,
                        num_stages=8)
    table = _table(_entry(16, 777, 1000, deep))
    assert schedules()["matmul"].tuned_config(plan_group(outputs, target=SM90), table,
                                              SM90) is None
    assert plan_group(outputs, target=SM90, table=table).config == heuristic


def _projection_with_bias_and_residual(m: int) -> kgc.Graph:
    """x W + bias + residual with W stored (k, n): GPT-2's Conv1D."""
    graph = kgc.Graph(f"conv1d_{m}")
    x, w = graph.input("x", (m, 512), "f16"), graph.input("w", (512, 512), "f16")
    bias, residual = graph.input("bias", (512,), "f16"), graph.input("residual", (m, 512), "f16")
    graph.output(graph.add(graph.add(graph.matmul(x, w), bias), residual))
    return graph


def test_a_tile_under_a_dots_least_size_still_covers_its_axis_where_the_entry_is_reused():
    # An entry measured at one row writes its row tile as 1; served to 4 or
    # 12 rows it covers them (a dot grows it to its least size, 16), not 1
    # row of 4, which kg-legalize-dot cannot grow: the compile failed. Its
    # 4 columns, under a dot's least size, become 16.
    entry = MatmulConfig(block_m=1, block_n=4, block_k=128, group_m=1, num_warps=4,
                         num_stages=4)
    for m, (block_m, block_n) in ((1, (1, 16)), (4, (4, 16)), (12, (12, 16))):
        config = plan_group(_matmul(m, 512, 512), target=SM90,
                            table=_table(_entry(1, 512, 512, entry))).config
        assert (config.block_m, config.block_n, config.block_k) == (block_m, block_n, 128)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 17])
def test_the_default_compile_of_a_few_rows_takes_the_shipped_table(m, monkeypatch):
    # The shipped table's one-row entries served 2 to 15 rows a row tile of
    # 1 that kg-legalize-dot refused; every one now compiles and computes
    # x W + bias + residual.
    monkeypatch.setenv(ENVIRONMENT, "on")
    graph = _projection_with_bias_and_residual(m)
    module = tiled(graph)
    generator = torch.Generator().manual_seed(m)
    inputs = [torch.randn(t.shape, generator=generator).to(torch.float16) for t in graph.inputs]
    x, w, bias, residual = (t.double() for t in inputs)
    torch.testing.assert_close(run_tiled(module, None, *inputs).double(),
                               x @ w + bias + residual, atol=0.08, rtol=0.02)


def _silu_product_matmul(m, k, n):
    """SiLU(gate) * up times W: the product's A operand computed in the k
    loop (Phi-3's down projection)."""
    gate, up = _input((m, k), "f16", 0), _input((m, k), "f16", 1)
    w = _input((k, n), "f16", 2)
    silu = Node("silu", [gate], (m, k), "f16", {})
    a = Node("mul", [silu, up], (m, k), "f16", {})
    return [Node("matmul", [a, w], (m, n), "f16", {"precision": None})]


@pytest.mark.parametrize("m,variant", [(1, "prologue"), (16, "prologue"), (64, "")])
def test_a_skinny_product_with_a_prologue_is_a_variant_of_its_own(m, variant):
    outputs = _silu_product_matmul(m, 1376, 512)
    plan = plan_group(outputs, target=SM90)
    assert schedules()["matmul"].table_key(plan) == _key(m, 512, 1376, variant=variant)
    # A bare product of the same shape stays the plain variant.
    bare = plan_group(_matmul(m, 1376, 512), target=SM90)
    assert schedules()["matmul"].table_key(bare) == _key(m, 512, 1376)
    # So a skinny one takes no bare entry (its heuristics instead), a wider one does.
    tuned = plan_group(outputs, target=SM90, table=_table(_entry(m, 512, 1376))).config
    assert (tuned == plan.config) == (variant == "prologue")


@pytest.mark.parametrize("m,k,n,splits", [(1, 2048, 512, 4), (16, 2048, 512, 4),
                                           (1, 2048, 1024, 4), (1, 1376, 512, None),
                                           (1, 512, 512, None), (64, 2048, 512, None)])
def test_a_bare_skinny_product_splits_in_four_where_its_k_loop_is_long(m, k, n, splits):
    # 16 steps of 128 or more over tiles that leave SMs idle: 4 splits of 4
    # steps (GPT-2's c_proj, 2048 -> 512); 11 steps or fewer, none.
    assert plan_group(_matmul(m, k, n), target=SM90).config.split_k == splits


def test_a_skinny_product_over_small_weights_streams_them_in_deep_steps_over_narrow_tiles():
    # 1 x 1376 -> 512 (1.4 MB of weights, under the split-K threshold): 16
    # columns a program (32 programs), 128-deep k steps.
    config = plan_group(_matmul(1, 1376, 512), target=SM90).config
    assert (config.block_n, config.block_k, config.split_k) == (16, 128, None)
    # Weights of 8 MiB or more split along k instead, over 64-column tiles.
    large = plan_group(_matmul(1, 4096, 4096), target=SM90).config
    assert (large.block_n, large.block_k) == (64, 64) and large.split_k > 1
    # From 17 rows on, while the rows are one tile, the tiles narrow the
    # same over 64-deep steps.
    wide = plan_group(_matmul(64, 1376, 512), target=SM90).config
    assert (wide.block_n, wide.block_k, wide.split_k) == (16, 64, None)
    # A full row tile (a Triton one: 128 rows are cuBLAS's otherwise) keeps
    # 64 columns and more.
    from kgc.tiling.library import library_kernels

    with library_kernels(False):
        assert plan_group(_matmul(128, 1376, 512), target=SM90).config.block_n >= 64


def test_a_reduction_looks_up_its_rows_row_length_and_reductions():
    x = _input((1000, 4096), "f16")
    squares = Node("mul", [x, x], (1000, 4096), "f16", {})
    total = Node("reduce", [squares], (1000,), "f16", {"dims": [1], "kind": "sum",
                                                         "keepdim": False})
    plan = plan_group([total], target=SM90)
    key = schedules()["reduction"].table_key(plan)
    assert key == TableKey("f16", "reductions=1", {"rows": 1000, "row": 4096})
    config = ReductionConfig(block_x=2, block_r=4096, num_warps=16, num_stages=1)
    table = _table(Entry("reduction", "f16", "reductions=1", {"rows": 512, "row": 4096},
                         config, 5.0, 6.0))
    assert plan_group([total], target=SM90, table=table).config == config
    assert plan.config != config


def _sum_of_squares(rows, row):
    x = _input((rows, row), "f16")
    squares = Node("mul", [x, x], (rows, row), "f16", {})
    return [Node("reduce", [squares], (rows,), "f16", {"dims": [1], "kind": "sum",
                                                       "keepdim": False})]


def test_a_whole_row_entry_keeps_a_longer_row_whole_with_the_heuristics_tile():
    # Measured at 16 x 512 with the row in one tile: at 16 x 4096 the row
    # stays in one tile (4096, not a loop in steps of 512), and the entry's
    # rows per program, measured at another row length, are not taken.
    whole_512 = ReductionConfig(block_x=4, block_r=512, num_warps=2, num_stages=1)
    table = _table(Entry("reduction", "f16", "reductions=1", {"rows": 16, "row": 512},
                         whole_512, 1.5, 1.7))
    config = plan_group(_sum_of_squares(16, 4096), target=SM90, table=table).config
    heuristic = plan_group(_sum_of_squares(16, 4096), target=SM90).config
    assert config.block_r == heuristic.block_r == 4096
    assert (config.block_x, config.num_warps) == (heuristic.block_x, 2)
    # At its own row length the entry is taken whole.
    assert plan_group(_sum_of_squares(16, 512), target=SM90, table=table).config == whole_512


def test_a_row_walked_one_way_takes_no_entry_measured_the_other_way():
    looped = ReductionConfig(block_x=1, block_r=1024, num_warps=16, num_stages=2)
    table = _table(Entry("reduction", "f16", "reductions=1", {"rows": 64, "row": 8192},
                         looped, 5.0, 6.0))
    # A 2048-column row the heuristics take whole is not looped by an entry
    # of a looped 8192-column row; an 8000-column looped row takes it.
    short = plan_group(_sum_of_squares(64, 2048), target=SM90, table=table).config
    assert short == plan_group(_sum_of_squares(64, 2048), target=SM90).config
    assert plan_group(_sum_of_squares(64, 8000), target=SM90, table=table).config == looped


def test_the_builders_kernels_are_keyed_as_the_compile_looks_them_up():
    (gated,) = default_kernels(Shape.of("gated-mlp", m=8, n=1376, k=512), 90)
    _, key, kind, extents = gated
    assert kind == "matmul" and key.variant == "dots=2" and extents == {"m": 8, "n": 1376,
                                                                          "k": 512}
    (norm,) = default_kernels(Shape.of("rmsnorm-matmul", m=3, n=33, k=64), 90)
    assert norm[1] == _key(3, 33, 64, variant="norm")


def test_a_graph_files_kernels_are_keyed_like_the_shape_it_holds(tmp_path):
    # The same RMSNorm + matmul as a graph file (as a model's captured
    # partition comes) and as a corpus shape: the same kernel, the same key.
    path = tmp_path / "norm.mlir"
    path.write_text(Shape.of("rmsnorm-matmul", m=3, n=33, k=64).build().to_mlir())
    (graph,) = read_graphs([str(path)])
    assert graph == GraphFile(str(path)) and graph.name == "graph norm.mlir"
    (from_file,) = default_kernels(graph, 90)
    (from_shape,) = default_kernels(Shape.of("rmsnorm-matmul", m=3, n=33, k=64), 90)
    assert from_file[1:] == from_shape[1:] and from_file[1] == _key(3, 33, 64, variant="norm")


def test_a_bad_graph_file_is_an_error_naming_its_line_before_any_measuring(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text("func.func @f(%x: tensor<4xf16>) -> tensor<4xf16> {\n"
                    "  %y = kg.exp %x : (tensor<4xf16>) -> tensor<5xf16>\n"
                    "  return %y : tensor<5xf16>\n}\n")
    for action in (("build", "--out", str(tmp_path / "t.json")), ("check", "--workloads", "")):
        done = _kgc("tune-defaults", *action, "--graphs", str(path))
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert f"{path}:2:" in done.stderr, done.stderr
    done = _kgc("tune-defaults", "build", "--out", str(tmp_path / "t.json"), "--graphs",
                str(tmp_path / "none.mlir"))
    assert done.returncode == 1 and "none.mlir: not an .mlir file" in done.stderr


def test_the_builder_records_the_fastest_timed_config_against_the_heuristics():
    from kgc.search.tuner import CandidateRow, SearchReport

    shape = Shape.of("matmul", m=17, n=777, k=1000)
    kernels = default_kernels(shape, 90)
    ((signature, key, kind, extents),) = kernels
    heuristic = MatmulConfig(block_m=17, block_n=64, block_k=64, group_m=1, num_warps=4,
                             num_stages=4)
    fast = MatmulConfig(block_m=17, block_n=32, block_k=128, group_m=1, num_warps=4,
                        num_stages=3)

    def report(*rows):
        return SearchReport(list(rows), [], None, None, 1.0)

    rows = [CandidateRow("k", signature, heuristic.to_dict(), True, "timed", 9.0),
            CandidateRow("k", signature, fast.to_dict(), False, "timed", 6.0),
            # Faster, but wrong, or another kernel's: never recorded.
            CandidateRow("k", signature, TABLE_MATMUL.to_dict(), False, "rejected", 1.0),
            CandidateRow("k", "other", TABLE_MATMUL.to_dict(), False, "timed", 2.0)]
    (entry,) = entries_from_report(shape, kernels, report(*rows))
    assert (entry.kind, entry.element, entry.variant) == ("matmul", "f16", "")
    assert entry.features == {"batch": 1, "m": 17, "n": 777, "k": 1000}
    # The 17-row tile covered the rows: written as the power of two that does.
    assert entry.config == dataclasses.replace(fast, block_m=32)
    assert (entry.time_us, entry.heuristic_us, entry.workload) == (6.0, 9.0, shape.name)
    assert entry.decisive
    # Only the heuristic's config timed (the budget spent): nothing learnt.
    assert entries_from_report(shape, kernels, report(rows[0], rows[2])) == []
    # The heuristic's the fastest: its own config, an entry that replaces
    # nothing but says a Triton kernel won there.
    slower = dataclasses.replace(rows[1], time_us=9.5)
    (entry,) = entries_from_report(shape, kernels, report(rows[0], slower))
    assert entry.config == dataclasses.replace(heuristic, block_m=32)
    assert (entry.time_us, entry.heuristic_us) == (9.0, 9.0) and not entry.decisive
    # A library call the fastest: an entry of the library's kind, keyed as
    # the kernel kgc planned.
    from kgc.tiling.library import KIND as LIBRARY, LibraryMatmulConfig

    call = CandidateRow("k", signature, LibraryMatmulConfig(library=True).to_dict(), False,
                        "timed", 5.0)
    (entry,) = entries_from_report(shape, kernels, report(*rows, call))
    assert (entry.kind, entry.config, entry.time_us) == (LIBRARY,
                                                          LibraryMatmulConfig(library=True), 5.0)
    assert entry.features == {"batch": 1, "m": 17, "n": 777, "k": 1000}
    assert parse_table(_table(entry).to_dict()).entries == (entry,)


def test_a_shape_whose_kernels_the_table_cannot_key_is_not_searched(monkeypatch):
    import kgc.search.tuner
    from kgc.bench.tune_defaults import measure_shape

    def searched(*args, **kwargs):
        raise AssertionError("searched a shape the table has no key for")

    monkeypatch.setattr(kgc.search.tuner, "superoptimize", searched)
    # 512 rows of a 4096-wide weight: kgc's rule makes it a library call.
    assert measure_shape(Shape.of("matmul", "bf16", m=512, n=4096, k=4096), 90, 10.0, "low",
                         False) == ([], None)
    with pytest.raises(AssertionError, match="searched"):
        measure_shape(Shape.of("matmul", m=16, n=4096, k=4096), 90, 10.0, "low", False)


def test_portable_configs_cover_their_axis_with_a_power_of_two():
    config = MatmulConfig(block_m=17, block_n=64, block_k=1000, num_warps=4)
    moved = portable(config, {"m": 17, "n": 777, "k": 1000})
    assert (moved.block_m, moved.block_n, moved.block_k) == (32, 64, 1024)
    assert moved.canonical({"m": 17, "n": 777, "k": 1000}) == config


# -- the compile and its switch --------------------------------------------------------


def _graph(m=17, k=1000, n=777):
    g = kgc.Graph("tuned")
    g.output(g.matmul(g.input("x", (m, k), "f16"), g.input("w", (k, n), "f16")))
    return g


def _compiled_matmul_config(graph) -> MatmulConfig:
    module = graph.build()
    with module.context:
        compile_module(module, emit="kg")
        (kernel,) = [k for k in kernels_in(module.operation)]
        return MatmulConfig.from_attribute(config_attribute(kernel))


def test_a_compile_reads_the_table_the_variable_names(tmp_path, monkeypatch):
    _write(tmp_path, _table(_entry(16, 777, 1000)))
    monkeypatch.setenv(ENVIRONMENT, "off")
    heuristic = _compiled_matmul_config(_graph())
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path))
    tuned = _compiled_matmul_config(_graph())
    assert tuned == TABLE_MATMUL.canonical({"m": 17, "n": 777, "k": 1000}) != heuristic
    # A file names a table too; a table for another target is not used.
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "sm_90.json"))
    assert _compiled_matmul_config(_graph()) == tuned
    other = _write(tmp_path / "other", _table(_entry(16, 777, 1000), target="sm_80"))
    monkeypatch.setenv(ENVIRONMENT, str(other))
    assert _compiled_matmul_config(_graph()) == heuristic


def test_kg_tile_option_wins_over_the_variable(tmp_path, monkeypatch):
    _write(tmp_path, _table(_entry(16, 777, 1000)))
    source = tmp_path / "graph.mlir"
    source.write_text(str(_graph().build()))
    monkeypatch.setenv(ENVIRONMENT, "off")
    opt = console_script("kgc-opt")

    def tiled(option: str) -> MatmulConfig:
        output = subprocess.run([opt, str(source), "--kg-decompose", "--kg-fuse",
                                 f"--kg-tile={option}"], capture_output=True, text=True,
                                check=True).stdout
        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            module = ir.Module.parse(output)
            (kernel,) = kernels_in(module.operation)
            return MatmulConfig.from_attribute(config_attribute(kernel))

    assert tiled(f"tuned-defaults={tmp_path}") == \
        TABLE_MATMUL.canonical({"m": 17, "n": 777, "k": 1000})
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path))
    assert tiled("tuned-defaults=off").block_n != TABLE_MATMUL.block_n


def test_the_search_plans_its_default_from_the_table(tmp_path, monkeypatch):
    # variant_space times each kernel's default first: the table's config.
    _write(tmp_path, _table(_entry(16, 777, 1000)))
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path))
    module = _graph().build()
    with module.context:
        from kgc.pipeline.pipeline import Pipeline
        from kgc.pipeline.stages import fusion_pipeline_text

        Pipeline.parse(fusion_pipeline_text()).run(module.operation)
        (kernel,) = kernels_in(module.operation)
        plan, _ = plan_kernel(kernel, target=SM90)
        assert plan.config == TABLE_MATMUL.canonical({"m": 17, "n": 777, "k": 1000})
        for table in (None, "off"):
            plan, _ = plan_kernel(kernel, target=SM90, table=table)
            assert plan.config.block_n != TABLE_MATMUL.block_n
        plan, _ = plan_kernel(kernel, target=SM90, table=str(tmp_path / "sm_90.json"))
        assert plan.config == TABLE_MATMUL.canonical({"m": 17, "n": 777, "k": 1000})


def test_the_search_cache_keys_results_by_the_table_in_use(tmp_path, monkeypatch):
    from kgc.search.tuner import _tuned_defaults_fingerprint

    monkeypatch.setenv(ENVIRONMENT, "off")
    assert _tuned_defaults_fingerprint(90) == "none"
    _write(tmp_path, _table(_entry(16, 777, 1000)))
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path))
    first = _tuned_defaults_fingerprint(90)
    _write(tmp_path, _table(_entry(32, 777, 1000)))
    assert first != _tuned_defaults_fingerprint(90) != "none"


def test_no_table_for_a_target_is_the_heuristics(tmp_path):
    _write(tmp_path, _table(_entry(16, 777, 1000)))
    assert resolve(str(tmp_path), 80) is None
    assert resolve("off", 90) is None
    assert resolve(str(tmp_path), 90).entries


def test_shipped_tables_are_valid_and_named_after_their_target():
    import importlib.resources

    for resource in importlib.resources.files("kgc.tuned_tables").iterdir():
        if resource.name.endswith(".json"):
            with importlib.resources.as_file(resource) as path:
                table = load_table(path)
            assert resource.name == f"{table.target}.json"
            assert table.entries and all(e.time_us <= e.heuristic_us * 1.05
                                         for e in table.entries)
    # A target with no table compiles with the heuristics.
    shipped = {r.name for r in importlib.resources.files("kgc.tuned_tables").iterdir()}
    if "sm_87.json" not in shipped:
        assert packaged_table(87) is None
        assert resolve("on", 87) is None


# -- the format -----------------------------------------------------------------------


def _valid() -> dict:
    return _table(_entry(16, 777, 1000)).to_dict()


def test_a_table_round_trips_through_json():
    table = _table(_entry(16, 777, 1000), _entry(512, 4096, 4096))
    again = parse_table(json.loads(table.to_json()))
    assert again.entries == table.entries and again.to_json() == table.to_json()


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(format="other"), "\"format\" must be \"kgc-tuned-defaults\""),
    (lambda d: d.update(version=2), "\"version\" 2 is not one kgc reads"),
    (lambda d: d.pop("gpu"), "\"gpu\" must be a non-empty string"),
    (lambda d: d.update(target="90"), "\"target\" must name an SM version"),
    (lambda d: d.update(entries={}), "\"entries\" must be a list"),
    (lambda d: d["entries"][0].update(element="f17"), "entry 0: \"element\" must be"),
    (lambda d: d["entries"][0]["features"].update(m=0), "entry 0: \"features\" must be"),
    (lambda d: d["entries"][0]["config"].update(block_n=48),
     "entry 0: config: matmul kernel: block_n = 48 is not legal"),
    (lambda d: d["entries"][0]["config"].update(num_warps=3), "num_warps = 3 is not legal"),
    (lambda d: d["entries"][0]["config"].update(blocks=3), "matmul kernels have no knob blocks"),
    (lambda d: d["entries"][0]["config"].update(kind="reduction"),
     "entry 0: its config is of kind 'reduction'"),
    (lambda d: d["entries"][0].update(time_us=-1), "entry 0: \"time_us\" must be a positive"),
    (lambda d: d["entries"][0].update(speed=1), "entry 0: unknown field(s) speed"),
    (lambda d: d["entries"].append([]), "entry 1 must be an object"),
])
def test_a_malformed_table_is_an_error_naming_what_is_wrong(change, message):
    data = _valid()
    change(data)
    with pytest.raises(TunedTableError) as caught:
        parse_table(data, "t.json")
    assert str(caught.value).startswith("error: tuned-defaults table t.json: ")
    assert message in str(caught.value)


def test_a_corrupted_table_file_fails_the_compile_with_its_name(tmp_path):
    path = tmp_path / "sm_90.json"
    path.write_text(_table(_entry(16, 777, 1000)).to_json()[:-40])
    source = tmp_path / "graph.mlir"
    source.write_text(str(_graph().build()))
    done = subprocess.run([console_script("kgc"), "compile", str(source), "-o",
                           str(tmp_path / "out"), "--emit", "kg"], capture_output=True,
                          text=True, env={**os.environ, ENVIRONMENT: str(tmp_path)})
    assert done.returncode == 1
    assert f"tuned-defaults table {path}:" in done.stderr and "not JSON" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_table_file_is_an_error(tmp_path):
    with pytest.raises(TunedTableError, match="cannot be read"):
        resolve(str(tmp_path / "none.json"), 90)


# -- the held-out shapes ----------------------------------------------------------------


def test_the_held_out_shapes_are_not_in_the_corpus():
    held_out = read_shapes(HELD_OUT)
    assert len(held_out) >= 20 and len(set(held_out)) == len(held_out)
    assert not set(held_out) & set(corpus())
    kinds = {shape.kind for shape in held_out}
    assert {"matmul", "rmsnorm-matmul", "gated-mlp", "lora", "attention", "attention-decode",
            "softmax", "rms-norm", "layer-norm"} <= kinds


@pytest.mark.parametrize("shape", read_shapes(HELD_OUT), ids=lambda s: s.name)
def test_each_held_out_shape_builds_a_graph(shape):
    assert shape.build().build() is not None


def test_the_corpus_spans_the_rows_and_models_asked_for():
    matmuls = {(dict(s.dims)["m"], dict(s.dims)["n"], dict(s.dims)["k"])
               for s in corpus() if s.kind == "matmul" and s.dtype == "f16"}
    for m in (1, 16, 64, 128, 512, 2048, 8192):
        for n, k in ((4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (32000, 4096)):
            assert (m, n, k) in matmuls


def test_the_corpus_measures_norm_weight_gradients_under_keys_of_their_own():
    """The backward's sums across token rows are in the corpus, and their
    kernels are keyed apart from reductions along rows of the same sizes,
    so that a table built from it serves each kind its own configs."""
    from kgc.bench.tune_defaults import NORM_WEIGHT_GRADIENT, default_kernels

    gradients = [s for s in corpus() if s.kind == NORM_WEIGHT_GRADIENT]
    assert {(dict(s.dims)["rows"], dict(s.dims)["columns"]) for s in gradients} == \
        {(rows, columns) for rows in (512, 2048, 8192) for columns in (512, 4096)}
    (kernel,) = default_kernels(gradients[0], 90)
    _, key, kind, _ = kernel
    assert kind == "reduction" and key.variant == "reductions=1,across-rows"
    assert key.features == {"rows": 512, "row": 512}
    (norm,) = default_kernels(Shape.of("rms-norm", "bf16", rows=512, columns=512), 90)
    assert norm[1].variant == "reductions=1"


# -- the command line -------------------------------------------------------------------


def _kgc(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([console_script("kgc"), *arguments], capture_output=True, text=True)


def test_the_command_prints_the_corpus():
    done = _kgc("tune-defaults", "corpus")
    assert done.returncode == 0
    assert [Shape.from_dict(json.loads(line)) for line in done.stdout.splitlines()] == corpus()


def test_shards_split_the_corpus_into_interleaved_parts_that_cover_it_once():
    from kgc.bench.tune_defaults import Shard

    shapes = corpus()
    parts = [Shard.parse(f"{i}/3").of(shapes) for i in range(3)]
    assert sorted(map(repr, sum(parts, []))) == sorted(map(repr, shapes))
    assert [len(p) for p in parts] == [57, 56, 56]  # 169 shapes
    # Interleaved: each part starts with one of the most used shapes.
    assert [p[0] for p in parts] == shapes[:3]
    assert Shard.parse("0/1").of(shapes) == shapes


@pytest.mark.parametrize("text", ["2/2", "-1/2", "1", "a/b", "0/0", ""])
def test_a_bad_shard_is_a_usage_error_naming_it(text):
    done = _kgc("tune-defaults", "check", "--workloads", "", f"--shard={text}")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"--shard {text!r}: expected I/N with 0 <= I < N" in done.stderr


def test_merge_joins_the_parts_of_a_sharded_build_keeping_the_faster_entry(tmp_path):
    from kgc.tiling.library import KIND as LIBRARY, LibraryMatmulConfig

    slow, other = _entry(16, 6144, 4096), _entry(64, 512, 512)
    fast = dataclasses.replace(_entry(16, 6144, 4096, LibraryMatmulConfig(library=True),
                                      kind=LIBRARY), time_us=5.0)
    first = _write(tmp_path, _table(slow, other), "part-0.json")
    second = _write(tmp_path, dataclasses.replace(_table(fast), kgc_commit="4567def",
                                                  date="2026-11-27T06:00:00+00:00"),
                    "part-1.json")
    out = tmp_path / "sm_90.json"
    done = _kgc("tune-defaults", "merge", "--out", str(out), str(first), str(second))
    assert done.returncode == 0, done.stderr
    assert "2 entries for sm_90" in done.stdout
    merged = load_table(out)
    assert sorted(merged.entries, key=lambda e: e.time_us) == [fast, other]
    assert (merged.kgc_commit, merged.date) == ("0123abc+4567def", "2026-11-27T06:00:00+00:00")
    # Tables of two GPU models are not one table.
    elsewhere = _write(tmp_path, dataclasses.replace(_table(other), gpu="NVIDIA A100"),
                       "part-2.json")
    done = _kgc("tune-defaults", "merge", "--out", str(out), str(first), str(elsewhere))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{elsewhere} is a table of gpu 'NVIDIA A100'" in done.stderr


def test_a_bad_shapes_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps([{"kind": "matmul", "m": 3, "n": 5, "k": 7},
                                {"kind": "matmul", "m": 0, "n": 5, "k": 7}]))
    done = _kgc("tune-defaults", "check", "--workloads", "", "--held-out", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"{path}: shape 1: shape matmul takes the positive integer dims m, n, k" in done.stderr
    done = _kgc("tune-defaults", "build", "--out", str(tmp_path / "t.json"), "--shapes",
                str(tmp_path / "none.json"))
    assert done.returncode == 1 and "cannot read a list of shapes" in done.stderr


def test_measuring_without_a_gpu_is_an_error(tmp_path):
    from kgc.runtime import cuda_available

    if cuda_available():
        pytest.skip("a GPU is here")
    done = _kgc("tune-defaults", "build", "--out", str(tmp_path / "t.json"))
    assert done.returncode == 1 and "needs a CUDA device" in done.stderr
    assert "Traceback" not in done.stderr


def _headline_norm_product():
    """x * gamma times W, 16 x 4096 -> 6144: the headline's operand as its
    k loop computes it."""
    x, gamma, w = _input((16, 4096), "f16", 0), _input((4096,), "f16", 1), \
        _input((4096, 6144), "f16", 2)
    scaled = Node("mul", [x, gamma], (16, 4096), "f16", {})
    return [Node("matmul", [scaled, w], (16, 6144), "f16", {"precision": None})]


def test_short_steps_of_a_computed_operand_take_at_most_three_stages_on_sm90():
    # Triton 3.6 faulted (misaligned address) on an H100 running a computed
    # operand pipelined 4 deep over 16 x 16 tiles, with 32-deep steps (the
    # README's headline) and with 64-deep ones (Gemma 2's gated MLP); a
    # fault ends the search's process. A user's knob gets an error naming
    # the fix, kgc's own default takes 3 stages; 128-deep steps at 16 x 16
    # tiles (the decode products), 64-deep ones at larger tiles, bare
    # products and sm_80 keep 4.
    from kgc.tiling.iteration import Unplannable

    outputs = _headline_norm_product()
    small = MatmulConfig(block_m=16, block_n=16, block_k=64, group_m=1, num_warps=4)
    with pytest.raises(Unplannable, match=r"num_stages = 4 over 64-deep k steps of 16 x 16 tiles "
                                          r".* refused on sm_90.*take num_stages <= 3 or deeper "
                                          r"k steps"):
        plan_group(outputs, dataclasses.replace(small, num_stages=4), target=SM90)
    for block_k in (32, 64):
        assert plan_group(outputs, dataclasses.replace(small, block_k=block_k),
                          target=SM90).config.num_stages == 3
    assert plan_group(outputs, dataclasses.replace(small, block_k=128),
                      target=SM90).config.num_stages == 4
    wide = dataclasses.replace(small, block_n=64)
    with pytest.raises(Unplannable, match=r"num_stages = 4 over 32-deep k steps of an operand"):
        plan_group(outputs, dataclasses.replace(wide, block_k=32, num_stages=4), target=SM90)
    assert plan_group(outputs, dataclasses.replace(wide, block_k=32),
                      target=SM90).config.num_stages == 3
    assert plan_group(outputs, wide, target=SM90).config.num_stages == 4
    assert plan_group(outputs, dataclasses.replace(small, num_stages=4),
                      target=table_record(80)).config.num_stages == 4
    # A bare product is not refused.
    bare = _matmul(16, 4096, 6144)
    assert plan_group(bare, dataclasses.replace(small, num_stages=4),
                      target=SM90).config.num_stages == 4


def test_the_search_offers_no_config_the_fault_rule_refuses():
    # Such a config would be a failed row of every search of the kernel
    # (kg-tile refuses it); the headline's split-K candidates were.
    from kgc.parsing import canonical_source
    from kgc.search.kernels import compile_candidate
    from kgc.search.space import variant_space
    from tests.cases import headline_graph

    text, function, _ = canonical_source(headline_graph().to_mlir(), None)
    _, kernels = variant_space(text, function, "default", 90)
    matmuls = [v for v in kernels.values() if v.kind == "matmul"]
    assert matmuls
    capped = 0
    for variants in matmuls:
        short = [c for c in variants.configs
                 if isinstance(c, MatmulConfig) and c.block_k is not None and c.block_k <= 32]
        for config in short:  # kg-tile takes every one
            compile_candidate(variants.launch_text, config, 90, emit="kg")
        # The kernel with the norm's scale in its k loop offers short steps
        # with at most 3 stages (the bare product beside it may take 4).
        capped += bool(short) and all(c.num_stages <= 3 for c in short)
    assert capped >= 1
    # sm_80 has no such rule: its space keeps 4 stages over short steps.
    _, kernels80 = variant_space(text, function, "default", 80)
    assert any(isinstance(c, MatmulConfig) and c.num_stages == 4 and c.block_k is not None
               and c.block_k <= 32
               for v in kernels80.values() if v.kind == "matmul" for c in v.configs)


@pytest.mark.parametrize("m,tiles", [(64, (16, 64, 32)), (16, None)])
def test_a_table_entry_over_the_faulting_stages_keeps_its_tiles_beyond_skinny_products(m, tiles):
    # The shipped entries of products with a computed operand carry 4 stages
    # over 32-deep steps, which sm_90 refuses since the fault. At 64 rows the
    # entry's tiles are kept with 3 stages (four times the programs of the
    # heuristics' 64-row tiles: GPT-2's 64-token forward took 0.95x
    # Inductor's time with them, 0.63x without); a skinny product takes the
    # heuristics, which its one-token forwards ran faster with.
    entry = MatmulConfig(block_m=16, block_n=64, block_k=32, group_m=1, num_warps=4,
                         num_stages=4)
    outputs = _silu_product_matmul(m, 1376, 512)
    plan = plan_group(outputs, target=SM90)
    variant = "prologue" if m <= 16 else ""
    config = plan_group(outputs, target=SM90,
                        table=_table(_entry(m, 512, 1376, entry, variant=variant))).config
    if tiles is None:
        assert config == plan.config
    else:
        assert (config.block_m, config.block_n, config.block_k, config.num_stages) == (*tiles, 3)
    # sm_80 serves the entry as it was measured.
    config80 = plan_group(outputs, target=table_record(80),
                          table=_table(_entry(m, 512, 1376, entry, variant=variant),
                                       target="sm_80")).config
    assert (config80.block_m, config80.block_k, config80.num_stages) == (16, 32, 4)


def test_a_failed_shape_s_line_names_the_exception_that_ended_a_worker_s_traceback():
    from kgc.bench.tune_defaults import _error_summary
    from kgc.diagnostics import KgcError

    error = KgcError("checking the candidates of 0728b3 failed in the worker process on GPU 0:\n"
                     "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\n"
                     "ValueError: scale must be positive\n")
    assert _error_summary(error) == ("error: checking the candidates of 0728b3 failed in the "
                                     "worker process on GPU 0: ... ValueError: scale must be "
                                     "positive")
    assert _error_summary(ValueError("one line")) == "one line"
    assert _error_summary(RuntimeError("")) == "RuntimeError"


# -- the check's report ---------------------------------------------------------------


def test_check_names_the_search_s_choice_where_the_default_is_slower(monkeypatch):
    from kgc.bench import tune_defaults
    from kgc.pipeline.config import GraphConfig

    choice = GraphConfig("mm", "0,1", {"mm_0_matmul": MatmulConfig(block_n=32, split_k=8)})
    results = {"slow": tune_defaults.Comparison("slow", 12.0, 10.0, 13.0, chosen=choice),
               "close": tune_defaults.Comparison("close", 10.2, 10.0, 11.0, chosen=choice),
               "same": tune_defaults.Comparison("same", 20.0, 10.0, 21.0, chosen=None)}
    monkeypatch.setattr(tune_defaults, "compare", lambda name, *args: results[name])
    lines = []
    tune_defaults.check([(name, None) for name in results], "off", 1.0, "low", 0.05,
                        log=lines.append)
    slow = next(i for i, line in enumerate(lines) if line.startswith("slow"))
    assert lines[slow].endswith("over")
    assert lines[slow + 1] == ("    searched: partition 0,1; mm_0_matmul: matmul block_n=32 "
                               "split_k=8")
    # Within the tolerance nothing more is said; a search that kept the
    # default says so.
    close = next(i for i, line in enumerate(lines) if line.startswith("close"))
    assert lines[close + 1].startswith("same")
    assert lines[-1] == "    searched: kgc's default compile"


def test_an_entry_within_the_noise_of_the_heuristic_does_not_replace_it():
    from kgc.tiling.library import KIND as LIBRARY, LibraryMatmulConfig

    outputs = _matmul(16, 4096, 4096)
    heuristic = plan_group(outputs, target=SM90).config
    close = dataclasses.replace(_entry(16, 4096, 4096), time_us=10.0, heuristic_us=10.2)
    assert not close.decisive and _entry(16, 4096, 4096).decisive
    assert plan_group(outputs, target=SM90, table=_table(close)).config == heuristic
    assert plan_group(outputs, target=SM90,
                      table=_table(_entry(16, 4096, 4096))).config.num_warps == 2
    # It still says Triton won there: a library entry as near does not take
    # the product ...
    library = _entry(16, 6144, 4096, LibraryMatmulConfig(library=True), kind=LIBRARY)
    assert plan_group(outputs, target=SM90, table=_table(library, close)).kind == "matmul"
    assert plan_group(outputs, target=SM90, table=_table(library)).kind == LIBRARY
    # ... and a library entry within the noise takes none.
    narrow = dataclasses.replace(library, time_us=10.0, heuristic_us=10.2)
    assert plan_group(outputs, target=SM90, table=_table(narrow)).kind == "matmul"


def test_a_reduction_entry_within_the_noise_does_not_replace_the_heuristic():
    # Every schedule's lookup holds to the rule, the reductions' own too.
    x = _input((1000, 4096), "f16")
    squares = Node("mul", [x, x], (1000, 4096), "f16", {})
    total = Node("reduce", [squares], (1000,), "f16", {"dims": [1], "kind": "sum",
                                                         "keepdim": False})
    config = ReductionConfig(block_x=2, block_r=4096, num_warps=16, num_stages=1)
    entry = Entry("reduction", "f16", "reductions=1", {"rows": 512, "row": 4096}, config,
                  5.0, 6.0)
    assert plan_group([total], target=SM90, table=_table(entry)).config == config
    close = dataclasses.replace(entry, heuristic_us=5.1)
    assert plan_group([total], target=SM90, table=_table(close)).config == \
        plan_group([total], target=SM90).config != config
