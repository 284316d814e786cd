"""LoRA as one kernel (kgc.tiling.low_rank) on the GPU against torch, in
f16, bf16 and f32, on row counts of 1, 3, 16 and 17, k of 1000, 4096 and
4097, n that is not a multiple of the tile, and ranks from 1 to 64; and
with explicit configs of one kernel and of split-K, at 1 and 16 rows; held to
`kgc.accuracy`'s rule against the exact result, with torch as eager."""

import pytest

import kgc
from tests.comparison import assert_matches_torch
from tests.gpu.test_split_k_vs_torch import _inputs
from tests.test_split_k import lora

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m,k,n,rank", [(3, 1000, 300, 16), (17, 4097, 77, 16), (16, 4096, 4096, 16),
                                        (16, 4096, 4096, 64), (5, 1000, 200, 1), (1, 4097, 1000, 16),
                                        (1, 4096, 4096, 8)])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
def test_lora_one_kernel_matches_torch(dtype, m, k, n, rank):
    _one_kernel_at_default_matches_torch(dtype, m, k, n, rank, seed=rank)


def _one_kernel_at_default_matches_torch(dtype, m, k, n, rank, seed):
    graph, reference = lora(m, k, n, dtype, rank=rank)
    compiled = kgc.compile(graph)
    # One kernel, or its k loop split by kgc: partials, then their sum.
    launched = [launch.kernel for launch in compiled.function.launches]
    assert launched in (["lora_0_matmul"], ["lora_0_matmul_partials", "lora_0_matmul_reduce"])
    inputs = _inputs(graph, dtype, seed=seed)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)


# LoRA over more rows than a decode step's, up to the library's 128, over
# weights the library would take alone: one kernel at kgc's default (64-row
# tiles over 128-deep steps above 64 rows); n and k off the tiles.
@pytest.mark.parametrize("m,k,n", [(32, 3073, 3072), (100, 2049, 2047), (128, 2048, 2048),
                                   (128, 4096, 6143)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_lora_of_up_to_128_rows_is_one_kernel_at_kgc_s_default(dtype, m, k, n):
    _one_kernel_at_default_matches_torch(dtype, m, k, n, 16, seed=m)


@pytest.mark.parametrize("m", [1, 16])
@pytest.mark.parametrize("split,block_n,stages", [(1, 32, 6), (1, 64, 4), (2, 64, 4), (4, 128, 3)])
def test_lora_configs_match_torch(m, split, block_n, stages):
    # The configs the search picks for skinny LoRA, one kernel and split.
    from kgc.pipeline.config import GraphConfig
    from kgc.tiling.config import MatmulConfig

    graph, reference = lora(m, 4096, 4096, "f16")
    config = GraphConfig("lora", None, {"lora_0_matmul": MatmulConfig(
        block_n=block_n, block_k=128, num_stages=stages, split_k=split)})
    compiled = kgc.compile(graph, config=config)
    assert len(compiled.function.launches) == (1 if split == 1 else 2)
    inputs = _inputs(graph, "f16", seed=m * 10 + split)
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)
