"""Reading `.mlir` text into a module, with file:line:col locations.

As with mlir-opt, a file whose single top-level op is a `builtin.module` is
that module; any other top-level ops are wrapped in an implicit module.

MLIR's parser recurses once per level of nesting (of types, attributes,
regions, affine maps) on the native stack, and input nested some thousands
deep overflows it: the process dies of SIGSEGV. So the text is first
scanned for its brackets, and input nested deeper than `MAX_NESTING` is
refused with its location. No real kernel graph nests that deep; kgc's
passes, which walk nested ops in Python, stay well within Python's
recursion limit below it.
"""

from __future__ import annotations

import pathlib
import re

from mlir import ir

from kgc.diagnostics import Diagnostic, KgcError, from_mlir_error

_IMPLICIT_MODULE = "module {"

MAX_NESTING = 256

# What the nesting scan looks at: string literals and comments (skipped as
# a whole, brackets inside them do not count), `->` (not a closing `>`),
# and brackets.
_NESTING_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|[(\[{<]|[)\]}>]')
_OPENING = "([{<"


def decode_source(data: bytes, source_name: str) -> str:
    """`data` as UTF-8 text, or KgcError naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise KgcError(f"'{source_name}' is not UTF-8 text (byte {error.start})") from None


def read_source(path: str | pathlib.Path) -> str:
    """The UTF-8 text of the file at `path`, or KgcError."""
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as error:
        raise KgcError(f"cannot read '{path}': {error.strerror}") from None
    return decode_source(data, str(path))


def parse_file(path: str | pathlib.Path, context: ir.Context) -> ir.Operation:
    """Parses the file at `path`; locations name the path as given."""
    return parse_text(read_source(path), str(path), context)


def check_nesting(text: str, source_name: str) -> None:
    """Raises KgcError at the first bracket nested deeper than MAX_NESTING."""
    depth = 0
    for token in _NESTING_TOKENS.finditer(text):
        char = token.group()
        if len(char) != 1:
            continue
        if char in _OPENING:
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, token.start()) + 1
                column = token.start() - (text.rfind("\n", 0, token.start()) + 1) + 1
                raise KgcError([Diagnostic(
                    "error", f"{source_name}:{line}:{column}",
                    f"nesting too deep (more than {MAX_NESTING} levels of brackets)",
                    line=line, filename=source_name)])
        else:
            # A stray closer (or a `>=`) must not let later levels go unseen.
            depth = max(depth - 1, 0)


def parse_text(text: str, source_name: str, context: ir.Context) -> ir.Operation:
    """Parses `text` into a `builtin.module` op, reporting locations as
    `source_name:line:col`."""
    check_nesting(text, source_name)
    try:
        top = ir.Operation.parse(text, source_name=source_name, context=context)
    except ir.MLIRError as error:
        if not _has_several_top_level_ops(error):
            raise from_mlir_error(error) from None
        top = _parse_in_implicit_module(text, source_name, context)
    if top.operation.name == "builtin.module":
        return top.operation
    module = ir.Module.create(top.location)
    module.body.append(top.operation)
    return module.operation


def _has_several_top_level_ops(error: ir.MLIRError) -> bool:
    return any("source must contain a single top-level operation" in d.message
               for d in error.error_diagnostics)


def _parse_in_implicit_module(text: str, source_name: str, context: ir.Context) -> ir.Operation:
    # The wrapper goes on the first line so that every later line keeps its
    # number; only columns of ops written on line 1 itself shift.
    wrapped = _IMPLICIT_MODULE + text + "\n}"
    try:
        return ir.Operation.parse(wrapped, source_name=source_name, context=context)
    except ir.MLIRError as error:
        raise from_mlir_error(error) from None


def parse_source(source, context: ir.Context) -> tuple[ir.Operation, str]:
    """The module of `source` (a kgc.Graph, a path to an `.mlir` file, or
    MLIR text) in `context`, and a file stem for what is written of it."""
    from kgc.graph import Graph

    if isinstance(source, Graph):
        return source.build(context), source.name
    if isinstance(source, pathlib.Path) or (isinstance(source, str) and "\n" not in source
                                            and source.endswith(".mlir")):
        return parse_file(source, context), pathlib.Path(source).stem
    if isinstance(source, str):
        return parse_text(source, "<string>", context), "graph"
    raise KgcError(f"cannot compile a {type(source).__name__}: give a kgc.Graph, MLIR text "
                   "or a path to an .mlir file")


def function_named(module: ir.Operation, function: str | None) -> str:
    """`function` when `module` defines it; with None, its only function."""
    names = [ir.StringAttr(op.attributes["sym_name"]).value
             for op in module.regions[0].blocks[0].operations if op.operation.name == "func.func"]
    if function is None:
        if len(names) != 1:
            raise KgcError(f"the module holds {len(names)} functions ({', '.join(names)}); name "
                           "the one to use")
        return names[0]
    if function not in names:
        raise KgcError(f"no function @{function} (have: {', '.join(names)})")
    return function


def canonical_source(source, function: str | None = None) -> tuple[str, str, str]:
    """(the canonical text of `source`'s module, without locations; the
    function to use; a file stem)."""
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module, stem = parse_source(source, context)
        return module.get_asm(enable_debug_info=False), function_named(module, function), stem
