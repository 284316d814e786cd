"""The C export (kgc.export) without a GPU: what `kgc compile --emit c`
writes compiles with the system C compiler against the CUDA header Triton
ships, its header documents every argument, and its host code, run against
a recording stand-in for libcuda (tests/mock_libcuda.c), loads each cubin
and launches each kernel with the grid, block, shared memory and parameters
of the compile, placing intermediates in the caller's workspace."""

from __future__ import annotations

import ctypes
import pathlib
import re
import shutil
import subprocess

import pytest

import kgc
from kgc.diagnostics import KgcError
from kgc.export import c_identifier, export_c, export_module
from kgc.tools import cli
from tests.cases import ALL_CASES
from tests.test_dynamic_extents import TWO_KERNELS

HERE = pathlib.Path(__file__).parent
CC = shutil.which("gcc") or shutil.which("cc")
CXX = shutil.which("g++")
# Two kernels with intermediates between them: split-KV attention and the
# kernel that combines its splits.
ATTENTION = next(c for c in ALL_CASES if c.name == "attention_decode-1x8x1x1000x64")
CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_INITIALIZED = 0, 1, 3
CUDA_ERROR_NO_BINARY_FOR_GPU = 209

needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler (gcc or cc)")


def cuda_include() -> pathlib.Path:
    import triton

    return pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "include"


def compile_c(source: pathlib.Path, output: pathlib.Path, *flags: str, compiler=None) -> None:
    command = [compiler or CC, "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{cuda_include()}",
               f"-I{source.parent}", *flags, str(source), "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The built-in example exported by the CLI."""
    out = tmp_path_factory.mktemp("example")
    assert cli.run(["compile", "--emit", "c", "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def attention():
    return kgc.compile(ATTENTION.graph("f16"), target="sm_90")


@pytest.fixture(scope="module")
def attention_export(attention, tmp_path_factory):
    return export_c(attention, tmp_path_factory.mktemp("attention"))


# -- the files and their names --------------------------------------------------


def test_the_cli_writes_a_header_and_a_source_named_after_the_graph(example):
    assert sorted(p.name for p in example.iterdir()) == ["rmsnorm_matmul.c", "rmsnorm_matmul.h"]
    header = (example / "rmsnorm_matmul.h").read_text()
    for declaration in ("CUresult kgc_rmsnorm_matmul_load(void);",
                        "CUresult kgc_rmsnorm_matmul_unload(void);",
                        "size_t kgc_rmsnorm_matmul_rmsnorm_matmul_workspace_bytes(void);",
                        "#define KGC_RMSNORM_MATMUL_RMSNORM_MATMUL_WORKSPACE_BYTES",
                        "CUresult kgc_rmsnorm_matmul_rmsnorm_matmul(CUstream stream, "
                        "CUdeviceptr arg0, CUdeviceptr arg1, CUdeviceptr arg2, "
                        "CUdeviceptr result0, CUdeviceptr workspace);"):
        assert declaration in header


def test_the_header_documents_every_argument_and_result(example):
    header = (example / "rmsnorm_matmul.h").read_text()
    documented = re.findall(r"\*\s+(\w+)\s+(in|out)\s+(\w+)\[([\dx]+)\].*?(\d+) bytes, row-major, "
                            r"strides \[([\d, ]+)\]", header)
    assert documented == [
        ("arg0", "in", "f16", "16x4096", "131072", "4096, 1"),
        ("arg1", "in", "f16", "4096", "8192", "1"),
        ("arg2", "in", "f16", "4096x6144", "50331648", "6144, 1"),
        ("result0", "out", "f16", "16x6144", "196608", "6144, 1"),
    ]


def test_arguments_keep_the_names_a_graph_gives_them(attention, attention_export):
    header = attention_export.header.read_text()
    assert attention_export.functions == {attention.name: f"kgc_{attention.name}_{attention.name}"}
    assert (f"CUresult kgc_{attention.name}_{attention.name}(CUstream stream, CUdeviceptr q, "
            "CUdeviceptr k, CUdeviceptr v, CUdeviceptr result0, CUdeviceptr workspace);") in header
    for name, shape, size in (("q", "1x8x1x64", 1024), ("k", "1x2x1000x64", 256000),
                              ("v", "1x2x1000x64", 256000)):
        assert re.search(rf"\*\s+{name}\s+in\s+f16\[{shape}\] \(argument #\d\): {size} bytes",
                         header)


@needs_cc
def test_the_example_compiles_against_the_cuda_header(example, tmp_path):
    compile_c(example / "rmsnorm_matmul.c", tmp_path / "rmsnorm_matmul.o", "-c", "-pedantic")
    # A shared library links without libcuda (its symbols resolve at load).
    compile_c(example / "rmsnorm_matmul.c", tmp_path / "librmsnorm_matmul.so", "-shared", "-fPIC")


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_the_header_is_usable_from_cpp(example, tmp_path):
    user = tmp_path / "user.cpp"
    user.write_text('#include "rmsnorm_matmul.h"\n'
                    "int main() { return kgc_rmsnorm_matmul_load() == CUDA_SUCCESS ? 0 : 1; }\n")
    result = subprocess.run([CXX, "-std=c++17", "-Wall", "-Werror", f"-I{cuda_include()}",
                             f"-I{example}", "-fsyntax-only", str(user)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_cc
def test_a_graph_of_several_kernels_and_intermediates_compiles(attention, attention_export,
                                                               tmp_path):
    assert len(attention.function.launches) >= 2
    workspace = attention_export.workspace_bytes[attention.name]
    assert workspace > 0
    header = attention_export.header.read_text()
    macro = f"KGC_{attention.name.upper()}_{attention.name.upper()}_WORKSPACE_BYTES"
    assert f"#define {macro} ((size_t){workspace})" in header
    compile_c(attention_export.source, tmp_path / "attention.o", "-c", "-pedantic")


def test_a_module_is_exported_whole_and_names_become_identifiers(attention, tmp_path):
    exported = export_c(attention.module, tmp_path, name="my-model.v2")
    assert exported.graph == "my_model_v2"
    assert exported.header.name == "my_model_v2.h" and exported.source.name == "my_model_v2.c"
    assert "#ifndef KGC_MY_MODEL_V2_H" in exported.header.read_text()


@pytest.mark.parametrize("name,problem", [
    ("2graph", "cannot be part of a C identifier"),
    ("my graph", "cannot be part of a C identifier"),
    ("a$b", "cannot be part of a C identifier"),
    ("", "cannot be part of a C identifier"),
    ("int", "is a C keyword"),
])
def test_names_that_cannot_be_c_identifiers_are_refused(attention, tmp_path, name, problem):
    with pytest.raises(KgcError, match=re.escape(problem)):
        export_c(attention, tmp_path / "out", name=name)
    assert not (tmp_path / "out").exists()


def test_c_identifier_maps_dashes_and_dots():
    assert c_identifier("attention-block.fp16", "graph name") == "attention_block_fp16"


def test_the_cli_refuses_a_file_name_that_is_no_identifier_before_compiling(tmp_path, capsys):
    source = tmp_path / "1 layer.mlir"
    source.write_text((pathlib.Path(kgc.__file__).parent / "examples" /
                       "rmsnorm_matmul.mlir").read_text())
    assert cli.run(["compile", str(source), "--emit", "c", "-o", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert "the file's stem" in error and "'1 layer'" in error and "C identifier" in error
    assert "Traceback" not in error
    assert not any((tmp_path / "out").glob("*.c"))


def test_a_module_not_compiled_to_cubin_is_refused(tmp_path):
    from mlir import ir

    from kgc.parsing import parse_text
    from kgc.pipeline.compiler import compile_module

    text = (pathlib.Path(kgc.__file__).parent / "examples" / "rmsnorm_matmul.mlir").read_text()
    with ir.Context() as context:
        module = parse_text(text, "rmsnorm_matmul.mlir", context)
        compiled = compile_module(module, emit="ttir")
    with pytest.raises(KgcError, match="compiled down to ttir; exporting C needs every kernel's "
                                       "cubin"):
        export_module(compiled, tmp_path, "g")


def test_export_c_refuses_what_is_not_a_compiled_graph(tmp_path):
    with pytest.raises(KgcError, match="takes a compiled graph .* not str"):
        export_c("graph.mlir", tmp_path)


def test_a_function_named_like_the_exports_own_functions_is_refused(attention, tmp_path):
    function = attention.module.functions[attention.name]
    renamed = type(attention.module)(attention.module.target, {}, attention.module.kernels,
                                     {"load": _renamed(function, "load")}, "cubin")
    with pytest.raises(KgcError, match=r"kgc_g_load: rename it"):
        export_module(renamed, tmp_path, "g")


def test_functions_whose_c_names_meet_are_refused(attention, tmp_path):
    function = attention.module.functions[attention.name]
    module = type(attention.module)(attention.module.target, {}, attention.module.kernels,
                                    {"a-b": _renamed(function, "a-b"),
                                     "a.b": _renamed(function, "a.b")}, "cubin")
    with pytest.raises(KgcError, match=r"@a-b and @a.b get the same C name kgc_g_a_b"):
        export_module(module, tmp_path, "g")


def _renamed(function, name):
    import dataclasses

    return dataclasses.replace(function, name=name)


# -- the host code, run against a recording libcuda ----------------------------


class MockLaunch(ctypes.Structure):
    _fields_ = [("function", ctypes.c_uint64), ("grid", ctypes.c_uint64 * 3),
                ("block", ctypes.c_uint64 * 3), ("shared", ctypes.c_uint64),
                ("stream", ctypes.c_uint64), ("num_params", ctypes.c_uint64),
                ("params", ctypes.c_uint64 * 32)]


@pytest.fixture(scope="module")
def mock_cuda(tmp_path_factory):
    if CC is None:
        pytest.skip("needs a C compiler (gcc or cc)")
    folder = tmp_path_factory.mktemp("mock")
    library = folder / "libmock_cuda.so"
    compile_c(HERE / "mock_libcuda.c", library, "-shared", "-fPIC")
    mock = ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    mock.mock_launch.restype = ctypes.POINTER(MockLaunch)
    mock.mock_copy.restype = ctypes.POINTER(ctypes.c_uint64 * 4)
    mock.mock_entry.restype = ctypes.c_char_p
    mock.mock_image.restype = ctypes.POINTER(ctypes.c_ubyte)
    return mock


def load_export(exported, folder: pathlib.Path):
    """The exported graph as a shared library whose libcuda symbols resolve
    to the mock (loaded before it, globally)."""
    library = folder / f"lib{exported.graph}.so"
    compile_c(exported.source, library, "-shared", "-fPIC")
    return ctypes.CDLL(str(library))


def call(library, symbol: str, stream: int, pointers: list[int], workspace: int) -> int:
    function = getattr(library, symbol)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p] + [ctypes.c_uint64] * (len(pointers) + 1)
    return function(stream, *pointers, workspace)


def check_launches(mock, compiled_module, function, pointers: dict[int, int], workspace: int,
                   workspace_bytes: int, stream: int, scalars: int = 0):
    """Every launch the mock saw is the function's next kg.launch, as Triton
    would launch it, with each tensor at a consistent address (`scalars`:
    the i32 parameters of a kernel over a dynamic extent, after its
    tensors)."""
    from kgc.export.c_source import tensor_bytes

    kernels = compiled_module.kernels
    assert mock.mock_num_launches() == len(function.launches)
    placed = dict(pointers)
    for number, launch in enumerate(function.launches):
        record = mock.mock_launch(number).contents
        artifact = kernels[launch.kernel].artifact
        module_index = record.function - 0x2000
        assert mock.mock_entry(module_index).decode() == artifact.entry
        image = bytes(mock.mock_image(module_index)[:len(artifact.cubin)])
        assert image == artifact.cubin
        kernel = kernels[launch.kernel]
        assert tuple(record.grid) == kernel.grid_at(function.extent)
        assert tuple(record.block) == (artifact.metadata["num_warps"] * 32, 1, 1)
        assert record.shared == artifact.metadata["shared"]
        assert record.stream == stream
        params = list(record.params[:record.num_params])
        operands = launch.inputs + launch.outputs
        # the tensors in signature order, then global and profile scratch
        sized = scalars if kernel.dynamic_grid is not None else 0
        assert len(params) == len(operands) + sized + 2 == len(artifact.signature) + 2
        assert params[-1] == 0
        if not artifact.metadata.get("global_scratch_size"):
            assert params[-2] == 0
        for buffer, address in zip(operands, params):
            if buffer in placed:
                assert address == placed[buffer], f"launch {number}: buffer {buffer} moved"
            else:  # an intermediate: inside the workspace, aligned, overlapping nothing
                spec = function.buffers[buffer]
                size = tensor_bytes(spec.shape, spec.dtype)
                assert address % 256 == 0
                assert workspace <= address and address + size <= workspace + workspace_bytes
                for other, start in placed.items():
                    if other >= function.num_arguments and other not in function.results:
                        other_spec = function.buffers[other]
                        end = start + tensor_bytes(other_spec.shape, other_spec.dtype)
                        assert address + size <= start or end <= address
                placed[buffer] = address


def test_the_example_launches_as_triton_would(mock_cuda, example, tmp_path):
    from kgc.pipeline.compiler import compile_module  # noqa: F401  (the same compile as the CLI)

    compiled = kgc.compile(str(pathlib.Path(kgc.__file__).parent / "examples" /
                               "rmsnorm_matmul.mlir"), target="sm_90")
    exported = export_c(compiled, tmp_path / "export", name="rmsnorm_matmul")
    # The CLI and the API write the same code for the same graph.
    assert exported.source.read_text() == (example / "rmsnorm_matmul.c").read_text()
    library = load_export(exported, tmp_path)
    mock_cuda.mock_reset()
    symbol = exported.functions[compiled.name]
    pointers = [0x7000_0000, 0x7100_0000, 0x7200_0000, 0x7300_0000]
    stream = 0x5000
    assert call(library, symbol, stream, pointers, 0) == CUDA_ERROR_NOT_INITIALIZED
    assert mock_cuda.mock_num_launches() == 0
    assert library.kgc_rmsnorm_matmul_load() == CUDA_SUCCESS
    assert library.kgc_rmsnorm_matmul_load() == CUDA_SUCCESS  # once only
    assert mock_cuda.mock_loads() == len({k.artifact.hash for k in compiled.module.kernels.values()})
    for launch in range(len(compiled.function.launches)):
        mock_cuda.mock_set_param_count(launch, len(launch_operands(compiled, launch)) + 2)
    # The example's k loop is split: its partial sums live in the workspace.
    workspace, size = 0x9000_0000, exported.workspace_bytes[compiled.name]
    assert size > 0
    assert call(library, symbol, stream, pointers, workspace) == CUDA_SUCCESS
    check_launches(mock_cuda, compiled.module, compiled.function,
                   {i: p for i, p in enumerate(pointers[:3])}
                   | {compiled.function.results[0]: pointers[3]}, workspace, size, stream)
    assert library.kgc_rmsnorm_matmul_unload() == CUDA_SUCCESS
    assert mock_cuda.mock_unloads() == mock_cuda.mock_loads()
    assert call(library, symbol, stream, pointers, 0) == CUDA_ERROR_NOT_INITIALIZED




def test_a_dynamic_function_launches_over_the_size_it_is_given(mock_cuda, tmp_path):
    # Two kernels over the rows (the norm, then the product reading its
    # rows from the workspace), each on ceil(size / tile) * programs
    # programs with the size as its last i32, as the Python runtime
    # launches them at that size.
    compiled = kgc.compile(TWO_KERNELS, target=90, library_kernels=False)
    exported = export_c(compiled, tmp_path / "export", name="dyn")
    library = load_export(exported, tmp_path)
    symbol = exported.functions[compiled.name]
    workspace_bytes = getattr(library, f"{symbol}_workspace_bytes")
    workspace_bytes.restype, workspace_bytes.argtypes = ctypes.c_size_t, [ctypes.c_int32]
    function = getattr(library, symbol)
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p, ctypes.c_int32] + [ctypes.c_uint64] * 5
    pointers = [0x7000_0000, 0x7100_0000, 0x7200_0000, 0x7300_0000]
    stream, workspace = 0x5000, 0x9000_0000
    mock_cuda.mock_reset()
    assert library.kgc_dyn_load() == CUDA_SUCCESS
    kernels = compiled.module.kernels
    for size in (1, 3, 17, 1000, 4097):
        mock_cuda.mock_reset()
        for number, launch in enumerate(compiled.function.launches):
            operands = len(launch_operands(compiled, number))
            dynamic = kernels[launch.kernel].dynamic_grid is not None
            mock_cuda.mock_set_param_count(number, operands + dynamic + 2)
            if dynamic:
                mock_cuda.mock_set_param_size(number, operands, 4)
        sized = compiled.function.at(size)
        needed = workspace_bytes(size)
        # The normalised rows, f16, at this size.
        assert needed == size * 1000 * 2
        assert function(stream, size, *pointers[:3], pointers[3], workspace) == CUDA_SUCCESS
        assert mock_cuda.mock_num_launches() == len(sized.launches) == 2
        for number, launch in enumerate(sized.launches):
            record = mock_cuda.mock_launch(number).contents
            kernel = kernels[launch.kernel]
            assert tuple(record.grid) == kernel.grid_at(size)
            params = list(record.params[:record.num_params])
            operands = launch_operands(compiled, number)
            assert params[len(operands)] == size
            assert params[-2:] == [0, 0]
        check_launches(mock_cuda, compiled.module, sized,
                       {0: pointers[0], 1: pointers[1], 2: pointers[2],
                        sized.results[0]: pointers[3]}, workspace, needed, stream,
                       scalars=1)
    mock_cuda.mock_reset()
    assert function(stream, 0, *pointers, workspace) == CUDA_ERROR_INVALID_VALUE
    assert mock_cuda.mock_num_launches() == 0
    assert workspace_bytes(0) == 0


def launch_operands(compiled, number):
    launch = compiled.function.launches[number]
    return launch.inputs + launch.outputs


def test_intermediates_live_in_the_workspace(mock_cuda, attention, attention_export, tmp_path):
    library = load_export(attention_export, tmp_path)
    mock_cuda.mock_reset()
    graph = attention_export.graph
    getattr(library, f"kgc_{graph}_load")()
    for launch in range(len(attention.function.launches)):
        mock_cuda.mock_set_param_count(launch, len(launch_operands(attention, launch)) + 2)
    symbol = attention_export.functions[attention.name]
    pointers = [0x7000_0000, 0x7100_0000, 0x7200_0000, 0x7300_0000]
    workspace = 0x9000_0000
    size = attention_export.workspace_bytes[attention.name]
    getattr(library, f"{symbol}_workspace_bytes").restype = ctypes.c_size_t
    assert getattr(library, f"{symbol}_workspace_bytes")() == size
    assert call(library, symbol, 0x5000, pointers, workspace) == CUDA_SUCCESS
    check_launches(mock_cuda, attention.module, attention.function,
                   {i: p for i, p in enumerate(pointers[:3])}
                   | {attention.function.results[0]: pointers[3]}, workspace, size, 0x5000)
    getattr(library, f"kgc_{graph}_unload")()


@pytest.mark.parametrize("bad", ["null argument", "misaligned argument", "null workspace",
                                 "misaligned workspace"])
def test_bad_pointers_are_refused_before_any_launch(mock_cuda, attention, attention_export,
                                                    tmp_path, bad):
    library = load_export(attention_export, tmp_path)
    mock_cuda.mock_reset()
    graph = attention_export.graph
    getattr(library, f"kgc_{graph}_load")()
    pointers = [0x7000_0000, 0x7100_0000, 0x7200_0000, 0x7300_0000]
    workspace = 0x9000_0000
    if bad == "null argument":
        pointers[1] = 0
    elif bad == "misaligned argument":
        pointers[3] += 8
    elif bad == "null workspace":
        workspace = 0
    else:
        workspace += 128
    symbol = attention_export.functions[attention.name]
    assert call(library, symbol, 0, pointers, workspace) == CUDA_ERROR_INVALID_VALUE
    assert mock_cuda.mock_num_launches() == 0
    getattr(library, f"kgc_{graph}_unload")()


def test_a_failed_load_returns_the_drivers_error_and_frees_what_it_loaded(mock_cuda, attention,
                                                                         attention_export,
                                                                         tmp_path):
    library = load_export(attention_export, tmp_path)
    modules = len({k.artifact.hash for k in attention.module.kernels.values()})
    assert modules >= 2
    mock_cuda.mock_reset()
    mock_cuda.mock_fail_load_at(modules - 1)
    graph = attention_export.graph
    assert getattr(library, f"kgc_{graph}_load")() == CUDA_ERROR_NO_BINARY_FOR_GPU
    assert mock_cuda.mock_unloads() == modules - 1
    symbol = attention_export.functions[attention.name]
    assert call(library, symbol, 0, [0x7000_0000] * 4, 0x9000_0000) == \
        CUDA_ERROR_NOT_INITIALIZED
    mock_cuda.mock_reset()
    assert getattr(library, f"kgc_{graph}_load")() == CUDA_SUCCESS
    getattr(library, f"kgc_{graph}_unload")()


def test_kernels_above_48k_of_shared_memory_opt_in_as_triton_does(mock_cuda, attention,
                                                                  tmp_path):
    import dataclasses

    kernels = {}
    for name, kernel in attention.module.kernels.items():
        artifact = kernel.artifact
        big = dataclasses.replace(artifact, metadata=dict(artifact.metadata, shared=100_000))
        kernels[name] = dataclasses.replace(kernel, artifact=big)
    module = dataclasses.replace(attention.module, kernels=kernels)
    exported = export_module(module, tmp_path, "big_shared")
    library = load_export(exported, tmp_path)
    mock_cuda.mock_reset()
    mock_cuda.mock_set_shared(232448, 1024)
    assert library.kgc_big_shared_load() == CUDA_SUCCESS
    for index in range(mock_cuda.mock_loads()):
        assert mock_cuda.mock_prefer_shared(index) == 1
        assert mock_cuda.mock_max_dynamic_shared(index) == 232448 - 1024
    library.kgc_big_shared_unload()


def test_results_that_are_arguments_or_repeat_are_copied(mock_cuda, attention, tmp_path):
    import dataclasses

    from kgc.export.c_source import tensor_bytes

    function = attention.module.functions[attention.name]
    result = function.results[0]
    # returns (q, the result, the result again)
    twisted = dataclasses.replace(function, results=[0, result, result])
    module = dataclasses.replace(attention.module, functions={function.name: twisted})
    exported = export_module(module, tmp_path, "copies")
    library = load_export(exported, tmp_path)
    mock_cuda.mock_reset()
    library.kgc_copies_load()
    for launch in range(len(function.launches)):
        mock_cuda.mock_set_param_count(launch, len(launch_operands(attention, launch)) + 2)
    pointers = [0x7000_0000, 0x7100_0000, 0x7200_0000, 0x7300_0000, 0x7400_0000, 0x7500_0000]
    symbol = exported.functions[function.name]
    assert call(library, symbol, 0x5000, pointers, 0x9000_0000) == CUDA_SUCCESS
    spec = function.buffers[result]
    q_bytes = tensor_bytes(function.buffers[0].shape, function.buffers[0].dtype)
    copies = [tuple(mock_cuda.mock_copy(i).contents) for i in range(mock_cuda.mock_num_copies())]
    assert copies == [(0x7300_0000, 0x7000_0000, q_bytes, 0x5000),
                      (0x7500_0000, 0x7400_0000, tensor_bytes(spec.shape, spec.dtype), 0x5000)]
    # the kernels write the result into its first result pointer
    last = mock_cuda.mock_launch(len(function.launches) - 1).contents
    assert 0x7400_0000 in list(last.params[:last.num_params])
    library.kgc_copies_unload()


@needs_cc
def test_the_readme_program_builds_against_the_example(example, tmp_path):
    readme = (HERE.parent / "README.md").read_text()
    section = readme[readme.index("## Exporting C"):]
    program = re.search(r"```c\n(.*?)```", section, re.S).group(1)
    (tmp_path / "main.c").write_text(program)
    compile_c(tmp_path / "main.c", tmp_path / "main.o", "-c", f"-I{example}")


TWO_FUNCTIONS = """
func.func @exp_add(%a: tensor<17x1000xf32>, %bias: tensor<1000xf32>) -> tensor<17x1000xf32> {
  %e = kg.exp %a : tensor<17x1000xf32>
  %s = kg.add %e, %bias : (tensor<17x1000xf32>, tensor<1000xf32>) -> tensor<17x1000xf32>
  return %s : tensor<17x1000xf32>
}
func.func @twice(%x: tensor<64xf16>) -> (tensor<64xf16>, tensor<64xf16>) {
  %e = kg.exp %x : tensor<64xf16>
  return %e, %x : tensor<64xf16>, tensor<64xf16>
}
"""


@needs_cc
def test_every_function_of_a_file_is_exported(tmp_path, capsys):
    source = tmp_path / "two-functions.mlir"
    source.write_text(TWO_FUNCTIONS)
    out = tmp_path / "out"
    assert cli.run(["compile", str(source), "--emit", "c", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "kgc_two_functions_exp_add()" in printed and "kgc_two_functions_twice()" in printed
    header = (out / "two_functions.h").read_text()
    assert ("CUresult kgc_two_functions_exp_add(CUstream stream, CUdeviceptr arg0, "
            "CUdeviceptr arg1, CUdeviceptr result0, CUdeviceptr workspace);") in header
    assert ("CUresult kgc_two_functions_twice(CUstream stream, CUdeviceptr arg0, "
            "CUdeviceptr result0, CUdeviceptr result1, CUdeviceptr workspace);") in header
    # @twice returns its argument: copied into result1 after the kernels
    source_text = (out / "two_functions.c").read_text()
    assert "cuMemcpyDtoDAsync(result1, arg0, 128, stream)" in source_text
    compile_c(out / "two_functions.c", tmp_path / "two_functions.o", "-c", "-pedantic")


def _with_metadata(module, **changes):
    """`module` with every kernel's Triton metadata changed as given."""
    import dataclasses

    kernels = {}
    for name, kernel in module.kernels.items():
        artifact = kernel.artifact
        changed = dataclasses.replace(artifact, metadata=dict(artifact.metadata, **changes))
        kernels[name] = dataclasses.replace(kernel, artifact=changed)
    return dataclasses.replace(module, kernels=kernels)


def test_global_scratch_is_carved_from_the_workspace(mock_cuda, attention, tmp_path):
    module = _with_metadata(attention.module, global_scratch_size=64, global_scratch_align=128)
    exported = export_module(module, tmp_path, "scratch")
    plain = export_module(attention.module, tmp_path / "plain", "plain")
    grids = [k.artifact.options.grid for k in attention.module.kernels.values()]
    largest = max(g[0] * g[1] * g[2] for g in grids) * 64
    function = attention.name
    assert exported.workspace_bytes[function] >= plain.workspace_bytes[function] + largest
    library = load_export(exported, tmp_path)
    mock_cuda.mock_reset()
    library.kgc_scratch_load()
    for launch in range(len(attention.function.launches)):
        mock_cuda.mock_set_param_count(launch, len(launch_operands(attention, launch)) + 2)
    workspace, size = 0x9000_0000, exported.workspace_bytes[function]
    assert call(library, exported.functions[function], 0, [0x7000_0000, 0x7100_0000, 0x7200_0000,
                                                           0x7300_0000], workspace) == 0
    intermediates = set()
    for number in range(mock_cuda.mock_num_launches()):
        record = mock_cuda.mock_launch(number).contents
        params = list(record.params[:record.num_params])
        scratch, profile = params[-2], params[-1]
        grid = record.grid[0] * record.grid[1] * record.grid[2]
        assert profile == 0
        assert scratch % 128 == 0 and workspace <= scratch
        assert scratch + grid * 64 <= workspace + size
        intermediates |= {p for p in params[:-2] if workspace <= p < workspace + size}
    # the scratch lies after every intermediate
    assert all(p < scratch for p in intermediates)
    library.kgc_scratch_unload()


@pytest.mark.parametrize("changes,reason", [
    ({"num_ctas": 2}, "it runs in clusters of 2 CTAs"),
    ({"launch_cooperative_grid": True}, "it needs a cooperative grid"),
    ({"launch_pdl": True}, "it uses programmatic dependent launch"),
    ({"tensordesc_meta": [{"swizzle": 128}]}, "it takes tensor descriptors"),
    ({"profile_scratch_size": 16}, "it was compiled for profiling"),
])
def test_kernels_that_need_another_launch_are_refused(attention, tmp_path, changes, reason):
    module = _with_metadata(attention.module, **changes)
    with pytest.raises(KgcError, match=r"kernel @\w+ cannot be exported as C: " + re.escape(reason)):
        export_module(module, tmp_path, "g")


def test_a_kernel_with_scalar_parameters_is_refused(attention, tmp_path):
    import dataclasses

    name, kernel = next(iter(attention.module.kernels.items()))
    artifact = dataclasses.replace(kernel.artifact, signature=kernel.artifact.signature + ("i32",))
    kernels = dict(attention.module.kernels, **{name: dataclasses.replace(kernel,
                                                                          artifact=artifact)})
    module = dataclasses.replace(attention.module, kernels=kernels)
    with pytest.raises(KgcError, match=r"non-tensor parameters \(i32\)"):
        export_module(module, tmp_path, "g")


def test_a_graph_loaded_from_its_artifacts_exports_the_same_code(attention, attention_export,
                                                                 tmp_path):
    import kgc.runtime

    attention.module.write(tmp_path / "compiled", "attention")
    loaded = kgc.runtime.load(tmp_path / "compiled")
    exported = export_c(loaded, tmp_path / "export")
    assert exported.source.read_text() == attention_export.source.read_text()
    assert exported.header.read_text() == attention_export.header.read_text()


def test_a_kernel_over_the_target_s_shared_memory_is_refused_at_export(attention, tmp_path):
    # A module loaded from another compile's files is checked again: its
    # C code would fail only at launch.
    import copy
    import dataclasses

    module = copy.copy(attention.module)
    module.kernels = dict(module.kernels)
    name, kernel = next(iter(module.kernels.items()))
    artifact = kernel.artifact
    module.kernels[name] = dataclasses.replace(kernel, artifact=dataclasses.replace(
        artifact, metadata=dict(artifact.metadata, shared=232448 + 16)))
    with pytest.raises(KgcError, match=rf"kernel @{name} needs 232464 B of shared memory per "
                                       r"program; sm_90 allows at most 232448 B per block: lower "
                                       r"its tile sizes or num_stages \(block_\w+=\d+"):
        export_c(module, tmp_path / "out", name="over")
    assert not (tmp_path / "out" / "over.c").exists()
