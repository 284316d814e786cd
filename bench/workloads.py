"""The catalogue of `kgc bench` workloads.

Each `Workload` is one computation written twice: as an ordinary kgc graph
(`build`, through `kgc.Graph`, so whatever schedules the search learns apply
to it unchanged) and as the torch code a user would write for it
(`reference`, what eager PyTorch and torch.compile run). It also knows its
inputs (`make_inputs`: fresh random tensors on a device, never zeros), the
least traffic and matmul work any implementation must do (`bytes`, `flops`:
the floor), whether it is bound by memory or by the tensor cores (`kind`),
the speedup over the best torch that it aims at (`target`), and whether
`--quick` runs it.

`small` gives the same computation on shapes small enough to check on a CPU
(the tests evaluate both sides there).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

MEMORY, COMPUTE = "memory", "compute"
# Which measured matmul peak bounds a workload's flops.
PEAK_BF16, PEAK_FP8 = "bf16", "fp8"
# The graph API's element types that the workloads use: bytes, torch dtype.
_ELEMENTS = {"f32": (4, "float32"), "f16": (2, "float16"), "bf16": (2, "bfloat16"),
             "f8e4m3": (1, "float8_e4m3fn")}


@dataclasses.dataclass(frozen=True)
class Target:
    """What a workload aims at: kgc at least `speedup` times as fast as the
    best torch contender, and, when `floor_ratio` is set, within that many
    times its floor."""

    speedup: float
    floor_ratio: float | None = None

    def describe(self) -> str:
        text = f">= {self.speedup:g}x"
        return text + (f", <= {self.floor_ratio:g}x floor" if self.floor_ratio else "")

    def met(self, speedup: float | None, floor_ratio: float | None) -> bool | None:
        """Whether measured `speedup` (best torch time / kgc time) and
        `floor_ratio` (kgc time / floor) meet the target; None when there is
        nothing to judge (kgc did not run, or no torch contender did)."""
        if speedup is None:
            return None
        if speedup < self.speedup:
            return False
        if self.floor_ratio is not None:
            return floor_ratio is not None and floor_ratio <= self.floor_ratio
        return True


@dataclasses.dataclass(frozen=True)
class Spec:
    """One input: shape, kg element type, and how its random values are
    drawn: normal with standard deviation `scale`, or, for `positive`,
    uniform in [scale / 2, scale] (scales and norms' weights)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float = 1.0
    positive: bool = False

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * _ELEMENTS[self.dtype][0]


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    title: str  # what a table row says, shapes and dtype included
    inputs: tuple[Spec, ...]
    output: tuple[tuple[int, ...], str]  # shape, kg element type
    graph_body: Callable  # (kgc.Graph, *input tensors) -> output tensor
    reference: Callable  # (*torch tensors) -> torch tensor
    flops: int  # matmul flops (2 M N K per product); 0 for memory-bound work
    kind: str  # MEMORY or COMPUTE
    target: Target
    quick: bool = False
    peak: str = PEAK_BF16
    small: Callable[[], "Workload"] | None = None  # CPU-sized twin for the tests
    # The reference needs a GPU (torch._scaled_mm): the CPU tests compare the
    # graph against `cpu_reference` instead.
    cpu_reference: Callable | None = None
    # The reference's inputs from kgc's (same values, the layout torch wants),
    # made once per set of inputs so that no copy is timed.
    torch_layout: Callable[[list], list] | None = None

    @property
    def bytes(self) -> int:
        """Every input read once and the output written once."""
        shape, dtype = self.output
        return sum(s.bytes for s in self.inputs) + math.prod(shape) * _ELEMENTS[dtype][0]

    def build(self):
        """The workload as a `kgc.Graph` named after it."""
        from kgc.api import KernelGraph

        graph = KernelGraph(self.name.replace("-", "_"))
        tensors = [graph.input(s.name, s.shape, s.dtype) for s in self.inputs]
        graph.output(self.graph_body(graph, *tensors))
        return graph

    def make_inputs(self, device, generator) -> list:
        """Fresh random inputs on `device` from the torch.Generator
        `generator` (a CPU one: the same seed gives the same values on any
        device)."""
        import torch

        tensors = []
        for spec in self.inputs:
            if spec.positive:
                values = (torch.rand(spec.shape, generator=generator) + 1) * (spec.scale / 2)
            else:
                values = torch.randn(spec.shape, generator=generator) * spec.scale
            tensors.append(values.to(getattr(torch, _ELEMENTS[spec.dtype][1])).to(device))
        return tensors


# -- the computations, each as a kgc graph and as torch code -------------------


def _add_relu_mul(g, x, y):
    return g.mul(g.relu(g.add(x, y)), y)


def _add_relu_mul_torch(x, y):
    return torch_module().relu(x + y) * y


def _rmsnorm_matmul(g, x, gamma, w):
    return g.matmul(g.rms_norm(x, gamma, eps=1e-6), w)


def _rmsnorm_matmul_torch(x, gamma, w):
    functional = torch_module().nn.functional
    return functional.rms_norm(x, (x.shape[-1],), gamma, eps=1e-6) @ w


def _softmax(g, x):
    return g.softmax(x, dim=-1)


def _softmax_torch(x):
    return torch_module().softmax(x, dim=-1)


def _layer_norm(g, x, weight, bias):
    return g.layer_norm(x, weight, bias, eps=1e-5)


def _layer_norm_torch(x, weight, bias):
    return torch_module().nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def _matmul(g, a, b):
    return g.matmul(a, b)


def _matmul_torch(a, b):
    return a @ b


def _gated_mlp(g, x, w1, w2):
    return g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2))


def _gated_mlp_torch(x, w1, w2):
    return torch_module().nn.functional.silu(x @ w1) * (x @ w2)


def _lora(g, x, w, a, b):
    return g.add(g.matmul(x, w), g.matmul(g.matmul(x, a), b))


def _lora_torch(x, w, a, b):
    return x @ w + (x @ a) @ b


def _gqa_decode(g, q, k, v):
    """One query per head; the query heads of each KV head side by side as
    the rows of one matmul (head h reads KV head h // group, as
    torch's enable_gqa does)."""
    _, heads, _, dim = q.shape
    _, kv_heads, keys, _ = k.shape
    group = heads // kv_heads
    queries = g.reshape(q, (kv_heads, group, dim))
    scores = g.matmul(queries, g.transpose(g.reshape(k, (kv_heads, keys, dim)), (0, 2, 1)))
    weights = g.softmax(g.mul(scores, 1 / math.sqrt(dim)), dim=-1)
    return g.reshape(g.matmul(weights, g.reshape(v, (kv_heads, keys, dim))), q.shape)


def _gqa_decode_torch(q, k, v):
    """The same packing as kgc's graph: with one query per head, the query
    heads of a KV head are `group` queries over that KV head, so torch gets
    q viewed as (batch, KV heads, group, dim) and plain attention over K and
    V as they are (no repeat, no copy: a view of q and of the result), the
    rows of one matmul per KV head where enable_gqa would give each query
    head its own. Both sides read the same tensors and do the same work."""
    batch, heads, _, dim = q.shape
    kv_heads = k.shape[1]
    packed = q.view(batch, kv_heads, heads // kv_heads, dim)
    out = torch_module().nn.functional.scaled_dot_product_attention(packed, k, v)
    return out.view(q.shape)


def _gqa_decode_cpu(q, k, v):
    """The same attention with the KV heads repeated, in f32: the CPU
    tests' reference, written without the packing that kgc's graph and the
    torch code share, so that it checks the packing too."""
    torch = torch_module()
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(scores, dim=-1) @ v.float()).to(q.dtype)


def _fp8_gemm(g, a, bt, scale_a, scale_b, precision=None):
    """B given as bt = B^T, [N, K] row-major: B column-major, the layout
    Hopper's 8-bit wgmma reads (K-major) and torch._scaled_mm takes."""
    product = g.matmul(a, g.t(bt), precision=precision, out_dtype="f32")
    return g.cast(g.mul(g.mul(product, scale_a), scale_b), "bf16")


def _fp8_gemm_fast(g, a, bt, scale_a, scale_b):
    """The same under precision fast_accum: the tensor cores sum the whole
    k loop, as torch._scaled_mm's use_fast_accum=True has cuBLAS do."""
    return _fp8_gemm(g, a, bt, scale_a, scale_b, precision="fast_accum")


def _fp8_gemm_torch(a, b, scale_a, scale_b):
    """torch._scaled_mm in its precise default; B must be column-major
    (`torch_layout` makes it so)."""
    torch = torch_module()
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)


def _fp8_gemm_fast_torch(a, b, scale_a, scale_b):
    """torch._scaled_mm with use_fast_accum=True."""
    torch = torch_module()
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16,
                            use_fast_accum=True)


def _fp8_column_major(inputs: list) -> list:
    """B column-major as _scaled_mm takes it: a view of kgc's bt, the same
    memory, so that both read the same layout and no copy is made."""
    a, bt, scale_a, scale_b = inputs
    return [a, bt.t(), scale_a, scale_b]


def _fp8_gemm_cpu(a, bt, scale_a, scale_b):
    torch = torch_module()
    product = a.double() @ bt.double().t()
    return (product * scale_a.double() * scale_b.double()).to(torch.bfloat16)


def torch_module():
    import torch

    return torch


# -- the catalogue ---------------------------------------------------------------


def _add_relu_mul_workload(rows=4096, columns=4096):
    shape = (rows, columns)
    return Workload(
        "add-relu-mul", f"relu(x + y) * y, {rows}x{columns} f32",
        (Spec("x", shape, "f32"), Spec("y", shape, "f32")), (shape, "f32"),
        _add_relu_mul, _add_relu_mul_torch, 0, MEMORY, Target(1.05, 1.15), quick=True,
        small=lambda: _add_relu_mul_workload(17, 1000))


def _rmsnorm_matmul_workload(m=16, k=4096, n=6144):
    return Workload(
        "rmsnorm-matmul", f"RMSNorm(X) W, X {m}x{k}, W {k}x{n} f16",
        (Spec("x", (m, k), "f16"), Spec("gamma", (k,), "f16", positive=True),
         Spec("w", (k, n), "f16", scale=1 / math.sqrt(k))),
        ((m, n), "f16"), _rmsnorm_matmul, _rmsnorm_matmul_torch, 2 * m * k * n, MEMORY,
        Target(1.3), quick=True, small=lambda: _rmsnorm_matmul_workload(3, 64, 33))


def _softmax_workload(rows=4096, columns=4096):
    return Workload(
        "softmax", f"softmax over rows, {rows}x{columns} f16",
        (Spec("x", (rows, columns), "f16"),), ((rows, columns), "f16"),
        _softmax, _softmax_torch, 0, MEMORY, Target(1.05, 1.15), quick=True,
        small=lambda: _softmax_workload(17, 1000))


def _layer_norm_workload(rows=8192, columns=4096):
    return Workload(
        "layer-norm", f"layer norm, {rows}x{columns} f16",
        (Spec("x", (rows, columns), "f16"), Spec("weight", (columns,), "f16", positive=True),
         Spec("bias", (columns,), "f16", scale=0.1)),
        ((rows, columns), "f16"), _layer_norm, _layer_norm_torch, 0, MEMORY,
        Target(1.05, 1.15), small=lambda: _layer_norm_workload(17, 1000))


def _gemm_workload(dtype, m=4096, k=4096, n=4096):
    return Workload(
        f"gemm-{dtype}", f"GEMM {m}x{k} @ {k}x{n} {dtype}",
        (Spec("a", (m, k), dtype), Spec("b", (k, n), dtype, scale=1 / math.sqrt(k))),
        ((m, n), dtype), _matmul, _matmul_torch, 2 * m * k * n, COMPUTE, Target(0.95),
        small=lambda: _gemm_workload(dtype, 17, 64, 33))


def _gated_mlp_workload(m=8, k=4096, n=11008):
    return Workload(
        "gated-mlp", f"silu(X W1) * (X W2), X {m}x{k}, W1, W2 {k}x{n} f16",
        (Spec("x", (m, k), "f16"), Spec("w1", (k, n), "f16", scale=1 / math.sqrt(k)),
         Spec("w2", (k, n), "f16", scale=1 / math.sqrt(k))),
        ((m, n), "f16"), _gated_mlp, _gated_mlp_torch, 2 * 2 * m * k * n, MEMORY,
        Target(1.15), small=lambda: _gated_mlp_workload(3, 64, 33))


def _lora_workload(m=16, k=4096, n=4096, rank=16):
    return Workload(
        "lora", f"X W + (X A) B, X {m}x{k}, W {k}x{n}, A {k}x{rank}, B {rank}x{n} f16",
        (Spec("x", (m, k), "f16"), Spec("w", (k, n), "f16", scale=1 / math.sqrt(k)),
         Spec("a", (k, rank), "f16", scale=1 / math.sqrt(k)),
         Spec("b", (rank, n), "f16", scale=1 / math.sqrt(rank))),
        ((m, n), "f16"), _lora, _lora_torch, 2 * m * k * n + 2 * m * k * rank + 2 * m * rank * n,
        MEMORY, Target(1.3), small=lambda: _lora_workload(3, 64, 33, 16))


def _gqa_decode_workload(heads=32, kv_heads=8, keys=4096, dim=128):
    return Workload(
        "gqa-decode",
        f"GQA decode, 1 query, {heads} heads, {kv_heads} KV heads, {keys} keys, dim {dim} f16",
        (Spec("q", (1, heads, 1, dim), "f16"), Spec("k", (1, kv_heads, keys, dim), "f16"),
         Spec("v", (1, kv_heads, keys, dim), "f16")),
        ((1, heads, 1, dim), "f16"), _gqa_decode, _gqa_decode_torch,
        2 * 2 * heads * keys * dim, MEMORY, Target(2.0), quick=True,
        small=lambda: _gqa_decode_workload(8, 2, 100, 32), cpu_reference=_gqa_decode_cpu)


def _fp8_gemm_workload(m=4096, k=4096, n=4096):
    return Workload(
        "gemm-fp8",
        f"FP8 GEMM {m}x{k} @ {k}x{n} e4m3, B column-major, per-tensor scales, bf16 out",
        (Spec("a", (m, k), "f8e4m3"), Spec("bt", (n, k), "f8e4m3"),
         Spec("scale_a", (), "f32", scale=1 / math.sqrt(k), positive=True),
         Spec("scale_b", (), "f32", positive=True)),
        ((m, n), "bf16"), _fp8_gemm, _fp8_gemm_torch, 2 * m * k * n, COMPUTE, Target(0.9),
        peak=PEAK_FP8, small=lambda: _fp8_gemm_workload(17, 64, 33),
        cpu_reference=_fp8_gemm_cpu, torch_layout=_fp8_column_major)


def _fp8_gemm_fast_workload(m=4096, k=4096, n=4096):
    """gemm-fp8 with fast accumulation on both sides: kgc's matmul under
    precision fast_accum against torch._scaled_mm(use_fast_accum=True). Its
    floor takes the FP8 peak that _scaled_mm's precise mode measures."""
    return Workload(
        "gemm-fp8-fast",
        f"FP8 GEMM {m}x{k} @ {k}x{n} e4m3, fast accumulation, B column-major, per-tensor "
        "scales, bf16 out",
        (Spec("a", (m, k), "f8e4m3"), Spec("bt", (n, k), "f8e4m3"),
         Spec("scale_a", (), "f32", scale=1 / math.sqrt(k), positive=True),
         Spec("scale_b", (), "f32", positive=True)),
        ((m, n), "bf16"), _fp8_gemm_fast, _fp8_gemm_fast_torch, 2 * m * k * n, COMPUTE,
        Target(0.9), peak=PEAK_FP8, small=lambda: _fp8_gemm_fast_workload(17, 1000, 77),
        cpu_reference=_fp8_gemm_cpu, torch_layout=_fp8_column_major)


CATALOGUE: dict[str, Workload] = {w.name: w for w in (
    _add_relu_mul_workload(), _rmsnorm_matmul_workload(), _softmax_workload(),
    _layer_norm_workload(), _gemm_workload("f16"), _gemm_workload("bf16"),
    _gated_mlp_workload(), _lora_workload(), _gqa_decode_workload(), _fp8_gemm_workload(),
    _fp8_gemm_fast_workload())}


def select(names: Sequence[str] | None, quick: bool) -> list[Workload]:
    """The workloads named (all, or the quick ones, when None), in the
    catalogue's order; an unknown name is a KgcError naming it and the
    known ones."""
    from kgc.diagnostics import KgcError

    if names is None:
        return [w for w in CATALOGUE.values() if w.quick or not quick]
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown:
        raise KgcError(f"unknown workload{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(repr(n) for n in unknown)}; the workloads are "
                       f"{', '.join(CATALOGUE)}")
    return [w for w in CATALOGUE.values() if w.name in names]
