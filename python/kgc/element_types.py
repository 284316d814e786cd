"""The element types of kg tensors and the torch dtypes that hold them.

MLIR spells them as its types print (`f32`, `f16`, `bf16`, `f8E4M3FN`,
`f8E5M2`); every layer that makes or checks torch tensors (the reference
interpreter, the CPU executor, the runtime, the search) maps them here.
"""

from __future__ import annotations

TORCH_DTYPE_NAMES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
}


def torch_dtype(element: str):
    """The torch dtype of the kg element type named `element`."""
    import torch

    return getattr(torch, TORCH_DTYPE_NAMES[element])
