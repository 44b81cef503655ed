"""Fitted feature-map parameters from calibration batches, one set per head, for causal and decoding use.

Estimators that fit parameters to the data (OPRF's ``phi_sq``, the DERF family's ``A`` and
transforms) cannot fit them to the sequence in causal attention: the fit would let future tokens
change earlier outputs. Fit them instead on calibration data (queries and keys of the layer on
held-out batches) and pass them as ``feature_params``, or let a :class:`~rfa.layers.KernelizedAttention`
store them (:meth:`~rfa.layers.KernelizedAttention.calibrate`). Likhosherstov et al.,
"Dense-Exponential Random Features", arXiv 2302.00787, fit on the data the estimator will see.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._validation import InputError, renamed_keywords
from rfa.attention.common import check_qkv
from rfa.attention.kernelized.prepare import temperature
from rfa.attention.masks import plan_mask
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def _pooled(x: Array, keep: Array | None) -> tuple[Array, Array | None]:
    """Head-major ``x [batch..., heads, length, d]`` → ``[heads, batch·length, d]``; the mask
    ``[batch..., heads or 1, length]`` → ``[heads, batch·length, 1]``."""
    heads = x.shape[-3]
    pooled = jnp.moveaxis(x, -3, 0).reshape(heads, -1, x.shape[-1])
    if keep is not None:
        keep = jnp.moveaxis(jnp.broadcast_to(keep, x.shape[:-1]), -2, 0).reshape(heads, -1, 1)
    return pooled, keep


def fit_feature_params(estimator: str | Estimator, query: Array, key: Array, *, mask: Array | None = None) -> dict:
    """The map's fitted parameters (``fm.fitted``) from calibration queries and keys, one set per head.

    The queries and keys of every batch row are pooled per head, scaled as attention scales them
    (``d^{-1/4}`` for temperature-scaled maps), and fitted with ``fm.fit``. The result broadcasts
    against ``[batch..., heads, length]`` (values ``[heads, 1, ...]``): pass it as ``feature_params``
    to :func:`rfa.kernelized_attention` in any mode.

    Args:
      estimator: a registered name or ``Estimator`` with fitted parameters (oprf, aderf, saderf, sderf).
      query: ``[batch..., q_len, heads, d_k]``.
      key: ``[batch..., kv_len, heads, d_k]``.
      mask: as in :func:`rfa.kernelized_attention`; only its padding is used (padded tokens are left out).

    Returns:
      ``{name: array}`` for the names in ``fm.fitted``, without gradient.

    Example:
      >>> q = jax.random.normal(jax.random.key(0), (4, 32, 2, 8))
      >>> k = jax.random.normal(jax.random.key(1), (4, 32, 2, 8)) * 0.5
      >>> params = rfa.attention.fit_feature_params("aderf", q, k)
      >>> params["A"].shape, params["query_transform"].shape
      ((2, 1, 1), (2, 1, 8, 8))
    """
    fm = lookup_estimator(estimator)
    if fm.fit is None:
        raise InputError(
            f"feature map {fm.name!r} fits no parameters from data; maps that do: oprf, aderf, saderf, sderf."
        )
    query, key, _ = check_qkv(query, key, key)
    plan = plan_mask(mask, query, key, is_causal=False)
    q, k = (jnp.swapaxes(x, -3, -2) for x in temperature(fm, query, key))
    q, keep_q = _pooled(q, plan.keep_queries)
    k, keep_k = _pooled(k, plan.keep_keys)
    return fm.fit(q, k, keep_q, keep_k)  # without a query mask and with q_len == kv_len, keys' padding is the queries'


fit_feature_params = renamed_keywords(feature_map="estimator")(fit_feature_params)  # its keyword before rfa 0.3
