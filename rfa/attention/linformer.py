"""Linformer: softmax attention over keys and values projected along the length.

Wang, Li, Khabsa, Fang, Ma, "Linformer: Self-Attention with Linear Complexity", 2020, Sec. 4:

``Att(Q, K, V) = softmax(Q (E K)ᵀ / √d) (F V)``

with ``E, F [k, n]`` learned projections along the length n (one pair shared by the heads: the paper's
"headwise sharing"), so the cost is O(n·k·d) instead of O(n²·d). Two choices the paper leaves open are made
here: padded keys and values are zeroed before the projection, so they enter no projected key, and a sequence
shorter than the projections' n uses their first columns (what zero-padding it to n gives). Bidirectional only:
each projected key mixes every position, future ones included, so no causal or token-by-token form exists.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._validation import InputError
from rfa.attention.common import check_qkv
from rfa.attention.exact import softmax_attention

Array = jax.Array


def project_keys_values(
    k: Array, v: Array, key_projection: Array, value_projection: Array, key_mask: Array | None = None
) -> tuple[Array, Array]:
    """``(E K, F V)``: keys and values projected along their length.

    Args:
      k, v: ``[batch..., kv_len, heads, head_dim]``.
      key_projection, value_projection: ``E, F [k, n]`` with ``n >= kv_len``; their first ``kv_len`` columns
        are used.
      key_mask: optional bool ``[batch..., kv_len]``, True for the keys to keep; the others are zeroed first.

    Returns:
      ``[batch..., k, heads, head_dim]`` each.

    Example:
      >>> k = v = jnp.ones((2, 5, 4, 8))
      >>> E = F = jnp.full((3, 6), 0.2)
      >>> Ek, Fv = project_keys_values(k, v, E, F)
      >>> Ek.shape, float(Ek[0, 0, 0, 0])
      ((2, 3, 4, 8), 1.0)
    """
    if k.shape != v.shape or k.ndim < 3:
        raise InputError(f"k and v must have one shape [batch..., kv_len, heads, head_dim], got {k.shape}, {v.shape}.")
    length = k.shape[-3]
    for name, projection in (("key_projection", key_projection), ("value_projection", value_projection)):
        if projection.ndim != 2 or projection.shape[1] < length:
            raise InputError(
                f"{name} must be [k, n] with n >= kv_len = {length} (Linformer's projections are built for a "
                f"longest sequence n), got shape {projection.shape}."
            )
    if key_projection.shape != value_projection.shape:
        shapes = f"{key_projection.shape} and {value_projection.shape}"
        raise InputError(f"key_projection and value_projection must have one shape, got {shapes}.")
    if key_mask is not None:
        if key_mask.shape != k.shape[:-2]:
            raise InputError(f"key_mask must be [batch..., kv_len] = {k.shape[:-2]}, got {key_mask.shape}.")
        keep = key_mask[..., None, None]
        k, v = jnp.where(keep, k, 0), jnp.where(keep, v, 0)
    E, F = (p[:, :length].astype(k.dtype) for p in (key_projection, value_projection))
    return jnp.einsum("nl,...lhd->...nhd", E, k), jnp.einsum("nl,...lhd->...nhd", F, v)


def linformer_attention(
    q: Array,
    k: Array,
    v: Array,
    key_projection: Array,
    value_projection: Array,
    *,
    key_mask: Array | None = None,
) -> Array:
    """``softmax(Q (E K)ᵀ / √d) (F V)`` (Wang et al., 2020, Eq. 7).

    Args:
      q: ``[batch..., q_len, heads, head_dim]``.
      k, v: ``[batch..., kv_len, heads, head_dim]``.
      key_projection, value_projection: ``E, F [k, n]``, ``n >= kv_len``.
      key_mask: optional bool ``[batch..., kv_len]``: the keys to keep (the others enter no projected key).

    Returns:
      ``[batch..., q_len, heads, head_dim]``.

    Example:
      >>> q = k = v = jax.random.normal(jax.random.key(0), (2, 6, 4, 8))
      >>> E = F = jax.random.normal(jax.random.key(1), (3, 6)) / 6**0.5
      >>> jax.jit(linformer_attention)(q, k, v, E, F).shape
      (2, 6, 4, 8)
    """
    q, k, v = check_qkv(q, k, v)
    projected_k, projected_v = project_keys_values(k, v, key_projection, value_projection, key_mask)
    return softmax_attention(q, projected_k, projected_v)
