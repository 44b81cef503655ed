"""Exact softmax attention, kernelized attention (every mode, one state), its quadratic reference, the delta rule,
sliding-window attention, Fourier integral attention, the Flax adapter."""

from rfa.attention.calibration import fit_feature_params
from rfa.attention.common import renormalize
from rfa.attention.delta_rule import delta_rule_attention, naive_delta_rule_attention
from rfa.attention.exact import softmax_attention, unnormalized_softmax_attention
from rfa.attention.flax_adapter import KernelizedAttention, make_attention_fn
from rfa.attention.fourier_integral import fourier_integral_attention
from rfa.attention.kernelized import kernelized_attention, sequence_parallel_attention
from rfa.attention.linformer import linformer_attention
from rfa.attention.map_variables import FittedParams, RandomProjection, calibrating
from rfa.attention.naive import naive_kernelized_attention
from rfa.attention.sliding_window import sliding_window_attention
from rfa.attention.state import RecurrentState, init_state

__all__ = [
    "FittedParams",
    "KernelizedAttention",
    "RandomProjection",
    "RecurrentState",
    "calibrating",
    "delta_rule_attention",
    "fit_feature_params",
    "fourier_integral_attention",
    "init_state",
    "kernelized_attention",
    "linformer_attention",
    "make_attention_fn",
    "naive_delta_rule_attention",
    "naive_kernelized_attention",
    "renormalize",
    "sequence_parallel_attention",
    "sliding_window_attention",
    "softmax_attention",
    "unnormalized_softmax_attention",
]
