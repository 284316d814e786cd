"""A torch interpreter of kernel graphs, for checking compiled kernels.

    expected = kgc.reference.evaluate(module, "f", [x, w])

Runs the kg ops of a function one by one with torch, as eager PyTorch
would: each op computes in f32 (f16, bf16 and the 8-bit floats are
widened first) and rounds its result to its own element type. With
`exact=True` every op computes in f64 and keeps its result unrounded; only
the graph's own kg.cast ops round. Works on any device torch supports, the
CPU included, and needs no compilation.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.tiling.graph_model import node_attrs, reduce_kind

_TORCH_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
                "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}


def _dtype(value: ir.Value):
    import torch

    return getattr(torch, _TORCH_NAMES[str(ir.RankedTensorType(value.type).element_type)])


def evaluate(module: ir.Operation, function: str | None, inputs: Sequence, exact: bool = False):
    """The results of `function` (the only one when None) on `inputs`."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"}
    if function is None:
        if len(functions) != 1:
            raise KgcError("name the function to evaluate")
        function = next(iter(functions))
    body = functions[function].regions[0].blocks[0]
    values = dict(zip(body.arguments, [x.double() if exact else x for x in inputs]))
    device = inputs[0].device if inputs else "cpu"
    for op in body.operations:
        op = op.operation
        if op.name == "func.return":
            results = tuple(values[v] for v in op.operands)
            return results[0] if len(results) == 1 else results
        values[op.results[0]] = _evaluate_op(op, [values[v] for v in op.operands], exact, device)
    raise KgcError(f"@{function} has no return")


def evaluate_op(op: ir.Operation, operands: Sequence, exact: bool = False):
    """The result of one kg op on torch tensors, as `evaluate` computes it.
    The shape of a constant, a broadcast or a reshape comes from the op's
    result type, so this runs the op on tiles as well as on whole tensors."""
    device = operands[0].device if operands else "cpu"
    return _evaluate_op(op, list(operands), exact, device)


def _evaluate_op(op: ir.Operation, args: list, exact: bool, device):
    import torch

    name = op.name[3:] if op.name.startswith("kg.") else op.name
    attrs = node_attrs(op)
    out_dtype = _dtype(op.results[0])
    compute = torch.float64 if exact else torch.float32
    wide = [a.to(compute) for a in args]
    F = torch.nn.functional
    unary = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
        "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "silu": F.silu,
        "sigmoid": torch.sigmoid, "tanh": torch.tanh, "square": torch.square,
        "reciprocal": torch.reciprocal,
    }
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
              "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow}
    if name in unary:
        result = unary[name](wide[0])
    elif name in binary:
        result = binary[name](wide[0], wide[1])
    elif name == "gelu":
        result = F.gelu(wide[0], approximate=attrs["approximate"])
    elif name == "clamp":
        result = torch.clamp(wide[0], min=attrs["min"], max=attrs["max"])
    elif name == "constant":
        shape = ir.RankedTensorType(op.results[0].type).shape
        result = torch.full(list(shape), attrs["value"], dtype=compute, device=device)
    elif name == "cast":
        rounded = args[0].to(torch.float32).to(out_dtype)
        return rounded.double() if exact else rounded
    elif name == "matmul":
        result = torch.matmul(wide[0], wide[1])
    elif name == "reduce":
        result = _reduce(reduce_kind(op), wide[0], attrs["dims"], attrs["keepdim"])
    elif name == "softmax":
        result = torch.softmax(wide[0], dim=ir.IntegerAttr(op.attributes["dim"]).value)
    elif name in ("rms_norm", "layer_norm"):
        result = _norm(name, op, wide)
    elif name == "transpose":
        return args[0].permute(*attrs["permutation"]).contiguous()
    elif name == "reshape":
        return args[0].reshape(list(ir.RankedTensorType(op.results[0].type).shape))
    elif name == "broadcast_to":
        return args[0].expand(list(ir.RankedTensorType(op.results[0].type).shape)).contiguous()
    elif name == "concat":
        return torch.cat(args, dim=attrs["dim"])
    elif name == "slice":
        index = tuple(slice(o, o + n * s, s) for o, s, n in zip(
            attrs["offsets"], attrs["strides"], ir.RankedTensorType(op.results[0].type).shape))
        return args[0][index].contiguous()
    else:
        raise KgcError(f"the reference interpreter does not know {op.name}")
    return result if exact else result.to(out_dtype)


def _reduce(kind: str, x, dims, keepdim: bool):
    import torch

    dims = sorted(dims)
    if kind in ("sum", "mean"):
        return (torch.sum if kind == "sum" else torch.mean)(x, dim=dims, keepdim=keepdim)
    fn = torch.amax if kind == "max" else torch.amin
    return fn(x, dim=dims, keepdim=keepdim)


def _norm(name: str, op: ir.Operation, wide: list):
    import torch

    shape = list(ir.DenseI64ArrayAttr(op.attributes["normalized_shape"]))
    eps = ir.FloatAttr(op.attributes["eps"]).value
    x = wide[0]
    if name == "rms_norm":
        weight = wide[1] if len(wide) > 1 else None
        return torch.nn.functional.rms_norm(x, shape, weight, eps=eps)
    segments = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    weight = wide[1] if segments[1] else None
    bias = wide[1 + segments[1]] if segments[2] else None
    return torch.nn.functional.layer_norm(x, shape, weight, bias, eps=eps)
