"""kgc-opt as a command: every error exits non-zero with an MLIR-style
message (`file:line:col: error: ...` where the error has a location,
`kgc-opt: error: ...` where it has none) and never a Python traceback;
input from stdin, output to -o, and --split-input-file."""

from __future__ import annotations

import subprocess

import pytest

from tests.tools import console_script

GOOD = """\
func.func @dup(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kg.exp %x : tensor<8xf32>
  %1 = kg.exp %x : tensor<8xf32>
  %2 = kg.add %0, %1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %2 : tensor<8xf32>
}
"""


@pytest.fixture(scope="module")
def kgc_opt_path() -> str:
    return console_script("kgc-opt")


@pytest.fixture
def kgc_opt(kgc_opt_path, tmp_path):
    """Runs kgc-opt in tmp_path; returns the completed process."""

    def run(*args: str, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        result = subprocess.run([kgc_opt_path, *args], input=data, capture_output=True,
                                cwd=tmp_path, timeout=120)
        result.stdout = result.stdout.decode()
        result.stderr = result.stderr.decode()
        return result

    return run


@pytest.fixture
def write(tmp_path):
    def write(name: str, text: str | bytes) -> str:
        path = tmp_path / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return name

    return write


def assert_fails(result: subprocess.CompletedProcess, message: str) -> None:
    assert result.returncode != 0, result.stdout
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


# --------------------------------------------------------------------------
# Errors with a location in the input
# --------------------------------------------------------------------------


def test_malformed_file(kgc_opt, write):
    name = write("malformed.mlir", "func.func @f( {\n")
    result = kgc_opt(name)
    assert_fails(result, "malformed.mlir:1:14: error: ")
    assert result.stdout == ""


def test_unknown_op_of_an_unknown_dialect(kgc_opt, write):
    name = write("unknown.mlir", 'func.func @f() {\n  %0 = "foo.bar"() : () -> i32\n  return\n}\n')
    assert_fails(kgc_opt(name),
                 "unknown.mlir:2:17: error: operation being parsed with an unregistered dialect")


def test_unknown_op_is_accepted_with_allow_unregistered_dialect(kgc_opt, write):
    name = write("unknown.mlir", 'func.func @f() {\n  %0 = "foo.bar"() : () -> i32\n  return\n}\n')
    result = kgc_opt(name, "--allow-unregistered-dialect")
    assert result.returncode == 0, result.stderr
    assert '"foo.bar"() : () -> i32' in result.stdout


def test_unknown_kg_op(kgc_opt, write):
    name = write("unknown_kg.mlir",
                 "func.func @f(%x: tensor<4xf32>) {\n  %0 = kg.frobnicate %x : tensor<4xf32>\n  return\n}\n")
    assert_fails(kgc_opt(name), "unknown_kg.mlir:2:8: error: custom op 'kg.frobnicate' is unknown")


def test_failed_verifier(kgc_opt, write):
    name = write("invalid.mlir", (
        "func.func @f(%x: tensor<4xf32>) -> tensor<8xf32> {\n"
        "  %0 = kg.exp %x : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
    ))
    result = kgc_opt(name, "--kgc-cse")
    assert_fails(result, "invalid.mlir:3:3: error: type of return operand 0 ('tensor<4xf32>') "
                         "doesn't match function result type ('tensor<8xf32>')")
    assert result.stdout == ""


def test_failed_kg_verifier(kgc_opt, write):
    name = write("bad_matmul.mlir", (
        "func.func @f(%a: tensor<4x8xf32>, %b: tensor<16x2xf32>) -> tensor<4x2xf32> {\n"
        "  %0 = kg.matmul %a, %b : (tensor<4x8xf32>, tensor<16x2xf32>) -> tensor<4x2xf32>\n"
        "  return %0 : tensor<4x2xf32>\n"
        "}\n"
    ))
    assert_fails(kgc_opt(name), "bad_matmul.mlir:2:8: error: 'kg.matmul' op")


def test_errors_from_stdin_name_stdin(kgc_opt):
    assert_fails(kgc_opt(stdin="func.func @f( {\n"), "<stdin>:1:14: error: ")


def test_input_that_is_not_utf8(kgc_opt, write):
    name = write("binary.mlir", b"\xff\xfe\x00 not text")
    assert_fails(kgc_opt(name), "kgc-opt: error: 'binary.mlir' is not UTF-8 text")
    assert_fails(kgc_opt(stdin=b"\xff\xfe"), "kgc-opt: error: '<stdin>' is not UTF-8 text")


# --------------------------------------------------------------------------
# Errors without a location: the pipeline and the files
# --------------------------------------------------------------------------


def test_unknown_pass(kgc_opt, write):
    name = write("good.mlir", GOOD)
    result = kgc_opt(name, "--no-such-pass")
    assert_fails(result, "kgc-opt: error: 'no-such-pass' is not a valid pass")
    assert result.stdout == ""


def test_unknown_pass_in_a_pipeline(kgc_opt, write):
    name = write("good.mlir", GOOD)
    assert_fails(kgc_opt(name, "--pass-pipeline=builtin.module(kgc-cse,func.func(nope))"),
                 "kgc-opt: error: 'func.func(nope)' is not a valid pass: 'nope' is neither a kgc pass")


def test_pipeline_errors_come_before_reading_the_input(kgc_opt):
    # The input does not exist; the bad pass is what is reported.
    result = kgc_opt("missing.mlir", "--no-such-pass")
    assert_fails(result, "'no-such-pass' is not a valid pass")
    assert "missing.mlir" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--kgc-cse=bogus=1"], "kgc-opt: error: pass 'kgc-cse' has no option 'bogus' (options: none)"),
    (["--pass-pipeline=builtin.module(kgc-dce{bogus=1})"],
     "kgc-opt: error: pass 'kgc-dce' has no option 'bogus'"),
    (["--canonicalize=max-iterations=many"],
     "kgc-opt: error: 'canonicalize{max-iterations=many}' is not a valid pass"),
    (["--kgc-cse={bogus=1}"], "kgc-opt: error: invalid pass options: "),
    (["--kg-legalize-dot=target=-90"],
     "kgc-opt: error: option 'target' of pass 'kg-legalize-dot' must be one of 80, 86, 87, 89, "
     "90, 100, 101, 120; got '-90'"),
    (["--kg-legalize-dot=target=1"],
     "kgc-opt: error: option 'target' of pass 'kg-legalize-dot' must be one of 80, 86, 87, 89, "
     "90, 100, 101, 120; got '1'"),
    (["--pass-pipeline=builtin.module(kg-legalize-dot{target=75})"],
     "kgc-opt: error: option 'target' of pass 'kg-legalize-dot' must be one of"),
])
def test_bad_option(kgc_opt, write, args, message):
    name = write("good.mlir", GOOD)
    assert_fails(kgc_opt(name, *args), message)


@pytest.mark.parametrize("pipeline", [
    "builtin.module(kgc-cse",
    "builtin.module(kgc-cse,,kgc-dce)",
    "builtin.module(kgc-cse{a=1)",
])
def test_malformed_pipeline(kgc_opt, write, pipeline):
    name = write("good.mlir", GOOD)
    assert_fails(kgc_opt(name, f"--pass-pipeline={pipeline}"), "kgc-opt: error: invalid pass pipeline: ")


def test_missing_input_file(kgc_opt):
    assert_fails(kgc_opt("missing.mlir", "--kgc-cse"),
                 "kgc-opt: error: cannot read 'missing.mlir': No such file or directory")


def test_input_that_is_a_directory(kgc_opt, tmp_path):
    (tmp_path / "folder").mkdir()
    assert_fails(kgc_opt("folder"), "kgc-opt: error: cannot read 'folder'")


def test_unwritable_output(kgc_opt, write):
    name = write("good.mlir", GOOD)
    assert_fails(kgc_opt(name, "-o", "no/such/folder/out.mlir"),
                 "kgc-opt: error: cannot write 'no/such/folder/out.mlir': No such file or directory")


def test_output_that_is_a_directory(kgc_opt, write, tmp_path):
    name = write("good.mlir", GOOD)
    (tmp_path / "folder").mkdir()
    assert_fails(kgc_opt(name, "-o", "folder"), "kgc-opt: error: cannot write 'folder'")


# --------------------------------------------------------------------------
# What works: stdin, -o, --split-input-file
# --------------------------------------------------------------------------


def test_stdin_input(kgc_opt):
    for args in ([], ["-"]):
        result = kgc_opt(*args, "--kgc-cse", stdin=GOOD)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("kg.exp") == 1
        assert result.stderr == ""


def test_output_file(kgc_opt, write, tmp_path):
    name = write("good.mlir", GOOD)
    result = kgc_opt(name, "--kgc-cse", "-o", "out.mlir")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    written = (tmp_path / "out.mlir").read_text()
    assert written.startswith("module {")
    assert written.count("kg.exp") == 1
    # The output parses again and prints the same.
    again = kgc_opt("out.mlir")
    assert again.returncode == 0 and again.stdout == written


def test_output_is_the_same_as_stdout(kgc_opt, write, tmp_path):
    name = write("good.mlir", GOOD)
    kgc_opt(name, "--kgc-cse", "-o", "out.mlir")
    assert kgc_opt(name, "--kgc-cse").stdout == (tmp_path / "out.mlir").read_text()


SPLIT = """\
func.func @first(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kg.exp %x : tensor<8xf32>
  %1 = kg.exp %x : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

func.func @second(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = kg.neg %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def test_split_input_file_joins_outputs_with_separators(kgc_opt, write):
    name = write("split.mlir", SPLIT)
    result = kgc_opt(name, "--split-input-file", "--kgc-cse")
    assert result.returncode == 0, result.stderr
    parts = result.stdout.split("\n// -----\n")
    assert len(parts) == 2
    assert parts[0].startswith("module {") and "@first" in parts[0] and "@second" not in parts[0]
    assert parts[0].count("kg.exp") == 1
    assert parts[1].startswith("module {") and "@second" in parts[1] and "@first" not in parts[1]


def test_split_input_file_keeps_line_numbers_and_other_parts(kgc_opt, write):
    broken = SPLIT + "\n// -----\n\nfunc.func @third() {\n  %0 = kg.bogus\n  return\n}\n"
    name = write("split.mlir", broken)
    result = kgc_opt(name, "--split-input-file")
    assert_fails(result, "split.mlir:17:8: error: custom op 'kg.bogus' is unknown")
    # The parts that are fine are still printed.
    assert result.stdout.count("module {") == 2
    assert result.stdout.count("// -----") == 1


def test_without_split_input_file_the_parts_are_one_module(kgc_opt, write):
    name = write("split.mlir", SPLIT)
    result = kgc_opt(name)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("module {") == 1
    assert "// -----" not in result.stdout


def test_version_as_mlir_opt_has_one(kgc_opt):
    import importlib.metadata

    result = kgc_opt("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"kgc {importlib.metadata.version('kgc')} (")
