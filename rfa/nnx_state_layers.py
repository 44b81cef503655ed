"""``rfa.nnx.DeltaNet``, ``rfa.nnx.KimiDeltaAttention`` and ``rfa.nnx.GatedLinearAttention``: causal Flax NNX layers
whose decode cache is a recurrent state (imported from :mod:`rfa.nnx`; this module keeps :mod:`rfa.nnx` short).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError, check_positive_int
from rfa.attention.masks import UNSUPPORTED, plan_mask, unsupported_message
from rfa.checks import raise_if
from rfa.layer_checkpoints import restore as restore  # rfa.nnx.restore
from rfa.layer_checkpoints import save as save  # rfa.nnx.save
from rfa.models.config import AttentionConfig, EncoderConfig
from rfa.models.cores import core_class

Array = jax.Array


class _StateLayer(nnx.Module):
    """Causal self-attention by one of rfa's model cores between Flax-style q/k/v/output projections, with a
    recurrent state as the decode cache (the base of :class:`DeltaNet`, :class:`KimiDeltaAttention` and
    :class:`GatedLinearAttention`)."""

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        attention,
        *,
        out_features: int | None,
        decode: bool,
        dtype,
        rngs: nnx.Rngs,
    ):
        num_heads = check_positive_int(num_heads, "num_heads")
        in_features = check_positive_int(in_features, "in_features")
        if in_features % num_heads:
            raise InputError(f"in_features ({in_features}) must be divisible by num_heads ({num_heads}).")
        config = EncoderConfig(
            d_model=in_features,
            num_heads=num_heads,
            mlp_dim=1,
            num_encoder_layers=0,
            dtype=jnp.dtype(dtype or jnp.float32).name,
        )
        core_class(attention.kind).check_site("attention", attention, config, causal=True, stateful=True)
        heads = (num_heads, config.head_dim)
        self.num_heads, self.in_features = num_heads, in_features  # as nnx.MultiHeadAttention names them
        self.query, self.key, self.value = (
            nnx.LinearGeneral(in_features, heads, dtype=dtype, rngs=rngs) for _ in range(3)
        )
        self.out = nnx.LinearGeneral(heads, out_features or in_features, axis=(-2, -1), dtype=dtype, rngs=rngs)
        self.core = core_class(attention.kind)(config, attention, causal=True, cross=False, rngs=rngs)
        self.decode = decode
        self.cached_state = nnx.data(None)

    def init_cache(self, input_shape: tuple[int, ...], dtype=jnp.float32) -> None:
        """The empty state for inputs ``[batch, length, features]`` (its size does not depend on ``length``)."""
        del dtype
        self.cached_state = nnx.Cache(self.empty_state(input_shape[0]))

    def empty_state(self, batch: int):
        """The state of no token for ``batch`` sequences (a pytree of arrays)."""
        return self.core.init_cache(batch, 1)

    def __call__(self, inputs: Array, *, mask: Array | None = None, decode: bool | None = None) -> Array:
        """``inputs [batch, L, in_features]`` → ``[batch, L, out_features]``, causal. ``mask`` (Flax's, nonzero =
        attend) is key padding or causal ∧ padding (``nnx.make_causal_mask``, ``make_attention_mask``); other
        masks raise. With ``decode`` the tokens continue the cached state (one or several at a time)."""
        decode = self.decode if decode is None else decode
        if not decode:
            return self.step(inputs, None, mask=mask)
        if self.cached_state is None:
            raise InputError("Autoregressive cache not initialized, call ``init_cache`` first.")
        out, state = self.step(inputs, self.cached_state.get_value(), mask=mask)
        self.cached_state.set_value(state)
        return out

    def step(self, inputs: Array, state, *, mask: Array | None = None):
        """The layer as a function of the state: ``(outputs, state after the tokens)`` from ``state`` (a state of
        :meth:`empty_state`), or the outputs of a whole sequence when ``state`` is None."""
        q, k, v = self.query(inputs), self.key(inputs), self.value(inputs)
        plan = plan_mask(mask, q, k, is_causal=True)
        if not isinstance(plan.pattern, int):
            shape, found = plan.found
            raise_if(plan.pattern == UNSUPPORTED, lambda found: unsupported_message(shape, found), values=(found,))
        batch, length = inputs.shape[0], inputs.shape[-2]
        keep = jnp.ones((batch, length), jnp.bool_)
        if plan.keep_keys is not None:
            keep = jnp.broadcast_to(jnp.any(plan.keep_keys, axis=-2), (batch, length))
        if state is None:
            positions = jnp.broadcast_to(jnp.arange(length), (batch, length))
            out = self.core(q, k, v, inputs, key_mask=keep, q_positions=positions, k_positions=positions)
        else:
            out, state = self.core.extend(q, k, v, inputs, state, keep=keep)
        if plan.keep_queries is not None:  # a padded query outputs 0, as in every rfa attention
            keep_q = jnp.broadcast_to(jnp.any(plan.keep_queries, axis=-2), (batch, length))
            out = jnp.where(keep_q[..., None, None], out, 0.0)
        out = self.out(out.astype(self.out.dtype or out.dtype))
        return out if state is None else (out, state)


class DeltaNet(_StateLayer):
    """DeltaNet or Gated DeltaNet as a Flax NNX layer: causal self-attention by the (gated) delta rule.

    The papers' layer (:mod:`rfa.models.delta_rule`: short convolutions, L2-normalized q and k, β by a sigmoid,
    with ``gated`` Mamba2's decay and the output gate; Yang, Wang, Zhang, Shen, Kim, NeurIPS 2024; Yang, Kautz,
    Hatamizadeh, ICLR 2025) between q/k/v projections and an output projection as ``nnx.MultiHeadAttention``'s
    (head size ``in_features // num_heads``). With ``decode=True`` the cache is the state ``[batch, heads, d, d]``
    and the convolution's last inputs: O(1) per token at any position.

    Args:
      num_heads: the number of heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features.
      out_features: the output's features (default ``in_features``).
      gated: Gated DeltaNet (a learned decay and output gate) or DeltaNet.
      chunk_size: tokens per chunk of the chunked form.
      decode: with True the call continues the cached state (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype of the projections (the state stays float32).
      rngs: ``params`` initializes the weights.

    Example:
      >>> layer = rfa.nnx.DeltaNet(4, 32, rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)
      >>> layer(x[:, :1], decode=True).shape  # one token from the state
      (2, 1, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        gated: bool = True,
        chunk_size: int = 64,
        decode: bool = False,
        dtype=None,
        rngs: nnx.Rngs,
    ):
        kind = "gated_deltanet" if gated else "deltanet"
        super().__init__(
            num_heads,
            in_features,
            AttentionConfig(kind, chunk_size=chunk_size),
            out_features=out_features,
            decode=decode,
            dtype=dtype,
            rngs=rngs,
        )


class KimiDeltaAttention(_StateLayer):
    """Kimi Delta Attention (KDA) as a Flax NNX layer: the delta rule with one decay per key channel,
    ``S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t−1} + β_t k_t v_tᵀ``.

    The layer of Kimi Team, "Kimi Linear: An Expressive, Efficient Attention Architecture" (arXiv 2510.26692, 2025)
    as flash-linear-attention's ``KimiDeltaAttention`` (:mod:`rfa.models.delta_rule`): short convolutions with SiLU
    on q, k and v, q and k L2-normalized (q by ``1/√d_k``), ``β = sigmoid(w_βᵀx)``, the decay
    ``g = −exp(A_log[h]) · softplus(f + dt_bias)`` with ``f`` from a low-rank projection and ``dt_bias`` per key
    channel, and the output ``RMSNorm(o) ⊙ sigmoid(g_out)`` with ``g_out`` from a second low-rank projection;
    between q/k/v projections and an output projection as ``nnx.MultiHeadAttention``'s (head size
    ``in_features // num_heads``). With ``decode=True`` the cache is the state ``[batch, heads, d, d]`` and the
    convolution's last inputs: O(1) per token at any position.

    Args:
      num_heads: the number of heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features.
      out_features: the output's features (default ``in_features``).
      chunk_size: tokens per chunk of the chunked form (sub-chunks of 8 inside).
      decode: with True the call continues the cached state (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype of the projections (the state stays float32).
      rngs: ``params`` initializes the weights.

    Example:
      >>> layer = rfa.nnx.KimiDeltaAttention(4, 32, rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)
      >>> layer(x[:, :1], decode=True).shape  # one token from the state
      (2, 1, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        chunk_size: int = 64,
        decode: bool = False,
        dtype=None,
        rngs: nnx.Rngs,
    ):
        super().__init__(
            num_heads,
            in_features,
            AttentionConfig("kda", chunk_size=chunk_size),
            out_features=out_features,
            decode=decode,
            dtype=dtype,
            rngs=rngs,
        )


class GatedLinearAttention(_StateLayer):
    """Gated linear attention as a Flax NNX layer: ``S_t = diag(g_t) S_{t−1} + φ(k_t)v_tᵀ`` with a data-dependent
    gate per head and feature, ``g_t = sigmoid(W x_t + b)`` (Yang et al., "Gated Linear Attention Transformers with
    Hardware-Efficient Training", ICML 2024, with a full-rank gate), normalized as rfa's kernelized attention.

    Args:
      num_heads: the number of heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features.
      out_features: the output's features (default ``in_features``).
      estimator: the map φ, a registered estimator (default elu+1, as GLA); one with a projection draws it from
        ``rngs`` and is redrawn by :func:`redraw` like every rfa layer's.
      num_features: m of a map that takes one.
      chunk_size: tokens per chunk of the chunked form.
      decode: with True the call continues the cached state (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype of the projections (the state stays float32).
      rngs: ``params`` initializes the weights (and the projection of a map that has one).

    Example:
      >>> layer = rfa.nnx.GatedLinearAttention(4, 32, rngs=nnx.Rngs(0))
      >>> layer(jnp.ones((2, 10, 32)), mask=nnx.make_causal_mask(jnp.ones((2, 10)))).shape
      (2, 10, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        estimator: str = "elu",
        num_features: int = 64,
        chunk_size: int = 64,
        decode: bool = False,
        dtype=None,
        rngs: nnx.Rngs,
    ):
        attention = AttentionConfig(estimator, num_features, chunk_size=chunk_size, gated=True, gate="feature")
        super().__init__(
            num_heads, in_features, attention, out_features=out_features, decode=decode, dtype=dtype, rngs=rngs
        )
