"""Where a model's forward (or training step's) time goes, kernel by kernel: kgc's against Inductor's.

    python benchmarks/model_kernels.py MODEL[,MODEL...] [--tokens 1,64,512] [--top 16]
                                       [--train [--batch 4]] [--host 25] [--json results.json]

For each model of the suite (`kgc.bench.models`, GPU size, f16) and each
token count: `torch.compile(model.forward)` with kgc's backend and with
Inductor, three calls to warm up, then ten under `torch.profiler`. Prints
each contender's GPU time per forward and its longest kernels; for each of
kgc's, its grid, warps and stages and the aten ops it computes (what
`kgc.explain` reports, here for the partitions the GPU actually runs: on a
CPU, Dynamo captures other attention ops and sometimes other dtypes).
This is the map that shows which fused kernel loses and what it holds
(benchmarks/NOTES.md, "Every model's forward rows").

With `--train`, each contender runs the suite's training step instead
(`kgc.bench.model_train`: f32 master weights, the forward under bf16
autocast with the labels, the backward; no optimizer step) over `--batch`
sequences of each token count, and kgc's kernels are those of the forward
and the backward graph.

With `--host N`, each contender's calls also run under cProfile: the host
time of a call as called and the N functions that take most of it (their
own time), which is where a call that is slower than its kernels loses.
With `--cpu-ops N`, under torch's profiler with CPU activity too: the N
aten ops and CUDA runtime calls that take most of the host's time (their
own), beside each one's GPU time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import re
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from kgc.bench import models, provenance
from kgc.torch.backend import Backend, compile_kernel_graph

WARMUP_CALLS = 3
PROFILED_CALLS = 10
# aten op names without their overload, as the report lists them.
_OVERLOAD = re.compile(r"^aten\.|\.(default|Tensor|Scalar|self|dim|start_step|Tensor_Scalar)\b")


def _profile(call) -> tuple[dict[str, tuple[float, int]], float]:
    """(kernel name -> (GPU us per call, launches per call), the peak memory
    allocated during one call in MiB)."""
    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    call()
    peak_mib = torch.cuda.max_memory_allocated() / 2**20
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_CALLS):
            call()
        torch.cuda.synchronize()
    return {event.key: (event.device_time_total / PROFILED_CALLS,
                        event.count // PROFILED_CALLS)
            for event in profiler.key_averages()
            if event.device_type == torch.autograd.DeviceType.CUDA}, peak_mib


HOST_CALLS = 20


def _host_profile(call, top: int) -> tuple[float, float, str]:
    """(the median time of a call as called in us, with the GPU
    synchronized after each; the median time until the call returns, before
    that synchronization (a call that returns long before its GPU work ends
    is bound by the GPU, one whose return comes close to its end waits on
    the GPU inside or is bound by the host); the `top` functions by their
    own time over HOST_CALLS calls under cProfile)."""
    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    times, returns = [], []
    for _ in range(HOST_CALLS):
        started = time.perf_counter()
        call()
        returned = time.perf_counter()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
        returns.append(returned - started)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(HOST_CALLS):
        call()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    lines = [line for line in text.getvalue().splitlines() if line.strip()]
    # From the column header on: the totals line and the table.
    header = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return (statistics.median(times) * 1e6, statistics.median(returns) * 1e6,
            "\n".join(lines[header:]))


def _cpu_ops(call, top: int) -> str:
    """The `top` aten ops and runtime calls by their own host time over
    PROFILED_CALLS calls, under torch's profiler with CPU activity."""
    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_CALLS):
            call()
        torch.cuda.synchronize()
    return profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=top,
                                         max_name_column_width=60)


def _caller(model, ids, extra: dict, backend, train: bool):
    """The profiled call: a forward without grad, or a training step, of
    `model` with its forward compiled by `backend`."""
    if train:
        from kgc.bench.model_train import trainable_copy, training_step

        trained = trainable_copy(model, "train", 0)
        trained.forward = torch.compile(trained.forward, backend=backend)

        def step():
            trained.zero_grad(set_to_none=True)
            training_step(trained, ids, autocast=True)
        return step
    forward = torch.compile(model.forward, backend=backend)

    def call():
        with torch.no_grad():
            forward(ids, **extra)
    return call


def _kgc_kernels(model, ids, extra: dict, train: bool) -> tuple[dict, float, dict, object]:
    """kgc's profile of the call, its peak memory (MiB), per kgc kernel
    its launch shape and the aten ops it computes, and the call."""
    compiled = []

    def keep(graph, mode):
        result = compile_kernel_graph(graph, mode)
        compiled.append(result)
        return result

    torch._dynamo.reset()
    backend = Backend(compile_graph=keep, describe_kernels=True)
    call = _caller(model, ids, extra, backend, train)
    times, peak_mib = _profile(call)
    kernels = {}
    for report in backend.reports:
        for partition in report.partitions:
            for name, ops in partition.kernel_ops.items():
                kernels[name] = {"ops": [_OVERLOAD.sub("", op.split(":")[0]) for op in ops]}
    for graph in compiled:
        for kernel in graph.kernels():
            kernels.setdefault(kernel.name, {"ops": []}).update(
                grid=list(kernel.grid), num_warps=kernel.num_warps,
                num_stages=kernel.num_stages, library=kernel.library is not None)
    return times, peak_mib, kernels, call


def _rows(times: dict, kernels: dict | None, top: int) -> list[dict]:
    ranked = sorted(times.items(), key=lambda item: -item[1][0])[:top]
    return [{"kernel": name, "us": us, "launches": launches, **(kernels or {}).get(name, {})}
            for name, (us, launches) in ranked]


def _print(label: str, total_us: float, peak_mib: float, rows: list[dict], what: str) -> None:
    print(f"== {label}: {total_us:.1f} us of GPU time per {what}, peak memory {peak_mib:.0f} MiB")
    # A kernel launched several times a call: its time summed over them, then
    # the launches and the time of one.
    print(f"  {'us':>10} {'launches':>8} {'us each':>8}  kernel")
    for row in rows:
        shape = (f" grid {tuple(row['grid'])} w{row['num_warps']} s{row['num_stages']}"
                 + (" (library)" if row.get("library") else "")) if "grid" in row else ""
        ops = " ".join(row.get("ops", []))
        each = row['us'] / max(row['launches'], 1)
        print(f"  {row['us']:10.1f} {row['launches']:>8} {each:8.1f}  {row['kernel'][:64]}{shape}"
              + (f"  {ops[:300]}" if ops else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", help="model names of the suite, comma-separated")
    parser.add_argument("--tokens", default="1,64,512", help="token counts, comma-separated")
    parser.add_argument("--top", type=int, default=16, help="kernels shown per contender")
    parser.add_argument("--train", action="store_true",
                        help="profile a training step (forward and backward) instead")
    parser.add_argument("--batch", type=int, default=None,
                        help="sequences per call (default: 1, or 4 with --train)")
    parser.add_argument("--host", type=int, default=0, metavar="N",
                        help="also profile the host: a call's time as called and the N "
                             "functions that take most of it")
    parser.add_argument("--cpu-ops", type=int, default=0, metavar="N",
                        help="also profile the host with torch's profiler: the N aten ops and "
                             "runtime calls that take most of it")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    batch = args.batch or (4 if args.train else 1)
    what = "training step" if args.train else "forward"
    results = []
    for name in args.models.split(","):
        spec = models.CATALOGUE[name]
        model = spec.build(models.GPU, 0).to("cuda")
        # A training step trains an f32 copy under bf16 autocast; a forward
        # runs in f16 without the decoder's cache, as the suite's rows do.
        model = model.eval() if args.train else model.to(torch.float16).eval()
        extra = {"use_cache": False} if spec.decoder else {}
        for tokens in map(int, args.tokens.split(",")):
            ids = torch.randint(1, model.config.vocab_size, (batch, tokens), device="cuda")
            times, peak_mib, kernels, kgc_call = _kgc_kernels(model, ids, extra, args.train)
            host = {"kgc": _host_profile(kgc_call, args.host)} if args.host else {}
            ops = {"kgc": _cpu_ops(kgc_call, args.cpu_ops)} if args.cpu_ops else {}
            torch._dynamo.reset()
            inductor_call = _caller(model, ids, extra, "inductor", args.train)
            inductor, inductor_peak_mib = _profile(inductor_call)
            if args.host:
                host["inductor"] = _host_profile(inductor_call, args.host)
            if args.cpu_ops:
                ops["inductor"] = _cpu_ops(inductor_call, args.cpu_ops)
            for contender, measured, peak, described in (
                    ("kgc", times, peak_mib, kernels),
                    ("inductor", inductor, inductor_peak_mib, None)):
                total = sum(us for us, _ in measured.values())
                rows = _rows(measured, described, args.top)
                _print(f"{name} {batch}x{tokens} tokens, {contender}", total, peak, rows, what)
                results.append({"model": name, "batch": batch, "tokens": tokens,
                                "train": args.train, "contender": contender,
                                "gpu_us": total, "peak_mib": peak, "kernels": rows})
                if contender in host:
                    host_us, return_us, table = host[contender]
                    print(f"-- host: {host_us:.1f} us per {what} as called, returning after "
                          f"{return_us:.1f} us; cProfile over {HOST_CALLS} calls:\n{table}")
                    results[-1].update(host_us=host_us, return_us=return_us)
                if contender in ops:
                    print(f"-- host by op, torch's profiler over {PROFILED_CALLS} calls:\n"
                          f"{ops[contender]}")
        del model
        torch.cuda.empty_cache()
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "results": results}, indent=1)


if __name__ == "__main__":
    main()
