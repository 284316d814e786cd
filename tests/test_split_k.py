"""Split-K matmul kernels (kgc.tiling.split_k) on the CPU executor.

A matmul kernel with `split_k = S` becomes a partials kernel (S programs
per tile, each summing its chunk of k into an f32 workspace) and a reduce
kernel (the S partials summed in order, then the epilogue). These compile
the split kernels to the `kg` stage (tiled, padded, masked) and run them
program by program in torch against the reference, on row counts of 1, 3
and 17, k of 1000 and 4097 (not multiples of the k step or the split), and
n that is not a multiple of the tile.
"""

from __future__ import annotations

import pytest
from mlir import ir

import kgc
import kgc.reference
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import ConfigError, MatmulConfig
from kgc.tiling.kernel_ops import int_array, kernel_name, kernels_in, knob
from kgc.tiling.split_k import split_count
from tests.comparison import assert_matches_torch

torch = pytest.importorskip("torch")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def gemv(m, k, n, dtype):
    g = kgc.Graph("gemv")
    x = g.input("x", (m, k), dtype)
    w = g.input("w", (k, n), dtype)
    g.output(g.matmul(x, w))
    return g, lambda x, w: x.float() @ w.float()


def rmsnorm_matmul(m, k, n, dtype):
    g = kgc.Graph("rmsnorm_matmul")
    x = g.input("x", (m, k), dtype)
    gamma = g.input("gamma", (k,), dtype)
    w = g.input("w", (k, n), dtype)
    g.output(g.matmul(g.rms_norm(x, gamma, eps=1e-6), w))
    return g, lambda x, gamma, w: torch.nn.functional.rms_norm(
        x.float(), (k,), gamma.float(), eps=1e-6) @ w.float()


def gated_mlp(m, k, n, dtype):
    g = kgc.Graph("gated_mlp")
    x = g.input("x", (m, k), dtype)
    w1 = g.input("w1", (k, n), dtype)
    w2 = g.input("w2", (k, n), dtype)
    g.output(g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2)))
    return g, lambda x, w1, w2: torch.nn.functional.silu(x.float() @ w1.float()) * (
        x.float() @ w2.float())


def bias_gelu_residual(m, k, n, dtype):
    g = kgc.Graph("bias_gelu_residual")
    x = g.input("x", (m, k), dtype)
    w = g.input("w", (k, n), dtype)
    b = g.input("b", (n,), dtype)
    r = g.input("r", (m, n), dtype)
    g.output(g.gelu(g.matmul(x, w) + b, approximate="tanh") + r)
    return g, lambda x, w, b, r: torch.nn.functional.gelu(
        x.float() @ w.float() + b.float(), approximate="tanh") + r.float()


def lora(m, k, n, dtype, rank=16):
    g = kgc.Graph("lora")
    x = g.input("x", (m, k), dtype)
    w = g.input("w", (k, n), dtype)
    a = g.input("a", (k, rank), dtype)
    b = g.input("b", (rank, n), dtype)
    g.output(g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b)))
    return g, lambda x, w, a, b: x.float() @ w.float() + (x @ a).float() @ b.float()


def matmul_kernels(graph: kgc.Graph) -> list[str]:
    """The names of the matmul kernels of `graph`'s default fusion."""
    context = ir.Context()
    module = graph.build(context)
    with context:
        GraphConfig(graph.name).fuse(module)
        return [kernel_name(k) for k in kernels_in(module) if kernel_name(k).endswith("_matmul")]


def split_module(graph: kgc.Graph, split: int, **knobs) -> ir.Operation:
    """`graph` at the kg stage with `split_k = split` on its matmul kernels."""
    config = GraphConfig(graph.name, None, {name: MatmulConfig(split_k=split, **knobs)
                                            for name in matmul_kernels(graph)})
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg", config=config)
    return module


def inputs_for(graph_fn, m, k, n, dtype, seed=0):
    """The graph, its torch reference and fresh random inputs (never zeros)."""
    generator = torch.Generator().manual_seed(seed)
    graph, reference = graph_fn(m, k, n, dtype)
    context = ir.Context()
    module = graph.build(context)
    function = next(op for op in module.regions[0].blocks[0].operations
                    if op.operation.name == "func.func")
    shapes = [tuple(ir.RankedTensorType(t).shape)
              for t in ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs]
    tensors = [(torch.randn(shape, generator=generator) * 0.5).to(DTYPES[dtype]) for shape in shapes]
    return graph, reference, tensors


def check(graph_fn, m, k, n, dtype, split, **knobs):
    graph, reference, tensors = inputs_for(graph_fn, m, k, n, dtype)
    module = split_module(graph, split, **knobs)
    names = [kernel_name(kernel) for kernel in kernels_in(module)]
    assert names[:2] == [f"{graph.name}_0_matmul_partials", f"{graph.name}_0_matmul_reduce"], names
    assert sum(name.endswith("_partials") for name in names) == \
        sum(name.endswith("_reduce") for name in names)
    got = run_tiled(module, None, *tensors)
    assert_matches_torch(got, reference(*tensors), graph.build(), tensors)
    return module


@pytest.mark.parametrize("m,k,n,split", [(1, 1000, 100, 4), (3, 4097, 50, 3), (17, 1000, 33, 8),
                                          (3, 1000, 100, 16)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gemv_split_k_matches_torch(m, k, n, split, dtype):
    check(gemv, m, k, n, dtype, split)


# k of at most 512 and at most 16 rows: over longer loops or more rows kg-fuse
# keeps the norm out of the product.
@pytest.mark.parametrize("m,k,n,split", [(1, 500, 100, 4), (3, 511, 50, 4), (13, 300, 33, 2)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_rmsnorm_matmul_split_k_sums_the_squares_in_the_splits(m, k, n, split, dtype):
    module = check(rmsnorm_matmul, m, k, n, dtype, split)
    partials, reduce = kernels_in(module)
    # The partials kernel writes the matmul's accumulator and the sum of
    # squares of each row; the reduce kernel needs nothing else.
    splits = split_count(split, k, 64 if dtype != "f32" else 32)
    results = sorted(str(r.type) for r in partials.results)
    assert results == sorted([f"tensor<{splits}x{m}x{n}xf32>", f"tensor<{splits}x{m}x1xf32>"])
    assert len(reduce.operands) == 2


@pytest.mark.parametrize("m,k,n", [(1, 1000, 100), (3, 4097, 50), (17, 1000, 33)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_gated_mlp_split_k_applies_silu_after_the_sum(m, k, n, dtype):
    module = check(gated_mlp, m, k, n, dtype, 4)
    partials, reduce = kernels_in(module)
    # Two accumulators, two workspaces; the reduce kernel reads only them.
    assert len(partials.results) == 2
    assert len(reduce.operands) == 2


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_bias_activation_and_residual_run_after_the_sum(dtype):
    module = check(bias_gelu_residual, 3, 1000, 50, dtype, 4)
    partials, reduce = kernels_in(module)
    # The reduce kernel takes the bias and the residual, not x or w.
    assert len(reduce.operands) == 3


@pytest.mark.parametrize("m,k,n", [(1, 4097, 50), (3, 4097, 50), (17, 1000, 300)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_lora_splits_as_one_kernel_with_its_side_dot(m, k, n, dtype):
    # X W and X A ride one k loop; the partials of both are summed, then
    # (X A) B is added in the reduce kernel.
    module = check(lora, m, k, n, dtype, 4)
    partials, reduce = kernels_in(module)
    assert sorted(str(r.type) for r in partials.results) == sorted(
        [f"tensor<4x{m}x{n}xf32>", f"tensor<4x{m}x16xf32>"])
    # The reduce kernel reads B and the two workspaces.
    assert len(reduce.operands) == 3


def batched_bias_relu(m, k, n, dtype):
    g = kgc.Graph("bmm")
    x = g.input("x", (2, m, k), dtype)
    w = g.input("w", (2, k, n), dtype)
    b = g.input("b", (n,), dtype)
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    return g, lambda x, w, b: torch.relu(x.float() @ w.float() + b.float())


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_batched_matmul_splits_per_batch_and_tile(dtype):
    module = check(batched_bias_relu, 3, 1000, 50, dtype, 4)
    partials, _ = kernels_in(module)
    assert [str(r.type) for r in partials.results] == ["tensor<4x2x3x50xf32>"]


def test_the_split_index_is_a_grid_dimension_and_chunks_are_k_steps():
    graph, _, _ = inputs_for(gemv, 3, 4097, 300, "f16")
    module = split_module(graph, 3)
    partials, reduce = kernels_in(module)
    # 300 columns in tiles of 32 (m = 3 in one tile, a skinny product whose
    # rows of 4097 and 300 elements are not whole 16-byte vectors): 10
    # tiles x 3 splits.
    assert int_array(partials, "grid") == [10, 3, 1]
    assert int_array(reduce, "grid") == [10, 1, 1]
    assert knob(partials, "split_k") == 3


def test_more_splits_than_k_steps_become_one_per_step():
    assert split_count(16, 1000, 64) == 16
    assert split_count(16, 300, 64) == 5
    # 16 steps in 3 splits take chunks of 6: three splits.
    assert split_count(3, 1024, 64) == 3
    # 5 steps in 4 splits: chunks of 2 steps leave three splits, none empty.
    assert split_count(4, 320, 64) == 3
    assert split_count(1, 4096, 64) == 1
    assert split_count(None, 4096, 64) == 1


def test_split_k_one_is_the_plain_kernel():
    graph, _, _ = inputs_for(gemv, 3, 1000, 100, "f16")
    module = split_module(graph, 1)
    plain = kernels_in(module)
    assert [kernel_name(k) for k in plain] == ["gemv_0_matmul"]
    assert "split_k" not in plain[0].attributes


def test_a_split_of_one_k_step_is_the_plain_kernel():
    graph, _, _ = inputs_for(gemv, 3, 64, 100, "f16")
    module = split_module(graph, 4)
    assert [kernel_name(k) for k in kernels_in(module)] == ["gemv_0_matmul"]


def test_split_k_must_be_positive():
    with pytest.raises(ConfigError, match="split_k = 0 is not legal; split_k must be a positive"):
        MatmulConfig(split_k=0).canonical({"m": 4, "n": 4, "k": 4}, "k0")


def test_split_k_and_persistent_programs_exclude_one_another():
    graph, _, _ = inputs_for(gemv, 3, 1000, 100, "f16")
    with pytest.raises(kgc.KgcError, match="split_k = 4 and num_programs = 2 cannot both be set"):
        split_module(graph, 4, num_programs=2)


def test_split_k_round_trips_through_json():
    config = MatmulConfig(block_n=64, split_k=8)
    assert MatmulConfig.from_json(config.to_json()) == config
    assert GraphConfig.from_dict(GraphConfig("f", None, {"f_0_matmul": config}).to_dict()) \
        .kernels["f_0_matmul"].split_k == 8


# -- the search space -----------------------------------------------------------


@pytest.mark.parametrize("extents", [{"m": 16, "n": 6144, "k": 4096}, {"m": 8, "n": 11008, "k": 4096},
                                     {"m": 1, "n": 4096, "k": 4096}])
def test_the_space_offers_split_k_for_skinny_matmuls(extents):
    space = MatmulConfig.space(extents, "f16")
    # None leaves the split to kgc, 1 asks for none (where kgc would split).
    assert {c.split_k for c in space} == {None, 1, 2, 4, 8, 16}
    for config in space:
        if config.split_k:
            # Only where the tiles of the config leave SMs idle.
            tiles = -(-extents["m"] // config.block_m) * -(-extents["n"] // config.block_n)
            assert tiles < 132


@pytest.mark.parametrize("extents", [{"m": 4096, "n": 4096, "k": 4096},
                                     {"m": 2048, "n": 2048, "k": 2048},
                                     {"m": 384, "n": 1024, "k": 512}])
def test_the_space_has_no_split_k_for_big_or_square_matmuls(extents):
    assert all(c.split_k is None for c in MatmulConfig.space(extents, "f16"))


def test_the_search_tries_split_k_on_a_skinny_kernel_that_can_split():
    from kgc.parsing import canonical_source
    from kgc.search.space import variant_space

    graph, _ = rmsnorm_matmul(16, 4096, 6144, "f16")
    text, function, _ = canonical_source(graph)
    partitions, kernels = variant_space(text, function, effort="default")
    # The default partition's matmul (the norm a kernel before it), and the
    # fold the search tries too.
    matmul = kernels[partitions[0].kernels[-1][1]]
    folded = [kernels[p.kernels[0][1]] for p in partitions if len(p.kernels) == 1]
    assert matmul.kind == "matmul" and len(folded) == 1
    assert any(getattr(c, "split_k", None) for c in matmul.configs)
    assert any(c.split_k for c in folded[0].configs)


def test_the_search_leaves_split_k_out_where_the_k_reductions_chain():
    # A softmax over k before the matmul: its sum needs the max of the
    # whole row first, so the k loop cannot be cut.
    from kgc.parsing import canonical_source
    from kgc.search.space import variant_space

    g = kgc.Graph("softmax_matmul")
    x = g.input("x", (16, 4096), "f16")
    w = g.input("w", (4096, 256), "f16")
    g.output(g.matmul(g.softmax(x, dim=-1), w))
    text, function, _ = canonical_source(g)
    partitions, kernels = variant_space(text, function, effort="high")
    # (kgc's own partition keeps the softmax's exponentials out of the
    # matmul, whose programs along n would each compute them; the search
    # tries the fused kernel too.)
    fused = [kernels[p.kernels[0][1]] for p in partitions if len(p.kernels) == 1]
    assert len(fused) == 1 and fused[0].kind == "matmul"
    assert all(c.split_k is None for c in fused[0].configs)


# -- kgc-opt ----------------------------------------------------------------------

GEMV_TEXT = """
func.func @gemv(%x: tensor<3x1000xf16>, %w: tensor<1000x300xf16>) -> tensor<3x300xf16> {
  %y = kg.matmul %x, %w : (tensor<3x1000xf16>, tensor<1000x300xf16>) -> tensor<3x300xf16>
  return %y : tensor<3x300xf16>
}
"""


def _kgc_opt(*args: str, text: str = GEMV_TEXT):
    import subprocess

    from tests.tools import console_script

    return subprocess.run([console_script("kgc-opt"), "-", *args], input=text.encode(),
                          capture_output=True, timeout=120)


def test_kgc_opt_splits_k_by_option():
    result = _kgc_opt("--kg-decompose", "--kg-fuse", "--kg-tile=split-k=4")
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    assert "kg.kernel @gemv_0_matmul_partials" in out and "kg.kernel @gemv_0_matmul_reduce" in out
    assert "-> tensor<4x3x300xf32>" in out


def test_kgc_opt_refuses_a_negative_split():
    result = _kgc_opt("--kg-decompose", "--kg-fuse", "--kg-tile=split-k=-1")
    assert result.returncode != 0
    error = result.stderr.decode()
    assert "split_k = -1 is not legal; split_k must be a positive integer" in error
    assert "Traceback" not in error


# -- the split kgc chooses itself (split_k left unset) ----------------------------


@pytest.mark.parametrize("m,k,n,splits", [
    (1, 4096, 4096, 4),     # a decode step's projection: 64 tiles of 64 columns
    (1, 4096, 1024, 16),    # its K/V projection: 16 tiles
    (1, 11008, 4096, 4),    # its MLP down projection
    (16, 4096, 6144, 1),    # the headline RMSNorm + MatMul: one wave of 96 tiles
    (16, 11008, 4096, 4),   # 64 tiles: a wave of two thirds with its split
    (1, 4096, 11008, 1),    # 172 tiles already fill 132 SMs
    (1, 1000, 300, 1),      # 0.6 MB of operands: a second launch costs more
    (4096, 4096, 4096, 1),  # a square GEMM has tiles to spare
])
def test_kgc_splits_skinny_matmuls_that_cannot_fill_the_gpu(m, k, n, splits, monkeypatch):
    # Triton's kernels: the square GEMM would otherwise be a library call.
    monkeypatch.setenv("KGC_LIBRARY_KERNELS", "0")
    graph, _, _ = inputs_for(gemv, m, k, n, "f16")
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg")
        kernels = kernels_in(module)
        names = [kernel_name(kernel) for kernel in kernels]
        if splits == 1:
            assert names == ["gemv_0_matmul"]
            return
        assert names == ["gemv_0_matmul_partials", "gemv_0_matmul_reduce"]
        assert int_array(kernels[0], "grid")[1] == splits
        # Asking for no split keeps one kernel.
        unsplit = graph.build(context)
        compile_module(unsplit, emit="kg",
                       config=GraphConfig("gemv", None, {"gemv_0_matmul": MatmulConfig(split_k=1)}))
        assert [kernel_name(kernel) for kernel in kernels_in(unsplit)] == ["gemv_0_matmul"]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_kgc_s_own_split_of_one_row_matches_torch(dtype):
    # 1 x 4097 x 1024: 8 MB of operands in 16 tiles, split 16 ways by kgc,
    # the row grown to a dot of 16 rows; k not a multiple of the k step.
    _kgc_splits_and_matches_torch(1, 4097, 1024, dtype)


def _kgc_splits_and_matches_torch(m, k, n, dtype):
    """A product kgc splits on its own, given no knob, run against torch."""
    graph, reference, tensors = inputs_for(gemv, m, k, n, dtype)
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg")
    assert [kernel_name(k) for k in kernels_in(module)] == ["gemv_0_matmul_partials",
                                                           "gemv_0_matmul_reduce"]
    got = run_tiled(module, None, *tensors)
    assert_matches_torch(got, reference(*tensors), graph.build(), tensors)


@pytest.mark.parametrize("m,k,n,split", [(512, 4096, 16, True), (128, 4096, 16, True),
                                         (300, 8192, 64, True), (64, 2048, 512, False),
                                         (17000, 4096, 16, False)])
def test_few_tiles_over_a_long_k_loop_split_though_their_bytes_are_few(m, k, n, split):
    # LoRA's down-projection to its rank, 512 x 4096 -> 16, is 4 programs of
    # a 4096-deep loop: its time is one program's loop, not its 4 MiB. At
    # 2048 deep, or with tiles filling the SMs, kgc's rule stands.
    from kgc.tiling.graph_model import Node
    from kgc.tiling.registry import plan_group
    from kgc.targets import table_record

    a = Node("input", [], (m, k), "f16", {}, input_index=0)
    b = Node("input", [], (k, n), "f16", {}, input_index=1)
    plan = plan_group([Node("matmul", [a, b], (m, n), "f16", {"precision": None})],
                      target=table_record(90), table=None)
    assert (plan.split is not None) == split


@pytest.mark.parametrize("m", [3, 128, 513])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_a_rank_projection_split_by_kgc_matches_torch(m, dtype):
    # The projection kgc now splits on its own (at 3 rows as a skinny
    # product), run and checked at row counts that are not multiples of the
    # tile.
    _kgc_splits_and_matches_torch(m, 4096, 16, dtype)
