"""`--verify-diagnostics`: match diagnostics against expected-* comments.

As in mlir-opt, a comment `// expected-error {{text}}` expects an error on
its own line whose message contains `text`; `@+N`, `@-N`, `@above` and
`@below` move the expected line. warning, remark and note work the same way.
Every expectation must be met and every diagnostic expected; notes are
checked only when the input expects some.
"""

from __future__ import annotations

import dataclasses
import re

from kgc.diagnostics import Diagnostic

_EXPECTATION = re.compile(
    r"expected-(error|warning|remark|note)\s*(?:@(above|below|[+-]?\d+))?\s*\{\{(.*?)\}\}"
)


@dataclasses.dataclass
class Expectation:
    severity: str
    line: int
    text: str
    comment_line: int
    met: bool = False


def parse_expectations(text: str) -> list[Expectation]:
    lines = text.split("\n")
    found = []
    for index, line in enumerate(lines):
        for match in _EXPECTATION.finditer(line):
            severity, where, message = match.groups()
            number = index + 1
            if where is None:
                target = number
            elif where == "above":
                target = _neighbour(lines, index, -1)
            elif where == "below":
                target = _neighbour(lines, index, +1)
            else:
                target = number + int(where)
            found.append(Expectation(severity, target, message, number))
    return found


def _neighbour(lines: list[str], index: int, step: int) -> int:
    """The nearest line in direction `step` that is not only an expectation."""
    index += step
    while 0 <= index < len(lines) and _EXPECTATION.search(lines[index]) and \
            lines[index].strip().startswith("//"):
        index += step
    return index + 1


def verify(expectations: list[Expectation], diagnostics: list[Diagnostic],
           source_name: str) -> list[Diagnostic]:
    """The mismatches, as error diagnostics (empty when all is as expected)."""
    check_notes = any(e.severity == "note" for e in expectations)
    problems: list[Diagnostic] = []
    for diagnostic in _flatten(diagnostics, check_notes):
        match = next(
            (e for e in expectations
             if not e.met and e.severity == diagnostic.severity and e.line == diagnostic.line
             and e.text in diagnostic.message),
            None,
        )
        if match is None:
            problems.append(Diagnostic(
                "error", diagnostic.location or source_name,
                f"unexpected {diagnostic.severity}: {diagnostic.message}"))
        else:
            match.met = True
    for expectation in expectations:
        if not expectation.met:
            problems.append(Diagnostic(
                "error", f"{source_name}:{expectation.comment_line}:1",
                f'expected {expectation.severity} "{expectation.text}" was not produced '
                f"(on line {expectation.line})"))
    return problems


def _flatten(diagnostics: list[Diagnostic], with_notes: bool):
    for diagnostic in diagnostics:
        yield diagnostic
        if with_notes:
            yield from _flatten(diagnostic.notes, with_notes)
