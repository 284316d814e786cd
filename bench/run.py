"""One `kgc bench` run: every selected workload, every contender, one
process, one GPU.

For each workload, on fresh random inputs: kgc's graph is superoptimized
(the cache makes a second run fast), run once and checked against eager
PyTorch (`kgc.bench.check`) before it is timed; a result that fails the
check is reported as wrong and never timed. kgc's default compile (no
search) is checked and timed the same way beside it, so that the gap
between the two shows. Then eager PyTorch,
torch.compile and torch.compile max-autotune-no-cudagraphs are timed the
same way (`kgc.bench.timing`), each torch.compile mode's first call (its
compile) timed by the clock and reported. The device's memory bandwidth and
matmul peaks are measured first (`kgc.bench.floor`) and give each workload
its floor.
"""

from __future__ import annotations

import logging
import pathlib
import secrets
import sys
import time
from typing import Sequence

from kgc.bench import floor, provenance, runners, timing
from kgc.bench.check import check
from kgc.bench.report import FAILED, OK, WRONG, BenchResult, Row
from kgc.bench.runners import (EAGER, KGC, KGC_DEFAULT, LABELS, TORCH_RUNNERS, Unavailable,
                               first_line)
from kgc.bench.workloads import PEAK_FP8, Workload
from kgc.search.measure import l2_bytes

_LOG = logging.getLogger(__name__)


def run_bench(workloads: Sequence[Workload], *, effort: str = "default", reps: int = 1000,
              quick: bool = False, seed: int | None = None, progress: bool = True,
              device: str = "cuda", command: Sequence[str] | None = None) -> BenchResult:
    """Measures `workloads` on the current CUDA device; see the module
    docstring. `reps` is about how many calls each median is taken over.
    `device` is where the inputs live (another than "cuda" only for testing
    the loop with stand-ins for the GPU's parts). `command` is the command
    line the result records as its origin (default: this process's)."""
    import torch
    from tqdm import tqdm

    seed = secrets.randbits(31) if seed is None else seed
    name = torch.cuda.get_device_name() if device == "cuda" else device
    steps = 1 + len(workloads) * (2 + len(TORCH_RUNNERS))
    with tqdm(total=steps, desc="kgc bench", unit="step", disable=not progress) as bar:
        bar.set_postfix_str("measuring the floor")
        peaks = floor.measure_peaks(fp8=any(w.peak == PEAK_FP8 for w in workloads), reps=reps)
        bar.update(1)
        rows = []
        for index, workload in enumerate(workloads):
            rows.append(_run_workload(workload, peaks, effort, reps, seed + index, bar, progress,
                                      device))
            if device == "cuda":
                torch.cuda.empty_cache()
    settings = {"effort": effort, "reps": reps, "quick": quick, "seed": seed,
                "tuned_defaults": _tuned_defaults_in_use(device)}
    return BenchResult(name, peaks.to_dict(), settings, rows, provenance.collect(command))


def _tuned_defaults_in_use(device: str) -> str | None:
    """The tuned-defaults table kgc's default compile read on this GPU
    (`kgc.tuned_defaults`): its file's name (not its folder, which names
    the machine), its GPU, date and content digest; None for the
    heuristics alone."""
    import torch

    from kgc.tuned_defaults import resolve

    if device != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability()
    table = resolve(None, major * 10 + minor)
    if table is None:
        return None
    name = pathlib.PurePath(table.source).name if table.source else table.target
    return f"{name} ({table.gpu}, {table.date}, {table.fingerprint()})"


def _run_workload(workload: Workload, peaks, effort: str, reps: int, seed: int, bar,
                  progress: bool, device: str) -> Row:
    import torch

    row = Row(workload.name, workload.title, workload.kind, workload.target,
              peaks.floor_us(workload), workload.bytes, workload.flops)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    # Enough sets of inputs that the timed calls read memory, not L2 (see
    # kgc.bench.timing); the first is the one checked.
    l2 = l2_bytes(device) if device == "cuda" else 0
    sets = [workload.make_inputs(device, generator)
            for _ in range(timing.input_sets(workload.bytes, l2))]
    torch_sets = [workload.torch_layout(s) if workload.torch_layout else s for s in sets]
    inputs, torch_inputs = sets[0], torch_sets[0]

    bar.set_postfix_str(f"{workload.name}: kgc")
    eager_result = None
    try:
        eager_result = workload.reference(*torch_inputs)
    except Exception as error:
        _LOG.debug("eager failed on %s", workload.name, exc_info=True)
        row.errors["eager"] = first_line(error)
    _run_kgc(workload, row, sets, eager_result, effort, reps, progress)
    bar.update(1)
    bar.set_postfix_str(f"{workload.name}: {LABELS[KGC_DEFAULT]}")
    _run_kgc_default(workload, row, sets, eager_result, reps)
    bar.update(1)

    for runner in TORCH_RUNNERS:
        bar.set_postfix_str(f"{workload.name}: {LABELS[runner]}")
        if runner not in row.errors:
            try:
                fn = runners.make_torch(workload, runner)
                started = time.perf_counter()
                fn(*torch_inputs)  # compiles, outside the timing
                if device == "cuda":
                    torch.cuda.synchronize()
                if runner != EAGER:
                    row.compile_s[runner] = time.perf_counter() - started
                row.times_us[runner] = timing.time_gpu(lambda i: fn(*torch_sets[i]), reps,
                                                       len(torch_sets))
            except Exception as error:
                _LOG.debug("%s failed on %s", runner, workload.name, exc_info=True)
                row.errors[runner] = first_line(error)
        bar.update(1)
    _LOG.info("%s: %s", workload.name,
              ", ".join(f"{r} {t:.1f} us" for r, t in row.times_us.items()))
    if progress:  # where the minutes go, as they go: a run cut off by a time limit still shows it
        bar.write(_setup_line(row), file=sys.stderr)
    return row


def _setup_line(row: Row) -> str:
    if row.kgc_search_s is None:
        kgc = "kgc no search time"
    else:
        source = {True: " (from the cache)", False: " (searched)", None: ""}[row.kgc_cached]
        kgc = f"kgc search {row.kgc_search_s:.1f} s{source}"
    default = "" if row.kgc_default_compile_s is None else \
        f", kgc default compile {row.kgc_default_compile_s:.1f} s"
    return f"{row.workload}: {kgc}" + "".join(
        f", {LABELS[r]} first call {s:.1f} s" for r, s in row.compile_s.items()) + default


def _run_kgc(workload: Workload, row: Row, sets: list, eager_result, effort: str, reps: int,
             progress: bool) -> None:
    started = time.perf_counter()
    try:
        compiled = runners.make_kgc(workload, effort, reps, verbose=progress)
    except Unavailable as error:
        row.kgc_status, row.errors[KGC] = FAILED, str(error)
        return
    finally:
        # superoptimize's whole call, the cache's look-up and the kernels'
        # load included: what a run spends on kgc before timing it.
        row.kgc_search_s = time.perf_counter() - started
    report = getattr(compiled, "report", None)
    if report is not None:
        row.kgc_cached = bool(report.cached)
        row.kgc_search = report.to_dict()
    config = getattr(compiled, "config", None)
    if config is not None:
        row.kgc_config = config.to_dict()
    row.kgc_status = _check_and_time(workload, KGC, compiled, row, sets, eager_result, reps)


def _run_kgc_default(workload: Workload, row: Row, sets: list, eager_result, reps: int) -> None:
    """kgc's default compile of the workload (no search), checked and timed
    as the searched one is; its compile's wall time is reported."""
    started = time.perf_counter()
    try:
        compiled = runners.make_kgc_default(workload)
    except Unavailable as error:
        row.kgc_default_status, row.errors[KGC_DEFAULT] = FAILED, str(error)
        return
    finally:
        row.kgc_default_compile_s = time.perf_counter() - started
    row.kgc_default_status = _check_and_time(workload, KGC_DEFAULT, compiled, row, sets,
                                             eager_result, reps)


def _check_and_time(workload: Workload, runner: str, compiled, row: Row, sets: list,
                    eager_result, reps: int) -> str:
    """Runs kgc's `compiled` graph once, checks it against eager's result
    and, when right, times it as `runner` in `row`: its status (the reason
    of any other than OK goes to the row's errors)."""
    graph, inputs = workload.build(), sets[0]
    try:
        result = compiled(*inputs)
    except Exception as error:  # a kernel the driver refuses fails this row only
        row.errors[runner] = f"kgc failed to run: {first_line(error)}"
        return FAILED
    if runner == KGC:
        row.kgc_kernels = len(compiled.kernels())
    if eager_result is None:
        row.errors[runner] = "not checked: eager PyTorch gave no result to check it against"
        return FAILED
    try:
        wrong = check(graph, inputs, result, eager_result)
    except Exception as error:  # the reference cannot evaluate it: unchecked, so not timed
        _LOG.debug("checking %s failed", workload.name, exc_info=True)
        row.errors[runner] = f"not checked: {first_line(error)}"
        return FAILED
    if wrong is not None:
        row.errors[runner] = f"differs from eager, not timed: {wrong}"
        return WRONG
    try:
        row.times_us[runner] = timing.time_gpu(lambda i: compiled(*sets[i]), reps, len(sets))
    except Exception as error:
        row.errors[runner] = f"kgc failed while timed: {first_line(error)}"
        return FAILED
    return OK

