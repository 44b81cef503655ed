"""Closed-form mean squared errors of the random-feature kernel estimators.

Each estimator carries its own closed forms (a :class:`Theory` on its ``Estimator``, next to its
feature map in ``rfa.random_features.estimators``); :func:`log_mse` and :func:`mse` look them up
by name. This module holds what several estimators share: the statistics of a pair, and the MSE of
GERF-type estimators (positive, gerf, oprf) when the rows of W are coupled in blocks.

Per input pair ``(x, y)``: ``z = x + y``, ``Δ = x - y``, ``SM = exp(xᵀy)``,
``Λ = exp(-(|x|² + |y|²)/2)``; ``m`` counts random vectors (rows of W).

Coupled rows (orthogonal or simplex blocks of d rows with independent chi(d) norms, rows of
different blocks independent). Two rows ``w_i, w_j`` of one block have directions with
``cos = c`` (0 orthogonal, ``-1/(d-1)`` simplex) under a Haar rotation, so ``u = w_i + w_j`` has a
uniform direction and ``|u|² = r²(1 + c sin ψ)``, ``r² ~ χ²(2d)``, ψ with density ∝ ``sin^{d-1} ψ``
on [0, π]. With ``E exp(uᵀz) = Σ_n (|z|²/4)ⁿ E|u|^{2n} / ((d/2)_n n!)`` and
``E|u|^{2n} = 2ⁿ (d)_n g_n``, ``g_n = E(1 + c sin ψ)ⁿ``, the pair of rows has covariance
``C = -Λ² G``, ``G = exp(|z|²) - S = Σ_n |z|^{2n}/n! · (1 - r_n g_n)``, ``r_n = (d)_n/(2ⁿ (d/2)_n)``;
every term is >= 0 (``r_n, g_n <= 1``), so the series loses no digits. For GERF features the
same ``C`` holds for every A (the A-dependence cancels). With ``P`` ordered within-block pairs
(``P = k d(d-1) + r(r-1)`` for ``m = k d + r``)

    MSE = V(A)/m - P Λ² G / m²,

which for orthogonal rows is the one-block formula for m <= d and the 1/k law for m = k d
(docs/references.md, "Orthogonal features"; Choromanski et al., ICLR 2021, Thm. 2; Reid,
Choromanski, Likhosherstov, Weller, "Simplex Random Features", ICML 2023, Sec. 3). ``g_n`` is
computed by Gauss–Legendre quadrature in float64 (exactly 1 for orthogonal rows).

The MSEs are computed in the log domain, so ``log_mse`` stays finite where ``mse`` overflows; an
MSE beyond float32 is ``inf``, never NaN.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln, logsumexp, roots_legendre

from rfa._validation import check_choice, check_positive_int, is_concrete
from rfa.random_features.feature_maps import feature_map, registered_feature_maps
from rfa.random_features.kernels import check_pair
from rfa.random_features.projections import PROJECTION_KINDS

Array = jax.Array

COUPLED_PROJECTIONS = ("orthogonal", "simplex")
DEFAULT_NUM_TERMS = 512
_QUADRATURE_NODES = 2048

__all__ = [
    "Theory",
    "central_moments",
    "estimators_with_theory",
    "log_mse",
    "mean_fourth_moment",
    "mse",
    "optimal_gerf_parameter",
    "orthogonal_mse_bound",
]


@dataclasses.dataclass(frozen=True)
class Theory:
    """The closed forms of one estimator, attached to its ``Estimator`` (``fm.theory``).

    Attributes:
      log_mse: ``(x, y, num_features, *, projection, num_terms, **params) -> [...]``, the natural
        log of the MSE of the estimate of ``fm.kernel`` from m random vectors, on float32
        ``x, y [..., d]`` already checked; ``params`` are the map's parameters (a fitted one may
        be absent: then it is fitted to the pair).
      projections: the projection kinds (``rfa.sample_projection``'s ``kind``) it covers.
      log_relative_moments: optional ``(x, y, **params) -> [..., 4]`` in float64 NumPy:
        ``log E[(Y/K)^k]``, k = 1..4, for the estimate Y of one random vector (iid); predicts the
        Monte Carlo error of a measurement.
      error_fourth_moment: optional ``(x, y, num_features, **params) -> [...]`` in float64 NumPy: an
        upper bound on ``E[(K̂ - K)⁴]/K⁴`` of the m-vector estimate (iid), for estimates that are
        not means of iid per-vector terms (hybrid: one λ̂ for all vectors); predicts the Monte Carlo
        error where ``log_relative_moments`` cannot.
      bound: optional ``(x, y, num_features, projection) -> [...] or None``, a published upper
        bound on the MSE where it applies (Performer's Theorem 2), None elsewhere.
    """

    log_mse: Callable[..., Array]
    projections: tuple[str, ...] = ("iid",)
    log_relative_moments: Callable[..., np.ndarray] | None = None
    error_fourth_moment: Callable[..., np.ndarray] | None = None
    bound: Callable[..., Array | None] | None = None


def central_moments(log_moments: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(μ₂, μ₄, terms)`` of ``U = Y/K`` from ``log E U^k``, k = 1..4 (``[..., 4]``, E U = 1), in float64.

    ``μ₂ = ρ₂ - 1`` and ``μ₄ = (ρ₄ - 1) - 4(ρ₃ - 1) + 6(ρ₂ - 1)`` from ``ρ_k - 1 = expm1(log E U^k)``,
    which keeps the digits that ``ρ_k`` themselves would lose; ``terms`` are the three summands of
    μ₄ (their size bounds its rounding error).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        excess = np.expm1(log_moments)
        terms = np.stack([excess[..., 3], -4 * excess[..., 2], 6 * excess[..., 1]], axis=-1)
        return excess[..., 1], terms.sum(-1), terms


def mean_fourth_moment(mu2: np.ndarray, mu4: np.ndarray, num_features: int) -> np.ndarray:
    """``E e⁴`` of the mean of m iid terms with central moments μ₂, μ₄: ``(μ₄ + 3(m-1)μ₂²)/m³``."""
    m = num_features
    with np.errstate(over="ignore", invalid="ignore"):
        return (mu4 + 3 * (m - 1) * mu2**2) / m**3


class PairStats(NamedTuple):
    """Per-pair quantities of the closed forms, ``[...]`` float32 each, and the dimension d."""

    x_sq: Array
    y_sq: Array
    xy: Array
    z_sq: Array  # |x + y|²
    delta_sq: Array  # |x - y|²
    dim: int


def pair_stats(x: Array, y: Array) -> PairStats:
    """The :class:`PairStats` of float32 ``x, y [..., d]``."""
    xy = jnp.sum(x * y, axis=-1)
    x_sq = jnp.sum(x * x, axis=-1)
    y_sq = jnp.sum(y * y, axis=-1)
    return PairStats(x_sq, y_sq, xy, x_sq + y_sq + 2.0 * xy, jnp.maximum(x_sq + y_sq - 2.0 * xy, 0.0), x.shape[-1])


def check_phi_sq(phi_sq) -> None:
    """Raises a ValueError for a concrete ``phi_sq`` below 0."""
    if is_concrete(phi_sq) and np.any(np.asarray(phi_sq) < 0):
        raise ValueError(f"phi_sq must be >= 0 (it is |x + y|²), got min {np.min(np.asarray(phi_sq))}.")


def optimal_gerf_parameter(phi_sq, dim: int) -> Array:
    """Returns A*, the GERF parameter minimizing the variance (OPRF, FAVOR++).

    ``A* = (1/16) (1 - 2φ/d - sqrt((2φ/d + 1)² + 8φ/d))`` with ``φ = |x + y|²``; A* <= 0.
    In attention, ``φ`` is estimated as ``mean|q|² + mean|k|² + 2 mean(q)ᵀmean(k)``.

    Likhosherstov et al., "Chefs' Random Tables", NeurIPS 2022, Thm. 4.2.

    Args:
      phi_sq: ``|x + y|²``, any shape, >= 0.
      dim: d, the input dimension.

    Returns:
      A* with the shape of ``phi_sq``.

    Example:
      >>> float(optimal_gerf_parameter(0.0, 64))
      0.0
    """
    check_phi_sq(phi_sq)
    phi_sq = jnp.asarray(phi_sq, jnp.float32)
    dim = check_positive_int(dim, "dim")
    rho = phi_sq / dim
    return (1.0 - 2.0 * rho - jnp.sqrt((2.0 * rho + 1.0) ** 2 + 8.0 * rho)) / 16.0


def log_one_minus_exp(t: Array) -> Array:
    """log(1 - exp(-t)) for t >= 0, accurate for small and large t."""
    return jnp.log(-jnp.expm1(-t))


def row_cosine(projection: str, dim: int) -> float:
    """``c``, the cosine between the directions of two rows of one block."""
    return -1.0 / (dim - 1) if projection == "simplex" else 0.0


@functools.lru_cache(maxsize=64)
def _gap_coefficients(dim: int, num_terms: int, cosine: float) -> np.ndarray:
    """``log((1 - r_n g_n)/n!)`` for n = 1..num_terms-1 (``-inf`` where the term vanishes)."""
    n = np.arange(1, num_terms, dtype=np.float64)
    a = dim / 2.0
    log_r = gammaln(2 * a + n) - gammaln(2 * a) - n * math.log(2.0) - gammaln(a + n) + gammaln(a)
    log_g = np.zeros_like(n)
    if cosine != 0.0:
        nodes, weights = roots_legendre(_QUADRATURE_NODES)
        psi = (nodes + 1.0) * (math.pi / 2)
        sin = np.sin(psi)
        with np.errstate(divide="ignore"):
            log_density = np.log(weights) + (dim - 1) * np.log(sin)
            log_g = logsumexp(log_density + n[:, None] * np.log1p(cosine * sin), axis=1) - logsumexp(log_density)
    with np.errstate(divide="ignore"):
        return np.log(-np.expm1(np.minimum(log_r + log_g, 0.0))) - gammaln(n + 1.0)


def _log_coupling_gap(z_sq: Array, dim: int, projection: str, num_terms: int) -> Array:
    """``log G = log(exp(|z|²) - S)``, the covariance of two rows of one block is ``-Λ² G``."""
    c = jnp.asarray(_gap_coefficients(dim, num_terms, row_cosine(projection, dim)), jnp.float32)
    n = jnp.arange(1, num_terms, dtype=jnp.float32)
    return jax.nn.logsumexp(n * jnp.log(z_sq)[..., None] + c, axis=-1)


def _within_block_pairs(num_features: int, dim: int) -> int:
    blocks, rest = divmod(num_features, dim)
    return blocks * dim * (dim - 1) + rest * (rest - 1)


def coupled_log_mse(log_var: Array, s: PairStats, num_features: int, *, projection: str, num_terms: int) -> Array:
    """log MSE of a GERF-type estimator with per-vector variance ``exp(log_var)`` under ``projection``.

    ``V/m`` for iid rows, ``V/m - P Λ² G/m²`` for orthogonal and simplex blocks (module docstring).
    """
    log_m = math.log(num_features)
    pairs = _within_block_pairs(num_features, s.dim)
    if projection == "iid" or pairs == 0:
        return log_var - log_m
    exact = jnp.isneginf(log_var)  # z = 0: every feature is constant, so is every covariance
    log_gap = _log_coupling_gap(s.z_sq, s.dim, projection, num_terms)
    log_cov_ratio = log_gap - s.x_sq - s.y_sq - jnp.where(exact, 0.0, log_var)
    log_coupled = log_var - log_m + jnp.log1p(-jnp.exp(log_cov_ratio + math.log(pairs) - log_m))
    return jnp.where(exact, log_var, log_coupled)


def estimators_with_theory(projection: str = "iid") -> tuple[str, ...]:
    """Registered estimators with a closed-form MSE for ``projection``."""
    return tuple(n for n in registered_feature_maps() if (t := feature_map(n).theory) and projection in t.projections)


def log_mse(
    estimator: str,
    x: Array,
    y: Array,
    num_features: int,
    *,
    projection: str | None = None,
    orthogonal: bool = False,
    num_terms: int = DEFAULT_NUM_TERMS,
    **params,
) -> Array:
    """Natural log of the closed-form MSE of ``estimator`` at ``(x, y)`` with m random vectors.

    Args:
      estimator: a registered estimator with a closed form (:func:`estimators_with_theory`), e.g.
        trig, positive, hyperbolic, gerf, oprf, gaussian_trig, gaussian_cosine.
      x: ``[..., d]``.
      y: ``[..., d]``; leading dims broadcast against those of ``x``.
      num_features: m, the number of random vectors.
      projection: the coupling of the rows of W, ``"iid"`` (default), ``"orthogonal"`` or
        ``"simplex"`` as in ``rfa.sample_projection``; the estimator's theory must cover it.
      orthogonal: shorthand for ``projection="orthogonal"``.
      num_terms: terms of the coupled-rows series; accurate while ``|x+y|² << num_terms``.
      **params: the estimator's parameters, e.g. ``A`` (< 1/8) for gerf; for oprf, ``phi_sq``
        (as the feature map's) defaults to ``|x + y|²`` of each pair, the optimum for that pair.

    Returns:
      ``[...]`` float32 log-MSE (``-inf`` where the estimator is exact, ``inf`` beyond float32).

    Example:
      >>> x = jnp.array([1.0, 0.0]); y = jnp.array([0.0, 1.0])
      >>> lm = rfa.theory.log_mse("positive", x, y, 16)  # log((e² - e^0)/16)
    """
    check_choice(estimator, "estimator", tuple(n for n in registered_feature_maps() if feature_map(n).theory))
    fm = feature_map(estimator)
    if projection is None:
        projection = "orthogonal" if orthogonal else "iid"
    elif orthogonal and projection != "orthogonal":
        raise ValueError(f"orthogonal=True contradicts projection={projection!r}; pass one of them.")
    check_choice(projection, "projection", PROJECTION_KINDS)
    if projection not in fm.theory.projections:
        raise ValueError(
            f"estimator {estimator!r} has a closed-form MSE for projection in {list(fm.theory.projections)}, "
            f"not for projection={projection!r}; estimators with one: {list(estimators_with_theory(projection))}."
        )
    num_features = check_positive_int(num_features, "num_features")
    num_terms = check_positive_int(num_terms, "num_terms")
    x, y, _ = check_pair(x, y)
    fm.check_params(params)
    missing = set(fm.required) - set(params) - set(fm.fitted) - set(fm.sampled)
    if missing:
        raise TypeError(f"estimator {estimator!r} needs the parameter(s) {sorted(missing)}: pass them as keywords.")
    x, y = x.astype(jnp.float32), y.astype(jnp.float32)
    return fm.theory.log_mse(x, y, num_features, projection=projection, num_terms=num_terms, **params)


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
    x, y, _ = check_pair(x, y)
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
