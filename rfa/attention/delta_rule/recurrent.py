"""The recurrent form of the gated delta rule: one token per step, O(d_k·d_v) per token (decoding).

``S_t = D_t S_{t−1} + β_t k_t (v_t − (D_t S_{t−1})ᵀ k_t)ᵀ`` — the write of the error between the value and what
the decayed state reads for its key, which equals ``(I − β_t k_t k_tᵀ) D_t S_{t−1} + β_t k_t v_tᵀ`` without
forming the d_k × d_k matrix (Schlag, Irie, Schmidhuber, "Linear Transformers Are Secretly Fast Weight
Programmers", ICML 2021, Sec. 4.2); then ``o_t = S_tᵀ q_t``. ``D_t`` is ``exp(g_t)`` times I for one decay per
token (Gated DeltaNet), ``Diag(exp(g_t))`` for one per key channel (Kimi Delta Attention): the decay first, then
the erase reads the decayed state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def recurrent(q: Array, k: Array, v: Array, beta: Array, log_decay: Array | None, state: Array):
    """The delta rule over rows, token by token: ``q, k [R, L, d_k]``, ``v [R, L, d_v]``, ``beta [R, L]``,
    ``log_decay [R, L]`` (one per token), ``[R, L, d_k]`` (one per key channel) or None, ``state [R, d_k, d_v]``;
    returns ``(output [R, L, d_v], state after the L tokens)``."""
    g = jnp.zeros(beta.shape + (1,), beta.dtype) if log_decay is None else log_decay
    g = g if g.ndim == 3 else g[..., None]  # [R, L, 1 or d_k]

    def step(s, token):
        q_t, k_t, v_t, beta_t, g_t = token
        s = jnp.exp(g_t)[:, :, None] * s
        error = v_t - jnp.einsum("rkv,rk->rv", s, k_t)
        s = s + beta_t[:, None, None] * k_t[:, :, None] * error[:, None, :]
        return s, jnp.einsum("rkv,rk->rv", s, q_t)

    tokens = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, beta, g))
    state, out = jax.lax.scan(step, state, tokens)
    return jnp.moveaxis(out, 0, 1), state
