"""The matmul kernels of a Llama-3-8B-shaped training step that exceeded
sm_90's shared memory before their stages were sized by every tile the k
loop reads, and before a 1024-wide "rank" stopped being a rank-r product
(tests/test_8b_training_kernels.py compiles them without a GPU): launched
at the 8B shapes and at shapes that are no tile multiples, held to
`kgc.accuracy`'s rule against the exact result, with torch as eager."""

import pytest

import kgc
from tests.comparison import assert_matches_torch
from tests.test_8b_training_kernels import (gated_mlp_input_gradient, projections_backward,
                                            rotated_scores)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu


def _launch_and_check(graph, reference, shapes, dtypes, seed):
    # kgc's own kernels, which cuBLAS would replace from 128 rows.
    compiled = kgc.compile(graph, library_kernels=False)
    generator = torch.Generator().manual_seed(seed)
    inputs = [(torch.randn(shape, generator=generator) * 0.5).to(dtype).cuda()
              for shape, dtype in zip(shapes, dtypes)]
    got = compiled.run(*inputs, poison=True)
    assert_matches_torch(got, reference(*inputs), graph.build(), inputs)


@pytest.mark.parametrize("heads,tokens", [(32, 64), (32, 512), (2, 65), (3, 17)])
def test_the_rotated_query_times_the_keys_matches_torch(heads, tokens):
    _launch_and_check(*rotated_scores(heads, tokens, 128), seed=tokens)


@pytest.mark.parametrize("rows,hidden,kv_width", [(64, 4096, 1024), (512, 4096, 1024),
                                                  (100, 2048, 1024), (17, 1000, 300)])
def test_the_projections_backward_matches_torch(rows, hidden, kv_width):
    _launch_and_check(*projections_backward(rows, hidden, kv_width), seed=rows)


@pytest.mark.parametrize("rows,intermediate,hidden", [(512, 14336, 4096), (129, 4097, 200)])
def test_the_gated_mlps_input_gradient_matches_torch(rows, intermediate, hidden):
    _launch_and_check(*gated_mlp_input_gradient(rows, intermediate, hidden), seed=rows)
