"""The kg dialect from Python: `import kgc` registers it for every new
Context, `kgc.dialects.kg` builds its ops with the builders generated from
ODS, ops read back from IR have their generated classes, and
`kgc.load_dialect` serves a Context made before the import."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from mlir import ir
from mlir.dialects import func

import kgc
from kgc.dialects import kg


@pytest.fixture
def context():
    with ir.Context() as ctx, ir.Location.unknown():
        yield ctx


def tensor(*shape: int, element: ir.Type | None = None) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), element or ir.F32Type.get())


def body_ops(function: func.FuncOp) -> list[ir.OpView]:
    return list(function.regions[0].blocks[0].operations)


def test_new_context_has_the_kg_dialect(context):
    assert context.is_registered_operation("kg.exp")
    assert context.is_registered_operation("kg.kernel")
    assert context.dialects["kg"].descriptor.namespace == "kg"
    module = ir.Module.parse(
        "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = kg.exp %x : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
    )
    assert module.operation.verify()
    assert "kg.exp %arg0 : tensor<4xf32>" in str(module)


def test_every_new_context_has_it(context):
    with ir.Context() as other:
        assert other.is_registered_operation("kg.matmul")


def test_builders_build_ops_in_a_function_that_verifies(context):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(16, 64), tensor(64, 32))
        def graph(a, b):
            e = kg.exp(a)
            m = kg.matmul(tensor(16, 32), e, b, precision=kg.Precision.tf32)
            r = kg.reduce(tensor(16, 1), kg.ReduceKind.max, m, [1], keepdim=True)
            return kg.gelu(r, approximate=kg.GeluApproximation.tanh)

    assert module.operation.verify()
    text = str(module)
    assert "kg.exp %arg0 : tensor<16x64xf32>" in text
    assert ("kg.matmul %0, %arg1 precision = tf32 : (tensor<16x64xf32>, tensor<64x32xf32>) "
            "-> tensor<16x32xf32>") in text
    assert "kg.reduce max %1 dims [1] keepdim : tensor<16x32xf32> -> tensor<16x1xf32>" in text
    assert "kg.gelu %2 approximate = tanh : tensor<16x1xf32>" in text
    # The printed module parses back to the same text.
    assert str(ir.Module.parse(text)) == text


def test_builders_infer_result_types(context):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(4, 8, element=ir.F16Type.get()))
        def unary(x):
            return kg.sigmoid(kg.neg(kg.exp(x)))

    assert module.operation.verify()
    ops = body_ops(unary.func_op)
    assert [str(op.results[0].type) for op in ops[:3]] == ["tensor<4x8xf16>"] * 3


def test_enum_attributes_of_every_kind(context):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(4, 16))
        def reductions(x):
            return tuple(kg.reduce(tensor(4), kind, x, [1]) for kind in kg.ReduceKind)

    assert module.operation.verify()
    printed = [str(op) for op in body_ops(reductions.func_op)[:4]]
    for kind, text in zip(["sum", "max", "min", "mean"], printed, strict=True):
        assert text.startswith("%") and f"kg.reduce {kind} " in text
    assert [int(kind) for kind in kg.ReduceKind] == [0, 1, 2, 3]
    assert str(kg.Precision.tf32) == "tf32" and str(kg.GeluApproximation.none) == "none"


def test_a_kernel_op_with_a_graph_body(context):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(16, 128), tensor(128))
        def fused(a, b):
            kernel = kg.KernelOp([tensor(16, 128)], "add_relu", [a, b])
            block = kernel.regions[0].blocks.append(tensor(16, 128), tensor(128))
            with ir.InsertionPoint(block):
                s = kg.add(tensor(16, 128), block.arguments[0], block.arguments[1])
                kg.YieldOp([kg.relu(s)])
            return kernel.results[0]

    assert module.operation.verify(), str(module)
    text = str(module)
    assert ("kg.kernel @add_relu(%arg0, %arg1) : (tensor<16x128xf32>, tensor<128xf32>) "
            "-> tensor<16x128xf32>") in text
    assert "kg.yield" in text


def test_a_verifier_error_from_a_builder(context):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(16, 64), tensor(32, 8))
        def bad(a, b):
            return kg.matmul(tensor(16, 8), a, b)

    with pytest.raises(ir.MLIRError, match="'kg.matmul' op contracting dimensions differ"):
        module.operation.verify()


def test_ops_read_back_from_ir_have_their_generated_classes(context):
    module = ir.Module.parse(
        "func.func @f(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4xf32> {\n"
        "  %0 = kg.reduce max %x dims [1] : tensor<4x16xf32> -> tensor<4xf32>\n"
        "  %1 = kg.matmul %x, %w precision = tf32 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
    )
    reduce, matmul, _ = body_ops(module.body.operations[0])
    assert isinstance(reduce, kg.ReduceOp)
    assert isinstance(matmul, kg.MatmulOp)
    assert int(reduce.kind) == kg.ReduceKind.max
    assert list(reduce.dims) == [1]
    assert int(matmul.precision) == kg.Precision.tf32


def test_kgc_exports_the_dialect_helpers():
    assert kgc.kg is kg
    from kgc import _dialect

    assert (kgc.load_dialect, kgc.register_dialect) == (_dialect.load_dialect,
                                                        _dialect.register_dialect)


def test_context_made_before_import_needs_load_dialect():
    script = textwrap.dedent("""
        from mlir import ir

        TEXT = '''
        func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
          %0 = kg.exp %x : tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        '''
        early = ir.Context()
        early_with_registry = ir.Context()
        import kgc
        from kgc.dialects import kg

        assert not early.is_registered_operation("kg.exp")
        try:
            ir.Module.parse(TEXT, early)
        except ir.MLIRError as error:
            assert "Dialect `kg' not found" in str(error), str(error)
        else:
            raise AssertionError("kg parsed in a context that predates import kgc")

        kgc.load_dialect(early)
        assert early.is_registered_operation("kg.exp")
        module = ir.Module.parse(TEXT, early)
        assert module.operation.verify()
        with early, ir.Location.unknown():
            block = module.body.operations[0].regions[0].blocks[0]
            with ir.InsertionPoint.at_block_begin(block):
                kg.neg(block.arguments[0])
        assert module.operation.verify()
        assert "kg.neg" in str(module)

        # register_dialect fills a registry that a context then takes.
        assert not early_with_registry.is_registered_operation("kg.exp")
        registry = ir.DialectRegistry()
        kgc.register_dialect(registry)
        early_with_registry.append_dialect_registry(registry)
        module = ir.Module.parse(TEXT, early_with_registry)
        assert early_with_registry.is_registered_operation("kg.exp")
        assert module.operation.verify()
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
