"""Flax NNX Transformers (text and vision) composed of rfa's layers, the attention of each site chosen by config: a
:class:`Site`, a registered kind (:mod:`rfa.layers.kinds`) and its options."""

from rfa.layers.delta_rule.options import DeltaRuleOptions
from rfa.layers.kinds import SiteWidths
from rfa.layers.multi_head import AttentionInputs, AttentionSite
from rfa.models import decoding, kimi_linear, pretrained, qwen3, qwen3_5, qwen3_5_moe, qwen3_next, sharding
from rfa.models.causal_lm import CausalLM, CausalLMConfig
from rfa.models.config import EncoderConfig, TransformerConfig
from rfa.models.forecaster import ForecastConfig, Forecaster
from rfa.models.kimi_linear import KimiLinearConfig
from rfa.models.presets import PRESETS, preset
from rfa.models.pretrained import from_pretrained, save_pretrained
from rfa.models.qwen3 import Qwen3Config
from rfa.models.qwen3_5 import Qwen3_5Config
from rfa.models.qwen3_5_moe import Qwen3_5MoeConfig
from rfa.models.qwen3_next import Qwen3NextConfig
from rfa.models.site import AttentionConfig, Site
from rfa.models.swin import SwinConfig, SwinStage, SwinTransformer
from rfa.models.transformer import Decoder, Encoder, EncoderDecoder, redraw_projections
from rfa.models.vision import VisionConfig, VisionTransformer

QueriesKeys = AttentionInputs  # the earlier name (it sowed (q, k, key_mask); now (q, k, v, key_mask))

MultiHeadAttention = (
    AttentionSite  # its name before 0.3 (rfa.nnx.MultiHeadAttention is the Flax layer), for one release
)

__all__ = [
    "PRESETS",
    "AttentionConfig",
    "AttentionInputs",
    "AttentionSite",
    "CausalLM",
    "CausalLMConfig",
    "Decoder",
    "DeltaRuleOptions",
    "Encoder",
    "EncoderConfig",
    "EncoderDecoder",
    "ForecastConfig",
    "Forecaster",
    "KimiLinearConfig",
    "MultiHeadAttention",
    "Qwen3Config",
    "Qwen3NextConfig",
    "Qwen3_5Config",
    "Qwen3_5MoeConfig",
    "Site",
    "SiteWidths",
    "SwinConfig",
    "SwinStage",
    "SwinTransformer",
    "TransformerConfig",
    "VisionConfig",
    "VisionTransformer",
    "decoding",
    "from_pretrained",
    "kimi_linear",
    "preset",
    "pretrained",
    "qwen3",
    "qwen3_5",
    "qwen3_5_moe",
    "qwen3_next",
    "redraw_projections",
    "save_pretrained",
    "sharding",
]
