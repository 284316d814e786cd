"""The search cache: keys, atomic entries, corruption, and locking (CPU)."""

import dataclasses
import multiprocessing
import zipfile

import pytest

from kgc.search.cache import Cache, CacheKey, Entry

BASE = CacheKey(graph="func.func @f(%x: tensor<16x4096xf16>) ...", device="NVIDIA H100 80GB HBM3",
                capability=(9, 0), versions=(("kgc", "0.1.0"), ("triton", "3.6.0"),
                                             ("torch", "2.11.0")),
                settings=(("effort", "default"),))


@pytest.mark.parametrize("change", [
    {"graph": "func.func @f(%x: tensor<16x4096xbf16>) ..."},
    {"graph": "func.func @f(%x: tensor<17x4096xf16>) ..."},
    {"device": "NVIDIA H200"},
    {"capability": (8, 0)},
    {"versions": (("kgc", "0.1.1"), ("triton", "3.6.0"), ("torch", "2.11.0"))},
    {"versions": (("kgc", "0.1.0"), ("triton", "3.5.0"), ("torch", "2.11.0"))},
    {"versions": (("kgc", "0.1.0"), ("triton", "3.6.0"), ("torch", "2.13.0"))},
    {"settings": (("effort", "high"),)},
], ids=lambda change: next(iter(change)))
def test_every_key_part_changes_the_key(change):
    assert dataclasses.replace(BASE, **change).digest != BASE.digest


def test_equal_parts_give_equal_keys():
    assert dataclasses.replace(BASE).digest == BASE.digest


def test_round_trip(tmp_path):
    cache = Cache(tmp_path)
    entry = Entry({"partition": "0,1", "kernels": {"k": {"block_m": 64}}},
                  {"k.cubin": b"\x7fELF" + bytes(range(256))})
    assert cache.load(BASE) is None
    cache.store(BASE, entry)
    loaded = cache.load(BASE)
    assert loaded == entry
    other = dataclasses.replace(BASE, device="NVIDIA A100")
    assert cache.load(other) is None


def test_store_leaves_no_temporary_files(tmp_path):
    cache = Cache(tmp_path)
    cache.store(BASE, Entry({"a": 1}, {"f": b"x"}))
    cache.store(BASE, Entry({"a": 2}, {"f": b"y"}))
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert files == [f"{BASE.digest}.zip"]
    assert cache.load(BASE).config == {"a": 2}


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _flip_member(path):
    # A member rewritten with other bytes: zip's CRC of the new member is
    # right, only the manifest's checksum can tell.
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["files/k.cubin"] = b"\x00" + members["files/k.cubin"][1:]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _garbage(path):
    path.write_bytes(b"not a zip at all")


@pytest.mark.parametrize("damage", [_truncate, _flip_member, _garbage])
def test_corrupt_entry_is_a_miss_with_a_warning_and_is_removed(tmp_path, damage):
    cache = Cache(tmp_path)
    path = cache.store(BASE, Entry({"a": 1}, {"k.cubin": b"\x7fELF" * 1000}))
    damage(path)
    with pytest.warns(RuntimeWarning, match="corrupt"):
        assert cache.load(BASE) is None
    assert not path.exists()
    cache.store(BASE, Entry({"a": 1}, {"k.cubin": b"\x7fELF"}))
    assert cache.load(BASE).config == {"a": 1}


def test_entry_of_another_key_at_the_same_place_is_not_served(tmp_path):
    cache = Cache(tmp_path)
    other = dataclasses.replace(BASE, device="NVIDIA A100")
    path = cache.store(other, Entry({"a": 1}))
    cache.path(BASE).parent.mkdir(parents=True, exist_ok=True)
    path.rename(cache.path(BASE))
    with pytest.warns(RuntimeWarning, match="another key"):
        assert cache.load(BASE) is None


def test_cache_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KGC_CACHE_DIR", str(tmp_path / "here"))
    assert Cache().root == tmp_path / "here"


def _writer(root, value, rounds):
    cache = Cache(root)
    for _ in range(rounds):
        with cache.locked(BASE):
            cache.store(BASE, Entry({"value": value}, {"blob": bytes([value]) * 100_000}))


def test_concurrent_writers_never_leave_a_broken_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), v, 20)) for v in (1, 2)]
    for writer in writers:
        writer.start()
    cache = Cache(tmp_path)
    seen = set()
    while any(w.is_alive() for w in writers):
        entry = cache.load(BASE)
        if entry is not None:
            value = entry.config["value"]
            assert entry.files["blob"] == bytes([value]) * 100_000
            seen.add(value)
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert cache.load(BASE).config["value"] in (1, 2)
