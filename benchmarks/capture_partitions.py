"""A model's kernel graphs, as the torch backend makes them, captured without a GPU.

    python benchmarks/capture_partitions.py MODEL[,MODEL...] [--tokens 1,64,512] --out DIR
                                            [--configs]

For each model of the suite (`kgc.bench.models`, GPU size, in f16 on the
CPU) and each token count, one forward through `torch.compile` with a kgc
`Backend` that partitions CPU tensors and, instead of compiling each kernel
graph, writes its text to `DIR/<model>-<tokens>-<n>.mlir` and evaluates it op
by op (`kgc.reference.evaluate`), so the forward goes on to the next
partition. `--configs` then compiles each written graph to the kg stage
for sm_90 (no GPU needed) and prints every kernel's grid and knobs: what the
default compile chooses, to compare across commits or table changes.

The graphs come from `kgc.bench.capture.forward_graphs`: on a CPU, Dynamo
captures other attention ops than on a GPU, so the attention kernels differ
from the GPU's; the matmuls, norms and elementwise kernels are the same
graphs (benchmarks/NOTES.md, stop 34, compared this way).
"""

from __future__ import annotations

import argparse
import pathlib

import torch

from kgc.bench import models
from kgc.bench.capture import forward_graphs


def capture(name: str, tokens: int, folder: pathlib.Path) -> list[pathlib.Path]:
    written = []
    for number, text in enumerate(forward_graphs(name, models.GPU, tokens, torch.float16,
                                                 seed=tokens)):
        path = folder / f"{name}-{tokens}-{number}.mlir"
        path.write_text(text)
        written.append(path)
    return written


def kernel_configs(path: pathlib.Path) -> list[str]:
    """Each kernel of the default compile of `path` for sm_90: name, grid, knobs."""
    from mlir import ir

    from kgc.parsing import parse_source
    from kgc.pipeline.compiler import compile_module
    from kgc.tiling.kernel_ops import config_attribute, int_array, kernel_name, kernels_in

    context = ir.Context()
    context.allow_unregistered_dialects = True
    module, _ = parse_source(str(path), context)
    with context:
        compile_module(module, target=90, emit="kg")  # tiles `module` in place
        lines = []
        for kernel in kernels_in(module):
            knobs = config_attribute(kernel)
            described = ", ".join(f"{knob.name} = {str(knob.attr).replace(' : i64', '')}"
                                  for knob in (knobs or []))
            lines.append(f"{kernel_name(kernel)} grid {tuple(int_array(kernel, 'grid'))} "
                         f"{described}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", help="comma-separated names of kgc.bench.models")
    parser.add_argument("--tokens", default="1,64,512")
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--configs", action="store_true",
                        help="print each kernel's grid and knobs of the default sm_90 compile")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            for path in capture(name, tokens, args.out):
                print(path)
                if args.configs:
                    for line in kernel_configs(path):
                        print("   ", line)


if __name__ == "__main__":
    main()
