"""The scores of a chunk under a decay per token or per feature, without a ``[C, C, F]`` tensor of relative decays.

Inside a chunk of C tokens, query i reads key j ≤ i through

    M_ij = Σ_f x_if y_jf exp(s_j + b_ijf − r_i),        b_ijf = Σ_{j<t≤i} g_tf,

``g`` the log-decays (one per token, ``[C, 1]``, or one per feature, ``[C, F]``), ``s_j`` the key's log-scale (the
stabilizer of kernelized attention's features; 0 for the delta rule) and ``r_i`` a reference per query that keeps
every exponent ≤ 0. A decay per token factors out of the sum: ``M = (X Yᵀ) ⊙ exp(s_j + b_ij − r_i)``, one matmul.
A decay per feature does not; forming ``exp(b_ijf)`` for every pair is a ``[C, C, F]`` tensor per chunk, which made
gated linear attention 8x slower than the delta rule's chunk. GLA's secondary chunking (Yang, Wang, Shen, Panda,
Kim, "Gated Linear Attention Transformers with Hardware-Efficient Training", ICML 2024, Sec. 4) avoids it: split
the chunk into sub-chunks of c tokens (:data:`SUB_CHUNK`). Below the diagonal, between query sub-chunk a and a key j
of an earlier sub-chunk b, split the decays at the start of a,

    b_ijf = Σ_{start(a)≤t≤i} g_tf  +  Σ_{j<t≤end(b)} g_tf  +  Σ_{b<b'<a} G_b'f        (G_b' the total of sub-chunk b'),

three factors: the queries scaled by ``exp(first)``, the keys by ``exp(s_j + second − ρ'_bf)`` and a ``[a, b, F]``
carry ``exp(ρ'_bf + third − ρ_af)``, with per-feature references ``ρ'_bf`` (the largest key exponent of b) and
``ρ_af`` (the largest carried one into a) chosen so that every factor is ≤ 1, and ``ρ_af`` moved onto the queries.
The block is then a matmul; one exp per token and feature on each side. Only the c × c diagonal blocks take the
full ``exp(b_ijf)``, a ``[c, c, F]`` tensor per sub-chunk.

Every decay sum is a sum of the decays it spans (cumulative sums within a sub-chunk, or from the end), never a
difference of two cumulative sums, which loses the digits of a small decay beside a large one; log-decays down to
−300 per token and feature give finite values and gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

SUB_CHUNK = 8  # tokens per sub-chunk: 8 was faster than 4 and 16 on XLA:CPU (16 in the paper's GPU kernels)


def contract(spec: str, *arrays: Array, precision=None, operands=None) -> Array:
    """``jnp.einsum(spec, *arrays)`` with its operands cast to ``operands`` (None: as given) and summed in the
    arrays' own dtype: bfloat16 operands summed in float32, the mixed precision of MaxText's
    ``jax_chunk_gated_delta_rule(compute_dtype=...)`` and of fla's kernels.

    Example:
      >>> a = jnp.full((2, 3), 1 / 3)
      >>> out = contract("ij,kj->ik", a, a, operands=jnp.bfloat16)
      >>> out.dtype, bool(jnp.abs(out - 1 / 3).max() < 1e-2)
      (dtype('float32'), True)
    """
    if operands is None:
        return jnp.einsum(spec, *arrays, precision=precision)
    total = jnp.result_type(*arrays)
    cast = (a.astype(operands) for a in arrays)
    return jnp.einsum(spec, *cast, precision=precision, preferred_element_type=total)


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
    precision=None,
    operands=None,
) -> tuple[Array, Array | None]:
    """The causal scores ``M_ij`` of one chunk (see the module's docstring), ``0`` above the diagonal.

    Args:
      x: queries' side ``[..., C, F]``.
      y: keys' side ``[..., C, F]``.
      log_decay: ``[..., C, 1]`` (one decay per token), ``[..., C, F]`` (one per feature) or None (no decay).
      key_log: the keys' log-scales ``s [..., C]`` (``-inf``: a key left out), or None (0, and no reference).
      precision: of the contractions.
      operands: the contractions' operand dtype (:func:`contract`; None: the inputs'); the decays, their sums and
        their exponentials stay in the inputs' dtype.

    Returns:
      ``(M [..., C, C], r [..., C])``: with ``key_log`` the reference ``r_i = max_{j≤i, f} s_j + b_ijf`` (no
      gradient; it cancels where the caller normalizes; ``-inf`` where query i reaches no key, and its scores are
      0), else ``r = 0`` and ``None`` is returned.

    Example:
      >>> x = y = jnp.ones((4, 2))
      >>> scores, _ = decayed_scores(x, y, jnp.log(jnp.array([[1.0, 1.0]] + [[0.5, 1.0]] * 3)))
      >>> scores[3].tolist()  # feature 0 decays by 1/2 per token, feature 1 not
      [1.125, 1.25, 1.5, 2.0]
    """
    if log_decay is not None and log_decay.shape[-1] > 1:
        return _per_feature(x, y, log_decay, key_log, precision, operands)
    size = x.shape[-2]
    causal = jnp.tril(jnp.ones((size, size), jnp.bool_))
    log_weight = jnp.zeros((size, size), x.dtype) if log_decay is None else segment_log_decays(log_decay)[..., 0]
    ref = None
    if key_log is not None:
        log_weight = log_weight + key_log[..., None, :]
        log_weight = jnp.where(causal, log_weight, -jnp.inf)
        ref, safe = _reference(jnp.max(log_weight, axis=-1))
        log_weight = log_weight - safe[..., None]
    weights = jnp.where(causal, jnp.exp(jnp.where(causal, log_weight, -jnp.inf)), 0.0)
    return contract("...if,...jf->...ij", x, y, precision=precision, operands=operands) * weights, ref


def _reference(largest: Array) -> tuple[Array, Array]:
    """The reference per query without gradient, and the one to subtract: 0 where nothing is kept (-inf)."""
    ref = jax.lax.stop_gradient(largest)
    return ref, jnp.where(jnp.isfinite(ref), ref, 0.0)


def _per_feature(x, y, g, key_log, precision, operands) -> tuple[Array, Array | None]:
    """:func:`decayed_scores` with a decay per feature, by sub-chunks (the module's docstring)."""
    size = x.shape[-2]
    sub = min(SUB_CHUNK, size)
    num = -(-size // sub)
    padded = num * sub
    if padded > size:  # keys and queries after the chunk's end: they reach nothing kept and are cut off
        x, y, g = (jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, padded - size), (0, 0)]) for a in (x, y, g))
        if key_log is not None:
            key_log = jnp.pad(key_log, [(0, 0)] * (key_log.ndim - 1) + [(0, padded - size)], constant_values=-jnp.inf)
    blocks = x.shape[:-2] + (num, sub, x.shape[-1])  # [..., a, i, f]: sub-chunk a, its token i
    xs, ys, gs = (a.reshape(blocks) for a in (x, y, g))
    s_sub = jnp.zeros(blocks[:-1], x.dtype) if key_log is None else key_log.reshape(blocks[:-1])

    causal = jnp.tril(jnp.ones((sub, sub), jnp.bool_))[..., None]  # [i, j, 1]
    diagonal_log = segment_log_decays(gs) + s_sub[..., None, :, None]  # [..., a, i, j, f]: s_j + b_ijf in a
    diagonal_log = jnp.where(causal, diagonal_log, -jnp.inf)

    # A key j of sub-chunk b < a reaches a's start through Σ_{j<t<start(a)} g_t = (its decays to b's end) + (the
    # totals of the sub-chunks between b and a): a [.., b, j, f] factor and a [.., a, b, f] one, each ≤ 1 after its
    # per-feature reference, so the key side costs one exp per token and feature.
    key_own = later_sums(gs) + s_sub[..., None]  # [..., b, j, f]: s_j + Σ_{j<t≤end(b)} g_t
    own_ref = jax.lax.stop_gradient(jnp.max(key_own, axis=-2))  # ρ'_bf, -inf where every key of b is left out
    own_ref = jnp.where(jnp.isfinite(own_ref), own_ref, 0.0)
    keys = ys * jnp.exp(key_own - own_ref[..., None, :])
    between = segment_log_decays(jnp.sum(gs, axis=-2))  # [..., t, b, f]: Σ_{b<s≤t} totals_s
    between = jnp.concatenate([jnp.zeros_like(between[..., :1, :, :]), between[..., :-1, :, :]], axis=-3)
    earlier = jnp.tril(jnp.ones((num, num), jnp.bool_), -1)[..., None]  # [a, b, 1]: b < a
    carried = jnp.where(earlier, own_ref[..., None, :, :] + between, -jnp.inf)  # [..., a, b, f]
    shift = jax.lax.stop_gradient(jnp.max(carried, axis=-2))  # ρ_af: -inf where nothing reaches a
    reached = jnp.isfinite(shift)
    shift = jnp.where(reached, shift, 0.0)
    carry = jnp.exp(carried - shift[..., None, :])  # [..., a, b, f], ≤ 1, 0 for b ≥ a
    query_log = jnp.cumsum(gs, axis=-2)  # [..., a, i, f]: Σ_{start(a)≤t≤i} g_t

    ref = None
    if key_log is not None:
        largest = jnp.maximum(
            jnp.max(diagonal_log, axis=(-2, -1)),  # [..., a, i]
            jnp.max(jnp.where(reached[..., None, :], query_log + shift[..., None, :], -jnp.inf), axis=-1),
        )
        ref, safe = _reference(largest)  # [..., a, i]
        query_log = query_log - safe[..., None]
        diagonal_log = diagonal_log - safe[..., None, None]
    queries = xs * jnp.exp(jnp.where(reached[..., None, :], query_log + shift[..., None, :], -jnp.inf))
    carried_keys = carry[..., :, :, None, :] * keys[..., None, :, :, :]  # [..., a, b, j, f]: key j of b seen from a
    mixed = dict(precision=precision, operands=operands)
    below = contract("...aif,...abjf->...aibj", queries, carried_keys, **mixed)  # [..., a, i, b, j]
    diagonal = contract("...aif,...ajf,...aijf->...aij", xs, ys, jnp.exp(diagonal_log), **mixed)
    diagonal = jnp.einsum("...aij,ab->...aibj", diagonal, jnp.eye(num, dtype=diagonal.dtype))
    scores = (below + diagonal).reshape(x.shape[:-2] + (padded, padded))[..., :size, :size]
    return scores, None if ref is None else ref.reshape(x.shape[:-2] + (padded,))[..., :size]
