"""Random projections, feature maps, kernel estimators and their closed-form theory."""

from rfa.random_features import estimators, theory
from rfa.random_features.closed_forms import optimal_gerf_parameter
from rfa.random_features.feature_maps import (
    Estimator,
    FeatureMap,
    Param,
    estimator,
    feature_map,
    register_estimator,
    register_feature_map,
    registered_estimators,
    registered_feature_maps,
)
from rfa.random_features.kernels import (
    estimate_gaussian_kernel,
    estimate_softmax_kernel,
    gaussian_kernel,
    softmax_kernel,
)
from rfa.random_features.projections import sample_phases, sample_projection

__all__ = [
    "Estimator",
    "FeatureMap",
    "Param",
    "estimate_gaussian_kernel",
    "estimate_softmax_kernel",
    "estimator",
    "estimators",
    "feature_map",
    "gaussian_kernel",
    "optimal_gerf_parameter",
    "register_estimator",
    "register_feature_map",
    "registered_estimators",
    "registered_feature_maps",
    "sample_phases",
    "sample_projection",
    "softmax_kernel",
    "theory",
]
