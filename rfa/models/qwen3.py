"""Qwen3: the dense decoder of Qwen's Qwen3 checkpoints (Yang et al., "Qwen3 Technical Report", 2025), a config of
rfa's :class:`~rfa.models.causal_lm.CausalLM`, with Hugging Face's ``Qwen3ForCausalLM`` layout
(:mod:`rfa.models.pretrained` loads it).

Each layer's mixer is grouped-query softmax attention with an RMSNorm over each query and key head before the rotary
positions (``q_norm``, ``k_norm``) and heads of their own width (``head_dim``, not ``hidden_size / heads``); the MLP
is SwiGLU. Any kind whose options are heads' options (:class:`~rfa.layers.HeadsOptions`: exact, kernelized with any
registered estimator, the sliding window, ...) can take the checkpoint's attention projections at every layer
(``attention``): a linearization study's starting point.
"""

from __future__ import annotations

import dataclasses

from rfa._validation import InputError, InputTypeError
from rfa.layers.kinds import check_int
from rfa.layers.multi_head import HeadsOptions
from rfa.models import pretrained
from rfa.models.causal_lm import CausalLMConfig
from rfa.models.site import Site

_WIDTHS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class QwenConfig:
    """The fields Qwen's decoders share, under Hugging Face's names: what :func:`attention_site` and
    :func:`decoder_config` read (the families' configs, :class:`Qwen3Config` and ``Qwen3_5Config``, extend it).

    Attributes:
      vocab_size, hidden_size, intermediate_size, num_hidden_layers: widths and depth.
      num_attention_heads, num_key_value_heads, head_dim: query heads, key/value heads (GQA) and a head's width.
      rms_norm_eps: ε of every RMSNorm (the layers', the final one, and the query and key heads').
      rope_theta: the rotary base.
      tie_word_embeddings: the output projection is the embedding's transpose.
      hidden_act: the MLP's activation (:data:`rfa.layers.gated_mlp.ACTIVATIONS`).
      attention_bias: biases on the attention's projections.
      max_position_embeddings: the longest sequence (and decoding cache).
      pad_id: the padding token (left-padded prompts are masked where they hold it); None: no padding.
      dtype: the computation's dtype; parameters are float32 (:func:`rfa.models.pretrained.from_pretrained` casts
        a checkpoint's).
      attention: the kind at the full-attention layers (:class:`~rfa.models.Site`; its head fields are the
        config's): exact softmax, the checkpoint's, by default.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    attention_bias: bool = False
    max_position_embeddings: int = 40960
    pad_id: int | None = None
    dtype: str = "float32"
    attention: Site = dataclasses.field(default_factory=Site)

    def __post_init__(self):
        for name in _WIDTHS:
            check_int(self, name)
        _ = self.lm  # the decoder's own checks: the heads, the activation, the dtype, the padding token


@dataclasses.dataclass(frozen=True, kw_only=True)
class Qwen3Config(QwenConfig):
    """A Qwen3 decoder's hyperparameters (``Qwen3Config``): :class:`QwenConfig`'s, every layer full attention.

    Example:
      >>> Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
      ...             num_attention_heads=4, num_key_value_heads=2, head_dim=16).site.options.head_dim
      16
    """

    @property
    def site(self) -> Site:
        """``attention`` with the checkpoint's heads: their count, width, norms, biases and rotary base."""
        return attention_site(self, "attention", qk_norm="rms")

    @property
    def lm(self) -> CausalLMConfig:
        """The decoder this config describes."""
        return decoder_config(self, (self.site,) * self.num_hidden_layers)


def attention_site(config, name: str, **layout) -> Site:
    """The site ``getattr(config, name)`` of a Qwen config, with its full-attention heads (their count, width,
    query and key norms' ε, biases, rotary base) and ``layout``; refuses a kind that has no heads' options to take
    the checkpoint's projections."""
    attention = getattr(config, name)
    if not isinstance(attention, Site):
        raise InputTypeError(f"{type(config).__name__}.{name} must be an rfa.models.Site, got {attention!r}.")
    if not isinstance(attention.options, HeadsOptions):
        raise InputError(
            f"{type(config).__name__}.{name}: kind {attention.kind!r} has no heads' options (HeadsOptions) to take "
            "the checkpoint's query, key, value and output projections; choose a kind that projects around a core "
            "(softmax, kernelized, sliding_window, ...)."
        )
    return attention.replace(
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        qk_norm_eps=config.rms_norm_eps,
        bias=config.attention_bias,
        rope_base=float(config.rope_theta),
        **layout,
    )


def decoder_config(config, sites: tuple[Site, ...], **fields) -> CausalLMConfig:
    """The :class:`CausalLMConfig` of a Qwen config (Hugging Face's names) with each layer's site."""
    return CausalLMConfig(
        vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        mlp_dim=config.intermediate_size,
        sites=sites,
        norm_eps=config.rms_norm_eps,
        tie_embeddings=config.tie_word_embeddings,
        activation=config.hidden_act,
        max_length=config.max_position_embeddings,
        pad_id=config.pad_id,
        dtype=config.dtype,
        **fields,
    )


# Hugging Face's layout (rfa.models.pretrained).

_OWN = {"pad_id", "rope_theta", "dtype", "attention"}  # rfa's own fields, or read from other names
_SAME_NAME = sorted({f.name for f in dataclasses.fields(Qwen3Config)} - _OWN)  # config.json's name is the field's
_READ = {
    *_SAME_NAME,
    "rope_theta",
    "rope_parameters",
    "rope_scaling",
    "partial_rotary_factor",
    "pad_token_id",
    "use_sliding_window",
    "layer_types",
}
_INERT = pretrained.INERT | {"sliding_window", "max_window_layers"}


def config_from_hf(hf: dict, **fields) -> Qwen3Config:
    """:class:`Qwen3Config` of a ``config.json`` dict, with ``fields`` over it; refuses what it does not reproduce."""
    pretrained.refuse_unknown(hf, _READ, _INERT, "qwen3")
    if hf.get("use_sliding_window") or any(kind != "full_attention" for kind in hf.get("layer_types") or ()):
        raise InputError("qwen3: sliding-window layers (use_sliding_window, layer_types) are not reproduced.")
    values = {name: hf[name] for name in _SAME_NAME if name in hf}
    theta, fraction = pretrained.default_rope(hf, "qwen3", default_theta=1_000_000.0)
    if fraction != 1.0:
        raise InputError(f"qwen3: partial_rotary_factor = {fraction} is not Qwen3's (Qwen3.5's is qwen3_5_text).")
    return Qwen3Config(**values, rope_theta=theta, pad_id=hf.get("pad_token_id"), **fields)


def config_to_hf(config: Qwen3Config) -> dict:
    """``config.json``'s dict of ``config`` (transformers 5's names), for ``Qwen3ForCausalLM``."""
    if config.attention.kind != "softmax":
        raise InputError(
            f"a Qwen3 with {config.attention.kind!r} attention is not a Qwen3 checkpoint: transformers would run it "
            "with softmax attention."
        )
    return {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        **{name: getattr(config, name) for name in _SAME_NAME},
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "pad_token_id": config.pad_id,
        "use_sliding_window": False,
        "torch_dtype": "float32",
    }


def decoder_tensors(lm: CausalLMConfig, mixer, mlp=None) -> list[pretrained.Tensor]:
    """The tensors of a Llama-style checkpoint of ``lm``: the embedding, the final norm, the output projection
    (unless tied), each layer's norms, its mixer's, ``mixer(layer, hf_prefix, path)``, and its MLP's,
    ``mlp(layer, hf_prefix, path)`` (default: Qwen's ``mlp.*``, a SwiGLU or a sparse block)."""
    T, H, inner = pretrained.Tensor, lm.d_model, lm.mlp_dim
    found = [
        T.same("model.embed_tokens.weight", ("embed", "embedding")),
        T.same("model.norm.weight", ("norm", "weight")),
    ]
    if not lm.tie_embeddings:
        found.append(T.linear("lm_head.weight", ("lm_head", "kernel"), inputs=(H,), outputs=(lm.vocab_size,)))
    for i in range(len(lm.sites)):
        hf, ours = f"model.layers.{i}.", ("layers", str(i))
        found += [
            T.same(f"{hf}input_layernorm.weight", ours + ("input_norm", "weight")),
            T.same(f"{hf}post_attention_layernorm.weight", ours + ("post_attention_norm", "weight")),
            *mixer(i, hf, ours + ("attention",)),
        ]
        if mlp is not None:
            found += mlp(i, hf, ours + ("mlp",))
        elif i in lm.sparse_layers:
            found += experts_tensors(lm, f"{hf}mlp.", ours + ("mlp",))
        else:
            found += mlp_tensors(f"{hf}mlp.", ours + ("mlp",), H, inner)
    return found


def mlp_tensors(hf: str, ours: tuple, d_model: int, inner: int, index: int | None = None) -> list[pretrained.Tensor]:
    """A SwiGLU MLP's ``gate_proj``, ``up_proj`` and ``down_proj`` (with ``index``: one expert's slices)."""
    widths = {"gate": (d_model, inner), "up": (d_model, inner), "down": (inner, d_model)}
    return [
        pretrained.Tensor.linear(
            f"{hf}{name}_proj.weight",
            ours + (name, *(() if index is not None else ("kernel",))),
            inputs=(fan_in,),
            outputs=(fan_out,),
            index=index,
        )
        for name, (fan_in, fan_out) in widths.items()
    ]


def experts_tensors(lm: CausalLMConfig, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    """A sparse block's tensors in Qwen's layout (Qwen3-MoE, Qwen3-Next): the router ``gate``, each expert's MLP
    (``experts.{e}.*``: a slice of the stacked ``gate``, ``up`` and ``down``), the shared expert and its gate."""
    T, H, experts = pretrained.Tensor, lm.d_model, lm.experts
    found = [T.linear(f"{hf}gate.weight", ours + ("router",), inputs=(H,), outputs=(experts.num_experts,))]
    for e in range(experts.num_experts):
        found += mlp_tensors(f"{hf}experts.{e}.", ours, H, experts.expert_dim, index=e)
    if experts.shared_dim is not None:
        found += mlp_tensors(f"{hf}shared_expert.", ours + ("shared",), H, experts.shared_dim)
    if experts.shared_gate:
        found.append(
            T.linear(f"{hf}shared_expert_gate.weight", ours + ("shared_gate", "kernel"), inputs=(H,), outputs=(1,))
        )
    return found


def attention_tensors(hf: str, ours: tuple, options: HeadsOptions, d_model: int, query: list) -> list:
    """A full-attention layer's ``self_attn.*`` tensors (``query``: the query projection's, which Qwen3.5 fuses with
    its gate): keys, values, output, their biases where ``options.bias``, and the query and key norms."""
    T, heads, kv, dh = pretrained.Tensor, options.num_heads, options.num_kv_heads, options.head_dim
    found = [*query]
    for name, field in (("k_proj", "key"), ("v_proj", "value")):
        found.append(
            T.linear(f"{hf}self_attn.{name}.weight", ours + (field, "kernel"), inputs=(d_model,), outputs=(kv, dh))
        )
        if options.bias:
            found.append(T.reshaped(f"{hf}self_attn.{name}.bias", ours + (field, "bias"), (kv, dh)))
    found.append(
        T.linear(f"{hf}self_attn.o_proj.weight", ours + ("out", "kernel"), inputs=(heads, dh), outputs=(d_model,))
    )
    if options.bias:
        found.append(T.same(f"{hf}self_attn.o_proj.bias", ours + ("out", "bias")))
    return found + [
        T.same(f"{hf}self_attn.q_norm.weight", ours + ("query_norm", "weight")),
        T.same(f"{hf}self_attn.k_norm.weight", ours + ("key_norm", "weight")),
    ]


def tensors(config: Qwen3Config) -> list[pretrained.Tensor]:
    """Every tensor of a Qwen3 checkpoint and its place in the model."""
    T, options, H = pretrained.Tensor, config.site.options, config.hidden_size

    def mixer(layer, hf, ours):
        shape = (options.num_heads, options.head_dim)
        query = [T.linear(f"{hf}self_attn.q_proj.weight", ours + ("query", "kernel"), inputs=(H,), outputs=shape)]
        if options.bias:
            query.append(T.reshaped(f"{hf}self_attn.q_proj.bias", ours + ("query", "bias"), shape))
        return attention_tensors(hf, ours, options, H, query)

    return decoder_tensors(config.lm, mixer)


pretrained.register_family(
    pretrained.Family("qwen3", config_class=Qwen3Config, config=config_from_hf, hf_config=config_to_hf, tensors=tensors)
)
