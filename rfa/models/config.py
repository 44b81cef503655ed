"""The frozen configuration of the Transformer models (its named presets: :mod:`rfa.models.presets`).

Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (the ``base`` preset, Table 3);
the attention at each site (encoder self-attention, masked decoder self-attention,
cross-attention) is chosen independently: exact softmax or a registered random-feature map.
"""

from __future__ import annotations

import dataclasses
import warnings

from rfa._validation import InputError, InputTypeError
from rfa.models.cores import attention_kinds, core_class
from rfa.models.delta_rule_options import DeltaRuleOptions
from rfa.random_features.feature_maps import registered_estimators
from rfa.random_features.projections import PROJECTION_KINDS, ROW_SCALINGS

POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "relative", "rotary")
NORMS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu")
POOLINGS = ("mean", "cls")
DTYPES = ("float32", "bfloat16", "float16")


_REGISTER_YOURS = "Register your own with rfa.register_estimator; from a command, in a module listed in config.modules."
GATES = ("head", "feature")  # what a gate decays: the state of a head, or each feature's row of it


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """The attention of one site.

    Attributes:
      kind: ``"softmax"`` (exact), ``"linformer"`` (keys and values projected along the length) or a
        registered feature-map name (``"positive"``, ``"oprf"``, ``"taylor"``, ``"rfa"``, ``"hedgehog"``, ...);
        see :mod:`rfa.models.cores`.
      num_features: m, random vectors of the projection (kernelized kinds with a projection); Hedgehog's
        feature dimension d'; Linformer's projected length k.
      projection_kind: how the rows of the projection W are drawn, a kind of ``rfa.sample_projection``
        (``"orthogonal"``, ``"iid"``, ``"simplex"`` or a registered one). ``projection=`` is its 0.2 name, accepted
        by the constructor for one release.
      scaling: row norms, ``"chi"`` or ``"sqrt_d"``.
      chunk_size: chunk length of the causal kernelized form.
      feature_params: scalar feature-map parameters as ``((name, value), ...)``, e.g.
        ``(("phi_sq", 2.0),)`` for oprf, which needs it fixed at causal and decoding sites.
      redraw_every: the redraw policy: a new projection every this many training steps
        (:func:`rfa.models.redraw_projections` with ``step=``); 0 keeps the first draw.
      gated: (kernelized, causal sites) decay the state by a learned gate per token and head,
        ``g_t = sigmoid(wᵀx_t + b)``; with ``kind="rfa"`` this is gated RFA (Peng et al., ICLR 2021).
      gate: what a gate decays: ``"head"`` (one gate per token and head) or ``"feature"`` (one per token, head
        and feature of the map, data-dependent: gated linear attention, Yang et al., ICML 2024).
      qk_map: (the delta rule) the map of queries and keys: None, the papers' (SiLU, then L2 normalization), or a
        registered estimator with fixed parameters, whose features are L2-normalized (the kernelized delta rule,
        :func:`rfa.attention.delta_rule.normalized_features`; m = ``num_features``).
      num_heads: the site's heads (None: the model's ``num_heads``); a head is ``d_model / num_heads`` wide (the delta
        rule's: its ``delta_rule.head_dim``). Hybrid stacks give each layer its own.
      num_kv_heads: (exact and kernelized sites) grouped-query attention: key/value heads, a divisor of the
        site's heads, each shared by a group of query heads (Ainslie et al., "GQA", EMNLP 2023). None: one per head.
      output_gate: (exact and kernelized sites) the attention's output times ``sigmoid(W_g x)`` per head and
        channel, before the output projection (gated attention, as Qwen3-Next's full-attention layers; Qiu et al.,
        "Gated Attention for Large Language Models", 2025).
      rope_base: the rotary base of the site's positions (``positional="rotary"``).
      delta_rule: (the delta rule) its layer's options, fla's (:class:`~rfa.models.DeltaRuleOptions`:
        head sizes, grouped value heads, β, the gate, the short convolution, the q/k activation and norm).
    """

    kind: str = "softmax"
    num_features: int = 256
    projection_kind: str = "orthogonal"
    scaling: str = "chi"
    chunk_size: int = 64
    feature_params: tuple[tuple[str, float], ...] = ()
    redraw_every: int = 0
    gated: bool = False
    gate: str = "head"
    qk_map: str | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    output_gate: bool = False
    rope_base: float = 10000.0
    delta_rule: DeltaRuleOptions = dataclasses.field(default_factory=DeltaRuleOptions)
    projection: dataclasses.InitVar[str | None] = None  # the 0.2 name of projection_kind, for one release

    def __post_init__(self, projection: str | None):
        if projection is not None:
            warnings.warn(
                "AttentionConfig(projection=...) is AttentionConfig(projection_kind=...) since rfa 0.3",
                DeprecationWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "projection_kind", projection)
        if self.kind not in attention_kinds():
            raise InputError(
                f"attention kind must be one of {list(attention_kinds())} ('softmax', 'linformer' or a registered "
                f"feature map), got {self.kind!r}. {_REGISTER_YOURS}"
            )
        if not isinstance(self.gated, bool):
            raise InputTypeError(f"AttentionConfig.gated must be a bool, got {self.gated!r}.")
        if self.gate not in GATES:
            raise InputError(f"AttentionConfig.gate must be one of {list(GATES)}, got {self.gate!r}.")
        if self.qk_map is not None and self.qk_map not in registered_estimators():
            raise InputError(
                f"AttentionConfig.qk_map must be None or a registered estimator {list(registered_estimators())}, "
                f"got {self.qk_map!r}. {_REGISTER_YOURS}"
            )
        for name in ("num_heads", "num_kv_heads"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"AttentionConfig.{name} must be None or an int >= 1, got {value!r}.")
        if not isinstance(self.output_gate, bool):
            raise InputTypeError(f"AttentionConfig.output_gate must be a bool, got {self.output_gate!r}.")
        if isinstance(self.rope_base, bool) or not isinstance(self.rope_base, (int, float)) or self.rope_base <= 1:
            raise InputError(f"AttentionConfig.rope_base must be a number > 1, got {self.rope_base!r}.")
        owns = core_class(self.kind).owns_projections
        if owns and (self.num_kv_heads is not None or self.output_gate):
            raise InputError(
                f"AttentionConfig: {self.kind!r} has its own layer; num_kv_heads and output_gate are for the exact "
                "and kernelized sites (its grouped value heads and gate: delta_rule=DeltaRuleOptions(num_v_heads=, "
                "use_gate=))."
            )
        if not isinstance(self.delta_rule, DeltaRuleOptions):
            raise InputTypeError(f"AttentionConfig.delta_rule must be a DeltaRuleOptions, got {self.delta_rule!r}.")
        if self.delta_rule != DeltaRuleOptions() and not owns:
            raise InputError(
                f"AttentionConfig.delta_rule sets the options of the delta rule's layer; kind {self.kind!r} has none."
            )
        if self.projection_kind not in PROJECTION_KINDS or self.scaling not in ROW_SCALINGS:
            raise InputError(
                f"projection_kind must be one of {list(PROJECTION_KINDS)} and scaling one of {list(ROW_SCALINGS)}, "
                f"got {self.projection_kind!r} and {self.scaling!r}."
            )
        for name, value in (("num_features", self.num_features), ("chunk_size", self.chunk_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"AttentionConfig.{name} must be an int >= 1, got {value!r}.")
        if isinstance(self.redraw_every, bool) or not isinstance(self.redraw_every, int) or self.redraw_every < 0:
            raise InputError(f"AttentionConfig.redraw_every must be an int >= 0 (0: never), got {self.redraw_every!r}.")

    @property
    def params(self) -> dict:
        return dict(self.feature_params)


def _check_int(config, name: str, minimum: int) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{type(config).__name__}.{name} must be an int >= {minimum}, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class SiteWidths:
    """What an attention core reads of its model at one site (:mod:`rfa.models.cores`): the site's widths, dtype and
    positions, and the mesh axis that splits the sequence. A model's come from :meth:`EncoderConfig.at_site`; a
    drop-in layer (``rfa.nnx.GatedLinearAttention``) makes its own from its arguments.

    Example:
      >>> SiteWidths(d_model=32, num_heads=4).head_dim
      8
    """

    d_model: int
    num_heads: int
    dtype: str = "float32"
    positional: str = "sinusoidal"
    sequence_axis: str | None = None
    max_length: int | None = None
    relative_buckets: int = 32
    relative_max_distance: int = 128

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


@dataclasses.dataclass(frozen=True)
class EncoderConfig:
    """The widths, depth and attention of a Transformer encoder stack, apart from any vocabulary.

    Every model's encoder is built from one: the text models' (:class:`TransformerConfig` extends it with
    the vocabulary and the decoder), the Vision Transformer's, Swin's stages and the forecaster's.

    Attributes:
      d_model, num_heads, mlp_dim: widths; ``d_model`` must be divisible by ``num_heads``.
      num_encoder_layers: depth.
      dropout_rate: on embeddings and sub-layer outputs (the paper's P_drop).
      activation: MLP nonlinearity, ``"relu"`` (paper) or ``"gelu"``.
      norm: ``"post"`` (paper: LayerNorm(x + sublayer(x))) or ``"pre"`` (x + sublayer(LayerNorm(x))).
      positional: ``"sinusoidal"`` (paper), ``"learned"`` absolute, ``"relative"`` (bucketed bias
        on the logits: exact softmax only) or ``"rotary"`` (applied to q and k before any
        feature map, so kernelized attention can use it).
      max_length: longest sequence (learned positions, Linformer's projections, decoding caches).
      relative_buckets: the number of buckets of the relative bias (T5-style).
      relative_max_distance: the distance from which the relative bias's buckets are all the last one.
      dtype: computation dtype; parameters are float32.
      encoder_attention: the attention of the encoder's self-attention sites: one :class:`AttentionConfig` for
        every layer, or a tuple of them cycled over the layers (a hybrid stack: layer i takes entry
        ``i mod len``; :meth:`layer_attention`).
      sequence_axis: the mesh axis that splits the sequence in training (``rfa.train``'s ``"sequence"``);
        where a mesh with that axis is set (``jax.set_mesh``), kernelized sites run sequence-parallel
        over it (:func:`rfa.attention.sequence_parallel_attention`) and the other layers are split by XLA
        along the length. None, or no such axis in the mesh: nothing is split. It changes no parameter.

    Example:
      >>> EncoderConfig(d_model=64, num_heads=4, encoder_attention=AttentionConfig("positive", 32)).head_dim
      16
    """

    d_model: int = 512
    num_heads: int = 8
    mlp_dim: int = 2048
    num_encoder_layers: int = 6
    dropout_rate: float = 0.1
    activation: str = "relu"
    norm: str = "post"
    positional: str = "sinusoidal"
    max_length: int = 512
    relative_buckets: int = 32
    relative_max_distance: int = 128
    dtype: str = "float32"
    encoder_attention: AttentionConfig | tuple[AttentionConfig, ...] = AttentionConfig()
    sequence_axis: str | None = None

    # (site, causal, decoded with a state: its map's parameters cannot come from the whole sequence)
    SITES = (("encoder_attention", False, False),)

    def __post_init__(self):
        for name in ("d_model", "num_heads", "mlp_dim", "max_length", "relative_buckets", "relative_max_distance"):
            _check_int(self, name, 1)
        _check_int(self, "num_encoder_layers", 0)
        if self.d_model % self.num_heads:
            raise InputError(
                f"d_model = {self.d_model} is not divisible by num_heads = {self.num_heads}: each head gets "
                "d_model / num_heads dimensions."
            )
        choices = {"activation": ACTIVATIONS, "norm": NORMS, "positional": POSITIONAL_ENCODINGS, "dtype": DTYPES}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                value = getattr(self, name)
                raise InputError(f"{type(self).__name__}.{name} must be one of {list(allowed)}, got {value!r}.")
        relative = self.positional == "relative"
        if relative and (self.relative_buckets < 4 or self.relative_max_distance < self.relative_buckets):
            raise InputError(
                "relative positions need relative_buckets >= 4 and relative_max_distance >= relative_buckets, got "
                f"{self.relative_buckets} and {self.relative_max_distance}."
            )
        if not 0 <= self.dropout_rate < 1:
            raise InputError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}.")
        if self.sequence_axis is not None and not (isinstance(self.sequence_axis, str) and self.sequence_axis):
            raise InputTypeError(
                f"{type(self).__name__}.sequence_axis must be a mesh axis name or None, got {self.sequence_axis!r}."
            )
        if self.positional == "rotary" and self.head_dim % 2:
            raise InputError(f"rotary positions need an even head dimension, got {self.head_dim}.")
        for site, causal, stateful in self.SITES:
            value = getattr(self, site)
            pattern = value if isinstance(value, tuple) else (value,)
            if not pattern or not all(isinstance(attention, AttentionConfig) for attention in pattern):
                raise InputTypeError(
                    f"{site} must be an AttentionConfig or a non-empty tuple of them (one per layer, cycled), got "
                    f"{value!r}."
                )
            layers = self.num_layers(site)
            if layers and len(pattern) > layers:
                raise InputError(
                    f"{site} gives {len(pattern)} layers' attention for a stack of {layers}: the pattern is cycled "
                    "over the layers, so the layers past the stack's would be dropped. Give one entry per layer, or "
                    "a shorter pattern to repeat."
                )
            for attention in pattern:
                core = core_class(attention.kind)
                heads = attention.num_heads or self.num_heads
                if not core.owns_projections and (self.d_model % heads or heads % (attention.num_kv_heads or heads)):
                    raise InputError(
                        f"{site}: {heads} heads must divide d_model = {self.d_model}, and num_kv_heads = "
                        f"{attention.num_kv_heads} must divide the heads."
                    )
                if attention.qk_map is not None and not core.takes_qk_map:
                    raise InputError(
                        f"{site}: qk_map is the delta rule's map of q and k; {attention.kind!r} takes none."
                    )
                core.check_site(site, attention, self.at_site(attention), causal=causal, stateful=stateful)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def num_layers(self, site: str) -> int:
        """The depth of the stack whose layers hold ``site``."""
        return self.num_encoder_layers

    def at_site(self, attention: AttentionConfig) -> SiteWidths:
        """What a site of ``attention`` reads of the config: ``num_heads`` (and so ``head_dim``) the site's own.

        Example:
          >>> config = rfa.models.preset("tiny", vocab_size=50)
          >>> config.at_site(AttentionConfig(num_heads=2)).head_dim, config.head_dim
          (16, 8)
        """
        return SiteWidths(
            d_model=self.d_model,
            num_heads=attention.num_heads or self.num_heads,
            dtype=self.dtype,
            positional=self.positional,
            sequence_axis=self.sequence_axis,
            max_length=self.max_length,
            relative_buckets=self.relative_buckets,
            relative_max_distance=self.relative_max_distance,
        )

    def layer_attention(self, site: str, layer: int) -> AttentionConfig:
        """The attention of layer ``layer`` (from 0) at ``site``: the site's config, or its pattern's entry
        ``layer mod len(pattern)`` (a hybrid stack).

        Example:
          >>> sites = (AttentionConfig("gated_deltanet"),) * 3 + (AttentionConfig("softmax"),)  # Qwen3-Next's 3:1
          >>> config = rfa.models.preset("tiny", vocab_size=50, num_decoder_layers=8, decoder_attention=sites)
          >>> [config.layer_attention("decoder_attention", i).kind for i in range(4, 8)]
          ['gated_deltanet', 'gated_deltanet', 'gated_deltanet', 'softmax']
        """
        value = getattr(self, site)
        return value[layer % len(value)] if isinstance(value, tuple) else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class TransformerConfig(EncoderConfig):
    """Hyperparameters of :class:`~rfa.models.EncoderDecoder`, :class:`~rfa.models.Decoder` and
    :class:`~rfa.models.Encoder`: an :class:`EncoderConfig` with a vocabulary, a decoder and a classifier. The
    fields not listed below are :class:`EncoderConfig`'s.

    Attributes:
      vocab_size: input (source) vocabulary; token 0 is padding (``pad_id``).
      target_vocab_size: output vocabulary of the encoder-decoder (default: ``vocab_size``).
      num_classes: outputs of the encoder classifier.
      num_decoder_layers: the decoder's depth.
      cross_attention_rotary: with ``positional="rotary"``, also rotate cross-attention's queries
        (by target position) and keys (by source position). Off by default: target and source
        positions are unrelated, so their offset carries no meaning; the self-attention sites
        are rotated either way. True needs ``positional="rotary"``.
      pooling: encoder classifier pooling, ``"mean"`` over unpadded tokens or ``"cls"`` (first token).
      pad_id: the padding token.
      decoder_attention: the attention of the decoder's self-attention sites: one :class:`AttentionConfig` or a
        tuple cycled over the layers (a hybrid stack, e.g. three ``"gated_deltanet"`` layers to one
        ``"softmax"``, Qwen3-Next's ratio).
      cross_attention: the attention of the decoder's cross-attention sites, in the same form.
    """

    vocab_size: int
    target_vocab_size: int | None = None
    num_classes: int = 2
    num_decoder_layers: int = 6
    cross_attention_rotary: bool = False
    pooling: str = "mean"
    pad_id: int = 0
    decoder_attention: AttentionConfig | tuple[AttentionConfig, ...] = AttentionConfig()
    cross_attention: AttentionConfig | tuple[AttentionConfig, ...] = AttentionConfig()

    SITES = (("encoder_attention", False, False), ("decoder_attention", True, True), ("cross_attention", False, True))

    def __post_init__(self):
        for name in ("vocab_size", "num_classes"):
            _check_int(self, name, 1)
        _check_int(self, "num_decoder_layers", 0)
        if self.pooling not in POOLINGS:
            raise InputError(f"TransformerConfig.pooling must be one of {list(POOLINGS)}, got {self.pooling!r}.")
        bad_target = self.target_vocab_size is not None and self.target_vocab_size < 1
        if not 0 <= self.pad_id < self.vocab_size or bad_target:
            raise InputError(
                f"pad_id must be a token of the vocabulary [0, {self.vocab_size}) and target_vocab_size None or >= 1, "
                f"got pad_id={self.pad_id} and target_vocab_size={self.target_vocab_size}."
            )
        if not isinstance(self.cross_attention_rotary, bool):
            raise InputTypeError(
                f"TransformerConfig.cross_attention_rotary must be a bool, got {self.cross_attention_rotary!r}."
            )
        if self.cross_attention_rotary and self.positional != "rotary":
            raise InputError(
                f"cross_attention_rotary=True rotates q and k by their positions, which needs positional='rotary', "
                f"got positional={self.positional!r}."
            )
        super().__post_init__()

    def num_layers(self, site: str) -> int:
        return self.num_encoder_layers if site == "encoder_attention" else self.num_decoder_layers

    @property
    def output_vocab_size(self) -> int:
        return self.target_vocab_size or self.vocab_size
