"""``rfa.nnx.DeltaNet``, ``GatedDeltaNet``, ``KimiDeltaAttention``, ``GatedLinearAttention`` and
``SlidingWindowAttention``: causal Flax NNX layers whose decode cache is a state of fixed size (imported from
:mod:`rfa.nnx`; this module keeps :mod:`rfa.nnx` short).
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._validation import InputError, check_positive_int
from rfa.attention.masks import UNSUPPORTED, plan_mask, unsupported_message
from rfa.attention.segments import check_segment_ids
from rfa.checks import raise_if
from rfa.layers.delta_rule.layer import DeltaRuleLayer
from rfa.layers.delta_rule.options import DeltaRuleOptions, DeltaRuleSpec
from rfa.layers.delta_rule.site import DELTANET, GATED_DELTANET, KIMI_DELTA_ATTENTION
from rfa.layers.kernelized import KernelizedCore, KernelizedOptions
from rfa.layers.kinds import SiteWidths
from rfa.layers.sliding_window import SlidingWindowCore, SlidingWindowOptions

Array = jax.Array

ADVICE = (
    "{layer} is causal and leaves padding out: it applies key padding and causal ∧ padding masks "
    "(nnx.make_attention_mask, nnx.make_causal_mask and their nnx.combine_masks); a prefix-LM, sliding-window or "
    "other mask needs exact attention at this site (nnx.MultiHeadAttention)."
)


class _StateLayer(nnx.Module):
    """Flax's interface (``mask``, ``decode``, ``init_cache``) over a causal layer whose decode cache is a state:
    a subclass gives ``run(x, keep, state, segment_ids) -> (y, state)`` (``state`` None: from nothing) and
    ``empty_state(batch)`` (the base of :class:`DeltaNet`, :class:`GatedDeltaNet`, :class:`KimiDeltaAttention`,
    :class:`GatedLinearAttention` and :class:`SlidingWindowAttention`)."""

    def init_cache(self, input_shape: tuple[int, ...], dtype=jnp.float32) -> None:
        """The empty state for inputs ``[batch, length, features]`` (its size does not depend on ``length``)."""
        del dtype
        self.cached_state = nnx.Cache(self.empty_state(input_shape[0]))

    def __call__(
        self,
        inputs: Array,
        *,
        mask: Array | None = None,
        segment_ids: Array | None = None,
        decode: bool | None = None,
    ) -> Array:
        """``inputs [batch, L, in_features]`` → ``[batch, L, out_features]``, causal. ``mask`` (Flax's, nonzero =
        attend) is key padding or causal ∧ padding (``nnx.make_causal_mask``, ``make_attention_mask``); other
        masks raise. ``segment_ids [batch, L]`` (integers) packs sequences into a row, as Flax's convention: each
        is computed as if alone, its state and short convolution starting fresh at its first kept token
        (:mod:`rfa.attention.segments`; pass the padding mask as ``mask``, not as a segment mask). With ``decode``
        the tokens continue the cached state (one or several at a time).

        It replaces masked self-attention only: unlike ``nnx.MultiHeadAttention`` it takes no ``inputs_k`` or
        ``inputs_v`` (a state holds the layer's own past, there is no memory to attend to), no ``deterministic``
        (it has no dropout) and no ``qkv_features`` (its widths are its own arguments: ``num_heads``, ``head_dim``)."""
        decode = self.decode if decode is None else decode
        if not decode:
            return self.step(inputs, None, mask=mask, segment_ids=segment_ids)
        if self.cached_state is None:
            raise InputError("Autoregressive cache not initialized, call ``init_cache`` first.")
        out, state = self.step(inputs, self.cached_state.get_value(), mask=mask, segment_ids=segment_ids)
        self.cached_state.set_value(state)
        return out

    def step(self, inputs: Array, state, *, mask: Array | None = None, segment_ids: Array | None = None):
        """The layer as a function of the state: ``(outputs, state after the tokens)`` from ``state`` (a state of
        :meth:`empty_state`), or the outputs of a whole sequence when ``state`` is None. A token is padding where
        no query sees it as a key or where it sees no key (a key mask ``[batch, 1, 1, L]`` or ``make_attention_mask``
        of the key padding alone included): it is left out of the state and outputs 0, as fla's layers leave out
        the padding of their ``attention_mask``. With ``segment_ids`` the state given is the first sequence's
        and the state returned the last one's."""
        batch, length = inputs.shape[0], inputs.shape[-2]
        heads = jax.ShapeDtypeStruct((batch, length, self.num_heads, 1), inputs.dtype)  # the mask's layout
        name = type(self).__name__
        refusal = functools.partial(unsupported_message, who=name, advice=ADVICE.format(layer=name))
        # Read as a bidirectional call's mask: a prefix-LM mask is then refused, not cut to its causal part.
        plan = plan_mask(mask, heads, heads, is_causal=False, refusal=refusal)
        if not isinstance(plan.pattern, int):
            shape, found = plan.found
            raise_if(plan.pattern == UNSUPPORTED, lambda found: refusal(shape, found), values=(found,))
        keep = jnp.ones((batch, length), jnp.bool_)
        if plan.keep_keys is not None:
            keep = jnp.broadcast_to(jnp.any(plan.keep_keys, axis=-2), (batch, length))
        if segment_ids is not None:
            segment_ids = check_segment_ids(segment_ids, (batch, length))
        out, after = self.run(inputs, keep, state, segment_ids)
        if plan.keep_queries is not None:
            keep = keep & jnp.broadcast_to(jnp.any(plan.keep_queries, axis=-2), (batch, length))
        if mask is not None:  # a token left out as a key is padding as a query too
            out = jnp.where(keep[..., None], out, 0.0)
        return out if state is None else (out, after)


class _DeltaRule(_StateLayer, DeltaRuleLayer):
    """A delta-rule layer (:class:`~rfa.layers.delta_rule.layer.DeltaRuleLayer`) with Flax's interface: its kind is
    the subclass's ``spec``; every keyword but the layer's own is an option of
    :class:`~rfa.layers.delta_rule.options.DeltaRuleOptions`."""

    spec: DeltaRuleSpec

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        sequence_axis: str | None = None,
        decode: bool = False,
        dtype=None,
        param_dtype=jnp.float32,
        rngs: nnx.Rngs,
        **options,
    ):
        num_heads = check_positive_int(num_heads, "num_heads")
        options = DeltaRuleOptions(num_heads=num_heads, **options)
        self.in_features = check_positive_int(in_features, "in_features")  # as nnx.MultiHeadAttention names it
        super().__init__(
            self.spec,
            options,
            in_features,
            num_heads,
            out_features=out_features,
            sequence_axis=sequence_axis,
            dtype=dtype,
            param_dtype=param_dtype,
            rngs=rngs,
        )
        self.decode = decode
        self.cached_state = nnx.data(None)


def _options_doc() -> str:
    """The layers' Args: their own, then DeltaRuleOptions' attributes (the one list of the options)."""
    attributes = DeltaRuleOptions.__doc__.split("Attributes:\n", 1)[1].split("\n\n", 1)[0]
    own = "\n".join(line for line in attributes.splitlines() if not line.lstrip().startswith("num_heads:"))
    return OPTIONS_DOC + own + "\n"


OPTIONS_DOC = """
    The keyword arguments besides ``num_heads``, ``in_features``, ``out_features``, ``sequence_axis``, ``decode``,
    ``dtype``, ``param_dtype`` and ``rngs`` are the options of
    :class:`~rfa.layers.delta_rule.options.DeltaRuleOptions`, fla's where fla has one (``head_dim`` defaults to
    ``in_features // num_heads`` and ``expand_v`` to 1). The parameters carry fla's names (``q_proj``,
    ``k_proj``, ``v_proj``, ``q_conv1d``, ..., ``o_norm``, ``o_proj``); :func:`rfa.nnx.load_fla_state_dict` loads
    a state dict of fla's layer, and :func:`rfa.nnx.from_fla_layer` builds the layer from fla's arguments. The
    layer takes ``inputs`` only (self-attention: no ``inputs_k``/``inputs_v``, no ``deterministic``, no dropout):
    it replaces ``nnx.MultiHeadAttention`` at a causal self-attention site.

    Args:
      num_heads: query/key heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features (fla's ``hidden_size``).
      out_features: the output's features (default ``in_features``).
      sequence_axis: a mesh axis: where the mesh set by ``jax.set_mesh`` has it (size > 1), every call splits L
        over it, as ``rfa.nnx.MultiHeadAttention``'s (the short convolution takes its history from the blocks
        before; the state passes from block to block).
      decode: with True the call continues the cached state (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype of the projections (None: float32); the gates, the delta rule and its state
        run in float32, or in float64 for ``dtype=jnp.float64`` (under ``jax.enable_x64``).
      param_dtype: the parameters' dtype (float32).
      rngs: ``params`` initializes the weights.
"""


class DeltaNet(_DeltaRule):
    """DeltaNet as a Flax NNX layer: causal self-attention by the delta rule,
    ``S_t = (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ``, ``o_t = S_tᵀ q_t``.

    The layer of Yang, Wang, Zhang, Shen, Kim, "Parallelizing Linear Transformers with the Delta Rule over
    Sequence Length" (NeurIPS 2024) as flash-linear-attention's ``DeltaNet`` (:mod:`rfa.layers.delta_rule.layer`). With
    ``decode=True`` the cache is the state ``[batch, num_v_heads, d_k, d_v]`` and the convolution's last inputs:
    O(1) per token at any position. ``gated=True`` (before 0.6 the default) builds :class:`GatedDeltaNet`'s layer
    under this name, with a warning, for one release.
    {options}
    Example:
      >>> layer = rfa.nnx.DeltaNet(4, 32, rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)
      >>> layer(x[:, :1], decode=True).shape  # one token from the state
      (2, 1, 32)
    """

    spec = DELTANET

    def __init__(self, num_heads: int, in_features: int, out_features: int | None = None, *, gated=None, **options):
        if gated is not None:
            warnings.warn(
                "rfa.nnx.DeltaNet(gated=...) is rfa.nnx.GatedDeltaNet (gated=True) or rfa.nnx.DeltaNet since rfa "
                "0.6; DeltaNet is ungated by default.",
                DeprecationWarning,
                stacklevel=2,
            )
            self.spec = GATED_DELTANET if gated else DELTANET
        super().__init__(num_heads, in_features, out_features, **options)


class GatedDeltaNet(_DeltaRule):
    """Gated DeltaNet as a Flax NNX layer: ``S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ`` with Mamba2's
    decay ``α_t = exp(−exp(A_log) · softplus(a_proj x_t + dt_bias))`` per value head and the output gated by
    ``SiLU(g_proj x)``.

    The layer of Yang, Kautz, Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule" (ICLR 2025)
    as flash-linear-attention's ``GatedDeltaNet`` (:mod:`rfa.layers.delta_rule.layer`); Qwen3-Next's linear-attention
    layers are this layer with grouped value heads (``num_v_heads``). With ``decode=True`` the cache is the state
    and the convolution's last inputs: O(1) per token at any position.
    {options}
    Example:
      >>> layer = rfa.nnx.GatedDeltaNet(2, 32, head_dim=8, num_v_heads=4, expand_v=2.0, rngs=nnx.Rngs(0))
      >>> layer(jnp.ones((2, 10, 32))).shape
      (2, 10, 32)
    """

    spec = GATED_DELTANET


class KimiDeltaAttention(_DeltaRule):
    """Kimi Delta Attention (KDA) as a Flax NNX layer: the delta rule with one decay per key channel,
    ``S_t = (I − β_t k_t k_tᵀ) Diag(α_t) S_{t−1} + β_t k_t v_tᵀ``.

    The layer of Kimi Team, "Kimi Linear: An Expressive, Efficient Attention Architecture" (arXiv 2510.26692, 2025)
    as flash-linear-attention's ``KimiDeltaAttention`` (:mod:`rfa.layers.delta_rule.layer`): the decay
    ``g = −exp(A_log[h]) · softplus(f_proj x + dt_bias)`` with ``f_proj`` low rank and ``dt_bias`` per key channel,
    and the output ``o_norm(o) ⊙ sigmoid(g_proj x)`` with ``g_proj`` low rank (``use_gate`` plays no part). With
    ``decode=True`` the cache is the state and the convolution's last inputs: O(1) per token at any position.
    {options}
    Example:
      >>> layer = rfa.nnx.KimiDeltaAttention(4, 32, rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)
      >>> layer(x[:, :1], decode=True).shape  # one token from the state
      (2, 1, 32)
    """

    spec = KIMI_DELTA_ATTENTION


for _layer in (DeltaNet, GatedDeltaNet, KimiDeltaAttention):
    _layer.__doc__ = _layer.__doc__.replace("{options}", _options_doc())


class _ProjectedCore(_StateLayer):
    """An attention core between ``nnx.MultiHeadAttention``'s q/k/v/output projections, with the core's
    cache as the state (the base of :class:`GatedLinearAttention` and :class:`SlidingWindowAttention`)."""

    def _build(self, num_heads, in_features, core, options, *, out_features, decode, dtype, rngs, cache_slots):
        num_heads = check_positive_int(num_heads, "num_heads")
        in_features = check_positive_int(in_features, "in_features")
        if in_features % num_heads:
            raise InputError(f"in_features ({in_features}) must be divisible by num_heads ({num_heads}).")
        config = SiteWidths(in_features, num_heads, dtype=jnp.dtype(dtype or jnp.float32).name)
        options.check_site("attention", config, causal=True, stateful=True)
        heads = (num_heads, config.head_dim)
        self.num_heads, self.in_features = num_heads, in_features  # as nnx.MultiHeadAttention names them
        self.query, self.key, self.value = (
            nnx.LinearGeneral(in_features, heads, dtype=dtype, rngs=rngs) for _ in range(3)
        )
        self.out = nnx.LinearGeneral(heads, out_features or in_features, axis=(-2, -1), dtype=dtype, rngs=rngs)
        self.core = core(config, options, causal=True, cross=False, rngs=rngs)
        self.decode, self.cache_slots = decode, cache_slots
        self.cached_state = nnx.data(None)

    def empty_state(self, batch: int):
        """The core's cache of no token for ``batch`` sequences."""
        return self.core.init_cache(batch, self.cache_slots)

    def run(self, inputs: Array, keep: Array, state, segment_ids: Array | None = None):
        """The core over ``inputs`` (``keep``: False at padding; ``segment_ids``: packed sequences) from ``state``
        (None: from nothing): ``(outputs, state)``."""
        q, k, v = self.query(inputs), self.key(inputs), self.value(inputs)
        if state is None:
            positions = jnp.broadcast_to(jnp.arange(inputs.shape[-2]), keep.shape)
            packed = {} if segment_ids is None else {"segment_ids": segment_ids}
            out = self.core(q, k, v, inputs, key_mask=keep, q_positions=positions, k_positions=positions, **packed)
        elif segment_ids is not None:
            raise InputError(
                f"{type(self).__name__}: segment_ids (packed sequences) are for a whole pass, not for tokens that "
                "continue a cached state; decode one sequence per row."
            )
        else:
            out, state = self.core.extend(q, k, v, inputs, state, keep=keep)
        return self.out(out.astype(self.out.dtype or out.dtype)), state


class GatedLinearAttention(_ProjectedCore):
    """Gated linear attention as a Flax NNX layer: ``S_t = diag(g_t) S_{t−1} + φ(k_t)v_tᵀ`` with a data-dependent
    gate per head and feature, ``g_t = sigmoid(W x_t + b)`` (Yang et al., "Gated Linear Attention Transformers with
    Hardware-Efficient Training", ICML 2024, with a full-rank gate), normalized as rfa's kernelized attention.

    Args:
      num_heads: the number of heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features.
      out_features: the output's features (default ``in_features``).
      estimator: the map φ, a registered estimator (default elu+1, as GLA); one with a projection draws it from
        ``rngs`` and is redrawn by :func:`redraw` like every rfa layer's.
      num_features: m of a map that takes one.
      chunk_size: tokens per chunk of the chunked form.
      decode: with True the call continues the cached state (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype of the projections (None: float32); the gates, the delta rule and its state
        run in float32, or in float64 for ``dtype=jnp.float64`` (under ``jax.enable_x64``).
      param_dtype: the parameters' dtype (float32).
      rngs: ``params`` initializes the weights (and the projection of a map that has one).

    Example:
      >>> layer = rfa.nnx.GatedLinearAttention(4, 32, rngs=nnx.Rngs(0))
      >>> layer(jnp.ones((2, 10, 32)), mask=nnx.make_causal_mask(jnp.ones((2, 10)))).shape
      (2, 10, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        estimator: str = "elu",
        num_features: int = 64,
        chunk_size: int = 64,
        decode: bool = False,
        dtype=None,
        rngs: nnx.Rngs,
    ):
        options = KernelizedOptions(
            estimator=estimator, num_features=num_features, chunk_size=chunk_size, gated=True, gate="feature"
        )
        self._build(
            num_heads,
            in_features,
            KernelizedCore,
            options,
            out_features=out_features,
            decode=decode,
            dtype=dtype,
            rngs=rngs,
            cache_slots=1,  # the state (S, z) has no slots
        )


class SlidingWindowAttention(_ProjectedCore):
    """Causal sliding-window softmax attention as a Flax NNX layer: each query attends to itself and the
    ``window − 1`` tokens before it (Beltagy, Peters, Cohan, "Longformer", 2020; Mistral's layers), in O(L·w).

    ``nnx.MultiHeadAttention``'s projections around rfa's window (:mod:`rfa.layers.sliding_window`); with
    ``decode=True`` the cache is a ring of the last ``window`` keys and values, the same size at any position.
    Padding (Flax's mask) is left out wherever it sits: the window counts each row's kept tokens, in the full pass
    and in the ring alike, so a right-padded prompt, then decoding, equals the prompt alone, then decoding.

    Args:
      num_heads: the number of heads, as in ``nnx.MultiHeadAttention``.
      in_features: the input's features.
      window: w, the tokens a query sees (itself included).
      out_features: the output's features (default ``in_features``).
      decode: with True the call continues the cached ring (``init_cache`` first), as Flax's ``decode``.
      dtype: the computation dtype.
      rngs: ``params`` initializes the weights.

    Example:
      >>> layer = rfa.nnx.SlidingWindowAttention(4, 32, window=4, rngs=nnx.Rngs(0))
      >>> x = jnp.ones((2, 10, 32))
      >>> layer(x).shape
      (2, 10, 32)
      >>> layer.init_cache(x.shape)
      >>> layer(x[:, :1], decode=True).shape  # one token from the ring
      (2, 1, 32)
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        out_features: int | None = None,
        *,
        window: int,
        decode: bool = False,
        dtype=None,
        rngs: nnx.Rngs,
    ):
        window = check_positive_int(window, "window")
        self._build(
            num_heads,
            in_features,
            SlidingWindowCore,
            SlidingWindowOptions(window=window),
            out_features=out_features,
            decode=decode,
            dtype=dtype,
            rngs=rngs,
            cache_slots=window,
        )
