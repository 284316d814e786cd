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

import contextlib
import threading
from typing import Callable

from kgc.diagnostics import KgcError
from kgc.tiling.library import LibraryCall

__all__ = ["exact_products", "library_function"]

# The setting of torch.backends.cuda.matmul that lets cuBLAS accumulate a
# product of this element type less exactly than in f32.
_INEXACT_SETTING = {"f32": "allow_tf32", "f16": "allow_fp16_reduced_precision_reduction",
                    "bf16": "allow_bf16_reduced_precision_reduction"}


_exact = threading.local()


@contextlib.contextmanager
def _exact_for(elements):
    """Products of `elements` sum in f32 in the block: torch's settings
    that allow them less are off for its duration and on again after."""
    import torch

    settings = torch.backends.cuda.matmul
    turned = [_INEXACT_SETTING[e] for e in elements
              if e in _INEXACT_SETTING and getattr(settings, _INEXACT_SETTING[e])]
    for name in turned:
        setattr(settings, name, False)
    try:
        yield
    finally:
        for name in turned:
            setattr(settings, name, True)


@contextlib.contextmanager
def exact_products():
    """Library products in the block sum in f32 as kg.matmul does: torch's
    settings that allow less are off for its duration, once, and each
    call within skips its own toggle."""
    with _exact_for(_INEXACT_SETTING):
        _exact.depth = getattr(_exact, "depth", 0) + 1
        try:
            yield
        finally:
            _exact.depth -= 1


def library_function(kernel: str, call: LibraryCall, element: str) -> Callable[..., None]:
    """The call of library kernel `kernel` on its buffers (tensors: its
    inputs, then its result), whose operands are of `element`."""
    import torch

    if call.name != "matmul":
        raise KgcError(f"kernel @{kernel} calls the library function '{call.name}', which this "
                       "runtime does not know (it knows 'matmul'); compile it again")
    arguments, bias_of = call.arguments, call.bias_of
    matmul, mm = torch.matmul, torch.mm
    if call.bias is None:
        def product(buffers):
            a, b, c = arguments(buffers)
            if c.dtype != a.dtype:
                # A half-float product written as f32 (2-d: kgc.tiling.
                # library): cuBLAS writes its f32 sum through torch's
                # out_dtype, a CUDA overload; elsewhere the same sum of
                # the operands widened.
                if c.is_cuda:
                    mm(a, b, out_dtype=c.dtype, out=c)
                else:
                    mm(a.to(c.dtype), b.to(c.dtype), out=c)
            # torch.mm skips matmul's dispatch on the dims (a linear layer's
            # product is 2-D: a microsecond of host time a call).
            elif a.dim() == 2 and b.dim() == 2 and c.dim() == 2:
                mm(a, b, out=c)
            else:
                matmul(a, b, out=c)
    else:
        def product(buffers):
            a, b, c = arguments(buffers)
            torch.addmm(bias_of(buffers), a, b, out=c)

    def run(*buffers) -> None:
        if getattr(_exact, "depth", 0):
            product(buffers)
            return
        with _exact_for((element,)):
            product(buffers)

    return run
