"""``rfa.nnx.MultiHeadAttention``: Flax NNX's ``nnx.MultiHeadAttention`` with kernelized attention.

A drop-in replacement: the same constructor and call arguments (swapping the class is the whole change),
plus the estimator's (``estimator``, ``num_features``, ``projection_kind``, ...). The attention between
the projections is a :class:`~rfa.layers.attention_fn.KernelizedAttention` (``layer.attention_fn``): its random
projection is a :class:`~rfa.layers.feature_variables.RandomProjection` variable, not a ``nnx.Param``, so optimizers
built with ``wrt=nnx.Param`` leave it alone, checkpoints of ``nnx.state(model)`` hold it, and
:func:`rfa.nnx.redraw` replaces it under ``nnx.jit`` without retracing.

With ``decode=True`` the cache is the recurrent state (:mod:`rfa.layers.recurrent_cache`), not keys and
values: ``init_cache`` allocates ``[batch..., heads, F, head_dim + 1]`` whatever the maximum length, and a
token costs the same at any position. Cross-attention (a call with ``inputs_k``) computes the encoder's
state on its first decoding call and reads it afterwards.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx
from flax.nnx.module import first_from

from rfa._dtypes import layer_compute_dtype
from rfa._validation import InputError, InputTypeError, check_positive_int, renamed_keywords
from rfa.layers.attention_fn import KernelizedAttention, refuse_attention_weights, repeat_kv_heads
from rfa.layers.feature_variables import projection_key
from rfa.layers.recurrent_cache import cross_attention_step, empty_state, self_attention_step
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array

NO_DECODE = (  # flax.nnx.MultiHeadAttention's message
    "No `decode` argument was provided to MultiHeadAttention as either a __call__ argument, class attribute, or "
    "nnx.flag."
)


class MultiHeadAttention(nnx.MultiHeadAttention):
    """``flax.nnx.MultiHeadAttention`` whose attention is random-feature (kernelized) attention.

    Args:
      num_heads: the number of heads (Flax's).
      in_features: the input's features (Flax's).
      qkv_features: the features of q, k and v over all heads (Flax's; default ``in_features``).
      out_features: the output's features (Flax's; default ``in_features``).
      num_kv_heads: grouped-query attention (Flax's): each key/value head serves ``num_heads // num_kv_heads``
        query heads, paired as Flax pairs them.
      in_kv_features: the features of ``inputs_k`` and ``inputs_v`` (Flax's).
      estimator: a registered estimator name (``rfa.registered_estimators()``) or an ``rfa.Estimator``.
      num_features: m, the rows of the random projection W.
      projection_kind: how W's directions are drawn: ``"orthogonal"``, ``"simplex"`` or ``"iid"``
        (``rfa.sample_projection``'s ``projection_kind``).
      scaling: W's row norms: ``"chi"`` (rows marginally Gaussian: unbiased) or ``"sqrt_d"``.
      renormalize: divide by the estimated normalizer, as ``rfa.kernelized_attention``.
      chunk_size: tokens per chunk of the causal form, as ``rfa.kernelized_attention``.
      feature_params: the map's fixed parameters, Python numbers shared by all heads, as
        ``rfa.kernelized_attention``.
      sequence_axis: a mesh axis: where the mesh set by ``jax.set_mesh`` has it, full-sequence calls run
        sequence-parallel along it.
      rngs: ``params`` initializes the weights (the same ones as ``nnx.MultiHeadAttention`` from the same
        ``rngs``, and every later layer's too); W is drawn from :func:`rfa.layers.feature_variables.projection_key`.
      **kwargs: Flax's other keywords, passed to ``nnx.MultiHeadAttention``. What rfa does with each:
        ``decode`` makes the cache the recurrent state (given here or in the call, as Flax requires);
        ``dtype``, ``param_dtype``, ``precision`` apply to the projections and the attention's contractions
        (the state stays float32, float64 for float64); ``normalize_qk``, ``use_bias``, the initializers, the
        ``*_promote_dtype`` and ``*_dot_general`` hooks, ``keep_rngs`` and the metadata act on the projections as
        in Flax;
        ``dropout_rate`` must be 0 in training and ``broadcast_dropout``/``deterministic`` only decide that
        (there are no attention weights to drop); ``attention_fn`` raises ``TypeError``.

    Masks are Flax's (nonzero = attend): padding and causal ∧ padding are applied exactly, and anything
    else raises (under ``jit`` when the compiled call runs; see :mod:`rfa.attention.masks`).

    Example:
      >>> layer = rfa.nnx.MultiHeadAttention(4, 32, estimator="positive", num_features=64, decode=False,
      ...                                    rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x, mask=nnx.make_causal_mask(jnp.ones((2, 10)))).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)  # the recurrent state: its size does not depend on the length
      >>> layer.cached_state.get_value().kv.shape
      (2, 4, 64, 9)
      >>> layer(x[:, :1], decode=True).shape  # one token, O(1) at any position
      (2, 1, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        qkv_features: int | None = None,
        out_features: int | None = None,
        num_kv_heads: int | None = None,
        in_kv_features: int | None = None,
        *,
        estimator: str | Estimator = "positive",
        num_features: int = 256,
        projection_kind: str = "orthogonal",
        scaling: str = "chi",
        renormalize: bool = True,
        chunk_size: int = 64,
        feature_params: dict | None = None,
        sequence_axis: str | None = None,
        rngs: nnx.Rngs,
        **kwargs,
    ):
        if "attention_fn" in kwargs:
            raise InputTypeError(
                "rfa.nnx.MultiHeadAttention builds its own attention_fn; choose the estimator with estimator=, or "
                "use nnx.MultiHeadAttention(attention_fn=rfa.make_attention_fn(...)) for another function."
            )
        num_heads = check_positive_int(num_heads, "num_heads")
        qkv = check_positive_int(qkv_features or in_features, "qkv_features")
        if qkv % num_heads:
            raise InputError(f"qkv_features ({qkv}) must be divisible by num_heads ({num_heads}).")
        super().__init__(
            num_heads, in_features, qkv_features, out_features, num_kv_heads, in_kv_features, rngs=rngs, **kwargs
        )  # the same weights as nnx.MultiHeadAttention from the same rngs: W is drawn after them
        fm = lookup_estimator(estimator)
        random = fm.needs_projection or bool(fm.sampled)
        key = projection_key(rngs) if random else None
        self.attention_fn = nnx.data(
            KernelizedAttention(
                fm,
                num_features,
                qkv // num_heads,
                key=key,
                projection_kind=projection_kind,
                scaling=scaling,
                renormalize=renormalize,
                chunk_size=chunk_size,
                feature_params=feature_params,
                num_heads=num_heads,
                sequence_axis=sequence_axis,
            )
        )
        self.cached_state = nnx.data(None)
        self.memory_ready = nnx.data(None)

    def init_cache(self, input_shape: tuple[int, ...], dtype=jnp.float32) -> None:
        """The empty recurrent state for inputs ``[batch..., length, features]``: ``[batch..., heads, F,
        head_dim + 1]`` float32 (the state's precision for any lower ``dtype``; float64 for float64), independent of
        ``length``."""
        fn = self.attention_fn
        batch = tuple(input_shape[:-2])
        state = empty_state(fn.estimator, fn.num_features, self.head_dim, batch, self.num_heads, dtype)
        self.cached_state = nnx.Cache(state)
        self.cache_index = nnx.Cache(jnp.array(0, jnp.int32))
        self.memory_ready = nnx.Cache(jnp.array(False))

    def set_view(self, deterministic=None, decode=None, batch_size=None, max_length=None):
        """For ``nnx.view``: as Flax's, with the recurrent state as the cache (``max_length`` is not needed)."""
        if deterministic is not None:
            self.deterministic = deterministic
        if decode is not None:
            self.decode = decode
            if decode and self.cached_state is None:
                if batch_size is None:
                    raise InputTypeError("'batch_size' must be provided when initializing the cache.")
                batch = (batch_size,) if isinstance(batch_size, int) else tuple(batch_size)
                self.init_cache(batch + (1, self.in_features), self.dtype or jnp.float32)

    def redraw(self, key: Array) -> None:
        """Replaces the random projection (and the map's other random parameters) by a draw from ``key``."""
        self.attention_fn.redraw(key)

    def __call__(
        self,
        inputs_q: Array,
        inputs_k: Array | None = None,
        inputs_v: Array | None = None,
        *,
        mask: Array | None = None,
        decode: bool | None = None,
        **kwargs,
    ) -> Array:
        """As ``nnx.MultiHeadAttention.__call__``; with ``decode`` the new tokens continue the recurrent state.

        A decoding call takes any number of new tokens (one per step, or a whole prompt at once); its mask,
        if any, covers these tokens only (:func:`rfa.layers.recurrent_cache.check_decode_mask`). A call with
        ``inputs_k`` other than ``inputs_q`` is cross-attention: its state is the encoder's, computed once.
        """
        decode = first_from(decode, self.decode, error_msg=NO_DECODE)
        if not decode:
            return super().__call__(inputs_q, inputs_k, inputs_v, mask=mask, decode=False, **kwargs)
        if self.cached_state is None:
            raise InputError("Autoregressive cache not initialized, call ``init_cache`` first.")
        deterministic = kwargs.get("deterministic")
        refuse_attention_weights(
            bias=None,
            dropout_rate=self.dropout_rate,
            sow=bool(kwargs.get("sow_weights", False)),
            deterministic=self.deterministic if deterministic is None else deterministic,
        )
        cross = inputs_k is not None and inputs_k is not inputs_q
        inputs_k = inputs_q if inputs_k is None else inputs_k
        inputs_v = inputs_k if inputs_v is None else inputs_v
        query, key, value = self.query(inputs_q), self.key(inputs_k), self.value(inputs_v)
        if self.normalize_qk:
            query, key = self.query_ln(query), self.key_ln(key)
        key, value = repeat_kv_heads(query, key, value)
        fn = self.attention_fn
        attend = functools.partial(
            fn.attention(sequence_parallel=False),
            precision=self.precision,
            compute_dtype=layer_compute_dtype(query.dtype),  # bfloat16 operands of the matmuls, summed in float32
        )
        state = self.cached_state.get_value()
        if cross:
            out, state = cross_attention_step(
                attend, query, key, value, mask=mask, state=state, ready=self.memory_ready[...]
            )
            self.memory_ready[...] = jnp.array(True)
        else:
            out, state = self_attention_step(attend, query, key, value, mask=mask, state=state)
            self.cache_index[...] += query.shape[-3]
        self.cached_state.set_value(state)
        return self.out(out.astype(self.dtype or out.dtype))


MultiHeadAttention.__init__ = renamed_keywords(feature_map="estimator")(MultiHeadAttention.__init__)  # before rfa 0.3
