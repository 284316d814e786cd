"""Time one fused workload under many tile configurations.

    python benchmarks/sweep_tiles.py WORKLOAD [--top 10] [--json out.json]

WORKLOAD names an entry of fused_workloads.py. The graph is fused once; for
each kernel config (kgc.tiling.config: block_m, block_n, block_k,
num_warps, num_stages...) its kernels get the config's attributes, are
compiled from kg-tile on, checked
against eager PyTorch and timed with triton.testing.do_bench. This is how
kgc's default tile heuristics were chosen; an autotuner does the same per
shape.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys

import torch
import triton.testing
from mlir import ir

import kgc
from kgc.bench import provenance
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.pipeline import Pipeline
from kgc.runtime import CompiledGraph
from kgc.tiling.config import CONFIG_CLASSES

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from fused_workloads import WORKLOADS, _DTYPES  # noqa: E402

GRIDS = {
    "matmul": {"block_m": (16, 64, 128), "block_n": (32, 64, 128, 256), "block_k": (32, 64, 128),
               "num_warps": (4, 8), "num_stages": (3, 4)},
    "reduction": {"block_x": (1, 2, 4, 8), "num_warps": (2, 4, 8, 16)},
    "pointwise": {"block_m": (1, 4, 16), "block_n": (256, 1024), "num_warps": (4, 8)},
}
AFTER_FUSION = "builtin.module(kg-tile,kg-legalize-dot,kg-pad-mask,convert-kg-to-ttir,kgc-cse,kgc-dce)"


def configurations(kind: str):
    grid = GRIDS[kind]
    for values in itertools.product(*grid.values()):
        yield CONFIG_CLASSES[kind](**dict(zip(grid, values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    build, reference, specs, atol = WORKLOADS[args.workload]
    graph = kgc.Graph(args.workload)
    tensors = [graph.input(f"in{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
    graph.output(build(graph, *tensors))
    torch.manual_seed(0)
    inputs = [(torch.randn(shape, device="cuda") * 0.05).to(_DTYPES[dtype]) for shape, dtype in specs]
    expected = reference(*inputs)

    context = ir.Context()
    context.allow_unregistered_dialects = True
    fused = graph.build(context)
    with context:
        Pipeline.parse("builtin.module(kgc-cse,kgc-dce,kg-decompose,kgc-cse,kg-fuse)").run(fused)
        fused_text = fused.get_asm()
    kernels = [op for op in fused.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations
               if op.operation.name == "kg.kernel"]
    if len(kernels) != 1:
        sys.exit(f"{args.workload} fuses into {len(kernels)} kernels; the sweep tunes one")
    # kg-fuse names each kernel after its kind: <function>_<n>_<kind>.
    kind = ir.StringAttr(kernels[0].operation.attributes["sym_name"]).value.rsplit("_", 1)[-1]

    results = []
    for config in configurations(kind):
        with context:
            module = ir.Module.parse(fused_text, context)
            for op in module.body.operations[0].regions[0].blocks[0].operations:
                if op.operation.name == "kg.kernel":
                    op.operation.attributes["config"] = config.to_attribute()
            try:
                compiled = compile_module(module.operation, pipeline=AFTER_FUSION)
                runner = CompiledGraph(compiled)
                got = runner(*inputs)
            except Exception as error:  # a configuration that does not compile or fit
                results.append({"config": config.to_dict(), "error": str(error).splitlines()[0][:120]})
                continue
        error = (got.float() - expected.float()).abs().max().item()
        if not error <= atol:
            results.append({"config": config.to_dict(), "error": f"wrong result, max error {error}"})
            continue
        ms = triton.testing.do_bench(lambda: runner(*inputs), warmup=25, rep=100, return_mode="median")
        results.append({"config": config.to_dict(), "ms": ms})
        print(json.dumps(results[-1]), flush=True)
    eager = triton.testing.do_bench(lambda: reference(*inputs), warmup=25, rep=100, return_mode="median")
    timed = sorted((r for r in results if "ms" in r), key=lambda r: r["ms"])
    print(f"eager: {eager:.4f} ms; best {len(timed[:args.top])} of {len(results)}:")
    for r in timed[:args.top]:
        print(f"  {r['ms']:.4f} ms ({eager / r['ms']:.2f}x eager)  {r['config']}")
    if args.json:
        provenance.write_json(args.json, {"workload": args.workload, "eager_ms": eager,
                                          "results": results}, indent=1)


if __name__ == "__main__":
    main()
