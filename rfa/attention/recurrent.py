"""Recurrent form of causal kernelized attention: O(1) work per decoded token.

The state after t tokens is ``S_t = Σ_{j<=t} φ(k_j)[v_j, 1]ᵀ`` (``[F, d_v + 1]``: the last column
is the normalizer ``z_t = Σ φ(k_j)``), and ``o_t = φ(q_t)ᵀ S_t[:, :d_v] / φ(q_t)ᵀ z_t``
(Katharopoulos et al., "Transformers are RNNs", ICML 2020, Sec. 3.4). Keys are stored at the
reference ``R_t = max_{j<=t} s(k_j)``, the running maximum of their log-scales: when a larger key
arrives the state is rescaled by ``exp(R_{t-1} - R_t) <= 1``, so it never overflows and agrees with
the chunked causal form to float32 rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from rfa._validation import check_broadcastable_to, check_floating, check_positive_int, check_rank
from rfa.attention.common import as_bool_mask, with_ones_column
from rfa.attention.kernelized import finish, resolve_feature_params, temperature
from rfa.random_features.feature_maps import FeatureMap
from rfa.random_features.feature_maps import feature_map as lookup_feature_map

Array = jax.Array


class RecurrentState(NamedTuple):
    """Decoding state of causal kernelized attention.

    Attributes:
      kv: ``[batch..., heads, F, d_v + 1]``, ``Σ_j exp(s_j - R) φ̃(k_j) [v_j, 1]ᵀ``.
      log_reference: ``[batch..., heads]``, R, the running maximum of the keys' log-scales.
    """

    kv: Array
    log_reference: Array


def init_state(batch_shape: tuple[int, ...], num_heads: int, num_outputs: int, value_dim: int) -> RecurrentState:
    """The empty state (no token seen yet).

    Args:
      batch_shape: leading batch dims, e.g. ``(batch,)`` or ``()``.
      num_heads: heads.
      num_outputs: F, the feature-map output length,
        ``rfa.feature_map(name).num_outputs(num_features, head_dim)``.
      value_dim: d_v.

    Returns:
      A :class:`RecurrentState` of zeros, with the reference at the lowest float32.

    Example:
      >>> state = rfa.attention.init_state((2,), 8, 256, 64)
      >>> state.kv.shape
      (2, 8, 256, 65)
    """
    if not isinstance(batch_shape, tuple | list) or not all(isinstance(b, int) and b >= 1 for b in batch_shape):
        raise ValueError(f"batch_shape must be a tuple of ints >= 1, got {batch_shape!r}.")
    num_heads = check_positive_int(num_heads, "num_heads")
    num_outputs = check_positive_int(num_outputs, "num_outputs")
    value_dim = check_positive_int(value_dim, "value_dim")
    batch_shape = tuple(batch_shape)
    return RecurrentState(
        kv=jnp.zeros(batch_shape + (num_heads, num_outputs, value_dim + 1), jnp.float32),
        log_reference=jnp.full(batch_shape + (num_heads,), jnp.finfo(jnp.float32).min, jnp.float32),
    )


def _check_token(x, name, last):
    x = check_floating(x, name)
    check_rank(x, name, min_ndim=2, layout=f"[batch..., heads, {last}]")
    return x


def _check_token_mask(mask, shape) -> Array:
    mask = as_bool_mask(mask, "keep the token")
    check_broadcastable_to(mask.shape, shape, "mask", "[batch..., heads] =")
    return jnp.broadcast_to(mask, shape)


def step(
    state: RecurrentState,
    q: Array,
    k: Array,
    v: Array,
    *,
    feature_map: str | FeatureMap,
    projection: Array | None,
    mask: Array | None = None,
    renormalize: bool = True,
    feature_params: dict | None = None,
    precision=None,
) -> tuple[RecurrentState, Array]:
    """Consumes one token: adds its key and value to the state and attends with its query.

    Equal to row t of ``kernelized_attention(..., is_causal=True)`` with the same features.

    Args:
      state: from :func:`init_state` or the previous step.
      q: ``[batch..., heads, d_k]`` query of the new token.
      k: ``[batch..., heads, d_k]`` its key.
      v: ``[batch..., heads, d_v]`` its value.
      feature_map, projection, renormalize, feature_params, precision: as in
        ``rfa.kernelized_attention``; array parameters broadcast against ``[batch..., heads, 1]``
        (the layout ``[batch..., heads, length]`` of every mode, this token being the length axis;
        oprf needs ``feature_params["phi_sq"]``).
      mask: optional, broadcastable to ``[batch..., heads]``, nonzero = keep: 0 leaves this token's key
        and value out of the state (e.g. left padding of a batched prompt).

    Returns:
      ``(new_state, output [batch..., heads, d_v])``, the output in ``q.dtype``.

    Example:
      >>> fm = rfa.feature_map("positive"); W = rfa.sample_projection(jax.random.key(0), 64, 16)
      >>> state = rfa.attention.init_state((2,), 4, fm.num_outputs(64, 16), 16)
      >>> x = jnp.ones((2, 4, 16))
      >>> state, out = rfa.attention.step(state, x, x, x, feature_map=fm, projection=W)
    """
    q, k, v = _check_token(q, "q", "d_k"), _check_token(k, "k", "d_k"), _check_token(v, "v", "d_v")
    if not (q.shape == k.shape and k.shape[:-1] == v.shape[:-1]):
        raise ValueError(
            "q and k must have the same shape [batch..., heads, d_k] and v must agree on "
            f"[batch..., heads], got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}."
        )
    expected = q.shape[:-1] + (state.kv.shape[-2], v.shape[-1] + 1)
    if state.kv.shape != expected or state.log_reference.shape != q.shape[:-1]:
        raise ValueError(
            f"state does not match the token: state.kv has shape {tuple(state.kv.shape)} and "
            f"state.log_reference {tuple(state.log_reference.shape)}, expected [batch..., heads, F, d_v + 1] "
            f"= {expected[:-2]} + (F, {v.shape[-1] + 1}) and {tuple(q.shape[:-1])}."
        )
    fm = lookup_feature_map(feature_map)
    keep = None if mask is None else _check_token_mask(mask, q.shape[:-1])
    phi_k, s_k, v32, params = _key_terms(
        fm, k[..., None, :], v[..., None, :], None if keep is None else keep[..., None], projection, feature_params
    )
    phi_k, s_k, v32 = phi_k[..., 0, :], s_k[..., 0], v32[..., 0, :]
    if phi_k.shape[-1] != state.kv.shape[-2]:
        raise ValueError(
            f"state has F = {state.kv.shape[-2]} features but feature map {fm.name!r} gives "
            f"{phi_k.shape[-1]}; build the state with num_outputs={phi_k.shape[-1]}."
        )
    reference = jnp.maximum(state.log_reference, s_k)
    decay = jnp.exp(state.log_reference - reference)
    phi_k = phi_k * jnp.exp(s_k - reference)[..., None]
    kv = decay[..., None, None] * state.kv + phi_k[..., :, None] * with_ones_column(v32)[..., None, :]
    new_state = RecurrentState(kv, reference)
    return new_state, _read(new_state, fm, q, projection, params, renormalize, precision)


def _key_terms(fm: FeatureMap, k, v, keep, projection, feature_params):
    """Stabilized key features ``φ̃(k)``, their log-scales (``-inf`` where left out), float32 values, params.

    Head-major: ``k [batch..., heads, length, d_k]``, ``v [..., heads, length, d_v]``, ``keep`` of
    ``[..., heads, length]`` or None; parameter arrays broadcast against ``[batch..., heads, length]``
    as in ``rfa.kernelized_attention``. Returns ``φ̃(k) [..., heads, length, F]`` and ``s [..., heads, length]``.
    """
    _, k32 = temperature(fm, k, k)
    v32 = v.astype(jnp.float32)
    if keep is not None:  # as in kernelized_attention: a left-out token may hold inf or NaN
        k32, v32 = jnp.where(keep[..., None], k32, 0.0), jnp.where(keep[..., None], v32, 0.0)
    params = resolve_feature_params(fm, feature_params, k32, k32, None, None, causal=True)
    phi_k, s_k = fm.split(k32, projection, side="key", **params)
    s_k = s_k[..., 0] if keep is None else jnp.where(keep, s_k[..., 0], -jnp.inf)
    return phi_k, s_k, v32, params


def _read(state: RecurrentState, fm: FeatureMap, q, projection, params, renormalize, precision) -> Array:
    """``φ(q)ᵀS`` normalized (or not) for one query per state: ``q [batch..., heads, d_k]``."""
    q32, _ = temperature(fm, q, q)
    phi_q, s_q = fm.split(q32[..., None, :], projection, **params)  # a length axis of 1 for the parameters
    num_aug = jnp.einsum("...hf,...hfd->...hd", phi_q[..., 0, :], state.kv, precision=precision)
    return finish(num_aug, state.log_reference, s_q[..., 0, 0], renormalize).astype(q.dtype)


def prefill(
    k: Array,
    v: Array,
    *,
    feature_map: str | FeatureMap,
    projection: Array | None,
    mask: Array | None = None,
    feature_params: dict | None = None,
    precision=None,
) -> RecurrentState:
    """The state after a whole sequence of keys and values at once: ``Σ_j φ(k_j)[v_j, 1]ᵀ`` in O(L·F·d_v).

    Use it for the encoder side of cross-attention (computed once, then read by :func:`attend`
    at every decoding step) or to consume a prompt before :func:`step`.

    Args:
      k: ``[batch..., length, heads, d_k]``.
      v: ``[batch..., length, heads, d_v]``.
      feature_map, projection, feature_params, precision: as in :func:`step` (array parameters
        broadcast against ``[batch..., heads, length]``, as in ``rfa.kernelized_attention``).
      mask: optional, broadcastable to ``[batch..., length, heads]``, nonzero = keep: 0 leaves a token out.

    Returns:
      A :class:`RecurrentState` with ``kv [batch..., heads, F, d_v + 1]``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 64, 16)
      >>> k = v = jnp.ones((2, 10, 4, 16))
      >>> state = rfa.attention.prefill(k, v, feature_map="positive", projection=W)
      >>> state.kv.shape
      (2, 4, 64, 17)
    """
    k, v = _check_token(k, "k", "d_k"), _check_token(v, "v", "d_v")
    check_rank(k, "k", min_ndim=3, layout="[batch..., length, heads, d_k]")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"k and v must agree on [batch..., length, heads], got k {tuple(k.shape)} and v {tuple(v.shape)}."
        )
    fm = lookup_feature_map(feature_map)
    keep = None if mask is None else _check_token_mask(mask, k.shape[:-1])
    head_major = (jnp.swapaxes(x, -3, -2) for x in (k, v))
    keep = None if keep is None else jnp.swapaxes(keep, -1, -2)
    phi_k, s_k, v32, _ = _key_terms(fm, *head_major, keep, projection, feature_params)
    reference = jnp.max(s_k, axis=-1)  # [batch..., heads]
    safe = jnp.where(jnp.isfinite(reference), reference, jnp.finfo(jnp.float32).min)
    weights = jnp.exp(s_k - safe[..., None])[..., None] * phi_k  # [batch..., heads, length, F]
    kv = jnp.einsum("...hlf,...hld->...hfd", weights, with_ones_column(v32), precision=precision)
    return RecurrentState(kv, safe)


def attend(
    state: RecurrentState,
    q: Array,
    *,
    feature_map: str | FeatureMap,
    projection: Array | None,
    renormalize: bool = True,
    feature_params: dict | None = None,
    precision=None,
) -> Array:
    """Attends with query tokens to a state without changing it: ``φ(q)ᵀS / φ(q)ᵀz``.

    Args:
      state: from :func:`prefill` or :func:`step`, ``kv [batch..., heads, F, d_v + 1]``.
      q: ``[batch..., heads, d_k]`` (one token per state).
      feature_map, projection, renormalize, feature_params, precision: as in :func:`step`.

    Returns:
      ``[batch..., heads, d_v]`` in ``q.dtype``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 64, 16)
      >>> state = rfa.attention.prefill(jnp.ones((2, 10, 4, 16)), jnp.ones((2, 10, 4, 16)),
      ...                               feature_map="positive", projection=W)
      >>> rfa.attention.attend(state, jnp.ones((2, 4, 16)), feature_map="positive", projection=W).shape
      (2, 4, 16)
    """
    q = _check_token(q, "q", "d_k")
    if state.kv.shape[:-2] != q.shape[:-1]:
        raise ValueError(
            f"state.kv {tuple(state.kv.shape)} does not match q {tuple(q.shape)}: expected "
            "[batch..., heads, F, d_v + 1] with the batch and heads of q."
        )
    fm = lookup_feature_map(feature_map)
    params = resolve_feature_params(fm, feature_params, q, q, None, None, causal=True)
    return _read(state, fm, q, projection, params, renormalize, precision)
