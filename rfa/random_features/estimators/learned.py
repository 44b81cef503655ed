"""Feature maps with learned parameters: gated RFA's random Fourier features and Hedgehog's feature MLP.

- rfa: Peng et al., "Random Feature Attention", ICLR 2021, Sec. 2–3. Random Fourier features of
  the ℓ2-normalised input scaled by a learned σ (per head and coordinate),
  ``φ(x) = m^{-1/2} [cos(W z), sin(W z)]`` with ``z = σ ⊙ x/|x|``: ``φ(x)ᵀφ(y)`` estimates
  ``exp(-|z_x - z_y|²/2)``, for a scalar σ ``∝ exp(σ² x̂ᵀŷ)``, a softmax kernel with a learned
  temperature. The key map also takes ``key_log_weight`` (per token, 0 by default): the gate's input
  weight ``log(1 - g_t)`` of gated RFA, ``S_t = g_t S_{t-1} + (1 - g_t) φ(k_t) v_tᵀ``, folded into
  the key features (the decay ``g_t`` is ``log_decay`` of the attention).
- hedgehog: Zhang et al., "The Hedgehog & the Porcupine: Expressive Linear Attentions with Softmax
  Mimicry", ICLR 2024, Sec. 4. ``φ(x) = [softmax(Wx + b), softmax(-(Wx + b))]`` with a learned
  ``W [d, d']`` and ``b [d']`` per head (2d' features, all positive), initialised to the identity
  and trained by attention distillation (``rfa.experiments.studies.distillation``).

Neither estimates a fixed kernel (``kernel=None``); both are trained with the model.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from rfa._validation import InputError
from rfa.random_features.feature_maps import LEARNED, Estimator, Param, no_log, project, register_estimator


def _normalized(x):
    """``x / |x|`` (a zero vector stays 0)."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


def _rfa_query(x, W, *, sigma=1.0, key_log_weight=0.0):
    del key_log_weight  # the gate's input weight is the keys'
    wz = project(jnp.asarray(sigma, x.dtype) * _normalized(x), W)
    return no_log(jnp.concatenate([jnp.cos(wz), jnp.sin(wz)], axis=-1) / math.sqrt(W.shape[0]))


def _rfa_key(x, W, *, sigma=1.0, key_log_weight=0.0):
    base, log = _rfa_query(x, W, sigma=sigma)
    return base, log + jnp.asarray(key_log_weight, x.dtype)[..., None]


def _rfa_init(num_heads, num_features, dim):
    del num_features
    return {"sigma": jnp.ones((num_heads, 1, dim), jnp.float32)}


def _check_hedgehog_weight(weight):
    shape = jnp.shape(weight)
    if len(shape) < 2 or shape[-1] < 1:
        raise InputError(
            f"hedgehog's weight must have shape [..., d, feature_dim] with feature_dim >= 1, got {tuple(shape)}."
        )


def _hedgehog(x, W, *, weight, bias=0.0):
    del W  # no projection: the map is learned
    _check_hedgehog_weight(weight)
    z = jnp.einsum("...d,...df->...f", x, jnp.asarray(weight, x.dtype)) + jnp.asarray(bias, x.dtype)
    return None, jnp.concatenate([jax.nn.log_softmax(z, axis=-1), jax.nn.log_softmax(-z, axis=-1)], axis=-1)


def _hedgehog_init(num_heads, num_features, dim):
    """``W = I`` (the ``dim × num_features`` identity, truncated or padded), ``b = 0``: Hedgehog's start."""
    eye = jnp.eye(dim, num_features, dtype=jnp.float32)
    return {
        "weight": jnp.broadcast_to(eye, (num_heads, 1, dim, num_features)),
        "bias": jnp.zeros((num_heads, 1, num_features), jnp.float32),
    }


register_estimator(
    Estimator(
        "rfa",
        _rfa_query,
        None,
        2,
        temperature_scaled=False,
        key_terms_fn=_rfa_key,
        params=(Param("sigma", LEARNED, per_token=True, event_ndim=1), Param("key_log_weight", per_token=True)),
        init_learned=_rfa_init,
    )
)
register_estimator(
    Estimator(
        "hedgehog",
        _hedgehog,
        None,
        0,
        temperature_scaled=False,
        positive=True,
        params=(
            Param("weight", LEARNED, required=True, per_token=True, event_ndim=2, check=_check_hedgehog_weight),
            Param("bias", LEARNED, per_token=True, event_ndim=1),
        ),
        outputs=lambda num_features, dim: 2 * num_features,
        init_learned=_hedgehog_init,
    )
)
