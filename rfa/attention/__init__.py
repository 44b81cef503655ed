"""Exact softmax attention, kernelized attention (bidirectional, causal, recurrent) and the Flax adapter."""

from rfa.attention.common import renormalize
from rfa.attention.exact import softmax_attention, unnormalized_softmax_attention
from rfa.attention.flax_adapter import (
    KernelizedAttention,
    RandomProjection,
    make_attention_fn,
)
from rfa.attention.kernelized import kernelized_attention
from rfa.attention.recurrent import RecurrentState, init_state, step

__all__ = [
    "KernelizedAttention",
    "RandomProjection",
    "RecurrentState",
    "init_state",
    "kernelized_attention",
    "make_attention_fn",
    "renormalize",
    "softmax_attention",
    "step",
    "unnormalized_softmax_attention",
]
