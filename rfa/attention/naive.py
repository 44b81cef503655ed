"""The quadratic reference of kernelized attention: the L×L weight matrix formed explicitly.

``A_ij = Σ_f φ(q_i)_f φ(k_j)_f · exp(G_if - G_jf) · exp(b_{i-j}) · M_ij`` (``M`` the mask, causal or not;
``G`` the cumulative log-decay over the kept keys, one per token or per feature, 0 without one; ``b`` a relative
bias, 0 without one),
``out = D⁻¹ A V`` with ``D = diag(A 1)``, plus what an initial state ``S_0`` contributes, ``exp(G_i) φ(q_i)ᵀS_0``.
No chunks, no stabilizer, no state carried: the formula as the papers write it (Katharopoulos et al.,
"Transformers are RNNs", ICML 2020, Eq. 4–6; Yang et al., "Gated Linear Attention Transformers", ICML 2024,
Sec. 2; Luo et al., "Stable, Fast and Accurate: Kernelized Attention with Relative Positional Encoding",
NeurIPS 2021), O(L²) in time and memory.

It shares nothing with the fast modes but the checks of its inputs: it scales q and k for the
temperature itself, applies the mask as the dense matrix it is (so it gives the masked formula for masks
the fast modes refuse), defines the kept keys and queries from the mask itself, and fits or refuses the
map's parameters itself. Every mode of :func:`rfa.kernelized_attention` is tested against it (outputs,
states and gradients, for every feature map), and it is here for anyone checking a new map or a new form
the same way. Its features are formed unstabilized, so keep inputs moderate (``|x|²/2`` of the
temperature-scaled inputs well inside float32's exp range).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, renamed_keywords
from rfa.attention.common import check_mask, check_qkv
from rfa.attention.kernelized.prepare import check_decay_features, check_log_decay, check_relative_bias, per_feature
from rfa.attention.state import RecurrentState, check_state
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def _fixed_or_fitted(fm: Estimator, params, q, k, keep_q, keep_k, *, fixed: bool, why: str) -> dict:
    """The map's parameters: the given ones, and the ``fitted`` ones fitted to q and k unless ``fixed``."""
    params = dict(params or {})
    if not fm.fitted or set(params) & set(fm.fitted):
        return params
    if fixed:
        names = ", ".join(f"feature_params[{name!r}]" for name in fm.fitted)
        raise InputError(
            f"feature map {fm.name!r} {why} needs {names} fixed in advance: a fit to this call's tokens would let "
            "later tokens change earlier outputs, or read a state built with other parameters."
        )
    return {**params, **fm.fit(q, k, keep_q, keep_k)}


def naive_kernelized_attention(
    q: Array,
    k: Array,
    v: Array,
    *,
    estimator: str | Estimator,
    projection: Array | None,
    mask: Array | None = None,
    is_causal: bool = False,
    log_decay: Array | None = None,
    renormalize: bool = True,
    feature_params: dict | None = None,
    precision=None,
    initial_state: RecurrentState | None = None,
    return_state: bool = False,
    relative_bias: Array | None = None,
) -> Array | tuple[Array, RecurrentState]:
    """Kernelized attention with the ``q_len × kv_len`` matrix formed: the reference for every mode.

    Same call and meaning as :func:`rfa.kernelized_attention` (without ``chunk_size``): the same
    parameters, temperature and states. The mask is applied as it is: a key is kept if some query
    attends it (a key left out is skipped, its decay too), and a dense mask's query that attends no
    key outputs 0. The returned state has ``log_reference = 0``: its ``kv`` is ``S`` itself.

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      v: ``[batch..., kv_len, heads, d_v]``.
      estimator, projection, mask, is_causal, log_decay: as in :func:`rfa.kernelized_attention`.
      renormalize, feature_params, precision, initial_state, return_state, relative_bias: as in
        :func:`rfa.kernelized_attention` (the bias as the dense ``exp(b[L - 1 + i - j])`` matrix).

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype``; with ``return_state``, ``(output, state)``.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 64, 16)
      >>> q = k = v = 0.3 * jax.random.normal(jax.random.key(1), (2, 12, 4, 16))
      >>> g = jnp.full((2, 12, 4), -0.1)
      >>> fast = rfa.kernelized_attention(q, k, v, estimator="positive", projection=W, is_causal=True,
      ...                                 log_decay=g, chunk_size=5)
      >>> slow = rfa.attention.naive_kernelized_attention(q, k, v, estimator="positive", projection=W,
      ...                                                 is_causal=True, log_decay=g)
      >>> bool(jnp.allclose(fast, slow, atol=1e-5))
      True
    """
    q, k, v = check_qkv(q, k, v)
    fm = lookup_estimator(estimator)
    fm.check_params(feature_params or {})
    batch, (q_len, heads), kv_len = q.shape[:-3], q.shape[-3:-1], k.shape[-3]
    if is_causal and q_len != kv_len:
        raise InputError(f"is_causal=True needs q_len == kv_len, got q_len={q_len} and kv_len={kv_len}.")
    if log_decay is not None:
        log_decay = check_log_decay(log_decay, q, is_causal)
    if initial_state is not None:
        initial_state = check_state(initial_state, batch + (heads,), v.shape[-1])
    if relative_bias is not None:
        relative_bias = check_relative_bias(
            relative_bias,
            q,
            k,
            log_decay=log_decay,
            stateful=initial_state is not None or bool(return_state),
            sequence_axis=None,
        )

    # M_ij as a dense [batch..., heads, q_len, kv_len] matrix, and the keys and queries it keeps.
    dense = (heads, q_len, kv_len)
    allowed = jnp.ones(batch + dense, bool) if mask is None else jnp.broadcast_to(check_mask(mask, q, k), batch + dense)
    if is_causal:
        allowed = allowed & jnp.tril(jnp.ones((q_len, kv_len), bool))
    keep_k = jnp.any(allowed, axis=-2)
    key_padding = mask is None or jnp.ndim(mask) < 2 or jnp.shape(mask)[-2] == 1  # the same keys for every query
    keep_q = jnp.ones(batch + (heads, q_len), bool) if key_padding else jnp.any(allowed, axis=-1)

    # Head-major [batch..., heads, length, d], scaled so that φ(q)ᵀφ(k) estimates exp(qᵀk/√d).
    scale = q.shape[-1] ** -0.25 if fm.temperature_scaled else 1.0
    dtype = computation_dtype(q, k, v)  # float32, float64 for float64 inputs
    qh = jnp.where(keep_q[..., None], jnp.swapaxes(q, -3, -2).astype(dtype) * scale, 0.0)
    kh = jnp.where(keep_k[..., None], jnp.swapaxes(k, -3, -2).astype(dtype) * scale, 0.0)
    vh = jnp.where(keep_k[..., None], jnp.swapaxes(v, -3, -2).astype(dtype), 0.0)
    stateful = initial_state is not None or bool(return_state)
    why = "in causal mode" if is_causal else "with a state"
    params = _fixed_or_fitted(
        fm,
        feature_params,
        qh,
        kh,
        None if key_padding else keep_q[..., None],
        keep_k[..., None],
        fixed=is_causal or stateful,
        why=why,
    )
    phi_q = fm(qh, projection, **params)
    phi_k = fm(kh, projection, side="key", **params)
    if initial_state is not None and initial_state.kv.shape[-2] != phi_q.shape[-1]:
        raise InputError(
            f"initial_state has F = {initial_state.kv.shape[-2]} features but feature map {fm.name!r} gives "
            f"{phi_q.shape[-1]}."
        )

    # G_if = Σ_{t<=i} g_tf at the queries and at the keys, [batch..., heads, length, 1 or F] (one sequence when
    # decaying: causal, q_len == kv_len); one decay per token is the case of one column.
    if log_decay is None:
        G_q, G_k, G_total = (jnp.zeros(batch + (heads, n, 1), dtype) for n in (q_len, kv_len, 1))
    else:
        if per_feature(log_decay, q):
            g = jnp.moveaxis(jnp.broadcast_to(log_decay, q.shape[:-1] + log_decay.shape[-1:]), -2, -3)
            check_decay_features(g, phi_q.shape[-1], fm)
        else:
            g = jnp.swapaxes(jnp.broadcast_to(log_decay, q.shape[:-1]), -1, -2)[..., None]
        G_q = G_k = jnp.cumsum(jnp.where(keep_k[..., None], g, 0.0), axis=-2)
        G_total = G_k[..., -1:, :]
    log_weights = G_q[..., :, None, :] - G_k[..., None, :, :]  # G_if - G_jf, [batch..., heads, q, k, 1 or F]
    if relative_bias is not None:  # + b[L - 1 + i - j], one row per head
        lags = q_len - 1 + jnp.arange(q_len)[:, None] - jnp.arange(kv_len)[None, :]
        log_weights = log_weights + jnp.broadcast_to(relative_bias, (heads, 2 * q_len - 1))[:, lags][..., None]
    log_weights = jnp.where(allowed[..., None], log_weights, -jnp.inf)
    a = jnp.einsum(
        "...qf,...kf,...qkf->...qk",
        phi_q,
        phi_k,
        jnp.broadcast_to(jnp.exp(log_weights), log_weights.shape[:-1] + phi_q.shape[-1:]),
        precision=precision,
    )
    v_aug = jnp.concatenate([vh, jnp.ones(vh.shape[:-1] + (1,), dtype)], axis=-1)  # [V, 1]
    num_aug = jnp.einsum("...qk,...kd->...qd", a, v_aug, precision=precision)
    if initial_state is not None:
        state_scale = initial_state.log_reference[..., None, None] + G_q  # S_0 decayed up to i (per feature)
        from_state = jnp.einsum(
            "...qf,...fd->...qd", phi_q * jnp.exp(state_scale), initial_state.kv, precision=precision
        )
        num_aug = num_aug + jnp.where(keep_q[..., None], from_state, 0.0)
    num, den = num_aug[..., :-1], num_aug[..., -1:]
    out = num / jnp.where(den == 0, 1.0, den) if renormalize else num  # no key at all: 0, not 0/0
    out = jnp.where(keep_q[..., None], out, 0.0)
    out = jnp.swapaxes(out, -3, -2).astype(q.dtype)
    if not return_state:
        return out
    key_weights = jnp.exp(jnp.where(keep_k[..., None], G_total - G_k, -jnp.inf))  # exp(G_L - G_j) for kept keys
    kv = jnp.einsum("...kf,...kd->...fd", phi_k * key_weights, v_aug, precision=precision)
    if initial_state is not None:  # S_0 decayed over the whole call, each feature's row by its own decay
        kv = kv + initial_state.kv * jnp.exp(initial_state.log_reference[..., None, None] + G_total)[..., 0, :, None]
    return out, RecurrentState(kv, jnp.zeros(kv.shape[:-2], kv.dtype))


naive_kernelized_attention = renamed_keywords(feature_map="estimator")(
    naive_kernelized_attention
)  # its keyword before rfa 0.3
