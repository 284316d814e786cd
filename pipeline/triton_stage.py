"""The Triton stage: a kernel's TTIR -> TTGIR -> LLIR -> PTX -> cubin.

    compile_kernel(ttir, options, target) -> Artifact
    compile_kernels([(ttir, options), ...], target, jobs=4) -> [Artifact, ...]

`compile_kernel` is a pure function of plain data (text, a frozen
`KernelOptions`, an int) returning plain data (an `Artifact`), defined at
the top level of this module, so it runs as well in a worker process as in
this one. No GPU
is needed: the target is given explicitly.

Files. Triton reads TTIR from a file whose suffix names the stage; it is
written to a temporary directory removed when the compile ends. Only when
Triton fails is the TTIR kept, in `keep_failed_in` (`kgc compile -o DIR`
passes DIR/kernels) or else in a temporary file, and the error says where
and how to reproduce the failure from it.

Diagnostics. Triton's C++ writes its diagnostics to file descriptor 2. A
compile in this process leaves fd 2 alone, so that nothing else the process
writes meanwhile (another thread, a log) is lost. Triton's lines therefore
reach this process's stderr as Triton writes them; when a compile fails,
the kernel is compiled once more in a worker process, whose output is
captured, to quote those lines in the KgcError.

Workers. `compile_kernels` with `jobs` > 1 hands the kernels to a
`compile_worker.CompilePool`: up to `jobs` worker processes, fresh
interpreters that compile one kernel after another, whose output comes back
with each kernel, whose temporary files go to a directory removed
afterwards, and one of which is killed alone when a kernel outlives
`timeout`. What a worker prints while compiling is passed on here in kernel
order when the compile succeeds (Triton's IR dumps under MLIR_ENABLE_DUMP),
and quoted when it fails. A worker costs an interpreter's start, imports and
Triton's own start-up, about 2 s on one core, paid once per worker: a pool
pays off with several kernels and idle cores.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import sys
import tempfile
from typing import Sequence

from kgc.diagnostics import KgcError
from kgc.pipeline.artifact import ARTIFACT_STAGES, Artifact, KernelOptions, content_hash, kernel_symbol

# Lines of Triton's stderr worth repeating in a diagnostic.
_REPORTED = re.compile(r"error|unsupported|not supported|failed to", re.IGNORECASE)


def compile_kernel(ttir: str, options: KernelOptions, target: int, *,
                   keep_failed_in: str | pathlib.Path | None = None) -> Artifact:
    """Compiles one kernel's TTIR (a module holding one public tt.func) for
    `sm_<target>`. Raises KgcError with Triton's diagnostic lines on failure."""
    outcome = compile_outcome(ttir, options, target)
    if isinstance(outcome, Artifact):
        return outcome
    # Triton's own lines went to this process's stderr; get them once more
    # from a worker to quote them in the error.
    from kgc.pipeline.compile_worker import CompilePool

    with CompilePool(1) as pool:
        again = pool.submit(ttir, options, target).result()
    failure = again.outcome if isinstance(again.outcome, CompileFailure) else outcome
    raise _failure(ttir, options, target, failure, again.output, keep_failed_in)


def compile_kernels(requests: Sequence[tuple[str, KernelOptions]], target: int, *, jobs: int = 1,
                    timeout: float | None = None,
                    keep_failed_in: str | pathlib.Path | None = None) -> list[Artifact]:
    """Compiles kernels, each (TTIR, options), and returns their artifacts in
    order. Kernels with the same content hash compile once and share one
    artifact. With `jobs` > 1 and several distinct kernels, up to `jobs`
    worker processes compile them side by side, each for at most `timeout`
    seconds. Raises KgcError for the first kernel, in order, that fails."""
    import triton

    keys = [content_hash(ttir, options, target, triton.__version__) for ttir, options in requests]
    distinct = {}
    for key, request in zip(keys, requests):
        distinct.setdefault(key, request)
    if jobs <= 1 or len(distinct) <= 1:
        compiled = {key: compile_kernel(ttir, options, target, keep_failed_in=keep_failed_in)
                    for key, (ttir, options) in distinct.items()}
        return [compiled[key] for key in keys]
    from kgc.pipeline.compile_worker import CompilePool

    compiled = {}
    with CompilePool(min(jobs, len(distinct)), timeout) as pool:
        futures = {key: pool.submit(ttir, options, target)
                   for key, (ttir, options) in distinct.items()}
        for key, future in futures.items():
            ttir, options = distinct[key]
            done = future.result()
            if not isinstance(done.outcome, Artifact):
                raise _failure(ttir, options, target, done.outcome, done.output, keep_failed_in)
            sys.stdout.write(done.stdout)
            sys.stderr.write(done.stderr)
            compiled[key] = done.outcome
    return [compiled[key] for key in keys]


@dataclasses.dataclass(frozen=True)
class CompileFailure:
    """Why triton.compile raised, as text (exceptions of Triton's C++ do not
    always pickle)."""

    kind: str
    message: str
    source: str  # the TTIR file Triton read, which its diagnostics name


def compile_outcome(ttir: str, options: KernelOptions, target: int) -> Artifact | CompileFailure:
    """The artifact of a kernel, or why Triton failed on it (a value, so
    that it crosses a process boundary)."""
    import triton
    from triton.backends.compiler import GPUTarget

    name = kernel_symbol(ttir)
    with tempfile.TemporaryDirectory(prefix="kgc-") as directory:
        path = pathlib.Path(directory) / f"{name}.ttir"
        path.write_text(ttir)
        try:
            compiled = triton.compile(str(path), target=GPUTarget("cuda", target, 32),
                                      options=options.triton_options())
        except Exception as error:  # Triton raises many kinds; all become a diagnostic
            return CompileFailure(type(error).__name__, str(error), str(path))
        signature = tuple(compiled.src.signature[i] for i in sorted(compiled.src.signature))
    # Triton's metadata as it writes it to its cache: JSON, the target a dict.
    metadata = json.loads(json.dumps(compiled.metadata._asdict(), default=vars))
    asm = {"ttir": ttir}
    for stage in ARTIFACT_STAGES[1:]:
        asm[stage] = compiled.asm[stage]
    return Artifact(name, content_hash(ttir, options, target, triton.__version__, name), target,
                    options, signature, metadata, asm, triton.__version__)


def _failure(ttir: str, options: KernelOptions, target: int, failure: CompileFailure,
             stderr: str, keep_failed_in) -> KgcError:
    name = kernel_symbol(ttir)
    if keep_failed_in is not None:
        directory = pathlib.Path(keep_failed_in)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.ttir"
        path.write_text(ttir)
    else:
        handle, kept = tempfile.mkstemp(prefix=f"kgc-{name}-", suffix=".ttir")
        with os.fdopen(handle, "w") as file:
            file.write(ttir)
        path = pathlib.Path(kept)
    # Triton's lines name the TTIR in a directory that is gone: name the kept one.
    if failure.source:
        stderr = stderr.replace(failure.source, str(path))
    lines = [line.strip() for line in stderr.splitlines()
             if _REPORTED.search(line) and "Failures have been detected" not in line][:10]
    detail = "\n  ".join(lines) or (failure.message.strip().splitlines() or [failure.kind])[-1]
    return KgcError(f"Triton failed to compile kernel @{name} for sm_{target}:\n  {detail}\n"
                    f"  reproduce with: python -c \"import triton; from triton.backends.compiler "
                    f"import GPUTarget; triton.compile('{path}', target=GPUTarget('cuda', "
                    f"{target}, 32), options={options.triton_options()})\"")
