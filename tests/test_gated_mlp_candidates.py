"""Every candidate the search offers for a fused gated MLP kernel computes
the right values in tiled form (the CPU executor).

The search (kgc.search.space) offers each kernel its default config, the
seeds of its kind, the default's neighbours and a sample of the rest:
tile sizes, grouped order, persistent programs, split-K (kgc's own, where a
config leaves it unset, or the config's), TMA. The tuned-defaults table and
a user's knobs may pick any of them, so each one is checked here, as
tune-defaults searches (effort "default", kgc's heuristics as the default),
on the gated MLP silu(x @ w1) * (x @ w2) at a shape no tile divides (M 61,
N 1000) whose k loop is long enough for the space to split it (K 4096).
What comes after the tiled form (TTIR, Triton's lowering) is checked on a
GPU, by tests/gpu/test_gated_mlp_candidates_vs_torch.py.
"""

from __future__ import annotations

import functools

import pytest

from kgc.search.space import EFFORT_CONFIGS

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("one_torch_thread")

M, K, N = 61, 4096, 1000
TARGET = 90


@functools.lru_cache(maxsize=None)
def _fused_kernel():
    """The search's KernelVariants of the fused gated kernel (the default
    partition's one kernel)."""
    from kgc.bench.tune_defaults import GATED_MLP, Shape, tuned_defaults_setting
    from kgc.parsing import canonical_source
    from kgc.search.space import variant_space

    text, function, _ = canonical_source(Shape.of(GATED_MLP, m=M, n=N, k=K).build(), None)
    with tuned_defaults_setting("off"):
        partitions, kernels = variant_space(text, function, "default", TARGET)
    ((_, signature),) = partitions[0].kernels
    return kernels[signature]


@functools.lru_cache(maxsize=None)
def _reference():
    """Fresh random inputs (the search's generator) and the kernel's results
    as eager torch computes them and exactly."""
    from mlir import ir

    from kgc.reference import evaluate
    from kgc.search.kernels import FUNCTION, input_specs
    from kgc.search.verify import random_inputs
    from tests.comparison import as_tuple

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(_fused_kernel().inline_text).operation
        specs = input_specs(module)
        inputs = random_inputs(specs, 7, "cpu")
        eager = as_tuple(evaluate(module, FUNCTION, inputs))
        exact = as_tuple(evaluate(module, FUNCTION, inputs, exact=True))
    return inputs, eager, exact


def test_the_space_has_what_the_candidates_below_exercise():
    configs = _fused_kernel().configs
    assert len(configs) == EFFORT_CONFIGS["default"]
    assert any(c.split_k and c.split_k > 1 for c in configs)
    assert any(c.num_programs for c in configs)
    assert any(c.tma for c in configs)
    assert any(c.group_m and c.group_m > 1 for c in configs)


@pytest.mark.parametrize("index", range(EFFORT_CONFIGS["default"]))
def test_each_candidate_of_the_fused_gated_kernel_is_right_in_tiled_form(index):
    from mlir import ir

    from kgc.accuracy import mismatch
    from kgc.execution import run_tiled
    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.config import set_knobs
    from kgc.pipeline.stages import kernel_pipeline_text
    from kgc.search.kernels import FUNCTION, input_specs
    from kgc.tiling.kernel_ops import kernel_name, kernels_in
    from tests.comparison import as_tuple

    variants = _fused_kernel()
    config = variants.configs[index]
    inputs, eager, exact = _reference()
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(variants.launch_text).operation
        (kernel,) = kernels_in(module)
        set_knobs(kernel, config)
        compile_module(module, target=TARGET, pipeline=kernel_pipeline_text(TARGET), emit="kg")
        made = [kernel_name(k) for k in kernels_in(module)]
        results = as_tuple(run_tiled(module, FUNCTION, *inputs))
    reason = mismatch(results, eager, exact)
    assert reason is None, f"{config.to_dict()} (kernels {made}): {reason}"


def test_sibling_dots_take_no_k_step_of_16_where_wgmma_computes_them():
    # A race below kgc's IR computed the gated MLP wrong at block_k 16 on
    # sm_90 (Triton 3.6): the search offers no such config there, and a
    # user's knob gets an error naming the fix; sm_80's mma is not affected.
    from kgc.bench.tune_defaults import GATED_MLP, Shape
    from kgc.tiling.config import MatmulConfig
    from kgc.tiling.iteration import Unplannable
    from kgc.tiling.registry import plan_group
    from tests.test_library_kernels import _outputs

    assert all(c.block_k is None or c.block_k >= 32 for c in _fused_kernel().configs)
    outputs = _outputs(Shape.of(GATED_MLP, m=M, n=N, k=K).build())
    config = MatmulConfig(block_m=64, block_n=64, block_k=16, num_warps=4, num_stages=4)
    with pytest.raises(Unplannable, match=r"block_k = 16 with 2 dots per k step is refused on "
                                          r"sm_90.*take block_k >= 32"):
        plan_group(outputs, config, target=90)
    assert plan_group(outputs, config, target=80).config.block_k == 16
    assert plan_group(outputs, MatmulConfig(block_k=32), target=90).config.block_k == 32


def test_every_candidate_offered_fits_the_shared_memory_of_sm90():
    # The search leaves out configs whose k loop would not fit the target's
    # shared memory (LoopReads.pipeline_bytes): Triton would refuse them
    # after a compile of a second or two each. Each one offered compiles to
    # cubin for sm_90 (no GPU needed) within its shared memory.
    from kgc.diagnostics import KgcError
    from kgc.search.kernels import compile_candidate
    from kgc.targets import target_for

    variants = _fused_kernel()
    limit = target_for(TARGET).max_shared_memory_per_block
    over = []
    for config in variants.configs:
        try:
            compiled = compile_candidate(variants.launch_text, config, TARGET)
        except KgcError as error:
            over.append((config.to_dict(), str(error).splitlines()[0]))
            continue
        over += [(config.to_dict(), name, kernel.shared)
                 for name, kernel in compiled.kernels.items() if kernel.shared > limit]
    assert not over, over
