"""Named :class:`~rfa.models.config.TransformerConfig` presets: the paper's base model, a tiny one for tests and
CPUs, and two hybrid stacks of current models at the tiny widths (Kimi Linear's, Qwen3-Next's)."""

from __future__ import annotations

from rfa._validation import InputError
from rfa.layers.kinds import register_variant
from rfa.models.config import TransformerConfig
from rfa.models.site import Site

PRESETS = {
    # For tests and quick experiments on a CPU.
    "tiny": dict(
        d_model=32,
        num_heads=4,
        mlp_dim=64,
        num_encoder_layers=2,
        num_decoder_layers=2,
        max_length=256,
        dropout_rate=0.0,
    ),
    # Kimi Linear's stack, scaled down to the tiny widths (Kimi Team, "Kimi Linear", arXiv 2510.26692, 2025): a
    # decoder of three Kimi Delta Attention layers to one exact; Kimi Linear's full attention is MLA, here softmax.
    "kimi_linear_tiny": dict(
        d_model=32,
        num_heads=4,
        mlp_dim=64,
        num_encoder_layers=0,
        num_decoder_layers=4,
        max_length=256,
        dropout_rate=0.0,
        decoder_attention=(Site("kda"),) * 3 + (Site(),),
    ),
    # Qwen3-Next's stack, scaled down to the tiny widths (Qwen Team, "Qwen3-Next", 2025): three Gated DeltaNet layers
    # with grouped value heads (2 query/key heads of 16, 4 value heads of 32) to one gated exact-attention layer with
    # grouped-query attention (4 query heads, 2 key/value heads, an output gate, rotary base 10⁷). Qwen3-Next's
    # exact layers rotate a quarter of each head and its MLPs are mixtures of experts; here every channel and a
    # dense MLP.
    "qwen3_next_tiny": dict(
        d_model=32,
        num_heads=4,
        mlp_dim=64,
        num_encoder_layers=0,
        num_decoder_layers=4,
        max_length=256,
        dropout_rate=0.0,
        norm="pre",
        positional="rotary",
        decoder_attention=(Site("gated_deltanet", num_heads=2, head_dim=16, num_v_heads=4, expand_v=2.0),) * 3
        + (Site(num_heads=4, num_kv_heads=2, output_gate=True, rope_base=1e7),),
    ),
    # "Attention Is All You Need", Table 3, base model.
    "base": dict(d_model=512, num_heads=8, mlp_dim=2048, num_encoder_layers=6, num_decoder_layers=6, dropout_rate=0.1),
}


# Hybrid stacks a training config selects by name (config.attention.layers: a variant per layer, cycled; a pattern
# longer than the stack is refused). Qwen3-Next puts one softmax layer after three Gated DeltaNet layers; the tasks'
# 2-layer models take 1:1. Kimi Linear's stack: three KDA layers to one exact (with 4 decoder layers). Based: Taylor
# features beside a sliding window (Arora et al., "Simple linear attention language models balance the recall-
# throughput tradeoff", ICML 2024).
register_variant("hybrid_gated_deltanet", layers=("gated_deltanet", "exact"))
register_variant("hybrid_kda", layers=("kda", "kda", "kda", "exact"))
register_variant("based", layers=("taylor", "sliding_window"))


def preset(name: str, **overrides) -> TransformerConfig:
    """A :class:`TransformerConfig` from a named preset (``"tiny"``, ``"kimi_linear_tiny"``, ``"qwen3_next_tiny"``,
    ``"base"``) with field overrides.

    Example:
      >>> config = rfa.models.preset("tiny", vocab_size=100, decoder_attention=Site("positive", num_features=64))
    """
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; presets: {sorted(PRESETS)}.")
    return TransformerConfig(**{**PRESETS[name], **overrides})
