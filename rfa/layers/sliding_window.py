"""Sliding-window softmax attention between a site's projections (the kind ``"sliding_window"``).

The window w is :attr:`SlidingWindowOptions.window` (what the kind's cache holds, as m for random features):
a causal query attends to itself and the w − 1 tokens before it, a bidirectional one to ``|i − j| < w``
(:func:`rfa.attention.sliding_window_attention`, O(L·w)), counted over each row's kept tokens (padding, wherever
it sits, is left out before the window is laid). Decoding keeps the last w keys and values in a ring
of w slots (a row's n-th kept token in slot ``n mod w``, which overwrites kept token n − w, the one that just left
the window), so the cache never grows and every filled slot is inside the window; with ``max_length < w`` the ring
has ``max_length`` slots and never wraps. Padding takes no slot, wherever it sits: a right-padded prompt, then
decoding, equals the unpadded prompt, then decoding.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.attention.exact import softmax_attention
from rfa.attention.sliding_window import sliding_window_attention
from rfa.layers.kinds import AttentionKind, SiteWidths, check_int, register_attention_kind
from rfa.layers.multi_head import HeadsOptions, projected

Array = jax.Array


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlidingWindowOptions(HeadsOptions):
    """The sliding window's options: the heads' and the window.

    Attributes:
      window: w, the tokens a causal query sees (itself included); a bidirectional one sees ``|i − j| < w``.

    Example:
      >>> SlidingWindowOptions(window=16).size()
      16
    """

    SIZE = "window"

    window: int = 64

    def __post_init__(self):
        super().__post_init__()
        check_int(self, "window")

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        """A window is a span of one sequence's positions: no relative bias, no split of the sequence."""
        super().check_site(site, widths, causal=causal, stateful=stateful)
        if widths.positional == "relative" or widths.sequence_axis is not None:
            raise InputError(
                f"{site}: 'sliding_window' takes no relative bias and does not run sequence-parallel; use rotary or "
                "absolute positions, and no sequence_axis."
            )


class SlidingWindowCore(nnx.Module):
    """Exact attention within a window of :attr:`SlidingWindowOptions.window` tokens; see the module's docstring."""

    def __init__(self, widths: SiteWidths, options: SlidingWindowOptions, *, causal: bool, cross: bool, rngs):
        del cross, rngs  # self-attention only (the kind's cross is False); no parameters
        self.causal, self.window, self.dtype = causal, options.window, jnp.dtype(widths.dtype)
        self.num_heads, self.head_dim = widths.num_heads, widths.head_dim

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions, segment_ids=None) -> Array:
        """The window over each row's kept tokens, as if its padding were not there (as the decode ring counts
        them): a query attends to the w kept tokens up to it (causal) or within w − 1 kept tokens of it, of its own
        sequence where ``segment_ids [batch, L]`` packs several."""
        order = jnp.argsort(~key_mask, axis=1, stable=True)  # each row's kept tokens first, in order
        kept = jnp.arange(key_mask.shape[1]) < jnp.sum(key_mask, axis=1, keepdims=True)
        q, k, v = (jnp.take_along_axis(y, order[..., None, None], axis=1) for y in (q, k, v))
        if segment_ids is not None:
            segment_ids = jnp.take_along_axis(segment_ids, order, axis=1)
        out = sliding_window_attention(
            q, k, v, window=self.window, is_causal=self.causal, mask=kept[:, None, None, :], segment_ids=segment_ids
        )
        return jnp.take_along_axis(out, jnp.argsort(order, axis=1)[..., None, None], axis=1)

    def init_cache(self, batch: int, max_length: int) -> dict:
        """``min(w, max_length)`` empty slots and each row's count of kept tokens: the cache does not grow, and a
        window longer than the sequences needs no more slots than they have tokens."""
        slots = min(self.window, max_length)
        shape = (batch, slots, self.num_heads, self.head_dim)
        return {
            "k": jnp.zeros(shape, self.dtype),
            "v": jnp.zeros(shape, self.dtype),
            "keep": jnp.zeros((batch, slots), jnp.bool_),
            "count": jnp.zeros((batch,), jnp.int32),
        }

    def prefill(self, q, k, v, x, *, key_mask, positions, max_length):
        """The prompt's outputs, and each row's last w kept tokens in their slots: the n-th kept token (from 0) in
        slot ``n mod w``, wherever the padding sits."""
        out = self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions)
        cache = self.init_cache(q.shape[0], max_length)
        ring = cache["keep"].shape[1]
        order = jnp.argsort(~key_mask, axis=1, stable=True)[..., None, None]  # each row's kept tokens first
        count = jnp.sum(key_mask, axis=1, dtype=jnp.int32)
        slots = jnp.arange(ring)
        latest = slots + ring * ((count[:, None] - 1 - slots) // ring)  # the last kept token n < count in each slot
        filled = latest >= 0
        index = jnp.clip(latest, 0, q.shape[1] - 1)[..., None, None]
        kept = {
            name: jnp.take_along_axis(jnp.take_along_axis(y, order, axis=1), index, axis=1).astype(self.dtype)
            for name, y in (("k", k), ("v", v))
        }
        return out, {**kept, "keep": filled, "count": count}

    def extend(self, q, k, v, x, cache, *, keep):
        """Tokens ``[batch, n, heads, d]`` (``keep [batch, n]``) continuing the ring one at a time: ``(out,
        cache)``."""

        def token(cache, inputs):
            q, k, v, keep = inputs
            out, cache = self.decode(q[:, None], k[:, None], v[:, None], None, cache, position=None, keep=keep)
            return cache, out

        cache, out = jax.lax.scan(token, cache, tuple(jnp.swapaxes(y, 0, 1) for y in (q, k, v, keep)))
        return jnp.swapaxes(out, 0, 1), cache

    def decode(self, q, k, v, x, cache, *, position, keep):
        """One token: written to slot ``n mod w`` (over the token that left the window), n the row's count of kept
        tokens, then attends to every filled slot; a padding token (``keep`` False) writes nothing."""
        del position  # a row's place in the ring is its count of kept tokens
        slots = jnp.arange(cache["keep"].shape[1])
        write = (slots == cache["count"][:, None] % slots.size) & keep[:, None]  # [batch, slots]
        cache = {
            "k": jnp.where(write[..., None, None], k.astype(self.dtype), cache["k"]),
            "v": jnp.where(write[..., None, None], v.astype(self.dtype), cache["v"]),
            "keep": cache["keep"] | write,
            "count": cache["count"] + keep,
        }
        out = softmax_attention(
            q, cache["k"].astype(q.dtype), cache["v"].astype(q.dtype), mask=cache["keep"][:, None, None, :]
        )
        return out[:, 0], cache


register_attention_kind(
    AttentionKind(
        "sliding_window",
        SlidingWindowOptions,
        projected(SlidingWindowCore),
        causal=True,
        bidirectional=True,
        cross=False,
        cache="fixed",
        summary="exact attention within a window of w tokens (Longformer; Mistral): a ring of the last w as cache",
    )
)
