"""Timing a grid of matmul configs on product shapes, every config's time kept.

    python -m kgc.bench.config_grid --out grid.jsonl [--shard I/N] [--rows 1,5,12]
    python -m kgc.bench.config_grid --out grid.jsonl --grid large --rows 1000,4096 \
        --widths 4096x4096 [--workloads gemm-fp8,gemm-f16]

The search keeps the fastest config of each kernel; a heuristic, or a model
of the tuned-defaults table, needs to know how each config's time moves
with the shape. This runs superoptimize (`kgc.search`, kgc's heuristics
alone as the default) on products, adding a grid of configs to the
search's own, and writes one JSON line per shape with every candidate's
time: the heuristic's config, each grid config, the search's own picks and
the library call.

Two grids: `few-rows` (`GRID`: n tiles, k steps, splits along k; what a
skinny product's heuristic chooses) and `large` (`LARGE_TILES` x
`LARGE_DEPTHS` x `LARGE_LOADS`: tiles, warps, stages, k steps, TMA and
persistent programs; what a GEMM of many row tiles chooses, where cuBLAS
is the other candidate). `--kind lora` measures LoRA's products (x W +
(x A) B, rank `--rank`) at the rows and widths. `--workloads` measures kgc
bench's workloads (the FP8 GEMMs, whose graphs no shape kind builds)
instead of the shapes.

The shapes are the rows of `--rows` against the (n, k) of `--widths`; the
defaults take their widths from models whose widths no held-out shape has
(Llama-3.2 1B and 3B, Qwen2 0.5B and 1.5B; and the model suite's small
model, whose 512 -> 1024 the corpus has too), so that what is learnt from
the grid can be checked on the held-out shapes. It needs a CUDA device; without one it exits 1.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pathlib
import sys
from typing import Sequence

from kgc.diagnostics import KgcError

ROWS = (1, 5, 12, 20, 40, 80)
WIDTHS = ((2048, 2048), (8192, 2048), (2048, 8192), (3072, 3072), (8960, 1536), (896, 896),
          (4864, 896), (1024, 512))
# The knobs a skinny product's heuristic chooses; rows are left to kgc.
GRID = {"block_n": (16, 32, 64, 128), "block_k": (64, 128, 256), "split_k": (1, 2, 4, 8, 16)}


# A GEMM's tiles as (block_m, block_n, warps, stages): Triton's Hopper
# tutorial configs and the narrower ones beside them.
LARGE_TILES = ((128, 256, 8, 3), (256, 128, 8, 3), (128, 256, 8, 4), (128, 128, 8, 4),
               (128, 128, 4, 4), (128, 128, 4, 3), (64, 256, 4, 3), (64, 128, 4, 4))
LARGE_DEPTHS = (64, 128)
# How the k loop reads and the programs walk the tiles: plain, through TMA,
# persistent (one program per SM), both, and TMA with a warp-specialized loop.
LARGE_LOADS = ({}, {"tma": True}, {"persistent": True}, {"tma": True, "persistent": True},
               {"tma": True, "warp_specialize": True})
GRIDS = ("few-rows", "large")


def grid_configs(grid: str = "few-rows", sm_count: int = 132):
    """The configs of `grid`; persistent ones take `sm_count` programs."""
    from kgc.tiling.config import MatmulConfig

    if grid == "few-rows":
        return [MatmulConfig(num_warps=4, **dict(zip(GRID, values)))
                for values in itertools.product(*GRID.values())]
    configs = []
    for (block_m, block_n, warps, stages), block_k, loads in itertools.product(
            LARGE_TILES, LARGE_DEPTHS, LARGE_LOADS):
        knobs = {k: v for k, v in loads.items() if k != "persistent"}
        configs.append(MatmulConfig(
            block_m=block_m, block_n=block_n, block_k=block_k, group_m=8, num_warps=warps,
            num_stages=stages, num_programs=sm_count if loads.get("persistent") else None,
            **knobs))
    return configs


def measure(shape, profile_iters: int, verbose: bool, grid: str = "few-rows") -> dict:
    """One JSON-able record: `shape` (a tuned-defaults Shape or a kgc bench
    Workload) and each candidate the search timed."""
    from kgc.bench.tune_defaults import tuned_defaults_setting
    from kgc.search.tuner import superoptimize
    from kgc.targets import target_for

    configs = grid_configs(grid, target_for().sm_count)
    with tuned_defaults_setting("off"):
        graph = superoptimize(shape.build(), effort="low", configs={"matmul": configs},
                              cache=False, verbose=verbose, profile_iters=profile_iters)
    report = graph.report
    rows = [{"config": {k: v for k, v in row.config.items() if v is not None},
             "default": row.default, "status": row.status, "time_us": row.time_us}
            for row in report.rows if row.signature != "graph"]
    described = shape.to_dict() if hasattr(shape, "to_dict") else {"workload": shape.name}
    return {"shape": described, "grid": grid, "chosen_us": report.chosen_us,
            "default_us": report.default_us, "rows": rows}


def _parser(prog: str) -> argparse.ArgumentParser:
    from kgc.bench.tune_defaults import _shard_argument

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="JSON lines, one per shape (appended)")
    parser.add_argument("--rows", default=",".join(map(str, ROWS)))
    parser.add_argument("--widths", default=" ".join(f"{n}x{k}" for n, k in WIDTHS),
                        help="the (n, k) of each product, as NxK separated by spaces")
    parser.add_argument("--dtype", default="f16")
    parser.add_argument("--kind", choices=("matmul", "lora"), default="matmul",
                        help="plain products, or LoRA's (x W + (x A) B) of rank --rank")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--grid", choices=GRIDS, default="few-rows",
                        help="the configs added to the search's (see the module docstring)")
    parser.add_argument("--workloads", default=None,
                        help="comma-separated kgc bench workloads, measured instead of the "
                             "rows against the widths")
    parser.add_argument("--profile-iters", type=int, default=200)
    parser.add_argument("--shard", type=_shard_argument, default=None)
    parser.add_argument("--verbose", action="store_true")
    return parser


def shapes_of(rows: str, widths: str, dtype: str, kind: str = "matmul", rank: int = 16) -> list:
    from kgc.bench.tune_defaults import LORA, MATMUL, Shape

    try:
        counts = [int(r) for r in rows.split(",") if r.strip()]
        sizes = [tuple(int(v) for v in w.split("x")) for w in widths.split()]
    except ValueError:
        raise KgcError(f"--rows takes integers separated by commas and --widths NxK pairs, "
                       f"got {rows!r} and {widths!r}") from None
    if any(len(size) != 2 for size in sizes) or any(v < 1 for v in counts + [v for size in sizes for v in size]):
        raise KgcError(f"--widths takes NxK pairs of positive integers, got {widths!r}")
    if kind == LORA:
        if rank < 1:
            raise KgcError(f"--rank takes a positive integer, got {rank}")
        return [Shape.of(LORA, dtype, m=m, n=n, k=k, rank=rank) for (n, k) in sizes
                for m in counts]
    return [Shape.of(MATMUL, dtype, m=m, n=n, k=k) for (n, k) in sizes for m in counts]


def main(argv: Sequence[str] | None = None, prog: str = "python -m kgc.bench.config_grid") -> int:
    args = _parser(prog).parse_args(argv)
    try:
        if args.workloads is not None:
            from kgc.bench.workloads import select

            shapes = select([n.strip() for n in args.workloads.split(",") if n.strip()],
                            quick=False)
        else:
            shapes = shapes_of(args.rows, args.widths, args.dtype, args.kind, args.rank)
        if args.shard is not None:
            shapes = args.shard.of(shapes)
        from kgc.runtime import cuda_available

        if not cuda_available():
            raise KgcError("config_grid times kernels on a GPU: it needs a CUDA device, and "
                           "torch sees none")
        out = pathlib.Path(args.out)
        for index, shape in enumerate(shapes):
            record = measure(shape, args.profile_iters, args.verbose, args.grid)
            with out.open("a") as stream:
                stream.write(json.dumps(record) + "\n")
            print(f"[{index + 1}/{len(shapes)}] {shape.name}: default {record['default_us']} us, "
                  f"best {record['chosen_us']} us", flush=True)
        return 0
    except KgcError as error:
        print(error, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
