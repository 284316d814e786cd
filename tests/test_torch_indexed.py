"""The torch front end's indexed ops, run through `torch.compile(...,
backend="kgc", options={"executor": "cpu"})`: embedding, its dense
backward, index_select, indexing by one tensor, index_copy and index_put
(with and without accumulate) each stay in kgc's kernels at 1, 3, 17 and
1000 indices, with repeated indices where the op sums them, and give
torch's results; indexing by tensors on adjacent dims (an attention mask
reading a padding mask at [batch, position]) is one gather of the merged
dims; what kg has no form for (index tensors on dims apart, a boolean
mask, several indices added into integers) falls back per op and is still
right."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

from kgc.torch import reports
from tests.test_torch_frontend import ReferenceBackend

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

aten = torch.ops.aten
COUNTS = [1, 3, 17, 1000]


def compiled_run(function, *inputs):
    """function(*inputs) compiled by kgc on the CPU executor, and the aten
    ops it left to PyTorch."""
    before = len(reports())
    compiled = torch.compile(function, backend="kgc", options={"executor": "cpu"})
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = compiled(*inputs)
    made = reports()[before:]
    # Ops PyTorch computes: those kgc does not convert, and those of a
    # partition kgc failed to compile.
    left = [op for report in made for op, _ in report.fallbacks]
    left += [op for report in made for partition in report.partitions
             if partition.fallback_reason is not None for op in partition.ops]
    kernels = sum(report.kernel_count for report in made)
    return result, left, kernels


def repeated(count: int, extent: int, seed: int, shape=None) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(0, extent, (count,), generator=generator)
    if count > 1:
        indices[-1] = indices[0]
    return indices if shape is None else indices.reshape(shape)


def randn(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("count", COUNTS)
def test_embedding_gathers_rows_in_kgc(count):
    weight = randn(50, 16, seed=count)

    def embed(ids):
        return F.embedding(ids, weight) * 2.0

    ids = repeated(count, 50, count)
    result, left, kernels = compiled_run(embed, ids)
    assert not left and kernels >= 1
    assert torch.equal(result, embed(ids))


def test_embedding_of_a_batch_of_sequences_in_half_precision():
    weight = randn(50, 16, seed=1).half()

    def embed(ids):
        return F.embedding(ids, weight)

    ids = repeated(34, 50, 2, shape=(2, 17))
    result, left, _ = compiled_run(embed, ids)
    assert not left and torch.equal(result, embed(ids))


@pytest.mark.parametrize("count", COUNTS)
def test_embedding_dense_backward_adds_each_ids_gradient(count):
    grad = randn(count, 16, seed=count + 10)
    ids = repeated(count, 50, count + 11)

    def backward(grad, ids):
        return aten.embedding_dense_backward(grad, ids, 50, -1, False)

    result, left, _ = compiled_run(backward, grad, ids)
    assert not left
    torch.testing.assert_close(result, backward(grad, ids), atol=1e-5, rtol=1e-5)


def test_embedding_dense_backward_skips_the_padding_index():
    grad = randn(2, 17, 8, seed=3)
    ids = repeated(34, 10, 4, shape=(2, 17))
    ids[0, 0] = ids[1, 3] = 4

    def backward(grad, ids):
        return aten.embedding_dense_backward(grad, ids, 10, 4, False)

    result, left, _ = compiled_run(backward, grad, ids)
    assert not left
    torch.testing.assert_close(result, backward(grad, ids), atol=1e-5, rtol=1e-5)
    assert torch.equal(result[4], torch.zeros(8))


def test_an_embedding_trained_through_kgc_gets_torchs_gradient():
    table = torch.nn.Embedding(50, 16)
    ids = repeated(17, 50, 5)

    def loss(ids):
        return (table(ids) ** 2).sum()

    compiled = torch.compile(loss, backend="kgc", options={"executor": "cpu"})
    before = len(reports())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(ids).backward()
    got = table.weight.grad.clone()
    table.weight.grad = None
    loss(ids).backward()
    torch.testing.assert_close(got, table.weight.grad, atol=1e-5, rtol=1e-5)
    left = [op for report in reports()[before:] for op, _ in report.fallbacks]
    assert not any("index_put" in op or "embedding" in op for op in left), left


@pytest.mark.parametrize("count", COUNTS)
def test_index_select_and_indexing_by_one_tensor(count):
    x = randn(3, 1000, seed=count + 20)
    picked = repeated(count, 1000, count + 21)
    picked[0] = -1  # counted from the end by x[:, picked], refused by index_select

    def select(x, picked):
        return x.index_select(1, picked.abs()) + x[:, picked]

    result, left, _ = compiled_run(select, x, picked)
    assert not left and torch.equal(result, select(x, picked))


@pytest.mark.parametrize("count", COUNTS)
def test_gather_of_one_line_is_a_gather_of_any_type(count):
    # BERT's token types at its positions: torch.gather(types, 1, ids) with
    # ids of one line, of an integer buffer.
    types = torch.randint(0, 2, (2, 1000), generator=torch.Generator().manual_seed(count))
    values = randn(3, 1000, 4, seed=count + 30)
    ids = repeated(count, 1000, count + 31, (1, count))

    def gather(types, values, ids):
        lines = torch.gather(values, 1, ids.reshape(1, count, 1).expand(1, count, 1))
        return torch.gather(types, 1, ids), lines, torch.gather(types[0], 0, ids[0])

    result, left, _ = compiled_run(gather, types, values, ids)
    assert not left, left
    for got, want in zip(result, gather(types, values, ids)):
        assert got.dtype == want.dtype and torch.equal(got, want)


@pytest.mark.parametrize("count", COUNTS)
def test_indexing_by_tensors_on_adjacent_dims(count):
    # transformers' masks read the padding mask as mask[batch_idx, kv_idx],
    # the indices broadcast against each other.
    x = randn(2, 3, 1000, 4, seed=count + 25)
    batch = torch.tensor([[1], [0], [-1]])
    positions = repeated(count, 1000, count + 26)
    positions[0] = -1

    def read(x, batch, positions):
        return x[:, batch, positions] * 2.0

    result, left, _ = compiled_run(read, x, batch, positions)
    assert not left and torch.equal(result, read(x, batch, positions))


@pytest.mark.parametrize("count", COUNTS)
def test_the_static_cache_update_writes_the_positions_in_kgc(count):
    # transformers' StaticCache: keys.index_copy_(2, cache_position, new_keys).
    cache = randn(1, 2, 1000, 8, seed=count + 30)
    positions = torch.randperm(1000, generator=torch.Generator().manual_seed(count))[:count]
    keys = randn(1, 2, count, 8, seed=count + 31)

    def update(cache, positions, keys):
        cache.index_copy_(2, positions, keys)
        return cache * 1.0

    expected = update(cache.clone(), positions, keys)
    written = cache.clone()
    result, left, _ = compiled_run(update, written, positions, keys)
    assert not left
    assert torch.equal(result, expected) and torch.equal(written, expected)


@pytest.mark.parametrize("count", COUNTS)
def test_index_put_with_and_without_accumulate(count):
    x = randn(17, 1000, seed=count + 40)
    where_ = repeated(count, 1000, count + 41)
    values = randn(17, count, seed=count + 42)
    unique = torch.randperm(1000, generator=torch.Generator().manual_seed(count))[:count]

    def put(x, where_, unique, values):
        added = aten.index_put(x, [None, where_], values, True)
        return aten.index_put(added, [None, unique], values * 3.0, False)

    result, left, _ = compiled_run(put, x, where_, unique, values)
    assert not left
    torch.testing.assert_close(result, put(x, where_, unique, values), atol=1e-5, rtol=1e-5)


def test_index_put_of_a_scalar_broadcasts_it():
    x = randn(17, 8, seed=50)

    def put(x, rows):
        y = x.clone()
        y[rows] = 0.5
        return y

    rows = torch.tensor([3, 16, -1])
    result, left, _ = compiled_run(put, x, rows)
    assert not left and torch.equal(result, put(x, rows))


@pytest.mark.parametrize("function,op", [
    (lambda x, i: x.reshape(17, 2, 4)[i, :, i % 4], "aten.index.Tensor"),
    (lambda x, i: aten.index_put(x, [x > 0], torch.tensor(0.5)), "aten.index_put.default"),
    (lambda x, i: aten.index_put(x.long(), [i], torch.ones(3, 8, dtype=torch.long), True),
     "aten.index_put.default"),
])
def test_what_kg_has_no_form_for_falls_back_per_op(function, op):
    x = randn(17, 8, seed=60)
    rows = torch.tensor([2, 5, 2])
    result, left, _ = compiled_run(function, x, rows)
    assert op in [name.split(":")[0] for name in left]
    assert torch.equal(result, function(x, rows))


def filecheck(text: str, checks: str, folder: pathlib.Path) -> None:
    tool = shutil.which("filecheck", path=str(pathlib.Path(sys.executable).parent))
    assert tool is not None, "filecheck is a test dependency"
    (folder / "checks.txt").write_text(checks)
    result = subprocess.run([tool, str(folder / "checks.txt")], input=text, text=True,
                            capture_output=True)
    assert result.returncode == 0, f"{result.stderr}\n--- input ---\n{text}"


@pytest.mark.parametrize("function,shapes,checks", [
    # A batch of sequences of ids: flattened, gathered, shaped back.
    (lambda ids, w, c, p, k: F.embedding(ids, w),
     [(2, 17), (50, 16), (1, 2, 20, 8), (3,), (1, 2, 3, 8)],
     "CHECK: kg.reshape %{{.*}} : tensor<2x17xi64> -> tensor<34xi64>\n"
     "CHECK-NEXT: kg.gather %{{.*}}[%{{.*}}] dim 0 : (tensor<50x16xf32>, tensor<34xi64>) -> "
     "tensor<34x16xf32>\n"
     "CHECK-NEXT: kg.reshape %{{.*}} : tensor<34x16xf32> -> tensor<2x17x16xf32>"),
    # The cache update at three positions, negative ones counted from the end.
    (lambda ids, w, c, p, k: aten.index_put(c, [None, None, p], k, False),
     [(2, 17), (50, 16), (1, 2, 20, 8), (3,), (1, 2, 3, 8)],
     "CHECK: kg.cmp lt\nCHECK: kg.add\nCHECK: kg.select\n"
     "CHECK-NEXT: kg.scatter assign %{{.*}}[%{{.*}}], %{{.*}} dim 2 : (tensor<1x2x20x8xf32>, "
     "tensor<3xi64>, tensor<1x2x3x8xf32>) -> tensor<1x2x20x8xf32>"),
    # The embedding's gradient: rows of zeros with each id's row added.
    (lambda ids, w, c, p, k: aten.embedding_dense_backward(k.reshape(6, 8), torch.cat([p, p]).abs(),
                                                           20, -1, False),
     [(2, 17), (50, 16), (1, 2, 20, 8), (3,), (1, 2, 3, 8)],
     "CHECK: kg.constant 0.000000e+00 : tensor<20x8xf32>\n"
     "CHECK: kg.scatter add %{{.*}}[%{{.*}}], %{{.*}} dim 0 : (tensor<20x8xf32>, tensor<6xi64>, "
     "tensor<6x8xf32>) -> tensor<20x8xf32>"),
])
def test_the_kg_each_converter_writes(function, shapes, checks, tmp_path):
    inputs = [repeated(34, 50, 70, shape=(2, 17)), randn(50, 16, seed=71),
              randn(1, 2, 20, 8, seed=72), torch.tensor([4, -1, 19]), randn(1, 2, 3, 8, seed=73)]
    assert [tuple(x.shape) for x in inputs] == shapes
    backend = ReferenceBackend()
    with torch.no_grad():
        expected = function(*inputs)
        got = torch.compile(function, backend=backend, fullgraph=True)(*inputs)
    torch.testing.assert_close(got, expected)
    (report,) = backend.reports
    assert not report.fallbacks, report.fallbacks
    filecheck("\n".join(backend.texts), checks, tmp_path)
