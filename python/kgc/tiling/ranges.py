"""Bounds of the i32 offsets of a tile program.

A tile access needs no mask when its offsets provably keep every lane
inside the buffer. This computes, for each i32 scalar of a kernel, an
interval [lo, hi] it surely lies in, from constants, the program id (bounded
by the grid), loop induction variables (bounded and stepped by their loop)
and arithmetic on those.
"""

from __future__ import annotations

import math
from typing import Sequence

from mlir import ir

UNKNOWN = (-math.inf, math.inf)


class OffsetRanges:
    def __init__(self, grid: int | Sequence[int]):
        """`grid`: the program counts along grid x, y, z (an int: along x)."""
        self.grid = (grid, 1, 1) if isinstance(grid, int) else tuple(grid)
        self.memo: dict[ir.Value, tuple[float, float]] = {}

    def of(self, value: ir.Value) -> tuple[float, float]:
        if value not in self.memo:
            self.memo[value] = self._compute(value)
        return self.memo[value]

    def _compute(self, value: ir.Value) -> tuple[float, float]:
        owner = value.owner
        if isinstance(owner, ir.Block):
            return self._block_argument(value, owner)
        op = owner.operation if hasattr(owner, "operation") else owner
        name = op.name
        if name == "arith.constant":
            attribute = op.attributes["value"]
            if isinstance(attribute, ir.IntegerAttr):
                v = attribute.value
                return (v, v)
            return UNKNOWN
        if name == "kg.program_id":
            axis = ir.IntegerAttr(op.attributes["axis"]).value
            return (0, self.grid[axis] - 1) if axis < len(self.grid) else UNKNOWN
        if name in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remsi",
                    "arith.minsi", "arith.maxsi"):
            a, b = (self.of(operand) for operand in op.operands)
            return _binary(name.split(".")[1], a, b)
        return UNKNOWN

    def _block_argument(self, value: ir.Value, block: ir.Block) -> tuple[float, float]:
        parent = block.owner
        if parent is None or parent.operation.name != "scf.for":
            return UNKNOWN
        if ir.BlockArgument(value).arg_number != 0:
            return UNKNOWN
        lower, upper, step = (self.of(parent.operation.operands[i]) for i in range(3))
        if step[0] != step[1] or step[0] <= 0:
            return UNKNOWN
        if upper[0] != upper[1]:
            # An end known only within bounds (a split-K kernel's k loop
            # stops at its split's end): the variable stays below the
            # largest end.
            if math.isinf(lower[0]) or math.isinf(upper[1]):
                return UNKNOWN
            return (lower[0], max(lower[0], upper[1] - 1))
        if lower[0] != lower[1]:
            # A start known only within bounds (a persistent program's loop
            # from its program id): the variable stays below the end.
            if math.isinf(lower[0]):
                return UNKNOWN
            return (lower[0], max(lower[0], upper[0] - 1))
        lb, ub, st = lower[0], upper[0], step[0]
        if ub <= lb:
            return (lb, lb)
        return (lb, lb + st * ((ub - lb - 1) // st))


def _binary(op: str, a, b):
    if op == "addi":
        return (a[0] + b[0], a[1] + b[1])
    if op == "subi":
        return (a[0] - b[1], a[1] - b[0])
    if op == "muli":
        products = [x * y for x in a for y in b if not (math.isinf(x) or math.isinf(y))]
        if len(products) < 4:
            return UNKNOWN
        return (min(products), max(products))
    if op == "divsi":
        if b[0] == b[1] and b[0] > 0 and a[0] >= 0:
            return (a[0] // b[0], a[1] // b[0] if not math.isinf(a[1]) else math.inf)
        if b[0] > 0 and a[0] >= 0 and not math.isinf(a[1]):
            return (0, a[1] // b[0])
        return UNKNOWN
    if op == "remsi":
        if a[0] >= 0 and b[0] > 0:
            upper = b[1] - 1
            if a[1] < b[0]:
                return a
            return (0, min(upper, a[1]))
        return UNKNOWN
    if op == "minsi":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "maxsi":
        return (max(a[0], b[0]), max(a[1], b[1]))
    return UNKNOWN
