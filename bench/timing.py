"""Timing for `kgc bench`: the GPU's time of one call, every contender the
same way.

The calls are captured into a CUDA graph and replayed, and the median of
many replays after warm-up (CUDA events, `kgc.search.measure.time_call`)
divided by the calls per replay is the time of one: the kernels' time
alone, without the host's launch cost, which differs between kgc, eager
PyTorch and torch.compile for reasons that are not the kernels'. The calls
of a replay rotate over several sets of inputs, enough that together they
are twice the L2 cache, so that a workload whose inputs fit in L2 (a
decode step's weights, say) is timed reading memory as it would in a
model, and is compared with a floor computed from memory bandwidth. The
search times its candidates the same way (`kgc.search.measure`).
"""

from __future__ import annotations

from typing import Callable

from kgc.search.measure import input_sets, time_rotated

__all__ = ["WARMUP_ITERS", "input_sets", "time_gpu"]

WARMUP_ITERS = 16


def time_gpu(fn: Callable[[int], object], reps: int, rotations: int = 1) -> float:
    """The median GPU time of one `fn(i)`, in microseconds, over about
    `reps` calls after warm-up; the calls take i = 0, 1, ..., rotations - 1
    in turn (`kgc.search.measure.time_rotated`)."""
    if reps < 1 or rotations < 1:
        raise ValueError(f"reps and rotations must be >= 1, got {reps} and {rotations}")
    return time_rotated(fn, rotations, WARMUP_ITERS, reps)
