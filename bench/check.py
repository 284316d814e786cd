"""Checking kgc's result for a workload before it is timed.

The rule is the one tests and the search hold results to
(`kgc.accuracy`): kgc's result is compared with the exact result of the
workload's graph (every op in f64, `kgc.reference.evaluate(exact=True)`),
element by element within twice what eager PyTorch's result is off by at
worst, plus a few units of the dtype's roundoff relative to the element
and to the result's largest magnitude; inf or NaN only where the exact
result has them. The eager result here is the workload's own torch code
(torch._scaled_mm, scaled_dot_product_attention, ...), the very contender
kgc is timed against.
"""

from __future__ import annotations

from typing import Sequence


def check(workload_graph, inputs: Sequence, kgc_result, eager_result) -> str | None:
    """Why `kgc_result` is wrong for the kgc.Graph `workload_graph` on
    `inputs`, or None when it passes."""
    from kgc.reference import evaluate
    from kgc.accuracy import mismatch

    module = workload_graph.build()
    exact = evaluate(module, workload_graph.name, list(inputs), exact=True)
    return mismatch(_as_tuple(kgc_result), _as_tuple(eager_result), _as_tuple(exact))


def _as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)
