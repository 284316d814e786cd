"""`torch.compile(model, backend="kgc", mode="reduce-overhead")` on the GPU:
each graph's kgc kernels and the aten ops PyTorch runs between them are
replayed from CUDA graphs.

- The replays give what kgc gives without CUDA graphs, on fresh inputs of
  the same shapes, call after call; a module's weights changed in place are
  read by the next replay.
- A second input shape makes a second CUDA graph (a recompiled static graph,
  or one graph of dynamic shapes replayed per shape).
- A call's results are those of the graph, which the next call overwrites
  (as with torch's CUDA graphs).
- transformers' static-cache `generate()` with `CompileConfig(backend="kgc")`
  (whose mode is "reduce-overhead") gives eager's greedy tokens.

The host time of a call with and without CUDA graphs is printed and
recorded (`pytest -s`), not asserted.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

import kgc.torch  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_dynamo")]

WIDTH = 64
# f16 results of kgc's kernels, where the reference's may be compiled for
# another extent (a power-of-two bucket of a dynamic dim) and sum in another
# order; a replay on stale inputs is off by the inputs' whole size.
TOLERANCE = dict(rtol=1e-2, atol=1e-2)


class SortedMlp(torch.nn.Module):
    """An MLP block with an op kgc lacks (sort) in the middle: the graph
    mixes kgc's kernels and an op PyTorch runs, captured together."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.up = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.down = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        h = torch.relu(self.up(self.norm(x)))
        h = torch.sort(h, dim=-1).values
        return x + self.down(h) * 0.5


def _block() -> SortedMlp:
    torch.manual_seed(0)
    return SortedMlp().to("cuda", torch.float16).eval()


def _randn(*shape, seed: int):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to("cuda", torch.float16)


def _without_cuda_graphs(block, inputs, **compile_options) -> list:
    """kgc's results without CUDA graphs, one per input."""
    plain = torch.compile(block, backend="kgc", **compile_options)
    with torch.no_grad():
        results = [plain(x).clone() for x in inputs]
    torch._dynamo.reset()
    return results


def _graphed_reports(first: int) -> list:
    return [r for r in kgc.torch.reports()[first:] if r.cuda_graphs is not None]


def test_replays_match_kgc_without_cuda_graphs_on_fresh_inputs():
    block = _block()
    inputs = [_randn(3, 17, WIDTH, seed=seed) for seed in range(6)]
    expected = _without_cuda_graphs(block, inputs)
    first = len(kgc.torch.reports())
    graphed = torch.compile(block, backend="kgc", mode="reduce-overhead")
    with torch.no_grad():
        # Each result is cloned: the next call overwrites it.
        results = [graphed(x).clone() for x in inputs]
    for index, (result, wanted) in enumerate(zip(results, expected)):
        torch.testing.assert_close(result, wanted, **TOLERANCE,
                                   msg=lambda m, i=index: f"call {i}: {m}")
    (report,) = _graphed_reports(first)
    assert report.cuda_graphs.graph_count == 1
    assert report.kernel_count >= 1, "kgc computes some of the graph"
    assert any(op.startswith("aten.sort") for op, _ in report.fallbacks), \
        "PyTorch computes the sort, between kgc's kernels"


def test_weights_changed_in_place_are_read_by_the_next_replay():
    block = _block()
    graphed = torch.compile(block, backend="kgc", mode="reduce-overhead")
    x = _randn(3, 17, WIDTH, seed=1)
    with torch.no_grad():
        for _ in range(3):  # a warm-up, a capture, a replay
            graphed(x)
        block.up.weight.mul_(-1.5)
        block.down.bias.add_(1)
        result = graphed(x).clone()
        eager = block(x)
    torch.testing.assert_close(result, eager, rtol=2e-2, atol=2e-2)


def test_a_result_is_overwritten_by_the_next_call():
    block = _block()
    graphed = torch.compile(block, backend="kgc", mode="reduce-overhead")
    first_input, second_input = _randn(3, 17, WIDTH, seed=2), _randn(3, 17, WIDTH, seed=3)
    with torch.no_grad():
        for _ in range(2):  # a warm-up and a capture
            graphed(first_input)
        first = graphed(first_input)
        kept = first.clone()
        second = graphed(second_input)
        eager_second = block(second_input)
    assert first.data_ptr() == second.data_ptr(), "replays return the graph's own results"
    torch.testing.assert_close(second, eager_second, rtol=2e-2, atol=2e-2)
    assert not torch.equal(kept, second), "the inputs differ, so must the results"


def test_a_second_static_shape_makes_a_second_graph():
    block = _block()
    shapes = [(3, 17, WIDTH)] * 3 + [(5, 17, WIDTH)] * 3 + [(3, 17, WIDTH)] * 2
    inputs = [_randn(*shape, seed=10 + i) for i, shape in enumerate(shapes)]
    expected = _without_cuda_graphs(block, inputs, dynamic=False)
    first = len(kgc.torch.reports())
    graphed = torch.compile(block, backend="kgc", mode="reduce-overhead", dynamic=False)
    with torch.no_grad():
        results = [graphed(x).clone() for x in inputs]
    for index, (result, wanted) in enumerate(zip(results, expected)):
        torch.testing.assert_close(result, wanted, **TOLERANCE,
                                   msg=lambda m, i=index: f"call {i}: {m}")
    reports = _graphed_reports(first)
    assert len(reports) == 2, "one static graph per shape"
    assert [r.cuda_graphs.graph_count for r in reports] == [1, 1]


def test_a_graph_of_dynamic_shapes_holds_a_cuda_graph_per_shape():
    block = _block()
    rows = [3, 3, 3, 5, 5, 5, 3]
    inputs = [_randn(r, 17, WIDTH, seed=30 + i) for i, r in enumerate(rows)]
    expected = _without_cuda_graphs(block, inputs)
    first = len(kgc.torch.reports())
    graphed = torch.compile(block, backend="kgc", mode="reduce-overhead")
    torch._dynamo.mark_dynamic(inputs[0], 0)
    with torch.no_grad():
        results = [graphed(x).clone() for x in inputs]
    for index, (result, wanted) in enumerate(zip(results, expected)):
        torch.testing.assert_close(result, wanted, **TOLERANCE,
                                   msg=lambda m, i=index: f"call {i}: {m}")
    (report,) = _graphed_reports(first)
    assert report.cuda_graphs.graph_count == 2


def _host_time_per_call(function, x, calls: int = 50) -> float:
    with torch.no_grad():
        for _ in range(3):
            function(x)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            function(x)
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / calls


def test_replay_time_is_recorded(record_property):
    block = _block()
    x = _randn(1, 1, WIDTH, seed=4)  # a decode step's size: the host's time dominates
    plain_s = _host_time_per_call(torch.compile(block, backend="kgc"), x)
    torch._dynamo.reset()
    graphed_s = _host_time_per_call(torch.compile(block, backend="kgc", mode="reduce-overhead"),
                                    x)
    record_property("kgc_call_us", round(plain_s * 1e6, 1))
    record_property("kgc_reduce_overhead_call_us", round(graphed_s * 1e6, 1))
    print(f"\nper call: kgc {plain_s * 1e6:.1f} us, kgc with CUDA graphs "
          f"{graphed_s * 1e6:.1f} us ({torch.cuda.get_device_name()})")


def _assert_greedy_tokens_match(tokens, expected, expected_scores, prompt: int) -> None:
    """Equal tokens, or tokens that part from eager's only where eager's
    two best scores are within f16 rounding of each other (1% of the step's
    largest score): a near-tie that either order of summation may break
    either way."""
    if torch.equal(tokens, expected):
        return
    assert tokens.shape == expected.shape, (tokens.shape, expected.shape)
    column = int((tokens != expected).any(dim=0).nonzero()[0])
    step = column - prompt
    rows = (tokens[:, column] != expected[:, column]).nonzero().flatten()
    scores = expected_scores[step][rows].float()
    top = scores.topk(2, dim=-1).values
    margin = float((top[:, 0] - top[:, 1]).max())
    scale = float(scores[scores.isfinite()].abs().max())
    assert margin <= 1e-2 * scale, (f"greedy tokens part from eager's at step {step}, where "
                                    f"eager's two best scores are {margin:.3g} apart (largest "
                                    f"{scale:.3g})")


def test_static_cache_generate_with_kgc_compile_config_gives_eager_tokens(record_property):
    pytest.importorskip("transformers")
    from transformers import CompileConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    # Weights wider than the default initialization: the logits of a random
    # tiny model are then far enough apart that f16 rounding breaks no ties.
    config = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, initializer_range=0.3)
    model = LlamaForCausalLM(config).to("cuda", torch.float16).eval()
    new_tokens = 24
    settings = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                    cache_implementation="static", output_scores=True,
                    return_dict_in_generate=True, pad_token_id=0)
    generator = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 256, (2, 7), generator=generator).cuda() for _ in range(2)]

    eager = [model.generate(ids, attention_mask=torch.ones_like(ids), disable_compile=True,
                            **settings) for ids in prompts]
    torch._dynamo.reset()
    first = len(kgc.torch.reports())
    compile_config = CompileConfig(backend="kgc")
    assert compile_config.mode == "reduce-overhead"  # what transformers asks for by default
    timings = []
    for ids, expected in zip(prompts, eager):
        torch.cuda.synchronize()
        started = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids),
                             compile_config=compile_config, **settings)
        torch.cuda.synchronize()
        timings.append((time.perf_counter() - started) / new_tokens)
        _assert_greedy_tokens_match(out.sequences, expected.sequences, expected.scores,
                                    ids.shape[1])
    reports = kgc.torch.reports()[first:]
    assert reports, "generate() ran the model compiled by kgc"
    assert not [r.whole_graph_reason for r in reports if r.whole_graph_reason]
    graphed = _graphed_reports(first)
    assert graphed and max(r.cuda_graphs.graph_count for r in graphed) >= 1, \
        "the decode step is replayed from a CUDA graph"
    record_property("generate_ms_per_token", round(timings[-1] * 1e3, 3))
    print(f"\ngenerate() with kgc and CUDA graphs: {timings[-1] * 1e3:.3f} ms/token "
          f"(second call; first {timings[0] * 1e3:.3f}) on {torch.cuda.get_device_name()}")
