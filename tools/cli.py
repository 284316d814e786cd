"""kgc: the compiler driver.

    kgc --version
    kgc compile [GRAPH.mlir | -] [-o DIR] [--target sm_90] [--pass-pipeline ...]
                [--emit kg|ttir|ttgir|llir|ptx|cubin|c] [--config FILE] [-j JOBS]
                [--name NAME]
    kgc tune [GRAPH.mlir] [--effort low|default|high] [--budget S]
             [--save-config FILE] [-o DIR]
    kgc bench [--quick] [--workloads NAME,...] [--json FILE] [--chart FILE]
              [--effort low|default|high] [--reps N]
    kgc bench --models [NAME,...] [--rows KIND,...] [--device cuda|cpu] [--list]
              [--json FILE] [--chart FILE] [--reps N] [--seed N]
    kgc cache export FILE | import FILE | info [FILE]
    kgc tune-defaults build --out FILE [--budget-s S] [--shape-budget-s S]
    kgc tune-defaults check [--table T] [--held-out FILE] | corpus

`compile` compiles every function of GRAPH (a file, `-` for stdin, by
default the built-in RMSNorm + MatMul example) and writes each stage of each kernel, its artifact record
and manifest.json to DIR (`kgc.runtime.load(DIR)` runs it without
compiling), first removing what an earlier compile wrote there; no GPU is
needed. `--emit c` writes instead DIR/<graph>.h and
DIR/<graph>.c, which run the graph from C through the CUDA driver API
(kgc.export). `tune` searches the graph's variants on this
machine's GPU (kgc.search) and prints every candidate's time and status.
`bench` times kgc (after superoptimize) against eager PyTorch and
torch.compile on a catalogue of workloads on this machine's GPU
(kgc.bench), and prints a table; it exits 1 when kgc fails a workload.
`bench --models` runs the model suite instead (transformers models from
small configs, through `torch.compile(backend="kgc")`): each row checked
and timed on the GPU, or with `--device cpu` checked only, with kgc's
kernels on the CPU executor; it exits 1 when any row is wrong or fails.
`cache` moves the local cache (compiled kernels, search results;
`KGC_CACHE_DIR`) to and from a bundle file, every entry checked on import,
and `cache info` says what the cache or a bundle holds (kgc.search.bundle).
`tune-defaults` builds the tuned-defaults table of this machine's GPU from
the search, or checks the default compile against the search
(kgc.bench.tune_defaults, the same as `python -m kgc.bench.tune_defaults`).
Errors are printed as `file:line:col: error: ...` and the
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
from kgc.parsing import decode_source, parse_file, parse_text
from kgc.pipeline.stages import STAGES, parse_target

EXAMPLE = "rmsnorm_matmul.mlir"
# What `--emit` takes beyond the stages: ahead-of-time exports of the cubins.
EXPORT_FORMATS = ("c",)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgc", description="kgc, a kernel-graph compiler.")
    parser.add_argument("--version", action="version", version=versions(),
                        help="print the versions of kgc, MLIR's bindings and Triton, and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    compile_ = commands.add_parser(
        "compile", help="compile a kernel graph to Triton kernels (every stage down to cubin)")
    compile_.add_argument("graph", nargs="?",
                          help=f"an .mlir file of kg functions, '-' for stdin (default: the "
                               f"built-in {EXAMPLE})")
    compile_.add_argument("-o", "--output", default="kgc-out", help="output folder (default kgc-out)")
    compile_.add_argument("--target", default="sm_90", help="GPU to compile for, sm_80 or newer "
                                                            "(default sm_90)")
    compile_.add_argument("--pass-pipeline", help="the kg -> TTIR pass pipeline, in MLIR's textual form "
                                                  "(default: kgc's own)")
    compile_.add_argument("--emit", choices=STAGES + EXPORT_FORMATS, default="cubin",
                          help="the last stage to produce (default cubin), or `c`: a C header "
                               "and source that launch the graph's cubins (kgc.export)")
    compile_.add_argument("-j", "--jobs", type=_positive, default=1,
                          help="worker processes compiling kernels side by side (default 1)")
    compile_.add_argument("--config", help="a JSON file of a partition and kernel knobs, as "
                                           "`kgc tune --save-config` writes it")
    compile_.add_argument("--name", help="the name of the files written (<name>.kg.mlir, "
                                         "<name>.h, ...) and with --emit c the C prefix "
                                         "kgc_<name>_ (default: the file's stem; for stdin, "
                                         "the first function's name)")
    tune = commands.add_parser(
        "tune", help="search a kernel graph's fusions and kernel configs on this machine's GPU, "
                     "check and time every candidate, and print the table")
    tune.add_argument("graph", nargs="?",
                      help=f"an .mlir file of kg functions (default: the built-in {EXAMPLE})")
    tune.add_argument("--function", help="the function to tune (default: the only one)")
    tune.add_argument("--effort", choices=("low", "default", "high"), default="default",
                      help="how many configs of each kernel to try (default: default)")
    tune.add_argument("--budget", type=float, help="seconds the search may take")
    tune.add_argument("--save-config", help="write the chosen config (JSON) to this file")
    tune.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    tune.add_argument("-o", "--output", help="also write the chosen kernels' stages here")
    cache = commands.add_parser(
        "cache", help="export the local cache (compiled kernels, search results) to a bundle, "
                      "import one, or show what it holds")
    cache_actions = cache.add_subparsers(dest="action", required=True)
    cache_actions.add_parser("export", help="write the local cache to FILE (a .tar.gz)") \
        .add_argument("file")
    cache_actions.add_parser("import", help="check every entry of the bundle FILE, then add "
                                            "them to the local cache").add_argument("file")
    cache_actions.add_parser("info", help="what the local cache (or the bundle FILE) holds") \
        .add_argument("file", nargs="?")
    commands.add_parser(
        "tune-defaults", add_help=False,
        help="build the tuned-defaults table of this machine's GPU from the search, or check "
             "the default compile against the search (`kgc tune-defaults --help`)") \
        .add_argument("arguments", nargs=argparse.REMAINDER)
    bench = commands.add_parser(
        "bench", help="time kgc against eager PyTorch and torch.compile on a catalogue of "
                      "workloads on this machine's GPU, with each one's floor")
    bench.add_argument("--quick", action="store_true",
                       help="a few small workloads, low effort and fewer repetitions")
    bench.add_argument("--workloads", type=_names,
                       help="comma-separated workloads to run (default: all; with --quick, "
                            "the quick ones)")
    bench.add_argument("--models", nargs="?", const="", metavar="NAME,...",
                       help="run the model suite (default: every model) instead of the "
                            "workloads")
    bench.add_argument("--rows", metavar="KIND,...",
                       help="with --models: the kinds of rows to run (forward, generate, train, "
                            "lora; default: all)")
    bench.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                       help="with --models: cuda checks and times every row; cpu checks every "
                            "row's correctness with kgc's kernels on the CPU executor")
    bench.add_argument("--list", action="store_true",
                       help="list the workloads (with --models, the models) and exit")
    bench.add_argument("--json", help="write the results as JSON to this file")
    bench.add_argument("--chart", help="write a PNG bar chart of the results to this file")
    bench.add_argument("--effort", choices=("low", "default", "high"),
                       help="superoptimize's effort (default: default; low with --quick)")
    bench.add_argument("--reps", type=_positive,
                       help="calls each median is taken over (default 1000; 200 with --quick)")
    bench.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh)")
    bench.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated workload names, got '{text}'")
    return names


def _optional_names(text: str) -> list[str] | None:
    """Comma-separated names, or None (every one) for an empty value."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    return names or None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
    return value


def versions() -> str:
    """kgc's version and those of what it is built on (from the installed
    distributions' metadata: nothing is imported)."""
    import importlib.metadata

    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"kgc {version('kgc')} (MLIR Python bindings {version('xtc-mlir-python-bindings')}, "
            f"triton {version('triton')}, torch {version('torch')})")


def _read_graph(path: str | None, context: ir.Context) -> tuple[ir.Operation, str]:
    """The graph's module and the stem its files are named after: the
    file's, or for stdin ('-') the first function's name."""
    if path is None:
        text = importlib.resources.files("kgc.examples").joinpath(EXAMPLE).read_text()
        return parse_text(text, EXAMPLE, context), pathlib.Path(EXAMPLE).stem
    if path == "-":
        module = parse_text(decode_source(sys.stdin.buffer.read(), "<stdin>"), "<stdin>", context)
        functions = [op.operation for op in module.regions[0].blocks[0].operations
                     if op.operation.name == "func.func"]
        stem = (ir.StringAttr(functions[0].attributes["sym_name"]).value if functions
                else "stdin")
        return module, stem
    return parse_file(path, context), pathlib.Path(path).stem


def _shown(path: str | None) -> str:
    """How the summary names the graph it compiled."""
    if path is None:
        return EXAMPLE + " (built-in example)"
    return "<stdin>" if path == "-" else path


def compile_command(args) -> int:
    from kgc.pipeline.compiler import compile_module, make_output_folder

    started = time.perf_counter()
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        # No MLIR worker threads: they would run Python callbacks (passes,
        # diagnostic handlers) without the GIL.
        context.enable_multithreading(False)
        module, stem = _read_graph(args.graph, context)
        if args.name is not None:
            stem = _checked_name(args.name)
        target = parse_target(args.target)
        # Refused before compiling: a folder that cannot be written.
        output = make_output_folder(args.output)
        config = None
        if args.config is not None:
            from kgc.pipeline.config import GraphConfig

            config = GraphConfig.load(pathlib.Path(args.config))
        if args.emit in EXPORT_FORMATS:
            from kgc.export import c_identifier

            # Refused before compiling: a name that cannot name C functions.
            if args.name is not None:
                c_identifier(stem, "--name")
            else:
                try:
                    c_identifier(stem, "the graph's name (the file's stem)")
                except KgcError as error:
                    raise KgcError(f"{error.diagnostics[0].message}; name the export with "
                                   "--name NAME") from None
            compiled = compile_module(module, target=target, pipeline=args.pass_pipeline,
                                      config=config, emit="cubin", jobs=args.jobs)
            return _export(compiled, output, stem, args, started)
        compiled = compile_module(module, target=target, pipeline=args.pass_pipeline,
                                  config=config,
                                  emit=args.emit, ttir_dir=output / "kernels", jobs=args.jobs)
        written = compiled.write(output, stem)
    elapsed = time.perf_counter() - started
    print(f"kgc: compiled {_shown(args.graph)} for sm_{target} "
          f"down to {args.emit} in {elapsed:.1f} s")
    for function in compiled.functions.values():
        names = ", ".join(launch.kernel for launch in function.launches) or "no kernel"
        print(f"  @{function.name}: {len(function.launches)} kernel(s): {names}")
    for kernel in compiled.kernels.values():
        if kernel.library is not None:
            # No code of kgc's: the GPU's BLAS computes it when it runs.
            print(f"  {kernel.name}: {kernel.library.describe()}, no kernel files")
            continue
        grid = "x".join(str(g) for g in kernel.grid)
        shared = f", {kernel.shared} B shared" if kernel.shared is not None else ""
        if kernel.artifact is not None and "registers" in kernel.artifact.resources:
            shared += f", {kernel.artifact.resources['registers']} registers"
        print(f"  {kernel.name}: grid {grid}, {kernel.num_warps} warps, {kernel.num_stages} "
              f"stages{shared}; {', '.join(sorted(kernel.asm))}")
    if compiled.kernels:
        print(f"  wrote {len(written)} files to {output}/, manifest.json describes the kernels")
    else:
        # The kernels become Triton modules, with launches to describe, at ttir.
        print(f"  wrote {len(written)} files to {output}/; manifest.json lists them (it "
              "describes kernels from --emit ttir on, once they are lowered)")
    return 0


def _checked_name(name: str) -> str:
    """`--name`: a file name of its own, no folder."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
        raise KgcError(f"--name '{name}' must be a plain file name: no folder, no '/'")
    return name


def _export(compiled, output: pathlib.Path, stem: str, args, started: float) -> int:
    from kgc.export import export_module
    from kgc.pipeline.compiler import remove_earlier_output

    # The folder holds this compile's output alone, as with the other stages.
    remove_earlier_output(output)
    exported = export_module(compiled, output, stem)
    print(f"kgc: exported {_shown(args.graph)} for "
          f"sm_{compiled.target} as C in {time.perf_counter() - started:.1f} s: "
          f"{exported.header}, {exported.source}")
    for function, symbol in exported.functions.items():
        print(f"  @{function}: {symbol}(), workspace {exported.workspace_bytes[function]} bytes")
    return 0


def tune_command(args) -> int:
    from kgc.api import superoptimize

    if args.budget is not None and not args.budget > 0:
        raise KgcError(f"--budget must be a positive number of seconds, got {args.budget}")
    source = args.graph or str(importlib.resources.files("kgc.examples").joinpath(EXAMPLE))
    graph = superoptimize(source, function=args.function, effort=args.effort,
                          budget_s=args.budget, cache=not args.no_cache)
    report = graph.report
    print(report.table())
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.counts().items()))
    print(f"kgc: tuned @{graph.name} in {report.wall_s:.1f} s"
          f"{' (from the cache)' if report.cached else ''}: {counts}")
    if report.chosen_us is not None and report.default_us is not None:
        print(f"  chosen {report.chosen_us:.2f} us, default compile {report.default_us:.2f} us")
    print(f"  partition {graph.config.partition or '(default)'}; kernels: "
          f"{', '.join(k.name for k in graph.kernels())}")
    if args.save_config:
        try:
            pathlib.Path(args.save_config).write_text(graph.config.to_json() + "\n")
        except OSError as error:
            raise KgcError(f"cannot write '{args.save_config}': {error.strerror}") from None
        print(f"  wrote the config to {args.save_config} (kgc compile --config uses it)")
    if args.output:
        from kgc.pipeline.compiler import make_output_folder

        written = graph.module.write(make_output_folder(args.output), graph.name)
        print(f"  wrote {len(written)} files to {args.output}/")
    return 0


def bench_command(args) -> int:
    import logging

    from kgc.bench.workloads import CATALOGUE, select

    if args.models is not None or (args.list and args.device == "cpu"):
        return models_command(args)
    if args.rows is not None:
        raise KgcError("--rows chooses rows of the model suite: add --models")
    if args.device != "cuda":
        raise KgcError("--device cpu checks the model suite only: add --models")
    if args.list:
        for workload in CATALOGUE.values():
            print(f"{workload.name:16} {workload.kind:7} {'quick ' if workload.quick else '':6}"
                  f"{workload.title}")
        return 0
    workloads = select(args.workloads, args.quick)  # a bad name is refused before CUDA is asked
    for path, what in ((args.json, "--json"), (args.chart, "--chart")):
        if path is not None and not pathlib.Path(path).parent.resolve().is_dir():
            raise KgcError(f"{what}: the folder of '{path}' does not exist")
    from kgc.runtime import cuda_available

    if not cuda_available():
        raise KgcError("bench times kernels on a GPU: it needs a CUDA device, and torch sees none")
    if args.chart is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise KgcError("--chart needs matplotlib: pip install 'kgc[bench]'") from None
    from tqdm.contrib.logging import logging_redirect_tqdm

    from kgc.bench.run import run_bench

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    effort = args.effort or ("low" if args.quick else "default")
    reps = args.reps or (200 if args.quick else 1000)
    started = time.perf_counter()
    with logging_redirect_tqdm():
        result = run_bench(workloads, effort=effort, reps=reps, quick=args.quick, seed=args.seed,
                           progress=not args.no_progress)
    print(result.header(time.perf_counter() - started))
    print(result.table())
    _write_outputs(args, result)
    failed = result.failed
    if failed:
        print(f"kgc: {len(failed)} workload(s) failed: "
              + ", ".join(f"{row.workload} ({row.kgc_status})" for row in failed), file=sys.stderr)
        return 1
    return 0


def _write_outputs(args, result) -> None:
    """The results as JSON (`--json`) and a chart (`--chart`), where asked."""
    for path, write, what in ((args.json, result.write_json, "results"),
                              (args.chart, result.write_chart, "chart")):
        if path is not None:
            try:
                write(path)
            except OSError as error:
                raise KgcError(f"cannot write '{path}': {error.strerror}") from None
            print(f"wrote the {what} to {path}")


def models_command(args) -> int:
    """`kgc bench --models`: the model suite (kgc.bench.models) on the GPU,
    or its correctness half on the CPU executor."""
    from kgc.bench import models

    for given, flag in ((args.workloads, "--workloads"), (args.quick, "--quick"),
                        (args.effort, "--effort")):
        if given:
            raise KgcError(f"{flag} is for the workloads; --models runs the model suite")
    if args.list:
        for spec in models.CATALOGUE.values():
            rows = ", ".join(r.name for r in spec.rows(models.GPU))
            print(f"{spec.name:18} {'gpu only ' if spec.gpu_only else '':9}{spec.title}: {rows}")
        return 0
    size = models.CPU if args.device == "cpu" else models.GPU
    specs = models.select(_optional_names(args.models), size)
    kinds = models.select_kinds(None if args.rows is None else _optional_names(args.rows))
    for path, what in ((args.json, "--json"), (args.chart, "--chart")):
        if path is not None and not pathlib.Path(path).parent.resolve().is_dir():
            raise KgcError(f"{what}: the folder of '{path}' does not exist")
    if size == models.CPU and args.chart is not None:
        raise KgcError("--chart draws GPU times; --device cpu measures none")
    if size == models.GPU:
        from kgc.runtime import cuda_available

        if not cuda_available():
            raise KgcError("bench --models times models on a GPU: it needs a CUDA device, and "
                           "torch sees none (--device cpu checks them on the CPU)")
    if args.chart is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise KgcError("--chart needs matplotlib: pip install 'kgc[bench]'") from None
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise KgcError("--models needs transformers: pip install 'kgc[bench]'") from None
    from kgc.bench.model_run import describe_row, run_models

    started = time.perf_counter()
    # A line per finished row, and the JSON rewritten with it: a run cut
    # short (a device's time limit) keeps what it measured.
    result = run_models(specs, device=args.device, seed=0 if args.seed is None else args.seed,
                        reps=args.reps or 20, kinds=kinds,
                        progress=lambda row: print(describe_row(row), flush=True),
                        checkpoint=None if args.json is None else
                        lambda partial: partial.write_json(args.json))
    print(f"kgc model suite on {result.device}, {result.settings['dtype']}, "
          f"{time.perf_counter() - started:.0f} s")
    print(result.table())
    _write_outputs(args, result)
    failed = result.failed
    if failed:
        print(f"kgc: {len(failed)} of {len(result.rows)} model rows are not correct: "
              + ", ".join(f"{row.model} {row.row} ({row.status})" for row in failed),
              file=sys.stderr)
        return 1
    return 0


def cache_command(args) -> int:
    from kgc.search import bundle

    if args.action == "export":
        done = bundle.export_cache(args.file)
        print(f"exported {done['kernels']} kernel(s) and {done['search_results']} search "
              f"result(s), {done['bytes']} bytes, from {bundle.cache_root()} to {args.file}")
    elif args.action == "import":
        done = bundle.import_cache(args.file)
        print(f"imported {done['kernels']} kernel(s) and {done['search_results']} search "
              f"result(s), {done['bytes']} bytes, from {args.file} into {bundle.cache_root()}")
    else:
        info = bundle.cache_info(args.file)
        print(f"{'bundle' if args.file else 'cache'}: {info.get('bundle') or info['root']}\n"
              f"kernels: {info['kernels']}\nsearch results: {info['search_results']}\n"
              f"bytes: {info['bytes']}")
    return 0


def run(argv: list[str]) -> int:
    if argv[:1] == ["tune-defaults"]:
        # Its own parser takes every argument after the command (argparse's
        # remainder would leave `--help` to kgc's).
        from kgc.bench import tune_defaults

        return tune_defaults.main(argv[1:], prog="kgc tune-defaults")
    args = _parser().parse_args(argv)
    try:
        if args.command == "compile":
            return compile_command(args)
        if args.command == "tune":
            return tune_command(args)
        if args.command == "bench":
            return bench_command(args)
        if args.command == "cache":
            return cache_command(args)
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
