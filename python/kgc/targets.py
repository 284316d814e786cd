"""The GPUs kgc compiles for, and what one program (CUDA block) may use on each.

kgc's kernels need the tensor cores and asynchronous copies of sm_80
(Ampere) and newer; the ptxas that Triton 3.6 ships (CUDA 12.8) knows these
of them. Anything else would fail deep inside Triton, or compile for a GPU
that does not exist.

`LIMITS` gives each SM's per-block limits from NVIDIA's CUDA C Programming
Guide ("Technical Specifications per Compute Capability"): the most
dynamic shared memory a block may opt in to, and the 32-bit registers of a
block. A kernel over them compiles (ptxas does not know the launch) but
fails at launch, so kgc checks them when it compiles and exports.
"""

from __future__ import annotations

import dataclasses

SUPPORTED_SMS = (80, 86, 87, 89, 90, 100, 101, 120)


@dataclasses.dataclass(frozen=True)
class TargetLimits:
    """What one program of a kernel may use on a GPU of this SM."""

    max_shared_mem: int  # bytes of shared memory per block (the opt-in maximum)
    max_num_regs: int = 65536  # 32-bit registers per block
    max_threads: int = 1024  # threads per block

    def as_device_properties(self) -> dict:
        """In the form of Triton's `driver.active.utils.get_device_properties`
        (what `Artifact.exceeds` takes)."""
        return {"max_shared_mem": self.max_shared_mem, "max_num_regs": self.max_num_regs}


KIB = 1024
LIMITS = {
    80: TargetLimits(163 * KIB),  # A100
    86: TargetLimits(99 * KIB),  # RTX 30xx, A40
    87: TargetLimits(163 * KIB),  # Jetson Orin
    89: TargetLimits(99 * KIB),  # L4, L40, RTX 40xx
    90: TargetLimits(227 * KIB),  # H100, H200
    100: TargetLimits(227 * KIB),  # B200
    101: TargetLimits(227 * KIB),
    120: TargetLimits(99 * KIB),  # RTX 50xx
}
assert set(LIMITS) == set(SUPPORTED_SMS)


def target_limits(target: int) -> TargetLimits:
    """The per-block limits of `sm_<target>`."""
    return LIMITS[target]
