"""Checking a candidate's results against torch before it may be chosen.

Every candidate runs on fresh random inputs (never zeros), and its results
are compared with two evaluations of the same graph by
`kgc.reference.evaluate`: op by op as eager PyTorch would (each result
rounded to its dtype) and exactly in f64. The rule is `kgc.accuracy`'s,
the one kgc's tests and the bench use: element by element within twice
eager's largest error plus a few units of the dtype's roundoff relative to
the element and to the result's largest magnitude; inf or NaN only where
the exact result has them; integers and booleans exact. So a candidate is
held to what the reference framework itself achieves, whatever the dtype
and the length of its reductions, and a wrong index, mask or reduction, or
a result of zeros for a small-valued output, cannot pass. Integer and
boolean random inputs are small non-zero integers of either sign and fair
coin flips, but indices into a table, which lie inside it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

# The check of a candidate's results is the rule tests and the bench use.
from kgc.accuracy import mismatch  # noqa: F401


def random_inputs(specs: Sequence[tuple[tuple[int, ...], str]], seed: int, device,
                  bounds: Mapping[int, int] | None = None):
    """Fresh random tensors for (shape, kg element type) specs, scaled to
    keep long reductions in range; never zeros, but for the integer inputs
    that `bounds` (position -> extent, `kernels.index_bounds`) says index a
    table, which take every index in [0, extent) with equal chance."""
    import torch

    from kgc.element_types import torch_dtype

    generator = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for position, (shape, element) in enumerate(specs):
        if element == "i1":
            values = torch.rand(shape, generator=generator) < 0.5
        elif element in ("i32", "i64") and bounds and position in bounds:
            values = torch.randint(0, bounds[position], shape, generator=generator)
        elif element in ("i32", "i64"):
            # Small and never zero, so that products, positions and
            # comparisons of them stay meaningful.
            values = torch.randint(1, 64, shape, generator=generator)
            values = values * (torch.randint(0, 2, shape, generator=generator) * 2 - 1)
        else:
            values = torch.randn(shape, generator=generator, dtype=torch.float32) * 0.5
        tensors.append(values.to(torch_dtype(element)).to(device))
    return tensors
