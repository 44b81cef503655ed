"""The short causal convolution of the delta-rule layers (:mod:`rfa.layers.delta_rule.layer`): depthwise, over each
row's kept tokens only, continuing from the last inputs of the tokens before."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.attention.delta_rule.api import invariant
from rfa.attention.segments import sequence_index

Array = jax.Array


def causal_convolution(
    x: Array, weight: Array, history: Array, keep: Array, segment_ids: Array | None = None
) -> tuple[Array, Array]:
    """Depthwise causal convolution ``y_t = Σ_j w_j x_{t−K+1+j}`` of ``x [batch, L, C]`` with ``weight [K, C]``
    over the kept inputs (``keep [batch, L]``, False: padding), continuing from ``history [batch, K − 1, C]`` (the
    kept inputs before ``x``; zeros at the start). Returns ``(y, the last K − 1 kept inputs)``.

    Each row's kept inputs are convolved as one sequence, as if its padding were not there, wherever it sits
    (left, right or between): a right-padded prompt leaves the history the unpadded prompt leaves. The outputs at
    padding are those of the padding's own inputs after the kept ones (callers mask them out).

    With ``segment_ids [batch, L]`` (packed sequences, :mod:`rfa.attention.segments`) an output reads the inputs
    of its own sequence only, and the history the first sequence's: a sequence starts from zeros, and the history
    returned holds the last sequence's inputs alone."""
    taps, length = weight.shape[0], x.shape[1]
    order = jnp.argsort(~keep, axis=1, stable=True)  # each row's kept positions first, in order
    padded = jnp.concatenate([history.astype(x.dtype), jnp.take_along_axis(x, order[..., None], axis=1)], axis=1)
    reads = [padded[:, j : j + length] for j in range(taps)]  # what output t reads through tap j
    last = jnp.sum(keep, axis=1)[:, None] + jnp.arange(taps - 1)  # the K − 1 inputs up to the last kept one
    history = jnp.take_along_axis(padded, last[..., None], axis=1)
    if segment_ids is not None:  # each input's sequence, counted from the history's (0); another's reads as 0
        index = jnp.take_along_axis(sequence_index(segment_ids, keep), order, axis=1)
        index = jnp.concatenate([jnp.zeros_like(index[:, : taps - 1]), index], axis=1)[..., None]
        reads = [jnp.where(index[:, j : j + length] == index[:, taps - 1 :], r, 0.0) for j, r in enumerate(reads)]
        final = jnp.take_along_axis(index, jnp.maximum(last[:, -1:] if taps > 1 else last, 0)[..., None], axis=1)
        history = jnp.where(jnp.take_along_axis(index, last[..., None], axis=1) == final, history, 0.0)
    y = sum(weight[j] * reads[j] for j in range(taps))
    return jnp.take_along_axis(y, jnp.argsort(order, axis=1)[..., None], axis=1), history


class ShortConvolution(nnx.Module):
    """fla's ``ShortConvolution`` weights: ``weight [conv_size, channels]`` (fla's ``[channels, 1, conv_size]``
    transposed) and an optional ``bias [channels]``, in ``param_dtype``."""

    def __init__(self, channels: int, size: int, *, bias: bool, param_dtype=jnp.float32, rngs: nnx.Rngs):
        bound = 1 / math.sqrt(size)  # PyTorch's Conv1d default, as fla

        def uniform(shape):
            return nnx.Param(jax.random.uniform(rngs.params(), shape, param_dtype, minval=-bound, maxval=bound))

        self.weight = uniform((size, channels))
        self.bias = uniform((channels,)) if bias else None


def history_entering_block(x: Array, keep: Array, history: Array, taps: int, axis: str) -> tuple[Array, Array]:
    """Inside ``jax.shard_map`` with the sequence split over the mesh axis ``axis``: the history entering this
    device's block (the last ``taps − 1`` kept inputs before it: of the blocks of the devices before this one, then
    of ``history``) and the history after the whole sequence (the same on every device).

    Each device's last ``taps − 1`` kept inputs are gathered (fewer where its block keeps fewer), so a block of
    padding alone passes its predecessors' inputs on, as :func:`causal_convolution` does within a block."""
    size, length = taps - 1, x.shape[1]
    if size == 0:
        return history, history
    order = jnp.argsort(~keep, axis=1, stable=True)
    compact = jnp.take_along_axis(x, order[..., None], axis=1)
    last = jnp.sum(keep, axis=1)[:, None] - size + jnp.arange(size)  # [batch, taps − 1]; < 0: no such input
    tail = jnp.take_along_axis(compact, jnp.clip(last, 0, length - 1)[..., None], axis=1)
    tails, kept = jax.lax.all_gather(tail, axis), jax.lax.all_gather(last >= 0, axis)  # [devices, batch, taps − 1]
    blocks = jnp.concatenate([history[None].astype(x.dtype), tails])  # block 0: the history; device d's: d + 1
    flags = jnp.concatenate([jnp.ones_like(kept[:1]), kept])
    batch, channels = x.shape[0], x.shape[-1]
    inputs = jnp.moveaxis(blocks, 0, 1).reshape(batch, -1, channels)

    def last_kept(upto):  # the last taps − 1 kept inputs of blocks 0..upto
        use = flags & (jnp.arange(flags.shape[0]) <= upto)[:, None, None]
        use = jnp.moveaxis(use, 0, 1).reshape(batch, -1)
        ordered = jnp.take_along_axis(inputs, jnp.argsort(~use, axis=1, stable=True)[..., None], axis=1)
        pick = jnp.sum(use, axis=1)[:, None] - size + jnp.arange(size)  # the history's inputs: always >= taps − 1
        return jnp.take_along_axis(ordered, pick[..., None], axis=1)

    return last_kept(jax.lax.axis_index(axis)), invariant(last_kept(flags.shape[0] - 1), axis)
