"""``rfa.linen``: rfa's Flax Linen layers, gathered from :mod:`rfa.layers` (where each is defined).

``MultiHeadDotProductAttention`` is ``flax.linen.MultiHeadDotProductAttention`` with kernelized attention
(:mod:`rfa.layers.linen_attention`); ``DeltaNet``, ``GatedDeltaNet``, ``KimiDeltaAttention``,
``GatedLinearAttention`` and ``SlidingWindowAttention`` are the causal layers of :mod:`rfa.nnx` whose cache is a
state, through Flax's bridge (:mod:`rfa.layers.linen_state_layers`). ``RANDOM_FEATURES`` names the collection (and
the rng) of the layers' random projections.
"""

from rfa.layers.linen_attention import MultiHeadDotProductAttention
from rfa.layers.linen_state_layers import (
    RANDOM_FEATURES,
    DeltaNet,
    GatedDeltaNet,
    GatedLinearAttention,
    KimiDeltaAttention,
    SlidingWindowAttention,
)

__all__ = [
    "RANDOM_FEATURES",
    "DeltaNet",
    "GatedDeltaNet",
    "GatedLinearAttention",
    "KimiDeltaAttention",
    "MultiHeadDotProductAttention",
    "SlidingWindowAttention",
]


def __dir__() -> list[str]:
    """The public names only (PEP 562): ``dir()`` and tab completion do not offer this module's imports."""
    return sorted(__all__)
