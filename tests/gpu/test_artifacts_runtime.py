"""Artifacts and the runtime on the GPU: a graph compiled in worker
processes runs in a fresh process that never compiles; argument checks and
copies; out= buffers; what the cubin says against what the driver says.
(The host time of a call is measured in benchmarks/superoptimize.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from tests.cases import ALL_CASES, make_inputs
from tests.comparison import assert_matches_torch
from tests.test_artifacts import NO_COMPILING

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

ATTENTION = next(c for c in ALL_CASES if c.name == "attention-2x4x100x64")
RMS_NORM = next(c for c in ALL_CASES if c.name == "rms_norm-17x1000")

RUN_AND_COMPARE = NO_COMPILING + """
import json, sys
import torch
import kgc.runtime
from tests.cases import ALL_CASES, make_inputs
from tests.comparison import assert_matches_torch

case = next(c for c in ALL_CASES if c.name == sys.argv[2])
graph = kgc.runtime.load(sys.argv[1])
errors = []
for seed in (0, 1):
    inputs = make_inputs(case, "f16", "cuda", seed)
    got = graph.run(*inputs, poison=True)
    want = case.reference(*inputs)
    assert_matches_torch(got, want, case.graph("f16").build(), inputs)
    errors.append((got.float() - want.float()).abs().max().item())
print(json.dumps({"launches": len(graph.function.launches), "max_error": max(errors)}))
"""


def test_a_graph_compiled_in_workers_runs_in_a_fresh_process(tmp_path):
    compiled = kgc.compile(ATTENTION.graph("f16"), output_dir=tmp_path, jobs=2)
    result = subprocess.run([sys.executable, "-c", RUN_AND_COMPARE, str(tmp_path), ATTENTION.name],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    # The loaded graph launches what the compile made, all of it.
    assert json.loads(result.stdout)["launches"] == len(compiled.function.launches) >= 1


@pytest.fixture(scope="module")
def rms_norm():
    return kgc.compile(RMS_NORM.graph("f32"))


def close(got, x, w):
    """`got` is the RMSNorm of x and w, by kgc.accuracy's rule."""
    assert_matches_torch(got, RMS_NORM.reference(x, w), RMS_NORM.graph("f32").build(), [x, w])


def inputs():
    return make_inputs(RMS_NORM, "f32", "cuda", 0)


def test_a_non_contiguous_argument_is_copied_and_left_as_it_was(rms_norm):
    x, w = inputs()
    transposed = x.t().contiguous().t()  # same values, column-major
    assert not transposed.is_contiguous()
    before = transposed.clone()
    close(rms_norm(transposed, w), x, w)
    assert torch.equal(transposed, before)


def test_a_view_at_a_misaligned_offset_is_copied(rms_norm):
    x, w = inputs()
    storage = torch.empty(1 + 1000, device="cuda")
    view = storage[1:]  # 4 bytes past an aligned pointer
    view.copy_(w)
    assert view.data_ptr() % 16 == 4
    close(rms_norm(x, view), x, w)


def test_a_view_at_an_aligned_offset_is_used_in_place(rms_norm):
    x, w = inputs()
    storage = torch.empty(4 + 1000, device="cuda")
    view = storage[4:]
    view.copy_(w)
    assert view.data_ptr() % 16 == 0 and view.storage_offset() == 4
    close(rms_norm(x, view), x, w)


def test_results_go_into_out_buffers(rms_norm):
    x, w = inputs()
    out = torch.full((17, 1000), float("nan"), device="cuda")
    result = rms_norm(x, w, out=out)
    assert result is out
    close(out, x, w)


@pytest.mark.parametrize("make_out, message", [
    (lambda: torch.empty(17, 999, device="cuda"), r"out #0 must have shape \(17, 1000\), got "
                                                   r"\(17, 999\)"),
    (lambda: torch.empty(17, 1000, device="cuda", dtype=torch.float16),
     r"out #0 must have dtype torch.float32 \(f32\), got torch.float16"),
    (lambda: torch.empty(1000, 17, device="cuda").t(), "out #0 must be contiguous"),
    (lambda: torch.empty(17 * 1000 + 1, device="cuda")[1:].view(17, 1000),
     "out #0 must be contiguous with a data pointer aligned to 16 bytes"),
    (lambda: torch.empty(17, 1000), r"out #0 is on cpu; it must be on a CUDA device"),
    (lambda: (torch.empty(17, 1000, device="cuda"),) * 2, r"has 1 result\(s\); out= gives 2"),
])
def test_bad_out_buffers_are_refused(rms_norm, make_out, message):
    x, w = inputs()
    with pytest.raises(kgc.KgcError, match=message):
        rms_norm(x, w, out=make_out())


def test_an_out_buffer_overlapping_an_argument_is_refused(rms_norm):
    x, w = inputs()
    with pytest.raises(kgc.KgcError, match=r"out #0 overlaps argument #0 \(x\); kgc kernels do "
                                           "not compute in place"):
        rms_norm(x, w, out=x)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_arguments_on_two_devices_are_refused(rms_norm):
    x, w = inputs()
    with pytest.raises(kgc.KgcError, match=r"argument #1 \(w\) is on cuda:1, the arguments before "
                                           "it on cuda:0; all must be on one device"):
        rms_norm(x, w.to("cuda:1"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_a_graph_runs_on_a_device_that_is_not_the_current_one(rms_norm):
    x, w = (t.to("cuda:1") for t in inputs())
    assert torch.cuda.current_device() == 0
    result = rms_norm(x, w)
    assert result.device == torch.device("cuda", 1)
    close(result, x, w)


def test_registers_read_from_the_cubin_are_the_drivers(rms_norm):
    from triton.runtime.driver import driver

    (kernel,) = rms_norm.module.kernels.values()
    artifact = kernel.artifact
    device = torch.cuda.current_device()
    _, _, registers, spills, _ = driver.active.utils.load_binary(
        artifact.entry, artifact.cubin, artifact.shared, device)
    assert artifact.resources["registers"] == registers
    assert artifact.resources["local_memory"] == spills * 4


def test_parameters_take_the_fast_path(rms_norm, monkeypatch):
    # The torch backend passes a module's weights as nn.Parameter: they are
    # dense tensors, and must not send every call down the checking path.
    x, w = inputs()
    rms_norm(x, w)  # binds the kernels
    monkeypatch.setattr(rms_norm, "run", lambda *a, **k: pytest.fail("took the slow path"))
    close(rms_norm(x, torch.nn.Parameter(w, requires_grad=False)), x, w)


@pytest.fixture(scope="module")
def split_matvec():
    graph = kgc.Graph("split_matvec")
    x = graph.input("x", (1, 4097), "f16")
    w = graph.input("w", (4097, 2048), "f16")
    graph.output(graph.matmul(x, w))
    return kgc.compile(graph)


@pytest.mark.parametrize("poison", [False, True])
def test_intermediates_share_one_allocation_per_call(split_matvec, poison):
    function = split_matvec.function
    intermediates = len(function.buffers) - function.num_arguments - len(function.results)
    assert len(function.launches) >= 2 and intermediates >= 1  # partials, then their sum
    x = torch.randn(1, 4097, device="cuda", dtype=torch.float16)
    w = torch.randn(4097, 2048, device="cuda", dtype=torch.float16) * 0.02
    split_matvec(x, w)

    def call():
        return split_matvec.run(x, w, poison=True) if poison else split_matvec(x, w)

    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    got = call()
    allocations = torch.cuda.memory_stats()["allocation.all.allocated"] - before
    assert allocations == len(function.results) + 1  # the results, and one workspace
    reason = tensor_mismatch(got, (x.float() @ w.float()).half(), x.double() @ w.double())
    assert reason is None, reason


def test_a_streamed_graph_allocates_per_buffer_and_gives_the_same_results(split_matvec):
    # Each buffer made at its first writer and intermediates freed after
    # their last reader: one allocation per result and intermediate, and
    # the same result as the call with one workspace.
    function = split_matvec.function
    x = torch.randn(1, 4097, device="cuda", dtype=torch.float16)
    w = torch.randn(4097, 2048, device="cuda", dtype=torch.float16) * 0.02
    want = split_matvec(x, w)
    streamed = split_matvec.streamed()
    streamed(x, w)  # the first call binds, through the checking path
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    got = streamed(x, w)
    allocations = torch.cuda.memory_stats()["allocation.all.allocated"] - before
    assert allocations == len(function.buffers) - function.num_arguments
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    # The streamed call is a twin: the graph it came from still makes its
    # results and one workspace.
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    split_matvec(x, w)
    allocations = torch.cuda.memory_stats()["allocation.all.allocated"] - before
    assert allocations == len(function.results) + 1


@pytest.fixture(scope="module")
def low_rank_chain():
    # a @ w1 reads `a` (32 MiB) in its first launches; the last makes the
    # result (32 MiB) from the low-rank product alone.
    graph = kgc.Graph("low_rank_chain")
    a = graph.input("a", (4096, 4096), "f16")
    w1 = graph.input("w1", (4096, 16), "f16")
    w2 = graph.input("w2", (16, 4096), "f16")
    graph.output(graph.matmul(graph.matmul(a, w1), w2))
    return kgc.compile(graph)


@pytest.mark.parametrize("streamed", [True, False])
def test_a_graph_handed_its_arguments_empties_the_list_and_frees_them_when_streamed(
        low_rank_chain, streamed):
    # A streamed call that takes the list of its arguments drops `a` after
    # the launch that last reads it, before the result is made: the call's
    # peak is then the result in place of `a`, not both.
    graph = low_rank_chain.streamed() if streamed else low_rank_chain
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    w1 = torch.randn(4096, 16, device="cuda", dtype=torch.float16) * 0.02
    w2 = torch.randn(16, 4096, device="cuda", dtype=torch.float16)
    want = low_rank_chain(a, w1, w2)
    graph(a, w1, w2)  # the first call binds, through the checking path
    arguments = [a, w1, w2]
    del a
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    got = graph.take(arguments)
    torch.cuda.synchronize()
    grown = torch.cuda.max_memory_allocated() - before
    assert arguments == []
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    result_bytes = want.numel() * want.element_size()
    if streamed:
        assert grown < result_bytes // 4, grown
    else:  # the workspace and the result are made before the first launch
        assert grown >= result_bytes, grown


def test_launch_hooks_added_after_the_first_call_still_run(rms_norm):
    # Without hooks the fast path leaves them out of its launches; a tool
    # that adds one later (a profiler) must still see every launch.
    from triton import knobs

    x, w = inputs()
    rms_norm(x, w)
    seen = []

    def hook(metadata):
        seen.append(metadata)

    knobs.runtime.launch_enter_hook.add(hook)
    try:
        close(rms_norm(x, w), x, w)
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    assert len(seen) == len(rms_norm.function.launches)
    rms_norm(x, w)
    assert len(seen) == len(rms_norm.function.launches)
