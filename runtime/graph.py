"""A compiled function as a Python callable on torch tensors.

`CompiledGraph` runs one function of a compiled module: it checks a call's
tensors (`kgc.runtime.checks`), copies the arguments the kernels cannot
read where they are, and launches the kernels (`kgc.runtime.launching`),
bound once per device on the first call there. After the first call, a
call whose tensors need nothing of that takes the fast path
(`launching.fast_call`). `CapturedGraph` is a function captured once as a
CUDA graph and replayed. `load` makes a CompiledGraph from what `kgc
compile -o directory` wrote.

A function with a dynamic extent (`?`) runs at any size of it: each call
reads the size from its first argument that has the extent, and runs the
function made `at` that size (`Function.at`: buffers and workspace at the
size, the kernels over the extent launched on a grid for it with the size
as their last argument). Its kernels are the same compiled code at every
size and are loaded on a device once; the launches bound for the last
`BOUND_SIZES` sizes are kept, so that a serving loop pays the binding only
for a size it has not met lately.
"""

from __future__ import annotations

import collections
import pathlib

from kgc.diagnostics import KgcError
from kgc.element_types import torch_dtype
from kgc.runtime import checks, launching
from kgc.runtime.checks import NO_DEVICE
from kgc.tiling.dynamic import extent_sizes

# Sizes of a dynamic extent whose bound launches a graph keeps.
BOUND_SIZES = 64
# Grids and size arguments are 32-bit.
_MAX_EXTENT = 2**31 - 1


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
        self._setup(module, self._function_named(module, function), {})

    @staticmethod
    def _function_named(module, function: str | None):
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
        return module.functions[function]

    def _setup(self, module, function, loaded: dict) -> None:
        self.module = module
        self.function = function
        for launch in self.function.launches:
            kernel = module.kernels[launch.kernel]
            if kernel.artifact is None and kernel.library is None:
                raise KgcError(f"kernel @{launch.kernel} has no compiled artifact to run")
        self._specs = None  # per argument (shape, torch dtype), made on the first call
        self._layout = None  # the launching.BufferLayout, made with the specs
        self._fast = None  # the call once kernels are bound (launching.fast_call)
        self._streamed = False  # buffers made and freed launch by launch (streamed)
        self._bound: dict[int, launching.BoundFunction] = {}  # by device index
        # Kernels loaded on each device (device -> artifact key -> kernel),
        # shared by the function at every size of its dynamic extent.
        self._loaded = loaded
        # Where a call gives the dynamic extent (argument, dimension); None
        # for a static function. The function at each size met lately.
        self._extent_source = function.extent_source()
        self._sizes: collections.OrderedDict[int, CompiledGraph] = collections.OrderedDict()

    @property
    def name(self) -> str:
        return self.function.name

    def argument_label(self, index: int) -> str:
        """`#1 (gamma)`, or `#1` where the source does not name arguments."""
        return checks.argument_label(self.function, index)

    @property
    def streams_buffers(self) -> bool:
        """Whether a call makes and frees its buffers launch by launch
        (`streamed`) rather than making one workspace first."""
        return self._streamed

    @property
    def is_dynamic(self) -> bool:
        """Whether the function has a dynamic extent, a size each call gives."""
        return self._extent_source is not None

    def at(self, extent: int) -> "CompiledGraph":
        """The function at one size of its dynamic extent (what a call with
        that size runs): its buffers, workspace and launches at the size."""
        if not self.is_dynamic:
            raise KgcError(f"@{self.name} has no dynamic extent")
        if isinstance(extent, bool) or not isinstance(extent, int) or \
                not 1 <= extent <= _MAX_EXTENT:
            raise KgcError(f"@{self.name}: the dynamic extent's size must be an integer from 1 "
                           f"to {_MAX_EXTENT}, got {extent!r}")
        sized = self._sizes.get(extent)
        if sized is None:
            sized = object.__new__(CompiledGraph)
            sized._setup(self.module, self.function.at(extent), self._loaded)
            sized.config, sized.report = self.config, self.report
            sized._streamed = self._streamed
            self._sizes[extent] = sized
            if len(self._sizes) > BOUND_SIZES:
                self._sizes.popitem(last=False)
        else:
            self._sizes.move_to_end(extent)
        return sized

    def _given_extent(self, tensors) -> int | None:
        """The size the first argument with the dynamic extent gives, None
        where it is no tensor of that argument's rank."""
        index, dim = self._extent_source
        if index >= len(tensors):
            return None
        shape = getattr(tensors[index], "shape", None)
        if shape is None or len(shape) != len(self.function.buffers[index].shape):
            return None
        return int(shape[dim])

    def _call_extent(self, tensors) -> int:
        """The size a call's `tensors` give the dynamic extent; KgcError
        naming the arguments where they give none or several."""
        sizes = extent_sizes([spec.shape for spec in self.function.buffers], tensors)
        if len(sizes) > 1:
            (first, one), (second, other) = list(sizes.items())[:2]
            raise KgcError(f"@{self.name}: argument {self.argument_label(one)} gives the dynamic "
                           f"extent (`?`) the size {first}, argument "
                           f"{self.argument_label(other)} gives it {second}; every `?` of a "
                           "function is one size")
        if not sizes:
            index, _ = self._extent_source
            raise checks.mismatch(self.name, f"argument {self.argument_label(index)}",
                                  tensors[index], self.function.buffers[index])
        return next(iter(sizes))

    def __call__(self, *tensors, out=None):
        fast = self._fast_for(tensors)
        if fast is not None:
            results = fast(tensors, out)
            if results is not None:
                return results
        # The checking path, which names a size the arguments disagree on.
        return self.run(*tensors, out=out)

    def take(self, tensors: list):
        """Calls the graph on the tensors of the list `tensors`, which it
        empties: the caller hands over its references. A `streamed` call
        then drops each argument after the last launch that reads it, so
        that an argument nobody else holds (a backward's saved activation)
        is freed while the graph runs. Arguments the fast path cannot take
        as they are go the checking path, held to the end."""
        fast = self._fast_for(tensors)
        if fast is not None:
            results = fast(tensors, None, True)
            if results is not None:
                return results
        arguments = tuple(tensors)
        tensors.clear()
        return self.run(*arguments)

    def _fast_for(self, tensors):
        """The fast call (`launching.fast_call`) of the graph at the size
        `tensors` give its dynamic extent (its own where it has none); None
        before its first call there, or where they give no size in range."""
        if self._extent_source is None:
            return self._fast
        extent = self._given_extent(tensors)
        if extent is None or not 1 <= extent <= _MAX_EXTENT:
            return None
        return self.at(extent)._fast

    def run(self, *tensors, out=None, poison: bool = False):
        """Runs the graph on `tensors` and returns its result (a tuple when
        it has several). `out` gives the result buffers (a tensor, or a
        sequence of one per result) that the kernels write into. With
        `poison`, results and intermediates start as NaN (or the 8-bit
        type's NaN; the most negative value for integers, True for
        booleans), so that an element no kernel writes shows up."""
        import torch

        function = self.function
        if len(tensors) != function.num_arguments:
            names = function.argument_names
            raise KgcError(f"@{function.name} takes {function.num_arguments} tensors"
                           f"{' (' + ', '.join(names) + ')' if names else ''}, got {len(tensors)}")
        if self.is_dynamic:
            return self.at(self._call_extent(tensors)).run(*tensors, out=out, poison=poison)
        specs = self._argument_specs()
        buffers = [None] * len(function.buffers)
        # Every argument's type, dtype and shape is checked before where
        # they are, so that a CPU tensor of a wrong shape is named as such.
        device = NO_DEVICE
        misplaced = None
        for index, tensor in enumerate(tensors):
            shape, dtype = specs[index]
            if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype \
                    or tensor.shape != shape:
                raise checks.mismatch(self.name, f"argument {self.argument_label(index)}",
                                      tensor, function.buffers[index])
            where = tensor.get_device()
            if where != device:
                if device == NO_DEVICE and where >= 0:
                    device = where
                elif misplaced is None:
                    misplaced = index
            if checks.needs_copy(tensor):
                tensor = tensor.clone(memory_format=torch.contiguous_format)
            buffers[index] = tensor
        if misplaced is not None:
            raise checks.misplaced(self.name, f"argument {self.argument_label(misplaced)}",
                                   tensors[misplaced], device)
        if device == NO_DEVICE:  # a function without arguments
            device = torch.cuda.current_device()
        outs = None if out is None else checks.take_out(function, out, tensors, buffers, device)
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
        """The Triton IR of the function's kernels, one module each (a
        library kernel, which has none, as a comment naming its call)."""
        return "\n".join(kernel.asm["ttir"] if kernel.library is None else
                         f"// @{kernel.name}: {kernel.library.describe()}"
                         for kernel in self.kernels())

    def ptx(self) -> str:
        """The PTX of the function's kernels (a library kernel, which has
        none, as a comment naming its call)."""
        return "\n".join(kernel.asm["ptx"] if kernel.library is None else
                         f"// @{kernel.name}: {kernel.library.describe()}"
                         for kernel in self.kernels())

    def export_c(self, directory, name: str | None = None):
        """Writes this function as C over the CUDA driver API, its kernels'
        cubins embedded (`kgc.export.export_c`): `<name>.h` and `<name>.c`."""
        from kgc.export import export_c

        return export_c(self, directory, name)

    def cuda_graph(self, *tensors):
        """A `CapturedGraph`: this function on `tensors`, captured once as a
        CUDA graph. Calling it with new tensors of the same signature copies
        them into the captured inputs and replays: one launch of the whole
        graph, its results in buffers owned by the capture. A dynamic
        function is captured at the size `tensors` give."""
        if self.is_dynamic:
            return self.at(self._call_extent(tensors)).cuda_graph(*tensors)
        return CapturedGraph(self, tensors)

    # -- launching ------------------------------------------------------------

    def buffer_layout(self) -> launching.BufferLayout:
        """Where a call finds the buffers that are not arguments (the
        workspace's offsets are the function's memory plan's)."""
        if self.is_dynamic:
            raise KgcError(f"@{self.name} has a dynamic extent: its buffers are laid out per "
                           "size (`at(size).buffer_layout()`)")
        self._argument_specs()
        return self._layout

    def _launch(self, buffers: list, device: int, poison: bool) -> None:
        bound = self._bound.get(device)
        if bound is None:
            bound = self._bind(device)
        launching.launch(bound, self._layout, buffers, poison)

    def _bind(self, device: int) -> launching.BoundFunction:
        """Loads every kernel of the function on `device` and binds its
        launches: the work of the first call there, done once."""
        bound = launching.bind(self.module, self.function, device,
                               self._loaded.setdefault(device, {}))
        self._bound[device] = bound
        if len(self._bound) == 1:
            self._fast = launching.fast_call(self.function, self._argument_specs(),
                                             self._layout, bound, self._streamed)
        return bound

    def streamed(self) -> "CompiledGraph":
        """This graph as a call that gives each result and intermediate an
        allocation of its own, made before the first launch that writes it,
        and frees each intermediate after the last launch that reads it
        (`launching.fast_call`'s `streamed`), where this graph's call makes
        every result and one workspace first. Such a call holds at most what
        is live at one launch, at the cost of an allocation per buffer: what
        a training step wants, whose peak memory bounds its batch. A twin,
        not a change to this graph, since a compiled graph is shared (the
        backend keeps one per graph text); it shares the kernels loaded."""
        twin = object.__new__(CompiledGraph)
        twin._setup(self.module, self.function, self._loaded)
        twin.config, twin.report = self.config, self.report
        twin._streamed = True
        return twin

    def _argument_specs(self) -> list:
        if self._specs is None:
            import torch

            function = self.function
            self._layout = launching.BufferLayout.of(function)
            self._specs = [(torch.Size(b.shape), torch_dtype(b.dtype))
                           for b in function.buffers[:function.num_arguments]]
        return self._specs


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
                    raise checks.mismatch(self.graph.name,
                                          f"argument {self.graph.argument_label(index)}",
                                          tensor, self.graph.function.buffers[index])
                captured.copy_(tensor)
        return self.replay()
