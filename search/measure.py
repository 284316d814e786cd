"""Timing candidates on a GPU with CUDA events.

`time_call(fn)` records a pair of events around each of `profile_iters`
calls after `warmup_iters` untimed ones and returns the median in
microseconds: a stray slow call does not move it. What it times is the
stream's time from one event to the other, which includes any wait for the
host to launch: right for a graph whose host cost is part of what a user
pays, too much for a small kernel alone.

`time_replayed(fn)` times a kernel alone: it captures `fn` several times
into a CUDA graph and times the replays, so the GPU never waits for the
host between calls.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable


def time_call(fn: Callable[[], object], warmup_iters: int = 16, profile_iters: int = 1000) -> float:
    """The median time of `fn()` on the current stream, in microseconds."""
    import torch

    if profile_iters < 1 or warmup_iters < 0:
        raise ValueError(f"profile_iters must be >= 1 and warmup_iters >= 0, got "
                         f"{profile_iters} and {warmup_iters}")
    for _ in range(warmup_iters):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(profile_iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(profile_iters)]
    torch.cuda.synchronize()
    for start, end in zip(starts, ends, strict=True):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3


def time_replayed(fn: Callable[[], object], warmup_iters: int = 16, profile_iters: int = 1000,
                  replay_us: float = 50.0) -> float:
    """The median time of one `fn()` in microseconds, from CUDA graph
    replays: `fn` is captured `k` times into one graph, so that a replay
    keeps the GPU busy for about `replay_us` and the host's cost of
    launching (which can exceed a small kernel's time) is not measured.
    The events around each replay time `k` calls; the median over the
    replays (at least 10, about `profile_iters` calls in all) divided by `k`
    is the time of one."""
    import torch

    if profile_iters < 1 or warmup_iters < 0:
        raise ValueError(f"profile_iters must be >= 1 and warmup_iters >= 0, got "
                         f"{profile_iters} and {warmup_iters}")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(max(warmup_iters, 1)):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    once = time_call(fn, warmup_iters=0, profile_iters=5)
    calls = max(1, min(100, math.ceil(replay_us / max(once, 1e-3))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    replays = max(10, profile_iters // calls)
    return time_call(graph.replay, warmup_iters=2, profile_iters=replays) / calls
