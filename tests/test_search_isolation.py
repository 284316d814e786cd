"""The search's worker process (kgc.search.isolation): a candidate that
faults, kills or hangs its worker is a rejected row, and the candidates
after it are checked and timed in a new worker."""

import pytest

from kgc.diagnostics import KgcError
from kgc.search.isolation import IsolatedGPU
from kgc.search.profile import REJECTED, TIMED, KernelTrial, TrialSettings
from kgc.search.trials import isolated

HOOKS = "tests.isolation_hooks"


def trial(*candidates, signature="kernel"):
    return KernelTrial(signature, "f", "module {}", [(c, None) for c in candidates])


def served_by(outcome):
    return outcome.reason.removeprefix("pid ")


def test_candidates_are_timed_in_order_by_one_worker():
    with IsolatedGPU(0, hooks=HOOKS) as gpu:
        first = gpu.run(trial("ok-3", "ok-1", "ok-2"), TrialSettings())
        second = gpu.run(trial("ok-5", signature="other"), TrialSettings())
    assert [(o.candidate, o.status, o.time_us) for o in first] == [
        ("ok-3", TIMED, 3.0), ("ok-1", TIMED, 1.0), ("ok-2", TIMED, 2.0)]
    assert second[0].status == TIMED
    assert gpu.started == 1
    assert len({served_by(o) for o in first + second}) == 1


def test_the_worker_loads_its_module_once(capfd):
    # Started as `python -m kgc.search.isolation`, the worker imported the
    # module through its package and then ran it again as __main__, and
    # runpy warned on every start of every search.
    with IsolatedGPU(0, hooks=HOOKS) as gpu:
        outcomes = gpu.run(trial("ok-1"), TrialSettings())
    assert outcomes[0].status == TIMED
    assert "found in sys.modules" not in capfd.readouterr().err


def test_a_candidate_that_breaks_the_context_is_rejected_and_the_rest_run_in_a_new_worker():
    with IsolatedGPU(0, hooks=HOOKS) as gpu:
        outcomes = gpu.run(trial("ok-1", "fault", "ok-2", "raise", "ok-3", "crash-3", "ok-4"),
                           TrialSettings())
    statuses = [(o.candidate, o.status) for o in outcomes]
    assert statuses == [("ok-1", TIMED), ("fault", REJECTED), ("ok-2", TIMED),
                        ("raise", REJECTED), ("ok-3", TIMED), ("crash-3", REJECTED),
                        ("ok-4", TIMED)]
    reasons = {o.candidate: o.reason for o in outcomes}
    assert "faulted on the GPU" in reasons["fault"] and "misaligned address" in reasons["fault"]
    assert "illegal memory access" in reasons["raise"]
    assert "died (exit code 3)" in reasons["crash-3"]
    # Four workers: the first, and one after each loss.
    assert gpu.started == 4
    timed = [served_by(o) for o in outcomes if o.status == TIMED]
    assert len(set(timed)) == 4


def test_a_candidate_that_does_not_finish_is_rejected():
    with IsolatedGPU(0, hooks=HOOKS, answer_timeout_s=3) as gpu:
        outcomes = gpu.run(trial("hang-60", "ok-1"), TrialSettings())
    assert [o.status for o in outcomes] == [REJECTED, TIMED]
    assert "did not finish within 3 s" in outcomes[0].reason


def test_an_error_that_is_no_fault_ends_the_run_with_the_workers_traceback():
    with IsolatedGPU(0, hooks=HOOKS) as gpu:
        with pytest.raises(KgcError, match="ValueError: no such action: bogus"):
            gpu.run(trial("ok-1", "bogus"), TrialSettings())


def test_a_tamper_hook_keeps_the_trials_in_process():
    settings = TrialSettings(tamper=lambda candidate, results: results)
    assert not isolated(settings)
    assert isolated(TrialSettings()) and not isolated(TrialSettings(isolated=False))
    with pytest.raises(ValueError, match="in process"):
        IsolatedGPU(0, hooks=HOOKS).run(trial("ok-1"), settings)


def test_a_searchs_rounds_share_each_gpus_worker():
    # A search checks in rounds (defaults, the rest, the whole graphs): the
    # worker it passes along serves them all, started once.
    from kgc.search.trials import close_workers, run_trials

    workers = {0: IsolatedGPU(0, hooks=HOOKS)}
    try:
        first = run_trials([trial("ok-1")], TrialSettings(), [0], workers=workers)
        second = run_trials([trial("ok-2", signature="graph")], TrialSettings(), [0],
                            workers=workers)
    finally:
        close_workers(workers)
    assert served_by(first["kernel"][0]) == served_by(second["graph"][0])
    assert workers[0].started == 1


def test_a_kernels_reference_is_made_once_for_its_candidates_and_only_the_last_is_kept():
    with IsolatedGPU(0, hooks=HOOKS) as gpu:
        reasons = [o.reason for t in (trial("ref", "ref", signature="a"),
                                      trial("ref", signature="a"),
                                      trial("ref", signature="b"),
                                      trial("ref", signature="a"))
                   for o in gpu.run(t, TrialSettings())]
    assert reasons == ["reference 1 of a", "reference 1 of a", "reference 1 of a",
                       "reference 2 of b", "reference 3 of a"]
