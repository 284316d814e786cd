"""Attention as one kernel (kgc.tiling.attention), checked on the CPU.

Each graph goes through kgc's pipeline to the `kg` stage (fused, tiled,
padded and masked) and its kernels run program by program in torch
(`kgc.execution`, which also fails on an unmasked lane outside a buffer
and on an output element no program writes), against softmax(Q K^T) V in
f64: keys 1, 1000 and 4097 (none a multiple of a key block but 1),
queries 1, 3 and 17, head dims 64 and 128, with and without grouped heads
and a mask, with the keys split or not and the heads packed or not.
Results are held to `kgc.accuracy`'s rule, with torch's
scaled_dot_product_attention as eager.
"""

from __future__ import annotations

import json

import pytest
from mlir import ir

from kgc.accuracy import tensor_mismatch
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.pipeline import Pipeline
from kgc.pipeline.stages import decomposition_pipeline_text
from kgc import targets
from kgc.diagnostics import KgcError
from kgc.tiling.config import AttentionConfig, ConfigError, KernelConfig
from kgc.tiling.kernel_ops import kernel_name, kernels_in, knob, ops_named
from kgc.tiling.registry import plan_group
from kgc.fusion import FusionGraph, propose_partitions
from tests.attention_graphs import (AttentionShape, attention_eager, attention_graph,
                                    check_math_path, math_path_graph, math_path_inputs,
                                    attention_inputs, attention_reference, packed_decode_graph,
                                    tokens_major, tokens_major_graph)

torch = pytest.importorskip("torch")
_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
_KG = ("builtin.module(kgc-cse,kgc-dce,kg-decompose,kg-simplify,kgc-cse,kgc-dce,kg-fuse{%s},"
       "kg-tile{%s},"
       "kg-legalize-dot,kg-pad-mask,convert-kg-to-ttir)")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tiled(shape: AttentionShape, dtype: str, fuse: str = "", tile: str = "",
           graph=attention_graph, target: int = 90):
    context = ir.Context()
    module = graph(shape, dtype).build(context)
    with context:
        compile_module(module, emit="kg", pipeline=_KG % (fuse, tile), target=target)
    return module


def _kinds(module) -> list[str]:
    return [ir.StringAttr(k.attributes["kind"]).value for k in kernels_in(module)]


def _check(shape: AttentionShape, dtype: str, tile: str = "", fuse: str = "",
           graph=attention_graph) -> list[str]:
    module = _tiled(shape, dtype, fuse, tile, graph)
    inputs = attention_inputs(shape, _DTYPES[dtype], "cpu", seed=1)
    got = run_tiled(module, None, *inputs)
    want = attention_reference(*inputs)
    assert got.shape == want.shape and got.dtype == _DTYPES[dtype]
    reason = tensor_mismatch(got, attention_eager(*inputs), want)
    assert reason is None, reason
    return _kinds(module)


# keys x queries, head dims, grouped heads and masks taking turns.
SHAPES = [AttentionShape(1, 4 if (n + m) % 2 else 2, 2, m, n, 64 if m != 3 else 128, mask=n > 1 and m != 1)
          for n in (1, 1000, 4097) for m in (1, 3, 17)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_attention_is_one_kernel_and_exact(shape):
    kinds = _check(shape, "f32")
    assert kinds[0] == "attention"
    # A few (decoding) queries over many keys split them: a second kernel
    # combines the splits.
    assert kinds[1:] == (["reduction"] if shape.queries <= 16 and shape.keys >= 1000 else [])


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 8, 2, 1, 1000, 128),
                                   AttentionShape(2, 2, 2, 17, 1000, 64, mask=True)], ids=str)
def test_attention_in_half_floats(shape, dtype):
    _check(shape, dtype)


@pytest.mark.parametrize("tile", ["split-kv=1", "split-kv=4", "split-kv=32", "pack-heads=true",
                                  "pack-heads=false", "split-kv=8 pack-heads=false block-n=32",
                                  "block-m=16 block-n=128", "split-kv=3"])
def test_attention_knobs_keep_it_exact(tile):
    shape = AttentionShape(1, 8, 2, 3 if "block-m" in tile else 1, 4097, 64, mask=True)
    kinds = _check(shape, "f32", tile=tile)
    split = "split-kv=1" not in tile
    assert kinds == (["attention", "reduction"] if split else ["attention"])


@pytest.mark.parametrize("tile", ["", "split-kv=1", "split-kv=4 block-n=32"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 8, 2, 1, 1, 64),
                                   AttentionShape(2, 4, 2, 1, 1000, 64),
                                   AttentionShape(1, 8, 2, 3, 4097, 32)], ids=str)
def test_a_reshaped_result_is_stored_by_the_attention_kernel(shape, dtype, tile):
    # The heads of a group as the rows of the dots, given back reshaped to
    # [B, H, M, D]: the attention kernel (and the combination of its
    # splits) stores the reshaped result; no copy kernel follows.
    kinds = _check(shape, dtype, tile=tile, graph=packed_decode_graph)
    split = shape.keys > 1 and "split-kv=1" not in tile
    assert kinds == (["attention", "reduction"] if split else ["attention"])


@pytest.mark.parametrize("tile", ["", "block-m=16 block-n=32"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 4, 2, 17, 1000, 64, mask=True),
                                   AttentionShape(2, 2, 2, 3, 17, 32),
                                   AttentionShape(1, 8, 2, 1, 4097, 64),
                                   AttentionShape(1, 2, 1, 1, 1, 64)], ids=str)
def test_heads_given_back_to_tokens_are_stored_by_the_attention_kernel(shape, dtype, tile):
    # transformers' attention hands (B, H, M, D) back as (B, M, H * D): the
    # kernel stores each element where the transposed, reshaped result has
    # it, so neither the transpose nor the reshape is a copy kernel.
    module = _tiled(shape, dtype, tile=tile, graph=tokens_major_graph)
    inputs = attention_inputs(shape, _DTYPES[dtype], "cpu", seed=2)
    got = run_tiled(module, None, *inputs)
    want = tokens_major(attention_reference(*inputs))
    assert got.shape == want.shape == (shape.batch, shape.queries, shape.heads * shape.head_dim)
    reason = tensor_mismatch(got, tokens_major(attention_eager(*inputs)), want)
    assert reason is None, reason
    kinds = _kinds(module)
    assert kinds[0] == "attention"
    # Decoding splits its keys where the transpose only moves a dimension
    # of one query (the order is kept): the combining kernel stores it.
    split = shape.queries == 1 and shape.keys > 1000
    assert kinds[1:] == (["reduction"] if split else [])


def test_split_keys_are_refused_where_the_transpose_reorders_the_result():
    # The splits' partials are combined in P V's order, which a transpose of
    # several queries does not keep: asked for, split keys are an error
    # naming why, rather than a wrong store.
    with pytest.raises(KgcError, match="split keys combine partials in P V's order"):
        _tiled(AttentionShape(1, 4, 2, 17, 1000, 64), "f32", tile="split-kv=4",
               graph=tokens_major_graph)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [AttentionShape(1, 2, 2, 1, 1, 64),
                                   AttentionShape(2, 2, 2, 3, 17, 64),
                                   AttentionShape(1, 4, 4, 17, 1000, 32),
                                   AttentionShape(1, 2, 2, 4, 4097, 64)], ids=str)
def test_the_math_paths_attention_is_one_kernel_that_zeroes_masked_rows(shape, dtype):
    # scaled_dot_product_attention's math path, as Dynamo captures it for
    # half-float heads with a mask: widened to f32, bmm over merged heads,
    # the safe softmax. One attention kernel with f16/bf16 dots computes it,
    # and the middle query, whose keys are all masked, gets zeros.
    module = _tiled(shape, dtype, graph=math_path_graph)
    assert _kinds(module) == ["attention"]
    # Both dots on tensor cores: Q K^T and P V in the heads' half type.
    for dot in ops_named(module, "kg.tile_dot"):
        assert [str(ir.RankedTensorType(o.type).element_type) for o in list(dot.operands)[:2]] \
            == [dtype, dtype]
    inputs = math_path_inputs(shape, _DTYPES[dtype], seed=3)
    check_math_path(run_tiled(module, None, *inputs), inputs)


def test_split_keys_are_refused_where_the_softmax_zeroes_masked_rows():
    with pytest.raises(KgcError, match="log-sum-exp"):
        _tiled(AttentionShape(1, 2, 2, 1, 1000, 64), "f16", tile="split-kv=4",
               graph=math_path_graph)


@pytest.mark.parametrize("shape,stages", [
    (AttentionShape(1, 32, 8, 1, 4096, 128), 3),  # decoding, 4 key blocks per split
    (AttentionShape(1, 8, 2, 3, 100, 64), 2),  # one key block: nothing to pipeline
    # More queries than decoding: prefill's three stages over 16 key blocks.
    (AttentionShape(1, 4, 2, 17, 1000, 128), 3),
], ids=str)
def test_decoding_keeps_three_key_blocks_in_flight(shape, stages):
    attention = kernels_in(_tiled(shape, "f16"))[0]
    assert knob(attention, "num_stages") == stages


def _tuned_table(tmp_path, heads: int, queries: int, dim: int, config: AttentionConfig):
    """A tuned-defaults folder with one prefill entry (attention of `heads`
    x `queries` x `queries`, head dim `dim`)."""
    from kgc.tuned_defaults import Entry, TunedTable

    features = {"heads": heads, "m": queries, "n": queries, "d": dim, "e": dim, "g": 1}
    entry = Entry("attention", "f16", "", features, config, 5.9, 6.3, "attention")
    table = TunedTable("sm_90", "NVIDIA H200", "3.6.0", "0123abc",
                       "2026-11-29T06:00:00+00:00", (entry,))
    (tmp_path / "sm_90.json").write_text(table.to_json())
    return tmp_path


@pytest.mark.parametrize("shape,from_table", [
    (AttentionShape(1, 32, 32, 128, 128, 128), True),  # the entry's own shape
    (AttentionShape(1, 32, 32, 100, 100, 128), True),  # as many waves (two)
    # 16-row tiles of 300 queries over 32 heads make five waves on 132 SMs,
    # and those of 16 heads three: the entry's tiles were chosen for two.
    (AttentionShape(1, 32, 32, 300, 300, 128), False),
    (AttentionShape(1, 16, 16, 300, 300, 64), False),
    # Two waves, but the last of 28 programs where the entry's had 124.
    (AttentionShape(1, 20, 20, 128, 128, 128), False),
], ids=str)
def test_a_prefill_entry_serves_only_kernels_it_gives_as_many_waves(shape, from_table,
                                                                      tmp_path):
    entry = AttentionConfig(block_m=16, block_n=128, num_warps=4, num_stages=2, split_kv=1)
    folder = _tuned_table(tmp_path, 32, 128, 128, entry)
    knobs = ("block_m", "block_n", "num_warps", "num_stages")

    def tiles(table: str) -> tuple:
        module = _tiled(shape, "f16", tile=f"tuned-defaults={table}")
        return tuple(knob(kernels_in(module)[0], name) for name in knobs)

    # The entry's 128 keys a step cover 100 keys in one block of 100.
    entrys = (16, min(128, shape.keys), 4, 2)
    got = tiles(str(folder))
    assert got == (entrys if from_table else tiles("off"))
    assert from_table or got != entrys


@pytest.mark.parametrize("keys,from_table", [
    (384, True), (380, True),  # 0 and 4 keys of padding in blocks of 128
    (300, False),  # 84 keys of padding: the heuristic's blocks of 64 pad 20
], ids=str)
def test_a_prefill_entry_serves_only_kernels_its_key_block_pads_as_little(keys, from_table,
                                                                          tmp_path):
    entry = AttentionConfig(block_m=64, block_n=128, num_warps=8, num_stages=2, split_kv=1)
    folder = _tuned_table(tmp_path, 16, 384, 64, entry)
    module = _tiled(AttentionShape(1, 16, 16, keys, keys, 64), "f16",
                    tile=f"tuned-defaults={folder}")
    attention = kernels_in(module)[0]
    got = (knob(attention, "block_n"), knob(attention, "num_warps"))
    assert got == ((128, 8) if from_table else (64, 4))


@pytest.mark.parametrize("shape,target,tiles", [
    # Heads of 64: 128 keys a step, three stages in flight (four held one
    # program an SM: 20 heads x 1500 queries took 115.5 us against 67.9).
    (AttentionShape(1, 8, 8, 512, 512, 64), 90, dict(block_n=128, num_stages=3)),
    (AttentionShape(1, 4, 2, 17, 1000, 64), 90, dict(block_n=128, num_stages=3)),
    # A GPU of 99 KiB of shared memory per block (sm_86) has room for two.
    (AttentionShape(1, 8, 8, 512, 512, 64), 86, dict(block_n=128, num_stages=2)),
    # Heads of 128: 128 queries on 8 warps, three stages, where 32 heads of
    # 4 query tiles make about a wave of sm_90's 132 SMs...
    (AttentionShape(1, 32, 8, 512, 512, 128), 90,
     dict(block_m=128, block_n=64, num_warps=8, num_stages=3)),
    # ...but not where they would leave most SMs idle: 4 heads take 32
    # queries a tile, 64 programs (tiles of 64 would make 32, under 2/5 of
    # the SMs).
    (AttentionShape(1, 4, 4, 512, 512, 128), 90, dict(block_m=32, block_n=64, num_stages=3)),
    # Heads of 64 over 300 keys: blocks of 64 keys, which pad 20 of them
    # where blocks of 128 pad 84; 16 heads keep 64-query tiles (80
    # programs).
    (AttentionShape(1, 16, 16, 300, 300, 64), 90, dict(block_m=64, block_n=64, num_stages=3)),
], ids=str)
def test_prefill_attention_tiles(shape, target, tiles):
    option = f"target={target}"
    attention = kernels_in(_tiled(shape, "f16", fuse=option, tile=option, target=target))[0]
    assert {name: knob(attention, name) for name in tiles} == tiles


def test_split_kv_and_packing_are_in_the_kernel_config():
    module = _tiled(AttentionShape(1, 32, 8, 1, 4096, 128), "f16", tile="split-kv=8")
    attention, combine = kernels_in(module)
    assert knob(attention, "split_kv") == 8
    assert knob(attention, "pack_heads") is True
    # 8 key/value heads x 8 splits, the 4 query heads of a group in one
    # program; the combination: one program per query head.
    assert list(ir.DenseI64ArrayAttr(attention.attributes["grid"])) == [64, 1, 1]
    assert kernel_name(combine) == kernel_name(attention) + "_combine"
    # Each split's output and log-sum-exp, in f32.
    assert [str(r.type) for r in attention.results] == ["tensor<1x32x1x8x128xf32>",
                                                        "tensor<1x32x1x8xf32>"]


def test_without_the_attention_fusion_the_kernels_are_the_unfused_ones():
    kinds = _check(AttentionShape(1, 2, 2, 17, 1000, 64), "f32", fuse="fuse-attention=false")
    # The softmax over 1000 keys stays out of the product by V (its sum over
    # k would ride along a loop past 512 steps: `norm-over-long-k`).
    assert kinds == ["matmul", "reduction", "matmul"]


@pytest.mark.usefixtures("fresh_dynamo")
def test_a_decoders_prefill_attention_is_one_kernel_when_its_mask_comes_from_a_product():
    # At 512 tokens transformers builds the causal mask from a cumulative
    # sum over positions, which kgc computes as a product with a triangle of
    # ones: the mask then depends on a matmul. Q K^T is still the product
    # the scores are computed from; the math path's three kernels (scores,
    # softmax, P V) ran in its place before.
    pytest.importorskip("transformers")
    from kgc.bench import models
    from kgc.bench.capture import forward_graphs

    kinds = []
    for text in forward_graphs("llama", models.CPU, 512):
        context = ir.Context()
        context.allow_unregistered_dialects = True
        with context:
            module = ir.Module.parse(text).operation
            compile_module(module, emit="kg", target=90)
            kinds += _kinds(module)
    layers = models.CATALOGUE["llama"].build(models.CPU).config.num_hidden_layers
    assert kinds.count("attention") == layers, kinds


def test_bad_knob_values_are_errors_naming_the_knob():
    with pytest.raises(KgcError, match="attention kernel @attention_0_attention: split_kv = -1 is "
                                       "not legal; split_kv must be a positive integer"):
        _tiled(AttentionShape(1, 2, 2, 1, 100, 64), "f32", tile="kernel=attention_0_attention "
                                                              "split-kv=-1")
    with pytest.raises(ConfigError, match="split_kv = 0 is not legal"):
        AttentionConfig(split_kv=0).canonical({"m": 1, "n": 100})


def _decode_outputs(shape: AttentionShape):
    context = ir.Context()
    module = attention_graph(shape, "f16").build(context)
    with context:
        Pipeline.parse(decomposition_pipeline_text()).run(module)
        graph = FusionGraph.of_function(ops_named(module, "func.func")[0])
        (partition, *_) = propose_partitions(graph)
        (group,) = partition.groups_in(graph)
        return graph.isolated_outputs(group), context


def test_search_space_offers_split_kv_and_packing_for_decoding():
    outputs, _ = _decode_outputs(AttentionShape(1, 32, 8, 1, 4096, 128))
    plan = plan_group(outputs)
    assert plan.kind == "attention" and plan.knob_extents == {"m": 1, "n": 4096, "g": 4}
    space = AttentionConfig.space(plan.knob_extents, "f16")
    assert {c.split_kv for c in space} == {1, 4, 8, 16, 32}
    assert {c.pack_heads for c in space} == {False, True}
    for config in space[::7]:
        assert plan_group(outputs, config).config.split_kv <= config.split_kv
    # Many queries: no split is offered, nor packing without grouped heads.
    prefill = AttentionConfig.space({"m": 128, "n": 128}, "f16")
    assert {c.split_kv for c in prefill} == {1} and {c.pack_heads for c in prefill} == {None}


@pytest.mark.parametrize("target,splits", [(90, 16), (80, 8), (87, 2)])
def test_split_kv_fills_the_targets_sms(target, splits):
    # 8 key/value heads of 4 packed query heads, one query: 8 programs, the
    # keys split until the programs fill the target's SMs (132 on sm_90, 108
    # on sm_80, 16 on a Jetson Orin) at most once.
    outputs, _ = _decode_outputs(AttentionShape(1, 32, 8, 1, 4096, 128))
    plan = plan_group(outputs, target=targets.table_record(target))
    assert plan.config.split_kv == splits and plan.config.pack_heads


@pytest.mark.parametrize("keys,splits", [(1000, 16), (512, 8), (4096, 32), (64, 1)])
def test_decoding_splits_the_keys_down_to_one_tile_a_split(keys, splits):
    # 4 key/value heads of 2 packed query heads: 4 programs, 64-key tiles.
    # The keys split into up to 32 (4 x 32 programs on 132 SMs), each split
    # keeping a tile: 16 tiles of 1000 keys in 16 splits, 8 of 512 in 8.
    outputs, _ = _decode_outputs(AttentionShape(1, 8, 4, 1, keys, 64))
    assert plan_group(outputs, target=targets.table_record(90)).config.split_kv == splits


def test_a_table_entry_s_split_of_the_keys_is_sized_anew_for_the_kernel():
    from kgc.tuned_defaults import Entry, TunedTable

    # Measured at 512 keys with 8 splits (one tile each) and 32-key tiles:
    # 1000 keys take the entry's tiles, and the rule's splits for them.
    entry = Entry("attention", "f16", "", {"heads": 8, "m": 1, "n": 512, "d": 64, "e": 64,
                                           "g": 2},
                  AttentionConfig(block_n=32, num_warps=4, num_stages=3, split_kv=8), 4.0, 5.0)
    table = TunedTable("sm_90", "NVIDIA H200", "3.6.0", "0123abc", "2026-11-28T00:00:00+00:00",
                       (entry,))
    outputs, _ = _decode_outputs(AttentionShape(1, 8, 4, 1, 1000, 64))
    config = plan_group(outputs, target=targets.table_record(90), table=table).config
    assert (config.block_n, config.num_stages) == (32, 3)
    # 32 tiles of 32 keys: 32 splits of one (4 x 32 programs on 132 SMs).
    assert config.split_kv == 32


def test_graph_config_carries_attention_knobs():
    config = GraphConfig("attention", None, {"attention_0_attention": AttentionConfig(
        block_n=32, split_kv=4, pack_heads=False)})
    again = GraphConfig.load(config.to_json())
    assert again == config
    assert json.loads(config.to_json())["kernels"]["attention_0_attention"] == {
        "kind": "attention", "block_n": 32, "split_kv": 4, "pack_heads": False}
    assert KernelConfig.from_json('{"kind": "attention", "split_kv": 2}') == AttentionConfig(split_kv=2)
