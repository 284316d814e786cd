"""The Python graph API: ops build into modules that verify, eager checks
raise GraphError with the operands' shapes and dtypes, and the text form
round-trips through kgc-opt."""

from __future__ import annotations

import gc
import inspect
import math
import re
import subprocess

import pytest

from tests.tools import console_script
from mlir import ir

import kgc
from kgc.diagnostics import KgcError
from kgc.dialects import kg
from kgc.parsing import parse_text

GRAPH_OPS = {
    "kg.exp", "kg.log", "kg.sqrt", "kg.rsqrt", "kg.neg", "kg.abs", "kg.relu", "kg.silu",
    "kg.gelu", "kg.sigmoid", "kg.tanh", "kg.sin", "kg.cos", "kg.square", "kg.reciprocal",
    "kg.clamp",
    "kg.add", "kg.sub", "kg.mul", "kg.div", "kg.maximum", "kg.minimum", "kg.pow",
    "kg.constant", "kg.cast", "kg.matmul", "kg.reduce", "kg.softmax", "kg.rms_norm",
    "kg.layer_norm", "kg.transpose", "kg.reshape", "kg.broadcast_to", "kg.concat", "kg.slice",
}

UNARY_OPS = ["exp", "log", "sqrt", "rsqrt", "neg", "abs", "relu", "silu", "sigmoid", "tanh",
             "sin", "cos", "square", "reciprocal", "gelu"]
BINARY_OPS = ["add", "sub", "mul", "div", "maximum", "minimum", "pow"]


def reparse(graph: kgc.Graph, context: ir.Context) -> ir.Operation:
    """The graph's text parsed back and verified."""
    module = parse_text(graph.to_mlir(), "graph.mlir", context)
    assert module.verify()
    return module


def body_ops(module: ir.Operation) -> list[ir.Operation]:
    function = module.regions[0].blocks[0].operations[0]
    assert function.operation.name == "func.func"
    return [op.operation for op in function.regions[0].blocks[0].operations]


def op_names(module: ir.Operation) -> list[str]:
    return [op.name for op in body_ops(module)]


def result_types(module: ir.Operation) -> list[str]:
    function = module.regions[0].blocks[0].operations[0]
    return [str(t) for t in ir.FunctionType(function.attributes["function_type"].value).results]


# --------------------------------------------------------------------------
# Every op builds and verifies
# --------------------------------------------------------------------------


def test_every_op_builds_and_the_text_reparses():
    g = kgc.Graph("every_op")
    x = g.input("x", (4, 16, 32), "f32")
    w = g.input("w", (32,), "f32")
    b = g.input("b", (32,), "f32")
    m = g.input("m", (32, 8), "f32")
    q = g.input("q", (2, 1, 16, 32), "f8e4m3")
    r = g.input("r", (3, 32, 8), "f8e5m2")

    unary = x
    for name in UNARY_OPS:
        unary = getattr(g, name)(unary)
    unary = g.gelu(unary, approximate="tanh")
    unary = g.clamp(unary, min=-1.0, max=1.0)
    binary = unary
    for name in BINARY_OPS:
        binary = getattr(g, name)(binary, w)
    ones = g.constant(1.0, (4, 16, 32), "f32")
    half = g.cast(g.add(binary, ones), "f16")
    product = g.matmul(x, m, precision="tf32")
    fp8_product = g.matmul(q, r, out_dtype="bf16")
    reductions = [g.sum(x, 2), g.max(x, (0, 2), keepdim=True), g.min(x, 1), g.mean(x, (0, 1, 2))]
    probabilities = g.softmax(x, dim=1)
    normed = g.rms_norm(x, w, eps=1e-6)
    normed_nonaffine = g.rms_norm(x, normalized_shape=(16, 32))
    layer_normed = g.layer_norm(x, w, b)
    bias_only = g.layer_norm(x, bias=b)
    transposed = g.transpose(x, (2, 0, 1))
    matrix_t = g.t(m)
    reshaped = g.reshape(x, (4, -1))
    broadcast = g.broadcast_to(w, (4, 16, 32))
    joined = g.concat([x, broadcast], dim=1)
    window = g.slice(x, (0, 8, 1), (4, 4, 8), (1, 2, 4))
    g.output(half, product, fp8_product, *reductions, probabilities, normed, normed_nonaffine,
             layer_normed, bias_only, transposed, matrix_t, reshaped, joined, window)

    built = g.build()
    assert built.name == "builtin.module"
    assert built.verify()
    with ir.Context() as context:
        module = reparse(g, context)
        assert GRAPH_OPS <= set(op_names(module))
        assert op_names(module)[-1] == "func.return"
        assert result_types(module) == [
            "tensor<4x16x32xf16>", "tensor<4x16x8xf32>", "tensor<2x3x16x8xbf16>",
            "tensor<4x16xf32>", "tensor<1x16x1xf32>", "tensor<4x32xf32>", "tensor<f32>",
            "tensor<4x16x32xf32>", "tensor<4x16x32xf32>", "tensor<4x16x32xf32>",
            "tensor<4x16x32xf32>", "tensor<4x16x32xf32>", "tensor<32x4x16xf32>",
            "tensor<8x32xf32>", "tensor<4x512xf32>", "tensor<4x32x32xf32>",
            "tensor<4x4x8xf32>",
        ]


@pytest.mark.parametrize("name", UNARY_OPS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_unary_op_keeps_the_type(name, dtype):
    g = kgc.Graph("unary")
    x = g.input("x", (8, 16), dtype)
    y = getattr(g, name)(x)
    assert (y.shape, y.dtype, y.ndim) == ((8, 16), dtype, 2)
    g.output(y)
    with ir.Context() as context:
        assert op_names(reparse(g, context)) == [f"kg.{name}", "func.return"]


@pytest.mark.parametrize("name", BINARY_OPS)
def test_binary_op_builds(name):
    g = kgc.Graph("binary")
    a = g.input("a", (16, 128), "bf16")
    b = g.input("b", (128,), "bf16")
    g.output(getattr(g, name)(a, b))
    with ir.Context() as context:
        module = reparse(g, context)
        assert op_names(module) == [f"kg.{name}", "func.return"]
        assert result_types(module) == ["tensor<16x128xbf16>"]


def test_gelu_and_clamp_attributes():
    g = kgc.Graph("attributes")
    x = g.input("x", (4, 8), "f16")
    g.output(g.gelu(x), g.gelu(x, approximate="tanh"), g.clamp(x, min=0), g.clamp(x, max=6.0))
    text = g.to_mlir()
    assert "kg.gelu %arg0 : tensor<4x8xf16>" in text
    assert "kg.gelu %arg0 approximate = tanh : tensor<4x8xf16>" in text
    assert "kg.clamp %arg0 min 0.000000e+00 : tensor<4x8xf16>" in text
    assert "kg.clamp %arg0 max 6.000000e+00 : tensor<4x8xf16>" in text


# --------------------------------------------------------------------------
# Broadcasting, scalars, negative dims
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lhs, rhs, expected", [
    ((16, 1), (128,), (16, 128)),
    ((4, 1, 8), (3, 1), (4, 3, 8)),
    ((), (2, 3), (2, 3)),
    ((5, 1), (1, 7), (5, 7)),
    ((0, 3), (1, 3), (0, 3)),
])
def test_binary_broadcasting(lhs, rhs, expected):
    g = kgc.Graph("broadcast")
    a = g.input("a", lhs, "f32")
    b = g.input("b", rhs, "f32")
    total = a + b
    assert total.shape == expected
    g.output(total, g.maximum(b, a))
    with ir.Context() as context:
        module = reparse(g, context)
        assert result_types(module) == [f"tensor<{'x'.join(map(str, expected))}xf32>"] * 2


def test_matmul_batch_dimensions_broadcast():
    g = kgc.Graph("batched")
    a = g.input("a", (2, 1, 16, 64), "f16")
    b = g.input("b", (3, 64, 32), "f16")
    c = a @ b
    assert (c.shape, c.dtype) == ((2, 3, 16, 32), "f16")
    g.output(c)
    g.build()


def test_matmul_result_dtypes():
    g = kgc.Graph("dtypes")
    p = g.input("p", (16, 64), "f8e4m3")
    q = g.input("q", (64, 32), "f8e5m2")
    x = g.input("x", (16, 64), "f16")
    y = g.input("y", (64, 32), "f16")
    assert g.matmul(p, q).dtype == "f32"
    assert g.matmul(x, y).dtype == "f16"
    assert g.matmul(x, y, out_dtype="f32").dtype == "f32"
    g.output(g.matmul(p, q), g.matmul(x, y, out_dtype="f32"))
    assert result_types(g.build()) == ["tensor<16x32xf32>", "tensor<16x32xf32>"]


def test_fast_accum_matmul_of_8bit_floats_records_its_precision():
    # Either 8-bit float, and the two mixed; the result is f32 as without it.
    g = kgc.Graph("fast")
    p = g.input("p", (16, 64), "f8e4m3")
    q = g.input("q", (64, 32), "f8e5m2")
    fast = g.matmul(p, q, precision="fast_accum")
    assert (fast.shape, fast.dtype) == ((16, 32), "f32")
    g.output(fast, g.matmul(p, g.input("r", (64, 32), "f8e4m3"), precision="fast_accum",
                            out_dtype="bf16"))
    with ir.Context() as context:
        module = reparse(g, context)
        matmuls = [op for op in body_ops(module) if op.name == "kg.matmul"]
        assert [kg.Precision(ir.IntegerAttr(m.attributes["precision"]).value)
                for m in matmuls] == [kg.Precision.fast_accum] * 2
    assert result_types(g.build()) == ["tensor<16x32xf32>", "tensor<16x32xbf16>"]


def test_python_scalars_become_rank0_constants_of_the_other_dtype():
    g = kgc.Graph("scalars")
    x = g.input("x", (4, 8), "bf16")
    g.output(x + 1.0, 2 * x, 1 - x, x / 4, 3.0 ** x, x ** 2, -x, g.maximum(0, x))
    with ir.Context() as context:
        module = reparse(g, context)
        ops = body_ops(module)
        constants = [op for op in ops if op.name == "kg.constant"]
        assert [str(c.results[0].type) for c in constants] == ["tensor<bf16>"] * 7
        assert [float(ir.FloatAttr(c.attributes["value"]).value) for c in constants] == [
            1.0, 2.0, 1.0, 4.0, 3.0, 2.0, 0.0]
        # A scalar on the left stays on the left.
        subtract = next(op for op in ops if op.name == "kg.sub")
        assert subtract.operands[0].owner.name == "kg.constant"
        assert "kg.neg" in op_names(module)


def test_scalar_operand_failure_records_no_constant():
    g = kgc.Graph("no_leftovers")
    x = g.input("x", (4,), "f16")
    with pytest.raises(kgc.GraphError):
        g.mul(x, 1.0e5)  # beyond f16
    g.output(x)
    assert op_names(g.build()) == ["func.return"]


def test_negative_dims_are_normalized():
    g = kgc.Graph("negative")
    x = g.input("x", (4, 16, 32), "f16")
    total = g.sum(x, -1)
    means = g.mean(x, (0, -1), keepdim=True)
    assert total.shape == (4, 16) and means.shape == (1, 16, 1)
    probabilities = g.softmax(x)
    joined = g.concat([x, x], dim=-2)
    assert joined.shape == (4, 32, 32)
    permuted = g.transpose(x, (-1, 0, -2))
    assert permuted.shape == (32, 4, 16)
    g.output(total, means, probabilities, joined, permuted)
    text = g.to_mlir()
    assert "kg.reduce sum %arg0 dims [2] : tensor<4x16x32xf16> -> tensor<4x16xf16>" in text
    assert "kg.reduce mean %arg0 dims [0, 2] keepdim" in text
    assert "kg.softmax %arg0 dim 2" in text
    assert "dim 1 : (tensor<4x16x32xf16>, tensor<4x16x32xf16>) -> tensor<4x32x32xf16>" in text
    assert "kg.transpose %arg0 [2, 0, 1]" in text


def test_norm_shapes_default_from_weight_or_last_dim():
    g = kgc.Graph("norms")
    x = g.input("x", (4, 16, 32), "f32")
    w2 = g.input("w2", (16, 32), "f32")
    g.output(g.rms_norm(x), g.rms_norm(x, w2), g.layer_norm(x, bias=w2), g.layer_norm(x, eps=0.1))
    text = g.to_mlir()
    assert text.count("normalized_shape [32] eps") == 2
    assert text.count("normalized_shape [16, 32] eps") == 2
    assert "eps 1.000000e-01" in text


def test_reshape_infers_one_dimension():
    g = kgc.Graph("reshape")
    x = g.input("x", (16, 8, 16), "f8e5m2")
    assert g.reshape(x, (-1, 128)).shape == (16, 128)
    assert g.reshape(x, 2048).shape == (2048,)


def test_slice_sizes_give_the_result_shape():
    g = kgc.Graph("slices")
    x = g.input("x", (16, 128), "f32")
    s = g.slice(x, (0, 64), (16, 32), strides=(1, 2))
    g.output(s, g.slice(x, (15, 127), (1, 1)), g.slice(x, [3, 0], [0, 4]))
    text = g.to_mlir()
    assert ("kg.slice %arg0 offsets [0, 64] strides [1, 2] : "
            "tensor<16x128xf32> -> tensor<16x32xf32>") in text
    assert "offsets [15, 127] strides [1, 1] : tensor<16x128xf32> -> tensor<1x1xf32>" in text


# --------------------------------------------------------------------------
# The rmsnorm + matmul example
# --------------------------------------------------------------------------


def test_rmsnorm_matmul_example():
    g = kgc.Graph("rmsnorm_matmul")
    x = g.input("x", (16, 4096), "f16")
    w = g.input("w", (4096, 6144), "f16")
    gamma = g.input("gamma", (4096,), "f16")
    y = g.matmul(g.rms_norm(x, gamma, eps=1e-6), w)
    g.output(y)
    assert [t.name for t in g.inputs] == ["x", "w", "gamma"]
    assert g.outputs == (y,)

    op = g.build(context=None)
    assert isinstance(op, ir.Operation) and op.name == "builtin.module"
    function = op.regions[0].blocks[0].operations[0]
    assert function.attributes["sym_name"].value == "rmsnorm_matmul"
    assert str(function.attributes["function_type"]) == (
        "(tensor<16x4096xf16>, tensor<4096x6144xf16>, tensor<4096xf16>) -> tensor<16x6144xf16>")
    norm, matmul, ret = body_ops(op)
    assert (norm.name, matmul.name, ret.name) == ("kg.rms_norm", "kg.matmul", "func.return")
    arguments = list(function.regions[0].blocks[0].arguments)
    assert list(norm.operands) == [arguments[0], arguments[2]]
    assert list(norm.attributes["normalized_shape"]) == [4096]
    assert ir.FloatAttr(norm.attributes["eps"]).value == 1e-6
    assert list(matmul.operands) == [norm.results[0], arguments[1]]
    assert "precision" not in matmul.attributes
    assert list(ret.operands) == [matmul.results[0]]


# --------------------------------------------------------------------------
# Eager checks
# --------------------------------------------------------------------------


def _f32(g, name, shape):
    return g.input(name, shape, "f32")


# (id, graph -> None, substrings of the message). Each message names the op,
# the operands' shapes and dtypes, and the rule.
ERROR_CASES = [
    ("unary_fp8", lambda g: g.exp(g.input("x", (4, 8), "f8e4m3")),
     ["exp: x (4, 8) f8e4m3 must be f32, f16 or bf16"]),
    ("unary_not_a_tensor", lambda g: g.relu([1.0, 2.0]),
     ["relu: x must be a Tensor", "[1.0, 2.0]"]),
    ("gelu_approximate", lambda g: g.gelu(_f32(g, "x", (4, 8)), approximate="fast"),
     ["gelu: approximate must be 'none' or 'tanh'", "'fast'", "x (4, 8) f32"]),
    ("clamp_no_bounds", lambda g: g.clamp(_f32(g, "x", (4, 8))),
     ["clamp: needs a min, a max or both for x (4, 8) f32"]),
    ("clamp_min_above_max", lambda g: g.clamp(_f32(g, "x", (4, 8)), min=2, max=1),
     ["clamp: min 2.0 is greater than max 1.0 for x (4, 8) f32"]),
    ("binary_dtypes", lambda g: g.add(_f32(g, "a", (4, 8)), g.input("b", (8,), "f16")),
     ["add: operands must share an element type, got lhs (4, 8) f32 and rhs (8,) f16"]),
    ("binary_broadcast", lambda g: _f32(g, "a", (4, 8)) * _f32(g, "b", (4,)),
     ["mul: operands are not broadcast-compatible: lhs (4, 8) f32 and rhs (4,) f32 "
      "differ in dimension -1"]),
    ("binary_broadcast_leading", lambda g: g.sub(_f32(g, "a", (3, 1, 8)), _f32(g, "b", (2, 4, 8))),
     ["sub: operands are not broadcast-compatible: lhs (3, 1, 8) f32 and rhs (2, 4, 8) f32 "
      "differ in dimension -3"]),
    ("binary_fp8", lambda g: g.input("q", (8,), "f8e5m2") + 1.0,
     ["add: lhs (8,) f8e5m2 must be f32, f16, bf16, i32 or i64"]),
    ("binary_scalar_overflow", lambda g: g.input("h", (4, 8), "f16") * 1e5,
     ["mul: scalar rhs 100000.0 overflows f16, the dtype of lhs (4, 8) f16"]),
    ("binary_two_scalars", lambda g: g.div(1.0, 2.0),
     ["div: needs at least one Tensor operand"]),
    ("binary_bad_operand", lambda g: g.pow(_f32(g, "x", (4,)), "2"),
     ["pow: rhs must be a Tensor", "'2'"]),
    ("constant_overflow", lambda g: g.constant(70000.0, (2, 3), "f16"),
     ["constant: value 70000.0 overflows f16", "(2, 3)"]),
    ("constant_fp8", lambda g: g.constant(1.0, (2,), "f8e4m3"),
     ["constant: dtype f8e4m3 of a constant (2,) must be f32, f16, bf16, i1, i32 or i64"]),
    ("constant_negative_shape", lambda g: g.constant(1.0, (2, -3), "f32"),
     ["constant: shape (2, -3) has a negative dimension"]),
    ("cast_unknown_dtype", lambda g: g.cast(_f32(g, "x", (4,)), "int8"),
     ["cast: unknown dtype 'int8'", "f32, f16, bf16, f8e4m3, f8e5m2"]),
    ("matmul_k", lambda g: g.matmul(g.input("a", (16, 64), "f16"), g.input("b", (32, 8), "f16")),
     ["matmul: contracting dimensions differ: a (16, 64) f16 has K = 64, "
      "b (32, 8) f16 has K = 32"]),
    ("matmul_rank", lambda g: _f32(g, "a", (64,)) @ _f32(g, "b", (64, 8)),
     ["matmul: operand a (64,) f32 must have rank 2 or more"]),
    ("matmul_dtypes", lambda g: g.matmul(g.input("a", (16, 64), "f16"),
                                         g.input("b", (64, 8), "f8e4m3")),
     ["matmul: operands must share an element type (the two 8-bit floats may mix), "
      "got a (16, 64) f16 and b (64, 8) f8e4m3"]),
    ("matmul_precision_f16", lambda g: g.matmul(g.input("a", (16, 64), "f16"),
                                                g.input("b", (64, 8), "f16"), precision="tf32"),
     ["matmul: precision applies to f32 operands only, got a (16, 64) f16 and b (64, 8) f16"]),
    ("matmul_precision_value", lambda g: g.matmul(_f32(g, "a", (16, 64)), _f32(g, "b", (64, 8)),
                                                  precision="fast"),
     ["matmul: precision must be None, 'ieee', 'tf32' or 'fast_accum', got 'fast'",
      "a (16, 64) f32 and b (64, 8) f32"]),
    ("matmul_fast_accum_f16", lambda g: g.matmul(g.input("a", (16, 64), "f16"),
                                                 g.input("b", (64, 8), "f16"),
                                                 precision="fast_accum"),
     ["matmul: precision = fast_accum applies to 8-bit float operands only, got a (16, 64) f16 "
      "and b (64, 8) f16"]),
    ("matmul_fast_accum_f32", lambda g: g.matmul(_f32(g, "a", (16, 64)), _f32(g, "b", (64, 8)),
                                                 precision="fast_accum"),
     ["matmul: precision = fast_accum applies to 8-bit float operands only, got a (16, 64) f32 "
      "and b (64, 8) f32"]),
    ("matmul_tf32_f8", lambda g: g.matmul(g.input("a", (16, 64), "f8e4m3"),
                                          g.input("b", (64, 8), "f8e4m3"), precision="tf32"),
     ["matmul: precision applies to f32 operands only, got a (16, 64) f8e4m3"]),
    ("matmul_batch", lambda g: g.matmul(_f32(g, "a", (2, 16, 64)), _f32(g, "b", (3, 64, 8))),
     ["matmul: batch dimensions of a (2, 16, 64) f32 and b (3, 64, 8) f32 are not "
      "broadcast-compatible"]),
    ("matmul_out_dtype", lambda g: g.matmul(_f32(g, "a", (16, 64)), _f32(g, "b", (64, 8)),
                                            out_dtype="f8e5m2"),
     ["matmul: out_dtype must be f32, f16 or bf16, got f8e5m2 for a (16, 64) f32 and "
      "b (64, 8) f32"]),
    ("reduce_dim_range", lambda g: g.sum(_f32(g, "x", (4, 8)), 2),
     ["sum: dimension 2 is out of range for x (4, 8) f32 (rank 2)"]),
    ("reduce_dim_range_negative", lambda g: g.max(_f32(g, "x", (4, 8)), (-3,)),
     ["max: dimension -3 is out of range for x (4, 8) f32 (rank 2)"]),
    ("reduce_dim_twice", lambda g: g.mean(g.input("x", (4, 8), "bf16"), (1, -1)),
     ["mean: dimension -1 appears twice in dims (1, -1) for x (4, 8) bf16"]),
    ("reduce_no_dims", lambda g: g.min(_f32(g, "x", (4, 8)), ()),
     ["min: needs at least one dimension to reduce x (4, 8) f32"]),
    ("reduce_fp8", lambda g: g.sum(g.input("x", (4, 8), "f8e4m3"), 0),
     ["sum: x (4, 8) f8e4m3 must be f32, f16 or bf16"]),
    ("softmax_dim", lambda g: g.softmax(_f32(g, "x", (4, 8)), dim=2),
     ["softmax: dim 2 is out of range for x (4, 8) f32 (rank 2)"]),
    ("softmax_rank0", lambda g: g.softmax(_f32(g, "x", ())),
     ["softmax: dim -1 is out of range for x () f32 (rank 0)"]),
    ("rms_norm_shape", lambda g: g.rms_norm(_f32(g, "x", (16, 128)), _f32(g, "w", (64,))),
     ["rms_norm: normalized_shape (64,) (the shape of weight) must equal the trailing "
      "dimensions of x (16, 128) f32"]),
    ("rms_norm_weight_shape", lambda g: g.rms_norm(_f32(g, "x", (4, 16, 128)), _f32(g, "w", (128,)),
                                                   normalized_shape=(16, 128)),
     ["rms_norm: weight (128,) f32 must have shape normalized_shape (16, 128) of x "
      "(4, 16, 128) f32"]),
    ("rms_norm_weight_dtype", lambda g: g.rms_norm(g.input("x", (16, 128), "f16"),
                                                   g.input("w", (128,), "bf16")),
     ["rms_norm: weight (128,) bf16 must have the element type of x (16, 128) f16"]),
    ("rms_norm_eps", lambda g: g.rms_norm(_f32(g, "x", (16, 128)), eps=0.0),
     ["rms_norm: eps must be positive, got 0.0 for x (16, 128) f32"]),
    ("layer_norm_bias_shape", lambda g: g.layer_norm(_f32(g, "x", (16, 128)), _f32(g, "w", (128,)),
                                                     _f32(g, "b", (64,))),
     ["layer_norm: bias (64,) f32 must have shape normalized_shape (128,) of x (16, 128) f32"]),
    ("layer_norm_normalized_shape", lambda g: g.layer_norm(_f32(g, "x", (16, 128)),
                                                           normalized_shape=(16, 128, 1)),
     ["layer_norm: normalized_shape (16, 128, 1) must equal the trailing dimensions of "
      "x (16, 128) f32"]),
    ("transpose_length", lambda g: g.transpose(_f32(g, "x", (4, 8)), (0,)),
     ["transpose: permutation (0,) must have one entry per dimension of x (4, 8) f32"]),
    ("transpose_not_permutation", lambda g: g.transpose(_f32(g, "x", (4, 8)), (0, 0)),
     ["transpose: permutation (0, 0) is not a permutation of [0, 2) for x (4, 8) f32"]),
    ("t_rank", lambda g: g.t(g.input("x", (2, 4, 8), "f16")),
     ["t: x (2, 4, 8) f16 must be 2-D"]),
    ("reshape_elements", lambda g: g.reshape(_f32(g, "x", (4, 8)), (3, 10)),
     ["reshape: result (3, 10) f32 holds 30 elements but x (4, 8) f32 holds 32"]),
    ("reshape_two_unknowns", lambda g: g.reshape(_f32(g, "x", (4, 8)), (-1, -1)),
     ["reshape: only one -1 is allowed in shape (-1, -1) for x (4, 8) f32"]),
    ("reshape_uninferrable", lambda g: g.reshape(_f32(g, "x", (4, 8)), (-1, 5)),
     ["reshape: cannot infer the -1 in (-1, 5): x (4, 8) f32 holds 32 elements"]),
    ("broadcast_rank", lambda g: g.broadcast_to(_f32(g, "x", (4, 8)), (8,)),
     ["broadcast_to: cannot broadcast x (4, 8) f32 to the lower rank of (8,)"]),
    ("broadcast_dim", lambda g: g.broadcast_to(_f32(g, "x", (4, 8)), (2, 4, 16)),
     ["broadcast_to: cannot broadcast x (4, 8) f32 to (2, 4, 16) f32: dimension 1 is 8, "
      "not 1 or 16"]),
    ("concat_dtype", lambda g: g.concat([_f32(g, "a", (4, 8)), g.input("b", (4, 8), "f16")], 0),
     ["concat: input #1 (4, 8) f16 must have the element type of input #0 (4, 8) f32"]),
    ("concat_other_dim", lambda g: g.concat([_f32(g, "a", (4, 8)), _f32(g, "b", (5, 8))], 1),
     ["concat: input #1 (5, 8) f32 differs from input #0 (4, 8) f32 in dimension 0, "
      "which is not the concat dimension 1"]),
    ("concat_rank", lambda g: g.concat([_f32(g, "a", (4, 8)), _f32(g, "b", (8,))], 0),
     ["concat: input #1 (8,) f32 must have the rank of input #0 (4, 8) f32"]),
    ("concat_dim", lambda g: g.concat([_f32(g, "a", (4, 8))], 2),
     ["concat: dim 2 is out of range for input #0 (4, 8) f32 (rank 2)"]),
    ("concat_empty", lambda g: g.concat([], 0), ["concat: needs at least one input"]),
    ("slice_past_end", lambda g: g.slice(_f32(g, "x", (16, 128)), (0, 64), (16, 33), (1, 2)),
     ["slice: dimension 1 reads index 128, past the end of x (16, 128) f32"]),
    ("slice_negative_offset", lambda g: g.slice(_f32(g, "x", (16, 128)), (-1, 0), (1, 1)),
     ["slice: offset -1 of dimension 0 is negative for x (16, 128) f32"]),
    ("slice_stride", lambda g: g.slice(_f32(g, "x", (16, 128)), (0, 0), (1, 1), (1, 0)),
     ["slice: stride 0 of dimension 1 must be positive for x (16, 128) f32"]),
    ("slice_lengths", lambda g: g.slice(_f32(g, "x", (16, 128)), (0,), (1, 1)),
     ["slice: offsets (0,), sizes (1, 1) and strides (1, 1) must have one entry per "
      "dimension of x (16, 128) f32"]),
    ("input_name_invalid", lambda g: g.input("2x", (4,), "f32"),
     ["input: name '2x' is not a valid name"]),
    ("input_name_taken", lambda g: (_f32(g, "x", (4,)), _f32(g, "x", (8,))),
     ["input: the graph already has an input named 'x'"]),
    ("input_dtype", lambda g: g.input("x", (4,), "f64"), ["input: unknown dtype 'f64'"]),
    ("input_shape", lambda g: g.input("x", (4, 2.5), "f32"),
     ["input: shape must be an integer, got 2.5"]),
    ("output_nothing", lambda g: g.output(), ["output: needs at least one Tensor"]),
    ("build_without_outputs", lambda g: (_f32(g, "x", (4,)), g.build()),
     ["build: graph 'errors' has no outputs; call output() first"]),
]


@pytest.mark.parametrize("build, expected", [case[1:] for case in ERROR_CASES],
                         ids=[case[0] for case in ERROR_CASES])
def test_graph_error(build, expected):
    g = kgc.Graph("errors")
    with pytest.raises(kgc.GraphError) as raised:
        build(g)
    for text in expected:
        assert text in str(raised.value)


def test_tensors_of_another_graph_are_rejected():
    first, second = kgc.Graph("first"), kgc.Graph("second")
    x = first.input("x", (4, 8), "f32")
    y = second.input("y", (4, 8), "f32")
    for call in (lambda: second.relu(x), lambda: y + x, lambda: second.concat([y, x], 0),
                 lambda: second.output(x), lambda: second.rms_norm(y, x, normalized_shape=(4, 8))):
        with pytest.raises(kgc.GraphError, match=r"\(4, 8\) f32 belongs to graph 'first', "
                                                 r"not 'second'"):
            call()


# (id, graph -> None, the same op in a file, how the graph API writes its types)
VERIFIER_CASES = [
    ("broadcast", lambda g: _f32(g, "a", (4, 8)) * _f32(g, "b", (4,)),
     "%r = kg.mul %a, %b : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>",
     {"tensor<4x8xf32>": "(4, 8) f32", "tensor<4xf32>": "(4,) f32"}),
    ("precision", lambda g: g.matmul(g.input("a", (16, 64), "f16"),
                                     g.input("b", (64, 8), "f16"), precision="tf32"),
     "%r = kg.matmul %a, %b precision = tf32 : (tensor<16x64xf16>, tensor<64x8xf16>) "
     "-> tensor<16x8xf16>",
     {"tensor<16x64xf16>": "(16, 64) f16", "tensor<64x8xf16>": "(64, 8) f16"}),
    ("fast_accum", lambda g: g.matmul(g.input("a", (16, 64), "bf16"),
                                      g.input("b", (64, 8), "bf16"), precision="fast_accum"),
     "%r = kg.matmul %a, %b precision = fast_accum : (tensor<16x64xbf16>, tensor<64x8xbf16>) "
     "-> tensor<16x8xbf16>",
     {"tensor<16x64xbf16>": "(16, 64) bf16", "tensor<64x8xbf16>": "(64, 8) bf16"}),
    ("concat", lambda g: g.concat([_f32(g, "a", (4, 8)), _f32(g, "b", (5, 8))], 1),
     "%r = kg.concat %a, %b dim 1 : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x16xf32>",
     {"tensor<4x8xf32>": "(4, 8) f32", "tensor<5x8xf32>": "(5, 8) f32"}),
]


@pytest.mark.parametrize("call, text, types", [case[1:] for case in VERIFIER_CASES],
                         ids=[case[0] for case in VERIFIER_CASES])
def test_shape_errors_are_the_verifiers_messages(call, text, types):
    """The graph API checks an op by running the kg verifier on it: its
    error is the verifier's message for the same op in a file, `<op>: `
    for `'kg.<op>' op `, with the types written as the graph API writes
    them."""
    g = kgc.Graph("errors")
    with pytest.raises(kgc.GraphError) as raised:
        call(g)
    a_type, b_type = types
    source = f"func.func @f(%a: {a_type}, %b: {b_type}) {{\n{text}\nreturn\n}}"
    with ir.Context() as context, pytest.raises(KgcError) as verifier:
        parse_text(source, "f.mlir", context)
    message = str(verifier.value).split("error: ", 1)[1].splitlines()[0]
    op, rule = message.split(" op ", 1)
    expected = f"{op.strip(chr(39)).removeprefix('kg.')}: {rule}"
    for mlir_type, graph_type in types.items():
        expected = expected.replace(f"'{mlir_type}'", graph_type)
    assert "tensor<" not in expected
    assert str(raised.value) == expected


def test_graph_name_must_be_a_symbol():
    with pytest.raises(kgc.GraphError, match="Graph: name 'my graph' is not a valid name"):
        kgc.Graph("my graph")


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_constant_overflow_check_matches_the_verifier(dtype):
    """Graph.constant rejects exactly the finite values that the kg.constant
    verifier rejects: from the largest finite value plus half an ulp up."""
    threshold = {"f32": 2.0**128 - 2.0**103, "f16": 65520.0, "bf16": 2.0**128 - 2.0**119}[dtype]
    below = math.nextafter(threshold, 0.0)

    def verifies(value: float) -> bool:
        with ir.Context() as context:
            text = f"%c = kg.constant {value!r} : tensor<{dtype}>"
            try:
                parse_text(f"func.func @f() {{\n{text}\nreturn\n}}", "c.mlir", context)
            except KgcError:
                return False
            return True

    assert verifies(below) and not verifies(threshold)
    g = kgc.Graph("constants")
    g.output(g.constant(below, (), dtype), g.constant(-below, (2,), dtype),
             g.constant(float("-inf"), (2,), dtype))
    assert g.build().verify()
    with pytest.raises(kgc.GraphError, match=f"overflows {dtype}"):
        g.constant(-threshold, (), dtype)


# --------------------------------------------------------------------------
# Building, dtypes and text
# --------------------------------------------------------------------------


def test_build_into_a_given_context_and_keep_the_op_alive():
    g = kgc.Graph("contexts")
    x = g.input("x", (4,), "f32")
    g.output(g.exp(x))
    context = ir.Context()
    op = g.build(context=context)
    assert op.context is context
    fresh = g.build()
    del context
    gc.collect()
    assert fresh.context is not op.context
    assert op.verify() and fresh.verify()
    assert str(op) == str(fresh) == g.to_mlir()


@pytest.mark.parametrize("context", [5, "context"])
def test_build_names_a_context_that_is_not_one(context):
    g = kgc.Graph("contexts")
    g.output(g.exp(g.input("x", (4,), "f32")))
    with pytest.raises(kgc.GraphError, match=r"build: context must be an mlir\.ir\.Context \(or "
                                             r"None for a new one\), got .* \((int|str|type)\)$"):
        g.build(context=context)


def test_ops_carry_the_location_of_the_calling_line():
    g = kgc.Graph("located")
    x = g.input("x", (4,), "f32")
    line = inspect.currentframe().f_lineno + 1
    y = g.relu(x) + 1.0
    g.output(y)
    text = g.build().get_asm(enable_debug_info=True)
    assert f'test_graph.py":{line}:' in text
    assert "loc(unknown)" not in text


def test_dtype_spellings():
    g = kgc.Graph("dtypes")
    assert g.input("a", (1,), "F32").dtype == "f32"
    assert g.input("b", (1,), "bfloat16").dtype == "bf16"
    assert g.input("c", (1,), "f8E4M3FN").dtype == "f8e4m3"
    assert g.input("d", [2, 3], "float8_e5m2").shape == (2, 3)
    assert g.cast(g.inputs[0], "float16").dtype == "f16"


def test_torch_dtypes_are_accepted():
    torch = pytest.importorskip("torch")
    g = kgc.Graph("torch_dtypes")
    expected = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2"}
    for index, (dtype, name) in enumerate(expected.items()):
        assert g.input(f"x{index}", torch.Size([2, 3]), dtype).dtype == name
    with pytest.raises(kgc.GraphError, match="unknown dtype torch.int8"):
        g.input("bad", (2,), torch.int8)


def test_outputs_accumulate_in_order():
    g = kgc.Graph("outputs")
    x = g.input("x", (4,), "f16")
    y = g.input("y", (2, 4), "f16")
    g.output(y)
    g.output(x, g.sqrt(x))
    assert result_types(g.build()) == ["tensor<2x4xf16>", "tensor<4xf16>", "tensor<4xf16>"]


def test_text_round_trips_through_kgc_opt():
    g = kgc.Graph("round_trip")
    x = g.input("x", (8, 64), "bf16")
    w = g.input("w", (64, 32), "bf16")
    b = g.input("b", (32,), "bf16")
    h = g.silu(x @ w + b)
    g.output(g.softmax(g.layer_norm(h, eps=1e-5) * 0.5), g.sum(h, (0, 1)))
    text = g.to_mlir()
    result = subprocess.run([console_script("kgc-opt")], input=text, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == text.strip()


def test_origin_names_the_source_of_the_ops_recorded_under_it():
    g = kgc.Graph("named")
    x = g.input("x", (4, 8), "f32")
    with g.origin("aten.relu.default:relu"):
        y = g.relu(x)
        with g.origin("aten.exp.default:exp"):
            z = g.exp(y)
        w = g.neg(z)
    g.output(g.abs(w))
    text = g.build().get_asm(enable_debug_info=True)
    relu, exp, neg, absolute = (next(line for line in text.splitlines() if f"kg.{op} " in line)
                                for op in ("relu", "exp", "neg", "abs"))
    aliases = {line.split(" = ")[0]: line.split(" = ", 1)[1] for line in text.splitlines()
               if line.startswith("#loc")}

    def location(line):
        alias = line.rsplit("loc(", 1)[1].rstrip(")")
        return aliases.get(alias, alias)

    assert location(relu).startswith('loc("aten.relu.default:relu"(')
    assert location(exp).startswith('loc("aten.exp.default:exp"(')
    assert location(neg).startswith('loc("aten.relu.default:relu"(')  # the outer origin again
    assert not location(absolute).startswith('loc("aten')  # outside: the Python line only
    with pytest.raises(kgc.GraphError, match="origin: name must be a string"):
        with g.origin(3):
            pass


# -- Mirage's keywords -------------------------------------------------------------


def test_new_input_takes_mirage_s_row_major_strides():
    g = kgc.new_kernel_graph("strided")
    x = g.new_input(dims=(3, 17), strides=(17, 1), dtype=kgc.float32)
    # A dimension of one element is never stepped over: any stride will do.
    row = g.new_input(dims=(1, 17), strides=(5, 1), dtype=kgc.float32)
    g.mark_output(g.add(x, row))
    assert [t.shape for t in g.inputs] == [(3, 17), (1, 17)]
    assert "func.func @strided" in g.to_mlir()


@pytest.mark.parametrize("dims,strides", [((3, 17), (1, 3)), ((3, 17), (17,)),
                                          ((2, 3, 4), (12, 4, 2))])
def test_new_input_refuses_strides_that_are_not_row_major(dims, strides):
    g = kgc.new_kernel_graph()
    with pytest.raises(kgc.GraphError, match=rf"new_input: strides {re.escape(str(strides))} are "
                                             r"not the row-major strides .* kgc's inputs are "
                                             r"dense and row-major"):
        g.new_input(dims=dims, strides=strides, dtype=kgc.float16)
    assert g.inputs == ()


def test_superoptimize_takes_mirage_s_triton_backend():
    g = kgc.new_kernel_graph()
    g.mark_output(g.relu(g.new_input(dims=(3, 17), dtype=kgc.float32)))
    try:
        g.superoptimize(backend="triton", effort="low", cache=False)
    except KgcError as error:  # without a GPU: the search's own reason, not the keyword
        assert "backend" not in str(error) and "CUDA" in str(error)


@pytest.mark.parametrize("backend", ["cuda", "nki", ""])
def test_superoptimize_refuses_other_backends_before_searching(backend):
    g = kgc.new_kernel_graph()
    g.mark_output(g.relu(g.new_input(dims=(3, 17), dtype=kgc.float32)))
    for search in (lambda: g.superoptimize(backend=backend),
                   lambda: kgc.superoptimize(g, backend=backend)):
        with pytest.raises(KgcError, match=rf"superoptimize: backend '{backend}' is not "
                                           r"available: kgc generates Triton kernels only"):
            search()
