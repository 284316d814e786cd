"""`torch.compile(model, backend="kgc")` on the GPU, against eager PyTorch.

An MLP block, and a Llama-style decoder block in plain torch (RMSNorm,
rotary embedding, GQA attention through SDPA, gated SiLU MLP) in f16 and
bf16, batch 1 and 8, one query (decode, with a KV cache) and 128 (prefill,
with an additive causal mask, or is_causal). Each result must be as accurate
as eager's against the block run in f64; every op of the block must run in
kgc kernels.
The kernel and fallback counts are printed (`pytest -s`).
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import kgc.torch  # noqa: E402
from kgc.accuracy import mismatch, tensor_mismatch  # noqa: E402
from kgc.torch.backend import Backend, compile_kernel_graph  # noqa: E402
from tests.comparison import assert_as_accurate_as_eager  # noqa: E402
from tests.examples import load_example  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_dynamo")]


def _exact(module, inputs):
    """The module run in f64 on f64 copies of the inputs."""
    import copy

    wide = copy.deepcopy(module).double()
    with torch.no_grad():
        return wide(*[None if x is None else x.double() for x in inputs])


def _as_dtype(results, dtype):
    if isinstance(results, tuple):
        return tuple(r.to(dtype) for r in results)
    return results.to(dtype)


def _compile_and_check(module, inputs, dtype, **compile_options):
    first = len(kgc.torch.reports())
    with torch.no_grad():
        eager = module(*inputs)
        compiled = torch.compile(module, backend="kgc", **compile_options)
        results = compiled(*inputs)
        results = compiled(*inputs)  # the second call runs what the first compiled
    exact = _exact(module, inputs)
    assert_as_accurate_as_eager(results, eager, exact)
    reports = kgc.torch.reports()[first:]
    kernels = sum(r.kernel_count for r in reports)
    fallbacks = [op for r in reports for op, _ in r.fallbacks]
    print(f"\n{len(reports)} graph(s), {kernels} kgc kernel(s), {len(fallbacks)} fallback op(s): "
          f"{', '.join(fallbacks) or 'none'}")
    return reports


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mlp_block(dtype):
    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.LayerNorm(384), torch.nn.Linear(384, 1000), torch.nn.GELU(),
        torch.nn.Linear(1000, 384)).to(dtype).cuda().eval()
    x = torch.randn(17, 384, dtype=dtype, device="cuda")
    reports = _compile_and_check(block, (x,), dtype)
    assert all(not r.fallbacks and r.kernel_count for r in reports)


@pytest.mark.parametrize("seq,mask_tensor", [(1, True), (128, True), (128, False)],
                         ids=["decode", "prefill", "prefill_is_causal"])
@pytest.mark.parametrize("batch", [1, 8])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_llama_decoder_block(dtype, batch, seq, mask_tensor):
    llama = load_example("llama_block")
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=512, heads=8, kv_heads=2, mlp=1376).to(dtype).cuda().eval()
    inputs = block.example_inputs(batch=batch, seq=seq, past=17 if seq == 1 else 0,
                                  mask_tensor=mask_tensor)
    inputs = inputs if inputs[-1] is not None else inputs[:-1]
    reports = _compile_and_check(block, inputs, dtype)
    # Every op of the block runs in kgc kernels: nothing is left to PyTorch
    # but views it does without a kernel.
    assert all(not r.fallbacks for r in reports), [r.fallbacks for r in reports]
    assert sum(r.kernel_count for r in reports) > 0


def test_max_autotune_mode_searches_and_matches():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.SiLU(),
                                torch.nn.Linear(512, 256)).half().cuda().eval()
    x = torch.randn(8, 256, dtype=torch.float16, device="cuda")
    reports = _compile_and_check(block, (x,), torch.float16,
                                 options={"mode": "max-autotune"})
    assert all(not r.fallbacks and r.kernel_count for r in reports)


def test_64_decode_steps_compile_a_bounded_number_of_kernel_graphs():
    llama = load_example("llama_block")
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=512, heads=8, kv_heads=2, mlp=1376).half().cuda().eval()
    compiled_graphs = []

    def counting(graph, mode):
        compiled_graphs.append(graph.name)
        return compile_kernel_graph(graph, mode)

    backend = Backend(compile_graph=counting)
    step = torch.compile(block, backend=backend)
    exact_block = copy.deepcopy(block).double()
    x, cos, sin, past_k, past_v, _ = block.example_inputs(batch=1, seq=1, past=5)
    with torch.no_grad():
        for _ in range(64):
            inputs = (x, cos, sin, past_k, past_v)
            eager = block(*inputs)
            results = step(*inputs)
            exact = exact_block(*(t.double() for t in inputs))
            reason = mismatch(tuple(results), tuple(eager), tuple(exact))
            assert reason is None, reason
            x, past_k, past_v = eager
    print(f"\n64 decode steps: {len(backend.reports)} graph(s), "
          f"{len(compiled_graphs)} kernel graph(s) compiled, "
          f"{sum(r.kernel_count for r in backend.reports)} kgc kernel(s)")
    # One graph for the first length and one with the length dynamic,
    # each compiling its partitions once: the count does not grow with
    # the steps.
    assert len(backend.reports) <= 2
    assert len(compiled_graphs) == sum(len(r.partitions) for r in backend.reports) <= 8


def test_a_varying_batch_compiles_once_for_every_size():
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(256, 700), torch.nn.GELU(),
                                torch.nn.Linear(700, 256)).half().cuda().eval()
    compiled_graphs = []

    def counting(graph, mode):
        compiled_graphs.append(graph.name)
        return compile_kernel_graph(graph, mode)

    backend = Backend(compile_graph=counting)
    run = torch.compile(block, backend=backend)
    exact_block = copy.deepcopy(block).double()
    with torch.no_grad():
        for batch in (1, 3, 5, 17, 2, 9, 33, 30, 6):
            x = torch.randn(batch, 256, dtype=torch.float16, device="cuda")
            reason = tensor_mismatch(run(x), block(x), exact_block(x.double()))
            assert reason is None, f"batch {batch}: {reason}"
    assert not backend.reports[-1].fallbacks
    # A static graph for the first batch, then one with the batch as its
    # dynamic extent, compiled once and run at every size: no buckets.
    assert not [name for name in compiled_graphs if "_b" in name], compiled_graphs
    assert len(compiled_graphs) <= 2, compiled_graphs


def _counting_backend() -> tuple[Backend, list[str]]:
    """kgc's backend, and the text of every kernel graph it compiles, in
    order (a new length that compiles shows there)."""
    compiled_graphs: list[str] = []

    def counting(graph, mode):
        compiled_graphs.append(graph.to_mlir())
        return compile_kernel_graph(graph, mode)

    return Backend(compile_graph=counting), compiled_graphs


def _compiled_once_over_lengths(block, batch: int, width: int):
    """`block` compiled by kgc with the length of (batch, length, width)
    inputs marked dynamic, checked against eager at lengths 3, 17, 1000,
    4097 and 5; the kernel graphs it compiled, and the ops of its last
    graph left to PyTorch."""
    backend, compiled_graphs = _counting_backend()
    run = torch.compile(block, backend=backend)
    exact_block = copy.deepcopy(block).double()
    with torch.no_grad():
        for length in (3, 17, 1000, 4097, 5):
            x = torch.randn(batch, length, width, dtype=torch.float16, device="cuda")
            torch._dynamo.mark_dynamic(x, 1)
            reason = tensor_mismatch(run(x), block(x), exact_block(x.double()))
            assert reason is None, f"length {length}: {reason}"
    return compiled_graphs, backend.reports[-1].fallbacks


def test_a_sequence_of_one_batch_compiles_once_for_every_length():
    # (1, s, 256): the length is the kernel graph's dynamic extent behind
    # the batch of one; the kernels read it at every call.
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.Linear(256, 700),
                                torch.nn.GELU(), torch.nn.Linear(700, 256)).half().cuda().eval()
    compiled_graphs, fallbacks = _compiled_once_over_lengths(block, 1, 256)
    assert not fallbacks
    assert len(compiled_graphs) == 1 and "tensor<1x?x256xf16>" in compiled_graphs[0]


@pytest.mark.parametrize("batch", [1, 2])
def test_a_sequence_inside_heads_compiles_once_for_every_length(batch):
    # (b, heads, s, d) between the projections: the kernels compute the
    # strides outside the length from it.
    from tests.test_torch_frontend import PerHeadNorm

    torch.manual_seed(0)
    block = PerHeadNorm(hidden=256, heads=4).half().cuda().eval()
    compiled_graphs, fallbacks = _compiled_once_over_lengths(block, batch, 256)
    # At a batch of two the products' rows are 2 * s, a size of their own:
    # each product is a graph whose `?` is 2 s, compiled once like the
    # graphs around it; only the views that merge the rows stay with PyTorch
    # (a view costs it nothing).
    assert all("2*s" in why and op.startswith(("aten.view", "aten._unsafe_view"))
               for op, why in fallbacks), fallbacks
    assert compiled_graphs and all("?" in text for text in compiled_graphs), compiled_graphs
    assert all(f"tensor<{batch}x4x?x" in text or f"tensor<{batch}x?x256xf16>" in text
               or (batch == 2 and "tensor<?x256xf16>" in text) for text in compiled_graphs)


def test_a_training_step_over_a_dynamic_length_compiles_its_weight_gradients_once():
    # The backward's weight gradients contract over the tokens (X^T dY) and
    # its bias and norm-weight gradients sum them away: kgc's, compiled once
    # with the length as the `?` they loop over, at every length.
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.Linear(256, 700),
                                torch.nn.GELU(), torch.nn.Linear(700, 256)).cuda()
    exact_block = copy.deepcopy(block).double()
    backend, compiled_graphs = _counting_backend()
    run = torch.compile(block, backend=backend)
    compiles = []
    for length in (3, 17, 1000, 4097, 5):
        x = torch.randn(1, length, 256, device="cuda")
        torch._dynamo.mark_dynamic(x, 1)
        block.zero_grad(set_to_none=True)
        run(x).square().mean().backward()
        compiles.append(len(compiled_graphs))
        got = [p.grad for p in block.parameters()]
        block.zero_grad(set_to_none=True)
        block(x).square().mean().backward()
        want = [p.grad for p in block.parameters()]
        exact_block.zero_grad(set_to_none=True)
        exact_block(x.double()).square().mean().backward()
        for name, g, w, e in zip([n for n, _ in block.named_parameters()], got, want,
                                 [p.grad for p in exact_block.parameters()]):
            reason = tensor_mismatch(g, w, e)
            assert reason is None, f"length {length}, {name}: {reason}"
    backward = [r for r in backend.reports if r.kind == "backward"][-1]
    reductions = [op for op, why in backward.fallbacks if "reduces over dynamic extent" in why]
    assert not reductions, backward.fallbacks
    # The first step compiled the forward and the backward with the length
    # as `?`; no later length compiled anything.
    assert any("?" in t for t in compiled_graphs) and len(set(compiles)) == 1, compiles


# Sizes read as values reach the kernels as 0-d int64 (or float32) inputs,
# at their real value at every call, whatever bucket the call runs in.
SIZES_AS_VALUES = [
    ("arithmetic", lambda x: x * 2 + x.shape[0]),
    ("half_arithmetic", lambda x: (x.half() * 2 + x.shape[0] * 3).float()),
    ("comparison", lambda x: torch.where(x * 1000 > x.shape[0] - 1, x, -x)),
    ("float_of_a_size", lambda x: x * (x.shape[0] / 4)),
    ("arange_start", lambda x: x * 2 + torch.arange(x.shape[0], 0, -1, device=x.device)),
    ("full_value", lambda x: x.unsqueeze(1) * 2 + torch.full((3,), x.shape[0], device=x.device)),
]


@pytest.mark.parametrize("name,function", SIZES_AS_VALUES, ids=[c[0] for c in SIZES_AS_VALUES])
def test_a_dynamic_size_read_as_a_value_runs_in_kgc_at_its_real_value(name, function):
    backend = Backend()
    run = torch.compile(function, backend=backend, dynamic=True)
    generator = torch.Generator(device="cuda").manual_seed(3)
    with torch.no_grad():
        for extent in (3, 5, 17, 1000, 4097):
            x = torch.randn(extent, device="cuda", generator=generator)
            # f16 rounds the half case to 1e-3 of its values; a bucket's
            # size instead of the real one is off by far more.
            tolerance = 1e-3 if name == "half_arithmetic" else 1e-5
            torch.testing.assert_close(run(x), function(x), atol=tolerance, rtol=tolerance)
    dynamic = backend.reports[-1]
    # An arange of the size is made by PyTorch (kgc.torch.extents: kernels
    # read their sizes off their tensors); what reads it is kgc's.
    left = {"aten.arange.start_step"} if name == "arange_start" else set()
    assert {op.split(":")[0] for op, _ in dynamic.fallbacks} == left, dynamic.fallbacks
    assert dynamic.kernel_count >= 1
