"""Library kernels (kgc.tiling.library) without a GPU: which kernels kgc
makes calls of the GPU's BLAS, the options that turn that off, the
manifest's record of the call, the CPU executor and the runtime's launch
running it, the C export refusing it, and the search offering both."""

import json

import pytest
from mlir import ir

import kgc
from kgc.diagnostics import KgcError
from kgc.pipeline.compiler import compile_module, load_module
from kgc.pipeline.config import GraphConfig
from kgc.tiling.config import MatmulConfig
from kgc.tiling.kernel_ops import kernels_in
from kgc.tiling.library import (LibraryCall, LibraryMatmulConfig, library_call_of,
                                library_kernels, library_kernels_enabled, prefers_library)

torch = pytest.importorskip("torch")

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def gemm(m, k, n, dtype="f16", transposed_b=False, batch=None, relu=False) -> kgc.Graph:
    g = kgc.Graph("gemm")
    lead = () if batch is None else (batch,)
    a = g.input("a", lead + (m, k), dtype)
    if transposed_b:
        order = list(range(len(lead))) + [len(lead) + 1, len(lead)]
        b = g.transpose(g.input("w", lead + (n, k), dtype), order)
    else:
        b = g.input("b", lead + (k, n), dtype)
    y = g.matmul(a, b)
    g.output(g.relu(y) if relu else y)
    return g


def kinds(graph: kgc.Graph, target: int = 90) -> list[str]:
    """The kind of each kernel kgc makes of `graph`."""
    context = ir.Context()
    module = graph.build(context)
    with context:
        compile_module(module, emit="kg", target=target)
        return [ir.StringAttr(k.attributes["kind"]).value for k in kernels_in(module)]


def forced(graph: kgc.Graph, library: bool) -> GraphConfig:
    """A GraphConfig that sets the knob `library` on the graph's one kernel."""
    context = ir.Context()
    module = graph.build(context)
    with context:
        GraphConfig(graph.name).fuse(module)
        (kernel,) = kernels_in(module)
        name = ir.StringAttr(kernel.attributes["sym_name"]).value
    return GraphConfig(graph.name, None, {name: LibraryMatmulConfig(library=library)})


# -- the rule ------------------------------------------------------------------


@pytest.mark.parametrize("m,k,n,element,expected", [
    (512, 4096, 6144, "f16", True),  # a prefill's qkv projection
    (128, 256, 256, "bf16", True),  # at the thresholds
    (128, 4096, 4096, "f16", True),  # a prefill of 128 tokens
    (4096, 4096, 4096, "f32", True),
    (127, 4096, 4096, "f16", True),  # more rows than a decode's over 32 MiB of weights
    (40, 8192, 2048, "bf16", True),  # in 32 tiles of 64 columns: split-K would fill the SMs
    (40, 2048, 8192, "f16", False),  # 128 tiles of 64 columns: Triton streams in one wave
    (80, 2048, 8192, "f16", True),  # ... at fewer than 64 rows only
    (40, 2048, 8192, "f32", False),  # cuBLAS in f32 was not measured under 128 rows
    (40, 1024, 1024, "f16", False),  # 2 MiB of weights: Triton's narrow tiles
    (16, 4096, 6144, "f16", False),  # a decode's GEMV
    (16, 4096, 4096, "f16", False),  # ... whose tiles fill the SMs split along k
    (512, 128, 4096, "f16", False),  # too short a k loop
    (512, 4096, 128, "f16", False),  # too narrow
    (512, 4096, 4096, "f8E4M3FN", False),  # not an element the call takes
])
def test_the_rule_by_size_and_element(m, k, n, element, expected):
    assert prefers_library(m, n, k, element) is expected


def test_a_bare_large_matmul_is_a_library_kernel():
    assert kinds(gemm(512, 4096, 6144)) == ["library_matmul"]
    assert kinds(gemm(512, 1024, 768, "bf16", transposed_b=True, batch=2)) == ["library_matmul"]


def test_a_large_matmul_keeps_its_epilogue_out_and_a_small_one_fuses_it():
    # kg-fuse's library-alone: the library's matmul, then the epilogue as a
    # kernel of its own.
    assert kinds(gemm(512, 4096, 6144, relu=True)) == ["library_matmul", "pointwise"]
    # Without library kernels, the epilogue is fused into kgc's matmul.
    with library_kernels(False):
        assert kinds(gemm(512, 4096, 6144, relu=True)) == ["matmul"]
    # Few rows: kgc's kernels (here split over k) beat cuBLAS, and fuse it.
    assert "library_matmul" not in kinds(gemm(17, 4096, 6144, relu=True))
    assert len(kinds(gemm(17, 4096, 6144, relu=True))) <= 2  # the split's partials and sum


def test_the_option_and_the_environment_turn_the_choice_off(monkeypatch):
    with library_kernels(False):
        assert not library_kernels_enabled()
        assert kinds(gemm(512, 4096, 6144)) == ["matmul"]
    assert library_kernels_enabled()
    monkeypatch.setenv("KGC_LIBRARY_KERNELS", "0")
    assert kinds(gemm(512, 4096, 6144)) == ["matmul"]
    # The option wins over the environment.
    with library_kernels(True):
        assert kinds(gemm(512, 4096, 6144)) == ["library_matmul"]


def test_kgc_compile_takes_library_kernels_false():
    graph = gemm(512, 512, 512)
    on = kgc.compile(graph, target="sm_90")
    off = kgc.compile(graph, target="sm_90", library_kernels=False)
    assert [k.library for k in on.module.kernels.values()] == [LibraryCall("matmul")]
    assert [k.library for k in off.module.kernels.values()] == [None]
    with pytest.raises(KgcError, match="library_kernels 'no'"):
        kgc.compile(graph, library_kernels="no")


def test_the_knob_overrides_the_rule_both_ways():
    small, large = gemm(17, 256, 300), gemm(512, 4096, 6144)
    assert all(k.library is None for k in kgc.compile(small, target="sm_90")
               .module.kernels.values())
    assert [k.library for k in kgc.compile(small, target="sm_90", config=forced(small, True))
            .module.kernels.values()] == [LibraryCall("matmul")]
    assert all(k.library is None for k in kgc.compile(
        large, target="sm_90", config=forced(large, False)).module.kernels.values())
    # A Triton knob is a choice of Triton.
    tiled = GraphConfig("gemm", None, {name: MatmulConfig(block_m=64)
                                       for name in forced(large, True).kernels})
    assert all(k.library is None for k in kgc.compile(
        large, target="sm_90", config=tiled).module.kernels.values())


# -- the manifest, the CPU executor, the runtime, the C export -----------------------


def test_the_manifest_records_the_call_and_loads_back(tmp_path):
    kgc.compile(gemm(300, 260, 270, "f32", transposed_b=True), target="sm_90",
                config=forced(gemm(300, 260, 270, "f32", transposed_b=True), True),
                output_dir=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (entry,) = manifest["kernels"]
    # Fusion numbers the kernel's inputs by first use: the transposed w first.
    assert entry["library"] == {"name": "matmul", "operands": [1, 0], "transpose_a": False,
                                "transpose_b": True}
    assert "artifact" not in entry
    assert not any(name.startswith("kernels/") for name in manifest["files"])
    loaded = load_module(tmp_path)
    (kernel,) = loaded.kernels.values()
    assert kernel.library == LibraryCall("matmul", (1, 0), transpose_b=True)
    assert kernel.artifact is None
    kgc.runtime.load(tmp_path)  # runnable: a library kernel needs no artifact


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("m", [1, 3, 17, 1000])
def test_the_cpu_executor_runs_a_library_kernel(m, dtype):
    from kgc.execution.run import run_tiled

    graph = gemm(m, 260, 33, dtype, transposed_b=True, batch=2)
    context = ir.Context()
    module = graph.build(context)
    config = forced(graph, True)
    with context:
        compiled = compile_module(module, emit="kg", config=config)
    assert '"library_matmul"' in compiled.stages["kg"]
    generator = torch.Generator().manual_seed(m)
    a = torch.randn(2, m, 260, generator=generator).to(DTYPES[dtype])
    w = torch.randn(2, 33, 260, generator=generator).to(DTYPES[dtype])
    result = run_tiled(compiled.stages["kg"], None, a, w)
    expected = (a.float() @ w.float().transpose(-1, -2)).to(DTYPES[dtype])
    assert result.dtype == DTYPES[dtype]
    torch.testing.assert_close(result, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("m", [128, 1000])
def test_a_weight_cast_for_the_call_is_stored_once_and_read_transposed(m, dtype):
    # A weight cast under autocast, saved for the backward (a result) and
    # read transposed by a product of library size: the call reads the cast
    # in place (transpose_b) and the cast's kernel has the one result.
    from kgc.execution.run import run_tiled

    g = kgc.Graph("cast_weight")
    x, w = g.input("x", (m, 260), dtype), g.input("w", (300, 260), "f32")
    cast = g.cast(w, dtype)
    g.output(cast, g.matmul(x, g.transpose(cast, [1, 0])))
    context = ir.Context()
    module = g.build(context)
    with context:
        compiled = compile_module(module, emit="kg")
        cast_kernel, call = kernels_in(module)
        assert len(cast_kernel.results) == 1
        assert library_call_of(call) == LibraryCall("matmul", (1, 0), transpose_b=True)
    generator = torch.Generator().manual_seed(m)
    x_value = torch.randn(m, 260, generator=generator).to(DTYPES[dtype])
    w_value = torch.randn(300, 260, generator=generator)
    got_cast, got = run_tiled(compiled.stages["kg"], None, x_value, w_value)
    expected_cast = w_value.to(DTYPES[dtype])
    torch.testing.assert_close(got_cast, expected_cast, rtol=0, atol=0)
    expected = (x_value.float() @ expected_cast.float().T).to(DTYPES[dtype])
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def _weight_gradient(m: int, k: int, n: int, dtype: str) -> kgc.Graph:
    """dW = dY^T X widened to f32, as autocast's backward returns a weight's
    gradient for its f32 master weight."""
    g = kgc.Graph("weight_gradient")
    x, dy = g.input("x", (k, m), dtype), g.input("dy", (k, n), dtype)
    g.output(g.cast(g.matmul(g.transpose(dy, [1, 0]), x), "f32"))
    return g


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("m", [1, 17, 512, 1000])
def test_a_returned_widened_product_is_one_call_that_writes_f32(m, dtype):
    # The library writes the f32 sum itself: no widening kernel after it,
    # and no rounding to the half type in between.
    from kgc.execution.run import run_tiled
    from kgc.runtime.library import library_function

    graph = _weight_gradient(m, 1024, 300, dtype)
    context = ir.Context()
    module = graph.build(context)
    with context:
        compiled = compile_module(module, emit="kg", config=forced(graph, True))
        (call,) = kernels_in(module)
        assert library_call_of(call) is not None
    generator = torch.Generator().manual_seed(m)
    x = torch.randn(1024, m, generator=generator).to(DTYPES[dtype])
    dy = torch.randn(1024, 300, generator=generator).to(DTYPES[dtype])
    # f32 sums of 1024 products, in another order than torch's.
    expected, tolerance = dy.float().T @ x.float(), dict(rtol=1e-4, atol=1e-4)
    got = run_tiled(compiled.stages["kg"], None, x, dy)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, **tolerance)
    # The runtime's call on the kernel's buffers (dy, then x) into an f32
    # buffer of the product's shape.
    out = torch.empty(300, m)
    library_function("weight_gradient_0_matmul", library_call_of(call), dtype)(dy, x, out)
    torch.testing.assert_close(out, expected, **tolerance)
    # Rounded to the half type and back, it would be off by far more.
    assert (expected.to(DTYPES[dtype]).float() - expected).abs().max() > 100 * 1e-4


def test_the_rule_takes_a_returned_widened_product_of_library_size():
    assert kinds(_weight_gradient(512, 1024, 1376, "bf16")) == ["library_matmul"]
    # Widened after a transpose, the product is copied by a kernel that
    # widens as it copies.
    g = kgc.Graph("transposed")
    x, dy = g.input("x", (1024, 512), "bf16"), g.input("dy", (1024, 1376), "bf16")
    g.output(g.cast(g.transpose(g.matmul(g.transpose(dy, [1, 0]), x), [1, 0]), "f32"))
    assert kinds(g) == ["library_matmul", "pointwise"]
    # A batched product written as f32 is Triton's: torch.mm takes 2-d.
    g = kgc.Graph("batched")
    a, b = g.input("a", (4, 512, 1024), "bf16"), g.input("b", (4, 1024, 512), "bf16")
    g.output(g.cast(g.matmul(a, b), "f32"))
    assert kinds(g) == ["matmul"]


def linear(m, k, n, dtype="f16", then=None) -> kgc.Graph:
    """x @ w + b, as torch's addmm (F.linear) computes a layer."""
    g = kgc.Graph("linear")
    y = g.matmul(g.input("x", (m, k), dtype), g.input("w", (k, n), dtype)) + \
        g.input("b", (n,), dtype)
    g.output(then(g, y) if then else y)
    return g


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("m", [1, 3, 17, 1000])
def test_a_bias_of_the_rows_is_the_calls_and_exact(m, dtype):
    from kgc import reference
    from kgc.execution.run import run_tiled
    from tests.comparison import assert_as_accurate_as_eager

    graph = linear(m, 260, 300, dtype)
    context = ir.Context()
    module, source = graph.build(context), graph.build(context)
    config = forced(graph, True)
    with context:
        compiled = compile_module(module, emit="kg", config=config)
        (kernel,) = kernels_in(module)
        assert library_call_of(kernel) == LibraryCall("matmul", (0, 1), bias=2)
    generator = torch.Generator().manual_seed(m)
    inputs = [torch.randn(shape, generator=generator).to(DTYPES[dtype])
              for shape in ((m, 260), (260, 300), (300,))]
    got = run_tiled(compiled.stages["kg"], None, *inputs)
    # Eager: torch.addmm, which adds the bias before rounding the product.
    eager = torch.addmm(inputs[2].float(), inputs[0].float(), inputs[1].float()).to(
        DTYPES[dtype])
    with context:
        exact = reference.evaluate(source, None, inputs, exact=True)
    assert_as_accurate_as_eager(got, eager, exact)


def test_the_rule_gives_the_library_the_bias_and_keeps_the_activation_out():
    assert kinds(linear(512, 768, 2304, then=lambda g, y: g.gelu(y))) == \
        ["library_matmul", "pointwise"]
    # Too few rows for the library: the bias and the gelu are the Triton
    # matmul's epilogue.
    assert kinds(linear(64, 768, 2304, then=lambda g, y: g.gelu(y))) == ["matmul"]
    # A bias of another element type than the product is no addmm's.
    g = kgc.Graph("mixed")
    y = g.matmul(g.input("x", (512, 768), "f16"), g.input("w", (768, 2304), "f16"))
    g.output(g.cast(y, "f32") + g.input("b", (2304,), "f32"))
    assert kinds(g) == ["library_matmul", "pointwise"]


def test_a_reshape_of_the_result_is_the_calls_buffer_not_a_copy():
    from kgc.execution.run import run_tiled

    # GPT-2's attention projection: the biased product viewed as (1, 512, n)
    # before its q, k and v are sliced out; the library writes the viewed
    # buffer, and no kernel copies it.
    graph = linear(512, 264, 300, "f32", then=lambda g, y: g.reshape(y, (2, 256, 300)))
    assert kinds(graph) == ["library_matmul"]
    compiled = kgc.compile(graph, target="sm_90")
    (kernel,) = compiled.module.kernels.values()
    assert kernel.library.bias == 2 and kernel.arguments[-1].shape == (2, 256, 300)
    generator = torch.Generator().manual_seed(6)
    x, w, b = (torch.randn(shape, generator=generator) for shape in ((512, 264), (264, 300),
                                                                   (300,)))
    got = run_tiled(compiled.module.stages["kg"], None, x, w, b)
    torch.testing.assert_close(got, torch.addmm(b, x, w).reshape(2, 256, 300))
    # The runtime's call views the (2, 256, 300) buffer as the product.
    out = torch.empty(2, 256, 300)
    from kgc.runtime.library import library_function

    library_function(kernel.name, kernel.library, "f32")(x, w, b, out)
    torch.testing.assert_close(out, torch.addmm(b, x, w).reshape(2, 256, 300))


def test_the_manifest_and_the_runtime_carry_the_bias(tmp_path):
    from kgc.runtime.library import library_function

    kgc.compile(linear(300, 260, 270, "f32"), target="sm_90", output_dir=tmp_path)
    (entry,) = json.loads((tmp_path / "manifest.json").read_text())["kernels"]
    assert entry["library"] == {"name": "matmul", "operands": [0, 1], "transpose_a": False,
                                "transpose_b": False, "bias": 2}
    (kernel,) = load_module(tmp_path).kernels.values()
    assert kernel.library == LibraryCall("matmul", (0, 1), bias=2)
    assert "+ bias" in kernel.library.describe()
    # The call on CPU tensors: torch.addmm into the result buffer.
    generator = torch.Generator().manual_seed(4)
    x, w, b = (torch.randn(shape, generator=generator) for shape in ((300, 260), (260, 270),
                                                                   (270,)))
    out = torch.empty(300, 270)
    library_function("linear_0_matmul", kernel.library, "f32")(x, w, b, out)
    torch.testing.assert_close(out, torch.addmm(b, x, w))


def test_a_product_of_one_input_with_itself_is_one_call():
    from kgc.execution.run import run_tiled

    g = kgc.Graph("gram")
    x = g.input("x", (300, 257), "f32")
    g.output(g.matmul(x, g.transpose(x, [1, 0])))
    compiled = kgc.compile(g, target="sm_90")
    (kernel,) = compiled.module.kernels.values()
    assert kernel.library == LibraryCall("matmul", (0, 0), transpose_b=True)
    assert kernel.num_inputs == 1
    value = torch.randn(300, 257, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(run_tiled(compiled.module.stages["kg"], None, value),
                               value @ value.T)


def test_the_runtime_calls_the_library_on_buffers_of_the_workspace(tmp_path):
    # A library matmul whose result a Triton reduction reads: the matmul's
    # result is an intermediate, a view of the workspace, which the library
    # call writes and the reduction's launch gets the pointer of.
    from kgc.element_types import torch_dtype
    from kgc.runtime import launching
    from kgc.runtime.internals import LaunchCall
    from kgc.runtime.library import library_function

    g = kgc.Graph("gemm_sum")
    a, b = g.input("a", (300, 260), "f32"), g.input("b", (260, 512), "f32")
    g.output(g.sum(g.matmul(a, b), 1))
    graph = kgc.compile(g, target="sm_90", output_dir=tmp_path)
    function = graph.function
    kernels = graph.module.kernels
    (library,) = [launch for launch in function.launches if kernels[launch.kernel].library]
    assert library.outputs[0] in function.memory.offsets()
    recorded = []
    bound = launching.BoundFunction("cpu", tuple(
        launching.BoundLaunch(
            launch.kernel, (1, 1, 1), tuple(launch.inputs + launch.outputs), (), None, None,
            library_function(launch.kernel, kernels[launch.kernel].library, "f32"))
        if kernels[launch.kernel].library else
        launching.BoundLaunch(launch.kernel, (1, 1, 1), tuple(launch.inputs + launch.outputs),
                              tuple(launch.scalars),
                              LaunchCall(lambda *arguments: recorded.append(arguments), ()),
                              None)
        for launch in function.launches), (None, None), lambda device: "stream")
    generator = torch.Generator().manual_seed(3)
    buffers = [torch.randn(spec.shape, generator=generator).to(torch_dtype(spec.dtype))
               for spec in function.buffers[:function.num_arguments]]
    buffers += [None] * (len(function.buffers) - function.num_arguments)
    launching.launch(bound, graph.buffer_layout(), buffers, poison=True)
    product = buffers[library.outputs[0]]
    torch.testing.assert_close(product, buffers[0] @ buffers[1])
    (reduction,) = recorded
    assert product.data_ptr() in reduction[4:]


def test_the_c_export_refuses_a_library_kernel_by_name(tmp_path):
    from kgc.export import export_c

    graph = gemm(512, 512, 512)
    with pytest.raises(KgcError, match=r"kernel @gemm_0_matmul is a library kernel.*"
                                       r"KGC_LIBRARY_KERNELS=0"):
        export_c(kgc.compile(graph, target="sm_90"), tmp_path)
    written = export_c(kgc.compile(graph, target="sm_90", library_kernels=False), tmp_path)
    assert written


def test_kgc_compile_prints_the_call(tmp_path):
    import subprocess

    from tests.tools import console_script

    source = tmp_path / "gemm.mlir"
    source.write_text(gemm(512, 512, 512).to_mlir())
    result = subprocess.run([console_script("kgc"), "compile", str(source), "-o",
                             str(tmp_path / "out")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "gemm_0_matmul: library call: BLAS matmul a @ b" in result.stdout


# -- the search ------------------------------------------------------------------


def test_the_search_offers_the_library_and_triton_for_a_bare_matmul():
    from kgc.search.space import variant_space

    for m, k, default_kind in ((512, 4096, "library_matmul"), (17, 1024, "matmul")):
        text = gemm(m, k, 1024).to_mlir()
        _, kernels = variant_space(text, "gemm", "low", 90)
        (variants,) = kernels.values()
        assert variants.default.kind == default_kind
        found = {config.kind for config in variants.configs}
        assert found == {"library_matmul", "matmul"}, variants.configs


def test_a_fused_matmul_is_offered_no_library_call():
    # The partition that fuses the relu into the matmul offers Triton only;
    # the one that leaves the matmul bare offers the library too.
    from kgc.search.space import variant_space

    _, kernels = variant_space(gemm(512, 4096, 1024, relu=True).to_mlir(), "gemm", "low", 90)
    fused = [v for v in kernels.values() if "kg.relu" in v.inline_text and "kg.matmul" in
             v.inline_text]
    assert fused
    assert all(c.kind == "matmul" for v in fused for c in v.configs)


def test_explain_names_a_library_kernel_as_a_call(capsys):
    # Linear layers without bias, bare matmuls of 300 rows that cuBLAS
    # computes; the GELU between them is a kernel of its own (kg-fuse's
    # library-alone).
    model = torch.nn.Sequential(torch.nn.Linear(512, 512, bias=False), torch.nn.GELU(),
                                torch.nn.Linear(512, 384, bias=False)).eval()
    with torch.no_grad():
        explanation = kgc.explain(model, torch.randn(300, 512))
    printed = capsys.readouterr().out
    calls = [line for line in printed.splitlines()
             if "(library call: cuBLAS through torch)" in line]
    assert len(calls) == 2 and all("aten.mm.default" in call for call in calls), printed
    assert "aten.gelu.default" not in "".join(calls)
    assert explanation.kernel_count == 3


def test_the_compiled_graph_shows_the_call_where_code_would_be():
    graph = kgc.compile(gemm(512, 512, 512), target="sm_90")
    assert graph.ttir() == ("// @gemm_0_matmul: library call: BLAS matmul a @ b (cuBLAS "
                            "through torch)")
    assert graph.stages() == {"gemm_0_matmul": {}}


def test_a_config_picks_only_among_the_choices_of_a_group():
    # A bare matmul may be the library's or Triton's; a fused one is only
    # Triton's, and an attention kernel only attention's, whatever matches
    # its ops too.
    from kgc.tiling.registry import schedule_for
    from kgc.tiling.iteration import Unplannable
    from tests.attention_graphs import AttentionShape, attention_graph

    bare = _outputs(gemm(512, 512, 512))
    assert schedule_for(bare, kind="matmul").kind == "matmul"
    assert schedule_for(bare, kind="library_matmul").kind == "library_matmul"
    assert schedule_for(bare).kind == "library_matmul"
    assert schedule_for(bare, {"library": False}).kind == "matmul"
    with pytest.raises(Unplannable, match="a library_matmul config was given for a matmul"):
        schedule_for(_outputs(gemm(512, 512, 512, relu=True)), kind="library_matmul")
    with pytest.raises(Unplannable, match="a matmul config was given for a attention kernel"):
        schedule_for(_outputs(attention_graph(AttentionShape(1, 2, 2, 64, 64, 64), "f16")),
                     kind="matmul")


def _outputs(graph: kgc.Graph):
    """The output nodes of the graph's one kernel after fusion (as fusion
    makes it without library kernels: an epilogue fused)."""
    from kgc.passes.tile import kernel_graph

    context = ir.Context()
    module = graph.build(context)
    with context, library_kernels(False):
        GraphConfig(graph.name).fuse(module)
        (kernel,) = kernels_in(module)
        return kernel_graph(kernel)


def test_a_transposed_operand_the_kernel_returns_too_keeps_it_triton():
    # Both the transposed weight and the product leave the kernel: a call
    # writes only the product, so the kernel stays Triton's.
    from kgc.tiling.graph_model import topological
    from kgc.tiling.registry import schedule_for

    g = kgc.Graph("both")
    a, w = g.input("a", (512, 512), "f16"), g.input("w", (512, 512), "f16")
    t = g.transpose(w, [1, 0])
    g.output(g.matmul(a, t))
    product = _outputs(g)[0]
    (view,) = [n for n in topological([product]) if n.op == "transpose"]
    assert schedule_for([product]).kind == "library_matmul"
    assert schedule_for([view, product]).kind == "matmul"


def test_the_torch_backend_on_the_cpu_executor_runs_library_kernels(monkeypatch):
    # The CPU check of models (executor "cpu") covers graphs with library
    # kernels: the Linear layers' bare matmuls run as the calls' products.
    from kgc.execution import run as execution

    calls = []
    real = execution._run_library_call

    def counting(kernel, call, inputs, arguments):
        calls.append(call)
        return real(kernel, call, inputs, arguments)

    monkeypatch.setattr(execution, "_run_library_call", counting)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512, bias=False), torch.nn.GELU(),
                                torch.nn.Linear(512, 384, bias=False)).eval()
    x = torch.randn(300, 512)
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            compiled = torch.compile(model, backend="kgc", options={"executor": "cpu"})
            result = compiled(x)
            eager = model(x)
    finally:
        torch._dynamo.reset()
    assert calls and all(c.transpose_b for c in calls)
    torch.testing.assert_close(result, eager, rtol=1e-4, atol=1e-4)


def _lora(m: int, n: int, k: int, rank: int = 16) -> kgc.Graph:
    from kgc.bench.tune_defaults import LORA, Shape

    return Shape.of(LORA, "f16", m=m, n=n, k=k, rank=rank).build()


@pytest.mark.parametrize("m,n,k,expected", [
    # Up to the library's 128 rows: X W + (X A) B is one kernel (split
    # along k where its tiles are few).
    (32, 3072, 3072, ["matmul", "matmul"]),
    (128, 2048, 2048, ["matmul"]),
    (128, 6144, 4096, ["matmul"]),
    # More rows (unmeasured): X W by the library, X A (split) and (X A) B
    # with the sum in kernels of their own.
    (256, 3072, 3072, ["library_matmul", "matmul", "matmul", "matmul"]),
])
def test_a_lora_product_is_one_kernel_unless_the_library_s_lead_outweighs_the_others(
        m, n, k, expected):
    assert kinds(_lora(m, n, k)) == expected


def test_a_plain_product_of_those_rows_and_weights_is_still_the_library_s():
    assert kinds(gemm(32, 3072, 3072)) == ["library_matmul"]
    assert kinds(gemm(128, 2048, 2048)) == ["library_matmul"]


def test_a_lora_product_of_more_rows_than_measured_keeps_the_library():
    # 1024 rows over 0.5 MiB of weights (the model suite's LoRA step): not
    # measured against the one kernel, so X W stays the library's.
    assert kinds(_lora(1024, 512, 512, rank=8))[0] == "library_matmul"


def test_lora_s_one_kernel_of_128_rows_takes_64_row_tiles_over_128_deep_steps():
    from kgc.tiling.kernel_ops import knob

    context = ir.Context()
    module = _lora(128, 2048, 2048).build(context)
    with context:
        compile_module(module, emit="kg")
        (kernel,) = kernels_in(module)
        knobs = {name: knob(kernel, name) for name in ("block_m", "block_n", "block_k")}
    # 2 x 32 programs; the search's choice (9.6 us against 14.1 at 128 rows).
    assert knobs == {"block_m": 64, "block_n": 64, "block_k": 128}


@pytest.mark.parametrize("case", ["plain", "a^T", "b^T", "batched", "rows as batch", "bias",
                                  "widened"])
@pytest.mark.parametrize("m", [1, 17, 1000])
def test_a_call_made_for_its_buffers_computes_the_product(case, m):
    # The runtime makes a kernel's call once for its buffers' shapes and
    # types; the same call worked out from the tensors of each call (the
    # CPU path with no buffers given) and torch's product must agree.
    from kgc.pipeline.compiler import TensorSpec
    from kgc.runtime.library import library_function

    generator = torch.Generator().manual_seed(m)

    def tensor(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=generator).to(dtype)

    k, n, element = 33, 19, "f32"
    if case == "plain":
        call, inputs = LibraryCall("matmul"), [tensor(m, k), tensor(k, n)]
        expected = inputs[0] @ inputs[1]
    elif case == "a^T":
        call, inputs = LibraryCall("matmul", transpose_a=True), [tensor(k, m), tensor(k, n)]
        expected = inputs[0].T @ inputs[1]
    elif case == "b^T":
        call = LibraryCall("matmul", (1, 0), transpose_b=True)
        inputs = [tensor(n, k), tensor(m, k)]
        expected = inputs[1] @ inputs[0].T
    elif case == "batched":
        call, inputs = LibraryCall("matmul"), [tensor(3, m, k), tensor(3, k, n)]
        expected = inputs[0] @ inputs[1]
    elif case == "rows as batch":
        # A linear layer over [2, m] rows whose kernel returns the product
        # flattened to [2 m, n]: the call writes it seen as [2, m, n].
        call, inputs = LibraryCall("matmul"), [tensor(2, m, k), tensor(k, n)]
        expected = (inputs[0] @ inputs[1]).reshape(2 * m, n)
    elif case == "bias":
        call = LibraryCall("matmul", bias=2)
        inputs = [tensor(m, k), tensor(k, n), tensor(1, n)]
        expected = inputs[0] @ inputs[1] + inputs[2]
    else:
        element = "bf16"
        call = LibraryCall("matmul")
        inputs = [tensor(m, k, dtype=torch.bfloat16), tensor(k, n, dtype=torch.bfloat16)]
        expected = inputs[0].float() @ inputs[1].float()
    shapes = [tuple(t.shape) for t in inputs] + [tuple(expected.shape)]
    kinds = {torch.float32: "f32", torch.bfloat16: "bf16"}
    specs = [TensorSpec(shape, kinds[t.dtype]) for shape, t in zip(shapes, inputs + [expected])]
    for buffers in (specs, None):
        out = torch.full(expected.shape, float("nan"), dtype=expected.dtype)
        library_function("k", call, element, buffers)(*inputs, out)
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_a_library_call_sums_exactly_and_restores_the_settings_as_they_were(monkeypatch):
    from kgc.pipeline.compiler import TensorSpec
    from kgc.runtime import library

    getter = torch._C._get_cublas_allow_bf16_reduced_precision_reduction
    setter = torch._C._set_cublas_allow_bf16_reduced_precision_reduction
    before, tf32 = getter(), torch._C._get_cublas_allow_tf32()
    pair = isinstance(before, tuple)  # (reduced precision, split-K) where torch has both
    on, off = ((True, True), (False, True)) if pair else (True, False)
    seen = []
    real_mm = torch.mm

    def recording_mm(*arguments, **keywords):
        seen.append((getter(), torch._C._get_cublas_allow_tf32()))
        return real_mm(*arguments, **keywords)

    monkeypatch.setattr(torch, "mm", recording_mm)
    try:
        setter(*on) if pair else setter(on)
        torch._C._set_cublas_allow_tf32(True)
        call = library.library_function(
            "k", LibraryCall("matmul"), "bf16",
            [TensorSpec((4, 8), "bf16"), TensorSpec((8, 3), "bf16"), TensorSpec((4, 3), "bf16")])
        a, b = torch.randn(4, 8).bfloat16(), torch.randn(8, 3).bfloat16()
        call(a, b, torch.empty(4, 3, dtype=torch.bfloat16))
        # On its own the call turns off its element type's setting only;
        # inside exact_products every one is off.
        with library.exact_products():
            call(a, b, torch.empty(4, 3, dtype=torch.bfloat16))
        assert seen == [(off, True), (off, False)]
        assert getter() == on and torch._C._get_cublas_allow_tf32()
        if pair:
            # A setting already exact, split-K off too, is left as it is.
            setter(False, False)
            with library.exact_products():
                call(a, b, torch.empty(4, 3, dtype=torch.bfloat16))
            assert seen[-1][0] == (False, False) and getter() == (False, False)
    finally:
        setter(*before) if pair else setter(before)
        torch._C._set_cublas_allow_tf32(tf32)
