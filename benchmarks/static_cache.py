"""Serving with transformers' static cache: `generate()` compiling its own
decode step (Inductor with CUDA graphs, transformers' default), against the
same with kgc as the backend, and eager, side by side in one process.

    python benchmarks/static_cache.py [--models llama,llama3-8b-layers] [--json out.json]

With `cache_implementation="static"`, `generate()` compiles the model's
forward itself for the decode steps (a `CompileConfig`: fullgraph, mode
"reduce-overhead"). The contenders: "eager" (`disable_compile=True`),
"transformers" (its default `CompileConfig()`, Inductor) and "kgc"
(`CompileConfig(backend="kgc")`, kgc's kernels and the PyTorch ops between
them replayed as CUDA graphs). Each model of the suite (its GPU size, f16)
generates 32 greedy tokens after a prompt of 16. Each contender's first
two requests compile and capture; then `--rounds` rounds in which each
contender in turn serves one untimed request (transformers keeps one
compiled forward, so a change of contender may recompile) and `--reps`
timed ones. Per contender: the median wall time per generated token, the
GPU kernel time per generated token (torch's profiler, the median of three
requests) and their ratio, and whether its tokens equal eager's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from kgc.bench import models, provenance
from kgc.bench.model_rows import gpu_kernel_ms

PROMPT, NEW = 16, 32
# Requests profiled per contender for its GPU time.
GPU_REQUESTS = 3
CONTENDERS = ("eager", "transformers", "kgc")


def _settings(contender: str) -> dict:
    from transformers import CompileConfig

    settings = dict(max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                    cache_implementation="static")
    if contender == "eager":
        settings["disable_compile"] = True
    elif contender == "kgc":
        settings["compile_config"] = CompileConfig(backend="kgc")
    else:
        settings["compile_config"] = CompileConfig()
    return settings


def _generate(model, ids, contender: str):
    return model.generate(ids, attention_mask=torch.ones_like(ids), **_settings(contender))


def _timed(model, ids, contender: str) -> float:
    torch.cuda.synchronize()
    started = time.perf_counter()
    _generate(model, ids, contender)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1e3 / NEW


def _gpu_ms_per_token(model, ids, contender: str) -> float:
    """GPU kernel time per generated token of a request (the prefill's
    included, as in the wall time): the median over a few requests."""
    return gpu_kernel_ms(lambda: _generate(model, ids, contender), GPU_REQUESTS) / NEW


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="llama,llama3-8b-layers")
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    contenders = args.contenders.split(",")
    rows = []
    for name in args.models.split(","):
        model = models.CATALOGUE[name].build(models.GPU).to("cuda", torch.float16).eval()
        ids = torch.randint(1, model.config.vocab_size, (1, PROMPT),
                            generator=torch.Generator().manual_seed(0)).cuda()
        results: dict = {c: {"model": name, "contender": c} for c in contenders}
        times: dict = {c: [] for c in contenders}
        with torch.no_grad():
            expected = _generate(model, ids, "eager")
            torch._dynamo.reset()
            for contender in contenders:
                started = time.perf_counter()
                tokens = [_generate(model, ids, contender) for _ in range(2)]
                results[contender]["first_requests_s"] = time.perf_counter() - started
                results[contender]["tokens_equal"] = all(torch.equal(t, expected)
                                                         for t in tokens)
            for _ in range(args.rounds):
                for contender in contenders:
                    _generate(model, ids, contender)
                    times[contender] += [_timed(model, ids, contender)
                                         for _ in range(args.reps)]
                    results[contender]["tokens_equal"] &= bool(
                        torch.equal(_generate(model, ids, contender), expected))
            for contender in contenders:
                _generate(model, ids, contender)
                gpu = _gpu_ms_per_token(model, ids, contender)
                wall = statistics.median(times[contender])
                results[contender].update(ms_per_token=wall, gpu_ms_per_token=gpu,
                                          as_called_over_gpu=wall / gpu)
                rows.append(results[contender])
                print(json.dumps(results[contender]), flush=True)
        del model
        torch._dynamo.reset()
        torch.cuda.empty_cache()
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "prompt": PROMPT, "new_tokens": NEW, "rows": rows},
                              packages=("kgc", "torch", "triton", "transformers"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
