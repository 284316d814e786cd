"""Finding kgc's command-line tools from the tests."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest


def console_script(name: str) -> str:
    """The path of an installed kgc command: next to the Python running the
    tests (a virtual environment need not be on PATH), else on PATH."""
    beside_python = pathlib.Path(sys.executable).parent / name
    if beside_python.is_file():
        return str(beside_python)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is neither next to {sys.executable} nor on PATH; install kgc")
    return found
