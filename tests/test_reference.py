"""The torch interpreter of kernel graphs agrees with the hand-written torch
references of the op cases, on the CPU (f32, so that eager's per-op
rounding and the references' f32 math coincide closely)."""

import pytest

import kgc.reference
from tests.cases import ALL_CASES, make_inputs

torch = pytest.importorskip("torch")

CPU_CASES = [c for c in ALL_CASES if "f32" in c.dtypes and not c.tf32 and "fp8" not in c.name
             and max((s[0] if s else 1) * (s[-1] if s else 1) for _, s, _ in c.inputs) <= 1 << 20]


@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c.name)
def test_interpreter_matches_reference(case):
    graph = case.graph("f32")
    inputs = make_inputs(case, "f32", "cpu", seed=3)
    got = kgc.reference.evaluate(graph.build(), None, inputs)
    want = case.reference(*inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b.to(a.dtype), rtol=1e-4, atol=1e-4 * case.tolerance_scale)


def test_exact_mode_keeps_f64_between_ops():
    graph = kgc.Graph("chain")
    x = graph.input("x", (8,), "f16")
    graph.output(graph.exp(x) * 3.0)
    inputs = [torch.randn(8).half()]
    exact = kgc.reference.evaluate(graph.build(), None, inputs, exact=True)
    eager = kgc.reference.evaluate(graph.build(), None, inputs)
    assert exact.dtype == torch.float64 and eager.dtype == torch.float16
    torch.testing.assert_close(exact, torch.exp(inputs[0].double()) * 3.0)
