"""Reductions across rows (a norm weight's or a bias's gradient summed over
the tokens): kgc's default, a grid of configs, eager and Inductor.

    python benchmarks/column_reductions.py [--shapes 1024x512,512x4096] [--jobs 16]
                                           [--json results.json]

Each shape R x C is the kernel a training step's backward makes for an
RMSNorm weight: `sum over rows of (float(dy) * float(x) * r)`, dy and x
R x C bf16 (or the type after a colon: `4x256x512:f32`, every axis but the
last summed) and r (1/rms of each row) R x 1 f32, giving C f32 sums. The
reduced rows are strided in memory and the kept columns contiguous. kgc's
reduction schedule takes a band of columns per program (`block_x`) and walks
the rows in steps of `block_r`; before, it took one column a program.

Every config is compiled by a pool of processes into the kernel cache, then
compiled again here (served from the cache), checked against torch on random
inputs and timed with inputs rotated out of L2 under CUDA-graph replays
(`kgc.search.measure.time_rotated`), beside eager and `torch.compile`. The
"old" row is one column a program with the row whole (or in steps of 2048):
the schedule's plan before bands.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os

SHAPES = "1024x512,512x4096,2048x4096,1000x777,17x1000,4097x64,8192x1024,4x256x512:f32"
BANDS = (4, 8, 16, 32, 64)
STEPS = (128, 256, 512, 1024)
WARPS = (4, 8, 16)


def graph_text(shape: tuple[int, ...], element: str = "bf16") -> str:
    """The weight gradient over an input of `shape` (the last axis kept,
    every other summed) whose dy and x are `element`."""
    dims = "x".join(str(d) for d in shape)
    narrow, wide = f"tensor<{dims}x{element}>", f"tensor<{dims}xf32>"
    scale = f"tensor<{'x'.join(str(d) for d in shape[:-1])}x1xf32>"
    summed = ", ".join(str(d) for d in range(len(shape) - 1))
    cast = (lambda name, value: f"  %{name} = kg.cast %{value} : {narrow} to {wide}\n") \
        if element != "f32" else (lambda name, value: "")
    dy, x = ("dyf", "xf") if element != "f32" else ("dy", "x")
    return f"""func.func @weight_gradient(%dy: {narrow}, %x: {narrow}, %r: {scale})
    -> tensor<{shape[-1]}xf32> {{
{cast("dyf", "dy")}{cast("xf", "x")}  %p = kg.mul %{dy}, %{x} : ({wide}, {wide}) -> {wide}
  %q = kg.mul %p, %r : ({wide}, {scale}) -> {wide}
  %s = kg.reduce sum %q dims [{summed}] : {wide} -> tensor<{shape[-1]}xf32>
  return %s : tensor<{shape[-1]}xf32>
}}
"""


def configs(rows: int) -> dict[str, dict | None]:
    """Name -> knobs of the one kernel (None: kgc's default)."""
    old_step = rows if rows <= 4096 else 2048
    found: dict[str, dict | None] = {"default": None,
                                     "old": {"block_x": 1, "block_r": old_step}}
    cover = 1 << (rows - 1).bit_length()
    for band, step, warps in itertools.product(BANDS, STEPS, WARPS):
        if step > cover or not 1024 <= band * step <= 8192:
            continue
        step_knob = rows if step >= rows else step
        found[f"x{band} r{step} w{warps}"] = {"block_x": band, "block_r": step_knob,
                                              "num_warps": warps}
    return found


def _rows(shape: tuple[int, ...]) -> int:
    rows = 1
    for extent in shape[:-1]:
        rows *= extent
    return rows


def _graph_config(knobs: dict | None):
    if knobs is None:
        return None
    from kgc.pipeline.config import FORMAT
    return {"format": FORMAT, "function": "weight_gradient", "partition": None,
            "kernels": {"weight_gradient_0_reduction": {"kind": "reduction", **knobs}}}


def _compile(text: str, knobs: dict | None):
    import kgc
    return kgc.compile(text, config=_graph_config(knobs), cache=True)


def _warm(job):
    text, knobs = job
    try:
        _compile(text, knobs)
        return None
    except Exception as error:  # reported beside the config, the sweep goes on
        return f"{type(error).__name__}: {error}".splitlines()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ.setdefault("KGC_KERNEL_CACHE", "1")

    import torch

    from kgc.bench import provenance
    from kgc.search.measure import input_sets, l2_bytes, time_rotated

    shapes = []
    for text in args.shapes.split(","):
        dims, _, element = text.partition(":")
        shapes.append((tuple(int(v) for v in dims.split("x")), element or "bf16"))
    jobs = [(graph_text(shape, element), knobs) for shape, element in shapes
            for knobs in configs(shape[-2]).values()]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        errors = list(pool.map(_warm, jobs))
    failed = {(text, json.dumps(knobs, sort_keys=True)): e
              for (text, knobs), e in zip(jobs, errors) if e}

    print(provenance.command_line())
    results = []
    for shape, element in shapes:
        text = graph_text(shape, element)
        rows, columns = _rows(shape), shape[-1]
        dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[element]
        nbytes = rows * columns * 2 * dtype.itemsize + rows * 4
        sets = [(torch.randn(shape, device="cuda", dtype=dtype),
                 torch.randn(shape, device="cuda", dtype=dtype),
                 torch.rand(*shape[:-1], 1, device="cuda") + 0.5)
                for _ in range(input_sets(nbytes, l2_bytes()))]
        summed = tuple(range(len(shape) - 1))

        def eager(dy, x, r):
            return (dy.float() * x.float() * r).sum(summed)

        reference = eager(*sets[0])
        inductor = torch.compile(eager)
        row = {"shape": "x".join(str(d) for d in shape) + f" {element}",
               "eager_us": time_rotated(lambda i: eager(*sets[i]), len(sets)),
               "torch_compile_us": time_rotated(lambda i: inductor(*sets[i]), len(sets)),
               "kgc": {}}
        for name, knobs in configs(shape[-2]).items():
            key = (text, json.dumps(knobs, sort_keys=True))
            if key in failed:
                row["kgc"][name] = {"error": failed[key]}
                continue
            compiled = _compile(text, knobs)
            got = compiled(*sets[0])
            error = float((got - reference).abs().max() / reference.abs().max())
            if not error <= 1e-4:
                row["kgc"][name] = {"error": f"off by {error:.2e} of the largest sum"}
                continue
            kernel = compiled.kernels()[0]
            row["kgc"][name] = {"us": time_rotated(lambda i: compiled(*sets[i]), len(sets)),
                                "config": f"grid {kernel.grid[0]} w{kernel.num_warps} "
                                          f"s{kernel.num_stages}"}
        timed = {n: v["us"] for n, v in row["kgc"].items() if "us" in v}
        best = min(timed, key=timed.get)
        print(f"{row['shape']:>16}  eager {row['eager_us']:7.2f}  torch.compile "
              f"{row['torch_compile_us']:7.2f}  kgc old {timed.get('old', float('nan')):7.2f}  "
              f"default {timed.get('default', float('nan')):7.2f} "
              f"({row['kgc']['default'].get('config')})  best {timed[best]:7.2f} ({best})")
        bad = {n: v["error"] for n, v in row["kgc"].items() if "error" in v}
        if bad:
            print(f"{'':>16}  not timed: {bad}")
        results.append(row)
    if args.json:
        provenance.write_json(args.json, {"shapes": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
