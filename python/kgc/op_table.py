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
  bf16 operands.

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
    """

    kind: str
    name: str = ""


def _arith(name: str) -> Lowering:
    return Lowering("arith", name)


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


# The behaviour of each op, by mnemonic: (reference, lowering, on_scalars,
# promote_half[, "converts"]). Rows are checked against the dialect's list
# below.
_ROWS: dict[str, tuple] = {
    # Unary math.
    "exp": (lambda x: _torch().exp(x), _math("math.exp"), math.exp, True),
    "log": (lambda x: _torch().log(x), _math("math.log"), math.log, True),
    "sqrt": (lambda x: _torch().sqrt(x), _math("math.sqrt"), math.sqrt, True),
    "rsqrt": (lambda x: _torch().rsqrt(x), _math("math.rsqrt"), lambda x: 1 / math.sqrt(x), True),
    "abs": (lambda x: _torch().abs(x), _math("math.absf"), abs, True),
    "tanh": (lambda x: _torch().tanh(x), _libdevice("__nv_tanhf"), math.tanh, True),
    "neg": (lambda x: _torch().neg(x), _CUSTOM, lambda x: -x, True),
    "relu": (lambda x: _torch().relu(x), _CUSTOM, lambda x: max(x, 0.0), True),
    "square": (lambda x: _torch().square(x), _CUSTOM, lambda x: x * x, True),
    "reciprocal": (lambda x: _torch().reciprocal(x), _CUSTOM, lambda x: 1 / x, True),
    "sigmoid": (lambda x: _torch().sigmoid(x), _CUSTOM, lambda x: 1 / (1 + math.exp(-x)), True),
    "silu": (lambda x: _functional().silu(x), _CUSTOM, None, True),
    "gelu": (lambda x, approximate: _functional().gelu(x, approximate=approximate), _CUSTOM,
             None, True),
    "clamp": (lambda x, min, max: _torch().clamp(x, min=min, max=max), _CUSTOM, None, True),
    # Binary, broadcasting.
    "add": (lambda a, b: _torch().add(a, b), _arith("arith.addf"), lambda a, b: a + b, True),
    "sub": (lambda a, b: _torch().sub(a, b), _arith("arith.subf"), lambda a, b: a - b, True),
    "mul": (lambda a, b: _torch().mul(a, b), _arith("arith.mulf"), lambda a, b: a * b, True),
    "div": (lambda a, b: _torch().div(a, b), _arith("arith.divf"), lambda a, b: a / b, True),
    "maximum": (lambda a, b: _torch().maximum(a, b), _arith("arith.maximumf"), max, True),
    "minimum": (lambda a, b: _torch().minimum(a, b), _arith("arith.minimumf"), min, True),
    "pow": (lambda a, b: _torch().pow(a, b), _libdevice("__nv_powf"), None, True),
    # Conversion: goes through f32 as torch's own .to() chain would; the value
    # does not change, so padding passes through unchanged.
    "cast": (lambda x: x.to(_torch().float32), _CUSTOM, lambda x: x, False, "converts"),
}


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
        table[name] = ElementwiseOp(
            name=name, op_name=f"kg.{name}", op_class=getattr(kg, class_name),
            operands=tuple(operands), attributes=tuple(attributes), summary=summary,
            reference=reference, lowering=lowering, on_scalars=on_scalars,
            promote_half=promote_half, converts="converts" in flags)
    return table


# Every elementwise op of the dialect, by mnemonic ("exp").
ELEMENTWISE: dict[str, ElementwiseOp] = _build_table()
# The same ops by full name ("kg.exp").
BY_OP_NAME: dict[str, ElementwiseOp] = {op.op_name: op for op in ELEMENTWISE.values()}


def elementwise_op(name: str) -> ElementwiseOp | None:
    """The row of an elementwise op, by mnemonic ("exp") or full name
    ("kg.exp"); None for other ops."""
    return ELEMENTWISE.get(name) or BY_OP_NAME.get(name)
