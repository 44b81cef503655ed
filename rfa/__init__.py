"""rfa: random-feature (kernelized) attention in JAX.

Functional primitives (projections, feature maps, kernel estimators, closed-form theory, exact and
kernelized attention) that work under ``jit``, ``vmap`` and ``grad``. See the documentation (``docs/``, ``make docs``).

``import rfa`` imports the core (jax, flax, numpy). The subpackages built on it, ``rfa.models``, ``rfa.tasks``,
``rfa.data`` and ``rfa.train``, are imported when first used (``rfa.train.weight_decay_mask`` after a plain ``import
rfa``), as numpy and scipy do with theirs, so the core never imports the extras that ``rfa.data``, ``rfa.tasks`` and
``rfa.train`` need (``pip install 'rfa[train]'``).
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

_SUBPACKAGES = {"models": None, "tasks": "data", "data": "data", "train": "train"}
"""The subpackages imported on first use, each with the extra it needs (None: the core)."""


def __getattr__(name: str):
    """``rfa.models``, ``rfa.tasks``, ``rfa.data``, ``rfa.train``: imported on first use (a missing extra is named)."""
    import importlib

    if name not in _SUBPACKAGES:
        raise AttributeError(f"module 'rfa' has no attribute {name!r}")
    try:
        return importlib.import_module(f"rfa.{name}")
    except ModuleNotFoundError as error:
        if _SUBPACKAGES[name] is None or (error.name or "").split(".")[0] == "rfa":
            raise
        extra = _SUBPACKAGES[name]
        message = f"rfa.{name} needs rfa's {extra} extra ({error.name} is missing): pip install 'rfa[{extra}]'"
        raise ModuleNotFoundError(message, name=error.name) from error


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES})


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
