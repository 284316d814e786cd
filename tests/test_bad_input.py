"""Input that used to crash kgc or end in a Python traceback: each gets a
clean error (with its location where it has one) and exit status 1 from
kgc-opt and `kgc compile`, and a KgcError from `kgc.compile`."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

import kgc
from kgc.parsing import MAX_NESTING
from tests.tools import console_script

DEPTH = 20000
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _nested_type(depth: int) -> str:
    return "func.func @f(%x: " + "tensor<" * depth + "f32" + ">" * depth + ") {\n  return\n}\n"


def _nested_attribute(depth: int) -> str:
    return "func.func @f() attributes {a = " + "[" * depth + "]" * depth + "} {\n  return\n}\n"


def _nested_regions(depth: int) -> str:
    return ("func.func @f() {\n" + '"test.r"() ({\n' * depth + "}) : () -> ()\n" * depth
            + "  return\n}\n")


def _nested_affine_map(depth: int) -> str:
    return ("func.func @f() attributes {m = affine_map<(d0) -> (" + "(" * depth + "d0"
            + ")" * depth + ")>} {\n  return\n}\n")


# (what, text, where the first bracket past MAX_NESTING is)
DEEP_INPUTS = [
    ("types", _nested_type(DEPTH), f"1:{len('func.func @f(%x: ') + 7 * MAX_NESTING}"),
    ("attributes", _nested_attribute(10000), f"1:{len('func.func @f() attributes {a = ') + MAX_NESTING}"),
    # Two brackets a level: `(` and `{`.
    ("regions", _nested_regions(DEPTH), f"{MAX_NESTING // 2 + 1}:13"),
    ("affine maps", _nested_affine_map(DEPTH),
     f"1:{len('func.func @f() attributes {m = affine_map<(d0) -> (') + MAX_NESTING - 2}"),
]


def run(tool: str, *args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(tool), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def assert_clean_failure(result: subprocess.CompletedProcess, message: str) -> None:
    # A signal shows as a negative status.
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert message in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize("what, text, where", DEEP_INPUTS, ids=[d[0] for d in DEEP_INPUTS])
def test_deep_nesting_is_refused_by_kgc_opt(tmp_path, what, text, where):
    (tmp_path / "deep.mlir").write_text(text)
    result = run("kgc-opt", "deep.mlir", "--allow-unregistered-dialect", "--kgc-cse", cwd=tmp_path)
    assert_clean_failure(result, f"deep.mlir:{where}: error: nesting too deep (more than "
                                 f"{MAX_NESTING} levels of brackets)")


@pytest.mark.parametrize("what, text, where", DEEP_INPUTS, ids=[d[0] for d in DEEP_INPUTS])
def test_deep_nesting_is_refused_by_kgc_compile(tmp_path, what, text, where):
    (tmp_path / "deep.mlir").write_text(text)
    result = run("kgc", "compile", "deep.mlir", "--emit", "kg", cwd=tmp_path)
    assert_clean_failure(result, f"deep.mlir:{where}: error: nesting too deep")


@pytest.mark.parametrize("what, text, where", DEEP_INPUTS, ids=[d[0] for d in DEEP_INPUTS])
def test_deep_nesting_is_refused_by_the_api(tmp_path, what, text, where):
    with pytest.raises(kgc.KgcError, match=rf"<string>:{where}: error: nesting too deep"):
        kgc.compile(text)
    path = tmp_path / "deep.mlir"
    path.write_text(text)
    with pytest.raises(kgc.KgcError, match=rf"deep.mlir:{where}: error: nesting too deep"):
        kgc.compile(path)


def test_nesting_up_to_the_limit_parses(tmp_path):
    # Just under MAX_NESTING brackets, with the function's own `{`: regions
    # are half as deep, each `(` and `{`.
    depth = (MAX_NESTING - 1) // 2
    (tmp_path / "deep.mlir").write_text(_nested_regions(depth)
                                        + _nested_attribute(MAX_NESTING - 1).replace("@f", "@g"))
    result = run("kgc-opt", "deep.mlir", "--allow-unregistered-dialect", "--kgc-cse", "--kgc-dce",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count('"test.r"') == depth


def test_brackets_in_strings_and_comments_do_not_count(tmp_path):
    text = ('// ' + "(" * 1000 + "\n"
            'func.func @f() attributes {s = "' + "[" * 1000 + '\\"' + "{" * 1000 + '"} {\n'
            "  return\n}\n")
    (tmp_path / "brackets.mlir").write_text(text)
    result = run("kgc-opt", "brackets.mlir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("tool", [("kgc-opt", "good.mlir"), ("kgc", "compile", "--emit", "kg")],
                         ids=["kgc-opt", "kgc compile"])
def test_pipeline_nested_too_deep(tmp_path, tool):
    (tmp_path / "good.mlir").write_text("func.func @f() {\n  return\n}\n")
    pipeline = "builtin.module(" + "func.func(" * 500 + "cse" + ")" * 501
    result = run(*tool, f"--pass-pipeline={pipeline}", cwd=tmp_path)
    prefix = tool[0]
    assert_clean_failure(result, f"{prefix}: error: invalid pass pipeline: pipeline nested too "
                                 "deep (more than 64 levels) at column ")
    assert len(result.stderr) < 1000


@pytest.mark.parametrize("output, message", [
    ("/proc/x", "kgc: error: cannot create the folder '/proc/x': "),
    ("/dev/null", "kgc: error: cannot write to '/dev/null': it exists and is not a folder"),
    ("/dev/null/out", "kgc: error: cannot create the folder '/dev/null/out': '/dev/null' is "
                      "not a folder"),
])
def test_output_folder_that_cannot_be_created(tmp_path, output, message):
    result = run("kgc", "compile", "-o", output, cwd=tmp_path)
    assert_clean_failure(result, message)
    # Refused before compiling: nothing was printed about a compile.
    assert result.stdout == ""


def test_output_folder_that_is_a_file_through_the_api(tmp_path):
    (tmp_path / "taken").write_text("")
    source = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = kg.exp %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
    with pytest.raises(kgc.KgcError, match="cannot create the folder '.*taken/kernels': "
                                           "'.*taken' is not a folder"):
        kgc.compile(source, output_dir=tmp_path / "taken")


def test_input_that_is_not_utf8_names_the_byte(tmp_path):
    (tmp_path / "binary.mlir").write_bytes(b"func.func @f() {\n  return\n}\n// \xff\n")
    for tool in (("kgc-opt",), ("kgc", "compile")):
        result = run(*tool, "binary.mlir", cwd=tmp_path)
        assert_clean_failure(result, f"{tool[0]}: error: 'binary.mlir' is not UTF-8 text (byte 31)")
    with pytest.raises(kgc.KgcError, match=r"'.*binary.mlir' is not UTF-8 text \(byte 31\)"):
        kgc.compile(tmp_path / "binary.mlir")


MEAN_OF_NOTHING = """\
func.func @m(%x: tensor<4x0xf32>) -> tensor<4xf32> {
  %y = kg.reduce mean %x dims [1] : tensor<4x0xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


def test_mean_over_zero_elements_is_refused_where_it_is_written(tmp_path):
    (tmp_path / "mean.mlir").write_text(MEAN_OF_NOTHING)
    result = run("kgc", "compile", "mean.mlir", cwd=tmp_path)
    assert_clean_failure(result, "mean.mlir:2:8: error: 'kg.reduce' op mean over zero elements: "
                                 "dimension 1 of x 'tensor<4x0xf32>' is empty")
    assert "ZeroDivisionError" not in result.stderr


@pytest.mark.parametrize("build, message", [
    (lambda g, x: g.mean(x, 1), "reduce: mean over zero elements: dimension 1 of x (4, 0) f32 "
                                "is empty"),
    (lambda g, x: g.rms_norm(x), "rms_norm: normalizes over zero elements: normalized_shape [0] "
                                 "of x (4, 0) f32 is empty"),
    (lambda g, x: g.layer_norm(x), "layer_norm: normalizes over zero elements: normalized_shape "
                                   "[0] of x (4, 0) f32 is empty"),
], ids=["mean", "rms_norm", "layer_norm"])
def test_norms_over_zero_elements_through_the_graph_api(build, message):
    # The graph API verifies each op as it is called: the error is raised
    # at the call that makes the op, with the verifier's message.
    graph = kgc.Graph("nothing")
    x = graph.input("x", (4, 0), "f32")
    with pytest.raises(kgc.GraphError) as raised:
        build(graph, x)
    assert str(raised.value) == message


@pytest.mark.parametrize("shape, message", [
    ((4, 2**63), "input: shape (4, 9223372036854775808) has dimension 1 of 9223372036854775808, "
                 "more than 2**63 - 1"),
    ((2**32, 2**32), "input: shape (4294967296, 4294967296) has 18446744073709551616 elements, "
                     "more than 2**63 - 1"),
])
def test_dimensions_past_64_bits_through_the_graph_api(shape, message):
    graph = kgc.Graph("huge")
    with pytest.raises(kgc.GraphError) as raised:
        graph.input("x", shape, "f32")
    assert str(raised.value) == message


# Found by tests/test_fuzz.py: a kernel in tiled form written by hand (no
# kg-tile attributes) whose dot is narrower than 16.
HAND_TILED_NARROW_DOT = """\
func.func @tf32_tile_dot(%arg: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %y = kg.kernel @dot(%arg) : (tensor<16x8xf32>) -> tensor<16x8xf32> {
  ^bb0(%x: memref<16x8xf32>, %out: memref<16x8xf32>):
    %c0 = arith.constant 0 : i32
    %av = memref.reinterpret_cast %x to offset: [0], sizes: [16, 8, 1], strides: [8, 1, 0] : memref<16x8xf32> to memref<16x8x1xf32, strided<[8, 1, 0]>>
    %bv = memref.reinterpret_cast %x to offset: [0], sizes: [1, 8, 8], strides: [0, 8, 1] : memref<16x8xf32> to memref<1x8x8xf32, strided<[0, 8, 1]>>
    %a = kg.tile_load %av[%c0, %c0, %c0] : memref<16x8x1xf32, strided<[8, 1, 0]>> -> tensor<16x8x1xf32>
    %b = kg.tile_load %bv[%c0, %c0, %c0] : memref<1x8x8xf32, strided<[0, 8, 1]>> -> tensor<1x8x8xf32>
    %acc = kg.constant 0.0 : tensor<16x1x8xf32>
    %d = kg.tile_dot %a, %b, %acc : (tensor<16x8x1xf32>, tensor<1x8x8xf32>, tensor<16x1x8xf32>) -> tensor<16x1x8xf32>
    %ov = memref.reinterpret_cast %out to offset: [0], sizes: [16, 1, 8], strides: [8, 0, 1] : memref<16x8xf32> to memref<16x1x8xf32, strided<[8, 0, 1]>>
    kg.tile_store %d, %ov[%c0, %c0, %c0] : tensor<16x1x8xf32>, memref<16x1x8xf32, strided<[8, 0, 1]>>
    kg.yield
  }
  return %y : tensor<16x8xf32>
}
"""


def test_narrow_dot_in_a_hand_tiled_kernel(tmp_path):
    (tmp_path / "dot.mlir").write_text(HAND_TILED_NARROW_DOT)
    result = run("kgc-opt", "dot.mlir", "--kg-legalize-dot", cwd=tmp_path)
    assert_clean_failure(result, "dot.mlir:10:10: error: kernel @dot: a dot of 16x8x8 needs tiles "
                                 "of at least 16, and the kernel has no 'tile' and 'iteration' "
                                 "attributes (from kg-tile) to grow them by")


def test_kg_fuse_on_kgc_cse_lit_input(tmp_path):
    # Found by tests/test_fuzz.py: kgc-cse moves a loop body's kg.exp onto
    # the same one outside the loop; kg-fuse then fused it into a kernel as
    # if nothing else read it, and erased it while the loop still did
    # (LLVM ERROR: operation destroyed but still has uses).
    text = "\n".join(line for line in (ROOT / "lit_tests" / "kgc-cse.mlir").read_text().splitlines()
                     if not line.lstrip().startswith("//"))
    (tmp_path / "cse.mlir").write_text(text)
    result = run("kgc-opt", "cse.mlir", "--allow-unregistered-dialect",
                 "--pass-pipeline=builtin.module(kgc-cse,kgc-dce,kg-decompose,kg-fuse)",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "@reuse_across_nesting_0_pointwise" in result.stdout


@pytest.mark.parametrize("signature,what", [
    ("(%x: tensor<4xf32>, %i: index) -> tensor<4xf32>", "argument #1 has type index"),
    ("(%x: tensor<4xf32>) -> (tensor<4xf32>, i32)", "result #1 has type i32"),
])
def test_a_function_of_non_tensors_is_refused_by_kgc_compile(tmp_path, signature, what):
    # The runtime passes tensors only: an index or scalar in the signature
    # is refused with the function's location before any pass runs.
    returns = "%y : tensor<4xf32>" if "i32" not in signature else "%y, %c : tensor<4xf32>, i32"
    constant = "" if "i32" not in signature else "  %c = arith.constant 1 : i32\n"
    (tmp_path / "bad.mlir").write_text(
        f"func.func @f{signature} {{\n{constant}"
        f"  %y = kg.exp %x : tensor<4xf32>\n  return {returns}\n}}\n")
    result = run("kgc", "compile", "bad.mlir", "-o", "out", cwd=tmp_path)
    assert_clean_failure(result, f"bad.mlir:1:1: error: func @f: {what}")
