"""rfa: random-feature (kernelized) attention in JAX.

Functional primitives (projections, feature maps, kernel estimators, closed-form theory, exact and
kernelized attention) that work under ``jit``, ``vmap`` and ``grad``. See the documentation (``docs/``, ``make docs``).

``import rfa`` imports nothing yet: each name below, and each subpackage, is imported when first used
(``rfa.kernelized_attention`` imports the core, jax, flax and numpy; ``rfa.train.weight_decay_mask`` after a plain
``import rfa`` imports ``rfa.train``), as numpy and scipy do with their subpackages. So the ``rfa`` command answers
``rfa --help`` and re-executes itself with huge pages (``rfa.experiments.common.host_memory``) before it has paid for
JAX, and the core never imports the extras that ``rfa.data``, ``rfa.tasks`` and ``rfa.train`` need (``pip install
'rfa[train]'``).
"""

_CORE_SUBPACKAGES = ("attention", "checks", "layers", "linen", "nnx")
"""The core's subpackages, imported on first use like every name below."""

_EXPORTS = {  # name: the module that defines it
    "InputError": "rfa._validation",
    "InputTypeError": "rfa._validation",
    "kernelized_attention": "rfa.attention",
    "renormalize": "rfa.attention",
    "softmax_attention": "rfa.attention",
    "unnormalized_softmax_attention": "rfa.attention",
    "make_attention_fn": "rfa.layers",
    **dict.fromkeys(
        (
            "Estimator",
            "FeatureMap",
            "Param",
            "estimate_gaussian_kernel",
            "estimate_softmax_kernel",
            "estimator",
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
        ),
        "rfa.random_features",
    ),
}
"""The top-level names, each read from its module on first use."""

__version__ = "0.3.0.dev0"

_SUBPACKAGES = {"models": None, "tasks": "data", "data": "data", "train": "train"}
"""The subpackages imported on first use, each with the extra it needs (None: the core)."""


def __getattr__(name: str):
    """The names of ``__all__`` and the subpackages, imported on first use (a missing extra is named)."""
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _CORE_SUBPACKAGES:
        return importlib.import_module(f"rfa.{name}")
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
    return sorted({*globals(), *__all__, *_SUBPACKAGES})


__all__ = sorted([*_EXPORTS, *_CORE_SUBPACKAGES])
