"""Compile errors, through `kgc.compile` and through `kgc compile`: every
failure is a `KgcError` (the API) or an MLIR-style message and exit status 1
(the command), never a Python traceback; and what a good compile writes.

Compiling needs no GPU: Triton compiles for the target given."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess

import pytest

from tests.tools import console_script

from mlir import ir

import kgc
from kgc.parsing import parse_text
from kgc.pipeline.artifact import KernelOptions
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.triton_stage import compile_kernel

GOOD = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""

UNPARSEABLE = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kg.exp %x : tensor<4xf32
  return %y : tensor<4xf32>
}
"""

EMPTY_TENSOR = """\
func.func @empty(%x: tensor<0x16xf32>) -> tensor<0x16xf32> {
  %y = kg.exp %x : tensor<0x16xf32>
  return %y : tensor<0x16xf32>
}
"""

EMPTY_MATMUL = """\
func.func @empty_k(%a: tensor<4x0xf16>, %b: tensor<0x8xf16>) -> tensor<4x8xf16> {
  %y = kg.matmul %a, %b : (tensor<4x0xf16>, tensor<0x8xf16>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}
"""

# A kernel in graph form whose tile along n (1000 wide) is set by hand to
# 100: neither a power of two nor the whole axis.
BAD_TILE = """\
func.func @scale(%a: tensor<16x1000xf32>) -> tensor<16x1000xf32> {
  %y = kg.kernel @relu_rows(%a) attributes {config = {block_n = 100}} : (tensor<16x1000xf32>) -> tensor<16x1000xf32> {
  ^bb0(%x: tensor<16x1000xf32>):
    %r = kg.relu %x : tensor<16x1000xf32>
    kg.yield %r : tensor<16x1000xf32>
  }
  return %y : tensor<16x1000xf32>
}
"""
# The default pipeline without kg-decompose and kg-fuse: the kernel is
# already there, and its attributes reach kg-tile.
FROM_TILING = ("builtin.module(kg-tile,kg-legalize-dot,kg-pad-mask,convert-kg-to-ttir,"
               "kgc-cse,kgc-dce)")

EXAMPLE = pathlib.Path(kgc.__file__).parent / "examples" / "rmsnorm_matmul.mlir"

BROKEN_TTIR = """\
module {
  tt.func public @broken_kernel(%arg0: !tt.ptr<f32>) {
    %0 = tt.no_such_op %arg0 : !tt.ptr<f32>
    tt.return
  }
}
"""


@pytest.fixture(scope="module")
def kgc_path() -> str:
    return console_script("kgc")


@pytest.fixture
def kgc_cli(kgc_path, tmp_path):
    """Runs `kgc ARGS...` in tmp_path; returns the completed process."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([kgc_path, *args], capture_output=True, text=True, cwd=tmp_path,
                              timeout=600)

    return run


@pytest.fixture
def write(tmp_path):
    def write(name: str, text: str) -> str:
        (tmp_path / name).write_text(text)
        return name

    return write


def assert_fails(result: subprocess.CompletedProcess, message: str, status: int = 1) -> None:
    assert result.returncode == status, (result.stdout, result.stderr)
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def error_of(source, **options) -> kgc.KgcError:
    with pytest.raises(kgc.KgcError) as raised:
        kgc.compile(source, **options)
    return raised.value


# --------------------------------------------------------------------------
# Input that cannot be read or parsed
# --------------------------------------------------------------------------


def test_unparseable_file_through_the_api(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text(UNPARSEABLE)
    error = error_of(str(path))
    assert str(error) == f"{path}:2:32: error: expected '>' in tensor type"
    [diagnostic] = error.diagnostics
    assert (diagnostic.filename, diagnostic.line) == (str(path), 2)


def test_unparseable_text_through_the_api():
    assert str(error_of(UNPARSEABLE)) == "<string>:2:32: error: expected '>' in tensor type"


def test_unparseable_file_through_the_command(kgc_cli, write, tmp_path):
    name = write("bad.mlir", UNPARSEABLE)
    result = kgc_cli("compile", name, "-o", "out")
    assert_fails(result, "bad.mlir:2:32: error: expected '>' in tensor type")
    assert re.match(r"bad\.mlir:2:32: error: ", result.stderr), result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_file_through_the_api(tmp_path):
    path = tmp_path / "missing.mlir"
    assert str(error_of(path)) == f"error: cannot read '{path}': No such file or directory"


def test_missing_file_through_the_command(kgc_cli):
    assert_fails(kgc_cli("compile", "missing.mlir"),
                 "kgc: error: cannot read 'missing.mlir': No such file or directory")


def test_tune_checks_its_graph_before_the_device(kgc_cli, write):
    # Named on any machine, with or without a GPU: the graph is read first.
    assert_fails(kgc_cli("tune", "missing.mlir"),
                 "kgc: error: cannot read 'missing.mlir': No such file or directory")
    assert_fails(kgc_cli("tune", write("bad.mlir", UNPARSEABLE)),
                 "bad.mlir:2:32: error: expected '>' in tensor type")
    assert_fails(kgc_cli("tune", "--function", "nope"),
                 "kgc: error: no function @nope (have: rmsnorm_matmul)")


def test_superoptimize_checks_its_graph_before_the_device(tmp_path):
    path = tmp_path / "missing.mlir"
    with pytest.raises(kgc.KgcError, match=f"cannot read '{re.escape(str(path))}': No such file"):
        kgc.superoptimize(str(path))


# --------------------------------------------------------------------------
# Bad options
# --------------------------------------------------------------------------


def test_unknown_stage_through_the_api():
    with ir.Context() as context:
        module = parse_text(GOOD, "good.mlir", context)
        with pytest.raises(kgc.KgcError) as raised:
            compile_module(module, emit="sass")
    assert str(raised.value) == ("error: unknown stage 'sass': choose one of kg, ttir, ttgir, llir, "
                                 "ptx, cubin")


def test_unknown_stage_through_the_command(kgc_cli):
    # A usage error, reported by argparse with the usage line (status 2).
    result = kgc_cli("compile", "--emit", "sass")
    assert_fails(result, "argument --emit: invalid choice: 'sass'", status=2)
    assert "'cubin'" in result.stderr


SUPPORTED = "supported: sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_101, sm_120"


@pytest.mark.parametrize("target, message", [
    ("sm_70", "target sm_70 is not supported: kgc needs sm_80 or newer"),
    ("sm_75", "target sm_75 is not supported: kgc needs sm_80 or newer"),
    (-90, "target sm_-90 is not supported: kgc needs sm_80 or newer"),
    ("volta", f"target 'volta' is not an SM version such as sm_90 ({SUPPORTED})"),
    ("sm_81", f"target sm_81 is not a GPU kgc compiles for ({SUPPORTED})"),
    (1000, f"target sm_1000 is not a GPU kgc compiles for ({SUPPORTED})"),
    ("sm_" + "9" * 5000, f"target '{'sm_' + '9' * 5000}' is not an SM version such as sm_90 "
                         f"({SUPPORTED})"),
    (80.0, "target 80.0 (float) is not an SM version: give a string such as 'sm_90' or an "
           "integer such as 90"),
    (True, "target True (bool) is not an SM version: give a string such as 'sm_90' or an "
           "integer such as 90"),
])
def test_bad_target_through_the_api(target, message):
    assert str(error_of(GOOD, target=target)) == f"error: {message}"


def test_no_target_means_this_machine_s_gpu_else_sm_90():
    from kgc.runtime import cuda_available

    graph = kgc.compile(GOOD, target=None)
    expected = 90
    if cuda_available():
        import torch

        major, minor = torch.cuda.get_device_capability()
        expected = major * 10 + minor
    assert graph.module.target == expected


@pytest.mark.parametrize("target, message", [
    ("sm_70", "kgc: error: target sm_70 is not supported: kgc needs sm_80 or newer"),
    ("volta", "kgc: error: target 'volta' is not an SM version such as sm_90"),
    ("sm_-90", "kgc: error: target 'sm_-90' is not an SM version such as sm_90"),
    ("91", "kgc: error: target sm_91 is not a GPU kgc compiles for"),
])
def test_bad_target_through_the_command(kgc_cli, target, message):
    assert_fails(kgc_cli("compile", "--target", target), message)


# --------------------------------------------------------------------------
# Graphs that cannot be compiled
# --------------------------------------------------------------------------


@pytest.mark.parametrize("text, op", [(EMPTY_TENSOR, "kg.exp"), (EMPTY_MATMUL, "kg.matmul")])
def test_empty_tensor_through_the_api(tmp_path, text, op):
    path = tmp_path / "empty.mlir"
    path.write_text(text)
    message = str(error_of(path))
    assert message.startswith(f"{path}:2:8: error: {op} cannot be made a kernel: "), message
    assert "is empty" in message


def test_empty_tensor_through_the_command(kgc_cli, write):
    name = write("empty.mlir", EMPTY_TENSOR)
    result = kgc_cli("compile", name, "--emit", "ttir")
    assert_fails(result, "empty.mlir:2:8: error: kg.exp cannot be made a kernel: ")
    assert "shape (0, 16) is empty" in result.stderr


def test_invalid_tile_set_by_hand_through_the_api(tmp_path):
    path = tmp_path / "bad_tile.mlir"
    path.write_text(BAD_TILE)
    message = str(error_of(path, pipeline=FROM_TILING))
    assert message == (f"{path}:2:8: error: pointwise kernel @relu_rows: block_n = 100 is not legal; "
                       "block_n must be a power of two, or at least 1000 to cover its axis")


def test_invalid_tile_set_by_hand_through_the_command(kgc_cli, write):
    name = write("bad_tile.mlir", BAD_TILE)
    assert_fails(kgc_cli("compile", name, "--pass-pipeline", FROM_TILING),
                 "bad_tile.mlir:2:8: error: pointwise kernel @relu_rows: block_n = 100 is not legal")


def test_valid_tile_set_by_hand_is_kept(tmp_path):
    path = tmp_path / "good_tile.mlir"
    path.write_text(BAD_TILE.replace("block_n = 100", "block_n = 128"))
    graph = kgc.compile(path, pipeline=FROM_TILING)
    assert "block_n = 128" in graph.module.stages["kg"]
    # 1000 columns in tiles of 128: 8 programs.
    assert graph.module.kernels["relu_rows"].grid == (8, 1, 1)


TMA_KERNEL = """\
func.func @gemm(%a: tensor<64x64xf16>, %b: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %c = kg.kernel @gemm_0_matmul(%a, %b) attributes {config = {tma = true}} : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%x: tensor<64x64xf16>, %y: tensor<64x64xf16>):
    %m = kg.matmul %x, %y : (tensor<64x64xf16>, tensor<64x64xf16>) -> tensor<64x64xf16>
    kg.yield %m : tensor<64x64xf16>
  }
  return %c : tensor<64x64xf16>
}
"""


def test_a_custom_pipeline_compiles_for_the_target_given(kgc_cli, write, tmp_path):
    # kg-legalize-dot in a pipeline of one's own checks the TMA kernel for
    # sm_80, as kgc's own pipeline would, before Triton ever sees it.
    name = write("tma.mlir", TMA_KERNEL)
    assert_fails(kgc_cli("compile", name, "--target", "sm_80", "--pass-pipeline", FROM_TILING,
                         "--emit", "ttir"),
                 "tma.mlir:2:8: error: kernel @gemm_0_matmul: tma = true needs sm_90 or newer")
    message = str(error_of(tmp_path / name, target="sm_80", pipeline=FROM_TILING))
    assert "tma = true needs sm_90 or newer" in message and "the target is sm_80" in message


def test_a_custom_pipeline_s_own_target_must_be_the_compile_s(kgc_cli, write, tmp_path):
    name = write("tma.mlir", TMA_KERNEL)
    pipeline = FROM_TILING.replace("kg-legalize-dot", "kg-legalize-dot{target=90}")
    assert_fails(kgc_cli("compile", name, "--target", "sm_80", "--pass-pipeline", pipeline),
                 "kgc: error: the pipeline's kg-legalize-dot{target=90} compiles for sm_90, but "
                 "the target is sm_80")
    # The same target twice is no conflict.
    graph = kgc.compile(tmp_path / name, target="sm_90", pipeline=pipeline)
    assert "tt.make_tensor_descriptor" in graph.module.stages["ttir"]


def example_pipeline(tile_options: str) -> str:
    """kgc's pipeline with these kg-tile options, for the compile's target."""
    from kgc.pipeline.stages import default_pipeline_text

    return (default_pipeline_text(90).replace("{target=90}", "")
            .replace("kg-tile,", f"kg-tile{{{tile_options}}},"))


def test_a_kernel_over_the_target_s_shared_memory_is_an_error_at_compile(kgc_cli, tmp_path):
    # 5 stages of 256x128 and 16x128 f16 tiles: more than an H100 block's
    # 227 KiB. ptxas takes it; the launch would fail.
    pipeline = example_pipeline("block-m=128 block-n=256 block-k=128 num-stages=5")
    for emit in ("cubin", "c"):
        result = kgc_cli("compile", "-o", str(tmp_path / emit), "--emit", emit,
                         "--pass-pipeline", pipeline)
        assert_fails(result, "kgc: error: kernel @rmsnorm_matmul_1_matmul_partials needs ")
        assert re.search(r"needs \d+ B of shared memory per program; sm_90 allows at most 232448 B "
                         r"per block: lower its tile sizes or num_stages \(block_k=128 block_m=16 "
                         r"block_n=256 num_stages=5\)", result.stderr), result.stderr
        assert not (tmp_path / emit / "rmsnorm_matmul.c").exists()


@pytest.mark.parametrize("target,fits", [("sm_80", True), ("sm_86", False), ("sm_89", False),
                                         ("sm_90", True), ("sm_120", False)])
def test_shared_memory_is_checked_against_each_target_s_limit(target, fits):
    # About 108 KiB per program: within sm_80's and sm_90's limits, over
    # the 99 KiB of sm_86, sm_89 and sm_120.
    pipeline = example_pipeline("block-n=128 block-k=128 num-stages=4")
    if fits:
        graph = kgc.compile(EXAMPLE, target=target, pipeline=pipeline)
        assert max(k.shared for k in graph.module.kernels.values()) > 101376
    else:
        message = str(error_of(EXAMPLE, target=target, pipeline=pipeline))
        assert (f"kernel @rmsnorm_matmul_1_matmul_partials needs " in message
                and f"{target} allows at most 101376 B per block" in message), message


def test_triton_failure_names_the_kernel_and_its_ttir(tmp_path):
    with pytest.raises(kgc.KgcError) as raised:
        compile_kernel(BROKEN_TTIR, KernelOptions((1, 1, 1), 4, 1), 90,
                       keep_failed_in=tmp_path / "kernels")
    message = str(raised.value)
    assert message.startswith("error: Triton failed to compile kernel @broken_kernel for sm_90:")
    assert "tt.no_such_op" in message
    paths = re.findall(r"'([^']+\.ttir)'", message)
    assert paths, message
    assert all(pathlib.Path(p) == tmp_path / "kernels" / "broken_kernel.ttir" for p in paths)
    assert pathlib.Path(paths[0]).read_text() == BROKEN_TTIR


# --------------------------------------------------------------------------
# What a good compile writes
# --------------------------------------------------------------------------


def test_built_in_example_compiles_to_a_norm_and_a_product_in_one_wave(kgc_cli, tmp_path):
    # Over 4096 k steps the RMSNorm is a kernel of its own (a fold into the
    # product loses there); with the table off (as the tests run) the
    # product's 96 tiles of 64 columns are one wave over an H100's SMs,
    # which streams the weights unsplit over 128-deep k steps.
    result = kgc_cli("compile")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = tmp_path / "kgc-out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"] == "sm_90"
    assert manifest["stages"] == ["kg", "ttir", "ttgir", "llir", "ptx", "cubin"]
    norm, product = manifest["kernels"]
    assert (norm["name"], product["name"]) == ("rmsnorm_matmul_0_reduction",
                                               "rmsnorm_matmul_1_matmul")
    [function] = manifest["functions"]
    assert function["name"] == "rmsnorm_matmul"
    assert [launch["kernel"] for launch in function["launches"]] == [norm["name"],
                                                                      product["name"]]
    assert [a["role"] for a in norm["arguments"]] == ["input"] * 2 + ["output"]
    assert [a["role"] for a in product["arguments"]] == ["input"] * 2 + ["output"]
    assert product["grid"] == [96, 1, 1]
    files = {p.name for p in (out / "kernels").iterdir()}
    for kernel in (norm, product):
        for stage in ("ttir", "ttgir", "llir", "ptx", "cubin"):
            assert f"{kernel['name']}.{stage}" in files
            assert (out / "kernels" / f"{kernel['name']}.{stage}").stat().st_size > 0
    assert (out / "rmsnorm_matmul.kg.mlir").is_file()
    assert (out / "rmsnorm_matmul.ttir.mlir").is_file()


def test_emit_ttir_stops_there(kgc_cli, tmp_path):
    result = kgc_cli("compile", "-o", "out", "--emit", "ttir")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["stages"] == ["kg", "ttir"]
    files = sorted(p.name for p in (tmp_path / "out" / "kernels").iterdir())
    assert files == sorted(f"{kernel['name']}.ttir" for kernel in manifest["kernels"])
    assert not list((tmp_path / "out").rglob("*.cubin"))


@pytest.mark.parametrize("option, value, message", [
    ("pipeline", True, "pipeline True (bool) is not a textual pass pipeline"),
    ("function", 3, "function 3 (int) is not a function name"),
    ("output_dir", b"out", "output_dir b'out' (bytes) is not a folder path"),
])
def test_bad_argument_types_through_the_api(option, value, message):
    assert str(error_of(GOOD, **{option: value})) == f"error: {message}"


def test_triton_abort_is_a_clean_error_and_the_next_compile_works(tmp_path):
    # Triton's backend aborts the process (LLVM ERROR) on an e4m3 conversion
    # below sm_89; kgc refuses such graphs before compiling, so the TTIR is
    # given to the Triton stage directly. The abort ends only the compiler
    # process of sm_80, not kgc.
    graph = kgc.Graph("narrow")
    x = graph.input("x", (64, 128), "f8e4m3fn")
    graph.output(graph.cast(x, "f16"))
    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        compiled = compile_module(graph.build(context), target=90, emit="ttir")
    (kernel,) = compiled.kernels.values()
    with pytest.raises(kgc.KgcError) as raised:
        compile_kernel(kernel.asm["ttir"], kernel.options, 80, keep_failed_in=tmp_path / "kernels")
    message = str(raised.value)
    assert message.startswith("error: Triton failed to compile kernel @narrow_0_pointwise for "
                              "sm_80:")
    assert "Conversion from/to f8e4m3nv is only supported on compute capability >= 89" in message
    good = kgc.compile(GOOD, target="sm_80")
    assert all(k.asm["cubin"] for k in good.module.kernels.values())


def test_version_names_kgc_and_what_it_is_built_on(kgc_cli):
    import importlib.metadata

    result = kgc_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"kgc {importlib.metadata.version('kgc')} (")
    assert f"triton {importlib.metadata.version('triton')}" in result.stdout


def test_a_graph_from_stdin_is_compiled_and_named_after_its_function(kgc_path, tmp_path):
    def run(*args, text):
        return subprocess.run([kgc_path, "compile", "-", *args], input=text, capture_output=True,
                              text=True, cwd=tmp_path, timeout=600)

    result = run("-o", "out", "--emit", "ttir", text=GOOD)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("kgc: compiled <stdin> for sm_90 down to ttir")
    assert (tmp_path / "out" / "f.kg.mlir").is_file()
    exported = run("-o", "c", "--emit", "c", text=GOOD)
    assert exported.returncode == 0, exported.stderr
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["f.c", "f.h"]
    assert_fails(run("-o", "bad", text=UNPARSEABLE), "<stdin>:2:")
