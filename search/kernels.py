"""One fused kernel of a graph as a graph of its own.

The search tunes kernels one at a time: each kg.kernel (in graph form, as
kg-fuse leaves it) becomes a module whose function takes the kernel's
operands and returns its results. `launch_form` keeps the kernel op, so
the rest of the pipeline (kg-tile onwards) compiles it as it would inside
the whole graph, to the same kernel under the same name; `inline_form` spells its body out as plain graph ops, which
`kgc.reference.evaluate` runs as torch would, to check what a candidate
computes. `signature` names a kernel by its content alone, so the same
kernel met in several partitions is tuned once. `compile_candidate`
compiles a kernel's launch form with a candidate's knobs.
"""

from __future__ import annotations

import hashlib

from mlir import ir
from mlir.dialects import func

from kgc.tiling.kernel_ops import kernel_name, walk_ops

_PLACEHOLDER = "kernel"
# The function of the module made of one kernel (kernel and function
# symbols share a table once the kernel is lowered: they must differ).
FUNCTION = "candidate"


def _function(kernel: ir.Operation, module: ir.Module, name: str) -> ir.Block:
    types = ir.FunctionType.get([v.type for v in kernel.operands],
                                [r.type for r in kernel.results])
    with ir.InsertionPoint(module.body):
        function = func.FuncOp(name, types)
    return function.add_entry_block()


def launch_form(kernel: ir.Operation, name: str | None = None) -> ir.Module:
    """A module whose function @candidate runs just `kernel`, kept as a
    kg.kernel named `name` (by default its own name)."""
    name = name or kernel_name(kernel)
    with kernel.context, kernel.location:
        module = ir.Module.create()
        block = _function(kernel, module, FUNCTION)
        with ir.InsertionPoint(block):
            clone = kernel.clone()
            for index, argument in enumerate(block.arguments):
                clone.operands[index] = argument
            clone.attributes["sym_name"] = ir.StringAttr.get(name)
            func.ReturnOp(list(clone.results))
    return module


def inline_form(kernel: ir.Operation) -> ir.Module:
    """A module whose function @candidate computes what `kernel` does, with
    the ops of its body at the function's top level."""
    body = kernel.regions[0].blocks[0]
    with kernel.context, kernel.location:
        module = ir.Module.create()
        block = _function(kernel, module, FUNCTION)
        mapping = dict(zip(body.arguments, block.arguments))
        with ir.InsertionPoint(block):
            for op in body.operations:
                op = op.operation
                if op.name == "kg.yield":
                    func.ReturnOp([mapping[v] for v in op.operands])
                    break
                clone = op.clone()
                for index, operand in enumerate(op.operands):
                    clone.operands[index] = mapping.get(operand, operand)
                for old, new in zip(op.results, clone.results):
                    mapping[old] = new
    return module


def signature(kernel: ir.Operation) -> str:
    """A digest of what `kernel` computes: its body, operand and result
    types and attributes, not its name or position."""
    text = launch_form(kernel, _PLACEHOLDER).operation.get_asm(enable_debug_info=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def input_specs(module: ir.Operation) -> list[tuple[tuple[int, ...], str]]:
    """(shape, element type) of each argument of the first function of
    `module` (a kernel's inline or launch form), as `verify.random_inputs`
    takes them."""
    function = _first_function(module)
    arguments = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value).inputs
    return [(tuple(ir.RankedTensorType(t).shape), str(ir.RankedTensorType(t).element_type))
            for t in arguments]


# Ops whose result holds values of their first operand, rearranged (a
# gather's, some of its table's: BERT's token types read at its positions).
_INDEX_PRESERVING = {"kg.reshape", "kg.broadcast_to", "kg.transpose", "kg.slice", "kg.cast",
                     "kg.gather"}


def index_bounds(module: ir.Operation) -> dict[int, int]:
    """Argument position -> the extent its values must stay under, for each
    integer argument of the first function of `module` that indexes a
    `kg.gather` (through reshapes, broadcasts, transposes, slices, casts,
    the tables of gathers and kernel boundaries): random indices beyond
    the table are no input the graph takes (`verify.random_inputs` draws
    them inside)."""
    function = _first_function(module)

    def argument_of(value) -> int | None:
        while True:
            value = value.maybe_downcast()
            if isinstance(value, ir.BlockArgument):
                # (An op view's `name` may be its symbol: ask the operation.)
                owner = value.owner.owner.operation
                if owner.name == "func.func":
                    return value.arg_number if owner == function else None
                if owner.name != "kg.kernel":
                    return None
                value = owner.operands[value.arg_number]
            else:
                producer = value.owner.operation
                if producer.name not in _INDEX_PRESERVING:
                    return None
                value = producer.operands[0]

    bounds: dict[int, int] = {}
    for op in walk_ops(function):
        if op.name != "kg.gather":
            continue
        extent = ir.RankedTensorType(op.operands[0].type).shape[
            ir.IntegerAttr(op.attributes["dim"]).value]
        position = argument_of(op.operands[1])
        if position is not None:
            bounds[position] = min(bounds.get(position, extent), extent)
    return bounds


def _first_function(module: ir.Operation) -> ir.Operation:
    return next(op for op in module.regions[0].blocks[0].operations
                if op.operation.name == "func.func").operation


def compile_candidate(launch_text: str, config, target: int, emit: str = "cubin"):
    """The kernel of `launch_text` (a `launch_form`'s text) with the knobs of
    `config` (a kgc.tiling.config.KernelConfig) compiled for sm_`target`
    down to `emit`: a kgc.pipeline.compiler.CompiledModule. Raises KgcError
    where the candidate cannot be compiled."""
    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.config import set_knobs
    from kgc.pipeline.stages import kernel_pipeline_text
    from kgc.tiling.kernel_ops import kernels_in

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(launch_text).operation
        (kernel,) = kernels_in(module)
        set_knobs(kernel, config)
        return compile_module(module, target=target, pipeline=kernel_pipeline_text(target),
                              emit=emit)
