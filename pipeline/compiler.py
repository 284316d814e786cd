"""Compiling a kernel graph: kgc's passes, then Triton, stage by stage.

`compile_module` takes a parsed module, runs the pass pipeline (by default
`stages.default_pipeline_text`), and hands each kernel's TTIR to
`triton.compile` for the later stages. The result describes every kernel
(its code at each stage and its launch configuration) and, for every
function of the graph, the launches that compute it: enough to write the
stages to disk (`write`) and to run the graph (`kgc.runtime`).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import tempfile

from mlir import ir

from kgc.diagnostics import KgcError, error_at
from kgc.pipeline.pipeline import Pipeline
from kgc.pipeline.stages import STAGES, default_pipeline_text, split_at_lowering
from kgc.tiling.kernel_ops import ops_named, walk_ops


@dataclasses.dataclass
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # "f32", "f16", "bf16", "f8E4M3FN" or "f8E5M2"

    @classmethod
    def of(cls, type_: ir.Type) -> "TensorSpec":
        tensor = ir.RankedTensorType(type_)
        return cls(tuple(tensor.shape), str(tensor.element_type))


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
    triton_kernel: object = None  # triton's CompiledKernel, for launching
    # i32 arguments passed after the pointers, in order (kg.launch's scalars)
    scalars: tuple[int, ...] = ()


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


@dataclasses.dataclass
class CompiledModule:
    target: int
    stages: dict  # "kg" / "ttir" -> text of the whole module
    kernels: dict[str, Kernel]
    functions: dict[str, Function]
    emitted: str  # the last stage produced
    ttir_dir: pathlib.Path | None = None

    def manifest(self) -> dict:
        return {
            "target": f"sm_{self.target}",
            "stages": list(STAGES[:STAGES.index(self.emitted) + 1]),
            "kernels": [
                {"name": k.name, "grid": list(k.grid), "num_warps": k.num_warps,
                 "num_stages": k.num_stages, "shared_memory_bytes": k.shared,
                 "arguments": [
                     {"role": "input" if i < k.num_inputs else "output",
                      "shape": list(a.shape), "dtype": a.dtype}
                     for i, a in enumerate(k.arguments)]}
                for k in self.kernels.values()],
            "functions": [
                {"name": f.name,
                 "arguments": [{"shape": list(b.shape), "dtype": b.dtype}
                               for b in f.buffers[:f.num_arguments]],
                 "results": f.results,
                 "buffers": [{"shape": list(b.shape), "dtype": b.dtype} for b in f.buffers],
                 "launches": [dataclasses.asdict(launch) for launch in f.launches]}
                for f in self.functions.values()],
        }

    def write(self, directory: str | pathlib.Path, stem: str) -> list[pathlib.Path]:
        """Writes every stage of every kernel and manifest.json."""
        root = pathlib.Path(directory)
        kernels_dir = root / "kernels"
        kernels_dir.mkdir(parents=True, exist_ok=True)
        written = []
        for stage, text in self.stages.items():
            path = root / f"{stem}.{stage}.mlir"
            path.write_text(text)
            written.append(path)
        for kernel in self.kernels.values():
            for stage, content in kernel.asm.items():
                path = kernels_dir / f"{kernel.name}.{stage}"
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content)
                written.append(path)
        manifest = root / "manifest.json"
        manifest.write_text(json.dumps(self.manifest(), indent=2) + "\n")
        written.append(manifest)
        return written


def compile_module(module: ir.Operation, *, target: int = 90, pipeline: str | None = None,
                   emit: str = "cubin", ttir_dir: str | pathlib.Path | None = None
                   ) -> CompiledModule:
    """Compiles `module` (a builtin.module of kernel graphs) down to `emit`.
    Raises KgcError with diagnostics on failure."""
    if emit not in STAGES:
        raise KgcError(f"unknown stage '{emit}': choose one of {', '.join(STAGES)}")
    _check_target(module, target)
    full = Pipeline.parse(pipeline or default_pipeline_text(target))
    to_kg, to_ttir = split_at_lowering(full)
    to_kg.run(module)
    stages = {"kg": module.get_asm()}
    if emit == "kg":
        return CompiledModule(target, stages, {}, {}, "kg")
    to_ttir.run(module)
    stages["ttir"] = module.get_asm()
    kernels = _kernels(module)
    functions = _functions(module, kernels)
    compiled = CompiledModule(target, stages, kernels, functions, emit)
    if emit == "ttir":
        for kernel in kernels.values():
            kernel.asm = {"ttir": kernel.asm["ttir"]}
        return compiled
    compiled.ttir_dir = pathlib.Path(ttir_dir) if ttir_dir else pathlib.Path(
        tempfile.mkdtemp(prefix="kgc-ttir-"))
    from kgc.pipeline.triton_stage import compile_kernel

    for kernel in kernels.values():
        compile_kernel(kernel, target, compiled.ttir_dir, emit)
    return compiled


# Element types that Triton converts only on newer GPUs: type -> first SM.
_NEEDS_SM = {"f8E4M3FN": 89}


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
        kernels[name] = Kernel(
            name, grid, ir.IntegerAttr(launch.attributes["num_warps"]).value,
            ir.IntegerAttr(launch.attributes["num_stages"]).value, arguments,
            len(launch.operands), {"ttir": texts[name]}, scalars=tuple(_scalars(launch)))
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
