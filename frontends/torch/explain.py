"""`kgc.explain(model, *example_inputs)`: which ops go into which kgc kernel,
and which stay with PyTorch and why.

It captures the model as `torch.compile(model, backend="kgc")` would, on the
given inputs and under the caller's grad mode, partitions and converts every
graph as the backend does (with grad on and an input or parameter that
requires grad, the forward graph and the backward graph, the latter made
now instead of at the first backward call, so that nothing is run backward
and no gradient is touched), and cuts each kernel graph into kernels with
kgc's default pipeline up to kg-fuse, without compiling them (no GPU needed;
tensors on any device count as they would on a CUDA one; partitions with
dynamic extents are shown at the bucket of the example's sizes). It prints the
report and returns it.

`compile_for="sm_90"` also compiles every kernel graph for that GPU down to
cubin, which needs no GPU: the ops of a kernel kgc fails to compile (one
over the target's shared memory, say) are shown as the backend on that GPU
would leave them, in PyTorch with the error (a whole partition where the
error names no kernel), and the kernels are cut for that GPU.

The report says what the backend itself would do here: each graph's kernels
(a training step's forward graph, then its backward graph, each marked
with its kind, the backward with the count and size of the tensors its
forward saved for it: what a step holds between its halves), the ops left
to PyTorch and why; without a CUDA device
every graph runs in PyTorch, the kernels shown being those a CUDA GPU would
run.
"""

from __future__ import annotations

import dataclasses

import torch

from kgc.torch.backend import Backend, GraphReport

__all__ = ["Explanation", "explain"]


@dataclasses.dataclass
class Explanation:
    graphs: list[GraphReport]
    # Whether this machine has a CUDA device: without one the backend runs
    # every graph in PyTorch, whatever kernels kgc would make of it.
    cuda_available: bool = True
    # The SM version every kernel graph was compiled for (compile_for), or
    # None: cut into kernels only.
    compiled_for: int | None = None

    @property
    def kernel_count(self) -> int:
        return sum(len(p.kernel_ops) for g in self.graphs for p in g.partitions
                   if p.fallback_reason is None)

    @property
    def fallback_count(self) -> int:
        return sum(g.fallback_count for g in self.graphs)

    def __str__(self) -> str:
        whole = [g for g in self.graphs if g.whole_graph_reason]
        if self.graphs and len(whole) == len(self.graphs):
            lines = [f"kgc: {len(self.graphs)} graph(s), no kgc kernel: every graph runs in "
                     "PyTorch"]
        else:
            lines = [f"kgc: {len(self.graphs)} graph(s), {self.kernel_count} kgc kernel(s), "
                     f"{self.fallback_count} op(s) left to PyTorch"
                     + (f", {len(whole)} graph(s) wholly in PyTorch" if whole else "")]
        if self.compiled_for is not None:
            failed = sum(p.fallback_reason is not None for g in self.graphs for p in g.partitions)
            lines.append(f"kernel graphs compiled for sm_{self.compiled_for} down to cubin: "
                         f"{failed} partition(s) failed to compile")
        if not self.cuda_available:
            lines.append("no CUDA device here: on this machine torch.compile(model, "
                         "backend=\"kgc\") runs everything in PyTorch"
                         + ("; the kernels below are those a CUDA GPU would run"
                            if self.kernel_count else ""))
        for number, graph in enumerate(self.graphs):
            lines.append(f"graph {number}:" if graph.kind == "inference"
                         else f"graph {number} ({graph.kind}):")
            if graph.saved is not None:
                count, size = graph.saved
                lines.append(f"  reads {count} tensor(s) its forward saved, "
                             f"{size / 2**20:.2f} MiB")
            if graph.whole_graph_reason:
                lines.append(f"  runs in PyTorch: {graph.whole_graph_reason}")
                continue
            for partition in graph.partitions:
                if partition.fallback_reason is not None:
                    lines.append(f"  {partition.name}: runs in PyTorch: "
                                 f"{partition.fallback_reason}")
                    lines.extend(f"    {op}" for op in partition.ops)
                    continue
                lines.append(f"  {partition.name}: {len(partition.ops)} op(s) in "
                             f"{len(partition.kernel_ops)} kernel(s)")
                for kernel, ops in partition.kernel_ops.items():
                    # A library kernel is no code of kgc's: cuBLAS runs it.
                    call = " (library call: cuBLAS through torch)" \
                        if kernel in partition.library_kernels else ""
                    lines.append(f"    kernel {kernel}{call}: {', '.join(ops)}")
            if graph.fallbacks:
                lines.append("  left to PyTorch:")
                lines.extend(f"    {op}: {why}" for op, why in graph.fallbacks)
            if graph.views:
                lines.append(f"  views PyTorch does without a kernel: {', '.join(graph.views)}")
        return "\n".join(lines)


def explain(model, *example_inputs, print_report: bool = True,
            compile_for: str | int | None = None) -> Explanation:
    """Explains what `torch.compile(model, backend="kgc")` does with `model`
    on `example_inputs`; prints the report (unless `print_report=False`) and
    returns it. `compile_for` (`"sm_90"`, 90) compiles the kernel graphs for
    that GPU as well."""
    from kgc.pipeline.stages import parse_target

    target = None if compile_for is None else parse_target(compile_for)
    recorder = Backend(devices=None, require_cuda=False, describe_kernels=True,
                       run_kernels=False, compile_for=target)
    compiled = torch.compile(model, backend=recorder)
    from torch._functorch import config as functorch_config

    with functorch_config.patch(force_non_lazy_backward_lowering=True):
        compiled(*example_inputs)
    explanation = Explanation(list(recorder.reports), torch.cuda.is_available(), target)
    if print_report:
        print(explanation)
    return explanation
