"""The README is true: every shell and Python block of it runs, in order, in
one folder, as a reader would run them (`tests/readme_blocks.py`), except
those that need a GPU (run by tests/gpu/test_readme.py) and those that say
why no test runs them. Its C example, `main.c` as the README prints it, is
built and run against a stand-in for libcuda (tests/stub_libcuda.c) that
checks every pointer a launch gets, the workspace's included."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

import kgc
from tests import readme_blocks
from tests.readme_blocks import Block

CC = shutil.which("gcc") or shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler (gcc or cc)")


def test_every_block_runs_or_says_why_not():
    blocks = readme_blocks.blocks()
    assert len(blocks) > 10
    for block in blocks:
        assert block.language in ("sh", "python", "c"), block.label
        if block.language == "c":
            assert block.file, f"{block.label}: a C block must name the file it is"
        if block.marker is not None:
            assert block.file or block.needs_gpu or block.not_run_reason, \
                f"{block.label}: unknown marker <!-- {block.marker} -->"
    assert [b.file for b in blocks if b.file] == ["main.c", "my_passes.py"]
    # Most of it runs without a GPU.
    cpu = [b for b in blocks if b.language in readme_blocks.RUNNABLE and not b.file
           and not b.needs_gpu and not b.not_run_reason]
    assert len(cpu) >= 9


def test_markers_are_read_from_the_line_before_a_block():
    text = ("intro\n\n<!-- gpu -->\n```sh\nkgc bench\n```\n\n"
            "<!-- not run: slow -->\n```python\nprint(1)\n```\n\n```sh\nkgc compile\n```\n")
    gpu, slow, plain = readme_blocks.blocks(text)
    assert (gpu.needs_gpu, gpu.text, gpu.line) == (True, "kgc bench\n", 4)
    assert slow.not_run_reason == "slow" and not slow.needs_gpu
    assert plain.marker is None and plain.text == "kgc compile\n"


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """The stub libcuda, and what the README's C example must give it."""
    if CC is None:
        pytest.skip("needs a C compiler (gcc or cc)")
    folder = tmp_path_factory.mktemp("stub")
    readme_blocks.build_stub_libcuda(folder)
    # The graph `kgc compile --emit c` exports: the built-in example, sm_90.
    example = pathlib.Path(kgc.__file__).parent / "examples" / "rmsnorm_matmul.mlir"
    graph = kgc.compile(example, target="sm_90")
    launches = folder / "launches.txt"
    launches.write_text(readme_blocks.launch_expectations(graph))
    return folder, launches, graph


def stub_environment(stub) -> dict:
    folder, launches, _ = stub
    return readme_blocks.environment({
        "LIBRARY_PATH": str(folder), "LD_LIBRARY_PATH": str(folder),
        "STUB_CUDA_LAUNCHES": str(launches)})


@needs_cc
def test_the_readme_runs_without_a_gpu(stub, tmp_path):
    blocks = readme_blocks.blocks()
    readme_blocks.prepare(tmp_path, blocks)
    env = stub_environment(stub)
    ran = []
    for block in blocks:
        if block.language not in readme_blocks.RUNNABLE or block.file:
            continue
        if block.needs_gpu or block.not_run_reason:
            continue
        result = readme_blocks.run(block, tmp_path, env)
        assert result.returncode == 0, (f"{block.label} failed (exit {result.returncode}):\n"
                                        f"{block.text}\n--- stdout\n{result.stdout[-3000:]}\n"
                                        f"--- stderr\n{result.stderr[-3000:]}")
        assert "Traceback" not in result.stderr, f"{block.label}:\n{result.stderr[-3000:]}"
        ran.append((block, result))
    # The C example was built from the README's own main.c and printed ok.
    (c_example, result) = next((b, r) for b, r in ran if "./rmsnorm_matmul" in b.text)
    assert result.stdout.splitlines()[-1] == "ok", result.stdout + result.stderr
    assert (tmp_path / "main.c").read_text() in readme_blocks.README.read_text()
    assert len(ran) >= 9


def build_main(source: str, folder: pathlib.Path, stub) -> subprocess.CompletedProcess:
    """Exports the example, builds `source` as main.c with the README's
    build line, and runs it against the stub."""
    block = next(b for b in readme_blocks.blocks() if b.language == "sh"
                 and "./rmsnorm_matmul" in b.text)
    readme_blocks.prepare(folder, [Block("c", source, 0, "file: main.c")])
    return readme_blocks.run(block, folder, stub_environment(stub))


def readme_main() -> str:
    return next(b.text for b in readme_blocks.blocks() if b.file == "main.c")


@needs_cc
@pytest.mark.parametrize("mistake", ["no workspace", "half the workspace", "a short output"])
def test_the_stub_refuses_a_main_c_that_gives_too_little(stub, tmp_path, mistake):
    # The check that makes the README's main.c print ok can fail.
    source = readme_main()
    if mistake == "no workspace":
        source = source.replace("w, y, workspace);", "w, y, 0);")
    elif mistake == "half the workspace":
        source = source.replace("cuMemAlloc(&workspace, workspace_bytes)",
                                "cuMemAlloc(&workspace, workspace_bytes / 2)")
    else:
        source = source.replace("cuMemAlloc(&y, 16 * 6144 * 2)", "cuMemAlloc(&y, 16 * 6144)")
    assert source != readme_main()
    result = build_main(source, tmp_path, stub)
    assert result.stdout.splitlines()[-1] == "failed", result.stdout + result.stderr
    assert result.returncode != 0
    if mistake != "no workspace":  # a null workspace is refused by kgc's code itself
        assert re.search(r"stub libcuda: launch \d, parameter \d: not inside one cuMemAlloc'd "
                         r"buffer", result.stderr), result.stderr
