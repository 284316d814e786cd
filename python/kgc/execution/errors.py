"""The error a tile program run on the CPU raises."""

from __future__ import annotations

from mlir import ir

from kgc.diagnostics import KgcError, error_at


class TileProgramError(KgcError):
    """A tile program did what a GPU would do silently wrong (an unmasked
    lane outside its buffer, an output element no program writes or two
    programs write, an i32 offset that wraps) or holds an op the CPU
    executor cannot run."""


class Fault(Exception):
    """Raised by one op of a program; the interpreter adds the op's
    location, the kernel and the program id to make a TileProgramError."""


def located(op: ir.Operation, message: str) -> TileProgramError:
    error = error_at(op, message)
    return TileProgramError(error.diagnostics)
