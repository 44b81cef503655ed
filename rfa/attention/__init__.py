"""Exact softmax attention, kernelized attention (every mode, one state), its quadratic reference, the delta rule,
sliding-window attention, Fourier integral attention: pure functions of arrays (the Flax layers and their variables
are :mod:`rfa.layers`)."""

from rfa._validation import moved_names
from rfa.attention.calibration import fit_feature_params
from rfa.attention.common import renormalize
from rfa.attention.delta_rule import delta_rule_attention, naive_delta_rule_attention
from rfa.attention.exact import softmax_attention, unnormalized_softmax_attention
from rfa.attention.fourier_integral import fourier_integral_attention
from rfa.attention.kernelized import kernelized_attention, sequence_parallel_attention
from rfa.attention.linformer import linformer_attention
from rfa.attention.naive import naive_kernelized_attention
from rfa.attention.sliding_window import sliding_window_attention
from rfa.attention.state import RecurrentState, init_state

__all__ = [
    "RecurrentState",
    "delta_rule_attention",
    "fit_feature_params",
    "fourier_integral_attention",
    "init_state",
    "kernelized_attention",
    "linformer_attention",
    "naive_delta_rule_attention",
    "naive_kernelized_attention",
    "renormalize",
    "sequence_parallel_attention",
    "sliding_window_attention",
    "softmax_attention",
    "unnormalized_softmax_attention",
]

__getattr__ = (
    moved_names(  # rfa 0.2's names of the Flax adapter, in rfa.layers since 0.3 (this package imports no flax)
        __name__,
        {
            "FittedParams": "rfa.layers.feature_variables",
            "KernelizedAttention": "rfa.layers.attention_fn",
            "RandomProjection": "rfa.layers.feature_variables",
            "calibrating": "rfa.layers.feature_variables",
            "make_attention_fn": "rfa.layers.attention_fn",
        },
    )
)
