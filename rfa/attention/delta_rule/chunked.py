"""The chunked (WY/UT) form of the gated delta rule: a unit lower-triangular solve per chunk, a scan over chunks.

Within a chunk of C tokens with incoming state ``S_0``, write ``γ_t = Π_{s≤t} α_s`` (``α_s = exp(g_s)``) and the
error term ``u_t = β_t (v_t − α_t S_{t−1}ᵀ k_t)``, so that ``S_t = α_t S_{t−1} + k_t u_tᵀ`` and
``S_t = γ_t S_0 + Σ_{i≤t} (γ_t/γ_i) k_i u_iᵀ``. Substituting ``S_{t−1}`` into ``u_t``:

    u_t + β_t Σ_{i<t} (γ_t/γ_i)(k_tᵀ k_i) u_i = β_t (v_t − γ_t S_0ᵀ k_t),

a unit lower-triangular system ``(I + diag(β) A) U = diag(β) (V − diag(γ) K S_0)`` with
``A_ti = (γ_t/γ_i) k_tᵀk_i`` for ``i < t``. With ``T = (I + diag(β) A)⁻¹ diag(β)`` (the UT transform),
``U = T V − W S_0`` where ``W = T diag(γ) K``; then

    O = diag(γ) Q S_0 + (tril(Q Kᵀ) ⊙ Γ) U,        S_C = γ_C S_0 + (diag(γ_C/γ) K)ᵀ U,

``Γ_ti = γ_t/γ_i`` for ``i ≤ t`` (the diagonal included: token t reads its own write). ``T V``, ``W``, the score
block and the decayed keys depend on the chunk's tokens only and are formed for all chunks at once; the scan
over chunks carries S and does three matmuls per chunk. Without decay (DeltaNet) every γ is 1: this is the form
of Yang, Wang, Zhang, Shen, Kim, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length",
NeurIPS 2024, Sec. 3; the γ ratios are placed as in Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR 2025,
Sec. 3.3. Every ratio is ``exp`` of a segment sum of log-decays between i and t (never ``1/γ_t`` alone, which
overflows under strong decay), and the entries above the diagonal are masked before ``exp``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.kernelized.causal import from_chunks, to_chunks

Array = jax.Array


def segment_log_decays(log_decay: Array) -> Array:
    """``b[..., t, i] = Σ_{i<s≤t} g_s`` for ``i ≤ t`` (0 on the diagonal and above it), ``[..., C]`` → ``[..., C, C]``.

    Summed term by term, not as a difference of cumulative sums, so a small decay beside a huge one keeps its
    digits."""
    size = log_decay.shape[-1]
    between = jnp.tril(jnp.ones((size, size), jnp.bool_), -1)  # [s, i]: s > i
    terms = jnp.where(between, log_decay[..., :, None], 0.0)  # [..., s, i]: g_s where s > i
    return jnp.cumsum(terms, axis=-2)  # [..., t, i]: Σ_{i<s≤t} g_s


def solve_unit_lower(lower: Array, rhs: Array) -> Array:
    """``X`` with ``(I + N) X = rhs``, ``N`` the strictly lower part of ``lower [..., C, C]`` (its diagonal and
    upper part are never read), ``rhs [..., C, d]``: forward substitution by halves, in matmuls.

    The top half is solved first, and its solution moves to the right-hand side of the bottom half,
    ``(I + N₂₂) X₂ = rhs₂ − N₂₁ X₁``. Not ``jax.scipy.linalg.solve_triangular``: on CPU its batched LAPACK kernel
    waits for sub-tasks on XLA's thread pool, and two such solves running at once on a 2-thread pool deadlock
    it (a DeltaNet training step hung after a few steps)."""
    size = lower.shape[-1]
    if size == 1:
        return rhs
    half = size // 2
    top = solve_unit_lower(lower[..., :half, :half], rhs[..., :half, :])
    below = rhs[..., half:, :] - lower[..., half:, :half] @ top
    return jnp.concatenate([top, solve_unit_lower(lower[..., half:, half:], below)], axis=-2)


def chunked(q: Array, k: Array, v: Array, beta: Array, log_decay: Array | None, state: Array, *, chunk: int):
    """The delta rule over rows: ``q, k [R, L, d_k]``, ``v [R, L, d_v]``, ``beta, log_decay [R, L]``, ``state
    [R, d_k, d_v]``; returns ``(output [R, L, d_v], state after the L tokens)``.

    The last chunk is padded with β = 0 and g = 0, which leave the state as it is."""
    length = q.shape[-2]
    chunk = max(1, min(chunk, length))
    q, k, v = (to_chunks(x, chunk) for x in (q, k, v))  # [N, R, C, ·]
    beta = to_chunks(beta[..., None], chunk)[..., 0]  # [N, R, C]
    g = jnp.zeros_like(beta) if log_decay is None else to_chunks(log_decay[..., None], chunk)[..., 0]
    size = q.shape[-2]
    lower = jnp.tril(jnp.ones((size, size), jnp.bool_))  # i ≤ t
    ratios = jnp.exp(jnp.where(lower, segment_log_decays(g), -jnp.inf))  # γ_t/γ_i for i ≤ t, else 0
    gamma = jnp.exp(jnp.cumsum(g, axis=-1))  # γ_t
    # I + diag(β) A with A_ti = (γ_t/γ_i) k_tᵀk_i below the diagonal; the solve reads the strictly lower part
    # only, so the diagonal that ratios · K Kᵀ holds is never used.
    system = beta[..., None] * ratios * jnp.einsum("...td,...id->...ti", k, k)
    rhs = beta[..., None] * jnp.concatenate([v, gamma[..., None] * k], axis=-1)
    solved = solve_unit_lower(system, rhs)
    tv, w = solved[..., : v.shape[-1]], solved[..., v.shape[-1] :]  # T V, W = T diag(γ) K
    scores = jnp.einsum("...td,...id->...ti", q, k) * ratios  # tril(Q Kᵀ) ⊙ Γ
    q_decayed = gamma[..., None] * q  # diag(γ) Q
    k_to_end = ratios[..., -1, :, None] * k  # diag(γ_C/γ) K
    chunk_decay = gamma[..., -1, None, None]  # γ_C

    def step(s, chunk_terms):
        tv_c, w_c, scores_c, q_c, k_c, decay_c = chunk_terms
        u = tv_c - w_c @ s
        out = q_c @ s + scores_c @ u
        return decay_c * s + jnp.swapaxes(k_c, -1, -2) @ u, out

    state, out = jax.lax.scan(step, state, (tv, w, scores, q_decayed, k_to_end, chunk_decay))
    return from_chunks(out, length), state
