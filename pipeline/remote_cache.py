"""A cache a fleet shares: entries on a Redis server, as the second level
behind a machine's local cache folder.

    remote = RemoteCache.connect("redis://cache-host:6379/0")   # or None
    remote.get("kernel", key) -> bytes | None
    remote.put("kernel", key, payload)

`KGC_CACHE_URL` names the server when no URL is given (`from_environment`).
This module owns the connection and the framing of values; what an entry
means (a compiled kernel, a search result) and the local folder in front of
it belong to `kernel_cache` and `kgc.search.cache`.

Every value is framed as `kgc-remote-1 <sha256 of the payload>\\n` and the
payload, and the digest is checked on `get`: a value that does not match
(truncated, altered, written by something else) is reported with a warning
and is a miss, so the caller rebuilds the entry and `put` overwrites it.
Keys are namespaced by kind and by kgc's version (`kgc:<kgc version>:<kind>:
<key>`): what the key itself holds (content, target, GPU model, Triton's
version) is the caller's.

A server that cannot be reached is never a failure nor a hang: connecting
and every command are bounded by `timeout_s` (half a second by default),
nothing is retried, and the first error gives one warning and turns the
remote level off for the rest of the process's use of this object, so work
goes on with the local folder alone.
"""

from __future__ import annotations

import hashlib
import os
import urllib.parse
import warnings

from kgc.diagnostics import KgcError

_FRAME = b"kgc-remote-1"
DEFAULT_TIMEOUT_S = 0.5
INSTALL_HINT = "pip install 'kgc[cluster]'"


def kgc_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kgc")
    except metadata.PackageNotFoundError:
        return "unknown"


def frame(payload: bytes) -> bytes:
    """`payload` with the header that `unframe` checks."""
    return _FRAME + b" " + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def unframe(value: bytes) -> bytes | None:
    """The payload of a framed value, or None when the value is not one or
    its payload does not match its digest."""
    header, newline, payload = value.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 2 or parts[0] != _FRAME:
        return None
    if hashlib.sha256(payload).hexdigest().encode() != parts[1]:
        return None
    return payload


class RemoteCache:
    """Framed values on one Redis database; see the module docstring."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S):
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme not in ("redis", "rediss") or not parsed.hostname:
            raise KgcError(f"a remote cache URL must be redis://host:port/db, got {url!r}")
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise KgcError(f"the remote cache {url} needs the redis client: {INSTALL_HINT}") \
                from None
        self.url = url
        self.timeout_s = timeout_s
        self.available = True
        self.stats = {"hits": 0, "misses": 0, "corrupt": 0, "stored": 0}
        # No retries: an unreachable server costs one bounded attempt.
        self._client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s,
                                            socket_timeout=timeout_s,
                                            retry=Retry(NoBackoff(), 0))
        self._errors = (redis.exceptions.RedisError, OSError)

    @classmethod
    def connect(cls, url: str | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> "RemoteCache | None":
        return cls(url, timeout_s) if url else None

    @classmethod
    def from_environment(cls) -> "RemoteCache | None":
        """The server `KGC_CACHE_URL` names, or None when it is unset."""
        return cls.connect(os.environ.get("KGC_CACHE_URL") or None)

    def key(self, kind: str, key: str) -> str:
        return f"kgc:{kgc_version()}:{kind}:{key}"

    def get(self, kind: str, key: str) -> bytes | None:
        """The payload stored under (kind, key), or None: a miss, a value
        that fails its check (a warning), or a server that is gone."""
        if not self.available:
            return None
        try:
            value = self._client.get(self.key(kind, key))
        except self._errors as error:
            self._unreachable(error)
            return None
        if value is None:
            self.stats["misses"] += 1
            return None
        payload = unframe(value)
        if payload is None:
            self.stats["corrupt"] += 1
            warnings.warn(f"kgc remote cache {self.url}: the {kind} entry {key[:16]}... does "
                          "not match its sha256; it is ignored and rebuilt", RuntimeWarning,
                          stacklevel=2)
            return None
        self.stats["hits"] += 1
        return payload

    def put(self, kind: str, key: str, payload: bytes) -> None:
        if not self.available:
            return
        try:
            self._client.set(self.key(kind, key), frame(payload))
        except self._errors as error:
            self._unreachable(error)
            return
        self.stats["stored"] += 1

    def _unreachable(self, error: Exception) -> None:
        self.available = False
        warnings.warn(f"kgc remote cache {self.url} is unreachable ({type(error).__name__}: "
                      f"{error}); working with the local cache only", RuntimeWarning,
                      stacklevel=3)
