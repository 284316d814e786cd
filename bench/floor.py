"""The floor: the least time a workload can take on this device.

A workload must at least move its bytes (every input read once, the output
written once) and, for matmuls, do its flops on the tensor cores, so its
floor is the larger of bytes / memory bandwidth and flops / matmul peak.
Both rates are measured on the device in the same run as the workloads, not
taken from a data sheet, and each is the best of a few probes, because no
single operation reaches the device's peak: a device-to-device copy alone
read 2.43 TB/s on an H100 where an elementwise kernel moved 2.9 TB/s, which
put that kernel at 119% of its floor. The probes, each counted with the
bytes or flops it really moves or does:

- memory: a 1 GiB copy (read + written), `torch.add(a, b, out=c)` on three
  256 MiB buffers (two read, one written), and a sum of 1 GiB to one value
  (read-mostly);
- matmul: bf16 `torch.mm` at 8192^3, 6144^3 and 16384x16384x4096 (and the
  same shapes in e4m3 through `torch._scaled_mm`, B column-major, when an
  FP8 workload runs).

The highest rate of each kind is the peak; every probe's rate is kept
(`DevicePeaks.describe`, the JSON) so the table says what was measured.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Sequence

from kgc.bench.timing import time_gpu
from kgc.bench.workloads import PEAK_BF16, PEAK_FP8, Workload

_LOG = logging.getLogger(__name__)
GIB, MIB = 1 << 30, 1 << 20
# Each buffer far past the L2 cache, each call long enough (hundreds of us)
# that a launch does not count.
COPY_BYTES = GIB
ADD_BUFFER_BYTES = 256 * MIB
SUM_BYTES = GIB
# (M, N, K): long enough on the tensor cores to reach their peak, with
# different tile quantization, so that one shape's unlucky tail wave does
# not set the peak.
MATMUL_SHAPES = ((8192, 8192, 8192), (6144, 6144, 6144), (16384, 16384, 4096))
# Each probe runs a millisecond or more: this many calls give a stable
# median, and more would only lengthen the run.
PROBE_REPS = 200


@dataclasses.dataclass(frozen=True)
class ProbeCall:
    """One probe, ready to time: `fn(i)` runs it once, and each run moves
    `bytes` (memory probes) or does `flops` (matmul probes)."""

    fn: Callable[[int], object]
    work: float


@dataclasses.dataclass(frozen=True)
class Probe:
    name: str  # what the table says: "copy 1 GiB"
    make: Callable[[str], ProbeCall]  # (device) -> the call, its buffers allocated


@dataclasses.dataclass(frozen=True)
class DevicePeaks:
    memory_bytes_per_s: float
    matmul_flops_per_s: dict[str, float]  # by peak kind: "bf16", "fp8"
    # Every probe's rate by its name; the peaks above are the highest of each.
    memory_probes: dict[str, float] = dataclasses.field(default_factory=dict)
    matmul_probes: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_probes(cls, memory: dict[str, float],
                    matmul: dict[str, dict[str, float]]) -> "DevicePeaks":
        """The peaks as the highest rate of each kind's probes (a kind whose
        probes all failed is left out)."""
        if not memory or not matmul.get(PEAK_BF16):
            raise ValueError("the memory and bf16 matmul peaks need at least one probe each")
        return cls(max(memory.values()),
                   {kind: max(rates.values()) for kind, rates in matmul.items() if rates},
                   dict(memory), {kind: dict(rates) for kind, rates in matmul.items() if rates})

    def floor_us(self, workload: Workload) -> float:
        """max(bytes / memory bandwidth, flops / matmul peak), in
        microseconds. A workload whose peak was not measured is bounded by
        the bf16 one."""
        memory = workload.bytes / self.memory_bytes_per_s
        peak = self.matmul_flops_per_s.get(workload.peak, self.matmul_flops_per_s[PEAK_BF16])
        compute = workload.flops / peak if workload.flops else 0.0
        return max(memory, compute) * 1e6

    def to_dict(self) -> dict:
        return {"memory_GB_per_s": self.memory_bytes_per_s / 1e9,
                "memory_probes_GB_per_s": {k: v / 1e9 for k, v in self.memory_probes.items()},
                "matmul_TFLOPS": {k: v / 1e12 for k, v in self.matmul_flops_per_s.items()},
                "matmul_probes_TFLOPS": {kind: {k: v / 1e12 for k, v in rates.items()}
                                         for kind, rates in self.matmul_probes.items()}}


def describe(peaks: dict, separator: str = "; ") -> str:
    """`DevicePeaks.to_dict()` as text for the table's header: each peak
    with the probes it is the best of, `separator` between peaks."""
    def best_of(value: float, probes: dict, unit: str) -> str:
        if len(probes) < 2:
            return f"{value:.0f} {unit}" + (f" ({next(iter(probes))})" if probes else "")
        return (f"{value:.0f} {unit} (best of " + ", ".join(f"{name} {rate:.0f}"
                                                           for name, rate in probes.items()) + ")")

    parts = [f"memory {best_of(peaks['memory_GB_per_s'], peaks.get('memory_probes_GB_per_s', {}), 'GB/s')}"]
    for kind, value in peaks["matmul_TFLOPS"].items():
        probes = peaks.get("matmul_probes_TFLOPS", {}).get(kind, {})
        parts.append(f"{kind} matmul {best_of(value, probes, 'TFLOPS')}")
    return separator.join(parts)


# -- the probes ------------------------------------------------------------------


def _copy(nbytes: int) -> Probe:
    def make(device: str) -> ProbeCall:
        import torch

        source = torch.empty(nbytes, dtype=torch.uint8, device=device).random_(0, 256)
        destination = torch.empty_like(source)
        return ProbeCall(lambda _: destination.copy_(source), source.nbytes + destination.nbytes)

    return Probe(f"copy {_size(nbytes)}", make)


def _add(buffer_bytes: int) -> Probe:
    def make(device: str) -> ProbeCall:
        import torch

        a, b = (torch.randn(buffer_bytes // 4, device=device) for _ in range(2))
        c = torch.empty_like(a)
        return ProbeCall(lambda _: torch.add(a, b, out=c), a.nbytes + b.nbytes + c.nbytes)

    return Probe(f"add 3x{_size(buffer_bytes)}", make)


def _sum(nbytes: int) -> Probe:
    def make(device: str) -> ProbeCall:
        import torch

        x = torch.randn(nbytes // 4, device=device)
        total = torch.empty((), device=device)
        return ProbeCall(lambda _: torch.sum(x, dim=0, out=total), x.nbytes + total.nbytes)

    return Probe(f"sum {_size(nbytes)}", make)


def _matmul(kind: str, m: int, n: int, k: int) -> Probe:
    def make(device: str) -> ProbeCall:
        import torch

        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        if kind == PEAK_BF16:
            b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
            out = torch.empty(m, n, device=device, dtype=torch.bfloat16)
            return ProbeCall(lambda _: torch.mm(a, b, out=out), 2 * m * n * k)
        # _scaled_mm takes B column-major, the layout 8-bit wgmma reads.
        a8 = a.to(torch.float8_e4m3fn)
        b8 = torch.randn(n, k, device=device).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        return ProbeCall(lambda _: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                    out_dtype=torch.bfloat16), 2 * m * n * k)

    return Probe(f"{m}^3" if m == n == k else f"{m}x{n}x{k}", make)


def _size(nbytes: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", MIB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def memory_probes(copy_bytes: int = COPY_BYTES, add_buffer_bytes: int = ADD_BUFFER_BYTES,
                  sum_bytes: int = SUM_BYTES) -> list[Probe]:
    return [_copy(copy_bytes), _add(add_buffer_bytes), _sum(sum_bytes)]


def matmul_probes(kind: str, shapes: Sequence[tuple[int, int, int]] = MATMUL_SHAPES) -> list[Probe]:
    return [_matmul(kind, *shape) for shape in shapes]


def run_probes(probes: Sequence[Probe], reps: int, device: str = "cuda",
               timer: Callable = time_gpu) -> dict[str, float]:
    """Each probe's rate (work per second) by name; a probe the device
    cannot run (no FP8 tensor cores, out of memory) is logged and left out."""
    import torch

    rates = {}
    for probe in probes:
        try:
            call = probe.make(device)
            rates[probe.name] = call.work / (timer(call.fn, reps) * 1e-6)
        except RuntimeError as error:  # torch.cuda.OutOfMemoryError is one
            _LOG.warning("probe %s failed: %s", probe.name, str(error).splitlines()[0])
        finally:
            call = None  # the buffers go before the next probe allocates its own
            if device == "cuda":
                torch.cuda.empty_cache()
    return rates


def measure_peaks(fp8: bool, reps: int, device: str = "cuda", timer: Callable = time_gpu,
                  memory: Sequence[Probe] | None = None,
                  matmul_shapes: Sequence[tuple[int, int, int]] = MATMUL_SHAPES) -> DevicePeaks:
    """The current device's memory bandwidth and matmul peaks (bf16, and
    fp8 when `fp8` and the device has FP8 tensor cores), each the best of
    its probes, timed over at most PROBE_REPS calls."""
    reps = min(reps, PROBE_REPS)
    memory_rates = run_probes(memory_probes() if memory is None else memory, reps, device, timer)
    matmul_rates = {PEAK_BF16: run_probes(matmul_probes(PEAK_BF16, matmul_shapes), reps,
                                          device, timer)}
    if fp8:
        matmul_rates[PEAK_FP8] = run_probes(matmul_probes(PEAK_FP8, matmul_shapes), reps,
                                            device, timer)
        if not matmul_rates[PEAK_FP8]:
            _LOG.warning("no FP8 matmul peak on this device; FP8 floors use bf16's")
    peaks = DevicePeaks.from_probes(memory_rates, matmul_rates)
    _LOG.info("peaks: %s", describe(peaks.to_dict()))
    return peaks
