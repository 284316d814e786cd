"""What produced a benchmark result: recorded in every result file.

    data = {"rows": rows, "provenance": provenance.collect()}
    provenance.write_json(path, {"rows": rows})   # the same, written

A number without its origin cannot be compared with a later one: the code
may have changed under it (a commit, or uncommitted edits), or the GPU or
the compiler underneath. `collect` gathers, once per result file:

    commit     the git commit of the kgc source tree that ran (outside a git
               checkout, KGC_SOURCE_COMMIT as the builder of the installed
               copy set it, else None)
    dirty      whether tracked files differed from that commit (uncommitted
               edits; untracked files, such as results being written, do
               not count; outside a checkout KGC_SOURCE_DIRTY=1 or 0)
    gpu        the CUDA device's name (None without one)
    versions   kgc, torch and triton as installed
    date       when the result was made, UTC, ISO 8601
    command    the command line that produced it, program and paths inside
               the source tree relative to its root, so that it reads the
               same on every machine

`kgc bench` (`kgc.bench.run`) and the scripts in benchmarks/ all use it.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import shlex
import subprocess
import sys
from collections.abc import Sequence

__all__ = ["collect", "command_line", "write_json"]

FIELDS = ("commit", "dirty", "gpu", "versions", "date", "command")
_PACKAGES = ("kgc", "torch", "triton")


def _source_root() -> pathlib.Path | None:
    """The root of the git checkout this package runs from, if any."""
    found = _git(pathlib.Path(__file__).resolve().parent, "rev-parse", "--show-toplevel")
    return pathlib.Path(found) if found else None


def _git(folder: pathlib.Path, *arguments: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _versions(packages: Sequence[str] = _PACKAGES) -> dict:
    from importlib import metadata

    versions = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _gpu() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def command_line(argv: Sequence[str] | None = None, root: pathlib.Path | None = None) -> str:
    """`argv` (default sys.argv) as one shell-quoted line: a Python script
    as `python SCRIPT`, SCRIPT relative to `root` (the source tree) when
    inside it, else by its name; an installed program by its name; and any
    argument that is a path inside `root` relative to it."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""

    def portable(argument: str) -> str:
        if root is None or not os.path.isabs(argument):
            return argument
        path = pathlib.Path(argument)
        try:
            return str(path.resolve().relative_to(root.resolve()))
        except ValueError:
            return argument

    program = portable(argv[0])
    if program.endswith(".py"):
        words = ["python", program if not os.path.isabs(program) else pathlib.Path(program).name]
    else:
        words = [pathlib.Path(program).name]
    return shlex.join(words + [portable(a) for a in argv[1:]])


def collect(argv: Sequence[str] | None = None, packages: Sequence[str] = _PACKAGES) -> dict:
    """The provenance of a result made now by this process, run as `argv`
    (default sys.argv), with the versions of `packages`; see the module
    docstring."""
    root = _source_root()
    commit = dirty = None
    if root is not None:
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    if commit is None:
        # kgc installed from a build rather than run from its checkout (a
        # GPU host that gets a wheel): the builder names the commit.
        commit = os.environ.get("KGC_SOURCE_COMMIT") or None
        dirty = {"1": True, "0": False}.get(os.environ.get("KGC_SOURCE_DIRTY", ""))
    return {"commit": commit, "dirty": dirty, "gpu": _gpu(),
            "versions": _versions(packages),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command_line(argv, root)}


def write_json(path, data: dict, argv: Sequence[str] | None = None, indent: int = 2,
               packages: Sequence[str] = _PACKAGES) -> None:
    """`data` (a dict of results) written to `path` as JSON, with its
    provenance (the versions of `packages`) under "provenance"."""
    if not isinstance(data, dict):
        raise TypeError(f"results to write are a dict, not {type(data).__name__}")
    record = {"provenance": collect(argv, packages), **data}
    pathlib.Path(path).write_text(json.dumps(record, indent=indent) + "\n")
