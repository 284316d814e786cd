"""The Python Pipeline API: building pipelines of kgc and upstream passes,
printing them in MLIR's textual form and parsing them back, running them on
modules, and the PipelineError for an unknown pass, a bad option or text
that does not parse."""

from __future__ import annotations

import pytest
from mlir import ir

import kgc  # noqa: F401  (registers the kg dialect)
from kgc.diagnostics import KgcError
from kgc.parsing import parse_text
from kgc.passes import Option, Pass, register_pass
from kgc.passes.cse import KgcCSE
from kgc.passes.dce import KgcDCE
from kgc.pipeline import (
    ALL_PASSES,
    IRPrinting,
    PassSpec,
    Pipeline,
    PipelineError,
    PipelineSpec,
    PipelineSyntaxError,
    parse_pipeline,
)

DUPLICATES = """
func.func @duplicates(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e1 = kg.exp %x : tensor<8xf32>
  %e2 = kg.exp %x : tensor<8xf32>
  %dead = kg.neg %e2 : tensor<8xf32>
  %s = kg.add %e1, %e2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

func.func @constants(%x: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %0 = arith.addi %x, %c1 : i32
  %1 = arith.addi %0, %c2 : i32
  return %1 : i32
}
"""


@register_pass
class ScaleHint(Pass):
    """A pass with options, to show how options print and parse."""

    argument = "test-pipeline-api-hint"
    summary = "Sets a `test.hint` attribute on the module from its options"

    factor = Option(int, 1, "a number")
    label = Option(str, "none", "a word")
    enabled = Option(bool, True, "a flag")
    sizes = Option(list[int], [], "some numbers")

    def run(self, op: ir.Operation) -> None:
        text = f"{self.factor} {self.label} {self.enabled} {self.sizes}"
        op.attributes["test.hint"] = ir.StringAttr.get(text)


@pytest.fixture
def context():
    with ir.Context() as ctx, ir.Location.unknown():
        yield ctx


def parse(context: ir.Context, text: str = DUPLICATES) -> ir.Operation:
    return parse_text(text, "input.mlir", context)


def body_op_names(module: ir.Operation, function: str) -> list[str]:
    for op in module.regions[0].blocks[0].operations:
        if ir.StringAttr(op.attributes["sym_name"]).value == function:
            return [inner.operation.name for inner in op.regions[0].blocks[0].operations]
    raise AssertionError(f"no function @{function}")


# --------------------------------------------------------------------------
# Building and printing
# --------------------------------------------------------------------------


def test_add_by_name_class_and_instance_prints_textual_form():
    pipeline = (
        Pipeline()
        .add("kgc-cse")
        .add(KgcDCE)
        .add(KgcCSE())
        .add("canonicalize", max_iterations=2, region_simplify="disabled")
    )
    pipeline.nest("func.func").add("cse")
    assert str(pipeline) == (
        "builtin.module(kgc-cse,kgc-dce,kgc-cse,"
        "canonicalize{max-iterations=2 region-simplify=disabled},func.func(cse))"
    )


def test_add_returns_the_pipeline_and_nest_the_child():
    pipeline = Pipeline()
    assert pipeline.add("kgc-cse") is pipeline
    child = pipeline.nest("func.func")
    assert child is not pipeline and child.anchor == "func.func"
    child.add("kgc-dce").add("cse")
    assert str(pipeline) == "builtin.module(kgc-cse,func.func(kgc-dce,cse))"


def test_kgc_pass_options_from_keywords_print_when_not_default():
    pipeline = Pipeline().add("test-pipeline-api-hint", factor=3, sizes=[1, 2])
    pipeline.add(ScaleHint, enabled=False).add(ScaleHint(label="tile"))
    pipeline.add(ScaleHint)
    assert str(pipeline) == (
        "builtin.module(test-pipeline-api-hint{factor=3 sizes=1,2},"
        "test-pipeline-api-hint{enabled=false},test-pipeline-api-hint{label=tile},"
        "test-pipeline-api-hint)"
    )


def test_repr_is_parse_of_the_text():
    pipeline = Pipeline().add("kgc-cse").add("canonicalize", max_iterations=2)
    assert repr(pipeline) == "Pipeline.parse('builtin.module(kgc-cse,canonicalize{max-iterations=2})')"


def test_extend_appends_the_other_pipeline():
    first = Pipeline().add("kgc-cse")
    first.extend(Pipeline().add("kgc-dce").add("canonicalize"))
    assert str(first) == "builtin.module(kgc-cse,kgc-dce,canonicalize)"


# --------------------------------------------------------------------------
# Parsing: str() round trips
# --------------------------------------------------------------------------


ROUND_TRIPS = [
    "builtin.module(kgc-cse)",
    "builtin.module(kgc-cse,kgc-dce,canonicalize)",
    "builtin.module(kgc-cse,func.func(cse,canonicalize{max-iterations=3}))",
    "builtin.module(canonicalize{max-iterations=2 region-simplify=disabled})",
    "builtin.module(func.func(cse),kgc-dce,func.func(kgc-cse))",
    "builtin.module(test-pipeline-api-hint{factor=4 label=x sizes=1,2,3})",
    "builtin.module()",
]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_pipeline_parse_round_trips(text):
    pipeline = Pipeline.parse(text)
    assert str(pipeline) == text
    assert str(Pipeline.parse(str(pipeline))) == text


def test_parse_builds_kgc_passes_with_typed_options():
    pipeline = Pipeline.parse("builtin.module(test-pipeline-api-hint{factor=4 enabled=false sizes=5,6})")
    (hint,) = pipeline.elements
    assert isinstance(hint, ScaleHint)
    assert (hint.factor, hint.enabled, hint.sizes, hint.label) == (4, False, [5, 6], "none")


def test_parse_keeps_nesting_and_upstream_passes():
    pipeline = Pipeline.parse("builtin.module(kgc-cse,func.func(canonicalize{max-iterations=3}))")
    cse, nested = pipeline.elements
    assert isinstance(cse, KgcCSE)
    assert isinstance(nested, Pipeline) and nested.anchor == "func.func"
    (canonicalize,) = nested.elements
    assert canonicalize == PassSpec("canonicalize", {"max-iterations": "3"})


def test_parse_of_a_bare_list_anchors_on_the_module():
    assert str(Pipeline.parse("kgc-cse,kgc-dce")) == "builtin.module(kgc-cse,kgc-dce)"


@pytest.mark.parametrize("text", ROUND_TRIPS + [
    "builtin.module(foo{a=\"x y\" b=1})",
    "builtin.module(gpu.module(gpu.func(cse)),tt.func(kgc-cse))",
])
def test_parse_pipeline_round_trips(text):
    spec = parse_pipeline(text)
    assert str(spec) == text
    assert str(parse_pipeline(str(spec))) == text


def test_parse_pipeline_structure():
    spec = parse_pipeline("builtin.module(kgc-cse, func.func(canonicalize{max-iterations=3 flag}))")
    assert spec == PipelineSpec("builtin.module", [
        PassSpec("kgc-cse"),
        PipelineSpec("func.func", [PassSpec("canonicalize", {"max-iterations": "3", "flag": "true"})]),
    ])
    # Whitespace is not kept; the printed form is canonical.
    assert str(spec) == "builtin.module(kgc-cse,func.func(canonicalize{max-iterations=3 flag=true}))"


def test_parse_pipeline_option_values_with_spaces_and_braces():
    spec = parse_pipeline("builtin.module(p{a=\"x y\" b={c d} c='e'})")
    assert spec.elements[0].options == {"a": "x y", "b": "c d", "c": "e"}
    assert str(parse_pipeline(str(spec))) == str(spec)


@pytest.mark.parametrize("text, column", [
    ("builtin.module(kgc-cse", 23),
    ("builtin.module(kgc-cse,)", 24),
    ("builtin.module(kgc-cse{max=1)", 30),
    ("builtin.module(kgc-cse) extra", 25),
    ("", 1),
])
def test_parse_pipeline_syntax_errors_name_the_column(text, column):
    with pytest.raises(PipelineSyntaxError) as info:
        parse_pipeline(text)
    assert info.value.column == column
    assert f"at column {column}" in str(info.value)


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def test_run_kgc_and_upstream_passes_on_a_parsed_module(context):
    module = parse(context)
    Pipeline.parse("builtin.module(kgc-cse,kgc-dce,canonicalize)").run(module)
    assert module.verify()
    assert body_op_names(module, "duplicates") == ["kg.exp", "kg.add", "func.return"]
    assert body_op_names(module, "constants") == ["arith.constant", "arith.addi", "func.return"]


def test_run_built_pipeline_equals_parsed_pipeline(context):
    built = Pipeline().add(KgcCSE).add("kgc-dce")
    built.nest("func.func").add("canonicalize")
    first, second = parse(context), parse(context)
    built.run(first)
    Pipeline.parse(str(built)).run(second)
    assert str(first) == str(second)
    assert body_op_names(first, "duplicates") == ["kg.exp", "kg.add", "func.return"]


def test_kgc_pass_nested_on_functions_runs_on_each(context):
    module = parse(context)
    pipeline = Pipeline()
    pipeline.nest("func.func").add("kgc-cse").add("kgc-dce")
    pipeline.run(module)
    assert body_op_names(module, "duplicates") == ["kg.exp", "kg.add", "func.return"]


def test_run_accepts_an_ir_module(context):
    module = ir.Module.parse(DUPLICATES)
    Pipeline().add("kgc-cse").add("kgc-dce").run(module)
    assert body_op_names(module.operation, "duplicates") == ["kg.exp", "kg.add", "func.return"]


def test_kgc_pass_options_reach_the_pass(context):
    module = parse(context)
    Pipeline.parse("builtin.module(test-pipeline-api-hint{factor=7 label=x sizes=1,2})").run(module)
    assert str(module.attributes["test.hint"]) == '"7 x True [1, 2]"'


def test_upstream_pass_options_reach_the_pass(context):
    module = parse(context)
    Pipeline().add("canonicalize", enable_patterns="Nothing").run(module)
    # Constants fold, but no pattern combines the two additions.
    assert body_op_names(module, "constants").count("arith.addi") == 2


def test_ir_printing_after_a_pass(context, capfd):
    module = parse(context)
    pipeline = Pipeline().add("kgc-cse").add("kgc-dce").add("canonicalize")
    pipeline.run(module, ir_printing=IRPrinting(after=frozenset({"kgc-dce", "canonicalize"})))
    err = capfd.readouterr().err
    assert "// -----// IR Dump After KgcDCE (kgc-dce) //----- //" in err
    assert "// -----// IR Dump After Canonicalizer (canonicalize) //----- //" in err
    assert "KgcCSE" not in err


def test_ir_printing_before_all_passes(context, capfd):
    module = parse(context)
    Pipeline().add("kgc-cse").add("cse").run(module, ir_printing=IRPrinting(before=frozenset({ALL_PASSES})))
    err = capfd.readouterr().err
    assert err.count("IR Dump Before") == 2
    assert "IR Dump Before KgcCSE (kgc-cse)" in err
    assert "IR Dump Before CSE (cse)" in err


def test_timing_report(context, capfd):
    module = parse(context)
    Pipeline().add("kgc-cse").add("canonicalize").run(module, timing=True)
    err = capfd.readouterr().err
    assert "Execution time report" in err
    assert "KgcCSE" in err and "Canonicalizer" in err


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def test_unknown_pass_is_a_pipeline_error_before_running(context):
    pipeline = Pipeline().add("kgc-cse").add("no-such-pass")
    with pytest.raises(PipelineError, match="'no-such-pass' is not a valid pass"):
        pipeline.validate()
    module = parse(context)
    before = str(module)
    with pytest.raises(PipelineError, match="no-such-pass"):
        pipeline.run(module)
    assert str(module) == before  # nothing ran


def test_unknown_pass_in_parsed_text(context):
    with pytest.raises(PipelineError, match="no-such-pass"):
        Pipeline.parse("builtin.module(func.func(no-such-pass))").validate()


def test_unknown_option_of_a_kgc_pass():
    with pytest.raises(PipelineError, match="pass 'kgc-cse' has no option 'bogus'"):
        Pipeline().add("kgc-cse", bogus=1)
    with pytest.raises(PipelineError, match="pass 'kgc-dce' has no option 'bogus'"):
        Pipeline().add(KgcDCE, bogus=1)
    with pytest.raises(PipelineError, match="has no option 'bogus'"):
        Pipeline.parse("builtin.module(func.func(kgc-cse{bogus=1}))")


def test_bad_option_value_of_a_kgc_pass():
    with pytest.raises(PipelineError, match="option 'factor' expects an integer, got 'many'"):
        Pipeline.parse("builtin.module(test-pipeline-api-hint{factor=many})")
    with pytest.raises(PipelineError, match="option 'sizes' expects a comma-separated list"):
        Pipeline.parse("builtin.module(test-pipeline-api-hint{sizes=1,x})")


@pytest.mark.parametrize("target", [-90, 1, 75, 91, 1000])
def test_target_option_out_of_range(target):
    message = (f"option 'target' of pass 'kg-legalize-dot' must be one of 80, 86, 87, 89, 90, "
               f"100, 101, 120; got '{target}'")
    with pytest.raises(PipelineError) as raised:
        Pipeline().add("kg-legalize-dot", target=target)
    assert str(raised.value) == f"error: {message}"
    with pytest.raises(PipelineError) as raised:
        Pipeline.parse(f"builtin.module(kg-legalize-dot{{target={target}}})")
    assert str(raised.value) == f"error: {message}"


def test_bad_option_of_an_upstream_pass():
    with pytest.raises(PipelineError, match="canonicalize"):
        Pipeline().add("canonicalize", max_iterations="many").validate()
    with pytest.raises(PipelineError, match="canonicalize"):
        Pipeline().add("canonicalize", no_such_option=1).validate()


def test_options_go_to_the_constructor_of_an_instance():
    with pytest.raises(PipelineError, match="constructor"):
        Pipeline().add(KgcCSE(), bogus=1)


def test_adding_something_that_is_not_a_pass():
    with pytest.raises(PipelineError, match="expected a pass or a pass name"):
        Pipeline().add(42)
    with pytest.raises(PipelineError):
        Pipeline().add(dict)


@pytest.mark.parametrize("text", [
    "builtin.module(kgc-cse",
    "builtin.module(kgc-cse,,kgc-dce)",
    "builtin.module(kgc-cse{bogus=1)",
    "builtin.module(kgc-cse))",
])
def test_malformed_text_is_a_pipeline_error(text):
    with pytest.raises(PipelineError, match="invalid pass pipeline: .* at column"):
        Pipeline.parse(text)


def test_pipeline_error_is_a_kgc_error_with_diagnostics():
    with pytest.raises(KgcError) as info:
        Pipeline().add("kgc-cse", bogus=1)
    assert isinstance(info.value, PipelineError)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.severity == "error"
    assert "bogus" in diagnostic.message


def test_nesting_on_the_wrong_anchor_fails_to_run(context):
    module = parse(context)
    with pytest.raises(KgcError, match="can't run 'func.func' pass manager on 'builtin.module'"):
        Pipeline.parse("func.func(cse)").run(module)


def test_walking_tritons_ops_searches_for_no_module(monkeypatch):
    # MLIR's bindings look for the module of an op's namespace whenever they
    # wrap it, and searched again at every tt op while none was found: a
    # compile tried thousands of imports of `mlir.dialects.tt`.
    import importlib._bootstrap as bootstrap

    g = kgc.Graph("walked")
    x, w = g.input("x", (3, 40), "f16"), g.input("w", (40, 24), "f16")
    g.output(g.softmax(g.matmul(x, w)))
    kgc.compile(g, cache=False)
    searched = []
    real = bootstrap._find_and_load
    monkeypatch.setattr(bootstrap, "_find_and_load",
                        lambda name, import_: searched.append(name) or real(name, import_))
    kgc.compile(g, cache=False)
    assert not [name for name in searched if name.endswith(".tt")]


@pytest.mark.parametrize("sm", [80, 90, 120])
def test_the_default_pipelines_pieces_parse_for_each_target_with_it(sm):
    # The pieces the search, explain and the tuned-defaults builder run:
    # every pass with a `target` option gets the target, none a placeholder.
    from kgc.pipeline.stages import (decomposition_pipeline_text, default_pipeline_text,
                                     fusion_pipeline_text, kernel_pipeline_text)

    texts = [decomposition_pipeline_text(sm), fusion_pipeline_text("", sm),
             kernel_pipeline_text(sm), default_pipeline_text(sm)]
    for text in texts:
        assert "{target}" not in text, text
        Pipeline.parse(text)
    assert f"kg-split-reduction{{target={sm}}}" in texts[0]
    assert texts[1].startswith(texts[0][:-1])
