"""MLIR's textual pass-pipeline form: parsing and printing.

    pipeline ::= anchor `(` element (`,` element)* `)`
    element  ::= pipeline | pass-name options?
    options  ::= `{` (key (`=` value)?)* `}`      (separated by spaces)

`builtin.module(kgc-cse,func.func(canonicalize{max-iterations=3}))` parses
to a `PipelineSpec` whose `str()` prints it back. A bare element list
(`kgc-cse,kgc-dce`) is anchored on `builtin.module`.
"""

from __future__ import annotations

import dataclasses
import re

_NAME = re.compile(r"[A-Za-z0-9_.\-]+")

# Anchors nest a few levels in practice (builtin.module(func.func(...)));
# the parser, the printer and Pipeline recurse once per level in Python.
MAX_PIPELINE_NESTING = 64


class PipelineSyntaxError(ValueError):
    """A textual pipeline that does not parse; `column` is 1-based."""

    def __init__(self, text: str, column: int, message: str):
        shown = text if len(text) <= 200 else text[:200] + "..."
        super().__init__(f"{message} at column {column} of '{shown}'")
        self.text, self.column, self.message = text, column, message


@dataclasses.dataclass
class PassSpec:
    """One pass by name, with its options as text."""

    name: str
    options: dict[str, str] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        if not self.options:
            return self.name
        rendered = " ".join(
            key if value is None else f"{key}={_quote(value)}" for key, value in self.options.items()
        )
        return f"{self.name}{{{rendered}}}"


@dataclasses.dataclass
class PipelineSpec:
    """Passes anchored on one op name; elements may nest further anchors."""

    anchor: str
    elements: list["PassSpec | PipelineSpec"] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.anchor}({','.join(str(e) for e in self.elements)})"


def _quote(value: str) -> str:
    if value == "" or any(c in value for c in " {}"):
        if "{" in value or "}" in value:
            return "{" + value + "}"
        return '"' + value + '"'
    return value


def parse_pipeline(text: str, default_anchor: str = "builtin.module") -> PipelineSpec:
    """Parses `text`; raises PipelineSyntaxError with the column at fault."""
    parser = _Parser(text)
    parser.skip_space()
    start = parser.pos
    name = parser.name()
    parser.skip_space()
    if parser.peek() == "(" and parser.remaining_after_group_is_empty():
        spec = parser.nested(name)
    else:
        parser.pos = start
        spec = PipelineSpec(default_anchor, parser.elements(terminator=None))
    parser.skip_space()
    if not parser.at_end():
        parser.fail("unexpected text after the pipeline")
    return spec


class _Parser:
    def __init__(self, text: str):
        self.text, self.pos = text, 0
        self.depth = 0

    def fail(self, message: str):
        raise PipelineSyntaxError(self.text, self.pos + 1, message)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> None:
        while self.peek().isspace():
            self.pos += 1

    def expect(self, char: str) -> None:
        self.skip_space()
        if self.peek() != char:
            self.fail(f"expected '{char}'")
        self.pos += 1

    def name(self) -> str:
        match = _NAME.match(self.text, self.pos)
        if not match:
            self.fail("expected a pass or op name")
        self.pos = match.end()
        return match.group()

    def remaining_after_group_is_empty(self) -> bool:
        """True when the `(` here closes at the very end of the text, i.e. the
        whole pipeline is one anchored group."""
        depth, index = 0, self.pos
        while index < len(self.text):
            char = self.text[index]
            if char in "({":
                depth += 1
            elif char in ")}":
                depth -= 1
                if depth == 0:
                    return self.text[index + 1 :].strip() == ""
            index += 1
        return False

    def nested(self, anchor: str) -> PipelineSpec:
        self.expect("(")
        self.depth += 1
        if self.depth > MAX_PIPELINE_NESTING:
            self.pos -= 1
            self.fail(f"pipeline nested too deep (more than {MAX_PIPELINE_NESTING} levels)")
        spec = PipelineSpec(anchor, self.elements(terminator=")"))
        self.expect(")")
        self.depth -= 1
        return spec

    def elements(self, terminator: str | None) -> list:
        out: list = []
        self.skip_space()
        if self.peek() == terminator:
            return out
        while True:
            self.skip_space()
            name = self.name()
            self.skip_space()
            if self.peek() == "(":
                out.append(self.nested(name))
            elif self.peek() == "{":
                out.append(PassSpec(name, self.options()))
            else:
                out.append(PassSpec(name))
            self.skip_space()
            if self.peek() == ",":
                self.pos += 1
                continue
            if self.peek() == (terminator or ""):
                return out
            self.fail("expected ',' or the end of the pipeline")

    def options(self) -> dict[str, str]:
        self.expect("{")
        options: dict[str, str] = {}
        while True:
            self.skip_space()
            if self.peek() == "}":
                self.pos += 1
                return options
            if self.at_end():
                self.fail("unterminated options, expected '}'")
            key = self.name()
            if self.peek() == "=":
                self.pos += 1
                options[key] = self.value()
            else:
                options[key] = "true"

    def value(self) -> str:
        char = self.peek()
        if char in "\"'":
            end = self.text.find(char, self.pos + 1)
            if end < 0:
                self.fail("unterminated quoted value")
            value = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return value
        if char == "{":
            depth, start = 0, self.pos
            while not self.at_end():
                if self.peek() == "{":
                    depth += 1
                elif self.peek() == "}":
                    depth -= 1
                    if depth == 0:
                        self.pos += 1
                        return self.text[start + 1 : self.pos - 1]
                self.pos += 1
            self.fail("unterminated '{' in an option value")
        start = self.pos
        while not self.at_end() and not self.peek().isspace() and self.peek() != "}":
            self.pos += 1
        return self.text[start : self.pos]
