"""Compiling a kernel graph: kgc's passes, then Triton, stage by stage.

`compile_module` takes a parsed module, runs the pass pipeline (by default
`stages.default_pipeline_text`), and hands each kernel's TTIR to the Triton
stage, which returns an `Artifact` per kernel (in worker processes with
`jobs` > 1). The result describes every kernel (its code at each stage, its
launch configuration, its artifact) and, for every function of the graph,
the launches that compute it: enough to write the stages to disk (`write`)
and to run the graph (`kgc.runtime`).

`write` lays a compiled module out as

    <stem>.kg.mlir, <stem>.ttir.mlir    the whole module at both kgc stages
    kernels/<kernel>.<stage>            each kernel's ttir, ttgir, llir, ptx, cubin
    kernels/<kernel>.json               its artifact record (Artifact.save)
                                        (a library kernel, a call of the GPU's
                                        BLAS, has neither: its manifest entry
                                        holds its "library" call)
    manifest.json                       kernels, functions, launches,
                                        each function's memory plan and
                                        the files written

and removes first what an earlier `write` left in the folder (the files its
manifest lists), so that a folder holds one compile's output.
`load_module` reads back what running needs (the manifest and the
artifacts), without compiling anything.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import pathlib

from typing import TYPE_CHECKING

from mlir import ir

from kgc.diagnostics import KgcError, error_at
from kgc.pipeline.artifact import Artifact, KernelOptions
from kgc.pipeline.memory_plan import MemoryPlan, plan_memory
from kgc.pipeline.pipeline import Pipeline
from kgc.pipeline.resources import check_resources
from kgc.pipeline.stages import (STAGES, default_pipeline_text, pipeline_for_target,
                                  split_at_lowering)
from kgc.tiling.dynamic import DYNAMIC_GRID_ATTRIBUTE, grid_at, has_dynamic_extent
from kgc.tiling.kernel_ops import ops_named, walk_ops
from kgc.tiling.library import LibraryCall, library_call_of
from kgc.tiling.planner import Planner

if TYPE_CHECKING:
    from kgc.pipeline.config import GraphConfig


@dataclasses.dataclass
class TensorSpec:
    # None: the function's dynamic extent (`?`), a size each call gives.
    shape: tuple[int | None, ...]
    dtype: str  # "f32", "f16", "bf16", "f8E4M3FN" or "f8E5M2"

    @classmethod
    def of(cls, type_: ir.Type) -> "TensorSpec":
        tensor = ir.RankedTensorType(type_)
        return cls(tuple(None if ir.ShapedType.is_dynamic_size(d) else d for d in tensor.shape),
                   str(tensor.element_type))

    @property
    def is_dynamic(self) -> bool:
        return None in self.shape

    def at(self, extent: int | None) -> "TensorSpec":
        """This spec with its dynamic extent at `extent`."""
        if not self.is_dynamic:
            return self
        return TensorSpec(tuple(extent if d is None else d for d in self.shape), self.dtype)


@dataclasses.dataclass
class Kernel:
    name: str
    grid: tuple[int, int, int]
    num_warps: int
    num_stages: int
    arguments: list[TensorSpec]  # inputs, then outputs
    num_inputs: int
    asm: dict = dataclasses.field(default_factory=dict)  # stage -> text or bytes
    shared: int | None = None
    artifact: Artifact | None = None  # what Triton compiled, for launching
    # i32 arguments passed after the pointers, in order (kg.launch's scalars)
    scalars: tuple[int, ...] = ()
    # A library kernel's call (kgc.tiling.library): no Triton code and no
    # artifact; the runtime calls the GPU's BLAS. None: a Triton kernel.
    library: LibraryCall | None = None
    # A kernel over the dynamic extent: [tile, programs per tile] (kg.launch's
    # dynamic_grid). Its grid along x is ceil(size / tile) * programs ([0, 0]:
    # its programs loop over the extent, and its grid is `grid`), and the
    # size is its last i32 argument, after `scalars`. None: static.
    dynamic_grid: tuple[int, int] | None = None

    @property
    def options(self) -> KernelOptions:
        return KernelOptions(self.grid, self.num_warps, self.num_stages)

    def grid_at(self, extent: int | None) -> tuple[int, int, int]:
        """The grid of a launch where the dynamic extent is `extent`."""
        if self.dynamic_grid is None:
            return self.grid
        return grid_at(self.grid, self.dynamic_grid, extent)

    def scalars_at(self, scalars, extent: int | None) -> tuple[int, ...]:
        """The i32 arguments of a launch with `scalars` at `extent`."""
        return tuple(scalars) + (() if self.dynamic_grid is None else (extent,))


@dataclasses.dataclass
class Launch:
    kernel: str
    inputs: list[int]  # buffer numbers
    outputs: list[int]
    scalars: list[int] = dataclasses.field(default_factory=list)  # i32s after the pointers


@dataclasses.dataclass
class Function:
    name: str
    buffers: list[TensorSpec]  # the function's arguments first, in order
    num_arguments: int
    launches: list[Launch]
    results: list[int]
    argument_names: list[str] | None = None  # where the source names them (kgc.Graph)
    # Where the intermediates live in the function's workspace (memory_plan);
    # None for a dynamic function, whose plan depends on the size (`at`).
    memory: MemoryPlan | None = None
    # The size of the dynamic extent this function was made `at`; None for
    # a function as compiled.
    extent: int | None = None

    def __post_init__(self):
        if self.memory is None and not self.is_dynamic:
            self.memory = plan_memory(self)

    @property
    def is_dynamic(self) -> bool:
        """Whether a buffer has the dynamic extent (`?`)."""
        return any(b.is_dynamic for b in self.buffers)

    def extent_source(self) -> tuple[int, int] | None:
        """(argument, dimension) of the first `?` among the arguments: where
        a call's size is read. None for a static function."""
        for index, spec in enumerate(self.buffers[:self.num_arguments]):
            if None in spec.shape:
                return index, spec.shape.index(None)
        return None

    def at(self, extent: int) -> "Function":
        """This function at one size of its dynamic extent: every buffer
        static, its intermediates planned at that size. Its launches are the
        same; the kernels' grids and size arguments come from
        `Kernel.grid_at` and `Kernel.scalars_at` with `extent`."""
        return Function(self.name, [b.at(extent) for b in self.buffers], self.num_arguments,
                        self.launches, self.results, self.argument_names, extent=extent)


# 2: each function carries its memory plan. 3: shapes may hold null (the
# dynamic extent), whose functions have no memory plan ("memory": null),
# and kernels over it carry "dynamic_grid" (format 2 is read too: it is the
# static case).
MANIFEST_FORMAT = "kgc-manifest-3"
_READABLE_FORMATS = ("kgc-manifest-2", MANIFEST_FORMAT)


@dataclasses.dataclass
class CompiledModule:
    target: int
    stages: dict  # "kg" / "ttir" -> text of the whole module
    kernels: dict[str, Kernel]
    functions: dict[str, Function]
    emitted: str  # the last stage produced

    def manifest(self) -> dict:
        return {
            "format": MANIFEST_FORMAT,
            "target": f"sm_{self.target}",
            "stages": list(STAGES[:STAGES.index(self.emitted) + 1]),
            "kernels": [_kernel_entry(k) for k in self.kernels.values()],
            "functions": [
                {"name": f.name,
                 "arguments": [_argument_entry(b, f.argument_names, i)
                               for i, b in enumerate(f.buffers[:f.num_arguments])],
                 "results": f.results,
                 "buffers": [{"shape": list(b.shape), "dtype": b.dtype} for b in f.buffers],
                 "launches": [dataclasses.asdict(launch) for launch in f.launches],
                 "memory": None if f.memory is None else f.memory.to_json()}
                for f in self.functions.values()],
        }

    def write(self, directory: str | pathlib.Path, stem: str) -> list[pathlib.Path]:
        """Writes every stage of the module and of every kernel, the kernels'
        artifact records and manifest.json (the layout in the module's
        docstring); KgcError naming the file where one cannot be written.
        Kernels that are one artifact share their files. What an earlier
        write left in `directory` (the files its manifest lists) is removed
        first, so no kernel of another compile stays beside these."""
        try:
            remove_earlier_output(directory)
            return self._write(directory, stem)
        except OSError as error:
            raise KgcError(f"cannot write '{error.filename}': {error.strerror}") from None

    def _write(self, directory: str | pathlib.Path, stem: str) -> list[pathlib.Path]:
        root = pathlib.Path(directory)
        kernels_dir = make_output_folder(root / "kernels")
        written = []
        for stage, text in self.stages.items():
            path = root / f"{stem}.{stage}.mlir"
            path.write_text(text)
            written.append(path)
        saved = set()
        # Kernels Triton has not compiled (--emit ttir) hold kgc's TTIR,
        # Triton's ops in the generic form: written as Triton prints them.
        uncompiled = [k for k in self.kernels.values() if k.artifact is None and "ttir" in k.asm]
        if uncompiled:
            from kgc.pipeline.triton_stage import custom_forms

            printed = dict(zip((k.name for k in uncompiled),
                               custom_forms([k.asm["ttir"] for k in uncompiled], self.target)))
        for kernel in self.kernels.values():
            if kernel.artifact is not None:
                if kernel.artifact.name not in saved:
                    saved.add(kernel.artifact.name)
                    record = kernel.artifact.save(kernels_dir, stages=kernel.asm)
                    written += [kernels_dir / f"{kernel.artifact.name}.{stage}"
                                for stage in kernel.asm] + [record]
                continue
            for stage, content in kernel.asm.items():
                if stage == "ttir":
                    content = printed[kernel.name]
                path = kernels_dir / f"{kernel.name}.{stage}"
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content)
                written.append(path)
        manifest = root / "manifest.json"
        # The files themselves, for the next write into this folder to remove.
        listed = dict(self.manifest(), files=[path.relative_to(root).as_posix()
                                              for path in written])
        manifest.write_text(json.dumps(listed, indent=2) + "\n")
        written.append(manifest)
        return written


def remove_earlier_output(directory: str | pathlib.Path) -> list[pathlib.Path]:
    """Removes from `directory` what an earlier `CompiledModule.write` put
    there: the files its manifest.json lists (for a manifest older than the
    list, its kernels' stage files and records) and the manifest itself.
    Nothing else is touched: not a file the manifest does not name, not one
    outside the folder, not a folder that holds no kgc manifest. Returns
    the files removed."""
    root = pathlib.Path(directory)
    path = root / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(manifest, dict) or not str(manifest.get("format", "")).startswith(
            "kgc-manifest-"):
        return []
    names = manifest.get("files")
    if not isinstance(names, list):
        names = []
        for kernel in manifest.get("kernels") or []:
            if not isinstance(kernel, dict):
                continue
            artifact = pathlib.PurePosixPath(str(kernel.get("artifact", ""))).stem
            for name in {str(kernel.get("name", "")), artifact} - {""}:
                names += [f"kernels/{name}.{suffix}" for suffix in (*STAGES[1:], "json")]
    inside = root.resolve()
    removed = []
    for name in [*names, "manifest.json"]:
        candidate = root / str(name)
        try:
            candidate.resolve().relative_to(inside)
        except ValueError:
            continue  # a listed path outside the folder is not the compile's
        if candidate.is_file() or candidate.is_symlink():
            candidate.unlink()
            removed.append(candidate)
    return removed


def make_output_folder(path: str | pathlib.Path) -> pathlib.Path:
    """Creates the folder `path` (and its parents) unless it exists;
    KgcError naming it where it cannot be."""
    path = pathlib.Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise KgcError(f"cannot write to '{path}': it exists and is not a folder") from None
    except OSError as error:
        blocker = path
        while blocker.parent != blocker and not blocker.parent.exists():
            blocker = blocker.parent
        if error.errno == errno.ENOTDIR or (blocker.parent.exists() and not blocker.parent.is_dir()):
            raise KgcError(f"cannot create the folder '{path}': '{blocker.parent}' is not a "
                           "folder") from None
        raise KgcError(f"cannot create the folder '{path}': {error.strerror}") from None
    return path


def _kernel_entry(kernel: Kernel) -> dict:
    entry = {"name": kernel.name, "grid": list(kernel.grid), "num_warps": kernel.num_warps,
             "num_stages": kernel.num_stages, "shared_memory_bytes": kernel.shared,
             "arguments": [
                 {"role": "input" if i < kernel.num_inputs else "output",
                  "shape": list(a.shape), "dtype": a.dtype}
                 for i, a in enumerate(kernel.arguments)]}
    if kernel.library is not None:
        entry["library"] = kernel.library.to_json()
    if kernel.scalars:
        entry["scalars"] = list(kernel.scalars)
    if kernel.dynamic_grid is not None:
        entry["dynamic_grid"] = list(kernel.dynamic_grid)
    if kernel.artifact is not None:
        entry["artifact"] = f"kernels/{kernel.artifact.name}.json"
        entry["hash"] = kernel.artifact.hash
        entry.update(kernel.artifact.resources)
    return entry


def _argument_entry(spec: TensorSpec, names: list[str] | None, index: int) -> dict:
    entry = {"shape": list(spec.shape), "dtype": spec.dtype}
    if names is not None:
        entry["name"] = names[index]
    return entry


def load_module(directory: str | pathlib.Path) -> CompiledModule:
    """Reads what `CompiledModule.write` wrote, down to cubin, back into a
    CompiledModule that can run: manifest.json and the artifacts it names.
    Nothing is compiled. Raises KgcError naming a missing, malformed or
    altered file."""
    root = pathlib.Path(directory)
    path = root / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except OSError as error:
        raise KgcError(f"cannot read '{path}': {error.strerror}") from None
    except ValueError as error:
        raise KgcError(f"'{path}' is not valid JSON (truncated or altered?): {error}") from None
    try:
        if manifest.get("format") not in _READABLE_FORMATS:
            raise KgcError(f"'{path}' is not a kgc manifest of format {MANIFEST_FORMAT} "
                           f"(found {manifest.get('format')!r}); compile it again")
        target = int(manifest["target"].removeprefix("sm_"))
        emitted = manifest["stages"][-1]
        if emitted == "kg":
            raise KgcError(f"'{path}' is of a compile that stopped at the kg stage (--emit kg), "
                           "before there are kernels: compile down to cubin to run it")
        kernels = {}
        for entry in manifest["kernels"]:
            kernels[entry["name"]] = _loaded_kernel(root, entry, target)
        functions = {}
        for entry in manifest["functions"]:
            arguments = entry["arguments"]
            names = [a["name"] for a in arguments] if all("name" in a for a in arguments) else None
            memory = entry["memory"]
            function = Function(
                entry["name"], [TensorSpec(tuple(b["shape"]), b["dtype"]) for b in entry["buffers"]],
                len(arguments), [Launch(**launch) for launch in entry["launches"]],
                list(entry["results"]), names,
                None if memory is None else MemoryPlan.from_json(memory))
            try:
                if function.is_dynamic != (memory is None):
                    raise KgcError(f"@{function.name} has "
                                   f"{'a dynamic extent and a' if memory else 'no dynamic extent and no'}"
                                   " memory plan")
                if function.memory is not None:
                    function.memory.check(function)
            except KgcError as error:
                raise KgcError(f"'{path}': {error}") from None
            functions[entry["name"]] = function
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise KgcError(f"'{path}' lacks or garbles {error}") from None
    return CompiledModule(target, {}, kernels, functions, emitted)


def _loaded_kernel(root: pathlib.Path, entry: dict, target: int) -> Kernel:
    arguments = [TensorSpec(tuple(a["shape"]), a["dtype"]) for a in entry["arguments"]]
    num_inputs = sum(a["role"] == "input" for a in entry["arguments"])
    dynamic_grid = entry.get("dynamic_grid")
    kernel = Kernel(entry["name"], tuple(entry["grid"]), entry["num_warps"], entry["num_stages"],
                    arguments, num_inputs, shared=entry["shared_memory_bytes"],
                    scalars=tuple(entry.get("scalars", ())),
                    dynamic_grid=None if dynamic_grid is None else tuple(dynamic_grid))
    if "library" in entry:
        kernel.library = LibraryCall.from_json(entry["library"])
    if "artifact" not in entry:
        return kernel
    artifact = Artifact.load(root / entry["artifact"])
    if artifact.hash != entry["hash"] or artifact.options != kernel.options \
            or artifact.target != target or len(artifact.signature) != \
            len(arguments) + len(kernel.scalars) + (kernel.dynamic_grid is not None):
        raise KgcError(f"kernel @{kernel.name}: the artifact '{root / entry['artifact']}' is not "
                       "the one manifest.json describes (another compile's files?)")
    kernel.artifact = artifact
    kernel.asm = dict(artifact.asm)
    return kernel


def compile_module(module: ir.Operation, *, target: int = 90, pipeline: str | None = None,
                   emit: str = "cubin", ttir_dir: str | pathlib.Path | None = None,
                   jobs: int = 1, config: "GraphConfig | None" = None,
                   cache=None) -> CompiledModule:
    """Compiles `module` (a builtin.module of kernel graphs) down to `emit`.
    With `jobs` > 1, up to that many worker processes run Triton on the
    kernels side by side. A kernel Triton fails on keeps its TTIR in
    `ttir_dir` (else in a temporary file), named in the error. `config` (a
    GraphConfig: a partition and kernel knobs) cuts the graph and sets the
    knobs before the rest of kgc's pipeline; it excludes `pipeline`. `cache`
    picks the kernel cache (`kernel_cache.KernelCache.resolve`: by default
    the one `KGC_CACHE_URL` or `KGC_KERNEL_CACHE=1` asks for); a default
    compile (no pipeline, no config, down to cubin) with a cache is first
    looked up whole in the graph cache beside it (`graph_cache`) and stored
    there. Raises KgcError with diagnostics on failure."""
    if emit not in STAGES:
        raise KgcError(f"unknown stage '{emit}': choose one of {', '.join(STAGES)}")
    if jobs < 1:
        raise KgcError(f"jobs must be at least 1, got {jobs}")
    _check_target(module, target)
    _check_signatures(module)
    graphs, graph_key = None, None
    if pipeline is None and config is None and emit == "cubin":
        # A default compile answered before is loaded whole: no passes, no
        # Triton (`graph_cache`).
        from kgc.pipeline.graph_cache import GraphCache, graph_key as key_of
        from kgc.pipeline.kernel_cache import KernelCache

        graphs = GraphCache.beside(KernelCache.resolve(cache))
        if graphs is not None:
            graph_key = key_of(module.get_asm(enable_debug_info=True), target)
            cached = graphs.load(graph_key, load_module)
            if cached is not None:
                return cached
    # kg-fuse and kg-tile plan each kernel once between them, though a
    # config runs them in two pipelines.
    planner = Planner()
    if config is not None:
        if pipeline is not None:
            raise KgcError("give a config or a pipeline, not both: a config sets the choices of "
                           "kgc's own pipeline")
        pipeline = config.apply(module, target, planner)
    full = Pipeline.parse(pipeline_for_target(pipeline, target) if pipeline
                          else default_pipeline_text(target))
    to_kg, to_ttir = split_at_lowering(full)
    to_kg.run(module, planner=planner)
    stages = {"kg": module.get_asm()}
    if emit == "kg":
        return CompiledModule(target, stages, {}, {}, "kg")
    to_ttir.run(module)
    stages["ttir"] = module.get_asm()
    kernels = _kernels(module)
    functions = _functions(module, kernels)
    compiled = CompiledModule(target, stages, kernels, functions, emit)
    if emit == "ttir":
        return compiled
    if ttir_dir is not None:
        make_output_folder(ttir_dir)
    from kgc.pipeline.triton_stage import compile_kernels

    # Library kernels are calls: Triton compiles only the others.
    generated = [k for k in kernels.values() if k.library is None]
    artifacts = compile_kernels([(k.asm["ttir"], k.options) for k in generated], target,
                                jobs=jobs, keep_failed_in=ttir_dir, cache=cache)
    kept = STAGES[1:STAGES.index(emit) + 1]
    for kernel, artifact in zip(generated, artifacts):
        kernel.artifact = artifact
        kernel.asm = {stage: artifact.asm[stage] for stage in kept}
        kernel.shared = artifact.shared
    # A kernel over the target's shared memory or registers compiles, and
    # would fail only when launched.
    check_resources(kernels.values(), target, stages["kg"])
    if graphs is not None:
        graphs.store(graph_key, compiled)
    return compiled


# Element types that Triton converts only on newer GPUs: type -> first SM.
_NEEDS_SM = {"f8E4M3FN": 89}


def _check_signatures(module: ir.Operation) -> None:
    """Rejects, before any work, a graph function that takes or returns
    something other than a tensor: the runtime passes tensors only."""
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        function_type = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        for kind, types in (("argument", function_type.inputs), ("result", function_type.results)):
            for index, type_ in enumerate(types):
                if not isinstance(type_, ir.RankedTensorType):
                    raise error_at(op, f"func @{name}: {kind} #{index} has type {type_}; "
                                       "kgc functions take and return ranked tensors")


def _check_target(module: ir.Operation, target: int) -> None:
    """Rejects, before any work, tensors the target's Triton cannot convert."""
    for op in walk_ops(module):
        for value in list(op.operands) + list(op.results):
            if isinstance(value.type, ir.RankedTensorType):
                element = str(value.type.element_type)
                if _NEEDS_SM.get(element, 0) > target:
                    raise error_at(op, f"{op.name} uses {element}, which Triton supports on "
                                       f"sm_{_NEEDS_SM[element]} and newer; the target is sm_{target}")


def _kernels(module: ir.Operation) -> dict[str, Kernel]:
    """The kernel modules beside the graph functions, with the launch
    settings their kg.launch ops carry."""
    body = module.regions[0].blocks[0]
    texts = {}
    for op in body.operations:
        op = op.operation
        if op.name == "builtin.module" and "sym_name" in op.attributes:
            texts[ir.StringAttr(op.attributes["sym_name"]).value] = op.get_asm(
                enable_debug_info=False, assume_verified=True)
    kernels: dict[str, Kernel] = {}
    for launch in ops_named(module, "kg.launch"):
        name = ir.FlatSymbolRefAttr(launch.attributes["callee"]).value
        if name in kernels:
            continue
        if name not in texts:
            raise KgcError(f"kg.launch of @{name} has no kernel module")
        grid = tuple(ir.DenseI64ArrayAttr(launch.attributes["grid"]))
        arguments = [TensorSpec.of(v.type) for v in launch.operands] + \
            [TensorSpec.of(r.type) for r in launch.results]
        library = library_call_of(launch)
        dynamic_grid = None
        if DYNAMIC_GRID_ATTRIBUTE in launch.attributes:
            dynamic_grid = tuple(ir.DenseI64ArrayAttr(launch.attributes[DYNAMIC_GRID_ATTRIBUTE]))
        kernels[name] = Kernel(
            name, grid, ir.IntegerAttr(launch.attributes["num_warps"]).value,
            ir.IntegerAttr(launch.attributes["num_stages"]).value, arguments,
            len(launch.operands), {} if library else {"ttir": texts[name]},
            scalars=tuple(_scalars(launch)), library=library, dynamic_grid=dynamic_grid)
    return kernels


def _scalars(launch: ir.Operation) -> list[int]:
    if "scalars" not in launch.attributes:
        return []
    return list(ir.DenseI64ArrayAttr(launch.attributes["scalars"]))


def _functions(module: ir.Operation, kernels: dict) -> dict[str, Function]:
    functions = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        block = op.regions[0].blocks[0]
        if has_dynamic_extent([result for inner in block.operations for result in inner.results]) \
                and not has_dynamic_extent(list(block.arguments)):
            raise error_at(op, f"@{name} has a dynamic extent (`?`) that no argument gives: "
                               "a call could not say its size")
        numbers: dict[ir.Value, int] = {}
        buffers: list[TensorSpec] = []
        for arg in block.arguments:
            numbers[arg] = len(buffers)
            buffers.append(TensorSpec.of(arg.type))
        launches, results = [], []
        for inner in block.operations:
            inner = inner.operation
            if inner.name == "kg.launch":
                outputs = []
                for result in inner.results:
                    numbers[result] = len(buffers)
                    outputs.append(len(buffers))
                    buffers.append(TensorSpec.of(result.type))
                launches.append(Launch(ir.FlatSymbolRefAttr(inner.attributes["callee"]).value,
                                       [numbers[v] for v in inner.operands], outputs,
                                       _scalars(inner)))
            elif inner.name == "func.return":
                results = [numbers[v] for v in inner.operands]
            else:
                raise KgcError(f"@{name}: {inner.name} is left in the graph after lowering; only "
                               "kg.launch ops can run")
        functions[name] = Function(name, buffers, len(block.arguments), launches, results)
    return functions
