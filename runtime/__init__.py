"""Running a compiled kernel graph on torch tensors (needs a CUDA GPU).

    graph = kgc.compile(source)            # or kgc.runtime.load("kgc-out")
    y = graph(x, w)                        # torch tensors on the GPU
    graph(x, w, out=y)                     # into a buffer of the caller's

A graph runs from the kernels' artifacts alone (`kgc.pipeline.artifact`):
`load(directory)` reads what `kgc compile -o directory` wrote and runs it in
a process that never compiles. Each kernel's cubin is loaded, and its
launcher (Triton's, built for the kernel's signature) bound, once per
device, on the first call there.

Arguments are checked before anything runs, each error naming the argument
(`#1 (gamma)`) with what was expected and what came: their number, that
each is a torch.Tensor, its dtype, its shape, that it is on a CUDA device,
the same one as the others. The kernels read every tensor as dense and
row-major from a data pointer aligned to 16 bytes, as their TTIR promises
Triton (`tt.divisibility = 16`), so an argument that is not contiguous, or
whose data pointer is not 16-byte aligned (a view at an offset), is copied
into a fresh tensor first: results are right for every argument, and fast
for dense aligned ones. `out=` buffers are never copied: one that is not
contiguous and aligned, or that overlaps an argument, is refused.

Results are fresh tensors (or the `out=` buffers). The intermediates, the
buffers that kernels pass to one another and the caller never sees, live
in one workspace allocated per call, each at the offset the function's
memory plan gives it (`kgc.pipeline.memory_plan`, made when the graph was
compiled and kept in manifest.json), so that a call of many kernels costs one allocation
for them instead of one each: torch's allocator is the larger part of a
small graph's host time. The kernels run in order on the current stream of
the arguments' device, on which the workspace is freed when the call
returns, as any torch temporary is.

A kernel that asks for global scratch memory (Triton's `global_scratch_size`
metadata: the TMA descriptors that matmuls with the `tma` knob build on the
device, 128 bytes each per program) gets a fresh torch allocation of that
many bytes per program with every launch, passed as the launcher's scratch
argument, so that no process-wide allocator (`triton.set_allocator`) is
needed and calls on several streams never share one.
"""

from __future__ import annotations

import pathlib

from kgc.diagnostics import KgcError
from kgc.element_types import poison as poison_value
from kgc.element_types import torch_dtype

_ALIGNMENT = 16
_NO_DEVICE = -2  # no tensor seen yet (get_device() is -1 for a CPU tensor)


def load(directory: str | pathlib.Path, function: str | None = None) -> "CompiledGraph":
    """The graph `kgc compile -o directory` (or `CompiledModule.write`)
    wrote, ready to run, from manifest.json and the kernels' artifacts.
    Compiles nothing. `function` names the function to run when the module
    holds several."""
    from kgc.pipeline.compiler import load_module

    return CompiledGraph(load_module(directory), function)


class CompiledGraph:
    """One function of a compiled module, callable on torch tensors.

    `config` is the choice it was compiled with (a `kgc.search.GraphConfig`,
    None for kgc's defaults) and `report` what a search measured to make it
    (`kgc.search.SearchReport`, None when not searched)."""

    config = None
    report = None

    def __init__(self, module, function: str | None = None):
        if not module.functions:
            raise KgcError("the module holds no function to run")
        if function is None:
            if len(module.functions) != 1:
                raise KgcError(f"the module holds {len(module.functions)} functions "
                               f"({', '.join(module.functions)}); name the one to run")
            function = next(iter(module.functions))
        if function not in module.functions:
            raise KgcError(f"no function @{function} (have: {', '.join(module.functions)})")
        if module.emitted != "cubin":
            raise KgcError("only a module compiled down to cubin can run")
        self.module = module
        self.function = module.functions[function]
        for launch in self.function.launches:
            if module.kernels[launch.kernel].artifact is None:
                raise KgcError(f"kernel @{launch.kernel} has no compiled artifact to run")
        self._specs = None  # per argument (shape, torch dtype), made on the first call
        self._fast = None  # the call once kernels are bound (see _fast_path)
        self._bound: dict[int, list] = {}  # device index -> bound launches

    @property
    def name(self) -> str:
        return self.function.name

    def argument_label(self, index: int) -> str:
        """`#1 (gamma)`, or `#1` where the source does not name arguments."""
        names = self.function.argument_names
        return f"#{index} ({names[index]})" if names else f"#{index}"

    def __call__(self, *tensors, out=None):
        if self._fast is not None:
            results = self._fast(tensors, out)
            if results is not None:
                return results
        return self.run(*tensors, out=out)

    def run(self, *tensors, out=None, poison: bool = False):
        """Runs the graph on `tensors` and returns its result (a tuple when
        it has several). `out` gives the result buffers (a tensor, or a
        sequence of one per result) that the kernels write into. With
        `poison`, results and intermediates start as NaN (or the 8-bit
        type's NaN; the most negative value for integers, True for
        booleans), so that an element no kernel writes shows up."""
        import torch

        function = self.function
        specs = self._specs if self._specs is not None else self._make_specs()
        if len(tensors) != function.num_arguments:
            names = function.argument_names
            raise KgcError(f"@{function.name} takes {function.num_arguments} tensors"
                           f"{' (' + ', '.join(names) + ')' if names else ''}, got {len(tensors)}")
        buffers = [None] * len(function.buffers)
        # Every argument's type, dtype and shape is checked before where
        # they are, so that a CPU tensor of a wrong shape is named as such.
        device = _NO_DEVICE
        misplaced = None
        for index, tensor in enumerate(tensors):
            shape, dtype = specs[index]
            if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype \
                    or tensor.shape != shape:
                raise self._mismatch(f"argument {self.argument_label(index)}", tensor,
                                     function.buffers[index])
            where = tensor.get_device()
            if where != device:
                if device == _NO_DEVICE and where >= 0:
                    device = where
                elif misplaced is None:
                    misplaced = index
            if not tensor.is_contiguous() or tensor.data_ptr() % _ALIGNMENT:
                tensor = tensor.clone(memory_format=torch.contiguous_format)
            buffers[index] = tensor
        if misplaced is not None:
            raise self._misplaced(f"argument {self.argument_label(misplaced)}",
                                  tensors[misplaced], device)
        if device == _NO_DEVICE:  # a function without arguments
            device = torch.cuda.current_device()
        outs = None if out is None else self._take_out(out, tensors, buffers, device)
        if device != torch.cuda.current_device():
            with torch.cuda.device(device):
                self._launch(buffers, device, poison)
        else:
            self._launch(buffers, device, poison)
        if outs is not None:
            for target, index in zip(outs, function.results):
                if buffers[index] is not target:
                    target.copy_(buffers[index])
            return outs[0] if len(outs) == 1 else tuple(outs)
        results = tuple(buffers[i] for i in function.results)
        return results[0] if len(results) == 1 else results

    # -- the code ---------------------------------------------------------------

    def kernels(self) -> list:
        """The kernels the function launches, in launch order, each once."""
        seen = dict.fromkeys(launch.kernel for launch in self.function.launches)
        return [self.module.kernels[name] for name in seen]

    def stages(self) -> dict[str, dict[str, str | bytes]]:
        """Every stage of every kernel: {kernel name: {stage: code}}."""
        return {kernel.name: dict(kernel.asm) for kernel in self.kernels()}

    def ttir(self) -> str:
        """The Triton IR of the function's kernels, one module each."""
        return "\n".join(kernel.asm["ttir"] for kernel in self.kernels())

    def ptx(self) -> str:
        """The PTX of the function's kernels."""
        return "\n".join(kernel.asm["ptx"] for kernel in self.kernels())

    def export_c(self, directory, name: str | None = None):
        """Writes this function as C over the CUDA driver API, its kernels'
        cubins embedded (`kgc.export.export_c`): `<name>.h` and `<name>.c`."""
        from kgc.export import export_c

        return export_c(self, directory, name)

    def cuda_graph(self, *tensors):
        """A `CapturedGraph`: this function on `tensors`, captured once as a
        CUDA graph. Calling it with new tensors of the same signature copies
        them into the captured inputs and replays: one launch of the whole
        graph, its results in buffers owned by the capture."""
        return CapturedGraph(self, tensors)

    # -- launching ------------------------------------------------------------

    def _launch(self, buffers: list, device: int, poison: bool) -> None:
        import torch

        bound = self._bound.get(device)
        if bound is None:
            bound = self._bind(device)
        workspace = torch.empty(self._workspace_bytes, dtype=torch.uint8, device=device) \
            if self._offsets else None
        for index, shape, dtype in self._fresh:
            if buffers[index] is None:
                offset = self._offsets.get(index)
                if offset is None:
                    buffers[index] = torch.empty(shape, dtype=dtype, device=device)
                else:
                    size = shape.numel() * dtype.itemsize
                    buffers[index] = workspace[offset:offset + size].view(dtype).view(shape)
            if poison:
                buffers[index].fill_(poison_value(dtype))
        stream = self._current_stream(device)
        for (launcher, grid_x, grid_y, grid_z, handle, packed, enter, exit_, operands,
             scalars) in bound:
            if launcher.global_scratch_size and not launcher.profile_scratch_size:
                _scratch_launch(launcher, handle, device)(
                    grid_x, grid_y, grid_z, stream, packed, None, enter, exit_,
                    *[buffers[i].data_ptr() for i in operands], *scalars)
                continue
            launcher(grid_x, grid_y, grid_z, stream, handle, packed, None, enter, exit_,
                     *[buffers[i].data_ptr() for i in operands], *scalars)

    def _bind(self, device: int) -> list:
        """Loads every kernel of the function on `device` and binds its
        launcher: the work of the first call there, done once."""
        import torch
        from triton import knobs
        from triton.runtime.driver import driver

        active = driver.active
        self._current_stream = active.get_current_stream
        loaded = {}
        bound = []
        with torch.cuda.device(device):
            limits = active.utils.get_device_properties(device)
            for launch in self.function.launches:
                artifact = self.module.kernels[launch.kernel].artifact
                key = (artifact.hash, artifact.entry)
                if key not in loaded:
                    loaded[key] = _load(artifact, device, limits, active)
                launcher, handle, packed = loaded[key]
                bound.append((launcher, *artifact.options.grid, handle, packed,
                              knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook,
                              tuple(launch.inputs + launch.outputs), tuple(launch.scalars)))
        self._bound[device] = bound
        if len(self._bound) == 1:
            self._fast = self._fast_path(device, bound)
        return bound

    def _fast_path(self, device: int, bound: list):
        """The call as it is after the first: arguments that are already
        what the kernels read (dense, aligned, on `device`, the current
        device) launch with nothing but those checks, a fresh tensor per
        result and the kernels' launch functions, called directly where a
        kernel needs no scratch memory (Triton's launcher object would only
        find that out again on every call). Anything else returns None, and
        the call takes `run`, which copies or explains."""
        import torch

        specs = self._specs if self._specs is not None else self._make_specs()
        results = tuple(self.function.results)
        count, size = len(specs), len(self.function.buffers)
        fresh_results = [(index, shape, dtype) for index, shape, dtype in self._fresh
                         if index not in self._offsets]
        workspace_bytes, offsets = self._workspace_bytes, tuple(self._offsets.items())
        uint8 = torch.uint8
        # Parameters are tensors whose type only tells autograd to track them:
        # the torch backend passes a module's weights as they are.
        plain = (torch.Tensor, torch.nn.Parameter)
        # The current device's index without torch.cuda.current_device()'s
        # checks, which cost as much as the rest of the call's.
        tensor_type, empty, current = torch.Tensor, torch.empty, torch._C._cuda_getDevice
        result_specs = [(index, torch.Size(self.function.buffers[index].shape),
                         torch_dtype(self.function.buffers[index].dtype)) for index in results]
        results_are_fresh = all(index >= count for index in results)
        stream_of = self._current_stream
        single = len(results) == 1

        def launch_list(hooked: bool) -> list:
            """Each kernel's launch function and its fixed arguments; without
            `hooked`, the launch hooks are left out (None): an empty chain
            of them is still a Python call before and after every launch."""
            launches = []
            for launcher, grid_x, grid_y, grid_z, handle, packed, enter, exit_, operands, \
                    scalars in bound:
                if not hooked:
                    enter = exit_ = None
                if launcher.global_scratch_size and not launcher.profile_scratch_size:
                    launches.append((_scratch_launch(launcher, handle, device),
                                     (grid_x, grid_y, grid_z), (packed, None, enter, exit_),
                                     operands, scalars))
                elif launcher.profile_scratch_size:
                    launches.append((launcher, (grid_x, grid_y, grid_z),
                                     (handle, packed, None, enter, exit_), operands, scalars))
                else:
                    launches.append((launcher.launch, (grid_x, grid_y, grid_z),
                                     (handle, launcher.launch_cooperative_grid,
                                      launcher.launch_pdl, None, None, packed, None, enter,
                                      exit_), operands, scalars))
            return launches

        hooked_launches, bare_launches = launch_list(True), launch_list(False)
        # Every launch was bound with the same two hook chains (Triton's knobs).
        hooks = bound[0][6:8] if bound else ()

        def usable(tensor, shape, dtype) -> bool:
            return (type(tensor) in plain and tensor.dtype is dtype
                    and tensor.shape == shape and tensor.get_device() == device
                    and tensor.is_contiguous() and not tensor.data_ptr() % _ALIGNMENT)

        def fast(tensors, out):
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
                            any(_overlap(tensor, argument) for argument in tensors):
                        return None
                    buffers[index] = tensor
            for index, shape, dtype in fresh_results:
                if buffers[index] is None:
                    buffers[index] = empty(shape, dtype=dtype, device=device)
            pointers = [0 if buffer is None else buffer.data_ptr() for buffer in buffers]
            if offsets:
                workspace = empty(workspace_bytes, dtype=uint8, device=device)
                base = workspace.data_ptr()
                for index, offset in offsets:
                    pointers[index] = base + offset
            stream = stream_of(device)
            # Hooks added after the first call (a profiler's) still run.
            launches = hooked_launches if any(map(_hooked, hooks)) else bare_launches
            for launch, grid, fixed, operands, scalars in launches:
                launch(*grid, stream, *fixed, *[pointers[i] for i in operands], *scalars)
            if out is not None:
                return outs[0] if len(outs) == 1 else outs
            return buffers[results[0]] if single else tuple(buffers[i] for i in results)

        return fast

    # -- checks -----------------------------------------------------------------

    def _make_specs(self) -> list:
        import torch

        function = self.function
        self._specs = [(torch.Size(b.shape), torch_dtype(b.dtype))
                       for b in function.buffers[:function.num_arguments]]
        self._fresh = [(i, torch.Size(b.shape), torch_dtype(b.dtype))
                       for i, b in enumerate(function.buffers) if i >= function.num_arguments]
        self._offsets = function.memory.offsets()
        self._workspace_bytes = function.memory.workspace_bytes
        return self._specs

    def _mismatch(self, what: str, tensor, spec) -> KgcError:
        import torch

        expected = f"{tuple(spec.shape)} {spec.dtype}"
        if not isinstance(tensor, torch.Tensor):
            return KgcError(f"@{self.name}: {what} must be a torch.Tensor of {expected}, got "
                            f"{type(tensor).__name__}")
        wanted = torch_dtype(spec.dtype)
        if tensor.dtype != wanted:
            return KgcError(f"@{self.name}: {what} must have dtype {wanted} ({spec.dtype}), got "
                            f"{tensor.dtype}")
        return KgcError(f"@{self.name}: {what} must have shape {tuple(spec.shape)}, got "
                        f"{tuple(tensor.shape)}")

    def _misplaced(self, what: str, tensor, device: int) -> KgcError:
        """The error for `tensor`, which is not on a CUDA device or not on
        `device`, where the arguments before it are."""
        if tensor.device.type != "cuda" or tensor.get_device() < 0:
            return KgcError(f"@{self.name}: {what} is on {tensor.device}; it must be on a CUDA "
                            "device (kgc kernels run on the GPU)")
        return KgcError(f"@{self.name}: {what} is on {tensor.device}, the arguments before it on "
                        f"cuda:{device}; all must be on one device")

    def _take_out(self, out, tensors: tuple, buffers: list, device: int) -> list:
        """Checks the caller's result buffers and puts them where the kernels
        write the results."""
        import torch

        function = self.function
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        if len(outs) != len(function.results):
            raise KgcError(f"@{self.name} has {len(function.results)} result(s); out= gives "
                           f"{len(outs)}")
        for position, (tensor, index) in enumerate(zip(outs, function.results)):
            what = f"out #{position}"
            spec = function.buffers[index]
            shape, dtype = (torch.Size(spec.shape), torch_dtype(spec.dtype))
            if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype \
                    or tensor.shape != shape:
                raise self._mismatch(what, tensor, spec)
            if tensor.get_device() != device:
                raise self._misplaced(what, tensor, device)
            if not tensor.is_contiguous() or tensor.data_ptr() % _ALIGNMENT:
                raise KgcError(f"@{self.name}: {what} must be contiguous with a data pointer "
                               f"aligned to {_ALIGNMENT} bytes (kernels write it in place; it "
                               "is not copied)")
            for argument_index, argument in enumerate(tensors):
                if _overlap(tensor, argument):
                    raise KgcError(f"@{self.name}: {what} overlaps argument "
                                   f"{self.argument_label(argument_index)}; kgc kernels do not "
                                   "compute in place")
            if index >= function.num_arguments and buffers[index] is None:
                buffers[index] = tensor
        return outs


class CapturedGraph:
    """A compiled graph captured as a CUDA graph on example inputs (see
    `CompiledGraph.cuda_graph`)."""

    def __init__(self, graph: CompiledGraph, tensors: tuple):
        import torch

        results = graph.run(*tensors)  # checks the arguments and loads the kernels
        self.graph = graph
        self.inputs = [t.clone(memory_format=torch.contiguous_format) for t in tensors]
        single = not isinstance(results, tuple)
        self.outputs = [torch.empty_like(r) for r in ((results,) if single else results)]
        self._single = single
        stream = torch.cuda.Stream(self.inputs[0].device if self.inputs else None)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            graph.run(*self.inputs, out=self.outputs)  # warm-up off the default stream
        torch.cuda.current_stream().wait_stream(stream)
        self.cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.cuda_graph):
            graph.run(*self.inputs, out=self.outputs)

    def replay(self):
        """Runs the captured graph on the captured inputs."""
        self.cuda_graph.replay()
        return self.outputs[0] if self._single else tuple(self.outputs)

    def __call__(self, *tensors):
        if len(tensors) != len(self.inputs):
            raise KgcError(f"@{self.graph.name} was captured with {len(self.inputs)} tensors, "
                           f"got {len(tensors)}")
        for index, (captured, tensor) in enumerate(zip(self.inputs, tensors, strict=True)):
            if tensor is not captured:
                if getattr(tensor, "shape", None) != captured.shape or \
                        getattr(tensor, "dtype", None) != captured.dtype:
                    raise self.graph._mismatch(f"argument {self.graph.argument_label(index)}",
                                               tensor, self.graph.function.buffers[index])
                captured.copy_(tensor)
        return self.replay()


def _hooked(hook) -> bool:
    """Whether a launch hook does anything: Triton's hooks are chains of
    calls (`triton.knobs.HookChain`), empty unless a tool adds one."""
    return hook is not None and getattr(hook, "calls", True) != []


def _load(artifact, device: int, limits: dict, active):
    """(launcher, function handle, packed metadata) of `artifact` on the
    current device, which is `device`."""
    import collections

    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    reason = artifact.exceeds(limits)
    if reason is not None:
        raise KgcError(f"kernel @{artifact.name} cannot run on cuda:{device}: it {reason}")
    metadata = dict(artifact.metadata)
    metadata["target"] = GPUTarget(**metadata["target"])
    metadata = collections.namedtuple("KernelMetadata", sorted(metadata))(**metadata)
    source = _LaunchSignature({i: kind for i, kind in enumerate(artifact.signature)})
    launcher = active.launcher_cls(source, metadata)
    _, handle, _, _, max_threads = active.utils.load_binary(
        artifact.entry, artifact.cubin, artifact.shared, device)
    if metadata.num_warps * 32 > max_threads:
        raise KgcError(f"kernel @{artifact.name} cannot run on cuda:{device}: it needs "
                       f"{metadata.num_warps * 32} threads per program, the loaded kernel allows "
                       f"{max_threads}")
    return launcher, handle, make_backend(metadata.target).pack_metadata(metadata)


# The alignment of torch's CUDA allocations (its caching allocator rounds
# every block to 512 bytes), which a kernel's scratch alignment must divide.
_TORCH_ALIGNMENT = 512


def _scratch_launch(launcher, handle, device: int):
    """Triton's launch function for a kernel that needs global scratch
    memory, called as `(grid_x, grid_y, grid_z, stream, packed metadata,
    launch metadata, enter hook, exit hook, *arguments)`: each call takes
    the kernel's scratch (its size per program times the programs) from
    torch on `device`, on the current stream, and passes it."""
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


def _overlap(a, b) -> bool:
    """Whether the memory spans of two tensors (from the first element to
    the last, strides included) intersect."""
    if a.get_device() != b.get_device():
        return False

    def span(t):
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()

    (a_start, a_end), (b_start, b_end) = span(a), span(b)
    return a_start < b_end and b_start < a_end


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
