"""Qwen3.5's mixture-of-experts text decoder (Qwen Team, "Qwen3.5", 2026; Hugging Face's ``Qwen3_5MoeForCausalLM``,
``model_type`` ``qwen3_5_moe_text``): Qwen3.5's layers (:mod:`rfa.models.qwen3_5`: Gated DeltaNet three to one with
gated attention, its unfused ``in_proj_qkv``, zero-centered norms) with a sparse block at every layer, Qwen3-Next's
(:mod:`rfa.models.qwen3_next`): a softmax router's top ``num_experts_per_tok`` experts, always renormalized, and a
shared expert behind a sigmoid gate.

Its ``config.json`` has no dense MLP (no ``intermediate_size``, ``decoder_sparse_step``, ``mlp_only_layers`` or
``norm_topk_prob``): every layer is sparse. The experts are read as transformers writes them, one tensor per expert
(``mlp.experts.{e}.gate_proj.weight``, ...).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rfa._validation import InputError
from rfa.models import pretrained
from rfa.models.qwen3_5 import read_hf, tensors, write_hf
from rfa.models.qwen3_next import ROUTER_TRAINING, Qwen3NextConfig


@dataclasses.dataclass(frozen=True, kw_only=True)
class Qwen3_5MoeConfig(Qwen3NextConfig):  # noqa: N801 (Hugging Face's name)
    """Qwen3.5 MoE's hyperparameters (``Qwen3_5MoeTextConfig``): :class:`~rfa.models.qwen3_next.Qwen3NextConfig`'s
    with every layer sparse and the top experts renormalized; ``intermediate_size`` (the dense MLP's, which it has
    none of) is the experts'.

    Example:
      >>> config = Qwen3_5MoeConfig(vocab_size=64, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
      ...                           num_key_value_heads=2, head_dim=16, num_experts=4, num_experts_per_tok=2)
      >>> config.lm.sparse_layers, config.lm.experts.norm_topk_prob
      ((0, 1, 2, 3), True)
    """

    intermediate_size: int | None = None
    num_experts: int = 256
    num_experts_per_tok: int = 8

    HF_ABSENT: ClassVar[frozenset[str]] = frozenset(
        {"intermediate_size", "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"}
    )

    def __post_init__(self):
        if self.intermediate_size is None:
            object.__setattr__(self, "intermediate_size", self.moe_intermediate_size)
        if (self.norm_topk_prob, self.decoder_sparse_step, self.mlp_only_layers) != (True, 1, ()):
            raise InputError(
                "Qwen3.5 MoE renormalizes its top experts at every layer: norm_topk_prob, decoder_sparse_step and "
                "mlp_only_layers are Qwen3-Next's (rfa.models.Qwen3NextConfig)."
            )
        super().__post_init__()


# Hugging Face's layout (rfa.models.pretrained).


def config_from_hf(hf: dict, **fields) -> Qwen3_5MoeConfig:
    """:class:`Qwen3_5MoeConfig` of a ``config.json`` dict, with ``fields`` over it; refuses what it does not
    reproduce (the router's auxiliary loss and logits are training's)."""
    return read_hf(hf, Qwen3_5MoeConfig, "qwen3_5_moe_text", inert=ROUTER_TRAINING, **fields)


def config_to_hf(config: Qwen3_5MoeConfig) -> dict:
    """``config.json``'s dict of ``config``, for ``Qwen3_5MoeForCausalLM``."""
    return write_hf(config, "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM")


pretrained.register_family(
    pretrained.Family(
        "qwen3_5_moe_text",
        config_class=Qwen3_5MoeConfig,
        config=config_from_hf,
        hf_config=config_to_hf,
        tensors=tensors,
    )
)
