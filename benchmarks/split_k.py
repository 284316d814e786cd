"""Split-K on skinny matmuls: kgc's default kernels, kgc with split_k, eager
PyTorch and torch.compile, side by side.

    python benchmarks/split_k.py [--json results.json] [--only NAME] [--splits 2,4,8,16]
                                 [--superoptimize]

Workloads (M of 8 to 16 rows: the (m, n) tiles alone cannot fill an H100):

    rmsnorm_matmul   X 16x4096, W 4096x6144 f16    (the 1/rms after the sum)
    gated_mlp        X 8x4096, W1, W2 4096x11008 f16  (silu(a) * b after the sums)
    lora             X 16x4096, W 4096x4096, A 4096x16, B 16x4096 f16

For each, every matmul kernel of kgc's default partition that can be split
gets `split_k = S` (a GraphConfig, as a search would set it); the result is
checked against eager before timing. Two times per contender, medians
after warm-up: "as called" (triton.testing.do_bench: launches included)
and "GPU alone" (kgc.search.measure.time_replayed: CUDA-graph replays, the
kernels without the host). Ratios are best torch / kgc (> 1: kgc faster).
`--superoptimize` adds what the search picks (split-K is in its space).
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton.testing

import kgc
from kgc.bench import provenance
from kgc.passes.registry import PassFailure
from kgc.passes.tile import plan_kernel
from kgc.pipeline.config import GraphConfig
from kgc.search.measure import time_replayed
from kgc.tiling.config import MatmulConfig
from kgc.tiling.kernel_ops import kernel_name, kernels_in


def _rmsnorm_matmul(g, x, gamma, w):
    return g.matmul(g.rms_norm(x, gamma, eps=1e-6), w)


def _rmsnorm_matmul_torch(x, gamma, w):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), gamma, eps=1e-6) @ w


def _gated_mlp(g, x, w1, w2):
    return g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2))


def _gated_mlp_torch(x, w1, w2):
    return torch.nn.functional.silu(x @ w1) * (x @ w2)


def _lora(g, x, w, a, b):
    return g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b))


def _lora_torch(x, w, a, b):
    return x @ w + (x @ a) @ b


WORKLOADS = {
    # name: (kgc builder, torch function, [(shape, dtype)], atol)
    "rmsnorm_matmul_16x4096x6144_f16": (
        _rmsnorm_matmul, _rmsnorm_matmul_torch,
        [((16, 4096), "f16"), ((4096,), "f16"), ((4096, 6144), "f16")], 0.5),
    "gated_mlp_8x4096x11008_f16": (
        _gated_mlp, _gated_mlp_torch,
        [((8, 4096), "f16"), ((4096, 11008), "f16"), ((4096, 11008), "f16")], 0.5),
    "lora_16x4096x4096_r16_f16": (
        _lora, _lora_torch,
        [((16, 4096), "f16"), ((4096, 4096), "f16"), ((4096, 16), "f16"), ((16, 4096), "f16")],
        0.5),
}

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _graph(name: str) -> kgc.Graph:
    build, _, specs, _ = WORKLOADS[name]
    graph = kgc.Graph(name)
    tensors = [graph.input(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
    graph.output(build(graph, *tensors))
    return graph


def split_config(graph: kgc.Graph, split: int) -> GraphConfig | None:
    """`split_k = split` on every matmul kernel of the default partition
    that can be split; None when none can."""
    from mlir import ir

    with ir.Context() as context:
        module = graph.build(context)
        GraphConfig(graph.name).fuse(module)
        kernels = {}
        for kernel in kernels_in(module):
            try:
                plan, _ = plan_kernel(kernel, MatmulConfig(split_k=split))
            except PassFailure:
                continue
            if plan.schedule == "matmul" and plan.split is not None:
                kernels[kernel_name(kernel)] = MatmulConfig(split_k=split)
    return GraphConfig(graph.name, None, kernels) if kernels else None


def _inputs(name: str):
    _, _, specs, _ = WORKLOADS[name]
    torch.manual_seed(0)
    # Weights of unit scale over k = 4096 would give outputs of ~64: scale
    # them so that f16 outputs stay well inside their range.
    return [(torch.randn(shape, device="cuda") * (0.05 if i > 0 and len(shape) == 2 else 1))
            .to(_DTYPES[dtype]) for i, (shape, dtype) in enumerate(specs)]


def _times(fn) -> dict:
    return {"as_called_us": 1e3 * triton.testing.do_bench(fn, warmup=50, rep=500,
                                                          return_mode="median"),
            "gpu_us": time_replayed(fn, warmup_iters=16, profile_iters=2000)}


def run(name: str, splits: list[int], superoptimize: bool) -> dict:
    _, reference, _, atol = WORKLOADS[name]
    inputs = _inputs(name)
    expected = reference(*inputs)
    graph = _graph(name)
    contenders = {"kgc default": kgc.compile(graph)}
    for split in splits:
        config = split_config(graph, split)
        if config is not None:
            contenders[f"kgc split_k={split}"] = kgc.compile(graph, config=config)
    if superoptimize:
        contenders["kgc superoptimized"] = kgc.superoptimize(graph, verbose=False)
    rows = {}
    for label, compiled in contenders.items():
        got = compiled(*inputs)
        error = (got.float() - expected.float()).abs().max().item()
        if not error <= atol:
            raise AssertionError(f"{name} {label}: differs from eager by {error} (allowed {atol})")
        rows[label] = dict(_times(lambda: compiled(*inputs)), kernels=len(compiled.function.launches),
                           max_abs_error=error)
    compiled_torch = torch.compile(reference)
    compiled_torch(*inputs)
    rows["eager"] = _times(lambda: reference(*inputs))
    rows["torch.compile"] = _times(lambda: compiled_torch(*inputs))
    best_torch = {key: min(rows["eager"][key], rows["torch.compile"][key])
                  for key in ("as_called_us", "gpu_us")}
    for row in rows.values():
        row["vs_best_torch"] = {key: best_torch[key] / row[key] for key in best_torch}
    return {"workload": name, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--only", action="append", help="run only these workloads")
    parser.add_argument("--splits", default="2,4,8,16", help="split_k values (comma-separated)")
    parser.add_argument("--superoptimize", action="store_true", help="add the search's choice")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks need a CUDA GPU")
    splits = [int(s) for s in args.splits.split(",") if s]
    results = []
    for name in args.only or WORKLOADS:
        result = run(name, splits, args.superoptimize)
        results.append(result)
        print(f"\n{name}")
        print(f"  {'':24} {'kernels':>7} {'as called us':>13} {'vs best':>8} {'GPU alone us':>13} "
              f"{'vs best':>8}")
        for label, row in result["rows"].items():
            kernels = row.get("kernels", "")
            print(f"  {label:24} {kernels!s:>7} {row['as_called_us']:>13.2f} "
                  f"{row['vs_best_torch']['as_called_us']:>7.2f}x {row['gpu_us']:>13.2f} "
                  f"{row['vs_best_torch']['gpu_us']:>7.2f}x", flush=True)
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "results": results})


if __name__ == "__main__":
    main()
