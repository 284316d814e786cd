"""Numbers that kernel graphs read as 0-d tensors on their device, made
once per value.

A kernel graph reads a host scalar (a Python float Dynamo passes as a 0-d
CPU tensor: a norm's eps, a rotary embedding's scaling) and a size read
as a value (`x + x.shape[0]`) as a 0-d tensor on its device. Made afresh,
each is a fill kernel launched per number per call: thirteen per decode
step of the Llama-3-8B-shaped layers, host time every step pays.
`device_scalar` hands out the tensor made for a value before.

Sharing is safe because nothing writes these tensors: kernel graphs only
read their arguments, and a partition that returns an argument as it is
passes it to other kernel graphs only (a host scalar's conversion is
taken into kgc only where kgc ops alone read it). A tensor is never kept
while a CUDA graph is captured: its fill would run only at replay.
"""

from __future__ import annotations

import threading

import torch

__all__ = ["device_scalar"]

# Values kept per process; past this, the oldest go (a size read as a value
# takes a new one each decode step).
MAX_KEPT = 1024

_KEPT: dict[tuple, torch.Tensor] = {}
_LOCK = threading.Lock()


def device_scalar(value, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A 0-d tensor of `value` in `dtype` on `device`, for reading only."""
    # float.hex tells -0.0 from 0.0 and gives NaN one key.
    key = (value.hex() if isinstance(value, float) else int(value), dtype, device)
    kept = _KEPT.get(key)
    if kept is not None:
        return kept
    tensor = torch.full((), value, dtype=dtype, device=device)
    if torch.device(device).type == "cuda" and torch.cuda.is_current_stream_capturing():
        return tensor
    with _LOCK:
        _KEPT[key] = tensor
        while len(_KEPT) > MAX_KEPT:
            del _KEPT[next(iter(_KEPT))]
    return tensor
