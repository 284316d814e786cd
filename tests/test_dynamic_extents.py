"""Dynamic extents (`?`): what the graph API, the verifiers and the passes
do with a size that each call gives.

A graph has at most one dynamic extent; the Python API names it, the IR
writes it `?`. The passes down to kg-pad-mask take it (kg-fuse and the
schedules decide as at `EXTENT_HINT` rows; pointwise, reduction and matmul kernels
are tiled once for every size, which the CPU executor runs), and
convert-kg-to-ttir passes the size to each kernel; plans that hold at one
size only, and the runtime, which does not launch them yet, refuse it with an
error naming the value or the rule, never with a wrong result.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from mlir import ir

import kgc
from kgc.diagnostics import KgcError
from kgc.passes import registered_passes
from kgc.pipeline import Pipeline
from tests.comparison import as_tuple
from tests.kg_stage import compiled_to_kg, run_as_the_reference
from tests.tools import console_script

DYNAMIC_ROWS = """\
func.func @rows(%x: tensor<?x128xf32>, %w: tensor<128xf32>) -> tensor<?x128xf32> {
  %n = kg.rms_norm %x weight %w normalized_shape [128] eps 1.0e-6 : (tensor<?x128xf32>, tensor<128xf32>) -> tensor<?x128xf32>
  %y = kg.softmax %n dim 1 : tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
"""


def run_kgc_opt(text: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([console_script("kgc-opt"), "-", *args], input=text,
                          capture_output=True, text=True, timeout=120)


def _prefill_graph() -> tuple[kgc.Graph, kgc.Tensor]:
    g = kgc.Graph("prefill")
    x = g.input("x", ("tokens", 128), "f16")
    w = g.input("w", (128, 64), "f16")
    gamma = g.input("gamma", (128,), "f16")
    y = g.softmax(g.matmul(g.rms_norm(x, gamma), w) + 1.0, -1)
    return g, y


# -- the graph API --------------------------------------------------------------


def test_ops_keep_the_named_extent_where_numpy_keeps_a_number():
    g, y = _prefill_graph()
    heads = g.reshape(y, ("tokens", 4, -1))
    assert heads.shape == ("tokens", 4, 16)
    assert g.transpose(heads, (1, 0, 2)).shape == (4, "tokens", 16)
    assert g.sum(y, 1).shape == ("tokens",)
    assert g.sum(y, 0, keepdim=True).shape == (1, 64)
    stretched = g.broadcast_to(g.sum(y, 1, keepdim=True), (2, "tokens", 64))
    assert stretched.shape == (2, "tokens", 64)
    assert g.slice(y, (0, 8), ("tokens", 8), (1, 2)).shape == ("tokens", 8)
    assert g.dynamic_extent == "tokens"
    g.output(y, stretched)
    text = g.to_mlir()
    assert ("func.func @prefill(%arg0: tensor<?x128xf16>, %arg1: tensor<128x64xf16>, "
            "%arg2: tensor<128xf16>) -> (tensor<?x64xf16>, tensor<2x?x64xf16>)") in text
    assert "kg.matmul %0, %arg1 : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>" \
        in text


def test_a_graph_without_a_named_extent_has_none():
    g = kgc.Graph("static")
    g.output(g.exp(g.input("x", (3, 4), "f32")))
    assert g.dynamic_extent is None
    assert "?" not in g.to_mlir()


@pytest.mark.parametrize("write, message", [
    (lambda g, x: g.input("y", ("batch", 3), "f16"),
     "input: shape ('batch', 3) names 'batch', but a graph has one dynamic extent and its "
     "dynamic extent is 'tokens'"),
    (lambda g, x: g.add(x, g.input("q", (4, 128), "f16")),
     "add: operands are not broadcast-compatible: lhs ('tokens', 128) f16 and rhs (4, 128) f16 "
     "differ in dimension -2"),
    (lambda g, x: g.concat([x, x], 0),
     "concat: input #0 ('tokens', 128) f16 has the dynamic extent 'tokens' in the concat "
     "dimension 0; concat joins static extents only"),
    (lambda g, x: g.slice(x, (1, 0), ("tokens", 128)),
     "slice: dimension 0 of x ('tokens', 128) f16 is the dynamic extent 'tokens'; it is taken "
     "whole (offset 0, size 'tokens', stride 1)"),
    (lambda g, x: g.reshape(x, (-1,)),
     "reshape: x ('tokens', 128) f16 and shape (-1,) must each name the dynamic extent "
     "'tokens' once"),
    (lambda g, x: g.reshape(x, ("tokens", 100)),
     "reshape: result ('tokens', 100) f16 holds 100 elements per unit of the dynamic extent but "
     "x ('tokens', 128) f16 holds 128"),
    (lambda g, x: g.constant(1.0, ("tokens", 4), "f32"),
     "constant: shape ('tokens', 4) names the dynamic extent 'tokens', but the shape of "
     "constant is static"),
    (lambda g, x: g.broadcast_to(g.input("s", (4, 128), "f16"), ("tokens", 128)),
     "broadcast_to: cannot broadcast x (4, 128) f16 to ('tokens', 128) f16: dimension 0 is 4, "
     "not 1 or ?"),
    (lambda g, x: g.matmul(g.input("a", (4, "tokens"), "f16"), g.input("b", (16, 4), "f16")),
     "matmul: contracting dimensions differ: a (4, 'tokens') f16 has K = ?, b (16, 4) f16 has "
     "K = 16"),
], ids=["second-name", "against-static", "concat", "slice", "reshape-flat", "reshape-count",
        "constant", "broadcast-static", "matmul-k"])
def test_an_op_that_holds_at_one_size_only_is_refused_where_it_is_written(write, message):
    g = kgc.Graph("bad")
    x = g.input("x", ("tokens", 128), "f16")
    with pytest.raises(kgc.GraphError) as raised:
        write(g, x)
    assert message in str(raised.value)


def test_an_input_that_fails_sets_no_dynamic_extent():
    g = kgc.Graph("g")
    with pytest.raises(kgc.GraphError):
        g.input("x", ("tokens", 4), "f7")  # no such dtype
    with pytest.raises(kgc.GraphError):
        g.input("y", ("tokens", -4), "f16")
    assert g.dynamic_extent is None
    assert g.input("z", ("rows", 4), "f16").shape == ("rows", 4)
    assert g.dynamic_extent == "rows"


def test_the_verifier_rules_for_dynamic_extents_hold_in_the_ir_too():
    # The same rules, from text: a `?` against 4 fails where the op is.
    text = """\
func.func @f(%a: tensor<?x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = kg.add %a, %b : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
"""
    result = run_kgc_opt(text)
    assert result.returncode == 1
    assert "2:8: error: 'kg.add' op operands are not broadcast-compatible" in result.stderr


# -- the passes ---------------------------------------------------------------------

def test_every_pass_of_kgc_takes_dynamic_extents():
    assert {name for name, cls in registered_passes().items() if cls.static_extents_only} == set()


def test_a_pass_that_plans_static_extents_only_names_the_dynamic_value():
    # What a pass that sets `static_extents_only` (one of a user's) fails with.
    from kgc.passes.registry import dynamic_extent_failure

    with ir.Context() as context:
        kgc.load_dialect(context)
        module = ir.Module.parse(DYNAMIC_ROWS)
        failure = dynamic_extent_failure(module.operation, "my-pass")
    assert failure.message == ("my-pass plans static extents only: argument #0 of @rows has "
                               "type tensor<?x128xf32>, with a dynamic extent (`?`)")


def test_decompose_cse_and_dce_keep_the_dynamic_extent():
    with ir.Context() as context:
        kgc.load_dialect(context)
        module = ir.Module.parse(DYNAMIC_ROWS)
        Pipeline.parse("builtin.module(kg-decompose,kgc-cse,kgc-dce)").run(module)
        text = str(module)
    assert "kg.softmax" not in text and "kg.rms_norm" not in text
    assert "kg.reduce sum %0 dims [1] keepdim : tensor<?x128xf32> -> tensor<?x1xf32>" in text
    assert "-> tensor<?x128xf32>" in text.splitlines()[1]


ATTENTION_OF_A_DYNAMIC_COUNT = """\
func.func @attend(%q: tensor<?x64xf32>, %k: tensor<128x64xf32>, %v: tensor<128x64xf32>) -> tensor<?x64xf32> {
  %kt = kg.transpose %k [1, 0] : tensor<128x64xf32> -> tensor<64x128xf32>
  %s = kg.matmul %q, %kt : (tensor<?x64xf32>, tensor<64x128xf32>) -> tensor<?x128xf32>
  %c = kg.constant 0.125 : tensor<f32>
  %scaled = kg.mul %s, %c : (tensor<?x128xf32>, tensor<f32>) -> tensor<?x128xf32>
  %p = kg.softmax %scaled dim 1 : tensor<?x128xf32>
  %o = kg.matmul %p, %v : (tensor<?x128xf32>, tensor<128x64xf32>) -> tensor<?x64xf32>
  return %o : tensor<?x64xf32>
}
"""


def test_a_kernel_whose_schedule_takes_no_dynamic_extent_is_refused_where_it_was_written():
    # A kernel written as one in the IR: kg-tile cannot regroup it. Attention
    # takes the extent along its keys, not its queries.
    text = """func.func @f(%q: tensor<?x64xf16>, %k: tensor<128x64xf16>, %v: tensor<128x64xf16>) -> tensor<?x64xf16> {
  %o = kg.kernel @f_0(%q, %k, %v) : (tensor<?x64xf16>, tensor<128x64xf16>, tensor<128x64xf16>) -> tensor<?x64xf16> {
  ^bb0(%a: tensor<?x64xf16>, %b: tensor<128x64xf16>, %c: tensor<128x64xf16>):
    %bt = kg.transpose %b [1, 0] : tensor<128x64xf16> -> tensor<64x128xf16>
    %s = kg.matmul %a, %bt : (tensor<?x64xf16>, tensor<64x128xf16>) -> tensor<?x128xf32>
    %p = kg.softmax %s dim 1 : tensor<?x128xf32>
    %h = kg.cast %p : tensor<?x128xf32> to tensor<?x128xf16>
    %y = kg.matmul %h, %c : (tensor<?x128xf16>, tensor<128x64xf16>) -> tensor<?x64xf16>
    kg.yield %y : tensor<?x64xf16>
  }
  return %o : tensor<?x64xf16>
}"""
    result = run_kgc_opt(text, "--kg-decompose", "--kg-tile")
    assert result.returncode == 1
    assert ("<stdin>:2:8: error: kernel @f_0 cannot be tiled with a dynamic extent: an "
            "attention kernel takes a "
            "dynamic extent along its keys only") in result.stderr, result.stderr


@pytest.mark.parametrize("size", [1, 17, 300])
def test_kg_fuse_cuts_a_group_of_a_schedule_without_dynamic_extents_into_kernels_that_take_them(
        size):
    # Attention of a dynamic count of queries: kg-fuse plans each group as
    # kg-tile will, so it makes products and a softmax, each over `?`.
    import torch

    source, tiled = compiled_to_kg(ATTENTION_OF_A_DYNAMIC_COUNT, "attend.mlir")
    text = str(tiled)
    assert "attention" not in text and text.count("dynamic_axis = 0") >= 2
    generator = torch.Generator().manual_seed(size)
    inputs = [torch.randn(shape, generator=generator) for shape in ((size, 64), (128, 64),
                                                                    (128, 64))]
    run_as_the_reference(source, tiled, "attend", inputs)


TWO_KERNELS = """\
func.func @norm_proj(%x: tensor<?x1000xf16>, %g: tensor<1000xf16>, %w: tensor<1000x96xf16>) -> tensor<?x96xf16> {
  %n = kg.rms_norm %x weight %g normalized_shape [1000] eps 1.0e-6 : (tensor<?x1000xf16>, tensor<1000xf16>) -> tensor<?x1000xf16>
  %y = kg.matmul %n, %w : (tensor<?x1000xf16>, tensor<1000x96xf16>) -> tensor<?x96xf16>
  return %y : tensor<?x96xf16>
}
"""


def test_a_dynamic_graph_compiles_once_for_every_size(tmp_path):
    from kgc.runtime import load

    compiled = kgc.compile(TWO_KERNELS, target=90, output_dir=tmp_path, library_kernels=False)
    assert compiled.is_dynamic
    # The norm over 1000 columns is a kernel of its own (norm-over-long-k
    # keeps it out of the k loop): its rows are an intermediate.
    function = compiled.function
    assert [b.shape for b in function.buffers] == [(None, 1000), (1000,), (1000, 96),
                                                   (None, 1000), (None, 96)]
    assert function.memory is None and len(function.launches) == 2
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["format"] == "kgc-manifest-3"
    (entry,) = manifest["functions"]
    assert entry["memory"] is None and entry["buffers"][3]["shape"] == [None, 1000]
    loaded = load(tmp_path)
    for size in (1, 3, 17, 1000, 4097):
        sized = loaded.at(size)
        # The workspace is planned at the size: the normalised rows, f16.
        (placement,) = sized.function.memory.intermediates
        assert placement.bytes == size * 1000 * 2
        assert [tuple(b.shape) for b in sized.function.buffers][3:] == [(size, 1000), (size, 96)]
        for launch in sized.function.launches:
            kernel = loaded.module.kernels[launch.kernel]
            tile, programs = kernel.dynamic_grid
            assert kernel.grid_at(size)[0] == -(-size // tile) * programs
            assert kernel.scalars_at(launch.scalars, size)[-1] == size
    # One compile: the same kernels, their artifacts as written.
    assert [k.artifact.hash for k in loaded.kernels()] == \
        [k.artifact.hash for k in compiled.kernels()]


def test_a_dynamic_product_of_library_size_is_triton_s_and_runs_at_every_size():
    from kgc.execution import run_tiled
    from kgc.pipeline.compiler import compile_module

    torch = pytest.importorskip("torch")
    g = kgc.Graph("prefill_proj")
    g.output(g.matmul(g.input("x", ("tokens", 1024), "f32"), g.input("w", (1024, 512), "f32")))
    # At the hint (256 rows) kgc's rule would call the library, which takes
    # no dynamic extent: the kernel is Triton's matmul, over every size.
    compiled = kgc.compile(g, target=90)
    (kernel,) = compiled.module.kernels.values()
    assert kernel.library is None and kernel.dynamic_grid is not None
    module = g.build()
    with module.context:
        compile_module(module, emit="kg")
    generator = torch.Generator().manual_seed(7)
    w = torch.randn(1024, 512, generator=generator) / 32
    for size in (1, 17, 300):
        x = torch.randn(size, 1024, generator=generator)
        torch.testing.assert_close(run_tiled(module, "prefill_proj", x, w), x @ w,
                                   rtol=1e-4, atol=1e-4)


def test_calls_name_what_is_wrong_with_the_dynamic_extent():
    torch = pytest.importorskip("torch")
    g = kgc.Graph("scaled")
    g.output(g.input("x", ("tokens", 8), "f32") * g.input("y", ("tokens", 8), "f32"))
    compiled = kgc.compile(g, target=90)
    with pytest.raises(KgcError, match=r"@scaled: argument #0 \(x\) gives the dynamic extent "
                                       r"\(`\?`\) the size 3, argument #1 \(y\) gives it 4; "
                                       "every `\\?` of a function is one size"):
        compiled(torch.ones(3, 8), torch.ones(4, 8))
    with pytest.raises(KgcError, match=r"the dynamic extent's size must be an integer from 1 "
                                       r"to 2147483647, got 0"):
        compiled(torch.ones(0, 8), torch.ones(0, 8))
    # A size found in one argument is the one the others are held to.
    with pytest.raises(KgcError, match=r"argument #0 \(x\) must have shape \(3, 8\), got \(8,\)"):
        compiled(torch.ones(8), torch.ones(3, 8))
    with pytest.raises(KgcError, match=r"argument #0 \(x\) must have shape \(\?, 8\), got \(8,\)"):
        compiled(torch.ones(8), torch.ones(8))
    # The size found, the call goes on to the checks of each argument, here
    # that it is on a GPU.
    with pytest.raises(KgcError, match=r"argument #0 \(x\) is on cpu; it must be on a CUDA"):
        compiled(torch.ones(5, 8), torch.ones(5, 8))
    with pytest.raises(KgcError, match="@scaled has a dynamic extent: its buffers are laid out "
                                       "per size"):
        compiled.buffer_layout()
    assert compiled.at(5).buffer_layout().fresh[0][1] == (5, 8)


def test_the_c_export_takes_the_size_of_a_dynamic_function(tmp_path):
    # tests/test_export_c.py runs the C against a recording driver.
    compiled = kgc.compile(DYNAMIC_ROWS, target=90)
    exported = compiled.export_c(tmp_path)
    header = exported.header.read_text()
    assert "CUresult kgc_rows_rows(CUstream stream, int32_t size, CUdeviceptr arg0, CUdeviceptr arg1, " \
           "CUdeviceptr result0, CUdeviceptr workspace);" in header
    assert "size_t kgc_rows_rows_workspace_bytes(int32_t size);" in header
    assert "f32[sizex128]" in header and "_WORKSPACE_BYTES" not in header
    assert exported.workspace_bytes == {"rows": None}


def test_a_manifest_whose_memory_plan_disagrees_with_its_shapes_is_refused(tmp_path):
    from kgc.runtime import load

    kgc.compile(TWO_KERNELS, target=90, output_dir=tmp_path, library_kernels=False)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["functions"][0]["memory"] = {"alignment": 256, "workspace_bytes": 0,
                                          "intermediates": []}
    path.write_text(json.dumps(manifest))
    with pytest.raises(KgcError, match="@norm_proj has a dynamic extent and a memory plan"):
        load(tmp_path)


def test_kgc_compile_writes_a_dynamic_graph(tmp_path):
    source = tmp_path / "rows.mlir"
    source.write_text(DYNAMIC_ROWS)
    result = subprocess.run([console_script("kgc"), "compile", str(source),
                             "-o", str(tmp_path / "out")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (kernel,) = manifest["kernels"]
    assert kernel["dynamic_grid"] == [32, 1]
    assert manifest["functions"][0]["arguments"][0]["shape"] == [None, 128]


def _lowered(source: str) -> str:
    result = run_kgc_opt(source, "--kg-decompose", "--kg-fuse", "--kg-tile", "--kg-legalize-dot",
                         "--kg-pad-mask", "--convert-kg-to-ttir", "--kgc-cse", "--kgc-dce")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_each_kernel_takes_the_size_as_its_last_argument_and_its_launch_the_grid_rule():
    text = _lowered(DYNAMIC_ROWS)
    # One kernel (the norm and the softmax of each row), 32 rows a program
    # at the hint: its grid is ceil(size / 32) programs at the call.
    assert ("kg.launch @rows_0_reduction(%arg0, %arg1) grid [8, 1, 1] num_warps 8 num_stages "
            "1 {dynamic_grid = array<i64: 32, 1>} : (tensor<?x128xf32>, tensor<128xf32>) -> "
            "tensor<?x128xf32>") in text
    assert "^bb0(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %arg2: !tt.ptr<f32>, %arg3: i32):" \
        in text
    # Every access along the rows is bounded by the size, none by the hint.
    assert '"tt.splat"(%arg3) : (i32) -> tensor<32xi32>' in text
    assert "memref.dim" not in text and " index" not in text and "256" not in text


def test_triton_compiles_a_dynamic_kernel_to_cubin():
    from kgc.pipeline.artifact import KernelOptions
    from kgc.pipeline.triton_stage import compile_kernel

    with ir.Context() as context:
        context.allow_unregistered_dialects = True
        kgc.load_dialect(context)
        module = ir.Module.parse(_lowered(DYNAMIC_ROWS))
        (kernel,) = [op for op in module.body.operations if op.operation.name == "builtin.module"]
        ttir = kernel.operation.get_asm(enable_debug_info=False)
    artifact = compile_kernel(ttir, KernelOptions((8, 1, 1), 8, 1), 90)
    # The size is a 32-bit parameter after the three pointers.
    assert artifact.asm["cubin"] and ".param .u32 rows_0_reduction_param_3" in artifact.asm["ptx"]


def test_fusion_partitions_a_dynamic_extent_as_at_the_hint_and_keeps_it_in_the_kernels():
    from kgc.tiling.graph_model import EXTENT_HINT

    def kernels(text: str) -> list[str]:
        with ir.Context() as context:
            kgc.load_dialect(context)
            module = ir.Module.parse(text)
            Pipeline.parse("builtin.module(kg-decompose,kgc-cse,kgc-dce,kg-fuse)").run(module)
            return [line.strip().split(" {")[0] for line in str(module).splitlines()
                    if "kg.kernel @" in line]

    dynamic = kernels(DYNAMIC_ROWS)
    static = kernels(DYNAMIC_ROWS.replace("?x", f"{EXTENT_HINT}x"))
    assert len(dynamic) == len(static) == 1
    assert dynamic[0].replace("?x", f"{EXTENT_HINT}x") == static[0]
    assert "-> tensor<?x128xf32>" in dynamic[0]


# -- tiled programs with a dynamic extent, on the CPU executor ------------------------

COMPILED_ONCE = """\
func.func @rows(%x: tensor<?x1000xf16>, %w: tensor<1000xf16>, %b: tensor<1x1000xf16>) -> (tensor<?x1000xf16>, tensor<?x1xf32>) {
  %n = kg.rms_norm %x weight %w normalized_shape [1000] eps 1.0e-6 : (tensor<?x1000xf16>, tensor<1000xf16>) -> tensor<?x1000xf16>
  %s = kg.add %n, %b : (tensor<?x1000xf16>, tensor<1x1000xf16>) -> tensor<?x1000xf16>
  %y = kg.softmax %s dim 1 : tensor<?x1000xf16>
  %z = kg.silu %y : tensor<?x1000xf16>
  %f = kg.cast %x : tensor<?x1000xf16> to tensor<?x1000xf32>
  %m = kg.reduce max %f dims [1] keepdim : tensor<?x1000xf32> -> tensor<?x1xf32>
  return %z, %m : tensor<?x1000xf16>, tensor<?x1xf32>
}
func.func @proj(%x: tensor<?x128xf16>, %g: tensor<128xf16>, %w: tensor<128x96xf16>, %b: tensor<96xf16>) -> tensor<?x96xf16> {
  %n = kg.rms_norm %x weight %g normalized_shape [128] eps 1.0e-6 : (tensor<?x128xf16>, tensor<128xf16>) -> tensor<?x128xf16>
  %y = kg.matmul %n, %w : (tensor<?x128xf16>, tensor<128x96xf16>) -> tensor<?x96xf16>
  %z = kg.add %y, %b : (tensor<?x96xf16>, tensor<96xf16>) -> tensor<?x96xf16>
  %a = kg.gelu %z : tensor<?x96xf16>
  return %a : tensor<?x96xf16>
}
func.func @points(%x: tensor<?x777xf32>, %y: tensor<?x777xf32>, %b: tensor<777xf32>) -> tensor<?x7x111xf32> {
  %s = kg.add %x, %b : (tensor<?x777xf32>, tensor<777xf32>) -> tensor<?x777xf32>
  %r = kg.relu %s : tensor<?x777xf32>
  %p = kg.mul %r, %y : (tensor<?x777xf32>, tensor<?x777xf32>) -> tensor<?x777xf32>
  %v = kg.reshape %p : tensor<?x777xf32> -> tensor<?x7x111xf32>
  return %v : tensor<?x7x111xf32>
}
"""


@pytest.fixture(scope="module")
def compiled_once():
    return compiled_to_kg(COMPILED_ONCE, "compiled_once.mlir")


@pytest.mark.parametrize("size", [1, 3, 17, 1000, 4097])
@pytest.mark.parametrize("function", ["rows", "proj", "points"])
def test_one_compiled_graph_runs_at_every_size_of_its_dynamic_extent(compiled_once, function,
                                                                    size):
    import torch

    source, tiled = compiled_once
    generator = torch.Generator().manual_seed(size)
    if function == "rows":
        shapes = [((size, 1000), torch.float16), ((1000,), torch.float16),
                  ((1, 1000), torch.float16)]
    elif function == "proj":
        shapes = [((size, 128), torch.float16), ((128,), torch.float16),
                  ((128, 96), torch.float16), ((96,), torch.float16)]
    else:
        shapes = [((size, 777), torch.float32), ((size, 777), torch.float32),
                  ((777,), torch.float32)]
    inputs = [torch.randn(shape, generator=generator).to(dtype) for shape, dtype in shapes]
    if function == "proj":
        inputs[2] = inputs[2] / 10  # products of 128 terms in f16's range
    got = run_as_the_reference(source, tiled, function, inputs)[0]
    assert tuple(as_tuple(got)[0].shape)[0] == size


# The extent inside other dims: the strides outside it are computed from the
# size. Per-head norm and rotary embedding of a query cut into heads, a
# product reading heads packed back into tokens, and a transposed store;
# and an embedding of a sequence of ids with its norm, whose table keeps
# its rows (positions past the size are read) along the dynamic axis; and
# attention's products as `bmm` writes them, heads merged with the batch
# (kg-simplify gives the product the heads' 4-d shape).
STRIDED_ONCE = """\
func.func @heads(%q: tensor<1x?x512xf16>, %w: tensor<64xf16>, %cos: tensor<1x1x?x64xf16>, %sin: tensor<1x1x?x64xf16>) -> tensor<1x8x?x64xf16> {
  %r = kg.reshape %q : tensor<1x?x512xf16> -> tensor<1x?x8x64xf16>
  %t = kg.transpose %r [0, 2, 1, 3] : tensor<1x?x8x64xf16> -> tensor<1x8x?x64xf16>
  %n = kg.rms_norm %t weight %w normalized_shape [64] eps 1.0e-6 : (tensor<1x8x?x64xf16>, tensor<64xf16>) -> tensor<1x8x?x64xf16>
  %hi = kg.slice %n offsets [0, 0, 0, 32] strides [1, 1, 1, 1] : tensor<1x8x?x64xf16> -> tensor<1x8x?x32xf16>
  %lo = kg.slice %n offsets [0, 0, 0, 0] strides [1, 1, 1, 1] : tensor<1x8x?x64xf16> -> tensor<1x8x?x32xf16>
  %neg = kg.neg %hi : tensor<1x8x?x32xf16>
  %rot = kg.concat %neg, %lo dim 3 : (tensor<1x8x?x32xf16>, tensor<1x8x?x32xf16>) -> tensor<1x8x?x64xf16>
  %a = kg.mul %n, %cos : (tensor<1x8x?x64xf16>, tensor<1x1x?x64xf16>) -> tensor<1x8x?x64xf16>
  %b = kg.mul %rot, %sin : (tensor<1x8x?x64xf16>, tensor<1x1x?x64xf16>) -> tensor<1x8x?x64xf16>
  %y = kg.add %a, %b : (tensor<1x8x?x64xf16>, tensor<1x8x?x64xf16>) -> tensor<1x8x?x64xf16>
  return %y : tensor<1x8x?x64xf16>
}
func.func @tokens(%x: tensor<1x8x?x64xf16>, %w: tensor<512x96xf16>) -> tensor<1x?x96xf16> {
  %t = kg.transpose %x [0, 2, 1, 3] : tensor<1x8x?x64xf16> -> tensor<1x?x8x64xf16>
  %r = kg.reshape %t : tensor<1x?x8x64xf16> -> tensor<1x?x512xf16>
  %y = kg.matmul %r, %w : (tensor<1x?x512xf16>, tensor<512x96xf16>) -> tensor<1x?x96xf16>
  return %y : tensor<1x?x96xf16>
}
func.func @transposed(%x: tensor<?x8xf32>, %b: tensor<2x?x8xf32>) -> (tensor<8x?xf32>, tensor<2x?x8xf32>, tensor<?x8xf32>) {
  %t = kg.transpose %x [1, 0] : tensor<?x8xf32> -> tensor<8x?xf32>
  %e = kg.exp %t : tensor<8x?xf32>
  %s = kg.add %b, %x : (tensor<2x?x8xf32>, tensor<?x8xf32>) -> tensor<2x?x8xf32>
  %r = kg.reshape %e : tensor<8x?xf32> -> tensor<?x8xf32>
  %m = kg.mul %r, %x : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
  return %e, %s, %m : tensor<8x?xf32>, tensor<2x?x8xf32>, tensor<?x8xf32>
}
func.func @bmm_heads(%q: tensor<2x4x?x32xf32>, %k: tensor<2x4x32x24xf32>) -> tensor<2x4x?x24xf32> {
  %0 = kg.reshape %q : tensor<2x4x?x32xf32> -> tensor<8x?x32xf32>
  %1 = kg.reshape %k : tensor<2x4x32x24xf32> -> tensor<8x32x24xf32>
  %2 = kg.matmul %0, %1 : (tensor<8x?x32xf32>, tensor<8x32x24xf32>) -> tensor<8x?x24xf32>
  %3 = kg.reshape %2 : tensor<8x?x24xf32> -> tensor<2x4x?x24xf32>
  return %3 : tensor<2x4x?x24xf32>
}
func.func @embed(%ids: tensor<1x?xi64>, %t: tensor<100x64xf32>, %w: tensor<64xf32>) -> (tensor<1x?x64xf32>, tensor<1x?x64xf32>) {
  %flat = kg.reshape %ids : tensor<1x?xi64> -> tensor<?xi64>
  %g = kg.gather %t[%flat] dim 0 : (tensor<100x64xf32>, tensor<?xi64>) -> tensor<?x64xf32>
  %e = kg.reshape %g : tensor<?x64xf32> -> tensor<1x?x64xf32>
  %n = kg.rms_norm %e weight %w normalized_shape [64] eps 1.0e-6 : (tensor<1x?x64xf32>, tensor<64xf32>) -> tensor<1x?x64xf32>
  return %e, %n : tensor<1x?x64xf32>, tensor<1x?x64xf32>
}
"""


@pytest.fixture(scope="module")
def strided_once():
    return compiled_to_kg(STRIDED_ONCE, "strided_once.mlir")


@pytest.mark.parametrize("size", [1, 3, 17, 1000, 4097])
@pytest.mark.parametrize("function", ["heads", "tokens", "transposed", "embed", "bmm_heads"])
def test_a_size_inside_other_dims_runs_at_every_size_from_one_compile(strided_once, function,
                                                                      size):
    import torch

    source, tiled = strided_once
    generator = torch.Generator().manual_seed(size)
    shapes = {"heads": [((1, size, 512), torch.float16), ((64,), torch.float16),
                        ((1, 1, size, 64), torch.float16), ((1, 1, size, 64), torch.float16)],
              "tokens": [((1, 8, size, 64), torch.float16), ((512, 96), torch.float16)],
              "transposed": [((size, 8), torch.float32), ((2, size, 8), torch.float32)],
              "embed": [((100, 64), torch.float32), ((64,), torch.float32)],
              "bmm_heads": [((2, 4, size, 32), torch.float32), ((2, 4, 32, 24), torch.float32)]}
    inputs = [torch.randn(shape, generator=generator).to(dtype)
              for shape, dtype in shapes[function]]
    if function == "embed":
        inputs.insert(0, torch.randint(0, 100, (1, size), generator=generator))
    if function == "tokens":
        inputs[1] = inputs[1] / 20  # products of 512 terms in f16's range
    got = run_as_the_reference(source, tiled, function, inputs)[0]
    assert size in tuple(as_tuple(got)[0].shape)


# Attention over a key count each call gives (a decode step over a cache
# that grows): query heads reading their group's key/value head through a
# broadcast, an additive mask along the keys, and a few queries of f32 per
# head (a chunk of a prompt after a cache). The key loop ends at the size,
# and the splits share the call's keys.
DYNAMIC_KEYS = """\
func.func @gqa(%q: tensor<1x32x1x128xf16>, %k: tensor<1x8x?x128xf16>, %v: tensor<1x8x?x128xf16>, %mask: tensor<1x1x1x?xf16>) -> tensor<1x32x1x128xf16> {
  %kr = kg.reshape %k : tensor<1x8x?x128xf16> -> tensor<1x8x1x?x128xf16>
  %kb = kg.broadcast_to %kr : tensor<1x8x1x?x128xf16> -> tensor<1x8x4x?x128xf16>
  %kk = kg.reshape %kb : tensor<1x8x4x?x128xf16> -> tensor<1x32x?x128xf16>
  %vr = kg.reshape %v : tensor<1x8x?x128xf16> -> tensor<1x8x1x?x128xf16>
  %vb = kg.broadcast_to %vr : tensor<1x8x1x?x128xf16> -> tensor<1x8x4x?x128xf16>
  %vv = kg.reshape %vb : tensor<1x8x4x?x128xf16> -> tensor<1x32x?x128xf16>
  %kt = kg.transpose %kk [0, 1, 3, 2] : tensor<1x32x?x128xf16> -> tensor<1x32x128x?xf16>
  %s = kg.matmul %q, %kt : (tensor<1x32x1x128xf16>, tensor<1x32x128x?xf16>) -> tensor<1x32x1x?xf16>
  %c = kg.constant 0.0883883 : tensor<f16>
  %x = kg.mul %s, %c : (tensor<1x32x1x?xf16>, tensor<f16>) -> tensor<1x32x1x?xf16>
  %xm = kg.add %x, %mask : (tensor<1x32x1x?xf16>, tensor<1x1x1x?xf16>) -> tensor<1x32x1x?xf16>
  %p = kg.softmax %xm dim 3 : tensor<1x32x1x?xf16>
  %o = kg.matmul %p, %vv : (tensor<1x32x1x?xf16>, tensor<1x32x?x128xf16>) -> tensor<1x32x1x128xf16>
  return %o : tensor<1x32x1x128xf16>
}
func.func @chunk(%q: tensor<2x4x3x64xf32>, %k: tensor<2x4x?x64xf32>, %v: tensor<2x4x?x64xf32>, %mask: tensor<2x1x3x?xf32>) -> tensor<2x4x3x64xf32> {
  %kt = kg.transpose %k [0, 1, 3, 2] : tensor<2x4x?x64xf32> -> tensor<2x4x64x?xf32>
  %s = kg.matmul %q, %kt : (tensor<2x4x3x64xf32>, tensor<2x4x64x?xf32>) -> tensor<2x4x3x?xf32>
  %xm = kg.add %s, %mask : (tensor<2x4x3x?xf32>, tensor<2x1x3x?xf32>) -> tensor<2x4x3x?xf32>
  %p = kg.softmax %xm dim 3 : tensor<2x4x3x?xf32>
  %o = kg.matmul %p, %v : (tensor<2x4x3x?xf32>, tensor<2x4x?x64xf32>) -> tensor<2x4x3x64xf32>
  return %o : tensor<2x4x3x64xf32>
}
"""


@pytest.fixture(scope="module")
def dynamic_keys():
    return compiled_to_kg(DYNAMIC_KEYS, "dynamic_keys.mlir")


@pytest.mark.parametrize("size", [1, 3, 17, 1000, 4097])
@pytest.mark.parametrize("function", ["gqa", "chunk"])
def test_attention_over_a_dynamic_key_count_runs_at_every_size_from_one_compile(
        dynamic_keys, function, size):
    import torch

    source, tiled = dynamic_keys
    generator = torch.Generator().manual_seed(size)
    if function == "gqa":
        shapes = [(1, 32, 1, 128), (1, 8, size, 128), (1, 8, size, 128), (1, 1, 1, size)]
        dtype = torch.float16
    else:
        shapes = [(2, 4, 3, 64), (2, 4, size, 64), (2, 4, size, 64), (2, 1, 3, size)]
        dtype = torch.float32
    inputs = [torch.randn(shape, generator=generator).to(dtype) for shape in shapes]
    got, _ = run_as_the_reference(source, tiled, function, inputs)
    assert tuple(as_tuple(got)[0].shape) == shapes[0]


def test_attention_over_dynamic_keys_loops_to_the_size_on_a_static_grid(dynamic_keys):
    _, tiled = dynamic_keys
    kernels = [line for line in str(tiled).splitlines() if "kg.kernel @" in line]
    attention = [line for line in kernels if 'kind = "attention"' in line]
    combine = [line for line in kernels if "_combine(" in line]
    assert len(attention) == 2 and len(combine) == 2
    # Every program loops over the keys: the grid is the static one.
    assert all("dynamic_grid = array<i64: 0, 0>" in line for line in attention)
    # The partials of the splits have a static shape: the combining kernel
    # takes no dynamic extent.
    assert not any("dynamic_grid" in line for line in combine)


# Reductions along the dynamic extent: a norm weight's gradient summed over
# a dynamic token count, the tokens of a batch of sequences summed and
# maxed, a softmax over dynamic keys (its output stored along the loop), and
# a projection's weight and bias gradients (X^T dY contracts over the
# tokens in its k loop).
REDUCED_ONCE = """\
func.func @weight_gradient(%dy: tensor<?x512xbf16>, %x: tensor<?x512xbf16>, %r: tensor<?x1xf32>) -> tensor<512xf32> {
  %a = kg.cast %dy : tensor<?x512xbf16> to tensor<?x512xf32>
  %b = kg.cast %x : tensor<?x512xbf16> to tensor<?x512xf32>
  %p = kg.mul %a, %b : (tensor<?x512xf32>, tensor<?x512xf32>) -> tensor<?x512xf32>
  %q = kg.mul %p, %r : (tensor<?x512xf32>, tensor<?x1xf32>) -> tensor<?x512xf32>
  %s = kg.reduce sum %q dims [0] : tensor<?x512xf32> -> tensor<512xf32>
  return %s : tensor<512xf32>
}
func.func @tokens_of_a_batch(%x: tensor<2x?x33xf32>) -> (tensor<33xf32>, tensor<2x1x33xf32>) {
  %s = kg.reduce sum %x dims [0, 1] : tensor<2x?x33xf32> -> tensor<33xf32>
  %m = kg.reduce max %x dims [1] keepdim : tensor<2x?x33xf32> -> tensor<2x1x33xf32>
  return %s, %m : tensor<33xf32>, tensor<2x1x33xf32>
}
func.func @softmax_keys(%x: tensor<8x?xf16>) -> tensor<8x?xf16> {
  %y = kg.softmax %x dim 1 : tensor<8x?xf16>
  return %y : tensor<8x?xf16>
}
func.func @weight_product(%x: tensor<?x512xbf16>, %dy: tensor<?x96xbf16>) -> tensor<512x96xf32> {
  %xt = kg.transpose %x [1, 0] : tensor<?x512xbf16> -> tensor<512x?xbf16>
  %w = kg.matmul %xt, %dy : (tensor<512x?xbf16>, tensor<?x96xbf16>) -> tensor<512x96xf32>
  return %w : tensor<512x96xf32>
}
func.func @bias_and_weight(%x: tensor<?x33xf32>, %dy: tensor<?x17xf32>) -> (tensor<33x17xf32>, tensor<17xf32>) {
  %xt = kg.transpose %x [1, 0] : tensor<?x33xf32> -> tensor<33x?xf32>
  %w = kg.matmul %xt, %dy : (tensor<33x?xf32>, tensor<?x17xf32>) -> tensor<33x17xf32>
  %b = kg.reduce sum %dy dims [0] : tensor<?x17xf32> -> tensor<17xf32>
  return %w, %b : tensor<33x17xf32>, tensor<17xf32>
}
"""


@pytest.fixture(scope="module")
def reduced_once():
    return compiled_to_kg(REDUCED_ONCE, "reduced_once.mlir")


@pytest.mark.parametrize("size", [1, 3, 17, 1000, 4097])
@pytest.mark.parametrize("function", ["weight_gradient", "tokens_of_a_batch", "softmax_keys",
                                      "weight_product", "bias_and_weight"])
def test_reductions_along_the_dynamic_extent_run_at_every_size_from_one_compile(
        reduced_once, function, size):
    import torch

    source, tiled = reduced_once
    generator = torch.Generator().manual_seed(size)
    if function == "weight_gradient":
        inputs = [torch.randn(size, 512, generator=generator).bfloat16(),
                  torch.randn(size, 512, generator=generator).bfloat16(),
                  torch.rand(size, 1, generator=generator) + 0.5]
    elif function == "tokens_of_a_batch":
        inputs = [torch.randn(2, size, 33, generator=generator)]
    elif function == "softmax_keys":
        inputs = [torch.randn(8, size, generator=generator).half()]
    elif function == "weight_product":
        inputs = [torch.randn(size, 512, generator=generator).bfloat16(),
                  torch.randn(size, 96, generator=generator).bfloat16()]
    else:
        inputs = [torch.randn(size, 33, generator=generator),
                  torch.randn(size, 17, generator=generator)]
    got, _ = run_as_the_reference(source, tiled, function, inputs)
    if function == "softmax_keys":
        assert tuple(as_tuple(got)[0].shape) == (8, size)


def test_reductions_along_the_dynamic_extent_loop_to_the_size_on_a_static_grid(reduced_once):
    _, tiled = reduced_once
    kernels = [line for line in str(tiled).splitlines() if "kg.kernel @" in line]
    assert len(kernels) == 7
    assert all("dynamic_grid = array<i64: 0, 0>" in line for line in kernels)
    assert sum('kind = "matmul"' in line for line in kernels) == 2


def test_strides_outside_the_size_are_computed_from_it(strided_once):
    _, tiled = strided_once
    text = str(tiled)
    # The heads' stride of a (1, 8, ?, 64) buffer, size * 64, is an operand
    # of its views, stored to by @heads and read by @tokens as (1, ?, 8, 64).
    assert "memref<1x8x?x64xf16, strided<[0, ?, 64, 1]>>" in text
    assert "memref<1x?x8x64xf16, strided<[?, 64, ?, 1]>>" in text
    # The (1, ?, 512) query read per head has static strides.
    assert "memref<1x8x?x64xf16, strided<[0, 64, 512, 1]>>" in text


def test_the_compiled_kernels_read_the_size_and_launch_by_a_rule(compiled_once):
    _, tiled = compiled_once
    text = str(tiled)
    assert text.count("memref.dim %arg") >= 3
    assert "dynamic_axis = 0 : i64" in text
    assert "dynamic_grid = array<i64:" in text
    assert "dynamic_upper [0]" in text


@pytest.mark.parametrize("text, reason", [
    # A sum along the dynamic extent as the outer of two reduced axes: the
    # program's loop walks the inner one.
    ("""func.func @f(%x: tensor<?x8xf32>) -> tensor<f32> {
  %s = kg.reduce sum %x dims [0, 1] : tensor<?x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}""", "of the dynamic extent, is reduced but not as the innermost looped axis"),
    # The extent in the rows of one operand and the columns of the other:
    # two dynamic iteration axes.
    ("""func.func @f(%x: tensor<?x8xf32>, %y: tensor<8x?xf32>) -> tensor<?x?xf32> {
  %p = kg.matmul %x, %y : (tensor<?x8xf32>, tensor<8x?xf32>) -> tensor<?x?xf32>
  return %p : tensor<?x?xf32>
}""", "buffers read the dynamic extent along iteration axes 0 and 2"),
], ids=["reduced", "two-dims"])
def test_a_plan_that_holds_at_one_size_only_is_refused_with_the_rule(text, reason):
    # kg-fuse plans each kernel as kg-tile will: it refuses the op.
    result = run_kgc_opt(text, "--kg-decompose", "--kg-fuse", "--kg-tile")
    assert result.returncode == 1
    assert "cannot be made a kernel with a dynamic extent: " in result.stderr
    assert reason in result.stderr


def test_a_call_and_a_take_go_to_the_fast_call_of_the_size_their_tensors_give():
    # The routing that the GPU's fast path sits behind: a call (its tensors
    # as they are) and a take (a list handed over, `take=True`) reach the
    # fast call of the graph at the size the tensors give; without one
    # (before a first call there, or a size out of range) the checking path
    # runs, and a take still empties its list.
    import torch

    compiled = kgc.compile(TWO_KERNELS, target=90, library_kernels=False)
    calls = []

    def fast_at(size):
        def fast(tensors, out, take=False):
            calls.append((size, len(tensors), take))
            if take:
                tensors.clear()
            return f"fast at {size}"
        return fast

    compiled.at(17)._fast = fast_at(17)
    x, w = torch.zeros(17, 1000, dtype=torch.float16), torch.zeros(1000, 96, dtype=torch.float16)
    gamma = torch.zeros(1000, dtype=torch.float16)
    assert compiled(x, gamma, w) == "fast at 17"
    handed = [x, gamma, w]
    assert compiled.take(handed) == "fast at 17" and handed == []
    assert calls == [(17, 3, False), (17, 3, True)]

    checked = []
    compiled.run = lambda *tensors, out=None: checked.append(len(tensors)) or "checked"
    handed = [torch.zeros(5, 1000, dtype=torch.float16), gamma, w]
    assert compiled.take(handed) == "checked" and handed == [] and checked == [3]
