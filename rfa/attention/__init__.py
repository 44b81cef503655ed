"""Exact softmax attention, kernelized attention (every mode, one state), its quadratic reference, Fourier integral
attention, the Flax adapter."""

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
from rfa.attention.fourier_integral import fourier_integral_attention
from rfa.attention.kernelized import kernelized_attention, sequence_parallel_attention
from rfa.attention.naive import naive_kernelized_attention
from rfa.attention.state import RecurrentState, init_state

__all__ = [
    "FittedParams",
    "KernelizedAttention",
    "RandomProjection",
    "RecurrentState",
    "calibrating",
    "fit_feature_params",
    "fourier_integral_attention",
    "init_state",
    "kernelized_attention",
    "make_attention_fn",
    "naive_kernelized_attention",
    "renormalize",
    "sequence_parallel_attention",
    "softmax_attention",
    "unnormalized_softmax_attention",
]
