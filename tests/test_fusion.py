"""Fusion as data (kgc.fusion): partitions and their text form, the checks
of a given partition, the candidate partitions of a function, and kg-fuse
materializing each of them."""

from __future__ import annotations

import importlib.resources

import pytest
from mlir import ir

import kgc
from kgc.fusion import (FusionDecisions, FusionGraph, InvalidPartition, Partition,
                        greedy_partition, propose_partitions)
from kgc.parsing import parse_text
from kgc.passes import PassFailure
from kgc.passes.fuse import materialize
from kgc.pipeline import Pipeline
from kgc.tiling.kernel_ops import knob, ops_named
from kgc.tiling.planner import Planner
from kgc.tiling.registry import register_schedule, unregister_schedule
from kgc.tiling.schedule import Schedule
from tests.cases import ALL_CASES

BEFORE_FUSION = "builtin.module(kgc-cse,kgc-dce,kg-decompose,kgc-cse)"
AFTER_FUSION = ("builtin.module(kg-tile,kg-legalize-dot{target=90},kg-pad-mask,convert-kg-to-ttir,"
                "kgc-cse,kgc-dce)")


def _case(name: str):
    return next(c for c in ALL_CASES if c.name == name)


def _decomposed(context: ir.Context, source) -> ir.Operation:
    """A module of kg primitives from a kgc.Graph or MLIR text."""
    module = source.build(context) if isinstance(source, kgc.Graph) else \
        parse_text(source, "<test>", context)
    Pipeline.parse(BEFORE_FUSION).run(module)
    return module


def _function(module: ir.Operation) -> ir.Operation:
    return ops_named(module.operation, "func.func")[0]


def _example_text() -> str:
    return importlib.resources.files("kgc.examples").joinpath("rmsnorm_matmul.mlir").read_text()


def _proposals(source) -> list[Partition]:
    with ir.Context() as context:
        module = _decomposed(context, source)
        return propose_partitions(_function(module))


# -- the text form -----------------------------------------------------------


@pytest.mark.parametrize("text", ["0,1,2;3;4,5", "0", "0;1;2", "3,7;0,1,2", ""])
def test_partition_text_round_trips(text):
    partition = Partition.parse(text)
    assert Partition.parse(str(partition)) == partition
    assert str(Partition.parse(str(partition))) == str(partition)


def test_partition_text_is_canonical():
    # Groups and positions sorted: one partition, one text.
    assert str(Partition.parse(" 5,4 ; 2,0,1 ;3")) == "0,1,2;3;4,5"
    assert Partition.parse("3;1,0") == Partition.of([[0, 1], [3]])
    assert Partition.parse("0;1") != Partition.parse("0,1")


@pytest.mark.parametrize("text, bad", [("0,x", "'x'"), ("0;;1", "''"), ("0-2", "'0-2'"),
                                       ("-1", "'-1'")])
def test_partition_text_errors_name_the_bad_item(text, bad):
    with pytest.raises(InvalidPartition, match=f"group .* has {bad} where an op position"):
        Partition.parse(text)


# -- checks against a function ------------------------------------------------

SMALL = """
func.func @small(%x: tensor<16x128xf32>, %w: tensor<128x512xf32>) -> tensor<16x512xf32> {
  %c = kg.constant 2.0 : tensor<f32>
  %e = kg.exp %x : tensor<16x128xf32>
  %dead = kg.neg %e : tensor<16x128xf32>
  %m = kg.matmul %e, %w : (tensor<16x128xf32>, tensor<128x512xf32>) -> tensor<16x512xf32>
  %y = kg.mul %m, %c : (tensor<16x512xf32>, tensor<f32>) -> tensor<16x512xf32>
  %s = kg.reduce max %m dims [1] keepdim : tensor<16x512xf32> -> tensor<16x1xf32>
  %z = kg.sub %y, %s : (tensor<16x512xf32>, tensor<16x1xf32>) -> tensor<16x512xf32>
  return %z : tensor<16x512xf32>
}
"""


def _check(text: str) -> list:
    with ir.Context() as context:
        module = parse_text(SMALL, "<test>", context)
        return Partition.parse(text).groups_in(FusionGraph.of_function(_function(module)))


def test_a_valid_partition_gives_its_groups():
    assert [[node.op for node in group] for group in _check("6;1,3,4;5")] == \
        [["exp", "matmul", "mul"], ["reduce"], ["sub"]]


@pytest.mark.parametrize("text, message", [
    ("1,3,4,5,6;9", r"op 9 does not exist; the function has 7 fusable ops \(0 to 6\)"),
    ("0,1,3,4,5,6", r"op 0 \(kg.constant\) is a constant, which is copied"),
    ("1,2,3,4,5,6", r"op 2 \(kg.neg\) is dead"),
    ("1,3,4;4,5,6", r"op 4 \(kg.mul\) is in groups 0 and 1"),
    ("1,3,4,5", r"op 6 \(kg.sub\) is in no group"),
    ("1,4;3,5,6", r"groups .* read each other's results in a cycle"),
    # The epilogue's max runs down the columns, across the programs of m.
    ("1;3,4,5,6", r"group 1 \(ops 3,4,5,6\) cannot be one kernel"),
])
def test_invalid_partitions_say_why(text, message):
    with pytest.raises(InvalidPartition, match=message) as raised:
        _check(text)
    assert f"partition '{Partition.parse(text)}' of @small" in raised.value.message


def test_an_invalid_partition_fails_materialize_at_the_op():
    with ir.Context() as context:
        module = parse_text(SMALL, "<test>", context)
        with pytest.raises(PassFailure, match=r"op 6 \(kg.sub\) is in no group") as raised:
            materialize(_function(module), Partition.parse("1,3,4,5"))
        assert "<test>\":9:" in str(raised.value.location)


# -- proposals ----------------------------------------------------------------


def test_the_example_proposes_the_norm_apart_folded_and_no_fusion():
    proposals = _proposals(_example_text())
    assert [len(p.groups) for p in proposals] == [2, 1, 11]
    unfolded, folded, unfused = proposals
    # Over 4096 k steps the matmul schedule refuses the fold by default
    # (`norm-over-long-k`): the matmul (the last op) is a kernel of its own.
    assert unfolded.origin == "default"
    assert folded.origin == "norm-over-long-k=false"
    # Turned off, the fold moves the whole RMSNorm into the matmul's kernel.
    assert unfolded.groups[1] == (folded.groups[0][-1],)
    assert unfolded.groups[0] == folded.groups[0][:-1]
    assert unfused.origin == "no fusion"
    assert all(len(group) == 1 for group in unfused.groups)


def test_a_norm_over_a_short_k_loop_is_folded_by_default():
    # 500 k steps: the fold saves the norm's kernel (benchmarks/NOTES.md).
    proposals = _proposals(_case("rmsnorm_matmul-13x500x100").graph("f16"))
    assert [(len(p.groups), p.origin) for p in proposals][:2] == [
        (1, "default"), (2, "fold-rms-norm=false")]


def test_gated_mlp_proposals():
    # matmul(x, w1) 0, silu 1, matmul(x, w2) 2, mul 3.
    proposals = _proposals(_case("gated_mlp-64x512x1024").graph("f32"))
    assert [(str(p), p.origin) for p in proposals] == [
        ("0,1,2,3", "default"),
        ("0;1,3;2", "fuse-epilogue=false"),
        ("0,1,3;2", "merge-siblings=false"),
        ("0;1;2;3", "no fusion"),
    ]


@pytest.mark.parametrize("name", ["shared_input_projections-3x1000x17",
                                  "shared_input_projections-1x4097x500"])
def test_skinny_products_of_one_input_are_one_kernel(name):
    # transpose 0, x @ wk^T 1, transpose 2, x @ wv^T 3.
    proposals = {p.origin: str(p) for p in _proposals(_case(name).graph("f16"))}
    assert proposals["default"] == "0,1,2,3"
    assert proposals["merge-shared-input=false"] == "0,1;2,3"


def test_products_of_one_input_past_a_few_rows_stay_apart():
    # 17 rows: the products may be library calls or tiled for rows, where
    # one kernel of two accumulators is no launch saved worth its registers.
    graph = kgc.Graph("siblings")
    x = graph.input("x", (17, 1000), "f16")
    wk, wv = graph.input("wk", (64, 1000), "f16"), graph.input("wv", (64, 1000), "f16")
    graph.output(graph.matmul(x, graph.transpose(wk, (1, 0))),
                 graph.matmul(x, graph.transpose(wv, (1, 0))))
    assert [str(p) for p in _proposals(graph)][0] == "0,1;2,3"


def test_attention_proposals_are_distinct_and_default_first():
    proposals = _proposals(_case("attention-1x1x300x40").graph("f32"))
    texts = [str(p) for p in proposals]
    assert len(set(texts)) == len(texts) == 8
    # transpose 0, q @ k^T 1, softmax 2-6, @ v 7: one attention kernel; without
    # it the scores (n = 300) are too wide for an epilogue, so the softmax is
    # the second matmul's prologue.
    assert texts[0] == "0,1,2,3,4,5,6,7"
    assert "0,1;2,3,4,5,6,7" in texts  # fuse-attention=false
    assert texts[-1] == "0;1;2;3;4;5;6;7"
    assert "0,1;2,3,4,5,6;7" in texts  # fold-rms-norm=false: softmax alone
    assert "0;1;2,3,4,5,6,7" in texts  # fuse-prologue=false: transpose alone


def test_a_function_with_nothing_to_compute_has_one_empty_partition():
    proposals = _proposals("""
func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
""")
    assert proposals == [Partition(())]
    assert Partition.parse(str(proposals[0])) == proposals[0]


def test_every_combination_of_decisions_gives_a_proposed_partition():
    import itertools

    with ir.Context() as context:
        module = _decomposed(context, _case("attention-2x4x100x64").graph("f16"))
        graph = FusionGraph.of_function(_function(module))
        proposed = propose_partitions(graph)
        names = FusionDecisions.names()
        for values in itertools.product([True, False], repeat=len(names)):
            decisions = FusionDecisions(*values)
            assert greedy_partition(graph, decisions).partition in proposed, decisions


def test_groups_are_planned_once(monkeypatch):
    calls = _count_plans(monkeypatch)
    with ir.Context() as context:
        module = _decomposed(context, _case("attention-2x4x100x64").graph("f16"))
        graph = FusionGraph.of_function(_function(module))
        propose_partitions(graph)
        first = len(calls)
        propose_partitions(graph)
        greedy_partition(graph, FusionDecisions(fuse_epilogue=False))
    assert first > 0
    assert len(calls) == first


@pytest.mark.parametrize("source", ["example", "gated_mlp-17x100x33", "attention-2x4x100x64",
                                    "layernorm_then_softmax-17x1000"])
def test_every_proposal_materializes_and_compiles_to_ttir(source):
    def fresh(context):
        graph = _example_text() if source == "example" else _case(source).graph("f16")
        return _decomposed(context, graph)

    with ir.Context() as context:
        module = fresh(context)
        proposals = propose_partitions(_function(module))
    for partition in proposals:
        with ir.Context() as context:
            context.allow_unregistered_dialects = True
            module = fresh(context)
            materialize(_function(module), partition)
            assert len(ops_named(module.operation, "kg.kernel")) == len(partition.groups)
            Pipeline.parse(AFTER_FUSION).run(module)
            # One tt.func per kernel, or two where kg-tile split a matmul's
            # k loop (a partials kernel and the kernel summing them).
            functions = [ir.StringAttr(f.attributes["sym_name"]).value
                         for f in ops_named(module.operation, "tt.func")]
            kernels = {name.removesuffix("_partials").removesuffix("_reduce")
                       for name in functions}
            assert len(kernels) == len(partition.groups), (partition, functions)


def test_the_default_proposal_is_what_kg_fuse_makes():
    with ir.Context() as context:
        default = _proposals(_case("gated_mlp-17x100x33").graph("f32"))[0]
        by_pass = _decomposed(context, _case("gated_mlp-17x100x33").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse)").run(by_pass)
        by_partition = _decomposed(context, _case("gated_mlp-17x100x33").graph("f32"))
        materialize(_function(by_partition), default)
        assert str(by_pass) == str(by_partition)


# -- the pass's options ---------------------------------------------------------


def test_kg_fuse_options_print_and_parse_back():
    pipeline = Pipeline().add("kg-fuse", partition="0,2;1,3", function="f", fold_rms_norm=False)
    text = str(pipeline)
    assert text == "builtin.module(kg-fuse{partition=0,2;1,3 function=f fold-rms-norm=false})"
    assert str(Pipeline.parse(text)) == text


def test_kg_fuse_takes_a_partition_from_python():
    with ir.Context() as context:
        module = _decomposed(context, _case("gated_mlp-17x100x33").graph("f32"))
        Pipeline().add("kg-fuse", partition="0,1;2,3").run(module)
        kernels = ops_named(module.operation, "kg.kernel")
        assert [ir.StringAttr(k.attributes["sym_name"]).value for k in kernels] == \
            ["gated_mlp_17x100x33_0_matmul", "gated_mlp_17x100x33_1_matmul"]


# -- plans reused by kg-tile and kernel signatures --------------------------------


def _count_plans(monkeypatch) -> list:
    """Counts the plans every schedule makes from now on."""
    from kgc.tiling.registry import schedules

    calls = []
    for schedule in schedules().values():
        def counting(*args, real=schedule.plan, **kwargs):
            calls.append(1)
            return real(*args, **kwargs)
        monkeypatch.setattr(schedule, "plan", counting)
    return calls


def test_kg_tile_reuses_the_plans_of_kg_fuse_in_one_pipeline(monkeypatch):
    calls = _count_plans(monkeypatch)
    with ir.Context() as context:
        module = _decomposed(context, _case("attention-1x1x300x40").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse)").run(module)
        fusing = len(calls)
        assert fusing
        calls.clear()
        module = _decomposed(context, _case("attention-1x1x300x40").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse,kg-tile)").run(module)
        assert ops_named(module.operation, "kg.tile_store")
    assert len(calls) == fusing


def test_a_planner_given_to_two_pipelines_plans_once(monkeypatch):
    calls = _count_plans(monkeypatch)
    planner = Planner()
    with ir.Context() as context:
        module = _decomposed(context, _case("attention-1x1x300x40").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse)").run(module, planner=planner)
        assert calls and planner.made == len(calls)
        calls.clear()
        Pipeline.parse("builtin.module(kg-tile)").run(module, planner=planner)
    assert calls == []


def test_kg_tile_alone_plans_the_kernels_it_was_given(monkeypatch):
    # A fused file tiled by a pipeline of its own (kgc-opt --kg-tile): no
    # plan was made in this run, so kg-tile plans each kernel.
    calls = _count_plans(monkeypatch)
    with ir.Context() as context:
        module = _decomposed(context, _case("gated_mlp-17x100x33").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse)").run(module)
        fused = str(module)
        kernels = len(ops_named(module.operation, "kg.kernel"))
    calls.clear()
    with ir.Context() as context:
        module = parse_text(fused, "fused.mlir", context)
        Pipeline.parse("builtin.module(kg-tile)").run(module)
        assert len(ops_named(module.operation, "kg.tile_store")) >= kernels
    assert len(calls) == kernels


def test_kg_tile_plans_a_kernel_whose_body_kg_fuse_changed(monkeypatch):
    # f16 math runs in f32 between casts; kg-fuse drops the round trip
    # between silu and mul, so the body is no longer the group it planned.
    calls = _count_plans(monkeypatch)
    planner = Planner()
    with ir.Context() as context:
        module = _decomposed(context, _case("gated_mlp-17x100x33").graph("f16"))
        Pipeline.parse("builtin.module(kg-fuse)").run(module, planner=planner)
        calls.clear()
        Pipeline.parse("builtin.module(kg-tile)").run(module, planner=planner)
    assert len(calls) == 1


def test_kg_tile_plans_again_for_a_kernel_with_knobs(monkeypatch):
    calls = _count_plans(monkeypatch)
    planner = Planner()
    with ir.Context() as context:
        module = _decomposed(context, _case("matmul-128x256x192").graph("f32"))
        Pipeline.parse("builtin.module(kg-fuse)").run(module, planner=planner)
        kernel = ops_named(module.operation, "kg.kernel")[0]
        kernel.attributes["config"] = ir.DictAttr.get(
            {"block_m": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 32)})
        calls.clear()
        Pipeline.parse("builtin.module(kg-tile)").run(module, planner=planner)
        tiled = ops_named(module.operation, "kg.kernel")[0]
        assert knob(tiled, "block_m") == 32
    assert len(calls) == 1


def test_plans_do_not_outlive_their_planner(monkeypatch):
    # Two compiles of one graph plan it twice: nothing is kept between
    # pipeline runs but a planner a caller hands on.
    calls = _count_plans(monkeypatch)
    counts = []
    for _ in range(2):
        calls.clear()
        with ir.Context() as context:
            module = _decomposed(context, _case("matmul-128x256x192").graph("f32"))
            Pipeline.parse("builtin.module(kg-fuse,kg-tile)").run(module)
        counts.append(len(calls))
    assert counts[0] > 0 and counts[1] == counts[0]


def test_signatures_name_a_groups_content():
    def signatures(graph_source):
        with ir.Context() as context:
            module = _decomposed(context, graph_source)
            graph = FusionGraph.of_function(_function(module))
            # Without the attention fusion (and with skinny-prologue off):
            # two kernels (scores, then the softmax with P V).
            decisions = FusionDecisions(fuse_attention=False,
                                        rules_off=frozenset({"skinny-prologue"}))
            return [graph.signature(g) for g in greedy_partition(graph, decisions).groups]

    small, again = (signatures(_case("attention-1x1x300x40").graph("f32")) for _ in range(2))
    assert small == again and len(set(small)) == 2
    # The scores' kernel (the transpose and the matmul) of another function
    # with the same shapes has the same name; other shapes, another.
    g = kgc.Graph("scores")
    q, k = g.input("q", (1, 1, 300, 40), "f32"), g.input("k", (1, 1, 300, 40), "f32")
    g.output(g.matmul(q, g.transpose(k, (0, 1, 3, 2))))
    assert signatures(g) == small[:1]
    assert signatures(_case("attention-2x4x100x64").graph("f32"))[0] != small[0]


@pytest.mark.parametrize("name, dtype", [("attention-2x4x100x64", "f32"),
                                         ("rmsnorm_matmul-13x500x100", "bf16"),
                                         ("layernorm_then_softmax-17x1000", "f32")])
def test_a_reused_plan_tiles_as_a_fresh_one(name, dtype):
    def tiled(shared: bool) -> str:
        with ir.Context() as context:
            module = _decomposed(context, _case(name).graph(dtype))
            if shared:
                Pipeline.parse("builtin.module(kg-fuse,kg-tile)").run(module)
            else:
                Pipeline.parse("builtin.module(kg-fuse)").run(module)
                Pipeline.parse("builtin.module(kg-tile)").run(module)
            return str(module)

    assert tiled(shared=True) == tiled(shared=False)


# -- fusion rules of schedules -------------------------------------------------


class _GatherBias(Schedule):
    """Plans nothing; its fusion rule gathers a matmul and the add of its
    result, which kg-fuse would otherwise leave apart without epilogues."""

    kind = "gather_bias_probe"
    fusion_rule = "gather-bias"

    def match(self, order):
        return False

    def fusion_pattern(self, node, users, escapes):
        if node.op == "add" and node.operands[0].op == "matmul":
            return frozenset({id(node), id(node.operands[0])})
        return None


@pytest.fixture
def gather_bias():
    schedule = register_schedule(_GatherBias())
    yield schedule
    unregister_schedule(schedule.kind)


def _biased_matmul_groups(decisions: FusionDecisions):
    g = kgc.Graph("biased")
    x, w = g.input("x", (17, 33), "f32"), g.input("w", (33, 5), "f32")
    b = g.input("b", (17, 5), "f32")
    g.output(g.add(g.matmul(x, w), b))
    with ir.Context() as context:
        module = _decomposed(context, g)
        result = greedy_partition(FusionGraph.of_function(_function(module)), decisions)
        return [[n.op for n in group] for group in result.groups], result.kinds_made


def test_a_registered_schedule_gathers_its_pattern_under_its_own_rule(gather_bias):
    no_epilogue = FusionDecisions(fuse_epilogue=False)
    groups, made = _biased_matmul_groups(no_epilogue)
    assert groups == [["matmul", "add"]] and made == {"gather-bias"}
    # Its rule is no field of FusionDecisions, and still turns off.
    groups, made = _biased_matmul_groups(no_epilogue.without("gather-bias"))
    assert groups == [["matmul"], ["add"]] and "gather-bias" not in made
    assert str(no_epilogue.without("gather-bias")) == "fuse-epilogue=false gather-bias=false"


def test_without_the_schedule_no_rule_gathers():
    groups, made = _biased_matmul_groups(FusionDecisions(fuse_epilogue=False))
    assert groups == [["matmul"], ["add"]] and not made


# -- a costly prologue once ----------------------------------------------------


def _silu_product(m: int, n: int) -> kgc.Graph:
    """SiLU(gate) * up times W^T (Phi-3's down projection)."""
    graph = kgc.Graph(f"silu_product_{m}_{n}")
    gate, up = graph.input("gate", (m, 1376), "f16"), graph.input("up", (m, 1376), "f16")
    w = graph.input("w", (n, 1376), "f16")
    graph.output(graph.matmul(graph.mul(graph.silu(gate), up), graph.transpose(w, [1, 0])))
    return graph


def _kernels_after_fusion(source, options: str = "") -> list[str]:
    from kgc.tiling.kernel_ops import kernel_name, kernels_in

    with ir.Context() as context:
        module = _decomposed(context, source)
        Pipeline.parse(f"builtin.module(kg-fuse{{{options}}})").run(module)
        return ["_".join(kernel_name(kernel).rsplit("_", 2)[-2:]) for kernel in kernels_in(module)]


@pytest.mark.parametrize("m", [1, 64])
def test_a_costly_prologue_is_a_kernel_of_its_own_where_programs_along_n_would_repeat_it(m):
    # 512 columns make several programs along n, each of which would compute
    # SiLU(gate) * up for its whole k loop again: the product is its own
    # kernel. The rule turned off (the search tries it) fuses it.
    assert _kernels_after_fusion(_silu_product(m, 512)) == ["0_pointwise", "1_matmul"]
    assert _kernels_after_fusion(_silu_product(m, 512), "rules-off=prologue-once") == ["0_matmul"]


def test_a_prologue_one_program_computes_once_or_of_multiplies_stays_in():
    # 16 columns: one program along n computes the prologue once.
    assert _kernels_after_fusion(_silu_product(1, 16)) == ["0_matmul"]
    # A norm's scale, x * r * gamma: multiplies, cheap to repeat.
    graph = kgc.Graph("scaled_product")
    x, r = graph.input("x", (1, 512), "f16"), graph.input("r", (1, 1), "f16")
    gamma, w = graph.input("gamma", (512,), "f16"), graph.input("w", (2048, 512), "f16")
    graph.output(graph.matmul(graph.mul(graph.mul(x, r), gamma), graph.transpose(w, [1, 0])))
    assert _kernels_after_fusion(graph) == ["0_matmul"]


@pytest.mark.parametrize("rows,fused", [(1, True), (16, True), (17, False), (64, False)])
def test_a_norm_folds_into_a_skinny_product_alone_even_where_few_programs_repeat_it(rows, fused):
    # 256 columns, 512 k: four programs along n would repeat the norm, few
    # enough for a prologue, but past 16 rows its programs walk their rows'
    # k for the statistics, the dot and the stores where a norm kernel
    # spreads the rows over the SMs (Gemma 2 at 64 tokens). The rule turned
    # off (the search tries it) folds it.
    graph = kgc.Graph("norm_then_product")
    x, gamma = graph.input("x", (rows, 512), "f16"), graph.input("gamma", (512,), "f16")
    w = graph.input("w", (512, 256), "f16")
    graph.output(graph.matmul(graph.rms_norm(x, gamma, eps=1e-6), w))
    folded = ["0_matmul"]
    assert (_kernels_after_fusion(graph) == folded) == fused
    assert _kernels_after_fusion(graph, "rules-off=skinny-prologue") == folded
