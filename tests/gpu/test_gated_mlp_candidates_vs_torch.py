"""Every candidate the search offers for a gated MLP kernel, on the GPU
against torch.

Building the tuned-defaults table (kgc.bench.tune_defaults) searches the
gated MLP silu(x @ w1) * (x @ w2) of Llama-3-8B at M = 64, K = 4096,
N = 14336 in f16, and on an H200 one candidate config of its fused kernel
computed wrong values (the search's check rejected it). Every candidate of
that kernel computes the right values on the CPU executor, which runs the
tiled kernels (masks, split-K, persistent tile loops) but not what comes
after them: the TTIR, and Triton's lowering of TMA descriptors, wgmma,
software pipelining and persistent loops. So here each candidate is
compiled for this GPU as the search compiles it (the kernel on its own,
kgc's pipeline after kg-fuse, the heuristics as the default, as
tune-defaults runs) and run three times on fresh random inputs: each run
must pass `kgc.accuracy`'s rule against torch (the search's own check),
and the three must agree bit for bit, since no candidate has atomics or an
unordered sum (a split-K reduce sums its partials in order): a difference
is a race. A config the GPU cannot run (shared memory, registers) is
skipped, as the search skips it.

The candidates are those of effort "default" (what `kgc tune-defaults
build` searches; effort "low"'s are its first eight), for the shape that
failed and for one whose M and N are no multiple of any tile: each of the
fused kernel's as a test of its own, then those of the kernels of the
other partitions the search prices (the matmuls apart, the pointwise
kernels). The search itself then runs on both shapes as tune-defaults runs
it, and must reject no candidate: there candidates are checked one after
another, each timed before the next, so what one candidate leaves behind
on the GPU would show.
Setting KGC_TEST_EVERY_CANDIDATE=1 also runs the whole space of the fused
kernel (effort "high", about 1300 candidates, an hour or more).
"""

from __future__ import annotations

import functools
import os

import pytest

from kgc.search.space import EFFORT_CONFIGS

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

# (M, K, N): the shape whose candidate failed, and one that no tile divides
# (N = 8 x 1793, so that f16 rows stay 16-byte aligned and TMA still takes
# every operand).
SHAPES = {"llama3-8b": (64, 4096, 14336), "ragged": (61, 4096, 14344)}
RUNS = 3


def _target() -> int:
    from kgc.pipeline.stages import parse_target

    major, minor = torch.cuda.get_device_capability()
    return parse_target(major * 10 + minor)


@functools.lru_cache(maxsize=None)
def _space(shape: str, effort: str):
    """The search's partitions and kernels (by signature) of `shape`'s gated
    MLP, planned for this GPU with kgc's heuristics as the default."""
    from kgc.bench.tune_defaults import GATED_MLP, Shape, tuned_defaults_setting
    from kgc.parsing import canonical_source
    from kgc.search.space import variant_space

    m, k, n = SHAPES[shape]
    text, function, _ = canonical_source(Shape.of(GATED_MLP, m=m, n=n, k=k).build(), None)
    with tuned_defaults_setting("off"):
        return variant_space(text, function, effort, _target())


def _fused_kernel(shape: str, effort: str):
    """The KernelVariants of the fused gated kernel (the default
    partition's one kernel)."""
    partitions, kernels = _space(shape, effort)
    ((_, signature),) = partitions[0].kernels
    return kernels[signature]


@functools.lru_cache(maxsize=None)
def _reference(shape: str, signature: str):
    """Fresh random inputs of a kernel (the search's generator) on the GPU,
    and its results as eager torch computes them and exactly."""
    from mlir import ir

    from kgc.reference import evaluate
    from kgc.search.kernels import FUNCTION, input_specs
    from kgc.search.verify import random_inputs
    from tests.comparison import as_tuple

    variants = _space(shape, "low")[1][signature]
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(variants.inline_text).operation
        specs = input_specs(module)
        inputs = random_inputs(specs, sum(SHAPES[shape]), "cuda")
        eager = as_tuple(evaluate(module, FUNCTION, inputs))
        exact = as_tuple(evaluate(module, FUNCTION, inputs, exact=True))
    return inputs, eager, exact


def _compile(variants, config):
    """The candidate compiled to cubin as the search compiles it."""
    from kgc.runtime import CompiledGraph
    from kgc.search.kernels import FUNCTION, compile_candidate

    compiled = compile_candidate(variants.launch_text, config, _target())
    return compiled, CompiledGraph(compiled, FUNCTION)


def check_candidate(shape: str, signature: str, config) -> str | None:
    """Why the candidate `config` of the kernel `signature` of `shape` is
    wrong on this GPU, None when it is right; pytest.skip where the GPU
    cannot run it, as the search skips it."""
    from triton.runtime.driver import driver

    from kgc.accuracy import mismatch
    from kgc.diagnostics import KgcError
    from tests.comparison import as_tuple

    variants = _space(shape, "low")[1][signature]
    try:
        compiled, graph = _compile(variants, config)
    except KgcError as error:  # too big for the target: the search records a failed compile
        pytest.skip(f"{config.to_dict()}: {error}")
    limits = driver.active.utils.get_device_properties(torch.cuda.current_device())
    for kernel in compiled.kernels.values():
        reason = kernel.artifact.exceeds(limits) if kernel.artifact is not None else None
        if reason is not None:
            pytest.skip(f"{config.to_dict()}: @{kernel.name} {reason}")
    # The kernels the config makes (a matmul that kgc splits along k itself
    # shows as a partials and a reduce kernel).
    launches = ", ".join(f"@{kernel.name} grid {list(kernel.grid)}"
                         for kernel in compiled.kernels.values())
    where = f"@{variants.name} {config.to_dict()} ({launches})"
    inputs, eager, exact = _reference(shape, signature)
    runs = []
    for run in range(RUNS):
        results = as_tuple(graph.run(*inputs, poison=True))
        torch.cuda.synchronize()
        wrong = mismatch(results, eager, exact)
        if wrong is not None:
            return f"{where}, run {run + 1}: {wrong}"
        runs.append(results)
    for run, results in enumerate(runs[1:], 2):
        differ = sum(int((a != b).sum()) for a, b in zip(runs[0], results))
        if differ:
            return f"{where}: run {run} differs from run 1 in {differ} elements (a race)"
    return None


def check_all(shape: str, signatures, effort: str) -> None:
    """Every candidate of the kernels `signatures` at `effort`, failing
    with all the wrong ones named."""
    kernels = _space(shape, effort)[1]
    wrong, skipped = [], []
    for signature in signatures:
        for config in kernels[signature].configs:
            try:
                reason = check_candidate(shape, signature, config)
            except pytest.skip.Exception as skip:
                skipped.append(str(skip))
                continue
            if reason is not None:
                wrong.append(reason)
    assert not wrong, f"{len(wrong)} wrong candidates (and {len(skipped)} skipped):\n" + \
        "\n".join(wrong)


def test_the_low_effort_candidates_lead_the_default_effort_ones():
    # So the default effort's candidates cover what tune-defaults searches
    # at either effort.
    for shape in SHAPES:
        low = _fused_kernel(shape, "low").configs
        assert _fused_kernel(shape, "default").configs[:len(low)] == low


@pytest.mark.parametrize("index", range(EFFORT_CONFIGS["default"]))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_candidate_of_the_fused_gated_kernel_matches_torch(shape, index):
    variants = _fused_kernel(shape, "default")
    if index >= len(variants.configs):
        pytest.skip(f"the search offers {len(variants.configs)} candidates here")
    reason = check_candidate(shape, variants.signature, variants.configs[index])
    assert reason is None, reason


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_candidates_of_the_other_partitions_kernels_match_torch(shape):
    # The unfused partitions: the two matmuls alone (one of them the GPU's
    # BLAS among the candidates), with the silu or the product as their
    # epilogue, and the pointwise kernels.
    fused = _fused_kernel(shape, "default").signature
    check_all(shape, [s for s in _space(shape, "default")[1] if s != fused], "default")


@pytest.mark.skipif(os.environ.get("KGC_TEST_EVERY_CANDIDATE") != "1",
                    reason="the whole space takes an hour or more: KGC_TEST_EVERY_CANDIDATE=1")
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_candidate_of_the_whole_space_matches_torch(shape):
    check_all(shape, [_fused_kernel(shape, "high").signature], "high")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_search_of_the_gated_mlp_rejects_no_candidate(shape):
    # The search as tune-defaults runs it (heuristics as the default, no
    # cache), without a budget so that it checks every candidate it keeps
    # after pricing the partitions: candidates checked one after another on
    # one GPU, each timed before the next is checked, as when the wrong one
    # was met.
    from kgc.bench.tune_defaults import GATED_MLP, Shape, tuned_defaults_setting
    from kgc.search.tuner import superoptimize

    m, k, n = SHAPES[shape]
    with tuned_defaults_setting("off"):
        graph = superoptimize(Shape.of(GATED_MLP, m=m, n=n, k=k).build(), target=_target(),
                              effort="default", cache=False, warmup_iters=2, profile_iters=20,
                              verbose=False)
    fused = _fused_kernel(shape, "default").signature
    checked = [row for row in graph.report.rows
               if row.signature == fused and row.status in ("timed", "rejected")]
    assert len(checked) > 1
    rejected = graph.report.rejected()
    assert not rejected, "\n".join(f"@{row.kernel} {row.config}: {row.reason}"
                                   for row in rejected)
