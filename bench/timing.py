"""Timing for `kgc bench`: the GPU's time of one call, every contender the
same way.

Each call is captured into a CUDA graph and replayed (`kgc.search.measure.
time_replayed`, which the search times its candidates with): the median of
many replays after warm-up, divided by the calls per replay. So the
numbers are the kernels' time alone, without the host's launch cost, which
differs between kgc, eager PyTorch and torch.compile for reasons that are
not the kernels'.
"""

from __future__ import annotations

from typing import Callable

from kgc.search.measure import time_replayed

WARMUP_ITERS = 16


def time_gpu(fn: Callable[[], object], reps: int) -> float:
    """The median GPU time of one `fn()`, in microseconds, over about
    `reps` calls after warm-up."""
    return time_replayed(fn, WARMUP_ITERS, reps)
