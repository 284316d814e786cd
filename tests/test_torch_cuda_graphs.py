"""Mode "reduce-overhead" of the torch backend without a GPU: the mode's
options, its refusal on the CPU executor, the fallback without CUDA graphs
(with its warning) for graphs on host tensors, and the facts about an aten
graph that the capture relies on (which inputs it writes, what keeps it
from being captured). The captures themselves are checked on a GPU
(tests/gpu/test_cuda_graphs.py)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kgc import reference
from kgc.diagnostics import KgcError
from kgc.torch import Backend, KgcFallbackWarning
from kgc.torch.backend import _resolve_options
from kgc.torch.cuda_graphs import CudaGraphed, capture_obstacle, mutated_inputs

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


# The names of the kernel graphs every ReferenceBackend compiled (a list
# outside the backend: transformers' CompileConfig hands torch a deep copy).
COMPILED: list[str] = []


class ReferenceBackend(Backend):
    """The kgc backend with kernel graphs evaluated by kgc.reference on the
    CPU."""

    def __init__(self):
        super().__init__(compile_graph=self._compile, devices=None, require_cuda=False)

    @staticmethod
    def _compile(graph, mode):
        module = graph.build()
        name = graph.name
        COMPILED.append(name)
        return lambda *tensors: reference.evaluate(module, name, list(tensors))


def test_reduce_overhead_is_a_mode_of_the_cuda_executor():
    assert _resolve_options("reduce-overhead", None) == ("reduce-overhead", "cuda")
    assert _resolve_options(None, {"mode": "reduce-overhead"}) == ("reduce-overhead", "cuda")


def test_reduce_overhead_on_the_cpu_executor_is_refused_naming_both():
    with pytest.raises(KgcError, match="'reduce-overhead' replays CUDA graphs; the CPU executor"):
        _resolve_options(None, {"mode": "reduce-overhead", "executor": "cpu"})


def test_a_graph_on_host_tensors_runs_without_cuda_graphs_and_says_why():
    w = torch.randn(17, 5)
    backend = ReferenceBackend()

    def f(x):
        return torch.relu(x @ w) * 3

    compiled = torch.compile(f, backend=backend, mode="reduce-overhead")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (3, 3, 3):
            x = torch.randn(rows, 17)
            torch.testing.assert_close(compiled(x), f(x))
    messages = [str(w.message) for w in caught if issubclass(w.category, KgcFallbackWarning)]
    assert any("runs without CUDA graphs: an input is on cpu" in m for m in messages), messages
    assert backend.reports[-1].cuda_graphs is None
    partitions = backend.reports[-1].partitions  # kgc still computes it
    assert len(partitions) == 1 and partitions[0].fallback_reason is None


def test_a_graph_that_needs_autograd_runs_without_cuda_graphs_and_says_why():
    w = torch.randn(17, 5, requires_grad=True)
    backend = ReferenceBackend()
    compiled = torch.compile(lambda x: (x @ w).relu().sum(), backend=backend,
                             mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = compiled(torch.randn(3, 17))
        loss.backward()
    messages = [str(w.message) for w in caught if issubclass(w.category, KgcFallbackWarning)]
    assert any("a forward graph runs without CUDA graphs: the graph needs autograd" in m
               for m in messages), messages
    x = torch.randn(3, 17)
    expected = torch.autograd.grad((x @ w).relu().sum(), w)[0]
    w.grad = None
    compiled(x).backward()
    torch.testing.assert_close(w.grad, expected)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback without CUDA")
def test_the_registered_backend_without_cuda_runs_the_graph_in_pytorch():
    def f(x):
        return torch.tanh(x) + 1

    compiled = torch.compile(f, backend="kgc", mode="reduce-overhead")
    with pytest.warns(KgcFallbackWarning, match="no CUDA device"):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x), f(x))


def test_host_arguments_make_the_callable_run_as_compiled_with_one_warning():
    calls = []

    def run(x, y):
        calls.append(1)
        return (x + y,)

    graphed = CudaGraphed(run, "a test graph")
    with pytest.warns(KgcFallbackWarning, match="a test graph runs without CUDA graphs: an "
                                                "input is a host tensor"):
        for _ in range(3):
            x, y = torch.randn(3), torch.randn(3)
            torch.testing.assert_close(graphed(x, y)[0], x + y)
    assert len(calls) == 3 and graphed.graph_count == 0


def test_inputs_written_in_place_are_found_through_views():
    def writes(x, y, z):
        x.add_(y)
        z[0].mul_(2)
        return y * 2

    module = make_fx(writes)(torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4))
    assert mutated_inputs(module) == {0, 2}


def test_a_functional_graph_writes_no_input():
    # Views and new tensors only: nothing is written back after a replay.
    module = make_fx(lambda x, y: (x.t() @ y).relu())(torch.randn(3, 4), torch.randn(3, 5))
    assert mutated_inputs(module) == frozenset()


def test_a_graph_on_host_tensors_cannot_be_captured():
    module = make_fx(lambda x: x.sin())(torch.randn(3))
    assert capture_obstacle(module) == "an input is on cpu, not a CUDA device"


def test_a_graph_without_tensor_inputs_that_makes_a_host_result_cannot_be_captured():
    module = make_fx(lambda n: torch.arange(n) * 2)(5)
    assert capture_obstacle(module) == "a result is on cpu, not a CUDA device"


def _tiny_llama():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=256,
                                      initializer_range=0.3)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("backend_name", ["kgc", "reference"])
def test_transformers_compile_config_reaches_the_backend_and_keeps_eager_tokens(backend_name):
    # transformers' CompileConfig asks for mode "reduce-overhead" (with
    # fullgraph and dynamic for Dynamo); on the CPU, "kgc" runs the graph in
    # PyTorch for want of CUDA, and a backend partitioning host tensors runs
    # kgc's graphs without CUDA graphs, each saying why.
    from transformers import CompileConfig

    model = _tiny_llama()
    ids = torch.randint(3, 256, (2, 5), generator=torch.Generator().manual_seed(1))
    settings = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False,
                    cache_implementation="static", pad_token_id=0,
                    attention_mask=torch.ones_like(ids))
    eager = model.generate(ids, disable_compile=True, **settings)
    backend = "kgc" if backend_name == "kgc" else ReferenceBackend()
    compiled_before = len(COMPILED)
    compile_config = CompileConfig(backend=backend)
    compile_config._compile_all_devices = True  # transformers compiles on CUDA devices only
    assert compile_config.mode == "reduce-overhead"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = model.generate(ids, compile_config=compile_config, **settings)
    assert torch.equal(tokens, eager)
    messages = " ".join(str(w.message) for w in caught
                        if issubclass(w.category, KgcFallbackWarning))
    if backend_name == "kgc" and not torch.cuda.is_available():
        assert "no CUDA device" in messages
    if backend_name == "reference":
        assert "runs without CUDA graphs: an input is on cpu" in messages
        assert len(COMPILED) > compiled_before, "kgc computed parts of the model"


# CudaGraphed's bookkeeping (when to warm up, capture and replay; what is
# copied in and back; which inputs stay where they are) on the CPU: torch's
# CUDA graph API is replaced by a graph that records the work a capture
# launches (`_GraphAwareRun` adds it) and replays that work on the captured
# tensors, as a CUDA graph replays its kernels on the captured addresses.


class _RecordedGraph:
    capturing: "_RecordedGraph | None" = None

    def __init__(self):
        self.work = []

    def replay(self):
        for work in self.work:
            work()


class _Stream:
    def wait_stream(self, other):
        pass


@contextlib.contextmanager
def _capture(graph, stream=None, capture_error_mode=None):
    _RecordedGraph.capturing = graph
    try:
        yield
    finally:
        _RecordedGraph.capturing = None


@pytest.fixture
def recorded_graphs(monkeypatch):
    monkeypatch.setattr(torch.cuda, "CUDAGraph", _RecordedGraph)
    monkeypatch.setattr(torch.cuda, "graph", _capture)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


class _GraphAwareRun:
    """x * w + 1 into a fresh tensor, optionally adding 1 to x in place;
    the work joins the graph being captured, if any. `runs` counts every
    run, captured or not."""

    def __init__(self, writes_input: bool = False):
        self.writes_input = writes_input
        self.runs = 0

    def __call__(self, x, w):
        self.runs += 1
        out = torch.empty_like(x)

        def work():
            if self.writes_input:
                x.add_(1)
            torch.add(x * w, 1, out=out)
        work()
        if _RecordedGraph.capturing is not None:
            _RecordedGraph.capturing.work.append(work)
        return [out]


def _cpu_graphed(run, **kwargs) -> CudaGraphed:
    graphed = CudaGraphed(run, "a test graph", **kwargs)
    graphed.device_type = "cpu"
    return graphed


def test_the_first_call_warms_up_the_second_captures_and_later_calls_replay(recorded_graphs):
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run)
    w = torch.nn.Parameter(torch.randn(3, 17), requires_grad=False)
    results = []
    for call in range(5):
        x = torch.randn(3, 17)
        (result,) = graphed(x, w)
        torch.testing.assert_close(result, x * w + 1, msg=f"call {call}")
        results.append(result)
    # warm-up 1, then a run before the capture and the capture itself
    assert run.runs == 3 and graphed.graph_count == 1
    assert results[1] is results[2] is results[4], "replays return the graph's own results"
    assert results[0] is not results[1], "the warm-up's result is the caller's"


def test_a_parameter_is_captured_in_place_and_one_that_moves_is_captured_again(recorded_graphs):
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run)
    w = torch.nn.Parameter(torch.randn(3, 17), requires_grad=False)
    x = torch.randn(3, 17)
    for _ in range(3):
        graphed(x, w)
    with torch.no_grad():
        w.mul_(-2)  # read where it is by the next replay
    torch.testing.assert_close(graphed(x, w)[0], x * w + 1)
    assert run.runs == 3
    moved = torch.nn.Parameter(torch.randn(3, 17), requires_grad=False)
    torch.testing.assert_close(graphed(x, moved)[0], x * moved + 1)
    assert run.runs == 5 and graphed.graph_count == 1 and graphed.moved == {1}
    again = torch.randn(3, 17)  # copied into the graph from now on
    torch.testing.assert_close(graphed(x, again)[0], x * again + 1)
    assert run.runs == 5


def test_a_second_shape_gets_a_second_graph(recorded_graphs):
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run)
    for rows in (3, 3, 3, 5, 5, 5, 3):
        x, w = torch.randn(rows, 17), torch.randn(rows, 17)
        torch.testing.assert_close(graphed(x, w)[0], x * w + 1)
    assert graphed.graph_count == 2 and run.runs == 6


def test_an_input_written_in_place_is_written_back_once_per_call(recorded_graphs):
    run = _GraphAwareRun(writes_input=True)
    graphed = _cpu_graphed(run, mutated=frozenset({0}))
    w = torch.randn(3, 17)
    for call in range(4):
        x = torch.randn(3, 17)
        before = x.clone()
        (result,) = graphed(x, w)
        torch.testing.assert_close(x, before + 1, msg=f"call {call}")
        torch.testing.assert_close(result, (before + 1) * w + 1, msg=f"call {call}")
    # no extra run before the capture: it would write the input twice
    assert run.runs == 2


def test_a_transposed_input_is_captured_with_its_strides(recorded_graphs):
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run)
    w = torch.randn(17, 3)
    for call in range(4):
        x = torch.randn(3, 17).t()
        torch.testing.assert_close(graphed(x, w)[0], x * w + 1, msg=f"call {call}")
    assert graphed.graph_count == 1
    assert graphed.recordings[next(iter(graphed.recordings))].inputs[0].stride() == (1, 17)


def test_an_input_whose_elements_overlap_runs_without_a_graph(recorded_graphs):
    # An expanded row has no static copy of its strides to copy into.
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run)
    w = torch.randn(3, 17)
    with pytest.warns(KgcFallbackWarning, match="a tensor whose elements overlap"):
        for _ in range(3):
            x = torch.randn(1, 17).expand(3, 17)
            torch.testing.assert_close(graphed(x, w)[0], x * w + 1)
    assert graphed.graph_count == 0 and run.runs == 3


def test_a_guarded_graph_reads_its_inputs_signature_once(recorded_graphs, monkeypatch):
    # Dynamo's guards fix a static graph's input signature: reading it per
    # call (device, dtype, shape, strides of every parameter) is host time
    # each replay paid. Inputs and parameters still go where they must.
    import kgc.torch.cuda_graphs as cuda_graphs

    reads = []
    signature = cuda_graphs._signature
    monkeypatch.setattr(cuda_graphs, "_signature", lambda *a: reads.append(1) or signature(*a))
    run = _GraphAwareRun()
    graphed = _cpu_graphed(run, guarded=True)
    w = torch.nn.Parameter(torch.randn(3, 17), requires_grad=False)
    for call in range(5):
        x = torch.randn(3, 17)
        torch.testing.assert_close(graphed(x, w)[0], x * w + 1, msg=f"call {call}")
    moved = torch.nn.Parameter(torch.randn(3, 17), requires_grad=False)
    torch.testing.assert_close(graphed(x, moved)[0], x * moved + 1)
    assert len(reads) == 1 and graphed.graph_count == 1 and run.runs == 5
    # Without the guards, every call reads it.
    unguarded = _cpu_graphed(_GraphAwareRun())
    for _ in range(3):
        unguarded(torch.randn(3, 17), w)
    assert len(reads) == 4


def test_a_graph_of_static_shapes_is_guarded_and_a_dynamic_one_is_not():
    from kgc.torch.cuda_graphs import static_shapes

    graphs = []

    def keep(module, example_inputs):
        graphs.append(module)
        return module.forward

    from torch._functorch.aot_autograd import aot_module_simplified

    def backend(module, example_inputs):
        return aot_module_simplified(module, example_inputs, fw_compiler=keep)

    for dynamic in (False, True):
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(lambda x: x * 2 + 1, backend=backend, dynamic=dynamic)(
                torch.randn(3, 17))
    assert [static_shapes(g) for g in graphs] == [True, False]
