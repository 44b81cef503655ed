"""``rfa.linen.MultiHeadDotProductAttention``: Flax Linen's attention layer with kernelized attention.

A drop-in replacement for ``flax.linen.MultiHeadDotProductAttention``: the same fields and call arguments,
the same parameter tree (``query``, ``key``, ``value``, ``out``, and ``query_ln``/``key_ln`` with
``normalize_qk``), plus the estimator's fields (``estimator``, ``num_features``, ``projection_kind``, ...).

Variables:

- ``params``: the projections, and the map's learned parameters (RFA's σ, Hedgehog's weights), trained.
- ``random_features``: the random projection W (``projection``) and the map's other random parameters,
  drawn at ``init`` from the ``random_features`` rng (falling back to ``params``). They are variables, so
  checkpoints hold them and a jitted ``apply`` reads their current values. To redraw, apply with
  ``rngs={"random_features": key}`` and ``mutable=["random_features"]``: every layer draws a fresh W from
  the key, attends with it and returns it in the updated variables (Performer's redrawing, Choromanski et
  al., "Rethinking Attention with Performers", ICLR 2021, Sec. 4).
- ``cache`` (``decode=True``): the recurrent state ``[batch..., heads, F, head_dim + 1]``
  (:mod:`rfa.layers.recurrent_cache`), whose size does not depend on the length; a token costs the same at any
  position. As in Flax, ``init`` with ``decode=True`` creates it (the input's length does not matter), and
  each ``apply(..., mutable=["cache"])`` continues it.
"""

from __future__ import annotations

import functools
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp

from rfa._dtypes import layer_compute_dtype
from rfa._validation import InputError, InputTypeError
from rfa.attention.kernelized import attention_over, kernelized_attention
from rfa.layers.attention_fn import refuse_attention_weights
from rfa.layers.linen_state_layers import RANDOM_FEATURES
from rfa.layers.recurrent_cache import cross_attention_step, empty_state, self_attention_step
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


class MultiHeadDotProductAttention(nn.MultiHeadDotProductAttention):
    """``flax.linen.MultiHeadDotProductAttention`` whose attention is random-feature (kernelized) attention.

    Attributes:
      estimator: a registered estimator name (``rfa.registered_estimators()``) or an ``rfa.Estimator``.
      num_features: m, the rows of the random projection W.
      projection_kind: how W's directions are drawn: ``"orthogonal"``, ``"simplex"`` or ``"iid"``
        (``rfa.sample_projection``'s ``projection_kind``).
      scaling: W's row norms: ``"chi"`` (rows marginally Gaussian: unbiased) or ``"sqrt_d"``.
      renormalize: divide by the estimated normalizer, as ``rfa.kernelized_attention``.
      chunk_size: tokens per chunk of the causal form, as ``rfa.kernelized_attention``.
      feature_params: the map's fixed parameters (Python numbers), as ``rfa.kernelized_attention``.
      sequence_axis: a mesh axis: where the mesh set by ``jax.set_mesh`` has it, full-sequence calls run
        sequence-parallel along it (with Flax's masks too).
      is_causal: causal self-attention without a mask (the chunked causal form), as ``is_causal=True`` in
        ``rfa.kernelized_attention``; Flax's causal mask does the same.

    Flax's fields, and what rfa does with each: ``num_heads``, ``qkv_features``, ``out_features``,
    ``use_bias``, the initializers, ``normalize_qk`` and the ``*_dot_general`` hooks build the same projections
    as Flax (the same parameter tree); ``dtype``, ``param_dtype`` and ``precision`` apply to the projections and
    the attention's contractions (the cache's state stays float32); ``decode`` makes the cache the recurrent
    state; ``dropout_rate`` must be 0 in training and ``broadcast_dropout``/``deterministic`` only decide that
    (there are no attention weights to drop); ``attention_fn``, ``force_fp32_for_softmax`` and the attention
    weights' einsum classes raise ``TypeError`` (there is no softmax and no weight matrix).
    Masks are Flax's (nonzero = attend): padding and causal ∧ padding are applied exactly, anything else
    raises (under ``jit`` when the compiled call runs).

    Example:
      >>> layer = rfa.linen.MultiHeadDotProductAttention(num_heads=4, qkv_features=32, num_features=64)
      >>> x = jnp.ones((2, 10, 32))
      >>> variables = layer.init(jax.random.key(0), x)
      >>> sorted(variables), variables["random_features"]["projection"].shape
      (['params', 'random_features'], (64, 8))
      >>> y, updated = layer.apply(variables, x, rngs={"random_features": jax.random.key(1)},
      ...                          mutable=["random_features"])  # a fresh W, used and returned
      >>> decoder = layer.clone(decode=True)
      >>> cache = decoder.init(jax.random.key(0), x[:, :1])["cache"]
      >>> y, updated = decoder.apply({**variables, "cache": cache}, x[:, :1], mutable=["cache"])
      >>> updated["cache"]["state"].kv.shape  # [batch, heads, F, head_dim + 1], whatever the length
      (2, 4, 64, 9)
    """

    estimator: str | Estimator = "positive"
    num_features: int = 256
    projection_kind: str = "orthogonal"
    scaling: str = "chi"
    renormalize: bool = True
    chunk_size: int = 64
    feature_params: dict | None = None
    sequence_axis: str | None = None
    is_causal: bool = False
    feature_map: str | Estimator | None = None  # estimator's name before rfa 0.3, kept for one release (warns)

    def __post_init__(self):
        if self.feature_map is not None:
            warnings.warn(
                "rfa.linen.MultiHeadDotProductAttention(feature_map=...) is (estimator=...) since rfa 0.3; "
                "feature_map= goes in 0.4.",
                DeprecationWarning,
                stacklevel=2,
            )
            object.__setattr__(self, "estimator", self.feature_map)  # a clone then carries estimator alone
            object.__setattr__(self, "feature_map", None)
        if self.attention_fn is not nn.dot_product_attention:
            raise InputTypeError(
                "rfa.linen.MultiHeadDotProductAttention builds its own attention; choose the estimator with "
                "estimator=, or use nn.MultiHeadDotProductAttention(attention_fn=rfa.make_attention_fn(...)) for "
                "another function."
            )
        if self.force_fp32_for_softmax:
            raise InputTypeError(
                "force_fp32_for_softmax: kernelized attention has no softmax; set dtype or precision instead."
            )
        if self.qk_attn_weights_einsum_cls is not None or self.attn_weights_value_einsum_cls is not None:
            raise InputTypeError(
                "qk_attn_weights_einsum_cls / attn_weights_value_einsum_cls: kernelized attention forms no attention "
                "weights; its contractions follow precision."
            )
        super().__post_init__()

    @nn.compact
    def __call__(
        self,
        inputs_q: Array,
        inputs_k: Array | None = None,
        inputs_v: Array | None = None,
        *,
        inputs_kv: Array | None = None,
        mask: Array | None = None,
        deterministic: bool | None = None,
        dropout_rng=None,
        sow_weights: bool = False,
    ) -> Array:
        """As Flax's ``__call__``: ``inputs_q [batch..., length, features]`` (and ``inputs_k``/``inputs_v`` for
        cross-attention) -> ``[batch..., length, out_features]``."""
        del dropout_rng
        if inputs_kv is not None:
            if inputs_k is not None or inputs_v is not None:
                raise InputError("If `inputs_kv` is given, `inputs_k` and `inputs_v` must be None.")
            warnings.warn(
                "inputs_kv is deprecated in Flax; use inputs_k and inputs_v.", DeprecationWarning, stacklevel=2
            )
            inputs_k = inputs_v = inputs_kv
        cross = inputs_k is not None and inputs_k is not inputs_q
        inputs_k = inputs_q if inputs_k is None else inputs_k
        inputs_v = inputs_k if inputs_v is None else inputs_v
        deterministic = (
            nn.merge_param("deterministic", self.deterministic, deterministic) if (self.dropout_rate > 0.0) else True
        )
        refuse_attention_weights(
            bias=None, dropout_rate=self.dropout_rate, deterministic=deterministic, sow=sow_weights
        )
        qkv_features = self.qkv_features or inputs_q.shape[-1]
        if qkv_features % self.num_heads:
            raise InputError(f"qkv_features ({qkv_features}) must be divisible by num_heads ({self.num_heads}).")
        head_dim = qkv_features // self.num_heads
        dense = functools.partial(
            nn.DenseGeneral,
            axis=-1,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            features=(self.num_heads, head_dim),
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            use_bias=self.use_bias,
            precision=self.precision,
            dot_general=self.qkv_dot_general,
            dot_general_cls=self.qkv_dot_general_cls,
        )
        query, key, value = dense(name="query")(inputs_q), dense(name="key")(inputs_k), dense(name="value")(inputs_v)
        if self.normalize_qk:
            norm = functools.partial(nn.LayerNorm, use_bias=False, dtype=self.dtype, param_dtype=self.param_dtype)
            query, key = norm(name="query_ln")(query), norm(name="key_ln")(key)
        out = self._attend(query, key, value, mask=mask, cross=cross, head_dim=head_dim)
        return nn.DenseGeneral(
            features=self.out_features or inputs_q.shape[-1],
            axis=(-2, -1),
            kernel_init=self.out_kernel_init or self.kernel_init,
            bias_init=self.out_bias_init or self.bias_init,
            use_bias=self.use_bias,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            precision=self.precision,
            dot_general=self.out_dot_general,
            dot_general_cls=self.out_dot_general_cls,
            name="out",
        )(out)

    def _map_variables(self, fm: Estimator, head_dim: int) -> tuple[Array | None, dict]:
        """``(W, parameters)``: the ``random_features`` draw (redrawn if asked) and the ``params`` learned."""
        names = (["projection"] if fm.needs_projection else []) + list(fm.sampled)
        redraw = self.is_mutable_collection(RANDOM_FEATURES) and self.has_rng(RANDOM_FEATURES)
        if self.has_rng(RANDOM_FEATURES) and not redraw and names:
            raise InputError(
                'rngs={"random_features": key} redraws W only with mutable=["random_features"] (the new W is '
                "returned in the updated variables); without it the call would keep the old W."
            )
        missing = [name for name in names if not self.has_variable(RANDOM_FEATURES, name)]
        if missing and not self.is_initializing() and not redraw:
            raise InputError(
                f"the variables hold no {RANDOM_FEATURES}/{missing[0]}: the random projection W is a variable beside "
                f"params; apply with every collection init returned ({{'params': ..., '{RANDOM_FEATURES}': ...}}, "
                "and save and restore both), or draw a new W with "
                f"rngs={{'{RANDOM_FEATURES}': key}}, mutable=['{RANDOM_FEATURES}']."
            )
        drawn = {}
        if names and (redraw or missing):
            key = self.make_rng(RANDOM_FEATURES if self.has_rng(RANDOM_FEATURES) else "params")
            W, sampled = fm.draw(
                key, self.num_features, head_dim, projection_kind=self.projection_kind, scaling=self.scaling
            )
            drawn = {"projection": W, **sampled}
        values = {}
        for name in names:
            variable = self.variable(RANDOM_FEATURES, name, lambda name=name: drawn[name])
            if redraw and not self.is_initializing():
                variable.value = drawn[name]
            values[name] = variable.value

        def learned(rng, name):
            return fm.init_learned(self.num_heads, self.num_features, head_dim)[name]

        params = {name: self.param(name, learned, name) for name in fm.learned}
        projection = values.pop("projection", None)
        return projection, {**(self.feature_params or {}), **values, **params}

    def _attend(self, query: Array, key: Array, value: Array, *, mask, cross: bool, head_dim: int) -> Array:
        fm = lookup_estimator(self.estimator)
        projection, params = self._map_variables(fm, head_dim)
        if self.dtype is not None:
            query, key, value = (x.astype(self.dtype) for x in (query, key, value))
        options = dict(
            estimator=fm,
            projection=projection,
            feature_params=params or None,
            renormalize=self.renormalize,
            chunk_size=self.chunk_size,
            precision=self.precision,
            compute_dtype=layer_compute_dtype(query.dtype),  # bfloat16 operands of the matmuls, summed in float32
        )
        if not self.decode:
            return attention_over(self.sequence_axis)(query, key, value, mask=mask, is_causal=self.is_causal, **options)
        initialized = self.has_variable("cache", "state")
        batch = query.shape[:-3]
        state = self.variable(
            "cache", "state", lambda: empty_state(fm, self.num_features, head_dim, batch, self.num_heads, query.dtype)
        )
        index = self.variable("cache", "cache_index", lambda: jnp.array(0, jnp.int32))
        ready = self.variable("cache", "memory_ready", lambda: jnp.array(False))
        if not initialized:  # init: the cache is created; the output is the full pass's, as in Flax
            return kernelized_attention(query, key, value, mask=mask, **options)
        attend = functools.partial(kernelized_attention, **options)
        if cross:
            out, state.value = cross_attention_step(
                attend, query, key, value, mask=mask, state=state.value, ready=ready.value
            )
            ready.value = jnp.array(True)
        else:
            out, state.value = self_attention_step(attend, query, key, value, mask=mask, state=state.value)
            index.value = index.value + query.shape[-3]
        return out
