"""Integer and boolean tensors, comparisons, selects, iotas and casts,
compiled and run on the GPU against torch.

Inputs are fresh random values: small non-zero integers of either sign
(torch.randint), coin-flip booleans, normal floats. Results start poisoned
(NaN, the most negative integer, True), so an element no kernel writes
fails. Integer and boolean results must equal torch's exactly.
"""

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from tests.int_cases import (assert_matches, causal_softmax_graph, causal_softmax_reference,
                             make_inputs, parameters, reference, triu_graph)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case,length", parameters(), ids=lambda p: getattr(p, "name", p))
def test_matches_torch(case, length):
    graph = kgc.compile(case.graph(length))
    for seed in (0, 1):
        inputs = make_inputs(case, length, "cuda", seed)
        results = graph.run(*inputs, poison=True)
        results = results if isinstance(results, tuple) else (results,)
        for got, want in zip(results, reference(case, length, inputs), strict=True):
            assert_matches(got, want)


def _exact_causal_softmax(x):
    n = x.shape[-1]
    keep = torch.arange(n, device=x.device).reshape(n, 1) >= torch.arange(n, device=x.device)
    return torch.softmax(x.double().masked_fill(~keep, float("-inf")), dim=-1)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 17, 1000, 4097])
def test_causal_softmax_matches_torch(n, dtype):
    graph = kgc.compile(causal_softmax_graph(n, dtype))
    torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    for seed in (0, 1):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn((n, n), generator=generator).to(torch_dtype).cuda()
        got = graph.run(x, poison=True)
        reason = tensor_mismatch(got, causal_softmax_reference(x), _exact_causal_softmax(x))
        assert reason is None, reason


@pytest.mark.parametrize("n", [1, 17, 1000])
def test_triu_matches_torch(n):
    graph = kgc.compile(triu_graph(n))
    a = torch.randint(1, 100, (n, n), dtype=torch.int32, device="cuda")
    assert torch.equal(graph.run(a, poison=True), torch.triu(a))
