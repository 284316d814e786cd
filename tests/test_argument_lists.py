"""The torch backend's compiled graphs take their inputs as one list and
empty it (`kgc.torch.argument_lists`), so that a backward frees each saved
activation after its last reader instead of holding all of them to its end."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._python_dispatch import TorchDispatchMode

from kgc.torch.argument_lists import taking_argument_list

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


class _AliveAtEachOp(TorchDispatchMode):
    """Records, for each aten op run, whether the watched tensor was alive."""

    def __init__(self, watched: weakref.ref):
        super().__init__()
        self.watched = watched
        self.alive: list[tuple[str, bool]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.alive.append((func.__name__, self.watched() is not None))
        return func(*args, **(kwargs or {}))


def _first_read_then_others(big, small):
    # `big` is read once, first; the ops after it read only `small`.
    total = big.sum()
    return (small * total).sin().cos().neg()


def _randn(*shape, seed: int):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_an_input_is_freed_after_its_last_reader_not_at_the_graphs_end():
    module = make_fx(_first_read_then_others)(_randn(1000, seed=1), _randn(3, seed=2))
    call = taking_argument_list(module)
    big, small = _randn(1000, seed=3), _randn(3, seed=4)
    want = _first_read_then_others(big, small)
    watched = weakref.ref(big)
    arguments = [big, small]
    del big
    with _AliveAtEachOp(watched) as probe:
        got = call(arguments)
    assert arguments == []
    torch.testing.assert_close(got, want)
    ops = [name for name, _ in probe.alive]
    assert ops[0].startswith("sum"), ops
    # Alive while its reader runs; freed before the ops that follow it.
    assert probe.alive[0][1] and not any(alive for _, alive in probe.alive[1:]), probe.alive


def test_a_list_of_one_input_and_an_annotated_graph_are_taken_too():
    module = make_fx(lambda x: x.sin())(_randn(4, seed=5))
    for node in module.graph.nodes:
        if node.op == "placeholder":
            node.type = torch.Tensor  # generated as `x_1: torch.Tensor`
    call = taking_argument_list(module)
    x = _randn(4, seed=6)
    arguments = [x]
    torch.testing.assert_close(call(arguments), x.sin())
    assert arguments == [] and call._boxed_call


# In mode "reduce-overhead" the halves of a graph that needs autograd run
# without CUDA graphs, and take their lists as in mode "default".
@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_the_backends_forward_and_backward_empty_the_lists_aotautograd_passes(monkeypatch,
                                                                              mode):
    import importlib

    from tests.test_torch_frontend import TiledBackend

    backend_module = importlib.import_module("kgc.torch.backend")
    left: list[int] = []

    def spying(module):
        call = taking_argument_list(module)

        def spied(arguments):
            result = call(arguments)
            left.append(len(arguments))
            return result
        spied._boxed_call = True
        return spied

    monkeypatch.setattr(backend_module, "taking_argument_list", spying)
    w = _randn(17, 5, seed=7).requires_grad_()
    x = _randn(3, 17, seed=8).requires_grad_()

    def step(x, w):
        return torch.nn.functional.gelu(x @ w).square().mean()

    compiled = torch.compile(step, backend=TiledBackend(), fullgraph=True, mode=mode)
    compiled(x, w).backward()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    step(x, w).backward()
    torch.testing.assert_close(got, (x.grad, w.grad), rtol=1e-4, atol=1e-5)
    # One forward and one backward, each called once, each list emptied.
    assert left == [0, 0]


class _HandedOver:
    """A compiled partition's run that takes its arguments as a list
    (`CompiledGraph.take`) and records, once it has dropped its own
    references, which of them anything else still holds."""

    def __init__(self, run, alive: list):
        self.run = run
        self.alive = alive

    def __call__(self, *tensors):
        return self.take(list(tensors))  # the caller keeps its references

    def take(self, tensors: list):
        watched = [weakref.ref(t) for t in tensors if isinstance(t, torch.Tensor)]
        arguments = tuple(tensors)
        tensors.clear()
        results = self.run(*arguments)
        del arguments
        self.alive.append([w() for w in watched])
        return results


def test_a_training_graphs_partition_holds_the_only_references_to_its_activations():
    # The backward reads activations its forward saved; nothing reads them
    # after its one partition, so once the partition has dropped its own
    # references (as a streamed graph does after each one's last reader),
    # they are freed, whatever the FX code around the call held before.
    from tests.test_torch_frontend import TiledBackend

    alive: list = []

    class Backend(TiledBackend):
        def _compile(self, graph, mode):
            return _HandedOver(super()._compile(graph, mode), alive)

    x = _randn(3, 17, seed=9)
    w1 = _randn(17, 40, seed=10).requires_grad_()
    w2 = _randn(40, 5, seed=11).requires_grad_()

    def step(x, w1, w2):
        return (torch.nn.functional.gelu(x @ w1) @ w2).square().mean()

    compiled = torch.compile(step, backend=Backend(), fullgraph=True)
    compiled(x, w1, w2).backward()
    got = (w1.grad, w2.grad)
    w1.grad = w2.grad = None
    step(x, w1, w2).backward()
    torch.testing.assert_close(got, (w1.grad, w2.grad), rtol=1e-4, atol=1e-5)
    *_, backward = alive
    # A 0-d tensor is the loss's gradient, which autograd hands over as one
    # number (a scalar argument made for the call, or kept by autograd).
    held = [t for t in backward if t is not None and t.dim()]
    # Only what the test itself holds (its input and weights, or views of
    # them) survives.
    mine = {m.untyped_storage().data_ptr() for m in (x, w1, w2)}
    assert all(t.untyped_storage().data_ptr() in mine for t in held), \
        [tuple(t.shape) for t in held]
    assert len(backward) > len(held), "the backward read no activation of its own"
