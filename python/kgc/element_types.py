"""The element types of kg tensors and the torch dtypes that hold them.

MLIR spells them as its types print (`f32`, `f16`, `bf16`, `f8E4M3FN`,
`f8E5M2`, `i1`, `i32`, `i64`); every layer that makes or checks torch tensors (the reference
interpreter, the CPU executor, the runtime, the search) maps them here.
"""

from __future__ import annotations

TORCH_DTYPE_NAMES = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "f8E4M3FN": "float8_e4m3fn",
    "f8E5M2": "float8_e5m2",
    "i1": "bool",
    "i32": "int32",
    "i64": "int64",
}

# The 16-bit floats, which kg computes in f32 and rounds back to
# (kg-decompose), and which widen to f32 exactly.
HALF_FLOATS = ("f16", "bf16")

# Bytes per element in memory (i1 is a byte, as torch.bool).
ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f8E4M3FN": 1, "f8E5M2": 1,
                 "i1": 1, "i32": 4, "i64": 8}


def element_bits(element: str) -> int:
    """Bits per element of the kg element type named `element` in memory
    (8 for i1, stored as a byte); ValueError for a name that is none."""
    size = ELEMENT_BYTES.get(element)
    if size is None:
        raise ValueError(f"'{element}' is not a kg element type (have: "
                         f"{', '.join(ELEMENT_BYTES)})")
    return size * 8


_FLOAT8 = ("f8E4M3FN", "f8E5M2")
# The integer types by the bits of their values (i1 holds 0 and 1).
INTEGER_BITS = {"i1": 1, "i32": 32, "i64": 64}


def widens_exactly(source: str, target: str) -> bool:
    """Whether a cast from element type `source` to `target` keeps every
    value and takes more bits of memory: a 16- or 8-bit float to f32, an
    integer to a wider one."""
    if target == "f32":
        return source in HALF_FLOATS + _FLOAT8
    return source in INTEGER_BITS and target in INTEGER_BITS and \
        INTEGER_BITS[source] < INTEGER_BITS[target]


def poison(dtype) -> float | int | bool:
    """What a result buffer of torch `dtype` holds before a kernel writes
    it, so that an element no kernel writes shows: NaN for floats (the
    8-bit floats' own NaN), the most negative value for integers, True for
    booleans."""
    import torch

    if dtype.is_floating_point:
        return float("nan")
    return True if dtype == torch.bool else torch.iinfo(dtype).min


def is_integer(element: str) -> bool:
    """Whether the kg element type named `element` is an integer or i1,
    whose results compare exactly."""
    return element in ("i1", "i32", "i64")


def torch_dtype(element: str):
    """The torch dtype of the kg element type named `element`."""
    import torch

    return getattr(torch, TORCH_DTYPE_NAMES[element])
