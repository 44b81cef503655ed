"""Which estimator wins: for |x| = |y| = r and each angle, the softmax-kernel estimator with the lowest MSE.

Every registered estimator with a closed form at a single pair (the DERF family is fitted to a
distribution: see derf_variance), iid and simplex rows, m = d = 16. No paper has this map.

Run:
  rfa sweep --config which_estimator_wins --workdir workdir/which_estimator_wins
  rfa sweep --config which_estimator_wins:quick --workdir /tmp/wins
"""

from rfa.configs.common import apply_variant, sweep_config


def get_config(arg=None):
    config = sweep_config("kernel_mse")
    config.name = "which_estimator_wins"
    config.estimators = ("trig", "positive", "hyperbolic", "oprf", "hybrid")
    config.projections = ("iid", "simplex")  # contenders: the (estimator, projection) pairs with a closed form
    config.num_features = (16,)  # m
    config.dim = 16  # d
    config.geometry.norms = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)  # r
    config.geometry.angles = tuple(float(a) for a in range(0, 181, 15))  # degrees
    config.repetitions = 5000  # Monte Carlo repetitions per cell
    config.max_relative_error = 0.1  # Monte Carlo only where it is meaningful
    quick = {"geometry.norms": (0.5, 1.5), "geometry.angles": (0.0, 90.0, 150.0), "repetitions": 1000}
    return apply_variant(config, arg, {"full": {}, "quick": quick})
