"""Checking and timing candidates on several GPUs of one host at once.

`run_on_devices(trials, settings, devices)` runs one worker thread per GPU,
each pinned to its device for its whole life (`torch.cuda.device`), and
shares the candidates out between them in parts: each kernel's candidates
are cut into parts of a few (`parts_of`), and a worker that finishes one
part takes the next from a shared queue, so that no GPU waits while
another still has a long kernel to go. A worker makes the reference of a
kernel (its inputs and results, `profile.make_reference`) once and checks
every part of that kernel it takes against it.

Threads rather than processes: a worker process would start Python, import
torch, Triton and MLIR, create a CUDA context and load every candidate's
cubin again; in one process the workers share what is loaded, nothing is
pickled to them, and the GIL is free while a GPU runs (its timing replays
CUDA graphs and waits on events). Each timing captures its CUDA graph on a
stream of its own in thread-local mode (`measure.time_rotated`), so one
worker's capture is not disturbed by another's allocations. (The search
runs its trials in worker processes all the same, one per GPU, for another
reason: a candidate that faults must not end it. There each thread hands its
parts to its GPU's process: `kgc.search.trials`.)

A worker's error stops the others at their next part and is raised here.
"""

from __future__ import annotations

import math
import queue
import threading
from typing import Callable, ContextManager, Sequence

from kgc.search.profile import KernelTrial, Outcome, TrialSettings, make_reference, run_trial

# Parts per device: enough that the GPUs finish close together, few enough
# that each part times several candidates.
PARTS_PER_DEVICE = 4
MAX_PART = 16


def parts_of(trials: Sequence[KernelTrial], devices: int) -> list[KernelTrial]:
    """`trials` cut into parts, in order, each a trial of one kernel with
    some of its candidates: about PARTS_PER_DEVICE parts per device in all,
    of at most MAX_PART candidates."""
    total = sum(len(t.candidates) for t in trials)
    size = max(1, min(MAX_PART, math.ceil(total / (PARTS_PER_DEVICE * max(devices, 1)))))
    parts = []
    for trial in trials:
        for start in range(0, len(trial.candidates), size):
            parts.append(KernelTrial(trial.signature, trial.function, trial.inline_text,
                                     trial.candidates[start:start + size]))
    return parts


def _pin(device: int) -> ContextManager:
    import torch

    return torch.cuda.device(device)


def run_on_devices(trials: Sequence[KernelTrial], settings: TrialSettings,
                   devices: Sequence[int],
                   on_done: Callable[[KernelTrial, list[Outcome]], None] | None = None, *,
                   runner: Callable = run_trial, reference: Callable = make_reference,
                   pin: Callable[[int], ContextManager] = _pin) -> dict[str, list[Outcome]]:
    """Outcomes of every trial by signature (in the order of its candidates),
    its parts run on `devices` side by side; `on_done(part, outcomes)` after
    each part, never from two threads at once. `runner`, `reference` and
    `pin` are `run_trial`, `make_reference` and a device context, which
    tests replace."""
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices must be distinct, got {list(devices)}")
    work: "queue.SimpleQueue[KernelTrial]" = queue.SimpleQueue()
    for part in parts_of(trials, len(devices)):
        work.put(part)
    done: list[tuple[KernelTrial, list[Outcome]]] = []
    lock = threading.Lock()
    failures: list[BaseException] = []
    stop = threading.Event()

    def worker(device: int) -> None:
        references: dict[str, object] = {}
        try:
            with pin(device):
                while not stop.is_set():
                    try:
                        part = work.get_nowait()
                    except queue.Empty:
                        return
                    if part.signature not in references:
                        references[part.signature] = reference(part, settings)
                    outcomes = runner(part, settings, references[part.signature])
                    with lock:
                        done.append((part, outcomes))
                        if on_done is not None:
                            on_done(part, outcomes)
        except BaseException as error:  # noqa: BLE001  (raised again by the caller)
            with lock:
                failures.append(error)
            stop.set()

    threads = [threading.Thread(target=worker, args=(device,), name=f"kgc-gpu{device}",
                                daemon=True) for device in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    results: dict[str, list[Outcome]] = {trial.signature: [] for trial in trials}
    positions = {(trial.signature, candidate): index for trial in trials
                 for index, (candidate, _) in enumerate(trial.candidates)}
    for part, outcomes in done:
        results[part.signature].extend(outcomes)
    for signature, outcomes in results.items():
        outcomes.sort(key=lambda o: positions.get((signature, o.candidate), 0))
    return results
