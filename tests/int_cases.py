"""Graphs of the integer, boolean and position ops, with torch references.

Shared by the CPU tests (reference, tiled executor, compile to cubin) and
the GPU suite. A case builds a `kgc.Graph` for one shape and gives the
torch function that computes the same outputs; `make_inputs` draws fresh
inputs: small non-zero integers of either sign (torch.randint), coin-flip
booleans, normal floats.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import kgc

# Lengths that are not multiples of any tile, 1 included.
LENGTHS = (1, 3, 17, 1000, 4097)


@dataclasses.dataclass
class IntCase:
    name: str
    inputs: list[tuple[str, str]]  # (name, dtype) of inputs of the case's shape
    build: Callable  # (graph, shape, *inputs) -> output Tensor(s)
    reference: Callable  # (shape, *torch inputs) -> output tensor(s)
    rank: int = 1  # 1: shapes (n,); 2: (3, n)

    def shape(self, length: int) -> tuple[int, ...]:
        return (length,) if self.rank == 1 else (3, length)

    def graph(self, length: int) -> kgc.Graph:
        g = kgc.Graph(self.name)
        shape = self.shape(length)
        tensors = [g.input(name, shape, dtype) for name, dtype in self.inputs]
        outputs = self.build(g, shape, *tensors)
        g.output(*(outputs if isinstance(outputs, tuple) else (outputs,)))
        return g


def _torch():
    import torch

    return torch


def _positions(shape, dim, dtype):
    torch = _torch()
    index = torch.arange(shape[dim], dtype=torch.int64)
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return index.reshape(view).expand(shape).to(dtype)


def _comparisons():
    torch = lambda: _torch()  # noqa: E731
    cases = []
    for predicate in ("eq", "ne", "lt", "le", "gt", "ge"):
        cases.append(IntCase(
            f"cmp_{predicate}_i32", [("a", "i32"), ("b", "i32")],
            lambda g, s, a, b, p=predicate: getattr(g, p)(a, b),
            lambda s, a, b, p=predicate: getattr(torch(), p)(a, b)))
    cases += [
        IntCase("cmp_lt_f16_scalar", [("x", "f16")], lambda g, s, x: g.lt(x, 0.25),
                lambda s, x: x < 0.25),
        IntCase("cmp_ge_i64_scalar", [("n", "i64")], lambda g, s, n: g.ge(n, 3),
                lambda s, n: n >= 3),
        IntCase("cmp_ne_bf16", [("a", "bf16"), ("b", "bf16")], lambda g, s, a, b: g.ne(a, b),
                lambda s, a, b: a != b),
        IntCase("cmp_gt_bool", [("p", "i1"), ("q", "i1")], lambda g, s, p, q: g.gt(p, q),
                lambda s, p, q: p > q),
    ]
    return cases


def _logic():
    return [
        IntCase("logic", [("p", "i1"), ("q", "i1")],
                lambda g, s, p, q: ((p & q) | ~q, p ^ q, g.logical_not(p)),
                lambda s, p, q: ((p & q) | ~q, p ^ q, ~p)),
    ]


def _integer_arithmetic():
    torch = lambda: _torch()  # noqa: E731
    return [
        IntCase("int_arith_i32", [("a", "i32"), ("b", "i32")],
                lambda g, s, a, b: g.abs(g.neg(g.maximum(a * b - a, b) + 7)) - g.minimum(a, 2),
                lambda s, a, b: torch().abs(-(torch().maximum(a * b - a, b) + 7))
                - torch().minimum(a, torch().tensor(2, dtype=a.dtype))),
        IntCase("int_arith_i64", [("a", "i64"), ("b", "i64")],
                lambda g, s, a, b: (a + b) * b - 5,
                lambda s, a, b: (a + b) * b - 5),
    ]


def _selects():
    torch = lambda: _torch()  # noqa: E731
    return [
        IntCase("where_f32", [("c", "i1"), ("x", "f32"), ("y", "f32")],
                lambda g, s, c, x, y: g.where(c, x, y),
                lambda s, c, x, y: torch().where(c, x, y)),
        IntCase("where_i32_scalar", [("a", "i32")],
                lambda g, s, a: g.where(g.gt(a, 0), a, -1),
                lambda s, a: torch().where(a > 0, a, torch().tensor(-1, dtype=a.dtype))),
        IntCase("masked_fill_f16", [("x", "f16"), ("m", "i1")],
                lambda g, s, x, m: g.masked_fill(x, m, -2.0),
                lambda s, x, m: x.masked_fill(m, -2.0)),
    ]


def _positions_cases():
    torch = lambda: _torch()  # noqa: E731
    return [
        IntCase("arange_i64", [("n", "i64")],
                lambda g, s, n: n + g.arange(5, 5 + s[0]),
                lambda s, n: n + torch().arange(5, 5 + s[0], dtype=torch().int64)),
        IntCase("iota_f32_scaled", [("x", "f32")],
                lambda g, s, x: x * g.iota(s, -1, "f32", start=-2),
                lambda s, x: x * (_positions(s, -1, torch().float32) - 2)),
        IntCase("iota_i32_rows", [("a", "i32")],
                lambda g, s, a: a + g.iota(s, 0, "i32"),
                lambda s, a: a + _positions(s, 0, torch().int32), rank=2),
    ]


def _casts():
    torch = lambda: _torch()  # noqa: E731
    return [
        IntCase("cast_float_to_int", [("x", "f32")],
                lambda g, s, x: (g.cast(x * 10.0, "i32"), g.cast(x, "i1")),
                lambda s, x: ((x * 10.0).to(torch().int32), x.to(torch().bool))),
        IntCase("cast_int_to_float", [("a", "i32"), ("n", "i64")],
                lambda g, s, a, n: (g.cast(a, "f16"), g.cast(n, "bf16"), g.cast(a, "i64"),
                                    g.cast(n, "i32"), g.cast(a, "i1")),
                lambda s, a, n: (a.to(torch().float16), n.to(torch().bfloat16),
                                 a.to(torch().int64), n.to(torch().int32), a.to(torch().bool))),
        IntCase("cast_bool", [("p", "i1")],
                lambda g, s, p: (g.cast(p, "f32"), g.cast(p, "i32"), g.cast(p, "bf16")),
                lambda s, p: (p.to(torch().float32), p.to(torch().int32),
                              p.to(torch().bfloat16))),
        IntCase("cast_half_to_int", [("x", "f16")],
                lambda g, s, x: g.cast(x * 20.0, "i64"),
                lambda s, x: (x * 20.0).to(torch().int64)),
    ]


def causal_softmax_reference(x):
    torch = _torch()
    n = x.shape[-1]
    keep = torch.arange(n, device=x.device).reshape(n, 1) >= torch.arange(n, device=x.device)
    return torch.softmax(x.float().masked_fill(~keep, float("-inf")), dim=-1).to(x.dtype)


def causal_softmax_graph(n: int, dtype: str = "f32") -> kgc.Graph:
    """softmax(where(row >= col, x, -inf)) over rows of an n x n score
    matrix: the causal mask of attention, which must fuse into one
    reduction kernel."""
    g = kgc.Graph("causal_softmax")
    x = g.input("x", (n, n), dtype)
    rows, cols = g.iota((n, 1), 0, "i32"), g.iota((1, n), 1, "i32")
    g.output(g.softmax(g.where(g.ge(rows, cols), x, float("-inf")), -1))
    return g


def triu_graph(n: int) -> kgc.Graph:
    """torch.triu(a): the elements below the diagonal of an n x n integer
    tensor zeroed by a mask of two i64 iotas."""
    g = kgc.Graph("triu")
    a = g.input("a", (n, n), "i32")
    rows, cols = g.iota((n, 1), 0, "i64"), g.iota((1, n), 1, "i64")
    g.output(g.where(g.gt(rows, cols), 0, a))
    return g


ALL_CASES = (_comparisons() + _logic() + _integer_arithmetic() + _selects() + _positions_cases()
             + _casts())


def parameters(lengths=LENGTHS):
    """(case, length) for every case and length."""
    return [(case, length) for case in ALL_CASES for length in lengths]


def make_inputs(case: IntCase, length: int, device: str, seed: int):
    """Fresh random inputs of the case's shape."""
    from kgc.element_types import torch_dtype

    torch = _torch()
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shape = case.shape(length)
    tensors = []
    for _, dtype in case.inputs:
        if dtype == "i1":
            values = torch.rand(shape, generator=generator) < 0.5
        elif dtype in ("i32", "i64"):
            magnitude = torch.randint(1, 8, shape, generator=generator)
            values = magnitude * (torch.randint(0, 2, shape, generator=generator) * 2 - 1)
        else:
            values = torch.randn(shape, generator=generator)
        tensors.append(values.to(torch_dtype(dtype)).to(device))
    return tensors


def reference(case: IntCase, length: int, inputs):
    outputs = case.reference(case.shape(length), *inputs)
    return outputs if isinstance(outputs, tuple) else (outputs,)


# Tolerances of float outputs (the casts round once, as torch does; the
# iota case multiplies once).
TOLERANCES = {"float32": (1e-6, 1e-6), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


def assert_matches(got, want) -> None:
    """Exactly for integers and booleans, within one rounding for floats."""
    torch = _torch()
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype,
                                                                  want.shape, want.dtype)
    got = got.to(want.device)
    if not want.dtype.is_floating_point:
        assert torch.equal(got, want), f"{(got != want).sum().item()} elements differ"
        return
    atol, rtol = TOLERANCES[str(want.dtype).removeprefix("torch.")]
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
