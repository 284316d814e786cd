"""`kgc bench --quick` end to end on one small workload: superoptimize,
check, time every contender, write the JSON and the chart."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.tools import console_script


@pytest.mark.gpu
def test_bench_quick_on_softmax(tmp_path):
    results, chart = tmp_path / "bench.json", tmp_path / "bench.png"
    env = {**os.environ, "KGC_CACHE_DIR": str(tmp_path / "cache")}
    command = [console_script("kgc"), "bench", "--quick", "--workloads", "softmax",
               "--json", str(results), "--chart", str(chart), "--reps", "50", "--no-progress"]
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "softmax" in first.stdout and "speedup" in first.stdout
    assert "floor from\n  memory " in first.stdout and "(best of copy 1 GiB" in first.stdout
    data = json.loads(results.read_text())
    (row,) = data["rows"]
    assert row["workload"] == "softmax" and row["kgc_status"] == "ok"
    assert set(row["times_us"]) == {"kgc", "kgc-default", "eager", "torch.compile",
                                     "max-autotune"}
    assert all(t > 0 for t in row["times_us"].values())
    # kgc's default compile, checked and timed beside the searched kernel.
    assert row["kgc_default_status"] == "ok" and row["kgc_default_compile_s"] > 0
    assert row["default_vs_searched"] == pytest.approx(
        row["times_us"]["kgc-default"] / row["times_us"]["kgc"])
    assert "kgc-default" in first.stdout  # the table's column
    # No kernel beats the bandwidth the same run measured (a little slack
    # for the median's noise).
    assert row["times_us"]["kgc"] > 0.9 * row["floor_us"] > 0
    assert row["kgc_cached"] is False
    assert isinstance(row["target_met"], bool)
    assert data["peaks"]["memory_GB_per_s"] > 100 and data["peaks"]["matmul_TFLOPS"]["bf16"] > 10
    assert data["peaks"]["memory_GB_per_s"] == max(data["peaks"]["memory_probes_GB_per_s"].values())
    assert row["kgc_search_s"] > 0 and set(row["compile_s"]) == {"torch.compile", "max-autotune"}
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # The second run takes kgc's choice from the cache.
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(results.read_text())["rows"][0]["kgc_cached"] is True
    assert " cached" in again.stdout.split("softmax", 1)[1].splitlines()[0]


@pytest.mark.gpu
def test_peaks_are_the_best_of_every_probe():
    """Every memory and matmul probe runs on the device, and the peaks are
    the best of them; FP8 probes run where the device has FP8 tensor cores."""
    import torch

    from kgc.bench.floor import measure_peaks

    fp8 = torch.cuda.get_device_capability() >= (8, 9)
    peaks = measure_peaks(fp8=fp8, reps=20)
    assert set(peaks.memory_probes) == {"copy 1 GiB", "add 3x256 MiB", "sum 1 GiB"}
    assert peaks.memory_bytes_per_s == max(peaks.memory_probes.values()) > 1e11
    assert set(peaks.matmul_probes["bf16"]) == {"8192^3", "6144^3", "16384x16384x4096"}
    for kind, rates in peaks.matmul_probes.items():
        assert peaks.matmul_flops_per_s[kind] == max(rates.values()) > 1e13
    assert ("fp8" in peaks.matmul_flops_per_s) is fp8


@pytest.mark.gpu
@pytest.mark.parametrize("fast", [False, True], ids=["precise", "fast_accum"])
def test_fp8_workload_with_column_major_b_matches_scaled_mm(fast):
    """The FP8 workloads' graphs (gemm-fp8, and gemm-fp8-fast against
    _scaled_mm's use_fast_accum=True), compiled by kgc, on the same memory
    that torch._scaled_mm reads as column-major B (shapes off the tiles; M
    only needs no multiple of 16), pass the bench's check against it."""
    import torch

    import kgc
    from kgc.bench.check import check
    from kgc.bench.workloads import _fp8_gemm_fast_workload, _fp8_gemm_workload

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 tensor cores need sm_89 or newer")
    workload = (_fp8_gemm_fast_workload if fast else _fp8_gemm_workload)(272, 512, 400)
    graph = workload.build()
    inputs = workload.make_inputs("cuda", torch.Generator().manual_seed(11))
    torch_inputs = workload.torch_layout(inputs)
    assert torch_inputs[1].data_ptr() == inputs[1].data_ptr()  # a view: no copy
    ours = kgc.compile(graph)(*inputs)
    theirs = workload.reference(*torch_inputs)
    assert check(graph, inputs, ours, theirs) is None
