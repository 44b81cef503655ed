"""``rfa.nnx``: rfa's Flax NNX layers, gathered from :mod:`rfa.layers` (where each is defined).

``MultiHeadAttention`` is ``flax.nnx.MultiHeadAttention`` with kernelized attention (:mod:`rfa.layers.nnx_attention`);
``DeltaNet``, ``GatedDeltaNet``, ``KimiDeltaAttention``, ``GatedLinearAttention`` and ``SlidingWindowAttention`` are
causal layers whose decode cache is a state of fixed size (:mod:`rfa.layers.state_layers`); :func:`redraw` redraws
every random projection of a model, :func:`save` and :func:`restore` checkpoint a model with its projections, and
:func:`load_fla_state_dict` sets the delta-rule layers from flash-linear-attention's weights, and
:func:`from_fla_config` and :func:`from_fla_layer` build them from its model config or layer arguments, and
:func:`cache_from_fla` and :func:`cache_to_fla` carry a decode cache across.
"""

from rfa.layers.checkpoints import restore, save
from rfa.layers.feature_variables import redraw
from rfa.layers.fla_cache import cache_from_fla, cache_to_fla
from rfa.layers.fla_config import from_fla_config, from_fla_layer
from rfa.layers.fla_weights import load_fla_state_dict
from rfa.layers.nnx_attention import MultiHeadAttention
from rfa.layers.state_layers import (
    DeltaNet,
    GatedDeltaNet,
    GatedLinearAttention,
    KimiDeltaAttention,
    SlidingWindowAttention,
)

__all__ = [
    "DeltaNet",
    "GatedDeltaNet",
    "GatedLinearAttention",
    "KimiDeltaAttention",
    "MultiHeadAttention",
    "SlidingWindowAttention",
    "cache_from_fla",
    "cache_to_fla",
    "from_fla_config",
    "from_fla_layer",
    "load_fla_state_dict",
    "redraw",
    "restore",
    "save",
]


def __dir__() -> list[str]:
    """The public names only (PEP 562): ``dir()`` and tab completion do not offer this module's imports."""
    return sorted(__all__)
