"""The search's report without a GPU: every candidate the check rejects is a
row of the report with its reason, counted by `SearchReport.counts()` and
listed by `SearchReport.rejected()`, the whole graphs checked last
included, and the search says how many it rejected. Lowering to TTIR is
kgc's own; compiling to cubin, running and timing are test doubles, and the
check is the real one (`kgc.search.verify.mismatch`) on CPU tensors."""

from __future__ import annotations

import contextlib
import logging
import time
import types

import pytest

import kgc
from kgc.parsing import canonical_source
from kgc.pipeline.config import GraphConfig
from kgc.pipeline.stages import parse_target
from kgc.search import tuner
from kgc.search.profile import REJECTED, TIMED, Outcome, TrialSettings
from kgc.search.verify import mismatch

torch = pytest.importorskip("torch")


def small_mlp() -> kgc.Graph:
    g = kgc.Graph("small_mlp")
    x = g.input("x", (17, 256), "f16")
    w = g.input("w", (256, 96), "f16")
    b = g.input("b", (96,), "f16")
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    return g


def _reference():
    """A small-valued result (a softmax row of 4097), its eager and exact
    forms: what the doubles' candidates are checked against."""
    x = torch.randn(5, 4097, generator=torch.Generator().manual_seed(0))
    exact = torch.softmax(x.double(), -1)
    return torch.softmax(x, -1).to(torch.bfloat16), exact


def _check(index: int) -> tuple[str, str | None]:
    """Candidate `index` of a kernel: even ones give the right result, odd
    ones zeros, which the former rule took for bf16 softmax of this size."""
    eager, exact = _reference()
    got = eager if index % 2 == 0 else torch.zeros_like(eager)
    reason = mismatch([got], [eager], [exact])
    return (REJECTED, reason) if reason else (TIMED, None)


@pytest.fixture
def search(monkeypatch):
    def compile_without_triton(self, kernels, lowered, progress):
        for _ in lowered:
            progress.count("compiled")
        return dict(lowered)

    def run_trials(trials, settings, devices, on_done=None, workers=None):
        results = {}
        for trial in trials:
            if trial.signature == tuner.GRAPH:
                # The choice fails as a whole graph; the default compile passes.
                eager, exact = _reference()
                reason = mismatch([torch.zeros_like(eager)], [eager], [exact])
                results[trial.signature] = [Outcome("0", REJECTED, reason=reason, device=0),
                                            Outcome("1", TIMED, 12.0, device=0)]
                continue
            outcomes = []
            for candidate, _ in trial.candidates:
                status, reason = _check(int(candidate.rsplit(":", 1)[1]))
                outcomes.append(Outcome(candidate, status, 10.0 if status == TIMED else None,
                                        reason or "", device=0))
            results[trial.signature] = outcomes
            on_done(trial, outcomes)
        return results

    monkeypatch.setattr(tuner._Search, "_compile", compile_without_triton)
    monkeypatch.setattr(tuner._Search, "_compile_graph",
                        lambda self, config: types.SimpleNamespace(module=None))
    monkeypatch.setattr(tuner, "run_trials", run_trials)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    text, function, _ = canonical_source(small_mlp(), None)
    return tuner._Search(text, function, parse_target(80), "low", {}, 1, 60.0, TrialSettings(),
                         [0], None, False, time.monotonic())


def test_every_rejected_candidate_is_counted_with_its_reason(search, caplog):
    with caplog.at_level(logging.WARNING, logger=tuner.__name__):
        graph = search.run()
    report = graph.report
    kernel_rows = [row for row in report.rows if row.signature != tuner.GRAPH]
    tried = [row for row in kernel_rows if row.status in (TIMED, REJECTED)]
    assert len(tried) >= 2
    rejected = report.rejected()
    # Every odd candidate of every kernel, and the chosen whole graph.
    assert len(rejected) == sum(row.status == REJECTED for row in kernel_rows) + 1 >= 2
    assert report.counts()[REJECTED] == len(rejected)
    assert all(row.reason.startswith("result #0 is off by") for row in rejected)
    graph_rows = [row for row in report.rows if row.signature == tuner.GRAPH]
    assert [(row.status, row.default) for row in graph_rows] == [(REJECTED, False),
                                                                 (TIMED, True)]
    # The default compile is kept, the choice having failed its check.
    assert graph.config == GraphConfig(search.function)
    assert report.chosen_us is None and report.default_us == 12.0
    # The report survives the cache's round trip with its rejections.
    again = tuner.SearchReport.from_dict(report.to_dict())
    assert again.counts() == report.counts() and again.rejected() == rejected
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{len(rejected)} candidate(s) of @small_mlp gave wrong results" in warning.message
    assert "result #0 is off by" in warning.message
