"""How fast one GPU can stream a decoder's weights: the floor under a one-token forward.

    python benchmarks/weight_streaming.py [MODEL] [--reference-us US] [--target 1.2]

At one token every projection of a decoder is a matrix-vector product: its
time is the time to read the weight. For each distinct weight of MODEL
(a decoder of the model suite, default the 8B-shaped layers, f16) this
times, as replays of a CUDA graph (triton.testing.do_bench_cudagraph,
median after warm-up: no launch gaps, which would dominate a 10-us kernel):

    library   the product through torch (cuBLAS), 1 x K against N x K
    read      a plain read of the same bytes (torch.sum of the weight, f32
              accumulation)

and prints the bandwidth each reaches. Small weights stream below the card's
rate (a kernel's ramp-up and tail are a larger share of its time), so the
forward's floor is taken two ways: each weight at its own best rate, and
every weight at the best rate seen on any of them (what a forward could
reach only if all its reads ran as one stream). Each graph runs over enough copies
of the weight to exceed four times the L2 cache, so that every read comes
from memory, as in a forward, where each weight is read once. From the best rate per weight it
gives the forward's floor: the time to read every weight once (each counted
as often as the model has layers, the vocabulary projection once), with no
other kernel at all. With `--reference-us` (another backend's GPU time per
forward, from `kgc bench` or benchmarks/model_kernels.py) it also prints the
largest speedup over that reference the floor allows, and the rate every
weight would need for `--target`.
"""

from __future__ import annotations

import argparse
import collections

import torch
import torch.nn.functional as F
import triton.testing

from kgc.bench import models


def _weights(model) -> list[tuple[str, tuple[int, int], int]]:
    """(name, (N, K), how many times a forward reads it) for each distinct
    weight shape of the model's linear layers."""
    names: dict[tuple[int, int], dict[str, None]] = {}  # names in order, once each
    counts: collections.Counter = collections.Counter()
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            shape = tuple(module.weight.shape)
            names.setdefault(shape, {})[name.rsplit(".", 1)[-1]] = None
            counts[shape] += 1
    return [("/".join(names[shape]), shape, counts[shape]) for shape in names]


def _per_copy(run, copies: int) -> float:
    """Milliseconds per copy of one CUDA-graph replay of `run`."""
    return triton.testing.do_bench_cudagraph(run, return_mode="median") / copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="llama3-8b-layers")
    parser.add_argument("--reference-us", type=float, default=None)
    parser.add_argument("--target", type=float, default=1.2)
    args = parser.parse_args()

    with torch.device("meta"):
        shapes = _weights(models.CATALOGUE[args.model].build(models.GPU))
    print(f"# {torch.cuda.get_device_name()}, {args.model}, f16; CUDA-graph replays, medians")
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    floor_us = 0.0
    total_bytes = 0
    best_rate = 0.0  # bytes per us
    for name, (n, k), count in shapes:
        size = n * k * 2
        copies = max(2, -(-4 * l2_bytes // size))
        weights = [torch.randn(n, k, device="cuda", dtype=torch.float16) for _ in range(copies)]
        x = torch.randn(1, k, device="cuda", dtype=torch.float16)
        library_ms = _per_copy(lambda: [F.linear(x, w) for w in weights], copies)
        read_ms = _per_copy(lambda: [w.sum(dtype=torch.float32) for w in weights], copies)
        best_us = min(library_ms, read_ms) * 1e3
        floor_us += best_us * count
        best_rate = max(best_rate, size / best_us)
        total_bytes += size * count
        print(f"{name:>18} {n}x{k} x{count}: {size / 2**20:7.1f} MiB  "
              f"library {library_ms * 1e3:7.1f} us ({size / library_ms / 1e9:5.2f} TB/s)  "
              f"read {read_ms * 1e3:7.1f} us ({size / read_ms / 1e9:5.2f} TB/s)")
        del weights
    print(f"forward reads {total_bytes / 1e9:.3f} GB of weights; floor at the best rate per "
          f"weight: {floor_us:.1f} us ({total_bytes / floor_us / 1e6:.2f} TB/s); every weight "
          f"at the best rate seen ({best_rate / 1e6:.2f} TB/s): {total_bytes / best_rate:.1f} us")
    if args.reference_us:
        needed_us = args.reference_us / args.target
        print(f"reference {args.reference_us:.1f} us: these floors allow at most "
              f"{args.reference_us / floor_us:.3f}x and {args.reference_us * best_rate / total_bytes:.3f}x; "
              f"{args.target}x means {needed_us:.1f} us for everything, the weights read at "
              f"{total_bytes / needed_us / 1e6:.2f} TB/s even with no other kernel")


if __name__ == "__main__":
    main()
