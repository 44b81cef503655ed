"""Multi-head attention on its own arguments: the projections, positions and caches around an attention core.

The q/k/v/output projections are ``nnx.LinearGeneral`` layers, with grouped-query attention (``num_kv_heads``), an
output gate (gated attention) and rotary positions; the attention between them is a core, one per kind (exact softmax,
Fourier integral, kernelized with any registered estimator, Linformer, a sliding window; each kind's module registers
``projected(ItsCore)`` as its layer, :mod:`rfa.layers.kinds`). For decoding, self-attention keeps a cache — the keys
and values so far for exact attention (in the model's dtype), the recurrent state ``(S, z)`` for kernelized attention,
so each token costs the same at any position — built for a whole prompt in one parallel pass
(:meth:`AttentionSite.prefill`) and extended token by token (:meth:`AttentionSite.decode_step`); cross-attention
prepares the encoder side once (:meth:`AttentionSite.prepare_memory`).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import nnx

from rfa._dtypes import computation_dtype
from rfa._validation import InputError
from rfa.layers.kinds import KindOptions, SiteWidths, check_bool, check_int
from rfa.layers.norms import RMSNorm
from rfa.layers.positional import rotate

Array = jax.Array


QK_NORMS = (None, "rms", "zero_centered")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HeadsOptions(KindOptions):
    """The options of the kinds that :class:`AttentionSite` projects around a core (every kind but the delta rule's,
    whose layer has projections of its own).

    Attributes:
      num_heads: the site's query heads (None: the model's); a head is ``d_model / num_heads`` wide.
      num_kv_heads: grouped-query attention: key/value heads, a divisor of the heads, each shared by a group of
        query heads (Ainslie et al., "GQA", EMNLP 2023). None: one per head.
      output_gate: the attention's output times ``sigmoid(W_g x)`` per head and channel, before the output
        projection (gated attention, as Qwen3-Next's full-attention layers; Qiu et al., "Gated Attention for Large
        Language Models", 2025).
      rope_base: the rotary base of the site's positions (a model with ``positional="rotary"``).
      head_dim: a head's width; None: ``d_model / num_heads``. Qwen3's heads are wider than that (128 at d_model
        1024 and 16 heads).
      qk_norm: an RMSNorm (ε = ``qk_norm_eps``) over each query and key head before the rotation, as Qwen3's
        ``q_norm`` and ``k_norm`` (Dehghani et al., "Scaling Vision Transformers to 22 Billion Parameters", ICML
        2023): ``"rms"`` (scale ``w``) or ``"zero_centered"`` (scale ``1 + w``: Qwen3.5's, Qwen3-Next's); None: none.
      rotary_fraction: the share of each head's channels that rotary positions rotate (the rest pass unrotated:
        Hugging Face's ``partial_rotary_factor``).
      bias: biases on the query, key, value, gate and output projections (Hugging Face's ``attention_bias``).
    """

    num_kv_heads: int | None = None
    output_gate: bool = False
    rope_base: float = 10000.0
    head_dim: int | None = None
    qk_norm: str | None = None
    qk_norm_eps: float = 1e-6
    rotary_fraction: float = 1.0
    bias: bool = True

    def __post_init__(self):
        super().__post_init__()
        check_int(self, "num_kv_heads", optional=True)
        check_int(self, "head_dim", optional=True)
        check_bool(self, "output_gate", "bias")
        if self.qk_norm not in QK_NORMS:
            raise InputError(f"{type(self).__name__}.qk_norm must be one of {list(QK_NORMS)}, got {self.qk_norm!r}.")
        fraction = self.rotary_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise InputError(f"{type(self).__name__}.rotary_fraction must be in (0, 1], got {fraction!r}.")
        if isinstance(self.rope_base, bool) or not isinstance(self.rope_base, (int, float)) or self.rope_base <= 1:
            raise InputError(f"{type(self).__name__}.rope_base must be a number > 1, got {self.rope_base!r}.")
        if (
            isinstance(self.qk_norm_eps, bool)
            or not isinstance(self.qk_norm_eps, (int, float))
            or self.qk_norm_eps <= 0
        ):
            raise InputError(f"{type(self).__name__}.qk_norm_eps must be a number > 0, got {self.qk_norm_eps!r}.")

    def check_site(self, site: str, widths: SiteWidths, *, causal: bool, stateful: bool) -> None:
        heads = self.num_heads or widths.num_heads
        if (self.head_dim is None and widths.d_model % heads) or heads % (self.num_kv_heads or heads):
            raise InputError(
                f"{site}: {heads} heads must divide d_model = {widths.d_model} (or set head_dim), and num_kv_heads = "
                f"{self.num_kv_heads} must divide the heads."
            )
        rotated = int((self.head_dim or widths.d_model // heads) * self.rotary_fraction)
        if widths.positional == "rotary" and rotated % 2:
            raise InputError(f"{site}: rotary positions rotate pairs of channels; rotary_fraction gives {rotated}.")


def projected(core: type):
    """The layer of a kind whose attention is ``core`` between :class:`AttentionSite`'s projections: what the kind's
    module registers as its ``layer`` (:class:`rfa.layers.kinds.AttentionKind`)."""
    return functools.partial(AttentionSite, core=core)


class AttentionInputs(nnx.Intermediate):
    """What :class:`AttentionSite` sows while ``nnx.capture`` collects it: each call's
    ``(q, k, v, key_mask)``, ``q [batch, q_len, heads, head_dim]``, ``k`` and ``v [batch, kv_len, heads,
    head_dim]`` after the projections (and rotary positions), ``key_mask [batch, kv_len]``: what the site's
    attention core receives. Attention distillation and the estimator experiments read them.

    Example:
      >>> from rfa.models import Encoder, preset
      >>> model = Encoder(preset("tiny", vocab_size=50), rngs=nnx.Rngs(0))
      >>> _, sown = nnx.capture(model, AttentionInputs)(jnp.ones((2, 7), jnp.int32))
      >>> q, k, v, key_mask = sown["encoder"]["layers"][0]["attention"]["inputs"][0]
      >>> q.shape, key_mask.shape
      ((2, 7, 4, 8), (2, 7))
    """


class AttentionSite(nnx.Module):
    """Self- or cross-attention ``[batch, q_len, d_model] -> [batch, q_len, d_model]``.

    Args:
      widths: what the site reads of its model (:class:`~rfa.layers.kinds.SiteWidths`: widths, positions, dtype).
      options: the kind's options (a :class:`HeadsOptions`: the site's heads, grouped-query heads, gate, rotary base).
      core: the attention between the projections, built as ``core(widths, options, causal=, cross=, rngs=)``.
      causal: each query sees keys at or before its position (decoder self-attention).
      cross: keys and values come from a separate memory (encoder output).
      rngs: ``params`` initializes the weights; ``projection`` (falling back to ``params``) draws W.

    A kernelized site whose map fits parameters from data (oprf, the DERFs) can keep a fit from
    calibration batches: inside ``with rfa.layers.calibrating(model):`` each (eager) pass fits them
    to the site's queries and keys per head and stores them as ``FittedParams`` state, which every
    later pass, prefill and decoding step uses instead of the config's fixed values.
    """

    def __init__(
        self, widths: SiteWidths, options: HeadsOptions, *, core: type, causal: bool, cross: bool, rngs: nnx.Rngs
    ):
        widths = dataclasses.replace(  # the site's own heads and their width
            widths, num_heads=options.num_heads or widths.num_heads, head_width=options.head_dim or widths.head_width
        )
        d, h, dh = widths.d_model, widths.num_heads, widths.head_dim
        kv = options.num_kv_heads or h
        linear = {"use_bias": options.bias, "dtype": jnp.dtype(widths.dtype), "rngs": rngs}
        self.query = nnx.LinearGeneral(d, (h, dh), **linear)
        self.key = nnx.LinearGeneral(d, (kv, dh), **linear)
        self.value = nnx.LinearGeneral(d, (kv, dh), **linear)
        self.gate = nnx.LinearGeneral(d, (h, dh), **linear) if options.output_gate else None
        self.out = nnx.LinearGeneral((h, dh), d, axis=(-2, -1), **linear)
        norm = {"eps": options.qk_norm_eps, "zero_centered": options.qk_norm == "zero_centered"}
        self.query_norm = RMSNorm(dh, **norm) if options.qk_norm else None
        self.key_norm = RMSNorm(dh, **norm) if options.qk_norm else None
        self.rotary = widths.rotary(cross)
        self.rope_base, self.rotary_fraction, self.groups = options.rope_base, options.rotary_fraction, h // kv
        self.core = core(widths, options, causal=causal, cross=cross, rngs=rngs)
        self.causal = causal

    def _rotate(self, x, positions):
        return rotate(x, positions, base=self.rope_base, fraction=self.rotary_fraction) if self.rotary else x

    def _queries(self, x, positions):
        q = self.query(x)
        return self._rotate(q if self.query_norm is None else self.query_norm(q), positions)

    def _keys_values(self, memory, positions):
        """Keys and values, normed and rotated keys, each key/value head repeated over its group of query heads
        (GQA)."""
        k, v = self.key(memory), self.value(memory)
        k = self._rotate(k if self.key_norm is None else self.key_norm(k), positions)
        return jnp.repeat(k, self.groups, axis=-2), jnp.repeat(v, self.groups, axis=-2)

    def _queries_keys(self, x, memory, q_positions, k_positions):
        return self._queries(x, q_positions), *self._keys_values(memory, k_positions)

    def _output(self, out, x):
        """The output projection of the core's output, gated by ``sigmoid(W_g x)`` where the site has a gate."""
        if self.gate is not None:
            gate = self.gate(x)
            out = out * jax.nn.sigmoid(gate.astype(computation_dtype(gate))).reshape(out.shape)
        return self.out(out.astype(x.dtype))

    def __call__(
        self,
        x: Array,
        memory: Array | None = None,
        *,
        key_mask: Array,
        q_positions: Array,
        k_positions: Array,
        segment_ids: Array | None = None,
    ) -> Array:
        """Attention over a whole sequence (training, teacher forcing, encoding).

        Args:
          x: ``[batch, q_len, d_model]`` queries' inputs.
          memory: ``[batch, kv_len, d_model]`` for cross-attention; None for self-attention.
          key_mask: ``[batch, kv_len]`` boolean, False for padding keys.
          q_positions, k_positions: ``[batch, q_len]`` and ``[batch, kv_len]`` integer positions.
          segment_ids: ``[batch, q_len]`` integers (self-attention): packed sequences, each attended as if alone
            (:mod:`rfa.attention.segments`); None: one sequence per row.
        """
        if segment_ids is not None and memory is not None:
            raise InputError("segment_ids (packed sequences) are for self-attention, not cross-attention.")
        q, k, v = self._queries_keys(x, x if memory is None else memory, q_positions, k_positions)
        if hasattr(self, "__captures__"):  # inside nnx.capture (sown outside, the values would stay on the module)
            self.sow(AttentionInputs, "inputs", (q, k, v, key_mask))
        return self._output(
            self.core(
                q, k, v, x, key_mask=key_mask, q_positions=q_positions, k_positions=k_positions, segment_ids=segment_ids
            ),
            x,
        )

    # Decoding.

    def init_cache(self, batch: int, max_length: int):
        """The empty self-attention cache: keys/values in the model's dtype (exact) or the recurrent state."""
        return self.core.init_cache(batch, max_length)

    def prefill(self, x: Array, *, key_mask: Array, positions: Array, max_length: int):
        """Causal self-attention over a whole prompt, returning the cache :meth:`decode_step` continues.

        One parallel pass (the same as :meth:`__call__`) gives the outputs and the cache: the keys and
        values in the first ``prompt_len`` slots (exact), or the recurrent state
        ``Σ_j φ(k_j)[v_j, 1]ᵀ`` that the same causal pass returns (``return_state=True`` of
        :func:`rfa.kernelized_attention`; Katharopoulos et al., "Transformers are RNNs", ICML 2020, Sec. 3.4).

        Args:
          x: ``[batch, prompt_len, d_model]``.
          key_mask: ``[batch, prompt_len]`` boolean, False for padding tokens (left out of the cache).
          positions: ``[batch, prompt_len]`` integer positions.
          max_length: cache slots, ``>= prompt_len`` (the prompt plus every token to decode).

        Returns:
          ``(y [batch, prompt_len, d_model], cache)``.

        Example:
          >>> from rfa.layers.kernelized import KernelizedCore, KernelizedOptions
          >>> attention = AttentionSite(SiteWidths(32, 4), KernelizedOptions(num_features=16), core=KernelizedCore,
          ...                           causal=True, cross=False, rngs=nnx.Rngs(0))
          >>> x, positions = jnp.ones((2, 5, 32)), jnp.broadcast_to(jnp.arange(5), (2, 5))
          >>> y, cache = attention.prefill(x, key_mask=jnp.ones((2, 5), bool), positions=positions, max_length=64)
          >>> y.shape, cache.kv.shape  # the recurrent state (S, z) after the 5 tokens: [batch, heads, F, d_v + 1]
          ((2, 5, 32), (2, 4, 16, 9))
        """
        q, k, v = self._queries_keys(x, x, positions, positions)
        out, cache = self.core.prefill(q, k, v, x, key_mask=key_mask, positions=positions, max_length=max_length)
        return self._output(out, x), cache

    def decode_step(self, x: Array, cache, position: Array, keep: Array):
        """One token of causal self-attention: ``x [batch, d_model]`` at ``position`` -> ``(y, cache)``.

        ``keep [batch]`` is False for a padding token (its key and value are left out).
        """
        positions = jnp.broadcast_to(position, x.shape[:1])[:, None]
        q, k, v = self._queries_keys(x[:, None], x[:, None], positions, positions)
        out, cache = self.core.decode(q, k, v, x[:, None], cache, position=position, keep=keep)
        return self._output(out, x), cache

    def prepare_memory(self, memory: Array, key_mask: Array):
        """Cross-attention's encoder side, computed once: keys/values (exact), projected ones (linformer) or
        the state ``(S, z)`` (kernelized)."""
        positions = jnp.broadcast_to(jnp.arange(memory.shape[1]), key_mask.shape)
        return self.core.prepare_memory(*self._keys_values(memory, positions), key_mask)

    def attend_memory(self, x: Array, prepared, position: Array) -> Array:
        """Cross-attention of one decoder token ``x [batch, d_model]`` to :meth:`prepare_memory`'s result."""
        q = self._queries(x[:, None], jnp.broadcast_to(position, x.shape[:1])[:, None])
        return self._output(self.core.attend_memory(q, prepared), x)
