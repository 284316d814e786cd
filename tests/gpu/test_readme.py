"""The README on a GPU: every block tests/test_readme.py runs, and those
marked `<!-- gpu -->`, in order in one folder (a GPU block may use what an
earlier block wrote). The C example runs on the real driver and must print
`ok`."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from tests import readme_blocks

pytestmark = pytest.mark.gpu

CC = shutil.which("gcc") or shutil.which("cc")
LIBCUDA_FOLDERS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64",
                   "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/usr/local/cuda/lib64")


def linker_folder(tmp_path: pathlib.Path) -> dict:
    """Where `-lcuda` of the README's build line finds the driver: the
    linker's own path, or a folder with a libcuda.so that points at the
    driver's libcuda.so.1 (hosts often have only that)."""
    probe = subprocess.run([CC, "-print-file-name=libcuda.so"], capture_output=True, text=True)
    if pathlib.Path(probe.stdout.strip()).is_absolute():
        return {}
    for folder in LIBCUDA_FOLDERS:
        for name in ("libcuda.so", "libcuda.so.1"):
            found = pathlib.Path(folder) / name
            if found.exists():
                link = tmp_path / "libcuda" / "libcuda.so"
                link.parent.mkdir()
                link.symlink_to(found)
                return {"LIBRARY_PATH": str(link.parent)}
    pytest.skip("no libcuda.so found for the README's -lcuda")


def test_the_readme_runs_on_a_gpu(tmp_path):
    if CC is None:
        pytest.skip("needs a C compiler (gcc or cc)")
    blocks = readme_blocks.blocks()
    work = tmp_path / "readme"
    work.mkdir()
    readme_blocks.prepare(work, blocks)
    env = readme_blocks.environment(linker_folder(tmp_path))
    ran = []
    for block in blocks:
        if block.language not in readme_blocks.RUNNABLE or block.file or block.not_run_reason:
            continue
        result = readme_blocks.run(block, work, env)
        assert result.returncode == 0, (f"{block.label} failed (exit {result.returncode}):\n"
                                        f"{block.text}\n--- stdout\n{result.stdout[-3000:]}\n"
                                        f"--- stderr\n{result.stderr[-3000:]}")
        ran.append((block, result))
    assert any(block.needs_gpu for block, _ in ran)
    _, c_example = next((b, r) for b, r in ran if "./rmsnorm_matmul" in b.text)
    assert c_example.stdout.splitlines()[-1] == "ok", c_example.stdout + c_example.stderr
