"""Training through the kgc torch backend without a GPU: the forward and
backward graphs AOTAutograd makes of a graph that needs autograd are both
partitioned and converted, each backward op to kg ops, and a training step
of a small decoder gives eager PyTorch's loss and gradients.

Kernel graphs run on the CPU: mostly compiled by kgc's pipeline to tiled
kernels and run by the CPU executor of tile programs; where a test is about
what stays with PyTorch, evaluated by kgc.reference.
"""

from __future__ import annotations

import math
import operator
import warnings

import pytest
import torch
import torch.nn.functional as F

import kgc
from kgc.torch import KgcFallbackWarning
from tests.test_torch_frontend import ReferenceBackend, TiledBackend

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _randn(*shape, seed=[100], requires_grad=False):
    seed[0] += 1
    generator = torch.Generator().manual_seed(seed[0])
    return torch.randn(shape, generator=generator).requires_grad_(requires_grad)


def _gradients(function, inputs, backend):
    """The result and the gradients of its weighted sum with respect to
    every input that requires grad, compiled by `backend` and eagerly."""
    weights = None
    outcomes = []
    for run in (torch.compile(function, backend=backend, fullgraph=True), function):
        for x in inputs:
            x.grad = None
        result = run(*inputs)
        if weights is None:
            weights = _randn(*result.shape)
        (result * weights).sum().backward()
        outcomes.append((result.detach(), [x.grad for x in inputs if x.requires_grad]))
    return outcomes


def _backward_ops(backend) -> list[str]:
    return [op.split(":")[0] for report in backend.reports if report.kind == "backward"
            for partition in report.partitions for op in partition.ops]


# (id, function, input shapes (each requires grad unless it is a tuple
# (shape, False) or an index tensor), backward aten ops that must be in a
# kgc partition)
W = _randn(17, 5)
CASES = [
    # dX = dY W^T, dW = X^T dY: mm against transposed operands.
    ("linear", lambda x, w, b: F.linear(x, w, b), [(3, 7, 17), (5, 17), (5,)],
     ["aten.mm.default", "aten.sum.dim_IntList"]),
    ("bmm", lambda a, b: torch.bmm(a, b), [(2, 3, 17), (2, 17, 4)], ["aten.bmm.default"]),
    ("silu_gate", lambda x, y: F.silu(x) * y, [(3, 17), (3, 17)],
     ["aten.sigmoid.default", "aten.mul.Tensor"]),
    # GELU's backward whole: its decomposition needs erf, which kg lacks.
    ("gelu", lambda x: F.gelu(x), [(3, 17)], ["aten.gelu_backward.default"]),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [(3, 17)],
     ["aten.gelu_backward.default"]),
    ("relu", lambda x: torch.relu(x @ W), [(3, 17)], ["aten.mm.default"]),
    ("rms_norm", lambda x, w: F.rms_norm(x, (17,), w, eps=1e-6), [(2, 3, 17), (17,)],
     ["aten.sum.dim_IntList", "aten.mul.Tensor"]),
    ("rms_norm_explicit",
     lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)),
     [(2, 3, 17), (17,)], ["aten.sum.dim_IntList", "aten.mul.Tensor"]),
    # The forward saves the norm's mean and 1/std, which kgc computes too.
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (17,), w, b), [(2, 3, 17), (17,), (17,)],
     ["aten.sum.dim_IntList", "aten.mul.Tensor"]),
    ("softmax", lambda x: torch.softmax(x, -1), [(3, 17)], ["aten.mul.Tensor"]),
    ("log_softmax", lambda x: torch.log_softmax(x, -1), [(3, 17)], ["aten.exp.default"]),
    ("rotate_half", lambda x: torch.cat((-x[..., 9:], x[..., :9]), dim=-1) * 2, [(3, 18)],
     ["aten.slice_scatter.default"]),
    ("cross_entropy", lambda x, t: F.cross_entropy(x, t), [(5, 17), "targets"],
     ["aten.scatter.value"]),
]


def _case_inputs(specs):
    inputs = []
    for spec in specs:
        if spec == "targets":
            generator = torch.Generator().manual_seed(len(inputs))
            inputs.append(torch.randint(0, 17, (5,), generator=generator))
        else:
            inputs.append(_randn(*spec, requires_grad=True))
    return inputs


@pytest.mark.parametrize("name,function,specs,ops", CASES, ids=[c[0] for c in CASES])
def test_each_backward_op_converts_and_runs_in_kgc_kernels(name, function, specs, ops):
    backend = TiledBackend()
    inputs = _case_inputs(specs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        (actual, actual_grads), (expected, expected_grads) = _gradients(function, inputs,
                                                                        backend)
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)
    assert len(actual_grads) == len(expected_grads)
    for got, want in zip(actual_grads, expected_grads):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    assert [r.kind for r in backend.reports] == ["forward", "backward"]
    forward, backward = backend.reports
    assert not backward.fallbacks, backward.fallbacks
    assert not forward.fallbacks, forward.fallbacks
    converted = _backward_ops(backend)
    for op in ops:
        assert op in converted, (op, converted)


def _causal_lm_loss(logits, labels):
    # As transformers' ForCausalLMLoss computes it: the labels shifted left
    # by padding with the ignored index, the logits in f32, the mean over
    # the positions not ignored.
    shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), shifted.view(-1),
                           ignore_index=-100, reduction="mean")


@pytest.mark.parametrize("vocab", [17, 1000])
def test_a_causal_lms_loss_and_its_backward_run_in_kgc_kernels(vocab):
    logits = _randn(2, 9, vocab, requires_grad=True)
    generator = torch.Generator().manual_seed(vocab)
    labels = torch.randint(0, vocab, (2, 9), generator=generator)
    labels[0, 3] = labels[1, 5] = -100  # padding the loss ignores
    backend = TiledBackend()
    with warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        compiled = torch.compile(_causal_lm_loss, backend=backend, fullgraph=True)
        loss = compiled(logits, labels)
        loss.backward()
    got = logits.grad
    logits.grad = None
    expected = _causal_lm_loss(logits, labels)
    expected.backward()
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, logits.grad, atol=1e-6, rtol=1e-5)
    forward, backward = backend.reports
    assert not forward.fallbacks and not backward.fallbacks, (forward.fallbacks,
                                                              backward.fallbacks)
    converted = [op.split(":")[0] for r in backend.reports for p in r.partitions for op in p.ops]
    # log_softmax reaches a graph that needs autograd decomposed: its max,
    # its sum of exponentials and their log.
    for op in ("aten.constant_pad_nd.default", "aten.amax.default", "aten.exp.default",
               "aten.log.default", "aten.gather.default", "aten.sum.dim_IntList",
               "aten.scatter.value"):
        assert op in converted, (op, sorted(set(converted)))


def _projected_loss(h, w, labels):
    return _causal_lm_loss((h @ w).unsqueeze(0), labels.unsqueeze(0))


def test_a_losss_backward_keeps_the_bf16_logits_not_f32_log_probabilities(monkeypatch):
    # With log_softmax whole, the forward saved its f32 result (tokens x
    # vocabulary) for the backward; decomposed, the partitioner saves the
    # bf16 logits and two numbers a row, and recomputes the rest.
    import importlib

    backend_module = importlib.import_module("kgc.torch.backend")
    saved: list[tuple[tuple[int, ...], torch.dtype]] = []
    compile_aten = backend_module.Backend.compile_aten

    def recording(self, module, mode="default", kind="inference"):
        if kind == "forward":
            results = next(n for n in module.graph.nodes if n.op == "output").args[0]
            saved.extend((tuple(r.meta["val"].shape), r.meta["val"].dtype) for r in results[1:])
        return compile_aten(self, module, mode, kind)

    monkeypatch.setattr(backend_module.Backend, "compile_aten", recording)
    generator = torch.Generator().manual_seed(11)
    h = torch.randn(17, 32, generator=generator).bfloat16().requires_grad_()
    w = (torch.randn(32, 1000, generator=generator) * 0.2).bfloat16().requires_grad_()
    labels = torch.randint(0, 1000, (17,), generator=generator)
    backend = TiledBackend()
    compiled = torch.compile(_projected_loss, backend=backend, fullgraph=True)
    loss = compiled(h, w, labels)
    loss.backward()
    got = (loss.detach(), h.grad, w.grad)
    h.grad = w.grad = None
    expected = _projected_loss(h, w, labels)
    expected.backward()
    torch.testing.assert_close(got, (expected.detach(), h.grad, w.grad), atol=1e-5, rtol=1e-5)
    assert ((17, 1000), torch.bfloat16) in saved, saved
    assert not [s for s in saved if s[1] == torch.float32 and 1000 in s[0]], saved
    # The backward's report counts what it reads of them.
    backward = next(r for r in backend.reports if r.kind == "backward")
    assert backward.saved == (len(saved), sum(math.prod(shape) * dtype.itemsize
                                              for shape, dtype in saved))
    assert all(r.saved is None for r in backend.reports if r.kind != "backward")


def test_an_inference_graph_keeps_log_softmax_whole():
    backend = TiledBackend()
    logits = _randn(2, 9, 1000)
    labels = torch.randint(0, 1000, (2, 9), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        loss = torch.compile(_causal_lm_loss, backend=backend, fullgraph=True)(logits, labels)
    torch.testing.assert_close(loss, _causal_lm_loss(logits, labels), atol=1e-5, rtol=1e-5)
    converted = [op.split(":")[0] for r in backend.reports for p in r.partitions for op in p.ops]
    assert "aten._log_softmax.default" in converted


def test_a_strided_slice_scatter_stays_with_pytorch():
    # kg has no strided scatter: the backward of x[:, ::2] keeps its
    # slice_scatter in PyTorch, and the gradient is still right.
    backend = ReferenceBackend()
    x = _randn(3, 18, requires_grad=True)
    (_, (got,)), (_, (want,)) = _gradients(lambda t: t[:, ::2].exp(), [x], backend)
    torch.testing.assert_close(got, want)
    (backward,) = [r for r in backend.reports if r.kind == "backward"]
    reasons = {op.split(":")[0]: why for op, why in backward.fallbacks}
    assert "step 2" in reasons["aten.slice_scatter.default"]


def test_an_embeddings_gradient_is_a_scatter_add_in_kgc():
    # Its backward adds rows of the gradient into the rows the tokens index
    # (index_put with accumulate; token 4 three times): kg.scatter add.
    backend = ReferenceBackend()
    table = _randn(11, 17, requires_grad=True)
    tokens = torch.tensor([[1, 4, 4], [0, 10, 4]])
    (_, (got,)), (_, (want,)) = _gradients(lambda t: F.embedding(tokens, t) * 3, [table],
                                           backend)
    torch.testing.assert_close(got, want)
    (backward,) = [r for r in backend.reports if r.kind == "backward"]
    assert not backward.fallbacks, backward.fallbacks
    assert "aten.index_put.default" in _backward_ops(backend)


def test_a_gather_of_several_indices_per_line_stays_with_pytorch():
    backend = ReferenceBackend()
    x = _randn(4, 17, requires_grad=True)
    index = torch.randint(0, 17, (4, 3), generator=torch.Generator().manual_seed(3))
    (_, (got,)), (_, (want,)) = _gradients(lambda t: t.gather(1, index) * 2, [x], backend)
    torch.testing.assert_close(got, want)
    (forward,) = [r for r in backend.reports if r.kind == "forward"]
    reasons = {op.split(":")[0]: why for op, why in forward.fallbacks}
    assert "one index per line" in reasons["aten.gather.default"]


TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def _model(family: str):
    transformers = pytest.importorskip("transformers")
    config_class, model_class = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
    }[family]
    torch.manual_seed(0)
    return model_class(config_class(**TINY)).float()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_a_training_step_gives_eagers_loss_and_gradients(family):
    # Every kernel graph is compiled by kgc's pipeline to tiled kernels and
    # run by the CPU executor of tile programs, as on a GPU.
    model = _model(family)
    tokens = torch.randint(0, TINY["vocab_size"], (2, 17), generator=torch.Generator()
                           .manual_seed(1))
    backend = TiledBackend()
    compiled = torch.compile(model, backend=backend)
    loss = compiled(input_ids=tokens, labels=tokens).loss
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    expected = model(input_ids=tokens, labels=tokens).loss
    expected.backward()
    torch.testing.assert_close(loss.detach(), expected.detach(), atol=1e-5, rtol=1e-5)
    for name, p in model.named_parameters():
        assert grads[name] is not None, name
        torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4, msg=name)
    kinds = [r.kind for r in backend.reports]
    assert "forward" in kinds and "backward" in kinds, kinds
    backward = [r for r in backend.reports if r.kind == "backward"]
    ops = [op.split(":")[0] for r in backward for p in r.partitions for op in p.ops]
    # The decoder's backward runs in kgc kernels: its matmuls (dW = X^T dY
    # and dX = dY W^T), the norms' weight gradients summed over batch and
    # sequence, the rotary embedding's slices scattered back.
    for op in ("aten.mm.default", "aten.sum.dim_IntList", "aten.slice_scatter.default"):
        assert op in ops, (op, sorted(set(ops)))
    assert all(p.fallback_reason is None for r in backend.reports for p in r.partitions)
    # Nothing runs in PyTorch: the copies of the key-value cache's empty
    # tensors (kg has no empty tensor), which only the cache's cat read, go
    # with the empty operands the cat drops. The embedding's lookup and its
    # gradient's scatter-add are kg.gather and kg.scatter.
    fallbacks = {op.split(":")[0] for r in backend.reports for op, _ in r.fallbacks}
    assert fallbacks == set(), fallbacks


def test_an_autocast_steps_partitions_take_their_inputs_without_copies(monkeypatch):
    # Under bf16 autocast the forward casts each weight and transposes it
    # for its product, and saves the cast for the backward, which
    # transposes it back. Each partition's result comes back in its traced
    # strides, so every partition input reaches the kernels contiguous (or
    # as the storage of a permuted view): none is copied first, as one per
    # weight per step was when the forward's results came back contiguous.
    import importlib

    backend_module = importlib.import_module("kgc.torch.backend")
    real = backend_module.CompiledPartition.forward
    strided = []

    def forward(self, *arguments):
        # A half of a training graph takes its inputs as one list.
        given = arguments[0] if self.takes_list else arguments
        strided.extend((self.converted.graph.name, tuple(t.shape), t.stride())
                       for t in self.converted.graph_arguments(given)
                       if not t.is_contiguous())
        return real(self, *arguments)

    monkeypatch.setattr(backend_module.CompiledPartition, "forward", forward)
    model = torch.nn.Sequential(torch.nn.Linear(17, 40), torch.nn.SiLU(),
                                torch.nn.Linear(40, 5, bias=False))
    x = _randn(3, 7, 17)
    backend = TiledBackend()
    outcomes = []
    for run in (torch.compile(model, backend=backend), model):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = run(x).float().square().mean()
        loss.backward()
        outcomes.append([loss.detach()] + [p.grad for p in model.parameters()])
    assert {r.kind for r in backend.reports} == {"forward", "backward"}
    assert strided == []
    for actual, expected in zip(*outcomes):
        torch.testing.assert_close(actual, expected, atol=2e-2, rtol=2e-2)


def test_explain_with_grad_on_shows_forward_and_backward_kernels(capsys):
    w = _randn(17, 5, requires_grad=True)
    x = _randn(3, 17)
    explanation = kgc.explain(lambda t: torch.relu(t @ w).sum(), x)
    printed = capsys.readouterr().out
    assert [g.kind for g in explanation.graphs] == ["forward", "backward"]
    assert "graph 1 (backward):" in printed
    backward_kernels = explanation.graphs[1].partitions[0].kernel_ops
    assert any("aten.mm.default" in " ".join(ops) for ops in backward_kernels.values())


def test_explain_shows_a_training_steps_forward_and_backward_kernels(capsys):
    # A decoder's loss with grad on: explain makes the backward graph now,
    # without running it, and lists its kernels beside the forward's.
    model = _model("llama")
    tokens = torch.randint(1, TINY["vocab_size"], (2, 17),
                           generator=torch.Generator().manual_seed(3))
    explanation = kgc.explain(
        lambda ids: model(input_ids=ids, labels=ids, use_cache=False).loss, tokens)
    printed = capsys.readouterr().out
    assert [g.kind for g in explanation.graphs] == ["forward", "backward"]
    forward, backward = explanation.graphs
    assert "graph 0 (forward):" in printed and "graph 1 (backward):" in printed
    backward_text = printed[printed.index("graph 1 (backward):"):]
    assert "kernel " in backward_text
    # What the step holds between its halves: the tensors the forward saved.
    count, size = backward.saved
    assert count > 0 and size > 0
    assert f"reads {count} tensor(s) its forward saved, {size / 2**20:.2f} MiB" in backward_text
    kernel_ops = [op.split(":")[0] for p in backward.partitions
                  for ops in p.kernel_ops.values() for op in ops]
    # The weight gradients' matmuls, the norms' weight gradients, the
    # loss's backward scatter and the embedding's gradient (a scatter-add)
    # are among the backward's kernels; nothing is left to PyTorch.
    for op in ("aten.mm.default", "aten.sum.dim_IntList", "aten.scatter.value",
               "aten.index_put.default"):
        assert op in kernel_ops, (op, sorted(set(kernel_ops)))
    assert backward.fallbacks == []
    # Nothing ran backward: no parameter has a gradient.
    assert all(p.grad is None for p in model.parameters())


def _failing_compile(monkeypatch, fails):
    """kgc.compile, which raises `fails(graph)` where that is an error;
    returns the list of (graph name, target) it was called with."""
    calls = []
    real_compile = kgc.compile

    def compile_or_fail(graph, *, target=None, **options):
        calls.append((graph.name, target))
        error = fails(graph)
        if error is not None:
            raise kgc.KgcError(error)
        return real_compile(graph, target=target, **options)

    monkeypatch.setattr(kgc, "compile", compile_or_fail)
    return calls


def test_explain_compiles_for_a_target_and_leaves_a_kernel_that_fails_to_pytorch(
        capsys, monkeypatch):
    # compile_for compiles each kernel graph for that GPU (no GPU needed). A
    # kernel that fails to compile (here the backward's matmul) leaves its
    # ops to PyTorch, each with the error, as the backend on that GPU would;
    # the rest of its partition is compiled without them.
    calls = _failing_compile(monkeypatch, lambda graph: (
        f"kernel @{graph.name}_0_matmul needs 300000 B of shared memory per program"
        if graph.name == "kgc_backward_0" and "kg.matmul" in graph.to_mlir() else None))
    w = _randn(17, 5, requires_grad=True)
    x = _randn(3, 17)
    explanation = kgc.explain(lambda t: torch.relu(t @ w).sum(), x, compile_for="sm_90")
    printed = capsys.readouterr().out
    assert {target for _, target in calls} == {90}
    assert explanation.compiled_for == 90
    forward, backward = explanation.graphs
    assert forward.partitions[0].fallback_reason is None and forward.partitions[0].kernel_ops
    assert all(p.fallback_reason is None for p in backward.partitions)
    reasons = {op.split(":")[0]: why for op, why in backward.fallbacks}
    assert reasons["aten.mm.default"] == ("its kernel failed to compile: kernel "
                                          "@kgc_backward_0_0_matmul needs 300000 B of shared "
                                          "memory per program")
    assert "kernel graphs compiled for sm_90 down to cubin: 0 partition(s) failed" in printed
    assert "aten.mm.default:mm_1: its kernel failed to compile: kernel @kgc_backward_0_0" in printed


def test_explain_shows_a_partition_whose_failure_names_no_kernel_in_pytorch(capsys, monkeypatch):
    # An error that names no kernel of the partition cannot be pinned on
    # some of its ops: the partition runs in PyTorch whole.
    _failing_compile(monkeypatch, lambda graph: "the compile failed"
                     if graph.name == "kgc_backward_0" else None)
    w = _randn(17, 5, requires_grad=True)
    explanation = kgc.explain(lambda t: torch.relu(t @ w).sum(), _randn(3, 17),
                              compile_for="sm_90")
    printed = capsys.readouterr().out
    assert "the compile failed" in explanation.graphs[1].partitions[0].fallback_reason
    assert "kernel graphs compiled for sm_90 down to cubin: 1 partition(s) failed" in printed
    assert "kgc_backward_0: runs in PyTorch: error: the compile failed" in printed


def test_explain_refuses_a_target_kgc_does_not_compile_for():
    with pytest.raises(kgc.KgcError, match="target sm_75 is not supported"):
        kgc.explain(lambda t: t * 2, _randn(3), compile_for="sm_75")


def _backward_graph(target, arguments, values):
    """An FX graph of one attention backward op as AOTAutograd traces it on
    a CUDA device (meta kernels: no GPU needed), its three gradients
    returned; `arguments` names placeholders by string."""
    graph = torch.fx.Graph()
    nodes = {}
    for name, value in values.items():
        nodes[name] = graph.placeholder(name)
        nodes[name].meta["val"] = value.to("meta")
    args = tuple(nodes[a] if isinstance(a, str) and a in nodes else a for a in arguments)
    node = graph.call_function(target, args, {"scale": 0.3})
    node.meta["val"] = target(*[a.meta["val"] if isinstance(a, torch.fx.Node) else a
                                for a in args], scale=0.3)
    results = []
    for index in range(3):
        item = graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = node.meta["val"][index]
        results.append(item)
    graph.output(tuple(results))
    return torch.fx.GraphModule(torch.nn.Module(), graph), node


aten = torch.ops.aten


@pytest.mark.parametrize("kind", ["flash", "efficient", "cudnn"])
@pytest.mark.parametrize("heads,kv_heads", [(3, 3), (4, 2)], ids=["mha", "gqa"])
def test_the_cuda_attention_backward_ops_convert(kind, heads, kv_heads):
    from kgc import reference
    from kgc.torch import convert_graph, unsupported_reason
    from kgc.torch.partition import plan_partitions

    q = _randn(2, heads, 5, 16, requires_grad=True)
    k, v = (_randn(2, kv_heads, 7, 16, requires_grad=True) for _ in range(2))
    grad_out = _randn(2, heads, 5, 16)
    # cuDNN's is called with the model's additive mask (as transformers
    # passes it).
    bias = _randn(2, 1, 5, 7) if kind == "cudnn" else None
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=bias,
                                                                scale=0.3)
    out.backward(grad_out)
    values = {"grad_out": grad_out, "q": q.detach(), "k": k.detach(), "v": v.detach(),
              "out": out.detach(), "lse": lse.detach(),
              # The random-number state as CUDA keeps it: uint64, a dtype kg
              # lacks, which the converter never reads.
              "seed": torch.zeros((2,), dtype=torch.uint64),
              "offset": torch.zeros((), dtype=torch.uint64)}
    if kind == "flash":
        target = aten._scaled_dot_product_flash_attention_backward.default
        arguments = ("grad_out", "q", "k", "v", "out", "lse", None, None, 5, 7, 0.0, False,
                     "seed", "offset")
    elif kind == "efficient":
        target = aten._scaled_dot_product_efficient_attention_backward.default
        arguments = ("grad_out", "q", "k", "v", None, "out", "lse", "seed", "offset", 0.0,
                     [True, True, True, False], False)
    else:
        # cuDNN keeps the logsumexp with a trailing 1 and its random-number
        # state in int64.
        target = aten._scaled_dot_product_cudnn_attention_backward.default
        values["lse"] = values["lse"].unsqueeze(-1)
        values["seed"], values["offset"] = (torch.zeros((), dtype=torch.int64),) * 2
        values["bias"] = bias
        arguments = ("grad_out", "q", "k", "v", "out", "lse", "seed", "offset", "bias", None,
                     None, 5, 7, 0.0, False)
    module, node = _backward_graph(target, arguments, values)
    assert unsupported_reason(node) is None
    # It converts, but a partition leaves it to PyTorch's fused backward
    # kernel, which kgc's products lose to on a GPU.
    plan = plan_partitions(module, devices=None)
    assert not plan.partitions and "fused backward kernel" in plan.fallbacks[node]
    converted = convert_graph(module, "attention_backward")
    inputs = [values[n.name] for n in module.graph.nodes if n.op == "placeholder"]
    # (out and lse are traced as transposed views: the graph takes their
    # storage, which graph_arguments passes.)
    results = reference.evaluate(converted.graph.build(), "attention_backward",
                                 converted.graph_arguments(inputs))
    for got, want in zip(converted.partition_results(results), (q.grad, k.grad, v.grad)):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)


def test_the_logsumexp_attention_saves_for_its_backward_is_computed_in_kgc():
    # The forward of attention that needs grad: its logsumexp is a result,
    # so the fused op converts only if kgc computes it too.
    backend = TiledBackend()
    inputs = [_randn(2, 4, 5, 16, requires_grad=True),
              *(_randn(2, 2, 5, 16, requires_grad=True) for _ in range(2))]

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    with warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        (actual, actual_grads), (expected, expected_grads) = _gradients(attention, inputs,
                                                                        backend)
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)
    for got, want in zip(actual_grads, expected_grads):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    forward, backward = backend.reports
    assert not forward.fallbacks and not backward.fallbacks, (forward.fallbacks,
                                                              backward.fallbacks)
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward.default" in \
        _backward_ops(backend)


_SAVED_RESULTS = {"cudnn": (0, 1, 6, 7), "efficient": (0, 1, 2, 3), "flash": (0, 1, 6, 7)}


def _cuda_attention_forward_graph(kind: str, saved: tuple[int, ...]):
    """An FX graph of CUDA's fused attention op `kind` on meta values of
    fresh q, k, v (and bias, where the op takes one), returning its results
    `saved`; the module, the op's node and [q, k, v, bias]."""
    q, k, v = (_randn(2, 3, 5, 16) for _ in range(3))
    bias = _randn(2, 1, 5, 5)
    graph = torch.fx.Graph()
    nodes = {}
    for name, value in (("q", q), ("k", k), ("v", v), ("bias", bias)):
        nodes[name] = graph.placeholder(name)
        nodes[name].meta["val"] = value.to("meta")
    target, arguments = {
        "cudnn": (aten._scaled_dot_product_cudnn_attention.default,
                  ("q", "k", "v", "bias", True, 0.0, False)),
        "efficient": (aten._scaled_dot_product_efficient_attention.default,
                      ("q", "k", "v", "bias", True, 0.0, False)),
        "flash": (aten._scaled_dot_product_flash_attention.default, ("q", "k", "v", 0.0, False)),
    }[kind]
    args = tuple(nodes.get(a, a) if isinstance(a, str) else a for a in arguments)
    node = graph.call_function(target, args)
    meta = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    if kind == "flash":
        # Its meta kernel names CUDA's uint64 state only where CUDA is seen.
        node.meta["val"] = tuple(target(*meta))[:6] + (
            torch.empty((2,), dtype=torch.uint64, device="meta"),
            torch.empty((), dtype=torch.uint64, device="meta"), None)
    else:
        node.meta["val"] = target(*meta)
        if kind == "cudnn":
            # As CUDA's kernel reports them: the logsumexp with a trailing 1,
            # the state in int64.
            values = list(node.meta["val"])
            values[1] = torch.empty((2, 3, 5, 1), device="meta")
            values[6] = values[7] = torch.empty((), dtype=torch.int64, device="meta")
            node.meta["val"] = tuple(values)
    items = []
    for index in saved:
        item = graph.call_function(operator.getitem, (node, index))
        item.meta["val"] = node.meta["val"][index]
        items.append(item)
    graph.output(tuple(items))
    return torch.fx.GraphModule(torch.nn.Module(), graph), node, [q, k, v, bias]


@pytest.mark.parametrize("kind", ["cudnn", "efficient", "flash"])
def test_a_cuda_attention_forward_that_saves_for_its_backward_converts(kind):
    # The forward saves the logsumexp and the random-number state for the
    # backward; without dropout the state is never read, and kgc makes it
    # zeros where kg holds its dtype (int64: cuDNN's and the memory-efficient
    # kernel's); flash attention's is uint64, so that op stays with PyTorch.
    from kgc import reference
    from kgc.torch import convert_graph, unsupported_reason

    module, node, inputs = _cuda_attention_forward_graph(kind, _SAVED_RESULTS[kind])
    q, k, v, bias = inputs
    reason = unsupported_reason(node)
    if kind == "flash":
        assert "random-number state, torch.uint64" in reason
        return
    assert reason is None
    converted = convert_graph(module, "attention")
    results = reference.evaluate(converted.graph.build(), "attention",
                                 converted.graph_arguments(inputs))
    out, lse, *state = converted.partition_results(results)
    expected_out, expected_lse = aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, attn_mask=bias)
    torch.testing.assert_close(out, expected_out, atol=2e-5, rtol=2e-5)
    # The memory-efficient kernel's is padded past the 5 queries.
    lse = lse.reshape(2, 3, -1)[..., :5]
    torch.testing.assert_close(lse, expected_lse, atol=2e-5, rtol=2e-5)
    assert all(s.dtype == torch.int64 and not s.any() for s in state)


@pytest.mark.parametrize("kind", ["cudnn", "efficient", "flash"])
def test_a_cuda_attention_whose_logsumexp_is_saved_stays_with_pytorch(kind):
    # Training: PyTorch's fused kernel gives the logsumexp with the output,
    # kgc's attention kernel the output alone. Inference reads the output
    # only, which kgc's kernel computes.
    from kgc.torch.partition import library_reason

    _, node, _ = _cuda_attention_forward_graph(kind, _SAVED_RESULTS[kind])
    reason = library_reason(node)
    assert reason is not None and "logsumexp is saved for the backward" in reason
    _, node, _ = _cuda_attention_forward_graph(kind, (0,))
    assert library_reason(node) is None


def test_integer_clamp_converts():
    # A loss's backward clamps its int64 targets (ignore_index); kg's clamp
    # is for floats, so integers clamp through maximum and minimum, exactly.
    backend = TiledBackend()
    targets = torch.randint(-40, 40, (4, 17), generator=torch.Generator().manual_seed(5))

    def function(t):
        return t.clamp(min=-3, max=11) * 2 + t.clamp(max=0)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        actual = torch.compile(function, backend=backend, fullgraph=True)(targets)
    assert actual.dtype == torch.int64
    assert torch.equal(actual, function(targets))
    (report,) = backend.reports
    assert not report.fallbacks
    assert "kg.maximum" in backend.texts[0] and "kg.minimum" in backend.texts[0]


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gelus_backward_matches_torch_over_its_range(approximate, dtype):
    # Wide and tiny inputs and exact zeros: where the exact derivative's
    # cdf is taken as gelu(x) / x, at 0 as 1/2.
    from kgc import reference
    from kgc.torch import convert_graph

    x = torch.cat([torch.linspace(-12, 12, 1001), torch.tensor([0.0, -0.0, 1e-30, -1e-30]),
                   _randn(97) * 3]).to(dtype)
    grad = _randn(x.numel()).to(dtype)
    graph = torch.fx.Graph()
    nodes = []
    for name, value in (("grad", grad), ("x", x)):
        nodes.append(graph.placeholder(name))
        nodes[-1].meta["val"] = value
    node = graph.call_function(aten.gelu_backward.default, tuple(nodes),
                               {"approximate": approximate})
    expected = aten.gelu_backward(grad, x, approximate=approximate)
    node.meta["val"] = expected
    graph.output(node)
    converted = convert_graph(torch.fx.GraphModule(torch.nn.Module(), graph), "gelu_backward")
    actual = reference.evaluate(converted.graph.build(), "gelu_backward", [grad, x])
    # In the tails 1 + tanh and 1 - tanh^2 cancel: f32 keeps them to about
    # ulp(1) times the slope, a few 1e-6 (torch's tanh may round to -1 and
    # give 0 where kg's gives 1e-6).
    atol, rtol = (1e-5, 2e-5) if dtype == torch.float32 else (1e-2, 1e-2)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def test_a_lora_step_trains_only_the_adapters():
    # A frozen base weight with trainable low-rank adapters: the backward
    # computes the adapters' gradients only (no dW of the base), in kgc.
    backend = TiledBackend()
    base = _randn(33, 40)
    down = _randn(4, 40, requires_grad=True)
    up = _randn(33, 4, requires_grad=True)
    x = _randn(3, 7, 40)

    def lora(t, a, b):
        return F.linear(t, base) + F.linear(F.linear(t, a), b) * 0.5

    with warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        (actual, actual_grads), (expected, expected_grads) = _gradients(
            lora, [x, down, up], backend)
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)
    assert len(actual_grads) == 2
    for got, want in zip(actual_grads, expected_grads):
        torch.testing.assert_close(got, want, atol=5e-5, rtol=5e-5)
    forward, backward = backend.reports
    assert not forward.fallbacks and not backward.fallbacks
    # dA = (dY B * 0.5)^T X and dB = (dY * 0.5)^T (X A^T): no gradient of
    # the frozen base, whose shape no backward matmul makes.
    assert "aten.mm.default" in _backward_ops(backend)
    results = [n for n in backend.texts[1].splitlines() if "return" in n]
    assert "4x40" in results[-1] and "33x40" not in results[-1], results


def _index_put_graph(rows: int, width: int, count: int, accumulate: bool, device: str):
    """An FX graph of index_put(zeros, [ids], grad, accumulate) over fake
    tensors on `device` (no GPU needed), as an embedding's backward is
    traced; returns the module and the index_put node."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        values = {"table": torch.empty(rows, width, device=device),
                  "ids": torch.empty(count, dtype=torch.int64, device=device),
                  "grad": torch.empty(count, width, device=device)}
        graph = torch.fx.Graph()
        nodes = {}
        for name, value in values.items():
            nodes[name] = graph.placeholder(name)
            nodes[name].meta["val"] = value
        node = graph.call_function(aten.index_put.default,
                                   (nodes["table"], [nodes["ids"]], nodes["grad"], accumulate))
        node.meta["val"] = torch.empty(rows, width, device=device)
    graph.output(node)
    return torch.fx.GraphModule(torch.nn.Module(), graph), node


def test_a_large_cuda_scatter_add_stays_with_pytorchs_sorted_kernel():
    from kgc.torch.partition import SORTED_SCATTER_ADD_MACS, plan_partitions

    # An embedding gradient of 512 ids into 32000 rows of 64: the one-hot
    # product would be 1e9 multiply-adds.
    module, node = _index_put_graph(32000, 64, 512, True, "cuda")
    assert 512 * 32000 * 64 > SORTED_SCATTER_ADD_MACS
    plan = plan_partitions(module, ("cuda",))
    assert not plan.partitions
    assert "512 indices into (32000, 64)" in plan.fallbacks[node]
    assert "sorted-index kernel" in plan.fallbacks[node]


def _scatter_into_zeros_graph(rows: int, width: int, count: int, device: str,
                              zeros_read_again: bool = False):
    """index_put(full(0), [ids], grad, accumulate=True), as AOTAutograd
    traces an embedding's backward, with fake `val`s on `device`; returns
    the module and the (full, index_put) nodes. With `zeros_read_again` the
    graph returns the zeros too."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph = torch.fx.Graph()
    ids, grad = graph.placeholder("ids"), graph.placeholder("grad")
    zeros = graph.call_function(aten.full.default, ([rows, width], 0.0),
                                {"dtype": torch.float32, "device": torch.device(device)})
    scatter = graph.call_function(aten.index_put.default, (zeros, [ids], grad, True))
    graph.output((scatter, zeros) if zeros_read_again else scatter)
    with FakeTensorMode():
        ids.meta["val"] = torch.empty(count, dtype=torch.int64, device=device)
        grad.meta["val"] = torch.empty(count, width, device=device)
        zeros.meta["val"] = scatter.meta["val"] = torch.empty(rows, width, device=device)
    return torch.fx.GraphModule(torch.nn.Module(), graph), zeros, scatter


def test_the_zeros_of_a_scatter_add_left_to_pytorch_stay_there_and_fill_in_place():
    # The embedding's gradient of the 8B-shaped step: PyTorch makes the
    # zeros too, and fills them in place instead of copying them first.
    from kgc.torch.partition import plan_partitions
    from kgc.torch.reinplace import scatter_adds_in_place

    module, zeros, scatter = _scatter_into_zeros_graph(32000, 64, 512, "cuda")
    plan = plan_partitions(module, ("cuda",))
    assert not plan.partitions
    assert "sorted-index kernel" in plan.fallbacks[scatter]
    assert "fills it in place" in plan.fallbacks[zeros]
    # Read again, the zeros are a value of their own: kgc may make them, and
    # the scatter-add copies them.
    module, zeros, scatter = _scatter_into_zeros_graph(32000, 64, 512, "cuda", True)
    plan = plan_partitions(module, ("cuda",))
    assert zeros not in plan.fallbacks and scatter in plan.fallbacks
    assert scatter_adds_in_place(module) == 0 and scatter.target is aten.index_put.default


@pytest.mark.parametrize("zeros_read_again", [False, True])
def test_a_scatter_add_into_zeros_runs_in_place_with_the_same_result(zeros_read_again):
    from kgc.torch.reinplace import scatter_adds_in_place

    module, _, scatter = _scatter_into_zeros_graph(11, 5, 30, "cpu", zeros_read_again)
    ids = torch.randint(0, 11, (30,), generator=torch.Generator().manual_seed(4))
    grad = _randn(30, 5)
    expected = module(ids, grad)
    assert scatter_adds_in_place(module) == (0 if zeros_read_again else 1)
    assert scatter.target is (aten.index_put.default if zeros_read_again
                              else aten.index_put_.default)
    actual = module(ids, grad)
    torch.testing.assert_close(actual, expected)
    if zeros_read_again:
        assert not actual[1].any()


def _rewritten_ops(module) -> list:
    return [n.target for n in module.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("shape", [(512,), (4, 128), (1, 17)])
def test_a_large_cuda_scatter_add_of_rows_becomes_an_index_add_with_its_result(shape):
    # An embedding's gradient as AOTAutograd traces it for a CUDA model,
    # with negative ids, which index_put counts from the end.
    from kgc.torch.index_adds import scatter_adds_as_index_adds
    from kgc.torch.partition import plan_partitions

    rows, width = 32000, 64
    module, node = _index_put_graph(rows, width, 1, True, "cuda")
    ids_node, grad_node = (n for n in module.graph.nodes if n.name in ("ids", "grad"))
    with node.meta["val"].fake_mode:
        ids_node.meta["val"] = torch.empty(shape, dtype=torch.int64, device="cuda")
        grad_node.meta["val"] = torch.empty(*shape, width, device="cuda")
    table = _randn(rows, width)
    ids = torch.randint(-rows, rows, shape, generator=torch.Generator().manual_seed(5))
    ids.view(-1)[:2] = torch.tensor([7, 7 - rows])  # one row twice, once counted from the end
    grad = _randn(*shape, width)
    expected = module(table.clone(), ids, grad)
    assert scatter_adds_as_index_adds(module) == 1
    ops = _rewritten_ops(module)
    assert aten.index_add.default in ops and aten.index_put.default not in ops
    plan = plan_partitions(module, ("cuda",))
    (index_add,) = [n for n in module.graph.nodes if n.target is aten.index_add.default]
    assert "atomics" in plan.fallbacks[index_add]
    torch.testing.assert_close(module(table.clone(), ids, grad), expected)


@pytest.mark.parametrize("case", ["small", "deterministic", "broadcast", "cpu"])
def test_other_scatter_adds_stay_index_puts(case, monkeypatch):
    from kgc.torch.index_adds import scatter_adds_as_index_adds

    # Few ids make a small product that kgc fuses; values of one row
    # broadcast over the ids; a CPU scatter-add is kgc's (the executor's).
    rows, count = (11, 3) if case == "small" else (32000, 512)
    module, node = _index_put_graph(rows, 64, count, True, "cpu" if case == "cpu" else "cuda")
    if case == "broadcast":
        (grad,) = [n for n in module.graph.nodes if n.name == "grad"]
        with node.meta["val"].fake_mode:
            grad.meta["val"] = torch.empty(64, device="cuda")
    if case == "deterministic":
        monkeypatch.setattr(torch, "are_deterministic_algorithms_enabled", lambda: True)
    assert scatter_adds_as_index_adds(module) == 0
    assert node.target is aten.index_put.default


def test_an_index_add_into_zeros_runs_in_place():
    from kgc.torch.reinplace import scatter_adds_in_place

    graph = torch.fx.Graph()
    ids, grad = graph.placeholder("ids"), graph.placeholder("grad")
    zeros = graph.call_function(aten.full.default, ([11, 5], 0.0), {"dtype": torch.float32})
    added = graph.call_function(aten.index_add.default, (zeros, 0, ids, grad))
    graph.output(added)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    ids = torch.tensor([3, 0, 3, 10])
    grad = _randn(4, 5)
    expected = module(ids, grad)
    assert scatter_adds_in_place(module) == 1 and added.target is aten.index_add_.default
    torch.testing.assert_close(module(ids, grad), expected)
    torch.testing.assert_close(expected[3], grad[0] + grad[2])


@pytest.mark.parametrize("rows,count,accumulate,device", [
    # A handful of indices: the product is small and fuses.
    (11, 3, True, "cuda"),
    # One index adds one row: no product.
    (32000, 1, True, "cuda"),
    # An assignment (a cache update) is no sum.
    (32000, 512, False, "cuda"),
    # On the CPU executor kgc's scatter-add is what gets checked.
    (32000, 512, True, "cpu"),
], ids=["few", "one", "assign", "cpu"])
def test_other_index_puts_stay_in_kgc(rows, count, accumulate, device):
    from kgc.torch.partition import library_reason, plan_partitions

    module, node = _index_put_graph(rows, 64, count, accumulate, device)
    assert library_reason(node) is None
    plan = plan_partitions(module, (device,))
    assert node not in plan.fallbacks, plan.fallbacks
    assert [node] in plan.partitions
