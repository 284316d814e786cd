"""LoRA (X W + (X A) B) as one matmul kernel (kgc.tiling.low_rank) on the
CPU executor: X A accumulated beside X W in the k loop as a dot over the
rank axis, (X A) B a dot over it after the loop; and the rank-r product on
its own, its left operand read from another kernel. Shapes with 3 and 17
rows, k of 1000 and 4097, n that is not a multiple of the tile."""

from __future__ import annotations

import pytest
from mlir import ir

import kgc
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import MatmulConfig
from kgc.tiling.kernel_ops import kernel_name, kernels_in
from tests.comparison import assert_matches_torch
from tests.test_split_k import inputs_for, lora

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(graph: kgc.Graph, tensors, config: GraphConfig | None = None):
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg", config=config)
    return module, run_tiled(module, None, *tensors)


def _close(got, want, graph: kgc.Graph, tensors):
    """`got` held to kgc.accuracy's rule, with torch's `want` as eager."""
    assert_matches_torch(got, want, graph.build(), tensors)


@pytest.mark.parametrize("m,k,n", [(3, 4097, 50), (17, 1000, 300), (3, 1000, 17)])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_lora_is_one_kernel_and_matches_torch(m, k, n, dtype):
    graph, reference, tensors = inputs_for(lora, m, k, n, dtype)
    module, got = _run(graph, tensors)
    assert [kernel_name(kernel) for kernel in kernels_in(module)] == ["lora_0_matmul"]
    _close(got, reference(*tensors), graph, tensors)


@pytest.mark.parametrize("rank", [1, 5, 32])
def test_ranks_up_to_the_n_tile(rank):
    graph, reference, tensors = inputs_for(lambda m, k, n, d: lora(m, k, n, d, rank=rank),
                                           5, 1000, 200, "f16")
    module, got = _run(graph, tensors)
    assert len(kernels_in(module)) == 1
    _close(got, reference(*tensors), graph, tensors)


def test_a_rank_r_product_reads_its_left_operand_from_another_kernel():
    # X A in a kernel of its own; (X A) B is the rank-r product of the main
    # kernel, its columns loaded one by one.
    graph, reference, tensors = inputs_for(lora, 17, 1000, 300, "f16")
    # After kg-decompose: 0 X W, 1 X A, 2 (X A) B, 3-4 casts, 5 add, 6 cast.
    config = GraphConfig("lora", "1;0,2,3,4,5,6")
    module, got = _run(graph, tensors, config)
    assert [len(list(kernel.operands)) for kernel in kernels_in(module)] == [2, 4]
    _close(got, reference(*tensors), graph, tensors)


def test_lora_compiles_for_sm90_as_one_kernel():
    # Its 64 tiles leave SMs idle: kgc splits the one kernel's k loop.
    graph, _, _ = inputs_for(lora, 16, 4096, 4096, "f16")
    compiled = kgc.compile(graph, target="sm_90")
    assert [launch.kernel for launch in compiled.function.launches] == [
        "lora_0_matmul_partials", "lora_0_matmul_reduce"]
    unsplit = GraphConfig("lora", None, {"lora_0_matmul": MatmulConfig(split_k=1)})
    compiled = kgc.compile(graph, target="sm_90", config=unsplit)
    assert [launch.kernel for launch in compiled.function.launches] == ["lora_0_matmul"]


def test_a_rank_wider_than_the_n_tile_stays_out_of_the_k_loop():
    # 16 rows of 4096 columns take n tiles of 64: X A of rank 128 does not
    # fit one; it is a kernel of its own, read by the rank-r product.
    graph, _, _ = inputs_for(lambda m, k, n, d: lora(m, k, n, d, rank=128), 16, 1024, 4096, "f16")
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg")
        kernels = kernels_in(module)
        # (The second kernel's k loop is split: f32 partials, then the sum.)
        assert [str(r.type) for k in kernels for r in k.results] == [
            "tensor<16x128xf16>", "tensor<4x16x4096xf32>", "tensor<16x4096xf16>"]


def test_block_n_below_the_rank_is_refused():
    graph, _, _ = inputs_for(lora, 3, 1000, 300, "f16")
    from kgc.tiling.config import MatmulConfig

    with pytest.raises(kgc.KgcError, match="a side matmul of rank 16 needs an n tile of as many "
                                           "columns; block_n is 8"):
        _run(graph, [], GraphConfig("lora", None, {"lora_0_matmul": MatmulConfig(block_n=8)}))


def test_x_a_also_returned_stays_a_kernel_of_its_own():
    # X A is a result too: a side matmul varies along the rank axis, which
    # no store of the kernel walks, so it gets a kernel of its own.
    g = kgc.Graph("lora_both")
    x = g.input("x", (3, 1000), "f16")
    w = g.input("w", (1000, 300), "f16")
    a = g.input("a", (1000, 16), "f16")
    b = g.input("b", (16, 300), "f16")
    t = g.matmul(x, a)
    g.output(g.add(g.matmul(x, w), g.matmul(t, b)), t)
    tensors = [torch.randn(s).half() * 0.5 for s in ((3, 1000), (1000, 300), (1000, 16), (16, 300))]
    module, (y, t_out) = _run(g, tensors)
    assert len(kernels_in(module)) == 2
    xf, wf, af, bf = (v.float() for v in tensors)
    _close((y, t_out), ((xf @ wf + (xf @ af).half().float() @ bf).half(), (xf @ af).half()), g,
           tensors)


def test_two_adapters_of_different_ranks_match_torch():
    # One kernel has one rank axis: the adapter of rank 8 cannot join the
    # rank-16 one, and kg-fuse leaves it to kernels of its own.
    g = kgc.Graph("two_adapters")
    x = g.input("x", (3, 1000), "f16")
    w = g.input("w", (1000, 77), "f16")
    a = g.input("a", (1000, 16), "f16")
    b = g.input("b", (16, 77), "f16")
    c = g.input("c", (1000, 8), "f16")
    d = g.input("d", (8, 77), "f16")
    first = g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b))
    g.output(g.add(first, g.matmul(g.matmul(x, c), d)))
    shapes = ((3, 1000), (1000, 77), (1000, 16), (16, 77), (1000, 8), (8, 77))
    generator = torch.Generator().manual_seed(7)
    tensors = [(torch.randn(s, generator=generator) * 0.5).half() for s in shapes]
    module, got = _run(g, tensors)
    assert 1 < len(kernels_in(module)) <= 3
    xf, wf, af, bf, cf, df = (v.float() for v in tensors)
    want = xf @ wf + (xf @ af).half().float() @ bf + (xf @ cf).half().float() @ df
    _close(got, want, g, tensors)


@pytest.mark.parametrize("m,split", [(16, 1), (16, 4), (3, 1)])
def test_sixteen_row_lora_dots_share_out_their_columns_between_warps(m, split):
    # Triton lays out the two dots of the k loop alike. A layout of
    # [num_warps, 1] on a tile of 16 rows gives every warp all 16 rows of
    # X W (each computes the whole dot); [1, num_warps] shares the columns.
    import re

    graph, _, _ = inputs_for(lora, m, 4096, 4096, "f16")
    config = GraphConfig("lora", None, {"lora_0_matmul": MatmulConfig(
        block_n=64, block_k=128, num_stages=4, split_k=split)})
    compiled = kgc.compile(graph, target="sm_90", config=config)
    ttgir = compiled.stages()["lora_0_matmul" if split == 1 else "lora_0_matmul_partials"]["ttgir"]
    layouts = re.findall(r"#mma\d* = #ttg\.nvidia_mma<\{versionMajor = 2, versionMinor = 0, "
                         r"warpsPerCTA = \[(\d+), (\d+)\]", ttgir)
    assert layouts and all(layout == ("1", "4") for layout in layouts), layouts
