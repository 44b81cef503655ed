"""Kimi Linear (Kimi Team, "Kimi Linear: An Expressive, Efficient Attention Architecture", 2025; Hugging Face's
``KimiLinearForCausalLM``, ``model_type`` ``kimi_linear``), a config of rfa's :class:`~rfa.models.causal_lm.CausalLM`:
Kimi Delta Attention layers (rfa's ``kda`` kind) and multi-head latent attention without rotary positions (``mla``,
:mod:`rfa.layers.mla`), three to one, with DeepSeek-V3's mixture of experts at its sparse layers.

- **KDA layers:** separate ``q_proj``, ``k_proj``, ``v_proj`` and their convolutions; the forget gate's low-rank
  ``f_a_proj``/``f_b_proj``, ``A_log`` (``[1, 1, heads, 1]``) and ``dt_bias`` (``[heads · d_k]``); the output gate's
  ``g_a_proj``/``g_b_proj``, which has no bias (``output_gate_bias=False``); a sigmoid-gated RMSNorm.
- **MLA layers:** ``q_proj`` (or ``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``), ``kv_a_proj_with_mqa`` (the latent and
  the key part shared by the heads), ``kv_a_layernorm``, ``kv_b_proj``, ``o_proj``.
- **The sparse blocks** (``block_sparse_moe``): sigmoid scores, the correction bias ``e_score_correction_bias``,
  ``num_expert_group`` groups of which ``topk_group`` are chosen from, ``routed_scaling_factor``; shared experts
  (``num_shared_experts`` of ``moe_intermediate_size`` each) without a gate. The dense layers (``mlp_layer_types``)
  keep the same ``block_sparse_moe`` prefix.
- **The norms** are plain RMSNorms (ε ``rms_norm_eps``; the latents' 1e-6).
"""

from __future__ import annotations

import dataclasses

from rfa._validation import InputError, InputTypeError
from rfa.layers.delta_rule.options import DeltaRuleOptions
from rfa.layers.kinds import check_int
from rfa.layers.mla import MLAOptions
from rfa.layers.moe import ExpertsOptions
from rfa.models import pretrained
from rfa.models.causal_lm import CausalLMConfig
from rfa.models.qwen3 import decoder_tensors, mlp_tensors
from rfa.models.site import Site

LAYER_TYPES = ("linear_attention", "full_attention")
MLP_TYPES = ("dense", "sparse")


@dataclasses.dataclass(frozen=True, kw_only=True)
class KimiLinearConfig:
    """Kimi Linear's hyperparameters, under the names of its ``config.json``.

    Attributes:
      vocab_size, hidden_size, intermediate_size, num_hidden_layers: widths and depth.
      layer_types: each layer's ``"linear_attention"`` (KDA) or ``"full_attention"`` (MLA).
      mlp_layer_types: each layer's ``"dense"`` or ``"sparse"`` MLP.
      num_attention_heads: the MLA layers' heads; ``kv_lora_rank``, ``q_lora_rank``, ``qk_nope_head_dim``,
        ``qk_rope_head_dim``, ``v_head_dim``: their widths (:class:`~rfa.layers.mla.MLAOptions`).
      linear_num_heads, linear_head_dim, linear_conv_kernel_dim: the KDA layers'.
      num_experts, num_experts_per_token, moe_intermediate_size, num_shared_experts: the sparse blocks' experts.
      num_expert_group, topk_group, routed_scaling_factor, moe_renormalize: their router (DeepSeek-V3's).
      rms_norm_eps, tie_word_embeddings, hidden_act: as Qwen3's.
      model_max_length: the longest sequence.
      pad_id: the padding token; dtype: the computation's.
      attention: the kind at the full-attention layers (``mla``, the checkpoint's; its heads are the config's).
      linear_attention: the kind at the KDA layers (``kda``, the checkpoint's).

    Example:
      >>> config = KimiLinearConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
      ...                           num_attention_heads=2, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4,
      ...                           v_head_dim=8, linear_num_heads=2, linear_head_dim=16, num_experts=4,
      ...                           num_experts_per_token=2, moe_intermediate_size=16)
      >>> [site.kind for site in config.lm.sites], config.lm.sparse_layers
      (['kda', 'kda', 'kda', 'mla'], (1, 2, 3))
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    linear_num_heads: int
    linear_head_dim: int
    num_experts: int
    num_experts_per_token: int
    moe_intermediate_size: int
    q_lora_rank: int | None = None
    linear_conv_kernel_dim: int = 4
    layer_types: tuple[str, ...] | None = None
    mlp_layer_types: tuple[str, ...] | None = None
    num_shared_experts: int = 1
    num_expert_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    moe_renormalize: bool = True
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    model_max_length: int = 1048576
    pad_id: int | None = None
    dtype: str = "float32"
    attention: Site = dataclasses.field(default_factory=lambda: Site("mla"))
    linear_attention: Site = dataclasses.field(default_factory=lambda: Site("kda"))

    def __post_init__(self):
        check_int(self, "num_hidden_layers")
        n = self.num_hidden_layers
        defaults = {  # Kimi's: every fourth layer MLA (from the fourth on), the first MLP dense
            "layer_types": tuple(LAYER_TYPES[(i + 1) % 4 == 0] for i in range(n)),
            "mlp_layer_types": tuple(MLP_TYPES[i > 0] for i in range(n)),
        }
        for name, allowed in (("layer_types", LAYER_TYPES), ("mlp_layer_types", MLP_TYPES)):
            value = defaults[name] if getattr(self, name) is None else tuple(getattr(self, name))
            object.__setattr__(self, name, value)
            if len(value) != n or set(value) - set(allowed):
                raise InputError(f"{name} must give each of the {n} layers one of {list(allowed)}, got {list(value)}.")
        for name in ("attention", "linear_attention"):
            if not isinstance(getattr(self, name), Site):
                raise InputTypeError(
                    f"KimiLinearConfig.{name} must be an rfa.models.Site, got {getattr(self, name)!r}."
                )
        _ = self.lm  # the decoder's own checks

    @property
    def full_site(self) -> Site:
        """``attention`` with the checkpoint's MLA widths (for ``mla``) or heads."""
        if not isinstance(self.attention.options, MLAOptions):
            return self.attention.replace(num_heads=self.num_attention_heads)
        return self.attention.replace(
            num_heads=self.num_attention_heads,
            kv_lora_rank=self.kv_lora_rank,
            q_lora_rank=self.q_lora_rank,
            qk_nope_head_dim=self.qk_nope_head_dim,
            qk_rope_head_dim=self.qk_rope_head_dim,
            v_head_dim=self.v_head_dim,
        )

    @property
    def linear_site(self) -> Site:
        """``linear_attention`` with the checkpoint's KDA heads, convolution, norm and gate without a bias."""
        if not isinstance(self.linear_attention.options, DeltaRuleOptions):
            return self.linear_attention.replace(num_heads=self.linear_num_heads)
        return self.linear_attention.replace(
            num_heads=self.linear_num_heads,
            head_dim=self.linear_head_dim,
            conv_size=self.linear_conv_kernel_dim,
            norm_eps=self.rms_norm_eps,
            output_gate_bias=False,
        )

    @property
    def lm(self) -> CausalLMConfig:
        """The decoder this config describes."""
        sites = {"full_attention": self.full_site, "linear_attention": self.linear_site}
        experts = ExpertsOptions(
            num_experts=self.num_experts,
            top_k=self.num_experts_per_token,
            expert_dim=self.moe_intermediate_size,
            norm_topk_prob=self.moe_renormalize,
            shared_dim=self.num_shared_experts * self.moe_intermediate_size or None,
            scoring="sigmoid",
            routed_scaling_factor=float(self.routed_scaling_factor),
            num_groups=self.num_expert_group,
            top_groups=self.topk_group,
        )
        return CausalLMConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            mlp_dim=self.intermediate_size,
            sites=tuple(sites[kind] for kind in self.layer_types),
            experts=experts,
            sparse_layers=tuple(i for i, kind in enumerate(self.mlp_layer_types) if kind == "sparse"),
            norm_eps=self.rms_norm_eps,
            tie_embeddings=self.tie_word_embeddings,
            activation=self.hidden_act,
            max_length=self.model_max_length,
            pad_id=self.pad_id,
            dtype=self.dtype,
        )


# Hugging Face's layout (rfa.models.pretrained).

_OWN = {"pad_id", "dtype", "attention", "linear_attention"}
_SAME_NAME = sorted({f.name for f in dataclasses.fields(KimiLinearConfig)} - _OWN)
_INERT = pretrained.INERT | {"head_dim", "qk_head_dim", "output_router_logits", "pretraining_tp"}
_ALIASES = {  # transformers' attribute names for the same fields
    "max_position_embeddings": "model_max_length",
    "num_local_experts": "num_experts",
    "num_experts_per_tok": "num_experts_per_token",
    "n_shared_experts": "num_shared_experts",
    "n_group": "num_expert_group",
    "norm_topk_prob": "moe_renormalize",
}


def _hub_form(hf: dict) -> dict:
    """The hub's ``config.json`` form read as transformers' saved one: ``linear_attn_config`` (1-indexed
    ``kda_layers`` and ``full_attn_layers``, ``num_heads``, ``head_dim``, ``short_conv_kernel_size``) and
    ``first_k_dense_replace`` as the layer types; ``mla_use_nope`` (true: no rotary positions, what transformers and
    rfa compute)."""
    hf = dict(hf)
    linear = dict(hf.pop("linear_attn_config", None) or {})
    if linear:
        layers = {i - 1: "linear_attention" for i in linear.pop("kda_layers", ())}
        layers |= {i - 1: "full_attention" for i in linear.pop("full_attn_layers", ())}
        if sorted(layers) != list(range(hf.get("num_hidden_layers", len(layers)))):
            raise InputError(f"kimi_linear: linear_attn_config's layers {sorted(layers)} do not cover the stack.")
        hf.setdefault("layer_types", [layers[i] for i in sorted(layers)])
        names = {
            "num_heads": "linear_num_heads",
            "head_dim": "linear_head_dim",
            "short_conv_kernel_size": "linear_conv_kernel_dim",
        }
        for key, name in names.items():
            if key in linear:
                hf.setdefault(name, linear.pop(key))
        if linear:
            raise InputError(f"kimi_linear: linear_attn_config sets {sorted(linear)}, which rfa does not reproduce.")
    if "first_k_dense_replace" in hf:
        k = hf.pop("first_k_dense_replace")
        hf.setdefault("mlp_layer_types", ["dense" if i < k else "sparse" for i in range(hf["num_hidden_layers"])])
    if hf.pop("mla_use_nope", True) is not True:
        raise InputError("kimi_linear: mla_use_nope = false (rotary positions in MLA) is not reproduced.")
    return hf


def config_from_hf(hf: dict, **fields) -> KimiLinearConfig:
    """:class:`KimiLinearConfig` of a ``config.json`` dict (transformers' saved form or the hub's,
    :func:`_hub_form`), with ``fields`` over it; refuses what it does not reproduce (biases on the attention's
    projections among them)."""
    hf = {_ALIASES.get(key, key): value for key, value in _hub_form(hf).items()}
    read = {*_SAME_NAME, "pad_token_id", "attention_bias", "num_key_value_heads"}
    pretrained.refuse_unknown(hf, read, _INERT, "kimi_linear")
    if hf.get("num_key_value_heads", hf.get("num_attention_heads")) != hf.get("num_attention_heads"):
        raise InputError("kimi_linear: MLA's keys and values come per head; num_key_value_heads must be the heads'.")
    if hf.get("attention_bias"):
        raise InputError("kimi_linear: attention_bias (biases on MLA's projections) is not reproduced.")
    if (hf.get("pretraining_tp") or 1) != 1:
        raise InputError(f"kimi_linear: pretraining_tp = {hf['pretraining_tp']} is not reproduced.")
    values = {name: hf[name] for name in _SAME_NAME if name in hf}
    return KimiLinearConfig(**values, pad_id=hf.get("pad_token_id"), **fields)


def config_to_hf(config: KimiLinearConfig) -> dict:
    """``config.json``'s dict of ``config``, for ``KimiLinearForCausalLM``."""
    if (config.attention.kind, config.linear_attention.kind) != ("mla", "kda"):
        raise InputError("a Kimi Linear with other attention kinds is not a checkpoint transformers would run.")
    return {
        "model_type": "kimi_linear",
        "architectures": ["KimiLinearForCausalLM"],
        **{name: list(v) if isinstance(v := getattr(config, name), tuple) else v for name in _SAME_NAME},
        "pad_token_id": config.pad_id,
        "torch_dtype": "float32",
    }


def _kda_tensors(config: KimiLinearConfig, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    T, H = pretrained.Tensor, config.hidden_size
    h, dk = config.linear_num_heads, config.linear_head_dim
    found = [
        T.linear(f"{hf}{n}_proj.weight", ours + (f"{n}_proj", "kernel"), inputs=(H,), outputs=(h * dk,)) for n in "qkv"
    ]
    found += [pretrained.Tensor.depthwise(f"{hf}{n}_conv1d.weight", ours + (f"{n}_conv1d", "weight")) for n in "qkv"]
    for name, (first, second) in {"f": ("f_proj", "f_proj"), "g": ("g_proj", "g_proj")}.items():
        found.append(
            T.linear(f"{hf}{name}_a_proj.weight", ours + (first, "layers", "0", "kernel"), inputs=(H,), outputs=(dk,))
        )
        found.append(
            T.linear(
                f"{hf}{name}_b_proj.weight", ours + (second, "layers", "1", "kernel"), inputs=(dk,), outputs=(h * dk,)
            )
        )
    return found + [
        T(f"{hf}A_log", (ours + ("A_log",),), lambda a: (a.reshape(h),), lambda a: a.reshape(1, 1, h, 1)),
        T.same(f"{hf}dt_bias", ours + ("dt_bias",)),
        T.linear(f"{hf}b_proj.weight", ours + ("b_proj", "kernel"), inputs=(H,), outputs=(h,)),
        T.same(f"{hf}o_norm.weight", ours + ("o_norm", "scale")),
        T.linear(f"{hf}o_proj.weight", ours + ("o_proj", "kernel"), inputs=(h * dk,), outputs=(H,)),
    ]


def _mla_tensors(config: KimiLinearConfig, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    T, H, h = pretrained.Tensor, config.hidden_size, config.num_attention_heads
    qk, r = config.qk_nope_head_dim + config.qk_rope_head_dim, config.kv_lora_rank
    if config.q_lora_rank is None:
        query = [T.linear(f"{hf}q_proj.weight", ours + ("query", "kernel"), inputs=(H,), outputs=(h, qk))]
    else:
        q = config.q_lora_rank
        query = [
            T.linear(f"{hf}q_a_proj.weight", ours + ("q_a", "kernel"), inputs=(H,), outputs=(q,)),
            T.same(f"{hf}q_a_layernorm.weight", ours + ("q_a_norm", "weight")),
            T.linear(f"{hf}q_b_proj.weight", ours + ("query", "kernel"), inputs=(q,), outputs=(h, qk)),
        ]
    return query + [
        T.linear(
            f"{hf}kv_a_proj_with_mqa.weight",
            ours + ("kv_a", "kernel"),
            inputs=(H,),
            outputs=(r + config.qk_rope_head_dim,),
        ),
        T.same(f"{hf}kv_a_layernorm.weight", ours + ("kv_a_norm", "weight")),
        T.linear(
            f"{hf}kv_b_proj.weight",
            ours + ("kv_b", "kernel"),
            inputs=(r,),
            outputs=(h, config.qk_nope_head_dim + config.v_head_dim),
        ),
        T.linear(f"{hf}o_proj.weight", ours + ("out", "kernel"), inputs=(h, config.v_head_dim), outputs=(H,)),
    ]


def _experts_tensors(config: KimiLinearConfig, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    """``block_sparse_moe``: the router, its correction bias, each expert's ``w1`` (gate), ``w3`` (up) and ``w2``
    (down), and the shared experts."""
    T, H, e, inner = pretrained.Tensor, config.hidden_size, config.num_experts, config.moe_intermediate_size
    found = [
        T.linear(f"{hf}gate.weight", ours + ("router",), inputs=(H,), outputs=(e,)),
        T.same(f"{hf}gate.e_score_correction_bias", ours + ("bias",)),
    ]
    for i in range(e):
        for name, field, (fan_in, fan_out) in (
            ("w1", "gate", (H, inner)),
            ("w3", "up", (H, inner)),
            ("w2", "down", (inner, H)),
        ):
            found.append(
                T.linear(
                    f"{hf}experts.{i}.{name}.weight", ours + (field,), inputs=(fan_in,), outputs=(fan_out,), index=i
                )
            )
    if config.num_shared_experts:
        found += mlp_tensors(f"{hf}shared_experts.", ours + ("shared",), H, config.num_shared_experts * inner)
    return found


def tensors(config: KimiLinearConfig) -> list[pretrained.Tensor]:
    """Every tensor of a Kimi Linear checkpoint and its place in the model."""
    H = config.hidden_size

    def mixer(layer, hf, ours):
        if config.layer_types[layer] == "full_attention":
            return _mla_tensors(config, f"{hf}self_attn.", ours)
        return _kda_tensors(config, f"{hf}self_attn.", ours + ("layer",))

    def mlp(layer, hf, ours):
        if config.mlp_layer_types[layer] == "sparse":
            return _experts_tensors(config, f"{hf}block_sparse_moe.", ours)
        return mlp_tensors(f"{hf}block_sparse_moe.", ours, H, config.intermediate_size)

    return decoder_tensors(config.lm, mixer, mlp=mlp)


pretrained.register_family(
    pretrained.Family(
        "kimi_linear", config_class=KimiLinearConfig, config=config_from_hf, hf_config=config_to_hf, tensors=tensors
    )
)
