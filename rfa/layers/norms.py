"""Root-mean-square layer normalization: ``x / √(mean(x²) + ε) · w`` (Zhang and Sennrich, "Root Mean Square Layer
Normalization", NeurIPS 2019), or ``· (1 + w)`` with ``w`` initialized at 0 (zero-centered: Qwen3.5's and
Qwen3-Next's decoder norms, so that weight decay pulls the scale towards 1, not 0).

As Hugging Face's norms: the mean and the reciprocal root in float32 (float64 for float64 inputs); the normalized
input is cast back to its dtype before the scale (Qwen3, Llama), or scaled by ``1 + w`` in float32 and then cast
(Qwen3.5, Qwen3-Next).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import computation_dtype
from rfa._validation import InputError

Array = jax.Array


class RMSNorm(nnx.Module):
    """RMS normalization over the last axis, ``[..., dim] -> [..., dim]``.

    Args:
      dim: the normalized axis's width.
      eps: ε under the root.
      zero_centered: scale by ``1 + w`` (``w`` starts at 0), not ``w`` (starts at 1).
      param_dtype: the scale's dtype.

    Example:
      >>> norm = RMSNorm(4)
      >>> norm(jnp.array([[3.0, -3.0, 3.0, -3.0]])).round(4)  # each entry over the root mean square, 3
      Array([[ 1., -1.,  1., -1.]], dtype=float32)
    """

    def __init__(self, dim: int, *, eps: float = 1e-6, zero_centered: bool = False, param_dtype=jnp.float32):
        if not eps > 0:
            raise InputError(f"RMSNorm's eps must be > 0, got {eps!r}.")
        self.weight = nnx.Param(jnp.full((dim,), 0.0 if zero_centered else 1.0, param_dtype))
        self.eps, self.zero_centered = float(eps), zero_centered

    def __call__(self, x: Array) -> Array:
        if x.shape[-1] != self.weight.shape[0]:
            raise InputError(f"RMSNorm of width {self.weight.shape[0]} got an input of shape {tuple(x.shape)}.")
        dtype = computation_dtype(x)
        h = x.astype(dtype)
        h = h * jax.lax.rsqrt(jnp.mean(h * h, axis=-1, keepdims=True) + self.eps)
        weight = self.weight[...]
        if self.zero_centered:  # Qwen3.5's order: the scale in float32, then the cast
            return (h * (1 + weight.astype(dtype))).astype(x.dtype)
        return weight.astype(x.dtype) * h.astype(x.dtype)  # Qwen3's and Llama's: the cast, then the scale
