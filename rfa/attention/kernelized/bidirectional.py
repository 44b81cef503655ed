"""The bidirectional mode (also cross-attention): every query attends to every kept key and the initial state.

``out = D̂⁻¹ φ(Q)(φ(K)ᵀV)`` with ``D̂ = diag(φ(Q)(φ(K)ᵀ1))``: the keys' state ``φ(K)ᵀ[V, 1]`` is one
``F × (d_v + 1)`` sum, read by each query (Choromanski et al., "Rethinking Attention with Performers", ICLR
2021, Sec. 2.2). Keys enter at one global reference ``R = max s(k)`` per row, so none overflows; a state given
as ``initial_state`` is rescaled to the larger of the two references and added. A decayed call run here
(the sequence-parallel mode's local state) returns the keys' state at the end of the sequence.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.chunk_scores import contract
from rfa.attention.common import with_ones_column
from rfa.attention.kernelized.prepare import Call, check_decay_features, initial_rows, output, rows, state
from rfa.attention.state import LOWEST, RecurrentState
from rfa.random_features.feature_maps import features_at, row_log_scale

Array = jax.Array


def key_reference(log_k: Array, key_log_mask: Array, initial_reference: Array | None = None) -> Array:
    """``R = max s(k)`` over the kept keys of each row (and the initial state's reference), at least
    :data:`~rfa.attention.state.LOWEST`, without gradient: ``[rows, 1, 1]``."""
    offsets = row_log_scale(log_k) + jax.lax.stop_gradient(key_log_mask)  # [rows, kv_len, 1 or F]
    ref = jnp.max(offsets, axis=(-2, -1), keepdims=True, initial=-jnp.inf)
    if initial_reference is not None:
        ref = jnp.maximum(ref, jax.lax.stop_gradient(initial_reference))
    return jnp.maximum(ref, LOWEST)


def combine(phi_q, keys, key_log_mask, v_aug, initial, contraction):
    """One global key reference ``R = max s(k)`` per row; returns ``(num_aug, R, (kv [F, dv+1], R))``.

    Row-major: ``phi_q [rows, q_len, F]``, ``keys = (base, log)`` of ``[rows, kv_len, ·]``,
    ``key_log_mask [rows, kv_len, 1]`` (0 keep, -inf drop), ``initial = (kv [rows, F, dv+1], R0 [rows, 1, 1])``;
    ``contraction``: the keywords of :func:`~rfa.attention.chunk_scores.contract` (precision, operand dtype).
    """
    base_k, log_k = keys
    ref = key_reference(log_k, key_log_mask, None if initial is None else initial[1])
    phi_k = features_at(base_k, log_k, ref - key_log_mask)
    kv = contract("...kf,...kd->...fd", phi_k, v_aug, **contraction)
    if initial is not None:
        kv = kv + initial[0] * jnp.exp(initial[1] - ref)
    num_aug = contract("...qf,...fd->...qd", phi_q, kv, **contraction)
    return num_aug, ref[..., 0], (kv, ref)


# One compiled program even when called eagerly: op-by-op dispatch would compile every primitive on first use.
@jax.jit
def bidirectional(call: Call) -> tuple[Array, RecurrentState]:
    """The bidirectional mode: ``(output [batch..., q_len, heads, d_v], state after the keys and initial state)``."""
    fm, r = call.fm, rows(call, causal=False)
    phi_q, s_q = fm.split(r.q, call.projection, **r.params)
    check_decay_features(r.key_log_mask, phi_q.shape[-1], fm)  # a per-feature decay's sums to the end, if any
    keys = fm.terms(r.k, call.projection, side="key", **r.params)
    initial = None
    if call.initial_state is not None:
        initial = initial_rows(call.initial_state, r, fm, phi_q.shape[-1])
    num_aug, log_ref, (kv, log_scale) = combine(
        phi_q, keys, r.key_log_mask, with_ones_column(r.v), initial, call.contraction
    )
    return output(call, num_aug, log_ref, s_q[..., 0], r.shape), state(kv, log_scale, r.shape)
