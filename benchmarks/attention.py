"""Attention: kgc's attention kernel against PyTorch, side by side.

    python benchmarks/attention.py [--json results.json] [--only NAME]

Workloads (f16): grouped-query decoding (1 query, 32 query heads on 8
key/value heads, 4096 keys, head dim 128) at batch 1 and 8; a causal
prefill (batch 1, 32 heads, 128 queries and keys, the mask an input
tensor); and fused_workloads' attention (8x16x256x64). Contenders, in one
process on one GPU: kgc's default compile; kgc with split_kv 1, 4, 8, 16,
32 and head packing on and off (decoding: where the graph has grouped
heads); eager F.scaled_dot_product_attention; torch.compile of the same
function written as the graph is (matmul, softmax, matmul). Each result is
checked against eager first, then timed by triton.testing.do_bench (median
after warm-up). The floor is the bytes of Q, K, V, mask and output at
2.95 TB/s (H100 SXM's measured copy bandwidth). Ratios > 1: kgc is faster.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
import triton.testing

import kgc
from kgc.bench import provenance
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.pipeline import Pipeline
from kgc.pipeline.stages import fusion_pipeline_text
from kgc.tiling.config import AttentionConfig
from kgc.tiling.kernel_ops import kernel_name, kernels_in
from mlir import ir

_BANDWIDTH = 2.95e12  # bytes/s
_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}

# name: (batch, query heads, kv heads, queries, keys, head dim, causal mask)
WORKLOADS = {
    "gqa_decode_b1_32q8kv_4096_d128": (1, 32, 8, 1, 4096, 128, False),
    "gqa_decode_b8_32q8kv_4096_d128": (8, 32, 8, 1, 4096, 128, False),
    "prefill_causal_1x32x128_d128": (1, 32, 32, 128, 128, 128, True),
    "attention_8x16x256x64": (8, 16, 16, 256, 256, 64, False),
}


def build(name: str, batch, heads, kv_heads, queries, keys, dim, causal) -> kgc.Graph:
    """softmax(Q K^T / sqrt(d) [+ mask]) V, K and V broadcast from their
    key/value heads to the query heads as a user writes it."""
    g = kgc.Graph(name)
    q = g.input("q", (batch, heads, queries, dim), "f16")
    k = g.input("k", (batch, kv_heads, keys, dim), "f16")
    v = g.input("v", (batch, kv_heads, keys, dim), "f16")
    group = heads // kv_heads

    def per_query_head(t):
        if group == 1:
            return t
        t = g.reshape(t, (batch, kv_heads, 1, keys, dim))
        t = g.broadcast_to(t, (batch, kv_heads, group, keys, dim))
        return g.reshape(t, (batch, heads, keys, dim))

    scores = g.matmul(q, g.transpose(per_query_head(k), (0, 1, 3, 2))) * (1 / math.sqrt(dim))
    if causal:
        scores = scores + g.input("mask", (queries, keys), "f16")
    g.output(g.matmul(g.softmax(scores, dim=-1), per_query_head(v)))
    return g


def attention_kernel_name(graph: kgc.Graph) -> str:
    """The name kg-fuse gives the graph's attention kernel."""
    with ir.Context() as context:
        module = graph.build(context)
        Pipeline.parse(fusion_pipeline_text()).run(module)
        names = [kernel_name(k) for k in kernels_in(module)]
    attention = [n for n in names if n.endswith("_attention")]
    if len(attention) != 1:
        raise SystemExit(f"{graph.name}: expected one attention kernel, got {names}")
    return attention[0]


def eager(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                            enable_gqa=group > 1)


def written_out(q, k, v, mask=None):
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores + mask
    return torch.softmax(scores, dim=-1) @ v


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=100, rep=500, return_mode="median") * 1e3


def run(name: str) -> dict:
    spec = WORKLOADS[name]
    batch, heads, kv_heads, queries, keys, dim, causal = spec
    torch.manual_seed(0)
    q = torch.randn(batch, heads, queries, dim, device="cuda", dtype=torch.float16)
    k = torch.randn(batch, kv_heads, keys, dim, device="cuda", dtype=torch.float16)
    v = torch.randn(batch, kv_heads, keys, dim, device="cuda", dtype=torch.float16)
    inputs = [q, k, v]
    if causal:
        inputs.append(torch.full((queries, keys), float("-inf"), device="cuda").triu(1).half())
    floor_us = sum(t.numel() * t.element_size() for t in inputs + [q]) / _BANDWIDTH * 1e6
    expected = eager(*inputs)

    graph = build(name, *spec)
    kernel = attention_kernel_name(graph)
    variants = {"kgc default": None}
    packs = (False, True) if heads != kv_heads else (None,)
    for split in (1, 4, 8, 16, 32):
        for pack in packs:
            label = f"kgc split_kv={split}" + ("" if pack is None else f" pack={int(pack)}")
            variants[label] = GraphConfig(name, None, {kernel: AttentionConfig(
                split_kv=split, pack_heads=pack)})
    times, kernels = {}, {}
    for label, config in variants.items():
        compiled = kgc.compile(graph, config=config)
        got = compiled(*inputs)
        error = (got.float() - expected.float()).abs().max().item()
        if not error <= 1e-2:
            raise AssertionError(f"{name} {label}: kgc differs from eager by {error}")
        times[label] = bench(lambda: compiled(*inputs))
        kernels[label] = len(compiled.function.launches)
    compiled_torch = torch.compile(written_out)
    compiled_torch(*inputs)
    times["eager sdpa"] = bench(lambda: eager(*inputs))
    times["torch.compile"] = bench(lambda: compiled_torch(*inputs))
    best_torch = min(times["eager sdpa"], times["torch.compile"])
    kgc_labels = [label for label in times if label.startswith("kgc")]
    best_kgc = min(kgc_labels, key=times.get)
    return {"workload": name, "floor_us": floor_us, "us": times, "kernels": kernels,
            "best_kgc": best_kgc,
            "default_vs_best_torch": best_torch / times["kgc default"],
            "best_kgc_vs_best_torch": best_torch / times[best_kgc]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS),
                        help="run only these workloads")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks need a CUDA GPU")
    results = []
    for name in args.only or WORKLOADS:
        result = run(name)
        results.append(result)
        times = result["us"]
        best_torch = min(times["eager sdpa"], times["torch.compile"])
        print(f"\n{name}: floor {result['floor_us']:.1f} us")
        print(f"  {'contender':28} {'us':>9} {'kernels':>7} {'vs best torch':>13}")
        for label, us in times.items():
            kernels = result["kernels"].get(label, "")
            print(f"  {label:28} {us:>9.2f} {kernels!s:>7} {best_torch / us:>12.2f}x")
        print(f"  default {result['default_vs_best_torch']:.2f}x, best kgc ({result['best_kgc']}) "
              f"{result['best_kgc_vs_best_torch']:.2f}x the best torch", flush=True)
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "results": results})


if __name__ == "__main__":
    main()
