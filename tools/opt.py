"""kgc-opt: run passes on `.mlir` files, in the style of mlir-opt.

    kgc-opt input.mlir --kgc-cse --kgc-dce
    kgc-opt input.mlir --pass-pipeline='builtin.module(kgc-cse,canonicalize)'
    kgc-opt input.mlir --kg-tile='block-m=64 num-warps=8' -o out.mlir
    kgc-opt invalid.mlir --split-input-file --verify-diagnostics
    kgc-opt input.mlir --load-pass-plugin=my_passes.py --my-pass

Every registered kgc pass is a flag (`--kgc-cse`) taking its options as
`--kg-tile='name=value ...'`; any other `--name[=options]` is looked up as
an upstream MLIR pass (`--canonicalize`, `--cse`). `--load-pass-plugin`
imports a Python module of passes first (mlir-opt loads a shared library),
so that its passes are flags and pipeline names too. Errors are printed as
`file:line:col: error: ...` and the exit status is 1.
"""

from __future__ import annotations

import argparse
import re
import sys

from mlir import ir

from kgc.diagnostics import Diagnostic, KgcError, from_mlir
from kgc.parsing import decode_source, parse_file, parse_text, read_source
from kgc.passes import PluginError, load_pass_plugin, registered_passes
from kgc.tools.cli import versions
from kgc.tools.expected_diagnostics import parse_expectations, verify
from kgc.pipeline.instrumentation import ALL_PASSES, IRPrinting
from kgc.pipeline.pipeline import Pipeline, PipelineError
from kgc.pipeline.textual import PassSpec, PipelineSyntaxError, parse_pipeline

_SPLIT_MARKER = re.compile(r"\s*//\s*-{5,}\s*")

# Options of kgc-opt itself; every other `--name` is a pass.
_TOOL_OPTIONS = {
    "o", "help", "h", "pass-pipeline", "split-input-file", "verify-diagnostics",
    "mlir-print-ir-before", "mlir-print-ir-after", "mlir-print-ir-after-all",
    "mlir-print-ir-before-all", "mlir-timing", "list-passes", "allow-unregistered-dialect",
    "mlir-print-op-generic", "mlir-disable-verifier", "load-pass-plugin", "version",
}
# Tool options whose value may come as the next argument.
_VALUED_OPTIONS = {"-o", "--load-pass-plugin"}


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kgc-opt",
        description="Run kgc and MLIR passes on an .mlir file.",
        epilog="Passes: every pass of --list-passes is a flag, --NAME or --NAME='opt=value ...'; "
               "any other --NAME[=options] runs the upstream MLIR pass of that name.",
    )
    parser.add_argument("input", nargs="?", default="-", help="input file, '-' for stdin (default)")
    parser.add_argument("--version", action="version", version=versions(),
                        help="print the versions of kgc, MLIR's bindings and Triton, and exit")
    parser.add_argument("-o", dest="output", default="-", help="output file (default stdout)")
    parser.add_argument("--pass-pipeline", help="a textual pipeline, e.g. 'builtin.module(kgc-cse)'")
    parser.add_argument("--split-input-file", action="store_true",
                        help="split the input at '// -----' lines and process each part alone")
    parser.add_argument("--verify-diagnostics", action="store_true",
                        help="check diagnostics against expected-error comments")
    parser.add_argument("--mlir-print-ir-before", action="append", default=[], metavar="PASS",
                        help="print the IR before PASS (repeatable, or comma-separated)")
    parser.add_argument("--mlir-print-ir-after", action="append", default=[], metavar="PASS",
                        help="print the IR after PASS (repeatable, or comma-separated)")
    parser.add_argument("--mlir-print-ir-after-all", action="store_true",
                        help="print the IR after every pass")
    parser.add_argument("--mlir-print-ir-before-all", action="store_true",
                        help="print the IR before every pass")
    parser.add_argument("--mlir-timing", action="store_true", help="report the time of each pass")
    parser.add_argument("--list-passes", action="store_true",
                        help="list kgc's passes, and those of loaded plugins, and exit")
    parser.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py|MODULE",
                        help="import a Python module of passes (registered with @register_pass "
                             "or @function_pass), making each a flag (repeatable)")
    parser.add_argument("--allow-unregistered-dialect", action="store_true",
                        help="accept ops of dialects this build does not know (e.g. tt)")
    parser.add_argument("--mlir-print-op-generic", action="store_true",
                        help="print ops in MLIR's generic form")
    parser.add_argument("--mlir-disable-verifier", action="store_true",
                        help="do not verify the IR after each pass")
    return parser


def _split_pass_flags(argv: list[str]) -> tuple[list[str], list[PassSpec]]:
    """Separates `--pass[=options]` flags, in order, from the tool's own."""
    rest: list[str] = []
    passes: list[PassSpec] = []
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            rest.extend(argv[index - 1:])
            break
        if not arg.startswith("-") or arg == "-" or arg in _VALUED_OPTIONS:
            rest.append(arg)
            if arg in _VALUED_OPTIONS and index < len(argv):
                rest.append(argv[index])
                index += 1
            continue
        body = arg.lstrip("-")
        name, _, value = body.partition("=")
        if name in _TOOL_OPTIONS:
            # mlir-opt also takes long options with one dash.
            rest.append(arg if arg.startswith("--") or len(name) == 1 else "--" + body)
            continue
        passes.append(_pass_flag(name, value))
    return rest, passes


def _pass_flag(name: str, options: str) -> PassSpec:
    if not options:
        return PassSpec(name)
    spec = parse_pipeline(f"{name}{{{options}}}").elements[0]
    return spec


def _list_passes() -> str:
    lines = ["kgc passes (each also a flag: --ARGUMENT, options as --ARGUMENT='name=value ...'):"]
    for argument, cls in registered_passes().items():
        lines.append(f"  {argument}  -  {cls.summary}")
        for name, option in cls.option_specs().items():
            lines.append(f"      {name}={option.render(option.default)}  -  {option.help}")
    lines.append("Any upstream MLIR pass works by name too, e.g. --canonicalize, --cse, --symbol-dce.")
    return "\n".join(lines)


def _build_pipeline(args, pass_flags: list[PassSpec]) -> Pipeline:
    if args.pass_pipeline and pass_flags:
        raise PipelineError("give either --pass-pipeline or pass flags, not both")
    if args.pass_pipeline:
        return Pipeline.parse(args.pass_pipeline)
    pipeline = Pipeline()
    for spec in pass_flags:
        pipeline.extend(Pipeline.from_spec(parse_pipeline(str(spec))))
    return pipeline


def _ir_printing(args) -> IRPrinting | None:
    def names(values: list[str]) -> frozenset[str]:
        return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())

    before = names(args.mlir_print_ir_before)
    after = names(args.mlir_print_ir_after)
    if args.mlir_print_ir_before_all:
        before |= {ALL_PASSES}
    if args.mlir_print_ir_after_all:
        after |= {ALL_PASSES}
    if not before and not after:
        return None
    return IRPrinting(before=before, after=after)


def _chunks(text: str, split: bool) -> list[tuple[int, str]]:
    """(first line, text) of each part; parts keep their line numbers by
    starting with as many empty lines as precede them in the file."""
    if not split:
        return [(1, text)]
    chunks, current, start = [], [], 1
    for number, line in enumerate(text.split("\n"), start=1):
        if _SPLIT_MARKER.fullmatch(line):
            chunks.append((start, "\n" * (start - 1) + "\n".join(current)))
            current, start = [], number + 1
        else:
            current.append(line)
    chunks.append((start, "\n" * (start - 1) + "\n".join(current)))
    return chunks


def _process_chunk(text: str, source_name: str, args, pipeline: Pipeline,
                   printing: IRPrinting | None, from_file: bool) -> tuple[str | None, list[Diagnostic]]:
    """Returns (printed module or None, diagnostics)."""
    diagnostics: list[Diagnostic] = []
    with ir.Context() as context:
        context.allow_unregistered_dialects = args.allow_unregistered_dialect
        # MLIR's worker threads (parallel verification of functions) would
        # call the Python diagnostic handler below without the GIL; kgc's
        # passes are Python and gain nothing from them.
        context.enable_multithreading(False)

        def keep(diagnostic) -> bool:
            diagnostics.append(from_mlir(diagnostic))
            return True

        context.attach_diagnostic_handler(keep)
        try:
            module = parse_file(source_name, context) if from_file else parse_text(text, source_name, context)
            pipeline.run(module, ir_printing=printing, timing=args.mlir_timing,
                         verify_each=not args.mlir_disable_verifier)
        except KgcError as error:
            return None, diagnostics + error.diagnostics
        output = module.get_asm(print_generic_op_form=args.mlir_print_op_generic,
                                assume_verified=True)
        return output, diagnostics


def _read_input(path: str) -> str:
    """The text of `path` ('-': stdin), decoded as UTF-8 here: stdin's own
    decoding would let invalid bytes through as surrogates, which the MLIR
    parser then refuses with a TypeError."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:  # a text stream put in place of stdin
            return sys.stdin.read()
        return decode_source(stream.read(), "<stdin>")
    return read_source(path)


def run(argv: list[str]) -> int:
    try:
        # A pass flag's options (`--kg-tile='block-m=64'`) parse as pipeline
        # text, so a malformed one is reported like a malformed pipeline.
        rest, pass_flags = _split_pass_flags(argv)
    except PipelineSyntaxError as error:
        print(f"kgc-opt: error: invalid pass options: {error}", file=sys.stderr)
        return 1
    args = _argument_parser().parse_args(rest)
    for plugin in args.load_pass_plugin:
        try:
            load_pass_plugin(plugin)
        except PluginError as error:
            print(f"kgc-opt: error: {error}", file=sys.stderr)
            return 1
    if args.list_passes:
        print(_list_passes())
        return 0
    try:
        pipeline = _build_pipeline(args, pass_flags)
        pipeline.validate()
    except PipelineError as error:
        for diagnostic in error.diagnostics:
            print(f"kgc-opt: error: {diagnostic.message}", file=sys.stderr)
        return 1
    except PipelineSyntaxError as error:
        print(f"kgc-opt: error: invalid pass pipeline: {error}", file=sys.stderr)
        return 1
    printing = _ir_printing(args)

    source_name = "<stdin>" if args.input == "-" else args.input
    try:
        text = _read_input(args.input)
    except KgcError as error:
        for diagnostic in error.diagnostics:
            print(f"kgc-opt: {diagnostic}", file=sys.stderr)
        return 1

    outputs, failed = [], False
    whole_file = args.input != "-" and not args.split_input_file
    for _, chunk in _chunks(text, args.split_input_file):
        output, diagnostics = _process_chunk(chunk, source_name, args, pipeline, printing, whole_file)
        if args.verify_diagnostics:
            problems = verify(parse_expectations(chunk), diagnostics, source_name)
            for problem in problems:
                print(problem, file=sys.stderr)
            failed |= bool(problems)
        else:
            for diagnostic in diagnostics:
                print(diagnostic, file=sys.stderr)
            failed |= output is None or any(d.severity == "error" for d in diagnostics)
        if output is not None:
            outputs.append(output)

    rendered = "\n// -----\n".join(o.rstrip("\n") for o in outputs)
    if rendered:
        rendered += "\n"
    try:
        if args.output == "-":
            sys.stdout.write(rendered)
        else:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(rendered)
    except OSError as error:
        print(f"kgc-opt: error: cannot write '{args.output}': {error.strerror}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def main() -> None:
    try:
        sys.exit(run(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
