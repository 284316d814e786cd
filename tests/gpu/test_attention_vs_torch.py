"""Attention kernels (kgc.tiling.attention) on the GPU against torch's
scaled_dot_product_attention: f16, bf16 and f32; keys 1, 1000 and 4097,
queries 1, 3 and 17, head dims 64 and 128, with and without grouped query
heads and a mask; split-KV and head packing on and off. Results are held to
`kgc.accuracy`'s rule against the f64 result, with torch's attention as
eager."""

from __future__ import annotations

import pytest

import kgc
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import AttentionConfig
from kgc.accuracy import tensor_mismatch
from tests.attention_graphs import (AttentionShape, attention_eager, attention_graph,
                                    attention_inputs, attention_reference, check_math_path,
                                    math_path_graph, math_path_inputs, packed_decode_graph)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

SHAPES = [AttentionShape(2, 4 if (n + m + d) % 2 else 2, 2, m, n, d, mask=(n + m) % 3 == 0)
          for n in (1, 1000, 4097) for m in (1, 3, 17) for d in (64, 128)]


def _check(graph, shape, dtype, seed=0):
    inputs = attention_inputs(shape, _DTYPES[dtype], "cuda", seed)
    got = graph.run(*inputs, poison=True)
    reason = tensor_mismatch(got, attention_eager(*inputs), attention_reference(*inputs))
    assert reason is None, reason


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_attention_matches_torch(shape, dtype):
    graph = kgc.compile(attention_graph(shape, dtype))
    assert any(name.endswith("_attention") for name in graph.module.kernels)
    _check(graph, shape, dtype)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 2, 2, 1, 1, 64),
                                   AttentionShape(2, 4, 4, 17, 1000, 64),
                                   AttentionShape(1, 8, 8, 512, 512, 64),
                                   AttentionShape(1, 2, 2, 3, 4097, 128)], ids=str)
def test_the_math_paths_attention_matches_torch(shape, dtype):
    # scaled_dot_product_attention's math path over half-float heads with a
    # mask (BERT's): one attention kernel with half-float dots, and zeros
    # for the middle query, whose keys are all masked.
    graph = kgc.compile(math_path_graph(shape, dtype))
    assert [name.rsplit("_", 1)[-1] for name in graph.module.kernels] == ["attention"]
    inputs = [t.cuda() for t in math_path_inputs(shape, _DTYPES[dtype], seed=5)]
    check_math_path(graph.run(*inputs, poison=True), inputs)


@pytest.mark.parametrize("split_kv", [1, 4, 8, 16, 32])
@pytest.mark.parametrize("pack_heads", [False, True])
def test_gqa_decode_knobs_match_torch(split_kv, pack_heads):
    shape = AttentionShape(1, 32, 8, 1, 4097, 128)
    config = GraphConfig("attention", None, {"attention_0_attention": AttentionConfig(
        split_kv=split_kv, pack_heads=pack_heads)})
    graph = kgc.compile(attention_graph(shape, "f16"), config=config)
    assert len(graph.module.kernels) == (1 if split_kv == 1 else 2)
    _check(graph, shape, "f16", seed=split_kv)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 32, 8, 1, n, 128) for n in (1, 1000, 4097)]
                         + [AttentionShape(2, 8, 2, 3, 1000, 64)], ids=str)
def test_packed_decode_reshaped_back_matches_torch(shape, dtype):
    # The query heads of a group as the rows of one matmul, the result
    # reshaped back: the attention kernel (and the one combining its key
    # splits) writes the reshaped result itself.
    graph = kgc.compile(packed_decode_graph(shape, dtype))
    assert [name for name in graph.module.kernels if "pointwise" in name] == []
    _check(graph, shape, dtype)


def test_causal_prefill_matches_torch():
    shape = AttentionShape(1, 32, 32, 128, 128, 128, mask=True)
    graph = kgc.compile(attention_graph(shape, "f16"))
    q, k, v, _ = attention_inputs(shape, torch.float16, "cuda", 3)
    causal = torch.full((128, 128), float("-inf"), device="cuda").triu(1).half()
    got = graph.run(q, k, v, causal, poison=True)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    reason = tensor_mismatch(got, want, attention_reference(q, k, v, causal))
    assert reason is None, reason
