"""The recurrent state as the ``decode=True`` cache of the Flax layers (:mod:`rfa.nnx`, :mod:`rfa.linen`).

Flax's own cache keeps every key and value up to a maximum length and attends to all of them for each
new token: O(max_length) memory and O(position) time per token. A kernelized layer needs only the state
``S = Σ_j φ(k_j)[v_j, 1]ᵀ`` (:class:`~rfa.attention.RecurrentState`, ``[batch..., heads, F, d_v + 1]``):
its size does not depend on the length, and a token costs O(F·d_v) at any position (Katharopoulos et
al., "Transformers are RNNs", ICML 2020, Sec. 3.4).

- Self-attention: a call with ``n >= 1`` new tokens runs the causal form from the state and returns the
  state after them (``n = 1``: one decoding step; ``n > 1``: a prompt, in one parallel pass).
- Cross-attention: the first call computes the state of the encoder's keys and values (and its output,
  bidirectionally); every later call reads that state with its queries only, never touching the keys.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from rfa._validation import InputError
from rfa.attention.common import as_bool_mask
from rfa.attention.state import RecurrentState, init_state
from rfa.random_features.feature_maps import Estimator

Array = jax.Array


def empty_state(
    fm: Estimator, num_features: int, head_dim: int, batch_shape: tuple, num_heads: int, dtype=jnp.float32
) -> RecurrentState:
    """The state of no token for ``fm`` with ``num_features`` rows of ``head_dim``-wide heads, float32 (float64 for a
    float64 ``dtype``)."""
    return init_state(tuple(batch_shape), num_heads, fm.num_outputs(num_features, head_dim), head_dim, dtype)


def check_decode_mask(mask, q_len: int):
    """A decoding call's mask covers its own ``q_len`` new tokens only: ``[..., q_len or 1, q_len or 1]``."""
    if mask is None:
        return None
    shape = tuple(jnp.shape(mask))
    if len(shape) < 2 or shape[-1] not in (1, q_len) or shape[-2] not in (1, q_len):
        raise InputError(
            f"with decode=True the cache is the recurrent state of the earlier tokens, already summed, so a mask can "
            f"only cover this call's {q_len} new token(s): [batch..., heads, {q_len}, {q_len}] (or size-1 axes), got "
            f"shape {shape}. Leave earlier tokens out when you feed them (a key mask [..., 1, 1] on their step), "
            "and pass mask=None otherwise: the causal order is the cache's."
        )
    return mask


def self_attention_step(attend: Callable, q: Array, k: Array, v: Array, *, mask, state: RecurrentState):
    """New tokens ``[batch..., n, heads, d]`` of causal self-attention continuing ``state`` -> ``(out, state)``."""
    mask = check_decode_mask(mask, q.shape[-3])
    return attend(q, k, v, mask=mask, is_causal=True, initial_state=state, return_state=True)


def cross_attention_step(attend: Callable, q: Array, k: Array, v: Array, *, mask, state: RecurrentState, ready: Array):
    """Queries ``[batch..., n, heads, d]`` attending to the encoder's keys: ``(out, state)``.

    While ``ready`` is False the state is computed from ``k, v`` (and ``mask``'s key padding); once it is
    True the state is read with the queries alone (``mask`` then only zeroes padded queries).
    """

    def first(q, k, v, state):
        return attend(q, k, v, mask=mask, return_state=True)

    def later(q, k, v, state):
        out = attend(q, k[..., :0, :, :], v[..., :0, :, :], initial_state=state)  # no key: the state alone
        if mask is not None:  # a padded query attends to no key: 0, as in the first call
            keep = jnp.any(as_bool_mask(mask), axis=-1)  # [batch..., heads or 1, n]
            out = jnp.where(jnp.swapaxes(keep, -1, -2)[..., None], out, 0).astype(out.dtype)
        return out, state

    return jax.lax.cond(ready, later, first, q, k, v, state)
