"""The graph cache (kgc.pipeline.graph_cache), on the CPU: a default compile
answered before is loaded whole, with no pass and no Triton compile; its key
changes with everything the compile depends on; a damaged entry is removed
and compiled again; only default compiles with a cache are stored."""

from __future__ import annotations

import pytest

import kgc
from kgc.pipeline import compiler, graph_cache
from kgc.pipeline.graph_cache import GraphCache, graph_key
from kgc.pipeline.kernel_cache import KernelCache
from kgc.pipeline.stages import default_pipeline_text
from kgc.tiling.library import library_kernels


def _graph(eps: float = 1e-6):
    g = kgc.Graph("norm_then_product")
    x, w = g.input("x", (17, 1000), "f16"), g.input("w", (1000, 3), "f16")
    g.output(g.matmul(g.rms_norm(x, g.input("gamma", (1000,), "f16"), eps=eps), w))
    return g


def _cubins(compiled):
    return {name: kernel.artifact.cubin for name, kernel in compiled.module.kernels.items()
            if kernel.artifact is not None}


def test_a_default_compile_answered_before_runs_no_pass_and_no_triton(tmp_path, monkeypatch):
    store = KernelCache(tmp_path)
    first = kgc.compile(_graph(), target=90, cache=store)
    assert GraphCache.beside(store).stats == {"hits": 0, "stored": 1, "damaged": 0}

    def refuse(*args, **kwargs):
        raise AssertionError("a cached compile ran kgc's passes or Triton")

    monkeypatch.setattr(compiler, "split_at_lowering", refuse)
    monkeypatch.setattr("kgc.pipeline.triton_stage.compile_kernels", refuse)
    again = kgc.compile(_graph(), target=90, cache=store)
    assert GraphCache.beside(store).stats["hits"] == 1
    assert _cubins(again) == _cubins(first) and _cubins(first)
    assert again.module.stages == first.module.stages
    assert again.module.manifest() == first.module.manifest()


def test_the_key_changes_with_what_the_compile_depends_on(monkeypatch):
    text = _graph().to_mlir()
    base = graph_key(text, 90)
    assert graph_key(text, 90) == base
    assert _graph(1e-5).to_mlir() != text
    assert graph_key(_graph(1e-5).to_mlir(), 90) != base
    assert graph_key(text, 80) != base
    with library_kernels(False):
        assert graph_key(text, 90) != base
    # The tests run with the tuned table off (conftest); the shipped one is
    # another key.
    tuned = {}
    for setting in ("off", "on"):
        monkeypatch.setenv("KGC_TUNED_DEFAULTS", setting)
        tuned[setting] = graph_key(text, 90)
    assert tuned["off"] != tuned["on"]
    # Another version of kgc's own code.
    monkeypatch.setattr(graph_cache, "compiler_fingerprint", lambda: "0" * 64)
    assert graph_key(text, 90) != base


def test_the_compiler_fingerprint_covers_the_passes_and_the_native_dialect():
    from kgc import _dialect

    files = graph_cache.compiler_files()
    names = {path.name for path in files}
    assert {"fuse.py", "greedy.py", "plan.py", "compiler.py", "sm_90.json"} <= names
    assert _dialect._find_library().resolve() in files


def test_a_damaged_entry_is_removed_and_compiled_again(tmp_path):
    store = KernelCache(tmp_path)
    first = kgc.compile(_graph(), target=90, cache=store)
    (cubin,) = [path for path in (tmp_path / "graphs").rglob("*.cubin")][:1]
    cubin.write_bytes(cubin.read_bytes()[:100])  # truncated
    with pytest.warns(RuntimeWarning, match="ignoring the damaged entry"):
        again = kgc.compile(_graph(), target=90, cache=store)
    stats = GraphCache.beside(store).stats
    assert stats["damaged"] == 1 and stats["stored"] == 2 and stats["hits"] == 0
    assert _cubins(again) == _cubins(first)
    # Stored again whole: the next compile is a hit.
    kgc.compile(_graph(), target=90, cache=store)
    assert GraphCache.beside(store).stats["hits"] == 1


def test_only_default_compiles_with_a_cache_are_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("KGC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KGC_CACHE_URL", raising=False)
    monkeypatch.delenv("KGC_KERNEL_CACHE", raising=False)
    kgc.compile(_graph(), target=90)  # no cache asked for
    kgc.compile(_graph(), target=90, cache=False)
    assert not (tmp_path / "graphs").exists()
    # A pipeline of one's own is not the default compile.
    kgc.compile(_graph(), target=90, cache=True, pipeline=default_pipeline_text(90))
    assert not (tmp_path / "graphs").exists()
    kgc.compile(_graph(), target=90, cache=True)
    assert len(list((tmp_path / "graphs").glob("*/*/manifest.json"))) == 1
