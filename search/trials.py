"""Where a search's trials run: on one GPU or shared out between several of
one model (`kgc.search.devices`), and, unless the settings say otherwise,
in a worker process per GPU that a faulting candidate may take down
(`kgc.search.isolation`) rather than in this process.

    results = run_trials(trials, settings, devices)   # {signature: [Outcome, ...]}
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Sequence

from kgc.diagnostics import KgcError
from kgc.search.devices import run_on_devices
from kgc.search.isolation import IsolatedGPU
from kgc.search.profile import KernelTrial, Outcome, TrialSettings, run_trial


def visible_devices() -> list[int]:
    import torch

    return list(range(torch.cuda.device_count()))


def run_trials(trials: Sequence[KernelTrial], settings: TrialSettings,
               devices: Sequence[int] | None = None,
               on_done: Callable[[KernelTrial, list[Outcome]], None] | None = None,
               workers: dict[int, IsolatedGPU] | None = None) -> dict[str, list[Outcome]]:
    """Outcomes of every trial by signature, using `devices` (default: every
    visible GPU; they must be of one model, so that times compare). With
    several, `kgc.search.devices` shares the candidates out between them;
    `on_done` is then called once per part of a trial, with its outcomes.
    `workers` holds each GPU's worker process between calls (a search's
    rounds): the caller closes them (`close_workers`); without it, the
    workers this call starts end with it."""
    # A GPU named twice is one: two candidates timed on it at once would
    # disturb each other's times.
    devices = list(dict.fromkeys(visible_devices() if devices is None else devices))
    if not devices:
        raise KgcError("timing candidates needs a CUDA device; none is visible")
    owned = workers is None
    workers = {} if owned else workers
    try:
        return _run_trials(trials, settings, devices, on_done, workers)
    finally:
        if owned:
            close_workers(workers)


def close_workers(workers: dict[int, IsolatedGPU]) -> None:
    for worker in workers.values():
        worker.close()


def _run_trials(trials, settings, devices, on_done, workers) -> dict[str, list[Outcome]]:
    if isolated(settings):
        for device in devices:
            workers.setdefault(device, IsolatedGPU(device))
    if len(devices) > 1:
        from triton.runtime.driver import driver

        check_one_model(devices)
        driver.active.utils  # Triton's driver, made once here, not by two workers at once
        if not isolated(settings):
            return run_on_devices(trials, settings, devices, on_done)
        # Each GPU's thread hands its parts to that GPU's worker process,
        # which makes the references there.
        bound = threading.local()

        @contextlib.contextmanager
        def pin(device: int):
            bound.gpu = workers[device]
            yield

        return run_on_devices(trials, settings, devices, on_done,
                              runner=lambda part, s, _: bound.gpu.run(part, s),
                              reference=lambda part, s: None, pin=pin)
    if isolated(settings):
        worker = workers[devices[0]]
        run, place = (lambda trial: worker.run(trial, settings)), contextlib.nullcontext()
    else:
        import torch

        run, place = (lambda trial: run_trial(trial, settings)), torch.cuda.device(devices[0])
    results: dict[str, list[Outcome]] = {}
    with place:
        for trial in trials:
            results[trial.signature] = run(trial)
            if on_done:
                on_done(trial, results[trial.signature])
    return results


def isolated(settings: TrialSettings) -> bool:
    """Whether trials with `settings` run in worker processes."""
    return settings.isolated and settings.tamper is None


def check_one_model(devices: Sequence[int]) -> None:
    import torch

    names = {torch.cuda.get_device_name(d) for d in devices}
    if len(names) > 1:
        raise KgcError(f"the GPUs to time on are of several models ({', '.join(sorted(names))}); "
                       "times would not compare: choose devices of one model")
