"""The accuracy rule that kgc's results are held to, for tests.

A result is compared with two evaluations of the graph by
`kgc.reference`: op by op as eager PyTorch would (rounding every result to
its dtype), and op by op in f64 without rounding (`exact`). The rule is
`kgc.accuracy`'s, the one the search's check and the bench use: element by
element within twice eager's largest error plus a few units of the dtype's
roundoff relative to the element and to the result's largest magnitude;
inf or NaN only where the exact result has them; integers and booleans
exact.
"""

from __future__ import annotations


def as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def assert_as_accurate_as_eager(results, eager, exact, who: str = "kgc") -> None:
    """Checks each of `results` against the matching `eager` and `exact`
    results (single tensors or tuples)."""
    from kgc.accuracy import mismatch

    reason = mismatch(as_tuple(results), as_tuple(eager), as_tuple(exact))
    assert reason is None, f"{who}: {reason}"


def tf32_rounded(x):
    """The f32 tensor `x` with its mantissa rounded to TF32's 10 bits, to
    nearest with ties away from zero, as the GPU's cvt.rna.tf32.f32 does:
    the operands of a TF32 product where no GPU rounds them."""
    import torch

    bits = x.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def tf32_truncated(x):
    """The f32 tensor `x` with the 13 low bits of its mantissa dropped: TF32
    operands as a tensor core reads f32 registers that nothing rounded."""
    import torch

    bits = x.contiguous().view(torch.int32)
    return (bits & ~0x1FFF).view(torch.float32)


def worse_eager(first, second, exact):
    """Of two eager results of one graph (torch's own kernels, and
    `kgc.reference` rounding op by op), the one further from `exact`: both
    are legitimate ways to compute the graph in its dtype, so kgc is held
    to the less accurate of the two."""
    import torch

    if not first.dtype.is_floating_point:
        return first

    def error(eager):
        finite = torch.isfinite(exact) & torch.isfinite(eager.to(exact.device).double())
        return (eager.to(exact.device).double()[finite] - exact[finite]).abs().max().item() \
            if finite.any() else 0.0

    return first if error(first) >= error(second) else second


def assert_matches_torch(results, torch_results, module, inputs, who: str = "kgc",
                         tf32: bool = False, hardware_eager=None) -> None:
    """Checks `results` of the graph `module` (built, one function) on
    `inputs` against the exact result (`kgc.reference`, f64), with eager's
    error the larger of torch's (`torch_results`, rounded to each result's
    dtype) and the reference's op-by-op rounding. Torch's results must pass
    the same rule first, so that the reference and torch agree on what the
    ops mean (unless `tf32`: the reference does not round operands to TF32,
    torch's GPU matmul then does)."""
    import torch

    import kgc.reference
    from kgc.accuracy import mismatch

    results, torch_results = as_tuple(results), as_tuple(torch_results)
    assert len(results) == len(torch_results)
    torch_results = tuple(t.to(r.dtype) for t, r in zip(torch_results, results))
    rounded = as_tuple(kgc.reference.evaluate(module, None, list(inputs)))
    exact = as_tuple(kgc.reference.evaluate(module, None, list(inputs), exact=True))
    if not tf32:
        reason = mismatch(torch_results, rounded, exact)
        assert reason is None, f"torch and kgc.reference disagree: {reason}"
    # Every legitimate way to compute the graph in its dtype; kgc is held to
    # the least accurate of them.
    others = [torch_results]
    if tf32:
        # cuBLAS rounds TF32 operands to nearest; Triton's dots behave as if
        # the f32 registers' low 13 bits were dropped (kgc's TF32 errors on
        # the GPU are about twice cuBLAS's). Both are TF32.
        others.append(as_tuple(kgc.reference.evaluate(
            module, None, [tf32_truncated(x) if x.dtype == torch.float32 else x
                           for x in inputs], exact=True)))
    if hardware_eager is not None:
        # Torch at the precision of the hardware kgc's kernel runs on (the
        # short sums of 8-bit tensor cores).
        others.append(as_tuple(hardware_eager))
    eager = rounded
    for other in others:
        eager = tuple(worse_eager(o.to(r.dtype), r, e) for o, r, e in zip(other, eager, exact))
    reason = mismatch(results, eager, exact)
    assert reason is None, f"{who}: {reason}"
