"""Hopper GEMM schedules and FP8 matmul run against torch: TMA descriptors
(f16, bf16; shapes that are not tile multiples), persistent grouped tiles,
warp specialization, and e4m3 matmul with per-tensor scales, precise and
with fast accumulation."""

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from kgc.tiling.config import MatmulConfig
from tests.test_hopper_gemm import PERSISTENT_PROGRAMS, config_for, gemm, scaled_fp8

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def hopper() -> bool:
    return torch.cuda.get_device_capability() >= (9, 0)


def fp8_dots() -> bool:
    return torch.cuda.get_device_capability() >= (8, 9)


def check_gemm(result, a, b, dtype: str) -> None:
    """kgc.accuracy's rule: against the exact product, with torch's f32 sum
    rounded to the dtype as eager."""
    assert result.dtype == DTYPES[dtype]
    reason = tensor_mismatch(result, (a.float() @ b.float()).to(DTYPES[dtype]),
                             a.double() @ b.double())
    assert reason is None, reason


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("m,k,n", [(1, 4104, 4104), (3, 1032, 264), (17, 4104, 1032),
                                   (1000, 4104, 1032), (2048, 2048, 2048)])
def test_tma_gemm_matches_torch(m, k, n, dtype):
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    graph = gemm(m, k, n, dtype)
    compiled = kgc.compile(graph, config=config_for(graph, MatmulConfig(tma=True)))
    a = torch.randn(m, k, device="cuda", dtype=DTYPES[dtype])
    b = torch.randn(k, n, device="cuda", dtype=DTYPES[dtype])
    check_gemm(compiled.run(a, b, poison=True), a, b, dtype)
    check_gemm(compiled(a, b), a, b, dtype)  # the bound fast path, scratch included


@pytest.mark.parametrize("config", [
    MatmulConfig(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True),
    MatmulConfig(block_m=256, block_n=128, block_k=64, num_warps=8, num_stages=4, tma=True),
    MatmulConfig(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=5, tma=True,
                 num_programs=PERSISTENT_PROGRAMS),
    MatmulConfig(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True,
                 num_programs=PERSISTENT_PROGRAMS, group_m=8),
    MatmulConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3, tma=True,
                 warp_specialize=True),
    MatmulConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4,
                 num_programs=PERSISTENT_PROGRAMS),
], ids=lambda c: c.to_json())
def test_hopper_configs_match_torch(config):
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    graph = gemm(1000, 4104, 3080, "f16")
    compiled = kgc.compile(graph, config=config_for(graph, config))
    a = torch.randn(1000, 4104, device="cuda", dtype=torch.float16)
    b = torch.randn(4104, 3080, device="cuda", dtype=torch.float16)
    check_gemm(compiled.run(a, b, poison=True), a, b, "f16")


def test_tma_reads_a_transposed_weight():
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    graph = gemm(17, 1032, 264, "bf16", transposed_b=True)
    compiled = kgc.compile(graph, config=config_for(graph, MatmulConfig(tma=True)))
    a = torch.randn(17, 1032, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(264, 1032, device="cuda", dtype=torch.bfloat16)
    check_gemm(compiled.run(a, w, poison=True), a, w.t(), "bf16")


def test_tma_gemm_replays_in_a_cuda_graph():
    if not hopper():
        pytest.skip("TMA descriptors need sm_90")
    graph = gemm(256, 512, 256)
    compiled = kgc.compile(graph, config=config_for(graph, MatmulConfig(tma=True)))
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    captured = compiled.cuda_graph(a, b)
    a2, b2 = torch.randn_like(a), torch.randn_like(b)
    check_gemm(captured(a2, b2), a2, b2, "f16")


def _fp8_inputs(m, k, n, seed=0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = (torch.randn(m, k, device="cuda", generator=generator) / 2).to(torch.float8_e4m3fn)
    b = (torch.randn(k, n, device="cuda", generator=generator) / 2).to(torch.float8_e4m3fn)
    scale_a = torch.rand(1, device="cuda", generator=generator) + 0.5
    scale_b = torch.rand(1, device="cuda", generator=generator) + 0.5
    return a, b, scale_a, scale_b


def check_fp8(result, a, b, scale_a, scale_b, out_dtype) -> None:
    expected = (a.double() @ b.double()) * scale_a.double() * scale_b.double()
    assert result.dtype == out_dtype
    # Products of 8-bit floats are exact in f32: eager sums them in f32 and
    # rounds once to the result's 8 (bf16) or 11 (f16) bits.
    eager = ((a.float() @ b.float()) * scale_a * scale_b).to(out_dtype)
    reason = tensor_mismatch(result, eager, expected)
    assert reason is None, reason


@pytest.mark.parametrize("out", ["bf16", "f16"])
@pytest.mark.parametrize("m,k,n", [(1, 4096, 4096), (3, 1024, 272), (17, 4096, 1040),
                                   (1000, 4096, 1040), (2048, 2048, 2048)])
@pytest.mark.parametrize("tma", [False, True])
def test_scaled_fp8_matmul_matches_torch(m, k, n, out, tma):
    if not fp8_dots() or (tma and not hopper()):
        pytest.skip("8-bit float dots need sm_89 (TMA sm_90)")
    graph = scaled_fp8(m, k, n, out)
    config = MatmulConfig(block_k=128, tma=True) if tma else None
    compiled = kgc.compile(graph, config=None if config is None else config_for(graph, config))
    # The scales are the matmul's epilogue at every M, one row included. (A
    # kernel whose k loop kgc splits is two: its partials and their sum.)
    fused = {name.removesuffix("_partials").removesuffix("_reduce")
             for name in compiled.module.kernels}
    assert len(fused) == 1, sorted(compiled.module.kernels)
    a, b, scale_a, scale_b = _fp8_inputs(m, k, n)
    check_fp8(compiled.run(a, b, scale_a, scale_b, poison=True), a, b, scale_a, scale_b,
              DTYPES[out])


def test_scaled_fp8_matmul_is_close_to_scaled_mm():
    if not fp8_dots():
        pytest.skip("8-bit float dots need sm_89")
    a, b, scale_a, scale_b = _fp8_inputs(512, 1024, 768, seed=1)
    compiled = kgc.compile(scaled_fp8(512, 1024, 768))
    ours = compiled(a, b, scale_a, scale_b)
    # _scaled_mm takes B column-major.
    theirs = torch._scaled_mm(a, b.t().contiguous().t(), scale_a=scale_a, scale_b=scale_b,
                              out_dtype=torch.bfloat16)
    exact = (a.double() @ b.double()) * scale_a.double() * scale_b.double()
    reason = tensor_mismatch(ours, theirs, exact)
    assert reason is None, reason


# Fast accumulation: the tensor cores sum the whole k loop at their own
# precision (about 14 bits, DeepSeek-V3's report found on Hopper), kgc's and
# cuBLAS's alike, so neither is held to f32 sums. Per output dtype, the one
# rounding to the result; for the sums, at most 2^-14 of the sum lost at
# each of the K / 32 wgmma steps: K / 2^19, relative to the largest result.
FAST_ACCUM_ROUNDING = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


def _fast_accum_bound(expected, k: int, out_dtype) -> float:
    return (FAST_ACCUM_ROUNDING[out_dtype] + k / 2**19) * (1 + expected.abs().max().item())


@pytest.mark.parametrize("out", ["bf16", "f16"])
@pytest.mark.parametrize("m,k,n", [(1, 4096, 4096), (3, 1024, 272), (17, 4096, 1040),
                                   (4096, 4096, 4096)])
def test_fast_accum_fp8_matmul_matches_scaled_mm_fast(m, k, n, out):
    """kgc's FP8 matmul under precision fast_accum against
    torch._scaled_mm(use_fast_accum=True) on fresh random inputs, both
    against the exact product and against each other. (_scaled_mm needs K
    and N in multiples of 16; M is free.)"""
    if not hopper():
        pytest.skip("fast accumulation is a mode of sm_90's 8-bit wgmma")
    out_dtype = DTYPES[out]
    compiled = kgc.compile(scaled_fp8(m, k, n, out, precision="fast_accum"))
    assert "maxNumImpreciseAcc = 1073741824" in compiled.ttir()
    a, b, scale_a, scale_b = _fp8_inputs(m, k, n, seed=m + k + n)
    ours = compiled.run(a, b, scale_a, scale_b, poison=True)
    assert ours.dtype == out_dtype and ours.shape == (m, n)
    theirs = torch._scaled_mm(a, b.t().contiguous().t(), scale_a=scale_a, scale_b=scale_b,
                              out_dtype=out_dtype, use_fast_accum=True)
    expected = (a.double() @ b.double()) * scale_a.double() * scale_b.double()
    bound = _fast_accum_bound(expected, k, out_dtype)
    for name, result in (("kgc", ours), ("_scaled_mm", theirs)):
        error = (result.double() - expected).abs().max().item()
        assert error <= bound, f"{name}: max error {error:.3g} > {bound:.3g}"
    difference = (ours.double() - theirs.double()).abs().max().item()
    assert difference <= 2 * bound, f"kgc - _scaled_mm: {difference:.3g} > {2 * bound:.3g}"


def test_scaled_fp8_matmul_refuses_other_dtypes():
    if not fp8_dots():
        pytest.skip("8-bit float dots need sm_89")
    compiled = kgc.compile(scaled_fp8(64, 64, 64))
    a, b, scale_a, scale_b = _fp8_inputs(64, 64, 64)
    with pytest.raises(kgc.KgcError, match=r"argument #0 \(a\) must have dtype "
                                           r"torch.float8_e4m3fn"):
        compiled(a.half(), b, scale_a, scale_b)
