"""Timing for `kgc bench`: the GPU's time of one call, every contender the
same way.

The calls are captured into a CUDA graph and replayed, and the median of
many replays after warm-up (CUDA events, `kgc.search.measure.time_call`)
divided by the calls per replay is the time of one: the kernels' time
alone, without the host's launch cost, which differs between kgc, eager
PyTorch and torch.compile for reasons that are not the kernels'. This is
how the search times its candidates (`kgc.search.measure.time_replayed`),
with one difference: the calls of a replay rotate over several sets of
inputs, enough that together they are twice the L2 cache, so that a
workload whose inputs fit in L2 (a decode step's weights, say) is timed
reading memory as it would in a model, and is compared with a floor
computed from memory bandwidth.
"""

from __future__ import annotations

import math
from typing import Callable

from kgc.search.measure import time_call

WARMUP_ITERS = 16
# A replay keeps the GPU busy about this long, so that launching it is not
# what is measured.
REPLAY_US = 50.0
MAX_CALLS_PER_REPLAY = 100


def input_sets(nbytes: int, l2_bytes: int, limit: int = 16) -> int:
    """How many sets of `nbytes` of inputs together hold twice `l2_bytes`
    (at least 1, at most `limit`)."""
    return max(1, min(limit, math.ceil(2 * l2_bytes / max(nbytes, 1))))


def time_gpu(fn: Callable[[int], object], reps: int, rotations: int = 1) -> float:
    """The median GPU time of one `fn(i)`, in microseconds, over about
    `reps` calls after warm-up; the calls take i = 0, 1, ..., rotations - 1
    in turn."""
    import torch

    if reps < 1 or rotations < 1:
        raise ValueError(f"reps and rotations must be >= 1, got {reps} and {rotations}")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the default stream, as capture wants
        for index in range(max(WARMUP_ITERS, rotations)):
            fn(index % rotations)
    torch.cuda.current_stream().wait_stream(stream)
    once = time_call(lambda: fn(0), warmup_iters=0, profile_iters=5)
    calls = max(rotations, min(MAX_CALLS_PER_REPLAY, math.ceil(REPLAY_US / max(once, 1e-3))))
    calls = math.ceil(calls / rotations) * rotations  # every set as often
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for index in range(calls):
            fn(index % rotations)
    replays = max(10, reps // calls)
    return time_call(graph.replay, warmup_iters=2, profile_iters=replays) / calls
