"""Hybrid random features (HRF, angular variant): trig and positive estimators mixed by an estimated angle.

``SM̂ = λ̂ SM̂₊₊ + (1 - λ̂) SM̂_trig`` with ``λ(x, y) = θ/π`` (θ the angle between x and y) estimated
by ``λ̂ = ½ - ξ(x)ᵀξ(y)``, ``ξ(x) = sgn(Rx)/√(2n)`` for an ``n × d`` Gaussian R drawn with W (the
fraction of the rows of R that separate x and y; a zero projection counts as positive): a mean
of n Bernoulli(θ/π) draws, so ``E λ̂ = λ`` and ``Var λ̂ = λ(1-λ)/n``. λ̂ weights the positive
estimator, accurate at large angles (small kernel values); the trig estimator is accurate where
the kernel is large. Both share W. Choromanski et al., "Hybrid Random Features", ICLR 2022.

Linear-attention form. With ``s_l(x) = 1{r_lᵀx >= 0}``, ``λ̂`` is the fraction of the n rows of R
that separate x and y, ``(1/n) Σ_l Σ_b 1{s_l(x) = b} 1{s_l(y) = ¬b}``, and ``1 - λ̂`` the fraction that
do not. So with ``u(x) = [s_l(x), ¬s_l(x)]_l/√n`` and ``ū`` its halves swapped (6nm features from
m rows of W; φ₊₊: m, φ_trig: 2m)::

    Φ(x) = [u(x) ⊗ φ₊₊(x), u(x) ⊗ φ_trig(x)]    (queries)
    Ψ(y) = [ū(y) ⊗ φ₊₊(y), u(y) ⊗ φ_trig(y)]    (keys)

and ``Φ(x)ᵀΨ(y) = λ̂ SM̂₊₊ + (1 - λ̂) SM̂_trig`` is the hybrid estimate exactly. The paper's form,
``[φ₊₊/√2, ±ξ⊗φ₊₊, φ_trig/√2, ξ⊗φ_trig]`` with ``ξ = sgn(Rx)/√(2n)``, has 3m(n+1) features (the same
6m for n = 1) but writes a zero weight as ``½ - ½``: at ``|x| = |y| = 3``, 180°, float32 keeps
no digit of the exact positive estimate behind the cancelling trig blocks of scale e⁹. The
indicator weights are ``>= 0`` and exactly 0 where a base is not used. The features can still be
negative (the trig block): in renormalized attention the
normalizer ``Σ_j Φ(q)ᵀΨ(k_j)`` is an unbiased but not a positive estimate of ``Σ_j exp(qᵀk_j)``, and
where it comes near 0 (few features, large inputs, the regime where trig features blow up) the
output does too, as with trig features alone (the docs' implementation notes give the input scales where
float32 keeps or loses the outputs).

MSE with m iid rows (independent R), ``v = λ(1-λ)/n``::

    MSE = (λ² + v) MSE₊₊ + ((1-λ)² + v) MSE_trig + 2 (λ(1-λ) - v) Cov,
    Cov(SM̂_trig, SM̂₊₊) = SM² (cos(|x|² - |y|²) - 1) / m,

the covariance of the two bases sharing ω (``E[exp(ωᵀz) cos(ωᵀΔ)] = exp(2xᵀy) cos(|x|² - |y|²)``);
docs/references.md, "Hybrid random features".
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from rfa._dtypes import computation_dtype
from rfa._validation import InputError
from rfa.random_features.closed_forms import Theory, central_moments, log_one_minus_exp, mean_fourth_moment, pair_stats
from rfa.random_features.feature_maps import (
    SAMPLED,
    Estimator,
    Param,
    estimator,
    half_sq_norm,
    project,
    register_estimator,
)

Array = jax.Array


def side_indicators(x: Array, angular: Array, *, swapped: bool = False) -> Array:
    """``[1{r_l x >= 0}, 1{r_l x < 0}]_l / √n`` for ``x [..., d]`` and ``R [n, d]`` (halves swapped for
    ``swapped``): ``[..., 2n]``, no gradient. ``u(x)ᵀu(y)`` counts the rows of R that put x and y on one
    side, ``u(x)ᵀu_swapped(y)`` those that separate them, each divided by n."""
    up = project(x, angular) >= 0.0
    halves = (~up, up) if swapped else (up, ~up)
    return jnp.concatenate(halves, axis=-1).astype(computation_dtype(x)) / math.sqrt(angular.shape[0])


def _hybrid_terms(side: str, num_angular: int):
    """The query or key map: ``(base, log)`` of Φ or Ψ."""

    def terms(x, W, *, angular):
        angular = jnp.asarray(angular, x.dtype)
        if angular.shape != (num_angular, x.shape[-1]):
            raise InputError(
                f"angular must have shape [n, d] = ({num_angular}, {x.shape[-1]}) (this estimator has n = "
                f"{num_angular}; rfa.random_features.estimators.hybrid.hybrid(n) makes another), "
                f"got {tuple(angular.shape)}."
            )
        m = W.shape[0]
        same_side = side_indicators(x, angular)  # weights of the trig estimate: 1 - λ̂ between the sides
        positive_weights = side_indicators(x, angular, swapped=side == "key")  # λ̂ between the sides
        wx = project(x, W)
        positive_log = wx - half_sq_norm(x) - 0.5 * math.log(m)  # [..., m]
        trig_base = jnp.concatenate([jnp.cos(wx), jnp.sin(wx)], axis=-1) / math.sqrt(m)  # [..., 2m]
        trig_log = jnp.broadcast_to(half_sq_norm(x), trig_base.shape)
        batch = x.shape[:-1]

        def outer(weights, values):  # weights ⊗ values, flattened: [..., 2n·k]
            return (weights[..., :, None] * values[..., None, :]).reshape(batch + (2 * num_angular * values.shape[-1],))

        def tiled(log):  # the log-scale of weights ⊗ values: each value's, once per weight
            shape = batch + (2 * num_angular,) + log.shape[-1:]
            return jnp.broadcast_to(log[..., None, :], shape).reshape(batch + (shape[-2] * shape[-1],))

        base = jnp.concatenate([outer(positive_weights, jnp.ones_like(positive_log)), outer(same_side, trig_base)], -1)
        log = jnp.concatenate([tiled(positive_log), tiled(trig_log)], axis=-1)
        return base, log

    return terms


def _hybrid_log_mse(num_angular: int):
    def log_mse(x, y, num_features, *, projection_kind, num_terms, angular=None):
        s = pair_stats(x, y)
        m = num_features
        cos = s.xy / jnp.sqrt(jnp.maximum(s.x_sq * s.y_sq, jnp.finfo(jnp.float32).tiny))
        lam = jnp.arccos(jnp.clip(cos, -1.0, 1.0)) / math.pi
        v = lam * (1.0 - lam) / num_angular
        log_positive = 2.0 * s.xy + s.z_sq + log_one_minus_exp(s.z_sq) - math.log(m)  # MSE₊₊
        log_trig = s.x_sq + s.y_sq + 2.0 * log_one_minus_exp(s.delta_sq) - math.log(2.0) - math.log(m)
        # Cov = -SM² (1 - cos(|x|² - |y|²))/m <= 0, added with weight 2(λ(1-λ) - v) >= 0 (n >= 1).
        log_minus_cov = 2.0 * s.xy + jnp.log1p(-jnp.cos(s.x_sq - s.y_sq)) - math.log(m)
        terms = jnp.stack(
            [
                jnp.log(lam**2 + v) + log_positive,
                jnp.log((1.0 - lam) ** 2 + v) + log_trig,
            ]
        )
        positive_part = jax.nn.logsumexp(terms, axis=0)
        weight = 2.0 * (lam * (1.0 - lam) - v)
        exact = jnp.isneginf(positive_part)  # e.g. θ = π, |x| = |y|: λ = 1 and positive features are exact
        ratio = jnp.exp(jnp.log(weight) + log_minus_cov - jnp.where(exact, 0.0, positive_part))  # Cov's share
        return jnp.where(exact, positive_part, positive_part + jnp.log1p(-jnp.minimum(ratio, 1.0)))

    return log_mse


def _hybrid_error_fourth_moment(x, y, num_features, angular=None):
    """An upper bound on ``E[(SM̂ - SM)⁴]/SM⁴``, exact for n = 1 (float64 NumPy).

    Given λ̂ = a (R only, independent of W) the error is ``a e₊₊ + (1 - a) e_trig`` of the two
    m-vector bases, and by convexity of t⁴, ``E[e⁴ | a] <= a E e₊₊⁴ + (1 - a) E e_trig⁴``; with
    ``E λ̂ = λ`` the bound is ``λ E e₊₊⁴ + (1 - λ) E e_trig⁴`` (equality when λ̂ ∈ {0, 1}).
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    cos = np.sum(x * y, -1) / np.sqrt(np.maximum(np.sum(x * x, -1) * np.sum(y * y, -1), np.finfo(np.float64).tiny))
    lam = np.arccos(np.clip(cos, -1.0, 1.0)) / math.pi
    fourth = {}
    for base in ("positive", "trig"):
        mu2, mu4, _ = central_moments(estimator(base).theory.log_relative_moments(x, y))
        fourth[base] = mean_fourth_moment(mu2, mu4, num_features)
    with np.errstate(invalid="ignore"):
        return np.where(lam > 0, lam * fourth["positive"], 0.0) + np.where(lam < 1, (1 - lam) * fourth["trig"], 0.0)


def hybrid(num_angular: int = 1) -> Estimator:
    """The HRF estimator with ``n = num_angular`` angular features, named ``"hybrid"`` (n = 1) or ``"hybrid_n<n>"``.

    ``rfa.estimator("hybrid")`` is registered; register another n with
    ``rfa.register_estimator(hybrid(4))``. Its random parameter ``angular`` (R, ``[n, d]``) is
    drawn with the projection (``fm.sample_params(key, m, d)``) and passed as
    ``feature_params={"angular": R}``.

    Example:
      >>> fm = hybrid(2)
      >>> fm.name, fm.num_outputs(16, 8)  # 6nm
      ('hybrid_n2', 192)
    """
    if isinstance(num_angular, bool) or not isinstance(num_angular, int) or num_angular < 1:
        raise InputError(f"num_angular must be an integer >= 1, got {num_angular!r}.")
    return Estimator(
        "hybrid" if num_angular == 1 else f"hybrid_n{num_angular}",
        _hybrid_terms("query", num_angular),
        "softmax",
        6 * num_angular,
        temperature_scaled=True,
        params=(Param("angular", SAMPLED, required=True),),
        key_terms_fn=_hybrid_terms("key", num_angular),
        sample_params=lambda key, num_features, dim: {
            "angular": jax.random.normal(key, (num_angular, dim), jnp.float32)
        },
        theory=Theory(_hybrid_log_mse(num_angular), error_fourth_moment=_hybrid_error_fourth_moment),
    )


register_estimator(hybrid(1))
