"""The model suite's training rows (`kgc bench --models`): one training
step of a decoder ("train") and one LoRA fine-tuning step ("lora": the base
frozen, low-rank adapters on the attention projections, `kgc.bench.lora`),
each contender compiling `model.forward` as a user would.

A step is a training loop's: the gradients cleared, the forward with the
labels (transformers computes the causal LM's cross-entropy loss inside the
forward, so the loss and its backward are in the compiled graphs), the
backward, and an AdamW step over the trainable parameters (eager PyTorch
for every contender: only the model is compiled). On the GPU the weights
are f32 master weights and the forward runs under bf16 autocast, as people
train; on the CPU everything is f32. The model stays in eval mode: dropout
off, so that every contender's gradients are those of the same function.
Tokens are random, batch and length per model (`kgc.bench.models`).

Correct means, for kgc's first step (its gradients are taken after the
backward, before the optimizer moves the weights; every contender starts
from the same weights):
- the loss and the gradient of every trainable parameter pass the project's
  accuracy rule (`kgc.accuracy.tensor_mismatch`) against eager's on the
  same step and a reference: the same step without autocast in f32 (GPU),
  or in f64 (CPU);
- every trainable parameter has a gradient, and no frozen one has.

On the GPU, for eager, torch.compile (Inductor) and kgc: the first step's
wall time (its compiles: the forward's, and the backward's at the first
backward); then, side by side, the step as called (CUDA events around it,
median over rounds of one step per contender after warm-up, so that what
slows the host for a while slows every contender alike), its GPU kernel
time (torch's profiler, as the other rows), and the peak memory of one step
above what it starts with (`torch.cuda.max_memory_allocated` after
`reset_peak_memory_stats`, less the memory allocated before the step, the
last step's gradients freed: the activations, gradients and workspaces the
step makes, without the weights, the optimizer's state or what a library
keeps from the first call on); kgc's kernels and the ops it leaves to
PyTorch in the forward and the backward graph. Each contender has its own
optimizer over the shared weights, which every step moves a little. torch.
compile with CUDA graphs is not a contender here: its pools make the peak
memory another quantity.
"""

from __future__ import annotations

import copy
import statistics
import time

from kgc.bench.model_rows import (EAGER, FAILED, INDUCTOR, KGC, WRONG, ModelRow, contending,
                                  first_line, gpu_kernel_ms)
from kgc.bench.models import GPU, LORA, ModelSpec, RowSpec

TRAINING_RUNNERS = (EAGER, INDUCTOR, KGC)
LEARNING_RATE = 1e-4
WARMUP_STEPS = 3


def run_training_row(spec: ModelSpec, reference, row_spec: RowSpec, size: str, seed: int,
                     reps: int) -> ModelRow:
    """The training or LoRA row `row_spec` of `spec`: `reference` is the
    model in the reference dtype (f32 on the GPU, f64 on the CPU), left as
    it is; the row trains an f32 copy. `reps` steps are timed per contender
    (none: only checked)."""
    import torch

    row = ModelRow(spec.name, row_spec.name)
    device = next(reference.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    # Token 0 is the padding token of some configs: draw from the rest.
    ids = torch.randint(1, reference.config.vocab_size, (row_spec.batch, row_spec.tokens),
                        generator=generator).to(device)
    model = trainable_copy(reference, row_spec.kind, seed)
    initial = {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()
               if p.requires_grad}
    autocast = size == GPU
    try:
        expected = _reference_step(model, ids, reference.dtype)
    except Exception as error:
        row.status, row.reason = FAILED, f"the reference fails this row: {first_line(error)}"
        return row
    timed = size == GPU and reps
    runners = TRAINING_RUNNERS if timed else (EAGER, KGC)
    eager = None
    # Each contender's compiled forward stays beside the others' (Dynamo
    # keeps one graph per backend), to be timed side by side.
    torch._dynamo.reset()
    contenders = {}
    for runner in runners:
        _restore(model, initial)
        outcome, contender = _run_contender(row, runner, model, ids, autocast, size, eager,
                                            expected)
        if runner == EAGER:
            if outcome is None:
                row.status = FAILED
                row.reason = f"eager PyTorch fails this row: {row.errors[EAGER]}"
                break
            eager = outcome
        if contender is not None and timed:
            contenders[runner] = contender
    if contenders:
        _time_steps_side_by_side(row, contenders, model, ids, autocast, reps)
    del model, contenders
    if size == GPU:
        torch.cuda.empty_cache()
    return row


def trainable_copy(reference, kind: str, seed: int):
    """An f32 copy of `reference` to train: every parameter trainable, or
    for a LoRA row, the base frozen and adapters (drawn from `seed`) on its
    attention projections."""
    from kgc.bench.lora import add_adapters

    model = copy.deepcopy(reference).float()
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    if kind == LORA:
        add_adapters(model, seed=seed)
    return model


def training_step(model, ids, autocast: bool, optimizer=None):
    """One step: the forward under bf16 autocast (when `autocast`), the
    loss's backward, and `optimizer`'s step when given. The loss, detached."""
    import torch

    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=autocast):
        # No KV cache: a training step has no use for one.
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    return loss.detach()


def _gradients(model, device: str | None = None) -> dict:
    """Each parameter's gradient (None where it has none), by name, moved to
    `device` when given."""
    return {name: None if p.grad is None else
            (p.grad.detach().to(device, copy=True) if device else p.grad.detach())
            for name, p in model.named_parameters()}


def _reference_step(model, ids, dtype) -> tuple:
    """(loss, gradients) of one step of `model` in `dtype` without autocast,
    on the CPU; `model` itself is left as it was."""
    import torch

    reference = model if dtype == torch.float32 else copy.deepcopy(model).to(dtype)
    loss = training_step(reference, ids, autocast=False)
    outcome = loss.cpu(), _gradients(reference, "cpu")
    reference.zero_grad(set_to_none=True)
    return outcome


def _restore(model, initial: dict) -> None:
    import torch

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name in initial:
                parameter.copy_(initial[name])
            parameter.grad = None


def _run_contender(row: ModelRow, runner: str, model, ids, autocast: bool, size: str, eager,
                   expected):
    """`runner`'s first step, checked when it is kgc's. (Eager's (loss,
    gradients) on the CPU for eager, else None; (`runner`'s compiled
    forward, None for eager's, and its optimizer) where its steps may be
    timed, else None: a wrong result's time would mean nothing.)"""
    import torch

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                                  lr=LEARNING_RATE)
    outcome = contender = None
    with contending(row, runner, model, size, reset=False):
        started = time.perf_counter()
        loss = training_step(model, ids, autocast)
        if size == GPU:
            torch.cuda.synchronize()
        if runner != EAGER:
            row.compile_s[runner] = time.perf_counter() - started
        if runner == EAGER:
            outcome = loss.cpu(), _gradients(model, "cpu")
        elif runner == KGC:
            check_gradients(row, model, loss, eager, expected)
        optimizer.step()
        if not (runner == KGC and row.status == WRONG):
            contender = model.__dict__.get("forward"), optimizer
    return outcome, contender


def check_gradients(row: ModelRow, model, loss, eager, expected) -> None:
    """Sets `row`'s status, reason and errors from kgc's `loss` and the
    gradients now in `model` against eager's and the reference's (each a
    (loss, {name: gradient}) pair on the CPU)."""
    from kgc.accuracy import tensor_mismatch

    eager_loss, eager_gradients = eager
    expected_loss, expected_gradients = expected
    checked = [("the loss", loss, eager_loss, expected_loss)]
    problems = []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            if parameter.grad is not None:
                problems.append(f"frozen {name} has a gradient")
            continue
        if parameter.grad is None:
            problems.append(f"{name} has no gradient")
            continue
        checked.append((f"the gradient of {name}", parameter.grad, eager_gradients[name],
                        expected_gradients[name]))
    row.kgc_error = row.eager_error = 0.0
    for label, got, eager_value, exact in checked:
        # On the device of kgc's result: the GPU's f64 is quicker than the
        # CPU's over a large model's gradients.
        eager_value, exact = eager_value.to(got.device), exact.to(got.device)
        ideal = exact.double()
        scale = ideal.abs().max().item() or 1.0
        row.kgc_error = max(row.kgc_error, (got.double() - ideal).abs().max().item() / scale)
        row.eager_error = max(row.eager_error,
                              (eager_value.double() - ideal).abs().max().item() / scale)
        why = tensor_mismatch(got, eager_value, exact, label)
        if why is not None:
            problems.append(why)
    if problems:
        row.status = WRONG
        row.reason = problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1
                                    else "")


def _time_steps_side_by_side(row: ModelRow, contenders: dict, model, ids, autocast: bool,
                             steps: int) -> None:
    """Each contender's step as called (CUDA events around it; the median
    over `steps` rounds of one step each, after warm-up), then its GPU
    kernel time and its peak memory. `contenders` holds each one's compiled
    forward (None: the class's, eager) and optimizer."""
    import torch

    def step(runner: str) -> None:
        forward, optimizer = contenders[runner]
        if forward is None:
            model.__dict__.pop("forward", None)
        else:
            model.forward = forward
        training_step(model, ids, autocast, optimizer)

    try:
        for runner in contenders:
            for _ in range(WARMUP_STEPS):
                step(runner)
        torch.cuda.synchronize()
        times = {runner: [] for runner in contenders}
        for _ in range(steps):
            for runner in contenders:
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                step(runner)
                end.record()
                end.synchronize()
                times[runner].append(start.elapsed_time(end))
        for runner in contenders:
            row.wall_ms[runner] = statistics.median(times[runner])
            row.gpu_ms[runner] = gpu_kernel_ms(lambda: step(runner))
            # The last step's gradients freed first, as the next step's
            # zero_grad would: the peak is one step's own.
            contenders[runner][1].zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step(runner)
            torch.cuda.synchronize()
            row.peak_mb[runner] = (torch.cuda.max_memory_allocated() - before) / 2**20
    finally:
        model.__dict__.pop("forward", None)
