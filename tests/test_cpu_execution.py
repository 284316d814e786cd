"""Every op case and random graphs, lowered to tiled kernels and run on the CPU.

The GPU suite skips where there is no GPU; this checks the same lowering
numerically everywhere. Each graph is compiled to the `kg` stage (fused,
tiled, padded, masked: the IR that becomes TTIR) and its kernels run
program by program in torch (`kgc.execution`), which also fails on any
unmasked lane outside its buffer and on any output element no program
writes. Shapes are the cases' own: 1s, odd sizes, non-multiples of tiles.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings

import kgc
import kgc.reference
from kgc.execution import run_tiled
from kgc.tiling.kernel_ops import kernels_in
from tests.cases import make_inputs, parameters, tiled
from tests.comparison import as_tuple, assert_as_accurate_as_eager, assert_matches_torch, \
    tf32_rounded
from tests.test_random_graphs import graphs

torch = pytest.importorskip("torch")

_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}

# The full-size RMSNorm + MatMul (25M weights) takes about ten seconds per
# dtype here; the same fusion runs at 33x1000x100, and at full size on the GPU.
_MAX_INPUT_ELEMENTS = 1 << 22
CPU_PARAMETERS = [(case, dtype) for case, dtype in parameters()
                  if sum(math.prod(shape) for _, shape, _ in case.inputs) <= _MAX_INPUT_ELEMENTS]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("case,dtype", CPU_PARAMETERS, ids=lambda p: getattr(p, "name", p))
def test_op_case_runs_tiled_on_cpu(case, dtype):
    graph = case.graph(dtype)
    module = tiled(graph)
    kernels = kernels_in(module)
    inputs = make_inputs(case, dtype, "cpu", seed=0)
    results = as_tuple(run_tiled(module, None, *inputs))
    if not kernels:
        # Only a graph that returns its arguments (a cast to the same type)
        # needs no kernel.
        assert all(any(r is x for x in inputs) for r in results), case.name
    if case.tf32:
        # Torch's CPU matmul does not round to TF32; its result on rounded
        # operands is what a TF32 product computes.
        expected = case.reference(*[tf32_rounded(x) for x in inputs])
    else:
        expected = case.reference(*inputs)
    assert_matches_torch(results, expected, graph.build(), inputs, who="the tiled kernels",
                         tf32=case.tf32)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(graphs(safe=True))
def test_random_graph_runs_tiled_on_cpu(graph):
    _check_tiled_against_the_reference(graph, tiled(graph), seed=0)


def _check_tiled_against_the_reference(graph: kgc.Graph, module, seed: int) -> None:
    """`module` (`graph` tiled) run on the CPU executor on random inputs is
    as accurate as eager against the exact reference."""
    generator = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(t.shape, generator=generator).to(_DTYPES[t.dtype]) for t in graph.inputs]
    _assert_as_accurate_as_eager(graph, run_tiled(module, None, *inputs), inputs)


def _assert_as_accurate_as_eager(graph: kgc.Graph, results, inputs) -> None:
    """`results` of `graph`'s tiled kernels on `inputs` are as accurate as
    eager against the exact reference."""
    built = graph.build()
    eager = kgc.reference.evaluate(built, None, inputs)
    exact = kgc.reference.evaluate(built, None, inputs, exact=True)
    assert_as_accurate_as_eager(results, eager, exact, who="the tiled kernels")


def normalized_rotated_heads(seq: int, heads: int, head_dim: int, dtype: str) -> kgc.Graph:
    """Qwen3's attention prologue: an RMSNorm over each head (q_norm,
    k_norm), then the rotary embedding `x * cos + rotate_half(x) * sin`,
    whose halves are slices of the normalized head joined by a concat."""
    g = kgc.Graph("normalized_rotated_heads")
    x = g.input("x", (seq, heads, head_dim), dtype)
    weight = g.input("weight", (head_dim,), dtype)
    cos = g.input("cos", (seq, 1, head_dim), dtype)
    sin = g.input("sin", (seq, 1, head_dim), dtype)
    normalized = g.rms_norm(x, weight, eps=1e-6)
    half = head_dim // 2
    first = g.slice(normalized, [0, 0, 0], [seq, heads, half])
    second = g.slice(normalized, [0, 0, half], [seq, heads, half])
    g.output(normalized * cos + g.concat([-second, first], dim=2) * sin)
    return g


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("seq,heads,head_dim", [(1, 8, 64), (3, 4, 128), (17, 3, 34)])
def test_norm_reduces_the_whole_head_when_rotary_halves_read_it(seq, heads, head_dim, dtype):
    # The norm and the rotation fuse into one reduction kernel; each half of
    # the concat reads the norm in a window of the head. The norm's sum of
    # squares must still cover the whole head (it covered one half, so
    # Qwen3 generated wrong logits).
    graph = normalized_rotated_heads(seq, heads, head_dim, dtype)
    module = tiled(graph)
    assert len(kernels_in(module)) == 1
    generator = torch.Generator().manual_seed(seq * 1000 + head_dim)
    inputs = [torch.randn(t.shape, generator=generator).to(_DTYPES[dtype]) for t in graph.inputs]
    results = run_tiled(module, None, *inputs)
    x, weight, cos, sin = (t.double() for t in inputs)
    normalized = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
    half = head_dim // 2
    rotated = torch.cat([-normalized[..., half:], normalized[..., :half]], dim=-1)
    expected = normalized * cos + rotated * sin
    torch.testing.assert_close(results.double(), expected, atol=0.05, rtol=0.05)
    _assert_as_accurate_as_eager(graph, results, inputs)


def sliced_twice(rows: int, first: int) -> kgc.Graph:
    """A slice `q` of a fused projection, stored because two reductions
    read it in two pieces (GPT-2's split of its qkv projection, then a
    split of q). The first reduction's kernel iterates over its piece."""
    g = kgc.Graph("sliced_twice")
    y = g.input("y", (rows, 144), "f32")
    q = g.slice(y, [0, 0], [rows, 48])
    k = g.slice(y, [0, 48], [rows, 48])
    head = g.sum(g.slice(q, [0, 0], [rows, first]), -1, keepdim=True)
    tail = g.mean(g.slice(q, [0, first], [rows, 48 - first]), -1, keepdim=True)
    g.output(g.relu(k) + head - tail)
    return g


@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("first", [1, 17, 24, 47])
def test_a_value_read_in_pieces_is_stored_whole(rows, first):
    # `q` fused into the kernel of the first reduction was stored only
    # over that reduction's window of its columns; the second reduction
    # then read elements no kernel had written (on a GPU, whatever memory
    # held). A kernel's iteration must reach every element of what it
    # stores.
    module = tiled(sliced_twice(rows, first))
    y = torch.randn(rows, 144, generator=torch.Generator().manual_seed(rows * 100 + first))
    results = run_tiled(module, None, y)
    expected = torch.relu(y[:, 48:96]) + y[:, :first].sum(-1, keepdim=True) \
        - y[:, first:48].mean(-1, keepdim=True)
    torch.testing.assert_close(results, expected, atol=1e-5, rtol=1e-5)


def attention_storing_its_mask(queries: int, keys: int, dim: int) -> kgc.Graph:
    """BERT's attention as the search may cut it: the additive mask, one
    value per query broadcast over the keys, stored as a result beside
    softmax(scores + mask) @ v, in the kernel of the product, whose loop
    runs over the keys."""
    g = kgc.Graph("attention_storing_its_mask")
    scores = g.input("scores", (2, queries, keys), "f32")
    per_query = g.input("per_query", (queries, 1), "f32")
    v = g.input("v", (2, keys, dim), "f16")
    mask = g.broadcast_to(per_query, (queries, keys)) * 0.5
    probabilities = g.softmax(scores + mask, dim=-1)
    g.output(mask, g.matmul(g.cast(probabilities, "f16"), v))
    return g


@pytest.mark.parametrize("queries,keys,dim", [(1, 17, 16), (17, 100, 24), (64, 300, 64)])
def test_a_result_broadcast_over_the_k_loop_is_stored_at_every_step(queries, keys, dim):
    # The mask varies along the queries only, so its value was made once,
    # before the loop over the keys, and stored after it: one block of
    # keys written, the rest left as whatever memory held (inf and NaN on
    # a GPU). Its store must run over every key block. (Past 16 queries
    # kgc's default keeps the softmax out of the product: skinny-prologue.)
    graph = attention_storing_its_mask(queries, keys, dim)
    module = tiled(graph, "rules-off=skinny-prologue")
    assert len(kernels_in(module)) == 1
    _check_tiled_against_the_reference(graph, module, seed=queries * 1000 + keys)


def cross_entropy_gradient(batch: int, seq: int, vocab: int, dtype: str) -> kgc.Graph:
    """A causal LM's loss gradient as the torch frontend traces it: the
    [batch, seq, vocab] logits viewed as [tokens, vocab] rows, the labels'
    one-hot scaled by the loss's weight summed along each row, and the
    gradient softmax * sum - one-hot viewed back as the model's logits and
    added to their other gradient. Nothing computed from the reduced one-hot
    leads to the logits' side of the kernel."""
    tokens = batch * seq
    g = kgc.Graph("cross_entropy_gradient")
    logits = g.input("logits", (batch, seq, vocab), dtype)
    lse = g.input("lse", (tokens, 1), "f32")
    labels = g.input("labels", (tokens, 1), "f32")
    other = g.input("other", (batch, seq, vocab), dtype)
    rows = g.reshape(g.cast(logits, "f32"), (tokens, vocab))
    hit = g.cmp("eq", g.iota((tokens, vocab), 1, "f32"), g.broadcast_to(labels, (tokens, vocab)))
    onehot = g.select(hit, -0.5, g.constant(0.0, (tokens, vocab), "f32"))
    softmax = g.exp(rows - lse)
    gradient = onehot - softmax * g.sum(onehot, -1, keepdim=True)
    g.output(g.cast(g.reshape(gradient, (batch, seq, vocab)), dtype) + other)
    return g


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("batch,seq,vocab", [(1, 1, 17), (3, 17, 1000), (2, 3, 4097)])
def test_a_loss_gradient_iterates_over_the_models_tokens(batch, seq, vocab, dtype):
    # The reduction's rows are [batch * seq] and its result [batch, seq]:
    # iterating over the rows would split them, so the one-hot's kernel
    # stored an f32 [tokens, vocab] intermediate for a pointwise kernel of
    # its own (8 MiB of a Llama training step's 45). One kernel iterates
    # over [batch, seq] rows and reads the [tokens, vocab] values at their
    # merged index.
    graph = cross_entropy_gradient(batch, seq, vocab, dtype)
    module = tiled(graph)
    assert len(kernels_in(module)) == 1
    generator = torch.Generator().manual_seed(batch * 10000 + vocab)
    logits = torch.randn(batch, seq, vocab, generator=generator).to(_DTYPES[dtype])
    lse = torch.logsumexp(logits.reshape(-1, vocab).float(), -1, keepdim=True)
    labels = torch.randint(0, vocab, (batch * seq, 1), generator=generator).float()
    other = torch.randn(batch, seq, vocab, generator=generator).to(_DTYPES[dtype])
    inputs = [logits, lse, labels, other]
    results = run_tiled(module, None, *inputs)
    _assert_as_accurate_as_eager(graph, results, inputs)
