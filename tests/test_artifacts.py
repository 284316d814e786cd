"""Compiled kernels as artifacts, without a GPU: compiled in worker
processes, written, read back by a process that never compiles; identity by
content; integrity checks; no files left behind and fd 2 left alone while
compiling; the runtime's argument checks that need no GPU."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading

import pytest

import kgc
from kgc.pipeline.artifact import Artifact, KernelOptions, content_hash
from kgc.pipeline.compiler import load_module
from kgc.pipeline.triton_stage import compile_kernel, compile_kernels, worker_pool
from tests.cases import ALL_CASES
from tests.tools import console_script

# Two kernels with intermediates between them: split-KV attention and the
# kernel that combines its splits.
ATTENTION = next(c for c in ALL_CASES if c.name == "attention_decode-1x8x1x1000x64")
SOFTMAX = next(c for c in ALL_CASES if c.name == "softmax-17x1000")

# Run in a fresh interpreter: anything that would compile fails loudly.
NO_COMPILING = """
import triton
import triton.compiler.compiler

def refuse(*args, **kwargs):
    raise AssertionError("triton.compile was called")

triton.compile = refuse
triton.compiler.compiler.compile = refuse
"""

INSPECT = NO_COMPILING + """
import hashlib, json, sys
import kgc.runtime
from kgc.pipeline.compiler import load_module

module = load_module(sys.argv[1])
graph = kgc.runtime.load(sys.argv[1])
print(json.dumps({
    "function": graph.name,
    "labels": [graph.argument_label(i) for i in range(graph.function.num_arguments)],
    "launches": [launch.kernel for launch in graph.function.launches],
    "kernels": {
        name: {"artifact": k.artifact.name, "hash": k.artifact.hash,
               "cubin": hashlib.sha256(k.artifact.cubin).hexdigest(),
               "signature": list(k.artifact.signature), "grid": list(k.grid),
               "shared": k.artifact.shared, "registers": k.artifact.resources["registers"]}
        for name, k in module.kernels.items()},
}))
"""


def run_python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=600)


def two_graphs_with_one_kernel() -> str:
    """Two functions whose kernels differ only in their names."""
    function = """
func.func @{name}(%x: tensor<17x1000xf32>) -> tensor<17x1000xf32> {{
  %y = kg.exp %x : tensor<17x1000xf32>
  return %y : tensor<17x1000xf32>
}}
"""
    return function.format(name="first") + function.format(name="second")


# --------------------------------------------------------------------------
# Compiled in worker processes, loaded by a process that never compiles
# --------------------------------------------------------------------------


def test_pool_compiled_kernels_load_in_a_fresh_process_without_compiling(tmp_path, monkeypatch):
    # Both compiles on a Triton cache of their own: the cubins are compared
    # byte for byte, and the user's cache may hold one that another run
    # compiled differently (another ptxas, another line-info setting).
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    graph_file = tmp_path / "attention.mlir"
    graph_file.write_text(ATTENTION.graph("f16").to_mlir())
    result = subprocess.run([console_script("kgc"), "compile", str(graph_file), "-o",
                             str(tmp_path / "out"), "-j", "2"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    # The same graph compiled one kernel after another, in this process.
    sequential = kgc.compile(ATTENTION.graph("f16"), jobs=1).module

    inspected = run_python(INSPECT, str(tmp_path / "out"))
    assert inspected.returncode == 0, inspected.stderr
    loaded = json.loads(inspected.stdout)
    assert loaded["function"] == "attention_decode_1x8x1x1000x64"
    assert len(loaded["kernels"]) == 2
    assert loaded["launches"] == [launch.kernel for launch in
                                  sequential.functions["attention_decode_1x8x1x1000x64"].launches]
    for name, kernel in sequential.kernels.items():
        got = loaded["kernels"][name]
        artifact = kernel.artifact
        assert got["artifact"] == name == artifact.name
        assert got["hash"] == artifact.hash
        assert got["cubin"] == hashlib.sha256(artifact.cubin).hexdigest()
        assert got["cubin"] == hashlib.sha256(
            (tmp_path / "out" / "kernels" / f"{name}.cubin").read_bytes()).hexdigest()
        # The attention kernel reads f16 and writes f32 partial results,
        # which the combining kernel reads.
        assert got["signature"] == [f"*{a.dtype}" for a in kernel.arguments]
        assert got["grid"] == list(kernel.grid) == list(artifact.options.grid)
        assert got["shared"] == artifact.shared
        assert artifact.shared > 0 or not name.endswith("_attention")
        assert got["registers"] > 0
    # The kgc-opt text form names no arguments.
    assert loaded["labels"] == ["#0", "#1", "#2"]


def test_triton_s_dumps_in_workers_reach_stderr(tmp_path):
    graph_file = tmp_path / "attention.mlir"
    graph_file.write_text(ATTENTION.graph("f16").to_mlir())
    kernel = "attention_decode_1x8x1x1000x64_0_attention_combine"
    result = subprocess.run([console_script("kgc"), "compile", str(graph_file), "-o",
                             str(tmp_path / "out"), "-j", "2"], capture_output=True, text=True,
                            timeout=600, env=dict(os.environ, MLIR_ENABLE_DUMP=kernel,
                                                  TRITON_ALWAYS_COMPILE="1"))
    assert result.returncode == 0, result.stderr
    assert (f"IR Dump Before ConvertTritonToTritonGPU (convert-triton-to-tritongpu) "
            f"('builtin.module' operation: @{kernel})") in result.stderr


def test_names_of_graph_inputs_survive_the_round_trip(tmp_path):
    kgc.compile(SOFTMAX.graph("f32"), output_dir=tmp_path)
    graph = kgc.runtime.load(tmp_path)
    assert graph.argument_label(0) == "#0 (x)"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["functions"][0]["arguments"][0]["name"] == "x"


def test_pool_and_sequential_compiles_give_the_same_artifacts():
    module = kgc.compile(ATTENTION.graph("f32")).module
    requests = [(k.asm["ttir"], k.options) for k in module.kernels.values()]
    pooled = compile_kernels(requests, 90, jobs=2)
    assert [a.hash for a in pooled] == [k.artifact.hash for k in module.kernels.values()]
    assert [a.asm for a in pooled] == [k.artifact.asm for k in module.kernels.values()]


def test_started_workers_are_running_before_any_kernel_and_compile_the_first_ones():
    # A torch.compile starts them as Dynamo hands over its first graph, so
    # that their start (loading Triton) overlaps kgc's own work on it.
    from kgc.pipeline.artifact import Artifact
    from kgc.pipeline.compile_worker import CompilePool

    (kernel,) = kgc.compile(SOFTMAX.graph("f32")).module.kernels.values()
    with CompilePool(2) as pool:
        pool.start()
        started = list(pool._all)
        assert len(started) == 2 and all(w.process.poll() is None for w in started)
        pool.start()  # already started: no more
        results = pool.map([(kernel.asm["ttir"], kernel.options, 90)] * 3)
        assert all(isinstance(r.outcome, Artifact) for r in results)
        assert results[0].outcome.hash == kernel.artifact.hash
        assert pool._all == started


def test_a_kernel_that_fails_in_a_worker_is_reported_with_triton_s_lines(tmp_path):
    from tests.test_compile_errors import BROKEN_TTIR

    (kernel,) = kgc.compile(SOFTMAX.graph("f32")).module.kernels.values()
    with pytest.raises(kgc.KgcError) as raised:
        compile_kernels([(kernel.asm["ttir"], kernel.options),
                         (BROKEN_TTIR, KernelOptions((1, 1, 1)))], 90, jobs=2,
                        keep_failed_in=tmp_path)
    message = str(raised.value)
    kept = tmp_path / "broken_kernel.ttir"
    assert message.startswith("error: Triton failed to compile kernel @broken_kernel for sm_90:")
    assert f'loc("{kept}":3:10): error: custom op \'tt.no_such_op\' is unknown' in message
    assert kept.read_text() == BROKEN_TTIR


def test_a_kernel_that_outlives_its_timeout_stops_its_worker(tmp_path):
    module = kgc.compile(ATTENTION.graph("f32")).module
    requests = [(k.asm["ttir"], k.options) for k in module.kernels.values()]
    # No compile, not even one served by Triton's cache in a running worker,
    # takes as little as this.
    with pytest.raises(kgc.KgcError, match="Triton did not finish within 0.0001 s; the worker "
                                           "was stopped"):
        compile_kernels(requests, 90, jobs=2, timeout=0.0001, keep_failed_in=tmp_path)


def test_workers_do_not_run_the_main_script_again(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import kgc\n"
        "from tests.cases import ALL_CASES\n"
        "print('script body ran', flush=True)\n"
        "case = next(c for c in ALL_CASES if c.name == 'attention_decode-1x8x1x1000x64')\n"
        "graph = kgc.compile(case.graph('f32'), jobs=2)\n"
        "print(len(graph.module.kernels), 'kernels')\n")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=600, cwd=pathlib.Path(__file__).parent.parent,
                            env=dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parent.parent)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["script body ran", "2 kernels"]


def test_artifact_survives_save_and_load(tmp_path):
    (kernel,) = kgc.compile(SOFTMAX.graph("f16")).module.kernels.values()
    record = kernel.artifact.save(tmp_path)
    assert record == tmp_path / f"{kernel.name}.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{kernel.name}.{stage}" for stage in ("ttir", "ttgir", "llir", "ptx", "cubin")]
        + [f"{kernel.name}.json"])
    loaded = Artifact.load(record)
    assert loaded == kernel.artifact
    assert loaded.resources == kernel.artifact.resources


# --------------------------------------------------------------------------
# Identity by content
# --------------------------------------------------------------------------


def test_the_same_kernel_in_two_graphs_has_one_hash():
    first = kgc.compile(SOFTMAX.graph("f32")).module
    renamed = SOFTMAX.graph("f32")
    renamed.name = "another_softmax"
    second = kgc.compile(renamed).module
    (a,) = first.kernels.values()
    (b,) = second.kernels.values()
    assert a.name != b.name
    assert a.artifact.hash == b.artifact.hash
    # Each keeps its own name, which is the entry point of its cubin.
    assert (a.artifact.entry, b.artifact.entry) == (a.name, b.name)


def test_other_options_or_target_give_another_hash():
    (kernel,) = kgc.compile(SOFTMAX.graph("f32")).module.kernels.values()
    ttir, options = kernel.asm["ttir"], kernel.options
    base = content_hash(ttir, options, 90, "3.6.0")
    more_warps = KernelOptions(options.grid, options.num_warps * 2, options.num_stages)
    assert content_hash(ttir, more_warps, 90, "3.6.0") != base
    assert content_hash(ttir, options, 80, "3.6.0") != base
    assert content_hash(ttir, options, 90, "3.5.0") != base
    assert content_hash(ttir.replace("tt.divisibility = 16", "tt.divisibility = 8"), options,
                        90, "3.6.0") != base
    recompiled = compile_kernel(ttir, more_warps, 90)
    assert recompiled.hash == content_hash(ttir, more_warps, 90, recompiled.triton_version)
    assert recompiled.metadata["num_warps"] == options.num_warps * 2


def test_kernels_that_are_one_artifact_compile_once_and_share_its_files(tmp_path):
    graph = kgc.compile(two_graphs_with_one_kernel(), function="second", output_dir=tmp_path)
    kernels = graph.module.kernels
    assert sorted(kernels) == ["first_0_pointwise", "second_0_pointwise"]
    first, second = kernels["first_0_pointwise"], kernels["second_0_pointwise"]
    assert first.artifact is second.artifact
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    records = {k["name"]: k["artifact"] for k in manifest["kernels"]}
    assert records == {"first_0_pointwise": "kernels/first_0_pointwise.json",
                       "second_0_pointwise": "kernels/first_0_pointwise.json"}
    assert not list((tmp_path / "kernels").glob("second_0_pointwise.*"))
    loaded = kgc.runtime.load(tmp_path, function="second")
    (launch,) = loaded.function.launches
    assert loaded.module.kernels[launch.kernel].artifact.entry == "first_0_pointwise"


# --------------------------------------------------------------------------
# Integrity
# --------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    (kernel,) = kgc.compile(SOFTMAX.graph("f32")).module.kernels.values()
    return kernel.artifact.save(tmp_path), kernel.name


def test_a_truncated_cubin_is_refused(saved):
    record, name = saved
    cubin = record.parent / f"{name}.cubin"
    data = cubin.read_bytes()
    cubin.write_bytes(data[:len(data) // 2])
    with pytest.raises(kgc.KgcError, match=rf"'{cubin}' holds {len(data) // 2} bytes but its "
                                           rf"artifact record says {len(data)}: the file is "
                                           "truncated or was changed"):
        Artifact.load(record)


def test_an_altered_file_is_refused(saved):
    record, name = saved
    ptx = record.parent / f"{name}.ptx"
    ptx.write_text(ptx.read_text().replace(".version", ".versioN", 1))
    with pytest.raises(kgc.KgcError, match="does not match the sha256 its artifact record holds"):
        Artifact.load(record)


def test_a_truncated_record_is_refused(saved):
    record, _ = saved
    record.write_text(record.read_text()[:100])
    with pytest.raises(kgc.KgcError, match="is not valid JSON"):
        Artifact.load(record)


def test_a_missing_file_is_refused(saved):
    record, name = saved
    (record.parent / f"{name}.cubin").unlink()
    with pytest.raises(kgc.KgcError, match=rf"cannot read '.*{name}\.cubin', the cubin of an "
                                           "artifact: No such file or directory"):
        Artifact.load(record)


def test_a_record_whose_hash_is_not_its_content_is_refused(saved):
    record, name = saved
    data = json.loads(record.read_text())
    data["options"]["num_warps"] *= 2
    record.write_text(json.dumps(data))
    with pytest.raises(kgc.KgcError, match=rf"artifact @{name}: its hash .* does not match its "
                                           "TTIR, options and target"):
        Artifact.load(record)


def test_a_manifest_naming_another_compile_is_refused(tmp_path):
    kgc.compile(SOFTMAX.graph("f32"), output_dir=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["kernels"][0]["grid"] = [1, 1, 1]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(kgc.KgcError, match="is not the one manifest.json describes"):
        load_module(tmp_path)


def test_a_directory_without_a_manifest_is_refused(tmp_path):
    with pytest.raises(kgc.KgcError, match=rf"cannot read '{tmp_path / 'manifest.json'}'"):
        kgc.runtime.load(tmp_path)


def test_a_module_emitted_short_of_cubin_cannot_run(tmp_path):
    result = subprocess.run([console_script("kgc"), "compile", "-o", str(tmp_path), "--emit",
                             "ptx"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    module = load_module(tmp_path)
    assert module.kernels
    for kernel in module.kernels.values():
        assert sorted(kernel.asm) == ["llir", "ptx", "ttgir", "ttir"]
    with pytest.raises(kgc.KgcError, match="only a module compiled down to cubin can run"):
        kgc.runtime.load(tmp_path)


# --------------------------------------------------------------------------
# What compiling leaves behind, and what it leaves alone
# --------------------------------------------------------------------------


@pytest.fixture
def fresh_temp_and_cache(tmp_path, monkeypatch):
    """An empty temporary directory, and an empty Triton cache, so that
    Triton compiles every stage (ptxas included) from scratch."""
    # The sm_90 worker pool keeps a scratch folder for as long as it lives;
    # started here, before TMPDIR changes, it is not counted as left behind,
    # whichever test (in whatever order) started it first.
    worker_pool(90, 2)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    return temp


@pytest.mark.parametrize("jobs", [1, 2])
def test_compiling_leaves_no_temporary_files(fresh_temp_and_cache, jobs):
    assert tempfile.gettempdir() == str(fresh_temp_and_cache)
    module = kgc.compile(ATTENTION.graph("bf16"), jobs=jobs).module
    assert all(k.artifact.cubin for k in module.kernels.values())
    assert list(fresh_temp_and_cache.iterdir()) == []


def test_a_failed_compile_keeps_only_the_ttir_it_names(fresh_temp_and_cache):
    from tests.test_compile_errors import BROKEN_TTIR

    with pytest.raises(kgc.KgcError) as raised:
        compile_kernel(BROKEN_TTIR, KernelOptions((1, 1, 1)), 90)
    (kept,) = fresh_temp_and_cache.iterdir()
    assert kept.name.startswith("kgc-broken_kernel-") and kept.suffix == ".ttir"
    assert kept.read_text() == BROKEN_TTIR
    assert f"triton.compile('{kept}'" in str(raised.value)
    assert f'loc("{kept}":3:10): error: custom op \'tt.no_such_op\' is unknown' in str(raised.value)


def test_compiling_leaves_file_descriptor_2_alone(fresh_temp_and_cache):
    """Another thread watches what fd 2 is while a kernel compiles: before,
    kgc pointed it at a capture file for the whole of triton.compile."""
    original = os.fstat(2)
    seen = set()
    done = threading.Event()

    def watch():
        while not done.is_set():
            status = os.fstat(2)
            seen.add((status.st_dev, status.st_ino))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        kgc.compile(SOFTMAX.graph("bf16"))
    finally:
        done.set()
        watcher.join()
    assert seen == {(original.st_dev, original.st_ino)}


# --------------------------------------------------------------------------
# The runtime's checks that need no GPU
# --------------------------------------------------------------------------

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def rms_norm():
    """A graph of two named inputs: x (17, 1000) and w (1000,), f32."""
    case = next(c for c in ALL_CASES if c.name == "rms_norm-17x1000")
    return kgc.compile(case.graph("f32"))


def test_the_number_of_arguments_is_checked(rms_norm):
    with pytest.raises(kgc.KgcError, match=r"@rms_norm_17x1000 takes 2 tensors \(x, w\), got 1"):
        rms_norm(torch.ones(17, 1000))


def test_an_argument_that_is_no_tensor_is_named(rms_norm):
    with pytest.raises(kgc.KgcError, match=r"argument #1 \(w\) must be a torch.Tensor of "
                                           r"\(1000,\) f32, got list"):
        rms_norm(torch.ones(17, 1000), [1.0] * 1000)


def test_a_wrong_dtype_is_named(rms_norm):
    with pytest.raises(kgc.KgcError, match=r"argument #0 \(x\) must have dtype torch.float32 "
                                           r"\(f32\), got torch.float16"):
        rms_norm(torch.ones(17, 1000, dtype=torch.float16), torch.ones(1000))


def test_a_wrong_shape_is_named(rms_norm):
    with pytest.raises(kgc.KgcError, match=r"argument #1 \(w\) must have shape \(1000,\), got "
                                           r"\(999,\)"):
        rms_norm(torch.ones(17, 1000), torch.ones(999))


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_tensor_off_the_gpu_is_refused_before_any_cuda_call(rms_norm, device):
    with pytest.raises(kgc.KgcError, match=rf"argument #0 \(x\) is on {device}; it must be on a "
                                           "CUDA device"):
        rms_norm(torch.ones(17, 1000, device=device), torch.ones(1000, device=device))
    assert rms_norm._bound == {}


def test_arguments_without_names_are_numbered(tmp_path):
    graph = kgc.compile(two_graphs_with_one_kernel(), function="first")
    with pytest.raises(kgc.KgcError, match=r"@first: argument #0 must have shape \(17, 1000\), "
                                           r"got \(3,\)"):
        graph(torch.ones(3))


def test_jobs_must_be_positive():
    with pytest.raises(kgc.KgcError, match="jobs must be at least 1, got 0"):
        kgc.compile(SOFTMAX.graph("f32"), jobs=0)
    result = subprocess.run([console_script("kgc"), "compile", "-j", "0"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert "argument -j/--jobs: expected a positive number, got '0'" in result.stderr


def test_kernel_options_are_checked():
    with pytest.raises(kgc.KgcError, match=r"a kernel's grid must be three positive sizes, got "
                                           r"\[4, 0, 1\]"):
        KernelOptions((4, 0, 1))
    with pytest.raises(kgc.KgcError, match="num_warps must be a power of two, got 6"):
        KernelOptions((1, 1, 1), num_warps=6)


def test_resource_limits_are_read_from_the_artifact():
    kernels = kgc.compile(ATTENTION.graph("f16")).module.kernels.values()
    artifact = max((k.artifact for k in kernels), key=lambda a: a.shared)
    roomy = {"max_shared_mem": 232448, "max_num_regs": 65536}
    assert artifact.exceeds(roomy) is None
    small = dict(roomy, max_shared_mem=artifact.shared - 1)
    assert artifact.exceeds(small) == (f"needs {artifact.shared} bytes of shared memory per "
                                       f"program; the device has {artifact.shared - 1}")
    registers = artifact.resources["registers"]
    threads = artifact.options.num_warps * 32
    few = dict(roomy, max_num_regs=registers * threads - 1)
    assert artifact.exceeds(few) == (f"needs {registers} registers x {threads} threads = "
                                     f"{registers * threads} registers per program; the device "
                                     f"has {registers * threads - 1}")


# --------------------------------------------------------------------------
# The TTIR files and the locations that point into them
# --------------------------------------------------------------------------


def _locations(ttgir: str) -> dict[str, tuple[str, int, int]]:
    """The TTGIR's `#locN = loc("file":line:col)` aliases."""
    import re

    return {alias: (file, int(line), int(column)) for alias, file, line, column in
            re.findall(r'^(#loc\d+) = loc\("([^"]+)":(\d+):(\d+)\)', ttgir, re.MULTILINE)}


def test_written_ttir_is_triton_s_custom_form_and_the_later_stages_point_into_it(
        tmp_path, monkeypatch):
    from kgc.tools import cli

    monkeypatch.chdir(tmp_path)
    assert cli.run(["compile", "-o", "out"]) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for kernel in manifest["kernels"]:
        name = kernel["name"]
        stem = tmp_path / "out" / "kernels" / name
        ttir = stem.with_suffix(".ttir").read_text().splitlines()
        assert ttir[0] == f"module @{name} {{"
        assert ttir[1].startswith(f"  tt.func public @{name}(%arg0: !tt.ptr<")
        # Ops in their custom form where Triton has one (tt.reduce has none),
        # and no location of its own.
        assert not any(f'"tt.{op}"' in line or "loc(" in line for line in ttir
                       for op in ("func", "load", "store", "splat", "get_program_id"))
        ttgir = stem.with_suffix(".ttgir").read_text()
        locations = _locations(ttgir)
        files = {file for file, _, _ in locations.values()}
        assert files == {f"out/kernels/{name}.ttir"}, files
        # Every location is a line and column of an op in the written file;
        # the program ids (which Triton's passes keep where they are) at theirs.
        for _, row, column in locations.values():
            assert ttir[row - 1][column - 1] not in " )}", (row, column, ttir[row - 1])
        program_ids = [line for line in ttgir.splitlines()
                       if "= tt.get_program_id " in line and "loc(#loc" in line]
        assert program_ids
        for line in program_ids:
            _, row, column = locations[line[line.rindex("loc(") + 4:line.rindex(")")]]
            assert ttir[row - 1][column - 1:].startswith("tt.get_program_id"), line
        assert f'.file\t1 "out/kernels/{name}.ttir"' in stem.with_suffix(".ptx").read_text()
        assert (f'!DIFile(filename: "{name}.ttir", directory: "out/kernels")'
                in stem.with_suffix(".llir").read_text())
        for suffix in (".ttgir", ".llir", ".ptx"):
            assert "kgc-workers-" not in stem.with_suffix(suffix).read_text()
    # What was written loads back: the records' hashes are of those files.
    assert sorted(load_module(tmp_path / "out").kernels) == sorted(
        k["name"] for k in manifest["kernels"])


def test_emit_ttir_writes_the_custom_form_too(tmp_path, monkeypatch):
    from kgc.tools import cli

    monkeypatch.chdir(tmp_path)
    assert cli.run(["compile", "-o", "cubin"]) == 0
    assert cli.run(["compile", "-o", "ttir", "--emit", "ttir"]) == 0
    for path in (tmp_path / "ttir" / "kernels").glob("*.ttir"):
        text = path.read_text()
        assert text.startswith(f"module @{path.stem} {{\n  tt.func public @{path.stem}(")
        assert text == (tmp_path / "cubin" / "kernels" / path.name).read_text()


def test_an_artifact_in_memory_is_located_in_its_own_ttir_file(tmp_path):
    (kernel,) = kgc.compile(SOFTMAX.graph("f32")).module.kernels.values()
    artifact = kernel.artifact
    assert set(f for f, _, _ in _locations(artifact.asm["ttgir"]).values()) == {
        f"{artifact.name}.ttir"}
    artifact.save(tmp_path / "a")
    saved = (tmp_path / "a" / f"{artifact.name}.ttgir").read_text()
    assert set(f for f, _, _ in _locations(saved).values()) == {
        f"{tmp_path / 'a'}/{artifact.name}.ttir"}
    assert Artifact.load(tmp_path / "a" / f"{artifact.name}.json") == artifact


def test_a_compile_of_many_kernels_asks_for_a_worker_per_usable_cpu(monkeypatch):
    from kgc.pipeline import triton_stage

    monkeypatch.delenv("KGC_COMPILE_JOBS", raising=False)
    monkeypatch.setattr(triton_stage.os, "sched_getaffinity", lambda pid: {0, 3, 5})
    assert triton_stage.compile_jobs() == 3
    monkeypatch.setattr(triton_stage.os, "sched_getaffinity", lambda pid: set(range(200)))
    assert triton_stage.compile_jobs() == 32
    monkeypatch.setenv("KGC_COMPILE_JOBS", "4")
    assert triton_stage.compile_jobs() == 4
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("KGC_COMPILE_JOBS", bad)
        with pytest.raises(kgc.KgcError, match=f"KGC_COMPILE_JOBS must be a positive number "
                                               f"of worker processes, got '{bad}'"):
            triton_stage.compile_jobs()


def test_a_later_larger_compile_keeps_the_workers_already_started(monkeypatch):
    # compile_kernels asks the pool for `jobs` workers, not one per missing
    # kernel: a pool sized by a small compile would be closed, its started
    # workers with it, by the next compile of more kernels.
    from kgc.pipeline import triton_stage

    asked = []
    real = triton_stage.worker_pool
    monkeypatch.setattr(triton_stage, "worker_pool",
                        lambda target, jobs=1: asked.append(jobs) or real(target, jobs))
    g = kgc.Graph("one_kernel")
    g.output(g.softmax(g.input("x", (3, 40), "f16")))
    kgc.compile(g, jobs=2, cache=False)
    assert asked == [2]
