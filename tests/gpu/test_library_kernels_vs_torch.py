"""Library kernels (kgc.tiling.library: a bare matmul that cuBLAS computes
through torch) against torch on the GPU: plain GEMMs with M of 1, 3, 17,
1000 and 4097 in f16, bf16 and f32 (alone and with a bias, as torch's
addmm adds it), a batched one with a transposed
operand, a library kernel between Triton kernels (its result in the
workspace), f32 kept exact while torch allows TF32, and a Linear-heavy
model through the torch backend."""

import pytest

import kgc
from kgc.accuracy import tensor_mismatch
from kgc.tiling.library import LibraryMatmulConfig
from tests.comparison import assert_as_accurate_as_eager
from tests.test_hopper_gemm import config_for, gemm

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
LIBRARY = LibraryMatmulConfig(library=True)


def check(result, a, b, dtype: str) -> None:
    """kgc.accuracy's rule: against the exact product, with torch's f32 sum
    rounded to the dtype as eager."""
    assert result.dtype == DTYPES[dtype]
    reason = tensor_mismatch(result, (a.float() @ b.float()).to(DTYPES[dtype]),
                             a.double() @ b.double())
    assert reason is None, reason


def library_kernels(compiled) -> list:
    return [k for k in compiled.module.kernels.values() if k.library is not None]


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("m", [1, 3, 17, 1000, 4097])
def test_a_library_gemm_matches_torch(m, dtype):
    k, n = 1032, 264
    graph = gemm(m, k, n, dtype)
    # Below 128 rows kgc's rule keeps Triton: the knob asks for the call.
    compiled = kgc.compile(graph, config=config_for(graph, LIBRARY))
    assert len(library_kernels(compiled)) == 1
    generator = torch.Generator(device="cuda").manual_seed(m)
    a = torch.randn(m, k, device="cuda", generator=generator).to(DTYPES[dtype])
    b = torch.randn(k, n, device="cuda", generator=generator).to(DTYPES[dtype])
    check(compiled.run(a, b, poison=True), a, b, dtype)
    check(compiled(a, b), a, b, dtype)  # the bound fast path
    out = torch.empty(m, n, device="cuda", dtype=DTYPES[dtype])
    assert compiled(a, b, out=out) is out
    check(out, a, b, dtype)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("m", [1, 3, 17, 1000, 4097])
def test_a_library_gemm_with_a_bias_matches_addmm(m, dtype):
    from kgc import reference
    from tests.test_library_kernels import linear

    # Below 128 rows the knob asks for the call, on the product and its
    # bias alone (kgc's own choice there is one Triton kernel with the
    # gelu); from 128 rows kgc's rule calls the library, the gelu after it.
    small = m < 128
    graph = linear(m, 1032, 264, dtype, then=None if small else lambda g, y: g.gelu(y))
    compiled = kgc.compile(graph, config=config_for(graph, LIBRARY) if small else None)
    (kernel,) = library_kernels(compiled)
    assert kernel.library.bias == 2
    generator = torch.Generator(device="cuda").manual_seed(m)
    inputs = [torch.randn(shape, device="cuda", generator=generator).to(DTYPES[dtype])
              for shape in ((m, 1032), (1032, 264), (264,))]
    got = compiled.run(*inputs, poison=True)
    eager = torch.nn.functional.linear(inputs[0], inputs[1].T.contiguous(), inputs[2])
    if not small:
        eager = torch.nn.functional.gelu(eager)
    source = graph.build()
    with source.context:
        exact = reference.evaluate(source, None, inputs, exact=True)
    assert_as_accurate_as_eager(got, eager, exact)
    assert torch.equal(compiled(*inputs), got)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_batched_library_gemm_with_a_transposed_weight_matches_torch(dtype):
    graph = gemm(300, 520, 272, dtype, transposed_b=True, batch=3)
    compiled = kgc.compile(graph)
    (kernel,) = library_kernels(compiled)
    assert kernel.library.transpose_b
    generator = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(3, 300, 520, device="cuda", generator=generator).to(DTYPES[dtype])
    w = torch.randn(3, 272, 520, device="cuda", generator=generator).to(DTYPES[dtype])
    check(compiled(a, w), a, w.transpose(-1, -2), dtype)


def test_a_library_result_in_the_workspace_feeds_a_triton_kernel():
    # f32, so that the sum's half-float promotion does not become the
    # matmul's epilogue (which would make it Triton's).
    g = kgc.Graph("gemm_sum")
    a, b = g.input("a", (1000, 260), "f32"), g.input("b", (260, 512), "f32")
    g.output(g.sum(g.matmul(a, b), 1))
    compiled = kgc.compile(g)
    assert len(library_kernels(compiled)) == 1 and len(compiled.module.kernels) == 2
    generator = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(1000, 260, device="cuda", generator=generator)
    y = torch.randn(260, 512, device="cuda", generator=generator)
    for result in (compiled.run(x, y, poison=True), compiled(x, y)):
        reason = tensor_mismatch(result, (x @ y).sum(1), (x.double() @ y.double()).sum(1))
        assert reason is None, reason


def test_f32_stays_exact_while_torch_allows_tf32():
    graph = gemm(512, 4096, 512, "f32")
    compiled = kgc.compile(graph)
    assert len(library_kernels(compiled)) == 1
    generator = torch.Generator(device="cuda").manual_seed(13)
    a = torch.randn(512, 4096, device="cuda", generator=generator)
    b = torch.randn(4096, 512, device="cuda", generator=generator)
    settings = torch.backends.cuda.matmul
    before = settings.allow_tf32
    settings.allow_tf32 = True
    try:
        result = compiled(a, b)
        assert settings.allow_tf32  # restored after the call
    finally:
        settings.allow_tf32 = before
    check(result, a, b, "f32")


def test_a_linear_heavy_model_through_the_torch_backend(monkeypatch):
    import kgc.torch  # noqa: F401
    from kgc.runtime import launching

    bound = []
    real = launching.library_function

    def counting(*arguments):
        bound.append(arguments[0])
        return real(*arguments)

    monkeypatch.setattr(launching, "library_function", counting)
    torch._dynamo.reset()
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024, bias=False), torch.nn.GELU(),
        torch.nn.Linear(1024, 768, bias=False), torch.nn.Linear(768, 512, bias=False),
        torch.nn.Linear(512, 1000, bias=False)).half().cuda().eval()
    x = torch.randn(1, 300, 512, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        eager = model(x)
        compiled = torch.compile(model, backend="kgc")
        compiled(x)
        result = compiled(x)
        exact = __import__("copy").deepcopy(model).double()(x.double())
    torch._dynamo.reset()
    assert bound, "no library kernel was bound"
    assert_as_accurate_as_eager(result, eager, exact)
