"""A Llama-style decoder block: torch.compile(backend="kgc") against eager and
torch.compile's default, side by side.

    python benchmarks/torch_backend.py [--no-autotune] [--past 1024] [--json out.json]

The block (examples/llama_block.py: hidden 4096, 32 heads, 8 KV heads, head
dim 128, MLP 11008, f16) runs a decode step (one query over a KV cache of
`--past` positions, the same cache every call) and a prefill of 128 tokens
(additive causal mask), at batch 1 and 8. Ways: eager; torch.compile with
its default backend (Inductor) and mode; torch.compile(backend="kgc"); and,
unless --no-autotune, backend "kgc" with mode max-autotune. CUDA graphs are
off for all of them (Inductor's default mode does not use them; kgc launches
its kernels from Python). Every compiled result is checked against eager
before it is timed. Times are medians of triton.testing.do_bench after its
warm-up, all ways of a row in one process; the kgc rows also print the
number of kgc kernels per call and the ops left to PyTorch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib

import torch
import triton.testing

import kgc.torch

REPO = pathlib.Path(__file__).resolve().parent.parent


def _llama():
    spec = importlib.util.spec_from_file_location("llama_block",
                                                  REPO / "examples" / "llama_block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check(name, got, want, dtype):
    atol = {torch.float16: 5e-2, torch.bfloat16: 1e-1}[dtype]
    for g, w in zip(got, want):
        error = (g.float() - w.float()).abs().max().item()
        if not error <= atol * (1 + w.float().abs().max().item()):
            raise SystemExit(f"{name}: result differs from eager by {error:.3g}")


def _time(function) -> float:
    return triton.testing.do_bench(function, warmup=50, rep=300, return_mode="median")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--past", type=int, default=1024, help="KV cache length of a decode step")
    parser.add_argument("--no-autotune", action="store_true",
                        help="leave out backend kgc with mode max-autotune (a search per graph)")
    parser.add_argument("--json", help="write the table here")
    arguments = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA GPU")
    dtype = torch.float16
    llama = _llama()
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=4096, heads=32, kv_heads=8, mlp=11008).to(dtype).cuda().eval()
    ways = [("eager", None), ("torch.compile", {}), ("kgc", {"backend": "kgc"})]
    if not arguments.no_autotune:
        ways.append(("kgc max-autotune", {"backend": "kgc", "options": {"mode": "max-autotune"}}))
    rows = []
    # Clocks up before the first case: the first timed case otherwise pays
    # the GPU's ramp from idle.
    warm = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    _time(lambda: warm @ warm)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, f16, CUDA graphs off; "
          "median ms")
    print(f"{'case':<24}" + "".join(f"{name:>18}" for name, _ in ways) + "   kgc kernels, fallbacks")
    for phase, seq, past in (("decode", 1, arguments.past), ("prefill", 128, 0)):
        for batch in (1, 8):
            inputs = block.example_inputs(batch=batch, seq=seq, past=past)
            if inputs[-1] is None:
                inputs = inputs[:-1]
            case = f"{phase} b{batch} s{seq} kv{past + seq}"
            times, counts = {}, ""
            with torch.no_grad():
                eager = block(*inputs)
                for name, options in ways:
                    torch._dynamo.reset()
                    first = len(kgc.torch.reports())
                    run = block if options is None else torch.compile(block, **options)
                    _check(f"{case} {name}", run(*inputs), eager, dtype)
                    times[name] = _time(lambda: run(*inputs))
                    reports = kgc.torch.reports()[first:]
                    if name == "kgc":
                        kernels = sum(r.kernel_count for r in reports)
                        fallbacks = [op.split(":")[0] for r in reports for op, _ in r.fallbacks]
                        counts = f"{kernels}, {len(fallbacks)} ({', '.join(fallbacks) or '-'})"
            print(f"{case:<24}" + "".join(f"{times[name]:>18.4f}" for name, _ in ways)
                  + f"   {counts}", flush=True)
            rows.append({"case": case, "ms": times, "kgc": counts})
    if arguments.json:
        pathlib.Path(arguments.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
