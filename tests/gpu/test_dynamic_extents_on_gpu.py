"""A graph with a dynamic extent (`?`) on the GPU: compiled once, run at
every size against torch, its kernels loaded once per device, captured as
a CUDA graph at one size."""

from __future__ import annotations

import pytest
from mlir import ir

import kgc
from kgc import reference
from kgc.parsing import parse_text
from tests.comparison import as_tuple, assert_as_accurate_as_eager
from tests.test_dynamic_extents import (COMPILED_ONCE, DYNAMIC_KEYS, REDUCED_ONCE, STRIDED_ONCE,
                                       TWO_KERNELS)

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

SIZES = (1, 3, 17, 1000, 4097)
# function -> per argument (shape with None for the extent, dtype)
ARGUMENTS = {
    "rows": [((None, 1000), torch.float16), ((1000,), torch.float16), ((1, 1000), torch.float16)],
    "proj": [((None, 128), torch.float16), ((128,), torch.float16), ((128, 96), torch.float16),
             ((96,), torch.float16)],
    "points": [((None, 777), torch.float32), ((None, 777), torch.float32),
               ((777,), torch.float32)],
    "norm_proj": [((None, 1000), torch.float16), ((1000,), torch.float16),
                  ((1000, 96), torch.float16)],
    # The extent inside other dims (strides computed from the size), and
    # an embedding whose table keeps its rows along the dynamic axis.
    "heads": [((1, None, 512), torch.float16), ((64,), torch.float16),
              ((1, 1, None, 64), torch.float16), ((1, 1, None, 64), torch.float16)],
    "tokens": [((1, 8, None, 64), torch.float16), ((512, 96), torch.float16)],
    "transposed": [((None, 8), torch.float32), ((2, None, 8), torch.float32)],
    "embed": [((1, None), torch.int64), ((100, 64), torch.float32), ((64,), torch.float32)],
    # Attention over a key count each call gives: grouped query heads over a
    # growing cache with an additive mask, and three f32 queries per head.
    "gqa": [((1, 32, 1, 128), torch.float16), ((1, 8, None, 128), torch.float16),
            ((1, 8, None, 128), torch.float16), ((1, 1, 1, None), torch.float16)],
    "chunk": [((2, 4, 3, 64), torch.float32), ((2, 4, None, 64), torch.float32),
              ((2, 4, None, 64), torch.float32), ((2, 1, 3, None), torch.float32)],
    # Reductions along the extent, each program looping to the size: a norm
    # weight's gradient over the tokens, a batch's tokens summed and maxed,
    # a softmax over dynamic keys.
    "weight_gradient": [((None, 512), torch.bfloat16), ((None, 512), torch.bfloat16),
                        ((None, 1), torch.float32)],
    "tokens_of_a_batch": [((2, None, 33), torch.float32)],
    "softmax_keys": [((8, None), torch.float16)],
    "weight_product": [((None, 512), torch.bfloat16), ((None, 96), torch.bfloat16)],
    "bias_and_weight": [((None, 33), torch.float32), ((None, 17), torch.float32)],
}
_SOURCES = {"norm_proj": TWO_KERNELS, "heads": STRIDED_ONCE, "tokens": STRIDED_ONCE,
            "transposed": STRIDED_ONCE, "embed": STRIDED_ONCE, "gqa": DYNAMIC_KEYS,
            "chunk": DYNAMIC_KEYS, "weight_gradient": REDUCED_ONCE,
            "tokens_of_a_batch": REDUCED_ONCE, "softmax_keys": REDUCED_ONCE,
            "weight_product": REDUCED_ONCE, "bias_and_weight": REDUCED_ONCE}


def _inputs(function: str, size: int, seed: int) -> list:
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for shape, dtype in ARGUMENTS[function]:
        shape = tuple(size if d is None else d for d in shape)
        if dtype == torch.int64:
            inputs.append(torch.randint(0, 100, shape, generator=generator).cuda())
        else:
            inputs.append(torch.randn(shape, generator=generator).to(dtype).cuda())
    if function in ("proj", "norm_proj"):
        inputs[-2 if function == "proj" else -1] /= 10  # products in f16's range
    if function == "tokens":
        inputs[1] /= 20
    return inputs


@pytest.mark.parametrize("function", ["rows", "proj", "points", "norm_proj", "heads", "tokens",
                                      "transposed", "embed", "gqa", "chunk", "weight_gradient",
                                      "tokens_of_a_batch", "softmax_keys", "weight_product",
                                      "bias_and_weight"])
def test_one_compile_runs_every_size_against_torch(function):
    text = _SOURCES.get(function, COMPILED_ONCE)
    compiled = kgc.compile(text, function=function)
    assert compiled.is_dynamic
    source = parse_text(text, "dynamic.mlir", ir.Context())
    for size in SIZES:
        inputs = _inputs(function, size, seed=size)
        # Poisoned results and intermediates: an element no program writes
        # at this size shows up.
        got = compiled.run(*inputs, poison=True)
        with source.context:
            eager = reference.evaluate(source, function, inputs)
            exact = reference.evaluate(source, function, inputs, exact=True)
        assert_as_accurate_as_eager(got, eager, exact, f"@{function} at {size}")
        assert as_tuple(got)[0].shape == as_tuple(eager)[0].shape
        # The fast path (after the first call at the size) computes the same.
        again = compiled(*inputs)
        for first, second in zip(as_tuple(got), as_tuple(again)):
            assert torch.equal(first, second)
    # One compile: each kernel loaded once on the device, whatever the size.
    generated = {k.artifact.hash for k in compiled.kernels() if k.artifact is not None}
    (loaded,) = compiled._loaded.values()
    assert len(loaded) == len(generated)


def test_a_dynamic_graph_is_captured_at_the_size_it_is_given():
    compiled = kgc.compile(TWO_KERNELS)
    captured = compiled.cuda_graph(*_inputs("norm_proj", 17, seed=0))
    inputs = _inputs("norm_proj", 17, seed=1)
    replayed = captured(*inputs).clone()
    assert torch.equal(replayed, compiled(*inputs))
