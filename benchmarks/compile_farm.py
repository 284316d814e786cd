"""Compile throughput of the search's compile farm (kgc.search.farm) on a
local Ray cluster of 1 and of 2 CPUs, on CPU alone.

    python benchmarks/compile_farm.py [--candidates 16] [--json results.json]

The candidates are the first configs of the kernels of the RMSNorm +
MatMul example (X 16x4096, W 4096x6144, f16) at effort "low" for sm_90,
each lowered by kgc and compiled by Triton as one Ray task. Triton's disk
cache is pointed at a new empty folder for every cluster and kgc's kernel
cache is off, so every task compiles; each cluster first compiles other
candidates, one per CPU, to start its workers (Ray's and Triton's start-up),
which is not counted.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import ray

import kgc
from kgc.bench import provenance
from kgc.parsing import canonical_source
from kgc.search.farm import Farm
from kgc.search.space import variant_space


def candidates(count: int):
    g = kgc.new_kernel_graph("rmsnorm_matmul")
    x = g.new_input((16, 4096), kgc.float16)
    gamma = g.new_input((4096,), kgc.float16)
    w = g.new_input((4096, 6144), kgc.float16)
    g.mark_output(g.matmul(g.rms_norm(x, gamma, normalized_shape=(4096,)), w))
    text, function, _ = canonical_source(g, None)
    _, kernels = variant_space(text, function, "low", 90)
    every = [(v.launch_text, config, 90, 300.0) for v in kernels.values() for config in v.configs]
    if len(every) < count + 2:
        raise SystemExit(f"the example has {len(every)} candidates; ask for at most "
                         f"{len(every) - 2}")
    # Distinct candidates, the last two kept apart to start the workers with.
    return every[:count], every[-2:]


def measure(cpus: int, requests, warm_up) -> dict:
    with tempfile.TemporaryDirectory(prefix="kgc-triton-") as triton_cache:
        # The Ray workers' environment, which their Triton workers inherit.
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                 configure_logging=False,
                 runtime_env={"env_vars": {"TRITON_CACHE_DIR": triton_cache}})
        try:
            farm = Farm.connect("ray")
            farm.lower_and_compile(warm_up[:cpus])
            started = time.perf_counter()
            results = farm.lower_and_compile(requests)
            wall = time.perf_counter() - started
        finally:
            ray.shutdown()
    failed = sum(isinstance(r, str) for r in results)
    return {"cpus": cpus, "candidates": len(requests), "failed": failed, "wall_s": round(wall, 2),
            "per_s": round(len(requests) / wall, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--json")
    args = parser.parse_args()
    requests, warm_up = candidates(args.candidates)
    rows = [measure(cpus, requests, warm_up) for cpus in (1, 2)]
    for row in rows:
        print(f"{row['cpus']} Ray worker(s): {row['candidates']} candidates in {row['wall_s']} s, "
              f"{row['per_s']} per s ({row['failed']} failed)")
    if args.json:
        provenance.write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
