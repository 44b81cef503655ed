"""Unbiased random-feature estimators of the Gaussian kernel ``K(x, y) = exp(-|x-y|²/2)``, with their theory.

- gaussian_trig: ``m^{-1/2} [cos(Wx), sin(Wx)]`` (2m features); MSE ``(1 - exp(-|Δ|²))² / (2m)``.
- gaussian_cosine: ``√(2/m) cos(Wx + b)``, ``b ~ U[0, 2π)`` drawn with W (m features);
  MSE ``(1 + exp(-2|Δ|²)/2 - exp(-|Δ|²)) / m``.

Rahimi & Recht, "Random Features for Large-Scale Kernel Machines", NeurIPS 2007.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from rfa._validation import InputError
from rfa.random_features.closed_forms import Theory, log_one_minus_exp, pair_stats
from rfa.random_features.estimators.softmax import cosine_log_moments
from rfa.random_features.feature_maps import SAMPLED, Estimator, Param, no_log, project, register_estimator
from rfa.random_features.projections import sample_phases


def _gaussian_trig(x, W):
    wx = project(x, W)
    return no_log(jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(W.shape[0]))


def _gaussian_cosine(x, W, *, phases):
    phases = jnp.asarray(phases, x.dtype)
    if phases.shape != (W.shape[0],):
        raise InputError(f"phases must have shape [m] = ({W.shape[0]},), got {tuple(phases.shape)}.")
    return no_log(math.sqrt(2.0 / W.shape[0]) * jnp.cos(project(x, W) + phases))


def _gaussian_trig_log_mse(x, y, num_features, *, projection_kind, num_terms):
    s = pair_stats(x, y)
    return 2.0 * log_one_minus_exp(s.delta_sq) - math.log(2.0) - math.log(num_features)


def _gaussian_cosine_log_mse(x, y, num_features, *, projection_kind, num_terms):
    s = pair_stats(x, y)
    return jnp.log1p(0.5 * jnp.exp(-2.0 * s.delta_sq) - jnp.exp(-s.delta_sq)) - math.log(num_features)


def _gaussian_trig_moments(x, y):
    delta = np.asarray(x, np.float64) - np.asarray(y, np.float64)
    delta_sq = (delta * delta).sum(-1)
    return cosine_log_moments(delta_sq, 0.0) + np.arange(1.0, 5.0) * delta_sq[..., None] / 2  # K = exp(-|Δ|²/2)


register_estimator(
    Estimator(
        "gaussian_trig",
        _gaussian_trig,
        "gaussian",
        2,
        temperature_scaled=True,
        theory=Theory(_gaussian_trig_log_mse, log_relative_moments=_gaussian_trig_moments),
    )
)
register_estimator(
    Estimator(
        "gaussian_cosine",
        _gaussian_cosine,
        "gaussian",
        1,
        temperature_scaled=True,
        params=(Param("phases", SAMPLED, required=True),),
        sample_params=lambda key, num_features, dim: {"phases": sample_phases(key, num_features)},
        theory=Theory(_gaussian_cosine_log_mse),
    )
)
