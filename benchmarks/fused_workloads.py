"""kgc against PyTorch eager and torch.compile on fused workloads.

    python benchmarks/fused_workloads.py [--json results.json] [--only NAME]

For each workload the three implementations run side by side in one
process, after warm-up, timed by triton.testing.do_bench (median of many
repetitions). Ratios > 1 mean kgc is faster. kgc's result is checked
against eager's before it is timed.
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
import triton.testing

import kgc
from kgc.bench import provenance


def _rmsnorm_matmul(g, x, gamma, w):
    return g.matmul(g.rms_norm(x, gamma, eps=1e-6), w)


def _rmsnorm_matmul_torch(x, gamma, w):
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), gamma, eps=1e-6) @ w


def _softmax(g, x):
    return g.softmax(x, dim=-1)


def _layer_norm(g, x, w, b):
    return g.layer_norm(x, w, b, eps=1e-5)


def _gated_mlp(g, x, w1, w2):
    return g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2))


def _gated_mlp_torch(x, w1, w2):
    return torch.nn.functional.silu(x @ w1) * (x @ w2)


def _attention(g, q, k, v):
    scores = g.mul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), 1 / math.sqrt(q.shape[-1]))
    return g.matmul(g.softmax(scores, dim=-1), v)


def _attention_torch(q, k, v):
    scores = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1]))
    return torch.softmax(scores, dim=-1) @ v


def _bias_gelu(g, x, w, b, r):
    return g.gelu(g.matmul(x, w) + b, approximate="tanh") + r


def _bias_gelu_torch(x, w, b, r):
    return torch.nn.functional.gelu(x @ w + b, approximate="tanh") + r


def _causal(g, x):
    """where(row >= col, x, -inf): the mask is two iotas and a comparison,
    fused into the kernel of what it masks."""
    rows, cols = x.shape[-2], x.shape[-1]
    keep = g.ge(g.iota((rows, 1), 0, "i32"), g.iota((1, cols), 1, "i32"))
    return g.where(keep, x, float("-inf"))


_TRIL = {}


def _causal_torch(x):
    # As a model keeps it: a bool buffer made once (not timed), read each call.
    shape = tuple(x.shape[-2:])
    if shape not in _TRIL:
        _TRIL[shape] = torch.ones(shape, dtype=torch.bool, device=x.device).tril()
    return x.masked_fill(~_TRIL[shape], float("-inf"))


def _causal_softmax(g, x):
    return g.softmax(_causal(g, x), dim=-1)


def _causal_scores(g, q, k):
    return _causal(g, g.mul(g.matmul(q, g.t(k)), 1 / math.sqrt(q.shape[-1])))


def _causal_scores_torch(q, k):
    return _causal_torch((q @ k.t()) * (1 / math.sqrt(q.shape[-1])))


WORKLOADS = {
    # name: (kgc builder, torch function, [(shape, dtype)], atol)
    "rmsnorm_matmul_16x4096x6144_f16": (
        _rmsnorm_matmul, _rmsnorm_matmul_torch,
        [((16, 4096), "f16"), ((4096,), "f16"), ((4096, 6144), "f16")], 0.5),
    "softmax_4096x4096_f16": (_softmax, lambda x: torch.softmax(x, -1), [((4096, 4096), "f16")], 1e-3),
    "softmax_8192x1000_f32": (_softmax, lambda x: torch.softmax(x, -1), [((8192, 1000), "f32")], 1e-5),
    "layer_norm_8192x768_bf16": (
        _layer_norm, lambda x, w, b: torch.nn.functional.layer_norm(x, (768,), w, b, eps=1e-5),
        [((8192, 768), "bf16"), ((768,), "bf16"), ((768,), "bf16")], 5e-2),
    "gated_mlp_512x4096x11008_f16": (
        _gated_mlp, _gated_mlp_torch,
        [((512, 4096), "f16"), ((4096, 11008), "f16"), ((4096, 11008), "f16")], 0.5),
    "attention_8x16x256x64_f16": (
        _attention, _attention_torch,
        [((8, 16, 256, 64), "f16"), ((8, 16, 256, 64), "f16"), ((8, 16, 256, 64), "f16")], 1e-2),
    "bias_gelu_residual_2048x1024x4096_bf16": (
        _bias_gelu, _bias_gelu_torch,
        [((2048, 1024), "bf16"), ((1024, 4096), "bf16"), ((4096,), "bf16"), ((2048, 4096), "bf16")], 0.5),
    "causal_softmax_4096x4096_f16": (
        _causal_softmax, lambda x: torch.softmax(_causal_torch(x), -1), [((4096, 4096), "f16")], 1e-3),
    "causal_scores_2048x2048x128_f16": (
        _causal_scores, _causal_scores_torch, [((2048, 128), "f16"), ((2048, 128), "f16")], 1e-1),
}

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def run(name: str) -> dict:
    build, reference, specs, atol = WORKLOADS[name]
    graph = kgc.Graph(name)
    tensors = [graph.input(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
    graph.output(build(graph, *tensors))
    compiled = kgc.compile(graph)
    torch.manual_seed(0)
    inputs = [(torch.randn(shape, device="cuda") * (0.05 if len(shape) == 2 and shape[0] >= 1024 and
                                                   name.startswith(("gated", "bias", "rmsnorm")) else 1))
              .to(_DTYPES[dtype]) for shape, dtype in specs]
    expected = reference(*inputs)
    got = compiled(*inputs)
    # Infinities (a causal mask's -inf) must match exactly; NaN never does.
    same_infinity = torch.isinf(expected.float()) & (got.float() == expected.float())
    error = (got.float() - expected.float()).abs().masked_fill(same_infinity, 0).max().item()
    if not error <= atol:
        raise AssertionError(f"{name}: kgc differs from eager by {error} (allowed {atol})")
    compiled_torch = torch.compile(reference)
    compiled_torch(*inputs)  # compile before timing
    times = {
        "kgc": triton.testing.do_bench(lambda: compiled(*inputs), warmup=50, rep=300, return_mode="median"),
        "eager": triton.testing.do_bench(lambda: reference(*inputs), warmup=50, rep=300, return_mode="median"),
        "torch.compile": triton.testing.do_bench(lambda: compiled_torch(*inputs), warmup=50, rep=300,
                                                 return_mode="median"),
    }
    return {"workload": name, "kernels": len(compiled.function.launches), "max_abs_error": error,
            "ms": times, "speedup_vs_eager": times["eager"] / times["kgc"],
            "speedup_vs_torch_compile": times["torch.compile"] / times["kgc"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--only", action="append", help="run only these workloads")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks need a CUDA GPU")
    results = []
    print(f"{'workload':42} {'kernels':>7} {'kgc ms':>9} {'eager ms':>9} {'compile ms':>10} "
          f"{'vs eager':>9} {'vs compile':>10}")
    for name in args.only or WORKLOADS:
        result = run(name)
        results.append(result)
        t = result["ms"]
        print(f"{name:42} {result['kernels']:>7} {t['kgc']:>9.4f} {t['eager']:>9.4f} "
              f"{t['torch.compile']:>10.4f} {result['speedup_vs_eager']:>8.2f}x "
              f"{result['speedup_vs_torch_compile']:>9.2f}x", flush=True)
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "results": results})


if __name__ == "__main__":
    main()
