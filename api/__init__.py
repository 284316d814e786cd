"""The Python front end: `kgc.compile` and `kgc.superoptimize`.

    graph = kgc.compile(g)                     # kgc's default choices
    graph = kgc.compile(g, config=saved)       # a partition and kernel configs
    graph = kgc.superoptimize(g)               # searched, checked, timed, cached

Both take a `kgc.Graph`, MLIR text, a path to an `.mlir` file, or (compile
only) a parsed `builtin.module`, and return a `kgc.runtime.CompiledGraph`.
This layer sits above the pipeline, the runtime and the search, and is the
only one that imports all three.
"""

from __future__ import annotations

import pathlib

from mlir import ir

from kgc.diagnostics import KgcError

from kgc.graph import Graph

__all__ = ["KernelGraph", "compile", "new_kernel_graph", "superoptimize"]


class KernelGraph(Graph):
    """`kgc.Graph`: the graph model (`kgc.graph.Graph`) with the front end's
    entry points, so that a graph can be searched as Mirage's are
    (`g.superoptimize()`)."""

    def superoptimize(self, *, backend: str = "triton", **options):
        """Searches this graph's variants on the GPU and returns the fastest
        checked one: `kgc.superoptimize(self, **options)`. `backend` is
        Mirage's keyword; kgc's kernels are Triton's ("triton")."""
        return superoptimize(self, backend=backend, **options)

    autotune = superoptimize


def new_kernel_graph(name: str = "kernel_graph") -> KernelGraph:
    """An empty kernel graph (Mirage's name for `kgc.Graph(name)`)."""
    return KernelGraph(name)


def _default_target() -> int:
    """The current GPU's SM when there is one, else sm_90."""
    from kgc.runtime import cuda_available

    if cuda_available():
        import torch

        major, minor = torch.cuda.get_device_capability()
        return major * 10 + minor
    return 90


def compile(source, *, target: str | int | None = None, pipeline: str | None = None,
            function: str | None = None, output_dir: str | pathlib.Path | None = None,
            jobs: int = 1, config=None, cache=None, library_kernels: bool | None = None):
    """Compiles `source` for `target` (default: this machine's GPU, else
    sm_90) and returns a `kgc.runtime.CompiledGraph`.

    `source` is a `kgc.Graph`, a path to an `.mlir` file, MLIR text, or a
    parsed `builtin.module` operation (which is compiled in place). With
    `output_dir`, every stage of every kernel and a manifest are written
    there (`kgc.runtime.load(output_dir)` runs it again without compiling).
    Up to `jobs` worker processes compile the kernels side by side.
    `config` (a `kgc.search.GraphConfig`, its dict or JSON, or a JSON file:
    what `superoptimize` returns as `.config`) sets the partition and the
    kernels' knobs; it cannot be combined with `pipeline`.
    `cache` (True, False, a `redis://host:port/db` URL shared by a fleet)
    serves kernels compiled before from the kernel cache and stores new
    ones there; by default it is on when `KGC_CACHE_URL` or
    `KGC_KERNEL_CACHE=1` is set (`kgc.pipeline.kernel_cache`).
    `library_kernels=False` keeps every kernel Triton: by default (None,
    unless `KGC_LIBRARY_KERNELS=0` is set) a kernel that is a bare matmul
    large enough calls the GPU's BLAS instead (`kgc.tiling.library`).
    Compiling needs no GPU; calling the result does.
    """
    from kgc.parsing import function_named, parse_source
    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.config import GraphConfig
    from kgc.pipeline.stages import parse_target
    from kgc.runtime import CompiledGraph
    from kgc.tiling.library import library_kernels as library_choice

    if library_kernels is not None and not isinstance(library_kernels, bool):
        raise KgcError(f"library_kernels {library_kernels!r} ({type(library_kernels).__name__}) "
                       "is not True, False or None")
    arch = parse_target(_default_target() if target is None else target)
    for name, value, kinds, expected in (
            ("pipeline", pipeline, (str,), "a textual pass pipeline"),
            ("function", function, (str,), "a function name"),
            ("output_dir", output_dir, (str, pathlib.PurePath), "a folder path")):
        if value is not None and not isinstance(value, kinds):
            raise KgcError(f"{name} {value!r} ({type(value).__name__}) is not {expected}")
    graph_config = GraphConfig.load(config) if config is not None else None
    context = None
    if isinstance(source, ir.Operation) or hasattr(source, "operation"):
        module, stem = source.operation, "graph"
    else:
        context = ir.Context()
        context.allow_unregistered_dialects = True
        module, stem = parse_source(source, context)
    with module.context, library_choice(library_kernels):
        if graph_config is not None:
            function_named(module, graph_config.function)
        compiled = compile_module(module, target=arch, pipeline=pipeline, config=graph_config,
                                  jobs=jobs, cache=cache,
                                  ttir_dir=pathlib.Path(output_dir) / "kernels" if output_dir else None)
        if isinstance(source, Graph) and source.name in compiled.functions:
            compiled.functions[source.name].argument_names = [t.name for t in source.inputs]
        if output_dir is not None:
            compiled.write(output_dir, stem)
    graph = CompiledGraph(compiled, function)
    graph.config = graph_config
    graph._context = context  # keeps the IR's context alive with the result
    return graph


# The code generators `superoptimize(backend=...)` may name. Mirage programs
# pass backend="triton" (Mirage's Triton transpiler), which is what kgc
# generates; its "cuda" and "nki" backends have no counterpart here.
BACKENDS = ("triton",)


def superoptimize(source, *, backend: str = "triton", **options):
    """`kgc.search.superoptimize`: see there. `backend` is Mirage's keyword:
    kgc generates Triton kernels, so "triton" is the one accepted."""
    from kgc.diagnostics import KgcError

    if backend not in BACKENDS:
        raise KgcError(f"superoptimize: backend {backend!r} is not available: kgc generates Triton "
                       f"kernels only (backend=\"triton\", the default)")
    from kgc.parsing import canonical_source
    from kgc.search.tuner import superoptimize as search

    # The graph is checked before the device: a missing file or a syntax
    # error is named even on a machine without a GPU.
    canonical_source(source, options.get("function"))
    return search(source, **options)
