"""Exact softmax attention, kernelized attention (bidirectional, causal, recurrent) and the Flax adapter."""

from rfa.attention.common import renormalize
from rfa.attention.exact import softmax_attention, unnormalized_softmax_attention
from rfa.attention.flax_adapter import (
    KernelizedAttention,
    RandomProjection,
    make_attention_fn,
)
from rfa.attention.kernelized import kernelized_attention
from rfa.attention.recurrent import RecurrentState, attend, init_state, prefill, step

__all__ = [
    "KernelizedAttention",
    "RandomProjection",
    "RecurrentState",
    "attend",
    "init_state",
    "kernelized_attention",
    "make_attention_fn",
    "prefill",
    "renormalize",
    "softmax_attention",
    "step",
    "unnormalized_softmax_attention",
]
