"""``rfa.linen.DeltaNet``, ``GatedDeltaNet``, ``KimiDeltaAttention``, ``GatedLinearAttention`` and
``SlidingWindowAttention``: the causal layers
of :mod:`rfa.nnx` whose cache is a state, as Linen modules through Flax's bridge (imported from :mod:`rfa.linen`;
this module keeps :mod:`rfa.linen` short)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import flax.linen as nn
import jax
from flax.nnx import bridge as nnx_bridge

from rfa._validation import InputError
from rfa.layers import state_layers as rfa_nnx
from rfa.layers.delta_rule.options import DeltaRuleOptions
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array

RANDOM_FEATURES = "random_features"  # the collection of the random draws, and the rng that redraws them


class _BridgedStateLayer(nn.Module):
    """A causal layer of :mod:`rfa.nnx` whose cache is a state, as a Linen module (``flax.nnx.bridge.ToLinen``).

    The parameters are the NNX layer's, under ``params/layer``. ``decode=True``: ``init`` creates the empty state in
    the ``cache`` collection (the input's length does not matter) and each ``apply(..., mutable=["cache"])``
    continues it with the call's tokens, one or several, as Flax's attention does with its cache.
    """

    layer_class: ClassVar[type]  # the rfa.nnx layer
    forwarded: ClassVar[tuple[str, ...]]  # the fields passed to its constructor

    num_heads: int
    out_features: int | None = None
    chunk_size: int = 64
    decode: bool = False

    def draws(self) -> bool:
        """Whether the NNX layer draws random variables at init (the ``random_features`` collection)."""
        return False

    def layer_options(self) -> dict:
        """The keyword arguments of the NNX layer's constructor."""
        return {name: getattr(self, name) for name in self.forwarded}

    @nn.compact
    def __call__(
        self,
        inputs: Array,
        *,
        mask: Array | None = None,
        segment_ids: Array | None = None,
        decode: bool | None = None,
    ) -> Array:
        """As the NNX layer's call: ``mask`` (Flax's), ``segment_ids [batch, L]`` (packed sequences), ``decode``."""
        if self.draws() and not self.is_initializing() and RANDOM_FEATURES not in self.variables:
            raise InputError(
                f"the variables hold no {RANDOM_FEATURES}: the layer's random projection W is a variable beside "
                f"params; apply with every collection init returned ({{'params': ..., '{RANDOM_FEATURES}': ...}}), and "
                "save and restore both (without it the layer would draw another W)."
            )
        decode = self.decode if decode is None else decode
        layer = nnx_bridge.ToLinen(
            self.layer_class,
            args=(self.num_heads, inputs.shape[-1], self.out_features),
            kwargs=self.layer_options(),
            name="layer",
        )
        if not decode:
            return layer(inputs, None, mask=mask, segment_ids=segment_ids, nnx_method="step")
        initialized = self.has_variable("cache", "state")
        state = self.variable("cache", "state", lambda: layer(inputs.shape[0], nnx_method="empty_state"))
        if not initialized:  # init: the cache is created empty, as Flax's attention creates its own
            return layer(inputs, None, mask=mask, segment_ids=segment_ids, nnx_method="step")
        out, state.value = layer(inputs, state.value, mask=mask, segment_ids=segment_ids, nnx_method="step")
        return out


class _BridgedDeltaRule(_BridgedStateLayer):
    """A delta-rule layer of :mod:`rfa.nnx` as a Linen module; ``options`` are the layer's options
    (:class:`~rfa.layers.delta_rule.options.DeltaRuleOptions`: ``head_dim``, ``num_v_heads``, ``expand_v``,
    ``use_beta``, ...)."""

    forwarded: ClassVar[tuple[str, ...]] = ("chunk_size",)

    options: DeltaRuleOptions = DeltaRuleOptions()

    def layer_options(self) -> dict:
        """The options' fields but ``num_heads`` (the layer's field), with the layer's ``chunk_size``."""
        default = DeltaRuleOptions.__dataclass_fields__["chunk_size"].default
        if self.options.chunk_size not in (default, self.chunk_size):
            raise InputError(
                f"{type(self).__name__}: chunk_size={self.chunk_size} and options.chunk_size="
                f"{self.options.chunk_size}; give it once, as the layer's chunk_size."
            )
        options = {name: value for name, value in dataclasses.asdict(self.options).items() if name != "num_heads"}
        return options | super().layer_options()


class DeltaNet(_BridgedDeltaRule):
    """DeltaNet as a Flax Linen layer: :class:`rfa.nnx.DeltaNet` through Flax's bridge, with the state as the
    ``cache`` collection. ``gated=True`` (before 0.6 the default) is :class:`GatedDeltaNet`, with a warning, for one
    release.

    Example:
      >>> layer = rfa.linen.DeltaNet(num_heads=4, decode=True)
      >>> x = jnp.ones((2, 10, 32))
      >>> variables = layer.init(jax.random.key(0), x)
      >>> y, updated = layer.apply(variables, x[:, :1], mutable=["cache"])  # one token from the state
      >>> y.shape
      (2, 1, 32)
    """

    layer_class: ClassVar[type] = rfa_nnx.DeltaNet

    gated: bool | None = None

    def layer_options(self) -> dict:
        return super().layer_options() | ({} if self.gated is None else {"gated": self.gated})


class GatedDeltaNet(_BridgedDeltaRule):
    """Gated DeltaNet as a Flax Linen layer: :class:`rfa.nnx.GatedDeltaNet` through Flax's bridge, with the state as
    the ``cache`` collection.

    Example:
      >>> options = rfa.models.DeltaRuleOptions(head_dim=8, num_v_heads=8)
      >>> layer = rfa.linen.GatedDeltaNet(num_heads=4, options=options)
      >>> x = jnp.ones((2, 10, 32))
      >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
      (2, 10, 32)
    """

    layer_class: ClassVar[type] = rfa_nnx.GatedDeltaNet


class KimiDeltaAttention(_BridgedDeltaRule):
    """Kimi Delta Attention as a Flax Linen layer: :class:`rfa.nnx.KimiDeltaAttention` through Flax's bridge, with
    the state as the ``cache`` collection.

    Example:
      >>> layer = rfa.linen.KimiDeltaAttention(num_heads=4, decode=True)
      >>> x = jnp.ones((2, 10, 32))
      >>> variables = layer.init(jax.random.key(0), x)
      >>> y, updated = layer.apply(variables, x[:, :1], mutable=["cache"])  # one token from the state
      >>> y.shape
      (2, 1, 32)
    """

    layer_class: ClassVar[type] = rfa_nnx.KimiDeltaAttention


class GatedLinearAttention(_BridgedStateLayer):
    """Gated linear attention as a Flax Linen layer: :class:`rfa.nnx.GatedLinearAttention` through Flax's bridge,
    with the state as the ``cache`` collection.

    Example:
      >>> layer = rfa.linen.GatedLinearAttention(num_heads=4)
      >>> x = jnp.ones((2, 10, 32))
      >>> layer.apply(layer.init(jax.random.key(0), x), x).shape
      (2, 10, 32)
    """

    layer_class: ClassVar[type] = rfa_nnx.GatedLinearAttention
    forwarded: ClassVar[tuple[str, ...]] = ("chunk_size", "estimator", "num_features")

    estimator: str = "elu"
    num_features: int = 64

    def draws(self) -> bool:
        """A map with a projection or sampled parameters draws them (positive features); elu+1 draws nothing."""
        fm = lookup_estimator(self.estimator)
        return fm.needs_projection or bool(fm.sampled)


class SlidingWindowAttention(_BridgedStateLayer):
    """Causal sliding-window attention as a Flax Linen layer: :class:`rfa.nnx.SlidingWindowAttention` through Flax's
    bridge, with the ring of the last ``window`` keys and values as the ``cache`` collection (``window`` is
    required; ``chunk_size`` plays no part).

    Example:
      >>> layer = rfa.linen.SlidingWindowAttention(num_heads=4, window=3, decode=True)
      >>> x = jnp.ones((2, 10, 32))
      >>> variables = layer.init(jax.random.key(0), x)
      >>> y, updated = layer.apply(variables, x[:, :1], mutable=["cache"])  # one token from the ring
      >>> y.shape
      (2, 1, 32)
    """

    layer_class: ClassVar[type] = rfa_nnx.SlidingWindowAttention
    forwarded: ClassVar[tuple[str, ...]] = ("window",)

    window: int | None = None
