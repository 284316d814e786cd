"""The TorchDynamo backend "kgc": `torch.compile(model, backend="kgc")`.

torch finds it through the `torch_dynamo_backends` entry point (see
pyproject.toml), so `import kgc` is not needed. For each graph Dynamo
captures:

1. Without a CUDA device (unless the kernel graphs run on the CPU
   executor, below) the graph runs in PyTorch as captured, with one warning
   (`KgcFallbackWarning`) saying why.
2. Otherwise AOTAutograd traces it to aten ops with torch's core ATen
   decompositions, except the ops kg has whole (softmax, log_softmax,
   layer_norm, the fused attention ops, GELU's backward), so that they reach
   kgc as one op each. A graph that needs autograd (grad mode on and an input that
   requires grad) is traced jointly with its backward and cut into a
   forward and a backward graph by torch's rematerializing partitioner
   (min-cut chooses the activations saved for the backward); there
   log_softmax is decomposed too, so that the partitioner may save a loss's
   logits rather than its f32 log-probabilities (`training_decompositions`).
3. `kgc.torch.partition` cuts each aten graph (inference, forward or
   backward alike) into the parts kgc computes and the rest; each part
   becomes a kernel graph (`kgc.torch.convert`), compiled with `kgc.compile`
   (mode "default") or `kgc.superoptimize` (mode "max-autotune"), once per
   distinct graph in a process; the rest stays aten ops that PyTorch runs.

Options: `torch.compile(m, backend="kgc", mode="max-autotune")` or
`options={"mode": "max-autotune"}`; `options={"executor": "cpu"}` runs the
kernel graphs on the CPU executor of tiled kernels (`kgc.execution`)
instead of on a GPU: the same partitions, compiled by the same pipeline to
the same tiled kernels, run program by program on CPU tensors, without
CUDA. It is slow and meant for checking kgc's lowering of a real model on
a machine without a GPU (`kgc bench --models NAMES --device cpu`).

`mode="reduce-overhead"` compiles as "default" and replays each graph run
without autograd from CUDA graphs (`kgc.torch.cuda_graphs`): the first call
of each input signature warms up, the second captures kgc's launches and
the aten ops between them, and later calls copy their inputs into the
captured ones and replay. As with Inductor's CUDA graphs, a call's results
are valid until the next call, which may overwrite them. It needs the CUDA
executor; `transformers`' `CompileConfig(backend="kgc")` asks for it by
default.

Dims torch marks dynamic (a growing KV cache, a varying batch) reach the
backend as symbols. A partition whose ops keep such a dim's elements apart
(a batch, rows of a matmul) is compiled once, the symbol its kernel graph's
dynamic extent (`?`), where kgc's kernels take it so (`kgc.torch.extents`);
otherwise it is compiled per power-of-two bucket of it and runs on inputs
padded to the bucket (`kgc.torch.buckets`). Attention over a growing KV
cache, and a sum, max or min or a product that reduces the dim away (a
weight's gradient over dynamic tokens), are compiled once too, their kernels
looping over it. Another op that reduces, contracts, slices or joins along a
dynamic dim (the cache's concatenation, a mean) stays with PyTorch, the
reason naming the symbol. Either way
a decode loop compiles a bounded number of kernel graphs however many
lengths it sees, and no result depends on the padding.

A kernel that kgc fails to compile (one over the GPU's shared memory, say)
leaves its ops to PyTorch, each with the error in the graph's report, and
the rest of its partition is compiled without them; a failure that names no
kernel leaves its whole partition to PyTorch, with a warning naming it. A
new shape never fails.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import re
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from kgc.diagnostics import KgcError
from kgc.torch.argument_lists import handing_over_arguments, taking_argument_list
from kgc.torch.buckets import BucketedPartition, bucket_of, is_symbolic
from kgc.torch.convert import (ConvertedGraph, KgcFallbackWarning, Unsupported, convert_graph,
                               op_name)
from kgc.torch.extents import ExtentRefused, convert_with_extent
from kgc.torch.partition import plan_partitions
from kgc.torch.eager import prims_as_aten
from kgc.torch.index_adds import scatter_adds_as_index_adds
from kgc.torch.reinplace import scatter_adds_in_place
from kgc.torch.view_methods import views_as_methods

_LOG = logging.getLogger(__name__)

__all__ = ["KERNEL_FAILED", "Backend", "CompiledPartition", "GraphReport", "KgcFallbackWarning",
           "backend", "compiled_graphs", "reports"]

aten = torch.ops.aten
MODES = ("default", "max-autotune", "reduce-overhead")
# The mode whose graphs are captured and replayed as CUDA graphs
# (`kgc.torch.cuda_graphs`); its kernel graphs compile as in "default".
REDUCE_OVERHEAD = "reduce-overhead"
# Where kernel graphs run: launched on a CUDA GPU, or interpreted tile
# program by tile program on the CPU (`kgc.execution.run_tiled`).
CUDA, CPU = "cuda", "cpu"
EXECUTORS = (CUDA, CPU)


def decompositions() -> dict:
    """torch's core ATen decompositions, less the ops kg has as one op."""
    # Not `core_aten_decompositions()`: that table also lists every
    # CompositeImplicitAutograd op, collected from every namespace on each
    # call (a tenth of a second or more of a first call), which tracing
    # decomposes anyway.
    from torch._decomp import _core_aten_decompositions_post_autograd

    table = _core_aten_decompositions_post_autograd()
    # The CPU's fused attention op too: the CUDA ones are not decomposed
    # either, so attention reaches the converter as one op on every device.
    # GELU's backward too: its decomposition needs erf, which kg lacks.
    for op in (aten._softmax.default, aten._log_softmax.default, aten.softmax.int,
               aten.log_softmax.int, aten.native_layer_norm.default,
               aten._scaled_dot_product_flash_attention_for_cpu.default,
               aten.gelu_backward.default):
        table.pop(op, None)
    return table


def training_decompositions() -> dict:
    """`decompositions` for a graph that needs autograd, with log_softmax
    decomposed too (the row's max, the log of its sum of exponentials, and
    the differences). Whole, it is one op whose f32 result the partitioner
    must save for the backward (a causal LM's loss: tokens x vocabulary f32
    log-probabilities); decomposed, the pieces are ops it may recompute, so
    it saves the logits (bf16 under autocast, half the bytes) and two
    numbers a row instead, as Inductor's decomposition lets it."""
    from torch._decomp import get_decompositions

    table = decompositions()
    table.update(get_decompositions([aten._log_softmax.default]))
    return table


def _needs_autograd(example_inputs) -> bool:
    """Whether AOTAutograd will trace the graph with its backward (grad mode
    on and an input that requires grad), as it decides."""
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


@dataclasses.dataclass
class PartitionReport:
    name: str
    ops: list[str]  # `aten.mm.default:mm_1`, in graph order
    kernels: list[str]  # names of the kgc kernels its graph launches (when compiled)
    kernel_ops: dict[str, list[str]]  # kernel -> the ops it computes (explain)
    fallback_reason: str | None = None  # set when kgc failed to compile it
    # The kernels of kernel_ops that are calls of the GPU's BLAS, not kgc's
    # code (kgc.tiling.library).
    library_kernels: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class GraphReport:
    """What the backend did with one graph Dynamo captured."""

    partitions: list[PartitionReport]
    fallbacks: list[tuple[str, str]]  # (op, why PyTorch computes it)
    views: list[str] = dataclasses.field(default_factory=list)  # views PyTorch does for free
    whole_graph_reason: str | None = None  # the whole graph runs in PyTorch
    # "inference", or the "forward" or "backward" half of a graph that needs
    # autograd.
    kind: str = "inference"
    # Under mode "reduce-overhead", the `CudaGraphed` that replays the graph
    # (its `graph_count` says how many CUDA graphs it holds); None otherwise.
    cuda_graphs: Any = None
    # For a backward graph: (how many tensors it reads that its forward
    # saved, their bytes), what a training step holds from one half to the
    # other (`saved_for_backward`); None for the other kinds.
    saved: tuple[int, int] | None = None

    @property
    def kernel_count(self) -> int:
        return sum(len(p.kernels) for p in self.partitions if p.fallback_reason is None)

    @property
    def fallback_count(self) -> int:
        return len(self.fallbacks)


def saved_for_backward(module: torch.fx.GraphModule) -> tuple[int, int]:
    """(how many tensors the backward graph `module` reads that its forward
    saved, their bytes): its inputs other than the gradients of the
    forward's results, which AOTAutograd names `tangents_*`. A dynamic
    size counts at the size it was traced at (one data-dependent, which has
    none, as 0)."""
    count = size = 0
    for node in module.graph.nodes:
        value = node.meta.get("val") if node.op == "placeholder" else None
        if isinstance(value, torch.Tensor) and not node.name.startswith("tangents"):
            count += 1
            numel = value.numel()
            if isinstance(numel, torch.SymInt):
                numel = numel.node.hint or 0
            size += numel * value.element_size()
    return count, size


class CompiledPartition(torch.nn.Module):
    """One partition of the aten graph, run by kgc: a callable that takes
    the partition's inputs and returns its results as the partition's FX
    submodule does.

    With `takes_list` it is called with one list of the inputs, which it
    empties (`argument_lists.handing_over_arguments`), and hands the graph's
    arguments over to a run that takes a list too (`CompiledGraph.take`):
    a half of a training graph then frees an activation that only its
    early kernels read while its later kernels run."""

    def __init__(self, converted: ConvertedGraph, run: Callable, takes_list: bool = False):
        super().__init__()
        self.converted = converted
        self.run = run
        self.takes_list = takes_list
        # A run that takes the list (`CompiledGraph.take`), or None.
        self._take = getattr(run, "take", None) if takes_list else None

    def forward(self, *arguments):
        if self.takes_list:
            (given,) = arguments
            tensors = self.converted.graph_arguments(given)
            given.clear()
            results = self._take(tensors) if self._take is not None else self.run(*tensors)
        else:
            results = self.run(*self.converted.graph_arguments(arguments))
        if not isinstance(results, tuple):
            results = (results,)
        ordered = tuple(self.converted.partition_results(results))
        return ordered[0] if self.converted.single_result else ordered


_CACHE_LOCK = threading.Lock()
_COMPILED: dict[tuple[str, str], Any] = {}


def compile_kernel_graph(graph, mode: str):
    """kgc's compile of a converted partition, once per distinct graph text
    and mode in this process (superoptimize keeps its own cache across
    processes)."""
    import kgc

    key = (graph.to_mlir(), mode)
    with _CACHE_LOCK:
        if key not in _COMPILED:
            _COMPILED[key] = (kgc.superoptimize(graph) if mode == "max-autotune"
                              else _default_compile(graph))
        return _COMPILED[key]


def _partition_for_kind(converted: ConvertedGraph, run, kind: str) -> CompiledPartition:
    """The compiled partition as a graph of `kind` calls it: a half of a
    training graph makes each of its buffers at its first writer and frees
    its intermediates after their last reader (`CompiledGraph.streamed`),
    and is handed its inputs as a list (`CompiledPartition.takes_list`),
    since a training step's peak memory, which bounds its batch, comes
    while a backward runs with the saved activations alive; an inference
    graph keeps one workspace a call, the fewer allocations."""
    from kgc.runtime import CompiledGraph

    training = kind != "inference"
    if training and isinstance(run, CompiledGraph):
        run = run.streamed()
    return CompiledPartition(converted, run, takes_list=training)


def _default_compile(graph, target: int | None = None):
    """`kgc.compile` of a converted partition. A first call waits for every
    kernel of its partitions: they compile side by side, and once per
    machine."""
    import kgc
    from kgc.pipeline.triton_stage import compile_jobs

    return kgc.compile(graph, target=target, jobs=compile_jobs(), cache=kernel_cache_choice())


def _start_compile_workers() -> None:
    """Starts the processes that will compile this GPU's kernels while
    AOTAutograd traces the graph and kgc converts, fuses and tiles it, so
    that a first call does not wait for them to load Triton."""
    import torch

    from kgc.pipeline.triton_stage import compile_jobs, start_workers

    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        start_workers(major * 10 + minor, compile_jobs())


def kernel_cache_choice() -> bool:
    """Whether the backend's compiles use kgc's kernel cache
    (`kgc.pipeline.kernel_cache`): yes, as Inductor keeps its own, so that
    a second process compiles none of the kernels a first one compiled,
    unless `KGC_KERNEL_CACHE=0`. `KGC_CACHE_URL` adds a fleet's server."""
    return os.environ.get("KGC_KERNEL_CACHE") != "0"


_TILED: dict[str, Any] = {}


class TiledKernelGraph:
    """A kernel graph compiled by kgc's pipeline to tiled kernels (the `kg`
    stage, as for a GPU) and run on CPU tensors by the CPU executor."""

    def __init__(self, module, name: str):
        self.module = module
        self.name = name

    def __call__(self, *tensors):
        from kgc.execution import run_tiled

        # The executor addresses a buffer from the start of its storage, so a
        # view that starts further in (a slice of a fused QKV projection, say)
        # would be read from the wrong place: it gets storage of its own, as
        # the CUDA runtime gives misaligned inputs.
        tensors = [t.clone(memory_format=torch.contiguous_format) if t.storage_offset() else t
                   for t in tensors]
        return run_tiled(self.module, self.name, *tensors)

    def kernels(self) -> list:
        """The graph's kernels, each with its `name` (as a compiled graph's
        `kernels()` gives them)."""
        from kgc.tiling.kernel_ops import kernel_name, kernels_in

        with self.module.context:
            return [_NamedKernel(kernel_name(k)) for k in kernels_in(self.module)]


@dataclasses.dataclass(frozen=True)
class _NamedKernel:
    name: str


def compile_kernel_graph_for_cpu(graph, mode: str):
    """A converted partition compiled to tiled kernels for the CPU
    executor, once per distinct graph text in this process."""
    from kgc.pipeline.compiler import compile_module

    text = graph.to_mlir()
    with _CACHE_LOCK:
        if text not in _TILED:
            module = graph.build()
            with module.context:
                compile_module(module, emit="kg")
            _TILED[text] = TiledKernelGraph(module, graph.name)
        return _TILED[text]


def _kernel_names(compiled) -> list[str]:
    kernels = getattr(compiled, "kernels", None)
    return [kernel.name for kernel in kernels()] if callable(kernels) else []


class Backend:
    """A kgc backend for `torch.compile`. `backend` is the one registered
    under the name "kgc"; tests make others that compile kernel graphs their
    own way (`compile_graph(graph, mode) -> callable on tensors`), that
    partition graphs on CPU tensors (`devices=None`), or that only describe
    the partitions and their kernels and leave them to PyTorch
    (`run_kernels=False`, `describe_kernels=True`: explain). With
    `run_kernels=False`, `compile_for` (an SM version) compiles each kernel
    graph for that GPU down to cubin, which needs none, so that a partition
    kgc fails to compile is reported with its error, as the backend on such
    a GPU would leave it to PyTorch."""

    def __init__(self, compile_graph: Callable = compile_kernel_graph,
                 devices: tuple[str, ...] | None = ("cuda",),
                 require_cuda: bool = True, describe_kernels: bool = False,
                 run_kernels: bool = True, compile_for: int | None = None):
        if compile_for is not None and run_kernels:
            raise KgcError("compile_for compiles kernel graphs that are not run: it needs "
                           "run_kernels=False")
        self.compile_graph = compile_graph
        self.run_kernels = run_kernels
        self.devices = devices
        self.require_cuda = require_cuda
        self.describe_kernels = describe_kernels
        self.compile_for = compile_for
        self.reports: list[GraphReport] = []
        # The name of every kernel graph compiled, in order, per bucket too:
        # what a server meets as compiles while it serves.
        self.compiled_graphs: list[str] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
                 options: dict | None = None):
        mode, executor = _resolve_options(mode, options)
        if executor == CPU:
            return self._on_cpu()(gm, example_inputs, mode=mode)
        reason = self._whole_graph_reason(example_inputs)
        if reason is not None:
            warnings.warn(f"kgc: {reason}; the graph runs in PyTorch", KgcFallbackWarning,
                          stacklevel=2)
            self.reports.append(GraphReport([], [], whole_graph_reason=reason))
            return gm.forward
        if self.run_kernels and self.compile_graph is compile_kernel_graph:
            _start_compile_workers()
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        def compiler(kind: str):
            def compile_aten(aten_module: torch.fx.GraphModule, inputs):
                if mode != REDUCE_OVERHEAD:
                    # Taking the inputs as a list it empties, a backward frees
                    # each saved activation once its last reader has run.
                    return taking_argument_list(self.compile_aten(aten_module, mode, kind=kind))
                return self._cuda_graphed(aten_module, kind)
            return compile_aten

        # A graph that needs autograd is traced jointly with its backward and
        # cut in two by torch's rematerializing partitioner (the activations
        # saved for the backward chosen by min-cut); each half goes the way an
        # inference graph goes, so what kgc cannot compute falls back per op.
        return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                            inference_compiler=compiler("inference"),
                            partition_fn=min_cut_rematerialization_partition,
                            decompositions=training_decompositions
                            if _needs_autograd(example_inputs) else decompositions)(
                                gm, example_inputs)

    def _cuda_graphed(self, module: torch.fx.GraphModule, kind: str):
        """The aten graph compiled as in mode "default" and, where it runs
        without autograd, replayed from CUDA graphs (`kgc.torch.cuda_graphs`),
        as the boxed callable AOTAutograd takes. The halves of a graph that
        needs autograd run without: a forward's results saved for its
        backward would be overwritten by the next replay before the backward
        reads them. Those take their inputs as a list they empty, as in mode
        "default"."""
        from torch._functorch.aot_autograd import make_boxed_func

        from kgc.torch.cuda_graphs import (CudaGraphed, capture_obstacle, mutated_inputs,
                                           static_inputs, static_shapes)

        obstacle = "the graph needs autograd" if kind != "inference" else \
            capture_obstacle(module)
        static, mutated = static_inputs(), mutated_inputs(module)
        compiled = self.compile_aten(module, "default", kind=kind)
        name = f"{'an' if kind == 'inference' else 'a'} {kind} graph"
        if obstacle is not None:
            warnings.warn(f"kgc: mode 'reduce-overhead': {name} runs without CUDA graphs: "
                          f"{obstacle}", KgcFallbackWarning, stacklevel=2)
            return taking_argument_list(compiled)
        graphed = CudaGraphed(compiled.forward, name, static, mutated,
                              guarded=static_shapes(module))
        self.reports[-1].cuda_graphs = graphed
        return make_boxed_func(graphed)

    def _on_cpu(self) -> "Backend":
        """This backend with its kernel graphs run by the CPU executor: it
        partitions graphs on any device, needs no CUDA, and records its
        reports in this backend's list."""
        twin = copy.copy(self)
        twin.compile_graph = compile_kernel_graph_for_cpu
        twin.devices = None
        twin.require_cuda = False
        return twin

    def _whole_graph_reason(self, example_inputs) -> str | None:
        if self.require_cuda and not torch.cuda.is_available():
            return "no CUDA device is available (kgc kernels run on CUDA GPUs)"
        return None

    def compile_aten(self, module: torch.fx.GraphModule, mode: str = "default",
                     kind: str = "inference"):
        """The aten graph with its supported partitions replaced by kgc
        kernel graphs, as a graph module called with the graph's flat
        inputs. `kind` (inference, forward or backward: the halves of a graph
        that needs autograd) is recorded in the graph's report. The ops of a
        kernel kgc fails to compile stay with PyTorch, each with the error,
        and the rest of their partition is compiled without them."""
        prefix = "kgc_" if kind == "inference" else f"kgc_{kind}_"
        scatter_adds_as_index_adds(module)
        compiled: dict[str, Any] = {}
        refused = self._refuse_failing_kernels(module, mode, prefix, compiled)
        plan = plan_partitions(module, self.devices, refused)
        report = GraphReport([], [(f"{op_name(n)}:{n.name}", why)
                                  for n, why in plan.fallbacks.items()],
                             [f"{op_name(n)}:{n.name}" for n in plan.views], kind=kind,
                             saved=saved_for_backward(module) if kind == "backward" else None)
        self.reports.append(report)
        if not plan.partitions:
            scatter_adds_in_place(module)
            prims_as_aten(module)
            if views_as_methods(module):
                module.recompile()
            return module
        from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

        fused = fuse_by_partitions(module, [dict.fromkeys(p) for p in plan.partitions],
                                   prefix="kgc_partition_")
        scatter_adds_in_place(fused)
        prims_as_aten(fused)
        for name, submodule in list(fused.named_children()):
            if not name.startswith("kgc_partition_"):
                continue
            graph_name = f"{prefix}{len(report.partitions)}"
            try:
                if is_symbolic(submodule):
                    once = self._at_every_size(submodule, graph_name, mode, compiled, kind)
                    if once is not None:
                        partition, converted = once
                    else:
                        partition, converted = self._bucketed(submodule, graph_name, mode,
                                                              report)
                        if self.compile_for is not None:
                            _compile_only(converted.graph, self.compile_for)
                else:
                    converted = convert_graph(submodule, graph_name)
                    partition = None
                    run = self._compile_once(converted.graph, mode, compiled)
                    if self.run_kernels:
                        partition = _partition_for_kind(converted, run, kind)
            except (Unsupported, KgcError) as error:
                ops = [f"{op_name(n)}:{n.name}" for n in submodule.graph.nodes
                       if n.op == "call_function"]
                warnings.warn(f"kgc: partition {graph_name} ({len(ops)} ops) runs in PyTorch: "
                              f"{error}", KgcFallbackWarning, stacklevel=2)
                report.partitions.append(PartitionReport(graph_name, ops, [], {}, str(error)))
                continue
            kernel_ops, library = _kernel_ops(converted.graph, self.compile_for) \
                if self.describe_kernels else ({}, [])
            kernels = [] if isinstance(partition, BucketedPartition) else \
                _kernel_names(partition.run) if partition is not None else list(kernel_ops)
            report.partitions.append(PartitionReport(graph_name, converted.ops, kernels,
                                                     kernel_ops, library_kernels=library))
            if isinstance(partition, BucketedPartition):
                partition.report = report.partitions[-1]
            if partition is not None:
                setattr(fused, name, partition)
        views_as_methods(fused)
        fused.recompile()
        handing_over_arguments(fused, [name for name, child in fused.named_children()
                                       if isinstance(child, CompiledPartition)
                                       and child.takes_list])
        return fused

    def _compile_once(self, graph, mode: str, compiled: dict):
        """The callable `compile_graph` makes of a converted partition (or,
        with `compile_for`, the partition compiled for that GPU and None;
        nothing without either), remembered in `compiled` by the graph's
        text, errors too, so that a partition compiled while looking for
        kernels that fail is not compiled again."""
        if not self.run_kernels and self.compile_for is None:
            return None
        text = graph.to_mlir()
        if text not in compiled:
            try:
                compiled[text] = self._compile_graph(graph, mode) if self.run_kernels else \
                    _compile_only(graph, self.compile_for)
            except KgcError as error:
                compiled[text] = error
        if isinstance(compiled[text], KgcError):
            raise compiled[text]
        return compiled[text]

    def _refuse_failing_kernels(self, module: torch.fx.GraphModule, mode: str, prefix: str,
                                compiled: dict) -> dict[str, str]:
        """node name -> why PyTorch computes it: the ops of every kernel kgc
        fails to compile (over the GPU's shared memory, say), found by
        compiling each partition before the graph is cut, then partitioning
        again without them, until every partition compiles or a failure
        names no kernel (its partition then runs in PyTorch whole)."""
        from torch.fx.passes.utils.fuser_utils import fuse_as_graphmodule, topo_sort

        refused: dict[str, str] = {}
        if not self.run_kernels and self.compile_for is None:
            return refused
        for _ in range(_KERNEL_FALLBACK_ROUNDS):
            plan = plan_partitions(module, self.devices, refused)
            found: dict[str, str] = {}
            for index, nodes in enumerate(plan.partitions):
                submodule, _, _ = fuse_as_graphmodule(module, topo_sort(nodes),
                                                      f"kgc_partition_{index}", dict.fromkeys(nodes))
                if is_symbolic(submodule):
                    continue  # compiled per bucket, when called
                try:
                    converted = convert_graph(submodule, f"{prefix}{index}")
                except (Unsupported, KgcError):
                    continue  # falls back whole, as the graph is cut
                try:
                    self._compile_once(converted.graph, mode, compiled)
                except KgcError as error:
                    found.update(_failed_kernel_ops(error, converted.graph, self.compile_for))
            found = {name: why for name, why in found.items() if name not in refused}
            if not found:
                break
            refused.update(found)
        return refused

    def _compile_graph(self, graph, mode: str):
        """`compile_graph` on real tensors: AOTAutograd calls the backend
        under its FakeTensorMode, where every tensor made is a fake one, and
        kgc's search (max-autotune) runs candidates on real inputs to check
        and time them."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily

        self.compiled_graphs.append(graph.name)
        with unset_fake_temporarily():
            return self.compile_graph(graph, mode)

    def _at_every_size(self, submodule, graph_name: str, mode: str, compiled: dict,
                       kind: str):
        """(partition, converted) of a partition with a dynamic size,
        converted with the size as kgc's dynamic extent and compiled once for
        every size (`kgc.torch.extents`); None where kgc does not take it so,
        and the partition is then bucketed."""
        try:
            converted = convert_with_extent(submodule, graph_name)
            run = self._compile_once(converted.graph, mode, compiled)
        except (ExtentRefused, KgcError) as error:
            _LOG.info("kgc: partition %s is compiled per bucket of its dynamic size: %s",
                      graph_name, (str(error).strip().splitlines() or [""])[0])
            return None
        return (_partition_for_kind(converted, run, kind) if self.run_kernels
                else None), converted

    def _bucketed(self, submodule, graph_name: str, mode: str, report: GraphReport):
        """A partition with dynamic extents, compiled per bucket on use; it
        is converted here at the bucket of its example sizes, so that what
        cannot convert falls back now."""

        def record(compiled):
            if partition.report is not None:
                for kernel in _kernel_names(compiled):
                    if kernel not in partition.report.kernels:
                        partition.report.kernels.append(kernel)

        partition = BucketedPartition(submodule, graph_name, self._compile_graph, mode, record)
        hints = {}
        for symbol, (index, dim) in partition.sources.items():
            value = partition.placeholders[index].meta["val"]
            size = value if dim is None else value.shape[dim]
            hints[symbol] = bucket_of(size.node.hint)
        converted = partition.convert(hints)
        return (partition if self.run_kernels else None), converted


# How the reason of an op left to PyTorch because its kernel failed to
# compile begins (the error follows).
KERNEL_FAILED = "its kernel failed to compile: "
# How many times a graph is partitioned again without the ops of kernels
# that failed to compile, before what still fails falls back by partition.
_KERNEL_FALLBACK_ROUNDS = 4


def _failed_kernel_ops(error: KgcError, graph, target: int | None) -> dict[str, str]:
    """node name -> why, for the aten ops of the kernels of `graph` (as kg-fuse
    cuts it for sm_`target`, by default the GPU at hand) that `error` names
    (`@name`, or a kernel kg-tile made of it: `@name_partials`); empty when
    it names none."""
    named = set(re.findall(r"@(\w+)", str(error)))
    if not named:
        return {}
    try:
        kernel_ops, _ = _kernel_ops(graph, target)
    except KgcError:
        return {}
    why = (str(error).strip().splitlines() or [""])[0].removeprefix("error: ")
    refused = {}
    for kernel, ops in kernel_ops.items():
        if any(name == kernel or name.startswith(f"{kernel}_") for name in named):
            for op in ops:
                refused[op.split(":", 1)[1]] = f"{KERNEL_FAILED}{why}"
    return refused


def _compile_only(graph, target: int) -> None:
    """Compiles a converted partition for sm_`target` down to cubin and
    drops the result: what fails to compile raises KgcError, as it would
    in the backend on that GPU. Triton runs in kgc's worker processes, not
    under AOTAutograd's fake tensors."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        _default_compile(graph, target)


def _kernel_ops(graph, target: int | None = None) -> tuple[dict[str, list[str]], list[str]]:
    """kernel name -> the aten ops (by origin) whose kg ops kg-fuse put in
    it: the graph cut into kernels as kgc's default pipeline cuts it for
    sm_`target`, by default the GPU that kgc.compile compiles for (the one
    at hand); and the names of those kernels that kg-tile will make calls
    of the GPU's BLAS."""
    from mlir import ir

    from kgc import targets
    from kgc.passes.tile import choose_schedule, kernel_graph
    from kgc.pipeline import Pipeline
    from kgc.pipeline.stages import fusion_pipeline_text
    from kgc.tiling.library import KIND as LIBRARY_KIND

    if target is None:
        present = targets.present_gpu()
        target = present.sm if present else targets.DEFAULT_SM
    module = graph.build()
    with module.context:
        Pipeline.parse(fusion_pipeline_text(target=target)).run(module)
    kernels: dict[str, list[str]] = {}
    library: list[str] = []

    def origin(location) -> str | None:
        # Graph.origin's NameLoc: loc("aten.mm.default:mm_1"(<file location>)).
        text = str(location)
        if not text.startswith('loc("') or '"(' not in text:
            return None
        return text[5:text.index('"(')]

    for op in module.regions[0].blocks[0].operations:
        for inner in op.regions[0].blocks[0].operations:
            if inner.operation.name != "kg.kernel":
                continue
            name = ir.StringAttr(inner.attributes["sym_name"]).value
            seen: list[str] = []
            for body_op in inner.regions[0].blocks[0].operations:
                if body_op.operation.name == "kg.constant":
                    continue  # shared by the ops CSE merged them for
                found = origin(body_op.location)
                if found is not None and found not in seen:
                    seen.append(found)
            kernels[name] = seen
            with module.context:
                schedule = choose_schedule(inner, kernel_graph(inner), None, target)
            if schedule.kind == LIBRARY_KIND:
                library.append(name)
    return kernels, library


def _resolve_mode(mode: str | None, options: dict | None) -> str:
    return _resolve_options(mode, options)[0]


def _resolve_options(mode: str | None, options: dict | None) -> tuple[str, str]:
    """(mode, executor) from `torch.compile`'s mode and options."""
    options = dict(options or {})
    chosen = options.pop("mode", None) or mode or "default"
    executor = options.pop("executor", None) or CUDA
    if options:
        raise KgcError(f"kgc backend: unknown options {', '.join(sorted(options))} "
                       "(it takes mode and executor)")
    if chosen not in MODES:
        raise KgcError(f"kgc backend: unknown mode {chosen!r}; choose one of {', '.join(MODES)}")
    if executor not in EXECUTORS:
        raise KgcError(f"kgc backend: unknown executor {executor!r}; choose one of "
                       f"{', '.join(EXECUTORS)}")
    if executor == CPU and chosen == REDUCE_OVERHEAD:
        raise KgcError("kgc backend: mode 'reduce-overhead' replays CUDA graphs; the CPU "
                       "executor has none (use mode 'default' with it)")
    if executor == CPU and chosen != "default":
        raise KgcError(f"kgc backend: mode {chosen!r} searches kernels by timing them on a GPU; "
                       "the CPU executor runs kgc's default kernels (mode 'default')")
    return chosen, executor


_DEFAULT = Backend()


def backend(gm: torch.fx.GraphModule, example_inputs, *, mode: str | None = None,
            options: dict | None = None):
    """The "kgc" backend of `torch.compile`."""
    return _DEFAULT(gm, example_inputs, mode=mode, options=options)


def reports() -> list[GraphReport]:
    """What the "kgc" backend did with each graph it was given, in order."""
    return _DEFAULT.reports


def compiled_graphs() -> list[str]:
    """The names of the kernel graphs the "kgc" backend compiled, in order
    (a partition compiled per bucket once per bucket)."""
    return _DEFAULT.compiled_graphs
