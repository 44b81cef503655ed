"""The registered estimators, one module per family: each defines its feature maps and their theory
and registers them (``rfa.register_estimator``). A new estimator is a new module imported here,
or a user's module registering its own ``rfa.Estimator``.
"""

from rfa.random_features.estimators import dense_exponential, deterministic, gaussian, hybrid, learned, softmax

__all__ = ["dense_exponential", "deterministic", "gaussian", "hybrid", "learned", "softmax"]
