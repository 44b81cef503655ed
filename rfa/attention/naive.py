"""The quadratic reference of kernelized attention: the L×L weight matrix formed explicitly.

``A_ij = φ(q_i)ᵀφ(k_j) · exp(G_i - G_j) · allowed_ij`` (``G`` the cumulative log-decay, 0 without
one), ``out = D⁻¹ A V`` with ``D = diag(A 1)``, plus what an initial state ``S_0`` contributes,
``exp(G_i) φ(q_i)ᵀS_0`` (causal; ``φ(q_i)ᵀS_0`` bidirectional). No chunks, no stabilizer, no state
carried: the formula as the papers write it (Katharopoulos et al., "Transformers are RNNs", ICML
2020, Eq. 4–6; Yang et al., "Gated Linear Attention Transformers", ICML 2024, Sec. 2), O(L²) in
time and memory. Every mode of :func:`rfa.kernelized_attention` is tested against it (outputs,
states and gradients, for every feature map), and it is here for anyone checking a new map or a
new form the same way. Its features are formed unstabilized, so keep inputs moderate (``|x|²/2``
of the temperature-scaled inputs well inside float32's exp range).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.common import renormalize as divide_by_normalizer
from rfa.attention.common import with_ones_column
from rfa.attention.kernelized import check_call, resolve_feature_params, temperature
from rfa.attention.masks import CAUSAL, UNSUPPORTED
from rfa.attention.state import RecurrentState
from rfa.random_features.feature_maps import Estimator

Array = jax.Array


def naive_kernelized_attention(
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
    feature_params: dict | None = None,
    precision=None,
    initial_state: RecurrentState | None = None,
    return_state: bool = False,
) -> Array | tuple[Array, RecurrentState]:
    """Kernelized attention with the ``q_len × kv_len`` matrix formed: the reference for every mode.

    Same call and meaning as :func:`rfa.kernelized_attention` (without ``chunk_size``): the same
    masks (key padding, query ⊗ key padding, causal ∧ padding; a key left out is skipped, its decay
    too), parameters, temperature and states. The returned state has ``log_reference = 0``: its
    ``kv`` is ``S`` itself.

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      v: ``[batch..., kv_len, heads, d_v]``.
      feature_map, projection, mask, is_causal, log_decay, renormalize, feature_params, precision,
      initial_state, return_state: as in :func:`rfa.kernelized_attention`.

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype``; with ``return_state``, ``(output, state)``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 64, 16)
      >>> q = k = v = 0.3 * jax.random.normal(jax.random.key(1), (2, 12, 4, 16))
      >>> g = jnp.full((2, 12, 4), -0.1)
      >>> fast = rfa.kernelized_attention(q, k, v, feature_map="positive", projection=W, is_causal=True,
      ...                                 log_decay=g, chunk_size=5)
      >>> slow = rfa.attention.naive_kernelized_attention(q, k, v, feature_map="positive", projection=W,
      ...                                                 is_causal=True, log_decay=g)
      >>> bool(jnp.allclose(fast, slow, atol=1e-5))
      True
    """
    q, k, v, fm, plan, log_decay, initial_state = check_call(
        q, k, v, feature_map=feature_map, mask=mask, is_causal=is_causal, log_decay=log_decay,
        feature_params=feature_params, initial_state=initial_state,
    )  # fmt: skip
    batch, (q_len, heads), kv_len = q.shape[:-3], q.shape[-3:-1], k.shape[-3]
    keep_k = jnp.ones(batch + (heads, kv_len), bool) if plan.keep_keys is None else plan.keep_keys
    keep_q = jnp.ones(batch + (heads, q_len), bool) if plan.keep_queries is None else plan.keep_queries
    keep_k, keep_q = (jnp.broadcast_to(x, batch + (heads,) + x.shape[-1:]) for x in (keep_k, keep_q))
    causal = jnp.asarray(plan.pattern) == CAUSAL
    allowed = keep_q[..., :, None] & keep_k[..., None, :]
    allowed = allowed & (jnp.tril(jnp.ones((q_len, kv_len), bool)) | ~causal)

    # head-major [batch..., heads, length, ·]
    q32, k32 = (jnp.swapaxes(x, -3, -2) for x in temperature(fm, q, k))
    q32 = jnp.where(keep_q[..., None], q32, 0.0)
    k32 = jnp.where(keep_k[..., None], k32, 0.0)
    v32 = jnp.where(keep_k[..., None], jnp.swapaxes(v, -3, -2).astype(jnp.float32), 0.0)
    stateful = initial_state is not None or bool(return_state)
    fit_keep_q = None if plan.keep_queries is None else keep_q[..., None]  # None: the fit's own default, as rfa's
    params = resolve_feature_params(
        fm, feature_params, q32, k32, fit_keep_q, keep_k[..., None], fixed=is_causal or stateful
    )
    phi_q = fm(q32, projection, **params)
    phi_k = fm(k32, projection, side="key", **params)

    # G_i = Σ_{t<=i} g_t at the queries and at the keys (one sequence when decaying: causal, q_len == kv_len)
    if log_decay is None:
        G_q, G_k, G_total = (jnp.zeros(batch + (heads, n)) for n in (q_len, kv_len, 1))
    else:
        g = jnp.where(keep_k, jnp.swapaxes(jnp.broadcast_to(log_decay, q.shape[:-1]), -1, -2), 0.0)
        G_q = G_k = jnp.cumsum(g, axis=-1)
        G_total = G_k[..., -1:]
    log_weights = jnp.where(allowed, G_q[..., :, None] - G_k[..., None, :], -jnp.inf)  # G_i - G_j where allowed
    a = jnp.einsum("...qf,...kf->...qk", phi_q, phi_k, precision=precision) * jnp.exp(log_weights)
    v_aug = with_ones_column(v32)
    num_aug = jnp.einsum("...qk,...kd->...qd", a, v_aug, precision=precision)
    if initial_state is not None:
        state_scale = initial_state.log_reference[..., None] + G_q  # S_0 decayed up to i
        from_state = jnp.einsum("...qf,...fd->...qd", phi_q, initial_state.kv, precision=precision)
        num_aug = num_aug + jnp.where(keep_q[..., None], from_state * jnp.exp(state_scale)[..., None], 0.0)
    num, den = num_aug[..., :-1], num_aug[..., -1]
    out = divide_by_normalizer(num, den) if renormalize else num
    out = jnp.where(keep_q[..., None], out, 0.0)
    out = jnp.where(jnp.asarray(plan.pattern) == UNSUPPORTED, jnp.nan, out)
    out = jnp.swapaxes(out, -3, -2).astype(q.dtype)
    if not return_state:
        return out
    key_weights = jnp.exp(jnp.where(keep_k, G_total - G_k, -jnp.inf))  # exp(G_L - G_j) for kept keys
    kv = jnp.einsum("...kf,...kd->...fd", phi_k * key_weights[..., None], v_aug, precision=precision)
    if initial_state is not None:
        kv = kv + initial_state.kv * jnp.exp(initial_state.log_reference[..., None] + G_total)[..., None]
    return out, RecurrentState(kv, jnp.zeros(kv.shape[:-2]))
