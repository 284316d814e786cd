"""The one table of kg's elementwise ops.

Which ops are elementwise comes from the dialect: an op is elementwise when
its def in dialect/KgOps.td derives from `Kg_ElementwiseOp`. At build time
`dialect/gen_elementwise_ops.py` reads the TableGen records of KgOps.td and
writes `kgc.dialects._kg_elementwise_gen`, which names each such op, its
generated Python class, its tensor operands and its attributes. This module
adds what the dialect cannot say, one `ElementwiseOp` per op:

* `reference`: the op in torch, on operands already widened to the compute
  type (used by `kgc.reference` and anything else that runs ops in torch);
* `lowering`: how `convert-kg-to-ttir` computes it on Triton values;
* `on_scalars`: the op on Python floats, with which `kg-pad-mask` follows
  a known padding value through it (None: the padding is then unknown);
* `promote_half`: whether `kg-decompose` computes it in f32 for f16 and
  bf16 operands;
* `costly`: whether it takes the special-function units or several
  instructions an element (an exponential, a division), which a schedule
  weighs before repeating it in each of its programs;
* `operand_types`: the element types its operands take ("float": f32, f16,
  bf16; "numeric": those and i32, i64; "bool": i1; "value": every type but
  the 8-bit floats; "any"), which the graph API checks before the verifier
  does, to name the rule in its own words.

Integer (i32, i64) and boolean (i1) tensors compute in their own type:
the reference never widens them to a float, kg-decompose never promotes
them, and an "arith" lowering names the op for integer operands beside the
one for floats (`arith.addf` / `arith.addi`).

Importing the module fails when the dialect has an elementwise op that the
table lacks, or the table an op the dialect does not mark, so adding an
elementwise op touches its def in the .td, its row here and, for a custom
lowering, its function in convert-kg-to-ttir; every pass, the reference
interpreter and the graph API read the op list from here.

torch is imported only when a reference runs.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from typing import Callable, Optional

from kgc.dialects import kg
from kgc.dialects._kg_elementwise_gen import ELEMENTWISE_OPS as _DIALECT_OPS

__all__ = ["BY_OP_NAME", "ELEMENTWISE", "ElementwiseOp", "Lowering", "elementwise_op"]


@dataclasses.dataclass(frozen=True)
class Lowering:
    """How convert-kg-to-ttir computes an op on Triton values.

    kind "arith": the arith op `name` on the operands, in their element type;
    "math": the math op `name` on f32 copies, rounded back once;
    "libdevice": the CUDA libdevice function `name` (through
    tt.extern_elementwise) on f32 copies, rounded back once;
    "custom": a function that convert-kg-to-ttir registers for the op.

    `integer` is the arith op for integer and i1 operands of an "arith"
    lowering (empty: the op takes floats only).
    """

    kind: str
    name: str = ""
    integer: str = ""

    def arith_op(self, element_is_integer: bool) -> str:
        """The arith op for operands of an integer or a float type."""
        name = self.integer if element_is_integer else self.name
        if not name:
            raise ValueError(f"{self.name or self.kind} has no lowering for "
                             f"{'integer' if element_is_integer else 'float'} operands")
        return name


def _arith(name: str, integer: str = "") -> Lowering:
    return Lowering("arith", name, integer)


def _math(name: str) -> Lowering:
    return Lowering("math", name)


def _libdevice(symbol: str) -> Lowering:
    return Lowering("libdevice", symbol)


_CUSTOM = Lowering("custom")


@dataclasses.dataclass(frozen=True)
class ElementwiseOp:
    """One elementwise op of the kg dialect and how kgc computes it."""

    name: str  # the mnemonic: "exp"
    op_name: str  # "kg.exp"
    op_class: type  # the generated builder class: kg.ExpOp
    operands: tuple[str, ...]  # names of the tensor operands, from the dialect
    attributes: tuple[str, ...]  # names of the attributes, from the dialect
    summary: str  # the op's summary in the dialect
    reference: Callable  # torch: (*operands, **attributes) -> tensor
    lowering: Lowering
    on_scalars: Optional[Callable[..., float]]
    promote_half: bool
    # The op converts to its result's element type (kg.cast): the reference
    # rounds its result even where every other op keeps it unrounded.
    converts: bool = False
    # Takes the special-function units or several instructions an element
    # (exponentials, logarithms, roots, trigonometry, powers, divisions and
    # the activations made of them): a kernel that repeats it in each of its
    # programs pays for it each time.
    costly: bool = False
    operand_types: str = "float"  # see the module docstring

    @property
    def arity(self) -> int:
        return len(self.operands)

    @functools.cached_property
    def infers_result(self) -> bool:
        """Whether the op infers its result type: its generated builder then
        takes the result type as `results=`, not as the first argument."""
        return "results" in inspect.signature(self.op_class.__init__).parameters

    def build(self, result_type, operands, **attributes):
        """Builds the op at the current insertion point and location and
        returns its result. `attributes` go to the generated builder by name,
        as MLIR attributes or the Python values it converts (None: absent)."""
        if self.infers_result:
            return self.op_class(*operands, results=[result_type], **attributes).result
        return self.op_class(result_type, *operands, **attributes).result


def _torch():
    import torch

    return torch


def _functional():
    return _torch().nn.functional


def _compare(a, b, predicate: str):
    return getattr(_torch(), predicate)(a, b)


_SCALAR_COMPARISONS = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
}


def _cast_reference(x):
    # Floats go through f32 as torch's own .to() chain would; integers and
    # booleans convert directly, exactly.
    return x.to(_torch().float32) if x.is_floating_point() else x


# The behaviour of each op, by mnemonic: (reference, lowering, on_scalars,
# promote_half[, flags...]), where a flag is "converts", "costly" or an
# operand type ("numeric", "bool", "value", "any"; "float" when none is
# given). Rows are checked against the dialect's list below.
_ROWS: dict[str, tuple] = {
    # Unary math.
    "exp": (lambda x: _torch().exp(x), _math("math.exp"), math.exp, True, "costly"),
    "log": (lambda x: _torch().log(x), _math("math.log"), math.log, True, "costly"),
    "sqrt": (lambda x: _torch().sqrt(x), _math("math.sqrt"), math.sqrt, True, "costly"),
    "rsqrt": (lambda x: _torch().rsqrt(x), _math("math.rsqrt"), lambda x: 1 / math.sqrt(x), True,
              "costly"),
    "abs": (lambda x: _torch().abs(x), _CUSTOM, abs, True, "numeric"),
    "tanh": (lambda x: _torch().tanh(x), _libdevice("__nv_tanhf"), math.tanh, True, "costly"),
    "sin": (lambda x: _torch().sin(x), _math("math.sin"), math.sin, True, "costly"),
    "cos": (lambda x: _torch().cos(x), _math("math.cos"), math.cos, True, "costly"),
    "neg": (lambda x: _torch().neg(x), _CUSTOM, lambda x: -x, True, "numeric"),
    "relu": (lambda x: _torch().relu(x), _CUSTOM, lambda x: max(x, 0.0), True),
    "square": (lambda x: _torch().square(x), _CUSTOM, lambda x: x * x, True),
    "reciprocal": (lambda x: _torch().reciprocal(x), _CUSTOM, lambda x: 1 / x, True, "costly"),
    "sigmoid": (lambda x: _torch().sigmoid(x), _CUSTOM, lambda x: 1 / (1 + math.exp(-x)), True,
                "costly"),
    "silu": (lambda x: _functional().silu(x), _CUSTOM, None, True, "costly"),
    "gelu": (lambda x, approximate: _functional().gelu(x, approximate=approximate), _CUSTOM,
             None, True, "costly"),
    "clamp": (lambda x, min, max: _torch().clamp(x, min=min, max=max), _CUSTOM, None, True),
    # Binary, broadcasting.
    "add": (lambda a, b: _torch().add(a, b), _arith("arith.addf", "arith.addi"),
            lambda a, b: a + b, True, "numeric"),
    "sub": (lambda a, b: _torch().sub(a, b), _arith("arith.subf", "arith.subi"),
            lambda a, b: a - b, True, "numeric"),
    "mul": (lambda a, b: _torch().mul(a, b), _arith("arith.mulf", "arith.muli"),
            lambda a, b: a * b, True, "numeric"),
    "div": (lambda a, b: _torch().div(a, b), _arith("arith.divf"), lambda a, b: a / b, True,
            "costly"),
    "maximum": (lambda a, b: _torch().maximum(a, b), _arith("arith.maximumf", "arith.maxsi"),
                max, True, "numeric"),
    "minimum": (lambda a, b: _torch().minimum(a, b), _arith("arith.minimumf", "arith.minsi"),
                min, True, "numeric"),
    "pow": (lambda a, b: _torch().pow(a, b), _libdevice("__nv_powf"), None, True, "costly"),
    # Booleans. Padding follows them as 0.0 / 1.0.
    "logical_and": (lambda a, b: _torch().logical_and(a, b), _arith("", "arith.andi"),
                    lambda a, b: float(bool(a) and bool(b)), False, "bool"),
    "logical_or": (lambda a, b: _torch().logical_or(a, b), _arith("", "arith.ori"),
                   lambda a, b: float(bool(a) or bool(b)), False, "bool"),
    "logical_xor": (lambda a, b: _torch().logical_xor(a, b), _arith("", "arith.xori"),
                    lambda a, b: float(bool(a) != bool(b)), False, "bool"),
    "logical_not": (lambda x: _torch().logical_not(x), _CUSTOM, lambda x: float(not x), False,
                    "bool"),
    # Comparisons and selects compute exactly in the operands' own type.
    "cmp": (_compare, _CUSTOM,
            lambda a, b, predicate: float(_SCALAR_COMPARISONS[predicate](a, b)), False, "value"),
    "select": (lambda c, a, b: _torch().where(c, a, b), _CUSTOM,
               lambda c, a, b: a if c else b, False, "value"),
    # Conversion: the value does not change for padding that the target
    # type holds (0, 1, and whole numbers for integers).
    "cast": (_cast_reference, _CUSTOM, lambda x: x, False, "converts", "any"),
}


_OPERAND_TYPES = ("float", "numeric", "bool", "value", "any")


def _build_table() -> dict[str, ElementwiseOp]:
    dialect = {op_name.removeprefix("kg."): row for op_name, row in _DIALECT_OPS.items()}
    missing = sorted(set(dialect) - set(_ROWS))
    unknown = sorted(set(_ROWS) - set(dialect))
    if missing or unknown:
        raise ImportError(
            "kgc.op_table and the kg dialect disagree: "
            + (f"elementwise ops of the dialect without a row: {', '.join(missing)}; "
               if missing else "")
            + (f"rows for ops the dialect does not mark Kg_ElementwiseOp: {', '.join(unknown)}"
               if unknown else ""))
    table = {}
    for name, (class_name, operands, attributes, summary) in sorted(dialect.items()):
        reference, lowering, on_scalars, promote_half, *flags = _ROWS[name]
        types = [flag for flag in flags if flag in _OPERAND_TYPES]
        table[name] = ElementwiseOp(
            name=name, op_name=f"kg.{name}", op_class=getattr(kg, class_name),
            operands=tuple(operands), attributes=tuple(attributes), summary=summary,
            reference=reference, lowering=lowering, on_scalars=on_scalars,
            promote_half=promote_half, converts="converts" in flags, costly="costly" in flags,
            operand_types=types[0] if types else "float")
    return table


# Every elementwise op of the dialect, by mnemonic ("exp").
ELEMENTWISE: dict[str, ElementwiseOp] = _build_table()
# The same ops by full name ("kg.exp").
BY_OP_NAME: dict[str, ElementwiseOp] = {op.op_name: op for op in ELEMENTWISE.values()}


def elementwise_op(name: str) -> ElementwiseOp | None:
    """The row of an elementwise op, by mnemonic ("exp") or full name
    ("kg.exp"); None for other ops."""
    return ELEMENTWISE.get(name) or BY_OP_NAME.get(name)
