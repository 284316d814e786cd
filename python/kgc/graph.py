"""Kernel graphs written in Python.

    g = kgc.Graph("rmsnorm_matmul")
    x = g.input("x", (16, 4096), "f16")
    w = g.input("w", (4096, 6144), "f16")
    gamma = g.input("gamma", (4096,), "f16")
    g.output(g.matmul(g.rms_norm(x, gamma, eps=1e-6), w))
    module = g.build()        # a builtin.module holding func.func @rmsnorm_matmul
    text = g.to_mlir()        # the same module as kgc-opt reads it

A graph may have one dynamic extent, a size that each call gives (the
number of tokens, say): an input's shape names it where it stands,
`g.input("x", ("tokens", 4096), "f16")`, and every shape the ops derive
from it shows the name there (`tensor<?x4096xf16>` in the IR, where all
the `?` of a function are that one size). Ops keep the name where numpy's
rules would keep a number; constants and iotas have static shapes.

A `Graph` records each op when it is called and checks it at once by
building it, alone, in a scratch context and running the kg verifiers on
it, so that a wrong shape or dtype raises `GraphError` at the line that
wrote it, with the verifier's message naming the operands' shapes and
dtypes, rather than surfacing later as a verifier error on the module.
Python-level arguments (dtype spellings, negative dims, -1 in a reshape)
are resolved here first. The graph itself holds no IR; `build()` creates
it, so one graph can be built into any number of contexts.

The elementwise methods (`exp`, `add`, ...) come from the op table
(`kgc.op_table`), one per elementwise op of the dialect.

Each op built from the graph carries the file location of the Python line
that called it, so that diagnostics of later passes point at the user's
code.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import numbers
import operator
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Optional, Union

from mlir import ir
from mlir.dialects import func

from kgc._dialect import load_dialect
from kgc.diagnostics import from_mlir_error
from kgc.dialects import kg
from kgc.op_table import ELEMENTWISE, ElementwiseOp

__all__ = ["Graph", "GraphError", "Tensor"]


class GraphError(ValueError):
    """An op that the kg verifiers would reject, raised when it is called.

    The message starts with the op's name and names the operands' shapes
    and dtypes and the rule that failed.
    """


# --------------------------------------------------------------------------
# Element types
# --------------------------------------------------------------------------

# Elementwise math, reductions, normalizations and constants take these.
_FLOAT_DTYPES = ("f32", "f16", "bf16")
# 8-bit floats are only stored, cast, viewed and multiplied by matmul.
_FLOAT8_DTYPES = ("f8e4m3", "f8e5m2")
# Integers (torch.int32, torch.int64) and booleans (torch.bool): positions,
# indices and masks, for comparisons, selects, integer arithmetic and casts.
_INT_DTYPES = ("i32", "i64")
_BOOL_DTYPE = "i1"

# The dtypes each class of elementwise op takes (the op table's
# operand_types), and how an error names them.
_OPERAND_DTYPES = {
    "float": (_FLOAT_DTYPES, "f32, f16 or bf16; 8-bit floats are only for matmul, cast and "
                             "the view ops"),
    "numeric": (_FLOAT_DTYPES + _INT_DTYPES, "f32, f16, bf16, i32 or i64"),
    "bool": ((_BOOL_DTYPE,), "i1 (bool); compare other dtypes first"),
    "value": (_FLOAT_DTYPES + _INT_DTYPES + (_BOOL_DTYPE,), "f32, f16, bf16, i1, i32 or i64"),
}

_MLIR_ELEMENT_TYPES: dict[str, Callable[[], ir.Type]] = {
    "f32": ir.F32Type.get,
    "f16": ir.F16Type.get,
    "bf16": ir.BF16Type.get,
    "f8e4m3": ir.Float8E4M3FNType.get,
    "f8e5m2": ir.Float8E5M2Type.get,
    "i1": lambda: ir.IntegerType.get_signless(1),
    "i32": lambda: ir.IntegerType.get_signless(32),
    "i64": lambda: ir.IntegerType.get_signless(64),
}

# Spellings users bring from MLIR, numpy and torch (torch dtypes print as
# "torch.<name>"), lower-cased.
_DTYPE_SPELLINGS = {
    "f32": "f32", "float32": "f32", "float": "f32",
    "f16": "f16", "float16": "f16", "half": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
    "f8e4m3": "f8e4m3", "f8e4m3fn": "f8e4m3", "float8_e4m3fn": "f8e4m3",
    "f8e5m2": "f8e5m2", "float8_e5m2": "f8e5m2",
    "i1": "i1", "bool": "i1",
    "i32": "i32", "int32": "i32", "int": "i32",
    "i64": "i64", "int64": "i64", "long": "i64",
}

# The smallest magnitude that rounds to infinity, with round-to-nearest-even,
# in each type a constant may have: the largest finite value plus half a
# unit in its last place. The kg.constant verifier rejects finite values
# that overflow.
_OVERFLOW_THRESHOLDS = {
    "f32": 2.0**128 - 2.0**103,
    "f16": 65520.0,
    "bf16": 2.0**128 - 2.0**119,
}


def _dtype_name(op: str, dtype: object) -> str:
    """The canonical name of `dtype`, a string or a torch dtype.

    torch dtypes are recognized by their type's module, so torch is never
    imported here.
    """
    if isinstance(dtype, str):
        spelling = dtype.lower()
    elif type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype":
        spelling = str(dtype).removeprefix("torch.")
    else:
        spelling = None
    if spelling not in _DTYPE_SPELLINGS:
        raise GraphError(f"{op}: unknown dtype {dtype!r}; kg tensors hold "
                         f"{', '.join(_MLIR_ELEMENT_TYPES)}")
    return _DTYPE_SPELLINGS[spelling]


# --------------------------------------------------------------------------
# Source locations
# --------------------------------------------------------------------------

# (file, line, column) of the Python code that made a tensor.
_SourcePosition = Optional[tuple[str, int, int]]


def _caller_position() -> _SourcePosition:
    """Where the user's code called into this module.

    Frames of this file are skipped, so `x + y` and `g.add(x, y)` both point
    at the user's line. Columns are 1-based, as in MLIR.
    """
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return None
    column = 1
    positions = getattr(frame.f_code, "co_positions", None)  # Python 3.11+
    if positions is not None:
        position = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
        if position is not None and position[2] is not None:
            column = position[2] + 1
    return frame.f_code.co_filename, frame.f_lineno or 0, column


def _mlir_location(position: _SourcePosition, origin: str | None = None) -> ir.Location:
    """The file location of `position`; inside a NameLoc `origin` when the
    op was recorded under `Graph.origin`."""
    location = ir.Location.unknown() if position is None else ir.Location.file(*position)
    return location if origin is None else ir.Location.name(origin, childLoc=location)


# --------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------

Scalar = Union[int, float]


class Tensor:
    """A value of a `Graph`: an input or the result of an op.

    It holds only what the checks need (shape and dtype); the MLIR value is
    made by `Graph.build`. Arithmetic operators record ops on the graph, and
    Python numbers on either side become rank-0 constants of the tensor's
    dtype. Tensors compare and hash by identity.
    """

    __slots__ = ("graph", "shape", "dtype", "name", "_defined_at")

    def __init__(self, graph: Graph, shape: tuple[int, ...], dtype: str,
                 name: str | None, defined_at: _SourcePosition):
        self.graph = graph
        self.shape = shape
        self.dtype = dtype
        self.name = name  # set for graph inputs only
        self._defined_at = defined_at

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        label = f"{self.name}: " if self.name else ""
        return f"Tensor({label}{_describe(self)})"

    def __add__(self, other: Tensor | Scalar) -> Tensor:
        return self.graph.add(self, other)

    def __radd__(self, other: Scalar) -> Tensor:
        return self.graph.add(other, self)

    def __sub__(self, other: Tensor | Scalar) -> Tensor:
        return self.graph.sub(self, other)

    def __rsub__(self, other: Scalar) -> Tensor:
        return self.graph.sub(other, self)

    def __mul__(self, other: Tensor | Scalar) -> Tensor:
        return self.graph.mul(self, other)

    def __rmul__(self, other: Scalar) -> Tensor:
        return self.graph.mul(other, self)

    def __truediv__(self, other: Tensor | Scalar) -> Tensor:
        return self.graph.div(self, other)

    def __rtruediv__(self, other: Scalar) -> Tensor:
        return self.graph.div(other, self)

    def __pow__(self, other: Tensor | Scalar) -> Tensor:
        return self.graph.pow(self, other)

    def __rpow__(self, other: Scalar) -> Tensor:
        return self.graph.pow(other, self)

    def __neg__(self) -> Tensor:
        return self.graph.neg(self)

    # Booleans: `&`, `|`, `^`, `~` as on torch.bool tensors. (`==` and `<`
    # stay Python's: tensors compare by identity; use g.eq, g.lt, ...)
    def __and__(self, other: Tensor) -> Tensor:
        return self.graph.logical_and(self, other)

    def __or__(self, other: Tensor) -> Tensor:
        return self.graph.logical_or(self, other)

    def __xor__(self, other: Tensor) -> Tensor:
        return self.graph.logical_xor(self, other)

    def __invert__(self) -> Tensor:
        return self.graph.logical_not(self)

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.graph.matmul(self, other)


def _describe(tensor: Tensor) -> str:
    """`(16, 64) f16`, or `('tokens', 64) f16` with a dynamic extent: how
    error messages show an operand."""
    return f"{tensor.shape} {tensor.dtype}"


# Builds one op from the MLIR values of its operands and its result type,
# under an insertion point and a location set by `Graph.build`.
_Emitter = Callable[[Sequence[ir.Value], ir.RankedTensorType], ir.Value]


class _Op:
    """A recorded op: its operands, the tensor it produces, and how to
    emit it."""

    __slots__ = ("operands", "result", "emit")

    def __init__(self, operands: tuple[Tensor, ...], result: Tensor, emit: _Emitter):
        self.operands = operands
        self.result = result
        self.emit = emit


# --------------------------------------------------------------------------
# Argument checks shared by the ops
# --------------------------------------------------------------------------

# Names become MLIR symbols and argument names as they are, unquoted, and
# work as Python keyword arguments.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(op: str, what: str, name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise GraphError(f"{op}: {what} {name!r} is not a valid name "
                         "(a letter or '_', then letters, digits or '_')")
    return name


def _as_int(op: str, what: str, value: object) -> int:
    if isinstance(value, bool):
        raise GraphError(f"{op}: {what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise GraphError(f"{op}: {what} must be an integer, got {value!r}") from None


def _int_tuple(op: str, what: str, values: object) -> tuple[int, ...]:
    """A tuple of ints from an int or an iterable of them."""
    if isinstance(values, Iterable) and not isinstance(values, str):
        return tuple(_as_int(op, what, v) for v in values)
    return (_as_int(op, what, values),)


# MLIR keeps dimensions (and kgc the element counts) in 64-bit integers.
_MAX_ELEMENTS = 2**63 - 1


def _static_shape(op: str, what: str, shape: object) -> tuple[int, ...]:
    if isinstance(shape, Iterable) and not isinstance(shape, str):
        shape = tuple(shape)
        named = [d for d in shape if isinstance(d, str)]
        if named:
            raise GraphError(f"{op}: {what} {shape} names the dynamic extent {named[0]!r}, "
                             f"but the {what} of {op} is static (inputs, and what ops make "
                             "of them, carry a dynamic extent)")
    dims = _int_tuple(op, what, shape)
    if any(d < 0 for d in dims):
        raise GraphError(f"{op}: {what} {dims} has a negative dimension")
    for index, d in enumerate(dims):
        if d > _MAX_ELEMENTS:
            raise GraphError(f"{op}: {what} {dims} has dimension {index} of {d}, more than "
                             f"2**63 - 1")
    if math.prod(dims) > _MAX_ELEMENTS:
        raise GraphError(f"{op}: {what} {dims} has {math.prod(dims)} elements, more than "
                         f"2**63 - 1")
    return dims


def _infer_minus_one(numbers: tuple[int, ...], elements: int, given: tuple, x: "Tensor",
                     unit: str = "") -> tuple[int, ...]:
    """A reshape's static extents `numbers` with their one -1 (if any) made
    what holds `elements` (per unit of the dynamic extent where `unit` says
    so); `given` is the shape as written, for the messages."""
    if numbers.count(-1) > 1:
        raise GraphError(f"reshape: only one -1 is allowed in shape {given} for x "
                         f"{_describe(x)}")
    if any(d < -1 for d in numbers):
        raise GraphError(f"reshape: shape {given} has a negative dimension other than -1")
    if -1 not in numbers:
        return numbers
    known = math.prod(d for d in numbers if d != -1)
    if known == 0 or elements % known:
        raise GraphError(f"reshape: cannot infer the -1 in {given}: x {_describe(x)} holds "
                         f"{elements} elements{unit}")
    return tuple(elements // known if d == -1 else d for d in numbers)


def _is_scalar(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _normalize_dim(op: str, what: str, dim: object, x: Tensor, role: str = "x") -> int:
    """`dim` in [0, rank), from a dimension in [-rank, rank) as torch takes."""
    index = _as_int(op, what, dim)
    if not -x.ndim <= index < x.ndim:
        raise GraphError(f"{op}: {what} {index} is out of range for {role} "
                         f"{_describe(x)} (rank {x.ndim})")
    return index % x.ndim


def _require_float(op: str, role: str, tensor: Tensor) -> None:
    if tensor.dtype not in _FLOAT_DTYPES:
        raise GraphError(f"{op}: {role} {_describe(tensor)} must be f32, f16 or bf16; "
                         "8-bit floats are only for matmul, cast and the view ops")


def _broadcast_shapes(lhs: tuple[int, ...], rhs: tuple[int, ...]) -> tuple[int, ...]:
    """The numpy broadcast of two shapes when they are compatible (the
    result type to build the op with; whether they are compatible is the
    verifier's to say)."""
    rank = max(len(lhs), len(rhs))
    padded_lhs = (1,) * (rank - len(lhs)) + lhs
    padded_rhs = (1,) * (rank - len(rhs)) + rhs
    return tuple(r if l == 1 else l for l, r in zip(padded_lhs, padded_rhs))


# Whole numbers a constant of each integer dtype holds: its range, within
# the 2^53 that the constant's f64 value holds exactly.
_INTEGER_RANGES = {"i1": (0, 1), "i32": (-(2**31), 2**31 - 1), "i64": (-(2**53), 2**53)}


def _broadcastable(shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether numpy broadcasts the shapes together."""
    rank = max(len(s) for s in shapes)
    for i in range(1, rank + 1):
        sizes = {s[-i] for s in shapes if len(s) >= i} - {1}
        if len(sizes) > 1:
            return False
    return True


def _overflows(value: float, dtype: str) -> bool:
    """Whether a constant of `dtype` cannot hold `value` (infinities and NaN
    are held as themselves by floats; integers hold only whole numbers of
    their range)."""
    if dtype in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[dtype]
        return not (math.isfinite(value) and value == int(value) and low <= value <= high)
    return math.isfinite(value) and abs(value) >= _OVERFLOW_THRESHOLDS[dtype]


def _require(op: str, role: str, tensor: "Tensor", operand_types: str) -> None:
    """`tensor` has a dtype of the class `operand_types` of the op table."""
    if operand_types == "any":
        return
    dtypes, description = _OPERAND_DTYPES[operand_types]
    if tensor.dtype not in dtypes:
        raise GraphError(f"{op}: {role} {_describe(tensor)} must be {description}")


def _as_float(op: str, what: str, value: object) -> float:
    if not _is_scalar(value):
        raise GraphError(f"{op}: {what} must be a Python number, got {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise GraphError(f"{op}: {what} {value!r} is too large for a float") from None


# --------------------------------------------------------------------------
# The graph
# --------------------------------------------------------------------------


class Graph:
    """A kernel graph: named inputs, ops on them, and ordered outputs.

    It becomes one `func.func @<name>` whose arguments are the inputs in the
    order they were declared and whose results are the outputs. Every op
    method checks its operands eagerly and raises `GraphError`; ops are
    emitted in the order they were called, which is a valid order because
    an operand always exists before its user.
    """

    def __init__(self, name: str):
        self.name = _check_name("Graph", "name", name)
        self._inputs: list[Tensor] = []
        self._ops: list[_Op] = []
        self._outputs: list[Tensor] = []
        self._defined_at = _caller_position()
        self._output_at: _SourcePosition = None
        self._origin: str | None = None
        self._origins: dict[Tensor, str] = {}
        self._dynamic: str | None = None  # the name of the graph's dynamic extent

    def __repr__(self) -> str:
        return (f"Graph({self.name!r}: {len(self._inputs)} inputs, "
                f"{len(self._ops)} ops, {len(self._outputs)} outputs)")

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(self._inputs)

    @property
    def dynamic_extent(self) -> str | None:
        """The name of the graph's dynamic extent, None while no input has one."""
        return self._dynamic

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(self._outputs)

    # -- inputs and outputs -------------------------------------------------

    def input(self, name: str, shape: Sequence[int | str], dtype: object) -> Tensor:
        """Declares the next function argument. Each entry of `shape` is an
        extent or the name of the graph's dynamic extent (one name per
        graph: every input that names it has that size at each call)."""
        _check_name("input", "name", name)
        if any(existing.name == name for existing in self._inputs):
            raise GraphError(f"input: the graph already has an input named {name!r}")
        tensor = Tensor(self, self._shape_with_dynamic("input", "shape", shape),
                        _dtype_name("input", dtype), name, _caller_position())
        # Only an input that was declared sets the graph's dynamic extent.
        self._dynamic = self._dynamic or next(
            (d for d in tensor.shape if isinstance(d, str)), None)
        self._inputs.append(tensor)
        return tensor

    def output(self, *tensors: Tensor) -> None:
        """Appends results of the function, in order."""
        if not tensors:
            raise GraphError("output: needs at least one Tensor")
        for index, tensor in enumerate(tensors):
            self._tensor("output", f"output #{len(self._outputs) + index}", tensor)
        self._outputs.extend(tensors)
        self._output_at = _caller_position()

    @contextlib.contextmanager
    def origin(self, name: str):
        """Ops recorded inside the block carry `name` in their location (a
        NameLoc around the Python line), so that the kernels kg-fuse makes
        can be traced back to what the ops were made from: a front end
        names the source op (`with g.origin("aten.mm:mm_1"): ...`)."""
        if not isinstance(name, str):
            raise GraphError(f"origin: name must be a string, got {name!r}")
        outer, self._origin = self._origin, name
        try:
            yield
        finally:
            self._origin = outer

    # -- emission -----------------------------------------------------------

    def build(self, context: ir.Context | None = None) -> ir.Operation:
        """Emits the graph as a verified `builtin.module` op in `context`
        (a new one when None). The op keeps its context alive."""
        if not self._outputs:
            raise GraphError(f"build: graph {self.name!r} has no outputs; call output() first")
        if context is None:
            context = ir.Context()
        elif not isinstance(context, ir.Context):
            raise GraphError(f"build: context must be an mlir.ir.Context (or None for a new "
                             f"one), got {context!r} ({type(context).__name__})")
        load_dialect(context)  # for contexts created before kgc was imported
        with context, _mlir_location(self._defined_at):
            module = ir.Module.create()
            function_type = ir.FunctionType.get(
                [_tensor_type(t) for t in self._inputs],
                [_tensor_type(t) for t in self._outputs])
            with ir.InsertionPoint(module.body):
                function = func.FuncOp(self.name, function_type)
            entry = function.add_entry_block(
                arg_locs=[_mlir_location(t._defined_at) for t in self._inputs])
            values: dict[Tensor, ir.Value] = dict(zip(self._inputs, entry.arguments))
            with ir.InsertionPoint(entry):
                for op in self._ops:
                    with _mlir_location(op.result._defined_at, self._origins.get(op.result)):
                        values[op.result] = op.emit([values[t] for t in op.operands],
                                                    _tensor_type(op.result))
                func.ReturnOp([values[t] for t in self._outputs],
                              loc=_mlir_location(self._output_at))
        try:
            module.operation.verify()
        except ir.MLIRError as error:
            raise from_mlir_error(error) from None
        return module.operation

    def to_mlir(self) -> str:
        """The module as text in the custom assembly form, which kgc-opt
        parses."""
        return str(self.build())

    # -- elementwise ops ----------------------------------------------------
    #
    # One method per elementwise op of the dialect, made from the op table
    # after the class (`exp(x)`, `add(lhs, rhs)`); ops with attributes or a
    # result type of their own are written here.

    def gelu(self, x: Tensor, approximate: str = "none") -> Tensor:
        """x * Phi(x); `approximate="tanh"` uses torch's tanh formula."""
        x = self._tensor("gelu", "x", x)
        _require_float("gelu", "x", x)
        if approximate not in ("none", "tanh"):
            raise GraphError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r} "
                             f"for x {_describe(x)}")
        # The default is left out so that the op prints as written in the docs.
        attribute = kg.GeluApproximation.tanh if approximate == "tanh" else None
        return self._record((x,), x.shape, x.dtype,
                            lambda values, _: kg.gelu(values[0], approximate=attribute))

    def clamp(self, x: Tensor, min: Scalar | None = None, max: Scalar | None = None) -> Tensor:
        """Clamps to [min, max]; either bound may be left out, not both."""
        x = self._tensor("clamp", "x", x)
        _require_float("clamp", "x", x)
        if min is None and max is None:
            raise GraphError(f"clamp: needs a min, a max or both for x {_describe(x)}")
        low = None if min is None else _as_float("clamp", "min", min)
        high = None if max is None else _as_float("clamp", "max", max)
        if low is not None and high is not None and low > high:
            raise GraphError(f"clamp: min {low} is greater than max {high} for x {_describe(x)}")
        return self._record((x,), x.shape, x.dtype,
                            lambda values, _: kg.clamp(values[0], min=low, max=high))

    # -- constants and casts -------------------------------------------------

    def constant(self, value: Scalar | bool, shape: Sequence[int], dtype: object) -> Tensor:
        """A tensor with every element equal to `value`; shape () is a
        scalar that binary ops broadcast. Integer dtypes take whole numbers,
        i1 takes True, False, 1 or 0."""
        shape = _static_shape("constant", "shape", shape)
        dtype = _dtype_name("constant", dtype)
        if dtype not in _OPERAND_DTYPES["value"][0]:
            raise GraphError(f"constant: dtype {dtype} of a constant {shape} must be "
                             "f32, f16, bf16, i1, i32 or i64; cast to an 8-bit float afterwards")
        number = _as_float("constant", "value", int(value) if isinstance(value, bool) else value)
        if _overflows(number, dtype):
            raise GraphError(f"constant: value {value!r} overflows {dtype} (constant of "
                             f"shape {shape})")
        return self._constant(number, shape, dtype)

    def cast(self, x: Tensor, dtype: object) -> Tensor:
        """Converts the elements to `dtype` as torch's Tensor.to does:
        floats round to nearest even, floats to integers truncate toward
        zero, bools are 0 and 1, and a value becomes True when not zero."""
        x = self._tensor("cast", "x", x)
        dtype = _dtype_name("cast", dtype)
        return self._record((x,), x.shape, dtype,
                            lambda values, out: kg.cast(out, values[0]))

    # -- comparisons, selects, positions --------------------------------------

    def cmp(self, predicate: str, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """`lhs <predicate> rhs` elementwise ("eq", "ne", "lt", "le", "gt",
        "ge"), broadcasting, as an i1 (bool) tensor; a Python number on one
        side becomes a constant of the other side's dtype."""
        if predicate not in ("eq", "ne", "lt", "le", "gt", "ge"):
            raise GraphError(f"cmp: predicate must be one of eq, ne, lt, le, gt, ge, got "
                             f"{predicate!r}")
        attribute = kg.ComparePredicate[predicate]
        return self._broadcasting(ELEMENTWISE["cmp"], "cmp", {"lhs": lhs, "rhs": rhs},
                                  result_dtype=_BOOL_DTYPE,
                                  emit=lambda values, out: kg.cmp(out, *values, attribute))

    def eq(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs == rhs elementwise, as a bool tensor (torch.eq)."""
        return self.cmp("eq", lhs, rhs)

    def ne(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs != rhs elementwise, as a bool tensor (torch.ne)."""
        return self.cmp("ne", lhs, rhs)

    def lt(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs < rhs elementwise, as a bool tensor (torch.lt)."""
        return self.cmp("lt", lhs, rhs)

    def le(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs <= rhs elementwise, as a bool tensor (torch.le)."""
        return self.cmp("le", lhs, rhs)

    def gt(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs > rhs elementwise, as a bool tensor (torch.gt)."""
        return self.cmp("gt", lhs, rhs)

    def ge(self, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """lhs >= rhs elementwise, as a bool tensor (torch.ge)."""
        return self.cmp("ge", lhs, rhs)

    def select(self, cond: Tensor, true_value: Tensor | Scalar,
               false_value: Tensor | Scalar) -> Tensor:
        """true_value where cond holds, false_value elsewhere, broadcasting
        all three (torch.where); a Python number on one side becomes a
        constant of the other side's dtype (float("-inf") for a causal
        mask)."""
        cond = self._tensor("select", "cond", cond)
        _require("select", "cond", cond, "bool")
        return self._broadcasting(ELEMENTWISE["select"], "select",
                                  {"cond": cond, "true_value": true_value,
                                   "false_value": false_value},
                                  result_dtype=None,
                                  emit=lambda values, out: kg.select(out, *values))

    def where(self, cond: Tensor, true_value: Tensor | Scalar,
              false_value: Tensor | Scalar) -> Tensor:
        """torch.where(cond, true_value, false_value): `select`."""
        return self.select(cond, true_value, false_value)

    def masked_fill(self, x: Tensor, mask: Tensor, value: Scalar) -> Tensor:
        """x with `value` where mask holds (torch.Tensor.masked_fill)."""
        return self.select(mask, value, x)

    def iota(self, shape: Sequence[int], dim: int, dtype: object = "i64",
             start: int = 0) -> Tensor:
        """A tensor of `shape` whose elements are start + their index along
        `dim` (negative dims count from the end)."""
        shape = _static_shape("iota", "shape", shape)
        dtype = _dtype_name("iota", dtype)
        if dtype not in _OPERAND_DTYPES["numeric"][0]:
            raise GraphError(f"iota: dtype {dtype} must be f32, f16, bf16, i32 or i64 "
                             f"(iota of shape {shape})")
        if not shape:
            raise GraphError("iota: shape () has no dimension to count along")
        index = _as_int("iota", "dim", dim)
        if not -len(shape) <= index < len(shape):
            raise GraphError(f"iota: dim {index} is out of range for shape {shape} "
                             f"(rank {len(shape)})")
        index %= len(shape)
        first = _as_int("iota", "start", start)
        return self._record((), shape, dtype, lambda _, out: kg.iota(out, index, start=first))

    def arange(self, start: int, end: int | None = None, dtype: object = "i64") -> Tensor:
        """torch.arange(start, end) with a step of 1, or arange(end) from 0:
        a 1-D iota."""
        if end is None:
            start, end = 0, start
        first, last = _as_int("arange", "start", start), _as_int("arange", "end", end)
        if last < first:
            raise GraphError(f"arange: end {last} is below start {first}")
        return self.iota((last - first,), 0, dtype=dtype, start=first)

    # -- matmul -------------------------------------------------------------

    def matmul(self, a: Tensor, b: Tensor, precision: str | None = None,
               out_dtype: object = None) -> Tensor:
        """`a @ b` as torch.matmul does for ranks >= 2, batch dims broadcast.

        The result dtype defaults to the operands' (f32 for 8-bit operands,
        which have no 8-bit result). `precision`: "ieee" or "tf32" for f32
        operands; "fast_accum" for 8-bit float operands, whose products the
        tensor cores then sum over the whole k loop themselves instead of
        adding each k step's sum into f32 (torch._scaled_mm's
        use_fast_accum=True: faster, less exact as K grows).
        """
        a = self._tensor("matmul", "a", a)
        b = self._tensor("matmul", "b", b)
        if precision not in (None, "ieee", "tf32", "fast_accum"):
            raise GraphError(f"matmul: precision must be None, 'ieee', 'tf32' or 'fast_accum', "
                             f"got {precision!r} for a {_describe(a)} and b {_describe(b)}")
        for role, operand in (("a", a), ("b", b)):
            if operand.dtype not in _FLOAT_DTYPES + _FLOAT8_DTYPES:
                raise GraphError(f"matmul: {role} {_describe(operand)} must be a float (f32, f16, "
                                 "bf16, f8e4m3 or f8e5m2); cast integer and i1 operands first")
        both_float8 = a.dtype in _FLOAT8_DTYPES and b.dtype in _FLOAT8_DTYPES
        if out_dtype is None:
            result_dtype = "f32" if both_float8 else a.dtype
        else:
            result_dtype = _dtype_name("matmul", out_dtype)
            if result_dtype not in _FLOAT_DTYPES:
                raise GraphError(f"matmul: out_dtype must be f32, f16 or bf16, got "
                                 f"{result_dtype} for a {_describe(a)} and b {_describe(b)}")
        # The result shape when the operands are valid (ranks, K and batch
        # dimensions are the verifier's to check).
        batch = _broadcast_shapes(a.shape[:-2], b.shape[:-2])
        rows, columns = a.shape[-2:-1], b.shape[-1:]
        attribute = None if precision is None else kg.Precision[precision]
        return self._record((a, b), batch + rows + columns, result_dtype,
                            lambda values, out: kg.matmul(out, *values, precision=attribute))

    # -- reductions and normalizations ---------------------------------------

    def sum(self, x: Tensor, dims: int | Sequence[int], keepdim: bool = False) -> Tensor:
        """Sums over `dims`, accumulating in f32."""
        return self._reduce("sum", x, dims, keepdim)

    def max(self, x: Tensor, dims: int | Sequence[int], keepdim: bool = False) -> Tensor:
        return self._reduce("max", x, dims, keepdim)

    def min(self, x: Tensor, dims: int | Sequence[int], keepdim: bool = False) -> Tensor:
        return self._reduce("min", x, dims, keepdim)

    def mean(self, x: Tensor, dims: int | Sequence[int], keepdim: bool = False) -> Tensor:
        """Means over `dims`, accumulating in f32."""
        return self._reduce("mean", x, dims, keepdim)

    def softmax(self, x: Tensor, dim: int = -1) -> Tensor:
        x = self._tensor("softmax", "x", x)
        _require_float("softmax", "x", x)
        index = _normalize_dim("softmax", "dim", dim, x)
        return self._record((x,), x.shape, x.dtype,
                            lambda values, _: kg.softmax(values[0], index))

    def rms_norm(self, x: Tensor, weight: Tensor | None = None, eps: float = 1e-6,
                 normalized_shape: int | Sequence[int] | None = None) -> Tensor:
        """x / sqrt(mean(x^2) + eps) * weight over the trailing dims, as
        torch.nn.functional.rms_norm. `normalized_shape` defaults to the
        weight's shape, else the last dimension of x."""
        x, affine, shape, eps = self._norm_operands(
            "rms_norm", x, {"weight": weight}, eps, normalized_shape)
        return self._record(
            (x, *affine.values()), x.shape, x.dtype,
            lambda values, out: kg.rms_norm(out, values[0], shape, eps,
                                            weight=values[1] if affine else None))

    def layer_norm(self, x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                   eps: float = 1e-5,
                   normalized_shape: int | Sequence[int] | None = None) -> Tensor:
        """(x - mean) / sqrt(var + eps) * weight + bias over the trailing dims,
        as torch.nn.functional.layer_norm. `normalized_shape` defaults to the
        shape of the weight or the bias, else the last dimension of x."""
        x, affine, shape, eps = self._norm_operands(
            "layer_norm", x, {"weight": weight, "bias": bias}, eps, normalized_shape)
        names = tuple(affine)

        def emit(values: Sequence[ir.Value], out: ir.RankedTensorType) -> ir.Value:
            given = dict(zip(names, values[1:]))
            return kg.layer_norm(out, values[0], shape, eps,
                                 weight=given.get("weight"), bias=given.get("bias"))

        return self._record((x, *affine.values()), x.shape, x.dtype, emit)

    # -- views --------------------------------------------------------------

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """Result dim i is dim perm[i] of x (torch.permute); negative
        entries count from the end."""
        x = self._tensor("transpose", "x", x)
        given = _int_tuple("transpose", "permutation", perm)
        if len(given) != x.ndim:
            raise GraphError(f"transpose: permutation {given} must have one entry per "
                             f"dimension of x {_describe(x)}")
        permutation = tuple(p % x.ndim if -x.ndim <= p < x.ndim else p for p in given)
        if sorted(permutation) != list(range(x.ndim)):
            raise GraphError(f"transpose: permutation {given} is not a permutation of "
                             f"[0, {x.ndim}) for x {_describe(x)}")
        shape = tuple(x.shape[p] for p in permutation)
        return self._record((x,), shape, x.dtype,
                            lambda values, out: kg.transpose(out, values[0], permutation))

    def t(self, x: Tensor) -> Tensor:
        """The transpose of a 2-D tensor."""
        x = self._tensor("t", "x", x)
        if x.ndim != 2:
            raise GraphError(f"t: x {_describe(x)} must be 2-D; use transpose for other ranks")
        return self.transpose(x, (1, 0))

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """The elements of x in row-major order, in `shape`; one entry may
        be -1 and is inferred."""
        x = self._tensor("reshape", "x", x)
        if self._dynamic in x.shape:
            return self._reshape_dynamic(x, shape)
        given = _int_tuple("reshape", "shape", shape)
        given = _infer_minus_one(given, math.prod(x.shape), given, x)
        return self._record((x,), given, x.dtype,
                            lambda values, out: kg.reshape(out, values[0]))

    def broadcast_to(self, x: Tensor, shape: Sequence[int | str]) -> Tensor:
        """Stretches x to `shape` with numpy's rules (an entry may name the
        graph's dynamic extent where x has it or 1)."""
        x = self._tensor("broadcast_to", "x", x)
        target = self._shape_with_dynamic("broadcast_to", "shape", shape)
        return self._record((x,), target, x.dtype,
                            lambda values, out: kg.broadcast_to(out, values[0]))

    def concat(self, xs: Sequence[Tensor], dim: int) -> Tensor:
        """Joins tensors along `dim`; all other dims and the dtype must
        match."""
        if isinstance(xs, Tensor) or not isinstance(xs, Iterable):
            raise GraphError(f"concat: xs must be a sequence of Tensors, got {xs!r}")
        inputs = tuple(self._tensor("concat", f"input #{i}", x) for i, x in enumerate(xs))
        if not inputs:
            raise GraphError("concat: needs at least one input")
        first = inputs[0]
        index = _normalize_dim("concat", "dim", dim, first, role="input #0")
        # The result shape when the inputs agree (that they do is the
        # verifier's to check).
        for position, t in enumerate(inputs):
            if t.ndim > index and isinstance(t.shape[index], str):
                raise GraphError(f"concat: input #{position} {_describe(t)} has the dynamic "
                                 f"extent {t.shape[index]!r} in the concat dimension {index}; "
                                 "concat joins static extents only")
        shape = list(first.shape)
        shape[index] = sum(t.shape[index] for t in inputs if t.ndim > index)
        return self._record(inputs, tuple(shape), first.dtype,
                            lambda values, out: kg.concat(out, values, index))

    def slice(self, x: Tensor, offsets: Sequence[int], sizes: Sequence[int],
              strides: Sequence[int] | None = None) -> Tensor:
        """`sizes[d]` elements of each dim d, from `offsets[d]` every
        `strides[d]` (1 by default), as x[o : o + n * s : s]."""
        x = self._tensor("slice", "x", x)
        starts = _int_tuple("slice", "offsets", offsets)
        counts = tuple(c if isinstance(c, str) else _as_int("slice", "sizes", c)
                       for c in (sizes if isinstance(sizes, Iterable) and not isinstance(sizes, str)
                                 else (sizes,)))
        steps = (1,) * x.ndim if strides is None else _int_tuple("slice", "strides", strides)
        if not len(starts) == len(counts) == len(steps) == x.ndim:
            raise GraphError(f"slice: offsets {starts}, sizes {counts} and strides {steps} "
                             f"must have one entry per dimension of x {_describe(x)}")
        for d in range(x.ndim):
            if isinstance(x.shape[d], str):
                if (starts[d], counts[d], steps[d]) != (0, x.shape[d], 1):
                    raise GraphError(f"slice: dimension {d} of x {_describe(x)} is the dynamic "
                                     f"extent {x.shape[d]!r}; it is taken whole (offset 0, "
                                     f"size {x.shape[d]!r}, stride 1)")
                continue
            if isinstance(counts[d], str):
                raise GraphError(f"slice: size {counts[d]!r} of dimension {d} names a dynamic "
                                 f"extent where x {_describe(x)} has a static one")
            if starts[d] < 0:
                raise GraphError(f"slice: offset {starts[d]} of dimension {d} is negative "
                                 f"for x {_describe(x)}")
            if steps[d] <= 0:
                raise GraphError(f"slice: stride {steps[d]} of dimension {d} must be positive "
                                 f"for x {_describe(x)}")
            if counts[d] < 0:
                raise GraphError(f"slice: size {counts[d]} of dimension {d} is negative "
                                 f"for x {_describe(x)}")
            last = starts[d] + (counts[d] - 1) * steps[d]
            if counts[d] > 0 and last >= x.shape[d]:
                raise GraphError(f"slice: dimension {d} reads index {last}, past the end of "
                                 f"x {_describe(x)}")
        return self._record((x,), counts, x.dtype,
                            lambda values, out: kg.slice(out, values[0], starts, steps))

    # -- indexed ops ------------------------------------------------------------

    def gather(self, table: Tensor, indices: Tensor, dim: int = 0) -> Tensor:
        """The slices of `table` along `dim` that the 1-D integer `indices`
        name, in their order: torch.index_select(table, dim, indices) (an
        embedding lookup takes dim 0)."""
        table = self._tensor("gather", "table", table)
        indices = self._indices("gather", indices)
        index = _normalize_dim("gather", "dim", dim, table, role="table")
        shape = list(table.shape)
        shape[index] = indices.shape[0]
        return self._record((table, indices), tuple(shape), table.dtype,
                            lambda values, out: kg.gather(out, values[0], values[1], index))

    def scatter(self, dest: Tensor, indices: Tensor, source: Tensor, dim: int = 0,
                mode: str = "assign") -> Tensor:
        """A copy of `dest` with slice i of `source` along `dim` written
        (mode "assign": dest.index_copy(dim, indices, source)) or added
        ("add": dest.index_add(dim, indices, source)) at indices[i]."""
        dest = self._tensor("scatter", "dest", dest)
        indices = self._indices("scatter", indices)
        source = self._tensor("scatter", "source", source)
        index = _normalize_dim("scatter", "dim", dim, dest, role="dest")
        if mode not in ("assign", "add"):
            raise GraphError(f"scatter: mode {mode!r} must be 'assign' or 'add'")
        attribute = kg.ScatterMode[mode]
        return self._record((dest, indices, source), dest.shape, dest.dtype,
                            lambda values, out: kg.scatter(out, attribute, values[0], values[1],
                                                           values[2], index))

    def _indices(self, op: str, indices: object) -> Tensor:
        """`indices` if it is a 1-D i32 or i64 Tensor of this graph."""
        indices = self._tensor(op, "indices", indices)
        if indices.dtype not in _INT_DTYPES or indices.ndim != 1:
            raise GraphError(f"{op}: indices {_describe(indices)} must be a 1-D tensor of i32 "
                             "or i64 (reshape them to one dimension)")
        return indices

    # -- Mirage's names for the same graph ------------------------------------

    def new_input(self, dims: Sequence[int], dtype: object = "f16", *,
                  strides: Sequence[int] | None = None) -> Tensor:
        """`input` with a generated name (`input0`, `input1`...). `strides`
        (Mirage's keyword, in elements) may only describe the dense
        row-major layout every kgc input has: a kernel reads its arguments
        that way, so another layout would be read wrongly."""
        shape = _static_shape("new_input", "dims", dims)
        if strides is not None:
            given = _int_tuple("new_input", "strides", strides)
            dense = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
            # A dimension of one element is never stepped over: any stride
            # there describes the same memory (torch calls it contiguous too).
            if len(given) != len(shape) or any(
                    g != r for g, r, n in zip(given, dense, shape) if n != 1):
                raise GraphError(
                    f"new_input: strides {given} are not the row-major strides {dense} of dims "
                    f"{shape}; kgc's inputs are dense and row-major (for a transposed operand, "
                    "declare it in its stored shape and g.transpose it in the graph)")
        taken = {t.name for t in self._inputs}
        number = len(self._inputs)
        while f"input{number}" in taken:
            number += 1
        return self.input(f"input{number}", dims, dtype)

    def mark_output(self, tensor: Tensor) -> None:
        """`output` of one tensor."""
        self.output(tensor)

    def reduction(self, x: Tensor, dim: int) -> Tensor:
        """Sums over `dim`, keeping it as a dimension of size 1."""
        return self.sum(x, dim, keepdim=True)

    # -- shared by the op methods --------------------------------------------

    def _shape_with_dynamic(self, op: str, what: str, shape: object) -> tuple[int | str, ...]:
        """`shape` with each entry an extent or the name of the graph's
        dynamic extent (an input may name it first; `input` records it)."""
        if not isinstance(shape, Iterable) or isinstance(shape, str):
            return _static_shape(op, what, shape)
        entries = tuple(shape)
        name = self._dynamic
        for entry in entries:
            if isinstance(entry, str):
                _check_name(op, f"dynamic extent in {what}", entry)
                if name is None and op == "input":
                    name = entry
                elif entry != name:
                    have = (f"its dynamic extent is {name!r}" if name
                            else "none of its inputs has a dynamic extent")
                    raise GraphError(f"{op}: {what} {entries} names {entry!r}, but a graph has "
                                     f"one dynamic extent and {have}")
        static = _static_shape(op, what, tuple(1 if isinstance(e, str) else e for e in entries))
        return tuple(e if isinstance(e, str) else d for e, d in zip(entries, static))

    def _reshape_dynamic(self, x: Tensor, shape: object) -> Tensor:
        """reshape of a tensor that has the dynamic extent: the new shape
        names it once, and its static extents hold as many elements as
        those of x (so that both sides agree at every size); -1 may stand
        for one static extent."""
        name = self._dynamic
        if isinstance(shape, Iterable) and not isinstance(shape, str):
            given = tuple(shape)
        else:
            given = (shape,)
        if sum(1 for d in given if d == name) != 1 or sum(1 for d in x.shape if d == name) != 1:
            raise GraphError(f"reshape: x {_describe(x)} and shape {given} must each name the "
                             f"dynamic extent {name!r} once, to hold the same number of "
                             "elements at every size")
        numbers = _int_tuple("reshape", "shape", tuple(d for d in given if d != name))
        numbers = _infer_minus_one(numbers, math.prod(d for d in x.shape if d != name), given, x,
                                   f" per unit of {name!r}")
        resolved = iter(numbers)
        target = tuple(name if d == name else next(resolved) for d in given)
        return self._record((x,), target, x.dtype,
                            lambda values, out: kg.reshape(out, values[0]))

    def _tensor(self, op: str, role: str, value: object) -> Tensor:
        """`value` if it is a Tensor of this graph."""
        if not isinstance(value, Tensor):
            raise GraphError(f"{op}: {role} must be a Tensor of graph {self.name!r}, "
                             f"got {value!r}")
        if value.graph is not self:
            raise GraphError(f"{op}: {role} {_describe(value)} belongs to graph "
                             f"{value.graph.name!r}, not {self.name!r}")
        return value

    def _record(self, operands: tuple[Tensor, ...], shape: tuple[int, ...], dtype: str,
                emit: _Emitter) -> Tensor:
        """Adds an op once it builds and verifies, and returns its result."""
        result = Tensor(self, shape, dtype, None, _caller_position())
        _verify(operands, result, emit)
        self._ops.append(_Op(operands, result, emit))
        if self._origin is not None:
            self._origins[result] = self._origin
        return result

    def _constant(self, value: float, shape: tuple[int, ...], dtype: str) -> Tensor:
        return self._record((), shape, dtype, lambda _, out: kg.constant(out, value))

    def _unary(self, row: ElementwiseOp, x: Tensor) -> Tensor:
        op = row.name
        x = self._tensor(op, "x", x)
        _require(op, "x", x, row.operand_types)
        return self._record((x,), x.shape, x.dtype,
                            lambda values, out: row.build(out, values))

    def _binary(self, row: ElementwiseOp, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        """A broadcasting binary op; a Python number on one side becomes a
        rank-0 constant of the other side's dtype."""
        return self._broadcasting(row, row.name, {"lhs": lhs, "rhs": rhs}, result_dtype=None,
                                  emit=lambda values, out: row.build(out, values))

    def _broadcasting(self, row: ElementwiseOp, op: str, given: dict[str, object],
                      result_dtype: str | None, emit: _Emitter) -> Tensor:
        """An op whose operands broadcast together (binary ops, cmp,
        select); a Python number among the values becomes a rank-0 constant
        of the dtype of the values that are tensors (the last two operands;
        a select's cond must be a tensor). The result has `result_dtype`, or
        the values' dtype when None. Constants are recorded only once
        nothing else can fail, so a failed call adds no op."""
        values = list(given)[-2:]
        if all(_is_scalar(given[role]) for role in values):
            raise GraphError(f"{op}: needs at least one Tensor operand among "
                             f"{' and '.join(values)}, got "
                             f"{' and '.join(repr(given[r]) for r in values)}")
        operands: dict[str, Tensor | float] = {}
        for role, value in given.items():
            if role in values and _is_scalar(value):
                operands[role] = _as_float(op, f"scalar {role}", value)
            else:
                operands[role] = self._tensor(op, role, value)
                if role in values:
                    _require(op, role, operands[role], row.operand_types)
        for role in values:
            if isinstance(operands[role], float):
                other = next(r for r in values if r != role)
                tensor = operands[other]
                if _overflows(operands[role], tensor.dtype):
                    kind = ("is not a whole number in the range of"
                            if tensor.dtype in _INTEGER_RANGES else "overflows")
                    raise GraphError(f"{op}: scalar {role} {operands[role]!r} {kind} "
                                     f"{tensor.dtype}, the dtype of {other} {_describe(tensor)}")
        tensors = [operands[r] for r in values if isinstance(operands[r], Tensor)]
        dtype = tensors[0].dtype
        shapes = [t.shape for t in operands.values() if isinstance(t, Tensor)]
        if len(tensors) < len(values) and not _broadcastable(shapes):
            # Checked here, before a constant is recorded for the number.
            raise GraphError(f"{op}: operands are not broadcast-compatible: " + ", ".join(
                f"{role} {_describe(t)}" for role, t in operands.items() if isinstance(t, Tensor)))
        if len(tensors) < len(values):
            # A constant of the tensors' dtype broadcasts to any shape: this
            # op verifies, so the constant may be recorded first.
            for role in values:
                if isinstance(operands[role], float):
                    operands[role] = self._constant(operands[role], (), dtype)
        ordered = tuple(operands[role] for role in given)
        shape: tuple[int, ...] = ()
        for tensor in ordered:
            shape = _broadcast_shapes(shape, tensor.shape)
        return self._record(ordered, shape, result_dtype or dtype, emit)

    def _reduce(self, kind: str, x: Tensor, dims: int | Sequence[int], keepdim: bool) -> Tensor:
        x = self._tensor(kind, "x", x)
        _require_float(kind, "x", x)
        given = _int_tuple(kind, "dims", dims)
        if not given:
            raise GraphError(f"{kind}: needs at least one dimension to reduce x {_describe(x)}")
        reduced: list[int] = []
        for dim in given:
            index = _normalize_dim(kind, "dimension", dim, x)
            if index in reduced:
                raise GraphError(f"{kind}: dimension {dim} appears twice in dims {given} "
                                 f"for x {_describe(x)}")
            reduced.append(index)
        shape = tuple(1 if d in reduced else size
                      for d, size in enumerate(x.shape) if keepdim or d not in reduced)
        attribute = kg.ReduceKind[kind]
        return self._record((x,), shape, x.dtype,
                            lambda values, out: kg.reduce(out, attribute, values[0], reduced,
                                                          keepdim=bool(keepdim)))

    def _norm_operands(self, op: str, x: Tensor, affine: dict[str, Tensor | None],
                       eps: float, normalized_shape: int | Sequence[int] | None):
        """Checks a normalization: `normalized_shape` names the trailing
        dims of x, and each given affine tensor (weight, bias) has that shape
        and x's dtype. Returns x, the given affine tensors by name, the
        normalized shape and eps."""
        x = self._tensor(op, "x", x)
        _require_float(op, "x", x)
        given = {name: self._tensor(op, name, t) for name, t in affine.items() if t is not None}
        if normalized_shape is not None:
            shape, origin = _static_shape(op, "normalized_shape", normalized_shape), ""
        elif given:
            name, first = next(iter(given.items()))
            shape, origin = first.shape, f" (the shape of {name})"
        else:
            shape, origin = x.shape[-1:], " (the last dimension of x)"
        if not shape or len(shape) > x.ndim or x.shape[x.ndim - len(shape):] != shape:
            raise GraphError(f"{op}: normalized_shape {shape}{origin} must equal the trailing "
                             f"dimensions of x {_describe(x)}")
        for name, tensor in given.items():
            if tensor.shape != shape:
                raise GraphError(f"{op}: {name} {_describe(tensor)} must have shape "
                                 f"normalized_shape {shape} of x {_describe(x)}")
            if tensor.dtype != x.dtype:
                raise GraphError(f"{op}: {name} {_describe(tensor)} must have the element type "
                                 f"of x {_describe(x)}")
        epsilon = _as_float(op, "eps", eps)
        if not epsilon > 0.0:
            raise GraphError(f"{op}: eps must be positive, got {epsilon} for x {_describe(x)}")
        return x, given, shape, epsilon


def _tensor_type(tensor: Tensor) -> ir.RankedTensorType:
    """The tensor's type, its dynamic extent (a name in the shape) as `?`."""
    dims = [ir.ShapedType.get_dynamic_size() if isinstance(d, str) else d for d in tensor.shape]
    return ir.RankedTensorType.get(dims, _MLIR_ELEMENT_TYPES[tensor.dtype]())


# --------------------------------------------------------------------------
# Checking an op by building it
# --------------------------------------------------------------------------

# `'tensor<4x8xf32>'` or `'tensor<?x8xf32>'`, as diagnostics print a type.
_TENSOR_TYPE_TEXT = re.compile(r"'tensor<((?:(?:\d+|\?)x)*)(\w+)>'")
# `'kg.add' op `, which starts a verifier's message.
_OP_PREFIX = re.compile(r"^'kg\.(\w+)' op ")


@functools.lru_cache(maxsize=None)
def _scratch_context() -> ir.Context:
    """The context in which ops are built to be verified when recorded."""
    context = ir.Context()
    load_dialect(context)
    return context


def _verify(operands: tuple[Tensor, ...], result: Tensor, emit: _Emitter) -> None:
    """Builds the op on arguments of its operands' types, alone in a scratch
    module, and runs its verifier: the kg verifiers are the one statement of
    the rules, and this applies them at the call that wrote the op. Raises
    GraphError with the verifier's message, `<op>: ...`, its types written
    as the graph API writes them, `(16, 64) f16`."""
    with _scratch_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            function = func.FuncOp("check", ir.FunctionType.get(
                [_tensor_type(t) for t in operands], []))
        entry = function.add_entry_block()
        with ir.InsertionPoint(entry):
            value = emit(list(entry.arguments), _tensor_type(result))
        try:
            value.owner.verify()
        except ir.MLIRError as error:
            message = error.error_diagnostics[0].message if error.error_diagnostics else str(error)
            raise GraphError(_graph_message(message, result.graph.dynamic_extent)) from None


def _graph_message(message: str, dynamic: str | None = None) -> str:
    """A verifier's message in the graph API's words (a `?` extent is the
    graph's dynamic extent `dynamic`)."""
    def python_type(match: re.Match) -> str:
        dims = tuple(dynamic or "?" if d == "?" else int(d)
                     for d in match.group(1).split("x") if d)
        element = match.group(2)
        return f"{dims} {_DTYPE_SPELLINGS.get(element.lower(), element)}"

    op = _OP_PREFIX.match(message)
    if op is not None:
        message = f"{op.group(1)}: {message[op.end():]}"
    return _TENSOR_TYPE_TEXT.sub(python_type, message)


# --------------------------------------------------------------------------
# The elementwise methods, from the op table
# --------------------------------------------------------------------------


def _unary_method(row: ElementwiseOp) -> Callable[[Graph, Tensor], Tensor]:
    def method(self: Graph, x: Tensor) -> Tensor:
        return self._unary(row, x)
    return method


def _binary_method(row: ElementwiseOp) -> Callable[[Graph, Tensor | Scalar, Tensor | Scalar],
                                                   Tensor]:
    def method(self: Graph, lhs: Tensor | Scalar, rhs: Tensor | Scalar) -> Tensor:
        return self._binary(row, lhs, rhs)
    return method


def _add_elementwise_methods() -> None:
    """Gives Graph a method per elementwise op of the dialect that has none
    written by hand; an op with attributes or its own result type needs one
    written in the class."""
    for row in ELEMENTWISE.values():
        if row.name in vars(Graph):
            continue
        if row.attributes or row.converts or row.arity not in (1, 2):
            raise ImportError(f"kgc.Graph has no method for {row.op_name}: an op with "
                              "attributes, its own result type or more than two operands "
                              "needs one written in the class")
        method = (_unary_method if row.arity == 1 else _binary_method)(row)
        method.__name__ = row.name
        method.__qualname__ = f"Graph.{row.name}"
        method.__doc__ = f"kg.{row.name}: {row.summary}."
        setattr(Graph, row.name, method)


_add_elementwise_methods()
