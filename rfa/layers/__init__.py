"""rfa's Flax layers, each on its own arguments (as flash-linear-attention's ``layers/``): multi-head attention (exact
and kernelized, grouped-query, gated, rotary), the delta rule's layers (DeltaNet, Gated DeltaNet, Kimi Delta
Attention), gated linear attention, sliding-window attention and Linformer; their parts (the short convolution, the
random-feature variables and their redraw, the decode caches; the RMSNorm, gated MLP, mixture of experts and latent
attention of pretrained decoders); the Linen faces (:mod:`rfa.linen`), layer checkpoints and flash-linear-attention's
weights. :mod:`rfa.nnx` and :mod:`rfa.linen` gather the public layers.

Every attention kind is one entry of the registry :mod:`rfa.layers.kinds`, registered in the module that defines its
layer (importing this package registers rfa's own). Nothing here imports :mod:`rfa.models` or anything above it.
"""

from rfa.layers.attention_fn import KernelizedAttention, make_attention_fn
from rfa.layers.delta_rule.options import DeltaRuleOptions
from rfa.layers.delta_rule.site import DeltaRuleCore
from rfa.layers.feature_variables import FittedParams, MapOptions, RandomProjection, calibrating, redraw
from rfa.layers.gated_mlp import GatedMLP
from rfa.layers.kernelized import KernelizedCore, KernelizedOptions
from rfa.layers.kinds import (
    AttentionKind,
    KindOptions,
    SiteWidths,
    attention_kind,
    register_attention_kind,
    register_variant,
    registered_attention_kinds,
    registered_variants,
    variant,
)
from rfa.layers.linformer import LinformerCore, LinformerOptions
from rfa.layers.mla import LatentAttention, MLAOptions
from rfa.layers.moe import CorrectionBias, ExpertsOptions, MixtureOfExperts
from rfa.layers.multi_head import AttentionSite, HeadsOptions, projected
from rfa.layers.norms import RMSNorm
from rfa.layers.sliding_window import SlidingWindowCore, SlidingWindowOptions
from rfa.layers.softmax import FourierCore, FourierOptions, SoftmaxCore, SoftmaxOptions

__all__ = [
    "AttentionKind",
    "AttentionSite",
    "CorrectionBias",
    "DeltaRuleCore",
    "DeltaRuleOptions",
    "ExpertsOptions",
    "FittedParams",
    "FourierCore",
    "FourierOptions",
    "GatedMLP",
    "HeadsOptions",
    "KernelizedAttention",
    "KernelizedCore",
    "KernelizedOptions",
    "KindOptions",
    "LatentAttention",
    "LinformerCore",
    "LinformerOptions",
    "MLAOptions",
    "MapOptions",
    "MixtureOfExperts",
    "RMSNorm",
    "RandomProjection",
    "SiteWidths",
    "SlidingWindowCore",
    "SlidingWindowOptions",
    "SoftmaxCore",
    "SoftmaxOptions",
    "attention_kind",
    "calibrating",
    "make_attention_fn",
    "projected",
    "redraw",
    "register_attention_kind",
    "register_variant",
    "registered_attention_kinds",
    "registered_variants",
    "variant",
]
