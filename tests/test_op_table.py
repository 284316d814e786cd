"""The elementwise op table (kgc.op_table) is the one place the list of
elementwise ops lives: it holds every elementwise op of the dialect, and
the passes, the reference interpreter and the graph API take their op lists
from it."""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re

import pytest
from mlir import ir

import kgc
from kgc import op_table, reference
from kgc.dialects import kg
from kgc.op_table import ELEMENTWISE

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The package sources: kgc, kgc.passes and kgc.pipeline.
SOURCES = [ROOT / "python" / "kgc", ROOT / "passes", ROOT / "pipeline"]
OP_NAMES = set(ELEMENTWISE) | {f"kg.{name}" for name in ELEMENTWISE}


def _td_elementwise_ops() -> set[str]:
    """The mnemonics of the defs in the .td files that derive, directly or
    through a class, from Kg_ElementwiseOp: read from the ODS text itself,
    independently of the build step that generates the table's list."""
    text = "\n".join(path.read_text() for path in sorted((ROOT / "dialect").glob("*.td")))
    classes = {"Kg_ElementwiseOp"}
    for name, base in re.findall(r"^class (\w+)<[^:]*:\s*(\w+)<", text, re.M):
        if base in classes:
            classes.add(name)
    return {mnemonic for base, mnemonic in re.findall(r"^def \w+\s*:\s*(\w+)<\"(\w+)\"", text, re.M)
            if base in classes}


def test_every_elementwise_op_of_the_dialect_is_in_the_table():
    in_td = _td_elementwise_ops()
    assert {"exp", "add", "gelu", "clamp", "cast"} <= in_td
    assert set(ELEMENTWISE) == in_td


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_rows_match_the_generated_op_classes(name):
    row = ELEMENTWISE[name]
    assert row.op_class.OPERATION_NAME == f"kg.{name}"
    assert getattr(kg, row.op_class.__name__) is row.op_class
    assert row.arity in (1, 2, 3)
    for attribute in row.attributes:
        assert isinstance(getattr(row.op_class, attribute), property)


def _op_names_in(node: ast.AST) -> list[str]:
    """The elementwise op names that a literal collection holds: elements of
    a list, tuple or set, keys of a dict, words of a string."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        members = node.elts
    elif isinstance(node, ast.Dict):
        members = [k for k in node.keys if k is not None]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [word for word in node.value.split() if word in OP_NAMES]
    else:
        return []
    return [m.value for m in members
            if isinstance(m, ast.Constant) and isinstance(m.value, str) and m.value in OP_NAMES]


# Literals whose names only look like op names, by the variable they are
# assigned to: the Builder's scalar i32 arithmetic (add, sub, mul, div of
# offsets), which is no kg op.
NOT_OP_LISTS = {"_SCALAR_OPS"}


def _op_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, names) of every literal that lists 3 or more elementwise ops."""
    tree = ast.parse(source)
    exempt = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id in NOT_OP_LISTS
                for target in node.targets):
            exempt.update(id(inner) for inner in ast.walk(node.value))
    return [(node.lineno, names) for node in ast.walk(tree)
            if id(node) not in exempt and len(names := _op_names_in(node)) >= 3]


def test_the_scan_finds_op_lists():
    assert _op_lists('UNARY = {"kg.exp": 1, "kg.log": 2, "kg.tanh": 3}') == [
        (1, ["kg.exp", "kg.log", "kg.tanh"])]
    assert _op_lists('OPS = frozenset("exp log sqrt".split())')
    assert _op_lists('CASES = [("add", 1), ("sub", 2)]') == []
    assert _op_lists('COMBINE = {"sum": "add", "max": "maximum", "min": "minimum"}') == []
    assert _op_lists('_SCALAR_OPS = {"add": "arith.addi", "sub": "arith.subi", '
                     '"mul": "arith.muli"}') == []


def test_no_other_module_lists_the_elementwise_ops():
    table = pathlib.Path(op_table.__file__).resolve()
    found = []
    for directory in SOURCES:
        for path in sorted(directory.rglob("*.py")):
            if path.resolve() == table:
                continue
            for line, names in _op_lists(path.read_text()):
                found.append(f"{path.relative_to(ROOT)}:{line}: {', '.join(names)}")
    assert not found, "elementwise ops listed outside kgc/op_table.py:\n" + "\n".join(found)


def test_the_table_fails_loudly_on_a_dialect_op_without_a_row(monkeypatch):
    extended = dict(op_table._DIALECT_OPS)
    extended["kg.erf"] = ("ErfOp", ("x",), (), "elementwise erf(x)")
    monkeypatch.setattr(op_table, "_DIALECT_OPS", extended)
    with pytest.raises(ImportError, match="without a row: erf"):
        op_table._build_table()


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_every_op_has_a_graph_method_and_a_lowering(name):
    from kgc.passes import to_ttir

    row = ELEMENTWISE[name]
    assert callable(getattr(kgc.Graph, name))
    assert to_ttir._HANDLERS[row.op_name] is to_ttir._Lowering.elementwise
    if row.lowering.kind == "custom":
        assert name in to_ttir._CUSTOM_LOWERINGS


def test_graph_methods_come_with_the_op_summary():
    assert kgc.Graph.exp.__doc__ == "kg.exp: elementwise exp(x)."
    assert kgc.Graph.add.__name__ == "add"


def _operands_of(row, torch):
    """Two-element operands of the types the op takes: f16 floats, bools
    for the logical ops, a bool condition first for select."""
    halves = torch.tensor([0.5, 2.0], dtype=torch.float16)
    bools = torch.tensor([True, False])
    if row.operand_types == "bool":
        return [bools] * row.arity, torch.bool
    if row.name == "select":
        return [bools, halves, -halves], torch.float16
    return [halves] * row.arity, torch.float16


@pytest.mark.parametrize("name", sorted(n for n, r in ELEMENTWISE.items() if not r.attributes))
def test_reference_entry_point_runs_each_op(name):
    torch = pytest.importorskip("torch")
    row = ELEMENTWISE[name]
    operands, dtype = _operands_of(row, torch)
    result = reference.elementwise(name, *operands, dtype=dtype)
    assert result.dtype == dtype
    expected = row.reference(*(x.float() if x.is_floating_point() else x
                               for x in operands)).to(dtype)
    assert torch.equal(result, expected)
    exact = reference.elementwise(f"kg.{name}", *operands, dtype=dtype, exact=True)
    # Floats stay unrounded in f64; booleans are exact as they are.
    assert exact.dtype == (torch.float64 if dtype.is_floating_point else dtype)


def test_integer_ops_compute_in_their_own_dtype():
    torch = pytest.importorskip("torch")
    # 2^31 - 1 + 1 wraps in i32, as torch's int32 does; a float detour
    # would round 2^24 + 1 away.
    big = torch.tensor([2**31 - 1, 2**24 + 1], dtype=torch.int32)
    one = torch.tensor([1, 1], dtype=torch.int32)
    assert torch.equal(reference.elementwise("add", big, one, dtype=torch.int32),
                       torch.tensor([-(2**31), 2**24 + 2], dtype=torch.int32))
    exact = reference.elementwise("add", big, one, dtype=torch.int32, exact=True)
    assert exact.dtype == torch.int32
    wide = torch.tensor([2**53 + 1], dtype=torch.int64)
    assert reference.elementwise("cast", wide, dtype=torch.int32).item() == 1
    assert reference.elementwise("cmp", big, one, dtype=torch.bool, predicate="gt").tolist() == \
        [True, True]


def test_reference_entry_point_rejects_other_ops():
    torch = pytest.importorskip("torch")
    with pytest.raises(kgc.KgcError, match="kg.matmul is not an elementwise kg op"):
        reference.elementwise("kg.matmul", torch.ones(2), dtype=torch.float32)


@pytest.mark.parametrize("name", sorted(n for n, r in ELEMENTWISE.items() if r.promote_half))
def test_decompose_computes_half_floats_of_each_promoted_op_in_f32(name):
    from kgc.pipeline import Pipeline

    g = kgc.Graph("half")
    operands = [g.input(f"x{i}", (4, 8), "f16") for i in range(ELEMENTWISE[name].arity)]
    if name == "clamp":
        g.output(g.clamp(*operands, min=0.0))
    else:
        g.output(getattr(g, name)(*operands))
    with ir.Context() as context:
        module = g.build(context)
        Pipeline().add("kg-decompose").run(module)
        text = str(module)
    assert re.search(rf"kg\.{name} .*tensor<4x8xf32>", text), text


def _load_generator():
    spec = importlib.util.spec_from_file_location(
        "gen_elementwise_ops", ROOT / "dialect" / "gen_elementwise_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDS = '''------------- Defs -----------------
def Kg_Dialect {\t// Dialect
  string name = "kg";
}
def Kg_FloatTensor {\t// Constraint AttrTypeConstraint TypeConstraint Type
  string summary = "tensor";
}
def anonymous_7 {\t// Constraint AttrConstraint Attr OptionalAttr
  string summary = "attribute";
}
def Kg_ClampOp {\t// Op Kg_Op Kg_ElementwiseOp
  Dialect opDialect = Kg_Dialect;
  string opName = "clamp";
  dag arguments = (ins Kg_FloatTensor:$x, anonymous_7:$min);
  string summary = "elementwise clamp";
}
def Kg_SoftmaxOp {\t// Op Kg_Op
  Dialect opDialect = Kg_Dialect;
  string opName = "softmax";
  dag arguments = (ins Kg_FloatTensor:$x);
  string summary = "softmax";
}
'''


def test_the_build_step_reads_elementwise_ops_from_tablegen_records():
    generator = _load_generator()
    ops = generator.elementwise_ops(generator.read_records(RECORDS))
    assert ops == [("kg.clamp", "ClampOp", ["x"], ["min"], "elementwise clamp")]
