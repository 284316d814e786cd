"""The search's compile farm on a real local Ray cluster (CPU, no GPU): the
candidates lowered and compiled as Ray tasks are the artifacts the local
worker pool makes, and a failing candidate is a failed row either way."""

from __future__ import annotations

import hashlib
import time

import pytest

import kgc
from kgc.diagnostics import KgcError
from kgc.parsing import canonical_source
from kgc.pipeline.stages import parse_target
from kgc.search import tuner
from kgc.search.farm import Farm
from kgc.search.profile import TrialSettings
from kgc.search.space import variant_space

pytest.importorskip("torch")


def small_mlp() -> kgc.Graph:
    g = kgc.Graph("small_mlp")
    x = g.input("x", (17, 256), "f16")
    w = g.input("w", (256, 96), "f16")
    b = g.input("b", (96,), "f16")
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    return g


class Progress:
    def __init__(self):
        self.counts = {}

    def count(self, status, time_us=None):
        self.counts[status] = self.counts.get(status, 0) + 1


def make_search(cluster):
    text, function, _ = canonical_source(small_mlp(), None)
    return tuner._Search(text, function, parse_target(90), "low", {}, 2, 120.0,
                         TrialSettings(), [0], None, False, time.monotonic(), cluster)


def fingerprint(compiled: dict) -> dict:
    # A library kernel (a bare matmul offered to the GPU's BLAS) compiles
    # nothing: it has no artifact.
    return {key: sorted((a.hash, hashlib.sha256(a.cubin).hexdigest())
                        for a in (k.artifact for k in module.kernels.values())
                        if a is not None)
            for key, module in compiled.items()}


@pytest.fixture
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield ray
    ray.shutdown()


def test_the_farm_compiles_the_same_artifacts_as_the_local_pool(ray_cluster):
    local = make_search(None)
    _, kernels = variant_space(local.text, local.function, "low", local.target)
    selection = [(signature, index) for signature, variants in kernels.items()
                 for index in range(min(2, len(variants.configs)))]
    progress = Progress()
    here = local._compile(kernels, local._lower(kernels, selection, progress), progress)
    farmed = make_search("ray")._compile_on_cluster(kernels, selection, Progress())
    assert len(here) == len(selection) >= 2
    assert fingerprint(farmed) == fingerprint(here)
    # What comes back runs like a module compiled here: every stage kept.
    module = next(iter(farmed.values()))
    assert module.emitted == "cubin"
    assert all(k.asm["cubin"] == k.artifact.cubin for k in module.kernels.values())


def test_a_candidate_that_fails_on_the_farm_is_a_failed_row(ray_cluster):
    search = make_search("ray")
    _, kernels = variant_space(search.text, search.function, "low", search.target)
    signature = next(iter(kernels))
    # Triton cannot finish in this time: the task's KgcError comes back as a row.
    search.timeout_s = 0.0001
    progress = Progress()
    assert search._compile_on_cluster(kernels, [(signature, 0)], progress) == {}
    (row,) = search.rows
    assert row.status == tuner.FAILED
    assert "Triton failed to compile kernel @small_mlp_0_matmul" in row.reason
    assert progress.counts == {tuner.FAILED: 1}


def test_an_address_that_is_no_cluster_is_a_clear_error():
    with pytest.raises(KgcError, match="cluster must be 'ray' or a Ray cluster's address"):
        Farm.require("")


def test_without_ray_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # what an import finds without Ray
    with pytest.raises(KgcError, match=r"Ray is not installed: pip install 'kgc\[cluster\]'"):
        Farm.require("ray")
    # superoptimize says so before it looks for a GPU.
    with pytest.raises(KgcError, match=r"pip install 'kgc\[cluster\]'"):
        kgc.superoptimize(small_mlp(), cluster="ray")


def test_the_search_compiles_a_candidate_once_through_the_kernel_cache(tmp_path):
    from kgc.pipeline.kernel_cache import KernelCache

    def compile_selection(store):
        search = make_search(None)
        search.kernel_cache = store
        _, kernels = variant_space(search.text, search.function, "low", search.target)
        selection = [(signature, 0) for signature in kernels]
        progress = Progress()
        return search._compile(kernels, search._lower(kernels, selection, progress), progress)

    first_store, second_store = KernelCache(tmp_path), KernelCache(tmp_path)
    first = compile_selection(first_store)
    second = compile_selection(second_store)
    assert first_store.stats["compiled"] == len(first) >= 1
    assert second_store.stats["compiled"] == 0
    assert second_store.stats["local_hits"] == first_store.stats["compiled"]
    assert fingerprint(second) == fingerprint(first)
