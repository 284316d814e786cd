"""A light Python model of the kg ops of a kernel (or of a candidate kernel).

Planning asks many "could these ops be one kernel?" questions; answering
them on plain Python objects avoids building IR for every guess. `Node`s are
made from MLIR ops once (`nodes_from_ops`); a node that stands for a value
from outside the group is an `input`.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

from mlir import ir

from kgc.op_table import ELEMENTWISE
from kgc.tiling.index_maps import DynamicExtent

# kg ops whose result at an index depends only on their operands at the
# (broadcast) same index: the elementwise ops of the dialect, and constants,
# which have no operand and tile like one.
ELEMENTWISE_OPS = frozenset(ELEMENTWISE) | {"constant"}
VIEW_OPS = frozenset("transpose reshape broadcast_to slice concat".split())
# Ops without operands whose value at an index is known from the index
# alone: copied into every kernel that reads them, never a kernel's input.
SOURCE_OPS = frozenset({"constant", "iota"})
# Ops that read a kernel input at positions held in another tensor: only
# the schedules of `kgc.tiling.gather` write their loads.
INDIRECT_OPS = frozenset({"gather"})
SUPPORTED_OPS = ELEMENTWISE_OPS | VIEW_OPS | SOURCE_OPS | INDIRECT_OPS | {"reduce", "matmul"}


@dataclasses.dataclass(eq=False)
class Node:
    """One value of the group: the op that makes it, or an outside input."""

    op: str
    operands: list["Node"]
    shape: tuple[int, ...]
    element: str  # "f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "i1", "i32" or "i64"
    attrs: dict
    value: ir.Value | None = None
    location: ir.Location | None = None
    input_index: int = -1  # for inputs: position among the group's inputs

    def __repr__(self) -> str:
        return f"<{self.op} {self.shape} {self.element}>"

    @property
    def is_input(self) -> bool:
        return self.op == "input"

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


# The size planning gives a dynamic extent (`?`): fusion and the schedules
# decide with it, as Inductor decides with a size hint; kg-tile then checks
# that the plan holds at every size (`kgc.tiling.dynamic`).
EXTENT_HINT = 256


def tensor_shape(type_: ir.Type) -> tuple[int, ...]:
    """The extents of a tensor type, a dynamic one as `EXTENT_HINT` (marked
    as the dynamic extent, for the strides it sets)."""
    return tuple(DynamicExtent(EXTENT_HINT) if ir.ShapedType.is_dynamic_size(d) else d
                 for d in ir.RankedTensorType(type_).shape)


def element_name(type_: ir.Type) -> str:
    return str(ir.ShapedType(type_).element_type)


def _array(attr: ir.Attribute) -> list[int]:
    return list(ir.DenseI64ArrayAttr(attr))


def _float(attr: ir.Attribute) -> float:
    return ir.FloatAttr(attr).value


def node_attrs(op: ir.Operation) -> dict:
    """The attributes of a kg op as Python values."""
    name = op.name.split(".", 1)[1]
    attributes = op.attributes
    out: dict = {}
    if name == "reduce":
        out["kind"] = _enum_text(attributes, "kind", None)
        out["dims"] = _array(attributes["dims"])
        out["keepdim"] = "keepdim" in attributes
    elif name == "transpose":
        out["permutation"] = _array(attributes["permutation"])
    elif name == "slice":
        out["offsets"] = _array(attributes["offsets"])
        out["strides"] = _array(attributes["strides"])
    elif name == "concat":
        out["dim"] = ir.IntegerAttr(attributes["dim"]).value
    elif name == "constant":
        out["value"] = _float(attributes["value"])
    elif name == "iota":
        out["dim"] = ir.IntegerAttr(attributes["dim"]).value
        out["start"] = ir.IntegerAttr(attributes["start"]).value if "start" in attributes else 0
    elif name == "cmp":
        out["predicate"] = _enum_text(attributes, "predicate", None)
    elif name == "clamp":
        out["min"] = _float(attributes["min"]) if "min" in attributes else None
        out["max"] = _float(attributes["max"]) if "max" in attributes else None
    elif name == "gelu":
        out["approximate"] = _enum_text(attributes, "approximate", "none")
    elif name == "matmul":
        out["precision"] = _enum_text(attributes, "precision", None)
    elif name == "gather":
        out["dim"] = ir.IntegerAttr(attributes["dim"]).value
    elif name == "scatter":
        out["dim"] = ir.IntegerAttr(attributes["dim"]).value
        out["mode"] = _enum_text(attributes, "mode", None)
    return out


def _enum_text(attributes, name: str, default):
    if name not in attributes:
        return default
    # I32EnumAttr values print as "1 : i32"; the generated enums name them.
    from kgc.dialects import kg

    value = ir.IntegerAttr(attributes[name]).value
    enum = {"approximate": kg.GeluApproximation, "precision": kg.Precision,
            "kind": kg.ReduceKind, "predicate": kg.ComparePredicate,
            "mode": kg.ScatterMode}[name]
    return str(enum(value))


def reduce_kind(op: ir.Operation) -> str:
    """"sum", "max", "min" or "mean" for a kg.reduce."""
    return _enum_text(op.attributes, "kind", None)


def kg_op_name(op: ir.Operation) -> str | None:
    name = op.name
    return name[3:] if name.startswith("kg.") else None


def nodes_from_ops(ops: Sequence[ir.Operation], inputs: Sequence[ir.Value] = ()
                   ) -> tuple[list[Node], dict[ir.Value, Node]]:
    """Nodes for `ops` (in order) and for the outside values they use.

    Returns the nodes of the ops and a map from every MLIR value involved
    (results and outside inputs) to its node. `inputs` are numbered first,
    in order; other outside values follow in order of first use.
    """
    by_value: dict[ir.Value, Node] = {}
    nodes: list[Node] = []
    for index, value in enumerate(inputs):
        by_value[value] = Node("input", [], tensor_shape(value.type), element_name(value.type), {},
                               value=value, input_index=index)
    inputs = len(inputs)
    for op in ops:
        op = op.operation
        operands = []
        for value in op.operands:
            node = by_value.get(value)
            if node is None:
                node = Node("input", [], tensor_shape(value.type), element_name(value.type), {},
                            value=value, input_index=inputs)
                inputs += 1
                by_value[value] = node
            operands.append(node)
        result = op.results[0]
        node = Node(kg_op_name(op), operands, tensor_shape(result.type), element_name(result.type),
                    node_attrs(op), value=result, location=op.location)
        by_value[result] = node
        nodes.append(node)
    return nodes, by_value


def users_within(nodes: Iterable[Node]) -> dict[Node, list[Node]]:
    users: dict[Node, list[Node]] = {}
    for node in nodes:
        for operand in node.operands:
            users.setdefault(operand, []).append(node)
    return users


def topological(outputs: Sequence[Node]) -> list[Node]:
    """Every node that `outputs` depend on, producers first."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(o, False) for o in reversed(outputs)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for operand in reversed(node.operands):
            if id(operand) not in seen:
                stack.append((operand, False))
    return order
