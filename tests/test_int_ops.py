"""Integer and boolean tensors, comparisons, selects, iotas and casts, through
every layer without a GPU: the reference interpreter and the tiled kernels
on the CPU against torch, on lengths that are not multiples of any tile
(1, 3, 17, 1000, 4097); Triton compiling the kernels for sm_90; the fusion
of a causal mask into its softmax; and the graph API's checks.
"""

from __future__ import annotations

import re

import pytest
from mlir import ir

import kgc
import kgc.reference
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.tiling.kernel_ops import kernels_in
from kgc.accuracy import mismatch
from tests.cases import tiled
from tests.comparison import as_tuple
from tests.int_cases import (ALL_CASES, assert_matches, causal_softmax_graph,
                             causal_softmax_reference, make_inputs, parameters, reference,
                             triu_graph)

torch = pytest.importorskip("torch")

_ids = lambda p: getattr(p, "name", p)  # noqa: E731


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("case,length", parameters(), ids=_ids)
def test_reference_matches_torch(case, length):
    inputs = make_inputs(case, length, "cpu", seed=length)
    got = as_tuple(kgc.reference.evaluate(case.graph(length).build(), None, inputs))
    for result, want in zip(got, reference(case, length, inputs), strict=True):
        assert_matches(result, want)


@pytest.mark.parametrize("case,length", parameters(), ids=_ids)
def test_tiled_kernels_match_torch(case, length):
    module = tiled(case.graph(length))
    assert kernels_in(module)
    for seed in (0, 1):
        inputs = make_inputs(case, length, "cpu", seed=seed)
        got = as_tuple(run_tiled(module, None, *inputs))
        for result, want in zip(got, reference(case, length, inputs), strict=True):
            assert_matches(result, want)


@pytest.mark.parametrize("case", ALL_CASES, ids=_ids)
def test_every_output_is_one_kernel(case):
    # Elementwise ops of any element type fuse like the float ones: each
    # output's chain of ops is one kernel (independent outputs are not
    # merged, for floats either).
    graph = case.graph(1000)
    assert len(kernels_in(tiled(graph))) == len(graph.outputs)


@pytest.mark.parametrize("case", ALL_CASES, ids=_ids)
def test_triton_compiles_every_case_for_sm90(case):
    with ir.Context() as context:
        module = case.graph(17).build(context)
        compiled = compile_module(module, emit="cubin", target=90)
    assert compiled.kernels
    assert all(kernel.asm.get("cubin") for kernel in compiled.kernels.values())


@pytest.mark.parametrize("n", [1, 3, 17, 100])
def test_causal_softmax_is_one_reduction_kernel(n):
    module = tiled(causal_softmax_graph(n))
    kernels = kernels_in(module)
    assert len(kernels) == 1
    assert ir.StringAttr(kernels[0].attributes["kind"]).value == "reduction"
    for seed in (0, 1):
        x = torch.randn((n, n), generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(run_tiled(module, None, x), causal_softmax_reference(x),
                                   atol=1e-6, rtol=1e-5)


def test_causal_softmax_in_f16_compiles_for_sm90():
    with ir.Context() as context:
        compiled = compile_module(causal_softmax_graph(1000, "f16").build(context), emit="cubin",
                                  target=90)
    assert len(compiled.kernels) == 1


@pytest.mark.parametrize("n", [1, 17, 130])
def test_triu_mask_is_one_kernel(n):
    module = tiled(triu_graph(n))
    # Of one element, the mask holds everywhere (kg-fold): the function
    # returns its argument and launches nothing.
    assert len(kernels_in(module)) == (0 if n == 1 else 1)
    a = torch.randint(1, 100, (n, n), dtype=torch.int32)
    assert torch.equal(run_tiled(module, None, a), torch.triu(a))


def test_mask_fuses_into_a_matmul_epilogue():
    g = kgc.Graph("masked_scores")
    q = g.input("q", (64, 32), "f16")
    k = g.input("k", (32, 64), "f16")
    scores = g.matmul(q, k)
    rows, cols = g.iota((64, 1), 0, "i32"), g.iota((1, 64), 1, "i32")
    g.output(g.where(g.ge(rows, cols), scores, float("-inf")))
    module = tiled(g)
    kernels = kernels_in(module)
    assert len(kernels) == 1
    assert ir.StringAttr(kernels[0].attributes["kind"]).value == "matmul"
    generator = torch.Generator().manual_seed(0)
    qs = torch.randn((64, 32), generator=generator).half()
    ks = torch.randn((32, 64), generator=generator).half()
    hidden = ~(torch.arange(64).reshape(64, 1) >= torch.arange(64))
    want = (qs.float() @ ks.float()).half().masked_fill(hidden, float("-inf"))
    exact = (qs.double() @ ks.double()).masked_fill(hidden, float("-inf"))
    got = run_tiled(module, None, qs, ks)
    assert torch.equal(got.isinf(), hidden)
    assert mismatch([got], [want], [exact]) is None


def test_integer_results_of_the_tiled_kernels_are_checked_exactly():
    # Every output element must be written: the executor's poison for an
    # integer buffer is no value the kernel computes here.
    g = kgc.Graph("positions")
    a = g.input("a", (4097,), "i64")
    g.output(a + g.arange(4097))
    module = tiled(g)
    a = torch.randint(1, 10, (4097,))
    assert torch.equal(run_tiled(module, None, a), a + torch.arange(4097))


# -- the graph API --------------------------------------------------------------


def test_comparisons_give_bool_tensors():
    g = kgc.Graph("g")
    x = g.input("x", (4, 8), "f16")
    i = g.input("i", (8,), "int32")
    assert (g.lt(x, 0.0).dtype, g.lt(x, 0.0).shape) == ("i1", (4, 8))
    assert g.eq(i, 3).dtype == "i1"
    assert g.cmp("ge", 0, i).shape == (8,)
    assert g.where(g.ne(i, 0), x, float("-inf")).dtype == "f16"
    assert (g.arange(3, 10).shape, g.arange(3, 10).dtype) == ((7,), "i64")
    assert g.iota((2, 5), -1, "bf16").dtype == "bf16"
    assert g.cast(g.gt(i, 1), "f32").dtype == "f32"
    assert g.constant(True, (), "bool").dtype == "i1"


@pytest.mark.parametrize("build, message", [
    (lambda g, x, i, b: g.exp(i), "exp: x (8,) i32 must be f32, f16 or bf16"),
    (lambda g, x, i, b: g.div(i, i), "div: lhs (8,) i32 must be f32, f16 or bf16"),
    (lambda g, x, i, b: g.add(b, b), "add: lhs (8,) i1 must be f32, f16, bf16, i32 or i64"),
    (lambda g, x, i, b: g.logical_and(i, b), "logical_and: lhs (8,) i32 must be i1 (bool)"),
    (lambda g, x, i, b: ~x, "logical_not: x (4, 8) f16 must be i1 (bool)"),
    (lambda g, x, i, b: g.add(i, 0.5),
     "add: scalar rhs 0.5 is not a whole number in the range of i32"),
    (lambda g, x, i, b: g.lt(i, 2.0**40), "is not a whole number in the range of i32"),
    (lambda g, x, i, b: g.cmp("ult", i, i), "cmp: predicate must be one of eq, ne, lt"),
    (lambda g, x, i, b: g.lt(x, i), "cmp: operands must share an element type"),
    (lambda g, x, i, b: g.where(x, x, x), "select: cond (4, 8) f16 must be i1 (bool)"),
    (lambda g, x, i, b: g.where(g.ne(i, 0), x, i),
     "select: true_value (4, 8) f16 and false_value (8,) i32 must share an element type"),
    (lambda g, x, i, b: g.where(g.gt(x, 0.0), g.reshape(i, (2, 4)), 1),
     "select: operands are not broadcast-compatible: cond (4, 8) i1, true_value (2, 4) i32"),
    (lambda g, x, i, b: g.iota((4, 8), 2), "iota: dim 2 is out of range for shape (4, 8)"),
    (lambda g, x, i, b: g.iota((), 0), "iota: shape () has no dimension"),
    (lambda g, x, i, b: g.iota((4,), 0, "bool"), "iota: dtype i1 must be f32, f16, bf16"),
    (lambda g, x, i, b: g.iota((8,), 0, "i32", start=2**31 - 4),
     "iota: counts from 2147483644 over 8 elements of dimension 0, beyond the i32 range"),
    (lambda g, x, i, b: g.arange(5, 2), "arange: end 2 is below start 5"),
    (lambda g, x, i, b: g.arange(2**53 - 4, 2**53 + 4), "beyond the range of 2^53 (i64)"),
    (lambda g, x, i, b: g.constant(2, (), "i1"), "constant: value 2 overflows i1"),
    (lambda g, x, i, b: g.matmul(g.reshape(i, (2, 4)), g.reshape(i, (4, 2))),
     "matmul: a (2, 4) i32 must be a float (f32, f16, bf16, f8e4m3 or f8e5m2)"),
    (lambda g, x, i, b: g.sum(i, 0), "sum: x (8,) i32 must be f32, f16 or bf16"),
])
def test_graph_errors_name_op_and_dtype(build, message):
    g = kgc.Graph("errors")
    x = g.input("x", (4, 8), "f16")
    i = g.input("i", (8,), "i32")
    b = g.input("b", (8,), "bool")
    with pytest.raises(kgc.GraphError) as raised:
        build(g, x, i, b)
    assert message in str(raised.value)


def test_a_failed_select_records_no_constant():
    g = kgc.Graph("g")
    x = g.input("x", (4, 8), "f32")
    i = g.input("i", (3,), "i32")
    mask = g.gt(i, 0)
    with pytest.raises(kgc.GraphError):
        g.where(mask, x, 0.0)
    g.output(mask)
    assert g.to_mlir().count("kg.constant") == 1  # the comparison's 0, not the select's


def test_c_export_documents_integer_and_bool_tensors(tmp_path):
    from kgc.export import export_c

    g = kgc.Graph("masks")
    a = g.input("a", (17, 3), "i32")
    g.output(g.gt(a, 0), g.cast(a, "i64"))
    export_c(kgc.compile(g, target="sm_90"), tmp_path)
    header = (tmp_path / "masks.h").read_text()
    # 17 * 3 elements of 4, 1 and 8 bytes.
    assert re.search(r"a\s+in\s+i32\[17x3\].*?204 bytes", header)
    assert re.search(r"i1\[17x3\].*?51 bytes", header)
    assert re.search(r"i64\[17x3\].*?408 bytes", header)


def test_the_search_checks_integer_and_bool_results_exactly():
    from kgc.search.verify import mismatch, random_inputs

    positions, flags = random_inputs([((4097,), "i32"), ((64,), "i1")], seed=3, device="cpu")
    assert positions.dtype == torch.int32 and (positions != 0).all()
    assert (positions < 0).any() and (positions > 0).any()
    assert flags.dtype == torch.bool and flags.any() and not flags.all()
    assert mismatch([positions], [positions], [positions]) is None
    wrong = positions.clone()
    wrong[17] += 1
    assert mismatch([wrong], [positions], [positions]) == \
        "result #0 differs from the reference in 1 elements"
    assert mismatch([~flags], [flags], [flags]) == \
        "result #0 differs from the reference in 64 elements"
