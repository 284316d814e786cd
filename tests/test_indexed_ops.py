"""kg.gather and kg.scatter compiled to tiled kernels and run on the CPU
executor: at lengths that are no tile multiple, with repeated indices, in
every float type, against torch; the gather fused with what reads its rows;
out-of-range indices refused with the op, the index and its position; and
the graph API's own checks."""

from __future__ import annotations

import pytest

import kgc
from kgc.diagnostics import KgcError
from kgc.execution import TileProgramError, run_tiled
from kgc.graph import GraphError
from kgc.tiling.kernel_ops import kernel_name, kernels_in
from tests.cases import tiled

torch = pytest.importorskip("torch")

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
COUNTS = [1, 3, 17, 1000]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def indices_with_repeats(count: int, extent: int, generator) -> "torch.Tensor":
    indices = torch.randint(0, extent, (count,), generator=generator)
    if count > 1:
        indices[-1] = indices[0]
    return indices


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("count", COUNTS)
def test_a_gather_of_rows_is_index_select(count, dtype):
    generator = torch.Generator().manual_seed(count)
    graph = kgc.Graph("rows")
    table = graph.input("table", (37, 65), dtype)
    ids = graph.input("ids", (count,), "i64")
    graph.output(graph.gather(table, ids, 0))
    module = tiled(graph)
    assert [kernel_name(k) for k in kernels_in(module)] == ["rows_0_pointwise"]
    weights = torch.randn(37, 65, generator=generator).to(DTYPES[dtype])
    picked = indices_with_repeats(count, 37, generator)
    assert torch.equal(run_tiled(module, None, weights, picked), weights[picked])


@pytest.mark.parametrize("count", COUNTS)
def test_a_gather_along_the_last_dim_with_i32_indices(count):
    generator = torch.Generator().manual_seed(count + 1)
    graph = kgc.Graph("columns")
    x = graph.input("x", (3, 17, 100), "f32")
    picked = graph.input("picked", (count,), "i32")
    graph.output(graph.mul(graph.gather(x, picked, 2), 2.0))
    values = torch.randn(3, 17, 100, generator=generator)
    indices = indices_with_repeats(count, 100, generator).to(torch.int32)
    result = run_tiled(tiled(graph), None, values, indices)
    assert torch.equal(result, values.index_select(2, indices) * 2.0)


def test_a_gather_of_integers_copies_them():
    graph = kgc.Graph("positions")
    table = graph.input("table", (17, 3), "i64")
    ids = graph.input("ids", (1000,), "i64")
    graph.output(graph.gather(table, ids, 0))
    generator = torch.Generator().manual_seed(5)
    values = torch.randint(-2**40, 2**40, (17, 3), generator=generator)
    picked = indices_with_repeats(1000, 17, generator)
    assert torch.equal(run_tiled(tiled(graph), None, values, picked), values[picked])


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("tokens", [1, 17])
def test_an_embedding_and_its_rms_norm_are_one_kernel(tokens, dtype):
    graph = kgc.Graph("embed_norm")
    table = graph.input("table", (50, 1000), dtype)
    ids = graph.input("ids", (2, tokens), "i64")
    weight = graph.input("weight", (1000,), dtype)
    rows = graph.reshape(graph.gather(table, graph.reshape(ids, (2 * tokens,)), 0),
                         (2, tokens, 1000))
    graph.output(graph.rms_norm(rows, weight, eps=1e-6))
    module = tiled(graph)
    assert [kernel_name(k) for k in kernels_in(module)] == ["embed_norm_0_reduction"]
    assert "kg.tile_gather" in str(module)
    generator = torch.Generator().manual_seed(tokens)
    inputs = [torch.randn(50, 1000, generator=generator).to(DTYPES[dtype]),
              torch.randint(0, 50, (2, tokens), generator=generator),
              (torch.rand(1000, generator=generator) + 0.5).to(DTYPES[dtype])]
    result = run_tiled(module, None, *inputs)
    expected = kgc.reference.evaluate(graph.build(), None, inputs)
    torch.testing.assert_close(result, expected)


@pytest.mark.parametrize("count", COUNTS)
def test_computed_indices_past_the_iteration_read_nothing_outside(count):
    # Indices made in the kernel (an iota, as a mask's positions are) hold
    # positions past the table in the lanes that pad the last tile.
    graph = kgc.Graph("positions")
    table = graph.input("table", (count, 3), "f32")
    positions = graph.sub(graph.arange(0, count), graph.input("shift", (), "i64"))
    graph.output(graph.gather(table, positions, 0))
    values = torch.randn(count, 3)
    result = run_tiled(tiled(graph), None, values, torch.tensor(0))
    assert torch.equal(result, values)


def test_a_gather_of_a_computed_table_reads_it_from_memory():
    # The table is computed by another op: the gather's kernel cannot read
    # it at the indices, so the exp is a kernel of its own.
    graph = kgc.Graph("computed")
    x = graph.input("x", (17, 33), "f32")
    ids = graph.input("ids", (3,), "i64")
    graph.output(graph.gather(graph.exp(x), ids, 0))
    module = tiled(graph)
    assert len(kernels_in(module)) == 2
    values = torch.randn(17, 33)
    picked = torch.tensor([16, 0, 16])
    torch.testing.assert_close(run_tiled(module, None, values, picked), values.exp()[picked])


@pytest.mark.parametrize("count", COUNTS)
def test_an_index_out_of_range_is_refused_by_the_executor(count):
    graph = kgc.Graph("lookup")
    table = graph.input("table", (17, 8), "f32")
    ids = graph.input("ids", (count,), "i64")
    graph.output(graph.gather(table, ids, 0))
    picked = torch.zeros(count, dtype=torch.int64)
    picked[-1] = 17
    with pytest.raises(TileProgramError, match=r"reads index \(17, 0\) outside memref<17x8xf32.*"
                                               r"gathered dimension 0 came from the indices"):
        run_tiled(tiled(graph), None, torch.randn(17, 8), picked)
    picked[-1] = -1
    with pytest.raises(KgcError, match=rf"kg.gather: index -1 at position {count - 1} of the "
                                       r"indices is outside \[0, 17\) along dim 0"):
        kgc.reference.evaluate(graph.build(), None, [torch.randn(17, 8), picked])


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("count", COUNTS)
def test_a_scatter_add_with_repeated_indices_is_index_add(count, dtype):
    generator = torch.Generator().manual_seed(count + 2)
    graph = kgc.Graph("grad")
    dest = graph.input("dest", (37, 33), dtype)
    ids = graph.input("ids", (count,), "i64")
    rows = graph.input("rows", (count, 33), dtype)
    graph.output(graph.scatter(dest, ids, rows, 0, "add"))
    inputs = [torch.randn(37, 33, generator=generator).to(DTYPES[dtype]),
              indices_with_repeats(count, 37, generator),
              torch.randn(count, 33, generator=generator).to(DTYPES[dtype])]
    result = run_tiled(tiled(graph), None, *inputs)
    # The sums are exact f32 sums rounded once: torch's in f64, rounded.
    wide = inputs[0].double().index_add(0, inputs[1], inputs[2].double())
    tolerance = {"f32": 1e-5, "f16": 1e-3, "bf16": 8e-3}[dtype]
    torch.testing.assert_close(result, wide.to(DTYPES[dtype]), atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("count", COUNTS)
def test_a_scatter_assign_along_the_sequence_is_index_copy(count, dtype):
    # A static KV cache of 1000 positions updated at `count` of them.
    generator = torch.Generator().manual_seed(count + 3)
    graph = kgc.Graph("cache")
    cache = graph.input("cache", (1, 2, 1000, 8), dtype)
    positions = graph.input("positions", (count,), "i64")
    keys = graph.input("keys", (1, 2, count, 8), dtype)
    graph.output(graph.scatter(cache, positions, keys, 2, "assign"))
    inputs = [torch.randn(1, 2, 1000, 8, generator=generator).to(DTYPES[dtype]),
              torch.randperm(1000, generator=generator)[:count],
              torch.randn(1, 2, count, 8, generator=generator).to(DTYPES[dtype])]
    result = run_tiled(tiled(graph), None, *inputs)
    assert torch.equal(result, inputs[0].index_copy(2, *inputs[1:]))


def test_a_scatter_assign_keeps_the_last_of_repeated_indices():
    graph = kgc.Graph("twice")
    dest = graph.input("dest", (17, 3), "f32")
    ids = graph.input("ids", (3,), "i64")
    rows = graph.input("rows", (3, 3), "f32")
    graph.output(graph.scatter(dest, ids, rows, 0, "assign"))
    values, source = torch.randn(17, 3), torch.randn(3, 3)
    result = run_tiled(tiled(graph), None, values, torch.tensor([5, 9, 5]), source)
    expected = values.clone()
    expected[9], expected[5] = source[1], source[2]
    assert torch.equal(result, expected)


@pytest.mark.parametrize("mode", ["assign", "add"])
def test_one_index_into_integers_is_a_pointwise_kernel(mode):
    graph = kgc.Graph("counts")
    dest = graph.input("dest", (1000,), "i32")
    at = graph.input("at", (1,), "i64")
    value = graph.input("value", (1,), "i32")
    graph.output(graph.scatter(dest, at, value, 0, mode))
    module = tiled(graph)
    assert [kernel_name(k) for k in kernels_in(module)] == ["counts_0_pointwise"]
    counts = torch.randint(-9, 9, (1000,), dtype=torch.int32)
    update = torch.tensor([7], dtype=torch.int32)
    expected = counts.index_add(0, torch.tensor([999]), update) if mode == "add" else \
        counts.index_copy(0, torch.tensor([999]), update)
    assert torch.equal(run_tiled(module, None, counts, torch.tensor([999]), update), expected)


def test_several_indices_into_integers_are_a_clear_error():
    graph = kgc.Graph("counts")
    dest = graph.input("dest", (17,), "i32")
    ids = graph.input("ids", (3,), "i64")
    graph.output(graph.scatter(dest, ids, graph.input("ones", (3,), "i32"), 0, "add"))
    with pytest.raises(KgcError, match="one-hot matmul, which takes f32, f16 or bf16, not i32"):
        tiled(graph)


@pytest.mark.parametrize("build,message", [
    (lambda g, t, i: g.gather(t, g.input("f", (3,), "f32")),
     r"gather: indices \(3,\) f32 must be a 1-D tensor of i32 or i64"),
    (lambda g, t, i: g.gather(t, g.input("two", (3, 2), "i64")),
     r"gather: indices .* must be a 1-D tensor of i32 or i64 \(reshape them"),
    (lambda g, t, i: g.gather(t, i, 2), "gather: dim 2 is out of range for table"),
    (lambda g, t, i: g.scatter(t, i, t, 0, "max"), "scatter: mode 'max' must be 'assign' or 'add'"),
    (lambda g, t, i: g.scatter(t, i, g.input("s", (4, 8), "f32"), 0),
     r"scatter: source \(4, 8\) f32 must have shape \[3, 8\] \(dest \(17, 8\) f32 with "
     r"dimension 0 replaced by the 3 indices\)"),
])
def test_the_graph_api_names_what_is_wrong(build, message):
    graph = kgc.Graph("bad")
    table = graph.input("table", (17, 8), "f32")
    ids = graph.input("ids", (3,), "i64")
    with pytest.raises(GraphError, match=message):
        build(graph, table, ids)
