"""Random kernel graphs, compiled and run, against torch.

Each graph runs three ways on the same inputs: compiled by kgc, op by op
in torch as eager PyTorch would, and op by op in f64 without rounding;
`tests.comparison` says how close kgc must be.
"""

import pytest
from hypothesis import HealthCheck, given, note, settings

import kgc
import kgc.reference
from tests.comparison import assert_as_accurate_as_eager
from tests.test_random_graphs import graphs

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(graphs(safe=True))
def test_random_graph_matches_torch(graph):
    # A failure shows the graph, so that it can be compiled again alone.
    note(graph.to_mlir())
    compiled = kgc.compile(graph)
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(t.shape, generator=generator).to(_DTYPES[t.dtype]).cuda()
              for t in graph.inputs]
    results = compiled.run(*inputs, poison=True)
    with torch.cuda.device(0):
        module = graph.build()
        eager = kgc.reference.evaluate(module, None, inputs)
        exact = kgc.reference.evaluate(module, None, inputs, exact=True)
    assert_as_accurate_as_eager(results, eager, exact)
