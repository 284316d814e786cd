"""Where a training step's host time goes, kgc beside Inductor, without a profiler.

    python benchmarks/training_host_split.py llama [--steps 40] [--ops]

Each contender compiles the model suite's `model.forward` (an f32 copy,
trained under bf16 autocast on 4 x 256 random tokens, as the suite's train
rows do). After warm-up the contenders take one step each in turn, round
after round, and each part of a step is timed with `time.perf_counter`
(medians over the rounds, microseconds): `zero_grad`, the forward with
the loss, the backward, the wait for the GPU after it, the whole step; the
time inside kgc's partition calls (`CompiledPartition.forward`) and inside
Inductor's compiled graphs (`CompiledFxGraph.__call__`). What the forward
and backward spend outside those is the graph PyTorch runs around them,
AOTAutograd's wrappers and autograd's engine.

With `--ops`, every aten op called through its overload object
(`torch.ops.aten.view.default(...)`: the ops PyTorch runs between kgc's
kernels, and those Inductor's code calls) is timed too, by op. The
timing wraps each such call in Python and adds its own cost, so compare
`--ops` runs only with each other.

cProfile and torch's profiler add a cost to every Python call or every op
that is larger than what they measure here (a view of a few microseconds
reads 10 to 20 under them), which is why this exists.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import statistics
import time

import torch

from kgc.bench import models
from kgc.bench.model_train import trainable_copy

# The model suite's training shape.
BATCH, TOKENS = 4, 256
WARMUP_STEPS = 5


class _Clock:
    """Time spent in wrapped calls, by label, since the last `clear`."""

    def __init__(self):
        self.spent = collections.defaultdict(float)
        self.calls = collections.Counter()

    def clear(self):
        self.spent.clear()
        self.calls.clear()

    def wrap(self, function, label):
        """`function` with its time added under `label(arguments...)`."""
        clock = self

        def timed(self_, *arguments, **keywords):
            started = time.perf_counter()
            try:
                return function(self_, *arguments, **keywords)
            finally:
                key = label(self_)
                clock.spent[key] += time.perf_counter() - started
                clock.calls[key] += 1
        return timed


def _instrument(clock: _Clock, ops: bool) -> None:
    from torch._inductor import output_code

    backend = importlib.import_module("kgc.torch.backend")
    backend.CompiledPartition.forward = clock.wrap(backend.CompiledPartition.forward,
                                                   lambda _: "kgc partitions")
    output_code.CompiledFxGraph.__call__ = clock.wrap(output_code.CompiledFxGraph.__call__,
                                                      lambda _: "inductor graphs")
    if ops:
        torch._ops.OpOverload.__call__ = clock.wrap(
            torch._ops.OpOverload.__call__, lambda op: "op " + str(op).replace("aten.", ""))


def _step(model, ids, record: dict | None) -> None:
    marks = [time.perf_counter()]
    model.zero_grad(set_to_none=True)
    marks.append(time.perf_counter())
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    marks.append(time.perf_counter())
    loss.backward()
    marks.append(time.perf_counter())
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    if record is not None:
        for name, (start, end) in zip(("zero_grad", "forward", "backward", "GPU wait"),
                                      zip(marks, marks[1:])):
            record[name].append(end - start)
        record["step"].append(marks[-1] - marks[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a model of the suite (kgc.bench.models)")
    parser.add_argument("--steps", type=int, default=40, help="timed rounds")
    parser.add_argument("--ops", action="store_true", help="also time each aten op call")
    args = parser.parse_args()
    from kgc.torch.backend import Backend

    clock = _Clock()
    _instrument(clock, args.ops)
    reference = models.CATALOGUE[args.model].build(models.GPU, 0).to("cuda").eval()
    ids = torch.randint(1, reference.config.vocab_size, (BATCH, TOKENS), device="cuda")
    torch._dynamo.reset()
    contenders = {}
    for name, backend in (("kgc", Backend()), ("inductor", "inductor")):
        model = trainable_copy(reference, "train", 0)
        model.forward = torch.compile(model.forward, backend=backend)
        contenders[name] = model
    for model in contenders.values():
        for _ in range(WARMUP_STEPS):
            _step(model, ids, None)
    records = {name: collections.defaultdict(list) for name in contenders}
    for _ in range(args.steps):
        for name, model in contenders.items():
            clock.clear()
            _step(model, ids, records[name])
            for key, seconds in clock.spent.items():
                records[name][f"{key} x{clock.calls[key]}"].append(seconds)
    for name, record in records.items():
        medians = {key: statistics.median(values) * 1e6 for key, values in record.items()}
        print(name, "  ".join(f"{key} {us:.0f}" for key, us in medians.items()
                              if not key.startswith("op ")))
        ops = sorted(((us, key) for key, us in medians.items() if key.startswith("op ")),
                     reverse=True)
        if ops:
            print(name, "ops:", "  ".join(f"{key} {us:.0f}" for us, key in ops),
                  f" total {sum(us for us, _ in ops):.0f}")


if __name__ == "__main__":
    main()
