"""The scores of a chunk under a decay per token or per feature, without a ``[C, C, F]`` tensor of relative decays.

Inside a chunk of C tokens, query i reads key j ≤ i through

    M_ij = Σ_f x_if y_jf exp(s_j + b_ijf − r_i),        b_ijf = Σ_{j<t≤i} g_tf,

``g`` the log-decays (one per token, ``[C, 1]``, or one per feature, ``[C, F]``), ``s_j`` the key's log-scale (the
stabilizer of kernelized attention's features; 0 for the delta rule) and ``r_i`` a reference per query that keeps
every exponent ≤ 0. A decay per token factors out of the sum: ``M = (X Yᵀ) ⊙ exp(s_j + b_ij − r_i)``, one matmul.
A decay per feature does not; forming ``exp(b_ijf)`` for every pair is a ``[C, C, F]`` tensor per chunk, which made
gated linear attention 8x slower than the delta rule's chunk. GLA's secondary chunking (Yang, Wang, Shen, Panda,
Kim, "Gated Linear Attention Transformers with Hardware-Efficient Training", ICML 2024, Sec. 4) avoids it: split
the chunk into sub-chunks of c tokens (16). Below the diagonal, between query sub-chunk a and a key j before it,
split the decays at the start of a, ``b_ijf = Σ_{start(a)≤t≤i} g_tf + Σ_{j<t<start(a)} g_tf``: a matmul of
queries scaled by ``exp(first part)`` and keys scaled by ``exp(second part)``, each ≤ 1, with a per-feature
reference ``ρ_af = max_{j<start(a)} (s_j + second part)`` moved from the keys to the queries so that neither side
overflows. Only the c × c diagonal blocks take the full ``exp(b_ijf)``, a ``[c, c, F]`` tensor per sub-chunk.

Every decay sum is a sum of the decays it spans (cumulative sums within a sub-chunk, or from the end), never a
difference of two cumulative sums, which loses the digits of a small decay beside a large one; log-decays down to
−300 per token and feature give finite values and gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

SUB_CHUNK = 16  # tokens per sub-chunk, as the paper's kernels


def segment_log_decays(log_decay: Array) -> Array:
    """``b[..., t, i] = Σ_{i<s≤t} g_s`` for ``i ≤ t`` (0 on the diagonal and above it), ``[..., C, n]`` →
    ``[..., C, C, n]``, for n decays per token.

    Summed term by term, not as a difference of cumulative sums, so a small decay beside a huge one keeps its
    digits."""
    size = log_decay.shape[-2]
    between = jnp.tril(jnp.ones((size, size), jnp.bool_), -1)[..., None]  # [s, i, 1]: s > i
    terms = jnp.where(between, log_decay[..., :, None, :], 0.0)  # [..., s, i, n]: g_s where s > i
    return jnp.cumsum(terms, axis=-3)  # [..., t, i, n]: Σ_{i<s≤t} g_s


def later_sums(log_decay: Array) -> Array:
    """``Σ_{t>j} g_t`` along the length axis (-2), summed from the end (not a difference of cumulative sums)."""
    later = jnp.concatenate([log_decay[..., 1:, :], jnp.zeros_like(log_decay[..., :1, :])], axis=-2)
    return jnp.flip(jnp.cumsum(jnp.flip(later, axis=-2), axis=-2), axis=-2)


def decayed_scores(
    x: Array,
    y: Array,
    log_decay: Array | None,
    *,
    key_log: Array | None = None,
    floor: Array | None = None,
    precision=None,
) -> tuple[Array, Array | None]:
    """The causal scores ``M_ij`` of one chunk (see the module's docstring), ``0`` above the diagonal.

    Args:
      x: queries' side ``[..., C, F]``.
      y: keys' side ``[..., C, F]``.
      log_decay: ``[..., C, 1]`` (one decay per token), ``[..., C, F]`` (one per feature) or None (no decay).
      key_log: the keys' log-scales ``s [..., C]`` (``-inf``: a key left out), or None (0, and no reference).
      floor: a lower bound ``[..., C]`` of each query's reference (the incoming state's part), or None.
      precision: of the contractions.

    Returns:
      ``(M [..., C, C], r [..., C])``: with ``key_log`` the reference ``r_i = max(floor_i, max_{j≤i, f} s_j +
      b_ijf)`` (no gradient; it cancels where the caller normalizes), else ``r = 0`` and ``None`` is returned.

    Example:
      >>> x = y = jnp.ones((4, 2))
      >>> scores, _ = decayed_scores(x, y, jnp.log(jnp.array([[1.0, 1.0]] + [[0.5, 1.0]] * 3)))
      >>> scores[3].tolist()  # feature 0 decays by 1/2 per token, feature 1 not
      [1.125, 1.25, 1.5, 2.0]
    """
    if log_decay is not None and log_decay.shape[-1] > 1:
        return _per_feature(x, y, log_decay, key_log, floor, precision)
    size = x.shape[-2]
    causal = jnp.tril(jnp.ones((size, size), jnp.bool_))
    log_weight = jnp.zeros((size, size)) if log_decay is None else segment_log_decays(log_decay)[..., 0]
    ref = None
    if key_log is not None:
        log_weight = log_weight + key_log[..., None, :]
        log_weight = jnp.where(causal, log_weight, -jnp.inf)
        ref = _reference(jnp.max(log_weight, axis=-1), floor)
        log_weight = log_weight - ref[..., None]
    weights = jnp.where(causal, jnp.exp(jnp.where(causal, log_weight, -jnp.inf)), 0.0)
    return jnp.einsum("...if,...jf->...ij", x, y, precision=precision) * weights, ref


def _reference(largest: Array, floor: Array | None) -> Array:
    """The reference per query, without gradient; 0 where nothing is kept (every weight is 0 there)."""
    ref = largest if floor is None else jnp.maximum(largest, floor)
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(ref), ref, 0.0))


def _per_feature(x, y, g, key_log, floor, precision) -> tuple[Array, Array | None]:
    """:func:`decayed_scores` with a decay per feature, by sub-chunks (the module's docstring)."""
    size = x.shape[-2]
    sub = min(SUB_CHUNK, size)
    num = -(-size // sub)
    padded = num * sub
    if padded > size:  # keys and queries after the chunk's end: they reach nothing kept and are cut off
        x, y, g = (jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, padded - size), (0, 0)]) for a in (x, y, g))
        if key_log is not None:
            key_log = jnp.pad(key_log, [(0, 0)] * (key_log.ndim - 1) + [(0, padded - size)], constant_values=-jnp.inf)
        if floor is not None:
            floor = jnp.pad(floor, [(0, 0)] * (floor.ndim - 1) + [(0, padded - size)])
    blocks = x.shape[:-2] + (num, sub, x.shape[-1])  # [..., a, i, f]: sub-chunk a, its token i
    xs, ys, gs = (a.reshape(blocks) for a in (x, y, g))
    s_sub = None if key_log is None else key_log.reshape(blocks[:-1])

    causal = jnp.tril(jnp.ones((sub, sub), jnp.bool_))[..., None]  # [i, j, 1]
    diagonal_log = segment_log_decays(gs)  # [..., a, i, j, f]: b_ijf within sub-chunk a
    if s_sub is not None:
        diagonal_log = diagonal_log + s_sub[..., None, :, None]
    diagonal_log = jnp.where(causal, diagonal_log, -jnp.inf)

    # Keys before sub-chunk a: their decays up to a's start, Σ_{j<t<start(a)} g_t, per a: [..., a, j, f].
    before = jnp.arange(padded)[None, :] < (sub * jnp.arange(num))[:, None]  # [a, j]: j before a's start
    key_log_before = later_sums(jnp.where(before[..., None], g[..., None, :, :], 0.0))
    if key_log is not None:
        key_log_before = key_log_before + key_log[..., None, :, None]
    key_log_before = jnp.where(before[..., None], key_log_before, -jnp.inf)
    query_log = jnp.cumsum(gs, axis=-2)  # [..., a, i, f]: Σ_{start(a)≤t≤i} g_t

    ref = None
    if key_log is None:  # every exponent is a sum of log-decays, ≤ 0 already
        shift = jnp.zeros(blocks[:-2] + blocks[-1:])  # [..., a, f]
        reached = jnp.ones(shift.shape, jnp.bool_)
    else:
        shift = jax.lax.stop_gradient(jnp.max(key_log_before, axis=-2))  # ρ_af, [..., a, f]; -inf: no key before
        reached = jnp.isfinite(shift)
        shift = jnp.where(reached, shift, 0.0)
        largest = jnp.maximum(
            jnp.max(diagonal_log, axis=(-2, -1)),  # [..., a, i]
            jnp.max(jnp.where(reached[..., None, :], query_log + shift[..., None, :], -jnp.inf), axis=-1),
        )
        ref = _reference(largest, None if floor is None else floor.reshape(blocks[:-1]))  # [..., a, i]
        query_log = query_log - ref[..., None]
        diagonal_log = diagonal_log - ref[..., None, None]
    reached, shift = reached[..., None, :], shift[..., None, :]  # [..., a, 1, f]
    queries = xs * jnp.exp(jnp.where(reached, query_log + shift, -jnp.inf))
    keys = y[..., None, :, :] * jnp.exp(jnp.where(reached, key_log_before - shift, -jnp.inf))
    below = jnp.einsum("...aif,...ajf->...aij", queries, keys, precision=precision)  # [..., a, i, j over the chunk]
    diagonal = jnp.einsum("...aif,...ajf,...aijf->...aij", xs, ys, jnp.exp(diagonal_log), precision=precision)
    diagonal = jnp.einsum("...aij,ab->...aibj", diagonal, jnp.eye(num, dtype=diagonal.dtype))
    scores = (below + diagonal.reshape(below.shape)).reshape(x.shape[:-2] + (padded, padded))
    scores = scores[..., :size, :size]
    return scores, None if ref is None else ref.reshape(x.shape[:-2] + (padded,))[..., :size]
