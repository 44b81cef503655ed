"""The decoder of Llama-style causal language models, whose pretrained families (:mod:`rfa.models.qwen3`,
:mod:`rfa.models.qwen3_5`) are its configs: token embedding, then per layer ``x + Mixer(RMSNorm(x))`` and
``x + MLP(RMSNorm(x))``, a final RMSNorm and the output projection (or the embedding's transpose).

Each layer's token mixer is a :class:`~rfa.models.Site` (any registered kind: softmax with grouped-query heads and
rotary positions, Gated DeltaNet, kernelized attention, ...), so a hybrid stack is a tuple of sites; the MLP is
SwiGLU (:class:`~rfa.layers.GatedMLP`), or a mixture of experts at the sparse layers
(:class:`~rfa.layers.moe.MixtureOfExperts`); the norms are plain or zero-centered (:class:`~rfa.layers.RMSNorm`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import at_least_float32
from rfa._validation import InputError, InputTypeError
from rfa.layers.gated_mlp import ACTIVATIONS, GatedMLP
from rfa.layers.kinds import SiteWidths, check_int
from rfa.layers.moe import ExpertsOptions, MixtureOfExperts
from rfa.layers.norms import RMSNorm
from rfa.models.config import DTYPES
from rfa.models.site import Site
from rfa.models.transformer import check_key_mask, check_packing, check_prompt_end, check_step, check_tokens

Array = jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class CausalLMConfig:
    """The decoder's widths and layers; a family's config gives it (its ``lm``).

    Attributes:
      vocab_size, d_model, mlp_dim: widths.
      sites: each layer's token mixer, its options complete (its heads set: ``num_heads``).
      experts: the sparse layers' mixture of experts (:class:`~rfa.layers.moe.ExpertsOptions`), at the layers
        ``sparse_layers`` names; the other layers' MLP is dense, ``mlp_dim`` wide.
      norm_eps: ε of the layers' and the final RMSNorms; ``zero_centered_norms``: they scale by ``1 + w``.
      tie_embeddings: the output projection is the embedding's transpose.
      activation: the MLP's (:data:`rfa.layers.gated_mlp.ACTIVATIONS`).
      max_length: the longest sequence (and decoding cache).
      pad_id: the padding token (left-padded prompts are masked where they hold it); None: no padding.
      dtype: the computation's dtype; parameters are float32.
    """

    vocab_size: int
    d_model: int
    mlp_dim: int
    sites: tuple[Site, ...]
    experts: ExpertsOptions | None = None
    sparse_layers: tuple[int, ...] = ()
    norm_eps: float = 1e-6
    zero_centered_norms: bool = False
    tie_embeddings: bool = False
    activation: str = "silu"
    max_length: int = 4096
    pad_id: int | None = None
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "mlp_dim", "max_length"):
            check_int(self, name)
        if not self.sites or not all(isinstance(site, Site) for site in self.sites):
            raise InputTypeError(f"sites must be a non-empty tuple of rfa.models.Site, got {self.sites!r}.")
        if self.experts is not None and not isinstance(self.experts, ExpertsOptions):
            raise InputTypeError(f"experts must be an ExpertsOptions or None, got {self.experts!r}.")
        if set(self.sparse_layers) - set(range(len(self.sites))) or (self.sparse_layers and self.experts is None):
            raise InputError(
                f"sparse_layers must name layers of [0, {len(self.sites)}) and come with experts, got "
                f"{self.sparse_layers} and {self.experts}."
            )
        if self.activation not in ACTIVATIONS:
            raise InputError(f"activation must be one of {list(ACTIVATIONS)}, got {self.activation!r}.")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}.")
        if self.pad_id is not None and not 0 <= self.pad_id < self.vocab_size:
            raise InputError(f"pad_id must be None or a token of [0, {self.vocab_size}), got {self.pad_id}.")
        for i, site in enumerate(self.sites):
            if site.options.num_heads is None:
                raise InputError(f"layer {i}: the site's kind {site.kind!r} must set its num_heads.")
            if not site.entry.runs("causal"):
                raise InputError(f"layer {i}: kind {site.kind!r} cannot run causal attention.")
            site.options.check_site(f"layer {i}", self.widths(site), causal=True, stateful=True)

    @property
    def output_vocab_size(self) -> int:
        return self.vocab_size

    def widths(self, site: Site) -> SiteWidths:
        """What the layer of ``site`` reads of the model."""
        return SiteWidths(
            d_model=self.d_model,
            num_heads=site.options.num_heads,
            dtype=self.dtype,
            positional="rotary",
            max_length=self.max_length,
        )


class CausalLMLayer(nnx.Module):
    """``x + Mixer(RMSNorm(x))``, then ``x + MLP(RMSNorm(x))``."""

    def __init__(self, config: CausalLMConfig, layer: int, *, rngs: nnx.Rngs):
        norm = {"eps": config.norm_eps, "zero_centered": config.zero_centered_norms}
        site = config.sites[layer]
        self.input_norm = RMSNorm(config.d_model, **norm)
        self.attention = site.entry.layer(config.widths(site), site.options, causal=True, cross=False, rngs=rngs)
        self.post_attention_norm = RMSNorm(config.d_model, **norm)
        mlp = {"activation": config.activation, "dtype": jnp.dtype(config.dtype), "rngs": rngs}
        self.mlp = (
            MixtureOfExperts(config.d_model, config.experts, **mlp)
            if layer in config.sparse_layers
            else GatedMLP(config.d_model, config.mlp_dim, **mlp)
        )

    def __call__(self, x: Array, *, key_mask: Array, positions: Array, segment_ids: Array | None = None) -> Array:
        h = self.attention(
            self.input_norm(x), key_mask=key_mask, q_positions=positions, k_positions=positions, segment_ids=segment_ids
        )
        return self._mlp(x + h)

    def _mlp(self, x: Array) -> Array:
        return x + self.mlp(self.post_attention_norm(x))

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int):
        h = self.input_norm(x)
        h, cache = self.attention.prefill(h, key_mask=key_mask, positions=positions, max_length=max_length)
        return self._mlp(x + h), cache

    def decode_step(self, x: Array, cache, position: Array, keep: Array):
        h, cache = self.attention.decode_step(self.input_norm(x), cache, position, keep)
        return self._mlp(x + h), cache


class CausalLM(nnx.Module):
    """``tokens [batch, length] -> logits [batch, length, vocab]`` (float32 at least), of a family's ``config``
    (whose ``lm`` is a :class:`CausalLMConfig`; ``model.config`` stays the family's).

    Example:
      >>> from rfa.models.qwen3 import Qwen3Config
      >>> config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
      ...                      num_attention_heads=4, num_key_value_heads=2, head_dim=16)
      >>> model = CausalLM(config, rngs=nnx.Rngs(0))
      >>> model(jnp.array([[5, 6, 7]])).shape
      (1, 3, 64)
      >>> tokens, _ = rfa.models.decoding.generate(model, jnp.array([[5, 6, 7]]), max_new_tokens=4)
      >>> tokens.shape
      (1, 4)
    """

    def __init__(self, config, *, rngs: nnx.Rngs):
        lm = getattr(config, "lm", None)
        if not isinstance(lm, CausalLMConfig):
            raise InputTypeError(
                f"CausalLM takes a family's config (its lm a CausalLMConfig), got {type(config).__name__}."
            )
        self.config, self.lm = config, lm
        dtype = jnp.dtype(lm.dtype)
        self.embed = nnx.Embed(lm.vocab_size, lm.d_model, dtype=dtype, rngs=rngs)
        self.layers = nnx.List([CausalLMLayer(lm, i, rngs=rngs) for i in range(len(lm.sites))])
        self.norm = RMSNorm(lm.d_model, eps=lm.norm_eps, zero_centered=lm.zero_centered_norms)
        self.lm_head = (
            None if lm.tie_embeddings else nnx.Linear(lm.d_model, lm.vocab_size, use_bias=False, dtype=dtype, rngs=rngs)
        )

    def _logits(self, x: Array) -> Array:
        x = self.norm(x)
        return at_least_float32(self.embed.attend(x) if self.lm_head is None else self.lm_head(x))

    def _key_mask(self, tokens: Array) -> Array:
        pad = self.lm.pad_id
        return jnp.ones(tokens.shape, jnp.bool_) if pad is None else tokens != pad

    def __call__(self, tokens: Array, *, key_mask: Array | None = None, segment_ids: Array | None = None) -> Array:
        """Logits of every position.

        Args:
          tokens: ``[batch, length]`` ids of ``[0, vocab_size)`` (checked under ``jit`` too).
          key_mask: ``[batch, length]`` bools, True at a token (default: the tokens other than the padding token).
            Positions count slots, so a left-padded row's are shifted by its padding: rotary positions enter
            attention only through their differences, so its outputs are those of the row alone.
          segment_ids: ``[batch, length]`` integers: several sequences packed in a row (Flax's convention), each
            computed as if alone (the linear layers' states and convolutions restart at each); None: one sequence
            per row.
        """
        tokens = check_tokens(tokens, "tokens", self.lm.vocab_size, self.lm.max_length)
        key_mask = self._key_mask(tokens) if key_mask is None else check_key_mask(key_mask, tokens)
        segment_ids, positions = check_packing(segment_ids, tokens)
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x, key_mask=key_mask, positions=positions, segment_ids=segment_ids)
        return self._logits(x)

    def prefill(self, prompt: Array, max_length: int | None = None) -> tuple[Array, list]:
        """The logits after ``prompt [batch, P]`` (left-padded with the padding token) and every layer's cache for
        ``max_length`` slots (default: the model's ``max_length``), from one parallel pass."""
        prompt = check_tokens(prompt, "prompt", self.lm.vocab_size, self.lm.max_length)
        length = self.lm.max_length if max_length is None else max_length
        if not prompt.shape[1] <= length <= self.lm.max_length:
            raise InputError(
                f"cache length must be in [{prompt.shape[1]}, max_length = {self.lm.max_length}], got {length}."
            )
        if self.lm.pad_id is not None:
            check_prompt_end(prompt, self.lm.pad_id)
        positions = jnp.broadcast_to(jnp.arange(prompt.shape[1]), prompt.shape)
        x, caches, key_mask = self.embed(prompt), [], self._key_mask(prompt)
        for layer in self.layers:
            x, cache = layer.prefill(x, key_mask=key_mask, positions=positions, max_length=length)
            caches.append(cache)
        return self._logits(x[:, -1]), caches

    def decode_step(self, token: Array, cache: list, position: Array) -> tuple[Array, list]:
        """Logits ``[batch, vocab]`` after ``token [batch]`` at slot ``position``, and the caches (the token's ids
        and the position checked under ``jit`` too; :func:`rfa.models.decoding.generate`'s loop skips them)."""
        token = check_step(token, position, self.lm.vocab_size, self.lm.max_length)
        keep, x, new_caches = self._key_mask(token[:, None])[:, 0], self.embed(token), []
        for layer, layer_cache in zip(self.layers, cache, strict=True):
            x, layer_cache = layer.decode_step(x, layer_cache, position, keep)
            new_caches.append(layer_cache)
        return self._logits(x), new_caches
