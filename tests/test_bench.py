"""kgc bench without a GPU: the catalogue (each workload's graph compiles
for sm_90 and computes what its torch code computes), the floor, target
and report math, the table, JSON and chart, and the command's errors."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
import torch

from kgc.bench import report as report_module
from kgc.bench.check import check
from kgc.bench.floor import MIB, DevicePeaks, describe, matmul_probes, memory_probes
from kgc.bench.report import FAILED, OK, WRONG, BenchResult, Row
from kgc.bench.workloads import CATALOGUE, COMPUTE, MEMORY, Target, select
from kgc.diagnostics import KgcError
from kgc.reference import evaluate
from tests.tools import console_script

WORKLOADS = list(CATALOGUE)


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_graph_compiles_for_sm90(name):
    """Every workload at its benchmark shape: kgc's default compile down to
    cubin through Triton (no GPU needed), so the bench never meets a graph
    that does not compile."""
    from kgc.pipeline.compiler import compile_module

    graph = CATALOGUE[name].build()
    module = graph.build()
    with module.context:
        compiled = compile_module(module, target=90, emit="cubin")
    function = compiled.functions[graph.name]
    assert function.launches, f"{name} compiled to no kernel"
    for kernel in compiled.kernels.values():
        if kernel.library is not None:
            # A bare GEMM this large is a call of cuBLAS (kgc.tiling.library):
            # kgc has no code to compile for it.
            assert not kernel.asm and kernel.artifact is None
            continue
        assert "tt.func" in kernel.asm["ttir"] and kernel.asm["cubin"]


def _small_inputs(workload, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return workload.make_inputs("cpu", generator)


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_graph_matches_its_torch_code_on_cpu(name):
    workload = CATALOGUE[name].small()
    assert workload.name == name
    inputs = _small_inputs(workload)
    assert all(t.float().abs().max() > 0 for t in inputs), "inputs must be random, never zeros"
    graph = workload.build()
    ours = evaluate(graph.build(), graph.name, inputs)
    torch_code = workload.cpu_reference or workload.reference
    theirs = torch_code(*inputs)
    shape, _ = workload.output
    assert tuple(theirs.shape) == tuple(ours.shape) == shape
    # The bench's own check: kgc's eager-style evaluation of the graph is as
    # close to the exact result as the torch code is.
    assert check(graph, inputs, ours, theirs) is None


@pytest.mark.parametrize("name", WORKLOADS)
def test_kgc_kernels_of_the_small_twin_match_the_torch_code(name):
    """kgc's default kernels for the workload on small shapes (not
    multiples of the tiles), run program by program on the CPU, pass the
    bench's check against the torch code."""
    from kgc.execution import run_tiled
    from kgc.pipeline.compiler import compile_module

    workload = CATALOGUE[name].small()
    graph = workload.build()
    module = graph.build()
    with module.context:
        compile_module(module, emit="kg")
    inputs = _small_inputs(workload, seed=5)
    ours = run_tiled(module, graph.name, *inputs)
    theirs = (workload.cpu_reference or workload.reference)(*inputs)
    assert check(graph, inputs, ours, theirs) is None


def test_the_check_rejects_a_wrong_result():
    workload = CATALOGUE["softmax"].small()
    inputs = _small_inputs(workload)
    graph = workload.build()
    expected = workload.reference(*inputs)
    wrong = expected.clone()
    wrong[3, 7] += 0.05
    reason = check(graph, inputs, wrong, expected)
    assert reason is not None and "off by" in reason
    shifted = torch.roll(expected, 1, dims=1)
    assert check(graph, inputs, shifted, expected) is not None


@pytest.mark.parametrize("nbytes,sets", [(16_800_000, 7), (50_600_000, 3), (201_000_000, 1),
                                          (1000, 16), (0, 16)])
def test_input_sets_hold_twice_the_l2_cache(nbytes, sets):
    from kgc.bench.timing import input_sets

    assert input_sets(nbytes, 50 * 2**20) == sets


def test_random_inputs_differ_by_seed_and_repeat_with_it():
    workload = CATALOGUE["lora"].small()
    first, again, other = (_small_inputs(workload, s) for s in (1, 1, 2))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not any(torch.equal(a, b) for a, b in zip(first, other))


# The FP8 workloads and their small twins' (M, K, N).
FP8_WORKLOADS = {"gemm-fp8": (17, 64, 33), "gemm-fp8-fast": (17, 1000, 77)}


@pytest.mark.parametrize("name", sorted(FP8_WORKLOADS))
def test_fp8_gemm_kgc_and_torch_read_the_same_column_major_b(name):
    """kgc's graph takes B as bt = B^T row-major ([N, K]); _scaled_mm gets
    bt.t(), B column-major: a view of the same memory, no copy."""
    workload = CATALOGUE[name]
    assert [(s.name, s.shape) for s in workload.inputs[:2]] == [
        ("a", (4096, 4096)), ("bt", (4096, 4096))]
    small = workload.small()
    m, k, n = FP8_WORKLOADS[name]
    assert [s.shape for s in small.inputs[:2]] == [(m, k), (n, k)]
    a, bt, scale_a, scale_b = _small_inputs(small)
    assert scale_a.shape == () and scale_a > 0 and scale_b > 0
    laid_out = small.torch_layout([a, bt, scale_a, scale_b])
    b = laid_out[1]
    assert b.shape == (k, n) and b.stride() == (1, k)
    assert b.data_ptr() == bt.data_ptr() and b.untyped_storage().nbytes() == bt.nbytes
    assert torch.equal(b.float(), bt.float().t())
    # The graph reads B through a transpose of its input, folded into the
    # matmul's loads: one kernel.
    from kgc.pipeline.compiler import compile_module

    graph = small.build()
    module = graph.build()
    with module.context:
        compiled = compile_module(module, target=90, emit="ttir")
    assert len(compiled.functions[graph.name].launches) == 1


@pytest.mark.parametrize("name", sorted(FP8_WORKLOADS))
def test_fp8_gemm_under_the_hopper_tma_config_runs_8bit_wgmma(name):
    """The bench's FP8 graphs (B column-major) under the config that ran
    within 0.75x of _scaled_mm (128x256x128, TMA, persistent) compile for
    sm_90 to e4m3 wgmma fed by TMA tensor loads (no GPU needed: PTX)."""
    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.config import GraphConfig
    from kgc.targets import target_for
    from kgc.tiling.config import MatmulConfig

    graph = CATALOGUE[name].build()
    module = graph.build()
    with module.context:
        (kernel,) = compile_module(module, target=90, emit="ttir").kernels
    config = MatmulConfig(block_m=128, block_n=256, block_k=128, num_warps=8, num_stages=3,
                          tma=True, num_programs=target_for(90).sm_count)
    module = graph.build()
    with module.context:
        compiled = compile_module(module, target=90, emit="ptx",
                                  config=GraphConfig(graph.name, None, {kernel: config}))
    (kernel,) = compiled.kernels.values()
    ptx = kernel.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in ptx
    assert "cp.async.bulk.tensor" in ptx
    # gemm-fp8 adds each 128-deep k step into f32; gemm-fp8-fast promotes
    # nothing, as _scaled_mm's use_fast_accum=True.
    (dot,) = [line for line in kernel.asm["ttir"].splitlines() if "tt.dot" in line]
    products = 2**30 if name == "gemm-fp8-fast" else 128
    assert f"maxNumImpreciseAcc = {products} : i32" in dot


def test_fp8_workloads_differ_only_in_accumulation(monkeypatch):
    """gemm-fp8-fast is gemm-fp8 with fast accumulation on both sides: the
    matmul's precision in kgc's graph, use_fast_accum in the torch code
    (torch._scaled_mm called through a stand-in: no GPU here)."""
    precise, fast = CATALOGUE["gemm-fp8"], CATALOGUE["gemm-fp8-fast"]
    assert (fast.inputs, fast.output, fast.flops, fast.kind, fast.peak) == (
        precise.inputs, precise.output, precise.flops, precise.kind, precise.peak)
    assert not fast.quick and fast.cpu_reference is precise.cpu_reference

    def precisions(workload):
        text = str(workload.build().build())
        return [line.split("precision = ")[1].split()[0] if "precision = " in line else None
                for line in text.splitlines() if "kg.matmul" in line]

    assert precisions(precise) == [None] and precisions(fast) == ["fast_accum"]
    calls = []
    monkeypatch.setattr(torch, "_scaled_mm", lambda *args, **kwargs: calls.append(kwargs))
    inputs = precise.torch_layout(_small_inputs(precise.small()))
    precise.reference(*inputs)
    fast.reference(*inputs)
    assert [call.get("use_fast_accum", False) for call in calls] == [False, True]
    assert all(call["out_dtype"] == torch.bfloat16 for call in calls)


# H100 numbers from one run: copy 2.95e12 B/s, bf16 matmul 787e12 flop/s, and
# the floors that run printed for each workload.
H100_FLOORS_US = {"add-relu-mul": 68.2, "rmsnorm-matmul": 17.1, "softmax": 22.7,
                  "layer-norm": 45.4, "gemm-f16": 174.6, "gated-mlp": 61.1, "lora": 11.5,
                  "gqa-decode": 5.7}


@pytest.mark.parametrize("name,floor", sorted(H100_FLOORS_US.items()))
def test_floor_from_bytes_and_flops(name, floor):
    peaks = DevicePeaks(2.95e12, {"bf16": 787e12})
    assert peaks.floor_us(CATALOGUE[name]) == pytest.approx(floor, rel=0.02)


def test_floor_is_the_larger_bound_and_fp8_uses_its_own_peak():
    gemm, fp8 = CATALOGUE["gemm-bf16"], CATALOGUE["gemm-fp8"]
    peaks = DevicePeaks(3e12, {"bf16": 800e12, "fp8": 1600e12})
    assert gemm.kind == fp8.kind == COMPUTE
    assert peaks.floor_us(gemm) == pytest.approx(2 * 4096**3 / 800e12 * 1e6)
    assert peaks.floor_us(fp8) == pytest.approx(2 * 4096**3 / 1600e12 * 1e6)
    # Without an FP8 peak (a device without FP8 tensor cores) bf16's bounds it.
    assert DevicePeaks(3e12, {"bf16": 800e12}).floor_us(fp8) == pytest.approx(
        peaks.floor_us(gemm))
    softmax = CATALOGUE["softmax"]
    assert softmax.kind == MEMORY and softmax.flops == 0
    assert peaks.floor_us(softmax) == pytest.approx(2 * 4096 * 4096 * 2 / 3e12 * 1e6)


def test_peaks_are_the_best_probe_of_each_kind():
    peaks = DevicePeaks.from_probes(
        {"copy 1 GiB": 2.43e12, "add 3x256 MiB": 2.95e12, "sum 1 GiB": 2.9e12},
        {"bf16": {"8192^3": 719e12, "6144^3": 760e12}, "fp8": {}})
    assert peaks.memory_bytes_per_s == 2.95e12
    assert peaks.matmul_flops_per_s == {"bf16": 760e12}  # no fp8 probe ran: bf16 bounds it
    data = peaks.to_dict()
    assert data["memory_GB_per_s"] == pytest.approx(2950)
    assert data["memory_probes_GB_per_s"] == pytest.approx(
        {"copy 1 GiB": 2430, "add 3x256 MiB": 2950, "sum 1 GiB": 2900})
    assert data["matmul_probes_TFLOPS"] == {"bf16": pytest.approx({"8192^3": 719, "6144^3": 760})}
    assert describe(data) == ("memory 2950 GB/s (best of copy 1 GiB 2430, add 3x256 MiB 2950, "
                              "sum 1 GiB 2900); bf16 matmul 760 TFLOPS (best of 8192^3 719, "
                              "6144^3 760)")
    with pytest.raises(ValueError, match="at least one probe"):
        DevicePeaks.from_probes({}, {"bf16": {"8192^3": 1e12}})


def _probe_calls(probes):
    return {probe.name: probe.make("cpu") for probe in probes}


def test_memory_probes_count_the_bytes_they_move():
    """Each probe, on small CPU buffers: it computes what it says, and its
    work is the bytes of the buffers it reads and writes."""
    calls = _probe_calls(memory_probes(copy_bytes=4 * MIB, add_buffer_bytes=MIB,
                                       sum_bytes=2 * MIB))
    assert list(calls) == ["copy 4 MiB", "add 3x1 MiB", "sum 2 MiB"]
    copy, add, total = calls.values()
    destination = copy.fn(0)
    assert destination.nbytes == 4 * MIB and copy.work == 8 * MIB
    assert destination.float().std() > 50  # random bytes copied, not zeros
    c = add.fn(0)
    assert add.work == 3 * MIB and c.nbytes == MIB and c.abs().max() > 0
    result = total.fn(0)
    assert total.work == 2 * MIB + 4 and result.shape == ()
    # The closures compute from their own buffers: calling again is the same.
    assert torch.equal(add.fn(1), c) and torch.equal(total.fn(1), result)


def test_matmul_probes_count_their_flops():
    calls = _probe_calls(matmul_probes("bf16", ((64, 32, 16), (8, 8, 8))))
    assert list(calls) == ["64x32x16", "8^3"]
    rectangular, cube = calls.values()
    assert rectangular.work == 2 * 64 * 32 * 16 and cube.work == 2 * 8**3
    product = rectangular.fn(0)
    assert product.shape == (64, 32) and product.dtype == torch.bfloat16


def test_measure_peaks_takes_the_fastest_probe(caplog):
    """measure_peaks on CPU with a stand-in timer (us per probe by its
    work): every probe runs, the rate is work / time, the best one wins,
    and a probe that fails is left out with a warning."""
    from kgc.bench import floor

    times_us = {8 * MIB: 10.0, 3 * MIB: 2.0, 2 * MIB + 4: 1.0}
    seen_reps = []

    def timer(fn, reps):
        seen_reps.append(reps)
        fn(0)
        work = next(w for w, call in calls.items() if call is fn)
        return times_us[work] if work in times_us else 100.0

    calls = {}

    def recording(probes):
        wrapped = []
        for probe in probes:
            def make(device, probe=probe):
                call = probe.make(device)
                calls[call.work] = call.fn
                return call
            wrapped.append(floor.Probe(probe.name, make))
        return wrapped

    def broken(device):
        raise RuntimeError("CUDA out of memory\ndetails")

    memory = recording(memory_probes(4 * MIB, MIB, 2 * MIB)) + [floor.Probe("huge", broken)]
    original = floor.matmul_probes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(floor, "matmul_probes",
                      lambda kind, shapes: recording(original(kind, shapes)))
        with caplog.at_level("WARNING"):
            peaks = floor.measure_peaks(False, reps=1000, device="cpu", timer=timer,
                                        memory=memory, matmul_shapes=((8, 8, 8),))
    assert set(peaks.memory_probes) == {"copy 4 MiB", "add 3x1 MiB", "sum 2 MiB"}
    assert peaks.memory_bytes_per_s == pytest.approx((2 * MIB + 4) / 1e-6)  # the sum: 1 us
    assert peaks.memory_probes["copy 4 MiB"] == pytest.approx(8 * MIB / 10e-6)
    assert peaks.matmul_flops_per_s == {"bf16": pytest.approx(2 * 8**3 / 100e-6)}
    assert seen_reps and set(seen_reps) == {floor.PROBE_REPS}
    assert "probe huge failed: CUDA out of memory" in caplog.text


def test_targets_of_the_catalogue():
    targets = {name: (w.target.speedup, w.target.floor_ratio) for name, w in CATALOGUE.items()}
    assert targets == {
        "add-relu-mul": (1.05, 1.15), "rmsnorm-matmul": (1.3, None), "softmax": (1.05, 1.15),
        "layer-norm": (1.05, 1.15), "gemm-f16": (0.95, None), "gemm-bf16": (0.95, None),
        "gated-mlp": (1.15, None), "lora": (1.3, None), "gqa-decode": (2.0, None),
        "gemm-fp8": (0.9, None), "gemm-fp8-fast": (0.9, None)}


@pytest.mark.parametrize("target,speedup,floor_ratio,met", [
    (Target(1.3), 1.31, 3.0, True),
    (Target(1.3), 1.29, 1.0, False),
    (Target(1.05, 1.15), 1.2, 1.1, True),
    (Target(1.05, 1.15), 1.2, 1.2, False),   # fast enough against torch, too far from the floor
    (Target(1.05, 1.15), 1.0, 1.0, False),   # at the floor, not faster than torch
    (Target(0.95), None, 1.0, None),          # nothing to judge
])
def test_target_met(target, speedup, floor_ratio, met):
    assert target.met(speedup, floor_ratio) is met


def test_select():
    assert [w.name for w in select(None, quick=True)] == [
        name for name, w in CATALOGUE.items() if w.quick]
    assert 2 <= len(select(None, quick=True)) <= 4
    assert len(select(None, quick=False)) == len(CATALOGUE)
    # The catalogue's order, whatever the order asked.
    assert [w.name for w in select(["softmax", "add-relu-mul"], quick=True)] == [
        "add-relu-mul", "softmax"]
    with pytest.raises(KgcError, match="'nope'.*the workloads are add-relu-mul"):
        select(["softmax", "nope"], quick=False)


def _row(name="softmax", times=None, status=OK, errors=None, floor=20.0):
    workload = CATALOGUE[name]
    return Row(workload.name, workload.title, workload.kind, workload.target, floor,
               workload.bytes, workload.flops, dict(times or {}), dict(errors or {}), status)


def _result(rows):
    return BenchResult("NVIDIA H100 80GB HBM3",
                       DevicePeaks.from_probes({"copy 1 GiB": 2.43e12, "add 3x256 MiB": 2.95e12},
                                               {"bf16": {"8192^3": 787e12}}).to_dict(),
                       {"effort": "low", "reps": 10, "quick": True, "seed": 7,
                        "versions": {"kgc": "0.1.0"}}, rows)


def test_row_math():
    row = _row(times={"kgc": 25.0, "eager": 60.0, "torch.compile": 45.0, "max-autotune": 40.0})
    assert row.best_torch == ("max-autotune", 40.0)
    assert row.speedup == pytest.approx(1.6)
    assert row.floor_ratio == pytest.approx(1.25)
    assert row.percent_of_floor == pytest.approx(80.0)
    assert row.target_met is False  # 1.6x, but 1.25 floors is past softmax's 1.15
    near = _row(times={"kgc": 22.0, "eager": 60.0})
    assert near.best_torch == ("eager", 60.0) and near.target_met is True


def test_failed_rows_have_no_speedup_and_miss_their_target():
    failed = _row("gemm-fp8", times={"eager": 100.0}, status=FAILED,
                  errors={"kgc": "kgc failed: no FP8 lowering"})
    wrong = _row("lora", times={"eager": 30.0}, status=WRONG,
                 errors={"kgc": "differs from eager, not timed: result #0 is off by 3"})
    for row in (failed, wrong):
        assert row.speedup is None and row.percent_of_floor is None
        assert row.target_met is False
    result = _result([_row(times={"kgc": 21.0, "eager": 58.0}), failed, wrong])
    assert [r.workload for r in result.failed] == ["gemm-fp8", "lora"]


def test_table():
    rows = [_row(times={"kgc": 25.0, "kgc-default": 31.5, "eager": 60.0, "torch.compile": 45.0,
                        "max-autotune": 40.0}),
            _row("gemm-fp8", times={"eager": 100.0, "torch.compile": 101.0}, status=FAILED,
                 errors={"kgc": "kgc failed: no FP8 lowering",
                         "kgc-default": "kgc failed: no FP8 lowering",
                         "max-autotune": "BackendCompilerFailed: boom"}),
            _row("lora", times={"eager": 30.0}, status=WRONG,
                 errors={"kgc": "differs from eager, not timed: off",
                         "kgc-default": "differs from eager, not timed: off"}),
            _row("add-relu-mul", times={"kgc": 21.0, "eager": 40.0})]
    rows[0].kgc_default_status = OK
    rows[1].kgc_default_status, rows[2].kgc_default_status = FAILED, WRONG
    rows[0].kgc_search_s, rows[0].kgc_cached = 41.23, False
    rows[0].compile_s = {"torch.compile": 3.04, "max-autotune": 61.5}
    rows[3].kgc_search_s, rows[3].kgc_cached = 0.31, True
    lines = _result(rows).table().splitlines()
    header = lines[0].split()
    assert header[:6] == ["workload", "kgc", "kgc-default", "eager", "torch.compile",
                          "max-autotune"]
    assert header[6:] == ["floor", "speedup", "%", "floor", "target", "met", "kgc", "search"]
    softmax = lines[1].split()
    # The default compile's time beside the searched one's; the speedup is
    # the searched kernel's.
    assert softmax[:7] == ["softmax", "25.0", "31.5", "60.0", "45.0", "40.0", "20.0"]
    assert softmax[7:10] == ["1.60x", "80%", ">="] and softmax[-2:] == ["NO", "41.2s"]
    fp8 = lines[2].split()
    assert fp8[:6] == ["gemm-fp8", "failed", "failed", "100.0", "101.0", "failed"]
    assert fp8[-2:] == ["NO", "-"]
    assert lines[3].split()[:3] == ["lora", "WRONG", "WRONG"]
    # A row whose default compile was not run shows none.
    assert lines[4].split()[:4] == ["add-relu-mul", "21.0", "-", "40.0"]
    assert lines[4].split()[-3:] == ["yes", "0.3s", "cached"]
    assert lines[5].endswith("targets met: 1 of 4")
    text = "\n".join(lines)
    assert "gemm-fp8: kgc: kgc failed: no FP8 lowering" in text
    assert "gemm-fp8: kgc default: kgc failed: no FP8 lowering" in text
    assert "gemm-fp8: max-autotune-no-cudagraphs: BackendCompilerFailed: boom" in text
    assert lines[-2:] == ["torch.compile's first call (its compile), s:",
                          "  softmax: torch.compile 3.0, max-autotune 61.5"]


def test_header_says_what_the_floor_was_measured_with():
    header = _result([_row(times={"kgc": 22.0})]).header(54.4).splitlines()
    assert header == [
        "kgc bench on NVIDIA H100 80GB HBM3: effort low, 10 reps, seed 7, 54 s",
        "floor from",
        "  memory 2950 GB/s (best of copy 1 GiB 2430, add 3x256 MiB 2950)",
        "  bf16 matmul 787 TFLOPS (8192^3)"]


def test_json(tmp_path):
    rows = [_row(times={"kgc": 22.0, "kgc-default": 27.5, "eager": 60.0, "torch.compile": 45.0}),
            _row("gemm-fp8", times={"eager": 100.0}, status=FAILED, errors={"kgc": "why"})]
    rows[0].kgc_cached, rows[0].compile_s = True, {"max-autotune": 61.5}
    rows[0].kgc_default_status, rows[0].kgc_default_compile_s = OK, 1.25
    path = tmp_path / "bench.json"
    _result(rows).write_json(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == report_module.SCHEMA_VERSION
    assert data["device"] == "NVIDIA H100 80GB HBM3"
    assert data["settings"]["seed"] == 7
    assert set(data["runners"]) == {"kgc", "kgc-default", "eager", "torch.compile",
                                    "max-autotune"}
    softmax, fp8 = data["rows"]
    assert softmax["times_us"] == {"kgc": 22.0, "kgc-default": 27.5, "eager": 60.0,
                                   "torch.compile": 45.0}
    # The default compile beside the searched one: its status, compile time,
    # and its time over the searched kernel's.
    assert softmax["kgc_default_status"] == "ok" and softmax["kgc_default_compile_s"] == 1.25
    assert softmax["default_vs_searched"] == pytest.approx(27.5 / 22)
    assert softmax["best_torch"] == {"runner": "torch.compile", "time_us": 45.0}
    assert softmax["speedup"] == pytest.approx(45 / 22)
    assert softmax["percent_of_floor"] == pytest.approx(100 * 20 / 22)
    assert softmax["target"] == {"speedup": 1.05, "floor_ratio": 1.15, "text": ">= 1.05x, <= 1.15x floor"}
    assert softmax["target_met"] is True and softmax["kind"] == "memory"
    assert softmax["bytes"] == 4096 * 4096 * 2 * 2 and softmax["flops"] == 0
    assert softmax["compile_s"] == {"max-autotune": 61.5} and softmax["kgc_cached"] is True
    assert data["peaks"]["memory_GB_per_s"] == pytest.approx(2950)
    assert data["peaks"]["memory_probes_GB_per_s"] == pytest.approx(
        {"copy 1 GiB": 2430, "add 3x256 MiB": 2950})
    assert fp8["kgc_status"] == "failed" and fp8["errors"] == {"kgc": "why"}
    assert fp8["speedup"] is None and fp8["target_met"] is False
    assert fp8["kgc_default_status"] is None and fp8["default_vs_searched"] is None


def test_chart_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(times={"kgc": 22.0, "kgc-default": 30.0, "eager": 60.0, "torch.compile": 45.0,
                        "max-autotune": 40.0}),
            _row("gemm-fp8", times={"eager": 100.0}, status=FAILED, errors={"kgc": "why"}),
            _row("lora", times={}, status=FAILED, errors={"kgc": "why", "eager": "why"})]
    rows[1].kgc_default_status = WRONG
    path = tmp_path / "bench.png"
    _result(rows).write_chart(path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


def test_chart_has_a_bar_for_the_default_compile(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    bars, notes = {}, []
    real_bar, real_annotate = matplotlib.axes.Axes.bar, matplotlib.axes.Axes.annotate

    def bar(self, positions, heights, width, label=None, **kwargs):
        bars[label] = list(heights)
        return real_bar(self, positions, heights, width, label=label, **kwargs)

    def annotate(self, text, *args, **kwargs):
        notes.append(text)
        return real_annotate(self, text, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate", annotate)
    rows = [_row(times={"kgc": 20.0, "kgc-default": 30.0, "eager": 40.0}),
            _row("gemm-fp8", times={"kgc": 50.0, "eager": 100.0}, errors={"kgc-default": "why"})]
    rows[0].kgc_default_status, rows[1].kgc_default_status = OK, FAILED
    _result(rows).write_chart(tmp_path / "bench.png")
    # Heights are times over the best torch contender's.
    assert bars["kgc"] == [0.5, 0.5] and bars["kgc default"] == [0.75]
    assert notes == ["kgc default failed"]


def _kgc(*args, **env):
    return subprocess.run([console_script("kgc"), *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_bench_without_cuda_exits_1_with_one_line():
    done = _kgc("bench", "--quick", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 1
    assert done.stderr.strip() == ("kgc: error: bench times kernels on a GPU: it needs a CUDA device, "
                                   "and torch sees none")
    assert done.stdout == ""


def test_bench_with_an_unknown_workload_names_it():
    done = _kgc("bench", "--workloads", "softmax,gemm-f17")
    assert done.returncode == 1
    assert "unknown workload 'gemm-f17'" in done.stderr and "Traceback" not in done.stderr


def test_bench_with_an_empty_workload_list():
    done = _kgc("bench", "--workloads", ",")
    assert done.returncode == 2 and "expected comma-separated workload names" in done.stderr


def test_bench_list():
    done = _kgc("bench", "--list")
    assert done.returncode == 0
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(CATALOGUE)


class _Evaluated:
    """A stand-in for kgc's compiled graph on CPU: the graph evaluated by
    kgc.reference, optionally spoiled."""

    report = None

    def __init__(self, workload, spoil=None):
        self.graph, self.spoil = workload.build(), spoil

    def __call__(self, *inputs):
        result = evaluate(self.graph.build(), self.graph.name, list(inputs))
        return self.spoil(result) if self.spoil else result

    def kernels(self):
        return ["one"]


def _spoil_first(result):
    result = result.clone()
    result.view(-1)[0] += 1.0
    return result


@pytest.fixture
def loop_on_cpu(monkeypatch):
    """The bench's loop on CPU tensors, with the GPU's parts replaced: the
    peaks are fixed, time_gpu counts what it times, torch.compile is eager."""
    from kgc.bench import floor, runners, timing

    timed = []
    monkeypatch.setattr(floor, "measure_peaks",
                        lambda fp8, reps: DevicePeaks(3e12, {"bf16": 800e12}))
    def time_gpu(fn, reps, rotations=1):
        for index in range(rotations):
            fn(index)
        timed.append(fn)
        return 10.0

    monkeypatch.setattr(timing, "time_gpu", time_gpu)
    monkeypatch.setattr(runners, "make_torch", lambda workload, runner: workload.reference)
    monkeypatch.setattr(runners, "make_kgc_default", _Evaluated)
    return timed


def _small(name):
    return CATALOGUE[name].small()


def test_loop_checks_kgc_before_timing_it(monkeypatch, loop_on_cpu):
    from kgc.bench import runners
    from kgc.bench.run import run_bench

    spoiled = {"softmax": _spoil_first}
    failing = {"layer-norm"}

    def make_kgc(workload, effort, reps, verbose):
        assert effort == "low" and reps == 7
        if workload.name in failing:
            raise runners.Unavailable("kgc failed: no lowering for this")
        return _Evaluated(workload, spoiled.get(workload.name))

    monkeypatch.setattr(runners, "make_kgc", make_kgc)
    result = run_bench([_small("add-relu-mul"), _small("softmax"), _small("layer-norm")],
                       effort="low", reps=7, seed=3, progress=False, device="cpu")
    good, wrong, failed = result.rows
    assert good.kgc_status == OK and good.times_us == {
        "kgc": 10.0, "kgc-default": 10.0, "eager": 10.0, "torch.compile": 10.0,
        "max-autotune": 10.0}
    assert wrong.kgc_status == WRONG and "kgc" not in wrong.times_us
    assert wrong.errors["kgc"].startswith("differs from eager, not timed: result #0 is off by")
    assert failed.kgc_status == FAILED and "kgc" not in failed.times_us
    assert failed.errors["kgc"] == "kgc failed: no lowering for this"
    # The default compile is checked and timed on its own: right in every row.
    assert all(row.kgc_default_status == OK and "kgc-default" in row.times_us
               for row in result.rows)
    # Timed: kgc once for the good row, its default compile and the three
    # torch contenders of each row.
    assert len(loop_on_cpu) == 1 + 3 + 3 * 3
    assert [r.workload for r in result.failed] == ["softmax", "layer-norm"]
    assert result.settings["seed"] == 3 and result.settings["effort"] == "low"
    # Where the time went: kgc's search (failed or not) and each compile mode's first call.
    for row in result.rows:
        assert row.kgc_search_s is not None and row.kgc_search_s >= 0
        assert row.kgc_cached is None  # the stand-in has no search report
        assert set(row.compile_s) == {"torch.compile", "max-autotune"}
        assert row.kgc_default_compile_s is not None and row.kgc_default_compile_s >= 0


def test_loop_reports_the_search_time_and_the_cache(monkeypatch, loop_on_cpu, capsys):
    import time

    from kgc.bench import runners
    from kgc.bench.run import run_bench

    class Report:
        cached = True

        def to_dict(self):
            return {"cached": True, "chosen_us": 4.5}

    class Config:
        def to_dict(self):
            return {"format": "kgc-config-1", "kernels": {"softmax_0": {"block_x": 4}}}

    def make_kgc(workload, effort, reps, verbose):
        time.sleep(0.05)
        compiled = _Evaluated(workload)
        compiled.report, compiled.config = Report(), Config()
        return compiled

    monkeypatch.setattr(runners, "make_kgc", make_kgc)
    (row,) = run_bench([_small("softmax")], reps=5, progress=True, device="cpu").rows
    assert row.kgc_cached is True and row.kgc_search_s >= 0.05
    assert row.to_dict()["kgc_cached"] is True
    # The choice and the search's report go into the JSON, to explain a row.
    assert row.to_dict()["kgc_config"]["kernels"] == {"softmax_0": {"block_x": 4}}
    assert row.to_dict()["kgc_search"] == {"cached": True, "chosen_us": 4.5}
    line = next(line for line in capsys.readouterr().err.splitlines()
                if line.startswith("softmax: "))
    assert line.startswith(f"softmax: kgc search {row.kgc_search_s:.1f} s (from the cache), "
                           "torch.compile first call ")
    assert ", max-autotune-no-cudagraphs first call " in line
    assert line.endswith(f", kgc default compile {row.kgc_default_compile_s:.1f} s")


def test_loop_reports_a_torch_contender_that_fails(monkeypatch, loop_on_cpu):
    from kgc.bench import runners
    from kgc.bench.run import run_bench

    def make_torch(workload, runner):
        if runner == "max-autotune":
            def broken(*inputs):
                raise RuntimeError("no kernel for this\nmore lines")
            return broken
        return workload.reference

    monkeypatch.setattr(runners, "make_torch", make_torch)
    monkeypatch.setattr(runners, "make_kgc",
                        lambda workload, effort, reps, verbose: _Evaluated(workload))
    (row,) = run_bench([_small("lora")], reps=5, progress=False, device="cpu").rows
    assert row.kgc_status == OK and set(row.times_us) == {"kgc", "kgc-default", "eager",
                                                          "torch.compile"}
    assert row.errors == {"max-autotune": "RuntimeError: no kernel for this"}


def test_loop_without_an_eager_result_does_not_time_kgc(monkeypatch, loop_on_cpu):
    import dataclasses

    from kgc.bench import runners
    from kgc.bench.run import run_bench

    def broken(*inputs):
        raise RuntimeError("no such kernel")

    workload = dataclasses.replace(_small("softmax"), reference=broken)
    monkeypatch.setattr(runners, "make_kgc",
                        lambda workload, effort, reps, verbose: _Evaluated(workload))
    (row,) = run_bench([workload], reps=5, progress=False, device="cpu").rows
    assert row.kgc_status == FAILED and row.times_us == {} and loop_on_cpu == []
    assert row.kgc_default_status == FAILED
    assert row.errors == {
        "kgc": "not checked: eager PyTorch gave no result to check it against",
        "kgc-default": "not checked: eager PyTorch gave no result to check it against",
        "eager": "RuntimeError: no such kernel", "torch.compile": "RuntimeError: no such kernel",
        "max-autotune": "RuntimeError: no such kernel"}


def test_bench_with_a_json_path_in_a_missing_folder(tmp_path):
    missing = tmp_path / "no" / "bench.json"
    done = _kgc("bench", "--workloads", "softmax", "--json", str(missing))
    assert done.returncode == 1
    assert done.stderr.strip() == f"kgc: error: --json: the folder of '{missing}' does not exist"


@pytest.mark.parametrize("error,reason", [
    (KgcError("matmul: no lowering for f8E4M3FN"), "matmul: no lowering for f8E4M3FN"),
    (RuntimeError("Triton failed\nline two"), "kgc failed: RuntimeError: Triton failed"),
])
def test_a_kgc_failure_becomes_the_rows_reason(monkeypatch, error, reason):
    import kgc.api
    from kgc.bench import runners

    seen = {}

    def superoptimize(graph, **options):
        seen.update(options, name=graph.name)
        raise error

    monkeypatch.setattr(kgc.api, "superoptimize", superoptimize)
    with pytest.raises(runners.Unavailable) as caught:
        runners.make_kgc(CATALOGUE["gemm-fp8"], "low", 50, verbose=False)
    assert str(caught.value) == reason
    assert seen == {"effort": "low", "profile_iters": 50, "verbose": False, "name": "gemm_fp8"}


def test_loop_checks_the_default_compile_apart_from_the_searched_one(monkeypatch, loop_on_cpu):
    from kgc.bench import runners
    from kgc.bench.run import run_bench

    def make_kgc_default(workload):
        if workload.name == "layer-norm":
            raise runners.Unavailable("kgc failed: no default for this")
        return _Evaluated(workload, _spoil_first)

    monkeypatch.setattr(runners, "make_kgc", lambda workload, effort, reps, verbose:
                        _Evaluated(workload))
    monkeypatch.setattr(runners, "make_kgc_default", make_kgc_default)
    spoiled, failed = run_bench([_small("softmax"), _small("layer-norm")], reps=5,
                                progress=False, device="cpu").rows
    for row in (spoiled, failed):
        # The searched kernel is right and timed, whatever the default does.
        assert row.kgc_status == OK and "kgc" in row.times_us and "kgc-default" not in row.times_us
    assert spoiled.kgc_default_status == WRONG
    assert spoiled.errors["kgc-default"].startswith("differs from eager, not timed: result #0")
    assert failed.kgc_default_status == FAILED
    assert failed.errors == {"kgc-default": "kgc failed: no default for this"}
    assert failed.kgc_default_compile_s is not None


def test_a_default_compile_failure_becomes_the_rows_reason(monkeypatch):
    import kgc.api
    from kgc.bench import runners

    def compile_graph(graph, **options):
        raise KgcError("matmul: no lowering for f8E4M3FN")

    monkeypatch.setattr(kgc.api, "compile", compile_graph)
    with pytest.raises(runners.Unavailable, match="^matmul: no lowering for f8E4M3FN$"):
        runners.make_kgc_default(CATALOGUE["gemm-fp8"])


def test_torch_contenders():
    from kgc.bench import runners

    workload = CATALOGUE["softmax"]
    assert runners.make_torch(workload, "eager") is workload.reference
    for runner in ("torch.compile", "max-autotune"):
        assert callable(runners.make_torch(workload, runner))
    with pytest.raises(ValueError, match="unknown torch runner 'jit'"):
        runners.make_torch(workload, "jit")


def test_gqa_decode_gives_torch_the_packing_kgc_has(monkeypatch):
    """The torch code of gqa-decode packs each KV head's query heads as the
    rows of one attention, as kgc's graph does: the same values as
    enable_gqa's attention, from views of the same tensors (no copy)."""
    workload = CATALOGUE["gqa-decode"].small()
    q, k, v = (t.float() for t in _small_inputs(workload, seed=11))
    ours = workload.reference(q, k, v)
    expected = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(q.shape[1] // k.shape[1], dim=1),
        v.repeat_interleave(q.shape[1] // k.shape[1], dim=1))
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(workload.cpu_reference(q, k, v), expected, atol=1e-5, rtol=1e-5)
    assert workload.torch_layout is None
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def recording(query, key, value, **kwargs):
        calls.append((query.shape, key.shape, kwargs))
        return real(query, key, value, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    workload.reference(q, k, v)
    heads, kv_heads = q.shape[1], k.shape[1]
    ((query, key, kwargs),) = calls
    assert query == (1, kv_heads, heads // kv_heads, q.shape[-1]) and key == k.shape
    assert not kwargs.get("enable_gqa", False)


REPO = pathlib.Path(__file__).resolve().parent.parent


def _checkout() -> pathlib.Path | None:
    """The git checkout kgc's bench package runs from (None when kgc is
    installed from a wheel)."""
    from kgc.bench import provenance

    done = subprocess.run(["git", "-C", str(pathlib.Path(provenance.__file__).resolve().parent),
                           "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    return pathlib.Path(done.stdout.strip()) if done.returncode == 0 else None


def _git(root, *arguments):
    return subprocess.run(["git", "-C", str(root), *arguments], capture_output=True, text=True,
                          check=True).stdout.strip()


def _assert_provenance(record, command):
    """A result's provenance names the checkout's commit (None outside
    one), this machine's GPU and packages, a date of now and `command`."""
    import datetime

    from kgc.bench.provenance import FIELDS

    assert set(record) == set(FIELDS)
    root = _checkout()
    if root is None:
        assert record["commit"] is None and record["dirty"] is None
    else:
        assert record["commit"] == _git(root, "rev-parse", "HEAD")
        assert len(record["commit"]) == 40
        assert record["dirty"] is bool(_git(root, "status", "--porcelain",
                                            "--untracked-files=no"))
    assert record["gpu"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else None)
    versions = record["versions"]
    assert set(versions) == {"kgc", "torch", "triton"} and versions["kgc"]
    assert versions["torch"] in (torch.__version__, torch.__version__.split("+")[0])
    made = datetime.datetime.fromisoformat(record["date"])
    assert made.tzinfo is not None
    assert abs(datetime.datetime.now(datetime.timezone.utc) - made).total_seconds() < 600
    assert record["command"] == command


def test_a_bench_result_file_says_what_produced_it(monkeypatch, loop_on_cpu, tmp_path):
    from kgc.bench import runners
    from kgc.bench.run import run_bench

    monkeypatch.setattr(runners, "make_kgc", lambda workload, effort, reps, verbose:
                        _Evaluated(workload))
    root = _checkout() or tmp_path
    result = run_bench([_small("softmax")], effort="low", reps=3, seed=1, progress=False,
                       device="cpu", command=[str(root / ".venv" / "bin" / "kgc"), "bench",
                                              "--json", str(root / "out.json"), "--quick"])
    path = tmp_path / "bench.json"
    result.write_json(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == report_module.SCHEMA_VERSION
    # The program by its name and paths inside the checkout relative to it:
    # the record reads the same on every machine.
    out = "out.json" if _checkout() else str(root / "out.json")
    _assert_provenance(data["provenance"], f"kgc bench --json {out} --quick")


def test_a_benchmark_scripts_result_file_says_what_produced_it(tmp_path):
    from kgc.bench import provenance

    root = _checkout() or tmp_path
    path = tmp_path / "results.json"
    provenance.write_json(path, {"rows": [{"case": "decode", "ms": 1.5}]},
                          argv=[str(root / "benchmarks" / "gemm.py"), "--json", str(path)])
    data = json.loads(path.read_text())
    assert data["rows"] == [{"case": "decode", "ms": 1.5}]
    script = "benchmarks/gemm.py" if _checkout() else "gemm.py"
    _assert_provenance(data["provenance"], f"python {script} --json {path}")
    with pytest.raises(TypeError, match="dict"):
        provenance.write_json(path, [1, 2])


BENCHMARK_SCRIPTS = sorted((REPO / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("script", BENCHMARK_SCRIPTS, ids=[p.stem for p in BENCHMARK_SCRIPTS])
def test_every_benchmark_script_writes_its_results_with_their_provenance(script):
    """A script that takes --json writes the file through
    kgc.bench.provenance.write_json, never json.dump on its own."""
    import ast

    tree = ast.parse(script.read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]

    def named(call, name):
        function = call.func
        return (isinstance(function, ast.Attribute) and function.attr == name) or (
            isinstance(function, ast.Name) and function.id == name)

    if "--json" not in script.read_text():
        pytest.skip(f"{script.name} writes no result file")
    assert any(named(c, "write_json") and isinstance(c.func, ast.Attribute)
               and isinstance(c.func.value, ast.Name) and c.func.value.id == "provenance"
               for c in calls), f"{script.name} does not write through provenance.write_json"
    assert not any(named(c, "dump") or named(c, "write_text") for c in calls), \
        f"{script.name} writes a file without its provenance"


def test_torch_backend_benchmark_faces_max_autotune_with_max_autotune():
    """benchmarks/torch_backend.py times kgc's max-autotune next to
    Inductor's max-autotune search (CUDA graphs off on both sides, as
    everywhere in that benchmark), not next to Inductor's default mode
    alone."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("torch_backend_benchmark",
                                                  REPO / "benchmarks" / "torch_backend.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ways = dict(module.ways_of(autotune=True))
    assert ways["torch.compile max-autotune"] == {"mode": "max-autotune-no-cudagraphs"}
    assert ways["kgc max-autotune"] == {"backend": "kgc", "options": {"mode": "max-autotune"}}
    assert ways["torch.compile"] == {} and ways["kgc"] == {"backend": "kgc"}
    assert not any("max-autotune" in name for name, _ in module.ways_of(autotune=False))


def test_an_installed_copy_records_the_commit_its_builder_names(monkeypatch):
    from kgc.bench import provenance

    monkeypatch.setattr(provenance, "_source_root", lambda: None)
    monkeypatch.delenv("KGC_SOURCE_COMMIT", raising=False)
    assert provenance.collect(["x"])["commit"] is None
    monkeypatch.setenv("KGC_SOURCE_COMMIT", "0123abcd")
    monkeypatch.setenv("KGC_SOURCE_DIRTY", "0")
    record = provenance.collect(["x"])
    assert record["commit"] == "0123abcd" and record["dirty"] is False


def test_gpu_kernel_time_is_the_median_call():
    from kgc.bench.model_rows import median_call_us

    # Three calls; the second ran slow (a clock dip): the median ignores it.
    ranges = [(0, 100), (200, 300), (400, 500)]
    kernels = [(10, 5.0), (20, 7.0), (210, 40.0), (230, 7.0), (410, 6.0), (420, 7.0)]
    assert median_call_us(ranges, kernels, 3) == 13.0
    # The host ranges in another order name the same calls.
    assert median_call_us(list(reversed(ranges)), kernels, 3) == 13.0


def test_gpu_kernel_time_falls_back_to_the_mean_where_calls_are_not_told_apart():
    from kgc.bench.model_rows import median_call_us

    kernels = [(10, 6.0), (210, 30.0), (410, 3.0)]
    # A kernel outside every call's range.
    assert median_call_us([(0, 100), (200, 300), (400, 405)], kernels, 3) == 13.0
    # Fewer ranges than calls.
    assert median_call_us([(0, 100)], kernels, 3) == 13.0
