"""The chunked causal mode, with per-token decay: every query attends to the keys up to it and the initial state.

With chunks of C tokens, ``O_c = φ̃(Q_c) S_{c-1} + (φ̃(Q_c) φ(K_c)ᵀ ⊙ tril) V_c`` and
``S_c = S_{c-1} + φ(K_c)ᵀ V_c``: all dense matmuls (flash-linear-attention's scheme). One scan over chunks
(not tokens) carries S and does each chunk's work; the tokens are laid out chunk-major
``[chunks, rows, C, ·]`` before the feature maps, so the scan slices its inputs without transposing F-wide
arrays. Autodiff stores one F×(d+1) state and one C×C score block per chunk, nothing per token: memory
grows linearly in L. A call on one token with a state is the O(1) decoding step.

Decay (gated linear attention; Peng et al., "Random Feature Attention", ICLR 2021; Yang et al., "Gated
Linear Attention Transformers with Hardware-Efficient Training", ICML 2024): with log-decays ``g_t <= 0``,
``S_t = exp(g_t) S_{t-1} + φ(k_t)[v_t, 1]ᵀ``, and key j enters query i's sums with weight
``exp(G_i - G_j)``; with one decay per feature (GLA), ``S_t = diag(exp(g_t)) S_{t-1} + φ(k_t)[v_t, 1]ᵀ`` and
the weight is per feature, ``exp(G_if - G_jf)``. Only chunk-local sums are formed: inside a chunk key j
carries ``exp(b_ij)``, ``b_ij`` the sum of the decays between j and i, the state is decayed by the chunk's total,
so no sum grows with L and a total log-decay of -1e4 leaves every exponent finite. With a decay per feature the
chunk's scores come from GLA's secondary chunking (:mod:`rfa.attention.chunk_scores`): matmuls between sub-chunks
of 8 tokens, and a ``[8, 8, F]`` tensor of relative decays on the diagonal sub-chunks only, not ``[C, C, F]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.chunk_scores import contract, decayed_scores, later_sums
from rfa.attention.common import with_ones_column
from rfa.attention.kernelized.prepare import Call, check_decay_features, initial_rows, output, rows, state
from rfa.attention.state import LOWEST, RecurrentState
from rfa.random_features.feature_maps import Estimator, features_at, row_log_scale

Array = jax.Array


def to_chunks(x: Array, chunk: int, fill: float = 0.0) -> Array:
    """``[..., length, n]`` → chunk-major ``[chunks, ..., chunk, n]``, the last chunk padded with ``fill``."""
    length = x.shape[-2]
    num_chunks = -(-length // chunk)
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, num_chunks * chunk - length), (0, 0)], constant_values=fill)
    return jnp.moveaxis(x.reshape(x.shape[:-2] + (num_chunks, chunk, x.shape[-1])), -3, 0)


def from_chunks(x: Array, length: int) -> Array:
    """Inverse of :func:`to_chunks`: ``[chunks, ..., chunk, n]`` → ``[..., length, n]``."""
    x = jnp.moveaxis(x, 0, -3)
    return x.reshape(x.shape[:-3] + (-1, x.shape[-1]))[..., :length, :]


def _chunk_token_params(fm: Estimator, params: dict, token_shape: tuple[int, ...], chunk: int) -> dict:
    """Lays out the map's per-token parameters (``fm.token_params``) chunk-major like the tokens.

    A parameter constant along the length axis (a scalar, ``[heads, 1]``) broadcasts as it is.
    """
    chunked = dict(params)
    for name in set(fm.token_params) & set(params):
        event = fm.event_ndim(name)
        value = params[name]
        if jnp.ndim(value) > event and jnp.shape(value)[-1 - event] != 1:
            event_shape = jnp.shape(value)[jnp.ndim(value) - event :]
            per_token = jnp.broadcast_to(value, token_shape + event_shape).reshape(token_shape + (-1,))
            chunks = to_chunks(per_token, chunk)
            chunked[name] = chunks.reshape(chunks.shape[:-1] + event_shape)
    return chunked


def scan_chunks(phi_q, keys, key_log_mask, v_aug, log_decay, initial, contraction):
    """Chunked causal form on chunk-major ``[chunks, rows, C, ·]`` inputs; returns ``(num_aug, log_ref, state)``.

    Query i of a chunk reads ``exp(c_i) ⊙ S_prev + Σ_{j<=i} exp(b_ij) ⊙ φ(k_j)[v_j, 1]ᵀ`` with ``c_i`` the
    chunk's cumulative log-decay up to i and ``b_ij = Σ_{j<t<=i} g_t`` its segment sums. A decay is one number per
    token (``log_decay [.., C, 1]``) or one per feature (``[.., C, F]``, gated linear attention: then ``⊙`` scales
    each feature's row of S). The scores within the chunk are :func:`rfa.attention.chunk_scores.decayed_scores`:
    one matmul for a decay per token, GLA's secondary chunking for a decay per feature. Query i's reference is
    ``r_i = max(P + max_f c_if, max_{j<=i, f} s_j + b_ijf)``, ``P`` the log-scale of the state entering the chunk,
    so every exponent is <= 0; ``exp(r_i)`` is returned as ``log_ref`` (it cancels when normalized). The state leaves
    a chunk at the reference of its last token. A scan over chunks carries ``(S, P)`` and does all of a chunk's work:
    it forms the chunk's scores at the reference of the chunk's own keys and rescales them to ``r_i``, so neither the
    states nor the ``[chunks, rows, C, C]`` scores are materialized as one array (formed before the scan, the scores
    cost the causal form 6–7% on the project's CPU; the benchmarks page), and a step's matmuls stay batched over
    rows. ``S`` is held transposed, ``[dv+1, F]``: XLA:CPU contracts a chunk's tokens into that orientation faster
    than into ``[F, dv+1]`` (implementation notes in the docs). ``initial = (S [rows, dv+1, F],
    P [rows, 1, 1])``; ``contraction``: the keywords of :func:`~rfa.attention.chunk_scores.contract` (precision, and
    the operand dtype of every matmul: the decays, references and the carried state stay in the inputs' dtype).
    """
    base_k, log_k = keys
    s_k = row_log_scale(log_k)
    phi_k = features_at(base_k, log_k, s_k)
    s_k = s_k + key_log_mask  # -inf: left out (padding, or the tail of the last chunk)

    # The cumulative decays the carried state is read with, each key's decay to the chunk's end.
    if log_decay is None:
        from_start, to_end = jnp.zeros(s_k.shape[:2] + (1, 1), s_k.dtype), s_k
    else:
        from_start, to_end = jnp.cumsum(log_decay, axis=-2), s_k + later_sums(log_decay)  # c_if; s_j + b_Cjf

    def chunk_step(carry, chunk):
        state, log_scale = carry
        phi_q_c, phi_k_c, v_c, s_k_c, g_c, from_start_c, to_end_c = chunk
        scores_c, own_c = decayed_scores(phi_q_c, phi_k_c, g_c, key_log=s_k_c[..., 0], **contraction)  # [rows, C]
        state_log = log_scale + from_start_c  # P + c_if, [rows, C, 1 or F]
        ref = jax.lax.stop_gradient(jnp.maximum(own_c, jnp.max(state_log, axis=-1)))  # r_i, [rows, C]
        scores_c = scores_c * jnp.exp(jnp.where(jnp.isfinite(own_c), own_c - ref, -jnp.inf))[..., None]
        ref = ref[..., None]
        chunk_ref = ref[..., -1:, :]
        if state_log.shape[-1] == 1:  # one decay per token: scale the d_v + 1 side, narrower than the F side
            inter = contract("...qf,...df->...qd", phi_q_c, state, **contraction) * jnp.exp(state_log - ref)
            kv = contract("...kd,...kf->...df", v_c * jnp.exp(to_end_c - chunk_ref), phi_k_c, **contraction)
        else:
            inter = contract("...qf,...df->...qd", phi_q_c * jnp.exp(state_log - ref), state, **contraction)
            kv = contract("...kd,...kf->...df", v_c, phi_k_c * jnp.exp(to_end_c - chunk_ref), **contraction)
        intra = contract("...qk,...kd->...qd", scores_c, v_c, **contraction)
        state = state * jnp.exp(state_log[..., -1:, :] - chunk_ref) + kv
        return (state, chunk_ref), (intra + inter, ref)

    num_rows = phi_q.shape[1]
    if initial is None:
        initial = (
            jnp.zeros((num_rows, v_aug.shape[-1], phi_q.shape[-1]), jnp.result_type(phi_q, v_aug)),
            jnp.full((num_rows, 1, 1), LOWEST, s_k.dtype),
        )
    chunks = (phi_q, phi_k, v_aug, s_k, log_decay, from_start, to_end)
    final, (num_aug, log_ref) = jax.lax.scan(chunk_step, initial, chunks)
    return num_aug, log_ref[..., 0], final


@jax.jit
def causal(call: Call) -> tuple[Array, RecurrentState]:
    """The chunked causal mode: ``(output [batch..., L, heads, d_v], state after the keys)``."""
    fm, r = call.fm, rows(call, causal=True)
    length = r.q.shape[-2]
    chunk = max(1, min(call.chunk_size, length))  # chunk-major [chunks, rows, chunk, ·] from here on
    params = _chunk_token_params(fm, r.params, r.q.shape[:-1], chunk)
    q, k, v = (to_chunks(x, chunk) for x in (r.q, r.k, r.v))
    key_log_mask = to_chunks(r.key_log_mask, chunk, -jnp.inf)
    log_decay = None if r.log_decay is None else to_chunks(r.log_decay, chunk)
    phi_q, s_q = fm.split(q, call.projection, **params)
    check_decay_features(log_decay, phi_q.shape[-1], fm)
    keys = fm.terms(k, call.projection, side="key", **params)
    initial = None
    if call.initial_state is not None:
        kv0, ref0 = initial_rows(call.initial_state, r, fm, phi_q.shape[-1])
        initial = (jnp.swapaxes(kv0, -1, -2), ref0)
    num_aug, log_ref, (kv, log_scale) = scan_chunks(
        phi_q, keys, key_log_mask, with_ones_column(v), log_decay, initial, call.contraction
    )
    num_aug, log_ref, s_q = (from_chunks(x, length) for x in (num_aug, log_ref[..., None], s_q))
    out = output(call, num_aug, log_ref[..., 0], s_q[..., 0], r.shape)
    return out, state(jnp.swapaxes(kv, -1, -2), log_scale, r.shape)
