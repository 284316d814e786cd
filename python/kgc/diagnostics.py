"""Diagnostics in MLIR's `file:line:col: error: message` form.

Every error kgc reports, from the parser, a verifier, a pass or Triton,
becomes a `KgcError` holding `Diagnostic`s; the command-line tools print
them and exit non-zero instead of showing a Python traceback.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from mlir import ir


@dataclasses.dataclass
class Diagnostic:
    severity: str  # "error", "warning", "note" or "remark"
    location: str  # "file:line:col", or "" when unknown
    message: str
    notes: list["Diagnostic"] = dataclasses.field(default_factory=list)
    line: int | None = None  # where the location is a file location
    filename: str | None = None

    def __str__(self) -> str:
        head = f"{self.location}: " if self.location else ""
        lines = [f"{head}{self.severity}: {self.message}"]
        lines += [str(note) for note in self.notes]
        return "\n".join(lines)


class KgcError(Exception):
    """A failure with one or more diagnostics to show the user."""

    def __init__(self, diagnostics: Iterable[Diagnostic] | str):
        if isinstance(diagnostics, str):
            diagnostics = [Diagnostic("error", "", diagnostics)]
        self.diagnostics = list(diagnostics)
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(str(d) for d in self.diagnostics)


def file_location(location: ir.Location) -> ir.Location | None:
    """The first file:line:col location inside `location`, if any."""
    if location.is_a_file():
        return location
    if location.is_a_callsite():
        return file_location(location.callee) or file_location(location.caller)
    if location.is_a_name():
        return file_location(location.child_loc)
    if location.is_a_fused():
        for inner in location.locations:
            found = file_location(inner)
            if found is not None:
                return found
    return None


def format_location(location: ir.Location) -> str:
    found = file_location(location)
    if found is None:
        return ""
    return f"{found.filename}:{found.start_line}:{found.start_col}"


_SEVERITIES = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}


def from_mlir(diagnostic) -> Diagnostic:
    """Converts an `ir.Diagnostic` or `ir.DiagnosticInfo`."""
    found = file_location(diagnostic.location)
    return Diagnostic(
        severity=_SEVERITIES[diagnostic.severity],
        location=format_location(diagnostic.location),
        message=diagnostic.message,
        notes=[from_mlir(note) for note in diagnostic.notes],
        line=found.start_line if found is not None else None,
        filename=found.filename if found is not None else None,
    )


def from_mlir_error(error: ir.MLIRError) -> KgcError:
    diagnostics = [from_mlir(d) for d in error.error_diagnostics]
    if not diagnostics:
        diagnostics = [Diagnostic("error", "", str(error))]
    return KgcError(diagnostics)


def error_at(operation: ir.Operation | ir.OpView, message: str) -> KgcError:
    """A KgcError located at `operation`, for errors found outside MLIR."""
    location = operation.location
    found = file_location(location)
    return KgcError(
        [
            Diagnostic(
                "error",
                format_location(location),
                message,
                line=found.start_line if found is not None else None,
                filename=found.filename if found is not None else None,
            )
        ]
    )
