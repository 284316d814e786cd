"""Launching a compiled function's kernels on one device.

`bind` does the work of a function's first call on a device, once: it
loads each kernel's cubin there and makes, per launch, a `BoundLaunch`,
which holds how to call it (`launch_factory`, the one place that picks
the call, through `kgc.runtime.internals`) with Triton's launch hooks and
without them. `launch` runs a call's launches, giving the buffers that are
neither arguments nor results their places in one workspace, as the
function's memory plan says (`BufferLayout`); `fast_call` is the call as
it is once kernels are bound, for arguments that need no checking beyond
what it does itself.

A library kernel (a bare matmul that the GPU's BLAS computes,
`kgc.tiling.library`) binds no cubin: its launch holds the call
(`kgc.runtime.library`), which gets the buffers as tensors (intermediates
as views of the workspace) where Triton's launches get pointers.

A kernel that asks for global scratch memory (Triton's `global_scratch_size`
metadata: the TMA descriptors that matmuls with the `tma` knob build on the
device, 128 bytes each per program) gets a fresh torch allocation of that
many bytes per program with every launch (`internals.scratch_launch`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

from kgc.element_types import poison as poison_value
from kgc.element_types import torch_dtype
from kgc.runtime import internals
from kgc.runtime.library import exact_products, library_function
from kgc.runtime.checks import ALIGNMENT, overlap
from kgc.runtime.internals import LaunchCall, LoadedKernel
from kgc.tiling.index_maps import BufferView


@dataclasses.dataclass(frozen=True)
class BoundLaunch:
    """One kernel launch of a function, ready on one device: its grid, the
    buffers it passes (inputs, then outputs), its i32 scalars, and its call
    with Triton's launch hooks (`hooked`) and without them (`bare`: an
    empty chain of hooks is still a Python call before and after every
    launch). A library kernel has no Triton call: `library` takes its
    buffers as tensors (kgc.runtime.library)."""

    kernel: str
    grid: tuple[int, int, int]
    operands: tuple[int, ...]
    scalars: tuple[int, ...]
    hooked: LaunchCall | None
    bare: LaunchCall | None
    library: Callable[..., None] | None = None


@dataclasses.dataclass(frozen=True)
class BoundFunction:
    """Every launch of a function bound on `device`, the hook chains they
    were bound with, and how to read the device's current stream."""

    device: int
    launches: tuple[BoundLaunch, ...]
    hooks: tuple
    stream_of: Callable[[int], int]


@dataclasses.dataclass(frozen=True)
class BufferLayout:
    """Where a call finds the function's buffers that are not arguments:
    `fresh` (buffer, torch.Size, torch dtype) of each, in buffer order;
    `offsets` those of them that live in the workspace (the memory plan's
    intermediates) and where; the rest, the results, are tensors of their
    own."""

    fresh: tuple
    offsets: dict[int, int]
    workspace_bytes: int

    @classmethod
    def of(cls, function) -> "BufferLayout":
        import torch

        fresh = tuple((i, torch.Size(b.shape), torch_dtype(b.dtype))
                      for i, b in enumerate(function.buffers) if i >= function.num_arguments)
        return cls(fresh, function.memory.offsets(), function.memory.workspace_bytes)


def launch_factory(kernel: str, loaded: LoadedKernel, grid, operands, scalars, device: int,
                   hooks: tuple) -> BoundLaunch:
    """The bound launch of `loaded` with `hooks` (enter, exit)."""
    return BoundLaunch(kernel, tuple(grid), tuple(operands), tuple(scalars),
                       internals.launch_call(loaded, device, *hooks),
                       internals.launch_call(loaded, device, None, None))


def bind(module, function, device: int, loaded: dict | None = None) -> BoundFunction:
    """Loads every kernel of `function` (of the compiled `module`) on
    `device` and binds its launches. A function made `at` a size of its
    dynamic extent launches its kernels over that extent with grids and
    size arguments for it. `loaded` (artifact key -> LoadedKernel on
    `device`) keeps the kernels loaded for the next binding on that device
    (another size of the extent), so that a cubin is loaded once."""
    import torch

    hooks = internals.launch_hooks()
    loaded = {} if loaded is None else loaded
    extent = function.extent
    launches = []
    with torch.cuda.device(device):
        limits = internals.device_limits(device)
        kernels = [module.kernels[launch.kernel] for launch in function.launches]
        internals.build_launchers([k.artifact for k in kernels if k.library is None and
                                   (k.artifact.hash, k.artifact.entry) not in loaded])
        for launch, kernel in zip(function.launches, kernels):
            if kernel.library is not None:
                operands = launch.inputs + launch.outputs
                specs = [function.buffers[i].at(extent) for i in operands]
                launches.append(BoundLaunch(
                    launch.kernel, (1, 1, 1), tuple(operands), (), None, None,
                    library_function(launch.kernel, kernel.library, kernel.arguments[0].dtype,
                                     None if any(s.is_dynamic for s in specs) else specs)))
                continue
            artifact = kernel.artifact
            key = (artifact.hash, artifact.entry)
            if key not in loaded:
                loaded[key] = internals.load_kernel(artifact, device, limits)
            launches.append(launch_factory(launch.kernel, loaded[key], kernel.grid_at(extent),
                                           launch.inputs + launch.outputs,
                                           kernel.scalars_at(launch.scalars, extent), device,
                                           hooks))
    return BoundFunction(device, tuple(launches), hooks, internals.stream_reader())


def launch(bound: BoundFunction, layout: BufferLayout, buffers: list, poison: bool) -> None:
    """Runs the launches of `bound` on `buffers` (the arguments and any
    `out=` buffers set, None elsewhere), making the other buffers first:
    results as fresh tensors, intermediates in one workspace. With
    `poison`, every buffer made starts as the poison value of its dtype."""
    import torch

    device = bound.device
    workspace = torch.empty(layout.workspace_bytes, dtype=torch.uint8, device=device) \
        if layout.offsets else None
    for index, shape, dtype in layout.fresh:
        if buffers[index] is None:
            offset = layout.offsets.get(index)
            if offset is None:
                buffers[index] = torch.empty(shape, dtype=dtype, device=device)
            else:
                size = shape.numel() * dtype.itemsize
                buffers[index] = workspace[offset:offset + size].view(dtype).view(shape)
        if poison:
            buffers[index].fill_(poison_value(dtype))
    stream = bound.stream_of(device)
    libraries = any(b.library is not None for b in bound.launches)
    with exact_products() if libraries else contextlib.nullcontext():
        for bound_launch in bound.launches:
            if bound_launch.library is not None:
                bound_launch.library(*[buffers[i] for i in bound_launch.operands])
                continue
            call = bound_launch.hooked
            call.function(*bound_launch.grid, stream, *call.fixed,
                          *[buffers[i].data_ptr() for i in bound_launch.operands],
                          *bound_launch.scalars)


def fast_call(function, specs: list, layout: BufferLayout, bound: BoundFunction,
              streamed: bool = False):
    """The call as it is after the first: arguments that are already what
    the kernels read (dense, aligned, on the bound device, the current
    device) launch with nothing but those checks, a fresh tensor per result
    and the kernels' launch functions. Anything else returns None, and the
    call takes the checking path, which copies or explains.

    `streamed` gives each result and intermediate an allocation of its own,
    made just before the first launch that writes it, and frees each
    intermediate after the last launch that reads it, instead of making
    every result and one workspace for the intermediates first: a call then
    holds at most what is live at one launch, for an allocation per buffer.
    (The kernels run on the stream torch allocates for, so a freed buffer
    is reused only by launches after its last reader.)

    The call is `fast(tensors, out, take=False)`. With `take`, `tensors` is
    a list the call empties once it has checked them, so that the call
    holds the only references it was given: a streamed call then drops each
    argument after the last launch that reads it
    (`memory_plan.argument_releases`), and an activation nobody else holds
    is freed while the call runs rather than after it."""
    import torch

    device = bound.device
    results = tuple(function.results)
    count, size = len(specs), len(function.buffers)
    allocate = internals.strided_allocator(device)
    # (buffer, shape, strides, dtype) of each allocation a call makes; the
    # shape and strides plain tuples of ints, which the constructor takes.
    fresh = {index: (index, tuple(map(int, shape)),
                     tuple(map(int, BufferView.contiguous(shape).strides)), dtype)
             for index, shape, dtype in layout.fresh}
    fresh_results = [spec for index, spec in fresh.items() if index not in layout.offsets]
    workspace_bytes, offsets = layout.workspace_bytes, tuple(layout.offsets.items())
    made_at = freed_at = released_at = ()
    if streamed:
        # The pipeline loads MLIR.
        from kgc.pipeline.memory_plan import argument_releases, buffer_steps

        made, freed_at = buffer_steps(function)
        released_at = tuple(freed + arguments for freed, arguments in
                            zip(freed_at, argument_releases(function)))
        made_at = tuple(tuple(fresh[b] for b in step) for step in made)
        written = {b for step in made for b in step}
        # A result no launch writes (none is) would still be made first.
        fresh_results = [spec for spec in fresh_results if spec[0] not in written]
        workspace_bytes, offsets = 0, ()
    uint8 = torch.uint8
    # Parameters are tensors whose type only tells autograd to track them:
    # the torch backend passes a module's weights as they are.
    plain = (torch.Tensor, torch.nn.Parameter)
    tensor_type = torch.Tensor
    current = internals.current_device_reader()
    result_specs = [(index, torch.Size(function.buffers[index].shape),
                     torch_dtype(function.buffers[index].dtype)) for index in results]
    results_are_fresh = all(index >= count for index in results)
    stream_of = bound.stream_of
    single = len(results) == 1
    # A library launch has no Triton call: its library call takes tensors.
    hooked_launches = [(b.library, None, None, None, b.operands, None) if b.library else
                       (None, b.hooked.function, b.grid, b.hooked.fixed, b.operands, b.scalars)
                       for b in bound.launches]
    bare_launches = [(b.library, None, None, None, b.operands, None) if b.library else
                     (None, b.bare.function, b.grid, b.bare.fixed, b.operands, b.scalars)
                     for b in bound.launches]
    libraries = any(b.library is not None for b in bound.launches)
    # The intermediates a library call reads or writes, which it takes as
    # tensors (views of the workspace); Triton's launches take pointers.
    library_operands = {i for b in bound.launches if b.library is not None for i in b.operands}
    # Each is one `as_strided` of the workspace seen as its element type (a
    # slice and two views cost three calls of torch's, microseconds each,
    # and a prefill calls the library a few times a layer).
    library_views = []  # (buffer, dtype, shape, strides, first element)
    for index, offset in offsets:
        if index in library_operands:
            shape = torch.Size(function.buffers[index].shape)
            dtype = torch_dtype(function.buffers[index].dtype)
            library_views.append((index, dtype, shape, BufferView.contiguous(shape).strides,
                                  offset // dtype.itemsize))
    view_dtypes = tuple(dict.fromkeys(dtype for _, dtype, *_ in library_views))
    # Whole words, so that the workspace can be seen as any element type
    # (the memory plan places every buffer at a multiple of its alignment).
    workspace_bytes = -(-workspace_bytes // _WORD) * _WORD
    # Every launch was bound with the same two hook chains (Triton's knobs).
    hooks, any_hooked = bound.hooks, internals.any_hooked
    nullcontext = contextlib.nullcontext

    def usable(tensor, shape, dtype) -> bool:
        return (type(tensor) in plain and tensor.dtype is dtype
                and tensor.shape == shape and tensor.get_device() == device
                and tensor.is_contiguous() and not tensor.data_ptr() % ALIGNMENT)

    def fast(tensors, out, take=False):
        if len(tensors) != count or current() != device:
            return None
        for tensor, (shape, dtype) in zip(tensors, specs):
            if not usable(tensor, shape, dtype):
                return None
        buffers = list(tensors)
        buffers.extend([None] * (size - count))
        if out is not None:
            outs = (out,) if type(out) is tensor_type else tuple(out)
            if not results_are_fresh or len(outs) != len(results):
                return None
            for tensor, (index, shape, dtype) in zip(outs, result_specs):
                if not usable(tensor, shape, dtype) or \
                        any(overlap(tensor, argument) for argument in tensors):
                    return None
                buffers[index] = tensor
        for index, shape, strides, dtype in fresh_results:
            if buffers[index] is None:
                buffers[index] = allocate(shape, strides, dtype)
        pointers = [0 if buffer is None else buffer.data_ptr() for buffer in buffers]
        if offsets:
            workspace = allocate((int(workspace_bytes),), (1,), uint8)
            base = workspace.data_ptr()
            for index, offset in offsets:
                pointers[index] = base + offset
            if library_views:
                typed = {dtype: workspace.view(dtype) for dtype in view_dtypes}
                for index, dtype, shape, strides, first in library_views:
                    buffers[index] = typed[dtype].as_strided(shape, strides, first)
        if take:
            # The loops' names hold a tensor each too.
            tensors.clear()
            tensor = None  # noqa: F841
        stream = stream_of(device)
        # Hooks added after the first call (a profiler's) still run.
        launches = hooked_launches if any_hooked(hooks) else bare_launches
        with exact_products() if libraries else nullcontext():
            if streamed:
                for (library, call, grid, fixed, operands, scalars), made, freed in \
                        zip(launches, made_at, released_at if take else freed_at):
                    for index, shape, strides, dtype in made:
                        if buffers[index] is None:  # else a result given by `out`
                            buffer = buffers[index] = allocate(shape, strides, dtype)
                            pointers[index] = buffer.data_ptr()
                    if library is not None:
                        library(*[buffers[i] for i in operands])
                    else:
                        call(*grid, stream, *fixed, *[pointers[i] for i in operands], *scalars)
                    for index in freed:
                        buffers[index] = None
            else:
                for library, call, grid, fixed, operands, scalars in launches:
                    if library is not None:
                        library(*[buffers[i] for i in operands])
                        continue
                    call(*grid, stream, *fixed, *[pointers[i] for i in operands], *scalars)
        if out is not None:
            return outs[0] if len(outs) == 1 else outs
        return buffers[results[0]] if single else tuple(buffers[i] for i in results)

    return fast


# The widest element a workspace is seen as, in bytes.
_WORD = 16


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
