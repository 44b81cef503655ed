"""The chunked (WY/UT) form of the gated delta rule: a unit lower-triangular solve per chunk, a scan over chunks.

The decay is one number per token (Gated DeltaNet) or one per key channel (Kimi Delta Attention, KDA):
``S_t = (I − β_t k_t k_tᵀ) D_t S_{t−1} + β_t k_t v_tᵀ`` with ``D_t = Diag(α_t)``, ``α_t = exp(g_t)`` (a scalar
times I for one decay per token). Within a chunk of C tokens with incoming state ``S_0``, write
``Γ_t = Π_{s≤t} D_s`` and the error term ``u_t = β_t (v_t − S_{t−1}ᵀ D_t k_t)``, so that
``S_t = D_t S_{t−1} + k_t u_tᵀ`` and ``S_t = Γ_t S_0 + Σ_{i≤t} Γ_t Γ_i⁻¹ k_i u_iᵀ``. Substituting ``S_{t−1}``
into ``u_t``:

    u_t + β_t Σ_{i<t} (k_tᵀ Γ_t Γ_i⁻¹ k_i) u_i = β_t (v_t − S_0ᵀ Γ_t k_t),

a unit lower-triangular system ``(I + diag(β) A) U = diag(β) (V − (Γ K) S_0)`` with
``A_ti = Σ_f k_tf k_if exp(b_tif)`` for ``i < t``, ``b_tif = Σ_{i<s≤t} g_sf`` (``(γ_t/γ_i) k_tᵀk_i`` for one decay
per token). With ``T = (I + diag(β) A)⁻¹ diag(β)`` (the UT transform), ``U = T V − W S_0`` where ``W = T (Γ K)``;
then

    O = (Γ Q) S_0 + M U,        S_C = Γ_C S_0 + (Γ_C Γ⁻¹ K)ᵀ U,

with ``M_ti = Σ_f q_tf k_if exp(b_tif)`` for ``i ≤ t`` (the diagonal included: token t reads its own write).
``T V``, ``W``, ``M`` and the decayed keys depend on the chunk's tokens only and are formed for all chunks at once;
the scan over chunks carries S and does three matmuls per chunk. Without decay (DeltaNet) every Γ is I: this is
the form of Yang, Wang, Zhang, Shen, Kim, "Parallelizing Linear Transformers with the Delta Rule over Sequence
Length", NeurIPS 2024, Sec. 3; the decays are placed as in Yang, Kautz, Hatamizadeh, "Gated Delta Networks", ICLR
2025, Sec. 3.3, and per key channel as in Kimi Team, "Kimi Linear: An Expressive, Efficient Attention
Architecture", arXiv 2510.26692, 2025, Sec. 3. ``A`` and ``M`` are :func:`rfa.attention.chunk_scores.decayed_scores`:
one matmul for a decay per token, GLA's secondary chunking for a decay per channel. Every decay factor is ``exp`` of
a sum of log-decays ≤ 0 (never ``1/γ_t`` alone, which overflows under strong decay).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.chunk_scores import contract, decayed_scores, later_sums
from rfa.attention.kernelized.causal import from_chunks, to_chunks

Array = jax.Array


def forward_substitution(lower: Array, rhs: Array) -> Array:
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
    top = forward_substitution(lower[..., :half, :half], rhs[..., :half, :])
    below = rhs[..., half:, :] - lower[..., half:, :half] @ top
    return jnp.concatenate([top, forward_substitution(lower[..., half:, half:], below)], axis=-2)


def _solve_forward(lower: Array, rhs: Array):
    solution = forward_substitution(lower, rhs)
    return solution, (lower, solution)


def _solve_backward(residuals, cotangent):
    """``rhs̄ = (I + N)⁻ᵀ X̄`` (the transposed system, reversed into a lower one: ``P Nᵀ P`` is strictly lower for
    the reversal P) and ``N̄ = −tril(rhs̄ Xᵀ, −1)``: one more substitution, where autodiff through the recursion
    took about three times the forward's time."""
    lower, solution = residuals
    reversed_transpose = jnp.flip(jnp.swapaxes(lower, -1, -2), (-2, -1))
    rhs_bar = jnp.flip(forward_substitution(reversed_transpose, jnp.flip(cotangent, -2)), -2)
    return -jnp.tril(rhs_bar @ jnp.swapaxes(solution, -1, -2), -1), rhs_bar


solve_unit_lower = jax.custom_vjp(forward_substitution)
solve_unit_lower.defvjp(_solve_forward, _solve_backward)
solve_unit_lower.__doc__ = (
    """:func:`forward_substitution`, its gradient by one substitution on the transposed system."""
)


def chunked(
    q: Array, k: Array, v: Array, beta: Array, log_decay: Array | None, state: Array, *, chunk: int, operands=None
):
    """The delta rule over rows: ``q, k [R, L, d_k]``, ``v [R, L, d_v]``, ``beta [R, L]``, ``log_decay [R, L]``
    (one per token), ``[R, L, d_k]`` (one per key channel) or None, ``state [R, d_k, d_v]``; returns ``(output
    [R, L, d_v], state after the L tokens)``.

    ``operands`` (None: the inputs' dtype) is the dtype of the matmuls' operands (the scores, and the reads and
    writes of the state), summed in the inputs' dtype (:func:`rfa.attention.chunk_scores.contract`); the state,
    the decays, their sums and the triangular solve stay in it. The last chunk is padded with β = 0 and g = 0,
    which leave the state as it is."""
    length = q.shape[-2]
    chunk = max(1, min(chunk, length))
    q, k, v = (to_chunks(x, chunk) for x in (q, k, v))  # [N, R, C, ·]
    beta = to_chunks(beta[..., None], chunk)[..., 0]  # [N, R, C]
    g = None
    if log_decay is not None:  # [N, R, C, 1 or d_k]
        g = to_chunks(log_decay if log_decay.ndim == 3 else log_decay[..., None], chunk)
    # I + diag(β) A with A_ti = Σ_f k_tf k_if exp(b_tif) below the diagonal; the solve reads the strictly lower part
    # only, so the diagonal that the scores hold is never used.
    # The named scopes mark the parts in a profile (tools/profile_delta_rule.py), backward included.
    with jax.named_scope("chunk_scores"):
        system = beta[..., None] * decayed_scores(k, k, g, operands=operands)[0]
        scores = decayed_scores(q, k, g, operands=operands)[0]  # M
    with jax.named_scope("chunk_decays"):
        if g is None:
            q_decayed, k_decayed, k_to_end, chunk_decay = q, k, k, jnp.ones((q.shape[0], 1, 1, 1), q.dtype)
        else:
            gamma = jnp.exp(jnp.cumsum(g, axis=-2))  # Γ_t
            q_decayed, k_decayed = gamma * q, gamma * k  # Γ Q, Γ K
            k_to_end = jnp.exp(later_sums(g)) * k  # Γ_C Γ⁻¹ K
            chunk_decay = jnp.exp(jnp.sum(g, axis=-2))[..., :, None]  # Γ_C: [N, R, 1 or d_k, 1]
    with jax.named_scope("triangular_solve"):
        solved = solve_unit_lower(system, beta[..., None] * jnp.concatenate([v, k_decayed], axis=-1))
    tv, w = solved[..., : v.shape[-1]], solved[..., v.shape[-1] :]  # T V, W = T (Γ K)

    def mm(spec, a, b):
        return contract(spec, a, b, operands=operands)

    def step(s, chunk_terms):
        tv_c, w_c, scores_c, q_c, k_c, decay_c = chunk_terms
        u = tv_c - mm("...ck,...kv->...cv", w_c, s)
        out = mm("...ck,...kv->...cv", q_c, s) + mm("...cj,...jv->...cv", scores_c, u)
        return decay_c * s + mm("...ck,...cv->...kv", k_c, u), out

    with jax.named_scope("state_scan"):
        state, out = jax.lax.scan(step, state, (tv, w, scores, q_decayed, k_to_end, chunk_decay))
    return from_chunks(out, length), state
