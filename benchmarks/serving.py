"""Serving with transformers' dynamic cache: what a second request compiles,
and the steady-state time per generated token, kgc against eager and
torch.compile (Inductor), side by side in one process.

    python benchmarks/serving.py [--models llama,llama3-8b-layers] [--json out.json]

Each model of the suite (`kgc.bench.models`, its GPU size, f16) runs
`generate()` greedily with the default dynamic cache, its forward compiled
as a server compiles it (`torch.compile(model.forward, dynamic=True)`,
backend "kgc" or Inductor). Per contender: the first request (a prompt of
16 tokens, 32 new) compiles; a second of another length (11 tokens, 19
new) is timed and its compiles counted (Dynamo frames; for kgc also kernel
graphs). Then the first request again, `--reps` times per contender, the
contenders taking turns request by request: its median wall time over its
new tokens is the steady state in ms per token. Every contender's
tokens are checked against eager's. For kgc, each graph it was given (the
prefill's, the decode step's) is listed with its kgc kernels and the ops it
left to PyTorch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch._dynamo.utils import counters

from kgc.bench import models, provenance
from kgc.bench.model_rows import kgc_compiled_graphs
from kgc.torch import reports

REQUESTS = ((16, 32), (11, 19))  # (prompt tokens, new tokens)


def _generate(model, ids, new):
    return model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)


def _first_requests(name: str, model, prompts, expected) -> tuple[dict, object]:
    """A contender's first request (which compiles) and a second of
    another length: their wall time, compiles and tokens; and the forward
    it serves with."""
    forward = model.forward if name == "eager" else torch.compile(
        model.forward, dynamic=True, **({"backend": "kgc"} if name == "kgc" else {}))
    model.forward = forward
    result = {}
    first_report = len(reports())
    try:
        for index, (ids, (_, new)) in enumerate(zip(prompts, REQUESTS)):
            frames, graphs = counters["frames"]["ok"], kgc_compiled_graphs()
            torch.cuda.synchronize()
            started = time.perf_counter()
            tokens = _generate(model, ids, new)
            torch.cuda.synchronize()
            result[f"request_{index}_s"] = time.perf_counter() - started
            result[f"request_{index}_compiles"] = (
                counters["frames"]["ok"] - frames
                + (kgc_compiled_graphs() - graphs if name == "kgc" else 0))
            result[f"request_{index}_tokens_equal"] = bool(torch.equal(tokens, expected[index]))
        if name == "kgc":
            result["graphs"] = [_graph_summary(r) for r in reports()[first_report:]]
    finally:
        model.__dict__.pop("forward", None)
    return result, forward


def _steady(model, forwards: dict, ids, new: int, reps: int) -> dict:
    """Each contender's median wall time per generated token over `reps`
    requests, the contenders taking turns request by request (a slow spell
    of the host falls on all of them alike)."""
    times: dict = {name: [] for name in forwards}
    try:
        for _ in range(reps):
            for name, forward in forwards.items():
                model.forward = forward
                torch.cuda.synchronize()
                started = time.perf_counter()
                _generate(model, ids, new)
                torch.cuda.synchronize()
                times[name].append(time.perf_counter() - started)
    finally:
        model.__dict__.pop("forward", None)
    return {name: statistics.median(values) * 1e3 / new for name, values in times.items()}


def _graph_summary(report) -> dict:
    """A graph kgc was given: its kernels and the ops it left to PyTorch
    (aten op -> count, a partition that failed counted whole)."""
    left: dict[str, int] = {}
    for op in [op for op, _ in report.fallbacks] + [
            op for p in report.partitions if p.fallback_reason is not None for op in p.ops]:
        name = op.split(":")[0]
        left[name] = left.get(name, 0) + 1
    return {"kernels": report.kernel_count, "partitions": len(report.partitions),
            "left_to_pytorch": left}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama,llama3-8b-layers")
    parser.add_argument("--contenders", default="eager,torch.compile,kgc")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        model = models.CATALOGUE[name].build(models.GPU).to("cuda", torch.float16).eval()
        generator = torch.Generator().manual_seed(0)
        prompts = [torch.randint(1, model.config.vocab_size, (1, length),
                                 generator=generator).cuda() for length, _ in REQUESTS]
        with torch.no_grad():
            expected = [_generate(model, ids, new) for ids, (_, new) in zip(prompts, REQUESTS)]
            torch._dynamo.reset()
            results, forwards = {}, {}
            for contender in args.contenders.split(","):
                results[contender], forwards[contender] = _first_requests(
                    contender, model, prompts, expected)
            steady = _steady(model, forwards, prompts[0], REQUESTS[0][1], args.reps)
            for contender, result in results.items():
                row = {"model": name, "contender": contender, **result,
                       "steady_ms_per_token": steady[contender]}
                rows.append(row)
                print(json.dumps(row), flush=True)
        del model
        torch.cuda.empty_cache()
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "requests": REQUESTS, "rows": rows},
                              packages=("kgc", "torch", "triton", "transformers"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
