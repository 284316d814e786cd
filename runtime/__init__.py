"""Running a compiled kernel graph on torch tensors (needs a CUDA GPU).

    graph = kgc.compile(source)            # or kgc.runtime.load("kgc-out")
    y = graph(x, w)                        # torch tensors on the GPU
    graph(x, w, out=y)                     # into a buffer of the caller's

A graph runs from the kernels' artifacts alone (`kgc.pipeline.artifact`):
`load(directory)` reads what `kgc compile -o directory` wrote and runs it in
a process that never compiles. Each kernel's cubin is loaded, and its
launcher (Triton's, built for the kernel's signature) bound, once per
device, on the first call there.

Arguments are checked before anything runs, each error naming the argument
with what was expected and what came. The kernels read every tensor as
dense and row-major from a 16-byte aligned data pointer, so an argument
that is not is copied into a fresh tensor first; `out=` buffers are never
copied: one that is not contiguous and aligned, or that overlaps an
argument, is refused.

Results are fresh tensors (or the `out=` buffers). The intermediates, the
buffers that kernels pass to one another and the caller never sees, live
in one workspace allocated per call, each at the offset the function's
memory plan gives it (`kgc.pipeline.memory_plan`, made when the graph was
compiled and kept in manifest.json), so that a call of many kernels costs
one allocation for them instead of one each: torch's allocator is the
larger part of a small graph's host time. The kernels run in order on the
current stream of the arguments' device, on which the workspace is freed
when the call returns, as any torch temporary is. `graph.streamed()`
trades that allocation for memory: each result and intermediate gets its own,
made before the first launch that writes it, and each intermediate is freed
after the last launch that reads it, so a call holds at most what is live at
one launch (`kgc.pipeline.memory_plan.buffer_steps` says where).

The modules:

    graph       CompiledGraph (a function as a callable), CapturedGraph, load
    launching   binding a function's launches on a device (one BoundLaunch
                each, made by one factory), the workspace, the fast path
    checks      the checks of a call's tensors and the errors naming them
    library     library kernels' calls: a bare matmul run by cuBLAS through torch
    internals   the only module that uses Triton's and torch's private API
"""

from kgc.runtime.graph import CapturedGraph, CompiledGraph, load
from kgc.runtime.launching import cuda_available

__all__ = ["CapturedGraph", "CompiledGraph", "cuda_available", "load"]
