"""The config grid's benchmark (kgc.bench.config_grid) off the GPU: the
shapes it measures, its configs, and its errors."""

from __future__ import annotations

import pytest

from kgc.bench import config_grid
from kgc.bench.tune_defaults import MATMUL, Shape, corpus, read_shapes
from tests.test_tuned_defaults import HELD_OUT


def test_the_default_shapes_are_not_held_out():
    shapes = config_grid.shapes_of(",".join(map(str, config_grid.ROWS)),
                                   " ".join(f"{n}x{k}" for n, k in config_grid.WIDTHS), "f16")
    assert len(shapes) == len(config_grid.ROWS) * len(config_grid.WIDTHS) == len(set(shapes))
    assert all(shape.kind == MATMUL for shape in shapes)
    # What is learnt from the grid is checked on the held-out shapes: no
    # width of theirs is in it, and of the corpus's only the small model's.
    def width(shape):
        dims = dict(shape.dims)
        return dims["n"], dims["k"]

    widths = {width(s) for s in shapes}
    assert not widths & {width(s) for s in read_shapes(HELD_OUT) if s.kind == MATMUL}
    assert widths & {width(s) for s in corpus() if s.kind == MATMUL} == {(1024, 512)}


def test_shapes_are_rows_against_widths():
    assert config_grid.shapes_of("1,3", "512x256", "bf16") == [
        Shape.of(MATMUL, "bf16", m=1, n=512, k=256), Shape.of(MATMUL, "bf16", m=3, n=512, k=256)]


@pytest.mark.parametrize("rows,widths", [("x", "512x512"), ("1", "512"), ("0", "512x512"),
                                         ("1", "512x0"), ("1", "axb")])
def test_bad_rows_or_widths_exit_1_naming_them(rows, widths, capsys):
    assert config_grid.main(["--out", "unused.jsonl", "--rows", rows, "--widths", widths]) == 1
    error = capsys.readouterr().err
    assert error.startswith("error: --") and "Traceback" not in error


def test_the_grid_is_sixty_configs_of_every_knob_combination():
    configs = config_grid.grid_configs()
    assert len(configs) == len(set(configs)) == 4 * 3 * 5
    assert {(c.block_n, c.block_k, c.split_k) for c in configs} == {
        (n, k, s) for n in (16, 32, 64, 128) for k in (64, 128, 256) for s in (1, 2, 4, 8, 16)}


def test_without_a_gpu_it_exits_1_saying_so(tmp_path, capsys, monkeypatch):
    import kgc.runtime

    monkeypatch.setattr(kgc.runtime, "cuda_available", lambda: False)
    out = tmp_path / "grid.jsonl"
    assert config_grid.main(["--out", str(out), "--rows", "1", "--widths", "512x512"]) == 1
    assert "needs a CUDA device" in capsys.readouterr().err
    assert not out.exists()


def test_the_large_grid_is_every_tile_depth_and_load_with_persistent_programs_per_sm():
    configs = config_grid.grid_configs("large", sm_count=108)
    assert len(configs) == len(set(configs)) == len(config_grid.LARGE_TILES) * \
        len(config_grid.LARGE_DEPTHS) * len(config_grid.LARGE_LOADS)
    assert {c.num_programs for c in configs} == {None, 108}
    assert {c.block_k for c in configs} == {64, 128}
    assert all(c.group_m == 8 and c.split_k is None for c in configs)
    assert any(c.tma and c.num_programs == 108 for c in configs)
    assert not any(c.warp_specialize and not c.tma for c in configs)


def test_an_unknown_workload_exits_1_naming_it(capsys):
    assert config_grid.main(["--out", "unused.jsonl", "--workloads", "gemm-f17"]) == 1
    assert "gemm-f17" in capsys.readouterr().err


def test_lora_shapes_take_the_rank():
    from kgc.bench.tune_defaults import LORA

    assert config_grid.shapes_of("8", "3072x3072", "f16", "lora", 8) == [
        Shape.of(LORA, "f16", m=8, n=3072, k=3072, rank=8)]
    assert config_grid.main(["--out", "unused.jsonl", "--kind", "lora", "--rank", "0",
                             "--rows", "8", "--widths", "512x512"]) == 1
