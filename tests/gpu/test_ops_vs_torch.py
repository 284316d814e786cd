"""Every op and every fused pattern, compiled and run, against torch.

Inputs are fresh random numbers (never zeros); results and intermediates
start as NaN so that an element no kernel writes fails the comparison.
Results are held to `kgc.accuracy`'s rule (`tests.comparison`): element by
element against the exact result, within twice the error of eager torch
(or of the reference's op-by-op rounding, whichever is larger) plus a few
units of roundoff of the element and of the result's largest magnitude;
torch's own results must pass the same rule.
"""

import pytest

import kgc
from tests.cases import make_inputs, parameters
from tests.comparison import assert_matches_torch

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case,dtype", parameters(), ids=lambda p: getattr(p, "name", p))
def test_matches_torch(case, dtype):
    source = case.graph(dtype)
    graph = kgc.compile(source)
    built = source.build()
    for seed in (0, 1):
        inputs = make_inputs(case, dtype, "cuda", seed)
        results = graph.run(*inputs, poison=True)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = case.tf32
        try:
            expected = case.reference(*inputs)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        hardware = case.gpu_reference(*inputs) if case.gpu_reference else None
        assert_matches_torch(results, expected, built, inputs, tf32=case.tf32,
                             hardware_eager=hardware)
