"""The Triton stage: a kernel's TTIR -> TTGIR -> LLIR -> PTX -> cubin.

    compile_kernel(ttir, options, target) -> Artifact
    compile_kernels([(ttir, options), ...], target, jobs=4) -> [Artifact, ...]

`compile_outcome` is the pure function underneath: plain data in (text, a
frozen `KernelOptions`, an int), plain data out (an `Artifact`, or a
`CompileFailure`). No GPU is needed: the target is given explicitly.

Where Triton runs. Never in this process: in worker processes of the
target's own (`worker_pool`), which compile for that target only. Triton
3.6's NVIDIA backend builds its table of 8-bit float conversions (a
function-local static of FpToFpOpConversion) once per process, for the
compute capability of the first kernel that converts 8-bit floats; every
later compile in that process, for any target, gets the same table. After
an sm_90 compile an sm_80 kernel gets `cvt.rn.f16x2.e5m2x2`, which ptxas
refuses below sm_89; after an sm_80 compile an sm_90 kernel silently gets the
emulated conversions (f16 -> e5m2 then overflows to inf where the native
conversion saturates). Triton's disk cache is keyed by TTIR, target and
options, rightly, but what it stores under a key would then depend on what
the process that filled it compiled before. One process per target makes a
kernel's code depend on the kernel, the target and the options alone.

Workers (`compile_worker.CompilePool`) are fresh interpreters that compile
one kernel after another, started on first use and kept for the life of
this process, so Triton's start-up (about 2 s) is paid once per worker.
Each request carries the caller's environment (Triton's knobs), and what
Triton prints while compiling comes back with the kernel: passed on here
when the compile succeeds (IR dumps under MLIR_ENABLE_DUMP), quoted in the
KgcError when it fails. This process's fd 2 is never redirected. A worker
that outlives `timeout` on a kernel is killed alone and replaced.

Files. Triton reads TTIR from a file whose suffix names the stage; the
worker writes it to a temporary directory removed when the compile ends,
in Triton's custom form (kgc's own bindings print Triton's ops in MLIR's
generic form), and the later stages' locations are made to name it
`<name>.ttir`, the file `Artifact.save` writes it to.
Only when Triton fails is the TTIR kept, in `keep_failed_in` (`kgc compile
-o DIR` passes DIR/kernels) or else in a temporary file, and the error says
where and how to reproduce the failure from it.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import pathlib
import re
import sys
import tempfile
from typing import TYPE_CHECKING, Sequence

from kgc.diagnostics import KgcError
from kgc.pipeline.artifact import (ARTIFACT_STAGES, LOCATED_STAGES, Artifact, KernelOptions,
                                   content_hash, kernel_symbol, relocate_sources)

if TYPE_CHECKING:  # the workers' module imports this one
    from kgc.pipeline.compile_worker import CompilePool

# Lines of Triton's stderr worth repeating in a diagnostic.
_REPORTED = re.compile(r"error|unsupported|not supported|failed to", re.IGNORECASE)


def compile_kernel(ttir: str, options: KernelOptions, target: int, *,
                   keep_failed_in: str | pathlib.Path | None = None) -> Artifact:
    """Compiles one kernel's TTIR (a module holding one public tt.func) for
    `sm_<target>`. Raises KgcError with Triton's diagnostic lines on failure."""
    return compile_kernels([(ttir, options)], target, keep_failed_in=keep_failed_in)[0]


def compile_kernels(requests: Sequence[tuple[str, KernelOptions]], target: int, *, jobs: int = 1,
                    timeout: float | None = None,
                    keep_failed_in: str | pathlib.Path | None = None,
                    cache=None) -> list[Artifact]:
    """Compiles kernels, each (TTIR, options), and returns their artifacts in
    order. Kernels with the same content hash compile once and share one
    artifact. Up to `jobs` worker processes of the target compile them side
    by side, each kernel for at most `timeout` seconds. Raises KgcError for
    the first kernel, in order, that fails. `cache` picks the kernel cache
    (`kernel_cache.KernelCache.resolve`): a kernel found there is not
    compiled, and one compiled is stored there."""
    import triton

    from kgc.pipeline.kernel_cache import KernelCache

    store = KernelCache.resolve(cache)
    keys = [content_hash(ttir, options, target, triton.__version__) for ttir, options in requests]
    distinct: dict[str, tuple[str, KernelOptions]] = {}
    for key, request in zip(keys, requests):
        distinct.setdefault(key, request)
    compiled = {}
    if store is not None:
        for key in distinct:
            artifact = store.load(key)
            if artifact is not None:
                compiled[key] = artifact
    missing = {key: request for key, request in distinct.items() if key not in compiled}
    if missing:
        # Workers start as kernels wait for them: asking for `jobs` rather
        # than one per missing kernel keeps a pool that a later, larger
        # compile would otherwise replace.
        pool = worker_pool(target, jobs)
        futures = {key: pool.submit(ttir, options, target, timeout)
                   for key, (ttir, options) in missing.items()}
        for key, future in futures.items():
            ttir, options = missing[key]
            done = future.result()
            if not isinstance(done.outcome, Artifact):
                raise _failure(ttir, options, target, done.outcome, done.output, keep_failed_in)
            sys.stdout.write(done.stdout)
            _write_triton_stderr(done.stderr)
            compiled[key] = done.outcome
            if store is not None:
                store.stats["compiled"] += 1
                store.store(done.outcome, key)
    return [compiled[key] for key in keys]


def _write_triton_stderr(text: str) -> None:
    """What Triton printed while compiling: its IR dumps go where kgc's go,
    appended to `MLIR_DUMP_PATH` when that is set (the worker keeps the
    variable from Triton, which would truncate the file), else to stderr."""
    if not text:
        return
    from kgc.pipeline.instrumentation import IRPrinting

    printing = IRPrinting.from_environment()
    if printing is not None and printing.path:
        with printing.stream() as out:
            out.write(text)
    else:
        sys.stderr.write(text)


_POOLS: dict[int, "CompilePool"] = {}
# The most worker processes `compile_jobs` gives: each is an interpreter
# with Triton loaded.
_MAX_DEFAULT_JOBS = 32


def compile_jobs() -> int:
    """The worker processes a caller compiling many kernels at once (a model's
    partitions, a search's candidates) asks for: `KGC_COMPILE_JOBS` where set
    (several processes compiling side by side, a test suite's workers, share
    the CPUs), else one per CPU this process may run on, as Inductor's compile
    workers, at most _MAX_DEFAULT_JOBS. Workers start only as kernels wait for
    them."""
    configured = os.environ.get("KGC_COMPILE_JOBS", "").strip()
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise KgcError(f"KGC_COMPILE_JOBS must be a positive number of worker processes, "
                           f"got {configured!r}")
        return int(configured)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, _MAX_DEFAULT_JOBS))


def worker_pool(target: int, jobs: int = 1) -> "CompilePool":
    """The worker processes that compile for `target`, started on first use
    and kept for the life of this process (each pays Triton's start-up once);
    grown to `jobs` workers when more are asked for."""
    from kgc.pipeline.compile_worker import CompilePool

    pool = _POOLS.get(target)
    if pool is None or pool.jobs < jobs:
        if pool is not None:
            pool.close()
        elif not _POOLS:
            atexit.register(_close_pools)
        pool = _POOLS[target] = CompilePool(max(jobs, 1))
    return pool


def start_workers(target: int, jobs: int) -> None:
    """Starts the `jobs` workers of `worker_pool(target, jobs)` now, so that
    they load Triton while the caller does other work."""
    worker_pool(target, jobs).start()


def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()


@dataclasses.dataclass(frozen=True)
class CompileFailure:
    """Why triton.compile raised, as text (exceptions of Triton's C++ do not
    always pickle)."""

    kind: str
    message: str
    source: str  # the TTIR file Triton read, which its diagnostics name
    text: str = ""  # what that file held, where it is not the TTIR given


def _custom_form(path: pathlib.Path, target: int) -> str:
    """The TTIR in the file `path` (kgc prints it in MLIR's generic form: its
    own bindings do not know Triton's dialects) in Triton's custom assembly
    form, without locations."""
    from triton._C.libtriton import ir as triton_ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    context = triton_ir.context()
    triton_ir.load_dialects(context)
    make_backend(GPUTarget("cuda", target, 32)).load_dialects(context)
    return triton_ir.parse_mlir_module(str(path), context).str_nodebug()


def custom_form_outcome(ttir: str, target: int) -> str | CompileFailure:
    """A kernel's TTIR in Triton's custom form, or why Triton cannot parse
    it (run in a worker, as the compiles are)."""
    with tempfile.TemporaryDirectory(prefix="kgc-") as directory:
        path = pathlib.Path(directory) / f"{kernel_symbol(ttir)}.ttir"
        path.write_text(ttir)
        try:
            return _custom_form(path, target)
        except Exception as error:  # Triton's parser raises RuntimeError; any is a failure
            return CompileFailure(type(error).__name__, str(error), str(path))


def compile_outcome(ttir: str, options: KernelOptions, target: int) -> Artifact | CompileFailure:
    """The artifact of a kernel, or why Triton failed on it (a value, so
    that it crosses a process boundary). Triton compiles the TTIR in its
    custom form, which the artifact keeps: the later stages' locations are
    lines of that text, in a file they name `<name>.ttir`."""
    import triton
    from triton.backends.compiler import GPUTarget

    name = kernel_symbol(ttir)
    with tempfile.TemporaryDirectory(prefix="kgc-") as directory:
        path = pathlib.Path(directory) / f"{name}.ttir"
        path.write_text(ttir)
        try:
            ttir = _custom_form(path, target)
            path.write_text(ttir)
            compiled = triton.compile(str(path), target=GPUTarget("cuda", target, 32),
                                      options=options.triton_options())
        except Exception as error:  # Triton raises many kinds; all become a diagnostic
            return CompileFailure(type(error).__name__, str(error), str(path), ttir)
        signature = tuple(compiled.src.signature[i] for i in sorted(compiled.src.signature))
    # Triton's metadata as it writes it to its cache: JSON, the target a dict.
    metadata = json.loads(json.dumps(compiled.metadata._asdict(), default=vars))
    asm = {"ttir": ttir}
    for stage in ARTIFACT_STAGES[1:]:
        asm[stage] = compiled.asm[stage]
        if stage in LOCATED_STAGES:
            asm[stage] = relocate_sources(asm[stage], name)
    return Artifact(name, content_hash(ttir, options, target, triton.__version__, name), target,
                    options, signature, metadata, asm, triton.__version__)


def custom_forms(ttirs: Sequence[str], target: int) -> list[str]:
    """Kernels' TTIR in Triton's custom form, printed by the target's
    workers; a kernel Triton cannot parse keeps the text it has (its
    compile, not its printing, is where that is reported)."""
    if not ttirs:
        return []
    pool = worker_pool(target)
    futures = [pool.submit_custom_form(ttir, target) for ttir in ttirs]
    return [outcome if isinstance(outcome := future.result().outcome, str) else ttir
            for ttir, future in zip(ttirs, futures)]


def _failure(ttir: str, options: KernelOptions, target: int, failure: CompileFailure,
             stderr: str, keep_failed_in) -> KgcError:
    name = kernel_symbol(ttir)
    # What Triton read, which the lines and columns of its errors are in.
    ttir = failure.text or ttir
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
