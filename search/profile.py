"""Checking and timing the compiled candidates of kernels on GPUs.

A `KernelTrial` is one kernel (as a graph of its own: `inline_text`, which
the reference evaluates) and its compiled candidates (single-kernel
modules, down to cubin). `run_trial` does, on the current GPU: fresh
random inputs; the reference results, op by op as eager torch would and
exactly in f64 (`kgc.reference.evaluate`); then for each candidate, in
order: skipped without running when its compiled resources exceed the
device's (shared memory, registers, threads); run with its results
poisoned (NaN), rejected when they do not match the reference
(`kgc.accuracy.mismatch`); else timed with `measure.time_rotated` over enough
copies of the inputs that they do not stay in the L2 cache from one call to
the next (`measure.input_sets`): a kernel is timed reading memory, as it
runs in a model, not the L2 cache its previous call filled.

`kgc.search.trials` decides where trials run (which GPUs, which processes).
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Callable

TIMED, REJECTED, SKIPPED = "timed", "rejected", "skipped"


@dataclasses.dataclass
class KernelTrial:
    signature: str
    function: str
    inline_text: str
    candidates: list[tuple[str, object]]  # (candidate id, CompiledModule)


@dataclasses.dataclass
class Outcome:
    candidate: str
    status: str  # TIMED, REJECTED or SKIPPED
    time_us: float | None = None
    reason: str = ""
    device: int | None = None


@dataclasses.dataclass(frozen=True)
class TrialSettings:
    warmup_iters: int = 16
    profile_iters: int = 1000
    seed: int | None = None  # None: fresh inputs for every trial
    # A test hook: (candidate id, results) -> results, applied before the
    # check, to plant a wrong candidate. It cannot cross to a worker
    # process, so a trial with one runs in this process.
    tamper: Callable | None = None
    # Check and time in worker processes (`kgc.search.isolation`), so that
    # a candidate that faults on the GPU is a rejected row rather than the
    # end of the search.
    isolated: bool = True


@dataclasses.dataclass
class Reference:
    """What a kernel's candidates are checked and timed against on one GPU:
    fresh random inputs, the reference results (eager rounding and exact),
    and copies of the inputs to time with (`measure.input_sets`)."""

    inputs: list
    eager: tuple
    exact: tuple
    input_copies: list | None = None  # made when the first candidate is timed


def make_reference(trial: KernelTrial, settings: TrialSettings) -> Reference:
    """The reference of `trial`'s kernel on the current GPU."""
    import torch
    from mlir import ir

    import kgc  # noqa: F401  (registers the dialect)
    from kgc.reference import evaluate
    from kgc.search.kernels import index_bounds, input_specs
    from kgc.search.verify import random_inputs

    local = torch.cuda.current_device()
    seed = settings.seed if settings.seed is not None else secrets.randbits(31)
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        module = ir.Module.parse(trial.inline_text).operation
        inputs = random_inputs(input_specs(module), seed, f"cuda:{local}",
                               index_bounds(module))
        eager = _as_tuple(evaluate(module, trial.function, inputs))
        exact = _as_tuple(evaluate(module, trial.function, inputs, exact=True))
    return Reference(inputs, eager, exact)


def run_trial(trial: KernelTrial, settings: TrialSettings,
              reference: Reference | None = None) -> list[Outcome]:
    """Checks and times `trial`'s candidates on the current GPU, against
    `reference` (made here when not given; a caller running one kernel's
    candidates in several parts passes the one it made)."""
    import torch

    from kgc.runtime import CompiledGraph
    from kgc.accuracy import mismatch
    from kgc.search.measure import input_sets, l2_bytes, time_rotated
    from triton.runtime.driver import driver

    local = torch.cuda.current_device()
    limits = driver.active.utils.get_device_properties(local)
    if reference is None:
        reference = make_reference(trial, settings)
    inputs, eager, exact = reference.inputs, reference.eager, reference.exact
    outcomes = []
    for candidate, compiled in trial.candidates:
        reasons = [k.artifact.exceeds(limits) for k in compiled.kernels.values()
                   if k.artifact is not None]
        reason = next((r for r in reasons if r), None)
        if reason is not None:
            outcomes.append(Outcome(candidate, SKIPPED, reason=reason, device=local))
            continue
        graph = CompiledGraph(compiled, trial.function)
        try:
            results = _as_tuple(graph.run(*inputs, poison=True))
        except Exception as error:  # a launch the driver refuses is this candidate's failure
            outcomes.append(Outcome(candidate, REJECTED, reason=f"failed to run: {error}",
                                    device=local))
            continue
        if settings.tamper is not None:
            results = _as_tuple(settings.tamper(candidate, results))
        wrong = mismatch(results, eager, exact)
        if wrong is not None:
            outcomes.append(Outcome(candidate, REJECTED, reason=wrong, device=local))
            continue
        if reference.input_copies is None:
            footprint = sum(t.nbytes for t in inputs) + sum(r.nbytes for r in results)
            reference.input_copies = [inputs] + [
                [t.clone() for t in inputs]
                for _ in range(input_sets(footprint, l2_bytes(local)) - 1)]
        copies = reference.input_copies
        outs = [[torch.empty_like(r) for r in results] for _ in copies]
        elapsed = time_rotated(lambda i: graph.run(*copies[i], out=outs[i]), len(copies),
                               settings.warmup_iters, settings.profile_iters)
        outcomes.append(Outcome(candidate, TIMED, elapsed, device=local))
    return outcomes


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)
