"""The attention between a site's projections: one module per kind, behind one interface and one table.

:class:`~rfa.models.AttentionSite` projects ``x`` to ``q, k, v [batch, length, heads, head_dim]``
and hands them to its core, chosen by ``AttentionConfig.kind`` through :func:`core_class`:

======================  ==================================================================================
kind                    core
======================  ==================================================================================
``"softmax"``           :class:`~rfa.models.softmax.SoftmaxCore`: exact attention, a KV cache for decoding,
                        optional relative bias
a feature map           :class:`KernelizedCore`: ``rfa.kernelized_attention`` with the map (random, learned
                        or deterministic: positive, oprf, the DERFs, taylor, rfa, hedgehog, ...),
                        optionally gated, with the recurrent state as its cache
``"fourier"``           :class:`~rfa.models.softmax.FourierCore`: Fourier integral attention (Nguyen et al.
                        2022), quadratic, a KV cache
``"linformer"``         :class:`~rfa.models.linformer.LinformerCore`: keys and values projected along the
                        length (Wang et al. 2020)
``"deltanet"``,         :class:`~rfa.models.delta_rule.DeltaRuleCore`: the delta rule (DeltaNet; a decay per
``"gated_deltanet"``,   head: Gated DeltaNet; per key channel: Kimi Delta Attention), causal self-attention
``"kda"``               only, the state as its cache
``"sliding_window"``    :class:`~rfa.models.sliding_window.SlidingWindowCore`: exact attention within a window
                        of ``num_features`` tokens, the last w keys and values as its cache
======================  ==================================================================================

Every core is built as ``core(widths, attention, causal=, cross=, rngs=)`` from what it reads of its model,
the site's :class:`~rfa.models.config.SiteWidths`, and takes the same calls (the queries' input
``x [batch, q_len, d_model]`` comes along for the cores that compute gates from it):

- ``core(q, k, v, x, key_mask=, q_positions=, k_positions=) -> out [batch, q_len, heads, head_dim]``;
- ``init_cache(batch, max_length)``, ``prefill(q, k, v, x, key_mask=, positions=, max_length=) -> (out,
  cache)`` and ``decode(q, k, v, x, cache, position=, keep=) -> (out [batch, heads, head_dim], cache)``
  for causal self-attention, one token per call;
- ``prepare_memory(k, v, key_mask)`` and ``attend_memory(q, prepared) -> [batch, heads, head_dim]`` for
  cross-attention while decoding.

Each core class states its kind's rules, so nothing else matches kinds by name: ``causal`` (it can run
causal self-attention, and so decode token by token), ``bidirectional`` (it can run bidirectional
self-attention), ``cross`` (it can attend to a memory), ``dense_masks`` (it applies any dense mask, such as
Swin's shifted windows), ``uses_num_features`` (``AttentionConfig.num_features`` means something to it),
``owns_projections`` (it is the whole site, ``x → y``, with projections of its own: the delta rule's layer,
whose heads and widths are its options'; :func:`rfa.models.attention.attention_site`) and ``check_site``, which
refuses a configuration the kind cannot run at a site.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.attention.kernelized import attention_over, kernelized_attention
from rfa.attention.map_variables import (
    Calibratable,
    learned_variables,
    projection_key,
    random_variables,
    redraw_variables,
)
from rfa.attention.state import init_state
from rfa.checks import call_unchecked
from rfa.models.delta_rule import DeltaRuleCore
from rfa.models.linformer import LinformerCore
from rfa.models.positional import RelativeBias
from rfa.models.sliding_window import SlidingWindowCore
from rfa.models.softmax import FourierCore, SoftmaxCore
from rfa.random_features.feature_maps import estimator as lookup_estimator
from rfa.random_features.feature_maps import registered_estimators

Array = jax.Array

GATE_BIAS = 3.0  # sigmoid(3) = 0.95: a new gate keeps 95% of the state per token (a memory of ~20 tokens)


class KernelizedCore(Calibratable):
    """``rfa.kernelized_attention`` with the site's feature map; decoding keeps the recurrent state.

    The map's random parameters (W and any ``sampled`` ones) are :class:`~rfa.attention.RandomProjection`
    variables, its ``learned`` ones (RFA's σ, Hedgehog's W and b) ``nnx.Param`` s, one per head. With
    ``AttentionConfig.gated`` a causal site decays its state by a learned gate per token and head,
    ``g_t = sigmoid(w_hᵀx_t + b_h)`` (``log_decay = log g_t``), or with ``gate="feature"`` per token, head and
    feature, ``S_t = diag(g_t) S_{t-1} + φ(k_t)v_tᵀ`` with ``g_t = sigmoid(W_h x_t + b_h)`` (gated linear
    attention, Yang et al., ICML 2024, with a full-rank gate and no temperature); a map that takes the gate's input
    weight (rfa's ``key_log_weight``) also gets ``log(1 - g_t)``, which makes the site gated RFA,
    ``S_t = g_t S_{t-1} + (1 - g_t) φ(k_t)v_tᵀ`` (Peng et al., "Random Feature Attention", ICLR 2021, Eq. 7).
    A map whose parameters are fitted from data can keep a fit from calibration batches
    (``rfa.attention.calibrating``). With ``positional="relative"`` a self-attention site learns a bias per
    head and relative position (T5's buckets: ``relative_buckets`` up to ``relative_max_distance``) and weighs
    key j for query i by ``exp(b_{i−j})`` (Luo et al., NeurIPS 2021; computed by FFT); the distance is the
    index distance in the sequence, and such a site cannot decode (no recurrent form). With
    ``EncoderConfig.sequence_axis`` in the mesh that is set, a
    call over a whole sequence runs sequence-parallel over that axis (LASP-2's state exchange).
    """

    causal, bidirectional, cross, dense_masks, uses_num_features = True, True, True, False, True
    takes_qk_map = False
    owns_projections = False  # an AttentionSite projects q, k, v and the output around it

    def __init__(self, widths, attention, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        fm = lookup_estimator(attention.kind)
        self.estimator, self.attention, self.causal = fm, attention, causal
        self.num_heads, self.head_dim = widths.num_heads, widths.head_dim
        self.sequence_axis = widths.sequence_axis
        random = fm.needs_projection or bool(fm.sampled)
        key = projection_key(rngs) if random else None
        self.projection, self.random_params = random_variables(
            fm,
            key,
            attention.num_features,
            widths.head_dim,
            projection_kind=attention.projection_kind,
            scaling=attention.scaling,
        )
        self.learned_params = learned_variables(fm, widths.num_heads, attention.num_features, widths.head_dim)
        gates = widths.num_heads * (
            fm.num_outputs(attention.num_features, widths.head_dim) if attention.gate == "feature" else 1
        )
        self.gate = (
            nnx.Linear(
                widths.d_model,
                gates,
                bias_init=nnx.initializers.constant(GATE_BIAS),
                dtype=jnp.dtype(widths.dtype),
                rngs=rngs,
            )
            if attention.gated
            else None
        )
        self.relative = (
            RelativeBias(
                widths.num_heads,
                num_buckets=widths.relative_buckets,
                max_distance=widths.relative_max_distance,
                bidirectional=not causal,
                rngs=rngs,
            )
            if widths.positional == "relative" and not cross
            else None
        )
        self.init_calibration()  # parameters fitted on calibration batches (rfa.attention.calibrating)

    @staticmethod
    def check_site(site: str, attention, widths, *, causal: bool, stateful: bool) -> None:
        fm = lookup_estimator(attention.kind)
        if widths.positional == "relative" and (attention.gated or widths.sequence_axis is not None):
            raise InputError(
                f"{site} is kernelized ({attention.kind!r}) with positional='relative': its bias per relative "
                "position runs by FFT over the whole sequence on one device, without a decay; it cannot be "
                "combined with gated=True or a sequence_axis. Use 'rotary' there."
            )
        if fm.kernel == "gaussian":
            raise InputError(f"{site}: {attention.kind!r} estimates the Gaussian kernel, not softmax attention.")
        missing = set(fm.required) - set(attention.params) - set(fm.sampled) - set(fm.learned)
        if stateful and missing:  # decoded token by token (self) or from a state of the source (cross)
            raise InputError(
                f"{site} with {attention.kind!r} needs feature_params {sorted(missing)} fixed in the config: "
                "the decoder attends token by token, so they cannot come from the whole sequence."
            )
        if missing - set(fm.fitted):
            raise InputError(f"{site} with {attention.kind!r} needs feature_params {sorted(missing)}.")
        if missing and widths.sequence_axis is not None:
            raise InputError(
                f"{site} with {attention.kind!r} fits feature_params {sorted(missing)} to the whole sequence, which a "
                f"device holding one block of it (sequence_axis={widths.sequence_axis!r}) cannot: fix them in the "
                "config (e.g. the map's standard_params), or do not split the sequence."
            )
        if attention.gated and attention.gate == "feature" and "key_log_weight" in fm.names():
            raise InputError(
                f"{site}: {attention.kind!r} weighs each key by 1 - its head's gate (gated RFA); a gate per feature "
                "has no such weight. Use gate='head' with it, or another map."
            )
        if attention.gated and not causal:
            raise InputError(
                f"{site}: gated=True decays a causal state token by token; {site} attends bidirectionally. "
                "Gate the decoder's self-attention only."
            )

    @property
    def redraw_every(self) -> int:
        """The site's redrawing policy (``AttentionConfig.redraw_every``), read by :func:`rfa.nnx.redraw`."""
        return self.attention.redraw_every

    def redraw(self, key: Array) -> None:
        """Replaces the random projection and the map's other random parameters by a fresh draw from ``key``."""
        a = self.attention
        redraw_variables(
            self.projection,
            self.random_params,
            self.estimator,
            key,
            a.num_features,
            self.head_dim,
            projection_kind=a.projection_kind,
            scaling=a.scaling,
        )

    def _options(self, x: Array | None = None) -> dict:
        """The attention's keyword arguments; with the queries' input ``x [batch, L, d_model]``, the gate's."""
        params = self.map_params(self.attention.params) or {}
        options = dict(
            estimator=self.estimator,
            projection=None if self.projection is None else self.projection[...],
            feature_params=params,
        )
        if self.gate is not None and x is not None:
            logits = self.gate(x).astype(jnp.float32)  # [batch, L, heads] or, per feature, [batch, L, heads * F]
            if self.attention.gate == "feature":
                logits = logits.reshape(logits.shape[:-1] + (self.num_heads, -1))  # [batch, L, heads, F]
            options["log_decay"] = jax.nn.log_sigmoid(logits)
            if "key_log_weight" in self.estimator.names():  # log(1 - g) per [batch, heads, L]
                options["feature_params"] = {
                    **params,
                    "key_log_weight": jnp.swapaxes(jax.nn.log_sigmoid(-logits), 1, 2),
                }
        return options

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions, return_state: bool = False, segment_ids=None):
        if self.calibrating:
            self.calibrate(q, k, mask=key_mask[:, None, None, :])
        options = self._options(x if self.causal else None)
        if segment_ids is not None:  # packed sequences: the causal state restarts at each one
            options["segment_ids"] = segment_ids
        if self.relative is not None:
            options["relative_bias"] = self.relative.by_lag(q.shape[1])
        return call_unchecked(
            attention_over(self.sequence_axis),
            q,
            k,
            v,
            mask=key_mask[:, None, None, :],
            is_causal=self.causal,
            chunk_size=self.attention.chunk_size,
            return_state=return_state,
            **options,
        )

    def _refuse_relative(self) -> None:
        if self.relative is not None:
            raise InputError(
                f"a kernelized site ({self.attention.kind!r}) with positional='relative' cannot decode token by "
                "token: its bias of the distance i - j has no recurrent state. Train it with teacher forcing, "
                "or use positional='rotary' for a model that decodes."
            )

    def init_cache(self, batch: int, max_length: int):
        features = self.estimator.num_outputs(self.attention.num_features, self.head_dim)
        return init_state((batch,), self.num_heads, features, self.head_dim)

    def prefill(self, q, k, v, x, *, key_mask, positions, max_length):
        """The prompt's outputs and the state after it, from one causal pass."""
        self._refuse_relative()
        return self(q, k, v, x, key_mask=key_mask, q_positions=positions, k_positions=positions, return_state=True)

    def extend(self, q, k, v, x, cache, *, keep):
        """Tokens ``[batch, n, heads, d]`` (``keep [batch, n]``) continuing from the state: ``(out, state)``."""
        self._refuse_relative()
        return call_unchecked(
            kernelized_attention,
            q,
            k,
            v,
            mask=keep[:, None, None, :],
            is_causal=True,
            initial_state=cache,
            return_state=True,
            **self._options(x),
        )

    def decode(self, q, k, v, x, cache, *, position, keep):
        """The causal form on one token from the state: O(F·d) at any position."""
        out, cache = self.extend(q, k, v, x, cache, keep=keep[:, None])
        return out[:, 0], cache

    def prepare_memory(self, k, v, key_mask):
        """The state of the encoder's keys alone (a query of length 0), computed once per source."""
        _, state = call_unchecked(
            kernelized_attention, k[:, :0], k, v, mask=key_mask[:, None, None, :], return_state=True, **self._options()
        )
        return state

    def attend_memory(self, q, prepared):
        """The state read with no new key."""
        no_key = jnp.zeros(q.shape[:1] + (0,) + q.shape[2:], q.dtype)
        return call_unchecked(kernelized_attention, q, no_key, no_key, initial_state=prepared, **self._options())[:, 0]


CORES = {
    "softmax": SoftmaxCore,
    "fourier": FourierCore,
    "linformer": LinformerCore,
    "deltanet": DeltaRuleCore,
    "gated_deltanet": DeltaRuleCore,
    "kda": DeltaRuleCore,
    "sliding_window": SlidingWindowCore,
}  # every registered feature map: KernelizedCore


def attention_kinds() -> tuple[str, ...]:
    """Every valid ``AttentionConfig.kind``: the cores of :data:`CORES` and the registered feature maps."""
    return tuple(CORES) + registered_estimators()


def uses_num_features(kind: str) -> bool:
    """Whether ``AttentionConfig.num_features`` changes what a kind computes: its core's ``uses_num_features``, and for
    a feature map whether it sets the map's output length (``FeatureMap.uses_num_features``: not elu or taylor).

    Example:
      >>> uses_num_features("positive"), uses_num_features("elu"), uses_num_features("softmax")
      (True, False, False)
    """
    if kind in registered_estimators():
        return lookup_estimator(kind).uses_num_features
    return core_class(kind).uses_num_features


def core_class(kind: str) -> type:
    """The core of an ``AttentionConfig.kind``."""
    if kind in CORES:
        return CORES[kind]
    if kind in registered_estimators():
        return KernelizedCore
    raise InputError(f"attention kind must be one of {list(attention_kinds())}, got {kind!r}.")
