"""Hopper GEMM and FP8 matmul: kgc against cuBLAS, torch.compile and _scaled_mm.

    python benchmarks/gemm.py [--size 4096] [--effort default] [--no-search] [--json out.json]

In one process on one GPU, for C = A @ B of size^3 in f16 and in bf16:
kgc's default compile, kgc after superoptimize (empty cache), kgc with a
handful of explicit matmul configs (TMA descriptors on and off, persistent
programs, 3 to 5 stages, 128x256x64 tiles with 8 warps, warp
specialization, a persistent tile loop flattened with its k loop), cuBLAS (torch.mm) and torch.compile max-autotune (no CUDA
graphs). Then FP8: A, B in float8_e4m3fn with per-tensor f32 scales and a
bf16 result, as one kgc kernel (scales in the epilogue; B row-major, and B
column-major read through a transpose) against torch._scaled_mm (which
takes B column-major).

Every contender is checked against torch first (f32 reference), then timed
with triton.testing.do_bench (median of many runs after warm-up; L2 cleared
between runs). Printed: time, TFLOP/s, and the ratio to the reference
(cuBLAS for f16/bf16, _scaled_mm for FP8; > 1 is faster).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch
import triton.testing

import kgc
from kgc.bench import provenance
from kgc.pipeline.config import GraphConfig
from kgc.targets import present_gpu, table_record
from kgc.tiling.config import MatmulConfig

# Persistent programs: one per SM of the GPU at hand (sm_90's without one).
PERSISTENT_PROGRAMS = (present_gpu() or table_record(90)).sm_count

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}

# Explicit configs of the matmul kernel: name -> knobs.
CONFIGS = {
    "128x128x64 w4 s3 (kgc's default tile)": MatmulConfig(
        block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3),
    "128x128x64 w4 s3 tma": MatmulConfig(
        block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=3, tma=True),
    "128x128x64 w4 s4 tma": MatmulConfig(
        block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, tma=True),
    "128x128x64 w8 s5 tma": MatmulConfig(
        block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=5, tma=True),
    "128x256x64 w8 s3": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3),
    "128x256x64 w8 s3 tma": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True),
    "128x256x64 w8 s4 tma": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=4, tma=True),
    "256x128x64 w8 s3 tma": MatmulConfig(
        block_m=256, block_n=128, block_k=64, num_warps=8, num_stages=3, tma=True),
    "128x256x64 w8 s3 tma persistent": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True,
        num_programs=PERSISTENT_PROGRAMS),
    "128x256x64 w8 s3 tma persistent flattened": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True,
        num_programs=PERSISTENT_PROGRAMS, flatten=True),
    "128x128x64 w4 s4 persistent": MatmulConfig(
        block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4,
        num_programs=PERSISTENT_PROGRAMS),
    "128x256x64 w8 s3 tma warp-specialized": MatmulConfig(
        block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, tma=True,
        warp_specialize=True),
}

FP8_CONFIGS = {
    "128x256x128 w8 s3 tma": MatmulConfig(
        block_m=128, block_n=256, block_k=128, num_warps=8, num_stages=3, tma=True),
    "128x128x128 w8 s4 tma": MatmulConfig(
        block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=4, tma=True),
    "128x256x128 w8 s3 tma persistent": MatmulConfig(
        block_m=128, block_n=256, block_k=128, num_warps=8, num_stages=3, tma=True,
        num_programs=PERSISTENT_PROGRAMS),
}


@dataclasses.dataclass
class Row:
    name: str
    us: float | None
    tflops: float | None = None
    ratio: float | None = None
    note: str = ""


def bench(fn) -> float:
    """Median microseconds of `fn()` (do_bench clears L2 between runs)."""
    return triton.testing.do_bench(fn, warmup=100, rep=1000, return_mode="median") * 1e3


def gemm_graph(size: int, dtype: str) -> kgc.Graph:
    g = kgc.Graph("gemm")
    a = g.input("a", (size, size), dtype)
    b = g.input("b", (size, size), dtype)
    g.output(g.matmul(a, b))
    return g


def fp8_graph(size: int, b_column_major: bool) -> kgc.Graph:
    """bf16(scale_a * scale_b * (A @ B)) with A, B in e4m3 and f32 scales;
    B given as [N, K] (column-major B) when `b_column_major`."""
    g = kgc.Graph("fp8_gemm")
    a = g.input("a", (size, size), "f8e4m3")
    b = g.input("b_t" if b_column_major else "b", (size, size), "f8e4m3")
    scale_a = g.input("scale_a", (1,), "f32")
    scale_b = g.input("scale_b", (1,), "f32")
    product = g.matmul(a, g.t(b) if b_column_major else b)
    g.output(g.cast(g.mul(g.mul(product, scale_a), scale_b), "bf16"))
    return g


def with_config(graph: kgc.Graph, config: MatmulConfig):
    """`graph` compiled with its one matmul kernel set to `config`."""
    default = kgc.compile(graph)
    (name,) = default.module.kernels
    return kgc.compile(graph, config=GraphConfig(graph.name, None, {name: config}))


def check(name: str, result: torch.Tensor, expected: torch.Tensor, tolerance: float) -> None:
    error = (result.float() - expected.float()).abs().max().item()
    scale = expected.float().abs().max().item()
    if not error <= tolerance * (1 + scale):
        raise SystemExit(f"{name}: max error {error:.3g} against torch (magnitude {scale:.3g})")


def run_rows(contenders, expected, flops: float, tolerance: float, reference: str) -> list[Row]:
    rows = []
    for name, make in contenders:
        try:
            fn = make()
            check(name, fn(), expected, tolerance)
            rows.append(Row(name, bench(fn)))
        except Exception as error:  # a config Triton or the GPU refuses: report it, go on
            rows.append(Row(name, None, note=f"{type(error).__name__}: {str(error)[:120]}"))
    base = next(r.us for r in rows if r.name == reference)
    for row in rows:
        if row.us is not None:
            row.tflops = flops / row.us / 1e6
            row.ratio = base / row.us
    return rows


def print_rows(title: str, rows: list[Row], reference: str) -> None:
    print(f"\n{title}  (ratio: {reference} time / time; > 1 is faster)")
    print(f"{'':48} {'us':>9} {'TFLOP/s':>8} {'ratio':>6}")
    for row in rows:
        if row.us is None:
            print(f"{row.name:48} {'failed':>9}  {row.note}")
        else:
            print(f"{row.name:48} {row.us:9.1f} {row.tflops:8.1f} {row.ratio:6.2f}x {row.note}")


def gemm_rows(size: int, dtype: str, effort: str | None) -> list[Row]:
    torch_dtype = DTYPES[dtype]
    a = torch.randn(size, size, device="cuda", dtype=torch_dtype)
    b = torch.randn(size, size, device="cuda", dtype=torch_dtype)
    expected = a.float() @ b.float()
    graph = gemm_graph(size, dtype)
    compiled_mm = torch.compile(torch.mm, mode="max-autotune-no-cudagraphs")

    def searched():
        started = time.perf_counter()
        best = kgc.superoptimize(graph, effort=effort, cache=False, verbose=False)
        chosen = best.config.to_json() if best.config is not None else "kgc's default"
        print(f"  [{dtype}] superoptimize: {time.perf_counter() - started:.1f} s, chose {chosen}")
        return lambda: best(a, b)

    def kgc_with(config):
        return lambda: (lambda compiled: lambda: compiled(a, b))(with_config(graph, config))

    contenders = [("cuBLAS (torch.mm)", lambda: lambda: torch.mm(a, b)),
                  ("torch.compile max-autotune-no-cudagraphs", lambda: lambda: compiled_mm(a, b)),
                  ("kgc default", lambda: (lambda g: lambda: g(a, b))(kgc.compile(graph)))]
    if effort is not None:
        contenders.append((f"kgc superoptimize ({effort})", searched))
    contenders += [(f"kgc {name}", kgc_with(config)) for name, config in CONFIGS.items()]
    return run_rows(contenders, expected, 2.0 * size ** 3, 2e-2, "cuBLAS (torch.mm)")


def fp8_rows(size: int) -> list[Row]:
    e4m3 = torch.float8_e4m3fn
    a = (torch.randn(size, size, device="cuda") / 4).to(e4m3)
    b_t = (torch.randn(size, size, device="cuda") / 4).to(e4m3)  # B column-major: B^T row-major
    b = b_t.t().contiguous()
    scale_a = torch.full((1,), 0.75, device="cuda")
    scale_b = torch.full((1,), 1.25, device="cuda")
    expected = (a.float() @ b.float()) * scale_a * scale_b
    row_major, column_major = fp8_graph(size, False), fp8_graph(size, True)

    def scaled_mm():
        return torch._scaled_mm(a, b_t.t(), scale_a=scale_a, scale_b=scale_b,
                                out_dtype=torch.bfloat16)

    def kgc_graph(graph, config=None, column=False):
        def make():
            compiled = kgc.compile(graph) if config is None else with_config(graph, config)
            operand = b_t if column else b
            return lambda: compiled(a, operand, scale_a, scale_b)
        return make

    contenders = [("torch._scaled_mm (B column-major)", lambda: scaled_mm),
                  ("kgc default, B row-major", kgc_graph(row_major)),
                  ("kgc default, B column-major", kgc_graph(column_major, column=True))]
    for name, config in FP8_CONFIGS.items():
        contenders.append((f"kgc {name}, B row-major", kgc_graph(row_major, config)))
        contenders.append((f"kgc {name}, B column-major",
                           kgc_graph(column_major, config, column=True)))
    return run_rows(contenders, expected, 2.0 * size ** 3, 3e-2,
                    "torch._scaled_mm (B column-major)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--effort", default="default", choices=("low", "default", "high"))
    parser.add_argument("--no-search", action="store_true", help="skip superoptimize")
    parser.add_argument("--json", help="write the numbers here")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"{torch.cuda.get_device_name()}, M = N = K = {args.size}")
    results = {}
    for dtype in DTYPES:
        rows = gemm_rows(args.size, dtype, None if args.no_search else args.effort)
        print_rows(f"GEMM {dtype}", rows, "cuBLAS (torch.mm)")
        results[dtype] = [dataclasses.asdict(r) for r in rows]
    rows = fp8_rows(args.size)
    print_rows("FP8 e4m3 -> bf16, per-tensor scales", rows, "torch._scaled_mm (B column-major)")
    results["fp8"] = [dataclasses.asdict(r) for r in rows]
    if args.json:
        provenance.write_json(args.json, results)


if __name__ == "__main__":
    main()
