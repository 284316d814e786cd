"""The shared cache on a GPU host: a model whose kernels another process
(another machine, with its own empty folder) compiled starts with no
compile in its first call, served by the Redis server, and computes what
torch does; a search result shared the same way is served with no search,
carrying the evidence of its check on this GPU model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.shared_cache_server import redis_server  # noqa: F401  (a fixture)

_MODEL = textwrap.dedent("""
    import json, torch
    from kgc.pipeline.kernel_cache import KernelCache

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 96), torch.nn.GELU(),
                                torch.nn.Linear(96, 17)).cuda().half()
    x = torch.randn(33, 256, device="cuda", dtype=torch.float16)
    compiled = torch.compile(model, backend="kgc")
    with torch.no_grad():
        got, expected = compiled(x), model(x)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
    print(json.dumps(KernelCache.resolve(None).stats))
""")

_SEARCH = textwrap.dedent("""
    import json, sys
    import kgc

    g = kgc.new_kernel_graph("small_mlp")
    x = g.new_input((17, 256), kgc.float16)
    w = g.new_input((256, 96), kgc.float16)
    g.mark_output(g.relu(g.matmul(x, w)))
    result = g.superoptimize(effort="low", warmup_iters=2, profile_iters=20, verbose=False,
                             cache=sys.argv[1])
    print(json.dumps({"cached": result.report.cached, "config": result.config.to_dict()}))
""")


def _child(script, cache_dir, url, *arguments):
    env = dict(os.environ, KGC_CACHE_DIR=str(cache_dir), KGC_CACHE_URL=url)
    done = subprocess.run([sys.executable, "-c", script, *arguments], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_a_model_starts_with_no_compile_from_the_shared_cache(redis_server, tmp_path):
    first = _child(_MODEL, tmp_path / "builder", redis_server.url)
    assert first["compiled"] > 0
    second = _child(_MODEL, tmp_path / "replica", redis_server.url)
    assert second["compiled"] == 0 and second["remote_hits"] == first["compiled"]


@pytest.mark.gpu
def test_a_search_result_is_served_to_another_machine(redis_server, tmp_path):
    first = _child(_SEARCH, tmp_path / "searcher", redis_server.url, redis_server.url)
    assert not first["cached"]
    second = _child(_SEARCH, tmp_path / "replica", redis_server.url, redis_server.url)
    assert second["cached"] and second["config"] == first["config"]
    (key,) = redis_server.client.scan_iter(match="kgc:*:search:*")
    assert redis_server.client.get(key)
