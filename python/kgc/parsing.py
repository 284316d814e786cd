"""Reading `.mlir` text into a module, with file:line:col locations.

As with mlir-opt, a file whose single top-level op is a `builtin.module` is
that module; any other top-level ops are wrapped in an implicit module.
"""

from __future__ import annotations

import pathlib

from mlir import ir

from kgc.diagnostics import KgcError, from_mlir_error

_IMPLICIT_MODULE = "module {"


def parse_file(path: str | pathlib.Path, context: ir.Context) -> ir.Operation:
    """Parses the file at `path`; locations name the path as given."""
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise KgcError(f"cannot read '{path}': {error.strerror}") from None
    except UnicodeDecodeError:
        raise KgcError(f"'{path}' is not UTF-8 text") from None
    return parse_text(text, str(path), context)


def parse_text(text: str, source_name: str, context: ir.Context) -> ir.Operation:
    """Parses `text` into a `builtin.module` op, reporting locations as
    `source_name:line:col`."""
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
