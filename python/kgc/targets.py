"""The GPUs kgc compiles for.

kgc's kernels need the tensor cores and asynchronous copies of sm_80
(Ampere) and newer; the ptxas that Triton 3.6 ships (CUDA 12.8) knows these
of them. Anything else would fail deep inside Triton, or compile for a GPU
that does not exist.
"""

from __future__ import annotations

SUPPORTED_SMS = (80, 86, 87, 89, 90, 100, 101, 120)
