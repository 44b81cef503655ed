"""Kernelized (random-feature) attention in O(L·m·d): bidirectional, cross, chunked causal and recurrent.

``Att(Q, K, V) ≈ D̂⁻¹ φ(Q) (φ(K)ᵀ V)`` with ``D̂ = diag(φ(Q) (φ(K)ᵀ 1))`` — the L×L matrix is
never formed (Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.2;
Katharopoulos et al., "Transformers are RNNs", ICML 2020).

One function, one state. Every mode is :func:`kernelized_attention`: bidirectional or causal,
starting from a :class:`~rfa.attention.RecurrentState` (``initial_state``) and returning the state
after its keys (``return_state=True``). A prompt's state continues token by token (a call on one
token is the O(1) decoding step: the causal form with a chunk of one token) and from there in
another chunked pass, without conversion. :func:`rfa.attention.naive_kernelized_attention` is the
quadratic reference every mode is tested against.

Decay (gated linear attention; Peng et al., "Random Feature Attention", ICLR 2021; Yang et al.,
"Gated Linear Attention Transformers with Hardware-Efficient Training", ICML 2024). With per-token
log-decays ``g_t <= 0`` the causal state is ``S_t = exp(g_t) S_{t-1} + φ(k_t)[v_t, 1]ᵀ``: key j
enters query i's sums with weight ``exp(G_i - G_j)``, ``G`` the cumulative log-decay. Only
chunk-local sums are formed (simple-GLA): inside a chunk key j carries ``exp(b_ij)``, ``b_ij`` the
sum of the decays between j and i, the state is decayed by the chunk's total, so no sum grows
with L and a total log-decay of -1e4 leaves every exponent finite.
A key left out by the mask is skipped: it adds nothing and its decay is not applied.

Stabilizer. Each feature map is ``φ = base ⊙ exp(log)`` with a per-row log-scale ``s = max log``
(see :mod:`rfa.random_features.feature_maps`). Queries use ``φ̃ = φ exp(-s)``: their per-row factor
cancels between numerator and normalizer. Keys enter as ``φ exp(-R)`` with a reference ``R`` at
least as large as every log-weight they are combined with: the global key maximum
(bidirectional), or per query the maximum of the decayed log-weights of the keys up to it and of
the state (causal), so a large later key never underflows the features of earlier ones. The
references are constants for autodiff (any reference gives the same output); the decay terms keep
their gradients. With ``renormalize=False`` the factors are multiplied back, giving
``φ(Q)(φ(K)ᵀV)`` itself, the estimate of ``exp(QKᵀ/√d) V`` for the softmax-kernel maps.
``LOWEST`` (not -inf) stands for "no key yet", so every exponent stays finite and <= 0.

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
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from rfa._validation import check_broadcastable_to, check_floating, check_positive_int, is_concrete
from rfa.attention import sequence_parallel
from rfa.attention.common import check_causal_lengths, check_qkv, with_ones_column
from rfa.attention.common import renormalize as divide_by_normalizer
from rfa.attention.masks import CAUSAL, TRACED_MESSAGE, MaskPlan, plan_mask
from rfa.attention.state import LOWEST, RecurrentState, check_state
from rfa.random_features.feature_maps import Estimator, features_at, row_log_scale
from rfa.random_features.feature_maps import feature_map as lookup_feature_map

Array = jax.Array


def temperature(fm: Estimator, q: Array, k: Array) -> tuple[Array, Array]:
    """float32 q and k, scaled by d^{-1/4} each for maps that estimate ``exp(qᵀk/√d)``."""
    q = q.astype(jnp.float32)
    k = k.astype(jnp.float32)
    if fm.temperature_scaled:
        scale = q.shape[-1] ** -0.25
        q, k = q * scale, k * scale
    return q, k


def resolve_feature_params(fm: Estimator, params, q, k, keep_q, keep_k, *, fixed: bool) -> dict:
    """Feature-map parameters, the ``fm.fitted`` ones fitted from q and k where none is given and ``fixed`` is False."""
    params = dict(params or {})
    missing = fm.to_fit(params)
    if missing:
        if fixed:
            raise ValueError(
                f"feature map {fm.name!r} in causal mode, with a state or sequence-parallel needs "
                f"{', '.join(f'feature_params[{name!r}]' for name in missing)} fixed in advance: fitting "
                "them to the call's tokens would let future tokens change earlier outputs, or read a "
                "state built with other parameters. Fit them on calibration batches "
                "(rfa.attention.fit_feature_params, or rfa.attention.calibrating(model) for a model) or take "
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


def _at_least_lowest(x: Array) -> Array:
    return jnp.maximum(x, LOWEST)


def _bidirectional(phi_q, keys, key_log_mask, v_aug, initial, precision):
    """One global key reference ``R = max s(k)`` per row; returns ``(num_aug, R, (kv [F, dv+1], R))``.

    Row-major: ``phi_q [rows, q_len, F]``, ``keys = (base, log)`` of ``[rows, kv_len, ·]``,
    ``key_log_mask [rows, kv_len, 1]`` (0 keep, -inf drop), ``initial = (kv [rows, F, dv+1], R0 [rows, 1, 1])``.
    """
    base_k, log_k = keys
    ref = jnp.max(row_log_scale(log_k) + jax.lax.stop_gradient(key_log_mask), axis=-2, keepdims=True, initial=-jnp.inf)
    if initial is not None:
        ref = jnp.maximum(ref, jax.lax.stop_gradient(initial[1]))
    ref = _at_least_lowest(ref)
    phi_k = features_at(base_k, log_k, ref - key_log_mask)
    kv = jnp.einsum("...kf,...kd->...fd", phi_k, v_aug, precision=precision)
    if initial is not None:
        kv = kv + initial[0] * jnp.exp(initial[1] - ref)
    num_aug = jnp.einsum("...qf,...fd->...qd", phi_q, kv, precision=precision)
    return num_aug, ref[..., 0], (kv, ref)


def _merge_rows(x: Array, rows: tuple[int, ...], trailing: int) -> Array:
    """Broadcasts ``x`` to ``[*rows, *x.shape[-trailing:]]`` and merges the ``rows`` axes into one."""
    x = jnp.broadcast_to(x, rows + x.shape[x.ndim - trailing :])
    return x.reshape((math.prod(rows),) + x.shape[len(rows) :])


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
            chunks = _to_chunks(per_token, chunk)
            chunked[name] = chunks.reshape(chunks.shape[:-1] + event_shape)
    return chunked


def _causal(phi_q, keys, key_log_mask, v_aug, log_decay, initial, precision):
    """Chunked causal form on chunk-major ``[chunks, rows, C, ·]`` inputs; returns ``(num_aug, log_ref, state)``.

    Query i of a chunk reads ``exp(c_i) S_prev + Σ_{j<=i} exp(b_ij) φ(k_j)[v_j, 1]ᵀ`` with ``c_i`` the
    chunk's cumulative log-decay up to i and ``b_ij = Σ_{j<t<=i} g_t`` its segment sums, formed as
    sums of the decays in between (not as ``c_i - c_j``, which would lose the digits of a small
    decay next to a huge one). Its reference is ``r_i = max(P + c_i, max_{j<=i} s_j + b_ij)``, ``P``
    the log-scale of the state entering the chunk, so every exponent is <= 0; ``exp(r_i)`` is
    returned as ``log_ref`` (it cancels when normalized). The state leaves a chunk at the reference of
    its last token. A scan over chunks carries ``(S, P)`` and does all of a chunk's work, so the
    states are never materialized as one array and a step's matmuls stay batched over rows. ``S`` is
    held transposed, ``[dv+1, F]``: XLA:CPU contracts a chunk's tokens into that orientation faster
    than into ``[F, dv+1]`` (1.6x on the benchmark's shapes). ``initial = (S [rows, dv+1, F], P [rows, 1, 1])``.
    """
    base_k, log_k = keys
    s_k = row_log_scale(log_k)
    phi_k = features_at(base_k, log_k, s_k)
    s_k = s_k + key_log_mask  # -inf: left out (padding, or the tail of the last chunk)
    size = phi_q.shape[-2]
    causal = jnp.tril(jnp.ones((size, size), jnp.bool_))
    after = jnp.tril(jnp.ones((size, size), jnp.bool_), -1)  # t > j: the decays between key j and query i

    def chunk_step(carry, chunk):
        state, log_scale = carry
        phi_q_c, phi_k_c, v_c, s_c, g_c = chunk
        key_log = jnp.swapaxes(s_c, -1, -2)  # [rows, 1, C]: s_j
        state_log = log_scale
        if g_c is not None:
            key_log = key_log + jnp.cumsum(jnp.where(after, g_c, 0.0), axis=-2)  # s_j + b_ij, [rows, C, C]
            state_log = log_scale + jnp.cumsum(g_c, axis=-2)  # P + c_i
        key_log = jnp.where(causal, key_log, -jnp.inf)
        ref = jax.lax.stop_gradient(jnp.maximum(jnp.max(key_log, axis=-1, keepdims=True), state_log))  # r_i
        scores = jnp.einsum("...qf,...kf->...qk", phi_q_c, phi_k_c, precision=precision) * jnp.exp(key_log - ref)
        intra = jnp.einsum("...qk,...kd->...qd", scores, v_c, precision=precision)
        inter = jnp.einsum("...qf,...df->...qd", phi_q_c, state, precision=precision)
        inter = inter * jnp.exp(state_log - ref)
        chunk_ref = ref[..., -1:, :]
        last = jnp.swapaxes(key_log[..., -1:, :], -1, -2)  # s_j + b_Cj, [rows, C, 1]
        kv = jnp.einsum("...kd,...kf->...df", v_c * jnp.exp(last - chunk_ref), phi_k_c, precision=precision)
        state = state * jnp.exp(state_log[..., -1:, :] - chunk_ref) + kv
        return (state, chunk_ref), (intra + inter, ref)

    rows = phi_q.shape[1]
    if initial is None:
        initial = (jnp.zeros((rows, v_aug.shape[-1], phi_q.shape[-1]), jnp.float32), jnp.full((rows, 1, 1), LOWEST))
    final, (num_aug, log_ref) = jax.lax.scan(chunk_step, initial, (phi_q, phi_k, v_aug, s_k, log_decay))
    return num_aug, log_ref[..., 0], final


def check_log_decay(log_decay, q: Array, is_causal: bool) -> Array:
    """Checks ``log_decay`` (floating, <= 0, broadcastable to ``[batch..., q_len, heads]``); returns it float32."""
    if not is_causal:
        raise ValueError(
            "log_decay needs is_causal=True: a decay weighs key j for query i by exp(G_i - G_j), which is "
            "defined for j <= i only. Use is_causal=True, or leave log_decay None."
        )
    log_decay = check_floating(log_decay, "log_decay")
    check_broadcastable_to(log_decay.shape, q.shape[:-1], "log_decay", "[batch..., q_len, heads] =")
    if is_concrete(log_decay) and bool(np.any(np.asarray(log_decay) > 0)):  # NumPy: no tracer inside a jit
        raise ValueError(
            f"log_decay must be <= 0 (a decay factor exp(g) <= 1), got a maximum of {np.max(log_decay)}; "
            "a gate in (0, 1) gives log_decay = log(gate), e.g. jax.nn.log_sigmoid(logits)."
        )
    return log_decay.astype(jnp.float32)


class CheckedCall(NamedTuple):
    """The inputs of a kernelized-attention call after :func:`check_call`."""

    q: Array
    k: Array
    v: Array
    fm: Estimator
    plan: MaskPlan
    log_decay: Array | None
    initial_state: RecurrentState | None


def check_call(q, k, v, *, feature_map, mask, is_causal, log_decay, feature_params, initial_state) -> CheckedCall:
    """The checks every mode's call makes (shapes, map, mask, decay, state, parameter values), before tracing."""
    q, k, v = check_qkv(q, k, v)
    fm = lookup_feature_map(feature_map)
    if is_causal:
        check_causal_lengths(q, k)
    if log_decay is not None:
        log_decay = check_log_decay(log_decay, q, is_causal)
    if initial_state is not None:
        initial_state = check_state(initial_state, q.shape[:-3] + q.shape[-2:-1], v.shape[-1])
    plan = plan_mask(mask, q, k, is_causal=is_causal)
    fm.check_params(feature_params or {})  # here, where concrete values can still be checked
    return CheckedCall(q, k, v, fm, plan, log_decay, initial_state)


def kernelized_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    feature_map: str | Estimator,
    projection: Array | None,
    mask: Array | None = None,
    is_causal: bool = False,
    log_decay: Array | None = None,
    renormalize: bool = True,
    chunk_size: int = 64,
    feature_params: dict | None = None,
    precision=None,
    initial_state: RecurrentState | None = None,
    return_state: bool = False,
    sequence_axis: str | None = None,
) -> Array | tuple[Array, RecurrentState]:
    """Random-feature attention ``D̂⁻¹ φ(Q)(φ(K)ᵀV)`` in O(L·m·d) time and memory, in every mode.

    For every map with ``temperature_scaled`` (all registered ones but elu) q and k are scaled by
    ``d^{-1/4}`` before the map, so that the softmax-kernel maps (trig, positive, hyperbolic, gerf,
    oprf) estimate ``exp(qᵀk/√d)``; the Gaussian maps then estimate ``exp(-|q-k|²/(2√d))`` and relu
    is Performer's generalized attention. Computation runs in float32 and the output has ``q.dtype``.

    Modes: bidirectional (``is_causal=False``; also cross-attention), chunked causal
    (``is_causal=True``), recurrent (a causal call on one token with ``initial_state`` and
    ``return_state=True``: O(F·d_v) per token at any position), prefill (``return_state=True``; the
    state of keys alone: pass a query of length 0) and reading a state (``initial_state`` with keys
    of length 0, e.g. cross-attention while decoding).

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``; kv_len may differ from q_len (cross-attention).
      v: ``[batch..., kv_len, heads, d_v]``.
      feature_map: a registered name (``rfa.registered_feature_maps()``) or an ``Estimator``.
      projection: ``W`` of shape ``[m, d_k]`` from ``rfa.sample_projection``, shared by all heads;
        ``None`` for deterministic maps (elu).
      mask: an attention mask of any bool or numeric dtype (nonzero = attend) broadcastable to
        ``[batch..., heads, q_len, kv_len]``, as Flax builds them: key padding (``[..., 1, kv_len]``),
        query ⊗ key padding, or causal ∧ padding (then the chunked causal form runs). Padded queries
        output 0. Other patterns raise a ValueError; traced ones give NaN (see :mod:`rfa.attention.masks`).
      is_causal: each query attends to keys at or before its position (q_len == kv_len) and to the
        initial state.
      log_decay: per-token log-decays ``g <= 0`` broadcastable to ``[batch..., q_len, heads]``
        (causal only): ``S_t = exp(g_t) S_{t-1} + φ(k_t)[v_t, 1]ᵀ``. Gradients flow to it. A gate's
        input weight (``1 - gate`` in gated RFA) is the caller's: fold it into v (and the keys' weight).
      renormalize: divide by the estimated normalizer ``D̂`` (attention); if False return
        ``φ(Q)(φ(K)ᵀV)`` itself (for softmax-kernel maps, the estimate of ``exp(QKᵀ/√d) V``).
        The normalizer is only guarded against exactly 0; with trig or Gaussian features it can be
        near 0 or negative, and the output then blows up — the estimator's own behaviour.
      chunk_size: tokens per chunk of the causal form.
      feature_params: feature-map parameters, e.g. ``{"A": -0.1}`` for gerf; arrays broadcast
        against ``[batch..., heads, length]`` (e.g. one value per head: ``[heads, 1]``). For oprf,
        ``phi_sq`` is ``|q + k|²`` of the temperature-scaled inputs (``d^{-1/2}|q + k|²``). Parameters
        the map fits from data (``fm.fitted``, e.g. oprf's ``phi_sq``) default to ``fm.fit`` of q and
        k in bidirectional mode without a state and are required otherwise.
      precision: ``jax.lax.Precision`` of the contractions.
      initial_state: a :class:`~rfa.attention.RecurrentState` of earlier keys (``[batch..., heads, F,
        d_v + 1]``): every query also attends to them (causal: decayed by the log-decays up to it).
      return_state: also return the state after this call's keys (and the initial state).
      sequence_axis: inside ``jax.shard_map``, the mesh axis along which the sequence is split: q, k, v
        are this device's contiguous block (device order is sequence order), the output is this
        block's, and the state is the whole sequence's (:mod:`rfa.attention.sequence_parallel`). Masks
        must be key padding (``[..., 1, kv_len]``) of this block; map parameters must be fixed.

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype`` (a query with no attended key outputs 0);
      with ``return_state``, ``(output, state)``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 256, 64)
      >>> q = k = v = jnp.ones((2, 1024, 8, 64)) * 0.1
      >>> out, state = rfa.kernelized_attention(q, k, v, feature_map="positive", projection=W, is_causal=True,
      ...                                       return_state=True)
      >>> token = q[:, :1]  # decoding: one more token continues from the prompt's state
      >>> out, state = rfa.kernelized_attention(token, token, token, feature_map="positive", projection=W,
      ...                                       is_causal=True, initial_state=state, return_state=True)
      >>> out.shape, state.kv.shape
      ((2, 1, 8, 64), (2, 8, 256, 65))
    """
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    q, k, v, fm, plan, log_decay, initial_state = check_call(
        q, k, v, feature_map=feature_map, mask=mask, is_causal=is_causal, log_decay=log_decay,
        feature_params=feature_params, initial_state=initial_state,
    )  # fmt: skip
    if sequence_axis is not None:
        out, state = _sequence_parallel(
            q, k, v, fm, projection, mask, plan, log_decay, initial_state, axis=sequence_axis, is_causal=is_causal,
            renormalize=renormalize, chunk_size=chunk_size, feature_params=feature_params, precision=precision,
        )  # fmt: skip
        return (out, state) if return_state else out
    stateful = initial_state is not None or bool(return_state)

    def attend(causal: bool):
        out, state = _attend(
            q, k, v, fm, projection, plan.keep_keys, plan.keep_queries, log_decay, initial_state,
            causal=causal, stateful=stateful, renormalize=renormalize, chunk_size=chunk_size,
            feature_params=feature_params, precision=precision,
        )  # fmt: skip
        if plan.keep_queries is not None:
            out = jnp.where(jnp.swapaxes(plan.keep_queries, -1, -2)[..., None], out, 0).astype(out.dtype)
        return (out, state) if return_state else out

    if isinstance(plan.pattern, int):
        return attend(plan.pattern == CAUSAL)
    # A traced mask: its pattern is known at run time only (see rfa.attention.masks). `runnable` says
    # which of the patterns PADDING, CAUSAL, UNSUPPORTED this call can run.
    can_fit = not fm.to_fit(feature_params)
    runnable = (not is_causal and log_decay is None, q.shape[-3] == k.shape[-3] and can_fit, False)
    checkify.debug_check(jnp.asarray(runnable)[plan.pattern], TRACED_MESSAGE)
    if not any(runnable):  # causal with parameters to fit: the causal form raises the error that says so
        return attend(True)
    shapes = jax.eval_shape(functools.partial(attend, runnable.index(True) == CAUSAL))

    def unsupported():
        return jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)

    branches = [functools.partial(attend, p == CAUSAL) if ok else unsupported for p, ok in enumerate(runnable)]
    return jax.lax.switch(plan.pattern, branches)


# One compiled program even when called eagerly: op-by-op dispatch compiles every primitive on
# first use (1.3 s for a first eager call against 0.2 s jitted, on CPU).
@functools.partial(jax.jit, static_argnames=("fm", "causal", "stateful", "renormalize", "chunk_size", "precision"))
def _attend(q, k, v, fm, projection, keep_keys, keep_queries, log_decay, initial_state, *, causal, stateful,
            renormalize, chunk_size, feature_params, precision) -> tuple[Array, RecurrentState]:  # fmt: skip
    """Kernelized attention with key padding ``keep_keys`` and query padding ``keep_queries`` (see MaskPlan).

    Padded queries are zeroed here so that they change no statistic or gradient; their output rows
    are set to 0 by the caller. The caller has checked the inputs and the parameters' values.
    Returns ``(output, state after the keys)``.
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
    if log_decay is not None:
        log_decay = jnp.swapaxes(jnp.broadcast_to(log_decay, k.shape[:-1]), -1, -2)[..., None]
        if keep_k is not None:  # a left-out key is skipped: no decay either
            log_decay = jnp.where(keep_k, log_decay, 0.0)
        if not causal:  # the keys' state at the end of the sequence: key j decayed by the decays after it
            key_log_mask = key_log_mask + _later_sums(log_decay)
            log_decay = None
    params = resolve_feature_params(fm, feature_params, q32, k32, keep_q, keep_k, fixed=causal or stateful)
    # [batch..., heads] merged into one axis: with a size-1 axis among them (batch 1) XLA:CPU copies
    # F-wide arrays between layouts that differ only in where that axis goes.
    rows = q32.shape[:-2]
    q32, k32, v32, key_log_mask = (_merge_rows(x, rows, 2) for x in (q32, k32, v32, key_log_mask))
    log_decay = None if log_decay is None else _merge_rows(log_decay, rows, 2)
    params = {
        name: _merge_rows(value, rows, 1 + fm.event_ndim(name))
        if name in fm.token_params and jnp.ndim(value) > fm.event_ndim(name)
        else value
        for name, value in params.items()
    }  # per-token parameters take the token layout; the others (arrays of the map: phases, R) stay as they are
    length = q32.shape[-2]
    if causal:  # chunk-major [chunks, rows, chunk, ·] from here on
        chunk = max(1, min(chunk_size, length))
        params = _chunk_token_params(fm, params, q32.shape[:-1], chunk)
        q32, k32, v32 = (_to_chunks(x, chunk) for x in (q32, k32, v32))
        key_log_mask = _to_chunks(key_log_mask, chunk, -jnp.inf)
        log_decay = None if log_decay is None else _to_chunks(log_decay, chunk)
    phi_q, s_q = fm.split(q32, projection, **params)
    keys = fm.terms(k32, projection, side="key", **params)
    v_aug = with_ones_column(v32)
    initial = None if initial_state is None else _initial(initial_state, rows, phi_q.shape[-1], fm, transpose=causal)
    if causal:
        num_aug, log_ref, (kv, log_scale) = _causal(phi_q, keys, key_log_mask, v_aug, log_decay, initial, precision)
        kv = jnp.swapaxes(kv, -1, -2)
    else:
        num_aug, log_ref, (kv, log_scale) = _bidirectional(phi_q, keys, key_log_mask, v_aug, initial, precision)
    out = finish(num_aug, log_ref, s_q[..., 0], renormalize)
    if causal:
        out = _from_chunks(out, length)
    out = jnp.swapaxes(out.reshape(rows + out.shape[-2:]), -3, -2).astype(q.dtype)
    state = RecurrentState(kv.reshape(rows + kv.shape[-2:]), log_scale.reshape(rows))
    return out, state


def _initial(state: RecurrentState, rows: tuple[int, ...], num_outputs: int, fm: Estimator, *, transpose: bool):
    """The state row-major: ``(kv [rows, F, dv+1]`` (``[rows, dv+1, F]`` if ``transpose``), ``R [rows, 1, 1])``."""
    if state.kv.shape[-2] != num_outputs:
        raise ValueError(
            f"initial_state has F = {state.kv.shape[-2]} features but feature map {fm.name!r} gives "
            f"{num_outputs} with this projection; build the state with num_outputs={num_outputs}."
        )
    kv = state.kv.reshape((math.prod(rows),) + state.kv.shape[-2:])
    return (jnp.swapaxes(kv, -1, -2) if transpose else kv), state.log_reference.reshape(-1, 1, 1)


def _sequence_parallel(q, k, v, fm, projection, mask, plan, log_decay, initial_state, *, axis, is_causal, renormalize,
                       chunk_size, feature_params, precision):  # fmt: skip
    """``(this block's output, the sequence's state)`` of attention split along the mesh axis ``axis``."""
    sequence_parallel.check_axis(axis)
    sequence_parallel.check_key_padding(mask)

    def attend(q_, k_, v_, *, causal, log_decay, initial_state):  # a part of this block (no keys, or all of them)
        keep = plan.keep_keys if k_.shape[-3] == k.shape[-3] else None
        return _attend(
            q_, k_, v_, fm, projection, keep, None, log_decay, initial_state, causal=causal, stateful=True,
            renormalize=renormalize, chunk_size=chunk_size, feature_params=feature_params, precision=precision,
        )  # fmt: skip

    if not is_causal:
        return sequence_parallel.bidirectional(attend, axis, q, k, v, initial_state)
    decay = jnp.zeros(q.shape[:-1]) if log_decay is None else jnp.broadcast_to(log_decay, q.shape[:-1])
    if plan.keep_keys is not None:  # [batch..., heads or 1, L] -> [batch..., L, heads or 1]
        decay = jnp.where(jnp.swapaxes(jnp.broadcast_to(plan.keep_keys, q.shape[:-3] + plan.keep_keys.shape[-2:]),
                                       -1, -2), decay, 0.0)  # fmt: skip
    return sequence_parallel.causal(attend, axis, q, k, v, log_decay, jnp.sum(decay, axis=-2), initial_state)


def _later_sums(log_decay: Array) -> Array:
    """``Σ_{t>j} g_t`` along the length axis (-2), summed from the end (not a difference of cumulative sums)."""
    later = jnp.concatenate([log_decay[..., 1:, :], jnp.zeros_like(log_decay[..., :1, :])], axis=-2)
    return jnp.flip(jnp.cumsum(jnp.flip(later, axis=-2), axis=-2), axis=-2)


def _head_major(keep: Array, batch: tuple[int, ...]) -> Array:
    """``[batch'..., heads or 1, length]`` booleans → head-major ``[batch..., heads or 1, length, 1]``."""
    return jnp.broadcast_to(keep, batch + keep.shape[-2:])[..., None]
