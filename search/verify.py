"""Checking a candidate's results against torch before it may be chosen.

Every candidate runs on fresh random inputs (never zeros), and its results
are compared with two evaluations of the same graph by
`kgc.reference.evaluate`: op by op as eager PyTorch would (each result
rounded to its dtype) and exactly in f64. A candidate passes when its
largest error to the exact result is at most twice eager PyTorch's plus a
floor of a few units of the dtype's precision, and it gives inf or NaN
only where the exact result has them. So a candidate is held to what the
reference framework itself achieves, whatever the dtype and the length of
its reductions, and a wrong index, mask or reduction cannot pass. Integer
and boolean results (i32, i64, i1) must equal the reference exactly;
their random inputs are small non-zero integers of either sign and fair
coin flips.
"""

from __future__ import annotations

from typing import Sequence

# Relative floor per dtype: a few units in the last place of its precision.
_FLOOR = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2,
          "float8_e4m3fn": 1.5e-1, "float8_e5m2": 3e-1}


def random_inputs(specs: Sequence[tuple[tuple[int, ...], str]], seed: int, device):
    """Fresh random tensors for (shape, kg element type) specs, scaled to
    keep long reductions in range; never zeros."""
    import torch

    from kgc.element_types import torch_dtype

    generator = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for shape, element in specs:
        if element == "i1":
            values = torch.rand(shape, generator=generator) < 0.5
        elif element in ("i32", "i64"):
            # Small and never zero, so that products, positions and
            # comparisons of them stay meaningful.
            values = torch.randint(1, 64, shape, generator=generator)
            values = values * (torch.randint(0, 2, shape, generator=generator) * 2 - 1)
        else:
            values = torch.randn(shape, generator=generator, dtype=torch.float32) * 0.5
        tensors.append(values.to(torch_dtype(element)).to(device))
    return tensors


def mismatch(results: Sequence, eager: Sequence, exact: Sequence) -> str | None:
    """Why `results` are wrong against the reference, or None when they
    pass (see the module docstring)."""
    import torch

    if len(results) != len(exact) or len(eager) != len(exact):
        return f"{len(results)} results, the reference has {len(exact)}"
    for index, (got, rounded, ideal) in enumerate(zip(results, eager, exact, strict=True)):
        if tuple(got.shape) != tuple(ideal.shape):
            return f"result #{index} has shape {tuple(got.shape)}, expected {tuple(ideal.shape)}"
        if got.dtype != rounded.dtype:
            return f"result #{index} is {got.dtype}, expected {rounded.dtype}"
        if not got.dtype.is_floating_point:
            # Integers and booleans have one right answer.
            wrong = (got.to(ideal.device) != ideal.to(got.dtype)).sum().item()
            if wrong:
                return f"result #{index} differs from the reference in {wrong} elements"
            continue
        # The exact reference may live elsewhere (large graphs are evaluated
        # on the CPU); compare where it is.
        got, rounded = got.to(ideal.device).double(), rounded.to(ideal.device)
        finite = torch.isfinite(ideal)
        if not torch.isfinite(got[finite]).all():
            return f"result #{index} has inf or NaN where the reference is finite"
        if not finite.any():
            continue
        ideal = ideal[finite]
        ours = (got[finite] - ideal).abs().max().item()
        theirs = (rounded.double()[finite] - ideal).abs().max().item()
        floor = _FLOOR[str(rounded.dtype).removeprefix("torch.")] * (1 + ideal.abs().max().item())
        if ours > 2 * theirs + floor:
            return (f"result #{index} is off by {ours:.3g}; eager PyTorch is off by {theirs:.3g} "
                    f"(allowed: {2 * theirs + floor:.3g})")
    return None
