"""A delta-rule layer's decode cache in flash-linear-attention's layout (fla 0.6) and in rfa's, both ways: a
generation started in fla goes on in rfa, and the other way round.

fla keeps, per layer, ``recurrent_state [batch, num_v_heads, d_v, d_k]`` (``state_v_first``: Gated DeltaNet and
KDA; ``[..., d_k, d_v]`` for DeltaNet) and ``conv_state``,
the short convolutions' last ``conv_size`` inputs, one array ``[batch, channels, conv_size]`` each for q, k and v
(the newest last). rfa keeps ``state [batch, num_v_heads, d_k, d_v]`` and ``conv [batch, conv_size − 1,
channels of q, k and v]``, the last ``conv_size − 1`` inputs: the one fla keeps beyond them is the oldest, which
the next token's convolution no longer reads.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from rfa._validation import InputError
from rfa.layers.fla_config import FLA_LAYERS


def _v_first(layer: nnx.Module) -> bool:
    return FLA_LAYERS[layer.variant.fla_name].state_v_first


def _conv_split(layer: nnx.Module) -> list[int]:
    """Where q's, k's and v's channels end in rfa's history."""
    key = layer.num_heads * layer.head_dim
    return [key, 2 * key, 2 * key + layer.num_v_heads * layer.head_v_dim]


def cache_from_fla(layer: nnx.Module, recurrent_state, conv_state=None) -> dict:
    """rfa's cache (:meth:`empty_state`'s layout, the layer's ``state_dtype``) from fla's layer cache: its
    ``recurrent_state`` and its ``conv_state`` (a tuple of q's, k's and v's; None without convolutions).

    Raises:
      InputError: shapes that are not the layer's (named), or a convolution state missing or extra.

    Example:
      >>> layer = rfa.nnx.GatedDeltaNet(2, 16, head_dim=8, rngs=nnx.Rngs(0))
      >>> conv = tuple(np.zeros((1, c, 4)) for c in (16, 16, 16))
      >>> cache = cache_from_fla(layer, np.zeros((1, 2, 8, 8)), conv)
      >>> cache["state"].shape, cache["conv"].shape
      ((1, 2, 8, 8), (1, 3, 48))
    """
    state = np.asarray(recurrent_state)
    batch = state.shape[0] if state.ndim == 4 else 0
    empty = layer.empty_state(max(batch, 1))
    widths = (layer.head_v_dim, layer.key_dim) if _v_first(layer) else (layer.key_dim, layer.head_v_dim)
    expected = (batch, layer.num_v_heads, *widths)
    if state.shape != expected:
        raise InputError(f"fla's recurrent_state must be {expected} for this layer, got {state.shape}.")
    state = np.swapaxes(state, -1, -2) if _v_first(layer) else state
    if (conv_state is None) != (empty["conv"].shape[1] == 0):
        raise InputError(
            f"fla's conv_state is {'missing' if conv_state is None else 'given'}, and the layer "
            f"{'has' if conv_state is None else 'has no'} short convolution."
        )
    history = empty["conv"]
    if conv_state is not None:
        parts = [np.asarray(c) for c in conv_state]
        taps = layer.options.conv_size
        shapes = [(batch, width, taps) for width in np.diff([0, *_conv_split(layer)]).tolist()]
        if [p.shape for p in parts] != shapes:
            raise InputError(f"fla's conv_state must be q's, k's and v's {shapes}, got {[p.shape for p in parts]}.")
        history = np.concatenate([np.swapaxes(p, 1, 2)[:, 1:] for p in parts], axis=-1)
    dtype = layer.state_dtype
    return {"state": jnp.asarray(state, dtype), "conv": jnp.asarray(history, dtype)}


def cache_to_fla(layer: nnx.Module, cache: Mapping[str, object]) -> dict:
    """fla's layer cache (``{"recurrent_state": ..., "conv_state": (q, k, v) or None}``, NumPy) from rfa's
    ``cache``. fla's convolution state holds one input more than rfa's, the oldest, which no later output reads:
    it is 0 here.

    Example:
      >>> layer = rfa.nnx.KimiDeltaAttention(2, 16, head_dim=8, rngs=nnx.Rngs(0))
      >>> fla = cache_to_fla(layer, layer.empty_state(1))
      >>> fla["recurrent_state"].shape, [c.shape for c in fla["conv_state"]]
      ((1, 2, 8, 8), [(1, 16, 4), (1, 16, 4), (1, 16, 4)])
    """
    state, history = np.asarray(cache["state"], np.float32), np.asarray(cache["conv"], np.float32)
    fla = {"recurrent_state": np.swapaxes(state, -1, -2) if _v_first(layer) else state, "conv_state": None}
    if history.shape[1]:
        padded = np.concatenate([np.zeros_like(history[:, :1]), history], axis=1)  # [batch, conv_size, channels]
        parts = np.split(padded, _conv_split(layer)[:-1], axis=-1)
        fla["conv_state"] = tuple(np.ascontiguousarray(np.swapaxes(p, 1, 2)) for p in parts)
    return fla
