"""Unbiased random-feature estimators of the softmax kernel ``SM(x, y) = exp(xᵀy)``, with their theory.

==================  ===============================================================  ========
name                φ(x)                                                             features
==================  ===============================================================  ========
trig                ``exp(|x|²/2) m^{-1/2} [cos(Wx), sin(Wx)]``                      2m
positive            ``exp(-|x|²/2) m^{-1/2} exp(Wx)``                                m
hyperbolic          ``exp(-|x|²/2) (2m)^{-1/2} [exp(Wx), exp(-Wx)]``                 2m
gerf (A < 1/8)      ``(1-4A)^{d/4} m^{-1/2} exp(A|w_i|² + √(1-4A) w_iᵀx - |x|²/2)``  m
oprf                gerf at ``A* = optimal_gerf_parameter(phi_sq, d)``               m
==================  ===============================================================  ========

Closed-form MSE with m iid vectors, ``z = x + y``, ``Δ = x - y`` (docs/references.md):

- trig:        ``(1/2m) exp(|z|²) SM⁻² (1 - exp(-|Δ|²))²``
- positive:    ``(1/m) exp(|z|²) SM² (1 - exp(-|z|²))``
- hyperbolic:  ``½ (1 - exp(-|z|²)) · MSE_positive``
- gerf(A):     ``V(A)/m``, ``V(A) = SM² (((1-4A)²/(1-8A))^{d/2} exp(|z|²/(1-8A)) - 1)``;
  positive is A = 0, oprf is ``A = A*(|z|², d)``.

For positive, gerf and oprf the orthogonal and simplex couplings of the rows have closed forms too
(:func:`rfa.random_features.closed_forms.coupled_log_mse`).

References: Rahimi & Recht, NeurIPS 2007 (trig); Choromanski et al., "Rethinking Attention with
Performers", ICLR 2021, Lemma 2 and Thm. 2 (positive, hyperbolic); Likhosherstov et al., "Chefs'
Random Tables", NeurIPS 2022, Thm. 4.1–4.2 (gerf, oprf).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import comb, logsumexp

from rfa._dtypes import computation_dtype
from rfa._validation import InputError, is_concrete
from rfa.random_features.closed_forms import (
    COUPLED_PROJECTIONS,
    Theory,
    check_phi_sq,
    coupled_log_mse,
    log_one_minus_exp,
    optimal_gerf_parameter,
    pair_stats,
)
from rfa.random_features.feature_maps import FITTED, Estimator, Param, half_sq_norm, project, register_estimator
from rfa.random_features.theory import orthogonal_mse_bound

Array = jax.Array


def check_gerf_parameter(A):
    """Raises a ValueError for a concrete ``A >= 1/8`` (infinite variance); returns ``A``, at least float32."""
    # Checked before conversion: inside jit a Python float is concrete, jnp.asarray(A) is not.
    if is_concrete(A) and np.any(np.asarray(A) >= 0.125):
        raise InputError(f"A must be < 1/8 for GERF features (the variance is infinite otherwise), got {A}.")
    A = jnp.asarray(A)
    return A.astype(computation_dtype(A))


def masked_mean(x: Array, keep: Array | None) -> Array:
    """Mean over the length axis (-2) of ``x [batch..., length, n]``, counting kept rows."""
    if keep is None:
        return jnp.mean(x, axis=-2)
    keep = jnp.broadcast_to(keep, x.shape[:-1] + (1,))
    count = jnp.sum(keep.astype(x.dtype), axis=-2)
    return jnp.sum(jnp.where(keep, x, 0.0), axis=-2) / jnp.maximum(count, 1.0)


def query_keep(q: Array, k: Array, keep_q: Array | None, keep_k: Array | None) -> Array | None:
    """The query mask of a fit: without one, the key mask when q_len == kv_len (the sequence's padding)."""
    if keep_q is None and q.shape[-2] == k.shape[-2]:
        return keep_k
    return keep_q


def oprf_statistic(q: Array, k: Array, keep_q: Array | None = None, keep_k: Array | None = None) -> Array:
    """``φ = mean|q|² + mean|k|² + 2 mean(q)ᵀmean(k)`` per batch (and head), shape ``[batch..., 1]``.

    Inputs are ``[batch..., length, d]`` (head-major in attention), the masks ``[batch..., length, 1]``
    (None: all kept). Estimates ``|q + k|²`` over the attended pairs for OPRF's optimal A
    (Likhosherstov et al., NeurIPS 2022). Padded keys and padded queries are left out. Without a
    query mask, when q_len == kv_len the key mask is taken as the sequence's padding and left out of
    the query means too, so a padded batch gets the A of its truncated sequences (in a
    cross-attention of equal lengths this only moves A, a variance parameter: the estimate stays
    unbiased). It is a statistic, like a normalization's: no gradient flows through it.

    Example:
      >>> float(oprf_statistic(jnp.ones((1, 4, 2)), jnp.ones((1, 4, 2)))[0, 0])  # |1 + 1|² · 2
      8.0
    """
    keep_q = query_keep(q, k, keep_q, keep_k)
    mean_q = masked_mean(q, keep_q)
    mean_k = masked_mean(k, keep_k)
    sq_q = masked_mean(jnp.sum(q * q, axis=-1, keepdims=True), keep_q)
    sq_k = masked_mean(jnp.sum(k * k, axis=-1, keepdims=True), keep_k)
    phi = sq_q + sq_k + 2.0 * jnp.sum(mean_q * mean_k, axis=-1, keepdims=True)
    return jax.lax.stop_gradient(phi)


# Feature maps: (base, log) with φ = base ⊙ exp(log) (see rfa.random_features.feature_maps).


def _trig(x, W):
    wx = project(x, W)
    return jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(W.shape[0]), half_sq_norm(x)


def _positive(x, W):
    return None, project(x, W) - half_sq_norm(x) - 0.5 * math.log(W.shape[0])


def _hyperbolic(x, W):
    wx = project(x, W)
    return None, jnp.concatenate([wx, -wx], axis=-1) - half_sq_norm(x) - 0.5 * math.log(2 * W.shape[0])


def _gerf(x, W, *, A):
    A = jnp.asarray(A, x.dtype)[..., None]
    m, d = W.shape
    b = jnp.sqrt(1.0 - 4.0 * A)
    log_phi = (
        A * jnp.sum(W * W, axis=-1)
        + b * project(x, W)
        - half_sq_norm(x)
        + 0.25 * d * jnp.log1p(-4.0 * A)
        - 0.5 * math.log(m)
    )
    return None, log_phi


def _oprf(x, W, *, phi_sq):
    return _gerf(x, W, A=optimal_gerf_parameter(phi_sq, W.shape[1]))


# Closed forms.


def log_variance_from_exponent(xy: Array, L: Array) -> Array:
    """``log(SM² expm1(L))`` for ``L >= 0``: the log-variance of a GERF-type estimator ``SM² (e^L - 1)``."""
    return 2.0 * xy + L + log_one_minus_exp(L)


def log_gerf_variance(xy: Array, z_sq: Array, A: Array, dim: int) -> Array:
    """log V(A); ``V(A) = SM² expm1(L)``, ``L = (d/2) log((1-4A)²/(1-8A)) + |z|²/(1-8A) >= 0``."""
    L = 0.5 * dim * (2.0 * jnp.log1p(-4.0 * A) - jnp.log1p(-8.0 * A)) + z_sq / (1.0 - 8.0 * A)
    return log_variance_from_exponent(xy, L)


def _trig_log_mse(x, y, num_features, *, projection_kind, num_terms):
    s = pair_stats(x, y)
    return s.x_sq + s.y_sq + 2.0 * log_one_minus_exp(s.delta_sq) - math.log(2.0) - math.log(num_features)


def _gerf_family_log_mse(A_of):
    """log MSE of a GERF estimator whose A is ``A_of(stats, **params)``, for every coupling of the rows."""

    def log_mse(x, y, num_features, *, projection_kind, num_terms, **params):
        s = pair_stats(x, y)
        log_var = log_gerf_variance(s.xy, s.z_sq, A_of(s, **params), s.dim)
        return coupled_log_mse(log_var, s, num_features, projection_kind=projection_kind, num_terms=num_terms)

    return log_mse


def _hyperbolic_log_mse(x, y, num_features, *, projection_kind, num_terms):
    s = pair_stats(x, y)
    log_var = log_gerf_variance(s.xy, s.z_sq, 0.0, s.dim)
    return log_var - math.log(num_features) + log_one_minus_exp(s.z_sq) - math.log(2.0)


def _pair_optimal_parameter(s, phi_sq=None):
    return optimal_gerf_parameter(s.z_sq if phi_sq is None else phi_sq, s.dim)


# Moments of one random vector's estimate Y relative to the kernel, log E[(Y/K)^k] for k = 1..4
# (float64 NumPy; they predict the Monte Carlo error of a measurement). With Λ = exp(-(|x|²+|y|²)/2)
# and E exp(a|w|² + bᵀw) = (1-2a)^{-d/2} exp(|b|²/(2(1-2a))):
# gerf(A): E Y^k = (1-4A)^{kd/2} Λ^k (1-4kA)^{-d/2} exp(k²(1-4A)|z|²/(2(1-4kA))), infinite for 4kA >= 1;
# hyperbolic: Y = Λ cosh(wᵀz); trig: Y = Λ⁻¹ cos(wᵀΔ).

_K = np.arange(1.0, 5.0)
_J = np.arange(5.0)
with np.errstate(divide="ignore"):
    _LOG_BINOMIAL = np.log(comb(_K[:, None], _J))  # [4, 5], -inf for j > k
_SHIFT_SQ = (_K[:, None] - 2 * _J) ** 2  # [4, 5]


def _stats64(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    x_sq, y_sq, xy = (x * x).sum(-1), (y * y).sum(-1), (x * y).sum(-1)
    return x_sq, y_sq, xy, x_sq + y_sq + 2 * xy, np.maximum(x_sq + y_sq - 2 * xy, 0.0), x.shape[-1]


def cosine_log_moments(delta_sq: np.ndarray, log_scale) -> np.ndarray:
    """``log E[(s cos(wᵀΔ))^k]``, k = 1..4, for ``log s = log_scale``: ``s^k 2^{-k} Σ_j C(k,j) exp(-(k-2j)²|Δ|²/2)``."""
    log_sum = logsumexp(_LOG_BINOMIAL - _SHIFT_SQ * delta_sq[..., None, None] / 2, axis=-1)
    return _K * (np.asarray(log_scale)[..., None] - math.log(2.0)) + log_sum


def _trig_moments(x, y):
    x_sq, y_sq, xy, _, delta_sq, _ = _stats64(x, y)
    return cosine_log_moments(delta_sq, (x_sq + y_sq) / 2) - _K * xy[..., None]


def _hyperbolic_moments(x, y):
    x_sq, y_sq, xy, z_sq, _, _ = _stats64(x, y)
    log_sum = logsumexp(_LOG_BINOMIAL + _SHIFT_SQ * z_sq[..., None, None] / 2, axis=-1)
    return _K * (-(x_sq + y_sq)[..., None] / 2 - math.log(2.0)) + log_sum - _K * xy[..., None]


def _gerf_family_moments(A_of):
    def moments(x, y, **params):
        x_sq, y_sq, xy, z_sq, _, dim = _stats64(x, y)
        A = np.asarray(A_of(z_sq, dim, **params), np.float64)[..., None]
        with np.errstate(invalid="ignore", divide="ignore"):
            one_minus = 1 - 4 * _K * A
            log_moment = (
                _K * dim / 2 * np.log1p(-4 * A)
                - _K * (x_sq + y_sq)[..., None] / 2
                - dim / 2 * np.log(one_minus)
                + _K**2 * (1 - 4 * A) * z_sq[..., None] / (2 * one_minus)
            )
        return np.where(one_minus > 0, log_moment - _K * xy[..., None], np.inf)

    return moments


def _positive_bound(x, y, num_features, projection_kind):
    """Performer Theorem 2 for m <= d orthogonal vectors; None elsewhere."""
    if projection_kind != "orthogonal" or num_features > x.shape[-1]:
        return None
    return orthogonal_mse_bound(x, y, num_features)


def _oprf_fit(q, k, keep_q=None, keep_k=None):
    return {"phi_sq": oprf_statistic(q, k, keep_q, keep_k)}


def _oprf_standard_params(dim: int) -> dict:
    # q, k with independent N(0, 1) entries, scaled by d^{-1/4}: E|q + k|² = 2d/√d.
    return {"phi_sq": 2.0 * math.sqrt(dim)}


_ALL_COUPLINGS = ("iid",) + COUPLED_PROJECTIONS

for _fm in (
    Estimator(
        "trig",
        _trig,
        "softmax",
        2,
        temperature_scaled=True,
        theory=Theory(_trig_log_mse, log_relative_moments=_trig_moments),
    ),
    Estimator(
        "positive",
        _positive,
        "softmax",
        1,
        temperature_scaled=True,
        positive=True,
        theory=Theory(
            _gerf_family_log_mse(lambda s: 0.0),
            _ALL_COUPLINGS,
            log_relative_moments=_gerf_family_moments(lambda z_sq, dim: 0.0),
            bound=_positive_bound,
        ),
    ),
    Estimator(
        "hyperbolic",
        _hyperbolic,
        "softmax",
        2,
        temperature_scaled=True,
        positive=True,
        theory=Theory(_hyperbolic_log_mse, log_relative_moments=_hyperbolic_moments),
    ),
    Estimator(
        "gerf",
        _gerf,
        "softmax",
        1,
        temperature_scaled=True,
        positive=True,
        params=(Param("A", required=True, per_token=True, check=check_gerf_parameter),),
        theory=Theory(
            _gerf_family_log_mse(lambda s, A: check_gerf_parameter(A)),
            _ALL_COUPLINGS,
            log_relative_moments=_gerf_family_moments(lambda z_sq, dim, A: A),
        ),
    ),
    Estimator(
        "oprf",
        _oprf,
        "softmax",
        1,
        temperature_scaled=True,
        positive=True,
        params=(Param("phi_sq", FITTED, required=True, per_token=True, check=check_phi_sq),),
        fit=_oprf_fit,
        standard_params=_oprf_standard_params,
        theory=Theory(
            _gerf_family_log_mse(_pair_optimal_parameter),
            _ALL_COUPLINGS,
            log_relative_moments=_gerf_family_moments(
                lambda z_sq, dim, phi_sq=None: optimal_gerf_parameter(z_sq if phi_sq is None else phi_sq, dim)
            ),
        ),
    ),
):
    register_estimator(_fm)
