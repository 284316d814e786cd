"""Sharing candidates out between GPUs (kgc.search.devices), without GPUs:
the checking and timing of a part and the device context are test doubles
that record where each part ran."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from kgc.search.devices import MAX_PART, parts_of, run_on_devices
from kgc.search.profile import TIMED, KernelTrial, Outcome, TrialSettings

_where = threading.local()


@contextlib.contextmanager
def pinned(device: int):
    _where.device = device
    yield
    del _where.device


def trial(signature: str, candidates: int) -> KernelTrial:
    return KernelTrial(signature, "f", f"// {signature}",
                       [(f"{signature}:{i}", object()) for i in range(candidates)])


class Recorder:
    def __init__(self, delay: float = 0.002):
        self.delay = delay
        self.references: list[tuple[int, str]] = []
        self.ran: list[tuple[int, str]] = []
        self.lock = threading.Lock()

    def reference(self, part, settings):
        with self.lock:
            self.references.append((_where.device, part.signature))
        return ("reference of", part.signature, _where.device)

    def runner(self, part, settings, reference):
        assert reference == ("reference of", part.signature, _where.device)
        outcomes = []
        for candidate, _ in part.candidates:
            time.sleep(self.delay)
            with self.lock:
                self.ran.append((_where.device, candidate))
            outcomes.append(Outcome(candidate, TIMED, float(len(candidate)), device=_where.device))
        return outcomes


def run(trials, devices, recorder, on_done=None):
    return run_on_devices(trials, TrialSettings(), devices, on_done, runner=recorder.runner,
                          reference=recorder.reference, pin=pinned)


def test_every_candidate_runs_once_and_both_devices_share_one_long_kernel():
    trials = [trial("long", 40), trial("short", 3)]
    recorder = Recorder()
    results = run(trials, [0, 1], recorder)
    ran = sorted(candidate for _, candidate in recorder.ran)
    assert ran == sorted(c for t in trials for c, _ in t.candidates)
    assert {device for device, candidate in recorder.ran if candidate.startswith("long")} == {0, 1}
    # Results by kernel, in the order of its candidates, with their devices.
    assert [o.candidate for o in results["long"]] == [c for c, _ in trials[0].candidates]
    assert [o.candidate for o in results["short"]] == [c for c, _ in trials[1].candidates]
    assert all(o.device in (0, 1) for outcomes in results.values() for o in outcomes)


def test_a_device_makes_a_kernel_s_reference_once():
    recorder = Recorder()
    run([trial("a", 30), trial("b", 30)], [0, 1], recorder)
    assert len(recorder.references) == len(set(recorder.references))
    assert {signature for _, signature in recorder.references} == {"a", "b"}


def test_on_done_sees_every_part_one_at_a_time():
    inside = threading.Lock()
    seen = []

    def on_done(part, outcomes):
        assert inside.acquire(blocking=False), "on_done entered from two threads at once"
        try:
            time.sleep(0.001)
            seen.extend(o.candidate for o in outcomes)
        finally:
            inside.release()

    trials = [trial("k", 25)]
    run(trials, [0, 1, 2], Recorder(), on_done)
    assert sorted(seen) == sorted(c for c, _ in trials[0].candidates)


def test_a_worker_s_error_is_raised_and_stops_the_others():
    recorder = Recorder()

    def failing(part, settings, reference):
        if _where.device == 1:
            raise RuntimeError("device 1 failed")
        return recorder.runner(part, settings, reference)

    with pytest.raises(RuntimeError, match="device 1 failed"):
        run_on_devices([trial("k", 200)], TrialSettings(), [0, 1], None, runner=failing,
                       reference=recorder.reference, pin=pinned)
    # Device 0 stopped at its next part instead of running all 200.
    assert len(recorder.ran) < 200


def test_parts_are_small_enough_to_share_and_keep_their_order():
    trials = [trial("a", 100), trial("b", 5)]
    parts = parts_of(trials, 2)
    assert max(len(p.candidates) for p in parts) <= MAX_PART
    assert len(parts) >= 2 * 2
    assert [c for p in parts for c, _ in p.candidates] == [c for t in trials
                                                           for c, _ in t.candidates]
    assert all(p.signature == p.candidates[0][0].split(":")[0] for p in parts)
    # One candidate in all is one part.
    assert [len(p.candidates) for p in parts_of([trial("one", 1)], 4)] == [1]


def test_a_device_named_twice_is_refused():
    with pytest.raises(ValueError, match="distinct"):
        run([trial("k", 4)], [0, 0], Recorder())
