"""Hooks for kgc.search.isolation's worker that act out, without a GPU, what
candidates do on one: each candidate's id says what it does."""

import os
import time

from kgc.search.profile import REJECTED, TIMED, Outcome

_broken: str | None = None


def pin(device):
    pass


def make_reference(trial, settings):
    return f"reference of {trial.signature} in {os.getpid()}"


def run_trial(trial, settings, reference):
    global _broken
    (candidate, _), = trial.candidates
    action, _, value = candidate.partition("-")
    if action == "ok":
        return [Outcome(candidate, TIMED, float(value), reason=f"pid {os.getpid()}")]
    if action == "fault":  # the launch fails; run_trial rejects it and goes on
        _broken = "CUDA error: misaligned address"
        return [Outcome(candidate, REJECTED, reason=f"failed to run: {_broken}")]
    if action == "raise":  # the fault surfaces in the check, as an exception
        _broken = "CUDA error: an illegal memory access was encountered"
        raise RuntimeError(_broken)
    if action == "crash":
        os._exit(int(value))
    if action == "hang":
        time.sleep(float(value))
    raise ValueError(f"no such action: {candidate}")


def context_error():
    return _broken
