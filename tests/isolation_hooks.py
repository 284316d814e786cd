"""Hooks for kgc.search.isolation's worker that act out, without a GPU, what
candidates do on one: each candidate's id says what it does."""

import os
import time

from kgc.search.profile import REJECTED, TIMED, Outcome

_broken: str | None = None


def pin(device):
    pass


_references_made = 0


def make_reference(trial, settings):
    global _references_made
    _references_made += 1
    return f"reference {_references_made} of {trial.signature}"


def run_trial(trial, settings, reference):
    global _broken
    (candidate, _), = trial.candidates
    action, _, value = candidate.partition("-")
    if action == "ok":
        return [Outcome(candidate, TIMED, float(value), reason=f"pid {os.getpid()}")]
    if action == "ref":  # says which reference it was checked against
        return [Outcome(candidate, TIMED, 1.0, reason=reference)]
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
