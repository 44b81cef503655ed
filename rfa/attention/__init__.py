"""Exact softmax attention, kernelized attention (bidirectional, causal, recurrent) and the Flax adapter."""

from rfa.attention.calibration import fit_feature_params
from rfa.attention.common import renormalize
from rfa.attention.exact import softmax_attention, unnormalized_softmax_attention
from rfa.attention.flax_adapter import (
    FittedParams,
    KernelizedAttention,
    RandomProjection,
    calibrating,
    make_attention_fn,
)
from rfa.attention.kernelized import kernelized_attention
from rfa.attention.recurrent import RecurrentState, attend, init_state, prefill, step

__all__ = [
    "FittedParams",
    "KernelizedAttention",
    "RandomProjection",
    "RecurrentState",
    "attend",
    "calibrating",
    "fit_feature_params",
    "init_state",
    "kernelized_attention",
    "make_attention_fn",
    "prefill",
    "renormalize",
    "softmax_attention",
    "step",
    "unnormalized_softmax_attention",
]
