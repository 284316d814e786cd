"""superoptimize on the headline example, side by side with torch.

    python benchmarks/superoptimize.py [--json results.json] [--effort default]

In one process on one GPU: the RMSNorm + MatMul example (X 16x4096,
W 4096x6144, f16) compiled by kgc's defaults and after superoptimize (with
an empty cache: the search's wall time and candidate counts), next to torch
eager, torch.compile and torch.compile max-autotune (no CUDA graphs, as
kgc's kernels are launched here), each checked against eager and then timed
two ways: as called (triton.testing.do_bench, median: what a caller pays,
host overhead included) and on the GPU alone (CUDA graph replays); the host's time per call of a
one-kernel kgc graph against torch.add on the same tensors; and the wall
time of the same superoptimize in a new process, served by the cache.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton.testing

import kgc
from kgc.bench import provenance
from kgc.search.measure import time_replayed

_CACHED_RUN = """
import time, kgc
started = time.perf_counter()
g = kgc.new_kernel_graph("rmsnorm_matmul")
x = g.new_input((16, 4096), kgc.float16)
gamma = g.new_input((4096,), kgc.float16)
w = g.new_input((4096, 6144), kgc.float16)
g.mark_output(g.matmul(g.rms_norm(x, gamma, normalized_shape=(4096,)), w))
result = g.superoptimize(effort="{effort}", verbose=False)
print(result.report.cached, time.perf_counter() - started)
"""


def headline():
    g = kgc.new_kernel_graph("rmsnorm_matmul")
    x = g.new_input((16, 4096), kgc.float16)
    gamma = g.new_input((4096,), kgc.float16)
    w = g.new_input((4096, 6144), kgc.float16)
    g.mark_output(g.matmul(g.rms_norm(x, gamma, normalized_shape=(4096,)), w))
    return g


def torch_headline(x, gamma, w):
    return torch.nn.functional.rms_norm(x, (4096,), gamma, eps=1e-6) @ w


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=50, rep=500, return_mode="median") * 1e3


def host_us_per_call(fn, calls: int = 2000) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the numbers here")
    parser.add_argument("--effort", default="default", choices=("low", "default", "high"))
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(16, 4096, device="cuda").half()
    gamma = torch.randn(4096, device="cuda").half()
    w = (torch.randn(4096, 6144, device="cuda") * 0.5).half()
    expected = torch_headline(x, gamma, w).float()

    cache_dir = tempfile.mkdtemp(prefix="kgc-bench-cache-")
    os.environ["KGC_CACHE_DIR"] = cache_dir
    default = kgc.compile(headline())
    started = time.perf_counter()
    tuned = headline().superoptimize(effort=args.effort)
    search_s = time.perf_counter() - started
    counts = tuned.report.counts()

    contenders = {
        "kgc default": default,
        "kgc superoptimized": tuned,
        "torch eager": torch_headline,
        "torch.compile": torch.compile(torch_headline),
        "torch.compile max-autotune": torch.compile(torch_headline,
                                                    mode="max-autotune-no-cudagraphs"),
    }
    times, replayed = {}, {}
    for name, fn in contenders.items():
        got = fn(x, gamma, w).float()
        torch.testing.assert_close(got, expected, atol=0.1, rtol=1e-2)
        times[name] = bench(lambda fn=fn: fn(x, gamma, w))
        # The GPU's time alone: the calls captured into a CUDA graph, so no
        # host overhead (Python, guards, launches) is measured.
        replayed[name] = time_replayed(lambda fn=fn: fn(x, gamma, w), 16, 500)
    best_torch = min(v for k, v in times.items() if k.startswith("torch"))
    best_torch_replayed = min(v for k, v in replayed.items() if k.startswith("torch"))

    g = kgc.new_kernel_graph("add")
    a = g.new_input((1024,), kgc.float32)
    b = g.new_input((1024,), kgc.float32)
    g.mark_output(g.add(a, b))
    add = kgc.compile(g)
    ta, tb = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    out = torch.empty_like(ta)
    host = {"kgc one-kernel graph": host_us_per_call(lambda: add(ta, tb)),
            "kgc with out=": host_us_per_call(lambda: add(ta, tb, out=out)),
            "torch.add": host_us_per_call(lambda: torch.add(ta, tb))}

    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", _CACHED_RUN.format(effort=args.effort)],
                           capture_output=True, text=True, env=dict(os.environ))
    cached_wall = time.perf_counter() - started
    cached_flag, cached_inner = child.stdout.split()[-2:] if child.returncode == 0 else ("?", "nan")

    print(f"\nheadline RMSNorm+MatMul 16x4096x6144 f16 on {torch.cuda.get_device_name()}")
    print(f"{'':30}{'called us':>10}{'vs best':>9}{'GPU us':>9}{'vs best':>9}")
    for name, value in times.items():
        print(f"{name:30}{value:10.2f}{best_torch / value:8.2f}x{replayed[name]:9.2f}"
              f"{best_torch_replayed / replayed[name]:8.2f}x")
    print(f"search: {search_s:.1f} s wall, {sum(counts.values())} candidates: "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    print(f"  chosen partition {tuned.config.partition}, kernels "
          f"{ {k: v.to_dict() for k, v in tuned.config.kernels.items()} }")
    print(f"  kernel time from the search: chosen {tuned.report.chosen_us:.2f} us, default "
          f"{tuned.report.default_us:.2f} us")
    print("host time per call (us): " + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    print(f"cached superoptimize in a new process: {cached_wall:.1f} s wall "
          f"({float(cached_inner):.2f} s inside, from the cache: {cached_flag})")
    if args.json:
        provenance.write_json(args.json, {
            "times_us": times, "gpu_us": replayed, "search_s": search_s, "counts": counts,
            "config": tuned.config.to_dict(), "host_us": host, "cached_process_s": cached_wall,
            "cached_inside_s": float(cached_inner), "chosen_us": tuned.report.chosen_us,
            "default_us": tuned.report.default_us})


if __name__ == "__main__":
    main()
