"""Library kernels at run time: the GPU's BLAS called through torch.

A library kernel (`kgc.tiling.library`) is a bare matmul that kgc leaves to
the GPU's BLAS. `library_function` makes its call: `torch.mm(a, b, out=c)`
(`torch.matmul` for a batched product) on the kernel's buffers (the
transposed views where the call swaps an operand's last two axes;
`torch.addmm(bias, a, b, out=c)` where it adds a bias to the product's
rows; `torch.mm(a, b, out_dtype=torch.float32, out=c)` where it writes a
half-float product as f32), on torch's current stream of the device,
which is the stream kgc's Triton kernels run on, so the call is ordered
with them. torch picks cuBLAS or cuBLASLt and the algorithm.

`kg.matmul` accumulates in f32 and rounds once; cuBLAS does so only with
TF32 off (f32 operands) and without reduced-precision reductions (f16,
bf16 split-K). Where torch's process-wide settings allow them
(`torch.backends.cuda.matmul`), the call turns them off for its duration
and restores them after: the settings are global, so a thread that changes
them while a library kernel runs may see them changed. A function's launches
run inside `exact_products`, which turns them off once for all its library
calls (each toggle costs microseconds of host time, and a layer makes
several calls).
"""

from __future__ import annotations

import threading
from typing import Callable

from kgc.diagnostics import KgcError
from kgc.element_types import torch_dtype
from kgc.runtime import internals
from kgc.tiling.library import LibraryCall

__all__ = ["exact_products", "library_function"]

# The setting of torch.backends.cuda.matmul that lets cuBLAS accumulate a
# product of this element type less exactly than in f32.
_INEXACT_SETTING = {"f32": "allow_tf32",
                    "f16": "allow_fp16_reduced_precision_reduction",
                    "bf16": "allow_bf16_reduced_precision_reduction"}


_exact = threading.local()
# element type -> (getter, setter) of its setting, found on first use.
_TOGGLES: dict = {}


def _toggles() -> dict:
    if not _TOGGLES:
        settings = internals.matmul_precision_settings(_INEXACT_SETTING.values())
        _TOGGLES.update({e: settings[name] for e, name in _INEXACT_SETTING.items()})
    return _TOGGLES


class _ExactFor:
    """Products of `elements` sum in f32 in the block: torch's settings
    that allow them less are off for its duration and as they were after."""

    __slots__ = ("elements", "turned")

    def __init__(self, elements):
        self.elements = elements

    def __enter__(self):
        toggles = _toggles()
        self.turned = turned = []
        for element in self.elements:
            get_set = toggles.get(element)
            if get_set is None:
                continue
            get, set_ = get_set
            before = get()
            # A reduction setting is (reduced precision, split-K) where
            # torch has both, a bool where it has one.
            if type(before) is tuple:
                if before[0]:
                    set_(False, *before[1:])
                    turned.append((set_, before))
            elif before:
                set_(False)
                turned.append((set_, (before,)))
        return self

    def __exit__(self, *exception):
        for set_, before in reversed(self.turned):
            set_(*before)
        return False


class _ExactProducts(_ExactFor):
    __slots__ = ()

    def __init__(self):
        super().__init__(_INEXACT_SETTING)

    def __enter__(self):
        super().__enter__()
        _exact.depth = getattr(_exact, "depth", 0) + 1
        return self

    def __exit__(self, *exception):
        _exact.depth -= 1
        return super().__exit__(*exception)


def exact_products():
    """Library products in the block sum in f32 as kg.matmul does: torch's
    settings that allow less are off for its duration, once, and each
    call within skips its own toggle."""
    return _ExactProducts()


def library_function(kernel: str, call: LibraryCall, element: str,
                     buffers=None) -> Callable[..., None]:
    """The call of library kernel `kernel` on its buffers (tensors: its
    inputs, then its result), whose operands are of `element`. `buffers`
    (the kernel's buffers as `kgc.pipeline.compiler.TensorSpec`s, or
    anything with a shape and an element type name) settles once what a
    call would otherwise work out from its tensors each time: the view of
    the result in the product's shape, and which torch function to call.
    A runtime makes one per kernel and calls it with every launch, so that
    its host time is one Python call around torch's."""
    if call.name != "matmul":
        raise KgcError(f"kernel @{kernel} calls the library function '{call.name}', which this "
                       "runtime does not know (it knows 'matmul'); compile it again")
    if buffers is None:
        def each_call(*tensors) -> None:
            _product(call, element, [(tuple(t.shape), t.dtype) for t in tensors])(*tensors)
        return each_call
    return _product(call, element, [(tuple(b.shape), torch_dtype(b.dtype)) for b in buffers])


def _product(call: LibraryCall, element: str, shapes: list) -> Callable[..., None]:
    """The call for buffers of `shapes` ((shape, torch dtype) each, the
    inputs then the result)."""
    import torch

    first, second = call.operands
    swap_a, swap_b = call.transpose_a, call.transpose_b
    result_shape, result_dtype = shapes[-1]
    # Where the kernel returns a reshape of the product, the call writes the
    # result seen in the product's shape.
    product_shape = call.result_view([shape for shape, _ in shapes])
    dims = len(product_shape or result_shape)
    plain = len(shapes[first][0]) == 2 and len(shapes[second][0]) == 2 and dims == 2
    bias = call.bias
    # A half-float product written as f32.
    out_dtype = None if result_dtype == torch_dtype(element) else result_dtype
    # torch.mm skips matmul's dispatch on the dims (a linear layer's product
    # is 2-D: a microsecond of host time a call).
    multiply = torch.mm if plain else torch.matmul
    addmm = torch.addmm

    def product(*tensors) -> None:
        a, b, c = tensors[first], tensors[second], tensors[-1]
        if swap_a:
            a = a.mT
        if swap_b:
            b = b.mT
        if product_shape is not None:
            c = c.view(product_shape)
        exact = None if getattr(_exact, "depth", 0) else _ExactFor((element,))
        if exact is not None:
            exact.__enter__()
        try:
            if bias is not None:
                addmm(tensors[bias].reshape(-1), a, b, out=c)
            elif out_dtype is None:
                multiply(a, b, out=c)
            elif c.is_cuda:
                # A half-float product written as f32 (2-d: kgc.tiling.
                # library): cuBLAS writes its f32 sum through torch's
                # out_dtype, a CUDA overload; elsewhere the same sum of the
                # operands widened.
                multiply(a, b, out_dtype=out_dtype, out=c)
            else:
                multiply(a.to(out_dtype), b.to(out_dtype), out=c)
        finally:
            if exact is not None:
                exact.__exit__(None, None, None)

    return product
