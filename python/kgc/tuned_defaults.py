"""Tuned defaults: configs the search chose, per GPU, that the default compile reads.

The default compile plans each kernel with kgc's heuristics; superoptimize
searches. A *tuned-defaults table* records, for one target (an SM version),
what the search chose on a corpus of shapes (`kgc.bench.tune_defaults`
builds it on a GPU), so that the default compile starts from a measured
config without searching or timing anything:

    {"format": "kgc-tuned-defaults", "version": 1,
     "target": "sm_90", "gpu": "NVIDIA H100 80GB HBM3", "triton": "3.6.0",
     "kgc_commit": "0123abc", "date": "2026-11-26T06:00:00+00:00",
     "entries": [
       {"kind": "matmul", "element": "f16", "variant": "norm",
        "features": {"batch": 1, "m": 16, "n": 6144, "k": 4096},
        "config": {"kind": "matmul", "block_m": 16, "block_n": 64, ...},
        "time_us": 28.5, "heuristic_us": 35.9, "workload": "..."}]}

An entry is keyed by the kind of the schedule the search chose (the
library's `library_matmul` where a BLAS call beat kgc's Triton matmul on a
kernel kgc planned as one, keyed as that matmul), the element type, a
variant (what the schedule says changes which config wins beyond the
shape: a gated MLP's two dots, an RMSNorm folded into the matmul) and the
shape features (the sizes the schedule names: M, N, K of a matmul, the
row length of a reduction, queries, keys and head dims of attention).
`TunedTable.nearest`
finds the entry of the same kind, element, variant and feature names whose
shape is nearest in log space (the Euclidean distance of the features'
log2, at most MAX_LOG2_DISTANCE: a config measured on a shape 8 times
larger along one axis is no evidence for this one).

What a schedule looks up, and whether the config suits the kernel, is the
schedule's business (`Schedule.table_key`, `Schedule.tuned_config`); this
module owns the file: its format and validation (a malformed table is a
`TunedTableError` naming the file, the entry and the field, never a kernel
compiled from half a table), where tables are found, and the lookup.

Where a table comes from (`resolve`), for a compile for sm_<N>:

* `KGC_TUNED_DEFAULTS` unset, empty or `on`: the table shipped in the
  package for sm_<N> (`kgc/tuned_tables/sm_<N>.json`), or none;
* `off` (also `0`, `false`, `heuristic`): no table, kgc's heuristics alone;
* a path: that table file (used only when its target is sm_<N>), or a folder
  holding `sm_<N>.json`.

kg-tile's `tuned-defaults` option takes the same values and wins over the
variable.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.resources
import json
import math
import os
import pathlib
from typing import Any, Mapping

from kgc.diagnostics import KgcError
from kgc.element_types import element_bits
from kgc.tiling.config import ConfigError, KernelConfig

FORMAT = "kgc-tuned-defaults"
VERSION = 1
ENVIRONMENT = "KGC_TUNED_DEFAULTS"
OFF = ("off", "0", "false", "heuristic")
ON = ("", "on", "1", "true", "table")
# The package that ships one table per target, named sm_<N>.json.
PACKAGE = "kgc.tuned_tables"
# The farthest a measured shape may be, in log2 units over its features
# (3: eight times larger or smaller along one axis).
MAX_LOG2_DISTANCE = 3.0
_LONGEST_AXIS = 1 << 40
# How much faster than the heuristic's config an entry's must have been for
# it to replace the heuristic's on the kernels it is nearest. Under it the
# win is within what two timings of one kernel differ by, and it did not
# carry: the entry of a gated MLP of 64 x 4096 -> 14336, 2.9% faster on its
# own shape, made one of 32 x 4096 -> 11008 take 51.4 us against the
# heuristic's 47.2; one of 16 x 4096 -> 4096, 2.6% faster, gave 32 rows
# 16.3 against 13.6 (H200, benchmarks/NOTES.md stops 48 and 49).
MIN_ENTRY_GAIN = 0.03


class TunedTableError(KgcError):
    """A tuned-defaults table that is not one: the message names the file,
    the entry and the field at fault."""

    @property
    def message(self) -> str:
        return self.diagnostics[0].message


@dataclasses.dataclass(frozen=True)
class TableKey:
    """What a schedule looks a kernel up by: its element type, its variant
    ("" for none) and its shape features (name -> size, all positive)."""

    element: str
    variant: str
    features: Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Entry:
    kind: str
    element: str
    variant: str
    features: dict[str, int]
    config: KernelConfig
    time_us: float
    heuristic_us: float
    workload: str = ""

    @property
    def decisive(self) -> bool:
        """Whether the search's config beat the heuristic's by more than
        MIN_ENTRY_GAIN on the entry's shape: only then does it replace the
        heuristic's choice. Every entry still says which kind of kernel won
        there (a Triton matmul or the library call)."""
        return self.heuristic_us > self.time_us * (1 + MIN_ENTRY_GAIN)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "element": self.element, "variant": self.variant,
                "features": dict(self.features), "config": self.config.to_dict(),
                "time_us": self.time_us, "heuristic_us": self.heuristic_us,
                "workload": self.workload}


@dataclasses.dataclass(frozen=True)
class TunedTable:
    target: str  # "sm_90"
    gpu: str
    triton: str
    kgc_commit: str
    date: str
    entries: tuple[Entry, ...]
    source: str = ""  # the file it was read from ("" when made in memory)

    def nearest(self, kind: str, key: TableKey) -> Entry | None:
        """The entry of `kind`, `key`'s element and variant and the same
        feature names whose features are nearest `key`'s in log space
        (within MAX_LOG2_DISTANCE; the first in the table on a tie), or
        None."""
        best, best_distance = None, None
        for entry in self.entries:
            if (entry.kind != kind or entry.element != key.element or entry.variant != key.variant
                    or set(entry.features) != set(key.features)):
                continue
            distance = log_distance(entry.features, key.features)
            if distance <= MAX_LOG2_DISTANCE and (best_distance is None
                                                  or distance < best_distance):
                best, best_distance = entry, distance
        return best

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "target": self.target, "gpu": self.gpu,
                "triton": self.triton, "kgc_commit": self.kgc_commit, "date": self.date,
                "entries": [entry.to_dict() for entry in self.entries]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n"

    def fingerprint(self) -> str:
        """A digest of the table's content: what a cache of results that
        depend on the default compile keys them by."""
        return self._fingerprint

    @functools.cached_property
    def _fingerprint(self) -> str:
        # Planning asks for it once per kernel; the table never changes.
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]


def log_distance(a: Mapping[str, int], b: Mapping[str, int]) -> float:
    """The Euclidean distance of two shapes' features (the same names) in
    log2 units."""
    return math.sqrt(sum((math.log2(a[name]) - math.log2(b[name])) ** 2 for name in a))


# -- reading and checking -------------------------------------------------------------

def parse_table(data: Any, source: str = "<table>") -> TunedTable:
    """The table in `data` (JSON-decoded); TunedTableError naming `source`,
    the entry and the field for anything malformed."""
    def fail(message: str) -> TunedTableError:
        return TunedTableError(f"tuned-defaults table {source}: {message}")

    if not isinstance(data, dict):
        raise fail("must be a JSON object")
    if data.get("format") != FORMAT:
        raise fail(f"\"format\" must be \"{FORMAT}\", got {data.get('format')!r}")
    if data.get("version") != VERSION:
        raise fail(f"\"version\" {data.get('version')!r} is not one kgc reads (it reads "
                   f"{VERSION})")
    header = {}
    for field in ("target", "gpu", "triton", "kgc_commit", "date"):
        value = data.get(field)
        if not isinstance(value, str) or not value:
            raise fail(f"\"{field}\" must be a non-empty string, got {value!r}")
        header[field] = value
    if not _is_target_name(header["target"]):
        raise fail(f"\"target\" must name an SM version such as \"sm_90\", got "
                   f"{header['target']!r}")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise fail("\"entries\" must be a list")
    return TunedTable(entries=tuple(_parse_entry(item, index, fail)
                                    for index, item in enumerate(entries)),
                      source=source, **header)


def _is_target_name(text: str) -> bool:
    return text.startswith("sm_") and text[3:].isdigit()


def _parse_entry(item: Any, index: int, fail) -> Entry:
    def wrong(field: str, what: str, value: Any) -> TunedTableError:
        return fail(f"entry {index}: \"{field}\" must be {what}, got {value!r}")

    if not isinstance(item, dict):
        raise fail(f"entry {index} must be an object")
    unknown = sorted(set(item) - {"kind", "element", "variant", "features", "config", "time_us",
                                  "heuristic_us", "workload"})
    if unknown:
        raise fail(f"entry {index}: unknown field(s) {', '.join(unknown)}")
    kind, element, variant = item.get("kind"), item.get("element"), item.get("variant", "")
    if not isinstance(kind, str) or not kind:
        raise wrong("kind", "a schedule kind such as \"matmul\"", kind)
    if not isinstance(element, str):
        raise wrong("element", "an element type such as \"f16\"", element)
    try:
        element_bits(element)
    except (KeyError, ValueError):
        raise wrong("element", "an element type such as \"f16\"", element) from None
    if not isinstance(variant, str):
        raise wrong("variant", "a string", variant)
    features = item.get("features")
    if not isinstance(features, dict) or not features or not all(
            isinstance(name, str) and isinstance(size, int) and not isinstance(size, bool)
            and size >= 1 for name, size in features.items()):
        raise wrong("features", "an object of positive integer sizes by name", features)
    config_data = item.get("config")
    if not isinstance(config_data, dict):
        raise wrong("config", "an object of knobs with its \"kind\"", config_data)
    if config_data.get("kind") != kind:
        raise fail(f"entry {index}: its config is of kind {config_data.get('kind')!r}, the "
                   f"entry of kind {kind!r}")
    try:
        config = KernelConfig.from_dict(config_data)
        # Values no kernel of the kind takes (3 warps, a tile of 0 or of 48):
        # checked against axes longer than any tile, so that a tile must be a
        # power of two, as it must be to serve shapes other than the one it
        # was measured on.
        config.canonical({axis: _LONGEST_AXIS for axis in type(config).TILE_AXES.values()})
    except (ConfigError, TypeError) as error:
        raise fail(f"entry {index}: config: {error}") from None
    times = {}
    for field in ("time_us", "heuristic_us"):
        value = item.get(field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value <= 0:
            raise wrong(field, "a positive number of microseconds", value)
        times[field] = float(value)
    workload = item.get("workload", "")
    if not isinstance(workload, str):
        raise wrong("workload", "a string", workload)
    return Entry(kind, element, variant, dict(features), config, workload=workload, **times)


def load_table(path: str | os.PathLike) -> TunedTable:
    """The table in the file `path`; TunedTableError when it cannot be read
    or is malformed."""
    path = pathlib.Path(path)
    try:
        stat = path.stat()
    except OSError as error:
        raise TunedTableError(f"tuned-defaults table {path}: cannot be read: "
                              f"{error.strerror or error}") from None
    return _load_cached(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _load_cached(path: str, mtime_ns: int, size: int) -> TunedTable:
    # Keyed by the file's time and size too: a table rewritten (by the
    # builder, between two compiles of one process) is read again.
    try:
        text = pathlib.Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise TunedTableError(f"tuned-defaults table {path}: cannot be read: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TunedTableError(f"tuned-defaults table {path}:{error.lineno}:{error.colno}: not "
                              f"JSON: {error.msg}") from None
    return parse_table(data, path)


def packaged_table(sm: int) -> TunedTable | None:
    """The table shipped in the package for sm_<sm>, or None."""
    resource = importlib.resources.files(PACKAGE) / f"sm_{sm}.json"
    if not resource.is_file():
        return None
    with importlib.resources.as_file(resource) as path:
        return load_table(path)


def resolve(setting: str | None, sm: int) -> TunedTable | None:
    """The table a compile for sm_<sm> plans with under `setting` (kg-tile's
    option; None or "": `KGC_TUNED_DEFAULTS`, see the module docstring), or
    None for kgc's heuristics alone."""
    if not setting:
        setting = os.environ.get(ENVIRONMENT, "")
    text = setting.strip()
    if text.lower() in OFF:
        return None
    if text.lower() in ON:
        return packaged_table(sm)
    path = pathlib.Path(text)
    if path.is_dir():
        path = path / f"sm_{sm}.json"
        return load_table(path) if path.is_file() else None
    table = load_table(path)
    return table if table.target == f"sm_{sm}" else None
