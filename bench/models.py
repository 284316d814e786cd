"""The catalogue of the model suite: transformers architectures built from
small configs with random weights (nothing is downloaded), and the rows
each is measured on.

Each `ModelSpec` builds its model at two sizes: `GPU` (the suite's, a few
hundred hidden units; the Llama-3-8B-shaped one with the real layer shapes)
and `CPU` (tiny: hidden 128, head_dim 32, vocabulary 256, small enough that
the CPU executor runs every row in seconds, yet with grouped-query
attention, rotary embeddings, per-head norms and every kind of op the large
ones have). Weights come from a fixed seed, so that a row is the same model
in every run.

A `RowSpec` is one thing a user does with the model: a forward over a
prompt of some length, `generate()` with the static or the dynamic KV
cache, one training step (forward, cross-entropy loss, backward, AdamW), or
one LoRA fine-tuning step (the same with the base frozen and low-rank
adapters on the attention projections trained: `kgc.bench.lora`).
Encoders have forward rows only.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

GPU, CPU = "gpu", "cpu"
FORWARD, GENERATE, TRAIN, LORA = "forward", "generate", "train", "lora"
KINDS = (FORWARD, GENERATE, TRAIN, LORA)
# The rows that run a training step (`kgc.bench.model_train`).
TRAINING_KINDS = (TRAIN, LORA)
STATIC, DYNAMIC = "static", "dynamic"


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """A forward over `tokens` tokens, `generate()` of `new_tokens` after a
    prompt of `tokens`, greedy, with the `cache` implementation, or a
    training or LoRA step on `batch` sequences of `tokens` tokens."""

    kind: str
    tokens: int
    cache: str | None = None
    new_tokens: int = 0
    batch: int = 1

    @property
    def name(self) -> str:
        if self.kind == FORWARD:
            return f"forward {self.tokens}"
        if self.kind in TRAINING_KINDS:
            return f"{self.kind} {self.batch}x{self.tokens}"
        return f"generate {self.cache} {self.new_tokens}"


# What each size runs: the GPU suite at the lengths a user meets (one
# decode token, a short and a long prompt); the CPU check at a length that is
# no tile multiple, and short generations whose decode steps are the
# one-token forwards.
GPU_ROWS = (RowSpec(FORWARD, 1), RowSpec(FORWARD, 64), RowSpec(FORWARD, 512),
            RowSpec(GENERATE, 16, STATIC, 32), RowSpec(GENERATE, 16, DYNAMIC, 32))
CPU_ROWS = (RowSpec(FORWARD, 17), RowSpec(GENERATE, 8, STATIC, 4),
            RowSpec(GENERATE, 8, DYNAMIC, 4))
# A decoder's training step on the GPU, (batch, tokens): enough tokens that
# the step's matmuls are a training step's, not a decode's; on the CPU two
# sequences of a length that is no tile multiple.
GPU_TRAINING_SHAPE = (4, 256)
CPU_TRAINING_SHAPE = (2, 17)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    title: str
    decoder: bool  # causal LM: has generate rows
    make_config: Callable[[str], object]  # size -> a transformers config
    model_class: str  # the transformers class built from it
    gpu_only: bool = False  # too large for the CPU executor
    # (batch, tokens) of the GPU training rows, when not GPU_TRAINING_SHAPE.
    training_shape: tuple[int, int] | None = None

    def rows(self, size: str, kinds: tuple[str, ...] = KINDS) -> tuple[RowSpec, ...]:
        """The rows of this model at `size`, of the `kinds` asked for:
        forward for every model; generate, train and lora for decoders."""
        rows = GPU_ROWS if size == GPU else CPU_ROWS
        if self.decoder:
            batch, tokens = (CPU_TRAINING_SHAPE if size == CPU else
                             self.training_shape or GPU_TRAINING_SHAPE)
            rows += tuple(RowSpec(kind, tokens, batch=batch) for kind in TRAINING_KINDS)
        return tuple(r for r in rows if (self.decoder or r.kind == FORWARD) and r.kind in kinds)

    def build(self, size: str, seed: int = 0):
        """The model at `size` in f32 and eval mode, its weights drawn from
        `seed`."""
        import torch
        import transformers

        config = self.make_config(size)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = getattr(transformers, self.model_class)(config)
        model.eval()
        if self.decoder and getattr(model, "loss_type", "") is None:
            # transformers picks the loss by the class's name, and where that
            # names none (GPT2LMHeadModel) logs a warning from the training
            # step's forward, where Dynamo breaks the graph for every backend
            # (8 frames compiled): the causal LM's loss, named.
            model.loss_type = "ForCausalLM"
        if self.decoder:
            # Exactly `new_tokens` new tokens: random weights may well
            # produce the end-of-sequence token early.
            model.generation_config.eos_token_id = None
            model.generation_config.pad_token_id = 0
        return model


def _decoder_sizes(size: str) -> dict:
    """The sizes every small decoder shares: grouped-query attention with
    two query heads per KV head, an intermediate size that is no power of
    two."""
    if size == GPU:
        return dict(vocab_size=2048, hidden_size=512, intermediate_size=1376,
                    num_hidden_layers=2, num_attention_heads=8, head_dim=64,
                    num_key_value_heads=4, max_position_embeddings=1024)
    return dict(vocab_size=256, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                num_attention_heads=4, head_dim=32, num_key_value_heads=2,
                max_position_embeddings=128)


def _config(class_name: str, **extra) -> Callable[[str], object]:
    def make(size: str):
        import transformers

        sizes = _decoder_sizes(size)
        return getattr(transformers, class_name)(**{**sizes, **extra})
    return make


def _gemma2(size: str):
    import transformers

    sizes = _decoder_sizes(size)
    # Gemma2 scales queries by this rather than by head_dim; its sliding
    # window is shorter than the longest prompt, so that the local layers'
    # mask differs from the global ones'.
    window = 256 if size == GPU else 16
    return transformers.Gemma2Config(**sizes, query_pre_attn_scalar=sizes["head_dim"],
                                     sliding_window=window, pad_token_id=0)


def _phi3(size: str):
    import transformers

    sizes = _decoder_sizes(size)
    sizes.pop("head_dim")  # Phi-3 derives it: hidden / heads
    # Its default special tokens (32000 and up) lie outside a small vocabulary.
    return transformers.Phi3Config(**sizes, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def _gpt2(size: str):
    import transformers

    # Its default special tokens (50256) lie outside a small vocabulary.
    tokens = dict(bos_token_id=1, eos_token_id=2)
    if size == GPU:
        return transformers.GPT2Config(vocab_size=2048, n_positions=1024, n_embd=512, n_layer=2,
                                       n_head=8, **tokens)
    return transformers.GPT2Config(vocab_size=256, n_positions=128, n_embd=128, n_layer=2,
                                   n_head=4, **tokens)


def _bert(size: str):
    import transformers

    if size == GPU:
        return transformers.BertConfig(vocab_size=2048, hidden_size=512, num_hidden_layers=2,
                                       num_attention_heads=8, intermediate_size=1376,
                                       max_position_embeddings=512)
    return transformers.BertConfig(vocab_size=256, hidden_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=344,
                                   max_position_embeddings=128)


def _llama3_8b_layers(size: str):
    import transformers

    return transformers.LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                                    num_hidden_layers=4, num_attention_heads=32,
                                    num_key_value_heads=8, max_position_embeddings=1024,
                                    rope_theta=500000.0)


CATALOGUE: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec("llama", "Llama", True, _config("LlamaConfig"), "LlamaForCausalLM"),
    ModelSpec("mistral", "Mistral", True, _config("MistralConfig"), "MistralForCausalLM"),
    ModelSpec("qwen2", "Qwen2", True, _config("Qwen2Config"), "Qwen2ForCausalLM"),
    ModelSpec("qwen3", "Qwen3 (per-head RMSNorm of Q and K)", True, _config("Qwen3Config"),
              "Qwen3ForCausalLM"),
    ModelSpec("gemma2", "Gemma2 (soft-capping, sliding window)", True, _gemma2,
              "Gemma2ForCausalLM"),
    ModelSpec("phi3", "Phi-3 (fused QKV and gate-up projections)", True, _phi3,
              "Phi3ForCausalLM"),
    ModelSpec("gpt2", "GPT-2 (LayerNorm, GELU, Conv1D projections)", True, _gpt2,
              "GPT2LMHeadModel"),
    ModelSpec("bert", "BERT (encoder, masked LM head)", False, _bert, "BertForMaskedLM"),
    # Its training step at the batch and length of the prefill row.
    ModelSpec("llama3-8b-layers", "Llama-3-8B layer shapes, 4 layers", True, _llama3_8b_layers,
              "LlamaForCausalLM", gpu_only=True, training_shape=(1, 512)),
)}


def select_kinds(names: list[str] | None) -> tuple[str, ...]:
    """The row kinds named (all by default); an unknown one is a KgcError
    naming it."""
    from kgc.diagnostics import KgcError

    if names is None:
        return KINDS
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        raise KgcError(f"unknown row kind(s) {', '.join(unknown)}; rows are of the kinds "
                       f"{', '.join(KINDS)}")
    return tuple(kind for kind in KINDS if kind in names)


def select(names: list[str] | None, size: str = GPU) -> list[ModelSpec]:
    """The models named (all by default; on the CPU, all but the GPU-only
    ones), in catalogue order; an unknown name or a GPU-only model on the
    CPU is a KgcError naming it."""
    from kgc.diagnostics import KgcError

    if names is None:
        return [spec for spec in CATALOGUE.values() if size == GPU or not spec.gpu_only]
    unknown = [name for name in names if name not in CATALOGUE]
    if unknown:
        raise KgcError(f"unknown model(s) {', '.join(unknown)}; the suite has "
                       f"{', '.join(CATALOGUE)}")
    if size == CPU:
        too_large = [name for name in names if CATALOGUE[name].gpu_only]
        if too_large:
            raise KgcError(f"model(s) {', '.join(too_large)} run on a GPU only (too large for "
                           "the CPU executor)")
    return [CATALOGUE[name] for name in dict.fromkeys(names)]
