"""Transformer blocks: the position-wise MLP and the encoder and decoder layers with residuals.

Each sub-layer is wrapped as ``LayerNorm(x + Dropout(sublayer(x)))`` (post-norm, Vaswani et al.,
"Attention Is All You Need", NeurIPS 2017, Sec. 5.4) or ``x + Dropout(sublayer(LayerNorm(x)))``
(pre-norm, Xiong et al., "On Layer Normalization in the Transformer Architecture", ICML 2020).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.models.config import EncoderConfig, TransformerConfig
from rfa.models.site import Site

Array = jax.Array


def attention_site(config: EncoderConfig, attention: Site, *, causal: bool, cross: bool, rngs: nnx.Rngs):
    """The layer of one site: its kind's (:mod:`rfa.layers.kinds`), built from what the site reads of the model.

    Example:
      >>> config = rfa.models.preset("tiny", vocab_size=50)
      >>> type(attention_site(config, Site("deltanet"), causal=True, cross=False, rngs=nnx.Rngs(0))).__name__
      'DeltaRuleCore'
    """
    widths = config.at_site(attention)
    return attention.entry.layer(widths, attention.options, causal=causal, cross=cross, rngs=rngs)


class MLP(nnx.Module):
    """``W₂ act(W₁ x + b₁) + b₂`` with ReLU (paper) or GELU."""

    def __init__(self, config: EncoderConfig, *, rngs: nnx.Rngs):
        dtype = jnp.dtype(config.dtype)
        self.hidden = nnx.Linear(config.d_model, config.mlp_dim, dtype=dtype, rngs=rngs)
        self.output = nnx.Linear(config.mlp_dim, config.d_model, dtype=dtype, rngs=rngs)
        self.activation = jax.nn.relu if config.activation == "relu" else jax.nn.gelu

    def __call__(self, x: Array) -> Array:
        return self.output(self.activation(self.hidden(x)))


class Residual(nnx.Module):
    """A sub-layer with its residual connection, LayerNorm (post or pre) and dropout."""

    def __init__(self, config: EncoderConfig, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(config.d_model, dtype=jnp.dtype(config.dtype), rngs=rngs)
        self.dropout = nnx.Dropout(config.dropout_rate, rngs=rngs)
        self.pre_norm = config.norm == "pre"

    def __call__(self, x: Array, sublayer: Callable[[Array], Array]) -> Array:
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nnx.Module):
    """Self-attention (bidirectional) then the MLP."""

    def __init__(self, config: EncoderConfig, *, layer: int = 0, rngs: nnx.Rngs):
        attention = config.layer_attention("encoder_attention", layer)
        self.attention = attention_site(config, attention, causal=False, cross=False, rngs=rngs)
        self.mlp = MLP(config, rngs=rngs)
        self.attention_residual = Residual(config, rngs=rngs)
        self.mlp_residual = Residual(config, rngs=rngs)

    def __call__(self, x: Array, *, key_mask: Array, positions: Array) -> Array:
        x = self.attention_residual(
            x, lambda h: self.attention(h, key_mask=key_mask, q_positions=positions, k_positions=positions)
        )
        return self.mlp_residual(x, self.mlp)


class DecoderLayer(nnx.Module):
    """Masked self-attention, cross-attention to the encoder output (if ``cross``), then the MLP."""

    def __init__(self, config: TransformerConfig, *, cross: bool, layer: int = 0, rngs: nnx.Rngs):
        own = config.layer_attention("decoder_attention", layer)
        self.self_attention = attention_site(config, own, causal=True, cross=False, rngs=rngs)
        self.self_residual = Residual(config, rngs=rngs)
        memory = config.layer_attention("cross_attention", layer)
        self.cross_attention = attention_site(config, memory, causal=False, cross=True, rngs=rngs) if cross else None
        self.cross_residual = Residual(config, rngs=rngs) if cross else None
        self.mlp = MLP(config, rngs=rngs)
        self.mlp_residual = Residual(config, rngs=rngs)

    def __call__(
        self, x, *, key_mask, positions, segment_ids=None, memory=None, memory_mask=None, memory_positions=None
    ) -> Array:
        return self._sublayers(
            x,
            lambda h: self.self_attention(
                h, key_mask=key_mask, q_positions=positions, k_positions=positions, segment_ids=segment_ids
            ),
            lambda h: self.cross_attention(
                h, memory, key_mask=memory_mask, q_positions=positions, k_positions=memory_positions
            ),
        )

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int) -> tuple[Array, dict]:
        """The layer over a whole prompt ``x [batch, P, d_model]`` (no cross-attention): ``(y, cache)``.

        The self-attention cache holds the prompt (the site's ``prefill``,
        :meth:`rfa.models.AttentionSite.prefill`), for :meth:`decode_step` to continue from position P.
        """
        cache = {}

        def self_attention(h):
            out, cache["self"] = self.self_attention.prefill(
                h, key_mask=key_mask, positions=positions, max_length=max_length
            )
            return out

        return self._sublayers(x, self_attention, None), cache

    def decode_step(self, x: Array, cache: dict, position: Array, keep: Array, memory=None):
        """One token ``x [batch, d_model]``: ``(y, cache)``; ``memory`` from ``prepare_memory``."""
        new_cache = {}

        def self_attention(h):
            out, new_cache["self"] = self.self_attention.decode_step(h, cache["self"], position, keep)
            return out

        y = self._sublayers(x, self_attention, lambda h: self.cross_attention.attend_memory(h, memory, position))
        return y, new_cache

    def _sublayers(self, x: Array, self_attention: Callable, cross_attention: Callable | None) -> Array:
        """Self-attention, cross-attention (in a layer that has it) and the MLP, each with its residual."""
        x = self.self_residual(x, self_attention)
        if self.cross_attention is not None:
            x = self.cross_residual(x, cross_attention)
        return self.mlp_residual(x, self.mlp)
