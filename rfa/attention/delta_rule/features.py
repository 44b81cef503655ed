"""Any rfa estimator as the delta rule's map of queries and keys: its features, L2-normalized.

The delta rule needs ``‖k_t‖ ≤ 1`` (with β ≤ 2 the transition ``I − β k kᵀ`` then has eigenvalues in [−1, 1]).
DeltaNet normalizes ``SiLU(k)``; here the key is ``φ(k)/‖φ(k)‖`` for a registered estimator φ, and the query
``φ(q)/‖φ(q)‖``, so that the state is read and written in the estimator's feature space: a query's read-out weighs
a written key by ``φ(q)ᵀφ(k) / (‖φ(q)‖ ‖φ(k)‖)``, for the softmax-kernel maps an estimate of ``exp(qᵀk/√d)``
over the features' norms (the kernelized delta rule). Each map is formed stabilized (``φ̃ = φ exp(−s)``, one
factor per row), and the factor cancels in the normalization, so large inputs stay finite.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa.attention.kernelized.prepare import temperature
from rfa.random_features.feature_maps import Estimator, features_at, row_log_scale
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def normalized_features(
    q: Array, k: Array, *, estimator: str | Estimator, projection: Array | None, feature_params: dict | None = None
) -> tuple[Array, Array]:
    """``φ(q)/‖φ(q)‖`` and ``φ(k)/‖φ(k)‖`` (the key map for keys), q and k scaled for the map's temperature first.

    Args:
      q, k: ``[..., d]``.
      estimator: a registered estimator name or an ``Estimator``.
      projection: its ``W [m, d]`` (None for a map without one).
      feature_params: the map's parameters (fixed ones: the delta rule is causal, nothing is fitted to the call).

    Returns:
      ``([..., F], [..., F])`` float32, each row of unit norm (a row of zero features stays 0).

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 16, 8)
      >>> q, k = rfa.attention.delta_rule.normalized_features(jnp.ones((3, 8)), -jnp.ones((3, 8)),
      ...                                                    estimator="positive", projection=W)
      >>> q.shape, bool(jnp.allclose(jnp.linalg.norm(k, axis=-1), 1.0))
      ((3, 16), True)
    """
    fm = lookup_estimator(estimator)
    params = dict(feature_params or {})
    q, k = temperature(fm, q, k)

    def unit(x, side):
        base, log = fm.terms(x, projection, side=side, **params)
        phi = features_at(base, log, row_log_scale(log))
        return phi / jnp.sqrt(jnp.sum(phi * phi, axis=-1, keepdims=True) + 1e-12)

    return unit(q, "query"), unit(k, "key")
