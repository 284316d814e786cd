"""The kernel and search caches shared through a real Redis server (CPU):
processes with empty local folders share compiled kernels, a corrupt remote
entry is rebuilt, a server that is gone or silent costs a warning and a
bounded wait, and a search result is served only with its evidence."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings

import pytest

from kgc.pipeline.remote_cache import RemoteCache, unframe
from kgc.search.cache import EVIDENCE, Cache, CacheKey, Entry
from tests.shared_cache_server import redis_server  # noqa: F401  (a fixture)

# Compiles a softmax of 17x1000 and a relu of 3x4097 in a fresh interpreter
# and prints what the kernel cache did and the sha256 of every cubin.
COMPILE = """
import hashlib, json, sys
import kgc
from kgc.pipeline.graph_cache import GraphCache
from kgc.pipeline.kernel_cache import KernelCache

g = kgc.Graph("two")
x = g.input("x", (17, 1000), "f16")
y = g.input("y", (3, 4097), "f32")
g.output(g.softmax(x))
g.output(g.relu(y))
compiled = kgc.compile(g, target=90, cache=True)
store = KernelCache.resolve(True)
print(json.dumps({
    "stats": store.stats,
    "graphs": GraphCache.beside(store).stats,
    "cubins": sorted(hashlib.sha256(k.artifact.cubin).hexdigest()
                     for k in compiled.module.kernels.values())}))
"""


def compile_in_child(cache_dir, url=None, timeout=300):
    env = dict(os.environ, KGC_CACHE_DIR=str(cache_dir))
    env.pop("KGC_CACHE_URL", None)
    if url is not None:
        env["KGC_CACHE_URL"] = url
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", COMPILE], env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr, time.monotonic() - started


def kernel_keys(server):
    return sorted(server.client.scan_iter(match="kgc:*:kernel:*"))


def test_a_second_process_compiles_nothing_and_gets_the_same_kernels(redis_server, tmp_path):
    first, _, _ = compile_in_child(tmp_path / "first", redis_server.url)
    assert first["stats"]["compiled"] == 2 and first["stats"]["remote_hits"] == 0
    assert len(kernel_keys(redis_server)) == 2
    second, _, _ = compile_in_child(tmp_path / "second", redis_server.url)
    assert second["stats"] == {"local_hits": 0, "remote_hits": 2, "compiled": 0, "corrupt": 0}
    assert second["cubins"] == first["cubins"]
    # Written through: the next process on that machine needs no server,
    # and its graph cache answers the whole compile.
    third, _, _ = compile_in_child(tmp_path / "second")
    assert third["graphs"]["hits"] == 1 and third["stats"]["compiled"] == 0
    assert third["cubins"] == first["cubins"]
    # Without the graph (another machine's first compile of it) the local
    # kernel entries serve every kernel.
    shutil.rmtree(tmp_path / "second" / "graphs")
    fourth, _, _ = compile_in_child(tmp_path / "second")
    assert fourth["stats"]["local_hits"] == 2 and fourth["stats"]["compiled"] == 0
    assert fourth["cubins"] == first["cubins"]


def test_a_corrupt_remote_entry_is_detected_and_rebuilt(redis_server, tmp_path):
    first, _, _ = compile_in_child(tmp_path / "first", redis_server.url)
    key = kernel_keys(redis_server)[0]
    good = redis_server.client.get(key)
    # One byte of the payload altered, its header kept: only the sha256 tells.
    redis_server.client.set(key, good[:-10] + bytes([good[-10] ^ 0xFF]) + good[-9:])
    second, stderr, _ = compile_in_child(tmp_path / "second", redis_server.url)
    assert "does not match its sha256; it is ignored and rebuilt" in stderr
    assert second["stats"]["compiled"] == 1 and second["stats"]["remote_hits"] == 1
    assert second["cubins"] == first["cubins"]
    # Rebuilt and overwritten on the server.
    assert redis_server.client.get(key) == good and unframe(good) is not None


def test_a_stopped_server_is_a_warning_and_local_work(redis_server, tmp_path):
    url = redis_server.url
    redis_server.stop()
    local, _, local_s = compile_in_child(tmp_path / "local")
    shared, stderr, shared_s = compile_in_child(tmp_path / "shared", url)
    assert stderr.count(f"kgc remote cache {url} is unreachable") == 1, stderr
    assert shared["stats"]["compiled"] == 2
    assert shared["cubins"] == local["cubins"]
    # Nothing waits on the server: a refused connection, not retried.
    assert shared_s < local_s + 5


def test_a_silent_server_costs_its_timeout_once():
    # A socket that listens and never answers: connects, then reads time out.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        remote = RemoteCache(url, timeout_s=0.5)
        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert remote.get("kernel", "a" * 64) is None
            remote.put("kernel", "a" * 64, b"payload")
            assert remote.get("kernel", "b" * 64) is None
        elapsed = time.monotonic() - started
    assert elapsed < 1.5, elapsed
    assert [str(w.message).split(" (")[0] for w in caught] == [
        f"kgc remote cache {url} is unreachable"]


KEY = CacheKey(graph="func.func @f(%x: tensor<17x4097xf16>) ...", device="NVIDIA H100 80GB HBM3",
               capability=(9, 0), versions=(("kgc", "0.1.0"), ("triton", "3.6.0"),
                                            ("torch", "2.13.0")))


def entry(evidence):
    config = {"graph": {"function": "f"}}
    if evidence is not None:
        config[EVIDENCE] = evidence
    return Entry(config, {"kernels/k.cubin": b"\x7fELF" + os.urandom(64)})


def test_a_search_result_is_shared_with_its_evidence(redis_server, tmp_path):
    stored = entry({"gpu": KEY.device, "capability": [9, 0], "status": "timed"})
    Cache(tmp_path / "a", remote=redis_server.url).store(KEY, stored)
    other = Cache(tmp_path / "b", remote=redis_server.url)
    loaded = other.load(KEY)
    assert loaded is not None and loaded.files == stored.files
    assert other.path(KEY).exists()  # written through
    # Another GPU model is another key: nothing to serve.
    import dataclasses

    assert other.load(dataclasses.replace(KEY, device="NVIDIA H200")) is None


@pytest.mark.parametrize("evidence", [
    None,
    {"gpu": "NVIDIA A100-SXM4-80GB", "status": "timed"},
    {"gpu": KEY.device, "status": "rejected"},
], ids=["none", "another GPU", "failed check"])
def test_a_search_result_without_evidence_of_a_passed_check_is_not_served(
        redis_server, tmp_path, evidence):
    Cache(tmp_path / "a", remote=redis_server.url).store(KEY, entry(evidence))
    with pytest.warns(RuntimeWarning, match="evidence of a passed check"):
        assert Cache(tmp_path / "b", remote=redis_server.url).load(KEY) is None
    assert not Cache(tmp_path / "b").path(KEY).exists()


def test_a_corrupt_search_result_on_the_server_is_a_miss(redis_server, tmp_path):
    Cache(tmp_path / "a", remote=redis_server.url).store(KEY, entry(
        {"gpu": KEY.device, "status": "timed"}))
    (key,) = redis_server.client.scan_iter(match="kgc:*:search:*")
    redis_server.client.set(key, redis_server.client.get(key)[:-1])
    with pytest.warns(RuntimeWarning, match="does not match its sha256"):
        assert Cache(tmp_path / "b", remote=redis_server.url).load(KEY) is None


# -- cache bundles -------------------------------------------------------------------

def kgc_cli(*arguments, cache_dir):
    env = dict(os.environ, KGC_CACHE_DIR=str(cache_dir))
    env.pop("KGC_CACHE_URL", None)
    return subprocess.run([sys.executable, "-m", "kgc.tools.cli", *map(str, arguments)],
                          env=env, capture_output=True, text=True, timeout=120)


def test_a_bundle_serves_a_compile_in_another_process_with_no_triton_compile(tmp_path):
    built, _, _ = compile_in_child(tmp_path / "built")
    assert built["stats"]["compiled"] == 2
    bundle = tmp_path / "kgc-cache.tar.gz"
    exported = kgc_cli("cache", "export", bundle, cache_dir=tmp_path / "built")
    assert exported.returncode == 0, exported.stderr
    assert "exported 2 kernel(s) and 0 search result(s)" in exported.stdout
    info = kgc_cli("cache", "info", bundle, cache_dir=tmp_path / "elsewhere")
    assert "kernels: 2" in info.stdout, info.stderr
    imported = kgc_cli("cache", "import", bundle, cache_dir=tmp_path / "fresh")
    assert imported.returncode == 0, imported.stderr
    served, _, _ = compile_in_child(tmp_path / "fresh")
    assert served["stats"] == {"local_hits": 2, "remote_hits": 0, "compiled": 0, "corrupt": 0}
    assert served["cubins"] == built["cubins"]
    assert "kernels: 2" in kgc_cli("cache", "info", cache_dir=tmp_path / "fresh").stdout


def test_a_bundle_with_an_altered_entry_is_refused_whole(tmp_path):
    import io
    import tarfile

    compile_in_child(tmp_path / "built")
    from kgc.search.bundle import export_cache

    bundle = tmp_path / "kgc-cache.tar.gz"
    export_cache(bundle, tmp_path / "built")
    altered = tmp_path / "altered.tar.gz"
    with tarfile.open(bundle) as source, tarfile.open(altered, "w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member).read()
            if member.name.endswith(".kgc") and not any(
                    m.name.endswith(".kgc") for m in target.getmembers()):
                data = data[:-1] + bytes([data[-1] ^ 1])
            target.addfile(member, io.BytesIO(data))
    done = kgc_cli("cache", "import", altered, cache_dir=tmp_path / "fresh")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "does not match the size and sha256 of the manifest" in done.stderr
    # Nothing of it was written.
    assert not (tmp_path / "fresh").exists() or not any((tmp_path / "fresh").rglob("*.kgc"))


def test_a_file_that_is_no_bundle_is_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.tar.gz"
    bogus.write_bytes(b"not a tar")
    done = kgc_cli("cache", "import", bogus, cache_dir=tmp_path / "fresh")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot read the cache bundle '{bogus}'" in done.stderr


def test_a_corrupt_local_kernel_entry_is_rebuilt(tmp_path):
    import kgc
    from kgc.pipeline.kernel_cache import KernelCache

    g = kgc.Graph("softmax")
    g.output(g.softmax(g.input("x", (17, 1000), "f16")))
    store = KernelCache(tmp_path)
    first = kgc.compile(g, target=90, cache=store)
    (entry,) = (tmp_path / "kernels").rglob("*.kgc")
    good = entry.read_bytes()
    entry.write_bytes(good[:len(good) // 2])  # truncated
    # The graph cache would answer the compile before any kernel is looked up.
    shutil.rmtree(tmp_path / "graphs")
    with pytest.warns(RuntimeWarning, match="is corrupt .*; it is ignored and rebuilt"):
        again = kgc.compile(g, target=90, cache=store)
    assert store.stats == {"local_hits": 0, "remote_hits": 0, "compiled": 2, "corrupt": 1}
    assert entry.read_bytes() == good
    (a,), (b,) = first.module.kernels.values(), again.module.kernels.values()
    assert a.artifact.cubin == b.artifact.cubin
    shutil.rmtree(tmp_path / "graphs")
    kgc.compile(g, target=90, cache=store)
    assert store.stats["local_hits"] == 1
