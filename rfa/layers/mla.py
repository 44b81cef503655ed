"""Multi-head latent attention (DeepSeek-AI, "DeepSeek-V2", 2024), the kind ``"mla"``: keys and values from one
compressed latent per token, which is what the decoding cache keeps.

Per token ``x``: the latent ``c = RMSNorm(W_kv_a x)[:r]`` (``r = kv_lora_rank``) and a key part ``k_R = (W_kv_a x)[r:]``
shared by every head; per head the key ``[W_kv_b c |_nope, k_R]`` and the value ``W_kv_b c |_v``; the query ``W_q x``
(or ``W_q_b RMSNorm(W_q_a x)`` with ``q_lora_rank``), ``qk_nope_head_dim + qk_rope_head_dim`` wide. Softmax attention
over them, scaled by that width's root, then the output projection. Kimi Linear's full-attention layers are MLA
without rotary positions (its "NoPE": the shared key part is not rotated), which is what this layer computes; a
decoding step writes the token's latent and shared key part (``r + qk_rope_head_dim`` numbers, whatever the heads)
and expands the cached latents to keys and values.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.attention.segments import same_sequence
from rfa.layers.kinds import AttentionKind, KindOptions, SiteWidths, check_int, register_attention_kind
from rfa.layers.norms import RMSNorm
from rfa.layers.softmax import attend_one, check_slot, softmax_attention

Array = jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class MLAOptions(KindOptions):
    """Multi-head latent attention's options (Hugging Face's DeepSeek-V2 / Kimi Linear names).

    Attributes:
      kv_lora_rank: the latent's width ``r``.
      q_lora_rank: the queries' low-rank width (None: a full query projection).
      qk_nope_head_dim: a key's per-head part; ``qk_rope_head_dim``: its part shared by the heads.
      v_head_dim: a value's width.
      norm_eps: ε of the latents' RMSNorms.

    Example:
      >>> MLAOptions(num_heads=4, kv_lora_rank=16).v_head_dim
      128
    """

    kv_lora_rank: int = 512
    q_lora_rank: int | None = None
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    norm_eps: float = 1e-6

    def __post_init__(self):
        super().__post_init__()
        for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            check_int(self, name)
        check_int(self, "q_lora_rank", optional=True)


class LatentAttention(nnx.Module):
    """Causal multi-head latent attention ``[batch, length, d_model] -> [batch, length, d_model]``, with the site
    interface of :class:`rfa.layers.multi_head.AttentionSite` (``prefill``, ``decode_step``)."""

    def __init__(self, widths: SiteWidths, options: MLAOptions, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        del cross  # self-attention only (the kind's)
        d, h, o = widths.d_model, options.num_heads or widths.num_heads, options
        dtype = jnp.dtype(widths.dtype)
        linear = {"use_bias": False, "dtype": dtype, "rngs": rngs}
        qk = o.qk_nope_head_dim + o.qk_rope_head_dim
        if o.q_lora_rank is None:
            self.q_a, self.q_a_norm = None, None
            self.query = nnx.LinearGeneral(d, (h, qk), **linear)
        else:
            self.q_a = nnx.Linear(d, o.q_lora_rank, **linear)
            self.q_a_norm = RMSNorm(o.q_lora_rank, eps=o.norm_eps)
            self.query = nnx.LinearGeneral(o.q_lora_rank, (h, qk), **linear)
        self.kv_a = nnx.Linear(d, o.kv_lora_rank + o.qk_rope_head_dim, **linear)
        self.kv_a_norm = RMSNorm(o.kv_lora_rank, eps=o.norm_eps)
        self.kv_b = nnx.LinearGeneral(o.kv_lora_rank, (h, o.qk_nope_head_dim + o.v_head_dim), **linear)
        self.out = nnx.LinearGeneral((h, o.v_head_dim), d, axis=(-2, -1), **linear)
        self.options, self.causal, self.dtype = o, causal, dtype

    def _queries(self, x: Array) -> Array:
        return self.query(x if self.q_a is None else self.q_a_norm(self.q_a(x)))

    def _latents(self, x: Array) -> tuple[Array, Array]:
        """``(c [..., r], k_R [..., qk_rope_head_dim])`` of each token: what the cache keeps."""
        compressed = self.kv_a(x)
        r = self.options.kv_lora_rank
        return self.kv_a_norm(compressed[..., :r]), compressed[..., r:]

    def _keys_values(self, latent: Array, shared: Array) -> tuple[Array, Array]:
        kv = self.kv_b(latent)  # [batch, length, heads, nope + v]
        nope = self.options.qk_nope_head_dim
        shared = jnp.broadcast_to(shared[..., None, :], kv.shape[:-1] + shared.shape[-1:])
        return jnp.concatenate([kv[..., :nope], shared.astype(kv.dtype)], axis=-1), kv[..., nope:]

    def __call__(
        self, x: Array, memory=None, *, key_mask: Array, q_positions: Array, k_positions: Array, segment_ids=None
    ) -> Array:
        del memory
        k, v = self._keys_values(*self._latents(x))
        mask = key_mask[:, None, None, :]
        if self.causal:
            mask = mask & (k_positions[:, None, None, :] <= q_positions[:, None, :, None])
        if segment_ids is not None:  # packed sequences
            mask = mask & same_sequence(segment_ids)
        return self.out(softmax_attention(self._queries(x), k, v, mask=mask).astype(x.dtype))

    def init_cache(self, batch: int, max_length: int) -> dict:
        o = self.options
        return {
            "latent": jnp.zeros((batch, max_length, o.kv_lora_rank), self.dtype),
            "shared": jnp.zeros((batch, max_length, o.qk_rope_head_dim), self.dtype),
            "mask": jnp.zeros((batch, max_length), jnp.bool_),
        }

    def _write(self, cache: dict, start, latent: Array, shared: Array, keep: Array) -> dict:
        update = jax.lax.dynamic_update_slice_in_dim
        return {
            "latent": update(cache["latent"], latent.astype(self.dtype), start, axis=1),
            "shared": update(cache["shared"], shared.astype(self.dtype), start, axis=1),
            "mask": update(cache["mask"], keep, start, axis=1),
        }

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int):
        out = self(x, key_mask=key_mask, q_positions=positions, k_positions=positions)
        return out, self._write(self.init_cache(x.shape[0], max_length), 0, *self._latents(x), key_mask)

    def decode_step(self, x: Array, cache: dict, position: Array, keep: Array):
        check_slot(position, cache["mask"].shape[1], "the cache's slots")
        cache = self._write(cache, position, *(a[:, None] for a in self._latents(x)), keep[:, None])
        k, v = self._keys_values(cache["latent"], cache["shared"])
        slots = jnp.arange(cache["mask"].shape[1])
        mask = cache["mask"] & (slots <= position)[None]
        out = attend_one(self._queries(x), k, v, mask, None).astype(x.dtype)
        return self.out(out), cache


register_attention_kind(
    AttentionKind(
        "mla",
        MLAOptions,
        LatentAttention,
        causal=True,
        bidirectional=True,
        cross=False,
        cache="length",
        summary="multi-head latent attention (DeepSeek-V2, 2024; Kimi Linear's, without rotary positions): a "
        "compressed cache",
    )
)
