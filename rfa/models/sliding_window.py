"""Sliding-window softmax attention as an attention core of rfa's models (kind ``"sliding_window"``).

The window w is ``AttentionConfig.num_features`` (what the kind's state grows with, as m for random features):
a causal query attends to itself and the w − 1 tokens before it, a bidirectional one to ``|i − j| < w``
(:func:`rfa.attention.sliding_window_attention`, O(L·w)). Decoding keeps the last w keys and values in a ring
of w slots (token t in slot ``t mod w``, which overwrites token t − w, the one that just left the window), so the
cache never grows and every filled slot is inside the window; with ``max_length < w`` the ring has
``max_length`` slots and never wraps.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.attention.exact import softmax_attention
from rfa.attention.sliding_window import sliding_window_attention

Array = jax.Array


class SlidingWindowCore(nnx.Module):
    """Exact attention within a window of ``AttentionConfig.num_features`` tokens; see the module's docstring."""

    causal, bidirectional, cross, dense_masks, uses_num_features = True, True, False, False, True
    takes_qk_map = False

    def __init__(self, config, attention, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        del cross, rngs  # self-attention only (check_site); no parameters
        self.causal, self.window, self.dtype = causal, attention.num_features, jnp.dtype(config.dtype)
        self.num_heads, self.head_dim = config.num_heads, config.head_dim

    @staticmethod
    def check_site(site: str, attention, config, *, causal: bool, stateful: bool) -> None:
        """A window is a span of one sequence's positions: self-attention, no gate, no relative bias or split."""
        if site == "cross_attention":
            raise ValueError(f"{site}: a sliding window spans positions of one sequence; cross-attention has two.")
        if attention.gated:
            raise ValueError(f"{site}: gated=True decays a kernelized state; 'sliding_window' has none.")
        if config.positional == "relative" or config.sequence_axis is not None:
            raise ValueError(
                f"{site}: 'sliding_window' takes no relative bias and does not run sequence-parallel; use rotary or "
                "absolute positions, and no sequence_axis."
            )

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions) -> Array:
        return sliding_window_attention(
            q, k, v, window=self.window, is_causal=self.causal, mask=key_mask[:, None, None, :]
        )

    def init_cache(self, batch: int, max_length: int) -> dict:
        """``min(w, max_length)`` empty slots: the cache does not grow, and a window longer than the sequences
        needs no more slots than they have tokens."""
        slots = min(self.window, max_length)
        shape = (batch, slots, self.num_heads, self.head_dim)
        return {
            "k": jnp.zeros(shape, self.dtype),
            "v": jnp.zeros(shape, self.dtype),
            "keep": jnp.zeros((batch, slots), jnp.bool_),
        }

    def prefill(self, q, k, v, x, *, key_mask, positions, max_length):
        """The prompt's outputs, and its last w tokens in their slots."""
        out = self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions)
        cache = self.init_cache(q.shape[0], max_length)
        ring = cache["keep"].shape[1]
        last = min(ring, q.shape[1])
        slots = positions[:, -last:] % ring  # [batch, last]
        rows = jnp.arange(q.shape[0])[:, None]
        cache = {
            "k": cache["k"].at[rows, slots].set(k[:, -last:].astype(self.dtype)),
            "v": cache["v"].at[rows, slots].set(v[:, -last:].astype(self.dtype)),
            "keep": cache["keep"].at[rows, slots].set(key_mask[:, -last:]),
        }
        return out, cache

    def decode(self, q, k, v, x, cache, *, position, keep):
        """One token: written to slot ``position mod w`` (over the token that left the window), then attends to
        every filled slot."""
        slot = position % cache["keep"].shape[1]
        cache = {
            "k": jax.lax.dynamic_update_slice_in_dim(cache["k"], k.astype(self.dtype), slot, axis=1),
            "v": jax.lax.dynamic_update_slice_in_dim(cache["v"], v.astype(self.dtype), slot, axis=1),
            "keep": jax.lax.dynamic_update_slice_in_dim(cache["keep"], keep[:, None], slot, axis=1),
        }
        out = softmax_attention(
            q, cache["k"].astype(q.dtype), cache["v"].astype(q.dtype), mask=cache["keep"][:, None, None, :]
        )
        return out[:, 0], cache
