"""Writes the Python list of the kg dialect's elementwise ops from the
records that `mlir-tblgen --print-records` prints for KgOps.td.

An op is elementwise when its def derives from the TableGen class
`Kg_ElementwiseOp`. For each one the output gives its generated Python class
and the names of its tensor operands and of its attributes, in the order of
its `arguments`, so that kgc's op table (python/kgc/ops.py) needs no list of
its own. Run by CMake at build time:

    gen_elementwise_ops.py KgOps.records _kg_elementwise_gen.py
"""

from __future__ import annotations

import pathlib
import re
import sys

MARKER_CLASS = "Kg_ElementwiseOp"
DIALECT = "Kg_Dialect"

# `def Kg_ExpOp {	// Op Kg_Op Kg_ElementwiseOp Kg_UnaryOp`: a record and,
# after the tab, the classes it derives from.
_DEF = re.compile(r"^def (\w+) \{(?:\t//(.*))?$")
_FIELD = re.compile(r"^  (?:\w+(?:<.*>)?) (\w+) = (.*);$")
_ARGUMENT = re.compile(r"(\w+):\$(\w+)")


def read_records(text: str) -> dict[str, dict]:
    """Every def of the dump: {name: {"classes": [...], field: value text}}."""
    records: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        match = _DEF.match(line)
        if match:
            current = {"classes": (match.group(2) or "").split()}
            records[match.group(1)] = current
        elif line == "}":
            current = None
        elif current is not None:
            field = _FIELD.match(line)
            if field:
                current[field.group(1)] = field.group(2)
    return records


def elementwise_ops(records: dict[str, dict]) -> list[tuple[str, str, list, list, str]]:
    """(op name, Python class, operand names, attribute names, summary) per op."""
    ops = []
    for name, record in records.items():
        if MARKER_CLASS not in record["classes"] or record.get("opDialect") != DIALECT:
            continue
        mnemonic = record["opName"].strip('"')
        operands, attributes = [], []
        for constraint, argument in _ARGUMENT.findall(record["arguments"]):
            classes = records[constraint]["classes"]
            if "TypeConstraint" in classes:
                operands.append(argument)
            elif "Attr" in classes:
                attributes.append(argument)
            else:
                raise SystemExit(f"{name}: argument ${argument} ({constraint}) is neither an "
                                 "operand nor an attribute")
        # mlir-tblgen names the Python class after the def, dialect prefix dropped.
        summary = record.get("summary", '""')[1:-1]
        ops.append((f"kg.{mnemonic}", name.split("_", 1)[1], operands, attributes, summary))
    if not ops:
        raise SystemExit(f"no def derives from {MARKER_CLASS}: is the dump from KgOps.td?")
    return sorted(ops)


def main(argv: list[str]) -> None:
    source, target = argv
    ops = elementwise_ops(read_records(pathlib.Path(source).read_text()))
    lines = [
        '"""The elementwise ops of the kg dialect: every def of Kg_ElementwiseOp in',
        "dialect/KgOps.td. Generated at build time by dialect/gen_elementwise_ops.py;",
        'do not edit."""',
        "",
        "# op name: (generated Python class, tensor operands, attributes, summary)",
        "ELEMENTWISE_OPS = {",
    ]
    for op_name, class_name, operands, attributes, summary in ops:
        lines.append(f"    {op_name!r}: ({class_name!r}, {tuple(operands)!r}, "
                     f"{tuple(attributes)!r}, {summary!r}),")
    lines.append("}")
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
