"""Split-K matmul kernels on the GPU against torch: GEMV, RMSNorm + MatMul,
the gated MLP and LoRA, with every matmul kernel split, on row counts of 1,
3 and 17, k of 1000 and 4097, n that is not a multiple of the tile, and the
workloads' own shapes (benchmarks/split_k.py), in f16, bf16 and f32; held
to `kgc.accuracy`'s rule against the exact result, with torch as eager (a
TF32 product fails it in f32)."""

import pytest

import kgc
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import MatmulConfig
from tests.comparison import assert_matches_torch
from tests.test_split_k import (bias_gelu_residual, gated_mlp, gemv, lora, matmul_kernels,
                                rmsnorm_matmul)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


SHAPES = [(1, 1000, 300), (3, 4097, 1000), (17, 1000, 300), (17, 4097, 77)]
GRAPHS = {"gemv": gemv, "rmsnorm_matmul": rmsnorm_matmul, "gated_mlp": gated_mlp, "lora": lora,
          "bias_gelu_residual": bias_gelu_residual}


def _compile_split(graph: kgc.Graph, split: int):
    config = GraphConfig(graph.name, None, {name: MatmulConfig(split_k=split)
                                            for name in matmul_kernels(graph)})
    return kgc.compile(graph, config=config)


def _inputs(graph: kgc.Graph, dtype: str, seed: int):
    generator = torch.Generator().manual_seed(seed)
    shapes = [tuple(t.shape) for t in graph.inputs]
    # Unit-scale weights over k of thousands give outputs of ~30: scaled so
    # that f16 outputs keep their precision.
    return [(torch.randn(shape, generator=generator) * (1.0 if i == 0 else 0.1))
            .to(DTYPES[dtype]).cuda() for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("split", [2, 4, 16])
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("name", list(GRAPHS))
def test_split_k_matches_torch(name, dtype, m, k, n, split):
    graph, reference = GRAPHS[name](m, k, n, dtype)
    compiled = _compile_split(graph, split)
    assert any(launch.kernel.endswith("_partials") for launch in compiled.function.launches)
    inputs = _inputs(graph, dtype, seed=split)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)


# Over k of more than 512 or more than 16 rows kg-fuse keeps the norm out of
# the product (norm-over-long-k, skinny-prologue): the norm folded in, its
# sum of squares split with the dot, is checked at k of at most 512.
@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("m,k,n", [(1, 500, 300), (13, 511, 77)])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_a_folded_norm_split_matches_torch(dtype, m, k, n, split):
    graph, reference = rmsnorm_matmul(m, k, n, dtype)
    compiled = _compile_split(graph, split)
    launched = [launch.kernel for launch in compiled.function.launches]
    assert launched == [f"{graph.name}_0_matmul_partials", f"{graph.name}_0_matmul_reduce"]
    inputs = _inputs(graph, dtype, seed=split)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)


@pytest.mark.parametrize("name,shape", [("rmsnorm_matmul", (16, 4096, 6144)),
                                        ("gated_mlp", (8, 4096, 11008)),
                                        ("lora", (16, 4096, 4096))])
@pytest.mark.parametrize("split", [2, 4, 8, 16])
def test_the_benchmarked_workloads_split_match_torch(name, shape, split):
    graph, reference = GRAPHS[name](*shape, "f16")
    compiled = _compile_split(graph, split)
    inputs = _inputs(graph, "f16", seed=0)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)


def test_split_k_is_deterministic():
    graph, _ = rmsnorm_matmul(16, 4096, 6144, "f16")
    compiled = _compile_split(graph, 8)
    inputs = _inputs(graph, "f16", seed=1)
    first = compiled(*inputs)
    for _ in range(5):
        assert torch.equal(compiled(*inputs), first)


def test_the_search_times_split_k_candidates_of_the_headline(tmp_path):
    from kgc.search import Cache
    from tests.cases import headline_graph

    result = headline_graph().superoptimize(cache=Cache(tmp_path), effort="default",
                                            warmup_iters=2, profile_iters=20, verbose=False)
    split_rows = [row for row in result.report.rows if row.config.get("split_k")]
    assert split_rows, "the search tried no split-K config on a 16-row matmul"
    # Every split candidate compiles and computes the right thing (none
    # failed or rejected). A candidate that faulted on the GPU is rejected
    # without a result to check: Triton 3.6 faulted on some products whose
    # k loop computes an operand (the fault rule in kgc.tiling.matmul), and
    # the search's worker process turns that into a row.
    fine = ("timed", "skipped", "pruned", "over budget")
    wrong = [(row.config, row.status, row.reason) for row in split_rows
             if row.status not in fine and not row.reason.startswith("faulted on the GPU")]
    assert not wrong, wrong
    assert any(row.status == "timed" for row in split_rows)


# Products of few rows at kgc's default, the tiles its heuristics give:
# one wave of 64 or 128 columns over 128-deep steps (weights of 8 MiB and
# more), 16-column tiles over 64-deep steps (more rows than a decode's over
# small weights), cuBLAS (64 rows and more, or too few tiles for one wave),
# the k loop split (a wave under half the SMs), 32-column tiles split 8
# ways (a skinny product of rows that are not whole 16-byte vectors); n and
# k not multiples of the tiles.
@pytest.mark.parametrize("m,k,n", [(1, 2048, 8193), (17, 2048, 8193), (3, 4097, 11009),
                                   (40, 1000, 1001), (100, 1000, 777), (80, 2049, 8193),
                                   (3, 4097, 2049), (3, 1000, 777), (12, 999, 1500),
                                   (1, 1333, 2500)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_products_of_few_rows_at_kgc_s_default_match_torch(dtype, m, k, n):
    graph, reference = gemv(m, k, n, dtype)
    compiled = kgc.compile(graph)
    inputs = _inputs(graph, dtype, seed=m)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)
