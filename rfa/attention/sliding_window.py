"""Sliding-window softmax attention in O(L·w): each query attends to the w keys nearest it, by blocks.

Causal: query i attends to keys ``i − w < j ≤ i`` (itself and the w − 1 before it); bidirectional: to
``|i − j| < w``. The sequence is cut into blocks of w tokens; a query block needs only its own key block and the
one before it (and, bidirectional, the one after), so the scores form ``[L/w, w, 2w or 3w]`` blocks, never the
L × L matrix. Beltagy, Peters, Cohan, "Longformer: The Long-Document Transformer", 2020 (sliding windows);
Arora et al., "Simple linear attention language models balance the recall-throughput tradeoff" (Based), ICML
2024, Sec. 4, pairs a small causal window with linear attention.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, check_broadcastable_to, check_positive_int
from rfa.attention.common import as_bool_mask, check_causal_lengths, check_qkv
from rfa.attention.segments import check_segment_ids
from rfa.checks import check_finite

Array = jax.Array


def sliding_window_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    window: int,
    is_causal: bool = True,
    mask: Array | None = None,
    segment_ids: Array | None = None,
) -> Array:
    """Exact softmax attention restricted to a window of ``window`` positions, in O(L·w) time and memory.

    Args:
      q: ``[batch..., L, heads, d_k]``.
      k: ``[batch..., L, heads, d_k]`` (self-attention: the same length as q).
      v: ``[batch..., L, heads, d_v]``.
      window: w ≥ 1. Causal: keys ``i − w < j ≤ i``; bidirectional: ``|i − j| < w``.
      is_causal: whether the window ends at the query (True) or is centred on it.
      mask: key padding (nonzero = attend), broadcastable to ``[batch..., heads, 1, L]``; a dense mask would undo
        the blocks and is refused.
      segment_ids: packed sequences: integers broadcastable to ``[batch..., L]``; a query attends only to the keys
        of its own id in its window (:mod:`rfa.attention.segments`).

    Returns:
      ``[batch..., L, heads, d_v]`` in ``q.dtype``, computed in float32 (float64 for float64 inputs); a query with
      no key in its window outputs 0.

    Example:
      >>> q = k = v = jax.random.normal(jax.random.key(0), (2, 100, 4, 16))
      >>> out = rfa.attention.sliding_window_attention(q, k, v, window=8)
      >>> dense = jnp.tril(jnp.triu(jnp.ones((100, 100), bool), -7))  # i − 8 < j ≤ i
      >>> bool(jnp.allclose(out, rfa.softmax_attention(q, k, v, mask=dense), atol=1e-5))
      True
    """
    q, k, v = check_qkv(q, k, v)
    check_causal_lengths(q, k)
    window = check_positive_int(window, "window")
    keep = None
    if mask is not None:
        mask = as_bool_mask(mask)
        if jnp.ndim(mask) < 2 or jnp.shape(mask)[-2] != 1:
            raise InputError(
                f"sliding_window_attention takes key padding as its mask, broadcastable to [batch..., heads, 1, L], "
                f"got shape {tuple(jnp.shape(mask))}; the window itself is the argument window= (is_causal for its "
                "side)."
            )
        target = q.shape[:-3] + (q.shape[-2], 1, k.shape[-3])
        check_broadcastable_to(mask.shape, target, "mask", "[batch..., heads, 1, L] =")
        keep = jnp.broadcast_to(mask, target)[..., 0, :]  # [batch..., heads, L]
    check_finite(q=q, k=k, v=v, keep={"k": keep, "v": keep})
    if segment_ids is not None:
        segment_ids = check_segment_ids(segment_ids, q.shape[:-2])[..., None, :]  # [batch..., 1, L]
    return _blocks(q, k, v, keep, segment_ids, window=window, is_causal=is_causal)


@jax.jit(static_argnames=("window", "is_causal"))
def _blocks(q, k, v, keep, segment_ids, *, window: int, is_causal: bool) -> Array:
    """The blocked computation: query block n against key blocks n − 1, n (and n + 1 when bidirectional)."""
    length, heads = q.shape[-3], q.shape[-2]
    num_blocks = -(-length // window)
    pad = num_blocks * window - length
    before, after = 1, (0 if is_causal else 1)
    if keep is None:
        keep = jnp.ones(q.shape[:-3] + (heads, length), jnp.bool_)

    def blocks(x, extra_before, extra_after, fill):  # [..., L, ·] -> [..., N + extra, w, ·]
        x = jnp.pad(
            x,
            [(0, 0)] * (x.ndim - 2) + [(extra_before * window, pad + extra_after * window), (0, 0)],
            constant_values=fill,
        )
        return x.reshape(x.shape[:-2] + (-1, window, x.shape[-1]))

    dtype = computation_dtype(q, k, v)
    heads_first = [jnp.swapaxes(x, -2, -3).astype(dtype) for x in (q, k, v)]  # [..., heads, L, ·]
    heads_first[2] = jnp.where(keep[..., None], heads_first[2], 0.0)  # a padded value, NaN too, reaches no output
    q_blocks = blocks(heads_first[0], 0, 0, 0.0)  # [..., heads, N, w, d]
    k_blocks, v_blocks = (blocks(x, before, after, 0.0) for x in heads_first[1:])
    keep_blocks = blocks(keep[..., None], before, after, False)[..., 0]  # [..., heads, N + extra, w]
    offsets = range(before + after + 1)

    def neighbours(x):  # the key blocks each query block reads, side by side along the block axis
        return jnp.concatenate([x[..., n : n + num_blocks, :, :] for n in offsets], axis=-2)

    keys, values = neighbours(k_blocks), neighbours(v_blocks)  # [..., heads, N, (1 + before + after) w, d]

    keys_kept = neighbours(keep_blocks[..., None])[..., 0]
    logits = jnp.einsum("...nqd,...nkd->...nqk", q_blocks, keys) / math.sqrt(q.shape[-1])
    query = jnp.arange(window)[:, None]
    key = jnp.arange(len(offsets) * window)[None, :] - before * window  # relative to the query block's start
    distance = query - key  # i − j
    inside = (distance >= 0) & (distance < window) if is_causal else jnp.abs(distance) < window
    allowed = inside & keys_kept[..., None, :]
    if segment_ids is not None:  # packed sequences: a query reads the keys of its own id only
        id_blocks = blocks(segment_ids[..., None], before, after, -1)  # [..., 1, N + extra, w, 1]
        key_ids, query_ids = neighbours(id_blocks)[..., 0], id_blocks[..., before : before + num_blocks, :, :]
        allowed = allowed & (query_ids == key_ids[..., None, :])
    logits = jnp.where(allowed, logits, -jnp.inf)
    row_max = jnp.max(logits, axis=-1, keepdims=True)
    weights = jnp.exp(logits - jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0)))
    total = jnp.sum(weights, axis=-1, keepdims=True)
    out = jnp.einsum("...nqk,...nkd->...nqd", weights / jnp.where(total == 0, 1.0, total), values)
    out = out.reshape(out.shape[:-3] + (num_blocks * window, out.shape[-1]))[..., :length, :]
    return jnp.swapaxes(out, -2, -3).astype(q.dtype)
