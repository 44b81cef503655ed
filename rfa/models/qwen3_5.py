"""Qwen3.5's text decoder (Qwen Team, "Qwen3.5", 2026; Hugging Face's ``Qwen3_5ForCausalLM``, ``model_type``
``qwen3_5_text``), a config of rfa's :class:`~rfa.models.causal_lm.CausalLM`: Gated DeltaNet layers (Yang et al.,
"Gated Delta Networks", ICLR 2025) and gated softmax attention in the pattern of ``layer_types`` (three to one).

- **The linear layers** are rfa's ``gated_deltanet`` kind (flash-linear-attention's ``GatedDeltaNet``): grouped value
  heads, a short convolution with SiLU over the queries, keys and values (the checkpoint's one depthwise ``conv1d``
  over ``[q | k | v]``, split), the gated RMSNorm over a value head. The checkpoint fuses ``in_proj_qkv``.
- **The full-attention layers** are softmax attention with grouped-query heads of their own width, a zero-centered
  RMSNorm over each query and key head, partial rotary positions (``partial_rotary_factor``) and a sigmoid output
  gate (Qiu et al., "Gated Attention for Large Language Models", 2025), whose projection the checkpoint fuses with
  the queries' per head (``q_proj`` is twice as wide).
- **The norms** of the layers and the final one are zero-centered: ``x · (1 + w)``.

``attention`` and ``linear_attention`` put other kinds at the two layer types, on the checkpoint's projections.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from rfa._validation import InputError, InputTypeError
from rfa.layers.delta_rule.options import DeltaRuleOptions
from rfa.layers.kinds import check_int
from rfa.models import pretrained
from rfa.models.causal_lm import CausalLMConfig
from rfa.models.qwen3 import QwenConfig, attention_site, attention_tensors, decoder_config, decoder_tensors
from rfa.models.site import Site

LAYER_TYPES = ("linear_attention", "full_attention")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Qwen3_5Config(QwenConfig):  # noqa: N801 (Hugging Face's name)
    """A Qwen3.5 text decoder's hyperparameters (``Qwen3_5TextConfig``): :class:`~rfa.models.qwen3.QwenConfig`'s, for
    its full-attention layers, and these.

    Attributes:
      layer_types: each layer's ``"linear_attention"`` or ``"full_attention"`` (None: every fourth full).
      partial_rotary_factor: the share of each full-attention head that rotary positions rotate.
      linear_num_key_heads, linear_num_value_heads, linear_key_head_dim, linear_value_head_dim: the Gated DeltaNet
        layers' heads.
      linear_conv_kernel_dim: their convolution's taps.
      linear_attention: the kind at the linear layers: ``gated_deltanet``, the checkpoint's.

    Example:
      >>> config = Qwen3_5Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
      ...                        num_attention_heads=4, num_key_value_heads=2, head_dim=16)
      >>> [site.kind for site in config.lm.sites]
      ['gated_deltanet', 'gated_deltanet', 'gated_deltanet', 'softmax']
    """

    layer_types: tuple[str, ...] | None = None
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 16
    linear_value_head_dim: int = 16
    linear_conv_kernel_dim: int = 4
    rope_theta: float = 10_000_000.0
    partial_rotary_factor: float = 0.25
    max_position_embeddings: int = 32768
    linear_attention: Site = dataclasses.field(default_factory=lambda: Site("gated_deltanet"))

    HF_ABSENT: ClassVar[frozenset[str]] = frozenset()  # fields a subclass has that its config.json does not

    def __post_init__(self):
        for name in ("num_hidden_layers", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim"):
            check_int(self, name)
        if self.layer_types is None:  # transformers' default: every fourth layer full attention
            types = tuple(LAYER_TYPES[(i + 1) % 4 == 0] for i in range(self.num_hidden_layers))
            object.__setattr__(self, "layer_types", types)
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if len(self.layer_types) != self.num_hidden_layers or set(self.layer_types) - set(LAYER_TYPES):
            raise InputError(
                f"layer_types must give each of the {self.num_hidden_layers} layers one of {list(LAYER_TYPES)}, got "
                f"{list(self.layer_types)}."
            )
        if not isinstance(self.linear_attention, Site):
            raise InputTypeError(
                f"Qwen3_5Config.linear_attention must be an rfa.models.Site, got {self.linear_attention!r}."
            )
        super().__post_init__()

    @property
    def full_site(self) -> Site:
        """``attention`` with the checkpoint's heads, zero-centered q/k norms, output gate and partial rotary."""
        return attention_site(
            self,
            "attention",
            qk_norm="zero_centered",
            output_gate=True,
            rotary_fraction=float(self.partial_rotary_factor),
        )

    @property
    def linear_site(self) -> Site:
        """``linear_attention`` with the checkpoint's Gated DeltaNet heads, convolution and norm."""
        if not isinstance(self.linear_attention.options, DeltaRuleOptions):
            return self.linear_attention.replace(num_heads=self.linear_num_key_heads)
        return self.linear_attention.replace(
            num_heads=self.linear_num_key_heads,
            head_dim=self.linear_key_head_dim,
            num_v_heads=self.linear_num_value_heads,
            expand_v=self.linear_value_head_dim / self.linear_key_head_dim,
            conv_size=self.linear_conv_kernel_dim,
            norm_eps=self.rms_norm_eps,
        )

    @property
    def lm(self) -> CausalLMConfig:
        """The decoder this config describes."""
        sites = {"full_attention": self.full_site, "linear_attention": self.linear_site}
        return decoder_config(self, tuple(sites[kind] for kind in self.layer_types), zero_centered_norms=True)


# Hugging Face's layout (rfa.models.pretrained).

_OWN = {"pad_id", "rope_theta", "partial_rotary_factor", "dtype", "attention", "linear_attention"}
_MROPE = ("mrope_section", "mrope_interleaved")  # the vision grids' rotary layout: text positions are one grid


def _same_name(config_class: type) -> list[str]:
    """The fields of ``config_class`` that ``config.json`` names as it does (none of its ``HF_ABSENT``)."""
    return sorted({f.name for f in dataclasses.fields(config_class)} - _OWN - config_class.HF_ABSENT)


def read_hf(hf: dict, config_class: type, family: str, *, inert: frozenset = frozenset(), **fields):
    """``config_class`` (:class:`Qwen3_5Config` or a subclass) of a ``config.json`` dict, with ``fields`` over it;
    refuses what it does not reproduce (``inert``: the family's fields without effect on its outputs)."""
    same = _same_name(config_class)
    read = {*same, "rope_parameters", "rope_theta", "rope_scaling", "partial_rotary_factor", "pad_token_id"}
    pretrained.refuse_unknown(hf, read, pretrained.INERT | inert, family)
    theta, fraction = pretrained.default_rope(hf, family, default_theta=10_000_000.0, inert=_MROPE)
    values = {name: hf[name] for name in same if name in hf}
    return config_class(
        **values, rope_theta=theta, partial_rotary_factor=fraction, pad_id=hf.get("pad_token_id"), **fields
    )


def write_hf(config: Qwen3_5Config, model_type: str, architecture: str) -> dict:
    """``config.json``'s dict of ``config`` for transformers' ``architecture``."""
    if (config.attention.kind, config.linear_attention.kind) != ("softmax", "gated_deltanet"):
        raise InputError(f"a {model_type} with other attention kinds is not a checkpoint transformers would run.")
    return {
        "model_type": model_type,
        "architectures": [architecture],
        **{
            name: list(value) if isinstance(value := getattr(config, name), tuple) else value
            for name in _same_name(type(config))
        },
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": config.rope_theta,
            "partial_rotary_factor": config.partial_rotary_factor,
        },
        "pad_token_id": config.pad_id,
        "torch_dtype": "float32",
    }


def config_from_hf(hf: dict, **fields) -> Qwen3_5Config:
    """:class:`Qwen3_5Config` of a ``config.json`` dict (:func:`read_hf`)."""
    return read_hf(hf, Qwen3_5Config, "qwen3_5_text", **fields)


def config_to_hf(config: Qwen3_5Config) -> dict:
    """``config.json``'s dict of ``config``, for ``Qwen3_5ForCausalLM``."""
    return write_hf(config, "qwen3_5_text", "Qwen3_5ForCausalLM")


def _query_and_gate(name: str, ours: tuple, heads: int, head_dim: int, d_model: int) -> pretrained.Tensor:
    """``q_proj.weight`` ``[heads · 2 · head_dim, d_model]``: per head its query's rows, then its gate's."""

    def to_model(w):
        w = w.reshape(heads, 2, head_dim, d_model).transpose(3, 0, 1, 2)  # [d_model, heads, 2, head_dim]
        return w[:, :, 0], w[:, :, 1]

    def to_checkpoint(query, gate):
        return np.stack([query, gate], axis=2).transpose(1, 2, 3, 0).reshape(heads * 2 * head_dim, d_model)

    return pretrained.Tensor(name, (ours + ("query", "kernel"), ours + ("gate", "kernel")), to_model, to_checkpoint)


def linear_attention_tensors(config: Qwen3_5Config, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    """A Gated DeltaNet layer's ``linear_attn.*`` tensors in Qwen3.5's layout (``in_proj_qkv``, ``in_proj_z``,
    ``in_proj_b``, ``in_proj_a``): the queries', keys' and values' fused, each part in turn."""
    T, H = pretrained.Tensor, config.hidden_size
    key, value, heads = _widths(config)
    projections = {
        ours + (name, "kernel"): T.linear(
            f"{hf}in_proj_qkv.weight", ours + (name, "kernel"), inputs=(H,), outputs=(size,)
        )
        for name, size in (("q_proj", key), ("k_proj", key), ("v_proj", value))
    }
    return [
        T.split(f"{hf}in_proj_qkv.weight", projections, sizes=(key, key, value)),
        T.linear(f"{hf}in_proj_z.weight", ours + ("g_proj", "kernel"), inputs=(H,), outputs=(value,)),
        T.linear(f"{hf}in_proj_b.weight", ours + ("b_proj", "kernel"), inputs=(H,), outputs=(heads,)),
        T.linear(f"{hf}in_proj_a.weight", ours + ("a_proj", "kernel"), inputs=(H,), outputs=(heads,)),
    ]


def _widths(config: Qwen3_5Config) -> tuple[int, int, int]:
    """The Gated DeltaNet layers' query/key width, value width and value heads."""
    key = config.linear_num_key_heads * config.linear_key_head_dim
    return key, config.linear_num_value_heads * config.linear_value_head_dim, config.linear_num_value_heads


def tensors(config: Qwen3_5Config, projections=linear_attention_tensors) -> list[pretrained.Tensor]:
    """Every tensor of a Qwen3.5 text checkpoint (or, with its ``projections`` of the linear layers, Qwen3-Next's)
    and its place in the model."""
    T, H, full = pretrained.Tensor, config.hidden_size, config.full_site.options
    key, value, _ = _widths(config)

    def mixer(layer, hf, ours):
        if config.layer_types[layer] == "full_attention":
            query = [_query_and_gate(f"{hf}self_attn.q_proj.weight", ours, full.num_heads, full.head_dim, H)]
            return attention_tensors(hf, ours, full, H, query)
        hf, ours = f"{hf}linear_attn.", ours + ("layer",)
        convolutions = {
            ours + (name, "weight"): pretrained.Tensor.depthwise(f"{hf}conv1d.weight", ours + (name, "weight"))
            for name in ("q_conv1d", "k_conv1d", "v_conv1d")
        }
        return [
            *projections(config, hf, ours),
            T.split(f"{hf}conv1d.weight", convolutions, sizes=(key, key, value)),
            T.same(f"{hf}A_log", ours + ("A_log",)),
            T.same(f"{hf}dt_bias", ours + ("dt_bias",)),
            T.same(f"{hf}norm.weight", ours + ("o_norm", "scale")),
            T.linear(f"{hf}out_proj.weight", ours + ("o_proj", "kernel"), inputs=(value,), outputs=(H,)),
        ]

    return decoder_tensors(config.lm, mixer)


pretrained.register_family(
    pretrained.Family(
        "qwen3_5_text", config_class=Qwen3_5Config, config=config_from_hf, hf_config=config_to_hf, tensors=tensors
    )
)
