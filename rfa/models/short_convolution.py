"""The short causal convolution of the delta-rule layers (:mod:`rfa.models.delta_rule`): depthwise, over each
row's kept tokens only, continuing from the last inputs of the tokens before."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

Array = jax.Array


def causal_convolution(x: Array, weight: Array, history: Array, keep: Array) -> tuple[Array, Array]:
    """Depthwise causal convolution ``y_t = Σ_j w_j x_{t−K+1+j}`` of ``x [batch, L, C]`` with ``weight [K, C]``
    over the kept inputs (``keep [batch, L]``, False: padding), continuing from ``history [batch, K − 1, C]`` (the
    kept inputs before ``x``; zeros at the start). Returns ``(y, the last K − 1 kept inputs)``.

    Each row's kept inputs are convolved as one sequence, as if its padding were not there, wherever it sits
    (left, right or between): a right-padded prompt leaves the history the unpadded prompt leaves. The outputs at
    padding are those of the padding's own inputs after the kept ones (callers mask them out)."""
    taps, length = weight.shape[0], x.shape[1]
    order = jnp.argsort(~keep, axis=1, stable=True)  # each row's kept positions first, in order
    padded = jnp.concatenate([history.astype(x.dtype), jnp.take_along_axis(x, order[..., None], axis=1)], axis=1)
    y = sum(weight[j] * padded[:, j : j + length] for j in range(taps))
    last = jnp.sum(keep, axis=1)[:, None] + jnp.arange(taps - 1)  # the K − 1 inputs up to the last kept one
    history = jnp.take_along_axis(padded, last[..., None], axis=1)
    return jnp.take_along_axis(y, jnp.argsort(order, axis=1)[..., None], axis=1), history


class ShortConvolution(nnx.Module):
    """fla's ``ShortConvolution`` weights: ``weight [conv_size, channels]`` (fla's ``[channels, 1, conv_size]``
    transposed) and an optional ``bias [channels]``."""

    def __init__(self, channels: int, size: int, *, bias: bool, rngs: nnx.Rngs):
        bound = 1 / math.sqrt(size)  # PyTorch's Conv1d default, as fla
        self.weight = nnx.Param(jax.random.uniform(rngs.params(), (size, channels), minval=-bound, maxval=bound))
        self.bias = (
            nnx.Param(jax.random.uniform(rngs.params(), (channels,), minval=-bound, maxval=bound)) if bias else None
        )
