"""Qwen3-Next (Qwen Team, "Qwen3-Next", 2025; Hugging Face's ``Qwen3NextForCausalLM``, ``model_type``
``qwen3_next``): Qwen3.5's decoder (:mod:`rfa.models.qwen3_5`: Gated DeltaNet layers three to one with gated
attention, zero-centered norms) with a mixture of experts at its sparse layers.

- **The sparse blocks** (:class:`~rfa.layers.moe.MixtureOfExperts`): a softmax router's top ``num_experts_per_tok``
  experts, renormalized where ``norm_topk_prob``, plus a shared expert behind a sigmoid gate
  (``shared_expert_gate``); a layer is sparse where ``(layer + 1) % decoder_sparse_step == 0`` and it is not in
  ``mlp_only_layers``.
- **The linear layers' projections** are fused per key-head group: ``in_proj_qkvz`` holds, for each group of value
  heads that share a query/key head, its query's, key's, values' and output gates' rows in turn, and ``in_proj_ba``
  its betas' and decays' (transformers' ``fix_query_key_value_ordering``).
"""

from __future__ import annotations

import dataclasses

from rfa.layers.kinds import check_bool, check_int
from rfa.layers.moe import ExpertsOptions
from rfa.models import pretrained
from rfa.models.causal_lm import CausalLMConfig
from rfa.models.qwen3_5 import Qwen3_5Config, read_hf, write_hf
from rfa.models.qwen3_5 import tensors as qwen3_5_tensors


@dataclasses.dataclass(frozen=True, kw_only=True)
class Qwen3NextConfig(Qwen3_5Config):
    """Qwen3-Next's hyperparameters (``Qwen3NextConfig``): :class:`~rfa.models.qwen3_5.Qwen3_5Config`'s, and its
    experts'.

    Attributes:
      num_experts: the routed experts; ``num_experts_per_tok``: how many each token takes.
      moe_intermediate_size: a routed expert's hidden width; ``shared_expert_intermediate_size``: the shared one's.
      norm_topk_prob: the top experts' probabilities renormalized.
      decoder_sparse_step: every this many layers is sparse, ``mlp_only_layers`` aside.

    Example:
      >>> config = Qwen3NextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
      ...                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_experts=4,
      ...                          num_experts_per_tok=2, mlp_only_layers=(0,))
      >>> config.lm.sparse_layers
      (1, 2, 3)
    """

    num_experts: int = 512
    num_experts_per_tok: int = 10
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    norm_topk_prob: bool = True
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple[int, ...] = ()

    def __post_init__(self):
        for name in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "decoder_sparse_step"):
            check_int(self, name)
        check_int(self, "shared_expert_intermediate_size", 0)
        check_bool(self, "norm_topk_prob")
        object.__setattr__(self, "mlp_only_layers", tuple(self.mlp_only_layers))
        super().__post_init__()

    @property
    def lm(self) -> CausalLMConfig:
        """Qwen3.5's decoder with the experts at the sparse layers."""
        shared = self.shared_expert_intermediate_size or None
        experts = ExpertsOptions(
            num_experts=self.num_experts,
            top_k=self.num_experts_per_tok,
            expert_dim=self.moe_intermediate_size,
            norm_topk_prob=self.norm_topk_prob,
            shared_dim=shared,
            shared_gate=shared is not None,
        )
        sparse = tuple(
            i
            for i in range(self.num_hidden_layers)
            if i not in self.mlp_only_layers and (i + 1) % self.decoder_sparse_step == 0
        )
        return dataclasses.replace(super().lm, experts=experts, sparse_layers=sparse)


# Hugging Face's layout (rfa.models.pretrained).

ROUTER_TRAINING = frozenset({"output_router_logits", "router_aux_loss_coef"})
"""A Qwen mixture's ``config.json`` fields of training only (the router's logits and auxiliary loss): inert here."""


def config_from_hf(hf: dict, **fields) -> Qwen3NextConfig:
    """:class:`Qwen3NextConfig` of a ``config.json`` dict, with ``fields`` over it; refuses what it does not
    reproduce (the router's auxiliary loss and logits are training's)."""
    return read_hf(hf, Qwen3NextConfig, "qwen3_next", inert=ROUTER_TRAINING, **fields)


def config_to_hf(config: Qwen3NextConfig) -> dict:
    """``config.json``'s dict of ``config``, for ``Qwen3NextForCausalLM``."""
    return write_hf(config, "qwen3_next", "Qwen3NextForCausalLM")


def linear_attention_tensors(config: Qwen3NextConfig, hf: str, ours: tuple) -> list[pretrained.Tensor]:
    """A Gated DeltaNet layer's fused projections in Qwen3-Next's layout: ``in_proj_qkvz`` and ``in_proj_ba``, each
    group's parts in turn (a group: the value heads that share one query/key head)."""
    T, H, groups = pretrained.Tensor, config.hidden_size, config.linear_num_key_heads
    per = config.linear_num_value_heads // groups  # value heads per group
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    qkvz = tuple(ours + (name, "kernel") for name in ("q_proj", "k_proj", "v_proj", "g_proj"))
    ba = tuple(ours + (name, "kernel") for name in ("b_proj", "a_proj"))
    return [
        T.grouped_linear(f"{hf}in_proj_qkvz.weight", qkvz, groups=groups, sizes=(dk, dk, per * dv, per * dv), fan_in=H),
        T.grouped_linear(f"{hf}in_proj_ba.weight", ba, groups=groups, sizes=(per, per), fan_in=H),
    ]


def tensors(config: Qwen3NextConfig) -> list[pretrained.Tensor]:
    """Every tensor of a Qwen3-Next checkpoint and its place in the model."""
    return qwen3_5_tensors(config, projections=linear_attention_tensors)


pretrained.register_family(
    pretrained.Family(
        "qwen3_next", config_class=Qwen3NextConfig, config=config_from_hf, hf_config=config_to_hf, tensors=tensors
    )
)
