"""kgc bench without a GPU: the catalogue (each workload's graph compiles
for sm_90 and computes what its torch code computes), the floor, target
and report math, the table, JSON and chart, and the command's errors."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

from kgc.bench import report as report_module
from kgc.bench.check import check
from kgc.bench.floor import DevicePeaks
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


def test_fp8_gemm_reference_takes_b_column_major():
    workload = CATALOGUE["gemm-fp8"].small()
    a, b, scale_a, scale_b = _small_inputs(workload)
    assert scale_a.shape == () and scale_a > 0 and scale_b > 0
    laid_out = workload.torch_layout([a, b, scale_a, scale_b])
    assert torch.equal(laid_out[1].float(), b.float())
    assert laid_out[1].stride() == (1, b.shape[0])


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


def test_targets_of_the_catalogue():
    targets = {name: (w.target.speedup, w.target.floor_ratio) for name, w in CATALOGUE.items()}
    assert targets == {
        "add-relu-mul": (1.05, 1.15), "rmsnorm-matmul": (1.3, None), "softmax": (1.05, 1.15),
        "layer-norm": (1.05, 1.15), "gemm-f16": (0.95, None), "gemm-bf16": (0.95, None),
        "gated-mlp": (1.15, None), "lora": (1.3, None), "gqa-decode": (2.0, None),
        "gemm-fp8": (0.9, None)}


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
                       {"copy_GB_per_s": 2950.0, "matmul_TFLOPS": {"bf16": 787.0}},
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
    rows = [_row(times={"kgc": 25.0, "eager": 60.0, "torch.compile": 45.0, "max-autotune": 40.0}),
            _row("gemm-fp8", times={"eager": 100.0, "torch.compile": 101.0}, status=FAILED,
                 errors={"kgc": "kgc failed: no FP8 lowering",
                         "max-autotune": "BackendCompilerFailed: boom"}),
            _row("lora", times={"eager": 30.0}, status=WRONG,
                 errors={"kgc": "differs from eager, not timed: off"}),
            _row("add-relu-mul", times={"kgc": 21.0, "eager": 40.0})]
    lines = _result(rows).table().splitlines()
    header = lines[0].split()
    assert header[:5] == ["workload", "kgc", "eager", "torch.compile", "max-autotune"]
    assert header[5:] == ["floor", "speedup", "%", "floor", "target", "met"]
    softmax = lines[1].split()
    assert softmax[:6] == ["softmax", "25.0", "60.0", "45.0", "40.0", "20.0"]
    assert softmax[6:9] == ["1.60x", "80%", ">="] and softmax[-1] == "NO"
    fp8 = lines[2].split()
    assert fp8[:5] == ["gemm-fp8", "failed", "100.0", "101.0", "failed"] and fp8[-1] == "NO"
    assert lines[3].split()[:2] == ["lora", "WRONG"]
    assert lines[4].split()[-1] == "yes"
    assert lines[5].endswith("targets met: 1 of 4")
    text = "\n".join(lines)
    assert "gemm-fp8: kgc: kgc failed: no FP8 lowering" in text
    assert "gemm-fp8: max-autotune-no-cudagraphs: BackendCompilerFailed: boom" in text


def test_json(tmp_path):
    rows = [_row(times={"kgc": 22.0, "eager": 60.0, "torch.compile": 45.0}),
            _row("gemm-fp8", times={"eager": 100.0}, status=FAILED, errors={"kgc": "why"})]
    path = tmp_path / "bench.json"
    _result(rows).write_json(path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == report_module.SCHEMA_VERSION
    assert data["device"] == "NVIDIA H100 80GB HBM3"
    assert data["settings"]["seed"] == 7
    assert set(data["runners"]) == {"kgc", "eager", "torch.compile", "max-autotune"}
    softmax, fp8 = data["rows"]
    assert softmax["times_us"] == {"kgc": 22.0, "eager": 60.0, "torch.compile": 45.0}
    assert softmax["best_torch"] == {"runner": "torch.compile", "time_us": 45.0}
    assert softmax["speedup"] == pytest.approx(45 / 22)
    assert softmax["percent_of_floor"] == pytest.approx(100 * 20 / 22)
    assert softmax["target"] == {"speedup": 1.05, "floor_ratio": 1.15, "text": ">= 1.05x, <= 1.15x floor"}
    assert softmax["target_met"] is True and softmax["kind"] == "memory"
    assert softmax["bytes"] == 4096 * 4096 * 2 * 2 and softmax["flops"] == 0
    assert fp8["kgc_status"] == "failed" and fp8["errors"] == {"kgc": "why"}
    assert fp8["speedup"] is None and fp8["target_met"] is False


def test_chart_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [_row(times={"kgc": 22.0, "eager": 60.0, "torch.compile": 45.0, "max-autotune": 40.0}),
            _row("gemm-fp8", times={"eager": 100.0}, status=FAILED, errors={"kgc": "why"}),
            _row("lora", times={}, status=FAILED, errors={"kgc": "why", "eager": "why"})]
    path = tmp_path / "bench.png"
    _result(rows).write_chart(path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000


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
        "kgc": 10.0, "eager": 10.0, "torch.compile": 10.0, "max-autotune": 10.0}
    assert wrong.kgc_status == WRONG and "kgc" not in wrong.times_us
    assert wrong.errors["kgc"].startswith("differs from eager, not timed: result #0 is off by")
    assert failed.kgc_status == FAILED and "kgc" not in failed.times_us
    assert failed.errors["kgc"] == "kgc failed: no lowering for this"
    # Timed: kgc once for the good row, and the three torch contenders of each row.
    assert len(loop_on_cpu) == 1 + 3 * 3
    assert [r.workload for r in result.failed] == ["softmax", "layer-norm"]
    assert result.settings["seed"] == 3 and result.settings["effort"] == "low"


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
    assert row.kgc_status == OK and set(row.times_us) == {"kgc", "eager", "torch.compile"}
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
    assert row.errors == {
        "kgc": "not checked: eager PyTorch gave no result to check it against",
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


def test_torch_contenders():
    from kgc.bench import runners

    workload = CATALOGUE["softmax"]
    assert runners.make_torch(workload, "eager") is workload.reference
    for runner in ("torch.compile", "max-autotune"):
        assert callable(runners.make_torch(workload, runner))
    with pytest.raises(ValueError, match="unknown torch runner 'jit'"):
        runners.make_torch(workload, "jit")
