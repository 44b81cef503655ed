"""Flax NNX Transformers (text and vision) with the attention of each site chosen by config (exact or kernelized)."""

from rfa.models import decoding
from rfa.models.attention import AttentionInputs, AttentionSite
from rfa.models.config import AttentionConfig, EncoderConfig, SiteWidths, TransformerConfig
from rfa.models.delta_rule_options import DeltaRuleOptions
from rfa.models.forecaster import ForecastConfig, Forecaster
from rfa.models.presets import PRESETS, preset
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
    "Decoder",
    "DeltaRuleOptions",
    "Encoder",
    "EncoderConfig",
    "EncoderDecoder",
    "ForecastConfig",
    "Forecaster",
    "MultiHeadAttention",
    "SiteWidths",
    "SwinConfig",
    "SwinStage",
    "SwinTransformer",
    "TransformerConfig",
    "VisionConfig",
    "VisionTransformer",
    "decoding",
    "preset",
    "redraw_projections",
]
