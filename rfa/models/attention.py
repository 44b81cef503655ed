"""Multi-head attention of the models: exact softmax or kernelized, with decoding caches.

The q/k/v/output projections are ``nnx.LinearGeneral`` layers; the attention between them is
chosen by an :class:`~rfa.models.config.AttentionConfig`. For decoding, self-attention keeps a
cache — the keys and values so far for exact attention (in the model's dtype), the recurrent state
``(S, z)`` for kernelized attention, so each token costs the same at any position — built for a
whole prompt in one parallel pass (:meth:`MultiHeadAttention.prefill`) and extended token by token
(:meth:`MultiHeadAttention.decode_step`); cross-attention prepares the encoder side once
(:meth:`MultiHeadAttention.prepare_memory`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa.attention.flax_adapter import Calibratable, random_feature_params, random_variables, redraw_variables
from rfa.attention.kernelized import kernelized_attention
from rfa.attention.state import RecurrentState, init_state
from rfa.models.config import AttentionConfig, TransformerConfig
from rfa.models.positional import RelativeBias, rotate
from rfa.random_features.feature_maps import feature_map as lookup_feature_map

Array = jax.Array


class MultiHeadAttention(Calibratable):
    """Self- or cross-attention ``[batch, q_len, d_model] -> [batch, q_len, d_model]``.

    Args:
      config: the model config (widths, positional encoding, dtype).
      attention: this site's attention.
      causal: each query sees keys at or before its position (decoder self-attention).
      cross: keys and values come from a separate memory (encoder output).
      rngs: ``params`` initializes the weights; ``projection`` (falling back to ``params``) draws W.

    A kernelized site whose map fits parameters from data (oprf, the DERFs) can keep a fit from
    calibration batches: inside ``with rfa.attention.calibrating(model):`` each (eager) pass fits them
    to the site's queries and keys per head and stores them as ``FittedParams`` state, which every
    later pass, prefill and decoding step uses instead of the config's fixed values.
    """

    def __init__(
        self, config: TransformerConfig, attention: AttentionConfig, *, causal: bool, cross: bool, rngs: nnx.Rngs
    ):
        d, h, dh = config.d_model, config.num_heads, config.head_dim
        dtype = jnp.dtype(config.dtype)
        self.query = nnx.LinearGeneral(d, (h, dh), dtype=dtype, rngs=rngs)
        self.key = nnx.LinearGeneral(d, (h, dh), dtype=dtype, rngs=rngs)
        self.value = nnx.LinearGeneral(d, (h, dh), dtype=dtype, rngs=rngs)
        self.out = nnx.LinearGeneral((h, dh), d, axis=(-2, -1), dtype=dtype, rngs=rngs)
        self.attention, self.causal, self.dtype = attention, causal, dtype
        self.num_heads, self.head_dim = h, dh
        self.rotary = config.positional == "rotary" and (not cross or config.cross_attention_rotary)
        relative = config.positional == "relative" and not cross
        self.relative = (
            RelativeBias(h, num_buckets=config.relative_buckets, max_distance=config.relative_max_distance,
                         bidirectional=not causal, rngs=rngs)
            if relative
            else None
        )  # fmt: skip
        self.feature_map = lookup_feature_map(attention.kind) if attention.kernelized else None
        fm = self.feature_map
        random = fm is not None and (fm.needs_projection or bool(fm.sampled))
        key = (rngs.projection() if "projection" in rngs else rngs.params()) if random else None
        self.projection, self.random_params = (
            random_variables(fm, key, attention.num_features, dh, kind=attention.projection, scaling=attention.scaling)
            if fm is not None
            else (None, nnx.Dict())
        )
        self.init_calibration()  # parameters fitted on calibration batches (rfa.attention.calibrating)

    def redraw(self, key: Array) -> None:
        """Replaces the random projection and the map's other random parameters (kernelized sites) by a fresh
        draw from ``key``."""
        if self.feature_map is not None:
            a = self.attention
            redraw_variables(self.projection, self.random_params, self.feature_map, key, a.num_features,
                             self.head_dim, kind=a.projection, scaling=a.scaling)  # fmt: skip

    def _kernel_options(self) -> dict:
        projection = None if self.projection is None else self.projection[...]
        params = self.with_fitted(random_feature_params(self.attention.params, self.random_params))
        return dict(feature_map=self.feature_map, projection=projection, feature_params=params)

    def _queries_keys(self, x, memory, q_positions, k_positions):
        q, k, v = self.query(x), self.key(memory), self.value(memory)
        if self.rotary:
            q, k = rotate(q, q_positions), rotate(k, k_positions)
        return q, k, v

    def __call__(self, x: Array, memory: Array | None = None, *, key_mask: Array, q_positions: Array,
                 k_positions: Array) -> Array:  # fmt: skip
        """Attention over a whole sequence (training, teacher forcing, encoding).

        Args:
          x: ``[batch, q_len, d_model]`` queries' inputs.
          memory: ``[batch, kv_len, d_model]`` for cross-attention; None for self-attention.
          key_mask: ``[batch, kv_len]`` boolean, False for padding keys.
          q_positions, k_positions: ``[batch, q_len]`` and ``[batch, kv_len]`` integer positions.
        """
        q, k, v = self._queries_keys(x, x if memory is None else memory, q_positions, k_positions)
        return self._attend(q, k, v, key_mask, q_positions, k_positions)

    def _attend(self, q, k, v, key_mask, q_positions, k_positions, return_state: bool = False):
        """The attention of projected (and rotated) ``q, k, v``, then the output projection.

        With ``return_state`` (kernelized sites) also the recurrent state after the keys.
        """
        if self.feature_map is not None:
            if self.calibrating:
                self.calibrate(q, k, mask=key_mask[:, None, None, :])
            out = kernelized_attention(
                q, k, v, mask=key_mask[:, None, None, :], is_causal=self.causal,
                chunk_size=self.attention.chunk_size, return_state=return_state, **self._kernel_options()
            )  # fmt: skip
            return (self.out(out[0]), out[1]) if return_state else self.out(out)
        mask = key_mask[:, None, None, :]
        if self.causal:
            mask = mask & (k_positions[:, None, None, :] <= q_positions[:, None, :, None])
        bias = None if self.relative is None else self.relative(q_positions, k_positions)
        if q.dtype == jnp.float16 and jax.default_backend() == "cpu":
            # jax.nn.dot_product_attention asks float16 dots for float32 results, a precision
            # XLA:CPU rejects under jit; float32 copies give the same products.
            q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
        out = jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask)
        # A query that sees no key (a padding token at position 0) gets 0, as in kernelized attention,
        # instead of softmax's uniform average over every key, future ones included.
        sees_a_key = jnp.any(jnp.broadcast_to(mask, mask.shape[:2] + (q.shape[1], k.shape[1])), axis=-1)
        out = jnp.where(jnp.moveaxis(sees_a_key, 1, 2)[..., None], out, 0.0)
        return self.out(out)

    # Decoding.

    def init_cache(self, batch: int, max_length: int):
        """The empty self-attention cache: keys/values in the model's dtype (exact) or the recurrent state."""
        if self.feature_map is not None:
            features = self.feature_map.num_outputs(self.attention.num_features, self.head_dim)
            return init_state((batch,), self.num_heads, features, self.head_dim)
        shape = (batch, max_length, self.num_heads, self.head_dim)
        return {"k": jnp.zeros(shape, self.dtype), "v": jnp.zeros(shape, self.dtype),
                "mask": jnp.zeros((batch, max_length), jnp.bool_)}  # fmt: skip

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int):
        """Causal self-attention over a whole prompt, returning the cache :meth:`decode_step` continues.

        One parallel pass (the same as :meth:`__call__`) gives the outputs; the cache is built from
        the same keys and values: written into the first ``prompt_len`` slots (exact), or summed into
        the recurrent state ``Σ_j φ(k_j)[v_j, 1]ᵀ`` that the same pass returns (``return_state=True`` of
        :func:`rfa.kernelized_attention`; Katharopoulos et al., "Transformers are RNNs", ICML 2020, Sec. 3.4).

        Args:
          x: ``[batch, prompt_len, d_model]``.
          key_mask: ``[batch, prompt_len]`` boolean, False for padding tokens (left out of the cache).
          positions: ``[batch, prompt_len]`` integer positions.
          max_length: cache slots, ``>= prompt_len`` (the prompt plus every token to decode).

        Returns:
          ``(y [batch, prompt_len, d_model], cache)``.

        Example:
          >>> from rfa.models import AttentionConfig, preset
          >>> config = preset("tiny", vocab_size=50, decoder_attention=AttentionConfig("positive", 16))
          >>> attention = MultiHeadAttention(config, config.decoder_attention, causal=True, cross=False,
          ...                                rngs=nnx.Rngs(0))
          >>> x, positions = jnp.ones((2, 5, config.d_model)), jnp.broadcast_to(jnp.arange(5), (2, 5))
          >>> y, cache = attention.prefill(x, key_mask=jnp.ones((2, 5), bool), positions=positions, max_length=64)
          >>> y.shape, cache.kv.shape  # the recurrent state (S, z) after the 5 tokens: [batch, heads, F, d_v + 1]
          ((2, 5, 32), (2, 4, 16, 9))
        """
        q, k, v = self._queries_keys(x, x, positions, positions)
        if self.feature_map is not None:
            return self._attend(q, k, v, key_mask, positions, positions, return_state=True)
        out = self._attend(q, k, v, key_mask, positions, positions)
        return out, _write(self.init_cache(x.shape[0], max_length), 0, k, v, key_mask)

    def decode_step(self, x: Array, cache, position: Array, keep: Array):
        """One token of causal self-attention: ``x [batch, d_model]`` at ``position`` -> ``(y, cache)``.

        ``keep [batch]`` is False for a padding token (its key and value are left out).
        """
        positions = jnp.broadcast_to(position, x.shape[:1])[:, None]
        q, k, v = self._queries_keys(x[:, None], x[:, None], positions, positions)
        if self.feature_map is not None:
            out, cache = kernelized_attention(
                q,
                k,
                v,
                mask=keep[:, None, None, None],
                is_causal=True,
                initial_state=cache,
                return_state=True,
                **self._kernel_options(),
            )  # the causal form on one token: O(F·d) at any position
            return self.out(out[:, 0]), cache
        q, k, v = q[:, 0], k[:, 0], v[:, 0]
        cache = _write(cache, position, k[:, None], v[:, None], keep[:, None])
        key_positions = jnp.broadcast_to(jnp.arange(cache["k"].shape[1]), cache["mask"].shape)
        mask = cache["mask"] & (key_positions <= position)
        bias = None if self.relative is None else self.relative(positions, key_positions)[:, :, 0]
        return self.out(_attend_one(q, cache["k"], cache["v"], mask, bias).astype(x.dtype)), cache

    def prepare_memory(self, memory: Array, key_mask: Array):
        """Cross-attention's encoder side, computed once: keys/values (exact) or the state ``(S, z)``."""
        positions = jnp.broadcast_to(jnp.arange(memory.shape[1]), key_mask.shape)
        k, v = self.key(memory), self.value(memory)
        if self.rotary:
            k = rotate(k, positions)
        if self.feature_map is not None:  # the state of the keys alone: a query of length 0
            _, state = kernelized_attention(
                k[:, :0], k, v, mask=key_mask[:, None, None, :], return_state=True, **self._kernel_options()
            )
            return state
        return {"k": k.astype(self.dtype), "v": v.astype(self.dtype), "mask": key_mask}

    def attend_memory(self, x: Array, prepared, position: Array) -> Array:
        """Cross-attention of one decoder token ``x [batch, d_model]`` to :meth:`prepare_memory`'s result."""
        q = self.query(x[:, None])
        if self.rotary:
            q = rotate(q, jnp.broadcast_to(position, x.shape[:1])[:, None])
        if isinstance(prepared, RecurrentState):  # the state read with no new key
            no_key = jnp.zeros(q.shape[:1] + (0,) + q.shape[2:], q.dtype)
            out = kernelized_attention(q, no_key, no_key, initial_state=prepared, **self._kernel_options())
            return self.out(out[:, 0])
        q = q[:, 0]
        return self.out(_attend_one(q, prepared["k"], prepared["v"], prepared["mask"], None).astype(x.dtype))


def _write(cache: dict, start: Array | int, k: Array, v: Array, keep: Array) -> dict:
    """The exact cache with ``k, v [batch, n, heads, d]`` and ``keep [batch, n]`` written from slot ``start`` on.

    Keys and values take the cache's dtype (the model's).
    """
    return {
        "k": jax.lax.dynamic_update_slice_in_dim(cache["k"], k.astype(cache["k"].dtype), start, axis=1),
        "v": jax.lax.dynamic_update_slice_in_dim(cache["v"], v.astype(cache["v"].dtype), start, axis=1),
        "mask": jax.lax.dynamic_update_slice_in_dim(cache["mask"], keep, start, axis=1),
    }


def _attend_one(q: Array, k: Array, v: Array, mask: Array, bias: Array | None) -> Array:
    """Softmax attention of one query per batch row: ``q [b, h, d]``, ``k, v [b, L, h, d]``, ``mask [b, L]``.

    As ``jax.nn.dot_product_attention`` (the teacher-forced path): logits and softmax in float32
    from the cache's dtype, probabilities cast to the values' dtype.
    """
    logits = jnp.einsum("bhd,blhd->bhl", q.astype(k.dtype), k, preferred_element_type=jnp.float32)
    logits = logits / jnp.sqrt(q.shape[-1]).astype(jnp.float32)
    if bias is not None:
        logits = logits + bias
    logits = jnp.where(mask[:, None, :], logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    out = jnp.einsum("bhl,blhd->bhd", probs, v, preferred_element_type=jnp.float32)
    return jnp.where(jnp.any(mask, axis=-1)[:, None, None], out, 0.0)  # no visible key: 0
