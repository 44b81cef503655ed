"""Kernelized attention between a site's projections (the kind ``"kernelized"``): ``rfa.kernelized_attention`` with
a registered estimator, its random, learned and fitted variables, an optional gate, and the recurrent state as the
decoding cache. Every registered estimator of the softmax kernel is a variant of its own name
(``"positive"`` is ``"kernelized"`` with ``estimator="positive"``).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import computation_dtype, layer_compute_dtype
from rfa._validation import InputError
from rfa.attention.kernelized import attention_over, kernelized_attention
from rfa.attention.state import init_state
from rfa.checks import call_unchecked
from rfa.layers.feature_variables import (
    Calibratable,
    MapOptions,
    learned_variables,
    projection_key,
    random_variables,
    redraw_variables,
)
from rfa.layers.kinds import (
    AttentionKind,
    SiteWidths,
    check_bool,
    check_int,
    register_attention_kind,
    register_variant,
    register_variant_family,
)
from rfa.layers.multi_head import HeadsOptions, projected
from rfa.layers.positional import RelativeBias
from rfa.random_features.feature_maps import estimator as lookup_estimator
from rfa.random_features.feature_maps import registered_estimators

Array = jax.Array

GATE_BIAS = 3.0  # sigmoid(3) = 0.95: a new gate keeps 95% of the state per token (a memory of ~20 tokens)


GATES = ("head", "feature")  # what a gate decays: the state of a head, or each feature's row of it


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelizedOptions(HeadsOptions, MapOptions):
    """Kernelized attention's options: the heads' (:class:`~rfa.layers.multi_head.HeadsOptions`), the map's
    (:class:`~rfa.layers.feature_variables.MapOptions`: m, how W is drawn, fixed parameters, redraws), and:

    Attributes:
      estimator: a registered estimator of the softmax kernel (``rfa.registered_estimators()``).
      chunk_size: chunk length of the causal form.
      gated: (causal sites) decay the state by a learned gate per token and head, ``g_t = sigmoid(wᵀx_t + b)``;
        with ``estimator="rfa"`` this is gated RFA (Peng et al., ICLR 2021).
      gate: what a gate decays: ``"head"`` (one gate per token and head) or ``"feature"`` (one per token, head and
        feature of the map, data-dependent: gated linear attention, Yang et al., ICML 2024).

    Example:
      >>> KernelizedOptions(estimator="oprf", num_features=64, feature_params=(("phi_sq", 2.0),)).params
      {'phi_sq': 2.0}
    """

    SIZE = "num_features"

    estimator: str = "positive"
    chunk_size: int = 64
    gated: bool = False
    gate: str = "head"

    def __post_init__(self):
        HeadsOptions.__post_init__(self)
        MapOptions.__post_init__(self)
        if self.estimator not in registered_estimators():
            raise InputError(
                f"KernelizedOptions.estimator must be a registered estimator {list(registered_estimators())}, got "
                f"{self.estimator!r}. Register your own with rfa.register_estimator."
            )
        check_int(self, "chunk_size")
        check_bool(self, "gated")
        if self.gate not in GATES:
            raise InputError(f"KernelizedOptions.gate must be one of {list(GATES)}, got {self.gate!r}.")

    def size(self) -> int | None:
        """m where it sets the map's output length (not elu's or taylor's)."""
        return self.num_features if lookup_estimator(self.estimator).uses_num_features else None

    def for_state(self, head_dim: int) -> KernelizedOptions:
        """The map's fitted parameters (OPRF's ``phi_sq``, ...) fixed at its ``standard_params(head_dim)`` where
        ``feature_params`` does not give them: its fit to queries and keys of independent unit-variance entries."""
        fm = lookup_estimator(self.estimator)
        if not fm.fitted:
            return self
        fixed = fm.standard_params(head_dim) | {name: float(value) for name, value in self.feature_params}
        return dataclasses.replace(self, feature_params=tuple(fixed.items()))

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        super().check_site(site, widths, causal=causal, stateful=stateful)
        fm = lookup_estimator(self.estimator)
        if widths.positional == "relative" and (self.gated or widths.sequence_axis is not None):
            raise InputError(
                f"{site} is kernelized ({self.estimator!r}) with positional='relative': its bias per relative "
                "position runs by FFT over the whole sequence on one device, without a decay; it cannot be "
                "combined with gated=True or a sequence_axis. Use 'rotary' there."
            )
        if fm.kernel == "gaussian":
            raise InputError(f"{site}: {self.estimator!r} estimates the Gaussian kernel, not softmax attention.")
        missing = set(fm.required) - set(self.params) - set(fm.sampled) - set(fm.learned)
        if stateful and missing:  # decoded token by token (self) or from a state of the source (cross)
            raise InputError(
                f"{site} with {self.estimator!r} needs feature_params {sorted(missing)} fixed in the config: "
                "the decoder attends token by token, so they cannot come from the whole sequence."
            )
        if missing - set(fm.fitted):
            raise InputError(f"{site} with {self.estimator!r} needs feature_params {sorted(missing)}.")
        if missing and widths.sequence_axis is not None:
            raise InputError(
                f"{site} with {self.estimator!r} fits feature_params {sorted(missing)} to the whole sequence, which "
                f"a device holding one block of it (sequence_axis={widths.sequence_axis!r}) cannot: fix them in the "
                "config (e.g. the map's standard_params), or do not split the sequence."
            )
        if self.gated and self.gate == "feature" and "key_log_weight" in fm.names():
            raise InputError(
                f"{site}: {self.estimator!r} weighs each key by 1 - its head's gate (gated RFA); a gate per feature "
                "has no such weight. Use gate='head' with it, or another map."
            )
        if self.gated and not causal:
            raise InputError(
                f"{site}: gated=True decays a causal state token by token; {site} attends bidirectionally. "
                "Gate the decoder's self-attention only."
            )


class KernelizedCore(Calibratable):
    """``rfa.kernelized_attention`` with the site's feature map; decoding keeps the recurrent state.

    The map's random parameters (W and any ``sampled`` ones) are :class:`~rfa.layers.RandomProjection`
    variables, its ``learned`` ones (RFA's σ, Hedgehog's W and b) ``nnx.Param`` s, one per head. With
    ``KernelizedOptions.gated`` a causal site decays its state by a learned gate per token and head,
    ``g_t = sigmoid(w_hᵀx_t + b_h)`` (``log_decay = log g_t``), or with ``gate="feature"`` per token, head and
    feature, ``S_t = diag(g_t) S_{t-1} + φ(k_t)v_tᵀ`` with ``g_t = sigmoid(W_h x_t + b_h)`` (gated linear
    attention, Yang et al., ICML 2024, with a full-rank gate and no temperature); a map that takes the gate's input
    weight (rfa's ``key_log_weight``) also gets ``log(1 - g_t)``, which makes the site gated RFA,
    ``S_t = g_t S_{t-1} + (1 - g_t) φ(k_t)v_tᵀ`` (Peng et al., "Random Feature Attention", ICLR 2021, Eq. 7).
    A map whose parameters are fitted from data can keep a fit from calibration batches
    (``rfa.layers.calibrating``). With ``positional="relative"`` a self-attention site learns a bias per
    head and relative position (T5's buckets: ``relative_buckets`` up to ``relative_max_distance``) and weighs
    key j for query i by ``exp(b_{i−j})`` (Luo et al., NeurIPS 2021; computed by FFT); the distance is the
    index distance in the sequence, and such a site cannot decode (no recurrent form). With
    ``SiteWidths.sequence_axis`` in the mesh that is set, a
    call over a whole sequence runs sequence-parallel over that axis (LASP-2's state exchange).
    """

    def __init__(self, widths: SiteWidths, attention: KernelizedOptions, *, causal: bool, cross: bool, rngs):
        fm = lookup_estimator(attention.estimator)
        self.estimator, self.attention, self.causal = fm, attention, causal
        self.num_heads, self.head_dim = widths.num_heads, widths.head_dim
        self.sequence_axis = widths.sequence_axis
        self.state_dtype = computation_dtype(widths.dtype)  # float32, float64 for a float64 site
        self.compute_dtype = layer_compute_dtype(widths.dtype)  # bfloat16 operands of the matmuls, summed in float32
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
        self.init_calibration()  # parameters fitted on calibration batches (rfa.layers.calibrating)

    @property
    def redraw_every(self) -> int:
        """The site's redrawing policy (``KernelizedOptions.redraw_every``), read by :func:`rfa.nnx.redraw`."""
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
            compute_dtype=self.compute_dtype,
        )
        if self.gate is not None and x is not None:
            logits = self.gate(x).astype(self.state_dtype)  # [batch, L, heads] or, per feature, [batch, L, heads * F]
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
                f"a kernelized site ({self.attention.estimator!r}) with positional='relative' cannot decode token by "
                "token: its bias of the distance i - j has no recurrent state. Train it with teacher forcing, "
                "or use positional='rotary' for a model that decodes."
            )

    def init_cache(self, batch: int, max_length: int):
        features = self.estimator.num_outputs(self.attention.num_features, self.head_dim)
        return init_state((batch,), self.num_heads, features, self.head_dim, self.state_dtype)

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


register_attention_kind(
    AttentionKind(
        "kernelized",
        KernelizedOptions,
        projected(KernelizedCore),
        causal=True,
        bidirectional=True,
        cross=True,
        cache="fixed",
        summary="kernelized attention with a registered estimator (random, learned or deterministic features), "
        "optionally gated; the recurrent state as cache",
    )
)
register_variant_family(
    lambda: {
        name: ("kernelized", {"estimator": name})
        for name in registered_estimators()
        if lookup_estimator(name).kernel != "gaussian"
    }
)  # "positive": kernelized attention with positive random features; a user's estimator is a variant too
register_variant("positive_iid", "kernelized", estimator="positive", projection_kind="iid")
register_variant("simplex_positive", "kernelized", estimator="positive", projection_kind="simplex")
register_variant("gated_rfa", "kernelized", estimator="rfa", gated=True)
register_variant("gla", "kernelized", estimator="elu", gated=True, gate="feature")  # elu+1 features, GLA's gates
