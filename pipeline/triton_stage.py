"""The Triton stage: TTIR -> TTGIR -> LLIR -> PTX -> cubin, by triton.compile.

`triton.compile` reads TTIR from a file whose suffix names the stage; the
file stays behind so that a failure can be reproduced with it. No GPU is
needed: the target is given explicitly. Triton compiles in a worker process
of the target's own (`triton_worker` says why).
"""

from __future__ import annotations

import os
import pathlib
import re
import sys

from kgc.diagnostics import KgcError
from kgc.pipeline.stages import TRITON_STAGES
from kgc.pipeline.triton_worker import compile_in_worker

# Lines of Triton's stderr worth repeating in a diagnostic.
_REPORTED = re.compile(r"error|unsupported|not supported|failed to", re.IGNORECASE)


def compile_kernel(kernel, target: int, directory: pathlib.Path, emit: str) -> None:
    """Fills `kernel.asm` with the Triton stages up to `emit` and keeps
    Triton's compiled kernel for launching."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kernel.name}.ttir"
    path.write_text(kernel.asm["ttir"])
    result = compile_in_worker(path, target, {"num_warps": kernel.num_warps,
                                              "num_stages": kernel.num_stages})
    # Triton's C++ reports errors (and a reproducer) on stderr; they are kept
    # for the diagnostic unless the user asked Triton to dump its IR there.
    if os.environ.get("MLIR_ENABLE_DUMP") or os.environ.get("KGC_DEBUG"):
        sys.stderr.write(result.log)
        sys.stderr.flush()
    if result.error is not None:
        lines = [line.strip() for line in result.log.splitlines()
                 if _REPORTED.search(line) and "Failures have been detected" not in line][:10]
        detail = "\n  ".join(lines) or result.error
        raise KgcError(f"Triton failed to compile kernel @{kernel.name} for sm_{target}:\n  {detail}\n"
                       f"  reproduce with: python -c \"import triton; from triton.backends.compiler "
                       f"import GPUTarget; triton.compile('{path}', target=GPUTarget('cuda', "
                       f"{target}, 32))\"")
    compiled = _load(path, target, result)
    last = TRITON_STAGES.index(emit) if emit in TRITON_STAGES else len(TRITON_STAGES) - 1
    for stage in TRITON_STAGES[:last + 1]:
        kernel.asm[stage] = compiled.asm[stage]
    kernel.shared = compiled.metadata.shared
    kernel.triton_kernel = compiled


def _load(path: pathlib.Path, target: int, result):
    """Triton's CompiledKernel for what a worker compiled, read from Triton's
    cache as a cache hit would read it."""
    from triton._C.libtriton import ir as triton_ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import CompiledKernel, IRSource, make_backend

    backend = make_backend(GPUTarget("cuda", target, 32))
    source = IRSource(str(path), triton_ir.context(), backend)
    return CompiledKernel(source, result.metadata_group, result.hash)
