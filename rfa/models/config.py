"""The frozen configuration of the Transformer models (its named presets: :mod:`rfa.models.presets`).

Vaswani et al., "Attention Is All You Need", NeurIPS 2017 (the ``base`` preset, Table 3);
the attention at each site (encoder self-attention, masked decoder self-attention,
cross-attention) is chosen independently: a :class:`~rfa.models.site.Site`, a registered kind and its options.
"""

from __future__ import annotations

import dataclasses

from rfa._validation import InputError, InputTypeError
from rfa.layers.kinds import SiteWidths, check_int
from rfa.models.site import Site

POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "relative", "rotary")
NORMS = ("post", "pre")
ACTIVATIONS = ("relu", "gelu")
POOLINGS = ("mean", "cls")
DTYPES = ("float32", "bfloat16", "float16", "float64")


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
      encoder_attention: the attention of the encoder's self-attention sites: one :class:`~rfa.models.Site` for
        every layer, or a tuple of them cycled over the layers (a hybrid stack: layer i takes entry
        ``i mod len``; :meth:`layer_attention`).
      sequence_axis: the mesh axis that splits the sequence in training (``rfa.train``'s ``"sequence"``);
        where a mesh with that axis is set (``jax.set_mesh``), kernelized sites run sequence-parallel
        over it (:func:`rfa.attention.sequence_parallel_attention`) and the other layers are split by XLA
        along the length. None, or no such axis in the mesh: nothing is split. It changes no parameter.

    Example:
      >>> EncoderConfig(d_model=64, num_heads=4, encoder_attention=Site("positive", num_features=32)).head_dim
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
    encoder_attention: Site | tuple[Site, ...] = dataclasses.field(default_factory=Site)
    sequence_axis: str | None = None

    # (site, causal, decoded with a state: its map's parameters cannot come from the whole sequence)
    SITES = (("encoder_attention", False, False),)

    def __post_init__(self):
        for name in ("d_model", "num_heads", "mlp_dim", "max_length", "relative_buckets", "relative_max_distance"):
            check_int(self, name, 1)
        check_int(self, "num_encoder_layers", 0)
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
            if not pattern or not all(isinstance(attention, Site) for attention in pattern):
                raise InputTypeError(
                    f"{site} must be an rfa.models.Site or a non-empty tuple of them (one per layer, cycled), got "
                    f"{value!r}."
                )
            layers = self.num_layers(site)
            if layers and len(pattern) > layers:
                raise InputError(
                    f"{site} gives {len(pattern)} layers' attention for a stack of {layers}: the pattern is cycled "
                    "over the layers, so the layers past the stack's would be dropped. Give one entry per layer, or "
                    "a shorter pattern to repeat."
                )
            role = "causal" if causal else "cross" if site == "cross_attention" else "bidirectional"
            for attention in pattern:
                attention.options.check_site(site, self.at_site(attention), causal=causal, stateful=stateful)
                if not attention.entry.runs(role):
                    raise InputError(
                        f"{site}: kind {attention.kind!r} cannot run {role} attention (it runs "
                        f"{[r for r in ('causal', 'bidirectional', 'cross') if attention.entry.runs(r)]})."
                    )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    def num_layers(self, site: str) -> int:
        """The depth of the stack whose layers hold ``site``."""
        return self.num_encoder_layers

    def at_site(self, attention: Site) -> SiteWidths:
        """What a site of ``attention`` reads of the config: ``num_heads`` (and so ``head_dim``) the site's own.

        Example:
          >>> config = rfa.models.preset("tiny", vocab_size=50)
          >>> config.at_site(Site(num_heads=2)).head_dim, config.head_dim
          (16, 8)
        """
        return SiteWidths(
            d_model=self.d_model,
            num_heads=attention.options.num_heads or self.num_heads,
            dtype=self.dtype,
            positional=self.positional,
            sequence_axis=self.sequence_axis,
            max_length=self.max_length,
            relative_buckets=self.relative_buckets,
            relative_max_distance=self.relative_max_distance,
            cross_rotary=getattr(self, "cross_attention_rotary", False),
        )

    def layer_attention(self, site: str, layer: int) -> Site:
        """The attention of layer ``layer`` (from 0) at ``site``: the site's config, or its pattern's entry
        ``layer mod len(pattern)`` (a hybrid stack).

        Example:
          >>> sites = (Site("gated_deltanet"),) * 3 + (Site("softmax"),)  # Qwen3-Next's 3:1
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
      decoder_attention: the attention of the decoder's self-attention sites: one :class:`~rfa.models.Site` or a
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
    decoder_attention: Site | tuple[Site, ...] = dataclasses.field(default_factory=Site)
    cross_attention: Site | tuple[Site, ...] = dataclasses.field(default_factory=Site)

    SITES = (("encoder_attention", False, False), ("decoder_attention", True, True), ("cross_attention", False, True))

    def __post_init__(self):
        for name in ("vocab_size", "num_classes"):
            check_int(self, name, 1)
        check_int(self, "num_decoder_layers", 0)
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
