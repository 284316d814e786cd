"""The rows of the model suite and what their runs share: a row's results
(`ModelRow`: kgc's status and errors, each contender's times, compile time
and peak memory, kgc's kernels and the ops it leaves to PyTorch), the
contenders' names, compiling a model's forward as a contender does, the GPU
kernel time of a call, and kgc's reports of a row's graphs.

`kgc.bench.model_run` runs the forward and generate rows and makes the
suite's table, JSON and chart; `kgc.bench.model_train` runs the training
rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from typing import Callable

from kgc.bench.models import CPU

EAGER, INDUCTOR, CUDA_GRAPHS, KGC = "eager", "torch.compile", "cudagraphs", "kgc"
# kgc's forward under mode="reduce-overhead": its launches and the PyTorch
# ops between them replayed as CUDA graphs (kgc.torch.cuda_graphs).
KGC_GRAPHS = "kgc-cudagraphs"
GPU_RUNNERS = (EAGER, INDUCTOR, CUDA_GRAPHS, KGC, KGC_GRAPHS)
LABELS = {EAGER: "eager", INDUCTOR: "torch.compile", CUDA_GRAPHS: "torch.compile reduce-overhead",
          KGC: "kgc", KGC_GRAPHS: "kgc reduce-overhead"}
OK, WRONG, FAILED = "ok", "wrong", "failed"


@dataclasses.dataclass
class ModelRow:
    model: str
    row: str
    status: str = OK  # kgc's: ok, wrong (checked and differs) or failed (did not run)
    reason: str | None = None  # why not ok
    # max |logits - reference|; for the training rows, the largest over the
    # loss and each gradient of max |x - reference| / max |reference|.
    kgc_error: float | None = None
    eager_error: float | None = None
    tokens_equal: bool | None = None  # generate rows
    # Where the tokens part from eager's at a near-tie, which step and why
    # that is no error (the row stays ok).
    note: str | None = None
    wall_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # as called, median
    gpu_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # kernels' time per call
    compile_s: dict[str, float] = dataclasses.field(default_factory=dict)  # first call
    errors: dict[str, str] = dataclasses.field(default_factory=dict)  # runner -> why no time
    # Training rows: the most memory one step allocates above what it starts
    # with (activations, gradients, workspaces), MiB.
    peak_mb: dict[str, float] = dataclasses.field(default_factory=dict)
    kgc_kernels: int | None = None
    kgc_fallbacks: dict[str, int] = dataclasses.field(default_factory=dict)  # aten op -> count
    # Per kind of graph (inference; a training step's forward and backward):
    # {"kernels": count, "fallbacks": {aten op: count}}.
    kgc_graphs: dict[str, dict] = dataclasses.field(default_factory=dict)
    recompiles: int | None = None  # Dynamo compiles after the first, over the whole row
    # Dynamic-cache generate rows: what kgc compiled (Dynamo frames and kernel
    # graphs) for a second generate() of another prompt length and number of
    # new tokens, after the first; 0 is one compile serving every length.
    second_call_compiles: int | None = None

    @property
    def fallback_count(self) -> int:
        return sum(self.kgc_fallbacks.values())

    def fallback_cell(self) -> str:
        """The ops left to PyTorch, as forward+backward for a training
        step."""
        if "backward" not in self.kgc_graphs:
            return str(self.fallback_count)
        return "+".join(str(sum(self.kgc_graphs.get(kind, {}).get("fallbacks", {}).values()))
                        for kind in ("forward", "backward"))

    def speedup(self, over: str = INDUCTOR, times: str = "gpu_ms") -> float | None:
        measured = getattr(self, times)
        if KGC not in measured or over not in measured:
            return None
        return measured[over] / measured[KGC]

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["speedup_gpu"] = self.speedup()
        data["speedup_wall"] = self.speedup(times="wall_ms")
        return data


def compile_forward(model, runner: str, size: str, dynamic: bool | None = None) -> None:
    """`model.forward = torch.compile(model.forward, ...)` as `runner`
    compiles it, as a user would (nothing for eager), with torch.compile's
    `dynamic`; `del model.forward` undoes it."""
    import torch

    if runner == EAGER:
        return
    options = {"executor": "cpu"} if size == CPU else None
    compile_options = (dict(backend="kgc", options=options) if runner == KGC else
                       dict(backend="kgc", mode="reduce-overhead") if runner == KGC_GRAPHS else
                       dict(mode="reduce-overhead") if runner == CUDA_GRAPHS else {})
    model.forward = torch.compile(model.forward, dynamic=dynamic, **compile_options)


@contextlib.contextmanager
def contending(row: "ModelRow", runner: str, model, size: str, reset: bool = True,
               dynamic: bool | None = None):
    """The frame of one contender's turn at a row: `model.forward` compiled
    as `runner` compiles it (from a fresh Dynamo state with `reset`),
    warnings silenced within (kgc's fallbacks are counted from its
    reports); after the block, kgc's recompiles and graphs recorded and the
    class's forward restored. A failure in the block ends it as the
    contender's error (and, for kgc, the row's status)."""
    import torch
    from torch._dynamo.utils import counters

    if reset:
        torch._dynamo.reset()
    graphs_before = len(kgc_reports())
    try:
        compile_forward(model, runner, size, dynamic)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frames_before = counters["frames"]["ok"]
                yield
            if runner == KGC:
                row.recompiles = max(0, counters["frames"]["ok"] - frames_before - 1)
                record_kgc(row, kgc_reports()[graphs_before:])
        finally:
            if runner != EAGER:
                del model.forward  # the class's forward again
    except Exception as error:
        row.errors[runner] = first_line(error)
        if runner == KGC and row.status == OK:
            row.status, row.reason = FAILED, first_line(error)


# Calls profiled for a GPU kernel time: one call's sum moves by several
# percent with clocks and whatever ran before it; the median of several
# does not.
PROFILED_CALLS = 7
# The profiler range around each profiled call.
_CALL_MARK = "kgc-bench-call-"


def gpu_kernel_ms(call: Callable[[], object], calls: int = PROFILED_CALLS) -> float:
    """The GPU kernel time of one `call()`, ms: the median over `calls`
    calls of the sum of the times of the kernels each launches, from
    torch's profiler."""
    import torch
    from torch.autograd import DeviceType

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as profile:
        for index in range(calls):
            with torch.profiler.record_function(f"{_CALL_MARK}{index}"):
                call()
                torch.cuda.synchronize()
    events = profile.events()
    ranges = [(event.time_range.start, event.time_range.end) for event in events
              if event.device_type == DeviceType.CPU and event.name.startswith(_CALL_MARK)]
    # Ranges on the host (this one's, the optimizer's, a compiled region's)
    # are drawn on the GPU's timeline too, over the kernels they hold.
    kernels = [(event.time_range.start, event.time_range.elapsed_us()) for event in events
               if event.device_type == DeviceType.CUDA
               and not getattr(event, "is_user_annotation", False)
               and not event.name.startswith(_CALL_MARK)]
    return median_call_us(ranges, kernels, calls) / 1e3


def median_call_us(ranges: list[tuple[float, float]], kernels: list[tuple[float, float]],
                   calls: int) -> float:
    """The median over calls of the kernel time each call launched, us.
    `ranges` are the calls' (start, end) on the host and `kernels` each
    kernel's (start, duration); a call ends only once its kernels have
    (it synchronizes), so a kernel belongs to the call whose range holds
    its start. Where some kernel falls in no range (or the ranges are not
    one per call), the mean over the calls of all the kernels' time."""
    import bisect
    import statistics

    ranges = sorted(ranges)
    if len(ranges) != calls:
        return sum(duration for _, duration in kernels) / calls
    starts = [start for start, _ in ranges]
    sums = [0.0] * calls
    for start, duration in kernels:
        index = bisect.bisect_right(starts, start) - 1
        if index < 0 or start > ranges[index][1]:
            return sum(duration for _, duration in kernels) / calls
        sums[index] += duration
    return statistics.median(sums)


def record_kgc(row: ModelRow, reports: list) -> None:
    """kgc's kernels and the ops left to PyTorch in `reports` (the graphs
    of the row), in all and per kind of graph, and per kind of graph why
    each partition kgc failed to compile ran in PyTorch (its reason's first
    line -> how many partitions) and why the ops of kernels that failed to
    compile did (the error -> how many ops)."""
    from kgc.torch.backend import KERNEL_FAILED

    row.kgc_kernels, row.kgc_fallbacks, row.kgc_graphs = 0, {}, {}
    for report in reports:
        if report.whole_graph_reason is not None:
            raise RuntimeError(f"a whole graph ran in PyTorch: {report.whole_graph_reason}")
        graph = row.kgc_graphs.setdefault(report.kind, {"kernels": 0, "fallbacks": {},
                                                        "failed_partitions": {},
                                                        "failed_kernels": {}})
        graph["kernels"] += report.kernel_count
        row.kgc_kernels += report.kernel_count
        left = [op for op, _ in report.fallbacks]
        for _, why in report.fallbacks:
            if why.startswith(KERNEL_FAILED):
                error = why[len(KERNEL_FAILED):][:300]
                graph["failed_kernels"][error] = graph["failed_kernels"].get(error, 0) + 1
        for partition in report.partitions:
            if partition.fallback_reason is None:
                continue
            left += partition.ops
            reason = (str(partition.fallback_reason).strip().splitlines() or ["?"])[0][:300]
            failed = graph["failed_partitions"]
            failed[reason] = failed.get(reason, 0) + 1
        for op in left:
            name = op.split(":")[0]
            row.kgc_fallbacks[name] = row.kgc_fallbacks.get(name, 0) + 1
            graph["fallbacks"][name] = graph["fallbacks"].get(name, 0) + 1


def kgc_reports() -> list:
    from kgc.torch import reports

    return reports()


def kgc_compiled_graphs() -> int:
    """How many kernel graphs the "kgc" backend has compiled so far."""
    from kgc.torch.backend import compiled_graphs

    return len(compiled_graphs())


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
