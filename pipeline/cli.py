"""kgc: the compiler driver.

    kgc compile [GRAPH.mlir] [-o DIR] [--target sm_90] [--pass-pipeline ...]
                [--emit kg|ttir|ttgir|llir|ptx|cubin]

Compiles every function of GRAPH (by default the built-in RMSNorm + MatMul
example) and writes each stage of each kernel and manifest.json to DIR.
No GPU is needed. Errors are printed as `file:line:col: error: ...` and the
exit status is 1.
"""

from __future__ import annotations

import argparse
import importlib.resources
import pathlib
import sys
import time

from mlir import ir

from kgc.diagnostics import KgcError
from kgc.parsing import parse_file, parse_text
from kgc.pipeline.stages import STAGES, parse_target

EXAMPLE = "rmsnorm_matmul.mlir"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgc", description="kgc, a kernel-graph compiler.")
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser(
        "compile", help="compile a kernel graph to Triton kernels (every stage down to cubin)")
    compile_.add_argument("graph", nargs="?",
                          help=f"an .mlir file of kg functions (default: the built-in {EXAMPLE})")
    compile_.add_argument("-o", "--output", default="kgc-out", help="output folder (default kgc-out)")
    compile_.add_argument("--target", default="sm_90", help="GPU to compile for, sm_80 or newer "
                                                            "(default sm_90)")
    compile_.add_argument("--pass-pipeline", help="the kg -> TTIR pass pipeline, in MLIR's textual form "
                                                  "(default: kgc's own)")
    compile_.add_argument("--emit", choices=STAGES, default="cubin",
                          help="the last stage to produce (default cubin)")
    compile_.add_argument("-j", "--jobs", type=_positive, default=1,
                          help="worker processes compiling kernels side by side (default 1: "
                               "one after another in this process)")
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
    return value


def _read_graph(path: str | None, context: ir.Context) -> tuple[ir.Operation, str]:
    if path is None:
        text = importlib.resources.files("kgc.examples").joinpath(EXAMPLE).read_text()
        return parse_text(text, EXAMPLE, context), pathlib.Path(EXAMPLE).stem
    return parse_file(path, context), pathlib.Path(path).stem


def compile_command(args) -> int:
    from kgc.pipeline.compiler import compile_module, make_output_folder

    started = time.perf_counter()
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module, stem = _read_graph(args.graph, context)
        target = parse_target(args.target)
        # Refused before compiling: a folder that cannot be written.
        output = make_output_folder(args.output)
        compiled = compile_module(module, target=target, pipeline=args.pass_pipeline,
                                  emit=args.emit, ttir_dir=output / "kernels", jobs=args.jobs)
        written = compiled.write(output, stem)
    elapsed = time.perf_counter() - started
    print(f"kgc: compiled {args.graph or EXAMPLE + ' (built-in example)'} for sm_{target} "
          f"down to {args.emit} in {elapsed:.1f} s")
    for function in compiled.functions.values():
        names = ", ".join(launch.kernel for launch in function.launches) or "no kernel"
        print(f"  @{function.name}: {len(function.launches)} kernel(s): {names}")
    for kernel in compiled.kernels.values():
        grid = "x".join(str(g) for g in kernel.grid)
        shared = f", {kernel.shared} B shared" if kernel.shared is not None else ""
        print(f"  {kernel.name}: grid {grid}, {kernel.num_warps} warps, {kernel.num_stages} "
              f"stages{shared}; {', '.join(sorted(kernel.asm))}")
    print(f"  wrote {len(written)} files to {output}/, manifest.json describes the kernels")
    return 0


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "compile":
            return compile_command(args)
    except KgcError as error:
        for diagnostic in error.diagnostics:
            text = str(diagnostic)
            print(text if diagnostic.location else f"kgc: {text}", file=sys.stderr)
        return 1
    return 2


def main() -> None:
    try:
        sys.exit(run(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
