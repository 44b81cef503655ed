"""The reference of the delta rule: the recurrence as the papers write it, one token at a time, in the inputs' dtype.

``S_t = (I − β_t k_t k_tᵀ) D_t S_{t−1} + β_t k_t v_tᵀ``, ``o_t = S_tᵀ q_t`` (Schlag, Irie, Schmidhuber,
ICML 2021, Eq. 29; gated, ``D_t = exp(g_t) I``: Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025,
Eq. 10; per key channel, ``D_t = Diag(exp(g_t))``: Kimi Team, "Kimi Linear", arXiv 2510.26692, 2025, Eq. 1), with
the d_k × d_k transition formed explicitly and a Python loop over tokens. It shares nothing with the chunked and
recurrent forms but the checks of its inputs; given float64 inputs (``jax.enable_x64()``) it computes
in float64, and autodiff through it gives the reference gradients. O(L·d_k²·d_v); for tests and small inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.delta_rule.api import check_delta_rule_call

Array = jax.Array


def naive_delta_rule_attention(
    q: Array,
    k: Array,
    v: Array,
    beta: Array,
    *,
    log_decay: Array | None = None,
    initial_state: Array | None = None,
    return_state: bool = False,
) -> Array | tuple[Array, Array]:
    """The gated delta rule by its recurrence, token by token (the reference of
    :func:`rfa.attention.delta_rule_attention`; same arguments, same shapes).

    Example:
      >>> q = k = jnp.eye(4)[None, :, None, :]  # one sequence, 4 orthonormal keys, one head
      >>> v = jnp.arange(8.0).reshape(1, 4, 1, 2)
      >>> out = rfa.attention.naive_delta_rule_attention(q, k, v, jnp.ones((1, 4, 1)))
      >>> out[0, :, 0].tolist()  # with β = 1 each key reads back the value just written for it
      [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
    """
    q, k, v, beta, log_decay, state = check_delta_rule_call(q, k, v, beta, log_decay, initial_state)
    dtype = jnp.promote_types(q.dtype, jnp.float32)
    out_dtype = q.dtype
    q, k, v, beta = (x.astype(dtype) for x in (q, k, v, beta))
    decay = jnp.ones_like(beta) if log_decay is None else jnp.exp(log_decay.astype(dtype))
    decay = decay if decay.ndim == q.ndim else decay[..., None]  # [batch..., L, heads, 1 or d_k]
    state = state.astype(dtype)
    identity = jnp.eye(k.shape[-1], dtype=dtype)
    outputs = []
    for t in range(q.shape[-3]):
        k_t, v_t, b_t = k[..., t, :, :], v[..., t, :, :], beta[..., t, :, None, None]
        erase = identity - b_t * k_t[..., :, None] * k_t[..., None, :]
        transition = erase * decay[..., t, :, None, :]  # (I − β k kᵀ) D: D scales the columns
        state = jnp.einsum("...ij,...jv->...iv", transition, state) + b_t * k_t[..., :, None] * v_t[..., None, :]
        outputs.append(jnp.einsum("...kv,...k->...v", state, q[..., t, :, :]))
    out = jnp.stack(outputs, axis=-3).astype(out_dtype)
    return (out, state) if return_state else out
