"""kgc.torch.view_methods: the views PyTorch takes between kgc's kernels,
called as tensor methods with the same results."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402
from kgc.torch.view_methods import views_as_methods  # noqa: E402

aten = torch.ops.aten


def _views_graph() -> torch.fx.GraphModule:
    """A graph of aten view ops as PyTorch runs them between kgc's kernels,
    built by hand (tracing would decompose reshape)."""
    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    op = graph.call_function
    results = [
        op(aten.permute.default, (x, [2, 0, 1])),
        op(aten.view.default, (x, [-1, 17])),
        op(aten.reshape.default, (op(aten.transpose.int, (x, 0, 1)), [-1])),
        op(aten.expand.default, (op(aten.unsqueeze.default, (y, 0)), [3, 5, 7])),
        op(aten.squeeze.dim, (op(aten.unsqueeze.default, (y, 1)), 1)),
        op(aten.t.default, (y,)),
        # Left alone: a keyword argument, an op whose method differs
        # (alias), an op that computes.
        op(aten.expand.default, (y, [5, 7]), {"implicit": True}),
        op(aten.alias.default, (y,)),
        op(aten.add.Tensor, (y, 1)),
    ]
    graph.output(tuple(results))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@pytest.mark.parametrize("batch", [1, 4, 1000])
def test_views_become_methods_with_the_same_sizes_strides_and_storage(batch):
    x = torch.randn(batch, 3, 17, generator=torch.Generator().manual_seed(1))
    y = torch.randn(5, 7, generator=torch.Generator().manual_seed(2))
    module = _views_graph()
    expected = module(x, y)
    assert views_as_methods(module) == 9
    module.recompile()
    methods = [n.target for n in module.graph.nodes if n.op == "call_method"]
    assert sorted(methods) == ["expand", "permute", "reshape", "squeeze", "t", "transpose",
                               "unsqueeze", "unsqueeze", "view"]
    left = {n.target for n in module.graph.nodes if n.op == "call_function"}
    assert left == {aten.expand.default, aten.alias.default, aten.add.Tensor}
    assert "torch.ops.aten.permute" not in module.code and ".permute(" in module.code
    actual = module(x, y)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape and got.stride() == want.stride()
        assert got.storage_offset() == want.storage_offset()
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    # Views still share their input's memory, as the ops' results do.
    assert actual[0].data_ptr() == x.data_ptr() and actual[5].data_ptr() == y.data_ptr()


def test_a_compiled_graphs_views_run_as_methods():
    # The graph PyTorch runs around kgc's kernels (CPU executor): the views
    # between the partitions are method calls, the result eager's.
    from tests.test_torch_frontend import TiledBackend

    def f(x, w):
        h = torch.relu(x @ w)
        return h.transpose(0, 1).reshape(-1), torch.softmax(h, -1).t()

    x = torch.randn(17, 33, generator=torch.Generator().manual_seed(3))
    w = torch.randn(33, 9, generator=torch.Generator().manual_seed(4))
    backend = TiledBackend()
    modules = []
    real = backend.compile_aten

    def keep(module, *arguments, **keywords):
        result = real(module, *arguments, **keywords)
        modules.append(result)
        return result

    backend.compile_aten = keep
    got = torch.compile(f, backend=backend)(x, w)
    for a, b in zip(got, f(x, w)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    code = "".join(m.code for m in modules)
    assert "torch.ops.aten.t.default" not in code and "torch.ops.aten.permute" not in code
    assert any(n.op == "call_method" for m in modules for n in m.graph.nodes), code
