"""A drop-in ``attention_fn`` for ``flax.nnx.MultiHeadAttention`` and linen's ``MultiHeadDotProductAttention``.

The projection W is a :class:`RandomProjection` variable of the returned module, so under
``nnx.jit`` it is state, not a compiled-in constant: :meth:`KernelizedAttention.redraw` replaces it
from an explicit key without retracing, and ``nnx.Optimizer(model, tx, wrt=nnx.Param)`` leaves it
alone. Evaluation with the same state is deterministic. Choromanski et al., "Rethinking Attention
with Performers", ICLR 2021 (feature redrawing, Sec. 4).
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError, InputTypeError, check_choice, check_key, check_positive_int
from rfa.attention.calibration import fit_feature_params
from rfa.attention.kernelized import attention_over
from rfa.random_features.feature_maps import Estimator
from rfa.random_features.feature_maps import feature_map as lookup_feature_map
from rfa.random_features.projections import PROJECTION_KINDS, ROW_SCALINGS

Array = jax.Array


def _scalar_params(feature_params: dict | None) -> dict:
    """Feature parameters held by a module are configuration: Python numbers only."""
    params = dict(feature_params or {})
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputTypeError(
                f"feature_params of make_attention_fn must be Python numbers, got {name}={value!r}; "
                "per-head or data-dependent arrays go to rfa.kernelized_attention(feature_params=...) directly."
            )
    return params


class RandomProjection(nnx.Variable):
    """The random projection W ``[m, d_k]`` of a kernelized attention (or a random parameter drawn with it,
    such as hybrid's R): redrawn, never trained. Through ``flax.nnx.bridge`` it is the Linen collection
    ``random_features``, as in ``rfa.linen``'s own layers."""


nnx.register_variable_name("random_features", RandomProjection)


def random_variables(fm: Estimator, key, num_features, head_dim, *, kind, scaling) -> tuple:
    """``(projection, random_params)`` of one draw (``fm.draw``): a :class:`RandomProjection` of W (None
    for a map without a projection) and an ``nnx.Dict`` of one per ``sampled`` parameter."""
    W, sampled = fm.draw(key, num_features, head_dim, kind=kind, scaling=scaling)
    projection = None if W is None else RandomProjection(W)
    return projection, nnx.Dict({name: RandomProjection(value) for name, value in sampled.items()})


def redraw_variables(projection, random_params, fm: Estimator, key, num_features, head_dim, *, kind, scaling):
    """Overwrites the variables of :func:`random_variables` with the draw of ``key`` (no retracing)."""
    W, sampled = fm.draw(key, num_features, head_dim, kind=kind, scaling=scaling)
    if projection is not None:
        projection[...] = W
    for name, value in sampled.items():
        random_params[name][...] = value


def learned_variables(fm: Estimator, num_heads: int, num_features: int, head_dim: int) -> nnx.Dict:
    """The map's ``learned`` parameters (``fm.init_learned``) as ``nnx.Param`` s, ``[num_heads, 1, *event]``."""
    values = fm.init_learned(num_heads, num_features, head_dim) if fm.learned else {}
    return nnx.Dict({name: nnx.Param(value) for name, value in values.items()})


class FittedParams(nnx.Variable):
    """Feature-map parameters fitted on calibration data (:meth:`KernelizedAttention.calibrate`): state, not
    trained."""


class RandomMap(nnx.Module):
    """An attention whose map draws random variables (``projection``, ``random_params``) and redraws them
    (``redraw(key)``): the unit :func:`redraw` walks. ``redraw_every`` is its redrawing policy in training steps
    (0: none; rfa's models read it from their ``AttentionConfig``)."""

    redraw_every: int = 0


def redraw(model: nnx.Module, key: Array, *, step: int | None = None) -> int:
    """Redraws the random projection (and the map's other random parameters) of every attention in ``model``;
    returns how many. ``rfa.nnx.redraw`` and ``rfa.models.redraw_projections`` are this function.

    Each :class:`RandomMap` (the ``attention_fn`` of ``rfa.nnx.MultiHeadAttention`` and of
    :func:`make_attention_fn`, the kernelized and delta-rule cores of rfa's layers and models) that holds random
    variables gets the subkey ``fold_in(key, i)``, i its place among them in module order. With ``step`` (the
    training step) one is redrawn only when its ``redraw_every`` = k > 0 divides ``step``, so a training loop calls
    it every step. Under ``nnx.jit`` the variables are state: a redraw changes the next call without retracing.

    Example:
      >>> model = rfa.nnx.MultiHeadAttention(2, 16, num_features=8, decode=False, rngs=nnx.Rngs(0))
      >>> rfa.nnx.redraw(model, jax.random.key(1)), rfa.nnx.redraw(model, jax.random.key(2), step=10)
      (1, 0)
    """
    key = check_key(key)
    redrawn = 0
    for i, attention in enumerate(m for _, m in nnx.iter_modules(model) if isinstance(m, RandomMap)):
        every = attention.redraw_every
        due = step is None or (every > 0 and step % every == 0)
        if due and (attention.projection is not None or attention.random_params):
            attention.redraw(jax.random.fold_in(key, i))
            redrawn += 1
    return redrawn


class Calibratable(RandomMap):
    """A kernelized attention with its map's variables: random, learned, and fitted on calibration data.

    Subclasses set ``self.feature_map``, ``self.random_params`` (:func:`random_variables`),
    ``self.learned_params`` (:func:`learned_variables`) and call :meth:`init_calibration`;
    :meth:`map_params` gives a call's parameters, and :func:`calibrating` fits from the calls inside it.
    """

    def init_calibration(self) -> None:
        self.fitted_params = nnx.Dict()
        self.calibrating = False

    def calibrate(self, query: Array, key: Array, mask: Array | None = None) -> None:
        """Fits the map's parameters to calibration queries and keys ``[batch..., length, heads, head_dim]``
        (one set per head, :func:`rfa.attention.fit_feature_params`) and keeps them for every later call."""
        fitted = fit_feature_params(self.feature_map, query, key, mask=mask)
        self.fitted_params = nnx.Dict({name: FittedParams(value) for name, value in fitted.items()})

    def map_params(self, fixed: dict | None) -> dict | None:
        """A call's map parameters: the ``fixed`` ones, the current random draw, the learned ones and the
        calibrated fit (which takes precedence); None if there are none."""
        variables = {**self.random_params, **self.learned_params, **self.fitted_params}
        return {**(fixed or {}), **{name: variable[...] for name, variable in variables.items()}} or None


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
        feature_map: str | Estimator,
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
        self.feature_map = lookup_feature_map(feature_map)
        self.num_features = check_positive_int(num_features, "num_features")
        self.head_dim = check_positive_int(head_dim, "head_dim")
        self.projection_kind = check_choice(projection_kind, "projection_kind", PROJECTION_KINDS)
        self.scaling = check_choice(scaling, "scaling", ROW_SCALINGS)
        self.renormalize = renormalize
        self.chunk_size = check_positive_int(chunk_size, "chunk_size")
        self.sequence_axis = sequence_axis
        self.feature_params = nnx.static(_scalar_params(feature_params))
        random = self.feature_map.needs_projection or self.feature_map.sampled
        if random and key is None:
            raise InputError(f"feature map {self.feature_map.name!r} needs a key to sample its projection.")
        self.projection, self.random_params = random_variables(
            self.feature_map,
            check_key(key) if random else None,
            self.num_features,
            self.head_dim,
            kind=self.projection_kind,
            scaling=self.scaling,
        )
        heads = 1 if num_heads is None else check_positive_int(num_heads, "num_heads")
        self.learned_params = learned_variables(self.feature_map, heads, self.num_features, self.head_dim)
        self.init_calibration()

    def redraw(self, key: Array) -> None:
        """Replaces W (and the map's other random parameters) with a fresh draw from ``key`` (use a new key
        each time, e.g. split per step)."""
        redraw_variables(
            self.projection,
            self.random_params,
            self.feature_map,
            check_key(key),
            self.num_features,
            self.head_dim,
            kind=self.projection_kind,
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
        fitted = self.feature_map.to_fit(self.map_params(self.feature_params))
        if fitted and query.shape[-3] != key.shape[-3]:
            raise InputError(
                f"feature map {self.feature_map.name!r} fits {list(fitted)} from the queries and keys of each call, "
                f"and this call has q_len={query.shape[-3]} != kv_len={key.shape[-3]} (Flax's decode=True cache, "
                "or cross-attention while decoding): the fit would differ from the one of the full pass. Calibrate "
                "the module first (fn.calibrate(q, k), or rfa.attention.calibrating(model) around full passes), or "
                "fix the parameters: make_attention_fn(..., "
                f"feature_params={{{', '.join(f'{n!r}: value' for n in fitted)}}}) "
                f"with the values of rfa.feature_map({self.feature_map.name!r}).fit(q, k) on a full pass, or "
                f"rfa.feature_map({self.feature_map.name!r}).standard_params({self.head_dim}) = "
                f"{self.feature_map.standard_params(self.head_dim) if self.feature_map.standard_params else None} "
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
            feature_map=self.feature_map,
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


@contextlib.contextmanager
def calibrating(model: nnx.Module):
    """Within the block, every :class:`KernelizedAttention` in ``model`` (and every kernelized attention of
    rfa's own models) fits its parameters to the queries and keys of each (eager) call and keeps them:
    run calibration batches through an unmodified model. Each site keeps its own parameters; one attention
    module shared by several sites (the same ``make_attention_fn`` passed to every layer) is refused with a
    ValueError, as its single set of parameters would be fitted to one site and used at all.

    Example:
      >>> fn = rfa.make_attention_fn("aderf", 32, head_dim=8, key=jax.random.key(0))
      >>> mha = nnx.MultiHeadAttention(2, 16, attention_fn=fn, decode=False, rngs=nnx.Rngs(0))
      >>> with rfa.attention.calibrating(mha):
      ...     _ = mha(jax.random.normal(jax.random.key(1), (4, 24, 16)))
      >>> y = mha(jnp.ones((1, 5, 16)), is_causal=True)  # causal: uses the calibrated parameters
      >>> fn.fitted_params["A"].shape
      (2, 1, 1)
    """
    attention_fns = [
        module
        for _, module in nnx.iter_graph(model)
        if isinstance(module, Calibratable) and module.feature_map is not None and module.feature_map.fit is not None
    ]  # the attentions whose map fits parameters: the others have nothing to calibrate
    uses = collections.Counter(
        id(child)
        for _, node in nnx.iter_graph(model)
        if isinstance(node, nnx.Pytree)  # modules, nnx.List and nnx.Dict: the containers of sites
        for _, child in nnx.graph.iter_children(node)
    )
    for fn in attention_fns:
        if uses[id(fn)] > 1:
            raise InputError(
                f"one {fn.feature_map.name!r} attention module is used by {uses[id(fn)]} attention sites of the model: "
                "calibrating would fit one set of parameters to whichever site ran last and use it at every site. "
                "Give each site its own rfa.make_attention_fn(...) (one per nnx.MultiHeadAttention)."
            )
    for fn in attention_fns:
        fn.calibrating = True
    try:
        yield model
    finally:
        for fn in attention_fns:
            fn.calibrating = False


def make_attention_fn(
    feature_map: str | Estimator = "positive",
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
      feature_map: registered name or ``Estimator``.
      num_features: m, rows of the projection.
      head_dim: d_k of the attention heads (``qkv_features // num_heads``).
      key: PRNG key of the first projection draw (not needed for deterministic maps).
      projection_kind: how W's directions are drawn (``rfa.sample_projection``'s ``kind``).
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
        feature_map,
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
