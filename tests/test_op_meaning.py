"""What each elementwise op of `kgc.op_table` means, checked against torch.

The reference interpreter, the CPU executor and the expected values of the
op cases all compute an op with its row's `reference` function, so a wrong
function there (silu computed as sigmoid, a comparison with its operands
swapped) would agree with itself everywhere. Here every row is compared
with the torch function that defines the op, written out in this file, on
fresh random inputs of awkward, broadcasting shapes, in every dtype the op
takes: through `kgc.reference.elementwise` (what the executor runs) as
eager torch computes it, in exact (f64) mode, and through the row's
`on_scalars` (with which kg-pad-mask follows a padding value) on Python
floats. The table is iterated, so an op added without a meaning here fails.

The graph ops that `kgc.reference` computes beside the table (reductions,
softmax, the norms, matmul, views, iota, constants, the indexed ops gather
and scatter; the executor runs kg.reduce and kg.broadcast_to on tiles with
them) are checked the same way, one single-op graph each.
"""

from __future__ import annotations

import itertools
import math
import zlib

import pytest

import kgc
from kgc import reference
from kgc.op_table import ELEMENTWISE

torch = pytest.importorskip("torch")
F = torch.nn.functional

FLOATS = (torch.float32, torch.float16, torch.bfloat16)
INTEGERS = (torch.int32, torch.int64)
EIGHT_BIT_FLOATS = (torch.float8_e4m3fn, torch.float8_e5m2)

# The torch definition of each op, with the attribute values to try (one
# dict per variant). `domain` says which floats the op is defined on:
# "any", "positive" (log, sqrt, rsqrt, the base of pow), "nonzero"
# (reciprocal, the divisor of div).
MEANINGS: dict[str, dict] = {
    "abs": dict(torch=torch.abs),
    "add": dict(torch=torch.add),
    "sub": dict(torch=torch.sub),
    "mul": dict(torch=torch.mul),
    "div": dict(torch=torch.true_divide, domain=("any", "nonzero")),
    "maximum": dict(torch=torch.maximum),
    "minimum": dict(torch=torch.minimum),
    "pow": dict(torch=torch.pow, domain=("positive", "any")),
    "exp": dict(torch=torch.exp),
    "log": dict(torch=torch.log, domain=("positive",)),
    "sqrt": dict(torch=torch.sqrt, domain=("positive",)),
    "rsqrt": dict(torch=torch.rsqrt, domain=("positive",)),
    "tanh": dict(torch=torch.tanh),
    "sin": dict(torch=torch.sin),
    "cos": dict(torch=torch.cos),
    "neg": dict(torch=torch.neg),
    "relu": dict(torch=F.relu),
    "square": dict(torch=torch.square),
    "reciprocal": dict(torch=torch.reciprocal, domain=("nonzero",)),
    "sigmoid": dict(torch=torch.sigmoid),
    "silu": dict(torch=F.silu),
    "gelu": dict(torch=F.gelu, variants=[{"approximate": "none"}, {"approximate": "tanh"}]),
    "clamp": dict(torch=torch.clamp, variants=[{"min": -0.5, "max": 0.75},
                                               {"min": None, "max": 0.25},
                                               {"min": -0.25, "max": None}]),
    "logical_and": dict(torch=torch.logical_and),
    "logical_or": dict(torch=torch.logical_or),
    "logical_xor": dict(torch=torch.logical_xor),
    "logical_not": dict(torch=torch.logical_not),
    "cmp": dict(torch=lambda a, b, predicate: {
        "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
        "ge": torch.ge}[predicate](a, b),
        variants=[{"predicate": p} for p in ("eq", "ne", "lt", "le", "gt", "ge")]),
    "select": dict(torch=torch.where),
    "cast": dict(torch=None),  # checked by test_cast_is_torchs_conversion
}

# Operand shapes: a 3x17 tile, broadcast against a row and a column.
SHAPES = {1: [(3, 17)], 2: [(3, 17), (1, 17)], 3: [(3, 1), (3, 17), (1, 17)]}


def dtypes_of(row) -> tuple:
    return {"float": FLOATS, "numeric": FLOATS + INTEGERS, "bool": (torch.bool,),
            "value": FLOATS + INTEGERS + (torch.bool,)}[row.operand_types]


def random_operand(shape, dtype, domain: str, generator):
    """Fresh values, never zero, with ties (equal elements) for the
    comparisons: floats away from zero (and positive where the domain asks),
    integers of both signs in a small range, booleans of both values."""
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    if not dtype.is_floating_point:
        values = torch.randint(1, 6, shape, generator=generator)
        if domain == "any":
            sign = torch.randint(0, 2, shape, generator=generator) * 2 - 1
            values = values * sign
        return values.to(dtype)
    magnitude = torch.rand(shape, generator=generator) * 2.5 + 0.125
    if domain != "positive":
        sign = torch.randint(0, 2, shape, generator=generator) * 2 - 1
        magnitude = magnitude * sign
    return magnitude.to(dtype)


def operands_for(name: str, row, dtype, seed: int):
    generator = torch.Generator().manual_seed(seed)
    domains = MEANINGS[name].get("domain", ("any",) * row.arity)
    if name == "select":
        condition = random_operand(SHAPES[3][0], torch.bool, "any", generator)
        a, b = (random_operand(shape, dtype, "any", generator) for shape in SHAPES[3][1:])
        return [condition, a, b]
    operands = [random_operand(shape, dtype, domain, generator)
                for shape, domain in zip(SHAPES[row.arity], domains)]
    if row.arity == 2 and domains[0] == domains[1]:
        # Equal elements in places, so that eq, le and ge meet ties.
        ties = torch.rand(operands[0].shape, generator=generator) < 0.3
        operands[0] = torch.where(ties, operands[1].expand_as(operands[0]), operands[0])
    return operands


def result_dtype(name: str, dtype):
    return torch.bool if name == "cmp" else dtype


def cases():
    for name in sorted(ELEMENTWISE):
        if name == "cast":
            continue
        meaning = MEANINGS.get(name, {})
        for dtype in dtypes_of(ELEMENTWISE[name]):
            for attributes in meaning.get("variants", [{}]):
                label = ",".join(f"{k}={v}" for k, v in attributes.items())
                yield pytest.param(name, dtype, attributes,
                                   id=f"{name}-{str(dtype).removeprefix('torch.')}"
                                      + (f"-{label}" if label else ""))


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_every_op_of_the_table_has_a_torch_meaning_here(name):
    assert name in MEANINGS, (
        f"kg.{name} is in the op table but has no torch definition in {__file__}: add the torch "
        "function that defines it to MEANINGS")


@pytest.mark.parametrize("name,dtype,attributes", list(cases()))
def test_reference_is_the_torch_op(name, dtype, attributes):
    check_against_torch(name, dtype, attributes)


def check_against_torch(name: str, dtype, attributes: dict) -> None:
    row = ELEMENTWISE[name]
    define = MEANINGS[name]["torch"]
    operands = operands_for(name, row, dtype, seed=zlib.crc32(f"{name} {dtype}".encode()))
    out = result_dtype(name, dtype)
    got = reference.elementwise(name, *operands, dtype=out, **attributes)
    # Eager torch on the operands as they are: CPU half-float math computes
    # in f32 and rounds once, as the reference does.
    want = define(*operands, **attributes)
    assert got.dtype == want.dtype == out
    assert got.shape == want.shape
    if out.is_floating_point:
        assert torch.isfinite(want).all()
        torch.testing.assert_close(got, want)
    else:
        assert torch.equal(got, want)
    # Exact mode: the op in f64 on the same values.
    exact = reference.elementwise(name, *operands, dtype=out, exact=True, **attributes)
    wide = define(*(x.double() if x.is_floating_point() else x for x in operands), **attributes)
    if out.is_floating_point:
        assert exact.dtype == torch.float64
        torch.testing.assert_close(exact, wide, rtol=1e-12, atol=1e-12)
    else:
        assert torch.equal(exact, wide)


def wrong_silu(x):
    return torch.sigmoid(x)


def wrong_gelu(x, approximate):
    return F.gelu(x)  # the approximation ignored


def swapped_compare(a, b, predicate):
    return getattr(torch, predicate)(b, a)


def test_a_wrong_reference_function_is_caught(monkeypatch):
    """The check can fail: rows whose reference is subtly wrong are each
    caught in f32."""
    import dataclasses

    import kgc.op_table

    wrong = {"silu": (wrong_silu, {}), "gelu": (wrong_gelu, {"approximate": "tanh"}),
             "cmp": (swapped_compare, {"predicate": "lt"}),
             "rsqrt": (lambda x: 1 / torch.sqrt(x + 1e-3), {})}
    for name, (function, attributes) in wrong.items():
        with monkeypatch.context() as patch:
            patch.setitem(kgc.op_table.ELEMENTWISE, name,
                          dataclasses.replace(ELEMENTWISE[name], reference=function))
            with pytest.raises(AssertionError):
                check_against_torch(name, torch.float32, attributes)
        check_against_torch(name, torch.float32, attributes)  # the real row passes


def test_integer_arithmetic_wraps_as_torchs_does():
    generator = torch.Generator().manual_seed(5)
    big = torch.randint(2**30, 2**31 - 1, (3, 17), generator=generator, dtype=torch.int32)
    for name in ("add", "sub", "mul"):
        got = reference.elementwise(name, big, -big if name == "sub" else big, dtype=torch.int32)
        want = MEANINGS[name]["torch"](big, -big if name == "sub" else big)
        assert torch.equal(got, want), name


CAST_DTYPES = FLOATS + INTEGERS + (torch.bool,) + EIGHT_BIT_FLOATS


@pytest.mark.parametrize("source", CAST_DTYPES, ids=str)
@pytest.mark.parametrize("target", CAST_DTYPES, ids=str)
def test_cast_is_torchs_conversion(source, target):
    assert ELEMENTWISE["cast"].converts
    generator = torch.Generator().manual_seed(11)
    if source == torch.bool:
        x = torch.rand(3, 17, generator=generator) < 0.5
    else:
        # Values every type here holds (the 8-bit floats reach 57344 and
        # 448), fractions to truncate, both signs, never zero.
        values = (torch.rand(3, 17, generator=generator) * 200 + 0.5) * \
            (torch.randint(0, 2, (3, 17), generator=generator) * 2 - 1)
        if target == torch.float8_e4m3fn or source == torch.float8_e4m3fn:
            values = values.clamp(-440, 440)
        x = values.to(source)
    got = reference.elementwise("cast", x, dtype=target)
    assert got.dtype == target
    # torch's own conversion, through f32 from the floats narrower than it
    # (the reference's rule, and what an f16 -> f32 -> target chain gives).
    want = (x.float() if x.is_floating_point() else x).to(target)
    assert torch.equal(got.view(torch.uint8) if got.element_size() == 1 and
                       got.is_floating_point() else got,
                       want.view(torch.uint8) if want.element_size() == 1 and
                       want.is_floating_point() else want)


# The padding values kg-pad-mask follows (0, 1, -inf, inf) and ordinary ones.
SCALARS = (0.0, 1.0, -math.inf, math.inf, 0.375, -1.25, 2.5)


def scalar_points(row) -> list[tuple]:
    if row.operand_types == "bool":
        values = (0.0, 1.0)
        return [p for p in itertools.product(values, repeat=row.arity)]
    if row.name == "select":
        return [(c, a, b) for c in (0.0, 1.0) for a in SCALARS[:5] for b in SCALARS[:5]]
    return list(itertools.product(SCALARS, repeat=row.arity))


@pytest.mark.parametrize("name", sorted(n for n, r in ELEMENTWISE.items()
                                        if r.on_scalars is not None and n != "cast"))
def test_on_scalars_is_the_torch_op(name):
    """What kg-pad-mask takes a known padding value to through the op. It
    gives up (the padding becomes unknown) where `on_scalars` raises or
    gives NaN, so only the values it gives are compared."""
    row = ELEMENTWISE[name]
    compared = 0
    for attributes in MEANINGS[name].get("variants", [{}]):
        for point in scalar_points(row):
            try:
                got = row.on_scalars(*point, **attributes)
            except (ValueError, ZeroDivisionError, OverflowError):
                continue
            if math.isnan(got):
                continue
            tensors = [torch.tensor(bool(p)) if row.operand_types == "bool" or
                       (name == "select" and i == 0) else torch.tensor(p, dtype=torch.float64)
                       for i, p in enumerate(point)]
            want = float(MEANINGS[name]["torch"](*tensors, **attributes))
            assert math.isclose(float(got), want, rel_tol=1e-12, abs_tol=1e-12), \
                f"kg.{name} on_scalars{point} {attributes} gives {got}, torch {want}"
            compared += 1
    assert compared >= 2


# One graph op each: (inputs as (shape, role), build(graph, *inputs), torch
# on the same tensors). Roles: "x" random values, "weight" around 1.
GRAPH_OPS = {
    "sum": ([(3, 17)], lambda g, x: g.sum(x, [1]), lambda x: x.sum(1)),
    "mean": ([(3, 17)], lambda g, x: g.mean(x, [0, 1], keepdim=True),
             lambda x: x.mean((0, 1), keepdim=True)),
    "max": ([(3, 17)], lambda g, x: g.max(x, [1]), lambda x: x.amax(1)),
    "min": ([(3, 17)], lambda g, x: g.min(x, [0], keepdim=True),
            lambda x: x.amin(0, keepdim=True)),
    "softmax": ([(3, 17)], lambda g, x: g.softmax(x, 1), lambda x: torch.softmax(x, 1)),
    "softmax_first_dim": ([(3, 17)], lambda g, x: g.softmax(x, 0),
                          lambda x: torch.softmax(x, 0)),
    "rms_norm": ([(3, 17), (17,)], lambda g, x, w: g.rms_norm(x, w, eps=1e-6),
                 lambda x, w: F.rms_norm(x, (17,), w, eps=1e-6)),
    "layer_norm": ([(3, 17), (17,), (17,)], lambda g, x, w, b: g.layer_norm(x, w, b, eps=1e-5),
                   lambda x, w, b: F.layer_norm(x, (17,), w, b, eps=1e-5)),
    "matmul": ([(3, 17), (17, 5)], lambda g, a, b: g.matmul(a, b), torch.matmul),
    "transpose": ([(3, 17)], lambda g, x: g.transpose(x, [1, 0]), lambda x: x.permute(1, 0)),
    "reshape": ([(3, 17)], lambda g, x: g.reshape(x, [17, 3]), lambda x: x.reshape(17, 3)),
    "broadcast_to": ([(1, 17)], lambda g, x: g.broadcast_to(x, [3, 17]),
                     lambda x: x.expand(3, 17)),
    "concat": ([(3, 17), (2, 17)], lambda g, a, b: g.concat([a, b], 0),
               lambda a, b: torch.cat([a, b], 0)),
    "slice": ([(3, 17)], lambda g, x: g.slice(x, [1, 2], [2, 5], [1, 3]),
              lambda x: x[1:3, 2:17:3]),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", sorted(GRAPH_OPS))
def test_graph_op_reference_is_the_torch_op(name, dtype):
    shapes, build, define = GRAPH_OPS[name]
    generator = torch.Generator().manual_seed(zlib.crc32(f"{name} {dtype}".encode()))
    inputs = [random_operand(shape, dtype, "any", generator) for shape in shapes]
    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
    graph = kgc.Graph(name)
    tensors = [graph.input(f"x{i}", shape, names[dtype]) for i, shape in enumerate(shapes)]
    graph.output(build(graph, *tensors))
    got = reference.evaluate(graph.build(), None, inputs)
    want = define(*inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want)
    exact = reference.evaluate(graph.build(), None, inputs, exact=True)
    torch.testing.assert_close(exact, define(*(x.double() for x in inputs)), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("dtype", ["f32", "i32", "i64"])
def test_iota_and_constant_are_torchs_arange_and_full(dtype):
    graph = kgc.Graph("made")
    graph.output(graph.iota((3, 17), 1, dtype=dtype, start=5),
                 graph.constant(3.0 if dtype == "f32" else 3, (3, 17), dtype))
    counted, filled = reference.evaluate(graph.build(), None, [])
    torch_dtype = {"f32": torch.float32, "i32": torch.int32, "i64": torch.int64}[dtype]
    assert torch.equal(counted, torch.arange(5, 22).to(torch_dtype).expand(3, 17))
    assert torch.equal(filled, torch.full((3, 17), 3, dtype=torch_dtype))


# The indexed ops: (build(graph, data, indices, source), torch on the same
# tensors). `source` is None for a gather. The indices repeat (an embedding
# of a token that occurs twice, its gradient summed twice) except under
# assign, where torch leaves unspecified which repeated write is kept.
INDEXED_OPS = {
    "gather": (lambda g, x, i, s, dim: g.gather(x, i, dim),
               lambda x, i, s, dim: torch.index_select(x, dim, i)),
    "scatter_assign": (lambda g, x, i, s, dim: g.scatter(x, i, s, dim, "assign"),
                       lambda x, i, s, dim: x.index_copy(dim, i, s)),
    "scatter_add": (lambda g, x, i, s, dim: g.scatter(x, i, s, dim, "add"),
                    lambda x, i, s, dim: x.index_add(dim, i, s)),
}


@pytest.mark.parametrize("index_dtype", ["i32", "i64"])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS, ids=str)
@pytest.mark.parametrize("name", sorted(INDEXED_OPS))
def test_indexed_op_reference_is_the_torch_op(name, dtype, dim, index_dtype):
    build, define = INDEXED_OPS[name]
    generator = torch.Generator().manual_seed(zlib.crc32(f"{name} {dtype} {dim}".encode()))
    shape = (7, 9)
    count = shape[dim] if name == "scatter_assign" else 11
    if name == "scatter_assign":
        indices = torch.randperm(shape[dim], generator=generator)[:5]
    else:
        indices = torch.randint(0, shape[dim], (count,), generator=generator)
        indices[-1] = indices[0]  # a repeat, whatever the draw
    count = indices.numel()
    source_shape = list(shape)
    source_shape[dim] = count
    x = random_operand(shape, dtype, "any", generator)
    source = random_operand(source_shape, dtype, "any", generator)
    names = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
             torch.int32: "i32", torch.int64: "i64"}
    graph = kgc.Graph(name)
    tensors = [graph.input("x", shape, names[dtype]),
               graph.input("indices", (count,), index_dtype),
               graph.input("source", source_shape, names[dtype])]
    graph.output(build(graph, *tensors, dim))
    indices = indices.to(torch.int32 if index_dtype == "i32" else torch.int64)
    inputs = [x, indices, source]
    got = reference.evaluate(graph.build(), None, inputs)
    # torch sums half floats in their own precision; the op sums in f32 and
    # rounds once, which is the f32 sum rounded.
    wide = [t.float() if t.is_floating_point() else t for t in inputs]
    want = define(*wide, dim).to(dtype) if name == "scatter_add" else \
        define(x, indices.long(), source, dim)
    assert got.dtype == dtype and got.shape == want.shape
    assert torch.equal(got, want)
    if dtype.is_floating_point:
        exact = reference.evaluate(graph.build(), None, inputs, exact=True)
        doubled = [t.double() if t.is_floating_point() else t.long() for t in inputs]
        torch.testing.assert_close(exact, define(*doubled, dim), rtol=1e-12, atol=1e-12)
