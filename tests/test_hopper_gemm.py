"""Hopper GEMM schedules and FP8 matmul without a GPU: the `tma` knob (TMA
tensor descriptors), persistent grouped tiles, deeper pipelines and warp
specialization in the search space, FP8 with per-tensor scales as one
kernel; numerics through the CPU executor, and Triton 3.6 compiling the
TTIR for sm_90."""

from __future__ import annotations

import dataclasses

import pytest
from mlir import ir

import kgc
import kgc.reference
from kgc.accuracy import tensor_mismatch
from kgc.dialects import kg
from kgc.execution import run_tiled
from kgc.pipeline.compiler import compile_module
from kgc.pipeline.config import GraphConfig
from kgc.search.space import configs_to_try, variant_space
from kgc.tiling import tma
from kgc.targets import target_for
from kgc.tiling.config import ConfigError, KernelConfig, MatmulConfig
from kgc.tiling.index_maps import BufferView
from kgc.tiling.kernel_ops import kernels_in, walk_ops
from tests.comparison import assert_as_accurate_as_eager

torch = pytest.importorskip("torch")
# Persistent programs: one per SM of the sm_90 target these tests compile for.
PERSISTENT_PROGRAMS = target_for(90).sm_count


def gemm(m: int, k: int, n: int, dtype: str = "f16", transposed_b: bool = False,
         batch: int | None = None) -> kgc.Graph:
    """C = A @ B; B given as [N, K] and read through a transpose when
    `transposed_b` (a linear layer's weight)."""
    g = kgc.Graph("gemm")
    lead = () if batch is None else (batch,)
    a = g.input("a", lead + (m, k), dtype)
    if transposed_b:
        order = list(range(len(lead))) + [len(lead) + 1, len(lead)]
        b = g.transpose(g.input("w", lead + (n, k), dtype), order)
    else:
        b = g.input("b", lead + (k, n), dtype)
    g.output(g.matmul(a, b))
    return g


def scaled_fp8(m: int, k: int, n: int, out: str = "bf16", scalar_scales: bool = False,
               precision: str | None = None) -> kgc.Graph:
    """out(scale_a * scale_b * (A @ B)) with A, B in e4m3: per-tensor
    scales as 1-element f32 inputs, or as Python floats; `precision` is the
    matmul's (None or "fast_accum")."""
    g = kgc.Graph("fp8_gemm")
    a = g.input("a", (m, k), "f8e4m3")
    b = g.input("b", (k, n), "f8e4m3")
    product = g.matmul(a, b, precision=precision)
    if scalar_scales:
        scaled = g.mul(g.mul(product, 0.5), 1.5)
    else:
        scaled = g.mul(g.mul(product, g.input("scale_a", (1,), "f32")),
                       g.input("scale_b", (1,), "f32"))
    g.output(g.cast(scaled, out))
    return g


def config_for(graph: kgc.Graph, config: MatmulConfig) -> GraphConfig:
    """A GraphConfig setting `config` on the matmul kernel of `graph`."""
    context = ir.Context()
    module = graph.build(context)
    with context:
        GraphConfig(graph.name).fuse(module)
        (kernel,) = [k for k in kernels_in(module)
                     if "matmul" in ir.StringAttr(k.attributes["sym_name"]).value]
        name = ir.StringAttr(kernel.attributes["sym_name"]).value
    return GraphConfig(graph.name, None, {name: config})


def compiled(graph: kgc.Graph, config: MatmulConfig | None = None, emit: str = "ttir",
             target: int = 90):
    context = ir.Context()
    module = graph.build(context)
    with context:
        result = compile_module(module, emit=emit, target=target,
                                config=None if config is None else config_for(graph, config))
    return module, result


def random_inputs(graph: kgc.Graph, seed: int = 0) -> list:
    generator = torch.Generator().manual_seed(seed)
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
              "f8e4m3": torch.float8_e4m3fn}
    inputs = []
    for tensor in graph.inputs:
        values = torch.randn(tensor.shape, generator=generator)
        if tuple(tensor.shape) == (1,):
            values = values.abs() + 0.5  # a scale
        inputs.append(values.to(dtypes[tensor.dtype]))
    return inputs


# -- the tma knob ---------------------------------------------------------------


def test_tma_is_a_matmul_flag_that_round_trips():
    config = MatmulConfig(block_m=128, tma=True)
    assert "tma" in MatmulConfig.FLAGS and "tma" not in MatmulConfig.LOOP_FLAGS
    assert KernelConfig.from_json(config.to_json()) == config
    with pytest.raises(ConfigError, match="tma = 1 is not legal; tma must be true or false"):
        MatmulConfig(tma=1).canonical({"m": 64, "n": 64, "k": 64}, "k0")


def test_default_kernels_have_no_descriptors(monkeypatch):
    # Triton's default kernel: a bare matmul this large would otherwise be a
    # library call (kgc.tiling.library).
    monkeypatch.setenv("KGC_LIBRARY_KERNELS", "0")
    _, result = compiled(gemm(256, 512, 256))
    (kernel,) = result.kernels.values()
    assert "tt.make_tensor_descriptor" not in kernel.asm["ttir"]
    assert "tma" not in result.stages["kg"]


@pytest.mark.parametrize("m,k,n,transposed_b,batch", [
    (1, 4096, 4096, False, None),
    (3, 512, 256, False, None),
    (17, 1032, 264, False, None),
    (1000, 4104, 1032, False, None),
    (256, 512, 256, True, None),
    (100, 264, 96, False, 3),
])
def test_tma_gemm_compiles_for_sm90_with_descriptors(m, k, n, transposed_b, batch):
    graph = gemm(m, k, n, transposed_b=transposed_b, batch=batch)
    _, result = compiled(graph, MatmulConfig(tma=True), emit="cubin")
    (kernel,) = result.kernels.values()
    ttir = kernel.asm["ttir"]
    # Both operands of the k loop through descriptors, the result too.
    assert ttir.count("tt.make_tensor_descriptor") == 3, ttir
    assert ttir.count("tt.descriptor_load") == 2 and ttir.count("tt.descriptor_store") == 1
    assert ("tt.trans" in ttir) == transposed_b
    assert "tt.load" not in ttir
    # Device-side descriptors live in global scratch, 128 bytes each per program.
    assert kernel.artifact.metadata["global_scratch_size"] >= 3 * 128
    assert kernel.asm["cubin"]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_tma_gemm_runs_tiled_like_torch(dtype):
    graph = gemm(17, 264, 40, dtype)
    module, _ = compiled(graph, MatmulConfig(block_m=16, block_n=16, block_k=32, tma=True),
                         emit="kg")
    assert "{tma}" in str(module)
    inputs = random_inputs(graph)
    result = run_tiled(module, None, *inputs)
    built = graph.build()
    assert_as_accurate_as_eager(result, kgc.reference.evaluate(built, None, inputs),
                                kgc.reference.evaluate(built, None, inputs, exact=True))


def test_tma_refuses_unaligned_strides_with_the_operand_named():
    # K = 4097 f16: A's rows are 8194 bytes apart, not a multiple of 16.
    with pytest.raises(kgc.KgcError, match=r"matmul kernel @gemm_0_matmul: tma = true is not "
                                           r"legal: input #0 \(f16 \[17, 4097\]\) cannot be read "
                                           r"by TMA: its stride along axis 0 is 4097 elements of "
                                           r"f16, 8194 bytes, not a multiple of 16"):
        compiled(gemm(17, 4097, 64), MatmulConfig(tma=True))


def test_tma_stores_through_pointers_where_the_result_is_unaligned():
    # B transposed ([N, K], K aligned) reads by TMA; C's rows of N = 17
    # halves are 34 bytes apart: the result is stored through pointers.
    _, result = compiled(gemm(64, 256, 17, transposed_b=True), MatmulConfig(tma=True),
                         emit="cubin")
    (kernel,) = result.kernels.values()
    ttir = kernel.asm["ttir"]
    assert ttir.count("tt.descriptor_load") == 2
    assert "tt.descriptor_store" not in ttir and "tt.store" in ttir


def test_tma_refusal_rules():
    view = BufferView((64, 128, 1), (128, 1, 0), 0)
    assert tma.refusal(view, "f16", (64, 64, 1)) is None
    assert "not a multiple of 16" in tma.refusal(BufferView((64, 9), (9, 1), 0), "f16", (64, 8))
    assert "no dimension is contiguous" in tma.refusal(BufferView((64, 64), (128, 2), 0), "f16",
                                                       (64, 64))
    assert "starts 4 elements" in tma.refusal(BufferView((64, 128), (128, 1), 4), "f16", (64, 64))
    assert "at most 256" in tma.refusal(view, "f16", (512, 64, 1))
    assert "at least 16" in tma.refusal(BufferView((64, 8), (8, 1), 0), "f16", (64, 4))
    assert tma.layout((1, 0, 64)) == [2, 0]


@pytest.mark.parametrize("target", [80, 89])
def test_tma_below_sm90_is_refused_before_triton(target):
    with pytest.raises(kgc.KgcError, match=rf"kernel @gemm_0_matmul: tma = true needs sm_90 or "
                                           rf"newer, .*; the target is sm_{target}"):
        compiled(gemm(256, 512, 256), MatmulConfig(tma=True), target=target)


def test_warp_specialize_with_tma_compiles_for_sm90():
    config = MatmulConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3,
                          tma=True, warp_specialize=True)
    _, result = compiled(gemm(512, 1024, 512), config, emit="cubin")
    (kernel,) = result.kernels.values()
    assert "tt.warp_specialize" in kernel.asm["ttir"]
    assert "ttg.warp_specialize" in kernel.asm["ttgir"]


def test_warp_specialize_without_tma_is_still_refused_on_sm90():
    with pytest.raises(kgc.KgcError, match="warp_specialize needs sm_100 or newer.*the kernel "
                                           "has no tma"):
        compiled(gemm(512, 1024, 512), MatmulConfig(warp_specialize=True))


def test_persistent_tma_gemm_compiles():
    config = MatmulConfig(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3,
                          group_m=8, tma=True, num_programs=PERSISTENT_PROGRAMS)
    _, result = compiled(gemm(4096, 512, 2048), config, emit="cubin")
    (kernel,) = result.kernels.values()
    assert kernel.grid == (PERSISTENT_PROGRAMS, 1, 1)
    assert kernel.asm["ttir"].count("tt.make_tensor_descriptor") == 3


# -- the search space -----------------------------------------------------------


def test_big_gemm_space_has_hopper_configs():
    extents = {"m": 4096, "n": 4096, "k": 4096}
    space = set(MatmulConfig.space(extents, "f16"))
    for block_m, block_n in ((128, 256), (256, 128)):
        for stages in (3, 4, 5):
            for programs in (None, PERSISTENT_PROGRAMS):
                assert MatmulConfig(block_m=block_m, block_n=block_n, block_k=64, group_m=8,
                                    num_warps=8, num_stages=stages, tma=True,
                                    num_programs=programs) in space
    seeds = MatmulConfig.seeds(extents, "f16")
    # The seeds are in the space, but for the warp-specialized and flattened
    # ones (flags the space leaves to the seeds).
    assert {c for c in seeds if not (c.warp_specialize or c.flatten)} <= space
    assert sum(bool(c.warp_specialize and c.tma) for c in seeds) == 3
    assert sum(bool(c.flatten and c.tma and c.num_programs) for c in seeds) == 3
    assert seeds[0] == MatmulConfig(block_m=128, block_n=256, block_k=64, group_m=8,
                                    num_warps=8, num_stages=3, tma=True)
    # Small GEMMs have no seeds, and no persistent config with fewer tiles
    # than programs.
    small = {"m": 64, "n": 256, "k": 256}
    assert MatmulConfig.seeds(small, "f16") == []
    assert not any(c.num_programs for c in MatmulConfig.space(small, "f16"))


def test_fp8_gemms_are_seeded_with_128_deep_k_steps():
    # Measured on an H100 at 4096^3 (benchmarks/NOTES.md): with each k
    # step's 8-bit products added into f32 after it, 128-deep steps beat
    # 64-deep ones by a sixth; 16-bit GEMMs take 64-deep steps.
    extents = {"m": 4096, "n": 4096, "k": 4096}
    assert {c.block_k for c in MatmulConfig.seeds(extents, "f8E4M3FN")} == {128}
    assert {c.block_k for c in MatmulConfig.seeds(extents, "f16")} == {64}


def test_fast_accum_fp8_gemms_are_seeded_with_64_deep_k_steps_too():
    # Without the promotion both depths ran at about _scaled_mm's fast
    # speed on an H100 (benchmarks/NOTES.md): each tile comes with both,
    # the 128-deep one first; the precise seeds stay 128-deep only.
    extents = {"m": 4096, "n": 4096, "k": 4096}
    precise = MatmulConfig.seeds(extents, "f8E4M3FN")
    fast = MatmulConfig.seeds(extents, "f8E4M3FN", "fast_accum")
    assert {c.block_k for c in fast} == {64, 128}
    assert [c for c in fast if c.block_k == 128] == precise
    assert [dataclasses.replace(c, block_k=128) for c in fast if c.block_k == 64] == precise
    assert fast[:2] == [precise[0], dataclasses.replace(precise[0], block_k=64)]
    assert fast[1] == MatmulConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8,
                                   num_stages=3, tma=True)
    # The precision means nothing to 16-bit seeds.
    assert MatmulConfig.seeds(extents, "f16", "ieee") == MatmulConfig.seeds(extents, "f16")


@pytest.mark.parametrize("precision,depths", [(None, {128}), ("fast_accum", {64, 128})])
def test_search_seeds_a_scaled_fp8_gemm_by_its_8bit_operands(precision, depths):
    """The fused kernel of an FP8 GEMM also reads its f32 scales; its seeds
    are still those of an 8-bit matmul of its precision, tried right after
    the default."""
    graph = scaled_fp8(4096, 4096, 4096, precision=precision)
    _, kernels = variant_space(_module_text(graph), "fp8_gemm", "default", 90)
    fused = [v for v in kernels.values() if v.kind == "matmul" and "kg.mul" in v.launch_text]
    assert fused
    extents = {"m": 4096, "n": 4096, "k": 4096}
    seeds = MatmulConfig.seeds(extents, "f8E4M3FN", precision)
    assert {c.block_k for c in seeds} == depths
    for kernel in fused:
        # The seeds, as many as the effort's 48 configs leave room for.
        tried = kernel.configs[1:1 + len(seeds)]
        assert len(tried) == min(len(seeds), 47) and tried == seeds[:len(tried)]


@pytest.mark.parametrize("m,n", [(1, 11008), (8, 11008), (16, 6144)])
def test_skinny_matmuls_are_seeded_with_deep_k_steps_and_no_split(m, n):
    extents = {"m": m, "n": n, "k": 4096}
    seeds = MatmulConfig.seeds(extents, "f16")
    assert [(c.block_n, c.block_k, c.num_stages) for c in seeds] == [
        (128, 128, 4), (64, 128, 4), (32, 128, 6)]
    for config in seeds:
        # No split: split_k = 1 where kgc would split, unset where it would not.
        assert config.split_k in (1, None)
        assert config._worth_trying(extents, "f16")
    # Too few weights to stream, or too many rows: not skinny.
    assert MatmulConfig.seeds({"m": 16, "n": 256, "k": 4096}, "f16") == []
    assert all(c.block_m >= 128 for c in MatmulConfig.seeds({"m": 2048, "n": n, "k": 4096}, "f16"))


def test_seeds_are_tried_right_after_the_default():
    extents = {"m": 4096, "n": 4096, "k": 4096}
    space = MatmulConfig.space(extents, "f16")
    seeds = MatmulConfig.seeds(extents, "f16")
    default = MatmulConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4,
                           num_stages=3)
    chosen = configs_to_try(default, space, 48, "signature", seeds)
    assert chosen[0] == default and chosen[1:1 + len(seeds)] == seeds


def _module_text(graph: kgc.Graph) -> str:
    return str(graph.build(ir.Context()))


def test_search_offers_tma_only_where_legal():
    # A bare GEMM this large defaults to a library call (kgc.tiling.library),
    # whose search space holds the Triton matmul's configs after it.
    def triton_configs(variants):
        (kernel,) = variants.values()
        configs = [c for c in kernel.configs if c.kind == "matmul"]
        assert configs
        return configs

    _, aligned = variant_space(_module_text(gemm(1024, 1024, 1024)), "gemm", "high", 90)
    assert any(c.tma for c in triton_configs(aligned))
    # K = 4097: A's rows are not 16-byte aligned.
    _, unaligned = variant_space(_module_text(gemm(1024, 4097, 1024)), "gemm", "high", 90)
    assert not any(c.tma for c in triton_configs(unaligned))
    # its seeds need tma
    assert not any(c.warp_specialize for c in triton_configs(unaligned))
    # Below sm_90 there is no TMA: the knob would be an error there.
    _, ampere = variant_space(_module_text(gemm(1024, 1024, 1024)), "gemm", "high", 80)
    assert not any(c.tma for c in triton_configs(ampere))


# -- FP8 with per-tensor scales -------------------------------------------------


@pytest.mark.parametrize("scalar_scales", [False, True])
@pytest.mark.parametrize("out", ["bf16", "f16"])
def test_scaled_fp8_matmul_is_one_kernel_with_an_f8_dot(out, scalar_scales):
    graph = scaled_fp8(1000, 512, 264, out, scalar_scales)
    _, result = compiled(graph, emit="cubin")
    (kernel,) = result.kernels.values()
    ttir = kernel.asm["ttir"]
    dots = [line for line in ttir.splitlines() if "tt.dot" in line]
    assert len(dots) == 1 and "f8E4M3FN" in dots[0], dots
    assert kernel.asm["cubin"]


def test_scaled_fp8_matmul_of_one_row_is_one_kernel():
    # The epilogue reads the [1, N] product through a broadcast map (its
    # one row read at 0), which reads the matmul's own elements.
    _, result = compiled(scaled_fp8(1, 512, 256))
    assert list(result.kernels) == ["fp8_gemm_0_matmul"]


def test_scaled_fp8_matmul_with_tma_compiles_for_sm90():
    graph = scaled_fp8(1000, 512, 272)
    _, result = compiled(graph, MatmulConfig(block_k=128, tma=True), emit="cubin")
    (kernel,) = result.kernels.values()
    assert kernel.asm["ttir"].count("tt.descriptor_load") == 2
    assert kernel.asm["cubin"]


@pytest.mark.parametrize("m", [1, 3, 17])
def test_scaled_fp8_matmul_runs_tiled_like_torch(m):
    graph = scaled_fp8(m, 96, 40)
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg")
    a, b, scale_a, scale_b = random_inputs(graph, seed=m)
    result = run_tiled(module, None, a, b, scale_a, scale_b)
    expected = ((a.float() @ b.float()) * scale_a * scale_b).to(torch.bfloat16)
    exact = (a.double() @ b.double()) * scale_a.double() * scale_b.double()
    reason = tensor_mismatch(result, expected, exact)
    assert reason is None, reason


def _dot_lines(kernel) -> list[str]:
    return [line for line in kernel.asm["ttir"].splitlines() if "tt.dot" in line]


def test_fast_accum_fp8_matmul_lowers_without_promotion_for_sm90():
    """Under fast_accum the 8-bit dot lets the tensor cores sum its whole k
    loop (maxNumImpreciseAcc 2^30, Triton's own default on sm_90); the
    precise one adds each 128-deep k step into f32. Nothing else differs."""
    config = MatmulConfig(block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=3)
    texts = {}
    for precision, products in ((None, 128), ("fast_accum", 2**30)):
        _, result = compiled(scaled_fp8(1000, 512, 264, precision=precision), config)
        (kernel,) = result.kernels.values()
        (dot,) = _dot_lines(kernel)
        assert f"maxNumImpreciseAcc = {products} : i32" in dot, dot
        assert "tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN>" in dot, dot
        texts[precision] = kernel.asm["ttir"]
    assert texts[None].replace("maxNumImpreciseAcc = 128 ", "maxNumImpreciseAcc = 1073741824 ") \
        == texts["fast_accum"]


def test_fast_accum_fp8_matmul_compiles_to_8bit_wgmma_without_promotion():
    """PTX for sm_90 (no GPU needed): both precisions run e4m3 wgmma; the
    precise kernel adds each k step's wgmma result into a separate f32
    accumulator (a 128x128 tile over 256 threads: 64 adds a step), the
    fast one lets wgmma accumulate in place and has none of those adds."""
    config = MatmulConfig(block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=3,
                          tma=True)
    adds = {}
    for precision in (None, "fast_accum"):
        _, result = compiled(scaled_fp8(1024, 1024, 1024, precision=precision), config,
                             emit="ptx")
        (kernel,) = result.kernels.values()
        ptx = kernel.asm["ptx"]
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx
        assert "mma.sync" not in ptx
        adds[precision] = sum(line.split()[0].startswith("add") and ".f32" in line.split()[0]
                              for line in ptx.splitlines() if line.split())
    assert adds[None] >= adds["fast_accum"] + 64, adds


@pytest.mark.parametrize("m", [1, 3, 17])
def test_fast_accum_fp8_matmul_runs_tiled_like_torch(m):
    """The CPU executor sums in f32 under fast_accum (a GPU sums the 8-bit
    products less exactly); shapes off every tile: K 1000, N 77."""
    graph = scaled_fp8(m, 1000, 77, precision="fast_accum")
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg")
        dots = [op for op in walk_ops(module.operation) if op.name == "kg.tile_dot"]
        assert dots and all(kg.Precision(ir.IntegerAttr(d.attributes["precision"]).value)
                            == kg.Precision.fast_accum for d in dots)
    a, b, scale_a, scale_b = random_inputs(graph, seed=m)
    result = run_tiled(module, None, a, b, scale_a, scale_b)
    expected = ((a.double() @ b.double()) * scale_a.double() * scale_b.double())
    assert result.dtype == torch.bfloat16 and result.shape == (m, 77)
    # f32 sums of exact products, then one rounding to bf16 (8 bits).
    torch.testing.assert_close(result.double(), expected, rtol=2**-8,
                               atol=1e-4 * expected.abs().max().item())


def test_fp8_dot_below_sm89_is_refused_clearly():
    with pytest.raises(kgc.KgcError, match=r"error: kg.matmul uses f8E4M3FN, which Triton "
                                           r"supports on sm_89 and newer; the target is sm_80"):
        compiled(scaled_fp8(64, 64, 64), target=80)


def test_c_export_of_a_tma_gemm_reserves_its_descriptor_scratch(tmp_path):
    from kgc.export import export_module

    graph = kgc.compile(gemm(256, 512, 256), target="sm_90",
                        config=config_for(gemm(256, 512, 256), MatmulConfig(tma=True)))
    (kernel,) = graph.module.kernels.values()
    per_program = kernel.artifact.metadata["global_scratch_size"]
    assert per_program >= 3 * 128
    exported = export_module(graph.module, tmp_path, "tma_gemm")
    programs = kernel.grid[0] * kernel.grid[1] * kernel.grid[2]
    # No intermediates: the workspace is the scratch of the kernel's programs.
    assert exported.workspace_bytes["gemm"] >= programs * per_program
    source = (tmp_path / "tma_gemm.c").read_text()
    assert "kgc_global_scratch = workspace +" in source


@pytest.mark.parametrize("tma_on", [False, True])
def test_scaled_fp8_matmul_uses_8bit_wgmma_on_sm90(tma_on):
    config = MatmulConfig(block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=3,
                          tma=True if tma_on else None)
    _, result = compiled(scaled_fp8(1024, 1024, 1024), config, emit="cubin")
    (kernel,) = result.kernels.values()
    assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in kernel.asm["ptx"]
    assert "mma.sync" not in kernel.asm["ptx"]


def test_scaled_fp8_matmul_compiles_for_sm89():
    _, result = compiled(scaled_fp8(256, 512, 256), emit="cubin", target=89)
    (kernel,) = result.kernels.values()
    assert "e4m3" in kernel.asm["ptx"] and kernel.asm["cubin"]


def test_kernels_with_global_scratch_get_it_from_torch_per_launch():
    from types import SimpleNamespace

    from kgc.runtime.internals import scratch_launch

    calls = []
    launcher = SimpleNamespace(global_scratch_size=384, global_scratch_align=128, num_ctas=1,
                               launch_cooperative_grid=False, launch_pdl=False,
                               launch=lambda *args: calls.append(args))
    # The device is where torch allocates: the CPU stands in for a GPU here.
    launch = scratch_launch(launcher, "handle", "cpu")
    launch(4, 2, 1, "stream", "packed", None, "enter", "exit", 0x1000, 0x2000)
    launch(4, 2, 1, "stream", "packed", None, "enter", "exit", 0x1000, 0x2000)
    (first, second) = calls
    assert first[:7] == (4, 2, 1, "stream", "handle", False, False)
    assert first[8:] == (None, "packed", None, "enter", "exit", 0x1000, 0x2000)
    assert isinstance(first[7], int) and first[7] != 0  # the scratch, fresh each launch
    with pytest.raises(kgc.KgcError, match="global scratch aligned to 1024 bytes"):
        scratch_launch(SimpleNamespace(**{**vars(launcher), "global_scratch_align": 1024}),
                        "handle", "cpu")


def test_flatten_of_a_persistent_matmul_flattens_its_tile_loop():
    # Triton fuses a loop with the loops nested in it: in a persistent
    # program the flag belongs on the tile loop, around the k loop.
    config = MatmulConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3,
                          tma=True, num_programs=PERSISTENT_PROGRAMS, flatten=True)
    _, result = compiled(gemm(4096, 512, 2048), config, emit="cubin")
    (kernel,) = result.kernels.values()
    loop_ends = [line.strip() for line in kernel.asm["ttir"].splitlines()
                 if line.strip().startswith("}")]
    assert "} {tt.flatten}" in loop_ends and loop_ends.count("} {tt.flatten}") == 1
    # Flattened: one loop left in Triton's GPU IR.
    assert kernel.asm["ttgir"].count("scf.for") == 1
