"""The search layer without a GPU: its API, variant space, configs and the
front ends that take them. (Timing and checking run in tests/gpu.)"""

import json
import subprocess
import sys

import pytest

import kgc
from kgc.parsing import canonical_source as parse_source
from kgc.runtime import cuda_available
from kgc.pipeline.config import GraphConfig
from kgc.search.space import configs_to_try, variant_space
from kgc.tiling.config import MatmulConfig
from tests.cases import headline_graph as headline


def test_mirage_names_build_the_same_graph_as_kgc_graph():
    g = kgc.Graph("rmsnorm_matmul")
    x = g.input("input0", (16, 4096), "f16")
    gamma = g.input("input1", (4096,), "f16")
    w = g.input("input2", (4096, 6144), "f16")
    g.output(g.matmul(g.rms_norm(x, gamma, normalized_shape=(4096,)), w))
    assert parse_source(headline())[0] == parse_source(g)[0]


def test_mirage_reduction_sums_keeping_the_dimension():
    g = kgc.new_kernel_graph()
    x = g.new_input((3, 17), kgc.float32)
    r = g.reduction(x, 1)
    assert r.shape == (3, 1)
    g.mark_output(r)
    assert "kg.reduce sum" in g.to_mlir()


def test_mirage_shape_errors_raise_at_the_call_naming_both_shapes():
    g = kgc.new_kernel_graph()
    a = g.new_input((16, 64), kgc.float16)
    b = g.new_input((32, 8), kgc.float16)
    with pytest.raises(ValueError, match=r"16x64.*32x8|\(16, 64\).*\(32, 8\)"):
        g.matmul(a, b)


def test_headline_compiles_without_a_gpu_and_running_it_says_a_gpu_is_needed():
    graph = kgc.compile(headline(), target="sm_90")
    assert "tt.func" in graph.ttir() and ".target sm_90" in graph.ptx()
    assert set(graph.stages()) == {k.name for k in graph.kernels()}
    if cuda_available():
        pytest.skip("this machine has a GPU")
    import torch

    x = torch.randn(16, 4096).half()
    gamma = torch.randn(4096).half()
    w = torch.randn(4096, 6144).half()
    with pytest.raises(kgc.KgcError, match="CUDA device"):
        graph(x, gamma, w)


@pytest.mark.skipif(cuda_available(), reason="checks the message without a GPU")
def test_superoptimize_without_a_gpu_says_a_cuda_device_is_needed():
    with pytest.raises(kgc.KgcError, match="needs a CUDA device"):
        headline().superoptimize()
    with pytest.raises(kgc.KgcError, match="needs a CUDA device"):
        headline().autotune()


@pytest.mark.parametrize("options, message", [
    ({"effort": "max"}, "effort must be one of low, default, high"),
    ({"profile_iters": 0}, "profile_iters must be an integer >= 1"),
    ({"warmup_iters": -1}, "warmup_iters must be an integer >= 0"),
    ({"budget_s": -5}, "budget_s must be a positive number"),
    ({"jobs": 0}, "jobs must be an integer >= 1"),
    ({"timeout_s": "long"}, "timeout_s must be a positive number"),
])
def test_superoptimize_refuses_bad_arguments_before_anything_else(options, message):
    with pytest.raises(kgc.KgcError, match=message):
        kgc.superoptimize(headline(), **options)


def test_superoptimize_refuses_an_unknown_option():
    with pytest.raises(TypeError, match="budget"):
        kgc.superoptimize(headline(), budget=3)


def test_variant_space_of_the_headline():
    text, function, _ = parse_source(headline())
    partitions, kernels = variant_space(text, function, effort="low")
    # The norm a kernel before the product by default; the fold and no
    # fusion are variants too.
    assert partitions[0].origin == "default" and len(partitions[0].kernels) == 2
    assert any(p.origin == "no fusion" for p in partitions)
    assert any(len(p.kernels) == 1 for p in partitions)
    # The matmul that follows an unfolded RMSNorm is one kernel, whatever
    # partition makes it.
    signatures = [s for p in partitions for _, s in p.kernels]
    assert len(set(signatures)) < len(signatures)
    for variants in kernels.values():
        assert variants.configs[0] == variants.default
        assert 1 <= len(variants.configs) <= 8
        assert len(set(variants.configs)) == len(variants.configs)
    assert [kernels[s].kind for _, s in partitions[0].kernels] == ["reduction", "matmul"]


def test_configs_to_try_takes_the_neighbours_of_the_default_first():
    extents = {"m": 16, "n": 6144, "k": 4096}
    space = MatmulConfig.space(extents, "f16")
    default = MatmulConfig(block_m=16, block_n=64, block_k=64, group_m=1, num_warps=4,
                           num_stages=4)
    tried = configs_to_try(default, space, 10, "seed")
    assert tried[0] == default and len(tried) == 10
    changed = [sum(a != b for a, b in zip(default.to_dict().values(), c.to_dict().values()))
               for c in tried[1:]]
    assert changed[0] == 1
    assert configs_to_try(default, space, 10, "seed") == tried
    assert len(configs_to_try(default, space, None, "seed")) == len(set(space) | {default})


def test_a_config_round_trips_through_json_and_compiles_its_partition():
    config = GraphConfig("rmsnorm_matmul", "0,1,2,4,6,7,8,9,10,11;12",
                         {"rmsnorm_matmul_1_matmul": MatmulConfig(block_m=16, block_n=128,
                                                                  block_k=128, num_warps=4,
                                                                  num_stages=3, split_k=1)})
    assert GraphConfig.load(config.to_json()) == config
    graph = kgc.compile(headline(), target="sm_90", config=config.to_json())
    assert [k.name for k in graph.kernels()] == ["rmsnorm_matmul_0_reduction",
                                                 "rmsnorm_matmul_1_matmul"]
    matmul = graph.module.kernels["rmsnorm_matmul_1_matmul"]
    assert (matmul.grid, matmul.num_warps, matmul.num_stages) == ((48, 1, 1), 4, 3)
    assert graph.config == config


@pytest.mark.parametrize("config, message", [
    ({"format": "kgc-config-1", "function": "rmsnorm_matmul", "partition": None,
      "kernels": {"nope": {"kind": "matmul"}}}, "kernel @nope, which this graph does not have"),
    ({"format": "kgc-config-1", "function": "rmsnorm_matmul", "partition": None,
      "kernels": {"rmsnorm_matmul_1_matmul": {"kind": "matmul", "block_m": 3}}},
     "block_m = 3 is not legal"),
    ({"format": "kgc-config-1", "function": "other", "partition": None}, "no function @other"),
    ({"function": "rmsnorm_matmul"}, "format"),
    ("{not json", "not JSON"),
])
def test_bad_configs_get_clear_errors(config, message):
    with pytest.raises(kgc.KgcError, match=message):
        kgc.compile(headline(), target="sm_90", config=config)


def test_kgc_compile_takes_a_config_file(tmp_path):
    config = GraphConfig("rmsnorm_matmul", None,
                         {"rmsnorm_matmul_1_matmul": MatmulConfig(block_n=128, num_stages=3,
                                                                  split_k=1)})
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "kgc.tools.cli", "compile", "--config",
                           str(path), "-o", str(out), "--emit", "ttir"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    _, kernel = manifest["kernels"]
    assert kernel["name"] == "rmsnorm_matmul_1_matmul"
    assert kernel["num_stages"] == 3 and kernel["grid"] == [48, 1, 1]


@pytest.mark.skipif(cuda_available(), reason="checks the message without a GPU")
def test_kgc_tune_without_a_gpu_is_a_clean_error():
    done = subprocess.run([sys.executable, "-m", "kgc.tools.cli", "tune"],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "needs a CUDA device" in done.stderr and "Traceback" not in done.stderr


# An embedding, its ids reshaped on the way, as a kernel's inline form (what
# the search checks candidates against) and inside a kernel: the search's
# random ids must index the table (seed 0 drew -33 for one before).
_EMBEDDING = """
func.func @embed(%table: tensor<2048x64xf16>, %ids: tensor<1x16xi64>) -> tensor<16x64xf16> {
  %flat = kg.reshape %ids : tensor<1x16xi64> -> tensor<16xi64>
  %rows = kg.gather %table[%flat] dim 0 : (tensor<2048x64xf16>, tensor<16xi64>) -> tensor<16x64xf16>
  return %rows : tensor<16x64xf16>
}
"""
_EMBEDDING_KERNEL = """
func.func @embed(%table: tensor<2048x64xf16>, %ids: tensor<1x16xi64>) -> tensor<16x64xf16> {
  %y = kg.kernel @embed_0(%table, %ids) : (tensor<2048x64xf16>, tensor<1x16xi64>) -> tensor<16x64xf16> {
  ^bb0(%t: tensor<2048x64xf16>, %i: tensor<1x16xi64>):
    %flat = kg.reshape %i : tensor<1x16xi64> -> tensor<16xi64>
    %rows = kg.gather %t[%flat] dim 0 : (tensor<2048x64xf16>, tensor<16xi64>) -> tensor<16x64xf16>
    kg.yield %rows : tensor<16x64xf16>
  }
  return %y : tensor<16x64xf16>
}
"""


_TYPES_AT_POSITIONS = """
func.func @types(%emb: tensor<2x64xf16>, %types: tensor<1x512xi64>, %pos: tensor<17xi64>) -> tensor<17x64xf16> {
  %line = kg.reshape %types : tensor<1x512xi64> -> tensor<512xi64>
  %at = kg.gather %line[%pos] dim 0 : (tensor<512xi64>, tensor<17xi64>) -> tensor<17xi64>
  %rows = kg.gather %emb[%at] dim 0 : (tensor<2x64xf16>, tensor<17xi64>) -> tensor<17x64xf16>
  return %rows : tensor<17x64xf16>
}
"""


def test_a_table_of_indices_gathered_is_bounded_by_the_table_its_values_index():
    # BERT's token types read at its positions, then embedded: the types'
    # values index the 2-row embedding, the positions the 512 types.
    from mlir import ir

    from kgc.search.kernels import index_bounds

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        assert index_bounds(ir.Module.parse(_TYPES_AT_POSITIONS).operation) == {1: 2, 2: 512}


@pytest.mark.parametrize("seed", range(4))
def test_random_indices_of_a_gather_lie_inside_its_table(seed):
    import torch
    from mlir import ir

    from kgc.reference import evaluate
    from kgc.search.kernels import index_bounds, input_specs
    from kgc.search.verify import random_inputs

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        assert index_bounds(ir.Module.parse(_EMBEDDING_KERNEL).operation) == {1: 2048}
        module = ir.Module.parse(_EMBEDDING).operation
        assert index_bounds(module) == {1: 2048}
        table, ids = random_inputs(input_specs(module), seed, "cpu", index_bounds(module))
        assert ids.dtype == torch.int64 and 0 <= int(ids.min()) and int(ids.max()) < 2048
        # Many distinct rows, not a few small ones.
        assert len(set(ids.flatten().tolist())) > 8
        torch.testing.assert_close(evaluate(module, "embed", [table, ids]), table[ids.flatten()])
