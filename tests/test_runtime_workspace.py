"""The runtime's workspace plan: where each intermediate of a call lives in
the one allocation a call makes for them (no GPU needed to plan)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kgc.runtime import _workspace_plan  # noqa: E402


def fresh(*specs):
    """Fresh buffers numbered from 2 (0 and 1 are arguments)."""
    return [(2 + i, torch.Size(shape), dtype) for i, (shape, dtype) in enumerate(specs)]


def test_intermediates_get_disjoint_aligned_ranges_and_results_none():
    buffers = fresh(((3, 17), torch.float16), ((1000,), torch.float32), ((4097,), torch.bool),
                    ((1,), torch.float16), ((64, 64), torch.bfloat16))
    offsets, size = _workspace_plan(buffers, results={3})
    assert set(offsets) == {2, 4, 5, 6}  # buffer 3 is a result: a tensor of its own
    spans = sorted((offsets[i], offsets[i] + shape.numel() * dtype.itemsize)
                   for i, shape, dtype in buffers if i in offsets)
    for (start, end), (next_start, _) in zip(spans, spans[1:]):
        assert end <= next_start
    assert all(start % 256 == 0 for start, _ in spans)
    assert spans[-1][1] <= size < spans[-1][1] + 256


def test_a_graph_whose_fresh_buffers_are_all_results_needs_no_workspace():
    offsets, size = _workspace_plan(fresh(((17, 1000), torch.float32)), results={2})
    assert offsets == {} and size == 0
