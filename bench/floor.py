"""The floor: the least time a workload can take on this device.

A workload must at least move its bytes (every input read once, the output
written once) and, for matmuls, do its flops on the tensor cores, so its
floor is the larger of bytes / copy bandwidth and flops / matmul peak. Both
rates are measured on the device in the same run as the workloads, not
taken from a data sheet: a large device-to-device copy (bytes read plus
bytes written over its time) and a large bf16 matmul (and an e4m3 one,
torch._scaled_mm, when an FP8 workload runs).
"""

from __future__ import annotations

import dataclasses
import logging

from kgc.bench.timing import time_gpu
from kgc.bench.workloads import PEAK_FP8, Workload

_LOG = logging.getLogger(__name__)
# 1 GiB copied: far past the L2 cache, long enough (hundreds of us) that a
# launch does not count.
COPY_BYTES = 1 << 30
# The matmuls' side: long enough on the tensor cores to reach their peak.
MATMUL_SIDE = 8192


@dataclasses.dataclass(frozen=True)
class DevicePeaks:
    copy_bytes_per_s: float
    matmul_flops_per_s: dict[str, float]  # by peak kind: "bf16", "fp8"

    def floor_us(self, workload: Workload) -> float:
        """max(bytes / copy bandwidth, flops / matmul peak), in microseconds.
        A workload whose peak was not measured is bounded by the bf16 one."""
        memory = workload.bytes / self.copy_bytes_per_s
        peak = self.matmul_flops_per_s.get(workload.peak, self.matmul_flops_per_s["bf16"])
        compute = workload.flops / peak if workload.flops else 0.0
        return max(memory, compute) * 1e6

    def to_dict(self) -> dict:
        return {"copy_GB_per_s": self.copy_bytes_per_s / 1e9,
                "matmul_TFLOPS": {k: v / 1e12 for k, v in self.matmul_flops_per_s.items()}}


def measure_peaks(fp8: bool, reps: int) -> DevicePeaks:
    """The current device's copy bandwidth and matmul peaks (bf16, and fp8
    when `fp8` and the device has FP8 tensor cores)."""
    import torch

    source = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    source.random_(0, 256)
    destination = torch.empty_like(source)
    copy_us = time_gpu(lambda _: destination.copy_(source), reps)
    del source, destination
    bandwidth = 2 * COPY_BYTES / (copy_us * 1e-6)

    side = MATMUL_SIDE
    a = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(side, side, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)
    mm_us = time_gpu(lambda _: torch.mm(a, b, out=out), reps)
    peaks = {"bf16": 2 * side**3 / (mm_us * 1e-6)}
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
        one = torch.ones((), device="cuda")
        try:
            fp8_us = time_gpu(lambda _: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                       out_dtype=torch.bfloat16), reps)
            peaks[PEAK_FP8] = 2 * side**3 / (fp8_us * 1e-6)
        except RuntimeError as error:  # no FP8 tensor cores (before sm_89)
            _LOG.warning("no FP8 matmul peak on this device (%s); FP8 floors use bf16's",
                         str(error).splitlines()[0])
    _LOG.info("copy %.0f GB/s, matmul %s", bandwidth / 1e9,
              ", ".join(f"{k} {v / 1e12:.0f} TFLOPS" for k, v in peaks.items()))
    return DevicePeaks(bandwidth, peaks)
