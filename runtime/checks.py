"""The checks of a call's tensors, and the errors that name what is wrong.

Arguments are checked before anything runs, each error naming the argument
(`#1 (gamma)`) with what was expected and what came: their number, that
each is a torch.Tensor, its dtype, its shape, that it is on a CUDA device,
the same one as the others. The kernels read every tensor as dense and
row-major from a data pointer aligned to 16 bytes, as their TTIR promises
Triton (`tt.divisibility = 16`): `needs_copy` tells which arguments must be
copied first; `out=` buffers are never copied, so one that is not dense and
aligned, or that overlaps an argument, is refused (`take_out`).
"""

from __future__ import annotations

from kgc.diagnostics import KgcError
from kgc.element_types import torch_dtype

ALIGNMENT = 16
NO_DEVICE = -2  # no tensor seen yet (get_device() is -1 for a CPU tensor)


def argument_label(function, index: int) -> str:
    """`#1 (gamma)`, or `#1` where the source does not name arguments."""
    names = function.argument_names
    return f"#{index} ({names[index]})" if names else f"#{index}"


def needs_copy(tensor) -> bool:
    """Whether the kernels cannot read `tensor` where it is: not dense, or
    its data pointer not aligned."""
    return not tensor.is_contiguous() or tensor.data_ptr() % ALIGNMENT != 0


def mismatch(name: str, what: str, tensor, spec) -> KgcError:
    """The error for `tensor`, given as `what` to @`name`, which is not a
    torch.Tensor of `spec`'s dtype and shape."""
    import torch

    expected = f"{shape_text(spec.shape)} {spec.dtype}"
    if not isinstance(tensor, torch.Tensor):
        return KgcError(f"@{name}: {what} must be a torch.Tensor of {expected}, got "
                        f"{type(tensor).__name__}")
    wanted = torch_dtype(spec.dtype)
    if tensor.dtype != wanted:
        return KgcError(f"@{name}: {what} must have dtype {wanted} ({spec.dtype}), got "
                        f"{tensor.dtype}")
    return KgcError(f"@{name}: {what} must have shape {shape_text(spec.shape)}, got "
                    f"{tuple(tensor.shape)}")


def shape_text(shape) -> str:
    """`(3, 4)`; a dynamic extent (None or `?`) as `?`: `(?, 128)`."""
    sizes = ["?" if size is None else str(size) for size in shape]
    return f"({sizes[0]},)" if len(sizes) == 1 else f"({', '.join(sizes)})"


def misplaced(name: str, what: str, tensor, device: int) -> KgcError:
    """The error for `tensor`, which is not on a CUDA device or not on
    `device`, where the arguments before it are."""
    if tensor.device.type != "cuda" or tensor.get_device() < 0:
        return KgcError(f"@{name}: {what} is on {tensor.device}; it must be on a CUDA "
                        "device (kgc kernels run on the GPU)")
    return KgcError(f"@{name}: {what} is on {tensor.device}, the arguments before it on "
                    f"cuda:{device}; all must be on one device")


def take_out(function, out, tensors: tuple, buffers: list, device: int) -> list:
    """Checks the caller's result buffers `out` for a call of `function` on
    `tensors` and puts them where the kernels write the results."""
    import torch

    name = function.name
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    if len(outs) != len(function.results):
        raise KgcError(f"@{name} has {len(function.results)} result(s); out= gives "
                       f"{len(outs)}")
    for position, (tensor, index) in enumerate(zip(outs, function.results)):
        what = f"out #{position}"
        spec = function.buffers[index]
        shape, dtype = (torch.Size(spec.shape), torch_dtype(spec.dtype))
        if not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype \
                or tensor.shape != shape:
            raise mismatch(name, what, tensor, spec)
        if tensor.get_device() != device:
            raise misplaced(name, what, tensor, device)
        if needs_copy(tensor):
            raise KgcError(f"@{name}: {what} must be contiguous with a data pointer "
                           f"aligned to {ALIGNMENT} bytes (kernels write it in place; it "
                           "is not copied)")
        for argument_index, argument in enumerate(tensors):
            if overlap(tensor, argument):
                raise KgcError(f"@{name}: {what} overlaps argument "
                               f"{argument_label(function, argument_index)}; kgc kernels do "
                               "not compute in place")
        if index >= function.num_arguments and buffers[index] is None:
            buffers[index] = tensor
    return outs


def overlap(a, b) -> bool:
    """Whether the memory spans of two tensors (from the first element to
    the last, strides included) intersect."""
    if a.get_device() != b.get_device():
        return False

    def span(t):
        last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()

    (a_start, a_end), (b_start, b_end) = span(a), span(b)
    return a_start < b_end and b_start < a_end
