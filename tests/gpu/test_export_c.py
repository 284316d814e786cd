"""The C export on the GPU: a shared library built from `export_c` and
called through ctypes on torch tensors, and a C program that loads the
graph, runs it on inputs Python wrote and writes its outputs, both match
torch. Both link the real libcuda and nothing of Python or Triton."""

from __future__ import annotations

import ctypes
import pathlib
import shutil
import subprocess

import pytest

import kgc
from kgc.export import export_c
from tests.cases import ALL_CASES, make_inputs
from tests.comparison import assert_matches_torch
from tests.test_dynamic_extents import TWO_KERNELS

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

CC = shutil.which("gcc") or shutil.which("cc")
EXAMPLE = next(c for c in ALL_CASES if c.name == "rmsnorm_then_matmul-16x4096x6144")
ATTENTION = next(c for c in ALL_CASES if c.name == "attention-2x4x100x64")
CASES = [EXAMPLE, ATTENTION]
LIBCUDA_FOLDERS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64",
                   "/usr/local/nvidia/lib", "/usr/lib/wsl/lib", "/usr/local/cuda/lib64")


def cuda_include() -> pathlib.Path:
    import triton

    return pathlib.Path(triton.__file__).parent / "backends" / "nvidia" / "include"


def libcuda_flags() -> list[str]:
    """How to link libcuda here: plain -lcuda where the linker finds it,
    else the folder that holds libcuda.so (or only libcuda.so.1, the
    driver's); skips where there is none."""
    if CC is None:
        pytest.skip("needs a C compiler (gcc or cc)")
    probe = subprocess.run([CC, "-print-file-name=libcuda.so"], capture_output=True, text=True)
    if pathlib.Path(probe.stdout.strip()).is_absolute():
        return ["-lcuda"]
    for folder in LIBCUDA_FOLDERS:
        for name in ("libcuda.so", "libcuda.so.1"):
            if (pathlib.Path(folder) / name).exists():
                library = "-lcuda" if name == "libcuda.so" else f"-l:{name}"
                return [f"-L{folder}", f"-Wl,-rpath,{folder}", library]
    pytest.skip(f"no libcuda.so found (searched the linker's path and {', '.join(LIBCUDA_FOLDERS)})")


def build(sources: list[pathlib.Path], output: pathlib.Path, *flags: str) -> None:
    command = [CC, "-std=c11", "-O2", "-Wall", "-Werror", f"-I{cuda_include()}",
               f"-I{sources[0].parent}", *flags, *map(str, sources), "-o", str(output),
               *libcuda_flags()]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stderr}"


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def exported(request, tmp_path_factory):
    case = request.param
    graph = kgc.compile(case.graph("f16"))
    folder = tmp_path_factory.mktemp(case.name.replace("-", "_"))
    return case, graph, export_c(graph, folder, name="graph")


def check(case, got, inputs):
    assert_matches_torch(got, case.reference(*inputs), case.graph("f16").build(), inputs)


def test_a_shared_library_called_through_ctypes_matches_torch(exported, tmp_path):
    case, graph, export = exported
    library_path = tmp_path / "libgraph.so"
    build([export.source], library_path, "-shared", "-fPIC")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the primary context, current on this thread
    library = ctypes.CDLL(str(library_path))
    library.kgc_graph_load.restype = ctypes.c_int
    library.kgc_graph_unload.restype = ctypes.c_int
    run = getattr(library, export.functions[graph.name])
    run.restype = ctypes.c_int
    function = graph.function
    run.argtypes = [ctypes.c_void_p] + [ctypes.c_uint64] * (function.num_arguments
                                                             + len(function.results) + 1)
    assert library.kgc_graph_load() == 0
    try:
        for seed in (0, 1):
            inputs = make_inputs(case, "f16", "cuda", seed)
            result = torch.full(function.buffers[function.results[0]].shape, float("nan"),
                                dtype=torch.float16, device="cuda")
            workspace = torch.empty(max(export.workspace_bytes[graph.name], 1), dtype=torch.uint8,
                                    device="cuda")
            status = run(torch.cuda.current_stream().cuda_stream,
                         *[t.data_ptr() for t in inputs], result.data_ptr(),
                         workspace.data_ptr() if export.workspace_bytes[graph.name] else 0)
            assert status == 0, f"CUresult {status}"
            torch.cuda.synchronize()
            check(case, result, inputs)
            # The same cubins with the same parameters as the Python runtime's
            # launches (none of these kernels uses atomics): the same bits.
            torch.testing.assert_close(result, graph(*inputs), atol=0, rtol=0)
    finally:
        assert library.kgc_graph_unload() == 0




def test_a_dynamic_function_exported_as_c_runs_at_every_size(tmp_path):
    # One export, called at sizes that are not multiples of any tile: the
    # same bits as the Python runtime's launches of the same cubins.
    graph = kgc.compile(TWO_KERNELS, library_kernels=False)
    export = export_c(graph, tmp_path / "export", name="dyn")
    library_path = tmp_path / "libdyn.so"
    build([export.source], library_path, "-shared", "-fPIC")
    torch.cuda.init()
    torch.empty(1, device="cuda")
    library = ctypes.CDLL(str(library_path))
    run = getattr(library, export.functions[graph.name])
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.c_void_p, ctypes.c_int32] + [ctypes.c_uint64] * 5
    workspace_bytes = getattr(library, f"{export.functions[graph.name]}_workspace_bytes")
    workspace_bytes.restype, workspace_bytes.argtypes = ctypes.c_size_t, [ctypes.c_int32]
    assert library.kgc_dyn_load() == 0
    generator = torch.Generator(device="cuda").manual_seed(3)
    g = torch.randn(1000, device="cuda", dtype=torch.float16, generator=generator)
    w = torch.randn(1000, 96, device="cuda", dtype=torch.float16, generator=generator) / 32
    try:
        for size in (1, 3, 17, 1000, 4097):
            x = torch.randn(size, 1000, device="cuda", dtype=torch.float16, generator=generator)
            result = torch.full((size, 96), float("nan"), dtype=torch.float16, device="cuda")
            workspace = torch.empty(workspace_bytes(size), dtype=torch.uint8, device="cuda")
            status = run(torch.cuda.current_stream().cuda_stream, size, x.data_ptr(),
                         g.data_ptr(), w.data_ptr(), result.data_ptr(), workspace.data_ptr())
            assert status == 0, f"CUresult {status} at size {size}"
            torch.cuda.synchronize()
            expected = torch.nn.functional.rms_norm(x.float(), (1000,), g.float(), eps=1e-6) \
                @ w.float()
            torch.testing.assert_close(result.float(), expected, atol=2e-2, rtol=2e-2)
            torch.testing.assert_close(result, graph(x, g, w), atol=0, rtol=0)
    finally:
        assert library.kgc_dyn_unload() == 0


PROGRAM = r"""
/* Runs the exported graph on inputs from files: program in0 in1 ... out0 */
#include <stdio.h>
#include <stdlib.h>

#include "graph.h"

#define CHECK(call) do { CUresult status_ = (call); if (status_ != CUDA_SUCCESS) { \
    const char *text_ = "?"; cuGetErrorString(status_, &text_); \
    fprintf(stderr, "%s: %s\n", #call, text_); return 1; } } while (0)

static const size_t sizes[] = {@SIZES@};

static int read_file(const char *path, void *data, size_t size) {
  FILE *file = fopen(path, "rb");
  if (!file) return 0;
  size_t read = fread(data, 1, size, file);
  fclose(file);
  return read == size;
}

int main(int argc, char **argv) {
  enum { ARGUMENTS = @NUM_ARGUMENTS@, TENSORS = @NUM_TENSORS@ };
  if (argc != TENSORS + 1) { fprintf(stderr, "expected %d files\n", TENSORS); return 2; }
  CUdevice device;
  CUcontext context;
  CUdeviceptr pointers[TENSORS], workspace = 0;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&device, 0));
  CHECK(cuDevicePrimaryCtxRetain(&context, device));
  CHECK(cuCtxSetCurrent(context));
  CHECK(kgc_graph_load());
  for (int i = 0; i < TENSORS; ++i) {
    CHECK(cuMemAlloc(&pointers[i], sizes[i]));
    if (i < ARGUMENTS) {
      void *host = malloc(sizes[i]);
      if (!read_file(argv[i + 1], host, sizes[i])) { fprintf(stderr, "cannot read %s\n", argv[i + 1]); return 1; }
      CHECK(cuMemcpyHtoD(pointers[i], host, sizes[i]));
      free(host);
    }
  }
  if (@WORKSPACE_BYTES@) CHECK(cuMemAlloc(&workspace, @WORKSPACE_BYTES@));
  CHECK(@RUN@(NULL, @CALL_ARGUMENTS@, workspace));
  CHECK(cuStreamSynchronize(NULL));
  for (int i = ARGUMENTS; i < TENSORS; ++i) {
    void *host = malloc(sizes[i]);
    CHECK(cuMemcpyDtoH(host, pointers[i], sizes[i]));
    FILE *file = fopen(argv[i + 1], "wb");
    if (!file || fwrite(host, 1, sizes[i], file) != sizes[i]) { fprintf(stderr, "cannot write %s\n", argv[i + 1]); return 1; }
    fclose(file);
    free(host);
  }
  for (int i = 0; i < TENSORS; ++i) CHECK(cuMemFree(pointers[i]));
  if (workspace) CHECK(cuMemFree(workspace));
  CHECK(kgc_graph_unload());
  CHECK(cuDevicePrimaryCtxRelease(device));
  printf("ok\n");
  return 0;
}
"""


def test_a_c_program_runs_the_graph_on_inputs_from_python(exported, tmp_path):
    case, graph, export = exported
    function = graph.function
    tensors = list(range(function.num_arguments)) + function.results
    sizes = [torch.empty(function.buffers[b].shape, dtype=torch.float16).nbytes for b in tensors]
    macro = export.functions[graph.name].upper() + "_WORKSPACE_BYTES"
    source = (PROGRAM.replace("@SIZES@", ", ".join(map(str, sizes)))
              .replace("@NUM_ARGUMENTS@", str(function.num_arguments))
              .replace("@NUM_TENSORS@", str(len(tensors)))
              .replace("@WORKSPACE_BYTES@", macro)
              .replace("@RUN@", export.functions[graph.name])
              .replace("@CALL_ARGUMENTS@", ", ".join(f"pointers[{i}]" for i in range(len(tensors)))))
    program_source = export.source.parent / "run_graph.c"
    program_source.write_text(source)
    program = tmp_path / "run_graph"
    build([program_source, export.source], program)
    inputs = make_inputs(case, "f16", "cpu", seed=3)
    files = []
    for index, tensor in enumerate(inputs):
        path = tmp_path / f"input{index}.bin"
        tensor = tensor.contiguous()
        path.write_bytes(ctypes.string_at(tensor.data_ptr(), tensor.nbytes))
        files.append(path)
    output = tmp_path / "output0.bin"
    result = subprocess.run([str(program), *map(str, files), str(output)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    shape = function.buffers[function.results[0]].shape
    got = torch.frombuffer(bytearray(output.read_bytes()), dtype=torch.float16).reshape(shape)
    check(case, got, inputs)
