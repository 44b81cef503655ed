"""Closed-form mean squared errors of the random-feature kernel estimators.

All formulas are per input pair ``(x, y)`` with ``z = x + y``, ``Δ = x - y``,
``SM = exp(xᵀy)``, ``Λ = exp(-(|x|² + |y|²)/2)``; ``m`` counts random vectors (rows of W).

iid vectors (Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Lemma 2;
Likhosherstov et al., "Chefs' Random Tables", NeurIPS 2022, Thm. 4.1):

- trig:        ``(1/2m) exp(|z|²) SM⁻² (1 - exp(-|Δ|²))²``
- positive:    ``(1/m) exp(|z|²) SM² (1 - exp(-|z|²))``
- hyperbolic:  ``½ (1 - exp(-|z|²)) · MSE_positive``
- gerf(A):     ``V(A)/m``, ``V(A) = SM² (((1-4A)²/(1-8A))^{d/2} exp(|z|²/(1-8A)) - 1)``
  (docs/references.md, "Closed-form MSE with iid vectors"; positive is A = 0, oprf is A = A*(|z|², d))
- gaussian_trig:   ``(1 - exp(-|Δ|²))² / (2m)``
- gaussian_cosine: ``(1 + exp(-2|Δ|²)/2 - exp(-|Δ|²)) / m``

Orthogonal vectors, positive/gerf/oprf, rows in independent blocks of d with chi(d) norms:
two rows of one block have covariance ``C = Λ² (S - exp(|z|²))`` with the series ``S`` below,
rows of different blocks are independent, hence with ``P`` ordered within-block pairs
(``P = k d(d-1) + r(r-1)`` for ``m = k d + r``)

    MSE_ort = V(A)/m + P C / m²,

which is the one-block formula for m <= d and the 1/k law for m = k d (docs/references.md,
"Orthogonal features", with the series' derivation).
``S - exp(|z|²) = -Σ_n (|z|²/2)ⁿ Σ_j (1 - Γ(d/2+j)Γ(d/2+n-j)/(Γ(d/2)Γ(d/2+n))) / (j!(n-j)!)``
is summed term by term (every term has the same sign, so nothing cancels).
Performer Theorem 2 bounds it for m <= d: ``MSE_ort <= MSE_iid - 2(m-1)/(m(d+2)) (SM - Λ)²``.

The MSEs are computed in the log domain, so ``log_mse`` stays finite where ``mse`` overflows
(``orthogonal_mse_bound``, a difference, is computed in the linear domain).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln, logsumexp

from rfa._validation import check_choice, check_positive_int
from rfa.random_features.feature_maps import (
    _check_gerf_parameter,
    optimal_gerf_parameter,
)
from rfa.random_features.kernels import _check_pair

Array = jax.Array

SOFTMAX_ESTIMATORS = ("trig", "positive", "hyperbolic", "gerf", "oprf")
GAUSSIAN_ESTIMATORS = ("gaussian_trig", "gaussian_cosine")
ORTHOGONAL_ESTIMATORS = ("positive", "gerf", "oprf")
DEFAULT_NUM_TERMS = 512

__all__ = ["log_mse", "mse", "optimal_gerf_parameter", "orthogonal_mse_bound"]


def _log_one_minus_exp(t: Array) -> Array:
    """log(1 - exp(-t)) for t >= 0, accurate for small and large t."""
    return jnp.log(-jnp.expm1(-t))


def _log_gerf_variance(xy: Array, z_sq: Array, A: Array, dim: int) -> Array:
    """log V(A); V(A) = SM² expm1(L), L = (d/2) log((1-4A)²/(1-8A)) + |z|²/(1-8A) >= 0."""
    L = 0.5 * dim * (2.0 * jnp.log1p(-4.0 * A) - jnp.log1p(-8.0 * A)) + z_sq / (1.0 - 8.0 * A)
    return 2.0 * xy + L + _log_one_minus_exp(L)


@functools.lru_cache(maxsize=64)
def _series_coefficients(dim: int, num_terms: int) -> np.ndarray:
    """c_n = log Σ_j (1 - Γ(a+j)Γ(a+n-j)/(Γ(a)Γ(a+n))) / (j!(n-j)!), a = d/2, for n = 2..num_terms-1."""
    a = dim / 2.0
    n = np.arange(2, num_terms, dtype=np.float64)[:, None]
    j = np.arange(num_terms, dtype=np.float64)[None, :]
    valid = j <= n
    jj = np.where(valid, j, 0.0)
    # <= 0 by log-convexity of Γ; the clip removes rounding noise at j = 0 and j = n, where it is 0.
    log_ratio = np.minimum(gammaln(a + jj) + gammaln(a + n - jj) - gammaln(a) - gammaln(a + n), 0.0)
    with np.errstate(divide="ignore"):
        log_terms = np.log(-np.expm1(log_ratio)) - gammaln(jj + 1.0) - gammaln(n - jj + 1.0)
    log_terms = np.where(valid, log_terms, -np.inf)
    return logsumexp(log_terms, axis=1)


def _log_orthogonal_gap(z_sq: Array, dim: int, num_terms: int) -> Array:
    """log(exp(|z|²) - S) with the series S of the orthogonal covariance."""
    c = jnp.asarray(_series_coefficients(dim, num_terms), jnp.float32)
    n = jnp.arange(2, num_terms, dtype=jnp.float32)
    log_half = jnp.log(0.5 * z_sq)[..., None]
    return jax.nn.logsumexp(n * log_half + c, axis=-1)


def _within_block_pairs(num_features: int, dim: int) -> int:
    blocks, rest = divmod(num_features, dim)
    return blocks * dim * (dim - 1) + rest * (rest - 1)


def log_mse(
    estimator: str,
    x: Array,
    y: Array,
    num_features: int,
    *,
    orthogonal: bool = False,
    A=None,
    phi_sq=None,
    num_terms: int = DEFAULT_NUM_TERMS,
) -> Array:
    """Natural log of the closed-form MSE of ``estimator`` at ``(x, y)`` with m random vectors.

    Args:
      estimator: trig, positive, hyperbolic, gerf, oprf, gaussian_trig or gaussian_cosine.
      x: ``[..., d]``.
      y: ``[..., d]``; leading dims broadcast against those of ``x``.
      num_features: m, the number of random vectors.
      orthogonal: block-orthogonal vectors with chi norms (positive, gerf and oprf only).
      A: the GERF parameter (< 1/8), required for gerf.
      phi_sq: for oprf, the statistic its A* is computed from (as the feature map's ``phi_sq``);
        default ``|x + y|²`` of each pair, the optimum for that pair.
      num_terms: terms of the orthogonal series; accurate while ``|x+y|² << num_terms``.

    Returns:
      ``[...]`` float32 log-MSE (``-inf`` where the estimator is exact).

    Example:
      >>> x = jnp.array([1.0, 0.0]); y = jnp.array([0.0, 1.0])
      >>> lm = rfa.theory.log_mse("positive", x, y, 16)  # log((e² - e^0)/16)
    """
    check_choice(estimator, "estimator", SOFTMAX_ESTIMATORS + GAUSSIAN_ESTIMATORS)
    num_features = check_positive_int(num_features, "num_features")
    num_terms = check_positive_int(num_terms, "num_terms")
    x, y, _ = _check_pair(x, y)
    if orthogonal and estimator not in ORTHOGONAL_ESTIMATORS:
        raise ValueError(
            f"the orthogonal MSE has a closed form for {list(ORTHOGONAL_ESTIMATORS)} only, got {estimator!r}."
        )
    if (A is not None) != (estimator == "gerf"):
        raise TypeError(f"A is required for estimator 'gerf' and only for it; got estimator={estimator!r} and A={A!r}.")
    if phi_sq is not None and estimator != "oprf":
        raise TypeError(f"phi_sq is only accepted for estimator 'oprf', got estimator={estimator!r}.")
    x = x.astype(jnp.float32)
    y = y.astype(jnp.float32)
    dim = x.shape[-1]
    xy = jnp.sum(x * y, axis=-1)
    x_sq = jnp.sum(x * x, axis=-1)
    y_sq = jnp.sum(y * y, axis=-1)
    z_sq = x_sq + y_sq + 2.0 * xy
    delta_sq = jnp.maximum(x_sq + y_sq - 2.0 * xy, 0.0)
    log_m = math.log(num_features)

    if estimator == "trig":
        return x_sq + y_sq + 2.0 * _log_one_minus_exp(delta_sq) - math.log(2.0) - log_m
    if estimator == "gaussian_trig":
        return 2.0 * _log_one_minus_exp(delta_sq) - math.log(2.0) - log_m
    if estimator == "gaussian_cosine":
        return jnp.log1p(0.5 * jnp.exp(-2.0 * delta_sq) - jnp.exp(-delta_sq)) - log_m
    if estimator == "gerf":
        A = _check_gerf_parameter(A)
    elif estimator == "oprf":
        A = optimal_gerf_parameter(z_sq if phi_sq is None else phi_sq, dim)
    else:
        A = jnp.zeros_like(z_sq)
    log_var = _log_gerf_variance(xy, z_sq, A, dim)
    if estimator == "hyperbolic":
        return log_var - log_m + _log_one_minus_exp(z_sq) - math.log(2.0)
    if not orthogonal:
        return log_var - log_m
    # MSE_ort = (V/m) (1 - Λ² (e^{|z|²} - S) P / (m V)).
    pairs = _within_block_pairs(num_features, dim)
    if pairs == 0:
        return log_var - log_m
    exact = jnp.isneginf(log_var)  # z = 0: every feature is constant, so is every covariance
    log_cov_ratio = _log_orthogonal_gap(z_sq, dim, num_terms) - x_sq - y_sq - jnp.where(exact, 0.0, log_var)
    log_orthogonal = log_var - log_m + jnp.log1p(-jnp.exp(log_cov_ratio + math.log(pairs) - log_m))
    return jnp.where(exact, log_var, log_orthogonal)


def mse(estimator: str, x: Array, y: Array, num_features: int, **kwargs) -> Array:
    """Closed-form MSE, ``exp(log_mse(...))``; see :func:`log_mse` for the arguments.

    Example:
      >>> x = jnp.array([1.0, 0.0]); y = jnp.array([0.0, 1.0])
      >>> round(float(rfa.theory.mse("positive", x, y, 1)), 4)  # e² - 1
      6.3891
    """
    return jnp.exp(log_mse(estimator, x, y, num_features, **kwargs))


def orthogonal_mse_bound(x: Array, y: Array, num_features: int) -> Array:
    """Performer Theorem 2: for positive features and m <= d orthogonal vectors,

    ``MSE_ort <= MSE_iid - 2(m-1)/(m(d+2)) · (SM - Λ)²``.

    Args:
      x, y: ``[..., d]``, broadcasting.
      num_features: m <= d.

    Returns:
      ``[...]`` float32 bound.

    Example:
      >>> b = rfa.theory.orthogonal_mse_bound(jnp.ones(8) * 0.2, jnp.ones(8) * 0.1, 8)
    """
    x, y, _ = _check_pair(x, y)
    num_features = check_positive_int(num_features, "num_features")
    dim = x.shape[-1]
    if num_features > dim:
        raise ValueError(f"Theorem 2 holds for num_features <= d = {dim}, got num_features={num_features}.")
    x = x.astype(jnp.float32)
    y = y.astype(jnp.float32)
    sm = jnp.exp(jnp.sum(x * y, axis=-1))
    lam = jnp.exp(-0.5 * (jnp.sum(x * x, axis=-1) + jnp.sum(y * y, axis=-1)))
    gain = 2.0 * (num_features - 1) / (num_features * (dim + 2)) * (sm - lam) ** 2
    return mse("positive", x, y, num_features) - gain
