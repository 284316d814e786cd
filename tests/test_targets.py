"""Compiling for other GPUs than the default sm_90, without a GPU."""

import re

import pytest

import kgc
from tests.cases import ALL_CASES

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
    dot_line = next(line for line in kernel.asm["ttir"].splitlines() if '"tt.dot"' in line)
    assert "xf16>" in dot_line and "f8E5M2" not in dot_line
    assert kernel.asm["cubin"]


def test_fp8_dot_on_sm90_stays_fp8():
    graph = kgc.compile(FP8_MATMUL.graph("f32"), target="sm_90")
    (kernel,) = graph.module.kernels.values()
    assert '"tt.dot"' in kernel.asm["ttir"]
    dot_line = next(line for line in kernel.asm["ttir"].splitlines() if '"tt.dot"' in line)
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


KG_STAGE = ("%0 = kg.kernel @g_0_matmul(%arg0) attributes {block_k = 64 : i64, block_m = 128 : "
            "i64, grid = array<i64: 4, 1, 1>, num_stages = 3 : i64, num_warps = 8 : i64} : "
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
