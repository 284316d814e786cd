"""`kgc.compile`: from a graph (Python, text or file) to a callable."""

from __future__ import annotations

import pathlib

from mlir import ir

from kgc.diagnostics import KgcError


def compile(source, *, target: str | int = "sm_90", pipeline: str | None = None,
            function: str | None = None, output_dir: str | pathlib.Path | None = None,
            jobs: int = 1):
    """Compiles `source` for `target` and returns a `kgc.runtime.CompiledGraph`.

    `source` is a `kgc.Graph`, a path to an `.mlir` file, MLIR text, or a
    parsed `builtin.module` operation (which is compiled in place). With
    `output_dir`, every stage of every kernel and a manifest are written
    there (`kgc.runtime.load(output_dir)` runs it again without compiling).
    With `jobs` > 1, worker processes compile the kernels side by side.
    Compiling needs no GPU; calling the result does.
    """
    from kgc.graph import Graph
    from kgc.parsing import parse_file, parse_text
    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.stages import parse_target
    from kgc.runtime import CompiledGraph

    arch = parse_target(target)
    for name, value, kinds, expected in (
            ("pipeline", pipeline, (str,), "a textual pass pipeline"),
            ("function", function, (str,), "a function name"),
            ("output_dir", output_dir, (str, pathlib.PurePath), "a folder path")):
        if value is not None and not isinstance(value, kinds):
            raise KgcError(f"{name} {value!r} ({type(value).__name__}) is not {expected}")
    context = None
    if isinstance(source, ir.Operation) or hasattr(source, "operation"):
        module = source.operation
        stem = "graph"
    else:
        context = ir.Context()
        context.allow_unregistered_dialects = True
        if isinstance(source, Graph):
            module = source.build(context)
            stem = source.name
        elif isinstance(source, pathlib.Path) or (isinstance(source, str) and "\n" not in source
                                                  and source.endswith(".mlir")):
            module = parse_file(source, context)
            stem = pathlib.Path(source).stem
        elif isinstance(source, str):
            module = parse_text(source, "<string>", context)
            stem = "graph"
        else:
            raise KgcError(f"cannot compile a {type(source).__name__}: give a kgc.Graph, MLIR text "
                           "or a path to an .mlir file")
    with module.context:
        compiled = compile_module(module, target=arch, pipeline=pipeline, jobs=jobs,
                                  ttir_dir=pathlib.Path(output_dir) / "kernels" if output_dir else None)
        if isinstance(source, Graph) and source.name in compiled.functions:
            compiled.functions[source.name].argument_names = [t.name for t in source.inputs]
        if output_dir is not None:
            compiled.write(output_dir, stem)
    graph = CompiledGraph(compiled, function)
    graph._context = context  # keeps the IR's context alive with the result
    return graph
