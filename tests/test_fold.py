"""kg-fold and kg-fuse's recompute-positions: masks built from positions
compile to the values the graph as written gives, and no kernel is left
that only computes them.

Each graph runs through the whole kg pipeline on the CPU executor and is
compared with `kgc.reference` on the graph as written: booleans and
integers exactly, floats by the shared accuracy rule.
"""

from __future__ import annotations

import pathlib

import pytest

from mlir import ir
from tests.kg_stage import compiled_to_kg, run_as_the_reference

torch = pytest.importorskip("torch")

LIT_FILE = pathlib.Path(__file__).parents[1] / "lit_tests" / "kg-fold.mlir"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _kernels(module: ir.Operation, function: str) -> list[ir.Operation]:
    from kgc.tiling.kernel_ops import walk_ops

    with module.context:
        for op in walk_ops(module.operation):
            if op.name == "func.func" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == function:
                return [k for k in walk_ops(op) if k.name == "kg.kernel"]
    raise AssertionError(f"no function @{function}")


@pytest.mark.parametrize("function, inputs", [
    ("packed_sequence_check", []),
    ("wrap_around", []),
    ("arithmetic", []),
    ("causal_stays", []),
    ("argument_stays",
     [lambda: torch.tensor([[0, 1, 2, 5, 6, 0, 1, 2, 3, 4, 9, 10, 11, 3, 4, 5]])]),
    ("zero_times_integers", [lambda: torch.randint(-50, 50, (8, 4), dtype=torch.int32)]),
    ("may_wrap_stays", []),
])
def test_the_lit_cases_compile_to_the_values_written(function, inputs):
    source, tiled = compiled_to_kg(LIT_FILE.read_text(), "kg-fold.mlir")
    got, eager = run_as_the_reference(source, tiled, function, [make() for make in inputs])
    for mine, theirs in zip(got if isinstance(got, tuple) else (got,),
                            eager if isinstance(eager, tuple) else (eager,)):
        assert torch.equal(mine, theirs)


def test_a_product_of_zeros_and_an_infinity_keeps_its_nan():
    source, tiled = compiled_to_kg(LIT_FILE.read_text(), "kg-fold.mlir")
    x = torch.randn(8, 4)
    x[3, 1] = float("inf")
    got, _ = run_as_the_reference(source, tiled, "zero_times_float_stays", [x])
    assert torch.isnan(got[:, 1]).all() and not torch.isnan(got[:, [0, 2, 3]]).any()


def _masked_attention(tokens: int, layers: int = 2) -> str:
    """`layers` attentions of one head (d = 16) over `tokens` positions,
    with the mask transformers builds when it checks for packed sequences
    (positions that rise one at a time, their cumulative sum as a product
    with a triangular matrix, gathered at the query's and the key's
    position) and adds to the scores."""
    n = tokens
    lines = [
        f"func.func @masked(%q: tensor<1x1x{n}x16xf16>, %k: tensor<1x1x16x{n}xf16>, "
        f"%v: tensor<1x1x{n}x16xf16>) -> tensor<1x1x{n}x16xf16> {{",
        f"  %pos = kg.iota dim 0 : tensor<{n}xi64>",
        "  %zero = kg.constant 0.0 : tensor<i64>",
        f"  %p0 = kg.add %pos, %zero : (tensor<{n}xi64>, tensor<i64>) -> tensor<{n}xi64>",
        f"  %p = kg.reshape %p0 : tensor<{n}xi64> -> tensor<1x{n}xi64>",
        f"  %first = kg.slice %p offsets [0, 0] strides [1, 1] : tensor<1x{n}xi64> -> "
        "tensor<1x1xi64>",
        "  %one = kg.constant 1.0 : tensor<i64>",
        "  %before = kg.sub %first, %one : (tensor<1x1xi64>, tensor<i64>) -> tensor<1x1xi64>",
        f"  %joined = kg.concat %before, %p dim 1 : (tensor<1x1xi64>, tensor<1x{n}xi64>) -> "
        f"tensor<1x{n + 1}xi64>",
        f"  %lo = kg.slice %joined offsets [0, 0] strides [1, 1] : tensor<1x{n + 1}xi64> -> "
        f"tensor<1x{n}xi64>",
        f"  %hi = kg.slice %joined offsets [0, 1] strides [1, 1] : tensor<1x{n + 1}xi64> -> "
        f"tensor<1x{n}xi64>",
        f"  %diff = kg.sub %hi, %lo : (tensor<1x{n}xi64>, tensor<1x{n}xi64>) -> tensor<1x{n}xi64>",
        f"  %starts = kg.cmp ne %diff, %one : (tensor<1x{n}xi64>, tensor<i64>) -> tensor<1x{n}xi1>",
        f"  %r = kg.iota dim 0 : tensor<{n}x{n}xi32>",
        f"  %c = kg.iota dim 1 : tensor<{n}x{n}xi32>",
        f"  %tri_b = kg.cmp le %r, %c : (tensor<{n}x{n}xi32>, tensor<{n}x{n}xi32>) -> "
        f"tensor<{n}x{n}xi1>",
        f"  %tri = kg.cast %tri_b : tensor<{n}x{n}xi1> to tensor<{n}x{n}xf16>",
        f"  %starts_f = kg.cast %starts : tensor<1x{n}xi1> to tensor<1x{n}xf16>",
        f"  %sum = kg.matmul %starts_f, %tri : (tensor<1x{n}xf16>, tensor<{n}x{n}xf16>) -> "
        f"tensor<1x{n}xf32>",
        f"  %seq = kg.cast %sum : tensor<1x{n}xf32> to tensor<1x{n}xi64>",
        f"  %seq1 = kg.reshape %seq : tensor<1x{n}xi64> -> tensor<{n}xi64>",
        f"  %q_seq = kg.gather %seq1[%pos] dim 0 : (tensor<{n}xi64>, tensor<{n}xi64>) -> "
        f"tensor<{n}xi64>",
        f"  %q_seq2 = kg.reshape %q_seq : tensor<{n}xi64> -> tensor<{n}x1xi64>",
        f"  %k_seq = kg.reshape %q_seq : tensor<{n}xi64> -> tensor<1x{n}xi64>",
        f"  %same = kg.cmp eq %q_seq2, %k_seq : (tensor<{n}x1xi64>, tensor<1x{n}xi64>) -> "
        f"tensor<{n}x{n}xi1>",
        f"  %qp = kg.reshape %pos : tensor<{n}xi64> -> tensor<{n}x1xi64>",
        f"  %causal = kg.cmp le %p, %qp : (tensor<1x{n}xi64>, tensor<{n}x1xi64>) -> "
        f"tensor<{n}x{n}xi1>",
        f"  %allowed = kg.logical_and %causal, %same : (tensor<{n}x{n}xi1>, tensor<{n}x{n}xi1>) -> "
        f"tensor<{n}x{n}xi1>",
        "  %fz = kg.constant 0.0 : tensor<f32>",
        "  %ninf = kg.constant 0xFFF0000000000000 : tensor<f32>",
        f"  %add = kg.select %allowed, %fz, %ninf : (tensor<{n}x{n}xi1>, tensor<f32>, tensor<f32>) "
        f"-> tensor<{n}x{n}xf32>",
    ]
    x = "%q"
    for layer in range(layers):
        lines += [
            f"  %s{layer} = kg.matmul {x}, %k : (tensor<1x1x{n}x16xf16>, tensor<1x1x16x{n}xf16>) -> "
            f"tensor<1x1x{n}x{n}xf32>",
            f"  %x{layer} = kg.add %s{layer}, %add : (tensor<1x1x{n}x{n}xf32>, tensor<{n}x{n}xf32>) "
            f"-> tensor<1x1x{n}x{n}xf32>",
            f"  %w{layer} = kg.softmax %x{layer} dim 3 : tensor<1x1x{n}x{n}xf32>",
            f"  %h{layer} = kg.cast %w{layer} : tensor<1x1x{n}x{n}xf32> to tensor<1x1x{n}x{n}xf16>",
            f"  %o{layer} = kg.matmul %h{layer}, %v : (tensor<1x1x{n}x{n}xf16>, "
            f"tensor<1x1x{n}x16xf16>) -> tensor<1x1x{n}x16xf16>",
        ]
        x = f"%o{layer}"
    lines += [f"  return {x} : tensor<1x1x{n}x16xf16>", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("tokens", [1, 3, 17, 100])
def test_a_packed_sequence_mask_is_computed_in_each_attention_that_reads_it(tokens):
    source, tiled = compiled_to_kg(_masked_attention(tokens), "masked.mlir")
    generator = torch.Generator().manual_seed(tokens)
    q, k, v = (torch.randn(shape, generator=generator).to(torch.float16) for shape in
               ((1, 1, tokens, 16), (1, 1, 16, tokens), (1, 1, tokens, 16)))
    run_as_the_reference(source, tiled, "masked", [q, k, v])
    kernels = _kernels(tiled, "masked")
    # No kernel computes the mask, the cumulative sum or positions alone;
    # past one key, two attention kernels read Q (or the last output), K
    # and V only.
    assert all(len(k.operands) > 0 for k in kernels)
    if tokens > 1:
        assert [ir.StringAttr(k.attributes["sym_name"]).value.rsplit("_", 1)[-1]
                for k in kernels] == ["attention", "attention"]
        assert all(len(k.operands) == 3 for k in kernels)


def test_without_recompute_positions_the_mask_is_a_kernel_of_its_own():
    from kgc.parsing import parse_text
    from kgc.pipeline.pipeline import Pipeline

    context = ir.Context()
    module = parse_text(_masked_attention(17), "masked.mlir", context)
    with context:
        Pipeline.parse("builtin.module(kg-decompose,kg-fold,kg-simplify,kgc-cse,kgc-dce,"
                       "kg-fuse{recompute-positions=false})").run(module)
    names = [ir.StringAttr(k.attributes["sym_name"]).value for k in _kernels(module, "masked")]
    assert len(names) == 3 and names[0].endswith("pointwise")


def test_every_partition_the_search_proposes_computes_the_mask_where_it_is_read():
    # The search compiles its partitions as given ones: kg-fuse rewrites
    # them as it rewrites its own, so none stores the mask.
    from kgc.fusion import propose_partitions
    from kgc.parsing import parse_text
    from kgc.tiling.kernel_ops import walk_ops
    from kgc.pipeline.pipeline import Pipeline

    before_fusion = "builtin.module(kg-decompose,kg-fold,kg-simplify,kgc-cse,kgc-dce)"
    context = ir.Context()
    module = parse_text(_masked_attention(17), "masked.mlir", context)
    with context:
        Pipeline.parse(before_fusion).run(module)
        function = next(op for op in walk_ops(module) if op.name == "func.func")
        proposals = propose_partitions(function)
    assert len(proposals) > 2
    for partition in proposals:
        given = parse_text(_masked_attention(17), "masked.mlir", context)
        with context:
            Pipeline.parse(before_fusion).run(given)
            Pipeline.parse(f"builtin.module(kg-fuse{{partition={partition} function=masked}})"
                           ).run(given)
        kernels = _kernels(given, "masked")
        assert kernels and all(len(k.operands) > 0 for k in kernels), (partition.origin,
                                                                      str(given))


# -- random position arithmetic, folded and not ------------------------------


def _random_positions_graph(data, rows: int, cols: int) -> str:
    """A function of no arguments computing integers and booleans of
    shape (rows, cols) from two iotas and constants: sums, differences,
    products by constants, negations, comparisons, choices, logical ops,
    conversions, and joins of windows of two values; it returns the last
    four."""
    from hypothesis import strategies as st

    full = f"tensor<{rows}x{cols}xi64>"
    flags = f"tensor<{rows}x{cols}xi1>"
    lines = [f"  %i0 = kg.iota dim 0 start {data.draw(st.integers(-3, 3))} : {full}",
             f"  %i1 = kg.iota dim 1 start {data.draw(st.integers(-3, 3))} : {full}"]
    ints, bools = ["%i0", "%i1"], []
    for step in range(data.draw(st.integers(3, 12))):
        name = f"%v{step}"
        kinds = ["sum", "scaled", "neg", "compare", "window"] + \
            (["choose", "logic", "widen"] if bools else [])
        kind = data.draw(st.sampled_from(kinds))
        if kind == "sum":
            op = data.draw(st.sampled_from(["add", "sub"]))
            a, b = data.draw(st.sampled_from(ints)), data.draw(st.sampled_from(ints))
            lines.append(f"  {name} = kg.{op} {a}, {b} : ({full}, {full}) -> {full}")
        elif kind == "scaled":
            lines.append(f"  {name}c = kg.constant {data.draw(st.integers(-3, 3))}.0 : tensor<i64>")
            lines.append(f"  {name} = kg.mul {data.draw(st.sampled_from(ints))}, {name}c : "
                         f"({full}, tensor<i64>) -> {full}")
        elif kind == "neg":
            lines.append(f"  {name} = kg.neg {data.draw(st.sampled_from(ints))} : {full}")
        elif kind == "compare":
            predicate = data.draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
            a, b = data.draw(st.sampled_from(ints)), data.draw(st.sampled_from(ints))
            lines.append(f"  {name} = kg.cmp {predicate} {a}, {b} : ({full}, {full}) -> {flags}")
            bools.append(name)
            continue
        elif kind == "window":
            # cols = k + (cols - k): a window of one value, then of another.
            a, b = data.draw(st.sampled_from(ints)), data.draw(st.sampled_from(ints))
            k = data.draw(st.integers(0, cols))
            pieces = []
            if k:
                lines.append(f"  {name}a = kg.slice {a} offsets [0, 0] strides [1, 1] : {full} -> "
                             f"tensor<{rows}x{k}xi64>")
                pieces.append((f"{name}a", k))
            if cols - k:
                lines.append(f"  {name}b = kg.slice {b} offsets [0, {k}] strides [1, 1] : {full} "
                             f"-> tensor<{rows}x{cols - k}xi64>")
                pieces.append((f"{name}b", cols - k))
            if len(pieces) == 1:
                name = pieces[0][0]
            else:
                types = ", ".join(f"tensor<{rows}x{n}xi64>" for _, n in pieces)
                lines.append(f"  {name} = kg.concat {', '.join(p for p, _ in pieces)} dim 1 : "
                             f"({types}) -> {full}")
        elif kind == "choose":
            c, a, b = (data.draw(st.sampled_from(bools)), data.draw(st.sampled_from(ints)),
                       data.draw(st.sampled_from(ints)))
            lines.append(f"  {name} = kg.select {c}, {a}, {b} : ({flags}, {full}, {full}) -> {full}")
        elif kind == "logic":
            op = data.draw(st.sampled_from(["logical_and", "logical_or"]))
            a, b = data.draw(st.sampled_from(bools)), data.draw(st.sampled_from(bools))
            lines.append(f"  {name} = kg.{op} {a}, {b} : ({flags}, {flags}) -> {flags}")
            bools.append(name)
            continue
        else:  # widen
            lines.append(f"  {name} = kg.cast {data.draw(st.sampled_from(bools))} : {flags} to "
                         f"{full}")
        ints.append(name)
    returned = (ints[2:] + bools)[-4:] or ints[-1:]
    types = [flags if r in bools else full for r in returned]
    return (f"func.func @positions() -> ({', '.join(types)}) {{\n" + "\n".join(lines) +
            f"\n  return {', '.join(returned)} : {', '.join(types)}\n}}\n")


def test_folding_random_position_arithmetic_keeps_every_value():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kgc import reference
    from kgc.parsing import parse_text
    from kgc.pipeline.pipeline import Pipeline
    from tests.comparison import as_tuple

    @settings(max_examples=150, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.data(), st.integers(1, 4), st.integers(1, 6))
    def check(data, rows, cols):
        text = _random_positions_graph(data, rows, cols)
        context = ir.Context()
        written = parse_text(text, "positions.mlir", context)
        folded = parse_text(text, "positions.mlir", context)
        with context:
            Pipeline.parse("builtin.module(kg-fold,kgc-dce)").run(folded)
            want = as_tuple(reference.evaluate(written, "positions", []))
            got = as_tuple(reference.evaluate(folded, "positions", []))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and torch.equal(g, w), f"{text}\n{folded}"

    check()
