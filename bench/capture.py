"""The kernel graphs kgc's torch backend makes of a model of the suite.

`forward_graphs(name, size, tokens)` runs one forward of the model through
`torch.compile` with a kgc `Backend` that partitions CPU tensors and, instead
of compiling each kernel graph, keeps its text and evaluates it op by op
(`kgc.reference.evaluate`), so the forward goes on to the next partition.
No GPU is needed. Tests check the candidate kernels of real models with it;
`benchmarks/capture_partitions.py` writes the graphs to measure them.

On a CPU, Dynamo captures other attention ops than on a GPU (the math or
CPU flash path of sdpa), so the attention kernels differ from the GPU's;
the matmuls, norms and elementwise kernels are the same graphs.
"""

from __future__ import annotations

__all__ = ["forward_graphs"]


def forward_graphs(name: str, size: str, tokens: int, dtype=None, seed: int = 0) -> list[str]:
    """The text of each kernel graph of one forward of model `name` of the
    suite at `size` (`kgc.bench.models.CPU` or `GPU`), in `dtype` (None:
    f32), on one sequence of `tokens` tokens drawn from `seed`, in the order
    the backend made them. Resets Dynamo afterwards."""
    import torch

    from kgc.bench import models
    from kgc.reference import evaluate
    from kgc.torch.backend import Backend

    texts: list[str] = []

    def keep(graph, mode):
        texts.append(graph.to_mlir())
        module = graph.build()

        def run(*tensors):
            with module.context:
                return evaluate(module.operation, graph.name, list(tensors))
        return run

    spec = models.CATALOGUE[name]
    model = spec.build(size)
    if dtype is not None:
        model = model.to(dtype)
    ids = torch.randint(1, model.config.vocab_size, (1, tokens),
                        generator=torch.Generator().manual_seed(seed))
    backend = Backend(compile_graph=keep, devices=None, require_cuda=False)
    try:
        with torch.no_grad():
            torch.compile(model.forward, backend=backend)(
                ids, **({"use_cache": False} if spec.decoder else {}))
    finally:
        torch._dynamo.reset()
    return texts
