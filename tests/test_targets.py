"""Compiling for other GPUs than the default sm_90, without a GPU: the code
for each, and what the planner knows of each (kgc.targets)."""

import dataclasses
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from mlir import ir

import kgc
from kgc import targets
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import MatmulConfig
from kgc.tiling.kernel_ops import int_array, kernel_name, kernels_in
from tests.cases import ALL_CASES
from tests.tools import console_script

FP8_MATMUL = next(c for c in ALL_CASES if c.name.startswith("matmul_fp8"))
SOFTMAX = next(c for c in ALL_CASES if c.name == "softmax-17x1000")


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89", "sm_90", "90"])
def test_softmax_compiles_for(target):
    graph = kgc.compile(SOFTMAX.graph("f16"), target=target)
    (kernel,) = graph.module.kernels.values()
    arch = target.removeprefix("sm_")
    assert f".target sm_{arch}" in kernel.asm["ptx"]
    assert kernel.asm["cubin"]


def test_e4m3_is_refused_below_sm89_naming_the_op():
    # Triton converts f8E4M3FN only from sm_89 on.
    with pytest.raises(kgc.KgcError, match=r"kg.cast uses f8E4M3FN, which Triton supports on sm_89 "
                                           r"and newer; the target is sm_80"):
        kgc.compile(FP8_MATMUL.graph("f32"), target="sm_80")


def test_e5m2_dot_on_sm80_runs_on_f16():
    graph = kgc.Graph("e5m2")
    a = graph.input("a", (64, 128), "f8e5m2")
    b = graph.input("b", (128, 64), "f8e5m2")
    graph.output(graph.matmul(a, b, out_dtype="f32"))
    compiled = kgc.compile(graph, target="sm_80")
    (kernel,) = compiled.module.kernels.values()
    # Triton's custom form, as Triton compiled it.
    dot_line = next(line for line in kernel.asm["ttir"].splitlines() if " tt.dot " in line)
    assert "xf16>" in dot_line and "f8E5M2" not in dot_line
    assert kernel.asm["cubin"]


def test_fp8_dot_on_sm90_stays_fp8():
    graph = kgc.compile(FP8_MATMUL.graph("f32"), target="sm_90")
    (kernel,) = graph.module.kernels.values()
    assert " tt.dot " in kernel.asm["ttir"]
    dot_line = next(line for line in kernel.asm["ttir"].splitlines() if " tt.dot " in line)
    assert "xf8E4M3FN>" in dot_line


def _e5m2_to_f16_graph():
    graph = kgc.Graph("widen")
    x = graph.input("x", (64, 128), "f8e5m2")
    graph.output(graph.cast(x, "f16"))
    return graph


def _ptx(compiled) -> str:
    (kernel,) = compiled.module.kernels.values()
    return kernel.asm["ptx"]


def test_code_for_a_target_does_not_depend_on_earlier_compiles(tmp_path, monkeypatch):
    # Triton builds its 8-bit float conversions once per process, for the
    # first target it converts for. A fresh cache makes every compile here a
    # real one: a cache hit would hide the problem.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    graph = _e5m2_to_f16_graph()
    sm80 = _ptx(kgc.compile(graph, target="sm_80"))
    sm90 = _ptx(kgc.compile(graph, target="sm_90"))
    sm80_again = _ptx(kgc.compile(graph, target="sm_80"))
    # sm_89 and newer convert with one instruction, ptxas refuses it below.
    assert "cvt.rn.f16x2.e5m2x2" in sm90
    assert "e5m2x2" not in sm80
    assert sm80_again == sm80


# -- what the planner knows of each target ----------------------------------------


@pytest.mark.parametrize("sm,sm_count,shared", [
    (80, 108, 166912), (86, 84, 101376), (87, 16, 166912), (89, 142, 101376),
    (90, 132, 232448), (100, 148, 232448), (101, 20, 232448), (120, 170, 101376)])
def test_the_table_has_each_targets_part(sm, sm_count, shared):
    record = targets.table_record(sm)
    assert record.sm == sm and record.name == f"sm_{sm}"
    assert record.sm_count == sm_count and record.max_shared_memory_per_block == shared
    assert (record.registers_per_sm, record.registers_per_thread) == (65536, 255)
    assert not record.from_device
    # TMA from Hopper on, wgmma on Hopper alone, 8-bit float tensor cores from Ada on.
    assert record.tma == (sm >= 90) and record.wgmma == (sm == 90) and record.fp8 == (sm >= 89)


def test_every_supported_sm_has_a_record_and_no_other():
    assert tuple(targets.TARGETS) == targets.SUPPORTED_SMS
    with pytest.raises(ValueError, match=r"sm_75 is not a GPU kgc compiles for \(supported: "
                                         r"sm_80, sm_86"):
        targets.target_for(75)


def _h100_pcie(**changes):
    properties = dict(name="NVIDIA H100 PCIe", major=9, minor=0, multi_processor_count=114,
                      shared_memory_per_block_optin=232448, L2_cache_size=50 << 20,
                      regs_per_multiprocessor=65536)
    return SimpleNamespace(**{**properties, **changes})


def test_a_gpus_own_figures_replace_the_tables():
    record = targets.from_properties(_h100_pcie())
    assert record.from_device and record.part == "NVIDIA H100 PCIe"
    assert record.sm == 90 and record.sm_count == 114 and record.l2_bytes == 50 << 20
    # What torch does not say comes from the table of its SM version.
    assert record.tma and record.wgmma and record.fp8
    older_torch = targets.from_properties(SimpleNamespace(major=8, minor=0, name="A100",
                                                          multi_processor_count=108))
    assert older_torch.max_shared_memory_per_block == 166912 and older_torch.l2_bytes == 40 << 20
    # A GPU kgc does not compile for has no record.
    assert targets.from_properties(_h100_pcie(major=7, minor=5)) is None


def test_a_compile_for_the_gpu_at_hand_plans_with_its_figures(monkeypatch):
    monkeypatch.setattr(targets, "present_gpu", lambda: targets.from_properties(_h100_pcie()))
    assert targets.target_for(90).sm_count == 114
    assert targets.target_for(None).sm_count == 114  # the default target is sm_90
    # Another target than the GPU's: the table's figures.
    assert targets.target_for(80) == targets.table_record(80)
    given = dataclasses.replace(targets.table_record(90), sm_count=7)
    assert targets.target_for(given) is given


def test_the_gpu_is_read_only_where_torch_is_loaded():
    # A compile on the command line neither loads torch nor depends on the machine.
    done = subprocess.run([sys.executable, "-c", "import sys, kgc.targets as t; "
                           "print(t.present_gpu(), t.target_for(90).sm_count, 'torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "132", "False"]


def _gemv(k, n):
    graph = kgc.Graph("gemv")
    x = graph.input("x", (1, k), "f16")
    w = graph.input("w", (k, n), "f16")
    graph.output(graph.matmul(x, w))
    return graph


def _kernels(graph, target, config=None):
    """(name, grid) of each kernel of `graph` compiled for `target` to kg."""
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, target=target, emit="kg", config=config)
        return [(kernel_name(k), tuple(int_array(k, "grid"))) for k in kernels_in(module)]


@pytest.mark.parametrize("target,k,n,kernels", [
    # 1x4096x1024: 16 tiles of 64 columns, split until they fill the SMs once.
    (90, 4096, 1024, [("gemv_0_matmul_partials", (16, 16, 1)), ("gemv_0_matmul_reduce", (16, 1, 1))]),
    (80, 4096, 1024, [("gemv_0_matmul_partials", (16, 8, 1)), ("gemv_0_matmul_reduce", (16, 1, 1))]),
    (87, 4096, 1024, [("gemv_0_matmul", (16, 1, 1))]),  # Orin's 16 SMs are full
    # 1x4096x7680: 120 tiles of 64 columns are one wave on sm_90's 132 SMs,
    # streamed unsplit; on sm_80's 108 they would be two: 60 of 128.
    (90, 4096, 7680, [("gemv_0_matmul", (120, 1, 1))]),
    (80, 4096, 7680, [("gemv_0_matmul", (60, 1, 1))]),
])
def test_kgc_s_split_k_fills_the_targets_sms(monkeypatch, target, k, n, kernels):
    monkeypatch.setattr(targets, "present_gpu", lambda: None)  # the table's parts, on any host
    assert _kernels(_gemv(k, n), target) == kernels
    # A config's partition is fused and tiled for the target too.
    assert _kernels(_gemv(k, n), target, GraphConfig("gemv", "0")) == kernels


def test_the_search_space_is_sized_by_the_target():
    extents = {"m": 4096, "n": 4096, "k": 4096}
    for sm in (80, 90):
        record = targets.table_record(sm)
        programs = {c.num_programs for c in MatmulConfig.space(extents, "f16", record)}
        assert programs == {None, record.sm_count}
        seeds = MatmulConfig.seeds(extents, "f16", target=record)
        assert {c.num_programs for c in seeds} == {None, record.sm_count}
    # Split-K is tried where the tiles leave SMs idle: 1x4096x7680 in 64-column
    # tiles leaves sm_90's idle, not sm_80's.
    skinny = {"m": 1, "n": 7680, "k": 4096}
    splits = {sm: {c.split_k for c in MatmulConfig.space(skinny, "f16", targets.table_record(sm))
                   if c.block_n == 64}
              for sm in (80, 90)}
    assert splits[90] > {None, 2} and splits[80] == {None}


@pytest.mark.parametrize("target,splits", [("sm_80", 8), ("sm_90", 16)])
def test_kgc_compile_on_the_command_line_plans_for_its_target(tmp_path, target, splits):
    graph = tmp_path / "gemv.mlir"
    graph.write_text(
        "func.func @gemv(%x: tensor<1x4096xf16>, %w: tensor<4096x1024xf16>) -> tensor<1x1024xf16> {\n"
        "  %y = kg.matmul %x, %w : (tensor<1x4096xf16>, tensor<4096x1024xf16>) -> tensor<1x1024xf16>\n"
        "  return %y : tensor<1x1024xf16>\n}\n")
    done = subprocess.run([console_script("kgc"), "compile", str(graph), "-o", str(tmp_path / "out"),
                           "--target", target, "--emit", "kg"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    kg = next((tmp_path / "out").glob("*.kg.mlir")).read_text()
    assert f"split_k = {splits} : i64" in kg and f"grid = array<i64: 16, {splits}, 1>" in kg

def test_every_supported_target_has_its_per_block_limits():
    from kgc.targets import LIMITS, SUPPORTED_SMS, target_limits

    assert set(LIMITS) == set(SUPPORTED_SMS)
    shared = {sm: target_limits(sm).max_shared_mem for sm in SUPPORTED_SMS}
    assert shared[80] == 166912 and shared[86] == shared[89] == shared[120] == 101376
    assert shared[90] == shared[100] == 232448
    assert all(target_limits(sm).max_num_regs == 65536 for sm in SUPPORTED_SMS)
    assert target_limits(90).as_device_properties() == {"max_shared_mem": 232448,
                                                        "max_num_regs": 65536}


def _compiled_kernel(shared=0, warps=4, registers=None):
    """The parts of a compiled kernel the resource check reads."""
    from types import SimpleNamespace

    artifact = SimpleNamespace(shared=shared, metadata={"num_warps": warps},
                               resources={} if registers is None else {"registers": registers})
    return SimpleNamespace(name="g_0_matmul", num_warps=warps, num_stages=3, artifact=artifact)


KG_STAGE = ("%0 = kg.kernel @g_0_matmul(%arg0) attributes {config = {block_k = 64 : i64, block_m = "
            "128 : i64, num_stages = 3 : i64, num_warps = 8 : i64}, grid = array<i64: 4, 1, 1>} : "
            "(tensor<4xf32>) -> tensor<4xf32> {")


@pytest.mark.parametrize("kernel,target,problem", [
    (_compiled_kernel(shared=101377), 86,
     "kernel @g_0_matmul needs 101377 B of shared memory per program; sm_86 allows at most "
     "101376 B per block: lower its tile sizes or num_stages (block_k=64 block_m=128 "
     "num_stages=3)"),
    (_compiled_kernel(warps=8, registers=255), 90, None),  # 255 x 256 = 65280 fits
    (_compiled_kernel(warps=16, registers=255), 90,
     "kernel @g_0_matmul needs 255 registers x 512 threads = 130560 registers per program; "
     "sm_90 has 65536 per block: lower its tile sizes or num_warps (block_k=64 block_m=128 "
     "num_warps=8)"),
    (_compiled_kernel(warps=64), 90,
     "kernel @g_0_matmul needs 2048 threads per program; sm_90 runs at most 1024"),
    (_compiled_kernel(shared=166912), 80, None),
    (_compiled_kernel(shared=166913), 80, "sm_80 allows at most 166912 B per block"),
])
def test_the_resource_check_names_the_kernel_the_limit_and_the_knobs(kernel, target, problem):
    from kgc.pipeline.resources import check_resources, resource_problem

    found = resource_problem(kernel, target, KG_STAGE)
    if problem is None:
        assert found is None
        check_resources([kernel], target, KG_STAGE)
    else:
        assert found is not None and problem in found, found
        with pytest.raises(kgc.KgcError, match=re.escape(found)):
            check_resources([kernel], target, KG_STAGE)
