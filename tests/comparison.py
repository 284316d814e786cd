"""The accuracy rule that kgc's results are held to, for tests.

A result is compared with two evaluations of the graph by
`kgc.reference`: op by op as eager PyTorch would (rounding every result to
its dtype), and op by op in f64 without rounding (`exact`). The rule is
`kgc.accuracy`'s, the one the search's check and the bench use: element by
element within twice eager's largest error plus a few units of the dtype's
roundoff relative to the element and to the result's largest magnitude;
inf or NaN only where the exact result has them; integers and booleans
exact.
"""

from __future__ import annotations


def as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def assert_as_accurate_as_eager(results, eager, exact, who: str = "kgc") -> None:
    """Checks each of `results` against the matching `eager` and `exact`
    results (single tensors or tuples)."""
    from kgc.accuracy import mismatch

    reason = mismatch(as_tuple(results), as_tuple(eager), as_tuple(exact))
    assert reason is None, f"{who}: {reason}"
