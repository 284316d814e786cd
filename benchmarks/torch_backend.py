"""A Llama-style decoder block: torch.compile(backend="kgc") against eager and
torch.compile, mode for mode, side by side.

    python benchmarks/torch_backend.py [--no-autotune] [--past 1024] [--json out.json]
                                       [--gpu-time] [--only decode]

The block (examples/llama_block.py: hidden 4096, 32 heads, 8 KV heads, head
dim 128, MLP 11008, f16) runs a decode step (one query over a KV cache of
`--past` positions, the same cache every call) and a prefill of 128 tokens
(additive causal mask), at batch 1 and 8. Ways: eager; torch.compile with
its default backend (Inductor) and mode; torch.compile(backend="kgc"); and,
unless --no-autotune, each of them searching: Inductor's max-autotune
against backend "kgc" with mode max-autotune, so that kgc's search faces
Inductor's, not Inductor's default. CUDA graphs are off for all of them
(Inductor's default mode does not use them; kgc launches its kernels from
Python), so Inductor's search runs as mode "max-autotune-no-cudagraphs":
max-autotune's kernel and config search without the CUDA-graph wrapping
that mode "max-autotune" adds, as `kgc bench` runs it; `--gpu-time` shows
what one CUDA graph of the whole step would give every way. Every compiled
result is checked against eager
before it is timed. Times are medians of triton.testing.do_bench after its
warm-up, all ways of a row in one process; the kgc rows also print the
number of kgc kernels per call and the ops left to PyTorch.

`--gpu-time` adds, for every way, what separates the GPU's work from the
host's: the sum of the step's kernel times from torch.profiler, and the
step's time when captured whole in one CUDA graph and replayed (no host
launches at all). A call slower than its graph replay is host-bound.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib

import torch
import triton.testing

import kgc.torch
from kgc.bench import provenance

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


def _kernel_us(function, steps: int = 20) -> float:
    """The GPU time of one call of `function` in microseconds: the sum of the
    durations of the kernels (and copies) it runs, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    function()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(steps):
            function()
        torch.cuda.synchronize()
    total = 0.0
    for event in profiler.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            total += event.device_time
    return total / steps


def _graph_ms(function) -> float | None:
    """The call captured once in a CUDA graph, its replays timed (ms); None
    when the call cannot be captured."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(stream):
            for _ in range(3):
                function()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            function()
    except Exception as error:  # noqa: BLE001  (reported in the table)
        print(f"  (not capturable: {str(error).splitlines()[0][:100]})")
        return None
    return _time(graph.replay)


def ways_of(autotune: bool) -> list[tuple[str, dict | None]]:
    """(name, torch.compile's arguments, None for eager) of each way timed:
    each kgc mode next to the Inductor mode it faces."""
    ways = [("eager", None), ("torch.compile", {}), ("kgc", {"backend": "kgc"})]
    if autotune:
        ways += [("torch.compile max-autotune", {"mode": "max-autotune-no-cudagraphs"}),
                 ("kgc max-autotune", {"backend": "kgc", "options": {"mode": "max-autotune"}})]
    return ways


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--past", type=int, default=1024, help="KV cache length of a decode step")
    parser.add_argument("--no-autotune", action="store_true",
                        help="leave out backend kgc with mode max-autotune (a search per graph)")
    parser.add_argument("--json", help="write the table here")
    parser.add_argument("--gpu-time", action="store_true",
                        help="also the kernels' GPU time per call and the CUDA-graph replay time")
    parser.add_argument("--only", choices=("decode", "prefill"), help="one phase only")
    arguments = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("this benchmark needs a CUDA GPU")
    dtype = torch.float16
    llama = _llama()
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=4096, heads=32, kv_heads=8, mlp=11008).to(dtype).cuda().eval()
    ways = ways_of(autotune=not arguments.no_autotune)
    rows = []
    # Clocks up before the first case: the first timed case otherwise pays
    # the GPU's ramp from idle.
    warm = torch.randn(8192, 8192, device="cuda", dtype=dtype)
    _time(lambda: warm @ warm)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, f16, CUDA graphs off; "
          "median ms")
    width = max(18, *(len(name) + 2 for name, _ in ways))
    print(f"{'case':<24}" + "".join(f"{name:>{width}}" for name, _ in ways)
          + "   kgc kernels, fallbacks")
    phases = [p for p in (("decode", 1, arguments.past), ("prefill", 128, 0))
              if arguments.only in (None, p[0])]
    for phase, seq, past in phases:
        for batch in (1, 8):
            inputs = block.example_inputs(batch=batch, seq=seq, past=past)
            if inputs[-1] is None:
                inputs = inputs[:-1]
            case = f"{phase} b{batch} s{seq} kv{past + seq}"
            times, counts, gpu = {}, "", {}
            with torch.no_grad():
                eager = block(*inputs)
                for name, options in ways:
                    torch._dynamo.reset()
                    first = len(kgc.torch.reports())
                    run = block if options is None else torch.compile(block, **options)
                    _check(f"{case} {name}", run(*inputs), eager, dtype)
                    times[name] = _time(lambda: run(*inputs))
                    if arguments.gpu_time:
                        gpu[name] = {"kernels_us": _kernel_us(lambda: run(*inputs)),
                                     "graph_ms": _graph_ms(lambda: run(*inputs))}
                    reports = kgc.torch.reports()[first:]
                    if name == "kgc":
                        kernels = sum(r.kernel_count for r in reports)
                        fallbacks = [op.split(":")[0] for r in reports for op, _ in r.fallbacks]
                        counts = f"{kernels}, {len(fallbacks)} ({', '.join(fallbacks) or '-'})"
            print(f"{case:<24}" + "".join(f"{times[name]:>{width}.4f}" for name, _ in ways)
                  + f"   {counts}", flush=True)
            for name, parts in gpu.items():
                graph = "-" if parts["graph_ms"] is None else f"{parts['graph_ms']:.4f} ms"
                print(f"  {name:<{width}} kernels {parts['kernels_us'] / 1e3:.4f} ms per call, "
                      f"one CUDA graph {graph}", flush=True)
            rows.append({"case": case, "ms": times, "kgc": counts, "gpu": gpu})
    if arguments.json:
        provenance.write_json(arguments.json, {"ways": {name: options for name, options in ways},
                                               "rows": rows})


if __name__ == "__main__":
    main()
