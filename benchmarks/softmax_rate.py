"""How fast a row softmax can stream on this GPU in Triton, beside kgc's.

    python benchmarks/softmax_rate.py [--rows 4096] [--cols 4096] [--json results.json]

`kgc bench`'s softmax (4096 x 4096 f16) reads and writes 32 MiB each; its
floor is those bytes at the device's best read rate. This puts kgc's
kernel next to hand-written Triton kernels moving the same bytes, timed
the way the bench times (inputs rotated out of L2, CUDA-graph replays):

* copy: the same bytes read and written with no arithmetic, 1-D blocks of
  4096 to 32768 elements, 4 to 16 warps: what streaming alone costs;
* row softmax, one row per program (kgc's shape of kernel), 4 to 16 warps;
* row softmax, persistent programs (a few per SM) each walking rows in a
  software-pipelined loop, so that the next rows load while this one is
  reduced (Triton's fused-softmax tutorial does this), 1 to 4 stages.

Each softmax is checked against torch first. The best time of each family
and kgc's are printed, with the rate they reach.
"""

from __future__ import annotations

import argparse
import itertools

import torch
import triton
import triton.language as tl

import kgc
from kgc.bench import provenance
from kgc.search.measure import input_sets, l2_bytes, time_rotated


@triton.jit
def _copy(x, y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    tl.store(y + offsets, tl.load(x + offsets, mask=inside), mask=inside)


@triton.jit
def _softmax_rows(x, y, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * cols
    lanes = tl.arange(0, BLOCK)
    values = tl.load(x + row + lanes, mask=lanes < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(values - tl.max(values, axis=0))
    tl.store(y + row + lanes, (e / tl.sum(e, axis=0)).to(y.dtype.element_ty), mask=lanes < cols)


@triton.jit
def _softmax_persistent(x, y, rows, cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    lanes = tl.arange(0, BLOCK)
    for r in tl.range(tl.program_id(0), rows, tl.num_programs(0), num_stages=STAGES):
        row = r.to(tl.int64) * cols
        values = tl.load(x + row + lanes, mask=lanes < cols, other=-float("inf")).to(tl.float32)
        e = tl.exp(values - tl.max(values, axis=0))
        tl.store(y + row + lanes, (e / tl.sum(e, axis=0)).to(y.dtype.element_ty),
                 mask=lanes < cols)


def _timed(launch, sets: list) -> float:
    return time_rotated(lambda i: launch(*sets[i]), len(sets))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    rows, cols = args.rows, args.cols
    nbytes = 2 * rows * cols * 2
    sets = [(torch.randn(rows, cols, device="cuda", dtype=torch.float16),
             torch.empty(rows, cols, device="cuda", dtype=torch.float16))
            for _ in range(input_sets(nbytes, l2_bytes()))]
    x0, y0 = sets[0]
    want = torch.softmax(x0.float(), dim=-1)
    block = triton.next_power_of_2(cols)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results: dict[str, list] = {"copy": [], "rows": [], "persistent": []}

    for size, warps in itertools.product((4096, 8192, 16384, 32768), (4, 8, 16)):
        n = rows * cols
        us = _timed(lambda x, y: _copy[(triton.cdiv(n, size),)](x, y, n, BLOCK=size,
                                                                 num_warps=warps), sets)
        results["copy"].append({"block": size, "warps": warps, "us": us})
    for warps in (4, 8, 16):
        _softmax_rows[(rows,)](x0, y0, cols, BLOCK=block, num_warps=warps)
        torch.testing.assert_close(y0.float(), want, atol=2e-3, rtol=2e-2)
        us = _timed(lambda x, y: _softmax_rows[(rows,)](x, y, cols, BLOCK=block,
                                                        num_warps=warps), sets)
        results["rows"].append({"warps": warps, "us": us})
    for per_sm, warps, stages in itertools.product((1, 2, 4, 8), (4, 8, 16), (1, 2, 3, 4)):
        programs = min(rows, per_sm * sms)
        try:
            _softmax_persistent[(programs,)](x0, y0, rows, cols, BLOCK=block, STAGES=stages,
                                             num_warps=warps)
        except Exception as error:  # out of shared memory for deep pipelines: not a contender
            print(f"persistent {per_sm}/SM, {warps} warps, {stages} stages: {error}".splitlines()[0])
            continue
        torch.testing.assert_close(y0.float(), want, atol=2e-3, rtol=2e-2)
        us = _timed(lambda x, y: _softmax_persistent[(programs,)](
            x, y, rows, cols, BLOCK=block, STAGES=stages, num_warps=warps), sets)
        results["persistent"].append({"programs_per_sm": per_sm, "warps": warps,
                                      "stages": stages, "us": us})

    graph = kgc.Graph("softmax")
    graph.output(graph.softmax(graph.input("x", (rows, cols), "f16"), -1))
    compiled = kgc.compile(graph)
    torch.testing.assert_close(compiled(x0).float(), want, atol=2e-3, rtol=2e-2)
    kgc_us = time_rotated(lambda i: compiled(sets[i][0]), len(sets))

    print(f"{rows} x {cols} f16, {nbytes / 2**20:.0f} MiB moved; {len(sets)} input sets")
    for family, entries in results.items():
        best = min(entries, key=lambda e: e["us"])
        print(f"  best {family:10} {best['us']:7.2f} us  {nbytes / best['us'] / 1e3:6.0f} GB/s  "
              f"{ {k: v for k, v in best.items() if k != 'us'} }")
    print(f"  kgc default     {kgc_us:7.2f} us  {nbytes / kgc_us / 1e3:6.0f} GB/s")
    if args.json:
        provenance.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                          "shape": [rows, cols], "results": results,
                                          "kgc_us": kgc_us}, indent=1)


if __name__ == "__main__":
    main()
