"""superoptimize on every GPU of the host against the same search on one.

    python benchmarks/multi_gpu_search.py [--json out.json]

For the headline graph (RMSNorm + MatMul, X 16x4096, W 4096x6144 f16) and a
graph of four kernels, runs the search twice, each in a fresh process with
kgc's cache off and an empty Triton cache (so both compile every
candidate): once with every GPU visible (one timing worker per GPU) and
once with `CUDA_VISIBLE_DEVICES=0`. Prints the wall times and where they
went (lowering, compiling, checking and timing), the candidates each GPU
timed, the configs chosen, and the two choices timed side by side on GPU 0
(the multi-GPU choice may be at most 2% slower where they differ).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_CHILD = "--child"


def headline():
    import kgc

    g = kgc.Graph("rmsnorm_matmul")
    x = g.input("x", (16, 4096), "f16")
    gamma = g.input("gamma", (4096,), "f16")
    w = g.input("w", (4096, 6144), "f16")
    g.output(g.matmul(g.rms_norm(x, gamma, eps=1e-6), w))
    return g


def four_kernels():
    """A matmul, a softmax down the columns, a matmul with the residual
    and a layer norm: four kernels under kgc's default fusion."""
    import kgc

    g = kgc.Graph("four_kernels")
    x = g.input("x", (1024, 1024), "f16")
    w1 = g.input("w1", (1024, 2048), "f16")
    w2 = g.input("w2", (2048, 1024), "f16")
    gamma = g.input("gamma", (1024,), "f16")
    beta = g.input("beta", (1024,), "f16")
    scores = g.softmax(g.matmul(x, w1), dim=0)
    g.output(g.layer_norm(g.add(g.matmul(scores, w2), x), gamma, beta))
    return g


GRAPHS = {"headline": headline, "four_kernels": four_kernels}


def _search(name: str) -> dict:
    """One search of graph `name` in this process; what the parent prints."""
    import torch

    import kgc
    from kgc.search.tuner import GRAPH

    graph = GRAPHS[name]()
    started = time.perf_counter()
    compiled = kgc.superoptimize(graph, cache=False, verbose=False)
    wall = time.perf_counter() - started
    report = compiled.report
    per_device: dict[str, int] = {}
    for row in report.rows:
        if row.device is not None and row.status in ("timed", "rejected", "skipped") \
                and row.signature != GRAPH:
            per_device[str(row.device)] = per_device.get(str(row.device), 0) + 1
    return {"graph": name, "gpus": torch.cuda.device_count(), "wall_s": wall,
            "per_device": per_device, "chosen_us": report.chosen_us,
            "default_us": report.default_us, "counts": report.counts(),
            "phases_s": report.phases_s,
            "config": compiled.config.to_json() if compiled.config is not None else None}


def _time_choice(name: str, config_json: str) -> float:
    """GPU time (us) of graph `name` compiled with `config_json` on GPU 0."""
    import torch

    import kgc
    from kgc.pipeline.config import GraphConfig
    from kgc.search.measure import time_replayed

    graph = GRAPHS[name]()
    compiled = kgc.compile(graph, config=GraphConfig.load(json.loads(config_json)))
    generator = torch.Generator().manual_seed(0)
    inputs = [torch.randn(t.shape, generator=generator).to(torch.float16).cuda()
              for t in graph.inputs]
    return time_replayed(lambda: compiled.run(*inputs), warmup_iters=50, profile_iters=2000)


def _child(argv: list[str]) -> None:
    if argv[0] == "search":
        print(json.dumps(_search(argv[1])))
    else:
        print(json.dumps(_time_choice(argv[1], argv[2])))


def _run_child(args: list[str], one_gpu: bool) -> object:
    env = dict(os.environ)
    if one_gpu:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    # Each search compiles from nothing: with Triton's disk cache shared, the
    # second search of a graph would find the first one's cubins.
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
        env["TRITON_CACHE_DIR"] = cache
        result = subprocess.run([sys.executable, __file__, _CHILD, *args], env=env,
                                capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == _CHILD:
        _child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    arguments = parser.parse_args()
    rows = []
    for name in GRAPHS:
        every = _run_child(["search", name], one_gpu=False)
        one = _run_child(["search", name], one_gpu=True)
        same = every["config"] == one["config"]
        times = {}
        if not same:
            # Both choices on the same GPU, alternately, so drift hits both.
            for label, run in (("every", every), ("one", one)):
                times[label] = _run_child(["time", name, run["config"]], one_gpu=True)
        row = {"graph": name, "every_gpu": every, "one_gpu": one, "same_choice": same,
               "choice_times_us": times}
        rows.append(row)
        print(f"{name}: {every['gpus']} GPUs {every['wall_s']:.1f} s "
              f"(candidates per GPU {every['per_device']}, phases {every['phases_s']}), "
              f"one GPU {one['wall_s']:.1f} s (per GPU {one['per_device']}, phases "
              f"{one['phases_s']}); speed-up {one['wall_s'] / every['wall_s']:.2f}x; "
              f"chosen {every['chosen_us']:.2f} us vs {one['chosen_us']:.2f} us; "
              + ("same choice" if same else
                 f"choices differ: {times['every']:.2f} us vs {times['one']:.2f} us on GPU 0 "
                 f"({times['every'] / times['one']:.3f}x)"), flush=True)
    if arguments.json:
        from kgc.bench import provenance

        provenance.write_json(arguments.json, {"rows": rows})


if __name__ == "__main__":
    main()
