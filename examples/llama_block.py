"""A Llama-style decoder block in plain PyTorch, for `torch.compile(..., backend="kgc")`.

    block = LlamaBlock(hidden=4096, heads=32, kv_heads=8, mlp=11008).half().cuda().eval()
    x, cos, sin, past_k, past_v, mask = block.example_inputs(batch=1, seq=1, past=1024)
    with torch.no_grad():
        out, k, v = torch.compile(block, backend="kgc")(x, cos, sin, past_k, past_v, mask)

RMSNorm, rotary embedding (cos and sin precomputed for the positions, given
as inputs), grouped-query attention through scaled_dot_product_attention
with K and V broadcast over the query heads, a gated SiLU MLP, and a KV cache
that grows by concatenation. The causal mask of a prefill is an additive
tensor (0 where a query may look, -inf elsewhere), or, for a prefill without
cached positions, none: attention is then `is_causal`. A decode step needs
none.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        wide = x.float()
        wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * wide.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, times: int):
    """(batch, kv_heads, length, dim) -> (batch, kv_heads * times, length, dim)."""
    if times == 1:
        return x
    batch, heads, length, dim = x.shape
    return x[:, :, None].expand(batch, heads, times, length, dim).reshape(
        batch, heads * times, length, dim)


class LlamaBlock(nn.Module):
    def __init__(self, hidden: int = 4096, heads: int = 32, kv_heads: int = 8,
                 mlp: int = 11008, eps: float = 1e-6):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.input_norm = RMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.post_norm = RMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, mlp, bias=False)
        self.up_proj = nn.Linear(hidden, mlp, bias=False)
        self.down_proj = nn.Linear(mlp, hidden, bias=False)
        with torch.no_grad():
            for norm in (self.input_norm, self.post_norm):
                norm.weight.uniform_(0.5, 1.5)

    def forward(self, x, cos, sin, past_k, past_v, mask=None):
        batch, seq, _ = x.shape
        h = self.input_norm(x)
        q = self.q_proj(h).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        k = torch.cat((past_k, k), dim=2)
        v = torch.cat((past_v, v), dim=2)
        times = self.heads // self.kv_heads
        causal = mask is None and seq > 1
        if causal and past_k.shape[2]:
            raise ValueError("a prefill after cached positions needs its causal mask as a "
                             "tensor: is_causal aligns the first query with the first key")
        attention = F.scaled_dot_product_attention(q, repeat_kv(k, times), repeat_kv(v, times),
                                                   attn_mask=mask, is_causal=causal)
        attention = attention.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)
        x = x + self.o_proj(attention)
        h = self.post_norm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, k, v

    def example_inputs(self, batch: int, seq: int, past: int, seed: int = 0,
                       mask_tensor: bool = True):
        """Random inputs of the block's dtype and device: x, the rotary cos and
        sin of positions past..past+seq, a KV cache of `past` positions, and the
        causal mask (None for one query, or without `mask_tensor`: the block
        then attends with is_causal)."""
        weight = self.q_proj.weight
        dtype, device = weight.dtype, weight.device
        generator = torch.Generator(device="cpu").manual_seed(seed)

        def random(*shape, scale=1.0):
            return (torch.randn(*shape, generator=generator) * scale).to(dtype).to(device)

        hidden = self.q_proj.in_features
        x = random(batch, seq, hidden)
        positions = torch.arange(past, past + seq, dtype=torch.float64)
        inverse = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64)
                                   / self.head_dim))
        angles = positions[:, None] * inverse[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)
        past_k = random(batch, self.kv_heads, past, self.head_dim)
        past_v = random(batch, self.kv_heads, past, self.head_dim)
        mask = None
        if seq > 1 and mask_tensor:
            rows = torch.arange(seq)[:, None] + past
            columns = torch.arange(past + seq)[None, :]
            mask = torch.zeros(seq, past + seq, dtype=torch.float32)
            mask = mask.masked_fill(columns > rows, -math.inf).to(dtype).to(device)
        return x, cos, sin, past_k, past_v, mask
