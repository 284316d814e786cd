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
    data = json.loads(results.read_text())
    (row,) = data["rows"]
    assert row["workload"] == "softmax" and row["kgc_status"] == "ok"
    assert set(row["times_us"]) == {"kgc", "eager", "torch.compile", "max-autotune"}
    assert all(t > 0 for t in row["times_us"].values())
    # No kernel beats the bandwidth the same run measured (a little slack
    # for the median's noise).
    assert row["times_us"]["kgc"] > 0.9 * row["floor_us"] > 0
    assert row["kgc_cached"] is False
    assert isinstance(row["target_met"], bool)
    assert data["peaks"]["copy_GB_per_s"] > 100 and data["peaks"]["matmul_TFLOPS"]["bf16"] > 10
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # The second run takes kgc's choice from the cache.
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert json.loads(results.read_text())["rows"][0]["kgc_cached"] is True
