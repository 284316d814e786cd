"""The Triton stage: TTIR -> TTGIR -> LLIR -> PTX -> cubin, by triton.compile.

`triton.compile` reads TTIR from a file whose suffix names the stage; the
file stays behind so that a failure can be reproduced with it. No GPU is
needed: the target is given explicitly.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re

from kgc.diagnostics import KgcError
from kgc.pipeline.instrumentation import captured_stderr
from kgc.pipeline.stages import TRITON_STAGES

# Lines of Triton's stderr worth repeating in a diagnostic.
_REPORTED = re.compile(r"error|unsupported|not supported|failed to", re.IGNORECASE)


def compile_kernel(kernel, target: int, directory: pathlib.Path, emit: str) -> None:
    """Fills `kernel.asm` with the Triton stages up to `emit` and keeps
    Triton's compiled kernel for launching."""
    import triton
    from triton.backends.compiler import GPUTarget

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kernel.name}.ttir"
    path.write_text(kernel.asm["ttir"])
    # Triton's C++ reports errors (and a reproducer) on stderr; they are kept
    # for the diagnostic unless the user asked Triton to dump its IR there.
    capture = not os.environ.get("MLIR_ENABLE_DUMP") and not os.environ.get("KGC_DEBUG")
    with (captured_stderr() if capture else contextlib.nullcontext([""])) as stderr:
        try:
            compiled = triton.compile(
                str(path), target=GPUTarget("cuda", target, 32),
                options={"num_warps": kernel.num_warps, "num_stages": kernel.num_stages})
            error = None
        except Exception as raised:  # Triton raises many kinds; all become a diagnostic
            error = raised
    if error is not None:
        lines = [line.strip() for line in stderr[0].splitlines()
                 if _REPORTED.search(line) and "Failures have been detected" not in line][:10]
        detail = "\n  ".join(lines) or (str(error).strip().splitlines() or [type(error).__name__])[-1]
        raise KgcError(f"Triton failed to compile kernel @{kernel.name} for sm_{target}:\n  {detail}\n"
                       f"  reproduce with: python -c \"import triton; from triton.backends.compiler "
                       f"import GPUTarget; triton.compile('{path}', target=GPUTarget('cuda', "
                       f"{target}, 32))\"") from None
    last = TRITON_STAGES.index(emit) if emit in TRITON_STAGES else len(TRITON_STAGES) - 1
    for stage in TRITON_STAGES[:last + 1]:
        kernel.asm[stage] = compiled.asm[stage]
    kernel.shared = compiled.metadata.shared
    kernel.triton_kernel = compiled
