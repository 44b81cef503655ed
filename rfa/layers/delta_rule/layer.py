"""DeltaNet, Gated DeltaNet and Kimi Delta Attention as one layer ``x → y``: the body of ``rfa.nnx.DeltaNet``,
``GatedDeltaNet`` and ``KimiDeltaAttention``, and of a model's site of the kinds ``"deltanet"``, ``"gated_deltanet"``
and ``"kda"`` (:mod:`rfa.layers.delta_rule.site`).

The papers' layers (Yang, Wang, Zhang, Shen, Kim, "Parallelizing Linear Transformers with the Delta Rule over
Sequence Length", NeurIPS 2024, Sec. 3.3 and Fig. 1; Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving
Mamba2 with Delta Rule", ICLR 2025, Sec. 3.4 and Fig. 1; Kimi Team, "Kimi Linear: An Expressive, Efficient
Attention Architecture", arXiv 2510.26692, 2025, Sec. 3) as flash-linear-attention (fla) writes them
(``fla/layers/{delta_net,gated_deltanet,kda}.py``), with fla's option and parameter names
(:class:`~rfa.layers.delta_rule.options.DeltaRuleOptions`; :mod:`rfa.layers.fla_weights` converts fla's weights):

- bias-free projections ``q_proj``, ``k_proj`` (``num_heads · head_dim``) and ``v_proj`` (``num_v_heads ·
  head_dim · expand_v``);
- a short causal depthwise convolution (``conv_size`` taps, ``q_conv1d``, ``k_conv1d``, ``v_conv1d``), SiLU on v
  and ``qk_activation`` on q and k; q and k normalized per head (``qk_norm``: L2, so with β ∈ [0, 1] the transition
  ``I − β_t k_t k_tᵀ`` has eigenvalues in [0, 1] and the state cannot grow; or by their sum), q scaled by
  ``1/√d_k``. With ``DeltaRuleOptions.qk_map`` a registered estimator replaces the activation and the norm: q and k
  are its features, L2-normalized (the kernelized delta rule, :func:`rfa.attention.delta_rule.normalized_features`);
- the writing strength ``β_t = sigmoid(b_proj x_t)`` per token and value head (1 without ``use_beta``; doubled,
  in [0, 2], with ``allow_neg_eigval``: Grazzi et al., "Unlocking State-Tracking in Linear RNNs Through Negative
  Eigenvalues", ICLR 2025);
- Gated DeltaNet: the decay ``α_t = exp(g_t)``, ``g_t = −exp(A_log) · softplus(a_proj x_t + dt_bias)`` per token
  and value head (Mamba2's parametrization);
- KDA: one decay per token, value head and key channel, ``g_t = −exp(A_log[h]) · softplus(f_proj x_t + dt_bias)``
  or, with ``lower_bound``, ``g_t = lower_bound · sigmoid(exp(A_log[h]) · (f_proj x_t + dt_bias))`` in
  ``(lower_bound, 0)`` (fla's ``fla/ops/kda/gate.py``); ``f_proj`` low rank (``d_model → head_v_dim →
  num_v_heads · d_k``, no bias), and ``A_log``, ``b_proj`` and ``dt_bias`` (per key channel) keyed to the value
  heads, fla 0.6's layout for grouped value heads ("A_log and dt_bias are per value-head for native GVA support");
- :func:`rfa.attention.delta_rule_attention` (chunked over a sequence, recurrent when decoding); grouped value
  heads (``num_v_heads`` a multiple of ``num_heads``, as Qwen3-Next) share their group's q and k;
- the output ``o_norm`` (RMSNorm over ``head_v_dim``, ``ε = norm_eps``), times ``SiLU(g_proj x)`` (``use_gate``,
  Gated DeltaNet's default; ``output_gate_activation="sigmoid"`` for a sigmoid) or ``sigmoid`` of a low-rank
  ``g_proj`` with a bias (KDA), then ``o_proj``.

Initialization: ``A`` uniform in [1, 16] (Mamba2's range, which fla's KDA keeps; fla's Gated DeltaNet draws it in
(0, 16), where an ``A`` near 0 means a head that never forgets; rfa keeps the papers' floor of 1) and ``dt =
softplus(dt_bias)`` log-uniform in [0.001, 0.1] (Mamba2's and fla 0.6's, KDA's too); with ``safe_gate`` ``A_log``
starts at 0 (fla's); the convolutions uniform in ±1/√conv_size (PyTorch's ``Conv1d``, as fla).

Precision (docs/howto/precision.md): the parameters in ``param_dtype``; the projections in ``dtype``; the
convolution, the gates, the decays and their sums, the triangular solve and the state in ``state_dtype``: float32,
or float64 for a float64 layer under ``jax.enable_x64``. A ``dtype`` narrower than float32 (bfloat16) is also the
operand dtype of the chunked form's matmuls, summed in float32 (``compute_dtype`` of
:func:`rfa.attention.delta_rule_attention`).

Decoding keeps the state ``S [batch, num_v_heads, d_k, d_v]`` and the convolution's last ``conv_size − 1`` inputs:
O(d_k·d_v) per token at any position. A padding token (``keep`` False) enters nothing, wherever it sits: the
convolution skips it (:func:`causal_convolution`), and its β and g are 0, which leave the state as it is. So a
right-padded prompt, then decoding, equals the unpadded prompt, then decoding, row by row.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import layer_compute_dtype
from rfa._validation import InputError
from rfa.attention.delta_rule import delta_rule_attention, normalized_features
from rfa.attention.segments import sequence_index
from rfa.checks import call_unchecked
from rfa.layers.delta_rule.options import QK_ACTIVATIONS, DeltaRuleOptions, DeltaRuleSpec
from rfa.layers.feature_variables import RandomMap, arrays, projection_key, random_variables, redraw_variables
from rfa.layers.short_convolution import ShortConvolution, causal_convolution, history_entering_block
from rfa.random_features.feature_maps import estimator as lookup_estimator

Array = jax.Array


def _dt_bias(key: Array, size: int, dtype) -> Array:
    """``softplus⁻¹(dt)`` with ``dt`` log-uniform in [0.001, 0.1], floored at 1e-4 (Mamba2's and fla's)."""
    dt = jnp.exp(jax.random.uniform(key, (size,), dtype, minval=math.log(1e-3), maxval=math.log(0.1)))
    dt = jnp.maximum(dt, 1e-4)
    return dt + jnp.log(-jnp.expm1(-dt))


def _a_log(key: Array, size: int, dtype, *, zero: bool) -> Array:
    """``log A``, ``A`` uniform in [1, 16] (Mamba2's range), or 0 (fla's start for KDA's ``safe_gate``)."""
    if zero:
        return jnp.zeros((size,), dtype)
    return jnp.log(jax.random.uniform(key, (size,), dtype, minval=1.0, maxval=16.0))


def _linear(d_in: int, d_out: int, *, dtype, param_dtype, rngs: nnx.Rngs, bias: bool = False) -> nnx.Linear:
    return nnx.Linear(d_in, d_out, use_bias=bias, dtype=dtype, param_dtype=param_dtype, rngs=rngs)


def low_rank(d_in: int, rank: int, d_out: int, *, bias: bool, dtype, param_dtype, rngs: nnx.Rngs) -> nnx.Sequential:
    """``d_in → rank → d_out`` without a bias on the first linear map (KDA's ``f_proj`` and ``g_proj``)."""
    widths = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
    return nnx.Sequential(_linear(d_in, rank, **widths), _linear(rank, d_out, bias=bias, **widths))


class DeltaRuleLayer(RandomMap):
    """The delta rule's layer ``x [batch, L, in_features] → [batch, L, out_features]`` of one kind (see the
    module's docstring), with its cache: the state and the convolution's history.

    Args:
      spec: what the kind adds to DeltaNet (:class:`~rfa.layers.delta_rule.options.DeltaRuleSpec`: its decay and
        output gate).
      options: the layer's :class:`~rfa.layers.delta_rule.options.DeltaRuleOptions` (fla's, the chunk, ``qk_map``);
        its ``num_heads`` plays no part here (the argument below is the layer's).
      in_features: d_model.
      num_heads: query/key heads.
      out_features: the output's width (default ``in_features``).
      sequence_axis: a mesh axis along which :meth:`run` splits L where the mesh set by ``jax.set_mesh`` has it.
      dtype: of the projections (None: float32), and of the chunk's matmul operands when narrower than float32;
        the gates, the decays, the solve and the state run in float32, or in float64 for a float64 layer.
      param_dtype: of the parameters.
      rngs: ``params`` initializes the weights; ``projection`` (else ``params``) draws a ``qk_map``'s W.
    """

    def __init__(
        self,
        spec: DeltaRuleSpec,
        options: DeltaRuleOptions,
        in_features: int,
        num_heads: int,
        *,
        out_features=None,
        sequence_axis: str | None = None,
        dtype=None,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        o = options
        spec.check(o)
        self.sequence_axis = sequence_axis
        self.variant, self.options = spec, o
        h, dk, hv = num_heads, o.key_dim(in_features, num_heads), o.value_heads(num_heads)
        dv = o.head_v_dim(in_features, num_heads)
        self.num_heads, self.head_dim, self.num_v_heads, self.head_v_dim = h, dk, hv, dv
        self.qk_map = None if o.qk_map is None else lookup_estimator(o.qk_map)
        random = self.qk_map is not None and (self.qk_map.needs_projection or bool(self.qk_map.sampled))
        self.projection, self.random_params = (
            random_variables(
                self.qk_map,
                projection_key(rngs),
                o.num_features,
                dk,
                projection_kind=o.projection_kind,
                scaling=o.scaling,
            )
            if random
            else (None, nnx.Dict())
        )
        self.key_dim = dk if self.qk_map is None else self.qk_map.num_outputs(o.num_features, dk)
        d, dtype = in_features, jnp.dtype(dtype or jnp.float32)
        self.state_dtype = jnp.promote_types(dtype, jnp.float32)  # float32, or float64 for a float64 layer
        self.compute_dtype = layer_compute_dtype(dtype)  # bfloat16 operands of the chunk's matmuls
        widths = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.q_proj, self.k_proj = (_linear(d, h * dk, **widths) for _ in range(2))
        self.v_proj = _linear(d, hv * dv, **widths)
        if o.use_short_conv:
            conv = dict(bias=o.conv_bias, param_dtype=param_dtype, rngs=rngs)
            self.q_conv1d, self.k_conv1d = (ShortConvolution(h * dk, o.conv_size, **conv) for _ in range(2))
            self.v_conv1d = ShortConvolution(hv * dv, o.conv_size, **conv)
        self.b_proj = _linear(d, hv, **widths) if o.use_beta else None
        if spec.decay is not None:  # per value head (fla 0.6's GVA): A per value head, dt per value head (× key)
            rates = hv if spec.decay == "head" else hv * self.key_dim
            if spec.decay == "head":
                self.a_proj = _linear(d, rates, **widths)
            else:
                self.f_proj = low_rank(d, dv, rates, bias=False, **widths)
            self.dt_bias = nnx.Param(_dt_bias(rngs.params(), rates, param_dtype))
            self.A_log = nnx.Param(_a_log(rngs.params(), hv, param_dtype, zero=o.safe_gate))
        if spec.output_gate == "low_rank":
            self.g_proj = low_rank(d, dv, hv * dv, bias=o.output_gate_bias, **widths)
        elif spec.gated_by_default if o.use_gate is None else o.use_gate:
            self.g_proj = _linear(d, hv * dv, **widths)
        else:
            self.g_proj = None
        self.o_norm = nnx.RMSNorm(dv, epsilon=o.norm_eps, param_dtype=param_dtype, rngs=rngs)
        self.o_proj = _linear(hv * dv, out_features or in_features, **widths)

    @property
    def redraw_every(self) -> int:
        """The redrawing policy of ``qk_map`` (``DeltaRuleOptions.redraw_every``), read by :func:`rfa.nnx.redraw`."""
        return self.options.redraw_every

    def redraw(self, key: Array) -> None:
        """Replaces the random projection of ``qk_map`` by a fresh draw from ``key``."""
        a = self.options
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

    def empty_state(self, batch: int) -> dict:
        """The empty state ``[batch, num_v_heads, d_k, d_v]`` and convolution history (a fixed size at any
        length), in the layer's ``state_dtype``."""
        conv = self.options.conv_size - 1 if self.options.use_short_conv else 0
        channels = 2 * self.num_heads * self.head_dim + self.num_v_heads * self.head_v_dim
        return {
            "state": jnp.zeros((batch, self.num_v_heads, self.key_dim, self.head_v_dim), self.state_dtype),
            "conv": jnp.zeros((batch, conv, channels), self.state_dtype),
        }

    def _write_and_decay(self, x, keep):
        """β ``[batch, L, num_v_heads]`` and g (``[batch, L, num_v_heads]`` or, per key channel, ``[..., d_k]``), 0
        at padding: token by token, from the layer's input. g is Mamba2's ``−A · softplus(rate)`` or, with
        ``lower_bound``, KDA's bounded ``lower_bound · sigmoid(A · rate)`` (``fla/ops/kda/gate.py``), ``A =
        exp(A_log)`` per value head and ``rate = a_proj x + dt_bias`` (``f_proj x + dt_bias`` per key channel)."""
        o, (b, length), f = self.options, x.shape[:2], self.state_dtype
        hv, decay = self.num_v_heads, self.variant.decay
        beta = jnp.ones((b, length, hv), f) if self.b_proj is None else jax.nn.sigmoid(self.b_proj(x).astype(f))
        beta = jnp.where(keep[..., None], beta * (2.0 if o.allow_neg_eigval else 1.0), 0.0)
        if decay is None:
            return beta, None
        a, dt_bias = jnp.exp(self.A_log[...].astype(f)), self.dt_bias[...].astype(f)
        if decay == "head":
            rate, kept = self.a_proj(x).astype(f) + dt_bias, keep[..., None]
        else:
            rate = (self.f_proj(x).astype(f) + dt_bias).reshape(b, length, hv, self.key_dim)
            a, kept = a[:, None], keep[..., None, None]
        if o.lower_bound is not None:  # fla's bounded gate
            return beta, jnp.where(kept, o.lower_bound * jax.nn.sigmoid(a * rate), 0.0)
        return beta, jnp.where(kept, -a * jax.nn.softplus(rate), 0.0)

    def _mix(self, qkv, keep, beta, log_decay, cache, weights, axis, segment_ids=None, chunk=None):
        """From the projected ``qkv [batch, L, channels]`` to the delta rule's output ``[batch, L, num_v_heads,
        d_v]`` and the cache after the tokens: the convolution over the kept tokens, the activations and norms (or
        ``qk_map``'s features), the delta rule. ``axis``: inside ``shard_map``, the mesh axis splitting L;
        ``segment_ids``: packed sequences (not with ``axis``); ``chunk``: the chunk's length (None: the
        options')."""
        o, (b, length) = self.options, qkv.shape[:2]
        h, dk, hv, dv = self.num_heads, self.head_dim, self.num_v_heads, self.head_v_dim
        history = cache["conv"]
        if o.use_short_conv:
            qkv = jnp.where(keep[..., None], qkv, 0.0)
            if axis is None:
                qkv, history = causal_convolution(qkv, weights["conv"], history, keep, segment_ids)
            else:
                entering, history = history_entering_block(qkv, keep, history, o.conv_size, axis)
                qkv, _ = causal_convolution(qkv, weights["conv"], entering, keep)
            if o.conv_bias:
                qkv = qkv + weights["conv_bias"]
        q, k, v = jnp.split(qkv, [h * dk, 2 * h * dk], axis=-1)
        q, k = (y.reshape(b, length, h, dk) for y in (q, k))
        v = jax.nn.silu(v).reshape(b, length, hv, dv)
        if self.qk_map is None:
            q, k = (QK_ACTIVATIONS[o.qk_activation](y) for y in (q, k))
            if o.qk_norm == "l2":
                q, k = (y / jnp.sqrt(jnp.sum(y * y, axis=-1, keepdims=True) + 1e-6) for y in (q, k))
            else:
                q, k = (y / jnp.sum(y, axis=-1, keepdims=True) for y in (q, k))
        else:
            params = weights["random_params"] | o.params
            q, k = normalized_features(
                q, k, estimator=self.qk_map, projection=weights["projection"], feature_params=params
            )
        q, k = (jnp.repeat(y, hv // h, axis=2) for y in (q, k))  # each group of value heads reads its q and k
        out, state = call_unchecked(
            delta_rule_attention,
            q / math.sqrt(self.key_dim),
            k,
            v,
            beta,
            log_decay=log_decay,
            initial_state=cache["state"],
            return_state=True,
            chunk_size=chunk or o.chunk_size,
            compute_dtype=self.compute_dtype,
            sequence_axis=axis,
            segment_ids=None if segment_ids is None else sequence_index(segment_ids, keep),
        )
        return out, {"state": state, "conv": history}

    def _output(self, out, x):
        out = self.o_norm(out)
        if self.g_proj is not None:
            activation = self.variant.gate_activation(self.options)
            out = out * activation(self.g_proj(x).astype(self.state_dtype)).reshape(out.shape)
        return self.o_proj(out.reshape(out.shape[:2] + (-1,)).astype(self.o_proj.dtype or x.dtype))

    def run(
        self, x: Array, keep: Array, cache: dict | None = None, segment_ids: Array | None = None, *, prefill=False
    ) -> tuple[Array, dict]:
        """``x [batch, L, in_features]`` (``keep [batch, L]``, False: padding) continuing ``cache`` (None: from
        nothing): ``(y [batch, L, out_features], the cache after the kept tokens)``. With ``segment_ids [batch,
        L]`` (packed sequences) the state and the convolution start fresh at each sequence's first kept token
        (:mod:`rfa.attention.segments`): ``cache`` is the first sequence's, the cache returned the last one's.

        With ``sequence_axis`` where the mesh set by ``jax.set_mesh`` splits it, L is split over that axis: the
        projections and gates run token by token on each device's block, the convolution takes its history from
        the blocks before (:func:`history_entering_block`) and the delta rule passes the state on
        (:func:`rfa.attention.delta_rule_attention` with ``sequence_axis``). Inside the user's ``jax.shard_map``
        over that axis, the inputs are this device's block and the same happens without a ``shard_map`` of its
        own.

        A prompt entering a cache (``prefill``, or a ``cache`` given) of at most ``recurrent_below`` tokens runs the
        recurrent form, token by token, as fla's layers do at inference; the output is the same."""
        short = (prefill or cache is not None) and x.shape[1] <= self.options.recurrent_below
        cache = self.empty_state(x.shape[0]) if cache is None else cache
        qkv = jnp.concatenate([self.q_proj(x), self.k_proj(x), self.v_proj(x)], axis=-1).astype(self.state_dtype)
        beta, log_decay = self._write_and_decay(x, keep)
        weights = {"random_params": arrays(self.random_params)}
        weights["projection"] = None if self.projection is None else self.projection[...]
        if self.options.use_short_conv:
            convs = (self.q_conv1d, self.k_conv1d, self.v_conv1d)
            weights["conv"] = jnp.concatenate([c.weight[...] for c in convs], axis=-1)
            if self.options.conv_bias:
                weights["conv_bias"] = jnp.concatenate([c.bias[...] for c in convs])
        mesh, axis = jax.sharding.get_abstract_mesh(), self.sequence_axis
        if axis is None or axis not in mesh.axis_names or mesh.shape[axis] == 1:
            out, cache = self._mix(qkv, keep, beta, log_decay, cache, weights, None, segment_ids, 1 if short else None)
        elif segment_ids is not None:
            raise InputError(
                f"{type(self).__name__}: segment_ids (packed sequences) are not supported with the sequence split "
                f"over {axis!r}; run packed rows without sequence_axis."
            )
        elif axis in mesh.manual_axes:  # called inside the user's shard_map: the arrays are this device's block
            out, cache = self._mix(qkv, keep, beta, log_decay, cache, weights, axis)
        else:
            tokens, whole = jax.sharding.PartitionSpec(None, axis), jax.sharding.PartitionSpec()
            specs = (tokens, tokens, tokens, tokens, whole, whole)
            args = (qkv, keep, beta, log_decay, cache, weights)
            if mesh.axis_types[mesh.axis_names.index(axis)] == jax.sharding.AxisType.Explicit:
                args = tuple(
                    jax.tree.map(lambda x, spec=spec: jax.reshard(x, spec), a)
                    for a, spec in zip(args, specs, strict=True)
                )
            out, cache = jax.shard_map(
                functools.partial(self._mix, axis=axis),
                mesh=mesh,
                in_specs=specs,
                out_specs=(tokens, whole),
                axis_names={axis},
                check_vma=False,  # the state and history are the same on every device by construction
            )(*args)
        return self._output(out, x), cache
