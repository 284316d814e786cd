"""Kernel graphs of every op and of the fused patterns, with torch references.

Shared by the compile test (every case compiles to cubin, no GPU needed)
and the GPU suite (every case runs and matches torch). A case builds a
`kgc.Graph` for a dtype and gives the torch function that computes the same
outputs; inputs are drawn by `make_inputs` from each input's domain.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import kgc

DTYPES = ("f32", "f16", "bf16")


def tiled(graph: kgc.Graph, fuse_options: str = ""):
    """`graph` compiled to the kg stage in a context of its own: kernels in
    tiled form, padded and masked, as the CPU executor runs them.
    `fuse_options` are kg-fuse's (`rules-off=...`), as a search may set."""
    from mlir import ir

    from kgc.pipeline.compiler import compile_module
    from kgc.pipeline.stages import default_pipeline_text
    from kgc.targets import DEFAULT_SM

    context = ir.Context()
    module = graph.build(context)
    pipeline = None
    if fuse_options:
        fuse = f"kg-fuse{{target={DEFAULT_SM}}}"
        pipeline = default_pipeline_text().replace(
            fuse, f"kg-fuse{{target={DEFAULT_SM} {fuse_options}}}")
        assert pipeline != default_pipeline_text()
    with context:
        compile_module(module, emit="kg", pipeline=pipeline)
    return module

# Shapes that are not multiples of any tile, with 1s and odd sizes.
ROW_SHAPES = ((1, 1), (3, 17), (17, 1000), (5, 4097))


@dataclasses.dataclass
class Case:
    name: str
    inputs: list[tuple[str, tuple[int, ...], str]]  # (name, shape, domain) domain: any|positive|unit
    build: Callable  # (graph, inputs: list[Tensor]) -> output Tensor(s)
    reference: Callable  # (torch inputs) -> output tensor(s)
    dtypes: tuple[str, ...] = DTYPES
    input_dtypes: dict | None = None  # input name -> dtype overriding the case dtype
    tolerance_scale: float = 1.0  # multiplies the absolute tolerance (long reductions)
    tf32: bool = False  # the reference must allow TF32
    # On a GPU, torch's result at the hardware's precision where kgc's
    # kernel may legitimately have it (8-bit tensor cores' short sums): a
    # second eager result that kgc is held to where it is the less accurate.
    gpu_reference: Callable | None = None

    def id(self, dtype: str) -> str:
        return f"{self.name}-{dtype}"

    def graph(self, dtype: str) -> kgc.Graph:
        g = kgc.Graph(_identifier(self.name))
        tensors = [g.input(name, shape, (self.input_dtypes or {}).get(name, dtype))
                   for name, shape, _ in self.inputs]
        outputs = self.build(g, *tensors)
        g.output(*(outputs if isinstance(outputs, tuple) else (outputs,)))
        return g


def _fp8_fast_accumulation(a, b):
    """a @ b of 8-bit floats by cuBLAS with fast accumulation: the short
    sums of the 8-bit tensor cores, which kgc's FP8 dots have too."""
    torch = _torch()
    one = torch.ones((), device=a.device)
    b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()  # column-major, as _scaled_mm takes it
    return torch._scaled_mm(a.to(torch.float8_e4m3fn), b8, scale_a=one, scale_b=one,
                            out_dtype=torch.float32, use_fast_accum=True)


def _per_query_head(g, t, group: int):
    """K or V of (B, Hkv, N, D) read by `group` query heads each: (B, Hkv *
    group, N, D), written as reshape, broadcast_to, reshape."""
    b, heads, n, d = t.shape
    t = g.reshape(t, (b, heads, 1, n, d))
    t = g.broadcast_to(t, (b, heads, group, n, d))
    return g.reshape(t, (b, heads * group, n, d))


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


def _torch():
    import torch

    return torch


def _unary_cases():
    F = lambda name: (lambda x: getattr(_torch(), name)(x))  # noqa: E731
    torch_nn = lambda name: (lambda x: getattr(_torch().nn.functional, name)(x))  # noqa: E731
    table = {
        "exp": (F("exp"), "any"), "log": (F("log"), "positive"), "sqrt": (F("sqrt"), "positive"),
        "rsqrt": (F("rsqrt"), "positive"), "neg": (F("neg"), "any"), "abs": (F("abs"), "any"),
        "relu": (F("relu"), "any"), "silu": (torch_nn("silu"), "any"),
        "sigmoid": (F("sigmoid"), "any"), "tanh": (F("tanh"), "any"),
        "sin": (F("sin"), "any"), "cos": (F("cos"), "any"),
        "square": (F("square"), "any"), "reciprocal": (F("reciprocal"), "positive"),
    }
    cases = []
    for name, (reference, domain) in table.items():
        for shape in ((1,), (3, 17), (17, 1000), (2, 3, 4097)):
            cases.append(Case(f"{name}-{'x'.join(map(str, shape))}", [("x", shape, domain)],
                              lambda g, x, name=name: getattr(g, name)(x), reference))
    for approximate in ("none", "tanh"):
        cases.append(Case(f"gelu_{approximate}-17x1000", [("x", (17, 1000), "any")],
                          lambda g, x, a=approximate: g.gelu(x, approximate=a),
                          lambda x, a=approximate: _torch().nn.functional.gelu(x, approximate=a)))
    cases.append(Case("clamp-17x1000", [("x", (17, 1000), "any")],
                      lambda g, x: g.clamp(x, min=-0.5, max=0.75),
                      lambda x: _torch().clamp(x, -0.5, 0.75)))
    cases.append(Case("clamp_min-3x17", [("x", (3, 17), "any")],
                      lambda g, x: g.clamp(x, min=0.1), lambda x: _torch().clamp(x, min=0.1)))
    return cases


def _binary_cases():
    torch_ops = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "maximum",
                 "minimum": "minimum", "pow": "pow"}
    shapes = (((17, 1000), (17, 1000)), ((17, 1000), (1000,)), ((3, 1, 17), (5, 1)),
              ((1,), (4097,)))
    cases = []
    for name, torch_name in torch_ops.items():
        for lhs, rhs in shapes:
            domain = "positive" if name in ("pow", "div") else "any"
            label = f"{name}-{'x'.join(map(str, lhs))}-{'x'.join(map(str, rhs))}"
            cases.append(Case(label, [("a", lhs, "positive" if name == "pow" else "any"),
                                      ("b", rhs, "unit" if name == "pow" else domain)],
                              lambda g, a, b, name=name: getattr(g, name)(a, b),
                              lambda a, b, t=torch_name: getattr(_torch(), t)(a, b)))
    cases.append(Case("scalar_ops-17x1000", [("x", (17, 1000), "any")],
                      lambda g, x: (x * 2.5 + 1.0) / 3.0 - 0.25,
                      lambda x: (x * 2.5 + 1.0) / 3.0 - 0.25))
    return cases


def _cast_cases():
    cases = []
    for target in ("f32", "f16", "bf16"):
        cases.append(Case(f"cast_to_{target}-17x1000", [("x", (17, 1000), "any")],
                          lambda g, x, t=target: g.cast(x, t),
                          lambda x, t=target: x.to(_torch_dtype(t))))
    cases.append(Case("cast_fp8_roundtrip-16x64", [("x", (16, 64), "unit")],
                      lambda g, x: g.cast(g.cast(x, "f8e4m3"), "f32"),
                      lambda x: x.to(_torch().float8_e4m3fn).to(_torch().float32),
                      dtypes=("f32",)))
    cases.append(Case("constant-3x17", [("x", (3, 17), "any")],
                      lambda g, x: x + g.constant(1.5, (3, 17), x.dtype),
                      lambda x: x + 1.5))
    return cases


def _matmul_cases():
    cases = []
    for m, k, n in ((1, 64, 32), (3, 17, 5), (17, 100, 33), (128, 256, 192), (257, 1000, 100)):
        cases.append(Case(f"matmul-{m}x{k}x{n}", [("a", (m, k), "unit"), ("b", (k, n), "unit")],
                          lambda g, a, b: g.matmul(a, b),
                          lambda a, b: a @ b, tolerance_scale=math.sqrt(k) / 4))
    cases.append(Case("matmul_batched_broadcast-2x1x17x40_3x40x24",
                      [("a", (2, 1, 17, 40), "unit"), ("b", (3, 40, 24), "unit")],
                      lambda g, a, b: g.matmul(a, b), lambda a, b: _torch().matmul(a, b)))
    cases.append(Case("matmul_tf32-64x128x64", [("a", (64, 128), "unit"), ("b", (128, 64), "unit")],
                      lambda g, a, b: g.matmul(a, b, precision="tf32"), lambda a, b: a @ b,
                      dtypes=("f32",), tf32=True, tolerance_scale=4))
    cases.append(Case("matmul_fp8-64x128x64", [("a", (64, 128), "unit"), ("b", (128, 64), "unit")],
                      lambda g, a, b: g.matmul(g.cast(a, "f8e4m3"), g.cast(b, "f8e4m3"),
                                               out_dtype="f32"),
                      lambda a, b: a.to(_torch().float8_e4m3fn).float() @ b.to(_torch().float8_e4m3fn).float(),
                      # Hopper's 8-bit wgmma sums a k step's products with
                      # about 14 bits before they reach the f32 accumulator,
                      # as cuBLAS's fast accumulation does: up to
                      # 128 * 2^-14 = 8e-3 for 128 products of unit inputs.
                      dtypes=("f32",), tolerance_scale=80, gpu_reference=_fp8_fast_accumulation))
    return cases


def _reduction_cases():
    cases = []
    for kind in ("sum", "max", "min", "mean"):
        for shape, dims, keepdim in (((17, 1000), (1,), False), ((5, 4097), (1,), True),
                                     ((3, 17, 33), (0, 2), False), ((1000,), (0,), False),
                                     ((6, 50, 7), (1,), True),
                                     # Across rows (the last axis kept): bands of
                                     # columns walking rows, the last step and the
                                     # last band partly past the end.
                                     ((4097, 17), (0,), False), ((1000, 33), (0,), False),
                                     ((3, 1000, 17), (0, 1), True), ((1, 1000), (0,), False),
                                     # Split in two stages (kg-split-reduction):
                                     # 6000 rows into 17 columns.
                                     ((2, 1000, 3, 17), (0, 1, 2), False)):
            label = f"{kind}-{'x'.join(map(str, shape))}-dims{''.join(map(str, dims))}" + \
                ("-keep" if keepdim else "")
            cases.append(Case(label, [("x", shape, "any")],
                              lambda g, x, k=kind, d=dims, kd=keepdim: getattr(g, k)(x, d, keepdim=kd),
                              lambda x, k=kind, d=dims, kd=keepdim: _torch_reduce(k, x, d, kd),
                              tolerance_scale=4 if kind in ("sum", "mean") else 1))
    for shape in ROW_SHAPES + ((4, 32768),):
        label = "x".join(map(str, shape))
        cases.append(Case(f"softmax-{label}", [("x", shape, "any")],
                          lambda g, x: g.softmax(x, dim=-1),
                          lambda x: _torch().softmax(x.float(), dim=-1).to(x.dtype)))
        cases.append(Case(f"rms_norm-{label}", [("x", shape, "any"), ("w", shape[-1:], "any")],
                          lambda g, x, w: g.rms_norm(x, w, eps=1e-6),
                          lambda x, w: _torch().nn.functional.rms_norm(
                              x.float(), x.shape[-1:], w.float(), eps=1e-6).to(x.dtype)))
        cases.append(Case(f"layer_norm-{label}",
                          [("x", shape, "any"), ("w", shape[-1:], "any"), ("b", shape[-1:], "any")],
                          lambda g, x, w, b: g.layer_norm(x, w, b, eps=1e-5),
                          lambda x, w, b: _torch().nn.functional.layer_norm(
                              x.float(), x.shape[-1:], w.float(), b.float(), eps=1e-5).to(x.dtype)))
    cases.append(Case("softmax_dim0-33x20", [("x", (33, 20), "any")],
                      lambda g, x: g.softmax(x, dim=0),
                      lambda x: _torch().softmax(x.float(), dim=0).to(x.dtype)))
    cases.append(Case("rms_norm_no_weight-17x1000", [("x", (17, 1000), "any")],
                      lambda g, x: g.rms_norm(x, eps=1e-6),
                      lambda x: _torch().nn.functional.rms_norm(x.float(), (1000,), eps=1e-6).to(x.dtype)))
    cases.append(Case("layer_norm_2d-4x7x30", [("x", (4, 7, 30), "any")],
                      lambda g, x: g.layer_norm(x, normalized_shape=(7, 30)),
                      lambda x: _torch().nn.functional.layer_norm(x.float(), (7, 30)).to(x.dtype)))
    return cases


def _view_cases():
    T = _torch
    return [
        Case("transpose-17x1000", [("x", (17, 1000), "any")], lambda g, x: g.transpose(x, (1, 0)),
             lambda x: x.t().contiguous()),
        Case("transpose3d-3x17x5", [("x", (3, 17, 5), "any")], lambda g, x: g.transpose(x, (2, 0, 1)),
             lambda x: x.permute(2, 0, 1).contiguous()),
        Case("reshape-17x1000", [("x", (17, 1000), "any")], lambda g, x: g.reshape(x, (17, 10, 100)),
             lambda x: x.reshape(17, 10, 100)),
        Case("reshape_merge-3x17x5", [("x", (3, 17, 5), "any")], lambda g, x: g.reshape(x, (51, 5)),
             lambda x: x.reshape(51, 5)),
        Case("broadcast_to-1000", [("x", (1000,), "any")], lambda g, x: g.broadcast_to(x, (3, 1000)),
             lambda x: x.expand(3, 1000).contiguous()),
        Case("concat-17x3_17x1000", [("a", (17, 3), "any"), ("b", (17, 1000), "any")],
             lambda g, a, b: g.concat([a, b], 1), lambda a, b: T().cat([a, b], 1)),
        Case("concat3-dim0", [("a", (1, 33), "any"), ("b", (4, 33), "any"), ("c", (17, 33), "any")],
             lambda g, a, b, c: g.concat([a, b, c], 0), lambda a, b, c: T().cat([a, b, c], 0)),
        Case("slice-17x1000", [("x", (17, 1000), "any")],
             lambda g, x: g.slice(x, (1, 3), (8, 300), (2, 3)),
             lambda x: x[1:1 + 8 * 2:2, 3:3 + 300 * 3:3].contiguous()),
        Case("view_chain-17x1000", [("x", (17, 1000), "any"), ("y", (1000, 17), "any")],
             lambda g, x, y: g.exp(g.transpose(x, (1, 0))) + y,
             lambda x, y: T().exp(x.t()) + y),
    ]


def _shared_input_case(rows: int, k: int, n: int, tolerance_scale: float) -> Case:
    """x @ wk^T and x @ wv^T, two products of one x."""
    def build(g, x, wk, wv):
        return g.matmul(x, g.transpose(wk, (1, 0))), g.matmul(x, g.transpose(wv, (1, 0)))

    def reference(x, wk, wv):
        return x.float() @ wk.float().T, x.float() @ wv.float().T

    return Case(f"shared_input_projections-{rows}x{k}x{n}",
                [("x", (rows, k), "unit"), ("wk", (n, k), "unit"), ("wv", (n, k), "unit")],
                build, reference, tolerance_scale=tolerance_scale)


def _fusion_cases():
    T = _torch
    return [
        # Past 512 k steps kg-fuse keeps the norm out of the product (the
        # matmul schedule's `norm-over-long-k`): a norm kernel, then the matmul.
        Case("rmsnorm_then_matmul-16x4096x6144",
             [("x", (16, 4096), "any"), ("gamma", (4096,), "any"), ("w", (4096, 6144), "unit")],
             lambda g, x, gamma, w: g.matmul(g.rms_norm(x, gamma, eps=1e-6), w),
             lambda x, gamma, w: T().nn.functional.rms_norm(
                 x.float(), (4096,), gamma.float(), eps=1e-6) @ w.float(),
             dtypes=("f16", "bf16"), tolerance_scale=40),
        Case("rmsnorm_then_matmul-33x1000x100",
             [("x", (33, 1000), "any"), ("gamma", (1000,), "any"), ("w", (1000, 100), "unit")],
             lambda g, x, gamma, w: g.matmul(g.rms_norm(x, gamma, eps=1e-6), w),
             lambda x, gamma, w: T().nn.functional.rms_norm(
                 x.float(), (1000,), gamma.float(), eps=1e-6) @ w.float(),
             tolerance_scale=8),
        Case("rmsnorm_matmul-13x500x100",
             [("x", (13, 500), "any"), ("gamma", (500,), "any"), ("w", (500, 100), "unit")],
             lambda g, x, gamma, w: g.matmul(g.rms_norm(x, gamma, eps=1e-6), w),
             lambda x, gamma, w: T().nn.functional.rms_norm(
                 x.float(), (500,), gamma.float(), eps=1e-6) @ w.float(),
             tolerance_scale=8),
        Case("gated_mlp-64x512x1024",
             [("x", (64, 512), "unit"), ("w1", (512, 1024), "unit"), ("w2", (512, 1024), "unit")],
             lambda g, x, w1, w2: g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2)),
             lambda x, w1, w2: T().nn.functional.silu(x.float() @ w1.float()) * (x.float() @ w2.float()),
             tolerance_scale=8),
        Case("gated_mlp-17x100x33",
             [("x", (17, 100), "unit"), ("w1", (100, 33), "unit"), ("w2", (100, 33), "unit")],
             lambda g, x, w1, w2: g.mul(g.silu(g.matmul(x, w1)), g.matmul(x, w2)),
             lambda x, w1, w2: T().nn.functional.silu(x.float() @ w1.float()) * (x.float() @ w2.float()),
             tolerance_scale=4),
        # Products of a few rows reading one x (a decode step's key and value
        # projections, weights stored (n, k)): one kernel with two results
        # (kg-fuse's merge-shared-input), split over k at the larger shape.
        _shared_input_case(3, 1000, 17, tolerance_scale=4),
        _shared_input_case(1, 4097, 500, tolerance_scale=8),
        Case("attention-2x4x100x64",
             [("q", (2, 4, 100, 64), "unit"), ("k", (2, 4, 100, 64), "unit"), ("v", (2, 4, 100, 64), "unit")],
             lambda g, q, k, v: g.matmul(g.softmax(g.mul(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), 0.125),
                                                   dim=-1), v),
             lambda q, k, v: T().softmax((q.float() @ k.float().transpose(-1, -2)) * 0.125, -1) @ v.float(),
             tolerance_scale=4),
        Case("attention-1x1x300x40",
             [("q", (1, 1, 300, 40), "unit"), ("k", (1, 1, 300, 40), "unit"), ("v", (1, 1, 300, 40), "unit")],
             lambda g, q, k, v: g.matmul(g.softmax(g.matmul(q, g.transpose(k, (0, 1, 3, 2))), dim=-1), v),
             lambda q, k, v: T().softmax(q.float() @ k.float().transpose(-1, -2), -1) @ v.float(),
             tolerance_scale=4),
        # Grouped-query decoding: 8 query heads on 2 key/value heads, K and V
        # broadcast to the query heads; its keys are split over programs and
        # combined by a second kernel (two kernels and f32 intermediates).
        Case("attention_decode-1x8x1x1000x64",
             [("q", (1, 8, 1, 64), "unit"), ("k", (1, 2, 1000, 64), "unit"),
              ("v", (1, 2, 1000, 64), "unit")],
             lambda g, q, k, v: g.matmul(
                 g.softmax(g.mul(g.matmul(q, g.transpose(_per_query_head(g, k, 4), (0, 1, 3, 2))),
                                 0.125), dim=-1), _per_query_head(g, v, 4)),
             lambda q, k, v: T().softmax((q.float() @ k.float().repeat_interleave(4, 1)
                                          .transpose(-1, -2)) * 0.125, -1)
             @ v.float().repeat_interleave(4, 1),
             tolerance_scale=4),
        Case("bias_gelu_residual-33x200x96",
             [("x", (33, 200), "unit"), ("w", (200, 96), "unit"), ("b", (96,), "any"), ("r", (33, 96), "any")],
             lambda g, x, w, b, r: g.gelu(g.matmul(x, w) + b, approximate="tanh") + r,
             lambda x, w, b, r: T().nn.functional.gelu(x.float() @ w.float() + b.float(),
                                                       approximate="tanh") + r.float(),
             tolerance_scale=4),
        Case("layernorm_then_softmax-17x1000",
             [("x", (17, 1000), "any")],
             lambda g, x: g.softmax(g.layer_norm(x), dim=-1),
             lambda x: T().softmax(T().nn.functional.layer_norm(x.float(), (1000,)), -1)),
    ]


def _torch_dtype(name: str):
    return {"f32": _torch().float32, "f16": _torch().float16, "bf16": _torch().bfloat16}[name]


def _torch_reduce(kind, x, dims, keepdim):
    torch = _torch()
    if kind == "sum":
        return torch.sum(x.float(), dim=dims, keepdim=keepdim).to(x.dtype)
    if kind == "mean":
        return torch.mean(x.float(), dim=dims, keepdim=keepdim).to(x.dtype)
    result = x
    for d in sorted(dims, reverse=True):
        result = (torch.amax if kind == "max" else torch.amin)(result, dim=d, keepdim=keepdim)
    return result


ALL_CASES: list[Case] = (_unary_cases() + _binary_cases() + _cast_cases() + _matmul_cases()
                         + _reduction_cases() + _view_cases() + _fusion_cases())


def parameters():
    """(case, dtype) for every case and each of its dtypes."""
    return [(case, dtype) for case in ALL_CASES for dtype in case.dtypes]


def make_inputs(case: Case, dtype: str, device: str, seed: int):
    """Fresh random inputs (never zeros) in each input's domain."""
    torch = _torch()
    generator = torch.Generator(device="cpu").manual_seed(seed)
    tensors = []
    for name, shape, domain in case.inputs:
        values = torch.randn(shape, generator=generator, dtype=torch.float32)
        if domain == "positive":
            values = values.abs() + 0.5
        elif domain == "unit":
            values = values * 0.5
        input_dtype = (case.input_dtypes or {}).get(name, dtype)
        tensors.append(values.to(_torch_dtype(input_dtype)).to(device))
    return tensors


def headline_graph() -> kgc.Graph:
    """The headline example (RMSNorm + MatMul, X 16x4096, W 4096x6144, f16),
    built with Mirage's names."""
    g = kgc.new_kernel_graph("rmsnorm_matmul")
    x = g.new_input(dims=(16, 4096), dtype=kgc.float16)
    gamma = g.new_input(dims=(4096,), dtype=kgc.float16)
    w = g.new_input(dims=(4096, 6144), dtype=kgc.float16)
    g.mark_output(g.matmul(g.rms_norm(x, gamma, normalized_shape=(4096,)), w))
    return g
