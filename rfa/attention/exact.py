"""Exact softmax attention, the reference every approximation is measured against.

``Att(Q, K, V) = D⁻¹ A V`` with ``A = exp(QKᵀ/√d)`` (masked entries 0) and ``D = diag(A 1)``.
Vaswani et al., "Attention Is All You Need", NeurIPS 2017; the ``A``/``D`` split follows
Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Eq. 1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa.attention.common import (
    check_causal_lengths,
    check_mask,
    check_qkv,
    renormalize,
    with_ones_column,
)
from rfa.attention.segments import check_segment_ids, check_self_attention, same_sequence
from rfa.checks import check_finite

Array = jax.Array


def _attention_matrix(q, k, mask, is_causal, stabilize: bool) -> Array:
    """``A = exp(QKᵀ/√d)`` as ``[batch..., heads, q_len, kv_len]`` in the computation dtype (float32, float64 for
    float64 inputs), masked entries 0.

    With ``stabilize`` each row is divided by ``exp`` of its largest logit, which cancels in
    ``D⁻¹ A V``.
    """
    dtype = computation_dtype(q, k)
    logits = jnp.einsum("...qhd,...khd->...hqk", q.astype(dtype), k.astype(dtype)) / math.sqrt(q.shape[-1])
    allowed = jnp.ones(logits.shape, jnp.bool_)
    if mask is not None:
        allowed = allowed & mask
    if is_causal:
        allowed = allowed & jnp.tril(jnp.ones(logits.shape[-2:], jnp.bool_))
    logits = jnp.where(allowed, logits, -jnp.inf)
    if stabilize:
        row_max = jnp.max(logits, axis=-1, keepdims=True)
        logits = logits - jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    return jnp.exp(logits)


def _numerator_and_normalizer(q, k, v, mask, is_causal, stabilize):
    q, k, v = check_qkv(q, k, v)
    keep = {}
    if mask is not None:
        mask = check_mask(mask, q, k)
        allowed = jnp.broadcast_to(mask, q.shape[:-3] + (q.shape[-2], q.shape[-3], k.shape[-3]))
        keep = {"q": jnp.any(allowed, axis=-1), "k": jnp.any(allowed, axis=-2)}  # [batch..., heads, L]
        v = jnp.where(jnp.swapaxes(keep["k"], -1, -2)[..., None], v, 0)  # a padded value, NaN too, reaches no output
        keep["v"] = keep["k"]
    check_finite(q=q, k=k, v=v, keep=keep)
    if is_causal:
        check_causal_lengths(q, k)
    a = _attention_matrix(q, k, mask, is_causal, stabilize)
    out = jnp.einsum("...hqk,...khd->...qhd", a, with_ones_column(v.astype(computation_dtype(v))))
    return out[..., :-1], out[..., -1]


def unnormalized_softmax_attention(q: Array, k: Array, v: Array, *, mask=None, is_causal: bool = False):
    """The two pieces of softmax attention: ``A V`` and ``D = A 1`` with ``A = exp(QKᵀ/√d)``.

    No max-subtraction is applied, so these are the exact values (they overflow where they are
    not representable); :func:`rfa.renormalize` turns them into the attention output.

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      v: ``[batch..., kv_len, heads, d_v]``.
      mask: boolean, broadcastable to ``[batch..., heads, q_len, kv_len]``; True = attend.
      is_causal: mask out keys after the query (needs q_len == kv_len).

    Returns:
      ``(numerator [batch..., q_len, heads, d_v], normalizer [batch..., q_len, heads])`` in
      ``q.dtype``.

    Example:
      >>> q = k = v = jnp.ones((1, 3, 2, 4))
      >>> num, den = rfa.unnormalized_softmax_attention(q, k, v)
      >>> round(float(den[0, 0, 0]), 4)  # 3 keys, each exp(qᵀk/√d) = exp(4/2)
      22.1672
    """
    num, den = _numerator_and_normalizer(q, k, v, mask, is_causal, stabilize=False)
    return num.astype(q.dtype), den.astype(q.dtype)


def packed_mask(q, k, mask, segment_ids, where: str) -> Array:
    """``mask`` joined to the packed sequences' mask (query and key of one id; :mod:`rfa.attention.segments`)."""
    q, k, _ = check_qkv(q, k, k)
    check_self_attention(q, k, where)
    same = same_sequence(check_segment_ids(segment_ids, q.shape[:-3] + q.shape[-3:-2]))
    return same if mask is None else check_mask(mask, q, k) & same


def softmax_attention(
    q: Array, k: Array, v: Array, *, mask=None, is_causal: bool = False, segment_ids: Array | None = None
) -> Array:
    """Exact softmax attention ``D⁻¹ exp(QKᵀ/√d) V``, computed in float32 (float64 for float64 inputs).

    Rows are max-stabilized; a query that attends to no key outputs 0.

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      v: ``[batch..., kv_len, heads, d_v]``.
      mask: boolean, broadcastable to ``[batch..., heads, q_len, kv_len]``; True = attend.
      is_causal: mask out keys after the query (needs q_len == kv_len).
      segment_ids: packed sequences (self-attention): integers broadcastable to ``[batch..., L]``; a query attends
        only to keys of its own id (Flax's ``make_attention_mask(segment_ids, segment_ids, jnp.equal)``, joined
        to ``mask``).

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype``.

    Example:
      >>> q = k = v = jnp.ones((2, 5, 4, 8))
      >>> rfa.softmax_attention(q, k, v, is_causal=True).shape
      (2, 5, 4, 8)
    """
    if segment_ids is not None:
        mask = packed_mask(q, k, mask, segment_ids, "softmax_attention")
    num, den = _numerator_and_normalizer(q, k, v, mask, is_causal, stabilize=True)
    return renormalize(num, den).astype(q.dtype)
