"""Every pass kgc-opt knows has a lit test, `lit_tests/<argument>.mlir`,
with a RUN line that runs it, as MLIR and Triton keep one test file per
pass."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

LIT_TESTS = pathlib.Path(__file__).resolve().parent.parent / "lit_tests"


def _kgc_opt_passes() -> list[str]:
    """The passes registered once kgc-opt's module is imported, listed in a
    fresh interpreter so that passes the tests register do not count."""
    script = (
        "import json, kgc.tools.opt; from kgc.passes import registered_passes; "
        "print(json.dumps(sorted(registered_passes())))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True)
    return json.loads(result.stdout)


PASSES = _kgc_opt_passes()


def _runs_pass(run_line: str, argument: str) -> bool:
    """True when the RUN line's kgc-opt runs `argument`, as a flag
    (`--kgc-cse`, `--kgc-cse=...`) or inside a `--pass-pipeline`."""
    name = re.escape(argument)
    flag = re.search(rf"(?<![\w-])--?{name}(?![\w-])", run_line)
    in_pipeline = re.search(rf"--pass-pipeline=\S*[(,]\s*{name}(?![\w-])", run_line)
    return "kgc-opt" in run_line and bool(flag or in_pipeline)


def test_the_built_in_passes_are_registered():
    assert {"kgc-cse", "kgc-dce"} <= set(PASSES)


@pytest.mark.parametrize("argument", PASSES)
def test_every_pass_has_a_lit_test_that_runs_it(argument):
    path = LIT_TESTS / f"{argument}.mlir"
    assert path.is_file(), f"pass '{argument}' has no lit test: write {path.relative_to(LIT_TESTS.parent)}"
    run_lines = [line.split("RUN:", 1)[1] for line in path.read_text().splitlines() if "RUN:" in line]
    assert run_lines, f"{path.name} has no RUN line"
    assert any(_runs_pass(line, argument) for line in run_lines), \
        f"no RUN line of {path.name} runs --{argument}"
    assert any("FileCheck" in line for line in run_lines), f"{path.name} checks nothing with FileCheck"


@pytest.mark.parametrize("line, expected", [
    ("kgc-opt %s --kgc-cse | FileCheck %s", True),
    ("kgc-opt %s --kgc-cse='a=1' | FileCheck %s", True),
    ("kgc-opt %s --pass-pipeline='builtin.module(kgc-dce,kgc-cse)' | FileCheck %s", True),
    ("kgc-opt %s --pass-pipeline='builtin.module(func.func(kgc-cse))' | FileCheck %s", True),
    ("kgc-opt %s --kgc-cse-extra | FileCheck %s", False),
    ("kgc-opt %s --kgc-dce | FileCheck %s", False),
    ("FileCheck %s --check-prefix=kgc-cse", False),
])
def test_run_line_matching(line, expected):
    assert _runs_pass(line, "kgc-cse") is expected
