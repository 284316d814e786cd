"""cumsum in the torch front end, run through `torch.compile(...,
backend="kgc", options={"executor": "cpu"})`: a running sum is a product
with a triangular matrix of ones, exact for bools (transformers counts a
mask's packed sequences so) and within f32 rounding for floats, at 1, 3,
17, 1000 and 4096 elements along any dim; integers other than bools and
longer extents stay with PyTorch's scan and are still right."""

from __future__ import annotations

import pytest
import torch

from tests.test_torch_indexed import compiled_run, randn

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

EXTENTS = [1, 3, 17, 1000, 4096]


@pytest.mark.parametrize("extent", EXTENTS)
def test_a_count_of_true_positions_is_exact(extent):
    def packed(positions):
        # transformers' test for packed sequences: where the position does
        # not step by one, a new sequence starts.
        first = positions[:, :1] - 1
        steps = torch.diff(positions, prepend=first, dim=-1)
        return (steps != 1).cumsum(-1)

    generator = torch.Generator().manual_seed(extent)
    positions = torch.arange(extent).repeat(2, 1)
    positions[1] = torch.randint(0, 3, (extent,), generator=generator).cumsum(0)
    result, left, kernels = compiled_run(packed, positions)
    assert "aten.cumsum.default" not in {op.split(":")[0] for op in left}, left
    assert kernels >= 1
    assert result.dtype == torch.int64
    assert torch.equal(result, packed(positions))


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.float16, 2e-3),
                                             (torch.bfloat16, 1.6e-2)],
                         ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("extent", [3, 17, 1000])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_a_running_sum_of_floats_along_any_dim(extent, dim, dtype, tolerance):
    shape = [5, 7, 4]
    shape[dim] = extent
    x = randn(*shape, seed=extent).to(dtype)

    def running(t):
        return torch.cumsum(t * 2.0, dim) + 1.0

    result, left, _ = compiled_run(running, x)
    assert not left, left
    assert result.dtype == dtype
    expected = running(x.double())
    torch.testing.assert_close(result.double(), expected, atol=tolerance * extent ** 0.5,
                               rtol=tolerance)


def test_a_running_sum_of_one_element_is_the_element():
    x = randn(4, 1, seed=3)
    result, left, _ = compiled_run(lambda t: t.cumsum(1) * 3.0, x)
    assert not left and torch.equal(result, x * 3.0)


# Why each stays with PyTorch: an int64's sum in f32 would round; past
# 4096 elements the triangular product's work (their square) loses to a scan.
@pytest.mark.parametrize("make,why", [
    (lambda: torch.randint(-2**40, 2**40, (3, 17), generator=torch.Generator().manual_seed(1)),
     "cumsum of i64"),
    (lambda: (randn(2, 4097, seed=2) > 0), "cumsum along 4097 elements"),
], ids=["int64", "4097"])
def test_what_a_product_cannot_sum_stays_with_pytorch(make, why):
    from kgc.torch import reports

    x = make()
    before = len(reports())
    result, left, _ = compiled_run(lambda t: t.cumsum(-1) + 1, x)
    assert torch.equal(result, x.cumsum(-1) + 1)
    assert [op.split(":")[0] for op in left] == ["aten.cumsum.default"], left
    reasons = [why_ for report in reports()[before:] for _, why_ in report.fallbacks]
    assert any(why in reason for reason in reasons), reasons


def test_a_count_over_positions_broadcast_to_the_batch():
    # One row of positions for every sequence: the product's rows are a
    # broadcast that does not vary along them, while its accumulator and
    # what is computed from it (the count's cast to int64) span the tile.
    def packed(positions):
        positions = positions.expand(3, -1)
        first = positions[:, :1] - 1
        steps = torch.diff(positions, prepend=first, dim=-1)
        return (steps != 1).cumsum(-1)

    positions = torch.tensor([[0, 1, 2, 0, 1, 5, 6, 7, 8, 0, 1, 2, 3, 4, 9, 10, 11]])
    result, left, kernels = compiled_run(packed, positions)
    assert not left and kernels >= 1, left
    assert torch.equal(result, packed(positions))
