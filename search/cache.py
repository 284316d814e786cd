"""The on-disk cache of search results and their compiled kernels.

An entry holds what a finished search chose (its configuration as JSON)
and the compiled artifacts of the chosen kernels, so that a later search of
the same graph on the same kind of device, in any process, compiles and
times nothing. Entries live under `KGC_CACHE_DIR`, or the user cache
directory (`platformdirs`) when it is unset.

The key is a SHA-256 over every part that can change the result
(`CacheKey`): the canonical graph text, the device's name and compute
capability, the versions of kgc, Triton and torch, and the search settings
that change what is searched. Any part changing gives another entry.

An entry is one zip file written to a temporary name beside its place and
renamed over it (atomic on POSIX), under a file lock per key, so two
processes tuning at once never see half an entry, and the second to take
the lock finds the first one's result. Each member's SHA-256 is stored in
the entry's manifest and checked on load (besides zip's own CRCs): a
truncated or corrupt entry is reported with a warning, removed and treated
as a miss, so it is rebuilt, never served.

A fleet shares results through a Redis server behind the folder
(`Cache(remote=...)`, `KGC_CACHE_URL`; `kgc.pipeline.remote_cache` frames
each value with its sha256 and makes an unreachable server a warning): a
miss here is looked up there, a remote hit is checked like a local entry
and written to the folder, and a stored result goes to both. A result from
the server is served only with the evidence the search stored beside it
(`EVIDENCE`): that the graph it chose passed the correctness check and was
timed on a GPU of the key's model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import os
import pathlib
import tempfile
import warnings
import zipfile
from typing import Iterator

_FORMAT = 1
_MANIFEST = "manifest.json"
# The config key of an entry's evidence: {"gpu": the model that checked it,
# "status": the check's verdict on the graph kept ("timed": passed), ...}.
EVIDENCE = "evidence"
_LOG = logging.getLogger(__name__)


def default_root() -> pathlib.Path:
    """`KGC_CACHE_DIR`, or kgc's directory in the user cache directory."""
    from kgc.pipeline.kernel_cache import cache_root

    return cache_root()


@dataclasses.dataclass(frozen=True)
class CacheKey:
    """Everything a cached result depends on. `digest` names the entry."""

    graph: str  # canonical text of the kernel graph (shapes and element types included)
    device: str  # the GPU's name as the driver reports it
    capability: tuple[int, int]
    versions: tuple[tuple[str, str], ...]  # (package, version) of kgc, triton, torch
    settings: tuple[tuple[str, str], ...] = ()  # search settings that change the result

    @property
    def digest(self) -> str:
        text = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def installed_versions() -> tuple[tuple[str, str], ...]:
    """The versions that compiled code depends on, as a key part."""
    from importlib import metadata

    versions = []
    for package in ("kgc", "triton", "torch"):
        try:
            versions.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            versions.append((package, "absent"))
    return tuple(versions)


@dataclasses.dataclass
class Entry:
    """What a search stored: its choice and the files it needs to run it."""

    config: dict
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)


class CorruptEntry(Exception):
    pass


class Cache:
    """Entries by key under `root`; see the module docstring."""

    def __init__(self, root: str | os.PathLike | None = None, remote=None):
        """`remote`: a `RemoteCache`, a redis:// URL, or None for the server
        of `KGC_CACHE_URL` if set."""
        from kgc.pipeline.remote_cache import RemoteCache

        self.root = pathlib.Path(root) if root is not None else default_root()
        if isinstance(remote, RemoteCache):
            self.remote = remote
        elif remote is not None:
            self.remote = RemoteCache(remote)
        else:
            self.remote = RemoteCache.from_environment()

    def path(self, key: CacheKey) -> pathlib.Path:
        digest = key.digest
        return self.root / digest[:2] / f"{digest}.zip"

    @contextlib.contextmanager
    def locked(self, key: CacheKey) -> Iterator[None]:
        """Holds the key's lock: one process at a time searches a graph."""
        import filelock

        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(str(path) + ".lock"):
            yield

    def load(self, key: CacheKey) -> Entry | None:
        """The entry for `key`, or None on a miss. A corrupt entry is a
        miss: it is reported, removed, and rebuilt by the caller."""
        path = self.path(key)
        if path.exists():
            try:
                return self._read(path, key)
            except (CorruptEntry, zipfile.BadZipFile, OSError, KeyError, ValueError) as problem:
                warnings.warn(f"kgc cache entry {path} is corrupt ({problem}); it is ignored and "
                              "rebuilt", RuntimeWarning, stacklevel=2)
                with contextlib.suppress(OSError):
                    path.unlink()
        return self._load_remote(key)

    def _load_remote(self, key: CacheKey) -> Entry | None:
        if self.remote is None:
            return None
        data = self.remote.get("search", key.digest)
        if data is None:
            return None
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            entry = self._read(pathlib.Path(temporary), key)
            evidence = entry.config.get(EVIDENCE) or {}
            if evidence.get("gpu") != key.device or evidence.get("status") != "timed":
                raise CorruptEntry(f"it lacks the evidence of a passed check on a {key.device} "
                                   f"(it has {evidence or 'none'})")
            os.replace(temporary, path)
        except (CorruptEntry, zipfile.BadZipFile, OSError, KeyError, ValueError) as problem:
            warnings.warn(f"kgc remote cache {self.remote.url}: search entry {key.digest[:16]}... "
                          f"is not usable ({problem}); it is ignored and rebuilt", RuntimeWarning,
                          stacklevel=3)
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return None
        _LOG.info("search result %s from %s", key.digest[:16], self.remote.url)
        return entry

    def store(self, key: CacheKey, entry: Entry) -> pathlib.Path:
        """Writes `entry` for `key` atomically (temporary file, then rename)."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        manifest = {
            "format": _FORMAT,
            "key": dataclasses.asdict(key),
            "config": entry.config,
            "files": {name: hashlib.sha256(data).hexdigest() for name, data in entry.files.items()},
        }
        descriptor, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
                    archive.writestr(_MANIFEST, json.dumps(manifest, sort_keys=True))
                    for name, data in entry.files.items():
                        archive.writestr(f"files/{name}", data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _LOG.info("stored search result %s", path)
        if self.remote is not None:
            self.remote.put("search", key.digest, path.read_bytes())
        return path

    def _read(self, path: pathlib.Path, key: CacheKey) -> Entry:
        with zipfile.ZipFile(path) as archive:
            manifest, files = _checked(archive)
        if manifest.get("key") != json.loads(json.dumps(dataclasses.asdict(key))):
            raise CorruptEntry("it was stored for another key")
        return Entry(manifest["config"], files)


def check_entry(data: bytes) -> dict:
    """The manifest of an entry's bytes, after checking its format and every
    member's checksum; raises CorruptEntry (or zipfile's, json's errors)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return _checked(archive)[0]


def _checked(archive: zipfile.ZipFile) -> tuple[dict, dict[str, bytes]]:
    manifest = json.loads(archive.read(_MANIFEST))
    if manifest.get("format") != _FORMAT:
        raise CorruptEntry(f"format {manifest.get('format')}, expected {_FORMAT}")
    files = {}
    for name, digest in manifest["files"].items():
        data = archive.read(f"files/{name}")
        if hashlib.sha256(data).hexdigest() != digest:
            raise CorruptEntry(f"member {name} does not match its checksum")
        files[name] = data
    return manifest, files
