"""DeltaNet, Gated DeltaNet and Kimi Delta Attention as an attention core of rfa's models (kinds ``"deltanet"``,
``"gated_deltanet"``, ``"kda"``).

Between the site's q/k/v projections and its output projection, as the papers' layers (Yang, Wang, Zhang, Shen,
Kim, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length", NeurIPS 2024, Sec. 3.3 and
Fig. 1; Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule", ICLR 2025, Sec. 3.4
and Fig. 1; Kimi Team, "Kimi Linear: An Expressive, Efficient Attention Architecture", arXiv 2510.26692, 2025,
Sec. 3, and flash-linear-attention's ``KimiDeltaAttention`` layer):

- a short causal depthwise convolution (4 taps) over the projected q, k and v, then SiLU;
- q and k L2-normalized per head, q scaled by ``1/√d_k``: ``‖k_t‖ = 1``, so with ``β_t ∈ [0, 1]`` the transition
  ``I − β_t k_t k_tᵀ`` has eigenvalues in [0, 1] and the state cannot grow. With ``AttentionConfig.qk_map`` a
  registered estimator replaces SiLU: q and k are its features, L2-normalized (the kernelized delta rule,
  :func:`rfa.attention.delta_rule.normalized_features`), and the state is ``[F, d_v]``;
- the writing strength ``β_t = sigmoid(w_βᵀ x_t)`` per token and head;
- Gated DeltaNet: the decay ``α_t = exp(g_t)``, ``g_t = −exp(A_log) · softplus(w_αᵀ x_t + b_dt)`` per token and
  head (Mamba2's parametrization: ``A`` drawn in [1, 16], ``softplus(b_dt)`` in [0.001, 0.1]);
- KDA: one decay per token, head and key channel, ``g_t = −exp(A_log[h]) · softplus(f_t + b_dt)``, ``f_t`` from a
  low-rank projection (``d_model → head_dim → heads·d_k``, no bias), ``b_dt`` per key channel starting at 0 and
  ``A`` per head drawn in [1, 16] (fla's initialization);
- :func:`rfa.attention.delta_rule_attention` (chunked over a sequence, recurrent when decoding);
- the output normalized per head (RMSNorm over d_v); Gated DeltaNet multiplies it by ``SiLU(W_g x_t)``, KDA by
  ``sigmoid(g_out)`` with ``g_out`` from a low-rank projection (``d_model → head_dim → heads·d_v``, a bias on the
  second).

Each kind is one :class:`Variant` of :data:`VARIANTS`: its decay and its output gate.

Decoding keeps the state ``S [batch, heads, d_k, d_v]`` and the convolution's last 3 inputs: O(d_k·d_v) per
token at any position. A padding key (``key_mask`` False) enters nothing, wherever it sits: the convolution skips
it (:func:`causal_convolution`), and its β and g are 0, which leave the state as it is. So a right-padded prompt,
then decoding, equals the unpadded prompt, then decoding, row by row.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError
from rfa.attention.delta_rule import delta_rule_attention, normalized_features
from rfa.attention.map_variables import RandomMap, projection_key, random_variables, redraw_variables
from rfa.checks import call_unchecked
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array

CONV_TAPS = 4  # the papers' short convolution


def causal_convolution(x: Array, weight: Array, history: Array, keep: Array) -> tuple[Array, Array]:
    """Depthwise causal convolution ``y_t = Σ_j w_j x_{t−K+1+j}`` of ``x [batch, L, C]`` with ``weight [K, C]``
    over the kept inputs (``keep [batch, L]``, False: padding), continuing from ``history [batch, K − 1, C]`` (the
    kept inputs before ``x``; zeros at the start). Returns ``(y, the last K − 1 kept inputs)``.

    Each row's kept inputs are convolved as one sequence, as if its padding were not there, wherever it sits
    (left, right or between): a right-padded prompt leaves the history the unpadded prompt leaves. The outputs at
    padding are those of the padding's own inputs after the kept ones (callers mask them out)."""
    taps, length = weight.shape[0], x.shape[1]
    order = jnp.argsort(~keep, axis=1, stable=True)  # each row's kept positions first, in order
    padded = jnp.concatenate([history.astype(x.dtype), jnp.take_along_axis(x, order[..., None], axis=1)], axis=1)
    y = sum(weight[j] * padded[:, j : j + length] for j in range(taps))
    last = jnp.sum(keep, axis=1)[:, None] + jnp.arange(taps - 1)  # the K − 1 inputs up to the last kept one
    history = jnp.take_along_axis(padded, last[..., None], axis=1)
    return jnp.take_along_axis(y, jnp.argsort(order, axis=1)[..., None], axis=1), history


def _inverse_softplus(y: Array) -> Array:
    return y + jnp.log(-jnp.expm1(-y))


@dataclasses.dataclass(frozen=True)
class Variant:
    """What a delta-rule kind adds to DeltaNet: ``decay`` (None, ``"head"``: one per token and head, ``"channel"``:
    one per token, head and key channel) and ``output_gate`` (None, ``"silu"``: full rank, ``"sigmoid"``: low
    rank)."""

    decay: str | None
    output_gate: str | None


VARIANTS = {
    "deltanet": Variant(None, None),
    "gated_deltanet": Variant("head", "silu"),
    "kda": Variant("channel", "sigmoid"),
}


def low_rank(d_in: int, rank: int, d_out: int, *, bias: bool, dtype, rngs: nnx.Rngs) -> nnx.Sequential:
    """``d_in → rank → d_out`` without a bias on the first linear map (KDA's gate projections)."""
    return nnx.Sequential(
        nnx.Linear(d_in, rank, use_bias=False, dtype=dtype, rngs=rngs),
        nnx.Linear(rank, d_out, use_bias=bias, dtype=dtype, rngs=rngs),
    )


class DeltaRuleCore(RandomMap):
    """DeltaNet (``"deltanet"``), Gated DeltaNet (``"gated_deltanet"``) or Kimi Delta Attention (``"kda"``) at a
    causal self-attention site; see the module's docstring."""

    causal, bidirectional, cross, dense_masks, uses_num_features = True, False, False, False, False
    takes_qk_map = True  # AttentionConfig.qk_map: an estimator's normalized features instead of SiLU and L2

    def __init__(self, config, attention, *, causal: bool, cross: bool, rngs: nnx.Rngs):
        del causal, cross  # causal self-attention only (check_site)
        d, h, dh = config.d_model, config.num_heads, config.head_dim
        self.num_heads, self.head_dim, self.chunk_size = h, dh, attention.chunk_size
        self.variant, self.attention = VARIANTS[attention.kind], attention
        self.qk_map = None if attention.qk_map is None else lookup_estimator(attention.qk_map)
        random = self.qk_map is not None and (self.qk_map.needs_projection or bool(self.qk_map.sampled))
        key = projection_key(rngs) if random else None
        self.projection, self.random_params = (
            random_variables(
                self.qk_map,
                key,
                attention.num_features,
                dh,
                projection_kind=attention.projection_kind,
                scaling=attention.scaling,
            )
            if random
            else (None, nnx.Dict())
        )
        self.key_dim = dh if self.qk_map is None else self.qk_map.num_outputs(attention.num_features, dh)
        bound = 1 / math.sqrt(CONV_TAPS)  # PyTorch's Conv1d default, as the papers' code
        self.conv = nnx.Param(jax.random.uniform(rngs.params(), (CONV_TAPS, 3 * h * dh), minval=-bound, maxval=bound))
        dtype = jnp.dtype(config.dtype)
        self.beta = nnx.Linear(d, h, dtype=dtype, rngs=rngs)
        self.norm = nnx.RMSNorm(dh, rngs=rngs)
        decay, gate = self.variant.decay, self.variant.output_gate
        if decay == "head":
            self.decay = nnx.Linear(d, h, dtype=dtype, rngs=rngs)
            dt = jnp.exp(jax.random.uniform(rngs.params(), (h,), minval=math.log(1e-3), maxval=math.log(0.1)))
            self.dt_bias = nnx.Param(_inverse_softplus(dt))
        elif decay == "channel":
            self.decay = low_rank(d, dh, h * self.key_dim, bias=False, dtype=dtype, rngs=rngs)
            self.dt_bias = nnx.Param(jnp.zeros((h * self.key_dim,)))
        if decay is not None:
            self.A_log = nnx.Param(jnp.log(jax.random.uniform(rngs.params(), (h,), minval=1.0, maxval=16.0)))
        if gate == "silu":
            self.output_gate = nnx.Linear(d, h * dh, dtype=dtype, rngs=rngs)
        elif gate == "sigmoid":
            self.output_gate = low_rank(d, dh, h * dh, bias=True, dtype=dtype, rngs=rngs)

    @staticmethod
    def check_site(site: str, attention, config, *, causal: bool, stateful: bool) -> None:
        """The delta rule is causal self-attention; its gate is its own, and its sequence is not split."""
        if not causal:
            raise InputError(
                f"{site}: {attention.kind!r} updates a state token by token (the delta rule is causal); {site} "
                "attends bidirectionally or to a memory. Use it at the decoder's self-attention."
            )
        if attention.gated:
            raise InputError(
                f"{site}: {attention.kind!r} has its own decay ('gated_deltanet', 'kda'); gated=True is for feature "
                "maps."
            )
        if config.positional == "relative":
            raise InputError(f"{site}: {attention.kind!r} has no relative bias; the short convolution gives position.")
        if config.sequence_axis is not None:
            raise InputError(
                f"{site}: {attention.kind!r} does not run sequence-parallel in the models yet (the short convolution "
                "reaches across a block's start); rfa.attention.delta_rule_attention(sequence_axis=) does."
            )
        fm = None if attention.qk_map is None else lookup_estimator(attention.qk_map)
        if fm is not None and (set(fm.required) - set(fm.sampled) or fm.learned or fm.kernel == "gaussian"):
            raise InputError(
                f"{site}: qk_map={attention.qk_map!r} needs parameters fitted, learned or given, or estimates the "
                "Gaussian kernel; the delta rule takes a map of the softmax kernel with fixed parameters (positive, "
                "trig, hyperbolic, elu, relu, taylor, ...)."
            )

    @property
    def redraw_every(self) -> int:
        """The site's redrawing policy (``AttentionConfig.redraw_every``), read by :func:`rfa.nnx.redraw`."""
        return self.attention.redraw_every

    def redraw(self, key: Array) -> None:
        """Replaces the random projection of ``qk_map`` by a fresh draw from ``key``."""
        a = self.attention
        redraw_variables(
            self.projection,
            self.random_params,
            self.qk_map,
            key,
            a.num_features,
            self.head_dim,
            projection_kind=a.projection_kind,
            scaling=a.scaling,
        )

    def _inputs(self, q, k, v, x, keep, history):
        """The papers' map of q, k, v (convolution, SiLU, L2 norm, 1/√d_k), β and g: ``[batch, L, heads, ·]`` and
        ``[batch, L, heads]``, and the convolution's new history."""
        b, length, h, dh = q.shape
        qkv = jnp.concatenate([q, k, v], axis=-1).reshape(b, length, 3 * h * dh).astype(jnp.float32)
        qkv = jnp.where(keep[..., None], qkv, 0.0)
        qkv, history = causal_convolution(qkv, self.conv[...], history, keep)
        q, k, v = jnp.split(qkv.reshape(b, length, h, 3 * dh), 3, axis=-1)
        v = jax.nn.silu(v)
        if self.qk_map is None:
            q, k = (jax.nn.silu(y) for y in (q, k))
            q, k = (y / jnp.sqrt(jnp.sum(y * y, axis=-1, keepdims=True) + 1e-6) for y in (q, k))
        else:
            projection = None if self.projection is None else self.projection[...]
            params = {name: value[...] for name, value in self.random_params.items()} | self.attention.params
            q, k = normalized_features(q, k, estimator=self.qk_map, projection=projection, feature_params=params)
        beta = jnp.where(keep[..., None], jax.nn.sigmoid(self.beta(x).astype(jnp.float32)), 0.0)
        log_decay = None
        if self.variant.decay is not None:
            rate = self.decay(x).astype(jnp.float32) + self.dt_bias[...]  # [batch, L, heads] or [.., heads · d_k]
            if self.variant.decay == "channel":
                rate = rate.reshape(rate.shape[:-1] + (h, self.key_dim))
            scale = jnp.exp(self.A_log[...]).reshape((h,) + (1,) * (rate.ndim - 3))
            keep = keep.reshape(keep.shape + (1,) * (rate.ndim - 2))
            log_decay = jnp.where(keep, -scale * jax.nn.softplus(rate), 0.0)
        return q / math.sqrt(self.key_dim), k, v, beta, log_decay, history

    def _output(self, out, x):
        out = self.norm(out)
        gate = self.variant.output_gate
        if gate is not None:
            activation = jax.nn.silu if gate == "silu" else jax.nn.sigmoid
            out = out * activation(self.output_gate(x).astype(jnp.float32)).reshape(out.shape)
        return out.astype(x.dtype)

    def _run(self, q, k, v, x, keep, cache):
        q, k, v, beta, log_decay, history = self._inputs(q, k, v, x, keep, cache["conv"])
        out, state = call_unchecked(
            delta_rule_attention,
            q,
            k,
            v,
            beta,
            log_decay=log_decay,
            initial_state=cache["state"],
            return_state=True,
            chunk_size=self.chunk_size,
        )
        return self._output(out, x), {"state": state, "conv": history}

    def __call__(self, q, k, v, x, *, key_mask, q_positions, k_positions) -> Array:
        return self._run(q, k, v, x, key_mask, self.init_cache(q.shape[0], q.shape[1]))[0]

    def init_cache(self, batch: int, max_length: int) -> dict:
        """The empty state and convolution history (``max_length`` plays no part: the cache does not grow)."""
        del max_length
        h, dh = self.num_heads, self.head_dim
        return {
            "state": jnp.zeros((batch, h, self.key_dim, dh), jnp.float32),
            "conv": jnp.zeros((batch, CONV_TAPS - 1, 3 * h * dh), jnp.float32),
        }

    def prefill(self, q, k, v, x, *, key_mask, positions, max_length):
        return self.extend(q, k, v, x, self.init_cache(q.shape[0], max_length), keep=key_mask)

    def extend(self, q, k, v, x, cache, *, keep):
        """Tokens ``[batch, n, heads, d]`` continuing from ``cache``: ``(out [batch, n, heads, d], cache)``."""
        return self._run(q, k, v, x, keep, cache)

    def decode(self, q, k, v, x, cache, *, position, keep):
        out, cache = self.extend(q, k, v, x, cache, keep=keep[:, None])  # a padding token changes nothing
        return out[:, 0], cache
