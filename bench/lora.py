"""Low-rank adapters for the model suite's LoRA fine-tuning row: a frozen
base decoder whose attention projections each gain a trainable pair of
low-rank matrices, `y = base(x) + scale * (x A^T) B^T`, as LoRA fine-tuning
does (Hu et al., 2021; the `peft` library's `LoraConfig(target_modules=
...)` over the attention projections).

Written here rather than taken from `peft` so that the suite needs nothing
beyond transformers; the adapter is the plain pair of `F.linear` calls that
peft's `lora.Linear` makes, so kgc sees the same graph.

Every `torch.nn.Linear` (and GPT-2's `Conv1D`) inside a module whose class
is an attention (its name ends in "Attention") is wrapped: q, k, v and o for
Llama-like models, the fused qkv and o of Phi-3, GPT-2's c_attn and c_proj.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

RANK, ALPHA = 8, 16


class LoraAdapter(torch.nn.Module):
    """`base(x) + alpha / rank * (x down^T) up^T`, the base module frozen."""

    def __init__(self, base: torch.nn.Module, in_features: int, out_features: int,
                 rank: int, alpha: float, generator: torch.Generator):
        super().__init__()
        self.base = base
        weight = next(base.parameters())
        # LoRA starts `up` at zero, which makes the first step's gradient of
        # `down` zero too, and a check of it meaningless; small random values
        # are adapters some steps into training.
        down = torch.randn(rank, in_features, generator=generator) / math.sqrt(in_features)
        up = torch.randn(out_features, rank, generator=generator) * 0.02
        self.down = torch.nn.Parameter(down.to(device=weight.device, dtype=weight.dtype))
        self.up = torch.nn.Parameter(up.to(device=weight.device, dtype=weight.dtype))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.down), self.up) * self.scale


def _features(module: torch.nn.Module) -> tuple[int, int] | None:
    """(in, out) features of a projection kgc's LoRA row adapts, or None."""
    if isinstance(module, torch.nn.Linear):
        return module.in_features, module.out_features
    if type(module).__name__ == "Conv1D":  # transformers' GPT-2 projection: x W + b
        rows, columns = module.weight.shape
        return rows, columns
    return None


def add_adapters(model: torch.nn.Module, rank: int = RANK, alpha: float = ALPHA,
                 seed: int = 0) -> list[str]:
    """Freezes every parameter of `model` and wraps each projection of its
    attention modules in a `LoraAdapter` (weights drawn from `seed`, in the
    model's dtype and device), in place. Returns the wrapped modules'
    names; a model with no attention projection is a ValueError."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    wrapped = []
    # A list first: the modules change as they are wrapped.
    attentions = [(name, module) for name, module in model.named_modules()
                  if type(module).__name__.endswith("Attention")]
    for attention_name, attention in attentions:
        for child_name, child in list(attention.named_children()):
            features = _features(child)
            if features is None:
                continue
            setattr(attention, child_name,
                    LoraAdapter(child, *features, rank, alpha, generator))
            wrapped.append(f"{attention_name}.{child_name}")
    if not wrapped:
        raise ValueError(f"{type(model).__name__} has no attention projection to adapt")
    return wrapped
