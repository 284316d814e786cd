"""The matmul kernels of a Llama-3-8B-shaped training step fit sm_90's
shared memory, so that their partitions compile instead of running in
PyTorch.

Two kinds of kernel of that step used to exceed the 227 KiB of an sm_90
block (kgc's compile refused them, and the whole partition fell back):

* a matmul whose prologue reads more than its two operand tiles per k step:
  the rotated query times the keys (the activation at three offsets, the
  f32 rotary tables, keys kept in f32) took 4 pipeline stages of 72 KiB;
  the stage count now counts every tile the k loop reads (so too for the
  gated MLP's input gradient, dGate W1^T + dUp W3^T, two dots of their own
  left operands, which had been counted as sharing one);
* the backward of the q, k and v projections, dQ Wq^T + dK Wk^T + dV Wv^T,
  whose k and v terms (k = 1024 beside the query's 4096) were folded in as
  LoRA's rank-r products: one dot over the whole rank of 1024, 256 KiB of
  operand tiles. Such a rank is no rank-r product: the terms are matmul
  kernels of their own.

Each is compiled for sm_90 down to cubin at the 8B shapes (no GPU needed),
and run at a reduced shape that failed the same way on the CPU executor of
tiled kernels against torch.
"""

from __future__ import annotations

import pytest
from mlir import ir

import kgc
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.targets import target_limits
from kgc.tiling.config import MatmulConfig
from kgc.tiling.kernel_ops import kernel_name, kernels_in, knob

torch = pytest.importorskip("torch")

from tests.comparison import assert_matches_torch  # noqa: E402
from tests.test_low_rank import _run  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SM90_SHARED = target_limits(90).max_shared_mem


def _random(shape, dtype, generator):
    return (torch.randn(shape, generator=generator) * 0.5).to(dtype)


def rotated_scores(heads: int, tokens: int, head_dim: int):
    """Llama's attention scores before the softmax, as the training forward
    computes them: the query rotated (rotate_half, the f32 cos and sin
    tables) and rounded to bf16, times keys stored in f32."""
    g = kgc.Graph("rotated_scores")
    x = g.input("x", (1, heads, tokens, head_dim), "bf16")
    cos = g.input("cos", (1, 1, tokens, head_dim), "f32")
    sin = g.input("sin", (1, 1, tokens, head_dim), "f32")
    keys = g.input("keys", (1, heads, tokens, head_dim), "f32")
    half = head_dim // 2
    first = g.slice(x, [0, 0, 0, 0], [1, heads, tokens, half])
    second = g.slice(x, [0, 0, 0, half], [1, heads, tokens, half])
    rotated = g.concat([g.neg(second), first], 3)
    query = g.cast(g.add(g.mul(g.cast(x, "f32"), cos), g.mul(g.cast(rotated, "f32"), sin)),
                   "bf16")
    g.output(g.matmul(query, g.transpose(g.cast(keys, "bf16"), [0, 1, 3, 2])))

    def reference(x, cos, sin, keys):
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        query = (x.float() * cos + rotated.float() * sin).to(torch.bfloat16)
        return (query.float() @ keys.to(torch.bfloat16).float().transpose(-1, -2))

    return g, reference, [(1, heads, tokens, head_dim), (1, 1, tokens, head_dim),
                          (1, 1, tokens, head_dim), (1, heads, tokens, head_dim)], \
        [torch.bfloat16, torch.float32, torch.float32, torch.float32]


def projections_backward(rows: int, hidden: int, kv_width: int):
    """The gradient of the input of the q, k and v projections:
    dQ Wq^T + dK Wk^T + dV Wv^T, the k and v terms narrower (grouped-query
    attention's fewer heads)."""
    g = kgc.Graph("qkv_backward")
    dq = g.input("dq", (rows, hidden), "bf16")
    wq = g.input("wq", (hidden, hidden), "bf16")
    dk = g.input("dk", (rows, kv_width), "bf16")
    wk = g.input("wk", (kv_width, hidden), "bf16")
    dv = g.input("dv", (rows, kv_width), "bf16")
    wv = g.input("wv", (kv_width, hidden), "bf16")
    total = g.add(g.add(g.cast(g.matmul(dq, wq), "f32"), g.cast(g.matmul(dk, wk), "f32")),
                  g.cast(g.matmul(dv, wv), "f32"))
    g.output(total)

    def reference(dq, wq, dk, wk, dv, wv):
        def term(a, b):
            return (a.float() @ b.float()).to(torch.bfloat16).float()
        return term(dq, wq) + term(dk, wk) + term(dv, wv)

    shapes = [(rows, hidden), (hidden, hidden), (rows, kv_width), (kv_width, hidden),
              (rows, kv_width), (kv_width, hidden)]
    return g, reference, shapes, [torch.bfloat16] * 6


def _compiled_for_sm90(graph: kgc.Graph):
    """`graph` compiled for sm_90 down to cubin: kgc's compile refuses a
    kernel over the target's shared memory. Without library kernels: their
    subject is kgc's own matmul kernels, which cuBLAS would replace at 512
    rows."""
    compiled = kgc.compile(graph, target="sm_90", library_kernels=False)
    shared = {name: kernel.shared for name, kernel in compiled.module.kernels.items()}
    assert all(size <= SM90_SHARED for size in shared.values()), shared
    return compiled


def _check_on_cpu(graph, reference, shapes, dtypes):
    generator = torch.Generator().manual_seed(7)
    tensors = [_random(shape, dtype, generator) for shape, dtype in zip(shapes, dtypes)]
    module, got = _run(graph, tensors)
    assert_matches_torch(got, reference(*tensors), graph.build(), tensors)
    return module


@pytest.mark.parametrize("heads,tokens", [(32, 64), (32, 512)], ids=["64-tokens", "512-tokens"])
def test_the_rotated_query_times_the_keys_fits_sm90_at_8b_shapes(heads, tokens):
    graph, _, _, _ = rotated_scores(heads, tokens, 128)
    _compiled_for_sm90(graph)


def test_a_prologue_that_reads_many_tiles_gets_fewer_stages_and_matches_torch():
    # 65 tokens: tiles padded to 128 rows and columns, whose six reads per
    # k step (3 bf16 and 3 f32 tiles of 128x64) are 144 KiB, and the two
    # operand tiles computed from them 32 KiB: 2 stages (4 took 464 KiB).
    graph, reference, shapes, dtypes = rotated_scores(2, 65, 128)
    _compiled_for_sm90(graph)
    module = _check_on_cpu(graph, reference, shapes, dtypes)
    [matmul] = [k for k in kernels_in(module) if kernel_name(k).endswith("_matmul")]
    assert knob(matmul, "num_stages") == 2


@pytest.mark.parametrize("rows", [64, 512])
def test_the_projections_backward_fits_sm90_at_8b_shapes(rows):
    graph, _, _, _ = projections_backward(rows, 4096, 1024)
    compiled = _compiled_for_sm90(graph)
    # The k and v terms are matmuls of their own, no rank-1024 product.
    assert len([k for k in compiled.module.kernels if "matmul" in k]) >= 2


def test_a_rank_too_wide_for_shared_memory_is_no_rank_r_product_and_matches_torch():
    # 100 rows (padded to 128) against a k and v width of 1024: as rank-r
    # products their operand tiles would take (128 + 64) x 1024 bf16.
    graph, reference, shapes, dtypes = projections_backward(100, 2048, 1024)
    _compiled_for_sm90(graph)
    module = _check_on_cpu(graph, reference, shapes, dtypes)
    assert len(kernels_in(module)) >= 2


def gated_mlp_input_gradient(rows: int, intermediate: int, hidden: int):
    """The gradient of the gated MLP's input: dGate W1^T + dUp W3^T, two
    matmuls of one output and k, each with its own left operand."""
    g = kgc.Graph("mlp_backward")
    d_gate = g.input("d_gate", (rows, intermediate), "bf16")
    w1 = g.input("w1", (intermediate, hidden), "bf16")
    d_up = g.input("d_up", (rows, intermediate), "bf16")
    w3 = g.input("w3", (intermediate, hidden), "bf16")
    g.output(g.add(g.cast(g.matmul(d_gate, w1), "f32"), g.cast(g.matmul(d_up, w3), "f32")))

    def reference(d_gate, w1, d_up, w3):
        def term(a, b):
            return (a.float() @ b.float()).to(torch.bfloat16).float()
        return term(d_gate, w1) + term(d_up, w3)

    shapes = [(rows, intermediate), (intermediate, hidden)] * 2
    return g, reference, shapes, [torch.bfloat16] * 4


def test_sibling_matmuls_of_their_own_operands_fit_sm90_at_8b_shapes():
    # Four 128x64 and 64x128 tiles per k step, not the three of a gated
    # MLP's forward, whose two dots share x.
    graph, _, _, _ = gated_mlp_input_gradient(512, 14336, 4096)
    compiled = _compiled_for_sm90(graph)
    assert len([k for k in compiled.module.kernels if "matmul" in k]) == 1


def test_sibling_matmuls_of_their_own_operands_get_fewer_stages_and_match_torch():
    # The 8B step's tiles and k loop at fewer rows and columns: 128x128
    # tiles, one unsplit wave over 65 k steps, which took 4 stages.
    graph, reference, shapes, dtypes = gated_mlp_input_gradient(129, 4097, 200)
    knobs = MatmulConfig(block_m=128, block_n=128, split_k=1)
    config = GraphConfig(graph.name, None, {"mlp_backward_0_matmul": knobs})
    kgc.compile(graph, target="sm_90", config=config)
    generator = torch.Generator().manual_seed(3)
    tensors = [_random(shape, dtype, generator) for shape, dtype in zip(shapes, dtypes)]
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg", config=config)
    [kernel] = kernels_in(module)
    assert knob(kernel, "num_stages") == 3
    assert_matches_torch(run_tiled(module, None, *tensors), reference(*tensors), graph.build(),
                         tensors)
