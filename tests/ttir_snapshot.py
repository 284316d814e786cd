"""Writes the kg and TTIR stages of every test case (each dtype) and of the
built-in example to a directory, one file per graph and stage.

    python -m tests.ttir_snapshot before/      # on the old code
    python -m tests.ttir_snapshot after/       # on the new code
    diff -r before after

A change that must not change the generated kernels (a refactoring, a new
option left at its default) shows no difference in the `.ttir.mlir` files.
"""

from __future__ import annotations

import argparse
import pathlib

from mlir import ir

import kgc
from kgc.parsing import parse_file
from kgc.pipeline.compiler import compile_module
from tests.cases import parameters


def _write(directory: pathlib.Path, stem: str, module: ir.Operation) -> None:
    with module.context:
        compiled = compile_module(module, emit="ttir")
    for stage in ("kg", "ttir"):
        (directory / f"{stem}.{stage}.mlir").write_text(compiled.stages[stage])


def _fresh_context() -> ir.Context:
    context = ir.Context()
    context.allow_unregistered_dialects = True
    return context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory", type=pathlib.Path)
    directory = parser.parse_args().directory
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for case, dtype in parameters():
        _write(directory, case.id(dtype), case.graph(dtype).build(_fresh_context()))
        count += 1
    example = pathlib.Path(kgc.__file__).parent / "examples" / "rmsnorm_matmul.mlir"
    _write(directory, "example", parse_file(str(example), _fresh_context()))
    print(f"{count + 1} graphs written to {directory}")


if __name__ == "__main__":
    main()
