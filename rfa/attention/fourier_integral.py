"""Fourier integral attention: attention weights from the Fourier integral theorem instead of a dot product.

Nguyen, Pham, Nguyen, Nguyen, Osher, Ho, "FourierFormer: Transformer Meets Generalized Fourier Integral
Theorem", NeurIPS 2022. Attention read as a nonparametric (Nadaraya-Watson) regression of the values on the
keys, with the density of the keys estimated by the Fourier integral theorem at radius R:

``w_ij = Π_l sin(R (q_il − k_jl)) / (q_il − k_jl)``  (the factor is R where ``q_il = k_jl``, its limit),
``out_i = Σ_j w_ij v_j / Σ_j w_ij``.

The cost is quadratic: every weight is a product over the head dimension of one query-key difference, so
the ``q_len × kv_len`` weights are formed (O(L²·d) time, O(L²) memory per head); no feature map factorizes
them. Only this plain form is implemented: the paper's generalized variants (a function applied to each
``sin(z)/z`` factor) are not, since we have not verified their exact form from the paper.

**Where the normalizer vanishes.** A factor is positive only while ``R |q_il − k_jl| < π``, so a weight is
negative wherever an odd number of its factors are, and ``Σ_j w_ij`` can be small or zero when positive and
negative weights cancel: for queries far from every key (relative to ``π / R``) on some coordinate, that is,
for a large radius or spread-out queries and keys. There the output is the formula's: large where the
normalizer is small, and 0 (as :func:`rfa.renormalize` gives) where it is exactly 0, which is also what a
query that attends to no key gets. Nothing is clipped or made positive.

Numerics: each factor is written ``R · sinc(R δ / π)`` (``jnp.sinc``, exact with its derivative at δ = 0),
and ``R^d`` cancels in the ratio, so the weights are products of factors of magnitude <= 1. The product is
formed in log space with the row's largest magnitude divided out (it cancels too), so neither a large head
dimension nor a large radius underflows every weight of a row to 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rfa._dtypes import computation_dtype
from rfa._validation import check_broadcastable_to
from rfa.attention.common import check_causal_lengths, check_mask, check_qkv, renormalize, with_ones_column
from rfa.checks import check_finite, raise_if

Array = jax.Array


def _log_weights(q: Array, k: Array, radius) -> tuple[Array, Array]:
    """``(log |w̃|, sign w̃)`` of ``w̃_ij = Π_l sinc(R (q_il − k_jl) / π)``, ``[batch..., heads, q_len, kv_len]``.

    An exactly vanishing factor gives ``log |w̃| = -inf`` with zero gradient (both branches of the ``where``
    are finite), instead of NaN.
    """
    diff = q[..., :, None, :, :] - k[..., None, :, :, :]  # [batch..., q_len, kv_len, heads, d]
    factors = jnp.sinc(radius * diff / jnp.pi)
    zero = factors == 0
    safe = jnp.where(zero, 1.0, factors)
    log_abs = jnp.sum(jnp.where(zero, -jnp.inf, jnp.log(jnp.abs(safe))), axis=-1)
    sign = jnp.prod(jnp.sign(safe), axis=-1)
    return jnp.moveaxis(log_abs, -1, -3), jnp.moveaxis(sign, -1, -3)


def fourier_integral_attention(
    q: Array, k: Array, v: Array, *, radius, mask: Array | None = None, is_causal: bool = False
) -> Array:
    """Fourier integral attention ``out_i = Σ_j w_ij v_j / Σ_j w_ij``, ``w_ij = Π_l sin(R(q_il − k_jl))/(q_il − k_jl)``.

    Nguyen et al., "FourierFormer", NeurIPS 2022. Quadratic in the length (the weights are formed); the
    weights can be negative and their sum can vanish (module docstring: what the output is there).
    Computed in float32 (float64 for float64 inputs).

    Args:
      q: ``[batch..., q_len, heads, d_k]``.
      k: ``[batch..., kv_len, heads, d_k]``.
      v: ``[batch..., kv_len, heads, d_v]``.
      radius: R > 0, a scalar or an array broadcastable to ``[batch..., q_len, heads, 1]`` (e.g. one per
        head, ``[heads, 1]``); differentiable.
      mask: boolean, broadcastable to ``[batch..., heads, q_len, kv_len]``; True = attend.
      is_causal: mask out keys after the query (needs q_len == kv_len).

    Returns:
      ``[batch..., q_len, heads, d_v]`` in ``q.dtype``; a query that attends to no key outputs 0.

    Example:
      >>> q = k = 0.3 * jax.random.normal(jax.random.key(0), (2, 6, 4, 8))
      >>> v = jax.random.normal(jax.random.key(1), (2, 6, 4, 8))
      >>> rfa.attention.fourier_integral_attention(q, k, v, radius=1.0, is_causal=True).shape
      (2, 6, 4, 8)
    """
    q, k, v = check_qkv(q, k, v)
    check_finite(q=q, k=k, v=v)
    dtype = computation_dtype(q, k, v)
    radius = jnp.asarray(radius, dtype)
    target = q.shape[:-1] + (1,)
    check_broadcastable_to(radius.shape, target, "radius", "[batch..., q_len, heads, 1] =")
    raise_if(radius <= 0, "fourier_integral_attention: radius must be > 0.")
    if is_causal:
        check_causal_lengths(q, k)
    radius = jnp.broadcast_to(radius, target)[..., None, :, :]  # [batch..., q_len, 1, heads, 1]: every key
    log_abs, sign = _log_weights(q.astype(dtype), k.astype(dtype), radius)
    allowed = jnp.ones(log_abs.shape, jnp.bool_)
    if mask is not None:
        allowed = allowed & check_mask(mask, q, k)
    if is_causal:
        allowed = allowed & jnp.tril(jnp.ones(log_abs.shape[-2:], jnp.bool_))
    log_abs = jnp.where(allowed, log_abs, -jnp.inf)
    row_max = jax.lax.stop_gradient(jnp.max(log_abs, axis=-1, keepdims=True))
    weights = sign * jnp.exp(log_abs - jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    out = jnp.einsum("...hqk,...khd->...qhd", weights, with_ones_column(v.astype(dtype)))
    return renormalize(out[..., :-1], out[..., -1]).astype(q.dtype)
