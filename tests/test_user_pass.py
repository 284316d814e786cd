"""Passes written by users: registered from Python, they run in pipelines
beside upstream MLIR passes, take options, fail with located diagnostics,
and are passes of kgc-opt by name once kgc-opt loads their module, as
mlir-opt loads a plugin:

    kgc-opt in.mlir --load-pass-plugin=my_passes.py --my-pass
    kgc-opt in.mlir --load-pass-plugin=my_package.passes --my-pass
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from mlir import ir

import kgc  # noqa: F401  (registers the kg dialect)
from kgc.diagnostics import KgcError
from kgc.parsing import parse_text
from kgc.passes import Option, Pass, PassFailure, function_pass, get_pass, register_pass
from kgc.pipeline import Pipeline, PipelineError
from tests.tools import console_script

TESTS_DIR = pathlib.Path(__file__).resolve().parent


# -- the user's passes ---------------------------------------------------------


@function_pass("fold-double-neg")
def fold_double_neg(op: ir.Operation) -> None:
    """Folds kg.neg(kg.neg(x)) into x; the outer neg is left dead."""

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner.name == "kg.neg":
            producer = inner.operands[0].owner
            if isinstance(producer, ir.OpView) and producer.operation.name == "kg.neg":
                inner.results[0].replace_all_uses_with(producer.operands[0])
        return ir.WalkResult.ADVANCE

    op.walk(visit)


@register_pass
class TagFunctions(Pass):
    """Sets an integer attribute `<prefix>.level` on every func.func."""

    argument = "tag-functions"
    summary = "Tag every function with a level"

    level = Option(int, 1, "the level to record")
    prefix = Option(str, "user", "the dialect prefix of the attribute")

    def run(self, op: ir.Operation) -> None:
        for function in op.regions[0].blocks[0].operations:
            if function.operation.name == "func.func":
                value = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), self.level)
                function.attributes[f"{self.prefix}.level"] = value


@function_pass("reject-matmul", "Fail on the first kg.matmul")
def reject_matmul(op: ir.Operation) -> None:
    # Raised from here, not from an `op.walk` callback, which would wrap it.
    for function in op.regions[0].blocks[0].operations:
        for inner in function.regions[0].blocks[0].operations:
            if inner.operation.name == "kg.matmul":
                raise PassFailure("kg.matmul is not supported by this target", inner.location)


@function_pass("fail-without-location")
def fail_without_location(op: ir.Operation) -> None:
    raise PassFailure("nothing here is supported")


@function_pass("crash")
def crash(op: ir.Operation) -> None:
    raise ZeroDivisionError("a bug in the pass")


# -- inputs ------------------------------------------------------------------

DOUBLE_NEG = """\
func.func @double_neg(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kg.neg %x : tensor<8xf32>
  %1 = kg.neg %0 : tensor<8xf32>
  %2 = kg.exp %1 : tensor<8xf32>
  return %2 : tensor<8xf32>
}
"""

MATMUL = """\
func.func @mm(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>) -> tensor<16x32xf16> {
  %0 = kg.matmul %a, %b : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}
"""


@pytest.fixture
def context():
    with ir.Context() as ctx, ir.Location.unknown():
        yield ctx


def function_body(module: ir.Operation) -> list[str]:
    function = module.regions[0].blocks[0].operations[0]
    return [op.operation.name for op in function.regions[0].blocks[0].operations]


def user_kgc_opt(*args: str, input_text: str | None = None, env=None) -> subprocess.CompletedProcess:
    """kgc-opt with this module's passes loaded as a plugin."""
    return subprocess.run(
        [console_script("kgc-opt"), f"--load-pass-plugin={pathlib.Path(__file__).resolve()}",
         *args],
        input=input_text, capture_output=True, text=True, cwd=TESTS_DIR, timeout=120, env=env,
    )


def plain_kgc_opt(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([console_script("kgc-opt"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, env=env)


# -- in Python -----------------------------------------------------------------


def test_user_passes_are_registered_by_argument():
    summary = get_pass("fold-double-neg").summary
    assert summary == "Folds kg.neg(kg.neg(x)) into x; the outer neg is left dead."
    assert get_pass("tag-functions") is TagFunctions
    assert set(TagFunctions.option_specs()) == {"level", "prefix"}


def test_user_pass_beside_upstream_canonicalize(context):
    module = parse_text(DOUBLE_NEG, "double_neg.mlir", context)
    Pipeline.parse("builtin.module(fold-double-neg,canonicalize)").run(module)
    # The fold leaves both negs dead; canonicalize erases them.
    assert function_body(module) == ["kg.exp", "func.return"]
    function = module.regions[0].blocks[0].operations[0]
    exp = function.regions[0].blocks[0].operations[0]
    assert exp.operands[0] == function.regions[0].blocks[0].arguments[0]


def test_user_pass_nested_and_built_in_python(context):
    module = parse_text(DOUBLE_NEG, "double_neg.mlir", context)
    pipeline = Pipeline()
    pipeline.nest("func.func").add(get_pass("fold-double-neg")).add("kgc-dce")
    assert str(pipeline) == "builtin.module(func.func(fold-double-neg,kgc-dce))"
    pipeline.run(module)
    assert function_body(module) == ["kg.exp", "func.return"]


def test_user_pass_options_from_python_and_text(context):
    module = parse_text(DOUBLE_NEG, "double_neg.mlir", context)
    Pipeline().add("tag-functions", level=3).add(TagFunctions(prefix="mine", level=5)).run(module)
    function = module.regions[0].blocks[0].operations[0]
    assert str(function.attributes["user.level"]) == "3 : i64"
    assert str(function.attributes["mine.level"]) == "5 : i64"

    pipeline = Pipeline.parse("builtin.module(tag-functions{level=7 prefix=text})")
    assert str(pipeline) == "builtin.module(tag-functions{level=7 prefix=text})"
    pipeline.run(module)
    assert str(function.attributes["text.level"]) == "7 : i64"


def test_user_pass_bad_options():
    message = "pass 'tag-functions' has no option 'depth' .options: level, prefix"
    with pytest.raises(PipelineError, match=message):
        Pipeline().add("tag-functions", depth=2)
    with pytest.raises(PipelineError, match="option 'level' expects an integer, got 'high'"):
        Pipeline.parse("builtin.module(tag-functions{level=high})")


def test_pass_failure_is_a_located_diagnostic(context):
    module = parse_text(MATMUL, "mm.mlir", context)
    with pytest.raises(KgcError) as info:
        Pipeline().add("reject-matmul").run(module)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.severity == "error"
    assert diagnostic.location == "mm.mlir:2:8"
    assert diagnostic.message == "kg.matmul is not supported by this target"
    assert str(diagnostic) == "mm.mlir:2:8: error: kg.matmul is not supported by this target"


def test_pass_failure_without_location_points_at_the_op_run_on(context):
    module = parse_text(MATMUL, "mm.mlir", context)
    pipeline = Pipeline()
    pipeline.nest("func.func").add("fail-without-location")
    with pytest.raises(KgcError) as info:
        pipeline.run(module)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.location == "mm.mlir:1:1"
    assert diagnostic.message == "nothing here is supported"


def test_a_crashing_pass_is_reported_as_an_internal_error(context):
    module = parse_text(MATMUL, "mm.mlir", context)
    message = "internal error in pass 'crash': ZeroDivisionError: a bug in the pass"
    with pytest.raises(KgcError, match=message):
        Pipeline().add("crash").run(module)


def test_passes_after_a_failure_do_not_run(context):
    module = parse_text(MATMUL, "mm.mlir", context)
    with pytest.raises(KgcError):
        Pipeline().add("reject-matmul").add("tag-functions").run(module)
    function = module.regions[0].blocks[0].operations[0]
    assert "user.level" not in function.attributes


# -- from kgc-opt ----------------------------------------------------------------


def test_user_pass_by_name_in_kgc_opt(tmp_path):
    source = tmp_path / "double_neg.mlir"
    source.write_text(DOUBLE_NEG)
    result = user_kgc_opt(str(source), "--fold-double-neg", "--canonicalize")
    assert result.returncode == 0, result.stderr
    assert "kg.neg" not in result.stdout
    assert "kg.exp %arg0" in result.stdout


def test_user_pass_in_a_kgc_opt_pipeline_with_options():
    result = user_kgc_opt(
        "--pass-pipeline=builtin.module(fold-double-neg,tag-functions{level=4},canonicalize)",
        input_text=DOUBLE_NEG,
    )
    assert result.returncode == 0, result.stderr
    assert "attributes {user.level = 4 : i64}" in result.stdout
    assert "kg.neg" not in result.stdout

    flag = user_kgc_opt("--tag-functions=level=9 prefix=flag", input_text=DOUBLE_NEG)
    assert flag.returncode == 0, flag.stderr
    assert "flag.level = 9 : i64" in flag.stdout


def test_user_pass_in_kgc_opt_list_passes():
    result = user_kgc_opt("--list-passes")
    assert result.returncode == 0, result.stderr
    assert "fold-double-neg  -  Folds kg.neg(kg.neg(x)) into x" in result.stdout
    assert "tag-functions  -  Tag every function with a level" in result.stdout
    assert "level=1  -  the level to record" in result.stdout


def test_pass_failure_in_kgc_opt(tmp_path):
    source = tmp_path / "mm.mlir"
    source.write_text(MATMUL)
    result = user_kgc_opt(str(source), "--reject-matmul")
    assert result.returncode == 1
    assert f"{source}:2:8: error: kg.matmul is not supported by this target" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_crashing_pass_in_kgc_opt_has_no_traceback(tmp_path):
    source = tmp_path / "mm.mlir"
    source.write_text(MATMUL)
    result = user_kgc_opt(str(source), "--crash")
    assert result.returncode == 1
    assert "internal error in pass 'crash'" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_option_of_a_user_pass_in_kgc_opt():
    result = user_kgc_opt("--tag-functions=depth=2", input_text=DOUBLE_NEG)
    assert result.returncode == 1
    assert "kgc-opt: error: pass 'tag-functions' has no option 'depth'" in result.stderr
    assert "Traceback" not in result.stderr


# -- --load-pass-plugin ----------------------------------------------------------

PLUGIN = '''
from kgc.passes import function_pass


@function_pass("drop-negations")
def drop_negations(op):
    """Replace every kg.neg by its operand"""
    def visit(inner):
        if inner.name == "kg.neg":
            inner.results[0].replace_all_uses_with(inner.operands[0])
        return ir.WalkResult.ADVANCE
    op.walk(visit)


from mlir import ir  # noqa: E402
'''


def test_without_its_plugin_a_user_pass_is_no_flag(tmp_path):
    source = tmp_path / "double_neg.mlir"
    source.write_text(DOUBLE_NEG)
    result = plain_kgc_opt(str(source), "--fold-double-neg")
    assert result.returncode == 1
    assert "'fold-double-neg' is not a valid pass" in result.stderr


def test_a_plugin_file_makes_its_passes_flags_and_pipeline_names(tmp_path):
    (tmp_path / "my_passes.py").write_text(PLUGIN)
    source = tmp_path / "double_neg.mlir"
    source.write_text(DOUBLE_NEG)
    flag = plain_kgc_opt(str(source), "--load-pass-plugin=my_passes.py", "--drop-negations",
                         "--canonicalize", cwd=tmp_path)
    assert flag.returncode == 0, flag.stderr
    assert "kg.neg" not in flag.stdout and "kg.exp %arg0" in flag.stdout
    # The option's value may also be the next argument, as with mlir-opt.
    pipeline = plain_kgc_opt(str(source), "--load-pass-plugin", str(tmp_path / "my_passes.py"),
                             "--pass-pipeline=builtin.module(drop-negations,canonicalize)")
    assert pipeline.returncode == 0, pipeline.stderr
    assert "kg.neg" not in pipeline.stdout


def test_a_plugin_module_by_name_and_several_plugins(tmp_path):
    (tmp_path / "my_passes.py").write_text(PLUGIN)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = plain_kgc_opt("--load-pass-plugin=my_passes",
                           f"--load-pass-plugin={pathlib.Path(__file__).resolve()}",
                           "--list-passes", env=env)
    assert result.returncode == 0, result.stderr
    assert "drop-negations  -  Replace every kg.neg by its operand" in result.stdout
    assert "tag-functions  -  Tag every function with a level" in result.stdout
    assert "kg-tile  -  " in result.stdout


@pytest.mark.parametrize("plugin,problem", [
    ("missing_passes.py", "cannot load pass plugin 'missing_passes.py': no such file"),
    ("no_such_module", "cannot load pass plugin 'no_such_module': no such file or module"),
    ("broken.py", "cannot load pass plugin 'broken.py': RuntimeError: not today"),
])
def test_a_plugin_that_does_not_load_is_an_error(tmp_path, plugin, problem):
    (tmp_path / "broken.py").write_text("raise RuntimeError('not today')\n")
    result = plain_kgc_opt(f"--load-pass-plugin={plugin}", "--list-passes", cwd=tmp_path)
    assert result.returncode == 1
    assert f"kgc-opt: error: {problem}" in result.stderr
    assert "Traceback" not in result.stderr
