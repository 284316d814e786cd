"""Running the functions of a module in tiled form: kernels and returns.

A library kernel (a bare matmul left to the GPU's BLAS, kgc.tiling.library)
has no tile program: it runs as the product it calls, accumulated in f32
and rounded once to the result's element type, as kg.matmul says."""

from __future__ import annotations

import contextlib
import math
from typing import Sequence

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.element_types import poison
from kgc.execution.errors import located
from kgc.execution.program import TileProgram
from kgc.tiling.dynamic import at_size, call_extent
from kgc.tiling.kernel_ops import is_tiled, kernel_name
from kgc.tiling.library import library_call_of


def run_tiled(module, function: str | None, *tensors):
    """The results of `function` (the only one when None) of `module` on
    `tensors`: one tensor, or a tuple when it returns several.

    `module` is a `builtin.module` op or its MLIR text, in tiled form: the
    function bodies hold tiled kg.kernel ops and a return, as the `kg` stage
    of the compiler leaves them. Raises TileProgramError where a program
    reads or writes outside a buffer, stores an element another program
    stored, leaves an output element unwritten or holds an op the executor
    cannot run. Torch runs on one thread meanwhile
    (`torch.set_num_threads`, restored after)."""
    if isinstance(module, str):
        from kgc.parsing import parse_text

        context = ir.Context()
        with context, _one_thread():
            return _run_function(parse_text(module, "<string>", context), function, tensors)
    module = module.operation
    with module.context, _one_thread():
        return _run_function(module, function, tensors)


@contextlib.contextmanager
def _one_thread():
    """Torch on one thread: on tiles this small, sharing each op among
    threads costs more than it saves (many times more on a busy machine)."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _run_function(module: ir.Operation, function: str | None, tensors: Sequence):
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func"}
    if function is None:
        if len(functions) != 1:
            raise KgcError(f"the module holds {len(functions)} functions "
                           f"({', '.join(functions) or 'none'}); name the one to run")
        function = next(iter(functions))
    if function not in functions:
        raise KgcError(f"no function @{function} (have: {', '.join(functions) or 'none'})")
    body = functions[function].regions[0].blocks[0]
    arguments = list(body.arguments)
    if len(tensors) != len(arguments):
        raise KgcError(f"@{function} takes {len(arguments)} tensors, got {len(tensors)}")
    values = {}
    extent = call_extent(f"@{function}", [a.type for a in arguments], tensors)
    for index, (argument, tensor) in enumerate(zip(arguments, tensors)):
        _check_tensor(f"@{function}: argument #{index}", tensor, argument.type, extent)
        values[argument] = tensor
    for op in body.operations:
        op = op.operation
        if op.name == "func.return":
            results = tuple(values[v] for v in op.operands)
            return results[0] if len(results) == 1 else results
        if op.name != "kg.kernel":
            raise located(op, f"@{function}: {op.name} is outside every kernel; the CPU executor "
                              "runs only tiled kg.kernel ops and the return")
        outputs = run_kernel(op, [values[v] for v in op.operands], extent)
        values.update(zip(op.results, outputs))
    raise KgcError(f"@{function} has no return")


def run_kernel(kernel: ir.Operation, inputs: Sequence, extent: int | None = None) -> list:
    """The results of one tiled kg.kernel on `inputs`, every program of its
    grid run in turn; `extent` is the size of its dynamic extent (read off
    the inputs when None)."""
    import torch

    name = kernel_name(kernel)
    if not is_tiled(kernel):
        raise located(kernel, f"kernel @{name} is not tiled; run kg-tile and kg-pad-mask first")
    arguments = kernel.regions[0].blocks[0].arguments
    call = library_call_of(kernel)
    if call is not None:
        return [_run_library_call(kernel, call, inputs, arguments)]
    if extent is None:
        extent = call_extent(f"kernel @{name}", [a.type for a in arguments], inputs)
    program = TileProgram(kernel, extent)
    buffers, written = [], []
    for index, (tensor, argument) in enumerate(zip(inputs, arguments)):
        _check_buffer(kernel, index, tensor.shape, tensor.dtype, argument.type, extent)
        buffers.append(tensor.contiguous().reshape(-1))
    results = list(kernel.results)
    shapes = []
    for index, result in enumerate(results, start=len(inputs)):
        type_ = ir.RankedTensorType(result.type)
        dtype = torch_dtype(type_.element_type)
        shape = at_size(type_.shape, extent)
        shapes.append(list(shape))
        _check_buffer(kernel, index, shape, dtype, arguments[index].type, extent)
        count = math.prod(shape)
        device = inputs[0].device if inputs else "cpu"
        buffers.append(torch.full((count,), poison(dtype), dtype=dtype, device=device))
        written.append(torch.zeros(count, dtype=torch.int32, device=device))
    program.run(buffers, written)
    outputs = []
    for number, (result, writers, shape) in enumerate(zip(results, written, shapes)):
        done = writers != 0
        if not bool(done.all()):
            missing = (~done).nonzero()[0].item()
            index = tuple(int(i) for i in torch.unravel_index(torch.tensor(missing), shape))
            raise located(
                kernel, f"kernel @{name} leaves {int((~done).sum())} of {done.numel()} elements of "
                        f"result #{number} ({result.type}) unwritten, the first at index "
                        f"{index}")
        outputs.append(buffers[len(inputs) + number].reshape(shape))
    return outputs


def _run_library_call(kernel: ir.Operation, call, inputs: Sequence, arguments):
    """The result of a library kernel's call on `inputs`."""
    if call.name != "matmul" or len(kernel.results) != 1 or \
            any(not 0 <= index < len(inputs) for index in call.operands):
        raise located(kernel, f"kernel @{kernel_name(kernel)}: the CPU executor runs the "
                              f"library call 'matmul' of the kernel's inputs, not "
                              f"'{call.name}' of inputs {list(call.operands)} of {len(inputs)}")
    for index, tensor in enumerate(inputs):
        _check_buffer(kernel, index, tensor.shape, tensor.dtype, arguments[index].type)
    result = ir.RankedTensorType(kernel.results[0].type)
    widened = [tensor.float() for tensor in inputs] + [None]
    a, b, _ = call.arguments(widened)
    product = a @ b
    if call.bias is not None:
        product = product + call.bias_of(widened)
    return product.to(torch_dtype(result.element_type)).reshape(result.shape)


def torch_dtype(element: ir.Type):
    from kgc.element_types import torch_dtype as by_name

    try:
        return by_name(str(element))
    except KeyError:
        raise KgcError(f"the CPU executor has no torch dtype for {element}") from None


def _check_tensor(what: str, tensor, type_: ir.Type, extent: int | None = None) -> None:
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise KgcError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    type_ = ir.RankedTensorType(type_)
    shape, dtype = at_size(type_.shape, extent), torch_dtype(type_.element_type)
    if tuple(tensor.shape) != shape or tensor.dtype != dtype:
        raise KgcError(f"{what} must be {shape} {type_.element_type}, got {tuple(tensor.shape)} "
                       f"{tensor.dtype}")


def _check_buffer(kernel: ir.Operation, index: int, shape, dtype, buffer_type: ir.Type,
                  extent: int | None = None) -> None:
    memref = ir.MemRefType(buffer_type)
    if tuple(shape) != at_size(memref.shape, extent) or \
            dtype != torch_dtype(memref.element_type):
        raise located(kernel, f"kernel @{kernel_name(kernel)}: buffer #{index} is {buffer_type}, "
                              f"but the kernel gets {tuple(shape)} {dtype}")
