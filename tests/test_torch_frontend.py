"""The PyTorch front end without a GPU: aten ops to kg text (checked with
FileCheck), partitioning around ops kgc lacks, the fallbacks and their
warnings, explain, the entry point, and a decode loop whose KV cache grows.

Kernel graphs are "compiled" here into `kgc.reference.evaluate` of their
module, so a compiled model runs end to end on the CPU and its results are
checked against eager PyTorch's.
"""

from __future__ import annotations

import math
import operator
import pathlib
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F

import kgc
from kgc import reference
from kgc.torch import Backend, KgcFallbackWarning
from kgc.torch.backend import _resolve_mode
from kgc.diagnostics import KgcError
from tests.examples import load_example

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

REPO = pathlib.Path(__file__).resolve().parent.parent


class ReferenceBackend(Backend):
    """The kgc backend with kernel graphs evaluated by kgc.reference on the
    CPU; `texts` holds the kg text of every graph compiled."""

    def __init__(self):
        super().__init__(compile_graph=self._compile, devices=None, require_cuda=False)
        self.texts: list[str] = []

    def _compile(self, graph, mode):
        module = graph.build()
        self.texts.append(str(module))
        name = graph.name

        def run(*tensors):
            return reference.evaluate(module, name, list(tensors))
        return run


def _filecheck(text: str, checks: str) -> None:
    tool = shutil.which("filecheck", path=str(pathlib.Path(sys.executable).parent))
    assert tool is not None, "filecheck is a test dependency"
    with open(_tmp_path() / "checks.txt", "w") as handle:
        handle.write(checks)
    result = subprocess.run([tool, str(_tmp_path() / "checks.txt")], input=text, text=True,
                            capture_output=True)
    assert result.returncode == 0, f"{result.stderr}\n--- input ---\n{text}"


_TMP: list[pathlib.Path] = []


def _tmp_path() -> pathlib.Path:
    return _TMP[-1]


@pytest.fixture(autouse=True)
def tmp_for_filecheck(tmp_path):
    _TMP.append(tmp_path)
    yield
    _TMP.pop()


def _tolerance(dtype):
    return {torch.float32: (2e-5, 2e-5), torch.float16: (1e-2, 1e-2),
            torch.bfloat16: (5e-2, 5e-2)}[dtype]


def _assert_close(actual, expected):
    if isinstance(expected, (tuple, list)):
        for a, e in zip(actual, expected):
            _assert_close(a, e)
        return
    atol, rtol = _tolerance(expected.dtype)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)


def _randn(*shape, dtype=torch.float32, seed=[0]):
    seed[0] += 1
    generator = torch.Generator().manual_seed(seed[0])
    return torch.randn(*shape, generator=generator, dtype=torch.float32).to(dtype)


def _run(function, *inputs):
    backend = ReferenceBackend()
    with torch.no_grad():
        expected = function(*inputs)
        actual = torch.compile(function, backend=backend, fullgraph=True)(*inputs)
    _assert_close(actual, expected)
    return backend


# (id, function, input shapes (dtype f32 unless given), FileCheck lines)
W = _randn(5, 17)
B = _randn(5)
CASES = [
    ("linear", lambda x: F.linear(x, W, B), [(3, 17)],
     "CHECK: kg.transpose\nCHECK: kg.matmul\nCHECK: kg.add"),
    ("linear_3d", lambda x: F.linear(x, W), [(2, 3, 17)],
     "CHECK: kg.reshape {{.*}} -> tensor<6x17xf32>\nCHECK: kg.matmul\n"
     "CHECK-NOT: kg.reshape"),
    ("matmul_broadcast", lambda a, b: torch.matmul(a, b) * 2, [(2, 3, 17), (17, 4)],
     "CHECK: kg.matmul\nCHECK: kg.mul"),
    ("bmm", lambda a, b: torch.bmm(a, b).relu(), [(2, 3, 17), (2, 17, 4)],
     "CHECK: kg.matmul {{.*}} tensor<2x3x4xf32>\nCHECK: kg.relu"),
    ("mm", lambda a, b: a.mm(b).neg(), [(3, 17), (17, 4)], "CHECK: kg.matmul\nCHECK: kg.neg"),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [(4,), (3, 17), (17, 4)],
     "CHECK: kg.matmul\nCHECK: kg.mul\nCHECK: kg.mul\nCHECK: kg.add"),
    ("arithmetic", lambda x, y: ((x + y) * 3 - 1) / (y.abs() + 2), [(3, 17), (17,)],
     "CHECK: kg.add\nCHECK: kg.mul\nCHECK: kg.sub\nCHECK: kg.abs\nCHECK: kg.div"),
    ("scalar_not_held_by_half", lambda x: x * 0.1, [((4, 17), torch.float16)],
     "CHECK: kg.cast {{.*}} to tensor<4x17xf32>\nCHECK: kg.constant 1.000000e-01\n"
     "CHECK: kg.mul\nCHECK: kg.cast {{.*}} to tensor<4x17xf16>"),
    ("alpha", lambda x, y: torch.add(x, y, alpha=2), [(3, 5), (3, 5)],
     "CHECK: kg.mul\nCHECK: kg.add"),
    ("pow", lambda x: x.pow(2) + x.abs().pow(0.5) + x.abs().pow(2.5), [(3, 17)],
     "CHECK: kg.square\nCHECK: kg.sqrt\nCHECK: kg.pow"),
    # Cubes and inverse squares multiply, in f32 for a half float, as
    # torch's kernel does: no powf.
    ("pow_by_multiplying", lambda x: x.pow(3.0) + (x.abs() + 1).pow(-2), [((3, 17), torch.float16)],
     "CHECK-NOT: kg.pow\nCHECK: kg.cast {{.*}} to tensor<3x17xf32>\nCHECK-NEXT: kg.square\n"
     "CHECK-NEXT: kg.mul\nCHECK-NEXT: kg.cast {{.*}} to tensor<3x17xf16>\nCHECK-NOT: kg.pow\n"
     "CHECK: kg.square\nCHECK-NEXT: kg.reciprocal\nCHECK-NOT: kg.pow"),
    ("unary", lambda x: torch.exp(x).rsqrt() + torch.sigmoid(x) + torch.tanh(x) + x.relu().sqrt(),
     [(3, 17)], "CHECK: kg.exp\nCHECK: kg.rsqrt\nCHECK: kg.sigmoid\nCHECK: kg.tanh\n"
                "CHECK: kg.relu\nCHECK: kg.sqrt"),
    # A rotary embedding's tables: positions times frequencies, sin and cos.
    ("sin_cos", lambda x: torch.sin(x * 3) * torch.cos(x), [((3, 17), torch.bfloat16)],
     "CHECK: kg.sin {{.*}} tensor<3x17xbf16>\nCHECK: kg.cos {{.*}} tensor<3x17xbf16>"),
    ("gelu_silu", lambda x: F.gelu(x) + F.gelu(x, approximate="tanh") * F.silu(x), [(3, 17)],
     "CHECK: kg.gelu\nCHECK: kg.gelu {{.*}}tanh"),
    ("softmax", lambda x: torch.softmax(x, -1), [((3, 17), torch.float16)],
     "CHECK: kg.softmax {{.*}} tensor<3x17xf16>"),
    ("log_softmax", lambda x: torch.log_softmax(x, 1), [(3, 17)],
     "CHECK: kg.reduce max\nCHECK: kg.exp\nCHECK: kg.reduce sum\nCHECK: kg.log"),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (17,), w, b), [(3, 17), (17,), (17,)],
     "CHECK: kg.layer_norm"),
    ("rms_norm", lambda x, w: F.rms_norm(x, (17,), w, eps=1e-6), [(3, 17), (17,)],
     "CHECK: kg.square\nCHECK: kg.reduce mean\nCHECK: kg.rsqrt\nCHECK: kg.mul"),
    ("reductions", lambda x: x.mean(-1) + x.sum(-1) + x.amax(-1) + x.var(-1), [(3, 17)],
     "CHECK: kg.reduce mean\nCHECK: kg.reduce sum\nCHECK: kg.reduce max\nCHECK: kg.div"),
    ("views", lambda x: (x.transpose(0, 1).permute(1, 0).reshape(17, 3).view(3, 17)
                         .unsqueeze(0).squeeze(0) * 2), [(3, 17)],
     "CHECK: kg.transpose\nCHECK: kg.mul"),
    ("expand", lambda x, y: x.expand(2, 3, 17) * y, [(1, 17), (2, 3, 17)],
     "CHECK: kg.broadcast_to {{.*}} -> tensor<2x3x17xf32>\nCHECK: kg.mul"),
    ("slice_cat", lambda x: torch.cat((-x[..., 9:], x[..., :9]), dim=-1) * 2, [(3, 18)],
     "CHECK: kg.slice\nCHECK: kg.neg\nCHECK: kg.slice\nCHECK: kg.concat\nCHECK: kg.mul"),
    # A fused projection split after its matmul (GPT-2's c_attn, Phi-3's
    # qkv_proj): each piece a slice, by sizes and by a chunk size.
    ("split_with_sizes", lambda x: (lambda a, b, c: a * b + c[..., 1:6])(*x.split([5, 5, 7], -1)),
     [(3, 17)], "CHECK: kg.slice\nCHECK: kg.slice\nCHECK: kg.slice\nCHECK: kg.mul\nCHECK: kg.add"),
    ("split_chunks", lambda x: (lambda a, b, c: a - b * c)(*torch.split(x, 6, dim=0)), [(18, 3)],
     "CHECK: kg.slice {{.*}} -> tensor<6x3xf32>\nCHECK: kg.mul\nCHECK: kg.sub"),
    # Padding that also cuts (a negative amount), as slices and constant
    # blocks joined.
    ("constant_pad", lambda x: F.pad(x, (1, -2, 0, 3), value=0.5) * 2, [(3, 17)],
     "CHECK: kg.slice\nCHECK: kg.constant 5.000000e-01\nCHECK: kg.concat\n"
     "CHECK: kg.concat {{.*}} -> tensor<6x16xf32>"),
    # A causal LM's labels shifted by padding with the ignored index, and
    # the count of those not ignored: torch's int64 sum of a bool, counted
    # in f32.
    ("shift_and_count", lambda x: F.pad((x * 4).long(), (0, 1), value=-100)[:, 1:].ne(-100)
     .sum(-1) * x[:, 0], [(3, 17)],
     "CHECK: kg.constant -1.000000e+02 : tensor<3x1xi64>\nCHECK: kg.concat\n"
     "CHECK: kg.cast {{.*}} to tensor<3x17xf32>\nCHECK: kg.reduce sum\n"
     "CHECK: kg.cast {{.*}} to tensor<3xi64>"),
    ("clone_contiguous", lambda x: x.t().contiguous().clone() + 1, [(3, 17)],
     "CHECK: kg.transpose\nCHECK: kg.add"),
    ("dtype_conversion", lambda x: (x.float() * 2).to(torch.bfloat16), [((3, 17), torch.float16)],
     "CHECK: kg.cast {{.*}} to tensor<3x17xf32>\nCHECK: kg.mul\n"
     "CHECK: kg.cast {{.*}} to tensor<3x17xbf16>"),
    ("attention", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     [(2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16), (5, 7)],
     "CHECK: kg.matmul {{.*}} -> tensor<2x3x5x7xf32>\nCHECK: kg.softmax\nCHECK: kg.matmul"),
]


def _inputs(specs):
    tensors = []
    for spec in specs:
        shape, dtype = (spec, torch.float32) if isinstance(spec[0], int) else spec
        tensors.append(_randn(*shape, dtype=dtype))
    return tensors


@pytest.mark.parametrize("name,function,specs,checks", CASES, ids=[c[0] for c in CASES])
def test_every_supported_op_converts(name, function, specs, checks):
    backend = _run(function, *_inputs(specs))
    (report,) = backend.reports
    assert len(report.partitions) == 1, report
    assert not report.fallbacks
    (text,) = backend.texts
    _filecheck(text, checks)


def test_an_unsupported_op_in_the_middle_splits_the_graph():
    w1, w2 = _randn(17, 8), _randn(8, 8)

    def function(x):
        y = torch.relu(x @ w1)
        y = torch.sort(y, dim=-1).values  # kgc has no sort
        return torch.sigmoid(y @ w2) * 2

    backend = _run(function, _randn(5, 17))
    (report,) = backend.reports
    assert len(report.partitions) == 2
    assert [p.ops[0].split(":")[0] for p in report.partitions] == ["aten.mm.default"] * 2
    reasons = dict(report.fallbacks)
    (sort,) = [op for op in reasons if op.startswith("aten.sort")]
    assert "not supported by kgc yet" in reasons[sort]


def test_an_empty_slice_joined_back_does_not_split_the_graph():
    # A rotary embedding over the whole head (Phi-3's partial rotary at its
    # full width): the pass-through part is an empty slice, joined back by a
    # cat. PyTorch keeps the empty slice; it must not cut the kernel graph.
    w1, w2 = _randn(16, 8), _randn(8, 8)

    def function(x):
        q = x @ w1
        rotated, passed = q[..., :8], q[..., 8:]
        q = torch.cat((rotated * 2.0, passed), dim=-1)
        return torch.sigmoid(q @ w2)

    backend = _run(function, _randn(5, 16))
    (report,) = backend.reports
    assert len(report.partitions) == 1
    # The empty slice, read by nothing once the cat drops it, is gone: not
    # an op left to PyTorch.
    assert not report.fallbacks, report.fallbacks


class TiledBackend(ReferenceBackend):
    """Kernel graphs compiled by kgc's pipeline to tiled kernels (as for a
    GPU) and run by the CPU executor of tile programs: the kernels'
    numerics, masks and indices without a GPU. `kinds` holds the kinds of
    each graph's kernels."""

    def __init__(self):
        super().__init__()
        self.kinds: list[list[str]] = []

    def _compile(self, graph, mode):
        from kgc.execution import run_tiled
        from kgc.pipeline.compiler import compile_module

        from mlir import ir

        from kgc.tiling.kernel_ops import kernels_in

        module = graph.build()
        self.texts.append(str(module))
        with module.context:
            compile_module(module, emit="kg")
            self.kinds.append([ir.StringAttr(k.attributes["kind"]).value
                               for k in kernels_in(module)])
        name = graph.name

        def run(*tensors):
            return run_tiled(module, name, *tensors)
        return run


def _run_tiled(function, *inputs):
    backend = TiledBackend()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        expected = function(*inputs)
        actual = torch.compile(function, backend=backend, fullgraph=True)(*inputs)
    _assert_close(actual, expected)
    (report,) = backend.reports
    assert not report.fallbacks, report.fallbacks
    return backend


def _positions(*shape, low=-9, high=9, dtype=torch.int64, seed=[0]):
    seed[0] += 1
    generator = torch.Generator().manual_seed(seed[0])
    return torch.randint(low, high, shape, generator=generator).to(dtype)


def test_integer_tensors_convert():
    def function(x, index):
        return (x * 2).sum(-1) + (index + 1).float() + (index * 3 - 2).to(x.dtype)

    backend = _run_tiled(function, _randn(4, 17), _positions(4))
    _filecheck(backend.texts[0], "CHECK: tensor<4xi64>\nCHECK: kg.cast {{.*}} to tensor<4xf32>")


INT_CASES = [
    # (id, function, inputs, FileCheck lines)
    ("compare_promotes", lambda x, i: torch.where(i < x, x, -x) * 2,
     lambda: (_randn(5, 17), _positions(5, 17)),
     "CHECK: kg.cast {{.*}} : tensor<5x17xi64> to tensor<5x17xf32>\nCHECK: kg.cmp lt\n"
     "CHECK: kg.select"),
    ("compare_scalar", lambda x: (x > 0.25).float() + (x <= -1).to(x.dtype),
     lambda: (_randn(3, 17, dtype=torch.float16),), "CHECK: kg.cmp gt\nCHECK: kg.cmp le"),
    ("masked_fill", lambda x, m: x.masked_fill(m, -3.5).relu() + x.masked_fill(~m, 0),
     lambda: (_randn(4, 33), _positions(4, 33, low=0, high=2, dtype=torch.bool)),
     "CHECK: kg.logical_not\nCHECK: kg.select"),
    ("logical", lambda x, a, b: torch.where(torch.logical_and(a, b) | (a ^ (x > 0)), x, 0.0),
     lambda: (_randn(6, 17), _positions(6, 17, low=0, high=2, dtype=torch.bool),
              _positions(6, 17, low=0, high=2, dtype=torch.bool)),
     "CHECK: kg.logical_and\nCHECK: kg.logical_xor\nCHECK: kg.logical_or"),
    ("arange", lambda x: x * torch.arange(17, device=x.device) + torch.arange(
        3, 37, 2, device=x.device).to(x.dtype),
     lambda: (_randn(5, 17),), "CHECK: kg.iota"),
    ("int32_cast", lambda x, i: (i.to(torch.int32) * 3).to(torch.float32) + x,
     lambda: (_randn(7, 9), _positions(7, 9)), "CHECK: to tensor<7x9xi32>"),
    ("count", lambda x: (x > 0).to(x.dtype).sum(-1) + 1,
     lambda: (_randn(3, 50, dtype=torch.float16),),
     "CHECK: kg.cast {{.*}} : tensor<3x50xi1> to tensor<3x50xf16>\nCHECK: kg.reduce sum"),
    # Rows wholly masked (a bool mask of keys), some rows all true, others
    # neither: any and all over one dim, several, every one, and of floats.
    ("any_all", lambda x, m: torch.where(m.any(-1, keepdim=True), x, -x)
     + m.all(-1, keepdim=True).to(x.dtype) + (x > 1).any() * 2.0
     + torch.all((x > -3), dim=(0, 1)) + x.any(0).to(x.dtype),
     lambda: (_randn(17, 1000), torch.cat([
         torch.zeros(5, 1000, dtype=torch.bool), torch.ones(4, 1000, dtype=torch.bool),
         _positions(8, 1000, low=0, high=2, dtype=torch.bool)])),
     "CHECK: kg.cast {{.*}} : tensor<17x1000xi1> to tensor<17x1000xf16>\n"
     "CHECK: kg.reduce max"),
]


@pytest.mark.parametrize("name,function,inputs,checks", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_integer_and_boolean_ops_run_in_kgc_kernels(name, function, inputs, checks):
    backend = _run_tiled(function, *inputs())
    _filecheck(backend.texts[0], checks)


def test_integer_bit_operations_stay_with_pytorch():
    def function(x, i):
        return x * (i & 6).float()

    backend = _run(function, _randn(4, 17), _positions(4, 17))
    reasons = " ".join(why for _, why in backend.reports[0].fallbacks)
    assert "kg has no bitwise ops" in reasons


@pytest.mark.parametrize("mask", ["causal", "bool", "additive"])
@pytest.mark.parametrize("queries,keys", [(5, 5), (17, 40), (1, 33)])
def test_masked_attention_runs_in_one_kgc_kernel(mask, queries, keys):
    q = _randn(2, 4, queries, 16)
    k, v = _randn(2, 2, keys, 16), _randn(2, 2, keys, 16)
    allowed = _positions(queries, keys, low=0, high=4) > 0
    allowed[:, 0] = True  # every query sees a key: no row of only -inf
    masks = {"causal": None, "bool": allowed,
             "additive": torch.zeros(queries, keys).masked_fill(~allowed, -math.inf)}

    def function(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=masks[mask],
                                              is_causal=mask == "causal", enable_gqa=True)

    backend = _run_tiled(function, q, k, v)
    _filecheck(backend.texts[0],
               "CHECK-DAG: kg.broadcast_to\n" + ("CHECK-DAG: kg.iota\nCHECK-DAG: kg.cmp ge\n"
                                                 if mask == "causal" else "")
               + ("CHECK-DAG: kg.select\n" if mask != "additive" else "")
               + "CHECK: kg.softmax")
    assert backend.kinds == [["attention"]], backend.kinds


def test_without_cuda_the_default_backend_warns_and_runs_pytorch():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    x = _randn(3, 17)
    with pytest.warns(KgcFallbackWarning, match="no CUDA device"):
        result = torch.compile(lambda t: torch.relu(t) * 2, backend="kgc")(x)
    torch.testing.assert_close(result, torch.relu(x) * 2)


def test_a_graph_that_needs_autograd_compiles_its_forward_and_backward_without_warnings():
    w = torch.randn(17, 4, requires_grad=True)
    x = _randn(3, 17)
    backend = ReferenceBackend()
    compiled = torch.compile(lambda t: (t @ w).relu(), backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        result = compiled(x)
        result.sum().backward()
    torch.testing.assert_close(result, (x @ w).relu().detach())
    torch.testing.assert_close(w.grad, (x.t() @ ((x @ w) > 0).float()).detach())
    assert [r.kind for r in backend.reports] == ["forward", "backward"]
    forward, backward = backend.reports
    assert not forward.fallbacks and not backward.fallbacks
    # dW = X^T dY, on the grad masked where the forward's relu was zero.
    assert any(op.startswith("aten.mm.default") for op in backward.partitions[0].ops)
    assert backward.partitions[0].name.startswith("kgc_backward_")
    assert len(backend.texts) == 2


def test_a_graph_that_needs_no_grad_compiles_as_an_inference_graph_without_warnings():
    w = torch.randn(17, 4, requires_grad=True)
    backend = ReferenceBackend()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        torch.compile(lambda t: (t @ w).relu(), backend=backend)(_randn(3, 17))
    assert [r.kind for r in backend.reports] == ["inference"]


def test_modes_are_checked():
    assert _resolve_mode(None, {"mode": "max-autotune"}) == "max-autotune"
    assert _resolve_mode("max-autotune", None) == "max-autotune"
    assert _resolve_mode(None, None) == "default"
    with pytest.raises(KgcError, match="unknown mode 'fastest'"):
        _resolve_mode("fastest", None)
    with pytest.raises(KgcError, match="unknown options tile"):
        _resolve_mode(None, {"tile": 64})


def test_the_entry_point_names_the_backend_without_importing_kgc():
    code = ("import sys, torch._dynamo; print('kgc' in torch._dynamo.list_backends(), "
            "'kgc' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO / "tests")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "False"]


def _small_block(dtype=torch.float32):
    llama = load_example("llama_block")
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=64, heads=4, kv_heads=2, mlp=96).to(dtype).eval()
    return block


def test_explain_names_each_kernels_ops_and_each_fallback(capsys):
    block = _small_block()
    inputs = block.example_inputs(batch=2, seq=3, past=5)
    with torch.no_grad():
        explanation = kgc.explain(block, *inputs)
    printed = capsys.readouterr().out
    assert printed.strip() == str(explanation)
    assert explanation.kernel_count >= 2
    kernel_lines = [line for line in printed.splitlines() if line.strip().startswith("kernel ")]
    assert len(kernel_lines) == explanation.kernel_count
    assert any("aten.mm.default" in line for line in kernel_lines)
    assert any("aten.silu.default" in line or "aten.sigmoid.default" in line
               for line in kernel_lines)


def test_explain_says_whether_the_kernels_run_on_this_machine(capsys):
    import dataclasses

    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()).eval()
    with torch.no_grad():
        explanation = kgc.explain(model, torch.randn(3, 64))
    printed = capsys.readouterr().out
    assert explanation.kernel_count == 1
    assert explanation.cuda_available == torch.cuda.is_available()
    no_cuda = ('no CUDA device here: on this machine torch.compile(model, backend="kgc") runs '
               "everything in PyTorch; the kernels below are those a CUDA GPU would run")
    assert (no_cuda in printed) == (not torch.cuda.is_available())
    assert no_cuda not in str(dataclasses.replace(explanation, cuda_available=True))
    assert no_cuda in str(dataclasses.replace(explanation, cuda_available=False))
    assert "to get kgc kernels" not in printed


@pytest.mark.parametrize("seq,past,mask_tensor,dtype", [
    (1, 5, True, torch.float32), (4, 5, True, torch.float32), (4, 0, True, torch.float32),
    (4, 0, False, torch.float32), (1, 5, True, torch.float16), (7, 0, False, torch.float16)])
def test_the_decoder_block_runs_every_op_in_kgc(seq, past, mask_tensor, dtype):
    # past 0: the cache is empty before the first step, and concatenation
    # leaves it out of the kernel graph. Without a mask tensor the prefill
    # attends with is_causal. The kernels run on the CPU executor of tile
    # programs, as kgc tiles them for a GPU.
    block = _small_block(dtype)
    inputs = block.example_inputs(batch=2, seq=seq, past=past, mask_tensor=mask_tensor)
    inputs = inputs if inputs[-1] is not None else inputs[:-1]
    backend = TiledBackend()
    with torch.no_grad():
        expected = block(*inputs)
        actual = torch.compile(block, backend=backend)(*inputs)
    _assert_close(actual, expected)
    (report,) = backend.reports
    assert not report.fallbacks, report.fallbacks
    assert len(report.partitions) == 1
    assert "attention" in backend.kinds[0], backend.kinds


@pytest.mark.parametrize("seq,past,mask_tensor", [(1, 17, True), (128, 0, True), (128, 0, False)],
                         ids=["decode", "prefill", "prefill_is_causal"])
def test_the_decoder_blocks_kernel_graphs_compile_for_sm_90(seq, past, mask_tensor):
    # The block of the GPU test, f16: every kernel graph the backend makes
    # is compiled through Triton for sm_90 (no GPU needed) and run by
    # kgc.reference, so a graph kgc cannot compile fails here, not only on
    # a GPU (a rotated query once did, inside the attention kernel).
    llama = load_example("llama_block")
    torch.manual_seed(0)
    block = llama.LlamaBlock(hidden=512, heads=8, kv_heads=2, mlp=1376).half().eval()
    inputs = block.example_inputs(batch=1, seq=seq, past=past, mask_tensor=mask_tensor)
    inputs = inputs if inputs[-1] is not None else inputs[:-1]
    kernels = []

    class CompilingBackend(ReferenceBackend):
        def _compile(self, graph, mode):
            kernels.append([k.name for k in kgc.compile(graph, target="sm_90").kernels()])
            return super()._compile(graph, mode)

    backend = CompilingBackend()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        expected = block(*inputs)
        actual = torch.compile(block, backend=backend)(*inputs)
    _assert_close(actual, expected)
    (report,) = backend.reports
    assert not report.fallbacks, report.fallbacks
    assert len(report.partitions) == 1 and report.partitions[0].fallback_reason is None
    (names,) = kernels
    assert any("attention" in name for name in names), names


def test_kernel_graphs_are_compiled_on_real_tensors():
    # AOTAutograd calls the backend under its FakeTensorMode; max-autotune's
    # search checks and times candidates on real tensors made while it
    # compiles.
    from torch._subclasses.fake_tensor import FakeTensor

    made = []

    class Probing(ReferenceBackend):
        def _compile(self, graph, mode):
            made.append(torch.randn(3))
            return super()._compile(graph, mode)

    w = _randn(17, 9)
    with torch.no_grad():
        torch.compile(lambda x: torch.relu(x @ w) * 2, backend=Probing())(_randn(3, 17))
    assert made and not any(isinstance(t, FakeTensor) for t in made)


def test_64_decode_steps_with_a_growing_cache_compile_a_bounded_number_of_graphs():
    block = _small_block()
    backend = ReferenceBackend()
    compiled = torch.compile(block, backend=backend)
    x, cos, sin, past_k, past_v, _ = block.example_inputs(batch=1, seq=1, past=3)
    with torch.no_grad():
        for step in range(64):
            expected = block(x, cos, sin, past_k, past_v)
            out, k, v = compiled(x, cos, sin, past_k, past_v)
            _assert_close((out, k, v), expected)
            x, past_k, past_v = out, k, v
    # One graph for the first length, one with the length dynamic, each
    # compiling its partitions once: the count does not grow with the steps.
    assert len(backend.reports) <= 2
    assert 1 <= len(backend.texts) == sum(len(r.partitions) for r in backend.reports) <= 8
    dynamic = backend.reports[-1]
    assert any("dynamic" in why for _, why in dynamic.fallbacks)
    assert dynamic.partitions, "the projections and the MLP stay in kgc"


def _attention_graph(target, arguments, kwargs, shapes):
    """An FX graph of one fused attention op as AOTAutograd traces it on a
    CUDA device (these ops have meta kernels, so no GPU is needed to build
    it), its first result returned."""
    graph = torch.fx.Graph()
    nodes = []
    for name, shape in zip("qkvm", shapes):
        node = graph.placeholder(name)
        node.meta["val"] = torch.empty(shape, device="meta")
        nodes.append(node)
    tensors = {"q": nodes[0], "k": nodes[1], "v": nodes[2], "m": nodes[3] if len(nodes) > 3 else None}
    args = tuple(tensors.get(a, a) if isinstance(a, str) else a for a in arguments)
    node = graph.call_function(target, args, kwargs)
    node.meta["val"] = target(*[a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args],
                              **kwargs)
    first = graph.call_function(operator.getitem, (node, 0))
    first.meta["val"] = node.meta["val"][0]
    graph.output(first)
    return torch.fx.GraphModule(torch.nn.Module(), graph), node


aten = torch.ops.aten
SHAPES = [(2, 3, 5, 16), (2, 3, 7, 16), (2, 3, 7, 16), (2, 3, 5, 7)]
FUSED_ATTENTION = [
    ("flash", aten._scaled_dot_product_flash_attention.default, ("q", "k", "v", 0.0, False),
     {"scale": 0.3}, False),
    ("efficient", aten._scaled_dot_product_efficient_attention.default,
     ("q", "k", "v", "m", False, 0.0, False), {"scale": 0.3}, True),
    ("cudnn", aten._scaled_dot_product_cudnn_attention.default,
     ("q", "k", "v", "m", False, 0.0, False), {"scale": 0.3}, True),
]


@pytest.mark.parametrize("name,target,arguments,kwargs,masked", FUSED_ATTENTION,
                         ids=[c[0] for c in FUSED_ATTENTION])
def test_the_fused_attention_ops_of_cuda_convert(name, target, arguments, kwargs, masked):
    from kgc.torch import convert_graph, unsupported_reason

    shapes = SHAPES if masked else SHAPES[:3]
    module, node = _attention_graph(target, arguments, kwargs, shapes)
    assert unsupported_reason(node) is None
    converted = convert_graph(module, "attention")
    _filecheck(converted.graph.to_mlir(),
               "CHECK: kg.matmul {{.*}} -> tensor<2x3x5x7xf32>\nCHECK: kg.mul\n"
               + ("CHECK: kg.add\n" if masked else "") + "CHECK: kg.softmax\nCHECK: kg.matmul")
    inputs = [_randn(*shape) for shape in shapes]
    expected = F.scaled_dot_product_attention(*inputs[:3], attn_mask=inputs[3] if masked else None,
                                              scale=0.3)
    # The graph stores a result in its traced memory order (the efficient
    # kernel's is in tokens' order); the partition's result is its view.
    actual, = converted.partition_results(
        [reference.evaluate(converted.graph.build(), "attention", inputs)])
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)


def test_causal_fused_attention_converts():
    from kgc.torch import convert_graph, unsupported_reason

    module, node = _attention_graph(aten._scaled_dot_product_flash_attention.default,
                                    ("q", "k", "v", 0.0, True), {}, SHAPES[:3])
    assert unsupported_reason(node) is None
    converted = convert_graph(module, "attention")
    inputs = [_randn(*shape) for shape in SHAPES[:3]]
    expected = F.scaled_dot_product_attention(*inputs, is_causal=True)
    # The graph stores a result in its traced memory order (the efficient
    # kernel's is in tokens' order); the partition's result is its view.
    actual, = converted.partition_results(
        [reference.evaluate(converted.graph.build(), "attention", inputs)])
    torch.testing.assert_close(actual, expected, atol=2e-5, rtol=2e-5)


def test_a_varying_batch_compiles_once_for_every_size():
    w1, w2, gamma = _randn(17, 40), _randn(40, 17), _randn(17)

    def mlp(x):
        h = F.rms_norm(x, (17,), gamma, eps=1e-6)
        return x + F.silu(h @ w1) @ w2

    backend = ReferenceBackend()
    compiled = torch.compile(mlp, backend=backend)
    with torch.no_grad():
        for batch in (1, 3, 2, 5, 17, 7, 16, 9, 30, 4, 12, 31):
            x = _randn(batch, 17)
            _assert_close(compiled(x), mlp(x))
    dynamic = backend.reports[-1]
    assert not dynamic.fallbacks, dynamic.fallbacks
    assert len(dynamic.partitions) == 1
    # Static graphs for the first batches, then one graph with the batch
    # as its dynamic extent, compiled once: no bucket of it is.
    assert [t for t in backend.texts if "tensor<?x17xf32>" in t] == backend.texts[-1:]
    assert not [t for t in backend.texts if "_b" in t.split("func.func @")[1][:20]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_a_varying_batch_runs_on_tiled_kernels_compiled_once(dtype):
    norm, w1, w2 = _randn(64, dtype=dtype), _randn(64, 96, dtype=dtype) / 8, \
        _randn(96, 32, dtype=dtype) / 8

    def block(x):
        h = F.gelu(F.layer_norm(x, (64,), norm) @ w1)
        return torch.softmax(h @ w2, dim=-1)

    backend = TiledBackend()
    compiled = torch.compile(block, backend=backend)
    with torch.no_grad():
        for batch in SIZE_EXTENTS:
            x = _randn(batch, 64, dtype=dtype)
            torch._dynamo.mark_dynamic(x, 0)
            _assert_close(compiled(x), block(x))
    assert len(backend.texts) == 1, backend.texts
    assert f"tensor<?x64x{_KG_NAMES[dtype]}>" in backend.texts[0]
    assert backend.kinds[0].count("matmul") == 2 and "reduction" in backend.kinds[0]


_KG_NAMES = {torch.float32: "f32", torch.float16: "f16"}


def _sequence_mlp_backend(batch: int, lengths) -> "TiledBackend":
    """A residual MLP over (batch, s, 17), s marked dynamic, compiled onto
    tiled kernels and checked against eager at each of `lengths`."""
    w1, w2 = _randn(17, 40), _randn(40, 17)

    def mlp(x):
        return x + F.silu(x @ w1) @ w2

    backend = TiledBackend()
    compiled = torch.compile(mlp, backend=backend)
    with torch.no_grad():
        for length in lengths:
            x = _randn(batch, length, 17)
            torch._dynamo.mark_dynamic(x, 1)
            _assert_close(compiled(x), mlp(x))
    return backend


def test_a_sequence_of_one_batch_compiles_once_for_every_length():
    # (1, s, 17): the batch of one adds nothing to an address, so the
    # length is the kernel graph's dynamic extent behind it.
    backend = _sequence_mlp_backend(1, (3, 17, 40, 1000))
    assert len(backend.texts) == 1 and "tensor<1x?x17xf32>" in backend.texts[0], backend.texts


def test_a_sequence_behind_a_batch_of_two_compiles_once_for_every_length():
    # (2, s, 17): the size sets the batch dim's stride, which the kernels
    # compute from it, so each partition compiles once with a `?` there.
    # The products read the rows merged, (2 s, 17): a size of its own, 2 s,
    # each product a kernel graph compiled once with that `?`.
    backend = _sequence_mlp_backend(2, (3, 17, 40, 1000))
    assert backend.texts and all("tensor<2x?x" in t or "tensor<?x17xf32>" in t
                                 or "tensor<?x40xf32>" in t for t in backend.texts), backend.texts
    assert sum("kg.matmul" in t for t in backend.texts) == 2, backend.texts
    names = [t.split("func.func @")[1].split("(")[0] for t in backend.texts]
    assert len(names) == len(set(names)) and not [n for n in names if "_b" in n], names


class PerHeadNorm(torch.nn.Module):
    """Tokens cut into heads, each head normed (Qwen3's q_norm), and put
    back: the sequence lies inside the heads dim of the (b, heads, s, d)
    tensors between, whose strides depend on it."""

    def __init__(self, hidden: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.project = torch.nn.Linear(hidden, hidden)
        self.weight = torch.nn.Parameter(torch.randn(hidden // heads) / 4 + 1)
        self.out = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        b, s, hidden = x.shape
        q = self.project(x).view(b, s, self.heads, hidden // self.heads).transpose(1, 2)
        q = q * torch.rsqrt(q.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(q.dtype)
        q = (q * self.weight).transpose(1, 2).reshape(b, s, hidden)
        return self.out(torch.relu(q)) + x


def test_a_sequence_inside_heads_compiles_once_for_every_length():
    torch.manual_seed(0)
    block = PerHeadNorm().eval()
    backend = TiledBackend()
    compiled = torch.compile(block, backend=backend)
    with torch.no_grad():
        for batch, length in ((1, 3), (1, 17), (1, 1000), (2, 5)):
            if batch == 2 and length == 5:
                torch._dynamo.reset()
            x = _randn(batch, length, 64)
            torch._dynamo.mark_dynamic(x, 1)
            _assert_close(compiled(x), block(x))
    # One graph for the batch of one at every length; at a batch of two the
    # products' rows are 2 * s, a size of their own: the products are graphs
    # whose `?` is 2 s, the per-head norm one whose `?` is s, each compiled
    # once.
    assert all("?" in t for t in backend.texts), backend.texts
    assert "tensor<1x4x?x1xf32>" in backend.texts[0] and "kg.matmul" in backend.texts[0]
    assert len([t for t in backend.texts if "tensor<1x?x64xf32>" in t]) == 1
    assert any("tensor<2x4x?x1xf32>" in t for t in backend.texts[1:]), backend.texts
    assert any("tensor<?x64xf32>" in t and "kg.matmul" in t for t in backend.texts[1:])


class _AtenGraphs(list):
    """The aten graphs torch.compile hands a backend (as kgc's gets them),
    kept, and run as they are."""

    def __init__(self):
        super().__init__()
        from torch._dynamo.backends.common import aot_autograd

        def keep(gm, inputs):
            self.append(gm)
            return gm.forward

        self.backend = aot_autograd(fw_compiler=keep)


class CachedAttention(torch.nn.Module):
    """A decode step over a cache that grows call by call, as transformers'
    dynamic cache writes it: the new key and value joined to their caches
    (each traced with a symbol of its own), every query head reading its
    group's key/value head (`repeat_kv`), an additive mask along the keys,
    and the output projection after it."""

    def __init__(self, heads: int = 4, kv_heads: int = 2, head_dim: int = 16):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        hidden = heads * head_dim
        self.query = torch.nn.Linear(hidden, hidden, bias=False)
        self.key = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.value = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.out = torch.nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, keys, values, mask):
        shape = (1, 1, -1, self.head_dim)
        q = self.query(x).view(shape).transpose(1, 2)
        k = torch.cat([keys, self.key(x).view(shape).transpose(1, 2)], dim=-2)
        v = torch.cat([values, self.value(x).view(shape).transpose(1, 2)], dim=-2)
        group = self.heads // self.kv_heads
        k = k[:, :, None, :, :].expand(1, self.kv_heads, group, k.shape[2], self.head_dim)
        v = v[:, :, None, :, :].expand(1, self.kv_heads, group, v.shape[2], self.head_dim)
        k = k.reshape(1, self.heads, -1, self.head_dim)
        v = v.reshape(1, self.heads, -1, self.head_dim)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(o.transpose(1, 2).reshape(1, 1, -1)) + x


def test_attention_over_a_growing_cache_runs_in_kgc_compiled_once():
    torch.manual_seed(0)
    block = CachedAttention().eval()
    backend = TiledBackend()
    compiled = torch.compile(block, backend=backend, dynamic=True)
    with torch.no_grad():
        for cached in (1, 3, 17, 1000):
            x = _randn(1, 1, 64)
            keys, values = _randn(1, 2, cached, 16), _randn(1, 2, cached, 16)
            mask = _randn(1, 1, 1, cached + 1)
            _assert_close(compiled(x, keys, values, mask), block(x, keys, values, mask))
    # The attention is kgc's, over the keys of every call; the joins of the
    # caches, whose sizes differ by one, stay with PyTorch.
    attention = [t for t in backend.texts if "tensor<1x2x?x16xf32>" in t]
    assert attention and all("_b" not in t.split("(")[0] for t in backend.texts), backend.texts
    assert any("attention" in kinds for kinds in backend.kinds), backend.kinds
    left = {op.split(":")[0] for report in backend.reports for op, _ in report.fallbacks}
    assert not any("scaled_dot_product" in op for op in left), left
    # The joins stay with PyTorch; the whole slices of what they join (the
    # cache's keys taken whole) are kgc's, views of the same elements.
    assert "aten.cat.default" in left and "aten.slice.Tensor" not in left, left
    # One compile served every length.
    compiled_once = len(backend.texts)
    with torch.no_grad():
        x, keys, values = _randn(1, 1, 64), _randn(1, 2, 40, 16), _randn(1, 2, 40, 16)
        mask = _randn(1, 1, 1, 41)
        _assert_close(compiled(x, keys, values, mask), block(x, keys, values, mask))
    assert len(backend.texts) == compiled_once


def test_attention_over_dynamic_queries_stays_out_of_a_graph_compiled_once():
    # Prefill over a dynamic length: its queries and keys share the size, a
    # (s, s) product that no kernel graph with one `?` per tensor walks.
    from kgc.torch.extents import takes_once
    from kgc.torch.partition import plan_partitions

    def prefill(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    graphs = _AtenGraphs()

    compiled = torch.compile(prefill, backend=graphs.backend, dynamic=True)
    with torch.no_grad():
        compiled(_randn(1, 2, 5, 16), _randn(1, 2, 5, 16), _randn(1, 2, 5, 16))
    (graph,) = graphs
    attention = [n for n in graph.graph.nodes if n.op == "call_function"
                 and "scaled_dot_product" in str(n.target)]
    assert attention and not any(takes_once(n) for n in attention)
    plan = plan_partitions(graph, devices=None)
    assert not any(n in p for p in plan.partitions for n in attention)


class _SlidingWindow(torch.nn.Module):
    """Rows joined to a static row (`s + 1`), and the last four of them as a
    sliding-window cache takes them: `s + 1 - Max(0, s - 3)` rows, which
    is 4 from s = 3 on and s + 1 below, no extent of one compile."""

    def __init__(self):
        super().__init__()
        self.register_buffer("row", _randn(1, 8))

    def forward(self, x):
        joined = torch.cat([x, self.row], 0)
        window = joined[torch.sym_max(0, x.shape[0] - 3):]
        return joined * 2, window * 3


def test_only_ops_of_one_size_linear_in_one_symbol_are_compiled_once():
    import sympy

    from kgc.torch.buckets import dynamic_expressions
    from kgc.torch.extents import takes_once

    graphs = _AtenGraphs()
    with torch.no_grad():
        torch.compile(_SlidingWindow(), backend=graphs.backend, dynamic=True)(_randn(6, 8))
    (graph,) = graphs
    products = [n for n in graph.graph.nodes if n.target is torch.ops.aten.mul.Tensor]
    sizes = [next(iter(dynamic_expressions(n))) for n in products]
    (symbol,) = sizes[0].free_symbols
    named = [str(size.subs(symbol, sympy.Symbol("s", positive=True, integer=True)))
             for size in sizes]
    assert named == ["s + 1", "s - Max(0, s - 3) + 1"], named
    assert [takes_once(n) for n in products] == [True, False]


def test_a_size_compiled_once_is_linear_in_one_symbol():
    import sympy

    from kgc.torch.extents import _linear

    s, t = sympy.symbols("s t", positive=True, integer=True)
    assert _linear(s) and _linear(2 * s + 1) and _linear(s - 3)
    assert not _linear(sympy.Max(0, s - 3)) and not _linear(s * s) and not _linear(s * t)
    assert not _linear(s + t) and not _linear(4 - s) and not _linear(sympy.Integer(4))


def test_the_key_counts_of_one_attention_are_one_size():
    from kgc.torch.extents import tied_sizes

    graphs = _AtenGraphs()

    def attend(q, keys, values):
        return F.scaled_dot_product_attention(q, keys, values)

    compiled = torch.compile(attend, backend=graphs.backend, dynamic=True)
    with torch.no_grad():
        compiled(_randn(1, 2, 1, 16), _randn(1, 2, 7, 16), _randn(1, 2, 7, 16))
    (graph,) = graphs
    inputs = [n.meta["val"] for n in graph.graph.nodes if n.op == "placeholder"
              and isinstance(n.meta.get("val"), torch.Tensor)]
    key_length, value_length = inputs[1].shape[2].node.expr, inputs[2].shape[2].node.expr
    tied = tied_sizes(graph.graph.nodes)
    if key_length != value_length:  # traced with a symbol each
        assert tied[key_length] == tied[value_length]


def test_a_partition_of_two_dynamic_sizes_is_compiled_per_bucket():
    # A kernel graph has one dynamic extent: rows and columns that vary
    # apart are bucketed, never converted with a `?`.
    def outer(x, y):
        return torch.relu(x) @ y * 2

    backend = ReferenceBackend()
    compiled = torch.compile(outer, backend=backend)
    with torch.no_grad():
        for rows, columns in ((3, 5), (17, 9), (6, 40)):
            x, y = _randn(rows, 17), _randn(17, columns)
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(y, 1)
            _assert_close(compiled(x, y), outer(x, y))
    assert not [t for t in backend.texts if "?" in t]
    names = sorted(t.split("func.func @")[1].split("(")[0] for t in backend.texts)
    assert names == ["kgc_0_b32_16", "kgc_0_b4_8", "kgc_0_b8_64"], names


def test_a_partition_of_two_dynamic_sizes_no_op_shares_is_cut_and_compiled_once():
    # A decode step's mask of the cache's length beside its positions: two
    # sizes in one partition, no op holding both. Each piece has one
    # dynamic extent and compiles once for every pair of sizes.
    w = _randn(17, 9)

    def two(x, y):
        return torch.relu(x @ w) * 2, torch.sigmoid(y) + 1

    backend = ReferenceBackend()
    compiled = torch.compile(two, backend=backend)
    with torch.no_grad():
        for rows, others in ((3, 5), (17, 9), (6, 40), (1000, 2)):
            x, y = _randn(rows, 17), _randn(others, 4)
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(y, 0)
            for got, want in zip(compiled(x, y), two(x, y)):
                _assert_close(got, want)
    assert len(backend.reports) == 1
    assert [p.name for p in backend.reports[-1].partitions] == ["kgc_0", "kgc_1"]
    assert not backend.reports[-1].fallbacks
    signatures = sorted(t.split("func.func @")[1].split(")")[0] for t in backend.texts)
    assert signatures == ["kgc_0(%arg0: tensor<?x17xf32>, %arg1: tensor<17x9xf32>",
                          "kgc_1(%arg0: tensor<?x4xf32>"], signatures


def test_an_op_holding_a_dynamic_size_in_two_dims_stays_with_pytorch_never_bucketed():
    # A prefill's (1, 1, s, s) mask: no kernel graph takes one size in two
    # dims, so the op runs in PyTorch and the rest compiles once.
    def outer(x, y):
        return torch.relu(x) * 2 + 1, y.unsqueeze(1) * y.unsqueeze(0)

    backend = ReferenceBackend()
    compiled = torch.compile(outer, backend=backend)
    with torch.no_grad():
        for rows in (3, 17, 40):
            x, y = _randn(rows, 17), _randn(rows + 2)
            torch._dynamo.mark_dynamic(x, 0)
            torch._dynamo.mark_dynamic(y, 0)
            for got, want in zip(compiled(x, y), outer(x, y)):
                _assert_close(got, want)
    reasons = {op.split(":")[0]: why for op, why in backend.reports[-1].fallbacks}
    assert "holds dynamic size" in reasons["aten.mul.Tensor"], reasons
    assert "in dims [0, 1]" in reasons["aten.mul.Tensor"], reasons
    assert len(backend.texts) == 1 and "tensor<?x17xf32>" in backend.texts[0]


def test_ops_along_a_dynamic_dim_stay_with_pytorch():
    def attend(q, k, v):
        scores = torch.softmax(q @ k.transpose(-1, -2), dim=-1)  # over the dynamic length
        return (scores @ v) * 2

    backend = ReferenceBackend()
    compiled = torch.compile(attend, backend=backend)
    q = _randn(4, 16)
    with torch.no_grad():
        for length in (3, 5, 9, 12):
            k, v = _randn(length, 16), _randn(length, 16)
            _assert_close(compiled(q, k, v), attend(q, k, v))
    reasons = [why for _, why in backend.reports[-1].fallbacks]
    assert any("along dynamic extent" in why or "reduces over dynamic extent" in why
               for why in reasons), reasons


def test_padding_along_a_dynamic_dim_stays_with_pytorch():
    # Shifting a padded row by one would bring its padding into view.
    backend = ReferenceBackend()
    shift = lambda x: F.pad(x, (-1, 1), value=3.0) * 2  # noqa: E731
    compiled = torch.compile(shift, backend=backend, dynamic=True)
    with torch.no_grad():
        for extent in SIZE_EXTENTS:
            x = _randn(extent)
            _assert_close(compiled(x), shift(x))
    reasons = {op.split(":")[0]: why for op, why in backend.reports[-1].fallbacks}
    assert "along dynamic extent" in reasons["aten.constant_pad_nd.default"], reasons


def test_a_partition_kgc_fails_to_compile_runs_in_pytorch_with_a_warning():
    w = _randn(17, 9)

    class FailingBackend(ReferenceBackend):
        def _compile(self, graph, mode):
            raise KgcError(f"@{graph.name}: no kernel for this graph")

    backend = FailingBackend()
    compiled = torch.compile(lambda x: torch.relu(x @ w) * 2, backend=backend)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in (3, 5, 9):  # static, then a dynamic batch in buckets
            x = _randn(batch, 17)
            _assert_close(compiled(x), torch.relu(x @ w) * 2)
    messages = [str(w.message) for w in caught if issubclass(w.category, KgcFallbackWarning)]
    assert any(m.startswith("kgc: partition kgc_0 (3 ops) runs in PyTorch") and "no kernel" in m
               for m in messages), messages
    assert any("at sizes" in m for m in messages), messages


def test_a_kernel_kgc_fails_to_compile_leaves_only_its_ops_to_pytorch():
    # The matmul's kernel fails (as one over the GPU's shared memory would):
    # its ops run in PyTorch, each with the error; the softmax beside it in
    # the same partition is still kgc's.
    w = _randn(17, 9)

    class FailingMatmulBackend(ReferenceBackend):
        def _compile(self, graph, mode):
            if "kg.matmul" in graph.to_mlir():
                raise KgcError(f"kernel @{graph.name}_0_matmul needs 300000 B of shared "
                               "memory per program")
            return super()._compile(graph, mode)

    def function(x):
        return torch.relu(x @ w) * 2, torch.softmax(x * 3, -1)

    backend = FailingMatmulBackend()
    compiled = torch.compile(function, backend=backend)
    x = _randn(3, 17)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error", KgcFallbackWarning)
        for got, want in zip(compiled(x), function(x)):
            _assert_close(got, want)
    [report] = backend.reports
    reasons = {op.split(":")[0]: why for op, why in report.fallbacks}
    assert reasons["aten.mm.default"] == ("its kernel failed to compile: kernel @kgc_0_0_matmul "
                                          "needs 300000 B of shared memory per program")
    kgc_ops = {op.split(":")[0] for p in report.partitions for op in p.ops}
    assert "aten._softmax.default" in kgc_ops and "aten.mm.default" not in kgc_ops
    assert all(p.fallback_reason is None for p in report.partitions)


# A dynamic size read as a value: kgc compiles each partition for a
# power-of-two bucket of the size, so a kernel that took the value from the
# bucket would compute with 8 at a batch of 5. Each function reads a size in
# one converter; the extents are not powers of two.
SIZE_EXTENTS = (3, 5, 17, 1000)


def _check_at_sizes(function, backend, extents=SIZE_EXTENTS) -> None:
    """`function` of one tensor compiled on `backend` with `dynamic=True`,
    checked against eager at each extent."""
    compiled = torch.compile(function, backend=backend, dynamic=True)
    with torch.no_grad():
        for extent in extents:
            x = _randn(extent)
            _assert_close(compiled(x), function(x))


# Read by ops that take the size as a 0-d input of the graph, its real
# value passed at each call: (id, function, the size's kg type).
SIZES_AS_INPUTS = [
    ("arithmetic", lambda x: x * 2 + x.shape[0], "i64"),
    ("division", lambda x: (x + 1) / x.shape[0], "i64"),
    ("half_arithmetic", lambda x: (x.half() * 2 + x.shape[0] * 3).float(), "i64"),
    ("comparison", lambda x: torch.where(x * 1000 > x.shape[0] - 1, x, -x), "i64"),
    ("float_of_a_size", lambda x: x * (x.shape[0] / 4), "f32"),
    ("full_value", lambda x: x.unsqueeze(1) * 2 + torch.full((3,), x.shape[0]), "i64"),
]


@pytest.mark.parametrize("name,function,dtype", SIZES_AS_INPUTS,
                         ids=[c[0] for c in SIZES_AS_INPUTS])
def test_a_dynamic_size_read_as_a_value_is_passed_at_its_real_value(name, function, dtype):
    backend = ReferenceBackend()
    _check_at_sizes(function, backend)
    dynamic = backend.reports[-1]
    assert not dynamic.fallbacks, dynamic.fallbacks
    assert len(dynamic.partitions) == 1
    # Each bucket's graph takes the size as its last input, a 0-d tensor.
    for text in backend.texts:
        arguments = text.split("func.func @")[1].split(") ->")[0]
        assert arguments.endswith(f"tensor<{dtype}>"), arguments


@pytest.mark.parametrize("name,function,dtype", SIZES_AS_INPUTS,
                         ids=[c[0] for c in SIZES_AS_INPUTS])
def test_kernels_read_a_size_input_at_its_real_value(name, function, dtype):
    """The same through kgc's pipeline: tiled kernels that load the 0-d
    size input, run by the CPU executor; each graph also compiles through
    Triton for sm_90 (no GPU needed)."""
    kernels = []

    class CompilingBackend(TiledBackend):
        def _compile(self, graph, mode):
            kernels.append([k.name for k in kgc.compile(graph, target="sm_90").kernels()])
            return super()._compile(graph, mode)

    backend = CompilingBackend()
    _check_at_sizes(function, backend, (5, 1000))
    assert not backend.reports[-1].fallbacks, backend.reports[-1].fallbacks
    assert kernels and all(kernels), kernels


def test_an_arange_of_a_dynamic_length_runs_in_pytorch_and_the_rest_compiles_once():
    # No tensor of the size reaches the arange, and kgc's kernels read a
    # dynamic extent off their tensors: PyTorch makes it, and the kernel
    # graph that adds it to x takes it as an input of x's length.
    def count_down(x):
        return x * 2 + torch.arange(x.shape[0], 0, -1)

    backend = ReferenceBackend()
    _check_at_sizes(count_down, backend)
    reasons = {op.split(":")[0]: why for op, why in backend.reports[-1].fallbacks}
    assert list(reasons) == ["aten.arange.start_step"], reasons
    assert "from no tensor" in reasons["aten.arange.start_step"]
    assert len(backend.texts) == 1 and "tensor<?xi64>" in backend.texts[0], backend.texts


class _Table(torch.nn.Module):
    """A static table read where a dynamic size says."""

    def __init__(self, read):
        super().__init__()
        self.register_buffer("table", _randn(2000, 3))
        self.read = read

    def forward(self, x):
        return self.read(self.table, x.shape[0]) * 2 + x[:3]


# Read where a kernel cannot take it as an input: a position or a bound. The
# op runs in PyTorch, the reason naming the size: (id, read, the reason's
# start).
SIZES_REFUSED = [
    ("select_index", lambda table, n: table[n], "aten.select.int index is dynamic size s"),
    ("slice_start", lambda table, n: table[n:n + 4], "aten.slice.Tensor start is dynamic size s"),
    ("clamp_bound", lambda table, n: (table[:5] * 1000).clamp(max=n),
     "aten.clamp.default max is dynamic size s"),
]


@pytest.mark.parametrize("name,read,reason", SIZES_REFUSED, ids=[c[0] for c in SIZES_REFUSED])
def test_a_dynamic_size_kgc_cannot_pass_is_refused_never_its_bucket(name, read, reason):
    table = _Table(read)
    backend = ReferenceBackend()
    _check_at_sizes(table, backend)
    # One graph for every extent: reading the size must not make torch
    # guard on its value (a graph per extent either).
    assert len(backend.reports) == 1
    reasons = [why for _, why in backend.reports[-1].fallbacks]
    assert any(why.startswith(reason) for why in reasons), reasons


def test_a_dynamic_size_bounding_a_slice_is_its_padded_length_only():
    # The end of the slice is the result's length, a bare dynamic size that
    # pads like a batch; its start is a constant, so nothing reads the size
    # as a value and the slice stays in kgc.
    table = _randn(2000, 3)

    class Prefix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", table)

        def forward(self, x):
            return self.table[: x.shape[0]] * x[:, None]

    prefix = Prefix()
    backend = ReferenceBackend()
    _check_at_sizes(prefix, backend)
    assert not backend.reports[-1].fallbacks, backend.reports[-1].fallbacks
    assert any("aten.slice.Tensor" in op for p in backend.reports[-1].partitions for op in p.ops)


def test_every_extra_with_torch_brings_numpy_so_torch_imports_without_a_warning():
    import pathlib
    import tomllib

    project = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml")
                            .read_text())["project"]
    extras = project["optional-dependencies"]
    with_torch = [name for name, requirements in extras.items()
                  if any(r.startswith("torch") for r in requirements)]
    assert {"torch", "bench", "test"} <= set(with_torch)
    for name in with_torch:
        assert any(r.startswith("numpy") for r in extras[name]), name


@pytest.mark.parametrize("rows", [1, 3, 17, 1000])
def test_a_fused_projection_split_after_its_matmul_runs_in_kgc_kernels(rows):
    # GPT-2's attention input: one matmul for q, k and v, split into its
    # three pieces, each read by other ops.
    projection = torch.nn.Linear(64, 3 * 48)

    def attention_inputs(x):
        q, k, v = projection(x).split(48, dim=-1)
        return torch.relu(k) * v + q.sum(-1, keepdim=True) - q[..., 17:].mean(-1, keepdim=True)

    _run_tiled(attention_inputs, _randn(rows, 64))


def _binary_graph(op, host_operand: torch.Tensor):
    """(graph, its placeholders, the node) of `op` on a (3, 17) tensor of
    the "meta" device (a GPU's, for the check) and `host_operand`, a CPU
    tensor."""
    graph = torch.fx.Graph()
    x, y = graph.placeholder("x"), graph.placeholder("y")
    node = graph.call_function(op, (x, y))
    graph.output(node)
    x.meta["val"] = torch.empty(3, 17, device="meta")
    y.meta["val"] = host_operand
    node.meta["val"] = torch.empty(3, 17, device="meta")
    return graph, (x, y), node


def test_an_op_that_reads_a_tensor_on_another_device_stays_with_pytorch():
    # PyTorch lets an op on one device read CPU positions (a CUDA cache's
    # index_put at CPU positions); a kgc kernel reads only tensors of its
    # own device. Here the graph's device is "meta", so that the check runs
    # without a GPU.
    from kgc.torch.partition import KgcSupport

    graph, (x, y), total = _binary_graph(torch.ops.aten.add.Tensor, torch.empty(17))
    support = KgcSupport(devices=("meta",))
    assert not support.is_node_supported({}, total)
    assert "reads or makes tensors on cpu" in support.reasons[total]
    y.meta["val"] = torch.empty(17, device="meta")
    assert KgcSupport(devices=("meta",)).is_node_supported({}, total)


def test_a_host_scalar_reaches_the_kernels_on_their_device_at_its_value():
    # A 0-d CPU tensor (a Python float Dynamo passes as a tensor, such as a
    # rotary embedding's scaling) is read by CUDA ops as a scalar: kgc takes
    # the op, and each call passes the scalar's value on the results' device.
    from kgc.torch.convert import convert_graph
    from kgc.torch.partition import KgcSupport

    graph, (x, _), total = _binary_graph(torch.ops.aten.mul.Tensor, torch.empty(()))
    assert KgcSupport(devices=("meta",)).is_node_supported({}, total)
    converted = convert_graph(torch.fx.GraphModule(torch.nn.Module(), graph), "scaled")
    assert converted.host_scalars == (1,)
    for value in (0.5, 3.0):
        arguments = converted.graph_arguments([torch.empty(3, 17, device="meta"),
                                               torch.tensor(value)])
        assert arguments[1].device.type == "meta" and arguments[1].dim() == 0
    # On the CPU executor the results live with the scalar: nothing moves.
    x.meta["val"] = torch.empty(3, 17)
    total.meta["val"] = torch.empty(3, 17)
    converted = convert_graph(torch.fx.GraphModule(torch.nn.Module(), graph), "scaled")
    assert converted.host_scalars == ()
    scalar = torch.tensor(2.0)
    assert converted.graph_arguments([torch.ones(3, 17), scalar])[1] is scalar


def _host_scalar_graph(scalar_user):
    """An aten graph as Dynamo traces a Python float `eps` beside a tensor
    `x` on the "meta" device (a GPU's, for the checks): `eps` arrives as a
    0-d float64 CPU tensor, converted to float64 and then to float32, and
    `scalar_user(graph, x, eps32)` makes the graph's result from it."""
    graph = torch.fx.Graph()
    x, eps = graph.placeholder("x"), graph.placeholder("eps")
    x.meta["val"] = torch.empty(3, 17, device="meta")
    eps.meta["val"] = torch.empty((), dtype=torch.float64)
    convert = torch.ops.prims.convert_element_type.default
    as_double = graph.call_function(convert, (eps, torch.float64))
    as_double.meta["val"] = torch.empty((), dtype=torch.float64)
    as_float = graph.call_function(convert, (as_double, torch.float32))
    as_float.meta["val"] = torch.empty(())
    result = scalar_user(graph, x, as_float)
    graph.output(result)
    return torch.fx.GraphModule(torch.nn.Module(), graph), as_float


def test_a_host_scalars_conversion_joins_the_kernels_that_read_it():
    # Under dynamic=True a norm's eps reaches the graph as a float64 host
    # scalar converted to float32 on the host: two PyTorch ops per scalar
    # per call, where the kernel graph can take the float64 as its f32
    # value. The conversion to float64 of a float64 is dropped; the other
    # joins the product's partition.
    from kgc.torch.convert import convert_graph
    from kgc.torch.partition import plan_partitions

    def scaled(graph, x, eps):
        node = graph.call_function(torch.ops.aten.mul.Tensor, (x, eps))
        node.meta["val"] = torch.empty(3, 17, device="meta")
        return node

    module, as_float = _host_scalar_graph(scaled)
    plan = plan_partitions(module, devices=("meta",))
    assert not plan.fallbacks, plan.fallbacks
    (partition,) = plan.partitions
    product = list(module.graph.nodes)[-2]
    assert partition == [as_float, product]
    assert as_float.args[0].name == "eps"
    # The partition's graph: the scalar is an f32 input, passed at each call
    # as its value on the results' device, the one tensor for one value.
    graph = torch.fx.Graph()
    x, eps = graph.placeholder("x"), graph.placeholder("eps")
    values = {n.name: n for n in module.graph.nodes}
    for placeholder in (x, eps):
        placeholder.meta["val"] = values[placeholder.name].meta["val"]
    copies = {values["eps"]: eps, values["x"]: x}
    copies[as_float] = graph.node_copy(as_float, copies.__getitem__)
    graph.output(graph.node_copy(product, copies.__getitem__))
    converted = convert_graph(torch.fx.GraphModule(torch.nn.Module(), graph), "scaled")
    assert converted.host_scalars == (1,)
    assert "tensor<f32>" in converted.graph.to_mlir()
    x_value = torch.empty(3, 17, device="meta")
    passed = [converted.graph_arguments([x_value, torch.tensor(v, dtype=torch.float64)])[1]
              for v in (0.1, 0.1, 0.3)]
    assert all(p.dtype == torch.float32 and p.device.type == "meta" for p in passed)
    assert passed[0] is passed[1] and passed[2] is not passed[0]


def test_a_host_scalars_conversion_that_pytorch_reads_stays_with_pytorch():
    # The float32 scalar is also read by an op on the host (a product of two
    # host scalars, whose result stays on the CPU): PyTorch converts it,
    # and the kernel reads the float32 host scalar.
    from kgc.torch.partition import plan_partitions

    def scaled_twice(graph, x, eps):
        square = graph.call_function(torch.ops.aten.mul.Tensor, (eps, eps))
        square.meta["val"] = torch.empty(())
        node = graph.call_function(torch.ops.aten.mul.Tensor, (x, square))
        node.meta["val"] = torch.empty(3, 17, device="meta")
        return graph.call_function(torch.ops.aten.add.Tensor, (node, eps))

    module, as_float = _host_scalar_graph(scaled_twice)
    *_, square, product, total, _ = module.graph.nodes
    total.meta["val"] = torch.empty(3, 17, device="meta")
    plan = plan_partitions(module, devices=("meta",))
    assert "reads or makes tensors on cpu" in plan.fallbacks[as_float]
    assert "reads or makes tensors on cpu" in plan.fallbacks[square]
    assert plan.partitions == [[product, total]]


def test_a_python_float_under_dynamic_shapes_is_read_by_the_kernels_at_each_value():
    # Dynamo passes the float as a 0-d float64 tensor and converts it twice;
    # the kernel graph takes it as its f32 value, each call's own.
    def scaled(x, eps):
        return torch.rsqrt(x * x + eps) * 0.5

    backend = TiledBackend()
    compiled = torch.compile(scaled, backend=backend, dynamic=True)
    x = _randn(3, 17)
    with torch.no_grad():
        for eps in (1e-6, 0.3, 2.5):
            _assert_close(compiled(x, eps), scaled(x, eps))
    assert all(not report.fallbacks for report in backend.reports), \
        [report.fallbacks for report in backend.reports]
    assert any("tensor<f32>" in text for text in backend.texts), backend.texts


def test_a_float32_host_scalar_compares_with_a_half_tensor_in_half():
    # torch compares an f16 tensor with a 0-d f32 tensor in f16 (a 0-d
    # tensor ranks below tensors with dims of its kind): 1.0001 rounds to
    # 1.0 there, so 1.0 < 1.0001 is False.
    def below(x, limit):
        return torch.where(x < limit, x, -x)

    x = torch.tensor([[1.0, 0.5, 2.0]], dtype=torch.float16).repeat(3, 1)
    limit = torch.tensor(1.0001)
    assert below(x, limit)[0, 0] == -1
    _run_tiled(below, x, limit)


def test_the_math_path_of_attention_runs_in_kgc_with_a_wholly_masked_row():
    # scaled_dot_product_attention's math path (what torch runs where no
    # fused kernel takes the mask, BERT's at 512 tokens on an H200) asks
    # whether each row has a key left (any) to give a wholly masked row
    # zeros: no op of it is left to PyTorch.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def attention(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = (_randn(1, 2, 17, 8) for _ in range(3))
    mask = _positions(1, 2, 17, 17, low=0, high=2, dtype=torch.bool)
    mask[0, 1, 3] = False  # a query that sees no key
    with sdpa_kernel(SDPBackend.MATH):
        backend = _run_tiled(attention, q, k, v, mask)
    _filecheck(backend.texts[0], "CHECK: kg.cast {{.*}}x17xi1> to tensor<1x2x17x17xf16>\n"
                                 "CHECK: kg.reduce max {{.*}} dims [3]")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("queries,keys", [(1, 1), (17, 3), (3, 1000)])
def test_the_math_path_over_half_heads_is_one_attention_kernel(dtype, queries, keys):
    # BERT's attention at 512 tokens on an H200, as Dynamo captures it:
    # the math path widens f16 Q, K and V to f32, takes bmm over heads
    # merged with the batch, and a safe softmax. kg-simplify and the
    # attention schedule make it one attention kernel with half-float dots.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def attention(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q = _randn(2, 3, queries, 16, dtype=dtype)
    k, v = (_randn(2, 3, keys, 16, dtype=dtype) for _ in range(2))
    mask = torch.where(_positions(2, 1, queries, keys, low=0, high=5) == 0, float("-inf"), 0.0)
    mask[1, 0, queries // 2] = float("-inf")  # a query that sees no key
    with sdpa_kernel(SDPBackend.MATH):
        backend = _run_tiled(attention, q, k, v, mask.to(dtype))
    assert backend.kinds == [["attention"]], backend.kinds


@pytest.mark.parametrize("permutation", [(1, 0), (0, 2, 1), (2, 0, 1)])
def test_an_input_in_permuted_dense_layout_is_read_in_place(permutation):
    # A transposed view (a weight's transpose the forward saves for the
    # backward) is passed as its dense storage, permuted back inside the
    # kernel graph, rather than copied to a contiguous tensor each call.
    from kgc.torch import convert_graph

    shape = (3, 17, 5)[:len(permutation)]
    base = _randn(*[shape[d] for d in permutation])
    view = base.permute(*[permutation.index(d) for d in range(len(permutation))])
    assert view.shape == shape and not view.is_contiguous()

    def function(x, y):
        return torch.relu(x) * 2 + y

    other = _randn(*shape)
    backend = _run_tiled(function, view, other)
    assert "kg.transpose %arg0" in backend.texts[0], backend.texts[0]
    from torch.fx.experimental.proxy_tensor import make_fx

    module = make_fx(function, tracing_mode="fake")(view, other)
    converted = convert_graph(module, "permuted")
    assert list(converted.input_orders) == [0]
    passed = converted.graph_arguments([view, other])
    assert passed[0].is_contiguous() and passed[0].data_ptr() == base.data_ptr()


@pytest.mark.parametrize("permutation", [(1, 0), (0, 2, 1), (2, 0, 1)])
def test_a_result_in_permuted_dense_layout_keeps_its_traced_strides(permutation):
    # A result traced as a permuted view of dense storage (a weight's cast,
    # transposed for its product and saved for the backward) is stored in
    # that order and returned as the view: what reads it next (PyTorch's
    # views, the backward's partitions) meets the strides it was traced
    # with, where a contiguous result would be copied before each use.
    from torch.fx.experimental.proxy_tensor import make_fx

    from kgc.torch import convert_graph

    shape = (3, 17, 5)[:len(permutation)]
    base = _randn(*[shape[d] for d in permutation])
    view = base.permute(*[permutation.index(d) for d in range(len(permutation))])

    def function(x, y):
        return torch.relu(x) * 2, y + 1

    other = _randn(*shape)
    expected, expected_other = function(view, other)
    assert expected.stride() == view.stride()
    module = make_fx(function, tracing_mode="fake")(view, other)
    converted = convert_graph(module, "permuted_result")
    assert list(converted.output_orders) == [0]
    results = reference.evaluate(converted.graph.build(), "permuted_result",
                                 converted.graph_arguments([view, other]))
    # The graph stores the permuted result contiguous in its memory order.
    assert results[0].shape == base.shape
    actual, actual_other = converted.partition_results(results)
    assert actual.stride() == expected.stride() and actual_other.is_contiguous()
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(actual_other, expected_other)
    compiled = torch.compile(function, backend=TiledBackend(), fullgraph=True)(view, other)
    assert compiled[0].stride() == expected.stride()
    torch.testing.assert_close(compiled[0], expected)


def test_a_partitions_kernels_compile_side_by_side(monkeypatch):
    # A first call waits for every kernel of its partitions: the frontend's
    # compile asks for a worker per usable CPU (compile_jobs), not one.
    import importlib

    from kgc.pipeline import triton_stage

    backend_module = importlib.import_module("kgc.torch.backend")
    asked = []
    real = kgc.compile
    monkeypatch.setattr(triton_stage, "compile_jobs", lambda: 5)
    monkeypatch.setattr(kgc, "compile", lambda graph, **kw: asked.append(kw) or real(graph, **kw))
    g = kgc.Graph("side_by_side")
    x, w = g.input("x", (3, 40), "f16"), g.input("w", (40, 24), "f16")
    g.output(g.softmax(g.matmul(x, w)))
    compiled = backend_module.compile_kernel_graph(g, "default")
    assert [kw["jobs"] for kw in asked] == [5]
    assert compiled.kernels()


_SECOND_PROCESS = """
import importlib, json, kgc
from kgc.pipeline import kernel_cache, pipeline, triton_stage
from kgc.pipeline.graph_cache import GraphCache
backend = importlib.import_module("kgc.torch.backend")
passes_run = []
run = pipeline.Pipeline.run
pipeline.Pipeline.run = lambda self, *a, **k: passes_run.append(1) or run(self, *a, **k)
g = kgc.Graph("cached_partition")
x, w = g.input("x", (3, 40), "f16"), g.input("w", (40, 24), "f16")
g.output(g.softmax(g.matmul(x, w)))
backend.compile_kernel_graph(g, "default")
store = kernel_cache.KernelCache.resolve(True)
print(json.dumps({"stats": store.stats, "graphs": GraphCache.beside(store).stats,
                  "passes": passes_run, "workers": len(triton_stage._POOLS)}))
"""


@pytest.mark.parametrize("opt_out", [False, True])
def test_a_second_process_compiles_none_of_the_kernels_the_first_compiled(tmp_path, opt_out):
    # The backend's compiles keep kgc's kernel and graph caches
    # (KGC_KERNEL_CACHE=0 opts out): a second process with the same cache
    # folder runs no pass, starts no compile worker and compiles nothing.
    import json
    import os

    env = dict(os.environ, KGC_CACHE_DIR=str(tmp_path / "cache"),
               TRITON_CACHE_DIR=str(tmp_path / "triton"))
    env.pop("KGC_CACHE_URL", None)
    if opt_out:
        env["KGC_KERNEL_CACHE"] = "0"
    else:
        env.pop("KGC_KERNEL_CACHE", None)
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    first, second = runs
    if opt_out:
        assert first["stats"]["compiled"] == second["stats"]["compiled"] == 0
        assert second["workers"] == 1 and second["passes"]
        assert not (tmp_path / "cache" / "kernels").exists()
        assert not (tmp_path / "cache" / "graphs").exists()
    else:
        assert first["stats"]["compiled"] >= 1 and first["workers"] == 1
        assert first["graphs"] == {"hits": 0, "stored": 1, "damaged": 0} and first["passes"]
        assert second["stats"]["compiled"] == 0
        assert second["graphs"] == {"hits": 1, "stored": 0, "damaged": 0}
        assert second["passes"] == [] and second["workers"] == 0


def test_a_prims_conversion_left_to_pytorch_runs_as_an_aten_copy():
    # Eager prims ops go through torch's Python reference implementation;
    # the backend gives PyTorch the aten copy, with the same result.
    from kgc.torch.eager import prims_as_aten

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    wide = graph.call_function(torch.ops.prims.convert_element_type.default, (x, torch.float64))
    narrow = graph.call_function(torch.ops.prims.convert_element_type.default,
                                 (wide, torch.float32))
    graph.output(narrow)
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    value = _randn(3, 5).t()  # strided: the copy keeps the strides
    expected = module(value)
    assert prims_as_aten(module) == 2
    targets = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.aten._to_copy.default] * 2
    got = module(value)
    assert got.dtype == torch.float32 and got.stride() == expected.stride()
    assert torch.equal(got, expected)
    assert prims_as_aten(module) == 0


def _tokens_dynamic(*tensors):
    """The tensors with their first dim (the tokens) marked dynamic, the
    others static, as a model's activations reach Dynamo beside its weights."""
    for tensor in tensors:
        torch._dynamo.mark_dynamic(tensor, 0)
    return tensors


def test_sums_and_products_over_a_dynamic_token_count_compile_once():
    # A linear layer's gradients over a dynamic token count: X^T dY
    # contracts over the tokens, and the bias's sum and a max reduce them
    # away. No bucket can pad a sum's operand (the padding would show), but
    # one kernel graph loops over the tokens to the size.
    def gradients(x, dy):
        return x.t() @ dy, (dy * 2).sum(0), dy.amax(0)

    from kgc.accuracy import mismatch

    backend = TiledBackend()
    compiled = torch.compile(gradients, backend=backend)
    with torch.no_grad():
        for tokens in (3, 17, 1000, 4097):
            x, dy = _tokens_dynamic(_randn(tokens, 17), _randn(tokens, 5))
            # Sums of thousands of f32 terms, in another order than
            # PyTorch's: held to the accuracy rule against f64.
            reason = mismatch(compiled(x, dy), gradients(x, dy),
                              gradients(x.double(), dy.double()))
            assert reason is None, f"{tokens} tokens: {reason}"
    report = backend.reports[-1]
    assert not report.fallbacks, report.fallbacks
    # One kernel graph with the tokens as its `?` served every count (the
    # first call, before the dim was seen to vary, compiled a static one).
    dynamic = [t for t in backend.texts if "?x17xf32" in t]
    assert len(dynamic) == 1, backend.texts


def test_a_mean_over_a_dynamic_token_count_stays_with_pytorch():
    # Its 1/N would be a constant of the kernel graph; the sum beside it
    # is kgc's.
    def means(x):
        return x.mean(0) * 2, x.sum(0) * 3

    backend = ReferenceBackend()
    compiled = torch.compile(means, backend=backend)
    with torch.no_grad():
        for tokens in (3, 17, 1000):
            (x,) = _tokens_dynamic(_randn(tokens, 8))
            _assert_close(compiled(x), means(x))
    left = [op.split(":")[0] for op, _ in backend.reports[-1].fallbacks]
    assert left == ["aten.mean.dim"], backend.reports[-1].fallbacks
