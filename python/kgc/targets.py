"""The GPUs kgc compiles for, and what its planning knows of each.

kgc's kernels need the tensor cores and asynchronous copies of sm_80
(Ampere) and newer; the ptxas that Triton 3.6 ships (CUDA 12.8) knows these
of them. Anything else would fail deep inside Triton, or compile for a GPU
that does not exist.

A `Target` is one GPU as the tiler sees it: how many SMs a grid must fill
(split-K, split-KV and persistent programs are sized by it), the shared
memory a block may take, the register file, the L2 cache, which of TMA,
wgmma and 8-bit float tensor cores it has, and its memory bandwidth. One
SM version covers several parts with different SM counts (an A100 and an
A10 are both sm_80/86 parts); `TARGETS` holds the figures of one part per
SM version, named in `Target.part`:

    sm_80   A100 SXM4 80GB       108 SMs (the A30 has 56)
    sm_86   A40                  84 SMs, as the RTX 3090 Ti (RTX 3090: 82,
                                 A10: 72)
    sm_87   Jetson AGX Orin 64GB 16 SMs
    sm_89   L40S                 142 SMs (RTX 4090: 128, L4: 58)
    sm_90   H100 SXM5            132 SMs, as the H200 (H100 PCIe: 114)
    sm_100  B200                 148 SMs
    sm_101  Jetson AGX Thor      20 SMs (10 TPCs, 2560 CUDA cores); its L2
                                 size is not published: None
    sm_120  RTX 5090             170 SMs

Shared memory is the most a block may opt in to (cudaDevAttrMaxShared-
MemoryPerBlockOptin): 227 KiB on sm_90 and sm_100/101, 163 KiB on sm_80
and sm_87, 99 KiB on sm_86, sm_89 and sm_120. Every one of them has 64 Ki
32-bit registers per SM and at most 255 per thread. The bandwidth is the
part's nominal DRAM bandwidth from its datasheet, not a measurement.

`target_for(sm)` is the record a compile for sm_<sm> plans with: the
table's, or, when this process sees a GPU of that SM version, the figures
read from it (`present_gpu`: SM count, shared memory, L2, registers), so
that a compile for the GPU at hand fits that GPU (an H100 PCIe's 114 SMs,
not the SXM's 132). The GPU is read through torch, and only where torch is
loaded already (the runtime, `kgc.compile`, the torch front end): a
compile on the command line or a pass run by kgc-opt plans with the table
alone, so that its output does not depend on the machine it runs on and
it never pays for loading torch.
"""

from __future__ import annotations

import dataclasses
import functools
import sys

SUPPORTED_SMS = (80, 86, 87, 89, 90, 100, 101, 120)
# The target of a compile that names none (`kgc compile`, kgc-opt's passes).
DEFAULT_SM = 90

_KIB, _MIB = 1024, 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Target:
    """What kgc's planning knows of one GPU (see the module docstring)."""

    sm: int  # the SM version: 90 for sm_90
    part: str  # the GPU these figures are of
    sm_count: int
    # The most shared memory one block may use, in bytes (opted in to).
    max_shared_memory_per_block: int
    l2_bytes: int | None  # None: not known
    tma: bool  # a tensor memory accelerator (bulk tensor copies)
    wgmma: bool  # warpgroup MMA (sm_90's; Blackwell's tensor cores are tcgen05)
    fp8: bool  # tensor cores that multiply 8-bit floats
    # Nominal DRAM bandwidth of the part (its datasheet's), GB/s; None: not known.
    nominal_bandwidth_gb_per_s: float | None
    registers_per_sm: int = 65536
    registers_per_thread: int = 255
    # True when the figures were read from the GPU this process runs on.
    from_device: bool = False

    @property
    def name(self) -> str:
        return f"sm_{self.sm}"


TARGETS: dict[int, Target] = {target.sm: target for target in (
    Target(80, "NVIDIA A100-SXM4-80GB", 108, 166912, 40 * _MIB, tma=False, wgmma=False,
           fp8=False, nominal_bandwidth_gb_per_s=2039),
    Target(86, "NVIDIA A40", 84, 101376, 6 * _MIB, tma=False, wgmma=False, fp8=False,
           nominal_bandwidth_gb_per_s=696),
    Target(87, "NVIDIA Jetson AGX Orin 64GB", 16, 166912, 4 * _MIB, tma=False, wgmma=False,
           fp8=False, nominal_bandwidth_gb_per_s=204.8),
    Target(89, "NVIDIA L40S", 142, 101376, 96 * _MIB, tma=False, wgmma=False, fp8=True,
           nominal_bandwidth_gb_per_s=864),
    Target(90, "NVIDIA H100 80GB HBM3", 132, 232448, 50 * _MIB, tma=True, wgmma=True, fp8=True,
           nominal_bandwidth_gb_per_s=3350),
    Target(100, "NVIDIA B200", 148, 232448, 126 * _MIB, tma=True, wgmma=False, fp8=True,
           nominal_bandwidth_gb_per_s=8000),
    Target(101, "NVIDIA Jetson AGX Thor", 20, 232448, None, tma=True, wgmma=False, fp8=True,
           nominal_bandwidth_gb_per_s=273),
    Target(120, "NVIDIA GeForce RTX 5090", 170, 101376, 96 * _MIB, tma=True, wgmma=False,
           fp8=True, nominal_bandwidth_gb_per_s=1792),
)}


def table_record(sm: int) -> Target:
    """The table's record of sm_<sm>; ValueError naming the supported SM
    versions for any other."""
    record = TARGETS.get(sm)
    if record is None:
        supported = ", ".join(f"sm_{s}" for s in SUPPORTED_SMS)
        raise ValueError(f"sm_{sm} is not a GPU kgc compiles for (supported: {supported})")
    return record


def from_properties(properties) -> Target | None:
    """The record of a GPU described by `properties` (what
    torch.cuda.get_device_properties returns): the table's record of its
    SM version with the GPU's own SM count, opt-in shared memory per block,
    L2 size and registers per SM. None for a GPU kgc does not compile for."""
    sm = properties.major * 10 + properties.minor
    record = TARGETS.get(sm)
    if record is None:
        return None

    def read(name: str, default):
        # Older torch builds lack some fields; a zero is not a reading.
        value = getattr(properties, name, None)
        return value if value else default

    return dataclasses.replace(
        record, part=read("name", record.part),
        sm_count=read("multi_processor_count", record.sm_count),
        max_shared_memory_per_block=read("shared_memory_per_block_optin",
                                         record.max_shared_memory_per_block),
        l2_bytes=read("L2_cache_size", record.l2_bytes),
        registers_per_sm=read("regs_per_multiprocessor", record.registers_per_sm),
        from_device=True)


def present_gpu() -> Target | None:
    """The record of the current CUDA device, read through torch when torch
    is loaded and sees one that kgc compiles for; None otherwise (torch not
    loaded, no GPU, or an older one)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return _device_record(torch.cuda.current_device())
    except (RuntimeError, AssertionError):  # a torch built without CUDA, a driver too old
        return None


@functools.lru_cache(maxsize=None)
def _device_record(index: int) -> Target | None:
    import torch

    return from_properties(torch.cuda.get_device_properties(index))


def target_for(sm: int | Target | None = None) -> Target:
    """The record a compile for sm_<sm> plans with (None: DEFAULT_SM): the
    present GPU's figures where it is of that SM version, else the table's.
    A Target is returned as it is."""
    if isinstance(sm, Target):
        return sm
    record = table_record(DEFAULT_SM if sm is None else sm)
    present = present_gpu()
    return present if present is not None and present.sm == record.sm else record


@dataclasses.dataclass(frozen=True)
class TargetLimits:
    """What one program (CUDA block) of a kernel may use on a GPU: a kernel
    over them compiles (ptxas does not know the launch) but fails at launch,
    so kgc checks them when it compiles and exports."""

    max_shared_mem: int  # bytes of shared memory per block (the opt-in maximum)
    max_num_regs: int = 65536  # 32-bit registers per block
    max_threads: int = 1024  # threads per block

    def as_device_properties(self) -> dict:
        """In the form of Triton's `driver.active.utils.get_device_properties`
        (what `Artifact.exceeds` takes)."""
        return {"max_shared_mem": self.max_shared_mem, "max_num_regs": self.max_num_regs}


# The per-block limits of each SM version, from its record (NVIDIA's CUDA C
# Programming Guide, "Technical Specifications per Compute Capability").
LIMITS = {sm: TargetLimits(record.max_shared_memory_per_block, record.registers_per_sm)
          for sm, record in TARGETS.items()}


def target_limits(target: int) -> TargetLimits:
    """The per-block limits of `sm_<target>`."""
    return LIMITS[table_record(target).sm]
