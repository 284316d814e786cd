"""Everything the runtime takes from Triton's and torch's private API, and
nothing else: no other module of the runtime reaches into them.

From Triton (3.6): its CUDA driver object (`triton.runtime.driver.driver
.active`) to load a cubin, to read a device's limits and the current
stream, and to build the launcher of a kernel's signature; its backend to
pack a kernel's metadata for the launcher; its launch hooks
(`triton.knobs.runtime`); and the calling convention of the launcher's
`launch` function. From torch: the current device's index without
torch.cuda.current_device()'s checks (`torch._C._cuda_getDevice`), the
strided CUDA constructor without torch.empty's argument parsing
(`torch._C._dynamo.guards._empty_strided_cuda`), and the getters and
setters of cuBLAS's precision settings (`torch._C._get_cublas_*`).

Should either change, this module is what changes.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable

from kgc.diagnostics import KgcError

# The alignment of torch's CUDA allocations (its caching allocator rounds
# every block to 512 bytes), which a kernel's scratch alignment must divide.
_TORCH_ALIGNMENT = 512


@dataclasses.dataclass(frozen=True)
class LoadedKernel:
    """A kernel's cubin loaded on one device, with Triton's launcher for its
    signature and its packed metadata."""

    launcher: Any
    handle: int
    packed: Any


@dataclasses.dataclass(frozen=True)
class LaunchCall:
    """How to launch a kernel: `function(grid_x, grid_y, grid_z, stream,
    *fixed, *pointers, *scalars)`."""

    function: Callable
    fixed: tuple


def current_device_reader() -> Callable[[], int]:
    """A function returning the current CUDA device's index, without
    torch.cuda.current_device()'s checks, which cost as much as the rest
    of a small graph's call."""
    import torch

    return torch._C._cuda_getDevice


def strided_allocator(device: int) -> Callable:
    """`allocate(shape, strides, dtype)`: a new tensor on CUDA device
    `device`, the current device when it is called: torch's strided
    constructor for the current CUDA device, without torch.empty's
    argument parsing, which Inductor's generated code allocates through
    too (a training step makes some 150 buffers, at a few microseconds of
    parsing each); torch.empty_strided where this torch has no such
    constructor. The constructor takes `shape` and `strides` as tuples
    (not torch.Size, not lists) of ints."""
    import torch

    try:
        from torch._C._dynamo.guards import _empty_strided_cuda
    except ImportError:
        _empty_strided_cuda = None
    if _empty_strided_cuda is not None:
        return _empty_strided_cuda
    empty_strided = torch.empty_strided

    def allocate(shape, strides, dtype):
        return empty_strided(shape, strides, dtype=dtype, device=device)

    return allocate


def matmul_precision_settings(names) -> dict:
    """name -> (getter, setter) of each of torch.backends.cuda.matmul's
    settings `names` (allow_tf32, allow_bf16_reduced_precision_reduction,
    ...), called directly: the module's attribute access parses its
    arguments in Python, microseconds a toggle. A reduction setting's getter
    returns (reduced precision, split-K) where torch has both, and its
    setter takes both; a bool and one argument where it has one."""
    import torch

    return {name: (getattr(torch._C, f"_get_cublas_{name}"),
                   getattr(torch._C, f"_set_cublas_{name}")) for name in names}


def stream_reader() -> Callable[[int], int]:
    """Triton's function from a device index to its current stream."""
    from triton.runtime.driver import driver

    return driver.active.get_current_stream


def device_limits(device: int) -> dict:
    """The limits of `device` (shared memory, registers) as Triton reads them."""
    from triton.runtime.driver import driver

    return driver.active.utils.get_device_properties(device)


def launch_hooks() -> tuple:
    """Triton's launch hook chains (enter, exit): kept, and called by every
    launch that passes them, even for hooks added later."""
    from triton import knobs

    return knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook


def any_hooked(hooks) -> bool:
    """Whether a launch hook does anything: Triton's hooks are chains of
    calls (`triton.knobs.HookChain`), empty unless a tool adds one."""
    return any(hook is not None and getattr(hook, "calls", True) != [] for hook in hooks)


def _launcher_inputs(artifact) -> tuple:
    """What Triton's launcher class is made of for `artifact`: its source
    (the argument types) and its metadata as a named tuple."""
    from triton.backends.compiler import GPUTarget

    metadata = dict(artifact.metadata)
    metadata["target"] = GPUTarget(**metadata["target"])
    metadata = collections.namedtuple("KernelMetadata", sorted(metadata))(**metadata)
    return _LaunchSignature({i: kind for i, kind in enumerate(artifact.signature)}), metadata


# At most this many launcher stubs compile at once.
_LAUNCHER_BUILDS = 8


def build_launchers(artifacts) -> None:
    """Makes Triton build the launcher of each distinct signature among
    `artifacts` at once, on threads: a signature Triton has not seen
    compiles a C stub in a subprocess (a third of a second each), which one
    kernel after another would pay in turn on a cold cache. The launchers
    land in Triton's cache, where `load_kernel` finds them."""
    from concurrent.futures import ThreadPoolExecutor

    from triton.runtime.driver import driver

    launcher_cls = driver.active.launcher_cls
    distinct = {}
    for artifact in artifacts:
        distinct.setdefault((tuple(artifact.signature),
                             repr(artifact.metadata.get("tensordesc_meta"))), artifact)
    if len(distinct) < 2:
        return
    with ThreadPoolExecutor(max_workers=min(len(distinct), _LAUNCHER_BUILDS)) as pool:
        for future in [pool.submit(launcher_cls, *_launcher_inputs(a))
                       for a in distinct.values()]:
            future.result()


def load_kernel(artifact, device: int, limits: dict) -> LoadedKernel:
    """`artifact` loaded on the current device, which is `device`."""
    from triton.compiler.compiler import make_backend
    from triton.runtime.driver import driver

    active = driver.active
    reason = artifact.exceeds(limits)
    if reason is not None:
        raise KgcError(f"kernel @{artifact.name} cannot run on cuda:{device}: it {reason}")
    source, metadata = _launcher_inputs(artifact)
    launcher = active.launcher_cls(source, metadata)
    _, handle, _, _, max_threads = active.utils.load_binary(
        artifact.entry, artifact.cubin, artifact.shared, device)
    if metadata.num_warps * 32 > max_threads:
        raise KgcError(f"kernel @{artifact.name} cannot run on cuda:{device}: it needs "
                       f"{metadata.num_warps * 32} threads per program, the loaded kernel allows "
                       f"{max_threads}")
    return LoadedKernel(launcher, handle, make_backend(metadata.target).pack_metadata(metadata))


def launch_call(kernel: LoadedKernel, device: int, enter, exit_) -> LaunchCall:
    """The call that launches `kernel` on `device` with the launch hooks
    `enter` and `exit_` (None: none). Where the kernel needs no scratch
    memory, Triton's launch function itself (its launcher object would only
    find that out again on every call); where it needs global scratch,
    one that takes it from torch (`scratch_launch`); where it needs profile
    scratch, the launcher object, which allocates it."""
    launcher, handle, packed = kernel.launcher, kernel.handle, kernel.packed
    if launcher.global_scratch_size and not launcher.profile_scratch_size:
        return LaunchCall(scratch_launch(launcher, handle, device), (packed, None, enter, exit_))
    if launcher.profile_scratch_size:
        return LaunchCall(launcher, (handle, packed, None, enter, exit_))
    return LaunchCall(launcher.launch, (handle, launcher.launch_cooperative_grid,
                                        launcher.launch_pdl, None, None, packed, None, enter,
                                        exit_))


def scratch_launch(launcher, handle, device: int):
    """Triton's launch function for a kernel that needs global scratch
    memory, called as `(grid_x, grid_y, grid_z, stream, packed metadata,
    launch metadata, enter hook, exit hook, *arguments)`: each call takes
    the kernel's scratch (its size per program times the programs) from
    torch on `device`, on the current stream, and passes it, so that no
    process-wide allocator (`triton.set_allocator`) is needed and calls on
    several streams never share one."""
    import torch

    size, align = launcher.global_scratch_size, launcher.global_scratch_align
    if _TORCH_ALIGNMENT % max(align, 1):
        raise KgcError(f"a kernel asks for global scratch aligned to {align} bytes; torch's "
                       f"allocations are aligned to {_TORCH_ALIGNMENT}")
    launch, empty, uint8 = launcher.launch, torch.empty, torch.uint8
    cooperative, pdl, ctas = launcher.launch_cooperative_grid, launcher.launch_pdl, \
        launcher.num_ctas

    def launch_with_scratch(grid_x, grid_y, grid_z, stream, *rest):
        scratch = empty(grid_x * grid_y * grid_z * ctas * size, dtype=uint8, device=device)
        launch(grid_x, grid_y, grid_z, stream, handle, cooperative, pdl, scratch.data_ptr(), None,
               *rest)

    return launch_with_scratch


class _LaunchSignature:
    """What Triton's launcher builder reads of a compiled source: the type of
    each argument (`*fp16`, `i32`), and no constants."""

    def __init__(self, signature: dict):
        self.signature = signature
        self.constants = {}
