"""Timing candidates on a GPU with CUDA events.

`time_call(fn)` records a pair of events around each of `profile_iters`
calls after `warmup_iters` untimed ones and returns the median in
microseconds: a stray slow call does not move it. What it times is the
stream's time from one event to the other, which includes any wait for the
host to launch: right for a graph whose host cost is part of what a user
pays, too much for a small kernel alone.

`time_replayed(fn)` times a kernel alone: it captures `fn` several times
into a CUDA graph and times the replays, so the GPU never waits for the
host between calls. `time_rotated(fn, sets)` does the same with calls that
take `fn(0)`, `fn(1)`, ... in turn, each on its own set of inputs: with
`input_sets` of them, together twice the L2 cache, every call reads its
inputs from memory as it would in a model, instead of from the L2 cache
that the previous call filled (which makes a small kernel look several
times faster than it runs).
"""

from __future__ import annotations

import math
import statistics
from typing import Callable

# A replay keeps the GPU busy about this long (by default), so that
# launching it is not what is measured.
REPLAY_US = 50.0
MAX_CALLS_PER_REPLAY = 100


def time_call(fn: Callable[[], object], warmup_iters: int = 16, profile_iters: int = 1000) -> float:
    """The median time of `fn()` on the current stream, in microseconds."""
    import torch

    _check_iters(warmup_iters, profile_iters)
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
                  replay_us: float = REPLAY_US) -> float:
    """The median time of one `fn()` in microseconds, from CUDA graph
    replays: `fn` is captured `k` times into one graph, so that a replay
    keeps the GPU busy for about `replay_us` and the host's cost of
    launching (which can exceed a small kernel's time) is not measured.
    The events around each replay time `k` calls; the median over the
    replays (at least 10, about `profile_iters` calls in all) divided by `k`
    is the time of one."""
    return time_rotated(lambda _: fn(), 1, warmup_iters, profile_iters, replay_us)


def time_rotated(fn: Callable[[int], object], sets: int, warmup_iters: int = 16,
                 profile_iters: int = 1000, replay_us: float = REPLAY_US) -> float:
    """`time_replayed` of calls that take `fn(0)`, ..., `fn(sets - 1)` in
    turn, every one equally often in each replay."""
    import torch

    _check_iters(warmup_iters, profile_iters)
    if sets < 1:
        raise ValueError(f"sets must be >= 1, got {sets}")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the default stream, as capture wants
        for index in range(max(warmup_iters, sets, 1)):
            fn(index % sets)
    torch.cuda.current_stream().wait_stream(stream)
    once = time_call(lambda: fn(0), warmup_iters=0, profile_iters=5)
    calls = max(sets, min(MAX_CALLS_PER_REPLAY, math.ceil(replay_us / max(once, 1e-3))))
    calls = math.ceil(calls / sets) * sets
    graph = torch.cuda.CUDAGraph()
    # Captured on this call's own stream (torch.cuda.graph's default one is
    # shared by every thread, on the device that first made it), thread-
    # locally: another thread's work on another GPU (the search times on
    # several at once) neither breaks nor joins the capture.
    with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
        for index in range(calls):
            fn(index % sets)
    replays = max(10, profile_iters // calls)
    return time_call(graph.replay, warmup_iters=2, profile_iters=replays) / calls


def input_sets(nbytes: int, l2_bytes: int, limit: int = 16) -> int:
    """How many sets of `nbytes` of inputs together hold twice `l2_bytes`
    (at least 1, at most `limit`)."""
    return max(1, min(limit, math.ceil(2 * l2_bytes / max(nbytes, 1))))


def l2_bytes(device=None) -> int:
    """The L2 cache of a CUDA device, in bytes (50 MiB where torch does not
    say: an H100's)."""
    import torch

    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
               or 50 * 2**20)


def _check_iters(warmup_iters: int, profile_iters: int) -> None:
    if profile_iters < 1 or warmup_iters < 0:
        raise ValueError(f"profile_iters must be >= 1 and warmup_iters >= 0, got "
                         f"{profile_iters} and {warmup_iters}")
