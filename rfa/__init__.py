"""rfa: random-feature (kernelized) attention in JAX.

Functional primitives (projections, feature maps, kernel estimators, closed-form theory, exact and
kernelized attention) that work under ``jit``, ``vmap`` and ``grad``. See the documentation (``docs/``, ``make docs``).
"""

from rfa import attention, checks, layers, linen, nnx
from rfa._validation import InputError, InputTypeError
from rfa.attention import (
    kernelized_attention,
    renormalize,
    softmax_attention,
    unnormalized_softmax_attention,
)
from rfa.layers import make_attention_fn
from rfa.random_features import (
    Estimator,
    FeatureMap,
    Param,
    estimate_gaussian_kernel,
    estimate_softmax_kernel,
    estimator,
    feature_map,
    gaussian_kernel,
    optimal_gerf_parameter,
    register_estimator,
    register_feature_map,
    registered_estimators,
    registered_feature_maps,
    sample_phases,
    sample_projection,
    softmax_kernel,
    theory,
)

__version__ = "0.3.0.dev0"

__all__ = [
    "Estimator",
    "FeatureMap",
    "InputError",
    "InputTypeError",
    "Param",
    "attention",
    "checks",
    "estimate_gaussian_kernel",
    "estimate_softmax_kernel",
    "estimator",
    "feature_map",
    "gaussian_kernel",
    "kernelized_attention",
    "layers",
    "linen",
    "make_attention_fn",
    "nnx",
    "optimal_gerf_parameter",
    "register_estimator",
    "register_feature_map",
    "registered_estimators",
    "registered_feature_maps",
    "renormalize",
    "sample_phases",
    "sample_projection",
    "softmax_attention",
    "softmax_kernel",
    "theory",
    "unnormalized_softmax_attention",
]
