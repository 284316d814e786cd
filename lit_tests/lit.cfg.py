# lit configuration for kgc's pass tests: one .mlir file per pass, RUN lines
# in the style of MLIR and Triton (`kgc-opt %s --kgc-cse | FileCheck %s`).

import os
import shutil
import sys

import lit.formats

config.name = "kgc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)

# The tools live next to the Python that runs lit (a virtual environment's
# bin/), which need not be on PATH.
tool_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([tool_dir, os.environ.get("PATH", "")])
for variable in ("HOME", "TMPDIR", "TRITON_CACHE_DIR"):
    if variable in os.environ:
        config.environment[variable] = os.environ[variable]
# The pass tests pin kgc's heuristics; a test of the tuned-defaults table
# names its table (kg-tile's tuned-defaults option), so that shipping a
# table for a target changes no other test.
config.environment["KGC_TUNED_DEFAULTS"] = "off"
# Tests set MLIR_ENABLE_DUMP themselves where they want dumps.
config.environment.pop("MLIR_ENABLE_DUMP", None)


def tool(name):
    found = shutil.which(name, path=config.environment["PATH"])
    if found is None:
        lit_config.fatal(f"'{name}' not found next to {sys.executable}; install kgc with its test extras")
    return found


config.substitutions.append(("%kgc-opt", tool("kgc-opt")))
config.substitutions.append(("%kgc", tool("kgc")))
# FileCheck is the PyPI `filecheck` implementation.
config.substitutions.append(("FileCheck", tool("filecheck")))
config.substitutions.append(("%python", sys.executable))
