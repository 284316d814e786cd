"""Attention graphs as users write them, their inputs and their reference.

softmax(Q K^T / sqrt(D) [+ mask]) V over (batch, heads, queries, head dim),
with grouped query heads written as PyTorch users write them for
F.scaled_dot_product_attention's enable_gqa: K and V of Hkv heads reshaped
to (B, Hkv, 1, N, D), broadcast to the G query heads of each group and
reshaped to (B, Hq, N, D). The mask is an additive float tensor (-inf where
a query must not see a key) of shape (M, N).
"""

from __future__ import annotations

import dataclasses
import math

import kgc


@dataclasses.dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int  # query heads
    kv_heads: int
    queries: int
    keys: int
    head_dim: int
    mask: bool = False

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    def __str__(self) -> str:
        gqa = f"gqa{self.group}" if self.group > 1 else "mha"
        return (f"{self.batch}x{self.heads}x{self.queries}x{self.keys}x{self.head_dim}-{gqa}"
                f"{'-mask' if self.mask else ''}")


def attention_graph(shape: AttentionShape, dtype: str, name: str = "attention") -> kgc.Graph:
    g, result = _attention(shape, dtype, name)
    g.output(result)
    return g


def _attention(shape: AttentionShape, dtype: str, name: str) -> tuple[kgc.Graph, kgc.Tensor]:
    s = shape
    g = kgc.Graph(name)
    q = g.input("q", (s.batch, s.heads, s.queries, s.head_dim), dtype)
    k = g.input("k", (s.batch, s.kv_heads, s.keys, s.head_dim), dtype)
    v = g.input("v", (s.batch, s.kv_heads, s.keys, s.head_dim), dtype)

    def per_query_head(t):
        if s.group == 1:
            return t
        t = g.reshape(t, (s.batch, s.kv_heads, 1, s.keys, s.head_dim))
        t = g.broadcast_to(t, (s.batch, s.kv_heads, s.group, s.keys, s.head_dim))
        return g.reshape(t, (s.batch, s.heads, s.keys, s.head_dim))

    scores = g.matmul(q, g.transpose(per_query_head(k), (0, 1, 3, 2))) * (1 / math.sqrt(s.head_dim))
    if s.mask:
        scores = scores + g.input("mask", (s.queries, s.keys), dtype)
    return g, g.matmul(g.softmax(scores, dim=-1), per_query_head(v))


def tokens_major_graph(shape: AttentionShape, dtype: str, name: str = "attention") -> kgc.Graph:
    """Attention whose result goes back from heads to tokens as transformers
    models give it to the output projection: transposed to (B, M, H, D) and
    reshaped to (B, M, H * D)."""
    s = shape
    g, heads_major = _attention(shape, dtype, name)
    tokens = g.transpose(heads_major, (0, 2, 1, 3))
    g.output(g.reshape(tokens, (s.batch, s.queries, s.heads * s.head_dim)))
    return g


def tokens_major(result):
    """`result` of shape (B, H, M, D) as `tokens_major_graph` gives it."""
    batch, heads, queries, dim = result.shape
    return result.transpose(1, 2).reshape(batch, queries, heads * dim)


def packed_decode_graph(shape: AttentionShape, dtype: str, name: str = "decode") -> kgc.Graph:
    """Decoding written with the query heads of a group as the rows of one
    matmul ([Hkv, G, D] against each key/value head), and the result
    reshaped back to the queries' [B, H, M, D]: no broadcast of K and V."""
    s = shape
    g = kgc.Graph(name)
    q = g.input("q", (s.batch, s.heads, s.queries, s.head_dim), dtype)
    k = g.input("k", (s.batch, s.kv_heads, s.keys, s.head_dim), dtype)
    v = g.input("v", (s.batch, s.kv_heads, s.keys, s.head_dim), dtype)
    rows = (s.batch * s.kv_heads, s.group * s.queries, s.head_dim)
    keys = (s.batch * s.kv_heads, s.keys, s.head_dim)
    scores = g.matmul(g.reshape(q, rows), g.transpose(g.reshape(k, keys), (0, 2, 1)))
    weights = g.softmax(scores * (1 / math.sqrt(s.head_dim)), dim=-1)
    g.output(g.reshape(g.matmul(weights, g.reshape(v, keys)), q.shape))
    return g


def attention_inputs(shape: AttentionShape, dtype, device: str, seed: int) -> list:
    """Fresh random Q, K, V (and a mask hiding about a fifth of the keys
    from each query, never the first key, so no row is all -inf)."""
    import torch

    s = shape
    generator = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*dims):
        return torch.randn(*dims, generator=generator).to(dtype).to(device)

    tensors = [randn(s.batch, s.heads, s.queries, s.head_dim),
               randn(s.batch, s.kv_heads, s.keys, s.head_dim),
               randn(s.batch, s.kv_heads, s.keys, s.head_dim)]
    if s.mask:
        hidden = torch.rand(s.queries, s.keys, generator=generator) < 0.2
        hidden[:, 0] = False
        tensors.append(torch.where(hidden, float("-inf"), 0.0).to(dtype).to(device))
    return tensors


def attention_reference(q, k, v, mask=None):
    """The result in f64."""
    import torch

    group = q.shape[1] // k.shape[1]
    k = k.double().repeat_interleave(group, 1)
    v = v.double().repeat_interleave(group, 1)
    scores = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask.double()
    return torch.softmax(scores, -1) @ v


def attention_eager(q, k, v, mask=None):
    """The result as eager torch computes it in the inputs' dtype
    (scaled_dot_product_attention on each query head's K and V)."""
    import torch

    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def math_path_graph(shape: AttentionShape, dtype: str, name: str = "math_path") -> kgc.Graph:
    """Attention over half-float heads as scaled_dot_product_attention's
    math path computes it with a mask: Q, K and V widened to f32, Q and K
    each scaled by D^-1/4, the products over heads merged with the batch
    (bmm), and the safe softmax, whose rows of keys all masked are zeros;
    the result rounded back. The mask is an f32 input of (M, N)."""
    s = shape
    g = kgc.Graph(name)
    q = g.input("q", (s.batch, s.heads, s.queries, s.head_dim), dtype)
    k = g.input("k", (s.batch, s.heads, s.keys, s.head_dim), dtype)
    v = g.input("v", (s.batch, s.heads, s.keys, s.head_dim), dtype)
    mask = g.input("mask", (s.queries, s.keys), "f32")
    scale = s.head_dim ** -0.25
    merged = s.batch * s.heads
    qs = g.reshape(g.cast(q, "f32") * scale, (merged, s.queries, s.head_dim))
    ks = g.reshape(g.transpose(g.cast(k, "f32"), (0, 1, 3, 2)) * scale,
                   (merged, s.head_dim, s.keys))
    scores = g.reshape(g.matmul(qs, ks), (s.batch, s.heads, s.queries, s.keys)) + mask
    kept = g.logical_not(g.eq(scores, float("-inf")))
    any_kept = g.cast(g.max(g.cast(kept, "f16"), -1, keepdim=True), "i1")
    weights = g.select(g.logical_not(any_kept), 0.0, g.softmax(scores, dim=-1))
    values = g.reshape(g.cast(v, "f32"), (merged, s.keys, s.head_dim))
    result = g.matmul(g.reshape(weights, (merged, s.queries, s.keys)), values)
    g.output(g.cast(g.reshape(result, q.shape), dtype))
    return g


def math_path_inputs(shape: AttentionShape, dtype, seed: int) -> list:
    """Q, K, V in `dtype` and an f32 mask hiding about a fifth of the keys
    from each query and every key from the middle query."""
    import torch

    s = shape
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(s.batch, s.heads, n, s.head_dim, generator=generator).to(dtype)
               for n in (s.queries, s.keys, s.keys))
    hidden = torch.rand(s.queries, s.keys, generator=generator) < 0.2
    hidden[s.queries // 2] = True
    return [q, k, v, torch.where(hidden, float("-inf"), 0.0)]


def math_path_eager(q, k, v, mask, dtype=None):
    """The math path's result (in f64 with `dtype` torch.float64: the
    reference)."""
    import torch

    wide = dtype or torch.float32
    scale = q.shape[-1] ** -0.25
    scores = (q.to(wide) * scale) @ (k.to(wide) * scale).transpose(-1, -2) + mask.to(wide)
    weights = torch.ops.aten._safe_softmax(scores, -1)
    result = weights @ v.to(wide)
    return result if dtype is not None else result.to(q.dtype)


def check_math_path(got, inputs) -> None:
    """`got` against the math path's result on `inputs` by the project's
    accuracy rule, and zeros for the middle query, whose keys are all
    masked (`math_path_inputs`)."""
    import torch

    from kgc.accuracy import tensor_mismatch

    assert got.dtype == inputs[0].dtype
    assert not got[:, :, inputs[0].shape[2] // 2].any()
    reason = tensor_mismatch(got, math_path_eager(*inputs),
                             math_path_eager(*inputs, dtype=torch.float64))
    assert reason is None, reason
