"""superoptimize on a GPU: the API end to end, planted wrong candidates,
resource limits, the cache across processes, bad arguments."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import kgc
from kgc.search import Cache
from kgc.search.tuner import GRAPH
from kgc.tiling.config import MatmulConfig
from tests.cases import headline_graph as headline
from tests.comparison import assert_matches_torch

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

QUICK = {"effort": "low", "warmup_iters": 2, "profile_iters": 20, "verbose": False}


def small_mlp():
    g = kgc.new_kernel_graph("small_mlp")
    x = g.new_input((17, 256), kgc.float16)
    w = g.new_input((256, 96), kgc.float16)
    b = g.new_input((96,), kgc.float16)
    g.mark_output(g.relu(g.add(g.matmul(x, w), b)))
    return g


def _reference(x, gamma, w):
    return torch.nn.functional.rms_norm(x.float(), (4096,), gamma.float(), eps=1e-6) @ w.float()


def test_headline_end_to_end(tmp_path):
    result = headline().superoptimize(cache=Cache(tmp_path), **QUICK)
    x = torch.randn(16, 4096, device="cuda").half()
    gamma = torch.randn(4096, device="cuda").half()
    w = (torch.randn(4096, 6144, device="cuda") * 0.5).half()
    assert_matches_torch(result(x, gamma, w), _reference(x, gamma, w), headline().build(),
                         [x, gamma, w])
    report = result.report
    assert report.counts().get("timed", 0) >= 2
    assert report.chosen_us is not None and report.default_us is not None
    assert "tt.func" in result.ttir() and ".entry" in result.ptx()
    # The choice, saved and given back, compiles the same kernels.
    again = kgc.compile(headline(), config=json.loads(result.config.to_json()))
    # (A kernel the search gave to the GPU's BLAS has no code of its own.)
    assert [k.asm.get("ttir") for k in again.kernels()] == \
        [k.asm.get("ttir") for k in result.kernels()]


def _corrupt_all_but_defaults(candidate, results):
    if candidate.endswith(":0"):
        return results
    return tuple(r + 1 for r in results)


def test_a_wrong_candidate_is_rejected_and_never_chosen(tmp_path):
    result = kgc.superoptimize(small_mlp(), cache=False, tamper=_corrupt_all_but_defaults,
                               **QUICK)
    # The kernels' candidates; the two whole graphs checked last (the
    # choice, the default compile) are not tampered with and pass.
    rows = [r for r in result.report.rows if r.signature != GRAPH]
    assert [r.status for r in result.report.rows if r.signature == GRAPH] == ["timed"] * 2
    timed = [r for r in rows if r.status == "timed"]
    rejected = [r for r in rows if r.status == "rejected"]
    assert rejected and all("off by" in r.reason for r in rejected)
    assert result.report.rejected() == rejected
    assert result.report.counts()["rejected"] == len(rejected)
    # Only default configs survive the check, so the choice is made of them.
    assert timed and all(r.default for r in timed)
    assert all(not r.default for r in rejected)
    defaults = {json.dumps(r.config, sort_keys=True) for r in timed}
    assert all(config.to_json() in defaults for config in result.config.kernels.values())


def _corrupt_all(candidate, results):
    return tuple(r + 1 for r in results)


def test_when_no_candidate_passes_the_error_quotes_the_first_reasons():
    with pytest.raises(kgc.KgcError) as caught:
        kgc.superoptimize(small_mlp(), cache=False, tamper=_corrupt_all, **QUICK)
    message = str(caught.value)
    assert "no variant of @small_mlp compiled and passed" in message
    # kgc's own config comes first, with what was wrong with its results.
    assert "first reasons: " in message and "(default config) rejected: result #0 is off by" \
        in message.split("first reasons: ")[1].split(";")[0]


def test_a_candidate_over_the_shared_memory_limit_is_skipped_without_running(tmp_path,
                                                                            monkeypatch):
    huge = MatmulConfig(block_m=128, block_n=256, block_k=128, group_m=1, num_warps=8,
                        num_stages=6)
    # The bare matmul stays kgc's Triton kernel, whose configs are the subject.
    monkeypatch.setenv("KGC_LIBRARY_KERNELS", "0")
    g = kgc.new_kernel_graph("gemm")
    a = g.new_input((128, 512), kgc.float16)
    b = g.new_input((512, 512), kgc.float16)
    g.mark_output(g.matmul(a, b))
    result = g.superoptimize(cache=False, configs={"matmul": [huge]}, **QUICK)
    (row,) = [r for r in result.report.rows if r.config == huge.to_dict()]
    assert row.status == "skipped" and "shared memory" in row.reason and row.time_us is None


_CHILD = textwrap.dedent("""
    import json, sys
    import kgc
    import kgc.pipeline.triton_stage as triton_stage
    import kgc.pipeline.compiler as compiler
    compiles = []
    original = triton_stage.worker_pool
    def counting(*args, **kwargs):
        compiles.append(args)
        return original(*args, **kwargs)
    triton_stage.worker_pool = counting
    def lowering(*args, **kwargs):
        compiles.append("lower")
        return original_compile_module(*args, **kwargs)
    original_compile_module = compiler.compile_module
    compiler.compile_module = lowering
    g = kgc.new_kernel_graph("small_mlp")
    x = g.new_input((17, 256), kgc.float16)
    w = g.new_input((256, 96), kgc.float16)
    b = g.new_input((96,), kgc.float16)
    g.mark_output(g.relu(g.add(g.matmul(x, w), b)))
    result = g.superoptimize(effort="low", warmup_iters=2, profile_iters=20, verbose=False)
    print(json.dumps({"compiles": len(compiles), "cached": result.report.cached,
                      "config": result.config.to_dict()}))
""")


def _child(cache_dir):
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          env=dict(os.environ, KGC_CACHE_DIR=str(cache_dir)))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_search_in_a_new_process_compiles_nothing(tmp_path):
    first = _child(tmp_path)
    second = _child(tmp_path)
    assert first["compiles"] > 0 and not first["cached"]
    assert second["compiles"] == 0 and second["cached"]
    assert second["config"] == first["config"]


def test_a_corrupt_cache_entry_is_rebuilt(tmp_path):
    cache = Cache(tmp_path)
    kgc.superoptimize(small_mlp(), cache=cache, **QUICK)
    (entry,) = list(tmp_path.rglob("*.zip"))
    data = entry.read_bytes()
    entry.write_bytes(data[:len(data) // 3])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = kgc.superoptimize(small_mlp(), cache=cache, **QUICK)
    assert any("corrupt" in str(w.message) for w in caught)
    assert not rebuilt.report.cached
    again = kgc.superoptimize(small_mlp(), cache=cache, **QUICK)
    assert again.report.cached


def test_bad_arguments_get_clear_errors():
    with pytest.raises(kgc.KgcError, match="effort must be one of"):
        small_mlp().superoptimize(effort="max")
    with pytest.raises(kgc.KgcError, match="no function @nope"):
        kgc.superoptimize(small_mlp(), function="nope", cache=False, **QUICK)
    with pytest.raises(kgc.KgcError, match="devices"):
        kgc.superoptimize(small_mlp(), devices=[99], cache=False, **QUICK)


def test_cuda_graph_replays_the_compiled_graph():
    graph = kgc.compile(small_mlp())
    x = torch.randn(17, 256, device="cuda").half()
    w = torch.randn(256, 96, device="cuda").half()
    b = torch.randn(96, device="cuda").half()
    expected = graph(x, w, b)
    captured = graph.cuda_graph(x, w, b)
    torch.testing.assert_close(captured.replay(), expected)
    x2 = torch.randn_like(x)
    torch.testing.assert_close(captured(x2, w, b), graph(x2, w, b))


def test_timing_on_every_device_at_once():
    # The several-GPU path (a worker thread pinned to each device) on the
    # GPUs there are. A device named twice is timed on once (two candidates
    # on one GPU at once would disturb each other's times).
    devices = list(range(torch.cuda.device_count())) * 2
    result = kgc.superoptimize(small_mlp(), devices=devices, cache=False, **QUICK)
    timed = [r for r in result.report.rows if r.status == "timed"]
    assert timed and {r.device for r in timed} <= set(devices)
    if len(set(devices)) > 1 and len(timed) >= 4 * len(set(devices)):
        # Parts of every kernel go to every GPU.
        assert {r.device for r in timed} == set(devices)
    x = torch.randn(17, 256, device="cuda").half()
    w = torch.randn(256, 96, device="cuda").half()
    b = torch.randn(96, device="cuda").half()
    expected = torch.relu(x.float() @ w.float() + b.float())
    assert_matches_torch(result(x, w, b), expected, small_mlp().build(), [x, w, b])
