"""A drop-in ``attention_fn`` for ``flax.nnx.MultiHeadAttention`` and linen's ``MultiHeadDotProductAttention``.

The projection W is a :class:`RandomProjection` variable of the returned module, so under
``nnx.jit`` it is state, not a compiled-in constant: :meth:`KernelizedAttention.redraw` replaces it
from an explicit key without retracing, and ``nnx.Optimizer(model, tx, wrt=nnx.Param)`` leaves it
alone. Evaluation with the same state is deterministic. Choromanski et al., "Rethinking Attention
with Performers", ICLR 2021 (feature redrawing, Sec. 4).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError, check_choice, check_key, check_positive_int, renamed_keywords
from rfa.attention.kernelized import attention_over
from rfa.layers.feature_variables import (
    Calibratable,
    learned_variables,
    random_variables,
    redraw_variables,
    scalar_params,
)
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import estimator as lookup_estimator
from rfa.random_features.projections import PROJECTION_KINDS, ROW_SCALINGS

Array = jax.Array


class KernelizedAttention(Calibratable):
    """Callable attention function with the signature of ``flax.nnx.dot_product_attention``.

    Build it with :func:`make_attention_fn`. Attention-weight dropout, additive biases and sowing
    attention weights need the explicit L×L matrix, which kernelized attention never forms: they
    raise a ValueError instead of being ignored.

    Maps with parameters fitted from data (oprf, aderf, saderf, sderf) can hold parameters fitted
    on calibration batches (:meth:`calibrate`, or :func:`calibrating` for every attention of a
    model): they are :class:`FittedParams` state, saved with the model, and used by every later call,
    causal and decoding ones included.
    """

    def __init__(
        self,
        estimator: str | Estimator,
        num_features: int,
        head_dim: int,
        *,
        key: Array | None,
        projection_kind: str,
        scaling: str,
        renormalize: bool,
        chunk_size: int,
        feature_params: dict | None,
        num_heads: int | None = None,
        sequence_axis: str | None = None,
    ):
        self.estimator = lookup_estimator(estimator)
        self.num_features = check_positive_int(num_features, "num_features")
        self.head_dim = check_positive_int(head_dim, "head_dim")
        self.projection_kind = check_choice(projection_kind, "projection_kind", PROJECTION_KINDS)
        self.scaling = check_choice(scaling, "scaling", ROW_SCALINGS)
        self.renormalize = renormalize
        self.chunk_size = check_positive_int(chunk_size, "chunk_size")
        self.sequence_axis = sequence_axis
        self.feature_params = nnx.static(scalar_params(feature_params))
        random = self.estimator.needs_projection or self.estimator.sampled
        if random and key is None:
            raise InputError(f"feature map {self.estimator.name!r} needs a key to sample its projection.")
        self.projection, self.random_params = random_variables(
            self.estimator,
            check_key(key) if random else None,
            self.num_features,
            self.head_dim,
            projection_kind=self.projection_kind,
            scaling=self.scaling,
        )
        heads = 1 if num_heads is None else check_positive_int(num_heads, "num_heads")
        self.learned_params = learned_variables(self.estimator, heads, self.num_features, self.head_dim)
        self.init_calibration()

    def redraw(self, key: Array) -> None:
        """Replaces W (and the map's other random parameters) with a fresh draw from ``key`` (use a new key
        each time, e.g. split per step)."""
        redraw_variables(
            self.projection,
            self.random_params,
            self.estimator,
            check_key(key),
            self.num_features,
            self.head_dim,
            projection_kind=self.projection_kind,
            scaling=self.scaling,
        )

    def __call__(
        self,
        query: Array,
        key: Array,
        value: Array,
        bias: Array | None = None,
        mask: Array | None = None,
        broadcast_dropout: bool = True,
        dropout_rng: Array | None = None,
        dropout_rate: float = 0.0,
        deterministic: bool = False,
        dtype=None,
        precision=None,
        module=None,
        is_causal: bool = False,
        **kwargs,
    ) -> Array:
        """Kernelized attention on ``[batch..., length, heads, head_dim]`` inputs; see ``rfa.kernelized_attention``."""
        del broadcast_dropout, dropout_rng, kwargs  # no attention weights to drop
        refuse_attention_weights(
            bias=bias, dropout_rate=dropout_rate, deterministic=deterministic, sow=module is not None
        )
        if query.shape[-1] != self.head_dim:
            raise InputError(f"query head dim must be head_dim={self.head_dim}, got query.shape={tuple(query.shape)}.")
        key, value = repeat_kv_heads(query, key, value)
        if self.calibrating:
            self.calibrate(query, key, mask)
        fitted = self.estimator.to_fit(self.map_params(self.feature_params))
        if fitted and query.shape[-3] != key.shape[-3]:
            raise InputError(
                f"feature map {self.estimator.name!r} fits {list(fitted)} from the queries and keys of each call, "
                f"and this call has q_len={query.shape[-3]} != kv_len={key.shape[-3]} (Flax's decode=True cache, "
                "or cross-attention while decoding): the fit would differ from the one of the full pass. Calibrate "
                "the module first (fn.calibrate(q, k), or rfa.layers.calibrating(model) around full passes), or "
                "fix the parameters: make_attention_fn(..., "
                f"feature_params={{{', '.join(f'{n!r}: value' for n in fitted)}}}) "
                f"with the values of rfa.estimator({self.estimator.name!r}).fit(q, k) on a full pass, or "
                f"rfa.estimator({self.estimator.name!r}).standard_params({self.head_dim}) = "
                f"{self.estimator.standard_params(self.head_dim) if self.estimator.standard_params else None} "
                "for queries and keys with independent unit-variance entries."
            )
        if dtype is not None:
            query, key, value = (x.astype(dtype) for x in (query, key, value))
        return self.attention()(query, key, value, mask=mask, is_causal=is_causal, precision=precision)

    def attention(self, *, sequence_parallel: bool = True) -> Callable[..., Array]:
        """``rfa.kernelized_attention`` with this module's map, projection, parameters and options bound (with
        ``sequence_parallel``, split over ``sequence_axis`` where the mesh set by ``jax.set_mesh`` has it): call
        it with q, k, v and the per-call keywords (mask, is_causal, initial_state, return_state, precision)."""
        return functools.partial(
            attention_over(self.sequence_axis if sequence_parallel else None),
            estimator=self.estimator,
            projection=None if self.projection is None else self.projection[...],
            feature_params=self.map_params(self.feature_params),
            renormalize=self.renormalize,
            chunk_size=self.chunk_size,
        )


def refuse_attention_weights(*, bias, dropout_rate: float, deterministic: bool, sow: bool) -> None:
    """Raises for what needs the explicit L×L attention matrix, which kernelized attention never forms: an
    additive bias, attention-weight dropout, sowing the weights."""
    if bias is not None:
        raise InputError("kernelized attention cannot add a bias to its implicit attention matrix; bias must be None.")
    if dropout_rate > 0.0 and not deterministic:
        raise InputError(
            f"attention-weight dropout (dropout_rate={dropout_rate}) needs the explicit attention matrix; "
            "use dropout_rate=0 with kernelized attention."
        )
    if sow:
        raise InputError("kernelized attention has no attention weights to sow; call with sow_weights=False.")


def repeat_kv_heads(query: Array, key: Array, value: Array) -> tuple[Array, Array]:
    """Grouped-query attention: keys and values of ``num_kv_heads`` heads repeated to the queries' ``num_heads``."""
    heads, kv_heads = query.shape[-2], key.shape[-2]
    if kv_heads == heads:
        return key, value
    if kv_heads < 1 or heads % kv_heads:
        raise InputError(f"query heads ({heads}) must be a multiple of key/value heads ({kv_heads}).")
    return tuple(jnp.repeat(x, heads // kv_heads, axis=-2) for x in (key, value))


def make_attention_fn(
    estimator: str | Estimator = "positive",
    num_features: int = 256,
    *,
    head_dim: int,
    key: Array | None = None,
    projection_kind: str = "orthogonal",
    scaling: str = "chi",
    renormalize: bool = True,
    chunk_size: int = 64,
    feature_params: dict | None = None,
    num_heads: int | None = None,
    sequence_axis: str | None = None,
) -> KernelizedAttention:
    """A kernelized ``attention_fn`` for ``nnx.MultiHeadAttention`` (or linen's attention).

    Args:
      estimator: registered name or ``Estimator``.
      num_features: m, rows of the projection.
      head_dim: d_k of the attention heads (``qkv_features // num_heads``).
      key: PRNG key of the first projection draw (not needed for deterministic maps).
      projection_kind: how W's directions are drawn (``rfa.sample_projection``'s ``projection_kind``).
      scaling: W's row norms (``rfa.sample_projection``'s ``scaling``).
      renormalize: as in ``rfa.kernelized_attention``.
      chunk_size: as in ``rfa.kernelized_attention``.
      feature_params: as in ``rfa.kernelized_attention``.
      num_heads: for maps with learned parameters (hedgehog, rfa): one set per head; None shares one
        set among all heads. They are ``nnx.Param`` s of the module, trained with the model.
      sequence_axis: a mesh axis; where the mesh set by ``jax.set_mesh`` has it (size > 1), every call runs
        sequence-parallel along it (``rfa.attention.sequence_parallel_attention``).

    Returns:
      A :class:`KernelizedAttention` module. ``nnx.MultiHeadAttention(..., attention_fn=fn)``
      keeps it as a submodule, so its projection travels with the model's state; redraw with
      ``fn.redraw(new_key)``. It takes the masks Flax builds (float or bool; key padding, query ⊗ key
      padding, causal ∧ padding, the ``decode=True`` cache mask) or ``is_causal=True``; see
      :mod:`rfa.attention.masks` for the rest. With Flax's ``decode=True`` cache each step attends to
      the whole cache, O(L) per token, and equals the causal pass; rfa's own models decode in O(1)
      per token with the recurrent state (:mod:`rfa.attention.state`). Maps with parameters fitted
      from the data (oprf's ``phi_sq``) need them in ``feature_params`` for causal masks and for calls
      with q_len != kv_len (decoding), where a fit per call would change the estimator.

    Example:
      >>> fn = rfa.make_attention_fn("positive", 128, head_dim=16, key=jax.random.key(0))
      >>> mha = nnx.MultiHeadAttention(4, 64, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
      >>> y = mha(jnp.ones((2, 10, 64)), is_causal=True)
    """
    return KernelizedAttention(
        estimator,
        num_features,
        head_dim,
        key=key,
        projection_kind=projection_kind,
        scaling=scaling,
        renormalize=renormalize,
        chunk_size=chunk_size,
        feature_params=feature_params,
        num_heads=num_heads,
        sequence_axis=sequence_axis,
    )


make_attention_fn = renamed_keywords(feature_map="estimator")(make_attention_fn)  # its keyword before rfa 0.3
