"""Exact kernels and their random-feature estimates ``φ(x)ᵀφ(y)``.

Choromanski et al., "Rethinking Attention with Performers", ICLR 2021, Sec. 2.3;
Rahimi & Recht, "Random Features for Large-Scale Kernel Machines", NeurIPS 2007.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import (
    InputError,
    check_broadcastable,
    check_floating,
    check_rank,
    check_same_last_dim,
)
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def check_pair(x, y):
    """Checks ``x [..., d]`` and ``y [..., d]`` with broadcasting leading dims; returns them and their result dtype."""
    x = check_floating(x, "x")
    y = check_floating(y, "y")
    check_rank(x, "x", min_ndim=1, layout="[..., d]")
    check_rank(y, "y", min_ndim=1, layout="[..., d]")
    check_same_last_dim(x, y, "x", "y")
    check_broadcastable(x.shape[:-1], y.shape[:-1], "x batch dims", "y batch dims")
    return x, y, jnp.result_type(x.dtype, y.dtype)


def softmax_kernel(x: Array, y: Array) -> Array:
    """The softmax kernel ``SM(x, y) = exp(xᵀy)``.

    Args:
      x: ``[..., d]``.
      y: ``[..., d]``; leading dims broadcast against those of ``x``.

    Returns:
      ``[...]`` in the inputs' dtype (computed in float32, float64 for float64 inputs).

    Example:
      >>> round(float(rfa.softmax_kernel(jnp.ones(2), jnp.ones(2))), 4)  # e²
      7.3891
    """
    x, y, dtype = check_pair(x, y)
    x, y = (a.astype(computation_dtype(dtype)) for a in (x, y))
    dot = jnp.sum(x * y, axis=-1)
    return jnp.exp(dot).astype(dtype)


def gaussian_kernel(x: Array, y: Array) -> Array:
    """The Gaussian kernel ``K(x, y) = exp(-|x - y|²/2)``; shapes as in :func:`softmax_kernel`.

    Example:
      >>> float(rfa.gaussian_kernel(jnp.zeros(2), jnp.zeros(2)))
      1.0
    """
    x, y, dtype = check_pair(x, y)
    delta = x.astype(computation_dtype(dtype)) - y.astype(computation_dtype(dtype))
    return jnp.exp(-0.5 * jnp.sum(delta * delta, axis=-1)).astype(dtype)


def _drop_length_axis(value: Array, event_ndim: int) -> Array:
    """A fitted token parameter ``[..., 1, *event]`` of a one-token "sequence" as ``[..., *event]``."""
    return jnp.squeeze(value, axis=value.ndim - 1 - event_ndim)


def _estimate(kernel: str, x, y, projection, estimator, params) -> Array:
    x, y, dtype = check_pair(x, y)
    fm: Estimator = lookup_estimator(estimator)
    if fm.kernel != kernel:
        raise InputError(
            f"estimator {fm.name!r} does not estimate the {kernel} kernel (it estimates {fm.kernel}); "
            f"choose a feature map whose kernel is {kernel!r}."
        )
    missing = fm.to_fit(params)
    if missing:  # fitted to the pair itself: a "sequence" of one query and one key
        fitted = fm.fit(*(a[..., None, :].astype(computation_dtype(dtype)) for a in (x, y)))
        params = {**params, **{name: _drop_length_axis(fitted[name], fm.event_ndim(name)) for name in missing}}
    phi_x, s_x = fm.split(x, projection, **params)
    phi_y, s_y = fm.split(y, projection, side="key", **params)
    log_scale = (s_x + s_y)[..., 0]
    return (jnp.sum(phi_x * phi_y, axis=-1) * jnp.exp(log_scale)).astype(dtype)


def estimate_softmax_kernel(x: Array, y: Array, projection: Array, estimator: str = "positive", **params) -> Array:
    """Unbiased random-feature estimate ``φ(x)ᵀφ(y)`` of ``SM(x, y) = exp(xᵀy)``.

    The product is formed from the stabilized features, ``φ̃(x)ᵀφ̃(y) · exp(s(x) + s(y))``, so
    it is finite whenever the estimate itself is representable. Parameters the estimator fits
    from data and that are not given are fitted to each pair (oprf: ``phi_sq = |x + y|²``, the
    optimal A for that pair).

    Args:
      x: ``[..., d]``.
      y: ``[..., d]``; leading dims broadcast against those of ``x``.
      projection: ``W`` of shape ``[m, d]``.
      estimator: an estimator whose kernel is ``"softmax"`` (trig, positive, hyperbolic, gerf, oprf, ...).
      **params: feature-map parameters (``A`` for gerf, ``phi_sq`` for oprf).

    Returns:
      ``[...]`` estimates in the inputs' dtype.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 4096, 2, projection_kind="iid")
      >>> x = jnp.array([0.3, 0.1])
      >>> est = rfa.estimate_softmax_kernel(x, x, W, estimator="positive")  # ≈ exp(0.1)
    """
    return _estimate("softmax", x, y, projection, estimator, params)


def estimate_gaussian_kernel(
    x: Array, y: Array, projection: Array, estimator: str = "gaussian_trig", **params
) -> Array:
    """Unbiased random-feature estimate of ``K(x, y) = exp(-|x - y|²/2)``.

    Args:
      x, y, projection: as in :func:`estimate_softmax_kernel`.
      estimator: ``"gaussian_trig"`` (sin/cos pair) or ``"gaussian_cosine"`` (random phases).
      **params: ``phases`` (shape ``[m]``, from ``rfa.sample_phases``) for gaussian_cosine.

    Example:
      >>> W = rfa.sample_projection(jax.random.key(0), 512, 2, projection_kind="iid")
      >>> est = rfa.estimate_gaussian_kernel(jnp.zeros(2), jnp.ones(2), W)  # ≈ exp(-1)
    """
    return _estimate("gaussian", x, y, projection, estimator, params)


KERNELS = {"softmax": softmax_kernel, "gaussian": gaussian_kernel}  # Estimator.kernel -> the exact kernel
