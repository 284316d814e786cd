"""The search layer: many ways to compile one graph, checked and timed.

Above the compiler and the runtime, below the front ends. Its pieces, each
with a small interface:

    space     the variants of a graph: kg-fuse's candidate partitions x
              each kernel's KernelConfig space, kernels tuned independently
    profile   checking each candidate against torch and timing it, on one
              or several GPUs of one model
    trials    where checking and timing run: which GPUs, which processes
    isolation checking and timing in a worker process per GPU, which a
              candidate that faults takes down instead of the search
    measure   CUDA-event timing (median after warm-up; CUDA graph replays)
    verify    fresh random inputs, and the check of results (kgc.accuracy's rule)
    cache     search results and their cubins on disk, keyed and locked,
              and on a Redis server a fleet shares behind the folder
    bundle    the local cache (kernels and search results) as one checked file
    farm      lowering and compiling candidates as tasks of a Ray cluster
    config    a graph's choices (partition and kernel knobs) as JSON
    tuner     `superoptimize`, which runs them in order
"""

from kgc.search.cache import Cache, CacheKey
from kgc.pipeline.config import GraphConfig
from kgc.search.tuner import SearchReport, superoptimize

__all__ = ["Cache", "CacheKey", "GraphConfig", "SearchReport", "superoptimize"]
