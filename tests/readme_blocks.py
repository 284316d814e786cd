"""The README's code blocks, and running them as a reader would.

Every fenced block of README.md is one of:

* a file (preceded by `<!-- file: NAME -->`): written to NAME before any
  block runs (the C example's `main.c`, a plugin's `my_passes.py`);
* a block to run, `sh` in bash and `python` in a fresh interpreter, each in
  order in one folder, so that a block may use what an earlier one wrote;
  one preceded by `<!-- gpu -->` needs a CUDA device and runs only in the
  GPU tests;
* a block that no test runs, preceded by `<!-- not run: REASON -->`.

The folder holds what the README's commands assume: `.venv` (the Python
environment running the tests, so that `.venv/bin/python` works), a
`graph.mlir` (the built-in example, its function named `@graph`) and an
`invalid.mlir` (lit's, for `--verify-diagnostics`).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HERE = pathlib.Path(__file__).resolve().parent

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(.*?)\s*-->$")
RUNNABLE = ("sh", "python")


@dataclasses.dataclass
class Block:
    language: str
    text: str
    line: int  # of the opening fence, 1-based
    marker: str | None  # the HTML comment on the line before it, if any

    @property
    def file(self) -> str | None:
        if self.marker and self.marker.startswith("file:"):
            return self.marker.removeprefix("file:").strip()
        return None

    @property
    def needs_gpu(self) -> bool:
        return self.marker == "gpu"

    @property
    def not_run_reason(self) -> str | None:
        if self.marker and self.marker.startswith("not run:"):
            return self.marker.removeprefix("not run:").strip()
        return None

    @property
    def label(self) -> str:
        return f"README.md:{self.line} ({self.language})"


def blocks(text: str | None = None) -> list[Block]:
    """The fenced blocks of the README, in order."""
    lines = (README.read_text() if text is None else text).splitlines()
    found, index = [], 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start = index
        previous = next((lines[i].strip() for i in range(start - 1, -1, -1) if lines[i].strip()),
                        "")
        marker = _MARKER.match(previous)
        index += 1
        body = []
        while index < len(lines) and lines[index].rstrip() != "```":
            body.append(lines[index])
            index += 1
        found.append(Block(match.group(1), "\n".join(body) + "\n", start + 1,
                           marker.group(1) if marker else None))
        index += 1
    return found


def prepare(folder: pathlib.Path, all_blocks: list[Block]) -> None:
    """What the README's commands assume, and its files, in `folder`."""
    import kgc

    environment = pathlib.Path(sys.executable).parent.parent
    (folder / ".venv").symlink_to(environment, target_is_directory=True)
    example = (pathlib.Path(kgc.__file__).parent / "examples" / "rmsnorm_matmul.mlir").read_text()
    (folder / "graph.mlir").write_text(example.replace("@rmsnorm_matmul", "@graph"))
    shutil.copy(ROOT / "lit_tests" / "invalid.mlir", folder / "invalid.mlir")
    for block in all_blocks:
        if block.file:
            (folder / block.file).write_text(block.text)


def build_stub_libcuda(folder: pathlib.Path) -> pathlib.Path:
    """tests/stub_libcuda.c built as `folder/libcuda.so`."""
    import triton

    include = pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "include"
    compiler = shutil.which("gcc") or shutil.which("cc")
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / "libcuda.so"
    subprocess.run([compiler, "-std=c11", "-Wall", "-Werror", f"-I{include}", "-shared", "-fPIC",
                    str(HERE / "stub_libcuda.c"), "-o", str(library)], check=True,
                   capture_output=True, text=True)
    return library


def launch_expectations(graph) -> str:
    """For the stub libcuda, the bytes behind each parameter of each launch
    of `graph` (a CompiledGraph), as the exported C code passes them: the
    tensors, the global scratch (0: a null pointer), the profile scratch."""
    import math

    from kgc.export.c_source import tensor_bytes

    lines = []
    for launch in graph.function.launches:
        kernel = graph.module.kernels[launch.kernel]
        sizes = [tensor_bytes(graph.function.buffers[b].shape, graph.function.buffers[b].dtype)
                 for b in launch.inputs + launch.outputs]
        scratch = int(kernel.artifact.metadata.get("global_scratch_size") or 0)
        sizes += [scratch * math.prod(kernel.grid), 0]
        lines.append(" ".join(str(size) for size in sizes))
    return "\n".join(lines) + "\n"


def environment(extra: dict | None = None) -> dict:
    """The environment of the blocks: kgc's commands on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("MLIR_ENABLE_DUMP", None)
    env.update(extra or {})
    return env


def run(block: Block, folder: pathlib.Path, env: dict,
        timeout: float = 600) -> subprocess.CompletedProcess:
    if block.language == "sh":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    else:
        command = [sys.executable, "-c", block.text]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)
