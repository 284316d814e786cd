"""Fuzzing kgc's front doors: mutated kg programs through kgc-opt and
`kgc compile`, bad command-line options, bad API calls. Whatever the input,
kgc answers with a result or a clean error: exit status 0 or 1 (2 for a
usage error of argparse), never a Python traceback, a signal, or an
"internal error" (a pass that crashed instead of reporting)."""

from __future__ import annotations

import pathlib
import re
import subprocess

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgc
from tests.tools import console_script

ROOT = pathlib.Path(__file__).resolve().parent.parent
_SPLIT = re.compile(r"^// -----$", re.MULTILINE)


def _corpus() -> list[str]:
    """The kg programs of the lit tests and the built-in example, one per
    `// -----` part."""
    files = [ROOT / "python" / "kgc" / "examples" / "rmsnorm_matmul.mlir"]
    files += [ROOT / "lit_tests" / name for name in (
        "ops.mlir", "e2e-every-op.mlir", "kg-decompose.mlir", "kg-fuse.mlir", "kg-tile.mlir",
        "kg-legalize-dot.mlir", "kg-pad-mask.mlir", "convert-kg-to-ttir.mlir", "kgc-cse.mlir")]
    parts = []
    for path in files:
        text = "\n".join(line for line in path.read_text().splitlines()
                         if not line.lstrip().startswith("//"))
        parts += [part.strip() + "\n" for part in _SPLIT.split(text) if "func.func" in part]
    return parts


CORPUS = _corpus()
_TOKEN = re.compile(r'\s+|"[^"\n]*"|[%@^#!]?[\w.$]+|->|.')
_NUMBERS = ["0", "1", "-1", "3", "17", "-7", "1024", "2147483648", "9223372036854775807",
            "99999999999999999999", "1.0e+308", "0.0", "nan"]


@st.composite
def mutated_programs(draw) -> str:
    tokens = _TOKEN.findall(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 4))):
        if not tokens:
            break
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "number", "truncate"]))
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap":
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        elif kind == "number":
            numbers = [k for k, t in enumerate(tokens) if re.fullmatch(r"-?\d[\w.+]*", t)]
            if numbers:
                k = numbers[i % len(numbers)]
                tokens[k] = draw(st.sampled_from(_NUMBERS))
        else:
            tokens = tokens[:i]
    return "".join(tokens)


PIPELINE = ("builtin.module(kgc-cse,kgc-dce,kg-decompose,kg-fuse,kg-tile,kg-legalize-dot,"
            "kg-pad-mask,convert-kg-to-ttir,kgc-cse,kgc-dce)")


def assert_clean(result: subprocess.CompletedProcess, allowed=(0, 1)) -> None:
    output = result.stderr[-3000:]
    assert result.returncode in allowed, (result.returncode, output)  # < 0: a signal
    assert "Traceback" not in result.stderr, output
    assert "internal error" not in result.stderr, output


def run(tool: str, *args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(tool), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


FUZZ = settings(max_examples=12, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(st.lists(mutated_programs(), min_size=1, max_size=25))
def test_mutated_programs_through_kgc_opt(tmp_path, programs):
    # One kgc-opt run takes many programs, each a part of --split-input-file.
    (tmp_path / "fuzz.mlir").write_text("\n// -----\n".join(programs))
    assert_clean(run("kgc-opt", "fuzz.mlir", "--split-input-file", "--allow-unregistered-dialect",
                     f"--pass-pipeline={PIPELINE}", cwd=tmp_path))


@FUZZ
@given(mutated_programs())
def test_mutated_programs_through_kgc_compile(tmp_path, program):
    (tmp_path / "fuzz.mlir").write_text(program)
    assert_clean(run("kgc", "compile", "fuzz.mlir", "-o", "out", "--emit", "ttir", cwd=tmp_path))


_OPTION_WORDS = ["--target", "--emit", "-o", "--pass-pipeline", "--kg-tile", "--kg-legalize-dot",
                 "--kgc-cse", "--split-input-file", "--verify-diagnostics", "--mlir-timing",
                 "--mlir-print-ir-after", "--list-passes", "--", "-", "sm_80", "sm_99", "ttir",
                 "kg", "=", "target=", "block_m=", "{", "}", "(", ")", ",", "-1", "0", "1e9",
                 "builtin.module(", "func.func(", "kg-fuse", "nope", "\u00e9", "out", "graph.mlir"]


@FUZZ
@given(st.lists(st.lists(st.sampled_from(_OPTION_WORDS), min_size=1, max_size=3).map("".join),
                max_size=5),
       st.sampled_from([("kgc-opt", "graph.mlir"), ("kgc", "compile", "graph.mlir", "--emit", "kg")]))
def test_bad_command_line_options(tmp_path, words, tool):
    (tmp_path / "graph.mlir").write_text(CORPUS[0])
    assert_clean(run(*tool, *words, cwd=tmp_path), allowed=(0, 1, 2))


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.text(max_size=30), st.binary(max_size=10), st.sampled_from(["sm_90", "sm_80", 90, "90a"]),
    st.lists(st.integers(-5, 5), max_size=3), st.builds(object))


@settings(max_examples=60, deadline=None)
@given(source=st.one_of(_VALUES, st.sampled_from(CORPUS), mutated_programs()),
       target=_VALUES, pipeline=st.one_of(st.none(), st.text(max_size=40), _VALUES))
def test_bad_compile_calls(source, target, pipeline):
    # Errors in the arguments are KgcErrors; nothing gets past kgc's own
    # passes here (a kernel reaching Triton would make the test slow).
    try:
        kgc.compile(source, target=target, pipeline=pipeline if pipeline else
                    "builtin.module(kg-decompose,kg-fuse)")
    except kgc.KgcError:
        pass


_GRAPH_OPS = ["exp", "relu", "add", "mul", "matmul", "softmax", "rms_norm", "layer_norm",
              "mean", "sum", "transpose", "reshape", "cast", "broadcast_to", "slice", "concat"]


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.integers(-2, 2**64), max_size=4) | _VALUES,
       dtype=st.sampled_from(["f32", "f16", "bf16", "f8e5m2", "i32", None, 3]),
       op=st.sampled_from(_GRAPH_OPS), arguments=st.lists(_VALUES, max_size=3))
def test_bad_graph_calls(shape, dtype, op, arguments):
    graph = kgc.Graph("fuzz")
    try:
        x = graph.input("x", shape, dtype)
        method = getattr(graph, op)
        graph.output(method(x, *arguments))
        graph.build()
    except (kgc.GraphError, kgc.KgcError):
        pass
    except TypeError as error:
        # A call with too many or too few arguments is Python's own error.
        assert re.search(r"positional argument|required|takes", str(error)), error
