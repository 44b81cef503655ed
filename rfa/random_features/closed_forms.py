"""What the estimators' closed forms are made of: :class:`Theory`, the statistics of a pair, the MSE of coupled rows.

Each estimator carries its own closed forms (a :class:`Theory` on its ``Estimator``, next to its
feature map in ``rfa.random_features.estimators``); :mod:`rfa.random_features.theory` looks them up by
name. This module holds what several estimators share: the statistics of a pair, and the MSE of
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
import inspect
import math
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln, logsumexp, roots_legendre

from rfa._validation import InputError, check_positive_int, is_concrete

Array = jax.Array

COUPLED_PROJECTIONS = ("orthogonal", "simplex")
DEFAULT_NUM_TERMS = 512
_QUADRATURE_NODES = 2048


@dataclasses.dataclass(frozen=True)
class Theory:
    """The closed forms of one estimator, attached to its ``Estimator`` (``fm.theory``).

    Attributes:
      log_mse: ``(x, y, num_features, *, projection_kind, num_terms, **params) -> [...]``, the natural
        log of the MSE of the estimate of ``fm.kernel`` from m random vectors, on float32
        ``x, y [..., d]`` already checked; ``params`` are the map's parameters (a fitted one may
        be absent: then it is fitted to the pair).
      projection_kinds: the projection kinds (``rfa.sample_projection``'s ``projection_kind``) it covers.
      log_relative_moments: optional ``(x, y, **params) -> [..., 4]`` in float64 NumPy:
        ``log E[(Y/K)^k]``, k = 1..4, for the estimate Y of one random vector (iid); predicts the
        Monte Carlo error of a measurement.
      error_fourth_moment: optional ``(x, y, num_features, **params) -> [...]`` in float64 NumPy: an
        upper bound on ``E[(K̂ - K)⁴]/K⁴`` of the m-vector estimate (iid), for estimates that are
        not means of iid per-vector terms (hybrid: one λ̂ for all vectors); predicts the Monte Carlo
        error where ``log_relative_moments`` cannot.
      bound: optional ``(x, y, num_features, projection_kind) -> [...] or None``, a published upper
        bound on the MSE where it applies (Performer's Theorem 2), None elsewhere.
      projections: ``projection_kinds``' name before rfa 0.3, kept for one release (warns). A ``log_mse``
        written for rfa 0.2 (a keyword ``projection``, not ``projection_kind``) still works and warns.
    """

    log_mse: Callable[..., Array]
    projection_kinds: tuple[str, ...] = ("iid",)
    log_relative_moments: Callable[..., np.ndarray] | None = None
    error_fourth_moment: Callable[..., np.ndarray] | None = None
    bound: Callable[..., Array | None] | None = None
    projections: dataclasses.InitVar[tuple[str, ...] | None] = None

    def __post_init__(self, projections):
        if projections is not None:
            warnings.warn(
                "Theory(projections=...) is Theory(projection_kinds=...) since rfa 0.3; projections= goes in 0.4.",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "projection_kinds", tuple(projections))
        if _takes_old_keyword(self.log_mse):
            warnings.warn(
                "a Theory.log_mse takes projection_kind= since rfa 0.3 (it took projection=); projection= goes in 0.4.",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "log_mse", _old_keyword_log_mse(self.log_mse))


def _takes_old_keyword(log_mse: Callable) -> bool:
    try:
        names = inspect.signature(log_mse).parameters
    except (TypeError, ValueError):  # no signature to read (a builtin): called as it is
        return False
    return "projection" in names and "projection_kind" not in names


def _old_keyword_log_mse(log_mse: Callable) -> Callable:
    """A ``log_mse`` of rfa 0.2's protocol called with this one's ``projection_kind=``."""

    @functools.wraps(log_mse)
    def called_with_projection(*args, projection_kind, **kwargs):
        return log_mse(*args, projection=projection_kind, **kwargs)

    return called_with_projection


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
        raise InputError(f"phi_sq must be >= 0 (it is |x + y|²), got min {np.min(np.asarray(phi_sq))}.")


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


def row_cosine(projection_kind: str, dim: int) -> float:
    """``c``, the cosine between the directions of two rows of one block."""
    return -1.0 / (dim - 1) if projection_kind == "simplex" else 0.0


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


def _log_coupling_gap(z_sq: Array, dim: int, projection_kind: str, num_terms: int) -> Array:
    """``log G = log(exp(|z|²) - S)``, the covariance of two rows of one block is ``-Λ² G``."""
    c = jnp.asarray(_gap_coefficients(dim, num_terms, row_cosine(projection_kind, dim)), jnp.float32)
    n = jnp.arange(1, num_terms, dtype=jnp.float32)
    return jax.nn.logsumexp(n * jnp.log(z_sq)[..., None] + c, axis=-1)


def _within_block_pairs(num_features: int, dim: int) -> int:
    blocks, rest = divmod(num_features, dim)
    return blocks * dim * (dim - 1) + rest * (rest - 1)


def coupled_log_mse(log_var: Array, s: PairStats, num_features: int, *, projection_kind: str, num_terms: int) -> Array:
    """log MSE of a GERF-type estimator with per-vector variance ``exp(log_var)`` under ``projection_kind``.

    ``V/m`` for iid rows, ``V/m - P Λ² G/m²`` for orthogonal and simplex blocks (module docstring).
    """
    log_m = math.log(num_features)
    pairs = _within_block_pairs(num_features, s.dim)
    if projection_kind == "iid" or pairs == 0:
        return log_var - log_m
    exact = jnp.isneginf(log_var)  # z = 0: every feature is constant, so is every covariance
    log_gap = _log_coupling_gap(s.z_sq, s.dim, projection_kind, num_terms)
    log_cov_ratio = log_gap - s.x_sq - s.y_sq - jnp.where(exact, 0.0, log_var)
    log_coupled = log_var - log_m + jnp.log1p(-jnp.exp(log_cov_ratio + math.log(pairs) - log_m))
    return jnp.where(exact, log_var, log_coupled)
