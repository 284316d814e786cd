"""Cache bundles: a machine's local cache (compiled kernels and search
results) as one file, to bake into a container image or carry to another
machine.

    export_cache("kgc-cache.tar.gz")     # kgc cache export FILE
    import_cache("kgc-cache.tar.gz")     # kgc cache import FILE
    cache_info()                         # kgc cache info [FILE]

A bundle is a gzipped tar whose first member, `manifest.json`, lists every
entry: its path under the cache root, its kind (`kernel`, `search`), its
size and sha256; the entries follow under `entries/`. `import_cache` checks
everything before it writes anything: the manifest, every member against
its size and sha256, every kernel entry as an artifact (its stage files'
sha256 and its content hash, `kernel_cache.artifact_from_bytes`) and every
search entry's own checksums. A bundle that fails any check is refused as a
whole with a KgcError naming the entry; entries are written under their
names atomically, over what the folder holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pathlib
import tarfile
import tempfile
import zipfile

from kgc.diagnostics import KgcError
from kgc.pipeline.kernel_cache import KERNELS, artifact_from_bytes, cache_root, request_of
from kgc.pipeline.remote_cache import kgc_version, unframe
from kgc.search.cache import CorruptEntry, check_entry

FORMAT = "kgc-cache-bundle-1"
MANIFEST = "manifest.json"
ENTRIES = "entries"


@dataclasses.dataclass(frozen=True)
class BundleEntry:
    path: str  # relative to the cache root, with / separators
    kind: str  # "kernel" or "search"
    bytes: int
    sha256: str


def local_entries(root: pathlib.Path | None = None) -> list[BundleEntry]:
    """Every entry of the local cache under `root` (default: the cache
    root), locks and half-written files left out."""
    root = pathlib.Path(root) if root is not None else cache_root()
    entries = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if not path.is_file():
            continue
        kind = _kind(relative)
        if kind is None:
            continue
        data = path.read_bytes()
        entries.append(BundleEntry(relative, kind, len(data), hashlib.sha256(data).hexdigest()))
    return entries


def _kind(relative: str) -> str | None:
    parts = relative.split("/")
    if len(parts) == 3 and parts[0] == KERNELS and parts[2].endswith(".kgc"):
        return "kernel"
    if len(parts) == 2 and len(parts[0]) == 2 and parts[1].endswith(".zip"):
        return "search"
    return None


def export_cache(file: str | os.PathLike, root: str | os.PathLike | None = None) -> dict:
    """Writes the local cache to the bundle `file`; returns its summary."""
    root = pathlib.Path(root) if root is not None else cache_root()
    entries = local_entries(root)
    manifest = {"format": FORMAT, "kgc": kgc_version(),
                "entries": [dataclasses.asdict(e) for e in entries]}
    file = pathlib.Path(file)
    try:
        with tarfile.open(file, "w:gz") as archive:
            _add(archive, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
            for entry in entries:
                _add(archive, f"{ENTRIES}/{entry.path}", (root / entry.path).read_bytes())
    except OSError as error:
        raise KgcError(f"cannot write the cache bundle '{file}': {error.strerror}") from None
    return summary(entries)


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def read_bundle(file: str | os.PathLike) -> tuple[list[BundleEntry], dict[str, bytes]]:
    """The entries of a bundle and their bytes, every one checked (see the
    module docstring); KgcError naming the first that fails."""
    file = pathlib.Path(file)
    try:
        with tarfile.open(file, "r:*") as archive:
            members = {m.name: m for m in archive.getmembers()}
            if MANIFEST not in members:
                raise KgcError(f"'{file}' is not a kgc cache bundle: it has no {MANIFEST}")
            manifest = json.loads(archive.extractfile(members[MANIFEST]).read())
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise KgcError(f"'{file}' is not a kgc cache bundle of format {FORMAT}")
            entries = [BundleEntry(**e) for e in manifest["entries"]]
            contents = {}
            for entry in entries:
                where = f"'{file}': entry {entry.path}"
                if _kind(entry.path) != entry.kind:
                    raise KgcError(f"{where} is not a {entry.kind} entry's place in a cache")
                member = members.get(f"{ENTRIES}/{entry.path}")
                if member is None or not member.isfile():
                    raise KgcError(f"{where} is listed in the manifest but missing")
                data = archive.extractfile(member).read()
                if len(data) != entry.bytes or hashlib.sha256(data).hexdigest() != entry.sha256:
                    raise KgcError(f"{where} does not match the size and sha256 of the "
                                   "manifest: the bundle was truncated or altered")
                _check_content(entry, data, where)
                contents[entry.path] = data
    except (tarfile.TarError, EOFError, OSError, zipfile.BadZipFile) as error:
        raise KgcError(f"cannot read the cache bundle '{file}': {error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise KgcError(f"the manifest of the cache bundle '{file}' is garbled: {error}") from None
    return entries, contents


def _check_content(entry: BundleEntry, data: bytes, where: str) -> None:
    if entry.kind == "kernel":
        payload = unframe(data)
        if payload is None:
            raise KgcError(f"{where} does not match its own sha256")
        artifact = artifact_from_bytes(payload)
        answers = request_of(payload) or artifact.hash
        if answers != pathlib.PurePosixPath(entry.path).stem:
            raise KgcError(f"{where} holds the compile of {answers[:16]}..., not the one it is "
                           "named for")
    else:
        try:
            check_entry(data)
        except (CorruptEntry, zipfile.BadZipFile, KeyError, ValueError) as problem:
            raise KgcError(f"{where} is a corrupt search result: {problem}") from None


def import_cache(file: str | os.PathLike, root: str | os.PathLike | None = None) -> dict:
    """Checks every entry of the bundle `file`, then writes them all into
    the local cache; returns the bundle's summary."""
    root = pathlib.Path(root) if root is not None else cache_root()
    entries, contents = read_bundle(file)
    for entry in entries:
        path = root / entry.path
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(contents[entry.path])
        os.replace(temporary, path)
    return summary(entries)


def summary(entries: list[BundleEntry]) -> dict:
    kinds = {"kernel": 0, "search": 0}
    for entry in entries:
        kinds[entry.kind] += 1
    return {"kernels": kinds["kernel"], "search_results": kinds["search"],
            "bytes": sum(e.bytes for e in entries)}


def cache_info(file: str | os.PathLike | None = None) -> dict:
    """What the local cache (or the bundle `file`, checked) holds: where,
    how many kernels and search results, how many bytes."""
    if file is not None:
        entries, _ = read_bundle(file)
        return {"bundle": str(file), **summary(entries)}
    root = cache_root()
    return {"root": str(root), **summary(local_entries(root))}
