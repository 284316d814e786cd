"""How close a computed result must be to count as right: the one rule that
kgc's tests, the search's check of every candidate (`kgc.search.verify`)
and the bench's check (`kgc.bench.check`) hold results to.

A result is judged against two evaluations of the same graph on the same
inputs (`kgc.reference.evaluate`): `eager`, op by op as eager PyTorch
would (each op's result rounded to its dtype), and `exact`, op by op in
f64 without rounding. Element by element, a floating-point result `got`
must satisfy

    |got - exact| <= 2 * eager_error + RELATIVE[dtype] * |exact|
                                      + FLOOR[dtype] * max|exact|

where `eager_error` is eager's largest error, max |eager - exact|, over
the whole result, and max|exact| is the largest magnitude of the exact
result. Each term has one job:

- `2 * eager_error` is what the problem itself costs in this precision:
  long reductions, cancellation, intermediates rounded to half floats. A
  kernel that sums in another order, splits K, or keeps an intermediate in
  f32 where eager rounds it, is wrong by about as much as eager is, not
  more than twice as much. It is absolute (one number for the result)
  because rounding errors of sums do not shrink with the element's value.
- `RELATIVE * |exact|` is the element's own rounding: `got` is rounded to
  its dtype once more than the exact value is (at most u, the unit
  roundoff, relative), may be rounded to the other neighbour of a value
  near the midpoint (another u), and may carry one intermediate rounded
  differently from eager's (u again). Four units of roundoff cover this:
  f16 2e-3 (4 x 2^-11) and bf16 1.6e-2 (4 x 2^-8). For f32, whose
  roundoff is far below what reductions cost, it is 1e-5 (about 2^-17):
  the relative error of summing ten thousand terms in another order
  (about u * sqrt(n)), while TF32's rounding of a product's operands
  (2^-11, 50 times more) stays out. The 8-bit floats keep 0.15 (e4m3,
  2.4 x 2^-4) and 0.3 (e5m2, 2.4 x 2^-3): a rounding and a neighbour.
- `FLOOR * max|exact|` is an absolute slack for elements near zero, whose
  error comes from the magnitudes around them (a sum that cancels), in
  case eager happened to be more accurate there than another legitimate
  order is; it is as large as RELATIVE, but relative to the result's own
  scale. It replaces the former `floor * (1 + max|exact|)`, whose `1 +`
  made it an absolute 2e-3 (f16) or 2e-2 (bf16) that dwarfed results of
  small magnitude: a softmax over 32768 columns (values about 3e-5), an
  attention output (about 0.03), which then passed as all zeros, as a
  uniform 1/N, or as 0.9 times the answer.

So an all-zero or uniform result fails wherever the exact one differs
from it by more than a few units of roundoff of its largest element, and
a result scaled by 0.9 fails unless eager itself is off by more than 3 %
of the largest element (f16, bf16; the 8-bit floats cannot tell 0.9x apart).

Where `exact` is inf or NaN, or too large for the dtype (it rounds to
inf), nothing about the element is required. Elsewhere `got` must be
finite. Elements where eager overflowed (inf where the exact result fits)
do not count in `eager_error`, so that one overflow in eager does not
excuse every other element. Integer and boolean results have one right
answer: they must equal `exact` exactly.
"""

from __future__ import annotations

from typing import Sequence

# Per-element relative slack, and the floor relative to the result's
# largest magnitude (see the module docstring for each number; f64 results,
# rare, are held to a few thousand units of their roundoff).
RELATIVE = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2,
            "float8_e4m3fn": 0.15, "float8_e5m2": 0.3}
FLOOR = RELATIVE
# How many times eager's largest error a result may be off by.
EAGER_FACTOR = 2.0


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def allowed_error(eager, exact):
    """The largest error each element of a result may have (a float64
    tensor shaped like `exact`, inf where nothing is required), for a
    result of `eager`'s floating-point dtype."""
    import torch

    name = _dtype_name(eager.dtype)
    ideal = exact.to(torch.float64)
    # An exact value too large for the dtype rounds to inf: nothing is
    # required of it.
    # (Through f64: torch has no isfinite of 8-bit floats.)
    checked = torch.isfinite(ideal) & torch.isfinite(ideal.to(eager.dtype).to(torch.float64))
    bound = torch.full_like(ideal, float("inf"))
    if not checked.any():
        return bound
    scale = ideal[checked].abs().max().item()
    bound[checked] = (EAGER_FACTOR * _eager_error(eager, ideal, checked) + RELATIVE[name] * ideal[checked].abs()
                      + FLOOR[name] * scale)
    return bound


def _eager_error(eager, ideal, checked) -> float:
    """Eager's largest error over the `checked` elements where it is
    finite."""
    import torch

    eager = eager.to(ideal.device).to(torch.float64)
    counted = checked & torch.isfinite(eager)
    return (eager[counted] - ideal[counted]).abs().max().item() if counted.any() else 0.0


def tensor_mismatch(got, eager, exact, label: str = "the result") -> str | None:
    """Why the tensor `got` is wrong against `eager` and `exact` (see the
    module docstring), or None when it passes; `label` names it in the
    reason."""
    import torch

    if tuple(got.shape) != tuple(exact.shape):
        return f"{label} has shape {tuple(got.shape)}, expected {tuple(exact.shape)}"
    if got.dtype != eager.dtype:
        return f"{label} is {got.dtype}, expected {eager.dtype}"
    if not got.dtype.is_floating_point:
        wrong = (got.to(exact.device) != exact.to(got.dtype)).sum().item()
        return f"{label} differs from the reference in {wrong} elements" if wrong else None
    ideal = exact.to(torch.float64)
    value = got.to(ideal.device).to(torch.float64)
    bound = allowed_error(eager, ideal)
    required = torch.isfinite(bound)
    if not torch.isfinite(value[required]).all():
        return f"{label} has inf or NaN where the reference is finite"
    if not required.any():
        return None
    error = torch.where(required, (value - ideal).abs(), torch.zeros_like(ideal))
    bound = torch.where(required, bound, torch.ones_like(ideal))
    over = error > bound
    if not over.any():
        return None
    # Name the element furthest outside its bound (relative to the bound).
    worst = torch.where(over, error / bound.clamp_min(torch.finfo(torch.float64).tiny),
                        torch.zeros_like(ideal)).flatten().argmax().item()
    where = list(torch.unravel_index(torch.tensor(worst), ideal.shape)) if ideal.dim() else []
    position = "[" + ", ".join(str(int(i)) for i in where) + "]"
    eager_error = _eager_error(eager, ideal, required)
    flat = ideal.flatten()
    return (f"{label} is off by {error.flatten()[worst].item():.3g} at {position} "
            f"(got {value.flatten()[worst].item():.4g}, exact {flat[worst].item():.4g}, "
            f"allowed {bound.flatten()[worst].item():.3g}); {over.sum().item()} of "
            f"{ideal.numel()} elements are outside their bound; eager PyTorch is off by "
            f"at most {eager_error:.3g}, the largest exact magnitude is "
            f"{ideal[required].abs().max().item():.3g}")


def mismatch(results: Sequence, eager: Sequence, exact: Sequence) -> str | None:
    """Why `results` (a sequence of tensors) are wrong against the matching
    `eager` and `exact` results, or None when every one passes."""
    if len(results) != len(exact) or len(eager) != len(exact):
        return f"{len(results)} results, the reference has {len(exact)}"
    for index, (got, rounded, ideal) in enumerate(zip(results, eager, exact, strict=True)):
        reason = tensor_mismatch(got, rounded, ideal, f"result #{index}")
        if reason is not None:
            return reason
    return None
