"""Random kernel graphs, compiled and run, against torch.

Each graph runs three ways on the same inputs: compiled by kgc, op by op
in torch as eager PyTorch would (rounding every result to its dtype), and
op by op in f64 without rounding (`exact`). kgc must be about as close to
the exact result as eager is: within twice eager's largest error, plus a
floor of a few units of the dtype's precision.
"""

import pytest
from hypothesis import HealthCheck, given, settings

import kgc
import kgc.reference
from tests.test_random_graphs import graphs

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
_FLOOR = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(graphs(safe=True))
def test_random_graph_matches_torch(graph):
    compiled = kgc.compile(graph)
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(t.shape, generator=generator).to(_DTYPES[t.dtype]).cuda()
              for t in graph.inputs]
    results = compiled.run(*inputs, poison=True)
    results = results if isinstance(results, tuple) else (results,)
    with torch.cuda.device(0):
        module = graph.build()
        eager = kgc.reference.evaluate(module, None, inputs)
        exact = kgc.reference.evaluate(module, None, inputs, exact=True)
    eager = eager if isinstance(eager, tuple) else (eager,)
    exact = exact if isinstance(exact, tuple) else (exact,)
    for got, rounded, ideal in zip(results, eager, exact, strict=True):
        assert got.shape == ideal.shape and got.dtype == rounded.dtype
        finite = torch.isfinite(ideal)
        assert torch.isfinite(got.double()[finite]).all(), "kgc gave inf/NaN where the result is finite"
        if not finite.any():
            continue
        ideal = ideal[finite]
        ours = (got.double()[finite] - ideal).abs().max().item()
        theirs = (rounded.double()[finite] - ideal).abs().max().item()
        floor = _FLOOR[got.dtype] * (1 + ideal.abs().max().item())
        assert ours <= 2 * theirs + floor, f"kgc error {ours:.3g} vs eager error {theirs:.3g}"
