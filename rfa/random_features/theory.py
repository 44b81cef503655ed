"""Closed-form mean squared errors of the random-feature kernel estimators, looked up by name.

Each estimator carries its own closed forms (a :class:`~rfa.random_features.closed_forms.Theory` on its
``Estimator``, next to its feature map in ``rfa.random_features.estimators``); :func:`log_mse` and
:func:`mse` look them up by name (``rfa.theory.mse("positive", x, y, m)``). What the closed forms are made
of (pair statistics, coupled rows, OPRF's optimal A) is in :mod:`rfa.random_features.closed_forms`.
The MSEs are computed in the log domain, so ``log_mse`` stays finite where ``mse`` overflows; an
MSE beyond float32 is ``inf``, never NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._validation import InputError, InputTypeError, check_choice, check_positive_int, renamed_keywords
from rfa.random_features.closed_forms import (
    DEFAULT_NUM_TERMS,
    Theory,
    central_moments,
    mean_fourth_moment,
    optimal_gerf_parameter,
)
from rfa.random_features.feature_maps import estimator as lookup_estimator
from rfa.random_features.feature_maps import registered_estimators
from rfa.random_features.kernels import check_pair
from rfa.random_features.projections import PROJECTION_KINDS

Array = jax.Array

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


def estimators_with_theory(projection_kind: str = "iid") -> tuple[str, ...]:
    """Registered estimators with a closed-form MSE for ``projection_kind`` (``projection=`` before rfa 0.3)."""
    return tuple(
        n
        for n in registered_estimators()
        if (t := lookup_estimator(n).theory) and projection_kind in t.projection_kinds
    )


estimators_with_theory = renamed_keywords(projection="projection_kind")(estimators_with_theory)


def log_mse(
    estimator: str,
    x: Array,
    y: Array,
    num_features: int,
    *,
    projection_kind: str | None = None,
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
      projection_kind: the coupling of the rows of W, ``"iid"`` (default), ``"orthogonal"`` or
        ``"simplex"`` as in ``rfa.sample_projection``; the estimator's theory must cover it (``projection=``,
        the name before rfa 0.3, works until 0.4).
      orthogonal: shorthand for ``projection_kind="orthogonal"``.
      num_terms: terms of the coupled-rows series; accurate while ``|x+y|² << num_terms``.
      **params: the estimator's parameters, e.g. ``A`` (< 1/8) for gerf; for oprf, ``phi_sq``
        (as the feature map's) defaults to ``|x + y|²`` of each pair, the optimum for that pair.

    Returns:
      ``[...]`` float32 log-MSE (``-inf`` where the estimator is exact, ``inf`` beyond float32).

    Example:
      >>> x = jnp.array([1.0, 0.0]); y = jnp.array([0.0, 1.0])
      >>> lm = rfa.theory.log_mse("positive", x, y, 16)  # log((e² - e^0)/16)
    """
    check_choice(estimator, "estimator", tuple(n for n in registered_estimators() if lookup_estimator(n).theory))
    fm = lookup_estimator(estimator)
    if projection_kind is None:
        projection_kind = "orthogonal" if orthogonal else "iid"
    elif orthogonal and projection_kind != "orthogonal":
        raise InputError(f"orthogonal=True contradicts projection_kind={projection_kind!r}; pass one of them.")
    check_choice(projection_kind, "projection_kind", PROJECTION_KINDS)
    if projection_kind not in fm.theory.projection_kinds:
        with_one = list(estimators_with_theory(projection_kind))
        raise InputError(
            f"estimator {estimator!r} has a closed-form MSE for projection_kind in {list(fm.theory.projection_kinds)}, "
            f"not for projection_kind={projection_kind!r}; estimators with one: {with_one}."
        )
    num_features = check_positive_int(num_features, "num_features")
    num_terms = check_positive_int(num_terms, "num_terms")
    x, y, _ = check_pair(x, y)
    fm.check_params(params)
    missing = set(fm.required) - set(params) - set(fm.fitted) - set(fm.sampled)
    if missing:
        raise InputTypeError(
            f"estimator {estimator!r} needs the parameter(s) {sorted(missing)}: pass them as keywords."
        )
    x, y = x.astype(jnp.float32), y.astype(jnp.float32)
    return fm.theory.log_mse(x, y, num_features, projection_kind=projection_kind, num_terms=num_terms, **params)


log_mse = renamed_keywords(projection="projection_kind")(log_mse)


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
        raise InputError(f"Theorem 2 holds for num_features <= d = {dim}, got num_features={num_features}.")
    x = x.astype(jnp.float32)
    y = y.astype(jnp.float32)
    sm = jnp.exp(jnp.sum(x * y, axis=-1))
    lam = jnp.exp(-0.5 * (jnp.sum(x * x, axis=-1) + jnp.sum(y * y, axis=-1)))
    gain = 2.0 * (num_features - 1) / (num_features * (dim + 2)) * (sm - lam) ** 2
    return mse("positive", x, y, num_features) - gain
