"""Deterministic feature maps, baselines that estimate no kernel.

- relu: ``relu(Wx) + ε`` (Performer's "generalized attention", Choromanski et al., ICLR 2021), m features.
- elu: ``elu(x) + 1`` (Katharopoulos et al., "Transformers are RNNs", ICML 2020), d features, no projection.
- taylor: the 2nd-order Taylor map of exp (Arora et al., "Simple linear attention language models
  balance the recall-throughput tradeoff", 2024, "Based"): ``φ(x)ᵀφ(y) = 1 + xᵀy + (xᵀy)²/2``, on the
  temperature-scaled inputs ``1 + qᵀk/√d + (qᵀk)²/(2d)``, with the features
  ``[1, x, (x_i x_j c_ij)_{i<=j}]``, ``c_ii = 1/√2``, ``c_ij = 1``: ``1 + d + d(d+1)/2`` of them. Always
  > 0 as a kernel (``1 + t + t²/2 > 0``); its features are not.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rfa._validation import InputError
from rfa.random_features.feature_maps import Estimator, Param, no_log, project, register_estimator

TAYLOR_MAX_DIM = 64  # 2145 features; d = 128 would need 8385 per head and token


def _relu(x, W, *, epsilon=1e-3):
    return no_log(jax.nn.relu(project(x, W)) + epsilon)


def _elu(x, W):
    del W  # elu+1 is deterministic: it has no projection.
    return no_log(jax.nn.elu(x) + 1.0)


register_estimator(
    Estimator("relu", _relu, None, 1, temperature_scaled=True, positive=True, params=(Param("epsilon"),))
)
register_estimator(Estimator("elu", _elu, None, 0, temperature_scaled=False, positive=True))


def taylor_outputs(num_features: int, dim: int) -> int:
    """``1 + d + d(d+1)/2``: the constant, the linear and the symmetric quadratic terms."""
    del num_features
    return 1 + dim + dim * (dim + 1) // 2


def _taylor(x, W):
    del W  # deterministic: no projection
    d = x.shape[-1]
    if d > TAYLOR_MAX_DIM:
        raise InputError(
            f"the taylor map on inputs of dimension d = {d} has 1 + d + d(d+1)/2 = {taylor_outputs(0, d)} features per "
            f"head and token, more than the {taylor_outputs(0, TAYLOR_MAX_DIM)} of d = {TAYLOR_MAX_DIM} "
            "(rfa.random_features.estimators.deterministic.TAYLOR_MAX_DIM): memory grows with d². Use a head "
            "dimension <= 64 (more heads, or a smaller d_model), or project q and k to a small feature dimension "
            "first, as Based does (16)."
        )
    rows, cols = np.triu_indices(d)
    scale = np.where(rows == cols, 1 / np.sqrt(2), 1.0).astype(np.float32)
    quadratic = x[..., rows] * x[..., cols] * scale
    return no_log(jnp.concatenate([jnp.ones(x.shape[:-1] + (1,), x.dtype), x, quadratic], axis=-1))


register_estimator(Estimator("taylor", _taylor, None, 0, temperature_scaled=True, outputs=taylor_outputs))
