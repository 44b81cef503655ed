"""Kernelized (random-feature) attention in O(L·m·d): bidirectional, cross and chunked causal.

``Att(Q, K, V) ≈ D̂⁻¹ φ(Q) (φ(K)ᵀ V)`` with ``D̂ = diag(φ(Q) (φ(K)ᵀ 1))`` — the L×L matrix is
never formed (Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.2;
Katharopoulos et al., "Transformers are RNNs", ICML 2020).

Stabilizer. Each feature map is ``φ = base ⊙ exp(log)`` with a per-row log-scale
``s = max log`` (see :mod:`rfa.random_features.feature_maps`). Queries use ``φ̃ = φ exp(-s)``:
their per-row factor cancels between numerator and normalizer. Keys enter as ``φ exp(-R)`` with a
reference ``R`` at least as large as every ``s`` they are combined with: the global key maximum
(bidirectional), or per query the running maximum over the keys up to it (causal), so a large
later key never underflows the features of earlier ones. Both factors cancel exactly in normalized
attention; with ``renormalize=False`` they are multiplied back, giving ``φ(Q)(φ(K)ᵀV)`` itself,
the estimate of ``exp(QKᵀ/√d) V`` for the softmax-kernel maps. ``LOWEST`` (not -inf) stands for
"no key yet", so every exponent stays finite and <= 0.

Masking. Padded keys (and their values) are zeroed and their log-scales set to -inf, which removes
them from numerator and normalizer alike, so a padded batch equals the truncated sequences even if
the padding holds inf or NaN. Flax's dense masks are reduced to key padding, query padding and
whether they are causal (:mod:`rfa.attention.masks`); an arbitrary dense mask cannot be applied to
an implicit attention matrix and is refused.

Causal form (chunked, all dense matmuls; flash-linear-attention's scheme): with chunks of C
tokens, ``O_c = φ̃(Q_c) S_{c-1} + (φ̃(Q_c) φ(K_c)ᵀ ⊙ tril) V_c`` and
``S_c = S_{c-1} + φ(K_c)ᵀ V_c``. One scan over chunks (not tokens) carries S and does each chunk's
work; the tokens are laid out chunk-major ``[chunks, batch·heads, C, ·]`` before the feature
maps, so the scan slices its inputs without transposing F-wide arrays. Autodiff stores one
F×(d+1) state and one C×C score block per chunk, nothing per token: memory grows linearly in L.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import checkify

from rfa._validation import check_positive_int
from rfa.attention.common import check_causal_lengths, check_qkv, with_ones_column
from rfa.attention.common import renormalize as divide_by_normalizer
from rfa.attention.masks import CAUSAL, TRACED_MESSAGE, plan_mask
from rfa.random_features.feature_maps import FeatureMap, features_at, row_log_scale
from rfa.random_features.feature_maps import feature_map as lookup_feature_map

Array = jax.Array


def temperature(fm: FeatureMap, q: Array, k: Array) -> tuple[Array, Array]:
    """float32 q and k, scaled by d^{-1/4} each for maps that estimate ``exp(qᵀk/√d)``."""
    q = q.astype(jnp.float32)
    k = k.astype(jnp.float32)
    if fm.temperature_scaled:
        scale = q.shape[-1] ** -0.25
        q, k = q * scale, k * scale
    return q, k


def resolve_feature_params(fm: FeatureMap, params, q, k, keep_q, keep_k, *, causal: bool) -> dict:
    """Feature-map parameters, the ``fm.fitted`` ones fitted from q and k where none is given and that is allowed."""
    params = dict(params or {})
    missing = fm.to_fit(params)
    if missing:
        if causal:
            raise ValueError(
                f"feature map {fm.name!r} in causal or recurrent mode needs "
                f"{', '.join(f'feature_params[{name!r}]' for name in missing)} fixed in advance: fitting "
                "them to the sequence would let future tokens change earlier "
                "outputs. Fit them on calibration batches (rfa.attention.fit_feature_params, or "
                "rfa.attention.calibrating(model) for a model) or take "
                f"rfa.feature_map({fm.name!r}).standard_params(d)."
            )
        fitted = fm.fit(q, k, keep_q, keep_k)
        params.update({name: fitted[name] for name in missing})
    return params


def finish(num_aug: Array, log_reference: Array, s_q: Array, renormalize_output: bool) -> Array:
    """Output from ``φ̃(q)ᵀ[KV, z]``: ``D⁻¹ A V``, or ``A V`` with the stabilizers multiplied back.

    ``num_aug [..., dv+1]`` holds the numerator and (last column) the normalizer;
    ``log_reference`` and ``s_q`` have its shape without the last axis.
    """
    num, den = num_aug[..., :-1], num_aug[..., -1]
    if renormalize_output:
        return divide_by_normalizer(num, den)
    return num * jnp.exp(s_q + log_reference)[..., None]


LOWEST = float(jnp.finfo(jnp.float32).min)  # the reference before any key: exp(LOWEST - s) = 0


def _at_least_lowest(x: Array) -> Array:
    return jnp.maximum(x, LOWEST)


def _bidirectional(phi_q, keys, key_log_mask, v_aug, precision):
    """One global key reference ``R = max s(k)`` per batch and head; returns ``(num_aug, R)``.

    Head-major: ``phi_q [..., heads, q_len, F]``, ``keys = (base, log)`` of ``[..., heads, kv_len, ·]``,
    ``key_log_mask [..., heads or 1, kv_len, 1]``: 0 keep, -inf drop.
    """
    base_k, log_k = keys
    ref = _at_least_lowest(jnp.max(row_log_scale(log_k) + key_log_mask, axis=-2, keepdims=True))
    phi_k = features_at(base_k, log_k, ref - key_log_mask)
    kv = jnp.einsum("...kf,...kd->...fd", phi_k, v_aug, precision=precision)
    num_aug = jnp.einsum("...qf,...fd->...qd", phi_q, kv, precision=precision)
    return num_aug, ref[..., 0]


def _merge_rows(x: Array, rows: tuple[int, ...], trailing: int) -> Array:
    """Broadcasts ``x`` to ``[*rows, *x.shape[-trailing:]]`` and merges the ``rows`` axes into one."""
    x = jnp.broadcast_to(x, rows + x.shape[-trailing:])
    return x.reshape((-1,) + x.shape[len(rows) :])


def _to_chunks(x: Array, chunk: int, fill: float = 0.0) -> Array:
    """``[..., length, n]`` → chunk-major ``[chunks, ..., chunk, n]``, the last chunk padded with ``fill``."""
    length = x.shape[-2]
    num_chunks = -(-length // chunk)
    x = jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, num_chunks * chunk - length), (0, 0)], constant_values=fill)
    return jnp.moveaxis(x.reshape(x.shape[:-2] + (num_chunks, chunk, x.shape[-1])), -3, 0)


def _from_chunks(x: Array, length: int) -> Array:
    """Inverse of :func:`_to_chunks`: ``[chunks, ..., chunk, n]`` → ``[..., length, n]``."""
    x = jnp.moveaxis(x, 0, -3)
    return x.reshape(x.shape[:-3] + (-1, x.shape[-1]))[..., :length, :]


def _chunk_token_params(fm: FeatureMap, params: dict, token_shape: tuple[int, ...], chunk: int) -> dict:
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
            chunks = _to_chunks(per_token, chunk)
            chunked[name] = chunks.reshape(chunks.shape[:-1] + event_shape)
    return chunked


def _causal(phi_q, keys, key_log_mask, v_aug, precision):
    """Chunked causal form on chunk-major ``[chunks, ..., C, ·]`` inputs; returns ``(num_aug, r)``.

    ``r_i = max_{j<=i} s_j`` per query. Every key j <= i enters query i's sums as ``φ(k_j) exp(-r_i)``:
    inside a chunk as ``φ̃(k_j) exp(s_j - r_i)`` through a masked C×C factor, from earlier chunks
    through the state ``S``, kept at the reference ``R_c = r`` of the chunk's last token and read with
    ``exp(R_{c-1} - r_i)``. No exponent is ever positive, padded positions included (the running
    maximum carries through them). A scan over chunks carries ``S`` and does all of a chunk's work,
    so the states are never materialized as one array and a step's matmuls stay batched over
    ``batch·heads``. ``S`` is held transposed, ``[dv+1, F]``: XLA:CPU contracts a chunk's
    tokens into that orientation faster than into ``[F, dv+1]`` (1.6x on the benchmark's shapes).
    """
    base_k, log_k = keys
    s_k = row_log_scale(log_k)
    phi_k = features_at(base_k, log_k, s_k)
    s_k = s_k + key_log_mask  # -inf: left out (padding, or the tail of the last chunk)
    local = jax.lax.cummax(s_k, axis=s_k.ndim - 2)
    chunk_ref = _at_least_lowest(jax.lax.cummax(local[..., -1:, :], axis=0))  # R_c
    previous_ref = jnp.concatenate([jnp.full_like(chunk_ref[:1], LOWEST), chunk_ref[:-1]])  # R_{c-1}
    ref = jnp.maximum(local, previous_ref)  # r_i
    causal = jnp.tril(jnp.ones((phi_q.shape[-2],) * 2, jnp.bool_))

    def chunk_step(state, chunk):
        phi_q_c, phi_k_c, v_c, s_c, r_c, chunk_ref_c, previous_ref_c = chunk
        weights = jnp.exp(jnp.where(causal, jnp.swapaxes(s_c, -1, -2) - r_c, -jnp.inf))  # s_j - r_i
        scores = jnp.einsum("...qf,...kf->...qk", phi_q_c, phi_k_c, precision=precision) * weights
        intra = jnp.einsum("...qk,...kd->...qd", scores, v_c, precision=precision)
        inter = jnp.einsum("...qf,...df->...qd", phi_q_c, state, precision=precision)
        inter = inter * jnp.exp(previous_ref_c - r_c)
        v_at_chunk_ref = v_c * jnp.exp(s_c - chunk_ref_c)
        kv = jnp.einsum("...kd,...kf->...df", v_at_chunk_ref, phi_k_c, precision=precision)
        return state * jnp.exp(previous_ref_c - chunk_ref_c) + kv, intra + inter

    state = jnp.zeros(phi_q.shape[1:-2] + (v_aug.shape[-1], phi_q.shape[-1]), jnp.float32)
    _, num_aug = jax.lax.scan(chunk_step, state, (phi_q, phi_k, v_aug, s_k, ref, chunk_ref, previous_ref))
    return num_aug, ref[..., 0]


def kernelized_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    feature_map: str | FeatureMap,
    projection: Array | None,
    mask: Array | None = None,
    is_causal: bool = False,
    renormalize: bool = True,
    chunk_size: int = 64,
    feature_params: dict | None = None,
    precision=None,
) -> Array:
    """Random-feature attention ``D̂⁻¹ φ(Q)(φ(K)ᵀV)`` in O(L·m·d) time and memory.

    For every map with ``temperature_scaled`` (all registered ones but elu) q and k are scaled by
    ``d^{-1/4}`` before the map, so that the softmax-kernel maps (trig, positive, hyperbolic, gerf,
    oprf) estimate ``exp(qᵀk/√d)``; the Gaussian maps then estimate ``exp(-|q-k|²/(2√d))`` and relu
    is Performer's generalized attention. Computation runs in float32 and the output has ``q.dtype``.

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``; kv_len may differ from q_len (cross-attention).
      v: ``[batch..., kv_len, heads, d_v]``.
      feature_map: a registered name (``rfa.registered_feature_maps()``) or a ``FeatureMap``.
      projection: ``W`` of shape ``[m, d_k]`` from ``rfa.sample_projection``, shared by all heads;
        ``None`` for deterministic maps (elu).
      mask: an attention mask of any bool or numeric dtype (nonzero = attend) broadcastable to
        ``[batch..., heads, q_len, kv_len]``, as Flax builds them: key padding (``[..., 1, kv_len]``),
        query ⊗ key padding, or causal ∧ padding (then the chunked causal form runs). Padded queries
        output 0. Other patterns raise a ValueError; traced ones give NaN (see :mod:`rfa.attention.masks`).
      is_causal: each query attends to keys at or before its position (q_len == kv_len).
      renormalize: divide by the estimated normalizer ``D̂`` (attention); if False return
        ``φ(Q)(φ(K)ᵀV)`` itself (for softmax-kernel maps, the estimate of ``exp(QKᵀ/√d) V``).
        The normalizer is only guarded against exactly 0; with trig or Gaussian features it can be
        near 0 or negative, and the output then blows up — the estimator's own behaviour.
      chunk_size: tokens per chunk of the causal form.
      feature_params: feature-map parameters, e.g. ``{"A": -0.1}`` for gerf; arrays broadcast
        against ``[batch..., heads, length]`` (e.g. one value per head: ``[heads, 1]``). For oprf,
        ``phi_sq`` is ``|q + k|²`` of the temperature-scaled inputs (``d^{-1/2}|q + k|²``). Parameters
        the map fits from data (``fm.fitted``, e.g. oprf's ``phi_sq``) default to ``fm.fit`` of q and
        k in bidirectional mode and are required in causal mode.
      precision: ``jax.lax.Precision`` of the contractions.

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype``. A query with no attended key outputs 0.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 256, 64)
      >>> q = k = v = jnp.ones((2, 1024, 8, 64)) * 0.1
      >>> out = rfa.kernelized_attention(q, k, v, feature_map="positive", projection=W, is_causal=True)
      >>> out.shape
      (2, 1024, 8, 64)
    """
    q, k, v = check_qkv(q, k, v)
    fm = lookup_feature_map(feature_map)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if is_causal:
        check_causal_lengths(q, k)
    plan = plan_mask(mask, q, k, is_causal=is_causal)
    fm.check_params(feature_params or {})  # here, where concrete values can still be checked

    def attend(causal: bool) -> Array:
        out = _attend(
            q, k, v, fm, projection, plan.keep_keys, plan.keep_queries,
            causal=causal, renormalize=renormalize, chunk_size=chunk_size, feature_params=feature_params,
            precision=precision,
        )  # fmt: skip
        if plan.keep_queries is None:
            return out
        return jnp.where(jnp.swapaxes(plan.keep_queries, -1, -2)[..., None], out, 0).astype(out.dtype)

    if isinstance(plan.pattern, int):
        return attend(plan.pattern == CAUSAL)
    # A traced mask: its pattern is known at run time only (see rfa.attention.masks). `runnable` says
    # which of the patterns PADDING, CAUSAL, UNSUPPORTED this call can run.
    runnable = (not is_causal, q.shape[-3] == k.shape[-3] and not fm.to_fit(feature_params), False)
    checkify.debug_check(jnp.asarray(runnable)[plan.pattern], TRACED_MESSAGE)

    def unsupported() -> Array:
        return jnp.full(q.shape[:-1] + v.shape[-1:], jnp.nan, q.dtype)

    branches = [functools.partial(attend, p == CAUSAL) if ok else unsupported for p, ok in enumerate(runnable)]
    return jax.lax.switch(plan.pattern, branches)


# One compiled program even when called eagerly: op-by-op dispatch compiles every primitive on
# first use (1.3 s for a first eager call against 0.2 s jitted, on CPU).
@functools.partial(jax.jit, static_argnames=("fm", "causal", "renormalize", "chunk_size", "precision"))
def _attend(q, k, v, fm, projection, keep_keys, keep_queries, *, causal, renormalize, chunk_size, feature_params,
            precision) -> Array:  # fmt: skip
    """Kernelized attention with key padding ``keep_keys`` and query padding ``keep_queries`` (see MaskPlan).

    Padded queries are zeroed here so that they change no statistic or gradient; their output rows
    are set to 0 by the caller. The caller has checked the inputs and the parameters' values.
    """
    # Head-major [batch..., heads, length, ·] inside: every contraction is a plain batched matmul.
    q32, k32 = (jnp.swapaxes(x, -3, -2) for x in temperature(fm, q, k))
    v32 = jnp.swapaxes(v, -3, -2).astype(jnp.float32)
    keep_k, keep_q = (None if x is None else _head_major(x, q.shape[:-3]) for x in (keep_keys, keep_queries))
    if keep_q is not None:
        q32 = jnp.where(keep_q, q32, 0.0)
    if keep_k is None:
        key_log_mask = jnp.zeros(k32.shape[:-1] + (1,), jnp.float32)
    else:
        key_log_mask = jnp.where(keep_k, 0.0, -jnp.inf)
        k32, v32 = jnp.where(keep_k, k32, 0.0), jnp.where(keep_k, v32, 0.0)  # padding may hold inf or NaN
    params = resolve_feature_params(fm, feature_params, q32, k32, keep_q, keep_k, causal=causal)
    # [batch..., heads] merged into one axis: with a size-1 axis among them (batch 1) XLA:CPU copies
    # F-wide arrays between layouts that differ only in where that axis goes.
    rows = q32.shape[:-2]
    q32, k32, v32, key_log_mask = (_merge_rows(x, rows, 2) for x in (q32, k32, v32, key_log_mask))
    params = {
        name: _merge_rows(value, rows, 1 + fm.event_ndim(name))
        if name in fm.token_params and jnp.ndim(value) > fm.event_ndim(name)
        else value
        for name, value in params.items()
    }  # per-token parameters take the token layout; the others (arrays of the map: phases, R) stay as they are
    length = q32.shape[-2]
    if causal:  # chunk-major [chunks, batch·heads, chunk, ·] from here on
        chunk = min(chunk_size, length)
        params = _chunk_token_params(fm, params, q32.shape[:-1], chunk)
        q32, k32, v32 = (_to_chunks(x, chunk) for x in (q32, k32, v32))
        key_log_mask = _to_chunks(key_log_mask, chunk, -jnp.inf)
    phi_q, s_q = fm.split(q32, projection, **params)
    keys = fm.terms(k32, projection, side="key", **params)
    v_aug = with_ones_column(v32)
    if causal:
        num_aug, ref = _causal(phi_q, keys, key_log_mask, v_aug, precision)
    else:
        num_aug, ref = _bidirectional(phi_q, keys, key_log_mask, v_aug, precision)
    out = finish(num_aug, ref, s_q[..., 0], renormalize)
    if causal:
        out = _from_chunks(out, length)
    return jnp.swapaxes(out.reshape(rows + out.shape[-2:]), -3, -2).astype(q.dtype)


def _head_major(keep: Array, batch: tuple[int, ...]) -> Array:
    """``[batch'..., heads or 1, length]`` booleans → head-major ``[batch..., heads or 1, length, 1]``."""
    return jnp.broadcast_to(keep, batch + keep.shape[-2:])[..., None]
