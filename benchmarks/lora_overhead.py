"""What LoRA's adapter costs over the bare matmul, config by config.

    python benchmarks/lora_overhead.py [--json results.json] [--m 16] [--k 4096] [--n 4096]
                                       [--rank 16]

Times X W and X W + (X A) B (f16) with the same matmul configs (block_n,
block_k, stages, split_k), inputs rotated out of L2 as the search times
them (kgc.search.measure.time_rotated), each result checked against torch
first; then, for the best LoRA config and the bare matmul under the same
config, the duration of each kernel (torch.profiler). The difference is
what the side dot X A in the k loop and the product (X A) B after it cost.
"""

from __future__ import annotations

import argparse
import itertools

import torch

import kgc
from kgc.bench import provenance
from kgc.pipeline.config import GraphConfig
from kgc.search.measure import input_sets, l2_bytes, time_rotated
from kgc.tiling.config import MatmulConfig

_BLOCK_N = (32, 64, 128)
_BLOCK_K = (64, 128)
_STAGES = (3, 4, 6)
_SPLITS = (1, 2, 4)


def _graphs(m: int, k: int, n: int, rank: int) -> dict[str, kgc.Graph]:
    bare = kgc.Graph("bare")
    x, w = bare.input("x", (m, k), "f16"), bare.input("w", (k, n), "f16")
    bare.output(bare.matmul(x, w))
    lora = kgc.Graph("lora")
    x, w = lora.input("x", (m, k), "f16"), lora.input("w", (k, n), "f16")
    a, b = lora.input("a", (k, rank), "f16"), lora.input("b", (rank, n), "f16")
    lora.output(lora.add(lora.matmul(x, w), lora.matmul(lora.matmul(x, a), b)))
    return {"bare": bare, "lora": lora}


def _inputs(name: str, m: int, k: int, n: int, rank: int, sets: int) -> list[list[torch.Tensor]]:
    def one():
        x = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = (torch.randn(k, n, device="cuda") * 0.02).half()
        if name == "bare":
            return [x, w]
        a = (torch.randn(k, rank, device="cuda") * 0.02).half()
        b = (torch.randn(rank, n, device="cuda") * 0.02).half()
        return [x, w, a, b]
    return [one() for _ in range(sets)]


def _reference(name: str, tensors: list[torch.Tensor]) -> torch.Tensor:
    if name == "bare":
        x, w = tensors
        return x.float() @ w.float()
    x, w, a, b = tensors
    return x.float() @ w.float() + (x @ a).float() @ b.float()


def _kernel_times(compiled, tensors) -> dict[str, float]:
    """Median duration of each kernel over 200 calls, in us."""
    for _ in range(20):
        compiled(*tensors)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(200):
            compiled(*tensors)
        torch.cuda.synchronize()
    durations: dict[str, list[float]] = {}
    for event in profile.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            durations.setdefault(event.name, []).append(event.device_time)
    return {name: sorted(times)[len(times) // 2] for name, times in durations.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--rank", type=int, default=16)
    args = parser.parse_args()
    m, k, n, rank = args.m, args.k, args.n, args.rank
    sets = input_sets(2 * (m * k + k * n + 2 * rank * (k + n)), l2_bytes())
    graphs = _graphs(m, k, n, rank)
    rows = []
    compiled_by = {}
    for name, graph in graphs.items():
        inputs = _inputs(name, m, k, n, rank, sets)
        for block_n, block_k, stages, split in itertools.product(_BLOCK_N, _BLOCK_K, _STAGES,
                                                                 _SPLITS):
            config = MatmulConfig(block_n=block_n, block_k=block_k, num_stages=stages,
                                  split_k=split)
            try:
                compiled = kgc.compile(graph, config=GraphConfig(
                    graph.name, None, {f"{graph.name}_0_matmul": config}))
            except kgc.KgcError as error:
                print(f"{name} {config}: {error}")
                continue
            got = compiled(*inputs[0])
            error = (got.float() - _reference(name, inputs[0])).abs().max().item()
            if not error < 0.05:
                raise AssertionError(f"{name} {config}: differs from torch by {error}")
            us = time_rotated(lambda i: compiled(*inputs[i]), sets)
            key = (block_n, block_k, stages, split)
            compiled_by[(name, key)] = compiled
            rows.append({"graph": name, "block_n": block_n, "block_k": block_k,
                         "num_stages": stages, "split_k": split, "us": us,
                         "kernels": len(compiled.function.launches)})
    by_graph = {name: sorted((r for r in rows if r["graph"] == name), key=lambda r: r["us"])
                for name in graphs}
    print("graph  block_n block_k stages split      us   bare same config")
    bare_us = {(r["block_n"], r["block_k"], r["num_stages"], r["split_k"]): r["us"]
               for r in by_graph["bare"]}
    for r in by_graph["lora"][:12] + by_graph["bare"][:6]:
        key = (r["block_n"], r["block_k"], r["num_stages"], r["split_k"])
        same = f"{bare_us[key]:8.2f}" if r["graph"] == "lora" and key in bare_us else ""
        print(f"{r['graph']:6} {r['block_n']:7} {r['block_k']:7} {r['num_stages']:6} "
              f"{r['split_k']:5} {r['us']:7.2f} {same}")
    best = by_graph["lora"][0]
    key = (best["block_n"], best["block_k"], best["num_stages"], best["split_k"])
    kernels = {}
    for name in graphs:
        if (name, key) in compiled_by:
            kernels[name] = _kernel_times(compiled_by[(name, key)],
                                          _inputs(name, m, k, n, rank, 1)[0])
            print(f"kernels of {name} at the best LoRA config {key}:",
                  ", ".join(f"{kernel} {us:.2f} us" for kernel, us in kernels[name].items()))
    if args.json:
        provenance.write_json(args.json, {
            "device": torch.cuda.get_device_name(), "shape": [m, k, n, rank], "rows": rows,
            "best_lora_config": list(key), "kernels_us": kernels}, indent=1)


if __name__ == "__main__":
    main()
