"""Pass pipelines mixing kgc's Python passes with upstream MLIR passes.

    p = Pipeline().add("kgc-cse").add("kgc-dce").add("canonicalize")
    p.nest("func.func").add("cse")
    str(p)  # 'builtin.module(kgc-cse,kgc-dce,canonicalize,func.func(cse))'
    Pipeline.parse(str(p))  # the same pipeline
    p.run(module)

kgc passes (and user passes registered with `kgc.passes.register_pass`)
become Python passes of one MLIR PassManager; any other name is handed to
MLIR's own pass registry, so every upstream pass works with its options.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from typing import Union

from mlir import ir
from mlir.passmanager import PassManager

from kgc.diagnostics import KgcError, from_mlir_error
from kgc.passes import OptionError, Pass, PassFailure, get_pass
from kgc.passes.registry import dynamic_extent_failure
from kgc.pipeline.instrumentation import IRPrinting, anchored_ops, upstream_display_name
from kgc.pipeline.textual import PassSpec, PipelineSpec, parse_pipeline
from kgc.tiling.planner import Planner

PassLike = Union[str, Pass, type]


class PipelineError(KgcError):
    """An unknown pass, a bad option or a malformed pipeline."""


class Pipeline:
    """An ordered list of passes and nested pipelines on one anchor op."""

    def __init__(self, anchor: str = "builtin.module"):
        self.anchor = anchor
        self.elements: list[Union[Pass, PassSpec, "Pipeline"]] = []

    # -- building -----------------------------------------------------------

    def add(self, item: PassLike, **options) -> "Pipeline":
        """Adds a pass: a kgc pass instance or class, or any pass by name
        (kgc or upstream) with options as keywords (`max_iterations=3`)."""
        if isinstance(item, Pass):
            if options:
                raise PipelineError("give options to the pass's constructor, not to add()")
            self.elements.append(item)
        elif isinstance(item, type) and issubclass(item, Pass):
            self.elements.append(_construct(item, options))
        elif isinstance(item, str):
            registered = get_pass(item)
            if registered is not None:
                self.elements.append(_construct(registered, options))
            else:
                rendered = {k.replace("_", "-"): _render(v) for k, v in options.items()}
                self.elements.append(PassSpec(item, rendered))
        else:
            raise PipelineError(f"cannot add {item!r} to a pipeline: expected a pass or a pass name")
        return self

    def nest(self, anchor: str) -> "Pipeline":
        """Adds and returns a pipeline that runs on each `anchor` op."""
        child = Pipeline(anchor)
        self.elements.append(child)
        return child

    def extend(self, other: "Pipeline") -> "Pipeline":
        self.elements.extend(other.elements)
        return self

    @classmethod
    def parse(cls, text: str) -> "Pipeline":
        """Parses MLIR's textual form; kgc pass options are checked here."""
        try:
            spec = parse_pipeline(text)
        except ValueError as error:
            raise PipelineError(f"invalid pass pipeline: {error}") from None
        return cls.from_spec(spec)

    @classmethod
    def from_spec(cls, spec: PipelineSpec) -> "Pipeline":
        pipeline = cls(spec.anchor)
        for element in spec.elements:
            if isinstance(element, PipelineSpec):
                pipeline.elements.append(cls.from_spec(element))
                continue
            registered = get_pass(element.name)
            if registered is None:
                pipeline.elements.append(element)
                continue
            try:
                pipeline.elements.append(registered.from_textual_options(element.options))
            except OptionError as error:
                raise PipelineError(str(error)) from None
        return pipeline

    def __str__(self) -> str:
        return f"{self.anchor}({','.join(_element_text(e) for e in self.elements)})"

    def __repr__(self) -> str:
        return f"Pipeline.parse({str(self)!r})"

    # -- running ------------------------------------------------------------

    def validate(self) -> None:
        """Raises PipelineError if a pass name or option is unknown, without
        running anything."""
        with ir.Context():
            self._pass_manager(None)

    def run(self, target: ir.Module | ir.Operation, *, ir_printing: IRPrinting | None = None,
            timing: bool = False, verify_each: bool = True, planner: Planner | None = None) -> None:
        """Runs the pipeline on `target` in place. Raises KgcError with MLIR
        diagnostics when a pass fails or leaves invalid IR. IR printing from
        `MLIR_ENABLE_DUMP` is added to `ir_printing`. The passes that plan
        kernels (kg-fuse, kg-tile) share `planner` (None: a new one for
        this run), so that each kernel is planned once; a caller that runs
        them in several pipelines passes one planner to every run."""
        planner = planner if planner is not None else Planner()
        planning = [e for _, e in self._steps(()) if isinstance(e, Pass) and e.plans_kernels]
        for element in planning:
            element.planner = planner
        try:
            self._run(target, ir_printing, timing, verify_each)
        finally:
            for element in planning:
                element.planner = None

    def _run(self, target: ir.Module | ir.Operation, ir_printing: IRPrinting | None,
             timing: bool, verify_each: bool) -> None:
        operation = target.operation
        environment = IRPrinting.from_environment()
        printing = ir_printing.merged(environment) if ir_printing else environment
        with operation.context:
            if any(isinstance(e, Pass) and e.creates_unregistered_ops for _, e in self._steps(())):
                operation.context.allow_unregistered_dialects = True
            manager = self._pass_manager(printing)
            manager.enable_verifier(verify_each)
            if timing:
                manager.enable_timing()
            try:
                manager.run(operation)
            except ir.MLIRError as error:
                raise from_mlir_error(error) from None
            finally:
                # MLIR prints the timing report when the manager is destroyed.
                # Only then is a full collection worth its cost (a quarter of a
                # second per run once torch is loaded).
                del manager
                if timing:
                    gc.collect()
                sys.stderr.flush()

    def _pass_manager(self, printing: IRPrinting | None) -> PassManager:
        manager = PassManager(self.anchor)
        for anchors, element in self._steps(()):
            if isinstance(element, Pass):
                argument, display = element.argument, element.display_name()
            else:
                argument = element.name
                display = upstream_display_name(str(element), anchors) if printing else argument
            if printing and printing.wants("Before", argument):
                _add_printer(manager, printing, "Before", display, argument, anchors)
            if isinstance(element, Pass):
                manager.add(_python_pass(element, anchors), name=display,
                            argument=argument, description=element.summary)
            else:
                text = str(element)
                for anchor in reversed(anchors):
                    text = f"{anchor}({text})"
                try:
                    manager.add(text)
                except ValueError:
                    raise PipelineError(_unknown_pass_message(element.name, text)) from None
            if printing and printing.wants("After", argument):
                _add_printer(manager, printing, "After", display, argument, anchors)
        return manager

    def _steps(self, anchors: tuple[str, ...]):
        """(nested anchors, pass) for every pass, in order."""
        for element in self.elements:
            if isinstance(element, Pipeline):
                yield from element._steps(anchors + (element.anchor,))
            else:
                yield anchors, element


def _construct(cls: type[Pass], options: dict) -> Pass:
    try:
        return cls(**options)
    except OptionError as error:
        raise PipelineError(str(error)) from None


def _render(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _element_text(element) -> str:
    if isinstance(element, Pass):
        return str(PassSpec(element.argument, element.textual_options()))
    return str(element)


def _unknown_pass_message(name: str, text: str) -> str:
    return (f"'{text}' is not a valid pass: '{name}' is neither a kgc pass "
            "(see kgc-opt --list-passes) nor an upstream MLIR pass with those options")


def _python_pass(instance: Pass, anchors: tuple[str, ...]):
    """The callback MLIR runs for a kgc pass: runs it on each anchored op and
    turns PassFailure, or an internal error, into an MLIR diagnostic."""

    def run(op: ir.Operation, handle) -> None:
        for target in anchored_ops(op, anchors) if anchors else [op]:
            try:
                # Types and attributes built by a pass need a default location.
                with target.location:
                    if instance.static_extents_only:
                        failure = dynamic_extent_failure(target, instance.argument)
                        if failure is not None:
                            raise failure
                    instance.run(target)
            except PassFailure as failure:
                (failure.location or target.location).emit_error(failure.message)
                handle.signal_pass_failure()
                return
            except KgcError as error:
                for diagnostic in error.diagnostics:
                    target.location.emit_error(diagnostic.message)
                handle.signal_pass_failure()
                return
            except Exception as error:  # a bug in the pass, reported as a diagnostic
                if os.environ.get("KGC_DEBUG"):
                    traceback.print_exc()
                target.location.emit_error(
                    f"internal error in pass '{instance.argument}': {type(error).__name__}: "
                    f"{error} (set KGC_DEBUG=1 for the traceback)")
                handle.signal_pass_failure()
                return

    return run


def _add_printer(manager: PassManager, printing: IRPrinting, when: str, display: str,
                 argument: str, anchors: tuple[str, ...]) -> None:
    def print_ir(op: ir.Operation, handle) -> None:
        printing.dump(op, when, display, argument, anchors)

    manager.add(print_ir, name="IRPrinter", argument="kgc-print-ir",
                description="prints the IR around a pass")
