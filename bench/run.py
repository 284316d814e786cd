"""One `kgc bench` run: every selected workload, every contender, one
process, one GPU.

For each workload, on fresh random inputs: kgc's graph is superoptimized
(the cache makes a second run fast), run once and checked against eager
PyTorch (`kgc.bench.check`) before it is timed; a result that fails the
check is reported as wrong and never timed. Then eager PyTorch,
torch.compile and torch.compile max-autotune-no-cudagraphs are timed the
same way (`kgc.bench.timing`), each torch.compile mode's first call (its
compile) timed by the clock and reported. The device's memory bandwidth and
matmul peaks are measured first (`kgc.bench.floor`) and give each workload
its floor.
"""

from __future__ import annotations

import logging
import secrets
import sys
import time
from typing import Sequence

from kgc.bench import floor, provenance, runners, timing
from kgc.bench.check import check
from kgc.bench.report import FAILED, OK, WRONG, BenchResult, Row
from kgc.bench.runners import EAGER, KGC, LABELS, TORCH_RUNNERS, Unavailable, first_line
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
    steps = 1 + len(workloads) * (1 + len(TORCH_RUNNERS))
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
    settings = {"effort": effort, "reps": reps, "quick": quick, "seed": seed}
    return BenchResult(name, peaks.to_dict(), settings, rows, provenance.collect(command))


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
    return f"{row.workload}: {kgc}" + "".join(
        f", {LABELS[r]} first call {s:.1f} s" for r, s in row.compile_s.items())


def _run_kgc(workload: Workload, row: Row, sets: list, eager_result, effort: str, reps: int,
             progress: bool) -> None:
    graph, inputs = workload.build(), sets[0]
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
    try:
        result = compiled(*inputs)
    except Exception as error:  # a kernel the driver refuses fails this row only
        row.kgc_status, row.errors[KGC] = FAILED, f"kgc failed to run: {first_line(error)}"
        return
    row.kgc_kernels = len(compiled.kernels())
    if eager_result is None:
        row.kgc_status = FAILED
        row.errors[KGC] = "not checked: eager PyTorch gave no result to check it against"
        return
    try:
        wrong = check(graph, inputs, result, eager_result)
    except Exception as error:  # the reference cannot evaluate it: unchecked, so not timed
        _LOG.debug("checking %s failed", workload.name, exc_info=True)
        row.kgc_status, row.errors[KGC] = FAILED, f"not checked: {first_line(error)}"
        return
    if wrong is not None:
        row.kgc_status, row.errors[KGC] = WRONG, f"differs from eager, not timed: {wrong}"
        return
    try:
        row.times_us[KGC] = timing.time_gpu(lambda i: compiled(*sets[i]), reps, len(sets))
    except Exception as error:
        row.kgc_status, row.errors[KGC] = FAILED, f"kgc failed while timed: {first_line(error)}"
        return
    row.kgc_status = OK

