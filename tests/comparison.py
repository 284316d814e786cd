"""The accuracy rule that kgc's results are held to.

A result is compared with two evaluations of the graph by
`kgc.reference`: op by op as eager PyTorch would (rounding every result to
its dtype), and op by op in f64 without rounding (`exact`). kgc must be
about as close to the exact result as eager is: within twice eager's
largest error, plus a floor of a few units of the dtype's precision
(relative to the result's magnitude). Where the exact result is inf or NaN
only the shape and dtype are checked; where it is finite, kgc's must be.
Integer and boolean results must equal eager's exactly.
"""

from __future__ import annotations


def _floor(dtype) -> float:
    import torch

    return {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]


def as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def assert_as_accurate_as_eager(results, eager, exact, who: str = "kgc") -> None:
    """Checks each of `results` against the matching `eager` and `exact`
    results (single tensors or tuples)."""
    import torch

    results, eager, exact = as_tuple(results), as_tuple(eager), as_tuple(exact)
    assert len(results) == len(eager) == len(exact)
    for got, rounded, ideal in zip(results, eager, exact, strict=True):
        assert got.shape == ideal.shape and got.dtype == rounded.dtype
        if not got.dtype.is_floating_point:
            assert torch.equal(got.to(rounded.device), rounded), \
                f"{who} differs from eager in {(got.to(rounded.device) != rounded).sum().item()} elements"
            continue
        finite = torch.isfinite(ideal)
        got = got.to(ideal.device)
        assert torch.isfinite(got.double()[finite]).all(), \
            f"{who} gave inf/NaN where the result is finite"
        if not finite.any():
            continue
        ideal = ideal[finite]
        ours = (got.double()[finite] - ideal).abs().max().item()
        theirs = (rounded.double()[finite] - ideal).abs().max().item()
        floor = _floor(got.dtype) * (1 + ideal.abs().max().item())
        assert ours <= 2 * theirs + floor, f"{who} error {ours:.3g} vs eager error {theirs:.3g}"
