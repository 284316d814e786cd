"""A torch interpreter of kernel graphs, for checking compiled kernels.

    expected = kgc.reference.evaluate(module, "f", [x, w])

Runs the kg ops of a function one by one with torch, as eager PyTorch
would: each op computes in f32 (f16, bf16 and the 8-bit floats are
widened first) and rounds its result to its own element type. With
`exact=True` every op computes in f64 and keeps its result unrounded; only
the graph's own kg.cast ops round. Integer and boolean tensors are never
widened: their ops compute in their own dtype (integers wrap around as
torch's do), in both modes. Works on any device torch supports, the CPU
included, and needs no compilation.
"""

from __future__ import annotations

from typing import Sequence

from mlir import ir

from kgc.diagnostics import KgcError, error_at
from kgc.element_types import torch_dtype
from kgc.op_table import elementwise_op
from kgc.tiling.dynamic import at_size, call_extent
from kgc.tiling.graph_model import node_attrs, reduce_kind


def _dtype(value: ir.Value):
    return torch_dtype(str(ir.RankedTensorType(value.type).element_type))


def evaluate(module: ir.Operation, function: str | None, inputs: Sequence, exact: bool = False):
    """The results of `function` (the only one when None) on `inputs`."""
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                 for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"}
    if function is None:
        if len(functions) != 1:
            raise KgcError("name the function to evaluate")
        function = next(iter(functions))
    body = functions[function].regions[0].blocks[0]
    values = dict(zip(body.arguments, [_widen(x, exact) for x in inputs]))
    device = inputs[0].device if inputs else "cpu"
    extent = call_extent(f"@{function}", [a.type for a in body.arguments], inputs)
    for op in body.operations:
        op = op.operation
        if op.name == "func.return":
            results = tuple(values[v] for v in op.operands)
            return results[0] if len(results) == 1 else results
        values[op.results[0]] = _evaluate_op(op, [values[v] for v in op.operands], exact, device,
                                             extent)
    raise KgcError(f"@{function} has no return")


def _result_shape(op: ir.Operation, extent: int | None) -> list[int]:
    """The shape of `op`'s result, its dynamic extents at `extent`."""
    return list(at_size(ir.RankedTensorType(op.results[0].type).shape, extent))


def _widen(x, exact: bool):
    """An input as `evaluate` holds it: floats in f64 when exact."""
    return x.double() if exact and x.is_floating_point() else x


def _settle(result, dtype, exact: bool):
    """An op's result: rounded to `dtype`, or kept unrounded in f64 when
    exact (integer and boolean results are exact in their own dtype)."""
    import torch

    if exact and dtype.is_floating_point:
        return result.to(torch.float64)
    return result.to(dtype)


def evaluate_op(op: ir.Operation, operands: Sequence, exact: bool = False):
    """The result of one kg op on torch tensors, as `evaluate` computes it.
    The shape of a constant, a broadcast or a reshape comes from the op's
    result type, so this runs the op on tiles as well as on whole tensors."""
    device = operands[0].device if operands else "cpu"
    return _evaluate_op(op, list(operands), exact, device)


def elementwise(name: str, *operands, dtype, exact: bool = False, **attributes):
    """The elementwise kg op `name` ("exp" or "kg.exp") on torch tensors, as
    `evaluate` computes it: in f32 (f64 with `exact`) and rounded to `dtype`,
    the torch dtype of its result (kept unrounded with `exact`, except by a
    cast). `attributes` are the op's, as Python values (`approximate="tanh"`,
    `min=0.0`)."""
    import torch

    row = elementwise_op(name)
    if row is None:
        raise KgcError(f"{name} is not an elementwise kg op")
    compute = torch.float64 if exact else torch.float32
    result = row.reference(*(x.to(compute) if x.is_floating_point() else x for x in operands),
                           **attributes)
    if row.converts:
        return _settle(result.to(dtype), dtype, exact)
    return _settle(result, dtype, exact)


def _evaluate_op(op: ir.Operation, args: list, exact: bool, device, extent: int | None = None):
    import torch

    name = op.name[3:] if op.name.startswith("kg.") else op.name
    attrs = node_attrs(op)
    out_dtype = _dtype(op.results[0])
    row = elementwise_op(name)
    if row is not None:
        return elementwise(name, *args, dtype=out_dtype, exact=exact,
                           **{a: attrs[a] for a in row.attributes})
    compute = torch.float64 if exact else torch.float32
    if name in ("gather", "scatter"):
        return _indexed(name, op, args, attrs, out_dtype, compute, exact)
    wide = [a.to(compute) for a in args]
    if name == "constant":
        shape = ir.RankedTensorType(op.results[0].type).shape
        if not out_dtype.is_floating_point:
            return torch.full(list(shape), int(attrs["value"]), dtype=out_dtype, device=device)
        result = torch.full(list(shape), attrs["value"], dtype=compute, device=device)
    elif name == "iota":
        shape = list(ir.RankedTensorType(op.results[0].type).shape)
        dim, start = attrs["dim"], attrs["start"]
        # Counted in i64 and converted once, as torch.arange(...).to(dtype).
        positions = torch.arange(start, start + shape[dim], dtype=torch.int64, device=device)
        view = [1] * len(shape)
        view[dim] = shape[dim]
        return _settle(positions.reshape(view).expand(shape).contiguous().to(out_dtype),
                       out_dtype, exact)
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
        return args[0].reshape(_result_shape(op, extent))
    elif name == "broadcast_to":
        return args[0].expand(_result_shape(op, extent)).contiguous()
    elif name == "concat":
        return torch.cat(args, dim=attrs["dim"])
    elif name == "slice":
        index = tuple(slice(o, o + n * s, s) for o, s, n in zip(
            attrs["offsets"], attrs["strides"], _result_shape(op, extent)))
        return args[0][index].contiguous()
    else:
        raise KgcError(f"the reference interpreter does not know {op.name}")
    return result if exact else result.to(out_dtype)


def checked_indices(op: ir.Operation, indices, extent: int):
    """`indices` (a 1-D integer tensor) as i64, after checking that each lies
    in [0, extent): kg.gather and kg.scatter do not wrap negative indices,
    and an index outside would read or write another tensor's memory on a
    GPU. The error names the op, the first bad index and its position."""
    import torch

    indices = indices.to(torch.int64)
    outside = (indices < 0) | (indices >= extent)
    if bool(outside.any()):
        position = int(outside.nonzero()[0, 0])
        raise error_at(op, f"{op.name}: index {int(indices[position])} at position {position} "
                           f"of the indices is outside [0, {extent}) along dim "
                           f"{ir.IntegerAttr(op.attributes['dim']).value}")
    return indices


def _indexed(name: str, op: ir.Operation, args: list, attrs: dict, out_dtype, compute,
             exact: bool):
    """kg.gather as torch.index_select; kg.scatter as index_copy (assign,
    the last of repeated indices kept, as torch's CPU kernel keeps it) or
    index_add (add, summed in f32 or f64 and rounded once)."""
    import torch

    dim = attrs["dim"]
    if name == "gather":
        table, indices = args
        indices = checked_indices(op, indices, table.shape[dim])
        return torch.index_select(table, dim, indices)
    dest, indices, source = args
    indices = checked_indices(op, indices, dest.shape[dim])
    if attrs["mode"] == "assign":
        # The last write wins: keep, for each destination, the last source
        # slice that names it, so the result does not depend on how torch
        # orders its writes.
        positions = torch.arange(indices.numel(), device=indices.device)
        last = torch.full((dest.shape[dim],), -1, dtype=torch.int64, device=indices.device)
        last.scatter_reduce_(0, indices, positions, reduce="amax")
        kept = last[indices] == positions
        return dest.index_copy(dim, indices[kept], source.index_select(dim, positions[kept]))
    if not dest.is_floating_point():
        return dest.index_add(dim, indices, source)
    summed = dest.to(compute).index_add(dim, indices, source.to(compute))
    return _settle(summed, out_dtype, exact)


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
    norm = op.opview
    given = iter(wide[1:])
    weight = next(given) if norm.weight is not None else None
    bias = next(given) if norm.bias is not None else None
    return torch.nn.functional.layer_norm(x, shape, weight, bias, eps=eps)
