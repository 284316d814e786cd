"""Graphs compiled to the kg stage and run on the CPU executor against the
reference, for tests."""

from __future__ import annotations

from mlir import ir


def compiled_to_kg(text: str, name: str):
    """`text` as written (for the reference) and compiled to the kg stage
    (tiled, padded, masked), in one context."""
    from kgc.parsing import parse_text
    from kgc.pipeline.compiler import compile_module

    context = ir.Context()
    source = parse_text(text, name, context)
    tiled = parse_text(text, name, context)
    with context:
        compile_module(tiled, emit="kg")
    return source, tiled


def run_as_the_reference(source, tiled, function: str, inputs: list):
    """`function` of the tiled module on the CPU executor, checked to be as
    accurate as the reference's f16/f32 evaluation against its exact one;
    (its results, the reference's)."""
    from kgc import reference
    from kgc.execution import run_tiled
    from tests.comparison import assert_as_accurate_as_eager

    with source.context:
        got = run_tiled(tiled, function, *inputs)
        eager = reference.evaluate(source, function, inputs)
        exact = reference.evaluate(source, function, inputs, exact=True)
    assert_as_accurate_as_eager(got, eager, exact)
    return got, eager
