"""Ahead-of-time export: a compiled kernel graph as C source.

    kgc compile graph.mlir --emit c -o out/     # out/graph.h, out/graph.c
    kgc.export.export_c(compiled, "out")        # the same from Python

`export_c` writes `<graph>.h` and `<graph>.c`, which need nothing but the
CUDA driver API (`cuda.h`, `-lcuda`) to build and run: no Python, no Triton.
The .c embeds every kernel's cubin and holds, for each function of the
graph, `kgc_<graph>_<function>(stream, <arguments>, <results>, workspace)`,
which launches the kernels in order with the grids, warps and shared memory
fixed at compile time; `kgc_<graph>_load()` and `kgc_<graph>_unload()` load
and free the kernels' modules once. `c_source.py` says what the generated
code does and expects of its caller; the header says it again, with each
argument's shape, dtype and layout.
"""

from __future__ import annotations

from kgc.export.c_source import CExport, c_identifier, export_c, export_module

__all__ = ["CExport", "c_identifier", "export_c", "export_module"]
