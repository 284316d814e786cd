"""Host and GPU time of causal attention's forward and backward per SDPA backend.

    python benchmarks/attention_backends.py [--shapes 4x8x256x64,1x32x512x128]

For each shape (batch x heads x tokens x head_dim, bf16) and each of
torch's fused backends (cuDNN, flash, memory-efficient), forced with
`torch.nn.attention.sdpa_kernel`: the GPU time of the kernels of one
forward and backward (torch's profiler, 20 calls), and the host time of
the forward call and of the forward plus the backward through autograd
(`time.perf_counter`, medians over 100 calls, the GPU synchronized after
each). A training step that leaves attention to PyTorch pays that host
time in every layer; the shapes are the model suite's training rows and
the Llama-3-8B-shaped layers'.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

BACKENDS = (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
            SDPBackend.EFFICIENT_ATTENTION)
WARMUP, TIMED, PROFILED = 10, 100, 20


def _measure(shape, backend) -> str:
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)

    def call():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        started = time.perf_counter()
        out.backward(grad)
        return started

    with sdpa_kernel([backend]):
        for _ in range(WARMUP):
            call()
        torch.cuda.synchronize()
        forwards, both = [], []
        for _ in range(TIMED):
            started = time.perf_counter()
            backward_started = call()
            ended = time.perf_counter()
            torch.cuda.synchronize()
            forwards.append(backward_started - started)
            both.append(ended - started)
        with profile(activities=[ProfilerActivity.CUDA]) as profiler:
            for _ in range(PROFILED):
                call()
            torch.cuda.synchronize()
    kernels = sum(event.device_time_total for event in profiler.key_averages()
                  if event.device_type == torch.autograd.DeviceType.CUDA) / PROFILED
    # The backward's start includes building the output; close enough to
    # the forward's own time for a comparison between backends.
    return (f"kernels {kernels:.1f} us, host forward {statistics.median(forwards) * 1e6:.1f} us, "
            f"host forward+backward {statistics.median(both) * 1e6:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", default="4x8x256x64,1x32x512x128",
                        help="batch x heads x tokens x head_dim, comma-separated")
    args = parser.parse_args()
    for text in args.shapes.split(","):
        shape = tuple(int(n) for n in text.split("x"))
        for backend in BACKENDS:
            try:
                print(text, backend.name, _measure(shape, backend))
            except RuntimeError as error:  # a backend this GPU or shape does not take
                print(text, backend.name, "not available:", str(error).splitlines()[0][:150])


if __name__ == "__main__":
    main()
