"""Bulk tensor copies (TMA): which tile accesses may use them, and how.

Hopper's tensor memory accelerator copies a box of a strided tensor
between global and shared memory on its own, filling the lanes outside
the tensor with zeros on a load and dropping them on a store. Triton
reaches it through tensor descriptors (`tt.make_tensor_descriptor`,
`tt.descriptor_load`, `tt.descriptor_store`); kgc's matmul kernels use
them for the operand tiles of their k loop, and for their results, when
the config's `tma` knob is on.

A descriptor describes the dimensions of a buffer view that have a
nonzero stride (a broadcast dimension has none to describe), ordered from
the largest stride to the smallest. What the hardware and Triton take:

* at most 5 dimensions;
* the last one of unit stride (a transposed operand is read in its own
  order and transposed in registers);
* every other stride, and the view's offset, a multiple of 16 bytes (the
  buffers themselves are 16-byte aligned: kgc's runtime and export see to
  it);
* a box of at most 256 lanes per dimension, and at least 16 bytes along
  the last one.

`refusal` says why a view cannot be read that way (None when it can);
`layout` gives the dimensions of its descriptor.
"""

from __future__ import annotations

from typing import Sequence

from kgc.tiling.index_maps import BufferView, next_power_of_two

# Rules of the hardware's tensor maps, as Triton 3.6 checks them.
ALIGNMENT_BYTES = 16
MAX_RANK = 5
MAX_BOX = 256


def element_bytes(element: str) -> int:
    return {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4}.get(element, 1)


def layout(strides: Sequence[int]) -> list[int]:
    """The axes of a view that its descriptor describes, outermost first:
    those of nonzero stride, by stride from the largest (ties in axis
    order)."""
    axes = [a for a, stride in enumerate(strides) if stride != 0]
    return sorted(axes, key=lambda a: (-strides[a], a))


def refusal(view: BufferView, element: str, box: Sequence[int]) -> str | None:
    """Why a tile of `box` lanes (one per axis of `view`; sizes before
    padding) of `view` cannot be copied by TMA, or None when it can."""
    width = element_bytes(element)
    axes = layout(view.strides)
    if not axes:
        return "it reads a single broadcast element"
    if len(axes) > MAX_RANK:
        return f"it spans {len(axes)} strided dimensions (TMA takes at most {MAX_RANK})"
    innermost = axes[-1]
    if view.strides[innermost] != 1:
        return (f"no dimension is contiguous (the smallest stride is "
                f"{view.strides[innermost]} elements)")
    for axis in axes[:-1]:
        stride_bytes = view.strides[axis] * width
        if stride_bytes % ALIGNMENT_BYTES:
            return (f"its stride along axis {axis} is {view.strides[axis]} elements of {element}, "
                    f"{stride_bytes} bytes, not a multiple of {ALIGNMENT_BYTES}")
    if view.offset * width % ALIGNMENT_BYTES:
        return (f"it starts {view.offset} elements ({view.offset * width} bytes) into its "
                f"buffer, not a multiple of {ALIGNMENT_BYTES} bytes")
    for axis in axes:
        lanes = next_power_of_two(box[axis])
        if lanes > MAX_BOX:
            return f"its tile has {lanes} lanes along axis {axis} (TMA copies at most {MAX_BOX})"
    inner_bytes = next_power_of_two(box[innermost]) * width
    if inner_bytes < ALIGNMENT_BYTES:
        return (f"its tile is {inner_bytes} bytes wide along its contiguous axis (TMA needs at "
                f"least {ALIGNMENT_BYTES})")
    return None
