"""The cache of compiled graphs: a whole default compile, by its input.

    store = GraphCache.beside(kernel_cache)        # None: no kernel cache
    compiled = store.load(key)                     # a CompiledModule, or None
    store.store(key, compiled)

The kernel cache (`kernel_cache`) keys each kernel by its TTIR, so a second
process still runs kgc's passes to find that TTIR: a second or two of
fusion and tiling per graph of a small model before the first call, every
time. This cache answers the compile itself. An entry is what
`CompiledModule.write` lays out (the module at the kg and TTIR stages, each
kernel's stages and artifact record, manifest.json), in a folder named by
`graph_key`, under `<cache root>/graphs/` beside the kernels. It is read
back with the compiler's `load_module`, which checks every artifact against the manifest
(each stage file's sha256 and the hash of its TTIR): an entry that fails
is reported with a warning, removed, and the graph compiled again.

What the key covers (`graph_key`): the graph's text with its locations
(they name the source ops in every later stage), the target and what kgc
knows of it, whether library kernels are allowed, the tuned-defaults table
in force, the Triton version, and kgc's own code (every file of the
compiler: the Python sources, the tuned tables, the dialect's native
library). A change to any of them is another key, so an entry is never
served for a compile it does not answer. Only kgc's default pipeline
without a config to the cubin stage is cached: that is the compile the
torch backend and `kgc.compile` make by default.

Entries are written to a temporary folder and renamed into place, so a
reader sees a whole entry or none; two processes storing one key keep the
first. Only the local folder holds graphs: a fleet shares kernels through
the kernel cache's server, and each machine's first compile of a graph
fills its own folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
import warnings
from typing import Callable

from kgc.diagnostics import KgcError

GRAPHS = "graphs"
_FORMAT = "kgc-graph-cache-1"
_STEM = "graph"
_STAGES = ("kg", "ttir")
# Files of the compiler whose contents the key covers.
_SOURCE_SUFFIXES = (".py", ".json", ".so")


def compiler_files() -> list[pathlib.Path]:
    """Every file kgc compiles with, sorted: the Python sources and tables
    of the package's core (graph model, dialect, tiling, fusion), its passes
    and pipeline, and the dialect's native library. (In a source checkout
    these are separate folders; in a wheel, one.)"""
    import kgc.graph
    from kgc import _dialect
    from kgc.passes import registry

    library = _dialect._find_library()
    folders = {pathlib.Path(kgc.graph.__file__).parent, library.parent.parent,
               pathlib.Path(registry.__file__).parent, pathlib.Path(__file__).parent}
    return sorted({path.resolve() for folder in folders for path in folder.rglob("*")
                   if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts})


@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """The sha256 of `compiler_files`' names and contents, once a process."""
    digest = hashlib.sha256()
    for path in compiler_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def graph_key(module_text: str, target: int) -> str:
    """The key of a default compile of `module_text` for sm_`target` under
    the current settings (see the module docstring)."""
    import triton

    from kgc.targets import target_for
    from kgc.tiling.library import library_kernels_enabled
    from kgc.tuned_defaults import resolve

    record = target_for(target)
    # The table's entries, not its file name: a table rebuilt in place is
    # another key.
    table = resolve(None, record.sm)
    tuned = None if table is None else [table.target, [entry.to_dict() for entry in table.entries]]
    parts = {"format": _FORMAT, "graph": module_text, "target": target,
             "target_record": repr(record), "library": library_kernels_enabled(),
             "tuned": tuned, "triton": triton.__version__, "kgc": compiler_fingerprint()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class GraphCache:
    def __init__(self, root: pathlib.Path):
        self.root = pathlib.Path(root)
        # What this store did in this process: graphs served, stored, and
        # damaged entries removed.
        self.stats = {"hits": 0, "stored": 0, "damaged": 0}

    @classmethod
    def beside(cls, kernel_cache) -> "GraphCache | None":
        """The graph cache in the kernel cache's folder (one store per
        folder in a process, so that its stats add up); None without one."""
        return None if kernel_cache is None else _shared(kernel_cache.root.resolve())

    def path(self, key: str) -> pathlib.Path:
        return self.root / GRAPHS / key[:2] / key

    def load(self, key: str, read: Callable):
        """The CompiledModule stored under `key`, read by `read` (the
        compiler's `load_module`, which checks every artifact), or None on a
        miss or a damaged entry (removed, with a warning)."""
        folder = self.path(key)
        if not (folder / "manifest.json").exists():
            return None
        try:
            compiled = read(folder)
            compiled.stages = {stage: (folder / f"{_STEM}.{stage}.mlir").read_text()
                               for stage in _STAGES}
        except (KgcError, OSError) as error:
            warnings.warn(f"kgc graph cache: ignoring the damaged entry '{folder}' and "
                          f"compiling again: {error}", RuntimeWarning, stacklevel=3)
            shutil.rmtree(folder, ignore_errors=True)
            self.stats["damaged"] += 1
            return None
        self.stats["hits"] += 1
        return compiled

    def store(self, key: str, compiled) -> None:
        """Writes `compiled` under `key`, unless an entry is there already.
        A failure to write is a warning: the compile's result stands."""
        folder = self.path(key)
        if (folder / "manifest.json").exists():
            return
        # A folder without its manifest is no entry (cleared by hand?).
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            scratch = pathlib.Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=folder.parent))
            try:
                compiled.write(scratch, _STEM)
                os.rename(scratch, folder)
                self.stats["stored"] += 1
            except (KgcError, OSError):
                shutil.rmtree(scratch, ignore_errors=True)
                if not folder.exists():
                    raise
        except (KgcError, OSError) as error:
            warnings.warn(f"kgc graph cache: cannot store '{folder}': {error}", RuntimeWarning,
                          stacklevel=3)


@functools.lru_cache(maxsize=None)
def _shared(root: pathlib.Path) -> GraphCache:
    return GraphCache(root)
