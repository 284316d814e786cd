"""The graphs PyTorch runs around kgc's partitions in a training step, without a GPU.

    python benchmarks/glue_graphs.py llama [--out DIR]

On a GPU the CUDA attention ops stay with PyTorch in a training step
(`kgc.torch.partition.LIBRARY_FORWARD` and `LIBRARY_BACKWARD`), so each
half of the step is several kgc partitions with PyTorch's ops between
them. Every op there costs the host an op call. On the CPU kgc converts
the CPU attention ops, so each half is one partition and those ops never
show. This script leaves the CPU attention ops to PyTorch the same way,
traces one training step of a model of the suite at its GPU size (4 x 256
tokens, bf16 autocast) without running kgc's kernels, and prints each
half's graph code with the partition calls and their results left out,
what PyTorch would run between them. With `--out` it also writes each
half's whole code there.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib

import torch

from kgc.bench import model_train, models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a model of the suite (kgc.bench.models)")
    parser.add_argument("--out", help="write each half's graph code to this folder")
    args = parser.parse_args()
    partition = importlib.import_module("kgc.torch.partition")
    backend_module = importlib.import_module("kgc.torch.backend")
    aten = torch.ops.aten
    partition.LIBRARY_FORWARD[aten._scaled_dot_product_flash_attention_for_cpu.default] = \
        "the CPU flash attention's, left to PyTorch as a GPU's are"
    partition.LIBRARY_BACKWARD[
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default] = \
        "the CPU flash attention's, left to PyTorch as a GPU's are"
    halves = []
    compile_aten = backend_module.Backend.compile_aten

    def keep(self, module, mode="default", kind="inference"):
        compiled = compile_aten(self, module, mode, kind=kind)
        halves.append((kind, compiled))
        return compiled

    backend_module.Backend.compile_aten = keep
    backend = backend_module.Backend(devices=None, require_cuda=False, run_kernels=False)
    model = model_train.trainable_copy(models.CATALOGUE[args.model].build(models.GPU, seed=0),
                                       "train", 0)
    model.forward = torch.compile(model.forward, backend=backend)
    tokens = torch.randint(1, model.config.vocab_size, (4, 256),
                           generator=torch.Generator().manual_seed(0))
    model_train.training_step(model, tokens, True, None)
    for index, (kind, compiled) in enumerate(halves):
        code = compiled.code
        if args.out:
            folder = pathlib.Path(args.out)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{args.model}_{index}_{kind}.py").write_text(code)
        between = [line.strip() for line in code.splitlines()
                   if " = " in line and "kgc_partition_" not in line
                   and not line.strip().startswith("getitem")]
        print(f"== {kind}: {len(between)} lines besides the partition calls")
        for line in between:
            print("  ", line[:160])


if __name__ == "__main__":
    main()
