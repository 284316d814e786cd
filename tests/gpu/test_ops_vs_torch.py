"""Every op and every fused pattern, compiled and run, against torch.

Inputs are fresh random numbers (never zeros); results and intermediates
start as NaN so that an element no kernel writes fails the comparison.
Tolerances depend on the output dtype; the absolute one grows with the
reduction length where the case says so.
"""

import pytest

import kgc
from tests.cases import TF32_TOLERANCE, TOLERANCES, make_inputs, parameters

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


@pytest.mark.parametrize("case,dtype", parameters(), ids=lambda p: getattr(p, "name", p))
def test_matches_torch(case, dtype):
    graph = kgc.compile(case.graph(dtype))
    for seed in (0, 1):
        inputs = make_inputs(case, dtype, "cuda", seed)
        results = graph.run(*inputs, poison=True)
        results = results if isinstance(results, tuple) else (results,)
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = case.tf32
        try:
            expected = case.reference(*inputs)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
        expected = expected if isinstance(expected, tuple) else (expected,)
        for got, want in zip(results, expected, strict=True):
            atol, rtol = TF32_TOLERANCE if case.tf32 else TOLERANCES[_DTYPE_NAMES[got.dtype]]
            assert got.shape == want.shape
            torch.testing.assert_close(got.float(), want.float(), atol=atol * case.tolerance_scale,
                                       rtol=rtol)
