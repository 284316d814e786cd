"""Running a compiled kernel graph on torch tensors (needs a CUDA GPU).

    graph = kgc.compile(source)            # or kgc.runtime.CompiledGraph(...)
    y = graph(x, w)                        # torch tensors on the GPU

Inputs are checked against the graph's signature (shape, dtype, device);
every kernel gets contiguous buffers aligned to 16 bytes, as its TTIR
promises Triton (`tt.divisibility = 16`). Results and intermediates are
fresh tensors; the kernels run in order on the current stream.
"""

from __future__ import annotations


from kgc.diagnostics import KgcError

_TORCH_DTYPES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
}
_ALIGNMENT = 16


def torch_dtype(name: str):
    import torch

    return getattr(torch, _TORCH_DTYPES[name])


class CompiledGraph:
    """One function of a compiled module, callable on torch tensors."""

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
        self._launchers = None

    @property
    def name(self) -> str:
        return self.function.name

    def _prepare(self):
        """Loads every kernel on the current device once."""
        from triton import knobs

        launchers = []
        for launch in self.function.launches:
            kernel = self.module.kernels[launch.kernel]
            compiled = kernel.triton_kernel
            compiled._init_handles()
            launchers.append((launch, kernel.grid, compiled))
        self._hooks = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
        self._launchers = launchers

    def __call__(self, *tensors):
        return self.run(*tensors)

    def run(self, *tensors, poison: bool = False):
        """Runs the graph. With `poison`, results and intermediates start as
        NaN (or the 8-bit type's NaN), so that an element no kernel writes
        shows up in the result."""
        import torch

        function = self.function
        if len(tensors) != function.num_arguments:
            raise KgcError(f"@{function.name} takes {function.num_arguments} tensors, got "
                           f"{len(tensors)}")
        buffers: list = [None] * len(function.buffers)
        device = None
        for index, (tensor, spec) in enumerate(zip(tensors, function.buffers)):
            buffers[index] = self._checked(index, tensor, spec)
            device = buffers[index].device
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        with torch.cuda.device(device):
            if self._launchers is None:
                self._prepare()
            for index in range(function.num_arguments, len(function.buffers)):
                spec = function.buffers[index]
                buffers[index] = torch.empty(spec.shape, dtype=torch_dtype(spec.dtype), device=device)
                if poison:
                    buffers[index].fill_(float("nan"))
            stream = torch.cuda.current_stream(device).cuda_stream
            enter, exit_ = self._hooks
            for launch, grid, compiled in self._launchers:
                pointers = [buffers[i].data_ptr() for i in launch.inputs + launch.outputs]
                compiled.run(grid[0], grid[1], grid[2], stream, compiled.function,
                             compiled.packed_metadata, None, enter, exit_, *pointers)
        results = tuple(buffers[i] for i in function.results)
        return results[0] if len(results) == 1 else results

    def _checked(self, index: int, tensor, spec):
        import torch

        if not isinstance(tensor, torch.Tensor):
            raise KgcError(f"@{self.function.name}: argument #{index} must be a torch.Tensor, got "
                           f"{type(tensor).__name__}")
        expected = torch_dtype(spec.dtype)
        if tuple(tensor.shape) != tuple(spec.shape) or tensor.dtype != expected:
            raise KgcError(f"@{self.function.name}: argument #{index} must be {tuple(spec.shape)} "
                           f"{spec.dtype}, got {tuple(tensor.shape)} {tensor.dtype}")
        if tensor.device.type != "cuda":
            raise KgcError(f"@{self.function.name}: argument #{index} is on {tensor.device}; "
                           "kgc kernels run on a CUDA device")
        if not tensor.is_contiguous():
            tensor = tensor.contiguous()
        if tensor.data_ptr() % _ALIGNMENT:
            tensor = tensor.clone()
        return tensor


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()
