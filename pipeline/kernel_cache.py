"""The cache of compiled kernels: artifacts by content, in a local folder
and, when one is configured, on a server a fleet shares behind it.

    store = KernelCache.resolve(cache)       # None: compile everything
    artifact = store.load(key)               # local, then remote; or None
    store.store(artifact, key)               # both levels

An entry is one artifact (`Artifact.save`'s files) as a zip, named by the
content hash of the compile it answers (the TTIR kgc handed Triton, without
its name, with options, target and Triton version; the entry records it)
under `<cache root>/kernels/`, and on the server under the same hash and
kgc's version (`remote_cache`). The entry's bytes are framed
with their sha256 (`remote_cache.frame`) in both places, and an artifact
read back is checked once more by `Artifact.load` (every stage file's
sha256, and the hash against its TTIR): an entry that fails a check is
reported with a warning, ignored, compiled again and overwritten. A hit on
the server is written through to the local folder, so the next process on
the machine needs no network.

Which cache a compile uses (`resolve`): `cache=False` none; `cache=True`
the local folder (`KGC_CACHE_DIR`, else the user cache folder) and the
server of `KGC_CACHE_URL` if set; a `redis://` URL the local folder and that
server; a `KernelCache` itself. With `cache=None` (the default of the
compile functions) the cache is used when `KGC_CACHE_URL` is set or
`KGC_KERNEL_CACHE=1`, and not otherwise. Compiles that ask Triton for its IR
dumps (`MLIR_ENABLE_DUMP`, `TRITON_ALWAYS_COMPILE`) bypass it, since a hit
would print nothing.

`stats` counts what a store did (local hits, remote hits, kernels compiled,
corrupt entries), which tells a process that compiled nothing from one that
did.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import tempfile
import warnings
import zipfile

from kgc.diagnostics import KgcError
from kgc.pipeline.artifact import Artifact
from kgc.pipeline.remote_cache import RemoteCache, frame, unframe

KERNELS = "kernels"
# A fixed time for the zip members: an entry's bytes depend on the artifact alone.
_EPOCH = (2020, 1, 1, 0, 0, 0)


def cache_root() -> pathlib.Path:
    """`KGC_CACHE_DIR`, or kgc's folder in the user cache folder."""
    configured = os.environ.get("KGC_CACHE_DIR")
    if configured:
        return pathlib.Path(configured).expanduser()
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("kgc", appauthor=False))


# The member of an entry that names the compile it answers: the content
# hash of the TTIR kgc asked Triton to compile, which Triton prints anew
# (its custom form), so that the artifact's own hash differs from it.
REQUEST = "request.key"


def artifact_bytes(artifact: Artifact, request: str | None = None) -> bytes:
    """An artifact's files (`Artifact.save`) as one deterministic zip, with
    the key of the compile it answers (default: its own hash)."""
    with tempfile.TemporaryDirectory(prefix="kgc-entry-") as directory:
        # Locations name the bare TTIR file: an entry's bytes must not
        # depend on the folder it was packed in.
        artifact.save(directory, sources="")
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(pathlib.Path(directory).iterdir()):
                archive.writestr(zipfile.ZipInfo(path.name, _EPOCH), path.read_bytes())
            archive.writestr(zipfile.ZipInfo(REQUEST, _EPOCH), request or artifact.hash)
    return buffer.getvalue()


def request_of(payload: bytes) -> str | None:
    """The compile key an entry answers, or None where it names none."""
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            return archive.read(REQUEST).decode() if REQUEST in archive.namelist() else None
    except (zipfile.BadZipFile, ValueError, KeyError, UnicodeDecodeError):
        return None


def artifact_from_bytes(payload: bytes) -> Artifact:
    """The artifact of `artifact_bytes`; KgcError when it fails a check."""
    with tempfile.TemporaryDirectory(prefix="kgc-entry-") as directory:
        try:
            with zipfile.ZipFile(io.BytesIO(payload)) as archive:
                names = archive.namelist()
                if any("/" in name or name.startswith(".") for name in names):
                    raise KgcError("a kernel cache entry names files outside itself")
                archive.extractall(directory)
        except (zipfile.BadZipFile, ValueError) as error:
            raise KgcError(f"a kernel cache entry is not a zip: {error}") from None
        records = [name for name in names if name.endswith(".json")]
        if len(records) != 1:
            raise KgcError(f"a kernel cache entry holds {len(records)} artifact records, not 1")
        return Artifact.load(pathlib.Path(directory) / records[0])


class KernelCache:
    """Artifacts by hash under `root`, and on `remote` when given."""

    def __init__(self, root: str | os.PathLike | None = None, remote: RemoteCache | None = None):
        self.root = pathlib.Path(root) if root is not None else cache_root()
        self.remote = remote
        self.stats = {"local_hits": 0, "remote_hits": 0, "compiled": 0, "corrupt": 0}

    @classmethod
    def resolve(cls, cache) -> "KernelCache | None":
        """The store a compile uses for its `cache=` argument (see the module
        docstring)."""
        if isinstance(cache, KernelCache):
            return cache
        if cache is None:
            if not (os.environ.get("KGC_CACHE_URL") or os.environ.get("KGC_KERNEL_CACHE") == "1"):
                return None
            cache = True
        if cache is False or _dumping():
            return None
        if cache is True:
            return _shared(None)
        if isinstance(cache, str):
            return _shared(cache)
        raise KgcError(f"cache must be True, False, a redis:// URL or a KernelCache, got "
                       f"{cache!r}")

    def path(self, key: str) -> pathlib.Path:
        return self.root / KERNELS / key[:2] / f"{key}.kgc"

    def load(self, key: str) -> Artifact | None:
        """The artifact of hash `key` from the local folder, else from the
        server (then written to the folder); None on a miss."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is not None:
            artifact = self._checked(key, unframe(data), str(path))
            if artifact is not None:
                self.stats["local_hits"] += 1
                return artifact
            with contextlib.suppress(OSError):
                path.unlink()
        if self.remote is None:
            return None
        payload = self.remote.get("kernel", key)
        if payload is None:
            return None
        artifact = self._checked(key, payload, f"{self.remote.url} (kernel {key[:16]}...)")
        if artifact is not None:
            self.stats["remote_hits"] += 1
            self._write_local(key, frame(payload))
        return artifact

    def store(self, artifact: Artifact, key: str | None = None) -> None:
        """`artifact` under `key`, the content hash of the TTIR whose
        compile made it (default: the artifact's own hash)."""
        key = key or artifact.hash
        payload = artifact_bytes(artifact, key)
        self._write_local(key, frame(payload))
        if self.remote is not None:
            self.remote.put("kernel", key, payload)

    def _checked(self, key: str, payload: bytes | None, where: str) -> Artifact | None:
        problem = "its sha256 does not match" if payload is None else None
        if payload is not None:
            try:
                artifact = artifact_from_bytes(payload)
                answers = request_of(payload) or artifact.hash
                if answers != key:
                    problem = f"it holds the compile of {answers[:16]}..."
                else:
                    return artifact
            except KgcError as error:
                problem = str(error)
        self.stats["corrupt"] += 1
        warnings.warn(f"kgc kernel cache entry {where} is corrupt ({problem}); it is ignored "
                      "and rebuilt", RuntimeWarning, stacklevel=3)
        return None

    def _write_local(self, key: str, data: bytes) -> None:
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp",
                                                     dir=path.parent)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except OSError as error:
            warnings.warn(f"kgc kernel cache: cannot write {path} ({error.strerror})",
                          RuntimeWarning, stacklevel=3)


def _dumping() -> bool:
    dump = os.environ.get("MLIR_ENABLE_DUMP", "").strip()
    return dump not in ("", "0") or os.environ.get("TRITON_ALWAYS_COMPILE", "") == "1"


# One store per (root, URL) for the life of the process: its counters add
# up, and an unreachable server warns once, not at every compile.
_STORES: dict[tuple[str, str | None], KernelCache] = {}


def _shared(url: str | None) -> KernelCache:
    url = url if url is not None else (os.environ.get("KGC_CACHE_URL") or None)
    root = cache_root()
    key = (str(root), url)
    if key not in _STORES:
        _STORES[key] = KernelCache(root, RemoteCache.connect(url))
    return _STORES[key]
